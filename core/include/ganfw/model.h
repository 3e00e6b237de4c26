/* The model plugin interface. A model builds one or more nets from the host's layers:
 * a GAN has a "generator" and a "discriminator", a classifier a "classifier". */
#ifndef GANFW_MODEL_H
#define GANFW_MODEL_H

#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Model families, stored as int32_t: which trainer drives the model. A GAN's default trainer
 * is the built-in `gan`, a classifier's `classifier`; a model of family GANFW_MODEL_NETS
 * (ABI 1.6) builds nets by role for the trainer plugin the config names (`trainer.plugin`). */
enum {
  GANFW_MODEL_GAN = 0,
  GANFW_MODEL_CLASSIFIER = 1,
  GANFW_MODEL_NETS = 2,
  GANFW_MODEL_FAMILY_COUNT
};

/* What the data set looks like; filled by the core before create. A plugin reads a member
 * only when data->struct_size covers it (members are only appended). */
typedef struct ganfw_data_info {
  uint32_t struct_size;
  int32_t channels;
  int32_t height;
  int32_t width;
  int32_t num_classes; /* 0 when unlabelled */
  int32_t reserved0;
} ganfw_data_info;

/* Add new members at the end only, in a block dated with the minor version. Callbacks are
 * [main-thread]. */
typedef struct ganfw_model_vt {
  uint32_t struct_size; /* sizeof(ganfw_model_vt) */
  int32_t family;       /* GANFW_MODEL_* */
  /* Builds the nets from `cfg` (the config's `model` section). *self is owned by the
   * plugin and freed by destroy. */
  ganfw_status (*create)(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                         const ganfw_data_info *data, void **self);
  void (*destroy)(void *self); /* accepts NULL */
  /* The net playing `role` ("generator", "discriminator", "classifier"), or NULL. Owned by
   * the model, valid until destroy. */
  ganfw_net *(*net)(void *self, const char *role);
  /* (optional) Length of the latent vector a generator takes (GAN family). */
  int64_t (*latent_dim)(void *self);

  /* --- added in minor 1 (ABI 1.1, 2026-12) --- */
  uint32_t kind;      /* GANFW_VT_TAG_MODEL (the second field, family, was taken in 1.0) */
  uint32_t reserved0; /* 0 */
  /* (optional) An optional capability by its versioned id (see ganfw/plugin.h), NULL when
   * absent. May be called before create; the result is owned by the plugin, valid until
   * it is unloaded. */
  const void *(*get_extension)(const char *id);
} ganfw_model_vt;

#ifdef __cplusplus
}
#endif
#endif
