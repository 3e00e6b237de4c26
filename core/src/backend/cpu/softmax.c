/* softmax and log_softmax over one dim on the CPU, forward and backward, on x viewed as
 * [outer, dim, inner] (the dims before, the one reduced, the dims after): each of the
 * outer * inner rows holds dim values, inner apart. A row is one thread's, read in order, its
 * sums in double: the result does not depend on the thread count. Forward (the row's max
 * subtracted first, as torch): y = exp(x - max) / sum, log: y = (x - max) - log(sum).
 * Backward from the output y: dx = y * (dy - sum(dy * y)), log: dx = dy - exp(y) * sum(dy).
 * Each output value depends on its own input and the row's sums alone, so y may alias x and
 * dx may alias dy. */
#include <math.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many values the rows stay on one thread. */
#define SOFTMAX_PARALLEL_MIN 16384

static void softmax_row(int log_out, int64_t dim, int64_t inner, const float *x, float *y) {
  float m = -INFINITY;
  for (int64_t j = 0; j < dim; j++) m = fmaxf(m, x[j * inner]);
  if (m == -INFINITY) m = 0.0f; /* a row of -inf: exp(-inf - 0) = 0, then 0/0 as torch */
  double sum = 0.0;
  for (int64_t j = 0; j < dim; j++) sum += (double)expf(x[j * inner] - m);
  if (log_out) {
    const double shift = (double)m + log(sum);
    for (int64_t j = 0; j < dim; j++) y[j * inner] = (float)((double)x[j * inner] - shift);
  } else {
    const double inv = 1.0 / sum;
    for (int64_t j = 0; j < dim; j++) y[j * inner] = (float)((double)expf(x[j * inner] - m) * inv);
  }
}

static void softmax_backward_row(int log_out, int64_t dim, int64_t inner, const float *y,
                                 const float *dy, float *dx) {
  double sum = 0.0;
  if (log_out) {
    for (int64_t j = 0; j < dim; j++) sum += (double)dy[j * inner];
    for (int64_t j = 0; j < dim; j++)
      dx[j * inner] = (float)((double)dy[j * inner] - exp((double)y[j * inner]) * sum);
  } else {
    for (int64_t j = 0; j < dim; j++) sum += (double)dy[j * inner] * (double)y[j * inner];
    for (int64_t j = 0; j < dim; j++)
      dx[j * inner] = (float)((double)y[j * inner] * ((double)dy[j * inner] - sum));
  }
}

ganfw_status ganfw_cpu_op_softmax_forward(ganfw_backend *be, ganfw_op *op) {
  (void)be;
  const int64_t outer = op->shape.d[0], dim = op->shape.d[1], inner = op->shape.d[2];
  const float *x = op->in[0];
  float *y = op->out[0];
  const int log_out = op->mode == 1;
#pragma omp parallel for schedule(static) if (outer * dim * inner >= SOFTMAX_PARALLEL_MIN)
  for (int64_t r = 0; r < outer * inner; r++) {
    const int64_t at = r / inner * dim * inner + r % inner;
    softmax_row(log_out, dim, inner, x + at, y + at);
  }
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_softmax_backward(ganfw_backend *be, ganfw_op *op) {
  (void)be;
  const int64_t outer = op->shape.d[0], dim = op->shape.d[1], inner = op->shape.d[2];
  const float *y = op->in[0], *dy = op->in[1];
  float *dx = op->out[0];
  const int log_out = op->mode == 1;
#pragma omp parallel for schedule(static) if (outer * dim * inner >= SOFTMAX_PARALLEL_MIN)
  for (int64_t r = 0; r < outer * inner; r++) {
    const int64_t at = r / inner * dim * inner + r % inner;
    softmax_backward_row(log_out, dim, inner, y + at, dy + at, dx + at);
  }
  return GANFW_OK;
}
