/* The CPU nn kernels (core/src/backend/cpu/{batchnorm2d,activation,pool2d,dropout,loss,
 * upsample2d,groupnorm}.c) against central differences (gt_gradcheck) for every backward,
 * and against direct double formulas for the forward passes, over several shapes (the
 * DC-GAN BatchNorm shapes at batch 64 among them), plus the properties the layers rely on: running
 * statistics, accumulate, affine=False, aliasing, padding, extreme logits and the dropout mask. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "base/philox.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

static float *falloc(int64_t n) {
  return gt_alloc((size_t)n * sizeof(float));
}

static void report(const char *what, double err) {
  printf("\n    %-52s max rel err %.2e", what, err);
}

/* Asserts a gradient check's error is below tol and prints it. */
static void check_grad(const char *what, double err, double tol) {
  report(what, err);
  CU_ASSERT(err <= tol);
  if (!(err <= tol)) printf("  <-- above %.1e", tol);
}

/* ====================================================================================== */
/* BatchNorm2d                                                                             */
/* ====================================================================================== */

typedef struct bn_ctx {
  int64_t N, C, HW;
  float *x, *gamma, *beta, *y, *mean, *invstd;
} bn_ctx;

static void bn_forward(void *p) {
  bn_ctx *c = p;
  ganfw_be_batchnorm2d_forward_train(cpu(), c->N, c->C, c->HW, c->x, c->gamma, c->beta, c->y, NULL,
                                     NULL, 0.1f, 1e-5f, c->mean, c->invstd);
}

/* Per-channel mean and biased variance of x [N,C,HW] in double. */
static void bn_ref_stats(const bn_ctx *c, double *mean, double *var) {
  for (int64_t ch = 0; ch < c->C; ch++) {
    double s = 0.0, q = 0.0;
    for (int64_t n = 0; n < c->N; n++)
      for (int64_t j = 0; j < c->HW; j++) s += c->x[(n * c->C + ch) * c->HW + j];
    double m = s / (double)(c->N * c->HW);
    for (int64_t n = 0; n < c->N; n++)
      for (int64_t j = 0; j < c->HW; j++) {
        double d = c->x[(n * c->C + ch) * c->HW + j] - m;
        q += d * d;
      }
    mean[ch] = m;
    var[ch] = q / (double)(c->N * c->HW);
  }
}

typedef struct bn_shape {
  int64_t N, C, HW;
} bn_shape;

static void bn_alloc(bn_ctx *c, bn_shape s, int affine, uint64_t seed) {
  c->N = s.N, c->C = s.C, c->HW = s.HW;
  int64_t n = s.N * s.C * s.HW;
  c->x = falloc(n), c->y = falloc(n);
  c->mean = falloc(s.C), c->invstd = falloc(s.C);
  c->gamma = c->beta = NULL;
  /* An offset mean, so that centring matters. */
  gt_fill_uniform(c->x, n, -1.0f, 3.0f, seed);
  if (affine) {
    c->gamma = falloc(s.C), c->beta = falloc(s.C);
    gt_fill_uniform(c->gamma, s.C, 0.5f, 1.5f, seed + 1);
    gt_fill_uniform(c->beta, s.C, -0.5f, 0.5f, seed + 2);
  }
}

static void bn_free(bn_ctx *c) {
  gt_free(c->x), gt_free(c->y), gt_free(c->mean), gt_free(c->invstd);
  gt_free(c->gamma), gt_free(c->beta);
}

static const bn_shape bn_shapes[] = {
    {2, 3, 16},    /* tiny, N = 2 */
    {5, 7, 9},     /* odd sizes, HW not a multiple of the vector width */
    {3, 4, 1},     /* HW = 1 (after a linear layer) */
    {64, 128, 64}, /* DC-GAN [64,128,8,8] */
    {64, 256, 16}, /* DC-GAN [64,256,4,4] */
    {64, 64, 256}, /* DC-GAN [64,64,16,16] */
};

/* Forward against a double reference, backward against central differences for x, gamma
 * and beta, with and without affine parameters. */
static void test_bn_gradcheck(void) {
  for (size_t k = 0; k < sizeof bn_shapes / sizeof bn_shapes[0]; k++) {
    for (int affine = 1; affine >= 0; affine--) {
      bn_shape s = bn_shapes[k];
      bn_ctx c;
      bn_alloc(&c, s, affine, 100 + k);
      int64_t n = s.N * s.C * s.HW;
      float *dy = falloc(n), *dx = falloc(n), *dg = falloc(s.C), *db = falloc(s.C);
      float *want = falloc(n);
      gt_fill_uniform(dy, n, -1.0f, 1.0f, 200 + k);
      bn_forward(&c);

      double mean[256], var[256];
      bn_ref_stats(&c, mean, var);
      for (int64_t nn = 0; nn < s.N; nn++)
        for (int64_t ch = 0; ch < s.C; ch++)
          for (int64_t j = 0; j < s.HW; j++) {
            int64_t i = (nn * s.C + ch) * s.HW + j;
            double g = affine ? c.gamma[ch] : 1.0, b = affine ? c.beta[ch] : 0.0;
            want[i] = (float)((c.x[i] - mean[ch]) / sqrt(var[ch] + 1e-5) * g + b);
          }
      char what[128];
      snprintf(what, sizeof what, "bn fwd [%lld,%lld,%lld]%s y", (long long)s.N, (long long)s.C,
               (long long)s.HW, affine ? "" : " affine=0");
      /* y rounds at the size of its terms (~1): floor 0.1 */
      report(what, gt_check_close(what, c.y, want, n, 1e-5, 0.1));

      ganfw_be_batchnorm2d_backward(cpu(), s.N, s.C, s.HW, c.x, dy, c.gamma, c.mean, c.invstd, dx,
                                    affine ? dg : NULL, affine ? db : NULL, 0);
      snprintf(what, sizeof what, "bn bwd [%lld,%lld,%lld]%s dx", (long long)s.N, (long long)s.C,
               (long long)s.HW, affine ? "" : " affine=0");
      /* Perturbing one x moves only its channel, so L carries the float noise of one
       * channel's M outputs, about sqrt(M) * 6e-8 / eps; the curvature is O(1/M), so large
       * channels take a larger step. */
      double step = s.N * s.HW >= 512 ? 0.1 : 1e-2;
      check_grad(
          what,
          gt_gradcheck(bn_forward, &c, c.x, n, c.y, dy, n, dx, step, n > 100000 ? 12 : 24, 1e-2),
          1e-2);
      if (affine) {
        snprintf(what, sizeof what, "bn bwd [%lld,%lld,%lld] dgamma", (long long)s.N,
                 (long long)s.C, (long long)s.HW);
        check_grad(what,
                   gt_gradcheck(bn_forward, &c, c.gamma, s.C, c.y, dy, n, dg, 1e-2,
                                n > 100000 ? 8 : 16, 1e-2),
                   1e-2);
        snprintf(what, sizeof what, "bn bwd [%lld,%lld,%lld] dbeta", (long long)s.N, (long long)s.C,
                 (long long)s.HW);
        check_grad(what,
                   gt_gradcheck(bn_forward, &c, c.beta, s.C, c.y, dy, n, db, 1e-2,
                                n > 100000 ? 8 : 16, 1e-2),
                   1e-2);
      }
      gt_free(dy), gt_free(dx), gt_free(dg), gt_free(db), gt_free(want);
      bn_free(&c);
    }
  }
}

/* Running statistics follow PyTorch: r = (1-m) r + m stat, running_var with the unbiased
 * variance; save_invstd is 1/sqrt(biased var + eps). Applied twice to see the blend. */
static void test_bn_running_stats(void) {
  bn_shape s = {4, 3, 10};
  bn_ctx c;
  bn_alloc(&c, s, 1, 7);
  float rm[3] = {0.5f, -1.0f, 0.0f}, rv[3] = {1.0f, 2.0f, 0.25f};
  double wm[3], wv[3], mean[3], var[3];
  for (int ch = 0; ch < 3; ch++) wm[ch] = rm[ch], wv[ch] = rv[ch];
  bn_ref_stats(&c, mean, var);
  const double M = (double)(s.N * s.HW), momentum = 0.1;
  for (int step = 0; step < 2; step++) {
    ganfw_be_batchnorm2d_forward_train(cpu(), s.N, s.C, s.HW, c.x, c.gamma, c.beta, c.y, rm, rv,
                                       (float)momentum, 1e-5f, c.mean, c.invstd);
    for (int ch = 0; ch < 3; ch++) {
      wm[ch] = (1 - momentum) * wm[ch] + momentum * mean[ch];
      wv[ch] = (1 - momentum) * wv[ch] + momentum * var[ch] * M / (M - 1);
    }
  }
  double err = 0.0;
  for (int ch = 0; ch < 3; ch++) {
    double e[4] = {fabs(rm[ch] - wm[ch]) / fmax(fabs(wm[ch]), 1e-3), fabs(rv[ch] - wv[ch]) / wv[ch],
                   fabs(c.mean[ch] - mean[ch]) / fabs(mean[ch]),
                   fabs(c.invstd[ch] - 1.0 / sqrt(var[ch] + 1e-5)) * sqrt(var[ch] + 1e-5)};
    for (int i = 0; i < 4; i++) err = fmax(err, e[i]);
  }
  report("bn running_mean/var, save_mean/invstd", err);
  CU_ASSERT(err < 1e-6);
  bn_free(&c);
}

/* Statistics stay accurate when |mean| >> std (a one-pass E[x^2]-E[x]^2 in float would
 * lose them). */
static void test_bn_large_mean(void) {
  bn_shape s = {8, 2, 64};
  bn_ctx c;
  bn_alloc(&c, s, 0, 9);
  int64_t n = s.N * s.C * s.HW;
  for (int64_t i = 0; i < n; i++) c.x[i] = 1000.0f + (c.x[i] - 1.0f) * 0.01f;
  bn_forward(&c);
  double mean[2], var[2];
  bn_ref_stats(&c, mean, var);
  double err = 0.0;
  for (int ch = 0; ch < 2; ch++)
    err = fmax(err, fabs(c.invstd[ch] - 1.0 / sqrt(var[ch] + 1e-5)) * sqrt(var[ch] + 1e-5));
  report("bn invstd with mean 1000, std 0.01", err);
  CU_ASSERT(err < 1e-5);
  bn_free(&c);
}

/* Eval mode against the formula with the running statistics, small and with more images
 * and channels than one block/tile of the kernel; in place too. */
static void test_bn_eval(void) {
  const bn_shape shapes[] = {{3, 5, 13}, {20, 70, 3}};
  for (int k = 0; k < 2; k++) {
    for (int affine = 0; affine < 2; affine++) {
      bn_shape s = shapes[k];
      bn_ctx c;
      bn_alloc(&c, s, affine, 11);
      int64_t n = s.N * s.C * s.HW;
      float rm[70], rv[70], *want = falloc(n);
      gt_fill_uniform(rm, s.C, -1.0f, 1.0f, 12);
      gt_fill_uniform(rv, s.C, 0.2f, 2.0f, 13);
      ganfw_be_batchnorm2d_forward_eval(cpu(), s.N, s.C, s.HW, c.x, c.gamma, c.beta, c.y, rm, rv,
                                        1e-5f);
      for (int64_t i = 0; i < n; i++) {
        int64_t ch = (i / s.HW) % s.C;
        double g = affine ? c.gamma[ch] : 1.0, b = affine ? c.beta[ch] : 0.0;
        want[i] = (float)((c.x[i] - rm[ch]) / sqrt(rv[ch] + 1e-5) * g + b);
      }
      char what[64];
      snprintf(what, sizeof what, "bn eval [%lld,%lld,%lld]%s y", (long long)s.N, (long long)s.C,
               (long long)s.HW, affine ? "" : " affine=0");
      report(what, gt_check_close(what, c.y, want, n, 1e-5, 0.1));
      /* In place (y aliasing x) gives the same. */
      ganfw_be_batchnorm2d_forward_eval(cpu(), s.N, s.C, s.HW, c.x, c.gamma, c.beta, c.x, rm, rv,
                                        1e-5f);
      CU_ASSERT(memcmp(c.x, c.y, (size_t)n * sizeof(float)) == 0);
      gt_free(want);
      bn_free(&c);
    }
  }
}

/* accumulate = 1 adds to dgamma/dbeta and still overwrites dx; affine=False (NULL gamma,
 * beta) equals gamma = 1, beta = 0; in-place forward and backward give the same values;
 * NULL gradients are skipped. */
static void test_bn_accumulate_affine_alias(void) {
  bn_shape s = {4, 6, 20};
  bn_ctx c;
  bn_alloc(&c, s, 1, 21);
  int64_t n = s.N * s.C * s.HW;
  float *dy = falloc(n), *dx = falloc(n), *dx2 = falloc(n), *y1 = falloc(n);
  float dg[6], db[6], dg2[6], db2[6];
  gt_fill_uniform(dy, n, -1.0f, 1.0f, 22);
  bn_forward(&c);
  ganfw_be_batchnorm2d_backward(cpu(), s.N, s.C, s.HW, c.x, dy, c.gamma, c.mean, c.invstd, dx, dg,
                                db, 0);
  for (int ch = 0; ch < 6; ch++) dg2[ch] = 1.0f + ch, db2[ch] = -2.0f * ch;
  for (int64_t i = 0; i < n; i++) dx2[i] = 1e30f;
  ganfw_be_batchnorm2d_backward(cpu(), s.N, s.C, s.HW, c.x, dy, c.gamma, c.mean, c.invstd, dx2, dg2,
                                db2, 1);
  int ok = 1;
  for (int ch = 0; ch < 6; ch++) {
    ok &= fabsf(dg2[ch] - (dg[ch] + 1.0f + ch)) <= 1e-5f * (1.0f + fabsf(dg[ch]));
    ok &= fabsf(db2[ch] - (db[ch] - 2.0f * ch)) <= 1e-5f * (1.0f + fabsf(db[ch]));
  }
  CU_ASSERT(ok);
  CU_ASSERT(memcmp(dx, dx2, (size_t)n * sizeof(float)) == 0);

  /* NULL dx: only the parameter gradients. */
  float dg3[6], db3[6];
  ganfw_be_batchnorm2d_backward(cpu(), s.N, s.C, s.HW, c.x, dy, c.gamma, c.mean, c.invstd, NULL,
                                dg3, db3, 0);
  CU_ASSERT(memcmp(dg3, dg, sizeof dg) == 0 && memcmp(db3, db, sizeof db) == 0);

  /* affine=False == gamma 1, beta 0. */
  float ones[6], zeros[6] = {0};
  for (int ch = 0; ch < 6; ch++) ones[ch] = 1.0f;
  ganfw_be_batchnorm2d_forward_train(cpu(), s.N, s.C, s.HW, c.x, ones, zeros, y1, NULL, NULL, 0.1f,
                                     1e-5f, c.mean, c.invstd);
  ganfw_be_batchnorm2d_forward_train(cpu(), s.N, s.C, s.HW, c.x, NULL, NULL, c.y, NULL, NULL, 0.1f,
                                     1e-5f, c.mean, c.invstd);
  CU_ASSERT(memcmp(y1, c.y, (size_t)n * sizeof(float)) == 0);
  ganfw_be_batchnorm2d_backward(cpu(), s.N, s.C, s.HW, c.x, dy, ones, c.mean, c.invstd, dx, NULL,
                                NULL, 0);
  ganfw_be_batchnorm2d_backward(cpu(), s.N, s.C, s.HW, c.x, dy, NULL, c.mean, c.invstd, dx2, NULL,
                                NULL, 0);
  CU_ASSERT(memcmp(dx, dx2, (size_t)n * sizeof(float)) == 0);

  /* In place: forward y = x, backward dx = dy. */
  memcpy(y1, c.x, (size_t)n * sizeof(float));
  ganfw_be_batchnorm2d_forward_train(cpu(), s.N, s.C, s.HW, y1, c.gamma, c.beta, y1, NULL, NULL,
                                     0.1f, 1e-5f, c.mean, c.invstd);
  bn_forward(&c);
  CU_ASSERT(memcmp(y1, c.y, (size_t)n * sizeof(float)) == 0);
  ganfw_be_batchnorm2d_backward(cpu(), s.N, s.C, s.HW, c.x, dy, c.gamma, c.mean, c.invstd, dx, NULL,
                                NULL, 0);
  ganfw_be_batchnorm2d_backward(cpu(), s.N, s.C, s.HW, c.x, dy, c.gamma, c.mean, c.invstd, dy, NULL,
                                NULL, 0);
  CU_ASSERT(memcmp(dx, dy, (size_t)n * sizeof(float)) == 0);
  gt_free(dy), gt_free(dx), gt_free(dx2), gt_free(y1);
  bn_free(&c);
}

/* ====================================================================================== */
/* Activations                                                                             */
/* ====================================================================================== */

typedef struct act_ctx {
  int32_t kind;
  float alpha;
  int64_t n;
  float *x, *y;
} act_ctx;

static void act_forward(void *p) {
  act_ctx *c = p;
  ganfw_be_act_forward(cpu(), c->kind, c->alpha, c->n, c->x, c->y);
}

static double act_ref(int32_t kind, float alpha, double x) {
  switch (kind) {
  case GANFW_ACT_RELU:
    return x > 0 ? x : 0.0;
  case GANFW_ACT_LEAKY_RELU:
    return x > 0 ? x : alpha * x;
  case GANFW_ACT_TANH:
    return tanh(x);
  case GANFW_ACT_SIGMOID:
    return 1.0 / (1.0 + exp(-x));
  default:
    return x;
  }
}

static const char *act_names[GANFW_ACT_COUNT] = {"identity", "relu", "leaky_relu(0.2)", "tanh",
                                                 "sigmoid"};

/* Forward against double libm, backward (from y, in place too) against central
 * differences, for sizes around the vector width and above the threading threshold. */
static void test_act_gradcheck(void) {
  const int64_t sizes[] = {1, 17, 1000, 100000};
  for (int32_t kind = 0; kind < GANFW_ACT_COUNT; kind++) {
    double worst_fwd = 0.0, worst_bwd = 0.0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      int64_t n = sizes[k];
      act_ctx c = {kind, 0.2f, n, falloc(n), falloc(n)};
      float *dy = falloc(n), *dx = falloc(n), *want = falloc(n), *t = falloc(n);
      gt_fill_uniform(c.x, n, -4.0f, 4.0f, 300 + k);
      gt_fill_uniform(dy, n, -1.0f, 1.0f, 400 + k);
      /* Keep away from the kink of (leaky) ReLU by more than the step. */
      for (int64_t i = 0; i < n; i++)
        if (fabsf(c.x[i]) < 0.05f) c.x[i] = c.x[i] < 0 ? -0.05f : 0.05f;
      act_forward(&c);
      for (int64_t i = 0; i < n; i++) want[i] = (float)act_ref(kind, c.alpha, c.x[i]);
      char what[96];
      snprintf(what, sizeof what, "act %s fwd n=%lld", act_names[kind], (long long)n);
      worst_fwd = fmax(worst_fwd, gt_check_close(what, c.y, want, n, 1e-6, 1e-6));
      ganfw_be_act_backward(cpu(), kind, c.alpha, n, c.y, dy, dx);
      snprintf(what, sizeof what, "act %s bwd n=%lld", act_names[kind], (long long)n);
      double e =
          gt_gradcheck(act_forward, &c, c.x, n, c.y, dy, n, dx, 1e-2, n > 10000 ? 16 : 64, 1e-3);
      worst_bwd = fmax(worst_bwd, e);
      CU_ASSERT(e < 1e-2);
      if (!(e < 1e-2)) printf("\n    %s: gradcheck %.2e", what, e);
      /* In place: y over x, then dx over dy. */
      memcpy(t, c.x, (size_t)n * sizeof(float));
      ganfw_be_act_forward(cpu(), kind, c.alpha, n, t, t);
      CU_ASSERT(memcmp(t, c.y, (size_t)n * sizeof(float)) == 0);
      memcpy(t, dy, (size_t)n * sizeof(float));
      ganfw_be_act_backward(cpu(), kind, c.alpha, n, c.y, t, t);
      CU_ASSERT(memcmp(t, dx, (size_t)n * sizeof(float)) == 0);
      gt_free(c.x), gt_free(c.y), gt_free(dy), gt_free(dx), gt_free(want), gt_free(t);
    }
    char what[96];
    snprintf(what, sizeof what, "act %s fwd (vs double)", act_names[kind]);
    report(what, worst_fwd);
    snprintf(what, sizeof what, "act %s bwd (gradcheck)", act_names[kind]);
    report(what, worst_bwd);
  }
}

/* tanh and sigmoid over the whole float range: tiny (where tanh x ~ x), huge (saturation,
 * no NaN/overflow), and NaN passing through every activation. */
static void test_act_ranges(void) {
  enum { n = 4096 };
  static float x[n], y[n], want[n];
  const float ranges[][2] = {{-1e-3f, 1e-3f}, {-0.7f, 0.7f}, {-20.0f, 20.0f}, {-120.0f, 120.0f}};
  for (int32_t kind = GANFW_ACT_TANH; kind <= GANFW_ACT_SIGMOID; kind++) {
    double worst = 0.0;
    for (size_t r = 0; r < 4; r++) {
      gt_fill_uniform(x, n, ranges[r][0], ranges[r][1], 500 + r);
      x[0] = 0.0f, x[1] = -0.0f, x[2] = 1e-30f, x[3] = 88.0f, x[4] = -88.0f, x[5] = 1e4f;
      x[6] = -1e4f, x[7] = INFINITY, x[8] = -INFINITY;
      ganfw_be_act_forward(cpu(), kind, 0.0f, n, x, y);
      for (int i = 0; i < n; i++) want[i] = (float)act_ref(kind, 0.0f, x[i]);
      /* Relative to the value down to 1e-30 (sigmoid of -88 is 6e-39, a subnormal). */
      worst = fmax(worst, gt_check_close(act_names[kind], y, want, n, 2e-6, 1e-30));
    }
    char what[64];
    snprintf(what, sizeof what, "act %s fwd over [-1e4, 1e4], +-inf", act_names[kind]);
    report(what, worst);
  }
  float nan_in[2] = {NAN, 1.0f}, out[2];
  for (int32_t kind = 0; kind < GANFW_ACT_COUNT; kind++) {
    ganfw_be_act_forward(cpu(), kind, 0.2f, 2, nan_in, out);
    CU_ASSERT(isnan(out[0]));
  }
}

/* ====================================================================================== */
/* Pooling                                                                                 */
/* ====================================================================================== */

typedef struct pool_ctx {
  ganfw_pool2d_shape s;
  int is_max;
  float *x, *y;
  int32_t *argmax;
} pool_ctx;

static void pool_forward(void *p) {
  pool_ctx *c = p;
  if (c->is_max)
    ganfw_be_maxpool2d_forward(cpu(), &c->s, c->x, c->y, c->argmax);
  else
    ganfw_be_avgpool2d_forward(cpu(), &c->s, c->x, c->y);
}

static ganfw_pool2d_shape pool_shape(int64_t N, int64_t C, int64_t H, int64_t W, int64_t R,
                                     int64_t S, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  ganfw_pool2d_shape s = {N, C, H, W, R, S, sh, sw, ph, pw, 0, 0};
  s.P = (H + 2 * ph - R) / sh + 1;
  s.Q = (W + 2 * pw - S) / sw + 1;
  return s;
}

/* The direct definition: max over the window's in-range values; mean over the window with
 * the padding counted as zeros (count_include_pad=True). */
static void pool_ref(const ganfw_pool2d_shape *s, int is_max, const float *x, float *y) {
  for (int64_t pl = 0; pl < s->N * s->C; pl++)
    for (int64_t p = 0; p < s->P; p++)
      for (int64_t q = 0; q < s->Q; q++) {
        double acc = is_max ? -INFINITY : 0.0;
        for (int64_t r = 0; r < s->R; r++)
          for (int64_t t = 0; t < s->S; t++) {
            int64_t h = p * s->stride_h - s->pad_h + r, w = q * s->stride_w - s->pad_w + t;
            if (h < 0 || h >= s->H || w < 0 || w >= s->W) continue;
            double v = x[(pl * s->H + h) * s->W + w];
            acc = is_max ? fmax(acc, v) : acc + v;
          }
        y[(pl * s->P + p) * s->Q + q] = (float)(is_max ? acc : acc / (double)(s->R * s->S));
      }
}

static void test_pool(void) {
  const ganfw_pool2d_shape shapes[] = {
      pool_shape(2, 3, 8, 8, 2, 2, 2, 2, 0, 0),   /* the classifier's 2x2/2 */
      pool_shape(2, 3, 7, 6, 3, 2, 2, 1, 1, 1),   /* padding, stride != kernel, odd sizes */
      pool_shape(1, 2, 9, 9, 3, 3, 3, 3, 1, 1),   /* stride = kernel with padding */
      pool_shape(2, 2, 10, 7, 2, 3, 3, 2, 1, 1),  /* stride > kernel in h */
      pool_shape(8, 16, 28, 28, 3, 3, 1, 1, 1, 1) /* overlapping, above the thread threshold */
  };
  for (int is_max = 1; is_max >= 0; is_max--) {
    double worst_fwd = 0.0, worst_bwd = 0.0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
      pool_ctx c = {shapes[k], is_max, NULL, NULL, NULL};
      const ganfw_pool2d_shape *s = &c.s;
      int64_t nx = s->N * s->C * s->H * s->W, ny = s->N * s->C * s->P * s->Q;
      c.x = falloc(nx), c.y = falloc(ny), c.argmax = gt_alloc((size_t)ny * sizeof(int32_t));
      float *want = falloc(ny), *dy = falloc(ny), *dx = falloc(nx);
      if (is_max) {
        /* Distinct values 0.01 apart (a scrambled ramp), so that a step of 1e-3 never
         * changes which element is the maximum. */
        for (int64_t i = 0; i < nx; i++) c.x[i] = (float)(((i * 7919) % nx) * 0.01 - nx * 0.005);
      } else {
        gt_fill_uniform(c.x, nx, -1.0f, 1.0f, 650 + k);
      }
      gt_fill_uniform(dy, ny, -1.0f, 1.0f, 600 + k);
      pool_forward(&c);
      pool_ref(s, is_max, c.x, want);
      worst_fwd = fmax(worst_fwd, gt_check_close(is_max ? "maxpool fwd" : "avgpool fwd", c.y, want,
                                                 ny, 1e-5, 1e-2));
      if (is_max) {
        int ok = 1;
        for (int64_t o = 0; o < ny; o++) {
          int64_t pl = o / (s->P * s->Q);
          ok &= c.argmax[o] >= 0 && c.argmax[o] < s->H * s->W &&
                c.x[pl * s->H * s->W + c.argmax[o]] == c.y[o];
        }
        CU_ASSERT(ok);
        for (int64_t i = 0; i < nx; i++) dx[i] = 1e30f; /* dx is overwritten */
        ganfw_be_maxpool2d_backward(cpu(), s, dy, c.argmax, dx);
      } else {
        for (int64_t i = 0; i < nx; i++) dx[i] = 1e30f;
        ganfw_be_avgpool2d_backward(cpu(), s, dy, dx);
      }
      /* Average pooling is linear: a larger step only lowers the float noise. */
      double e = gt_gradcheck(pool_forward, &c, c.x, nx, c.y, dy, ny, dx, is_max ? 1e-3 : 5e-2,
                              nx > 10000 ? 48 : 200, 1e-3);
      worst_bwd = fmax(worst_bwd, e);
      CU_ASSERT(e < 1e-2);
      gt_free(c.x), gt_free(c.y), gt_free(c.argmax), gt_free(want), gt_free(dy), gt_free(dx);
    }
    report(is_max ? "maxpool fwd (vs direct)" : "avgpool fwd (vs direct, pad counted)", worst_fwd);
    report(is_max ? "maxpool bwd (gradcheck)" : "avgpool bwd (gradcheck)", worst_bwd);
  }
}

/* A 3x3 window with padding 1 over a 3x3 ones plane: the corner averages 4/9 (padding
 * counted), the centre 1; max pooling of a NaN gives NaN. */
static void test_pool_padding_values(void) {
  ganfw_pool2d_shape s = pool_shape(1, 1, 3, 3, 3, 3, 1, 1, 1, 1);
  float x[9], y[9];
  int32_t am[9];
  for (int i = 0; i < 9; i++) x[i] = 1.0f;
  ganfw_be_avgpool2d_forward(cpu(), &s, x, y);
  CU_ASSERT_DOUBLE_EQUAL(y[0], 4.0 / 9.0, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(y[1], 6.0 / 9.0, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(y[4], 1.0, 1e-7);
  for (int i = 0; i < 9; i++) x[i] = -(float)i;
  ganfw_be_maxpool2d_forward(cpu(), &s, x, y, am);
  CU_ASSERT(y[8] == -4.0f && am[8] == 4); /* padding is -inf, not 0 */
  x[4] = NAN;
  ganfw_be_maxpool2d_forward(cpu(), &s, x, y, am);
  CU_ASSERT(isnan(y[0]) && am[0] == 4);
}

/* ====================================================================================== */
/* Dropout                                                                                 */
/* ====================================================================================== */

static void test_dropout_mask(void) {
  const int64_t n = 1000000;
  float *x = falloc(n), *y = falloc(n), *y2 = falloc(n);
  uint8_t *m = gt_alloc((size_t)n), *m2 = gt_alloc((size_t)n);
  gt_fill_uniform(x, n, -1.0f, 1.0f, 700);
  const float ps[] = {0.1f, 0.3f, 0.5f, 0.9f};
  for (size_t k = 0; k < 4; k++) {
    float p = ps[k];
    ganfw_be_dropout_forward(cpu(), n, p, 42, 1000, x, y, m);
    int64_t kept = 0;
    int ok = 1;
    const float scale = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < n; i++) {
      kept += m[i];
      ok &= m[i] <= 1 && y[i] == (m[i] ? x[i] * scale : 0.0f);
    }
    CU_ASSERT(ok);
    /* Binomial: sd of the fraction is sqrt(p(1-p)/n) <= 5e-4; allow 6 sd. */
    double frac = (double)kept / (double)n;
    printf("\n    dropout p=%.1f: kept %.5f (want %.5f)", p, frac, 1.0 - p);
    CU_ASSERT(fabs(frac - (1.0 - p)) < 6.0 * sqrt(p * (1.0 - p) / (double)n));
  }
  /* Same seed + offset: same mask; the mask of element i is word i%4 of block offset+i/4. */
  ganfw_be_dropout_forward(cpu(), n, 0.5f, 42, 1000, x, y, m);
  ganfw_be_dropout_forward(cpu(), n, 0.5f, 42, 1000, x, y2, m2);
  CU_ASSERT(memcmp(m, m2, (size_t)n) == 0 && memcmp(y, y2, (size_t)n * sizeof(float)) == 0);
  int ok = 1;
  for (int64_t i = 0; i < n; i += 4099) {
    uint32_t r[4];
    ganfw_philox_block(42, 1000 + (uint64_t)(i / 4), r);
    ok &= m[i] == (ganfw_philox_u01(r[i % 4]) >= 0.5f);
  }
  CU_ASSERT(ok);
  /* A later offset is the same stream shifted by whole blocks. */
  ganfw_be_dropout_forward(cpu(), n - 40, 0.5f, 42, 1010, x, y2, m2);
  CU_ASSERT(memcmp(m + 40, m2, (size_t)(n - 40)) == 0);
  /* Different offset or seed: a different mask (about half the elements differ). */
  ganfw_be_dropout_forward(cpu(), n, 0.5f, 42, 1001 + (uint64_t)n, x, y2, m2);
  int64_t diff = 0;
  for (int64_t i = 0; i < n; i++) diff += m[i] != m2[i];
  CU_ASSERT(diff > n / 3 && diff < 2 * n / 3);
  ganfw_be_dropout_forward(cpu(), n, 0.5f, 43, 1000, x, y2, m2);
  diff = 0;
  for (int64_t i = 0; i < n; i++) diff += m[i] != m2[i];
  CU_ASSERT(diff > n / 3 && diff < 2 * n / 3);
  /* Odd sizes end mid-block and mid-group: the prefix is the same stream. */
  ganfw_be_dropout_forward(cpu(), 13, 0.5f, 42, 1000, x, y2, m2);
  CU_ASSERT(memcmp(m, m2, 13) == 0);
  gt_free(x), gt_free(y), gt_free(y2), gt_free(m), gt_free(m2);
}

typedef struct drop_ctx {
  int64_t n;
  float p;
  float *x, *y;
  uint8_t *mask;
} drop_ctx;

static void drop_forward(void *p) {
  drop_ctx *c = p;
  ganfw_be_dropout_forward(cpu(), c->n, c->p, 7, 3, c->x, c->y, c->mask);
}

/* backward = dy * mask / (1-p) (also in place), matching central differences; p = 0 is the
 * identity; p = 1 drops everything. */
static void test_dropout_backward(void) {
  const int64_t n = 70001;
  drop_ctx c = {n, 0.25f, falloc(n), falloc(n), gt_alloc((size_t)n)};
  float *dy = falloc(n), *dx = falloc(n);
  gt_fill_uniform(c.x, n, -1.0f, 1.0f, 800);
  gt_fill_uniform(dy, n, -1.0f, 1.0f, 801);
  drop_forward(&c);
  ganfw_be_dropout_backward(cpu(), n, c.p, c.mask, dy, dx);
  int ok = 1;
  const float scale = 1.0f / (1.0f - c.p);
  for (int64_t i = 0; i < n; i++) ok &= dx[i] == (c.mask[i] ? dy[i] * scale : 0.0f);
  CU_ASSERT(ok);
  double e = gt_gradcheck(drop_forward, &c, c.x, n, c.y, dy, n, dx, 1e-2, 16, 1e-3);
  check_grad("dropout bwd (gradcheck)", e, 1e-3);
  ganfw_be_dropout_backward(cpu(), n, c.p, c.mask, dy, dy);
  CU_ASSERT(memcmp(dx, dy, (size_t)n * sizeof(float)) == 0);

  c.p = 0.0f;
  drop_forward(&c);
  CU_ASSERT(memcmp(c.x, c.y, (size_t)n * sizeof(float)) == 0);
  ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= c.mask[i] == 1;
  CU_ASSERT(ok);
  ganfw_be_dropout_backward(cpu(), n, 0.0f, c.mask, c.x, dx);
  CU_ASSERT(memcmp(c.x, dx, (size_t)n * sizeof(float)) == 0);

  c.p = 1.0f;
  drop_forward(&c);
  ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= c.y[i] == 0.0f && c.mask[i] == 0;
  CU_ASSERT(ok);
  gt_free(c.x), gt_free(c.y), gt_free(c.mask), gt_free(dy), gt_free(dx);
}

/* ====================================================================================== */
/* Losses                                                                                  */
/* ====================================================================================== */

typedef struct loss_ctx {
  int64_t n, classes;
  float *x, *t;
  int32_t *labels;
  float loss;
} loss_ctx;

static void bce_forward(void *p) {
  loss_ctx *c = p;
  ganfw_be_bce_logits_forward(cpu(), c->n, c->x, c->t, &c->loss);
}

static void xent_forward(void *p) {
  loss_ctx *c = p;
  ganfw_be_softmax_xent_forward(cpu(), c->n, c->classes, c->x, c->labels, 0.0f, &c->loss);
}

/* BCE-with-logits: loss and gradient against the definition in double, and the gradient
 * against central differences, for hard and smoothed targets (0, 1, 0.9, 0.1 and uniform
 * ones) at several sizes. The loss is one float, so the differences have a noise of about
 * ulp(loss)/eps: the gradcheck uses a large step, a floor of 5% of 1/n, and n <= 64. */
static void test_bce(void) {
  const int64_t sizes[] = {1, 7, 64, 1000};
  double worst_fwd = 0.0, worst_dx = 0.0, worst_fd = 0.0;
  for (size_t k = 0; k < 4; k++) {
    int64_t n = sizes[k];
    loss_ctx c = {n, 0, falloc(n), falloc(n), NULL, 0.0f};
    float *dx = falloc(n), *want_dx = falloc(n);
    gt_fill_uniform(c.x, n, -6.0f, 6.0f, 900 + k);
    const float fixed[] = {0.0f, 1.0f, 0.9f, 0.1f};
    gt_fill_uniform(c.t, n, 0.0f, 1.0f, 950 + k);
    for (int64_t i = 0; i < n; i++)
      if (i % 5 < 4) c.t[i] = fixed[i % 5];
    bce_forward(&c);
    const float dloss = 1.5f;
    double want = 0.0;
    for (int64_t i = 0; i < n; i++) {
      double s = 1.0 / (1.0 + exp(-(double)c.x[i]));
      want -= c.t[i] * log(s) + (1.0 - c.t[i]) * log(1.0 - s);
      want_dx[i] = (float)(dloss * (s - c.t[i]) / (double)n);
    }
    want /= (double)n;
    worst_fwd = fmax(worst_fwd, fabs(c.loss - want) / fabs(want));
    ganfw_be_bce_logits_backward(cpu(), n, c.x, c.t, dloss, dx);
    worst_dx = fmax(worst_dx, gt_check_close("bce dx", dx, want_dx, n, 1e-6, 1e-3 / n));
    if (n <= 64) { /* beyond, the float loss is too coarse for differences of 1/n terms */
      double e =
          gt_gradcheck(bce_forward, &c, c.x, n, &c.loss, &dloss, 1, dx, 5e-2, 64, 0.05 * dloss / n);
      worst_fd = fmax(worst_fd, e);
    }
    gt_free(c.x), gt_free(c.t), gt_free(dx), gt_free(want_dx);
  }
  report("bce_logits fwd (vs definition)", worst_fwd);
  CU_ASSERT(worst_fwd < 1e-6);
  report("bce_logits bwd (vs definition)", worst_dx);
  check_grad("bce_logits bwd (gradcheck)", worst_fd, 1e-2);
}

/* |x| = 100 (and beyond), hard and smoothed targets: the loss is finite and exact, the
 * gradient finite. */
static void test_bce_extreme(void) {
  float x[6] = {100.0f, -100.0f, 100.0f, -100.0f, 1e30f, -1e30f};
  float t[6] = {1.0f, 0.0f, 0.9f, 0.9f, 0.0f, 1.0f};
  float loss, dx[6];
  ganfw_be_bce_logits_forward(cpu(), 4, x, t, &loss);
  /* 0 + 0 + (100 - 90) + (0 + 90) over 4, log1p(e^-100) below float resolution. */
  CU_ASSERT(isfinite(loss));
  CU_ASSERT_DOUBLE_EQUAL(loss, 25.0, 1e-5);
  ganfw_be_bce_logits_forward(cpu(), 6, x, t, &loss);
  CU_ASSERT(isfinite(loss));
  ganfw_be_bce_logits_backward(cpu(), 6, x, t, 1.0f, dx);
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= isfinite(dx[i]);
  CU_ASSERT(ok);
  CU_ASSERT_DOUBLE_EQUAL(dx[0], 0.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(dx[2], 0.1 / 6.0, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(dx[3], -0.9 / 6.0, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(dx[5], -1.0 / 6.0, 1e-7);
}

/* Softmax cross-entropy the same way as BCE above. */
static void test_xent(void) {
  const int64_t shapes[][2] = {{1, 2}, {4, 10}, {8, 37}, {64, 10}};
  double worst_fwd = 0.0, worst_dx = 0.0, worst_fd = 0.0;
  for (size_t k = 0; k < 4; k++) {
    int64_t N = shapes[k][0], K = shapes[k][1], n = N * K;
    loss_ctx c = {N, K, falloc(n), NULL, gt_alloc((size_t)N * sizeof(int32_t)), 0.0f};
    float *dx = falloc(n), *want_dx = falloc(n);
    gt_fill_uniform(c.x, n, -5.0f, 5.0f, 1000 + k);
    for (int64_t i = 0; i < N; i++) c.labels[i] = (int32_t)((i * 7 + 3) % K);
    xent_forward(&c);
    const float dloss = 0.75f;
    double want = 0.0;
    for (int64_t i = 0; i < N; i++) {
      double s = 0.0;
      for (int64_t j = 0; j < K; j++) s += exp((double)c.x[i * K + j]);
      want += log(s) - c.x[i * K + c.labels[i]];
      for (int64_t j = 0; j < K; j++)
        want_dx[i * K + j] =
            (float)(dloss * (exp((double)c.x[i * K + j]) / s - (j == c.labels[i])) / N);
    }
    want /= (double)N;
    worst_fwd = fmax(worst_fwd, fabs(c.loss - want) / fabs(want));
    ganfw_be_softmax_xent_backward(cpu(), N, K, c.x, c.labels, 0.0f, dloss, dx);
    worst_dx = fmax(worst_dx, gt_check_close("xent dx", dx, want_dx, n, 1e-6, 1e-4 / N));
    double e =
        gt_gradcheck(xent_forward, &c, c.x, n, &c.loss, &dloss, 1, dx, 5e-2, 64, 0.05 * dloss / N);
    worst_fd = fmax(worst_fd, e);
    /* Each row of the gradient sums to 0. */
    double rs = 0.0;
    for (int64_t j = 0; j < K; j++) rs += dx[j];
    CU_ASSERT(fabs(rs) < 1e-6);
    gt_free(c.x), gt_free(c.labels), gt_free(dx), gt_free(want_dx);
  }
  report("softmax_xent fwd (vs definition)", worst_fwd);
  CU_ASSERT(worst_fwd < 1e-6);
  report("softmax_xent bwd (vs definition)", worst_dx);
  check_grad("softmax_xent bwd (gradcheck)", worst_fd, 1e-2);
}

static void test_xent_extreme(void) {
  float x[6] = {100.0f, -100.0f, 0.0f, 1000.0f, -1000.0f, 1000.0f};
  int32_t labels[2] = {1, 0};
  float loss, dx[6];
  ganfw_be_softmax_xent_forward(cpu(), 2, 3, x, labels, 0.0f, &loss);
  /* Row 0: 100 + log(1 + e^-100 + e^-200) - (-100) = 200; row 1: log 2. */
  CU_ASSERT(isfinite(loss));
  CU_ASSERT_DOUBLE_EQUAL(loss, (200.0 + log(2.0)) / 2.0, 1e-4);
  ganfw_be_softmax_xent_backward(cpu(), 2, 3, x, labels, 0.0f, 1.0f, dx);
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= isfinite(dx[i]);
  CU_ASSERT(ok);
  CU_ASSERT_DOUBLE_EQUAL(dx[0], 0.5, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(dx[1], -0.5, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(dx[3], -0.25, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(dx[5], 0.25, 1e-7);
}

/* ====================================================================================== */
/* upsampling and group normalisation                                                      */
/* ====================================================================================== */

typedef struct up_ctx {
  int32_t mode;
  int64_t planes, H, W;
  float *x, *y;
} up_ctx;

static void up_forward(void *p) {
  up_ctx *c = p;
  ganfw_be_upsample2d_forward(cpu(), c->mode, c->planes, c->H, c->W, c->x, c->y);
}

/* The backward of both modes against central differences, on odd sizes and a 1-wide axis:
 * the ops are linear, so a large step (0.25, exact in float) has no truncation error and
 * keeps the forward's rounding small against it. */
static void test_upsample_gradcheck(void) {
  const int64_t shapes[3][3] = {{6, 5, 4}, {2, 1, 3}, {3, 7, 1}}; /* planes, H, W */
  for (int32_t mode = 0; mode < GANFW_UPSAMPLE_COUNT; mode++) {
    for (int k = 0; k < 3; k++) {
      up_ctx c = {mode, shapes[k][0], shapes[k][1], shapes[k][2], NULL, NULL};
      const int64_t n = c.planes * c.H * c.W, ny = 4 * n;
      c.x = falloc(n), c.y = falloc(ny);
      float *dy = falloc(ny), *dx = falloc(n);
      gt_fill_uniform(c.x, n, -2, 2, 300 + k);
      gt_fill_uniform(dy, ny, -1, 1, 310 + k);
      up_forward(&c);
      ganfw_be_upsample2d_backward(cpu(), mode, c.planes, c.H, c.W, dy, dx);
      char what[96];
      snprintf(what, sizeof what, "upsample %s [%lld,%lld,%lld] dx",
               mode == GANFW_UPSAMPLE_NEAREST ? "nearest" : "bilinear", (long long)c.planes,
               (long long)c.H, (long long)c.W);
      check_grad(what, gt_gradcheck(up_forward, &c, c.x, n, c.y, dy, ny, dx, 0.25, 64, 1e-2), 1e-3);
      gt_free(c.x), gt_free(c.y), gt_free(dy), gt_free(dx);
    }
  }
}

typedef struct gn_ctx {
  int64_t N, C, HW, G;
  float *x, *gamma, *beta, *y;
  double *mean, *invstd;
} gn_ctx;

static void gn_forward(void *p) {
  gn_ctx *c = p;
  ganfw_be_groupnorm_forward(cpu(), c->N, c->C, c->HW, c->G, c->x, c->gamma, c->beta, 1e-5f, c->y,
                             c->mean, c->invstd);
}

/* Forward against a double formula, the backward (x, gamma, beta) against central
 * differences, for GroupNorm, InstanceNorm's and LayerNorm's views, and accumulate. */
static void test_groupnorm_gradcheck(void) {
  const int64_t shapes[4][4] = {{3, 6, 10, 3}, {2, 4, 9, 4}, {4, 24, 1, 1}, {2, 8, 7, 1}};
  for (int k = 0; k < 4; k++) {
    gn_ctx c = {.N = shapes[k][0], .C = shapes[k][1], .HW = shapes[k][2], .G = shapes[k][3]};
    const int64_t n = c.N * c.C * c.HW, M = c.C / c.G * c.HW;
    c.x = falloc(n), c.y = falloc(n), c.gamma = falloc(c.C), c.beta = falloc(c.C);
    c.mean = gt_alloc((size_t)(c.N * c.G) * sizeof(double));
    c.invstd = gt_alloc((size_t)(c.N * c.G) * sizeof(double));
    float *dy = falloc(n), *dx = falloc(n), *dg = falloc(c.C), *db = falloc(c.C), *want = falloc(n);
    gt_fill_uniform(c.x, n, -1, 3, 400 + k);
    gt_fill_uniform(dy, n, -1, 1, 410 + k);
    gt_fill_uniform(c.gamma, c.C, 0.5f, 1.5f, 420 + k);
    gt_fill_uniform(c.beta, c.C, -0.5f, 0.5f, 430 + k);
    gn_forward(&c);
    for (int64_t ng = 0; ng < c.N * c.G; ng++) {
      double s = 0, q = 0;
      for (int64_t i = 0; i < M; i++) s += c.x[ng * M + i];
      const double m = s / (double)M;
      for (int64_t i = 0; i < M; i++) q += (c.x[ng * M + i] - m) * (c.x[ng * M + i] - m);
      const double inv = 1.0 / sqrt(q / (double)M + 1e-5);
      CU_ASSERT_DOUBLE_EQUAL(c.mean[ng], m, 1e-12 * (1 + fabs(m)));
      CU_ASSERT_DOUBLE_EQUAL(c.invstd[ng], inv, 1e-9 * inv);
      for (int64_t i = 0; i < M; i++) {
        const int64_t ch = ng % c.G * (c.C / c.G) + i / c.HW;
        want[ng * M + i] = (float)((c.x[ng * M + i] - m) * inv * c.gamma[ch] + c.beta[ch]);
      }
    }
    char what[96];
    snprintf(what, sizeof what, "groupnorm [%lld,%lld,%lld] G=%lld y", (long long)c.N,
             (long long)c.C, (long long)c.HW, (long long)c.G);
    report(what, gt_check_close(what, c.y, want, n, 1e-6, 1e-2));
    ganfw_be_groupnorm_backward(cpu(), c.N, c.C, c.HW, c.G, c.x, dy, c.gamma, c.mean, c.invstd, dx,
                                dg, db, 0);
    float *const grads[3] = {dx, dg, db};
    float *const inputs[3] = {c.x, c.gamma, c.beta};
    const int64_t counts[3] = {n, c.C, c.C};
    const char *names[3] = {"dx", "dgamma", "dbeta"};
    for (int i = 0; i < 3; i++) {
      snprintf(what, sizeof what, "groupnorm [%lld,%lld,%lld] G=%lld %s", (long long)c.N,
               (long long)c.C, (long long)c.HW, (long long)c.G, names[i]);
      check_grad(
          what,
          gt_gradcheck(gn_forward, &c, inputs[i], counts[i], c.y, dy, n, grads[i], 1e-2, 32, 1e-2),
          1e-2);
    }
    /* accumulate adds to the parameter gradients; without dx they are the same */
    float *dg2 = falloc(c.C), *db2 = falloc(c.C);
    memcpy(dg2, dg, (size_t)c.C * sizeof *dg2);
    memcpy(db2, db, (size_t)c.C * sizeof *db2);
    ganfw_be_groupnorm_backward(cpu(), c.N, c.C, c.HW, c.G, c.x, dy, c.gamma, c.mean, c.invstd,
                                NULL, dg2, db2, 1);
    for (int64_t ch = 0; ch < c.C; ch++) {
      CU_ASSERT_DOUBLE_EQUAL(dg2[ch], 2 * dg[ch], 1e-6 * (1 + fabs(dg[ch])));
      CU_ASSERT_DOUBLE_EQUAL(db2[ch], 2 * db[ch], 1e-6 * (1 + fabs(db[ch])));
    }
    gt_free(dg2), gt_free(db2);
    gt_free(c.x), gt_free(c.y), gt_free(c.gamma), gt_free(c.beta), gt_free(c.mean);
    gt_free(c.invstd), gt_free(dy), gt_free(dx), gt_free(dg), gt_free(db), gt_free(want);
  }
}

/* ====================================================================================== */
/* thread count                                                                            */
/* ====================================================================================== */

/* Bit for bit the same results on 1, 2, 3 and 4 threads: BatchNorm's per-channel sums run in
 * the same order whatever tile a channel falls in, pooling and the element-wise ops have no
 * reduction across threads. Shapes past every parallel threshold. */
static int thread_bits_equal(const char *what, int t, const void *a, const void *b, size_t n) {
  const int eq = memcmp(a, b, n) == 0;
  if (!eq) printf("\n    %s: %d threads differ from 1 thread", what, t);
  return eq;
}

static void test_thread_count(void) {
  const int saved = ganfw_cpu_threads();
  const int64_t N = 16, C = 64, HW = 16 * 16, n = N * C * HW;
  float *x = falloc(n), *dy = falloc(n), *gamma = falloc(C), *beta = falloc(C);
  gt_fill_uniform(x, n, -2, 3, 70);
  gt_fill_uniform(dy, n, -1, 1, 71);
  gt_fill_uniform(gamma, C, 0.5f, 1.5f, 72);
  gt_fill_uniform(beta, C, -1, 1, 73);
  ganfw_pool2d_shape ps = {.N = N,
                           .C = C,
                           .H = 16,
                           .W = 16,
                           .R = 3,
                           .S = 3,
                           .stride_h = 2,
                           .stride_w = 2,
                           .pad_h = 1,
                           .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_pool2d_shape_init(&ps), GANFW_OK);
  const int64_t np = N * C * ps.P * ps.Q;
  /* out: bn y, dx, mean, invstd, rm, rv, dgamma, dbeta, eval y; pool max y, dx, avg y, dx;
   * tanh y, dx */
  const int64_t nout = 3 * n + 6 * C + 2 * np + 2 * n + 2 * n;
  float *out = falloc(nout), *ref = falloc(nout);
  int32_t *argmax = gt_alloc((size_t)np * sizeof *argmax);
  for (int t = 1; t <= 4; t++) {
    ganfw_cpu_set_threads(NULL, t);
    float *y = out, *dx = y + n, *mean = dx + n, *invstd = mean + C, *rm = invstd + C;
    float *rv = rm + C, *dg = rv + C, *db = dg + C, *ye = db + C, *pm = ye + n, *pdx = pm + np;
    float *pa = pdx + n, *padx = pa + np, *ty = padx + n, *tdx = ty + n;
    for (int64_t i = 0; i < C; i++) rm[i] = 0.0f, rv[i] = 1.0f;
    ganfw_be_batchnorm2d_forward_train(cpu(), N, C, HW, x, gamma, beta, y, rm, rv, 0.1f, 1e-5f,
                                       mean, invstd);
    ganfw_be_batchnorm2d_backward(cpu(), N, C, HW, x, dy, gamma, mean, invstd, dx, dg, db, 0);
    ganfw_be_batchnorm2d_forward_eval(cpu(), N, C, HW, x, gamma, beta, ye, rm, rv, 1e-5f);
    ganfw_be_maxpool2d_forward(cpu(), &ps, x, pm, argmax);
    ganfw_be_maxpool2d_backward(cpu(), &ps, dy, argmax, pdx);
    ganfw_be_avgpool2d_forward(cpu(), &ps, x, pa);
    ganfw_be_avgpool2d_backward(cpu(), &ps, dy, padx);
    ganfw_be_act_forward(cpu(), GANFW_ACT_TANH, 0.0f, n, x, ty);
    ganfw_be_act_backward(cpu(), GANFW_ACT_TANH, 0.0f, n, ty, dy, tdx);
    if (t == 1) {
      memcpy(ref, out, (size_t)nout * sizeof *out);
      continue;
    }
    CU_ASSERT(thread_bits_equal("batchnorm", t, out, ref, (size_t)(3 * n + 6 * C) * sizeof *out));
    CU_ASSERT(thread_bits_equal("pool, tanh", t, pm, ref + (pm - out),
                                (size_t)(2 * np + 4 * n) * sizeof *out));
  }
  ganfw_cpu_set_threads(NULL, saved);
  gt_free(x), gt_free(dy), gt_free(gamma), gt_free(beta), gt_free(out), gt_free(ref);
  gt_free(argmax);
}

/* Upsampling (nearest, bilinear) and group normalisation (GroupNorm's groups, InstanceNorm's
 * one channel a group, LayerNorm's one group of single-value channels), forward and
 * backward, bit for bit the same on 1, 2, 3 and 4 threads: each splits only whole planes,
 * groups or channels across threads. Shapes past every parallel threshold. */
static void test_thread_count_layers(void) {
  const int saved = ganfw_cpu_threads();
  const int64_t N = 8, C = 32, H = 12, W = 14, HW = H * W, n = N * C * HW, up = 4 * n;
  const int64_t groups[3][3] = {{C, HW, 4}, {C, HW, C}, {C * HW, 1, 1}}; /* C, HW, G */
  float *x = falloc(n), *dy = falloc(up), *gamma = falloc(C * HW), *beta = falloc(C * HW);
  gt_fill_uniform(x, n, -2, 3, 80);
  gt_fill_uniform(dy, up, -1, 1, 81);
  gt_fill_uniform(gamma, C * HW, 0.5f, 1.5f, 82);
  gt_fill_uniform(beta, C * HW, -1, 1, 83);
  /* out: per upsample mode y [up], dx [n]; per norm view y, dx [n], dgamma, dbeta [C*HW],
   * mean, invstd [N*C] doubles (as 2 floats each) */
  const int64_t per_norm = 2 * n + 2 * C * HW + 4 * N * C;
  const int64_t nout = 2 * (up + n) + 3 * per_norm;
  float *out = falloc(nout), *ref = falloc(nout);
  for (int t = 1; t <= 4; t++) {
    ganfw_cpu_set_threads(NULL, t);
    float *o = out;
    for (int32_t mode = 0; mode < GANFW_UPSAMPLE_COUNT; mode++) {
      ganfw_be_upsample2d_forward(cpu(), mode, N * C, H, W, x, o);
      ganfw_be_upsample2d_backward(cpu(), mode, N * C, H, W, dy, o + up);
      o += up + n;
    }
    for (int k = 0; k < 3; k++) {
      const int64_t c = groups[k][0], hw = groups[k][1], g = groups[k][2];
      float *y = o, *dx = y + n, *dg = dx + n, *db = dg + C * HW;
      double *mean = (double *)(db + C * HW), *invstd = mean + N * C;
      ganfw_be_groupnorm_forward(cpu(), N, c, hw, g, x, gamma, beta, 1e-5f, y, mean, invstd);
      ganfw_be_groupnorm_backward(cpu(), N, c, hw, g, x, dy, gamma, mean, invstd, dx, dg, db, 0);
      o += per_norm;
    }
    if (t == 1) {
      memcpy(ref, out, (size_t)nout * sizeof *out);
      continue;
    }
    CU_ASSERT(thread_bits_equal("upsample", t, out, ref, (size_t)(2 * (up + n)) * sizeof *out));
    CU_ASSERT(thread_bits_equal("groupnorm", t, out + 2 * (up + n), ref + 2 * (up + n),
                                (size_t)(3 * per_norm) * sizeof *out));
  }
  ganfw_cpu_set_threads(NULL, saved);
  gt_free(x), gt_free(dy), gt_free(gamma), gt_free(beta), gt_free(out), gt_free(ref);
}

static CU_TestInfo tests[] = {{"bn_gradcheck", test_bn_gradcheck},
                              {"bn_running_stats", test_bn_running_stats},
                              {"bn_large_mean", test_bn_large_mean},
                              {"bn_eval", test_bn_eval},
                              {"bn_accumulate_affine_alias", test_bn_accumulate_affine_alias},
                              {"act_gradcheck", test_act_gradcheck},
                              {"act_ranges", test_act_ranges},
                              {"pool", test_pool},
                              {"pool_padding_values", test_pool_padding_values},
                              {"dropout_mask", test_dropout_mask},
                              {"dropout_backward", test_dropout_backward},
                              {"bce", test_bce},
                              {"bce_extreme", test_bce_extreme},
                              {"xent", test_xent},
                              {"xent_extreme", test_xent_extreme},
                              {"upsample_gradcheck", test_upsample_gradcheck},
                              {"groupnorm_gradcheck", test_groupnorm_gradcheck},
                              {"thread_count", test_thread_count},
                              {"thread_count_layers", test_thread_count_layers},
                              CU_TEST_INFO_NULL};

GT_MAIN("ops_nn", tests)
