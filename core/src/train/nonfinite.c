/* train.on_nonfinite inside the steps (see nonfinite.h): the per-step gradient check, the
 * search for the first non-finite layer (only after a failure) and the messages. */
#include "train/nonfinite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "plugin/plugin_host.h"
#include "runtime/tensor.h"

ganfw_status ganfw_grad_list_init(ganfw_grad_list *g, const ganfw_session_optim *o) {
  g->n = 0;
  g->t = calloc((size_t)(o->n_params ? o->n_params : 1), sizeof *g->t);
  if (!g->t) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int64_t i = 0; i < o->n_params; i++)
    if (o->params[i].grad) g->t[g->n++] = o->params[i].grad;
  return GANFW_OK;
}

void ganfw_grad_list_free(ganfw_grad_list *g) {
  free(g->t);
  g->t = NULL;
  g->n = 0;
}

ganfw_status ganfw_grad_list_nonfinite(ganfw_ctx *ctx, const ganfw_grad_list *g, int32_t *bad) {
  *bad = 0;
  if (g->n == 0) return GANFW_OK;
  return ganfw_host_table()->foreach_nonfinite(ctx, g->t, g->n, bad);
}

void ganfw_nonfinite_locate(const ganfw_nonfinite_hop *hops, int32_t n_hops, ganfw_tensor *x,
                            char *buf, size_t n) {
  ganfw_tensor *in = ganfw_tensor_retain(x);
  ganfw_status st = GANFW_OK;
  char layer[256];
  snprintf(buf, n,
           "a checked forward gives finite outputs at every layer (the loss itself "
           "overflowed: its inputs are too large)");
  for (int32_t h = 0; h < n_hops && in; h++) {
    ganfw_net *net = hops[h].net;
    ganfw_net_nonfinite f;
    ganfw_tensor *out = NULL;
    st = ganfw_net_find_nonfinite(net, in, hops[h].rng_offset, &f, h + 1 < n_hops ? &out : NULL);
    ganfw_tensor_destroy(in);
    in = out;
    if (st != GANFW_OK) break;
    if (f.layer < 0) {
      ganfw_net_layer_describe(net, 0, layer, sizeof layer);
      snprintf(buf, n, "%s already holds NaN or inf before the first layer, %s", hops[h].input,
               layer);
      break;
    }
    if (f.layer < ganfw_net_layer_count(net)) {
      ganfw_net_layer_describe(net, f.layer, layer, sizeof layer);
      snprintf(buf, n, "the first non-finite output is that of layer %s%s", layer,
               f.bad_state ? ", whose parameters already hold NaN or inf (an earlier update "
                             "overflowed)"
                           : "");
      break;
    }
  }
  ganfw_tensor_destroy(in);
  if (st != GANFW_OK) {
    snprintf(buf, n, "the layer could not be found (%s)", ganfw_error_message());
    ganfw_error_clear();
  }
}

void ganfw_nonfinite_grad_what(ganfw_net *net, const char *role, const char *loss_name, double loss,
                               const char *found_by, char *buf, size_t n) {
  int32_t i = -1;
  char layer[256] = "";
  ganfw_status st = ganfw_net_nonfinite_grad_layer(net, &i);
  if (st != GANFW_OK) {
    snprintf(layer, sizeof layer, " (the layer could not be found: %s)", ganfw_error_message());
    ganfw_error_clear();
  } else if (i >= 0) {
    ganfw_net_layer_describe(net, i, layer, sizeof layer);
  }
  const int finite = isfinite(loss);
  int used = snprintf(buf, n, "%s%sthe %s's %s is %g%s, and its gradients hold NaN or inf",
                      found_by, *found_by ? "; " : "", role, loss_name, isnan(loss) ? NAN : loss,
                      finite ? " (the forward was finite)" : "");
  if (used < 0 || (size_t)used >= n) return;
  if (i >= 0)
    snprintf(buf + used, n - (size_t)used,
             ": the gradient of layer %s went non-finite first (in backward order)", layer);
  else
    snprintf(buf + used, n - (size_t)used, "%s", layer);
}

ganfw_status ganfw_nonfinite_act(const ganfw_session *s, const char *role, const char *what,
                                 char *note, size_t note_n) {
  if (s->train.on_nonfinite == GANFW_NONFINITE_SKIP) {
    snprintf(note, note_n, "%s", what);
    return GANFW_OK;
  }
  return ganfw_error_set(GANFW_ERR_NUMERIC,
                         "%s; stopped before the %s's update (train.on_nonfinite: stop), the "
                         "checkpoints written so far are kept: training diverged; lower optim.lr "
                         "(or warm up, optim.warmup_steps), or set train.on_nonfinite: skip to "
                         "skip such updates",
                         what, role);
}

ganfw_status ganfw_nonfinite_check_weights(const ganfw_session *s, int64_t step) {
  for (int32_t k = 0; k < s->n_optim; k++) {
    ganfw_net *net = s->optim[k].net;
    int32_t i = -1;
    ganfw_status st = ganfw_net_nonfinite_state_layer(net, &i);
    if (st != GANFW_OK) return st;
    if (i < 0) continue;
    char layer[256];
    ganfw_net_layer_describe(net, i, layer, sizeof layer);
    return ganfw_error_set(GANFW_ERR_NUMERIC,
                           "step %lld: the %s's layer %s holds NaN or inf parameters after the "
                           "update: training diverged; no checkpoint of them is written (the "
                           "earlier ones are kept); lower optim.lr",
                           (long long)step, s->optim[k].role, layer);
  }
  return GANFW_OK;
}

ganfw_status ganfw_nonfinite_after_step(const ganfw_session *s, int64_t step, const char *skipped,
                                        const char *what, ganfw_nonfinite_count *count) {
  if (!skipped) {
    count->in_a_row = 0;
    return GANFW_OK;
  }
  count->total++;
  count->in_a_row++;
  const long long limit = (long long)s->train.max_nonfinite_skips;
  if (count->in_a_row >= s->train.max_nonfinite_skips)
    return ganfw_error_set(GANFW_ERR_NUMERIC,
                           "step %lld: %s; %s skipped, and %lld steps in a row were skipped for "
                           "NaN or inf values (train.max_nonfinite_skips: %lld): training "
                           "diverged; stopped, the checkpoints written so far are kept; lower "
                           "optim.lr (or warm up, optim.warmup_steps)",
                           (long long)step, what, skipped, (long long)count->in_a_row, limit);
  ganfw_log(GANFW_LOG_WARN,
            "step %lld: %s; %s skipped (train.on_nonfinite: skip; %lld in a row, the run stops at "
            "%lld; %lld in all)",
            (long long)step, what, skipped, (long long)count->in_a_row, limit,
            (long long)count->total);
  return GANFW_OK;
}
