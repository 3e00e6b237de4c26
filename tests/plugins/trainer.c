/* A trainer plugin for the plugin-host tests: a step that does nothing, over one net
 * "net". tests/plugins.cmake builds it with TP_ABI_MINOR set to a minor the host must refuse
 * for a trainer (one newer than the core's, one from before trainers existed). */
#include "ganfw/ganfw.h"

#ifndef TP_NAME
#error "tests/plugins.cmake defines TP_NAME, the name the descriptor declares"
#endif
#ifndef TP_ABI_MINOR
#define TP_ABI_MINOR GANFW_ABI_MINOR
#endif

static ganfw_status tp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_step_api *api, void **self) {
  *self = NULL;
  return GANFW_OK;
}

static void tp_destroy(void *self) {}

static int32_t tp_role(void *self, int32_t i, const char **name, uint32_t *flags) {
  if (i != 0) return 0;
  *name = "net";
  *flags = 0;
  return 1;
}

static int32_t tp_scalar(void *self, int32_t i, const char **name) {
  return 0;
}

static ganfw_status tp_step(void *self, ganfw_step *st) {
  return GANFW_OK;
}

static const ganfw_trainer_vt tp_vt = {
    .struct_size = sizeof(ganfw_trainer_vt),
    .kind = GANFW_VT_TAG_TRAINER,
    .create = tp_create,
    .destroy = tp_destroy,
    .role = tp_role,
    .scalar = tp_scalar,
    .step = tp_step,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = TP_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_TRAINER,
      .name = TP_NAME,
      .version = "1.0.0",
      .description = "a trainer that does nothing",
      .vtable = &tp_vt,
  };
  return &desc;
}
