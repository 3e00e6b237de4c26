/* conv_transpose2d on the CPU: x [N,C,H,W], w [C,K,R,S] (+ b [K]) -> y [N,K,P,Q]. It is the
 * adjoint of the conv2d whose input is y's shape and whose output is x's shape, with the
 * same weight memory ([C,K,R,S] is that conv2d's [K',C',R,S]), so:
 *   forward        = that conv2d's backward-data (GEMM + col2im), then + b
 *   backward-data  = that conv2d's forward (im2col + GEMM)
 *   backward-filt  = that conv2d's backward-filter with x and dy swapped.
 * The 16-bit entries run on the same kernels with 16-bit activations (conv_internal.h). */
#include "backend/cpu/conv_internal.h"
#include "backend/cpu/cpu_ops.h"

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

/* The bias is added where that backward-data rounds dx, so a 16-bit y is rounded once. */
static void convt_forward(ganfw_backend *be, const ganfw_convt2d_shape *s, int32_t dt,
                          const void *x, const float *w, const float *b, void *y,
                          const conv_lp_ws *lw, void *ws) {
  ganfw_conv2d_shape c = convt_as_conv(s);
  ganfw_cpu_conv2d_backward_dt(be, &c, dt, NULL, w, x, y, NULL, NULL, 0, b, lw, ws);
}

static void convt_backward(ganfw_backend *be, const ganfw_convt2d_shape *s, int32_t dt,
                           const void *x, const float *w, const void *dy, void *dx, float *dw,
                           float *db, int accumulate, const conv_lp_ws *lw, void *ws) {
  ganfw_conv2d_shape c = convt_as_conv(s);
  if (db) ganfw_cpu_conv_bias_grad(s->N, s->K, s->P * s->Q, dt, dy, db, accumulate);
  if (dx) ganfw_cpu_conv2d_forward_dt(be, &c, dt, dy, w, NULL, dx, lw, ws);
  if (dw)
    ganfw_cpu_conv2d_backward_dt(be, &c, dt, dy, NULL, x, NULL, dw, NULL, accumulate, NULL, lw, ws);
}

void ganfw_cpu_convt2d_forward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                               const float *w, const float *b, float *y, void *ws) {
  convt_forward(be, s, GANFW_DTYPE_F32, x, w, b, y, NULL, ws);
}

void ganfw_cpu_convt2d_backward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                                const float *w, const float *dy, float *dx, float *dw, float *db,
                                int accumulate, void *ws) {
  convt_backward(be, s, GANFW_DTYPE_F32, x, w, dy, dx, dw, db, accumulate, NULL, ws);
}

/* The native 16-bit entries: conv2d.c's 16-bit kernels of the adjoint conv2d. */
size_t ganfw_cpu_convt2d_workspace_lp(ganfw_backend *be, int32_t dtype,
                                      const ganfw_convt2d_shape *s) {
  (void)be, (void)dtype;
  ganfw_conv2d_shape c = convt_as_conv(s);
  return ganfw_cpu_conv2d_lp_workspace(&c);
}

void ganfw_cpu_convt2d_forward_lp(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                                  const void *x, const void *w, const float *b, void *y, void *ws) {
  ganfw_conv2d_shape c = convt_as_conv(s);
  const conv_lp_ws lw = ganfw_cpu_conv2d_lp_split(&c, dtype, w, ws);
  convt_forward(be, s, dtype, x, lw.w, b, y, &lw, ws);
}

void ganfw_cpu_convt2d_backward_lp(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                                   const void *x, const void *w, const void *dy, void *dx,
                                   float *dw, float *db, int accumulate, void *ws) {
  ganfw_conv2d_shape c = convt_as_conv(s);
  const conv_lp_ws lw = ganfw_cpu_conv2d_lp_split(&c, dtype, dx ? w : NULL, ws);
  convt_backward(be, s, dtype, x, dx ? lw.w : NULL, dy, dx, dw, db, accumulate, &lw, ws);
}
