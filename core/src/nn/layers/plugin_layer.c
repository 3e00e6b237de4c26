/* plugin layer (host->net_custom): a layer kind defined by a plugin through a
 * ganfw_layer_def (ganfw/host.h), run by the executor like the core's layers. Shapes are the
 * plugin's (infer, batch first, 1 to 4 dims, the batch kept). The adapter allocates the
 * output and the input gradient in the compute dtype and hands the plugin f32 tensors
 * (converted copies under AMP), keeps the input and output for backward as references when
 * the def asks, and owns the tensors the plugin puts in saved[]. Around each call it counts
 * the tensors the plugin creates through host->tensor_create (a scope on this thread, fed by
 * plugin/host.c; views from host->tensor_reshape are recorded with no bytes of their own),
 * then checks them against the def's saved_bytes and workspace_bytes:
 *   forward with a tape:  sum of saved[] nbytes == saved_bytes, peak - saved == workspace
 *   no-grad forward:      peak <= saved_bytes + workspace_bytes(forward)
 *   backward:             peak == workspace_bytes(backward) when it computes dx and every
 *                         parameter gradient, <= otherwise; nothing left at the end
 * so that `ganfw plan`, which runs this same code on the meta backend, stays exact. A
 * mismatch is an error naming the node and both figures. Saved slots: t[0] the kept input,
 * t[1] the kept output, t[2..] the plugin's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/plugin_frame.h"
#include "nn/layer.h"
#include "runtime/tensor_cast.h"

/* The smallest def a plugin may hand: through backward, the last required member. */
#define PL_DEF_MIN_SIZE (offsetof(ganfw_layer_def, backward) + sizeof(void *))

/* The def's callbacks, each run as a named plugin call (base/plugin_frame.h). */
enum {
  PL_INFER,
  PL_SAVED_BYTES,
  PL_WORKSPACE_BYTES,
  PL_INIT,
  PL_FORWARD,
  PL_BACKWARD,
  PL_DESTROY,
  PL_BACKWARD2,
  PL_CALL_COUNT
};
static const char *const pl_call_names[] = {
    "layer.infer",   "layer.saved_bytes", "layer.workspace_bytes", "layer.init",
    "layer.forward", "layer.backward",    "layer.destroy",         "layer.backward2"};
_Static_assert(sizeof(pl_call_names) / sizeof(pl_call_names[0]) == PL_CALL_COUNT,
               "pl_call_names must name every PL_* call");

typedef struct pl_impl {
  ganfw_layer_vt vt;   /* ganfw_layer_plugin with the plugin's type name */
  ganfw_layer_def def; /* the plugin's def in the core's size: absent members NULL */
  void *state;
  char *type;
  /* the plugin that defined the layer (the call current at net_custom) and each callback;
   * plugin NULL when none was named */
  ganfw_plugin_frame frame[PL_CALL_COUNT];
} pl_impl;

struct ganfw_layer_init {
  ganfw_layer *l;
};

static const ganfw_layer_def *def_of(const ganfw_layer *l) {
  return &((const pl_impl *)l->impl)->def;
}

static void *state_of(const ganfw_layer *l) {
  return ((const pl_impl *)l->impl)->state;
}

/* Makes the def's callback `call` this thread's current plugin call; returns the previous. */
static const ganfw_plugin_frame *enter(const ganfw_layer *l, int call) {
  return ganfw_plugin_enter(&((const pl_impl *)l->impl)->frame[call]);
}

/* "[8,16,4,4]" into buf. */
static const char *shape_str(const int64_t *shape, int32_t ndim, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int32_t d = 0; d < ndim && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, d ? ",%lld" : "%lld", (long long)shape[d]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* --- the scope: tensors a plugin call creates through the host table -------------------- */

typedef struct pl_scope {
  struct pl_scope *prev;
  ganfw_tensor **made; /* created in this call and not destroyed yet */
  int32_t n, cap;
  int32_t lost;       /* a tensor could not be recorded (out of host memory) */
  int64_t live, peak; /* bytes of made, now and at most */
  int32_t refused;    /* destroys refused */
  char refused_name[128];
} pl_scope;

static _Thread_local pl_scope *pl_current;

static void scope_begin(pl_scope *sc) {
  memset(sc, 0, sizeof *sc);
  sc->prev = pl_current;
  pl_current = sc;
}

static void scope_end(pl_scope *sc) {
  pl_current = sc->prev;
}

static int32_t scope_find(const pl_scope *sc, const ganfw_tensor *t) {
  for (int32_t i = sc->n - 1; i >= 0; i--)
    if (sc->made[i] == t) return i;
  return -1;
}

/* The bytes t holds of its own: a view (host->tensor_reshape) holds none. */
static int64_t own_bytes(const ganfw_tensor *t) {
  return ganfw_tensor_is_view(t) ? 0 : t->nbytes;
}

void ganfw_plugin_layer_note_create(ganfw_tensor *t) {
  pl_scope *sc = pl_current;
  if (!sc || !t) return;
  if (sc->n == sc->cap) {
    int32_t cap = sc->cap ? 2 * sc->cap : 8;
    ganfw_tensor **made = realloc(sc->made, (size_t)cap * sizeof *made);
    if (!made) {
      sc->lost = 1;
      return;
    }
    sc->made = made, sc->cap = cap;
  }
  sc->made[sc->n++] = t;
  sc->live += own_bytes(t);
  if (sc->live > sc->peak) sc->peak = sc->live;
}

int32_t ganfw_plugin_layer_note_destroy(ganfw_tensor *t) {
  pl_scope *sc = pl_current;
  if (!sc || !t) return 1;
  int32_t i = scope_find(sc, t);
  if (i < 0) {
    if (sc->refused++ == 0)
      snprintf(sc->refused_name, sizeof sc->refused_name, "%s", t->name ? t->name : "");
    return 0;
  }
  sc->made[i] = sc->made[--sc->n];
  sc->live -= own_bytes(t);
  return 1;
}

/* After a call: destroys what it made that is not in keep[0..nkeep) and reports the first
 * problem (lost records, refused destroys, left-over tensors) as an error naming the node and
 * `what` ("forward", "backward"). *st is kept when it is already a failure. */
static ganfw_status scope_finish(ganfw_layer *l, pl_scope *sc, const char *what,
                                 ganfw_tensor *const *keep, int32_t nkeep, ganfw_status st) {
  int32_t left = 0;
  int64_t left_bytes = 0;
  char left_name[128] = "";
  for (int32_t i = 0; i < sc->n; i++) {
    int kept = 0;
    for (int32_t k = 0; k < nkeep; k++) kept |= keep[k] == sc->made[i];
    if (kept) continue;
    if (left++ == 0) snprintf(left_name, sizeof left_name, "%s", sc->made[i]->name);
    left_bytes += sc->made[i]->nbytes;
    ganfw_tensor_destroy(sc->made[i]);
  }
  free(sc->made);
  sc->made = NULL;
  if (st != GANFW_OK) return st;
  if (sc->lost)
    return ganfw_layer_error(l, GANFW_ERR_OOM, "out of host memory counting the %s's tensors",
                             what);
  if (sc->refused)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "%s destroyed tensor '%s', which it did not create in this call "
                             "(%d such calls refused): the input, output, gradients, parameters, "
                             "buffers and saved tensors belong to the core",
                             what, sc->refused_name, (int)sc->refused);
  if (left)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "%s left %d tensor(s) of %lld bytes (the first '%s') that it neither "
                             "destroyed nor put in saved[]; destroy each temporary tensor before "
                             "returning",
                             what, (int)left, (long long)left_bytes, left_name);
  return GANFW_OK;
}

/* --- the def's byte figures -------------------------------------------------------------- */

static int64_t reported_saved(const ganfw_layer *l, const int64_t *in, int32_t ndim) {
  const ganfw_layer_def *d = def_of(l);
  if (!d->saved_bytes) return 0;
  const ganfw_plugin_frame *prev = enter(l, PL_SAVED_BYTES);
  int64_t bytes = d->saved_bytes(state_of(l), in, ndim);
  ganfw_plugin_leave(prev);
  return bytes;
}

static int64_t reported_workspace(const ganfw_layer *l, const int64_t *in, int32_t ndim,
                                  int32_t backward) {
  const ganfw_layer_def *d = def_of(l);
  if (!d->workspace_bytes) return 0;
  const ganfw_plugin_frame *prev = enter(l, PL_WORKSPACE_BYTES);
  int64_t bytes = d->workspace_bytes(state_of(l), in, ndim, backward);
  ganfw_plugin_leave(prev);
  return bytes;
}

/* --- the vtable -------------------------------------------------------------------------- */

static ganfw_status pl_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim, int64_t *out,
                             int32_t *out_ndim) {
  int64_t shape[GANFW_MAX_DIMS] = {1, 1, 1, 1};
  int32_t nd = 0;
  const ganfw_plugin_frame *prev = enter(l, PL_INFER);
  ganfw_status st = def_of(l)->infer(state_of(l), in, in_ndim, shape, &nd);
  ganfw_plugin_leave(prev);
  char a[96], b[96];
  if (st != GANFW_OK)
    return ganfw_error_wrap(st, "layer %s (%s): input %s", l->qualified, l->vt->type,
                            shape_str(in, in_ndim, a, sizeof a));
  int ok = nd >= 1 && nd <= GANFW_MAX_DIMS;
  for (int32_t d = 0; ok && d < nd; d++) ok = shape[d] > 0;
  if (!ok)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "infer gives %d dims %s for input %s; an output needs 1 to %d "
                             "positive dims",
                             (int)nd, shape_str(shape, nd >= 0 && nd <= 4 ? nd : 0, b, sizeof b),
                             shape_str(in, in_ndim, a, sizeof a), GANFW_MAX_DIMS);
  if (shape[0] != in[0])
    return ganfw_layer_error(
        l, GANFW_ERR_INVALID_ARG, "infer gives %s for input %s: a layer keeps the batch dimension",
        shape_str(shape, nd, b, sizeof b), shape_str(in, in_ndim, a, sizeof a));
  memcpy(out, shape, sizeof shape);
  *out_ndim = nd;
  return GANFW_OK;
}

static ganfw_status pl_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  const ganfw_layer_def *d = def_of(l);
  if (!d->init) return GANFW_OK;
  ganfw_layer_init li = {l};
  const ganfw_plugin_frame *prev = enter(l, PL_INIT);
  ganfw_status st = d->init(state_of(l), l->ctx, &li, in, in_ndim);
  ganfw_plugin_leave(prev);
  return st == GANFW_OK ? st
                        : ganfw_error_wrap(st, "layer %s (%s): init", l->qualified, l->vt->type);
}

/* The call struct, with the grad entries of this call in grad[]. */
static ganfw_layer_call make_call(ganfw_layer *l, const ganfw_exec *ex, int32_t param_grads,
                                  int32_t accumulate, ganfw_tensor **grad) {
  for (int32_t i = 0; i < GANFW_LAYER_MAX_PARAMS; i++)
    grad[i] = param_grads && l->trainable ? l->grad[i] : NULL;
  ganfw_layer_call c = {.struct_size = sizeof c,
                        .train = ex->train,
                        .update_stats = ex->update_stats,
                        .param_grads = param_grads && l->trainable,
                        .accumulate = accumulate,
                        .n_param = l->nparams,
                        .n_buffer = l->nextra,
                        .ctx = ex->ctx,
                        .name = l->qualified,
                        .param = l->param,
                        .grad = grad,
                        .buffer = l->extra};
  return c;
}

/* The forward's checks of the saved slots: each a tensor this call created, once, and not a
 * view (a view holds no bytes of its own, so saved_bytes could not count what it keeps). */
static ganfw_status check_saved(ganfw_layer *l, const pl_scope *sc, ganfw_tensor *const *kept) {
  for (int32_t i = 0; i < GANFW_CUSTOM_MAX_SAVED; i++) {
    if (!kept[i]) continue;
    int dup = 0;
    for (int32_t k = 0; k < i; k++) dup |= kept[k] == kept[i];
    if (dup || scope_find(sc, kept[i]) < 0 || ganfw_tensor_is_view(kept[i]))
      return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                               "forward put tensor '%s' in saved[%d], %s; saved[] takes tensors "
                               "the forward created with host->tensor_create, each once",
                               kept[i]->name, (int)i,
                               dup ? "which is already in an earlier slot"
                               : ganfw_tensor_is_view(kept[i])
                                   ? "a view from tensor_reshape (save the tensor it views)"
                                   : "which it did not create in this call");
  }
  return GANFW_OK;
}

/* The byte figures of a forward against the def's. */
static ganfw_status check_forward_bytes(ganfw_layer *l, const ganfw_tensor *x, const pl_scope *sc,
                                        ganfw_tensor *const *kept, int32_t taped) {
  int64_t saved = 0;
  for (int32_t i = 0; i < GANFW_CUSTOM_MAX_SAVED; i++) saved += kept[i] ? kept[i]->nbytes : 0;
  const int64_t want_saved = reported_saved(l, x->shape, x->ndim);
  const int64_t want_ws = reported_workspace(l, x->shape, x->ndim, 0);
  char in[96];
  shape_str(x->shape, x->ndim, in, sizeof in);
  if (taped && saved != want_saved)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "forward kept %lld bytes in saved[] for input %s, but the plugin's "
                             "saved_bytes reports %lld; saved_bytes must return the nbytes of the "
                             "tensors forward saves, so that `ganfw plan` is exact",
                             (long long)saved, in, (long long)want_saved);
  if (taped && sc->peak - saved != want_ws)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "forward's tensors held %lld bytes at most beyond the %lld it saved, "
                             "for input %s, but the plugin's workspace_bytes (forward) reports "
                             "%lld; it must return that peak, so that `ganfw plan` is exact",
                             (long long)(sc->peak - saved), (long long)saved, in,
                             (long long)want_ws);
  if (!taped && sc->peak > want_saved + want_ws)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "forward without a tape held %lld bytes of tensors at most for input "
                             "%s, more than the plugin's saved_bytes + workspace_bytes (%lld + "
                             "%lld)",
                             (long long)sc->peak, in, (long long)want_saved, (long long)want_ws);
  return GANFW_OK;
}

static ganfw_status pl_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                               ganfw_tensor **y, ganfw_saved *saved) {
  const ganfw_layer_def *d = def_of(l);
  int64_t out[GANFW_MAX_DIMS];
  int32_t nd = 0;
  ganfw_status st = pl_infer(l, x->shape, x->ndim, out, &nd);
  if (st != GANFW_OK) return st;
  ganfw_tensor *yt = ganfw_layer_tensor(l, ex, ex->dtype, nd, out, GANFW_MEM_ACTIVATION);
  ganfw_tensor *xf = yt ? ganfw_tensor_as_dtype(x, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE) : NULL;
  ganfw_tensor *yf = NULL;
  if (xf)
    yf = yt->dtype == GANFW_DTYPE_F32
             ? ganfw_tensor_retain(yt)
             : ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, nd, out, GANFW_MEM_WORKSPACE);
  if (!yf) {
    ganfw_tensor_destroy(xf);
    ganfw_tensor_destroy(yt);
    return ganfw_error_code();
  }
  ganfw_tensor *kept[GANFW_CUSTOM_MAX_SAVED] = {0};
  ganfw_tensor *grad[GANFW_LAYER_MAX_PARAMS];
  const ganfw_layer_call call = make_call(l, ex, 0, 0, grad);
  pl_scope sc;
  scope_begin(&sc);
  const ganfw_plugin_frame *prev = enter(l, PL_FORWARD);
  st = d->forward(state_of(l), &call, xf, yf, saved ? kept : NULL);
  ganfw_plugin_leave(prev);
  scope_end(&sc);
  if (st != GANFW_OK)
    st = ganfw_error_wrap(st, "layer %s (%s): forward", l->qualified, l->vt->type);
  if (st == GANFW_OK && saved) st = check_saved(l, &sc, kept);
  const int32_t nkeep = st == GANFW_OK && saved ? GANFW_CUSTOM_MAX_SAVED : 0;
  if (st == GANFW_OK) st = check_forward_bytes(l, x, &sc, kept, saved != NULL);
  /* on a failure so far scope_finish destroys every tensor the call made, kept ones too */
  const int32_t keeping = st == GANFW_OK ? nkeep : 0;
  st = scope_finish(l, &sc, "forward", kept, keeping, st);
  if (st == GANFW_OK && yf != yt)
    st = ganfw_cast(ex->be, yt->numel, GANFW_DTYPE_F32, yf->data, yt->dtype, yt->data);
  ganfw_tensor_destroy(yf);
  ganfw_tensor_destroy(xf);
  if (st != GANFW_OK) {
    for (int32_t i = 0; i < keeping; i++) ganfw_tensor_destroy(kept[i]);
    ganfw_tensor_destroy(yt);
    return st;
  }
  if (saved) {
    saved->t[0] = d->keep & GANFW_KEEP_INPUT ? ganfw_tensor_retain(x) : NULL;
    saved->t[1] = d->keep & GANFW_KEEP_OUTPUT ? ganfw_tensor_retain(yt) : NULL;
    for (int32_t i = 0; i < GANFW_CUSTOM_MAX_SAVED; i++) saved->t[2 + i] = kept[i];
    memcpy(saved->shape, x->shape, sizeof saved->shape);
    saved->ndim = x->ndim;
  }
  *y = yt;
  return GANFW_OK;
}

/* f32 views of what a backward reads: the kept input and output (NULL when not kept) and dy,
 * each the tensor itself (retained) when f32, else a converted workspace copy. */
static ganfw_status kept_f32(const ganfw_saved *saved, ganfw_tensor *dy, ganfw_tensor **xf,
                             ganfw_tensor **yf, ganfw_tensor **dyf) {
  if (saved->t[0] &&
      !(*xf = ganfw_tensor_as_dtype(saved->t[0], GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE)))
    return ganfw_error_code();
  if (saved->t[1] &&
      !(*yf = ganfw_tensor_as_dtype(saved->t[1], GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE)))
    return ganfw_error_code();
  if (!(*dyf = ganfw_tensor_as_dtype(dy, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE)))
    return ganfw_error_code();
  return GANFW_OK;
}

static ganfw_status pl_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                int32_t accumulate) {
  const ganfw_layer_def *d = def_of(l);
  ganfw_tensor *xf = NULL, *yf = NULL, *dyf = NULL, *dxt = NULL, *dxf = NULL;
  ganfw_status st = kept_f32(saved, dy, &xf, &yf, &dyf);
  if (st == GANFW_OK && dx) {
    dxt = ganfw_layer_tensor(l, ex, ex->dtype, saved->ndim, saved->shape, GANFW_MEM_ACTIVATION);
    if (dxt)
      dxf = dxt->dtype == GANFW_DTYPE_F32 ? ganfw_tensor_retain(dxt)
                                          : ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, saved->ndim,
                                                               saved->shape, GANFW_MEM_WORKSPACE);
    if (!dxf) st = ganfw_error_code();
  }
  if (st == GANFW_OK) {
    ganfw_tensor *grad[GANFW_LAYER_MAX_PARAMS];
    const ganfw_layer_call call = make_call(l, ex, param_grads, accumulate, grad);
    pl_scope sc;
    scope_begin(&sc);
    const ganfw_plugin_frame *prev = enter(l, PL_BACKWARD);
    st = d->backward(state_of(l), &call, xf, yf, saved->t + 2, dyf, dxf);
    ganfw_plugin_leave(prev);
    scope_end(&sc);
    if (st != GANFW_OK)
      st = ganfw_error_wrap(st, "layer %s (%s): backward", l->qualified, l->vt->type);
    st = scope_finish(l, &sc, "backward", NULL, 0, st);
    const int64_t want = reported_workspace(l, saved->shape, saved->ndim, 1);
    const int32_t full = dx && (call.param_grads || l->nparams == 0);
    if (st == GANFW_OK && (full ? sc.peak != want : sc.peak > want)) {
      char in[96];
      st = ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "backward's tensors held %lld bytes at most for input %s, but the "
                             "plugin's workspace_bytes (backward) reports %lld; it must return "
                             "that peak (a backward without dx or parameter gradients may stay "
                             "below), so that `ganfw plan` is exact",
                             (long long)sc.peak,
                             shape_str(saved->shape, saved->ndim, in, sizeof in), (long long)want);
    }
  }
  if (st == GANFW_OK && dxf != dxt)
    st = ganfw_cast(ex->be, dxt->numel, GANFW_DTYPE_F32, dxf->data, dxt->dtype, dxt->data);
  ganfw_tensor_destroy(dxf);
  ganfw_tensor_destroy(dyf);
  ganfw_tensor_destroy(yf);
  ganfw_tensor_destroy(xf);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(dxt);
    return st;
  }
  if (dx) *dx = dxt;
  return GANFW_OK;
}

/* The def's backward2 (ganfw_layer_vt.backward2): f32 copies of x, y and dy as for backward;
 * du and ax are made here in f32 (the executor's tangents are f32) and both handed back (the
 * executor's second backward of the forward starts from ax). */
static ganfw_status pl_backward2(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                 ganfw_tensor *dy, int32_t n, ganfw_tensor *const *u,
                                 ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads) {
  (void)n;
  *du = NULL;
  if (!u[0]) return GANFW_OK;
  const ganfw_layer_def *d = def_of(l);
  ganfw_tensor *xf = NULL, *yf = NULL, *dyf = NULL, *dut = NULL, *axt = NULL;
  ganfw_status st = kept_f32(saved, dy, &xf, &yf, &dyf);
  if (st == GANFW_OK && (!(dut = ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, dy->ndim, dy->shape,
                                                    GANFW_MEM_ACTIVATION)) ||
                         !(axt = ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, saved->ndim,
                                                    saved->shape, GANFW_MEM_ACTIVATION))))
    st = ganfw_error_code();
  if (st == GANFW_OK) {
    ganfw_tensor *grad[GANFW_LAYER_MAX_PARAMS];
    const ganfw_layer_call call = make_call(l, ex, param_grads, 1, grad);
    pl_scope sc;
    scope_begin(&sc);
    const ganfw_plugin_frame *prev = enter(l, PL_BACKWARD2);
    st = d->backward2(state_of(l), &call, xf, yf, saved->t + 2, dyf, u[0], dut, axt);
    ganfw_plugin_leave(prev);
    scope_end(&sc);
    if (st != GANFW_OK)
      st = ganfw_error_wrap(st, "layer %s (%s): backward2", l->qualified, l->vt->type);
    st = scope_finish(l, &sc, "backward2", NULL, 0, st);
    const int64_t want = reported_workspace(l, saved->shape, saved->ndim, 2);
    const int32_t full = call.param_grads || l->nparams == 0;
    if (st == GANFW_OK && (full ? sc.peak != want : sc.peak > want)) {
      char in[96];
      st = ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "backward2's tensors held %lld bytes at most for input %s, but the "
                             "plugin's workspace_bytes (backward2, 2) reports %lld; it must "
                             "return that peak, so that `ganfw plan` is exact",
                             (long long)sc.peak,
                             shape_str(saved->shape, saved->ndim, in, sizeof in), (long long)want);
    }
  }
  ganfw_tensor_destroy(dyf);
  ganfw_tensor_destroy(yf);
  ganfw_tensor_destroy(xf);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(dut);
    ganfw_tensor_destroy(axt);
    return st;
  }
  *du = dut;
  ax[0] = axt;
  return GANFW_OK;
}

static void pl_release(ganfw_layer *l) {
  pl_impl *p = l->impl;
  if (!p) return;
  if (p->def.destroy) {
    const ganfw_plugin_frame *prev = enter(l, PL_DESTROY);
    p->def.destroy(p->state);
    ganfw_plugin_leave(prev);
  }
  free(p->type);
  free(p);
  l->impl = NULL;
  l->vt = &ganfw_layer_plugin; /* p->vt is gone */
}

const ganfw_layer_vt ganfw_layer_plugin = {
    .type = "custom",
    .infer = pl_infer,
    .init = pl_init,
    .forward = pl_forward,
    .backward = pl_backward,
    .release = pl_release,
};

/* --- attaching a def and declaring its tensors ------------------------------------------- */

void ganfw_plugin_layer_discard(const ganfw_layer_def *def, void *state) {
  if (def && def->struct_size >= offsetof(ganfw_layer_def, destroy) + sizeof(void *) &&
      def->destroy)
    def->destroy(state);
}

ganfw_status ganfw_plugin_layer_attach(ganfw_layer *l, const ganfw_layer_def *def, void *state) {
  const char *why = NULL;
  if (!def)
    why = "its ganfw_layer_def is NULL";
  else if (def->struct_size < PL_DEF_MIN_SIZE)
    why = "its ganfw_layer_def.struct_size is below the ABI 1.3 size; set it to "
          "sizeof(ganfw_layer_def)";
  else if (!def->type || !*def->type)
    why = "its ganfw_layer_def has no type name";
  else if (!def->infer || !def->forward || !def->backward)
    why = "its ganfw_layer_def lacks infer, forward or backward (all three are required)";
  else if (def->keep & ~(GANFW_KEEP_INPUT | GANFW_KEEP_OUTPUT))
    why = "its ganfw_layer_def.keep has bits other than GANFW_KEEP_INPUT and GANFW_KEEP_OUTPUT";
  pl_impl *p = why ? NULL : calloc(1, sizeof *p);
  if (p) {
    memcpy(&p->def, def, def->struct_size < sizeof p->def ? def->struct_size : sizeof p->def);
    p->state = state;
    const ganfw_plugin_frame *owner = ganfw_plugin_current(); /* the plugin calling net_custom */
    for (int i = 0; i < PL_CALL_COUNT; i++)
      p->frame[i] = (ganfw_plugin_frame){owner ? owner->plugin : NULL, owner ? owner->path : NULL,
                                         pl_call_names[i]};
    size_t n = strlen(def->type) + 1;
    if ((p->type = malloc(n))) memcpy(p->type, def->type, n);
  }
  if (why || !p || !p->type) {
    ganfw_plugin_layer_discard(def, state);
    if (p) free(p->type);
    free(p);
    return why ? ganfw_error_set(GANFW_ERR_INVALID_ARG, "net_custom: layer %s: %s", l->qualified,
                                 why)
               : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  p->vt = ganfw_layer_plugin;
  p->vt.type = p->type;
  if (p->def.backward2) p->vt.backward2 = pl_backward2; /* a def of ABI 1.9 that has one */
  l->impl = p;
  l->vt = &p->vt;
  return GANFW_OK;
}

/* A parameter or buffer name: non-empty, no dot (a dot would read as a deeper module in the
 * state_dict), unused in this layer. */
static const char *name_problem(const ganfw_layer *l, const char *name) {
  if (!name || !*name) return "is empty";
  if (strchr(name, '.')) return "has a '.' (a state_dict key's last part has none)";
  const size_t nl = strlen(l->name);
  for (int32_t i = 0; i < l->nparams + l->nextra; i++) {
    const char *key = i < l->nparams ? l->param_name[i] : l->extra_name[i - l->nparams];
    if (key && strncmp(key, l->name, nl) == 0 && key[nl] == '.' && strcmp(key + nl + 1, name) == 0)
      return "is declared twice";
  }
  return NULL;
}

ganfw_status ganfw_plugin_layer_add_tensor(ganfw_layer_init *li, int32_t buffer, const char *name,
                                           int32_t ndim, const int64_t *shape, ganfw_tensor **out) {
  const char *entry = buffer ? "layer_add_buffer" : "layer_add_param";
  if (out) *out = NULL;
  if (!li || !li->l)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: no layer being built; call it from ganfw_layer_def.init with its "
                           "ganfw_layer_init",
                           entry);
  ganfw_layer *l = li->l;
  const char *why = name_problem(l, name);
  if (why)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG, "%s: the name '%s' %s", entry,
                             name ? name : "(null)", why);
  int ok = ndim >= 1 && ndim <= GANFW_MAX_DIMS && shape;
  for (int32_t d = 0; ok && d < ndim; d++) ok = shape[d] > 0;
  if (!ok)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "%s '%s': a shape of 1 to %d positive dims is required", entry, name,
                             GANFW_MAX_DIMS);
  const int32_t count = buffer ? l->nextra : l->nparams;
  const int32_t limit = buffer ? GANFW_CUSTOM_MAX_BUFFERS : GANFW_CUSTOM_MAX_PARAMS;
  if (count >= limit)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG, "%s '%s': a plugin layer has at most %d %s",
                             entry, name, limit, buffer ? "buffers" : "parameters");
  const ganfw_exec ex = ganfw_layer_init_exec(l);
  ganfw_tensor *t = NULL;
  if (!buffer) {
    ganfw_status st = ganfw_layer_add_param(l, count, name, ndim, shape);
    if (st == GANFW_OK)
      st = ganfw_layer_fill(l, &ex, l->grad[count]->numel, l->grad[count]->data, 0.0f);
    if (st != GANFW_OK) return st;
    t = l->param[count];
  } else {
    char *key = ganfw_name_join(l->name, name), *qualified = ganfw_name_join(l->qualified, name);
    if (key && qualified)
      t = ganfw_tensor_create(l->ctx, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_PARAM, qualified);
    free(qualified);
    if (!t) {
      free(key);
      return key ? ganfw_error_wrap(ganfw_error_code(), "layer %s: buffer %s", l->qualified, name)
                 : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    }
    l->extra[count] = t;
    l->extra_name[count] = key;
    l->nextra = count + 1;
  }
  ganfw_status st = ganfw_layer_fill(l, &ex, t->numel, t->data, 0.0f);
  if (st != GANFW_OK) return st;
  if (out) *out = t;
  return GANFW_OK;
}

int32_t ganfw_plugin_layer_keep(const ganfw_layer *l) {
  return def_of(l)->keep;
}
