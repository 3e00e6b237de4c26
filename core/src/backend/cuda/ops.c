/* The CUDA backend's ops that run its own kernels (kernels.h): activations (f32 and 16-bit),
 * pooling, upsampling, group normalisation, embeddings and weight transposes, dropout, losses,
 * the foreach ops, reductions, casts and Philox sampling. Each unpacks its descriptor (op.h),
 * launches on the compute stream and returns the launch's check (LAUNCH_CHECK); reductions
 * that answer a value copy it back into op->result and so wait for the stream. */
#include "backend/cuda/cuda_internal.h"

#define STREAM(be)         (ganfw_cuda_state_of(be)->stream)
#define LAUNCH(be, launch) LAUNCH_CHECK(ganfw_cuda_state_of(be), launch)
#define ACCUMULATE(op)     (((op)->flags & GANFW_OP_ACCUMULATE) != 0)

/* --- activations: mode is GANFW_ACT_*; d: n; sc: alpha ------------------------------------ */

static int act_is_kernel(int32_t kind) {
  return kind == GANFW_ACT_RELU || kind == GANFW_ACT_LEAKY_RELU || kind == GANFW_ACT_TANH ||
         kind == GANFW_ACT_SIGMOID;
}

/* in: x; out: y. In 16 bits x and y take 2 bytes an element; identity is a copy. */
ganfw_status ganfw_cuda_op_act_forward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int32_t kind = op->mode;
  const float alpha = (float)op->sc[0];
  const int64_t n = op->shape.d[0];
  const void *x = op->in[0];
  void *y = op->out[0];
  if (op->dtype == GANFW_DTYPE_F32) {
    if (act_is_kernel(kind))
      return LAUNCH_CHECK(cs, ganfw_cu_act_forward(cs->stream, kind, alpha, n, x, y));
    return y != x ? ganfw_cuda_copy_d2d(be, y, x, (size_t)n * sizeof(float)) : GANFW_OK;
  }
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK && act_is_kernel(kind))
    st = LAUNCH_CHECK(cs, ganfw_cu_act_forward_lp(cs->stream, op->dtype, kind, alpha, n, x, y));
  else if (st == GANFW_OK && y != x && n > 0)
    st = CUDA_CHECK(cs, cudaMemcpyAsync(y, x, (size_t)n * 2, cudaMemcpyDeviceToDevice, cs->stream));
  return ganfw_cuda_lp_end(cs, st);
}

/* in: y, dy; out: dx (from the output y) */
ganfw_status ganfw_cuda_op_act_backward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int32_t kind = op->mode;
  const float alpha = (float)op->sc[0];
  const int64_t n = op->shape.d[0];
  const void *y = op->in[0], *dy = op->in[1];
  void *dx = op->out[0];
  if (op->dtype == GANFW_DTYPE_F32) {
    if (act_is_kernel(kind))
      return LAUNCH_CHECK(cs, ganfw_cu_act_backward(cs->stream, kind, alpha, n, y, dy, dx));
    return dx != dy ? ganfw_cuda_copy_d2d(be, dx, dy, (size_t)n * sizeof(float)) : GANFW_OK;
  }
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK && act_is_kernel(kind))
    st = LAUNCH_CHECK(cs,
                      ganfw_cu_act_backward_lp(cs->stream, op->dtype, kind, alpha, n, y, dy, dx));
  else if (st == GANFW_OK && dx != dy && n > 0)
    st = CUDA_CHECK(cs,
                    cudaMemcpyAsync(dx, dy, (size_t)n * 2, cudaMemcpyDeviceToDevice, cs->stream));
  return ganfw_cuda_lp_end(cs, st);
}

/* --- pooling: shape.pool ------------------------------------------------------------------ */

/* in: x; out: y, argmax */
ganfw_status ganfw_cuda_op_maxpool2d_forward(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_maxpool2d_forward(STREAM(be), &op->shape.pool, op->in[0], op->out[0],
                                               op->out[1]));
}

/* in: dy, argmax; out: dx */
ganfw_status ganfw_cuda_op_maxpool2d_backward(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_maxpool2d_backward(STREAM(be), &op->shape.pool, op->in[0], op->in[1],
                                                op->out[0]));
}

/* in: x; out: y */
ganfw_status ganfw_cuda_op_avgpool2d_forward(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_avgpool2d_forward(STREAM(be), &op->shape.pool, op->in[0], op->out[0]));
}

/* in: dy; out: dx */
ganfw_status ganfw_cuda_op_avgpool2d_backward(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be,
                ganfw_cu_avgpool2d_backward(STREAM(be), &op->shape.pool, op->in[0], op->out[0]));
}

/* --- upsampling, group normalisation, embeddings, transposes ------------------------------- */

/* mode: GANFW_UPSAMPLE_*; d: planes, H, W; in: x; out: y */
ganfw_status ganfw_cuda_op_upsample2d_forward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(be, ganfw_cu_upsample2d_forward(STREAM(be), op->mode, d[0], d[1], d[2], op->in[0],
                                                op->out[0]));
}

/* d: planes, H, W; in: dy; out: dx */
ganfw_status ganfw_cuda_op_upsample2d_backward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(be, ganfw_cu_upsample2d_backward(STREAM(be), op->mode, d[0], d[1], d[2], op->in[0],
                                                 op->out[0]));
}

/* d: N, C, HW, G; in: x, gamma, beta; out: y, save_mean, save_invstd; sc: eps */
ganfw_status ganfw_cuda_op_groupnorm_forward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(be, ganfw_cu_groupnorm_forward(STREAM(be), d[0], d[1], d[2], d[3], op->in[0],
                                               op->in[1], op->in[2], (float)op->sc[0], op->out[0],
                                               op->out[1], op->out[2]));
}

/* d: N, C, HW, G; in: x, dy, gamma, save_mean, save_invstd; out: dx; grad: dgamma, dbeta */
ganfw_status ganfw_cuda_op_groupnorm_backward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(be,
                ganfw_cu_groupnorm_backward(STREAM(be), d[0], d[1], d[2], d[3], op->in[0],
                                            op->in[1], op->in[2], op->in[3], op->in[4], op->out[0],
                                            op->grad[0], op->grad[1], ACCUMULATE(op)));
}

/* d: N, D; in: ids, w; out: y */
ganfw_status ganfw_cuda_op_embedding_forward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(
      be, ganfw_cu_embedding_forward(STREAM(be), d[0], d[1], op->in[0], op->in[1], op->out[0]));
}

/* d: N, num, D; in: ids, dy; grad: dw */
ganfw_status ganfw_cuda_op_embedding_backward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(be, ganfw_cu_embedding_backward(STREAM(be), d[0], d[1], d[2], op->in[0], op->in[1],
                                                op->grad[0], ACCUMULATE(op)));
}

/* d: A, B, C; in: x; out: y */
ganfw_status ganfw_cuda_op_transpose01(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(be, ganfw_cu_transpose01(STREAM(be), d[0], d[1], d[2], op->in[0], op->out[0]));
}

/* --- dropout: d: n; sc: p ------------------------------------------------------------------ */

/* in: x; out: y, mask; seed, offset */
ganfw_status ganfw_cuda_op_dropout_forward(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_dropout_forward(STREAM(be), op->shape.d[0], (float)op->sc[0], op->seed,
                                             op->offset, op->in[0], op->out[0], op->out[1]));
}

/* in: mask, dy; out: dx */
ganfw_status ganfw_cuda_op_dropout_backward(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_dropout_backward(STREAM(be), op->shape.d[0], (float)op->sc[0],
                                              op->in[0], op->in[1], op->out[0]));
}

/* --- losses ------------------------------------------------------------------------------ */

/* d: n; in: logits, targets; out: loss */
ganfw_status ganfw_cuda_op_bce_logits_forward(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_bce_logits_forward(STREAM(be), op->shape.d[0], op->in[0], op->in[1],
                                                op->out[0]));
}

/* d: n; in: logits, targets; out: dx; sc: dloss */
ganfw_status ganfw_cuda_op_bce_logits_backward(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_bce_logits_backward(STREAM(be), op->shape.d[0], op->in[0], op->in[1],
                                                 (float)op->sc[0], op->out[0]));
}

/* d: N, classes; in: logits, labels; out: loss; sc: smoothing */
ganfw_status ganfw_cuda_op_softmax_xent_forward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(be, ganfw_cu_softmax_xent_forward(STREAM(be), d[0], d[1], op->in[0], op->in[1],
                                                  op->sc[0], op->out[0]));
}

/* d: N, classes; in: logits, labels; out: dx; sc: smoothing, dloss */
ganfw_status ganfw_cuda_op_softmax_xent_backward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(be, ganfw_cu_softmax_xent_backward(STREAM(be), d[0], d[1], op->in[0], op->in[1],
                                                   op->sc[0], (float)op->sc[1], op->out[0]));
}

/* --- foreach: d: n ------------------------------------------------------------------------- */

/* out: x; sc: v */
ganfw_status ganfw_cuda_op_fill(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_fill(STREAM(be), op->shape.d[0], op->out[0], (float)op->sc[0]));
}
/* out: x; sc: a */
ganfw_status ganfw_cuda_op_scale(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_scale(STREAM(be), op->shape.d[0], op->out[0], (float)op->sc[0]));
}
/* out: x; sc: a */
ganfw_status ganfw_cuda_op_add_scalar(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_add_scalar(STREAM(be), op->shape.d[0], op->out[0], (float)op->sc[0]));
}
/* in: a, b; out: out */
ganfw_status ganfw_cuda_op_add(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_add(STREAM(be), op->shape.d[0], op->out[0], op->in[0], op->in[1]));
}
/* in: x; out: y; sc: alpha */
ganfw_status ganfw_cuda_op_axpy(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be,
                ganfw_cu_axpy(STREAM(be), op->shape.d[0], op->out[0], (float)op->sc[0], op->in[0]));
}
/* in: a, b; out: out */
ganfw_status ganfw_cuda_op_mul(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_mul(STREAM(be), op->shape.d[0], op->out[0], op->in[0], op->in[1]));
}
/* in: a, b; out: y; sc: v */
ganfw_status ganfw_cuda_op_addcmul(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_addcmul(STREAM(be), op->shape.d[0], op->out[0], (float)op->sc[0],
                                     op->in[0], op->in[1]));
}
/* in: a, b; out: y; sc: v */
ganfw_status ganfw_cuda_op_addcdiv(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_addcdiv(STREAM(be), op->shape.d[0], op->out[0], (float)op->sc[0],
                                     op->in[0], op->in[1]));
}
/* in: x; out: out */
ganfw_status ganfw_cuda_op_sqrt(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_sqrt(STREAM(be), op->shape.d[0], op->out[0], op->in[0]));
}
/* in: x; out: y; sc: w */
ganfw_status ganfw_cuda_op_lerp(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be,
                ganfw_cu_lerp(STREAM(be), op->shape.d[0], op->out[0], op->in[0], (float)op->sc[0]));
}
/* in: x; out: y */
ganfw_status ganfw_cuda_op_maximum(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_maximum(STREAM(be), op->shape.d[0], op->out[0], op->in[0]));
}

/* --- reductions back to the host (op->result): NaN (sum) or 1 (nonfinite) with the failure
 * when the device failed, so that a caller that only looks at the value still stops -------- */

/* d: n; in: x */
static ganfw_status sum_to_host(ganfw_backend *be, ganfw_op *op, int squares) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t n = op->shape.d[0];
  double result = 0.0;
  ganfw_status st;
  op->result = 0.0;
  if (n <= 0) return GANFW_OK;
  double *slot = cs->reduce + GANFW_CUDA_REDUCE_PARTIALS;
  if ((st = LAUNCH_CHECK(cs, ganfw_cu_sum(cs->stream, n, op->in[0], squares, cs->reduce, slot))) ||
      (st = ganfw_cuda_copy_d2h(be, &result, slot, sizeof result))) {
    op->result = __builtin_nan("");
    return st;
  }
  op->result = result;
  return GANFW_OK;
}

ganfw_status ganfw_cuda_op_sum(ganfw_backend *be, ganfw_op *op) {
  return sum_to_host(be, op, 0);
}

ganfw_status ganfw_cuda_op_sumsq(ganfw_backend *be, ganfw_op *op) {
  return sum_to_host(be, op, 1);
}

/* d: n; in: x */
ganfw_status ganfw_cuda_op_nonfinite(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t n = op->shape.d[0];
  int32_t flag = 0;
  ganfw_status st;
  op->result = 0.0;
  if (n <= 0) return GANFW_OK;
  int32_t *dflag = (int32_t *)(cs->reduce + GANFW_CUDA_REDUCE_PARTIALS + 1);
  if ((st = CUDA_CHECK(cs, cudaMemsetAsync(dflag, 0, sizeof *dflag, cs->stream))) ||
      (st = LAUNCH_CHECK(cs, ganfw_cu_nonfinite(cs->stream, n, op->in[0], dflag))) ||
      (st = ganfw_cuda_copy_d2h(be, &flag, dflag, sizeof flag))) {
    op->result = 1.0;
    return st;
  }
  op->result = flag;
  return GANFW_OK;
}

/* One flag for every buffer, read back once. d: n; in: x (host array of n device pointers),
 * numel (host, n counts) */
ganfw_status ganfw_cuda_op_nonfinite_many(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t n = op->shape.d[0];
  const float *const *x = op->in[0];
  const int64_t *numel = op->in[1];
  int32_t flag = 0;
  ganfw_status st;
  int32_t *dflag = (int32_t *)(cs->reduce + GANFW_CUDA_REDUCE_PARTIALS + 1);
  op->result = 1.0;
  if ((st = CUDA_CHECK(cs, cudaMemsetAsync(dflag, 0, sizeof *dflag, cs->stream)))) return st;
  for (int64_t i = 0; i < n; i++)
    if (numel[i] > 0 &&
        (st = LAUNCH_CHECK(cs, ganfw_cu_nonfinite(cs->stream, numel[i], x[i], dflag))))
      return st;
  if ((st = ganfw_cuda_copy_d2h(be, &flag, dflag, sizeof flag))) return st;
  op->result = flag;
  return GANFW_OK;
}

/* --- casts (dtype F16 or BF16; f32 is a copy) and Philox ------------------------------------ */

/* d: n; in: x (f32); out: y (dtype) */
ganfw_status ganfw_cuda_op_cast_from_f32(ganfw_backend *be, ganfw_op *op) {
  const int64_t n = op->shape.d[0];
  if (op->dtype == GANFW_DTYPE_BF16)
    return LAUNCH(be, ganfw_cu_f32_to_bf16(STREAM(be), n, op->in[0], op->out[0]));
  if (op->dtype == GANFW_DTYPE_F16)
    return LAUNCH(be, ganfw_cu_f32_to_f16(STREAM(be), n, op->in[0], op->out[0]));
  return ganfw_cuda_copy_d2d(be, op->out[0], op->in[0], n > 0 ? (size_t)n * sizeof(float) : 0);
}

/* d: n; in: x (dtype); out: y (f32) */
ganfw_status ganfw_cuda_op_cast_to_f32(ganfw_backend *be, ganfw_op *op) {
  const int64_t n = op->shape.d[0];
  if (op->dtype == GANFW_DTYPE_BF16)
    return LAUNCH(be, ganfw_cu_bf16_to_f32(STREAM(be), n, op->in[0], op->out[0]));
  if (op->dtype == GANFW_DTYPE_F16)
    return LAUNCH(be, ganfw_cu_f16_to_f32(STREAM(be), n, op->in[0], op->out[0]));
  return ganfw_cuda_copy_d2d(be, op->out[0], op->in[0], n > 0 ? (size_t)n * sizeof(float) : 0);
}

/* d: n; out: out; sc: lo, hi; seed, offset */
ganfw_status ganfw_cuda_op_rng_uniform(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_rng_uniform(STREAM(be), op->shape.d[0], op->seed, op->offset,
                                         (float)op->sc[0], (float)op->sc[1], op->out[0]));
}

/* d: n; out: out; sc: mean, std; seed, offset */
ganfw_status ganfw_cuda_op_rng_normal(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_rng_normal(STREAM(be), op->shape.d[0], op->seed, op->offset,
                                        (float)op->sc[0], (float)op->sc[1], op->out[0]));
}
