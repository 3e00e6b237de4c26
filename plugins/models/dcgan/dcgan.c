/* The DC-GAN model plugin (ganfw_dcgan.so): the generator and discriminator of PyTorch's
 * examples/dcgan/main.py, with their state_dict names and weights_init. G maps a latent
 * [N,nz,1,1] to an image [N,channels,S,S] in [-1,1] (Tanh); D maps an image to a logit
 * [N,1,1,1] (the example's final Sigmoid is left out: the trainer uses BCE-with-logits).
 * S is 64 (the example's four up/down stages) or 32 (one stage fewer). model.batchnorm:
 * false leaves out every BatchNorm2d (the Sequential indices then count without them).
 * model.d_norm (batchnorm, layernorm, instancenorm, none; default batchnorm, or none with
 * model.batchnorm: false) sets D's alone: the WGAN-GP critic uses nn.LayerNorm([C,H,W]),
 * since a penalty on D's input gradient refuses BatchNorm.
 * model.upsample: pixel_shuffle makes G's stride-2 stages sub-pixel convolutions (Shi et al.
 * 2016, ESPCN): Conv2d(ch, 4*out, 3, 1, 1) then PixelShuffle(2), in place of each
 * ConvTranspose2d(ch, out, 4, 2, 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

/* PyTorch's BatchNorm2d defaults and the example's LeakyReLU slope. */
#define DCGAN_BN_EPS      1e-5f
#define DCGAN_BN_MOMENTUM 0.1f
#define DCGAN_LEAKY_SLOPE 0.2f
#define DCGAN_INIT_STD    0.02f
#define DCGAN_LN_EPS      1e-5f /* nn.LayerNorm's and nn.InstanceNorm2d's default */

/* model.d_norm: what follows each stride-2 conv of D after the first. */
enum { DCGAN_NORM_NONE = 0, DCGAN_NORM_BATCH, DCGAN_NORM_LAYER, DCGAN_NORM_INSTANCE };
static const char *const dcgan_norm_names[] = {"none", "batchnorm", "layernorm", "instancenorm"};

typedef struct dcgan {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  int64_t image_size, channels, nz, ngf, ndf;
  int32_t batchnorm;     /* 0: no BatchNorm2d layers */
  int32_t d_norm;        /* model.d_norm: the discriminator's normalisation (DCGAN_NORM_*) */
  int32_t pixel_shuffle; /* model.upsample: pixel_shuffle (1) or conv_transpose (0) */
  int64_t classes;       /* model.conditional: the data set's K; G takes nz + K channels (the
                            core joins the class one-hot to the noise) and D C + K (K one-hot
                            maps after the image); 0: unconditional */
  ganfw_net *g, *d;
} dcgan;

static void dcgan_destroy(void *self) {
  dcgan *m = self;
  if (!m) return;
  if (m->host) {
    m->host->net_destroy(m->g);
    m->host->net_destroy(m->d);
  }
  free(m);
}

/* Appends nn.Sequential entries "main.<i>", counting every entry as PyTorch does. */
typedef struct seq {
  int index;
  char name[32];
} seq;

static const char *seq_next(seq *s) {
  snprintf(s->name, sizeof s->name, "main.%d", s->index++);
  return s->name;
}

/* One upsampling by 2 of G from `in` to `out` channels: ConvT(in, out, 4, 2, 1), or
 * Conv(in, 4*out, 3, 1, 1) PixelShuffle(2) (model.upsample: pixel_shuffle). */
static ganfw_status up2(dcgan *m, seq *s, int64_t in, int64_t out) {
  const ganfw_host *h = m->host;
  if (!m->pixel_shuffle) return h->net_conv_transpose2d(m->g, seq_next(s), in, out, 4, 2, 1, 0, 0);
  ganfw_status st = h->net_conv2d(m->g, seq_next(s), in, 4 * out, 3, 1, 1, 0);
  return st ? st : h->net_pixel_shuffle(m->g, seq_next(s), 2, 0);
}

/* Generator: ConvT(nz, ngf*2^k, 4, 1, 0) BN ReLU, then k stride-2 upsamplings (up2) BN ReLU
 * halving the channels (4x4 -> S/2 x S/2), then up2(ngf, channels) Tanh. k = 3 for S = 64
 * (the example), 2 for S = 32. */
static ganfw_status build_generator(dcgan *m, int stages) {
  const ganfw_host *h = m->host;
  seq s = {0};
  int64_t ch = m->ngf << stages;
  ganfw_status st =
      h->net_conv_transpose2d(m->g, seq_next(&s), m->nz + m->classes, ch, 4, 1, 0, 0, 0);
  if (!st && m->batchnorm)
    st = h->net_batchnorm2d(m->g, seq_next(&s), ch, DCGAN_BN_EPS, DCGAN_BN_MOMENTUM);
  if (!st) st = h->net_activation(m->g, seq_next(&s), GANFW_ACT_RELU, 0.0f);
  for (int i = 0; i < stages && !st; i++, ch /= 2) {
    st = up2(m, &s, ch, ch / 2);
    if (!st && m->batchnorm)
      st = h->net_batchnorm2d(m->g, seq_next(&s), ch / 2, DCGAN_BN_EPS, DCGAN_BN_MOMENTUM);
    if (!st) st = h->net_activation(m->g, seq_next(&s), GANFW_ACT_RELU, 0.0f);
  }
  if (!st) st = up2(m, &s, m->ngf, m->channels);
  if (!st) st = h->net_activation(m->g, seq_next(&s), GANFW_ACT_TANH, 0.0f);
  if (!st) st = h->net_build(m->g, m->nz + m->classes, 1, 1);
  return st;
}

/* Discriminator: Conv(channels, ndf, 4, 2, 1) LeakyReLU (no BN), then k stride-2 Conv BN
 * LeakyReLU stages doubling the channels (down to 4x4), then Conv(ndf*2^k, 1, 4, 1, 0). */
static ganfw_status build_discriminator(dcgan *m, int stages) {
  const ganfw_host *h = m->host;
  seq s = {0};
  int64_t ch = m->ndf;
  ganfw_status st = h->net_conv2d(m->d, seq_next(&s), m->channels + m->classes, ch, 4, 2, 1, 0);
  if (!st) st = h->net_activation(m->d, seq_next(&s), GANFW_ACT_LEAKY_RELU, DCGAN_LEAKY_SLOPE);
  for (int i = 0; i < stages && !st; i++, ch *= 2) {
    st = h->net_conv2d(m->d, seq_next(&s), ch, ch * 2, 4, 2, 1, 0);
    const int64_t side = m->image_size >> (i + 2), ln[3] = {ch * 2, side, side};
    if (!st && m->d_norm == DCGAN_NORM_BATCH)
      st = h->net_batchnorm2d(m->d, seq_next(&s), ch * 2, DCGAN_BN_EPS, DCGAN_BN_MOMENTUM);
    if (!st && m->d_norm == DCGAN_NORM_LAYER)
      st = h->net_layernorm(m->d, seq_next(&s), 3, ln, DCGAN_LN_EPS, 1);
    if (!st && m->d_norm == DCGAN_NORM_INSTANCE)
      st = h->net_instancenorm2d(m->d, seq_next(&s), ch * 2, DCGAN_LN_EPS, 1);
    if (!st) st = h->net_activation(m->d, seq_next(&s), GANFW_ACT_LEAKY_RELU, DCGAN_LEAKY_SLOPE);
  }
  if (!st) st = h->net_conv2d(m->d, seq_next(&s), ch, 1, 4, 1, 0, 0);
  if (!st) st = h->net_build(m->d, m->channels + m->classes, m->image_size, m->image_size);
  return st;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The example's weights_init: conv and transposed-conv weights N(0, 0.02); BatchNorm
 * weights N(1, 0.02) and biases 0. (No conv here has a bias.) Layer and instance norms keep
 * PyTorch's reset_parameters (ones and zeros). */
static ganfw_status weights_init(dcgan *m, ganfw_net *net) {
  const ganfw_host *h = m->host;
  int64_t n = h->net_param_count(net);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    ganfw_status st = h->net_param_info(net, i, &p);
    if (st != GANFW_OK) return st;
    int is_bias = ends_with(p.name, ".bias");
    if (strcmp(p.layer_type, "batchnorm2d") == 0)
      st = is_bias ? h->foreach_fill(m->ctx, &p.value, 1, 0.0f)
                   : h->rng_normal(m->ctx, p.value, 1.0f, DCGAN_INIT_STD);
    else if (strcmp(p.layer_type, "conv2d") == 0 || strcmp(p.layer_type, "conv_transpose2d") == 0)
      st = is_bias ? h->foreach_fill(m->ctx, &p.value, 1, 0.0f)
                   : h->rng_normal(m->ctx, p.value, 0.0f, DCGAN_INIT_STD);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

static ganfw_status read_config(dcgan *m, const ganfw_cfg *cfg, const ganfw_data_info *data) {
  const ganfw_host *h = m->host;
  int64_t data_channels = 3;
  if (data && data->struct_size >= offsetof(ganfw_data_info, channels) + sizeof(int32_t) &&
      data->channels > 0)
    data_channels = data->channels;
  ganfw_status st;
  if ((st = h->cfg_int(cfg, "image_size", 64, &m->image_size)) != GANFW_OK) return st;
  if ((st = h->cfg_int(cfg, "channels", data_channels, &m->channels)) != GANFW_OK) return st;
  if ((st = h->cfg_int(cfg, "nz", 100, &m->nz)) != GANFW_OK) return st;
  if ((st = h->cfg_int(cfg, "ngf", 64, &m->ngf)) != GANFW_OK) return st;
  if ((st = h->cfg_int(cfg, "ndf", 64, &m->ndf)) != GANFW_OK) return st;
  if ((st = h->cfg_bool(cfg, "batchnorm", 1, &m->batchnorm)) != GANFW_OK) return st;
  const char *d_norm = NULL;
  if ((st = h->cfg_string(cfg, "d_norm", dcgan_norm_names[m->batchnorm ? DCGAN_NORM_BATCH : 0],
                          &d_norm)) != GANFW_OK)
    return st;
  m->d_norm = -1;
  for (int i = 0; i < 4 && d_norm; i++)
    if (strcmp(d_norm, dcgan_norm_names[i]) == 0) m->d_norm = i;
  if (m->d_norm < 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "dcgan: model.d_norm is '%s'; use batchnorm (the example's), layernorm "
                    "(nn.LayerNorm over [C,H,W], the WGAN-GP critic's), instancenorm or none",
                    d_norm ? d_norm : "");
  if ((m->d_norm == DCGAN_NORM_LAYER && !GANFW_HOST_HAS(h, net_layernorm)) ||
      (m->d_norm == DCGAN_NORM_INSTANCE && !GANFW_HOST_HAS(h, net_instancenorm2d)))
    return h->error(m->ctx, GANFW_ERR_PLUGIN,
                    "dcgan: model.d_norm: %s needs a newer ganfw core (its host table has no "
                    "builder for it)",
                    d_norm);
  const char *upsample = NULL;
  if ((st = h->cfg_string(cfg, "upsample", "conv_transpose", &upsample)) != GANFW_OK) return st;
  m->pixel_shuffle = upsample && strcmp(upsample, "pixel_shuffle") == 0;
  if (!m->pixel_shuffle && !(upsample && strcmp(upsample, "conv_transpose") == 0))
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "dcgan: model.upsample is '%s'; use conv_transpose (the example's) or "
                    "pixel_shuffle (Conv2d then PixelShuffle(2))",
                    upsample ? upsample : "");
  if (m->pixel_shuffle && !GANFW_HOST_HAS(h, net_pixel_shuffle))
    return h->error(m->ctx, GANFW_ERR_PLUGIN,
                    "dcgan: model.upsample: pixel_shuffle needs the host's net_pixel_shuffle (ABI "
                    "1.8); use a newer ganfw core, or model.upsample: conv_transpose");
  int32_t conditional = 0;
  if ((st = h->cfg_bool(cfg, "conditional", 0, &conditional)) != GANFW_OK) return st;
  if (conditional) {
    const int has = data && data->struct_size >=
                                offsetof(ganfw_data_info, num_classes) + sizeof(data->num_classes);
    m->classes = has ? data->num_classes : 0;
    if (m->classes < 2 || m->classes > (1 << 16))
      return h->error(m->ctx, GANFW_ERR_CONFIG,
                      "dcgan: model.conditional needs a labelled data set; this one has %lld "
                      "classes",
                      (long long)m->classes);
  }
  if (m->image_size != 32 && m->image_size != 64)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "dcgan: model.image_size is %lld; DC-GAN supports 32 or 64 (resize the data "
                    "to one of them)",
                    (long long)m->image_size);
  const struct {
    const char *key;
    int64_t v;
  } sizes[] = {{"channels", m->channels}, {"nz", m->nz}, {"ngf", m->ngf}, {"ndf", m->ndf}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    if (sizes[i].v <= 0 || sizes[i].v > (1 << 16))
      return h->error(m->ctx, GANFW_ERR_CONFIG,
                      "dcgan: model.%s is %lld; it must be a positive number of channels "
                      "(at most 65536)",
                      sizes[i].key, (long long)sizes[i].v);
  return GANFW_OK;
}

static ganfw_status dcgan_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                 const ganfw_data_info *data, void **self) {
  *self = NULL;
  if (!host->net_create || !host->net_build || !host->net_param_info)
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "dcgan: this core's host table has no net builder entries; use a ganfw "
                       "core of ABI %d.%d or later",
                       GANFW_ABI_MAJOR, GANFW_ABI_MINOR);
  dcgan *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "dcgan: out of host memory");
  m->host = host;
  m->ctx = ctx;
  ganfw_status st = read_config(m, cfg, data);
  if (st == GANFW_OK) {
    int stages = m->image_size == 64 ? 3 : 2;
    m->g = host->net_create(ctx, "generator");
    m->d = m->g ? host->net_create(ctx, "discriminator") : NULL;
    if (!m->g || !m->d) st = GANFW_ERR_OOM;
    if (st == GANFW_OK) st = build_generator(m, stages);
    if (st == GANFW_OK) st = build_discriminator(m, stages);
    if (st == GANFW_OK) st = weights_init(m, m->g);
    if (st == GANFW_OK) st = weights_init(m, m->d);
  }
  if (st != GANFW_OK) {
    dcgan_destroy(m);
    return st;
  }
  *self = m;
  return GANFW_OK;
}

static ganfw_net *dcgan_net(void *self, const char *role) {
  dcgan *m = self;
  if (!role) return NULL;
  if (strcmp(role, "generator") == 0) return m->g;
  if (strcmp(role, "discriminator") == 0) return m->d;
  return NULL;
}

static int64_t dcgan_latent_dim(void *self) {
  return ((const dcgan *)self)->nz;
}

static const ganfw_model_vt dcgan_vt = {
    .struct_size = sizeof(ganfw_model_vt),
    .kind = GANFW_VT_TAG_MODEL,
    .family = GANFW_MODEL_GAN,
    .create = dcgan_create,
    .destroy = dcgan_destroy,
    .net = dcgan_net,
    .latent_dim = dcgan_latent_dim,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MODEL,
      .name = "dcgan",
      .version = "1.0.0",
      .description = "DC-GAN generator and discriminator (PyTorch examples/dcgan), 32 or 64 px",
      .vtable = &dcgan_vt,
  };
  return &desc;
}
