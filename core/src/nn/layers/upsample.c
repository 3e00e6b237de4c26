/* upsample layer (PyTorch's nn.Upsample(scale_factor=2, mode)): x [N,C,H,W] ->
 * y [N,C,2H,2W], mode nearest or bilinear (align_corners=False). Keeps nothing for
 * backward but the input shape. Args: ganfw_upsample_args (layer.h). */
#include <string.h>

#include "nn/layer.h"

static ganfw_status up_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim, int64_t *out,
                             int32_t *out_ndim) {
  if (in_ndim != 4)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,C,H,W] input, gets %d dims (reshape a [N,F] input "
                             "first)",
                             (int)in_ndim);
  out[0] = in[0], out[1] = in[1], out[2] = 2 * in[2], out[3] = 2 * in[3];
  *out_ndim = 4;
  return GANFW_OK;
}

/* One op over rows of the batch: C, H, W of the input. */
typedef struct up_call {
  int64_t C, H, W;
} up_call;

/* f: x, y */
static ganfw_status up_forward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                    int64_t rows, float *const *f) {
  const up_call *c = arg;
  (void)n0;
  ganfw_op op = {.kind = GANFW_OP_UPSAMPLE2D_FORWARD,
                 .mode = l->args.upsample.mode,
                 .shape.d = {rows * c->C, c->H, c->W},
                 .in = {f[0]},
                 .out = {f[1]}};
  return ganfw_layer_op(l, ex, &op);
}

/* f: dy, dx */
static ganfw_status up_backward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                     int64_t rows, float *const *f) {
  const up_call *c = arg;
  (void)n0;
  ganfw_op op = {.kind = GANFW_OP_UPSAMPLE2D_BACKWARD,
                 .mode = l->args.upsample.mode,
                 .shape.d = {rows * c->C, c->H, c->W},
                 .in = {f[0]},
                 .out = {f[1]}};
  return ganfw_layer_op(l, ex, &op);
}

static ganfw_status up_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                               ganfw_tensor **y, ganfw_saved *saved) {
  int64_t out[4];
  int32_t nd;
  up_infer(l, x->shape, x->ndim, out, &nd);
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, 4, out, GANFW_MEM_ACTIVATION);
  if (!t) return ganfw_error_code();
  up_call c = {x->shape[1], x->shape[2], x->shape[3]};
  ganfw_tensor *io[2] = {x, t};
  ganfw_status st = ganfw_layer_rows_run(l, ex, io, 1, 2, up_forward_rows, &c);
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

static ganfw_status up_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                int32_t accumulate) {
  (void)param_grads, (void)accumulate;
  if (!dx) return GANFW_OK;
  ganfw_tensor *g =
      ganfw_layer_tensor(l, ex, ex->dtype, saved->ndim, saved->shape, GANFW_MEM_ACTIVATION);
  if (!g) return ganfw_error_code();
  up_call c = {saved->shape[1], saved->shape[2], saved->shape[3]};
  ganfw_tensor *io[2] = {dy, g};
  ganfw_status st = ganfw_layer_rows_run(l, ex, io, 1, 2, up_backward_rows, &c);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_upsample = {
    .type = "upsample",
    .infer = up_infer,
    .forward = up_forward,
    .backward = up_backward,
    .backward2 = ganfw_layer_backward2_by_forward,
    .backward2_reads_dy = ganfw_layer_backward2_no_dy,
};
