/* A memory-strategy test plugin for tests/test_nonfinite.c (ganfw_tpnan.so): it makes one
 * layer go non-finite at a known step, so that train.on_nonfinite can be checked against
 * the step, net and layer it must name. Config (one item of `memory:`):
 *   net: generator | discriminator | classifier   the net to poison
 *   layer: main.2       the layer (its parameters are "<layer>.weight", "<layer>.bias")
 *   at_step: 4          the 1-based training step that goes non-finite
 *   poison: weight      weight: the layer's weight holds `value` during that step (set at the
 *                       end of the step before, put back at the end of that step), so its
 *                       forward output goes non-finite; grad: its parameter gradients are
 *                       set to `value` after backward, before the optimizer step
 *   value: "nan"        "nan", "inf" or a number (e.g. 1e38: finite weights whose output
 *                       overflows)
 * It has no loss_scale, so the core treats the run as one without a loss scaler. */
#include <stdlib.h>
#include <string.h>

#include "ganfw/ganfw.h"

typedef struct tp_nan {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  const char *net_role, *layer;
  int64_t at_step, done; /* done: steps ended so far */
  int32_t poison_grad;
  float value;
  ganfw_net *net;
  ganfw_tensor *weight, *saved; /* the poisoned weight and its values before */
} tp_nan;

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              void **self) {
  tp_nan *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "tpnan: out of host memory");
  const char *poison = NULL, *value = NULL;
  ganfw_status st;
  if ((st = host->cfg_string(cfg, "net", "discriminator", &m->net_role)) ||
      (st = host->cfg_string(cfg, "layer", "main.0", &m->layer)) ||
      (st = host->cfg_int(cfg, "at_step", 1, &m->at_step)) ||
      (st = host->cfg_string(cfg, "poison", "weight", &poison)) ||
      (st = host->cfg_string(cfg, "value", "nan", &value))) {
    free(m);
    return st;
  }
  if (m->at_step < 1 || !poison || (strcmp(poison, "weight") && strcmp(poison, "grad"))) {
    free(m);
    return host->error(ctx, GANFW_ERR_CONFIG, "tpnan: at_step >= 1 and poison weight|grad");
  }
  m->host = host;
  m->ctx = ctx;
  m->poison_grad = strcmp(poison, "grad") == 0;
  m->value = strtof(value ? value : "nan", NULL);
  *self = m;
  return GANFW_OK;
}

static void tp_destroy(void *self) {
  tp_nan *m = self;
  if (!m) return;
  m->host->tensor_destroy(m->saved);
  free(m);
}

static ganfw_status tp_configure(void *self, ganfw_exec_options *opts) {
  (void)self;
  (void)opts;
  return GANFW_OK;
}

/* 1 when the parameter `name` belongs to the layer: "<layer>." followed by anything. */
static int of_layer(const tp_nan *m, const char *name) {
  size_t n = strlen(m->layer);
  return strncmp(name, m->layer, n) == 0 && name[n] == '.';
}

static ganfw_status tp_configure_net(void *self, const char *role, ganfw_net *net) {
  tp_nan *m = self;
  if (strcmp(role, m->net_role) != 0) return GANFW_OK;
  m->net = net;
  return GANFW_OK;
}

static int32_t opt_of(const tp_nan *m) {
  return strcmp(m->net_role, "discriminator") == 0 ? 1 : 0;
}

static ganfw_status tp_after_backward(void *self, int32_t opt, const ganfw_param *params, int64_t n,
                                      int32_t *skip_step) {
  tp_nan *m = self;
  (void)skip_step;
  if (!m->poison_grad || opt != opt_of(m) || m->done + 1 != m->at_step) return GANFW_OK;
  for (int64_t i = 0; i < n; i++)
    if (params[i].grad && of_layer(m, params[i].name)) {
      ganfw_status st = m->host->foreach_fill(m->ctx, &params[i].grad, 1, m->value);
      if (st != GANFW_OK) return st;
    }
  return GANFW_OK;
}

/* The layer's weight of the poisoned net (borrowed), or NULL. */
static ganfw_tensor *find_weight(tp_nan *m) {
  if (!m->net) return NULL;
  for (int64_t i = 0; i < m->host->net_param_count(m->net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    if (m->host->net_param_info(m->net, i, &info) != GANFW_OK) return NULL;
    size_t n = strlen(m->layer);
    if (of_layer(m, info.name) && strcmp(info.name + n, ".weight") == 0) return info.value;
  }
  return NULL;
}

static ganfw_status tp_step_end(void *self) {
  tp_nan *m = self;
  m->done++;
  if (m->poison_grad) return GANFW_OK;
  ganfw_status st = GANFW_OK;
  if (m->done + 1 == m->at_step) { /* the next step runs with the poisoned weight */
    if (!(m->weight = find_weight(m)))
      return m->host->error(m->ctx, GANFW_ERR_CONFIG, "tpnan: no weight of layer %s in the %s",
                            m->layer, m->net_role);
    m->saved = m->host->tensor_create(m->ctx, GANFW_DTYPE_F32, m->weight->ndim, m->weight->shape,
                                      GANFW_MEM_OTHER, "tpnan.saved");
    if (!m->saved) return GANFW_ERR_OOM;
    if ((st = m->host->foreach_copy(m->ctx, &m->saved, &m->weight, 1)) == GANFW_OK)
      st = m->host->foreach_fill(m->ctx, &m->weight, 1, m->value);
  } else if (m->done == m->at_step && m->saved) { /* that step is over: the weight again */
    st = m->host->foreach_copy(m->ctx, &m->weight, &m->saved, 1);
    m->host->tensor_destroy(m->saved);
    m->saved = NULL;
  }
  return st;
}

static const ganfw_memory_vt tp_vt = {
    .struct_size = sizeof(ganfw_memory_vt),
    .kind = GANFW_VT_TAG_MEMORY,
    .create = tp_create,
    .destroy = tp_destroy,
    .configure = tp_configure,
    .configure_net = tp_configure_net,
    .after_backward = tp_after_backward,
    .step_end = tp_step_end,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR,
      GANFW_ABI_MINOR,
      sizeof(ganfw_plugin_desc),
      GANFW_PLUGIN_MEMORY,
      "tpnan",
      "1.0.0",
      "test: a NaN at a known layer and step",
      &tp_vt,
  };
  return &desc;
}
