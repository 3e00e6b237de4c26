/* The CUDA backend: device discovery, the process's backend on device 0 (context, one
 * non-blocking compute stream, cuBLAS and cuDNN handles bound to it), the op table (op.h) with
 * what it runs in 16 bits (supports) and the workspaces it asks, and the error record behind
 * the check macros (check.h), which makes a failed device stay failed. The ops live beside
 * this file: memory.c, gemm.c, conv.c, batchnorm.c, tensor_math.c, and ops.c over the kernels
 * of the .cu files. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "base/error.h"

/* --- errors ------------------------------------------------------------------------------ */

/* "core/src/backend/cuda/conv.c" from an absolute __FILE__. */
static const char *short_path(const char *file) {
  const char *p = strstr(file, "core/src/backend/cuda/");
  return p ? p : file;
}

/* "f16", "bf16", or "?" for any other dtype. */
static const char *dtype_name(int32_t dtype) {
  return dtype == GANFW_DTYPE_F16 ? "f16" : dtype == GANFW_DTYPE_BF16 ? "bf16" : "?";
}

ganfw_status ganfw_cuda_fail(ganfw_cuda_state *cs, ganfw_status code, const char *call,
                             const char *lib_error, const char *file, int line) {
  char msg[sizeof cs->error_msg], in[96] = "";
  if (cs && cs->op) snprintf(in, sizeof in, " in %s (%s)", cs->op, dtype_name(cs->op_dtype));
  snprintf(msg, sizeof msg, "CUDA backend: %s failed%s: %s (%s:%d)", call, in, lib_error,
           short_path(file), line);
  if (cs && cs->error == GANFW_OK) {
    cs->error = code;
    memcpy(cs->error_msg, msg, sizeof msg);
  }
  return ganfw_error_set(code, "%s", msg);
}

ganfw_status ganfw_cuda_check_rt(ganfw_cuda_state *cs, cudaError_t e, const char *call,
                                 const char *file, int line) {
  if (e == cudaSuccess) return GANFW_OK;
  char lib[256];
  snprintf(lib, sizeof lib, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
  return ganfw_cuda_fail(cs, e == cudaErrorMemoryAllocation ? GANFW_ERR_OOM : GANFW_ERR_BACKEND,
                         call, lib, file, line);
}

ganfw_status ganfw_cuda_check_blas(ganfw_cuda_state *cs, cublasStatus_t e, const char *call,
                                   const char *file, int line) {
  if (e == CUBLAS_STATUS_SUCCESS) return GANFW_OK;
  char lib[256];
  snprintf(lib, sizeof lib, "%s (%s)", cublasGetStatusName(e), cublasGetStatusString(e));
  return ganfw_cuda_fail(cs, e == CUBLAS_STATUS_ALLOC_FAILED ? GANFW_ERR_OOM : GANFW_ERR_BACKEND,
                         call, lib, file, line);
}

ganfw_status ganfw_cuda_check_dnn(ganfw_cuda_state *cs, cudnnStatus_t e, const char *call,
                                  const char *file, int line) {
  if (e == CUDNN_STATUS_SUCCESS) return GANFW_OK;
  char lib[512], detail[256] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  snprintf(lib, sizeof lib, "%s%s%s", cudnnGetErrorString(e), detail[0] ? ": " : "", detail);
  return ganfw_cuda_fail(cs, e == CUDNN_STATUS_ALLOC_FAILED ? GANFW_ERR_OOM : GANFW_ERR_BACKEND,
                         call, lib, file, line);
}

ganfw_status ganfw_cuda_pending(ganfw_cuda_state *cs) {
  if (cs->error != GANFW_OK) return ganfw_error_set(cs->error, "%s", cs->error_msg);
  return GANFW_OK;
}

ganfw_status ganfw_cuda_op_status(ganfw_cuda_state *cs, ganfw_status st) {
  if (st != GANFW_OK) return st;
  if ((st = ganfw_cuda_pending(cs)) != GANFW_OK) return st;
  return CUDA_CHECK(cs, cudaPeekAtLastError());
}

void ganfw_cuda_clear_error(ganfw_backend *be) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  cs->error = GANFW_OK;
  cs->error_msg[0] = '\0';
  (void)cudaGetLastError(); /* forgets a non-sticky launch error */
}

/* --- native 16-bit compute --------------------------------------------------------------- */

ganfw_status ganfw_cuda_lp_begin(ganfw_cuda_state *cs, const ganfw_op *op) {
  cs->op = NULL;
  if (op->dtype == GANFW_DTYPE_F32) return GANFW_OK;
  if (op->dtype == GANFW_DTYPE_F16 || op->dtype == GANFW_DTYPE_BF16) {
    cs->op = ganfw_op_name(op->kind);
    cs->op_dtype = op->dtype;
    return GANFW_OK;
  }
  char why[128];
  snprintf(why, sizeof why, "dtype %d is none of GANFW_DTYPE_F32, _F16 and _BF16", (int)op->dtype);
  return ganfw_cuda_fail(cs, GANFW_ERR_INVALID_ARG, ganfw_op_name(op->kind), why, __FILE__,
                         __LINE__);
}

/* The groups of GANFW_LP_* run natively in dtype. f16 (cuDNN's PSEUDO_HALF_CONFIG: half data,
 * float compute; cuBLAS's CUDA_R_16F with CUBLAS_COMPUTE_32F): every group. bf16 needs sm_80 or
 * newer (cuDNN's PSEUDO_BFLOAT16_CONFIG is documented for compute capability 8.0 and later),
 * and leaves out BatchNorm, whose legacy cuDNN entries we do not rely on for bfloat16 data: the
 * layer then converts around the f32 BatchNorm. */
static uint32_t lp_groups(const ganfw_cuda_state *cs, int32_t dtype) {
  if (dtype == GANFW_DTYPE_F16)
    return GANFW_LP_CONV | GANFW_LP_LINEAR | GANFW_LP_BATCHNORM | GANFW_LP_ACT;
  if (dtype == GANFW_DTYPE_BF16 && cs->info.cc_major >= 8)
    return GANFW_LP_CONV | GANFW_LP_LINEAR | GANFW_LP_ACT;
  return 0;
}

/* --- the table ------------------------------------------------------------------------ */

static void cuda_set_threads(ganfw_backend *be, int threads) {
  (void)be;
  (void)threads; /* host threads do not apply; the GPU's are chosen per kernel */
}

static const ganfw_op_fn cuda_ops[GANFW_OP_COUNT] = {
#define GANFW_CUDA_OP_ENTRY_(K, name) [GANFW_OP_##K] = ganfw_cuda_op_##name,
    GANFW_OP_LIST(GANFW_CUDA_OP_ENTRY_)
#undef GANFW_CUDA_OP_ENTRY_
};

/* vt->supports: every op in f32; in f16 and bf16 the casts, the ops that only move elements
 * (ganfw_op_any_dtype) and the groups lp_groups names.
 * No question a flag asks is answered yes: BatchNorm's backward does not write dx over dy
 * (GANFW_OP_IN_PLACE), dx gets its own tensor. */
static int32_t cuda_supports(ganfw_backend *be, const ganfw_op *op) {
  return ganfw_op_supported(op, lp_groups(ganfw_cuda_state_of(be), op->dtype), 0);
}

/* vt->workspace: a convolution's (forward and backward alike), planned in op's dtype; 0 for
 * every other op and for one the backend does not run. */
static size_t cuda_workspace(ganfw_backend *be, const ganfw_op *op) {
  if (!cuda_supports(be, op)) return 0;
  switch (op->kind) {
  case GANFW_OP_CONV2D_FORWARD:
  case GANFW_OP_CONV2D_BACKWARD:
    return ganfw_cuda_conv2d_workspace(be, op->dtype, &op->shape.conv);
  case GANFW_OP_CONVT2D_FORWARD:
  case GANFW_OP_CONVT2D_BACKWARD:
    return ganfw_cuda_convt2d_workspace(be, op->dtype, &op->shape.convt);
  default:
    return 0;
  }
}

/* vt->run: the op's own status, else the failure the device recorded before (it stays), else
 * a launch error the runtime still holds (what the executor's last_error poll used to find). */
static ganfw_status cuda_run(ganfw_backend *be, ganfw_op *op) {
  return ganfw_cuda_op_status(ganfw_cuda_state_of(be), ganfw_op_dispatch(cuda_ops, be, op));
}

static const ganfw_backend_vt cuda_vt = {
    .name = "cuda",
    .raw_alloc = ganfw_cuda_raw_alloc,
    .raw_free = ganfw_cuda_raw_free,
    .capacity = ganfw_cuda_capacity,
    .copy_h2d = ganfw_cuda_copy_h2d,
    .copy_d2h = ganfw_cuda_copy_d2h,
    .copy_d2d = ganfw_cuda_copy_d2d,
    .synchronize = ganfw_cuda_synchronize,
    .set_threads = cuda_set_threads,
    .host_alloc_pinned = ganfw_cuda_host_alloc_pinned,
    .host_free_pinned = ganfw_cuda_host_free_pinned,
    .copy_h2d_async = ganfw_cuda_copy_h2d_async,
    .supports = cuda_supports,
    .workspace = cuda_workspace,
    .run = cuda_run,
};

/* --- devices and the backend ------------------------------------------------------------ */

int ganfw_cuda_device_count(char *why, size_t n) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* not sticky: leave no trace for later calls */
    count = 0;
    int rt = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    if (why && n && e == cudaErrorInsufficientDriver)
      snprintf(why, n,
               "%s: no NVIDIA driver is loaded, or it is older than this build's CUDA %d.%d",
               cudaGetErrorName(e), rt / 1000, rt % 1000 / 10);
    else if (why && n && e == cudaErrorNoDevice)
      snprintf(why, n, "%s: the driver sees no GPU (is CUDA_VISIBLE_DEVICES empty?)",
               cudaGetErrorName(e));
    else if (why && n)
      snprintf(why, n, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
  } else if (count == 0 && why && n) {
    snprintf(why, n, "the driver reports no CUDA device");
  }
  return count;
}

static ganfw_cuda_state cuda_state;
static ganfw_backend cuda_backend = {.vt = &cuda_vt, .impl = &cuda_state};
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static ganfw_status cuda_init_status = GANFW_ERR_INTERNAL;
static char cuda_init_msg[1024];

/* Creates the context and handles on device 0 and measures the memory they hold. */
static ganfw_status cuda_init(ganfw_cuda_state *cs) {
  char why[256];
  if (ganfw_cuda_device_count(why, sizeof why) <= 0)
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED, "no CUDA device is visible (%s)", why);
  cs->device = 0;
  cs->workspace_limit = (size_t)1 << 30;
  cs->bn_eps = 1e-5;
  ganfw_status st;
  struct cudaDeviceProp prop;
  if ((st = CUDA_CHECK(cs, cudaSetDevice(cs->device))) ||
      (st = CUDA_CHECK(cs, cudaGetDeviceProperties(&prop, cs->device))) ||
      (st = CUDA_CHECK(cs, cudaFree(NULL))) || /* creates the context now */
      (st = CUDA_CHECK(cs, cudaStreamCreateWithFlags(&cs->stream, cudaStreamNonBlocking))) ||
      (st = CUBLAS_CHECK(cs, cublasCreate(&cs->cublas))) ||
      (st = CUBLAS_CHECK(cs, cublasSetStream(cs->cublas, cs->stream))) ||
      (st = CUBLAS_CHECK(cs, cublasSetMathMode(cs->cublas, CUBLAS_DEFAULT_MATH))) ||
      (st = CUDNN_CHECK(cs, cudnnCreate(&cs->cudnn))) ||
      (st = CUDNN_CHECK(cs, cudnnSetStream(cs->cudnn, cs->stream))) ||
      (st = CUDA_CHECK(cs, cudaMalloc((void **)&cs->reduce,
                                      (GANFW_CUDA_REDUCE_PARTIALS + 2) * sizeof(double)))))
    return st;
  size_t free_bytes = 0, total = 0;
  if ((st = CUDA_CHECK(cs, cudaMemGetInfo(&free_bytes, &total)))) return st;
  ganfw_cuda_info *in = &cs->info;
  in->device = cs->device;
  in->cc_major = prop.major;
  in->cc_minor = prop.minor;
  in->sm_count = prop.multiProcessorCount;
  snprintf(in->name, sizeof in->name, "%s", prop.name);
  in->total_bytes = total;
  in->context_bytes = total - free_bytes;
  in->cudnn_version = (int32_t)cudnnGetVersion();
  int rt = 0;
  if ((st = CUDA_CHECK(cs, cudaRuntimeGetVersion(&rt)))) return st;
  in->runtime_version = rt;
  return GANFW_OK;
}

static void cuda_init_once(void) {
  cuda_init_status = cuda_init(&cuda_state);
  if (cuda_init_status != GANFW_OK)
    snprintf(cuda_init_msg, sizeof cuda_init_msg, "%s", ganfw_error_message());
  cuda_state.error = GANFW_OK; /* an init failure is reported by every call below instead */
}

ganfw_backend *ganfw_cuda_backend(void) {
  pthread_once(&cuda_once, cuda_init_once);
  if (cuda_init_status != GANFW_OK) {
    ganfw_error_set(cuda_init_status, "%s", cuda_init_msg);
    return NULL;
  }
  return &cuda_backend;
}

void ganfw_cuda_get_info(ganfw_backend *be, ganfw_cuda_info *out) {
  *out = ganfw_cuda_state_of(be)->info;
}

void ganfw_cuda_set_cudnn_benchmark(ganfw_backend *be, int32_t on) {
  ganfw_cuda_state_of(be)->cudnn_benchmark = on != 0;
}

void ganfw_cuda_set_workspace_limit(ganfw_backend *be, size_t bytes) {
  ganfw_cuda_state_of(be)->workspace_limit = bytes;
}

ganfw_status ganfw_cuda_scratch(ganfw_cuda_state *cs, int64_t floats, float **out) {
  ganfw_status st;
  *out = NULL;
  if (floats <= cs->scratch_floats) {
    *out = cs->scratch;
    return GANFW_OK;
  }
  int64_t want = cs->scratch_floats ? cs->scratch_floats : 1024;
  while (want < floats) want *= 2;
  float *p = NULL;
  /* the old scratch may still be read by queued work: let it finish first */
  if ((st = CUDA_CHECK(cs, cudaStreamSynchronize(cs->stream))) ||
      (st = CUDA_CHECK(cs, cudaMalloc((void **)&p, (size_t)want * sizeof(float)))))
    return st;
  if (cs->scratch) (void)CUDA_CHECK(cs, cudaFree(cs->scratch));
  cs->scratch = p;
  cs->scratch_floats = want;
  *out = p;
  return GANFW_OK;
}
