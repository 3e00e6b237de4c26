/* nn.Embedding on the GPU with the CPU backend's rules (core/src/backend/cpu/embedding.c):
 * the lookup y [N,D] = w[ids], one thread per output value, and its weight gradient as a
 * gather, one thread per value of dw [num,D] that adds the dy rows of its id in increasing n
 * (no atomics: the same bits as the CPU, run after run). And the swap of a tensor's first
 * two dimensions, [A,B,C] -> [B,A,C], one thread per output value (core/src/backend/cpu/
 * transpose.c). */
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

static __global__ void embedding_forward_k(int64_t total, int64_t D, const int32_t *ids,
                                           const float *w, float *y) {
  GANFW_CU_FOR(idx, total) {
    const int64_t n = idx / D, d = idx % D;
    y[idx] = w[(int64_t)ids[n] * D + d];
  }
}

static __global__ void embedding_backward_k(int64_t total, int64_t N, int64_t D, const int32_t *ids,
                                            const float *dy, float *dw, int accumulate) {
  GANFW_CU_FOR(idx, total) {
    const int64_t j = idx / D, d = idx % D;
    float acc = accumulate ? dw[idx] : 0.0f;
    for (int64_t n = 0; n < N; n++)
      if (ids[n] == j) acc = __fadd_rn(acc, dy[n * D + d]);
    dw[idx] = acc;
  }
}

static __global__ void transpose01_k(int64_t total, int64_t A, int64_t B, int64_t C, const float *x,
                                     float *y) {
  GANFW_CU_FOR(idx, total) {
    const int64_t c = idx % C, a = idx / C % A, b = idx / (C * A);
    y[idx] = x[(a * B + b) * C + c];
  }
}

extern "C" cudaError_t ganfw_cu_embedding_forward(cudaStream_t st, int64_t N, int64_t D,
                                                  const int32_t *ids, const float *w, float *y) {
  const int64_t total = N * D;
  GANFW_CU_LAUNCH(st, total, embedding_forward_k, total, D, ids, w, y);
}

extern "C" cudaError_t ganfw_cu_embedding_backward(cudaStream_t st, int64_t N, int64_t num,
                                                   int64_t D, const int32_t *ids, const float *dy,
                                                   float *dw, int accumulate) {
  const int64_t total = num * D;
  GANFW_CU_LAUNCH(st, total, embedding_backward_k, total, N, D, ids, dy, dw, accumulate);
}

extern "C" cudaError_t ganfw_cu_transpose01(cudaStream_t st, int64_t A, int64_t B, int64_t C,
                                            const float *x, float *y) {
  const int64_t total = A * B * C;
  GANFW_CU_LAUNCH(st, total, transpose01_k, total, A, B, C, x, y);
}
