/* The CUDA backend's table entries for the host's tensor_* ops: each launches its kernel
 * (tensor_math.cu) on the compute stream and records a failed launch (LAUNCH_CHECK), which
 * the executor and the host entries read back through last_error. */
#include "backend/cuda/cuda_internal.h"

#define STREAM(be)      (ganfw_cuda_state_of(be)->stream)
#define RUN(be, launch) (void)LAUNCH_CHECK(ganfw_cuda_state_of(be), launch)

void ganfw_cuda_unary(ganfw_backend *be, int32_t op, int64_t n, float *out, const float *x, float a,
                      float b) {
  RUN(be, ganfw_cu_unary(STREAM(be), op, n, out, x, a, b));
}

void ganfw_cuda_binary(ganfw_backend *be, int32_t op, const ganfw_bcast_shape *s, float *out,
                       const float *a, const float *b) {
  RUN(be, ganfw_cu_binary(STREAM(be), op, s, out, a, b));
}

void ganfw_cuda_reduce_sum(ganfw_backend *be, const ganfw_reduce_shape *s, double scale,
                           const float *x, float *out) {
  RUN(be, ganfw_cu_reduce_sum(STREAM(be), s, scale, x, out));
}

void ganfw_cuda_channel_affine(ganfw_backend *be, int64_t N, int64_t C, int64_t inner,
                               const float *x, const float *s, const float *b, float *y) {
  RUN(be, ganfw_cu_channel_affine(STREAM(be), N, C, inner, x, s, b, y));
}
