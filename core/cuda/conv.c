/* conv2d and conv_transpose2d on the GPU through cuDNN 9's convolution API:
 *   conv2d      x [N,C,H,W] * w [K,C,R,S] (+ b [K]) -> y [N,K,P,Q]
 *     forward = cudnnConvolutionForward; backward = BackwardData (dx), BackwardFilter (dw),
 *     BackwardBias (db); forward's bias is cudnnAddTensor.
 *   convT       x [N,C,H,W], w [C,K,R,S] (+ b [K]) -> y [N,K,P,Q], the adjoint of the conv2d
 *     from y's shape to x's shape (core/src/cpu/conv_transpose2d.c), so its forward is that
 *     conv's BackwardData, its dx that conv's Forward, its dw that conv's BackwardFilter with
 *     x and dy swapped.
 * Each (shape, conv or convT) gets one plan, made on first use and kept: the descriptors
 * and the three algorithms, chosen by cuDNN's heuristics (cudnnGet*_v7), or with
 * device.cudnn_benchmark by timing every algorithm once (cudnnFind*AlgorithmEx, on
 * scratch buffers freed right after). The workspace functions plan the shape and return
 * the largest of the three algorithms' workspaces, which the layer takes from the
 * allocator (category workspace); no algorithm needing more than the backend's
 * workspace limit is chosen. FP32 math only (CUDNN_FMA_MATH, no TF32), as the CPU. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "error.h"

struct ganfw_conv_plan {
  int transposed;
  int benchmark;        /* planned with cudnnFind (1) or the heuristics (0) */
  ganfw_conv2d_shape s; /* the conv2d (for a convT: the conv it is the adjoint of) */
  cudnnTensorDescriptor_t x, y, bias;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t bwd_data;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter;
  size_t ws; /* bytes: the largest of the three algorithms' workspaces */
};

/* The conv2d a convT is the adjoint of (as core/src/cpu/conv_transpose2d.c). */
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

/* Math types that may use TF32 or f16 tensor cores on f32 data: not for us. */
static int tensor_op(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/* --- algorithm choice ------------------------------------------------------------------ */

/* Scratch operands for cudnnFind*AlgorithmEx (contents zero) and the largest workspace up
 * to the limit that cudaMalloc grants. */
typedef struct find_bufs {
  float *x, *w, *y;
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
                                    find_bufs *b) {
  memset(b, 0, sizeof *b);
  const size_t nx = (size_t)(s->N * s->C * s->H * s->W) * sizeof(float);
  const size_t nw = (size_t)(s->K * s->C * s->R * s->S) * sizeof(float);
  const size_t ny = (size_t)(s->N * s->K * s->P * s->Q) * sizeof(float);
  ganfw_status st;
  if ((st = CUDA_CHECK(cs, cudaMalloc((void **)&b->x, nx))) ||
      (st = CUDA_CHECK(cs, cudaMalloc((void **)&b->w, nw))) ||
      (st = CUDA_CHECK(cs, cudaMalloc((void **)&b->y, ny))) ||
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

/* Each chooser takes the first perf result (best first) that succeeded, uses no
 * tensor-op math and whose exact workspace fits `limit`; a candidate whose size cuDNN cannot
 * tell is skipped (its status is looked at, not recorded). Failing all, a fallback that
 * runs any shape. */
static int usable(cudnnStatus_t status, cudnnMathType_t math) {
  return status == CUDNN_STATUS_SUCCESS && !tensor_op(math);
}

static ganfw_status choose_fwd(ganfw_cuda_state *cs, ganfw_conv_plan *p, const find_bufs *b,
                               size_t limit, size_t *ws) {
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int n = 0;
  ganfw_status st;
  if (b)
    st = CUDNN_CHECK(cs, cudnnFindConvolutionForwardAlgorithmEx(
                             cs->cudnn, p->x, b->x, p->w, b->w, p->conv, p->y, b->y,
                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf, b->ws, b->ws_bytes));
  else
    st = CUDNN_CHECK(
        cs, cudnnGetConvolutionForwardAlgorithm_v7(cs->cudnn, p->x, p->w, p->conv, p->y,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
  if (st != GANFW_OK) return st;
  for (int i = 0; i < n; i++) {
    size_t sz = 0;
    if (!usable(perf[i].status, perf[i].mathType) ||
        cudnnGetConvolutionForwardWorkspaceSize(cs->cudnn, p->x, p->w, p->conv, p->y, perf[i].algo,
                                                &sz) != CUDNN_STATUS_SUCCESS ||
        sz > limit)
      continue;
    p->fwd = perf[i].algo;
    *ws = sz;
    return GANFW_OK;
  }
  p->fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM; /* needs no workspace, runs anything */
  return CUDNN_CHECK(cs, cudnnGetConvolutionForwardWorkspaceSize(cs->cudnn, p->x, p->w, p->conv,
                                                                 p->y, p->fwd, ws));
}

static ganfw_status choose_bwd_data(ganfw_cuda_state *cs, ganfw_conv_plan *p, const find_bufs *b,
                                    size_t limit, size_t *ws) {
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int n = 0;
  ganfw_status st;
  if (b)
    st = CUDNN_CHECK(cs, cudnnFindConvolutionBackwardDataAlgorithmEx(
                             cs->cudnn, p->w, b->w, p->y, b->y, p->conv, p->x, b->x,
                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf, b->ws, b->ws_bytes));
  else
    st = CUDNN_CHECK(cs, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                             cs->cudnn, p->w, p->y, p->conv, p->x,
                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
  if (st != GANFW_OK) return st;
  for (int i = 0; i < n; i++) {
    size_t sz = 0;
    if (!usable(perf[i].status, perf[i].mathType) ||
        cudnnGetConvolutionBackwardDataWorkspaceSize(cs->cudnn, p->w, p->y, p->conv, p->x,
                                                     perf[i].algo, &sz) != CUDNN_STATUS_SUCCESS ||
        sz > limit)
      continue;
    p->bwd_data = perf[i].algo;
    *ws = sz;
    return GANFW_OK;
  }
  p->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  return CUDNN_CHECK(cs, cudnnGetConvolutionBackwardDataWorkspaceSize(
                             cs->cudnn, p->w, p->y, p->conv, p->x, p->bwd_data, ws));
}

static ganfw_status choose_bwd_filter(ganfw_cuda_state *cs, ganfw_conv_plan *p, const find_bufs *b,
                                      size_t limit, size_t *ws) {
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int n = 0;
  ganfw_status st;
  if (b)
    st =
        CUDNN_CHECK(cs, cudnnFindConvolutionBackwardFilterAlgorithmEx(
                            cs->cudnn, p->x, b->x, p->y, b->y, p->conv, p->w, b->w,
                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf, b->ws, b->ws_bytes));
  else
    st = CUDNN_CHECK(cs, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                             cs->cudnn, p->x, p->y, p->conv, p->w,
                             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
  if (st != GANFW_OK) return st;
  for (int i = 0; i < n; i++) {
    size_t sz = 0;
    if (!usable(perf[i].status, perf[i].mathType) ||
        cudnnGetConvolutionBackwardFilterWorkspaceSize(cs->cudnn, p->x, p->y, p->conv, p->w,
                                                       perf[i].algo, &sz) != CUDNN_STATUS_SUCCESS ||
        sz > limit)
      continue;
    p->bwd_filter = perf[i].algo;
    *ws = sz;
    return GANFW_OK;
  }
  p->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  return CUDNN_CHECK(cs, cudnnGetConvolutionBackwardFilterWorkspaceSize(
                             cs->cudnn, p->x, p->y, p->conv, p->w, p->bwd_filter, ws));
}

/* --- plans ----------------------------------------------------------------------------- */

static ganfw_status plan_make(ganfw_cuda_state *cs, const ganfw_conv2d_shape *s, int transposed,
                              ganfw_conv_plan *p) {
  ganfw_status st;
  const int N = (int)s->N, C = (int)s->C, H = (int)s->H, W = (int)s->W, K = (int)s->K;
  const int bias_c = transposed ? C : K; /* the bias follows the layer's output channels */
  if ((st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&p->x))) ||
      (st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&p->y))) ||
      (st = CUDNN_CHECK(cs, cudnnCreateTensorDescriptor(&p->bias))) ||
      (st = CUDNN_CHECK(cs, cudnnCreateFilterDescriptor(&p->w))) ||
      (st = CUDNN_CHECK(cs, cudnnCreateConvolutionDescriptor(&p->conv))) ||
      (st = CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N,
                                                       C, H, W))) ||
      (st = CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N,
                                                       K, (int)s->P, (int)s->Q))) ||
      (st = CUDNN_CHECK(cs, cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                       1, bias_c, 1, 1))) ||
      (st = CUDNN_CHECK(cs, cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K,
                                                       C, (int)s->R, (int)s->S))) ||
      (st = CUDNN_CHECK(cs, cudnnSetConvolution2dDescriptor(p->conv, (int)s->pad_h, (int)s->pad_w,
                                                            (int)s->stride_h, (int)s->stride_w, 1,
                                                            1, CUDNN_CROSS_CORRELATION,
                                                            CUDNN_DATA_FLOAT))) ||
      (st = CUDNN_CHECK(cs, cudnnSetConvolutionMathType(p->conv, CUDNN_FMA_MATH))))
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
    if ((st = find_bufs_alloc(cs, s, &bufs)) != GANFW_OK) return st;
    b = &bufs;
  }
  const size_t limit = b ? b->ws_bytes : cs->workspace_limit;
  size_t ws_f = 0, ws_d = 0, ws_w = 0;
  if ((st = choose_fwd(cs, p, b, limit, &ws_f)) == GANFW_OK &&
      (st = choose_bwd_data(cs, p, b, limit, &ws_d)) == GANFW_OK)
    st = choose_bwd_filter(cs, p, b, limit, &ws_w);
  if (b) find_bufs_free(cs, b);
  p->ws = ws_f > ws_d ? ws_f : ws_d;
  if (ws_w > p->ws) p->ws = ws_w;
  return st;
}

/* The plan of (s, transposed), made on first use; NULL with the error recorded. */
static ganfw_conv_plan *plan_get(ganfw_cuda_state *cs, const ganfw_conv2d_shape *s,
                                 int transposed) {
  for (int i = 0; i < cs->n_plans; i++) {
    ganfw_conv_plan *p = cs->plans[i];
    if (p->transposed == transposed && p->benchmark == cs->cudnn_benchmark &&
        memcmp(&p->s, s, sizeof *s) == 0)
      return p;
  }
  if (!shape_fits(s)) {
    ganfw_cuda_fail(cs, GANFW_ERR_UNSUPPORTED, "a convolution plan",
                    "a size exceeds 2^31-1, which cuDNN cannot take", __FILE__, __LINE__);
    return NULL;
  }
  if (cs->n_plans == cs->cap_plans) {
    int cap = cs->cap_plans ? 2 * cs->cap_plans : 16;
    ganfw_conv_plan **grown = realloc(cs->plans, (size_t)cap * sizeof *grown);
    if (!grown) {
      ganfw_cuda_fail(cs, GANFW_ERR_OOM, "realloc", "out of host memory", __FILE__, __LINE__);
      return NULL;
    }
    cs->plans = grown;
    cs->cap_plans = cap;
  }
  ganfw_conv_plan *p = calloc(1, sizeof *p);
  if (!p) {
    ganfw_cuda_fail(cs, GANFW_ERR_OOM, "calloc", "out of host memory", __FILE__, __LINE__);
    return NULL;
  }
  p->transposed = transposed;
  p->benchmark = cs->cudnn_benchmark;
  p->s = *s;
  if (plan_make(cs, s, transposed, p) != GANFW_OK) {
    plan_destroy(cs, p);
    return NULL;
  }
  cs->plans[cs->n_plans++] = p;
  return p;
}

/* The plan for running with workspace ws, or NULL (error recorded) when ws is missing. */
static ganfw_conv_plan *plan_for_run(ganfw_cuda_state *cs, const ganfw_conv2d_shape *s,
                                     int transposed, const void *ws) {
  ganfw_conv_plan *p = plan_get(cs, s, transposed);
  if (p && p->ws && !ws) {
    ganfw_cuda_fail(cs, GANFW_ERR_INVALID_ARG, "a convolution",
                    "no workspace was given; allocate the bytes conv2d_workspace returns", __FILE__,
                    __LINE__);
    return NULL;
  }
  return p;
}

/* --- conv2d ---------------------------------------------------------------------------- */

size_t ganfw_cuda_conv2d_workspace(ganfw_backend *be, const ganfw_conv2d_shape *s) {
  ganfw_conv_plan *p = plan_get(ganfw_cuda_state_of(be), s, 0);
  return p ? p->ws : 0;
}

void ganfw_cuda_conv2d_forward(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                               const float *w, const float *b, float *y, void *ws) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  ganfw_conv_plan *p = plan_for_run(cs, s, 0, ws);
  if (!p) return;
  const float one = 1.0f, zero = 0.0f;
  if (CUDNN_CHECK(cs, cudnnConvolutionForward(cs->cudnn, &one, p->x, x, p->w, w, p->conv, p->fwd,
                                              ws, p->ws, &zero, p->y, y)))
    return;
  if (b) (void)CUDNN_CHECK(cs, cudnnAddTensor(cs->cudnn, &one, p->bias, b, &one, p->y, y));
}

void ganfw_cuda_conv2d_backward(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                                const float *w, const float *dy, float *dx, float *dw, float *db,
                                int accumulate, void *ws) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (!dx && !dw && !db) return;
  ganfw_conv_plan *p = plan_for_run(cs, s, 0, ws);
  if (!p) return;
  const float one = 1.0f, zero = 0.0f, acc = accumulate ? 1.0f : 0.0f;
  if (db &&
      CUDNN_CHECK(cs, cudnnConvolutionBackwardBias(cs->cudnn, &one, p->y, dy, &acc, p->bias, db)))
    return;
  if (dw &&
      CUDNN_CHECK(cs, cudnnConvolutionBackwardFilter(cs->cudnn, &one, p->x, x, p->y, dy, p->conv,
                                                     p->bwd_filter, ws, p->ws, &acc, p->w, dw)))
    return;
  if (dx)
    (void)CUDNN_CHECK(cs, cudnnConvolutionBackwardData(cs->cudnn, &one, p->w, w, p->y, dy, p->conv,
                                                       p->bwd_data, ws, p->ws, &zero, p->x, dx));
}

/* --- conv_transpose2d: the same plans with the roles swapped ------------------------------ */

size_t ganfw_cuda_convt2d_workspace(ganfw_backend *be, const ganfw_convt2d_shape *s) {
  const ganfw_conv2d_shape c = convt_as_conv(s);
  ganfw_conv_plan *p = plan_get(ganfw_cuda_state_of(be), &c, 1);
  return p ? p->ws : 0;
}

/* y (the conv's x) = BackwardData(w, x (the conv's y)) (+ b) */
void ganfw_cuda_convt2d_forward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                                const float *w, const float *b, float *y, void *ws) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  const ganfw_conv2d_shape c = convt_as_conv(s);
  ganfw_conv_plan *p = plan_for_run(cs, &c, 1, ws);
  if (!p) return;
  const float one = 1.0f, zero = 0.0f;
  if (CUDNN_CHECK(cs, cudnnConvolutionBackwardData(cs->cudnn, &one, p->w, w, p->y, x, p->conv,
                                                   p->bwd_data, ws, p->ws, &zero, p->x, y)))
    return;
  if (b) (void)CUDNN_CHECK(cs, cudnnAddTensor(cs->cudnn, &one, p->bias, b, &one, p->x, y));
}

/* dx = Forward(dy, w); dw (+)= BackwardFilter(x := dy, dy := x); db (+)= sums of dy */
void ganfw_cuda_convt2d_backward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                                 const float *w, const float *dy, float *dx, float *dw, float *db,
                                 int accumulate, void *ws) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  if (!dx && !dw && !db) return;
  const ganfw_conv2d_shape c = convt_as_conv(s);
  ganfw_conv_plan *p = plan_for_run(cs, &c, 1, ws);
  if (!p) return;
  const float one = 1.0f, zero = 0.0f, acc = accumulate ? 1.0f : 0.0f;
  if (db &&
      CUDNN_CHECK(cs, cudnnConvolutionBackwardBias(cs->cudnn, &one, p->x, dy, &acc, p->bias, db)))
    return;
  if (dw &&
      CUDNN_CHECK(cs, cudnnConvolutionBackwardFilter(cs->cudnn, &one, p->x, dy, p->y, x, p->conv,
                                                     p->bwd_filter, ws, p->ws, &acc, p->w, dw)))
    return;
  if (dx)
    (void)CUDNN_CHECK(cs, cudnnConvolutionForward(cs->cudnn, &one, p->x, dy, p->w, w, p->conv,
                                                  p->fwd, ws, p->ws, &zero, p->y, dx));
}
