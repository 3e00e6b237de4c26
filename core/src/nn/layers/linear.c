/* linear layer: x [N,IN] * weight[OUT,IN]^T (+ bias [OUT]) -> y [N,OUT]. Keeps x for
 * backward. Args: IN, OUT, bias. With spectral norm (spectral_norm.c, dim 0) it computes
 * with weight_orig / sigma. */
#include "nn/layer.h"

static ganfw_status linear_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                                 int64_t *out, int32_t *out_ndim) {
  int64_t features = 1;
  for (int32_t d = 1; d < in_ndim; d++) features *= in[d];
  if (in_ndim != 2 || features != l->arg[0])
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,%lld] input, gets %d dims with %lld features per "
                             "sample (add a flatten layer before it?)",
                             (long long)l->arg[0], (int)in_ndim, (long long)features);
  out[0] = in[0], out[1] = l->arg[1];
  *out_ndim = 2;
  return GANFW_OK;
}

static ganfw_status linear_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  int64_t w[2] = {l->arg[1], l->arg[0]};
  ganfw_status st =
      ganfw_layer_add_param(l, 0, l->sn.n_power_iterations ? "weight_orig" : "weight", 2, w);
  if (st == GANFW_OK && l->arg[2]) st = ganfw_layer_add_param(l, 1, "bias", 1, &l->arg[1]);
  if (st == GANFW_OK) st = ganfw_layer_init_uniform(l, l->arg[0]);
  if (st == GANFW_OK) st = ganfw_spectral_init(l, 0);
  return st;
}

/* One kernel call over rows of the batch (see ganfw_layer_rows_run). */
typedef struct linear_call {
  const float *p[GANFW_LAYER_MAX_PARAMS]; /* weight, bias as the kernel uses them */
  float *dw; /* where the weight gradient goes (NULL: no parameter gradients) */
  int32_t param_grads, accumulate;
} linear_call;

/* f: x, y */
static ganfw_status linear_forward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                        int64_t rows, float *const *f) {
  const linear_call *c = arg;
  ex->be->vt->linear_forward(ex->be, rows, l->arg[0], l->arg[1], f[0], c->p[0], c->p[1], f[1]);
  return GANFW_OK;
}

/* f: x, dy, dx (or NULL) */
static ganfw_status linear_backward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg,
                                         int64_t n0, int64_t rows, float *const *f) {
  const linear_call *c = arg;
  ex->be->vt->linear_backward(ex->be, rows, l->arg[0], l->arg[1], f[0], c->p[0], f[1], f[2], c->dw,
                              c->param_grads && l->grad[1] ? l->grad[1]->data : NULL,
                              c->accumulate || n0 > 0);
  return GANFW_OK;
}

/* --- native 16-bit compute: the backend's _lp entries on the whole batch ---------------- */

static ganfw_status linear_forward_lp(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                      ganfw_tensor *y) {
  ganfw_layer_scratch sc = {0};
  const void *xh = ganfw_layer_lp_in(l, ex, &sc, x);
  const void *wh = xh ? ganfw_layer_lp_param(l, ex, &sc, 0) : NULL;
  if (wh)
    ex->be->vt->linear_forward_lp(ex->be, ex->dtype, x->shape[0], l->arg[0], l->arg[1], xh, wh,
                                  l->param[1] ? l->param[1]->data : NULL, y->data);
  ganfw_layer_scratch_release(&sc);
  return wh ? GANFW_OK : ganfw_error_code();
}

/* dx (or NULL) gets the input gradient; the weight copy is made only for it. */
static ganfw_status linear_backward_lp(ganfw_layer *l, const ganfw_exec *ex, const linear_call *c,
                                       ganfw_tensor *x, ganfw_tensor *dy, ganfw_tensor *dx) {
  ganfw_layer_scratch sc = {0};
  const void *xh = ganfw_layer_lp_in(l, ex, &sc, x);
  const void *dyh = xh ? ganfw_layer_lp_in(l, ex, &sc, dy) : NULL;
  const void *wh = dyh && dx ? ganfw_layer_lp_param(l, ex, &sc, 0) : NULL;
  const int32_t ok = dyh && (wh || !dx);
  if (ok)
    ex->be->vt->linear_backward_lp(
        ex->be, ex->dtype, x->shape[0], l->arg[0], l->arg[1], xh, wh, dyh, dx ? dx->data : NULL,
        c->dw, c->param_grads && l->grad[1] ? l->grad[1]->data : NULL, c->accumulate);
  ganfw_layer_scratch_release(&sc);
  return ok ? GANFW_OK : ganfw_error_code();
}

static ganfw_status linear_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                   ganfw_tensor **y, ganfw_saved *saved) {
  int64_t out[2] = {x->shape[0], l->arg[1]};
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, 2, out, GANFW_MEM_ACTIVATION);
  if (!t) return ganfw_error_code();
  ganfw_status st = ganfw_spectral_forward_begin(l, ex, saved);
  if (st == GANFW_OK && ganfw_layer_lp_matmul(ex, GANFW_LP_LINEAR, x)) {
    st = linear_forward_lp(l, ex, x, t);
  } else if (st == GANFW_OK) {
    linear_call c = {.param_grads = 0};
    ganfw_layer_scratch ps = {0};
    ganfw_tensor *io[2] = {x, t};
    st = ganfw_layer_f32_params(l, ex, &ps, c.p);
    if (st == GANFW_OK) st = ganfw_layer_rows_run(l, ex, io, 1, 2, linear_forward_rows, &c);
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

static ganfw_status linear_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                    ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                    int32_t accumulate) {
  ganfw_tensor *x = saved->t[0];
  ganfw_tensor *g = NULL;
  if (dx) {
    g = ganfw_layer_tensor(l, ex, ex->dtype, x->ndim, x->shape, GANFW_MEM_ACTIVATION);
    if (!g) return ganfw_error_code();
  }
  if (!g && !param_grads) return GANFW_OK;
  linear_call c = {.param_grads = param_grads, .accumulate = accumulate};
  ganfw_status st = ganfw_spectral_backward_begin(l, ex, saved, param_grads, accumulate, &c.dw);
  if (st == GANFW_OK && ganfw_layer_lp_matmul(ex, GANFW_LP_LINEAR, x)) {
    st = linear_backward_lp(l, ex, &c, x, dy, g);
  } else if (st == GANFW_OK) {
    ganfw_layer_scratch ps = {0};
    ganfw_tensor *io[3] = {x, dy, g};
    st = ganfw_layer_f32_params(l, ex, &ps, c.p);
    if (st == GANFW_OK) st = ganfw_layer_rows_run(l, ex, io, 2, 3, linear_backward_rows, &c);
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

const ganfw_layer_vt ganfw_layer_linear = {
    .type = "linear",
    .infer = linear_infer,
    .init = linear_init,
    .forward = linear_forward,
    .backward = linear_backward,
};
