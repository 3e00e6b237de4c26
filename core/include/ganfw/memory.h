/* The memory-strategy plugin interface. A strategy changes how the executor runs a step
 * (precision, micro-batches, checkpoint segments) and may act around the optimizer step
 * (loss scaling). Several strategies compose in the config's `memory:` list, applied in
 * order. */
#ifndef GANFW_MEMORY_H
#define GANFW_MEMORY_H

#include "host.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The executor's knobs a strategy may change; filled with defaults by the core. */
typedef struct ganfw_exec_options {
  uint32_t struct_size;
  int32_t compute_dtype; /* GANFW_DTYPE_F32 (default), F16 or BF16: activations are stored
                            in it and conv, conv-transpose and linear compute in it with f32
                            accumulation; BatchNorm statistics, losses, master weights,
                            gradients and optimizer state stay f32 */
  int32_t micro_batches; /* each batch is split into this many micro-batches whose gradients
                            add up before one optimizer step (1 = none) */
  int32_t reserved0;
  /* --- added in minor 1 (ABI 1.1): read only when struct_size covers it --- */
  int64_t batch_size; /* train.batch_size: rows per optimizer step, before any split into
                         micro-batches (read-only for strategies) */
  /* --- added in minor 5 (ABI 1.5, 2026-12): read only when struct_size covers it --- */
  int32_t shard_optimizer; /* data-parallel runs: 1 shards each optimizer's state across the
                              ranks (ZeRO stage 1, memory strategy zero); 0 (default): every
                              rank keeps all of it */
  int32_t ranks;           /* the number of ranks training together (read-only; 1 alone) */
  /* --- added in minor 10 (ABI 1.10, 2026-12): read only when struct_size covers it --- */
  int32_t step_in_backward; /* 1 (memory strategy step_in_backward): the generator's and the
                               classifier's optimizer steps each layer's parameters in
                               backward as soon as its gradients are final, and every
                               gradient's storage is released after its update; 0 (default):
                               one step after the whole backward */
  int32_t reserved1;
} ganfw_exec_options;

/* Add new members at the end only, in a block dated with the minor version. Callbacks are
 * [main-thread]: called from the training loop's thread, never from the prefetch thread. */
typedef struct ganfw_memory_vt {
  uint32_t struct_size; /* sizeof(ganfw_memory_vt) */
  uint32_t kind;        /* GANFW_VT_TAG_MEMORY (ABI 1.1; 0 in plugins built for 1.0) */
  /* Reads the strategy's config entry. *self is owned by the plugin, freed by destroy. */
  ganfw_status (*create)(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg, void **self);
  void (*destroy)(void *self); /* accepts NULL */
  /* Adjusts the executor's options before any memory is planned. */
  /* opts stays valid, with every later strategy's changes, until configure_done returns
   * (ABI 1.10): configure_net may read the final compute dtype and micro-batches there. */
  ganfw_status (*configure)(void *self, ganfw_exec_options *opts);
  /* (optional) Called once per net after the model built it, with its role ("generator",
   * "discriminator", "classifier"): e.g. to set checkpoint segments (host->net_checkpoint).
   * The net is borrowed. */
  ganfw_status (*configure_net)(void *self, const char *role, ganfw_net *net);
  /* (optional) The factor the loss of optimizer `opt` (0: generator or classifier, 1:
   * discriminator) is multiplied by before backward (loss scaling). */
  double (*loss_scale)(void *self, int32_t opt);
  /* (optional) After backward, before optimizer `opt` steps, with its parameters: e.g.
   * unscale the gradients and check them. Sets *skip_step to 1 to skip this step. */
  ganfw_status (*after_backward)(void *self, int32_t opt, const ganfw_param *params, int64_t n,
                                 int32_t *skip_step);
  /* (optional) Once per training step, after every optimizer (e.g. update the loss scale). */
  ganfw_status (*step_end)(void *self);
  /* (optional) The strategy's named scalars (loss scale, skipped steps, ...): metrics.csv
   * columns and checkpoint metadata. Fills the i-th and returns 1, or returns 0 past the
   * end. The name is owned by the plugin, valid until destroy. */
  int32_t (*scalar)(void *self, int32_t i, const char **name, double *value);
  /* (optional) Restores a scalar from a checkpoint (resume). */
  ganfw_status (*set_scalar)(void *self, const char *name, double value);

  /* --- added in minor 1 (ABI 1.1, 2026-12) --- */
  /* (optional) An optional capability by its versioned id (see ganfw/plugin.h), NULL when
   * absent. May be called before create; the result is owned by the plugin, valid until
   * it is unloaded. */
  const void *(*get_extension)(const char *id);

  /* --- added in minor 6 (ABI 1.6, 2026-12) --- */
  /* (optional) After configure_net of the run's last net: e.g. refuse a key that names a
   * role no net has (the roles are the trainer's, any names with a trainer plugin). */
  ganfw_status (*configure_done)(void *self);
} ganfw_memory_vt;

#ifdef __cplusplus
}
#endif
#endif
