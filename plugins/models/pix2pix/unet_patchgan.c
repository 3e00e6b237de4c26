/* The pix2pix model plugin (ganfw_unet_patchgan.so): the nets of Isola et al. (2017) for the
 * pix2pix trainer (family GANFW_MODEL_NETS; `trainer: {plugin: pix2pix}`), built as graph
 * nets (net_input, net_concat). Images are [N,C,H,W]; w_i = channels * min(2^i, 8).
 *
 *   generator: a U-Net of `depth` levels, [N,C,H,W] -> [N,C,H,W]
 *     down0.conv  Conv(C, w0, 4, 2, 1)                                 (no norm, as the paper)
 *     down<i>     LeakyReLU(0.2)  Conv(w_{i-1}, w_i, 4, 2, 1)  BatchNorm (none at the bottom)
 *     up<i>       ReLU  ConvT(w_i or 2 w_i, w_{i-1}, 4, 2, 1)  BatchNorm  [Dropout]
 *                 concat [down<i>.act, up<i>] (the skip between mirrored levels)
 *     up0         ReLU  ConvT(2 w0, C, 4, 2, 1) (with bias)  [Tanh or Sigmoid: model.output]
 *   discriminator: a PatchGAN of `d_layers` stride-2 convs on the pair [N,2C,H,W] (the input
 *     image, then the real or generated one; the trainer joins them), PyTorch's
 *     NLayerDiscriminator with its state_dict names model.<i>:
 *     Conv(2C, d, 4, 2, 1) LeakyReLU, (d_layers - 1) x [Conv(4, 2, 1) BatchNorm LeakyReLU],
 *     Conv(4, 1, 1) BatchNorm LeakyReLU, Conv(., 1, 4, 1, 1): a map of patch logits
 *     [N,1,H/2^L - 2,W/2^L - 2].
 *
 * The skip is LeakyReLU(down<i-1>), the value the reference implementation's in-place
 * LeakyReLU leaves in the tensor it concatenates; the ReLU of up<i-1> after the concat makes
 * it the same as concatenating down<i-1> (both give ReLU(down<i-1>)), and it lets the
 * LeakyReLU run in place (no copy of down<i-1> kept for the concat).
 *
 * Each level halves H and W, so both must be multiples of 2^depth: depth 0 (the default)
 * takes as many levels as they allow, at most 8 (2 for 28x28: 14x14, 7x7; 5 for 32x32).
 * Convs before a BatchNorm have no bias; weights start as pix2pix's init_type normal:
 * conv weights N(0, 0.02), BatchNorm weights N(1, 0.02), biases 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#define P2P_BN_EPS      1e-5f
#define P2P_BN_MOMENTUM 0.1f
#define P2P_LEAKY_SLOPE 0.2f
#define P2P_INIT_STD    0.02f
#define P2P_MAX_DEPTH   8

typedef struct p2p_model {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  int64_t C, H, W;         /* the images (and the generator's output) */
  int64_t ch, d_ch;        /* model.channels, model.d_channels */
  int64_t depth, d_layers; /* U-Net levels, PatchGAN stride-2 convs */
  int32_t out_act;         /* GANFW_ACT_TANH, _SIGMOID or _IDENTITY */
  double dropout;          /* in the decoder's levels below the top; 0: none */
  ganfw_net *g, *d;
} p2p_model;

static void p2p_destroy(void *self) {
  p2p_model *m = self;
  if (!m) return;
  m->host->net_destroy(m->g);
  m->host->net_destroy(m->d);
  free(m);
}

static int64_t width(int64_t base, int64_t level) {
  return base * (level < 3 ? (int64_t)1 << level : 8);
}

/* Node names: "<prefix><level>.<what>". */
static const char *node(char *buf, size_t cap, const char *prefix, int64_t level,
                        const char *what) {
  snprintf(buf, cap, "%s%lld.%s", prefix, (long long)level, what);
  return buf;
}

/* Encoder level i (its output node's name into out). */
static ganfw_status build_down(p2p_model *m, int64_t i, char *out, size_t cap) {
  const ganfw_host *h = m->host;
  ganfw_net *g = m->g;
  char name[32];
  ganfw_status st;
  if (i == 0) {
    st = h->net_conv2d(g, node(out, cap, "down", 0, "conv"), m->C, width(m->ch, 0), 4, 2, 1, 0);
    return st;
  }
  const int64_t in = width(m->ch, i - 1), w = width(m->ch, i);
  if ((st = h->net_activation(g, node(name, sizeof name, "down", i, "act"), GANFW_ACT_LEAKY_RELU,
                              P2P_LEAKY_SLOPE)) ||
      (st = h->net_conv2d(g, node(out, cap, "down", i, "conv"), in, w, 4, 2, 1, 0)))
    return st;
  if (i == m->depth - 1) return GANFW_OK; /* the bottleneck has no norm */
  return h->net_batchnorm2d(g, node(out, cap, "down", i, "bn"), w, P2P_BN_EPS, P2P_BN_MOMENTUM);
}

/* Decoder level i reads node `from` (the bottleneck, or the concat of level i+1); it joins
 * down<i>.act, LeakyReLU(down<i-1>), to its output. */
static ganfw_status build_up(p2p_model *m, int64_t i, const char *from) {
  const ganfw_host *h = m->host;
  ganfw_net *g = m->g;
  char name[32], skip[32];
  const int64_t in = i == m->depth - 1 ? width(m->ch, i) : 2 * width(m->ch, i);
  const int64_t out = i == 0 ? m->C : width(m->ch, i - 1);
  ganfw_status st;
  if ((st = h->net_input(g, from)) ||
      (st = h->net_activation(g, node(name, sizeof name, "up", i, "act"), GANFW_ACT_RELU, 0)) ||
      (st = h->net_conv_transpose2d(g, node(name, sizeof name, "up", i, "convt"), in, out, 4, 2, 1,
                                    0, i == 0)))
    return st;
  if (i == 0)
    return m->out_act == GANFW_ACT_IDENTITY
               ? GANFW_OK
               : h->net_activation(g, node(name, sizeof name, "up", 0, "out"), m->out_act, 0);
  if ((st = h->net_batchnorm2d(g, node(name, sizeof name, "up", i, "bn"), out, P2P_BN_EPS,
                               P2P_BN_MOMENTUM)))
    return st;
  if (m->dropout > 0 &&
      (st = h->net_dropout(g, node(name, sizeof name, "up", i, "drop"), (float)m->dropout)))
    return st;
  const char *cat[2] = {node(skip, sizeof skip, "down", i, "act"), NULL}; /* cat([x, up]) */
  return h->net_concat(g, node(name, sizeof name, "up", i, "cat"), cat, 2);
}

static ganfw_status build_generator(p2p_model *m) {
  char from[32];
  ganfw_status st;
  for (int64_t i = 0; i < m->depth; i++)
    if ((st = build_down(m, i, from, sizeof from))) return st;
  for (int64_t i = m->depth - 1; i >= 0; i--) {
    if ((st = build_up(m, i, from))) return st;
    node(from, sizeof from, "up", i, "cat");
  }
  return m->host->net_build(m->g, m->C, m->H, m->W);
}

/* Appends nn.Sequential entries "model.<i>", counting every entry as PyTorch does. */
static const char *seq_next(int *index, char *buf, size_t cap) {
  snprintf(buf, cap, "model.%d", (*index)++);
  return buf;
}

static ganfw_status build_discriminator(p2p_model *m) {
  const ganfw_host *h = m->host;
  ganfw_net *d = m->d;
  char name[32];
  int k = 0;
  int64_t prev = width(m->d_ch, 0);
  ganfw_status st;
  if ((st = h->net_conv2d(d, seq_next(&k, name, sizeof name), 2 * m->C, prev, 4, 2, 1, 1)) ||
      (st = h->net_activation(d, seq_next(&k, name, sizeof name), GANFW_ACT_LEAKY_RELU,
                              P2P_LEAKY_SLOPE)))
    return st;
  for (int64_t n = 1; n <= m->d_layers; n++) {
    const int64_t w = width(m->d_ch, n), stride = n < m->d_layers ? 2 : 1;
    if ((st = h->net_conv2d(d, seq_next(&k, name, sizeof name), prev, w, 4, stride, 1, 0)) ||
        (st = h->net_batchnorm2d(d, seq_next(&k, name, sizeof name), w, P2P_BN_EPS,
                                 P2P_BN_MOMENTUM)) ||
        (st = h->net_activation(d, seq_next(&k, name, sizeof name), GANFW_ACT_LEAKY_RELU,
                                P2P_LEAKY_SLOPE)))
      return st;
    prev = w;
  }
  if ((st = h->net_conv2d(d, seq_next(&k, name, sizeof name), prev, 1, 4, 1, 1, 1))) return st;
  return h->net_build(d, 2 * m->C, m->H, m->W);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* pix2pix's init_weights(init_type='normal', init_gain=0.02). */
static ganfw_status weights_init(p2p_model *m, ganfw_net *net) {
  const ganfw_host *h = m->host;
  const int64_t n = h->net_param_count(net);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    ganfw_status st = h->net_param_info(net, i, &p);
    if (st != GANFW_OK) return st;
    const int bn = strcmp(p.layer_type, "batchnorm2d") == 0;
    if (ends_with(p.name, ".bias"))
      st = h->foreach_fill(m->ctx, &p.value, 1, 0.0f);
    else if (bn || strcmp(p.layer_type, "conv2d") == 0 ||
             strcmp(p.layer_type, "conv_transpose2d") == 0)
      st = h->rng_normal(m->ctx, p.value, bn ? 1.0f : 0.0f, P2P_INIT_STD);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* The most halvings (at most P2P_MAX_DEPTH) that keep both sides whole numbers. */
static int64_t auto_depth(int64_t H, int64_t W) {
  int64_t d = 0;
  while (d < P2P_MAX_DEPTH && H % ((int64_t)2 << d) == 0 && W % ((int64_t)2 << d) == 0) d++;
  return d;
}

static ganfw_status check_sizes(p2p_model *m) {
  const ganfw_host *h = m->host;
  if (m->ch < 1 || m->ch > 4096 || m->d_ch < 1 || m->d_ch > 4096)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "unet_patchgan: model.channels (%lld) and model.d_channels (%lld) must be "
                    "1 to 4096",
                    (long long)m->ch, (long long)m->d_ch);
  if (!(m->dropout >= 0 && m->dropout < 1))
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "unet_patchgan: model.dropout is %g; use a probability in [0, 1)", m->dropout);
  if (m->depth < 0 || m->depth > P2P_MAX_DEPTH)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "unet_patchgan: model.depth is %lld; use 1 to %d levels, or 0 for as many as "
                    "the image size allows",
                    (long long)m->depth, P2P_MAX_DEPTH);
  if (m->depth == 0 && (m->depth = auto_depth(m->H, m->W)) == 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "unet_patchgan: the %lldx%lld images cannot be halved (an odd side), so the "
                    "U-Net has no level; resize them to even sides (data.resize); model.depth "
                    "gives the number of levels",
                    (long long)m->H, (long long)m->W);
  const int64_t f = (int64_t)1 << m->depth;
  if (m->H % f || m->W % f)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "unet_patchgan: model.depth %lld halves the images %lld times, but %lldx%lld "
                    "is not a multiple of %lld; use model.depth %lld or less (0 picks it), or "
                    "resize the data (data.resize)",
                    (long long)m->depth, (long long)m->depth, (long long)m->H, (long long)m->W,
                    (long long)f, (long long)auto_depth(m->H, m->W));
  if (m->d_layers < 1 || m->d_layers > P2P_MAX_DEPTH)
    return h->error(m->ctx, GANFW_ERR_CONFIG, "unet_patchgan: model.d_layers is %lld; use 1 to %d",
                    (long long)m->d_layers, P2P_MAX_DEPTH);
  int64_t s = m->H < m->W ? m->H : m->W, most = 0;
  for (int64_t k = 1; k <= P2P_MAX_DEPTH && (s >> k) >= 3; k++) most = k;
  if ((s >> m->d_layers) < 3)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "unet_patchgan: model.d_layers %lld halves the %lldx%lld images to less than "
                    "3 pixels, leaving no patch for the last two convs; use model.d_layers %lld "
                    "or less",
                    (long long)m->d_layers, (long long)m->H, (long long)m->W, (long long)most);
  return GANFW_OK;
}

static ganfw_status read_config(p2p_model *m, const ganfw_cfg *cfg) {
  const ganfw_host *h = m->host;
  const char *output = NULL;
  ganfw_status st;
  if ((st = h->cfg_int(cfg, "channels", 64, &m->ch)) ||
      (st = h->cfg_int(cfg, "depth", 0, &m->depth)) ||
      (st = h->cfg_string(cfg, "output", "tanh", &output)) ||
      (st = h->cfg_float(cfg, "dropout", 0.0, &m->dropout)) ||
      (st = h->cfg_int(cfg, "d_channels", 64, &m->d_ch)) ||
      (st = h->cfg_int(cfg, "d_layers", 3, &m->d_layers)))
    return st;
  m->out_act = strcmp(output, "tanh") == 0      ? GANFW_ACT_TANH
               : strcmp(output, "sigmoid") == 0 ? GANFW_ACT_SIGMOID
               : strcmp(output, "none") == 0    ? GANFW_ACT_IDENTITY
                                                : -1;
  if (m->out_act < 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "unet_patchgan: model.output is '%s'; use tanh (data in [-1, 1], the default "
                    "normalize), sigmoid (data in [0, 1]) or none",
                    output);
  return check_sizes(m);
}

static ganfw_status p2p_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                               const ganfw_data_info *data, void **self) {
  *self = NULL;
  if (!GANFW_HOST_HAS(host, net_concat))
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "unet_patchgan: this core's host table has no graph nets (net_input, "
                       "net_concat, ABI 1.3); use a newer ganfw");
  p2p_model *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "unet_patchgan: out of host memory");
  *m = (p2p_model){
      .host = host, .ctx = ctx, .C = data->channels, .H = data->height, .W = data->width};
  ganfw_status st = read_config(m, cfg);
  if (st == GANFW_OK) {
    m->g = host->net_create(ctx, "generator");
    m->d = host->net_create(ctx, "discriminator");
    st = m->g && m->d ? GANFW_OK : GANFW_ERR_OOM;
  }
  if (st == GANFW_OK) st = build_generator(m);
  if (st == GANFW_OK) st = build_discriminator(m);
  if (st == GANFW_OK) st = weights_init(m, m->g);
  if (st == GANFW_OK) st = weights_init(m, m->d);
  if (st != GANFW_OK) {
    p2p_destroy(m);
    return st;
  }
  host->log(ctx, GANFW_LOG_INFO,
            "unet_patchgan: U-Net of %lld levels (%lldx%lld at the bottom), PatchGAN of %lld "
            "stride-2 convs",
            (long long)m->depth, (long long)(m->H >> m->depth), (long long)(m->W >> m->depth),
            (long long)m->d_layers);
  *self = m;
  return GANFW_OK;
}

static ganfw_net *p2p_net(void *self, const char *role) {
  p2p_model *m = self;
  if (!role) return NULL;
  if (strcmp(role, "generator") == 0) return m->g;
  if (strcmp(role, "discriminator") == 0) return m->d;
  return NULL;
}

static const ganfw_config_key keys[] = {
    {"channels", GANFW_KEY_INT, 0, 64, 0, NULL, NULL, "U-Net width of the first level"},
    {"depth", GANFW_KEY_INT, 0, 0, 0, NULL, NULL,
     "U-Net levels (each halves H and W); 0: as many as the size allows, at most 8"},
    {"output", GANFW_KEY_STRING, 0, 0, 0, "tanh", NULL, "generator's last activation"},
    {"dropout", GANFW_KEY_FLOAT, 0, 0, 0.0, NULL, NULL, "in the decoder's inner levels"},
    {"d_channels", GANFW_KEY_INT, 0, 64, 0, NULL, NULL, "PatchGAN width of the first conv"},
    {"d_layers", GANFW_KEY_INT, 0, 3, 0, NULL, NULL, "PatchGAN stride-2 convs (3: 70x70)"},
};
static const ganfw_config_keys key_table = {keys, sizeof keys / sizeof keys[0]};

static const void *p2p_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &key_table : NULL;
}

static const ganfw_model_vt p2p_vt = {
    .struct_size = sizeof(ganfw_model_vt),
    .kind = GANFW_VT_TAG_MODEL,
    .family = GANFW_MODEL_NETS,
    .create = p2p_create,
    .destroy = p2p_destroy,
    .net = p2p_net,
    .get_extension = p2p_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MODEL,
      .name = "unet_patchgan",
      .version = "1.0.0",
      .description = "pix2pix nets: a U-Net generator and a conditional PatchGAN "
                     "discriminator, for the pix2pix trainer",
      .vtable = &p2p_vt,
  };
  return &desc;
}
