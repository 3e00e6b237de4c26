/* The CUDA kernels behind the attention, layout and indexing ops, with the CPU backend's rules
 * (core/src/backend/cpu/softmax.c, permute.c, gather.c); the batched product is cuBLAS's
 * (attention_ops.c). softmax on x viewed as [outer, dim, inner]: rows of dim values, inner
 * apart; a row of contiguous values (inner 1) is one warp's, a row of strided ones one
 * thread's (neighbouring threads then read neighbouring values). The row's max is exact, its
 * sums in double in a fixed tree, so results repeat exactly; exp is CUDA's expf (within 2 ulp
 * of the CPU's). permute and gather: one thread per output value. scatter_add: one thread per
 * column (o, n) of out, adding in increasing i, so repeated indices sum in a fixed order
 * without atomics. */
#include <math.h>

#include "backend/cuda/attention_ops.h"
#include "backend/cuda/launch.cuh"

#define WARP 32

/* The max and the sum over a warp, the same value in every lane (a butterfly: lanes i and
 * i ^ k add the same two values, so they agree after each step). */
static __device__ __forceinline__ float warp_max(float v) {
  for (int k = WARP / 2; k > 0; k >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, k));
  return v;
}

static __device__ __forceinline__ double warp_sum(double v) {
  for (int k = WARP / 2; k > 0; k >>= 1) v += __shfl_xor_sync(0xffffffffu, v, k);
  return v;
}

/* One row of dim values, `inner` apart; this thread takes j = first, first + step, ...; a warp
 * (WARPED) reduces over its lanes. max ignores NaN (fmaxf); a NaN still reaches the sum. */
template <bool WARPED>
static __device__ void softmax_row(int32_t log_out, int64_t dim, int64_t inner, int first, int step,
                                   const float *x, float *y) {
  float m = -INFINITY;
  for (int64_t j = first; j < dim; j += step) m = fmaxf(m, x[j * inner]);
  if (WARPED) m = warp_max(m);
  if (m == -INFINITY) m = 0.0f; /* a row of -inf: 0/0, NaN, as torch */
  double sum = 0.0;
  for (int64_t j = first; j < dim; j += step) sum += (double)expf(x[j * inner] - m);
  if (WARPED) sum = warp_sum(sum);
  if (log_out) {
    const double shift = (double)m + log(sum);
    for (int64_t j = first; j < dim; j += step)
      y[j * inner] = (float)((double)x[j * inner] - shift);
  } else {
    const double inv = 1.0 / sum;
    for (int64_t j = first; j < dim; j += step)
      y[j * inner] = (float)((double)expf(x[j * inner] - m) * inv);
  }
}

template <bool WARPED>
static __device__ void softmax_backward_row(int32_t log_out, int64_t dim, int64_t inner, int first,
                                            int step, const float *y, const float *dy, float *dx) {
  double sum = 0.0;
  if (log_out) {
    for (int64_t j = first; j < dim; j += step) sum += (double)dy[j * inner];
  } else {
    for (int64_t j = first; j < dim; j += step) sum += (double)dy[j * inner] * (double)y[j * inner];
  }
  if (WARPED) sum = warp_sum(sum);
  for (int64_t j = first; j < dim; j += step) {
    const double v = (double)y[j * inner], g = (double)dy[j * inner];
    dx[j * inner] = (float)(log_out ? g - exp(v) * sum : v * (g - sum));
  }
}

/* Rows of contiguous values: one warp each (the loop bound is the same for a warp's lanes). */
static __global__ void softmax_warp_k(int32_t log_out, int64_t rows, int64_t dim, const float *x,
                                      float *y) {
  const int lane = threadIdx.x % WARP;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / WARP);
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP; r < rows;
       r += warps)
    softmax_row<true>(log_out, dim, 1, lane, WARP, x + r * dim, y + r * dim);
}

static __global__ void softmax_backward_warp_k(int32_t log_out, int64_t rows, int64_t dim,
                                               const float *y, const float *dy, float *dx) {
  const int lane = threadIdx.x % WARP;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / WARP);
  for (int64_t r = (int64_t)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP; r < rows;
       r += warps)
    softmax_backward_row<true>(log_out, dim, 1, lane, WARP, y + r * dim, dy + r * dim,
                               dx + r * dim);
}

/* Rows of strided values: one thread each. */
static __global__ void softmax_thread_k(int32_t log_out, int64_t outer, int64_t dim, int64_t inner,
                                        const float *x, float *y) {
  GANFW_CU_FOR(r, outer * inner) {
    const int64_t at = r / inner * dim * inner + r % inner;
    softmax_row<false>(log_out, dim, inner, 0, 1, x + at, y + at);
  }
}

static __global__ void softmax_backward_thread_k(int32_t log_out, int64_t outer, int64_t dim,
                                                 int64_t inner, const float *y, const float *dy,
                                                 float *dx) {
  GANFW_CU_FOR(r, outer * inner) {
    const int64_t at = r / inner * dim * inner + r % inner;
    softmax_backward_row<false>(log_out, dim, inner, 0, 1, y + at, dy + at, dx + at);
  }
}

extern "C" cudaError_t ganfw_cu_softmax_forward(cudaStream_t st, int32_t log_out, int64_t outer,
                                                int64_t dim, int64_t inner, const float *x,
                                                float *y) {
  if (outer <= 0 || dim <= 0 || inner <= 0) return cudaSuccess;
  if (inner == 1) {
    softmax_warp_k<<<ganfw_cu_blocks(outer * WARP), GANFW_CU_THREADS, 0, st>>>(log_out, outer, dim,
                                                                               x, y);
    return cudaGetLastError();
  }
  GANFW_CU_LAUNCH(st, outer * inner, softmax_thread_k, log_out, outer, dim, inner, x, y);
}

extern "C" cudaError_t ganfw_cu_softmax_backward(cudaStream_t st, int32_t log_out, int64_t outer,
                                                 int64_t dim, int64_t inner, const float *y,
                                                 const float *dy, float *dx) {
  if (outer <= 0 || dim <= 0 || inner <= 0) return cudaSuccess;
  if (inner == 1) {
    softmax_backward_warp_k<<<ganfw_cu_blocks(outer * WARP), GANFW_CU_THREADS, 0, st>>>(
        log_out, outer, dim, y, dy, dx);
    return cudaGetLastError();
  }
  GANFW_CU_LAUNCH(st, outer * inner, softmax_backward_thread_k, log_out, outer, dim, inner, y, dy,
                  dx);
}

/* --- permute ------------------------------------------------------------------------------ */

/* y's dims and, for each, the step in x. */
typedef struct permute_plan {
  int64_t yd[4], xs[4];
} permute_plan;

static __global__ void permute_k(permute_plan p, int64_t n, const float *x, float *y) {
  GANFW_CU_FOR(i, n) {
    const int64_t i3 = i % p.yd[3], i2 = i / p.yd[3] % p.yd[2];
    const int64_t i1 = i / (p.yd[3] * p.yd[2]) % p.yd[1], i0 = i / (p.yd[3] * p.yd[2] * p.yd[1]);
    y[i] = x[i0 * p.xs[0] + i1 * p.xs[1] + i2 * p.xs[2] + i3 * p.xs[3]];
  }
}

extern "C" cudaError_t ganfw_cu_permute(cudaStream_t st, const int64_t *d, int32_t perm,
                                        const float *x, float *y) {
  const int64_t stride[4] = {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  permute_plan p;
  for (int k = 0; k < 4; k++) {
    const int src = (perm >> (2 * k)) & 3;
    p.yd[k] = d[src], p.xs[k] = stride[src];
  }
  const int64_t n = d[0] * d[1] * d[2] * d[3];
  GANFW_CU_LAUNCH(st, n, permute_k, p, n, x, y);
}

/* --- gather and scatter_add ----------------------------------------------------------------- */

static __global__ void gather_k(int64_t n, int64_t x_dim, int64_t idx_dim, int64_t inner,
                                const float *x, const int32_t *index, float *y) {
  GANFW_CU_FOR(i, n) {
    const int64_t k = i % inner, o = i / inner / idx_dim;
    y[i] = x[(o * x_dim + index[i]) * inner + k];
  }
}

static __global__ void scatter_add_k(int64_t outer, int64_t out_dim, int64_t idx_dim, int64_t inner,
                                     const int32_t *index, const float *src, float *out) {
  GANFW_CU_FOR(c, outer * inner) {
    const int64_t o = c / inner, k = c % inner;
    float *col = out + o * out_dim * inner + k;
    const int64_t first = o * idx_dim * inner + k;
    for (int64_t i = 0; i < idx_dim; i++)
      col[(int64_t)index[first + i * inner] * inner] += src[first + i * inner];
  }
}

extern "C" cudaError_t ganfw_cu_gather(cudaStream_t st, int64_t outer, int64_t x_dim,
                                       int64_t idx_dim, int64_t inner, const float *x,
                                       const int32_t *index, float *y) {
  const int64_t n = outer * idx_dim * inner;
  GANFW_CU_LAUNCH(st, n, gather_k, n, x_dim, idx_dim, inner, x, index, y);
}

extern "C" cudaError_t ganfw_cu_scatter_add(cudaStream_t st, int64_t outer, int64_t out_dim,
                                            int64_t idx_dim, int64_t inner, const int32_t *index,
                                            const float *src, float *out) {
  if (idx_dim <= 0) return cudaSuccess;
  GANFW_CU_LAUNCH(st, outer * inner, scatter_add_k, outer, out_dim, idx_dim, inner, index, src,
                  out);
}
