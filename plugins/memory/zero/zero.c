/* The sharded-optimizer-state memory strategy (ganfw_zero.so), ZeRO stage 1: in a
 * data-parallel run of N ranks each rank keeps and updates the optimizer state of 1/N of
 * the parameters (a contiguous range of them all, laid end to end), and the updated
 * parameters are then gathered on every rank. Optimizer state per rank: 1/N. The core does
 * the sharding (core/src/dist/zero.c); this plugin asks for it. Alone (one rank) it changes
 * nothing. No keys. */
#include <stddef.h>
#include <stdlib.h>

#include <ganfw/ganfw.h>

typedef struct zero {
  const ganfw_host *host;
  ganfw_ctx *ctx;
} zero;

static ganfw_status zero_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                void **self) {
  (void)cfg;
  *self = NULL;
  zero *z = calloc(1, sizeof *z);
  if (!z) return host->error(ctx, GANFW_ERR_OOM, "zero: out of host memory");
  z->host = host;
  z->ctx = ctx;
  *self = z;
  return GANFW_OK;
}

static void zero_destroy(void *self) {
  free(self);
}

static ganfw_status zero_configure(void *self, ganfw_exec_options *opts) {
  const zero *z = self;
  if (opts->struct_size < offsetof(ganfw_exec_options, shard_optimizer) + sizeof(int32_t))
    return z->host->error(z->ctx, GANFW_ERR_PLUGIN,
                          "zero: this core cannot shard optimizer state (ABI older than 1.5); "
                          "use a newer ganfw");
  opts->shard_optimizer = 1;
  return GANFW_OK;
}

static const ganfw_memory_vt zero_vt = {
    .struct_size = sizeof(ganfw_memory_vt),
    .kind = GANFW_VT_TAG_MEMORY,
    .create = zero_create,
    .destroy = zero_destroy,
    .configure = zero_configure,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MEMORY,
      .name = "zero",
      .version = "1.0.0",
      .description = "ZeRO stage 1: optimizer state sharded across data-parallel ranks",
      .vtable = &zero_vt,
  };
  return &desc;
}
