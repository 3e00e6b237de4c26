/* The CUDA backend's memory: raw device segments for the caching allocator (cudaMalloc /
 * cudaFree; an out-of-memory answer is NULL, never an abort), the device's capacity from
 * cudaMemGetInfo, copies on the compute stream, and page-locked host buffers with
 * asynchronous uploads for the data prefetcher. */
#include <string.h>

#include "backend/cuda/cuda_internal.h"

void *ganfw_cuda_raw_alloc(ganfw_backend *be, size_t bytes) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  void *p = NULL;
  if (bytes == 0) return NULL;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    /* Not sticky, but it stays the runtime's "last error": clear it, so that the
     * allocator's retry (and the next kernel's launch check) starts clean. */
    (void)cudaGetLastError();
    return NULL;
  }
  if (e != cudaSuccess) {
    ganfw_cuda_check_rt(cs, e, "cudaMalloc(&p, bytes)", __FILE__, __LINE__);
    return NULL;
  }
  return p;
}

void ganfw_cuda_raw_free(ganfw_backend *be, void *ptr, size_t bytes) {
  (void)bytes;
  /* cudaFree waits for the device: no kernel still uses the segment afterwards. */
  if (ptr) (void)CUDA_CHECK(ganfw_cuda_state_of(be), cudaFree(ptr));
}

ganfw_status ganfw_cuda_capacity(ganfw_backend *be, size_t *total, size_t *free_bytes) {
  size_t f = 0, t = 0;
  ganfw_status st = CUDA_CHECK(ganfw_cuda_state_of(be), cudaMemGetInfo(&f, &t));
  if (st != GANFW_OK) return st;
  if (total) *total = t;
  if (free_bytes) *free_bytes = f;
  return GANFW_OK;
}

/* Copies answer the device's first recorded failure (ganfw_cuda_pending) as the ops do, so
 * that a failed kernel surfaces at the next point where the host waits too. */

/* Returns when src may be reused: the copy is enqueued in order with the ops and waited
 * for (src may be pageable or pinned; copy_h2d_async is the overlapping variant). */
ganfw_status ganfw_cuda_copy_h2d(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  ganfw_status st;
  if (bytes == 0) return ganfw_cuda_pending(cs);
  if ((st = CUDA_CHECK(cs, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cs->stream))))
    return st;
  if ((st = CUDA_CHECK(cs, cudaStreamSynchronize(cs->stream)))) return st;
  return ganfw_cuda_pending(cs);
}

/* Enqueued in order with the ops and not waited for: src (from host_alloc_pinned) must
 * stay unchanged until the next synchronize or copy_d2h returns. */
ganfw_status ganfw_cuda_copy_h2d_async(ganfw_backend *be, void *dst, const void *src,
                                       size_t bytes) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (bytes == 0) return ganfw_cuda_pending(cs);
  ganfw_status st =
      CUDA_CHECK(cs, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cs->stream));
  return st != GANFW_OK ? st : ganfw_cuda_pending(cs);
}

/* Waits for everything queued before it, then for the copy. */
ganfw_status ganfw_cuda_copy_d2h(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  ganfw_status st;
  if (bytes &&
      (st = CUDA_CHECK(cs, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cs->stream))))
    return st;
  if ((st = CUDA_CHECK(cs, cudaStreamSynchronize(cs->stream)))) return st;
  return ganfw_cuda_pending(cs);
}

ganfw_status ganfw_cuda_copy_d2d(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (bytes == 0 || dst == src) return ganfw_cuda_pending(cs);
  ganfw_status st =
      CUDA_CHECK(cs, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cs->stream));
  return st != GANFW_OK ? st : ganfw_cuda_pending(cs);
}

/* The wait's own failure, else the first recorded one, else a launch error the runtime still
 * holds: what synchronize and the removed last_error answered together. */
ganfw_status ganfw_cuda_synchronize(ganfw_backend *be) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  return ganfw_cuda_op_status(cs, CUDA_CHECK(cs, cudaStreamSynchronize(cs->stream)));
}

/* Page-locked host memory (cudaHostAlloc): uploads from it run at full bus speed and
 * overlap with compute. NULL, with the error recorded, on failure. */
void *ganfw_cuda_host_alloc_pinned(ganfw_backend *be, size_t bytes) {
  void *p = NULL;
  if (bytes == 0) return NULL;
  if (CUDA_CHECK(ganfw_cuda_state_of(be), cudaHostAlloc(&p, bytes, cudaHostAllocDefault)))
    return NULL;
  return p;
}

void ganfw_cuda_host_free_pinned(ganfw_backend *be, void *ptr) {
  if (ptr) (void)CUDA_CHECK(ganfw_cuda_state_of(be), cudaFreeHost(ptr));
}
