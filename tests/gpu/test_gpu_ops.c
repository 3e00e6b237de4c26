/* Every op of the CUDA backend against the CPU backend (the reference) on random data:
 * GEMM in all transpositions, conv2d and conv_transpose2d (forward, backward-data,
 * backward-filter, bias, accumulation; cuDNN heuristics and cudnn_benchmark), linear,
 * BatchNorm (train, eval, backward with and without dx, affine=False), activations,
 * pooling (global average pooling too), upsampling, group normalisation, the embedding lookup,
 * its scatter-add, transpose01 and pixel (un)shuffle in f32, f16 and bf16 (bit for bit),
 * dropout, losses, the foreach ops and reductions, casts (bit for bit), Philox (uniform bit for
 * bit), an f16-rounded conv as AMP runs it, the native 16-bit ops in f16 and bf16 (conv, convT,
 * linear, BatchNorm, activations) against the CPU's f32 ops on the same rounded values, the
 * embedding and spectral norm layers in a net (f32, and bf16 through the native ops), and the error
 * record. Tolerance 1e-3 relative for f32 (floor 1e-2), 2e-2 for f16-rounded inputs and the
 * 16-bit ops. The worst error of each op is printed at the end. Skips (exit 77) without a CUDA
 * device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/ops.h"
#include "base/error.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "testutil.h"

#define TOL_F32 1e-3
#define TOL_F16 2e-2
#define FLOOR   1e-2

static ganfw_backend *gpu, *cpu;

/* --- worst error per op, printed at the end ----------------------------------------------- */
#define MAX_RECORDS 192
static struct {
  char what[64];
  double err;
} records[MAX_RECORDS];
static int n_records;

static void record(const char *what, double err) {
  for (int i = 0; i < n_records; i++)
    if (strcmp(records[i].what, what) == 0) {
      if (err > records[i].err) records[i].err = err;
      return;
    }
  if (n_records < MAX_RECORDS) {
    snprintf(records[n_records].what, sizeof records[n_records].what, "%s", what);
    records[n_records++].err = err;
  }
}

/* --- buffers ------------------------------------------------------------------------------ */
static float *host_rand(int64_t n, float lo, float hi, uint64_t seed) {
  float *h = gt_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  gt_fill_uniform(h, n, lo, hi, seed);
  return h;
}

/* A device copy of bytes of host memory (zeros when src is NULL). */
static void *dev_bytes(const void *src, size_t bytes) {
  void *d = gpu->vt->raw_alloc(gpu, bytes ? bytes : 4);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  if (src) {
    CU_ASSERT_EQUAL(gpu->vt->copy_h2d(gpu, d, src, bytes), GANFW_OK);
  } else {
    void *z = gt_alloc(bytes ? bytes : 4);
    CU_ASSERT_EQUAL(gpu->vt->copy_h2d(gpu, d, z, bytes), GANFW_OK);
    gt_free(z);
  }
  return d;
}

static float *dev(const float *h, int64_t n) {
  return dev_bytes(h, (size_t)n * sizeof(float));
}

static void dev_free(void *d) {
  gpu->vt->raw_free(gpu, d, 0);
}

/* The device ran everything queued without a recorded failure (synchronize answers the
 * first failure of any op since the backend was created or its error cleared). */
static void expect_no_error(const char *what) {
  const ganfw_status st = gpu->vt->synchronize(gpu);
  if (st != GANFW_OK) printf("\n  %s: %s\n", what, ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
}

/* Compares n floats at device d with want (host), recording the error under what. */
static void compare(const char *what, const float *d, const float *want, int64_t n, double tol) {
  expect_no_error(what);
  float *got = gt_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, got, d, (size_t)n * sizeof(float)), GANFW_OK);
  record(what, gt_check_close(what, got, want, n, tol, FLOOR));
  gt_free(got);
}

/* --- GEMM ----------------------------------------------------------------------------- */
static void test_gemm(void) {
  const int64_t M = 37, N = 53, K = 29, pad = 3;
  for (int ta = 0; ta < 2; ta++) {
    for (int tb = 0; tb < 2; tb++) {
      const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
      const int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
      float *A = host_rand(na, -1, 1, 1), *B = host_rand(nb, -1, 1, 2),
            *C = host_rand(nc, -1, 1, 3);
      float *dA = dev(A, na), *dB = dev(B, nb), *dC = dev(C, nc);
      ganfw_be_gemm(cpu, ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.3f, C, ldc);
      ganfw_be_gemm(gpu, ta, tb, M, N, K, 0.7f, dA, lda, dB, ldb, 0.3f, dC, ldc);
      compare("gemm", dC, C, nc, TOL_F32);
      /* no inner dimension: C = beta C */
      ganfw_be_gemm(cpu, ta, tb, M, N, 0, 1.0f, A, lda, B, ldb, 0.5f, C, ldc);
      ganfw_be_gemm(gpu, ta, tb, M, N, 0, 1.0f, dA, lda, dB, ldb, 0.5f, dC, ldc);
      compare("gemm K=0", dC, C, nc, TOL_F32);
      dev_free(dA), dev_free(dB), dev_free(dC);
      gt_free(A), gt_free(B), gt_free(C);
    }
  }
}

/* --- conv2d and conv_transpose2d ------------------------------------------------------------- */
static void conv_case(ganfw_conv2d_shape s, int bias, int benchmark) {
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  ganfw_cuda_set_cudnn_benchmark(gpu, benchmark);
  const int64_t nx = s.N * s.C * s.H * s.W, nw = s.K * s.C * s.R * s.S, ny = s.N * s.K * s.P * s.Q;
  float *x = host_rand(nx, -1, 1, 10), *w = host_rand(nw, -1, 1, 11),
        *b = host_rand(s.K, -1, 1, 12);
  float *dy = host_rand(ny, -1, 1, 13), *y = host_rand(ny, 0, 0, 0), *dx = host_rand(nx, 0, 0, 0);
  float *dw = host_rand(nw, -1, 1, 14), *db = host_rand(s.K, -1, 1, 15);
  float *gx = dev(x, nx), *gw = dev(w, nw), *gb = dev(b, s.K), *gdy = dev(dy, ny);
  float *gy = dev(NULL, ny), *gdx = dev(NULL, nx), *gdw = dev(dw, nw), *gdb = dev(db, s.K);
  void *cws = gt_alloc(ganfw_be_conv2d_workspace(cpu, &s) + 64);
  const size_t ws_bytes = ganfw_be_conv2d_workspace(gpu, &s);
  void *gws = ws_bytes ? dev_bytes(NULL, ws_bytes) : NULL;
  expect_no_error("conv2d plan");

  ganfw_be_conv2d_forward(cpu, &s, x, w, bias ? b : NULL, y, cws);
  ganfw_be_conv2d_forward(gpu, &s, gx, gw, bias ? gb : NULL, gy, gws);
  compare("conv2d forward", gy, y, ny, TOL_F32);
  /* accumulate into the random dw, db: checks beta = 1 */
  ganfw_be_conv2d_backward(cpu, &s, x, w, dy, dx, dw, bias ? db : NULL, 1, cws);
  ganfw_be_conv2d_backward(gpu, &s, gx, gw, gdy, gdx, gdw, bias ? gdb : NULL, 1, gws);
  compare("conv2d backward-data", gdx, dx, nx, TOL_F32);
  compare("conv2d backward-filter", gdw, dw, nw, TOL_F32);
  if (bias) compare("conv2d bias grad", gdb, db, s.K, TOL_F32);
  /* overwrite (accumulate 0), filter gradient only */
  ganfw_be_conv2d_backward(cpu, &s, x, w, dy, NULL, dw, NULL, 0, cws);
  ganfw_be_conv2d_backward(gpu, &s, gx, gw, gdy, NULL, gdw, NULL, 0, gws);
  compare("conv2d backward-filter", gdw, dw, nw, TOL_F32);

  dev_free(gx), dev_free(gw), dev_free(gb), dev_free(gdy), dev_free(gy), dev_free(gdx);
  dev_free(gdw), dev_free(gdb);
  if (gws) dev_free(gws);
  gt_free(cws), gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(y), gt_free(dx);
  gt_free(dw), gt_free(db);
  ganfw_cuda_set_cudnn_benchmark(gpu, 0);
}

static void test_conv2d(void) {
  const ganfw_conv2d_shape shapes[] = {
      {.N = 4,
       .C = 3,
       .H = 16,
       .W = 16,
       .K = 8,
       .R = 4,
       .S = 4,
       .stride_h = 2,
       .stride_w = 2,
       .pad_h = 1,
       .pad_w = 1},
      {.N = 2, .C = 16, .H = 4, .W = 4, .K = 1, .R = 4, .S = 4, .stride_h = 1, .stride_w = 1},
      {.N = 3,
       .C = 5,
       .H = 9,
       .W = 7,
       .K = 6,
       .R = 3,
       .S = 3,
       .stride_h = 1,
       .stride_w = 1,
       .pad_h = 1,
       .pad_w = 1},
      {.N = 2, .C = 4, .H = 8, .W = 8, .K = 4, .R = 1, .S = 1, .stride_h = 1, .stride_w = 1},
      {.N = 2,
       .C = 2,
       .H = 11,
       .W = 6,
       .K = 3,
       .R = 3,
       .S = 2,
       .stride_h = 2,
       .stride_w = 1,
       .pad_h = 0,
       .pad_w = 1},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int benchmark = 0; benchmark < 2; benchmark++) conv_case(shapes[i], i % 2 == 0, benchmark);
}

static void convt_case(ganfw_convt2d_shape s, int bias, int benchmark) {
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&s), GANFW_OK);
  ganfw_cuda_set_cudnn_benchmark(gpu, benchmark);
  const int64_t nx = s.N * s.C * s.H * s.W, nw = s.C * s.K * s.R * s.S, ny = s.N * s.K * s.P * s.Q;
  float *x = host_rand(nx, -1, 1, 20), *w = host_rand(nw, -1, 1, 21),
        *b = host_rand(s.K, -1, 1, 22);
  float *dy = host_rand(ny, -1, 1, 23), *y = host_rand(ny, 0, 0, 0), *dx = host_rand(nx, 0, 0, 0);
  float *dw = host_rand(nw, -1, 1, 24), *db = host_rand(s.K, -1, 1, 25);
  float *gx = dev(x, nx), *gw = dev(w, nw), *gb = dev(b, s.K), *gdy = dev(dy, ny);
  float *gy = dev(NULL, ny), *gdx = dev(NULL, nx), *gdw = dev(dw, nw), *gdb = dev(db, s.K);
  void *cws = gt_alloc(ganfw_be_convt2d_workspace(cpu, &s) + 64);
  const size_t ws_bytes = ganfw_be_convt2d_workspace(gpu, &s);
  void *gws = ws_bytes ? dev_bytes(NULL, ws_bytes) : NULL;
  expect_no_error("convt2d plan");

  ganfw_be_convt2d_forward(cpu, &s, x, w, bias ? b : NULL, y, cws);
  ganfw_be_convt2d_forward(gpu, &s, gx, gw, bias ? gb : NULL, gy, gws);
  compare("convT forward", gy, y, ny, TOL_F32);
  ganfw_be_convt2d_backward(cpu, &s, x, w, dy, dx, dw, bias ? db : NULL, 1, cws);
  ganfw_be_convt2d_backward(gpu, &s, gx, gw, gdy, gdx, gdw, bias ? gdb : NULL, 1, gws);
  compare("convT backward-data", gdx, dx, nx, TOL_F32);
  compare("convT backward-filter", gdw, dw, nw, TOL_F32);
  if (bias) compare("convT bias grad", gdb, db, s.K, TOL_F32);

  dev_free(gx), dev_free(gw), dev_free(gb), dev_free(gdy), dev_free(gy), dev_free(gdx);
  dev_free(gdw), dev_free(gdb);
  if (gws) dev_free(gws);
  gt_free(cws), gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(y), gt_free(dx);
  gt_free(dw), gt_free(db);
  ganfw_cuda_set_cudnn_benchmark(gpu, 0);
}

static void test_convt2d(void) {
  const ganfw_convt2d_shape shapes[] = {
      {.N = 4, .C = 16, .H = 1, .W = 1, .K = 8, .R = 4, .S = 4, .stride_h = 1, .stride_w = 1},
      {.N = 2,
       .C = 8,
       .H = 4,
       .W = 4,
       .K = 3,
       .R = 4,
       .S = 4,
       .stride_h = 2,
       .stride_w = 2,
       .pad_h = 1,
       .pad_w = 1},
      {.N = 2,
       .C = 3,
       .H = 5,
       .W = 5,
       .K = 4,
       .R = 3,
       .S = 3,
       .stride_h = 2,
       .stride_w = 2,
       .pad_h = 1,
       .pad_w = 1,
       .out_pad_h = 1,
       .out_pad_w = 1},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int benchmark = 0; benchmark < 2; benchmark++) convt_case(shapes[i], i != 0, benchmark);
}

/* --- linear ------------------------------------------------------------------------------ */
static void test_linear(void) {
  const int64_t N = 7, IN = 33, OUT = 10;
  for (int acc = 0; acc < 2; acc++) {
    float *x = host_rand(N * IN, -1, 1, 30), *w = host_rand(OUT * IN, -1, 1, 31);
    float *b = host_rand(OUT, -1, 1, 32), *dy = host_rand(N * OUT, -1, 1, 33);
    float *y = host_rand(N * OUT, 0, 0, 0), *dx = host_rand(N * IN, 0, 0, 0);
    float *dw = host_rand(OUT * IN, -1, 1, 34), *db = host_rand(OUT, -1, 1, 35);
    float *gx = dev(x, N * IN), *gw = dev(w, OUT * IN), *gb = dev(b, OUT), *gdy = dev(dy, N * OUT);
    float *gy = dev(NULL, N * OUT), *gdx = dev(NULL, N * IN), *gdw = dev(dw, OUT * IN);
    float *gdb = dev(db, OUT);
    ganfw_be_linear_forward(cpu, N, IN, OUT, x, w, b, y);
    ganfw_be_linear_forward(gpu, N, IN, OUT, gx, gw, gb, gy);
    compare("linear forward", gy, y, N * OUT, TOL_F32);
    ganfw_be_linear_backward(cpu, N, IN, OUT, x, w, dy, dx, dw, db, acc);
    ganfw_be_linear_backward(gpu, N, IN, OUT, gx, gw, gdy, gdx, gdw, gdb, acc);
    compare("linear backward", gdx, dx, N * IN, TOL_F32);
    compare("linear backward", gdw, dw, OUT * IN, TOL_F32);
    compare("linear backward", gdb, db, OUT, TOL_F32);
    dev_free(gx), dev_free(gw), dev_free(gb), dev_free(gdy), dev_free(gy), dev_free(gdx);
    dev_free(gdw), dev_free(gdb);
    gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(y), gt_free(dx), gt_free(dw);
    gt_free(db);
  }
}

/* --- BatchNorm ------------------------------------------------------------------------------- */
static void bn_case(int affine) {
  const int64_t N = 4, C = 6, HW = 25, n = N * C * HW;
  const float eps = 1e-5f, momentum = 0.1f;
  float *x = host_rand(n, -2, 3, 40), *dy = host_rand(n, -1, 1, 41);
  float *gamma = host_rand(C, 0.5f, 1.5f, 42), *beta = host_rand(C, -1, 1, 43);
  float *rm = host_rand(C, -1, 1, 44), *rv = host_rand(C, 0.5f, 2, 45);
  float *y = host_rand(n, 0, 0, 0), *dx = host_rand(n, 0, 0, 0);
  float *mean = host_rand(C, 0, 0, 0), *invstd = host_rand(C, 0, 0, 0);
  float *dg = host_rand(C, -1, 1, 46), *dbt = host_rand(C, -1, 1, 47);
  float *gx = dev(x, n), *gdy = dev(dy, n), *gg = dev(gamma, C), *gbt = dev(beta, C);
  float *grm = dev(rm, C), *grv = dev(rv, C), *gy = dev(NULL, n), *gdx = dev(NULL, n);
  float *gmean = dev(NULL, C), *ginv = dev(NULL, C), *gdg = dev(dg, C), *gdbt = dev(dbt, C);
  const float *pg = affine ? gamma : NULL, *pb = affine ? beta : NULL;
  const float *qg = affine ? gg : NULL, *qb = affine ? gbt : NULL;

  ganfw_be_batchnorm2d_forward_train(cpu, N, C, HW, x, pg, pb, y, rm, rv, momentum, eps, mean,
                                     invstd);
  ganfw_be_batchnorm2d_forward_train(gpu, N, C, HW, gx, qg, qb, gy, grm, grv, momentum, eps, gmean,
                                     ginv);
  compare("batchnorm train forward", gy, y, n, TOL_F32);
  compare("batchnorm saved stats", gmean, mean, C, TOL_F32);
  compare("batchnorm saved stats", ginv, invstd, C, TOL_F32);
  compare("batchnorm running stats", grm, rm, C, TOL_F32);
  compare("batchnorm running stats", grv, rv, C, TOL_F32);

  ganfw_be_batchnorm2d_forward_eval(cpu, N, C, HW, x, pg, pb, y, rm, rv, eps);
  ganfw_be_batchnorm2d_forward_eval(gpu, N, C, HW, gx, qg, qb, gy, grm, grv, eps);
  compare("batchnorm eval forward", gy, y, n, TOL_F32);

  /* full backward, accumulating into the random dgamma/dbeta */
  ganfw_be_batchnorm2d_backward(cpu, N, C, HW, x, dy, pg, mean, invstd, dx, dg, dbt, 1);
  ganfw_be_batchnorm2d_backward(gpu, N, C, HW, gx, gdy, qg, gmean, ginv, gdx, gdg, gdbt, 1);
  compare("batchnorm backward dx", gdx, dx, n, TOL_F32);
  compare("batchnorm backward dgamma/dbeta", gdg, dg, C, TOL_F32);
  compare("batchnorm backward dgamma/dbeta", gdbt, dbt, C, TOL_F32);
  /* dx only (D in the G step: no parameter gradients) */
  ganfw_be_batchnorm2d_backward(cpu, N, C, HW, x, dy, pg, mean, invstd, dx, NULL, NULL, 0);
  ganfw_be_batchnorm2d_backward(gpu, N, C, HW, gx, gdy, qg, gmean, ginv, gdx, NULL, NULL, 0);
  compare("batchnorm backward dx only", gdx, dx, n, TOL_F32);
  /* parameter gradients only (no dx) */
  ganfw_be_batchnorm2d_backward(cpu, N, C, HW, x, dy, pg, mean, invstd, NULL, dg, dbt, 0);
  ganfw_be_batchnorm2d_backward(gpu, N, C, HW, gx, gdy, qg, gmean, ginv, NULL, gdg, gdbt, 0);
  compare("batchnorm backward params only", gdg, dg, C, TOL_F32);
  compare("batchnorm backward params only", gdbt, dbt, C, TOL_F32);

  dev_free(gx), dev_free(gdy), dev_free(gg), dev_free(gbt), dev_free(grm), dev_free(grv);
  dev_free(gy), dev_free(gdx), dev_free(gmean), dev_free(ginv), dev_free(gdg), dev_free(gdbt);
  gt_free(x), gt_free(dy), gt_free(gamma), gt_free(beta), gt_free(rm), gt_free(rv), gt_free(y);
  gt_free(dx), gt_free(mean), gt_free(invstd), gt_free(dg), gt_free(dbt);
}

static void test_batchnorm(void) {
  bn_case(1);
  bn_case(0);
}

/* --- activations, pooling, dropout --------------------------------------------------------- */
static void test_activations(void) {
  const int64_t n = 10001;
  const char *names[] = {"identity", "relu", "leaky_relu", "tanh", "sigmoid"};
  for (int32_t kind = 0; kind < GANFW_ACT_COUNT; kind++) {
    char what[64];
    float *x = host_rand(n, -6, 6, 50 + kind), *dy = host_rand(n, -1, 1, 60 + kind);
    float *y = host_rand(n, 0, 0, 0), *dx = host_rand(n, 0, 0, 0);
    float *gx = dev(x, n), *gdy = dev(dy, n), *gy = dev(NULL, n), *gdx = dev(NULL, n);
    ganfw_be_act_forward(cpu, kind, 0.2f, n, x, y);
    ganfw_be_act_forward(gpu, kind, 0.2f, n, gx, gy);
    snprintf(what, sizeof what, "%s forward", names[kind]);
    compare(what, gy, y, n, TOL_F32);
    ganfw_be_act_backward(cpu, kind, 0.2f, n, y, dy, dx);
    ganfw_be_act_backward(gpu, kind, 0.2f, n, gy, gdy, gdx);
    snprintf(what, sizeof what, "%s backward", names[kind]);
    compare(what, gdx, dx, n, TOL_F32);
    /* in place: y over x, dx over dy */
    ganfw_be_act_forward(gpu, kind, 0.2f, n, gx, gx);
    ganfw_be_act_backward(gpu, kind, 0.2f, n, gx, gdy, gdy);
    snprintf(what, sizeof what, "%s in place", names[kind]);
    compare(what, gx, y, n, TOL_F32);
    compare(what, gdy, dx, n, TOL_F32);
    dev_free(gx), dev_free(gdy), dev_free(gy), dev_free(gdx);
    gt_free(x), gt_free(dy), gt_free(y), gt_free(dx);
  }
}

static void pool_case(ganfw_pool2d_shape s, int max) {
  CU_ASSERT_EQUAL_FATAL(ganfw_pool2d_shape_init(&s), GANFW_OK);
  const int64_t nx = s.N * s.C * s.H * s.W, ny = s.N * s.C * s.P * s.Q;
  float *x = host_rand(nx, -1, 1, 70), *dy = host_rand(ny, -1, 1, 71);
  float *y = host_rand(ny, 0, 0, 0), *dx = host_rand(nx, 0, 0, 0);
  int32_t *am = gt_alloc((size_t)ny * sizeof(int32_t)), *gam_h = gt_alloc((size_t)ny * 4);
  float *gx = dev(x, nx), *gdy = dev(dy, ny), *gy = dev(NULL, ny), *gdx = dev(NULL, nx);
  int32_t *gam = dev_bytes(NULL, (size_t)ny * sizeof(int32_t));
  if (max) {
    ganfw_be_maxpool2d_forward(cpu, &s, x, y, am);
    ganfw_be_maxpool2d_forward(gpu, &s, gx, gy, gam);
    compare("maxpool forward", gy, y, ny, TOL_F32);
    CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, gam_h, gam, (size_t)ny * 4), GANFW_OK);
    CU_ASSERT_EQUAL(memcmp(gam_h, am, (size_t)ny * 4), 0);
    ganfw_be_maxpool2d_backward(cpu, &s, dy, am, dx);
    ganfw_be_maxpool2d_backward(gpu, &s, gdy, gam, gdx);
    compare("maxpool backward", gdx, dx, nx, TOL_F32);
  } else {
    ganfw_be_avgpool2d_forward(cpu, &s, x, y);
    ganfw_be_avgpool2d_forward(gpu, &s, gx, gy);
    compare("avgpool forward", gy, y, ny, TOL_F32);
    ganfw_be_avgpool2d_backward(cpu, &s, dy, dx);
    ganfw_be_avgpool2d_backward(gpu, &s, gdy, gdx);
    compare("avgpool backward", gdx, dx, nx, TOL_F32);
  }
  dev_free(gx), dev_free(gdy), dev_free(gy), dev_free(gdx), dev_free(gam);
  gt_free(x), gt_free(dy), gt_free(y), gt_free(dx), gt_free(am), gt_free(gam_h);
}

static void test_pooling(void) {
  const ganfw_pool2d_shape shapes[] = {
      {.N = 2, .C = 3, .H = 8, .W = 8, .R = 2, .S = 2, .stride_h = 2, .stride_w = 2},
      {.N = 2,
       .C = 3,
       .H = 9,
       .W = 7,
       .R = 3,
       .S = 3,
       .stride_h = 2,
       .stride_w = 2,
       .pad_h = 1,
       .pad_w = 1},
      {.N = 1,
       .C = 4,
       .H = 6,
       .W = 5,
       .R = 3,
       .S = 3,
       .stride_h = 1,
       .stride_w = 1,
       .pad_h = 1,
       .pad_w = 1},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    pool_case(shapes[i], 1);
    pool_case(shapes[i], 0);
  }
  /* global_avg_pool: one window of the whole plane */
  pool_case(
      (ganfw_pool2d_shape){
          .N = 8, .C = 16, .H = 16, .W = 16, .R = 16, .S = 16, .stride_h = 1, .stride_w = 1},
      0);
}

/* --- upsampling and group normalisation (issue 12) ----------------------------------------- */
static void test_upsample(void) {
  const int64_t shapes[3][3] = {{6, 5, 4}, {2, 1, 3}, {16, 16, 16}}; /* planes, H, W */
  for (int32_t mode = 0; mode < GANFW_UPSAMPLE_COUNT; mode++) {
    for (int k = 0; k < 3; k++) {
      const int64_t pl = shapes[k][0], H = shapes[k][1], W = shapes[k][2], n = pl * H * W;
      float *x = host_rand(n, -2, 2, 500 + k), *dy = host_rand(4 * n, -1, 1, 510 + k);
      float *y = host_rand(4 * n, 0, 0, 0), *dx = host_rand(n, 0, 0, 0);
      float *gx = dev(x, n), *gdy = dev(dy, 4 * n), *gy = dev(NULL, 4 * n), *gdx = dev(NULL, n);
      ganfw_be_upsample2d_forward(cpu, mode, pl, H, W, x, y);
      ganfw_be_upsample2d_forward(gpu, mode, pl, H, W, gx, gy);
      compare(mode ? "upsample bilinear forward" : "upsample nearest forward", gy, y, 4 * n,
              TOL_F32);
      ganfw_be_upsample2d_backward(cpu, mode, pl, H, W, dy, dx);
      ganfw_be_upsample2d_backward(gpu, mode, pl, H, W, gdy, gdx);
      compare(mode ? "upsample bilinear backward" : "upsample nearest backward", gdx, dx, n,
              TOL_F32);
      dev_free(gx), dev_free(gdy), dev_free(gy), dev_free(gdx);
      gt_free(x), gt_free(dy), gt_free(y), gt_free(dx);
    }
  }
}

/* GroupNorm's groups, InstanceNorm's one channel a group and LayerNorm's one group of
 * single-value channels; affine or not; backward with and without dx, accumulating. */
static void test_groupnorm(void) {
  const int64_t shapes[4][4] = {{4, 6, 25, 3}, {3, 8, 16, 8}, {5, 96, 1, 1}, {2, 64, 64, 32}};
  for (int k = 0; k < 4; k++) {
    for (int affine = 1; affine >= 0; affine--) {
      const int64_t N = shapes[k][0], C = shapes[k][1], HW = shapes[k][2], G = shapes[k][3];
      const int64_t n = N * C * HW;
      float *x = host_rand(n, -2, 3, 520 + k), *dy = host_rand(n, -1, 1, 530 + k);
      float *gamma = host_rand(C, 0.5f, 1.5f, 540 + k), *beta = host_rand(C, -1, 1, 550 + k);
      float *y = host_rand(n, 0, 0, 0), *dx = host_rand(n, 0, 0, 0);
      float *dg = host_rand(C, -1, 1, 560 + k), *db = host_rand(C, -1, 1, 570 + k);
      double *mean = gt_alloc((size_t)(N * G) * sizeof(double));
      double *invstd = gt_alloc((size_t)(N * G) * sizeof(double));
      float *gx = dev(x, n), *gdy = dev(dy, n), *gg = dev(gamma, C), *gb = dev(beta, C);
      float *gy = dev(NULL, n), *gdx = dev(NULL, n), *gdg = dev(dg, C), *gdb = dev(db, C);
      double *gmean = dev_bytes(NULL, (size_t)(N * G) * sizeof(double));
      double *ginv = dev_bytes(NULL, (size_t)(N * G) * sizeof(double));
      const float *pg = affine ? gamma : NULL, *pb = affine ? beta : NULL;
      const float *qg = affine ? gg : NULL, *qb = affine ? gb : NULL;
      ganfw_be_groupnorm_forward(cpu, N, C, HW, G, x, pg, pb, 1e-5f, y, mean, invstd);
      ganfw_be_groupnorm_forward(gpu, N, C, HW, G, gx, qg, qb, 1e-5f, gy, gmean, ginv);
      compare("groupnorm forward", gy, y, n, TOL_F32);
      double *hm = gt_alloc((size_t)(N * G) * sizeof(double));
      CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, hm, ginv, (size_t)(N * G) * sizeof(double)), GANFW_OK);
      double worst = 0.0;
      for (int64_t i = 0; i < N * G; i++) worst = fmax(worst, fabs(hm[i] / invstd[i] - 1.0));
      record("groupnorm saved 1/std", worst);
      CU_ASSERT(worst < 1e-9);
      gt_free(hm);
      ganfw_be_groupnorm_backward(cpu, N, C, HW, G, x, dy, pg, mean, invstd, dx, affine ? dg : NULL,
                                  affine ? db : NULL, 1);
      ganfw_be_groupnorm_backward(gpu, N, C, HW, G, gx, gdy, qg, gmean, ginv, gdx,
                                  affine ? gdg : NULL, affine ? gdb : NULL, 1);
      compare("groupnorm backward dx", gdx, dx, n, TOL_F32);
      if (affine) {
        compare("groupnorm backward dgamma/dbeta", gdg, dg, C, TOL_F32);
        compare("groupnorm backward dgamma/dbeta", gdb, db, C, TOL_F32);
        ganfw_be_groupnorm_backward(cpu, N, C, HW, G, x, dy, pg, mean, invstd, NULL, dg, db, 0);
        ganfw_be_groupnorm_backward(gpu, N, C, HW, G, gx, gdy, qg, gmean, ginv, NULL, gdg, gdb, 0);
        compare("groupnorm backward params only", gdg, dg, C, TOL_F32);
        compare("groupnorm backward params only", gdb, db, C, TOL_F32);
      }
      dev_free(gx), dev_free(gdy), dev_free(gg), dev_free(gb), dev_free(gy), dev_free(gdx);
      dev_free(gdg), dev_free(gdb), dev_free(gmean), dev_free(ginv);
      gt_free(x), gt_free(dy), gt_free(gamma), gt_free(beta), gt_free(y), gt_free(dx);
      gt_free(dg), gt_free(db), gt_free(mean), gt_free(invstd);
    }
  }
}

/* The lookup copies and the scatter-add adds in sample order on both: the same bits. */
static void test_embedding(void) {
  const int64_t shapes[3][3] = {{7, 10, 6}, {600, 100, 64}, {3, 1, 5}}; /* N, num, D */
  for (int k = 0; k < 3; k++) {
    const int64_t N = shapes[k][0], num = shapes[k][1], D = shapes[k][2];
    int32_t *ids = gt_alloc((size_t)N * sizeof *ids);
    for (int64_t n = 0; n < N; n++) ids[n] = (int32_t)((n * 37 + k) % num);
    float *w = host_rand(num * D, -1, 1, 600 + k), *dy = host_rand(N * D, -1, 1, 610 + k);
    float *dw = host_rand(num * D, -1, 1, 620 + k), *y = host_rand(N * D, 0, 0, 0);
    int32_t *gids = dev_bytes(ids, (size_t)N * sizeof *ids);
    float *gw = dev(w, num * D), *gdy = dev(dy, N * D), *gdw = dev(dw, num * D);
    float *gy = dev(NULL, N * D);
    ganfw_be_embedding_forward(cpu, N, D, ids, w, y);
    ganfw_be_embedding_forward(gpu, N, D, gids, gw, gy);
    compare("embedding forward", gy, y, N * D, 0.0);
    for (int acc = 1; acc >= 0; acc--) {
      ganfw_be_embedding_backward(cpu, N, num, D, ids, dy, dw, acc);
      ganfw_be_embedding_backward(gpu, N, num, D, gids, gdy, gdw, acc);
      compare(acc ? "embedding backward (accumulate)" : "embedding backward", gdw, dw, num * D,
              0.0);
    }
    dev_free(gids), dev_free(gw), dev_free(gdy), dev_free(gdw), dev_free(gy);
    gt_free(ids), gt_free(w), gt_free(dy), gt_free(dw), gt_free(y);
  }
}

static void test_transpose01(void) {
  const int64_t shapes[3][3] = {{5, 7, 3}, {512, 256, 16}, {1, 9, 1}}; /* A, B, C */
  for (int k = 0; k < 3; k++) {
    const int64_t n = shapes[k][0] * shapes[k][1] * shapes[k][2];
    float *x = host_rand(n, -1, 1, 630 + k), *y = host_rand(n, 0, 0, 0);
    float *gx = dev(x, n), *gy = dev(NULL, n);
    ganfw_be_transpose01(cpu, shapes[k][0], shapes[k][1], shapes[k][2], x, y);
    ganfw_be_transpose01(gpu, shapes[k][0], shapes[k][1], shapes[k][2], gx, gy);
    compare("transpose01", gy, y, n, 0.0);
    dev_free(gx), dev_free(gy);
    gt_free(x), gt_free(y);
  }
}

/* The values of t (any float dtype, any device) as f32 on the host, gt_alloc'ed. */
static float *net_values(ganfw_tensor *t) {
  ganfw_tensor *f = ganfw_tensor_as_dtype(t, GANFW_DTYPE_F32, GANFW_MEM_OTHER);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  float *v = gt_alloc((size_t)f->nbytes);
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(f, v, f->nbytes), GANFW_OK);
  ganfw_tensor_destroy(f);
  return v;
}

/* f32 (bf16 0): max relative error with a floor of FLOOR times the largest value; bf16: the
 * norm-relative error (a 16-bit weight gradient through spectral norm's subtraction). */
static void net_compare(const char *what, ganfw_tensor *got, ganfw_tensor *want, int bf16,
                        double tol) {
  CU_ASSERT_EQUAL_FATAL(got->numel, want->numel);
  if (bf16) {
    const double e = gt_tensor_norm_rel(got, want);
    record(what, e);
    CU_ASSERT(e <= tol);
    return;
  }
  float *g = net_values(got), *w = net_values(want);
  double scale = 1e-30;
  for (int64_t i = 0; i < got->numel; i++) scale = fmax(scale, fabs((double)w[i]));
  record(what, gt_check_close(what, g, w, got->numel, tol, FLOOR * scale));
  gt_free(g), gt_free(w);
}

/* labels -> embedding -> linear -> reshape -> conv_transpose2d -> leaky relu -> conv2d, the
 * matmul layers spectrally normalised (dim 0, 1, 0). */
static ganfw_net *embed_sn_net(ganfw_ctx *c) {
  const ganfw_host *h = ganfw_host_table();
  ganfw_net *net = h->net_create(c, "g");
  CU_ASSERT_EQUAL(h->net_embedding(net, "label", 10, 16), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_linear(net, "fc", 16, 128, 1), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_spectral_norm(net, "fc", 1, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_reshape(net, "shape", 8, 4, 4), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_conv_transpose2d(net, "up", 8, 4, 4, 2, 1, 0, 1), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_spectral_norm(net, "up", 2, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_activation(net, "act", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_conv2d(net, "out", 4, 3, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_spectral_norm(net, "out", 1, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(h->net_build(net, 1, 1, 1), GANFW_OK);
  return net;
}

/* The same net on the CPU and on the GPU (the GPU's parameters and u, v copied from the
 * CPU's), in f32 and in bf16 (the GPU's native 16-bit conv and linear with W / sigma rounded):
 * two training forwards and both backwards, then an eval forward; outputs, gradients, u, v and
 * sigma against the CPU's. */
static void test_embed_sn_net(void) {
  const int32_t dtypes[2] = {GANFW_DTYPE_F32, GANFW_DTYPE_BF16};
  for (int d = 0; d < 2; d++) {
    ganfw_ctx *c[2];
    ganfw_net *net[2];
    for (int k = 0; k < 2; k++) {
      ganfw_ctx_options opt = {
          .device_type = k ? GANFW_DEVICE_CUDA : GANFW_DEVICE_CPU, .threads = 2, .seed = 3};
      CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c[k]), GANFW_OK);
      net[k] = embed_sn_net(c[k]);
      CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net[k], dtypes[d]), GANFW_OK);
    }
    for (int64_t i = 0; i < ganfw_net_param_count(net[0]); i++) {
      ganfw_param_info a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
      CU_ASSERT_EQUAL(ganfw_net_param_info(net[0], i, &a), GANFW_OK);
      CU_ASSERT_EQUAL(ganfw_net_param_info(net[1], i, &b), GANFW_OK);
      float *v = net_values(a.value);
      CU_ASSERT_EQUAL(ganfw_tensor_from_host(b.value, v, b.value->nbytes), GANFW_OK);
      gt_free(v);
    }
    ganfw_net_buffer ba, bb;
    for (int64_t i = 0; ganfw_net_buffer_at(net[0], i, &ba); i++) {
      CU_ASSERT_FATAL(ganfw_net_buffer_at(net[1], i, &bb) && ba.tensor && bb.tensor);
      float *v = net_values(ba.tensor);
      CU_ASSERT_EQUAL(ganfw_tensor_from_host(bb.tensor, v, bb.tensor->nbytes), GANFW_OK);
      gt_free(v);
    }
    const int64_t N = 24, xs[4] = {N, 1, 1, 1}, ys[4] = {N, 3, 8, 8};
    float ids[24], *dyh = host_rand(N * 3 * 64, -1, 1, 640);
    for (int64_t n = 0; n < N; n++) ids[n] = (float)((n * 7) % 10);
    ganfw_tensor *y[2][3], *dx[2];
    for (int k = 0; k < 2; k++) {
      ganfw_tensor *x = ganfw_tensor_create(c[k], GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
      ganfw_tensor *dy = ganfw_tensor_create(c[k], GANFW_DTYPE_F32, 4, ys, GANFW_MEM_DATA, "dy");
      CU_ASSERT_FATAL(x && dy);
      CU_ASSERT_EQUAL(ganfw_tensor_from_host(x, ids, x->nbytes), GANFW_OK);
      CU_ASSERT_EQUAL(ganfw_tensor_from_host(dy, dyh, dy->nbytes), GANFW_OK);
      ganfw_tensor *dyc = ganfw_tensor_as_dtype(dy, dtypes[d], GANFW_MEM_DATA);
      ganfw_tape *t1 = ganfw_tape_create(net[k]), *t2 = ganfw_tape_create(net[k]);
      CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net[k], x, t1, &y[k][0]), GANFW_OK);
      CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net[k], x, t2, &y[k][1]), GANFW_OK);
      CU_ASSERT_EQUAL_FATAL(
          ganfw_net_backward(net[k], t2, dyc, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx[k]),
          GANFW_OK);
      CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(net[k], t1, dyc, GANFW_BWD_PARAM_GRAD, NULL),
                            GANFW_OK);
      ganfw_net_set_train(net[k], 0, 1);
      CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net[k], x, NULL, &y[k][2]), GANFW_OK);
      ganfw_tape_destroy(t1), ganfw_tape_destroy(t2);
      ganfw_tensor_destroy(x), ganfw_tensor_destroy(dy), ganfw_tensor_destroy(dyc);
    }
    const double tol = d ? TOL_F16 : TOL_F32;
    const char *what = d ? "embed+sn net bf16" : "embed+sn net f32";
    for (int i = 0; i < 3; i++) net_compare(what, y[1][i], y[0][i], d, tol);
    net_compare("embed+sn net ids' gradient", dx[1], dx[0], 0, 0.0); /* zeros */
    for (int64_t i = 0; i < ganfw_net_param_count(net[0]); i++) {
      ganfw_param_info a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
      CU_ASSERT_EQUAL(ganfw_net_param_info(net[0], i, &a), GANFW_OK);
      CU_ASSERT_EQUAL(ganfw_net_param_info(net[1], i, &b), GANFW_OK);
      net_compare(what, b.grad, a.grad, d, tol);
    }
    for (int64_t i = 0; ganfw_net_buffer_at(net[0], i, &ba); i++) {
      CU_ASSERT_FATAL(ganfw_net_buffer_at(net[1], i, &bb));
      net_compare("embed+sn net u, v", bb.tensor, ba.tensor, 0, TOL_F32);
    }
    const char *sn[3] = {"fc", "up", "out"};
    for (int i = 0; i < 3; i++) {
      double s[2];
      for (int k = 0; k < 2; k++)
        CU_ASSERT_EQUAL(ganfw_net_spectral_norm_sigma(net[k], sn[i], &s[k]), GANFW_OK);
      record("embed+sn net sigma", fabs(s[1] / s[0] - 1.0));
      CU_ASSERT(fabs(s[1] / s[0] - 1.0) < 1e-5);
    }
    for (int k = 0; k < 2; k++) {
      for (int i = 0; i < 3; i++) ganfw_tensor_destroy(y[k][i]);
      ganfw_tensor_destroy(dx[k]);
      ganfw_net_destroy(net[k]);
      ganfw_ctx_destroy(c[k]);
    }
    gt_free(dyh);
  }
}

static void test_dropout(void) {
  const int64_t n = 1003;
  const float p = 0.3f;
  float *x = host_rand(n, -1, 1, 80), *dy = host_rand(n, -1, 1, 81);
  float *y = host_rand(n, 0, 0, 0), *dx = host_rand(n, 0, 0, 0);
  uint8_t *mask = gt_alloc((size_t)n), *gmask_h = gt_alloc((size_t)n);
  float *gx = dev(x, n), *gdy = dev(dy, n), *gy = dev(NULL, n), *gdx = dev(NULL, n);
  uint8_t *gmask = dev_bytes(NULL, (size_t)n);
  ganfw_be_dropout_forward(cpu, n, p, 1234, 77, x, y, mask);
  ganfw_be_dropout_forward(gpu, n, p, 1234, 77, gx, gy, gmask);
  compare("dropout forward", gy, y, n, 0.0); /* the same Philox bits: exact */
  CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, gmask_h, gmask, (size_t)n), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(gmask_h, mask, (size_t)n), 0);
  ganfw_be_dropout_backward(cpu, n, p, mask, dy, dx);
  ganfw_be_dropout_backward(gpu, n, p, gmask, gdy, gdx);
  compare("dropout backward", gdx, dx, n, 0.0);
  dev_free(gx), dev_free(gdy), dev_free(gy), dev_free(gdx), dev_free(gmask);
  gt_free(x), gt_free(dy), gt_free(y), gt_free(dx), gt_free(mask), gt_free(gmask_h);
}

/* --- losses ---------------------------------------------------------------------------------- */
static void test_losses(void) {
  const int64_t n = 64, N = 17, classes = 10;
  float *logits = host_rand(n, -10, 10, 90), *targets = host_rand(n, 0, 1, 91);
  float loss = 0, *dx = host_rand(n, 0, 0, 0);
  float *gl = dev(logits, n), *gt = dev(targets, n), *gloss = dev(NULL, 1), *gdx = dev(NULL, n);
  ganfw_be_bce_logits_forward(cpu, n, logits, targets, &loss);
  ganfw_be_bce_logits_forward(gpu, n, gl, gt, gloss);
  compare("bce_logits forward", gloss, &loss, 1, TOL_F32);
  ganfw_be_bce_logits_backward(cpu, n, logits, targets, 0.5f, dx);
  ganfw_be_bce_logits_backward(gpu, n, gl, gt, 0.5f, gdx);
  compare("bce_logits backward", gdx, dx, n, TOL_F32);
  dev_free(gl), dev_free(gt), dev_free(gdx);
  gt_free(logits), gt_free(targets), gt_free(dx);

  float *x = host_rand(N * classes, -5, 5, 92), *d = host_rand(N * classes, 0, 0, 0);
  int32_t labels[17];
  for (int i = 0; i < N; i++) labels[i] = (i * 7) % (int)classes;
  labels[3] = -1; /* outside [0, classes): adds nothing on either backend */
  float *gxl = dev(x, N * classes), *gd = dev(NULL, N * classes);
  int32_t *glab = dev_bytes(labels, sizeof labels);
  for (int k = 0; k < 2; k++) { /* without and with label smoothing */
    const double eps = k ? 0.1 : 0.0;
    ganfw_be_softmax_xent_forward(cpu, N, classes, x, labels, eps, &loss);
    ganfw_be_softmax_xent_forward(gpu, N, classes, gxl, glab, eps, gloss);
    compare(k ? "softmax_xent forward (smoothing 0.1)" : "softmax_xent forward", gloss, &loss, 1,
            TOL_F32);
    ganfw_be_softmax_xent_backward(cpu, N, classes, x, labels, eps, 2.0f, d);
    ganfw_be_softmax_xent_backward(gpu, N, classes, gxl, glab, eps, 2.0f, gd);
    compare(k ? "softmax_xent backward (smoothing 0.1)" : "softmax_xent backward", gd, d,
            N * classes, TOL_F32);
  }
  dev_free(gxl), dev_free(gd), dev_free(glab), dev_free(gloss);
  gt_free(x), gt_free(d);
}

/* --- foreach and reductions: the CPU's rounding, so to 1e-6 (in practice the same bits) --- */
static void test_foreach(void) {
  const int64_t n = 100003;
  float *a = host_rand(n, -2, 2, 100), *b = host_rand(n, 0.5f, 2, 101);
  float *y = host_rand(n, -1, 1, 102), *out = host_rand(n, 0, 0, 0);
  float *ga = dev(a, n), *gb = dev(b, n), *gy = dev(y, n), *gout = dev(NULL, n);
#define FOREACH_CHECK(what, cpu_call, gpu_call, dres, hres)                                        \
  do {                                                                                             \
    cpu_call;                                                                                      \
    gpu_call;                                                                                      \
    compare(what, dres, hres, n, 1e-6);                                                            \
  } while (0)
  FOREACH_CHECK("fill", ganfw_be_fill(cpu, n, out, 0.25f), ganfw_be_fill(gpu, n, gout, 0.25f), gout,
                out);
  FOREACH_CHECK("scale", ganfw_be_scale(cpu, n, y, 0.9f), ganfw_be_scale(gpu, n, gy, 0.9f), gy, y);
  FOREACH_CHECK("add_scalar", ganfw_be_add_scalar(cpu, n, y, 0.1f),
                ganfw_be_add_scalar(gpu, n, gy, 0.1f), gy, y);
  FOREACH_CHECK("add", ganfw_be_add(cpu, n, out, a, b), ganfw_be_add(gpu, n, gout, ga, gb), gout,
                out);
  FOREACH_CHECK("axpy", ganfw_be_axpy(cpu, n, y, -0.3f, a), ganfw_be_axpy(gpu, n, gy, -0.3f, ga),
                gy, y);
  FOREACH_CHECK("mul", ganfw_be_mul(cpu, n, out, a, b), ganfw_be_mul(gpu, n, gout, ga, gb), gout,
                out);
  FOREACH_CHECK("addcmul", ganfw_be_addcmul(cpu, n, y, 0.7f, a, b),
                ganfw_be_addcmul(gpu, n, gy, 0.7f, ga, gb), gy, y);
  FOREACH_CHECK("addcdiv", ganfw_be_addcdiv(cpu, n, y, -0.4f, a, b),
                ganfw_be_addcdiv(gpu, n, gy, -0.4f, ga, gb), gy, y);
  FOREACH_CHECK("sqrt", ganfw_be_sqrt(cpu, n, out, b), ganfw_be_sqrt(gpu, n, gout, gb), gout, out);
  FOREACH_CHECK("lerp", ganfw_be_lerp(cpu, n, y, a, 0.1f), ganfw_be_lerp(gpu, n, gy, ga, 0.1f), gy,
                y);
  FOREACH_CHECK("lerp", ganfw_be_lerp(cpu, n, y, a, 0.9f), ganfw_be_lerp(gpu, n, gy, ga, 0.9f), gy,
                y);
  FOREACH_CHECK("maximum", ganfw_be_maximum(cpu, n, y, a), ganfw_be_maximum(gpu, n, gy, ga), gy, y);
#undef FOREACH_CHECK
  /* reductions in double: the same to ~1e-12 */
  const double s_cpu = ganfw_be_sum(cpu, n, a), s_gpu = ganfw_be_sum(gpu, n, ga);
  const double q_cpu = ganfw_be_sumsq(cpu, n, a), q_gpu = ganfw_be_sumsq(gpu, n, ga);
  CU_ASSERT(fabs(s_cpu - s_gpu) <= 1e-9 * (fabs(s_cpu) + 1.0));
  CU_ASSERT(fabs(q_cpu - q_gpu) <= 1e-9 * fabs(q_cpu));
  record("sum, sumsq (abs err / value)", fabs(q_cpu - q_gpu) / fabs(q_cpu));
  CU_ASSERT_EQUAL(ganfw_be_nonfinite(gpu, n, ga), 0);
  float bad[2] = {INFINITY, NAN};
  for (int k = 0; k < 2; k++) {
    CU_ASSERT_EQUAL(gpu->vt->copy_h2d(gpu, ga + n - 1 - k * 5000, &bad[k], sizeof(float)),
                    GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_be_nonfinite(gpu, n, ga), 1);
    CU_ASSERT_EQUAL(
        gpu->vt->copy_h2d(gpu, ga + n - 1 - k * 5000, &a[n - 1 - k * 5000], sizeof(float)),
        GANFW_OK);
  }
  CU_ASSERT_EQUAL(ganfw_be_nonfinite(gpu, n, ga), 0);
  /* nonfinite_many: one answer over three buffers (parts of ga, gb, gy), the bad value in
   * the last; a zero-length buffer in the list is allowed */
  const ganfw_op many = {.kind = GANFW_OP_NONFINITE_MANY};
  CU_ASSERT_FATAL(ganfw_backend_supports(gpu, &many));
  const float *lists[4] = {ga, gb, ga, gy};
  const int64_t counts[4] = {n, n / 2, 0, n};
  CU_ASSERT_EQUAL(ganfw_be_nonfinite_many(gpu, 4, lists, counts), 0);
  CU_ASSERT_EQUAL(gpu->vt->copy_h2d(gpu, gy + n - 1, &bad[1], sizeof(float)), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_be_nonfinite_many(gpu, 4, lists, counts), 1);
  CU_ASSERT_EQUAL(ganfw_be_nonfinite_many(gpu, 3, lists, counts), 0); /* without gy */
  CU_ASSERT_EQUAL(gpu->vt->copy_h2d(gpu, gy, y, (size_t)n * sizeof(float)), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_be_nonfinite_many(gpu, 4, lists, counts), 0);
  /* d2d copy */
  CU_ASSERT_EQUAL(gpu->vt->copy_d2d(gpu, gout, ga, (size_t)n * sizeof(float)), GANFW_OK);
  compare("copy_d2d", gout, a, n, 0.0);
  expect_no_error("foreach");
  dev_free(ga), dev_free(gb), dev_free(gy), dev_free(gout);
  gt_free(a), gt_free(b), gt_free(y), gt_free(out);
}

/* --- casts: every f16/bf16 pattern and a sweep of f32 ones, bit for bit ---------------------- */
static void test_casts(void) {
  const int64_t nh = 65536, nf = 200000;
  uint16_t *h = gt_alloc((size_t)nh * 2), *h_cpu = gt_alloc((size_t)nf * 2);
  uint16_t *h_gpu = gt_alloc((size_t)nf * 2);
  float *f = gt_alloc((size_t)nf * 4), *f_cpu = gt_alloc((size_t)nh * 4);
  float *f_gpu = gt_alloc((size_t)nh * 4);
  for (int64_t i = 0; i < nh; i++) h[i] = (uint16_t)i;
  /* f32 patterns: a multiplicative sweep of bit patterns, then special values */
  for (int64_t i = 0; i < nf; i++) {
    uint32_t u = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i << 7);
    memcpy(&f[i], &u, 4);
  }
  const float special[] = {0.0f,      -0.0f,    INFINITY, -INFINITY, NAN,     65504.0f, 65520.0f,
                           65519.99f, 5.96e-8f, 2.98e-8f, 1e-45f,    3.4e38f, -1.0f,    0.1f};
  memcpy(f, special, sizeof special);
  uint16_t *gh = dev_bytes(h, (size_t)nh * 2), *gh_out = dev_bytes(NULL, (size_t)nf * 2);
  float *gf = dev(f, nf), *gf_out = dev(NULL, nh);
  const char *what[4] = {"f32_to_f16", "f16_to_f32", "f32_to_bf16", "bf16_to_f32"};
  for (int k = 0; k < 4; k++) {
    const int to_half = k % 2 == 0;
    if (k == 0) ganfw_be_f32_to_f16(cpu, nf, f, h_cpu), ganfw_be_f32_to_f16(gpu, nf, gf, gh_out);
    if (k == 1) ganfw_be_f16_to_f32(cpu, nh, h, f_cpu), ganfw_be_f16_to_f32(gpu, nh, gh, gf_out);
    if (k == 2) ganfw_be_f32_to_bf16(cpu, nf, f, h_cpu), ganfw_be_f32_to_bf16(gpu, nf, gf, gh_out);
    if (k == 3) ganfw_be_bf16_to_f32(cpu, nh, h, f_cpu), ganfw_be_bf16_to_f32(gpu, nh, gh, gf_out);
    expect_no_error(what[k]);
    int same;
    if (to_half) {
      CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, h_gpu, gh_out, (size_t)nf * 2), GANFW_OK);
      same = memcmp(h_gpu, h_cpu, (size_t)nf * 2) == 0;
    } else {
      CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, f_gpu, gf_out, (size_t)nh * 4), GANFW_OK);
      same = memcmp(f_gpu, f_cpu, (size_t)nh * 4) == 0;
    }
    if (!same) printf("\n  %s: the GPU's bits differ from the CPU's\n", what[k]);
    CU_ASSERT(same);
    record(what[k], same ? 0.0 : 1.0);
  }
  dev_free(gh), dev_free(gh_out), dev_free(gf), dev_free(gf_out);
  gt_free(h), gt_free(h_cpu), gt_free(h_gpu), gt_free(f), gt_free(f_cpu), gt_free(f_gpu);
}

/* --- Philox --------------------------------------------------------------------------------- */
static void test_rng(void) {
  const int64_t n = 100001;
  float *u = host_rand(n, 0, 0, 0), *z = host_rand(n, 0, 0, 0);
  float *gu = dev(NULL, n), *gz = dev(NULL, n);
  ganfw_be_rng_uniform(cpu, n, 42, 12345, -1.0f, 3.0f, u);
  ganfw_be_rng_uniform(gpu, n, 42, 12345, -1.0f, 3.0f, gu);
  compare("rng_uniform", gu, u, n, 0.0); /* bit for bit */
  ganfw_be_rng_normal(cpu, n, 42, 999, 0.5f, 0.02f, z);
  ganfw_be_rng_normal(gpu, n, 42, 999, 0.5f, 0.02f, gz);
  compare("rng_normal", gz, z, n, 1e-5); /* the device's logf/sinf/cosf ulps */
  /* a different offset gives different numbers */
  ganfw_be_rng_uniform(gpu, n, 42, 12346, -1.0f, 3.0f, gu);
  expect_no_error("rng");
  float first = 0;
  CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, &first, gu, sizeof first), GANFW_OK);
  CU_ASSERT_NOT_EQUAL(first, u[0]);
  CU_ASSERT_EQUAL(first, u[4]); /* block 12346 is block 12345 + 1 */
  dev_free(gu), dev_free(gz);
  gt_free(u), gt_free(z);
}

/* --- AMP as the executor runs it: inputs rounded to f16 on the GPU, f32 accumulation ---------- */
static void test_f16_rounded_conv(void) {
  ganfw_conv2d_shape s = {.N = 8,
                          .C = 32,
                          .H = 16,
                          .W = 16,
                          .K = 64,
                          .R = 4,
                          .S = 4,
                          .stride_h = 2,
                          .stride_w = 2,
                          .pad_h = 1,
                          .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  const int64_t nx = s.N * s.C * s.H * s.W, nw = s.K * s.C * s.R * s.S, ny = s.N * s.K * s.P * s.Q;
  float *x = host_rand(nx, -1, 1, 110), *w = host_rand(nw, -0.1f, 0.1f, 111);
  float *y = host_rand(ny, 0, 0, 0);
  float *gx = dev(x, nx), *gw = dev(w, nw), *gy = dev(NULL, ny);
  uint16_t *half = dev_bytes(NULL, (size_t)(nx > nw ? nx : nw) * 2);
  ganfw_be_f32_to_f16(gpu, nx, gx, half), ganfw_be_f16_to_f32(gpu, nx, half, gx);
  ganfw_be_f32_to_f16(gpu, nw, gw, half), ganfw_be_f16_to_f32(gpu, nw, half, gw);
  /* the CPU reference gets the same rounded inputs (AMP rounds both operands to f16 and
   * accumulates in f32 on every backend): what differs is only the backends' summation */
  CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, x, gx, (size_t)nx * 4), GANFW_OK);
  CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, w, gw, (size_t)nw * 4), GANFW_OK);
  void *cws = gt_alloc(ganfw_be_conv2d_workspace(cpu, &s) + 64);
  const size_t ws_bytes = ganfw_be_conv2d_workspace(gpu, &s);
  void *gws = ws_bytes ? dev_bytes(NULL, ws_bytes) : NULL;
  ganfw_be_conv2d_forward(cpu, &s, x, w, NULL, y, cws);
  ganfw_be_conv2d_forward(gpu, &s, gx, gw, NULL, gy, gws);
  compare("conv2d, f16-rounded inputs", gy, y, ny, TOL_F16);
  dev_free(gx), dev_free(gw), dev_free(gy), dev_free(half);
  if (gws) dev_free(gws);
  gt_free(x), gt_free(w), gt_free(y), gt_free(cws);
}

/* --- native 16-bit ops against the CPU's f32 ops on the same rounded values -----------------
 * Inputs and weights are rounded to the dtype on the host with the CPU's casts; the CPU runs
 * the f32 op on the rounded values, the GPU the op in the dtype on their 16-bit bits; 16-bit
 * outputs come back through the CPU's cast. What may differ: the summation order, the
 * rounding of each 16-bit output (and of a 16-bit weight gradient inside the backend),
 * hence TOL_F16. Output buffers start as NaN (all bits set), so an output the op does not
 * write, or one it adds to when it should overwrite, fails. A group the backend does not
 * support in the dtype (ganfw_be_lp_ops) is skipped with a line saying so (test_lp_ops
 * requires all of f16). */
static const int32_t lp_dtypes[2] = {GANFW_DTYPE_F16, GANFW_DTYPE_BF16};

static const char *dtype_name(int32_t dtype) {
  return dtype == GANFW_DTYPE_F16 ? "f16" : "bf16";
}

static uint32_t lp_mask(int32_t dtype) {
  return ganfw_be_lp_ops(gpu, dtype);
}

/* 1 when the GPU claims `group` for dtype; else prints that the group is skipped. */
static int lp_has(int32_t dtype, uint32_t group, const char *group_name) {
  if (lp_mask(dtype) & group) return 1;
  printf("\n  %s %s: not supported natively, skipped", group_name, dtype_name(dtype));
  return 0;
}

/* Rounds x[0..n) to dtype in place with the CPU's casts; returns the 16-bit bits (gt_free). */
static uint16_t *round16(int32_t dtype, float *x, int64_t n) {
  uint16_t *h = gt_alloc((size_t)(n > 0 ? n : 1) * sizeof(uint16_t));
  if (dtype == GANFW_DTYPE_F16) {
    ganfw_be_f32_to_f16(cpu, n, x, h);
    ganfw_be_f16_to_f32(cpu, n, h, x);
  } else {
    ganfw_be_f32_to_bf16(cpu, n, x, h);
    ganfw_be_bf16_to_f32(cpu, n, h, x);
  }
  return h;
}

/* Random values in [lo, hi) rounded to dtype; *bits gets their 16-bit copy. */
static float *host_rand16(int32_t dtype, int64_t n, float lo, float hi, uint64_t seed,
                          uint16_t **bits) {
  float *h = host_rand(n, lo, hi, seed);
  *bits = round16(dtype, h, n);
  return h;
}

/* Sets bytes of device memory to all ones: NaN in f32, f16 and bf16. */
static void dev_poison(void *d, size_t bytes) {
  if (!bytes) return;
  unsigned char *ones = gt_alloc(bytes);
  memset(ones, 0xff, bytes);
  CU_ASSERT_EQUAL(gpu->vt->copy_h2d(gpu, d, ones, bytes), GANFW_OK);
  gt_free(ones);
}

/* A device buffer of bytes, all NaN. */
static void *dev_nan(size_t bytes) {
  void *d = dev_bytes(NULL, bytes);
  dev_poison(d, bytes);
  return d;
}

/* Compares n values at device d (16-bit in dtype when is16, else f32) with want, recording
 * the worst error under "<entry> <dtype>[ <out>]"; `detail` names the case on failure.
 * before: for a parameter gradient added to (accumulate=1), the values it held before the
 * call; both sides are compared less these, so that the error is relative to the gradient
 * computed (which the backend may round to 16 bits, see op.h on dtype) rather than to a
 * sum that may cancel. NULL otherwise. */
static void compare_lp_core(const char *entry, int32_t dtype, const char *out, const char *detail,
                            const void *d, int is16, const float *want, const float *before,
                            int64_t n) {
  char key[64], label[192];
  snprintf(key, sizeof key, "%s %s%s%s", entry, dtype_name(dtype), out ? " " : "", out ? out : "");
  snprintf(label, sizeof label, "%s [%s]%s", key, detail,
           before ? " (added to: the sum less the values before)" : "");
  expect_no_error(label);
  const size_t cap = (size_t)(n > 0 ? n : 1);
  float *got = gt_alloc(cap * sizeof(float)), *delta = NULL;
  if (is16) {
    uint16_t *bits = gt_alloc(cap * sizeof(uint16_t));
    CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, bits, d, (size_t)n * sizeof(uint16_t)), GANFW_OK);
    if (dtype == GANFW_DTYPE_F16)
      ganfw_be_f16_to_f32(cpu, n, bits, got);
    else
      ganfw_be_bf16_to_f32(cpu, n, bits, got);
    gt_free(bits);
  } else {
    CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, got, d, (size_t)n * sizeof(float)), GANFW_OK);
  }
  if (before) {
    delta = gt_alloc(cap * sizeof(float));
    for (int64_t i = 0; i < n; i++) got[i] -= before[i], delta[i] = want[i] - before[i];
    want = delta;
  }
  record(key, gt_check_close(label, got, want, n, TOL_F16, FLOOR));
  gt_free(got);
  if (delta) gt_free(delta);
}

static void compare_lp(const char *entry, int32_t dtype, const char *out, const char *detail,
                       const void *d, int is16, const float *want, int64_t n) {
  compare_lp_core(entry, dtype, out, detail, d, is16, want, NULL, n);
}

/* An f32 parameter gradient at d added to values `before`. */
static void compare_lp_added(const char *entry, int32_t dtype, const char *out, const char *detail,
                             const float *d, const float *want, const float *before, int64_t n) {
  compare_lp_core(entry, dtype, out, detail, d, 0, want, before, n);
}

/* The ops of each GANFW_LP_* group (backend.h), all supported in a dtype or none. */
static const struct {
  uint32_t group;
  int32_t kinds[4];
  int n;
} lp_groups[4] = {
    {GANFW_LP_CONV,
     {GANFW_OP_CONV2D_FORWARD, GANFW_OP_CONV2D_BACKWARD, GANFW_OP_CONVT2D_FORWARD,
      GANFW_OP_CONVT2D_BACKWARD},
     4},
    {GANFW_LP_LINEAR, {GANFW_OP_LINEAR_FORWARD, GANFW_OP_LINEAR_BACKWARD}, 2},
    {GANFW_LP_BATCHNORM,
     {GANFW_OP_BATCHNORM2D_TRAIN, GANFW_OP_BATCHNORM2D_EVAL, GANFW_OP_BATCHNORM2D_BACKWARD},
     3},
    {GANFW_LP_ACT, {GANFW_OP_ACT_FORWARD, GANFW_OP_ACT_BACKWARD}, 2},
};

/* lp_ops: f16 has every group on CUDA (the point of the native path); the backend supports
 * every op of a claimed group of either dtype, and none of a group it does not claim; no
 * unknown bits. */
static void test_lp_ops(void) {
  const uint32_t all = GANFW_LP_CONV | GANFW_LP_LINEAR | GANFW_LP_BATCHNORM | GANFW_LP_ACT;
  printf("\n  lp_ops: f16 0x%x, bf16 0x%x (conv 1, linear 2, batchnorm 4, act 8)",
         (unsigned)lp_mask(GANFW_DTYPE_F16), (unsigned)lp_mask(GANFW_DTYPE_BF16));
  CU_ASSERT_EQUAL(lp_mask(GANFW_DTYPE_F16), all);
  for (int i = 0; i < 2; i++) {
    const uint32_t m = lp_mask(lp_dtypes[i]);
    CU_ASSERT_EQUAL(m & ~all, 0u);
    for (int g = 0; g < 4; g++)
      for (int k = 0; k < lp_groups[g].n; k++) {
        const ganfw_op op = {.kind = lp_groups[g].kinds[k], .dtype = lp_dtypes[i]};
        const int32_t want = (m & lp_groups[g].group) != 0;
        if (ganfw_backend_supports(gpu, &op) != want)
          printf("\n  %s %s: supports %d, its group %s", ganfw_op_name(op.kind),
                 dtype_name(lp_dtypes[i]), (int)!want, want ? "claimed" : "not claimed");
        CU_ASSERT_EQUAL(ganfw_backend_supports(gpu, &op), want);
      }
  }
}

/* One conv2d or conv_transpose2d shape: forward; backward into all three gradients with
 * accumulate=1 on random dw, db; the filter gradient alone (w NULL, accumulate 0); the data
 * gradient alone. One workspace of exactly the 16-bit op's size for all of them. */
static void conv_lp_case(int32_t dtype, int transposed, ganfw_conv2d_shape cs,
                         ganfw_convt2d_shape ts, int bias, int benchmark) {
  CU_ASSERT_EQUAL_FATAL(transposed ? ganfw_convt2d_shape_init(&ts) : ganfw_conv2d_shape_init(&cs),
                        GANFW_OK);
  ganfw_cuda_set_cudnn_benchmark(gpu, benchmark);
  const int64_t N = transposed ? ts.N : cs.N, C = transposed ? ts.C : cs.C,
                H = transposed ? ts.H : cs.H, W = transposed ? ts.W : cs.W,
                K = transposed ? ts.K : cs.K, RS = transposed ? ts.R * ts.S : cs.R * cs.S,
                PQ = transposed ? ts.P * ts.Q : cs.P * cs.Q;
  const int64_t nx = N * C * H * W, nw = K * C * RS, ny = N * K * PQ;
  const char *fwd = transposed ? "convt2d_forward_lp" : "conv2d_forward_lp";
  const char *bwd = transposed ? "convt2d_backward_lp" : "conv2d_backward_lp";
  char detail[128];
  snprintf(detail, sizeof detail, "N%lld C%lld %lldx%lld -> K%lld %lldx%lld%s%s", (long long)N,
           (long long)C, (long long)H, (long long)W, (long long)K,
           (long long)(transposed ? ts.P : cs.P), (long long)(transposed ? ts.Q : cs.Q),
           bias ? ", bias" : "", benchmark ? ", cudnn_benchmark" : "");

  uint16_t *xh, *wh, *dyh;
  float *x = host_rand16(dtype, nx, -1, 1, 120, &xh), *w = host_rand16(dtype, nw, -1, 1, 121, &wh);
  float *dy = host_rand16(dtype, ny, -1, 1, 123, &dyh), *b = host_rand(K, -1, 1, 122);
  float *y = host_rand(ny, 0, 0, 0), *dx = host_rand(nx, 0, 0, 0);
  float *dw = host_rand(nw, -1, 1, 124), *db = host_rand(K, -1, 1, 125);
  float *dw0 = host_rand(nw, -1, 1, 124), *db0 = host_rand(K, -1, 1, 125); /* dw, db before */
  void *gx = dev_bytes(xh, (size_t)nx * 2), *gw = dev_bytes(wh, (size_t)nw * 2);
  void *gdy = dev_bytes(dyh, (size_t)ny * 2), *gy = dev_nan((size_t)ny * 2);
  void *gdx = dev_nan((size_t)nx * 2);
  float *gb = dev(b, K), *gdw = dev(dw, nw), *gdb = dev(db, K);
  const size_t cws_bytes =
      transposed ? ganfw_be_convt2d_workspace(cpu, &ts) : ganfw_be_conv2d_workspace(cpu, &cs);
  void *cws = gt_alloc(cws_bytes + 64);
  const size_t ws_bytes = transposed ? ganfw_be_convt2d_workspace_lp(gpu, dtype, &ts)
                                     : ganfw_be_conv2d_workspace_lp(gpu, dtype, &cs);
  void *gws = ws_bytes ? dev_nan(ws_bytes) : NULL; /* exactly the bytes asked for */
  expect_no_error(transposed ? "convt2d_workspace_lp" : "conv2d_workspace_lp");
  const float *pb = bias ? b : NULL, *qb = bias ? gb : NULL;
  float *pdb = bias ? db : NULL, *qdb = bias ? gdb : NULL;

#define CPU_FWD(...)                                                                               \
  (transposed ? ganfw_be_convt2d_forward(cpu, &ts, __VA_ARGS__)                                    \
              : ganfw_be_conv2d_forward(cpu, &cs, __VA_ARGS__))
#define GPU_FWD(...)                                                                               \
  (transposed ? ganfw_be_convt2d_forward_lp(gpu, dtype, &ts, __VA_ARGS__)                          \
              : ganfw_be_conv2d_forward_lp(gpu, dtype, &cs, __VA_ARGS__))
#define CPU_BWD(...)                                                                               \
  (transposed ? ganfw_be_convt2d_backward(cpu, &ts, __VA_ARGS__)                                   \
              : ganfw_be_conv2d_backward(cpu, &cs, __VA_ARGS__))
#define GPU_BWD(...)                                                                               \
  (transposed ? ganfw_be_convt2d_backward_lp(gpu, dtype, &ts, __VA_ARGS__)                         \
              : ganfw_be_conv2d_backward_lp(gpu, dtype, &cs, __VA_ARGS__))
  CPU_FWD(x, w, pb, y, cws);
  GPU_FWD(gx, gw, qb, gy, gws);
  compare_lp(fwd, dtype, NULL, detail, gy, 1, y, ny);
  /* every gradient, accumulating into the random dw, db */
  CPU_BWD(x, w, dy, dx, dw, pdb, 1, cws);
  GPU_BWD(gx, gw, gdy, gdx, gdw, qdb, 1, gws);
  compare_lp(bwd, dtype, "dx", detail, gdx, 1, dx, nx);
  compare_lp_added(bwd, dtype, "dw", detail, gdw, dw, dw0, nw);
  if (bias) compare_lp_added(bwd, dtype, "db", detail, gdb, db, db0, K);
  /* parameter gradients only, overwritten (NaN before), no w */
  dev_poison(gdw, (size_t)nw * sizeof(float));
  dev_poison(gdb, (size_t)K * sizeof(float));
  CPU_BWD(x, w, dy, NULL, dw, pdb, 0, cws);
  GPU_BWD(gx, NULL, gdy, NULL, gdw, qdb, 0, gws);
  compare_lp(bwd, dtype, "dw", detail, gdw, 0, dw, nw);
  if (bias) compare_lp(bwd, dtype, "db", detail, gdb, 0, db, K);
  /* the data gradient only (D in the G step) */
  dev_poison(gdx, (size_t)nx * 2);
  CPU_BWD(x, w, dy, dx, NULL, NULL, 0, cws);
  GPU_BWD(gx, gw, gdy, gdx, NULL, NULL, 0, gws);
  compare_lp(bwd, dtype, "dx", detail, gdx, 1, dx, nx);
#undef CPU_FWD
#undef GPU_FWD
#undef CPU_BWD
#undef GPU_BWD

  dev_free(gx), dev_free(gw), dev_free(gdy), dev_free(gy), dev_free(gdx), dev_free(gb);
  dev_free(gdw), dev_free(gdb);
  if (gws) dev_free(gws);
  gt_free(cws), gt_free(x), gt_free(w), gt_free(dy), gt_free(b), gt_free(y), gt_free(dx);
  gt_free(dw), gt_free(db), gt_free(dw0), gt_free(db0), gt_free(xh), gt_free(wh), gt_free(dyh);
  ganfw_cuda_set_cudnn_benchmark(gpu, 0);
}

/* DC-GAN's convolutions, small: D's first layer (3 channels, k4 s2 p1), a middle one
 * (channels a multiple of 8: tensor-core algorithms), the last (4x4 -> 1x1, k4 s1 p0); the
 * first shape is also test_conv2d's, so a plan cache that ignores the dtype shows here. */
static void test_lp_conv2d(void) {
  const ganfw_conv2d_shape shapes[] = {
      {.N = 4,
       .C = 3,
       .H = 16,
       .W = 16,
       .K = 8,
       .R = 4,
       .S = 4,
       .stride_h = 2,
       .stride_w = 2,
       .pad_h = 1,
       .pad_w = 1},
      {.N = 4,
       .C = 16,
       .H = 8,
       .W = 8,
       .K = 32,
       .R = 4,
       .S = 4,
       .stride_h = 2,
       .stride_w = 2,
       .pad_h = 1,
       .pad_w = 1},
      {.N = 2, .C = 16, .H = 4, .W = 4, .K = 1, .R = 4, .S = 4, .stride_h = 1, .stride_w = 1},
  };
  const ganfw_convt2d_shape none = {0};
  for (int d = 0; d < 2; d++) {
    if (!lp_has(lp_dtypes[d], GANFW_LP_CONV, "conv")) continue;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      conv_lp_case(lp_dtypes[d], 0, shapes[i], none, i == 0, 0);
    conv_lp_case(lp_dtypes[d], 0, shapes[1], none, 0, 1); /* cudnnFind's choice */
  }
}

/* G's transposed convolutions, small: the first (1x1 -> 4x4, k4 s1 p0), a middle one and
 * the last (3 channels out, k4 s2 p1). */
static void test_lp_convt2d(void) {
  const ganfw_convt2d_shape shapes[] = {
      {.N = 4, .C = 16, .H = 1, .W = 1, .K = 8, .R = 4, .S = 4, .stride_h = 1, .stride_w = 1},
      {.N = 4,
       .C = 32,
       .H = 4,
       .W = 4,
       .K = 16,
       .R = 4,
       .S = 4,
       .stride_h = 2,
       .stride_w = 2,
       .pad_h = 1,
       .pad_w = 1},
      {.N = 2,
       .C = 8,
       .H = 4,
       .W = 4,
       .K = 3,
       .R = 4,
       .S = 4,
       .stride_h = 2,
       .stride_w = 2,
       .pad_h = 1,
       .pad_w = 1},
  };
  const ganfw_conv2d_shape none = {0};
  for (int d = 0; d < 2; d++) {
    if (!lp_has(lp_dtypes[d], GANFW_LP_CONV, "convT")) continue;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      conv_lp_case(lp_dtypes[d], 1, none, shapes[i], i == 2, 0);
    conv_lp_case(lp_dtypes[d], 1, none, shapes[1], 0, 1); /* cudnnFind's choice */
  }
}

/* linear: forward, backward into every gradient (accumulate=1 with a bias, overwriting NaN
 * without), then dw alone with w NULL. */
static void linear_lp_case(int32_t dtype, int64_t N, int64_t IN, int64_t OUT, int bias) {
  char detail[96];
  snprintf(detail, sizeof detail, "N%lld IN%lld OUT%lld%s", (long long)N, (long long)IN,
           (long long)OUT, bias ? ", bias, accumulate" : "");
  const int acc = bias;
  uint16_t *xh, *wh, *dyh;
  float *x = host_rand16(dtype, N * IN, -1, 1, 130, &xh);
  float *w = host_rand16(dtype, OUT * IN, -1, 1, 131, &wh);
  float *dy = host_rand16(dtype, N * OUT, -1, 1, 133, &dyh), *b = host_rand(OUT, -1, 1, 132);
  float *y = host_rand(N * OUT, 0, 0, 0), *dx = host_rand(N * IN, 0, 0, 0);
  float *dw = host_rand(OUT * IN, -1, 1, 134), *db = host_rand(OUT, -1, 1, 135);
  float *dw0 = host_rand(OUT * IN, -1, 1, 134), *db0 = host_rand(OUT, -1, 1, 135); /* before */
  void *gx = dev_bytes(xh, (size_t)(N * IN) * 2), *gw = dev_bytes(wh, (size_t)(OUT * IN) * 2);
  void *gdy = dev_bytes(dyh, (size_t)(N * OUT) * 2), *gy = dev_nan((size_t)(N * OUT) * 2);
  void *gdx = dev_nan((size_t)(N * IN) * 2);
  float *gb = dev(b, OUT), *gdw = dev(dw, OUT * IN), *gdb = dev(db, OUT);
  if (!acc) dev_poison(gdw, (size_t)(OUT * IN) * sizeof(float));
  ganfw_be_linear_forward(cpu, N, IN, OUT, x, w, bias ? b : NULL, y);
  ganfw_be_linear_forward_lp(gpu, dtype, N, IN, OUT, gx, gw, bias ? gb : NULL, gy);
  compare_lp("linear_forward_lp", dtype, NULL, detail, gy, 1, y, N * OUT);
  ganfw_be_linear_backward(cpu, N, IN, OUT, x, w, dy, dx, dw, bias ? db : NULL, acc);
  ganfw_be_linear_backward_lp(gpu, dtype, N, IN, OUT, gx, gw, gdy, gdx, gdw, bias ? gdb : NULL,
                              acc);
  compare_lp("linear_backward_lp", dtype, "dx", detail, gdx, 1, dx, N * IN);
  if (acc) {
    compare_lp_added("linear_backward_lp", dtype, "dw", detail, gdw, dw, dw0, OUT * IN);
    compare_lp_added("linear_backward_lp", dtype, "db", detail, gdb, db, db0, OUT);
  } else {
    compare_lp("linear_backward_lp", dtype, "dw", detail, gdw, 0, dw, OUT * IN);
  }
  dev_poison(gdw, (size_t)(OUT * IN) * sizeof(float));
  ganfw_be_linear_backward(cpu, N, IN, OUT, x, w, dy, NULL, dw, NULL, 0);
  ganfw_be_linear_backward_lp(gpu, dtype, N, IN, OUT, gx, NULL, gdy, NULL, gdw, NULL, 0);
  compare_lp("linear_backward_lp", dtype, "dw", detail, gdw, 0, dw, OUT * IN);
  dev_free(gx), dev_free(gw), dev_free(gdy), dev_free(gy), dev_free(gdx), dev_free(gb);
  dev_free(gdw), dev_free(gdb);
  gt_free(x), gt_free(w), gt_free(dy), gt_free(b), gt_free(y), gt_free(dx), gt_free(dw);
  gt_free(db), gt_free(dw0), gt_free(db0), gt_free(xh), gt_free(wh), gt_free(dyh);
}

static void test_lp_linear(void) {
  for (int d = 0; d < 2; d++) {
    if (!lp_has(lp_dtypes[d], GANFW_LP_LINEAR, "linear")) continue;
    linear_lp_case(lp_dtypes[d], 7, 33, 10, 1); /* odd sizes */
    linear_lp_case(lp_dtypes[d], 16, 64, 32, 0);
  }
}

/* BatchNorm: affine with running stats (train, eval, backward with dx and accumulate=1, the
 * parameter gradients alone, dx alone), and affine=False without running stats (as a
 * checkpoint recompute runs it) with dx only. */
static void bn_lp_case(int32_t dtype, int affine) {
  const int64_t N = 4, C = 6, HW = 25, n = N * C * HW;
  const float eps = 1e-5f, momentum = 0.1f;
  const char *detail = affine ? "affine, running stats" : "affine=False, no running stats";
  uint16_t *xh, *dyh;
  float *x = host_rand16(dtype, n, -2, 3, 140, &xh), *dy = host_rand16(dtype, n, -1, 1, 141, &dyh);
  float *gamma = host_rand(C, 0.5f, 1.5f, 142), *beta = host_rand(C, -1, 1, 143);
  float *rm = host_rand(C, -1, 1, 144), *rv = host_rand(C, 0.5f, 2, 145);
  float *y = host_rand(n, 0, 0, 0), *dx = host_rand(n, 0, 0, 0);
  float *mean = host_rand(C, 0, 0, 0), *invstd = host_rand(C, 0, 0, 0);
  float *dg = host_rand(C, -1, 1, 146), *dbt = host_rand(C, -1, 1, 147);
  float *dg0 = host_rand(C, -1, 1, 146), *dbt0 = host_rand(C, -1, 1, 147); /* before */
  void *gx = dev_bytes(xh, (size_t)n * 2), *gdy = dev_bytes(dyh, (size_t)n * 2);
  void *gy = dev_nan((size_t)n * 2), *gdx = dev_nan((size_t)n * 2);
  float *gg = dev(gamma, C), *gbt = dev(beta, C), *grm = dev(rm, C), *grv = dev(rv, C);
  float *gmean = dev_nan((size_t)C * 4), *ginv = dev_nan((size_t)C * 4);
  float *gdg = dev(dg, C), *gdbt = dev(dbt, C);
  const float *pg = affine ? gamma : NULL, *pb = affine ? beta : NULL;
  const float *qg = affine ? gg : NULL, *qb = affine ? gbt : NULL;

  ganfw_be_batchnorm2d_forward_train(cpu, N, C, HW, x, pg, pb, y, affine ? rm : NULL,
                                     affine ? rv : NULL, momentum, eps, mean, invstd);
  ganfw_be_batchnorm2d_forward_train_lp(gpu, dtype, N, C, HW, gx, qg, qb, gy, affine ? grm : NULL,
                                        affine ? grv : NULL, momentum, eps, gmean, ginv);
  compare_lp("batchnorm2d_forward_train_lp", dtype, "y", detail, gy, 1, y, n);
  compare_lp("batchnorm2d_forward_train_lp", dtype, "saved", detail, gmean, 0, mean, C);
  compare_lp("batchnorm2d_forward_train_lp", dtype, "saved", detail, ginv, 0, invstd, C);
  if (affine) {
    compare_lp("batchnorm2d_forward_train_lp", dtype, "running", detail, grm, 0, rm, C);
    compare_lp("batchnorm2d_forward_train_lp", dtype, "running", detail, grv, 0, rv, C);
  }

  dev_poison(gy, (size_t)n * 2);
  ganfw_be_batchnorm2d_forward_eval(cpu, N, C, HW, x, pg, pb, y, rm, rv, eps);
  ganfw_be_batchnorm2d_forward_eval_lp(gpu, dtype, N, C, HW, gx, qg, qb, gy, grm, grv, eps);
  compare_lp("batchnorm2d_forward_eval_lp", dtype, NULL, detail, gy, 1, y, n);

  if (affine) {
    ganfw_be_batchnorm2d_backward(cpu, N, C, HW, x, dy, pg, mean, invstd, dx, dg, dbt, 1);
    ganfw_be_batchnorm2d_backward_lp(gpu, dtype, N, C, HW, gx, gdy, qg, gmean, ginv, gdx, gdg, gdbt,
                                     1);
    compare_lp("batchnorm2d_backward_lp", dtype, "dx", detail, gdx, 1, dx, n);
    compare_lp_added("batchnorm2d_backward_lp", dtype, "dgamma/dbeta", detail, gdg, dg, dg0, C);
    compare_lp_added("batchnorm2d_backward_lp", dtype, "dgamma/dbeta", detail, gdbt, dbt, dbt0, C);
    /* parameter gradients only, overwritten (NaN before) */
    dev_poison(gdg, (size_t)C * 4), dev_poison(gdbt, (size_t)C * 4);
    ganfw_be_batchnorm2d_backward(cpu, N, C, HW, x, dy, pg, mean, invstd, NULL, dg, dbt, 0);
    ganfw_be_batchnorm2d_backward_lp(gpu, dtype, N, C, HW, gx, gdy, qg, gmean, ginv, NULL, gdg,
                                     gdbt, 0);
    compare_lp("batchnorm2d_backward_lp", dtype, "dgamma/dbeta", detail, gdg, 0, dg, C);
    compare_lp("batchnorm2d_backward_lp", dtype, "dgamma/dbeta", detail, gdbt, 0, dbt, C);
  }
  /* dx only (D in the G step; affine=False has no parameter gradients) */
  dev_poison(gdx, (size_t)n * 2);
  ganfw_be_batchnorm2d_backward(cpu, N, C, HW, x, dy, pg, mean, invstd, dx, NULL, NULL, 0);
  ganfw_be_batchnorm2d_backward_lp(gpu, dtype, N, C, HW, gx, gdy, qg, gmean, ginv, gdx, NULL, NULL,
                                   0);
  compare_lp("batchnorm2d_backward_lp", dtype, "dx", detail, gdx, 1, dx, n);

  dev_free(gx), dev_free(gdy), dev_free(gy), dev_free(gdx), dev_free(gg), dev_free(gbt);
  dev_free(grm), dev_free(grv), dev_free(gmean), dev_free(ginv), dev_free(gdg), dev_free(gdbt);
  gt_free(x), gt_free(dy), gt_free(gamma), gt_free(beta), gt_free(rm), gt_free(rv), gt_free(y);
  gt_free(dx), gt_free(mean), gt_free(invstd), gt_free(dg), gt_free(dbt), gt_free(dg0);
  gt_free(dbt0), gt_free(xh), gt_free(dyh);
}

static void test_lp_batchnorm(void) {
  for (int d = 0; d < 2; d++) {
    if (!lp_has(lp_dtypes[d], GANFW_LP_BATCHNORM, "batchnorm")) continue;
    bn_lp_case(lp_dtypes[d], 1);
    bn_lp_case(lp_dtypes[d], 0);
  }
}

/* Every activation, forward and backward (from the 16-bit y), out of place and in place; an
 * odd length for the vector kernels' tails. */
static void test_lp_activations(void) {
  const int64_t n = 10001;
  const char *names[] = {"identity", "relu", "leaky_relu 0.2", "tanh", "sigmoid"};
  _Static_assert(sizeof names / sizeof names[0] == GANFW_ACT_COUNT, "one name per kind");
  for (int d = 0; d < 2; d++) {
    const int32_t dtype = lp_dtypes[d];
    if (!lp_has(dtype, GANFW_LP_ACT, "act")) continue;
    for (int32_t kind = 0; kind < GANFW_ACT_COUNT; kind++) {
      char detail[64];
      uint16_t *xh, *dyh;
      float *x = host_rand16(dtype, n, -6, 6, 150 + kind, &xh);
      float *dy = host_rand16(dtype, n, -1, 1, 160 + kind, &dyh);
      float *y = host_rand(n, 0, 0, 0), *dx = host_rand(n, 0, 0, 0);
      void *gx = dev_bytes(xh, (size_t)n * 2), *gdy = dev_bytes(dyh, (size_t)n * 2);
      void *gy = dev_nan((size_t)n * 2), *gdx = dev_nan((size_t)n * 2);
      ganfw_be_act_forward(cpu, kind, 0.2f, n, x, y);
      ganfw_be_act_forward_lp(gpu, dtype, kind, 0.2f, n, gx, gy);
      snprintf(detail, sizeof detail, "%s", names[kind]);
      compare_lp("act_forward_lp", dtype, NULL, detail, gy, 1, y, n);
      /* backward from y as the GPU stores it: the CPU's y rounded to the dtype */
      uint16_t *yh = round16(dtype, y, n);
      void *gyr = dev_bytes(yh, (size_t)n * 2);
      ganfw_be_act_backward(cpu, kind, 0.2f, n, y, dy, dx);
      ganfw_be_act_backward_lp(gpu, dtype, kind, 0.2f, n, gyr, gdy, gdx);
      compare_lp("act_backward_lp", dtype, NULL, detail, gdx, 1, dx, n);
      /* in place: y over x, dx over dy */
      snprintf(detail, sizeof detail, "%s, in place", names[kind]);
      ganfw_be_act_forward_lp(gpu, dtype, kind, 0.2f, n, gx, gx);
      compare_lp("act_forward_lp", dtype, NULL, detail, gx, 1, y, n);
      ganfw_be_act_backward_lp(gpu, dtype, kind, 0.2f, n, gyr, gdy, gdy);
      compare_lp("act_backward_lp", dtype, NULL, detail, gdy, 1, dx, n);
      dev_free(gx), dev_free(gdy), dev_free(gy), dev_free(gdx), dev_free(gyr);
      gt_free(x), gt_free(dy), gt_free(y), gt_free(dx), gt_free(xh), gt_free(dyh), gt_free(yh);
    }
  }
}

/* None of the 16-bit ops above recorded a failure in the backend. */
static void test_lp_no_error(void) {
  const ganfw_status st = gpu->vt->synchronize(gpu);
  if (st != GANFW_OK) printf("\n  synchronize after the 16-bit ops: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
}

/* --- errors: an op's failure is its status, recorded with call, file and line ---------------- */
static void test_error_record(void) {
  CU_ASSERT_EQUAL(gpu->vt->synchronize(gpu), GANFW_OK);
  float *d = dev(NULL, 4);
  /* a dimension cuBLAS cannot take: refused before any device work */
  CU_ASSERT_EQUAL(
      ganfw_be_gemm(gpu, 0, 0, (int64_t)1 << 32, 1, 1, 1.0f, NULL, 1, NULL, 1, 0.0f, NULL, 1),
      GANFW_ERR_UNSUPPORTED);
  const char *msg = ganfw_error_message();
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "cublasSgemm"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "core/src/backend/cuda/gemm.c:"));
  /* later ops and synchronize report it too, until cleared */
  CU_ASSERT_EQUAL(ganfw_be_fill(gpu, 4, d, 1.0f), GANFW_ERR_UNSUPPORTED);
  CU_ASSERT_EQUAL(gpu->vt->synchronize(gpu), GANFW_ERR_UNSUPPORTED);
  ganfw_cuda_clear_error(gpu);
  CU_ASSERT_EQUAL(ganfw_be_fill(gpu, 4, d, 1.0f), GANFW_OK);
  CU_ASSERT_EQUAL(gpu->vt->synchronize(gpu), GANFW_OK);
  dev_free(d);
}

/* --- pixel shuffle: elements moved, bit for bit the CPU's in f32, f16 and bf16 -------------- */
static void test_pixel_shuffle(void) {
  const int64_t shapes[3][5] = {
      {2, 3, 5, 4, 2}, {1, 2, 3, 3, 3}, {8, 32, 16, 16, 2}}; /* N,C,H,W,r */
  const int32_t dtypes[3] = {GANFW_DTYPE_F32, GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  for (int k = 0; k < 3; k++) {
    const int64_t *d = shapes[k], n = d[0] * d[1] * d[2] * d[3] * d[4] * d[4];
    for (int t = 0; t < 3; t++) {
      for (int u = 0; u < 2; u++) {
        const int32_t kind = u ? GANFW_OP_PIXEL_UNSHUFFLE : GANFW_OP_PIXEL_SHUFFLE;
        const size_t bytes = (size_t)n * (dtypes[t] == GANFW_DTYPE_F32 ? 4 : 2);
        char what[64];
        snprintf(what, sizeof what, "%s %s", ganfw_op_name(kind), ganfw_dtype_name(dtypes[t]));
        /* any bit patterns: moved, never read as numbers */
        float *x = host_rand(n, -2, 2, 700 + 10 * k + t);
        void *y = gt_alloc(bytes), *got = gt_alloc(bytes);
        void *gx = dev_bytes(x, bytes), *gy = dev_bytes(NULL, bytes), *gz = dev_bytes(NULL, bytes);
        ganfw_op op = {.kind = kind,
                       .dtype = dtypes[t],
                       .shape.d = {d[0], d[1], d[2], d[3], d[4]},
                       .in = {x},
                       .out = {y}};
        CU_ASSERT_EQUAL(ganfw_backend_run(cpu, &op), GANFW_OK);
        op.in[0] = gx, op.out[0] = gy;
        const ganfw_status st = ganfw_backend_run(gpu, &op);
        if (st != GANFW_OK) printf("\n  %s: %s", what, ganfw_error_message());
        CU_ASSERT_EQUAL(st, GANFW_OK);
        expect_no_error(what);
        CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, got, gy, bytes), GANFW_OK);
        const int same = memcmp(got, y, bytes) == 0;
        CU_ASSERT(same);
        record(what, same ? 0.0 : 1.0);
        /* the other kind is its inverse: back to x, bit for bit */
        op.kind = u ? GANFW_OP_PIXEL_SHUFFLE : GANFW_OP_PIXEL_UNSHUFFLE;
        op.in[0] = gy, op.out[0] = gz;
        CU_ASSERT_EQUAL(ganfw_backend_run(gpu, &op), GANFW_OK);
        CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, got, gz, bytes), GANFW_OK);
        CU_ASSERT(memcmp(got, x, bytes) == 0);
        dev_free(gx), dev_free(gy), dev_free(gz);
        gt_free(x), gt_free(y), gt_free(got);
      }
    }
  }
}

static void print_records(void) {
  ganfw_cuda_info info;
  ganfw_cuda_get_info(gpu, &info);
  printf("\n\nworst error per op on %s (cc %d.%d, cuDNN %d):\n", info.name, (int)info.cc_major,
         (int)info.cc_minor, (int)info.cudnn_version);
  for (int i = 0; i < n_records; i++) printf("  %-44s %.3e\n", records[i].what, records[i].err);
}

static int suite_init(void) {
  gpu = ganfw_cuda_backend();
  cpu = ganfw_cpu_backend();
  if (!gpu) fprintf(stderr, "test_gpu_ops: %s\n", ganfw_error_message());
  return gpu ? 0 : -1;
}

static int suite_clean(void) {
  if (gpu) print_records();
  return 0;
}

static CU_TestInfo tests[] = {
    {"gemm", test_gemm},
    {"conv2d", test_conv2d},
    {"convt2d", test_convt2d},
    {"linear", test_linear},
    {"batchnorm", test_batchnorm},
    {"activations", test_activations},
    {"pooling", test_pooling},
    {"upsample", test_upsample},
    {"groupnorm", test_groupnorm},
    {"embedding", test_embedding},
    {"transpose01", test_transpose01},
    {"embedding and spectral norm layers", test_embed_sn_net},
    {"dropout", test_dropout},
    {"losses", test_losses},
    {"foreach", test_foreach},
    {"casts", test_casts},
    {"rng", test_rng},
    {"f16_rounded_conv", test_f16_rounded_conv},
    {"lp_ops", test_lp_ops},
    {"lp_conv2d", test_lp_conv2d},
    {"lp_convt2d", test_lp_convt2d},
    {"lp_linear", test_lp_linear},
    {"lp_batchnorm", test_lp_batchnorm},
    {"lp_activations", test_lp_activations},
    {"lp_no_error", test_lp_no_error},
    {"error_record", test_error_record},
    {"pixel_shuffle", test_pixel_shuffle},
    CU_TEST_INFO_NULL,
};

int main(void) {
  char why[256];
  if (ganfw_cuda_device_count(why, sizeof why) == 0) {
    printf("no CUDA device, skipped (%s)\n", why);
    return 77;
  }
  return gt_run_fixture("gpu ops vs cpu", tests, suite_init, suite_clean);
}
