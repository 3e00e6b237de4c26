/* Spectral normalisation of a conv2d, conv_transpose2d or linear weight, as PyTorch 1.13's
 * torch.nn.utils.spectral_norm: the weight W [A,h,B] as the matrix W_mat [h, A*B] (see
 * ganfw_spectral_norm in layer.h), u [h] and v [A*B] estimate its largest singular vectors,
 *   training forward: n times v = normalize(W_mat^T u), u = normalize(W_mat v), in place;
 *   every forward:    sigma = u^T W_mat v, the layer computes with W / sigma;
 *   backward:         dW = (G - <G, W/sigma> u v^T) / sigma for the gradient G of W / sigma
 *                     (u and v constants, as autograd sees them),
 * with normalize(x) = x / max(|x|, eps). Built from the backend's gemm, reductions and
 * foreach ops (and transpose01 for conv_transpose2d's dim 1), so that it runs, and is
 * planned, on every backend; the norms and sigma are reduced in double on the host. */
#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "nn/layer.h"

enum { SN_U = 0, SN_V = 1 };

/* --- the ops it is built from, each through ganfw_layer_op (see op.h for each) ----------- */

/* *result = the sum (kind GANFW_OP_SUM) or the sum of squares (GANFW_OP_SUMSQ) of x[0..n). */
static ganfw_status sn_reduce(const ganfw_layer *l, const ganfw_exec *ex, int32_t kind, int64_t n,
                              const float *x, double *result) {
  ganfw_op op = {.kind = kind, .shape.d = {n}, .in = {x}};
  ganfw_status st = ganfw_layer_op(l, ex, &op);
  *result = st == GANFW_OK ? op.result : 0.0;
  return st;
}

/* x[0..n) *= a */
static ganfw_status sn_scale(const ganfw_layer *l, const ganfw_exec *ex, int64_t n, float *x,
                             float a) {
  ganfw_op op = {.kind = GANFW_OP_SCALE, .shape.d = {n}, .out = {x}, .sc = {a}};
  return ganfw_layer_op(l, ex, &op);
}

/* C [M,N] = alpha * op(A) * B + beta * C, row-major; op(A) = A^T when trans_a. */
static ganfw_status sn_gemm(const ganfw_layer *l, const ganfw_exec *ex, int32_t trans_a, int64_t M,
                            int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                            const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  ganfw_op op = {.kind = GANFW_OP_GEMM,
                 .mode = trans_a ? 1 : 0,
                 .shape.d = {M, N, K, lda, ldb, ldc},
                 .in = {A, B},
                 .out = {C},
                 .sc = {alpha, beta}};
  return ganfw_layer_op(l, ex, &op);
}

/* x [A,B,C] -> y [B,A,C] */
static ganfw_status sn_transpose01(const ganfw_layer *l, const ganfw_exec *ex, int64_t A, int64_t B,
                                   int64_t C, const float *x, float *y) {
  ganfw_op op = {.kind = GANFW_OP_TRANSPOSE01, .shape.d = {A, B, C}, .in = {x}, .out = {y}};
  return ganfw_layer_op(l, ex, &op);
}

/* out[0..n) = a * b */
static ganfw_status sn_mul(const ganfw_layer *l, const ganfw_exec *ex, int64_t n, float *out,
                           const float *a, const float *b) {
  ganfw_op op = {.kind = GANFW_OP_MUL, .shape.d = {n}, .in = {a, b}, .out = {out}};
  return ganfw_layer_op(l, ex, &op);
}

/* y[0..n) += alpha * x */
static ganfw_status sn_axpy(const ganfw_layer *l, const ganfw_exec *ex, int64_t n, float *y,
                            float alpha, const float *x) {
  ganfw_op op = {.kind = GANFW_OP_AXPY, .shape.d = {n}, .in = {x}, .out = {y}, .sc = {alpha}};
  return ganfw_layer_op(l, ex, &op);
}

/* x /= max(|x|, eps) */
static ganfw_status sn_normalize(const ganfw_layer *l, const ganfw_exec *ex, int64_t n, float *x,
                                 float eps) {
  double sumsq = 0.0;
  ganfw_status st = sn_reduce(l, ex, GANFW_OP_SUMSQ, n, x, &sumsq);
  const double norm = sqrt(sumsq);
  return st == GANFW_OK ? sn_scale(l, ex, n, x, (float)(1.0 / fmax(norm, (double)eps))) : st;
}

/* --- spectral norm ------------------------------------------------------------------------ */

ganfw_status ganfw_spectral_init(ganfw_layer *l, int32_t dim) {
  ganfw_spectral_norm *sn = &l->sn;
  if (sn->n_power_iterations <= 0) return GANFW_OK;
  const ganfw_tensor *w = l->param[0];
  sn->dim = dim;
  sn->A = dim == 0 ? 1 : w->shape[0];
  sn->h = w->shape[dim];
  sn->B = w->numel / (sn->A * sn->h);
  static const char *const suffix[2] = {"weight_u", "weight_v"};
  const int64_t len[2] = {sn->h, sn->A * sn->B};
  for (int k = 0; k < 2; k++) {
    char *q = ganfw_name_join(l->qualified, suffix[k]);
    l->extra_name[k] = ganfw_name_join(l->name, suffix[k]);
    if (q && l->extra_name[k])
      l->extra[k] = ganfw_tensor_create(l->ctx, GANFW_DTYPE_F32, 1, &len[k], GANFW_MEM_PARAM, q);
    free(q);
    if (!l->extra[k])
      return ganfw_error_wrap(ganfw_error_code() ? ganfw_error_code() : GANFW_ERR_OOM,
                              "allocating the spectral norm buffer %s.%s", l->qualified, suffix[k]);
    l->nextra = k + 1;
  }
  /* PyTorch draws u, then v, from N(0, 1) and normalises both */
  ganfw_status st = GANFW_OK;
  for (int k = 0; k < 2 && st == GANFW_OK; k++)
    st = ganfw_ctx_rng_normal(l->ctx, len[k], l->extra[k]->data, 0.0f, 1.0f);
  if (st != GANFW_OK)
    return ganfw_error_wrap(st, "layer %s: drawing the spectral norm's u and v", l->qualified);
  const ganfw_exec ex = ganfw_layer_init_exec(l);
  for (int k = 0; k < 2 && st == GANFW_OK; k++)
    st = sn_normalize(l, &ex, len[k], l->extra[k]->data, sn->eps);
  return st;
}

void ganfw_spectral_release(ganfw_layer *l) {
  ganfw_tensor_destroy(l->sn.w_eff);
  ganfw_tensor_destroy(l->sn.grad_eff);
  l->sn.w_eff = l->sn.grad_eff = NULL;
}

/* sn.w_eff = W / sigma, a workspace tensor of the weight's shape. */
static ganfw_status sn_weight_eff(ganfw_layer *l, const ganfw_exec *ex, double sigma) {
  const ganfw_tensor *w = l->param[0];
  ganfw_tensor *e =
      ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, w->ndim, w->shape, GANFW_MEM_WORKSPACE);
  if (!e) return ganfw_error_code();
  ganfw_status st = ex->be->vt->copy_d2d(ex->be, e->data, w->data, (size_t)w->nbytes);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(e);
    return ganfw_layer_error(l, st, "copying the weight: %s", ganfw_error_message());
  }
  st = sn_scale(l, ex, e->numel, e->data, (float)(1.0 / sigma));
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(e);
    return st;
  }
  l->sn.w_eff = e;
  return GANFW_OK;
}

/* The power iterations (when `iterate`) and sigma = u^T W_mat v, from W_mat in transient
 * workspace: a transposed copy of the weight for dim 1, and a vector of h. */
static ganfw_status sn_sigma(ganfw_layer *l, const ganfw_exec *ex, int32_t iterate, double *sigma) {
  ganfw_spectral_norm *sn = &l->sn;
  const int64_t h = sn->h, w = sn->A * sn->B;
  ganfw_status st = GANFW_OK;
  ganfw_tensor *copy = NULL;
  const float *W = l->param[0]->data;
  if (sn->dim != 0) {
    copy = ganfw_layer_workspace(l, ex, (size_t)(h * w) * sizeof(float), &st);
    if (st == GANFW_OK) st = sn_transpose01(l, ex, sn->A, h, sn->B, W, copy->data);
    if (st != GANFW_OK) {
      ganfw_tensor_destroy(copy);
      return st;
    }
    W = copy->data;
  }
  ganfw_tensor *wv = ganfw_layer_workspace(l, ex, (size_t)h * sizeof(float), &st);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(copy);
    return st;
  }
  float *u = l->extra[SN_U]->data, *v = l->extra[SN_V]->data;
  for (int32_t it = 0; iterate && it < sn->n_power_iterations && st == GANFW_OK; it++) {
    st = sn_gemm(l, ex, 1, w, 1, h, 1.0f, W, w, u, 1, 0.0f, v, 1); /* v = W_mat^T u */
    if (st == GANFW_OK) st = sn_normalize(l, ex, w, v, sn->eps);
    if (st == GANFW_OK)
      st = sn_gemm(l, ex, 0, h, 1, w, 1.0f, W, w, v, 1, 0.0f, u, 1); /* u = W_mat v */
    if (st == GANFW_OK) st = sn_normalize(l, ex, h, u, sn->eps);
  }
  float *t = wv->data;
  if (st == GANFW_OK) st = sn_gemm(l, ex, 0, h, 1, w, 1.0f, W, w, v, 1, 0.0f, t, 1);
  if (st == GANFW_OK) st = sn_mul(l, ex, h, t, t, u);
  if (st == GANFW_OK) st = sn_reduce(l, ex, GANFW_OP_SUM, h, t, sigma);
  ganfw_tensor_destroy(wv);
  ganfw_tensor_destroy(copy);
  return st;
}

ganfw_status ganfw_spectral_forward_begin(ganfw_layer *l, const ganfw_exec *ex,
                                          ganfw_saved *saved) {
  ganfw_spectral_norm *sn = &l->sn;
  if (sn->n_power_iterations <= 0) return GANFW_OK;
  double sigma = 0.0;
  ganfw_status st = sn_sigma(l, ex, ex->update_stats, &sigma);
  if (st != GANFW_OK) return st;
  sn->sigma = sigma;
  if (saved) { /* u and v as this forward used them, for its backward */
    const int64_t h = sn->h, n = h + sn->A * sn->B;
    ganfw_tensor *rec = ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_ACTIVATION);
    if (!rec) return ganfw_error_code();
    ganfw_backend *be = ex->be;
    st = be->vt->copy_d2d(be, rec->data, l->extra[SN_U]->data, (size_t)h * sizeof(float));
    if (st == GANFW_OK)
      st = be->vt->copy_d2d(be, (float *)rec->data + h, l->extra[SN_V]->data,
                            (size_t)(n - h) * sizeof(float));
    if (st != GANFW_OK) {
      ganfw_tensor_destroy(rec);
      return ganfw_layer_error(l, st, "keeping u and v: %s", ganfw_error_message());
    }
    saved->t[1] = rec;
    saved->value = sigma;
  }
  return sn_weight_eff(l, ex, sigma);
}

ganfw_status ganfw_spectral_backward_begin(ganfw_layer *l, const ganfw_exec *ex,
                                           const ganfw_saved *saved, int32_t param_grads,
                                           int32_t accumulate, float **dw) {
  ganfw_spectral_norm *sn = &l->sn;
  *dw = param_grads ? l->grad[0]->data : NULL;
  if (sn->n_power_iterations <= 0) return GANFW_OK;
  if (!saved->t[1])
    return ganfw_layer_error(l, GANFW_ERR_INTERNAL,
                             "backward without the spectral norm record of its forward");
  ganfw_status st = sn_weight_eff(l, ex, saved->value);
  if (st != GANFW_OK || !param_grads) return st;
  if (sn->dim == 0 && !accumulate) return GANFW_OK; /* the kernel writes grad[0], fixed below */
  const ganfw_tensor *w = l->param[0];
  ganfw_tensor *g =
      ganfw_layer_tensor(l, ex, GANFW_DTYPE_F32, w->ndim, w->shape, GANFW_MEM_WORKSPACE);
  if (!g) {
    ganfw_spectral_release(l);
    return ganfw_error_code();
  }
  sn->grad_eff = g;
  *dw = g->data;
  /* the kernel adds to it when the layer accumulates (its bias gradient does) */
  return accumulate ? ganfw_layer_fill(l, ex, g->numel, g->data, 0.0f) : GANFW_OK;
}

ganfw_status ganfw_spectral_backward_end(ganfw_layer *l, const ganfw_exec *ex,
                                         const ganfw_saved *saved, int32_t param_grads,
                                         int32_t accumulate) {
  ganfw_spectral_norm *sn = &l->sn;
  if (sn->n_power_iterations <= 0 || !param_grads) {
    ganfw_spectral_release(l);
    return GANFW_OK;
  }
  const int64_t h = sn->h, w = sn->A * sn->B, n = h * w;
  const double sigma = saved->value;
  const float *u = saved->t[1]->data, *v = u + h;
  float *G = sn->grad_eff ? sn->grad_eff->data : l->grad[0]->data;
  float *E = sn->w_eff->data, *dW = l->grad[0]->data;
  double c = 0.0;
  ganfw_status st = sn_mul(l, ex, n, E, E, G); /* w_eff is not needed any more: E = G * w_eff */
  if (st == GANFW_OK) st = sn_reduce(l, ex, GANFW_OP_SUM, n, E, &c);
  float *P = G; /* G in W_mat's layout */
  if (st == GANFW_OK && sn->dim != 0) {
    st = sn_transpose01(l, ex, sn->A, h, sn->B, G, E);
    P = E;
  }
  /* P = P / sigma - (c / sigma) u v^T */
  if (st == GANFW_OK)
    st = sn_gemm(l, ex, 0, h, w, 1, (float)(-c / sigma), u, 1, v, w, (float)(1.0 / sigma), P, w);
  if (st == GANFW_OK && sn->dim == 0) {
    if (accumulate) st = sn_axpy(l, ex, n, dW, 1.0f, P); /* else P is grad[0] */
  } else if (st == GANFW_OK && !accumulate) {
    st = sn_transpose01(l, ex, h, sn->A, sn->B, P, dW);
  } else if (st == GANFW_OK) {
    st = sn_transpose01(l, ex, h, sn->A, sn->B, P, G);
    if (st == GANFW_OK) st = sn_axpy(l, ex, n, dW, 1.0f, G);
  }
  ganfw_spectral_release(l);
  return st;
}
