/* The host table handed to plugins (ganfw/host.h): config getters, tensors through the
 * run's allocator, foreach ops over tensor lists on the run's backend, Philox RNG, tensor math
 * (element-wise with broadcasting, sums over dims, per-channel affine, joins and slices), the
 * ops of attention layers (batched products, softmax, permutes, views, gather and scatter_add)
 * and layers defined by plugins. Each foreach entry checks its lists once, then calls the
 * backend's kernel per tensor; each tensor_* entry checks its tensors and shapes, then calls one
 * kernel. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "backend/quantize_map.h"
#include "config/config.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "ganfw/plugin.h"
#include "base/log.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/alloc.h"
#include "runtime/tensor.h"
#include "nn/layer.h" /* defines: ganfw_plugin_layer_note_create, _note_destroy, _add_tensor */

static ganfw_status host_error(ganfw_ctx *ctx, ganfw_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ganfw_error_setv(code, fmt, ap);
  va_end(ap);
  return code;
}

static void host_log(ganfw_ctx *ctx, int32_t level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ganfw_logv(level, fmt, ap);
  va_end(ap);
}

/* Checks that lists[k][i] (k < nlists) are f32 tensors of one context, each pair of equal
 * element count to lists[0][i]. */
static ganfw_status check_lists(const char *op, int64_t n, int nlists,
                                ganfw_tensor *const *const *lists) {
  if (n < 0) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: negative list length", op);
  for (int64_t i = 0; i < n; i++) {
    const ganfw_tensor *t0 = lists[0][i];
    for (int k = 0; k < nlists; k++) {
      const ganfw_tensor *t = lists[k][i];
      if (!t || t->dtype != GANFW_DTYPE_F32)
        return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                               "%s: tensor %lld of list %d is %s, f32 is required", op,
                               (long long)i, k, t ? ganfw_dtype_name(t->dtype) : "NULL");
      if (t->numel != t0->numel || ganfw_tensor_ctx(t) != ganfw_tensor_ctx(t0))
        return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                               "%s: tensor '%s' (%lld elements) does not match '%s' (%lld)", op,
                               t->name, (long long)t->numel, t0->name, (long long)t0->numel);
    }
  }
  return GANFW_OK;
}

#define BE(t) (ganfw_tensor_ctx(t)->be)

static ganfw_status host_fill(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, float v) {
  ganfw_status st = check_lists("foreach_fill", n, 1, (ganfw_tensor *const *const[]){x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_fill(BE(x[i]), x[i]->numel, x[i]->data, v);
  return st;
}

static ganfw_status host_scale(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, float a) {
  ganfw_status st = check_lists("foreach_scale", n, 1, (ganfw_tensor *const *const[]){x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_scale(BE(x[i]), x[i]->numel, x[i]->data, a);
  return st;
}

static ganfw_status host_add_scalar(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, float a) {
  ganfw_status st = check_lists("foreach_add_scalar", n, 1, (ganfw_tensor *const *const[]){x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_add_scalar(BE(x[i]), x[i]->numel, x[i]->data, a);
  return st;
}

static ganfw_status host_axpy(ganfw_ctx *ctx, ganfw_tensor *const *y, float alpha,
                              ganfw_tensor *const *x, int64_t n) {
  ganfw_status st = check_lists("foreach_axpy", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_axpy(BE(y[i]), y[i]->numel, y[i]->data, alpha, x[i]->data);
  return st;
}

static ganfw_status host_mul(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                             int64_t n) {
  ganfw_status st = check_lists("foreach_mul", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_mul(BE(y[i]), y[i]->numel, y[i]->data, y[i]->data, x[i]->data);
  return st;
}

static ganfw_status host_addcmul(ganfw_ctx *ctx, ganfw_tensor *const *y, float v,
                                 ganfw_tensor *const *a, ganfw_tensor *const *b, int64_t n) {
  ganfw_status st = check_lists("foreach_addcmul", n, 3, (ganfw_tensor *const *const[]){y, a, b});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_addcmul(BE(y[i]), y[i]->numel, y[i]->data, v, a[i]->data, b[i]->data);
  return st;
}

static ganfw_status host_addcdiv(ganfw_ctx *ctx, ganfw_tensor *const *y, float v,
                                 ganfw_tensor *const *a, ganfw_tensor *const *b, int64_t n) {
  ganfw_status st = check_lists("foreach_addcdiv", n, 3, (ganfw_tensor *const *const[]){y, a, b});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_addcdiv(BE(y[i]), y[i]->numel, y[i]->data, v, a[i]->data, b[i]->data);
  return st;
}

static ganfw_status host_sqrt(ganfw_ctx *ctx, ganfw_tensor *const *out, ganfw_tensor *const *x,
                              int64_t n) {
  ganfw_status st = check_lists("foreach_sqrt", n, 2, (ganfw_tensor *const *const[]){out, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_sqrt(BE(x[i]), x[i]->numel, out[i]->data, x[i]->data);
  return st;
}

static ganfw_status host_lerp(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                              float w, int64_t n) {
  ganfw_status st = check_lists("foreach_lerp", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_lerp(BE(y[i]), y[i]->numel, y[i]->data, x[i]->data, w);
  return st;
}

static ganfw_status host_maximum(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                                 int64_t n) {
  ganfw_status st = check_lists("foreach_maximum", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = ganfw_be_maximum(BE(y[i]), y[i]->numel, y[i]->data, x[i]->data);
  return st;
}

static ganfw_status host_copy(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                              int64_t n) {
  ganfw_status st = check_lists("foreach_copy", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = BE(y[i])->vt->copy_d2d(BE(y[i]), y[i]->data, x[i]->data, (size_t)y[i]->nbytes);
  return st;
}

/* The value ops (sum, sumsq, nonfinite) over a list, run as descriptors for their status:
 * *acc gets the results summed (or, for nonfinite, 1 once any is). */
static ganfw_status run_value(int32_t kind, ganfw_tensor *const *x, int64_t n, double *acc) {
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; st == GANFW_OK && i < n; i++) {
    ganfw_op op = {.kind = kind, .shape.d = {x[i]->numel}, .in = {x[i]->data}};
    st = ganfw_backend_run(BE(x[i]), &op);
    *acc += op.result;
  }
  return st;
}

static ganfw_status host_sum(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, double *out) {
  ganfw_status st = check_lists("foreach_sum", n, 1, (ganfw_tensor *const *const[]){x});
  *out = 0;
  return st == GANFW_OK ? run_value(GANFW_OP_SUM, x, n, out) : st;
}

static ganfw_status host_norm(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, double *out) {
  ganfw_status st = check_lists("foreach_norm", n, 1, (ganfw_tensor *const *const[]){x});
  double s = 0;
  if (st == GANFW_OK) st = run_value(GANFW_OP_SUMSQ, x, n, &s);
  *out = __builtin_sqrt(s);
  return st;
}

/* One answer per batch of buffers (NONFINITE_MANY: a GPU waits once for all of them). */
static ganfw_status host_nonfinite(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n,
                                   int32_t *out) {
  ganfw_status st = check_lists("foreach_nonfinite", n, 1, (ganfw_tensor *const *const[]){x});
  *out = 0;
  ganfw_backend *be = n > 0 ? BE(x[0]) : NULL; /* one context: one backend */
  enum { BATCH = 64 };
  const float *p[BATCH];
  int64_t numel[BATCH];
  for (int64_t i = 0; st == GANFW_OK && be && i < n && !*out; i += BATCH) {
    const int64_t k = n - i < BATCH ? n - i : BATCH;
    for (int64_t j = 0; j < k; j++) p[j] = x[i + j]->data, numel[j] = x[i + j]->numel;
    ganfw_op op = {.kind = GANFW_OP_NONFINITE_MANY, .shape.d = {k}, .in = {p, numel}};
    st = ganfw_backend_run(be, &op);
    *out = op.result != 0;
  }
  return st;
}

static ganfw_status host_rng_normal(ganfw_ctx *ctx, ganfw_tensor *t, float mean, float std) {
  ganfw_status st = check_lists("rng_normal", 1, 1, (ganfw_tensor *const *const[]){&t});
  if (st != GANFW_OK) return st;
  return ganfw_ctx_rng_normal(ctx, t->numel, t->data, mean, std);
}

static ganfw_status host_rng_uniform(ganfw_ctx *ctx, ganfw_tensor *t, float lo, float hi) {
  ganfw_status st = check_lists("rng_uniform", 1, 1, (ganfw_tensor *const *const[]){&t});
  if (st != GANFW_OK) return st;
  return ganfw_ctx_rng_uniform(ctx, t->numel, t->data, lo, hi);
}

/* tensor_create and tensor_destroy for plugins: the core's, reported to a plugin layer's
 * call when one is running on this thread (it counts what the layer creates, and refuses to
 * destroy what the layer does not own). */
static ganfw_tensor *host_tensor_create(ganfw_ctx *ctx, int32_t dtype, int32_t ndim,
                                        const int64_t *shape, int32_t category, const char *name) {
  ganfw_tensor *t = ganfw_tensor_create(ctx, dtype, ndim, shape, category, name);
  ganfw_plugin_layer_note_create(t);
  return t;
}

static void host_tensor_destroy(ganfw_tensor *t) {
  if (ganfw_plugin_layer_note_destroy(t)) ganfw_tensor_destroy(t);
}

/* --- tensor math (minor 3) --------------------------------------------------------------- */

/* "[8,16,4,4]" into buf. */
static const char *shape_str(const ganfw_tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int32_t d = 0; d < t->ndim && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, d ? ",%lld" : "%lld", (long long)t->shape[d]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* t is an f32 tensor of ctx's run (any run when ctx is NULL). */
static ganfw_status check_tensor(const char *op, const char *role, ganfw_ctx *ctx,
                                 const ganfw_tensor *t) {
  if (!t) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: %s is NULL", op, role);
  if (t->dtype != GANFW_DTYPE_F32)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: %s '%s' is %s, f32 is required", op, role,
                           t->name, ganfw_dtype_name(t->dtype));
  if (ctx && ganfw_tensor_ctx(t) != ctx)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: %s '%s' belongs to another run than the ctx passed", op, role,
                           t->name);
  return GANFW_OK;
}

/* A kernel's status, named after the host op that ran it. */
static ganfw_status kernel_status(ganfw_status st, const char *op) {
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "%s", op);
}

/* out = a op b with torch's broadcasting. */
static ganfw_status host_binary(ganfw_ctx *ctx, const char *op_name, int32_t op, ganfw_tensor *out,
                                const ganfw_tensor *a, const ganfw_tensor *b) {
  ganfw_status st;
  if ((st = check_tensor(op_name, "out", ctx, out)) || (st = check_tensor(op_name, "a", ctx, a)) ||
      (st = check_tensor(op_name, "b", ctx, b)))
    return st;
  const ganfw_tensor *t[2] = {a, b};
  if (ganfw_tensor_ctx(a) != ganfw_tensor_ctx(out) || ganfw_tensor_ctx(b) != ganfw_tensor_ctx(out))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: '%s', '%s' and '%s' belong to different runs", op_name, out->name,
                           a->name, b->name);
  const int32_t nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  ganfw_bcast_shape s = {.dim = {1, 1, 1, 1}};
  char sa[96], sb[96], so[96], sw[96];
  int32_t fits = out->ndim == nd;
  for (int32_t k = 0; k < nd; k++) { /* k-th dim from the right */
    int64_t dk[2];
    for (int i = 0; i < 2; i++) dk[i] = k < t[i]->ndim ? t[i]->shape[t[i]->ndim - 1 - k] : 1;
    if (dk[0] != dk[1] && dk[0] != 1 && dk[1] != 1)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "%s: '%s' %s and '%s' %s do not broadcast (their dim %d from the "
                             "right: %lld against %lld; each pair must be equal or one of them 1)",
                             op_name, a->name, shape_str(a, sa, sizeof sa), b->name,
                             shape_str(b, sb, sizeof sb), (int)k + 1, (long long)dk[0],
                             (long long)dk[1]);
    const int64_t d = dk[0] == 1 ? dk[1] : dk[0]; /* 1 broadcasts to anything, 0 too */
    s.dim[3 - k] = d;
    if (fits && out->shape[nd - 1 - k] != d) fits = 0;
  }
  if (!fits) {
    ganfw_tensor shape_of = {.ndim = nd};
    for (int32_t k = 0; k < nd; k++) shape_of.shape[k] = s.dim[4 - nd + k];
    return ganfw_error_set(
        GANFW_ERR_INVALID_ARG, "%s: out '%s' is %s, but '%s' %s and '%s' %s broadcast to %s",
        op_name, out->name, shape_str(out, so, sizeof so), a->name, shape_str(a, sa, sizeof sa),
        b->name, shape_str(b, sb, sizeof sb), shape_str(&shape_of, sw, sizeof sw));
  }
  /* strides of each operand in the 4-dim view, 0 where it broadcasts */
  for (int i = 0; i < 2; i++) {
    int64_t *stride = i == 0 ? s.sa : s.sb, step = 1;
    for (int32_t k = 3; k >= 0; k--) {
      const int32_t src = t[i]->ndim - 4 + k; /* the operand's own dim, < 0 when padded */
      const int64_t dim = src >= 0 ? t[i]->shape[src] : 1;
      stride[k] = dim == 1 && s.dim[k] != 1 ? 0 : step;
      step *= dim;
    }
  }
  s.same = a->numel == out->numel && b->numel == out->numel;
  ganfw_backend *be = ganfw_tensor_ctx(out)->be;
  return kernel_status(ganfw_be_binary(be, op, &s, out->data, a->data, b->data), op_name);
}

static ganfw_status host_tensor_add(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                                    const ganfw_tensor *b) {
  return host_binary(ctx, "tensor_add", GANFW_BINARY_ADD, out, a, b);
}
static ganfw_status host_tensor_sub(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                                    const ganfw_tensor *b) {
  return host_binary(ctx, "tensor_sub", GANFW_BINARY_SUB, out, a, b);
}
static ganfw_status host_tensor_mul(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                                    const ganfw_tensor *b) {
  return host_binary(ctx, "tensor_mul", GANFW_BINARY_MUL, out, a, b);
}
static ganfw_status host_tensor_div(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                                    const ganfw_tensor *b) {
  return host_binary(ctx, "tensor_div", GANFW_BINARY_DIV, out, a, b);
}
static ganfw_status host_tensor_maximum(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                                        const ganfw_tensor *b) {
  return host_binary(ctx, "tensor_maximum", GANFW_BINARY_MAXIMUM, out, a, b);
}
static ganfw_status host_tensor_minimum(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                                        const ganfw_tensor *b) {
  return host_binary(ctx, "tensor_minimum", GANFW_BINARY_MINIMUM, out, a, b);
}

/* out = f(x) with the scalars a, b, over x's elements. */
static ganfw_status host_unary(ganfw_ctx *ctx, const char *op_name, int32_t op, ganfw_tensor *out,
                               const ganfw_tensor *x, float a, float b) {
  ganfw_status st;
  if ((st = check_tensor(op_name, "out", ctx, out)) || (st = check_tensor(op_name, "x", ctx, x)))
    return st;
  char sx[96], so[96];
  if (out->numel != x->numel || ganfw_tensor_ctx(out) != ganfw_tensor_ctx(x))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: out '%s' %s does not match x '%s' %s (an element-wise op needs "
                           "one element count, in one run)",
                           op_name, out->name, shape_str(out, so, sizeof so), x->name,
                           shape_str(x, sx, sizeof sx));
  ganfw_backend *be = ganfw_tensor_ctx(out)->be;
  return kernel_status(ganfw_be_unary(be, op, x->numel, out->data, x->data, a, b), op_name);
}

static ganfw_status host_tensor_abs(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x) {
  return host_unary(ctx, "tensor_abs", GANFW_UNARY_ABS, out, x, 0, 0);
}
static ganfw_status host_tensor_sign(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x) {
  return host_unary(ctx, "tensor_sign", GANFW_UNARY_SIGN, out, x, 0, 0);
}
static ganfw_status host_tensor_exp(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x) {
  return host_unary(ctx, "tensor_exp", GANFW_UNARY_EXP, out, x, 0, 0);
}
static ganfw_status host_tensor_log(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x) {
  return host_unary(ctx, "tensor_log", GANFW_UNARY_LOG, out, x, 0, 0);
}
static ganfw_status host_tensor_sqrt(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x) {
  return host_unary(ctx, "tensor_sqrt", GANFW_UNARY_SQRT, out, x, 0, 0);
}
static ganfw_status host_tensor_rsqrt(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x) {
  return host_unary(ctx, "tensor_rsqrt", GANFW_UNARY_RSQRT, out, x, 0, 0);
}
static ganfw_status host_tensor_clamp(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                      float lo, float hi) {
  return host_unary(ctx, "tensor_clamp", GANFW_UNARY_CLAMP, out, x, lo, hi);
}
static ganfw_status host_tensor_mul_scalar(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                           float a) {
  return host_unary(ctx, "tensor_mul_scalar", GANFW_UNARY_MUL_SCALAR, out, x, a, 0);
}
static ganfw_status host_tensor_add_scalar(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                           float a) {
  return host_unary(ctx, "tensor_add_scalar", GANFW_UNARY_ADD_SCALAR, out, x, a, 0);
}
static ganfw_status host_tensor_pow_scalar(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                           float p) {
  return host_unary(ctx, "tensor_pow_scalar", GANFW_UNARY_POW_SCALAR, out, x, p, 0);
}

/* torch.sum / torch.mean over dims, keepdim either way (told apart by out's ndim). */
static ganfw_status host_reduce(ganfw_ctx *ctx, const char *op_name, int32_t mean,
                                ganfw_tensor *out, const ganfw_tensor *x, const int32_t *dims,
                                int32_t n_dims) {
  ganfw_status st;
  if ((st = check_tensor(op_name, "out", ctx, out)) || (st = check_tensor(op_name, "x", ctx, x)))
    return st;
  char sx[96], so[96], sw[96];
  if (ganfw_tensor_ctx(out) != ganfw_tensor_ctx(x))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: '%s' and '%s' belong to different runs",
                           op_name, out->name, x->name);
  if (n_dims < 0 || n_dims > x->ndim || (n_dims > 0 && !dims))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: %d dims to reduce for x '%s' %s; give 0 (all) to %d dims", op_name,
                           (int)n_dims, x->name, shape_str(x, sx, sizeof sx), (int)x->ndim);
  uint32_t reduced = n_dims == 0 ? (1u << x->ndim) - 1u : 0u;
  for (int32_t i = 0; i < n_dims; i++) {
    const int32_t d = dims[i] < 0 ? dims[i] + x->ndim : dims[i];
    if (d < 0 || d >= x->ndim || (reduced >> d & 1u))
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "%s: dim %d of x '%s' %s is %s; dims must be distinct, in [%d, %d)",
                             op_name, (int)dims[i], x->name, shape_str(x, sx, sizeof sx),
                             d < 0 || d >= x->ndim ? "out of range" : "given twice", (int)-x->ndim,
                             (int)x->ndim);
    reduced |= 1u << d;
  }
  /* out: x's shape with the reduced dims 1 (keepdim) or left out */
  int32_t keep_ok = out->ndim == x->ndim, drop_ok = 1, kept = 0;
  int64_t count = 1;
  for (int32_t d = 0; d < x->ndim; d++) {
    const int32_t r = reduced >> d & 1u;
    if (r) count *= x->shape[d];
    if (keep_ok && out->shape[d] != (r ? 1 : x->shape[d])) keep_ok = 0;
    if (!r && (kept >= out->ndim || out->shape[kept++] != x->shape[d])) drop_ok = 0;
  }
  if (kept != out->ndim) drop_ok = 0;
  if (!keep_ok && !drop_ok) {
    ganfw_tensor want = {.ndim = x->ndim};
    for (int32_t d = 0; d < x->ndim; d++) want.shape[d] = reduced >> d & 1u ? 1 : x->shape[d];
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: out '%s' is %s, but reducing x '%s' %s gives %s (keepdim) or that "
                           "without the reduced dims",
                           op_name, out->name, shape_str(out, so, sizeof so), x->name,
                           shape_str(x, sx, sizeof sx), shape_str(&want, sw, sizeof sw));
  }
  ganfw_reduce_shape s = {.dim = {1, 1, 1, 1}};
  for (int32_t d = 0; d < x->ndim; d++) {
    s.dim[4 - x->ndim + d] = x->shape[d];
    if (reduced >> d & 1u) s.mask |= 1u << (4 - x->ndim + d);
  }
  ganfw_backend *be = ganfw_tensor_ctx(out)->be;
  return kernel_status(
      ganfw_be_reduce_sum(be, &s, mean ? 1.0 / (double)count : 1.0, x->data, out->data), op_name);
}

static ganfw_status host_tensor_sum(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                    const int32_t *dims, int32_t n_dims) {
  return host_reduce(ctx, "tensor_sum", 0, out, x, dims, n_dims);
}

static ganfw_status host_tensor_mean(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                     const int32_t *dims, int32_t n_dims) {
  return host_reduce(ctx, "tensor_mean", 1, out, x, dims, n_dims);
}

/* dim in [-ndim, ndim) -> [0, ndim), or -1. */
static int32_t norm_dim(int32_t dim, int32_t ndim) {
  if (dim < 0) dim += ndim;
  return dim >= 0 && dim < ndim ? dim : -1;
}

/* The product of shape[lo..hi). */
static int64_t span(const ganfw_tensor *t, int32_t lo, int32_t hi) {
  int64_t p = 1;
  for (int32_t d = lo; d < hi; d++) p *= t->shape[d];
  return p;
}

/* 1 when a and b agree in ndim and in every dim but `dim`. */
static int same_but(const ganfw_tensor *a, const ganfw_tensor *b, int32_t dim) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (d != dim && a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* Copies rows blocks: for each of `outer` slabs, `count` floats from src (slab stride
 * src_stride) to dst (dst_stride), both in floats. */
static ganfw_status copy_slabs(ganfw_backend *be, float *dst, int64_t dst_stride, const float *src,
                               int64_t src_stride, int64_t outer, int64_t count) {
  ganfw_status st = GANFW_OK;
  if (dst_stride == count && src_stride == count) /* contiguous: one copy */
    return be->vt->copy_d2d(be, dst, src, (size_t)(outer * count) * sizeof(float));
  for (int64_t o = 0; o < outer && st == GANFW_OK; o++)
    st = be->vt->copy_d2d(be, dst + o * dst_stride, src + o * src_stride,
                          (size_t)count * sizeof(float));
  return st;
}

static ganfw_status host_tensor_cat(ganfw_ctx *ctx, ganfw_tensor *out,
                                    const ganfw_tensor *const *xs, int32_t n, int32_t dim) {
  const char *op = "tensor_cat";
  ganfw_status st = check_tensor(op, "out", ctx, out);
  if (st != GANFW_OK) return st;
  if (n < 1 || !xs) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: no tensors to join", op);
  const int32_t d = norm_dim(dim, out->ndim);
  if (d < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: dim %d is outside out '%s' of %d dims", op,
                           (int)dim, out->name, (int)out->ndim);
  int64_t total = 0;
  char sx[96], so[96], role[32];
  for (int32_t i = 0; i < n; i++) {
    snprintf(role, sizeof role, "xs[%d]", (int)i);
    if ((st = check_tensor(op, role, ctx, xs[i])) != GANFW_OK) return st;
    if (!same_but(xs[i], out, d) || ganfw_tensor_ctx(xs[i]) != ganfw_tensor_ctx(out))
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "%s: %s '%s' is %s and out '%s' is %s: they must agree but in dim %d",
                             op, role, xs[i]->name, shape_str(xs[i], sx, sizeof sx), out->name,
                             shape_str(out, so, sizeof so), (int)d);
    total += xs[i]->shape[d];
  }
  if (total != out->shape[d])
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: the inputs have %lld in dim %d together, out '%s' %s has %lld", op,
                           (long long)total, (int)d, out->name, shape_str(out, so, sizeof so),
                           (long long)out->shape[d]);
  ganfw_backend *be = ganfw_tensor_ctx(out)->be;
  const int64_t outer = span(out, 0, d), inner = span(out, d + 1, out->ndim);
  int64_t at = 0;
  for (int32_t i = 0; i < n && st == GANFW_OK; i++) {
    const int64_t count = xs[i]->shape[d] * inner;
    st = copy_slabs(be, (float *)out->data + at * inner, out->shape[d] * inner,
                    (const float *)xs[i]->data, count, outer, count);
    at += xs[i]->shape[d];
  }
  return kernel_status(st, op);
}

static ganfw_status host_tensor_narrow(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                       int32_t dim, int64_t start) {
  const char *op = "tensor_narrow";
  ganfw_status st;
  if ((st = check_tensor(op, "out", ctx, out)) || (st = check_tensor(op, "x", ctx, x))) return st;
  const int32_t d = norm_dim(dim, x->ndim);
  char sx[96], so[96];
  if (d < 0 || !same_but(out, x, d) || ganfw_tensor_ctx(out) != ganfw_tensor_ctx(x) || start < 0 ||
      start + out->shape[d] > x->shape[d])
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: out '%s' %s from x '%s' %s at %lld in dim %d: out must have x's "
                           "shape but in that dim, and fit in x from there",
                           op, out->name, shape_str(out, so, sizeof so), x->name,
                           shape_str(x, sx, sizeof sx), (long long)start, (int)dim);
  ganfw_backend *be = ganfw_tensor_ctx(out)->be;
  const int64_t outer = span(x, 0, d), inner = span(x, d + 1, x->ndim);
  st = copy_slabs(be, out->data, out->shape[d] * inner, (const float *)x->data + start * inner,
                  x->shape[d] * inner, outer, out->shape[d] * inner);
  return kernel_status(st, op);
}

static ganfw_status host_tensor_channel_affine(ganfw_ctx *ctx, ganfw_tensor *out,
                                               const ganfw_tensor *x, const ganfw_tensor *scale,
                                               const ganfw_tensor *shift) {
  const char *op = "tensor_channel_affine";
  ganfw_status st;
  if ((st = check_tensor(op, "out", ctx, out)) || (st = check_tensor(op, "x", ctx, x)) ||
      (scale && (st = check_tensor(op, "scale", ctx, scale))) ||
      (shift && (st = check_tensor(op, "shift", ctx, shift))))
    return st;
  char sx[96], so[96];
  if (x->ndim < 2)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: x '%s' is %s; a per-channel op needs [N,C,...] (2 to 4 dims)", op,
                           x->name, shape_str(x, sx, sizeof sx));
  int same = out->ndim == x->ndim && ganfw_tensor_ctx(out) == ganfw_tensor_ctx(x);
  for (int32_t d = 0; same && d < x->ndim; d++) same = out->shape[d] == x->shape[d];
  if (!same)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: out '%s' is %s, x '%s' is %s: out needs x's shape", op, out->name,
                           shape_str(out, so, sizeof so), x->name, shape_str(x, sx, sizeof sx));
  const int64_t C = x->shape[1];
  const ganfw_tensor *p[2] = {scale, shift};
  for (int i = 0; i < 2; i++)
    if (p[i] && (p[i]->numel != C || ganfw_tensor_ctx(p[i]) != ganfw_tensor_ctx(x)))
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "%s: %s '%s' is %s, x '%s' %s has %lld channels (dim 1): give %lld "
                             "values of the same run",
                             op, i ? "shift" : "scale", p[i]->name, shape_str(p[i], so, sizeof so),
                             x->name, shape_str(x, sx, sizeof sx), (long long)C, (long long)C);
  if (x->numel == 0) return GANFW_OK;
  ganfw_backend *be = ganfw_tensor_ctx(out)->be;
  const int64_t N = x->shape[0], inner = x->numel / (N * C);
  return kernel_status(ganfw_be_channel_affine(be, N, C, inner, x->data, scale ? scale->data : NULL,
                                               shift ? shift->data : NULL, out->data),
                       op);
}

/* --- attention, layouts and indexing (minor 8) ------------------------------------------- */

/* 1 when the memory of a and b overlaps. */
static int overlap(const ganfw_tensor *a, const ganfw_tensor *b) {
  const char *pa = a->data, *pb = b->data;
  return a->nbytes > 0 && b->nbytes > 0 && pa < pb + b->nbytes && pb < pa + a->nbytes;
}

/* The output `out_role` shares no memory with the input `in_role`; with same_ok it may also
 * be that input itself (in place). */
static ganfw_status check_apart(const char *op, const char *out_role, const ganfw_tensor *out,
                                const char *in_role, const ganfw_tensor *in, int same_ok) {
  if (!overlap(out, in) || (same_ok && out->data == in->data && out->nbytes == in->nbytes))
    return GANFW_OK;
  return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: %s '%s' shares memory with %s '%s'; %s", op,
                         out_role, out->name, in_role, in->name,
                         same_ok ? "it may be that tensor itself, but not a part of it"
                                 : "give it a tensor of its own");
}

/* t[0..n) belong to one run. */
static ganfw_status check_one_run(const char *op, const ganfw_tensor *const *t, int n) {
  for (int i = 1; i < n; i++)
    if (ganfw_tensor_ctx(t[i]) != ganfw_tensor_ctx(t[0]))
      return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: '%s' and '%s' belong to different runs",
                             op, t[0]->name, t[i]->name);
  return GANFW_OK;
}

/* 1 when a and b have one shape. */
static int same_shape(const ganfw_tensor *a, const ganfw_tensor *b) {
  return same_but(a, b, -1);
}

/* index is an int32 tensor of ctx's run (any run when ctx is NULL). */
static ganfw_status check_index_tensor(const char *op, ganfw_ctx *ctx, const ganfw_tensor *index) {
  if (!index) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: index is NULL", op);
  if (index->dtype != GANFW_DTYPE_I32)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: index '%s' is %s, i32 is required (GANFW_DTYPE_I32)", op,
                           index->name, ganfw_dtype_name(index->dtype));
  if (ctx && ganfw_tensor_ctx(index) != ctx)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: index '%s' belongs to another run than the ctx passed", op,
                           index->name);
  return GANFW_OK;
}

/* Indices read back from the device at a time. */
#define INDEX_CHUNK 16384

/* Every value of index lies in [0, t->shape[dim]), the dim of t ('role') it indexes: read
 * back a chunk at a time (a copy to the host, so it waits for the device; under `ganfw plan`
 * the meta backend reads zeros). The error names the first value outside and where it is. */
static ganfw_status check_index_values(const char *op, const ganfw_tensor *index, const char *role,
                                       const ganfw_tensor *t, int32_t dim) {
  const int64_t n = index->numel, limit = t->shape[dim];
  if (n == 0) return GANFW_OK;
  int32_t *v = malloc((size_t)(n < INDEX_CHUNK ? n : INDEX_CHUNK) * sizeof *v);
  if (!v)
    return ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory to check index '%s'", op,
                           index->name);
  ganfw_backend *be = BE(index);
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; i < n && st == GANFW_OK; i += INDEX_CHUNK) {
    const int64_t k = n - i < INDEX_CHUNK ? n - i : INDEX_CHUNK;
    st = be->vt->copy_d2h(be, v, (const int32_t *)index->data + i, (size_t)k * sizeof *v);
    if (st != GANFW_OK) {
      st = ganfw_error_wrap(st, "%s: reading index '%s'", op, index->name);
      break;
    }
    for (int64_t j = 0; j < k; j++) {
      if (v[j] >= 0 && v[j] < limit) continue;
      char si[96], stt[96];
      st = ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: index '%s' %s holds %d at element %lld, outside [0, %lld): the "
                           "size of dim %d of %s '%s' %s",
                           op, index->name, shape_str(index, si, sizeof si), (int)v[j],
                           (long long)(i + j), (long long)limit, (int)dim, role, t->name,
                           shape_str(t, stt, sizeof stt));
      break;
    }
  }
  free(v);
  return st;
}

static ganfw_status host_tensor_bmm(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                                    int32_t trans_a, const ganfw_tensor *b, int32_t trans_b,
                                    int32_t accumulate) {
  const char *op = "tensor_bmm";
  ganfw_status st;
  if ((st = check_tensor(op, "out", ctx, out)) || (st = check_tensor(op, "a", ctx, a)) ||
      (st = check_tensor(op, "b", ctx, b)) ||
      (st = check_one_run(op, (const ganfw_tensor *[]){out, a, b}, 3)))
    return st;
  char sa[96], sb[96], so[96];
  const char *ta = trans_a ? " (transposed)" : "", *tb = trans_b ? " (transposed)" : "";
  if (a->ndim != 3 || b->ndim != 3 || out->ndim != 3)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: a '%s' %s, b '%s' %s and out '%s' %s must each have 3 dims, a "
                           "batch of matrices [B,rows,columns]",
                           op, a->name, shape_str(a, sa, sizeof sa), b->name,
                           shape_str(b, sb, sizeof sb), out->name, shape_str(out, so, sizeof so));
  const int64_t B = a->shape[0];
  const int64_t M = trans_a ? a->shape[2] : a->shape[1], K = trans_a ? a->shape[1] : a->shape[2];
  const int64_t Kb = trans_b ? b->shape[2] : b->shape[1], N = trans_b ? b->shape[1] : b->shape[2];
  if (b->shape[0] != B || Kb != K)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: a '%s' %s%s and b '%s' %s%s do not multiply: op(a) is "
                           "[%lld,%lld,%lld] and op(b) [%lld,%lld,%lld], where torch.bmm needs "
                           "[B,M,K] and [B,K,N]",
                           op, a->name, shape_str(a, sa, sizeof sa), ta, b->name,
                           shape_str(b, sb, sizeof sb), tb, (long long)B, (long long)M,
                           (long long)K, (long long)b->shape[0], (long long)Kb, (long long)N);
  if (out->shape[0] != B || out->shape[1] != M || out->shape[2] != N)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: out '%s' is %s, but op(a) @ op(b) of a '%s' %s%s and b '%s' "
                           "%s%s is [%lld,%lld,%lld]",
                           op, out->name, shape_str(out, so, sizeof so), a->name,
                           shape_str(a, sa, sizeof sa), ta, b->name, shape_str(b, sb, sizeof sb),
                           tb, (long long)B, (long long)M, (long long)N);
  if ((st = check_apart(op, "out", out, "a", a, 0)) ||
      (st = check_apart(op, "out", out, "b", b, 0)))
    return st;
  if (out->numel == 0) return GANFW_OK;
  ganfw_op desc = {.kind = GANFW_OP_BMM,
                   .mode = (trans_a ? 1 : 0) | (trans_b ? 2 : 0),
                   .shape.d = {B, M, N, K},
                   .in = {a->data, b->data},
                   .out = {out->data},
                   .sc = {1.0, accumulate ? 1.0 : 0.0}};
  return kernel_status(ganfw_backend_run(BE(out), &desc), op);
}

/* The descriptor's [outer, dim, inner] of a softmax over `dim` of t[0], after checking that
 * the n tensors t (roles role[]) have one shape and run and that dim is one of their dims. */
static ganfw_status softmax_shape(const char *op, const ganfw_tensor *const *t,
                                  const char *const *role, int n, int32_t dim, int64_t *d) {
  ganfw_status st = check_one_run(op, t, n);
  if (st != GANFW_OK) return st;
  char s0[96], si[96];
  for (int i = 1; i < n; i++)
    if (!same_shape(t[i], t[0]))
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "%s: %s '%s' is %s, %s '%s' is %s: they need one shape", op, role[0],
                             t[0]->name, shape_str(t[0], s0, sizeof s0), role[i], t[i]->name,
                             shape_str(t[i], si, sizeof si));
  const int32_t k = norm_dim(dim, t[0]->ndim);
  if (k < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: dim %d is outside %s '%s' %s; give one in [%d, %d)", op, (int)dim,
                           role[0], t[0]->name, shape_str(t[0], s0, sizeof s0), (int)-t[0]->ndim,
                           (int)t[0]->ndim);
  d[0] = span(t[0], 0, k), d[1] = t[0]->shape[k], d[2] = span(t[0], k + 1, t[0]->ndim);
  return GANFW_OK;
}

static ganfw_status host_tensor_softmax(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                        int32_t dim, int32_t log) {
  const char *op = log ? "tensor_softmax (log)" : "tensor_softmax";
  ganfw_status st;
  int64_t d[3] = {0};
  if ((st = check_tensor(op, "out", ctx, out)) || (st = check_tensor(op, "x", ctx, x)) ||
      (st = softmax_shape(op, (const ganfw_tensor *[]){x, out}, (const char *[]){"x", "out"}, 2,
                          dim, d)) ||
      (st = check_apart(op, "out", out, "x", x, 1)))
    return st;
  if (x->numel == 0) return GANFW_OK;
  ganfw_op desc = {.kind = GANFW_OP_SOFTMAX_FORWARD,
                   .mode = log ? 1 : 0,
                   .shape.d = {d[0], d[1], d[2]},
                   .in = {x->data},
                   .out = {out->data}};
  return kernel_status(ganfw_backend_run(BE(out), &desc), op);
}

static ganfw_status host_tensor_softmax_backward(ganfw_ctx *ctx, ganfw_tensor *dx,
                                                 const ganfw_tensor *y, const ganfw_tensor *dy,
                                                 int32_t dim, int32_t log) {
  const char *op = log ? "tensor_softmax_backward (log)" : "tensor_softmax_backward";
  ganfw_status st;
  int64_t d[3] = {0};
  if ((st = check_tensor(op, "dx", ctx, dx)) || (st = check_tensor(op, "y", ctx, y)) ||
      (st = check_tensor(op, "dy", ctx, dy)) ||
      (st = softmax_shape(op, (const ganfw_tensor *[]){y, dy, dx},
                          (const char *[]){"y", "dy", "dx"}, 3, dim, d)) ||
      (st = check_apart(op, "dx", dx, "dy", dy, 1)) || (st = check_apart(op, "dx", dx, "y", y, 1)))
    return st;
  if (y->numel == 0) return GANFW_OK;
  ganfw_op desc = {.kind = GANFW_OP_SOFTMAX_BACKWARD,
                   .mode = log ? 1 : 0,
                   .shape.d = {d[0], d[1], d[2]},
                   .in = {y->data, dy->data},
                   .out = {dx->data}};
  return kernel_status(ganfw_backend_run(BE(dx), &desc), op);
}

static ganfw_status host_tensor_permute(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                        const int32_t *perm) {
  const char *op = "tensor_permute";
  ganfw_status st;
  if ((st = check_tensor(op, "out", ctx, out)) || (st = check_tensor(op, "x", ctx, x)) ||
      (st = check_one_run(op, (const ganfw_tensor *[]){out, x}, 2)))
    return st;
  const int32_t nd = x->ndim;
  char sx[96], so[96], sp[64];
  if (nd > 0 && !perm) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: perm is NULL", op);
  /* perm as given, for the messages */
  size_t at = (size_t)snprintf(sp, sizeof sp, "(");
  for (int32_t k = 0; k < nd && at < sizeof sp; k++)
    at += (size_t)snprintf(sp + at, sizeof sp - at, k ? ",%d" : "%d", (int)perm[k]);
  if (at < sizeof sp) snprintf(sp + at, sizeof sp - at, ")");
  int32_t p[GANFW_MAX_DIMS];
  uint32_t seen = 0;
  for (int32_t k = 0; k < nd; k++) {
    p[k] = norm_dim(perm[k], nd);
    if (p[k] < 0 || (seen >> p[k] & 1u))
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "%s: perm %s is not a permutation of the %d dims of x '%s' %s", op, sp,
                             (int)nd, x->name, shape_str(x, sx, sizeof sx));
    seen |= 1u << p[k];
  }
  int fits = out->ndim == nd;
  for (int32_t k = 0; fits && k < nd; k++) fits = out->shape[k] == x->shape[p[k]];
  if (!fits) {
    ganfw_tensor want = {.ndim = nd};
    for (int32_t k = 0; k < nd; k++) want.shape[k] = x->shape[p[k]];
    char sw[96];
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: out '%s' is %s, but x '%s' %s permuted by %s is %s", op, out->name,
                           shape_str(out, so, sizeof so), x->name, shape_str(x, sx, sizeof sx), sp,
                           shape_str(&want, sw, sizeof sw));
  }
  if ((st = check_apart(op, "out", out, "x", x, 0))) return st;
  if (x->numel == 0) return GANFW_OK;
  /* four dims, padded in front with 1s that stay in place */
  const int32_t pad = GANFW_MAX_DIMS - nd;
  ganfw_op desc = {.kind = GANFW_OP_PERMUTE, .in = {x->data}, .out = {out->data}};
  for (int32_t k = 0; k < GANFW_MAX_DIMS; k++) {
    desc.shape.d[k] = k < pad ? 1 : x->shape[k - pad];
    desc.mode |= (k < pad ? k : p[k - pad] + pad) << (2 * k);
  }
  return kernel_status(ganfw_backend_run(BE(out), &desc), op);
}

static ganfw_tensor *host_tensor_reshape(ganfw_tensor *x, int32_t ndim, const int64_t *shape,
                                         const char *name) {
  const char *op = "tensor_reshape";
  if (!x) {
    ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: x is NULL", op);
    return NULL;
  }
  char sx[96], sw[96];
  if (ndim < 0 || ndim > GANFW_MAX_DIMS || (ndim > 0 && !shape)) {
    ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: a view of x '%s' %s with %d dims%s; give 0 to %d",
                    op, x->name, shape_str(x, sx, sizeof sx), (int)ndim,
                    ndim > 0 && !shape ? " and no shape" : "", GANFW_MAX_DIMS);
    return NULL;
  }
  ganfw_tensor want = {.ndim = ndim};
  int64_t count = 1;
  int negative = 0;
  for (int32_t k = 0; k < ndim; k++) {
    want.shape[k] = shape[k];
    negative |= shape[k] < 0;
    count *= shape[k];
  }
  if (negative || count != x->numel) {
    ganfw_error_set(
        GANFW_ERR_INVALID_ARG, "%s: x '%s' %s has %lld elements, a view of it as %s %s", op,
        x->name, shape_str(x, sx, sizeof sx), (long long)x->numel, shape_str(&want, sw, sizeof sw),
        negative ? "has a negative size (every size must be given)" : "has another count");
    return NULL;
  }
  ganfw_tensor *t = ganfw_tensor_view(x, ndim, shape, name ? name : x->name);
  ganfw_plugin_layer_note_create(t);
  return t;
}

static ganfw_status host_tensor_gather(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                       int32_t dim, const ganfw_tensor *index) {
  const char *op = "tensor_gather";
  ganfw_status st;
  if ((st = check_tensor(op, "out", ctx, out)) || (st = check_tensor(op, "x", ctx, x)) ||
      (st = check_index_tensor(op, ctx, index)) ||
      (st = check_one_run(op, (const ganfw_tensor *[]){out, x, index}, 3)))
    return st;
  const int32_t d = norm_dim(dim, x->ndim);
  char sx[96], si[96], so[96];
  if (d < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: dim %d is outside x '%s' %s; give one in [%d, %d)", op, (int)dim,
                           x->name, shape_str(x, sx, sizeof sx), (int)-x->ndim, (int)x->ndim);
  if (!same_but(index, x, d))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: index '%s' is %s and x '%s' is %s: index needs x's shape but in "
                           "dim %d",
                           op, index->name, shape_str(index, si, sizeof si), x->name,
                           shape_str(x, sx, sizeof sx), (int)d);
  if (!same_shape(out, index))
    return ganfw_error_set(
        GANFW_ERR_INVALID_ARG, "%s: out '%s' is %s and index '%s' is %s: out needs index's shape",
        op, out->name, shape_str(out, so, sizeof so), index->name, shape_str(index, si, sizeof si));
  if ((st = check_apart(op, "out", out, "x", x, 0))) return st;
  if (out->numel == 0) return GANFW_OK;
  if ((st = check_index_values(op, index, "x", x, d))) return st;
  ganfw_op desc = {
      .kind = GANFW_OP_GATHER,
      .shape.d = {span(x, 0, d), x->shape[d], index->shape[d], span(x, d + 1, x->ndim)},
      .in = {x->data, index->data},
      .out = {out->data}};
  return kernel_status(ganfw_backend_run(BE(out), &desc), op);
}

static ganfw_status host_tensor_scatter_add(ganfw_ctx *ctx, ganfw_tensor *out, int32_t dim,
                                            const ganfw_tensor *index, const ganfw_tensor *src) {
  const char *op = "tensor_scatter_add";
  ganfw_status st;
  if ((st = check_tensor(op, "out", ctx, out)) || (st = check_index_tensor(op, ctx, index)) ||
      (st = check_tensor(op, "src", ctx, src)) ||
      (st = check_one_run(op, (const ganfw_tensor *[]){out, index, src}, 3)))
    return st;
  const int32_t d = norm_dim(dim, out->ndim);
  char so[96], si[96], ss[96];
  if (d < 0)
    return ganfw_error_set(
        GANFW_ERR_INVALID_ARG, "%s: dim %d is outside out '%s' %s; give one in [%d, %d)", op,
        (int)dim, out->name, shape_str(out, so, sizeof so), (int)-out->ndim, (int)out->ndim);
  if (!same_shape(index, src))
    return ganfw_error_set(
        GANFW_ERR_INVALID_ARG, "%s: index '%s' is %s and src '%s' is %s: they need one shape", op,
        index->name, shape_str(index, si, sizeof si), src->name, shape_str(src, ss, sizeof ss));
  if (!same_but(index, out, d))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: index '%s' is %s and out '%s' is %s: index needs out's shape but "
                           "in dim %d",
                           op, index->name, shape_str(index, si, sizeof si), out->name,
                           shape_str(out, so, sizeof so), (int)d);
  if ((st = check_apart(op, "out", out, "src", src, 0))) return st;
  if (index->numel == 0) return GANFW_OK;
  if ((st = check_index_values(op, index, "out", out, d))) return st;
  ganfw_op desc = {
      .kind = GANFW_OP_SCATTER_ADD,
      .shape.d = {span(out, 0, d), out->shape[d], index->shape[d], span(out, d + 1, out->ndim)},
      .in = {index->data, src->data},
      .out = {out->data}};
  return kernel_status(ganfw_backend_run(BE(out), &desc), op);
}

/* --- 8-bit blockwise quantisation (minor 10) ---------------------------------------------- */

/* The checks quantize_blockwise and dequantize_blockwise share: x f32, q u8 of x's element
 * count, absmax f32 of ceil(n / block) values, code f32 of 256, one run, block >= 1. */
static ganfw_status check_quantized(const char *op, ganfw_ctx *ctx, const ganfw_tensor *x,
                                    const ganfw_tensor *code, int64_t block, const ganfw_tensor *q,
                                    const ganfw_tensor *absmax) {
  ganfw_status st;
  if ((st = check_tensor(op, "x", ctx, x)) || (st = check_tensor(op, "code", ctx, code)) ||
      (st = check_tensor(op, "absmax", ctx, absmax)))
    return st;
  if (!q) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: q is NULL", op);
  if (q->dtype != GANFW_DTYPE_U8)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: q '%s' is %s, u8 is required (GANFW_DTYPE_U8)", op, q->name,
                           ganfw_dtype_name(q->dtype));
  if ((st = check_one_run(op, (const ganfw_tensor *[]){x, code, q, absmax}, 4))) return st;
  if (block < 1)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: block is %lld; give the number of values per block (>= 1, "
                           "bitsandbytes uses 2048 for optimizer state)",
                           op, (long long)block);
  if (code->numel != GANFW_QUANTIZE_CODE_SIZE)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: code '%s' has %lld values; it needs %d (e.g. from "
                           "quantize_dynamic_map)",
                           op, code->name, (long long)code->numel, GANFW_QUANTIZE_CODE_SIZE);
  if (q->numel != x->numel)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: q '%s' has %lld values and x '%s' %lld; they need one count", op,
                           q->name, (long long)q->numel, x->name, (long long)x->numel);
  const int64_t blocks = (x->numel + block - 1) / block;
  if (absmax->numel != blocks)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "%s: absmax '%s' has %lld values; %lld values in blocks of %lld need "
                           "%lld",
                           op, absmax->name, (long long)absmax->numel, (long long)x->numel,
                           (long long)block, (long long)blocks);
  return GANFW_OK;
}

static ganfw_status host_quantize_blockwise(ganfw_ctx *ctx, const ganfw_tensor *x,
                                            const ganfw_tensor *code, int64_t block,
                                            ganfw_tensor *q, ganfw_tensor *absmax) {
  const char *op = "quantize_blockwise";
  ganfw_status st;
  if ((st = check_quantized(op, ctx, x, code, block, q, absmax))) return st;
  if ((st = check_apart(op, "q", q, "x", x, 0)) ||
      (st = check_apart(op, "q", q, "code", code, 0)) ||
      (st = check_apart(op, "absmax", absmax, "x", x, 0)) ||
      (st = check_apart(op, "absmax", absmax, "code", code, 0)) ||
      (st = check_apart(op, "absmax", absmax, "q", q, 0)))
    return st;
  if (x->numel == 0) return GANFW_OK;
  ganfw_op desc = {.kind = GANFW_OP_QUANTIZE_BLOCKWISE,
                   .shape.d = {x->numel, block},
                   .in = {x->data, code->data},
                   .out = {q->data, absmax->data}};
  return kernel_status(ganfw_backend_run(BE(x), &desc), op);
}

static ganfw_status host_dequantize_blockwise(ganfw_ctx *ctx, const ganfw_tensor *q,
                                              const ganfw_tensor *absmax, const ganfw_tensor *code,
                                              int64_t block, ganfw_tensor *x) {
  const char *op = "dequantize_blockwise";
  ganfw_status st;
  if ((st = check_quantized(op, ctx, x, code, block, q, absmax))) return st;
  if ((st = check_apart(op, "x", x, "q", q, 0)) ||
      (st = check_apart(op, "x", x, "absmax", absmax, 0)) ||
      (st = check_apart(op, "x", x, "code", code, 0)))
    return st;
  if (x->numel == 0) return GANFW_OK;
  ganfw_op desc = {.kind = GANFW_OP_DEQUANTIZE_BLOCKWISE,
                   .shape.d = {x->numel, block},
                   .in = {q->data, absmax->data, code->data},
                   .out = {x->data}};
  return kernel_status(ganfw_backend_run(BE(x), &desc), op);
}

static ganfw_status host_quantize_dynamic_map(int32_t is_signed, float *code) {
  if (!code)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "quantize_dynamic_map: code is NULL; give room for 256 floats");
  ganfw_quantize_dynamic_map(is_signed != 0, code);
  return GANFW_OK;
}

/* --- layers from plugins (minor 3) ------------------------------------------------------- */

static ganfw_status host_layer_add_param(ganfw_layer_init *li, const char *name, int32_t ndim,
                                         const int64_t *shape, ganfw_tensor **out) {
  return ganfw_plugin_layer_add_tensor(li, 0, name, ndim, shape, out);
}

static ganfw_status host_layer_add_buffer(ganfw_layer_init *li, const char *name, int32_t ndim,
                                          const int64_t *shape, ganfw_tensor **out) {
  return ganfw_plugin_layer_add_tensor(li, 1, name, ndim, shape, out);
}

/* net_param_info for plugins: fills only what the caller's struct_size holds (a plugin
 * built against older headers passes a smaller ganfw_param_info) and never refuses a
 * smaller one, as long as it holds struct_size itself. */
static ganfw_status host_net_param_info(ganfw_net *net, int64_t i, ganfw_param_info *out) {
  if (!out || out->struct_size < sizeof out->struct_size)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net_param_info: out is NULL or its struct_size is below 4 bytes; set "
                           "out->struct_size to sizeof(ganfw_param_info)");
  ganfw_param_info full = {.struct_size = sizeof full};
  ganfw_status st = ganfw_net_param_info(net, i, &full);
  if (st != GANFW_OK) return st;
  uint32_t caller = out->struct_size;
  size_t n = caller < sizeof full ? caller : sizeof full;
  memcpy((char *)out + sizeof caller, (const char *)&full + sizeof caller, n - sizeof caller);
  return GANFW_OK;
}

static const char *host_error_message(void) {
  return ganfw_error_message();
}

static ganfw_status host_memory_stats(ganfw_ctx *ctx, ganfw_memory_stats *out) {
  if (!ctx || !out || out->struct_size < sizeof out->struct_size)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "memory_stats: ctx or out is NULL, or out->struct_size is below 4 "
                           "bytes; set it to sizeof(ganfw_memory_stats)");
  ganfw_alloc_stats a;
  ganfw_alloc_get_stats(ctx->alloc, &a);
  ganfw_memory_stats m;
  memset(&m, 0, sizeof m);
  m.struct_size = out->struct_size;
  m.limit = (int64_t)ganfw_alloc_memory_limit(ctx->alloc);
  size_t total = 0, free_bytes = 0;
  if (m.limit)
    m.capacity = m.limit;
  else if (ctx->be->vt->capacity && ctx->be->vt->capacity(ctx->be, &total, &free_bytes) == GANFW_OK)
    m.capacity = (int64_t)total;
  m.allocated = a.allocated.current;
  m.allocated_peak = a.allocated.peak;
  m.reserved = a.reserved.current;
  m.reserved_peak = a.reserved.peak;
  _Static_assert(GANFW_MEM_COUNT <= GANFW_MEM_STATS_CATEGORIES,
                 "ganfw_memory_stats has room for every category");
  for (int c = 0; c < GANFW_MEM_COUNT; c++) {
    m.category[c] = a.category[c].current;
    m.category_peak[c] = a.category[c].peak;
  }
  m.num_ooms = a.num_ooms;
  size_t n = out->struct_size < sizeof m ? out->struct_size : sizeof m;
  memcpy(out, &m, n);
  return GANFW_OK;
}

/* The host's extensions by id, handed in by the layers above that implement them (the step
 * calls of trainer plugins come from train/). Set once per id with the same table each time,
 * before any plugin that asks for it is created. */
enum { HOST_EXTENSION_MAX = 8 };
static struct {
  const char *id;
  const void *table;
} host_extensions[HOST_EXTENSION_MAX];

ganfw_status ganfw_host_provide_extension(const char *id, const void *table) {
  if (!id || !table)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "host extension: NULL id or table");
  for (int i = 0; i < HOST_EXTENSION_MAX; i++) {
    if (host_extensions[i].id && strcmp(host_extensions[i].id, id) == 0) {
      host_extensions[i].table = table;
      return GANFW_OK;
    }
    if (!host_extensions[i].id) {
      host_extensions[i].table = table;
      host_extensions[i].id = id;
      return GANFW_OK;
    }
  }
  return ganfw_error_set(GANFW_ERR_INVALID_ARG, "host extension '%s': no room for more than %d", id,
                         HOST_EXTENSION_MAX);
}

/* NULL for an id nobody provided, which plugins must handle. */
static const void *host_get_extension(const ganfw_host *host, const char *id) {
  (void)host;
  for (int i = 0; id && i < HOST_EXTENSION_MAX && host_extensions[i].id; i++)
    if (strcmp(host_extensions[i].id, id) == 0) return host_extensions[i].table;
  return NULL;
}

static const ganfw_host host_table = {
    .abi_major = GANFW_ABI_MAJOR,
    .abi_minor = GANFW_ABI_MINOR,
    .struct_size = sizeof(ganfw_host),
    .error = host_error,
    .log = host_log,
    .cfg_child = ganfw_cfg_child,
    .cfg_int = ganfw_cfg_int,
    .cfg_float = ganfw_cfg_float,
    .cfg_bool = ganfw_cfg_bool,
    .cfg_string = ganfw_cfg_string,
    .cfg_bytes = ganfw_cfg_bytes,
    .cfg_list_len = ganfw_cfg_list_len,
    .cfg_list_at = ganfw_cfg_list_at,
    .tensor_create = host_tensor_create,
    .tensor_destroy = host_tensor_destroy,
    .tensor_from_host = ganfw_tensor_from_host,
    .tensor_to_host = ganfw_tensor_to_host,
    .foreach_fill = host_fill,
    .foreach_scale = host_scale,
    .foreach_add_scalar = host_add_scalar,
    .foreach_axpy = host_axpy,
    .foreach_mul = host_mul,
    .foreach_addcmul = host_addcmul,
    .foreach_addcdiv = host_addcdiv,
    .foreach_sqrt = host_sqrt,
    .foreach_lerp = host_lerp,
    .foreach_maximum = host_maximum,
    .foreach_copy = host_copy,
    .foreach_sum = host_sum,
    .foreach_norm = host_norm,
    .foreach_nonfinite = host_nonfinite,
    .rng_normal = host_rng_normal,
    .rng_uniform = host_rng_uniform,
    .net_create = ganfw_net_create,
    .net_destroy = ganfw_net_destroy,
    .net_conv2d = ganfw_net_conv2d,
    .net_conv_transpose2d = ganfw_net_conv_transpose2d,
    .net_linear = ganfw_net_linear,
    .net_batchnorm2d = ganfw_net_batchnorm2d,
    .net_activation = ganfw_net_activation,
    .net_pool2d = ganfw_net_pool2d,
    .net_dropout = ganfw_net_dropout,
    .net_flatten = ganfw_net_flatten,
    .net_reshape = ganfw_net_reshape,
    .net_build = ganfw_net_build,
    .net_param_count = ganfw_net_param_count,
    .net_param_info = host_net_param_info,
    .net_layer_count = ganfw_net_layer_count,
    .net_checkpoint = ganfw_net_checkpoint,
    .error_message = host_error_message,
    .memory_stats = host_memory_stats,
    .get_extension = host_get_extension,
    .net_upsample = ganfw_net_upsample,
    .net_global_avg_pool = ganfw_net_global_avg_pool,
    .net_groupnorm = ganfw_net_groupnorm,
    .net_instancenorm2d = ganfw_net_instancenorm2d,
    .net_layernorm = ganfw_net_layernorm,
    .net_input = ganfw_net_input,
    .net_add = ganfw_net_add,
    .net_concat = ganfw_net_concat,
    .net_embedding = ganfw_net_embedding,
    .net_spectral_norm = ganfw_net_spectral_norm,
    .net_layer_index = ganfw_net_layer_index,
    .net_cut_ok = ganfw_net_cut_ok,
    .tensor_add = host_tensor_add,
    .tensor_sub = host_tensor_sub,
    .tensor_mul = host_tensor_mul,
    .tensor_div = host_tensor_div,
    .tensor_maximum = host_tensor_maximum,
    .tensor_minimum = host_tensor_minimum,
    .tensor_abs = host_tensor_abs,
    .tensor_sign = host_tensor_sign,
    .tensor_exp = host_tensor_exp,
    .tensor_log = host_tensor_log,
    .tensor_sqrt = host_tensor_sqrt,
    .tensor_rsqrt = host_tensor_rsqrt,
    .tensor_clamp = host_tensor_clamp,
    .tensor_mul_scalar = host_tensor_mul_scalar,
    .tensor_add_scalar = host_tensor_add_scalar,
    .tensor_pow_scalar = host_tensor_pow_scalar,
    .tensor_sum = host_tensor_sum,
    .tensor_mean = host_tensor_mean,
    .tensor_channel_affine = host_tensor_channel_affine,
    .net_custom = ganfw_net_custom,
    .layer_add_param = host_layer_add_param,
    .layer_add_buffer = host_layer_add_buffer,
    .tensor_cat = host_tensor_cat,
    .tensor_narrow = host_tensor_narrow,
    .tensor_bmm = host_tensor_bmm,
    .tensor_softmax = host_tensor_softmax,
    .tensor_softmax_backward = host_tensor_softmax_backward,
    .tensor_permute = host_tensor_permute,
    .tensor_reshape = host_tensor_reshape,
    .tensor_gather = host_tensor_gather,
    .tensor_scatter_add = host_tensor_scatter_add,
    .net_pixel_shuffle = ganfw_net_pixel_shuffle,
    .net_node_info = ganfw_net_node_info,
    .net_recompute = ganfw_net_recompute,
    .quantize_blockwise = host_quantize_blockwise,
    .dequantize_blockwise = host_dequantize_blockwise,
    .quantize_dynamic_map = host_quantize_dynamic_map,
};

const ganfw_host *ganfw_host_table(void) {
  return &host_table;
}
