/* Row-major GEMM and the linear layer on the GPU through cuBLAS. A row-major C[M,N] is the
 * column-major C^T[N,M], so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: cuBLAS
 * gets B before A, N before M, and the same leading dimensions. The f32 entries use FP32
 * math throughout (CUBLAS_DEFAULT_MATH: no TF32), as the CPU backend, so that results agree
 * to ~1e-6. The 16-bit linear entries (_lp: x, w, y, dy, dx in f16 or bf16) run
 * cublasGemmEx with CUBLAS_COMPUTE_32F (products summed in f32, tensor cores allowed): y and
 * dx are written in the 16-bit type, dw lands in f32 directly (Ctype CUDA_R_32F); the bias
 * is added to y by an own kernel after the GEMM and db is an own column sum of dy. */
#include <limits.h>

#include "backend/cuda/cuda_internal.h"

/* All dimensions fit cuBLAS's int; else records GANFW_ERR_UNSUPPORTED and returns 0. */
static int dims_fit(ganfw_cuda_state *cs, const int64_t *d, int n, int line) {
  for (int i = 0; i < n; i++)
    if (d[i] < 0 || d[i] > INT_MAX) {
      ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, cs->op ? "cublasGemmEx" : "cublasSgemm",
                      "a matrix dimension or leading dimension exceeds 2^31-1", __FILE__, line);
      return 0;
    }
  return 1;
}

void ganfw_cuda_gemm(ganfw_backend *be, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                     float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                     float beta, float *C, int64_t ldc) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (M <= 0 || N <= 0) return;
  const int64_t d[] = {M, N, K, lda, ldb, ldc};
  if (!dims_fit(cs, d, 6, __LINE__)) return;
  if (K <= 0) {
    /* No products: C = beta * C (cublasSgeam in place: C = beta C + 0 C). */
    const float zero = 0.0f;
    (void)CUBLAS_CHECK(cs, cublasSgeam(cs->cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, &beta,
                                       C, (int)ldc, &zero, C, (int)ldc, C, (int)ldc));
    return;
  }
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  (void)CUBLAS_CHECK(cs, cublasSgemm(cs->cublas, tb, ta, (int)N, (int)M, (int)K, &alpha, B,
                                     (int)ldb, A, (int)lda, &beta, C, (int)ldc));
}

/* y [N,OUT] = x [N,IN] w[OUT,IN]^T (+ b): y starts as the bias rows, then the GEMM adds. */
void ganfw_cuda_linear_forward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT,
                               const float *x, const float *w, const float *b, float *y) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (b && LAUNCH_CHECK(cs, ganfw_cu_bias_rows(cs->stream, N, OUT, b, y))) return;
  ganfw_cuda_gemm(be, 0, 1, N, OUT, IN, 1.0f, x, IN, w, IN, b ? 1.0f : 0.0f, y, OUT);
}

/* dx = dy w; dw (+)= dy^T x; db (+)= column sums of dy. */
void ganfw_cuda_linear_backward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT,
                                const float *x, const float *w, const float *dy, float *dx,
                                float *dw, float *db, int accumulate) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (db && LAUNCH_CHECK(cs, ganfw_cu_column_sums(cs->stream, N, OUT, dy, db, accumulate))) return;
  if (dw)
    ganfw_cuda_gemm(be, 1, 0, OUT, IN, N, 1.0f, dy, OUT, x, IN, accumulate ? 1.0f : 0.0f, dw, IN);
  if (dx) ganfw_cuda_gemm(be, 0, 0, N, IN, OUT, 1.0f, dy, OUT, w, IN, 0.0f, dx, IN);
}

/* --- 16-bit linear ------------------------------------------------------------------------ */

static cudaDataType blas_type(int32_t dtype) {
  return dtype == GANFW_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* Row-major C[M,N] (type ct) = op(A) op(B) + beta C with A, B of the 16-bit type `at`, mapped
 * as in ganfw_cuda_gemm; M, N, K > 0 and every size fits an int. */
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
static void linear_forward_lp(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t IN,
                              int64_t OUT, const void *x, const void *w, const float *b, void *y) {
  const int64_t d[] = {N, IN, OUT};
  if (N <= 0 || OUT <= 0 || !dims_fit(cs, d, 3, __LINE__)) return;
  const cudaDataType t = blas_type(dtype);
  ganfw_status st = IN > 0
                        ? gemm_ex(cs, 0, 1, N, OUT, IN, x, IN, w, IN, 0.0f, y, OUT, t, t)
                        : CUDA_CHECK(cs, cudaMemsetAsync(y, 0, (size_t)(N * OUT) * 2, cs->stream));
  if (st == GANFW_OK && b)
    (void)LAUNCH_CHECK(cs, ganfw_cu_bias_add_lp(cs->stream, dtype, N, OUT, 1, b, y));
}

/* db (+)= column sums of dy; dw [OUT,IN] (+)= dy^T x, summed into f32; dx = round(dy w). */
static void linear_backward_lp(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t IN,
                               int64_t OUT, const void *x, const void *w, const void *dy, void *dx,
                               float *dw, float *db, int accumulate) {
  const int64_t d[] = {N, IN, OUT};
  if (!dims_fit(cs, d, 3, __LINE__)) return;
  const cudaDataType t = blas_type(dtype);
  if (db && OUT > 0 &&
      LAUNCH_CHECK(cs, ganfw_cu_column_sums_lp(cs->stream, dtype, N, OUT, dy, db, accumulate)))
    return;
  if (dw && OUT > 0 && IN > 0) {
    ganfw_status st = GANFW_OK;
    if (N > 0)
      st = gemm_ex(cs, 1, 0, OUT, IN, N, dy, OUT, x, IN, accumulate ? 1.0f : 0.0f, dw, IN, t,
                   CUDA_R_32F);
    else if (!accumulate) /* no rows: a zero gradient */
      st = CUDA_CHECK(cs, cudaMemsetAsync(dw, 0, (size_t)(OUT * IN) * sizeof(float), cs->stream));
    if (st != GANFW_OK) return;
  }
  if (dx && N > 0 && IN > 0) {
    if (OUT > 0)
      (void)gemm_ex(cs, 0, 0, N, IN, OUT, dy, OUT, w, IN, 0.0f, dx, IN, t, t);
    else
      (void)CUDA_CHECK(cs, cudaMemsetAsync(dx, 0, (size_t)(N * IN) * 2, cs->stream));
  }
}

void ganfw_cuda_linear_forward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t IN,
                                  int64_t OUT, const void *x, const void *w, const float *b,
                                  void *y) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (!ganfw_cuda_lp_begin(cs, "linear_forward_lp", dtype)) return;
  linear_forward_lp(cs, dtype, N, IN, OUT, x, w, b, y);
  ganfw_cuda_lp_end(cs);
}

void ganfw_cuda_linear_backward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t IN,
                                   int64_t OUT, const void *x, const void *w, const void *dy,
                                   void *dx, float *dw, float *db, int accumulate) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (!ganfw_cuda_lp_begin(cs, "linear_backward_lp", dtype)) return;
  linear_backward_lp(cs, dtype, N, IN, OUT, x, w, dy, dx, dw, db, accumulate);
  ganfw_cuda_lp_end(cs);
}
