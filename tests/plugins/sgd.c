/* A minimal valid optimizer plugin for the plugin-host tests (ganfw_tpsgd.so): plain SGD,
 * value -= lr * (grad + weight_decay * value), written only with the host's foreach_axpy so
 * that it runs on any backend. Parameters are f32 tensors of any shape. */
#include <stdlib.h>

#include "ganfw/ganfw.h"

typedef struct tp_sgd {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  ganfw_tensor **values; /* params[i].value, borrowed from the core */
  ganfw_tensor **grads;  /* params[i].grad, borrowed from the core */
  int64_t n;
  double weight_decay;
  int64_t steps;
} tp_sgd;

static void tp_destroy(void *self) {
  tp_sgd *o = self;
  if (!o) return;
  free(o->values);
  free(o->grads);
  free(o);
}

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_param *params, int64_t n, void **self) {
  tp_sgd *o = calloc(1, sizeof *o);
  if (!o) return host->error(ctx, GANFW_ERR_OOM, "tpsgd: out of host memory");
  o->host = host;
  o->ctx = ctx;
  o->n = n;
  o->values = calloc((size_t)(n > 0 ? n : 1), sizeof *o->values);
  o->grads = calloc((size_t)(n > 0 ? n : 1), sizeof *o->grads);
  if (!o->values || !o->grads) {
    tp_destroy(o);
    return host->error(ctx, GANFW_ERR_OOM, "tpsgd: out of host memory");
  }
  for (int64_t i = 0; i < n; i++) {
    o->values[i] = params[i].value;
    o->grads[i] = params[i].grad;
  }
  ganfw_status st = host->cfg_float(cfg, "weight_decay", 0.0, &o->weight_decay);
  if (st != GANFW_OK) {
    tp_destroy(o);
    return st;
  }
  *self = o;
  return GANFW_OK;
}

static ganfw_status tp_step(void *self, double lr) {
  tp_sgd *o = self;
  ganfw_status st = GANFW_OK;
  if (o->weight_decay != 0.0) /* grad += wd * value */
    st = o->host->foreach_axpy(o->ctx, o->grads, (float)o->weight_decay, o->values, o->n);
  if (st == GANFW_OK) /* value -= lr * grad */
    st = o->host->foreach_axpy(o->ctx, o->values, (float)-lr, o->grads, o->n);
  if (st == GANFW_OK) o->steps++;
  return st;
}

static int64_t tp_get_step(void *self) {
  return ((const tp_sgd *)self)->steps;
}

static void tp_set_step(void *self, int64_t step) {
  ((tp_sgd *)self)->steps = step;
}

static const ganfw_optim_vt tp_vt = {
    sizeof(ganfw_optim_vt),
    GANFW_VT_TAG_OPTIM,
    tp_create,
    tp_destroy,
    tp_step,
    NULL,
    tp_get_step,
    tp_set_step,
    NULL,
    NULL, /* step_begin, step_param, step_end (ABI 1.10): absent */
    NULL,
    NULL,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR, GANFW_ABI_MINOR, sizeof(ganfw_plugin_desc),    GANFW_PLUGIN_OPTIM,
      "tpsgd",         "1.0.0",         "test SGD with weight decay", &tp_vt,
  };
  return &desc;
}
