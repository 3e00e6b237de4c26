/* A stand-in for a memory strategy that refuses some combinations when configured, for
 * tests/test_fit.c (ganfw_step_in_backward.so in <build>/tests/plugins/fit/, a folder only
 * that test names): it refuses more than one micro-batch, as step_in_backward refuses
 * accumulation, and changes nothing else. */
#include <stddef.h>

#include "ganfw/ganfw.h"

static int tp_self; /* no state: one address to hand back */

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              void **self) {
  (void)host, (void)ctx, (void)cfg;
  *self = &tp_self;
  return GANFW_OK;
}

static void tp_destroy(void *self) {
  (void)self;
}

/* Runs after accumulate's configure (fit lists it later), which set micro_batches. */
static ganfw_status tp_configure(void *self, ganfw_exec_options *opts) {
  (void)self;
  if (opts->struct_size < offsetof(ganfw_exec_options, micro_batches) + sizeof(int32_t))
    return GANFW_ERR_UNSUPPORTED;
  return opts->micro_batches > 1 ? GANFW_ERR_CONFIG : GANFW_OK;
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
      GANFW_ABI_MAJOR,    GANFW_ABI_MINOR, sizeof(ganfw_plugin_desc),    GANFW_PLUGIN_MEMORY,
      "step_in_backward", "0.0.1",         "test: refuses accumulation", &tp_vt,
  };
  return &desc;
}
