/* Upsampling by 2 on the GPU with the CPU backend's rules (core/src/backend/cpu/
 * upsample2d.c): x [planes,H,W] -> y [planes,2H,2W], nearest or bilinear with
 * align_corners=False. Forward: one thread per output. Backward gathers: one thread per
 * input sums the outputs that read it (no atomics, a fixed order), in double. */
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

/* Where output o of an axis of n inputs reads (bilinear): i0 <= i1 and their weights. */
static __device__ __forceinline__ void source(int64_t o, int64_t n, int64_t *i0, int64_t *i1,
                                              float *w0, float *w1) {
  float src = 0.5f * ((float)o + 0.5f) - 0.5f;
  if (src < 0.0f) src = 0.0f;
  *i0 = (int64_t)src;
  *i1 = *i0 + (*i0 < n - 1 ? 1 : 0);
  *w1 = src - (float)*i0;
  *w0 = 1.0f - *w1;
}

static __device__ __forceinline__ float weight(int64_t o, int64_t i, int64_t n) {
  int64_t i0, i1;
  float w0, w1;
  source(o, n, &i0, &i1, &w0, &w1);
  return (i0 == i ? w0 : 0.0f) + (i1 == i ? w1 : 0.0f);
}

static __global__ void upsample_forward_k(int64_t total, int32_t mode, int64_t H, int64_t W,
                                          const float *x, float *y) {
  const int64_t P = 2 * H, Q = 2 * W;
  GANFW_CU_FOR(idx, total) {
    const int64_t q = idx % Q, p = idx / Q % P, plane = idx / (P * Q);
    const float *xp = x + plane * H * W;
    if (mode != GANFW_UPSAMPLE_BILINEAR) {
      y[idx] = xp[p / 2 * W + q / 2];
      continue;
    }
    int64_t h0, h1, w0, w1;
    float a0, a1, b0, b1;
    source(p, H, &h0, &h1, &a0, &a1);
    source(q, W, &w0, &w1, &b0, &b1);
    y[idx] = (float)((double)a0 * ((double)b0 * xp[h0 * W + w0] + (double)b1 * xp[h0 * W + w1]) +
                     (double)a1 * ((double)b0 * xp[h1 * W + w0] + (double)b1 * xp[h1 * W + w1]));
  }
}

static __global__ void upsample_backward_k(int64_t total, int32_t mode, int64_t H, int64_t W,
                                           const float *dy, float *dx) {
  const int64_t P = 2 * H, Q = 2 * W;
  GANFW_CU_FOR(idx, total) {
    const int64_t w = idx % W, h = idx / W % H, plane = idx / (H * W);
    const float *g = dy + plane * P * Q;
    if (mode != GANFW_UPSAMPLE_BILINEAR) {
      const float *r0 = g + 2 * h * Q + 2 * w, *r1 = r0 + Q;
      dx[idx] = (float)(((double)r0[0] + r0[1]) + ((double)r1[0] + r1[1]));
      continue;
    }
    const int64_t p0 = 2 * h - 1 < 0 ? 0 : 2 * h - 1, p1 = 2 * h + 3 > P ? P : 2 * h + 3;
    const int64_t q0 = 2 * w - 1 < 0 ? 0 : 2 * w - 1, q1 = 2 * w + 3 > Q ? Q : 2 * w + 3;
    double acc = 0.0;
    for (int64_t p = p0; p < p1; p++) {
      const float a = weight(p, h, H);
      if (a == 0.0f) continue;
      double row = 0.0;
      for (int64_t q = q0; q < q1; q++) row += (double)weight(q, w, W) * g[p * Q + q];
      acc += a * row;
    }
    dx[idx] = (float)acc;
  }
}

extern "C" cudaError_t ganfw_cu_upsample2d_forward(cudaStream_t st, int32_t mode, int64_t planes,
                                                   int64_t H, int64_t W, const float *x, float *y) {
  const int64_t total = planes * 4 * H * W;
  GANFW_CU_LAUNCH(st, total, upsample_forward_k, total, mode, H, W, x, y);
}

extern "C" cudaError_t ganfw_cu_upsample2d_backward(cudaStream_t st, int32_t mode, int64_t planes,
                                                    int64_t H, int64_t W, const float *dy,
                                                    float *dx) {
  const int64_t total = planes * H * W;
  GANFW_CU_LAUNCH(st, total, upsample_backward_k, total, mode, H, W, dy, dx);
}
