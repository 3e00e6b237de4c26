/* Launch helpers shared by the CUDA backend's .cu files: 1-D grids with grid-stride loops
 * over int64 indices, and the launcher epilogue. */
#ifndef GANFW_CUDA_LAUNCH_CUH
#define GANFW_CUDA_LAUNCH_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#define GANFW_CU_THREADS 256
/* Enough blocks to fill any current GPU many times; larger ranges loop. */
#define GANFW_CU_MAX_BLOCKS (1 << 16)

/* Blocks of GANFW_CU_THREADS for n items (at least 1). */
static inline unsigned ganfw_cu_blocks(int64_t n) {
  int64_t b = (n + GANFW_CU_THREADS - 1) / GANFW_CU_THREADS;
  if (b < 1) b = 1;
  return (unsigned)(b > GANFW_CU_MAX_BLOCKS ? GANFW_CU_MAX_BLOCKS : b);
}

/* for (i in this thread's share of [0, n)) */
#define GANFW_CU_FOR(i, n)                                                                         \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                        \
       i += (int64_t)gridDim.x * blockDim.x)

/* Launches kernel<<<blocks(n), THREADS, 0, st>>>(args...) unless n is 0; returns the
 * launch's error. */
#define GANFW_CU_LAUNCH(st, n, kernel, ...)                                                        \
  do {                                                                                             \
    if ((n) <= 0) return cudaSuccess;                                                              \
    kernel<<<ganfw_cu_blocks(n), GANFW_CU_THREADS, 0, (st)>>>(__VA_ARGS__);                        \
    return cudaGetLastError();                                                                     \
  } while (0)

#endif
