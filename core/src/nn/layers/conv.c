/* conv2d and conv_transpose2d layers (PyTorch's Conv2d and ConvTranspose2d), one
 * implementation with the kernel chosen by the layer's type:
 *   conv2d:            x [N,C,H,W] * weight [K,C,R,S] (+ bias [K]) -> y [N,K,P,Q]
 *   conv_transpose2d:  x [N,C,H,W], weight [C,K,R,S] (+ bias [K]) -> y [N,K,P,Q],
 *                      P = (H-1)*stride - 2*padding + R + output_padding.
 * Both keep x for backward and take their workspace from the allocator for each call.
 * Args: C, K, kernel, stride, padding, output_padding (transposed only), bias. With spectral
 * norm (spectral_norm.c) they compute with weight_orig / sigma and its gradient goes through
 * the normalisation: dim 0 for conv2d, 1 for conv_transpose2d, as PyTorch chooses. */
#include "nn/layer.h"

/* One kernel call over rows of the batch (see ganfw_layer_rows_run). */
typedef struct conv_call {
  int32_t transposed;
  union {
    ganfw_conv2d_shape c;
    ganfw_convt2d_shape t;
  } s;
  const float *p[GANFW_LAYER_MAX_PARAMS]; /* weight, bias as the kernel uses them */
  float *dw; /* where the weight gradient goes (NULL: no parameter gradients) */
  int32_t param_grads, accumulate;
} conv_call;

static int32_t is_transposed(const ganfw_layer *l) {
  return l->vt == &ganfw_layer_conv_transpose2d;
}

/* The call's shape for input `in`; out (when not NULL) gets [N,K,P,Q]. */
static ganfw_status conv_shape(const ganfw_layer *l, const int64_t *in, conv_call *c,
                               int64_t *out) {
  c->transposed = is_transposed(l);
  ganfw_status st;
  if (c->transposed) {
    c->s.t = (ganfw_convt2d_shape){.N = in[0],
                                   .C = in[1],
                                   .H = in[2],
                                   .W = in[3],
                                   .K = l->arg[1],
                                   .R = l->arg[2],
                                   .S = l->arg[2],
                                   .stride_h = l->arg[3],
                                   .stride_w = l->arg[3],
                                   .pad_h = l->arg[4],
                                   .pad_w = l->arg[4],
                                   .out_pad_h = l->arg[5],
                                   .out_pad_w = l->arg[5]};
    st = ganfw_convt2d_shape_init(&c->s.t);
    if (out) out[0] = c->s.t.N, out[1] = c->s.t.K, out[2] = c->s.t.P, out[3] = c->s.t.Q;
  } else {
    c->s.c = (ganfw_conv2d_shape){.N = in[0],
                                  .C = in[1],
                                  .H = in[2],
                                  .W = in[3],
                                  .K = l->arg[1],
                                  .R = l->arg[2],
                                  .S = l->arg[2],
                                  .stride_h = l->arg[3],
                                  .stride_w = l->arg[3],
                                  .pad_h = l->arg[4],
                                  .pad_w = l->arg[4]};
    st = ganfw_conv2d_shape_init(&c->s.c);
    if (out) out[0] = c->s.c.N, out[1] = c->s.c.K, out[2] = c->s.c.P, out[3] = c->s.c.Q;
  }
  return st;
}

static ganfw_status conv_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                               int64_t *out, int32_t *out_ndim) {
  if (in_ndim != 4 || in[1] != l->arg[0])
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,%lld,H,W] input, gets %d dims with %lld channels",
                             (long long)l->arg[0], (int)in_ndim, (long long)in[1]);
  conv_call c;
  if (conv_shape(l, in, &c, out) != GANFW_OK) {
    if (c.transposed)
      return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                               "kernel %lld, stride %lld, padding %lld and output_padding %lld "
                               "give an empty output for a %lldx%lld input",
                               (long long)l->arg[2], (long long)l->arg[3], (long long)l->arg[4],
                               (long long)l->arg[5], (long long)in[2], (long long)in[3]);
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "a %lldx%lld input is too small for kernel %lld, stride %lld, "
                             "padding %lld",
                             (long long)in[2], (long long)in[3], (long long)l->arg[2],
                             (long long)l->arg[3], (long long)l->arg[4]);
  }
  *out_ndim = 4;
  return GANFW_OK;
}

static ganfw_status conv_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  const int32_t t = is_transposed(l);
  /* weight [K,C,R,S], transposed [C,K,R,S]; PyTorch's fan_in is weight.size(1) * R * S */
  int64_t w[4] = {l->arg[t ? 0 : 1], l->arg[t ? 1 : 0], l->arg[2], l->arg[2]};
  ganfw_status st =
      ganfw_layer_add_param(l, 0, l->sn.n_power_iterations ? "weight_orig" : "weight", 4, w);
  if (st == GANFW_OK && l->arg[6]) st = ganfw_layer_add_param(l, 1, "bias", 1, &l->arg[1]);
  if (st == GANFW_OK) st = ganfw_layer_init_uniform(l, w[1] * l->arg[2] * l->arg[2]);
  if (st == GANFW_OK) st = ganfw_spectral_init(l, t);
  return st;
}

static size_t workspace_bytes(const ganfw_exec *ex, const conv_call *c) {
  return c->transposed ? ex->be->vt->convt2d_workspace(ex->be, &c->s.t)
                       : ex->be->vt->conv2d_workspace(ex->be, &c->s.c);
}

/* f: x, y */
static ganfw_status conv_forward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                      int64_t rows, float *const *f) {
  conv_call c = *(const conv_call *)arg;
  c.s.c.N = rows; /* N is the first member of both shapes */
  ganfw_status st;
  ganfw_tensor *ws = ganfw_layer_workspace(l, ex, workspace_bytes(ex, &c), &st);
  if (st != GANFW_OK) return st;
  void *w = ws ? ws->data : NULL;
  if (c.transposed)
    ex->be->vt->convt2d_forward(ex->be, &c.s.t, f[0], c.p[0], c.p[1], f[1], w);
  else
    ex->be->vt->conv2d_forward(ex->be, &c.s.c, f[0], c.p[0], c.p[1], f[1], w);
  ganfw_tensor_destroy(ws);
  return GANFW_OK;
}

/* f: x, dy, dx (or NULL) */
static ganfw_status conv_backward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                       int64_t rows, float *const *f) {
  conv_call c = *(const conv_call *)arg;
  c.s.c.N = rows;
  ganfw_status st;
  ganfw_tensor *ws = ganfw_layer_workspace(l, ex, workspace_bytes(ex, &c), &st);
  if (st != GANFW_OK) return st;
  void *w = ws ? ws->data : NULL;
  float *db = c.param_grads && l->grad[1] ? l->grad[1]->data : NULL;
  const int accumulate = c.accumulate || n0 > 0;
  if (c.transposed)
    ex->be->vt->convt2d_backward(ex->be, &c.s.t, f[0], c.p[0], f[1], f[2], c.dw, db, accumulate, w);
  else
    ex->be->vt->conv2d_backward(ex->be, &c.s.c, f[0], c.p[0], f[1], f[2], c.dw, db, accumulate, w);
  ganfw_tensor_destroy(ws);
  return GANFW_OK;
}

/* --- native 16-bit compute: the backend's _lp entries on the whole batch ---------------- */

static size_t workspace_lp_bytes(const ganfw_exec *ex, const conv_call *c) {
  return c->transposed ? ex->be->vt->convt2d_workspace_lp(ex->be, ex->dtype, &c->s.t)
                       : ex->be->vt->conv2d_workspace_lp(ex->be, ex->dtype, &c->s.c);
}

static ganfw_status conv_forward_lp(ganfw_layer *l, const ganfw_exec *ex, const conv_call *c,
                                    ganfw_tensor *x, ganfw_tensor *y) {
  ganfw_layer_scratch sc = {0};
  const void *xh = ganfw_layer_lp_in(l, ex, &sc, x);
  const void *wh = xh ? ganfw_layer_lp_param(l, ex, &sc, 0) : NULL;
  ganfw_status st = wh ? GANFW_OK : ganfw_error_code();
  ganfw_tensor *ws =
      st != GANFW_OK ? NULL : ganfw_layer_workspace(l, ex, workspace_lp_bytes(ex, c), &st);
  if (st == GANFW_OK) {
    const float *b = l->param[1] ? l->param[1]->data : NULL;
    void *w = ws ? ws->data : NULL;
    if (c->transposed)
      ex->be->vt->convt2d_forward_lp(ex->be, ex->dtype, &c->s.t, xh, wh, b, y->data, w);
    else
      ex->be->vt->conv2d_forward_lp(ex->be, ex->dtype, &c->s.c, xh, wh, b, y->data, w);
  }
  ganfw_tensor_destroy(ws);
  ganfw_layer_scratch_release(&sc);
  return st;
}

/* dx (or NULL) gets the input gradient; the weight copy is made only for it. */
static ganfw_status conv_backward_lp(ganfw_layer *l, const ganfw_exec *ex, const conv_call *c,
                                     ganfw_tensor *x, ganfw_tensor *dy, ganfw_tensor *dx) {
  ganfw_layer_scratch sc = {0};
  const void *xh = ganfw_layer_lp_in(l, ex, &sc, x);
  const void *dyh = xh ? ganfw_layer_lp_in(l, ex, &sc, dy) : NULL;
  const void *wh = dyh && dx ? ganfw_layer_lp_param(l, ex, &sc, 0) : NULL;
  ganfw_status st = dyh && (wh || !dx) ? GANFW_OK : ganfw_error_code();
  ganfw_tensor *ws =
      st != GANFW_OK ? NULL : ganfw_layer_workspace(l, ex, workspace_lp_bytes(ex, c), &st);
  if (st == GANFW_OK) {
    float *db = c->param_grads && l->grad[1] ? l->grad[1]->data : NULL;
    void *w = ws ? ws->data : NULL, *g = dx ? dx->data : NULL;
    if (c->transposed)
      ex->be->vt->convt2d_backward_lp(ex->be, ex->dtype, &c->s.t, xh, wh, dyh, g, c->dw, db,
                                      c->accumulate, w);
    else
      ex->be->vt->conv2d_backward_lp(ex->be, ex->dtype, &c->s.c, xh, wh, dyh, g, c->dw, db,
                                     c->accumulate, w);
  }
  ganfw_tensor_destroy(ws);
  ganfw_layer_scratch_release(&sc);
  return st;
}

static ganfw_status conv_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                 ganfw_tensor **y, ganfw_saved *saved) {
  conv_call c = {0};
  int64_t out[4];
  conv_shape(l, x->shape, &c, out);
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, 4, out, GANFW_MEM_ACTIVATION);
  if (!t) return ganfw_error_code();
  ganfw_status st = ganfw_spectral_forward_begin(l, ex, saved);
  if (st == GANFW_OK && ganfw_layer_lp_matmul(ex, GANFW_LP_CONV, x)) {
    st = conv_forward_lp(l, ex, &c, x, t);
  } else if (st == GANFW_OK) {
    ganfw_layer_scratch ps = {0};
    ganfw_tensor *io[2] = {x, t};
    st = ganfw_layer_f32_params(l, ex, &ps, c.p);
    if (st == GANFW_OK) st = ganfw_layer_rows_run(l, ex, io, 1, 2, conv_forward_rows, &c);
    ganfw_layer_scratch_release(&ps);
  }
  ganfw_spectral_release(l);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return st;
  }
  if (saved) saved->t[0] = ganfw_tensor_retain(x);
  *y = t;
  return GANFW_OK;
}

static ganfw_status conv_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                  ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                  int32_t accumulate) {
  ganfw_tensor *x = saved->t[0];
  conv_call c = {.param_grads = param_grads, .accumulate = accumulate};
  conv_shape(l, x->shape, &c, NULL);
  ganfw_tensor *g = NULL;
  if (dx) {
    g = ganfw_layer_tensor(l, ex, ex->dtype, 4, x->shape, GANFW_MEM_ACTIVATION);
    if (!g) return ganfw_error_code();
  }
  if (!g && !param_grads) return GANFW_OK;
  ganfw_status st = ganfw_spectral_backward_begin(l, ex, saved, param_grads, accumulate, &c.dw);
  if (st == GANFW_OK && ganfw_layer_lp_matmul(ex, GANFW_LP_CONV, x)) {
    st = conv_backward_lp(l, ex, &c, x, dy, g);
  } else if (st == GANFW_OK) {
    ganfw_layer_scratch ps = {0};
    ganfw_tensor *io[3] = {x, dy, g};
    st = ganfw_layer_f32_params(l, ex, &ps, c.p);
    if (st == GANFW_OK) st = ganfw_layer_rows_run(l, ex, io, 2, 3, conv_backward_rows, &c);
    ganfw_layer_scratch_release(&ps);
  }
  if (st == GANFW_OK) st = ganfw_spectral_backward_end(l, ex, saved, param_grads, accumulate);
  ganfw_spectral_release(l);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  if (dx) *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_conv2d = {
    .type = "conv2d",
    .infer = conv_infer,
    .init = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
};

const ganfw_layer_vt ganfw_layer_conv_transpose2d = {
    .type = "conv_transpose2d",
    .infer = conv_infer,
    .init = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
};
