/* The CUDA backend's own state and the helpers its files share: the stream and library
 * handles, the first recorded error, the convolution plans (descriptors and algorithms
 * per shape and data type) and a small device scratch for reductions and BatchNorm's
 * unused outputs. */
#ifndef GANFW_CUDA_INTERNAL_H
#define GANFW_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

/* C linkage for the .cu files (C++) that include this. */
#ifdef __cplusplus
extern "C" {
#endif

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

  /* The first failure recorded (GANFW_OK when none) and its message: a failed device stays
   * failed, so every op, copy and synchronize answers it until ganfw_cuda_clear_error. */
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

  /* The op running now in 16 bits (its op.h name) and its dtype; NULL in f32 and between
   * ops. Failures recorded meanwhile name it, "conv2d_forward (f16)". */
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

/* At least `floats` floats of device scratch in *out (grown with cudaMalloc, never shrunk;
 * its bytes are the backend's, not the allocator's: 4 x the widest BatchNorm). Valid until the
 * next call; the failure, recorded, when it cannot grow. */
ganfw_status ganfw_cuda_scratch(ganfw_cuda_state *cs, int64_t floats, float **out);

/* --- errors (cuda_backend.c; check.h records them) --- */
/* The backend's first recorded failure, recorded again as this thread's error; GANFW_OK when
 * none. A failed device stays failed: copies, synchronize and every op answer it until
 * ganfw_cuda_clear_error. */
ganfw_status ganfw_cuda_pending(ganfw_cuda_state *cs);
/* The status of an op or a wait that answered st: st when it failed, else the first recorded
 * failure, else a launch error the runtime still holds (recorded); GANFW_OK when none. */
ganfw_status ganfw_cuda_op_status(ganfw_cuda_state *cs, ganfw_status st);

/* --- the dtype of an op: f32, or native 16-bit compute --- */
/* Starts op in its dtype. In f16 or bf16, the failures recorded until ganfw_cuda_lp_end name
 * the op and dtype ("... in conv2d_forward (f16)"); in f32 they name neither. Any other dtype:
 * GANFW_ERR_INVALID_ARG, recorded. */
ganfw_status ganfw_cuda_lp_begin(ganfw_cuda_state *cs, const ganfw_op *op);
/* Ends the op started by ganfw_cuda_lp_begin; returns st. */
static inline ganfw_status ganfw_cuda_lp_end(ganfw_cuda_state *cs, ganfw_status st) {
  cs->op = NULL;
  return st;
}
/* The cuDNN data type of GANFW_DTYPE_F32, _F16 or _BF16. */
static inline cudnnDataType_t ganfw_cuda_dnn_type(int32_t dtype) {
  return dtype == GANFW_DTYPE_F16    ? CUDNN_DATA_HALF
         : dtype == GANFW_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16
                                     : CUDNN_DATA_FLOAT;
}

/* --- memory.c: the table's memory members --- */
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

/* --- conv.c: a convolution's workspace bytes in dtype (f32, f16 or bf16), the same for its
 * forward and backward; 0 when it cannot be planned (the failure recorded) --- */
size_t ganfw_cuda_conv2d_workspace(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s);
size_t ganfw_cuda_convt2d_workspace(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s);

/* --- the ops (op.h), one per GANFW_OP_LIST entry, each in the file of its concept: gemm and
 * linear in gemm.c, convolutions in conv.c, BatchNorm in batchnorm.c, the host's tensor math
 * in tensor_math.c, every other op in ops.c. Each unpacks the descriptor and returns the
 * status of what it ran (cuda_run adds the backend's recorded failure). --- */
#define GANFW_CUDA_OP_DECLARE_(K, name)                                                            \
  ganfw_status ganfw_cuda_op_##name(ganfw_backend *be, ganfw_op *op);
GANFW_OP_LIST(GANFW_CUDA_OP_DECLARE_)
#undef GANFW_CUDA_OP_DECLARE_

#ifdef __cplusplus
}
#endif

#endif
