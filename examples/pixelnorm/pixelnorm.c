/* Pixel normalisation as a ganfw plugin layer (see pixelnorm.h). With r = (mean_c x^2 +
 * eps)^(-1/2) per pixel ([N,1,H,W]) and xhat = x * r:
 *   forward   y = xhat (* weight[c] + bias[c] with affine)
 *   backward  g = dy (* weight[c]);  dx = r * g - x * r^3 * mean_c(g * x)
 *             dweight[c] = sum over n,h,w of dy * xhat;  dbias[c] = sum of dy
 * Forward keeps x (a reference: GANFW_KEEP_INPUT) and r (its own tensor, saved[0]). Every
 * tensor it creates is counted in saved_bytes and workspace_bytes, which the core checks
 * after each call. Bytes, for an input of P = N*H*W pixels and C channels (f32):
 *   saved             4P                       (r)
 *   forward workspace 4PC                      (x^2 before its mean)
 *   backward          4PC + 4PC [affine] + 4P
 *                     (g * x, g = dy * weight, then the per-pixel mean; before them the
 *                     parameters' gradients hold 4PC + 4C at most, which is less)
 * A backward without dx (the net's first layer) or without parameter gradients holds less.
 *   backward2         4PC + (4PC + 4C) [affine] + 20P   (a temporary, g, five per-pixel
 *                     buffers, and dweight's sums) */
#include "pixelnorm.h"

#include <stdlib.h>

typedef struct pixelnorm {
  const ganfw_host *host;
  int64_t channels;
  float eps;
  int32_t affine;
} pixelnorm;

/* P (pixels: every dim but the channels) and C of an input shape. */
static void dims_of(const int64_t *in, int32_t ndim, int64_t *P, int64_t *C) {
  *C = in[1];
  *P = in[0];
  for (int32_t d = 2; d < ndim; d++) *P *= in[d];
}

static ganfw_status pn_infer(void *state, const int64_t *in, int32_t ndim, int64_t *out,
                             int32_t *out_ndim) {
  const pixelnorm *pn = state;
  if (ndim != 2 && ndim != 4)
    return pn->host->error(NULL, GANFW_ERR_INVALID_ARG,
                           "pixelnorm takes [N,C] or [N,C,H,W], not a %d-dim input", (int)ndim);
  if (in[1] != pn->channels)
    return pn->host->error(NULL, GANFW_ERR_INVALID_ARG,
                           "pixelnorm was made for %lld channels, its input has %lld",
                           (long long)pn->channels, (long long)in[1]);
  for (int32_t d = 0; d < ndim; d++) out[d] = in[d];
  *out_ndim = ndim;
  return GANFW_OK;
}

static int64_t pn_saved_bytes(void *state, const int64_t *in, int32_t ndim) {
  (void)state;
  int64_t P, C;
  dims_of(in, ndim, &P, &C);
  return 4 * P;
}

static int64_t pn_workspace_bytes(void *state, const int64_t *in, int32_t ndim, int32_t backward) {
  const pixelnorm *pn = state;
  int64_t P, C;
  dims_of(in, ndim, &P, &C);
  if (!backward) return 4 * P * C;
  if (backward == 2) /* backward2: t, g [affine], five per-pixel buffers, dweight's sums */
    return 4 * P * C + (pn->affine ? 4 * P * C + 4 * C : 0) + 5 * 4 * P;
  return 4 * P * C + (pn->affine ? 4 * P * C : 0) + 4 * P;
}

static ganfw_status pn_init(void *state, ganfw_ctx *ctx, ganfw_layer_init *li, const int64_t *in,
                            int32_t ndim) {
  const pixelnorm *pn = state;
  (void)in, (void)ndim;
  if (!pn->affine) return GANFW_OK;
  const ganfw_host *h = pn->host;
  ganfw_tensor *w = NULL, *b = NULL;
  ganfw_status st = h->layer_add_param(li, "weight", 1, &pn->channels, &w);
  if (st == GANFW_OK) st = h->layer_add_param(li, "bias", 1, &pn->channels, &b);
  if (st == GANFW_OK) st = h->foreach_fill(ctx, &w, 1, 1.0f); /* the bias starts at 0 */
  return st;
}

/* The shape of x with the channels 1: where r and the per-pixel mean live. */
static void pixel_shape(const ganfw_tensor *x, int64_t *shape) {
  for (int32_t d = 0; d < x->ndim; d++) shape[d] = d == 1 ? 1 : x->shape[d];
}

static ganfw_tensor *make(const pixelnorm *pn, const ganfw_layer_call *call, int32_t ndim,
                          const int64_t *shape, int32_t category) {
  return pn->host->tensor_create(call->ctx, GANFW_DTYPE_F32, ndim, shape, category, call->name);
}

static ganfw_status pn_forward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                               ganfw_tensor *y, ganfw_tensor **saved) {
  const pixelnorm *pn = state;
  const ganfw_host *h = pn->host;
  ganfw_ctx *ctx = call->ctx;
  int64_t pshape[4];
  pixel_shape(x, pshape);
  ganfw_tensor *sq = make(pn, call, x->ndim, x->shape, GANFW_MEM_WORKSPACE);
  ganfw_tensor *r = sq ? make(pn, call, x->ndim, pshape, GANFW_MEM_ACTIVATION) : NULL;
  ganfw_status st = r ? GANFW_OK : GANFW_ERR_OOM; /* the core recorded the message */
  const int32_t channel_dim = 1;
  if (st == GANFW_OK) st = h->tensor_mul(ctx, sq, x, x);
  if (st == GANFW_OK) st = h->tensor_mean(ctx, r, sq, &channel_dim, 1);
  h->tensor_destroy(sq);
  if (st == GANFW_OK) st = h->tensor_add_scalar(ctx, r, r, pn->eps);
  if (st == GANFW_OK) st = h->tensor_rsqrt(ctx, r, r);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, y, x, r);
  if (st == GANFW_OK && pn->affine)
    st = h->tensor_channel_affine(ctx, y, y, call->param[0], call->param[1]);
  if (st == GANFW_OK && saved)
    saved[0] = r;
  else
    h->tensor_destroy(r);
  return st;
}

/* grad (+)= the sum of t over every dim but the channels, through a [C] tensor. */
static ganfw_status channel_grad(const pixelnorm *pn, const ganfw_layer_call *call,
                                 const ganfw_tensor *t, ganfw_tensor *grad) {
  const ganfw_host *h = pn->host;
  const int32_t dims[3] = {0, 2, 3};
  ganfw_tensor *s = make(pn, call, 1, &pn->channels, GANFW_MEM_WORKSPACE);
  if (!s) return GANFW_ERR_OOM;
  ganfw_status st = h->tensor_sum(call->ctx, s, t, dims, t->ndim == 4 ? 3 : 1);
  if (st == GANFW_OK)
    st = call->accumulate ? h->foreach_axpy(call->ctx, &grad, 1.0f, &s, 1)
                          : h->foreach_copy(call->ctx, &grad, &s, 1);
  h->tensor_destroy(s);
  return st;
}

static ganfw_status pn_backward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                const ganfw_tensor *y, ganfw_tensor *const *saved,
                                const ganfw_tensor *dy, ganfw_tensor *dx) {
  const pixelnorm *pn = state;
  const ganfw_host *h = pn->host;
  ganfw_ctx *ctx = call->ctx;
  const ganfw_tensor *r = saved[0];
  (void)y;
  ganfw_tensor *t = make(pn, call, x->ndim, x->shape, GANFW_MEM_WORKSPACE);
  ganfw_status st = t ? GANFW_OK : GANFW_ERR_OOM;
  /* the parameters' gradients: dweight from dy * xhat, dbias from dy */
  if (st == GANFW_OK && pn->affine && call->param_grads) {
    st = h->tensor_mul(ctx, t, x, r);
    if (st == GANFW_OK) st = h->tensor_mul(ctx, t, t, dy);
    if (st == GANFW_OK) st = channel_grad(pn, call, t, call->grad[0]);
    if (st == GANFW_OK) st = channel_grad(pn, call, dy, call->grad[1]);
  }
  if (st != GANFW_OK || !dx) {
    h->tensor_destroy(t);
    return st;
  }
  /* g = dy * weight (dy itself without affine); dx = r * g - x * r^3 * mean_c(g * x) */
  ganfw_tensor *g = pn->affine ? make(pn, call, x->ndim, x->shape, GANFW_MEM_WORKSPACE) : NULL;
  const ganfw_tensor *gv = pn->affine ? g : dy;
  if (pn->affine && !g) st = GANFW_ERR_OOM;
  if (st == GANFW_OK && g) st = h->tensor_channel_affine(ctx, g, dy, call->param[0], NULL);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, gv, x);
  int64_t pshape[4];
  pixel_shape(x, pshape);
  ganfw_tensor *m = st == GANFW_OK ? make(pn, call, x->ndim, pshape, GANFW_MEM_WORKSPACE) : NULL;
  if (st == GANFW_OK && !m) st = GANFW_ERR_OOM;
  const int32_t channel_dim = 1;
  if (st == GANFW_OK) st = h->tensor_mean(ctx, m, t, &channel_dim, 1);
  for (int k = 0; k < 3 && st == GANFW_OK; k++) st = h->tensor_mul(ctx, m, m, r); /* * r^3 */
  if (st == GANFW_OK) st = h->tensor_mul(ctx, dx, gv, r);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, x, m);
  if (st == GANFW_OK) st = h->tensor_sub(ctx, dx, dx, t);
  h->tensor_destroy(m);
  h->tensor_destroy(g);
  h->tensor_destroy(t);
  return st;
}

/* The backward of backward, for penalties on D's input gradient. Per pixel, over the C
 * channels, with g = dy (* weight), u the penalty's gradient of dx, and the means
 * A = mean_c(u g), B = mean_c(x g), D = mean_c(x u):
 *   J u      = r u - r^3 x D                    (dx = J g with J symmetric: the forward's JVP)
 *   du       = J u (* weight)
 *   dweight += sum over n,h,w of (J u) dy
 *   ax       = (3 r^5 B D - r^3 A) x - r^3 (D g + B u)
 * (d<u, dx>/dx with g fixed, from dr/dx = -r^3 x / C). */
static ganfw_status pn_backward2(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                 const ganfw_tensor *y, ganfw_tensor *const *saved,
                                 const ganfw_tensor *dy, const ganfw_tensor *u, ganfw_tensor *du,
                                 ganfw_tensor *ax) {
  const pixelnorm *pn = state;
  const ganfw_host *h = pn->host;
  ganfw_ctx *ctx = call->ctx;
  const ganfw_tensor *r = saved[0];
  (void)y;
  int64_t pshape[4];
  pixel_shape(x, pshape);
  ganfw_tensor *t = make(pn, call, x->ndim, x->shape, GANFW_MEM_WORKSPACE);
  ganfw_tensor *g = pn->affine ? make(pn, call, x->ndim, x->shape, GANFW_MEM_WORKSPACE) : NULL;
  ganfw_tensor *m[5] = {NULL}; /* D, A, B, K, r^3 */
  ganfw_status st = t && (g || !pn->affine) ? GANFW_OK : GANFW_ERR_OOM;
  for (int k = 0; k < 5 && st == GANFW_OK; k++)
    if (!(m[k] = make(pn, call, x->ndim, pshape, GANFW_MEM_WORKSPACE))) st = GANFW_ERR_OOM;
  ganfw_tensor *D = m[0], *A = m[1], *B = m[2], *K = m[3], *r3 = m[4];
  const ganfw_tensor *gv = pn->affine ? g : dy;
  const int32_t channel_dim = 1;
  if (st == GANFW_OK) st = h->tensor_mul(ctx, r3, r, r);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, r3, r3, r);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, x, u);
  if (st == GANFW_OK) st = h->tensor_mean(ctx, D, t, &channel_dim, 1);
  /* du = J u = r u - r^3 x D */
  if (st == GANFW_OK) st = h->tensor_mul(ctx, du, u, r);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, x, D);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, t, r3);
  if (st == GANFW_OK) st = h->tensor_sub(ctx, du, du, t);
  if (st == GANFW_OK && pn->affine && call->param_grads) {
    st = h->tensor_mul(ctx, t, du, dy);
    if (st == GANFW_OK) st = channel_grad(pn, call, t, call->grad[0]);
  }
  if (st == GANFW_OK && pn->affine)
    st = h->tensor_channel_affine(ctx, du, du, call->param[0], NULL);
  /* ax */
  if (st == GANFW_OK && g) st = h->tensor_channel_affine(ctx, g, dy, call->param[0], NULL);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, u, gv);
  if (st == GANFW_OK) st = h->tensor_mean(ctx, A, t, &channel_dim, 1);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, x, gv);
  if (st == GANFW_OK) st = h->tensor_mean(ctx, B, t, &channel_dim, 1);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, K, B, D); /* K = (3 r^2 B D - A) r^3 */
  if (st == GANFW_OK) st = h->tensor_mul(ctx, K, K, r);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, K, K, r);
  if (st == GANFW_OK) st = h->tensor_mul_scalar(ctx, K, K, 3.0f);
  if (st == GANFW_OK) st = h->tensor_sub(ctx, K, K, A);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, K, K, r3);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, ax, x, K);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, gv, D);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, t, r3);
  if (st == GANFW_OK) st = h->tensor_sub(ctx, ax, ax, t);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, u, B);
  if (st == GANFW_OK) st = h->tensor_mul(ctx, t, t, r3);
  if (st == GANFW_OK) st = h->tensor_sub(ctx, ax, ax, t);
  for (int k = 0; k < 5; k++) h->tensor_destroy(m[k]);
  h->tensor_destroy(g);
  h->tensor_destroy(t);
  return st;
}

static void pn_destroy(void *state) {
  free(state);
}

static const ganfw_layer_def pixelnorm_layer = {
    .struct_size = sizeof(ganfw_layer_def),
    .keep = GANFW_KEEP_INPUT,
    .type = "pixelnorm",
    .infer = pn_infer,
    .saved_bytes = pn_saved_bytes,
    .workspace_bytes = pn_workspace_bytes,
    .init = pn_init,
    .forward = pn_forward,
    .backward = pn_backward,
    .destroy = pn_destroy,
    .backward2 = pn_backward2,
};

const ganfw_layer_def *pixelnorm_def(void) {
  return &pixelnorm_layer;
}

void *pixelnorm_state_create(const ganfw_host *host, ganfw_ctx *ctx, int64_t channels, float eps,
                             int32_t affine) {
  pixelnorm *pn = calloc(1, sizeof *pn);
  if (!pn) {
    host->error(ctx, GANFW_ERR_OOM, "pixelnorm: out of host memory");
    return NULL;
  }
  pn->host = host;
  pn->channels = channels;
  pn->eps = eps;
  pn->affine = affine != 0;
  return pn;
}
