/* model.widths (see widths.h): the map read into flat entries "layer1.0.conv1" -> 8, and the
 * net_build hook that hands each net its entries, after model.insert's hook. */
#include "train/widths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/suggest.h"
#include "nn/net.h"

#define WIDTHS_MAX_NETS 16

typedef struct width_entry {
  char *net;   /* "generator" for "generator:main.0", else NULL: the model's one net */
  char *layer; /* "main.0" */
  char *where; /* "a.yaml:7:5: model.widths.generator:main.0" */
  int64_t width;
} width_entry;

struct ganfw_widths {
  width_entry *e;
  int32_t n, cap;
  ganfw_ctx *ctx;
  ganfw_status (*prev)(void *user, ganfw_net *net); /* the hook before ours (model.insert) */
  void *prev_user;
  char nets[WIDTHS_MAX_NETS][64]; /* the nets built while armed, in order */
  int32_t n_net;
};

void ganfw_widths_destroy(ganfw_widths *w) {
  if (!w) return;
  for (int32_t i = 0; i < w->n; i++) {
    free(w->e[i].net);
    free(w->e[i].layer);
    free(w->e[i].where);
  }
  free(w->e);
  free(w);
}

static ganfw_status add_entry(ganfw_widths *w, const char *name, int64_t width, const char *where) {
  if (w->n == w->cap) {
    const int32_t cap = w->cap ? 2 * w->cap : 32;
    width_entry *e = realloc(w->e, (size_t)cap * sizeof *e);
    if (!e) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    w->e = e, w->cap = cap;
  }
  width_entry *e = &w->e[w->n];
  memset(e, 0, sizeof *e);
  const char *colon = strchr(name, ':');
  e->net = colon ? strndup(name, (size_t)(colon - name)) : NULL;
  e->layer = strdup(colon ? colon + 1 : name);
  e->where = strdup(where);
  e->width = width;
  w->n++;
  if ((colon && !e->net) || !e->layer || !e->where)
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  return GANFW_OK;
}

/* The entries of `map` under the dotted `prefix` ("" at the top); `path` is the map's key. */
static ganfw_status read_map(ganfw_widths *w, const ganfw_cfg *map, const char *prefix,
                             const char *path) {
  const char *key;
  for (int64_t i = 0; (key = ganfw_cfg_key_at(map, i)) != NULL; i++) {
    char name[512], where[1024];
    snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", key);
    const ganfw_cfg *child = ganfw_cfg_child(map, key);
    if (ganfw_cfg_kind_of(child) == GANFW_CFG_KIND_MAP) {
      ganfw_status st = read_map(w, child, name, path);
      if (st != GANFW_OK) return st;
      continue;
    }
    snprintf(where, sizeof where, "%s: %s.%s", ganfw_cfg_where(child), path, name);
    if (ganfw_cfg_kind_of(child) != GANFW_CFG_KIND_SCALAR)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: expected a width (the layer's out channels), or a map of the "
                             "layers under '%s'",
                             where, name);
    int64_t width = 0;
    ganfw_status st = ganfw_cfg_int(map, key, 0, &width);
    if (st == GANFW_OK) st = add_entry(w, name, width, where);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

ganfw_status ganfw_widths_open(const ganfw_cfg *section, const char *where, ganfw_widths **out) {
  *out = NULL;
  if (!ganfw_cfg_has(section, "widths")) return GANFW_OK;
  const ganfw_cfg *map = ganfw_cfg_child(section, "widths");
  char path[256];
  snprintf(path, sizeof path, "%s.widths", where);
  if (ganfw_cfg_kind_of(map) != GANFW_CFG_KIND_MAP)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s must be a map from layer names to their out channels, such "
                           "as {conv1: 8, layer1: {0: {conv1: 8}}} (layer1.0.conv1)",
                           ganfw_cfg_where(map), path);
  ganfw_widths *w = calloc(1, sizeof *w);
  if (!w) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = read_map(w, map, "", path);
  if (st != GANFW_OK) {
    ganfw_widths_destroy(w);
    return st;
  }
  *out = w;
  return GANFW_OK;
}

/* net_build's hook: model.insert's first, then this net's entries. */
static ganfw_status widths_hook(void *user, ganfw_net *net) {
  ganfw_widths *w = user;
  if (w->prev) {
    ganfw_status st = w->prev(w->prev_user, net);
    if (st != GANFW_OK) return st;
  }
  const char *name = ganfw_net_name(net);
  const int32_t first = w->n_net == 0;
  if (w->n_net < WIDTHS_MAX_NETS) snprintf(w->nets[w->n_net++], sizeof w->nets[0], "%s", name);
  ganfw_net_width *mine = calloc((size_t)w->n, sizeof *mine);
  if (!mine) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  int32_t n = 0;
  for (int32_t i = 0; i < w->n; i++) {
    const width_entry *e = &w->e[i];
    if (e->net ? strcmp(e->net, name) == 0 : first)
      mine[n++] = (ganfw_net_width){.layer = e->layer, .width = e->width, .where = e->where};
  }
  ganfw_status st = n ? ganfw_net_set_widths(net, mine, n) : GANFW_OK;
  free(mine);
  return st;
}

void ganfw_widths_arm(ganfw_widths *w, ganfw_ctx *ctx) {
  if (!w) return;
  w->ctx = ctx;
  w->n_net = 0;
  w->prev = ctx->net_build_hook;
  w->prev_user = ctx->net_build_user;
  ctx->net_build_hook = widths_hook;
  ctx->net_build_user = w;
}

ganfw_status ganfw_widths_finish(ganfw_widths *w, ganfw_ctx *ctx, int32_t created) {
  if (!w) return GANFW_OK;
  if (ctx && ctx->net_build_user == w) {
    ctx->net_build_hook = w->prev;
    ctx->net_build_user = w->prev_user;
  }
  if (!created) return GANFW_OK;
  char nets[512] = "";
  for (int32_t k = 0; k < w->n_net; k++)
    snprintf(nets + strlen(nets), sizeof nets - strlen(nets), "%s%s", k ? ", " : "", w->nets[k]);
  for (int32_t i = 0; i < w->n; i++) {
    const width_entry *e = &w->e[i];
    if (!e->net && w->n_net > 1)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: the model builds several nets (%s): name the net before the "
                             "layer, as \"%s:%s\"",
                             e->where, nets, w->nets[0], e->layer);
    int32_t found = !e->net;
    for (int32_t k = 0; k < w->n_net && !found; k++) found = strcmp(w->nets[k], e->net) == 0;
    if (!found) {
      char hint[160] = "";
      for (int32_t k = 0; k < w->n_net && !hint[0]; k++)
        if (ganfw_suggest_near(strlen(e->net), ganfw_edit_distance(e->net, w->nets[k])))
          snprintf(hint, sizeof hint, " (did you mean '%s'?)", w->nets[k]);
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: the model builds no net '%s'%s; its nets are %s", e->where,
                             e->net, hint, w->n_net ? nets : "none");
    }
  }
  return GANFW_OK;
}
