/* 16-bit element types of the CUDA backend's native mixed-precision kernels (its ops in f16
 * and bf16): loads to float, stores rounded once to nearest-even, and the dispatch of a
 * launcher on GANFW_DTYPE_F16 (__half) or GANFW_DTYPE_BF16 (__nv_bfloat16). */
#ifndef GANFW_CUDA_LP_CUH
#define GANFW_CUDA_LP_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ganfw/tensor.h"

static __device__ __forceinline__ float lp_load(float v) {
  return v;
}
static __device__ __forceinline__ float lp_load(__half v) {
  return __half2float(v);
}
static __device__ __forceinline__ float lp_load(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

/* float -> T, IEEE round-to-nearest-even; overflow becomes inf, NaN stays NaN. */
template <typename T> __device__ T lp_store(float v);
template <> __device__ __forceinline__ float lp_store<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ __half lp_store<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 lp_store<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/* return fn<T>(args...) for the 16-bit type of `dtype`; cudaErrorInvalidValue for any
 * other dtype (the C side checks it first and names the op). */
#define GANFW_LP_DISPATCH(dtype, fn, ...)                                                          \
  return (dtype) == GANFW_DTYPE_F16    ? fn<__half>(__VA_ARGS__)                                   \
         : (dtype) == GANFW_DTYPE_BF16 ? fn<__nv_bfloat16>(__VA_ARGS__)                            \
                                       : cudaErrorInvalidValue

#endif
