/* The convolutional autoencoder model plugin (ganfw_convae.so): an "encoder" and a
 * "decoder" for a trainer plugin (family GANFW_MODEL_NETS; `trainer: {plugin:
 * autoencoder}`), the nets of bench/vae_torch.py with their state_dict names:
 *
 *   encoder: net.0 Conv(C, ch, 4, 2, 1)  net.1 ReLU  net.2 Conv(ch, 2ch, 4, 2, 1)  net.3 ReLU
 *            net.4 Flatten  net.5 Linear(2ch*H/4*W/4, out)  net.6 Unflatten(out, 1, 1)
 *   decoder: net.0 Flatten  net.1 Linear(latent, 2ch*H/4*W/4)  net.2 ReLU
 *            net.3 Unflatten(2ch, H/4, W/4)  net.4 ConvT(2ch, ch, 4, 2, 1)  net.5 ReLU
 *            net.6 ConvT(ch, C, 4, 2, 1)  [net.7 Tanh or Sigmoid]
 *
 * out is latent, or 2 * latent with model.vae (the mean and log-variance of q(z|x)). The
 * decoder's last activation is model.output: none (logits, for BCE with logits), tanh or
 * sigmoid. H and W must be multiples of 4. Weights start as PyTorch's defaults. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

typedef struct convae {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  ganfw_net *enc, *dec;
} convae;

static void convae_destroy(void *self) {
  convae *m = self;
  if (!m) return;
  m->host->net_destroy(m->enc);
  m->host->net_destroy(m->dec);
  free(m);
}

static ganfw_status build(convae *m, const ganfw_data_info *d, int64_t latent, int64_t ch,
                          int32_t vae, int32_t act) {
  const ganfw_host *h = m->host;
  const int64_t C = d->channels, H = d->height / 4, W = d->width / 4, flat = 2 * ch * H * W;
  const int64_t out = vae ? 2 * latent : latent;
  ganfw_net *e = m->enc, *x = m->dec;
  ganfw_status st;
  if ((st = h->net_conv2d(e, "net.0", C, ch, 4, 2, 1, 1)) ||
      (st = h->net_activation(e, "net.1", GANFW_ACT_RELU, 0)) ||
      (st = h->net_conv2d(e, "net.2", ch, 2 * ch, 4, 2, 1, 1)) ||
      (st = h->net_activation(e, "net.3", GANFW_ACT_RELU, 0)) ||
      (st = h->net_flatten(e, "net.4")) || (st = h->net_linear(e, "net.5", flat, out, 1)) ||
      (st = h->net_reshape(e, "net.6", out, 1, 1)) ||
      (st = h->net_build(e, C, d->height, d->width)))
    return st;
  if ((st = h->net_flatten(x, "net.0")) || (st = h->net_linear(x, "net.1", latent, flat, 1)) ||
      (st = h->net_activation(x, "net.2", GANFW_ACT_RELU, 0)) ||
      (st = h->net_reshape(x, "net.3", 2 * ch, H, W)) ||
      (st = h->net_conv_transpose2d(x, "net.4", 2 * ch, ch, 4, 2, 1, 0, 1)) ||
      (st = h->net_activation(x, "net.5", GANFW_ACT_RELU, 0)) ||
      (st = h->net_conv_transpose2d(x, "net.6", ch, C, 4, 2, 1, 0, 1)))
    return st;
  if (act != GANFW_ACT_IDENTITY && (st = h->net_activation(x, "net.7", act, 0))) return st;
  return h->net_build(x, latent, 1, 1);
}

static ganfw_status convae_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                  const ganfw_data_info *data, void **self) {
  *self = NULL;
  int64_t latent, ch;
  int32_t vae;
  const char *output = NULL;
  ganfw_status st;
  if ((st = host->cfg_int(cfg, "latent", 16, &latent)) ||
      (st = host->cfg_int(cfg, "channels", 32, &ch)) ||
      (st = host->cfg_bool(cfg, "vae", 0, &vae)) ||
      (st = host->cfg_string(cfg, "output", "none", &output)))
    return st;
  int32_t act = strcmp(output, "none") == 0      ? GANFW_ACT_IDENTITY
                : strcmp(output, "tanh") == 0    ? GANFW_ACT_TANH
                : strcmp(output, "sigmoid") == 0 ? GANFW_ACT_SIGMOID
                                                 : -1;
  if (act < 0)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "convae: model.output is '%s'; use none (logits), tanh or sigmoid", output);
  if (latent < 1 || latent > 65536 || ch < 1 || ch > 4096)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "convae: model.latent (%lld) and model.channels (%lld) must be >= 1",
                       (long long)latent, (long long)ch);
  if (data->height % 4 || data->width % 4 || data->height < 4 || data->width < 4)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "convae: the images are %dx%d; the encoder halves them twice, so both "
                       "sides must be multiples of 4 (data.resize)",
                       (int)data->height, (int)data->width);
  convae *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "convae: out of host memory");
  m->host = host;
  m->ctx = ctx;
  m->enc = host->net_create(ctx, "encoder");
  m->dec = host->net_create(ctx, "decoder");
  st = m->enc && m->dec ? build(m, data, latent, ch, vae, act) : GANFW_ERR_OOM;
  if (st != GANFW_OK) {
    convae_destroy(m);
    return st;
  }
  *self = m;
  return GANFW_OK;
}

static ganfw_net *convae_net(void *self, const char *role) {
  convae *m = self;
  if (!role) return NULL;
  if (strcmp(role, "encoder") == 0) return m->enc;
  if (strcmp(role, "decoder") == 0) return m->dec;
  return NULL;
}

static const ganfw_config_key keys[] = {
    {"latent", GANFW_KEY_INT, 0, 16, 0, NULL, NULL, "size of the code z"},
    {"channels", GANFW_KEY_INT, 0, 32, 0, NULL, NULL, "channels of the first conv (then 2x)"},
    {"vae", GANFW_KEY_BOOL, 0, 0, 0, NULL, NULL, "encoder gives mean and log-variance"},
    {"output", GANFW_KEY_STRING, 0, 0, 0, "none", NULL, "decoder's last activation"},
};
static const ganfw_config_keys key_table = {keys, sizeof keys / sizeof keys[0]};

static const void *convae_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &key_table : NULL;
}

static const ganfw_model_vt convae_vt = {
    .struct_size = sizeof(ganfw_model_vt),
    .kind = GANFW_VT_TAG_MODEL,
    .family = GANFW_MODEL_NETS,
    .create = convae_create,
    .destroy = convae_destroy,
    .net = convae_net,
    .get_extension = convae_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MODEL,
      .name = "convae",
      .version = "1.0.0",
      .description = "convolutional autoencoder (encoder, decoder; model.vae: a VAE's "
                     "encoder) for the autoencoder trainer",
      .vtable = &convae_vt,
  };
  return &desc;
}
