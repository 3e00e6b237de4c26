/* The backend interface: raw memory for the caching allocator, and one entry that runs any
 * op (op.h) the layers and the host's tensor ops are built from. A backend executes; it owns
 * no memory policy (that is alloc.c). The CPU backend (core/src/backend/cpu/) is the
 * reference; the CUDA backend (core/src/backend/cuda/) and the meta backend (planning) fill
 * the same table. */
#ifndef GANFW_BACKEND_H
#define GANFW_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend/op.h"
#include "ganfw/host.h"
#include "ganfw/status.h"

typedef struct ganfw_backend ganfw_backend;

typedef struct ganfw_backend_vt {
  const char *name; /* "cpu", "cuda", "meta" */

  /* --- raw memory for the allocator --- */
  /* Returns NULL when the device has no room; never aborts. */
  void *(*raw_alloc)(ganfw_backend *be, size_t bytes);
  void (*raw_free)(ganfw_backend *be, void *ptr, size_t bytes);
  /* Total and currently free device bytes (CPU: physical memory). */
  ganfw_status (*capacity)(ganfw_backend *be, size_t *total, size_t *free_bytes);
  ganfw_status (*copy_h2d)(ganfw_backend *be, void *dst, const void *src, size_t bytes);
  ganfw_status (*copy_d2h)(ganfw_backend *be, void *dst, const void *src, size_t bytes);
  ganfw_status (*copy_d2d)(ganfw_backend *be, void *dst, const void *src, size_t bytes);
  /* Waits for every op and copy issued; the first failure among them, if any. */
  ganfw_status (*synchronize)(ganfw_backend *be);
  void (*set_threads)(ganfw_backend *be, int threads);
  /* (optional) Page-locked host memory for the data prefetcher, so that uploads from it
   * run at full bus speed and can overlap compute. NULL when it cannot be had, with the
   * error recorded. NULL entries: plain malloc/free. */
  void *(*host_alloc_pinned)(ganfw_backend *be, size_t bytes);
  void (*host_free_pinned)(ganfw_backend *be, void *ptr);
  /* (optional) copy_h2d that may return before the copy is done: ordered with the ops
   * that follow, but src (from host_alloc_pinned) must stay unchanged until synchronize
   * or a copy_d2h returns. NULL: copy_h2d. */
  ganfw_status (*copy_h2d_async)(ganfw_backend *be, void *dst, const void *src, size_t bytes);

  /* --- ops (op.h) --- */
  /* 1 when run can compute op as described: its kind, its dtype (every backend runs every
   * op in f32; 16 bits where it has native kernels) and the questions its flags ask
   * (GANFW_OP_IN_PLACE). Reads nothing but kind, dtype and flags. */
  int32_t (*supports)(ganfw_backend *be, const ganfw_op *op);
  /* The workspace bytes op needs in op->ws (0 for most ops). Reads kind, dtype, shape. */
  size_t (*workspace)(ganfw_backend *be, const ganfw_op *op);
  /* Runs op, in order with the ops and copies before it (a GPU may return before it is
   * done). GANFW_OK, or the failure with its message recorded (ganfw_error_set); a backend
   * whose device failed answers that failure from then on. Fills op->result for the ops
   * that answer a value. */
  ganfw_status (*run)(ganfw_backend *be, ganfw_op *op);
  /* (optional) The algorithm run picks for pass `pass` (GANFW_OP_PASS_*) of op, a
   * convolution's forward or backward (kind, dtype and shape read), as a static string for
   * the log and memory.json ("direct", "im2col+gemm", ...); NULL where there is no choice or
   * the backend does not say. */
  const char *(*algorithm)(ganfw_backend *be, const ganfw_op *op, int32_t pass);
} ganfw_backend_vt;

/* The passes of a convolution, for vt->algorithm. */
enum { GANFW_OP_PASS_FORWARD, GANFW_OP_PASS_DATA, GANFW_OP_PASS_FILTER, GANFW_OP_PASS_COUNT };

/* Runs op on be (vt->run) after checking its kind is in range. */
ganfw_status ganfw_backend_run(ganfw_backend *be, ganfw_op *op);
int32_t ganfw_backend_supports(ganfw_backend *be, const ganfw_op *op);
size_t ganfw_backend_workspace(ganfw_backend *be, const ganfw_op *op);
/* vt->algorithm, or NULL where the backend has none. */
const char *ganfw_backend_algorithm(ganfw_backend *be, const ganfw_op *op, int32_t pass);

/* A backend's kernels, one per op kind: each backend keeps one table indexed by
 * GANFW_OP_*, made from GANFW_OP_LIST so that a kernel it lacks fails the build. */
typedef ganfw_status (*ganfw_op_fn)(ganfw_backend *be, ganfw_op *op);
/* The body of a backend's run: table[op->kind] when vt->supports(op), else
 * GANFW_ERR_UNSUPPORTED naming the backend, the op and its dtype. */
ganfw_status ganfw_op_dispatch(const ganfw_op_fn *table, ganfw_backend *be, ganfw_op *op);

/* Groups of ops with native 16-bit kernels (ganfw_be_lp_ops in ops.h): a backend that
 * supports one op of a group in a dtype supports all of them. */
#define GANFW_LP_CONV      1u /* conv2d and conv_transpose2d, forward and backward */
#define GANFW_LP_LINEAR    2u /* linear */
#define GANFW_LP_BATCHNORM 4u /* batchnorm2d */
#define GANFW_LP_ACT       8u /* activations */

/* The GANFW_LP_* group of an op kind; 0 for the ops that have none. */
uint32_t ganfw_op_lp_group(int32_t kind);
/* What every backend's supports() shares: 0 when op's flags ask a question other than
 * those in `questions` (GANFW_OP_IN_PLACE...); every op in f32; in f16 and bf16 the casts,
 * the ops that only move elements (ganfw_op_any_dtype) and those of the `lp_groups` the
 * backend computes natively in op's dtype. */
int32_t ganfw_op_supported(const ganfw_op *op, uint32_t lp_groups, uint32_t questions);

struct ganfw_backend {
  const ganfw_backend_vt *vt;
  void *impl; /* the backend's own state */
};

/* The CPU backend (core/src/backend/cpu/cpu_backend.c). Static: no create/destroy needed. */
ganfw_backend *ganfw_cpu_backend(void);
/* device.cudnn_benchmark on the CPU (cpu/conv2d.c): 1 times each f32 convolution pass's
 * paths on its first call and keeps the fastest for the process; 0 (the default) takes them
 * by the shape rules, the same on every run. */
void ganfw_cpu_set_conv_benchmark(int32_t on);
/* The OPENBLAS_CORETYPE that this CPU should have when OpenBLAS (a DYNAMIC_ARCH build) took it
 * for a generic one: a CPU newer than the library (Sapphire Rapids under OpenBLAS 0.3.21,
 * seen in a VM as "Intel(R) Xeon(R) Processor") gets Prescott's SSE3 kernels, a third of
 * the speed of SkylakeX's. "SkylakeX" with AVX-512, "Haswell" with AVX2 and FMA; NULL when
 * OpenBLAS chose a specific core or the CPU has neither. The library reads the variable when
 * it loads: the CLI starts itself again with it set (cli/main.c). */
const char *ganfw_cpu_blas_core_hint(void);
/* When ganfw_cpu_blas_core_hint names a core and OPENBLAS_CORETYPE is unset: sets it and
 * starts the program again (execv of /proc/self/exe with argv), so that every ganfw program
 * on this machine (the CLI, the benches, the test suites) computes with the same OpenBLAS
 * kernels and so the same bits. Returns (doing nothing) otherwise or when execv fails. */
void ganfw_cpu_blas_restart(char **argv);
/* One line on how the CPU backend computes in `dtype` (f16 or bf16) on this machine: which
 * layers run natively, and the conversions and products it uses. */
const char *ganfw_cpu_lp_describe(int32_t dtype);
/* Turns the CPU's native 16-bit kernels on or off (off: every layer converts, as
 * GANFW_CPU_LP=0 does) for the whole process, for tests; returns the previous setting. */
int ganfw_cpu_lp_set(int on);
/* The meta backend (core/src/backend/meta_backend.c), for planning: fake addresses, no kernels;
 * the workspace sizes and capacity of `shadow`, the backend a real run would use (NULL:
 * the CPU). Static, one per shadow (NULL past four shadows); one planning thread at a
 * time. */
ganfw_backend *ganfw_meta_backend(ganfw_backend *shadow);

#ifdef GANFW_HAVE_CUDA
/* The CUDA backend (core/src/backend/cuda/, only in builds with it; more in
 * core/src/backend/cuda/cuda_backend.h). ganfw_cuda_device_count: visible devices, 0 without a
 * driver or device (prints nothing; `why` gets the reason, may be NULL). ganfw_cuda_backend: device
 * 0's backend, created on first use and kept for the process; NULL with the error recorded when it
 * cannot be. */
int ganfw_cuda_device_count(char *why, size_t n);
ganfw_backend *ganfw_cuda_backend(void);
#endif

#endif
