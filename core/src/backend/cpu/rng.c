/* Uniform and normal f32 samples over n elements from Philox 4x32-10 (core/src/base/philox.h):
 * element i uses word i % 4 of block offset + i / 4 of the seed's stream, so any element
 * is computed alone, the same on every backend and for any thread count. */
#include <math.h>

#include "base/philox.h"
#include "backend/cpu/cpu_ops.h"

/* Philox is compute-bound: threads pay off early. Counted in blocks of 4. */
#define RNG_OMP_MIN_BLOCKS 2048

/* lo + (hi - lo) * u, u in [0, 1), fused (a CUDA twin contracts it too); a result that
 * rounds up to hi becomes lo so that the range stays [lo, hi). */
static inline float uniform_at(uint32_t w, float lo, float range, float hi) {
  float v = fmaf(ganfw_philox_u01(w), range, lo);
  return v < hi ? v : lo;
}

static void rng_uniform(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float lo,
                        float hi, float *out) {
  int64_t nb = (n + 3) / 4;
  float range = hi - lo;
#pragma omp parallel for if (nb >= RNG_OMP_MIN_BLOCKS) schedule(static)
  for (int64_t b = 0; b < nb; b++) {
    uint32_t w[4];
    ganfw_philox_block(seed, offset + (uint64_t)b, w);
    int64_t i0 = b * 4;
    int m = n - i0 < 4 ? (int)(n - i0) : 4;
    for (int j = 0; j < m; j++) out[i0 + j] = uniform_at(w[j], lo, range, hi);
  }
}

/* Box-Muller on the word pairs (w[0], w[1]) and (w[2], w[3]): u1 in (0, 1] so the log
 * is finite (|z| <= 5.77), u2 in [0, 1); the pair gives r cos(2 pi u2), r sin(2 pi u2). */
static inline void box_muller(uint32_t a, uint32_t b, float z[2]) {
  float u1 = ganfw_philox_u01_open0(a);
  float u2 = ganfw_philox_u01(b);
  float r = sqrtf(-2.0f * logf(u1));
  float t = 6.2831853071795864769f * u2;
  z[0] = r * cosf(t);
  z[1] = r * sinf(t);
}

static void rng_normal(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float mean,
                       float std, float *out) {
  int64_t nb = (n + 3) / 4;
#pragma omp parallel for if (nb >= RNG_OMP_MIN_BLOCKS) schedule(static)
  for (int64_t b = 0; b < nb; b++) {
    uint32_t w[4];
    float z[4];
    ganfw_philox_block(seed, offset + (uint64_t)b, w);
    box_muller(w[0], w[1], z);
    box_muller(w[2], w[3], z + 2);
    int64_t i0 = b * 4;
    int m = n - i0 < 4 ? (int)(n - i0) : 4;
    for (int j = 0; j < m; j++) out[i0 + j] = fmaf(std, z[j], mean);
  }
}

ganfw_status ganfw_cpu_op_rng_uniform(ganfw_backend *be, ganfw_op *op) {
  rng_uniform(be, op->shape.d[0], op->seed, op->offset, (float)op->sc[0], (float)op->sc[1],
              op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_rng_normal(ganfw_backend *be, ganfw_op *op) {
  rng_normal(be, op->shape.d[0], op->seed, op->offset, (float)op->sc[0], (float)op->sc[1],
             op->out[0]);
  return GANFW_OK;
}
