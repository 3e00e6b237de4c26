/* Channel dependency groups of a built net, the channels each keeps, and the sliced
 * state_dict of the narrower net (see prune_channels.h). A node's output is described as a
 * list of segments, each the channels of one channel space (a producer's output, the net's
 * input, or a locked non-matmul output) repeated `mult` times per channel (a flatten makes
 * channel c the features c*H*W .. c*H*W + H*W - 1). Spaces that meet in an add are joined
 * (union-find) into one group. Shapes are those of a batch of 1. */
#include "nn/prune_channels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/suggest.h"
#include "nn/layer.h"
#include "runtime/tensor.h"

#define SEG_MAX 64 /* segments of one node's output (concats of concats) */

typedef struct seg {
  int32_t space;
  int64_t mult;
} seg;

typedef struct value {
  seg s[SEG_MAX];
  int32_t n;
} value;

typedef struct space {
  int64_t channels;
  int32_t parent;   /* union-find */
  int32_t producer; /* the matmul layer whose output it is, or -1 */
  int32_t node;     /* the node it starts at (-1: the net's input) */
} space;

typedef struct group {
  int32_t root;
  int64_t channels, kept;
  char why[256]; /* "" when prunable */
  double amount;
  int32_t has_amount;
  int32_t *producers, *consumers, *norms;
  int32_t n_producers, n_consumers, n_norms;
  int64_t *keep;
} group;

struct ganfw_channel_prune_plan {
  ganfw_net *net;
  int32_t n_layers;
  value *val; /* [n_layers]: each node's output */
  value input;
  space *sp;
  int32_t n_sp, cap_sp;
  char (*why)[256]; /* [n_sp]: why the space is locked, "" if not */
  group *g;         /* the groups with a producer */
  int32_t n_g;
  int32_t *group_of; /* [n_sp]: index into g of the space's root, or -1 */
};

static const char *const importance_names[] = {"l1", "l2", "bn_gamma"};
_Static_assert(sizeof importance_names / sizeof *importance_names == GANFW_CHANNEL_IMPORTANCE_COUNT,
               "a name per importance");

const char *ganfw_channel_importance_name(int32_t kind) {
  return kind >= 0 && kind < GANFW_CHANNEL_IMPORTANCE_COUNT ? importance_names[kind] : NULL;
}

int32_t ganfw_channel_importance_parse(const char *name) {
  for (int32_t k = 0; name && k < GANFW_CHANNEL_IMPORTANCE_COUNT; k++)
    if (strcmp(importance_names[k], name) == 0) return k;
  return -1;
}

/* --- the graph ------------------------------------------------------------------------- */

static int32_t find(space *sp, int32_t a) {
  while (sp[a].parent != a) a = sp[a].parent = sp[sp[a].parent].parent;
  return a;
}

static int32_t new_space(ganfw_channel_prune_plan *p, int64_t channels, int32_t producer,
                         int32_t node) {
  if (p->n_sp == p->cap_sp) {
    const int32_t cap = p->cap_sp ? 2 * p->cap_sp : 64;
    space *sp = realloc(p->sp, (size_t)cap * sizeof *sp);
    if (!sp) return -1;
    p->sp = sp;
    char(*why)[256] = realloc(p->why, (size_t)cap * sizeof *why);
    if (!why) return -1;
    p->why = why;
    p->cap_sp = cap;
  }
  p->sp[p->n_sp] =
      (space){.channels = channels, .parent = p->n_sp, .producer = producer, .node = node};
  p->why[p->n_sp][0] = '\0';
  return p->n_sp++;
}

/* Locks every space of v (its root's reason: the first given). */
static void lock(ganfw_channel_prune_plan *p, const value *v, const char *why) {
  for (int32_t k = 0; k < v->n; k++) {
    const int32_t r = find(p->sp, v->s[k].space);
    if (!p->why[r][0]) snprintf(p->why[r], sizeof p->why[r], "%s", why);
  }
}

static void join(ganfw_channel_prune_plan *p, int32_t a, int32_t b) {
  a = find(p->sp, a), b = find(p->sp, b);
  if (a == b) return;
  if (!p->why[a][0] && p->why[b][0]) memcpy(p->why[a], p->why[b], sizeof p->why[a]);
  p->sp[b].parent = a;
}

static const value *input_value(const ganfw_channel_prune_plan *p, int32_t j) {
  return j < 0 ? &p->input : &p->val[j];
}

static int32_t is_matmul(const ganfw_layer *l) {
  return l->vt == &ganfw_layer_conv2d || l->vt == &ganfw_layer_conv_transpose2d ||
         l->vt == &ganfw_layer_linear;
}

static int32_t is_norm(const ganfw_layer *l) {
  return l->vt == &ganfw_layer_batchnorm2d || l->vt == &ganfw_layer_groupnorm ||
         l->vt == &ganfw_layer_instancenorm2d;
}

/* Node i's output value from its inputs'. */
static ganfw_status walk_node(ganfw_channel_prune_plan *p, int32_t i) {
  ganfw_layer *l = ganfw_net_layer_at(p->net, i);
  value *v = &p->val[i];
  const value *in = input_value(p, l->in[0]);
  char why[256];
  int64_t shape[GANFW_MAX_DIMS];
  int32_t ndim = 0;
  if (ganfw_net_node_shape(p->net, i, shape, &ndim) != 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "channel pruning: net %s is not built",
                           ganfw_net_name(p->net));
  if (is_matmul(l)) {
    const int64_t c =
        l->vt == &ganfw_layer_linear ? l->args.linear.out_features : l->args.conv.out_channels;
    const int32_t s = new_space(p, c, i, i);
    if (s < 0) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    v->n = 1, v->s[0] = (seg){s, 1};
    if (l->sn.n_power_iterations > 0) { /* u and v would need slicing too */
      snprintf(why, sizeof why, "layer %s has spectral norm", l->name);
      lock(p, in, why);
      lock(p, v, why);
    }
    return GANFW_OK;
  }
  if (is_norm(l) || l->vt == &ganfw_layer_activation || l->vt == &ganfw_layer_dropout ||
      l->vt == &ganfw_layer_pool2d || l->vt == &ganfw_layer_upsample ||
      l->vt == &ganfw_layer_global_avg_pool) {
    *v = *in;
    if (is_norm(l) && (in->n != 1 || in->s[0].mult != 1)) {
      snprintf(why, sizeof why, "%s %s normalises a concat", l->vt->type, l->name);
      lock(p, in, why);
    }
    return GANFW_OK;
  }
  if (l->vt == &ganfw_layer_reshape && l->args.reshape.flatten) {
    *v = *in;
    int64_t src[GANFW_MAX_DIMS];
    int32_t src_ndim = 0;
    int64_t hw = 1;
    ganfw_net_node_shape(p->net, l->in[0], src, &src_ndim);
    if (src_ndim == 4) hw = src[2] * src[3];
    for (int32_t k = 0; k < v->n; k++) v->s[k].mult *= hw;
    return GANFW_OK;
  }
  if (l->vt == &ganfw_layer_add) {
    *v = *in;
    int32_t simple = 1;
    for (int32_t k = 0; k < l->n_in; k++) {
      const value *u = input_value(p, l->in[k]);
      simple &= u->n == 1 && u->s[0].mult == in->s[0].mult;
    }
    if (!simple) {
      const char *concat = NULL;
      for (int32_t k = 0; k < l->n_in && !concat; k++)
        if (l->in[k] >= 0 && input_value(p, l->in[k])->n > 1)
          concat = ganfw_net_layer_at(p->net, l->in[k])->name;
      snprintf(why, sizeof why,
               "add %s sums a concat%s%s with other channels, which cannot be pruned "
               "consistently",
               l->name, concat ? " " : "", concat ? concat : "");
      for (int32_t k = 0; k < l->n_in; k++) lock(p, input_value(p, l->in[k]), why);
      return GANFW_OK;
    }
    for (int32_t k = 1; k < l->n_in; k++)
      join(p, in->s[0].space, input_value(p, l->in[k])->s[0].space);
    return GANFW_OK;
  }
  if (l->vt == &ganfw_layer_concat) {
    v->n = 0;
    for (int32_t k = 0; k < l->n_in; k++) {
      const value *u = input_value(p, l->in[k]);
      if (v->n + u->n > SEG_MAX)
        return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                                 "concatenates more than %d channel spaces; channel pruning "
                                 "supports at most that many",
                                 SEG_MAX);
      memcpy(v->s + v->n, u->s, (size_t)u->n * sizeof *u->s);
      v->n += u->n;
    }
    return GANFW_OK;
  }
  /* anything else (reshape, embedding, layernorm, plugin layers): its inputs keep their
   * widths, its output is a locked space of its own */
  snprintf(why, sizeof why, "read by %s (%s)", l->name, l->vt->type);
  for (int32_t k = 0; k < l->n_in; k++) lock(p, input_value(p, l->in[k]), why);
  const int32_t s = new_space(p, shape[1], -1, i);
  if (s < 0) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  v->n = 1, v->s[0] = (seg){s, 1};
  snprintf(p->why[s], sizeof p->why[s], "the output of %s (%s)", l->name, l->vt->type);
  return GANFW_OK;
}

static ganfw_status push(int32_t **list, int32_t *n, int32_t x) {
  for (int32_t k = 0; k < *n; k++)
    if ((*list)[k] == x) return GANFW_OK;
  int32_t *a = realloc(*list, (size_t)(*n + 1) * sizeof *a);
  if (!a) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  a[(*n)++] = x;
  *list = a;
  return GANFW_OK;
}

/* The groups with a producer, their producers, consumers and norms. */
static ganfw_status collect_groups(ganfw_channel_prune_plan *p) {
  p->group_of = malloc((size_t)(p->n_sp ? p->n_sp : 1) * sizeof *p->group_of);
  p->g = calloc((size_t)(p->n_sp ? p->n_sp : 1), sizeof *p->g);
  if (!p->group_of || !p->g) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int32_t s = 0; s < p->n_sp; s++) p->group_of[s] = -1;
  ganfw_status st = GANFW_OK;
  for (int32_t s = 0; s < p->n_sp && st == GANFW_OK; s++) {
    if (p->sp[s].producer < 0) continue;
    const int32_t r = find(p->sp, s);
    if (p->group_of[r] < 0) {
      group *g = &p->g[p->n_g];
      g->root = r;
      g->channels = g->kept = p->sp[r].channels;
      snprintf(g->why, sizeof g->why, "%s", p->why[r]);
      p->group_of[r] = p->n_g++;
    }
    group *g = &p->g[p->group_of[r]];
    st = push(&g->producers, &g->n_producers, p->sp[s].producer);
  }
  for (int32_t s = 0; s < p->n_sp; s++) p->group_of[s] = p->group_of[find(p->sp, s)];
  for (int32_t i = 0; i < p->n_layers && st == GANFW_OK; i++) {
    const ganfw_layer *l = ganfw_net_layer_at(p->net, i);
    if (!is_matmul(l) && !is_norm(l)) continue;
    const value *in = input_value(p, l->in[0]);
    for (int32_t k = 0; k < in->n && st == GANFW_OK; k++) {
      const int32_t gi = p->group_of[in->s[k].space];
      if (gi < 0) continue;
      group *g = &p->g[gi];
      st = is_matmul(l) ? push(&g->consumers, &g->n_consumers, i) : push(&g->norms, &g->n_norms, i);
    }
  }
  return st;
}

/* --- importance and selection ------------------------------------------------------------ */

/* The f32 values of t, malloc'ed (the caller frees), or NULL with an error set. */
static float *host_copy(const ganfw_tensor *t) {
  float *h = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *h);
  if (!h) {
    ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    return NULL;
  }
  if (t->dtype != GANFW_DTYPE_F32 ||
      ganfw_tensor_to_host(t, h, t->numel * (int64_t)sizeof *h) != GANFW_OK) {
    if (t->dtype != GANFW_DTYPE_F32)
      ganfw_error_set(GANFW_ERR_INVALID_ARG, "tensor %s is not f32", t->name ? t->name : "?");
    free(h);
    return NULL;
  }
  return h;
}

/* Adds each channel's filter norm of producer l into imp[0..C). */
static ganfw_status filter_norms(const ganfw_layer *l, int32_t kind, double *imp) {
  const ganfw_tensor *w = l->param[0];
  float *h = host_copy(w);
  if (!h) return ganfw_error_code();
  const int32_t convt = l->vt == &ganfw_layer_conv_transpose2d;
  const int64_t d0 = w->shape[0], d1 = w->ndim > 1 ? w->shape[1] : 1;
  const int64_t inner = w->numel / (d0 * d1);
  const int64_t C = convt ? d1 : d0;
  double *acc = calloc((size_t)C, sizeof *acc);
  if (!acc) {
    free(h);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  for (int64_t a = 0; a < d0; a++)
    for (int64_t b = 0; b < d1; b++)
      for (int64_t r = 0; r < inner; r++) {
        const double x = h[(a * d1 + b) * inner + r];
        acc[convt ? b : a] += kind == GANFW_CHANNEL_IMPORTANCE_L1 ? fabs(x) : x * x;
      }
  for (int64_t c = 0; c < C; c++)
    imp[c] += kind == GANFW_CHANNEL_IMPORTANCE_L1 ? acc[c] : sqrt(acc[c]);
  free(acc);
  free(h);
  return GANFW_OK;
}

static ganfw_status importance(const ganfw_channel_prune_plan *p, const group *g, int32_t kind,
                               double *imp) {
  ganfw_status st = GANFW_OK;
  if (kind != GANFW_CHANNEL_IMPORTANCE_BN_GAMMA) {
    for (int32_t k = 0; k < g->n_producers && st == GANFW_OK; k++)
      st = filter_norms(ganfw_net_layer_at(p->net, g->producers[k]), kind, imp);
    return st;
  }
  int32_t bns = 0;
  for (int32_t k = 0; k < g->n_norms && st == GANFW_OK; k++) {
    const ganfw_layer *l = ganfw_net_layer_at(p->net, g->norms[k]);
    if (l->vt != &ganfw_layer_batchnorm2d || l->nparams < 1 || !l->param[0]) continue;
    float *h = host_copy(l->param[0]);
    if (!h) return ganfw_error_code();
    for (int64_t c = 0; c < g->channels; c++) imp[c] += fabs((double)h[c]);
    free(h);
    bns++;
  }
  if (bns == 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, channel group %s: importance bn_gamma needs a BatchNorm on "
                           "the group, and it has none; use l1 or l2",
                           ganfw_net_name(p->net),
                           ganfw_net_layer_at(p->net, g->producers[0])->name);
  return GANFW_OK;
}

typedef struct ranked {
  double v;
  int64_t c;
} ranked;

static int by_importance(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->c < y->c ? -1 : x->c > y->c;
}

static int by_index(const void *a, const void *b) {
  const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* g->keep: its most important channels, round(amount * C) fewer, in their order. */
static ganfw_status select_channels(const ganfw_channel_prune_plan *p, group *g, int32_t kind) {
  const int64_t C = g->channels;
  g->keep = malloc((size_t)C * sizeof *g->keep);
  if (!g->keep) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int64_t c = 0; c < C; c++) g->keep[c] = c;
  g->kept = C;
  if (!g->has_amount || g->why[0]) return GANFW_OK;
  const int64_t removed = (int64_t)rint(g->amount * (double)C); /* half to even, as Python */
  const char *first = ganfw_net_layer_at(p->net, g->producers[0])->name;
  if (removed >= C)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: amount %g would remove all %lld of its channels "
                           "(round(%g * %lld) = %lld); lower the amount",
                           ganfw_net_name(p->net), first, g->amount, (long long)C, g->amount,
                           (long long)C, (long long)removed);
  if (removed == 0) return GANFW_OK;
  double *imp = calloc((size_t)C, sizeof *imp);
  ranked *r = malloc((size_t)C * sizeof *r);
  ganfw_status st = imp && r ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK) st = importance(p, g, kind, imp);
  if (st == GANFW_OK) {
    for (int64_t c = 0; c < C; c++) r[c] = (ranked){imp[c], c};
    qsort(r, (size_t)C, sizeof *r, by_importance);
    g->kept = C - removed;
    for (int64_t c = 0; c < g->kept; c++) g->keep[c] = r[c].c;
    qsort(g->keep, (size_t)g->kept, sizeof *g->keep, by_index);
    for (int32_t k = 0; k < g->n_norms && st == GANFW_OK; k++) {
      const ganfw_layer *l = ganfw_net_layer_at(p->net, g->norms[k]);
      if (l->vt == &ganfw_layer_groupnorm && g->kept % l->args.groupnorm.groups != 0)
        st = ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                               "keeps %lld channels, which its %lld groups do not divide; "
                               "choose another amount",
                               (long long)g->kept, (long long)l->args.groupnorm.groups);
    }
  }
  free(imp);
  free(r);
  return st;
}

/* The group whose producers include the layer named `name`, or an error naming it. */
static ganfw_status group_of_layer(ganfw_channel_prune_plan *p, const char *name, group **out) {
  const int32_t i = ganfw_net_layer_index(p->net, name);
  for (int32_t gi = 0; i >= 0 && gi < p->n_g; gi++)
    for (int32_t k = 0; k < p->g[gi].n_producers; k++)
      if (p->g[gi].producers[k] == i) {
        *out = &p->g[gi];
        return GANFW_OK;
      }
  if (i >= 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s (%s): it produces no channels to prune; name a "
                           "conv2d, conv_transpose2d or linear layer",
                           ganfw_net_name(p->net), name, ganfw_net_layer_type(p->net, i));
  const char *near = NULL;
  size_t best = (size_t)-1;
  for (int32_t j = 0; j < p->n_layers; j++) {
    const char *cand = ganfw_net_layer_name(p->net, j);
    const size_t d = ganfw_edit_distance(name, cand);
    if (d < best && ganfw_suggest_near(strlen(name), d)) best = d, near = cand;
  }
  char hint[160] = "";
  if (near) snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
  return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s has no layer '%s'%s",
                         ganfw_net_name(p->net), name, hint);
}

static ganfw_status check_amount(const ganfw_net *net, const char *what, double a) {
  if (a >= 0.0 && a < 1.0) return GANFW_OK;
  return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                         "net %s: channel pruning amount %g for %s is out of range: expected a "
                         "fraction in [0, 1)",
                         ganfw_net_name(net), a, what);
}

/* Each group's amount from the options. */
static ganfw_status assign_amounts(ganfw_channel_prune_plan *p, const ganfw_channel_prune_opts *o) {
  ganfw_status st = check_amount(p->net, "every group", o->amount);
  for (int32_t k = 0; k < o->n_layers && st == GANFW_OK; k++) {
    group *g = NULL;
    if ((st = group_of_layer(p, o->layers[k], &g)) != GANFW_OK) break;
    if (g->why[0] && o->amount > 0)
      st = ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: its channels cannot be pruned: %s",
                           ganfw_net_name(p->net), o->layers[k], g->why);
    g->has_amount = 1, g->amount = o->amount;
  }
  for (int32_t gi = 0; !o->layers && gi < p->n_g; gi++)
    p->g[gi].has_amount = 1, p->g[gi].amount = o->amount;
  for (int32_t k = 0; k < o->n_amounts && st == GANFW_OK; k++) {
    group *g = NULL;
    const ganfw_channel_prune_amount *a = &o->amounts[k];
    if ((st = check_amount(p->net, a->layer, a->amount)) != GANFW_OK ||
        (st = group_of_layer(p, a->layer, &g)) != GANFW_OK)
      break;
    if (g->why[0] && a->amount > 0)
      st = ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: its channels cannot be pruned: %s",
                           ganfw_net_name(p->net), a->layer, g->why);
    g->has_amount = 1, g->amount = a->amount;
  }
  return st;
}

ganfw_status ganfw_channel_prune_plan_create(ganfw_net *net, const ganfw_channel_prune_opts *o,
                                             ganfw_channel_prune_plan **out) {
  *out = NULL;
  if (!net || !o || ganfw_channel_importance_name(o->importance) == NULL)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "channel pruning: a built net and options with an importance (l1, "
                           "l2, bn_gamma) are needed");
  ganfw_channel_prune_plan *p = calloc(1, sizeof *p);
  if (!p) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  p->net = net;
  p->n_layers = ganfw_net_layer_count(net);
  p->val = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *p->val);
  ganfw_status st = p->val ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  int64_t in_shape[GANFW_MAX_DIMS];
  int32_t in_ndim = 0;
  if (st == GANFW_OK && ganfw_net_node_shape(net, -1, in_shape, &in_ndim) != 0)
    st = ganfw_error_set(GANFW_ERR_INVALID_ARG, "channel pruning: net %s is not built",
                         ganfw_net_name(net));
  if (st == GANFW_OK) {
    const int32_t s = new_space(p, in_shape[1], -1, -1);
    if (s < 0)
      st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    else {
      p->input.n = 1, p->input.s[0] = (seg){s, 1};
      snprintf(p->why[s], sizeof p->why[s], "the net's input");
    }
  }
  for (int32_t i = 0; i < p->n_layers && st == GANFW_OK; i++) st = walk_node(p, i);
  if (st == GANFW_OK && p->n_layers > 0) lock(p, &p->val[p->n_layers - 1], "the net's output");
  if (st == GANFW_OK) st = collect_groups(p);
  if (st == GANFW_OK) st = assign_amounts(p, o);
  for (int32_t gi = 0; gi < p->n_g && st == GANFW_OK; gi++)
    st = select_channels(p, &p->g[gi], o->importance);
  if (st != GANFW_OK) {
    ganfw_channel_prune_plan_destroy(p);
    return st;
  }
  *out = p;
  return GANFW_OK;
}

void ganfw_channel_prune_plan_destroy(ganfw_channel_prune_plan *p) {
  if (!p) return;
  for (int32_t gi = 0; gi < p->n_g; gi++) {
    free(p->g[gi].producers);
    free(p->g[gi].consumers);
    free(p->g[gi].norms);
    free(p->g[gi].keep);
  }
  free(p->g);
  free(p->group_of);
  free(p->sp);
  free(p->why);
  free(p->val);
  free(p);
}

int32_t ganfw_channel_prune_group_count(const ganfw_channel_prune_plan *p) {
  return p ? p->n_g : 0;
}

ganfw_status ganfw_channel_prune_group_at(const ganfw_channel_prune_plan *p, int32_t i,
                                          ganfw_channel_group_info *out) {
  if (!p || i < 0 || i >= p->n_g)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "channel group %d does not exist", (int)i);
  const group *g = &p->g[i];
  *out = (ganfw_channel_group_info){.name = ganfw_net_layer_name(p->net, g->producers[0]),
                                    .channels = g->channels,
                                    .kept = g->kept,
                                    .prunable = !g->why[0],
                                    .why = g->why,
                                    .n_producers = g->n_producers,
                                    .n_consumers = g->n_consumers,
                                    .n_norms = g->n_norms,
                                    .producers = g->producers,
                                    .consumers = g->consumers,
                                    .norms = g->norms,
                                    .keep = g->keep};
  return GANFW_OK;
}

/* --- text ---------------------------------------------------------------------------------- */

typedef struct text {
  char *s;
  size_t n, cap;
  int32_t oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
    va_end(ap);
    if (w < 0) return;
    if (t->s && t->n + (size_t)w < t->cap) {
      t->n += (size_t)w;
      return;
    }
    const size_t cap = (t->cap ? 2 * t->cap : 1024) + (size_t)w;
    char *s = realloc(t->s, cap);
    if (!s) {
      t->oom = 1;
      return;
    }
    t->s = s, t->cap = cap;
  }
}

static void put_list(text *t, const ganfw_net *net, const char *what, const int32_t *idx,
                     int32_t n) {
  put(t, "; %s ", what);
  if (n == 0) put(t, "none");
  for (int32_t k = 0; k < n; k++) put(t, "%s%s", k ? ", " : "", ganfw_net_layer_name(net, idx[k]));
}

static ganfw_status text_done(text *t, char **out) {
  if (t->oom || !t->s) {
    free(t->s);
    *out = NULL;
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  *out = t->s;
  return GANFW_OK;
}

ganfw_status ganfw_channel_prune_describe(const ganfw_channel_prune_plan *p, char **out) {
  text t = {0};
  put(&t, "net %s: %d channel groups\n", ganfw_net_name(p->net), (int)p->n_g);
  for (int32_t gi = 0; gi < p->n_g; gi++) {
    const group *g = &p->g[gi];
    put(&t, "  group %d %s: %lld -> %lld channels", (int)gi,
        ganfw_net_layer_name(p->net, g->producers[0]), (long long)g->channels, (long long)g->kept);
    if (g->why[0]) put(&t, " (kept: %s)", g->why);
    put_list(&t, p->net, "producers", g->producers, g->n_producers);
    put_list(&t, p->net, "consumers", g->consumers, g->n_consumers);
    put_list(&t, p->net, "norms", g->norms, g->n_norms);
    put(&t, "\n");
  }
  return text_done(&t, out);
}

int32_t ganfw_channel_prune_widths(const ganfw_channel_prune_plan *p, ganfw_net_width *out,
                                   int32_t cap) {
  int32_t n = 0;
  for (int32_t i = 0; i < p->n_layers; i++) {
    const ganfw_layer *l = ganfw_net_layer_at(p->net, i);
    if (!is_matmul(l)) continue;
    const group *g = &p->g[p->group_of[p->val[i].s[0].space]];
    if (g->kept == g->channels) continue;
    if (out && n < cap) out[n] = (ganfw_net_width){.layer = l->name, .width = g->kept};
    n++;
  }
  return n;
}

/* A trie of dotted names for the nested YAML map. */
typedef struct trie {
  char *key;
  int64_t width; /* leaf: > 0 */
  struct trie *kids;
  int32_t n, cap;
} trie;

static void trie_free(trie *t) {
  for (int32_t k = 0; k < t->n; k++) trie_free(&t->kids[k]);
  free(t->kids);
  free(t->key);
}

static int32_t trie_put(trie *t, const char *name, int64_t width) {
  const char *dot = strchr(name, '.');
  const size_t len = dot ? (size_t)(dot - name) : strlen(name);
  trie *kid = NULL;
  for (int32_t k = 0; k < t->n && !kid; k++)
    if (strlen(t->kids[k].key) == len && strncmp(t->kids[k].key, name, len) == 0) kid = &t->kids[k];
  if (!kid) {
    if (t->n == t->cap) {
      const int32_t cap = t->cap ? 2 * t->cap : 8;
      trie *kids = realloc(t->kids, (size_t)cap * sizeof *kids);
      if (!kids) return -1;
      t->kids = kids, t->cap = cap;
    }
    kid = &t->kids[t->n++];
    memset(kid, 0, sizeof *kid);
    if (!(kid->key = strndup(name, len))) return -1;
  }
  if (!dot) {
    kid->width = width;
    return 0;
  }
  return trie_put(kid, dot + 1, width);
}

/* YAML needs quotes around a key with ':' followed by nothing or a space; quote when it has
 * any ':' to be plain. */
static void trie_print(text *t, const trie *node) {
  put(t, "{");
  for (int32_t k = 0; k < node->n; k++) {
    const trie *kid = &node->kids[k];
    put(t, strchr(kid->key, ':') ? "%s\"%s\": " : "%s%s: ", k ? ", " : "", kid->key);
    if (kid->n)
      trie_print(t, kid);
    else
      put(t, "%lld", (long long)kid->width);
  }
  put(t, "}");
}

ganfw_status ganfw_channel_prune_widths_text(const ganfw_channel_prune_plan *const *p, int32_t n,
                                             char **out) {
  trie root = {0};
  int32_t bad = 0;
  for (int32_t k = 0; k < n && !bad; k++) {
    const int32_t nw = ganfw_channel_prune_widths(p[k], NULL, 0);
    ganfw_net_width *w = calloc((size_t)(nw ? nw : 1), sizeof *w);
    if (!w) {
      bad = 1;
      break;
    }
    ganfw_channel_prune_widths(p[k], w, nw);
    for (int32_t i = 0; i < nw && !bad; i++) {
      char name[512];
      snprintf(name, sizeof name, "%s%s%s", n > 1 ? ganfw_net_name(p[k]->net) : "",
               n > 1 ? ":" : "", w[i].layer);
      bad = trie_put(&root, name, w[i].width) != 0;
    }
    free(w);
  }
  text t = {0};
  if (!bad) trie_print(&t, &root);
  trie_free(&root);
  if (bad) {
    free(t.s);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  return text_done(&t, out);
}

/* --- the sliced state_dict ------------------------------------------------------------------ */

/* The kept indices of a value as the features (or channels) a consumer reads, into idx
 * (malloc'ed; *n of them). */
static ganfw_status value_index(const ganfw_channel_prune_plan *p, const value *v, int64_t **idx,
                                int64_t *n) {
  int64_t total = 0;
  for (int32_t k = 0; k < v->n; k++) total += p->sp[v->s[k].space].channels * v->s[k].mult;
  *idx = malloc((size_t)(total ? total : 1) * sizeof **idx);
  if (!*idx) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  int64_t base = 0;
  *n = 0;
  for (int32_t k = 0; k < v->n; k++) {
    const int32_t s = v->s[k].space, gi = p->group_of[s];
    const int64_t C = p->sp[s].channels, mult = v->s[k].mult;
    const int64_t kept = gi >= 0 ? p->g[gi].kept : C;
    for (int64_t c = 0; c < kept; c++) {
      const int64_t ch = gi >= 0 ? p->g[gi].keep[c] : c;
      for (int64_t m = 0; m < mult; m++) (*idx)[(*n)++] = base + ch * mult + m;
    }
    base += C * mult;
  }
  return GANFW_OK;
}

/* out[a', b', r] = in[k0[a'], k1[b'], r] of in [d0, d1, inner]; k NULL: all. */
static void slice(const float *in, int64_t d1, int64_t inner, const int64_t *k0, int64_t n0,
                  const int64_t *k1, int64_t n1, float *out) {
  for (int64_t a = 0; a < n0; a++)
    for (int64_t b = 0; b < n1; b++) {
      const int64_t sa = k0 ? k0[a] : a, sb = k1 ? k1[b] : b;
      memcpy(out + (a * n1 + b) * inner, in + (sa * d1 + sb) * inner, (size_t)inner * sizeof *out);
    }
}

/* Hands fn tensor t under `name` cut to k0 on dim 0 and k1 on dim 1 (NULL: whole). */
static ganfw_status emit_sliced(ganfw_channel_pruned_fn fn, void *user, const char *name,
                                const ganfw_tensor *t, const int64_t *k0, int64_t n0,
                                const int64_t *k1, int64_t n1) {
  float *h = host_copy(t);
  if (!h) return ganfw_error_code();
  ganfw_channel_pruned out = {.name = name, .ndim = t->ndim};
  memcpy(out.shape, t->shape, sizeof out.shape);
  const int64_t d0 = t->ndim > 0 ? t->shape[0] : 1, d1 = t->ndim > 1 ? t->shape[1] : 1;
  const int64_t plane = d0 * d1, inner = plane > 0 ? t->numel / plane : 1;
  if (!k0) n0 = d0;
  if (!k1) n1 = d1;
  if (t->ndim > 0) out.shape[0] = n0;
  if (t->ndim > 1) out.shape[1] = n1;
  const int64_t numel = n0 * n1 * inner;
  float *o = malloc((size_t)(numel > 0 ? numel : 1) * sizeof *o);
  ganfw_status st = o ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK) {
    slice(h, d1, inner, k0, n0, k1, n1, o);
    out.data = o;
    st = fn(user, &out);
  }
  free(o);
  free(h);
  return st;
}

/* Layer i's tensors, cut. */
static ganfw_status emit_layer(const ganfw_channel_prune_plan *p, int32_t i,
                               ganfw_channel_pruned_fn fn, void *user) {
  const ganfw_layer *l = ganfw_net_layer_at(p->net, i);
  const int64_t *out_k = NULL;
  int64_t n_out = 0, n_in = 0, *in_k = NULL;
  ganfw_status st = GANFW_OK;
  if (is_matmul(l)) {
    const group *g = &p->g[p->group_of[p->val[i].s[0].space]];
    if (g->kept < g->channels) out_k = g->keep, n_out = g->kept;
    if ((st = value_index(p, input_value(p, l->in[0]), &in_k, &n_in)) != GANFW_OK) return st;
  } else if (is_norm(l)) {
    const int32_t gi = p->group_of[input_value(p, l->in[0])->s[0].space];
    if (gi >= 0 && p->g[gi].kept < p->g[gi].channels) out_k = p->g[gi].keep, n_out = p->g[gi].kept;
  }
  const int32_t convt = l->vt == &ganfw_layer_conv_transpose2d;
  for (int32_t k = 0; k < l->nparams && st == GANFW_OK; k++) {
    const char *name = l->param_name[k];
    if (is_matmul(l) && k == 0)
      st = convt ? emit_sliced(fn, user, name, l->param[k], in_k, n_in, out_k, n_out)
                 : emit_sliced(fn, user, name, l->param[k], out_k, n_out, in_k, n_in);
    else
      st = emit_sliced(fn, user, name, l->param[k], out_k, n_out, NULL, 0);
  }
  const ganfw_batchnorm_args *bn = l->vt == &ganfw_layer_batchnorm2d ? &l->args.batchnorm : NULL;
  if (bn && st == GANFW_OK) {
    st = emit_sliced(fn, user, bn->buffer_name[0], bn->running_mean, out_k, n_out, NULL, 0);
    if (st == GANFW_OK)
      st = emit_sliced(fn, user, bn->buffer_name[1], bn->running_var, out_k, n_out, NULL, 0);
    const ganfw_channel_pruned count = {
        .name = bn->buffer_name[2], .ndim = 0, .counter = &bn->num_batches_tracked};
    if (st == GANFW_OK) st = fn(user, &count);
  }
  for (int32_t k = 0; k < l->nextra && st == GANFW_OK; k++) /* locked: as they are */
    st = emit_sliced(fn, user, l->extra_name[k], l->extra[k], NULL, 0, NULL, 0);
  free(in_k);
  return st;
}

ganfw_status ganfw_channel_prune_each(const ganfw_channel_prune_plan *p, ganfw_channel_pruned_fn fn,
                                      void *user) {
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < p->n_layers && st == GANFW_OK; i++) st = emit_layer(p, i, fn, user);
  return st;
}

ganfw_net *ganfw_channel_prune_plan_net(const ganfw_channel_prune_plan *p) {
  return p ? p->net : NULL;
}
