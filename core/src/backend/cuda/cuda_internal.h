/* The CUDA backend's own state and the helpers its files share: the stream and library
 * handles, the first recorded error, the convolution plans (descriptors and algorithms
 * per shape and data type) and a small device scratch for reductions and BatchNorm's
 * unused outputs. */
#ifndef GANFW_CUDA_INTERNAL_H
#define GANFW_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "backend/cuda/check.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"

typedef struct ganfw_conv_plan ganfw_conv_plan; /* conv.c */

struct ganfw_cuda_state {
  int device;
  cudaStream_t stream; /* every op and copy runs on it, in order */
  cublasHandle_t cublas;
  cudnnHandle_t cudnn;
  ganfw_cuda_info info;

  int32_t cudnn_benchmark;
  size_t workspace_limit;

  /* The first failure of a void op (GANFW_OK when none) and its message. */
  ganfw_status error;
  char error_msg[1024];

  /* Convolution plans, one per (shape, conv or convT, data type), found by linear search:
   * a net has a handful of shapes. */
  ganfw_conv_plan **plans;
  int n_plans, cap_plans;

  /* BatchNorm descriptors of the latest shape, one set per data type (indexed by
   * GANFW_DTYPE_F32, _F16, _BF16: the [N,C,HW,1] data descriptor of that type and the f32
   * [1,C,1,1] parameter descriptor), and the eps of the latest training forward (cuDNN's
   * backward asks for it again). */
  struct ganfw_cuda_bn_desc {
    cudnnTensorDescriptor_t x, param;
    int64_t n, c, hw;
  } bn[3];
  double bn_eps;

  /* The _lp entry running now and its dtype (NULL between entries): failures recorded
   * meanwhile name it, "conv2d_forward_lp (f16)". */
  const char *op;
  int32_t op_dtype;

  /* Device scratch: reduction partials (REDUCE_PARTIALS doubles + a result slot),
   * then `scratch_floats` floats for BatchNorm (ones, zeros, unused dgamma/dbeta). */
  double *reduce;
  float *scratch;
  int64_t scratch_floats;
};

/* The state behind a ganfw_backend of this backend. */
static inline ganfw_cuda_state *ganfw_cuda_state_of(ganfw_backend *be) {
  return (ganfw_cuda_state *)be->impl;
}

/* At least `floats` floats of device scratch (grown with cudaMalloc, never shrunk; its
 * bytes are the backend's, not the allocator's: 4 x the widest BatchNorm). NULL with the
 * error recorded on failure. */
float *ganfw_cuda_scratch(ganfw_cuda_state *cs, int64_t floats);

/* --- native 16-bit compute (the backend's _lp entries) --- */
/* "f16", "bf16", or "?" for any other dtype. */
const char *ganfw_cuda_dtype_name(int32_t dtype);
/* Starts the _lp entry `op` on dtype: 1 when dtype is GANFW_DTYPE_F16 or _BF16 (the
 * failures recorded until ganfw_cuda_lp_end name op and dtype), else 0 with
 * GANFW_ERR_INVALID_ARG recorded. */
int ganfw_cuda_lp_begin(ganfw_cuda_state *cs, const char *op, int32_t dtype);
static inline void ganfw_cuda_lp_end(ganfw_cuda_state *cs) {
  cs->op = NULL;
}
/* The cuDNN data type of GANFW_DTYPE_F32, _F16 or _BF16. */
static inline cudnnDataType_t ganfw_cuda_dnn_type(int32_t dtype) {
  return dtype == GANFW_DTYPE_F16    ? CUDNN_DATA_HALF
         : dtype == GANFW_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16
                                     : CUDNN_DATA_FLOAT;
}

/* The pieces of the table each file fills (one concept a file). */
/* cuda_backend.c */
uint32_t ganfw_cuda_lp_ops(ganfw_backend *be, int32_t dtype);

/* memory.c */
void *ganfw_cuda_raw_alloc(ganfw_backend *be, size_t bytes);
void ganfw_cuda_raw_free(ganfw_backend *be, void *ptr, size_t bytes);
ganfw_status ganfw_cuda_capacity(ganfw_backend *be, size_t *total, size_t *free_bytes);
ganfw_status ganfw_cuda_copy_h2d(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cuda_copy_h2d_async(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cuda_copy_d2h(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cuda_copy_d2d(ganfw_backend *be, void *dst, const void *src, size_t bytes);
ganfw_status ganfw_cuda_synchronize(ganfw_backend *be);
void *ganfw_cuda_host_alloc_pinned(ganfw_backend *be, size_t bytes);
void ganfw_cuda_host_free_pinned(ganfw_backend *be, void *ptr);

/* gemm.c */
void ganfw_cuda_gemm(ganfw_backend *be, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                     float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                     float beta, float *C, int64_t ldc);
void ganfw_cuda_linear_forward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT,
                               const float *x, const float *w, const float *b, float *y);
void ganfw_cuda_linear_backward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT,
                                const float *x, const float *w, const float *dy, float *dx,
                                float *dw, float *db, int accumulate);
void ganfw_cuda_linear_forward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t IN,
                                  int64_t OUT, const void *x, const void *w, const float *b,
                                  void *y);
void ganfw_cuda_linear_backward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t IN,
                                   int64_t OUT, const void *x, const void *w, const void *dy,
                                   void *dx, float *dw, float *db, int accumulate);

/* conv.c */
size_t ganfw_cuda_conv2d_workspace(ganfw_backend *be, const ganfw_conv2d_shape *s);
void ganfw_cuda_conv2d_forward(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                               const float *w, const float *b, float *y, void *ws);
void ganfw_cuda_conv2d_backward(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                                const float *w, const float *dy, float *dx, float *dw, float *db,
                                int accumulate, void *ws);
size_t ganfw_cuda_convt2d_workspace(ganfw_backend *be, const ganfw_convt2d_shape *s);
void ganfw_cuda_convt2d_forward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                                const float *w, const float *b, float *y, void *ws);
void ganfw_cuda_convt2d_backward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                                 const float *w, const float *dy, float *dx, float *dw, float *db,
                                 int accumulate, void *ws);

size_t ganfw_cuda_conv2d_workspace_lp(ganfw_backend *be, int32_t dtype,
                                      const ganfw_conv2d_shape *s);
void ganfw_cuda_conv2d_forward_lp(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s,
                                  const void *x, const void *w, const float *b, void *y, void *ws);
void ganfw_cuda_conv2d_backward_lp(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s,
                                   const void *x, const void *w, const void *dy, void *dx,
                                   float *dw, float *db, int accumulate, void *ws);
size_t ganfw_cuda_convt2d_workspace_lp(ganfw_backend *be, int32_t dtype,
                                       const ganfw_convt2d_shape *s);
void ganfw_cuda_convt2d_forward_lp(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                                   const void *x, const void *w, const float *b, void *y, void *ws);
void ganfw_cuda_convt2d_backward_lp(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                                    const void *x, const void *w, const void *dy, void *dx,
                                    float *dw, float *db, int accumulate, void *ws);

/* batchnorm.c */
void ganfw_cuda_batchnorm2d_forward_train(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                          const float *x, const float *gamma, const float *beta,
                                          float *y, float *running_mean, float *running_var,
                                          float momentum, float eps, float *save_mean,
                                          float *save_invstd);
void ganfw_cuda_batchnorm2d_forward_eval(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                         const float *x, const float *gamma, const float *beta,
                                         float *y, const float *running_mean,
                                         const float *running_var, float eps);
void ganfw_cuda_batchnorm2d_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                     const float *x, const float *dy, const float *gamma,
                                     const float *save_mean, const float *save_invstd, float *dx,
                                     float *dgamma, float *dbeta, int accumulate);

void ganfw_cuda_batchnorm2d_forward_train_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                             int64_t HW, const void *x, const float *gamma,
                                             const float *beta, void *y, float *running_mean,
                                             float *running_var, float momentum, float eps,
                                             float *save_mean, float *save_invstd);
void ganfw_cuda_batchnorm2d_forward_eval_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                            int64_t HW, const void *x, const float *gamma,
                                            const float *beta, void *y, const float *running_mean,
                                            const float *running_var, float eps);
void ganfw_cuda_batchnorm2d_backward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                        int64_t HW, const void *x, const void *dy,
                                        const float *gamma, const float *save_mean,
                                        const float *save_invstd, void *dx, float *dgamma,
                                        float *dbeta, int accumulate);

/* ops.c: the entries that are own kernels (kernels.h), checked around their launch */
void ganfw_cuda_act_forward(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *x,
                            float *y);
void ganfw_cuda_act_backward(ganfw_backend *be, int32_t kind, float alpha, int64_t n,
                             const float *y, const float *dy, float *dx);
void ganfw_cuda_act_forward_lp(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha,
                               int64_t n, const void *x, void *y);
void ganfw_cuda_act_backward_lp(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha,
                                int64_t n, const void *y, const void *dy, void *dx);
void ganfw_cuda_maxpool2d_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                                  float *y, int32_t *argmax);
void ganfw_cuda_maxpool2d_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                                   const int32_t *argmax, float *dx);
void ganfw_cuda_avgpool2d_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                                  float *y);
void ganfw_cuda_avgpool2d_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                                   float *dx);
void ganfw_cuda_upsample2d_forward(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H,
                                   int64_t W, const float *x, float *y);
void ganfw_cuda_upsample2d_backward(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H,
                                    int64_t W, const float *dy, float *dx);
void ganfw_cuda_groupnorm_forward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                                  const float *x, const float *gamma, const float *beta, float eps,
                                  float *y, double *save_mean, double *save_invstd);
void ganfw_cuda_groupnorm_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                                   const float *x, const float *dy, const float *gamma,
                                   const double *save_mean, const double *save_invstd, float *dx,
                                   float *dgamma, float *dbeta, int accumulate);
void ganfw_cuda_embedding_forward(ganfw_backend *be, int64_t N, int64_t D, const int32_t *ids,
                                  const float *w, float *y);
void ganfw_cuda_embedding_backward(ganfw_backend *be, int64_t N, int64_t num, int64_t D,
                                   const int32_t *ids, const float *dy, float *dw, int accumulate);
void ganfw_cuda_transpose01(ganfw_backend *be, int64_t A, int64_t B, int64_t C, const float *x,
                            float *y);
/* tensor_math.c: the host's tensor_* ops */
void ganfw_cuda_unary(ganfw_backend *be, int32_t op, int64_t n, float *out, const float *x, float a,
                      float b);
void ganfw_cuda_binary(ganfw_backend *be, int32_t op, const ganfw_bcast_shape *s, float *out,
                       const float *a, const float *b);
void ganfw_cuda_reduce_sum(ganfw_backend *be, const ganfw_reduce_shape *s, double scale,
                           const float *x, float *out);
void ganfw_cuda_channel_affine(ganfw_backend *be, int64_t N, int64_t C, int64_t inner,
                               const float *x, const float *s, const float *b, float *y);
void ganfw_cuda_dropout_forward(ganfw_backend *be, int64_t n, float p, uint64_t seed,
                                uint64_t offset, const float *x, float *y, uint8_t *mask);
void ganfw_cuda_dropout_backward(ganfw_backend *be, int64_t n, float p, const uint8_t *mask,
                                 const float *dy, float *dx);
void ganfw_cuda_bce_logits_forward(ganfw_backend *be, int64_t n, const float *logits,
                                   const float *targets, float *loss);
void ganfw_cuda_bce_logits_backward(ganfw_backend *be, int64_t n, const float *logits,
                                    const float *targets, float dloss, float *dx);
void ganfw_cuda_softmax_xent_forward(ganfw_backend *be, int64_t N, int64_t classes,
                                     const float *logits, const int32_t *labels, double smoothing,
                                     float *loss);
void ganfw_cuda_softmax_xent_backward(ganfw_backend *be, int64_t N, int64_t classes,
                                      const float *logits, const int32_t *labels, double smoothing,
                                      float dloss, float *dx);
void ganfw_cuda_fill(ganfw_backend *be, int64_t n, float *x, float v);
void ganfw_cuda_scale(ganfw_backend *be, int64_t n, float *x, float a);
void ganfw_cuda_add_scalar(ganfw_backend *be, int64_t n, float *x, float a);
void ganfw_cuda_add(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b);
void ganfw_cuda_axpy(ganfw_backend *be, int64_t n, float *y, float alpha, const float *x);
void ganfw_cuda_mul(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b);
void ganfw_cuda_addcmul(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                        const float *b);
void ganfw_cuda_addcdiv(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                        const float *b);
void ganfw_cuda_sqrt(ganfw_backend *be, int64_t n, float *out, const float *x);
void ganfw_cuda_lerp(ganfw_backend *be, int64_t n, float *y, const float *x, float w);
void ganfw_cuda_maximum(ganfw_backend *be, int64_t n, float *y, const float *x);
double ganfw_cuda_sum(ganfw_backend *be, int64_t n, const float *x);
double ganfw_cuda_sumsq(ganfw_backend *be, int64_t n, const float *x);
int32_t ganfw_cuda_nonfinite(ganfw_backend *be, int64_t n, const float *x);
int32_t ganfw_cuda_nonfinite_many(ganfw_backend *be, int64_t n, const float *const *x,
                                  const int64_t *numel);
void ganfw_cuda_f32_to_f16(ganfw_backend *be, int64_t n, const float *x, uint16_t *y);
void ganfw_cuda_f16_to_f32(ganfw_backend *be, int64_t n, const uint16_t *x, float *y);
void ganfw_cuda_f32_to_bf16(ganfw_backend *be, int64_t n, const float *x, uint16_t *y);
void ganfw_cuda_bf16_to_f32(ganfw_backend *be, int64_t n, const uint16_t *x, float *y);
void ganfw_cuda_rng_uniform(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float lo,
                            float hi, float *out);
void ganfw_cuda_rng_normal(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float mean,
                           float std, float *out);

#endif
