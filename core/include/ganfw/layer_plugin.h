/* The layer plugin interface (ABI 1.8): a layer kind, in a plugin of its own, that a config
 * inserts into the nets of any model by name, without writing a model plugin:
 *
 *   model:
 *     plugin: dcgan
 *     insert:
 *       - {after: generator.main.5, name: attn, plugin: sagan_attention}
 *
 * Each item of `model.insert` (or `model.nets.ROLE.insert`) names a node of a net as
 * "<net>.<node>" (the names `ganfw plan` lists), the new node's name and the plugin
 * (ganfw_<plugin>.so); its other keys are the layer's own. When the model builds that net
 * (host->net_build), the core calls create with the item, appends the layer def() gives with
 * that state after the node named, and every node that read that node's output reads the
 * new node's instead (inserted after the last node, it becomes the net's output). The layer's
 * parameters are "<net>.<name>.<param>" in checkpoints and reports; everything "Writing a
 * layer" (docs/ABI.md) says about a ganfw_layer_def holds for it. */
#ifndef GANFW_LAYER_PLUGIN_H
#define GANFW_LAYER_PLUGIN_H

#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Add new members at the end only, in a block dated with the minor version. Callbacks are
 * [main-thread]. */
typedef struct ganfw_layer_plugin_vt {
  uint32_t struct_size; /* sizeof(ganfw_layer_plugin_vt) */
  uint32_t kind;        /* GANFW_VT_TAG_LAYER */
  /* The layer kind of every instance (ganfw/host.h): its type name, shapes, bytes, init,
   * forward, backward, and the destroy that frees a state create made (a state that needs
   * freeing needs it). Owned by the plugin, valid until it is unloaded; the core copies it at
   * each insertion. Called when the plugin is loaded (the loader checks it) and at each
   * insertion. */
  const ganfw_layer_def *(*def)(void);
  /* Makes the state of one instance from `cfg`, the config item that inserts it: its own keys
   * (the core reads `after`, `name` and `plugin`), read with the host's getters as a model
   * reads its section, so that a key nobody reads is an error and each default lands in
   * config.resolved.yaml. The input shape is not known yet: def()->init gets it. On success
   * the core hands *state to net_custom with def(), and from then on the net owns it (def()'s
   * destroy frees it at net_destroy, or at once when the insertion fails). On failure *state
   * is not read: create frees what it made. */
  ganfw_status (*create)(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                         void **state);
  /* (optional) An optional capability by its versioned id (see ganfw/plugin.h), NULL when
   * absent: "ganfw.config_keys/1" declares the item's keys. May be called before create; the
   * result is owned by the plugin, valid until it is unloaded. */
  const void *(*get_extension)(const char *id);
} ganfw_layer_plugin_vt;

#ifdef __cplusplus
}
#endif
#endif
