/* The CPU backend's internals: one ganfw_cpu_op_<name> per op of GANFW_OP_LIST (op.h says
 * what each reads from its descriptor), each at the end of the file under
 * core/src/backend/cpu/ that holds its kernel, and the helpers those files share: raw memory,
 * threads, GEMM and the convolution workspaces. cpu_backend.c puts them in the table. */
#ifndef GANFW_CPU_OPS_H
#define GANFW_CPU_OPS_H

#include "backend/backend.h"

/* The ops, declared from the op list. */
#define GANFW_CPU_OP_DECL_(K, name)                                                                \
  ganfw_status ganfw_cpu_op_##name(ganfw_backend *be, ganfw_op *op);
GANFW_OP_LIST(GANFW_CPU_OP_DECL_)
#undef GANFW_CPU_OP_DECL_

/* 1 when op adds to its parameter gradients (GANFW_OP_ACCUMULATE), 0 when it overwrites them. */
static inline int ganfw_cpu_accumulate(const ganfw_op *op) {
  return (op->flags & GANFW_OP_ACCUMULATE) != 0;
}

/* Raw memory (memory.c): 64-byte aligned host memory, copies as memcpy. */
void *ganfw_cpu_raw_alloc(ganfw_backend *be, size_t bytes);
void ganfw_cpu_raw_free(ganfw_backend *be, void *ptr, size_t bytes);
ganfw_status ganfw_cpu_capacity(ganfw_backend *be, size_t *total, size_t *free_bytes);
ganfw_status ganfw_cpu_copy_h2d(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cpu_copy_d2h(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cpu_copy_d2d(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cpu_synchronize(ganfw_backend *be);

/* The number of threads the CPU kernels use (device.threads), and its setter (gemm.c). */
int ganfw_cpu_threads(void);
void ganfw_cpu_set_threads(ganfw_backend *be, int threads);

/* Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, op = transpose when trans_*, split
 * over the threads in blocks that depend on the shape alone (gemm.c). */
void ganfw_cpu_gemm(ganfw_backend *be, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc);
/* The same as one OpenBLAS call on the calling thread, for callers that split the work
 * themselves in pieces that depend on the shape alone (ganfw_cpu_gemm splits large products
 * in blocks that depend on the shape alone, so that no result depends on the thread count). */
void ganfw_cpu_gemm_single(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                           float *C, int64_t ldc);
/* ganfw_cpu_gemm and ganfw_cpu_gemm_single for a conv whose activations are in dtype dt:
 * with bf16, on bf16 dot products or AMX tiles where ganfw_cpu_have_bf16_dot() (gemm_bf16.h)
 * says so (A and B rounded to bf16, sums in f32; alpha 1), else sgemm as in f32. */
void ganfw_cpu_gemm_dt(ganfw_backend *be, int32_t dt, int trans_a, int trans_b, int64_t M,
                       int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void ganfw_cpu_gemm_single_dt(int32_t dt, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                              float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                              float beta, float *C, int64_t ldc);

/* The workspace bytes of a convolution with activations in dt (f32: the im2col kernels' own;
 * f16 or bf16: that plus the f32 copies the 16-bit kernels convert into), the same for its
 * forward and backward (conv2d.c, conv_transpose2d.c). */
size_t ganfw_cpu_conv2d_workspace(const ganfw_conv2d_shape *s, int32_t dt);
/* The algorithm of pass (GANFW_OP_PASS_*) of a convolution with activations in dt, as
 * backend.h's vt->algorithm answers it. */
const char *ganfw_cpu_conv2d_algorithm(const ganfw_conv2d_shape *s, int32_t dt, int32_t pass);
const char *ganfw_cpu_convt2d_algorithm(const ganfw_convt2d_shape *s, int32_t dt, int32_t pass);
size_t ganfw_cpu_convt2d_workspace(const ganfw_convt2d_shape *s, int32_t dt);

#endif
