/* Batched matrix products on the CPU, as torch.bmm: c[i] = alpha op(a[i]) op(b[i]) + beta c[i]
 * for the B matrices of a batch, a [B,M,K] ([B,K,M] transposed), b [B,K,N] ([B,N,K]
 * transposed), c [B,M,N], all contiguous. Each matrix is one ganfw_cpu_gemm, whose blocks
 * depend on the shape alone; batches of more than one matrix share out the matrices over the
 * threads (a gemm inside the team runs its blocks on its own thread), so no result depends on
 * the thread count. */
#include <omp.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many multiply-adds in the whole batch the matrices stay on one thread. */
#define BMM_PARALLEL_MIN_MACS (1 << 18)

ganfw_status ganfw_cpu_op_bmm(ganfw_backend *be, ganfw_op *op) {
  const int64_t B = op->shape.d[0], M = op->shape.d[1], N = op->shape.d[2], K = op->shape.d[3];
  const int trans_a = (op->mode & 1) != 0, trans_b = (op->mode & 2) != 0;
  const float alpha = (float)op->sc[0], beta = (float)op->sc[1];
  const float *a = op->in[0], *b = op->in[1];
  float *c = op->out[0];
  if (B <= 0 || M <= 0 || N <= 0) return GANFW_OK;
  const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  const int threads = ganfw_cpu_threads();
#pragma omp parallel for schedule(static)                                                          \
    num_threads(threads) if (B > 1 && threads > 1 && B * M * N * K >= BMM_PARALLEL_MIN_MACS)
  for (int64_t i = 0; i < B; i++)
    ganfw_cpu_gemm(be, trans_a, trans_b, M, N, K, alpha, a + i * M * K, lda, b + i * K * N, ldb,
                   beta, c + i * M * N, N);
  return GANFW_OK;
}
