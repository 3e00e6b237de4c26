/* The CPU backend's native 16-bit BatchNorm2d and activation ops
 * (core/src/backend/cpu/{batchnorm2d,activation}.c, the ops in f16 and bf16, op.h): for f16
 * and bf16, each must give exactly the bits of converting its 16-bit inputs to f32
 * (ganfw_cast), running the f32 op and rounding its 16-bit outputs back, f32 outputs
 * (running and saved statistics, dgamma, dbeta) included; in place too (y == x, dx == dy),
 * over odd shapes and values (zeros, subnormals, large, inf and NaN for the activations),
 * and the same at every SIMD level the CPU runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "backend/cpu/isa.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"

static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

static float *falloc(int64_t n) {
  return gt_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
}

/* One extra value, so that a test can use p + 1 (an address that is not 4-aligned). */
static uint16_t *halloc(int64_t n) {
  return gt_alloc((size_t)(n + 1) * sizeof(uint16_t));
}

static void to16(int32_t dt, int64_t n, const float *x, uint16_t *h) {
  CU_ASSERT_EQUAL_FATAL(ganfw_cast(cpu(), n, GANFW_DTYPE_F32, x, dt, h), GANFW_OK);
}

static void to32(int32_t dt, int64_t n, const uint16_t *h, float *x) {
  CU_ASSERT_EQUAL_FATAL(ganfw_cast(cpu(), n, dt, h, GANFW_DTYPE_F32, x), GANFW_OK);
}

/* Asserts a and b hold the same bytes, printing `what` and the first differing 16-bit or
 * 32-bit element (elem bytes each) when not. */
static void same(const char *what, const void *a, const void *b, int64_t n, size_t elem) {
  if (memcmp(a, b, (size_t)n * elem) == 0) {
    CU_PASS("same bits");
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    const unsigned char *pa = (const unsigned char *)a + i * elem;
    const unsigned char *pb = (const unsigned char *)b + i * elem;
    if (memcmp(pa, pb, elem) != 0) {
      uint32_t va = 0, vb = 0;
      memcpy(&va, pa, elem);
      memcpy(&vb, pb, elem);
      printf("\n    %s: element %lld of %lld: 0x%x, want 0x%x", what, (long long)i, (long long)n,
             (unsigned)va, (unsigned)vb);
      break;
    }
  }
  CU_FAIL("bits differ from the converting reference");
}

/* --- inputs ----------------------------------------------------------------------------- */

/* Bit patterns spread over the inputs: +-0, the smallest and largest subnormals, large
 * finite values; and the largest finite values, +-inf, quiet and signalling NaNs. */
static const uint16_t f16_finite[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x7800, 0xf800};
static const uint16_t f16_special[] = {0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7d00, 0xfe01};
static const uint16_t bf16_finite[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x5f00, 0xdf00};
static const uint16_t bf16_special[] = {0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc1};
#define SPECIALS 7
_Static_assert(sizeof f16_finite / sizeof *f16_finite == SPECIALS, "f16_finite");
_Static_assert(sizeof bf16_special / sizeof *bf16_special == SPECIALS, "bf16_special");

/* n values of dt, uniform in [lo, hi) and rounded, with the patterns above at spread
 * positions: the finite ones anywhere; the others (nonfinite 1 or 2) at even (1) or odd
 * (2) positions only. Two arrays of different parities never hold NaNs at the same
 * position: which NaN comes out of an operation on two (an x86 rule on operand order that
 * the compiler may commute) is not the same at every SIMD level even in the f32 kernels. */
static void fill16(int32_t dt, int64_t n, float lo, float hi, uint64_t seed, int nonfinite,
                   uint16_t *h) {
  float *f = falloc(n);
  gt_fill_uniform(f, n, lo, hi, seed);
  to16(dt, n, f, h);
  gt_free(f);
  const int f16 = dt == GANFW_DTYPE_F16;
  const int64_t parity = nonfinite - 1, slots = (n - parity + 1) / 2;
  for (int i = 0; i < SPECIALS; i++) {
    h[(seed + (uint64_t)i * 7919u) % (uint64_t)n] = f16 ? f16_finite[i] : bf16_finite[i];
    if (nonfinite && slots > 0)
      h[2 * (int64_t)((seed + (uint64_t)i * 104729u) % (uint64_t)slots) + parity] =
          f16 ? f16_special[i] : bf16_special[i];
  }
}

/* --- every SIMD level -------------------------------------------------------------------
 * A case appends all it computed to a blob; the blobs of every level must be equal. */

typedef struct blob {
  unsigned char *p;
  size_t n, cap;
} blob;

static void blob_add(blob *b, const void *p, size_t bytes) {
  if (b->n + bytes > b->cap) {
    b->cap = 2 * (b->n + bytes);
    b->p = realloc(b->p, b->cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b->p);
  }
  memcpy(b->p + b->n, p, bytes);
  b->n += bytes;
}

typedef void (*case_fn)(int32_t dt, const int64_t *shape, uint64_t seed, blob *out);

/* Runs the case at each level from portable up to the CPU's, then restores the level. */
static void each_level(case_fn run, int32_t dt, const int64_t *shape, uint64_t seed) {
  const ganfw_cpu_isa saved = ganfw_cpu_isa_level(), have = ganfw_cpu_isa_supported();
  blob first = {0}, b = {0};
  for (int l = GANFW_CPU_ISA_PORTABLE; l <= (int)have; l++) {
    CU_ASSERT_EQUAL(ganfw_cpu_isa_force((ganfw_cpu_isa)l), (ganfw_cpu_isa)l);
    b.n = 0;
    run(dt, shape, seed, l == GANFW_CPU_ISA_PORTABLE ? &first : &b);
    if (l != GANFW_CPU_ISA_PORTABLE) {
      CU_ASSERT_EQUAL(b.n, first.n);
      if (b.n == first.n) same(ganfw_cpu_isa_name((ganfw_cpu_isa)l), b.p, first.p, (int64_t)b.n, 1);
    }
  }
  ganfw_cpu_isa_force(saved);
  free(first.p);
  free(b.p);
}

/* --- BatchNorm2d ------------------------------------------------------------------------ */

/* Train forward (running stats, saved stats, in place), eval forward (in place), backward
 * with accumulate 0 and 1, in place (dx == dy), without dx and without gamma, each against
 * the converting reference; shape is {N, C, HW}. */
static void bn_case(int32_t dt, const int64_t *shape, uint64_t seed, blob *out) {
  const int64_t N = shape[0], C = shape[1], HW = shape[2], n = N * C * HW;
  const float momentum = 0.1f, eps = 1e-5f;
  char what[96];
  uint16_t *x16 = halloc(n), *dy16 = halloc(n), *y16 = halloc(n), *ref16 = halloc(n);
  uint16_t *z16 = halloc(n);
  float *xf = falloc(n), *dyf = falloc(n), *yf = falloc(n);
  float *gamma = falloc(C), *beta = falloc(C), *rm = falloc(C), *rv = falloc(C);
  float *st_r = falloc(4 * C), *st_l = falloc(4 * C); /* running mean, var; save mean, invstd */
  float *g_r = falloc(2 * C), *g_l = falloc(2 * C);   /* dgamma, dbeta */
  fill16(dt, n, -1.5f, 2.5f, seed, 0, x16);
  fill16(dt, n, -1.0f, 1.0f, seed + 1, 0, dy16);
  gt_fill_uniform(gamma, C, 0.5f, 1.5f, seed + 2);
  gt_fill_uniform(beta, C, -0.5f, 0.5f, seed + 3);
  gt_fill_uniform(rm, C, -0.2f, 0.2f, seed + 4);
  gt_fill_uniform(rv, C, 0.5f, 2.0f, seed + 5);
  to32(dt, n, x16, xf);
  to32(dt, n, dy16, dyf);

  /* training forward */
  snprintf(what, sizeof what, "bn train %s N=%lld C=%lld HW=%lld", ganfw_dtype_name(dt),
           (long long)N, (long long)C, (long long)HW);
  memcpy(st_r, rm, C * sizeof *rm), memcpy(st_r + C, rv, C * sizeof *rv);
  memcpy(st_l, st_r, 2 * C * sizeof *st_r);
  ganfw_be_batchnorm2d_forward_train(cpu(), N, C, HW, xf, gamma, beta, yf, st_r, st_r + C, momentum,
                                     eps, st_r + 2 * C, st_r + 3 * C);
  to16(dt, n, yf, ref16);
  ganfw_be_batchnorm2d_forward_train_lp(cpu(), dt, N, C, HW, x16, gamma, beta, y16, st_l, st_l + C,
                                        momentum, eps, st_l + 2 * C, st_l + 3 * C);
  same(what, y16, ref16, n, 2);
  same(what, st_l, st_r, 4 * C, 4);
  blob_add(out, y16, n * 2), blob_add(out, st_l, 4 * C * sizeof *st_l);
  memcpy(z16, x16, n * 2);
  ganfw_be_batchnorm2d_forward_train_lp(cpu(), dt, N, C, HW, z16, gamma, beta, z16, NULL, NULL,
                                        momentum, eps, NULL, NULL);
  same(what, z16, ref16, n, 2);
  const float *mean = st_r + 2 * C, *invstd = st_r + 3 * C;

  /* eval forward */
  snprintf(what, sizeof what, "bn eval %s N=%lld C=%lld HW=%lld", ganfw_dtype_name(dt),
           (long long)N, (long long)C, (long long)HW);
  ganfw_be_batchnorm2d_forward_eval(cpu(), N, C, HW, xf, gamma, beta, yf, rm, rv, eps);
  to16(dt, n, yf, ref16);
  ganfw_be_batchnorm2d_forward_eval_lp(cpu(), dt, N, C, HW, x16, gamma, beta, y16, rm, rv, eps);
  same(what, y16, ref16, n, 2);
  blob_add(out, y16, n * 2);
  memcpy(z16, x16, n * 2);
  ganfw_be_batchnorm2d_forward_eval_lp(cpu(), dt, N, C, HW, z16, gamma, beta, z16, rm, rv, eps);
  same(what, z16, ref16, n, 2);

  /* backward */
  snprintf(what, sizeof what, "bn backward %s N=%lld C=%lld HW=%lld", ganfw_dtype_name(dt),
           (long long)N, (long long)C, (long long)HW);
  for (int acc = 0; acc < 2; acc++) {
    gt_fill_uniform(g_r, 2 * C, -1.0f, 1.0f, seed + 6);
    memcpy(g_l, g_r, 2 * C * sizeof *g_r);
    ganfw_be_batchnorm2d_backward(cpu(), N, C, HW, xf, dyf, gamma, mean, invstd, yf, g_r, g_r + C,
                                  acc);
    to16(dt, n, yf, ref16);
    ganfw_be_batchnorm2d_backward_lp(cpu(), dt, N, C, HW, x16, dy16, gamma, mean, invstd, y16, g_l,
                                     g_l + C, acc);
    same(what, y16, ref16, n, 2);
    same(what, g_l, g_r, 2 * C, 4);
    blob_add(out, y16, n * 2), blob_add(out, g_l, 2 * C * sizeof *g_l);
  }
  /* ref16 and g_r now hold accumulate 1's; recompute accumulate 0's dgamma and dbeta */
  ganfw_be_batchnorm2d_backward(cpu(), N, C, HW, xf, dyf, gamma, mean, invstd, NULL, g_r, g_r + C,
                                0);
  memcpy(z16, dy16, n * 2);
  ganfw_be_batchnorm2d_backward_lp(cpu(), dt, N, C, HW, x16, z16, gamma, mean, invstd, z16, g_l,
                                   g_l + C, 0);
  same(what, z16, ref16, n, 2); /* dx does not depend on accumulate */
  same(what, g_l, g_r, 2 * C, 4);
  memset(g_l, 0, 2 * C * sizeof *g_l);
  ganfw_be_batchnorm2d_backward_lp(cpu(), dt, N, C, HW, x16, dy16, gamma, mean, invstd, NULL, g_l,
                                   g_l + C, 0);
  same(what, g_l, g_r, 2 * C, 4);
  ganfw_be_batchnorm2d_backward(cpu(), N, C, HW, xf, dyf, NULL, mean, invstd, yf, NULL, NULL, 0);
  to16(dt, n, yf, ref16);
  ganfw_be_batchnorm2d_backward_lp(cpu(), dt, N, C, HW, x16, dy16, NULL, mean, invstd, y16, NULL,
                                   NULL, 0);
  same(what, y16, ref16, n, 2);
  blob_add(out, y16, n * 2);

  gt_free(x16), gt_free(dy16), gt_free(y16), gt_free(ref16), gt_free(z16);
  gt_free(xf), gt_free(dyf), gt_free(yf);
  gt_free(gamma), gt_free(beta), gt_free(rm), gt_free(rv);
  gt_free(st_r), gt_free(st_l), gt_free(g_r), gt_free(g_l);
}

/* {N, C, HW}: single values, odd sizes, rows longer than the statistics' flush (128) and
 * than a converted piece (1024), more channels than a tile (64), and the DC-GAN shapes. */
static const int64_t bn_shapes[][3] = {{1, 1, 1},     {4, 3, 1},    {3, 5, 7},  {2, 3, 130},
                                       {2, 2, 1500},  {1, 3, 2049}, {5, 70, 9}, {64, 128, 64},
                                       {64, 256, 16}, {64, 64, 256}};

static void test_bn(int32_t dt) {
  for (size_t s = 0; s < sizeof bn_shapes / sizeof *bn_shapes; s++)
    each_level(bn_case, dt, bn_shapes[s], 100 + s);
}

static void test_bn_f16(void) {
  test_bn(GANFW_DTYPE_F16);
}

static void test_bn_bf16(void) {
  test_bn(GANFW_DTYPE_BF16);
}

/* --- activations ------------------------------------------------------------------------ */

/* Forward and backward of every kind, out of place and in place (y == x, dx == dy), on
 * inputs at an odd address (p + 1); shape is {n}. The backward's y is the forward's. */
static void act_case(int32_t dt, const int64_t *shape, uint64_t seed, blob *out) {
  const int64_t n = shape[0];
  const float alpha = 0.2f;
  char what[96];
  uint16_t *x16 = halloc(n) + 1, *dy16 = halloc(n) + 1, *y16 = halloc(n) + 1;
  uint16_t *ref16 = halloc(n) + 1, *z16 = halloc(n) + 1;
  float *xf = falloc(n), *dyf = falloc(n), *yf = falloc(n);
  fill16(dt, n, -6.0f, 6.0f, seed, 1, x16);
  fill16(dt, n, -2.0f, 2.0f, seed + 1, 2, dy16);
  for (int32_t kind = 0; kind < GANFW_ACT_COUNT; kind++) {
    snprintf(what, sizeof what, "act %d forward %s n=%lld", kind, ganfw_dtype_name(dt),
             (long long)n);
    to32(dt, n, x16, xf);
    ganfw_be_act_forward(cpu(), kind, alpha, n, xf, yf);
    to16(dt, n, yf, ref16);
    ganfw_be_act_forward_lp(cpu(), dt, kind, alpha, n, x16, y16);
    same(what, y16, ref16, n, 2);
    blob_add(out, y16, n * 2);
    memcpy(z16, x16, n * 2);
    ganfw_be_act_forward_lp(cpu(), dt, kind, alpha, n, z16, z16);
    same(what, z16, ref16, n, 2);

    snprintf(what, sizeof what, "act %d backward %s n=%lld", kind, ganfw_dtype_name(dt),
             (long long)n);
    to32(dt, n, ref16, yf); /* the forward's y */
    to32(dt, n, dy16, dyf);
    ganfw_be_act_backward(cpu(), kind, alpha, n, yf, dyf, xf);
    to16(dt, n, xf, y16);
    ganfw_be_act_backward_lp(cpu(), dt, kind, alpha, n, ref16, dy16, z16);
    same(what, z16, y16, n, 2);
    blob_add(out, z16, n * 2);
    memcpy(z16, dy16, n * 2);
    ganfw_be_act_backward_lp(cpu(), dt, kind, alpha, n, ref16, z16, z16);
    same(what, z16, y16, n, 2);
  }
  gt_free(x16 - 1), gt_free(dy16 - 1), gt_free(y16 - 1), gt_free(ref16 - 1), gt_free(z16 - 1);
  gt_free(xf), gt_free(dyf), gt_free(yf);
}

/* Lengths below, at and above a chunk (1024), not multiples of 16, above the threads'
 * thresholds, and a DC-GAN activation (64*128*8*8). */
static const int64_t act_sizes[][1] = {{1},    {7},    {15},    {17},    {1000},
                                       {1025}, {4099}, {70001}, {524288}};

static void test_act(int32_t dt) {
  for (size_t s = 0; s < sizeof act_sizes / sizeof *act_sizes; s++)
    each_level(act_case, dt, act_sizes[s], 200 + s);
}

static void test_act_f16(void) {
  test_act(GANFW_DTYPE_F16);
}

static void test_act_bf16(void) {
  test_act(GANFW_DTYPE_BF16);
}

static CU_TestInfo tests[] = {{"batchnorm2d_f16", test_bn_f16},
                              {"batchnorm2d_bf16", test_bn_bf16},
                              {"act_f16", test_act_f16},
                              {"act_bf16", test_act_bf16},
                              CU_TEST_INFO_NULL};

GT_MAIN("cpu_lp_norm_act", tests)
