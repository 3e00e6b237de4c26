/* conv_transpose2d on the CPU: x [N,C,H,W], w [C,K,R,S] (+ b [K]) -> y [N,K,P,Q]. It is the
 * adjoint of the conv2d whose input is y's shape and whose output is x's shape, with the
 * same weight memory ([C,K,R,S] is that conv2d's [K',C',R,S]), so:
 *   forward        = that conv2d's backward-data (GEMM + col2im), then + b
 *   backward-data  = that conv2d's forward (im2col + GEMM)
 *   backward-filt  = that conv2d's backward-filter with x and dy swapped. */
#include "backend/cpu/cpu_ops.h"

/* Loops over fewer elements than this stay on one thread. */
#define CONVT_PARALLEL_MIN 65536

/* The conv2d this convT is the adjoint of. */
static ganfw_conv2d_shape convt_as_conv(const ganfw_convt2d_shape *s) {
  ganfw_conv2d_shape c = {.N = s->N,
                          .C = s->K,
                          .H = s->P,
                          .W = s->Q,
                          .K = s->C,
                          .R = s->R,
                          .S = s->S,
                          .stride_h = s->stride_h,
                          .stride_w = s->stride_w,
                          .pad_h = s->pad_h,
                          .pad_w = s->pad_w,
                          .P = s->H,
                          .Q = s->W};
  return c;
}

size_t ganfw_cpu_convt2d_workspace(ganfw_backend *be, const ganfw_convt2d_shape *s) {
  ganfw_conv2d_shape c = convt_as_conv(s);
  return ganfw_cpu_conv2d_workspace(be, &c);
}

void ganfw_cpu_convt2d_forward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                               const float *w, const float *b, float *y, void *ws) {
  ganfw_conv2d_shape c = convt_as_conv(s);
  ganfw_cpu_conv2d_backward(be, &c, NULL, w, x, y, NULL, NULL, 0, ws);
  if (!b) return;
  const int64_t NK = s->N * s->K, PQ = s->P * s->Q;
#pragma omp parallel for schedule(static)                                                          \
    num_threads(ganfw_cpu_threads()) if (NK * PQ >= CONVT_PARALLEL_MIN)
  for (int64_t nk = 0; nk < NK; nk++) {
    float *row = y + nk * PQ;
    const float bk = b[nk % s->K];
    for (int64_t j = 0; j < PQ; j++) row[j] += bk;
  }
}

void ganfw_cpu_convt2d_backward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                                const float *w, const float *dy, float *dx, float *dw, float *db,
                                int accumulate, void *ws) {
  ganfw_conv2d_shape c = convt_as_conv(s);
  if (db) {
    const int64_t N = s->N, K = s->K, PQ = s->P * s->Q;
#pragma omp parallel for schedule(static)                                                          \
    num_threads(ganfw_cpu_threads()) if (N * K * PQ >= CONVT_PARALLEL_MIN)
    for (int64_t k = 0; k < K; k++) {
      double acc = 0.0;
      for (int64_t n = 0; n < N; n++) {
        const float *row = dy + (n * K + k) * PQ;
        float part = 0.0f;
        for (int64_t j = 0; j < PQ; j++) part += row[j];
        acc += part;
      }
      db[k] = accumulate ? db[k] + (float)acc : (float)acc;
    }
  }
  if (dx) ganfw_cpu_conv2d_forward(be, &c, dy, w, NULL, dx, ws);
  if (dw) ganfw_cpu_conv2d_backward(be, &c, dy, w, x, NULL, dw, NULL, accumulate, ws);
}
