/* What the cnn plugin's two builders share: the model's state, nn.Sequential-style names and
 * the activation names. cnn.c builds the `blocks` syntax (a straight stack) and the head;
 * resnet.c the `stem` / `stages` syntax (residual blocks, a graph net). Plugin-internal:
 * nothing here is exported from ganfw_cnn.so. */
#ifndef GANFW_PLUGIN_CNN_H
#define GANFW_PLUGIN_CNN_H

#include <stdint.h>

#include <ganfw/ganfw.h>

/* PyTorch's BatchNorm2d and LeakyReLU defaults. */
#define CNN_BN_EPS           1e-5f
#define CNN_BN_MOMENTUM      0.1f
#define CNN_MAX_BLOCKS       64
#define CNN_MAX_LINEAR       16
#define CNN_MAX_STAGES       16
#define CNN_MAX_STAGE_BLOCKS 256
#define CNN_MAX_CHANNELS     (1 << 16)
#define CNN_NAME_LEN         64

enum { POOL_NONE = -1 };

/* Residual block types of model.block / model.stages[i].block. */
enum { CNN_BLOCK_BASIC = 0, CNN_BLOCK_BOTTLENECK = 1, CNN_BLOCK_COUNT };

/* One conv block of model.blocks. */
typedef struct cnn_block {
  int64_t channels, kernel, stride, padding, pool_kernel;
  int32_t batchnorm, act, pool; /* GANFW_ACT_* (IDENTITY: none), GANFW_POOL_* or POOL_NONE */
  double dropout;
} cnn_block;

/* One stage of model.stages: `blocks` residual blocks of width `channels`, the first with
 * `stride`. */
typedef struct cnn_stage {
  int64_t channels, blocks, stride;
  int32_t block; /* CNN_BLOCK_* */
} cnn_stage;

typedef struct cnn {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  cnn_block blocks[CNN_MAX_BLOCKS];
  int64_t n_blocks;
  int64_t linear[CNN_MAX_LINEAR];
  int64_t n_linear;
  int32_t linear_act;
  double linear_dropout, leaky_slope;
  int64_t in_c, in_h, in_w, num_classes;
  /* the stem / stages syntax (resnet.c); residual 0: the blocks syntax */
  int32_t residual, has_stem, global_pool;
  int64_t stem_channels, stem_kernel, stem_stride, stem_padding;
  cnn_stage stages[CNN_MAX_STAGES];
  int64_t n_stages;
  ganfw_net *net;
} cnn;

/* Appends nn.Sequential entries "<prefix>.<i>", counting every entry as PyTorch does. */
typedef struct cnn_seq {
  const char *prefix;
  int index;
  char name[CNN_NAME_LEN];
} cnn_seq;

const char *cnn_seq_next(cnn_seq *s);

/* "relu" etc. -> GANFW_ACT_*; -1 when unknown. */
int32_t cnn_act_from_name(const char *s);

/* True when model.stem or model.stages is written (the residual syntax). */
int cnn_resnet_wanted(cnn *m, const ganfw_cfg *cfg);
/* Reads model.stem, model.stages, model.block and model.pool into m (errors name
 * model.stages[i].<key>) and checks every stage's shapes on the data's image size. */
ganfw_status cnn_resnet_read(cnn *m, const ganfw_cfg *cfg);
/* Appends the stem, the stages and the pooling to m->net; *features is what the flatten
 * after them gives per sample. */
ganfw_status cnn_resnet_build(cnn *m, int64_t *features);

#endif
