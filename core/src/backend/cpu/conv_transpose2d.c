/* conv_transpose2d on the CPU: x [N,C,H,W], w [C,K,R,S] (+ b [K]) -> y [N,K,P,Q]. It is the
 * adjoint of the conv2d whose input is y's shape and whose output is x's shape, with the
 * same weight memory ([C,K,R,S] is that conv2d's [K',C',R,S]), so:
 *   forward        = that conv2d's backward-data (GEMM + col2im), then + b
 *   backward-data  = that conv2d's forward (im2col + GEMM)
 *   backward-filt  = that conv2d's backward-filter with x and dy swapped.
 * In 16 bits (the op's dtype f16 or bf16) they run on the same kernels with 16-bit
 * activations (conv_internal.h). */
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

const char *ganfw_cpu_convt2d_algorithm(const ganfw_convt2d_shape *s, int32_t dt, int32_t pass) {
  const ganfw_conv2d_shape c = convt_as_conv(s);
  const int32_t swapped[GANFW_OP_PASS_COUNT] = {GANFW_OP_PASS_DATA, GANFW_OP_PASS_FORWARD,
                                                GANFW_OP_PASS_FILTER};
  return pass >= 0 && pass < GANFW_OP_PASS_COUNT ? ganfw_cpu_conv2d_algorithm(&c, dt, swapped[pass])
                                                 : NULL;
}

/* The workspace of the adjoint conv2d in dt. */
size_t ganfw_cpu_convt2d_workspace(const ganfw_convt2d_shape *s, int32_t dt) {
  const ganfw_conv2d_shape c = convt_as_conv(s);
  return ganfw_cpu_conv2d_workspace(&c, dt);
}

/* In 16 bits, the weights are converted to f32 into the workspace first (lw). */
ganfw_status ganfw_cpu_op_convt2d_forward(ganfw_backend *be, ganfw_op *op) {
  const ganfw_convt2d_shape *s = &op->shape.convt;
  const int32_t dt = op->dtype;
  if (dt == GANFW_DTYPE_F32) {
    convt_forward(be, s, dt, op->in[0], op->in[1], op->in[2], op->out[0], NULL, op->ws);
    return GANFW_OK;
  }
  const ganfw_conv2d_shape c = convt_as_conv(s);
  const conv_lp_ws lw = ganfw_cpu_conv2d_lp_split(&c, dt, op->in[1], op->ws);
  convt_forward(be, s, dt, op->in[0], lw.w, op->in[2], op->out[0], &lw, op->ws);
  return GANFW_OK;
}

/* w is read (and, in 16 bits, converted) only for dx. */
ganfw_status ganfw_cpu_op_convt2d_backward(ganfw_backend *be, ganfw_op *op) {
  const ganfw_convt2d_shape *s = &op->shape.convt;
  const int32_t dt = op->dtype;
  void *dx = op->out[0];
  if (dt == GANFW_DTYPE_F32) {
    convt_backward(be, s, dt, op->in[0], op->in[1], op->in[2], dx, op->grad[0], op->grad[1],
                   ganfw_cpu_accumulate(op), NULL, op->ws);
    return GANFW_OK;
  }
  const ganfw_conv2d_shape c = convt_as_conv(s);
  const conv_lp_ws lw = ganfw_cpu_conv2d_lp_split(&c, dt, dx ? op->in[1] : NULL, op->ws);
  convt_backward(be, s, dt, op->in[0], dx ? lw.w : NULL, op->in[2], dx, op->grad[0], op->grad[1],
                 ganfw_cpu_accumulate(op), &lw, op->ws);
  return GANFW_OK;
}
