/* A checkpoint's metadata (see checkpoint_meta.h): the crc32s, the run's position and the
 * extras read and validated from an opened safetensors file, and the checks of a resume. */
#include "io/checkpoint_meta.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/error.h"

/* --- crc32s ------------------------------------------------------------------------------ */
uint32_t ganfw_ckpt_crc_bytes(uint32_t crc, const void *p, int64_t n) {
  const Bytef *b = p;
  uLong c = crc;
  while (n > 0) {
    uInt chunk = n > (1 << 30) ? (uInt)(1 << 30) : (uInt)n;
    c = crc32(c, b, chunk);
    b += chunk;
    n -= chunk;
  }
  return (uint32_t)(c & 0xffffffffUL);
}

static uLong ck_crc_str(uLong crc, const char *s) {
  return crc32(crc, (const Bytef *)s, (uInt)strlen(s) + 1); /* with its NUL */
}

static int ck_is_crc_key(const char *k) {
  return strcmp(k, "crc32") == 0 || strcmp(k, "header_crc32") == 0;
}

typedef struct ck_kv {
  const char *key, *value;
} ck_kv;

static int ck_cmp_kv(const void *a, const void *b) {
  return strcmp(((const ck_kv *)a)->key, ((const ck_kv *)b)->key);
}

int64_t ganfw_ckpt_header_crc(const char *const *keys, const char *const *values, int64_t nmeta,
                              const ganfw_ckpt_desc *t, int64_t nt) {
  ck_kv *kv = malloc((size_t)(nmeta ? nmeta : 1) * sizeof *kv);
  if (!kv) return -1;
  for (int64_t i = 0; i < nmeta; i++) kv[i] = (ck_kv){keys[i], values[i]};
  if (nmeta) qsort(kv, (size_t)nmeta, sizeof *kv, ck_cmp_kv);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (int64_t i = 0; i < nmeta; i++) {
    if (ck_is_crc_key(kv[i].key)) continue;
    crc = ck_crc_str(crc, "M");
    crc = ck_crc_str(crc, kv[i].key);
    crc = ck_crc_str(crc, kv[i].value);
  }
  free(kv);
  for (int64_t i = 0; i < nt; i++) {
    char dims[GANFW_ST_MAX_DIMS * 24 + 1] = "";
    size_t len = 0;
    for (int32_t d = 0; d < t[i].ndim; d++)
      len += (size_t)snprintf(dims + len, sizeof dims - len, "%lld,", (long long)t[i].shape[d]);
    crc = ck_crc_str(crc, "T");
    crc = ck_crc_str(crc, t[i].name);
    crc = ck_crc_str(crc, t[i].dtype);
    crc = ck_crc_str(crc, dims);
  }
  return (int64_t)(crc & 0xffffffffUL);
}

void ganfw_ckpt_crc_format(int64_t crc, char out[9]) {
  snprintf(out, 9, "%08x", (unsigned)(crc & 0xffffffff));
}

/* Parses exactly 8 lowercase hex digits; -1 otherwise. */
static int64_t ck_crc_parse(const char *s) {
  if (!s || strlen(s) != 8) return -1;
  int64_t v = 0;
  for (int i = 0; i < 8; i++) {
    char c = s[i];
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

static ganfw_status ck_corrupt(const char *path, const char *what) {
  return ganfw_error_set(GANFW_ERR_IO,
                         "%s: corrupt or truncated checkpoint: %s (the file was damaged after "
                         "it was written; delete it to resume from an earlier one)",
                         path, what);
}

ganfw_status ganfw_ckpt_verify_crcs(const char *path, const ganfw_st_file *f, int32_t required) {
  const char *hs = ganfw_st_metadata(f, "header_crc32");
  const char *ds = ganfw_st_metadata(f, "crc32");
  char why[256];
  if (required && (!hs || !ds))
    return ck_corrupt(path, !hs ? "its metadata has no \"header_crc32\""
                                : "its metadata has no \"crc32\"");
  int64_t nt = ganfw_st_count(f), nmeta = ganfw_st_metadata_count(f);
  if (hs) {
    int64_t want = ck_crc_parse(hs);
    if (want < 0) {
      snprintf(why, sizeof why, "\"header_crc32\" is \"%.16s\", not 8 hex digits", hs);
      return ck_corrupt(path, why);
    }
    ganfw_ckpt_desc *desc = malloc((size_t)(nt ? nt : 1) * sizeof *desc);
    const char **keys = malloc((size_t)(nmeta ? nmeta : 1) * sizeof *keys);
    const char **vals = malloc((size_t)(nmeta ? nmeta : 1) * sizeof *vals);
    int64_t got = -1;
    if (desc && keys && vals) {
      for (int64_t i = 0; i < nt; i++) {
        const ganfw_st_tensor *t = ganfw_st_at(f, i);
        desc[i] = (ganfw_ckpt_desc){t->name, t->dtype_name, t->ndim, t->shape};
      }
      for (int64_t i = 0; i < nmeta; i++) {
        keys[i] = ganfw_st_metadata_key(f, i);
        vals[i] = ganfw_st_metadata_value(f, i);
      }
      got = ganfw_ckpt_header_crc(keys, vals, nmeta, desc, nt);
    }
    free(desc);
    free(keys);
    free(vals);
    if (got < 0) return ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory", path);
    if (got != want) {
      snprintf(why, sizeof why, "the header's crc32 is %08lx but the file records %s",
               (unsigned long)got, hs);
      return ck_corrupt(path, why);
    }
  }
  if (ds) {
    int64_t want = ck_crc_parse(ds);
    if (want < 0) {
      snprintf(why, sizeof why, "\"crc32\" is \"%.16s\", not 8 hex digits", ds);
      return ck_corrupt(path, why);
    }
    uint32_t crc = 0;
    for (int64_t i = 0; i < nt; i++) {
      const ganfw_st_tensor *t = ganfw_st_at(f, i);
      crc = ganfw_ckpt_crc_bytes(crc, t->data, t->nbytes);
    }
    if ((int64_t)crc != want) {
      snprintf(why, sizeof why, "the data's crc32 is %08lx but the file records %s",
               (unsigned long)crc, ds);
      return ck_corrupt(path, why);
    }
  }
  return GANFW_OK;
}

/* --- fields -------------------------------------------------------------------------------- */
static const char *const ck_reserved[] = {"format", "step",       "epoch", "loader_position",
                                          "seed",   "rng_offset", "crc32", "header_crc32"};

int32_t ganfw_ckpt_key_reserved(const char *k) {
  for (size_t i = 0; i < sizeof ck_reserved / sizeof ck_reserved[0]; i++)
    if (strcmp(k, ck_reserved[i]) == 0) return 1;
  return strncmp(k, "optim.", 6) == 0;
}

/* Strict decimal parses: the whole string, no blanks, in range. 0 on success. */
static int ck_parse_i64(const char *s, int64_t *out) {
  if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9'))) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end) return -1;
  *out = v;
  return 0;
}

static int ck_parse_u64(const char *s, uint64_t *out) {
  if (!s || *s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return -1;
  *out = v;
  return 0;
}

/* A field no ganfw run writes (the crcs matched: it was written so). */
static ganfw_status ck_bad_field(const char *path, const char *field, const char *value,
                                 const char *why) {
  return ganfw_error_set(GANFW_ERR_IO,
                         "%s: corrupt or truncated checkpoint: field %s: %s%.40s%s%s%s (no ganfw "
                         "run writes that; delete the file to resume from an earlier one)",
                         path, field, value ? "\"" : "", value ? value : "missing",
                         value ? "\"" : "", value ? " " : "", value ? why : "");
}

/* The caller's copy of the metadata: one block. */
typedef struct ck_meta_owned {
  ganfw_ckpt_meta pub; /* first: ganfw_ckpt_meta_free casts back */
  char **keys, **values;
} ck_meta_owned;

void ganfw_ckpt_meta_free(ganfw_ckpt_meta *meta) {
  if (!meta) return;
  ck_meta_owned *m = (ck_meta_owned *)meta;
  for (int32_t i = 0; i < meta->n_extra; i++) {
    free(m->keys[i]);
    free(m->values[i]);
  }
  free(m->keys);
  free(m->values);
  free(m);
}

const char *ganfw_ckpt_meta_extra(const ganfw_ckpt_meta *meta, const char *key) {
  if (!meta || !key) return NULL;
  for (int32_t i = 0; i < meta->n_extra; i++)
    if (strcmp(meta->extra_keys[i], key) == 0) return meta->extra_values[i];
  return NULL;
}

static ganfw_status ck_check_format(const char *path, const ganfw_st_file *f) {
  const char *format = ganfw_st_metadata(f, "format");
  if (!format)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: not a ganfw checkpoint (its metadata has no \"format\"); to "
                           "start from weights saved elsewhere use model.init_from",
                           path);
  if (strcmp(format, GANFW_CKPT_FORMAT_PT) == 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: a PyTorch state_dict (format \"pt\"), not a ganfw checkpoint: it "
                           "holds no optimizer state or step to resume from; to start from its "
                           "weights use model.init_from",
                           path);
  if (strcmp(format, GANFW_CKPT_FORMAT) != 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: checkpoint format \"%.64s\" is not one this ganfw reads (\"%s\")",
                           path, format, GANFW_CKPT_FORMAT);
  return GANFW_OK;
}

ganfw_status ganfw_ckpt_meta_read(const char *path, const ganfw_st_file *f, ganfw_ckpt_meta **out) {
  *out = NULL;
  ganfw_status st = ck_check_format(path, f);
  if (st == GANFW_OK) st = ganfw_ckpt_verify_crcs(path, f, 1);
  if (st != GANFW_OK) return st;
  ganfw_ckpt_meta m;
  memset(&m, 0, sizeof m);
  struct {
    const char *key;
    int64_t *i;
    uint64_t *u;
    uint64_t max;
  } fields[] = {{"step", &m.step, NULL, (uint64_t)GANFW_CKPT_MAX_COUNT},
                {"epoch", &m.epoch, NULL, (uint64_t)GANFW_CKPT_MAX_COUNT},
                {"loader_position", &m.loader_position, NULL, (uint64_t)GANFW_CKPT_MAX_COUNT},
                {"seed", NULL, &m.seed, UINT64_MAX},
                {"rng_offset", NULL, &m.rng_offset, GANFW_CKPT_MAX_RNG_OFFSET}};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    const char *v = ganfw_st_metadata(f, fields[i].key);
    int bad = fields[i].i ? ck_parse_i64(v, fields[i].i) : ck_parse_u64(v, fields[i].u);
    if (bad) return ck_bad_field(path, fields[i].key, v, "is not an integer");
    int out_of_range = fields[i].i ? *fields[i].i < 0 || (uint64_t)*fields[i].i > fields[i].max
                                   : *fields[i].u > fields[i].max;
    if (out_of_range) {
      char why[96];
      snprintf(why, sizeof why, "is outside 0..%llu", (unsigned long long)fields[i].max);
      return ck_bad_field(path, fields[i].key, v, why);
    }
  }
  ck_meta_owned *o = calloc(1, sizeof *o);
  int64_t nmeta = ganfw_st_metadata_count(f);
  if (o) {
    o->keys = calloc((size_t)(nmeta ? nmeta : 1), sizeof *o->keys);
    o->values = calloc((size_t)(nmeta ? nmeta : 1), sizeof *o->values);
  }
  if (!o || !o->keys || !o->values) goto oom;
  o->pub = m;
  for (int64_t i = 0; i < nmeta; i++) {
    const char *k = ganfw_st_metadata_key(f, i);
    if (ganfw_ckpt_key_reserved(k)) continue;
    int32_t j = o->pub.n_extra;
    o->keys[j] = strdup(k);
    o->values[j] = strdup(ganfw_st_metadata_value(f, i));
    o->pub.n_extra++;
    if (!o->keys[j] || !o->values[j]) goto oom;
  }
  o->pub.extra_keys = (const char *const *)o->keys;
  o->pub.extra_values = (const char *const *)o->values;
  *out = &o->pub;
  return GANFW_OK;
oom:
  if (o) ganfw_ckpt_meta_free(&o->pub);
  return ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory", path);
}

ganfw_status ganfw_ckpt_optim_step(const char *path, const ganfw_st_file *f, const char *prefix,
                                   int64_t *step) {
  *step = 0;
  char key[320];
  snprintf(key, sizeof key, "optim.%.300s%sstep", prefix, prefix[0] ? "." : "");
  const char *v = ganfw_st_metadata(f, key);
  int64_t s = -1;
  if (!v || ck_parse_i64(v, &s) || s < 0 || s > GANFW_CKPT_MAX_COUNT)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: checkpoint does not match this model: field %s: %s%.40s%s%s (the "
                           "run that wrote it had no optimizer for %s, or another one)",
                           path, key, v ? "\"" : "", v ? v : "missing", v ? "\"" : "",
                           v ? " is not a step count" : "", prefix);
  *step = s;
  return GANFW_OK;
}

/* --- resume checks -------------------------------------------------------------------------- */

/* The extra `key` of m as a whole decimal integer in [lo, hi]: 1 when present (in *out),
 * 0 when absent, -1 (and an error naming the field) otherwise. */
static int ck_extra_int(const char *path, const ganfw_ckpt_meta *m, const char *key, int64_t lo,
                        int64_t hi, int64_t *out) {
  const char *v = ganfw_ckpt_meta_extra(m, key);
  if (!v) return 0;
  if (ck_parse_i64(v, out) || *out < lo || *out > hi) {
    char why[96];
    snprintf(why, sizeof why, "is not an integer from %lld to %lld", (long long)lo, (long long)hi);
    ck_bad_field(path, key, v, why);
    return -1;
  }
  return 1;
}

/* A memory strategy's scalar: a loss scale (a name starting with "scale") finite, > 0 and
 * at most f32's largest; any other (growth tracker, skipped steps) a count. */
static ganfw_status ck_check_strategy_scalar(const char *path, const char *key, const char *v) {
  const char *name = strrchr(key, '.') + 1;
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (!v[0] || *end || errno == ERANGE || !isfinite(x))
    return ck_bad_field(path, key, v, "is not a finite number");
  if (strncmp(name, "scale", 5) == 0) {
    if (!(x > 0 && x <= 3.4028234663852886e38))
      return ck_bad_field(path, key, v,
                          "is not a loss scale (a finite number > 0 that f32 can hold)");
  } else if (!(x >= 0 && x <= 9007199254740992.0 && x == floor(x))) {
    return ck_bad_field(path, key, v, "is not a count (an integer >= 0)");
  }
  return GANFW_OK;
}

ganfw_status ganfw_ckpt_meta_check_resume(const char *path, const ganfw_ckpt_meta *m,
                                          const ganfw_ckpt_resume_limits *lim) {
  if (m->loader_position > lim->data_items)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: field loader_position: %lld is past the data set's %lld items "
                           "(was the checkpoint made with another data set, or data.limit?)",
                           path, (long long)m->loader_position, (long long)lim->data_items);
  static const char *const shape_keys[4] = {"data.channels", "data.height", "data.width",
                                            "data.num_classes"};
  const int64_t run[4] = {lim->channels, lim->height, lim->width, lim->num_classes};
  for (int i = 0; i < 4; i++) {
    int64_t v;
    int got = ck_extra_int(path, m, shape_keys[i], 1, (int64_t)1 << 30, &v);
    if (got < 0) return GANFW_ERR_IO;
    if (got == 1 && run[i] > 0 && v != run[i])
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: field %s: %lld in the checkpoint, %lld in this run's data (the "
                             "data settings, e.g. data.dataset or data.resize, differ from the "
                             "run that wrote it)",
                             path, shape_keys[i], (long long)v, (long long)run[i]);
  }
  for (int32_t i = 0; i < m->n_extra; i++) {
    const char *k = m->extra_keys[i];
    if (strncmp(k, "memory.", 7) != 0) continue;
    const char *dot = strchr(k + 7, '.');
    if (!dot || dot == k + 7 || !dot[1])
      return ck_bad_field(path, k, m->extra_values[i],
                          "is under a key that is not memory.<strategy>.<name>");
    ganfw_status st = ck_check_strategy_scalar(path, k, m->extra_values[i]);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}
