/* The CUDA backend's ops behind the host's tensor_* entries: each unpacks its descriptor
 * (op.h), launches its kernel (tensor_math.cu) on the compute stream and returns the launch's
 * check (LAUNCH_CHECK). */
#include "backend/cuda/cuda_internal.h"

#define STREAM(be)         (ganfw_cuda_state_of(be)->stream)
#define LAUNCH(be, launch) LAUNCH_CHECK(ganfw_cuda_state_of(be), launch)

/* mode: GANFW_UNARY_*; d: n; in: x; out: out; sc: a, b */
ganfw_status ganfw_cuda_op_unary(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_unary(STREAM(be), op->mode, op->shape.d[0], op->out[0], op->in[0],
                                   (float)op->sc[0], (float)op->sc[1]));
}

/* mode: GANFW_BINARY_*; shape.bcast; in: a, b; out: out */
ganfw_status ganfw_cuda_op_binary(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(be, ganfw_cu_binary(STREAM(be), op->mode, &op->shape.bcast, op->out[0], op->in[0],
                                    op->in[1]));
}

/* shape.reduce; in: x; out: out; sc: scale */
ganfw_status ganfw_cuda_op_reduce_sum(ganfw_backend *be, ganfw_op *op) {
  return LAUNCH(
      be, ganfw_cu_reduce_sum(STREAM(be), &op->shape.reduce, op->sc[0], op->in[0], op->out[0]));
}

/* d: N, C, inner; in: x, s, b; out: y */
ganfw_status ganfw_cuda_op_channel_affine(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  return LAUNCH(be, ganfw_cu_channel_affine(STREAM(be), d[0], d[1], d[2], op->in[0], op->in[1],
                                            op->in[2], op->out[0]));
}
