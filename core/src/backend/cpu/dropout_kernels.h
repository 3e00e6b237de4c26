/* The dropout kernels of dropout.c, compiled once per SIMD level by isa_each.h.
 * No include guard: included once per level. Each name below becomes that level's
 * (GANFW_ISA: x -> x_portable, x_avx2, x_avx512). */
#define dropout_forward  GANFW_ISA(dropout_forward)
#define dropout_backward GANFW_ISA(dropout_backward)

static void dropout_forward(ganfw_backend *be, int64_t n, float p, uint64_t seed, uint64_t offset,
                            const float *x, float *y, uint8_t *mask) {
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

static void dropout_backward(ganfw_backend *be, int64_t n, float p, const uint8_t *mask,
                             const float *dy, float *dx) {
  (void)be;
  if (n <= 0) return;
  const float scale = p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
#pragma omp parallel for simd schedule(static) if (n >= 4 * DROPOUT_PARALLEL_MIN)
  for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (mask[i] ? scale : 0.0f);
}

#undef dropout_forward
#undef dropout_backward
