/* Row-major GEMM and the linear layer on the GPU through cuBLAS. A row-major C[M,N] is the
 * column-major C^T[N,M], so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: cuBLAS
 * gets B before A, N before M, and the same leading dimensions. FP32 math throughout
 * (CUBLAS_DEFAULT_MATH: no TF32), as the CPU backend, so that results agree to ~1e-6. */
#include <limits.h>

#include "cuda_internal.h"

/* All dimensions fit cuBLAS's int; else records GANFW_ERR_UNSUPPORTED and returns 0. */
static int dims_fit(ganfw_cuda_state *cs, const int64_t *d, int n, int line) {
  for (int i = 0; i < n; i++)
    if (d[i] < 0 || d[i] > INT_MAX) {
      ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, "cublasSgemm",
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
