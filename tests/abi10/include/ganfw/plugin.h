/* The plugin descriptor and entry symbol. A plugin is a shared object that exports exactly
 * one symbol, `ganfw_plugin_entry`, returning a pointer to a static descriptor:
 *
 *   static const ganfw_optim_vt vt = { sizeof(ganfw_optim_vt), my_create, ... };
 *   GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
 *     static const ganfw_plugin_desc d = { GANFW_ABI_MAJOR, GANFW_ABI_MINOR,
 *       sizeof(ganfw_plugin_desc), GANFW_PLUGIN_OPTIM, 0, "adam", "1.0.0", "Adam", &vt };
 *     return &d;
 *   }
 *
 * The descriptor and everything it points to are owned by the plugin and must stay valid
 * until the plugin is unloaded. Build with -fvisibility=hidden so nothing else is exported.
 * The loader refuses a different abi_major; a newer abi_minor than the core's is accepted
 * only when the plugin does not need the newer host entries (it checks struct_size). */
#ifndef GANFW_PLUGIN_H
#define GANFW_PLUGIN_H

#include <stdint.h>

#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GANFW_ABI_MAJOR 1
#define GANFW_ABI_MINOR 0

#define GANFW_PLUGIN_ENTRY_SYMBOL "ganfw_plugin_entry"

#if defined(_WIN32)
#define GANFW_PLUGIN_EXPORT __declspec(dllexport)
#else
#define GANFW_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Plugin kinds, stored as int32_t. */
enum {
  GANFW_PLUGIN_MODEL = 0,
  GANFW_PLUGIN_OPTIM = 1,
  GANFW_PLUGIN_MEMORY = 2,
  GANFW_PLUGIN_KIND_COUNT
};

typedef struct ganfw_plugin_desc {
  uint32_t abi_major;   /* GANFW_ABI_MAJOR the plugin was built against */
  uint32_t abi_minor;   /* GANFW_ABI_MINOR the plugin was built against */
  uint32_t struct_size; /* sizeof(ganfw_plugin_desc) */
  int32_t kind;         /* GANFW_PLUGIN_* */
  const char *name;     /* the name a config uses: `plugin: adam` */
  const char *version;  /* the plugin's own version, e.g. "1.0.0" */
  const char *description;
  const void *vtable; /* ganfw_model_vt, ganfw_optim_vt or ganfw_memory_vt, by kind */
} ganfw_plugin_desc;

typedef const ganfw_plugin_desc *(*ganfw_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
