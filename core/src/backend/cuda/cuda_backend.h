/* The CUDA backend as the rest of the core sees it (only in builds with GANFW_HAVE_CUDA):
 * device discovery, the process's backend on device 0 (one compute stream, one cuBLAS
 * and one cuDNN handle) and its few settings. The op table itself is ganfw_backend_vt. */
#ifndef GANFW_CUDA_BACKEND_H
#define GANFW_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* How many CUDA devices this process can use: 0 when there is none, no driver, or a
 * driver older than the runtime. Prints nothing; when 0 and `why` is not NULL, writes the
 * reason (the runtime's error string) into why[0..n). */
int ganfw_cuda_device_count(char *why, size_t n);

/* The CUDA backend on device 0, created on the first call: the context, a non-blocking
 * compute stream, the cuBLAS and cuDNN handles bound to it, and a small device scratch.
 * NULL, with the error recorded, when it cannot be created (no device, driver error).
 * Owned by the process: valid until exit, never destroyed (like ganfw_cpu_backend). */
ganfw_backend *ganfw_cuda_backend(void);

typedef struct ganfw_cuda_info {
  int32_t device; /* index */
  int32_t cc_major, cc_minor;
  int32_t sm_count;
  char name[256];        /* "NVIDIA H200" */
  size_t total_bytes;    /* device memory */
  size_t context_bytes;  /* device memory in use when the backend was created, before
                            any allocation of ours: the CUDA context, cuBLAS and cuDNN
                            (and other processes' memory on a shared device) */
  int32_t cudnn_version; /* cudnnGetVersion() */
  int32_t runtime_version;
} ganfw_cuda_info;

/* Fills *out for the backend `be` (from ganfw_cuda_backend). */
void ganfw_cuda_get_info(ganfw_backend *be, ganfw_cuda_info *out);

/* device.cudnn_benchmark: 1 = time every convolution algorithm once per shape
 * (cudnnFind*AlgorithmEx) and keep the fastest; 0 (default) = cuDNN's heuristics
 * (cudnnGet*Algorithm_v7). Applies to shapes planned after the call. */
void ganfw_cuda_set_cudnn_benchmark(ganfw_backend *be, int32_t on);

/* The most workspace bytes one convolution may ask of the allocator (algorithms needing
 * more are not chosen). Default 1 GiB; ctx.c lowers it under a small memory_limit.
 * Applies to shapes planned after the call. */
void ganfw_cuda_set_workspace_limit(ganfw_backend *be, size_t bytes);

/* Forgets a recorded error (tests that provoke one on purpose). A sticky CUDA error (a
 * kernel fault) cannot be forgotten: the next call fails again. */
void ganfw_cuda_clear_error(ganfw_backend *be);

#endif
