/* One full DC-GAN step (D step on real and G(z), then G step through D) against PyTorch's
 * (tests/ref/gen_gan_step.py): from the same initial weights, real batch and noise, the
 * losses, the updated weights and the BatchNorm running statistics of both nets; once with
 * one Adam per net, once with optim.param_groups as PyTorch's param groups. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "base/error.h"
#include "train/session.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "train/trainer.h"

static const char config_text[] = "seed: 1\n"
                                  "device: {type: cpu, threads: 2}\n"
                                  "model: {plugin: dcgan, image_size: 32, channels: 1, nz: 100,"
                                  " ngf: 64, ndf: 64}\n"
                                  "train: {batch_size: 16, max_steps: 1, label_smoothing: 0.1}\n";
static const char optim_plain[] = "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n";
/* PyTorch's param groups of gen_gan_step.py's param_groups() */
static const char optim_groups[] = "optim:\n"
                                   "  plugin: adam\n"
                                   "  lr: 2.0e-4\n"
                                   "  betas: [0.5, 0.999]\n"
                                   "  weight_decay: 0.01\n"
                                   "  param_groups:\n"
                                   "    - {select: bias_and_norm, weight_decay: 0}\n"
                                   "    - {prefix: main.0, net: generator, lr: 1.0e-4}\n";

static double worst_weight = 0, worst_update = 0, worst_grad = 0, worst_buffer = 0;
static int64_t noisy = 0, counted = 0;

static double norm_rel(const float *a, const float *b, int64_t n) {
  double d = 0, r = 0;
  for (int64_t k = 0; k < n; k++)
    d += ((double)a[k] - b[k]) * ((double)a[k] - b[k]), r += (double)b[k] * b[k];
  return sqrt(d / fmax(r, 1e-30));
}

/* Compares every gradient, parameter and f32 buffer of `net` with PyTorch's.
 * - Gradients: element-wise within 5e-3, relative to the tensor's largest gradient / 100 as
 *   a floor (both sides sum thousands of f32 products in different orders; G's gradients
 *   come back through D and two BatchNorms over 16 samples). OpenBLAS's Haswell sgemm kept
 *   them within 1e-3; its SkylakeX (AVX-512) one sums in another order and reaches 2.5e-3
 *   at an element of G's, while the norm-relative error of every tensor stays below 1e-4.
 * - BatchNorm's running statistics: within 5e-4 (2.9e-4 seen on SkylakeX's sgemm).
 * - Weights: as tensors, ||w - w_torch|| / ||w_torch|| <= 1e-4; and element-wise, every
 *   weight's update within 5% of lr of PyTorch's where |grad| >= 1e-4 of the tensor's
 *   largest (below that, rounding can flip a gradient's sign, and Adam's first step
 *   moves by lr either way). Element-wise relative checks on the
 *   weights would test Adam's first step g / (|g| + eps), which turns f32 rounding of a
 *   gradient near eps into a visible part of lr. */
static void compare_net(gt_ref *ref, ganfw_net *net, const char *prefix, double weight_decay) {
  char key[256];
  const double lr = 2e-4;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &info), GANFW_OK);
    int64_t n = 0;
    snprintf(key, sizeof key, "after.%s.%s", prefix, info.name);
    const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
    snprintf(key, sizeof key, "grad.%s.%s", prefix, info.name);
    const float *grad = gt_ref_f32(ref, key, NULL, NULL, NULL);
    snprintf(key, sizeof key, "%s.%s", prefix, info.name);
    const float *before = gt_ref_f32(ref, key, NULL, NULL, NULL);
    if (!want || !grad || !before) continue;
    CU_ASSERT_EQUAL_FATAL(n, info.value->numel);
    /* Adam steps with grad + weight_decay * weight (1-D parameters are not decayed): its
     * rounding level is what decides the sign of the first step */
    const double wd = info.value->ndim > 1 ? weight_decay : 0;
    double gmax = 0;
    for (int64_t k = 0; k < n; k++) gmax = fmax(gmax, fabs(grad[k] + wd * before[k]));
    double e = gt_check_close(key, info.grad->data, grad, n, 5e-3, 1e-2 * gmax);
    if (e > worst_grad) worst_grad = e;
    const float *got = info.value->data;
    e = norm_rel(got, want, n);
    if (e > 1e-4)
      printf("\n  %s.%s: weights differ by %.3g (norm-relative)\n", prefix, info.name, e);
    CU_ASSERT(e <= 1e-4);
    if (e > worst_weight) worst_weight = e;
    double du = 0;
    for (int64_t k = 0; k < n; k++) {
      if (fabs(grad[k] + wd * before[k]) < 1e-4 * gmax) { /* at rounding level: sign is noise */
        noisy++;
        continue;
      }
      du = fmax(du, fabs((double)got[k] - want[k]) / lr);
    }
    counted += n;
    if (du > 0.05) printf("\n  %s.%s: an update differs by %.3g lr\n", prefix, info.name, du);
    CU_ASSERT(du <= 0.05);
    if (du > worst_update) worst_update = du;
  }
  ganfw_net_buffer b;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++) {
    snprintf(key, sizeof key, "after.%s.%s", prefix, b.name);
    int64_t n = 0;
    const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
    if (!want) continue;
    if (b.counter) {
      CU_ASSERT_EQUAL(*b.counter, (int64_t)want[0]);
    } else {
      double e = gt_check_close(key, b.tensor->data, want, n, 5e-4, 1e-3);
      if (e > worst_buffer) worst_buffer = e;
    }
  }
}

/* One step from the reference `name` with the optimizer section `optim`. */
static void check_step(const char *name, const char *optim, double weight_decay) {
  worst_weight = worst_update = worst_grad = worst_buffer = 0;
  noisy = counted = 0;
  gt_ref *ref = gt_ref_open(name);
  if (!ref) return;
  char text[1024];
  snprintf(text, sizeof text, "%s%s", config_text, optim);
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_gan *gan = NULL;
  gt_ref_gan_session(text, name, &run, &s);

  ganfw_tensor *x = gt_ref_tensor_new(s->ctx, ref, "real"),
               *z = gt_ref_tensor_new(s->ctx, ref, "z");
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_create(s, &gan), GANFW_OK);
  ganfw_gan_stats gs;
  ganfw_status st = ganfw_gan_step(gan, x, z, &gs);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);

  const struct {
    const char *key;
    double got;
  } scalars[] = {{"loss_d", gs.loss_d},
                 {"loss_g", gs.loss_g},
                 {"d_x", gs.d_x},
                 {"d_g_z1", gs.d_g_z1},
                 {"d_g_z2", gs.d_g_z2}};
  double worst_loss = 0;
  for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
    double want = gt_ref_scalar(ref, scalars[i].key);
    double e = fabs(scalars[i].got - want) / fmax(fabs(want), 1e-6);
    if (e > worst_loss) worst_loss = e;
    if (e > 1e-4) printf("\n  %s: %.9g vs PyTorch %.9g\n", scalars[i].key, scalars[i].got, want);
    CU_ASSERT(e <= 1e-4);
  }
  compare_net(ref, s->generator, "generator", weight_decay);
  compare_net(ref, s->discriminator, "discriminator", weight_decay);
  printf("\n  relative: losses %.2g, gradients %.2g, weights %.2g (norm), running stats %.2g; "
         "largest update difference %.3g lr (%lld of %lld weights with |grad| at rounding level "
         "left out)\n",
         worst_loss, worst_grad, worst_weight, worst_buffer, worst_update, (long long)noisy,
         (long long)counted);
  CU_ASSERT(noisy * 100 < counted);

  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(z);
  ganfw_gan_destroy(gan);
  ganfw_session_close(s);
  ganfw_run_close(run);
  gt_ref_close(ref);
}

static void test_one_step_matches_pytorch(void) {
  check_step("gan_step", optim_plain, 0);
}

/* The same step with parameter groups: G's first layer at half the rate, no weight decay
 * on the BatchNorm weights and biases, L2 decay 0.01 on the rest. */
static void test_param_groups_match_pytorch(void) {
  check_step("gan_step_groups", optim_groups, 0.01);
}

static CU_TestInfo tests[] = {
    {"one D and G step match PyTorch", test_one_step_matches_pytorch},
    {"the step with parameter groups matches PyTorch's param_groups",
     test_param_groups_match_pytorch},
    CU_TEST_INFO_NULL,
};

GT_MAIN("gan step vs PyTorch", tests)
