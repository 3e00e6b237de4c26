/* model.insert (see insert.h): the items of the list, their layer plugins, and the net_build
 * hook that inserts each item's layer into the net it names while the model builds it. */
#include "train/insert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/plugin_frame.h"
#include "base/suggest.h"
#include "ganfw/layer_plugin.h"
#include "nn/net.h"

#define INSERT_MAX_ITEMS 64
#define INSERT_MAX_NETS  16
#define INSERT_INPUT     "input" /* the node name of a net's input (ganfw/host.h) */

/* One item of the list. */
typedef struct insert_item {
  const ganfw_cfg *cfg; /* the item: after, name, plugin and the layer's own keys */
  char key[160];        /* "model.insert[0]", for messages */
  const char *after;    /* "generator.main.5", as written */
  char *net;            /* "generator" */
  const char *node;     /* "main.5" (inside after) */
  const char *name;     /* the new node's name */
  ganfw_plugin *plugin;
  /* the plugin that defines the layer, made current around create and net_custom so that
   * the layer's callbacks are named after it (base/plugin_frame.h) */
  ganfw_plugin_frame frame;
  int32_t done; /* inserted into this session's model */
} insert_item;

struct ganfw_inserts {
  insert_item *items;
  int64_t n;
  const char *model;                   /* the armed model's name, for messages */
  ganfw_ctx *ctx;                      /* the armed context */
  char net_names[INSERT_MAX_NETS][64]; /* the nets the model built while armed */
  const ganfw_net *nets[INSERT_MAX_NETS];
  /* the hook's failure, kept apart from what the model makes of it: finish returns it */
  ganfw_status failed;
  char failure[4096];
  int32_t n_net;
};

void ganfw_inserts_destroy(ganfw_inserts *ins) {
  if (!ins) return;
  for (int64_t i = 0; i < ins->n; i++) {
    ganfw_plugin_unload(ins->items[i].plugin);
    free(ins->items[i].net);
  }
  free(ins->items);
  free(ins);
}

/* Reads item i of section.insert into it and loads its plugin. */
static ganfw_status open_item(const ganfw_cfg *section, const char *where, int64_t i,
                              const char *const *dirs, int64_t ndirs, insert_item *it) {
  it->cfg = ganfw_cfg_list_at(section, "insert", i);
  snprintf(it->key, sizeof it->key, "%s.insert[%lld]", where, (long long)i);
  if (ganfw_cfg_kind_of(it->cfg) != GANFW_CFG_KIND_MAP)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s must be a map such as {after: generator.main.5, name: attn, "
                           "plugin: sagan_attention}",
                           ganfw_cfg_where(it->cfg), it->key);
  const char *plugin = NULL;
  ganfw_status st;
  if ((st = ganfw_cfg_string(it->cfg, "after", NULL, &it->after)) ||
      (st = ganfw_cfg_string(it->cfg, "plugin", NULL, &plugin)))
    return st;
  if (!plugin || !*plugin)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s needs `plugin:`, the layer plugin to insert (ganfw_NAME.so; "
                           "`ganfw plugins` lists the installed ones)",
                           ganfw_cfg_where(it->cfg), it->key);
  const char *dot = it->after ? strchr(it->after, '.') : NULL;
  if (!dot || dot == it->after || !dot[1])
    return ganfw_error_set(
        GANFW_ERR_CONFIG,
        "%s: %s.after is %s%s%s; name the node to insert after as NET.NODE, the net and its "
        "layer as `ganfw plan CONFIG` lists them (e.g. generator.main.5, or generator.input to "
        "insert before the first layer)",
        ganfw_cfg_where(it->after ? ganfw_cfg_child(it->cfg, "after") : it->cfg), it->key,
        it->after ? "'" : "missing", it->after ? it->after : "", it->after ? "'" : "");
  if ((st = ganfw_cfg_string(it->cfg, "name", plugin, &it->name)) != GANFW_OK) return st;
  if (!it->name || !*it->name)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s.name is empty; give the new layer a name",
                           ganfw_cfg_where(ganfw_cfg_child(it->cfg, "name")), it->key);
  const size_t n = (size_t)(dot - it->after);
  if (!(it->net = malloc(n + 1))) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  memcpy(it->net, it->after, n);
  it->net[n] = '\0';
  it->node = dot + 1;
  char what[512];
  snprintf(what, sizeof what, "%s: %s.plugin", ganfw_cfg_where(ganfw_cfg_child(it->cfg, "plugin")),
           it->key);
  if ((st = ganfw_plugin_load(plugin, GANFW_PLUGIN_LAYER, what, dirs, ndirs, &it->plugin)))
    return st;
  it->frame = (ganfw_plugin_frame){ganfw_plugin_name(it->plugin), ganfw_plugin_path(it->plugin),
                                   "layer.create"};
  return GANFW_OK;
}

ganfw_status ganfw_inserts_open(const ganfw_cfg *section, const char *where,
                                const char *const *dirs, int64_t ndirs, ganfw_inserts **out) {
  *out = NULL;
  if (!ganfw_cfg_has(section, "insert")) return GANFW_OK;
  const ganfw_cfg *list = ganfw_cfg_child(section, "insert");
  const int64_t n = ganfw_cfg_list_len(section, "insert");
  if (n < 0 || n > INSERT_MAX_ITEMS)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s.insert must be a list of at most %d layers to insert, each "
                           "{after: NET.NODE, name: NAME, plugin: PLUGIN, ...}",
                           ganfw_cfg_where(list), where, INSERT_MAX_ITEMS);
  ganfw_inserts *ins = calloc(1, sizeof *ins);
  if (ins && n > 0 && !(ins->items = calloc((size_t)n, sizeof *ins->items))) {
    free(ins);
    ins = NULL;
  }
  if (!ins) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ins->n = n; /* zeroed items: destroy frees what a failed open_item made */
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; i < n && st == GANFW_OK; i++)
    st = open_item(section, where, i, dirs, ndirs, &ins->items[i]);
  if (st != GANFW_OK) {
    ganfw_inserts_destroy(ins);
    return st;
  }
  *out = ins;
  return GANFW_OK;
}

/* --- the hook ----------------------------------------------------------------------------- */

/* The nodes of `net` (not yet built) into buf, "main.0, main.1, ...", and the nearest to
 * `typed` into near (empty when none is near enough). */
static void list_nodes(const ganfw_net *net, const char *typed, char *buf, size_t cap, char *near,
                       size_t near_cap) {
  size_t len = 0, best = (size_t)-1;
  buf[0] = near[0] = '\0';
  for (int32_t i = -1; i < ganfw_net_layer_count(net); i++) {
    const char *name = i < 0 ? INSERT_INPUT : ganfw_net_layer_name(net, i);
    const size_t d = ganfw_edit_distance(typed, name);
    if (d < best && ganfw_suggest_near(strlen(typed), d)) {
      best = d;
      snprintf(near, near_cap, "%s", name);
    }
    if (i >= 0 && len < cap) {
      const int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", name);
      len += w > 0 ? (size_t)w : 0;
    }
  }
}

/* Creates item it's layer from its keys and inserts it into net. */
static ganfw_status insert_item_into(ganfw_inserts *ins, insert_item *it, ganfw_net *net) {
  const char *at = ganfw_cfg_where(ganfw_cfg_child(it->cfg, "after"));
  if (strcmp(it->node, INSERT_INPUT) != 0 && ganfw_net_layer_index(net, it->node) < 0) {
    char nodes[1024], near[128], hint[160] = "";
    list_nodes(net, it->node, nodes, sizeof nodes, near, sizeof near);
    if (near[0]) snprintf(hint, sizeof hint, " (did you mean '%s.%s'?)", it->net, near);
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s.after: the %s of model '%s' has no node '%s'%s; its nodes are "
                           "%s (and '" INSERT_INPUT "', to insert before the first); `ganfw plan "
                           "CONFIG` lists them",
                           at, it->key, it->net, ins->model, it->node, hint, nodes);
  }
  const ganfw_layer_plugin_vt *vt = ganfw_plugin_vtable(it->plugin);
  const ganfw_plugin_frame *prev = ganfw_plugin_enter(&it->frame);
  void *state = NULL;
  ganfw_status st = ganfw_plugin_apply_config_keys(it->plugin, it->cfg);
  if (st == GANFW_OK && (st = vt->create(ganfw_host_table(), ins->ctx, it->cfg, &state)))
    state = NULL;
  if (st == GANFW_OK) st = ganfw_net_insert_custom(net, it->node, it->name, vt->def(), state);
  ganfw_plugin_leave(prev);
  if (st != GANFW_OK)
    return ganfw_error_wrap(st, "%s: %s (layer plugin '%s' after %s)", ganfw_cfg_where(it->cfg),
                            it->key, ganfw_plugin_name(it->plugin), it->after);
  ganfw_log(GANFW_LOG_INFO, "%s: inserted %s.%s (%s) after %s", it->key, it->net, it->name,
            ganfw_plugin_name(it->plugin), it->after);
  it->done = 1;
  return GANFW_OK;
}

/* net_build's hook: the items that name this net, in the config's order (an item may insert
 * after a node an earlier one inserted). */
static ganfw_status insert_hook(void *user, ganfw_net *net) {
  ganfw_inserts *ins = user;
  const char *name = ganfw_net_name(net);
  if (ins->n_net < INSERT_MAX_NETS) {
    snprintf(ins->net_names[ins->n_net], sizeof ins->net_names[0], "%s", name);
    ins->nets[ins->n_net++] = net;
  }
  for (int64_t i = 0; i < ins->n; i++) {
    insert_item *it = &ins->items[i];
    if (it->done || strcmp(it->net, name) != 0) continue;
    ganfw_status st = insert_item_into(ins, it, net);
    if (st != GANFW_OK) {
      ins->failed = st;
      snprintf(ins->failure, sizeof ins->failure, "%s", ganfw_error_message());
      return st;
    }
  }
  return GANFW_OK;
}

void ganfw_inserts_arm(ganfw_inserts *ins, ganfw_ctx *ctx, const char *model) {
  if (!ins) return;
  ins->ctx = ctx;
  ins->model = model;
  ins->n_net = 0;
  ins->failed = GANFW_OK;
  for (int64_t i = 0; i < ins->n; i++) ins->items[i].done = 0;
  ctx->net_build_hook = insert_hook;
  ctx->net_build_user = ins;
}

ganfw_status ganfw_inserts_finish(ganfw_inserts *ins, ganfw_ctx *ctx, int32_t created) {
  if (!ins) return GANFW_OK;
  if (ctx && ctx->net_build_user == ins) {
    ctx->net_build_hook = NULL;
    ctx->net_build_user = NULL;
  }
  if (ins->failed) return ganfw_error_set(ins->failed, "%s", ins->failure);
  for (int64_t i = 0; created && i < ins->n; i++) {
    const insert_item *it = &ins->items[i];
    if (it->done) continue;
    char nets[512] = "", near[64] = "", hint[160] = "";
    size_t len = 0, best = (size_t)-1;
    for (int32_t k = 0; k < ins->n_net; k++) {
      const char *net = ins->net_names[k];
      const size_t d = ganfw_edit_distance(it->net, net);
      if (d < best && ganfw_suggest_near(strlen(it->net), d))
        best = d, snprintf(near, sizeof near, "%s", net);
      const int w = snprintf(nets + len, sizeof nets - len, "%s%s", k ? ", " : "", net);
      len += w > 0 && (size_t)w < sizeof nets - len ? (size_t)w : 0;
    }
    if (near[0]) snprintf(hint, sizeof hint, " (did you mean '%s.%s'?)", near, it->node);
    for (int32_t k = 0, found = 0; k < ins->n_net && !near[0]; k++) /* `after` without its net */
      if (ganfw_net_layer_index(ins->nets[k], it->after) >= 0) {
        const size_t at = found ? strlen(hint) - 3 : 0; /* before "'?)" */
        snprintf(hint + at, sizeof hint - at, "%s%s.%s'?)", found++ ? "' or '" : " (did you mean '",
                 ins->net_names[k], it->after);
      }
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s.after: model '%s' builds no net '%s'%s; its nets are %s: name "
                           "the node to insert after as NET.NODE (`ganfw plan CONFIG` lists them)",
                           ganfw_cfg_where(ganfw_cfg_child(it->cfg, "after")), it->key, ins->model,
                           it->net, hint, ins->n_net ? nets : "none");
  }
  return GANFW_OK;
}
