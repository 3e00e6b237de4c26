/* A minimal valid memory-strategy plugin for the plugin-host tests (ganfw_tpmem.so):
 * gradient accumulation over `micro_batches` (>= 1) micro-batches, read from its config. */
#include <stdlib.h>

#include "ganfw/ganfw.h"

typedef struct tp_mem {
  int64_t micro_batches;
} tp_mem;

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              void **self) {
  int64_t micro = 1;
  ganfw_status st = host->cfg_int(cfg, "micro_batches", 1, &micro);
  if (st != GANFW_OK) return st;
  if (micro < 1 || micro > INT32_MAX)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "tpmem: micro_batches must be between 1 and %d, got %lld", INT32_MAX,
                       (long long)micro);
  tp_mem *m = malloc(sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "tpmem: out of host memory");
  m->micro_batches = micro;
  *self = m;
  return GANFW_OK;
}

static void tp_destroy(void *self) {
  free(self);
}

static ganfw_status tp_configure(void *self, ganfw_exec_options *opts) {
  const tp_mem *m = self;
  /* Only write fields the core's struct has. */
  if (opts->struct_size < offsetof(ganfw_exec_options, micro_batches) + sizeof(int32_t))
    return GANFW_ERR_UNSUPPORTED;
  opts->micro_batches = (int32_t)m->micro_batches;
  return GANFW_OK;
}

static const ganfw_memory_vt tp_vt = {
    .struct_size = sizeof(ganfw_memory_vt),
    .kind = GANFW_VT_TAG_MEMORY,
    .create = tp_create,
    .destroy = tp_destroy,
    .configure = tp_configure,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR, GANFW_ABI_MINOR, sizeof(ganfw_plugin_desc),    GANFW_PLUGIN_MEMORY,
      "tpmem",         "1.0.0",         "test gradient accumulation", &tp_vt,
  };
  return &desc;
}
