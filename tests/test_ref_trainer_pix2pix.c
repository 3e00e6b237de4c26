/* One step of the pix2pix trainer plugin (plugins/trainers/pix2pix, model unet_patchgan)
 * against PyTorch's (tests/ref/gen_trainer_pix2pix.py), through the core's trainer program as
 * `ganfw CONFIG` runs it: from the same weights and images, with data.pair's downscaled input
 * (which the generator rebuilds bit for bit), the reported scalars (loss_d, loss_g, loss_g_gan,
 * loss_l1), every parameter gradient of both nets (D's of the D step, G's of the G step, which
 * runs through the updated D), the weights and BatchNorm statistics after the step (G's
 * BatchNorm moves once, D's three times: real pair, fake pair, the G step's fake pair).
 * lambda_l1 5 is not the plugin's default, so the config's value must reach it. The gradients
 * are read back from SGD's momentum buffers, which hold the gradient itself after the first
 * step (PyTorch's torch.clone(d_p)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "data/pair.h" // defines: ganfw_pair_make
#include "nn/net.h"
#include "runtime/tensor.h"
#include "ref_trainer.h"
#include "testutil.h"
#include "train/program.h"
#include "train/session.h"
#include "train/train_program.h"

/* The nets, pair and trainer of gen_trainer_pix2pix.py: 1x16x16 images, batch 4. */
static const char p2p_config[] =
    "seed: 1\n"
    "device: {type: cpu, threads: 2}\n"
    "data: {pair: {kind: downscaled, factor: 2}}\n"
    "model: {plugin: unet_patchgan, channels: 4, depth: 3, d_channels: 4, d_layers: 2}\n"
    "trainer: {plugin: pix2pix, lambda_l1: 5}\n"
    "optim: {plugin: sgd, lr: 0.01, momentum: 0.9}\n"
    "train: {batch_size: 4, max_steps: 1}\n";

/* The session's nets and optimizers by role: the generator and the discriminator, each
 * trained by its own optimizer. */
static void check_roles(ganfw_session *s) {
  CU_ASSERT_EQUAL_FATAL(s->n_nets, 2);
  CU_ASSERT_STRING_EQUAL_FATAL(s->nets[0].role, "generator");
  CU_ASSERT_STRING_EQUAL_FATAL(s->nets[1].role, "discriminator");
  CU_ASSERT_EQUAL_FATAL(s->n_optim, 2);
  for (int32_t r = 0; r < 2; r++) {
    CU_ASSERT(!s->nets[r].frozen);
    CU_ASSERT_FATAL(s->nets[r].optim >= 0 && s->nets[r].optim < s->n_optim);
    CU_ASSERT_PTR_EQUAL(s->optim[s->nets[r].optim].net, s->nets[r].net);
    CU_ASSERT_STRING_EQUAL(s->optim[s->nets[r].optim].role, s->nets[r].role);
  }
}

/* Every trainable parameter of net r, each once: its gradient (the momentum buffer
 * "<param>.momentum_buffer") and its value after the step; the optimizer holds no other
 * state. */
static void compare_params(rt_step *t, ganfw_session *s, int32_t r, int64_t expected) {
  char key[256];
  const ganfw_session_optim *opt = &s->optim[s->nets[r].optim];
  CU_ASSERT_PTR_NOT_NULL_FATAL(opt->vt->state_tensor);
  CU_ASSERT_EQUAL_FATAL(opt->n_params, expected);
  for (int64_t i = 0; i < opt->n_params; i++) {
    const ganfw_param *p = &opt->params[i];
    const char *name = NULL;
    ganfw_tensor *buf = opt->vt->state_tensor(opt->self, i, &name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    char want_name[200];
    snprintf(want_name, sizeof want_name, "%s.momentum_buffer", p->name);
    CU_ASSERT_STRING_EQUAL_FATAL(name, want_name);
    snprintf(key, sizeof key, "grad.%s.%s", opt->role, p->name);
    rt_compare_tensor(t, key, buf, 1);
    snprintf(key, sizeof key, "after.%s.%s", opt->role, p->name);
    rt_compare_tensor(t, key, p->value, 0);
  }
  const char *name = NULL;
  CU_ASSERT_PTR_NULL(opt->vt->state_tensor(opt->self, opt->n_params, &name));
}

/* Net r's BatchNorm statistics after the step (running_mean, running_var,
 * num_batches_tracked) against PyTorch's. */
static void compare_buffers(rt_step *t, ganfw_session *s, int32_t r, int64_t expected) {
  gt_ref *ref = t->ref;
  char key[256];
  ganfw_net_buffer b;
  int64_t n = 0;
  for (int64_t i = 0; ganfw_net_buffer_at(s->nets[r].net, i, &b); i++, n++) {
    snprintf(key, sizeof key, "after.%s.%s", s->nets[r].role, b.name);
    if (b.tensor)
      rt_compare_tensor(t, key, b.tensor, 0);
    else
      CU_ASSERT_EQUAL(*b.counter, (int64_t)gt_ref_scalar(ref, key));
  }
  CU_ASSERT_EQUAL(n, expected);
}

/* data.pair reached the session as the downscaled kind, and the input it makes of the batch y
 * is the generator's x bit for bit (and not y itself). */
static void check_pair(gt_ref *ref, ganfw_session *s, const ganfw_tensor *y) {
  CU_ASSERT_EQUAL_FATAL(s->pair.kind, GANFW_PAIR_DOWNSCALED);
  CU_ASSERT_EQUAL(s->pair.factor, 2);
  int64_t n = 0;
  const float *want = gt_ref_f32(ref, "x", &n, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_EQUAL_FATAL(n, y->numel);
  float *made = gt_alloc((size_t)n * sizeof *made);
  ganfw_pair_make(&s->pair, &s->transform, y->data, y->shape[0], (int32_t)y->shape[1],
                  (int32_t)y->shape[2], (int32_t)y->shape[3], s->ctx->seed, 0, 0, made);
  const int same = memcmp(made, want, (size_t)n * sizeof *made) == 0;
  if (!same) printf("\n  data.pair's downscaled input differs from the generator's x\n");
  CU_ASSERT(same);
  CU_ASSERT(memcmp(made, y->data, (size_t)n * sizeof *made) != 0);
  gt_free(made);
}

static void test_pix2pix_step_matches_pytorch(void) {
  const char *name = "trainer_pix2pix_step";
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 16, .width = 16};
  rt_step t;
  if (!rt_open(&t, name, p2p_config, &info)) return;
  CU_ASSERT_STRING_EQUAL(t.s->trainer_name, "pix2pix");
  check_roles(t.s);

  ganfw_tensor *y = gt_ref_tensor_new(t.s->ctx, t.ref, "y");
  check_pair(t.ref, t.s, y);
  ganfw_program_stats stats;
  ganfw_status st = ganfw_program_step(t.p, y, NULL, 0, &stats);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);

  rt_compare_scalar(&t, &stats, "loss_d");
  rt_compare_scalar(&t, &stats, "loss_g");
  rt_compare_scalar(&t, &stats, "loss_g_gan");
  rt_compare_scalar(&t, &stats, "loss_l1");
  /* G: 5 convs (the last with a bias), 3 BatchNorms; D: 4 convs (2 with a bias), 2 BatchNorms */
  compare_params(&t, t.s, 0, 13);
  compare_params(&t, t.s, 1, 10);
  compare_buffers(&t, t.s, 0, 9);
  compare_buffers(&t, t.s, 1, 6);
  rt_report(&t, name, "weights and BatchNorm statistics");

  ganfw_tensor_destroy(y);
  rt_close(&t);
}

static CU_TestInfo tests[] = {
    {"a pix2pix step (downscaled pairs, lambda_l1 5, BatchNorm in train mode) matches PyTorch",
     test_pix2pix_step_matches_pytorch},
    CU_TEST_INFO_NULL,
};

GT_MAIN("pix2pix trainer step vs PyTorch", tests)
