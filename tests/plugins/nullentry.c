/* A broken plugin for the plugin-host tests (ganfw_nullentry.so): its entry returns NULL
 * instead of a descriptor. */
#include <stddef.h>

#include "ganfw/ganfw.h"

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  return NULL;
}
