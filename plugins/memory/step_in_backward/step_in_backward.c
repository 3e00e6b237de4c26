/* The step-in-backward memory strategy (ganfw_step_in_backward.so), PyTorch's "optimizer
 * step in backward": the generator's (or the classifier's) optimizer updates each layer's
 * parameters as soon as that layer's gradients are final in backward, and each gradient's
 * bytes go back to the allocator at once; the discriminator's gradients go back after its
 * step. The core does the work (core/src/train/sib.c, docs/MEMORY.md "step_in_backward");
 * this plugin asks for it and refuses what cannot hold: micro-batches (accumulate), ZeRO
 * (zero) and data-parallel ranks, whichever order the `memory:` list names them in. The core
 * refuses train.clip_grad_norm, train.on_nonfinite: skip, a loss scaler, optim.param_groups
 * and an optimizer without the step in parts. No keys. */
#include <stddef.h>
#include <stdlib.h>

#include <ganfw/ganfw.h>

typedef struct sib {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  const ganfw_exec_options *opts; /* the core's, borrowed: read again in configure_done */
} sib;

static ganfw_status sib_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                               void **self) {
  (void)cfg;
  *self = NULL;
  sib *b = calloc(1, sizeof *b);
  if (!b) return host->error(ctx, GANFW_ERR_OOM, "step_in_backward: out of host memory");
  b->host = host;
  b->ctx = ctx;
  *self = b;
  return GANFW_OK;
}

static void sib_destroy(void *self) {
  free(self);
}

static ganfw_status sib_configure(void *self, ganfw_exec_options *opts) {
  sib *b = self;
  if (opts->struct_size < offsetof(ganfw_exec_options, step_in_backward) + sizeof(int32_t))
    return b->host->error(b->ctx, GANFW_ERR_PLUGIN,
                          "step_in_backward: this core cannot step in backward (ABI older than "
                          "1.10); use a newer ganfw");
  opts->step_in_backward = 1;
  b->opts = opts;
  return GANFW_OK;
}

/* After every strategy's configure: what the others set is final here. */
static ganfw_status sib_configure_done(void *self) {
  const sib *b = self;
  const ganfw_exec_options *o = b->opts;
  if (o->micro_batches > 1)
    return b->host->error(b->ctx, GANFW_ERR_CONFIG,
                          "step_in_backward: %d micro-batches (memory strategy accumulate, "
                          "micro_batches): their gradients add up before one step, so none is "
                          "final inside a backward; drop accumulate or step_in_backward",
                          (int)o->micro_batches);
  if (o->shard_optimizer)
    return b->host->error(b->ctx, GANFW_ERR_CONFIG,
                          "step_in_backward: memory strategy zero updates its shard of every "
                          "parameter after the whole backward; drop zero or step_in_backward");
  if (o->ranks > 1)
    return b->host->error(b->ctx, GANFW_ERR_CONFIG,
                          "step_in_backward: %d data-parallel ranks: the ranks' gradients are "
                          "summed after backward; train on one rank or drop step_in_backward",
                          (int)o->ranks);
  return GANFW_OK;
}

static const ganfw_memory_vt sib_vt = {
    .struct_size = sizeof(ganfw_memory_vt),
    .kind = GANFW_VT_TAG_MEMORY,
    .create = sib_create,
    .destroy = sib_destroy,
    .configure = sib_configure,
    .configure_done = sib_configure_done,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MEMORY,
      .name = "step_in_backward",
      .version = "1.0.0",
      .description = "optimizer step in backward: each layer's gradients freed after its update",
      .vtable = &sib_vt,
  };
  return &desc;
}
