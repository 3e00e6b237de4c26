/* Launchers of the CUDA backend's own kernels (the .cu files beside this), callable from
 * C. Each enqueues its kernel(s) on `st` and returns cudaGetLastError() (cudaSuccess for
 * an empty range); the semantics are those of the matching op in core/src/backend/op.h.
 * All pointers are device pointers; sizes are element counts. */
#ifndef GANFW_CUDA_KERNELS_H
#define GANFW_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"

/* --- elementwise.cu: foreach ops, activations, casts, bias broadcast ------------------ */
cudaError_t ganfw_cu_fill(cudaStream_t st, int64_t n, float *x, float v);
cudaError_t ganfw_cu_scale(cudaStream_t st, int64_t n, float *x, float a);
cudaError_t ganfw_cu_add_scalar(cudaStream_t st, int64_t n, float *x, float a);
cudaError_t ganfw_cu_add(cudaStream_t st, int64_t n, float *out, const float *a, const float *b);
cudaError_t ganfw_cu_axpy(cudaStream_t st, int64_t n, float *y, float alpha, const float *x);
cudaError_t ganfw_cu_mul(cudaStream_t st, int64_t n, float *out, const float *a, const float *b);
cudaError_t ganfw_cu_addcmul(cudaStream_t st, int64_t n, float *y, float v, const float *a,
                             const float *b);
cudaError_t ganfw_cu_addcdiv(cudaStream_t st, int64_t n, float *y, float v, const float *a,
                             const float *b);
cudaError_t ganfw_cu_sqrt(cudaStream_t st, int64_t n, float *out, const float *x);
cudaError_t ganfw_cu_lerp(cudaStream_t st, int64_t n, float *y, const float *x, float w);
cudaError_t ganfw_cu_maximum(cudaStream_t st, int64_t n, float *y, const float *x);
/* kind: GANFW_ACT_RELU, _LEAKY_RELU, _TANH, _SIGMOID (identity is a copy, done by the
 * caller). */
cudaError_t ganfw_cu_act_forward(cudaStream_t st, int32_t kind, float alpha, int64_t n,
                                 const float *x, float *y);
cudaError_t ganfw_cu_act_backward(cudaStream_t st, int32_t kind, float alpha, int64_t n,
                                  const float *y, const float *dy, float *dx);
cudaError_t ganfw_cu_f32_to_f16(cudaStream_t st, int64_t n, const float *x, uint16_t *y);
cudaError_t ganfw_cu_f16_to_f32(cudaStream_t st, int64_t n, const uint16_t *x, float *y);
cudaError_t ganfw_cu_f32_to_bf16(cudaStream_t st, int64_t n, const float *x, uint16_t *y);
cudaError_t ganfw_cu_bf16_to_f32(cudaStream_t st, int64_t n, const uint16_t *x, float *y);
/* y[r][c] = b[c] for rows r < rows (linear's bias before the GEMM adds x w^T). */
cudaError_t ganfw_cu_bias_rows(cudaStream_t st, int64_t rows, int64_t cols, const float *b,
                               float *y);

/* --- elementwise.cu, 16-bit (dtype GANFW_DTYPE_F16 or _BF16; x, y, dy, dx of that type):
 * computed in float from the 16-bit inputs, each output rounded once to nearest-even ----- */
cudaError_t ganfw_cu_act_forward_lp(cudaStream_t st, int32_t dtype, int32_t kind, float alpha,
                                    int64_t n, const void *x, void *y);
cudaError_t ganfw_cu_act_backward_lp(cudaStream_t st, int32_t dtype, int32_t kind, float alpha,
                                     int64_t n, const void *y, const void *dy, void *dx);
/* y [N,C,HW]: y[n][c][i] = round(float(y[n][c][i]) + b[c]) (a convolution's bias; a linear
 * layer's with C = columns, HW = 1). */
cudaError_t ganfw_cu_bias_add_lp(cudaStream_t st, int32_t dtype, int64_t N, int64_t C, int64_t HW,
                                 const float *b, void *y);
/* y[i] = float(x[i]) (accumulate 0) or y[i] += float(x[i]) (1): a 16-bit weight gradient
 * into the f32 one. */
cudaError_t ganfw_cu_lp_to_f32(cudaStream_t st, int32_t dtype, int64_t n, const void *x, float *y,
                               int accumulate);

/* --- reduce.cu: deterministic reductions (the same grid for the same n) --------------- */
#define GANFW_CUDA_REDUCE_PARTIALS 1024
/* *result = sum of x (squares: of x*x) in double; partials holds
 * GANFW_CUDA_REDUCE_PARTIALS doubles. */
cudaError_t ganfw_cu_sum(cudaStream_t st, int64_t n, const float *x, int squares, double *partials,
                         double *result);
/* *flag = 1 when any x is NaN or inf; the caller zeroes *flag first. */
cudaError_t ganfw_cu_nonfinite(cudaStream_t st, int64_t n, const float *x, int32_t *flag);
/* out[c] (+)= sum over rows of x[r][c] (linear's bias gradient). */
cudaError_t ganfw_cu_column_sums(cudaStream_t st, int64_t rows, int64_t cols, const float *x,
                                 float *out, int accumulate);
/* BatchNorm's parameter gradients alone (when no dx is wanted): per channel c,
 * dbeta (+)= sum dy, dgamma (+)= sum dy * (x - mean) * invstd over N and HW. Either output
 * may be NULL. */
cudaError_t ganfw_cu_bn_param_grads(cudaStream_t st, int64_t N, int64_t C, int64_t HW,
                                    const float *x, const float *dy, const float *mean,
                                    const float *invstd, float *dgamma, float *dbeta,
                                    int accumulate);
/* The same three reductions over 16-bit inputs (dtype GANFW_DTYPE_F16 or _BF16), summed
 * in double from float(x), into f32 outputs: */
cudaError_t ganfw_cu_column_sums_lp(cudaStream_t st, int32_t dtype, int64_t rows, int64_t cols,
                                    const void *x, float *out, int accumulate);
/* out[c] (+)= sum over n and HW of float(x[n][c][i]), x [N,C,HW] (a convolution's bias
 * gradient); one block per channel. */
cudaError_t ganfw_cu_channel_sums_lp(cudaStream_t st, int32_t dtype, int64_t N, int64_t C,
                                     int64_t HW, const void *x, float *out, int accumulate);
cudaError_t ganfw_cu_bn_param_grads_lp(cudaStream_t st, int32_t dtype, int64_t N, int64_t C,
                                       int64_t HW, const void *x, const void *dy, const float *mean,
                                       const float *invstd, float *dgamma, float *dbeta,
                                       int accumulate);

/* --- loss.cu ------------------------------------------------------------------------ */
cudaError_t ganfw_cu_bce_logits_forward(cudaStream_t st, int64_t n, const float *logits,
                                        const float *targets, float *loss);
cudaError_t ganfw_cu_bce_logits_backward(cudaStream_t st, int64_t n, const float *logits,
                                         const float *targets, float dloss, float *dx);
cudaError_t ganfw_cu_softmax_xent_forward(cudaStream_t st, int64_t N, int64_t classes,
                                          const float *logits, const int32_t *labels,
                                          double smoothing, float *loss);
cudaError_t ganfw_cu_softmax_xent_backward(cudaStream_t st, int64_t N, int64_t classes,
                                           const float *logits, const int32_t *labels,
                                           double smoothing, float dloss, float *dx);

/* --- rng.cu: Philox 4x32-10 (core/src/base/philox.h), the CPU's numbers ------------------ */
cudaError_t ganfw_cu_rng_uniform(cudaStream_t st, int64_t n, uint64_t seed, uint64_t offset,
                                 float lo, float hi, float *out);
cudaError_t ganfw_cu_rng_normal(cudaStream_t st, int64_t n, uint64_t seed, uint64_t offset,
                                float mean, float std, float *out);
cudaError_t ganfw_cu_dropout_forward(cudaStream_t st, int64_t n, float p, uint64_t seed,
                                     uint64_t offset, const float *x, float *y, uint8_t *mask);
cudaError_t ganfw_cu_dropout_backward(cudaStream_t st, int64_t n, float p, const uint8_t *mask,
                                      const float *dy, float *dx);

/* --- pool.cu ------------------------------------------------------------------------ */
cudaError_t ganfw_cu_maxpool2d_forward(cudaStream_t st, const ganfw_pool2d_shape *s, const float *x,
                                       float *y, int32_t *argmax);
cudaError_t ganfw_cu_maxpool2d_backward(cudaStream_t st, const ganfw_pool2d_shape *s,
                                        const float *dy, const int32_t *argmax, float *dx);
cudaError_t ganfw_cu_avgpool2d_forward(cudaStream_t st, const ganfw_pool2d_shape *s, const float *x,
                                       float *y);
cudaError_t ganfw_cu_avgpool2d_backward(cudaStream_t st, const ganfw_pool2d_shape *s,
                                        const float *dy, float *dx);

/* --- upsample.cu, groupnorm.cu ------------------------------------------------------ */
cudaError_t ganfw_cu_upsample2d_forward(cudaStream_t st, int32_t mode, int64_t planes, int64_t H,
                                        int64_t W, const float *x, float *y);
cudaError_t ganfw_cu_upsample2d_backward(cudaStream_t st, int32_t mode, int64_t planes, int64_t H,
                                         int64_t W, const float *dy, float *dx);
cudaError_t ganfw_cu_groupnorm_forward(cudaStream_t st, int64_t N, int64_t C, int64_t HW, int64_t G,
                                       const float *x, const float *gamma, const float *beta,
                                       float eps, float *y, double *save_mean, double *save_invstd);
cudaError_t ganfw_cu_groupnorm_backward(cudaStream_t st, int64_t N, int64_t C, int64_t HW,
                                        int64_t G, const float *x, const float *dy,
                                        const float *gamma, const double *save_mean,
                                        const double *save_invstd, float *dx, float *dgamma,
                                        float *dbeta, int accumulate);

/* --- embedding.cu ------------------------------------------------------------------- */
cudaError_t ganfw_cu_embedding_forward(cudaStream_t st, int64_t N, int64_t D, const int32_t *ids,
                                       const float *w, float *y);
cudaError_t ganfw_cu_embedding_backward(cudaStream_t st, int64_t N, int64_t num, int64_t D,
                                        const int32_t *ids, const float *dy, float *dw,
                                        int accumulate);
cudaError_t ganfw_cu_transpose01(cudaStream_t st, int64_t A, int64_t B, int64_t C, const float *x,
                                 float *y);

/* --- tensor_math.cu: the host's tensor_* ops (op.h: unary, binary, reduce_sum,
 * channel_affine) ------------------------------------------------------------------------ */
cudaError_t ganfw_cu_unary(cudaStream_t st, int32_t op, int64_t n, float *out, const float *x,
                           float a, float b);
cudaError_t ganfw_cu_binary(cudaStream_t st, int32_t op, const ganfw_bcast_shape *s, float *out,
                            const float *a, const float *b);
cudaError_t ganfw_cu_reduce_sum(cudaStream_t st, const ganfw_reduce_shape *s, double scale,
                                const float *x, float *out);
cudaError_t ganfw_cu_channel_affine(cudaStream_t st, int64_t N, int64_t C, int64_t inner,
                                    const float *x, const float *s, const float *b, float *y);

#ifdef __cplusplus
}
#endif

#endif
