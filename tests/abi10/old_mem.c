/* A memory-strategy plugin built against the frozen ABI 1.0 headers: every 1.0 member set
 * (configure, configure_net, loss_scale, after_backward, step_end, scalar, set_scalar), a
 * constant loss scale that after_backward divides back out, and a count of steps. Its
 * vtable ends at set_scalar: get_extension (1.1) must read as absent. */
#include <stdlib.h>
#include <string.h>

#include "ganfw/ganfw.h"

/* OLD_TODAY: the same source built against today's headers (tests/abi10/abi10.cmake): a
 * 1.x plugin's source must rebuild and run unchanged against any later 1.y. */
#if GANFW_ABI_MINOR != 0 && !defined(OLD_TODAY)
#error "tests/abi10 plugins must be built against the frozen ABI 1.0 headers"
#endif

typedef struct old_mem {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  int64_t micro_batches;
  double steps_ended;
  ganfw_tensor *grads[64];
} old_mem;

static ganfw_status om_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              void **self) {
  old_mem *m = calloc(1, sizeof *m);
  if (!m) return host->error(ctx, GANFW_ERR_OOM, "old_mem: out of host memory");
  m->host = host;
  m->ctx = ctx;
  ganfw_status st = host->cfg_int(cfg, "micro_batches", 1, &m->micro_batches);
  if (st != GANFW_OK) {
    free(m);
    return st;
  }
  *self = m;
  return GANFW_OK;
}

static void om_destroy(void *self) {
  free(self);
}

static ganfw_status om_configure(void *self, ganfw_exec_options *opts) {
  opts->micro_batches = (int32_t)((old_mem *)self)->micro_batches;
  return GANFW_OK;
}

static ganfw_status om_configure_net(void *self, const char *role, ganfw_net *net) {
  return GANFW_OK;
}

static double om_loss_scale(void *self, int32_t opt) {
  return 8.0;
}

static ganfw_status om_after_backward(void *self, int32_t opt, const ganfw_param *params, int64_t n,
                                      int32_t *skip_step) {
  old_mem *m = self;
  int64_t k = 0;
  for (int64_t i = 0; i < n && k < 64; i++)
    if (params[i].grad) m->grads[k++] = params[i].grad;
  return m->host->foreach_scale(m->ctx, m->grads, k, 1.0f / 8.0f);
}

static ganfw_status om_step_end(void *self) {
  ((old_mem *)self)->steps_ended += 1;
  return GANFW_OK;
}

static int32_t om_scalar(void *self, int32_t i, const char **name, double *value) {
  if (i != 0) return 0;
  *name = "steps_ended";
  *value = ((old_mem *)self)->steps_ended;
  return 1;
}

static ganfw_status om_set_scalar(void *self, const char *name, double value) {
  if (strcmp(name, "steps_ended") != 0) return GANFW_ERR_INVALID_ARG;
  ((old_mem *)self)->steps_ended = value;
  return GANFW_OK;
}

static const ganfw_memory_vt om_vt = {
    sizeof(ganfw_memory_vt),
    0,
    om_create,
    om_destroy,
    om_configure,
    om_configure_net,
    om_loss_scale,
    om_after_backward,
    om_step_end,
    om_scalar,
    om_set_scalar,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR, GANFW_ABI_MINOR, sizeof(ganfw_plugin_desc), GANFW_PLUGIN_MEMORY,
      "old_mem",       "1.0.0",         "ABI 1.0 memory strategy", &om_vt,
  };
  return &desc;
}
