/* The cnn plugin's residual syntax: model.stem, model.stages, model.block, model.pool, built
 * as a graph net with the names of the common CIFAR ResNet code (He et al. 2016; the stem
 * "conv1", "bn1"; block B of stage K "layerK.B.conv1", ".bn1", ..., its projection shortcut
 * "layerK.B.shortcut.0" (Conv2d 1x1) and ".shortcut.1" (BatchNorm2d)), so that a checkpoint
 * loads into that PyTorch module. Images [N,C,H,W] -> features [N,C',H',W'] (pooled to
 * [N,C',1,1] by global average pooling); cnn.c appends the flatten and the linear head. */
#include <stdio.h>
#include <string.h>

#include "cnn.h"

static const char *const block_names[] = {"basic", "bottleneck"};
_Static_assert(sizeof block_names / sizeof block_names[0] == CNN_BLOCK_COUNT, "block names");

/* Output channels of a block of type `block` and width `channels`. */
static int64_t block_out_channels(int32_t block, int64_t channels) {
  return block == CNN_BLOCK_BOTTLENECK ? 4 * channels : channels;
}

/* conv(kernel, stride, padding) output size. */
static int64_t conv_out(int64_t in, int64_t kernel, int64_t stride, int64_t padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

static int32_t block_from_name(const char *s) {
  for (int32_t i = 0; s && i < CNN_BLOCK_COUNT; i++)
    if (strcmp(s, block_names[i]) == 0) return i;
  return -1;
}

int cnn_resnet_wanted(cnn *m, const ganfw_cfg *cfg) {
  return m->host->cfg_child(cfg, "stem") != NULL || m->host->cfg_child(cfg, "stages") != NULL;
}

static ganfw_status read_stem(cnn *m, const ganfw_cfg *stem) {
  const ganfw_host *h = m->host;
  ganfw_status st;
  if ((st = h->cfg_int(stem, "channels", 0, &m->stem_channels)) ||
      (st = h->cfg_int(stem, "kernel", 3, &m->stem_kernel)) ||
      (st = h->cfg_int(stem, "stride", 1, &m->stem_stride)))
    return st;
  if (m->stem_channels <= 0 || m->stem_channels > CNN_MAX_CHANNELS)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.stem.channels must be set to a positive number (at most %d), "
                    "e.g. stem: {channels: 16, kernel: 3}",
                    CNN_MAX_CHANNELS);
  if (m->stem_kernel <= 0 || m->stem_stride <= 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.stem: kernel and stride must be positive (kernel %lld, stride "
                    "%lld)",
                    (long long)m->stem_kernel, (long long)m->stem_stride);
  if ((st = h->cfg_int(stem, "padding", m->stem_kernel / 2, &m->stem_padding))) return st;
  if (m->stem_padding < 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG, "cnn: model.stem.padding must be >= 0");
  if (m->in_h + 2 * m->stem_padding < m->stem_kernel ||
      m->in_w + 2 * m->stem_padding < m->stem_kernel)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.stem: a %lldx%lld image is too small for kernel %lld (padding "
                    "%lld); lower stem.kernel or raise stem.padding",
                    (long long)m->in_h, (long long)m->in_w, (long long)m->stem_kernel,
                    (long long)m->stem_padding);
  return GANFW_OK;
}

static ganfw_status read_stage(cnn *m, const ganfw_cfg *item, int64_t i, int32_t def_block,
                               cnn_stage *s) {
  const ganfw_host *h = m->host;
  const char *block = NULL;
  ganfw_status st;
  if ((st = h->cfg_int(item, "channels", 0, &s->channels)) ||
      (st = h->cfg_int(item, "blocks", 1, &s->blocks)) ||
      (st = h->cfg_int(item, "stride", 1, &s->stride)) ||
      (st = h->cfg_string(item, "block", block_names[def_block], &block)))
    return st;
  if (s->channels <= 0 || s->channels > CNN_MAX_CHANNELS)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.stages[%lld].channels must be set to a positive number (at most "
                    "%d), e.g. {channels: 32, blocks: 3, stride: 2}",
                    (long long)i, CNN_MAX_CHANNELS);
  if (s->blocks <= 0 || s->blocks > CNN_MAX_STAGE_BLOCKS)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.stages[%lld].blocks is %lld; a stage has 1 to %d residual blocks",
                    (long long)i, (long long)s->blocks, CNN_MAX_STAGE_BLOCKS);
  if (s->stride <= 0 || s->stride > 64)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.stages[%lld].stride is %lld; it must be from 1 to 64 (1 keeps "
                    "the size, 2 halves it)",
                    (long long)i, (long long)s->stride);
  if ((s->block = block_from_name(block)) < 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.stages[%lld].block is '%s'; use basic or bottleneck (or leave it "
                    "out for model.block)",
                    (long long)i, block ? block : "");
  if (block_out_channels(s->block, s->channels) > CNN_MAX_CHANNELS)
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.stages[%lld].channels is %lld; a bottleneck block outputs 4x "
                    "that, at most %d",
                    (long long)i, (long long)s->channels, CNN_MAX_CHANNELS);
  return GANFW_OK;
}

ganfw_status cnn_resnet_read(cnn *m, const ganfw_cfg *cfg) {
  const ganfw_host *h = m->host;
  const char *block = NULL, *pool = NULL;
  ganfw_status st;
  if ((st = h->cfg_string(cfg, "block", "basic", &block)) ||
      (st = h->cfg_string(cfg, "pool", "global_avg", &pool)))
    return st;
  int32_t def_block = block_from_name(block);
  if (def_block < 0)
    return h->error(m->ctx, GANFW_ERR_CONFIG, "cnn: model.block is '%s'; use basic or bottleneck",
                    block ? block : "");
  if (pool && strcmp(pool, "global_avg") == 0)
    m->global_pool = 1;
  else if (pool && strcmp(pool, "none") == 0)
    m->global_pool = 0;
  else
    return h->error(m->ctx, GANFW_ERR_CONFIG,
                    "cnn: model.pool is '%s'; use global_avg (nn.AdaptiveAvgPool2d(1)) or none "
                    "(flatten the last stage's maps)",
                    pool ? pool : "");
  const ganfw_cfg *stem = h->cfg_child(cfg, "stem");
  m->has_stem = stem != NULL;
  if (stem && (st = read_stem(m, stem)) != GANFW_OK) return st;
  m->n_stages = h->cfg_list_len(cfg, "stages");
  if (m->n_stages < 0) return GANFW_ERR_CONFIG; /* not a list: the getter said where */
  if (m->n_stages > CNN_MAX_STAGES)
    return h->error(m->ctx, GANFW_ERR_CONFIG, "cnn: model.stages has %lld entries; at most %d",
                    (long long)m->n_stages, CNN_MAX_STAGES);
  for (int64_t i = 0; i < m->n_stages; i++)
    if ((st = read_stage(m, h->cfg_list_at(cfg, "stages", i), i, def_block, &m->stages[i])))
      return st;
  return GANFW_OK;
}

/* The net being built: the shape after the last node and that node's name. */
typedef struct builder {
  cnn *m;
  int64_t c, h, w;
  char last[CNN_NAME_LEN];
} builder;

/* "<prefix>.<what>" into buf. */
static const char *join(char *buf, const char *prefix, const char *what) {
  snprintf(buf, CNN_NAME_LEN, "%s.%s", prefix, what);
  return buf;
}

/* Conv2d (no bias) then BatchNorm2d, named "<prefix>.<conv>" and "<prefix>.<bn>". */
static ganfw_status conv_bn(builder *b, const char *prefix, const char *conv, const char *bn,
                            int64_t cin, int64_t cout, int64_t kernel, int64_t stride,
                            int64_t padding) {
  const ganfw_host *h = b->m->host;
  char name[CNN_NAME_LEN];
  ganfw_status st =
      h->net_conv2d(b->m->net, join(name, prefix, conv), cin, cout, kernel, stride, padding, 0);
  if (st == GANFW_OK)
    st = h->net_batchnorm2d(b->m->net, join(name, prefix, bn), cout, CNN_BN_EPS, CNN_BN_MOMENTUM);
  return st;
}

static ganfw_status relu(builder *b, const char *prefix, const char *what) {
  char name[CNN_NAME_LEN];
  return b->m->host->net_activation(b->m->net, join(name, prefix, what), GANFW_ACT_RELU, 0.0f);
}

/* Block `prefix` ("layerK.B") of type `type` and width `width` on b's current node:
 * basic:      conv1 3x3/stride, bn1, relu1, conv2 3x3, bn2;
 * bottleneck: conv1 1x1, bn1, relu1, conv2 3x3/stride, bn2, relu2, conv3 1x1 (4x width), bn3;
 * then the shortcut (identity, or for another shape "shortcut.0" Conv2d 1x1/stride and
 * "shortcut.1" BatchNorm2d from the block's input), "add" and "relu". */
static ganfw_status residual_block(builder *b, const char *prefix, int32_t type, int64_t width,
                                   int64_t stride) {
  const ganfw_host *h = b->m->host;
  ganfw_net *net = b->m->net;
  char in[CNN_NAME_LEN], last_bn[CNN_NAME_LEN], shortcut[CNN_NAME_LEN], name[CNN_NAME_LEN];
  int64_t cin = b->c, cout = block_out_channels(type, width);
  snprintf(in, sizeof in, "%s", b->last);
  ganfw_status st;
  if (type == CNN_BLOCK_BASIC) {
    st = conv_bn(b, prefix, "conv1", "bn1", cin, width, 3, stride, 1);
    if (st == GANFW_OK) st = relu(b, prefix, "relu1");
    if (st == GANFW_OK) st = conv_bn(b, prefix, "conv2", "bn2", width, width, 3, 1, 1);
    join(last_bn, prefix, "bn2");
  } else {
    st = conv_bn(b, prefix, "conv1", "bn1", cin, width, 1, 1, 0);
    if (st == GANFW_OK) st = relu(b, prefix, "relu1");
    if (st == GANFW_OK) st = conv_bn(b, prefix, "conv2", "bn2", width, width, 3, stride, 1);
    if (st == GANFW_OK) st = relu(b, prefix, "relu2");
    if (st == GANFW_OK) st = conv_bn(b, prefix, "conv3", "bn3", width, cout, 1, 1, 0);
    join(last_bn, prefix, "bn3");
  }
  if (stride != 1 || cin != cout) { /* option B: a projection where the shape changes */
    if (st == GANFW_OK) st = h->net_input(net, in);
    if (st == GANFW_OK)
      st = conv_bn(b, prefix, "shortcut.0", "shortcut.1", cin, cout, 1, stride, 0);
    join(shortcut, prefix, "shortcut.1");
  } else {
    snprintf(shortcut, sizeof shortcut, "%s", in);
  }
  const char *inputs[2] = {last_bn, shortcut};
  if (st == GANFW_OK) st = h->net_add(net, join(name, prefix, "add"), inputs, 2);
  if (st == GANFW_OK) st = relu(b, prefix, "relu");
  join(b->last, prefix, "relu");
  b->c = cout;
  b->h = conv_out(b->h, 3, stride, 1);
  b->w = conv_out(b->w, 3, stride, 1);
  return st;
}

ganfw_status cnn_resnet_build(cnn *m, int64_t *features) {
  const ganfw_host *h = m->host;
  builder b = {.m = m, .c = m->in_c, .h = m->in_h, .w = m->in_w, .last = "input"};
  ganfw_status st = GANFW_OK;
  if (m->has_stem) {
    st = h->net_conv2d(m->net, "conv1", m->in_c, m->stem_channels, m->stem_kernel, m->stem_stride,
                       m->stem_padding, 0);
    if (st == GANFW_OK)
      st = h->net_batchnorm2d(m->net, "bn1", m->stem_channels, CNN_BN_EPS, CNN_BN_MOMENTUM);
    if (st == GANFW_OK) st = h->net_activation(m->net, "relu", GANFW_ACT_RELU, 0.0f);
    snprintf(b.last, sizeof b.last, "relu");
    b.c = m->stem_channels;
    b.h = conv_out(b.h, m->stem_kernel, m->stem_stride, m->stem_padding);
    b.w = conv_out(b.w, m->stem_kernel, m->stem_stride, m->stem_padding);
  }
  for (int64_t k = 0; k < m->n_stages && st == GANFW_OK; k++) {
    const cnn_stage *s = &m->stages[k];
    for (int64_t i = 0; i < s->blocks && st == GANFW_OK; i++) {
      char prefix[32]; /* k < CNN_MAX_STAGES, i < CNN_MAX_STAGE_BLOCKS */
      snprintf(prefix, sizeof prefix, "layer%d.%d", (int)k + 1, (int)i);
      st = residual_block(&b, prefix, s->block, s->channels, i == 0 ? s->stride : 1);
    }
  }
  if (st == GANFW_OK && m->global_pool) {
    st = h->net_global_avg_pool(m->net, "avgpool");
    b.h = b.w = 1;
  }
  *features = b.c * b.h * b.w;
  return st;
}
