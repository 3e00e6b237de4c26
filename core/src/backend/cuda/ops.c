/* The CUDA backend's table entries that run its own kernels (kernels.h): activations
 * (f32 and 16-bit), pooling, upsampling, group normalisation, embeddings and weight
 * transposes, dropout, losses, the foreach ops, reductions, casts and Philox sampling. Each
 * launches on the compute stream and records a failed launch (LAUNCH_CHECK); reductions that
 * return a value to the host copy it back and so wait for the stream. */
#include "backend/cuda/cuda_internal.h"

#define STREAM(be)      (ganfw_cuda_state_of(be)->stream)
#define RUN(be, launch) (void)LAUNCH_CHECK(ganfw_cuda_state_of(be), launch)

/* --- activations, pooling, dropout ------------------------------------------------------- */

void ganfw_cuda_act_forward(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *x,
                            float *y) {
  if (kind == GANFW_ACT_RELU || kind == GANFW_ACT_LEAKY_RELU || kind == GANFW_ACT_TANH ||
      kind == GANFW_ACT_SIGMOID)
    RUN(be, ganfw_cu_act_forward(STREAM(be), kind, alpha, n, x, y));
  else if (y != x) /* identity */
    (void)ganfw_cuda_copy_d2d(be, y, x, (size_t)n * sizeof *y);
}

void ganfw_cuda_act_backward(ganfw_backend *be, int32_t kind, float alpha, int64_t n,
                             const float *y, const float *dy, float *dx) {
  if (kind == GANFW_ACT_RELU || kind == GANFW_ACT_LEAKY_RELU || kind == GANFW_ACT_TANH ||
      kind == GANFW_ACT_SIGMOID)
    RUN(be, ganfw_cu_act_backward(STREAM(be), kind, alpha, n, y, dy, dx));
  else if (dx != dy)
    (void)ganfw_cuda_copy_d2d(be, dx, dy, (size_t)n * sizeof *dx);
}

static int act_is_kernel(int32_t kind) {
  return kind == GANFW_ACT_RELU || kind == GANFW_ACT_LEAKY_RELU || kind == GANFW_ACT_TANH ||
         kind == GANFW_ACT_SIGMOID;
}

/* 16-bit x and y (2 bytes an element); identity is a copy */
void ganfw_cuda_act_forward_lp(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha,
                               int64_t n, const void *x, void *y) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (!ganfw_cuda_lp_begin(cs, "act_forward_lp", dtype)) return;
  if (act_is_kernel(kind))
    (void)LAUNCH_CHECK(cs, ganfw_cu_act_forward_lp(cs->stream, dtype, kind, alpha, n, x, y));
  else if (y != x && n > 0)
    (void)CUDA_CHECK(cs,
                     cudaMemcpyAsync(y, x, (size_t)n * 2, cudaMemcpyDeviceToDevice, cs->stream));
  ganfw_cuda_lp_end(cs);
}

void ganfw_cuda_act_backward_lp(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha,
                                int64_t n, const void *y, const void *dy, void *dx) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (!ganfw_cuda_lp_begin(cs, "act_backward_lp", dtype)) return;
  if (act_is_kernel(kind))
    (void)LAUNCH_CHECK(cs, ganfw_cu_act_backward_lp(cs->stream, dtype, kind, alpha, n, y, dy, dx));
  else if (dx != dy && n > 0)
    (void)CUDA_CHECK(cs,
                     cudaMemcpyAsync(dx, dy, (size_t)n * 2, cudaMemcpyDeviceToDevice, cs->stream));
  ganfw_cuda_lp_end(cs);
}

void ganfw_cuda_maxpool2d_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                                  float *y, int32_t *argmax) {
  RUN(be, ganfw_cu_maxpool2d_forward(STREAM(be), s, x, y, argmax));
}

void ganfw_cuda_maxpool2d_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                                   const int32_t *argmax, float *dx) {
  RUN(be, ganfw_cu_maxpool2d_backward(STREAM(be), s, dy, argmax, dx));
}

void ganfw_cuda_avgpool2d_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                                  float *y) {
  RUN(be, ganfw_cu_avgpool2d_forward(STREAM(be), s, x, y));
}

void ganfw_cuda_avgpool2d_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                                   float *dx) {
  RUN(be, ganfw_cu_avgpool2d_backward(STREAM(be), s, dy, dx));
}

void ganfw_cuda_upsample2d_forward(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H,
                                   int64_t W, const float *x, float *y) {
  RUN(be, ganfw_cu_upsample2d_forward(STREAM(be), mode, planes, H, W, x, y));
}

void ganfw_cuda_upsample2d_backward(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H,
                                    int64_t W, const float *dy, float *dx) {
  RUN(be, ganfw_cu_upsample2d_backward(STREAM(be), mode, planes, H, W, dy, dx));
}

void ganfw_cuda_groupnorm_forward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                                  const float *x, const float *gamma, const float *beta, float eps,
                                  float *y, double *save_mean, double *save_invstd) {
  RUN(be, ganfw_cu_groupnorm_forward(STREAM(be), N, C, HW, G, x, gamma, beta, eps, y, save_mean,
                                     save_invstd));
}

void ganfw_cuda_groupnorm_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                                   const float *x, const float *dy, const float *gamma,
                                   const double *save_mean, const double *save_invstd, float *dx,
                                   float *dgamma, float *dbeta, int accumulate) {
  RUN(be, ganfw_cu_groupnorm_backward(STREAM(be), N, C, HW, G, x, dy, gamma, save_mean, save_invstd,
                                      dx, dgamma, dbeta, accumulate));
}

void ganfw_cuda_embedding_forward(ganfw_backend *be, int64_t N, int64_t D, const int32_t *ids,
                                  const float *w, float *y) {
  RUN(be, ganfw_cu_embedding_forward(STREAM(be), N, D, ids, w, y));
}

void ganfw_cuda_embedding_backward(ganfw_backend *be, int64_t N, int64_t num, int64_t D,
                                   const int32_t *ids, const float *dy, float *dw, int accumulate) {
  RUN(be, ganfw_cu_embedding_backward(STREAM(be), N, num, D, ids, dy, dw, accumulate));
}

void ganfw_cuda_transpose01(ganfw_backend *be, int64_t A, int64_t B, int64_t C, const float *x,
                            float *y) {
  RUN(be, ganfw_cu_transpose01(STREAM(be), A, B, C, x, y));
}

void ganfw_cuda_dropout_forward(ganfw_backend *be, int64_t n, float p, uint64_t seed,
                                uint64_t offset, const float *x, float *y, uint8_t *mask) {
  RUN(be, ganfw_cu_dropout_forward(STREAM(be), n, p, seed, offset, x, y, mask));
}

void ganfw_cuda_dropout_backward(ganfw_backend *be, int64_t n, float p, const uint8_t *mask,
                                 const float *dy, float *dx) {
  RUN(be, ganfw_cu_dropout_backward(STREAM(be), n, p, mask, dy, dx));
}

/* --- losses ------------------------------------------------------------------------------ */

void ganfw_cuda_bce_logits_forward(ganfw_backend *be, int64_t n, const float *logits,
                                   const float *targets, float *loss) {
  RUN(be, ganfw_cu_bce_logits_forward(STREAM(be), n, logits, targets, loss));
}

void ganfw_cuda_bce_logits_backward(ganfw_backend *be, int64_t n, const float *logits,
                                    const float *targets, float dloss, float *dx) {
  RUN(be, ganfw_cu_bce_logits_backward(STREAM(be), n, logits, targets, dloss, dx));
}

void ganfw_cuda_softmax_xent_forward(ganfw_backend *be, int64_t N, int64_t classes,
                                     const float *logits, const int32_t *labels, double smoothing,
                                     float *loss) {
  RUN(be, ganfw_cu_softmax_xent_forward(STREAM(be), N, classes, logits, labels, smoothing, loss));
}

void ganfw_cuda_softmax_xent_backward(ganfw_backend *be, int64_t N, int64_t classes,
                                      const float *logits, const int32_t *labels, double smoothing,
                                      float dloss, float *dx) {
  RUN(be,
      ganfw_cu_softmax_xent_backward(STREAM(be), N, classes, logits, labels, smoothing, dloss, dx));
}

/* --- foreach ------------------------------------------------------------------------------ */

void ganfw_cuda_fill(ganfw_backend *be, int64_t n, float *x, float v) {
  RUN(be, ganfw_cu_fill(STREAM(be), n, x, v));
}
void ganfw_cuda_scale(ganfw_backend *be, int64_t n, float *x, float a) {
  RUN(be, ganfw_cu_scale(STREAM(be), n, x, a));
}
void ganfw_cuda_add_scalar(ganfw_backend *be, int64_t n, float *x, float a) {
  RUN(be, ganfw_cu_add_scalar(STREAM(be), n, x, a));
}
void ganfw_cuda_add(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b) {
  RUN(be, ganfw_cu_add(STREAM(be), n, out, a, b));
}
void ganfw_cuda_axpy(ganfw_backend *be, int64_t n, float *y, float alpha, const float *x) {
  RUN(be, ganfw_cu_axpy(STREAM(be), n, y, alpha, x));
}
void ganfw_cuda_mul(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b) {
  RUN(be, ganfw_cu_mul(STREAM(be), n, out, a, b));
}
void ganfw_cuda_addcmul(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                        const float *b) {
  RUN(be, ganfw_cu_addcmul(STREAM(be), n, y, v, a, b));
}
void ganfw_cuda_addcdiv(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                        const float *b) {
  RUN(be, ganfw_cu_addcdiv(STREAM(be), n, y, v, a, b));
}
void ganfw_cuda_sqrt(ganfw_backend *be, int64_t n, float *out, const float *x) {
  RUN(be, ganfw_cu_sqrt(STREAM(be), n, out, x));
}
void ganfw_cuda_lerp(ganfw_backend *be, int64_t n, float *y, const float *x, float w) {
  RUN(be, ganfw_cu_lerp(STREAM(be), n, y, x, w));
}
void ganfw_cuda_maximum(ganfw_backend *be, int64_t n, float *y, const float *x) {
  RUN(be, ganfw_cu_maximum(STREAM(be), n, y, x));
}

/* --- reductions back to the host: NaN (sum) or 1 (nonfinite) when the device failed, so
 * that a caller that only looks at the value still stops ----------------------------------- */

static double reduce_sum(ganfw_backend *be, int64_t n, const float *x, int squares) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  double result = 0.0;
  if (n <= 0) return 0.0;
  double *slot = cs->reduce + GANFW_CUDA_REDUCE_PARTIALS;
  if (LAUNCH_CHECK(cs, ganfw_cu_sum(cs->stream, n, x, squares, cs->reduce, slot)) ||
      ganfw_cuda_copy_d2h(be, &result, slot, sizeof result) != GANFW_OK)
    return __builtin_nan("");
  return result;
}

double ganfw_cuda_sum(ganfw_backend *be, int64_t n, const float *x) {
  return reduce_sum(be, n, x, 0);
}

double ganfw_cuda_sumsq(ganfw_backend *be, int64_t n, const float *x) {
  return reduce_sum(be, n, x, 1);
}

int32_t ganfw_cuda_nonfinite(ganfw_backend *be, int64_t n, const float *x) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  int32_t flag = 0;
  if (n <= 0) return 0;
  int32_t *dflag = (int32_t *)(cs->reduce + GANFW_CUDA_REDUCE_PARTIALS + 1);
  if (CUDA_CHECK(cs, cudaMemsetAsync(dflag, 0, sizeof *dflag, cs->stream)) ||
      LAUNCH_CHECK(cs, ganfw_cu_nonfinite(cs->stream, n, x, dflag)) ||
      ganfw_cuda_copy_d2h(be, &flag, dflag, sizeof flag) != GANFW_OK)
    return 1;
  return flag;
}

/* One flag for every buffer, read back once. */
int32_t ganfw_cuda_nonfinite_many(ganfw_backend *be, int64_t n, const float *const *x,
                                  const int64_t *numel) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  int32_t flag = 0;
  int32_t *dflag = (int32_t *)(cs->reduce + GANFW_CUDA_REDUCE_PARTIALS + 1);
  if (CUDA_CHECK(cs, cudaMemsetAsync(dflag, 0, sizeof *dflag, cs->stream))) return 1;
  for (int64_t i = 0; i < n; i++)
    if (numel[i] > 0 && LAUNCH_CHECK(cs, ganfw_cu_nonfinite(cs->stream, numel[i], x[i], dflag)))
      return 1;
  if (ganfw_cuda_copy_d2h(be, &flag, dflag, sizeof flag) != GANFW_OK) return 1;
  return flag;
}

/* --- casts and Philox ---------------------------------------------------------------------- */

void ganfw_cuda_f32_to_f16(ganfw_backend *be, int64_t n, const float *x, uint16_t *y) {
  RUN(be, ganfw_cu_f32_to_f16(STREAM(be), n, x, y));
}
void ganfw_cuda_f16_to_f32(ganfw_backend *be, int64_t n, const uint16_t *x, float *y) {
  RUN(be, ganfw_cu_f16_to_f32(STREAM(be), n, x, y));
}
void ganfw_cuda_f32_to_bf16(ganfw_backend *be, int64_t n, const float *x, uint16_t *y) {
  RUN(be, ganfw_cu_f32_to_bf16(STREAM(be), n, x, y));
}
void ganfw_cuda_bf16_to_f32(ganfw_backend *be, int64_t n, const uint16_t *x, float *y) {
  RUN(be, ganfw_cu_bf16_to_f32(STREAM(be), n, x, y));
}

void ganfw_cuda_rng_uniform(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float lo,
                            float hi, float *out) {
  RUN(be, ganfw_cu_rng_uniform(STREAM(be), n, seed, offset, lo, hi, out));
}

void ganfw_cuda_rng_normal(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float mean,
                           float std, float *out) {
  RUN(be, ganfw_cu_rng_normal(STREAM(be), n, seed, offset, mean, std, out));
}
