/* Reductions of the CUDA backend, all deterministic (a fixed grid for a given size, a fixed
 * order within it): sum and sum of squares in double (two passes through a partials
 * array), the non-finite flag, column sums (linear's bias gradient), channel sums (a 16-bit
 * convolution's bias gradient) and BatchNorm's parameter gradients when no input gradient
 * is wanted. The last three also read 16-bit inputs (lp.cuh), still summing in double. */
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/lp.cuh"

#define REDUCE_THREADS 256

/* The sum over the block of v (double), valid in thread 0. */
static __device__ double block_sum(double v) {
  __shared__ double warp_part[REDUCE_THREADS / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  v = 0.0;
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? warp_part[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  __syncthreads(); /* warp_part may be reused by the caller's next block_sum */
  return v;
}

static __global__ void sum_partials_k(int64_t n, const float *x, int squares, double *partials) {
  double acc = 0.0;
  GANFW_CU_FOR(i, n) {
    const double v = x[i];
    acc += squares ? v * v : v;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

static __global__ void sum_final_k(int blocks, const double *partials, double *result) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) acc += partials[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *result = acc;
}

extern "C" cudaError_t ganfw_cu_sum(cudaStream_t st, int64_t n, const float *x, int squares,
                                    double *partials, double *result) {
  int64_t b = (n + 4 * REDUCE_THREADS - 1) / (4 * REDUCE_THREADS);
  if (b > GANFW_CUDA_REDUCE_PARTIALS) b = GANFW_CUDA_REDUCE_PARTIALS;
  if (b < 1) b = 1;
  sum_partials_k<<<(unsigned)b, REDUCE_THREADS, 0, st>>>(n, x, squares, partials);
  sum_final_k<<<1, REDUCE_THREADS, 0, st>>>((int)b, partials, result);
  return cudaGetLastError();
}

static __global__ void nonfinite_k(int64_t n, const float *x, int32_t *flag) {
  uint32_t hit = 0;
  GANFW_CU_FOR(i, n) hit |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
  if (__any_sync(0xffffffffu, hit) && (threadIdx.x & 31) == 0) *flag = 1;
}

extern "C" cudaError_t ganfw_cu_nonfinite(cudaStream_t st, int64_t n, const float *x,
                                          int32_t *flag) {
  GANFW_CU_LAUNCH(st, n, nonfinite_k, n, x, flag);
}

/* One thread per column, walking down the rows: adjacent threads read adjacent elements. */
template <typename T>
static __global__ void column_sums_k(int64_t rows, int64_t cols, const T *x, float *out,
                                     int accumulate) {
  GANFW_CU_FOR(c, cols) {
    double acc = 0.0;
    for (int64_t r = 0; r < rows; r++) acc += lp_load(x[r * cols + c]);
    out[c] = accumulate ? (float)(out[c] + acc) : (float)acc;
  }
}

extern "C" cudaError_t ganfw_cu_column_sums(cudaStream_t st, int64_t rows, int64_t cols,
                                            const float *x, float *out, int accumulate) {
  GANFW_CU_LAUNCH(st, cols, column_sums_k<float>, rows, cols, x, out, accumulate);
}

template <typename T>
static cudaError_t column_sums_lp(cudaStream_t st, int64_t rows, int64_t cols, const void *x,
                                  float *out, int accumulate) {
  GANFW_CU_LAUNCH(st, cols, column_sums_k<T>, rows, cols, (const T *)x, out, accumulate);
}

extern "C" cudaError_t ganfw_cu_column_sums_lp(cudaStream_t st, int32_t dtype, int64_t rows,
                                               int64_t cols, const void *x, float *out,
                                               int accumulate) {
  GANFW_LP_DISPATCH(dtype, column_sums_lp, st, rows, cols, x, out, accumulate);
}

/* One block per channel: the sum of its N rows of HW elements. */
template <typename T>
static __global__ void channel_sums_k(int64_t N, int64_t C, int64_t HW, const T *x, float *out,
                                      int accumulate) {
  const int64_t c = blockIdx.x;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < N * HW; i += blockDim.x)
    s += lp_load(x[(i / HW * C + c) * HW + i % HW]);
  s = block_sum(s);
  if (threadIdx.x == 0) out[c] = accumulate ? (float)(out[c] + s) : (float)s;
}

template <typename T>
static cudaError_t channel_sums_lp(cudaStream_t st, int64_t N, int64_t C, int64_t HW, const void *x,
                                   float *out, int accumulate) {
  if (C <= 0) return cudaSuccess;
  channel_sums_k<T>
      <<<(unsigned)C, REDUCE_THREADS, 0, st>>>(N, C, HW, (const T *)x, out, accumulate);
  return cudaGetLastError();
}

extern "C" cudaError_t ganfw_cu_channel_sums_lp(cudaStream_t st, int32_t dtype, int64_t N,
                                                int64_t C, int64_t HW, const void *x, float *out,
                                                int accumulate) {
  GANFW_LP_DISPATCH(dtype, channel_sums_lp, st, N, C, HW, x, out, accumulate);
}

/* One block per channel: sums of dy and dy * (x - mean) over its N rows of HW elements. */
template <typename T>
static __global__ void bn_param_grads_k(int64_t N, int64_t C, int64_t HW, const T *x, const T *dy,
                                        const float *mean, const float *invstd, float *dgamma,
                                        float *dbeta, int accumulate) {
  const int64_t c = blockIdx.x;
  const float m = mean[c];
  double s = 0.0, sx = 0.0;
  for (int64_t i = threadIdx.x; i < N * HW; i += blockDim.x) {
    const int64_t at = (i / HW * C + c) * HW + i % HW;
    const double g = lp_load(dy[at]);
    s += g;
    sx += g * (double)(lp_load(x[at]) - m);
  }
  s = block_sum(s);
  sx = block_sum(sx) * (double)invstd[c];
  if (threadIdx.x == 0) {
    if (dbeta) dbeta[c] = accumulate ? (float)(dbeta[c] + s) : (float)s;
    if (dgamma) dgamma[c] = accumulate ? (float)(dgamma[c] + sx) : (float)sx;
  }
}

template <typename T>
static cudaError_t bn_param_grads(cudaStream_t st, int64_t N, int64_t C, int64_t HW, const void *x,
                                  const void *dy, const float *mean, const float *invstd,
                                  float *dgamma, float *dbeta, int accumulate) {
  if (C <= 0 || (!dgamma && !dbeta)) return cudaSuccess;
  bn_param_grads_k<T><<<(unsigned)C, REDUCE_THREADS, 0, st>>>(
      N, C, HW, (const T *)x, (const T *)dy, mean, invstd, dgamma, dbeta, accumulate);
  return cudaGetLastError();
}

extern "C" cudaError_t ganfw_cu_bn_param_grads(cudaStream_t st, int64_t N, int64_t C, int64_t HW,
                                               const float *x, const float *dy, const float *mean,
                                               const float *invstd, float *dgamma, float *dbeta,
                                               int accumulate) {
  return bn_param_grads<float>(st, N, C, HW, x, dy, mean, invstd, dgamma, dbeta, accumulate);
}

extern "C" cudaError_t ganfw_cu_bn_param_grads_lp(cudaStream_t st, int32_t dtype, int64_t N,
                                                  int64_t C, int64_t HW, const void *x,
                                                  const void *dy, const float *mean,
                                                  const float *invstd, float *dgamma, float *dbeta,
                                                  int accumulate) {
  GANFW_LP_DISPATCH(dtype, bn_param_grads, st, N, C, HW, x, dy, mean, invstd, dgamma, dbeta,
                    accumulate);
}
