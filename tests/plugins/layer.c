/* A layer plugin for tests/test_net_insert.c (ganfw_tplayer.so): y = factor * x on any
 * shape, dx = factor * dy, no parameters and no tensors of its own. Its item keys: `factor`
 * (1.0). The number of states it made and freed is kept for the test to read through the
 * extension "ganfw.test.tplayer/1". */
#include <string.h>

#include "ganfw/ganfw.h"

typedef struct tp_state {
  const ganfw_host *host;
  double factor;
} tp_state;

/* What the test reads: states made by create and freed by def's destroy. */
typedef struct tp_counts {
  int64_t made, freed;
} tp_counts;

static tp_counts counts;
static tp_state states[64];

static ganfw_status tp_infer(void *state, const int64_t *in, int32_t in_ndim, int64_t *out,
                             int32_t *out_ndim) {
  (void)state;
  for (int32_t d = 0; d < in_ndim; d++) out[d] = in[d];
  *out_ndim = in_ndim;
  return GANFW_OK;
}

static ganfw_status tp_forward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                               ganfw_tensor *y, ganfw_tensor **saved) {
  const tp_state *s = state;
  (void)saved;
  return s->host->tensor_mul_scalar(call->ctx, y, x, (float)s->factor);
}

static ganfw_status tp_backward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                const ganfw_tensor *y, ganfw_tensor *const *saved,
                                const ganfw_tensor *dy, ganfw_tensor *dx) {
  const tp_state *s = state;
  (void)x, (void)y, (void)saved;
  return dx ? s->host->tensor_mul_scalar(call->ctx, dx, dy, (float)s->factor) : GANFW_OK;
}

static void tp_destroy(void *state) {
  (void)state;
  counts.freed++;
}

static const ganfw_layer_def tp_def_v = {
    .struct_size = sizeof(ganfw_layer_def),
    .type = "tplayer",
    .infer = tp_infer,
    .forward = tp_forward,
    .backward = tp_backward,
    .destroy = tp_destroy,
};

static const ganfw_layer_def *tp_def(void) {
  return &tp_def_v;
}

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              void **state) {
  *state = NULL;
  if (counts.made >= (int64_t)(sizeof states / sizeof states[0]))
    return host->error(ctx, GANFW_ERR_OOM, "tplayer: too many instances");
  tp_state *s = &states[counts.made];
  s->host = host;
  ganfw_status st = host->cfg_float(cfg, "factor", 1.0, &s->factor);
  if (st != GANFW_OK) return st;
  counts.made++;
  *state = s;
  return GANFW_OK;
}

static const void *tp_get_extension(const char *id) {
  return strcmp(id, "ganfw.test.tplayer/1") == 0 ? &counts : NULL;
}

static const ganfw_layer_plugin_vt tp_vt = {
    .struct_size = sizeof(ganfw_layer_plugin_vt),
    .kind = GANFW_VT_TAG_LAYER,
    .def = tp_def,
    .create = tp_create,
    .get_extension = tp_get_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {GANFW_ABI_MAJOR,
                                         GANFW_ABI_MINOR,
                                         sizeof desc,
                                         GANFW_PLUGIN_LAYER,
                                         "tplayer",
                                         "1.0.0",
                                         "test layer: y = factor * x",
                                         &tp_vt};
  return &desc;
}
