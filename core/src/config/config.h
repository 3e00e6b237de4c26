/* The YAML config: a document loaded from a file (with `extends:` bases merged and
 * `--set key=value` overrides applied) as a tree of nodes (map, list, scalar) that remember
 * the file, line and column of every key and value. Components read it with typed getters
 * that mark keys as used and record the defaults they supply; a key nobody read is an error
 * (ganfw_config_check_unused) and the resolved config, defaults included, can be written
 * back as YAML. Format and rules for users: docs/CONFIG.md. */
#ifndef GANFW_CONFIG_H
#define GANFW_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/host.h"
#include "ganfw/status.h"

/* A loaded document: owns every node, string and file name it hands out. */
typedef struct ganfw_config ganfw_config;

/* --- loading ----------------------------------------------------------------------------
 * Each returns a config owned by the caller (free with ganfw_config_destroy) in *out, or
 * an error with *out = NULL. A missing or unreadable top file is GANFW_ERR_IO naming the
 * path; a YAML syntax error, a duplicate key, a top level that is not a map, a missing
 * or cyclic `extends:` base is GANFW_ERR_CONFIG with "file:line:col: ..." in the message.
 * A path that is a directory is GANFW_ERR_IO saying so.
 *
 * Bounds: whatever the input, loading does work and takes memory in proportion to these
 * limits; past one the load is refused (GANFW_ERR_CONFIG at the file:line:col of the node
 * that crosses it, naming the limit; GANFW_ERR_IO for a file too long). Anchors and aliases
 * are refused outright, so nothing expands. */
#define GANFW_CFG_MAX_FILE_BYTES    (16 * 1024 * 1024) /* one config file */
#define GANFW_CFG_MAX_SCALAR_BYTES  65536              /* one key or value */
#define GANFW_CFG_MAX_DEPTH         256                /* maps and lists nested in each other */
#define GANFW_CFG_MAX_ENTRIES       4096               /* keys of one map, items of one list */
#define GANFW_CFG_MAX_NODES         100000 /* keys and values of a config and its bases */
#define GANFW_CFG_MAX_EXTENDS_DEPTH 32     /* files on one `extends:` chain */
#define GANFW_CFG_MAX_FILES         256    /* files read for one config */
ganfw_status ganfw_config_load(const char *path, ganfw_config **out);
/* The same from text in memory; `name` stands for the file name in messages and is the
 * directory that relative `extends:` paths start from (NULL: "<string>", the cwd). */
ganfw_status ganfw_config_load_string(const char *text, const char *name, ganfw_config **out);
void ganfw_config_destroy(ganfw_config *c); /* accepts NULL */

/* A copy of `c` as it stands, node for node (values, places in the files, read marks and
 * recorded defaults), owning its own nodes and file names, with the --set assignments
 * sets[0..nsets) then applied to it as ganfw_config_set does: of a config no one has read,
 * the config that loading its file with the earlier assignments and these would give,
 * without reading the file again. *out owned by the caller, NULL on failure (errors as
 * ganfw_config_set's, GANFW_ERR_OOM). */
ganfw_status ganfw_config_copy(const ganfw_config *c, const char *const *sets, int nsets,
                               ganfw_config **out);

/* Applies one command-line override "section.key=value": the value is parsed as YAML (a
 * scalar, or a flow list/map such as "[0.5,0.999]" or "{lr: 1e-3}"); missing sections are
 * created; a map value merges into an existing map like `extends:`, anything else
 * replaces. Nodes it creates are located as "--set section.key=value" in messages. A
 * malformed assignment (no '=', an empty key part, more than GANFW_CFG_MAX_DEPTH names, a
 * value past the bounds above) is GANFW_ERR_CONFIG. */
ganfw_status ganfw_config_set(ganfw_config *c, const char *assignment);

/* The top-level map; borrowed, valid until ganfw_config_destroy. */
const ganfw_cfg *ganfw_config_root(const ganfw_config *c);
/* The path the config was loaded from (or the name given to load_string); borrowed. */
const char *ganfw_config_file(const ganfw_config *c);

/* Declares the keys a component understands in `section` (a dotted path from the top,
 * "" or NULL for the top level) before or instead of reading them all. They are only used
 * to suggest a spelling for an unread key, and to say "not used by this configuration"
 * rather than "unknown" for a declared key nobody read. No effect when the section is
 * absent. The names are copied. */
ganfw_status ganfw_config_known_keys(ganfw_config *c, const char *section, const char *const *keys,
                                     int64_t n);

/* GANFW_OK when every key of the document was read by a getter (or its map handed out by
 * ganfw_cfg_child and its keys read). Otherwise GANFW_ERR_CONFIG naming the first unread
 * key in document order, e.g.
 *   "a.yaml:4:3: unknown key 'bach_size' in section 'train' (did you mean 'batch_size'?)"
 * followed by how many more keys were not read and where. */
ganfw_status ganfw_config_check_unused(const ganfw_config *c);

/* Writes the resolved config as YAML: extends merged, --set applied, and every default a
 * getter supplied for an absent key (marked "# default"). ganfw_config_load reads it
 * back to the same values. GANFW_ERR_IO when writing fails. */
ganfw_status ganfw_config_write_resolved(const ganfw_config *c, FILE *out);

/* Writes the entries of `map` (a section of a config) as YAML lines at `indent` spaces, as
 * the resolved config writes them (defaults marked), leaving out the key `skip` (NULL:
 * none): a section copied into another config (`ganfw prune --distill` writes the source's
 * model section as the teacher's, with its own init_from). GANFW_ERR_IO when writing
 * fails. */
ganfw_status ganfw_cfg_write_map(const ganfw_cfg *map, int indent, const char *skip, FILE *out);

/* --- reading nodes ------------------------------------------------------------------------
 * These are the host table's config entries (same signatures). `key` is a dotted path from
 * `node` ("device.threads"); key NULL reads `node` itself (a list item). A NULL `node`
 * (an absent section) yields the default. A getter marks the key as read; when the key is
 * absent it yields the default and records it in the tree for the resolved config
 * (creating the sections on the path). A value of the wrong type is GANFW_ERR_CONFIG:
 *   "a.yaml:3:15: train.batch_size: expected an integer, got 'abc'"
 * Types (see docs/CONFIG.md): integers are decimal with an optional sign; floats may have
 * exponents ("2e-4") and must be finite; booleans are true/false/yes/no/on/off in any case;
 * byte sizes take units (512MiB, 1.5GB, 8 GiB). A YAML null (`key:` with no value, `~`,
 * `null`) is an error for numbers and booleans, and NULL for strings.
 * Returned strings and nodes are borrowed: valid until ganfw_config_destroy. */

/* The node at `key` (any kind), marked as read (a map: its keys still need reading);
 * NULL when absent (or `node` is NULL, or a step of the path is not a map). */
const ganfw_cfg *ganfw_cfg_child(const ganfw_cfg *node, const char *key);
ganfw_status ganfw_cfg_int(const ganfw_cfg *node, const char *key, int64_t def, int64_t *out);
ganfw_status ganfw_cfg_float(const ganfw_cfg *node, const char *key, double def, double *out);
ganfw_status ganfw_cfg_bool(const ganfw_cfg *node, const char *key, int32_t def, int32_t *out);
ganfw_status ganfw_cfg_string(const ganfw_cfg *node, const char *key, const char *def,
                              const char **out);
/* A byte size as ganfw_cfg_bytes reads one ("512MiB", "1.5GB", "1048576") into *out;
 * 0 on success, -1 when text is not one (or out of range), *out then unchanged. */
int ganfw_bytes_parse(const char *text, int64_t *out);
ganfw_status ganfw_cfg_bytes(const ganfw_cfg *node, const char *key, int64_t def, int64_t *out);
/* Ranged reads for the keys the core reads (train.*, optim.lr, ...): as ganfw_cfg_int and
 * ganfw_cfg_float, and a value written in the config must lie in the range, for integers
 * [lo, hi], for floats from lo to hi with each end included unless `open` has
 * GANFW_CFG_OPEN_LO / GANFW_CFG_OPEN_HI. Outside it is GANFW_ERR_CONFIG with the range:
 *   "a.yaml:7:7: optim.lr: 20 is out of range: expected a number in (0, 10)"
 * The default is the caller's to choose inside the range; it is not checked. */
enum { GANFW_CFG_OPEN_LO = 1, GANFW_CFG_OPEN_HI = 2 };
ganfw_status ganfw_cfg_int_in(const ganfw_cfg *node, const char *key, int64_t def, int64_t lo,
                              int64_t hi, int64_t *out);
ganfw_status ganfw_cfg_float_in(const ganfw_cfg *node, const char *key, double def, double lo,
                                double hi, int32_t open, double *out);
/* Items of the list at `key`: 0 when absent or null, -1 (and an error) when not a list. */
int64_t ganfw_cfg_list_len(const ganfw_cfg *node, const char *key);
/* Item i of the list at `key` (a scalar item is a node too: read it with key NULL); NULL
 * when absent or out of range. */
const ganfw_cfg *ganfw_cfg_list_at(const ganfw_cfg *node, const char *key, int64_t i);
/* Exactly n numbers from the list at `key` into out[0..n), e.g. `betas: [0.5, 0.999]`.
 * When absent: def[0..n) (recorded), or GANFW_ERR_CONFIG "required" when def is NULL. */
ganfw_status ganfw_cfg_float_list(const ganfw_cfg *node, const char *key, int64_t n,
                                  const double *def, double *out);

/* --- extras for the core (not in the host table) ------------------------------------- */

typedef enum {
  GANFW_CFG_KIND_MAP = 0,
  GANFW_CFG_KIND_LIST = 1,
  GANFW_CFG_KIND_SCALAR = 2, /* includes null */
  GANFW_CFG_KIND_COUNT
} ganfw_cfg_kind;

/* The kind of a node (NULL: GANFW_CFG_KIND_COUNT). Marks nothing. */
ganfw_cfg_kind ganfw_cfg_kind_of(const ganfw_cfg *node);
/* The key of entry i of a map in document order (recorded defaults included), or NULL past
 * the end or for a node that is not a map. Marks nothing. */
const char *ganfw_cfg_key_at(const ganfw_cfg *map, int64_t i);
/* 1 when `key` is present in the document or set with --set (not a recorded default),
 * else 0. Marks nothing. */
int32_t ganfw_cfg_has(const ganfw_cfg *node, const char *key);
/* Like ganfw_cfg_child for a section, but when the key is absent it creates an empty map
 * there, so that the defaults read through it appear in the resolved config (an empty
 * one is left out). Hand this to a plugin as its section. NULL (and an error) when the
 * key holds something other than a map, or `node` is NULL. */
const ganfw_cfg *ganfw_cfg_section(const ganfw_cfg *node, const char *key);
/* "file:line:col" of the node's value ("--set key=value" for a value from --set,
 * "(default)" for a recorded default, "(absent)" for NULL). Borrowed, valid until
 * ganfw_config_destroy. */
const char *ganfw_cfg_where(const ganfw_cfg *node);
/* Replaces the text of the string value `node` (a scalar, not null) with `text` (copied),
 * keeping its position and read mark: e.g. a plugin_path entry resolved to an absolute
 * folder, so that the resolved config names the folder the run used. GANFW_ERR_INVALID_ARG
 * for a node that is not such a scalar. */
ganfw_status ganfw_cfg_replace_string(const ganfw_cfg *node, const char *text);
/* The dotted path of the node from the top ("train.batch_size", "model.layers[2]"; ""
 * for the top). Borrowed, valid until ganfw_config_destroy. */
const char *ganfw_cfg_path(const ganfw_cfg *node);

/* Settings for one item of a list that refines its section (a group of optim.param_groups
 * reads optim's keys with its own on top): a detached map holding copies of base's entries
 * but those named in skip[0..n_skip), and over's entries in place of base's of the same key.
 * Values keep their file:line:col, and the map its path (over's), so that a reader's
 * messages name the place the value was written. Reading it marks nothing in the document
 * until ganfw_cfg_overlay_settle, which marks read every entry of `over` that was read in
 * the overlay (the rest stay unread for ganfw_config_check_unused, with the names asked for
 * in the overlay as its suggestions). *out owned by the caller (ganfw_cfg_overlay_free). */
ganfw_status ganfw_cfg_overlay(const ganfw_cfg *base, const char *const *skip, int64_t n_skip,
                               const ganfw_cfg *over, ganfw_cfg **out);
void ganfw_cfg_overlay_settle(const ganfw_cfg *overlay, const ganfw_cfg *over);
void ganfw_cfg_overlay_free(ganfw_cfg *overlay); /* accepts NULL */

#endif
