/* The tensor descriptor: NCHW, contiguous, up to four dimensions. Tensors are created and
 * destroyed by the core (host->tensor_create / tensor_destroy); plugins read the fields
 * and never write them. New fields are only ever appended. */
#ifndef GANFW_TENSOR_H
#define GANFW_TENSOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GANFW_MAX_DIMS 4

/* Element types, stored as int32_t. */
enum {
  GANFW_DTYPE_F32 = 0,
  GANFW_DTYPE_F16 = 1,
  GANFW_DTYPE_BF16 = 2,
  GANFW_DTYPE_I32 = 3,
  GANFW_DTYPE_U8 = 4,
  GANFW_DTYPE_COUNT
};

/* What a block of memory is for; every allocation carries one, so that memory can be
 * reported per category. Stored as int32_t. */
enum {
  GANFW_MEM_PARAM = 0,
  GANFW_MEM_GRAD = 1,
  GANFW_MEM_OPTIM_STATE = 2,
  GANFW_MEM_ACTIVATION = 3,
  GANFW_MEM_WORKSPACE = 4,
  GANFW_MEM_DATA = 5,
  GANFW_MEM_OTHER = 6,
  GANFW_MEM_COMM = 7, /* ABI 1.5: communication buffers of data-parallel training */
  GANFW_MEM_COUNT
};

typedef struct ganfw_tensor {
  void *data;                    /* device memory (host memory on the CPU backend); owned
                                    by the tensor, valid until tensor_destroy */
  int64_t shape[GANFW_MAX_DIMS]; /* unused trailing dimensions are 1 */
  int64_t numel;                 /* product of the used dimensions */
  int64_t nbytes;                /* numel * element size */
  int32_t ndim;                  /* 0..GANFW_MAX_DIMS */
  int32_t dtype;                 /* GANFW_DTYPE_* */
  int32_t category;              /* GANFW_MEM_* */
  int32_t device;                /* backend index: 0 CPU, 1 CUDA */
  const char *name;              /* owned by the tensor, may be "" */
  void *impl;                    /* the core's private bookkeeping; plugins ignore it */
} ganfw_tensor;

#ifdef __cplusplus
}
#endif
#endif
