/* nn.Embedding on the CPU: the lookup y [N,D] = w[ids] and its deterministic scatter-add
 * into dw [num,D]. Threads split samples or weight rows, never the sum behind one value, so
 * the results do not depend on the thread count. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many values the kernels stay on one thread. */
#define GATHER_PARALLEL_MIN 32768

static void embedding_forward(ganfw_backend *be, int64_t N, int64_t D, const int32_t *ids,
                              const float *w, float *y) {
  (void)be;
#pragma omp parallel for schedule(static) if (N * D >= GATHER_PARALLEL_MIN)
  for (int64_t n = 0; n < N; n++) memcpy(y + n * D, w + (int64_t)ids[n] * D, (size_t)D * sizeof *y);
}

/* Rows [j0, j1) of dw: each adds the dy rows whose id is its own, in increasing n. */
static void scatter_rows(int64_t N, int64_t D, int64_t j0, int64_t j1, const int32_t *ids,
                         const float *dy, float *dw, int accumulate) {
  if (!accumulate) memset(dw + j0 * D, 0, (size_t)((j1 - j0) * D) * sizeof *dw);
  for (int64_t n = 0; n < N; n++) {
    const int64_t j = ids[n];
    if (j < j0 || j >= j1) continue;
    float *row = dw + j * D;
    const float *g = dy + n * D;
    for (int64_t d = 0; d < D; d++) row[d] += g[d];
  }
}

static void embedding_backward(ganfw_backend *be, int64_t N, int64_t num, int64_t D,
                               const int32_t *ids, const float *dy, float *dw, int accumulate) {
  (void)be;
  if ((N + num) * D < GATHER_PARALLEL_MIN) {
    scatter_rows(N, D, 0, num, ids, dy, dw, accumulate);
    return;
  }
  /* 16 blocks of weight rows: each thread scans the ids once per block it owns. */
  const int64_t blocks = num < 16 ? num : 16;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; b++)
    scatter_rows(N, D, num * b / blocks, num * (b + 1) / blocks, ids, dy, dw, accumulate);
}

ganfw_status ganfw_cpu_op_embedding_forward(ganfw_backend *be, ganfw_op *op) {
  embedding_forward(be, op->shape.d[0], op->shape.d[1], op->in[0], op->in[1], op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_embedding_backward(ganfw_backend *be, ganfw_op *op) {
  embedding_backward(be, op->shape.d[0], op->shape.d[1], op->shape.d[2], op->in[0], op->in[1],
                     op->grad[0], ganfw_cpu_accumulate(op));
  return GANFW_OK;
}
