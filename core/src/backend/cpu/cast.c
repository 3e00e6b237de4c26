/* f32 <-> f16 and f32 <-> bf16 over n contiguous elements (AMP storage), rounding to
 * nearest even. The scalar rules live in cast.h; f16 has an F16C fast path picked at run
 * time (from the AVX2 level of isa.h up), which gives the same bits (tests check all f16
 * values and a sweep of f32 ones). */
#include "backend/cpu/cast.h"

#include <stdatomic.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#define GANFW_CAST_X86 1
#endif

/* Casts are memory-bound: threads only pay off on large arrays. */
#define CAST_OMP_MIN (1 << 16)

void ganfw_cpu_f32_to_f16_portable(int64_t n, const float *x, uint16_t *y) {
#pragma omp parallel for if (n >= CAST_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = ganfw_f32_to_f16_scalar(x[i]);
}

void ganfw_cpu_f16_to_f32_portable(int64_t n, const uint16_t *x, float *y) {
#pragma omp parallel for if (n >= CAST_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = ganfw_f16_to_f32_scalar(x[i]);
}

#ifdef GANFW_CAST_X86
/* F16C with the AVX register state enabled by the OS (cpuid leaf 1 and xgetbv), probed
 * once. Written with cpuid because not every compiler knows "f16c" as a cpu feature. */
static int probe_f16c(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (!(c & bit_OSXSAVE) || !(c & bit_AVX) || !(c & bit_F16C)) return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6u) == 6u; /* XMM and YMM state */
}

int ganfw_cpu_have_f16c(void) {
  static atomic_int cached = -1;
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v < 0) {
    v = probe_f16c();
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v;
}

/* Blocks of 8 with vcvtps2ph (immediate round-to-nearest-even, MXCSR not consulted) and
 * vcvtph2ps; the tail of fewer than 8 goes through the scalar code. */
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c_range(int64_t lo, int64_t hi,
                                                                      const float *x, uint16_t *y) {
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128((__m128i *)(void *)(y + i), h);
  }
  for (; i < hi; i++) y[i] = ganfw_f32_to_f16_scalar(x[i]);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c_range(int64_t lo, int64_t hi,
                                                                      const uint16_t *x, float *y) {
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(x + i));
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < hi; i++) y[i] = ganfw_f16_to_f32_scalar(x[i]);
}

/* This thread's share [*lo, *hi) of [0, n), cut at multiples of 8. */
static void thread_range(int64_t n, int64_t *lo, int64_t *hi) {
  int64_t blocks = (n + 7) / 8;
  int nt = omp_get_num_threads(), t = omp_get_thread_num();
  int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
  *lo = b0 * 8;
  *hi = b1 * 8 < n ? b1 * 8 : n;
}

void ganfw_cpu_f32_to_f16_f16c(int64_t n, const float *x, uint16_t *y) {
#pragma omp parallel if (n >= CAST_OMP_MIN)
  {
    int64_t lo, hi;
    thread_range(n, &lo, &hi);
    if (lo < hi) f32_to_f16_f16c_range(lo, hi, x, y);
  }
}

void ganfw_cpu_f16_to_f32_f16c(int64_t n, const uint16_t *x, float *y) {
#pragma omp parallel if (n >= CAST_OMP_MIN)
  {
    int64_t lo, hi;
    thread_range(n, &lo, &hi);
    if (lo < hi) f16_to_f32_f16c_range(lo, hi, x, y);
  }
}
#else
int ganfw_cpu_have_f16c(void) {
  return 0;
}

void ganfw_cpu_f32_to_f16_f16c(int64_t n, const float *x, uint16_t *y) {
  ganfw_cpu_f32_to_f16_portable(n, x, y);
}

void ganfw_cpu_f16_to_f32_f16c(int64_t n, const uint16_t *x, float *y) {
  ganfw_cpu_f16_to_f32_portable(n, x, y);
}
#endif

/* F16C runs from the AVX2 level up (x86-64-v3 includes it), so GANFW_CPU_ISA=portable
 * forces the scalar path. */
int ganfw_cpu_use_f16c(void) {
  return ganfw_cpu_isa_level() >= GANFW_CPU_ISA_AVX2 && ganfw_cpu_have_f16c();
}

void ganfw_cpu_row_to_f32(int32_t dt, int64_t n, const void *x, float *y) {
  if (dt == GANFW_DTYPE_F32) {
    memcpy(y, x, (size_t)n * sizeof *y);
    return;
  }
  const uint16_t *h = x;
  if (dt == GANFW_DTYPE_BF16) {
    for (int64_t i = 0; i < n; i++) y[i] = ganfw_bf16_to_f32_scalar(h[i]);
    return;
  }
#ifdef GANFW_CAST_X86
  if (ganfw_cpu_use_f16c()) {
    f16_to_f32_f16c_range(0, n, h, y);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) y[i] = ganfw_f16_to_f32_scalar(h[i]);
}

void ganfw_cpu_row_from_f32(int32_t dt, int64_t n, const float *x, void *y) {
  if (dt == GANFW_DTYPE_F32) {
    memcpy(y, x, (size_t)n * sizeof *x);
    return;
  }
  uint16_t *h = y;
  if (dt == GANFW_DTYPE_BF16) {
    for (int64_t i = 0; i < n; i++) h[i] = ganfw_f32_to_bf16_scalar(x[i]);
    return;
  }
#ifdef GANFW_CAST_X86
  if (ganfw_cpu_use_f16c()) {
    f32_to_f16_f16c_range(0, n, x, h);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) h[i] = ganfw_f32_to_f16_scalar(x[i]);
}

static void f32_to_f16(int64_t n, const float *x, uint16_t *y) {
  if (ganfw_cpu_use_f16c())
    ganfw_cpu_f32_to_f16_f16c(n, x, y);
  else
    ganfw_cpu_f32_to_f16_portable(n, x, y);
}

static void f16_to_f32(int64_t n, const uint16_t *x, float *y) {
  if (ganfw_cpu_use_f16c())
    ganfw_cpu_f16_to_f32_f16c(n, x, y);
  else
    ganfw_cpu_f16_to_f32_portable(n, x, y);
}

/* bf16 has no hardware path: AVX512-BF16's vcvtneps2bf16 flushes f32 subnormals to zero
 * (0x007fffff gives 0x0000, not 0x0080), and the branch-free integer rounding below
 * vectorises by itself. */
static void f32_to_bf16(int64_t n, const float *x, uint16_t *y) {
#pragma omp parallel for if (n >= CAST_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = ganfw_f32_to_bf16_scalar(x[i]);
}

static void bf16_to_f32(int64_t n, const uint16_t *x, float *y) {
#pragma omp parallel for if (n >= CAST_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = ganfw_bf16_to_f32_scalar(x[i]);
}

/* f32 to dtype (f16 or bf16; in f32, a copy). */
ganfw_status ganfw_cpu_op_cast_from_f32(ganfw_backend *be, ganfw_op *op) {
  const int64_t n = op->shape.d[0];
  if (op->dtype == GANFW_DTYPE_F16)
    f32_to_f16(n, op->in[0], op->out[0]);
  else if (op->dtype == GANFW_DTYPE_BF16)
    f32_to_bf16(n, op->in[0], op->out[0]);
  else if (n > 0 && op->out[0] != op->in[0])
    memmove(op->out[0], op->in[0], (size_t)n * sizeof(float));
  return GANFW_OK;
}

/* dtype (f16 or bf16; in f32, a copy) to f32. */
ganfw_status ganfw_cpu_op_cast_to_f32(ganfw_backend *be, ganfw_op *op) {
  const int64_t n = op->shape.d[0];
  if (op->dtype == GANFW_DTYPE_F16)
    f16_to_f32(n, op->in[0], op->out[0]);
  else if (op->dtype == GANFW_DTYPE_BF16)
    bf16_to_f32(n, op->in[0], op->out[0]);
  else if (n > 0 && op->out[0] != op->in[0])
    memmove(op->out[0], op->in[0], (size_t)n * sizeof(float));
  return GANFW_OK;
}
