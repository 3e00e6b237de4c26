/* Row-major GEMM and the linear layer on the GPU through cuBLAS. A row-major C[M,N] is the
 * column-major C^T[N,M], so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: cuBLAS
 * gets B before A, N before M, and the same leading dimensions. The f32 ops use FP32
 * math throughout (CUBLAS_DEFAULT_MATH: no TF32), as the CPU backend, so that results agree
 * to ~1e-6. The 16-bit linear (x, w, y, dy, dx in f16 or bf16) runs cublasGemmEx with
 * CUBLAS_COMPUTE_32F (products summed in f32, tensor cores allowed): y and dx are written in
 * the 16-bit type, dw lands in f32 directly (Ctype CUDA_R_32F); the bias is added to y by an
 * own kernel after the GEMM and db is an own column sum of dy. */
#include <limits.h>

#include "backend/cuda/cuda_internal.h"

/* All dimensions fit cuBLAS's int; else GANFW_ERR_UNSUPPORTED, recorded. */
static ganfw_status dims_fit(ganfw_cuda_state *cs, const int64_t *d, int n, int line) {
  for (int i = 0; i < n; i++)
    if (d[i] < 0 || d[i] > INT_MAX)
      return ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, cs->op ? "cublasGemmEx" : "cublasSgemm",
                             "a matrix dimension or leading dimension exceeds 2^31-1", __FILE__,
                             line);
  return GANFW_OK;
}

static ganfw_status gemm(ganfw_cuda_state *cs, int trans_a, int trans_b, int64_t M, int64_t N,
                         int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return GANFW_OK;
  const int64_t d[] = {M, N, K, lda, ldb, ldc};
  ganfw_status st = dims_fit(cs, d, 6, __LINE__);
  if (st) return st;
  if (K <= 0) {
    /* No products: C = beta * C (cublasSgeam in place: C = beta C + 0 C). */
    const float zero = 0.0f;
    return CUBLAS_CHECK(cs, cublasSgeam(cs->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, &beta,
                                        C, (int)ldc, &zero, C, (int)ldc, C, (int)ldc));
  }
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  return CUBLAS_CHECK(cs, cublasSgemm(cs->cublas, tb, ta, (int)N, (int)M, (int)K, &alpha, B,
                                      (int)ldb, A, (int)lda, &beta, C, (int)ldc));
}

/* y [N,OUT] = x [N,IN] w[OUT,IN]^T (+ b): y starts as the bias rows, then the GEMM adds. */
static ganfw_status linear_forward(ganfw_cuda_state *cs, int64_t N, int64_t IN, int64_t OUT,
                                   const float *x, const float *w, const float *b, float *y) {
  ganfw_status st;
  if (b && (st = LAUNCH_CHECK(cs, ganfw_cu_bias_rows(cs->stream, N, OUT, b, y)))) return st;
  return gemm(cs, 0, 1, N, OUT, IN, 1.0f, x, IN, w, IN, b ? 1.0f : 0.0f, y, OUT);
}

/* dx = dy w; dw (+)= dy^T x; db (+)= column sums of dy. */
static ganfw_status linear_backward(ganfw_cuda_state *cs, int64_t N, int64_t IN, int64_t OUT,
                                    const float *x, const float *w, const float *dy, float *dx,
                                    float *dw, float *db, int accumulate) {
  ganfw_status st;
  if (db && (st = LAUNCH_CHECK(cs, ganfw_cu_column_sums(cs->stream, N, OUT, dy, db, accumulate))))
    return st;
  if (dw &&
      (st = gemm(cs, 1, 0, OUT, IN, N, 1.0f, dy, OUT, x, IN, accumulate ? 1.0f : 0.0f, dw, IN)))
    return st;
  return dx ? gemm(cs, 0, 0, N, IN, OUT, 1.0f, dy, OUT, w, IN, 0.0f, dx, IN) : GANFW_OK;
}

/* --- 16-bit linear ------------------------------------------------------------------------ */

static cudaDataType blas_type(int32_t dtype) {
  return dtype == GANFW_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* Row-major C[M,N] (type ct) = op(A) op(B) + beta C with A, B of the 16-bit type `at`, mapped
 * as in gemm; M, N, K > 0 and every size fits an int. */
static ganfw_status gemm_ex(ganfw_cuda_state *cs, int trans_a, int trans_b, int64_t M, int64_t N,
                            int64_t K, const void *A, int64_t lda, const void *B, int64_t ldb,
                            float beta, void *C, int64_t ldc, cudaDataType at, cudaDataType ct) {
  const float alpha = 1.0f;
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  return CUBLAS_CHECK(cs, cublasGemmEx(cs->cublas, tb, ta, (int)N, (int)M, (int)K, &alpha, B, at,
                                       (int)ldb, A, at, (int)lda, &beta, C, ct, (int)ldc,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* y [N,OUT] = round(x [N,IN] w[OUT,IN]^T), then y = round(float(y) + b) per column. */
static ganfw_status linear_forward_lp(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t IN,
                                      int64_t OUT, const void *x, const void *w, const float *b,
                                      void *y) {
  const int64_t d[] = {N, IN, OUT};
  ganfw_status st;
  if (N <= 0 || OUT <= 0) return GANFW_OK;
  if ((st = dims_fit(cs, d, 3, __LINE__))) return st;
  const cudaDataType t = blas_type(dtype);
  st = IN > 0 ? gemm_ex(cs, 0, 1, N, OUT, IN, x, IN, w, IN, 0.0f, y, OUT, t, t)
              : CUDA_CHECK(cs, cudaMemsetAsync(y, 0, (size_t)(N * OUT) * 2, cs->stream));
  if (st == GANFW_OK && b)
    st = LAUNCH_CHECK(cs, ganfw_cu_bias_add_lp(cs->stream, dtype, N, OUT, 1, b, y));
  return st;
}

/* db (+)= column sums of dy; dw [OUT,IN] (+)= dy^T x, summed into f32; dx = round(dy w). */
static ganfw_status linear_backward_lp(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t IN,
                                       int64_t OUT, const void *x, const void *w, const void *dy,
                                       void *dx, float *dw, float *db, int accumulate) {
  const int64_t d[] = {N, IN, OUT};
  ganfw_status st;
  if ((st = dims_fit(cs, d, 3, __LINE__))) return st;
  const cudaDataType t = blas_type(dtype);
  if (db && OUT > 0 &&
      (st = LAUNCH_CHECK(cs,
                         ganfw_cu_column_sums_lp(cs->stream, dtype, N, OUT, dy, db, accumulate))))
    return st;
  if (dw && OUT > 0 && IN > 0) {
    if (N > 0)
      st = gemm_ex(cs, 1, 0, OUT, IN, N, dy, OUT, x, IN, accumulate ? 1.0f : 0.0f, dw, IN, t,
                   CUDA_R_32F);
    else if (!accumulate) /* no rows: a zero gradient */
      st = CUDA_CHECK(cs, cudaMemsetAsync(dw, 0, (size_t)(OUT * IN) * sizeof(float), cs->stream));
    if (st != GANFW_OK) return st;
  }
  if (dx && N > 0 && IN > 0)
    return OUT > 0 ? gemm_ex(cs, 0, 0, N, IN, OUT, dy, OUT, w, IN, 0.0f, dx, IN, t, t)
                   : CUDA_CHECK(cs, cudaMemsetAsync(dx, 0, (size_t)(N * IN) * 2, cs->stream));
  return GANFW_OK;
}

/* --- the ops (op.h) ---------------------------------------------------------------------- */

/* mode: bit 0 transposes A, bit 1 B; d: M, N, K, lda, ldb, ldc; in: A, B; out: C;
 * sc: alpha, beta */
ganfw_status ganfw_cuda_op_gemm(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return gemm(ganfw_cuda_state_of(be), op->mode & 1, (op->mode >> 1) & 1, d[0], d[1], d[2],
              (float)op->sc[0], op->in[0], d[3], op->in[1], d[4], (float)op->sc[1], op->out[0],
              d[5]);
}

/* d: N, IN, OUT; in: x, w, b; out: y */
ganfw_status ganfw_cuda_op_linear_forward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t *d = op->shape.d;
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = op->dtype == GANFW_DTYPE_F32
             ? linear_forward(cs, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2], op->out[0])
             : linear_forward_lp(cs, op->dtype, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2],
                                 op->out[0]);
  return ganfw_cuda_lp_end(cs, st);
}

/* d: N, IN, OUT; in: x, w, dy; out: dx; grad: dw, db */
ganfw_status ganfw_cuda_op_linear_backward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t *d = op->shape.d;
  const int acc = (op->flags & GANFW_OP_ACCUMULATE) != 0;
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = op->dtype == GANFW_DTYPE_F32
             ? linear_backward(cs, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2], op->out[0],
                               op->grad[0], op->grad[1], acc)
             : linear_backward_lp(cs, op->dtype, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2],
                                  op->out[0], op->grad[0], op->grad[1], acc);
  return ganfw_cuda_lp_end(cs, st);
}
