/* The `prune:` section during a run (prune_run.h): reads it, installs the target layers'
 * masks at session open, prunes before the due steps and removes the masks at the end when
 * asked. The masks themselves are nn/prune.c's. */
#include "train/prune_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "config/config.h"
#include "nn/net.h"
#include "nn/prune.h"
#include "train/session.h"

static const char *const method_names[GANFW_PRUNE_METHOD_COUNT] = {
    "l1_unstructured", "global_unstructured", "ln_structured"};
_Static_assert(sizeof method_names / sizeof method_names[0] == GANFW_PRUNE_METHOD_COUNT,
               "one name per pruning method");

struct ganfw_prune_run {
  int32_t method;
  ganfw_prune_amount amount; /* as configured: a fraction or a count */
  int32_t n, dim;            /* ln_structured */
  int32_t scheduled;
  int64_t start, end, every;
  double initial;
  int32_t remove;
  ganfw_prune_target *t; /* the target layers; names borrowed from the nets */
  int32_t nt;
};

double ganfw_prune_schedule_target(int64_t t0, int64_t end, double s_i, double s_f, int64_t t) {
  if (t < t0) return s_i;
  if (t >= end || end <= t0) return s_f;
  const double r = 1.0 - (double)(t - t0) / (double)(end - t0);
  return s_f + (s_i - s_f) * r * r * r;
}

int32_t ganfw_prune_schedule_due(int64_t t0, int64_t end, int64_t every, int64_t t) {
  if (t < t0 || t > end) return 0;
  return t == end || (every > 0 && (t - t0) % every == 0);
}

void ganfw_prune_run_destroy(ganfw_prune_run *p) {
  if (!p) return;
  free(p->t);
  free(p);
}

static ganfw_status add_target(ganfw_prune_run *p, ganfw_net *net, const char *layer) {
  for (int32_t i = 0; i < p->nt; i++)
    if (p->t[i].net == net && strcmp(p->t[i].layer, layer) == 0) return GANFW_OK;
  ganfw_prune_target *t = realloc(p->t, (size_t)(p->nt + 1) * sizeof *t);
  if (!t) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  p->t = t;
  p->t[p->nt++] = (ganfw_prune_target){net, layer};
  return GANFW_OK;
}

/* One item of prune.layers: a layer name, or a name whose layers under it ("features") are
 * taken (the prunable ones). */
static ganfw_status read_item(ganfw_session *s, ganfw_prune_run *p, const ganfw_cfg *item) {
  const char *text = NULL, *rest = NULL;
  ganfw_net *net = NULL;
  ganfw_status st = ganfw_session_cfg_item_net(s, item, &text, &net, &rest);
  if (st != GANFW_OK) return st;
  const int32_t layers = ganfw_net_layer_count(net);
  for (int32_t k = 0; k < layers; k++)
    if (strcmp(ganfw_net_layer_name(net, k), rest) == 0) {
      if (!ganfw_prune_layer_prunable(net, k))
        return ganfw_error_set(GANFW_ERR_CONFIG,
                               "%s: %s '%s': layer %s of net %s is a %s, which has no weight to "
                               "prune; conv2d, conv_transpose2d and linear layers can be pruned",
                               ganfw_cfg_where(item), ganfw_cfg_path(item), text, rest,
                               ganfw_net_name(net), ganfw_net_layer_type(net, k));
      return add_target(p, net, ganfw_net_layer_name(net, k));
    }
  const size_t len = strlen(rest);
  int32_t matched = 0;
  for (int32_t k = 0; k < layers && st == GANFW_OK; k++) {
    const char *name = ganfw_net_layer_name(net, k);
    if (strncmp(name, rest, len) == 0 && name[len] == '.' && ganfw_prune_layer_prunable(net, k)) {
      st = add_target(p, net, name);
      matched++;
    }
  }
  if (st != GANFW_OK || matched) return st;
  if (!ganfw_prune_find_layer(net, rest))
    return ganfw_error_wrap(ganfw_error_code(), "%s: %s '%s'", ganfw_cfg_where(item),
                            ganfw_cfg_path(item), text);
  return ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s '%s': no prunable layer under it",
                         ganfw_cfg_where(item), ganfw_cfg_path(item), text);
}

static ganfw_status read_layers(ganfw_session *s, ganfw_prune_run *p, const ganfw_cfg *sec) {
  if (!ganfw_cfg_has(sec, "layers")) { /* every conv/linear weight of every net */
    for (int32_t r = 0; r < s->n_nets; r++) {
      ganfw_net *net = s->nets[r].net;
      for (int32_t k = 0; k < ganfw_net_layer_count(net); k++) {
        if (!ganfw_prune_layer_prunable(net, k)) continue;
        ganfw_status st = add_target(p, net, ganfw_net_layer_name(net, k));
        if (st != GANFW_OK) return st;
      }
    }
    if (!p->nt)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "prune: the model has no conv2d, conv_transpose2d or linear layer "
                             "to prune");
    return GANFW_OK;
  }
  const int64_t n = ganfw_cfg_list_len(sec, "layers");
  if (n <= 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: prune.layers must be a list of layer names (e.g. [features.0]); "
                           "leave it out to prune every conv and linear layer",
                           ganfw_cfg_where(ganfw_cfg_child(sec, "layers")));
  for (int64_t i = 0; i < n; i++) {
    ganfw_status st = read_item(s, p, ganfw_cfg_list_at(sec, "layers", i));
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* prune.amount: an integer is a count, a number with a point or exponent a fraction. */
static ganfw_status read_amount(const ganfw_cfg *sec, ganfw_prune_run *p) {
  const ganfw_cfg *node = ganfw_cfg_child(sec, "amount");
  const char *text = NULL;
  ganfw_status st = ganfw_cfg_string(sec, "amount", NULL, &text);
  if (st != GANFW_OK) return st;
  if (!text)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "prune.amount is required: a fraction in [0, 1) of the weights, or "
                           "an integer count");
  char *end = NULL;
  const long long count = strtoll(text, &end, 10);
  if (end != text && !*end) {
    if (count < 0)
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: prune.amount %s: a count must be >= 0",
                             ganfw_cfg_where(node), text);
    p->amount = ganfw_prune_count(count);
    return GANFW_OK;
  }
  const double f = strtod(text, &end);
  if (end == text || *end || !(f >= 0.0 && f < 1.0))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: prune.amount is '%s'; give a fraction in [0, 1) (0.5) or an "
                           "integer count of weights (ln_structured: of slices)",
                           ganfw_cfg_where(node), text);
  p->amount = ganfw_prune_fraction(f);
  return GANFW_OK;
}

static ganfw_status read_schedule(const ganfw_cfg *sec, ganfw_prune_run *p) {
  const ganfw_cfg *sch = ganfw_cfg_child(sec, "schedule");
  if (!sch) return GANFW_OK;
  p->scheduled = 1;
  ganfw_status st;
  if ((st = ganfw_cfg_int_in(sch, "start_step", 0, 0, INT64_MAX / 2, &p->start)) ||
      (st = ganfw_cfg_int_in(sch, "end_step", p->start, 0, INT64_MAX / 2, &p->end)) ||
      (st = ganfw_cfg_int_in(sch, "every", 1, 1, INT64_MAX / 2, &p->every)) ||
      (st = ganfw_cfg_float_in(sch, "initial", 0.0, 0.0, 1.0, GANFW_CFG_OPEN_HI, &p->initial)))
    return st;
  if (p->end < p->start)
    return ganfw_error_set(
        GANFW_ERR_CONFIG, "%s: prune.schedule.end_step %lld is before start_step %lld",
        ganfw_cfg_where(ganfw_cfg_child(sch, "end_step")), (long long)p->end, (long long)p->start);
  if (p->amount.count >= 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: prune.amount with a schedule is the final sparsity: give a "
                           "fraction in [0, 1), not a count",
                           ganfw_cfg_where(ganfw_cfg_child(sec, "amount")));
  if (p->initial > p->amount.fraction)
    return ganfw_error_set(
        GANFW_ERR_CONFIG, "%s: prune.schedule.initial %g is above prune.amount %g",
        ganfw_cfg_where(ganfw_cfg_child(sch, "initial")), p->initial, p->amount.fraction);
  return GANFW_OK;
}

static ganfw_status read_section(ganfw_session *s, const ganfw_cfg *sec, ganfw_prune_run *p) {
  const char *method = NULL;
  ganfw_status st = ganfw_cfg_string(sec, "method", "l1_unstructured", &method);
  if (st != GANFW_OK) return st;
  p->method = -1;
  for (int32_t k = 0; method && k < GANFW_PRUNE_METHOD_COUNT; k++)
    if (strcmp(method, method_names[k]) == 0) p->method = k;
  if (p->method < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: prune.method is '%s'; use l1_unstructured, global_unstructured or "
                           "ln_structured",
                           ganfw_cfg_where(ganfw_cfg_child(sec, "method")), method ? method : "");
  if ((st = read_amount(sec, p)) != GANFW_OK) return st;
  int64_t n = 2, dim = 0;
  if (p->method == GANFW_PRUNE_LN_STRUCTURED &&
      ((st = ganfw_cfg_int_in(sec, "n", 2, 1, 2, &n)) ||
       (st = ganfw_cfg_int_in(sec, "dim", 0, 0, 1, &dim))))
    return st;
  p->n = (int32_t)n, p->dim = (int32_t)dim;
  if ((st = read_schedule(sec, p)) != GANFW_OK) return st;
  if ((st = ganfw_cfg_bool(sec, "remove", 0, &p->remove)) != GANFW_OK) return st;
  return read_layers(s, p, sec);
}

ganfw_status ganfw_prune_run_open(ganfw_session *s, ganfw_prune_run **out) {
  *out = NULL;
  ganfw_config *c = s->run->config;
  const ganfw_cfg *root = ganfw_config_root(c);
  if (!ganfw_cfg_has(root, "prune")) return GANFW_OK;
  static const char *const keys[] = {"method", "amount",   "layers", "n",
                                     "dim",    "schedule", "remove"};
  ganfw_config_known_keys(c, "prune", keys, sizeof keys / sizeof keys[0]);
  static const char *const skeys[] = {"start_step", "end_step", "every", "initial"};
  ganfw_config_known_keys(c, "prune.schedule", skeys, sizeof skeys / sizeof skeys[0]);
  ganfw_prune_run *p = calloc(1, sizeof *p);
  if (!p) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = read_section(s, ganfw_cfg_section(root, "prune"), p);
  for (int32_t i = 0; i < p->nt && st == GANFW_OK; i++)
    st = ganfw_prune_mask_layer(p->t[i].net, p->t[i].layer);
  if (st != GANFW_OK) {
    ganfw_prune_run_destroy(p);
    return ganfw_error_wrap(st, "prune");
  }
  *out = p;
  return GANFW_OK;
}

/* The count to prune now, of `remaining` units still kept of `total`, so that
 * round(target * total) are pruned in all. */
static int64_t count_for(double target, int64_t remaining, int64_t total) {
  const int64_t want = (int64_t)nearbyint(target * (double)total);
  const int64_t have = total - remaining;
  return want > have ? want - have : 0;
}

/* Prunes every target to the total sparsity `target` (a schedule event). */
static ganfw_status prune_to(ganfw_prune_run *p, double target) {
  ganfw_status st = GANFW_OK;
  if (p->method == GANFW_PRUNE_GLOBAL_UNSTRUCTURED) {
    int64_t kept = 0, total = 0;
    for (int32_t i = 0; i < p->nt && st == GANFW_OK; i++) {
      int64_t k, t;
      st = ganfw_prune_layer_kept(p->t[i].net, p->t[i].layer, -1, &k, &t, NULL, NULL);
      kept += k, total += t;
    }
    if (st == GANFW_OK)
      st = ganfw_prune_global_unstructured(p->t, p->nt,
                                           ganfw_prune_count(count_for(target, kept, total)));
    return st;
  }
  for (int32_t i = 0; i < p->nt && st == GANFW_OK; i++) {
    const ganfw_prune_target *t = &p->t[i];
    int64_t k, n, ks, ns;
    st = ganfw_prune_layer_kept(t->net, t->layer, p->dim, &k, &n, &ks, &ns);
    if (st != GANFW_OK) break;
    if (p->method == GANFW_PRUNE_L1_UNSTRUCTURED)
      st =
          ganfw_prune_l1_unstructured(t->net, t->layer, ganfw_prune_count(count_for(target, k, n)));
    else
      st = ganfw_prune_ln_structured(t->net, t->layer, ganfw_prune_count(count_for(target, ks, ns)),
                                     p->n, p->dim);
  }
  return st;
}

/* Prunes every target once by the configured amount (over what remains). */
static ganfw_status prune_once(ganfw_prune_run *p) {
  if (p->method == GANFW_PRUNE_GLOBAL_UNSTRUCTURED)
    return ganfw_prune_global_unstructured(p->t, p->nt, p->amount);
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < p->nt && st == GANFW_OK; i++)
    st = p->method == GANFW_PRUNE_L1_UNSTRUCTURED
             ? ganfw_prune_l1_unstructured(p->t[i].net, p->t[i].layer, p->amount)
             : ganfw_prune_ln_structured(p->t[i].net, p->t[i].layer, p->amount, p->n, p->dim);
  return st;
}

/* "generator 12.5% (1234 of 9876), ..." over the targets' nets */
static void describe(const ganfw_prune_run *p, char *buf, size_t cap) {
  buf[0] = '\0';
  int64_t zeros = 0, total = 0;
  for (int32_t i = 0; i < p->nt; i++) {
    ganfw_prune_sparsity sp;
    if (ganfw_prune_layer_sparsity(p->t[i].net, p->t[i].layer, &sp) != GANFW_OK) continue;
    zeros += sp.zeros, total += sp.total;
  }
  snprintf(buf, cap, "%lld of %lld weights of the %d pruned layers zero (%.2f%%)", (long long)zeros,
           (long long)total, (int)p->nt, total ? 100.0 * (double)zeros / (double)total : 0.0);
}

ganfw_status ganfw_prune_run_step(ganfw_prune_run *p, int64_t step) {
  if (!p) return GANFW_OK;
  ganfw_status st;
  char target[64] = "";
  if (p->scheduled) {
    if (!ganfw_prune_schedule_due(p->start, p->end, p->every, step)) return GANFW_OK;
    const double s_t =
        ganfw_prune_schedule_target(p->start, p->end, p->initial, p->amount.fraction, step);
    snprintf(target, sizeof target, " to %.2f%%", 100.0 * s_t);
    st = prune_to(p, s_t);
  } else {
    if (step != 0) return GANFW_OK; /* once, before the first step; a resume has the masks */
    st = prune_once(p);
  }
  if (st != GANFW_OK) return ganfw_error_wrap(st, "prune before step %lld", (long long)step + 1);
  char what[256];
  describe(p, what, sizeof what);
  ganfw_log(GANFW_LOG_INFO, "prune before step %lld: %s%s: %s", (long long)step + 1,
            method_names[p->method], target, what);
  return GANFW_OK;
}

ganfw_status ganfw_prune_run_finish(ganfw_prune_run *p) {
  if (!p || !p->remove) return GANFW_OK;
  for (int32_t i = 0; i < p->nt; i++) {
    ganfw_status st = ganfw_prune_remove(p->t[i].net, p->t[i].layer);
    if (st != GANFW_OK) return ganfw_error_wrap(st, "prune.remove");
  }
  ganfw_log(GANFW_LOG_INFO, "prune.remove: the masks of %d layers are permanent (plain weights)",
            (int)p->nt);
  p->remove = 0;
  return GANFW_OK;
}
