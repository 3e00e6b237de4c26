/* A model plugin built against the frozen ABI 1.0 headers: a GAN-family model with one
 * linear generator and one linear discriminator built through the 1.0 host table (net
 * entries, net_param_info with the 1.0 ganfw_param_info). Its vtable ends at latent_dim:
 * the 1.1 members (kind, get_extension) must read as absent. */
#include <stdlib.h>
#include <string.h>

#include "ganfw/ganfw.h"

/* OLD_TODAY: the same source built against today's headers (tests/abi10/abi10.cmake): a
 * 1.x plugin's source must rebuild and run unchanged against any later 1.y. */
#if GANFW_ABI_MINOR != 0 && !defined(OLD_TODAY)
#error "tests/abi10 plugins must be built against the frozen ABI 1.0 headers"
#endif

typedef struct old_model {
  const ganfw_host *host;
  ganfw_net *g, *d;
  int64_t nz;
} old_model;

static void om_destroy(void *self) {
  old_model *m = self;
  if (!m) return;
  m->host->net_destroy(m->g);
  m->host->net_destroy(m->d);
  free(m);
}

static ganfw_status om_create(const ganfw_host *h, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_data_info *data, void **self) {
  old_model *m = calloc(1, sizeof *m);
  if (!m) return h->error(ctx, GANFW_ERR_OOM, "old_model: out of host memory");
  m->host = h;
  ganfw_status st = h->cfg_int(cfg, "latent_dim", 4, &m->nz);
  int64_t pixels = (int64_t)data->channels * data->height * data->width;
  if (st == GANFW_OK && !(m->g = h->net_create(ctx, "generator"))) st = GANFW_ERR_OOM;
  if (st == GANFW_OK && !(m->d = h->net_create(ctx, "discriminator"))) st = GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->net_flatten(m->g, "flat");
  if (st == GANFW_OK) st = h->net_linear(m->g, "fc", m->nz, pixels, 1);
  if (st == GANFW_OK) st = h->net_reshape(m->g, "view", data->channels, data->height, data->width);
  if (st == GANFW_OK) st = h->net_build(m->g, m->nz, 1, 1);
  if (st == GANFW_OK) st = h->net_flatten(m->d, "flat");
  if (st == GANFW_OK) st = h->net_linear(m->d, "fc", pixels, 1, 1);
  if (st == GANFW_OK) st = h->net_build(m->d, data->channels, data->height, data->width);
  /* The 1.0 ganfw_param_info, as a 1.0 plugin fills it. */
  for (int64_t i = 0; st == GANFW_OK && i < h->net_param_count(m->g); i++) {
    ganfw_param_info info = {sizeof info, 0, NULL, NULL, NULL, NULL};
    st = h->net_param_info(m->g, i, &info);
    if (st == GANFW_OK && (!info.name || !info.value)) st = GANFW_ERR_INTERNAL;
  }
  if (st != GANFW_OK) {
    om_destroy(m);
    return st;
  }
  *self = m;
  return GANFW_OK;
}

static ganfw_net *om_net(void *self, const char *role) {
  old_model *m = self;
  if (strcmp(role, "generator") == 0) return m->g;
  if (strcmp(role, "discriminator") == 0) return m->d;
  return NULL;
}

static int64_t om_latent_dim(void *self) {
  return ((old_model *)self)->nz;
}

static const ganfw_model_vt om_vt = {
    sizeof(ganfw_model_vt), GANFW_MODEL_GAN, om_create, om_destroy, om_net, om_latent_dim,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR, GANFW_ABI_MINOR, sizeof(ganfw_plugin_desc), GANFW_PLUGIN_MODEL,
      "old_model",     "1.0.0",         "ABI 1.0 linear GAN",      &om_vt,
  };
  return &desc;
}
