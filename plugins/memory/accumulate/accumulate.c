/* The gradient-accumulation memory strategy (ganfw_accumulate.so): each batch of N runs as
 * `steps` micro-batches of N/steps rows whose gradients add up (the loss divided by steps)
 * before one optimizer step, so activations are held for N/steps rows at a time. Keys:
 * steps (>= 1, default 2; it must divide train.batch_size), or instead micro_batch_size
 * (rows per micro-batch; steps = train.batch_size / micro_batch_size, from the batch size
 * the core hands strategies since ABI 1.1). */
#include <stdlib.h>

#include <ganfw/ganfw.h>

#define ACCUM_MAX_STEPS (1 << 20) /* the largest train.batch_size */

typedef struct accum {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  int64_t steps;
  int64_t micro_batch_size; /* 0: use steps */
} accum;

static ganfw_status accum_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                 void **self) {
  *self = NULL;
  int64_t steps = 2, micro = 0;
  ganfw_status st = host->cfg_int(cfg, "micro_batch_size", 0, &micro);
  if (st != GANFW_OK) return st;
  if (micro < 0 || micro > ACCUM_MAX_STEPS)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "accumulate: micro_batch_size is %lld; it must be between 1 and "
                       "train.batch_size (or 0: use steps)",
                       (long long)micro);
  if (micro > 0 && host->cfg_child(cfg, "steps"))
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "accumulate: set steps or micro_batch_size, not both (steps = "
                       "train.batch_size / micro_batch_size)");
  if (micro == 0 && (st = host->cfg_int(cfg, "steps", 2, &steps)) != GANFW_OK) return st;
  if (steps < 1 || steps > ACCUM_MAX_STEPS)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "accumulate: steps is %lld; it must be between 1 (no accumulation) and "
                       "train.batch_size, and divide train.batch_size",
                       (long long)steps);
  accum *a = calloc(1, sizeof *a);
  if (!a) return host->error(ctx, GANFW_ERR_OOM, "accumulate: out of host memory");
  a->host = host;
  a->ctx = ctx;
  a->steps = steps;
  a->micro_batch_size = micro;
  *self = a;
  return GANFW_OK;
}

static void accum_destroy(void *self) {
  free(self);
}

/* Sets the micro-batch count. Two strategies that both split the batch would silently
 * multiply into a count nobody asked for, so a second one is an error. */
static ganfw_status accum_configure(void *self, ganfw_exec_options *opts) {
  const accum *a = self;
  if (opts->struct_size < offsetof(ganfw_exec_options, micro_batches) + sizeof(int32_t))
    return a->host->error(a->ctx, GANFW_ERR_PLUGIN,
                          "accumulate: this core's executor has no micro-batches; use a newer "
                          "ganfw");
  if (opts->micro_batches != 1)
    return a->host->error(a->ctx, GANFW_ERR_CONFIG,
                          "accumulate: another memory strategy already splits each batch into "
                          "%d micro-batches; keep one accumulate entry in memory: and set its "
                          "steps",
                          (int)opts->micro_batches);
  int64_t steps = a->steps;
  if (a->micro_batch_size > 0) {
    if (opts->struct_size < offsetof(ganfw_exec_options, batch_size) + sizeof(int64_t) ||
        opts->batch_size < 1)
      return a->host->error(a->ctx, GANFW_ERR_UNSUPPORTED,
                            "accumulate: micro_batch_size needs the batch size, which this "
                            "core does not hand strategies (ABI older than 1.1); set steps "
                            "instead");
    if (opts->batch_size % a->micro_batch_size != 0)
      return a->host->error(a->ctx, GANFW_ERR_CONFIG,
                            "accumulate: micro_batch_size %lld does not divide train.batch_size "
                            "%lld; pick a divisor",
                            (long long)a->micro_batch_size, (long long)opts->batch_size);
    steps = opts->batch_size / a->micro_batch_size;
  }
  opts->micro_batches = (int32_t)steps;
  return GANFW_OK;
}

static const ganfw_memory_vt accum_vt = {
    .struct_size = sizeof(ganfw_memory_vt),
    .kind = GANFW_VT_TAG_MEMORY,
    .create = accum_create,
    .destroy = accum_destroy,
    .configure = accum_configure,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MEMORY,
      .name = "accumulate",
      .version = "1.0.0",
      .description = "gradient accumulation: N micro-batches per optimizer step",
      .vtable = &accum_vt,
  };
  return &desc;
}
