/* YAML text to config trees, with libyaml's event parser: every key and value keeps its
 * file:line:col (1-based). Loading a file also resolves `extends:` (bases relative to the
 * including file, merged map by map with cfg_merge and its `~key` / `_replace_` markers;
 * chains allowed, cycles refused). Anchors and aliases are refused: configs share settings
 * through `extends:`. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "config/config.h"
#include "config/config_tree.h"
#include "config/config_yaml.h"
#include "base/error.h"

/* What one load has used of the bounds in config.h (GANFW_CFG_MAX_*): the values built
 * so far, in the config and its `extends:` bases together (or in one --set value), and the
 * files read. */
typedef struct cfg_loading {
  ganfw_config *c;
  int64_t nodes;
  int32_t files;
} cfg_loading;

typedef struct {
  yaml_parser_t parser;
  cfg_loading *ld;
  const char *file; /* interned */
  const char *text; /* the whole input, NUL-terminated */
  size_t len;
  int positions; /* 0 for --set values: nodes are located by `file` alone */
} yaml_reader;

static ganfw_status oom(void) {
  return ganfw_error_set(GANFW_ERR_OOM, "config: out of host memory");
}

static int64_t mark_line(const yaml_reader *r, yaml_mark_t m) {
  return r->positions ? (int64_t)m.line + 1 : 0;
}

static int64_t mark_col(const yaml_reader *r, yaml_mark_t m) {
  return r->positions ? (int64_t)m.column + 1 : 0;
}

static ganfw_status syntax_error(yaml_reader *r) {
  yaml_parser_t *p = &r->parser;
  const char *problem = p->problem ? p->problem : "malformed YAML";
  if (p->error == YAML_MEMORY_ERROR) return oom();
  if (p->error == YAML_READER_ERROR) {
    if (!r->positions)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: YAML read error at byte %zu: %s (is it UTF-8 text?)", r->file,
                             p->problem_offset, problem);
    /* libyaml gives the byte offset alone: the line and column of that byte. */
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->problem_offset && i < r->len; i++) {
      if (r->text[i] == '\n')
        line++, col = 1;
      else
        col++;
    }
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s:%zu:%zu: YAML read error at byte %zu: %s (is it UTF-8 text?)",
                           r->file, line, col, p->problem_offset, problem);
  }
  char context[160] = "";
  if (p->context && r->positions)
    snprintf(context, sizeof context, " (%s at line %zu)", p->context, p->context_mark.line + 1);
  else if (p->context)
    snprintf(context, sizeof context, " (%s)", p->context);
  if (!r->positions)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: YAML syntax error: %s%s", r->file, problem,
                           context);
  return ganfw_error_set(GANFW_ERR_CONFIG, "%s:%zu:%zu: YAML syntax error: %s%s", r->file,
                         p->problem_mark.line + 1, p->problem_mark.column + 1, problem, context);
}

static ganfw_status next_event(yaml_reader *r, yaml_event_t *ev) {
  if (!yaml_parser_parse(&r->parser, ev)) return syntax_error(r);
  return GANFW_OK;
}

/* GANFW_ERR_CONFIG "file:line:col: <message>" at a mark ("file: ..." for --set values). */
static ganfw_status error_at(const yaml_reader *r, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ganfw_status error_at(const yaml_reader *r, yaml_mark_t m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *msg = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (!msg) return oom();
  va_start(ap, fmt);
  vsnprintf(msg, (size_t)len + 1, fmt, ap);
  va_end(ap);
  ganfw_status st;
  if (r->positions)
    st =
        ganfw_error_set(GANFW_ERR_CONFIG, "%s:%zu:%zu: %s", r->file, m.line + 1, m.column + 1, msg);
  else
    st = ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s", r->file, msg);
  free(msg);
  return st;
}

static ganfw_status refuse_anchor(const yaml_reader *r, yaml_mark_t m, const yaml_char_t *anchor) {
  return error_at(r, m,
                  "YAML anchors and aliases (&%s, *%s) are not supported in ganfw configs; use "
                  "`extends:` to share settings, or write the value out",
                  (const char *)anchor, (const char *)anchor);
}

static int is_null_text(const char *s) {
  return !s[0] || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
         strcmp(s, "NULL") == 0;
}

/* Refuses a key or value (at `path`) longer than GANFW_CFG_MAX_SCALAR_BYTES. */
static ganfw_status check_scalar_len(const yaml_reader *r, const yaml_event_t *ev, const char *path,
                                     int is_key) {
  if (ev->data.scalar.length <= GANFW_CFG_MAX_SCALAR_BYTES) return GANFW_OK;
  return error_at(r, ev->start_mark,
                  "%s%s%s of %zu bytes is longer than the %d bytes a config key or value may "
                  "hold",
                  path[0] ? path : "", path[0] ? ": a " : "a ", is_key ? "key" : "value",
                  ev->data.scalar.length, GANFW_CFG_MAX_SCALAR_BYTES);
}

/* Counts one more node against GANFW_CFG_MAX_NODES, and one more entry of a map or list
 * holding `n` against GANFW_CFG_MAX_ENTRIES. */
static ganfw_status count_node(yaml_reader *r, yaml_mark_t m, const char *path, int64_t n,
                               int is_map) {
  if (n >= GANFW_CFG_MAX_ENTRIES) {
    if (!path[0])
      return error_at(r, m, "the top level holds more than %d keys, the most a config map may",
                      GANFW_CFG_MAX_ENTRIES);
    return error_at(r, m, "%s: more than %d %s, the most a config %s may hold", path,
                    GANFW_CFG_MAX_ENTRIES, is_map ? "keys" : "items", is_map ? "map" : "list");
  }
  if (++r->ld->nodes > GANFW_CFG_MAX_NODES)
    return error_at(r, m,
                    "more than %d values in this config%s; a config may hold at most %d "
                    "(keys, values and list items together)",
                    GANFW_CFG_MAX_NODES, r->positions ? " and its extends: bases" : " value",
                    GANFW_CFG_MAX_NODES);
  return GANFW_OK;
}

static ganfw_status build_node(yaml_reader *r, yaml_event_t *ev, const char *path, int depth,
                               ganfw_cfg **out);

static ganfw_status build_list(yaml_reader *r, ganfw_cfg *list, const char *path, int depth) {
  for (int64_t i = 0;; i++) {
    yaml_event_t ev;
    ganfw_status st = next_event(r, &ev);
    if (st) return st;
    if (ev.type == YAML_SEQUENCE_END_EVENT) {
      yaml_event_delete(&ev);
      return GANFW_OK;
    }
    st = count_node(r, ev.start_mark, path, cfg_node_count(list), 0);
    if (st) {
      yaml_event_delete(&ev);
      return st;
    }
    size_t len = strlen(path) + 24;
    char *item_path = malloc(len);
    if (!item_path) {
      yaml_event_delete(&ev);
      return oom();
    }
    snprintf(item_path, len, "%s[%lld]", path, (long long)i);
    ganfw_cfg *item;
    st = build_node(r, &ev, item_path, depth + 1, &item);
    free(item_path);
    if (st) return st;
    st = cfg_list_append(list, item);
    if (st) return st;
  }
}

static ganfw_status build_map(yaml_reader *r, ganfw_cfg *map, const char *path, int depth) {
  for (;;) {
    yaml_event_t ev;
    ganfw_status st = next_event(r, &ev);
    if (st) return st;
    if (ev.type == YAML_MAPPING_END_EVENT) {
      yaml_event_delete(&ev);
      return GANFW_OK;
    }
    if (ev.type != YAML_SCALAR_EVENT) {
      st = error_at(r, ev.start_mark, "a key must be a plain name, not a list, map or alias");
      yaml_event_delete(&ev);
      return st;
    }
    st = check_scalar_len(r, &ev, path, 1);
    if (!st) st = count_node(r, ev.start_mark, path, cfg_node_count(map), 1);
    if (st) {
      yaml_event_delete(&ev);
      return st;
    }
    const char *key = (const char *)ev.data.scalar.value;
    if (memchr(key, '\0', ev.data.scalar.length) || strchr(key, '.')) {
      st = error_at(r, ev.start_mark,
                    "key '%s' contains %s; keys are plain names (a dotted path addresses "
                    "nested sections)",
                    key, strchr(key, '.') ? "a '.'" : "a NUL character");
      yaml_event_delete(&ev);
      return st;
    }
    const ganfw_cfg *dup = cfg_map_find(map, key);
    if (dup) {
      st = error_at(r, ev.start_mark, "duplicate key '%s' %s%s%s (first at %s); keep one", key,
                    path[0] ? "in section '" : "at the top level", path, path[0] ? "'" : "",
                    cfg_key_where(dup));
      yaml_event_delete(&ev);
      return st;
    }
    int64_t key_line = mark_line(r, ev.start_mark), key_col = mark_col(r, ev.start_mark);
    size_t len = strlen(path) + strlen(key) + 2;
    char *child_path = malloc(len);
    if (!child_path) {
      yaml_event_delete(&ev);
      return oom();
    }
    snprintf(child_path, len, "%s%s%s", path, path[0] ? "." : "", key);
    char *key_copy = strdup(key);
    yaml_event_delete(&ev);
    if (!key_copy) {
      free(child_path);
      return oom();
    }
    ganfw_cfg *value = NULL;
    st = next_event(r, &ev);
    if (st == GANFW_OK) st = build_node(r, &ev, child_path, depth + 1, &value);
    free(child_path);
    if (st == GANFW_OK) st = cfg_map_append(map, key_copy, key_line, key_col, value);
    free(key_copy);
    if (st) return st;
  }
}

/* Builds the node that starts with `ev` (consumed) and everything under it. */
static ganfw_status build_node(yaml_reader *r, yaml_event_t *ev, const char *path, int depth,
                               ganfw_cfg **out) {
  *out = NULL;
  int64_t line = mark_line(r, ev->start_mark), col = mark_col(r, ev->start_mark);
  ganfw_status st = GANFW_OK;
  ganfw_cfg *n = NULL;
  switch (ev->type) {
  case YAML_ALIAS_EVENT:
    st = refuse_anchor(r, ev->start_mark, ev->data.alias.anchor);
    break;
  case YAML_SCALAR_EVENT: {
    if (ev->data.scalar.anchor) {
      st = refuse_anchor(r, ev->start_mark, ev->data.scalar.anchor);
      break;
    }
    if ((st = check_scalar_len(r, ev, path, 0)) != GANFW_OK) break;
    const char *text = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (memchr(text, '\0', len)) {
      st = error_at(r, ev->start_mark, "%s: the value contains a NUL character", path);
      break;
    }
    int quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
    n = cfg_node_new(GANFW_CFG_KIND_SCALAR, r->file, line, col);
    if (!n) st = GANFW_ERR_OOM;
    if (!st) st = cfg_scalar_set(n, text, len, quoted, !quoted && is_null_text(text));
    break;
  }
  case YAML_SEQUENCE_START_EVENT:
  case YAML_MAPPING_START_EVENT: {
    int is_map = ev->type == YAML_MAPPING_START_EVENT;
    const yaml_char_t *anchor =
        is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
    if (anchor) {
      st = refuse_anchor(r, ev->start_mark, anchor);
      break;
    }
    if (depth >= GANFW_CFG_MAX_DEPTH) {
      st = error_at(r, ev->start_mark, "%s: nested deeper than %d levels, the most a config may",
                    path, GANFW_CFG_MAX_DEPTH);
      break;
    }
    n = cfg_node_new(is_map ? GANFW_CFG_KIND_MAP : GANFW_CFG_KIND_LIST, r->file, line, col);
    if (!n) {
      st = GANFW_ERR_OOM;
      break;
    }
    yaml_event_delete(ev);
    st = is_map ? build_map(r, n, path, depth) : build_list(r, n, path, depth);
    if (st) {
      cfg_node_free(n);
      return st;
    }
    *out = n;
    return GANFW_OK;
  }
  default:
    st = error_at(r, ev->start_mark, "unexpected YAML event %d", (int)ev->type);
  }
  yaml_event_delete(ev);
  if (st) {
    cfg_node_free(n);
    return st;
  }
  *out = n;
  return GANFW_OK;
}

/* Parses a whole stream of one document. *out is NULL for an empty stream. */
static ganfw_status parse_stream(yaml_reader *r, ganfw_cfg **out) {
  *out = NULL;
  yaml_event_t ev;
  ganfw_status st = next_event(r, &ev); /* STREAM_START */
  if (st) return st;
  yaml_event_delete(&ev);
  st = next_event(r, &ev);
  if (st) return st;
  if (ev.type == YAML_STREAM_END_EVENT) {
    yaml_event_delete(&ev);
    return GANFW_OK;
  }
  yaml_event_delete(&ev); /* DOCUMENT_START */
  ganfw_cfg *root = NULL;
  st = next_event(r, &ev);
  if (!st) st = build_node(r, &ev, "", 0, &root);
  if (!st) st = next_event(r, &ev); /* DOCUMENT_END */
  if (!st) {
    yaml_event_delete(&ev);
    st = next_event(r, &ev);
  }
  if (!st) {
    if (ev.type != YAML_STREAM_END_EVENT)
      st = error_at(r, ev.start_mark, "a second YAML document ('---'); a config is one document");
    yaml_event_delete(&ev);
  }
  if (st) {
    cfg_node_free(root);
    return st;
  }
  *out = root;
  return GANFW_OK;
}

/* Reads the config file `file` into a NUL-terminated heap string *out of *len bytes.
 * GANFW_ERR_IO naming the file when it cannot be opened or read, is a directory, or is
 * longer than GANFW_CFG_MAX_FILE_BYTES (read at most that far: a device or a pipe that
 * never ends is refused, not read for ever), or, for an `extends:` `base`, is not a regular
 * file (a pipe named there could block the load for ever). */
static ganfw_status read_config_file(const char *file, int base, char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  int fd = open(file, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ganfw_error_set(GANFW_ERR_IO, "cannot open config '%s': %s", file, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    close(fd);
    return ganfw_error_set(GANFW_ERR_IO,
                           "config '%s' is a directory, not a config file; give the path of a "
                           "YAML file",
                           file);
  }
  if (base && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
    close(fd);
    return ganfw_error_set(GANFW_ERR_IO,
                           "config '%s' is not a regular file (a device or a pipe); an "
                           "`extends:` base must be a YAML file",
                           file);
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  ganfw_status st = GANFW_OK;
  while (buf) {
    if (n == cap) {
      size_t more = cap * 2 > (size_t)GANFW_CFG_MAX_FILE_BYTES + 1
                        ? (size_t)GANFW_CFG_MAX_FILE_BYTES + 1
                        : cap * 2;
      char *b = realloc(buf, more + 1);
      if (!b) break;
      buf = b;
      cap = more;
    }
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      st = ganfw_error_set(GANFW_ERR_IO, "cannot read config '%s': %s", file, strerror(errno));
      break;
    }
    if (got == 0) break;
    n += (size_t)got;
    if (n > (size_t)GANFW_CFG_MAX_FILE_BYTES) {
      st = ganfw_error_set(GANFW_ERR_IO,
                           "config '%s' is longer than %d MiB, the most a config file may be "
                           "(is it a config?)",
                           file, GANFW_CFG_MAX_FILE_BYTES >> 20);
      break;
    }
  }
  close(fd);
  if (!buf) return oom();
  if (st) {
    free(buf);
    return st;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return GANFW_OK;
}

/* Parses `text`, or the file `file` when text is NULL (GANFW_ERR_IO when it cannot be
 * read). `file` is interned and located in messages. */
static ganfw_status parse_yaml(cfg_loading *ld, const char *file, const char *text, int positions,
                               int base, ganfw_cfg **out) {
  *out = NULL;
  yaml_reader r = {.ld = ld, .positions = positions};
  r.file = cfg_intern(ld->c, file);
  if (!r.file) return GANFW_ERR_OOM;
  char *owned = NULL;
  size_t len = 0;
  if (!text) {
    ganfw_status st = read_config_file(file, base, &owned, &len);
    if (st) return st;
    text = owned;
  } else {
    len = strlen(text);
  }
  r.text = text;
  r.len = len;
  if (!yaml_parser_initialize(&r.parser)) {
    free(owned);
    return oom();
  }
  yaml_parser_set_input_string(&r.parser, (const unsigned char *)text, len);
  ganfw_status st = parse_stream(&r, out);
  yaml_parser_delete(&r.parser);
  free(owned);
  return st;
}

ganfw_status cfg_yaml_parse_value(ganfw_config *c, const char *text, const char *name,
                                  ganfw_cfg **out) {
  cfg_loading ld = {.c = c};
  ganfw_status st = parse_yaml(&ld, name, text, 0, 0, out);
  if (st || *out) return st;
  /* An empty value ("key=") is a null, as `key:` is in a file. */
  const char *file = cfg_intern(c, name);
  *out = file ? cfg_node_new(GANFW_CFG_KIND_SCALAR, file, 0, 0) : NULL;
  if (!*out) return GANFW_ERR_OOM;
  return cfg_scalar_set(*out, "", 0, 0, 1);
}

/* Parses a config file's text (or the file) and checks that its top is a map; an empty
 * document is an empty map. */
static ganfw_status parse_top(cfg_loading *ld, const char *file, const char *text, int base,
                              ganfw_cfg **out) {
  ganfw_cfg *root;
  ganfw_status st = parse_yaml(ld, file, text, 1, base, &root);
  if (st) return st;
  if (!root || cfg_scalar_is_null(root)) {
    const char *name = cfg_intern(ld->c, file);
    cfg_node_free(root);
    root = name ? cfg_node_new(GANFW_CFG_KIND_MAP, name, 1, 1) : NULL;
    if (!root) return GANFW_ERR_OOM;
  }
  if (ganfw_cfg_kind_of(root) != GANFW_CFG_KIND_MAP) {
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s: the top level of a config must be a map of sections "
                         "(key: value), got %s",
                         ganfw_cfg_where(root),
                         ganfw_cfg_kind_of(root) == GANFW_CFG_KIND_LIST ? "a list"
                                                                        : "a single value");
    cfg_node_free(root);
    return st;
  }
  *out = root;
  return GANFW_OK;
}

/* --- extends ------------------------------------------------------------------------------- */

/* One file on the chain of `extends:` being loaded, innermost first. */
typedef struct include_frame {
  const char *file; /* as shown in messages */
  char *real;       /* realpath, NULL for text loaded from memory */
  int32_t depth;    /* 1 for the top file */
  const struct include_frame *up;
} include_frame;

/* `base` relative to the directory of `including` (unless absolute). Heap string. */
static char *base_path(const char *including, const char *base) {
  const char *slash = including ? strrchr(including, '/') : NULL;
  if (base[0] == '/' || !slash) return strdup(base);
  size_t dir = (size_t)(slash - including) + 1;
  char *p = malloc(dir + strlen(base) + 1);
  if (!p) return NULL;
  memcpy(p, including, dir);
  strcpy(p + dir, base);
  return p;
}

static ganfw_status cycle_error(const ganfw_cfg *at, const include_frame *frame,
                                const char *again) {
  /* The chain from the outermost file down to the one that closes the cycle. */
  size_t len = strlen(again) + 1;
  int64_t depth = 0;
  for (const include_frame *f = frame; f; f = f->up) len += strlen(f->file) + 4, depth++;
  char *chain = malloc(len);
  if (!chain) return oom();
  chain[0] = '\0';
  for (int64_t i = depth - 1; i >= 0; i--) {
    const include_frame *f = frame;
    for (int64_t k = 0; k < i; k++) f = f->up;
    strcat(chain, f->file);
    strcat(chain, " -> ");
  }
  strcat(chain, again);
  ganfw_status st =
      ganfw_error_set(GANFW_ERR_CONFIG, "%s: extends: cycle: %s", ganfw_cfg_where(at), chain);
  free(chain);
  return st;
}

static ganfw_status resolve_extends(cfg_loading *ld, ganfw_cfg *root, const include_frame *frame,
                                    ganfw_cfg **out);

/* Loads the base named by the scalar `item` of an `extends:` in frame->file. */
static ganfw_status load_base(cfg_loading *ld, const ganfw_cfg *item, const include_frame *frame,
                              ganfw_cfg **out) {
  *out = NULL;
  if (ganfw_cfg_kind_of(item) != GANFW_CFG_KIND_SCALAR || cfg_scalar_is_null(item)) {
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: extends: expected a file name or a list of file names",
                           ganfw_cfg_where(item));
  }
  if (frame->depth >= GANFW_CFG_MAX_EXTENDS_DEPTH)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: extends: a chain of more than %d files (each extending the "
                           "next), the most a config may build on",
                           ganfw_cfg_where(item), GANFW_CFG_MAX_EXTENDS_DEPTH);
  if (++ld->files > GANFW_CFG_MAX_FILES)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: extends: more than %d files read for one config (bases named "
                           "again and again?), the most a config may read",
                           ganfw_cfg_where(item), GANFW_CFG_MAX_FILES);
  char *path = base_path(frame->file, cfg_scalar_text(item));
  if (!path) return oom();
  include_frame here = {
      .file = path, .real = realpath(path, NULL), .depth = frame->depth + 1, .up = frame};
  ganfw_status st = GANFW_OK;
  if (!here.real) {
    st = ganfw_error_set(GANFW_ERR_CONFIG, "%s: extends: cannot open base config '%s': %s",
                         ganfw_cfg_where(item), path, strerror(errno));
    goto done;
  }
  for (const include_frame *f = frame; f; f = f->up) {
    if (f->real && strcmp(f->real, here.real) == 0) {
      st = cycle_error(item, frame, path);
      goto done;
    }
  }
  ganfw_cfg *base;
  st = parse_top(ld, path, NULL, 1, &base);
  if (st == GANFW_ERR_IO) {
    st = ganfw_error_wrap(GANFW_ERR_CONFIG, "%s: extends", ganfw_cfg_where(item));
    goto done;
  }
  if (st) goto done;
  here.file = cfg_intern(ld->c, path); /* outlives `path` for messages of deeper frames */
  if (!here.file) {
    cfg_node_free(base);
    st = GANFW_ERR_OOM;
    goto done;
  }
  st = resolve_extends(ld, base, &here, out);
done:
  free(here.real);
  free(path);
  return st;
}

/* Replaces `root` (consumed) by the merge of its `extends:` bases, in order, and itself. */
static ganfw_status resolve_extends(cfg_loading *ld, ganfw_cfg *root, const include_frame *frame,
                                    ganfw_cfg **out) {
  *out = NULL;
  ganfw_cfg *ext = cfg_map_detach(root, "extends");
  if (!ext) {
    *out = root;
    return GANFW_OK;
  }
  ganfw_cfg *merged = NULL;
  ganfw_status st = GANFW_OK;
  int is_list = ganfw_cfg_kind_of(ext) == GANFW_CFG_KIND_LIST;
  int64_t n = is_list ? cfg_node_count(ext) : 1;
  for (int64_t i = 0; i < n && !st; i++) {
    ganfw_cfg *base;
    st = load_base(ld, is_list ? cfg_node_at(ext, i) : ext, frame, &base);
    if (st) break;
    if (merged)
      st = cfg_merge(merged, base, &merged);
    else
      merged = base;
  }
  cfg_node_free(ext);
  if (!st && merged)
    st = cfg_merge(merged, root, &root);
  else if (st)
    cfg_node_free(merged);
  if (st) {
    cfg_node_free(root);
    return st;
  }
  *out = root;
  return GANFW_OK;
}

static ganfw_status load(const char *file, const char *text, ganfw_config **out) {
  *out = NULL;
  ganfw_config *c = cfg_config_new();
  if (!c) return GANFW_ERR_OOM;
  cfg_loading ld = {.c = c, .files = 1};
  ganfw_cfg *root = NULL;
  const char *name = cfg_intern(c, file);
  ganfw_status st = name ? parse_top(&ld, name, text, 0, &root) : GANFW_ERR_OOM;
  if (!st) {
    include_frame top = {.file = name, .real = text ? NULL : realpath(name, NULL), .depth = 1};
    st = resolve_extends(&ld, root, &top, &root);
    free(top.real);
    if (!st && (st = cfg_settle_markers(root)) != GANFW_OK) cfg_node_free(root);
  }
  if (st) {
    ganfw_config_destroy(c);
    return st;
  }
  cfg_config_set_root(c, root, name);
  *out = c;
  return GANFW_OK;
}

ganfw_status ganfw_config_load(const char *path, ganfw_config **out) {
  if (!out) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: load: out is NULL");
  *out = NULL;
  if (!path) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: load: path is NULL");
  return load(path, NULL, out);
}

ganfw_status ganfw_config_load_string(const char *text, const char *name, ganfw_config **out) {
  if (!out) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: load_string: out is NULL");
  *out = NULL;
  if (!text) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "config: load_string: text is NULL");
  return load(name ? name : "<string>", text, out);
}
