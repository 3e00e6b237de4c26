/* Losses of the CUDA backend, mean reduction, in double as on the CPU: BCE-with-logits over
 * n logits with float targets, and softmax cross-entropy over logits [N, classes] with
 * int32 labels. Forward sums in one block (losses see a batch of values, not millions) so
 * that the loss is deterministic; backward is element-wise (softmax: one warp per row). */
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

#define LOSS_THREADS 1024

static __device__ double block_sum_1024(double v) {
  __shared__ double part[LOSS_THREADS / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = 0.0;
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

static __device__ __forceinline__ double sigmoid_d(double x) {
  const double e = exp(-fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

/* max(x,0) - x t + log1p(exp(-|x|)) */
static __global__ void bce_forward_k(int64_t n, const float *logits, const float *targets,
                                     float *loss) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double x = logits[i], t = targets[i];
    acc += (x > 0.0 ? x : 0.0) - x * t + log1p(exp(-fabs(x)));
  }
  acc = block_sum_1024(acc);
  if (threadIdx.x == 0) *loss = n > 0 ? (float)(acc / (double)n) : 0.0f;
}

static __global__ void bce_backward_k(int64_t n, const float *logits, const float *targets,
                                      double g, float *dx) {
  GANFW_CU_FOR(i, n) dx[i] = (float)(g * (sigmoid_d(logits[i]) - targets[i]));
}

extern "C" cudaError_t ganfw_cu_bce_logits_forward(cudaStream_t st, int64_t n, const float *logits,
                                                   const float *targets, float *loss) {
  bce_forward_k<<<1, LOSS_THREADS, 0, st>>>(n, logits, targets, loss);
  return cudaGetLastError();
}

extern "C" cudaError_t ganfw_cu_bce_logits_backward(cudaStream_t st, int64_t n, const float *logits,
                                                    const float *targets, float dloss, float *dx) {
  const double g = n > 0 ? (double)dloss / (double)n : 0.0;
  GANFW_CU_LAUNCH(st, n, bce_backward_k, n, logits, targets, g, dx);
}

/* log(sum_j exp(x_j)) of one row, the row's maximum subtracted first (one thread). */
static __device__ double row_logsumexp(const float *x, int64_t classes) {
  double m = -INFINITY;
  for (int64_t j = 0; j < classes; j++) m = x[j] > m ? x[j] : m;
  double s = 0.0;
  for (int64_t j = 0; j < classes; j++) s += exp((double)x[j] - m);
  return m + log(s);
}

static __global__ void xent_forward_k(int64_t N, int64_t classes, const float *logits,
                                      const int32_t *labels, double eps, float *loss) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const float *x = logits + i * classes;
    const int32_t y = labels[i];
    /* a label outside [0, classes) adds nothing (the CPU's rule) */
    if (y < 0 || y >= classes) continue;
    const double lse = row_logsumexp(x, classes);
    if (eps == 0.0) {
      acc += lse - (double)x[y];
      continue;
    }
    double mean = 0.0; /* label smoothing: (1 - eps) * -log p_y + eps * mean_j(-log p_j) */
    for (int64_t j = 0; j < classes; j++) mean += x[j];
    mean /= (double)classes;
    acc += (1.0 - eps) * (lse - (double)x[y]) + eps * (lse - mean);
  }
  acc = block_sum_1024(acc);
  if (threadIdx.x == 0) *loss = N > 0 ? (float)(acc / (double)N) : 0.0f;
}

/* One warp per row: the row's max and sum of exponentials by shuffles, then the row. */
static __global__ void xent_backward_k(int64_t N, int64_t classes, const float *logits,
                                       const int32_t *labels, double eps, double g, float *dx) {
  const int lane = threadIdx.x & 31;
  const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (row >= N) return; /* whole warps leave together */
  const float *x = logits + row * classes;
  float *d = dx + row * classes;
  double m = -INFINITY;
  for (int64_t j = lane; j < classes; j += 32) m = x[j] > m ? x[j] : m;
  for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
  double s = 0.0;
  for (int64_t j = lane; j < classes; j += 32) s += exp((double)x[j] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  const double lse = m + log(s);
  const int32_t y = labels[row];
  if (eps == 0.0) {
    for (int64_t j = lane; j < classes; j += 32) {
      const double p = exp((double)x[j] - lse);
      d[j] = (float)(g * (j == y ? p - 1.0 : p));
    }
    return;
  }
  const double off = eps / (double)classes; /* the target: (1 - eps) * onehot + eps / classes */
  for (int64_t j = lane; j < classes; j += 32) {
    const double p = exp((double)x[j] - lse);
    d[j] = (float)(g * (j == y ? p - (1.0 - eps) - off : p - off));
  }
}

extern "C" cudaError_t ganfw_cu_softmax_xent_forward(cudaStream_t st, int64_t N, int64_t classes,
                                                     const float *logits, const int32_t *labels,
                                                     double smoothing, float *loss) {
  xent_forward_k<<<1, LOSS_THREADS, 0, st>>>(N, classes, logits, labels, smoothing, loss);
  return cudaGetLastError();
}

extern "C" cudaError_t ganfw_cu_softmax_xent_backward(cudaStream_t st, int64_t N, int64_t classes,
                                                      const float *logits, const int32_t *labels,
                                                      double smoothing, float dloss, float *dx) {
  if (N <= 0 || classes <= 0) return cudaSuccess;
  const double g = (double)dloss / (double)N;
  const int threads = 256, rows_per_block = threads / 32;
  const int64_t blocks = (N + rows_per_block - 1) / rows_per_block;
  xent_backward_k<<<(unsigned)blocks, threads, 0, st>>>(N, classes, logits, labels, smoothing, g,
                                                        dx);
  return cudaGetLastError();
}
