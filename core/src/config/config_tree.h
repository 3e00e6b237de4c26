/* Internal to the config: building the node tree behind ganfw_cfg. config.c owns the
 * tree (nodes, merging, getters, checks, output); config_yaml.c turns YAML text into trees
 * and merges `extends:` bases with these functions; override.c applies --set with both.
 * Not for other files. */
#ifndef GANFW_CONFIG_TREE_H
#define GANFW_CONFIG_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* A new empty node of `kind` located at file:line:col (line 0: `file` alone names the
 * place, as for --set). `file` must outlive the node: pass a string from cfg_intern or a
 * literal. NULL when out of memory (error recorded). */
ganfw_cfg *cfg_node_new(ganfw_cfg_kind kind, const char *file, int64_t line, int64_t col);
/* Gives a scalar its text (copied, len bytes); `quoted` keeps a quoted YAML string
 * quoted on output; `is_null` marks a YAML null. GANFW_ERR_OOM on failure. */
ganfw_status cfg_scalar_set(ganfw_cfg *scalar, const char *text, size_t len, int32_t quoted,
                            int32_t is_null);
void cfg_node_free(ganfw_cfg *node); /* the node and everything under it; accepts NULL */

/* The child of `map` at exactly `key` (no dotted path), or NULL; marks nothing. */
ganfw_cfg *cfg_map_find(const ganfw_cfg *map, const char *key);
/* Appends `child` under `key` (copied) located at key_line:key_col of child's file; the
 * map owns it from then on (also on failure, when it is freed). The caller has checked
 * that the key is new. */
ganfw_status cfg_map_append(ganfw_cfg *map, const char *key, int64_t key_line, int64_t key_col,
                            ganfw_cfg *child);
/* Removes the entry `key` from `map` and returns its node (owned by the caller), or NULL. */
ganfw_cfg *cfg_map_detach(ganfw_cfg *map, const char *key);
/* Appends `item` to `list`; the list owns it from then on (also on failure). */
ganfw_status cfg_list_append(ganfw_cfg *list, ganfw_cfg *item);
/* Number of entries of a map or items of a list, and the i-th one. */
int64_t cfg_node_count(const ganfw_cfg *node);
ganfw_cfg *cfg_node_at(const ganfw_cfg *node, int64_t i);
/* The scalar's text ("" for a null), and whether it is a null. */
const char *cfg_scalar_text(const ganfw_cfg *node);
int32_t cfg_scalar_is_null(const ganfw_cfg *node);
/* "file:line:col" of the node's key (its value position when it has no key). */
const char *cfg_key_where(const ganfw_cfg *node);

/* Merges `over` into `base` (both owned by the caller before; `over` is consumed): maps
 * merge key by key, recursively; for anything else `over` replaces base's value. In a map
 * of `over`, an entry `~key:` (no value) drops `key` from base's map, and `_replace_: true`
 * makes the map replace base's instead of merging (the markers are not kept). *result is
 * the merged node, which takes base's place (it is `base` when both are maps, else
 * `over`, and `base` has been freed). GANFW_ERR_OOM when a key could not be added,
 * GANFW_ERR_CONFIG for a marker with nothing to act on or a bad value (naming its
 * file:line:col); *result is still a valid tree to free. */
ganfw_status cfg_merge(ganfw_cfg *base, ganfw_cfg *over, ganfw_cfg **result);
/* Puts `value` (consumed) under `key` of `map`: appended when new, else merged into the
 * present value as cfg_merge does. Errors as cfg_merge. */
ganfw_status cfg_map_put(ganfw_cfg *map, const char *key, ganfw_cfg *value);
/* After every merge: a `~key` left in the tree had nothing to drop (GANFW_ERR_CONFIG
 * naming it); `_replace_` entries left (nothing to replace) are checked and removed. */
ganfw_status cfg_settle_markers(ganfw_cfg *node);

/* Makes `n` a section a user wrote into: a null becomes an empty map, a recorded-default
 * section counts as written. 1 when it is a map now, else 0 (it holds a value). */
int32_t cfg_as_section(ganfw_cfg *n);
/* "a list", "a scalar", ... for messages. */
const char *cfg_kind_phrase(const ganfw_cfg *n);

/* A new empty config, the place every file name lives. NULL when out of memory. */
ganfw_config *cfg_config_new(void);
/* A copy of `s` owned by the config (same pointer for equal strings). NULL if OOM. */
const char *cfg_intern(ganfw_config *c, const char *s);
/* Installs the loaded top-level map (owned by the config from then on) and the name of
 * the file it came from. */
void cfg_config_set_root(ganfw_config *c, ganfw_cfg *root, const char *file);

#endif
