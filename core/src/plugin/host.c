/* The host table handed to plugins (ganfw/host.h): config getters, tensors through the
 * run's allocator, foreach ops over tensor lists on the run's backend, Philox RNG, tensor math
 * (element-wise with broadcasting, sums over dims, per-channel affine) and layers defined by
 * plugins. Each foreach entry checks its lists once, then calls the backend's kernel per
 * tensor; each tensor_* entry checks its tensors and shapes, then calls one kernel. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

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
    BE(x[i])->vt->fill(BE(x[i]), x[i]->numel, x[i]->data, v);
  return st;
}

static ganfw_status host_scale(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, float a) {
  ganfw_status st = check_lists("foreach_scale", n, 1, (ganfw_tensor *const *const[]){x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    BE(x[i])->vt->scale(BE(x[i]), x[i]->numel, x[i]->data, a);
  return st;
}

static ganfw_status host_add_scalar(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, float a) {
  ganfw_status st = check_lists("foreach_add_scalar", n, 1, (ganfw_tensor *const *const[]){x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    BE(x[i])->vt->add_scalar(BE(x[i]), x[i]->numel, x[i]->data, a);
  return st;
}

static ganfw_status host_axpy(ganfw_ctx *ctx, ganfw_tensor *const *y, float alpha,
                              ganfw_tensor *const *x, int64_t n) {
  ganfw_status st = check_lists("foreach_axpy", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    BE(y[i])->vt->axpy(BE(y[i]), y[i]->numel, y[i]->data, alpha, x[i]->data);
  return st;
}

static ganfw_status host_mul(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                             int64_t n) {
  ganfw_status st = check_lists("foreach_mul", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    BE(y[i])->vt->mul(BE(y[i]), y[i]->numel, y[i]->data, y[i]->data, x[i]->data);
  return st;
}

static ganfw_status host_addcmul(ganfw_ctx *ctx, ganfw_tensor *const *y, float v,
                                 ganfw_tensor *const *a, ganfw_tensor *const *b, int64_t n) {
  ganfw_status st = check_lists("foreach_addcmul", n, 3, (ganfw_tensor *const *const[]){y, a, b});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    BE(y[i])->vt->addcmul(BE(y[i]), y[i]->numel, y[i]->data, v, a[i]->data, b[i]->data);
  return st;
}

static ganfw_status host_addcdiv(ganfw_ctx *ctx, ganfw_tensor *const *y, float v,
                                 ganfw_tensor *const *a, ganfw_tensor *const *b, int64_t n) {
  ganfw_status st = check_lists("foreach_addcdiv", n, 3, (ganfw_tensor *const *const[]){y, a, b});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    BE(y[i])->vt->addcdiv(BE(y[i]), y[i]->numel, y[i]->data, v, a[i]->data, b[i]->data);
  return st;
}

static ganfw_status host_sqrt(ganfw_ctx *ctx, ganfw_tensor *const *out, ganfw_tensor *const *x,
                              int64_t n) {
  ganfw_status st = check_lists("foreach_sqrt", n, 2, (ganfw_tensor *const *const[]){out, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    BE(x[i])->vt->sqrt(BE(x[i]), x[i]->numel, out[i]->data, x[i]->data);
  return st;
}

static ganfw_status host_lerp(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                              float w, int64_t n) {
  ganfw_status st = check_lists("foreach_lerp", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    BE(y[i])->vt->lerp(BE(y[i]), y[i]->numel, y[i]->data, x[i]->data, w);
  return st;
}

static ganfw_status host_maximum(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                                 int64_t n) {
  ganfw_status st = check_lists("foreach_maximum", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    BE(y[i])->vt->maximum(BE(y[i]), y[i]->numel, y[i]->data, x[i]->data);
  return st;
}

static ganfw_status host_copy(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                              int64_t n) {
  ganfw_status st = check_lists("foreach_copy", n, 2, (ganfw_tensor *const *const[]){y, x});
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    st = BE(y[i])->vt->copy_d2d(BE(y[i]), y[i]->data, x[i]->data, (size_t)y[i]->nbytes);
  return st;
}

static ganfw_status host_sum(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, double *out) {
  ganfw_status st = check_lists("foreach_sum", n, 1, (ganfw_tensor *const *const[]){x});
  double s = 0;
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    s += BE(x[i])->vt->sum(BE(x[i]), x[i]->numel, x[i]->data);
  *out = s;
  return st;
}

static ganfw_status host_norm(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, double *out) {
  ganfw_status st = check_lists("foreach_norm", n, 1, (ganfw_tensor *const *const[]){x});
  double s = 0;
  for (int64_t i = 0; st == GANFW_OK && i < n; i++)
    s += BE(x[i])->vt->sumsq(BE(x[i]), x[i]->numel, x[i]->data);
  *out = __builtin_sqrt(s);
  return st;
}

static ganfw_status host_nonfinite(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n,
                                   int32_t *out) {
  ganfw_status st = check_lists("foreach_nonfinite", n, 1, (ganfw_tensor *const *const[]){x});
  *out = 0;
  ganfw_backend *be = n > 0 ? BE(x[0]) : NULL; /* one context: one backend */
  if (st == GANFW_OK && be && be->vt->nonfinite_many) {
    enum { BATCH = 64 };
    const float *p[BATCH];
    int64_t numel[BATCH];
    for (int64_t i = 0; i < n && !*out; i += BATCH) {
      const int64_t k = n - i < BATCH ? n - i : BATCH;
      for (int64_t j = 0; j < k; j++) p[j] = x[i + j]->data, numel[j] = x[i + j]->numel;
      *out = be->vt->nonfinite_many(be, k, p, numel);
    }
    return st;
  }
  for (int64_t i = 0; st == GANFW_OK && i < n && !*out; i++)
    *out = BE(x[i])->vt->nonfinite(BE(x[i]), x[i]->numel, x[i]->data);
  return st;
}

static ganfw_status host_rng_normal(ganfw_ctx *ctx, ganfw_tensor *t, float mean, float std) {
  ganfw_status st = check_lists("rng_normal", 1, 1, (ganfw_tensor *const *const[]){&t});
  if (st != GANFW_OK) return st;
  ganfw_ctx_rng_normal(ctx, t->numel, t->data, mean, std);
  return GANFW_OK;
}

static ganfw_status host_rng_uniform(ganfw_ctx *ctx, ganfw_tensor *t, float lo, float hi) {
  ganfw_status st = check_lists("rng_uniform", 1, 1, (ganfw_tensor *const *const[]){&t});
  if (st != GANFW_OK) return st;
  ganfw_ctx_rng_uniform(ctx, t->numel, t->data, lo, hi);
  return GANFW_OK;
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

/* After a kernel: a launch failure the backend recorded (CUDA), named after the op. */
static ganfw_status kernel_status(ganfw_backend *be, const char *op) {
  if (!be->vt->last_error) return GANFW_OK;
  ganfw_status st = be->vt->last_error(be);
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
  be->vt->binary(be, op, &s, out->data, a->data, b->data);
  return kernel_status(be, op_name);
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
  be->vt->unary(be, op, x->numel, out->data, x->data, a, b);
  return kernel_status(be, op_name);
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
  be->vt->reduce_sum(be, &s, mean ? 1.0 / (double)count : 1.0, x->data, out->data);
  return kernel_status(be, op_name);
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
  return st == GANFW_OK ? kernel_status(be, op) : ganfw_error_wrap(st, "%s", op);
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
  return st == GANFW_OK ? kernel_status(be, op) : ganfw_error_wrap(st, "%s", op);
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
  be->vt->channel_affine(be, N, C, inner, x->data, scale ? scale->data : NULL,
                         shift ? shift->data : NULL, out->data);
  return kernel_status(be, op);
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
};

const ganfw_host *ganfw_host_table(void) {
  return &host_table;
}
