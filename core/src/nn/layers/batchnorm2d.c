/* batchnorm2d layer: per-channel normalisation of x [N,C,H,W] with affine weight and bias
 * [C] and running statistics (PyTorch's BatchNorm2d). Train mode keeps x and the batch
 * mean and 1/std [C] for backward, whose input gradient goes over the output gradient where
 * the backend allows it. Args: ganfw_batchnorm_args (layer.h), its eps and momentum as the
 * model asked for them unless the run's config sets model.batchnorm_eps /
 * model.batchnorm_momentum; the running statistics live there too. In a
 * data-parallel run with dist.batchnorm: sync, train mode takes the statistics over the
 * global batch (SyncBatchNorm): each rank's per-channel sums are all-reduced before the
 * normalisation, and backward all-reduces the sums its input gradient needs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h" /* defines: ganfw_be_batchnorm2d_backward_in_place */
#include "base/error.h"
#include "config/config.h"
#include "dist/dist.h"
#include "nn/layer.h"
#include "runtime/ctx.h"

static ganfw_status bn_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim, int64_t *out,
                             int32_t *out_ndim) {
  const int64_t C = l->args.batchnorm.channels;
  if (in_ndim != 4 || in[1] != C)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,%lld,H,W] input, gets %d dims with %lld channels",
                             (long long)C, (int)in_ndim, (long long)in[1]);
  for (int32_t d = 0; d < 4; d++) out[d] = in[d];
  *out_ndim = 4;
  return GANFW_OK;
}

static char *buffer_name(const char *layer, const char *suffix) {
  size_t n = snprintf(NULL, 0, "%s.%s", layer, suffix) + 1;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s.%s", layer, suffix);
  return s;
}

/* The shortest decimal that reads back as the float v (1e-05, 0.1), for the resolved
 * config. */
static double bn_shortest(float v) {
  char buf[32];
  for (int prec = 1; prec <= 9; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
    if ((float)strtod(buf, NULL) == v) break;
  }
  return strtod(buf, NULL);
}

/* model.<key> for *value (eps when `is_eps`, else momentum), applied by the core to every
 * BatchNorm2d a model makes: when the config sets it, it replaces the model's value; when
 * absent the model's value stands and is recorded as the default (the first layer's, for the
 * resolved config). PyTorch's defaults, which the bundled models ask for: eps 1e-5, momentum
 * 0.1. */
static ganfw_status bn_config_value(const ganfw_cfg *model, const char *key, int32_t is_eps,
                                    float *value) {
  double v;
  if (!ganfw_cfg_has(model, key)) return ganfw_cfg_float(model, key, bn_shortest(*value), &v);
  ganfw_status st = ganfw_cfg_float(model, key, 0.0, &v);
  if (st != GANFW_OK) return st;
  const int ok = is_eps ? v > 0 && v < 1 && (float)v > 0 : v >= 0 && v <= 1;
  if (!ok)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: model.%s must be %s (PyTorch's default %s), got %g",
                           ganfw_cfg_where(ganfw_cfg_child(model, key)), key,
                           is_eps ? "in (0, 1)" : "in [0, 1]", is_eps ? "1e-5" : "0.1", v);
  *value = (float)v;
  return GANFW_OK;
}

static ganfw_status bn_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  ganfw_batchnorm_args *bn = &l->args.batchnorm;
  const int64_t C = bn->channels;
  if (l->ctx->config) {
    const ganfw_cfg *model = ganfw_cfg_child(ganfw_config_root(l->ctx->config), "model");
    ganfw_status st = bn_config_value(model, "batchnorm_eps", 1, &bn->eps);
    if (st == GANFW_OK) st = bn_config_value(model, "batchnorm_momentum", 0, &bn->momentum);
    if (st != GANFW_OK) return st;
  }
  ganfw_status st = ganfw_layer_add_param(l, 0, "weight", 1, &C);
  if (st == GANFW_OK) st = ganfw_layer_add_param(l, 1, "bias", 1, &C);
  if (st != GANFW_OK) return st;
  static const char *const names[3] = {"running_mean", "running_var", "num_batches_tracked"};
  for (int i = 0; i < 3; i++)
    if (!(bn->buffer_name[i] = buffer_name(l->name, names[i])))
      return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  char *q_mean = buffer_name(l->qualified, names[0]);
  char *q_var = buffer_name(l->qualified, names[1]);
  if (q_mean && q_var) {
    bn->running_mean = ganfw_tensor_create(l->ctx, GANFW_DTYPE_F32, 1, &C, GANFW_MEM_PARAM, q_mean);
    if (bn->running_mean)
      bn->running_var = ganfw_tensor_create(l->ctx, GANFW_DTYPE_F32, 1, &C, GANFW_MEM_PARAM, q_var);
  }
  free(q_mean);
  free(q_var);
  if (!bn->running_mean || !bn->running_var)
    return ganfw_error_wrap(ganfw_error_code() ? ganfw_error_code() : GANFW_ERR_OOM,
                            "allocating the running statistics of %s", l->qualified);
  const ganfw_exec ex = ganfw_layer_init_exec(l);
  st = ganfw_layer_fill(l, &ex, C, l->param[0]->data, 1.0f);
  if (st == GANFW_OK) st = ganfw_layer_fill(l, &ex, C, l->param[1]->data, 0.0f);
  if (st == GANFW_OK) st = ganfw_layer_fill(l, &ex, C, bn->running_mean->data, 0.0f);
  if (st == GANFW_OK) st = ganfw_layer_fill(l, &ex, C, bn->running_var->data, 1.0f);
  bn->num_batches_tracked = 0;
  return st;
}

/* One op over a chunk of channels (see ganfw_layer_channels_run). */
typedef struct bn_call {
  int64_t N, HW;
  float *mean, *invstd; /* [C] batch statistics (train) */
  int32_t update_stats, param_grads, accumulate;
} bn_call;

/* Channel c0's entry of a [C] f32 vector, or NULL. */
static float *at(const ganfw_tensor *t, int64_t c0) {
  return t ? (float *)t->data + c0 : NULL;
}

/* The forward op over channels [c0, c0 + channels) of x and y ([N,channels,HW] in dtype):
 * batch statistics in train mode (c->mean set), else the running ones. */
static ganfw_status bn_forward_op(ganfw_layer *l, const ganfw_exec *ex, const bn_call *c,
                                  int32_t dtype, int64_t c0, int64_t channels, const void *x,
                                  void *y) {
  const ganfw_batchnorm_args *bn = &l->args.batchnorm;
  const float *gamma = at(l->param[0], c0), *beta = at(l->param[1], c0);
  float *running_mean = at(bn->running_mean, c0), *running_var = at(bn->running_var, c0);
  ganfw_op op;
  if (!c->mean)
    op = (ganfw_op){.kind = GANFW_OP_BATCHNORM2D_EVAL,
                    .dtype = dtype,
                    .shape.d = {c->N, channels, c->HW},
                    .in = {x, gamma, beta, running_mean, running_var},
                    .out = {y},
                    .sc = {bn->eps}};
  else
    op = (ganfw_op){.kind = GANFW_OP_BATCHNORM2D_TRAIN,
                    .dtype = dtype,
                    .shape.d = {c->N, channels, c->HW},
                    .in = {x, gamma, beta},
                    .out = {y, c->update_stats ? running_mean : NULL,
                            c->update_stats ? running_var : NULL, c->mean + c0, c->invstd + c0},
                    .sc = {bn->momentum, bn->eps}};
  return ganfw_layer_op(l, ex, &op);
}

/* The backward op over channels [c0, c0 + channels) of x, dy and dx (or NULL), in dtype. */
static ganfw_status bn_backward_op(ganfw_layer *l, const ganfw_exec *ex, const bn_call *c,
                                   int32_t dtype, int64_t c0, int64_t channels, const void *x,
                                   const void *dy, void *dx) {
  ganfw_op op = {.kind = GANFW_OP_BATCHNORM2D_BACKWARD,
                 .dtype = dtype,
                 .flags = c->accumulate ? GANFW_OP_ACCUMULATE : 0,
                 .shape.d = {c->N, channels, c->HW},
                 .in = {x, dy, at(l->param[0], c0), c->mean + c0, c->invstd + c0},
                 .out = {dx},
                 .grad = {c->param_grads ? at(l->grad[0], c0) : NULL,
                          c->param_grads ? at(l->grad[1], c0) : NULL}};
  return ganfw_layer_op(l, ex, &op);
}

/* f: x, y */
static ganfw_status bn_forward_channels(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t c0,
                                        int64_t channels, float *const *f) {
  return bn_forward_op(l, ex, arg, GANFW_DTYPE_F32, c0, channels, f[0], f[1]);
}

/* f: x, dy, dx (or NULL) */
static ganfw_status bn_backward_channels(ganfw_layer *l, const ganfw_exec *ex, void *arg,
                                         int64_t c0, int64_t channels, float *const *f) {
  return bn_backward_op(l, ex, arg, GANFW_DTYPE_F32, c0, channels, f[0], f[1], f[2]);
}

/* --- native 16-bit compute: the op in the compute dtype on the whole batch ---------------- */

static ganfw_status bn_forward_lp(ganfw_layer *l, const ganfw_exec *ex, const bn_call *c,
                                  ganfw_tensor *x, ganfw_tensor *y) {
  ganfw_layer_scratch sc = {0};
  const void *xh = ganfw_layer_lp_in(l, ex, &sc, x);
  ganfw_status st =
      xh ? bn_forward_op(l, ex, c, ex->dtype, 0, x->shape[1], xh, y->data) : ganfw_error_code();
  ganfw_layer_scratch_release(&sc);
  return st;
}

static ganfw_status bn_backward_lp(ganfw_layer *l, const ganfw_exec *ex, const bn_call *c,
                                   ganfw_tensor *x, ganfw_tensor *dy, ganfw_tensor *dx) {
  ganfw_layer_scratch sc = {0};
  const void *xh = ganfw_layer_lp_in(l, ex, &sc, x);
  const void *dyh = xh ? ganfw_layer_lp_in(l, ex, &sc, dy) : NULL;
  ganfw_status st =
      dyh ? bn_backward_op(l, ex, c, ex->dtype, 0, x->shape[1], xh, dyh, dx ? dx->data : NULL)
          : ganfw_error_code();
  ganfw_layer_scratch_release(&sc);
  return st;
}

/* --- SyncBatchNorm: statistics over every rank's rows ------------------------------------ */

/* The data-parallel communicator when this forward or backward syncs, else NULL. */
static ganfw_dist *bn_sync(const ganfw_layer *l, const ganfw_exec *ex) {
  ganfw_dist *d = l->ctx->dist;
  return ex->train && ganfw_dist_parallel(d) && d->set.batchnorm == GANFW_DIST_BN_SYNC &&
                 d->bn_local == 0
             ? d
             : NULL;
}

/* One pass of the synced layer over a chunk of channels. */
typedef struct sync_call {
  int64_t N, HW, C;
  double *sum; /* [2C]: per channel sum of x and of x^2 (forward), or of dy and of
                  dy * xhat (backward) */
  const float *mean, *invstd;
  const double *dinvstd; /* [C]: 1/std before its rounding to f32 (forward) */
  double count;          /* the global batch's values per channel */
  int32_t param_grads, accumulate;
  int32_t compute; /* 0 on the meta backend: nothing to read */
} sync_call;

/* f: x (forward sums) */
static ganfw_status sync_sums(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t c0,
                              int64_t channels, float *const *f) {
  (void)l, (void)ex;
  const sync_call *c = arg;
  if (!c->compute) return GANFW_OK;
  for (int64_t k = 0; k < channels; k++) {
    double s = 0, q = 0;
    for (int64_t n = 0; n < c->N; n++) {
      const float *x = f[0] + (n * channels + k) * c->HW;
      for (int64_t i = 0; i < c->HW; i++) {
        s += x[i];
        q += (double)x[i] * x[i];
      }
    }
    c->sum[c0 + k] = s;
    c->sum[c->C + c0 + k] = q;
  }
  return GANFW_OK;
}

/* f: x, y */
static ganfw_status sync_normalize(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t c0,
                                   int64_t channels, float *const *f) {
  (void)ex;
  const sync_call *c = arg;
  if (!c->compute) return GANFW_OK;
  const float *w = l->param[0]->data, *b = l->param[1]->data;
  for (int64_t k = 0; k < channels; k++) { /* the CPU kernel's arithmetic, operation by operation */
    const float m = c->mean[c0 + k], s = (float)((double)w[c0 + k] * c->dinvstd[c0 + k]),
                o = b[c0 + k];
    for (int64_t n = 0; n < c->N; n++) {
      const float *x = f[0] + (n * channels + k) * c->HW;
      float *y = f[1] + (n * channels + k) * c->HW;
      for (int64_t i = 0; i < c->HW; i++) y[i] = (x[i] - m) * s + o;
    }
  }
  return GANFW_OK;
}

/* f: x, dy: the sums of dy and dy * xhat, and the parameter gradients from this rank's rows
 * (the gradient averaging across ranks makes them the global batch's) */
static ganfw_status sync_grad_sums(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t c0,
                                   int64_t channels, float *const *f) {
  (void)ex;
  const sync_call *c = arg;
  if (!c->compute) return GANFW_OK;
  for (int64_t k = 0; k < channels; k++) {
    const float m = c->mean[c0 + k];
    double sdy = 0, sdyx = 0; /* sum(dy), sum(dy * (x - mean)), as the CPU kernel sums them */
    for (int64_t n = 0; n < c->N; n++) {
      const float *x = f[0] + (n * channels + k) * c->HW, *dy = f[1] + (n * channels + k) * c->HW;
      for (int64_t i = 0; i < c->HW; i++) {
        sdy += dy[i];
        sdyx += (double)(dy[i] * (x[i] - m));
      }
    }
    c->sum[c0 + k] = sdy;
    c->sum[c->C + c0 + k] = sdyx;
    if (c->param_grads) {
      const double sdyxhat = sdyx * (double)c->invstd[c0 + k];
      float *dw = (float *)l->grad[0]->data + c0 + k, *db = (float *)l->grad[1]->data + c0 + k;
      *dw = (float)(c->accumulate ? *dw + sdyxhat : sdyxhat);
      *db = (float)(c->accumulate ? *db + sdy : sdy);
    }
  }
  return GANFW_OK;
}

/* f: x, dy, dx: dx = w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), the means over
 * the global batch */
static ganfw_status sync_dx(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t c0,
                            int64_t channels, float *const *f) {
  (void)ex;
  const sync_call *c = arg;
  if (!c->compute) return GANFW_OK;
  const float *w = l->param[0]->data;
  for (int64_t k = 0; k < channels; k++) {
    /* dx = dy * a + (x - mean) * b + c, a b c in double and then f32, as the CPU kernel */
    const float m = c->mean[c0 + k];
    const double is = c->invstd[c0 + k], ad = (double)w[c0 + k] * is;
    const float a = (float)ad, b = (float)(-ad * is * is * c->sum[c->C + c0 + k] / c->count),
                cc = (float)(-ad * c->sum[c0 + k] / c->count);
    for (int64_t n = 0; n < c->N; n++) {
      const float *x = f[0] + (n * channels + k) * c->HW, *dy = f[1] + (n * channels + k) * c->HW;
      float *dx = f[2] + (n * channels + k) * c->HW;
      for (int64_t i = 0; i < c->HW; i++) dx[i] = dy[i] * a + (x[i] - m) * b + cc;
    }
  }
  return GANFW_OK;
}

/* The batch statistics over every rank into mean/invstd [C] (and the running statistics),
 * then y from them. */
static ganfw_status bn_forward_sync(ganfw_layer *l, const ganfw_exec *ex, ganfw_dist *d,
                                    ganfw_tensor *x, ganfw_tensor *y, float *mean, float *invstd) {
  const int64_t N = x->shape[0], C = x->shape[1], HW = x->shape[2] * x->shape[3];
  /* a plan (meta backend): the same passes and scratch tensors, nothing read */
  const int32_t compute = strcmp(ex->be->vt->name, "meta") != 0;
  double *sum = calloc((size_t)(2 * C), sizeof *sum);
  if (!sum) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  sync_call c = {.N = N, .HW = HW, .C = C, .sum = sum, .compute = compute};
  ganfw_tensor *in[1] = {x};
  ganfw_status st = ganfw_layer_channels_run(l, ex, in, 1, 1, sync_sums, &c);
  char what[256];
  snprintf(what, sizeof what, "the batch statistics of %s (SyncBatchNorm)", l->qualified);
  if (st == GANFW_OK) st = ganfw_dist_allreduce_sum_f64(d, sum, 2 * C, what);
  if (st != GANFW_OK) {
    free(sum);
    return st;
  }
  const double count = (double)(N * HW) * d->size;
  const ganfw_batchnorm_args *bn = &l->args.batchnorm;
  const float eps = bn->eps, momentum = bn->momentum;
  float *rm = bn->running_mean->data, *rv = bn->running_var->data;
  double *dinv = sum; /* the sums are read before their slot is reused */
  for (int64_t k = 0; compute && k < C; k++) {
    const double m = sum[k] / count;
    double var = sum[C + k] / count - m * m;
    if (var < 0) var = 0;
    const double is = 1.0 / sqrt(var + (double)eps);
    mean[k] = (float)m;
    invstd[k] = (float)is;
    dinv[k] = is;
    if (ex->update_stats) {
      rm[k] = (float)((1.0 - momentum) * rm[k] + momentum * m);
      rv[k] = (float)((1.0 - momentum) * rv[k] + momentum * (var * count / (count - 1.0)));
    }
  }
  c.mean = mean;
  c.invstd = invstd;
  c.dinvstd = dinv;
  ganfw_tensor *io[2] = {x, y};
  st = ganfw_layer_channels_run(l, ex, io, 1, 2, sync_normalize, &c);
  free(sum);
  return st;
}

static ganfw_status bn_backward_sync(ganfw_layer *l, const ganfw_exec *ex, ganfw_dist *d,
                                     ganfw_tensor *x, ganfw_tensor *dy, ganfw_tensor *dx,
                                     const float *mean, const float *invstd, int32_t param_grads,
                                     int32_t accumulate) {
  const int64_t N = x->shape[0], C = x->shape[1], HW = x->shape[2] * x->shape[3];
  double *sum = calloc((size_t)(2 * C), sizeof *sum);
  if (!sum) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  sync_call c = {.N = N,
                 .HW = HW,
                 .C = C,
                 .sum = sum,
                 .mean = mean,
                 .invstd = invstd,
                 .count = (double)(N * HW) * d->size,
                 .param_grads = param_grads,
                 .accumulate = accumulate,
                 .compute = strcmp(ex->be->vt->name, "meta") != 0};
  ganfw_tensor *in[2] = {x, dy};
  ganfw_status st = ganfw_layer_channels_run(l, ex, in, 2, 2, sync_grad_sums, &c);
  char what[256];
  snprintf(what, sizeof what, "the gradient sums of %s (SyncBatchNorm)", l->qualified);
  if (st == GANFW_OK && dx) st = ganfw_dist_allreduce_sum_f64(d, sum, 2 * C, what);
  c.param_grads = 0;
  ganfw_tensor *io[3] = {x, dy, dx};
  if (st == GANFW_OK && dx) st = ganfw_layer_channels_run(l, ex, io, 2, 3, sync_dx, &c);
  free(sum);
  return st;
}

static ganfw_status bn_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                               ganfw_tensor **y, ganfw_saved *saved) {
  const int64_t N = x->shape[0], C = x->shape[1], HW = x->shape[2] * x->shape[3];
  if (ex->train && N * HW < 2)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "training needs more than one value per channel (batch %lld of "
                             "%lldx%lld); use a larger batch",
                             (long long)N, (long long)x->shape[2], (long long)x->shape[3]);
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, 4, x->shape, GANFW_MEM_ACTIVATION);
  /* the batch mean and 1/std stay f32 whatever the compute dtype */
  ganfw_tensor *mean = NULL, *invstd = NULL;
  if (t && ex->train &&
      (mean = ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, 1, &C, GANFW_MEM_ACTIVATION)))
    invstd = ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, 1, &C, GANFW_MEM_ACTIVATION);
  bn_call c = {.N = N, .HW = HW, .update_stats = ex->update_stats};
  ganfw_status st = !t || (ex->train && !invstd) ? ganfw_error_code() : GANFW_OK;
  if (st == GANFW_OK) {
    c.mean = mean ? mean->data : NULL;
    c.invstd = invstd ? invstd->data : NULL;
    ganfw_tensor *io[2] = {x, t};
    ganfw_dist *d = bn_sync(l, ex);
    st = d ? bn_forward_sync(l, ex, d, x, t, c.mean, c.invstd)
         : ganfw_layer_lp(ex, GANFW_LP_BATCHNORM)
             ? bn_forward_lp(l, ex, &c, x, t)
             : ganfw_layer_channels_run(l, ex, io, 1, 2, bn_forward_channels, &c);
  }
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(invstd);
    ganfw_tensor_destroy(mean);
    ganfw_tensor_destroy(t);
    return st;
  }
  if (ex->train && ex->update_stats) l->args.batchnorm.num_batches_tracked++;
  if (saved && ex->train) {
    saved->t[0] = ganfw_tensor_retain(x);
    saved->t[1] = mean;
    saved->t[2] = invstd;
  } else {
    ganfw_tensor_destroy(mean);
    ganfw_tensor_destroy(invstd);
  }
  *y = t;
  return GANFW_OK;
}

/* The input gradient written over the output gradient (PyTorch allocates a new one): when
 * the executor handed dy over (nobody else holds it), it has the compute dtype and the
 * backend's kernels allow dx == dy. */
static int32_t in_place_ok(const ganfw_exec *ex, ganfw_tensor *dy) {
  return ganfw_tensor_exclusive(dy) && dy->dtype == ex->dtype &&
         ganfw_be_batchnorm2d_backward_in_place(ex->be);
}

static ganfw_status bn_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                int32_t accumulate) {
  ganfw_tensor *x = saved->t[0];
  if (!saved->t[1])
    return ganfw_layer_error(l, GANFW_ERR_UNSUPPORTED,
                             "backward through batchnorm in eval mode is not supported; train "
                             "the net in train mode or freeze the layers before it");
  if (!dx && !param_grads) return GANFW_OK;
  ganfw_tensor *g = NULL;
  if (dx && in_place_ok(ex, dy))
    g = ganfw_tensor_retain(dy);
  else if (dx && !(g = ganfw_layer_tensor(l, ex, ex->dtype, 4, x->shape, GANFW_MEM_ACTIVATION)))
    return ganfw_error_code();
  bn_call c = {.N = x->shape[0],
               .HW = x->shape[2] * x->shape[3],
               .mean = saved->t[1]->data,
               .invstd = saved->t[2]->data,
               .param_grads = param_grads,
               .accumulate = accumulate};
  ganfw_tensor *io[3] = {x, dy, g};
  ganfw_dist *d = bn_sync(l, ex);
  ganfw_status st =
      d ? bn_backward_sync(l, ex, d, x, dy, g, c.mean, c.invstd, param_grads, accumulate)
      : ganfw_layer_lp(ex, GANFW_LP_BATCHNORM)
          ? bn_backward_lp(l, ex, &c, x, dy, g)
          : ganfw_layer_channels_run(l, ex, io, 2, 3, bn_backward_channels, &c);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  if (dx) *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_batchnorm2d = {
    .type = "batchnorm2d",
    .infer = bn_infer,
    .init = bn_init,
    .forward = bn_forward,
    .backward = bn_backward,
};
