/* Check macros for every CUDA runtime, cuBLAS and cuDNN call of the CUDA backend. A failed
 * call is recorded with the call's text, the library's error name and string, and file:line
 * (ganfw_error_set, GANFW_ERR_BACKEND; GANFW_ERR_OOM for an allocation failure); the first
 * failure also stays in the backend's state, which every later op, copy and synchronize
 * answers (a failed device stays failed). Each macro evaluates to the ganfw_status (GANFW_OK
 * when the call worked):
 *     if ((st = CUDA_CHECK(cs, cudaMemsetAsync(p, 0, n, cs->stream)))) return st;      */
#ifndef GANFW_CUDA_CHECK_H
#define GANFW_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "ganfw/status.h"

typedef struct ganfw_cuda_state ganfw_cuda_state;

/* Records a failure of `call` at file:line: `lib_error` names the library's status
 * ("cudaErrorIllegalAddress (an illegal memory access was encountered)"). Returns code. */
ganfw_status ganfw_cuda_fail(ganfw_cuda_state *cs, ganfw_status code, const char *call,
                             const char *lib_error, const char *file, int line);

ganfw_status ganfw_cuda_check_rt(ganfw_cuda_state *cs, cudaError_t e, const char *call,
                                 const char *file, int line);
ganfw_status ganfw_cuda_check_blas(ganfw_cuda_state *cs, cublasStatus_t e, const char *call,
                                   const char *file, int line);
ganfw_status ganfw_cuda_check_dnn(ganfw_cuda_state *cs, cudnnStatus_t e, const char *call,
                                  const char *file, int line);

#define CUDA_CHECK(cs, call)   ganfw_cuda_check_rt((cs), (call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(cs, call) ganfw_cuda_check_blas((cs), (call), #call, __FILE__, __LINE__)
#define CUDNN_CHECK(cs, call)  ganfw_cuda_check_dnn((cs), (call), #call, __FILE__, __LINE__)
/* A launcher in a core/src/backend/cuda .cu file returns cudaGetLastError() after its launch. */
#define LAUNCH_CHECK(cs, call) ganfw_cuda_check_rt((cs), (call), #call, __FILE__, __LINE__)

#endif
