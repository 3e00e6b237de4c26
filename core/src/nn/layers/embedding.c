/* embedding layer (PyTorch's nn.Embedding, for class labels): ids x [N,1] or [N,1,1,1],
 * floats holding whole numbers in [0, num), -> y [N,D] = weight[ids], weight [num,D] drawn
 * from N(0, 1) as PyTorch does. The ids are checked on the host (copied back in chunks of
 * ID_CHUNK) and handed to the backend as int32 in a workspace of 4 bytes per sample; an id
 * that is not a whole number in [0, num) is an error naming the layer and the sample. The
 * backward scatter-adds dy into the weight gradient in sample order (deterministic). The ids
 * get no gradient: asked for one, the layer returns zeros of their shape (the derivative of
 * a lookup by a discrete index), so that a net whose input is labels can still be asked for
 * an input gradient. Keeps x (a reference) for backward. Outputs are stored in the compute
 * dtype (16-bit ones converted in row chunks); the weight and its gradient stay f32.
 * Args: ganfw_embedding_args (layer.h), num and D. */
#include <math.h>
#include <stdio.h>

#include "base/error.h"
#include "nn/layer.h"

/* Ids checked and converted per copy back to the host. */
#define ID_CHUNK 256

static ganfw_status emb_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                              int64_t *out, int32_t *out_ndim) {
  int ok = (in_ndim == 2 || in_ndim == 4) && in[1] == 1;
  for (int32_t d = 2; d < in_ndim && ok; d++) ok = in[d] == 1;
  if (!ok) {
    char dims[96] = "";
    for (int32_t d = 1, n = 0; d < in_ndim && n < (int)sizeof dims - 24; d++)
      n += snprintf(dims + n, sizeof dims - (size_t)n, ",%lld", (long long)in[d]);
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects one class id per sample, [N,1] or [N,1,1,1], gets [N%s]; "
                             "give the labels as a [N,1,1,1] input",
                             dims);
  }
  out[0] = in[0], out[1] = l->args.embedding.dim;
  *out_ndim = 2;
  return GANFW_OK;
}

static ganfw_status emb_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  (void)in, (void)in_ndim;
  const ganfw_embedding_args *a = &l->args.embedding;
  const int64_t w[2] = {a->num, a->dim};
  ganfw_status st = ganfw_layer_add_param(l, 0, "weight", 2, w);
  if (st == GANFW_OK)
    st = ganfw_ctx_rng_normal(l->ctx, l->param[0]->numel, l->param[0]->data, 0.0f, 1.0f);
  return st == GANFW_OK ? st
                        : ganfw_error_wrap(st, "layer %s: initialising the weight", l->qualified);
}

/* The ids of rows [n0, n0 + rows) (f32 device values) checked and stored as int32 into ids
 * (device memory). */
static ganfw_status emb_ids(ganfw_layer *l, const ganfw_exec *ex, const float *f, int64_t n0,
                            int64_t rows, int32_t *ids) {
  ganfw_backend *be = ex->be;
  const int64_t num = l->args.embedding.num;
  float v[ID_CHUNK];
  int32_t id[ID_CHUNK];
  for (int64_t i = 0; i < rows; i += ID_CHUNK) {
    const int64_t k = rows - i < ID_CHUNK ? rows - i : ID_CHUNK;
    ganfw_status st = be->vt->copy_d2h(be, v, f + i, (size_t)k * sizeof *v);
    if (st != GANFW_OK)
      return ganfw_layer_error(l, st, "reading the ids: %s", ganfw_error_message());
    for (int64_t j = 0; j < k; j++) {
      if (!(v[j] >= 0.0f && (double)v[j] < (double)num && v[j] == floorf(v[j])))
        return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                                 "sample %lld has class id %g, not a whole number in [0, %lld); "
                                 "the labels must index the layer's %lld embeddings",
                                 (long long)(n0 + i + j), (double)v[j], (long long)num,
                                 (long long)num);
      id[j] = (int32_t)v[j];
    }
    st = be->vt->copy_h2d(be, ids + i, id, (size_t)k * sizeof *id);
    if (st != GANFW_OK)
      return ganfw_layer_error(l, st, "uploading the ids: %s", ganfw_error_message());
  }
  return GANFW_OK;
}

/* f: x, y */
static ganfw_status emb_forward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                     int64_t rows, float *const *f) {
  (void)arg;
  ganfw_status st;
  ganfw_tensor *ids = ganfw_layer_workspace(l, ex, (size_t)rows * sizeof(int32_t), &st);
  if (st != GANFW_OK) return st;
  st = emb_ids(l, ex, f[0], n0, rows, ids->data);
  if (st == GANFW_OK) {
    ganfw_op op = {.kind = GANFW_OP_EMBEDDING_FORWARD,
                   .shape.d = {rows, l->args.embedding.dim},
                   .in = {ids->data, l->param[0]->data},
                   .out = {f[1]}};
    st = ganfw_layer_op(l, ex, &op);
  }
  ganfw_tensor_destroy(ids);
  return st;
}

/* f: x, dy; arg: the layer's accumulate flag */
static ganfw_status emb_backward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                      int64_t rows, float *const *f) {
  const int32_t accumulate = *(const int32_t *)arg || n0 > 0;
  ganfw_status st;
  ganfw_tensor *ids = ganfw_layer_workspace(l, ex, (size_t)rows * sizeof(int32_t), &st);
  if (st != GANFW_OK) return st;
  st = emb_ids(l, ex, f[0], n0, rows, ids->data);
  if (st == GANFW_OK) {
    const ganfw_embedding_args *a = &l->args.embedding;
    ganfw_op op = {.kind = GANFW_OP_EMBEDDING_BACKWARD,
                   .flags = accumulate ? GANFW_OP_ACCUMULATE : 0,
                   .shape.d = {rows, a->num, a->dim},
                   .in = {ids->data, f[1]},
                   .grad = {l->grad[0]->data}};
    st = ganfw_layer_op(l, ex, &op);
  }
  ganfw_tensor_destroy(ids);
  return st;
}

static ganfw_status emb_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                ganfw_tensor **y, ganfw_saved *saved) {
  const int64_t out[2] = {x->shape[0], l->args.embedding.dim};
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, 2, out, GANFW_MEM_ACTIVATION);
  if (!t) return ganfw_error_code();
  ganfw_tensor *io[2] = {x, t};
  ganfw_status st = ganfw_layer_rows_run(l, ex, io, 1, 2, emb_forward_rows, NULL);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return st;
  }
  if (saved) saved->t[0] = ganfw_tensor_retain(x);
  *y = t;
  return GANFW_OK;
}

/* t = 0 in any dtype (0.0 is all zero bits in f32, f16 and bf16). */
static ganfw_status emb_zero(const ganfw_exec *ex, ganfw_tensor *t) {
  enum { ZEROS = 4096 };
  static const unsigned char zeros[ZEROS];
  for (int64_t off = 0; off < t->nbytes; off += ZEROS) {
    const int64_t n = t->nbytes - off < ZEROS ? t->nbytes - off : ZEROS;
    ganfw_status st = ex->be->vt->copy_h2d(ex->be, (char *)t->data + off, zeros, (size_t)n);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

static ganfw_status emb_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                 ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                 int32_t accumulate) {
  ganfw_tensor *x = saved->t[0];
  ganfw_tensor *g = NULL;
  ganfw_status st = GANFW_OK;
  if (dx) {
    g = ganfw_layer_tensor(l, ex, ex->dtype, x->ndim, x->shape, GANFW_MEM_ACTIVATION);
    if (!g) return ganfw_error_code();
    if ((st = emb_zero(ex, g)) != GANFW_OK)
      st = ganfw_layer_error(l, st, "zeroing the ids' gradient: %s", ganfw_error_message());
  }
  if (st == GANFW_OK && param_grads) {
    ganfw_tensor *io[2] = {x, dy};
    st = ganfw_layer_rows_run(l, ex, io, 2, 2, emb_backward_rows, &accumulate);
  }
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  if (dx) *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_embedding = {
    .type = "embedding",
    .infer = emb_infer,
    .init = emb_init,
    .forward = emb_forward,
    .backward = emb_backward,
};
