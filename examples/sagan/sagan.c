/* SAGAN's self-attention (Zhang et al., "Self-Attention Generative Adversarial Networks",
 * 2019, section 3) as a ganfw layer plugin (ganfw_sagan_attention.so): a layer any model's
 * config inserts by name (`model.insert`, ganfw/layer_plugin.h). On x [N,C,H,W], P = H*W,
 * C' = C / reduction (8 in the paper):
 *   q = Wq x + bq, k = Wk x + bk   [N,C',P]     (1x1 convolutions)
 *   v = Wv x + bv                  [N,C,P]
 *   attn = softmax over j of q[:,:,i] . k[:,:,j]   [N,P,P]
 *   o = v @ attn^T                 [N,C,P]      (o[:,:,i] = sum_j attn[i,j] v[:,:,j])
 *   y = gamma * o + x              gamma a learned scalar, 0 at the start
 * The three 1x1 convolutions are one matmul with a packed weight, as nn.MultiheadAttention
 * packs its projections: parameters "in_proj_weight" [2C'+C, C] (the rows of Wq, Wk, Wv),
 * "in_proj_bias" [2C'+C], "gamma" [1]; the weights start as PyTorch's Conv2d's,
 * U(-1/sqrt(C), 1/sqrt(C)). A 1x1 convolution of every pixel is W @ x with x's channels as
 * rows: x [N,C,P] permuted to [C,N*P], one bmm with the weight as a batch of one.
 *
 * Backward, with do = gamma * dy and dE the gradient of the scores q^T k:
 *   dgamma = sum(dy * o)           (o recomputed from v and attn)
 *   dattn = gamma * dy^T v,  dE = softmax_backward(attn, dattn)
 *   dq = k dE^T,  dk = q dE,  dv = gamma * dy @ attn
 *   dW = [dq;dk;dv] x^T summed over the batch, dbias = its sum over n and pixels,
 *   dx = dy + W^T [dq;dk;dv]
 * Forward keeps x (a reference) and saves q, k, v and attn. Written with the host's tensor
 * ops only (ABI 1.8: tensor_bmm, tensor_softmax, tensor_permute, tensor_reshape), so it runs
 * on every backend and under `ganfw plan`; sagan_bytes below replays each call's tensors in
 * the order the code makes them, so the figures it reports are those the core measures.
 * Views (tensor_reshape) share memory and count no bytes. Config keys: reduction (8). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#define SAGAN_NAME          "sagan_attention"
#define SAGAN_REDUCTION     8 /* the paper's C / 8 channels for the query and the key */
#define SAGAN_MAX_REDUCTION 4096

typedef struct sagan {
  const ganfw_host *host;
  int64_t reduction;
  int64_t channels; /* C, known from init on (0 before) */
} sagan;

/* The sizes of one call: N, C, C' (query and key channels), P (pixels), Ct = 2C' + C. */
typedef struct sagan_dims {
  int64_t n, c, cq, p, ct;
} sagan_dims;

static sagan_dims dims_of(const sagan *s, const int64_t *in) {
  sagan_dims d = {.n = in[0], .c = in[1], .p = in[2] * in[3]};
  d.cq = d.c / s->reduction;
  d.ct = 2 * d.cq + d.c;
  return d;
}

/* --- bytes: the tensors each call creates, in its order ------------------------------------- */

/* Live and peak bytes of the tensors a call holds, as the core counts them. */
typedef struct ledger {
  int64_t live, peak;
} ledger;

static void take(ledger *l, int64_t elems) {
  l->live += 4 * elems;
  if (l->live > l->peak) l->peak = l->live;
}

static void drop(ledger *l, int64_t elems) {
  l->live -= 4 * elems;
}

/* The forward's tensors; what it saves is live at the end (q, k, v, attn). */
static ledger forward_ledger(const sagan_dims *d) {
  const int64_t ncp = d->n * d->c * d->p, nctp = d->n * d->ct * d->p, ncqp = d->n * d->cq * d->p;
  ledger l = {0, 0};
  take(&l, ncp);  /* xt: x as [C,N*P] */
  take(&l, nctp); /* the packed projections, [Ct,N*P] */
  drop(&l, ncp);
  take(&l, nctp); /* ... permuted to [N,Ct,P] */
  drop(&l, nctp);
  take(&l, ncqp); /* q */
  take(&l, ncqp); /* k */
  take(&l, ncp);  /* v */
  drop(&l, nctp);
  take(&l, d->n * d->p * d->p); /* attn */
  take(&l, ncp);                /* o */
  drop(&l, ncp);
  return l;
}

/* A backward that computes dx and every parameter gradient (one that computes less makes a
 * subset of these tensors, so it stays below). */
static ledger backward_ledger(const sagan_dims *d) {
  const int64_t ncp = d->n * d->c * d->p, nctp = d->n * d->ct * d->p, ncqp = d->n * d->cq * d->p;
  ledger l = {0, 0};
  take(&l, ncp); /* o, for dgamma */
  take(&l, 1);   /* its sum */
  drop(&l, 1);
  drop(&l, ncp);
  take(&l, d->n * d->p * d->p); /* dattn, then dE in place */
  take(&l, ncqp);               /* dq */
  take(&l, ncqp);               /* dk */
  drop(&l, d->n * d->p * d->p);
  take(&l, ncp);  /* dv */
  take(&l, nctp); /* [dq;dk;dv] */
  drop(&l, ncqp + ncqp + ncp);
  take(&l, d->ct); /* dbias */
  drop(&l, d->ct);
  take(&l, nctp); /* ... permuted to [Ct,N*P] */
  drop(&l, nctp);
  take(&l, ncp); /* xt, for dW */
  drop(&l, ncp);
  take(&l, ncp); /* dx as [C,N*P] */
  drop(&l, ncp);
  drop(&l, nctp);
  return l;
}

static int64_t sagan_saved_bytes(void *state, const int64_t *in, int32_t ndim) {
  (void)ndim;
  const sagan_dims d = dims_of(state, in);
  return 4 * (d.n * d.ct * d.p + d.n * d.p * d.p); /* q, k, v, attn */
}

static int64_t sagan_workspace_bytes(void *state, const int64_t *in, int32_t ndim,
                                     int32_t backward) {
  const sagan_dims d = dims_of(state, in);
  if (backward) return backward_ledger(&d).peak;
  return forward_ledger(&d).peak - sagan_saved_bytes(state, in, ndim);
}

/* --- shapes and parameters ------------------------------------------------------------------ */

static ganfw_status sagan_infer(void *state, const int64_t *in, int32_t ndim, int64_t *out,
                                int32_t *out_ndim) {
  const sagan *s = state;
  if (ndim != 4)
    return s->host->error(NULL, GANFW_ERR_INVALID_ARG,
                          SAGAN_NAME " attends over the pixels of an [N,C,H,W] input, not a %d-dim "
                                     "one; insert it after a convolution stage",
                          (int)ndim);
  if (in[1] / s->reduction < 1)
    return s->host->error(NULL, GANFW_ERR_INVALID_ARG,
                          SAGAN_NAME ": %lld channels give no query channels at reduction %lld "
                                     "(C / reduction must be at least 1); lower `reduction`",
                          (long long)in[1], (long long)s->reduction);
  if (s->channels && in[1] != s->channels)
    return s->host->error(NULL, GANFW_ERR_INVALID_ARG,
                          SAGAN_NAME " was built for %lld channels, its input has %lld",
                          (long long)s->channels, (long long)in[1]);
  for (int32_t i = 0; i < 4; i++) out[i] = in[i];
  *out_ndim = 4;
  return GANFW_OK;
}

static ganfw_status sagan_init(void *state, ganfw_ctx *ctx, ganfw_layer_init *li, const int64_t *in,
                               int32_t ndim) {
  sagan *s = state;
  const ganfw_host *h = s->host;
  (void)ndim;
  s->channels = in[1];
  const sagan_dims d = dims_of(s, in);
  const int64_t wshape[2] = {d.ct, d.c}, one = 1;
  ganfw_tensor *w = NULL, *b = NULL, *gamma = NULL;
  const float bound = 1.0f / sqrtf((float)d.c); /* Conv2d's default, fan_in = C */
  ganfw_status st = h->layer_add_param(li, "in_proj_weight", 2, wshape, &w);
  if (st == GANFW_OK) st = h->layer_add_param(li, "in_proj_bias", 1, &d.ct, &b);
  if (st == GANFW_OK) st = h->layer_add_param(li, "gamma", 1, &one, &gamma); /* 0 */
  if (st == GANFW_OK) st = h->rng_uniform(ctx, w, -bound, bound);
  if (st == GANFW_OK) st = h->rng_uniform(ctx, b, -bound, bound);
  return st;
}

/* --- forward and backward ------------------------------------------------------------------- */

static ganfw_tensor *make(const sagan *s, const ganfw_layer_call *call, int32_t ndim,
                          const int64_t *shape, int32_t category) {
  return s->host->tensor_create(call->ctx, GANFW_DTYPE_F32, ndim, shape, category, call->name);
}

/* A view of t in another shape (no copy); NULL with the error recorded. */
static ganfw_tensor *view(const sagan *s, const ganfw_layer_call *call, const ganfw_tensor *t,
                          int32_t ndim, const int64_t *shape) {
  return s->host->tensor_reshape((ganfw_tensor *)t, ndim, shape, call->name);
}

/* Frees the tensors ts[0..n) (NULL entries skipped). */
static void drop_all(const sagan *s, ganfw_tensor **ts, int n) {
  for (int i = 0; i < n; i++) s->host->tensor_destroy(ts[i]);
}

static const int32_t swap01[3] = {1, 0, 2}; /* [A,B,P] <-> [B,A,P] */

/* x [N,C,H,W] with the channels first: *t [C,N,P] (a copy) and *xt, a view of it as
 * [1,C,N*P], for the 1x1 convolutions; the caller destroys both (NULL on failure). */
static ganfw_status channels_first(const sagan *s, const ganfw_layer_call *call,
                                   const sagan_dims *d, const ganfw_tensor *x, ganfw_tensor **t,
                                   ganfw_tensor **xt) {
  const ganfw_host *h = s->host;
  const int64_t xs[3] = {d->n, d->c, d->p}, ts[3] = {d->c, d->n, d->p};
  const int64_t flat[3] = {1, d->c, d->n * d->p};
  ganfw_tensor *xv = view(s, call, x, 3, xs);
  *t = xv ? make(s, call, 3, ts, GANFW_MEM_WORKSPACE) : NULL;
  ganfw_status st = *t ? h->tensor_permute(call->ctx, *t, xv, swap01) : GANFW_ERR_OOM;
  h->tensor_destroy(xv);
  *xt = st == GANFW_OK ? view(s, call, *t, 3, flat) : NULL;
  return st == GANFW_OK && !*xt ? GANFW_ERR_OOM : st;
}

static ganfw_status sagan_forward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                  ganfw_tensor *y, ganfw_tensor **saved) {
  const sagan *s = state;
  const ganfw_host *h = s->host;
  ganfw_ctx *ctx = call->ctx;
  const sagan_dims d = dims_of(s, x->shape);
  const int64_t wv_shape[3] = {1, d.ct, d.c}, proj_shape[3] = {1, d.ct, d.n * d.p};
  const int64_t cnp[3] = {d.ct, d.n, d.p}, ncp3[3] = {d.n, d.ct, d.p};
  const int64_t qs[3] = {d.n, d.cq, d.p}, vs[3] = {d.n, d.c, d.p}, as[3] = {d.n, d.p, d.p};
  /* t: the call's tensors and views; q, k, v, attn go to saved[] */
  enum { XTB, XT, W, PROJ, PROJ3, QKV, O, YV, XV, NT };
  ganfw_tensor *t[NT] = {0}, *q = NULL, *k = NULL, *v = NULL, *attn = NULL;
  ganfw_status st = channels_first(s, call, &d, x, &t[XTB], &t[XT]);
  if (st == GANFW_OK && (!(t[W] = view(s, call, call->param[0], 3, wv_shape)) ||
                         !(t[PROJ] = make(s, call, 3, proj_shape, GANFW_MEM_WORKSPACE))))
    st = GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_bmm(ctx, t[PROJ], t[W], 0, t[XT], 0, 0);
  drop_all(s, &t[XTB], 2), t[XTB] = t[XT] = NULL;
  /* [Ct,N,P] -> [N,Ct,P], plus the biases */
  if (st == GANFW_OK && (!(t[PROJ3] = view(s, call, t[PROJ], 3, cnp)) ||
                         !(t[QKV] = make(s, call, 3, ncp3, GANFW_MEM_WORKSPACE))))
    st = GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_permute(ctx, t[QKV], t[PROJ3], swap01);
  drop_all(s, &t[PROJ], 2), t[PROJ] = t[PROJ3] = NULL;
  if (st == GANFW_OK) st = h->tensor_channel_affine(ctx, t[QKV], t[QKV], NULL, call->param[1]);
  /* q, k, v: the three parts of the channels */
  if (st == GANFW_OK && (!(q = make(s, call, 3, qs, GANFW_MEM_ACTIVATION)) ||
                         !(k = make(s, call, 3, qs, GANFW_MEM_ACTIVATION)) ||
                         !(v = make(s, call, 3, vs, GANFW_MEM_ACTIVATION))))
    st = GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_narrow(ctx, q, t[QKV], 1, 0);
  if (st == GANFW_OK) st = h->tensor_narrow(ctx, k, t[QKV], 1, d.cq);
  if (st == GANFW_OK) st = h->tensor_narrow(ctx, v, t[QKV], 1, 2 * d.cq);
  drop_all(s, &t[QKV], 1), t[QKV] = NULL;
  /* attn = softmax_j(q^T k), o = v attn^T, y = gamma * o + x */
  if (st == GANFW_OK && !(attn = make(s, call, 3, as, GANFW_MEM_ACTIVATION))) st = GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_bmm(ctx, attn, q, 1, k, 0, 0);
  if (st == GANFW_OK) st = h->tensor_softmax(ctx, attn, attn, 2, 0);
  if (st == GANFW_OK && (!(t[O] = make(s, call, 3, vs, GANFW_MEM_WORKSPACE)) ||
                         !(t[YV] = view(s, call, y, 3, vs)) || !(t[XV] = view(s, call, x, 3, vs))))
    st = GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_bmm(ctx, t[O], v, 0, attn, 1, 0);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t[YV], t[O], call->param[2]);
  if (st == GANFW_OK) st = h->tensor_add(ctx, t[YV], t[YV], t[XV]);
  drop_all(s, t, NT);
  if (st == GANFW_OK && saved) {
    saved[0] = q, saved[1] = k, saved[2] = v, saved[3] = attn;
    return GANFW_OK;
  }
  ganfw_tensor *own[4] = {q, k, v, attn};
  drop_all(s, own, 4);
  return st;
}

/* grad (+)= g, through g's own tensor when accumulating (grad and g of one shape). */
static ganfw_status write_grad(const sagan *s, const ganfw_layer_call *call, ganfw_tensor *grad,
                               ganfw_tensor *g) {
  const ganfw_host *h = s->host;
  return call->accumulate ? h->foreach_axpy(call->ctx, &grad, 1.0f, &g, 1)
                          : h->foreach_copy(call->ctx, &grad, &g, 1);
}

/* dgamma = sum(dy * o), o = v attn^T recomputed. */
static ganfw_status grad_gamma(const sagan *s, const ganfw_layer_call *call, const sagan_dims *d,
                               const ganfw_tensor *dyv, ganfw_tensor *const *saved) {
  const ganfw_host *h = s->host;
  const int64_t vs[3] = {d->n, d->c, d->p}, one3[3] = {1, 1, 1};
  ganfw_tensor *o = make(s, call, 3, vs, GANFW_MEM_WORKSPACE);
  ganfw_tensor *sum = o ? make(s, call, 3, one3, GANFW_MEM_WORKSPACE) : NULL;
  ganfw_tensor *g = sum ? view(s, call, call->grad[2], 3, one3) : NULL;
  ganfw_status st = g ? h->tensor_bmm(call->ctx, o, saved[2], 0, saved[3], 1, 0) : GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_mul(call->ctx, o, o, dyv);
  if (st == GANFW_OK) st = h->tensor_sum(call->ctx, sum, o, NULL, 0);
  if (st == GANFW_OK) st = write_grad(s, call, g, sum);
  ganfw_tensor *ts[3] = {g, sum, o};
  drop_all(s, ts, 3);
  return st;
}

/* dqkv [N,Ct,P] = [dq; dk; dv], the gradient of the projections. */
static ganfw_status grad_projections(const sagan *s, const ganfw_layer_call *call,
                                     const sagan_dims *d, const ganfw_tensor *dyv,
                                     ganfw_tensor *const *saved, ganfw_tensor **dqkv) {
  const ganfw_host *h = s->host;
  ganfw_ctx *ctx = call->ctx;
  const ganfw_tensor *q = saved[0], *k = saved[1], *v = saved[2], *attn = saved[3];
  const ganfw_tensor *gamma = call->param[2];
  const int64_t as[3] = {d->n, d->p, d->p}, qs[3] = {d->n, d->cq, d->p};
  const int64_t vs[3] = {d->n, d->c, d->p}, cs[3] = {d->n, d->ct, d->p};
  enum { DE, DQ, DK, DV, NT };
  ganfw_tensor *t[NT] = {0};
  *dqkv = NULL;
  /* dE = softmax_backward(attn, gamma * dy^T v) */
  ganfw_status st = (t[DE] = make(s, call, 3, as, GANFW_MEM_WORKSPACE)) ? GANFW_OK : GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_bmm(ctx, t[DE], dyv, 1, v, 0, 0);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t[DE], t[DE], gamma);
  if (st == GANFW_OK) st = h->tensor_softmax_backward(ctx, t[DE], attn, t[DE], 2, 0);
  /* dq = k dE^T, dk = q dE */
  if (st == GANFW_OK && (!(t[DQ] = make(s, call, 3, qs, GANFW_MEM_WORKSPACE)) ||
                         !(t[DK] = make(s, call, 3, qs, GANFW_MEM_WORKSPACE))))
    st = GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_bmm(ctx, t[DQ], k, 0, t[DE], 1, 0);
  if (st == GANFW_OK) st = h->tensor_bmm(ctx, t[DK], q, 0, t[DE], 0, 0);
  drop_all(s, &t[DE], 1), t[DE] = NULL;
  /* dv = gamma * dy attn */
  if (st == GANFW_OK && !(t[DV] = make(s, call, 3, vs, GANFW_MEM_WORKSPACE))) st = GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_bmm(ctx, t[DV], dyv, 0, attn, 0, 0);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t[DV], t[DV], gamma);
  if (st == GANFW_OK && !(*dqkv = make(s, call, 3, cs, GANFW_MEM_WORKSPACE))) st = GANFW_ERR_OOM;
  const ganfw_tensor *parts[3] = {t[DQ], t[DK], t[DV]};
  if (st == GANFW_OK) st = h->tensor_cat(ctx, *dqkv, parts, 3, 1);
  drop_all(s, t, NT);
  if (st != GANFW_OK) {
    h->tensor_destroy(*dqkv);
    *dqkv = NULL;
  }
  return st;
}

static ganfw_status sagan_backward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                   const ganfw_tensor *y, ganfw_tensor *const *saved,
                                   const ganfw_tensor *dy, ganfw_tensor *dx) {
  const sagan *s = state;
  const ganfw_host *h = s->host;
  ganfw_ctx *ctx = call->ctx;
  (void)y;
  const sagan_dims d = dims_of(s, x->shape);
  const int64_t vs[3] = {d.n, d.c, d.p}, cnp[3] = {d.ct, d.n, d.p};
  const int64_t flat[3] = {1, d.ct, d.n * d.p}, wv_shape[3] = {1, d.ct, d.c};
  const int64_t xflat[3] = {1, d.c, d.n * d.p}, xcnp[3] = {d.c, d.n, d.p};
  enum { DYV, DQKV, DT, DTF, XTB, XT, GW, DB, WV, DXT, DXT3, DXV, NT };
  ganfw_tensor *t[NT] = {0};
  ganfw_status st = (t[DYV] = view(s, call, dy, 3, vs)) ? GANFW_OK : GANFW_ERR_OOM;
  if (st == GANFW_OK && call->param_grads) st = grad_gamma(s, call, &d, t[DYV], saved);
  if (st == GANFW_OK) st = grad_projections(s, call, &d, t[DYV], saved, &t[DQKV]);
  /* dbias: the sum over the batch and the pixels */
  const int32_t np_dims[2] = {0, 2};
  if (st == GANFW_OK && call->param_grads) {
    st = (t[DB] = make(s, call, 1, &d.ct, GANFW_MEM_WORKSPACE)) ? GANFW_OK : GANFW_ERR_OOM;
    if (st == GANFW_OK) st = h->tensor_sum(ctx, t[DB], t[DQKV], np_dims, 2);
    if (st == GANFW_OK) st = write_grad(s, call, call->grad[1], t[DB]);
    drop_all(s, &t[DB], 1), t[DB] = NULL;
  }
  /* [N,Ct,P] -> [1,Ct,N*P], as the projections were computed */
  if (st == GANFW_OK && !(t[DT] = make(s, call, 3, cnp, GANFW_MEM_WORKSPACE))) st = GANFW_ERR_OOM;
  if (st == GANFW_OK) st = h->tensor_permute(ctx, t[DT], t[DQKV], swap01);
  drop_all(s, &t[DQKV], 1), t[DQKV] = NULL;
  if (st == GANFW_OK && !(t[DTF] = view(s, call, t[DT], 3, flat))) st = GANFW_ERR_OOM;
  /* dW (+)= dqkv xt^T, one matmul over every pixel of the batch */
  if (st == GANFW_OK && call->param_grads) {
    st = channels_first(s, call, &d, x, &t[XTB], &t[XT]);
    if (st == GANFW_OK && !(t[GW] = view(s, call, call->grad[0], 3, wv_shape))) st = GANFW_ERR_OOM;
    if (st == GANFW_OK) st = h->tensor_bmm(ctx, t[GW], t[DTF], 0, t[XT], 1, call->accumulate);
    drop_all(s, &t[XTB], 3), t[XTB] = t[XT] = t[GW] = NULL;
  }
  /* dx = dy + W^T dqkv */
  if (st == GANFW_OK && dx) {
    if (!(t[WV] = view(s, call, call->param[0], 3, wv_shape)) ||
        !(t[DXT] = make(s, call, 3, xflat, GANFW_MEM_WORKSPACE)) ||
        !(t[DXV] = view(s, call, dx, 3, vs)))
      st = GANFW_ERR_OOM;
    if (st == GANFW_OK) st = h->tensor_bmm(ctx, t[DXT], t[WV], 1, t[DTF], 0, 0);
    if (st == GANFW_OK && !(t[DXT3] = view(s, call, t[DXT], 3, xcnp))) st = GANFW_ERR_OOM;
    if (st == GANFW_OK) st = h->tensor_permute(ctx, t[DXV], t[DXT3], swap01);
    if (st == GANFW_OK) st = h->tensor_add(ctx, t[DXV], t[DXV], t[DYV]);
  }
  drop_all(s, t, NT);
  return st;
}

static void sagan_destroy(void *state) {
  free(state);
}

static const ganfw_layer_def sagan_layer = {
    .struct_size = sizeof(ganfw_layer_def),
    .keep = GANFW_KEEP_INPUT,
    .type = SAGAN_NAME,
    .infer = sagan_infer,
    .saved_bytes = sagan_saved_bytes,
    .workspace_bytes = sagan_workspace_bytes,
    .init = sagan_init,
    .forward = sagan_forward,
    .backward = sagan_backward,
    .destroy = sagan_destroy,
};

/* --- the plugin ------------------------------------------------------------------------------ */

static const ganfw_layer_def *sagan_def(void) {
  return &sagan_layer;
}

static ganfw_status sagan_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                 void **state) {
  *state = NULL;
  if (!GANFW_HOST_HAS(host, tensor_scatter_add))
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       SAGAN_NAME ": this core's host table (ABI %u.%u) has no tensor_bmm, "
                                  "tensor_softmax and tensor_permute; use a ganfw core of ABI 1.8 "
                                  "or later",
                       (unsigned)host->abi_major, (unsigned)host->abi_minor);
  sagan *s = calloc(1, sizeof *s);
  if (!s) return host->error(ctx, GANFW_ERR_OOM, SAGAN_NAME ": out of host memory");
  s->host = host;
  ganfw_status st = host->cfg_int(cfg, "reduction", SAGAN_REDUCTION, &s->reduction);
  if (st == GANFW_OK && (s->reduction < 1 || s->reduction > SAGAN_MAX_REDUCTION))
    st = host->error(ctx, GANFW_ERR_CONFIG,
                     SAGAN_NAME ": reduction is %lld; the query and key get C / reduction "
                                "channels, so it must be a whole number from 1 to %d (the paper "
                                "uses 8)",
                     (long long)s->reduction, SAGAN_MAX_REDUCTION);
  if (st != GANFW_OK) {
    free(s);
    return st;
  }
  *state = s;
  return GANFW_OK;
}

static const ganfw_layer_plugin_vt sagan_vt = {
    .struct_size = sizeof(ganfw_layer_plugin_vt),
    .kind = GANFW_VT_TAG_LAYER,
    .def = sagan_def,
    .create = sagan_create,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_LAYER,
      .name = SAGAN_NAME,
      .version = "1.0.0",
      .description = "SAGAN self-attention (Zhang et al., 2019) for model.insert",
      .vtable = &sagan_vt,
  };
  return &desc;
}
