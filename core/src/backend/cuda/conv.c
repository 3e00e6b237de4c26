/* conv2d and conv_transpose2d on the GPU through cuDNN 9's convolution API:
 *   conv2d      x [N,C,H,W] * w [K,C,R,S] (+ b [K]) -> y [N,K,P,Q]
 *     forward = cudnnConvolutionForward; backward = BackwardData (dx), BackwardFilter (dw),
 *     BackwardBias (db); forward's bias is cudnnAddTensor.
 *   convT       x [N,C,H,W], w [C,K,R,S] (+ b [K]) -> y [N,K,P,Q], the adjoint of the conv2d
 *     from y's shape to x's shape (core/src/backend/cpu/conv_transpose2d.c), so its forward is that
 *     conv's BackwardData, its dx that conv's Forward, its dw that conv's BackwardFilter with
 *     x and dy swapped.
 * Each (shape, conv or convT, data type) gets one plan, made on first use and kept: the
 * descriptors and the three algorithms, chosen by cuDNN's heuristics (cudnnGet*_v7: the
 * first usable one whose workspace fits), or with device.cudnn_benchmark by timing every
 * algorithm once (cudnnFind*AlgorithmEx, on scratch buffers freed right after). Benchmark
 * mode weighs memory as much as speed: among the usable results whose workspace fits, t0 is
 * the fastest time, and the plan takes the smallest workspace among those within 1.10 t0
 * (ties: the faster). The workspace functions plan the shape and return the largest of
 * the three algorithms' workspaces, which the layer takes from the allocator (category
 * workspace); no algorithm needing more than the backend's workspace limit is chosen.
 * f32 plans use FP32 math only (CUDNN_FMA_MATH, no TF32, no tensor-op algorithms), as the
 * CPU.
 * 16-bit plans (ops in f16 or bf16, cuDNN's PSEUDO_HALF_CONFIG / PSEUDO_BFLOAT16_CONFIG): x,
 * y, w in CUDNN_DATA_HALF or _BFLOAT16, compute type CUDNN_DATA_FLOAT, tensor-op math allowed;
 * each pass runs with the math type its algorithm was found with. cuDNN writes dw in x's
 * type, so the 16-bit workspace is the cuDNN workspace (aligned up to 256 bytes) followed by
 * a 16-bit dw buffer, which an own kernel then stores into or adds to the f32 dw. The bias
 * (y += b, db = sums of dy) is own kernels, in f32 from the 16-bit values. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "base/error.h"

/* The three passes of a plan. */
enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_FILTER, PASS_COUNT };

struct ganfw_conv_plan {
  int transposed;
  int benchmark;                      /* planned with cudnnFind (1) or the heuristics (0) */
  int32_t dtype;                      /* GANFW_DTYPE_F32, _F16 or _BF16 */
  ganfw_conv2d_shape s;               /* the conv2d (for a convT: the conv it is the adjoint of) */
  cudnnTensorDescriptor_t x, y, bias; /* bias: f32 plans only */
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  int algo[PASS_COUNT];             /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
  cudnnMathType_t math[PASS_COUNT]; /* the math type each pass runs with */
  cudnnMathType_t math_set;         /* the one conv holds now */
  size_t ws;                        /* bytes: the largest of the three algorithms' workspaces */
};

/* The conv2d a convT is the adjoint of (as core/src/backend/cpu/conv_transpose2d.c). */
static ganfw_conv2d_shape convt_as_conv(const ganfw_convt2d_shape *s) {
  ganfw_conv2d_shape c = {.N = s->N,
                          .C = s->K,
                          .H = s->P,
                          .W = s->Q,
                          .K = s->C,
                          .R = s->R,
                          .S = s->S,
                          .stride_h = s->stride_h,
                          .stride_w = s->stride_w,
                          .pad_h = s->pad_h,
                          .pad_w = s->pad_w,
                          .P = s->H,
                          .Q = s->W};
  return c;
}

static void plan_destroy(ganfw_cuda_state *cs, ganfw_conv_plan *p) {
  if (!p) return;
  if (p->x) (void)CUDNN_CHECK(cs, cudnnDestroyTensorDescriptor(p->x));
  if (p->y) (void)CUDNN_CHECK(cs, cudnnDestroyTensorDescriptor(p->y));
  if (p->bias) (void)CUDNN_CHECK(cs, cudnnDestroyTensorDescriptor(p->bias));
  if (p->w) (void)CUDNN_CHECK(cs, cudnnDestroyFilterDescriptor(p->w));
  if (p->conv) (void)CUDNN_CHECK(cs, cudnnDestroyConvolutionDescriptor(p->conv));
  free(p);
}

/* cuDNN takes int dimensions. */
static int shape_fits(const ganfw_conv2d_shape *s) {
  const int64_t d[] = {s->N, s->C, s->H,        s->W,        s->K,     s->R,    s->S,
                       s->P, s->Q, s->stride_h, s->stride_w, s->pad_h, s->pad_w};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
    if (d[i] < 0 || d[i] > INT_MAX) return 0;
  return 1;
}

/* Bytes an element of a plan's data type takes. */
static size_t elem_bytes(int32_t dtype) {
  return dtype == GANFW_DTYPE_F32 ? 4 : 2;
}

static int64_t weight_numel(const ganfw_conv2d_shape *s) {
  return s->K * s->C * s->R * s->S;
}

/* The math type a plan's descriptor starts with and its fallback algorithms run with. */
static cudnnMathType_t base_math(int32_t dtype) {
  return dtype == GANFW_DTYPE_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

/* A perf result a plan may take: it ran, and its math suits the data. f32 plans exclude
 * the tensor-op math types (TF32 or f16 tensor cores on f32 data: not for us); 16-bit plans
 * take tensor-op math but not the one that may also convert (it concerns f32 data). */
static int usable(const ganfw_conv_plan *p, cudnnStatus_t status, cudnnMathType_t math) {
  if (status != CUDNN_STATUS_SUCCESS) return 0;
  if (p->dtype == GANFW_DTYPE_F32)
    return math != CUDNN_TENSOR_OP_MATH && math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  return math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/* Sets the descriptor's math type (16-bit plans; an f32 plan keeps CUDNN_FMA_MATH). */
static ganfw_status set_math(ganfw_cuda_state *cs, ganfw_conv_plan *p, cudnnMathType_t m) {
  if (p->dtype == GANFW_DTYPE_F32 || p->math_set == m) return GANFW_OK;
  ganfw_status st = CUDNN_CHECK(cs, cudnnSetConvolutionMathType(p->conv, m));
  if (st == GANFW_OK) p->math_set = m;
  return st;
}

/* --- algorithm choice ------------------------------------------------------------------ */

/* Scratch operands for cudnnFind*AlgorithmEx (contents zero, elements of the plan's type)
 * and the largest workspace up to the limit that cudaMalloc grants. */
typedef struct find_bufs {
  void *x, *w, *y;
  void *ws;
  size_t ws_bytes;
} find_bufs;

static void find_bufs_free(ganfw_cuda_state *cs, find_bufs *b) {
  if (b->x) (void)CUDA_CHECK(cs, cudaFree(b->x));
  if (b->w) (void)CUDA_CHECK(cs, cudaFree(b->w));
  if (b->y) (void)CUDA_CHECK(cs, cudaFree(b->y));
  if (b->ws) (void)CUDA_CHECK(cs, cudaFree(b->ws));
}

static ganfw_status find_bufs_alloc(ganfw_cuda_state *cs, const ganfw_conv2d_shape *s,
                                    int32_t dtype, find_bufs *b) {
  memset(b, 0, sizeof *b);
  const size_t e = elem_bytes(dtype);
  const size_t nx = (size_t)(s->N * s->C * s->H * s->W) * e;
  const size_t nw = (size_t)weight_numel(s) * e;
  const size_t ny = (size_t)(s->N * s->K * s->P * s->Q) * e;
  ganfw_status st;
  if ((st = CUDA_CHECK(cs, cudaMalloc(&b->x, nx))) ||
      (st = CUDA_CHECK(cs, cudaMalloc(&b->w, nw))) ||
      (st = CUDA_CHECK(cs, cudaMalloc(&b->y, ny))) ||
      (st = CUDA_CHECK(cs, cudaMemsetAsync(b->x, 0, nx, cs->stream))) ||
      (st = CUDA_CHECK(cs, cudaMemsetAsync(b->w, 0, nw, cs->stream))) ||
      (st = CUDA_CHECK(cs, cudaMemsetAsync(b->y, 0, ny, cs->stream)))) {
    find_bufs_free(cs, b);
    return st;
  }
  /* As much workspace as the limit allows and the device grants (halving on refusal). */
  for (size_t want = cs->workspace_limit; want >= ((size_t)1 << 20); want /= 2) {
    if (cudaMalloc(&b->ws, want) == cudaSuccess) {
      b->ws_bytes = want;
      break;
    }
    (void)cudaGetLastError(); /* an out-of-memory answer here is expected, not an error */
    b->ws = NULL;
  }
  return GANFW_OK;
}

/* One perf result of any of the three passes. */
typedef struct conv_cand {
  int algo;
  cudnnStatus_t status;
  cudnnMathType_t math;
  float time; /* ms; meaningful only from cudnnFind */
} conv_cand;

#define CAND_MAX 16
_Static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= CAND_MAX &&
                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= CAND_MAX &&
                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= CAND_MAX,
               "CAND_MAX holds every algorithm");

/* The perf results of `pass`, best first: timed on b's buffers (benchmark) or cuDNN's
 * heuristics (b NULL). */
static ganfw_status candidates(ganfw_cuda_state *cs, ganfw_conv_plan *p, int pass,
                               const find_bufs *b, conv_cand *c, int *n) {
  ganfw_status st;
  *n = 0;
  if ((st = set_math(cs, p, base_math(p->dtype)))) return st;
  if (pass == PASS_FWD) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (b)
      st = CUDNN_CHECK(cs, cudnnFindConvolutionForwardAlgorithmEx(
                               cs->cudnn, p->x, b->x, p->w, b->w, p->conv, p->y, b->y,
                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, n, perf, b->ws, b->ws_bytes));
    else
      st = CUDNN_CHECK(
          cs, cudnnGetConvolutionForwardAlgorithm_v7(cs->cudnn, p->x, p->w, p->conv, p->y,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, n, perf));
    for (int i = 0; st == GANFW_OK && i < *n; i++)
      c[i] = (conv_cand){perf[i].algo, perf[i].status, perf[i].mathType, perf[i].time};
  } else if (pass == PASS_BWD_DATA) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (b)
      st = CUDNN_CHECK(cs, cudnnFindConvolutionBackwardDataAlgorithmEx(
                               cs->cudnn, p->w, b->w, p->y, b->y, p->conv, p->x, b->x,
                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, n, perf, b->ws, b->ws_bytes));
    else
      st = CUDNN_CHECK(cs, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                               cs->cudnn, p->w, p->y, p->conv, p->x,
                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, n, perf));
    for (int i = 0; st == GANFW_OK && i < *n; i++)
      c[i] = (conv_cand){perf[i].algo, perf[i].status, perf[i].mathType, perf[i].time};
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    if (b)
      st = CUDNN_CHECK(cs,
                       cudnnFindConvolutionBackwardFilterAlgorithmEx(
                           cs->cudnn, p->x, b->x, p->y, b->y, p->conv, p->w, b->w,
                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, n, perf, b->ws, b->ws_bytes));
    else
      st = CUDNN_CHECK(cs, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                               cs->cudnn, p->x, p->y, p->conv, p->w,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, n, perf));
    for (int i = 0; st == GANFW_OK && i < *n; i++)
      c[i] = (conv_cand){perf[i].algo, perf[i].status, perf[i].mathType, perf[i].time};
  }
  if (st != GANFW_OK) *n = 0;
  return st;
}

/* The exact workspace of `algo` in `pass` under math type m (set on the descriptor first);
 * cuDNN's status, not recorded: a candidate whose size cuDNN cannot tell is skipped. */
static cudnnStatus_t workspace_of(ganfw_cuda_state *cs, ganfw_conv_plan *p, int pass, int algo,
                                  cudnnMathType_t m, size_t *sz) {
  if (set_math(cs, p, m) != GANFW_OK) return CUDNN_STATUS_BAD_PARAM;
  if (pass == PASS_FWD)
    return cudnnGetConvolutionForwardWorkspaceSize(cs->cudnn, p->x, p->w, p->conv, p->y,
                                                   (cudnnConvolutionFwdAlgo_t)algo, sz);
  if (pass == PASS_BWD_DATA)
    return cudnnGetConvolutionBackwardDataWorkspaceSize(cs->cudnn, p->w, p->y, p->conv, p->x,
                                                        (cudnnConvolutionBwdDataAlgo_t)algo, sz);
  return cudnnGetConvolutionBackwardFilterWorkspaceSize(cs->cudnn, p->x, p->y, p->conv, p->w,
                                                        (cudnnConvolutionBwdFilterAlgo_t)algo, sz);
}

/* Chooses the algorithm of `pass` among the usable candidates whose exact workspace fits
 * `limit`: with the heuristics the first (cuDNN's best); timed, the smallest workspace
 * within 1.10 x the fastest time (see the file's head). Failing all, a fallback that runs
 * any shape (its workspace is asked of cuDNN, errors recorded). */
static ganfw_status choose(ganfw_cuda_state *cs, ganfw_conv_plan *p, int pass, const find_bufs *b,
                           size_t limit, size_t *ws) {
  conv_cand c[CAND_MAX];
  size_t sz[CAND_MAX];
  int ok[CAND_MAX], n = 0;
  ganfw_status st = candidates(cs, p, pass, b, c, &n);
  if (st != GANFW_OK) return st;
  float t0 = -1.0f; /* the fastest fitting time, when timed */
  int pick = -1;
  for (int i = 0; i < n; i++) {
    ok[i] = usable(p, c[i].status, c[i].math) &&
            workspace_of(cs, p, pass, c[i].algo, c[i].math, &sz[i]) == CUDNN_STATUS_SUCCESS &&
            sz[i] <= limit;
    if (!ok[i]) continue;
    if (pick < 0) pick = i; /* heuristics: the first that fits */
    if (b && c[i].time >= 0.0f && (t0 < 0.0f || c[i].time < t0)) t0 = c[i].time;
  }
  if (b && t0 >= 0.0f) {
    /* Benchmark: least workspace within 10% of the fastest (ties: the faster). */
    pick = -1;
    for (int i = 0; i < n; i++) {
      if (!ok[i] || c[i].time < 0.0f || c[i].time > 1.10f * t0) continue;
      if (pick < 0 || sz[i] < sz[pick] || (sz[i] == sz[pick] && c[i].time < c[pick].time)) pick = i;
    }
  }
  if (pick >= 0) {
    p->algo[pass] = c[pick].algo;
    p->math[pass] = p->dtype == GANFW_DTYPE_F32 ? base_math(p->dtype) : c[pick].math;
    *ws = sz[pick];
    return GANFW_OK;
  }
  /* IMPLICIT_GEMM needs no workspace; ALGO_1 of the backward passes runs anything */
  p->algo[pass] = pass == PASS_FWD        ? (int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM
                  : pass == PASS_BWD_DATA ? (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_1
                                          : (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  p->math[pass] = base_math(p->dtype);
  if ((st = set_math(cs, p, p->math[pass]))) return st;
  if (pass == PASS_FWD)
    return CUDNN_CHECK(
        cs, cudnnGetConvolutionForwardWorkspaceSize(cs->cudnn, p->x, p->w, p->conv, p->y,
                                                    (cudnnConvolutionFwdAlgo_t)p->algo[pass], ws));
  if (pass == PASS_BWD_DATA)
    return CUDNN_CHECK(cs, cudnnGetConvolutionBackwardDataWorkspaceSize(
                               cs->cudnn, p->w, p->y, p->conv, p->x,
                               (cudnnConvolutionBwdDataAlgo_t)p->algo[pass], ws));
  return CUDNN_CHECK(cs, cudnnGetConvolutionBackwardFilterWorkspaceSize(
                             cs->cudnn, p->x, p->y, p->conv, p->w,
                             (cudnnConvolutionBwdFilterAlgo_t)p->algo[pass], ws));
}

/* --- plans ----------------------------------------------------------------------------- */

static ganfw_status plan_make(ganfw_cuda_state *cs, const ganfw_conv2d_shape *s,
                              ganfw_conv_plan *p) {
  ganfw_status st;
  const int N = (int)s->N, C = (int)s->C, H = (int)s->H, W = (int)s->W, K = (int)s->K;
  const int bias_c = p->transposed ? C : K; /* the bias follows the layer's output channels */
  const cudnnDataType_t t = ganfw_cuda_dnn_type(p->dtype);
  if ((st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&p->x))) ||
      (st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&p->y))) ||
      (st = CUDNN_CHECK(cs, cudnnCreateFilterDescriptor(&p->w))) ||
      (st = CUDNN_CHECK(cs, cudnnCreateConvolutionDescriptor(&p->conv))) ||
      (st = CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, t, N, C, H, W))) ||
      (st = CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, t, N, K, (int)s->P,
                                                       (int)s->Q))) ||
      (st = CUDNN_CHECK(cs, cudnnSetFilter4dDescriptor(p->w, t, CUDNN_TENSOR_NCHW, K, C, (int)s->R,
                                                       (int)s->S))) ||
      /* compute in f32 for every data type (PSEUDO_HALF / PSEUDO_BFLOAT16 for 16-bit) */
      (st = CUDNN_CHECK(cs, cudnnSetConvolution2dDescriptor(p->conv, (int)s->pad_h, (int)s->pad_w,
                                                            (int)s->stride_h, (int)s->stride_w, 1,
                                                            1, CUDNN_CROSS_CORRELATION,
                                                            CUDNN_DATA_FLOAT))) ||
      (st = CUDNN_CHECK(cs, cudnnSetConvolutionMathType(p->conv, base_math(p->dtype)))))
    return st;
  p->math_set = base_math(p->dtype);
  /* cudnnAddTensor and BackwardBias (f32 only; 16-bit plans add and sum with own kernels) */
  if (p->dtype == GANFW_DTYPE_F32 &&
      ((st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&p->bias))) ||
       (st = CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW,
                                                        CUDNN_DATA_FLOAT, 1, bias_c, 1, 1)))))
    return st;
  int on, ok, op, oq;
  if ((st = CUDNN_CHECK(
           cs, cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &ok, &op, &oq))))
    return st;
  if (on != N || ok != K || op != s->P || oq != s->Q)
    return ganfw_cuda_fail(cs, GANFW_ERR_INTERNAL, "cudnnGetConvolution2dForwardOutputDim",
                           "cuDNN's output size differs from ganfw_conv2d_shape_init's", __FILE__,
                           __LINE__);
  find_bufs bufs, *b = NULL;
  if (cs->cudnn_benchmark) {
    if ((st = find_bufs_alloc(cs, s, p->dtype, &bufs)) != GANFW_OK) return st;
    b = &bufs;
  }
  const size_t limit = b ? b->ws_bytes : cs->workspace_limit;
  size_t ws[PASS_COUNT] = {0};
  st = GANFW_OK;
  for (int pass = 0; pass < PASS_COUNT && st == GANFW_OK; pass++)
    st = choose(cs, p, pass, b, limit, &ws[pass]);
  if (b) find_bufs_free(cs, b);
  p->ws = ws[PASS_FWD] > ws[PASS_BWD_DATA] ? ws[PASS_FWD] : ws[PASS_BWD_DATA];
  if (ws[PASS_BWD_FILTER] > p->ws) p->ws = ws[PASS_BWD_FILTER];
  return st;
}

/* The plan of (s, transposed, dtype) in *out, made on first use; the failure, recorded, when it
 * cannot be made (*out NULL). */
static ganfw_status plan_get(ganfw_cuda_state *cs, const ganfw_conv2d_shape *s, int transposed,
                             int32_t dtype, ganfw_conv_plan **out) {
  *out = NULL;
  for (int i = 0; i < cs->n_plans; i++) {
    ganfw_conv_plan *p = cs->plans[i];
    if (p->transposed == transposed && p->dtype == dtype && p->benchmark == cs->cudnn_benchmark &&
        memcmp(&p->s, s, sizeof *s) == 0) {
      *out = p;
      return GANFW_OK;
    }
  }
  if (!shape_fits(s))
    return ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, "a convolution plan",
                           "a size exceeds 2^31-1, which cuDNN cannot take", __FILE__, __LINE__);
  if (cs->n_plans == cs->cap_plans) {
    int cap = cs->cap_plans ? 2 * cs->cap_plans : 16;
    ganfw_conv_plan **grown = realloc(cs->plans, (size_t)cap * sizeof *grown);
    if (!grown)
      return ganfw_cuda_fail(cs, GANFW_ERR_OOM, "realloc", "out of host memory", __FILE__,
                             __LINE__);
    cs->plans = grown;
    cs->cap_plans = cap;
  }
  ganfw_conv_plan *p = calloc(1, sizeof *p);
  if (!p)
    return ganfw_cuda_fail(cs, GANFW_ERR_OOM, "calloc", "out of host memory", __FILE__, __LINE__);
  p->transposed = transposed;
  p->benchmark = cs->cudnn_benchmark;
  p->dtype = dtype;
  p->s = *s;
  ganfw_status st = plan_make(cs, s, p);
  if (st != GANFW_OK) {
    plan_destroy(cs, p);
    return st;
  }
  cs->plans[cs->n_plans++] = p;
  *out = p;
  return GANFW_OK;
}

/* The plan for running with workspace ws in *out; GANFW_ERR_INVALID_ARG (recorded) when the
 * plan needs a workspace and ws is missing. */
static ganfw_status plan_for_run(ganfw_cuda_state *cs, const ganfw_conv2d_shape *s, int transposed,
                                 int32_t dtype, const void *ws, ganfw_conv_plan **out) {
  ganfw_status st = plan_get(cs, s, transposed, dtype, out);
  if (st == GANFW_OK && (*out)->ws && !ws) {
    *out = NULL;
    return ganfw_cuda_fail(cs, GANFW_ERR_INVALID_ARG, "a convolution",
                           "no workspace was given; allocate the bytes the backend's workspace "
                           "entry answers for this op",
                           __FILE__, __LINE__);
  }
  return st;
}

/* Runs pass `pass` with its math type on the descriptor; the cuDNN workspace is ws. */
static ganfw_status run_fwd(ganfw_cuda_state *cs, ganfw_conv_plan *p, const void *x, const void *w,
                            void *y, void *ws) {
  const float one = 1.0f, zero = 0.0f; /* float scaling for f32, half and bfloat16 data */
  ganfw_status st = set_math(cs, p, p->math[PASS_FWD]);
  return st ? st
            : CUDNN_CHECK(cs, cudnnConvolutionForward(cs->cudnn, &one, p->x, x, p->w, w, p->conv,
                                                      (cudnnConvolutionFwdAlgo_t)p->algo[PASS_FWD],
                                                      ws, p->ws, &zero, p->y, y));
}

static ganfw_status run_bwd_data(ganfw_cuda_state *cs, ganfw_conv_plan *p, const void *w,
                                 const void *dy, void *dx, void *ws) {
  const float one = 1.0f, zero = 0.0f;
  ganfw_status st = set_math(cs, p, p->math[PASS_BWD_DATA]);
  return st ? st
            : CUDNN_CHECK(cs, cudnnConvolutionBackwardData(
                                  cs->cudnn, &one, p->w, w, p->y, dy, p->conv,
                                  (cudnnConvolutionBwdDataAlgo_t)p->algo[PASS_BWD_DATA], ws, p->ws,
                                  &zero, p->x, dx));
}

/* dw = beta dw + BackwardFilter(x, dy), dw in the plan's type */
static ganfw_status run_bwd_filter(ganfw_cuda_state *cs, ganfw_conv_plan *p, const void *x,
                                   const void *dy, float beta, void *dw, void *ws) {
  const float one = 1.0f;
  ganfw_status st = set_math(cs, p, p->math[PASS_BWD_FILTER]);
  return st ? st
            : CUDNN_CHECK(cs, cudnnConvolutionBackwardFilter(
                                  cs->cudnn, &one, p->x, x, p->y, dy, p->conv,
                                  (cudnnConvolutionBwdFilterAlgo_t)p->algo[PASS_BWD_FILTER], ws,
                                  p->ws, &beta, p->w, dw));
}

/* --- conv2d ---------------------------------------------------------------------------- */

static ganfw_status conv2d_forward(ganfw_cuda_state *cs, const ganfw_conv2d_shape *s,
                                   const float *x, const float *w, const float *b, float *y,
                                   void *ws) {
  ganfw_conv_plan *p;
  ganfw_status st = plan_for_run(cs, s, 0, GANFW_DTYPE_F32, ws, &p);
  if (st || (st = run_fwd(cs, p, x, w, y, ws))) return st;
  const float one = 1.0f;
  return b ? CUDNN_CHECK(cs, cudnnAddTensor(cs->cudnn, &one, p->bias, b, &one, p->y, y)) : GANFW_OK;
}

static ganfw_status conv2d_backward(ganfw_cuda_state *cs, const ganfw_conv2d_shape *s,
                                    const float *x, const float *w, const float *dy, float *dx,
                                    float *dw, float *db, int accumulate, void *ws) {
  if (!dx && !dw && !db) return GANFW_OK;
  ganfw_conv_plan *p;
  ganfw_status st = plan_for_run(cs, s, 0, GANFW_DTYPE_F32, ws, &p);
  if (st) return st;
  const float one = 1.0f, acc = accumulate ? 1.0f : 0.0f;
  if (db && (st = CUDNN_CHECK(
                 cs, cudnnConvolutionBackwardBias(cs->cudnn, &one, p->y, dy, &acc, p->bias, db))))
    return st;
  if (dw && (st = run_bwd_filter(cs, p, x, dy, acc, dw, ws))) return st;
  return dx ? run_bwd_data(cs, p, w, dy, dx, ws) : GANFW_OK;
}

/* --- conv_transpose2d: the same plans with the roles swapped ------------------------------ */

/* y (the conv's x) = BackwardData(w, x (the conv's y)) (+ b) */
static ganfw_status convt2d_forward(ganfw_cuda_state *cs, const ganfw_convt2d_shape *s,
                                    const float *x, const float *w, const float *b, float *y,
                                    void *ws) {
  const ganfw_conv2d_shape c = convt_as_conv(s);
  ganfw_conv_plan *p;
  ganfw_status st = plan_for_run(cs, &c, 1, GANFW_DTYPE_F32, ws, &p);
  if (st || (st = run_bwd_data(cs, p, w, x, y, ws))) return st;
  const float one = 1.0f;
  return b ? CUDNN_CHECK(cs, cudnnAddTensor(cs->cudnn, &one, p->bias, b, &one, p->x, y)) : GANFW_OK;
}

/* dx = Forward(dy, w); dw (+)= BackwardFilter(x := dy, dy := x); db (+)= sums of dy */
static ganfw_status convt2d_backward(ganfw_cuda_state *cs, const ganfw_convt2d_shape *s,
                                     const float *x, const float *w, const float *dy, float *dx,
                                     float *dw, float *db, int accumulate, void *ws) {
  if (!dx && !dw && !db) return GANFW_OK;
  const ganfw_conv2d_shape c = convt_as_conv(s);
  ganfw_conv_plan *p;
  ganfw_status st = plan_for_run(cs, &c, 1, GANFW_DTYPE_F32, ws, &p);
  if (st) return st;
  const float one = 1.0f, acc = accumulate ? 1.0f : 0.0f;
  if (db && (st = CUDNN_CHECK(
                 cs, cudnnConvolutionBackwardBias(cs->cudnn, &one, p->x, dy, &acc, p->bias, db))))
    return st;
  if (dw && (st = run_bwd_filter(cs, p, dy, x, acc, dw, ws))) return st;
  return dx ? run_fwd(cs, p, dy, w, dx, ws) : GANFW_OK;
}

/* --- 16-bit: x, w, y, dy, dx in f16 or bf16; b, dw, db f32 --------------------------------- */

/* The cuDNN workspace, rounded up so that the 16-bit dw buffer after it is aligned. */
static size_t dnn_ws_aligned(const ganfw_conv_plan *p) {
  return (p->ws + 255) & ~(size_t)255;
}

/* The plan of a 16-bit run in *out; GANFW_ERR_INVALID_ARG (recorded) without a workspace: it
 * always has one, for the dw buffer at least. */
static ganfw_status plan_for_run_lp(ganfw_cuda_state *cs, const ganfw_conv2d_shape *c,
                                    int transposed, int32_t dtype, const void *ws,
                                    ganfw_conv_plan **out) {
  *out = NULL;
  if (!ws)
    return ganfw_cuda_fail(cs, GANFW_ERR_INVALID_ARG, "a 16-bit convolution",
                           "no workspace was given; allocate the bytes the backend's workspace "
                           "entry answers for this op in its dtype",
                           __FILE__, __LINE__);
  return plan_get(cs, c, transposed, dtype, out);
}

/* dw (+)= BackwardFilter(x, dy), through the 16-bit buffer after the cuDNN workspace. */
static ganfw_status weight_grad_lp(ganfw_cuda_state *cs, ganfw_conv_plan *p, const void *x,
                                   const void *dy, float *dw, int accumulate, void *ws) {
  void *dw16 = (char *)ws + dnn_ws_aligned(p);
  ganfw_status st = run_bwd_filter(cs, p, x, dy, 0.0f, dw16, ws);
  return st ? st
            : LAUNCH_CHECK(cs, ganfw_cu_lp_to_f32(cs->stream, p->dtype, weight_numel(&p->s), dw16,
                                                  dw, accumulate));
}

static ganfw_status conv2d_forward_lp(ganfw_cuda_state *cs, int32_t dtype,
                                      const ganfw_conv2d_shape *s, const void *x, const void *w,
                                      const float *b, void *y, void *ws) {
  ganfw_conv_plan *p;
  ganfw_status st = plan_for_run_lp(cs, s, 0, dtype, ws, &p);
  if (st || (st = run_fwd(cs, p, x, w, y, ws)) || !b) return st;
  return LAUNCH_CHECK(cs, ganfw_cu_bias_add_lp(cs->stream, dtype, s->N, s->K, s->P * s->Q, b, y));
}

static ganfw_status conv2d_backward_lp(ganfw_cuda_state *cs, int32_t dtype,
                                       const ganfw_conv2d_shape *s, const void *x, const void *w,
                                       const void *dy, void *dx, float *dw, float *db,
                                       int accumulate, void *ws) {
  if (!dx && !dw && !db) return GANFW_OK;
  ganfw_conv_plan *p;
  ganfw_status st = plan_for_run_lp(cs, s, 0, dtype, ws, &p);
  if (st) return st;
  if (db && (st = LAUNCH_CHECK(cs, ganfw_cu_channel_sums_lp(cs->stream, dtype, s->N, s->K,
                                                            s->P * s->Q, dy, db, accumulate))))
    return st;
  if (dw && (st = weight_grad_lp(cs, p, x, dy, dw, accumulate, ws))) return st;
  return dx ? run_bwd_data(cs, p, w, dy, dx, ws) : GANFW_OK;
}

/* y (the conv's x) = BackwardData(w, x (the conv's y)), then y += b per channel */
static ganfw_status convt2d_forward_lp(ganfw_cuda_state *cs, int32_t dtype,
                                       const ganfw_convt2d_shape *s, const void *x, const void *w,
                                       const float *b, void *y, void *ws) {
  const ganfw_conv2d_shape c = convt_as_conv(s);
  ganfw_conv_plan *p;
  ganfw_status st = plan_for_run_lp(cs, &c, 1, dtype, ws, &p);
  if (st || (st = run_bwd_data(cs, p, w, x, y, ws)) || !b) return st;
  return LAUNCH_CHECK(cs, ganfw_cu_bias_add_lp(cs->stream, dtype, s->N, s->K, s->P * s->Q, b, y));
}

/* dx = Forward(dy, w); dw (+)= BackwardFilter(x := dy, dy := x); db (+)= sums of dy */
static ganfw_status convt2d_backward_lp(ganfw_cuda_state *cs, int32_t dtype,
                                        const ganfw_convt2d_shape *s, const void *x, const void *w,
                                        const void *dy, void *dx, float *dw, float *db,
                                        int accumulate, void *ws) {
  if (!dx && !dw && !db) return GANFW_OK;
  const ganfw_conv2d_shape c = convt_as_conv(s);
  ganfw_conv_plan *p;
  ganfw_status st = plan_for_run_lp(cs, &c, 1, dtype, ws, &p);
  if (st) return st;
  if (db && (st = LAUNCH_CHECK(cs, ganfw_cu_channel_sums_lp(cs->stream, dtype, s->N, s->K,
                                                            s->P * s->Q, dy, db, accumulate))))
    return st;
  if (dw && (st = weight_grad_lp(cs, p, dy, x, dw, accumulate, ws))) return st;
  return dx ? run_fwd(cs, p, dy, w, dx, ws) : GANFW_OK;
}

/* --- workspaces and the ops (op.h) ---------------------------------------------------------- */

/* f32: the plan's cuDNN workspace; 16-bit: that, aligned, and the 16-bit dw buffer after it.
 * Failures while planning in 16 bits name "conv2d_workspace (f16)". 0 when the plan cannot
 * be made. */
static size_t workspace(ganfw_cuda_state *cs, int32_t dtype, const ganfw_conv2d_shape *c,
                        int transposed) {
  ganfw_conv_plan *p;
  if (dtype == GANFW_DTYPE_F32) return plan_get(cs, c, transposed, dtype, &p) ? 0 : p->ws;
  cs->op = transposed ? "convt2d_workspace" : "conv2d_workspace";
  cs->op_dtype = dtype;
  const ganfw_status st = ganfw_cuda_lp_end(cs, plan_get(cs, c, transposed, dtype, &p));
  return st ? 0 : dnn_ws_aligned(p) + (size_t)weight_numel(c) * 2;
}

size_t ganfw_cuda_conv2d_workspace(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s) {
  return workspace(ganfw_cuda_state_of(be), dtype, s, 0);
}

size_t ganfw_cuda_convt2d_workspace(ganfw_backend *be, int32_t dtype,
                                    const ganfw_convt2d_shape *s) {
  const ganfw_conv2d_shape c = convt_as_conv(s);
  return workspace(ganfw_cuda_state_of(be), dtype, &c, 1);
}

/* in: x, w, b; out: y; ws */
ganfw_status ganfw_cuda_op_conv2d_forward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = op->dtype == GANFW_DTYPE_F32 ? conv2d_forward(cs, &op->shape.conv, op->in[0], op->in[1],
                                                       op->in[2], op->out[0], op->ws)
                                      : conv2d_forward_lp(cs, op->dtype, &op->shape.conv, op->in[0],
                                                          op->in[1], op->in[2], op->out[0], op->ws);
  return ganfw_cuda_lp_end(cs, st);
}

/* in: x, w, dy; out: dx; grad: dw, db; ws */
ganfw_status ganfw_cuda_op_conv2d_backward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int acc = (op->flags & GANFW_OP_ACCUMULATE) != 0;
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = op->dtype == GANFW_DTYPE_F32
             ? conv2d_backward(cs, &op->shape.conv, op->in[0], op->in[1], op->in[2], op->out[0],
                               op->grad[0], op->grad[1], acc, op->ws)
             : conv2d_backward_lp(cs, op->dtype, &op->shape.conv, op->in[0], op->in[1], op->in[2],
                                  op->out[0], op->grad[0], op->grad[1], acc, op->ws);
  return ganfw_cuda_lp_end(cs, st);
}

ganfw_status ganfw_cuda_op_convt2d_forward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = op->dtype == GANFW_DTYPE_F32
             ? convt2d_forward(cs, &op->shape.convt, op->in[0], op->in[1], op->in[2], op->out[0],
                               op->ws)
             : convt2d_forward_lp(cs, op->dtype, &op->shape.convt, op->in[0], op->in[1], op->in[2],
                                  op->out[0], op->ws);
  return ganfw_cuda_lp_end(cs, st);
}

ganfw_status ganfw_cuda_op_convt2d_backward(ganfw_backend *be, ganfw_op *op) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const int acc = (op->flags & GANFW_OP_ACCUMULATE) != 0;
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = op->dtype == GANFW_DTYPE_F32
             ? convt2d_backward(cs, &op->shape.convt, op->in[0], op->in[1], op->in[2], op->out[0],
                                op->grad[0], op->grad[1], acc, op->ws)
             : convt2d_backward_lp(cs, op->dtype, &op->shape.convt, op->in[0], op->in[1], op->in[2],
                                   op->out[0], op->grad[0], op->grad[1], acc, op->ws);
  return ganfw_cuda_lp_end(cs, st);
}
