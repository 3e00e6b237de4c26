/* The host table handed to plugins (ganfw/host.h): config getters, tensors through the
 * run's allocator, foreach ops over tensor lists on the run's backend, and Philox RNG.
 * Each foreach entry checks its lists once, then calls the backend's kernel per tensor. */
#include <stdarg.h>
#include <stddef.h>
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

/* The host's extensions by id: this core offers none yet (ABI 1.2), so every id is NULL;
 * plugins must handle NULL for any id anyway. */
static const void *host_get_extension(const ganfw_host *host, const char *id) {
  (void)host;
  (void)id;
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
    .tensor_create = ganfw_tensor_create,
    .tensor_destroy = ganfw_tensor_destroy,
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
};

const ganfw_host *ganfw_host_table(void) {
  return &host_table;
}
