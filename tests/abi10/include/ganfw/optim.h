/* The optimizer plugin interface. An optimizer updates f32 master parameters from their
 * f32 gradients with the host's foreach ops, so one plugin runs on every backend. */
#ifndef GANFW_OPTIM_H
#define GANFW_OPTIM_H

#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One trainable parameter. Owned by the core; valid until the optimizer is destroyed. */
typedef struct ganfw_param {
  const char *name;    /* state_dict-style name, e.g. "main.0.weight" */
  ganfw_tensor *value; /* f32 master weights */
  ganfw_tensor *grad;  /* f32 gradient, same shape */
} ganfw_param;

typedef struct ganfw_optim_vt {
  uint32_t struct_size; /* sizeof(ganfw_optim_vt) */
  uint32_t reserved0;
  /* Creates an optimizer over params[0..n) with the settings of `cfg` (the config's
   * `optim` section). *self is owned by the plugin and freed by destroy. State tensors are
   * created through host->tensor_create with category GANFW_MEM_OPTIM_STATE. */
  ganfw_status (*create)(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                         const ganfw_param *params, int64_t n, void **self);
  void (*destroy)(void *self); /* accepts NULL */
  /* One update at learning rate lr (the core applies the schedule). */
  ganfw_status (*step)(void *self, double lr);
  /* (optional) The i-th state tensor for checkpoints and its name (borrowed, valid until
   * destroy), or NULL past the end. */
  ganfw_tensor *(*state_tensor)(void *self, int64_t i, const char **name);
  /* (optional) The number of steps taken, and setting it back on resume. */
  int64_t (*get_step)(void *self);
  void (*set_step)(void *self, int64_t step);
} ganfw_optim_vt;

#ifdef __cplusplus
}
#endif
#endif
