/* A classifier model for tests/test_plugin_crash.c (ganfw_crashlayer.so) whose net has a
 * layer of its own: flatten, the identity layer "crashid", then linear to the classes. The
 * layer's forward writes to an unmapped address at its `crash_at_forward`-th call (a config
 * key; 0 never), so that a crash inside a plugin layer during a step can be seen named.
 * Input [N,C,H,W] from the data; output [N, classes]. */
#include <stdint.h>
#include <stdlib.h>

#include "ganfw/ganfw.h"

typedef struct tp_layer {
  const ganfw_host *host;
  int64_t calls, crash_at;
} tp_layer;

typedef struct tp_model {
  const ganfw_host *host;
  ganfw_net *net;
} tp_model;

/* An address in the first page, never mapped, unseen by the compiler and UBSan. */
static volatile uintptr_t tp_unmapped = 64;

static ganfw_status id_infer(void *state, const int64_t *in, int32_t in_ndim, int64_t *out,
                             int32_t *out_ndim) {
  (void)state;
  for (int32_t d = 0; d < in_ndim; d++) out[d] = in[d];
  *out_ndim = in_ndim;
  return GANFW_OK;
}

static ganfw_status id_forward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                               ganfw_tensor *y, ganfw_tensor **saved) {
  (void)saved;
  tp_layer *s = state;
  if (++s->calls == s->crash_at) *(volatile int *)tp_unmapped = 1;
  ganfw_tensor *xs = (ganfw_tensor *)x;
  return s->host->foreach_copy(call->ctx, &y, &xs, 1);
}

static ganfw_status id_backward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                const ganfw_tensor *y, ganfw_tensor *const *saved,
                                const ganfw_tensor *dy, ganfw_tensor *dx) {
  (void)x;
  (void)y;
  (void)saved;
  tp_layer *s = state;
  if (!dx) return GANFW_OK;
  ganfw_tensor *dys = (ganfw_tensor *)dy;
  return s->host->foreach_copy(call->ctx, &dx, &dys, 1);
}

static const ganfw_layer_def id_def = {
    .struct_size = sizeof(ganfw_layer_def),
    .type = "crashid",
    .infer = id_infer,
    .forward = id_forward,
    .backward = id_backward,
    .destroy = free,
};

static void tp_destroy(void *self) {
  tp_model *m = self;
  if (!m) return;
  if (m->net) m->host->net_destroy(m->net);
  free(m);
}

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_data_info *data, void **self) {
  int64_t crash_at = 0;
  ganfw_status st = host->cfg_int(cfg, "crash_at_forward", 0, &crash_at);
  if (st != GANFW_OK) return st;
  tp_model *m = calloc(1, sizeof *m);
  tp_layer *l = calloc(1, sizeof *l);
  if (!m || !l) {
    free(m);
    free(l);
    return host->error(ctx, GANFW_ERR_OOM, "crashlayer: out of host memory");
  }
  m->host = host;
  l->host = host;
  l->crash_at = crash_at;
  const int64_t features = (int64_t)data->channels * data->height * data->width;
  const int64_t classes = data->num_classes > 1 ? data->num_classes : 10;
  m->net = host->net_create(ctx, "classifier");
  st = m->net ? host->net_flatten(m->net, "flat") : GANFW_ERR_OOM;
  if (st == GANFW_OK)
    st = host->net_custom(m->net, "id", &id_def, l); /* takes l */
  else
    free(l);
  if (st == GANFW_OK) st = host->net_linear(m->net, "out", features, classes, 1);
  if (st == GANFW_OK) st = host->net_build(m->net, data->channels, data->height, data->width);
  if (st != GANFW_OK) {
    tp_destroy(m);
    return st;
  }
  *self = m;
  return GANFW_OK;
}

static ganfw_net *tp_net(void *self, const char *role) {
  tp_model *m = self;
  return role && role[0] == 'c' ? m->net : NULL; /* "classifier" */
}

static const ganfw_model_vt tp_vt = {
    .struct_size = sizeof(ganfw_model_vt),
    .kind = GANFW_VT_TAG_MODEL,
    .family = GANFW_MODEL_CLASSIFIER,
    .create = tp_create,
    .destroy = tp_destroy,
    .net = tp_net,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR,
      GANFW_ABI_MINOR,
      sizeof(ganfw_plugin_desc),
      GANFW_PLUGIN_MODEL,
      "crashlayer",
      "1.0.0",
      "a classifier whose own layer crashes when asked to",
      &tp_vt,
  };
  return &desc;
}
