/* The frame the matmul layers share (conv2d, conv_transpose2d: conv.c; linear: linear.c):
 * x (batch first) -> y by one backend op, whose descriptor the layer builds (ganfw_matmul_kind,
 * layer.h), forward and backward. Forward keeps x for backward. Both run inside spectral
 * norm's or a pruning mask's begin and end (mask.c), and either natively in 16 bits on the whole
 * batch or in f32 over row chunks with the weights rounded to the compute dtype. The ops' slots
 * (op.h): forward   in: x, w, b;  out: y;  ws backward  in: x, w, dy; out: dx; grad: dw, db; ws
 * (the forward's size) */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "nn/layer.h"

/* One op over rows of the batch (see ganfw_layer_rows_run). */
typedef struct matmul_call {
  const ganfw_matmul_kind *k;
  const int64_t *in;                      /* x's shape */
  const float *p[GANFW_LAYER_MAX_PARAMS]; /* weight, bias as the op reads them */
  float *dw; /* where the weight gradient goes (NULL: no parameter gradients) */
  int32_t param_grads, accumulate;
} matmul_call;

/* The op of `rows` samples in dtype, its slots yet to fill. */
static ganfw_op matmul_op(const ganfw_layer *l, const matmul_call *c, int64_t rows,
                          int32_t backward, int32_t dtype) {
  ganfw_op op = c->k->op(l, c->in, rows, backward);
  op.dtype = dtype;
  return op;
}

/* op (of `rows` samples) run with its workspace when the kind takes one: the bytes of the
 * forward op of its dtype and shape, allocated around the call. */
static ganfw_status run_with_workspace(ganfw_layer *l, const ganfw_exec *ex, const matmul_call *c,
                                       int64_t rows, ganfw_op *op) {
  ganfw_tensor *ws = NULL;
  ganfw_status st = GANFW_OK;
  if (c->k->workspace) {
    const ganfw_op fwd = matmul_op(l, c, rows, 0, op->dtype);
    ws = ganfw_layer_workspace(l, ex, ganfw_backend_workspace(ex->be, &fwd), &st);
    if (st != GANFW_OK) return st;
  }
  op->ws = ws ? ws->data : NULL;
  st = ganfw_layer_op(l, ex, op);
  ganfw_tensor_destroy(ws);
  return st;
}

/* The gradient of the bias, or NULL. */
static float *bias_grad(const ganfw_layer *l, int32_t param_grads) {
  return param_grads && l->grad[1] ? l->grad[1]->data : NULL;
}

/* f: x, y */
static ganfw_status forward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                 int64_t rows, float *const *f) {
  const matmul_call *c = arg;
  ganfw_op op = matmul_op(l, c, rows, 0, GANFW_DTYPE_F32);
  op.in[0] = f[0], op.in[1] = c->p[0], op.in[2] = c->p[1];
  op.out[0] = f[1];
  return run_with_workspace(l, ex, c, rows, &op);
}

/* f: x, dy, dx (or NULL) */
static ganfw_status backward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                  int64_t rows, float *const *f) {
  const matmul_call *c = arg;
  ganfw_op op = matmul_op(l, c, rows, 1, GANFW_DTYPE_F32);
  op.flags = c->accumulate || n0 > 0 ? GANFW_OP_ACCUMULATE : 0;
  op.in[0] = f[0], op.in[1] = c->p[0], op.in[2] = f[1];
  op.out[0] = f[2];
  op.grad[0] = c->dw, op.grad[1] = bias_grad(l, c->param_grads);
  return run_with_workspace(l, ex, c, rows, &op);
}

/* --- native 16-bit compute: the op in the compute dtype on the whole batch ---------------- */

static ganfw_status forward_lp(ganfw_layer *l, const ganfw_exec *ex, const matmul_call *c,
                               ganfw_tensor *x, ganfw_tensor *y) {
  ganfw_layer_scratch sc = {0};
  const void *xh = ganfw_layer_lp_in(l, ex, &sc, x);
  const void *wh = xh ? ganfw_layer_lp_param(l, ex, &sc, 0) : NULL;
  ganfw_status st = wh ? GANFW_OK : ganfw_error_code();
  if (st == GANFW_OK) {
    ganfw_op op = matmul_op(l, c, x->shape[0], 0, ex->dtype);
    op.in[0] = xh, op.in[1] = wh, op.in[2] = l->param[1] ? l->param[1]->data : NULL;
    op.out[0] = y->data;
    st = run_with_workspace(l, ex, c, x->shape[0], &op);
  }
  ganfw_layer_scratch_release(&sc);
  return st;
}

/* dx (or NULL) gets the input gradient; the weight copy is made only for it. */
static ganfw_status backward_lp(ganfw_layer *l, const ganfw_exec *ex, const matmul_call *c,
                                ganfw_tensor *x, ganfw_tensor *dy, ganfw_tensor *dx) {
  ganfw_layer_scratch sc = {0};
  const void *xh = ganfw_layer_lp_in(l, ex, &sc, x);
  const void *dyh = xh ? ganfw_layer_lp_in(l, ex, &sc, dy) : NULL;
  const void *wh = dyh && dx ? ganfw_layer_lp_param(l, ex, &sc, 0) : NULL;
  ganfw_status st = dyh && (wh || !dx) ? GANFW_OK : ganfw_error_code();
  if (st == GANFW_OK) {
    ganfw_op op = matmul_op(l, c, x->shape[0], 1, ex->dtype);
    op.flags = c->accumulate ? GANFW_OP_ACCUMULATE : 0;
    op.in[0] = xh, op.in[1] = wh, op.in[2] = dyh;
    op.out[0] = dx ? dx->data : NULL;
    op.grad[0] = c->dw, op.grad[1] = bias_grad(l, c->param_grads);
    st = run_with_workspace(l, ex, c, x->shape[0], &op);
  }
  ganfw_layer_scratch_release(&sc);
  return st;
}

/* Once per layer, on a real backend: the algorithm of each pass the backend chose for the
 * whole batch (a convolution's), in the log and in memory.json (ctx->algorithms). */
static void note_algorithms(ganfw_layer *l, const ganfw_exec *ex, const matmul_call *c,
                            int64_t rows, int32_t dtype) {
  if (l->algorithms_noted || strcmp(ex->be->vt->name, "meta") == 0) return;
  l->algorithms_noted = 1;
  const ganfw_op op = matmul_op(l, c, rows, 0, dtype);
  const char *a[GANFW_OP_PASS_COUNT];
  for (int32_t p = 0; p < GANFW_OP_PASS_COUNT; p++) a[p] = ganfw_backend_algorithm(ex->be, &op, p);
  if (!a[0] || !a[1] || !a[2]) return;
  const char *name = l->qualified ? l->qualified : l->name;
  ganfw_log(GANFW_LOG_INFO,
            "%s (%s, batch %lld): forward %s, input gradient %s, weight "
            "gradient %s",
            name, l->vt->type, (long long)rows, a[0], a[1], a[2]);
  char json[512];
  snprintf(json, sizeof json,
           "    {\"layer\": \"%s\", \"type\": \"%s\", \"batch\": %lld, \"forward\": \"%s\", "
           "\"input_gradient\": \"%s\", \"weight_gradient\": \"%s\"}",
           name, l->vt->type, (long long)rows, a[0], a[1], a[2]);
  ganfw_ctx_note_algorithm(ex->ctx, json);
}

ganfw_status ganfw_matmul_forward(ganfw_layer *l, const ganfw_exec *ex, const ganfw_matmul_kind *k,
                                  ganfw_tensor *x, int32_t out_ndim, const int64_t *out,
                                  ganfw_tensor **y, ganfw_saved *saved) {
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, out_ndim, out, GANFW_MEM_ACTIVATION);
  if (!t) return ganfw_error_code();
  matmul_call c = {.k = k, .in = x->shape};
  ganfw_status st = ganfw_spectral_forward_begin(l, ex, saved);
  if (st == GANFW_OK) st = ganfw_mask_forward_begin(l, ex);
  const int lp = st == GANFW_OK && ganfw_layer_lp_matmul(ex, k->lp_group, x);
  if (lp) {
    st = forward_lp(l, ex, &c, x, t);
  } else if (st == GANFW_OK) {
    ganfw_layer_scratch ps = {0};
    ganfw_tensor *io[2] = {x, t};
    st = ganfw_layer_f32_params(l, ex, &ps, c.p);
    if (st == GANFW_OK) st = ganfw_layer_rows_run(l, ex, io, 1, 2, forward_rows, &c);
    ganfw_layer_scratch_release(&ps);
  }
  ganfw_spectral_release(l);
  ganfw_mask_release(l);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return st;
  }
  if (saved) saved->t[0] = ganfw_tensor_retain(x);
  note_algorithms(l, ex, &c, x->shape[0], lp ? ex->dtype : GANFW_DTYPE_F32);
  *y = t;
  return GANFW_OK;
}

ganfw_status ganfw_matmul_backward(ganfw_layer *l, const ganfw_exec *ex, const ganfw_matmul_kind *k,
                                   ganfw_saved *saved, ganfw_tensor *dy, ganfw_tensor **dx,
                                   int32_t param_grads, int32_t accumulate) {
  ganfw_tensor *x = saved->t[0];
  ganfw_tensor *g = NULL;
  if (dx) {
    g = ganfw_layer_tensor(l, ex, ex->dtype, x->ndim, x->shape, GANFW_MEM_ACTIVATION);
    if (!g) return ganfw_error_code();
  }
  if (!g && !param_grads) return GANFW_OK;
  matmul_call c = {.k = k, .in = x->shape, .param_grads = param_grads, .accumulate = accumulate};
  ganfw_status st = ganfw_spectral_backward_begin(l, ex, saved, param_grads, accumulate, &c.dw);
  if (st == GANFW_OK) st = ganfw_mask_backward_begin(l, ex, param_grads, accumulate, &c.dw);
  if (st == GANFW_OK && ganfw_layer_lp_matmul(ex, k->lp_group, x)) {
    st = backward_lp(l, ex, &c, x, dy, g);
  } else if (st == GANFW_OK) {
    ganfw_layer_scratch ps = {0};
    ganfw_tensor *io[3] = {x, dy, g};
    st = ganfw_layer_f32_params(l, ex, &ps, c.p);
    if (st == GANFW_OK) st = ganfw_layer_rows_run(l, ex, io, 2, 3, backward_rows, &c);
    ganfw_layer_scratch_release(&ps);
  }
  if (st == GANFW_OK) st = ganfw_spectral_backward_end(l, ex, saved, param_grads, accumulate);
  if (st == GANFW_OK) st = ganfw_mask_backward_end(l, ex, param_grads, accumulate);
  ganfw_spectral_release(l);
  ganfw_mask_release(l);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  if (dx) *dx = g;
  return GANFW_OK;
}

/* --- double backward (penalties on an input gradient) ------------------------------------- */

/* f: u, du */
static ganfw_status jvp_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                             int64_t rows, float *const *f) {
  const matmul_call *c = arg;
  ganfw_op op = matmul_op(l, c, rows, 0, GANFW_DTYPE_F32);
  op.in[0] = f[0], op.in[1] = c->p[0], op.in[2] = NULL; /* linear in the input: no bias */
  op.out[0] = f[1];
  return run_with_workspace(l, ex, c, rows, &op);
}

/* f: u, dy: the weight gradient of u against dy, added */
static ganfw_status weight_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                int64_t rows, float *const *f) {
  const matmul_call *c = arg;
  ganfw_op op = matmul_op(l, c, rows, 1, GANFW_DTYPE_F32);
  op.flags = GANFW_OP_ACCUMULATE;
  op.in[0] = f[0], op.in[1] = NULL, op.in[2] = f[1];
  op.grad[0] = c->dw;
  return run_with_workspace(l, ex, c, rows, &op);
}

/* backward gave dx = W^T dy (conv's backward-data; the bias does not enter). For the
 * penalty's gradient u of dx: d<u, W^T dy>/d dy = W u (the forward without bias), and
 * d<u, W^T dy>/dW = the weight gradient of input u against output gradient dy. dx does not
 * depend on the layer's input: no ax. */
ganfw_status ganfw_matmul_backward2(ganfw_layer *l, const ganfw_exec *ex,
                                    const ganfw_matmul_kind *k, ganfw_saved *saved,
                                    ganfw_tensor *dy, ganfw_tensor *const *u, ganfw_tensor **du,
                                    int32_t param_grads) {
  *du = NULL;
  if (!u[0]) return GANFW_OK;
  ganfw_tensor *t =
      ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, dy->ndim, dy->shape, GANFW_MEM_ACTIVATION);
  if (!t) return ganfw_error_code();
  matmul_call c = {.k = k, .in = u[0]->shape, .accumulate = 1};
  ganfw_status st = ganfw_spectral_backward_begin(l, ex, saved, param_grads, 1, &c.dw);
  if (st == GANFW_OK) st = ganfw_mask_backward_begin(l, ex, param_grads, 1, &c.dw);
  ganfw_layer_scratch ps = {0};
  if (st == GANFW_OK) st = ganfw_layer_f32_params(l, ex, &ps, c.p);
  ganfw_tensor *jvp[2] = {u[0], t};
  if (st == GANFW_OK) st = ganfw_layer_rows_run(l, ex, jvp, 1, 2, jvp_rows, &c);
  ganfw_layer_scratch_release(&ps);
  ganfw_tensor *wg[2] = {u[0], dy};
  if (st == GANFW_OK && param_grads) st = ganfw_layer_rows_run(l, ex, wg, 2, 2, weight_rows, &c);
  if (st == GANFW_OK) st = ganfw_spectral_backward_end(l, ex, saved, param_grads, 1);
  if (st == GANFW_OK) st = ganfw_mask_backward_end(l, ex, param_grads, 1);
  ganfw_spectral_release(l);
  ganfw_mask_release(l);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return st;
  }
  *du = t;
  return GANFW_OK;
}
