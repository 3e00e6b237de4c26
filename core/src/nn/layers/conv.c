/* conv2d and conv_transpose2d layers (PyTorch's Conv2d and ConvTranspose2d), one
 * implementation with the op chosen by the layer's type:
 *   conv2d:            x [N,C,H,W] * weight [K,C,R,S] (+ bias [K]) -> y [N,K,P,Q]
 *   conv_transpose2d:  x [N,C,H,W], weight [C,K,R,S] (+ bias [K]) -> y [N,K,P,Q],
 *                      P = (H-1)*stride - 2*padding + R + output_padding.
 * Args: ganfw_conv_args (layer.h). Forward and backward are the matmul frame's
 * (matmul.c): x kept for backward, the op's workspace taken from the allocator for each
 * call. With spectral norm (spectral_norm.c) they compute with weight_orig / sigma and its
 * gradient goes through the normalisation: dim 0 for conv2d, 1 for conv_transpose2d, as
 * PyTorch chooses. */
#include "nn/layer.h"

static int32_t is_transposed(const ganfw_layer *l) {
  return l->vt == &ganfw_layer_conv_transpose2d;
}

/* The op's shape for input `in` with N = rows (kind set, forward or backward); out (when not
 * NULL) gets [N,K,P,Q]. Fails when the output would be empty. */
static ganfw_status conv_op_shape(const ganfw_layer *l, const int64_t *in, int64_t rows,
                                  int32_t backward, ganfw_op *op, int64_t *out) {
  const ganfw_conv_args *a = &l->args.conv;
  ganfw_status st;
  if (is_transposed(l)) {
    ganfw_convt2d_shape *s = &op->shape.convt;
    op->kind = backward ? GANFW_OP_CONVT2D_BACKWARD : GANFW_OP_CONVT2D_FORWARD;
    *s = (ganfw_convt2d_shape){.N = rows,
                               .C = in[1],
                               .H = in[2],
                               .W = in[3],
                               .K = a->out_channels,
                               .R = a->kernel,
                               .S = a->kernel,
                               .stride_h = a->stride,
                               .stride_w = a->stride,
                               .pad_h = a->padding,
                               .pad_w = a->padding,
                               .out_pad_h = a->output_padding,
                               .out_pad_w = a->output_padding};
    st = ganfw_convt2d_shape_init(s);
    if (out) out[0] = s->N, out[1] = s->K, out[2] = s->P, out[3] = s->Q;
  } else {
    ganfw_conv2d_shape *s = &op->shape.conv;
    op->kind = backward ? GANFW_OP_CONV2D_BACKWARD : GANFW_OP_CONV2D_FORWARD;
    *s = (ganfw_conv2d_shape){.N = rows,
                              .C = in[1],
                              .H = in[2],
                              .W = in[3],
                              .K = a->out_channels,
                              .R = a->kernel,
                              .S = a->kernel,
                              .stride_h = a->stride,
                              .stride_w = a->stride,
                              .pad_h = a->padding,
                              .pad_w = a->padding};
    st = ganfw_conv2d_shape_init(s);
    if (out) out[0] = s->N, out[1] = s->K, out[2] = s->P, out[3] = s->Q;
  }
  return st;
}

/* ganfw_matmul_kind's op: the shapes were checked by conv_infer. */
static ganfw_op conv_op(const ganfw_layer *l, const int64_t *in, int64_t rows, int32_t backward) {
  ganfw_op op = {0};
  conv_op_shape(l, in, rows, backward, &op, NULL);
  return op;
}

static const ganfw_matmul_kind conv_kind = {
    .lp_group = GANFW_LP_CONV, .workspace = 1, .op = conv_op};

static ganfw_status conv_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                               int64_t *out, int32_t *out_ndim) {
  const ganfw_conv_args *a = &l->args.conv;
  if (in_ndim != 4 || in[1] != a->in_channels)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,%lld,H,W] input, gets %d dims with %lld channels",
                             (long long)a->in_channels, (int)in_ndim, (long long)in[1]);
  ganfw_op op = {0};
  if (conv_op_shape(l, in, in[0], 0, &op, out) != GANFW_OK) {
    if (is_transposed(l))
      return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                               "kernel %lld, stride %lld, padding %lld and output_padding %lld "
                               "give an empty output for a %lldx%lld input",
                               (long long)a->kernel, (long long)a->stride, (long long)a->padding,
                               (long long)a->output_padding, (long long)in[2], (long long)in[3]);
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "a %lldx%lld input is too small for kernel %lld, stride %lld, "
                             "padding %lld",
                             (long long)in[2], (long long)in[3], (long long)a->kernel,
                             (long long)a->stride, (long long)a->padding);
  }
  *out_ndim = 4;
  return GANFW_OK;
}

static ganfw_status conv_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  const ganfw_conv_args *a = &l->args.conv;
  const int32_t t = is_transposed(l);
  /* weight [K,C,R,S], transposed [C,K,R,S]; PyTorch's fan_in is weight.size(1) * R * S */
  int64_t w[4] = {t ? a->in_channels : a->out_channels, t ? a->out_channels : a->in_channels,
                  a->kernel, a->kernel};
  ganfw_status st =
      ganfw_layer_add_param(l, 0, l->sn.n_power_iterations ? "weight_orig" : "weight", 4, w);
  if (st == GANFW_OK && a->bias) st = ganfw_layer_add_param(l, 1, "bias", 1, &a->out_channels);
  if (st == GANFW_OK) st = ganfw_layer_init_uniform(l, w[1] * a->kernel * a->kernel);
  if (st == GANFW_OK) st = ganfw_spectral_init(l, t);
  return st;
}

static ganfw_status conv_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                 ganfw_tensor **y, ganfw_saved *saved) {
  ganfw_op op = {0};
  int64_t out[4];
  conv_op_shape(l, x->shape, x->shape[0], 0, &op, out);
  return ganfw_matmul_forward(l, ex, &conv_kind, x, 4, out, y, saved);
}

static ganfw_status conv_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                  ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                  int32_t accumulate) {
  return ganfw_matmul_backward(l, ex, &conv_kind, saved, dy, dx, param_grads, accumulate);
}

static ganfw_status conv_backward2(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                   ganfw_tensor *dy, int32_t n, ganfw_tensor *const *u,
                                   ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads) {
  (void)n, (void)ax;
  return ganfw_matmul_backward2(l, ex, &conv_kind, saved, dy, u, du, param_grads);
}

const ganfw_layer_vt ganfw_layer_conv2d = {
    .type = "conv2d",
    .infer = conv_infer,
    .init = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
    .backward2 = conv_backward2,
};

const ganfw_layer_vt ganfw_layer_conv_transpose2d = {
    .type = "conv_transpose2d",
    .infer = conv_infer,
    .init = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
    .backward2 = conv_backward2,
};
