/* The optimizer plugin interface. An optimizer updates f32 master parameters from their
 * f32 gradients with the host's foreach ops, so one plugin runs on every backend. */
#ifndef GANFW_OPTIM_H
#define GANFW_OPTIM_H

#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One trainable parameter. Owned by the core; valid until the optimizer is destroyed.
 * Frozen: the core hands arrays of it (params[0..n)), so its size is its stride and it
 * never grows; anything new per parameter comes through an extension. */
typedef struct ganfw_param {
  const char *name;    /* state_dict-style name, e.g. "main.0.weight" */
  ganfw_tensor *value; /* f32 master weights */
  ganfw_tensor *grad;  /* f32 gradient, same shape; step may overwrite it (see below) */
} ganfw_param;
#ifdef __cplusplus
static_assert(sizeof(ganfw_param) == 3 * sizeof(void *), "ganfw_param is frozen");
#else
_Static_assert(sizeof(ganfw_param) == 3 * sizeof(void *), "ganfw_param is frozen");
#endif

/* Add new members at the end only, in a block dated with the minor version. Callbacks are
 * [main-thread]: called from the training loop's thread, never from the prefetch thread.
 * Gradients: step may write params[i].grad in place (e.g. add weight decay to it). The
 * core treats the gradients as consumed by the step: nothing reads them after it, and they
 * are zeroed before the next backward. Memory strategies run before the step
 * (after_backward) and may rescale them too. The bundled adam and sgd leave them untouched
 * (out-of-place, as PyTorch's optimizers) so that they match PyTorch bit for bit. */
typedef struct ganfw_optim_vt {
  uint32_t struct_size; /* sizeof(ganfw_optim_vt) */
  uint32_t kind;        /* GANFW_VT_TAG_OPTIM (ABI 1.1; 0 in plugins built for 1.0) */
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

  /* --- added in minor 1 (ABI 1.1, 2026-12) --- */
  /* (optional) An optional capability by its versioned id (see ganfw/plugin.h), NULL when
   * absent. May be called before create; the result is owned by the plugin, valid until
   * it is unloaded. */
  const void *(*get_extension)(const char *id);

  /* --- added in minor 10 (ABI 1.10, 2026-12) --- */
  /* (optional, all three or none) One step taken parameter by parameter, for the memory
   * strategy step_in_backward: the core calls step_begin(lr) once, then step_param(i) once
   * for each index i of the params array given to create whose grad is not NULL, in any
   * order, each as soon as params[i].grad is final (the gradients of the others may not
   * exist yet: their storage is released between steps), then step_end. The result must be
   * bitwise that of step(lr): the same step number for every parameter (Adam's bias
   * correction). step_begin refuses an invalid lr; step_end counts the step. */
  ganfw_status (*step_begin)(void *self, double lr);
  ganfw_status (*step_param)(void *self, int64_t i);
  ganfw_status (*step_end)(void *self);
} ganfw_optim_vt;

#ifdef __cplusplus
}
#endif
#endif
