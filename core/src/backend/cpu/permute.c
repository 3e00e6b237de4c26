/* x.permute(perm) copied contiguous on the CPU, over four dims: x [d0,d1,d2,d3] -> y whose dim
 * k is x's dim perm[k] (fewer dims are padded with leading 1s by the caller). y is written in
 * order, a row of its last dim at a time, each value read from x at its own offset. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many values the copy stays on one thread. */
#define PERMUTE_PARALLEL_MIN 32768

ganfw_status ganfw_cpu_op_permute(ganfw_backend *be, ganfw_op *op) {
  (void)be;
  const int64_t *d = op->shape.d;
  const float *x = op->in[0];
  float *y = op->out[0];
  /* x's strides, then y's dims and the x stride each of them steps */
  const int64_t xs[4] = {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  int64_t yd[4], ys[4];
  for (int k = 0; k < 4; k++) {
    const int p = (op->mode >> (2 * k)) & 3;
    yd[k] = d[p], ys[k] = xs[p];
  }
  const int64_t rows = yd[0] * yd[1] * yd[2], n = rows * yd[3];
  if (n <= 0) return GANFW_OK;
#pragma omp parallel for schedule(static) if (n >= PERMUTE_PARALLEL_MIN)
  for (int64_t r = 0; r < rows; r++) {
    const int64_t i2 = r % yd[2], i1 = r / yd[2] % yd[1], i0 = r / (yd[2] * yd[1]);
    const float *src = x + i0 * ys[0] + i1 * ys[1] + i2 * ys[2];
    float *dst = y + r * yd[3];
    if (ys[3] == 1) {
      memcpy(dst, src, (size_t)yd[3] * sizeof *dst);
    } else {
      for (int64_t i3 = 0; i3 < yd[3]; i3++) dst[i3] = src[i3 * ys[3]];
    }
  }
  return GANFW_OK;
}
