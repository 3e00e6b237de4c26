/* Dropout on the CPU over n floats: element i is kept when the uniform u01 of word i%4 of
 * Philox block offset + i/4 (core/src/base/philox.h) is >= p, and scaled by 1/(1-p); the keep
 * mask (1 = kept, NULL to skip) is saved for backward. Same seed and offset give the same mask on
 * every backend. */
#include "backend/cpu/cpu_ops.h"
#include "base/philox.h"

/* Also compile the kernels for AVX-512 and AVX2; the loader picks the best one at start. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define DROPOUT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DROPOUT_CLONES
#endif

/* Below this many elements the kernels stay on one thread. */
#define DROPOUT_PARALLEL_MIN 16384
#define DROPOUT_BLOCKS       16

DROPOUT_CLONES
void ganfw_cpu_dropout_forward(ganfw_backend *be, int64_t n, float p, uint64_t seed,
                               uint64_t offset, const float *x, float *y, uint8_t *mask) {
  (void)be;
  if (n <= 0) return;
  /* y = x * (keep ? 1/(1-p) : 0) as PyTorch computes it, so a NaN in x stays NaN; with
   * p >= 1 nothing is kept. */
  const float scale = p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
  /* Groups of DROPOUT_BLOCKS Philox blocks, generated side by side so that they vectorise. */
  const int64_t group = 4 * DROPOUT_BLOCKS, groups = (n + group - 1) / group;
#pragma omp parallel for schedule(static) if (n >= DROPOUT_PARALLEL_MIN)
  for (int64_t g = 0; g < groups; g++) {
    uint32_t r[4 * DROPOUT_BLOCKS];
    const uint64_t b0 = offset + (uint64_t)(g * DROPOUT_BLOCKS);
#pragma omp simd
    for (int l = 0; l < DROPOUT_BLOCKS; l++) ganfw_philox_block(seed, b0 + (uint64_t)l, r + 4 * l);
    const int64_t i0 = g * group, cnt = n - i0 < group ? n - i0 : group;
    for (int64_t j = 0; j < cnt; j++) {
      uint8_t keep = ganfw_philox_u01(r[j]) >= p;
      y[i0 + j] = x[i0 + j] * (keep ? scale : 0.0f);
      if (mask) mask[i0 + j] = keep;
    }
  }
}

DROPOUT_CLONES
void ganfw_cpu_dropout_backward(ganfw_backend *be, int64_t n, float p, const uint8_t *mask,
                                const float *dy, float *dx) {
  (void)be;
  if (n <= 0) return;
  const float scale = p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
#pragma omp parallel for simd schedule(static) if (n >= 4 * DROPOUT_PARALLEL_MIN)
  for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (mask[i] ? scale : 0.0f);
}
