/* Activation layer (ReLU, LeakyReLU, Tanh, Sigmoid) on any shape. Runs in place when the
 * executor holds the only reference to its input, as PyTorch's inplace=True; keeps its
 * output for backward, which runs in place on dy the same way. Args: ganfw_activation_args
 * (layer.h). */
#include "nn/layer.h"

static ganfw_status act_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                              int64_t *out, int32_t *out_ndim) {
  for (int32_t d = 0; d < in_ndim; d++) out[d] = in[d];
  *out_ndim = in_ndim;
  return GANFW_OK;
}

/* x itself (retained) when nobody else holds it and it has the compute dtype, else a new
 * tensor of its shape in the compute dtype. */
static ganfw_tensor *in_place_or_new(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x) {
  if (ganfw_tensor_exclusive(x) && x->dtype == ex->dtype) return ganfw_tensor_retain(x);
  return ganfw_layer_tensor(l, ex, ex->dtype, x->ndim, x->shape, GANFW_MEM_ACTIVATION);
}

/* y = f(x) over n values in dtype; y may be x. */
static ganfw_status act_forward_op(ganfw_layer *l, const ganfw_exec *ex, int32_t dtype, int64_t n,
                                   const void *x, void *y) {
  const ganfw_activation_args *a = &l->args.activation;
  ganfw_op op = {.kind = GANFW_OP_ACT_FORWARD,
                 .dtype = dtype,
                 .mode = a->kind,
                 .shape.d = {n},
                 .in = {x},
                 .out = {y},
                 .sc = {a->alpha}};
  return ganfw_layer_op(l, ex, &op);
}

/* dx from the output y and dy over n values in dtype; dx may be dy. */
static ganfw_status act_backward_op(ganfw_layer *l, const ganfw_exec *ex, int32_t dtype, int64_t n,
                                    const void *y, const void *dy, void *dx) {
  const ganfw_activation_args *a = &l->args.activation;
  ganfw_op op = {.kind = GANFW_OP_ACT_BACKWARD,
                 .dtype = dtype,
                 .mode = a->kind,
                 .shape.d = {n},
                 .in = {y, dy},
                 .out = {dx},
                 .sc = {a->alpha}};
  return ganfw_layer_op(l, ex, &op);
}

/* f: x, y */
static ganfw_status act_forward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                     int64_t rows, float *const *f) {
  const int64_t per_row = *(const int64_t *)arg;
  return act_forward_op(l, ex, GANFW_DTYPE_F32, rows * per_row, f[0], f[1]);
}

/* f: y, dy, dx */
static ganfw_status act_backward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                      int64_t rows, float *const *f) {
  const int64_t per_row = *(const int64_t *)arg;
  return act_backward_op(l, ex, GANFW_DTYPE_F32, rows * per_row, f[0], f[1], f[2]);
}

static ganfw_status act_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                ganfw_tensor **y, ganfw_saved *saved) {
  ganfw_tensor *t = in_place_or_new(l, ex, x);
  if (!t) return ganfw_error_code();
  ganfw_status st;
  if (ganfw_layer_lp(ex, GANFW_LP_ACT)) { /* native 16-bit: the whole tensor at once */
    ganfw_layer_scratch sc = {0};
    const void *xh = ganfw_layer_lp_in(l, ex, &sc, x);
    st = xh ? act_forward_op(l, ex, ex->dtype, x->numel, xh, t->data) : ganfw_error_code();
    ganfw_layer_scratch_release(&sc);
  } else {
    int64_t per_row = x->numel / x->shape[0];
    ganfw_tensor *io[2] = {x, t};
    st = ganfw_layer_rows_run(l, ex, io, 1, 2, act_forward_rows, &per_row);
  }
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return st;
  }
  if (saved) saved->t[0] = ganfw_tensor_retain(t);
  *y = t;
  return GANFW_OK;
}

static ganfw_status act_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                 ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                 int32_t accumulate) {
  if (!dx) return GANFW_OK;
  ganfw_tensor *g = in_place_or_new(l, ex, dy);
  if (!g) return ganfw_error_code();
  ganfw_status st;
  if (ganfw_layer_lp(ex, GANFW_LP_ACT)) { /* the saved output is in the compute dtype */
    ganfw_layer_scratch sc = {0};
    const void *dyh = ganfw_layer_lp_in(l, ex, &sc, dy);
    st = dyh ? act_backward_op(l, ex, ex->dtype, dy->numel, saved->t[0]->data, dyh, g->data)
             : ganfw_error_code();
    ganfw_layer_scratch_release(&sc);
  } else {
    int64_t per_row = dy->numel / dy->shape[0];
    ganfw_tensor *io[3] = {saved->t[0], dy, g};
    st = ganfw_layer_rows_run(l, ex, io, 2, 3, act_backward_rows, &per_row);
  }
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  *dx = g;
  return GANFW_OK;
}

/* backward gave dx = f'(x) dy, with f' read from the output y. For the penalty's gradient u
 * of dx: du = f'(x) u (the backward's own op on u), and ax = f''(x) u dy: 0 for the
 * piecewise-linear ReLU and LeakyReLU, -2 y f'(x) u dy for tanh (f' = 1 - y^2) and
 * (1 - 2y) f'(x) u dy for the sigmoid (f' = y (1 - y)). */
static ganfw_status act_backward2(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                  ganfw_tensor *dy, int32_t n, ganfw_tensor *const *u,
                                  ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads) {
  (void)n, (void)param_grads;
  *du = NULL;
  if (!u[0]) return GANFW_OK;
  const int32_t kind = l->args.activation.kind;
  const int32_t curved = kind == GANFW_ACT_TANH || kind == GANFW_ACT_SIGMOID;
  ganfw_g2 c = {.l = l, .ex = ex};
  const int64_t m = u[0]->numel;
  const float *y = ganfw_g2_f32(&c, saved->t[0]);
  ganfw_tensor *t = ganfw_g2_tensor(&c, u[0]);
  ganfw_tensor *a = curved ? ganfw_g2_tensor(&c, u[0]) : NULL;
  if (c.st == GANFW_OK) c.st = act_backward_op(l, ex, GANFW_DTYPE_F32, m, y, u[0]->data, t->data);
  if (curved) {
    const float *g = ganfw_g2_f32(&c, dy);
    float *w = ganfw_g2_buf(&c, m);
    ganfw_g2_bin(&c, GANFW_BINARY_MUL, 1, m, w, u[0]->data, 0, g, 0);
    if (c.st == GANFW_OK) c.st = act_backward_op(l, ex, GANFW_DTYPE_F32, m, y, w, w);
    if (c.st == GANFW_OK && kind == GANFW_ACT_TANH) c.st = ganfw_layer_fill(l, ex, m, a->data, 0);
    if (c.st == GANFW_OK && kind == GANFW_ACT_SIGMOID)
      ganfw_g2_unary(&c, GANFW_UNARY_MUL_SCALAR, m, a->data, w, 1.0f, 0.0f);
    ganfw_g2_addcmul(&c, m, a->data, -2.0f, y, w);
  }
  ganfw_status st = ganfw_g2_end(&c);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    ganfw_tensor_destroy(a);
    return st;
  }
  *du = t;
  ax[0] = a;
  return GANFW_OK;
}

/* Only the curved activations read dy in backward2. */
static int32_t act_backward2_reads_dy(const ganfw_layer *l) {
  return l->args.activation.kind == GANFW_ACT_TANH || l->args.activation.kind == GANFW_ACT_SIGMOID;
}

const ganfw_layer_vt ganfw_layer_activation = {
    .type = "activation",
    .infer = act_infer,
    .forward = act_forward,
    .backward = act_backward,
    .backward2 = act_backward2,
    .backward2_reads_dy = act_backward2_reads_dy,
};
