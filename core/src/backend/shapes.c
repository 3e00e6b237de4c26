/* Output sizes of the windowed ops (conv2d, conv_transpose2d, pooling) from their input
 * size, kernel, stride and padding, with PyTorch's formulas (dilation 1, floor mode), and
 * the checks that reject shapes PyTorch rejects. Backend-neutral. */
#include <inttypes.h>

#include "backend/backend.h"
#include "base/error.h"

/* A size that must be >= 1. */
static ganfw_status check_positive(const char *op, const char *what, int64_t v) {
  if (v >= 1) return GANFW_OK;
  return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: %s is %" PRId64 "; it must be at least 1", op,
                         what, v);
}

static ganfw_status check_nonnegative(const char *op, const char *what, int64_t v) {
  if (v >= 0) return GANFW_OK;
  return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: %s is %" PRId64 "; it must not be negative",
                         op, what, v);
}

/* Output length of a strided window over n inputs padded by pad on both sides; 0 when
 * the padded input is shorter than the window. */
static int64_t window_out(int64_t n, int64_t k, int64_t stride, int64_t pad) {
  int64_t span = n + 2 * pad - k;
  return span < 0 ? 0 : span / stride + 1;
}

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    ganfw_status check_st_ = (expr);                                                               \
    if (check_st_ != GANFW_OK) return check_st_;                                                   \
  } while (0)

ganfw_status ganfw_conv2d_shape_init(ganfw_conv2d_shape *s) {
  const char *op = "conv2d";
  CHECK(check_positive(op, "batch size N", s->N));
  CHECK(check_positive(op, "input channels C", s->C));
  CHECK(check_positive(op, "input height H", s->H));
  CHECK(check_positive(op, "input width W", s->W));
  CHECK(check_positive(op, "output channels K", s->K));
  CHECK(check_positive(op, "kernel height", s->R));
  CHECK(check_positive(op, "kernel width", s->S));
  CHECK(check_positive(op, "stride_h", s->stride_h));
  CHECK(check_positive(op, "stride_w", s->stride_w));
  CHECK(check_nonnegative(op, "pad_h", s->pad_h));
  CHECK(check_nonnegative(op, "pad_w", s->pad_w));
  s->P = window_out(s->H, s->R, s->stride_h, s->pad_h);
  s->Q = window_out(s->W, s->S, s->stride_w, s->pad_w);
  if (s->P < 1 || s->Q < 1) {
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "conv2d: a %" PRId64 "x%" PRId64 " kernel does not fit the %" PRId64
                           "x%" PRId64 " input padded by %" PRId64 "x%" PRId64
                           "; use a smaller kernel, more padding or a larger input",
                           s->R, s->S, s->H, s->W, s->pad_h, s->pad_w);
  }
  return GANFW_OK;
}

ganfw_status ganfw_convt2d_shape_init(ganfw_convt2d_shape *s) {
  const char *op = "conv_transpose2d";
  CHECK(check_positive(op, "batch size N", s->N));
  CHECK(check_positive(op, "input channels C", s->C));
  CHECK(check_positive(op, "input height H", s->H));
  CHECK(check_positive(op, "input width W", s->W));
  CHECK(check_positive(op, "output channels K", s->K));
  CHECK(check_positive(op, "kernel height", s->R));
  CHECK(check_positive(op, "kernel width", s->S));
  CHECK(check_positive(op, "stride_h", s->stride_h));
  CHECK(check_positive(op, "stride_w", s->stride_w));
  CHECK(check_nonnegative(op, "pad_h", s->pad_h));
  CHECK(check_nonnegative(op, "pad_w", s->pad_w));
  CHECK(check_nonnegative(op, "out_pad_h", s->out_pad_h));
  CHECK(check_nonnegative(op, "out_pad_w", s->out_pad_w));
  if (s->out_pad_h >= s->stride_h || s->out_pad_w >= s->stride_w) {
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "conv_transpose2d: output padding %" PRId64 "x%" PRId64
                           " must be smaller than the stride %" PRId64 "x%" PRId64,
                           s->out_pad_h, s->out_pad_w, s->stride_h, s->stride_w);
  }
  s->P = (s->H - 1) * s->stride_h - 2 * s->pad_h + s->R + s->out_pad_h;
  s->Q = (s->W - 1) * s->stride_w - 2 * s->pad_w + s->S + s->out_pad_w;
  if (s->P < 1 || s->Q < 1) {
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "conv_transpose2d: padding %" PRId64 "x%" PRId64
                           " leaves an empty output (%" PRId64 "x%" PRId64 ") for a %" PRId64
                           "x%" PRId64 " input and %" PRId64 "x%" PRId64
                           " kernel; reduce the padding",
                           s->pad_h, s->pad_w, s->P, s->Q, s->H, s->W, s->R, s->S);
  }
  return GANFW_OK;
}

ganfw_status ganfw_pool2d_shape_init(ganfw_pool2d_shape *s) {
  const char *op = "pool2d";
  CHECK(check_positive(op, "batch size N", s->N));
  CHECK(check_positive(op, "channels C", s->C));
  CHECK(check_positive(op, "input height H", s->H));
  CHECK(check_positive(op, "input width W", s->W));
  CHECK(check_positive(op, "window height", s->R));
  CHECK(check_positive(op, "window width", s->S));
  CHECK(check_positive(op, "stride_h", s->stride_h));
  CHECK(check_positive(op, "stride_w", s->stride_w));
  CHECK(check_nonnegative(op, "pad_h", s->pad_h));
  CHECK(check_nonnegative(op, "pad_w", s->pad_w));
  /* As PyTorch: a window that could lie entirely in the padding has no defined output. */
  if (2 * s->pad_h > s->R || 2 * s->pad_w > s->S) {
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "pool2d: padding %" PRId64 "x%" PRId64 " is more than half the %" PRId64
                           "x%" PRId64 " window; use at most half the window",
                           s->pad_h, s->pad_w, s->R, s->S);
  }
  s->P = window_out(s->H, s->R, s->stride_h, s->pad_h);
  s->Q = window_out(s->W, s->S, s->stride_w, s->pad_w);
  if (s->P < 1 || s->Q < 1) {
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "pool2d: a %" PRId64 "x%" PRId64 " window does not fit the %" PRId64
                           "x%" PRId64 " input padded by %" PRId64 "x%" PRId64
                           "; use a smaller window or more padding",
                           s->R, s->S, s->H, s->W, s->pad_h, s->pad_w);
  }
  return GANFW_OK;
}
