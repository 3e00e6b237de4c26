/* pixelnorm_gan: an example third-party GAN model plugin (ganfw_pixelnorm_gan.so) whose
 * generator uses a layer the core does not have, ProGAN's pixel normalisation
 * (pixelnorm.c, appended with host->net_custom), after every convolution as ProGAN does. For
 * images [C,H,W] with H and W divisible by 4:
 *   G: z [N,nz,1,1] -> flatten -> fc: Linear(nz, 2*ngf*H/4*W/4) -> reshape [2ngf,H/4,W/4]
 *      -> pn0 -> LeakyReLU(0.2) -> up1: Upsample(2) -> conv1: Conv3x3(2ngf, ngf) -> pn1
 *      -> LeakyReLU -> up2: Upsample(2) -> conv2: Conv3x3(ngf, ngf) -> pn2 -> LeakyReLU
 *      -> to_img: Conv3x3(ngf, C) -> Tanh
 *   D: conv1: Conv4x4/2(C, ndf) -> LeakyReLU -> conv2: Conv4x4/2(ndf, 2ndf) -> LeakyReLU
 *      -> flatten -> fc: Linear(2ndf*H/4*W/4, 1)                              (a logit)
 * Keys: model.nz (64), ngf (32), ndf (32), eps (1e-8, ProGAN's), affine (false: with true
 * each pixelnorm gets a per-channel weight and bias, "generator.pn1.weight", ...). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#include "pixelnorm.h"

#define PNG_LEAKY_SLOPE 0.2f
#define PNG_MAX_WIDTH   4096

typedef struct pn_gan {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  int64_t nz, ngf, ndf;
  double eps;
  int32_t affine;
  int64_t channels, height, width;
  ganfw_net *g, *d;
} pn_gan;

static void pn_gan_destroy(void *self) {
  pn_gan *m = self;
  if (!m) return;
  m->host->net_destroy(m->g);
  m->host->net_destroy(m->d);
  free(m);
}

/* A pixelnorm over `channels` named `name`: its state goes to the net with it. */
static ganfw_status add_pixelnorm(pn_gan *m, const char *name, int64_t channels) {
  void *state = pixelnorm_state_create(m->host, m->ctx, channels, (float)m->eps, m->affine);
  if (!state) return GANFW_ERR_OOM;
  return m->host->net_custom(m->g, name, pixelnorm_def(), state);
}

static ganfw_status build_generator(pn_gan *m) {
  const ganfw_host *h = m->host;
  ganfw_net *g = m->g;
  const int64_t h4 = m->height / 4, w4 = m->width / 4, c0 = 2 * m->ngf;
  ganfw_status st = h->net_flatten(g, "flatten");
  if (!st) st = h->net_linear(g, "fc", m->nz, c0 * h4 * w4, 1);
  if (!st) st = h->net_reshape(g, "unflatten", c0, h4, w4);
  if (!st) st = add_pixelnorm(m, "pn0", c0);
  if (!st) st = h->net_activation(g, "act0", GANFW_ACT_LEAKY_RELU, PNG_LEAKY_SLOPE);
  if (!st) st = h->net_upsample(g, "up1", 2, GANFW_UPSAMPLE_NEAREST);
  if (!st) st = h->net_conv2d(g, "conv1", c0, m->ngf, 3, 1, 1, 1);
  if (!st) st = add_pixelnorm(m, "pn1", m->ngf);
  if (!st) st = h->net_activation(g, "act1", GANFW_ACT_LEAKY_RELU, PNG_LEAKY_SLOPE);
  if (!st) st = h->net_upsample(g, "up2", 2, GANFW_UPSAMPLE_NEAREST);
  if (!st) st = h->net_conv2d(g, "conv2", m->ngf, m->ngf, 3, 1, 1, 1);
  if (!st) st = add_pixelnorm(m, "pn2", m->ngf);
  if (!st) st = h->net_activation(g, "act2", GANFW_ACT_LEAKY_RELU, PNG_LEAKY_SLOPE);
  if (!st) st = h->net_conv2d(g, "to_img", m->ngf, m->channels, 3, 1, 1, 1);
  if (!st) st = h->net_activation(g, "tanh", GANFW_ACT_TANH, 0.0f);
  if (!st) st = h->net_build(g, m->nz, 1, 1);
  return st;
}

static ganfw_status build_discriminator(pn_gan *m) {
  const ganfw_host *h = m->host;
  ganfw_net *d = m->d;
  const int64_t feat = 2 * m->ndf * (m->height / 4) * (m->width / 4);
  ganfw_status st = h->net_conv2d(d, "conv1", m->channels, m->ndf, 4, 2, 1, 1);
  if (!st) st = h->net_activation(d, "act1", GANFW_ACT_LEAKY_RELU, PNG_LEAKY_SLOPE);
  if (!st) st = h->net_conv2d(d, "conv2", m->ndf, 2 * m->ndf, 4, 2, 1, 1);
  if (!st) st = h->net_activation(d, "act2", GANFW_ACT_LEAKY_RELU, PNG_LEAKY_SLOPE);
  if (!st) st = h->net_flatten(d, "flatten");
  if (!st) st = h->net_linear(d, "fc", feat, 1, 1);
  if (!st) st = h->net_build(d, m->channels, m->height, m->width);
  return st;
}

static ganfw_status read_config(pn_gan *m, const ganfw_cfg *cfg, const ganfw_data_info *data) {
  const ganfw_host *h = m->host;
  ganfw_status st;
  if ((st = h->cfg_int(cfg, "nz", 64, &m->nz)) || (st = h->cfg_int(cfg, "ngf", 32, &m->ngf)) ||
      (st = h->cfg_int(cfg, "ndf", 32, &m->ndf)) ||
      (st = h->cfg_float(cfg, "eps", 1e-8, &m->eps)) ||
      (st = h->cfg_bool(cfg, "affine", 0, &m->affine)))
    return st;
  const struct {
    const char *key;
    int64_t v;
  } widths[] = {{"nz", m->nz}, {"ngf", m->ngf}, {"ndf", m->ndf}};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
    if (widths[i].v < 1 || widths[i].v > PNG_MAX_WIDTH)
      return h->error(m->ctx, GANFW_ERR_CONFIG,
                      "pixelnorm_gan: model.%s is %lld; it must be a whole number between 1 and "
                      "%d",
                      widths[i].key, (long long)widths[i].v, PNG_MAX_WIDTH);
  if (!(m->eps > 0 && m->eps < 1))
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "pixelnorm_gan: model.eps is %g; it must lie in (0, 1) (ProGAN uses 1e-8)",
                    m->eps);
  const size_t need = offsetof(ganfw_data_info, width) + sizeof data->width;
  if (!data || data->struct_size < need)
    return h->error(m->ctx, GANFW_ERR_PLUGIN,
                    "pixelnorm_gan: the core passed no data shape; use a ganfw core of ABI "
                    "%d.%d or later",
                    GANFW_ABI_MAJOR, GANFW_ABI_MINOR);
  m->channels = data->channels, m->height = data->height, m->width = data->width;
  if (m->channels < 1 || m->height < 4 || m->width < 4 || m->height % 4 || m->width % 4)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "pixelnorm_gan: the data set's images are [%lld,%lld,%lld] (C,H,W); this "
                    "model needs H and W divisible by 4 (resize them in the data section)",
                    (long long)m->channels, (long long)m->height, (long long)m->width);
  return GANFW_OK;
}

static ganfw_status pn_gan_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                  const ganfw_data_info *data, void **self) {
  *self = NULL;
  if (!GANFW_HOST_HAS(host, layer_add_buffer))
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "pixelnorm_gan: this core cannot run layers from plugins (host table ABI "
                       "%u.%u); use a ganfw core of ABI 1.3 or later",
                       (unsigned)host->abi_major, (unsigned)host->abi_minor);
  pn_gan *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "pixelnorm_gan: out of host memory");
  m->host = host;
  m->ctx = ctx;
  ganfw_status st = read_config(m, cfg, data);
  if (st == GANFW_OK) {
    m->g = host->net_create(ctx, "generator");
    m->d = m->g ? host->net_create(ctx, "discriminator") : NULL;
    if (!m->g || !m->d) st = GANFW_ERR_OOM; /* the core recorded the message */
  }
  if (st == GANFW_OK) st = build_generator(m);
  if (st == GANFW_OK) st = build_discriminator(m);
  if (st != GANFW_OK) {
    pn_gan_destroy(m);
    return st;
  }
  host->log(ctx, GANFW_LOG_INFO,
            "pixelnorm_gan: nz %lld, ngf %lld, ndf %lld, pixelnorm eps %g%s, images "
            "[%lld,%lld,%lld]",
            (long long)m->nz, (long long)m->ngf, (long long)m->ndf, m->eps,
            m->affine ? " affine" : "", (long long)m->channels, (long long)m->height,
            (long long)m->width);
  *self = m;
  return GANFW_OK;
}

static ganfw_net *pn_gan_net(void *self, const char *role) {
  pn_gan *m = self;
  if (!role) return NULL;
  if (strcmp(role, "generator") == 0) return m->g;
  if (strcmp(role, "discriminator") == 0) return m->d;
  return NULL;
}

static int64_t pn_gan_latent_dim(void *self) {
  return ((const pn_gan *)self)->nz;
}

static const ganfw_model_vt pn_gan_vt = {
    .struct_size = sizeof(ganfw_model_vt),
    .kind = GANFW_VT_TAG_MODEL,
    .family = GANFW_MODEL_GAN,
    .create = pn_gan_create,
    .destroy = pn_gan_destroy,
    .net = pn_gan_net,
    .latent_dim = pn_gan_latent_dim,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MODEL,
      .name = "pixelnorm_gan",
      .version = "1.0.0",
      .description = "example GAN with ProGAN's pixel normalisation as a plugin layer "
                     "(out-of-tree plugin)",
      .vtable = &pn_gan_vt,
  };
  return &desc;
}
