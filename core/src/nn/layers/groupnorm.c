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

const ganfw_layer_vt ganfw_layer_groupnorm = {
    .type = "groupnorm",
    .infer = gn_infer,
    .init = gn_init,
    .forward = gn_forward,
    .backward = gn_backward,
};
