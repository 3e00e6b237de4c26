/* Group normalisation on the CPU (GroupNorm, and InstanceNorm2d and LayerNorm through it):
 * x [N,C,HW], each sample's channels in G groups of C/G; a group is C/G*HW contiguous
 * values. Statistics, sums and the affine maps are computed in double in memory order, one
 * group per loop iteration; the parameter gradients are a second loop over channels that
 * sums the samples in order. Both loops split only whole groups or channels across
 * threads, so that results do not depend on the thread count. */
#include <math.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many values the kernels stay on one thread. */
#define GN_PARALLEL_MIN 32768

static void groupnorm_forward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                              const float *x, const float *gamma, const float *beta, float eps,
                              float *y, double *save_mean, double *save_invstd) {
  (void)be;
  const int64_t Cg = C / G, M = Cg * HW;
#pragma omp parallel for schedule(static) if (N * C * HW >= GN_PARALLEL_MIN)
  for (int64_t ng = 0; ng < N * G; ng++) {
    const float *xg = x + ng * M;
    float *yg = y + ng * M;
    double s = 0.0;
    for (int64_t i = 0; i < M; i++) s += xg[i];
    const double mean = s / (double)M;
    double q = 0.0; /* two passes: exact enough when |mean| >> std */
    for (int64_t i = 0; i < M; i++) {
      const double d = (double)xg[i] - mean;
      q += d * d;
    }
    const double invstd = 1.0 / sqrt(q / (double)M + (double)eps);
    save_mean[ng] = mean;
    save_invstd[ng] = invstd;
    const int64_t c0 = ng % G * Cg;
    for (int64_t k = 0; k < Cg; k++) {
      const double a = (gamma ? gamma[c0 + k] : 1.0) * invstd, b = beta ? beta[c0 + k] : 0.0;
      const float *r = xg + k * HW;
      float *o = yg + k * HW;
#pragma omp simd
      for (int64_t j = 0; j < HW; j++) o[j] = (float)(((double)r[j] - mean) * a + b);
    }
  }
}

/* With xhat = (x - mean) * invstd, g = dy * gamma[c] and M values per group:
 *   dx = invstd * (g - sum(g)/M - xhat * sum(g * xhat)/M)
 * per group, written as dx = dy * a[c] + (x - mean) * b + c (in double);
 *   dgamma[c] = sum over n, HW of dy * xhat, dbeta[c] = sum of dy. */
static void groupnorm_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                               const float *x, const float *dy, const float *gamma,
                               const double *save_mean, const double *save_invstd, float *dx,
                               float *dgamma, float *dbeta, int accumulate) {
  (void)be;
  const int64_t Cg = C / G, M = Cg * HW;
  const int parallel = N * C * HW >= GN_PARALLEL_MIN;
  if (dx) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t ng = 0; ng < N * G; ng++) {
      const float *xg = x + ng * M, *dyg = dy + ng * M;
      float *dxg = dx + ng * M;
      const int64_t c0 = ng % G * Cg;
      const double mean = save_mean[ng], invstd = save_invstd[ng];
      double sg = 0.0, sgx = 0.0; /* sum(g), sum(g * (x - mean)) */
      for (int64_t k = 0; k < Cg; k++) {
        const double gm = gamma ? gamma[c0 + k] : 1.0;
        double s = 0.0, sx = 0.0;
        for (int64_t j = 0; j < HW; j++) {
          const double d = dyg[k * HW + j];
          s += d;
          sx += d * ((double)xg[k * HW + j] - mean);
        }
        sg += gm * s;
        sgx += gm * sx;
      }
      const double b = -invstd * invstd * invstd * sgx / (double)M;
      const double c = -invstd * sg / (double)M;
      for (int64_t k = 0; k < Cg; k++) {
        const double a = (gamma ? gamma[c0 + k] : 1.0) * invstd;
        const float *rdy = dyg + k * HW, *rx = xg + k * HW;
        float *o = dxg + k * HW;
        /* in double: the three terms cancel where a group has few values */
#pragma omp simd
        for (int64_t j = 0; j < HW; j++)
          o[j] = (float)(rdy[j] * a + ((double)rx[j] - mean) * b + c);
      }
    }
  }
  if (!dgamma && !dbeta) return;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < C; c++) {
    const int64_t g = c / Cg;
    double sdy = 0.0, sdyx = 0.0;
    for (int64_t n = 0; n < N; n++) {
      const float *rdy = dy + (n * C + c) * HW, *rx = x + (n * C + c) * HW;
      const double mean = save_mean[n * G + g], invstd = save_invstd[n * G + g];
      double s = 0.0, sx = 0.0;
      for (int64_t j = 0; j < HW; j++) {
        s += rdy[j];
        sx += (double)rdy[j] * ((double)rx[j] - mean);
      }
      sdy += s;
      sdyx += sx * invstd;
    }
    if (dbeta) dbeta[c] = (float)(accumulate ? dbeta[c] + sdy : sdy);
    if (dgamma) dgamma[c] = (float)(accumulate ? dgamma[c] + sdyx : sdyx);
  }
}

ganfw_status ganfw_cpu_op_groupnorm_forward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  groupnorm_forward(be, d[0], d[1], d[2], d[3], op->in[0], op->in[1], op->in[2], (float)op->sc[0],
                    op->out[0], op->out[1], op->out[2]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_groupnorm_backward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  groupnorm_backward(be, d[0], d[1], d[2], d[3], op->in[0], op->in[1], op->in[2], op->in[3],
                     op->in[4], op->out[0], op->grad[0], op->grad[1], ganfw_cpu_accumulate(op));
  return GANFW_OK;
}
