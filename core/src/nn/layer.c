/* What every layer implementation shares (see layer.h): the one way its ops reach the
 * backend, errors that name the layer, its activation and workspace tensors, its parameters
 * and their default initialisation, and the release of what a forward saved for backward. The
 * executor (net.c) and the layer types (layers/<type>.c) both build on this file; it names no layer
 * type. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nn/layer.h"

char *ganfw_name_join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *d = malloc(n);
  if (d) snprintf(d, n, "%s.%s", a, b);
  return d;
}

ganfw_status ganfw_layer_error(const ganfw_layer *l, ganfw_status code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ganfw_error_set(code, "layer %s (%s): %s", l->qualified, l->vt->type, msg);
}

ganfw_status ganfw_layer_op(const ganfw_layer *l, const ganfw_exec *ex, ganfw_op *op) {
  ganfw_status st = ganfw_backend_run(ex->be, op);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "layer %s", l->qualified);
}

ganfw_status ganfw_layer_fill(const ganfw_layer *l, const ganfw_exec *ex, int64_t n, void *x,
                              float v) {
  ganfw_op op = {.kind = GANFW_OP_FILL, .shape.d = {n}, .out = {x}, .sc = {v}};
  return ganfw_layer_op(l, ex, &op);
}

void ganfw_saved_clear(ganfw_saved *s) {
  for (int i = 0; i < GANFW_SAVED_MAX; i++) {
    ganfw_tensor_destroy(s->t[i]);
    s->t[i] = NULL;
  }
}

ganfw_tensor *ganfw_layer_tensor(ganfw_layer *l, const ganfw_exec *ex, int32_t dtype, int32_t ndim,
                                 const int64_t *shape, int32_t category) {
  return ganfw_tensor_create(ex->ctx, dtype, ndim, shape, category, l->qualified);
}

ganfw_tensor *ganfw_layer_workspace(ganfw_layer *l, const ganfw_exec *ex, size_t bytes,
                                    ganfw_status *st) {
  *st = GANFW_OK;
  if (bytes == 0) return NULL;
  int64_t n = (int64_t)bytes;
  ganfw_tensor *ws = ganfw_layer_tensor(l, ex, GANFW_DTYPE_U8, 1, &n, GANFW_MEM_WORKSPACE);
  if (!ws) *st = ganfw_error_code();
  return ws;
}

ganfw_status ganfw_layer_add_param(ganfw_layer *l, int32_t i, const char *suffix, int32_t ndim,
                                   const int64_t *shape) {
  ganfw_ctx *ctx = l->ctx;
  l->param_name[i] = ganfw_name_join(l->name, suffix);
  char *qualified = ganfw_name_join(l->qualified, suffix);
  if (!l->param_name[i] || !qualified) {
    free(qualified);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  l->param[i] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_PARAM, qualified);
  if (l->param[i])
    l->grad[i] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_GRAD, qualified);
  free(qualified);
  if (l->grad[i] && ctx->grads_deferred && ganfw_tensor_storage_release(l->grad[i]) != GANFW_OK)
    return ganfw_error_code();
  if (!l->param[i] || !l->grad[i])
    return ganfw_error_wrap(ganfw_error_code(), "allocating parameter %s", l->param_name[i]);
  if (i + 1 > l->nparams) l->nparams = i + 1;
  return GANFW_OK;
}

ganfw_status ganfw_layer_init_uniform(ganfw_layer *l, int64_t fan_in) {
  float bound = fan_in > 0 ? (float)(1.0 / sqrt((double)fan_in)) : 0.0f;
  for (int32_t i = 0; i < l->nparams; i++) {
    ganfw_status st =
        ganfw_ctx_rng_uniform(l->ctx, l->param[i]->numel, l->param[i]->data, -bound, bound);
    if (st != GANFW_OK)
      return ganfw_error_wrap(st, "layer %s: initialising %s", l->qualified, l->param_name[i]);
  }
  return GANFW_OK;
}
