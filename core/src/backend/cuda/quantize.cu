/* 8-bit blockwise quantisation on the GPU with the CPU backend's rules
 * (core/src/backend/cpu/quantize.c, op.h QUANTIZE_BLOCKWISE and DEQUANTIZE_BLOCKWISE). Quantise:
 * one CUDA block of GANFW_CU_THREADS threads per quantisation block (grid-stride over blocks),
 * the code in shared memory; the block's absolute maximum by a shared-memory tree (a max is
 * exact in any order), then each thread maps its values with ganfw_quantize_search, the same
 * function the CPU runs: bit for bit the CPU's indices and scales. Dequantise: one thread per
 * value. The ops of op.h are at the end of this file. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <math.h>

#include "backend/cuda/launch.cuh"
#include "backend/quantize_search.h"

extern "C" {
#include "backend/cuda/cuda_internal.h"
}

#define CODE_SIZE 256

static __global__ void quantize_k(int64_t n, int64_t block, int64_t blocks, const float *x,
                                  const float *code, uint8_t *q, float *absmax) {
  __shared__ float s_code[CODE_SIZE];
  __shared__ float s_max[GANFW_CU_THREADS];
  for (int i = threadIdx.x; i < CODE_SIZE; i += blockDim.x) s_code[i] = code[i];
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
    float m = 0.0f;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) m = fmaxf(m, fabsf(x[i]));
    s_max[threadIdx.x] = m;
    __syncthreads(); /* also covers s_code on the first pass */
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
      if ((int)threadIdx.x < k)
        s_max[threadIdx.x] = fmaxf(s_max[threadIdx.x], s_max[threadIdx.x + k]);
      __syncthreads();
    }
    m = s_max[0];
    if (threadIdx.x == 0) absmax[b] = m;
    const float inv = m > 0.0f ? 1.0f / m : 0.0f;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x)
      q[i] = ganfw_quantize_search(s_code, x[i] * inv);
    __syncthreads(); /* s_max is reused by the next block */
  }
}

static __global__ void dequantize_k(int64_t n, int64_t block, const uint8_t *q, const float *absmax,
                                    const float *code, float *x) {
  GANFW_CU_FOR(i, n) x[i] = code[q[i]] * absmax[i / block];
}

/* d: n, block; in: x, code; out: q, absmax */
extern "C" ganfw_status ganfw_cuda_op_quantize_blockwise(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t n = op->shape.d[0], block = op->shape.d[1];
  if (n <= 0) return GANFW_OK;
  const int64_t blocks = (n + block - 1) / block;
  const unsigned grid = (unsigned)(blocks < GANFW_CU_MAX_BLOCKS ? blocks : GANFW_CU_MAX_BLOCKS);
  quantize_k<<<grid, GANFW_CU_THREADS, 0, cs->stream>>>(n, block, blocks, (const float *)op->in[0],
                                                        (const float *)op->in[1],
                                                        (uint8_t *)op->out[0], (float *)op->out[1]);
  return LAUNCH_CHECK(cs, cudaGetLastError());
}

static cudaError_t dequantize_launch(cudaStream_t st, int64_t n, int64_t block, const uint8_t *q,
                                     const float *absmax, const float *code, float *x) {
  GANFW_CU_LAUNCH(st, n, dequantize_k, n, block, q, absmax, code, x);
}

/* d: n, block; in: q, absmax, code; out: x */
extern "C" ganfw_status ganfw_cuda_op_dequantize_blockwise(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  return LAUNCH_CHECK(cs, dequantize_launch(cs->stream, op->shape.d[0], op->shape.d[1],
                                            (const uint8_t *)op->in[0], (const float *)op->in[1],
                                            (const float *)op->in[2], (float *)op->out[0]));
}
