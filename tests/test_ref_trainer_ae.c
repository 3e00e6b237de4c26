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

/* Tolerances: the 1e-4 relative, for the scalars, and for each tensor both as
 * ||got - want|| / ||want|| and element by element against a floor of 1e-2 of the tensor's
 * largest value (f32 sums of a few thousand products in another order than PyTorch's: a
 * gradient far below the largest one is known to fewer digits). */
#define TOL_REL    1e-4
#define ELEM_FLOOR 1e-2

static double worst_loss, worst_grad, worst_grad_elem, worst_weight;

static double norm_rel(const float *a, const float *b, int64_t n) {
  double d = 0, r = 0;
  for (int64_t k = 0; k < n; k++)
    d += ((double)a[k] - b[k]) * ((double)a[k] - b[k]), r += (double)b[k] * b[k];
  return sqrt(d / fmax(r, 1e-30));
}

static double abs_max(const float *v, int64_t n) {
  double m = 0;
  for (int64_t k = 0; k < n; k++) m = fmax(m, fabs(v[k]));
  return m;
}

/* got (a tensor of n values on the CPU backend) against the reference `key`. */
static void compare_tensor(gt_ref *ref, const char *key, const ganfw_tensor *got, int is_grad) {
  int64_t n = 0;
  const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
  if (!want) return;
  CU_ASSERT_EQUAL_FATAL(n, got->numel);
  const float *g = got->data;
  double e = norm_rel(g, want, n);
  if (e > TOL_REL) printf("\n  %s: differs by %.3g (norm-relative)\n", key, e);
  CU_ASSERT(e <= TOL_REL);
  if (!is_grad) {
    worst_weight = fmax(worst_weight, e);
    return;
  }
  worst_grad = fmax(worst_grad, e);
  double el = gt_check_close(key, g, want, n, TOL_REL, ELEM_FLOOR * abs_max(want, n));
  worst_grad_elem = fmax(worst_grad_elem, el);
}

/* Every trainable parameter of every optimizer: its gradient (the momentum buffer
 * "<param>.momentum_buffer") and its value after the step. */
static void compare_nets(gt_ref *ref, ganfw_session *s) {
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
      compare_tensor(ref, key, buf, 1);
      snprintf(key, sizeof key, "after.%s.%s", opt->role, p->name);
      compare_tensor(ref, key, p->value, 0);
      compared++;
    }
    /* conv and linear weight and bias: 3 layers a net */
    CU_ASSERT_EQUAL(compared, 6);
  }
}

/* The reported scalar `name` against the reference's. */
static void compare_scalar(gt_ref *ref, ganfw_program *p, const ganfw_program_stats *stats,
                           const char *name) {
  int32_t i = 0;
  while (i < ganfw_program_scalar_count(p) && strcmp(ganfw_program_scalar_name(p, i), name) != 0)
    i++;
  CU_ASSERT_FATAL(i < ganfw_program_scalar_count(p));
  CU_ASSERT_FATAL(stats->reported[i]);
  const double want = gt_ref_scalar(ref, name), got = stats->value[i];
  const double e = fabs(got - want) / fmax(fabs(want), 1e-6);
  if (e > TOL_REL) printf("\n  %s: %.9g vs PyTorch %.9g\n", name, got, want);
  CU_ASSERT(e <= TOL_REL);
  worst_loss = fmax(worst_loss, e);
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
  worst_loss = worst_grad = worst_grad_elem = worst_weight = 0;
  gt_ref *ref = gt_ref_open(name);
  if (!ref) return;
  char dir[] = "/tmp/ganfw_refae_XXXXXX", path[256], ref_path[4096];
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/ae.yaml", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(config_text, f);
  fclose(f);
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 28, .width = 28};
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_program *p = NULL;
  ganfw_status st = ganfw_run_open(path, NULL, 0, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 0, &info, &s);
  unlink(path);
  rmdir(dir);
  snprintf(ref_path, sizeof ref_path, "%s/%s.safetensors", getenv("GANFW_REF_DIR"), name);
  if (st == GANFW_OK) st = ganfw_program_load_weights(s, ref_path);
  if (st == GANFW_OK) st = ganfw_program_create(s, &p);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s->trainer_name, "autoencoder");

  if (vae) place_eps(ref, s);
  ganfw_tensor *x = gt_ref_tensor_new(s->ctx, ref, "x");
  ganfw_program_stats stats;
  st = ganfw_program_step(p, x, NULL, 0, &stats);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);

  compare_scalar(ref, p, &stats, "loss");
  compare_scalar(ref, p, &stats, "loss_rec");
  if (vae) compare_scalar(ref, p, &stats, "kl");
  compare_nets(ref, s);
  printf("\n  %s relative: losses %.2g, gradients %.2g (norm) %.2g (element-wise, floor "
         "1e-2 of the largest), weights after the step %.2g (norm)\n",
         name, worst_loss, worst_grad, worst_grad_elem, worst_weight);

  ganfw_tensor_destroy(x);
  ganfw_program_destroy(p);
  ganfw_session_close(s);
  ganfw_run_close(run);
  gt_ref_close(ref);
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
