/* Backend ops as descriptors: every kernel a backend runs is one `ganfw_op`, handed to the
 * backend's `run` entry (backend.h). The list below is the one place an op is declared;
 * each backend fills one table indexed by it (generated from the list, so that a missing
 * kernel is a build error), the meta backend answers every op alike, and callers build a
 * descriptor directly (ganfw_layer_op in nn/layer.h) or through the typed wrappers of
 * backend/ops.h.
 *
 * Conventions for every op: NCHW, contiguous. Pointers are device pointers of the backend.
 * `dtype` is the type of the activations (x, y, dy, dx and a matmul's weight w):
 * GANFW_DTYPE_F32, or F16/BF16 for the ops a backend `supports` in 16 bits (products and sums
 * then accumulate in f32; bias, BatchNorm's gamma and beta, statistics and every parameter
 * gradient stay f32; a 16-bit weight is a copy of the f32 master rounded by the caller).
 * Parameter gradients (grad[]) are overwritten, or added to with GANFW_OP_ACCUMULATE, so that
 * micro-batches can sum into one gradient; input gradients (dx) are always overwritten. Any
 * gradient pointer may be NULL to skip computing it. `ws` holds at least the bytes the
 * backend's `workspace` answers for the same descriptor. Scalars are passed as doubles and
 * used as the float the op names (float -> double -> float is exact). */
#ifndef GANFW_OP_H
#define GANFW_OP_H

#include <stddef.h>
#include <stdint.h>

#include "ganfw/status.h"

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

/* The element-wise maps of GANFW_OP_UNARY (op->mode). Up to two scalars a, b; NaN in gives
 * NaN out except for sign (0, as torch 1.13). */
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
/* The maps of GANFW_OP_BINARY (op->mode). */
enum {
  GANFW_BINARY_ADD = 0,
  GANFW_BINARY_SUB = 1,
  GANFW_BINARY_MUL = 2,
  GANFW_BINARY_DIV = 3,
  GANFW_BINARY_MAXIMUM = 4, /* NaN when either is NaN, as torch.maximum */
  GANFW_BINARY_MINIMUM = 5,
  GANFW_BINARY_COUNT
};

/* Every op: X(KIND, name), then what each reads from the descriptor. "d" is shape.d[],
 * "in", "out" and "grad" the pointer slots, "sc" the scalars, in the order given.
 *
 * GEMM               row-major C = alpha * op(A) * op(B) + beta * C, op = transpose where
 *                    mode bit 0 (A) or bit 1 (B) is set. d: M, N, K, lda, ldb, ldc; in: A, B;
 *                    out: C; sc: alpha, beta. f32 only.
 * CONV2D_FORWARD     shape.conv; in: x, w, b (b may be NULL); out: y; ws.
 * CONV2D_BACKWARD    shape.conv; in: x, w, dy (w may be NULL when dx is); out: dx;
 *                    grad: dw, db; ws (the same workspace as the forward's).
 * CONVT2D_FORWARD    as CONV2D_FORWARD with shape.convt.
 * CONVT2D_BACKWARD   as CONV2D_BACKWARD with shape.convt.
 * LINEAR_FORWARD     x [N,IN] * w[OUT,IN]^T (+ b [OUT]) -> y [N,OUT]. d: N, IN, OUT;
 *                    in: x, w, b; out: y.
 * LINEAR_BACKWARD    d: N, IN, OUT; in: x, w, dy; out: dx; grad: dw, db.
 * BATCHNORM2D_TRAIN  batch statistics over N,H,W per channel of x [N,C,HW]; y may alias x.
 *                    Saves mean and 1/sqrt(var+eps) (biased var) per channel; updates the
 *                    running mean and var (unbiased) with momentum as PyTorch does unless
 *                    NULL. gamma/beta NULL: affine=False. d: N, C, HW; in: x, gamma, beta;
 *                    out: y, running_mean, running_var, save_mean, save_invstd;
 *                    sc: momentum, eps.
 * BATCHNORM2D_EVAL   d: N, C, HW; in: x, gamma, beta, running_mean, running_var; out: y;
 *                    sc: eps.
 * BATCHNORM2D_BACKWARD d: N, C, HW; in: x, dy, gamma, save_mean, save_invstd; out: dx;
 *                    grad: dgamma, dbeta. supports() with GANFW_OP_IN_PLACE: dx may be dy.
 * ACT_FORWARD        y = f(x), f = mode (GANFW_ACT_* of ganfw/host.h), y may alias x.
 *                    d: n; in: x; out: y; sc: alpha (the leaky slope).
 * ACT_BACKWARD       from the output y, dx may alias dy. d: n; in: y, dy; out: dx; sc: alpha.
 * MAXPOOL2D_FORWARD  shape.pool; in: x; out: y, argmax (int32, index in the H*W plane).
 * MAXPOOL2D_BACKWARD shape.pool; in: dy, argmax; out: dx.
 * AVGPOOL2D_FORWARD  shape.pool; in: x; out: y.
 * AVGPOOL2D_BACKWARD shape.pool; in: dy; out: dx.
 * DROPOUT_FORWARD    mask[i] = keep (1) with probability 1-p from Philox (seed, offset);
 *                    y = x * mask / (1-p); consumes ceil(n/4) Philox blocks from offset.
 *                    d: n; in: x; out: y, mask (uint8); sc: p.
 * DROPOUT_BACKWARD   d: n; in: mask, dy; out: dx; sc: p.
 * BCE_LOGITS_FORWARD mean BCE with logits against float targets; the loss lands in out[0]
 *                    (device, one float). d: n; in: logits, targets; out: loss.
 * BCE_LOGITS_BACKWARD dx = dloss * (sigmoid(x) - t) / n. d: n; in: logits, targets; out: dx;
 *                    sc: dloss.
 * SOFTMAX_XENT_FORWARD mean softmax cross-entropy over [N, classes] against int32 labels, with
 *                    label smoothing as torch's cross_entropy. d: N, classes; in: logits,
 *                    labels; out: loss; sc: smoothing.
 * SOFTMAX_XENT_BACKWARD dx = dloss * (softmax(x) - target) / N. d: N, classes; in: logits,
 *                    labels; out: dx; sc: smoothing, dloss.
 * FILL               x = v. d: n; out: x; sc: v.
 * SCALE              x *= a. d: n; out: x; sc: a.
 * ADD_SCALAR         x += a. d: n; out: x; sc: a.
 * ADD                out = a + b. d: n; in: a, b; out: out.
 * AXPY               y += alpha * x. d: n; in: x; out: y; sc: alpha.
 * MUL                out = a * b. d: n; in: a, b; out: out.
 * ADDCMUL            y += v * a * b. d: n; in: a, b; out: y; sc: v.
 * ADDCDIV            y += v * a / b. d: n; in: a, b; out: y; sc: v.
 * SQRT               out = sqrt(x). d: n; in: x; out: out.
 * LERP               y += w * (x - y). d: n; in: x; out: y; sc: w.
 * MAXIMUM            y = max(y, x). d: n; in: x; out: y.
 * SUM, SUMSQ         the sum (of squares) of x in double: result. d: n; in: x.
 * NONFINITE          result 1 when any of x is NaN or inf, else 0. d: n; in: x.
 * NONFINITE_MANY     the same over n buffers at once: in: x (const float *const *, host
 *                    array of device pointers), numel (const int64_t *, host); d: n.
 * CAST_FROM_F32      IEEE round-to-nearest-even to dtype (F16, BF16); NaN stays NaN,
 *                    overflow becomes inf. d: n; in: x (f32); out: y (dtype).
 * CAST_TO_F32        d: n; in: x (dtype); out: y (f32). Both casts in F32 are a copy.
 * RNG_UNIFORM        Philox 4x32-10 (base/philox.h), element i from block offset + i/4.
 *                    d: n; out: out; sc: lo, hi; seed, offset.
 * RNG_NORMAL         d: n; out: out; sc: mean, std; seed, offset.
 * UPSAMPLE2D_FORWARD nn.Upsample(scale_factor=2), mode GANFW_UPSAMPLE_NEAREST or _BILINEAR
 *                    (align_corners=False). d: planes, H, W; in: x [planes,H,W];
 *                    out: y [planes,2H,2W].
 * UPSAMPLE2D_BACKWARD d: planes, H, W; in: dy; out: dx.
 * GROUPNORM_FORWARD  x [N,C,HW] in G groups of C/G channels per sample, each normalised by
 *                    its own mean and biased variance, then * gamma[c] + beta[c] (NULL: 1, 0).
 *                    Saves mean and 1/sqrt(var+eps) per group [N,G] in double. InstanceNorm
 *                    is G = C; LayerNorm over D values is C = D, HW = 1, G = 1.
 *                    d: N, C, HW, G; in: x, gamma, beta; out: y, save_mean, save_invstd;
 *                    sc: eps.
 * GROUPNORM_BACKWARD d: N, C, HW, G; in: x, dy, gamma, save_mean, save_invstd; out: dx;
 *                    grad: dgamma, dbeta.
 * EMBEDDING_FORWARD  y[n][d] = w[ids[n]][d]; ids int32 in [0, num) (checked by the caller).
 *                    d: N, D; in: ids, w; out: y.
 * EMBEDDING_BACKWARD dw[j][d] = sum of dy[n][d] over n with ids[n] == j, in increasing n,
 *                    deterministic; without GANFW_OP_ACCUMULATE every row of dw [num,D] is
 *                    written. d: N, num, D; in: ids, dy; grad: dw.
 * TRANSPOSE01        x [A,B,C] -> y [B,A,C]; y does not alias x. d: A, B, C; in: x; out: y.
 * UNARY              out = f(x), f = mode (GANFW_UNARY_*); out may alias x. d: n; in: x;
 *                    out: out; sc: a, b.
 * BINARY             out = a op b, op = mode (GANFW_BINARY_*), broadcast as shape.bcast;
 *                    out may alias an operand of out's shape. in: a, b; out: out.
 * REDUCE_SUM         out = scale * (sum of x over shape.reduce's dims), in double in a fixed
 *                    order, rounded once. in: x; out: out; sc: scale.
 * CHANNEL_AFFINE     y[n][c][i] = x[n][c][i] * s[c] + b[c] (fmaf; s NULL: 1, b NULL: 0), y may
 *                    alias x. d: N, C, inner; in: x, s, b; out: y.
 * BMM                c[i] = alpha * op(a[i]) op(b[i]) + beta * c[i] for i < B (torch.bmm), op =
 *                    transpose where mode bit 0 (a) or bit 1 (b) is set: a [B,M,K] ([B,K,M]
 *                    transposed), b [B,K,N] ([B,N,K]), c [B,M,N], contiguous; c aliases neither;
 *                    beta 0 writes c without reading it. d: B, M, N, K; in: a, b; out: c;
 *                    sc: alpha, beta.
 * SOFTMAX_FORWARD    softmax over the middle dim of x [outer, dim, inner] (the max subtracted
 *                    first, sums in double), log_softmax with mode 1; y may alias x.
 *                    d: outer, dim, inner; in: x; out: y.
 * SOFTMAX_BACKWARD   from the forward's output: dx = y * (dy - sum(dy * y)), with mode 1
 *                    dx = dy - exp(y) * sum(dy), the sums over dim; dx may alias dy.
 *                    d: outer, dim, inner; in: y, dy; out: dx.
 * PERMUTE            y = x.permute(p) copied contiguous, x [d0,d1,d2,d3] (fewer dims padded
 *                    with leading 1s), p[k] = (mode >> 2k) & 3 the dim of x that is y's dim k; y
 *                    does not alias x. d: d0, d1, d2, d3; in: x; out: y.
 * GATHER             y[o][i][n] = x[o][index[o][i][n]][n] (torch.gather along the middle dim),
 *                    x [outer, x_dim, inner], index (int32, in [0, x_dim), checked by the
 *                    caller) and y [outer, idx_dim, inner]. d: outer, x_dim, idx_dim, inner;
 *                    in: x, index; out: y.
 * SCATTER_ADD        out[o][index[o][i][n]][n] += src[o][i][n] (Tensor.scatter_add_), in
 *                    increasing i, deterministic; out [outer, out_dim, inner], index (int32, in
 *                    [0, out_dim), checked by the caller) and src [outer, idx_dim, inner]; out
 *                    aliases neither. d: outer, out_dim, idx_dim, inner; in: index, src; out: out.
 * PIXEL_SHUFFLE      nn.PixelShuffle(r): lo [N,C*r*r,H,W] -> hi [N,C,H*r,W*r],
 *                    hi[n][c][h*r+i][w*r+j] = lo[n][c*r*r+i*r+j][h][w]; PIXEL_UNSHUFFLE's
 *                    backward. Moves elements of dtype unconverted: any dtype
 *                    (ganfw_op_any_dtype), bit for bit. d: N, C, H, W, r; in: lo; out: hi.
 * PIXEL_UNSHUFFLE    nn.PixelUnshuffle(r), the inverse: hi -> lo with the same d; PIXEL_SHUFFLE's
 *                    backward. d: N, C, H, W, r; in: hi; out: lo.
 * QUANTIZE_BLOCKWISE 8-bit blockwise quantisation (Dettmers et al. 2022, bitsandbytes'
 *                    quantize_blockwise): x (f32, n values) in blocks of `block` values, the
 *                    last one shorter; absmax[b] = max |x| over block b (f32,
 *                    ceil(n / block) values); q[i] (u8) = the index into code (256 f32
 *                    values, ascending) that bitsandbytes' 7-step binary search picks for
 *                    x[i] * (1 / absmax[b]) (0 for x[i] when absmax[b] is 0): the nearest
 *                    code, a tie at a midpoint going to the code its search stood on.
 *                    d: n, block; in: x, code; out: q, absmax.
 * DEQUANTIZE_BLOCKWISE the inverse: x[i] = code[q[i]] * absmax[i / block] (f32).
 *                    d: n, block; in: q, absmax, code; out: x.
 */
#define GANFW_OP_LIST(X)                                                                           \
  X(GEMM, gemm)                                                                                    \
  X(CONV2D_FORWARD, conv2d_forward)                                                                \
  X(CONV2D_BACKWARD, conv2d_backward)                                                              \
  X(CONVT2D_FORWARD, convt2d_forward)                                                              \
  X(CONVT2D_BACKWARD, convt2d_backward)                                                            \
  X(LINEAR_FORWARD, linear_forward)                                                                \
  X(LINEAR_BACKWARD, linear_backward)                                                              \
  X(BATCHNORM2D_TRAIN, batchnorm2d_train)                                                          \
  X(BATCHNORM2D_EVAL, batchnorm2d_eval)                                                            \
  X(BATCHNORM2D_BACKWARD, batchnorm2d_backward)                                                    \
  X(ACT_FORWARD, act_forward)                                                                      \
  X(ACT_BACKWARD, act_backward)                                                                    \
  X(MAXPOOL2D_FORWARD, maxpool2d_forward)                                                          \
  X(MAXPOOL2D_BACKWARD, maxpool2d_backward)                                                        \
  X(AVGPOOL2D_FORWARD, avgpool2d_forward)                                                          \
  X(AVGPOOL2D_BACKWARD, avgpool2d_backward)                                                        \
  X(DROPOUT_FORWARD, dropout_forward)                                                              \
  X(DROPOUT_BACKWARD, dropout_backward)                                                            \
  X(BCE_LOGITS_FORWARD, bce_logits_forward)                                                        \
  X(BCE_LOGITS_BACKWARD, bce_logits_backward)                                                      \
  X(SOFTMAX_XENT_FORWARD, softmax_xent_forward)                                                    \
  X(SOFTMAX_XENT_BACKWARD, softmax_xent_backward)                                                  \
  X(FILL, fill)                                                                                    \
  X(SCALE, scale)                                                                                  \
  X(ADD_SCALAR, add_scalar)                                                                        \
  X(ADD, add)                                                                                      \
  X(AXPY, axpy)                                                                                    \
  X(MUL, mul)                                                                                      \
  X(ADDCMUL, addcmul)                                                                              \
  X(ADDCDIV, addcdiv)                                                                              \
  X(SQRT, sqrt)                                                                                    \
  X(LERP, lerp)                                                                                    \
  X(MAXIMUM, maximum)                                                                              \
  X(SUM, sum)                                                                                      \
  X(SUMSQ, sumsq)                                                                                  \
  X(NONFINITE, nonfinite)                                                                          \
  X(NONFINITE_MANY, nonfinite_many)                                                                \
  X(CAST_FROM_F32, cast_from_f32)                                                                  \
  X(CAST_TO_F32, cast_to_f32)                                                                      \
  X(RNG_UNIFORM, rng_uniform)                                                                      \
  X(RNG_NORMAL, rng_normal)                                                                        \
  X(UPSAMPLE2D_FORWARD, upsample2d_forward)                                                        \
  X(UPSAMPLE2D_BACKWARD, upsample2d_backward)                                                      \
  X(GROUPNORM_FORWARD, groupnorm_forward)                                                          \
  X(GROUPNORM_BACKWARD, groupnorm_backward)                                                        \
  X(EMBEDDING_FORWARD, embedding_forward)                                                          \
  X(EMBEDDING_BACKWARD, embedding_backward)                                                        \
  X(TRANSPOSE01, transpose01)                                                                      \
  X(UNARY, unary)                                                                                  \
  X(BINARY, binary)                                                                                \
  X(REDUCE_SUM, reduce_sum)                                                                        \
  X(CHANNEL_AFFINE, channel_affine)                                                                \
  X(BMM, bmm)                                                                                      \
  X(SOFTMAX_FORWARD, softmax_forward)                                                              \
  X(SOFTMAX_BACKWARD, softmax_backward)                                                            \
  X(PERMUTE, permute)                                                                              \
  X(GATHER, gather)                                                                                \
  X(SCATTER_ADD, scatter_add)                                                                      \
  X(PIXEL_SHUFFLE, pixel_shuffle)                                                                  \
  X(PIXEL_UNSHUFFLE, pixel_unshuffle)                                                              \
  X(QUANTIZE_BLOCKWISE, quantize_blockwise)                                                        \
  X(DEQUANTIZE_BLOCKWISE, dequantize_blockwise)

typedef enum ganfw_op_kind {
#define GANFW_OP_ENUM_(K, name) GANFW_OP_##K,
  GANFW_OP_LIST(GANFW_OP_ENUM_)
#undef GANFW_OP_ENUM_
      GANFW_OP_COUNT
} ganfw_op_kind;

/* op->flags */
#define GANFW_OP_ACCUMULATE 1u /* parameter gradients are added to, not overwritten */
#define GANFW_OP_IN_PLACE   2u /* (a supports() question) may dx be written over dy? */

#define GANFW_OP_MAX_IN   6
#define GANFW_OP_MAX_OUT  5
#define GANFW_OP_MAX_GRAD 2
#define GANFW_OP_MAX_DIMS 8

typedef struct ganfw_op {
  int32_t kind;   /* GANFW_OP_* */
  int32_t dtype;  /* of the activations: GANFW_DTYPE_F32 (0), _F16 or _BF16 */
  uint32_t flags; /* GANFW_OP_ACCUMULATE ... */
  int32_t mode;   /* the op's sub-kind: activation, unary or binary map, upsampling mode,
                     gemm and bmm transposes, log_softmax, a permutation */
  union {
    ganfw_conv2d_shape conv;
    ganfw_convt2d_shape convt;
    ganfw_pool2d_shape pool;
    ganfw_bcast_shape bcast;
    ganfw_reduce_shape reduce;
    int64_t d[GANFW_OP_MAX_DIMS]; /* the sizes of every other op, as its entry says */
  } shape;
  const void *in[GANFW_OP_MAX_IN];
  void *out[GANFW_OP_MAX_OUT];
  void *grad[GANFW_OP_MAX_GRAD];
  double sc[4];          /* scalars */
  uint64_t seed, offset; /* Philox stream of the random ops */
  void *ws;              /* workspace */
  double result;         /* the host-side answer of SUM, SUMSQ, NONFINITE(_MANY) */
} ganfw_op;

/* "conv2d_forward"; "?" for a kind out of range. */
const char *ganfw_op_name(int32_t kind);
/* 1 for the kinds that only move elements (PIXEL_SHUFFLE, PIXEL_UNSHUFFLE): one kernel runs them
 * in every float dtype (f32, f16, bf16) alike, so a backend that has them supports them in
 * each; 0 for every other kind. */
int32_t ganfw_op_any_dtype(int32_t kind);

#endif
