/* BatchNorm2d on the GPU through cuDNN (spatial mode) over x [N,C,HW] with per-channel
 * gamma/beta/statistics [C]: training forward (batch statistics; cuDNN's running variance is
 * the unbiased one and exponentialAverageFactor = momentum, as PyTorch), eval forward, and
 * backward from the saved mean and 1/sqrt(var+eps). In f16 or bf16 the ops make the same
 * calls with x, y, dx, dy of that type and every per-channel tensor f32 (cuDNN computes in f32).
 * cuDNN needs every per-channel pointer: affine=False gets ones and zeros, unwanted
 * dgamma/dbeta land in the backend's scratch; a backward with no dx (cuDNN always writes
 * one) runs the parameter sums of reduce.cu. */
#include "backend/cuda/cuda_internal.h"

/* The [N,C,HW,1] data descriptor of `dtype` (GANFW_DTYPE_F32, _F16 or _BF16) and the f32
 * [1,C,1,1] parameter descriptor of this shape in *out, kept per dtype; the failure, recorded,
 * when they cannot be set. */
static ganfw_status descriptors(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t C,
                                int64_t HW, const struct ganfw_cuda_bn_desc **out) {
  struct ganfw_cuda_bn_desc *d = &cs->bn[dtype];
  ganfw_status st;
  *out = NULL;
  if (N > INT32_MAX || C > INT32_MAX || HW > INT32_MAX)
    return ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, "batchnorm2d",
                           "a size exceeds 2^31-1, which cuDNN cannot take", __FILE__, __LINE__);
  if (!d->x && ((st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&d->x))) ||
                (st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&d->param)))))
    return st;
  if (d->n != N || d->c != C || d->hw != HW) {
    /* cuDNN's PSEUDO_HALF_CONFIG: half x/y/dx/dy with float scale, bias, mean and variance
     * (what cudnnDeriveBNTensorDescriptor gives for half data) */
    if ((st = CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW,
                                                         ganfw_cuda_dnn_type(dtype), (int)N, (int)C,
                                                         (int)HW, 1))) ||
        (st = CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(d->param, CUDNN_TENSOR_NCHW,
                                                         CUDNN_DATA_FLOAT, 1, (int)C, 1, 1)))) {
      d->n = 0; /* half-set: make the next call set both again */
      return st;
    }
    d->n = N, d->c = C, d->hw = HW;
  }
  *out = d;
  return GANFW_OK;
}

/* Scratch [4C] in *out: ones, zeros, then two [C] sinks. Fills the ones and zeros when asked. */
static ganfw_status bn_scratch(ganfw_cuda_state *cs, int64_t C, int need_constants, float **out) {
  ganfw_status st = ganfw_cuda_scratch(cs, 4 * C, out);
  if (st || !need_constants) return st;
  if ((st = LAUNCH_CHECK(cs, ganfw_cu_fill(cs->stream, C, *out, 1.0f))) ||
      (st = LAUNCH_CHECK(cs, ganfw_cu_fill(cs->stream, C, *out + C, 0.0f))))
    *out = NULL;
  return st;
}

/* The ops over x, y, dx, dy of `dtype` (f32, f16 or bf16). */
static ganfw_status forward_train(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t C,
                                  int64_t HW, const void *x, const float *gamma, const float *beta,
                                  void *y, float *running_mean, float *running_var, float momentum,
                                  float eps, float *save_mean, float *save_invstd) {
  const struct ganfw_cuda_bn_desc *d;
  ganfw_status st;
  if (N * HW <= 0 || C <= 0) return GANFW_OK;
  if ((st = descriptors(cs, dtype, N, C, HW, &d))) return st;
  if (!gamma || !beta) {
    float *s;
    if ((st = bn_scratch(cs, C, 1, &s))) return st;
    if (!gamma) gamma = s;
    if (!beta) beta = s + C;
  }
  const float one = 1.0f, zero = 0.0f;
  cs->bn_eps = eps;
  return CUDNN_CHECK(cs, cudnnBatchNormalizationForwardTraining(
                             cs->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->x, x, d->x, y,
                             d->param, gamma, beta, (double)momentum, running_mean, running_var,
                             (double)eps, save_mean, save_invstd));
}

static ganfw_status forward_eval(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t C,
                                 int64_t HW, const void *x, const float *gamma, const float *beta,
                                 void *y, const float *running_mean, const float *running_var,
                                 float eps) {
  const struct ganfw_cuda_bn_desc *d;
  ganfw_status st;
  if (N * HW <= 0 || C <= 0) return GANFW_OK;
  if ((st = descriptors(cs, dtype, N, C, HW, &d))) return st;
  if (!gamma || !beta) {
    float *s;
    if ((st = bn_scratch(cs, C, 1, &s))) return st;
    if (!gamma) gamma = s;
    if (!beta) beta = s + C;
  }
  const float one = 1.0f, zero = 0.0f;
  return CUDNN_CHECK(cs, cudnnBatchNormalizationForwardInference(
                             cs->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->x, x, d->x, y,
                             d->param, gamma, beta, running_mean, running_var, (double)eps));
}

static ganfw_status backward(ganfw_cuda_state *cs, int32_t dtype, int64_t N, int64_t C, int64_t HW,
                             const void *x, const void *dy, const float *gamma,
                             const float *save_mean, const float *save_invstd, void *dx,
                             float *dgamma, float *dbeta, int accumulate) {
  ganfw_status st;
  if (N * HW <= 0 || C <= 0) return GANFW_OK;
  if (!dx)
    return LAUNCH_CHECK(cs, dtype == GANFW_DTYPE_F32
                                ? ganfw_cu_bn_param_grads(cs->stream, N, C, HW, x, dy, save_mean,
                                                          save_invstd, dgamma, dbeta, accumulate)
                                : ganfw_cu_bn_param_grads_lp(cs->stream, dtype, N, C, HW, x, dy,
                                                             save_mean, save_invstd, dgamma, dbeta,
                                                             accumulate));
  const struct ganfw_cuda_bn_desc *d;
  if ((st = descriptors(cs, dtype, N, C, HW, &d))) return st;
  if (!gamma || !dgamma || !dbeta) {
    float *s;
    if ((st = bn_scratch(cs, C, !gamma, &s))) return st;
    if (!gamma) gamma = s;
    if (!dgamma) dgamma = s + 2 * C;
    if (!dbeta) dbeta = s + 3 * C;
  }
  const float one = 1.0f, zero = 0.0f, acc = accumulate ? 1.0f : 0.0f;
  /* With the saved mean and inverse std given, cuDNN does not recompute them; eps is the
   * training forward's, as cuDNN asks. */
  return CUDNN_CHECK(cs, cudnnBatchNormalizationBackward(cs->cudnn, CUDNN_BATCHNORM_SPATIAL, &one,
                                                         &zero, &one, &acc, d->x, x, d->x, dy, d->x,
                                                         dx, d->param, gamma, dgamma, dbeta,
                                                         cs->bn_eps, save_mean, save_invstd));
}

/* --- the ops (op.h), in f32 or 16 bits as op->dtype says ------------------------------- */

/* d: N, C, HW; in: x, gamma, beta; out: y, running_mean, running_var, save_mean,
 * save_invstd; sc: momentum, eps */
ganfw_status ganfw_cuda_op_batchnorm2d_train(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t *d = op->shape.d;
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = forward_train(cs, op->dtype, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2], op->out[0],
                       op->out[1], op->out[2], (float)op->sc[0], (float)op->sc[1], op->out[3],
                       op->out[4]);
  return ganfw_cuda_lp_end(cs, st);
}

/* d: N, C, HW; in: x, gamma, beta, running_mean, running_var; out: y; sc: eps */
ganfw_status ganfw_cuda_op_batchnorm2d_eval(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t *d = op->shape.d;
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = forward_eval(cs, op->dtype, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2], op->out[0],
                      op->in[3], op->in[4], (float)op->sc[0]);
  return ganfw_cuda_lp_end(cs, st);
}

/* d: N, C, HW; in: x, dy, gamma, save_mean, save_invstd; out: dx; grad: dgamma, dbeta */
ganfw_status ganfw_cuda_op_batchnorm2d_backward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int64_t *d = op->shape.d;
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = backward(cs, op->dtype, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2], op->in[3],
                  op->in[4], op->out[0], op->grad[0], op->grad[1],
                  (op->flags & GANFW_OP_ACCUMULATE) != 0);
  return ganfw_cuda_lp_end(cs, st);
}
