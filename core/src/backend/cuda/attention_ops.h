/* Launchers of the kernels behind the attention, layout and indexing ops (attention_ops.cu),
 * callable from C: softmax and log_softmax forward and backward, permute, gather and
 * scatter_add, with the semantics of their entries in core/src/backend/op.h. Each enqueues its
 * kernel on `st` and returns cudaGetLastError() (cudaSuccess for an empty range). All pointers
 * are device pointers; sizes are element counts. */
#ifndef GANFW_CUDA_ATTENTION_OPS_H
#define GANFW_CUDA_ATTENTION_OPS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x, y [outer, dim, inner], the softmax over dim; log_out 1: log_softmax. y may be x. */
cudaError_t ganfw_cu_softmax_forward(cudaStream_t st, int32_t log_out, int64_t outer, int64_t dim,
                                     int64_t inner, const float *x, float *y);
/* From the forward's output y; dx may be dy. */
cudaError_t ganfw_cu_softmax_backward(cudaStream_t st, int32_t log_out, int64_t outer, int64_t dim,
                                      int64_t inner, const float *y, const float *dy, float *dx);
/* x [d[0],d[1],d[2],d[3]] -> y, whose dim k is x's dim (perm >> 2k) & 3. */
cudaError_t ganfw_cu_permute(cudaStream_t st, const int64_t *d, int32_t perm, const float *x,
                             float *y);
/* y[o][i][n] = x[o][index[o][i][n]][n]: x [outer, x_dim, inner], index and y
 * [outer, idx_dim, inner]. */
cudaError_t ganfw_cu_gather(cudaStream_t st, int64_t outer, int64_t x_dim, int64_t idx_dim,
                            int64_t inner, const float *x, const int32_t *index, float *y);
/* out[o][index[o][i][n]][n] += src[o][i][n] in increasing i: out [outer, out_dim, inner], index
 * and src [outer, idx_dim, inner]. */
cudaError_t ganfw_cu_scatter_add(cudaStream_t st, int64_t outer, int64_t out_dim, int64_t idx_dim,
                                 int64_t inner, const int32_t *index, const float *src, float *out);

#ifdef __cplusplus
}
#endif
#endif
