/* model.insert: layers from layer plugins (ganfw/layer_plugin.h) that a config inserts into
 * the nets of any model by name, without a model plugin of its own:
 *
 *   model:
 *     plugin: dcgan
 *     insert:
 *       - {after: generator.main.5, name: attn, plugin: sagan_attention, <its own keys>}
 *
 * (model.nets.ROLE.insert for a model of model.nets). The run loads the plugins with the
 * config; the session arms the list on its context before it creates the model, so that
 * net_build inserts each item's layer after the node named in the net named (nn/net.h,
 * ganfw_net_insert_custom) while the model builds its nets; afterwards every item must have
 * found its net. */
#ifndef GANFW_TRAIN_INSERT_H
#define GANFW_TRAIN_INSERT_H

#include <stdint.h>

#include "config/config.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"

typedef struct ganfw_inserts ganfw_inserts;

/* Reads `section.insert` (section: the model's section, `where` its key for messages, "model"
 * or "model.nets.student") and loads each item's layer plugin from the search path dirs[0..n)
 * (kind-checked: a plugin of another kind or ABI is refused naming the item's key). *out is
 * NULL when the section has no insert list; else owned by the caller (ganfw_inserts_destroy,
 * after the nets that hold its layers are destroyed: it unloads the plugins). */
ganfw_status ganfw_inserts_open(const ganfw_cfg *section, const char *where,
                                const char *const *dirs, int64_t ndirs, ganfw_inserts **out);
void ganfw_inserts_destroy(ganfw_inserts *ins); /* accepts NULL */

/* Makes ins (may be NULL: nothing to insert) the net_build hook of ctx for the nets of model
 * `model` (its name, for messages), until ganfw_inserts_finish. */
void ganfw_inserts_arm(ganfw_inserts *ins, ganfw_ctx *ctx, const char *model);
/* After the model's create returned: takes the hook off ctx, and returns the error of an item
 * that failed to insert (as the hook recorded it, without what the model added), or, when the
 * model was `created` (its nets are alive), an error naming the first item that found no net
 * and the nets the model built. */
ganfw_status ganfw_inserts_finish(ganfw_inserts *ins, ganfw_ctx *ctx, int32_t created);

#endif
