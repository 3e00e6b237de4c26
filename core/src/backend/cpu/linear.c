/* linear (fully connected) on the CPU: y [N,OUT] = x [N,IN] * w [OUT,IN]^T (+ b [OUT]), and
 * its backward dx = dy * w, dw (+)= dy^T * x, db (+)= column sums of dy, all as GEMMs. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"

static void linear_forward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT, const float *x,
                           const float *w, const float *b, float *y) {
  if (b) {
    for (int64_t n = 0; n < N; n++) memcpy(y + n * OUT, b, (size_t)OUT * sizeof *y);
  }
  ganfw_cpu_gemm(be, 0, 1, N, OUT, IN, 1.0f, x, IN, w, IN, b ? 1.0f : 0.0f, y, OUT);
}

static void linear_backward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT, const float *x,
                            const float *w, const float *dy, float *dx, float *dw, float *db,
                            int accumulate) {
  if (db) {
    /* Column sums of dy, in blocks of columns so that each row is read contiguously. */
    enum { BLOCK = 64 };
    const int64_t blocks = (OUT + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (N * OUT >= 65536)
    for (int64_t blk = 0; blk < blocks; blk++) {
      const int64_t o0 = blk * BLOCK, no = OUT - o0 < BLOCK ? OUT - o0 : BLOCK;
      double acc[BLOCK] = {0};
      for (int64_t n = 0; n < N; n++) {
        const float *row = dy + n * OUT + o0;
        for (int64_t j = 0; j < no; j++) acc[j] += row[j];
      }
      for (int64_t j = 0; j < no; j++)
        db[o0 + j] = accumulate ? db[o0 + j] + (float)acc[j] : (float)acc[j];
    }
  }
  if (dw)
    ganfw_cpu_gemm(be, 1, 0, OUT, IN, N, 1.0f, dy, OUT, x, IN, accumulate ? 1.0f : 0.0f, dw, IN);
  if (dx) ganfw_cpu_gemm(be, 0, 0, N, IN, OUT, 1.0f, dy, OUT, w, IN, 0.0f, dx, IN);
}

ganfw_status ganfw_cpu_op_linear_forward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  linear_forward(be, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2], op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_linear_backward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  linear_backward(be, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2], op->out[0], op->grad[0],
                  op->grad[1], ganfw_cpu_accumulate(op));
  return GANFW_OK;
}
