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
  int32_t compute_dtype;      /* GANFW_DTYPE_F32 (default), F16 or BF16 for matmul layers */
  int32_t micro_batches;      /* 1 = no accumulation */
  int32_t checkpoint_segments; /* 0 = keep every activation */
  int32_t reserved0;
} ganfw_exec_options;

typedef struct ganfw_memory_vt {
  uint32_t struct_size; /* sizeof(ganfw_memory_vt) */
  uint32_t reserved0;
  /* Reads the strategy's config entry. *self is owned by the plugin, freed by destroy. */
  ganfw_status (*create)(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                         void **self);
  void (*destroy)(void *self); /* accepts NULL */
  /* Adjusts the executor's options before any memory is planned. */
  ganfw_status (*configure)(void *self, ganfw_exec_options *opts);
  /* (optional) The factor the loss is multiplied by before backward (loss scaling). */
  double (*loss_scale)(void *self);
  /* (optional) Called after backward, before the optimizer step, with the gradients of
   * one optimizer's params. Sets *skip_step to 1 when the step must be skipped. */
  ganfw_status (*after_backward)(void *self, const ganfw_param *params, int64_t n,
                                 int32_t *skip_step);
} ganfw_memory_vt;

#ifdef __cplusplus
}
#endif
#endif
