/* The foreach element-wise ops over n contiguous f32 elements (optimizer updates, grad
 * scaling, norms, NaN checks). Multiply-adds are written as fmaf, as PyTorch's CPU (AVX2)
 * and CUDA kernels compute them fused: results match torch 1.13 bit for bit
 * (test_ref_elementwise) on any machine, and the FMA clones only make them fast. Reductions
 * accumulate in double, in a fixed order, so their result does not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Below this many elements a loop runs on one thread (memory-bound ops). */
#define FOREACH_OMP_MIN (1 << 15)
/* Loops with an explicit vector body run over chunks of this many elements. */
#define SIMD_CHUNK 4096

/* The fmaf kernels, once per SIMD level (isa.h); each call runs the level in use. */
#define GANFW_ISA_BODY "backend/cpu/foreach_kernels.h"
#include "backend/cpu/isa_each.h"

typedef void (*foreach_axpy_fn)(ganfw_backend *be, int64_t n, float *y, float alpha,
                                const float *x);
static const foreach_axpy_fn foreach_axpy_by_isa[GANFW_CPU_ISA_COUNT] =
    GANFW_ISA_TABLE(foreach_axpy);

typedef void (*foreach_addcmul_fn)(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                                   const float *b);
static const foreach_addcmul_fn foreach_addcmul_by_isa[GANFW_CPU_ISA_COUNT] =
    GANFW_ISA_TABLE(foreach_addcmul);

typedef void (*foreach_lerp_fn)(ganfw_backend *be, int64_t n, float *y, const float *x, float w);
static const foreach_lerp_fn foreach_lerp_by_isa[GANFW_CPU_ISA_COUNT] =
    GANFW_ISA_TABLE(foreach_lerp);

static void foreach_fill(ganfw_backend *be, int64_t n, float *x, float v) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) x[i] = v;
}

static void foreach_scale(ganfw_backend *be, int64_t n, float *x, float a) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) x[i] *= a;
}

static void foreach_add_scalar(ganfw_backend *be, int64_t n, float *x, float a) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) x[i] += a;
}

static void foreach_add(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void foreach_mul(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

/* y += (v * a) / b (torch.addcdiv) */
static void foreach_addcdiv(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                            const float *b) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] += v * a[i] / b[i];
}

/* sqrt and maximum are written with SSE where there is SSE: with errno-setting sqrtf
 * and NaN-aware selects GCC would not vectorise them. Both paths give the same bits. */
static void foreach_sqrt(ganfw_backend *be, int64_t n, float *out, const float *x) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t c = 0; c < n; c += SIMD_CHUNK) {
    int64_t i = c, hi = n - c < SIMD_CHUNK ? n : c + SIMD_CHUNK;
#ifdef __SSE2__
    for (; i + 4 <= hi; i += 4) _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
    for (; i < hi; i++) out[i] = __builtin_sqrtf(x[i]);
  }
}

/* y = max(y, x), NaN (a + b) when either is NaN (torch.maximum) */
static void foreach_maximum(ganfw_backend *be, int64_t n, float *y, const float *x) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t c = 0; c < n; c += SIMD_CHUNK) {
    int64_t i = c, hi = n - c < SIMD_CHUNK ? n : c + SIMD_CHUNK;
#ifdef __SSE2__
    for (; i + 4 <= hi; i += 4) {
      __m128 a = _mm_loadu_ps(y + i), b = _mm_loadu_ps(x + i);
      __m128 nan = _mm_cmpunord_ps(a, b);
      __m128 m = _mm_max_ps(a, b); /* a > b ? a : b */
      _mm_storeu_ps(y + i, _mm_or_ps(_mm_andnot_ps(nan, m), _mm_and_ps(nan, _mm_add_ps(a, b))));
    }
#endif
    for (; i < hi; i++) {
      float a = y[i], b = x[i];
      y[i] = (a != a || b != b) ? a + b : (a > b ? a : b);
    }
  }
}

/* --- reductions --------------------------------------------------------------------- */
/* Chunks of REDUCE_CHUNK elements are summed in double with 8 lanes; up to REDUCE_GROUP
 * chunk sums are computed in parallel and then added in order. */
#define REDUCE_CHUNK 8192
#define REDUCE_GROUP 256

static double sum_chunk(const float *x, int64_t n, int squares) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  if (squares) {
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; l++) acc[l] += (double)x[i + l] * (double)x[i + l];
    for (; i < n; i++) acc[0] += (double)x[i] * (double)x[i];
  } else {
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; l++) acc[l] += (double)x[i + l];
    for (; i < n; i++) acc[0] += (double)x[i];
  }
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static double reduce(int64_t n, const float *x, int squares) {
  double total = 0.0;
  for (int64_t g = 0; g < n; g += (int64_t)REDUCE_CHUNK * REDUCE_GROUP) {
    int64_t gn =
        n - g < (int64_t)REDUCE_CHUNK * REDUCE_GROUP ? n - g : (int64_t)REDUCE_CHUNK * REDUCE_GROUP;
    int nc = (int)((gn + REDUCE_CHUNK - 1) / REDUCE_CHUNK);
    double part[REDUCE_GROUP];
#pragma omp parallel for if (gn >= FOREACH_OMP_MIN) schedule(static)
    for (int c = 0; c < nc; c++) {
      int64_t lo = (int64_t)c * REDUCE_CHUNK;
      int64_t len = gn - lo < REDUCE_CHUNK ? gn - lo : REDUCE_CHUNK;
      part[c] = sum_chunk(x + g + lo, len, squares);
    }
    for (int c = 0; c < nc; c++) total += part[c];
  }
  return total;
}

static double foreach_sum(ganfw_backend *be, int64_t n, const float *x) {
  return reduce(n, x, 0);
}

static double foreach_sumsq(ganfw_backend *be, int64_t n, const float *x) {
  return reduce(n, x, 1);
}

/* 1 when an exponent field is all ones (inf or NaN). Each thread stops at its first hit. */
static int32_t foreach_nonfinite(ganfw_backend *be, int64_t n, const float *x) {
  int32_t found = 0;
  int64_t nc = (n + REDUCE_CHUNK - 1) / REDUCE_CHUNK;
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static) reduction(| : found)
  for (int64_t c = 0; c < nc; c++) {
    if (found) continue;
    int64_t lo = c * REDUCE_CHUNK;
    int64_t hi = n - lo < REDUCE_CHUNK ? n : lo + REDUCE_CHUNK;
    uint32_t hit = 0;
    for (int64_t i = lo; i < hi; i++) {
      uint32_t u;
      memcpy(&u, x + i, sizeof u);
      hit |= (u & 0x7f800000u) == 0x7f800000u;
    }
    found |= (int32_t)hit;
  }
  return found;
}

/* --- the ops ------------------------------------------------------------------------ */
ganfw_status ganfw_cpu_op_fill(ganfw_backend *be, ganfw_op *op) {
  foreach_fill(be, op->shape.d[0], op->out[0], (float)op->sc[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_scale(ganfw_backend *be, ganfw_op *op) {
  foreach_scale(be, op->shape.d[0], op->out[0], (float)op->sc[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_add_scalar(ganfw_backend *be, ganfw_op *op) {
  foreach_add_scalar(be, op->shape.d[0], op->out[0], (float)op->sc[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_add(ganfw_backend *be, ganfw_op *op) {
  foreach_add(be, op->shape.d[0], op->out[0], op->in[0], op->in[1]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_axpy(ganfw_backend *be, ganfw_op *op) {
  foreach_axpy_by_isa[ganfw_cpu_isa_level()](be, op->shape.d[0], op->out[0], (float)op->sc[0],
                                             op->in[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_mul(ganfw_backend *be, ganfw_op *op) {
  foreach_mul(be, op->shape.d[0], op->out[0], op->in[0], op->in[1]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_addcmul(ganfw_backend *be, ganfw_op *op) {
  foreach_addcmul_by_isa[ganfw_cpu_isa_level()](be, op->shape.d[0], op->out[0], (float)op->sc[0],
                                                op->in[0], op->in[1]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_addcdiv(ganfw_backend *be, ganfw_op *op) {
  foreach_addcdiv(be, op->shape.d[0], op->out[0], (float)op->sc[0], op->in[0], op->in[1]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_sqrt(ganfw_backend *be, ganfw_op *op) {
  foreach_sqrt(be, op->shape.d[0], op->out[0], op->in[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_lerp(ganfw_backend *be, ganfw_op *op) {
  foreach_lerp_by_isa[ganfw_cpu_isa_level()](be, op->shape.d[0], op->out[0], op->in[0],
                                             (float)op->sc[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_maximum(ganfw_backend *be, ganfw_op *op) {
  foreach_maximum(be, op->shape.d[0], op->out[0], op->in[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_sum(ganfw_backend *be, ganfw_op *op) {
  op->result = foreach_sum(be, op->shape.d[0], op->in[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_sumsq(ganfw_backend *be, ganfw_op *op) {
  op->result = foreach_sumsq(be, op->shape.d[0], op->in[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_nonfinite(ganfw_backend *be, ganfw_op *op) {
  op->result = foreach_nonfinite(be, op->shape.d[0], op->in[0]);
  return GANFW_OK;
}

/* Buffer by buffer, stopping at the first that has a NaN or inf. */
ganfw_status ganfw_cpu_op_nonfinite_many(ganfw_backend *be, ganfw_op *op) {
  const float *const *x = op->in[0];
  const int64_t *numel = op->in[1];
  int32_t found = 0;
  for (int64_t i = 0; i < op->shape.d[0] && !found; i++)
    found = foreach_nonfinite(be, numel[i], x[i]);
  op->result = found;
  return GANFW_OK;
}
