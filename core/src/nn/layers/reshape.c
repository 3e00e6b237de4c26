/* flatten ([N,C,H,W] -> [N,C*H*W]) and reshape ([N,F] -> [N,C,H,W]) layers: views that
 * share their input's memory; backward views dy back into the input shape. Args:
 * ganfw_reshape_args (layer.h). */
#include <string.h>

#include "nn/layer.h"

static ganfw_status reshape_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                                  int64_t *out, int32_t *out_ndim) {
  int64_t features = 1;
  for (int32_t d = 1; d < in_ndim; d++) features *= in[d];
  const ganfw_reshape_args *a = &l->args.reshape;
  out[0] = in[0];
  if (a->flatten) {
    out[1] = features;
    *out_ndim = 2;
    return GANFW_OK;
  }
  if (features != a->c * a->h * a->w)
    return ganfw_layer_error(
        l, GANFW_ERR_INVALID_ARG, "cannot reshape %lld features per sample into [%lld,%lld,%lld]",
        (long long)features, (long long)a->c, (long long)a->h, (long long)a->w);
  out[1] = a->c, out[2] = a->h, out[3] = a->w;
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
    .backward2 = ganfw_layer_backward2_by_forward,
    .backward2_reads_dy = ganfw_layer_backward2_no_dy,
};
