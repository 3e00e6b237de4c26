/* Memory strategy step_in_backward, the core's half (see sib.h): the refusals, the grad
 * hook that updates one layer's parameters and releases its gradients, and the release of a
 * whole optimizer's gradients after its step. */
#include "train/sib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/tensor.h"

struct ganfw_sib {
  ganfw_session *s;
  int32_t armed;       /* the optimizer whose step is open in backward, or -1 */
  ganfw_status failed; /* the first error inside the hook (GANFW_OK: none) */
  char message[1024];  /* its message */
  int64_t stepped;     /* parameters updated in the open step */
};

/* The refusal of `key` (config key or plugin) with why and what to do. */
static ganfw_status refuse(const ganfw_session *s, const char *key, const char *why) {
  return ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s: memory strategy step_in_backward cannot run with %s: %s",
                         s->run->config_path, key, why);
}

static ganfw_status check(const ganfw_session *s) {
  const ganfw_exec_options *e = &s->exec;
  if (s->family == GANFW_MODEL_NETS)
    return refuse(s, "trainer",
                  "it steps the built-in gan and classifier trainers only; drop "
                  "the memory entry for a trainer plugin");
  if (e->micro_batches > 1)
    return refuse(s, "micro_batches > 1 (memory strategy accumulate)",
                  "the gradients of every micro-batch add up before one step, so none is final "
                  "in a backward; drop one of the two");
  if (e->shard_optimizer)
    return refuse(s, "memory strategy zero",
                  "ZeRO updates a shard of all parameters after the whole backward; drop one of "
                  "the two");
  if (e->ranks > 1)
    return refuse(s, "data-parallel ranks > 1",
                  "the ranks' gradients are summed after backward; train on one rank");
  if (s->train.clip_grad_norm[0] > 0)
    return refuse(s, "train.clip_grad_norm",
                  "global-norm clipping needs every gradient before any update; drop the key "
                  "(or its first entry)");
  if (s->train.on_nonfinite == GANFW_NONFINITE_SKIP)
    return refuse(s, "train.on_nonfinite: skip",
                  "a layer's update cannot be taken back once a later layer's gradient turns "
                  "out non-finite; use train.on_nonfinite: stop");
  if (s->n_param_groups > 0)
    return refuse(s, "optim.param_groups",
                  "the groups step as one optimizer each after "
                  "backward; drop optim.param_groups");
  for (int32_t i = 0; i < s->n_memory; i++) {
    const ganfw_session_memory *m = &s->memory[i];
    if (m->vt->loss_scale && m->vt->loss_scale(m->self, 0) != 1.0)
      return refuse(s, "a loss scaler (amp dtype f16 with scaler dynamic)",
                    "its inf/NaN check needs every gradient before any step; use amp dtype "
                    "bf16 or scaler: none");
  }
  const ganfw_session_optim *o = &s->optim[0];
  if (!o->vt->step_begin || !o->vt->step_param || !o->vt->step_end)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: memory strategy step_in_backward: optimizer plugin '%s' has no "
                           "step in parts (ganfw_optim_vt.step_begin/step_param/step_end, ABI "
                           "1.10); use adam, adamw or sgd",
                           s->run->config_path, ganfw_plugin_name(s->run->optim));
  return GANFW_OK;
}

ganfw_status ganfw_sib_create(ganfw_session *s, ganfw_sib **out) {
  *out = NULL;
  if (!s->exec.step_in_backward) return GANFW_OK;
  ganfw_status st = check(s);
  if (st != GANFW_OK) return st;
  ganfw_sib *b = calloc(1, sizeof *b);
  if (!b) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  b->s = s;
  b->armed = -1;
  for (int32_t opt = 0; opt < s->n_optim && st == GANFW_OK; opt++) st = ganfw_sib_release(b, opt);
  if (st != GANFW_OK) {
    free(b);
    return st;
  }
  *out = b;
  return GANFW_OK;
}

void ganfw_sib_destroy(ganfw_sib *b) {
  free(b);
}

int32_t ganfw_sib_active(const ganfw_sib *b, int32_t opt) {
  return b && opt == 0;
}

ganfw_status ganfw_sib_release(ganfw_sib *b, int32_t opt) {
  if (!b) return GANFW_OK;
  const ganfw_session_optim *o = &b->s->optim[opt];
  for (int64_t i = 0; i < o->n_params; i++) {
    ganfw_status st =
        o->params[i].grad ? ganfw_tensor_storage_release(o->params[i].grad) : GANFW_OK;
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* Records the hook's first error; the layers after it are left alone. */
static void fail(ganfw_sib *b, ganfw_status st) {
  b->failed = st;
  snprintf(b->message, sizeof b->message, "%s", ganfw_error_message());
}

/* The grad hook: grads[0..n) of one layer are final. Lets the strategies see them
 * (after_backward on the layer's parameters: e.g. amp's non-finite check), checks them for
 * NaN or inf, updates their parameters and releases their storage. */
static void on_layer(void *user, ganfw_tensor *const *grads, int32_t n) {
  ganfw_sib *b = user;
  if (b->failed != GANFW_OK || n <= 0) return;
  ganfw_session *s = b->s;
  ganfw_session_optim *o = &s->optim[b->armed];
  int64_t first = -1;
  for (int64_t i = 0; i < o->n_params && first < 0; i++)
    if (o->params[i].grad == grads[0]) first = i;
  if (first < 0 || first + n > o->n_params) return; /* not this optimizer's (frozen) */
  for (int32_t k = 1; k < n; k++)
    if (o->params[first + k].grad != grads[k]) {
      fail(b, ganfw_error_set(GANFW_ERR_INTERNAL,
                              "step_in_backward: the gradients of '%s' are not in the order of "
                              "the %s's parameter list",
                              o->params[first].name, o->role));
      return;
    }
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < s->n_memory && st == GANFW_OK; i++) {
    const ganfw_session_memory *m = &s->memory[i];
    int32_t skip = 0;
    if (!m->vt->after_backward) continue;
    st = m->vt->after_backward(m->self, b->armed, &o->params[first], n, &skip);
    if (st != GANFW_OK)
      st = ganfw_error_wrap(st, "memory strategy '%s' (step_in_backward, parameter '%s')", m->name,
                            o->params[first].name);
    else if (skip)
      st = ganfw_error_set(GANFW_ERR_NUMERIC,
                           "memory strategy '%s' asks to skip the %s's step at parameter '%s', "
                           "but step_in_backward has updated the layers nearer the output",
                           m->name, o->role, o->params[first].name);
  }
  int32_t bad = 0;
  if (st == GANFW_OK)
    st = ganfw_host_table()->foreach_nonfinite(s->ctx, (ganfw_tensor **)grads, n, &bad);
  if (st == GANFW_OK && bad)
    st = ganfw_error_set(GANFW_ERR_NUMERIC,
                         "the %s's gradient of '%s' holds NaN or inf (train.on_nonfinite: stop); "
                         "step_in_backward had already updated the layers nearer the output "
                         "this step; lower optim.lr",
                         o->role, o->params[first].name);
  for (int32_t k = 0; k < n && st == GANFW_OK; k++) {
    st = o->vt->step_param(o->self, first + k);
    if (st != GANFW_OK) st = ganfw_error_wrap(st, "optimizer step of the %s", o->role);
  }
  for (int32_t k = 0; k < n && st == GANFW_OK; k++) st = ganfw_tensor_storage_release(grads[k]);
  if (st != GANFW_OK) fail(b, st);
  b->stepped += n;
}

ganfw_status ganfw_sib_arm(ganfw_sib *b, int32_t opt) {
  ganfw_session_optim *o = &b->s->optim[opt];
  ganfw_status st = o->vt->step_begin(o->self, o->lr);
  if (st != GANFW_OK) return ganfw_error_wrap(st, "optimizer step of the %s", o->role);
  b->armed = opt;
  b->failed = GANFW_OK;
  b->stepped = 0;
  ganfw_net_set_grad_hook(o->net, on_layer, b);
  return GANFW_OK;
}

ganfw_status ganfw_sib_finish(ganfw_sib *b, int32_t opt, ganfw_status st) {
  ganfw_session_optim *o = &b->s->optim[opt];
  ganfw_net_set_grad_hook(o->net, NULL, NULL);
  b->armed = -1;
  if (st == GANFW_OK && b->failed != GANFW_OK) st = ganfw_error_set(b->failed, "%s", b->message);
  ganfw_status end = o->vt->step_end(o->self);
  if (st == GANFW_OK && end != GANFW_OK)
    st = ganfw_error_wrap(end, "optimizer step of the %s", o->role);
  /* gradients a failed step left (the layers it did not reach) go back too */
  ganfw_status rel = ganfw_sib_release(b, opt);
  return st != GANFW_OK ? st : rel;
}
