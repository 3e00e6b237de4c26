/* The compute-dtype boundary of a layer (see layer.h): f32 views or workspace copies of a
 * layer's f16/bf16 tensors for the f32 kernels, converted back into the stored dtype
 * afterwards, in chunks of rows (or of channels, for BatchNorm) so that the copies stay
 * small; matmul weights rounded to the compute dtype. With every tensor f32 nothing is
 * allocated or copied. */
#include "backend/ops.h" /* defines: ganfw_be_lp_ops */
#include "nn/layer.h"
#include "runtime/tensor_cast.h"

/* A new workspace tensor of n values of dtype in sc, its data, or NULL. */
static void *scratch_push_dtype(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                                int32_t dtype, int64_t n, ganfw_tensor *out) {
  if (sc->n == GANFW_LAYER_SCRATCH_MAX) {
    ganfw_layer_error(l, GANFW_ERR_INTERNAL, "more than %d conversion buffers in one call",
                      GANFW_LAYER_SCRATCH_MAX);
    return NULL;
  }
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, dtype, 1, &n, GANFW_MEM_WORKSPACE);
  if (!t) return NULL;
  sc->t[sc->n] = t;
  sc->out[sc->n] = out;
  sc->n++;
  return t->data;
}

/* A new f32 workspace tensor of n values in sc, its data, or NULL. */
static float *scratch_push(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc, int64_t n,
                           ganfw_tensor *out) {
  return scratch_push_dtype(l, ex, sc, GANFW_DTYPE_F32, n, out);
}

/* --- native 16-bit compute (backends that support the layer's ops in 16 bits) ----------- */

int32_t ganfw_layer_lp(const ganfw_exec *ex, uint32_t group) {
  return ex->dtype != GANFW_DTYPE_F32 && (ganfw_be_lp_ops(ex->be, ex->dtype) & group) != 0;
}

int32_t ganfw_layer_lp_matmul(const ganfw_exec *ex, uint32_t group, const ganfw_tensor *x) {
  return x->dtype == ex->dtype && ganfw_layer_lp(ex, group);
}

void *ganfw_layer_lp_in(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                        ganfw_tensor *t) {
  if (t->dtype == ex->dtype) return t->data;
  void *h = scratch_push_dtype(l, ex, sc, ex->dtype, t->numel, NULL);
  if (h && ganfw_cast(ex->be, t->numel, t->dtype, t->data, ex->dtype, h) != GANFW_OK) {
    ganfw_layer_error(l, ganfw_error_code(), "input '%s': %s", t->name, ganfw_error_message());
    return NULL;
  }
  return h;
}

void *ganfw_layer_lp_param(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                           int32_t i) {
  const ganfw_tensor *w = ganfw_layer_param_value(l, i);
  void *h = scratch_push_dtype(l, ex, sc, ex->dtype, w->numel, NULL);
  if (h && ganfw_cast(ex->be, w->numel, GANFW_DTYPE_F32, w->data, ex->dtype, h) != GANFW_OK) {
    ganfw_layer_error(l, ganfw_error_code(), "rounding '%s': %s", w->name, ganfw_error_message());
    return NULL;
  }
  return h;
}

float *ganfw_layer_f32_in(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                          ganfw_tensor *t) {
  if (t->dtype == GANFW_DTYPE_F32) return t->data;
  float *f = scratch_push(l, ex, sc, t->numel, NULL);
  if (f && ganfw_cast(ex->be, t->numel, t->dtype, t->data, GANFW_DTYPE_F32, f) != GANFW_OK) {
    ganfw_layer_error(l, ganfw_error_code(), "input '%s': %s", t->name, ganfw_error_message());
    return NULL;
  }
  return f;
}

float *ganfw_layer_f32_out(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                           ganfw_tensor *out) {
  if (out->dtype == GANFW_DTYPE_F32) return out->data;
  return scratch_push(l, ex, sc, out->numel, out);
}

ganfw_status ganfw_layer_f32_params(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                                    const float *p[GANFW_LAYER_MAX_PARAMS]) {
  for (int32_t i = 0; i < GANFW_LAYER_MAX_PARAMS; i++)
    p[i] = l->param[i] ? ganfw_layer_param_value(l, i)->data : NULL;
  if (ex->dtype == GANFW_DTYPE_F32) return GANFW_OK;
  /* One buffer: the rounded values of every parameter, then a 16-bit staging area as large
   * as the largest parameter. */
  int64_t total = 0, largest = 0;
  for (int32_t i = 0; i < GANFW_LAYER_MAX_PARAMS; i++) {
    if (!l->param[i]) continue;
    total += l->param[i]->numel;
    if (l->param[i]->numel > largest) largest = l->param[i]->numel;
  }
  float *f = scratch_push(l, ex, sc, total + (largest + 1) / 2, NULL);
  if (!f) return ganfw_error_code();
  void *half = f + total;
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < GANFW_LAYER_MAX_PARAMS && st == GANFW_OK; i++) {
    const ganfw_tensor *w = l->param[i] ? ganfw_layer_param_value(l, i) : NULL;
    if (!w) continue;
    st = ganfw_cast(ex->be, w->numel, GANFW_DTYPE_F32, w->data, ex->dtype, half);
    if (st == GANFW_OK) st = ganfw_cast(ex->be, w->numel, ex->dtype, half, GANFW_DTYPE_F32, f);
    p[i] = f;
    f += w->numel;
  }
  return st == GANFW_OK
             ? st
             : ganfw_layer_error(l, st, "rounding the weights: %s", ganfw_error_message());
}

ganfw_status ganfw_layer_store_out(const ganfw_layer *l, const ganfw_exec *ex,
                                   ganfw_layer_scratch *sc) {
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < sc->n && st == GANFW_OK; i++) {
    ganfw_tensor *out = sc->out[i];
    if (out)
      st = ganfw_cast(ex->be, out->numel, GANFW_DTYPE_F32, sc->t[i]->data, out->dtype, out->data);
    if (st != GANFW_OK)
      st = ganfw_error_wrap(st, "layer %s: storing '%s'", l->qualified, out->name);
  }
  ganfw_layer_scratch_release(sc);
  return st;
}

void ganfw_layer_scratch_release(ganfw_layer_scratch *sc) {
  for (int32_t i = sc->n - 1; i >= 0; i--) {
    ganfw_tensor_destroy(sc->t[i]);
    sc->t[i] = NULL;
    sc->out[i] = NULL;
  }
  sc->n = 0;
}

ganfw_status ganfw_layer_rows_run(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *const *t,
                                  int32_t n_in, int32_t n, ganfw_layer_rows_fn fn, void *arg) {
  float *f[GANFW_LAYER_ROWS_MAX] = {NULL};
  int64_t N = 0, row_bytes = 0;
  for (int32_t i = 0; i < n; i++)
    if (t[i]) N = t[i]->shape[0];
  for (int32_t i = 0; i < n; i++)
    if (t[i] && t[i]->dtype != GANFW_DTYPE_F32) row_bytes += t[i]->numel / N * 4;
  if (row_bytes == 0) { /* all f32: the kernel on the tensors themselves */
    for (int32_t i = 0; i < n; i++) f[i] = t[i] ? t[i]->data : NULL;
    return fn(l, ex, arg, 0, N, f);
  }
  int64_t rows = GANFW_LAYER_CHUNK_BYTES / row_bytes;
  if (rows < 1) rows = 1;
  if (rows > N) rows = N;
  const int64_t chunks = (N + rows - 1) / rows;
  rows = (N + chunks - 1) / chunks; /* equal chunks */
  ganfw_status st = GANFW_OK;
  for (int64_t n0 = 0; n0 < N && st == GANFW_OK; n0 += rows) {
    const int64_t nb = n0 + rows < N ? rows : N - n0;
    ganfw_tensor *v[GANFW_LAYER_ROWS_MAX] = {NULL};
    ganfw_layer_scratch sc = {0};
    for (int32_t i = 0; i < n && st == GANFW_OK; i++) {
      if (!t[i]) continue;
      v[i] = nb == N ? ganfw_tensor_retain(t[i]) : ganfw_tensor_rows(t[i], n0, nb, t[i]->name);
      f[i] = !v[i]      ? NULL
             : i < n_in ? ganfw_layer_f32_in(l, ex, &sc, v[i])
                        : ganfw_layer_f32_out(l, ex, &sc, v[i]);
      if (!f[i]) st = ganfw_error_code();
    }
    if (st == GANFW_OK) st = fn(l, ex, arg, n0, nb, f);
    if (st == GANFW_OK)
      st = ganfw_layer_store_out(l, ex, &sc);
    else
      ganfw_layer_scratch_release(&sc);
    for (int32_t i = 0; i < n; i++) ganfw_tensor_destroy(v[i]);
  }
  return st;
}

/* Channels [c0, c0 + cc) of t ([N,C,HW], any float dtype) to or from the compact f32
 * buffer f ([N,cc,HW]): one conversion per sample. */
static ganfw_status channels_copy(const ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *t,
                                  int64_t c0, int64_t cc, float *f, int to_f32) {
  const int64_t N = t->shape[0], C = t->shape[1], HW = t->numel / (N * C);
  const size_t es = ganfw_dtype_size(t->dtype);
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; i < N && st == GANFW_OK; i++) {
    char *strided = (char *)t->data + (size_t)((i * C + c0) * HW) * es;
    float *compact = f + i * cc * HW;
    st = to_f32 ? ganfw_cast(ex->be, cc * HW, t->dtype, strided, GANFW_DTYPE_F32, compact)
                : ganfw_cast(ex->be, cc * HW, GANFW_DTYPE_F32, compact, t->dtype, strided);
  }
  return st == GANFW_OK ? st
                        : ganfw_error_wrap(st, "layer %s: converting '%s'", l->qualified, t->name);
}

ganfw_status ganfw_layer_channels_run(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *const *t,
                                      int32_t n_in, int32_t n, ganfw_layer_channels_fn fn,
                                      void *arg) {
  float *f[GANFW_LAYER_ROWS_MAX] = {NULL};
  int64_t C = 0, channel_bytes = 0, all_f32 = 1;
  for (int32_t i = 0; i < n; i++) {
    if (!t[i]) continue;
    C = t[i]->shape[1];
    channel_bytes += t[i]->numel / C * 4;
    if (t[i]->dtype != GANFW_DTYPE_F32) all_f32 = 0;
  }
  if (all_f32) {
    for (int32_t i = 0; i < n; i++) f[i] = t[i] ? t[i]->data : NULL;
    return fn(l, ex, arg, 0, C, f);
  }
  int64_t cc = GANFW_LAYER_CHUNK_BYTES / channel_bytes;
  if (cc < 1) cc = 1;
  if (cc > C) cc = C;
  const int64_t chunks = (C + cc - 1) / cc;
  cc = (C + chunks - 1) / chunks; /* equal chunks */
  ganfw_status st = GANFW_OK;
  for (int64_t c0 = 0; c0 < C && st == GANFW_OK; c0 += cc) {
    const int64_t nc = c0 + cc < C ? cc : C - c0;
    ganfw_layer_scratch sc = {0};
    for (int32_t i = 0; i < n && st == GANFW_OK; i++) {
      if (!t[i]) continue;
      f[i] = scratch_push(l, ex, &sc, t[i]->numel / C * nc, NULL);
      if (!f[i])
        st = ganfw_error_code();
      else if (i < n_in)
        st = channels_copy(l, ex, t[i], c0, nc, f[i], 1);
    }
    if (st == GANFW_OK) st = fn(l, ex, arg, c0, nc, f);
    for (int32_t i = n_in; i < n && st == GANFW_OK; i++)
      if (t[i]) st = channels_copy(l, ex, t[i], c0, nc, f[i], 0);
    ganfw_layer_scratch_release(&sc);
  }
  return st;
}
