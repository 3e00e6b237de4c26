/* A GAN written as a trainer plugin (ganfw_tpgan.so), over the nets "generator" and
 * "discriminator" of a GAN model (dcgan): PyTorch's DC-GAN step (D on real and on G(z)
 * detached, then G through D) with the non-saturating BCE losses, and a generator() that
 * maps noise [N, nz, 1, 1] to images, so that `ganfw sample` and `ganfw score` take a
 * trainer plugin's run as a GAN's. tests/test_fid.c trains and scores it. */
#include <stdlib.h>
#include <string.h>

#include "ganfw/ganfw.h"

typedef struct tpgan {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  const ganfw_step_api *api;
  int64_t nz;
} tpgan;

static ganfw_status tg_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_step_api *api, void **self) {
  *self = NULL;
  int64_t nz = 0;
  ganfw_status st = host->cfg_int(cfg, "nz", 100, &nz);
  if (st != GANFW_OK) return st;
  tpgan *t = calloc(1, sizeof *t);
  if (!t) return host->error(ctx, GANFW_ERR_OOM, "tpgan: out of host memory");
  *t = (tpgan){.host = host, .ctx = ctx, .api = api, .nz = nz};
  *self = t;
  return GANFW_OK;
}

static void tg_destroy(void *self) {
  free(self);
}

static int32_t tg_role(void *self, int32_t i, const char **name, uint32_t *flags) {
  (void)self;
  static const char *const roles[] = {"generator", "discriminator"};
  if (i < 0 || i > 1) return 0;
  *name = roles[i];
  *flags = 0;
  return 1;
}

static int32_t tg_scalar(void *self, int32_t i, const char **name) {
  (void)self;
  static const char *const names[] = {"loss_d", "loss_g"};
  if (i < 0 || i > 1) return 0;
  *name = names[i];
  return 1;
}

/* BCE with logits of D's output against `target` everywhere; *dlogits its gradient. */
static ganfw_status bce(tpgan *t, ganfw_step *st, ganfw_tensor *logits, float target,
                        const char *name, double *loss, ganfw_tensor **dlogits) {
  ganfw_tensor *tgt;
  ganfw_status s = t->api->tensor(st, logits->ndim, logits->shape, "target", &tgt);
  if (s == GANFW_OK) s = t->host->foreach_fill(t->ctx, &tgt, 1, target);
  if (s == GANFW_OK)
    s = t->api->loss(st, GANFW_LOSS_BCE_LOGITS, GANFW_REDUCE_MEAN, logits, tgt, 1.0, name, loss,
                     dlogits);
  return s;
}

static ganfw_status tg_step(void *self, ganfw_step *st) {
  tpgan *t = self;
  const ganfw_step_api *api = t->api;
  ganfw_net *g = api->net(st, "generator"), *d = api->net(st, "discriminator");
  ganfw_tensor *x = api->input(st, GANFW_INPUT_IMAGES), *z, *fake, *y, *dy, *dfake;
  const int64_t zs[4] = {x->shape[0], t->nz, 1, 1};
  double real, gen, lg;
  ganfw_status s;
  if ((s = api->phase(st, "D step")) || (s = api->normal(st, 4, zs, &z)) ||
      (s = api->forward(st, g, z, GANFW_FWD_NO_GRAD, &fake)) ||
      (s = api->forward(st, d, x, GANFW_FWD_TAPE, &y)) ||
      (s = bce(t, st, y, 1.0f, "loss_d_real", &real, &dy)) ||
      (s = api->backward(st, y, dy, GANFW_GRAD_PARAMS, NULL)) ||
      (s = api->forward(st, d, fake, GANFW_FWD_TAPE, &y)) ||
      (s = bce(t, st, y, 0.0f, "loss_d_fake", &gen, &dy)) ||
      (s = api->backward(st, y, dy, GANFW_GRAD_PARAMS, NULL)) ||
      (s = api->optimizer_step(st, "discriminator")))
    return s;
  if ((s = api->phase(st, "G step")) || (s = api->forward(st, g, z, GANFW_FWD_TAPE, &fake)) ||
      (s = api->forward(st, d, fake, GANFW_FWD_TAPE, &y)) ||
      (s = bce(t, st, y, 1.0f, "loss_g", &lg, &dy)) ||
      (s = api->backward(st, y, dy, GANFW_GRAD_INPUT, &dfake)) ||
      (s = api->backward(st, fake, dfake, GANFW_GRAD_PARAMS, NULL)) ||
      (s = api->optimizer_step(st, "generator")))
    return s;
  if ((s = api->report(st, "loss_d", real + gen))) return s;
  return api->report(st, "loss_g", lg);
}

/* 64 images from the fixed noise stream, 8 a row. */
static ganfw_status tg_sample(void *self, ganfw_step *st, ganfw_tensor **images, int64_t *nrow) {
  tpgan *t = self;
  const int64_t zs[4] = {64, t->nz, 1, 1};
  ganfw_tensor *z;
  ganfw_status s = t->api->normal(st, 4, zs, &z);
  if (s == GANFW_OK)
    s = t->api->forward(st, t->api->net(st, "generator"), z, GANFW_FWD_NO_GRAD, images);
  *nrow = 8;
  return s;
}

static const char *tg_generator(void *self, int64_t *latent) {
  *latent = ((tpgan *)self)->nz;
  return "generator";
}

static const ganfw_config_key keys[] = {
    {"nz", GANFW_KEY_INT, 0, 100, 0, NULL, NULL, "latent size (the dcgan model's model.nz)"},
};
static const ganfw_config_keys key_table = {keys, sizeof keys / sizeof keys[0]};

static const void *tg_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &key_table : NULL;
}

static const ganfw_trainer_vt tg_vt = {
    .struct_size = sizeof(ganfw_trainer_vt),
    .kind = GANFW_VT_TAG_TRAINER,
    .create = tg_create,
    .destroy = tg_destroy,
    .role = tg_role,
    .scalar = tg_scalar,
    .step = tg_step,
    .sample = tg_sample,
    .generator = tg_generator,
    .get_extension = tg_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_TRAINER,
      .name = "tpgan",
      .version = "1.0.0",
      .description = "a DC-GAN step as a trainer plugin, with a generator() (tests)",
      .vtable = &tg_vt,
  };
  return &desc;
}
