/* A minimal valid model plugin for the plugin-host tests (ganfw_tpmodel.so): a GAN-family
 * model whose create reads `latent_dim` from its config section. It builds no nets, so every
 * role lookup yields NULL; the suite only loads it and calls through its vtable. */
#include <stdlib.h>

#include "ganfw/ganfw.h"

/* tests/plugins.cmake also builds variants: another version, a family the host refuses. */
#ifndef TP_VERSION
#define TP_VERSION "1.0.0"
#endif
#ifndef TP_NAME
#define TP_NAME "tpmodel"
#endif
#ifndef TP_FAMILY
#define TP_FAMILY GANFW_MODEL_GAN
#endif

typedef struct tp_model {
  int64_t latent_dim;
} tp_model;

/* External linkage but hidden visibility: the suite checks that dlsym cannot see it. */
int64_t tp_model_internal_latent(const tp_model *m) {
  return m->latent_dim;
}

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_data_info *data, void **self) {
  tp_model *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "tpmodel: out of host memory");
  ganfw_status st = host->cfg_int(cfg, "latent_dim", 100, &m->latent_dim);
  if (st != GANFW_OK) {
    free(m);
    return st;
  }
  *self = m;
  return GANFW_OK;
}

static void tp_destroy(void *self) {
  free(self);
}

static ganfw_net *tp_net(void *self, const char *role) {
  return NULL;
}

static int64_t tp_latent_dim(void *self) {
  return tp_model_internal_latent(self);
}

static const ganfw_model_vt tp_vt = {
    sizeof(ganfw_model_vt), TP_FAMILY,          tp_create, tp_destroy, tp_net,
    tp_latent_dim,          GANFW_VT_TAG_MODEL, 0,         NULL,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR, GANFW_ABI_MINOR, sizeof(ganfw_plugin_desc),        GANFW_PLUGIN_MODEL,
      TP_NAME,         TP_VERSION,      "test model that builds no nets", &tp_vt,
  };
  return &desc;
}
