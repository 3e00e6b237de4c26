/* Two builds of one optimizer plugin for tests/test_dist.c (ganfw_tpdrift.so, built twice by
 * tests/plugins.cmake into tests/plugins/drift_a and drift_b): plain SGD whose step is
 * scaled by TP_LR_SCALE, which the builds set differently, as two nodes with different
 * versions of one plugin's source would have. Under the same config the ranks would update
 * the same weights by different amounts and drift apart; the start-up check refuses them. */
#include <stdlib.h>

#include "ganfw/ganfw.h"

#ifndef TP_LR_SCALE
#error "tests/plugins.cmake defines TP_LR_SCALE, the build's scale of the learning rate"
#endif

typedef struct tp_drift {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  ganfw_tensor **values; /* params[i].value, borrowed from the core */
  ganfw_tensor **grads;  /* params[i].grad, borrowed from the core */
  int64_t n, steps;
} tp_drift;

static void tp_destroy(void *self) {
  tp_drift *o = self;
  if (!o) return;
  free(o->values);
  free(o->grads);
  free(o);
}

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_param *params, int64_t n, void **self) {
  (void)cfg;
  tp_drift *o = calloc(1, sizeof *o);
  if (o) {
    o->values = calloc((size_t)(n > 0 ? n : 1), sizeof *o->values);
    o->grads = calloc((size_t)(n > 0 ? n : 1), sizeof *o->grads);
  }
  if (!o || !o->values || !o->grads) {
    tp_destroy(o);
    return host->error(ctx, GANFW_ERR_OOM, "tpdrift: out of host memory");
  }
  o->host = host;
  o->ctx = ctx;
  o->n = n;
  for (int64_t i = 0; i < n; i++) {
    o->values[i] = params[i].value;
    o->grads[i] = params[i].grad;
  }
  *self = o;
  return GANFW_OK;
}

static ganfw_status tp_step(void *self, double lr) {
  tp_drift *o = self;
  ganfw_status st = o->host->foreach_axpy(o->ctx, o->values, (float)(-lr * TP_LR_SCALE), o->grads,
                                          o->n); /* value -= lr * scale * grad */
  if (st == GANFW_OK) o->steps++;
  return st;
}

static int64_t tp_get_step(void *self) {
  return ((const tp_drift *)self)->steps;
}

static void tp_set_step(void *self, int64_t step) {
  ((tp_drift *)self)->steps = step;
}

static const ganfw_optim_vt tp_vt = {
    .struct_size = sizeof(ganfw_optim_vt),
    .kind = GANFW_VT_TAG_OPTIM,
    .create = tp_create,
    .destroy = tp_destroy,
    .step = tp_step,
    .get_step = tp_get_step,
    .set_step = tp_set_step,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR, GANFW_ABI_MINOR, sizeof(ganfw_plugin_desc), GANFW_PLUGIN_OPTIM,
      "tpdrift",       "1.0.0",         "test SGD, two builds",    &tp_vt,
  };
  return &desc;
}
