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
#ifndef TP_VT_TAG
#define TP_VT_TAG GANFW_VT_TAG_OPTIM
#endif
/* TP_BAD_KEYS: a config-key table with one malformed entry (1: a dotted key, 2: a float list
 * without defaults, 3: a key declared twice). */
#ifndef TP_BAD_KEYS
#define TP_BAD_KEYS 0
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

static const ganfw_config_key tp_keys[] = {
    {.key = "lr_scale", .type = GANFW_KEY_FLOAT, .def_float = 1.0},
#if TP_BAD_KEYS == 1
    {.key = "nested.key", .type = GANFW_KEY_INT},
#elif TP_BAD_KEYS == 2
    {.key = "betas", .type = GANFW_KEY_FLOAT_LIST, .count = 2},
#elif TP_BAD_KEYS == 3
    {.key = "lr_scale", .type = GANFW_KEY_FLOAT, .def_float = 2.0},
#endif
};
static const ganfw_config_keys tp_key_table = {tp_keys, sizeof tp_keys / sizeof tp_keys[0]};

static const void *tp_get_extension(const char *id) {
  return TP_BAD_KEYS && id[0] == 'g' && tp_key_table.n ? &tp_key_table : NULL;
}

static const ganfw_optim_vt tp_vt = {
    TP_VT_SIZE, TP_VT_TAG, tp_create, tp_destroy,       TP_NULL_STEP ? NULL : tp_step,
    NULL,       NULL,      NULL,      tp_get_extension, NULL,
    NULL,       NULL, /* step_begin, step_param, step_end (ABI 1.10) */
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
