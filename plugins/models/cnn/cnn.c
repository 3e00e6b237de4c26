/* The configurable CNN classifier plugin (ganfw_cnn.so): conv blocks, then linear layers,
 * as a PyTorch module with `features` (nn.Sequential of the blocks' layers), a flatten and
 * `classifier` (nn.Sequential of the linear layers), so the state_dict names match; or, with
 * model.stem / model.stages, a residual network (resnet.c) and its `linear` head. Maps
 * images [N,C,H,W] to logits [N,num_classes]. Shapes are checked block by block before the
 * net is built, so that an error names the config entry (model.blocks[i], model.stages[i]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn.h"

static void cnn_destroy(void *self) {
  cnn *m = self;
  if (!m) return;
  if (m->host) m->host->net_destroy(m->net);
  free(m);
}

int32_t cnn_act_from_name(const char *s) {
  static const struct {
    const char *name;
    int32_t kind;
  } acts[] = {{"relu", GANFW_ACT_RELU},
              {"leaky_relu", GANFW_ACT_LEAKY_RELU},
              {"tanh", GANFW_ACT_TANH},
              {"sigmoid", GANFW_ACT_SIGMOID},
              {"none", GANFW_ACT_IDENTITY}};
  for (size_t i = 0; s && i < sizeof acts / sizeof acts[0]; i++)
    if (strcmp(s, acts[i].name) == 0) return acts[i].kind;
  return -1;
}

static ganfw_status read_block(cnn *m, const ganfw_cfg *item, int64_t i, cnn_block *b) {
  const ganfw_host *h = m->host;
  const char *act = NULL, *pool = NULL;
  ganfw_status st;
  if ((st = h->cfg_int(item, "channels", 0, &b->channels)) ||
      (st = h->cfg_int(item, "kernel", 3, &b->kernel)) ||
      (st = h->cfg_int(item, "stride", 1, &b->stride)))
    return st;
  if (b->channels <= 0 || b->channels > (1 << 16))
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.blocks[%lld].channels must be set to a positive number (at most "
                    "65536), e.g. {channels: 32}",
                    (long long)i);
  if (b->kernel <= 0 || b->stride <= 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.blocks[%lld]: kernel and stride must be positive", (long long)i);
  if ((st = h->cfg_int(item, "padding", b->kernel / 2, &b->padding)) ||
      (st = h->cfg_bool(item, "batchnorm", 1, &b->batchnorm)) ||
      (st = h->cfg_string(item, "activation", "relu", &act)) ||
      (st = h->cfg_string(item, "pool", "none", &pool)) ||
      (st = h->cfg_int(item, "pool_kernel", 2, &b->pool_kernel)) ||
      (st = h->cfg_float(item, "dropout", 0.0, &b->dropout)))
    return st;
  if (b->padding < 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG, "cnn: model.blocks[%lld].padding must be >= 0",
                    (long long)i);
  if ((b->act = cnn_act_from_name(act)) < 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.blocks[%lld].activation is '%s'; use relu, leaky_relu, tanh, "
                    "sigmoid or none",
                    (long long)i, act ? act : "");
  if (pool && strcmp(pool, "max") == 0)
    b->pool = GANFW_POOL_MAX;
  else if (pool && strcmp(pool, "avg") == 0)
    b->pool = GANFW_POOL_AVG;
  else if (!pool || strcmp(pool, "none") == 0)
    b->pool = POOL_NONE;
  else
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.blocks[%lld].pool is '%s'; use none, max or avg", (long long)i,
                    pool);
  if (b->pool != POOL_NONE && b->pool_kernel <= 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.blocks[%lld].pool_kernel must be positive", (long long)i);
  if (!(b->dropout >= 0.0 && b->dropout < 1.0))
    return h->error(m->ctx, GANFW_ERR_CONFIG, "cnn: model.blocks[%lld].dropout must be in [0, 1)",
                    (long long)i);
  return GANFW_OK;
}

static ganfw_status read_config(cnn *m, const ganfw_cfg *cfg, const ganfw_data_info *data) {
  const ganfw_host *h = m->host;
  int64_t data_classes = 0;
  m->in_c = data ? data->channels : 0;
  m->in_h = data ? data->height : 0;
  m->in_w = data ? data->width : 0;
  if (data && data->struct_size >= offsetof(ganfw_data_info, num_classes) + sizeof(int32_t))
    data_classes = data->num_classes;
  if (m->in_c <= 0 || m->in_h <= 0 || m->in_w <= 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: the data's image shape is unknown (%lldx%lldx%lld)", (long long)m->in_c,
                    (long long)m->in_h, (long long)m->in_w);
  ganfw_status st = h->cfg_int(cfg, "num_classes", data_classes, &m->num_classes);
  if (st != GANFW_OK) return st;
  if (m->num_classes < 2 || m->num_classes > (1 << 20))
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.num_classes is %lld; a classifier needs at least 2 classes (the "
                    "data set's labels give it, or set model.num_classes)",
                    (long long)m->num_classes);
  m->n_blocks = h->cfg_list_len(cfg, "blocks");
  if (m->n_blocks < 0) return GANFW_ERR_CONFIG; /* not a list: the getter said where */
  m->residual = cnn_resnet_wanted(m, cfg);
  if (m->residual && h->cfg_child(cfg, "blocks"))
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.blocks and model.stem/model.stages are two ways to write the "
                    "conv layers; use one of them");
  if (m->residual && (st = cnn_resnet_read(m, cfg)) != GANFW_OK) return st;
  if (m->n_blocks > CNN_MAX_BLOCKS)
    return h->error(m->ctx, GANFW_ERR_CONFIG, "cnn: model.blocks has %lld entries; at most %d",
                    (long long)m->n_blocks, CNN_MAX_BLOCKS);
  for (int64_t i = 0; i < m->n_blocks; i++)
    if ((st = read_block(m, h->cfg_list_at(cfg, "blocks", i), i, &m->blocks[i])) != GANFW_OK)
      return st;
  m->n_linear = h->cfg_list_len(cfg, "linear");
  if (m->n_linear < 0) return GANFW_ERR_CONFIG;
  if (m->n_linear > CNN_MAX_LINEAR)
    return h->error(m->ctx, GANFW_ERR_CONFIG, "cnn: model.linear has %lld entries; at most %d",
                    (long long)m->n_linear, CNN_MAX_LINEAR);
  for (int64_t i = 0; i < m->n_linear; i++) {
    if ((st = h->cfg_int(h->cfg_list_at(cfg, "linear", i), NULL, 0, &m->linear[i])) != GANFW_OK)
      return st;
    if (m->linear[i] <= 0 || m->linear[i] > (1 << 24))
      return h->error(m->ctx, GANFW_ERR_CONFIG,
                      "cnn: model.linear[%lld] is %lld; hidden sizes must be positive",
                      (long long)i, (long long)m->linear[i]);
  }
  const char *act = NULL;
  if ((st = h->cfg_string(cfg, "linear_activation", "relu", &act)) ||
      (st = h->cfg_float(cfg, "linear_dropout", 0.0, &m->linear_dropout)) ||
      (st = h->cfg_float(cfg, "leaky_slope", 0.01, &m->leaky_slope)))
    return st;
  if ((m->linear_act = cnn_act_from_name(act)) < 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.linear_activation is '%s'; use relu, leaky_relu, tanh, sigmoid "
                    "or none",
                    act ? act : "");
  if (!(m->linear_dropout >= 0.0 && m->linear_dropout < 1.0) || !(m->leaky_slope >= 0.0))
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.linear_dropout must be in [0, 1) and model.leaky_slope >= 0");
  return GANFW_OK;
}

const char *cnn_seq_next(cnn_seq *s) {
  snprintf(s->name, sizeof s->name, "%s.%d", s->prefix, s->index++);
  return s->name;
}

/* Activation `act` as the next entry, unless it is none. */
static ganfw_status add_act(cnn *m, cnn_seq *s, int32_t act) {
  if (act == GANFW_ACT_IDENTITY) return GANFW_OK;
  float alpha = act == GANFW_ACT_LEAKY_RELU ? (float)m->leaky_slope : 0.0f;
  return m->host->net_activation(m->net, cnn_seq_next(s), act, alpha);
}

/* Block i on a [c,hh,ww] input: checks its shapes (errors name model.blocks[i]), appends
 * Conv2d (bias only without BatchNorm), BatchNorm2d, activation, pooling (stride = its
 * kernel, as nn.MaxPool2d(k)) and Dropout, and updates the shape. */
static ganfw_status add_block(cnn *m, cnn_seq *s, int64_t i, int64_t *c, int64_t *hh, int64_t *ww) {
  const ganfw_host *h = m->host;
  const cnn_block *b = &m->blocks[i];
  int64_t ph = *hh + 2 * b->padding, pw = *ww + 2 * b->padding;
  if (ph < b->kernel || pw < b->kernel)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "model.blocks[%lld]: a %lldx%lld input is too small for kernel %lld (padding "
                    "%lld); remove a pooling or a stride before it, or lower its kernel",
                    (long long)i, (long long)*hh, (long long)*ww, (long long)b->kernel,
                    (long long)b->padding);
  int64_t oh = (ph - b->kernel) / b->stride + 1, ow = (pw - b->kernel) / b->stride + 1;
  if (b->pool != POOL_NONE && (oh < b->pool_kernel || ow < b->pool_kernel))
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "model.blocks[%lld]: the conv's %lldx%lld output is too small for "
                    "pool_kernel %lld; set pool: none there",
                    (long long)i, (long long)oh, (long long)ow, (long long)b->pool_kernel);
  ganfw_status st = h->net_conv2d(m->net, cnn_seq_next(s), *c, b->channels, b->kernel, b->stride,
                                  b->padding, !b->batchnorm);
  if (st == GANFW_OK && b->batchnorm)
    st = h->net_batchnorm2d(m->net, cnn_seq_next(s), b->channels, CNN_BN_EPS, CNN_BN_MOMENTUM);
  if (st == GANFW_OK) st = add_act(m, s, b->act);
  if (st == GANFW_OK && b->pool != POOL_NONE) {
    st = h->net_pool2d(m->net, cnn_seq_next(s), b->pool, b->pool_kernel, b->pool_kernel, 0);
    oh = (oh - b->pool_kernel) / b->pool_kernel + 1;
    ow = (ow - b->pool_kernel) / b->pool_kernel + 1;
  }
  if (st == GANFW_OK && b->dropout > 0)
    st = h->net_dropout(m->net, cnn_seq_next(s), (float)b->dropout);
  *c = b->channels;
  *hh = oh;
  *ww = ow;
  return st;
}

/* The parameter count of the built net, for the log. */
static int64_t param_total(cnn *m) {
  int64_t total = 0, n = m->host->net_param_count(m->net);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    if (m->host->net_param_info(m->net, i, &p) == GANFW_OK) total += p.value->numel;
  }
  return total;
}

/* The conv part (blocks, or stem and stages), the flatten, then the head: nn.Sequential
 * `classifier` (hidden Linear, activation, Dropout, ..., the output Linear), or for a
 * residual net without hidden layers the single Linear `linear` of the CIFAR ResNet code. */
static ganfw_status build(cnn *m) {
  const ganfw_host *h = m->host;
  cnn_seq features = {.prefix = "features"}, classifier = {.prefix = "classifier"};
  int64_t c = m->in_c, hh = m->in_h, ww = m->in_w, in = 0;
  ganfw_status st = GANFW_OK;
  if (m->residual) {
    st = cnn_resnet_build(m, &in);
  } else {
    for (int64_t i = 0; i < m->n_blocks && st == GANFW_OK; i++)
      st = add_block(m, &features, i, &c, &hh, &ww);
    in = c * hh * ww;
  }
  if (st == GANFW_OK) st = h->net_flatten(m->net, "flatten");
  for (int64_t i = 0; i < m->n_linear && st == GANFW_OK; i++) {
    st = h->net_linear(m->net, cnn_seq_next(&classifier), in, m->linear[i], 1);
    if (st == GANFW_OK) st = add_act(m, &classifier, m->linear_act);
    if (st == GANFW_OK && m->linear_dropout > 0)
      st = h->net_dropout(m->net, cnn_seq_next(&classifier), (float)m->linear_dropout);
    in = m->linear[i];
  }
  const char *out = m->residual && m->n_linear == 0 ? "linear" : cnn_seq_next(&classifier);
  if (st == GANFW_OK) st = h->net_linear(m->net, out, in, m->num_classes, 1);
  if (st == GANFW_OK) st = h->net_build(m->net, m->in_c, m->in_h, m->in_w);
  if (st == GANFW_OK && m->residual)
    h->log(m->ctx, GANFW_LOG_INFO, "cnn: residual net, %lld stage(s), %lld parameters",
           (long long)m->n_stages, (long long)param_total(m));
  return st;
}

static ganfw_status cnn_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                               const ganfw_data_info *data, void **self) {
  *self = NULL;
  if (!host->net_create || !host->net_build || !host->net_flatten)
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "cnn: this core's host table has no net builder entries; use a ganfw "
                       "core of ABI %d.%d or later",
                       GANFW_ABI_MAJOR, GANFW_ABI_MINOR);
  cnn *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "cnn: out of host memory");
  m->host = host;
  m->ctx = ctx;
  ganfw_status st = read_config(m, cfg, data);
  if (st == GANFW_OK && m->residual &&
      (!GANFW_HOST_HAS(host, net_add) || !host->net_input || !host->net_add ||
       !host->net_global_avg_pool))
    st = host->error(ctx, GANFW_ERR_PLUGIN,
                     "cnn: model.stem/model.stages build a residual net, which needs the core's "
                     "graph entries (net_input, net_add of ABI 1.3); this core does not offer "
                     "them: use a ganfw core with the graph executor, or write model.blocks");
  if (st == GANFW_OK) {
    m->net = host->net_create(ctx, "classifier");
    st = m->net ? build(m) : GANFW_ERR_OOM;
  }
  if (st != GANFW_OK) {
    cnn_destroy(m);
    return st;
  }
  *self = m;
  return GANFW_OK;
}

static ganfw_net *cnn_net(void *self, const char *role) {
  cnn *m = self;
  return role && strcmp(role, "classifier") == 0 ? m->net : NULL;
}

static const ganfw_model_vt cnn_vt = {
    .struct_size = sizeof(ganfw_model_vt),
    .kind = GANFW_VT_TAG_MODEL,
    .family = GANFW_MODEL_CLASSIFIER,
    .create = cnn_create,
    .destroy = cnn_destroy,
    .net = cnn_net,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MODEL,
      .name = "cnn",
      .version = "1.1.0",
      .description = "configurable CNN classifier: conv blocks (BN, activation, pooling, "
                     "dropout) or a ResNet (stem, stages of basic or bottleneck residual "
                     "blocks), then linear layers",
      .vtable = &cnn_vt,
  };
  return &desc;
}
