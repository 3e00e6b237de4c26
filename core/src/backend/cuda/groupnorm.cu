/* Group normalisation on the GPU with the CPU backend's rules (core/src/backend/cpu/
 * groupnorm.c): x [N,C,HW], each sample's channels in G groups of C/G contiguous channels.
 * Forward and the input gradient: one block per group (statistics in double, two passes,
 * then the elementwise map). Parameter gradients: one block per channel over its N rows.
 * A fixed grid and order, so results repeat exactly. */
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

#define GN_THREADS 256

/* The sum over the block of v, returned to every thread (the pattern of reduce.cu's
 * block_sum, plus the broadcast). */
static __device__ double gn_block_sum(double v) {
  __shared__ double warp_part[GN_THREADS / 32];
  __shared__ double total;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? warp_part[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) total = v;
  }
  __syncthreads();
  v = total;
  __syncthreads(); /* total and warp_part may be reused by the next call */
  return v;
}

static __global__ void gn_forward_k(int64_t C, int64_t HW, int64_t G, const float *x,
                                    const float *gamma, const float *beta, float eps, float *y,
                                    double *save_mean, double *save_invstd) {
  const int64_t ng = blockIdx.x, Cg = C / G, M = Cg * HW, c0 = ng % G * Cg;
  const float *xg = x + ng * M;
  float *yg = y + ng * M;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) s += xg[i];
  const double mean = gn_block_sum(s) / (double)M;
  double q = 0.0;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const double d = (double)xg[i] - mean;
    q += d * d;
  }
  const double invstd = 1.0 / sqrt(gn_block_sum(q) / (double)M + (double)eps);
  if (threadIdx.x == 0) save_mean[ng] = mean, save_invstd[ng] = invstd;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const int64_t c = c0 + i / HW;
    const double a = (gamma ? gamma[c] : 1.0) * invstd, b = beta ? beta[c] : 0.0;
    yg[i] = (float)(((double)xg[i] - mean) * a + b);
  }
}

static __global__ void gn_backward_dx_k(int64_t C, int64_t HW, int64_t G, const float *x,
                                        const float *dy, const float *gamma,
                                        const double *save_mean, const double *save_invstd,
                                        float *dx) {
  const int64_t ng = blockIdx.x, Cg = C / G, M = Cg * HW, c0 = ng % G * Cg;
  const float *xg = x + ng * M, *dyg = dy + ng * M;
  float *dxg = dx + ng * M;
  const double mean = save_mean[ng], invstd = save_invstd[ng];
  double sg = 0.0, sgx = 0.0; /* sum(dy * gamma), sum(dy * gamma * (x - mean)) */
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const double g = (double)dyg[i] * (gamma ? gamma[c0 + i / HW] : 1.0);
    sg += g;
    sgx += g * ((double)xg[i] - mean);
  }
  sg = gn_block_sum(sg);
  sgx = gn_block_sum(sgx);
  const double b = -invstd * invstd * invstd * sgx / (double)M, c = -invstd * sg / (double)M;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const double a = (gamma ? gamma[c0 + i / HW] : 1.0) * invstd;
    dxg[i] = (float)(dyg[i] * a + ((double)xg[i] - mean) * b + c);
  }
}

static __global__ void gn_param_grads_k(int64_t N, int64_t C, int64_t HW, int64_t G, const float *x,
                                        const float *dy, const double *save_mean,
                                        const double *save_invstd, float *dgamma, float *dbeta,
                                        int accumulate) {
  const int64_t c = blockIdx.x, g = c / (C / G);
  double s = 0.0, sx = 0.0;
  for (int64_t i = threadIdx.x; i < N * HW; i += blockDim.x) {
    const int64_t n = i / HW, at = (n * C + c) * HW + i % HW;
    const double d = dy[at];
    s += d;
    sx += d * ((double)x[at] - save_mean[n * G + g]) * save_invstd[n * G + g];
  }
  s = gn_block_sum(s);
  sx = gn_block_sum(sx);
  if (threadIdx.x == 0) {
    if (dbeta) dbeta[c] = accumulate ? (float)(dbeta[c] + s) : (float)s;
    if (dgamma) dgamma[c] = accumulate ? (float)(dgamma[c] + sx) : (float)sx;
  }
}

extern "C" cudaError_t ganfw_cu_groupnorm_forward(cudaStream_t st, int64_t N, int64_t C, int64_t HW,
                                                  int64_t G, const float *x, const float *gamma,
                                                  const float *beta, float eps, float *y,
                                                  double *save_mean, double *save_invstd) {
  if (N * G <= 0) return cudaSuccess;
  gn_forward_k<<<(unsigned)(N * G), GN_THREADS, 0, st>>>(C, HW, G, x, gamma, beta, eps, y,
                                                         save_mean, save_invstd);
  return cudaGetLastError();
}

extern "C" cudaError_t ganfw_cu_groupnorm_backward(cudaStream_t st, int64_t N, int64_t C,
                                                   int64_t HW, int64_t G, const float *x,
                                                   const float *dy, const float *gamma,
                                                   const double *save_mean,
                                                   const double *save_invstd, float *dx,
                                                   float *dgamma, float *dbeta, int accumulate) {
  if (N * G <= 0) return cudaSuccess;
  if (dx)
    gn_backward_dx_k<<<(unsigned)(N * G), GN_THREADS, 0, st>>>(C, HW, G, x, dy, gamma, save_mean,
                                                               save_invstd, dx);
  if (dgamma || dbeta)
    gn_param_grads_k<<<(unsigned)C, GN_THREADS, 0, st>>>(N, C, HW, G, x, dy, save_mean, save_invstd,
                                                         dgamma, dbeta, accumulate);
  return cudaGetLastError();
}
