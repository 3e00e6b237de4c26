/* The config tree and its readers: nodes (map, list, scalar) that remember where in which
 * file they were written, the typed getters of the host table (which mark keys as read and
 * record the defaults they supply), merging with the `extends:` markers (`~key`,
 * `_replace_`), the unread-key check with spelling suggestions, and the resolved-config
 * writer. YAML parsing and `extends:` live in config_yaml.c, --set in override.c. */
#include "config/config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/config_tree.h"
#include "base/error.h"
#include "base/suggest.h"

static const char default_file[] = "(default)";

struct ganfw_cfg {
  ganfw_cfg_kind kind;
  ganfw_cfg *parent;
  char *key;                 /* the key in the parent map; NULL for list items and the top */
  const char *file;          /* interned by the config, or a literal */
  int64_t line, col;         /* of the value; line 0: `file` alone names the place */
  int64_t key_line, key_col; /* of the key in the parent map */
  /* scalar */
  char *text;
  int32_t quoted;  /* written as a quoted string in the YAML */
  int32_t is_null; /* a YAML null: empty, ~ or null */
  /* map entries (each with its key) or list items, in document order */
  ganfw_cfg **items;
  int64_t n, cap;
  /* map: the keys components asked for here (read, defaulted, or absent) or declared */
  struct cfg_name *names;
  int64_t n_names, cap_names;
  int32_t used;      /* read by a getter or handed out by ganfw_cfg_child */
  int32_t defaulted; /* created for a default or an implicit section, not written by a user */
  /* formatted lazily, freed with the node */
  char *where_s, *key_where_s, *path_s;
};

struct cfg_name {
  char *name;
  int32_t declared; /* from ganfw_config_known_keys */
};

struct ganfw_config {
  ganfw_cfg *root;
  const char *file;
  char **strings; /* interned file names */
  int64_t n_strings, cap_strings;
};

/* --- small helpers ------------------------------------------------------------------- */

static ganfw_status oom(void) {
  return ganfw_error_set(GANFW_ERR_OOM, "config: out of host memory");
}

static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return 1;
  int64_t c = *cap ? *cap * 2 : 8;
  while (c < need) c *= 2;
  void *q = realloc(*p, (size_t)c * elem);
  if (!q) return 0;
  *p = q;
  *cap = c;
  return 1;
}

/* printf into a fresh heap string (NULL when out of memory). */
static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (len < 0) return NULL;
  char *s = malloc((size_t)len + 1);
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)len + 1, fmt, ap);
  va_end(ap);
  return s;
}

static char *format_pos(const char *file, int64_t line, int64_t col) {
  if (line <= 0) return str_printf("%s", file);
  return str_printf("%s:%" PRId64 ":%" PRId64, file, line, col);
}

/* --- nodes ----------------------------------------------------------------------------- */

ganfw_cfg *cfg_node_new(ganfw_cfg_kind kind, const char *file, int64_t line, int64_t col) {
  ganfw_cfg *n = calloc(1, sizeof *n);
  if (!n) {
    oom();
    return NULL;
  }
  n->kind = kind;
  n->file = file;
  n->line = n->key_line = line;
  n->col = n->key_col = col;
  return n;
}

ganfw_status cfg_scalar_set(ganfw_cfg *s, const char *text, size_t len, int32_t quoted,
                            int32_t is_null) {
  char *t = malloc(len + 1);
  if (!t) return oom();
  memcpy(t, text, len);
  t[len] = '\0';
  free(s->text);
  s->text = t;
  s->quoted = quoted;
  s->is_null = is_null;
  return GANFW_OK;
}

static void null_to_map(ganfw_cfg *n);

/* Drops the cached path strings of a subtree whose place in the tree changed. */
static void forget_paths(ganfw_cfg *n) {
  free(n->path_s);
  n->path_s = NULL;
  for (int64_t i = 0; i < n->n; i++) forget_paths(n->items[i]);
}

void cfg_node_free(ganfw_cfg *n) {
  if (!n) return;
  for (int64_t i = 0; i < n->n; i++) cfg_node_free(n->items[i]);
  for (int64_t i = 0; i < n->n_names; i++) free(n->names[i].name);
  free(n->items);
  free(n->names);
  free(n->key);
  free(n->text);
  free(n->where_s);
  free(n->key_where_s);
  free(n->path_s);
  free(n);
}

ganfw_cfg *cfg_map_find(const ganfw_cfg *map, const char *key) {
  if (!map || map->kind != GANFW_CFG_KIND_MAP) return NULL;
  for (int64_t i = 0; i < map->n; i++)
    if (strcmp(map->items[i]->key, key) == 0) return map->items[i];
  return NULL;
}

static ganfw_status append_item(ganfw_cfg *parent, ganfw_cfg *child) {
  if (!grow((void **)&parent->items, &parent->cap, parent->n + 1, sizeof *parent->items)) {
    cfg_node_free(child);
    return oom();
  }
  parent->items[parent->n++] = child;
  child->parent = parent;
  forget_paths(child);
  return GANFW_OK;
}

ganfw_status cfg_map_append(ganfw_cfg *map, const char *key, int64_t key_line, int64_t key_col,
                            ganfw_cfg *child) {
  free(child->key);
  child->key = strdup(key);
  if (!child->key) {
    cfg_node_free(child);
    return oom();
  }
  child->key_line = key_line;
  child->key_col = key_col;
  return append_item(map, child);
}

ganfw_cfg *cfg_map_detach(ganfw_cfg *map, const char *key) {
  for (int64_t i = 0; i < map->n; i++) {
    ganfw_cfg *c = map->items[i];
    if (strcmp(c->key, key) != 0) continue;
    memmove(map->items + i, map->items + i + 1, (size_t)(map->n - i - 1) * sizeof *map->items);
    map->n--;
    c->parent = NULL;
    return c;
  }
  return NULL;
}

ganfw_status cfg_list_append(ganfw_cfg *list, ganfw_cfg *item) {
  return append_item(list, item);
}

int64_t cfg_node_count(const ganfw_cfg *n) {
  return n ? n->n : 0;
}

ganfw_cfg *cfg_node_at(const ganfw_cfg *n, int64_t i) {
  return (n && i >= 0 && i < n->n) ? n->items[i] : NULL;
}

const char *cfg_scalar_text(const ganfw_cfg *n) {
  return (n && n->text) ? n->text : "";
}

int32_t cfg_scalar_is_null(const ganfw_cfg *n) {
  return n && n->kind == GANFW_CFG_KIND_SCALAR && n->is_null;
}

/* --- extends markers: `~key:` drops, `_replace_: true` replaces --------------------------- */

static const char replace_marker[] = "_replace_";

static int is_drop_key(const ganfw_cfg *n) {
  return n->key && n->key[0] == '~' && n->key[1];
}

/* `_replace_`'s value: 1 true, 0 false, -1 (and an error) otherwise. */
static int replace_value(const ganfw_cfg *m) {
  static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
  if (m->kind == GANFW_CFG_KIND_SCALAR && !m->is_null) {
    for (int i = 0; i < 3; i++) {
      if (strcasecmp(m->text, yes[i]) == 0) return 1;
      if (strcasecmp(m->text, no[i]) == 0) return 0;
    }
  }
  ganfw_error_set(GANFW_ERR_CONFIG,
                  "%s: %s: expected true or false (true: this map replaces the base's section "
                  "instead of merging into it)",
                  cfg_key_where(m), ganfw_cfg_path(m));
  return -1;
}

static ganfw_status drop_nothing_error(const ganfw_cfg *d) {
  return ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s: %s: nothing to drop: no base config sets '%s' here (check the "
                         "spelling, or remove the line)",
                         cfg_key_where(d), ganfw_cfg_path(d), d->key + 1);
}

/* Checks a `~key` entry of `map`: no value, and not set in the same map too. */
static ganfw_status check_drop(const ganfw_cfg *map, const ganfw_cfg *d) {
  if (!(d->kind == GANFW_CFG_KIND_SCALAR && d->is_null))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s: `%s:` takes no value (it drops '%s' from the base config); "
                           "write `%s:` alone",
                           cfg_key_where(d), ganfw_cfg_path(d), d->key, d->key + 1, d->key);
  if (cfg_map_find(map, d->key + 1))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s: the same map both drops and sets '%s'; keep one (to "
                           "replace the base's value, just set it)",
                           cfg_key_where(d), ganfw_cfg_path(d), d->key + 1);
  return GANFW_OK;
}

/* Removes entry i of `map` and frees it. */
static void remove_at(ganfw_cfg *map, int64_t i) {
  cfg_node_free(map->items[i]);
  memmove(map->items + i, map->items + i + 1, (size_t)(map->n - i - 1) * sizeof *map->items);
  map->n--;
}

/* Applies the markers of `over` (a map merging into the map `base`): drops base's keys
 * named by `~key` entries and removes those entries; removes `_replace_` and sets *replace
 * to its value. */
static ganfw_status apply_markers(ganfw_cfg *base, ganfw_cfg *over, int *replace) {
  *replace = 0;
  ganfw_cfg *marker = cfg_map_find(over, replace_marker);
  if (marker) {
    int v = replace_value(marker);
    if (v < 0) return GANFW_ERR_CONFIG;
    *replace = v;
  }
  for (int64_t j = 0; j < over->n; j++) {
    ganfw_cfg *o = over->items[j];
    if (!is_drop_key(o)) continue;
    ganfw_status st = check_drop(over, o);
    if (st) return st;
    int64_t i = 0;
    while (i < base->n && strcmp(base->items[i]->key, o->key + 1) != 0) i++;
    if (i == base->n && !*replace) return drop_nothing_error(o);
    if (i < base->n) remove_at(base, i);
  }
  for (int64_t j = over->n - 1; j >= 0; j--)
    if (is_drop_key(over->items[j]) || strcmp(over->items[j]->key, replace_marker) == 0)
      remove_at(over, j);
  return GANFW_OK;
}

ganfw_status cfg_settle_markers(ganfw_cfg *n) {
  if (n->kind == GANFW_CFG_KIND_SCALAR) return GANFW_OK;
  for (int64_t j = 0; j < n->n; j++) {
    ganfw_cfg *c = n->items[j];
    if (n->kind == GANFW_CFG_KIND_MAP && is_drop_key(c)) {
      ganfw_status st = check_drop(n, c);
      return st ? st : drop_nothing_error(c);
    }
    if (n->kind == GANFW_CFG_KIND_MAP && strcmp(c->key, replace_marker) == 0) {
      if (replace_value(c) < 0) return GANFW_ERR_CONFIG;
      remove_at(n, j--);
      continue;
    }
    ganfw_status st = cfg_settle_markers(c);
    if (st) return st;
  }
  return GANFW_OK;
}

ganfw_status cfg_merge(ganfw_cfg *base, ganfw_cfg *over, ganfw_cfg **result) {
  if (base->kind != GANFW_CFG_KIND_MAP || over->kind != GANFW_CFG_KIND_MAP) {
    cfg_node_free(base);
    *result = over;
    return GANFW_OK;
  }
  int replace;
  ganfw_status status = apply_markers(base, over, &replace);
  if (status || replace) {
    ganfw_cfg *keep = status ? base : over;
    cfg_node_free(status ? over : base);
    *result = keep;
    return status;
  }
  for (int64_t j = 0; j < over->n; j++) {
    ganfw_cfg *o = over->items[j];
    over->items[j] = NULL;
    int64_t i = 0;
    while (i < base->n && strcmp(base->items[i]->key, o->key) != 0) i++;
    if (i == base->n) {
      ganfw_status st = append_item(base, o); /* frees `o` when out of memory */
      if (st) status = st;
      continue;
    }
    ganfw_cfg *m;
    ganfw_status st = cfg_merge(base->items[i], o, &m); /* m is base's node (maps) or o */
    if (st && !status) status = st;
    base->items[i] = m;
    m->parent = base;
    forget_paths(m);
    /* A failed merge below leaves the rest of `over` unmerged; it is freed with it. */
    if (status == GANFW_ERR_CONFIG) {
      for (int64_t k = j + 1; k < over->n; k++) {
        cfg_node_free(over->items[k]);
        over->items[k] = NULL;
      }
      break;
    }
  }
  base->defaulted = base->defaulted && over->defaulted;
  base->used = base->used || over->used;
  over->n = 0;
  cfg_node_free(over);
  *result = base;
  return status;
}

ganfw_status cfg_map_put(ganfw_cfg *map, const char *key, ganfw_cfg *value) {
  ganfw_cfg *child = cfg_map_find(map, key);
  if (!child) return cfg_map_append(map, key, 0, 0, value);
  int64_t i = 0;
  while (map->items[i] != child) i++;
  free(value->key);
  value->key = strdup(key);
  if (!value->key) {
    cfg_node_free(value);
    return oom();
  }
  ganfw_cfg *m;
  ganfw_status st = cfg_merge(child, value, &m);
  map->items[i] = m;
  m->parent = map;
  forget_paths(m);
  return st;
}

int32_t cfg_as_section(ganfw_cfg *n) {
  null_to_map(n);
  n->defaulted = 0;
  return n->kind == GANFW_CFG_KIND_MAP;
}

/* --- the config -------------------------------------------------------------------------- */

ganfw_config *cfg_config_new(void) {
  ganfw_config *c = calloc(1, sizeof *c);
  if (!c) oom();
  return c;
}

const char *cfg_intern(ganfw_config *c, const char *s) {
  for (int64_t i = 0; i < c->n_strings; i++)
    if (strcmp(c->strings[i], s) == 0) return c->strings[i];
  if (!grow((void **)&c->strings, &c->cap_strings, c->n_strings + 1, sizeof *c->strings)) {
    oom();
    return NULL;
  }
  char *d = strdup(s);
  if (!d) {
    oom();
    return NULL;
  }
  c->strings[c->n_strings++] = d;
  return d;
}

void cfg_config_set_root(ganfw_config *c, ganfw_cfg *root, const char *file) {
  cfg_node_free(c->root);
  c->root = root;
  c->file = file;
  root->used = 1;
}

void ganfw_config_destroy(ganfw_config *c) {
  if (!c) return;
  cfg_node_free(c->root);
  for (int64_t i = 0; i < c->n_strings; i++) free(c->strings[i]);
  free(c->strings);
  free(c);
}

const ganfw_cfg *ganfw_config_root(const ganfw_config *c) {
  return c ? c->root : NULL;
}

const char *ganfw_config_file(const ganfw_config *c) {
  return c ? c->file : NULL;
}

/* `n` and its subtree as nodes of `dst`, every field but the formatted places (made again
 * when asked for); file names interned in dst. NULL when out of memory (error recorded). */
static ganfw_cfg *clone_node(ganfw_config *dst, const ganfw_cfg *n) {
  const char *file = cfg_intern(dst, n->file);
  ganfw_cfg *c = file ? cfg_node_new(n->kind, file, n->line, n->col) : NULL;
  if (!c) return NULL;
  c->key_line = n->key_line;
  c->key_col = n->key_col;
  c->quoted = n->quoted;
  c->is_null = n->is_null;
  c->used = n->used;
  c->defaulted = n->defaulted;
  int ok = !n->text || (c->text = strdup(n->text)) != NULL;
  if (ok && n->n_names > 0) {
    ok = grow((void **)&c->names, &c->cap_names, n->n_names, sizeof *c->names);
    for (int64_t i = 0; ok && i < n->n_names; i++) {
      c->names[i].declared = n->names[i].declared;
      ok = (c->names[i].name = strdup(n->names[i].name)) != NULL;
      if (ok) c->n_names = i + 1;
    }
  }
  for (int64_t i = 0; ok && i < n->n; i++) {
    const ganfw_cfg *it = n->items[i];
    ganfw_cfg *item = clone_node(dst, it);
    ok = item && (n->kind == GANFW_CFG_KIND_MAP
                      ? cfg_map_append(c, it->key, it->key_line, it->key_col, item)
                      : cfg_list_append(c, item)) == GANFW_OK;
  }
  if (!ok) {
    cfg_node_free(c);
    oom();
    return NULL;
  }
  return c;
}

ganfw_status ganfw_config_copy(const ganfw_config *c, const char *const *sets, int nsets,
                               ganfw_config **out) {
  if (!out) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: copy: out is NULL");
  *out = NULL;
  if (!c || !c->root) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: copy: no config");
  ganfw_config *d = cfg_config_new();
  const char *file = d ? cfg_intern(d, c->file) : NULL;
  ganfw_cfg *root = file ? clone_node(d, c->root) : NULL;
  if (!root) {
    ganfw_config_destroy(d);
    return GANFW_ERR_OOM;
  }
  cfg_config_set_root(d, root, file);
  for (int i = 0; i < nsets; i++) {
    ganfw_status st = ganfw_config_set(d, sets[i]);
    if (st != GANFW_OK) {
      ganfw_config_destroy(d);
      return st;
    }
  }
  *out = d;
  return GANFW_OK;
}

/* --- positions and paths ------------------------------------------------------------------ */

const char *ganfw_cfg_where(const ganfw_cfg *node) {
  if (!node) return "(absent)";
  ganfw_cfg *n = (ganfw_cfg *)node;
  if (!n->where_s) n->where_s = format_pos(n->file, n->line, n->col);
  return n->where_s ? n->where_s : n->file;
}

const char *cfg_key_where(const ganfw_cfg *node) {
  if (!node) return "(absent)";
  ganfw_cfg *n = (ganfw_cfg *)node;
  if (!n->key_where_s) n->key_where_s = format_pos(n->file, n->key_line, n->key_col);
  return n->key_where_s ? n->key_where_s : n->file;
}

const char *ganfw_cfg_path(const ganfw_cfg *node) {
  if (!node) return "";
  ganfw_cfg *n = (ganfw_cfg *)node;
  if (n->path_s) return n->path_s;
  if (!n->parent) {
    n->path_s = strdup("");
  } else {
    const char *p = ganfw_cfg_path(n->parent);
    if (n->parent->kind == GANFW_CFG_KIND_MAP) {
      n->path_s = p[0] ? str_printf("%s.%s", p, n->key) : str_printf("%s", n->key);
    } else {
      int64_t i = 0;
      while (i < n->parent->n && n->parent->items[i] != n) i++;
      n->path_s = str_printf("%s[%" PRId64 "]", p, i);
    }
  }
  return n->path_s ? n->path_s : "?";
}

const char *cfg_kind_phrase(const ganfw_cfg *n) {
  switch (n->kind) {
  case GANFW_CFG_KIND_MAP:
    return "a map (a section of keys)";
  case GANFW_CFG_KIND_LIST:
    return "a list";
  default:
    return n->is_null ? "an empty value (null)" : "a scalar";
  }
}

/* "where: path: " + the message, as GANFW_ERR_CONFIG. */
static ganfw_status value_error(const ganfw_cfg *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static ganfw_status value_error(const ganfw_cfg *n, const char *fmt, ...) {
  char *msg;
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  msg = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (!msg) return oom();
  va_start(ap, fmt);
  vsnprintf(msg, (size_t)len + 1, fmt, ap);
  va_end(ap);
  const char *path = ganfw_cfg_path(n);
  ganfw_status st = ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s: %s", ganfw_cfg_where(n),
                                    path[0] ? path : "(top level)", msg);
  free(msg);
  return st;
}

/* "expected <what>, got 'text'" (or "got a list" ...). */
static ganfw_status type_error(const ganfw_cfg *n, const char *what) {
  if (n->kind == GANFW_CFG_KIND_SCALAR && !n->is_null)
    return value_error(n, "expected %s, got '%s'", what, n->text);
  return value_error(n, "expected %s, got %s", what, cfg_kind_phrase(n));
}

/* --- walking dotted keys ----------------------------------------------------------------- */

static ganfw_status remember_name(ganfw_cfg *map, const char *name, size_t len, int32_t declared) {
  for (int64_t i = 0; i < map->n_names; i++) {
    if (strlen(map->names[i].name) == len && strncmp(map->names[i].name, name, len) == 0) {
      map->names[i].declared |= declared;
      return GANFW_OK;
    }
  }
  if (!grow((void **)&map->names, &map->cap_names, map->n_names + 1, sizeof *map->names))
    return oom();
  char *s = strndup(name, len);
  if (!s) return oom();
  map->names[map->n_names].name = s;
  map->names[map->n_names].declared = declared;
  map->n_names++;
  return GANFW_OK;
}

/* A null where a section is expected (`train:` with every key commented out) is an empty
 * section. */
static void null_to_map(ganfw_cfg *n) {
  if (n->kind == GANFW_CFG_KIND_SCALAR && n->is_null) {
    n->kind = GANFW_CFG_KIND_MAP;
    n->is_null = 0;
    free(n->text);
    n->text = NULL;
  }
}

static ganfw_cfg *find_n(const ganfw_cfg *map, const char *key, size_t len) {
  for (int64_t i = 0; i < map->n; i++)
    if (strlen(map->items[i]->key) == len && strncmp(map->items[i]->key, key, len) == 0)
      return map->items[i];
  return NULL;
}

enum {
  WALK_MARK = 1,   /* mark the sections on the way as used, remember the names asked for */
  WALK_CREATE = 2, /* create absent sections on the way (as defaults) */
};

/* Follows the dotted `key` from `node`. *found is the node, or NULL when absent; then
 * *parent is the map that would hold it (NULL when a section on the way is absent and not
 * created) and *last points into `key` at the last name. */
static ganfw_status walk(ganfw_cfg *node, const char *key, int flags, ganfw_cfg **found,
                         ganfw_cfg **parent, const char **last) {
  *found = NULL;
  *parent = NULL;
  *last = key;
  ganfw_cfg *cur = node;
  const char *seg = key;
  for (;;) {
    const char *dot = strchr(seg, '.');
    size_t len = dot ? (size_t)(dot - seg) : strlen(seg);
    if (len == 0)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "config: key '%s' has an empty part (a programming error)", key);
    null_to_map(cur);
    if (cur->kind != GANFW_CFG_KIND_MAP) {
      return value_error(cur, "expected a section (a map) holding '%.*s', got %s", (int)len, seg,
                         cur->kind == GANFW_CFG_KIND_LIST ? "a list" : "a scalar");
    }
    if (flags & WALK_MARK) {
      ganfw_status st = remember_name(cur, seg, len, 0);
      if (st) return st;
    }
    ganfw_cfg *child = find_n(cur, seg, len);
    if (!dot) {
      *found = child;
      *parent = cur;
      *last = seg;
      return GANFW_OK;
    }
    if (!child) {
      if (!(flags & WALK_CREATE)) return GANFW_OK;
      child = cfg_node_new(GANFW_CFG_KIND_MAP, default_file, 0, 0);
      if (!child) return GANFW_ERR_OOM;
      child->defaulted = 1;
      child->used = 1;
      char *name = strndup(seg, len);
      if (!name) {
        cfg_node_free(child);
        return oom();
      }
      ganfw_status st = cfg_map_append(cur, name, 0, 0, child);
      free(name);
      if (st) return st;
    } else if (flags & WALK_MARK) {
      child->used = 1;
    }
    cur = child;
    seg = dot + 1;
  }
}

/* The scalar a typed getter reads. *val is NULL when the default applies; then, when
 * *parent is not NULL, the default is to be recorded there under *last. */
static ganfw_status find_scalar(const ganfw_cfg *node, const char *key, const char *what,
                                ganfw_cfg **val, ganfw_cfg **parent, const char **last) {
  *val = NULL;
  *parent = NULL;
  if (!node) return GANFW_OK;
  ganfw_cfg *n = (ganfw_cfg *)node;
  if (key) {
    ganfw_status st = walk(n, key, WALK_MARK | WALK_CREATE, &n, parent, last);
    if (st) return st;
    if (!n) return GANFW_OK;
  }
  n->used = 1;
  if (n->kind != GANFW_CFG_KIND_SCALAR) return type_error(n, what);
  *val = n;
  return GANFW_OK;
}

/* Records the default `text` under parent[last] (a string, or a null when text is NULL). */
static ganfw_status record_default(ganfw_cfg *parent, const char *last, const char *text) {
  if (!parent) return GANFW_OK;
  ganfw_cfg *n = cfg_node_new(GANFW_CFG_KIND_SCALAR, default_file, 0, 0);
  if (!n) return GANFW_ERR_OOM;
  n->defaulted = 1;
  n->used = 1;
  ganfw_status st =
      text ? cfg_scalar_set(n, text, strlen(text), 0, 0) : cfg_scalar_set(n, "", 0, 0, 1);
  if (st) {
    cfg_node_free(n);
    return st;
  }
  return cfg_map_append(parent, last, 0, 0, n);
}

/* --- parsing scalars ------------------------------------------------------------------- */

enum { PARSE_OK = 0, PARSE_BAD, PARSE_RANGE, PARSE_NONFINITE };

static int parse_int(const char *s, int64_t *out) {
  const char *p = s;
  if (*p == '+' || *p == '-') p++;
  if (!*p) return PARSE_BAD;
  for (const char *q = p; *q; q++)
    if (*q < '0' || *q > '9') return PARSE_BAD;
  errno = 0;
  long long v = strtoll(s, NULL, 10);
  if (errno == ERANGE) return PARSE_RANGE;
  *out = (int64_t)v;
  return PARSE_OK;
}

/* Length of the decimal number at s: [+-]? (D+ (. D*)? | . D+) ([eE] [+-]? D+)?; 0 if none. */
static size_t scan_decimal(const char *s, int allow_exponent) {
  const char *p = s;
  if (*p == '+' || *p == '-') p++;
  size_t digits = 0;
  while (*p >= '0' && *p <= '9') p++, digits++;
  if (*p == '.') {
    p++;
    while (*p >= '0' && *p <= '9') p++, digits++;
  }
  if (digits == 0) return 0;
  if (allow_exponent && (*p == 'e' || *p == 'E')) {
    const char *e = p + 1;
    if (*e == '+' || *e == '-') e++;
    if (*e >= '0' && *e <= '9') {
      while (*e >= '0' && *e <= '9') e++;
      p = e;
    }
  }
  return (size_t)(p - s);
}

static int parse_float(const char *s, double *out) {
  size_t len = scan_decimal(s, 1);
  if (len == 0 || s[len] != '\0') {
    const char *p = s + (*s == '+' || *s == '-');
    if (*p == '.') p++;
    if (strncasecmp(p, "inf", 3) == 0 || strncasecmp(p, "nan", 3) == 0) return PARSE_NONFINITE;
    return PARSE_BAD;
  }
  errno = 0;
  double v = strtod(s, NULL);
  if (!isfinite(v)) return PARSE_RANGE;
  if (errno == ERANGE && fabs(v) > 1.0) return PARSE_RANGE;
  *out = v;
  return PARSE_OK;
}

static int parse_bool(const char *s, int32_t *out) {
  static const char *const yes[] = {"true", "yes", "on"};
  static const char *const no[] = {"false", "no", "off"};
  for (int i = 0; i < 3; i++) {
    if (strcasecmp(s, yes[i]) == 0) return *out = 1, PARSE_OK;
    if (strcasecmp(s, no[i]) == 0) return *out = 0, PARSE_OK;
  }
  return PARSE_BAD;
}

/* Byte-size units, case-insensitive. K, M, G, T alone are 1024-based, like KiB..TiB. */
static const struct {
  const char *name;
  uint64_t bytes;
} byte_units[] = {
    {"", 1},
    {"b", 1},
    {"k", 1ull << 10},
    {"ki", 1ull << 10},
    {"kib", 1ull << 10},
    {"kb", 1000ull},
    {"m", 1ull << 20},
    {"mi", 1ull << 20},
    {"mib", 1ull << 20},
    {"mb", 1000000ull},
    {"g", 1ull << 30},
    {"gi", 1ull << 30},
    {"gib", 1ull << 30},
    {"gb", 1000000000ull},
    {"t", 1ull << 40},
    {"ti", 1ull << 40},
    {"tib", 1ull << 40},
    {"tb", 1000000000000ull},
};

/* "<number>[ ]<unit>", the number with an optional sign and fraction (no exponent); the
 * result is rounded to the nearest byte. */
static int parse_bytes(const char *s, int64_t *out) {
  size_t len = scan_decimal(s, 0);
  if (len == 0) return PARSE_BAD;
  const char *unit = s + len;
  while (*unit == ' ') unit++;
  uint64_t mult = 0;
  for (size_t i = 0; i < sizeof byte_units / sizeof byte_units[0]; i++)
    if (strcasecmp(unit, byte_units[i].name) == 0) mult = byte_units[i].bytes;
  if (!mult) return PARSE_BAD;
  const char *p = s;
  int neg = *p == '-';
  if (*p == '+' || *p == '-') p++;
  unsigned __int128 whole = 0, frac = 0, scale = 1;
  for (; *p >= '0' && *p <= '9'; p++) {
    whole = whole * 10 + (unsigned)(*p - '0');
    if (whole > (unsigned __int128)INT64_MAX) return PARSE_RANGE;
  }
  if (*p == '.') {
    /* Digits past the 19th change the result by less than 1e-7 byte. */
    for (p++; *p >= '0' && *p <= '9'; p++) {
      if (scale >= 10000000000000000000ull) continue;
      frac = frac * 10 + (unsigned)(*p - '0');
      scale *= 10;
    }
  }
  unsigned __int128 v = whole * mult + (frac * mult + scale / 2) / scale;
  if (v > (unsigned __int128)INT64_MAX) return PARSE_RANGE;
  *out = neg ? -(int64_t)v : (int64_t)v;
  return PARSE_OK;
}

int ganfw_bytes_parse(const char *text, int64_t *out) {
  int64_t v = 0;
  if (!text || parse_bytes(text, &v) != PARSE_OK) return -1;
  *out = v;
  return 0;
}

/* --- the getters -------------------------------------------------------------------------- */

const ganfw_cfg *ganfw_cfg_child(const ganfw_cfg *node, const char *key) {
  if (!node) return NULL;
  ganfw_cfg *n = (ganfw_cfg *)node, *parent;
  const char *last;
  if (key && walk(n, key, WALK_MARK, &n, &parent, &last) != GANFW_OK) return NULL;
  if (n) n->used = 1;
  return n;
}

ganfw_status ganfw_cfg_int(const ganfw_cfg *node, const char *key, int64_t def, int64_t *out) {
  ganfw_cfg *v, *parent;
  const char *last;
  *out = def;
  ganfw_status st = find_scalar(node, key, "an integer", &v, &parent, &last);
  if (st) return st;
  if (!v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, def);
    return record_default(parent, last, buf);
  }
  if (v->is_null) return type_error(v, "an integer");
  switch (parse_int(v->text, out)) {
  case PARSE_OK:
    return GANFW_OK;
  case PARSE_RANGE:
    *out = def;
    return value_error(v, "'%s' is out of range for a 64-bit integer", v->text);
  default:
    *out = def;
    return type_error(v, "an integer");
  }
}

/* The shortest "%g" text that reads back as exactly v. */
static void format_double(char *buf, size_t size, double v) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

ganfw_status ganfw_cfg_float(const ganfw_cfg *node, const char *key, double def, double *out) {
  ganfw_cfg *v, *parent;
  const char *last;
  *out = def;
  ganfw_status st = find_scalar(node, key, "a number", &v, &parent, &last);
  if (st) return st;
  if (!v) {
    if (!isfinite(def)) return GANFW_OK; /* not writable as a config value */
    char buf[40];
    format_double(buf, sizeof buf, def);
    return record_default(parent, last, buf);
  }
  if (v->is_null) return type_error(v, "a number");
  switch (parse_float(v->text, out)) {
  case PARSE_OK:
    return GANFW_OK;
  case PARSE_RANGE:
    *out = def;
    return value_error(v, "'%s' is out of range for a double", v->text);
  case PARSE_NONFINITE:
    *out = def;
    return value_error(v, "expected a finite number, got '%s'", v->text);
  default:
    *out = def;
    return type_error(v, "a number");
  }
}

ganfw_status ganfw_cfg_bool(const ganfw_cfg *node, const char *key, int32_t def, int32_t *out) {
  ganfw_cfg *v, *parent;
  const char *last;
  *out = def;
  const char *what = "a boolean (true/false, yes/no, on/off)";
  ganfw_status st = find_scalar(node, key, what, &v, &parent, &last);
  if (st) return st;
  if (!v) return record_default(parent, last, def ? "true" : "false");
  if (v->is_null || parse_bool(v->text, out) != PARSE_OK) {
    *out = def;
    return type_error(v, what);
  }
  return GANFW_OK;
}

ganfw_status ganfw_cfg_string(const ganfw_cfg *node, const char *key, const char *def,
                              const char **out) {
  ganfw_cfg *v, *parent;
  const char *last;
  *out = def;
  ganfw_status st = find_scalar(node, key, "a string", &v, &parent, &last);
  if (st) return st;
  if (!v) {
    st = record_default(parent, last, def);
    /* Hand out the recorded copy, valid as long as the config like every other string. */
    if (st == GANFW_OK && parent && def) *out = parent->items[parent->n - 1]->text;
    return st;
  }
  *out = v->is_null ? NULL : v->text;
  return GANFW_OK;
}

ganfw_status ganfw_cfg_int_in(const ganfw_cfg *node, const char *key, int64_t def, int64_t lo,
                              int64_t hi, int64_t *out) {
  ganfw_status st = ganfw_cfg_int(node, key, def, out);
  if (st || !ganfw_cfg_has(node, key) || (*out >= lo && *out <= hi)) return st;
  const ganfw_cfg *v = key ? ganfw_cfg_child(node, key) : node;
  int64_t got = *out;
  *out = def;
  return value_error(
      v, "%" PRId64 " is out of range: expected an integer from %" PRId64 " to %" PRId64, got, lo,
      hi);
}

ganfw_status ganfw_cfg_float_in(const ganfw_cfg *node, const char *key, double def, double lo,
                                double hi, int32_t open, double *out) {
  ganfw_status st = ganfw_cfg_float(node, key, def, out);
  if (st || !ganfw_cfg_has(node, key)) return st;
  int lo_ok = (open & GANFW_CFG_OPEN_LO) ? *out > lo : *out >= lo;
  int hi_ok = (open & GANFW_CFG_OPEN_HI) ? *out < hi : *out <= hi;
  if (lo_ok && hi_ok) return GANFW_OK;
  const ganfw_cfg *v = key ? ganfw_cfg_child(node, key) : node;
  char a[40], b[40]; /* "%.15g" writes 10 as 10, not 1e+01 as the shortest form would */
  snprintf(a, sizeof a, "%.15g", lo);
  snprintf(b, sizeof b, "%.15g", hi);
  const char *text = v->text;
  *out = def;
  return value_error(v, "%s is out of range: expected a number in %c%s, %s%c", text,
                     (open & GANFW_CFG_OPEN_LO) ? '(' : '[', a, b,
                     (open & GANFW_CFG_OPEN_HI) ? ')' : ']');
}

/* "8GiB", "512MiB", "64KiB" when exact, else the plain number. */
static void format_bytes(char *buf, size_t size, int64_t v) {
  static const struct {
    const char *unit;
    int shift;
  } u[] = {{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}};
  for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
    int64_t m = (int64_t)1 << u[i].shift;
    if (v != 0 && v % m == 0) {
      snprintf(buf, size, "%" PRId64 "%s", v / m, u[i].unit);
      return;
    }
  }
  snprintf(buf, size, "%" PRId64, v);
}

ganfw_status ganfw_cfg_bytes(const ganfw_cfg *node, const char *key, int64_t def, int64_t *out) {
  ganfw_cfg *v, *parent;
  const char *last;
  *out = def;
  const char *what = "a byte size such as 512MiB, 1.5GB or 1048576";
  ganfw_status st = find_scalar(node, key, what, &v, &parent, &last);
  if (st) return st;
  if (!v) {
    char buf[40];
    format_bytes(buf, sizeof buf, def);
    return record_default(parent, last, buf);
  }
  if (v->is_null) return type_error(v, what);
  switch (parse_bytes(v->text, out)) {
  case PARSE_OK:
    return GANFW_OK;
  case PARSE_RANGE:
    *out = def;
    return value_error(v, "'%s' is more bytes than a 64-bit integer holds", v->text);
  default:
    *out = def;
    return value_error(v,
                       "expected %s (units: B, KB, MB, GB, TB = powers of 1000; K, M, G, T, "
                       "KiB, MiB, GiB, TiB = powers of 1024), got '%s'",
                       what, v->text);
  }
}

/* The list at `key` (marked used), or NULL when absent or null. */
static ganfw_status find_list(const ganfw_cfg *node, const char *key, ganfw_cfg **list,
                              ganfw_cfg **parent, const char **last, int flags) {
  *list = NULL;
  *parent = NULL;
  if (!node) return GANFW_OK;
  ganfw_cfg *n = (ganfw_cfg *)node;
  if (key) {
    ganfw_status st = walk(n, key, flags, &n, parent, last);
    if (st) return st;
    if (!n) return GANFW_OK;
  }
  n->used = 1;
  if (cfg_scalar_is_null(n)) return GANFW_OK;
  if (n->kind != GANFW_CFG_KIND_LIST) return type_error(n, "a list");
  *list = n;
  return GANFW_OK;
}

int64_t ganfw_cfg_list_len(const ganfw_cfg *node, const char *key) {
  ganfw_cfg *list, *parent;
  const char *last;
  if (find_list(node, key, &list, &parent, &last, WALK_MARK) != GANFW_OK) return -1;
  return list ? list->n : 0;
}

const ganfw_cfg *ganfw_cfg_list_at(const ganfw_cfg *node, const char *key, int64_t i) {
  ganfw_cfg *list, *parent;
  const char *last;
  if (find_list(node, key, &list, &parent, &last, WALK_MARK) != GANFW_OK) return NULL;
  if (!list || i < 0 || i >= list->n) return NULL;
  list->items[i]->used = 1;
  return list->items[i];
}

ganfw_status ganfw_cfg_float_list(const ganfw_cfg *node, const char *key, int64_t n,
                                  const double *def, double *out) {
  ganfw_cfg *list, *parent = NULL;
  const char *last = key;
  char what[64];
  snprintf(what, sizeof what, "a list of %" PRId64 " number%s", n, n == 1 ? "" : "s");
  ganfw_cfg *target = (ganfw_cfg *)node;
  if (node && key) {
    ganfw_status st = walk(target, key, WALK_MARK | WALK_CREATE, &target, &parent, &last);
    if (st) return st;
  }
  if (target) {
    target->used = 1;
    if (target->kind != GANFW_CFG_KIND_LIST) return type_error(target, what);
    list = target;
    if (list->n != n)
      return value_error(list, "expected %s, got %" PRId64 " item%s", what, list->n,
                         list->n == 1 ? "" : "s");
    for (int64_t i = 0; i < n; i++) {
      ganfw_status st = ganfw_cfg_float(list->items[i], NULL, 0.0, &out[i]);
      if (st) return st;
    }
    return GANFW_OK;
  }
  if (!def) {
    if (!node)
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: required key missing: give %s",
                             key ? key : "(list)", what);
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s%s%s: required key missing: give %s",
                           ganfw_cfg_where(node), ganfw_cfg_path(parent),
                           ganfw_cfg_path(parent)[0] ? "." : "", last, what);
  }
  for (int64_t i = 0; i < n; i++) out[i] = def[i];
  if (!parent) return GANFW_OK;
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(def[i])) return GANFW_OK; /* not writable as a config value */
  list = cfg_node_new(GANFW_CFG_KIND_LIST, default_file, 0, 0);
  if (!list) return GANFW_ERR_OOM;
  list->defaulted = list->used = 1;
  for (int64_t i = 0; i < n; i++) {
    char buf[40];
    format_double(buf, sizeof buf, def[i]);
    ganfw_cfg *item = cfg_node_new(GANFW_CFG_KIND_SCALAR, default_file, 0, 0);
    ganfw_status st = item ? cfg_scalar_set(item, buf, strlen(buf), 0, 0) : GANFW_ERR_OOM;
    if (st == GANFW_OK) {
      item->defaulted = item->used = 1;
      st = cfg_list_append(list, item);
    } else {
      cfg_node_free(item);
    }
    if (st) {
      cfg_node_free(list);
      return st;
    }
  }
  return cfg_map_append(parent, last, 0, 0, list);
}

/* --- extras for the core ------------------------------------------------------------------ */

const char *ganfw_cfg_key_at(const ganfw_cfg *map, int64_t i) {
  if (!map || map->kind != GANFW_CFG_KIND_MAP || i < 0 || i >= map->n) return NULL;
  return map->items[i]->key;
}

ganfw_cfg_kind ganfw_cfg_kind_of(const ganfw_cfg *node) {
  return node ? node->kind : GANFW_CFG_KIND_COUNT;
}

int32_t ganfw_cfg_has(const ganfw_cfg *node, const char *key) {
  if (!node) return 0;
  ganfw_cfg *n = (ganfw_cfg *)node, *parent;
  const char *last;
  if (key) {
    /* A read-only walk; a step that is not a section means "not there". */
    if (walk(n, key, 0, &n, &parent, &last) != GANFW_OK) {
      ganfw_error_clear();
      return 0;
    }
  }
  return n && !n->defaulted;
}

const ganfw_cfg *ganfw_cfg_section(const ganfw_cfg *node, const char *key) {
  if (!node) return NULL;
  ganfw_cfg *n = (ganfw_cfg *)node, *parent = NULL;
  const char *last = NULL;
  if (key && walk(n, key, WALK_MARK | WALK_CREATE, &n, &parent, &last) != GANFW_OK) return NULL;
  if (!n) {
    n = cfg_node_new(GANFW_CFG_KIND_MAP, default_file, 0, 0);
    if (!n) return NULL;
    n->defaulted = 1;
    n->used = 1;
    ganfw_cfg *created = n;
    if (cfg_map_append(parent, last, 0, 0, n) != GANFW_OK) return NULL;
    return created;
  }
  null_to_map(n);
  n->used = 1;
  if (n->kind != GANFW_CFG_KIND_MAP) {
    type_error(n, "a section (a map of keys)");
    return NULL;
  }
  return n;
}

ganfw_status ganfw_cfg_replace_string(const ganfw_cfg *node, const char *text) {
  ganfw_cfg *n = (ganfw_cfg *)node;
  if (!n || !text || n->kind != GANFW_CFG_KIND_SCALAR || n->is_null)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "config: replace_string: %s is not a string value (a programming "
                           "error)",
                           ganfw_cfg_where(node));
  return cfg_scalar_set(n, text, strlen(text), n->quoted, 0);
}

/* --- unread keys ------------------------------------------------------------------------ */

typedef struct {
  const ganfw_cfg *first; /* first unread key in document order */
  int64_t count;
  char *others; /* "path (where), ..." for the next few */
  size_t others_len;
  int64_t listed;
} unread_scan;

static void note_unread(unread_scan *s, const ganfw_cfg *n) {
  s->count++;
  if (!s->first) {
    s->first = n;
    return;
  }
  if (s->listed >= 4) return;
  char *item = str_printf("%s%s (%s)", s->listed ? ", " : "", ganfw_cfg_path(n), cfg_key_where(n));
  if (!item) return;
  size_t add = strlen(item);
  char *o = realloc(s->others, s->others_len + add + 1);
  if (o) {
    memcpy(o + s->others_len, item, add + 1);
    s->others = o;
    s->others_len += add;
    s->listed++;
  }
  free(item);
}

static void scan_unread(const ganfw_cfg *n, unread_scan *s) {
  if (n->kind == GANFW_CFG_KIND_LIST) {
    for (int64_t i = 0; i < n->n; i++) scan_unread(n->items[i], s);
    return;
  }
  if (n->kind != GANFW_CFG_KIND_MAP) return;
  for (int64_t i = 0; i < n->n; i++) {
    const ganfw_cfg *c = n->items[i];
    if (c->defaulted) continue;
    if (!c->used) {
      note_unread(s, c);
      continue;
    }
    scan_unread(c, s);
  }
}

ganfw_status ganfw_config_check_unused(const ganfw_config *c) {
  if (!c || !c->root) return GANFW_OK;
  unread_scan s = {0};
  scan_unread(c->root, &s);
  if (!s.first) return GANFW_OK;
  const ganfw_cfg *k = s.first, *map = k->parent;
  /* The nearest name a component asked for (or declared) in the same section. */
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  int32_t declared = 0;
  for (int64_t i = 0; i < map->n_names; i++) {
    const char *name = map->names[i].name;
    if (strcmp(name, k->key) == 0) {
      declared = map->names[i].declared;
      continue;
    }
    size_t d = ganfw_edit_distance(k->key, name);
    if (d < best_d) best_d = d, best = name;
  }
  int suggest = best && ganfw_suggest_near(strlen(k->key), best_d);

  char more[64] = "";
  if (s.count > 1)
    snprintf(more, sizeof more, "; %" PRId64 " more unread key%s: ", s.count - 1,
             s.count > 2 ? "s" : "");
  const char *tail = s.count > 1 + s.listed ? ", ..." : "";
  ganfw_status st;
  char *sec = str_printf("%s", ganfw_cfg_path(map)); /* any length */
  char *phrase = sec && sec[0] ? str_printf("in section '%s'", sec) : NULL;
  const char *where_in = phrase ? phrase : "at the top level";
  if (declared) {
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s: key '%s' %s is not used by this configuration (remove it)%s%s%s",
                         cfg_key_where(k), k->key, where_in, more, s.others ? s.others : "", tail);
  } else {
    st = ganfw_error_set(GANFW_ERR_CONFIG, "%s: unknown key '%s' %s%s%s%s%s%s%s", cfg_key_where(k),
                         k->key, where_in, suggest ? " (did you mean '" : "", suggest ? best : "",
                         suggest ? "'?)" : "", more, s.others ? s.others : "", tail);
  }
  free(phrase);
  free(sec);
  free(s.others);
  return st;
}

ganfw_status ganfw_config_known_keys(ganfw_config *c, const char *section, const char *const *keys,
                                     int64_t n) {
  if (!c || (n > 0 && !keys) || n < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: known_keys: bad arguments");
  ganfw_cfg *map = c->root;
  if (section && section[0]) {
    ganfw_cfg *parent;
    const char *last;
    if (walk(c->root, section, 0, &map, &parent, &last) != GANFW_OK) {
      ganfw_error_clear();
      return GANFW_OK;
    }
  }
  if (!map) return GANFW_OK;
  null_to_map(map);
  if (map->kind != GANFW_CFG_KIND_MAP) return GANFW_OK;
  for (int64_t i = 0; i < n; i++) {
    ganfw_status st = remember_name(map, keys[i], strlen(keys[i]), 1);
    if (st) return st;
  }
  return GANFW_OK;
}

/* --- the resolved config --------------------------------------------------------------- */

static int isalnum_ascii(unsigned char ch) {
  return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static int looks_null(const char *s) {
  return !s[0] || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
         strcmp(s, "NULL") == 0;
}

/* True when `s` reads back as the same string written without quotes, in block and flow
 * context alike. Conservative: anything unusual is quoted. */
static int plain_safe(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  if (!*p || looks_null(s)) return 0;
  if (!(isalnum_ascii(*p)) && !strchr("_./+-$(~", *p)) return 0;
  if (*p == '-' && (p[1] == '\0' || p[1] == ' ')) return 0;
  for (; *p; p++) {
    if (*p >= 0x80) return 0;
    if (!isalnum_ascii(*p) && !strchr("_./+-$()~=^ ", *p)) return 0;
  }
  if (p[-1] == ' ') return 0;
  return 1;
}

/* Keys are written plain when they look like identifiers, quoted otherwise. */
static int key_safe(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  if (!isalnum_ascii(*p) && *p != '_') return 0;
  for (; *p; p++)
    if (!isalnum_ascii(*p) && !strchr("_-./", *p)) return 0;
  return !looks_null(s);
}

/* The length (1..4) and code point of the UTF-8 sequence at p; 0 when it is not one. */
static int utf8_decode(const unsigned char *p, uint32_t *cp) {
  int n = p[0] < 0x80             ? 1
          : (p[0] & 0xE0) == 0xC0 ? 2
          : (p[0] & 0xF0) == 0xE0 ? 3
          : (p[0] & 0xF8) == 0xF0 ? 4
                                  : 0;
  if (n == 0) return 0;
  uint32_t c = n == 1 ? p[0] : (uint32_t)(p[0] & (0x7F >> n));
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (p[i] & 0x3F);
  }
  static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  *cp = c;
  return n;
}

/* Whether a code point past ASCII reads back as itself written raw in a quoted string:
 * YAML refuses U+0080..U+009F and U+FFFE/U+FFFF, and folds its line breaks U+0085, U+2028
 * and U+2029 (and a byte order mark may be dropped). */
static int yaml_raw_ok(uint32_t c) {
  if (c == 0x85 || c == 0x2028 || c == 0x2029 || c == 0xFEFF) return 0;
  return (c >= 0xA0 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) ||
         (c >= 0x10000 && c <= 0x10FFFF);
}

/* A double-quoted YAML string that reads back as `s`: what YAML would refuse or change in
 * a document (control characters, U+0080..U+009F, line breaks, U+FFFE) is written as an
 * escape; a byte that is no UTF-8 (the core never keeps one) as \xNN. */
static void write_quoted(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p >= 0x80) {
      uint32_t cp;
      int n = utf8_decode(p, &cp);
      if (n == 0)
        fprintf(f, "\\x%02x", *p);
      else if (!yaml_raw_ok(cp))
        fprintf(f, cp <= 0xFF ? "\\x%02x" : "\\u%04x", (unsigned)cp);
      else
        fwrite(p, 1, (size_t)n, f);
      if (n > 1) p += n - 1;
      continue;
    }
    switch (*p) {
    case '"':
      fputs("\\\"", f);
      break;
    case '\\':
      fputs("\\\\", f);
      break;
    case '\n':
      fputs("\\n", f);
      break;
    case '\t':
      fputs("\\t", f);
      break;
    case '\r':
      fputs("\\r", f);
      break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        fprintf(f, "\\x%02x", *p);
      else
        fputc(*p, f);
    }
  }
  fputc('"', f);
}

static void write_scalar(FILE *f, const ganfw_cfg *n) {
  if (n->is_null)
    fputs("null", f);
  else if (n->quoted || !plain_safe(n->text))
    write_quoted(f, n->text);
  else
    fputs(n->text, f);
}

/* Whether a node has anything to write: a section created only for defaults that got
 * none is left out. */
static int has_content(const ganfw_cfg *n) {
  if (n->kind != GANFW_CFG_KIND_MAP || !n->defaulted) return 1;
  for (int64_t i = 0; i < n->n; i++)
    if (has_content(n->items[i])) return 1;
  return 0;
}

static int all_scalars(const ganfw_cfg *list) {
  for (int64_t i = 0; i < list->n; i++)
    if (list->items[i]->kind != GANFW_CFG_KIND_SCALAR) return 0;
  return 1;
}

static void write_entries(FILE *f, const ganfw_cfg *n, int indent, int inline_first,
                          const char *skip);

/* The value after "key:" or "- ": inline when it is a scalar, an empty container or a
 * list of scalars, else on the next lines. */
static void write_value(FILE *f, const ganfw_cfg *v, int indent) {
  if (v->kind == GANFW_CFG_KIND_SCALAR) {
    fputc(' ', f);
    write_scalar(f, v);
    fputs(v->defaulted ? "  # default\n" : "\n", f);
  } else if (v->n == 0 || !has_content(v)) {
    fputs(v->kind == GANFW_CFG_KIND_MAP ? " {}\n" : " []\n", f);
  } else if (v->kind == GANFW_CFG_KIND_LIST && all_scalars(v)) {
    fputs(" [", f);
    for (int64_t i = 0; i < v->n; i++) {
      if (i) fputs(", ", f);
      write_scalar(f, v->items[i]);
    }
    fputs(v->defaulted ? "]  # default\n" : "]\n", f);
  } else {
    fputc('\n', f);
    write_entries(f, v, indent + 2, 0, NULL);
  }
}

/* A map's entries (but the key `skip`, when not NULL) or a list's items, one a line at
 * `indent`; the first line's indent is already written when `inline_first` (a map that is
 * a list item: "- key: value"). */
static void write_entries(FILE *f, const ganfw_cfg *n, int indent, int inline_first,
                          const char *skip) {
  int first = 1;
  for (int64_t i = 0; i < n->n; i++) {
    const ganfw_cfg *c = n->items[i];
    if (!has_content(c) || (skip && c->key && strcmp(c->key, skip) == 0)) continue;
    if (!(first && inline_first)) fprintf(f, "%*s", indent, "");
    first = 0;
    if (n->kind == GANFW_CFG_KIND_LIST && c->kind == GANFW_CFG_KIND_MAP && c->n > 0 &&
        has_content(c)) {
      fputs("- ", f);
      write_entries(f, c, indent + 2, 1, NULL);
      continue;
    }
    if (n->kind == GANFW_CFG_KIND_MAP) {
      /* YAML reads a key of more than 1024 characters only as an explicit "? key" (an
       * escape takes at most 4 characters a byte). */
      int explicit_key = strlen(c->key) > 250;
      if (explicit_key) fputs("? ", f);
      if (key_safe(c->key))
        fputs(c->key, f);
      else
        write_quoted(f, c->key);
      if (explicit_key) fprintf(f, "\n%*s", indent, "");
      fputc(':', f);
    } else {
      fputc('-', f);
    }
    write_value(f, c, indent);
  }
}

ganfw_status ganfw_cfg_write_map(const ganfw_cfg *map, int indent, const char *skip, FILE *out) {
  if (!map || map->kind != GANFW_CFG_KIND_MAP || indent < 0 || !out)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: write_map: not a map");
  write_entries(out, map, indent, 0, skip);
  if (ferror(out))
    return ganfw_error_set(GANFW_ERR_IO, "config: cannot write a section: %s", strerror(errno));
  return GANFW_OK;
}

ganfw_status ganfw_config_write_resolved(const ganfw_config *c, FILE *out) {
  if (!c || !out) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: write_resolved: NULL");
  fprintf(out, "# Resolved config of %s: extends merged, --set applied, defaults filled in.\n",
          c->file ? c->file : "(unnamed)");
  if (!has_content(c->root) || c->root->n == 0)
    fputs("{}\n", out);
  else
    write_entries(out, c->root, 0, 0, NULL);
  if (fflush(out) != 0 || ferror(out))
    return ganfw_error_set(GANFW_ERR_IO, "config: cannot write the resolved config: %s",
                           strerror(errno));
  return GANFW_OK;
}

/* --- overlays ----------------------------------------------------------------------------- */

/* A detached copy of `n` (its subtree; read marks and recorded names are not copied). */
static ganfw_cfg *copy_node(const ganfw_cfg *n) {
  ganfw_cfg *c = cfg_node_new(n->kind, n->file, n->line, n->col);
  if (!c) return NULL;
  c->key_line = n->key_line;
  c->key_col = n->key_col;
  if (n->kind == GANFW_CFG_KIND_SCALAR &&
      cfg_scalar_set(c, n->text ? n->text : "", n->text ? strlen(n->text) : 0, n->quoted,
                     n->is_null) != GANFW_OK) {
    cfg_node_free(c);
    return NULL;
  }
  for (int64_t i = 0; i < n->n; i++) {
    if (n->items[i]->defaulted) continue; /* a default recorded by another reader */
    ganfw_cfg *item = copy_node(n->items[i]);
    ganfw_status st =
        !item ? GANFW_ERR_OOM
        : n->kind == GANFW_CFG_KIND_MAP
            ? cfg_map_append(c, n->items[i]->key, n->items[i]->key_line, n->items[i]->key_col, item)
            : cfg_list_append(c, item);
    if (st != GANFW_OK) {
      cfg_node_free(c);
      return NULL;
    }
  }
  return c;
}

ganfw_status ganfw_cfg_overlay(const ganfw_cfg *base, const char *const *skip, int64_t n_skip,
                               const ganfw_cfg *over, ganfw_cfg **out) {
  *out = NULL;
  ganfw_cfg *o = cfg_node_new(GANFW_CFG_KIND_MAP, over ? over->file : "(overlay)",
                              over ? over->line : 0, over ? over->col : 0);
  if (!o) return GANFW_ERR_OOM;
  ganfw_status st = GANFW_OK;
  for (int pass = 0; pass < 2 && st == GANFW_OK; pass++) {
    const ganfw_cfg *src = pass == 0 ? base : over;
    if (!src || src->kind != GANFW_CFG_KIND_MAP) continue;
    for (int64_t i = 0; i < src->n && st == GANFW_OK; i++) {
      const ganfw_cfg *e = src->items[i];
      int32_t skipped = e->defaulted;
      for (int64_t k = 0; k < n_skip && !skipped; k++) skipped = strcmp(e->key, skip[k]) == 0;
      if (skipped) continue;
      ganfw_cfg *copy = copy_node(e);
      if (!copy) {
        st = GANFW_ERR_OOM;
        break;
      }
      ganfw_cfg *old = cfg_map_detach(o, e->key); /* over's entry replaces base's whole */
      cfg_node_free(old);
      st = cfg_map_append(o, e->key, e->key_line, e->key_col, copy);
    }
  }
  if (st == GANFW_OK && over) {
    o->path_s = strdup(ganfw_cfg_path(over)); /* messages name the item's path */
    if (!o->path_s) st = oom();
  }
  if (st != GANFW_OK) {
    cfg_node_free(o);
    return st;
  }
  *out = o;
  return GANFW_OK;
}

/* Marks what was read in `copy` as read in `doc`, its original. */
static void mark_like(ganfw_cfg *doc, const ganfw_cfg *copy) {
  if (!copy->used) return;
  doc->used = 1;
  for (int64_t i = 0; i < doc->n; i++) {
    const ganfw_cfg *c = doc->kind == GANFW_CFG_KIND_MAP ? cfg_map_find(copy, doc->items[i]->key)
                         : i < copy->n                   ? copy->items[i]
                                                         : NULL;
    if (c) mark_like(doc->items[i], c);
  }
}

void ganfw_cfg_overlay_settle(const ganfw_cfg *overlay, const ganfw_cfg *over) {
  if (!overlay || !over || over->kind != GANFW_CFG_KIND_MAP) return;
  ganfw_cfg *doc = (ganfw_cfg *)over;
  for (int64_t i = 0; i < doc->n; i++) {
    const ganfw_cfg *c = cfg_map_find(overlay, doc->items[i]->key);
    if (c) mark_like(doc->items[i], c);
  }
  for (int64_t i = 0; i < overlay->n_names; i++)
    remember_name(doc, overlay->names[i].name, strlen(overlay->names[i].name),
                  overlay->names[i].declared);
}

void ganfw_cfg_overlay_free(ganfw_cfg *overlay) {
  cfg_node_free(overlay);
}
