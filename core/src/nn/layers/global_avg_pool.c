/* global_avg_pool layer (PyTorch's nn.AdaptiveAvgPool2d(1)): x [N,C,H,W] -> y [N,C,1,1],
 * the mean of each channel's H*W values; a flatten after it gives [N,C]. It is the
 * backend's average pooling with one window of the whole plane (H x W, no padding), so
 * every backend that pools runs it. Keeps nothing for backward but the input shape. */
#include <string.h>

#include "nn/layer.h"

static ganfw_status gap_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                              int64_t *out, int32_t *out_ndim) {
  if (in_ndim != 4)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,C,H,W] input, gets %d dims (it pools over H and W)",
                             (int)in_ndim);
  out[0] = in[0], out[1] = in[1], out[2] = 1, out[3] = 1;
  *out_ndim = 4;
  return GANFW_OK;
}

/* The window of the whole plane over rows samples of x [*,C,H,W]. */
static ganfw_pool2d_shape gap_shape(const int64_t *x, int64_t rows) {
  ganfw_pool2d_shape s = {.N = rows,
                          .C = x[1],
                          .H = x[2],
                          .W = x[3],
                          .R = x[2],
                          .S = x[3],
                          .stride_h = 1,
                          .stride_w = 1};
  ganfw_pool2d_shape_init(&s); /* P = Q = 1: cannot fail for a built net's shapes */
  return s;
}

/* f: x, y */
static ganfw_status gap_forward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                     int64_t rows, float *const *f) {
  (void)n0;
  ganfw_op op = {.kind = GANFW_OP_AVGPOOL2D_FORWARD,
                 .shape.pool = gap_shape(arg, rows),
                 .in = {f[0]},
                 .out = {f[1]}};
  return ganfw_layer_op(l, ex, &op);
}

/* f: dy, dx */
static ganfw_status gap_backward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                      int64_t rows, float *const *f) {
  (void)n0;
  ganfw_op op = {.kind = GANFW_OP_AVGPOOL2D_BACKWARD,
                 .shape.pool = gap_shape(arg, rows),
                 .in = {f[0]},
                 .out = {f[1]}};
  return ganfw_layer_op(l, ex, &op);
}

static ganfw_status gap_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                ganfw_tensor **y, ganfw_saved *saved) {
  int64_t out[4] = {x->shape[0], x->shape[1], 1, 1};
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, 4, out, GANFW_MEM_ACTIVATION);
  if (!t) return ganfw_error_code();
  ganfw_tensor *io[2] = {x, t};
  ganfw_status st = ganfw_layer_rows_run(l, ex, io, 1, 2, gap_forward_rows, x->shape);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return st;
  }
  if (saved) {
    memcpy(saved->shape, x->shape, sizeof saved->shape);
    saved->ndim = x->ndim;
  }
  *y = t;
  return GANFW_OK;
}

static ganfw_status gap_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                 ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                 int32_t accumulate) {
  (void)param_grads, (void)accumulate;
  if (!dx) return GANFW_OK;
  ganfw_tensor *g =
      ganfw_layer_tensor(l, ex, ex->dtype, saved->ndim, saved->shape, GANFW_MEM_ACTIVATION);
  if (!g) return ganfw_error_code();
  ganfw_tensor *io[2] = {dy, g};
  ganfw_status st = ganfw_layer_rows_run(l, ex, io, 1, 2, gap_backward_rows, saved->shape);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_global_avg_pool = {
    .type = "global_avg_pool",
    .infer = gap_infer,
    .forward = gap_forward,
    .backward = gap_backward,
    .backward2 = ganfw_layer_backward2_by_forward,
    .backward2_reads_dy = ganfw_layer_backward2_no_dy,
};
