/* Activation layer (ReLU, LeakyReLU, Tanh, Sigmoid) on any shape. Runs in place when the
 * executor holds the only reference to its input, as PyTorch's inplace=True; keeps its
 * output for backward, which runs in place on dy the same way. Args: kind; fargs: alpha. */
#include "layer.h"

static ganfw_status act_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                              int64_t *out, int32_t *out_ndim) {
  for (int32_t d = 0; d < in_ndim; d++) out[d] = in[d];
  *out_ndim = in_ndim;
  return GANFW_OK;
}

/* x itself (retained) when nobody else holds it, else a new tensor of its shape. */
static ganfw_tensor *in_place_or_new(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x) {
  if (ganfw_tensor_refcount(x) == 1) return ganfw_tensor_retain(x);
  return ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, x->ndim, x->shape, GANFW_MEM_ACTIVATION);
}

static ganfw_status act_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                ganfw_tensor **y, ganfw_saved *saved) {
  ganfw_tensor *t = in_place_or_new(l, ex, x);
  if (!t) return ganfw_error_code();
  ex->be->vt->act_forward(ex->be, (int32_t)l->arg[0], l->farg[0], x->numel, x->data, t->data);
  if (saved) saved->t[0] = ganfw_tensor_retain(t);
  *y = t;
  return GANFW_OK;
}

static ganfw_status act_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                 ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                 int32_t accumulate) {
  if (!dx) return GANFW_OK;
  ganfw_tensor *g = in_place_or_new(l, ex, dy);
  if (!g) return ganfw_error_code();
  ex->be->vt->act_backward(ex->be, (int32_t)l->arg[0], l->farg[0], dy->numel, saved->t[0]->data,
                           dy->data, g->data);
  *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_activation = {
    .type = "activation",
    .infer = act_infer,
    .forward = act_forward,
    .backward = act_backward,
};
