/* The CUDA backend's attention, layout and indexing ops (op.h): the batched matrix product
 * through cuBLAS (one strided-batched SGEMM, FP32 math as gemm.c), softmax and log_softmax
 * forward and backward, permute, gather and scatter_add through the kernels of
 * attention_ops.cu. Each unpacks its descriptor, runs on the compute stream and returns the
 * status of what it ran. */
#include <limits.h>

#include "backend/cuda/attention_ops.h"
#include "backend/cuda/cuda_internal.h"

/* mode: bit 0 transposes a, bit 1 b; d: B, M, N, K; in: a, b; out: c; sc: alpha, beta.
 * Row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T: cuBLAS gets b before a,
 * N before M (as gemm.c). */
ganfw_status ganfw_cuda_op_bmm(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t B = op->shape.d[0], M = op->shape.d[1], N = op->shape.d[2], K = op->shape.d[3];
  const int trans_a = (op->mode & 1) != 0, trans_b = (op->mode & 2) != 0;
  const float alpha = (float)op->sc[0], beta = (float)op->sc[1];
  float *c = op->out[0];
  if (B <= 0 || M <= 0 || N <= 0) return GANFW_OK;
  if (K <= 0) { /* no products: c = beta * c */
    const int64_t n = B * M * N;
    if (beta == 1.0f) return GANFW_OK;
    if (beta == 0.0f)
      return CUDA_CHECK(cs, cudaMemsetAsync(c, 0, (size_t)n * sizeof(float), cs->stream));
    if (n > INT_MAX)
      return ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, "cublasSscal",
                             "more than 2^31-1 values to scale", __FILE__, __LINE__);
    return CUBLAS_CHECK(cs, cublasSscal(cs->cublas, (int)n, &beta, c, 1));
  }
  if (B > INT_MAX || M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, "cublasSgemmStridedBatched",
                           "a matrix dimension or the batch exceeds 2^31-1", __FILE__, __LINE__);
  const int lda = (int)(trans_a ? M : K), ldb = (int)(trans_b ? K : N);
  return CUBLAS_CHECK(cs,
                      cublasSgemmStridedBatched(cs->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M,
                                                (int)K, &alpha, op->in[1], ldb, K * N, op->in[0],
                                                lda, M * K, &beta, c, (int)N, M * N, (int)B));
}

/* mode 1: log_softmax; d: outer, dim, inner; in: x; out: y */
ganfw_status ganfw_cuda_op_softmax_forward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t *d = op->shape.d;
  return LAUNCH_CHECK(cs, ganfw_cu_softmax_forward(cs->stream, op->mode == 1, d[0], d[1], d[2],
                                                   op->in[0], op->out[0]));
}

/* mode 1: log_softmax; d: outer, dim, inner; in: y, dy; out: dx */
ganfw_status ganfw_cuda_op_softmax_backward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t *d = op->shape.d;
  return LAUNCH_CHECK(cs, ganfw_cu_softmax_backward(cs->stream, op->mode == 1, d[0], d[1], d[2],
                                                    op->in[0], op->in[1], op->out[0]));
}

/* mode: the permutation, 2 bits a dim; d: x's 4 dims; in: x; out: y */
ganfw_status ganfw_cuda_op_permute(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  return LAUNCH_CHECK(cs,
                      ganfw_cu_permute(cs->stream, op->shape.d, op->mode, op->in[0], op->out[0]));
}

/* d: outer, x_dim, idx_dim, inner; in: x, index; out: y */
ganfw_status ganfw_cuda_op_gather(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t *d = op->shape.d;
  return LAUNCH_CHECK(
      cs, ganfw_cu_gather(cs->stream, d[0], d[1], d[2], d[3], op->in[0], op->in[1], op->out[0]));
}

/* d: outer, out_dim, idx_dim, inner; in: index, src; out: out */
ganfw_status ganfw_cuda_op_scatter_add(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t *d = op->shape.d;
  return LAUNCH_CHECK(cs, ganfw_cu_scatter_add(cs->stream, d[0], d[1], d[2], d[3], op->in[0],
                                               op->in[1], op->out[0]));
}
