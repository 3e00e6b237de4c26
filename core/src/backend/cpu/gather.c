/* torch.gather and Tensor.scatter_add_ along one dim on the CPU, the tensors viewed as
 * [outer, dim, inner]: gather y[o][i][n] = x[o][index[o][i][n]][n] with index and y
 * [outer, idx_dim, inner] and x [outer, x_dim, inner]; scatter_add (its backward)
 * out[o][index[o][i][n]][n] += src[o][i][n] with index and src [outer, idx_dim, inner] and out
 * [outer, out_dim, inner]. Indices are int32 in [0, x_dim) / [0, out_dim), checked by the
 * caller. A thread owns whole columns (o, n) of scatter_add's out, in blocks that depend on
 * the shape alone, and adds into each in increasing i, so repeated indices sum in one fixed
 * order whatever the thread count. */
#include "backend/cpu/cpu_ops.h"

/* Below this many values the loop stays on one thread. */
#define GATHER_PARALLEL_MIN 32768
/* scatter_add shares out blocks of this many columns of a slab. */
#define SCATTER_COLUMNS 64

ganfw_status ganfw_cpu_op_gather(ganfw_backend *be, ganfw_op *op) {
  (void)be;
  const int64_t outer = op->shape.d[0], x_dim = op->shape.d[1], idx_dim = op->shape.d[2],
                inner = op->shape.d[3];
  const float *x = op->in[0];
  const int32_t *index = op->in[1];
  float *y = op->out[0];
  const int64_t n = outer * idx_dim * inner;
#pragma omp parallel for schedule(static) if (n >= GATHER_PARALLEL_MIN)
  for (int64_t r = 0; r < outer * idx_dim; r++) {
    const float *xo = x + r / idx_dim * x_dim * inner;
    const int32_t *ir = index + r * inner;
    float *yr = y + r * inner;
    for (int64_t k = 0; k < inner; k++) yr[k] = xo[(int64_t)ir[k] * inner + k];
  }
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_scatter_add(ganfw_backend *be, ganfw_op *op) {
  (void)be;
  const int64_t outer = op->shape.d[0], out_dim = op->shape.d[1], idx_dim = op->shape.d[2],
                inner = op->shape.d[3];
  const int32_t *index = op->in[0];
  const float *src = op->in[1];
  float *out = op->out[0];
  const int64_t n = outer * idx_dim * inner;
  const int64_t col_blocks = (inner + SCATTER_COLUMNS - 1) / SCATTER_COLUMNS;
  /* columns [k0, k1) of one outer slab per iteration: written by this thread alone */
#pragma omp parallel for schedule(static) if (n >= GATHER_PARALLEL_MIN)
  for (int64_t blk = 0; blk < outer * col_blocks; blk++) {
    const int64_t o = blk / col_blocks, k0 = blk % col_blocks * SCATTER_COLUMNS;
    const int64_t k1 = k0 + SCATTER_COLUMNS < inner ? k0 + SCATTER_COLUMNS : inner;
    float *oo = out + o * out_dim * inner;
    for (int64_t i = 0; i < idx_dim; i++) {
      const int32_t *ir = index + (o * idx_dim + i) * inner;
      const float *sr = src + (o * idx_dim + i) * inner;
      for (int64_t k = k0; k < k1; k++) oo[(int64_t)ir[k] * inner + k] += sr[k];
    }
  }
  return GANFW_OK;
}
