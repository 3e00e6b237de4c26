/* Element-type conversion of tensors between f32 and the 16-bit float types (f16, bf16),
 * on the tensors' backend (its cast kernels: IEEE round-to-nearest-even, NaN kept, overflow
 * to inf). Used where a value leaves or enters the compute dtype: layers, losses, samples. */
#ifndef GANFW_TENSOR_CAST_H
#define GANFW_TENSOR_CAST_H

#include "backend/backend.h"
#include "ganfw/tensor.h"

/* Converts n values of src (dtype src_dtype) into dst (dtype dst_dtype), device pointers of
 * be. One side is f32, or both have the same float dtype (a copy); anything else is
 * GANFW_ERR_UNSUPPORTED. */
ganfw_status ganfw_cast(ganfw_backend *be, int64_t n, int32_t src_dtype, const void *src,
                        int32_t dst_dtype, void *dst);

/* t as `dtype`: t itself (retained) when it has that dtype, else a new tensor of t's shape
 * and name in `category` holding t's values converted. Owned by the caller
 * (ganfw_tensor_destroy); NULL with the error recorded. */
ganfw_tensor *ganfw_tensor_as_dtype(ganfw_tensor *t, int32_t dtype, int32_t category);

#endif
