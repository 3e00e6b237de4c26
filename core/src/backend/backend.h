/* The backend interface: raw memory for the caching allocator and the op kernels the
 * layers and the host's foreach ops are built from. A backend executes; it owns no memory
 * policy (that is alloc.c). The CPU backend (core/src/backend/cpu/) is the reference; the CUDA
 * backend (core/src/backend/cuda/) fills the same table.
 *
 * Conventions for every op: NCHW, contiguous, f32 unless a parameter says otherwise.
 * Pointers are device pointers of this backend. Parameter gradients (dw, db, dgamma,
 * dbeta) are overwritten when `accumulate` is 0 and added to when it is 1, so that
 * micro-batches can sum into one gradient; input gradients (dx) are always overwritten.
 * Any gradient pointer may be NULL to skip computing it. Workspace pointers come from the
 * allocator (category workspace) and hold at least the bytes the matching _workspace
 * function returns. */
#ifndef GANFW_BACKEND_H
#define GANFW_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ganfw/host.h"
#include "ganfw/status.h"

typedef struct ganfw_backend ganfw_backend;

/* conv2d: x [N,C,H,W] * w [K,C,R,S] (+ b [K]) -> y [N,K,P,Q]; dilation 1, groups 1. */
typedef struct ganfw_conv2d_shape {
  int64_t N, C, H, W;
  int64_t K, R, S;
  int64_t stride_h, stride_w, pad_h, pad_w;
  int64_t P, Q; /* filled by ganfw_conv2d_shape_init */
} ganfw_conv2d_shape;

/* conv_transpose2d (PyTorch's ConvTranspose2d): x [N,C,H,W], w [C,K,R,S] (+ b [K])
 * -> y [N,K,P,Q], P = (H-1)*stride_h - 2*pad_h + R + out_pad_h. It is the adjoint of
 * conv2d, so its forward is conv2d's backward-data and vice versa. */
typedef struct ganfw_convt2d_shape {
  int64_t N, C, H, W;
  int64_t K, R, S;
  int64_t stride_h, stride_w, pad_h, pad_w, out_pad_h, out_pad_w;
  int64_t P, Q; /* filled by ganfw_convt2d_shape_init */
} ganfw_convt2d_shape;

/* max/avg pooling over [N,C,H,W] -> [N,C,P,Q]; avg counts padding (PyTorch's default
 * count_include_pad=True); max pads with -inf. */
typedef struct ganfw_pool2d_shape {
  int64_t N, C, H, W;
  int64_t R, S; /* window */
  int64_t stride_h, stride_w, pad_h, pad_w;
  int64_t P, Q; /* filled by ganfw_pool2d_shape_init */
} ganfw_pool2d_shape;

/* Element-wise activations: GANFW_ACT_* from ganfw/host.h. */

/* The element-wise maps behind the host's tensor_* ops (unary and binary entries). Unary
 * ops take up to two scalars a, b; NaN in gives NaN out except for sign (0, as torch 1.13). */
enum {
  GANFW_UNARY_ABS = 0,
  GANFW_UNARY_SIGN = 1, /* -1, 0 or 1 */
  GANFW_UNARY_EXP = 2,
  GANFW_UNARY_LOG = 3,
  GANFW_UNARY_SQRT = 4,
  GANFW_UNARY_RSQRT = 5,      /* 1 / sqrt(x) */
  GANFW_UNARY_CLAMP = 6,      /* min(max(x, a), b) */
  GANFW_UNARY_MUL_SCALAR = 7, /* x * a */
  GANFW_UNARY_ADD_SCALAR = 8, /* x + a */
  GANFW_UNARY_POW_SCALAR = 9, /* x ^ a (torch.pow with a float exponent) */
  GANFW_UNARY_COUNT
};
enum {
  GANFW_BINARY_ADD = 0,
  GANFW_BINARY_SUB = 1,
  GANFW_BINARY_MUL = 2,
  GANFW_BINARY_DIV = 3,
  GANFW_BINARY_MAXIMUM = 4, /* NaN when either is NaN, as torch.maximum */
  GANFW_BINARY_MINIMUM = 5,
  GANFW_BINARY_COUNT
};

/* A broadcast binary op in four dims (shapes aligned at their last dims and padded with 1s in
 * front, as torch broadcasts): out [dim0..dim3] contiguous; out element (i0,i1,i2,i3) reads a
 * at sum(ik * sa[k]) and b at sum(ik * sb[k]), a stride being 0 along a dim the operand
 * broadcasts. same: 1 when a, b and out all have out's shape (contiguous: one flat loop). */
typedef struct ganfw_bcast_shape {
  int64_t dim[4];
  int64_t sa[4], sb[4];
  int32_t same;
} ganfw_bcast_shape;

/* A sum over some dims of x [dim0..dim3] (contiguous): bit k of mask set reduces dim k; out
 * [dim0..dim3 with the reduced ones 1] is contiguous. */
typedef struct ganfw_reduce_shape {
  int64_t dim[4];
  uint32_t mask;
} ganfw_reduce_shape;

/* Shape helpers: fill the output size; GANFW_ERR_INVALID_ARG when the output would be
 * empty or a size is not positive. Backend-neutral, in core/src/backend/shapes.c. */
ganfw_status ganfw_conv2d_shape_init(ganfw_conv2d_shape *s);
ganfw_status ganfw_convt2d_shape_init(ganfw_convt2d_shape *s);
ganfw_status ganfw_pool2d_shape_init(ganfw_pool2d_shape *s);

typedef struct ganfw_backend_vt {
  const char *name; /* "cpu", "cuda" */

  /* --- raw memory for the allocator --- */
  /* Returns NULL when the device has no room; never aborts. */
  void *(*raw_alloc)(ganfw_backend *be, size_t bytes);
  void (*raw_free)(ganfw_backend *be, void *ptr, size_t bytes);
  /* Total and currently free device bytes (CPU: physical memory). */
  ganfw_status (*capacity)(ganfw_backend *be, size_t *total, size_t *free_bytes);
  ganfw_status (*copy_h2d)(ganfw_backend *be, void *dst, const void *src, size_t bytes);
  ganfw_status (*copy_d2h)(ganfw_backend *be, void *dst, const void *src, size_t bytes);
  ganfw_status (*copy_d2d)(ganfw_backend *be, void *dst, const void *src, size_t bytes);
  ganfw_status (*synchronize)(ganfw_backend *be);
  void (*set_threads)(ganfw_backend *be, int threads);

  /* --- dense layers --- */
  /* Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, op = transpose when trans_* */
  void (*gemm)(ganfw_backend *be, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
               float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
               float *C, int64_t ldc);
  size_t (*conv2d_workspace)(ganfw_backend *be, const ganfw_conv2d_shape *s);
  void (*conv2d_forward)(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                         const float *w, const float *b, float *y, void *ws);
  void (*conv2d_backward)(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                          const float *w, const float *dy, float *dx, float *dw, float *db,
                          int accumulate, void *ws);
  size_t (*convt2d_workspace)(ganfw_backend *be, const ganfw_convt2d_shape *s);
  void (*convt2d_forward)(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                          const float *w, const float *b, float *y, void *ws);
  void (*convt2d_backward)(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                           const float *w, const float *dy, float *dx, float *dw, float *db,
                           int accumulate, void *ws);
  /* linear: x [N,IN] * w[OUT,IN]^T (+ b [OUT]) -> y [N,OUT] */
  void (*linear_forward)(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT, const float *x,
                         const float *w, const float *b, float *y);
  void (*linear_backward)(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT, const float *x,
                          const float *w, const float *dy, float *dx, float *dw, float *db,
                          int accumulate);

  /* --- normalisation --- */
  /* Training mode: batch statistics over N,H,W per channel; y may alias x. Saves mean
   * and 1/sqrt(var+eps) (biased var) per channel for backward; updates running_mean and
   * running_var (unbiased var) with `momentum` as PyTorch does, unless they are NULL.
   * gamma/beta NULL means affine=False. */
  void (*batchnorm2d_forward_train)(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                    const float *x, const float *gamma, const float *beta, float *y,
                                    float *running_mean, float *running_var, float momentum,
                                    float eps, float *save_mean, float *save_invstd);
  void (*batchnorm2d_forward_eval)(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                   const float *x, const float *gamma, const float *beta, float *y,
                                   const float *running_mean, const float *running_var, float eps);
  void (*batchnorm2d_backward)(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, const float *x,
                               const float *dy, const float *gamma, const float *save_mean,
                               const float *save_invstd, float *dx, float *dgamma, float *dbeta,
                               int accumulate);

  /* (optional) 1 when batchnorm2d_backward and batchnorm2d_backward_lp may write dx over dy
   * (dx == dy): the layer then hands its output gradient on as its input gradient when
   * nothing else holds it. NULL or 0: dx gets its own tensor. */
  int32_t (*batchnorm2d_backward_in_place)(ganfw_backend *be);

  /* --- activations: y = f(x), y may alias x; backward from the output y, dx may alias dy */
  void (*act_forward)(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *x,
                      float *y);
  void (*act_backward)(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *y,
                       const float *dy, float *dx);

  /* --- pooling: max saves the argmax (index into the H*W plane) per output --- */
  void (*maxpool2d_forward)(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                            float *y, int32_t *argmax);
  void (*maxpool2d_backward)(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                             const int32_t *argmax, float *dx);
  void (*avgpool2d_forward)(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                            float *y);
  void (*avgpool2d_backward)(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                             float *dx);

  /* --- dropout: mask[i] = keep (1) with probability 1-p from Philox (seed, offset);
   * y = x * mask / (1-p). Consumes ceil(n/4) Philox blocks from `offset`. */
  void (*dropout_forward)(ganfw_backend *be, int64_t n, float p, uint64_t seed, uint64_t offset,
                          const float *x, float *y, uint8_t *mask);
  void (*dropout_backward)(ganfw_backend *be, int64_t n, float p, const uint8_t *mask,
                           const float *dy, float *dx);

  /* --- losses, mean reduction; the loss lands in *loss (device memory, one float) --- */
  /* BCE with logits against float targets (label smoothing allowed). */
  void (*bce_logits_forward)(ganfw_backend *be, int64_t n, const float *logits,
                             const float *targets, float *loss);
  /* dx = dloss * (sigmoid(x) - t) / n */
  void (*bce_logits_backward)(ganfw_backend *be, int64_t n, const float *logits,
                              const float *targets, float dloss, float *dx);
  /* Softmax cross-entropy over [N, classes] against int32 labels in [0, classes), with label
   * smoothing eps in [0, 1) as torch.nn.functional.cross_entropy(label_smoothing=eps): the
   * target is (1 - eps) * onehot + eps / classes. */
  void (*softmax_xent_forward)(ganfw_backend *be, int64_t N, int64_t classes, const float *logits,
                               const int32_t *labels, double smoothing, float *loss);
  /* dx = dloss * (softmax(x) - target) / N */
  void (*softmax_xent_backward)(ganfw_backend *be, int64_t N, int64_t classes, const float *logits,
                                const int32_t *labels, double smoothing, float dloss, float *dx);

  /* --- foreach elementwise ops over n elements (see host.h for the semantics) --- */
  void (*fill)(ganfw_backend *be, int64_t n, float *x, float v);
  void (*scale)(ganfw_backend *be, int64_t n, float *x, float a);
  void (*add_scalar)(ganfw_backend *be, int64_t n, float *x, float a);
  void (*add)(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b);
  void (*axpy)(ganfw_backend *be, int64_t n, float *y, float alpha, const float *x);
  void (*mul)(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b);
  void (*addcmul)(ganfw_backend *be, int64_t n, float *y, float v, const float *a, const float *b);
  void (*addcdiv)(ganfw_backend *be, int64_t n, float *y, float v, const float *a, const float *b);
  void (*sqrt)(ganfw_backend *be, int64_t n, float *out, const float *x);
  void (*lerp)(ganfw_backend *be, int64_t n, float *y, const float *x, float w);
  void (*maximum)(ganfw_backend *be, int64_t n, float *y, const float *x);
  double (*sum)(ganfw_backend *be, int64_t n, const float *x);
  double (*sumsq)(ganfw_backend *be, int64_t n, const float *x);
  /* 1 when any of x[0..n) is NaN or inf */
  int32_t (*nonfinite)(ganfw_backend *be, int64_t n, const float *x);

  /* --- casts, IEEE round-to-nearest-even; NaN stays NaN, overflow becomes inf --- */
  void (*f32_to_f16)(ganfw_backend *be, int64_t n, const float *x, uint16_t *y);
  void (*f16_to_f32)(ganfw_backend *be, int64_t n, const uint16_t *x, float *y);
  void (*f32_to_bf16)(ganfw_backend *be, int64_t n, const float *x, uint16_t *y);
  void (*bf16_to_f32)(ganfw_backend *be, int64_t n, const uint16_t *x, float *y);

  /* --- Philox 4x32-10 (core/src/base/philox.h): element i uses block offset + i/4 --- */
  void (*rng_uniform)(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float lo,
                      float hi, float *out);
  void (*rng_normal)(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float mean,
                     float std, float *out);

  /* --- optional entries (NULL: the default each names); new entries go at the end --- */
  /* (optional) The first failure of a void op since the backend was created (or
   * GANFW_OK), its message recorded again with ganfw_error_set. The executor asks after
   * every layer. NULL: ops cannot fail (CPU). */
  ganfw_status (*last_error)(ganfw_backend *be);
  /* (optional) Page-locked host memory for the data prefetcher, so that uploads from it
   * run at full bus speed and can overlap compute. NULL when it cannot be had, with the
   * error recorded. NULL entries: plain malloc/free. */
  void *(*host_alloc_pinned)(ganfw_backend *be, size_t bytes);
  void (*host_free_pinned)(ganfw_backend *be, void *ptr);
  /* (optional) copy_h2d that may return before the copy is done: ordered with the ops
   * that follow, but src (from host_alloc_pinned) must stay unchanged until synchronize
   * or a copy_d2h returns. NULL: copy_h2d. */
  ganfw_status (*copy_h2d_async)(ganfw_backend *be, void *dst, const void *src, size_t bytes);
  /* (optional) nonfinite over n buffers with one answer: 1 when any value of any
   * x[i][0..numel[i]) is NaN or inf. NULL: nonfinite per buffer. A GPU answers it with one
   * wait for the device instead of one per buffer (the loss scaler's check of every
   * gradient). */
  int32_t (*nonfinite_many)(ganfw_backend *be, int64_t n, const float *const *x,
                            const int64_t *numel);

  /* --- (optional) native 16-bit compute for mixed precision ---------------------------
   * lp_ops: which groups of the _lp entries below take `dtype` (GANFW_DTYPE_F16 or
   * GANFW_DTYPE_BF16), a bit set of GANFW_LP_*. NULL or 0: none; the layers then convert
   * their 16-bit tensors to f32 around the f32 entries (core/src/nn/layer_dtype.c). A backend
   * that sets a bit fills every entry of that group.
   *
   * Each _lp entry has the semantics of the f32 entry of the same name, with these types:
   * the activations x, y, dy and dx and a matmul layer's weight w are in `dtype` (w is a
   * copy of the f32 master rounded by the caller); products and sums accumulate in f32
   * (tensor cores allowed); the bias b, BatchNorm's gamma and beta, running and saved
   * statistics, and every parameter gradient (dw, db, dgamma, dbeta, f32, overwritten or
   * added to as `accumulate` says) are f32. w may be NULL in a backward that computes no
   * dx. A convolution's _lp workspace is whatever its backend needs for both passes (for
   * example room for a 16-bit weight gradient before it is added to the f32 dw). */
  uint32_t (*lp_ops)(ganfw_backend *be, int32_t dtype);
  size_t (*conv2d_workspace_lp)(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s);
  void (*conv2d_forward_lp)(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s,
                            const void *x, const void *w, const float *b, void *y, void *ws);
  void (*conv2d_backward_lp)(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s,
                             const void *x, const void *w, const void *dy, void *dx, float *dw,
                             float *db, int accumulate, void *ws);
  size_t (*convt2d_workspace_lp)(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s);
  void (*convt2d_forward_lp)(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                             const void *x, const void *w, const float *b, void *y, void *ws);
  void (*convt2d_backward_lp)(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                              const void *x, const void *w, const void *dy, void *dx, float *dw,
                              float *db, int accumulate, void *ws);
  void (*linear_forward_lp)(ganfw_backend *be, int32_t dtype, int64_t N, int64_t IN, int64_t OUT,
                            const void *x, const void *w, const float *b, void *y);
  void (*linear_backward_lp)(ganfw_backend *be, int32_t dtype, int64_t N, int64_t IN, int64_t OUT,
                             const void *x, const void *w, const void *dy, void *dx, float *dw,
                             float *db, int accumulate);
  void (*batchnorm2d_forward_train_lp)(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                       int64_t HW, const void *x, const float *gamma,
                                       const float *beta, void *y, float *running_mean,
                                       float *running_var, float momentum, float eps,
                                       float *save_mean, float *save_invstd);
  void (*batchnorm2d_forward_eval_lp)(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                      int64_t HW, const void *x, const float *gamma,
                                      const float *beta, void *y, const float *running_mean,
                                      const float *running_var, float eps);
  void (*batchnorm2d_backward_lp)(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                  int64_t HW, const void *x, const void *dy, const float *gamma,
                                  const float *save_mean, const float *save_invstd, void *dx,
                                  float *dgamma, float *dbeta, int accumulate);
  void (*act_forward_lp)(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha, int64_t n,
                         const void *x, void *y);
  void (*act_backward_lp)(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha, int64_t n,
                          const void *y, const void *dy, void *dx);

  /* --- resampling and per-sample normalisation (issue 12, 2026-12): required ----------- */
  /* Upsampling by 2 (PyTorch's nn.Upsample(scale_factor=2)): x [planes,H,W] -> y
   * [planes,2H,2W] with planes = N*C; mode GANFW_UPSAMPLE_NEAREST or _BILINEAR
   * (align_corners=False: output o reads input (o + 0.5) / 2 - 0.5, clamped at 0). The
   * backward writes dx [planes,H,W] from dy [planes,2H,2W]. */
  void (*upsample2d_forward)(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H, int64_t W,
                             const float *x, float *y);
  void (*upsample2d_backward)(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H, int64_t W,
                              const float *dy, float *dx);
  /* Group normalisation of x [N,C,HW]: sample n's channels split into G groups of C/G
   * (C % G == 0), each group normalised by its own mean and biased variance, then
   * y = xhat * gamma[c] + beta[c] (gamma/beta [C] or NULL: 1 and 0). Saves mean and
   * 1/sqrt(var+eps) per group, [N,G], in double (a group of a few values cancels in the
   * backward: f32 statistics would cost it digits). GroupNorm is G groups; InstanceNorm2d is G = C;
   * LayerNorm over the trailing D values of a row is N rows, C = D, HW = 1, G = 1 (gamma,
   * beta elementwise). The backward: dgamma, dbeta [C] as the conventions above. */
  void (*groupnorm_forward)(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                            const float *x, const float *gamma, const float *beta, float eps,
                            float *y, double *save_mean, double *save_invstd);
  void (*groupnorm_backward)(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                             const float *x, const float *dy, const float *gamma,
                             const double *save_mean, const double *save_invstd, float *dx,
                             float *dgamma, float *dbeta, int accumulate);

  /* --- class embeddings and weight layouts (issue 12 part 2, 2026-12): required --------- */
  /* nn.Embedding's lookup: y[n][d] = w[ids[n]][d] for n < N, d < D, w [num,D]; ids are int32
   * (device memory) in [0, num): the caller checked them. */
  void (*embedding_forward)(ganfw_backend *be, int64_t N, int64_t D, const int32_t *ids,
                            const float *w, float *y);
  /* Its weight gradient, deterministic (no atomics): dw[j][d] is the sum of dy[n][d] over the
   * n with ids[n] == j, added in increasing n to dw[j][d] (accumulate 1) or to 0 (accumulate
   * 0: every row of dw [num,D] is written, 0 where no id points). */
  void (*embedding_backward)(ganfw_backend *be, int64_t N, int64_t num, int64_t D,
                             const int32_t *ids, const float *dy, float *dw, int accumulate);
  /* x [A,B,C] -> y [B,A,C]: the first two dimensions swapped (spectral norm's matrix view of
   * a conv_transpose2d weight [C,K,R,S] as [K, C*R*S], and back). y does not alias x. */
  void (*transpose01)(ganfw_backend *be, int64_t A, int64_t B, int64_t C, const float *x, float *y);

  /* --- tensor math for the host's tensor_* entries (issue 12, 2026-12): required -------- */
  /* out[i] = f(x[i]) over n values, f = GANFW_UNARY_* with its scalars a, b (unused ones
   * ignored); out may alias x. */
  void (*unary)(ganfw_backend *be, int32_t op, int64_t n, float *out, const float *x, float a,
                float b);
  /* out = a op b, op = GANFW_BINARY_*, broadcast as ganfw_bcast_shape says; out is contiguous
   * and may alias a or b when that operand has out's shape. */
  void (*binary)(ganfw_backend *be, int32_t op, const ganfw_bcast_shape *s, float *out,
                 const float *a, const float *b);
  /* out = scale * (the sum of x over the dims in s->mask), summed in double in a fixed order
   * (the row-major order of the reduced dims) and rounded once; out has x's shape with those
   * dims 1. */
  void (*reduce_sum)(ganfw_backend *be, const ganfw_reduce_shape *s, double scale, const float *x,
                     float *out);
  /* y[n][c][i] = x[n][c][i] * s[c] + b[c] over x [N,C,inner] (rounded once: fmaf); s NULL
   * means 1, b NULL means 0; y may alias x. */
  void (*channel_affine)(ganfw_backend *be, int64_t N, int64_t C, int64_t inner, const float *x,
                         const float *s, const float *b, float *y);
} ganfw_backend_vt;

/* The groups of lp_ops. */
#define GANFW_LP_CONV      1u /* conv2d_*_lp and convt2d_*_lp */
#define GANFW_LP_LINEAR    2u /* linear_*_lp */
#define GANFW_LP_BATCHNORM 4u /* batchnorm2d_*_lp */
#define GANFW_LP_ACT       8u /* act_*_lp */

struct ganfw_backend {
  const ganfw_backend_vt *vt;
  void *impl; /* the backend's own state */
};

/* The CPU backend (core/src/backend/cpu/cpu_backend.c). Static: no create/destroy needed. */
ganfw_backend *ganfw_cpu_backend(void);
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
