/* Max and average pooling on the GPU, forward and backward, with the CPU backend's rules
 * (core/src/backend/cpu/pool2d.c): x [N,C,H,W] -> y [N,C,P,Q]; max pads with -inf, lets NaN win and
 * saves the argmax (index into the H*W plane, -1 for a window wholly in the padding);
 * average divides by the window clipped to the padded input (count_include_pad=True).
 * Forward: one thread per output. Backward gathers: one thread per input element sums the
 * outputs whose windows cover it, so no atomics and a fixed order. */
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

typedef struct pool_dims {
  int64_t H, W, R, S, sh, sw, ph, pw, P, Q;
} pool_dims;

static pool_dims dims_of(const ganfw_pool2d_shape *s) {
  pool_dims d = {s->H, s->W, s->R, s->S, s->stride_h, s->stride_w, s->pad_h, s->pad_w, s->P, s->Q};
  return d;
}

/* The window of output o clipped to the input: [*lo, *hi). */
static __device__ __forceinline__ void window(int64_t o, int64_t stride, int64_t pad, int64_t k,
                                              int64_t in, int64_t *lo, int64_t *hi) {
  const int64_t start = o * stride - pad, end = start + k;
  *lo = start < 0 ? 0 : start;
  *hi = end > in ? in : end;
}

/* The divisor of average pooling: the window clipped only to the padded input. */
static __device__ __forceinline__ int64_t padded_extent(int64_t o, int64_t stride, int64_t pad,
                                                        int64_t k, int64_t in) {
  const int64_t start = o * stride - pad;
  int64_t end = start + k;
  if (end > in + pad) end = in + pad;
  return end - start;
}

/* The outputs along one axis whose windows cover input index i: [*lo, *hi). */
static __device__ __forceinline__ void covering(int64_t i, int64_t stride, int64_t pad, int64_t k,
                                                int64_t out, int64_t *lo, int64_t *hi) {
  /* o covers i when o*stride - pad <= i < o*stride - pad + k */
  const int64_t a = i + pad - k + 1; /* o*stride >= a */
  int64_t first = a <= 0 ? 0 : (a + stride - 1) / stride;
  int64_t last = (i + pad) / stride; /* o*stride <= i + pad */
  *lo = first;
  *hi = last + 1 < out ? last + 1 : out;
}

static __global__ void maxpool_forward_k(int64_t total, pool_dims d, const float *x, float *y,
                                         int32_t *argmax) {
  GANFW_CU_FOR(idx, total) {
    const int64_t q = idx % d.Q, p = idx / d.Q % d.P, plane = idx / (d.P * d.Q);
    const float *xp = x + plane * d.H * d.W;
    int64_t h0, h1, w0, w1;
    window(p, d.sh, d.ph, d.R, d.H, &h0, &h1);
    window(q, d.sw, d.pw, d.S, d.W, &w0, &w1);
    int64_t best = h0 < h1 && w0 < w1 ? h0 * d.W + w0 : -1;
    float m = -INFINITY;
    for (int64_t h = h0; h < h1; h++) {
      for (int64_t w = w0; w < w1; w++) {
        const float v = xp[h * d.W + w];
        if (v > m || isnan(v)) {
          m = v;
          best = h * d.W + w;
        }
      }
    }
    y[idx] = m;
    if (argmax) argmax[idx] = (int32_t)best;
  }
}

static __global__ void maxpool_backward_k(int64_t total, pool_dims d, const float *dy,
                                          const int32_t *argmax, float *dx) {
  GANFW_CU_FOR(idx, total) {
    const int64_t w = idx % d.W, h = idx / d.W % d.H, plane = idx / (d.H * d.W);
    const int64_t at = h * d.W + w;
    const float *dyp = dy + plane * d.P * d.Q;
    const int32_t *ap = argmax + plane * d.P * d.Q;
    int64_t p0, p1, q0, q1;
    covering(h, d.sh, d.ph, d.R, d.P, &p0, &p1);
    covering(w, d.sw, d.pw, d.S, d.Q, &q0, &q1);
    float g = 0.0f;
    for (int64_t p = p0; p < p1; p++)
      for (int64_t q = q0; q < q1; q++)
        if (ap[p * d.Q + q] == at) g += dyp[p * d.Q + q];
    dx[idx] = g;
  }
}

static __global__ void avgpool_forward_k(int64_t total, pool_dims d, const float *x, float *y) {
  GANFW_CU_FOR(idx, total) {
    const int64_t q = idx % d.Q, p = idx / d.Q % d.P, plane = idx / (d.P * d.Q);
    const float *xp = x + plane * d.H * d.W;
    int64_t h0, h1, w0, w1;
    window(p, d.sh, d.ph, d.R, d.H, &h0, &h1);
    window(q, d.sw, d.pw, d.S, d.W, &w0, &w1);
    const int64_t eh = padded_extent(p, d.sh, d.ph, d.R, d.H);
    const int64_t ew = padded_extent(q, d.sw, d.pw, d.S, d.W);
    float sum = 0.0f;
    for (int64_t h = h0; h < h1; h++)
      for (int64_t w = w0; w < w1; w++) sum += xp[h * d.W + w];
    y[idx] = sum / (float)(eh * ew);
  }
}

static __global__ void avgpool_backward_k(int64_t total, pool_dims d, const float *dy, float *dx) {
  GANFW_CU_FOR(idx, total) {
    const int64_t w = idx % d.W, h = idx / d.W % d.H, plane = idx / (d.H * d.W);
    const float *dyp = dy + plane * d.P * d.Q;
    int64_t p0, p1, q0, q1;
    covering(h, d.sh, d.ph, d.R, d.P, &p0, &p1);
    covering(w, d.sw, d.pw, d.S, d.Q, &q0, &q1);
    float g = 0.0f;
    for (int64_t p = p0; p < p1; p++) {
      const int64_t eh = padded_extent(p, d.sh, d.ph, d.R, d.H);
      for (int64_t q = q0; q < q1; q++) {
        const int64_t ew = padded_extent(q, d.sw, d.pw, d.S, d.W);
        g += dyp[p * d.Q + q] / (float)(eh * ew);
      }
    }
    dx[idx] = g;
  }
}

extern "C" cudaError_t ganfw_cu_maxpool2d_forward(cudaStream_t st, const ganfw_pool2d_shape *s,
                                                  const float *x, float *y, int32_t *argmax) {
  const int64_t total = s->N * s->C * s->P * s->Q;
  GANFW_CU_LAUNCH(st, total, maxpool_forward_k, total, dims_of(s), x, y, argmax);
}

extern "C" cudaError_t ganfw_cu_maxpool2d_backward(cudaStream_t st, const ganfw_pool2d_shape *s,
                                                   const float *dy, const int32_t *argmax,
                                                   float *dx) {
  const int64_t total = s->N * s->C * s->H * s->W;
  GANFW_CU_LAUNCH(st, total, maxpool_backward_k, total, dims_of(s), dy, argmax, dx);
}

extern "C" cudaError_t ganfw_cu_avgpool2d_forward(cudaStream_t st, const ganfw_pool2d_shape *s,
                                                  const float *x, float *y) {
  const int64_t total = s->N * s->C * s->P * s->Q;
  GANFW_CU_LAUNCH(st, total, avgpool_forward_k, total, dims_of(s), x, y);
}

extern "C" cudaError_t ganfw_cu_avgpool2d_backward(cudaStream_t st, const ganfw_pool2d_shape *s,
                                                   const float *dy, float *dx) {
  const int64_t total = s->N * s->C * s->H * s->W;
  GANFW_CU_LAUNCH(st, total, avgpool_backward_k, total, dims_of(s), dy, dx);
}
