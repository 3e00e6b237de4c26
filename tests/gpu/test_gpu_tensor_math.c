/* The CUDA backend's tensor math (unary, binary with broadcasting, reduce_sum, channel_affine:
 * the host's tensor_* ops) against the CPU backend on random data, and a net with the example
 * plugin layer examples/pixelnorm (written with those host ops only) on a CUDA run against a
 * CPU run: output, input gradient and parameter gradients. IEEE-rounded ops (arithmetic,
 * sqrt, rsqrt, clamp, fused multiply-add, the pow exponents computed without powf) are
 * compared bit for bit; exp, log and powf within 4 ulp (CUDA's are within 2 ulp of the
 * correctly rounded result); sums in double in another order within one f32 ulp; the net
 * within 1e-4 relative (its reductions and rsqrt round differently on the two devices). Skips
 * (exit 77) without a CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/ops.h"
#include "base/error.h"
#include "nn/net.h"
#include "pixelnorm.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"

#define ULP 1.2e-7

static ganfw_backend *gpu, *cpu;

static float *host_rand(int64_t n, float lo, float hi, uint64_t seed) {
  float *h = gt_alloc((size_t)n * sizeof(float));
  gt_fill_uniform(h, n, lo, hi, seed);
  return h;
}

static float *dev(const float *h, int64_t n) {
  float *d = gpu->vt->raw_alloc(gpu, (size_t)n * sizeof(float));
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  CU_ASSERT_EQUAL(gpu->vt->copy_h2d(gpu, d, h, (size_t)n * sizeof(float)), GANFW_OK);
  return d;
}

/* The device buffer's values after every queued op ran without a recorded failure. */
static float *back(const float *d, int64_t n) {
  float *h = gt_alloc((size_t)n * sizeof(float));
  const ganfw_status st = gpu->vt->synchronize(gpu); /* the first failure of any op */
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, h, d, (size_t)n * sizeof(float)), GANFW_OK);
  return h;
}

/* tol 0: the same bits (NaN matches NaN); else the relative error with a floor of 1e-6. */
static void compare(const char *what, const float *got, const float *want, int64_t n, double tol) {
  if (tol > 0) {
    gt_check_close(what, got, want, n, tol, 1e-6);
    return;
  }
  int64_t diff = 0;
  for (int64_t i = 0; i < n; i++)
    if (!(isnan(got[i]) && isnan(want[i])) && memcmp(&got[i], &want[i], 4) != 0 && diff++ < 3)
      printf("\n  %s[%lld]: gpu %.9g cpu %.9g", what, (long long)i, got[i], want[i]);
  CU_ASSERT_EQUAL(diff, 0);
}

static void test_unary(void) {
  enum { N = 10007 };
  float *x = host_rand(N, -4, 4, 1), *pos = host_rand(N, 0.01f, 5, 2);
  x[5] = NAN, x[6] = 0.0f, x[7] = -0.0f;
  float *dx = dev(x, N), *dpos = dev(pos, N), *dout = dev(x, N), *want = gt_alloc(N * 4);
  const struct {
    int32_t op;
    int positive;
    float a, b;
    double tol;
  } ops[] = {
      {GANFW_UNARY_ABS, 0, 0, 0, 0},
      {GANFW_UNARY_SIGN, 0, 0, 0, 0},
      {GANFW_UNARY_EXP, 0, 0, 0, 4 * ULP},
      {GANFW_UNARY_LOG, 1, 0, 0, 4 * ULP},
      {GANFW_UNARY_SQRT, 1, 0, 0, 0},
      {GANFW_UNARY_RSQRT, 1, 0, 0, 0},
      {GANFW_UNARY_CLAMP, 0, -0.5f, 1.5f, 0},
      {GANFW_UNARY_MUL_SCALAR, 0, 0.37f, 0, 0},
      {GANFW_UNARY_ADD_SCALAR, 0, 1.7f, 0, 0},
      {GANFW_UNARY_POW_SCALAR, 1, 2.0f, 0, 0},
      {GANFW_UNARY_POW_SCALAR, 1, -0.5f, 0, 0},
      {GANFW_UNARY_POW_SCALAR, 1, 1.7f, 0, 4 * ULP},
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    const float *in = ops[i].positive ? pos : x;
    ganfw_be_unary(cpu, ops[i].op, N, want, in, ops[i].a, ops[i].b);
    ganfw_be_unary(gpu, ops[i].op, N, dout, ops[i].positive ? dpos : dx, ops[i].a, ops[i].b);
    float *got = back(dout, N);
    char what[32];
    snprintf(what, sizeof what, "unary op %d", (int)ops[i].op);
    compare(what, got, want, N, ops[i].tol);
    gt_free(got);
  }
  gpu->vt->raw_free(gpu, dout, 0);
  gpu->vt->raw_free(gpu, dpos, 0);
  gpu->vt->raw_free(gpu, dx, 0);
  gt_free(want);
  gt_free(pos);
  gt_free(x);
}

/* The broadcast descriptor of shapes a and b (4 dims each, 1-padded in front). */
static ganfw_bcast_shape bcast(const int64_t *a, const int64_t *b) {
  ganfw_bcast_shape s = {.same = 1};
  int64_t sa = 1, sb = 1;
  for (int k = 3; k >= 0; k--) {
    s.dim[k] = a[k] == 1 ? b[k] : a[k];
    s.sa[k] = a[k] == 1 && s.dim[k] != 1 ? 0 : sa;
    s.sb[k] = b[k] == 1 && s.dim[k] != 1 ? 0 : sb;
    s.same &= a[k] == b[k];
    sa *= a[k], sb *= b[k];
  }
  return s;
}

static void test_binary(void) {
  const int64_t shapes[][2][4] = {{{2, 3, 4, 5}, {2, 3, 4, 5}},
                                  {{2, 3, 4, 5}, {1, 3, 1, 1}},
                                  {{2, 3, 4, 5}, {2, 1, 4, 5}},
                                  {{1, 4, 1, 3}, {1, 1, 5, 1}},
                                  {{64, 1, 1, 300}, {1, 1, 1, 300}}};
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
    const ganfw_bcast_shape s = bcast(shapes[c][0], shapes[c][1]);
    const int64_t na = shapes[c][0][0] * shapes[c][0][1] * shapes[c][0][2] * shapes[c][0][3];
    const int64_t nb = shapes[c][1][0] * shapes[c][1][1] * shapes[c][1][2] * shapes[c][1][3];
    const int64_t n = s.dim[0] * s.dim[1] * s.dim[2] * s.dim[3];
    float *a = host_rand(na, -2, 2, 10 + c), *b = host_rand(nb, 0.25f, 2, 20 + c);
    a[0] = NAN;
    float *want = host_rand(n, 0, 1, 5), *da = dev(a, na), *db = dev(b, nb), *dout = dev(want, n);
    for (int32_t op = 0; op < GANFW_BINARY_COUNT; op++) {
      ganfw_be_binary(cpu, op, &s, want, a, b);
      ganfw_be_binary(gpu, op, &s, dout, da, db);
      float *got = back(dout, n);
      char what[48];
      snprintf(what, sizeof what, "binary op %d, case %zu", (int)op, c);
      compare(what, got, want, n, 0);
      gt_free(got);
    }
    gpu->vt->raw_free(gpu, dout, 0);
    gpu->vt->raw_free(gpu, db, 0);
    gpu->vt->raw_free(gpu, da, 0);
    gt_free(want);
    gt_free(b);
    gt_free(a);
  }
}

static void test_reduce(void) {
  const struct {
    int64_t dim[4];
    uint32_t mask;
  } cases[] = {
      {{3, 4, 5, 6}, 2u},      /* the channels: few values per output, a thread each */
      {{3, 4, 5, 6}, 13u},     /* every dim but the channels */
      {{64, 33, 1, 1}, 1u},    /* the batch */
      {{1, 1, 700, 900}, 15u}, /* everything: one block over 630000 values */
      {{2, 300, 1, 400}, 10u}, /* two dims apart, 120000 values per output */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ganfw_reduce_shape s = {.mask = cases[c].mask};
    int64_t n = 1, nout = 1;
    for (int k = 0; k < 4; k++) {
      s.dim[k] = cases[c].dim[k];
      n *= s.dim[k];
      nout *= (s.mask >> k & 1u) ? 1 : s.dim[k];
    }
    float *x = host_rand(n, -1, 1, 30 + c), *want = gt_alloc((size_t)nout * 4);
    float *dx = dev(x, n), *dout = dev(x, nout);
    ganfw_be_reduce_sum(cpu, &s, 0.5, x, want);
    ganfw_be_reduce_sum(gpu, &s, 0.5, dx, dout);
    float *got = back(dout, nout);
    char what[32];
    snprintf(what, sizeof what, "reduce case %zu", c);
    compare(what, got, want, nout, 2 * ULP);
    gt_free(got);
    gpu->vt->raw_free(gpu, dout, 0);
    gpu->vt->raw_free(gpu, dx, 0);
    gt_free(want);
    gt_free(x);
  }
}

static void test_channel_affine(void) {
  enum { N = 3, C = 7, INNER = 129, T = N * C * INNER };
  float *x = host_rand(T, -3, 3, 40), *sc = host_rand(C, -2, 2, 41), *sh = host_rand(C, -1, 1, 42);
  float *dxv = dev(x, T), *dsc = dev(sc, C), *dsh = dev(sh, C), *dout = dev(x, T);
  float *want = gt_alloc(T * 4);
  for (int k = 0; k < 3; k++) {
    const float *s = k != 2 ? sc : NULL, *b = k != 1 ? sh : NULL;
    ganfw_be_channel_affine(cpu, N, C, INNER, x, s, b, want);
    ganfw_be_channel_affine(gpu, N, C, INNER, dxv, k != 2 ? dsc : NULL, k != 1 ? dsh : NULL, dout);
    float *got = back(dout, T);
    compare("channel_affine", got, want, T, 0);
    gt_free(got);
  }
  gpu->vt->raw_free(gpu, dout, 0);
  gpu->vt->raw_free(gpu, dsh, 0);
  gpu->vt->raw_free(gpu, dsc, 0);
  gpu->vt->raw_free(gpu, dxv, 0);
  gt_free(want);
  gt_free(sh);
  gt_free(sc);
  gt_free(x);
}

/* conv -> pixelnorm (affine) -> leaky relu -> pixelnorm, one training step on `device`:
 * y, dx and every parameter gradient into host arrays (y[ny], dx[nx], g[ng]). */
static void pixelnorm_step(int32_t device, float *y, float *dx, float *g, int64_t ng) {
  const ganfw_host *h = ganfw_host_table();
  ganfw_ctx_options opt = {.device_type = device, .threads = 2, .seed = 5};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  ganfw_net *net = h->net_create(ctx, "g");
  CU_ASSERT_EQUAL(h->net_conv2d(net, "c", 3, 8, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(
      h->net_custom(net, "pn1", pixelnorm_def(), pixelnorm_state_create(h, ctx, 8, 1e-8f, 1)),
      GANFW_OK);
  CU_ASSERT_EQUAL(h->net_activation(net, "a", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(
      h->net_custom(net, "pn2", pixelnorm_def(), pixelnorm_state_create(h, ctx, 8, 1e-8f, 0)),
      GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(h->net_build(net, 3, 6, 6), GANFW_OK);
  int64_t off = 0;
  for (int64_t i = 0; i < h->net_param_count(net); i++) { /* the same weights on both */
    ganfw_param_info pi = {.struct_size = sizeof pi};
    CU_ASSERT_EQUAL_FATAL(h->net_param_info(net, i, &pi), GANFW_OK);
    float *v = host_rand(pi.value->numel, -0.5f, 1.0f, 50 + (uint64_t)i);
    CU_ASSERT_EQUAL(h->tensor_from_host(pi.value, v, pi.value->nbytes), GANFW_OK);
    gt_free(v);
  }
  const int64_t xs[4] = {4, 3, 6, 6}, ys[4] = {4, 8, 6, 6};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *dy = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, ys, GANFW_MEM_DATA, "dy");
  CU_ASSERT_FATAL(x && dy);
  float *hx = host_rand(x->numel, -1, 1, 60), *hdy = host_rand(dy->numel, -1, 1, 61);
  CU_ASSERT_EQUAL(h->tensor_from_host(x, hx, x->nbytes), GANFW_OK);
  CU_ASSERT_EQUAL(h->tensor_from_host(dy, hdy, dy->nbytes), GANFW_OK);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *out = NULL, *gx = NULL;
  ganfw_status st = ganfw_net_forward(net, x, tape, &out);
  if (st == GANFW_OK)
    st = ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &gx);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(h->tensor_to_host(out, y, out->nbytes), GANFW_OK);
  CU_ASSERT_EQUAL(h->tensor_to_host(gx, dx, gx->nbytes), GANFW_OK);
  for (int64_t i = 0; i < h->net_param_count(net); i++) {
    ganfw_param_info pi = {.struct_size = sizeof pi};
    CU_ASSERT_EQUAL_FATAL(h->net_param_info(net, i, &pi), GANFW_OK);
    CU_ASSERT_FATAL(off + pi.grad->numel <= ng);
    CU_ASSERT_EQUAL(h->tensor_to_host(pi.grad, g + off, pi.grad->nbytes), GANFW_OK);
    off += pi.grad->numel;
  }
  ganfw_tensor_destroy(out);
  ganfw_tensor_destroy(gx);
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(x);
  gt_free(hdy);
  gt_free(hx);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

static void test_pixelnorm_net(void) {
  enum { NY = 4 * 8 * 36, NX = 4 * 3 * 36, NG = 8 * 3 * 9 + 8 + 8 + 8 };
  static float y[2][NY], dx[2][NX], g[2][NG];
  pixelnorm_step(GANFW_DEVICE_CPU, y[0], dx[0], g[0], NG);
  pixelnorm_step(GANFW_DEVICE_CUDA, y[1], dx[1], g[1], NG);
  gt_check_close("pixelnorm net y (cuda vs cpu)", y[1], y[0], NY, 1e-4, 1e-3);
  gt_check_close("pixelnorm net dx", dx[1], dx[0], NX, 1e-4, 1e-3);
  gt_check_close("pixelnorm net parameter gradients", g[1], g[0], NG, 1e-4, 1e-3);
}

static int suite_init(void) {
  gpu = ganfw_cuda_backend();
  cpu = ganfw_cpu_backend();
  if (!gpu) fprintf(stderr, "test_gpu_tensor_math: %s\n", ganfw_error_message());
  return gpu ? 0 : -1;
}

static CU_TestInfo tests[] = {{"unary", test_unary},
                              {"binary", test_binary},
                              {"reduce", test_reduce},
                              {"channel_affine", test_channel_affine},
                              {"pixelnorm_net", test_pixelnorm_net},
                              CU_TEST_INFO_NULL};

int main(void) {
  char why[256];
  if (ganfw_cuda_device_count(why, sizeof why) == 0) {
    printf("no CUDA device, skipped (%s)\n", why);
    return 77;
  }
  return gt_run_fixture("gpu tensor math vs cpu", tests, suite_init, NULL);
}
