/* The swap of a tensor's first two dimensions on the CPU, x [A,B,C] -> y [B,A,C]: spectral
 * norm's matrix view of a conv_transpose2d weight. One row copy of C values per (a, b). */
#include <string.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many values the copy stays on one thread. */
#define TRANSPOSE_PARALLEL_MIN 32768

static void transpose01(ganfw_backend *be, int64_t A, int64_t B, int64_t C, const float *x,
                        float *y) {
  (void)be;
#pragma omp parallel for schedule(static) if (A * B * C >= TRANSPOSE_PARALLEL_MIN)
  for (int64_t b = 0; b < B; b++)
    for (int64_t a = 0; a < A; a++)
      memcpy(y + (b * A + a) * C, x + (a * B + b) * C, (size_t)C * sizeof *y);
}

ganfw_status ganfw_cpu_op_transpose01(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  transpose01(be, d[0], d[1], d[2], op->in[0], op->out[0]);
  return GANFW_OK;
}
