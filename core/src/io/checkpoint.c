/* Checkpoints (see checkpoint.h): the tensors of nets and optimizers as one safetensors
 * file with the run's position as metadata (read and checked in checkpoint_meta.c).
 * Metadata "crc32" is zlib's crc32 of the data
 * section (all tensor bytes in file order); "header_crc32" covers what the header says
 * (metadata, names, dtypes, shapes, order), so any damage is refused before a load. */
#include "io/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/ctx.h"
#include "base/error.h"
#include "base/log.h"
#include "nn/layer.h" /* defines: ganfw_mask_install, ganfw_mask_remove, ganfw_layer_mask */
#include "nn/net.h"
#include "io/checkpoint_meta.h"
#include "io/safetensors.h"
#include "runtime/tensor.h"

#define CK_NAMES_SHOWN 3 /* tensor names listed in a message before "..." */

/* --- what a set of nets saves ------------------------------------------------------------ */
typedef struct ck_item {
  char *name;           /* the name in the file; owned */
  ganfw_tensor *tensor; /* a parameter, f32 buffer or optimizer state; or NULL */
  int64_t *counter;     /* num_batches_tracked (I64 scalar); or NULL */
  const void *host;     /* save: the bytes written */
  int64_t nbytes;
  int32_t elem_size;
} ck_item;

typedef struct ck_items {
  ck_item *v;
  int64_t n, cap;
  ck_item **by_name; /* sorted by name */
} ck_items;

static void ck_items_free(ck_items *it) {
  for (int64_t i = 0; i < it->n; i++) free(it->v[i].name);
  free(it->v);
  free(it->by_name);
  memset(it, 0, sizeof *it);
}

static const char *ck_prefix(const ganfw_ckpt_net *cn) {
  return cn->prefix ? cn->prefix : ganfw_net_name(cn->net);
}

/* "<a>.<b>.<c>" skipping empty parts; NULL when out of memory. */
static char *ck_join3(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + 3;
  char *s = malloc(n);
  if (!s) return NULL;
  s[0] = '\0';
  const char *parts[3] = {a, b, c};
  for (int i = 0; i < 3; i++) {
    if (!parts[i][0]) continue;
    if (s[0]) strcat(s, ".");
    strcat(s, parts[i]);
  }
  return s;
}

static ganfw_status ck_items_add(ck_items *it, const char *scope, const char *prefix,
                                 const char *name, ganfw_tensor *t, int64_t *counter) {
  if (it->n == it->cap) {
    int64_t cap = it->cap ? 2 * it->cap : 64;
    ck_item *v = realloc(it->v, (size_t)cap * sizeof *v);
    if (!v) return ganfw_error_set(GANFW_ERR_OOM, "checkpoint: out of host memory");
    it->v = v;
    it->cap = cap;
  }
  ck_item *e = &it->v[it->n];
  memset(e, 0, sizeof *e);
  if (!(e->name = ck_join3(scope, prefix, name)))
    return ganfw_error_set(GANFW_ERR_OOM, "checkpoint: out of host memory");
  e->tensor = t;
  e->counter = counter;
  e->elem_size = counter ? 8 : (int32_t)ganfw_dtype_size(t->dtype);
  e->nbytes = counter ? 8 : t->nbytes;
  it->n++;
  return GANFW_OK;
}

static int ck_cmp_item_name(const void *a, const void *b) {
  const ck_item *const *x = a, *const *y = b;
  return strcmp((*x)->name, (*y)->name);
}

/* The tensors of nets[0..n) (with optimizer state when `optim`), sorted by name into
 * it->by_name; GANFW_ERR_INVALID_ARG when two share a name. */
static ganfw_status ck_collect(const ganfw_ckpt_net *nets, int32_t n, int32_t optim, ck_items *it) {
  memset(it, 0, sizeof *it);
  if (n < 0 || (n > 0 && !nets))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "checkpoint: bad list of nets");
  ganfw_status st = GANFW_OK;
  for (int32_t k = 0; k < n && st == GANFW_OK; k++) {
    const ganfw_ckpt_net *cn = &nets[k];
    if (!cn->net) {
      st = ganfw_error_set(GANFW_ERR_INVALID_ARG, "checkpoint: net %d is NULL", k);
      break;
    }
    const char *p = ck_prefix(cn);
    int64_t np = ganfw_net_param_count(cn->net);
    for (int64_t i = 0; i < np && st == GANFW_OK; i++) {
      ganfw_param_info info = {.struct_size = sizeof info};
      st = ganfw_net_param_info(cn->net, i, &info);
      if (st == GANFW_OK) st = ck_items_add(it, "", p, info.name, info.value, NULL);
    }
    ganfw_net_buffer b;
    for (int64_t i = 0; st == GANFW_OK && ganfw_net_buffer_at(cn->net, i, &b); i++)
      st = ck_items_add(it, "", p, b.name, b.tensor, b.tensor ? NULL : b.counter);
    if (optim && cn->optim_vt && cn->optim_vt->state_tensor) {
      const char *sname = NULL;
      ganfw_tensor *t;
      for (int64_t i = 0;
           st == GANFW_OK && (t = cn->optim_vt->state_tensor(cn->optim_self, i, &sname)) != NULL;
           i++)
        st = ck_items_add(it, "optim", p, sname ? sname : "", t, NULL);
    }
    for (int64_t i = 0; optim && i < cn->n_extra && st == GANFW_OK; i++)
      st = ck_items_add(it, "", cn->extra_prefix, cn->extra_names[i], cn->extra[i], NULL);
  }
  if (st == GANFW_OK) {
    it->by_name = malloc((size_t)(it->n ? it->n : 1) * sizeof *it->by_name);
    if (!it->by_name) st = ganfw_error_set(GANFW_ERR_OOM, "checkpoint: out of host memory");
  }
  if (st == GANFW_OK) {
    for (int64_t i = 0; i < it->n; i++) it->by_name[i] = &it->v[i];
    if (it->n) qsort(it->by_name, (size_t)it->n, sizeof *it->by_name, ck_cmp_item_name);
    for (int64_t i = 1; i < it->n && st == GANFW_OK; i++)
      if (strcmp(it->by_name[i - 1]->name, it->by_name[i]->name) == 0)
        st = ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "checkpoint: two tensors are named \"%s\" (give the nets distinct "
                             "names or prefixes)",
                             it->by_name[i]->name);
  }
  if (st != GANFW_OK) ck_items_free(it);
  return st;
}

static ck_item *ck_items_find(const ck_items *it, const char *name) {
  int64_t lo = 0, hi = it->n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    int c = strcmp(it->by_name[mid]->name, name);
    if (c == 0) return it->by_name[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* --- saving ------------------------------------------------------------------------------ */
static int ck_cmp_elem_size(const void *a, const void *b) {
  const ck_item *const *x = a, *const *y = b;
  if ((*x)->elem_size != (*y)->elem_size) return (*x)->elem_size > (*y)->elem_size ? -1 : 1;
  return *x < *y ? -1 : (*x > *y); /* stable: collection order */
}

static ganfw_status ck_check_extras(const ganfw_ckpt_meta *meta) {
  if (meta->n_extra < 0 || (meta->n_extra > 0 && (!meta->extra_keys || !meta->extra_values)))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "checkpoint: bad extra metadata arrays");
  for (int32_t i = 0; i < meta->n_extra; i++) {
    const char *k = meta->extra_keys[i];
    if (!k || !k[0] || !meta->extra_values[i])
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "checkpoint: extra metadata %d has an empty key or a NULL value", i);
    if (ganfw_ckpt_key_reserved(k))
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "checkpoint: extra metadata key \"%s\" is reserved by the "
                             "checkpoint format; choose another name",
                             k);
    for (int32_t j = 0; j < i; j++)
      if (strcmp(meta->extra_keys[j], k) == 0)
        return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                               "checkpoint: extra metadata key \"%s\" is given twice", k);
  }
  return GANFW_OK;
}

/* Appends (key, copy of value) taking ownership of key; -1 when out of memory. */
static int ck_meta_push(char **keys, char **values, int64_t *n, char *key, const char *value) {
  keys[*n] = key;
  values[*n] = strdup(value);
  (*n)++;
  return key && values[*n - 1] ? 0 : -1;
}

/* What one save holds until the file is written. */
typedef struct ck_save {
  ck_items it;
  ck_item **order;       /* the items in file order */
  void **staged;         /* host copies of device tensors, by item (NULL: read in place) */
  ganfw_ckpt_desc *desc; /* the header's tensors, in file order */
  char **keys, **values; /* the metadata, owned: fixed keys, optimizer steps, extras */
  int64_t nmeta;
  ganfw_st_writer *w;
} ck_save;

static void ck_save_free(ck_save *s) {
  ganfw_st_writer_destroy(s->w);
  for (int64_t i = 0; s->staged && i < s->it.n; i++) free(s->staged[i]);
  for (int64_t i = 0; s->keys && i < s->nmeta; i++) free(s->keys[i]);
  for (int64_t i = 0; s->values && i < s->nmeta; i++) free(s->values[i]);
  free(s->keys);
  free(s->values);
  free(s->staged);
  free(s->order);
  free(s->desc);
  ck_items_free(&s->it);
}

static ganfw_status ck_save_oom(const char *path) {
  return ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory saving a checkpoint", path);
}

/* The arrays of a save of s->it's items and `n_meta_max` metadata entries, and its writer. */
static ganfw_status ck_save_alloc(const char *path, ck_save *s, int64_t n_meta_max) {
  const size_t n = (size_t)(s->it.n ? s->it.n : 1);
  s->order = malloc(n * sizeof *s->order);
  s->staged = calloc(n, sizeof *s->staged);
  s->desc = malloc(n * sizeof *s->desc);
  s->keys = calloc((size_t)n_meta_max, sizeof *s->keys);
  s->values = calloc((size_t)n_meta_max, sizeof *s->values);
  s->w = ganfw_st_writer_create();
  if (!s->order || !s->staged || !s->desc || !s->keys || !s->values || !s->w)
    return ck_save_oom(path);
  return GANFW_OK;
}

/* Host bytes of every tensor: CPU tensors are read in place, device ones staged. */
static ganfw_status ck_stage(const char *path, ck_save *s) {
  for (int64_t i = 0; i < s->it.n; i++) {
    ck_item *e = &s->it.v[i];
    if (e->counter) {
      e->host = e->counter;
    } else if (e->tensor->device == GANFW_DEVICE_CPU || e->nbytes == 0) {
      e->host = e->tensor->data;
    } else {
      if (!(s->staged[i] = malloc((size_t)e->nbytes)))
        return ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory staging %s (%lld bytes)",
                               path, e->name, (long long)e->nbytes);
      ganfw_status st = ganfw_tensor_to_host(e->tensor, s->staged[i], e->nbytes);
      e->host = s->staged[i];
      if (st != GANFW_OK) return st;
    }
  }
  return GANFW_OK;
}

/* Adds every tensor to the writer in file order, records how the header describes it and
 * the crc32 of the data section. */
static ganfw_status ck_add_tensors(ck_save *s, uint32_t *data_crc) {
  /* The writer lays data out by decreasing element size, in the order added among equal
   * sizes; adding in that order makes `order` the file order the crc is computed in. */
  for (int64_t i = 0; i < s->it.n; i++) s->order[i] = &s->it.v[i];
  if (s->it.n) qsort(s->order, (size_t)s->it.n, sizeof *s->order, ck_cmp_elem_size);
  uint32_t crc = 0;
  static const int64_t scalar_shape[1] = {0};
  for (int64_t i = 0; i < s->it.n; i++) {
    const ck_item *e = s->order[i];
    crc = ganfw_ckpt_crc_bytes(crc, e->host, e->nbytes);
    ganfw_ckpt_desc *d = &s->desc[i];
    d->name = e->name;
    d->dtype = e->counter ? "I64" : ganfw_st_dtype_name(e->tensor->dtype);
    d->ndim = e->counter ? 0 : e->tensor->ndim;
    d->shape = e->counter ? scalar_shape : e->tensor->shape;
    if (!d->dtype)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG, "checkpoint: tensor %s has unknown dtype %d",
                             e->name, (int)e->tensor->dtype);
    ganfw_status st =
        e->counter ? ganfw_st_writer_add_raw(s->w, e->name, "I64", 0, NULL, e->host)
                   : ganfw_st_writer_add_borrowed(s->w, e->name, e->tensor->dtype, e->tensor->ndim,
                                                  e->tensor->shape, e->host);
    if (st != GANFW_OK) return st;
  }
  *data_crc = crc;
  return GANFW_OK;
}

/* The metadata in the order it is written: format, the run's position, each optimizer's
 * step, the extras. */
static ganfw_status ck_collect_meta(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                    const ganfw_ckpt_meta *meta, ck_save *s) {
  char num[32];
  int bad = ck_meta_push(s->keys, s->values, &s->nmeta, strdup("format"), GANFW_CKPT_FORMAT);
  snprintf(num, sizeof num, "%lld", (long long)meta->step);
  bad |= ck_meta_push(s->keys, s->values, &s->nmeta, strdup("step"), num);
  snprintf(num, sizeof num, "%lld", (long long)meta->epoch);
  bad |= ck_meta_push(s->keys, s->values, &s->nmeta, strdup("epoch"), num);
  snprintf(num, sizeof num, "%lld", (long long)meta->loader_position);
  bad |= ck_meta_push(s->keys, s->values, &s->nmeta, strdup("loader_position"), num);
  snprintf(num, sizeof num, "%llu", (unsigned long long)meta->seed);
  bad |= ck_meta_push(s->keys, s->values, &s->nmeta, strdup("seed"), num);
  snprintf(num, sizeof num, "%llu", (unsigned long long)meta->rng_offset);
  bad |= ck_meta_push(s->keys, s->values, &s->nmeta, strdup("rng_offset"), num);
  for (int32_t k = 0; k < n; k++) {
    if (!nets[k].optim_vt || !nets[k].optim_vt->get_step) continue;
    snprintf(num, sizeof num, "%lld", (long long)nets[k].optim_vt->get_step(nets[k].optim_self));
    bad |= ck_meta_push(s->keys, s->values, &s->nmeta,
                        ck_join3("optim", ck_prefix(&nets[k]), "step"), num);
  }
  for (int32_t i = 0; i < meta->n_extra; i++)
    bad |= ck_meta_push(s->keys, s->values, &s->nmeta, strdup(meta->extra_keys[i]),
                        meta->extra_values[i]);
  return bad ? ck_save_oom(path) : GANFW_OK;
}

/* The metadata into the writer, then the crc32s of the data and of the header. */
static ganfw_status ck_write_meta(const char *path, ck_save *s, uint32_t data_crc) {
  ganfw_status st;
  for (int64_t i = 0; i < s->nmeta; i++)
    if ((st = ganfw_st_writer_metadata(s->w, s->keys[i], s->values[i])) != GANFW_OK) return st;
  int64_t hcrc = ganfw_ckpt_header_crc((const char *const *)s->keys, (const char *const *)s->values,
                                       s->nmeta, s->desc, s->it.n);
  if (hcrc < 0) return ck_save_oom(path);
  char hex[9];
  ganfw_ckpt_crc_format((int64_t)data_crc, hex);
  if ((st = ganfw_st_writer_metadata(s->w, "crc32", hex)) != GANFW_OK) return st;
  ganfw_ckpt_crc_format(hcrc, hex);
  return ganfw_st_writer_metadata(s->w, "header_crc32", hex);
}

ganfw_status ganfw_checkpoint_save(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                   const ganfw_ckpt_meta *meta) {
  if (!path || !meta)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_checkpoint_save: NULL argument");
  ganfw_status st = ck_check_extras(meta);
  if (st != GANFW_OK) return st;
  ck_save s;
  memset(&s, 0, sizeof s);
  if ((st = ck_collect(nets, n, 1, &s.it)) != GANFW_OK) return st;
  /* metadata: the fixed keys, one step per optimizer, the extras, the two crcs */
  uint32_t data_crc = 0;
  if ((st = ck_save_alloc(path, &s, 8 + (int64_t)n + meta->n_extra)) == GANFW_OK &&
      (st = ck_stage(path, &s)) == GANFW_OK && (st = ck_add_tensors(&s, &data_crc)) == GANFW_OK &&
      (st = ck_collect_meta(path, nets, n, meta, &s)) == GANFW_OK &&
      (st = ck_write_meta(path, &s, data_crc)) == GANFW_OK)
    st = ganfw_st_writer_write(s.w, path);
  ck_save_free(&s);
  return st;
}

/* --- loading ----------------------------------------------------------------------------- */
/* Opens `path`, rewording the reader's "corrupt safetensors file" as a checkpoint error. */
static ganfw_status ck_open(const char *path, ganfw_st_file **f) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return ganfw_error_set(GANFW_ERR_IO,
                           "%s: is a directory, not a checkpoint file: name one of its "
                           "step_NNNNNNNN.safetensors files (train.resume: latest takes the "
                           "newest in the run's checkpoints/)",
                           path);
  ganfw_status st = ganfw_st_open(path, f);
  if (st == GANFW_OK) return st;
  const char *msg = ganfw_error_message();
  const char *tag = "corrupt safetensors file: ";
  const char *why = strstr(msg, tag);
  if (st == GANFW_ERR_IO && why) {
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", why + strlen(tag));
    return ganfw_error_set(GANFW_ERR_IO,
                           "%s: corrupt or truncated checkpoint: %s (delete it to resume from an "
                           "earlier one)",
                           path, copy);
  }
  return st;
}

static void ck_shape_str(char *buf, size_t n, int32_t ndim, const int64_t *shape) {
  size_t len = (size_t)snprintf(buf, n, "[");
  for (int32_t d = 0; d < ndim && len < n; d++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? "," : "", (long long)shape[d]);
  if (len < n) snprintf(buf + len, n - len, "]");
}

/* A list of up to CK_NAMES_SHOWN names, then "... (N in all)". */
typedef struct ck_names {
  char buf[512];
  int64_t count;
} ck_names;

static void ck_names_add(ck_names *l, const char *name) {
  size_t len = strlen(l->buf);
  if (l->count < CK_NAMES_SHOWN)
    snprintf(l->buf + len, sizeof l->buf - len, "%s%.120s", l->count ? ", " : "", name);
  else if (l->count == CK_NAMES_SHOWN)
    snprintf(l->buf + len, sizeof l->buf - len, ", ...");
  l->count++;
}

static const char *ck_names_str(ck_names *l) {
  if (l->count > CK_NAMES_SHOWN) {
    size_t len = strlen(l->buf);
    snprintf(l->buf + len, sizeof l->buf - len, " (%lld in all)", (long long)l->count);
  }
  return l->buf;
}

/* 1 when the file is a ganfw checkpoint (its "format" is ours): "optim.*" is then optimizer
 * state and the crc32s are required. */
static int32_t ck_is_ganfw(const ganfw_st_file *f) {
  const char *format = ganfw_st_metadata(f, "format");
  return format && strcmp(format, GANFW_CKPT_FORMAT) == 0;
}

/* 1 when the file holds a tensor of one of the items' names. */
static int ck_any_found(const ganfw_st_file *f, const ck_items *it) {
  for (int64_t i = 0; i < it->n; i++)
    if (ganfw_st_find(f, it->v[i].name)) return 1;
  return 0;
}

/* 1 when the file tensor t has the item's dtype and shape. */
static int ck_same_kind(const ganfw_st_tensor *t, const ck_item *e) {
  const int32_t ndim = e->counter ? 0 : e->tensor->ndim;
  if (t->ndim != ndim ||
      strcmp(t->dtype_name, e->counter ? "I64" : ganfw_st_dtype_name(e->tensor->dtype)) != 0)
    return 0;
  for (int32_t d = 0; d < ndim; d++)
    if (t->shape[d] != e->tensor->shape[d]) return 0;
  return 1;
}

/* 1 when the file holds every item under its name, with its dtype and shape. */
static int ck_all_match(const ganfw_st_file *f, const ck_items *it) {
  for (int64_t i = 0; i < it->n; i++) {
    const ganfw_st_tensor *t = ganfw_st_find(f, it->v[i].name);
    if (!t || !ck_same_kind(t, &it->v[i])) return 0;
  }
  return it->n > 0;
}

#define CK_MAX_PICK 16

/* A ganfw checkpoint of several nets (a trainer's run: "teacher.", "student.") loaded into
 * one net that finds none of its own names there: into `prefix` the name of the one net of
 * the file whose tensors are this net's, every name, dtype and shape ("" when none is). Two
 * or more that fit are an error naming them: the file does not say which is meant. */
static ganfw_status ck_pick_net(const char *path, const ganfw_st_file *f, const ganfw_ckpt_net *net,
                                char *prefix, size_t cap) {
  char seen[CK_MAX_PICK][64], fit[512] = "";
  int32_t n_seen = 0, n_fit = 0;
  prefix[0] = '\0';
  for (int64_t i = 0; i < ganfw_st_count(f) && n_seen < CK_MAX_PICK; i++) {
    const char *name = ganfw_st_at(f, i)->name, *dot = strchr(name, '.');
    if (!dot || dot == name || (size_t)(dot - name) >= sizeof seen[0] ||
        strncmp(name, "optim.", 6) == 0)
      continue;
    int known = 0;
    for (int32_t k = 0; k < n_seen && !known; k++)
      known = strlen(seen[k]) == (size_t)(dot - name) && !strncmp(seen[k], name, dot - name);
    if (known) continue;
    snprintf(seen[n_seen], sizeof seen[0], "%.*s", (int)(dot - name), name);
    ganfw_ckpt_net one = *net;
    one.prefix = seen[n_seen++];
    ck_items it;
    ganfw_status st = ck_collect(&one, 1, 0, &it);
    const int match = st == GANFW_OK && ck_all_match(f, &it);
    ck_items_free(&it);
    if (st != GANFW_OK) return st;
    if (!match) continue;
    if (n_fit++ == 0) snprintf(prefix, cap, "%s", one.prefix);
    const size_t len = strlen(fit);
    snprintf(fit + len, sizeof fit - len, "%s'%s'", len ? ", " : "", one.prefix);
  }
  if (n_fit <= 1) return GANFW_OK;
  prefix[0] = '\0';
  return ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s: %d of the file's nets fit this model (%s) and the file does not "
                         "say which is meant; load it with the config that trained it (its "
                         "model.nets)",
                         path, (int)n_fit, fit);
}

/* 1 when `name` is "<layer>.bias" and the items hold "<layer>.weight": a bias the layer
 * was built without. */
static int ck_is_missing_bias(const ck_items *it, const char *name) {
  size_t len = strlen(name);
  if (len <= 5 || strcmp(name + len - 5, ".bias") != 0 || len > 400) return 0;
  char weight[420];
  snprintf(weight, sizeof weight, "%.*s.weight", (int)(len - 5), name);
  return ck_items_find(it, weight) != NULL;
}

/* 1 when the file tensor `name` belongs to one of the nets for a weights-only load. */
static int ck_in_scope(const ganfw_ckpt_net *nets, int32_t n, const char *name, int32_t is_ckpt) {
  if (is_ckpt && strncmp(name, "optim.", 6) == 0) return 0;
  for (int32_t k = 0; k < n; k++) {
    const char *p = ck_prefix(&nets[k]);
    size_t pl = strlen(p);
    if (pl == 0 || (strncmp(name, p, pl) == 0 && name[pl] == '.')) return 1;
  }
  return 0;
}

/* Matches the file against the items: every mismatch of shape or dtype is an error (the
 * first one named), missing and unexpected tensors are errors unless allowed. `file_of`
 * gets the file tensor of each item (NULL when missing). */
static ganfw_status ck_match(const char *path, const ganfw_st_file *f, const ck_items *it,
                             const ganfw_ckpt_net *nets, int32_t n, int32_t weights_only,
                             int32_t flags, const ganfw_st_tensor **file_of,
                             ganfw_ckpt_report *report) {
  ck_names missing = {{0}, 0}, unexpected = {{0}, 0};
  int64_t mismatched = 0, loaded = 0;
  char first[1024] = "";
  for (int64_t i = 0; i < it->n; i++) {
    const ck_item *e = &it->v[i];
    const ganfw_st_tensor *t = ganfw_st_find(f, e->name);
    file_of[i] = t;
    if (!t) {
      ck_names_add(&missing, e->name);
      continue;
    }
    if (ck_same_kind(t, e)) {
      loaded++;
      continue;
    }
    if (mismatched++ == 0) {
      const char *dt = e->counter ? "I64" : ganfw_st_dtype_name(e->tensor->dtype);
      const int32_t ndim = e->counter ? 0 : e->tensor->ndim;
      const int64_t *shape = e->counter ? NULL : e->tensor->shape;
      char a[160], b[160];
      ck_shape_str(a, sizeof a, t->ndim, t->shape);
      ck_shape_str(b, sizeof b, ndim, shape);
      snprintf(first, sizeof first, "%.200s is %s %s in the file, %s %s here", e->name,
               t->dtype_name, a, dt, b);
    }
  }
  int32_t is_ckpt = ck_is_ganfw(f);
  char no_bias[300] = "";
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    if (weights_only && !ck_in_scope(nets, n, t->name, is_ckpt)) continue;
    if (ck_items_find(it, t->name)) continue;
    ck_names_add(&unexpected, t->name);
    if (!no_bias[0] && ck_is_missing_bias(it, t->name))
      snprintf(no_bias, sizeof no_bias,
               "; %.*s has no bias in this model (a conv followed by BatchNorm is built "
               "without one): build the PyTorch layer with bias=False, or fold the bias into "
               "the BatchNorm's running_mean (subtract it) and drop it",
               (int)(strlen(t->name) - 5), t->name);
  }
  if (report) {
    report->loaded = loaded;
    report->missing = missing.count;
    report->unexpected = unexpected.count;
    report->mismatched = mismatched;
  }
  const char *hint = "check the model settings (e.g. model.ngf, model.ndf, model.nz, "
                     "model.image_size, model.blocks, dropout, batchnorm, optim) against the "
                     "run that wrote it";
  if (mismatched)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: checkpoint does not match this model: %s (%lld tensors differ, "
                           "%lld missing, %lld unexpected; %s)",
                           path, first, (long long)mismatched, (long long)missing.count,
                           (long long)unexpected.count, hint);
  if (weights_only && loaded == 0 && it->n > 0) {
    const char *p = ck_prefix(&nets[0]);
    return ganfw_error_set(
        GANFW_ERR_CONFIG,
        "%s: no tensor of the file matches the model (it expects names like "
        "\"%.120s\"%s%s%s; the file holds %lld tensors%s%.120s%s)",
        path, it->v[0].name, p[0] ? ", under the prefix \"" : "", p, p[0] ? ".\"" : "",
        (long long)ganfw_st_count(f), ganfw_st_count(f) ? " such as \"" : "",
        ganfw_st_count(f) ? ganfw_st_at(f, 0)->name : "", ganfw_st_count(f) ? "\"" : "");
  }
  /* Both sides in one message, as load_state_dict's "Missing key(s)" / "Unexpected key(s)":
   * a renumbered layer shows up as one of each. */
  const int refuse_missing = missing.count && !(flags & GANFW_CKPT_ALLOW_MISSING);
  const int refuse_unexpected = unexpected.count && !(flags & GANFW_CKPT_ALLOW_UNEXPECTED);
  if (refuse_missing || refuse_unexpected) {
    char what[1200];
    int len = 0;
    if (missing.count)
      len = snprintf(what, sizeof what, "%s %s missing from the file", ck_names_str(&missing),
                     missing.count > 1 ? "are" : "is");
    if (unexpected.count)
      snprintf(what + len, sizeof what - (size_t)len, "%sthe file holds %s, which this model lacks",
               len ? "; " : "", ck_names_str(&unexpected));
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: checkpoint does not match this model: %s (%s%s)",
                           path, what, hint, no_bias);
  }
  if (flags & GANFW_CKPT_NAMES_ONLY) return GANFW_OK; /* the load that reads them says it */
  if (missing.count)
    ganfw_log(GANFW_LOG_WARN, "%s: not in the file, keeping their values: %s", path,
              ck_names_str(&missing));
  if (unexpected.count)
    ganfw_log(GANFW_LOG_WARN, "%s: ignored, not in the model: %s", path, ck_names_str(&unexpected));
  return GANFW_OK;
}

/* The first element of t that is NaN or inf (f32, f16, bf16; other dtypes hold none), or
 * -1. *nan says which. */
static int64_t ck_first_nonfinite(const ganfw_st_tensor *t, int *nan) {
  const int64_t n = t->dtype == GANFW_DTYPE_F32                                   ? t->nbytes / 4
                    : t->dtype == GANFW_DTYPE_F16 || t->dtype == GANFW_DTYPE_BF16 ? t->nbytes / 2
                                                                                  : 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t exp_all, mant;
    if (t->dtype == GANFW_DTYPE_F32) {
      uint32_t u;
      memcpy(&u, (const char *)t->data + 4 * i, 4);
      exp_all = (u & 0x7f800000u) == 0x7f800000u;
      mant = u & 0x007fffffu;
    } else {
      uint16_t u;
      memcpy(&u, (const char *)t->data + 2 * i, 2);
      const uint16_t em = t->dtype == GANFW_DTYPE_F16 ? 0x7c00u : 0x7f80u;
      exp_all = (u & em) == em;
      mant = u & (uint16_t) ~(em | 0x8000u);
    }
    if (exp_all) {
      *nan = mant != 0;
      return i;
    }
  }
  return -1;
}

/* Weights, buffers and optimizer state must be finite: a NaN or inf loaded would only show
 * later as a diverged step blamed on the learning rate. Refused naming the file and the
 * first tensor, before any net changes. */
static ganfw_status ck_check_finite(const char *path, const ck_items *it,
                                    const ganfw_st_tensor **file_of) {
  for (int64_t i = 0; i < it->n; i++) {
    const ganfw_st_tensor *t = file_of[i];
    if (!t || it->v[i].counter) continue;
    int nan = 0;
    const int64_t at = ck_first_nonfinite(t, &nan);
    if (at >= 0)
      return ganfw_error_set(GANFW_ERR_NUMERIC,
                             "%s: tensor '%s' holds %s (element %lld): a file of non-finite "
                             "weights is refused; take an earlier checkpoint, or retrain (was "
                             "it written from a run that diverged?)",
                             path, t->name, nan ? "a NaN" : "an inf", (long long)at);
  }
  return GANFW_OK;
}

/* --- pruning masks (nn/layers/mask.c) ------------------------------------------------------
 * A file of a pruned model holds "<layer>.weight_orig" and "<layer>.weight_mask" where the
 * unpruned model has "<layer>.weight" (torch.nn.utils.prune's state_dict, or a ganfw run with
 * prune:): such a layer gets an all-ones mask before the names are matched, so that the load
 * fills weight_orig and the mask. A load that fails afterwards removes those masks again
 * (exact: weight_orig * 1). The reverse too: an all-ones mask is removed for a file that
 * holds the plain "<layer>.weight" (the end of a run with prune.remove). */
typedef struct ck_adopted {
  ganfw_layer *l[64];
  int32_t n;
  ganfw_layer *dropped[64]; /* all-ones masks removed for a file of plain weights */
  int32_t n_dropped;
} ck_adopted;

/* 1 when every value of l's mask is 1 (a mask nothing was pruned with yet). */
static int ck_mask_all_ones(const ganfw_layer *l) {
  const ganfw_tensor *m = ganfw_layer_mask(l);
  float *v = malloc((size_t)m->nbytes);
  int ones = v && ganfw_tensor_to_host(m, v, m->nbytes) == GANFW_OK;
  for (int64_t i = 0; ones && i < m->numel; i++) ones = v[i] == 1.0f;
  free(v);
  return ones;
}

/* 1 when the file holds "<p>.<layer>.<suffix>" (p may be ""). */
static int ck_file_has(const ganfw_st_file *f, const char *p, const char *layer,
                       const char *suffix) {
  char *name = ck_join3(p, layer, suffix);
  const int has = name && ganfw_st_find(f, name) != NULL;
  free(name);
  return has;
}

/* `names_only`: no value is read (the meta backend has none): a mask is taken to be all
 * ones, as a mask installed before any pruning is. */
static ganfw_status ck_adopt_masks(const char *path, const ganfw_st_file *f,
                                   const ganfw_ckpt_net *nets, int32_t n, int32_t names_only,
                                   ck_adopted *a) {
  for (int32_t k = 0; k < n; k++) {
    const char *p = ck_prefix(&nets[k]);
    for (int32_t i = 0; i < ganfw_net_layer_count(nets[k].net); i++) {
      ganfw_layer *l = ganfw_net_layer(nets[k].net, i);
      /* the reverse: a model whose masks are all ones (prune: before its first event) and a
       * file of plain weights (a run that ended with prune.remove) */
      if (l->mask.on && ck_file_has(f, p, l->name, "weight") &&
          !ck_file_has(f, p, l->name, "weight_orig") &&
          !ck_file_has(f, p, l->name, "weight_mask") &&
          a->n_dropped < (int32_t)(sizeof a->dropped / sizeof a->dropped[0]) &&
          (names_only || ck_mask_all_ones(l))) {
        ganfw_status st = ganfw_mask_remove(l);
        if (st != GANFW_OK) return st;
        a->dropped[a->n_dropped++] = l;
        continue;
      }
      if (l->mask.on || l->sn.n_power_iterations > 0 || !l->param[0] || !l->param_name[0]) continue;
      const size_t len = strlen(l->param_name[0]);
      if (len < 7 || strcmp(l->param_name[0] + len - 7, ".weight") != 0) continue;
      const int orig = ck_file_has(f, p, l->name, "weight_orig");
      const int mask = ck_file_has(f, p, l->name, "weight_mask");
      if (!orig && !mask) continue;
      if (orig != mask) {
        char *name = ck_join3(p, l->name, orig ? "weight_orig" : "weight_mask");
        ganfw_status st = ganfw_error_set(
            GANFW_ERR_CONFIG,
            "%s: %s is in the file without its %s: a pruned layer is saved as weight_orig and "
            "weight_mask together (torch.nn.utils.prune), an unpruned one as weight",
            path, name ? name : l->name, orig ? "weight_mask" : "weight_orig");
        free(name);
        return st;
      }
      if (a->n == (int32_t)(sizeof a->l / sizeof a->l[0]))
        return ganfw_error_set(GANFW_ERR_CONFIG, "%s: more than %d pruned layers in one load", path,
                               a->n);
      ganfw_status st = ganfw_mask_install(l);
      if (st != GANFW_OK) return ganfw_error_wrap(st, "%s: loading its pruning mask", path);
      a->l[a->n++] = l;
    }
  }
  return GANFW_OK;
}

static void ck_unadopt(ck_adopted *a) {
  for (int32_t i = 0; i < a->n; i++) ganfw_mask_remove(a->l[i]);
  for (int32_t i = 0; i < a->n_dropped; i++) ganfw_mask_install(a->dropped[i]);
  a->n = a->n_dropped = 0;
}

/* Every mask of the nets that the file fills holds only 0 and 1 (checked in the file's
 * bytes, before anything is copied). */
static ganfw_status ck_check_masks(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                   const ck_items *it, const ganfw_st_tensor **file_of) {
  for (int64_t i = 0; i < it->n; i++) {
    const ganfw_st_tensor *t = file_of[i];
    if (!t || !it->v[i].tensor || t->dtype != GANFW_DTYPE_F32) continue;
    int is_mask = 0;
    for (int32_t k = 0; k < n && !is_mask; k++)
      for (int32_t j = 0; j < ganfw_net_layer_count(nets[k].net) && !is_mask; j++)
        is_mask = ganfw_layer_mask(ganfw_net_layer(nets[k].net, j)) == it->v[i].tensor;
    if (!is_mask) continue;
    for (int64_t e = 0; e < t->numel; e++) {
      float v;
      memcpy(&v, (const char *)t->data + 4 * e, 4);
      if (v != 0.0f && v != 1.0f)
        return ganfw_error_set(GANFW_ERR_CONFIG,
                               "%s: %s holds %g at flat index %lld; a pruning mask holds only 0 "
                               "and 1",
                               path, it->v[i].name, (double)v, (long long)e);
    }
  }
  return GANFW_OK;
}

/* Copies the matched tensors in (validation is over). */
static ganfw_status ck_copy_in(const ck_items *it, const ganfw_st_tensor **file_of) {
  for (int64_t i = 0; i < it->n; i++) {
    const ck_item *e = &it->v[i];
    const ganfw_st_tensor *t = file_of[i];
    if (!t) continue;
    if (e->counter) {
      memcpy(e->counter, t->data, 8);
    } else if (t->nbytes > 0) {
      ganfw_status st = ganfw_tensor_from_host(e->tensor, t->data, t->nbytes);
      if (st != GANFW_OK) return ganfw_error_wrap(st, "loading %s", e->name);
    }
  }
  return GANFW_OK;
}

ganfw_status ganfw_checkpoint_resume(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                     const ganfw_ckpt_resume_limits *lim,
                                     ganfw_ckpt_meta **meta_out) {
  if (meta_out) *meta_out = NULL;
  if (!path) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_checkpoint_load: NULL path");
  ganfw_st_file *f = NULL;
  ganfw_status st = ck_open(path, &f);
  if (st != GANFW_OK) return st;
  ck_items it = {0};
  const ganfw_st_tensor **file_of = NULL;
  int64_t *steps = NULL;
  ganfw_ckpt_meta *meta = NULL;
  ck_adopted adopted = {.n = 0};

  if ((st = ganfw_ckpt_meta_read(path, f, &meta)) != GANFW_OK) goto done;
  if (lim && (st = ganfw_ckpt_meta_check_resume(path, meta, lim)) != GANFW_OK) goto done;
  if ((st = ck_adopt_masks(path, f, nets, n, 0, &adopted)) != GANFW_OK) goto done;
  if ((st = ck_collect(nets, n, 1, &it)) != GANFW_OK) goto done;
  file_of = calloc((size_t)(it.n ? it.n : 1), sizeof *file_of);
  steps = calloc((size_t)(n ? n : 1), sizeof *steps);
  if (!file_of || !steps) {
    st = ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory", path);
    goto done;
  }
  if ((st = ck_match(path, f, &it, nets, n, 0, 0, file_of, NULL)) != GANFW_OK) goto done;
  for (int32_t k = 0; k < n; k++) {
    if (!nets[k].optim_vt || !nets[k].optim_vt->set_step) continue;
    if ((st = ganfw_ckpt_optim_step(path, f, ck_prefix(&nets[k]), &steps[k])) != GANFW_OK)
      goto done;
  }

  if ((st = ck_check_finite(path, &it, file_of)) != GANFW_OK) goto done;
  if ((st = ck_check_masks(path, nets, n, &it, file_of)) != GANFW_OK) goto done;
  /* Everything checked: change the nets. */
  if ((st = ck_copy_in(&it, file_of)) != GANFW_OK) goto done;
  for (int32_t k = 0; k < n; k++)
    if (nets[k].optim_vt && nets[k].optim_vt->set_step)
      nets[k].optim_vt->set_step(nets[k].optim_self, steps[k]);
  if (meta_out) {
    *meta_out = meta;
    meta = NULL;
  }
done:
  if (st != GANFW_OK) ck_unadopt(&adopted);
  ganfw_ckpt_meta_free(meta);
  free(steps);
  free(file_of);
  ck_items_free(&it);
  ganfw_st_close(f);
  return st;
}

ganfw_status ganfw_checkpoint_load(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                   ganfw_ckpt_meta **meta_out) {
  return ganfw_checkpoint_resume(path, nets, n, NULL, meta_out);
}

ganfw_status ganfw_checkpoint_load_weights(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                           int32_t flags, ganfw_ckpt_report *report) {
  if (report) memset(report, 0, sizeof *report);
  if (!path)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_checkpoint_load_weights: NULL path");
  ganfw_st_file *f = NULL;
  ganfw_status st = ck_open(path, &f);
  if (st != GANFW_OK) return st;
  ck_items it = {0};
  const ganfw_st_tensor **file_of = NULL;
  ck_adopted adopted = {.n = 0};
  const char *format = ganfw_st_metadata(f, "format");
  if (format && strcmp(format, GANFW_CKPT_FORMAT) != 0 &&
      strcmp(format, GANFW_CKPT_FORMAT_PT) != 0) {
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s: safetensors format \"%.64s\" is not one this ganfw reads: a ganfw "
                         "checkpoint (\"%s\") or a PyTorch state_dict (\"%s\", or no "
                         "\"format\"); convert the weights to PyTorch's layout and save them with "
                         "safetensors.torch.save_file",
                         path, format, GANFW_CKPT_FORMAT, GANFW_CKPT_FORMAT_PT);
    goto done;
  }
  const int32_t names_only = (flags & GANFW_CKPT_NAMES_ONLY) != 0;
  if (!names_only && (st = ganfw_ckpt_verify_crcs(path, f, ck_is_ganfw(f))) != GANFW_OK) goto done;
  if ((st = ck_collect(nets, n, 0, &it)) != GANFW_OK) goto done;
  /* one net none of whose names the file holds: the names it is read under instead, a
   * state_dict's own ("") or one net's of a checkpoint of several (the student of a
   * distill run loaded into the student's model alone) */
  ganfw_ckpt_net bare;
  char picked[64] = "";
  const char *as = NULL;
  if ((flags & GANFW_CKPT_BARE_NAMES) && n == 1 && !ck_any_found(f, &it)) {
    if (!ck_is_ganfw(f))
      as = "";
    else if ((st = ck_pick_net(path, f, &nets[0], picked, sizeof picked)) != GANFW_OK)
      goto done;
    else if (picked[0])
      as = picked;
  }
  if (as) {
    bare = nets[0];
    bare.prefix = as;
    nets = &bare;
    ck_items_free(&it);
    if ((st = ck_collect(nets, n, 0, &it)) != GANFW_OK) goto done;
    if (*as && !names_only)
      ganfw_log(GANFW_LOG_INFO,
                "%s: the net '%s' of the file loaded (its tensors are this "
                "model's)",
                path, as);
  }
  if ((st = ck_adopt_masks(path, f, nets, n, names_only, &adopted)) != GANFW_OK) goto done;
  if (adopted.n || adopted.n_dropped) { /* the masked layers' names changed */
    ck_items_free(&it);
    if ((st = ck_collect(nets, n, 0, &it)) != GANFW_OK) goto done;
  }
  file_of = calloc((size_t)(it.n ? it.n : 1), sizeof *file_of);
  if (!file_of) {
    st = ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory", path);
    goto done;
  }
  if ((st = ck_match(path, f, &it, nets, n, 1, flags, file_of, report)) != GANFW_OK) goto done;
  if (names_only) goto done; /* the nets are built as the load builds them: no values */
  if ((st = ck_check_finite(path, &it, file_of)) != GANFW_OK) goto done;
  if ((st = ck_check_masks(path, nets, n, &it, file_of)) != GANFW_OK) goto done;
  st = ck_copy_in(&it, file_of);
done:
  if (st != GANFW_OK) ck_unadopt(&adopted);
  free(file_of);
  ck_items_free(&it);
  ganfw_st_close(f);
  return st;
}

/* --- files in a checkpoint directory ----------------------------------------------------- */
ganfw_status ganfw_checkpoint_path(const char *dir, int64_t step, char *buf, size_t n) {
  if (!dir || !buf || step < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_checkpoint_path: bad argument");
  int len = snprintf(buf, n, "%s/step_%08lld.safetensors", dir, (long long)step);
  if (len < 0 || (size_t)len >= n) {
    if (n) buf[0] = '\0';
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: checkpoint path longer than %zu bytes", dir,
                           n);
  }
  return GANFW_OK;
}

/* The step of a name "step_<digits>.safetensors", or -1. */
static int64_t ck_name_step(const char *name) {
  static const char head[] = "step_", tail[] = ".safetensors";
  size_t len = strlen(name), hl = sizeof head - 1, tl = sizeof tail - 1;
  if (len <= hl + tl || strncmp(name, head, hl) != 0 || strcmp(name + len - tl, tail) != 0)
    return -1;
  int64_t v = 0;
  for (size_t i = hl; i < len - tl; i++) {
    if (name[i] < '0' || name[i] > '9') return -1;
    if (v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

/* 1 when the file looks like a complete safetensors file: a regular file whose 8-byte
 * header length fits in it. */
static int ck_looks_valid(int dfd, const char *name) {
  int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat sb;
  unsigned char len8[8];
  int ok =
      fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 10 && pread(fd, len8, 8, 0) == 8;
  close(fd);
  if (!ok) return 0;
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | len8[i];
  return hl >= 2 && hl <= (uint64_t)sb.st_size - 8;
}

ganfw_status ganfw_checkpoint_latest(const char *dir, char *buf, size_t n, int64_t *step) {
  if (step) *step = -1;
  if (!dir || !buf || n == 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_checkpoint_latest: bad argument");
  buf[0] = '\0';
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return GANFW_OK;
    return ganfw_error_set(GANFW_ERR_IO, "%s: cannot list checkpoints: %s", dir, strerror(errno));
  }
  int64_t best = -1;
  char best_name[256] = "";
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    int64_t s = ck_name_step(de->d_name);
    if (s < 0 || s < best || strlen(de->d_name) >= sizeof best_name) continue;
    if (s == best && strcmp(de->d_name, best_name) < 0) continue; /* deterministic tie */
    if (!ck_looks_valid(dirfd(d), de->d_name)) continue;
    best = s;
    snprintf(best_name, sizeof best_name, "%s", de->d_name);
  }
  closedir(d);
  if (best < 0) return GANFW_OK;
  int len = snprintf(buf, n, "%s/%s", dir, best_name);
  if (len < 0 || (size_t)len >= n) {
    buf[0] = '\0';
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s/%s: path longer than %zu bytes", dir,
                           best_name, n);
  }
  if (step) *step = best;
  return GANFW_OK;
}
