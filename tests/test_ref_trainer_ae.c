/* One step of the autoencoder trainer plugin (plugins/trainers/autoencoder, model convae)
 * against PyTorch's (tests/ref/gen_trainer_ae.py), through the core's trainer program as
 * `ganfw CONFIG` runs it: from the same weights and batch (and for the VAE the same eps, the
 * run's Philox draw, which the generator reproduces), the reported scalars, every parameter
 * gradient and the weights after the update, for the AE with MSE and the VAE with BCE and
 * beta 0.5. The gradients are read back from SGD's momentum buffers, which hold the
 * gradient itself after the first step (PyTorch's torch.clone(d_p)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "ref_trainer.h"
#include "testutil.h"
#include "train/program.h"
#include "train/session.h"
#include "train/train_program.h"

/* The models of configs/ae_mnist.yaml and configs/vae_fashion.yaml (latent 16, channels
 * 32, 1x28x28), with the optimizer and batch of gen_trainer_ae.py. */
static const char ae_config[] = "seed: 1\n"
                                "device: {type: cpu, threads: 2}\n"
                                "model: {plugin: convae, latent: 16, channels: 32, output: tanh}\n"
                                "trainer: {plugin: autoencoder, loss: mse}\n"
                                "optim: {plugin: sgd, lr: 0.01, momentum: 0.9}\n"
                                "train: {batch_size: 8, max_steps: 1}\n";
static const char vae_config[] = "seed: 1\n"
                                 "device: {type: cpu, threads: 2}\n"
                                 "model: {plugin: convae, latent: 16, channels: 32, vae: true,"
                                 " output: none}\n"
                                 "trainer: {plugin: autoencoder, vae: true, loss: bce, beta: 0.5}\n"
                                 "optim: {plugin: sgd, lr: 0.01, momentum: 0.9}\n"
                                 "train: {batch_size: 8, max_steps: 1}\n";

/* Every trainable parameter of every optimizer: its gradient (the momentum buffer
 * "<param>.momentum_buffer") and its value after the step. */
static void compare_nets(rt_step *t, ganfw_session *s) {
  char key[256];
  CU_ASSERT_EQUAL(s->n_optim, 2);
  for (int32_t o = 0; o < s->n_optim; o++) {
    const ganfw_session_optim *opt = &s->optim[o];
    CU_ASSERT_PTR_NOT_NULL_FATAL(opt->vt->state_tensor);
    int64_t compared = 0;
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
      compared++;
    }
    /* conv and linear weight and bias: 3 layers a net */
    CU_ASSERT_EQUAL(compared, 6);
  }
}

/* Puts the run's Philox stream at the reference's block and checks that the draw there is
 * the generator's eps [N, latent]: the trainer's normal() then draws it again in the step. */
static void place_eps(gt_ref *ref, ganfw_session *s) {
  const double seed = gt_ref_scalar(ref, "seed"), offset = gt_ref_scalar(ref, "eps_offset");
  CU_ASSERT_EQUAL_FATAL(s->ctx->seed, (uint64_t)seed);
  int64_t n = 0;
  const float *want = gt_ref_f32(ref, "eps", &n, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  float *got = gt_alloc((size_t)n * sizeof *got);
  s->ctx->rng_offset = (uint64_t)offset;
  ganfw_ctx_rng_normal(s->ctx, n, got, 0.0f, 1.0f);
  /* Python's f32 log, sin and cos may differ from libm's by an ulp */
  gt_check_close("eps (the run's Philox normal draw)", got, want, n, 1e-5, 1e-3);
  s->ctx->rng_offset = (uint64_t)offset;
  gt_free(got);
}

static void check_step(const char *name, const char *config_text, int vae) {
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 28, .width = 28};
  rt_step t;
  if (!rt_open(&t, name, config_text, &info)) return;
  CU_ASSERT_STRING_EQUAL(t.s->trainer_name, "autoencoder");

  if (vae) place_eps(t.ref, t.s);
  ganfw_tensor *x = gt_ref_tensor_new(t.s->ctx, t.ref, "x");
  ganfw_program_stats stats;
  ganfw_status st = ganfw_program_step(t.p, x, NULL, 0, &stats);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);

  rt_compare_scalar(&t, &stats, "loss");
  rt_compare_scalar(&t, &stats, "loss_rec");
  if (vae) rt_compare_scalar(&t, &stats, "kl");
  compare_nets(&t, t.s);
  rt_report(&t, name, "weights");

  ganfw_tensor_destroy(x);
  rt_close(&t);
}

static void test_ae_step_matches_pytorch(void) {
  check_step("trainer_ae_step", ae_config, 0);
}

static void test_vae_step_matches_pytorch(void) {
  check_step("trainer_vae_step", vae_config, 1);
}

static CU_TestInfo tests[] = {
    {"an AE step (MSE) matches PyTorch", test_ae_step_matches_pytorch},
    {"a VAE step (BCE, beta 0.5, the run's eps) matches PyTorch", test_vae_step_matches_pytorch},
    CU_TEST_INFO_NULL,
};

GT_MAIN("autoencoder trainer step vs PyTorch", tests)
