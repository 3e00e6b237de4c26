/* The residual GAN model plugin (ganfw_resgan.so): an SNGAN-style generator and
 * discriminator (Miyato et al. 2018; Gulrajani et al. 2017) of residual blocks, without
 * spectral norm, with the state_dict names of the usual PyTorch module (linear, blocks.i.
 * residual.j, blocks.i.shortcut.j, output.j). G maps a latent [N,nz,1,1] to an image
 * [N,channels,S,S] in [-1,1]: flatten, Linear(nz, c0*base*base), view [c0,base,base], then
 * per block BN-ReLU-Upsample(2, nearest)-Conv3x3-BN-ReLU-Conv3x3 plus a shortcut
 * Upsample-Conv1x1 (these convs without bias, as each feeds a BatchNorm), then
 * BN-ReLU-Conv3x3-Tanh; S = base * 2^(upsampling blocks). D maps an
 * image to a logit [N,1]: per block [ReLU]-Conv3x3-ReLU-Conv3x3-AvgPool(2) plus a shortcut
 * Conv1x1-AvgPool(2) (the first block without the leading ReLU and with the pooling first
 * in its shortcut, as SNGAN's OptimizedDisBlock), then ReLU, global average pooling and
 * Linear(c, 1). A block that changes neither the size nor the channels has an identity
 * shortcut. Built as graph nets (net_input, net_add). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

/* PyTorch's BatchNorm2d defaults. */
#define RESGAN_BN_EPS      1e-5f
#define RESGAN_BN_MOMENTUM 0.1f
#define RESGAN_MAX_BLOCKS  16
#define RESGAN_MAX_CH      (1 << 16)
#define RESGAN_MAX_SIZE    4096
#define RESGAN_NAME_LEN    64

/* One block of model.generator.blocks (resize: upsample) or model.discriminator.blocks
 * (resize: downsample). */
typedef struct resgan_block {
  int64_t channels;
  int32_t resize;
} resgan_block;

typedef struct resgan {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  int64_t image_size, channels, nz, g_channels, g_base;
  resgan_block g_blocks[RESGAN_MAX_BLOCKS], d_blocks[RESGAN_MAX_BLOCKS];
  int64_t n_g, n_d;
  ganfw_net *g, *d;
} resgan;

static void resgan_destroy(void *self) {
  resgan *m = self;
  if (!m) return;
  if (m->host) {
    m->host->net_destroy(m->g);
    m->host->net_destroy(m->d);
  }
  free(m);
}

/* --- config ------------------------------------------------------------------------------- */

/* model.<net>.blocks[i] into b: channels (required), and the resize flag `key`. */
static ganfw_status read_blocks(resgan *m, const ganfw_cfg *net, const char *net_key,
                                const char *key, resgan_block *b, int64_t *n) {
  const ganfw_host *h = m->host;
  *n = h->cfg_list_len(net, "blocks");
  if (*n < 0) return GANFW_ERR_CONFIG; /* not a list: the getter said where */
  if (*n > RESGAN_MAX_BLOCKS)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "resgan: model.%s.blocks has %lld entries; at most %d", net_key, (long long)*n,
                    RESGAN_MAX_BLOCKS);
  for (int64_t i = 0; i < *n; i++) {
    const ganfw_cfg *item = h->cfg_list_at(net, "blocks", i);
    ganfw_status st;
    if ((st = h->cfg_int(item, "channels", 0, &b[i].channels)) ||
        (st = h->cfg_bool(item, key, 1, &b[i].resize)))
      return st;
    if (b[i].channels <= 0 || b[i].channels > RESGAN_MAX_CH)
      return h->error(m->ctx, GANFW_ERR_CONFIG,
                      "resgan: model.%s.blocks[%lld].channels must be set to a positive number "
                      "(at most %d), e.g. {channels: 64}",
                      net_key, (long long)i, RESGAN_MAX_CH);
  }
  return GANFW_OK;
}

static ganfw_status read_config(resgan *m, const ganfw_cfg *cfg, const ganfw_data_info *data) {
  const ganfw_host *h = m->host;
  int64_t data_channels = 0, data_size = 0;
  if (data && data->struct_size >= offsetof(ganfw_data_info, width) + sizeof(int32_t)) {
    data_channels = data->channels;
    if (data->height == data->width) data_size = data->height;
  }
  ganfw_status st;
  if ((st = h->cfg_int(cfg, "image_size", data_size, &m->image_size)) ||
      (st = h->cfg_int(cfg, "channels", data_channels > 0 ? data_channels : 3, &m->channels)) ||
      (st = h->cfg_int(cfg, "nz", 128, &m->nz)))
    return st;
  if (m->image_size <= 0 || m->image_size > RESGAN_MAX_SIZE)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "resgan: model.image_size is %lld; set it to the data's square image size "
                    "(1 to %d; it defaults to the data's when the images are square)",
                    (long long)m->image_size, RESGAN_MAX_SIZE);
  if (m->channels <= 0 || m->channels > RESGAN_MAX_CH || m->nz <= 0 || m->nz > RESGAN_MAX_CH)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "resgan: model.channels (%lld) and model.nz (%lld) must be positive (at most "
                    "%d)",
                    (long long)m->channels, (long long)m->nz, RESGAN_MAX_CH);

  const ganfw_cfg *g = h->cfg_child(cfg, "generator"), *d = h->cfg_child(cfg, "discriminator");
  if ((st = read_blocks(m, g, "generator", "upsample", m->g_blocks, &m->n_g)) ||
      (st = read_blocks(m, d, "discriminator", "downsample", m->d_blocks, &m->n_d)))
    return st;
  if (m->n_d == 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "resgan: model.discriminator.blocks is empty; give at least one block, e.g. "
                    "[{channels: 64}, {channels: 128}]");
  int ups = 0;
  for (int64_t i = 0; i < m->n_g; i++) ups += m->g_blocks[i].resize != 0;
  int64_t scale = (int64_t)1 << ups;
  if ((st = h->cfg_int(g, "channels", m->n_g ? m->g_blocks[0].channels : 64, &m->g_channels)) ||
      (st = h->cfg_int(g, "base", m->image_size % scale == 0 ? m->image_size / scale : 0,
                       &m->g_base)))
    return st;
  if (m->g_channels <= 0 || m->g_channels > RESGAN_MAX_CH)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "resgan: model.generator.channels is %lld; the linear layer's output "
                    "channels must be positive (at most %d)",
                    (long long)m->g_channels, RESGAN_MAX_CH);
  if (m->g_base <= 0 || m->g_base * scale != m->image_size)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "resgan: model.generator: base %lld doubled by %d upsampling block(s) does "
                    "not give the %lldx%lld images of model.image_size; set generator.base to "
                    "image_size / %lld (a whole number), or change the blocks' upsample flags",
                    (long long)m->g_base, ups, (long long)m->image_size, (long long)m->image_size,
                    (long long)scale);
  if (m->g_channels * m->g_base * m->g_base > ((int64_t)1 << 26))
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "resgan: model.generator: the linear layer would output %lld x %lld x %lld "
                    "values per sample; lower generator.channels or generator.base",
                    (long long)m->g_channels, (long long)m->g_base, (long long)m->g_base);
  int64_t size = m->image_size;
  for (int64_t i = 0; i < m->n_d; i++) {
    if (m->d_blocks[i].resize && size < 2)
      return h->error(m->ctx, GANFW_ERR_CONFIG,
                      "resgan: model.discriminator.blocks[%lld]: a %lldx%lld input cannot be "
                      "average-pooled by 2; set downsample: false there or remove a block",
                      (long long)i, (long long)size, (long long)size);
    if (m->d_blocks[i].resize) size /= 2;
  }
  return GANFW_OK;
}

/* --- building ----------------------------------------------------------------------------- */

/* nn.Sequential entries "<prefix>.<i>". */
typedef struct seq {
  char prefix[RESGAN_NAME_LEN / 2];
  int index;
  char name[RESGAN_NAME_LEN];
} seq;

static const char *seq_next(seq *s) {
  snprintf(s->name, sizeof s->name, "%s.%d", s->prefix, s->index++);
  return s->name;
}

/* Conv2d(cin, cout, kernel, padding kernel / 2), with a bias when `bias`. */
static ganfw_status conv(resgan *m, ganfw_net *net, seq *s, int64_t cin, int64_t cout,
                         int64_t kernel, int32_t bias) {
  return m->host->net_conv2d(net, seq_next(s), cin, cout, kernel, 1, kernel / 2, bias);
}

static ganfw_status relu(resgan *m, ganfw_net *net, seq *s) {
  return m->host->net_activation(net, seq_next(s), GANFW_ACT_RELU, 0.0f);
}

static ganfw_status avg_pool(resgan *m, ganfw_net *net, seq *s) {
  return m->host->net_pool2d(net, seq_next(s), GANFW_POOL_AVG, 2, 2, 0);
}

/* Ends block `i` whose input node is `in`: "blocks.i.add" of the residual's last node and
 * the shortcut's (or `in` itself when the shortcut is empty), then `in` becomes the add. */
static ganfw_status add(resgan *m, ganfw_net *net, int64_t i, const seq *res, const seq *sc,
                        char *in) {
  char name[RESGAN_NAME_LEN], res_last[RESGAN_NAME_LEN], sc_last[RESGAN_NAME_LEN];
  snprintf(res_last, sizeof res_last, "%s", res->name);
  snprintf(sc_last, sizeof sc_last, "%s", sc->index ? sc->name : in);
  snprintf(name, sizeof name, "blocks.%d.add", (int)i);
  const char *inputs[2] = {res_last, sc_last};
  ganfw_status st = m->host->net_add(net, name, inputs, 2);
  snprintf(in, RESGAN_NAME_LEN, "%s", name);
  return st;
}

/* Generator block i: cin -> cout channels, doubling the size when `up`. Its convs have no
 * bias: every path from them reaches a BatchNorm through per-channel linear maps, so a bias
 * would get no gradient (only the output conv has one). */
static ganfw_status gen_block(resgan *m, int64_t i, int64_t cin, int64_t cout, int32_t up,
                              char *in) {
  const ganfw_host *h = m->host;
  ganfw_net *net = m->g;
  seq r = {.index = 0}, s = {.index = 0};
  snprintf(r.prefix, sizeof r.prefix, "blocks.%d.residual", (int)i);
  snprintf(s.prefix, sizeof s.prefix, "blocks.%d.shortcut", (int)i);
  ganfw_status st = h->net_batchnorm2d(net, seq_next(&r), cin, RESGAN_BN_EPS, RESGAN_BN_MOMENTUM);
  if (st == GANFW_OK) st = relu(m, net, &r);
  if (st == GANFW_OK && up) st = h->net_upsample(net, seq_next(&r), 2, GANFW_UPSAMPLE_NEAREST);
  if (st == GANFW_OK) st = conv(m, net, &r, cin, cout, 3, 0);
  if (st == GANFW_OK)
    st = h->net_batchnorm2d(net, seq_next(&r), cout, RESGAN_BN_EPS, RESGAN_BN_MOMENTUM);
  if (st == GANFW_OK) st = relu(m, net, &r);
  if (st == GANFW_OK) st = conv(m, net, &r, cout, cout, 3, 0);
  if (up || cin != cout) {
    if (st == GANFW_OK) st = h->net_input(net, in);
    if (st == GANFW_OK && up) st = h->net_upsample(net, seq_next(&s), 2, GANFW_UPSAMPLE_NEAREST);
    if (st == GANFW_OK) st = conv(m, net, &s, cin, cout, 1, 0);
  }
  if (st == GANFW_OK) st = add(m, net, i, &r, &s, in);
  return st;
}

static ganfw_status build_generator(resgan *m) {
  const ganfw_host *h = m->host;
  ganfw_net *net = m->g;
  char in[RESGAN_NAME_LEN] = "reshape";
  int64_t c = m->g_channels;
  ganfw_status st = h->net_flatten(net, "flatten");
  if (st == GANFW_OK) st = h->net_linear(net, "linear", m->nz, c * m->g_base * m->g_base, 1);
  if (st == GANFW_OK) st = h->net_reshape(net, "reshape", c, m->g_base, m->g_base);
  for (int64_t i = 0; i < m->n_g && st == GANFW_OK; i++) {
    st = gen_block(m, i, c, m->g_blocks[i].channels, m->g_blocks[i].resize, in);
    c = m->g_blocks[i].channels;
  }
  seq out = {.prefix = "output"};
  if (st == GANFW_OK)
    st = h->net_batchnorm2d(net, seq_next(&out), c, RESGAN_BN_EPS, RESGAN_BN_MOMENTUM);
  if (st == GANFW_OK) st = relu(m, net, &out);
  if (st == GANFW_OK) st = conv(m, net, &out, c, m->channels, 3, 1);
  if (st == GANFW_OK) st = h->net_activation(net, seq_next(&out), GANFW_ACT_TANH, 0.0f);
  if (st == GANFW_OK) st = h->net_build(net, m->nz, 1, 1);
  return st;
}

/* Discriminator block i: cin -> cout channels, halving the size when `down`. */
static ganfw_status dis_block(resgan *m, int64_t i, int64_t cin, int64_t cout, int32_t down,
                              char *in) {
  const ganfw_host *h = m->host;
  ganfw_net *net = m->d;
  seq r = {.index = 0}, s = {.index = 0};
  snprintf(r.prefix, sizeof r.prefix, "blocks.%d.residual", (int)i);
  snprintf(s.prefix, sizeof s.prefix, "blocks.%d.shortcut", (int)i);
  int first = i == 0;
  ganfw_status st = first ? GANFW_OK : relu(m, net, &r);
  if (st == GANFW_OK) st = conv(m, net, &r, cin, cout, 3, 1);
  if (st == GANFW_OK) st = relu(m, net, &r);
  if (st == GANFW_OK) st = conv(m, net, &r, cout, cout, 3, 1);
  if (st == GANFW_OK && down) st = avg_pool(m, net, &r);
  if (down || cin != cout) {
    if (st == GANFW_OK) st = h->net_input(net, in);
    if (st == GANFW_OK && first && down) st = avg_pool(m, net, &s);
    if (st == GANFW_OK) st = conv(m, net, &s, cin, cout, 1, 1);
    if (st == GANFW_OK && !first && down) st = avg_pool(m, net, &s);
  }
  if (st == GANFW_OK) st = add(m, net, i, &r, &s, in);
  return st;
}

static ganfw_status build_discriminator(resgan *m) {
  const ganfw_host *h = m->host;
  ganfw_net *net = m->d;
  char in[RESGAN_NAME_LEN] = "input";
  int64_t c = m->channels;
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; i < m->n_d && st == GANFW_OK; i++) {
    st = dis_block(m, i, c, m->d_blocks[i].channels, m->d_blocks[i].resize, in);
    c = m->d_blocks[i].channels;
  }
  if (st == GANFW_OK) st = h->net_activation(net, "relu", GANFW_ACT_RELU, 0.0f);
  if (st == GANFW_OK) st = h->net_global_avg_pool(net, "avgpool");
  if (st == GANFW_OK) st = h->net_flatten(net, "flatten");
  if (st == GANFW_OK) st = h->net_linear(net, "linear", c, 1, 1);
  if (st == GANFW_OK) st = h->net_build(net, m->channels, m->image_size, m->image_size);
  return st;
}

static int64_t param_total(resgan *m, ganfw_net *net) {
  int64_t total = 0, n = m->host->net_param_count(net);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    if (m->host->net_param_info(net, i, &p) == GANFW_OK) total += p.value->numel;
  }
  return total;
}

static ganfw_status resgan_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                  const ganfw_data_info *data, void **self) {
  *self = NULL;
  if (!host->net_create || !host->net_build || !host->net_param_info)
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "resgan: this core's host table has no net builder entries; use a ganfw "
                       "core of ABI %d.%d or later",
                       GANFW_ABI_MAJOR, GANFW_ABI_MINOR);
  resgan *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "resgan: out of host memory");
  m->host = host;
  m->ctx = ctx;
  ganfw_status st = read_config(m, cfg, data);
  if (st == GANFW_OK && (!GANFW_HOST_HAS(host, net_add) || !host->net_input || !host->net_add ||
                         !host->net_upsample || !host->net_global_avg_pool))
    st = host->error(ctx, GANFW_ERR_PLUGIN,
                     "resgan: this core's host table lacks the graph entries (net_input, net_add "
                     "of ABI 1.3) or net_upsample; use a ganfw core with the graph executor, or "
                     "model.plugin: dcgan");
  if (st == GANFW_OK) {
    m->g = host->net_create(ctx, "generator");
    m->d = m->g ? host->net_create(ctx, "discriminator") : NULL;
    if (!m->g || !m->d) st = host->error(ctx, GANFW_ERR_OOM, "resgan: out of host memory");
    if (st == GANFW_OK) st = build_generator(m);
    if (st == GANFW_OK) st = build_discriminator(m);
  }
  if (st != GANFW_OK) {
    resgan_destroy(m);
    return st;
  }
  host->log(ctx, GANFW_LOG_INFO,
            "resgan: %lldx%lld images; generator %lld, discriminator %lld "
            "parameters",
            (long long)m->image_size, (long long)m->image_size, (long long)param_total(m, m->g),
            (long long)param_total(m, m->d));
  *self = m;
  return GANFW_OK;
}

static ganfw_net *resgan_net(void *self, const char *role) {
  resgan *m = self;
  if (!role) return NULL;
  if (strcmp(role, "generator") == 0) return m->g;
  if (strcmp(role, "discriminator") == 0) return m->d;
  return NULL;
}

static int64_t resgan_latent_dim(void *self) {
  return ((const resgan *)self)->nz;
}

static const ganfw_model_vt resgan_vt = {
    .struct_size = sizeof(ganfw_model_vt),
    .kind = GANFW_VT_TAG_MODEL,
    .family = GANFW_MODEL_GAN,
    .create = resgan_create,
    .destroy = resgan_destroy,
    .net = resgan_net,
    .latent_dim = resgan_latent_dim,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MODEL,
      .name = "resgan",
      .version = "1.0.0",
      .description = "residual GAN (SNGAN-style up/down-sampling residual blocks, without "
                     "spectral norm), any square size base * 2^k",
      .vtable = &resgan_vt,
  };
  return &desc;
}
