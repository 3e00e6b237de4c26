/* linear layer: x [N,IN] * weight[OUT,IN]^T (+ bias [OUT]) -> y [N,OUT]. Args:
 * ganfw_linear_args (layer.h). Forward and backward are the matmul frame's (matmul.c): x kept
 * for backward. With spectral norm (spectral_norm.c, dim 0) it computes with
 * weight_orig / sigma. */
#include "nn/layer.h"

/* ganfw_matmul_kind's op: d: N, IN, OUT. */
static ganfw_op linear_op(const ganfw_layer *l, const int64_t *in, int64_t rows, int32_t backward) {
  const ganfw_linear_args *a = &l->args.linear;
  ganfw_op op = {.kind = backward ? GANFW_OP_LINEAR_BACKWARD : GANFW_OP_LINEAR_FORWARD,
                 .shape.d = {rows, a->in_features, a->out_features}};
  return op;
}

static const ganfw_matmul_kind linear_kind = {
    .lp_group = GANFW_LP_LINEAR, .workspace = 0, .op = linear_op};

static ganfw_status linear_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                                 int64_t *out, int32_t *out_ndim) {
  const ganfw_linear_args *a = &l->args.linear;
  int64_t features = 1;
  for (int32_t d = 1; d < in_ndim; d++) features *= in[d];
  if (in_ndim != 2 || features != a->in_features)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,%lld] input, gets %d dims with %lld features per "
                             "sample (add a flatten layer before it?)",
                             (long long)a->in_features, (int)in_ndim, (long long)features);
  out[0] = in[0], out[1] = a->out_features;
  *out_ndim = 2;
  return GANFW_OK;
}

static ganfw_status linear_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  const ganfw_linear_args *a = &l->args.linear;
  int64_t w[2] = {a->out_features, a->in_features};
  ganfw_status st =
      ganfw_layer_add_param(l, 0, l->sn.n_power_iterations ? "weight_orig" : "weight", 2, w);
  if (st == GANFW_OK && a->bias) st = ganfw_layer_add_param(l, 1, "bias", 1, &a->out_features);
  if (st == GANFW_OK) st = ganfw_layer_init_uniform(l, a->in_features);
  if (st == GANFW_OK) st = ganfw_spectral_init(l, 0);
  return st;
}

static ganfw_status linear_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                   ganfw_tensor **y, ganfw_saved *saved) {
  const int64_t out[2] = {x->shape[0], l->args.linear.out_features};
  return ganfw_matmul_forward(l, ex, &linear_kind, x, 2, out, y, saved);
}

static ganfw_status linear_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                    ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                    int32_t accumulate) {
  return ganfw_matmul_backward(l, ex, &linear_kind, saved, dy, dx, param_grads, accumulate);
}

static ganfw_status linear_backward2(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                     ganfw_tensor *dy, int32_t n, ganfw_tensor *const *u,
                                     ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads) {
  (void)n, (void)ax;
  return ganfw_matmul_backward2(l, ex, &linear_kind, saved, dy, u, du, param_grads);
}

const ganfw_layer_vt ganfw_layer_linear = {
    .type = "linear",
    .infer = linear_infer,
    .init = linear_init,
    .forward = linear_forward,
    .backward = linear_backward,
    .backward2 = linear_backward2,
};
