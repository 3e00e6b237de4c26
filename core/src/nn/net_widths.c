/* model.widths in net_build: named conv2d / conv_transpose2d / linear layers get fewer out
 * channels (features), and every layer that depends on them follows: BatchNorm, GroupNorm and
 * InstanceNorm channels, the next conv's in_channels, a linear's in_features after flatten
 * (times H*W) or global_avg_pool; activation, dropout, pool2d, upsample pass channels
 * through; an add needs equal widths on its inputs; a concat sums them. Shapes are those of a
 * batch of 1, [1,C,H,W] or [1,F]. */
#include "nn/net_widths.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/suggest.h"

/* The nearest layer name to `typed` among layers[0..n), or NULL. */
static const char *nearest(ganfw_layer **layers, int32_t n, const char *typed) {
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (int32_t i = 0; i < n; i++) {
    const size_t d = ganfw_edit_distance(typed, layers[i]->name);
    if (d < best_d && ganfw_suggest_near(strlen(typed), d)) best_d = d, best = layers[i]->name;
  }
  return best;
}

static int32_t is_matmul(const ganfw_layer *l) {
  return l->vt == &ganfw_layer_conv2d || l->vt == &ganfw_layer_conv_transpose2d ||
         l->vt == &ganfw_layer_linear;
}

static int64_t out_width(const ganfw_layer *l) {
  return l->vt == &ganfw_layer_linear ? l->args.linear.out_features : l->args.conv.out_channels;
}

/* The layer each width names (into at[0..nw)), checked: a known matmul layer, 0 < width <=
 * its own. */
static ganfw_status resolve(const char *net_name, ganfw_layer **layers, int32_t n,
                            const ganfw_net_width *w, int32_t nw, int32_t *at) {
  for (int32_t k = 0; k < nw; k++) {
    at[k] = -1;
    for (int32_t i = 0; i < n && at[k] < 0; i++)
      if (strcmp(layers[i]->name, w[k].layer) == 0) at[k] = i;
    if (at[k] < 0) {
      const char *near = nearest(layers, n, w[k].layer);
      char hint[160] = "";
      if (near) snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: net %s has no layer '%s'%s; `ganfw plan CONFIG` lists its layers",
                             w[k].where, net_name, w[k].layer, hint);
    }
    const ganfw_layer *l = layers[at[k]];
    if (!is_matmul(l))
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: layer %s.%s is a %s; model.widths sets the out channels of "
                             "conv2d, conv_transpose2d and linear layers (the layers after them "
                             "follow)",
                             w[k].where, net_name, w[k].layer, l->vt->type);
    if (w[k].width <= 0 || w[k].width > out_width(l))
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: width %lld for %s.%s (%s) is out of range: expected 1 to its "
                             "%lld channels (model.widths only narrows a layer)",
                             w[k].where, (long long)w[k].width, net_name, w[k].layer, l->vt->type,
                             (long long)out_width(l));
    for (int32_t j = 0; j < k; j++)
      if (at[j] == at[k])
        return ganfw_error_set(GANFW_ERR_CONFIG, "%s: layer %s.%s is given a width twice",
                               w[k].where, net_name, w[k].layer);
  }
  return GANFW_OK;
}

/* The output shapes of layers[0..n) as built (batch 1) into shape[i], ndim[i]. */
static ganfw_status infer_all(ganfw_layer **layers, int32_t n, const int64_t *in, int32_t in_ndim,
                              int64_t (*shape)[GANFW_MAX_DIMS], int32_t *ndim) {
  for (int32_t i = 0; i < n; i++) {
    const ganfw_layer *l = layers[i];
    int64_t s[GANFW_NODE_MAX_INPUTS][GANFW_MAX_DIMS];
    int32_t sn[GANFW_NODE_MAX_INPUTS];
    for (int32_t k = 0; k < l->n_in; k++) {
      const int32_t j = l->in[k];
      memcpy(s[k], j < 0 ? in : shape[j], sizeof s[k]);
      sn[k] = j < 0 ? in_ndim : ndim[j];
    }
    for (int32_t d = 0; d < GANFW_MAX_DIMS; d++) shape[i][d] = 1;
    ganfw_status st = l->vt->infer_n
                          ? l->vt->infer_n(l, l->n_in, (const int64_t(*)[GANFW_MAX_DIMS])s, sn,
                                           shape[i], &ndim[i])
                          : l->vt->infer(l, s[0], sn[0], shape[i], &ndim[i]);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* The propagation state: per node its width before and after, and the width entry whose
 * change reaches it (-1: none). */
typedef struct widths_pass {
  const char *net;
  ganfw_layer **layers;
  int64_t (*shape)[GANFW_MAX_DIMS];
  int32_t *ndim;
  const int64_t *in;
  int32_t in_ndim;
  int64_t *newc;
  int32_t *origin;
  ganfw_layer_args *args; /* the new args, committed at the end */
} widths_pass;

static int64_t old_c(const widths_pass *p, int32_t j) {
  return j < 0 ? p->in[1] : p->shape[j][1];
}
static int64_t new_c(const widths_pass *p, int32_t j) {
  return j < 0 ? p->in[1] : p->newc[j];
}

/* An add whose inputs get different widths: names it and what feeds it. */
static ganfw_status add_error(const widths_pass *p, int32_t i) {
  const ganfw_layer *l = p->layers[i];
  char feeds[1024] = "";
  size_t len = 0;
  for (int32_t k = 0; k < l->n_in && len < sizeof feeds; k++) {
    const int32_t j = l->in[k];
    const int w = snprintf(feeds + len, sizeof feeds - len, "%s%s (%lld)", k ? ", " : "",
                           j < 0 ? "input" : p->layers[j]->name, (long long)new_c(p, j));
    len += w > 0 ? (size_t)w : 0;
  }
  return ganfw_error_set(GANFW_ERR_CONFIG,
                         "model.widths: add %s.%s would sum inputs of different widths: %s; "
                         "give every layer whose output meets in the add the same width (the "
                         "channels of a residual sum are pruned together)",
                         p->net, l->name, feeds);
}

/* Node i's new args and width from its inputs'. */
static ganfw_status step(widths_pass *p, int32_t i, const int64_t *width, const int32_t *entry) {
  const ganfw_layer *l = p->layers[i];
  ganfw_layer_args *a = &p->args[i];
  *a = l->args;
  const int32_t j = l->in[0];
  const int64_t cin = new_c(p, j);
  int32_t changed = 0, from = -1;
  for (int32_t k = 0; k < l->n_in; k++)
    if (new_c(p, l->in[k]) != old_c(p, l->in[k])) {
      changed = 1;
      if (from < 0) from = l->in[k] < 0 ? -1 : p->origin[l->in[k]];
    }
  p->origin[i] = from;
  p->newc[i] = p->shape[i][1];
  if (l->vt == &ganfw_layer_conv2d || l->vt == &ganfw_layer_conv_transpose2d) {
    a->conv.in_channels = cin;
    if (width[i] > 0)
      a->conv.out_channels = width[i], p->origin[i] = entry[i];
    else
      p->origin[i] = -1;
    p->newc[i] = a->conv.out_channels;
  } else if (l->vt == &ganfw_layer_linear) {
    a->linear.in_features = cin;
    if (width[i] > 0)
      a->linear.out_features = width[i], p->origin[i] = entry[i];
    else
      p->origin[i] = -1;
    p->newc[i] = a->linear.out_features;
  } else if (l->vt == &ganfw_layer_batchnorm2d) {
    a->batchnorm.channels = p->newc[i] = cin;
  } else if (l->vt == &ganfw_layer_instancenorm2d) {
    a->instancenorm.channels = p->newc[i] = cin;
  } else if (l->vt == &ganfw_layer_groupnorm) {
    if (cin % a->groupnorm.groups != 0)
      return ganfw_layer_error(l, GANFW_ERR_CONFIG,
                               "model.widths gives it %lld channels, which its %lld groups do "
                               "not divide; choose widths that are multiples of %lld",
                               (long long)cin, (long long)a->groupnorm.groups,
                               (long long)a->groupnorm.groups);
    a->groupnorm.channels = p->newc[i] = cin;
  } else if (l->vt == &ganfw_layer_activation || l->vt == &ganfw_layer_dropout ||
             l->vt == &ganfw_layer_pool2d || l->vt == &ganfw_layer_upsample ||
             l->vt == &ganfw_layer_global_avg_pool ||
             (l->vt == &ganfw_layer_reshape && l->args.reshape.flatten &&
              (j < 0 ? p->in_ndim : p->ndim[j]) == 2)) {
    p->newc[i] = cin;
  } else if (l->vt == &ganfw_layer_reshape && l->args.reshape.flatten) {
    const int64_t *s = j < 0 ? p->in : p->shape[j];
    p->newc[i] = cin * s[2] * s[3];
  } else if (l->vt == &ganfw_layer_add) {
    for (int32_t k = 1; k < l->n_in; k++)
      if (new_c(p, l->in[k]) != cin) return add_error(p, i);
    p->newc[i] = cin;
  } else if (l->vt == &ganfw_layer_concat) {
    p->newc[i] = 0;
    for (int32_t k = 0; k < l->n_in; k++) p->newc[i] += new_c(p, l->in[k]);
  } else if (changed) {
    return ganfw_layer_error(l, GANFW_ERR_CONFIG,
                             "model.widths changes the channels it reads (%lld instead of "
                             "%lld), and a %s cannot follow that; keep the width of the layers "
                             "before it",
                             (long long)cin, (long long)old_c(p, j), l->vt->type);
  }
  return GANFW_OK;
}

ganfw_status ganfw_net_widths_apply(const char *net_name, ganfw_layer **layers, int32_t n,
                                    const int64_t *in, int32_t in_ndim, const ganfw_net_width *w,
                                    int32_t nw) {
  if (nw <= 0 || n <= 0) return GANFW_OK;
  int32_t *at = calloc((size_t)nw, sizeof *at);
  int64_t *width = calloc((size_t)n, sizeof *width);
  int32_t *entry = calloc((size_t)n, sizeof *entry);
  widths_pass p = {.net = net_name,
                   .layers = layers,
                   .in = in,
                   .in_ndim = in_ndim,
                   .shape = calloc((size_t)n, sizeof *p.shape),
                   .ndim = calloc((size_t)n, sizeof *p.ndim),
                   .newc = calloc((size_t)n, sizeof *p.newc),
                   .origin = calloc((size_t)n, sizeof *p.origin),
                   .args = calloc((size_t)n, sizeof *p.args)};
  ganfw_status st = GANFW_OK;
  if (!at || !width || !entry || !p.shape || !p.ndim || !p.newc || !p.origin || !p.args)
    st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK) st = resolve(net_name, layers, n, w, nw, at);
  if (st == GANFW_OK) st = infer_all(layers, n, in, in_ndim, p.shape, p.ndim);
  for (int32_t k = 0; st == GANFW_OK && k < nw; k++) width[at[k]] = w[k].width, entry[at[k]] = k;
  for (int32_t i = 0; st == GANFW_OK && i < n; i++) st = step(&p, i, width, entry);
  if (st == GANFW_OK && p.newc[n - 1] != p.shape[n - 1][1]) {
    const int32_t k = p.origin[n - 1];
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s: the output of net %s (layer %s) would have %lld channels "
                         "instead of %lld; the net's output width (logits, image channels) "
                         "cannot change: %s",
                         k >= 0 ? w[k].where : "model.widths", net_name, layers[n - 1]->name,
                         (long long)p.newc[n - 1], (long long)p.shape[n - 1][1],
                         k >= 0 ? "drop this layer's width" : "keep the last layers' widths");
  }
  for (int32_t i = 0; st == GANFW_OK && i < n; i++) layers[i]->args = p.args[i];
  free(at);
  free(width);
  free(entry);
  free(p.shape);
  free(p.ndim);
  free(p.newc);
  free(p.origin);
  free(p.args);
  return st;
}
