/* A broken plugin for the plugin-host tests (ganfw_unresolved.so): it calls a function that
 * no library defines. A MODULE library links with undefined symbols allowed, so only
 * dlopen(RTLD_NOW) can catch it, as it would catch a plugin that calls into the core. */
#include <stddef.h>

#include "ganfw/ganfw.h"

extern int ganfw_tp_function_nobody_defines(int x);

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  if (ganfw_tp_function_nobody_defines(1) != 0) return NULL;
  return NULL;
}
