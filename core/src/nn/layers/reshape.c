/* flatten ([N,C,H,W] -> [N,C*H*W]) and reshape ([N,F] -> [N,C,H,W]) layers: views that
 * share their input's memory; backward views dy back into the input shape. Args: 0 for
 * flatten; 1, C, H, W for reshape. */
#include <string.h>

#include "nn/layer.h"

static ganfw_status reshape_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                                  int64_t *out, int32_t *out_ndim) {
  int64_t features = 1;
  for (int32_t d = 1; d < in_ndim; d++) features *= in[d];
  out[0] = in[0];
  if (l->arg[0] == 0) {
    out[1] = features;
    *out_ndim = 2;
    return GANFW_OK;
  }
  if (features != l->arg[1] * l->arg[2] * l->arg[3])
    return ganfw_layer_error(
        l, GANFW_ERR_INVALID_ARG, "cannot reshape %lld features per sample into [%lld,%lld,%lld]",
        (long long)features, (long long)l->arg[1], (long long)l->arg[2], (long long)l->arg[3]);
  out[1] = l->arg[1], out[2] = l->arg[2], out[3] = l->arg[3];
  *out_ndim = 4;
  return GANFW_OK;
}

static ganfw_status reshape_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                    ganfw_tensor **y, ganfw_saved *saved) {
  int64_t out[GANFW_MAX_DIMS] = {1, 1, 1, 1};
  int32_t ndim = 0;
  ganfw_status st = reshape_infer(l, x->shape, x->ndim, out, &ndim);
  if (st != GANFW_OK) return st;
  *y = ganfw_tensor_view(x, ndim, out, l->qualified);
  if (!*y) return ganfw_error_code();
  if (saved) {
    memcpy(saved->shape, x->shape, sizeof saved->shape);
    saved->ndim = x->ndim;
  }
  return GANFW_OK;
}

static ganfw_status reshape_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                     ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                     int32_t accumulate) {
  if (!dx) return GANFW_OK;
  *dx = ganfw_tensor_view(dy, saved->ndim, saved->shape, l->qualified);
  return *dx ? GANFW_OK : ganfw_error_code();
}

const ganfw_layer_vt ganfw_layer_reshape = {
    .type = "reshape",
    .infer = reshape_infer,
    .forward = reshape_forward,
    .backward = reshape_backward,
};
