/* linear layer: x [N,IN] * weight[OUT,IN]^T (+ bias [OUT]) -> y [N,OUT]. Keeps x for
 * backward. Args: IN, OUT, bias. */
#include "layer.h"

static ganfw_status linear_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                                 int64_t *out, int32_t *out_ndim) {
  int64_t features = 1;
  for (int32_t d = 1; d < in_ndim; d++) features *= in[d];
  if (in_ndim != 2 || features != l->arg[0])
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,%lld] input, gets %d dims with %lld features per "
                             "sample (add a flatten layer before it?)",
                             (long long)l->arg[0], (int)in_ndim, (long long)features);
  out[0] = in[0], out[1] = l->arg[1];
  *out_ndim = 2;
  return GANFW_OK;
}

static ganfw_status linear_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  int64_t w[2] = {l->arg[1], l->arg[0]};
  ganfw_status st = ganfw_layer_add_param(l, 0, "weight", 2, w);
  if (st == GANFW_OK && l->arg[2]) st = ganfw_layer_add_param(l, 1, "bias", 1, &l->arg[1]);
  if (st == GANFW_OK) st = ganfw_layer_init_uniform(l, l->arg[0]);
  return st;
}

static ganfw_status linear_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                   ganfw_tensor **y, ganfw_saved *saved) {
  int64_t out[2] = {x->shape[0], l->arg[1]};
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, 2, out, GANFW_MEM_ACTIVATION);
  if (!t) return ganfw_error_code();
  ex->be->vt->linear_forward(ex->be, x->shape[0], l->arg[0], l->arg[1], x->data, l->param[0]->data,
                             l->param[1] ? l->param[1]->data : NULL, t->data);
  if (saved) saved->t[0] = ganfw_tensor_retain(x);
  *y = t;
  return GANFW_OK;
}

static ganfw_status linear_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                    ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                    int32_t accumulate) {
  ganfw_tensor *x = saved->t[0];
  ganfw_tensor *g = NULL;
  if (dx) {
    g = ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, x->ndim, x->shape, GANFW_MEM_ACTIVATION);
    if (!g) return ganfw_error_code();
  }
  if (g || param_grads)
    ex->be->vt->linear_backward(ex->be, x->shape[0], l->arg[0], l->arg[1], x->data,
                                l->param[0]->data, dy->data, g ? g->data : NULL,
                                param_grads ? l->grad[0]->data : NULL,
                                param_grads && l->grad[1] ? l->grad[1]->data : NULL, accumulate);
  if (dx) *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_linear = {
    .type = "linear",
    .infer = linear_infer,
    .init = linear_init,
    .forward = linear_forward,
    .backward = linear_backward,
};
