/* BatchNorm2d on the GPU through cuDNN (spatial mode) over x [N,C,HW] with per-channel
 * gamma/beta/statistics [C]: training forward (batch statistics; cuDNN's running variance is
 * the unbiased one and exponentialAverageFactor = momentum, as PyTorch), eval forward, and
 * backward from the saved mean and 1/sqrt(var+eps). cuDNN needs every per-channel pointer:
 * affine=False gets ones and zeros, unwanted dgamma/dbeta land in the backend's scratch;
 * a backward with no dx (cuDNN always writes one) runs the parameter sums of reduce.cu. */
#include "cuda_internal.h"

/* The [N,C,HW,1] data and [1,C,1,1] parameter descriptors of this shape. */
static ganfw_status descriptors(ganfw_cuda_state *cs, int64_t N, int64_t C, int64_t HW) {
  ganfw_status st;
  if (N > INT32_MAX || C > INT32_MAX || HW > INT32_MAX)
    return ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, "batchnorm2d",
                           "a size exceeds 2^31-1, which cuDNN cannot take", __FILE__, __LINE__);
  if (!cs->bn_x && ((st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&cs->bn_x))) ||
                    (st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&cs->bn_param)))))
    return st;
  if (cs->bn_n == N && cs->bn_c == C && cs->bn_hw == HW) return GANFW_OK;
  if ((st =
           CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(cs->bn_x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                      (int)N, (int)C, (int)HW, 1))) ||
      (st = CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(cs->bn_param, CUDNN_TENSOR_NCHW,
                                                       CUDNN_DATA_FLOAT, 1, (int)C, 1, 1)))) {
    cs->bn_n = 0; /* half-set: make the next call set both again */
    return st;
  }
  cs->bn_n = N, cs->bn_c = C, cs->bn_hw = HW;
  return GANFW_OK;
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

void ganfw_cuda_batchnorm2d_forward_train(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                          const float *x, const float *gamma, const float *beta,
                                          float *y, float *running_mean, float *running_var,
                                          float momentum, float eps, float *save_mean,
                                          float *save_invstd) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (N * HW <= 0 || C <= 0 || descriptors(cs, N, C, HW) != GANFW_OK) return;
  if (!gamma || !beta) {
    const float *s = bn_scratch(cs, C, 1);
    if (!s) return;
    if (!gamma) gamma = s;
    if (!beta) beta = s + C;
  }
  const float one = 1.0f, zero = 0.0f;
  cs->bn_eps = eps;
  (void)CUDNN_CHECK(cs, cudnnBatchNormalizationForwardTraining(
                            cs->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, cs->bn_x, x, cs->bn_x,
                            y, cs->bn_param, gamma, beta, (double)momentum, running_mean,
                            running_var, (double)eps, save_mean, save_invstd));
}

void ganfw_cuda_batchnorm2d_forward_eval(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                         const float *x, const float *gamma, const float *beta,
                                         float *y, const float *running_mean,
                                         const float *running_var, float eps) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (N * HW <= 0 || C <= 0 || descriptors(cs, N, C, HW) != GANFW_OK) return;
  if (!gamma || !beta) {
    const float *s = bn_scratch(cs, C, 1);
    if (!s) return;
    if (!gamma) gamma = s;
    if (!beta) beta = s + C;
  }
  const float one = 1.0f, zero = 0.0f;
  (void)CUDNN_CHECK(cs, cudnnBatchNormalizationForwardInference(
                            cs->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, cs->bn_x, x, cs->bn_x,
                            y, cs->bn_param, gamma, beta, running_mean, running_var, (double)eps));
}

void ganfw_cuda_batchnorm2d_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                     const float *x, const float *dy, const float *gamma,
                                     const float *save_mean, const float *save_invstd, float *dx,
                                     float *dgamma, float *dbeta, int accumulate) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (N * HW <= 0 || C <= 0) return;
  if (!dx) {
    (void)LAUNCH_CHECK(cs, ganfw_cu_bn_param_grads(cs->stream, N, C, HW, x, dy, save_mean,
                                                   save_invstd, dgamma, dbeta, accumulate));
    return;
  }
  if (descriptors(cs, N, C, HW) != GANFW_OK) return;
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
  (void)CUDNN_CHECK(cs, cudnnBatchNormalizationBackward(
                            cs->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &acc, cs->bn_x,
                            x, cs->bn_x, dy, cs->bn_x, dx, cs->bn_param, gamma, dgamma, dbeta,
                            cs->bn_eps, save_mean, save_invstd));
}
