/* dropout layer on any shape: in train mode zeroes each value with probability p (Philox
 * from the run's seed and offset) and scales the rest by 1/(1-p); keeps the u8 mask for
 * backward. Identity in eval mode. Args: ganfw_dropout_args (layer.h). */
#include "dist/dist.h"
#include "nn/layer.h"
#include "runtime/ctx.h"

static ganfw_status dropout_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
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

static ganfw_status dropout_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                    ganfw_tensor **y, ganfw_saved *saved) {
  const float p = l->args.dropout.p;
  if (!ex->train || p == 0.0f) {
    *y = ganfw_tensor_retain(x);
    return GANFW_OK;
  }
  ganfw_layer_scratch sc = {0};
  const float *xf = ganfw_layer_f32_in(l, ex, &sc, x);
  ganfw_tensor *t = xf ? in_place_or_new(l, ex, x) : NULL;
  ganfw_tensor *mask =
      t ? ganfw_layer_tensor(l, ex, GANFW_DTYPE_U8, x->ndim, x->shape, GANFW_MEM_ACTIVATION) : NULL;
  float *yf = mask ? ganfw_layer_f32_out(l, ex, &sc, t) : NULL;
  if (!yf) {
    ganfw_status st = ganfw_error_code();
    ganfw_layer_scratch_release(&sc);
    ganfw_tensor_destroy(mask);
    ganfw_tensor_destroy(t);
    return st;
  }
  /* data-parallel: the whole global batch's draw is taken, and this rank uses its rows'
   * part of it (one process's mask for them when a row's values fill whole Philox blocks) */
  const ganfw_dist *d = ex->ctx->dist;
  const int32_t ranks = ganfw_dist_parallel(d) ? d->size : 1, rank = ranks > 1 ? d->rank : 0;
  const uint64_t blocks = (uint64_t)((x->numel + 3) / 4);
  uint64_t offset =
      ganfw_ctx_rng_take(ex->ctx, (int64_t)(4 * blocks) * ranks) + (uint64_t)rank * blocks;
  ganfw_op op = {.kind = GANFW_OP_DROPOUT_FORWARD,
                 .seed = ex->ctx->seed,
                 .offset = offset,
                 .shape.d = {x->numel},
                 .in = {xf},
                 .out = {yf, mask->data},
                 .sc = {p}};
  ganfw_status st = ganfw_layer_op(l, ex, &op);
  if (st == GANFW_OK)
    st = ganfw_layer_store_out(l, ex, &sc);
  else
    ganfw_layer_scratch_release(&sc);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(mask);
    ganfw_tensor_destroy(t);
    return st;
  }
  if (saved) {
    saved->t[0] = mask;
    saved->rng_offset = offset;
  } else {
    ganfw_tensor_destroy(mask);
  }
  *y = t;
  return GANFW_OK;
}

static ganfw_status dropout_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                     ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                     int32_t accumulate) {
  if (!dx) return GANFW_OK;
  if (!saved->t[0]) { /* eval mode or p = 0: identity */
    *dx = ganfw_tensor_retain(dy);
    return GANFW_OK;
  }
  ganfw_layer_scratch sc = {0};
  const float *dyf = ganfw_layer_f32_in(l, ex, &sc, dy);
  ganfw_tensor *g = dyf ? in_place_or_new(l, ex, dy) : NULL;
  float *gf = g ? ganfw_layer_f32_out(l, ex, &sc, g) : NULL;
  if (!gf) {
    ganfw_status st = ganfw_error_code();
    ganfw_layer_scratch_release(&sc);
    ganfw_tensor_destroy(g);
    return st;
  }
  ganfw_op op = {.kind = GANFW_OP_DROPOUT_BACKWARD,
                 .shape.d = {dy->numel},
                 .in = {saved->t[0]->data, dyf},
                 .out = {gf},
                 .sc = {l->args.dropout.p}};
  ganfw_status st = ganfw_layer_op(l, ex, &op);
  if (st == GANFW_OK)
    st = ganfw_layer_store_out(l, ex, &sc);
  else
    ganfw_layer_scratch_release(&sc);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  *dx = g;
  return GANFW_OK;
}

/* Dropout is the diagonal map dx = mask dy / (1-p) with the forward's mask: its
 * linearisation applied to u is the same map, the backward's own op in f32. */
static ganfw_status dropout_backward2(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                      ganfw_tensor *dy, int32_t n, ganfw_tensor *const *u,
                                      ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads) {
  (void)dy, (void)n, (void)ax, (void)param_grads;
  *du = NULL;
  if (!u[0]) return GANFW_OK;
  ganfw_exec f32 = *ex;
  f32.dtype = GANFW_DTYPE_F32;
  return dropout_backward(l, &f32, saved, u[0], du, 0, 0);
}

const ganfw_layer_vt ganfw_layer_dropout = {
    .type = "dropout",
    .infer = dropout_infer,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .backward2 = dropout_backward2,
    .backward2_reads_dy = ganfw_layer_backward2_no_dy,
};
