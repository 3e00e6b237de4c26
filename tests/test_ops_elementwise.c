/* The CPU element-wise kernels without PyTorch: foreach ops against double references,
 * reductions on large arrays, NaN/inf detection, Philox known answers (Random123's
 * kat_vectors), the uniform/normal streams (determinism, offsets, statistics), and the
 * f16/bf16 casts: every f16/bf16 pattern, edge cases, and portable vs F16C paths. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cast.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "base/philox.h"
#include "testutil.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

/* --- helpers -------------------------------------------------------------------------- */
static uint32_t bits_of(float x) {
  return ganfw_f32_bits(x);
}

static float from_bits(uint32_t u) {
  return ganfw_f32_from_bits(u);
}

/* Error of `got` against the exact `want`, in units of 2^-24 * scale, where scale is the
 * size of the terms that went into the result (bounds cancellation). */
static double err_units(float got, double want, double scale) {
  return fabs((double)got - want) / (ldexp(1.0, -24) * (scale > 0 ? scale : 1e-30));
}

static float *alloc_f(int64_t n) {
  return gt_alloc((size_t)(n ? n : 1) * sizeof(float));
}

/* Sizes used throughout: one small with a ragged tail, one over the threading threshold. */
static const int64_t sizes[] = {13, 100003};
#define NSIZES 2

/* --- foreach ops against double references -------------------------------------------- */
static void test_foreach_simple(void) {
  for (int s = 0; s < NSIZES; s++) {
    int64_t n = sizes[s];
    float *a = alloc_f(n), *b = alloc_f(n), *y = alloc_f(n), *o = alloc_f(n);
    gt_fill_uniform(a, n, -3.0f, 3.0f, 1);
    gt_fill_uniform(b, n, -2.0f, 5.0f, 2);
    int64_t bad = 0;

    ganfw_be_fill(cpu(), n, o, 0.375f);
    for (int64_t i = 0; i < n; i++) bad += o[i] != 0.375f;

    memcpy(y, a, (size_t)n * sizeof *y);
    ganfw_be_scale(cpu(), n, y, -0.3f);
    for (int64_t i = 0; i < n; i++) bad += y[i] != (float)((double)a[i] * (double)-0.3f);

    memcpy(y, a, (size_t)n * sizeof *y);
    ganfw_be_add_scalar(cpu(), n, y, 1.7f);
    for (int64_t i = 0; i < n; i++) bad += y[i] != (float)((double)a[i] + (double)1.7f);

    ganfw_be_add(cpu(), n, o, a, b);
    for (int64_t i = 0; i < n; i++) bad += o[i] != (float)((double)a[i] + (double)b[i]);
    ganfw_be_mul(cpu(), n, o, a, b);
    for (int64_t i = 0; i < n; i++) bad += o[i] != (float)((double)a[i] * (double)b[i]);

    /* out aliasing an input */
    memcpy(y, a, (size_t)n * sizeof *y);
    ganfw_be_add(cpu(), n, y, y, b);
    for (int64_t i = 0; i < n; i++) bad += y[i] != (float)((double)a[i] + (double)b[i]);

    /* sqrt is correctly rounded: the double result rounded to f32 is the same number */
    for (int64_t i = 0; i < n; i++) y[i] = fabsf(a[i]) * 1e3f;
    ganfw_be_sqrt(cpu(), n, o, y);
    for (int64_t i = 0; i < n; i++) bad += o[i] != (float)sqrt((double)y[i]);
    ganfw_be_sqrt(cpu(), n, y, y); /* in place */
    for (int64_t i = 0; i < n; i++) bad += y[i] != o[i];
    CU_ASSERT_EQUAL(bad, 0);
    gt_free(a), gt_free(b), gt_free(y), gt_free(o);
  }
  /* sqrt of -1 is NaN, of -0 is -0, of inf is inf */
  float sx[5] = {-1.0f, -0.0f, INFINITY, 4.0f, 0.0f}, so[5];
  ganfw_be_sqrt(cpu(), 5, so, sx);
  CU_ASSERT(isnan(so[0]));
  CU_ASSERT_EQUAL(bits_of(so[1]), 0x80000000u);
  CU_ASSERT(isinf(so[2]));
  CU_ASSERT_EQUAL(so[3], 2.0f);
  CU_ASSERT_EQUAL(bits_of(so[4]), 0u);
}

/* axpy, addcmul, addcdiv, lerp: one or two roundings, so within 1-2 units of the exact
 * value measured against the size of the terms. Reports the worst. */
static void test_foreach_fused(void) {
  double worst_axpy = 0, worst_cmul = 0, worst_cdiv = 0, worst_lerp = 0;
  for (int s = 0; s < NSIZES; s++) {
    int64_t n = sizes[s];
    float *a = alloc_f(n), *b = alloc_f(n), *y0 = alloc_f(n), *y = alloc_f(n);
    gt_fill_uniform(a, n, -3.0f, 3.0f, 11);
    gt_fill_uniform(b, n, 0.1f, 4.0f, 12);
    gt_fill_uniform(y0, n, -2.0f, 2.0f, 13);
    for (int64_t i = 0; i < n; i += 3) b[i] = -b[i];

    const float alpha = -0.37f, v = 0.713f;
    memcpy(y, y0, (size_t)n * sizeof *y);
    ganfw_be_axpy(cpu(), n, y, alpha, a);
    for (int64_t i = 0; i < n; i++) {
      double t = (double)alpha * a[i];
      double e = err_units(y[i], y0[i] + t, fabs(y0[i]) + fabs(t));
      if (e > worst_axpy) worst_axpy = e;
    }
    memcpy(y, y0, (size_t)n * sizeof *y);
    ganfw_be_addcmul(cpu(), n, y, v, a, b);
    for (int64_t i = 0; i < n; i++) {
      double t = (double)v * a[i] * b[i];
      double e = err_units(y[i], y0[i] + t, fabs(y0[i]) + fabs(t));
      if (e > worst_cmul) worst_cmul = e;
    }
    memcpy(y, y0, (size_t)n * sizeof *y);
    ganfw_be_addcdiv(cpu(), n, y, v, a, b);
    for (int64_t i = 0; i < n; i++) {
      double t = (double)v * a[i] / b[i];
      double e = err_units(y[i], y0[i] + t, fabs(y0[i]) + fabs(t));
      if (e > worst_cdiv) worst_cdiv = e;
    }
    const float ws[] = {0.1f, 0.9f, 0.5f, -0.25f, 1.5f};
    for (int k = 0; k < 5; k++) {
      memcpy(y, y0, (size_t)n * sizeof *y);
      ganfw_be_lerp(cpu(), n, y, a, ws[k]);
      for (int64_t i = 0; i < n; i++) {
        double want = y0[i] + (double)ws[k] * ((double)a[i] - y0[i]);
        double e = err_units(y[i], want, fabs(y0[i]) + fabs(a[i]));
        if (e > worst_lerp) worst_lerp = e;
      }
    }
    /* lerp hits both ends exactly: w = 0 gives y, w = 1 gives x (the far-end formula) */
    memcpy(y, y0, (size_t)n * sizeof *y);
    ganfw_be_lerp(cpu(), n, y, a, 0.0f);
    CU_ASSERT_EQUAL(memcmp(y, y0, (size_t)n * sizeof *y), 0);
    ganfw_be_lerp(cpu(), n, y, a, 1.0f);
    CU_ASSERT_EQUAL(memcmp(y, a, (size_t)n * sizeof *y), 0);
    gt_free(a), gt_free(b), gt_free(y0), gt_free(y);
  }
  printf("\n    worst error in 2^-24 * |terms|: axpy %.2f addcmul %.2f addcdiv %.2f lerp %.2f ",
         worst_axpy, worst_cmul, worst_cdiv, worst_lerp);
  CU_ASSERT(worst_axpy <= 1.0);
  CU_ASSERT(worst_cmul <= 2.0);
  CU_ASSERT(worst_cdiv <= 3.0);
  CU_ASSERT(worst_lerp <= 3.0);
}

static void test_foreach_maximum(void) {
  for (int s = 0; s < NSIZES; s++) {
    int64_t n = sizes[s];
    float *x = alloc_f(n), *y0 = alloc_f(n), *y = alloc_f(n);
    gt_fill_uniform(x, n, -1.0f, 1.0f, 21);
    gt_fill_uniform(y0, n, -1.0f, 1.0f, 22);
    for (int64_t i = 0; i < n; i += 7) y0[i] = NAN;
    for (int64_t i = 3; i < n; i += 11) x[i] = NAN;
    for (int64_t i = 5; i < n; i += 13) x[i] = INFINITY;
    memcpy(y, y0, (size_t)n * sizeof *y);
    ganfw_be_maximum(cpu(), n, y, x);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
      if (isnan(x[i]) || isnan(y0[i]))
        bad += !isnan(y[i]);
      else
        bad += y[i] != (x[i] > y0[i] ? x[i] : y0[i]);
    }
    CU_ASSERT_EQUAL(bad, 0);
    gt_free(x), gt_free(y0), gt_free(y);
  }
}

/* --- reductions ------------------------------------------------------------------------ */
static void test_sum_sumsq(void) {
  /* 2^24 + 7 ones: an f32 accumulator would stop at 2^24 */
  int64_t n1 = (1 << 24) + 7;
  float *ones = alloc_f(n1);
  ganfw_be_fill(cpu(), n1, ones, 1.0f);
  CU_ASSERT_EQUAL(ganfw_be_sum(cpu(), n1, ones), (double)n1);
  CU_ASSERT_EQUAL(ganfw_be_sumsq(cpu(), n1, ones), (double)n1);
  gt_free(ones);

  /* 3M random values against a long double reference */
  int64_t n = 3000017;
  float *x = alloc_f(n);
  gt_fill_uniform(x, n, -1.0f, 3.0f, 31);
  long double rs = 0, rq = 0, ra = 0;
  for (int64_t i = 0; i < n; i++) {
    rs += x[i];
    rq += (long double)x[i] * x[i];
    ra += fabsl((long double)x[i]);
  }
  int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  double s2 = ganfw_be_sum(cpu(), n, x), q2 = ganfw_be_sumsq(cpu(), n, x);
  omp_set_num_threads(1);
  double s1 = ganfw_be_sum(cpu(), n, x), q1 = ganfw_be_sumsq(cpu(), n, x);
  omp_set_num_threads(threads);
  double es = fabs(s2 - (double)rs) / (double)ra, eq = fabs(q2 - (double)rq) / (double)rq;
  printf("\n    sum rel err %.2e, sumsq rel err %.2e (n=%lld) ", es, eq, (long long)n);
  CU_ASSERT(es < 1e-13);
  CU_ASSERT(eq < 1e-13);
  /* same bits for any thread count: fixed chunking and order */
  CU_ASSERT_EQUAL(s1, s2);
  CU_ASSERT_EQUAL(q1, q2);
  /* small and empty */
  CU_ASSERT_EQUAL(ganfw_be_sum(cpu(), 0, x), 0.0);
  float three[3] = {1.5f, -2.0f, 4.0f};
  CU_ASSERT_EQUAL(ganfw_be_sum(cpu(), 3, three), 3.5);
  CU_ASSERT_EQUAL(ganfw_be_sumsq(cpu(), 3, three), 2.25 + 4.0 + 16.0);
  gt_free(x);
}

static void test_nonfinite(void) {
  const int64_t ns[] = {1, 5, 8192, 100003};
  const float bad_vals[] = {NAN, -NAN, INFINITY, -INFINITY};
  for (int s = 0; s < 4; s++) {
    int64_t n = ns[s];
    float *x = alloc_f(n);
    gt_fill_uniform(x, n, -1e30f, 1e30f, 41);
    x[0] = FLT_MAX;
    if (n > 2) x[1] = -0.0f, x[2] = 1e-45f; /* subnormal */
    CU_ASSERT_EQUAL(ganfw_be_nonfinite(cpu(), n, x), 0);
    const int64_t pos[] = {0, n / 2, n - 1};
    for (int p = 0; p < 3; p++)
      for (int k = 0; k < 4; k++) {
        float keep = x[pos[p]];
        x[pos[p]] = bad_vals[k];
        CU_ASSERT_EQUAL(ganfw_be_nonfinite(cpu(), n, x), 1);
        x[pos[p]] = keep;
      }
    /* a NaN with a payload and a signalling one */
    float keep = x[n - 1];
    x[n - 1] = from_bits(0x7f800001u);
    CU_ASSERT_EQUAL(ganfw_be_nonfinite(cpu(), n, x), 1);
    x[n - 1] = from_bits(0xffbfffffu);
    CU_ASSERT_EQUAL(ganfw_be_nonfinite(cpu(), n, x), 1);
    x[n - 1] = keep;
    CU_ASSERT_EQUAL(ganfw_be_nonfinite(cpu(), n, x), 0);
    gt_free(x);
  }
  CU_ASSERT_EQUAL(ganfw_be_nonfinite(cpu(), 0, NULL), 0);
}

/* --- Philox ---------------------------------------------------------------------------- */
/* Random123 tests/kat_vectors, the "philox4x32 10" lines: counter[4] key[2] -> out[4]. */
static void test_philox_kat(void) {
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int k = 0; k < 3; k++) {
    uint32_t out[4];
    ganfw_philox4x32_10(kat[k], kat[k] + 4, out);
    for (int j = 0; j < 4; j++) CU_ASSERT_EQUAL(out[j], kat[k][6 + j]);
    /* out may alias the counter */
    uint32_t c[4] = {kat[k][0], kat[k][1], kat[k][2], kat[k][3]};
    ganfw_philox4x32_10(c, kat[k] + 4, c);
    CU_ASSERT_EQUAL(memcmp(c, out, sizeof c), 0);
  }
  /* the block convention: counter {lo(b), hi(b), 0, 0}, key {lo(seed), hi(seed)} */
  uint32_t w[4], ref[4];
  uint64_t seed = 0x299f31d0a4093822ull, block = 0x85a308d3243f6a88ull;
  ganfw_philox_block(seed, block, w);
  uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0, 0}, key[2] = {0xa4093822, 0x299f31d0};
  ganfw_philox4x32_10(ctr, key, ref);
  CU_ASSERT_EQUAL(memcmp(w, ref, sizeof w), 0);
  ganfw_philox_block(0, 0, w);
  CU_ASSERT_EQUAL(w[0], 0x6627e8d5u);
  /* uniform conversions: exact endpoints */
  CU_ASSERT_EQUAL(ganfw_philox_u01(0), 0.0f);
  CU_ASSERT_EQUAL(ganfw_philox_u01(0xffffffffu), 1.0f - ldexpf(1.0f, -24));
  CU_ASSERT_EQUAL(ganfw_philox_u01(0x100u), ldexpf(1.0f, -24));
  CU_ASSERT_EQUAL(ganfw_philox_u01_open0(0), ldexpf(1.0f, -24));
  CU_ASSERT_EQUAL(ganfw_philox_u01_open0(0xffffffffu), 1.0f);
}

/* --- rng streams --------------------------------------------------------------------- */
typedef void (*rng_fn)(int64_t n, uint64_t seed, uint64_t offset, float *out);
static void run_uniform(int64_t n, uint64_t seed, uint64_t offset, float *out) {
  ganfw_be_rng_uniform(cpu(), n, seed, offset, -2.0f, 3.0f, out);
}
static void run_normal(int64_t n, uint64_t seed, uint64_t offset, float *out) {
  ganfw_be_rng_normal(cpu(), n, seed, offset, 0.5f, 2.0f, out);
}

static void test_rng_streams(void) {
  rng_fn fns[2] = {run_uniform, run_normal};
  const int64_t n = 100003; /* over the threading threshold, ragged last block */
  float *a = alloc_f(n), *b = alloc_f(n), *c = alloc_f(n);
  for (int f = 0; f < 2; f++) {
    uint64_t seed = 0x123456789abcdefull;
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    fns[f](n, seed, 7, a);
    omp_set_num_threads(2);
    fns[f](n, seed, 7, b);
    omp_set_num_threads(threads);
    CU_ASSERT_EQUAL(memcmp(a, b, (size_t)n * sizeof *a), 0); /* thread count */
    fns[f](n, seed, 7, b);
    CU_ASSERT_EQUAL(memcmp(a, b, (size_t)n * sizeof *a), 0); /* repeatable */
    /* offset k shifts the stream by 4k elements */
    fns[f](n - 40, seed, 17, c);
    CU_ASSERT_EQUAL(memcmp(a + 40, c, (size_t)(n - 40) * sizeof *a), 0);
    /* a prefix is the same stream (n not a multiple of 4 cuts the last block) */
    fns[f](7, seed, 7, c);
    CU_ASSERT_EQUAL(memcmp(a, c, 7 * sizeof *a), 0);
    /* element i is word i % 4 of block offset + i / 4 */
    uint32_t w[4];
    ganfw_philox_block(seed, 7 + 1000 / 4, w);
    if (f == 0) {
      float want = fmaf(ganfw_philox_u01(w[1000 % 4]), 5.0f, -2.0f);
      CU_ASSERT_EQUAL(a[1001], fmaf(ganfw_philox_u01(w[1]), 5.0f, -2.0f));
      CU_ASSERT_EQUAL(a[1000], want);
    }
    /* another seed or offset gives other numbers */
    fns[f](n, seed + 1, 7, b);
    int64_t same = 0;
    for (int64_t i = 0; i < n; i++) same += a[i] == b[i];
    CU_ASSERT(same < n / 1000);
    fns[f](n, seed, 8, b);
    same = 0;
    for (int64_t i = 0; i < n; i++) same += a[i] == b[i];
    CU_ASSERT(same < n / 1000);
    /* n = 0 writes nothing */
    c[0] = 42.0f;
    fns[f](0, seed, 7, c);
    CU_ASSERT_EQUAL(c[0], 42.0f);
  }
  gt_free(a), gt_free(b), gt_free(c);
}

static void test_rng_uniform_stats(void) {
  const int64_t n = 1000000;
  float *x = alloc_f(n);
  ganfw_be_rng_uniform(cpu(), n, 2024, 0, -2.0f, 3.0f, x);
  int64_t out_of_range = 0, hist[100] = {0};
  double s = 0, q = 0;
  for (int64_t i = 0; i < n; i++) {
    out_of_range += !(x[i] >= -2.0f && x[i] < 3.0f);
    s += x[i];
    q += (double)x[i] * x[i];
    int bin = (int)((x[i] + 2.0) / 5.0 * 100);
    hist[bin < 0 ? 0 : bin > 99 ? 99 : bin]++;
  }
  double mean = s / n, var = q / n - mean * mean;
  double chi2 = 0, e = n / 100.0;
  for (int k = 0; k < 100; k++) chi2 += (hist[k] - e) * (hist[k] - e) / e;
  printf("\n    uniform[-2,3): mean %.5f (0.5) var %.5f (%.5f) chi2(99 dof) %.1f ", mean, var,
         25.0 / 12.0, chi2);
  CU_ASSERT_EQUAL(out_of_range, 0);
  CU_ASSERT(fabs(mean - 0.5) < 0.01);        /* sd of the mean: 0.0014 */
  CU_ASSERT(fabs(var - 25.0 / 12.0) < 0.02); /* sd of the var: 0.0019 */
  CU_ASSERT(chi2 < 160.0);                   /* p ~ 1e-4 */
  /* lo == hi gives lo */
  ganfw_be_rng_uniform(cpu(), 9, 1, 0, 1.25f, 1.25f, x);
  for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(x[i], 1.25f);
  gt_free(x);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static void test_rng_normal_stats(void) {
  const int64_t n = 1000000;
  float *x = alloc_f(n);
  ganfw_be_rng_normal(cpu(), n, 77, 5, 0.0f, 1.0f, x);
  double s = 0, q = 0, m3 = 0, m4 = 0;
  int64_t nonfinite = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = x[i];
    nonfinite += !isfinite(x[i]);
    s += v, q += v * v, m3 += v * v * v, m4 += v * v * v * v;
  }
  double mean = s / n, var = q / n - mean * mean;
  /* Kolmogorov-Smirnov against the standard normal CDF */
  qsort(x, (size_t)n, sizeof *x, cmp_float);
  double d = 0;
  for (int64_t i = 0; i < n; i++) {
    double cdf = 0.5 * erfc(-x[i] / sqrt(2.0));
    double d1 = fabs((double)(i + 1) / n - cdf), d2 = fabs(cdf - (double)i / n);
    if (d1 > d) d = d1;
    if (d2 > d) d = d2;
  }
  printf("\n    normal: mean %.5f std %.5f skew %.4f kurt %.4f KS sqrt(n)D %.3f ", mean, sqrt(var),
         m3 / n, m4 / n, d * sqrt((double)n));
  CU_ASSERT_EQUAL(nonfinite, 0);
  CU_ASSERT(fabs(mean) < 0.005);
  CU_ASSERT(fabs(sqrt(var) - 1.0) < 0.005);
  CU_ASSERT(fabs(m3 / n) < 0.02);
  CU_ASSERT(fabs(m4 / n - 3.0) < 0.05);
  CU_ASSERT(d * sqrt((double)n) < 1.95);        /* KS critical value at p = 0.001 */
  CU_ASSERT(x[n - 1] <= 5.8f && x[0] >= -5.8f); /* u1 >= 2^-24 bounds |z| */

  /* mean and std are applied as mean + std * z */
  float *y = alloc_f(1000);
  ganfw_be_rng_normal(cpu(), 1000, 3, 0, 0.0f, 1.0f, x);
  ganfw_be_rng_normal(cpu(), 1000, 3, 0, 3.0f, -2.0f, y);
  int64_t bad = 0;
  for (int i = 0; i < 1000; i++) bad += y[i] != fmaf(-2.0f, x[i], 3.0f);
  CU_ASSERT_EQUAL(bad, 0);
  gt_free(y);
  gt_free(x);
}

/* --- casts ----------------------------------------------------------------------------- */
/* Independent reference: round |x| / ulp to an integer with nearbyint (ties to even under
 * the default rounding mode) in double, where the quotient is exact. */
static uint16_t ref_f16(float x) {
  uint32_t u = bits_of(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if (isnan(x)) return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  double a = fabs((double)x);
  if (a >= 65520.0) return sign | 0x7c00u;
  int e;
  frexp(a, &e);                              /* a = m * 2^e, m in [0.5, 1) */
  int ue = (e - 1 < -14 ? -14 : e - 1) - 10; /* ulp exponent */
  double q = nearbyint(ldexp(a, -ue));
  /* q * 2^ue; q may reach 2048 (next binade) which the encoding below handles */
  if (q == 0) return sign;
  int qe;
  frexp(q * ldexp(1.0, ue), &qe);
  int be = qe - 1;                                     /* unbiased exponent of the result */
  if (be < -14) return (uint16_t)(sign | (uint16_t)q); /* subnormal: q < 1024 */
  double mant = ldexp(q * ldexp(1.0, ue), -be) - 1.0;  /* in [0, 1) */
  return (uint16_t)(sign | (uint16_t)((be + 15) << 10) | (uint16_t)(mant * 1024.0));
}

static uint16_t ref_bf16(float x) {
  uint32_t u = bits_of(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if (isnan(x)) return (uint16_t)((u >> 16) | 0x40u);
  double a = fabs((double)x);
  if (a == 0) return sign;
  int e;
  frexp(a, &e);
  int ue = (e - 1 < -126 ? -126 : e - 1) - 7;
  double r = nearbyint(ldexp(a, -ue)) * ldexp(1.0, ue);
  if (r >= 0x1p128) return sign | 0x7f80u;
  return (uint16_t)(bits_of((float)r) >> 16 | sign);
}

static void test_cast_f16_edges(void) {
  static const struct {
    float x;
    uint16_t h;
  } cases[] = {
      {0.0f, 0x0000},        {-0.0f, 0x8000},           {1.0f, 0x3c00},
      {-2.0f, 0xc000},       {65504.0f, 0x7bff}, /* max finite */
      {65519.99f, 0x7bff},                       /* just below the halfway point to 2^16 */
      {65520.0f, 0x7c00},                        /* halfway: ties to even, which is inf */
      {-65520.0f, 0xfc00},   {1e10f, 0x7c00},           {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},   {0x1p-24f, 0x0001},        /* smallest subnormal */
      {0x1p-25f, 0x0000},                               /* halfway between 0 and it: ties to even */
      {-0x1p-25f, 0x8000},   {0x1.000002p-25f, 0x0001}, /* just above halfway */
      {0x3p-25f, 0x0002},                               /* 1.5 * 2^-24: ties to even gives 2 */
      {0x5p-25f, 0x0002},                               /* 2.5 * 2^-24: ties to even gives 2 */
      {0x3ffp-24f, 0x03ff},                             /* largest subnormal */
      {0x1p-14f, 0x0400},                               /* smallest normal */
      {0x7ffp-25f, 0x0400},  /* halfway between the largest subnormal and 2^-14 */
      {0x1.002p0f, 0x3c00},  /* 1 + 2^-11: halfway, ties to even (down) */
      {0x1.006p0f, 0x3c02},  /* 1 + 3 * 2^-11: halfway, ties to even (up) */
      {0x1.0021p0f, 0x3c01}, /* just above halfway */
      {1e-45f, 0x0000},      /* f32 subnormal */
      {-1e-40f, 0x8000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = ganfw_f32_to_f16_scalar(cases[i].x);
    if (got != cases[i].h) printf("\n    f16(%a) = %04x, want %04x", cases[i].x, got, cases[i].h);
    CU_ASSERT_EQUAL(got, cases[i].h);
    CU_ASSERT_EQUAL(ref_f16(cases[i].x), cases[i].h);
  }
  /* NaNs stay NaN, keep their sign and upper payload, and come out quiet */
  static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u,
                                  0xffbfffffu, 0x7fffffffu, 0x7fc02000u};
  static const uint16_t want[] = {0x7e00, 0xfe00, 0x7e00, 0x7f00, 0xffff, 0x7fff, 0x7e01};
  for (int i = 0; i < 7; i++) CU_ASSERT_EQUAL(ganfw_f32_to_f16_scalar(from_bits(nans[i])), want[i]);
  /* the array paths on the same edge values */
  float xs[32];
  uint16_t hp[32], hf[32];
  size_t nc = sizeof cases / sizeof cases[0];
  for (size_t i = 0; i < nc; i++) xs[i] = cases[i].x;
  for (int i = 0; i < 7; i++) xs[nc + (size_t)i] = from_bits(nans[i]);
  int64_t m = (int64_t)nc + 7;
  ganfw_cpu_f32_to_f16_portable(m, xs, hp);
  ganfw_be_f32_to_f16(cpu(), m, xs, hf);
  CU_ASSERT_EQUAL(memcmp(hp, hf, (size_t)m * 2), 0);
  if (ganfw_cpu_have_f16c()) {
    ganfw_cpu_f32_to_f16_f16c(m, xs, hf);
    CU_ASSERT_EQUAL(memcmp(hp, hf, (size_t)m * 2), 0);
  }
}

/* Every f16 pattern: to f32 is exact (checked by value), and back gives the same bits
 * (signalling NaNs come back quiet: NaN stays NaN). Portable and F16C agree. */
static void test_cast_f16_exhaustive(void) {
  uint16_t *h = gt_alloc(65536 * 2), *h2 = gt_alloc(65536 * 2), *h3 = gt_alloc(65536 * 2);
  float *f = alloc_f(65536), *f2 = alloc_f(65536);
  for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  ganfw_cpu_f16_to_f32_portable(65536, h, f);
  int64_t bad_value = 0, bad_trip = 0;
  for (int i = 0; i < 65536; i++) {
    int e = (i >> 10) & 0x1f, m = i & 0x3ff;
    double sign = (i & 0x8000) ? -1.0 : 1.0;
    if (e == 0x1f) {
      bad_value += m ? !isnan(f[i]) : f[i] != (float)(sign * INFINITY);
      if (m) bad_value += (bits_of(f[i]) >> 31) != (uint32_t)(i >> 15); /* sign kept */
      continue;
    }
    double v = sign * (e ? ldexp(1024 + m, e - 25) : ldexp(m, -24));
    bad_value += f[i] != (float)v || !signbit(f[i]) != !signbit(sign);
  }
  ganfw_cpu_f32_to_f16_portable(65536, f, h2);
  for (int i = 0; i < 65536; i++) {
    int is_nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
    uint16_t want = is_nan ? (uint16_t)(i | 0x200) : (uint16_t)i;
    bad_trip += h2[i] != want;
  }
  CU_ASSERT_EQUAL(bad_value, 0);
  CU_ASSERT_EQUAL(bad_trip, 0);
  ganfw_be_f16_to_f32(cpu(), 65536, h, f2);
  CU_ASSERT_EQUAL(memcmp(f, f2, 65536 * 4), 0);
  ganfw_be_f32_to_f16(cpu(), 65536, f, h3);
  CU_ASSERT_EQUAL(memcmp(h2, h3, 65536 * 2), 0);
  if (ganfw_cpu_have_f16c()) {
    ganfw_cpu_f16_to_f32_f16c(65536, h, f2);
    CU_ASSERT_EQUAL(memcmp(f, f2, 65536 * 4), 0);
    ganfw_cpu_f32_to_f16_f16c(65536, f, h3);
    CU_ASSERT_EQUAL(memcmp(h2, h3, 65536 * 2), 0);
  } else {
    printf("\n    (no F16C on this CPU: only the portable path ran) ");
  }
  gt_free(h), gt_free(h2), gt_free(h3), gt_free(f), gt_free(f2);
}

/* f32 -> f16 and bf16 on every f32 whose low bits sit at a rounding boundary (below, at
 * and above halfway, for every exponent and high mantissa) and on random patterns: the
 * portable path, the F16C path and the nearbyint reference agree bit for bit. */
static void test_cast_f32_sweep(void) {
  static const uint32_t lows16[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
  static const uint32_t lows13[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff};
  const int64_t n = 6 * (1 << 19) + 1000003;
  float *x = alloc_f(n);
  uint16_t *a = gt_alloc((size_t)n * 2), *b = gt_alloc((size_t)n * 2);
  for (int pass = 0; pass < 2; pass++) {
    int64_t k = 0;
    if (pass == 0) /* f16 rounds at bit 13 (further up for f16 subnormals: random below) */
      for (uint32_t hi = 0; hi < (1u << 19); hi++)
        for (int l = 0; l < 6; l++) x[k++] = from_bits((hi << 13) | lows13[l]);
    else /* bf16 rounds at bit 16 */
      for (uint32_t hi = 0; hi < (1u << 16); hi++)
        for (int l = 0; l < 6; l++) x[k++] = from_bits((hi << 16) | lows16[l]);
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (; k < n; k++) {
      st ^= st << 13, st ^= st >> 7, st ^= st << 17;
      x[k] = from_bits((uint32_t)(st >> 17));
    }
    int64_t bad_ref = 0;
    if (pass == 0) {
      ganfw_cpu_f32_to_f16_portable(n, x, a);
      for (int64_t i = 0; i < n; i++) bad_ref += a[i] != ref_f16(x[i]);
      if (ganfw_cpu_have_f16c()) {
        ganfw_cpu_f32_to_f16_f16c(n, x, b);
        CU_ASSERT_EQUAL(memcmp(a, b, (size_t)n * 2), 0);
      }
      ganfw_be_f32_to_f16(cpu(), n, x, b);
      CU_ASSERT_EQUAL(memcmp(a, b, (size_t)n * 2), 0);
    } else {
      ganfw_be_f32_to_bf16(cpu(), n, x, a);
      for (int64_t i = 0; i < n; i++) bad_ref += a[i] != ref_bf16(x[i]);
    }
    CU_ASSERT_EQUAL(bad_ref, 0);
  }
  gt_free(x), gt_free(a), gt_free(b);
}

static void test_cast_bf16(void) {
  static const struct {
    uint32_t x;
    uint16_t h;
  } cases[] = {
      {0x00000000u, 0x0000}, {0x80000000u, 0x8000}, /* +-0 */
      {0x3f800000u, 0x3f80},                        /* 1 */
      {0x3f808000u, 0x3f80},                        /* 1 + 2^-8: tie, even down */
      {0x3f818000u, 0x3f82},                        /* tie, even up */
      {0x3f808001u, 0x3f81},                        /* above the tie */
      {0x7f7f7fffu, 0x7f7f},                        /* rounds to max finite 3.3895e38 */
      {0x7f7f8000u, 0x7f80},                        /* 3.3961e38: tie, to even = inf */
      {0xff7f8000u, 0xff80}, {0x7f7fffffu, 0x7f80}, /* FLT_MAX overflows */
      {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}, /* inf */
      {0x00008000u, 0x0000},                        /* subnormal tie to even (0) */
      {0x00018000u, 0x0002},                        /* subnormal tie to even (2) */
      {0x00010001u, 0x0001},                        /* subnormal kept, not flushed */
      {0x007fffffu, 0x0080},                        /* largest subnormal rounds to 2^-126 */
      {0x80008001u, 0x8001}, {0x7fc00000u, 0x7fc0}, {0xffc00000u, 0xffc0}, /* quiet NaN */
      {0x7f800001u, 0x7fc0}, /* signalling, low payload: quieted */
      {0x7f810000u, 0x7fc1}, /* signalling, upper payload kept */
      {0x7fffffffu, 0x7fff},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = ganfw_f32_to_bf16_scalar(from_bits(cases[i].x));
    if (got != cases[i].h)
      printf("\n    bf16(%08x) = %04x, want %04x", cases[i].x, got, cases[i].h);
    CU_ASSERT_EQUAL(got, cases[i].h);
    CU_ASSERT_EQUAL(ref_bf16(from_bits(cases[i].x)), cases[i].h);
  }
  /* every bf16 pattern: to f32 is a shift, back is the same bits except that signalling
   * NaNs come back quiet */
  uint16_t *h = gt_alloc(65536 * 2), *h2 = gt_alloc(65536 * 2);
  float *f = alloc_f(65536);
  for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  ganfw_be_bf16_to_f32(cpu(), 65536, h, f);
  ganfw_be_f32_to_bf16(cpu(), 65536, f, h2);
  int64_t bad = 0;
  for (int i = 0; i < 65536; i++) {
    bad += bits_of(f[i]) != (uint32_t)i << 16;
    int is_nan = (i & 0x7f80) == 0x7f80 && (i & 0x7f);
    bad += h2[i] != (is_nan ? (uint16_t)(i | 0x40) : (uint16_t)i);
  }
  CU_ASSERT_EQUAL(bad, 0);
  gt_free(h), gt_free(h2), gt_free(f);
}

static CU_TestInfo tests[] = {
    {"foreach_simple", test_foreach_simple},
    {"foreach_fused", test_foreach_fused},
    {"foreach_maximum", test_foreach_maximum},
    {"sum_sumsq", test_sum_sumsq},
    {"nonfinite", test_nonfinite},
    {"philox_kat", test_philox_kat},
    {"rng_streams", test_rng_streams},
    {"rng_uniform_stats", test_rng_uniform_stats},
    {"rng_normal_stats", test_rng_normal_stats},
    {"cast_f16_edges", test_cast_f16_edges},
    {"cast_f16_exhaustive", test_cast_f16_exhaustive},
    {"cast_f32_sweep", test_cast_f32_sweep},
    {"cast_bf16", test_cast_bf16},
    CU_TEST_INFO_NULL,
};

GT_MAIN("ops_elementwise", tests)
