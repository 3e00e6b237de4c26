/* groupnorm layer (PyTorch's nn.GroupNorm(G, C, eps, affine)): x [N,C,H,W] (or [N,C]) with
 * each sample's C channels in G groups of C/G, each group normalised by its own mean and
 * biased variance, then weight and bias [C] per channel. Args: ganfw_groupnorm_args
 * (layer.h).
 * This file also holds the normalisation that instancenorm2d and layernorm share
 * (ganfw_norm_*, layer.h). */
#include "nn/layer.h"

/* --- the shared normalisation ------------------------------------------------------------- */

/* One op over rows of the batch (see ganfw_layer_rows_run). */
typedef struct norm_call {
  const ganfw_norm_view *v;
  double *mean, *invstd; /* [N*G] */
  int32_t param_grads, accumulate;
} norm_call;

static const float *param_or_null(const ganfw_layer *l, int32_t i) {
  return l->param[i] ? l->param[i]->data : NULL;
}

/* f: x, y */
static ganfw_status norm_forward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                      int64_t rows, float *const *f) {
  const norm_call *c = arg;
  const ganfw_norm_view *v = c->v;
  ganfw_op op = {.kind = GANFW_OP_GROUPNORM_FORWARD,
                 .shape.d = {rows, v->C, v->HW, v->G},
                 .in = {f[0], param_or_null(l, 0), param_or_null(l, 1)},
                 .out = {f[1], c->mean + n0 * v->G, c->invstd + n0 * v->G},
                 .sc = {v->eps}};
  return ganfw_layer_op(l, ex, &op);
}

/* f: x, dy, dx (or NULL) */
static ganfw_status norm_backward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                       int64_t rows, float *const *f) {
  const norm_call *c = arg;
  const ganfw_norm_view *v = c->v;
  const int32_t pg = c->param_grads && l->grad[0];
  ganfw_op op = {
      .kind = GANFW_OP_GROUPNORM_BACKWARD,
      .flags = c->accumulate || n0 > 0 ? GANFW_OP_ACCUMULATE : 0,
      .shape.d = {rows, v->C, v->HW, v->G},
      .in = {f[0], f[1], param_or_null(l, 0), c->mean + n0 * v->G, c->invstd + n0 * v->G},
      .out = {f[2]},
      .grad = {pg ? l->grad[0]->data : NULL, pg ? l->grad[1]->data : NULL}};
  return ganfw_layer_op(l, ex, &op);
}

ganfw_status ganfw_norm_forward(ganfw_layer *l, const ganfw_exec *ex, const ganfw_norm_view *v,
                                ganfw_tensor *x, ganfw_tensor **y, ganfw_saved *saved) {
  const int64_t N = x->shape[0], stats_bytes = 2 * N * v->G * (int64_t)sizeof(double);
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, x->ndim, x->shape, GANFW_MEM_ACTIVATION);
  /* the statistics are doubles whatever the compute dtype (bytes: there is no f64 dtype) */
  ganfw_tensor *stats =
      t ? ganfw_layer_tensor(l, ex, GANFW_DTYPE_U8, 1, &stats_bytes, GANFW_MEM_ACTIVATION) : NULL;
  ganfw_status st = stats ? GANFW_OK : ganfw_error_code();
  if (st == GANFW_OK) {
    norm_call c = {.v = v, .mean = stats->data, .invstd = (double *)stats->data + N * v->G};
    ganfw_tensor *io[2] = {x, t};
    st = ganfw_layer_rows_run(l, ex, io, 1, 2, norm_forward_rows, &c);
  }
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(stats);
    ganfw_tensor_destroy(t);
    return st;
  }
  if (saved) {
    saved->t[0] = ganfw_tensor_retain(x);
    saved->t[1] = stats;
  } else {
    ganfw_tensor_destroy(stats);
  }
  *y = t;
  return GANFW_OK;
}

ganfw_status ganfw_norm_backward(ganfw_layer *l, const ganfw_exec *ex, const ganfw_norm_view *v,
                                 ganfw_saved *saved, ganfw_tensor *dy, ganfw_tensor **dx,
                                 int32_t param_grads, int32_t accumulate) {
  ganfw_tensor *x = saved->t[0], *stats = saved->t[1];
  const int32_t pg = param_grads && l->grad[0];
  if (!dx && !pg) return GANFW_OK;
  ganfw_tensor *g = NULL;
  if (dx && !(g = ganfw_layer_tensor(l, ex, ex->dtype, x->ndim, x->shape, GANFW_MEM_ACTIVATION)))
    return ganfw_error_code();
  const int64_t N = x->shape[0];
  norm_call c = {.v = v,
                 .mean = stats->data,
                 .invstd = (double *)stats->data + N * v->G,
                 .param_grads = pg,
                 .accumulate = accumulate};
  ganfw_tensor *io[3] = {x, dy, g};
  ganfw_status st = ganfw_layer_rows_run(l, ex, io, 2, 3, norm_backward_rows, &c);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  if (dx) *dx = g;
  return GANFW_OK;
}

/* y[n][c][i] = x[n][c][i] * s[c] over [N,C,inner] f32 (out may be x). */
static void channel_scale(ganfw_g2 *c, int64_t N, int64_t C, int64_t inner, float *out,
                          const float *x, const float *s) {
  ganfw_op op = {
      .kind = GANFW_OP_CHANNEL_AFFINE, .shape.d = {N, C, inner}, .in = {x, s, NULL}, .out = {out}};
  if (c->st == GANFW_OK) c->st = ganfw_layer_op(c->l, c->ex, &op);
}

/* backward gave, per sample and group of m values with xh = (x - mean) rstd and h = gamma dy,
 * dx = rstd P h, where P a = a - mean(a) - xh mean(a xh) is symmetric. For the penalty's
 * gradient u of dx (sums over the group: B = sum u xh, C = sum h xh, A = sum u h - m mean(u)
 * mean(h)):
 *   du      = gamma rstd P u                                      (the forward's JVP)
 *   dgamma += sum over samples and positions of (rstd P u) dy
 *   ax      = -(rstd^2 / m) (xh (A - B C / m) + C P u + B P h)
 * the last from d rstd / dx = -rstd^2 xh / m and d(sum a xh) / dx = rstd P a. The group's
 * statistics are recomputed here in f32 with sums in double (the forward's are in double). */
ganfw_status ganfw_norm_backward2(ganfw_layer *l, const ganfw_exec *ex, const ganfw_norm_view *v,
                                  ganfw_saved *saved, ganfw_tensor *dy, ganfw_tensor *const *u,
                                  ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads) {
  *du = NULL;
  if (!u[0]) return GANFW_OK;
  ganfw_tensor *xt = saved->t[0];
  const int64_t N = xt->shape[0], R = N * v->G, m = v->C / v->G * v->HW, n = R * m;
  const float *gamma = l->param[0] ? l->param[0]->data : NULL;
  const double im = 1.0 / (double)m;
  ganfw_g2 c = {.l = l, .ex = ex};
  const float *x = ganfw_g2_f32(&c, xt), *g = ganfw_g2_f32(&c, dy), *uu = u[0]->data;
  ganfw_tensor *dut = ganfw_g2_tensor(&c, u[0]), *axt = ganfw_g2_tensor(&c, xt);
  float *xh = ganfw_g2_buf(&c, n), *tmp = ganfw_g2_buf(&c, n), *pu = ganfw_g2_buf(&c, n);
  float *ph = ganfw_g2_buf(&c, n), *h = gamma ? ganfw_g2_buf(&c, n) : (float *)g;
  float *mu = ganfw_g2_buf(&c, R), *rstd = ganfw_g2_buf(&c, R), *ub = ganfw_g2_buf(&c, R);
  float *hb = ganfw_g2_buf(&c, R), *B = ganfw_g2_buf(&c, R), *Cs = ganfw_g2_buf(&c, R);
  float *A = ganfw_g2_buf(&c, R), *Bm = ganfw_g2_buf(&c, R), *Cm = ganfw_g2_buf(&c, R);
  /* xh and rstd */
  ganfw_g2_rowsum(&c, R, m, im, x, mu);
  ganfw_g2_bin(&c, GANFW_BINARY_SUB, R, m, xh, x, 0, mu, 1);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, tmp, xh, 0, xh, 0);
  ganfw_g2_rowsum(&c, R, m, im, tmp, rstd);
  ganfw_g2_unary(&c, GANFW_UNARY_ADD_SCALAR, R, rstd, rstd, v->eps, 0);
  ganfw_g2_unary(&c, GANFW_UNARY_RSQRT, R, rstd, rstd, 0, 0);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, xh, xh, 0, rstd, 1);
  if (gamma) channel_scale(&c, N, v->C, v->HW, h, g, gamma);
  /* the group sums */
  ganfw_g2_rowsum(&c, R, m, im, uu, ub);
  ganfw_g2_rowsum(&c, R, m, im, h, hb);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, tmp, uu, 0, xh, 0);
  ganfw_g2_rowsum(&c, R, m, 1.0, tmp, B);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, tmp, h, 0, xh, 0);
  ganfw_g2_rowsum(&c, R, m, 1.0, tmp, Cs);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, tmp, uu, 0, h, 0);
  ganfw_g2_rowsum(&c, R, m, 1.0, tmp, A);
  ganfw_g2_addcmul(&c, R, A, (float)-m, ub, hb);
  ganfw_g2_addcmul(&c, R, A, (float)-im, B, Cs); /* A - B C / m */
  ganfw_g2_unary(&c, GANFW_UNARY_MUL_SCALAR, R, Bm, B, (float)im, 0);
  ganfw_g2_unary(&c, GANFW_UNARY_MUL_SCALAR, R, Cm, Cs, (float)im, 0);
  /* P u and P h */
  ganfw_g2_bin(&c, GANFW_BINARY_SUB, R, m, pu, uu, 0, ub, 1);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, tmp, xh, 0, Bm, 1);
  ganfw_g2_bin(&c, GANFW_BINARY_SUB, R, m, pu, pu, 0, tmp, 0);
  ganfw_g2_bin(&c, GANFW_BINARY_SUB, R, m, ph, h, 0, hb, 1);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, tmp, xh, 0, Cm, 1);
  ganfw_g2_bin(&c, GANFW_BINARY_SUB, R, m, ph, ph, 0, tmp, 0);
  /* du = gamma rstd P u, and dgamma */
  float *t = dut ? dut->data : NULL;
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, t, pu, 0, rstd, 1);
  if (gamma && param_grads && l->grad[0]) {
    float *dg = ganfw_g2_buf(&c, v->C);
    ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, tmp, t, 0, g, 0);
    ganfw_op op = {.kind = GANFW_OP_REDUCE_SUM,
                   .shape.reduce = {.dim = {1, N, v->C, v->HW}, .mask = (1u << 1) | (1u << 3)},
                   .in = {tmp},
                   .out = {dg},
                   .sc = {1.0}};
    if (c.st == GANFW_OK) c.st = ganfw_layer_op(l, ex, &op);
    ganfw_g2_bin(&c, GANFW_BINARY_ADD, 1, v->C, l->grad[0]->data, l->grad[0]->data, 0, dg, 0);
  }
  if (gamma) channel_scale(&c, N, v->C, v->HW, t, t, gamma);
  /* ax */
  float *a = axt ? axt->data : NULL;
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, a, xh, 0, A, 1);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, tmp, pu, 0, Cs, 1);
  ganfw_g2_bin(&c, GANFW_BINARY_ADD, R, m, a, a, 0, tmp, 0);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, tmp, ph, 0, B, 1);
  ganfw_g2_bin(&c, GANFW_BINARY_ADD, R, m, a, a, 0, tmp, 0);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, 1, R, mu, rstd, 0, rstd, 0);
  ganfw_g2_unary(&c, GANFW_UNARY_MUL_SCALAR, R, mu, mu, (float)-im, 0);
  ganfw_g2_bin(&c, GANFW_BINARY_MUL, R, m, a, a, 0, mu, 1);
  ganfw_status st = ganfw_g2_end(&c);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(dut);
    ganfw_tensor_destroy(axt);
    return st;
  }
  *du = dut;
  ax[0] = axt;
  return GANFW_OK;
}

ganfw_status ganfw_norm_add_affine(ganfw_layer *l, int32_t ndim, const int64_t *shape) {
  ganfw_status st = ganfw_layer_add_param(l, 0, "weight", ndim, shape);
  if (st == GANFW_OK) st = ganfw_layer_add_param(l, 1, "bias", ndim, shape);
  if (st != GANFW_OK) return st;
  const ganfw_exec ex = ganfw_layer_init_exec(l);
  st = ganfw_layer_fill(l, &ex, l->param[0]->numel, l->param[0]->data, 1.0f);
  if (st == GANFW_OK) st = ganfw_layer_fill(l, &ex, l->param[1]->numel, l->param[1]->data, 0.0f);
  return st;
}

/* --- groupnorm ------------------------------------------------------------------------------ */

static ganfw_norm_view gn_view(const ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  int64_t HW = 1;
  for (int32_t d = 2; d < in_ndim; d++) HW *= in[d];
  const ganfw_groupnorm_args *a = &l->args.groupnorm;
  ganfw_norm_view v = {.C = a->channels, .HW = HW, .G = a->groups, .eps = a->eps};
  return v;
}

static ganfw_status gn_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim, int64_t *out,
                             int32_t *out_ndim) {
  const int64_t C = l->args.groupnorm.channels;
  if ((in_ndim != 4 && in_ndim != 2) || in[1] != C)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,%lld,H,W] or [N,%lld] input, gets %d dims with %lld "
                             "channels",
                             (long long)C, (long long)C, (int)in_ndim, (long long)in[1]);
  for (int32_t d = 0; d < in_ndim; d++) out[d] = in[d];
  *out_ndim = in_ndim;
  return GANFW_OK;
}

static ganfw_status gn_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  (void)in, (void)in_ndim;
  const ganfw_groupnorm_args *a = &l->args.groupnorm;
  return a->affine ? ganfw_norm_add_affine(l, 1, &a->channels) : GANFW_OK;
}

static ganfw_status gn_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                               ganfw_tensor **y, ganfw_saved *saved) {
  ganfw_norm_view v = gn_view(l, x->shape, x->ndim);
  return ganfw_norm_forward(l, ex, &v, x, y, saved);
}

static ganfw_status gn_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                int32_t accumulate) {
  ganfw_norm_view v = gn_view(l, saved->t[0]->shape, saved->t[0]->ndim);
  return ganfw_norm_backward(l, ex, &v, saved, dy, dx, param_grads, accumulate);
}

static ganfw_status gn_backward2(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                 ganfw_tensor *dy, int32_t n, ganfw_tensor *const *u,
                                 ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads) {
  (void)n;
  ganfw_norm_view v = gn_view(l, saved->t[0]->shape, saved->t[0]->ndim);
  return ganfw_norm_backward2(l, ex, &v, saved, dy, u, du, ax, param_grads);
}

const ganfw_layer_vt ganfw_layer_groupnorm = {
    .type = "groupnorm",
    .infer = gn_infer,
    .init = gn_init,
    .forward = gn_forward,
    .backward = gn_backward,
    .backward2 = gn_backward2,
};
