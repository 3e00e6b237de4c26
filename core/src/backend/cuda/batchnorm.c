/* BatchNorm2d on the GPU through cuDNN (spatial mode) over x [N,C,HW] with per-channel
 * gamma/beta/statistics [C]: training forward (batch statistics; cuDNN's running variance is
 * the unbiased one and exponentialAverageFactor = momentum, as PyTorch), eval forward, and
 * backward from the saved mean and 1/sqrt(var+eps). The _lp entries make the same calls
 * with x, y, dx, dy in f16 or bf16 and every per-channel tensor f32 (cuDNN computes in f32).
 * cuDNN needs every per-channel pointer: affine=False gets ones and zeros, unwanted
 * dgamma/dbeta land in the backend's scratch; a backward with no dx (cuDNN always writes
 * one) runs the parameter sums of reduce.cu. */
#include "backend/cuda/cuda_internal.h"

/* The [N,C,HW,1] data descriptor of `dtype` (GANFW_DTYPE_F32, _F16 or _BF16) and the f32
 * [1,C,1,1] parameter descriptor of this shape, kept per dtype; NULL with the error recorded. */
static struct ganfw_cuda_bn_desc *descriptors(ganfw_cuda_state *cs, int32_t dtype, int64_t N,
                                              int64_t C, int64_t HW) {
  struct ganfw_cuda_bn_desc *d = &cs->bn[dtype];
  if (N > INT32_MAX || C > INT32_MAX || HW > INT32_MAX) {
    ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, "batchnorm2d",
                    "a size exceeds 2^31-1, which cuDNN cannot take", __FILE__, __LINE__);
    return NULL;
  }
  if (!d->x && (CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&d->x)) ||
                CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&d->param))))
    return NULL;
  if (d->n == N && d->c == C && d->hw == HW) return d;
  /* cuDNN's PSEUDO_HALF_CONFIG: half x/y/dx/dy with float scale, bias, mean and variance
   * (what cudnnDeriveBNTensorDescriptor gives for half data) */
  if (CUDNN_CHECK(cs,
                  cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, ganfw_cuda_dnn_type(dtype),
                                             (int)N, (int)C, (int)HW, 1)) ||
      CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(d->param, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                                 (int)C, 1, 1))) {
    d->n = 0; /* half-set: make the next call set both again */
    return NULL;
  }
  d->n = N, d->c = C, d->hw = HW;
  return d;
}

/* Scratch [4C]: ones, zeros, then two [C] sinks. Fills the ones and zeros when asked. */
static float *bn_scratch(ganfw_cuda_state *cs, int64_t C, int need_constants) {
  float *s = ganfw_cuda_scratch(cs, 4 * C);
  if (!s || !need_constants) return s;
  if (LAUNCH_CHECK(cs, ganfw_cu_fill(cs->stream, C, s, 1.0f)) ||
      LAUNCH_CHECK(cs, ganfw_cu_fill(cs->stream, C, s + C, 0.0f)))
    return NULL;
  return s;
}

/* The entries over x, y, dx, dy of `dtype` (f32, or 16-bit for the _lp ones). */
static void forward_train(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t C, int64_t HW,
                          const void *x, const float *gamma, const float *beta, void *y,
                          float *running_mean, float *running_var, float momentum, float eps,
                          float *save_mean, float *save_invstd) {
  const struct ganfw_cuda_bn_desc *d;
  if (N * HW <= 0 || C <= 0 || !(d = descriptors(cs, dtype, N, C, HW))) return;
  if (!gamma || !beta) {
    const float *s = bn_scratch(cs, C, 1);
    if (!s) return;
    if (!gamma) gamma = s;
    if (!beta) beta = s + C;
  }
  const float one = 1.0f, zero = 0.0f;
  cs->bn_eps = eps;
  (void)CUDNN_CHECK(cs, cudnnBatchNormalizationForwardTraining(
                            cs->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->x, x, d->x, y,
                            d->param, gamma, beta, (double)momentum, running_mean, running_var,
                            (double)eps, save_mean, save_invstd));
}

static void forward_eval(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t C, int64_t HW,
                         const void *x, const float *gamma, const float *beta, void *y,
                         const float *running_mean, const float *running_var, float eps) {
  const struct ganfw_cuda_bn_desc *d;
  if (N * HW <= 0 || C <= 0 || !(d = descriptors(cs, dtype, N, C, HW))) return;
  if (!gamma || !beta) {
    const float *s = bn_scratch(cs, C, 1);
    if (!s) return;
    if (!gamma) gamma = s;
    if (!beta) beta = s + C;
  }
  const float one = 1.0f, zero = 0.0f;
  (void)CUDNN_CHECK(cs, cudnnBatchNormalizationForwardInference(
                            cs->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->x, x, d->x, y,
                            d->param, gamma, beta, running_mean, running_var, (double)eps));
}

static void backward(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t C, int64_t HW,
                     const void *x, const void *dy, const float *gamma, const float *save_mean,
                     const float *save_invstd, void *dx, float *dgamma, float *dbeta,
                     int accumulate) {
  if (N * HW <= 0 || C <= 0) return;
  if (!dx) {
    (void)LAUNCH_CHECK(cs, dtype == GANFW_DTYPE_F32
                               ? ganfw_cu_bn_param_grads(cs->stream, N, C, HW, x, dy, save_mean,
                                                         save_invstd, dgamma, dbeta, accumulate)
                               : ganfw_cu_bn_param_grads_lp(cs->stream, dtype, N, C, HW, x, dy,
                                                            save_mean, save_invstd, dgamma, dbeta,
                                                            accumulate));
    return;
  }
  const struct ganfw_cuda_bn_desc *d = descriptors(cs, dtype, N, C, HW);
  if (!d) return;
  if (!gamma || !dgamma || !dbeta) {
    float *s = bn_scratch(cs, C, !gamma);
    if (!s) return;
    if (!gamma) gamma = s;
    if (!dgamma) dgamma = s + 2 * C;
    if (!dbeta) dbeta = s + 3 * C;
  }
  const float one = 1.0f, zero = 0.0f, acc = accumulate ? 1.0f : 0.0f;
  /* With the saved mean and inverse std given, cuDNN does not recompute them; eps is the
   * training forward's, as cuDNN asks. */
  (void)CUDNN_CHECK(cs, cudnnBatchNormalizationBackward(cs->cudnn, CUDNN_BATCHNORM_SPATIAL, &one,
                                                        &zero, &one, &acc, d->x, x, d->x, dy, d->x,
                                                        dx, d->param, gamma, dgamma, dbeta,
                                                        cs->bn_eps, save_mean, save_invstd));
}

/* --- the table's entries: f32, then 16-bit ----------------------------------------------- */

void ganfw_cuda_batchnorm2d_forward_train(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                          const float *x, const float *gamma, const float *beta,
                                          float *y, float *running_mean, float *running_var,
                                          float momentum, float eps, float *save_mean,
                                          float *save_invstd) {
  forward_train(ganfw_cuda_state_of(be), GANFW_DTYPE_F32, N, C, HW, x, gamma, beta, y, running_mean,
                running_var, momentum, eps, save_mean, save_invstd);
}

void ganfw_cuda_batchnorm2d_forward_eval(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                         const float *x, const float *gamma, const float *beta,
                                         float *y, const float *running_mean,
                                         const float *running_var, float eps) {
  forward_eval(ganfw_cuda_state_of(be), GANFW_DTYPE_F32, N, C, HW, x, gamma, beta, y, running_mean,
               running_var, eps);
}

void ganfw_cuda_batchnorm2d_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                     const float *x, const float *dy, const float *gamma,
                                     const float *save_mean, const float *save_invstd, float *dx,
                                     float *dgamma, float *dbeta, int accumulate) {
  backward(ganfw_cuda_state_of(be), GANFW_DTYPE_F32, N, C, HW, x, dy, gamma, save_mean, save_invstd,
           dx, dgamma, dbeta, accumulate);
}

void ganfw_cuda_batchnorm2d_forward_train_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                             int64_t HW, const void *x, const float *gamma,
                                             const float *beta, void *y, float *running_mean,
                                             float *running_var, float momentum, float eps,
                                             float *save_mean, float *save_invstd) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (!ganfw_cuda_lp_begin(cs, "batchnorm2d_forward_train_lp", dtype)) return;
  forward_train(cs, dtype, N, C, HW, x, gamma, beta, y, running_mean, running_var, momentum, eps,
                save_mean, save_invstd);
  ganfw_cuda_lp_end(cs);
}

void ganfw_cuda_batchnorm2d_forward_eval_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                            int64_t HW, const void *x, const float *gamma,
                                            const float *beta, void *y, const float *running_mean,
                                            const float *running_var, float eps) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (!ganfw_cuda_lp_begin(cs, "batchnorm2d_forward_eval_lp", dtype)) return;
  forward_eval(cs, dtype, N, C, HW, x, gamma, beta, y, running_mean, running_var, eps);
  ganfw_cuda_lp_end(cs);
}

void ganfw_cuda_batchnorm2d_backward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                        int64_t HW, const void *x, const void *dy,
                                        const float *gamma, const float *save_mean,
                                        const float *save_invstd, void *dx, float *dgamma,
                                        float *dbeta, int accumulate) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (!ganfw_cuda_lp_begin(cs, "batchnorm2d_backward_lp", dtype)) return;
  backward(cs, dtype, N, C, HW, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta,
           accumulate);
  ganfw_cuda_lp_end(cs);
}
