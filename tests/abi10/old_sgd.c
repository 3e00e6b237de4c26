/* An optimizer plugin built against the frozen ABI 1.0 headers (tests/abi10/include): plain
 * SGD, value -= lr * grad, through the 1.0 host table's foreach_axpy, with get_step and
 * set_step. Its vtable ends at set_step: the core must not read the 1.1 members (kind,
 * get_extension) from it. With OLD_POISON the vtable is followed by non-zero words in the
 * same object, so a core that reads past struct_size sees them instead of NULL. */
#include <stdlib.h>

#include "ganfw/ganfw.h"

/* OLD_TODAY: the same source built against today's headers (tests/abi10/abi10.cmake): a
 * 1.x plugin's source must rebuild and run unchanged against any later 1.y. */
#if GANFW_ABI_MINOR != 0 && !defined(OLD_TODAY)
#error "tests/abi10 plugins must be built against the frozen ABI 1.0 headers"
#endif

#ifndef OLD_NAME
#define OLD_NAME "old_sgd"
#endif

typedef struct old_sgd {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  ganfw_tensor **values, **grads;
  int64_t n, steps;
} old_sgd;

static void old_destroy(void *self) {
  old_sgd *o = self;
  if (!o) return;
  free(o->values);
  free(o->grads);
  free(o);
}

static ganfw_status old_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                               const ganfw_param *params, int64_t n, void **self) {
  old_sgd *o = calloc(1, sizeof *o);
  if (!o) return host->error(ctx, GANFW_ERR_OOM, OLD_NAME ": out of host memory");
  o->host = host;
  o->ctx = ctx;
  o->values = calloc((size_t)(n > 0 ? n : 1), sizeof *o->values);
  o->grads = calloc((size_t)(n > 0 ? n : 1), sizeof *o->grads);
  if (!o->values || !o->grads) {
    old_destroy(o);
    return host->error(ctx, GANFW_ERR_OOM, OLD_NAME ": out of host memory");
  }
  for (int64_t i = 0; i < n; i++) { /* ganfw_param's 1.0 stride: frozen */
    if (!params[i].grad) continue;
    o->values[o->n] = params[i].value;
    o->grads[o->n++] = params[i].grad;
  }
  *self = o;
  return GANFW_OK;
}

static ganfw_status old_step(void *self, double lr) {
  old_sgd *o = self;
  ganfw_status st = o->host->foreach_axpy(o->ctx, o->values, (float)-lr, o->grads, o->n);
  if (st == GANFW_OK) o->steps++;
  return st;
}

static int64_t old_get_step(void *self) {
  return ((const old_sgd *)self)->steps;
}

static void old_set_step(void *self, int64_t step) {
  ((old_sgd *)self)->steps = step;
}

#define OLD_VT_INIT                                                                                \
  { sizeof(ganfw_optim_vt), 0, old_create, old_destroy, old_step, NULL, old_get_step, old_set_step }

#ifdef OLD_POISON
/* What follows the vtable in memory is not a vtable member: non-zero on purpose. */
static const struct {
  ganfw_optim_vt vt;
  uintptr_t after[4];
} old_blob = {OLD_VT_INIT, {0x0ddba11u, 0x0ddba11u, 0x0ddba11u, 0x0ddba11u}};
#define OLD_VT (&old_blob.vt)
#else
static const ganfw_optim_vt old_vt = OLD_VT_INIT;
#define OLD_VT (&old_vt)
#endif

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR,    GANFW_ABI_MINOR, sizeof(ganfw_plugin_desc),
      GANFW_PLUGIN_OPTIM, OLD_NAME,        "1.0.0",
      "ABI 1.0 SGD",      OLD_VT,
  };
  return &desc;
}
