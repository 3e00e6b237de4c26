/* Magnitude pruning (prune.h): masks computed on the host from weight_orig and the mask in
 * place, as torch.nn.utils.prune computes them (L1Unstructured, global_unstructured,
 * LnStructured under a PruningContainer), then copied back into the layer's mask buffer.
 * Weights are [K,C,R,S] (conv2d), [C,K,R,S] (conv_transpose2d) or [OUT,IN] (linear). */
#include "nn/prune.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/suggest.h"
#include "nn/layer.h"
#include "nn/net.h"

static int is_matmul(const ganfw_layer *l) {
  return l->vt == &ganfw_layer_conv2d || l->vt == &ganfw_layer_conv_transpose2d ||
         l->vt == &ganfw_layer_linear;
}

int32_t ganfw_prune_layer_prunable(ganfw_net *net, int32_t i) {
  const ganfw_layer *l = ganfw_net_layer(net, i);
  return l && is_matmul(l) && l->param[0];
}

ganfw_layer *ganfw_prune_find_layer(ganfw_net *net, const char *layer) {
  const char *name = layer ? layer : "";
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (int32_t i = 0; i < ganfw_net_layer_count(net); i++) {
    ganfw_layer *l = ganfw_net_layer(net, i);
    if (strcmp(l->name, name) == 0) return l;
    const size_t d = ganfw_edit_distance(name, l->name);
    if (d < best_d) best_d = d, best = l->name;
  }
  if (best && ganfw_suggest_near(strlen(name), best_d))
    ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s has no layer '%s' (did you mean '%s'?)",
                    ganfw_net_name(net), name, best);
  else
    ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s has no layer '%s'", ganfw_net_name(net), name);
  return NULL;
}

/* The layer, checked to be prunable; NULL with an error. */
static ganfw_layer *prunable(ganfw_net *net, const char *layer) {
  ganfw_layer *l = ganfw_prune_find_layer(net, layer);
  if (l && (!is_matmul(l) || !l->param[0])) {
    ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                      "has no weight to prune; conv2d, conv_transpose2d and linear layers can be "
                      "pruned");
    return NULL;
  }
  return l;
}

/* --- host copies of weight_orig and the mask ---------------------------------------------- */

typedef struct host_weight {
  ganfw_layer *l;
  int64_t n;
  float *w, *m; /* weight_orig, mask (all ones before the layer has one) */
} host_weight;

static void host_weight_free(host_weight *h) {
  free(h->w);
  free(h->m);
  h->w = h->m = NULL;
}

static ganfw_status host_weight_read(ganfw_layer *l, host_weight *h) {
  const ganfw_tensor *w = l->param[0];
  *h = (host_weight){.l = l, .n = w->numel};
  h->w = malloc((size_t)w->numel * sizeof(float));
  h->m = malloc((size_t)w->numel * sizeof(float));
  if (!h->w || !h->m) {
    host_weight_free(h);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory pruning %s", l->qualified);
  }
  ganfw_status st = ganfw_tensor_to_host(w, h->w, w->nbytes);
  const ganfw_tensor *m = ganfw_layer_mask(l);
  if (st == GANFW_OK && m) st = ganfw_tensor_to_host(m, h->m, m->nbytes);
  if (st == GANFW_OK && !m)
    for (int64_t i = 0; i < h->n; i++) h->m[i] = 1.0f;
  if (st != GANFW_OK) {
    host_weight_free(h);
    return ganfw_error_wrap(st, "layer %s: reading the weight to prune", l->qualified);
  }
  return GANFW_OK;
}

/* Installs the layer's mask (when it has none) and copies h->m into it. */
static ganfw_status host_weight_write(host_weight *h) {
  ganfw_status st = ganfw_mask_install(h->l);
  if (st != GANFW_OK) return st;
  ganfw_tensor *m = ganfw_layer_mask(h->l);
  st = ganfw_tensor_from_host(m, h->m, m->nbytes);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "layer %s: writing the mask", h->l->qualified);
}

/* --- amounts -------------------------------------------------------------------------------- */

/* The number to prune of `remaining` (entries or slices), torch's _compute_nparams_toprune
 * and its checks; errors name `what` (a layer, or "global_unstructured"). */
static ganfw_status amount_count(ganfw_prune_amount a, int64_t remaining, const char *what,
                                 const char *unit, int64_t *out) {
  if (a.count >= 0) {
    if (a.count > remaining)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "%s: amount %lld is more than the %lld %s still unpruned", what,
                             (long long)a.count, (long long)remaining, unit);
    *out = a.count;
    return GANFW_OK;
  }
  if (!(a.fraction >= 0.0 && a.fraction < 1.0))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: amount %g is outside [0, 1); give a fraction of the %s still "
                           "unpruned, or an integer count",
                           what, a.fraction, unit);
  *out = (int64_t)nearbyint(a.fraction * (double)remaining); /* half to even, as round() */
  return GANFW_OK;
}

/* --- unstructured: the k smallest |w| among the entries the masks keep -------------------- */

typedef struct entry {
  float mag;
  int64_t pos; /* over the concatenation of the targets */
} entry;

static int entry_cmp(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->mag != y->mag) return x->mag < y->mag ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Prunes k entries over h[0..n) together; writes every mask back. */
static ganfw_status unstructured(host_weight *h, int32_t n, ganfw_prune_amount amount,
                                 const char *what) {
  int64_t remaining = 0;
  for (int32_t t = 0; t < n; t++)
    for (int64_t i = 0; i < h[t].n; i++) remaining += h[t].m[i] == 1.0f;
  int64_t k = 0;
  ganfw_status st = amount_count(amount, remaining, what, "entries", &k);
  if (st != GANFW_OK) return st;
  if (k > 0) {
    entry *e = malloc((size_t)remaining * sizeof *e);
    if (!e) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory pruning %s", what);
    int64_t r = 0, base = 0;
    for (int32_t t = 0; t < n; t++) {
      for (int64_t i = 0; i < h[t].n; i++)
        if (h[t].m[i] == 1.0f) e[r++] = (entry){fabsf(h[t].w[i]), base + i};
      base += h[t].n;
    }
    qsort(e, (size_t)remaining, sizeof *e, entry_cmp);
    for (int64_t j = 0; j < k; j++) {
      int64_t pos = e[j].pos;
      int32_t t = 0;
      while (pos >= h[t].n) pos -= h[t++].n;
      h[t].m[pos] = 0.0f;
    }
    free(e);
  }
  for (int32_t t = 0; t < n && st == GANFW_OK; t++) st = host_weight_write(&h[t]);
  return st;
}

ganfw_status ganfw_prune_l1_unstructured(ganfw_net *net, const char *layer,
                                         ganfw_prune_amount amount) {
  ganfw_prune_target t = {net, layer};
  return ganfw_prune_global_unstructured(&t, 1, amount);
}

ganfw_status ganfw_prune_global_unstructured(const ganfw_prune_target *targets, int32_t n,
                                             ganfw_prune_amount amount) {
  if (n <= 0) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "pruning: no layers to prune");
  host_weight *h = calloc((size_t)n, sizeof *h);
  if (!h) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = GANFW_OK;
  int32_t read = 0;
  for (; read < n && st == GANFW_OK; read++) {
    ganfw_layer *l = prunable(targets[read].net, targets[read].layer);
    if (!l) {
      st = ganfw_error_code();
      break;
    }
    for (int32_t j = 0; j < read; j++)
      if (h[j].l == l) {
        st = ganfw_layer_error(l, GANFW_ERR_INVALID_ARG, "is listed twice for pruning");
        break;
      }
    if (st == GANFW_OK) st = host_weight_read(l, &h[read]);
  }
  if (st == GANFW_OK) {
    char what[512];
    if (n == 1)
      snprintf(what, sizeof what, "layer %s", h[0].l->qualified);
    else
      snprintf(what, sizeof what, "global_unstructured over %d layers", (int)n);
    st = unstructured(h, n, amount, what);
  }
  for (int32_t j = 0; j < n; j++) host_weight_free(&h[j]);
  free(h);
  return st;
}

/* --- structured: whole slices along dim ----------------------------------------------------- */

typedef struct slice {
  double norm;
  int64_t c;
} slice;

/* larger norm first, then lower index */
static int slice_cmp(const void *a, const void *b) {
  const slice *x = a, *y = b;
  if (x->norm != y->norm) return x->norm > y->norm ? -1 : 1;
  return x->c < y->c ? -1 : x->c > y->c;
}

ganfw_status ganfw_prune_ln_structured(ganfw_net *net, const char *layer, ganfw_prune_amount amount,
                                       int32_t n, int32_t dim) {
  ganfw_layer *l = prunable(net, layer);
  if (!l) return ganfw_error_code();
  if (n != 1 && n != 2)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG, "ln_structured: n is %d; use 1 or 2",
                             (int)n);
  const ganfw_tensor *w = l->param[0];
  if (dim != 0 && dim != 1)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "ln_structured: dim is %d; use 0 (the weight's first dimension) or 1",
                             (int)dim);
  int64_t A = 1, B = 1;
  const int64_t D = w->shape[dim];
  for (int32_t d = 0; d < dim; d++) A *= w->shape[d];
  for (int32_t d = dim + 1; d < w->ndim; d++) B *= w->shape[d];
  host_weight h;
  ganfw_status st = host_weight_read(l, &h);
  if (st != GANFW_OK) return st;
  slice *s = malloc((size_t)D * sizeof *s);
  if (!s) {
    host_weight_free(&h);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  int64_t remaining = 0;
  for (int64_t c = 0; c < D; c++) {
    double norm = 0.0;
    int any = 0;
    for (int64_t a = 0; a < A; a++)
      for (int64_t b = 0; b < B; b++) {
        const int64_t i = (a * D + c) * B + b;
        any |= h.m[i] != 0.0f;
        const double v = h.w[i];
        norm += n == 1 ? fabs(v) : v * v;
      }
    if (any) s[remaining++] = (slice){n == 1 ? norm : sqrt(norm), c};
  }
  char what[512];
  snprintf(what, sizeof what, "layer %s", l->qualified);
  int64_t k = 0;
  st = amount_count(amount, remaining, what, "slices", &k);
  if (st == GANFW_OK && k > 0) {
    qsort(s, (size_t)remaining, sizeof *s, slice_cmp);
    for (int64_t j = remaining - k; j < remaining; j++) {
      const int64_t c = s[j].c;
      for (int64_t a = 0; a < A; a++)
        for (int64_t b = 0; b < B; b++) h.m[(a * D + c) * B + b] = 0.0f;
    }
  }
  if (st == GANFW_OK) st = host_weight_write(&h);
  free(s);
  host_weight_free(&h);
  return st;
}

/* --- install, remove, report ------------------------------------------------------------ */

ganfw_status ganfw_prune_mask_layer(ganfw_net *net, const char *layer) {
  ganfw_layer *l = prunable(net, layer);
  return l ? ganfw_mask_install(l) : ganfw_error_code();
}

ganfw_status ganfw_prune_remove(ganfw_net *net, const char *layer) {
  ganfw_layer *l = ganfw_prune_find_layer(net, layer);
  if (!l) return ganfw_error_code();
  if (!l->mask.on)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "has no pruning mask to remove (prune it first)");
  return ganfw_mask_remove(l);
}

ganfw_status ganfw_prune_remove_all(ganfw_net *net) {
  for (int32_t i = 0; i < ganfw_net_layer_count(net); i++) {
    ganfw_status st = ganfw_mask_remove(ganfw_net_layer(net, i));
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

static ganfw_status layer_sparsity(ganfw_layer *l, ganfw_prune_sparsity *out) {
  host_weight h;
  ganfw_status st = host_weight_read(l, &h);
  if (st != GANFW_OK) return st;
  *out = (ganfw_prune_sparsity){.total = h.n, .masked = l->mask.on};
  for (int64_t i = 0; i < h.n; i++) out->zeros += h.w[i] * h.m[i] == 0.0f;
  host_weight_free(&h);
  return GANFW_OK;
}

ganfw_status ganfw_prune_layer_sparsity(ganfw_net *net, const char *layer,
                                        ganfw_prune_sparsity *out) {
  ganfw_layer *l = prunable(net, layer);
  return l ? layer_sparsity(l, out) : ganfw_error_code();
}

ganfw_status ganfw_prune_layer_kept(ganfw_net *net, const char *layer, int32_t dim, int64_t *kept,
                                    int64_t *total, int64_t *kept_slices, int64_t *slices) {
  ganfw_layer *l = prunable(net, layer);
  if (!l) return ganfw_error_code();
  host_weight h;
  ganfw_status st = host_weight_read(l, &h);
  if (st != GANFW_OK) return st;
  int64_t k = 0, ks = 0, D = 0;
  for (int64_t i = 0; i < h.n; i++) k += h.m[i] == 1.0f;
  const ganfw_tensor *w = l->param[0];
  if (dim == 0 || dim == 1) {
    int64_t A = 1, B = 1;
    D = w->shape[dim];
    for (int32_t d = 0; d < dim; d++) A *= w->shape[d];
    for (int32_t d = dim + 1; d < w->ndim; d++) B *= w->shape[d];
    for (int64_t c = 0; c < D; c++) {
      int any = 0;
      for (int64_t a = 0; a < A && !any; a++)
        for (int64_t b = 0; b < B && !any; b++) any = h.m[(a * D + c) * B + b] != 0.0f;
      ks += any;
    }
  }
  if (kept) *kept = k;
  if (total) *total = h.n;
  if (kept_slices) *kept_slices = ks;
  if (slices) *slices = D;
  host_weight_free(&h);
  return GANFW_OK;
}

/* appends to buf[0..cap) at *len, truncating */
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  if (*len + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  const int k = vsnprintf(buf + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (k > 0) *len = *len + (size_t)k < cap ? *len + (size_t)k : cap - 1;
}

ganfw_status ganfw_prune_report(ganfw_net *net, char *buf, size_t cap,
                                ganfw_prune_sparsity *overall) {
  ganfw_prune_sparsity all = {0};
  size_t len = 0;
  if (cap) buf[0] = '\0';
  for (int32_t i = 0; i < ganfw_net_layer_count(net); i++) {
    if (!ganfw_prune_layer_prunable(net, i)) continue;
    ganfw_layer *l = ganfw_net_layer(net, i);
    ganfw_prune_sparsity s;
    ganfw_status st = layer_sparsity(l, &s);
    if (st != GANFW_OK) return st;
    all.zeros += s.zeros, all.total += s.total, all.masked |= s.masked;
    append(buf, cap, &len, "%s: %lld of %lld weights zero (%.1f%%)%s\n", l->qualified,
           (long long)s.zeros, (long long)s.total,
           s.total ? 100.0 * (double)s.zeros / (double)s.total : 0.0, s.masked ? ", masked" : "");
  }
  append(buf, cap, &len, "%s: %lld of %lld weights zero (%.1f%%)", ganfw_net_name(net),
         (long long)all.zeros, (long long)all.total,
         all.total ? 100.0 * (double)all.zeros / (double)all.total : 0.0);
  if (overall) *overall = all;
  return GANFW_OK;
}

ganfw_status ganfw_prune_check_mask(ganfw_layer *l, const char *path) {
  const ganfw_tensor *m = ganfw_layer_mask(l);
  if (!m) return GANFW_OK;
  float *v = malloc((size_t)m->nbytes);
  if (!v) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = ganfw_tensor_to_host(m, v, m->nbytes);
  for (int64_t i = 0; st == GANFW_OK && i < m->numel; i++)
    if (v[i] != 0.0f && v[i] != 1.0f)
      st = ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s holds %g at flat index %lld; a pruning mask holds only 0 and 1",
                           path, l->extra_name[l->mask.extra], (double)v[i], (long long)i);
  free(v);
  return st;
}
