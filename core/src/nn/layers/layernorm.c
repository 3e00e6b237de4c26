/* layernorm layer (PyTorch's nn.LayerNorm(shape, eps, elementwise_affine)) over every value
 * of a sample: x [N,F] with shape [F], or x [N,C,H,W] with shape [C,H,W] (after a conv);
 * each sample normalised by its own mean and biased variance, then weight and bias of
 * `shape`, elementwise. The group normalisation with one group of D = F or C*H*W values
 * and D "channels" of one value each (ganfw_norm_*, groupnorm.c). Args: ganfw_layernorm_args
 * (layer.h). */
#include <stdio.h>

#include "nn/layer.h"

static ganfw_norm_view ln_view(const ganfw_layer *l) {
  const ganfw_layernorm_args *a = &l->args.layernorm;
  int64_t D = 1;
  for (int32_t d = 0; d < a->ndim; d++) D *= a->shape[d];
  ganfw_norm_view v = {.C = D, .HW = 1, .G = 1, .eps = a->eps};
  return v;
}

/* "[4,8,8]" */
static void shape_text(char *buf, size_t n, const int64_t *dims, int64_t nd) {
  int at = snprintf(buf, n, "[");
  for (int64_t d = 0; d < nd && at < (int)n; d++)
    at += snprintf(buf + at, n - (size_t)at, "%s%lld", d ? "," : "", (long long)dims[d]);
  if (at < (int)n) snprintf(buf + at, n - (size_t)at, "]");
}

static ganfw_status ln_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim, int64_t *out,
                             int32_t *out_ndim) {
  const ganfw_layernorm_args *a = &l->args.layernorm;
  const int64_t nd = a->ndim;
  int same = in_ndim == nd + 1;
  for (int64_t d = 0; same && d < nd; d++) same = in[1 + d] == a->shape[d];
  if (!same) {
    char want[96], got[96];
    shape_text(want, sizeof want, a->shape, nd);
    shape_text(got, sizeof got, in + 1, in_ndim - 1);
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "normalises samples of shape %s, gets samples of shape %s; give "
                             "the layer the shape of its input without the batch",
                             want, got);
  }
  for (int32_t d = 0; d < in_ndim; d++) out[d] = in[d];
  *out_ndim = in_ndim;
  return GANFW_OK;
}

static ganfw_status ln_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  (void)in, (void)in_ndim;
  const ganfw_layernorm_args *a = &l->args.layernorm;
  return a->affine ? ganfw_norm_add_affine(l, a->ndim, a->shape) : GANFW_OK;
}

static ganfw_status ln_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                               ganfw_tensor **y, ganfw_saved *saved) {
  ganfw_norm_view v = ln_view(l);
  return ganfw_norm_forward(l, ex, &v, x, y, saved);
}

static ganfw_status ln_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                int32_t accumulate) {
  ganfw_norm_view v = ln_view(l);
  return ganfw_norm_backward(l, ex, &v, saved, dy, dx, param_grads, accumulate);
}

static ganfw_status ln_backward2(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                 ganfw_tensor *dy, int32_t n, ganfw_tensor *const *u,
                                 ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads) {
  (void)n;
  ganfw_norm_view v = ln_view(l);
  return ganfw_norm_backward2(l, ex, &v, saved, dy, u, du, ax, param_grads);
}

const ganfw_layer_vt ganfw_layer_layernorm = {
    .type = "layernorm",
    .infer = ln_infer,
    .init = ln_init,
    .forward = ln_forward,
    .backward = ln_backward,
    .backward2 = ln_backward2,
};
