/* Declarations of the CPU backend's kernels, one per entry of ganfw_backend_vt (see
 * core/src/backend/backend.h for what each computes). Each concept lives in its own file under
 * core/src/backend/cpu/; cpu_backend.c puts them in the table. */
#ifndef GANFW_CPU_OPS_H
#define GANFW_CPU_OPS_H

#include "backend/backend.h"
void *ganfw_cpu_raw_alloc(ganfw_backend *be, size_t bytes);
void ganfw_cpu_raw_free(ganfw_backend *be, void *ptr, size_t bytes);
ganfw_status ganfw_cpu_capacity(ganfw_backend *be, size_t *total, size_t *free_bytes);
ganfw_status ganfw_cpu_copy_h2d(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cpu_copy_d2h(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cpu_copy_d2d(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cpu_synchronize(ganfw_backend *be);
void ganfw_cpu_set_threads(ganfw_backend *be, int threads);
void ganfw_cpu_gemm(ganfw_backend *be, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc);
/* The same as one OpenBLAS call on the calling thread, for callers that split the work
 * themselves in pieces that depend on the shape alone (ganfw_cpu_gemm splits large products
 * in blocks that depend on the shape alone, so that no result depends on the thread count). */
void ganfw_cpu_gemm_single(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                           float *C, int64_t ldc);
size_t ganfw_cpu_conv2d_workspace(ganfw_backend *be, const ganfw_conv2d_shape *s);
void ganfw_cpu_conv2d_forward(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                              const float *w, const float *b, float *y, void *ws);
void ganfw_cpu_conv2d_backward(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                               const float *w, const float *dy, float *dx, float *dw, float *db,
                               int accumulate, void *ws);
size_t ganfw_cpu_convt2d_workspace(ganfw_backend *be, const ganfw_convt2d_shape *s);
void ganfw_cpu_convt2d_forward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                               const float *w, const float *b, float *y, void *ws);
void ganfw_cpu_convt2d_backward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                                const float *w, const float *dy, float *dx, float *dw, float *db,
                                int accumulate, void *ws);
void ganfw_cpu_linear_forward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT, const float *x,
                              const float *w, const float *b, float *y);
void ganfw_cpu_linear_backward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT,
                               const float *x, const float *w, const float *dy, float *dx,
                               float *dw, float *db, int accumulate);
void ganfw_cpu_batchnorm2d_forward_train(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                         const float *x, const float *gamma, const float *beta,
                                         float *y, float *running_mean, float *running_var,
                                         float momentum, float eps, float *save_mean,
                                         float *save_invstd);
void ganfw_cpu_batchnorm2d_forward_eval(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                        const float *x, const float *gamma, const float *beta,
                                        float *y, const float *running_mean,
                                        const float *running_var, float eps);
void ganfw_cpu_batchnorm2d_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                    const float *x, const float *dy, const float *gamma,
                                    const float *save_mean, const float *save_invstd, float *dx,
                                    float *dgamma, float *dbeta, int accumulate);
int32_t ganfw_cpu_batchnorm2d_backward_in_place(ganfw_backend *be);
void ganfw_cpu_act_forward(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *x,
                           float *y);
void ganfw_cpu_act_backward(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *y,
                            const float *dy, float *dx);
void ganfw_cpu_maxpool2d_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                                 float *y, int32_t *argmax);
void ganfw_cpu_maxpool2d_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                                  const int32_t *argmax, float *dx);
void ganfw_cpu_avgpool2d_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                                 float *y);
void ganfw_cpu_avgpool2d_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                                  float *dx);
void ganfw_cpu_dropout_forward(ganfw_backend *be, int64_t n, float p, uint64_t seed,
                               uint64_t offset, const float *x, float *y, uint8_t *mask);
void ganfw_cpu_dropout_backward(ganfw_backend *be, int64_t n, float p, const uint8_t *mask,
                                const float *dy, float *dx);
void ganfw_cpu_bce_logits_forward(ganfw_backend *be, int64_t n, const float *logits,
                                  const float *targets, float *loss);
void ganfw_cpu_bce_logits_backward(ganfw_backend *be, int64_t n, const float *logits,
                                   const float *targets, float dloss, float *dx);
void ganfw_cpu_softmax_xent_forward(ganfw_backend *be, int64_t N, int64_t classes,
                                    const float *logits, const int32_t *labels, double smoothing,
                                    float *loss);
void ganfw_cpu_softmax_xent_backward(ganfw_backend *be, int64_t N, int64_t classes,
                                     const float *logits, const int32_t *labels, double smoothing,
                                     float dloss, float *dx);
void ganfw_cpu_fill(ganfw_backend *be, int64_t n, float *x, float v);
void ganfw_cpu_scale(ganfw_backend *be, int64_t n, float *x, float a);
void ganfw_cpu_add_scalar(ganfw_backend *be, int64_t n, float *x, float a);
void ganfw_cpu_add(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b);
void ganfw_cpu_axpy(ganfw_backend *be, int64_t n, float *y, float alpha, const float *x);
void ganfw_cpu_mul(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b);
void ganfw_cpu_addcmul(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                       const float *b);
void ganfw_cpu_addcdiv(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                       const float *b);
void ganfw_cpu_sqrt(ganfw_backend *be, int64_t n, float *out, const float *x);
void ganfw_cpu_lerp(ganfw_backend *be, int64_t n, float *y, const float *x, float w);
void ganfw_cpu_maximum(ganfw_backend *be, int64_t n, float *y, const float *x);
double ganfw_cpu_sum(ganfw_backend *be, int64_t n, const float *x);
double ganfw_cpu_sumsq(ganfw_backend *be, int64_t n, const float *x);
int32_t ganfw_cpu_nonfinite(ganfw_backend *be, int64_t n, const float *x);
void ganfw_cpu_f32_to_f16(ganfw_backend *be, int64_t n, const float *x, uint16_t *y);
void ganfw_cpu_f16_to_f32(ganfw_backend *be, int64_t n, const uint16_t *x, float *y);
void ganfw_cpu_f32_to_bf16(ganfw_backend *be, int64_t n, const float *x, uint16_t *y);
void ganfw_cpu_bf16_to_f32(ganfw_backend *be, int64_t n, const uint16_t *x, float *y);
void ganfw_cpu_rng_uniform(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float lo,
                           float hi, float *out);
void ganfw_cpu_rng_normal(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float mean,
                          float std, float *out);
void ganfw_cpu_upsample2d_forward(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H,
                                  int64_t W, const float *x, float *y);
void ganfw_cpu_upsample2d_backward(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H,
                                   int64_t W, const float *dy, float *dx);
void ganfw_cpu_groupnorm_forward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                                 const float *x, const float *gamma, const float *beta, float eps,
                                 float *y, double *save_mean, double *save_invstd);
void ganfw_cpu_groupnorm_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                                  const float *x, const float *dy, const float *gamma,
                                  const double *save_mean, const double *save_invstd, float *dx,
                                  float *dgamma, float *dbeta, int accumulate);
void ganfw_cpu_unary(ganfw_backend *be, int32_t op, int64_t n, float *out, const float *x, float a,
                     float b);
void ganfw_cpu_binary(ganfw_backend *be, int32_t op, const ganfw_bcast_shape *s, float *out,
                      const float *a, const float *b);
void ganfw_cpu_reduce_sum(ganfw_backend *be, const ganfw_reduce_shape *s, double scale,
                          const float *x, float *out);
void ganfw_cpu_channel_affine(ganfw_backend *be, int64_t N, int64_t C, int64_t inner,
                              const float *x, const float *s, const float *b, float *y);

void ganfw_cpu_embedding_forward(ganfw_backend *be, int64_t N, int64_t D, const int32_t *ids,
                                 const float *w, float *y);
void ganfw_cpu_embedding_backward(ganfw_backend *be, int64_t N, int64_t num, int64_t D,
                                  const int32_t *ids, const float *dy, float *dw, int accumulate);
void ganfw_cpu_transpose01(ganfw_backend *be, int64_t A, int64_t B, int64_t C, const float *x,
                           float *y);

/* Native 16-bit entries (backend.h _lp): the activations in f16 or bf16, converted row by
 * row inside the kernels (F16C from the AVX2 level up), products and sums in f32, the same
 * bits as converting whole tensors around the f32 entries. */
uint32_t ganfw_cpu_lp_ops(ganfw_backend *be, int32_t dtype);
size_t ganfw_cpu_conv2d_workspace_lp(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s);
void ganfw_cpu_conv2d_forward_lp(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s,
                                 const void *x, const void *w, const float *b, void *y, void *ws);
void ganfw_cpu_conv2d_backward_lp(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s,
                                  const void *x, const void *w, const void *dy, void *dx, float *dw,
                                  float *db, int accumulate, void *ws);
size_t ganfw_cpu_convt2d_workspace_lp(ganfw_backend *be, int32_t dtype,
                                      const ganfw_convt2d_shape *s);
void ganfw_cpu_convt2d_forward_lp(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                                  const void *x, const void *w, const float *b, void *y, void *ws);
void ganfw_cpu_convt2d_backward_lp(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                                   const void *x, const void *w, const void *dy, void *dx,
                                   float *dw, float *db, int accumulate, void *ws);
void ganfw_cpu_batchnorm2d_forward_train_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                            int64_t HW, const void *x, const float *gamma,
                                            const float *beta, void *y, float *running_mean,
                                            float *running_var, float momentum, float eps,
                                            float *save_mean, float *save_invstd);
void ganfw_cpu_batchnorm2d_forward_eval_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                           int64_t HW, const void *x, const float *gamma,
                                           const float *beta, void *y, const float *running_mean,
                                           const float *running_var, float eps);
void ganfw_cpu_batchnorm2d_backward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                       int64_t HW, const void *x, const void *dy,
                                       const float *gamma, const float *save_mean,
                                       const float *save_invstd, void *dx, float *dgamma,
                                       float *dbeta, int accumulate);
void ganfw_cpu_act_forward_lp(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha,
                              int64_t n, const void *x, void *y);
void ganfw_cpu_act_backward_lp(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha,
                               int64_t n, const void *y, const void *dy, void *dx);

/* ganfw_cpu_gemm and ganfw_cpu_gemm_single for a conv whose activations are in dtype dt:
 * with bf16, on bf16 dot products where ganfw_cpu_have_bf16_dot() (gemm_bf16.h) says so
 * (A and B rounded to bf16, sums in f32; alpha 1), else sgemm as the f32 entries. */
void ganfw_cpu_gemm_dt(ganfw_backend *be, int32_t dt, int trans_a, int trans_b, int64_t M,
                       int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void ganfw_cpu_gemm_single_dt(int32_t dt, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                              float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                              float beta, float *C, int64_t ldc);

/* The number of threads the CPU kernels use (device.threads). */
int ganfw_cpu_threads(void);

#endif
