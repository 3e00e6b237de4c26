/* dropout layer on any shape: in train mode zeroes each value with probability p (Philox
 * from the run's seed and offset) and scales the rest by 1/(1-p); keeps the u8 mask for
 * backward. Identity in eval mode. fargs: p. */
#include "layer.h"

static ganfw_status dropout_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                                  int64_t *out, int32_t *out_ndim) {
  for (int32_t d = 0; d < in_ndim; d++) out[d] = in[d];
  *out_ndim = in_ndim;
  return GANFW_OK;
}

static ganfw_status dropout_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                    ganfw_tensor **y, ganfw_saved *saved) {
  const float p = l->farg[0];
  if (!ex->train || p == 0.0f) {
    *y = ganfw_tensor_retain(x);
    return GANFW_OK;
  }
  ganfw_tensor *t =
      ganfw_tensor_refcount(x) == 1
          ? ganfw_tensor_retain(x)
          : ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, x->ndim, x->shape, GANFW_MEM_ACTIVATION);
  ganfw_tensor *mask =
      t ? ganfw_layer_tensor(l, ex, GANFW_DTYPE_U8, x->ndim, x->shape, GANFW_MEM_ACTIVATION) : NULL;
  if (!mask) {
    ganfw_status st = ganfw_error_code();
    ganfw_tensor_destroy(t);
    return st;
  }
  uint64_t offset = ganfw_ctx_rng_take(ex->ctx, x->numel);
  ex->be->vt->dropout_forward(ex->be, x->numel, p, ex->ctx->seed, offset, x->data, t->data,
                              mask->data);
  if (saved) {
    saved->t[0] = mask;
    saved->rng_offset = offset;
  } else {
    ganfw_tensor_destroy(mask);
  }
  *y = t;
  return GANFW_OK;
}

static ganfw_status dropout_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                     ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                     int32_t accumulate) {
  if (!dx) return GANFW_OK;
  if (!saved->t[0]) { /* eval mode or p = 0: identity */
    *dx = ganfw_tensor_retain(dy);
    return GANFW_OK;
  }
  ganfw_tensor *g =
      ganfw_tensor_refcount(dy) == 1
          ? ganfw_tensor_retain(dy)
          : ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, dy->ndim, dy->shape, GANFW_MEM_ACTIVATION);
  if (!g) return ganfw_error_code();
  ex->be->vt->dropout_backward(ex->be, dy->numel, l->farg[0], saved->t[0]->data, dy->data, g->data);
  *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_dropout = {
    .type = "dropout",
    .infer = dropout_infer,
    .forward = dropout_forward,
    .backward = dropout_backward,
};
