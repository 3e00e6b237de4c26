/* mlp_gan: an example third-party GAN model plugin (ganfw_mlp_gan.so), built only against
 * the installed ganfw headers. G maps a latent [N,nz,1,1] through three linear layers to an
 * image [N,C,H,W] in [-1,1] (Tanh); D maps an image through three linear layers to a logit
 * [N,1] (no Sigmoid: the trainer uses BCE-with-logits). C, H, W come from the data set. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#define MLP_GAN_LEAKY_SLOPE 0.2f
#define MLP_GAN_MAX_WIDTH   65536 /* upper bound for model.nz and model.hidden */

typedef struct mlp_gan {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  int64_t nz, hidden;
  int64_t channels, height, width;
  ganfw_net *g, *d;
} mlp_gan;

static void mlp_gan_destroy(void *self) {
  mlp_gan *m = self;
  if (!m) return;
  m->host->net_destroy(m->g);
  m->host->net_destroy(m->d);
  free(m);
}

/* Generator: flatten [N,nz,1,1] -> [N,nz], then main = Linear(nz, hidden) ReLU
 * Linear(hidden, hidden) ReLU Linear(hidden, C*H*W) Tanh, then reshape to [N,C,H,W].
 * Parameters are main.0, main.2 and main.4 (weight, bias), as in a PyTorch nn.Sequential. */
static ganfw_status build_generator(mlp_gan *m) {
  const ganfw_host *h = m->host;
  ganfw_net *g = m->g;
  const int64_t pixels = m->channels * m->height * m->width;
  ganfw_status st = h->net_flatten(g, "flatten");
  if (!st) st = h->net_linear(g, "main.0", m->nz, m->hidden, 1);
  if (!st) st = h->net_activation(g, "main.1", GANFW_ACT_RELU, 0.0f);
  if (!st) st = h->net_linear(g, "main.2", m->hidden, m->hidden, 1);
  if (!st) st = h->net_activation(g, "main.3", GANFW_ACT_RELU, 0.0f);
  if (!st) st = h->net_linear(g, "main.4", m->hidden, pixels, 1);
  if (!st) st = h->net_activation(g, "main.5", GANFW_ACT_TANH, 0.0f);
  if (!st) st = h->net_reshape(g, "unflatten", m->channels, m->height, m->width);
  if (!st) st = h->net_build(g, m->nz, 1, 1);
  return st;
}

/* Discriminator: flatten [N,C,H,W] -> [N,C*H*W], then main = Linear(C*H*W, hidden)
 * LeakyReLU(0.2) Linear(hidden, hidden) LeakyReLU(0.2) Linear(hidden, 1) -> logits [N,1]. */
static ganfw_status build_discriminator(mlp_gan *m) {
  const ganfw_host *h = m->host;
  ganfw_net *d = m->d;
  const int64_t pixels = m->channels * m->height * m->width;
  ganfw_status st = h->net_flatten(d, "flatten");
  if (!st) st = h->net_linear(d, "main.0", pixels, m->hidden, 1);
  if (!st) st = h->net_activation(d, "main.1", GANFW_ACT_LEAKY_RELU, MLP_GAN_LEAKY_SLOPE);
  if (!st) st = h->net_linear(d, "main.2", m->hidden, m->hidden, 1);
  if (!st) st = h->net_activation(d, "main.3", GANFW_ACT_LEAKY_RELU, MLP_GAN_LEAKY_SLOPE);
  if (!st) st = h->net_linear(d, "main.4", m->hidden, 1, 1);
  if (!st) st = h->net_build(d, m->channels, m->height, m->width);
  return st;
}

/* Reads model.nz and model.hidden, and the image shape from the data set. */
static ganfw_status read_config(mlp_gan *m, const ganfw_cfg *cfg, const ganfw_data_info *data) {
  const ganfw_host *h = m->host;
  ganfw_status st;
  if ((st = h->cfg_int(cfg, "nz", 64, &m->nz)) != GANFW_OK) return st;
  if ((st = h->cfg_int(cfg, "hidden", 256, &m->hidden)) != GANFW_OK) return st;
  const struct {
    const char *key;
    int64_t v;
  } widths[] = {{"nz", m->nz}, {"hidden", m->hidden}};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
    if (widths[i].v < 1 || widths[i].v > MLP_GAN_MAX_WIDTH)
      return h->error(m->ctx, GANFW_ERR_CONFIG,
                      "mlp_gan: model.%s is %lld; it must be a whole number between 1 and %d",
                      widths[i].key, (long long)widths[i].v, MLP_GAN_MAX_WIDTH);

  const size_t need = offsetof(ganfw_data_info, width) + sizeof data->width;
  if (!data || data->struct_size < need)
    return h->error(m->ctx, GANFW_ERR_PLUGIN,
                    "mlp_gan: the core passed no data shape; use a ganfw core of ABI %d.%d or "
                    "later",
                    GANFW_ABI_MAJOR, GANFW_ABI_MINOR);
  m->channels = data->channels;
  m->height = data->height;
  m->width = data->width;
  if (m->channels < 1 || m->height < 1 || m->width < 1)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "mlp_gan: the data set's images are [%lld,%lld,%lld] (C,H,W); every "
                    "dimension must be positive (check the data section)",
                    (long long)m->channels, (long long)m->height, (long long)m->width);
  return GANFW_OK;
}

static ganfw_status mlp_gan_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                   const ganfw_data_info *data, void **self) {
  *self = NULL;
  if (!GANFW_HOST_HAS(host, net_param_info) || !host->net_create || !host->net_build)
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "mlp_gan: this core's host table has no net builder entries; use a ganfw "
                       "core of ABI %d.%d or later",
                       GANFW_ABI_MAJOR, GANFW_ABI_MINOR);
  mlp_gan *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "mlp_gan: out of host memory");
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
    mlp_gan_destroy(m);
    return st;
  }
  host->log(ctx, GANFW_LOG_INFO, "mlp_gan: nz %lld, hidden %lld, images [%lld,%lld,%lld]",
            (long long)m->nz, (long long)m->hidden, (long long)m->channels, (long long)m->height,
            (long long)m->width);
  *self = m;
  return GANFW_OK;
}

/* The net for `role`, owned by the model until mlp_gan_destroy; NULL for other roles. */
static ganfw_net *mlp_gan_net(void *self, const char *role) {
  mlp_gan *m = self;
  if (!role) return NULL;
  if (strcmp(role, "generator") == 0) return m->g;
  if (strcmp(role, "discriminator") == 0) return m->d;
  return NULL;
}

static int64_t mlp_gan_latent_dim(void *self) {
  return ((const mlp_gan *)self)->nz;
}

static const ganfw_model_vt mlp_gan_vt = {
    .struct_size = sizeof(ganfw_model_vt),
    .kind = GANFW_VT_TAG_MODEL,
    .family = GANFW_MODEL_GAN,
    .create = mlp_gan_create,
    .destroy = mlp_gan_destroy,
    .net = mlp_gan_net,
    .latent_dim = mlp_gan_latent_dim,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MODEL,
      .name = "mlp_gan",
      .version = "1.0.0",
      .description = "example GAN: 3-layer MLP generator and discriminator (out-of-tree plugin)",
      .vtable = &mlp_gan_vt,
  };
  return &desc;
}
