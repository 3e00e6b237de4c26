/* The nets of the CycleGAN example (ganfw_cyclegan_nets.so), a model plugin of family
 * GANFW_MODEL_NETS for the trainer of cyclegan.c: two image-to-image generators "g_ab",
 * "g_ba" and two PatchGAN discriminators "d_a", "d_b", all for images [N,C,H,W] of the data
 * set (H, W even and at least 12). Zhu et al. (2017) at a small size, zero padding where
 * they pad by reflection:
 *
 *   g_*: in.conv Conv(C, ch, 7, 1, 3)  in.norm IN  in.relu ReLU
 *        down.conv Conv(ch, 2ch, 3, 2, 1)  down.norm IN  down.relu ReLU         [N,2ch,H/2,W/2]
 *        blocks x res.<i>: conv1 Conv(2ch, 2ch, 3, 1, 1) norm1 IN relu ReLU
 *                          conv2 Conv(2ch, 2ch, 3, 1, 1) norm2 IN, add (+ the block's input)
 *        up.conv ConvT(2ch, ch, 3, 2, 1, output_padding 1)  up.norm IN  up.relu ReLU [N,ch,H,W]
 *        out.conv Conv(ch, C, 7, 1, 3)  out.tanh Tanh                             [N,C,H,W]
 *   d_*: conv0 Conv(C, dch, 4, 2, 1)  lrelu0 LeakyReLU(0.2)                     [N,dch,H/2,W/2]
 *        conv1 Conv(dch, 2dch, 4, 2, 1)  norm1 IN  lrelu1                       [N,2dch,H/4,W/4]
 *        conv2 Conv(2dch, 4dch, 4, 1, 1)  norm2 IN  lrelu2                  [N,4dch,H/4-1,W/4-1]
 *        out Conv(4dch, 1, 4, 1, 1): a map of logits, one per patch          [N,1,H/4-2,W/4-2]
 *
 * IN is nn.InstanceNorm2d(affine=False), the paper's. Weights start as N(0, 0.02), biases 0
 * (their init_type normal), or with model.init: default as PyTorch's defaults. Written
 * against the installed headers only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

enum { ROLE_G_AB, ROLE_G_BA, ROLE_D_A, ROLE_D_B, ROLE_COUNT };
static const char *const role_names[ROLE_COUNT] = {"g_ab", "g_ba", "d_a", "d_b"};

typedef struct nets {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  ganfw_net *net[ROLE_COUNT];
} nets;

/* What the config asks for (the model section). */
typedef struct nets_args {
  int64_t channels;   /* ch: the generators' first width */
  int64_t d_channels; /* dch: the discriminators' first width */
  int64_t blocks;     /* residual blocks at H/2 in each generator */
  int32_t init_normal;
} nets_args;

static void nets_destroy(void *self) {
  nets *m = self;
  if (!m) return;
  for (int i = 0; i < ROLE_COUNT; i++) m->host->net_destroy(m->net[i]);
  free(m);
}

/* Conv (or ConvT, output_padding 1), InstanceNorm and ReLU under one prefix: "down" gives
 * down.conv, down.norm, down.relu. */
static ganfw_status conv_norm_relu(const ganfw_host *h, ganfw_net *net, const char *prefix,
                                   int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad,
                                   int32_t transposed) {
  char conv[64], norm[64], relu[64];
  snprintf(conv, sizeof conv, "%s.conv", prefix);
  snprintf(norm, sizeof norm, "%s.norm", prefix);
  snprintf(relu, sizeof relu, "%s.relu", prefix);
  ganfw_status st = transposed ? h->net_conv_transpose2d(net, conv, in, out, k, stride, pad, 1, 1)
                               : h->net_conv2d(net, conv, in, out, k, stride, pad, 1);
  if (st == GANFW_OK) st = h->net_instancenorm2d(net, norm, out, 1e-5f, 0);
  if (st == GANFW_OK) st = h->net_activation(net, relu, GANFW_ACT_RELU, 0);
  return st;
}

/* One residual block res.<i> at width c reading node `from`; its add is the next block's
 * input. */
static ganfw_status res_block(const ganfw_host *h, ganfw_net *net, int64_t i, int64_t c,
                              const char *from, char *add, size_t add_len) {
  char name[64];
  ganfw_status st;
  snprintf(name, sizeof name, "res.%lld.conv1", (long long)i);
  if ((st = h->net_conv2d(net, name, c, c, 3, 1, 1, 1))) return st;
  snprintf(name, sizeof name, "res.%lld.norm1", (long long)i);
  if ((st = h->net_instancenorm2d(net, name, c, 1e-5f, 0))) return st;
  snprintf(name, sizeof name, "res.%lld.relu", (long long)i);
  if ((st = h->net_activation(net, name, GANFW_ACT_RELU, 0))) return st;
  snprintf(name, sizeof name, "res.%lld.conv2", (long long)i);
  if ((st = h->net_conv2d(net, name, c, c, 3, 1, 1, 1))) return st;
  snprintf(name, sizeof name, "res.%lld.norm2", (long long)i);
  if ((st = h->net_instancenorm2d(net, name, c, 1e-5f, 0))) return st;
  const char *inputs[2] = {NULL, from}; /* NULL: norm2, the node before */
  snprintf(add, add_len, "res.%lld.add", (long long)i);
  return h->net_add(net, add, inputs, 2);
}

static ganfw_status build_generator(const ganfw_host *h, ganfw_net *net, const ganfw_data_info *d,
                                    const nets_args *a) {
  const int64_t C = d->channels, ch = a->channels;
  ganfw_status st;
  if ((st = conv_norm_relu(h, net, "in", C, ch, 7, 1, 3, 0)) ||
      (st = conv_norm_relu(h, net, "down", ch, 2 * ch, 3, 2, 1, 0)))
    return st;
  char from[64] = "down.relu", add[64];
  for (int64_t i = 0; i < a->blocks; i++) {
    if ((st = res_block(h, net, i, 2 * ch, from, add, sizeof add))) return st;
    memcpy(from, add, sizeof from);
  }
  if ((st = conv_norm_relu(h, net, "up", 2 * ch, ch, 3, 2, 1, 1)) ||
      (st = h->net_conv2d(net, "out.conv", ch, C, 7, 1, 3, 1)) ||
      (st = h->net_activation(net, "out.tanh", GANFW_ACT_TANH, 0)))
    return st;
  return h->net_build(net, C, d->height, d->width);
}

static ganfw_status build_discriminator(const ganfw_host *h, ganfw_net *net,
                                        const ganfw_data_info *d, const nets_args *a) {
  const int64_t C = d->channels, dch = a->d_channels;
  ganfw_status st;
  if ((st = h->net_conv2d(net, "conv0", C, dch, 4, 2, 1, 1)) ||
      (st = h->net_activation(net, "lrelu0", GANFW_ACT_LEAKY_RELU, 0.2f)) ||
      (st = h->net_conv2d(net, "conv1", dch, 2 * dch, 4, 2, 1, 1)) ||
      (st = h->net_instancenorm2d(net, "norm1", 2 * dch, 1e-5f, 0)) ||
      (st = h->net_activation(net, "lrelu1", GANFW_ACT_LEAKY_RELU, 0.2f)) ||
      (st = h->net_conv2d(net, "conv2", 2 * dch, 4 * dch, 4, 1, 1, 1)) ||
      (st = h->net_instancenorm2d(net, "norm2", 4 * dch, 1e-5f, 0)) ||
      (st = h->net_activation(net, "lrelu2", GANFW_ACT_LEAKY_RELU, 0.2f)) ||
      (st = h->net_conv2d(net, "out", 4 * dch, 1, 4, 1, 1, 1)))
    return st;
  return h->net_build(net, C, d->height, d->width);
}

/* Zhu et al.'s init_type normal: conv and transposed-conv weights N(0, 0.02), biases 0. */
static ganfw_status init_normal(const ganfw_host *h, ganfw_ctx *ctx, ganfw_net *net) {
  const int64_t n = h->net_param_count(net);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    ganfw_status st = h->net_param_info(net, i, &p);
    if (st != GANFW_OK) return st;
    if (strcmp(p.layer_type, "conv2d") != 0 && strcmp(p.layer_type, "conv_transpose2d") != 0)
      continue;
    const size_t len = strlen(p.name);
    if (len > 7 && strcmp(p.name + len - 7, ".weight") == 0)
      st = h->rng_normal(ctx, p.value, 0.0f, 0.02f);
    else if (len > 5 && strcmp(p.name + len - 5, ".bias") == 0)
      st = h->foreach_fill(ctx, &p.value, 1, 0.0f);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

static ganfw_status read_args(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              nets_args *a) {
  const char *init = NULL;
  ganfw_status st;
  if ((st = host->cfg_int(cfg, "channels", 32, &a->channels)) ||
      (st = host->cfg_int(cfg, "d_channels", 32, &a->d_channels)) ||
      (st = host->cfg_int(cfg, "blocks", 2, &a->blocks)) ||
      (st = host->cfg_string(cfg, "init", "normal", &init)))
    return st;
  if (a->channels < 1 || a->channels > 4096)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "cyclegan_nets: model.channels is %lld; use a width from 1 to 4096",
                       (long long)a->channels);
  if (a->d_channels < 1 || a->d_channels > 4096)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "cyclegan_nets: model.d_channels is %lld; use a width from 1 to 4096",
                       (long long)a->d_channels);
  if (a->blocks < 0 || a->blocks > 64)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "cyclegan_nets: model.blocks is %lld; use 0 to 64 residual blocks",
                       (long long)a->blocks);
  if (strcmp(init, "normal") != 0 && strcmp(init, "default") != 0)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "cyclegan_nets: model.init is '%s'; use normal (N(0, 0.02), Zhu et al.) "
                       "or default (PyTorch's)",
                       init);
  a->init_normal = strcmp(init, "normal") == 0;
  return GANFW_OK;
}

static ganfw_status nets_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                const ganfw_data_info *data, void **self) {
  *self = NULL;
  if (!GANFW_HOST_HAS(host, net_add) || !GANFW_HOST_HAS(host, net_instancenorm2d))
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "cyclegan_nets: this ganfw has no graph nets (plugin ABI 1.3); use a newer "
                       "ganfw");
  nets_args a;
  ganfw_status st = read_args(host, ctx, cfg, &a);
  if (st != GANFW_OK) return st;
  if (data->height % 2 || data->width % 2 || data->height < 12 || data->width < 12)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "cyclegan_nets: the images are %dx%d; the generators halve and double "
                       "them and the discriminators quarter them, so both sides must be even "
                       "and at least 12 (data.resize)",
                       (int)data->height, (int)data->width);
  nets *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "cyclegan_nets: out of host memory");
  m->host = host;
  m->ctx = ctx;
  for (int i = 0; i < ROLE_COUNT && st == GANFW_OK; i++) {
    m->net[i] = host->net_create(ctx, role_names[i]);
    if (!m->net[i]) {
      st = host->error(ctx, GANFW_ERR_OOM, "cyclegan_nets: out of host memory");
      break;
    }
    st = i == ROLE_G_AB || i == ROLE_G_BA ? build_generator(host, m->net[i], data, &a)
                                          : build_discriminator(host, m->net[i], data, &a);
    if (st == GANFW_OK && a.init_normal) st = init_normal(host, ctx, m->net[i]);
  }
  if (st != GANFW_OK) {
    nets_destroy(m);
    return st;
  }
  host->log(ctx, GANFW_LOG_INFO,
            "cyclegan_nets: channels %lld, d_channels %lld, blocks %lld, images [%d,%d,%d], "
            "patch map [1,%d,%d]",
            (long long)a.channels, (long long)a.d_channels, (long long)a.blocks,
            (int)data->channels, (int)data->height, (int)data->width, (int)data->height / 4 - 2,
            (int)data->width / 4 - 2);
  *self = m;
  return GANFW_OK;
}

static ganfw_net *nets_net(void *self, const char *role) {
  nets *m = self;
  for (int i = 0; role && i < ROLE_COUNT; i++)
    if (strcmp(role, role_names[i]) == 0) return m->net[i];
  return NULL;
}

static const ganfw_config_key keys[] = {
    {"channels", GANFW_KEY_INT, 0, 32, 0, NULL, NULL, "the generators' first width (then 2x)"},
    {"d_channels", GANFW_KEY_INT, 0, 32, 0, NULL, NULL,
     "the discriminators' first width (then 2x, 4x)"},
    {"blocks", GANFW_KEY_INT, 0, 2, 0, NULL, NULL, "residual blocks in each generator"},
    {"init", GANFW_KEY_STRING, 0, 0, 0, "normal", NULL,
     "normal (N(0, 0.02), Zhu et al.) or default (PyTorch's)"},
};
static const ganfw_config_keys key_table = {keys, sizeof keys / sizeof keys[0]};

static const void *nets_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &key_table : NULL;
}

static const ganfw_model_vt nets_vt = {
    .struct_size = sizeof(ganfw_model_vt),
    .kind = GANFW_VT_TAG_MODEL,
    .family = GANFW_MODEL_NETS,
    .create = nets_create,
    .destroy = nets_destroy,
    .net = nets_net,
    .get_extension = nets_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MODEL,
      .name = "cyclegan_nets",
      .version = "1.0.0",
      .description = "CycleGAN's nets (g_ab, g_ba: ResNet generators; d_a, d_b: PatchGAN "
                     "discriminators) for the cyclegan trainer",
      .vtable = &nets_vt,
  };
  return &desc;
}
