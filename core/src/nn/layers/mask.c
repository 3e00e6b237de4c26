/* Pruning masks on a conv2d, conv_transpose2d or linear weight, as torch.nn.utils.prune's
 * forward pre-hook: the layer keeps weight_orig (parameter 0) and a 0/1 mask of the same
 * shape (an extra buffer, saved with the weights), and
 *   forward:  computes with w_eff = weight_orig * mask;
 *   backward: weight_orig's gradient is G * mask for the gradient G of w_eff,
 * which is what autograd gives for the product. Built from the backend's mul and axpy, so
 * that it runs, and is planned, on every backend. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nn/layer.h"

/* out[0..n) = a * b */
static ganfw_status mask_mul(const ganfw_layer *l, const ganfw_exec *ex, int64_t n, float *out,
                             const float *a, const float *b) {
  ganfw_op op = {.kind = GANFW_OP_MUL, .shape.d = {n}, .in = {a, b}, .out = {out}};
  return ganfw_layer_op(l, ex, &op);
}

/* y[0..n) += x */
static ganfw_status mask_add(const ganfw_layer *l, const ganfw_exec *ex, int64_t n, float *y,
                             const float *x) {
  ganfw_op op = {.kind = GANFW_OP_AXPY, .shape.d = {n}, .in = {x}, .out = {y}, .sc = {1.0f}};
  return ganfw_layer_op(l, ex, &op);
}

static int is_matmul(const ganfw_layer *l) {
  return l->vt == &ganfw_layer_conv2d || l->vt == &ganfw_layer_conv_transpose2d ||
         l->vt == &ganfw_layer_linear;
}

ganfw_status ganfw_mask_install(ganfw_layer *l) {
  if (l->mask.on) return GANFW_OK;
  if (!is_matmul(l) || !l->param[0])
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "has no weight to prune; conv2d, conv_transpose2d and linear "
                             "layers can be pruned");
  if (l->sn.n_power_iterations > 0)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "is spectrally normalised; pruning masks and spectral norm on one "
                             "layer are not supported (prune the other layers)");
  if (l->nextra >= GANFW_LAYER_MAX_EXTRA)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG, "has no room for a mask buffer");
  if (!l->mask.plain_name) {
    char *orig = ganfw_name_join(l->name, "weight_orig");
    if (!orig) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    l->mask.plain_name = l->param_name[0];
    l->mask.orig_name = orig;
  }
  const ganfw_tensor *w = l->param[0];
  const int32_t k = l->nextra;
  char *q = ganfw_name_join(l->qualified, "weight_mask");
  l->extra_name[k] = ganfw_name_join(l->name, "weight_mask");
  if (q && l->extra_name[k])
    l->extra[k] =
        ganfw_tensor_create(l->ctx, GANFW_DTYPE_F32, w->ndim, w->shape, GANFW_MEM_PARAM, q);
  free(q);
  if (!l->extra[k]) {
    free(l->extra_name[k]);
    l->extra_name[k] = NULL;
    return ganfw_error_wrap(ganfw_error_code() ? ganfw_error_code() : GANFW_ERR_OOM,
                            "allocating the pruning mask %s.weight_mask", l->qualified);
  }
  const ganfw_exec ex = ganfw_layer_init_exec(l);
  ganfw_status st = ganfw_layer_fill(l, &ex, w->numel, l->extra[k]->data, 1.0f);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(l->extra[k]);
    l->extra[k] = NULL;
    free(l->extra_name[k]);
    l->extra_name[k] = NULL;
    return st;
  }
  l->nextra = k + 1;
  l->mask.extra = k;
  l->mask.on = 1;
  l->param_name[0] = l->mask.orig_name;
  return GANFW_OK;
}

ganfw_status ganfw_mask_remove(ganfw_layer *l) {
  if (!l->mask.on) return GANFW_OK;
  const ganfw_exec ex = ganfw_layer_init_exec(l);
  ganfw_tensor *w = l->param[0], *m = ganfw_layer_mask(l);
  ganfw_status st = mask_mul(l, &ex, w->numel, w->data, w->data, m->data);
  if (st != GANFW_OK) return st;
  const int32_t k = l->mask.extra;
  ganfw_tensor_destroy(l->extra[k]);
  free(l->extra_name[k]);
  for (int32_t i = k; i + 1 < l->nextra; i++) {
    l->extra[i] = l->extra[i + 1];
    l->extra_name[i] = l->extra_name[i + 1];
  }
  l->nextra--;
  l->extra[l->nextra] = NULL;
  l->extra_name[l->nextra] = NULL;
  l->mask.on = 0;
  l->mask.extra = 0;
  l->param_name[0] = l->mask.plain_name;
  return GANFW_OK;
}

void ganfw_mask_free_names(ganfw_layer *l) {
  if (!l->mask.plain_name) return;
  free(l->mask.plain_name);
  free(l->mask.orig_name);
  l->mask.plain_name = l->mask.orig_name = NULL;
  l->param_name[0] = NULL;
}

void ganfw_mask_release(ganfw_layer *l) {
  ganfw_tensor_destroy(l->mask.w_eff);
  ganfw_tensor_destroy(l->mask.grad_eff);
  l->mask.w_eff = l->mask.grad_eff = NULL;
}

/* mask.w_eff = weight_orig * mask, a workspace tensor of the weight's shape. */
static ganfw_status mask_weight_eff(ganfw_layer *l, const ganfw_exec *ex) {
  const ganfw_tensor *w = l->param[0];
  ganfw_tensor *e =
      ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, w->ndim, w->shape, GANFW_MEM_WORKSPACE);
  if (!e) return ganfw_error_code();
  ganfw_status st = mask_mul(l, ex, w->numel, e->data, w->data, ganfw_layer_mask(l)->data);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(e);
    return st;
  }
  l->mask.w_eff = e;
  return GANFW_OK;
}

ganfw_status ganfw_mask_forward_begin(ganfw_layer *l, const ganfw_exec *ex) {
  return l->mask.on ? mask_weight_eff(l, ex) : GANFW_OK;
}

ganfw_status ganfw_mask_backward_begin(ganfw_layer *l, const ganfw_exec *ex, int32_t param_grads,
                                       int32_t accumulate, float **dw) {
  if (!l->mask.on) return GANFW_OK; /* *dw as spectral norm's begin set it */
  *dw = param_grads ? l->grad[0]->data : NULL;
  ganfw_status st = mask_weight_eff(l, ex);
  if (st != GANFW_OK || !param_grads || !accumulate) return st;
  const ganfw_tensor *w = l->param[0];
  ganfw_tensor *g =
      ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, w->ndim, w->shape, GANFW_MEM_WORKSPACE);
  if (!g) {
    ganfw_mask_release(l);
    return ganfw_error_code();
  }
  l->mask.grad_eff = g;
  *dw = g->data;
  return ganfw_layer_fill(l, ex, g->numel, g->data, 0.0f);
}

ganfw_status ganfw_mask_backward_end(ganfw_layer *l, const ganfw_exec *ex, int32_t param_grads,
                                     int32_t accumulate) {
  if (!l->mask.on || !param_grads) {
    ganfw_mask_release(l);
    return GANFW_OK;
  }
  const int64_t n = l->param[0]->numel;
  const float *m = ganfw_layer_mask(l)->data;
  float *dW = l->grad[0]->data;
  ganfw_status st;
  if (accumulate) {
    float *G = l->mask.grad_eff->data;
    st = mask_mul(l, ex, n, G, G, m);
    if (st == GANFW_OK) st = mask_add(l, ex, n, dW, G);
  } else {
    st = mask_mul(l, ex, n, dW, dW, m);
  }
  ganfw_mask_release(l);
  return st;
}
