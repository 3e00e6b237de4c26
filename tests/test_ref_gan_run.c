/* A hundred DC-GAN training steps against PyTorch's (tests/ref/gen_gan_run.py): the CI-sized
 * long-horizon check. From the same initial weights, real batches and noise, ganfw's losses
 * must stay as close to PyTorch's float64 run as PyTorch's own float32 runs do.
 *
 * The yardstick. A GAN's trajectory is chaotic: a rounding difference that flips one ReLU or
 * LeakyReLU mask moves a gradient by 1e-4 to 1e-3 of its size, and the runs part from there.
 * PyTorch's two f32 runs (oneDNN's convolutions and its own im2col ones) part from its f64
 * run this way too. The envelope at step t is the largest relative distance of either f32
 * run's losses from f64's up to step t (never below 1e-6), and ganfw's distance must stay
 * within RUN_FACTOR times it at every step. An error of the step itself shows at once: a
 * learning rate 1% off leaves the envelope by more than RUN_FACTOR within a few steps, as
 * the second test checks. By step 100 every run has parted from f64 (losses 40-70% apart),
 * so the check is sharp in the first tens of steps and loose after. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "train/session.h"
#include "train/trainer.h"

#define RUN_STEPS  100
#define RUN_FACTOR 10.0
#define RUN_FLOOR  1e-6 /* a relative distance below which losses are equal to rounding */
#define LR_NUDGED  "2.02e-4"

static const char config_text[] = "seed: 1\n"
                                  "device: {type: cpu, threads: 2}\n"
                                  "model: {plugin: dcgan, image_size: 32, channels: 1, nz: 16,"
                                  " ngf: 32, ndf: 32}\n"
                                  "train: {batch_size: 16, max_steps: 100}\n"
                                  "optim: {plugin: adam, betas: [0.5, 0.999], lr: ";

/* max over (loss_d, loss_g) of |a - b| / max(|b|, 1e-3) */
static double distance(const double *a, const double *b) {
  double d = 0;
  for (int i = 0; i < 2; i++) d = fmax(d, fabs(a[i] - b[i]) / fmax(fabs(b[i]), 1e-3));
  return d;
}

/* The RUN_STEPS (loss_d, loss_g) of ganfw from the reference's start, with optim.lr `lr`. */
static void run_steps(gt_ref *ref, const char *lr, double *traj) {
  char text[512];
  snprintf(text, sizeof text, "%s%s}\n", config_text, lr);
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_gan *gan = NULL;
  gt_ref_gan_session(text, "gan_run", &run, &s);
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_create(s, &gan), GANFW_OK);
  for (int t = 0; t < RUN_STEPS; t++) {
    char kx[16], kz[16];
    snprintf(kx, sizeof kx, "x.%03d", t + 1);
    snprintf(kz, sizeof kz, "z.%03d", t + 1);
    ganfw_tensor *x = gt_ref_tensor_new(s->ctx, ref, kx), *z = gt_ref_tensor_new(s->ctx, ref, kz);
    ganfw_gan_stats gs;
    const ganfw_status st = ganfw_gan_step(gan, x, z, &gs);
    if (st != GANFW_OK) printf("\n  step %d: %s\n", t + 1, ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    traj[2 * t] = gs.loss_d;
    traj[2 * t + 1] = gs.loss_g;
    ganfw_tensor_destroy(x);
    ganfw_tensor_destroy(z);
  }
  ganfw_gan_destroy(gan);
  ganfw_session_close(s);
  ganfw_run_close(run);
}

/* The reference trajectory `key` ([RUN_STEPS, 2], stored in f64, read through f32: 6e-8 of
 * rounding, below RUN_FLOOR) into out. */
static void ref_traj(gt_ref *ref, const char *key, double *out) {
  int64_t n = 0;
  const float *v = gt_ref_f32(ref, key, &n, NULL, NULL);
  CU_ASSERT_FATAL(v && n == 2 * RUN_STEPS);
  for (int64_t i = 0; i < n; i++) out[i] = v[i];
}

/* The first step at which traj leaves RUN_FACTOR times the envelope (0: none); *worst: its
 * largest ratio to the envelope. With `print`, a few steps' figures. */
static int leaves_envelope(gt_ref *ref, const double *traj, double *worst, int print) {
  double f64[2 * RUN_STEPS], f32[2 * RUN_STEPS], thnn[2 * RUN_STEPS];
  ref_traj(ref, "traj.f64", f64);
  ref_traj(ref, "traj.f32", f32);
  ref_traj(ref, "traj.f32_thnn", thnn);
  double envelope = RUN_FLOOR;
  int first = 0;
  *worst = 0;
  for (int t = 0; t < RUN_STEPS; t++) {
    envelope = fmax(envelope,
                    fmax(distance(f32 + 2 * t, f64 + 2 * t), distance(thnn + 2 * t, f64 + 2 * t)));
    const double d = distance(traj + 2 * t, f64 + 2 * t), ratio = d / envelope;
    *worst = fmax(*worst, ratio);
    if (!first && ratio > RUN_FACTOR) first = t + 1;
    if (print && (t == 0 || t == 4 || t == 9 || t == 29 || t == RUN_STEPS - 1))
      printf("\n    step %3d: ganfw - f64 %.2e, PyTorch f32 envelope %.2e, ratio %.2f", t + 1, d,
             envelope, ratio);
  }
  return first;
}

static void test_hundred_steps_within_pytorchs_spread(void) {
  gt_ref *ref = gt_ref_open("gan_run");
  if (!ref) return;
  double *traj = calloc(2 * RUN_STEPS, sizeof *traj), worst = 0;
  CU_ASSERT_PTR_NOT_NULL_FATAL(traj);
  run_steps(ref, "2.0e-4", traj);
  const int first = leaves_envelope(ref, traj, &worst, 1);
  printf("\n    largest ratio to the envelope over %d steps: %.2f (limit %.0f)%s", RUN_STEPS, worst,
         RUN_FACTOR, first ? "" : "\n  ");
  if (first) printf("; leaves it at step %d\n  ", first);
  CU_ASSERT_EQUAL(first, 0);
  free(traj);
  gt_ref_close(ref);
}

/* The check has power: a learning rate 1% off (a bug as small as a wrong bias correction
 * or epsilon) leaves the envelope within the first ten steps. */
static void test_a_one_percent_lr_error_is_caught(void) {
  gt_ref *ref = gt_ref_open("gan_run");
  if (!ref) return;
  double *traj = calloc(2 * RUN_STEPS, sizeof *traj), worst = 0;
  CU_ASSERT_PTR_NOT_NULL_FATAL(traj);
  run_steps(ref, LR_NUDGED, traj);
  const int first = leaves_envelope(ref, traj, &worst, 0);
  printf("\n    lr " LR_NUDGED ": leaves the envelope at step %d (ratio up to %.0f)\n  ", first,
         worst);
  CU_ASSERT(first >= 1 && first <= 10);
  free(traj);
  gt_ref_close(ref);
}

static CU_TestInfo tests[] = {
    {"100 steps stay within PyTorch's own f32 spread", test_hundred_steps_within_pytorchs_spread},
    {"a learning rate 1% off leaves it", test_a_one_percent_lr_error_is_caught},
    CU_TEST_INFO_NULL,
};

GT_MAIN("gan run vs PyTorch", tests)
