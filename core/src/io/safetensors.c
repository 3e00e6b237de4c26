/* Reader and atomic writer of safetensors files (see safetensors.h). The reader validates
 * everything before handing out a pointer: a strict JSON header parser, then the offsets
 * against the data section. Tensors are up to GANFW_ST_MAX_DIMS-dimensional, any dtype. */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/file.h"
#include "base/json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

/* --- dtypes ----------------------------------------------------------------------------- */
typedef struct st_dtype_info {
  const char *name;
  int32_t dtype; /* GANFW_DTYPE_* or GANFW_ST_DTYPE_OTHER */
  int32_t size;
} st_dtype_info;

/* Every dtype of the safetensors specification; the first GANFW_DTYPE_COUNT are ganfw's, in
 * GANFW_DTYPE_* order. */
static const st_dtype_info st_dtypes[] = {
    {"F32", GANFW_DTYPE_F32, 4},
    {"F16", GANFW_DTYPE_F16, 2},
    {"BF16", GANFW_DTYPE_BF16, 2},
    {"I32", GANFW_DTYPE_I32, 4},
    {"U8", GANFW_DTYPE_U8, 1},
    {"F64", GANFW_ST_DTYPE_OTHER, 8},
    {"I64", GANFW_ST_DTYPE_OTHER, 8},
    {"U64", GANFW_ST_DTYPE_OTHER, 8},
    {"U32", GANFW_ST_DTYPE_OTHER, 4},
    {"I16", GANFW_ST_DTYPE_OTHER, 2},
    {"U16", GANFW_ST_DTYPE_OTHER, 2},
    {"I8", GANFW_ST_DTYPE_OTHER, 1},
    {"BOOL", GANFW_ST_DTYPE_OTHER, 1},
    {"F8_E4M3", GANFW_ST_DTYPE_OTHER, 1},
    {"F8_E5M2", GANFW_ST_DTYPE_OTHER, 1},
};
#define ST_NUM_DTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))
_Static_assert(GANFW_DTYPE_COUNT == 5, "st_dtypes must list every GANFW_DTYPE_* first");

const char *ganfw_st_dtype_name(int32_t dtype) {
  if (dtype < 0 || dtype >= GANFW_DTYPE_COUNT) return NULL;
  return st_dtypes[dtype].name;
}

static const st_dtype_info *st_dtype_lookup(const char *name) {
  for (int i = 0; i < ST_NUM_DTYPES; i++)
    if (strcmp(st_dtypes[i].name, name) == 0) return &st_dtypes[i];
  return NULL;
}

/* --- the opened file ------------------------------------------------------------------- */
typedef struct st_entry {
  ganfw_st_tensor t;
  char *name;    /* owned */
  int64_t begin; /* data_offsets, relative to the data section */
  int64_t end;
  void *owned_data; /* an aligned copy when the bytes in the file are misaligned */
} st_entry;

struct ganfw_st_file {
  unsigned char *bytes; /* the whole file */
  int64_t nbytes;
  st_entry *entries; /* sorted by offset */
  int64_t count;
  st_entry **by_name; /* sorted by name, for ganfw_st_find */
  char **meta_keys;
  char **meta_values;
  int64_t meta_count;
};

static void st_file_free(ganfw_st_file *f) {
  if (!f) return;
  for (int64_t i = 0; i < f->count; i++) {
    free(f->entries[i].name);
    free(f->entries[i].owned_data);
  }
  for (int64_t i = 0; i < f->meta_count; i++) {
    free(f->meta_keys[i]);
    free(f->meta_values[i]);
  }
  free(f->entries);
  free(f->by_name);
  free(f->meta_keys);
  free(f->meta_values);
  free(f->bytes);
  free(f);
}

void ganfw_st_close(ganfw_st_file *f) {
  st_file_free(f);
}

int64_t ganfw_st_count(const ganfw_st_file *f) {
  return f ? f->count : 0;
}

const ganfw_st_tensor *ganfw_st_at(const ganfw_st_file *f, int64_t i) {
  if (!f || i < 0 || i >= f->count) return NULL;
  return &f->entries[i].t;
}

const ganfw_st_tensor *ganfw_st_find(const ganfw_st_file *f, const char *name) {
  if (!f || !name) return NULL;
  int64_t lo = 0, hi = f->count;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    int c = strcmp(f->by_name[mid]->name, name);
    if (c == 0) return &f->by_name[mid]->t;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

const char *ganfw_st_metadata(const ganfw_st_file *f, const char *key) {
  if (!f || !key) return NULL;
  for (int64_t i = 0; i < f->meta_count; i++)
    if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
  return NULL;
}

int64_t ganfw_st_metadata_count(const ganfw_st_file *f) {
  return f ? f->meta_count : 0;
}

const char *ganfw_st_metadata_key(const ganfw_st_file *f, int64_t i) {
  return (f && i >= 0 && i < f->meta_count) ? f->meta_keys[i] : NULL;
}

const char *ganfw_st_metadata_value(const ganfw_st_file *f, int64_t i) {
  return (f && i >= 0 && i < f->meta_count) ? f->meta_values[i] : NULL;
}

/* --- a strict JSON parser for the header ------------------------------------------------
 * Accepts only what a safetensors header holds: objects, arrays, strings (with every JSON
 * escape, valid UTF-8, no NUL) and integers. Anything else is an error naming the byte. */
typedef struct st_parser {
  const char *s;
  size_t n;
  size_t pos;
  char err[512];
} st_parser;

static int st_fail(st_parser *p, const char *what) {
  if (!p->err[0]) snprintf(p->err, sizeof p->err, "header byte %zu: %s", p->pos, what);
  return -1;
}

static void st_skip_ws(st_parser *p) {
  while (p->pos < p->n) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

/* Skips whitespace and consumes `c`; -1 (with a message) when the next byte differs. */
static int st_expect(st_parser *p, char c) {
  st_skip_ws(p);
  if (p->pos >= p->n || p->s[p->pos] != c) {
    char msg[64];
    snprintf(msg, sizeof msg, "expected '%c'", c);
    return st_fail(p, msg);
  }
  p->pos++;
  return 0;
}

/* After a member or element: 1 when `close` ends the container, 0 after a ',', -1. */
static int st_next(st_parser *p, char close) {
  st_skip_ws(p);
  if (p->pos < p->n && p->s[p->pos] == ',') {
    p->pos++;
    return 0;
  }
  if (p->pos < p->n && p->s[p->pos] == close) {
    p->pos++;
    return 1;
  }
  char msg[64];
  snprintf(msg, sizeof msg, "expected ',' or '%c'", close);
  return st_fail(p, msg);
}

/* 1 (and consumes it) when the next non-blank byte is `c`. */
static int st_peek_consume(st_parser *p, char c) {
  st_skip_ws(p);
  if (p->pos < p->n && p->s[p->pos] == c) {
    p->pos++;
    return 1;
  }
  return 0;
}

static int st_hex4(st_parser *p, uint32_t *out) {
  if (p->n - p->pos < 4) return st_fail(p, "truncated \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p->s[p->pos + i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (uint32_t)(c - 'A' + 10);
    else
      return st_fail(p, "bad hex digit in \\u escape");
  }
  p->pos += 4;
  *out = v;
  return 0;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when invalid. */
static size_t st_utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

/* 1 when the NUL-terminated s is valid UTF-8 (the reader refuses anything else). */
static int st_valid_utf8(const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i < n;) {
    size_t l = st_utf8_len((const unsigned char *)s + i, n - i);
    if (l == 0) return 0;
    i += l;
  }
  return 1;
}

static size_t st_put_utf8(char *o, uint32_t cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Parses a string into a new NUL-terminated buffer (*out, freed by the caller). */
static int st_string(st_parser *p, char **out) {
  *out = NULL;
  st_skip_ws(p);
  if (p->pos >= p->n || p->s[p->pos] != '"') return st_fail(p, "expected a string");
  p->pos++;
  size_t start = p->pos;
  /* The decoded string is never longer than the encoded one. */
  size_t cap = 0;
  while (start + cap < p->n && p->s[start + cap] != '"') cap += (p->s[start + cap] == '\\') + 1;
  char *o = malloc(cap + 1);
  if (!o) return st_fail(p, "out of memory");
  size_t len = 0;
  for (;;) {
    if (p->pos >= p->n) {
      free(o);
      return st_fail(p, "unterminated string");
    }
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '"') {
      p->pos++;
      break;
    }
    if (c < 0x20) {
      free(o);
      return st_fail(p, "control character in a string");
    }
    if (c != '\\') {
      size_t ul = st_utf8_len((const unsigned char *)p->s + p->pos, p->n - p->pos);
      if (ul == 0) {
        free(o);
        return st_fail(p, "invalid UTF-8 in a string");
      }
      memcpy(o + len, p->s + p->pos, ul);
      len += ul;
      p->pos += ul;
      continue;
    }
    p->pos++;
    if (p->pos >= p->n) {
      free(o);
      return st_fail(p, "unterminated escape");
    }
    char e = p->s[p->pos++];
    uint32_t cp;
    switch (e) {
    case '"':
      cp = '"';
      break;
    case '\\':
      cp = '\\';
      break;
    case '/':
      cp = '/';
      break;
    case 'b':
      cp = '\b';
      break;
    case 'f':
      cp = '\f';
      break;
    case 'n':
      cp = '\n';
      break;
    case 'r':
      cp = '\r';
      break;
    case 't':
      cp = '\t';
      break;
    case 'u':
      if (st_hex4(p, &cp)) {
        free(o);
        return -1;
      }
      if (cp >= 0xDC00 && cp <= 0xDFFF) {
        free(o);
        return st_fail(p, "lone low surrogate in \\u escape");
      }
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        uint32_t lo;
        if (p->n - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
          free(o);
          return st_fail(p, "high surrogate without a low surrogate");
        }
        p->pos += 2;
        if (st_hex4(p, &lo)) {
          free(o);
          return -1;
        }
        if (lo < 0xDC00 || lo > 0xDFFF) {
          free(o);
          return st_fail(p, "high surrogate without a low surrogate");
        }
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      }
      if (cp == 0) {
        free(o);
        return st_fail(p, "NUL character in a string");
      }
      break;
    default:
      free(o);
      return st_fail(p, "unknown escape in a string");
    }
    len += st_put_utf8(o + len, cp);
  }
  o[len] = '\0';
  *out = o;
  return 0;
}

/* Parses an integer (no fraction, no exponent, no leading zeros) into *out. */
static int st_int(st_parser *p, int64_t *out) {
  st_skip_ws(p);
  int neg = 0;
  if (p->pos < p->n && p->s[p->pos] == '-') {
    neg = 1;
    p->pos++;
  }
  if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9')
    return st_fail(p, "expected an integer");
  if (p->s[p->pos] == '0' && p->pos + 1 < p->n && p->s[p->pos + 1] >= '0' &&
      p->s[p->pos + 1] <= '9')
    return st_fail(p, "leading zero in an integer");
  uint64_t v = 0;
  while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
    uint64_t d = (uint64_t)(p->s[p->pos] - '0');
    if (v > ((uint64_t)INT64_MAX - d) / 10) return st_fail(p, "integer out of range");
    v = v * 10 + d;
    p->pos++;
  }
  if (p->pos < p->n && (p->s[p->pos] == '.' || p->s[p->pos] == 'e' || p->s[p->pos] == 'E'))
    return st_fail(p, "expected an integer, found a fraction or exponent");
  *out = neg ? -(int64_t)v : (int64_t)v;
  return 0;
}

/* Parses [int, ...] with at most `max` elements into out[], the count into *count. */
static int st_int_array(st_parser *p, int64_t *out, int32_t max, int32_t *count) {
  *count = 0;
  if (st_expect(p, '[')) return -1;
  if (st_peek_consume(p, ']')) return 0;
  for (;;) {
    int64_t v;
    if (st_int(p, &v)) return -1;
    if (*count >= max) return st_fail(p, "too many elements in an array");
    out[(*count)++] = v;
    int r = st_next(p, ']');
    if (r < 0) return -1;
    if (r == 1) return 0;
  }
}

/* --- building the file from the header -------------------------------------------------- */
typedef struct st_build {
  st_parser p;
  st_entry *entries;
  int64_t count, cap;
  char **meta_keys, **meta_values;
  int64_t meta_count, meta_cap;
  int have_meta;
} st_build;

static int st_cmp_key(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A key given twice is refused: sorted, so that a header of many keys costs n log n, not
 * n^2 comparisons. */
static int st_check_metadata_keys(st_build *b) {
  if (b->meta_count < 2) return 0;
  char **keys = malloc((size_t)b->meta_count * sizeof *keys);
  if (!keys) return st_fail(&b->p, "out of memory");
  memcpy(keys, b->meta_keys, (size_t)b->meta_count * sizeof *keys);
  qsort(keys, (size_t)b->meta_count, sizeof *keys, st_cmp_key);
  for (int64_t i = 1; i < b->meta_count; i++) {
    if (strcmp(keys[i - 1], keys[i]) == 0) {
      char msg[128];
      snprintf(msg, sizeof msg, "duplicate key \"%.64s\" in \"__metadata__\"", keys[i]);
      free(keys);
      return st_fail(&b->p, msg);
    }
  }
  free(keys);
  return 0;
}

static int st_parse_metadata(st_build *b) {
  st_parser *p = &b->p;
  if (b->have_meta) return st_fail(p, "duplicate \"__metadata__\"");
  b->have_meta = 1;
  if (st_expect(p, '{')) return -1;
  if (st_peek_consume(p, '}')) return 0;
  for (;;) {
    char *key = NULL, *value = NULL;
    if (st_string(p, &key)) return -1;
    if (st_expect(p, ':')) {
      free(key);
      return -1;
    }
    st_skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] != '"') {
      free(key);
      return st_fail(p, "\"__metadata__\" values must be strings");
    }
    if (st_string(p, &value)) {
      free(key);
      return -1;
    }
    if (b->meta_count == b->meta_cap) {
      int64_t cap = b->meta_cap ? 2 * b->meta_cap : 8;
      char **k = realloc(b->meta_keys, (size_t)cap * sizeof *k);
      if (k) b->meta_keys = k;
      char **v = k ? realloc(b->meta_values, (size_t)cap * sizeof *v) : NULL;
      if (v) b->meta_values = v;
      if (!k || !v) {
        free(key);
        free(value);
        return st_fail(p, "out of memory");
      }
      b->meta_cap = cap;
    }
    b->meta_keys[b->meta_count] = key;
    b->meta_values[b->meta_count] = value;
    b->meta_count++;
    int r = st_next(p, '}');
    if (r < 0) return -1;
    if (r == 1) return st_check_metadata_keys(b);
  }
}

/* Parses {"dtype": ..., "shape": [...], "data_offsets": [b, e]} into e (name already set). */
static int st_parse_tensor(st_build *b, st_entry *e) {
  st_parser *p = &b->p;
  char msg[256];
  int have_dtype = 0, have_shape = 0, have_offsets = 0;
  if (st_expect(p, '{')) return -1;
  if (!st_peek_consume(p, '}')) {
    for (;;) {
      char *key = NULL;
      if (st_string(p, &key)) return -1;
      if (st_expect(p, ':')) {
        free(key);
        return -1;
      }
      int dup = 0;
      if (strcmp(key, "dtype") == 0) {
        dup = have_dtype++;
        char *dt = NULL;
        if (!dup && st_string(p, &dt)) {
          free(key);
          return -1;
        }
        if (!dup) {
          const st_dtype_info *info = st_dtype_lookup(dt);
          if (!info) {
            snprintf(msg, sizeof msg, "tensor \"%.64s\": unknown dtype \"%.32s\"", e->name, dt);
            free(dt);
            free(key);
            return st_fail(p, msg);
          }
          free(dt);
          e->t.dtype = info->dtype;
          e->t.dtype_name = info->name;
          e->t.elem_size = info->size;
        }
      } else if (strcmp(key, "shape") == 0) {
        dup = have_shape++;
        if (!dup && st_int_array(p, e->t.shape, GANFW_ST_MAX_DIMS, &e->t.ndim)) {
          free(key);
          return -1;
        }
      } else if (strcmp(key, "data_offsets") == 0) {
        dup = have_offsets++;
        int64_t off[2] = {0, 0};
        int32_t n = 0;
        if (!dup && st_int_array(p, off, 2, &n)) {
          free(key);
          return -1;
        }
        if (!dup && n != 2) {
          free(key);
          return st_fail(p, "data_offsets must be [begin, end]");
        }
        e->begin = off[0];
        e->end = off[1];
      } else {
        snprintf(msg, sizeof msg, "tensor \"%.64s\": unknown field \"%.32s\"", e->name, key);
        free(key);
        return st_fail(p, msg);
      }
      if (dup) {
        snprintf(msg, sizeof msg, "tensor \"%.64s\": duplicate field \"%.32s\"", e->name, key);
        free(key);
        return st_fail(p, msg);
      }
      free(key);
      int r = st_next(p, '}');
      if (r < 0) return -1;
      if (r == 1) break;
    }
  }
  if (!have_dtype || !have_shape || !have_offsets) {
    snprintf(msg, sizeof msg, "tensor \"%.64s\": missing %s", e->name,
             !have_dtype   ? "\"dtype\""
             : !have_shape ? "\"shape\""
                           : "\"data_offsets\"");
    return st_fail(p, msg);
  }
  int64_t numel = 1;
  for (int32_t d = 0; d < e->t.ndim; d++) {
    if (e->t.shape[d] < 0) {
      snprintf(msg, sizeof msg, "tensor \"%.64s\": negative dimension", e->name);
      return st_fail(p, msg);
    }
    if (e->t.shape[d] != 0 && numel > INT64_MAX / e->t.elem_size / e->t.shape[d]) {
      snprintf(msg, sizeof msg, "tensor \"%.64s\": shape too large", e->name);
      return st_fail(p, msg);
    }
    numel *= e->t.shape[d];
  }
  e->t.numel = numel;
  e->t.nbytes = numel * e->t.elem_size;
  if (e->begin < 0 || e->end < e->begin) {
    snprintf(msg, sizeof msg, "tensor \"%.64s\": bad data_offsets [%lld, %lld]", e->name,
             (long long)e->begin, (long long)e->end);
    return st_fail(p, msg);
  }
  if (e->end - e->begin != e->t.nbytes) {
    snprintf(msg, sizeof msg,
             "tensor \"%.64s\": data_offsets span %lld bytes but %s of its shape needs %lld",
             e->name, (long long)(e->end - e->begin), e->t.dtype_name, (long long)e->t.nbytes);
    return st_fail(p, msg);
  }
  return 0;
}

static int st_parse_header(st_build *b) {
  st_parser *p = &b->p;
  if (st_expect(p, '{')) return -1;
  if (!st_peek_consume(p, '}')) {
    for (;;) {
      char *name = NULL;
      if (st_string(p, &name)) return -1;
      if (st_expect(p, ':')) {
        free(name);
        return -1;
      }
      if (strcmp(name, "__metadata__") == 0) {
        free(name);
        if (st_parse_metadata(b)) return -1;
      } else {
        if (name[0] == '\0') {
          free(name);
          return st_fail(p, "empty tensor name");
        }
        if (b->count == b->cap) {
          int64_t cap = b->cap ? 2 * b->cap : 16;
          st_entry *ne = realloc(b->entries, (size_t)cap * sizeof *ne);
          if (!ne) {
            free(name);
            return st_fail(p, "out of memory");
          }
          b->entries = ne;
          b->cap = cap;
        }
        st_entry *e = &b->entries[b->count++];
        memset(e, 0, sizeof *e);
        e->name = name;
        e->t.name = name;
        if (st_parse_tensor(b, e)) return -1;
      }
      int r = st_next(p, '}');
      if (r < 0) return -1;
      if (r == 1) break;
    }
  }
  st_skip_ws(p);
  if (p->pos != p->n) return st_fail(p, "trailing bytes after the header object");
  return 0;
}

static int st_cmp_offset(const void *a, const void *b) {
  const st_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

static int st_cmp_name(const void *a, const void *b) {
  const st_entry *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

static ganfw_status st_corrupt(const char *what, const char *why) {
  return ganfw_error_set(GANFW_ERR_IO, "%s: corrupt safetensors file: %s", what, why);
}

/* The 8-byte little-endian header length at the start of a file image of nbytes, checked
 * against the size and GANFW_ST_MAX_HEADER. */
static ganfw_status st_header_length(const unsigned char *bytes, int64_t nbytes, const char *what,
                                     uint64_t *hlen) {
  char why[600];
  if (nbytes < 8) {
    snprintf(why, sizeof why, "the file is %lld bytes, shorter than the 8-byte header length",
             (long long)nbytes);
    return st_corrupt(what, why);
  }
  *hlen = 0;
  for (int i = 7; i >= 0; i--) *hlen = (*hlen << 8) | bytes[i];
  if (*hlen > (uint64_t)(nbytes - 8) || *hlen > GANFW_ST_MAX_HEADER || *hlen < 2) {
    snprintf(why, sizeof why,
             "header length %llu does not fit (the file holds %lld bytes after it, the "
             "limit is %d); the file is truncated or not safetensors",
             (unsigned long long)*hlen, (long long)(nbytes - 8), GANFW_ST_MAX_HEADER);
    return st_corrupt(what, why);
  }
  return GANFW_OK;
}

/* Parses the JSON header of the file image into a new file that owns `bytes`, the entries
 * and the metadata; on failure everything, `bytes` included, is freed. */
static ganfw_status st_file_from_header(unsigned char *bytes, int64_t nbytes, uint64_t hlen,
                                        const char *what, ganfw_st_file **out) {
  st_build b;
  memset(&b, 0, sizeof b);
  b.p.s = (const char *)bytes + 8;
  b.p.n = (size_t)hlen;
  int bad = st_parse_header(&b);
  ganfw_st_file *f = calloc(1, sizeof *f);
  if (!f) {
    bad = 1;
    snprintf(b.p.err, sizeof b.p.err, "out of memory");
  } else {
    f->bytes = bytes;
    f->nbytes = nbytes;
    f->entries = b.entries;
    f->count = b.count;
    f->meta_keys = b.meta_keys;
    f->meta_values = b.meta_values;
    f->meta_count = b.meta_count;
  }
  if (!bad) {
    *out = f;
    return GANFW_OK;
  }
  char why[600];
  snprintf(why, sizeof why, "%s", b.p.err);
  if (f) {
    st_file_free(f);
  } else {
    for (int64_t i = 0; i < b.count; i++) free(b.entries[i].name);
    for (int64_t i = 0; i < b.meta_count; i++) {
      free(b.meta_keys[i]);
      free(b.meta_values[i]);
    }
    free(b.entries);
    free(b.meta_keys);
    free(b.meta_values);
    free(bytes);
  }
  return st_corrupt(what, why);
}

/* The tensors must tile the data section of data_len bytes exactly: sorted by offset (f's
 * entries are sorted here), each begins where the previous one ends, the last ends at the
 * end of the file. */
static ganfw_status st_check_tiling(ganfw_st_file *f, int64_t data_len, const char *what) {
  char why[600];
  if (f->count > 0) qsort(f->entries, (size_t)f->count, sizeof *f->entries, st_cmp_offset);
  int64_t at = 0;
  for (int64_t i = 0; i < f->count; i++) {
    const st_entry *e = &f->entries[i];
    if (e->begin != at) {
      if (e->begin < at)
        snprintf(why, sizeof why, "tensor \"%.64s\" at [%lld, %lld] overlaps the previous one",
                 e->name, (long long)e->begin, (long long)e->end);
      else
        snprintf(why, sizeof why, "gap in the data before tensor \"%.64s\" at [%lld, %lld]",
                 e->name, (long long)e->begin, (long long)e->end);
      return st_corrupt(what, why);
    }
    if (e->end > data_len) {
      snprintf(why, sizeof why,
               "tensor \"%.64s\" ends at byte %lld of a %lld-byte data section (the file is "
               "truncated)",
               e->name, (long long)e->end, (long long)data_len);
      return st_corrupt(what, why);
    }
    at = e->end;
  }
  if (at != data_len) {
    snprintf(why, sizeof why, "%lld bytes after the last tensor", (long long)(data_len - at));
    return st_corrupt(what, why);
  }
  return GANFW_OK;
}

/* Points every tensor at its bytes in `data` (an aligned copy when they are misaligned for
 * its element size) and sorts f->by_name for ganfw_st_find, refusing a duplicate name. */
static ganfw_status st_index_tensors(ganfw_st_file *f, const unsigned char *data,
                                     const char *what) {
  f->by_name = malloc((size_t)(f->count ? f->count : 1) * sizeof *f->by_name);
  if (!f->by_name)
    return ganfw_error_set(GANFW_ERR_OOM, "%s: out of memory reading safetensors", what);
  for (int64_t i = 0; i < f->count; i++) {
    st_entry *e = &f->entries[i];
    e->t.name = e->name;
    f->by_name[i] = e;
    const unsigned char *src = data + e->begin;
    if (((uintptr_t)src % (uintptr_t)e->t.elem_size) != 0) {
      e->owned_data = aligned_alloc(64, (size_t)((e->t.nbytes + 63) / 64 * 64));
      if (!e->owned_data)
        return ganfw_error_set(GANFW_ERR_OOM, "%s: out of memory reading safetensors", what);
      memcpy(e->owned_data, src, (size_t)e->t.nbytes);
      src = e->owned_data;
    }
    e->t.data = src;
  }
  if (f->count > 0) qsort(f->by_name, (size_t)f->count, sizeof *f->by_name, st_cmp_name);
  for (int64_t i = 1; i < f->count; i++) {
    if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
      char why[600];
      snprintf(why, sizeof why, "duplicate tensor \"%.64s\"", f->by_name[i]->name);
      return st_corrupt(what, why);
    }
  }
  return GANFW_OK;
}

/* Validates a whole file image and takes ownership of `bytes` (freed on failure too). */
static ganfw_status st_open_owned(unsigned char *bytes, int64_t nbytes, const char *what,
                                  ganfw_st_file **out) {
  uint64_t hlen = 0;
  ganfw_status st = st_header_length(bytes, nbytes, what, &hlen);
  if (st != GANFW_OK) {
    free(bytes);
    return st;
  }
  ganfw_st_file *f = NULL;
  if ((st = st_file_from_header(bytes, nbytes, hlen, what, &f)) != GANFW_OK) return st;
  if ((st = st_check_tiling(f, nbytes - 8 - (int64_t)hlen, what)) != GANFW_OK ||
      (st = st_index_tensors(f, bytes + 8 + hlen, what)) != GANFW_OK) {
    st_file_free(f);
    return st;
  }
  *out = f;
  return GANFW_OK;
}

ganfw_status ganfw_st_open_memory(const void *bytes, int64_t nbytes, const char *what,
                                  ganfw_st_file **out) {
  if (!out || (!bytes && nbytes > 0) || nbytes < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_st_open_memory: bad arguments");
  *out = NULL;
  unsigned char *copy = aligned_alloc(64, (size_t)((nbytes + 64) / 64 * 64));
  if (!copy) return ganfw_error_set(GANFW_ERR_OOM, "%s: out of memory", what);
  if (nbytes > 0) memcpy(copy, bytes, (size_t)nbytes);
  return st_open_owned(copy, nbytes, what ? what : "(memory)", out);
}

ganfw_status ganfw_st_open(const char *path, ganfw_st_file **out) {
  if (!path || !out) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_st_open: NULL argument");
  *out = NULL;
  /* O_NONBLOCK: a FIFO must not block the open (it is refused below); no effect on files. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ganfw_error_set(GANFW_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return ganfw_error_set(GANFW_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return ganfw_error_set(GANFW_ERR_IO, "%s: %s, not a safetensors file", path,
                           S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
  }
  int64_t size = (int64_t)st.st_size;
  /* Aligned so that tensor data laid out by decreasing element size is aligned in memory. */
  unsigned char *bytes = aligned_alloc(64, (size_t)((size + 64) / 64 * 64));
  if (!bytes) {
    close(fd);
    return ganfw_error_set(GANFW_ERR_OOM, "%s: out of memory reading %lld bytes", path,
                           (long long)size);
  }
  int64_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, bytes + got, (size_t)(size - got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      free(bytes);
      close(fd);
      return ganfw_error_set(GANFW_ERR_IO, "%s: read failed: %s", path, strerror(err));
    }
    if (r == 0) break; /* shrank while reading: validated as a truncated file below */
    got += r;
  }
  close(fd);
  return st_open_owned(bytes, got, path, out);
}

/* --- writing ----------------------------------------------------------------------------- */
typedef struct st_wentry {
  char *name;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[GANFW_ST_MAX_DIMS];
  int64_t nbytes;
  const void *data;
  void *owned; /* the copy behind data, or NULL when borrowed */
} st_wentry;

struct ganfw_st_writer {
  st_wentry *entries;
  int64_t count, cap;
  char **meta_keys, **meta_values;
  int64_t meta_count, meta_cap;
};

ganfw_st_writer *ganfw_st_writer_create(void) {
  return calloc(1, sizeof(ganfw_st_writer));
}

void ganfw_st_writer_destroy(ganfw_st_writer *w) {
  if (!w) return;
  for (int64_t i = 0; i < w->count; i++) {
    free(w->entries[i].name);
    free(w->entries[i].owned);
  }
  for (int64_t i = 0; i < w->meta_count; i++) {
    free(w->meta_keys[i]);
    free(w->meta_values[i]);
  }
  free(w->entries);
  free(w->meta_keys);
  free(w->meta_values);
  free(w);
}

/* `dtype` indexes st_dtypes (any safetensors dtype). */
static ganfw_status st_writer_add(ganfw_st_writer *w, const char *name, int32_t dtype, int32_t ndim,
                                  const int64_t *shape, const void *data, int copy) {
  if (!w || !name)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_st_writer_add: NULL writer or name");
  if (name[0] == '\0' || strcmp(name, "__metadata__") == 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "safetensors writer: tensor name \"%s\" is not allowed", name);
  if (!st_valid_utf8(name))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "safetensors writer: tensor name is not valid UTF-8");
  if (dtype < 0 || dtype >= ST_NUM_DTYPES)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "safetensors writer: tensor \"%s\" has unknown dtype %d", name,
                           (int)dtype);
  if (ndim < 0 || ndim > GANFW_ST_MAX_DIMS || (ndim > 0 && !shape))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "safetensors writer: tensor \"%s\" has %d dimensions (0..%d)", name,
                           (int)ndim, GANFW_ST_MAX_DIMS);
  for (int64_t i = 0; i < w->count; i++)
    if (strcmp(w->entries[i].name, name) == 0)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG, "safetensors writer: tensor \"%s\" added twice",
                             name);
  int64_t esize = st_dtypes[dtype].size;
  int64_t numel = 1;
  for (int32_t d = 0; d < ndim; d++) {
    if (shape[d] < 0 || (shape[d] > 0 && numel > INT64_MAX / esize / shape[d]))
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "safetensors writer: tensor \"%s\" has a bad dimension %lld", name,
                             (long long)shape[d]);
    numel *= shape[d];
  }
  int64_t nbytes = numel * esize;
  if (nbytes > 0 && !data)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "safetensors writer: tensor \"%s\" has no data",
                           name);
  if (w->count == w->cap) {
    int64_t cap = w->cap ? 2 * w->cap : 16;
    st_wentry *ne = realloc(w->entries, (size_t)cap * sizeof *ne);
    if (!ne) return ganfw_error_set(GANFW_ERR_OOM, "safetensors writer: out of memory");
    w->entries = ne;
    w->cap = cap;
  }
  st_wentry *e = &w->entries[w->count];
  memset(e, 0, sizeof *e);
  e->name = strdup(name);
  if (copy && nbytes > 0) {
    e->owned = malloc((size_t)nbytes);
    if (e->owned) memcpy(e->owned, data, (size_t)nbytes);
  }
  if (!e->name || (copy && nbytes > 0 && !e->owned)) {
    free(e->name);
    free(e->owned);
    return ganfw_error_set(GANFW_ERR_OOM,
                           "safetensors writer: out of memory adding tensor \"%s\" (%lld bytes)",
                           name, (long long)nbytes);
  }
  e->dtype = dtype;
  e->ndim = ndim;
  for (int32_t d = 0; d < ndim; d++) e->shape[d] = shape[d];
  e->nbytes = nbytes;
  e->data = e->owned ? e->owned : data;
  w->count++;
  return GANFW_OK;
}

static ganfw_status st_bad_dtype(const char *name, int32_t dtype) {
  return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                         "safetensors writer: tensor \"%s\" has unknown dtype %d", name ? name : "",
                         (int)dtype);
}

ganfw_status ganfw_st_writer_add(ganfw_st_writer *w, const char *name, int32_t dtype, int32_t ndim,
                                 const int64_t *shape, const void *data) {
  if (dtype < 0 || dtype >= GANFW_DTYPE_COUNT) return st_bad_dtype(name, dtype);
  return st_writer_add(w, name, dtype, ndim, shape, data, 1);
}

ganfw_status ganfw_st_writer_add_borrowed(ganfw_st_writer *w, const char *name, int32_t dtype,
                                          int32_t ndim, const int64_t *shape, const void *data) {
  if (dtype < 0 || dtype >= GANFW_DTYPE_COUNT) return st_bad_dtype(name, dtype);
  return st_writer_add(w, name, dtype, ndim, shape, data, 0);
}

ganfw_status ganfw_st_writer_add_raw(ganfw_st_writer *w, const char *name, const char *dtype_name,
                                     int32_t ndim, const int64_t *shape, const void *data) {
  const st_dtype_info *info = dtype_name ? st_dtype_lookup(dtype_name) : NULL;
  if (!info)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "safetensors writer: tensor \"%s\" has unknown dtype \"%s\"",
                           name ? name : "", dtype_name ? dtype_name : "(null)");
  return st_writer_add(w, name, (int32_t)(info - st_dtypes), ndim, shape, data, 1);
}

ganfw_status ganfw_st_writer_metadata(ganfw_st_writer *w, const char *key, const char *value) {
  if (!w || !key || !value)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_st_writer_metadata: NULL argument");
  if (!st_valid_utf8(key) || !st_valid_utf8(value))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "safetensors writer: metadata \"%s\" is not valid UTF-8", key);
  char *v = strdup(value);
  if (!v) return ganfw_error_set(GANFW_ERR_OOM, "safetensors writer: out of memory");
  for (int64_t i = 0; i < w->meta_count; i++) {
    if (strcmp(w->meta_keys[i], key) == 0) {
      free(w->meta_values[i]);
      w->meta_values[i] = v;
      return GANFW_OK;
    }
  }
  if (w->meta_count == w->meta_cap) {
    int64_t cap = w->meta_cap ? 2 * w->meta_cap : 8;
    char **k = realloc(w->meta_keys, (size_t)cap * sizeof *k);
    if (k) w->meta_keys = k;
    char **nv = k ? realloc(w->meta_values, (size_t)cap * sizeof *nv) : NULL;
    if (nv) w->meta_values = nv;
    if (!k || !nv) {
      free(v);
      return ganfw_error_set(GANFW_ERR_OOM, "safetensors writer: out of memory");
    }
    w->meta_cap = cap;
  }
  char *k = strdup(key);
  if (!k) {
    free(v);
    return ganfw_error_set(GANFW_ERR_OOM, "safetensors writer: out of memory");
  }
  w->meta_keys[w->meta_count] = k;
  w->meta_values[w->meta_count] = v;
  w->meta_count++;
  return GANFW_OK;
}

/* A growing byte buffer for the JSON header. */
typedef struct st_buf {
  char *p;
  size_t len, cap;
  int oom;
} st_buf;

static void st_buf_put(st_buf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + n + 1) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) {
      b->oom = 1;
      return;
    }
    b->p = np;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void st_buf_puts(st_buf *b, const char *s) {
  st_buf_put(b, s, strlen(s));
}

static void st_buf_put_json(void *b, const char *bytes, size_t n) {
  st_buf_put(b, bytes, n);
}

static void st_buf_json_string(st_buf *b, const char *s) {
  ganfw_json_string(s, st_buf_put_json, b);
}

static int st_cmp_wentry(const void *a, const void *b) {
  const st_wentry *const *x = a, *const *y = b;
  int32_t sx = st_dtypes[(*x)->dtype].size, sy = st_dtypes[(*y)->dtype].size;
  if (sx != sy) return sx > sy ? -1 : 1;
  return *x < *y ? -1 : (*x > *y); /* insertion order among equal element sizes */
}

/* The file: the header's length (u64 little-endian), the header, the tensors' bytes in
 * the header's order. Write errors show at the atomic writer's flush. */
typedef struct {
  const st_buf *h;
  st_wentry **order;
  int64_t count;
} st_file_job;

static ganfw_status st_write_file(FILE *f, void *ud) {
  const st_file_job *j = ud;
  unsigned char len8[8];
  uint64_t hl = (uint64_t)j->h->len;
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(hl >> (8 * i));
  fwrite(len8, 1, 8, f);
  fwrite(j->h->p, 1, j->h->len, f);
  for (int64_t i = 0; i < j->count && !ferror(f); i++)
    if (j->order[i]->nbytes > 0) /* an empty tensor's data may be NULL */
      fwrite(j->order[i]->data, 1, (size_t)j->order[i]->nbytes, f);
  return GANFW_OK;
}

ganfw_status ganfw_st_writer_write(ganfw_st_writer *w, const char *path) {
  if (!w || !path)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_st_writer_write: NULL argument");
  st_wentry **order = malloc((size_t)(w->count ? w->count : 1) * sizeof *order);
  if (!order) return ganfw_error_set(GANFW_ERR_OOM, "%s: out of memory", path);
  for (int64_t i = 0; i < w->count; i++) order[i] = &w->entries[i];
  if (w->count > 0) qsort(order, (size_t)w->count, sizeof *order, st_cmp_wentry);

  st_buf h = {0};
  char num[64];
  st_buf_puts(&h, "{");
  int first = 1;
  if (w->meta_count > 0) {
    st_buf_puts(&h, "\"__metadata__\":{");
    for (int64_t i = 0; i < w->meta_count; i++) {
      if (i) st_buf_puts(&h, ",");
      st_buf_json_string(&h, w->meta_keys[i]);
      st_buf_puts(&h, ":");
      st_buf_json_string(&h, w->meta_values[i]);
    }
    st_buf_puts(&h, "}");
    first = 0;
  }
  int64_t off = 0;
  for (int64_t i = 0; i < w->count; i++) {
    const st_wentry *e = order[i];
    if (!first) st_buf_puts(&h, ",");
    first = 0;
    st_buf_json_string(&h, e->name);
    st_buf_puts(&h, ":{\"dtype\":\"");
    st_buf_puts(&h, st_dtypes[e->dtype].name);
    st_buf_puts(&h, "\",\"shape\":[");
    for (int32_t d = 0; d < e->ndim; d++) {
      snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)e->shape[d]);
      st_buf_puts(&h, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%lld,%lld]}", (long long)off,
             (long long)(off + e->nbytes));
    st_buf_puts(&h, num);
    off += e->nbytes;
  }
  st_buf_puts(&h, "}");
  while (!h.oom && h.len % 8 != 0) st_buf_puts(&h, " ");
  if (h.oom) {
    free(h.p);
    free(order);
    return ganfw_error_set(GANFW_ERR_OOM, "%s: out of memory building the header", path);
  }
  if (h.len > GANFW_ST_MAX_HEADER) {
    free(h.p);
    free(order);
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: safetensors header of %zu bytes exceeds the %d-byte limit", path,
                           h.len, GANFW_ST_MAX_HEADER);
  }

  st_file_job job = {&h, order, w->count};
  ganfw_status st = ganfw_file_write_atomic(path, st_write_file, &job);
  free(h.p);
  free(order);
  return st;
}
