/* Plugin descriptors that the host must refuse (and one it must accept), for the plugin-host
 * tests. tests/plugins.cmake builds this file once per variant, overriding one of the
 * TP_* fields below, into ganfw_<variant>.so; the defaults make a valid optimizer (an SGD
 * that does nothing) named TP_NAME. */
#include <stddef.h>

#include "ganfw/ganfw.h"

#ifndef TP_NAME
#error "tests/plugins.cmake defines TP_NAME, the name the descriptor declares"
#endif
#ifndef TP_ABI_MAJOR
#define TP_ABI_MAJOR GANFW_ABI_MAJOR
#endif
#ifndef TP_ABI_MINOR
#define TP_ABI_MINOR GANFW_ABI_MINOR
#endif
#ifndef TP_DESC_SIZE
#define TP_DESC_SIZE sizeof(ganfw_plugin_desc)
#endif
#ifndef TP_KIND
#define TP_KIND GANFW_PLUGIN_OPTIM
#endif
#ifndef TP_VT_SIZE
#define TP_VT_SIZE sizeof(ganfw_optim_vt)
#endif
#ifndef TP_NULL_VTABLE
#define TP_NULL_VTABLE 0
#endif
#ifndef TP_NULL_STEP
#define TP_NULL_STEP 0
#endif

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_param *params, int64_t n, void **self) {
  *self = NULL;
  return GANFW_OK;
}

static void tp_destroy(void *self) {}

static ganfw_status tp_step(void *self, double lr) {
  return GANFW_OK;
}

static const ganfw_optim_vt tp_vt = {
    TP_VT_SIZE, 0, tp_create, tp_destroy, TP_NULL_STEP ? NULL : tp_step, NULL, NULL, NULL,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      TP_ABI_MAJOR,
      TP_ABI_MINOR,
      TP_DESC_SIZE,
      TP_KIND,
      TP_NAME,
      "0.0.1",
      "plugin-host test case",
      TP_NULL_VTABLE ? NULL : &tp_vt,
  };
  return &desc;
}
