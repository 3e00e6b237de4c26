/* The CUDA backend: device discovery, the process's backend on device 0 (context, one
 * non-blocking compute stream, cuBLAS and cuDNN handles bound to it), the op table with the
 * 16-bit groups it runs natively (lp_ops), and the error record behind the check macros
 * (check.h). The ops live beside this file: memory.c, gemm.c, conv.c, batchnorm.c, and ops.c
 * over the kernels of the .cu files. */
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

ganfw_status ganfw_cuda_fail(ganfw_cuda_state *cs, ganfw_status code, const char *call,
                             const char *lib_error, const char *file, int line) {
  char msg[sizeof cs->error_msg], in[96] = "";
  if (cs && cs->op)
    snprintf(in, sizeof in, " in %s (%s)", cs->op, ganfw_cuda_dtype_name(cs->op_dtype));
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

/* vt->last_error: the first failure of a void op, recorded again as this thread's error;
 * else the runtime's pending launch error, if any. */
static ganfw_status cuda_last_error(ganfw_backend *be) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (cs->error != GANFW_OK) return ganfw_error_set(cs->error, "%s", cs->error_msg);
  return CUDA_CHECK(cs, cudaPeekAtLastError());
}

void ganfw_cuda_clear_error(ganfw_backend *be) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  cs->error = GANFW_OK;
  cs->error_msg[0] = '\0';
  (void)cudaGetLastError(); /* forgets a non-sticky launch error */
}

/* --- native 16-bit compute --------------------------------------------------------------- */

const char *ganfw_cuda_dtype_name(int32_t dtype) {
  return dtype == GANFW_DTYPE_F16 ? "f16" : dtype == GANFW_DTYPE_BF16 ? "bf16" : "?";
}

int ganfw_cuda_lp_begin(ganfw_cuda_state *cs, const char *op, int32_t dtype) {
  cs->op = op;
  cs->op_dtype = dtype;
  if (dtype == GANFW_DTYPE_F16 || dtype == GANFW_DTYPE_BF16) return 1;
  char why[96];
  snprintf(why, sizeof why, "dtype %d is neither GANFW_DTYPE_F16 nor GANFW_DTYPE_BF16", (int)dtype);
  ganfw_cuda_fail(cs, GANFW_ERR_INVALID_ARG, "a 16-bit entry", why, __FILE__, __LINE__);
  cs->op = NULL;
  return 0;
}

/* vt->lp_ops. f16 (cuDNN's PSEUDO_HALF_CONFIG: half data, float compute; cuBLAS's
 * CUDA_R_16F with CUBLAS_COMPUTE_32F): every group. bf16 needs sm_80 or newer (cuDNN's
 * PSEUDO_BFLOAT16_CONFIG is documented for compute capability 8.0 and later), and leaves
 * out BatchNorm, whose legacy cuDNN entries we do not rely on for bfloat16 data: the layer
 * then converts around the f32 BatchNorm. */
uint32_t ganfw_cuda_lp_ops(ganfw_backend *be, int32_t dtype) {
  const ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
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
    .gemm = ganfw_cuda_gemm,
    .conv2d_workspace = ganfw_cuda_conv2d_workspace,
    .conv2d_forward = ganfw_cuda_conv2d_forward,
    .conv2d_backward = ganfw_cuda_conv2d_backward,
    .convt2d_workspace = ganfw_cuda_convt2d_workspace,
    .convt2d_forward = ganfw_cuda_convt2d_forward,
    .convt2d_backward = ganfw_cuda_convt2d_backward,
    .linear_forward = ganfw_cuda_linear_forward,
    .linear_backward = ganfw_cuda_linear_backward,
    .batchnorm2d_forward_train = ganfw_cuda_batchnorm2d_forward_train,
    .batchnorm2d_forward_eval = ganfw_cuda_batchnorm2d_forward_eval,
    .batchnorm2d_backward = ganfw_cuda_batchnorm2d_backward,
    .act_forward = ganfw_cuda_act_forward,
    .act_backward = ganfw_cuda_act_backward,
    .maxpool2d_forward = ganfw_cuda_maxpool2d_forward,
    .maxpool2d_backward = ganfw_cuda_maxpool2d_backward,
    .avgpool2d_forward = ganfw_cuda_avgpool2d_forward,
    .avgpool2d_backward = ganfw_cuda_avgpool2d_backward,
    .dropout_forward = ganfw_cuda_dropout_forward,
    .dropout_backward = ganfw_cuda_dropout_backward,
    .bce_logits_forward = ganfw_cuda_bce_logits_forward,
    .bce_logits_backward = ganfw_cuda_bce_logits_backward,
    .softmax_xent_forward = ganfw_cuda_softmax_xent_forward,
    .softmax_xent_backward = ganfw_cuda_softmax_xent_backward,
    .fill = ganfw_cuda_fill,
    .scale = ganfw_cuda_scale,
    .add_scalar = ganfw_cuda_add_scalar,
    .add = ganfw_cuda_add,
    .axpy = ganfw_cuda_axpy,
    .mul = ganfw_cuda_mul,
    .addcmul = ganfw_cuda_addcmul,
    .addcdiv = ganfw_cuda_addcdiv,
    .sqrt = ganfw_cuda_sqrt,
    .lerp = ganfw_cuda_lerp,
    .maximum = ganfw_cuda_maximum,
    .sum = ganfw_cuda_sum,
    .sumsq = ganfw_cuda_sumsq,
    .nonfinite = ganfw_cuda_nonfinite,
    .nonfinite_many = ganfw_cuda_nonfinite_many,
    .f32_to_f16 = ganfw_cuda_f32_to_f16,
    .f16_to_f32 = ganfw_cuda_f16_to_f32,
    .f32_to_bf16 = ganfw_cuda_f32_to_bf16,
    .bf16_to_f32 = ganfw_cuda_bf16_to_f32,
    .rng_uniform = ganfw_cuda_rng_uniform,
    .rng_normal = ganfw_cuda_rng_normal,
    .last_error = cuda_last_error,
    .host_alloc_pinned = ganfw_cuda_host_alloc_pinned,
    .host_free_pinned = ganfw_cuda_host_free_pinned,
    .copy_h2d_async = ganfw_cuda_copy_h2d_async,
    .lp_ops = ganfw_cuda_lp_ops,
    .conv2d_workspace_lp = ganfw_cuda_conv2d_workspace_lp,
    .conv2d_forward_lp = ganfw_cuda_conv2d_forward_lp,
    .conv2d_backward_lp = ganfw_cuda_conv2d_backward_lp,
    .convt2d_workspace_lp = ganfw_cuda_convt2d_workspace_lp,
    .convt2d_forward_lp = ganfw_cuda_convt2d_forward_lp,
    .convt2d_backward_lp = ganfw_cuda_convt2d_backward_lp,
    .linear_forward_lp = ganfw_cuda_linear_forward_lp,
    .linear_backward_lp = ganfw_cuda_linear_backward_lp,
    .batchnorm2d_forward_train_lp = ganfw_cuda_batchnorm2d_forward_train_lp,
    .batchnorm2d_forward_eval_lp = ganfw_cuda_batchnorm2d_forward_eval_lp,
    .batchnorm2d_backward_lp = ganfw_cuda_batchnorm2d_backward_lp,
    .act_forward_lp = ganfw_cuda_act_forward_lp,
    .act_backward_lp = ganfw_cuda_act_backward_lp,
    .upsample2d_forward = ganfw_cuda_upsample2d_forward,
    .upsample2d_backward = ganfw_cuda_upsample2d_backward,
    .groupnorm_forward = ganfw_cuda_groupnorm_forward,
    .groupnorm_backward = ganfw_cuda_groupnorm_backward,
    .embedding_forward = ganfw_cuda_embedding_forward,
    .embedding_backward = ganfw_cuda_embedding_backward,
    .transpose01 = ganfw_cuda_transpose01,
    .unary = ganfw_cuda_unary,
    .binary = ganfw_cuda_binary,
    .reduce_sum = ganfw_cuda_reduce_sum,
    .channel_affine = ganfw_cuda_channel_affine,
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

float *ganfw_cuda_scratch(ganfw_cuda_state *cs, int64_t floats) {
  if (floats <= cs->scratch_floats) return cs->scratch;
  int64_t want = cs->scratch_floats ? cs->scratch_floats : 1024;
  while (want < floats) want *= 2;
  float *p = NULL;
  /* the old scratch may still be read by queued work: let it finish first */
  if (CUDA_CHECK(cs, cudaStreamSynchronize(cs->stream))) return NULL;
  if (CUDA_CHECK(cs, cudaMalloc((void **)&p, (size_t)want * sizeof(float)))) return NULL;
  if (cs->scratch) (void)CUDA_CHECK(cs, cudaFree(cs->scratch));
  cs->scratch = p;
  cs->scratch_floats = want;
  return p;
}
