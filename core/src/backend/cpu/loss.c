/* Losses on the CPU, mean reduction, forward (one float into *loss) and backward:
 * BCE-with-logits over n logits with float targets, and softmax cross-entropy over
 * logits [N, classes] with int32 labels. Both are written so that logits of any size give
 * a finite loss (sums in double, softmax with max subtraction). */
#include <math.h>

#include "backend/cpu/cpu_ops.h"

/* Backward passes (element-wise) split across threads from this many elements; forward
 * sums stay on one thread so that the loss does not depend on the thread count. */
#define LOSS_PARALLEL_MIN 65536

/* sigmoid(x) from exp(-|x|), which never overflows. */
static inline double sigmoid(double x) {
  double e = exp(-fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

static void bce_logits_forward(ganfw_backend *be, int64_t n, const float *logits,
                               const float *targets, float *loss) {
  (void)be;
  /* -(t log s(x) + (1-t) log(1-s(x))) = max(x,0) - x t + log1p(exp(-|x|)) */
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double x = logits[i], t = targets[i];
    sum += (x > 0.0 ? x : 0.0) - x * t + log1p(exp(-fabs(x)));
  }
  *loss = n > 0 ? (float)(sum / (double)n) : 0.0f;
}

static void bce_logits_backward(ganfw_backend *be, int64_t n, const float *logits,
                                const float *targets, float dloss, float *dx) {
  (void)be;
  const double g = n > 0 ? (double)dloss / (double)n : 0.0;
#pragma omp parallel for schedule(static) if (n >= LOSS_PARALLEL_MIN)
  for (int64_t i = 0; i < n; i++) dx[i] = (float)(g * (sigmoid(logits[i]) - targets[i]));
}

/* log(sum_j exp(x_j)) of one row, with the row's maximum subtracted first. */
static double row_logsumexp(const float *x, int64_t classes) {
  double m = -INFINITY;
  for (int64_t j = 0; j < classes; j++) m = x[j] > m ? x[j] : m;
  double s = 0.0;
  for (int64_t j = 0; j < classes; j++) s += exp((double)x[j] - m);
  return m + log(s);
}

static void softmax_xent_forward(ganfw_backend *be, int64_t N, int64_t classes, const float *logits,
                                 const int32_t *labels, double smoothing, float *loss) {
  (void)be;
  const double eps = smoothing;
  double sum = 0.0;
  for (int64_t i = 0; i < N; i++) {
    const float *x = logits + i * classes;
    double lse = row_logsumexp(x, classes);
    int32_t y = labels[i];
    /* A label outside [0, classes) is a caller's bug; it adds nothing rather than reading
     * out of bounds. */
    if (y < 0 || y >= classes) continue;
    if (eps == 0.0) {
      sum += lse - (double)x[y];
      continue;
    }
    /* (1 - eps) * -log p_y + eps * mean_j(-log p_j) */
    double mean = 0.0;
    for (int64_t j = 0; j < classes; j++) mean += x[j];
    mean /= (double)classes;
    sum += (1.0 - eps) * (lse - (double)x[y]) + eps * (lse - mean);
  }
  *loss = N > 0 ? (float)(sum / (double)N) : 0.0f;
}

static void softmax_xent_backward(ganfw_backend *be, int64_t N, int64_t classes,
                                  const float *logits, const int32_t *labels, double smoothing,
                                  float dloss, float *dx) {
  (void)be;
  const double g = N > 0 ? (double)dloss / (double)N : 0.0;
  const double eps = smoothing, off = eps / (double)(classes > 0 ? classes : 1);
#pragma omp parallel for schedule(static) if (N * classes >= LOSS_PARALLEL_MIN)
  for (int64_t i = 0; i < N; i++) {
    const float *x = logits + i * classes;
    float *d = dx + i * classes;
    double lse = row_logsumexp(x, classes);
    int32_t y = labels[i];
    if (eps == 0.0) {
      for (int64_t j = 0; j < classes; j++) d[j] = (float)(g * exp((double)x[j] - lse));
      if (y >= 0 && y < classes) d[y] = (float)(g * (exp((double)x[y] - lse) - 1.0));
      continue;
    }
    for (int64_t j = 0; j < classes; j++) d[j] = (float)(g * (exp((double)x[j] - lse) - off));
    if (y >= 0 && y < classes) d[y] = (float)(g * (exp((double)x[y] - lse) - (1.0 - eps) - off));
  }
}

ganfw_status ganfw_cpu_op_bce_logits_forward(ganfw_backend *be, ganfw_op *op) {
  bce_logits_forward(be, op->shape.d[0], op->in[0], op->in[1], op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_bce_logits_backward(ganfw_backend *be, ganfw_op *op) {
  bce_logits_backward(be, op->shape.d[0], op->in[0], op->in[1], (float)op->sc[0], op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_softmax_xent_forward(ganfw_backend *be, ganfw_op *op) {
  softmax_xent_forward(be, op->shape.d[0], op->shape.d[1], op->in[0], op->in[1], op->sc[0],
                       op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_softmax_xent_backward(ganfw_backend *be, ganfw_op *op) {
  softmax_xent_backward(be, op->shape.d[0], op->shape.d[1], op->in[0], op->in[1], op->sc[0],
                        (float)op->sc[1], op->out[0]);
  return GANFW_OK;
}
