/* OpenBLAS's per-thread buffers. Each thread that calls OpenBLAS takes a buffer of the
 * size its build chose (BUFFER_SIZE: 32 to 256 MiB of address space, of which a product
 * touches a few MiB) the first time, and keeps it. OpenBLAS retries a mapping that fails
 * for ever, so a process under `ulimit -v` spins there, deaf to everything but SIGKILL.
 * The bytes are therefore measured in a child process (killed when it gets stuck) before
 * a run, and then mapped in the run's own threads before the first step: a shortfall
 * found later can only be the allocator's, which says so. */
#ifndef GANFW_CPU_BLAS_BUFFERS_H
#define GANFW_CPU_BLAS_BUFFERS_H

#include <stdint.h>

#include "ganfw/status.h"

typedef struct ganfw_blas_buffers {
  int32_t threads; /* the threads measured */
  int32_t done;    /* 1: the child mapped a buffer for every thread; 0: see why */
  int32_t held;    /* the threads that got theirs (threads when done) */
  int64_t mapped;  /* what that added to the address space (VmSize): the buffers and the
                      stacks of threads - 1 new threads */
  int64_t data;    /* ... to the private writable mappings (VmData) */
  char why[200];   /* when not done: what the child could not do */
} ganfw_blas_buffers;

/* Measures what `threads` threads (the caller's and threads - 1 new ones) holding an
 * OpenBLAS buffer each at once add to this process, in a child of it (same limits, same
 * mappings, same buffers OpenBLAS already keeps). A child that makes no progress for
 * `stall_s` seconds is stuck in OpenBLAS's retry and is killed: done 0. GANFW_ERR_BACKEND
 * when no child could be started. */
ganfw_status ganfw_cpu_blas_buffers_measure(int32_t threads, double stall_s,
                                            ganfw_blas_buffers *out);

/* Gives each of `threads` OpenMP threads its OpenBLAS buffer now (all hold one at once,
 * then give it back to OpenBLAS, which keeps it for their later calls). Only after
 * ganfw_cpu_blas_buffers_measure found that they fit. */
void ganfw_cpu_blas_buffers_map(int32_t threads);

#endif
