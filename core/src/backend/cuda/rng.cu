/* Philox 4x32-10 sampling on the GPU with the CPU backend's conventions (core/src/base/philox.h,
 * core/src/backend/cpu/rng.c, dropout.c): element i uses word i % 4 of block offset + i / 4 of the
 * seed's stream, one thread per block. Uniform numbers and dropout masks are the CPU's bit
 * for bit; normal numbers differ from them only by the ulps of the device's logf, sinf and
 * cosf. */
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "base/philox.h"

/* lo + (hi - lo) * u, fused as on the CPU; a result that rounds up to hi becomes lo. */
static __global__ void uniform_k(int64_t n, int64_t nb, uint64_t seed, uint64_t offset, float lo,
                                 float range, float hi, float *out) {
  GANFW_CU_FOR(b, nb) {
    uint32_t w[4];
    ganfw_philox_block(seed, offset + (uint64_t)b, w);
    const int64_t i0 = b * 4;
    const int m = n - i0 < 4 ? (int)(n - i0) : 4;
    for (int j = 0; j < m; j++) {
      const float v = fmaf(ganfw_philox_u01(w[j]), range, lo);
      out[i0 + j] = v < hi ? v : lo;
    }
  }
}

/* Box-Muller on (w0, w1) and (w2, w3), as the CPU computes it. */
static __device__ __forceinline__ void box_muller(uint32_t a, uint32_t b, float *z0, float *z1) {
  const float u1 = ganfw_philox_u01_open0(a);
  const float u2 = ganfw_philox_u01(b);
  const float r = sqrtf(__fmul_rn(-2.0f, logf(u1)));
  const float t = __fmul_rn(6.2831853071795864769f, u2);
  *z0 = __fmul_rn(r, cosf(t));
  *z1 = __fmul_rn(r, sinf(t));
}

static __global__ void normal_k(int64_t n, int64_t nb, uint64_t seed, uint64_t offset, float mean,
                                float std, float *out) {
  GANFW_CU_FOR(b, nb) {
    uint32_t w[4];
    float z[4];
    ganfw_philox_block(seed, offset + (uint64_t)b, w);
    box_muller(w[0], w[1], &z[0], &z[1]);
    box_muller(w[2], w[3], &z[2], &z[3]);
    const int64_t i0 = b * 4;
    const int m = n - i0 < 4 ? (int)(n - i0) : 4;
    for (int j = 0; j < m; j++) out[i0 + j] = fmaf(std, z[j], mean);
  }
}

/* keep when u01 >= p; y = x * (keep ? 1/(1-p) : 0) so that NaN in x stays NaN. */
static __global__ void dropout_forward_k(int64_t n, int64_t nb, float p, float scale, uint64_t seed,
                                         uint64_t offset, const float *x, float *y, uint8_t *mask) {
  GANFW_CU_FOR(b, nb) {
    uint32_t w[4];
    ganfw_philox_block(seed, offset + (uint64_t)b, w);
    const int64_t i0 = b * 4;
    const int m = n - i0 < 4 ? (int)(n - i0) : 4;
    for (int j = 0; j < m; j++) {
      const uint8_t keep = ganfw_philox_u01(w[j]) >= p;
      y[i0 + j] = __fmul_rn(x[i0 + j], keep ? scale : 0.0f);
      if (mask) mask[i0 + j] = keep;
    }
  }
}

static __global__ void dropout_backward_k(int64_t n, float scale, const uint8_t *mask,
                                          const float *dy, float *dx) {
  GANFW_CU_FOR(i, n) dx[i] = __fmul_rn(dy[i], mask[i] ? scale : 0.0f);
}

extern "C" cudaError_t ganfw_cu_rng_uniform(cudaStream_t st, int64_t n, uint64_t seed,
                                            uint64_t offset, float lo, float hi, float *out) {
  const int64_t nb = (n + 3) / 4;
  GANFW_CU_LAUNCH(st, nb, uniform_k, n, nb, seed, offset, lo, hi - lo, hi, out);
}

extern "C" cudaError_t ganfw_cu_rng_normal(cudaStream_t st, int64_t n, uint64_t seed,
                                           uint64_t offset, float mean, float std, float *out) {
  const int64_t nb = (n + 3) / 4;
  GANFW_CU_LAUNCH(st, nb, normal_k, n, nb, seed, offset, mean, std, out);
}

extern "C" cudaError_t ganfw_cu_dropout_forward(cudaStream_t st, int64_t n, float p, uint64_t seed,
                                                uint64_t offset, const float *x, float *y,
                                                uint8_t *mask) {
  const int64_t nb = (n + 3) / 4;
  const float scale = p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
  GANFW_CU_LAUNCH(st, nb, dropout_forward_k, n, nb, p, scale, seed, offset, x, y, mask);
}

extern "C" cudaError_t ganfw_cu_dropout_backward(cudaStream_t st, int64_t n, float p,
                                                 const uint8_t *mask, const float *dy, float *dx) {
  const float scale = p >= 1.0f ? 0.0f : 1.0f / (1.0f - p);
  GANFW_CU_LAUNCH(st, n, dropout_backward_k, n, scale, mask, dy, dx);
}
