/* The CPU foreach ops and casts against PyTorch 1.13 (tests/ref/gen_elementwise.py): lerp,
 * addcdiv, addcmul, add with alpha, mul, scale, add_scalar, sqrt, maximum (with NaN/inf),
 * sum and norm on random vectors, and the bits of .half()/.bfloat16()/.float() on random,
 * edge and every f16/bf16 pattern. Prints how many elements are bit-exact. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/cpu/cast.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "testutil.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

static gt_ref *ref;
static int64_t n;
static const float *Y, *X, *A, *B;

/* Opens the reference and loads the inputs; each test ends with unload(). */
static int load(void) {
  ref = gt_ref_open("elementwise");
  if (!ref) return 0;
  int64_t nx, na, nb;
  Y = gt_ref_f32(ref, "y", &n, NULL, NULL);
  X = gt_ref_f32(ref, "x", &nx, NULL, NULL);
  A = gt_ref_f32(ref, "a", &na, NULL, NULL);
  B = gt_ref_f32(ref, "b", &nb, NULL, NULL);
  if (!Y || !X || !A || !B || nx != n || na != n || nb != n) return 0;
  return 1;
}

/* Number of elements whose bits differ (NaN matches any NaN); prints the first few. */
static int64_t count_diff(const char *what, const float *got, const float *want, int64_t m) {
  int64_t diff = 0;
  for (int64_t i = 0; i < m; i++) {
    if (isnan(got[i]) && isnan(want[i])) continue;
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (diff < 3)
        printf("\n    %s[%lld]: got %.9g want %.9g", what, (long long)i, got[i], want[i]);
      diff++;
    }
  }
  return diff;
}

static void unload(void) {
  gt_ref_close(ref);
  ref = NULL;
}

typedef enum {
  OP_LERP1,
  OP_LERP9,
  OP_ADDCDIV,
  OP_ADDCMUL,
  OP_AXPY,
  OP_MUL,
  OP_SCALE,
  OP_ADDS
} op_t;

static void run_op(op_t op, float *y) {
  memcpy(y, Y, (size_t)n * sizeof *y);
  switch (op) {
  case OP_LERP1:
    ganfw_be_lerp(cpu(), n, y, X, 0.1f);
    break;
  case OP_LERP9:
    ganfw_be_lerp(cpu(), n, y, X, 0.9f);
    break;
  case OP_ADDCDIV:
    ganfw_be_addcdiv(cpu(), n, y, -0.37f, A, B);
    break;
  case OP_ADDCMUL:
    ganfw_be_addcmul(cpu(), n, y, 0.713f, A, B);
    break;
  case OP_AXPY:
    ganfw_be_axpy(cpu(), n, y, -0.37f, X);
    break;
  case OP_MUL:
    ganfw_be_mul(cpu(), n, y, y, X);
    break;
  case OP_SCALE:
    ganfw_be_scale(cpu(), n, y, 0.3f);
    break;
  case OP_ADDS:
    ganfw_be_add_scalar(cpu(), n, y, 1.7f);
    break;
  }
}

/* PyTorch computes these with one fused multiply-add (or a plain op): the CPU kernels give
 * the same bits. */
static void test_foreach_vs_torch(void) {
  CU_ASSERT_FATAL(load());
  static const struct {
    op_t op;
    const char *key;
  } ops[] = {{OP_LERP1, "lerp_0.1"},  {OP_LERP9, "lerp_0.9"}, {OP_ADDCDIV, "addcdiv"},
             {OP_ADDCMUL, "addcmul"}, {OP_AXPY, "axpy"},      {OP_MUL, "mul"},
             {OP_SCALE, "scale"},     {OP_ADDS, "add_scalar"}};
  float *y = gt_alloc((size_t)n * sizeof *y);
  printf("\n   ");
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    int64_t m;
    const float *want = gt_ref_f32(ref, ops[k].key, &m, NULL, NULL);
    CU_ASSERT_FATAL(want != NULL && m == n);
    run_op(ops[k].op, y);
    int64_t diff = count_diff(ops[k].key, y, want, n);
    printf(" %s %lld/%lld exact;", ops[k].key, (long long)(n - diff), (long long)n);
    CU_ASSERT_EQUAL(diff, 0);
    /* and within 1e-6 relative in any case */
    gt_check_close(ops[k].key, y, want, n, 1e-6, 1e-6);
  }
  gt_free(y);
  unload();
}

static void test_sqrt_maximum_vs_torch(void) {
  CU_ASSERT_FATAL(load());
  float *y = gt_alloc((size_t)n * sizeof *y), *in = gt_alloc((size_t)n * sizeof *in);
  int64_t m, mx, my;
  for (int64_t i = 0; i < n; i++) in[i] = fabsf(A[i]) * 10;
  ganfw_be_sqrt(cpu(), n, y, in);
  const float *want = gt_ref_f32(ref, "sqrt", &m, NULL, NULL);
  CU_ASSERT_FATAL(want != NULL && m == n);
  CU_ASSERT_EQUAL(count_diff("sqrt", y, want, n), 0);

  const float *ym = gt_ref_f32(ref, "max_y", &my, NULL, NULL);
  const float *xm = gt_ref_f32(ref, "max_x", &mx, NULL, NULL);
  want = gt_ref_f32(ref, "maximum", &m, NULL, NULL);
  CU_ASSERT_FATAL(ym && xm && want && my == n && mx == n && m == n);
  memcpy(y, ym, (size_t)n * sizeof *y);
  ganfw_be_maximum(cpu(), n, y, xm);
  int64_t nans = 0;
  for (int64_t i = 0; i < n; i++) nans += isnan(want[i]);
  CU_ASSERT(nans > n / 10); /* the reference does hold NaNs to propagate */
  CU_ASSERT_EQUAL(count_diff("maximum", y, want, n), 0);
  for (int64_t i = 0; i < n; i++) CU_ASSERT_EQUAL(!!isnan(y[i]), !!isnan(want[i]));
  gt_free(y), gt_free(in);
  unload();
}

static void test_sum_norm_vs_torch(void) {
  CU_ASSERT_FATAL(load());
  double s = ganfw_be_sum(cpu(), n, Y), q = ganfw_be_sumsq(cpu(), n, Y);
  double ws = gt_ref_scalar(ref, "sum"), wn = gt_ref_scalar(ref, "norm");
  printf("\n    sum %.17g (torch f64 %.17g), norm rel err %.1e ", s, ws, fabs(sqrt(q) - wn) / wn);
  CU_ASSERT(fabs(s - ws) <= 1e-12 * (1 + fabs(ws)));
  CU_ASSERT(fabs(sqrt(q) - wn) <= 1e-14 * wn);
  unload();
}

/* .half() and .bfloat16() on random and edge f32: same bits; NaN in, NaN out (torch writes
 * canonical NaNs, 0x7e00 and 0xffff; ours keep sign and payload, as F16C does). */
static void test_casts_vs_torch(void) {
  CU_ASSERT_FATAL(load());
  int64_t m, m16, mbf;
  const int32_t *xb = gt_ref_i32(ref, "cast_x_bits", &m);
  const int32_t *h16 = gt_ref_i32(ref, "cast_f16_bits", &m16);
  const int32_t *hbf = gt_ref_i32(ref, "cast_bf16_bits", &mbf);
  CU_ASSERT_FATAL(xb && h16 && hbf && m16 == m && mbf == m);
  float *x = gt_alloc((size_t)m * sizeof *x);
  uint16_t *a = gt_alloc((size_t)m * 2), *b = gt_alloc((size_t)m * 2);
  for (int64_t i = 0; i < m; i++) x[i] = ganfw_f32_from_bits((uint32_t)xb[i]);
  ganfw_be_f32_to_f16(cpu(), m, x, a);
  ganfw_be_f32_to_bf16(cpu(), m, x, b);
  int64_t bad16 = 0, badbf = 0, nans = 0;
  for (int64_t i = 0; i < m; i++) {
    if (isnan(x[i])) {
      nans++;
      bad16 += !((a[i] & 0x7c00) == 0x7c00 && (a[i] & 0x3ff));
      badbf += !((b[i] & 0x7f80) == 0x7f80 && (b[i] & 0x7f));
      continue;
    }
    if (a[i] != (uint16_t)h16[i] && bad16++ < 3)
      printf("\n    half(%a) = %04x, torch %04x", x[i], a[i], (unsigned)h16[i]);
    if (b[i] != (uint16_t)hbf[i] && badbf++ < 3)
      printf("\n    bf16(%a) = %04x, torch %04x", x[i], b[i], (unsigned)hbf[i]);
  }
  printf("\n    %lld values (%lld NaN): f16 mismatches %lld, bf16 mismatches %lld ", (long long)m,
         (long long)nans, (long long)bad16, (long long)badbf);
  CU_ASSERT(nans >= 4);
  CU_ASSERT_EQUAL(bad16, 0);
  CU_ASSERT_EQUAL(badbf, 0);
  gt_free(x), gt_free(a), gt_free(b);
  unload();
}

/* .float() on every f16 and bf16 pattern: same bits (NaN: any NaN of the same sign). */
static void test_widen_vs_torch(void) {
  CU_ASSERT_FATAL(load());
  int64_t m16, mbf;
  const int32_t *w16 = gt_ref_i32(ref, "f16_all_to_f32_bits", &m16);
  const int32_t *wbf = gt_ref_i32(ref, "bf16_all_to_f32_bits", &mbf);
  CU_ASSERT_FATAL(w16 && wbf && m16 == 65536 && mbf == 65536);
  uint16_t *h = gt_alloc(65536 * 2);
  float *f16 = gt_alloc(65536 * 4), *fbf = gt_alloc(65536 * 4);
  for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  ganfw_be_f16_to_f32(cpu(), 65536, h, f16);
  ganfw_be_bf16_to_f32(cpu(), 65536, h, fbf);
  int64_t bad16 = 0, badbf = 0;
  for (int i = 0; i < 65536; i++) {
    float t16 = ganfw_f32_from_bits((uint32_t)w16[i]), tbf = ganfw_f32_from_bits((uint32_t)wbf[i]);
    if (isnan(t16))
      bad16 += !isnan(f16[i]) || !signbit(f16[i]) != !signbit(t16);
    else
      bad16 += ganfw_f32_bits(f16[i]) != (uint32_t)w16[i];
    if (isnan(tbf))
      badbf += !isnan(fbf[i]) || !signbit(fbf[i]) != !signbit(tbf);
    else
      badbf += ganfw_f32_bits(fbf[i]) != (uint32_t)wbf[i];
  }
  CU_ASSERT_EQUAL(bad16, 0);
  CU_ASSERT_EQUAL(badbf, 0);
  gt_free(h), gt_free(f16), gt_free(fbf);
  unload();
}

static CU_TestInfo tests[] = {
    {"foreach_vs_torch", test_foreach_vs_torch},
    {"sqrt_maximum_vs_torch", test_sqrt_maximum_vs_torch},
    {"sum_norm_vs_torch", test_sum_norm_vs_torch},
    {"casts_vs_torch", test_casts_vs_torch},
    {"widen_vs_torch", test_widen_vs_torch},
    CU_TEST_INFO_NULL,
};

GT_MAIN("ref_elementwise", tests)
