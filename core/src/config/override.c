/* Command-line overrides of a loaded config: `--set section.key=value` (the value parsed
 * as YAML and put in place as `extends:` would merge it) and `--set ~section.key` (drops
 * the key, as Hydra's `~key` override). Uses the tree (config.c) and the YAML parser
 * (config_yaml.c); neither calls back here. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/config_tree.h"
#include "config/config_yaml.h"
#include "base/error.h"

static ganfw_status oom(void) {
  return ganfw_error_set(GANFW_ERR_OOM, "config: out of host memory");
}

/* The length of the well-formed UTF-8 sequence at key[i] (within len), 0 when none. */
static size_t utf8_len(const unsigned char *k, size_t i, size_t len) {
  size_t n = k[i] < 0x80             ? 1
             : (k[i] & 0xE0) == 0xC0 ? 2
             : (k[i] & 0xF0) == 0xE0 ? 3
             : (k[i] & 0xF8) == 0xF0 ? 4
                                     : 0;
  if (n == 0 || i + n > len) return 0;
  uint32_t c = n == 1 ? k[i] : (uint32_t)(k[i] & (0x7F >> n));
  for (size_t j = 1; j < n; j++) {
    if ((k[i + j] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (k[i + j] & 0x3F);
  }
  static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  return n;
}

/* Whether `key[0..len)` is a dotted name: non-empty parts of UTF-8 text, no spaces or
 * control bytes. */
static int dotted_name_ok(const char *key, size_t len) {
  if (len == 0 || key[0] == '.' || key[len - 1] == '.') return 0;
  const unsigned char *k = (const unsigned char *)key;
  for (size_t i = 0; i < len;) {
    unsigned char ch = k[i];
    if (ch <= ' ' || ch == 0x7F || (ch == '.' && i + 1 < len && key[i + 1] == '.')) return 0;
    size_t n = utf8_len(k, i, len);
    if (n == 0) return 0;
    i += n;
  }
  return 1;
}

/* An argument this long shows its start alone in messages. */
#define SET_SHOWN 160

/* Refuses a dotted name of more than GANFW_CFG_MAX_DEPTH names, or an argument longer than
 * a key and a value may be, before anything is built from it. */
static ganfw_status check_set_bounds(const char *arg, const char *key, size_t klen) {
  size_t len = strlen(arg);
  int shown = len > SET_SHOWN ? SET_SHOWN : (int)len;
  const char *more = len > SET_SHOWN ? "..." : "";
  if (len > 2 * (size_t)GANFW_CFG_MAX_SCALAR_BYTES)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "--set '%.*s%s': %zu bytes, longer than the %d a key and its value "
                           "may take",
                           shown, arg, more, len, 2 * GANFW_CFG_MAX_SCALAR_BYTES);
  int64_t names = 1;
  for (size_t i = 0; i < klen; i++) names += key[i] == '.';
  if (names > GANFW_CFG_MAX_DEPTH)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "--set '%.*s%s': %lld nested names, more than the %d a config may nest",
                           shown, arg, more, (long long)names, GANFW_CFG_MAX_DEPTH);
  return GANFW_OK;
}

/* Follows the sections of `path[0..len)` up to its last name from `map`. With `create`,
 * absent sections are made (located as `where`); without, *out is NULL when one is
 * absent. *last points at the last name in `path`. A step through a value that is not a
 * section is GANFW_ERR_CONFIG. */
static ganfw_status walk_sections(ganfw_cfg *map, const char *arg, const char *path, size_t len,
                                  const char *where, int create, ganfw_cfg **out,
                                  const char **last) {
  *out = NULL;
  const char *seg = path, *end = path + len;
  for (;;) {
    const char *dot = memchr(seg, '.', (size_t)(end - seg));
    if (!dot) {
      *out = map;
      *last = seg;
      return GANFW_OK;
    }
    char *key = strndup(seg, (size_t)(dot - seg));
    if (!key) return oom();
    ganfw_cfg *child = cfg_map_find(map, key);
    ganfw_status st = GANFW_OK;
    if (!child && create) {
      child = cfg_node_new(GANFW_CFG_KIND_MAP, where, 0, 0);
      st = child ? cfg_map_append(map, key, 0, 0, child) : GANFW_ERR_OOM;
    } else if (child && !cfg_as_section(child)) {
      st = ganfw_error_set(GANFW_ERR_CONFIG,
                           "--set '%.*s': '%s' is %s at %s, not a section that can hold '%.*s'",
                           SET_SHOWN, arg, ganfw_cfg_path(child), cfg_kind_phrase(child),
                           ganfw_cfg_where(child), (int)(end - dot - 1), dot + 1);
    }
    free(key);
    if (st) return st;
    if (!child) return GANFW_OK; /* absent, not created */
    map = child;
    seg = dot + 1;
  }
}

/* `--set ~a.b.c`: removes a.b.c, which must be there. */
static ganfw_status drop(ganfw_cfg *root, const char *arg) {
  const char *path = arg + 1;
  size_t len = strlen(path);
  if (memchr(path, '=', len))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "--set '%s': `~KEY` drops a key and takes no value; write --set '~%.*s'",
                           arg, (int)(strchr(path, '=') - path), path);
  if (!dotted_name_ok(path, len))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "--set '%.*s': expected ~section.key, e.g. --set '~optim.betas'",
                           SET_SHOWN, arg);
  ganfw_status bound = check_set_bounds(arg, path, len);
  if (bound) return bound;
  ganfw_cfg *map;
  const char *last;
  ganfw_status st = walk_sections(root, arg, path, len, NULL, 0, &map, &last);
  if (st) return st;
  ganfw_cfg *gone = map ? cfg_map_detach(map, last) : NULL;
  if (!gone)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "--set '%.*s': nothing to drop: '%s' is not in the config (check the "
                           "spelling; `ganfw validate CONFIG` prints the resolved config)",
                           SET_SHOWN, arg, path);
  cfg_node_free(gone);
  return GANFW_OK;
}

ganfw_status ganfw_config_set(ganfw_config *c, const char *assignment) {
  ganfw_cfg *root = (ganfw_cfg *)(c ? ganfw_config_root(c) : NULL);
  if (!root || !assignment)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: set: NULL argument");
  if (assignment[0] == '~') return drop(root, assignment);
  const char *eq = strchr(assignment, '=');
  size_t klen = eq ? (size_t)(eq - assignment) : 0;
  if (!dotted_name_ok(assignment, klen))
    return ganfw_error_set(
        GANFW_ERR_CONFIG,
        "--set '%.*s': expected section.key=value, e.g. --set "
        "train.batch_size=128 (dotted names of UTF-8 text without spaces, then '='), or "
        "~section.key to drop a key",
        SET_SHOWN, assignment);
  ganfw_status bound = check_set_bounds(assignment, assignment, klen);
  if (bound) return bound;
  if (klen == 7 && strncmp(assignment, "extends", 7) == 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "--set '%s': `extends:` cannot be set from the command line; write "
                           "it in the config file",
                           assignment);
  /* The name the value's nodes are located by: the argument itself, its start when long. */
  size_t label_len = strlen(assignment) + 10;
  char *label = malloc(label_len);
  if (!label) return oom();
  snprintf(label, label_len, "--set %.*s%s", SET_SHOWN, assignment,
           strlen(assignment) > SET_SHOWN ? "..." : "");
  const char *name = cfg_intern(c, label);
  free(label);
  if (!name) return oom();
  ganfw_cfg *value;
  ganfw_status st = cfg_yaml_parse_value(c, eq + 1, name, &value);
  if (st) return st;
  ganfw_cfg *map;
  const char *last;
  st = walk_sections(root, assignment, assignment, klen, name, 1, &map, &last);
  char *key = st ? NULL : strndup(last, (size_t)(eq - last));
  if (st || !key) {
    cfg_node_free(value);
    return st ? st : oom();
  }
  st = cfg_map_put(map, key, value);
  free(key);
  return st ? st : cfg_settle_markers(root);
}
