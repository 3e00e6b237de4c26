/* Plugins that crash, for tests/test_plugin_crash.c, built from this one source:
 *   TP_CRASH=CTOR_SEGV    a constructor raises SIGSEGV while the file is being loaded
 *   TP_CRASH=ENTRY_ABORT  ganfw_plugin_entry calls abort()
 *   TP_CRASH=CTOR_HANG    a constructor never returns
 *   TP_CRASH=NONE         a valid optimizer (plain SGD) that loads and lists; its config key
 *                         `crash_in` (none, create, step) makes create, or the step number
 *                         `crash_at_step`, write to an unmapped address (a real SIGSEGV).
 * Parameters are f32 tensors of any shape; the update is value -= lr * grad. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ganfw/ganfw.h"

#define NONE        0
#define CTOR_SEGV   1
#define ENTRY_ABORT 2
#define CTOR_HANG   3
#ifndef TP_CRASH
#define TP_CRASH NONE
#endif
#ifndef TP_NAME
#define TP_NAME "crashopt"
#endif

#if TP_CRASH == CTOR_SEGV
__attribute__((constructor)) static void tp_ctor_segv(void) {
  raise(SIGSEGV);
}
#elif TP_CRASH == CTOR_HANG
__attribute__((constructor)) static void tp_ctor_hang(void) {
  for (;;) pause();
}
#endif

/* An address in the first page, never mapped, read through a volatile so that neither the
 * compiler nor UBSan's null check sees it coming: the store is a real SIGSEGV. */
static volatile uintptr_t tp_unmapped = 64;

static void tp_segfault(void) {
  *(volatile int *)tp_unmapped = 1;
}

typedef struct tp_opt {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  ganfw_tensor **values, **grads; /* params[i].value and .grad, borrowed from the core */
  int64_t n, steps, crash_at_step;
  int32_t crash_in_step;
} tp_opt;

static void tp_destroy(void *self) {
  tp_opt *o = self;
  if (!o) return;
  free(o->values);
  free(o->grads);
  free(o);
}

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_param *params, int64_t n, void **self) {
  const char *crash_in = NULL;
  int64_t at = 0;
  ganfw_status st = host->cfg_string(cfg, "crash_in", "none", &crash_in);
  if (st == GANFW_OK) st = host->cfg_int(cfg, "crash_at_step", 1, &at);
  if (st != GANFW_OK) return st;
  if (strcmp(crash_in, "create") == 0) tp_segfault();
  if (strcmp(crash_in, "none") != 0 && strcmp(crash_in, "step") != 0)
    return host->error(ctx, GANFW_ERR_CONFIG, TP_NAME ": crash_in is none, create or step");
  tp_opt *o = calloc(1, sizeof *o);
  if (!o) return host->error(ctx, GANFW_ERR_OOM, TP_NAME ": out of host memory");
  o->host = host;
  o->ctx = ctx;
  o->n = n;
  o->crash_in_step = strcmp(crash_in, "step") == 0;
  o->crash_at_step = at;
  o->values = calloc((size_t)(n > 0 ? n : 1), sizeof *o->values);
  o->grads = calloc((size_t)(n > 0 ? n : 1), sizeof *o->grads);
  if (!o->values || !o->grads) {
    tp_destroy(o);
    return host->error(ctx, GANFW_ERR_OOM, TP_NAME ": out of host memory");
  }
  for (int64_t i = 0; i < n; i++) {
    o->values[i] = params[i].value;
    o->grads[i] = params[i].grad;
  }
  *self = o;
  return GANFW_OK;
}

static ganfw_status tp_step(void *self, double lr) {
  tp_opt *o = self;
  if (o->crash_in_step && o->steps + 1 == o->crash_at_step) tp_segfault();
  ganfw_status st = o->host->foreach_axpy(o->ctx, o->values, (float)-lr, o->grads, o->n);
  if (st == GANFW_OK) o->steps++;
  return st;
}

static int64_t tp_get_step(void *self) {
  return ((const tp_opt *)self)->steps;
}

static void tp_set_step(void *self, int64_t step) {
  ((tp_opt *)self)->steps = step;
}

static const ganfw_optim_vt tp_vt = {
    .struct_size = sizeof(ganfw_optim_vt),
    .kind = GANFW_VT_TAG_OPTIM,
    .create = tp_create,
    .destroy = tp_destroy,
    .step = tp_step,
    .get_step = tp_get_step,
    .set_step = tp_set_step,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
#if TP_CRASH == ENTRY_ABORT
  abort();
#endif
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR,
      GANFW_ABI_MINOR,
      sizeof(ganfw_plugin_desc),
      GANFW_PLUGIN_OPTIM,
      TP_NAME,
      "1.0.0",
      "an optimizer that crashes when asked to",
      &tp_vt,
  };
  return &desc;
}
