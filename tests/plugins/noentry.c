/* A broken plugin for the plugin-host tests (ganfw_noentry.so): it defines
 * ganfw_plugin_entry but forgets GANFW_PLUGIN_EXPORT, so under hidden visibility the entry
 * symbol is not exported and the host must refuse the file. */
#include "ganfw/ganfw.h"

const ganfw_plugin_desc *ganfw_plugin_entry(void);

const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR,
      GANFW_ABI_MINOR,
      sizeof(ganfw_plugin_desc),
      GANFW_PLUGIN_MODEL,
      "noentry",
      "0.0.1",
      "not exported",
      NULL,
  };
  return &desc;
}
