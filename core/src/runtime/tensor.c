/* Tensors over the caching allocator (see tensor.h). The descriptor, its bookkeeping and
 * its name live in one host allocation; the data is one allocator block. */
#include "runtime/tensor.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/ctx.h"
#include "base/error.h"

typedef struct tensor_impl {
  ganfw_ctx *ctx;
  ganfw_tensor *base; /* a view's owner of the memory, retained; NULL for plain tensors */
  int32_t refs;
} tensor_impl;

static const struct {
  const char *name;
  size_t size;
} dtypes[] = {{"f32", 4}, {"f16", 2}, {"bf16", 2}, {"i32", 4}, {"u8", 1}};
_Static_assert(sizeof(dtypes) / sizeof(dtypes[0]) == GANFW_DTYPE_COUNT,
               "dtypes must describe every GANFW_DTYPE_*");

size_t ganfw_dtype_size(int32_t dtype) {
  return dtype >= 0 && dtype < GANFW_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *ganfw_dtype_name(int32_t dtype) {
  return dtype >= 0 && dtype < GANFW_DTYPE_COUNT ? dtypes[dtype].name : "unknown";
}

int32_t ganfw_dtype_from_name(const char *name) {
  for (int32_t i = 0; i < GANFW_DTYPE_COUNT; i++)
    if (name && strcmp(name, dtypes[i].name) == 0) return i;
  return -1;
}

ganfw_tensor *ganfw_tensor_create(ganfw_ctx *ctx, int32_t dtype, int32_t ndim, const int64_t *shape,
                                  int32_t category, const char *name) {
  if (!ctx || ndim < 0 || ndim > GANFW_MAX_DIMS || (ndim > 0 && !shape) ||
      ganfw_dtype_size(dtype) == 0 || category < 0 || category >= GANFW_MEM_COUNT) {
    ganfw_error_set(GANFW_ERR_INVALID_ARG,
                    "tensor '%s': invalid descriptor (ndim %d, dtype %d, category %d)",
                    name ? name : "", (int)ndim, (int)dtype, (int)category);
    return NULL;
  }
  int64_t numel = 1;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0 || (shape[i] > 0 && numel > INT64_MAX / shape[i])) {
      ganfw_error_set(GANFW_ERR_INVALID_ARG, "tensor '%s': invalid dimension %d of size %lld",
                      name ? name : "", (int)i, (long long)shape[i]);
      return NULL;
    }
    numel *= shape[i];
  }
  size_t name_len = name ? strlen(name) : 0;
  const char *scope = ctx->name_scope;
  size_t scope_len = scope ? strlen(scope) : 0;
  if (scope_len && name_len > scope_len && strncmp(name, scope, scope_len) == 0 &&
      name[scope_len] == '.')
    scope_len = 0; /* already the net's name */
  ganfw_tensor *t =
      calloc(1, sizeof *t + sizeof(tensor_impl) + scope_len + (scope_len > 0) + name_len + 1);
  if (!t) {
    ganfw_error_set(GANFW_ERR_OOM, "out of host memory for tensor '%s'", name ? name : "");
    return NULL;
  }
  tensor_impl *impl = (tensor_impl *)(t + 1);
  char *name_copy = (char *)(impl + 1);
  if (scope_len) {
    memcpy(name_copy, scope, scope_len);
    name_copy[scope_len] = '.';
    name_copy += scope_len + 1;
  }
  if (name_len) memcpy(name_copy, name, name_len);
  name_copy = (char *)(impl + 1);
  impl->ctx = ctx;
  impl->refs = 1;
  t->impl = impl;
  t->name = name_copy;
  t->ndim = ndim;
  t->dtype = dtype;
  t->category = category;
  t->device = ctx->device_type;
  for (int32_t i = 0; i < GANFW_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
  t->numel = numel;
  t->nbytes = numel * (int64_t)ganfw_dtype_size(dtype);
  if (t->nbytes > 0) {
    ganfw_status st =
        ganfw_alloc_malloc(ctx->alloc, (size_t)t->nbytes, category, t->name, &t->data);
    if (st != GANFW_OK) {
      free(t);
      return NULL;
    }
  }
  return t;
}

void ganfw_tensor_destroy(ganfw_tensor *t) {
  if (!t) return;
  tensor_impl *impl = t->impl;
  if (--impl->refs > 0) return;
  if (impl->base)
    ganfw_tensor_destroy(impl->base);
  else if (t->data)
    ganfw_alloc_free(impl->ctx->alloc, t->data);
  free(t);
}

ganfw_tensor *ganfw_tensor_retain(ganfw_tensor *t) {
  ((tensor_impl *)t->impl)->refs++;
  return t;
}

int32_t ganfw_tensor_exclusive(const ganfw_tensor *t) {
  for (const tensor_impl *impl = t->impl; impl; impl = impl->base ? impl->base->impl : NULL)
    if (impl->refs != 1) return 0;
  return 1;
}

static ganfw_status storage_check(const ganfw_tensor *t, const char *what) {
  const tensor_impl *impl = t->impl;
  if (impl->base || impl->refs != 1)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "tensor '%s': storage %s needs a plain tensor with one reference "
                           "(a view, or one a view shares, has %d)",
                           t->name, what, (int)impl->refs);
  return GANFW_OK;
}

ganfw_status ganfw_tensor_storage_release(ganfw_tensor *t) {
  if (!t->data) return GANFW_OK;
  ganfw_status st = storage_check(t, "release");
  if (st != GANFW_OK) return st;
  ganfw_alloc_free(((tensor_impl *)t->impl)->ctx->alloc, t->data);
  t->data = NULL;
  return GANFW_OK;
}

ganfw_status ganfw_tensor_storage_acquire(ganfw_tensor *t) {
  if (t->data || t->nbytes == 0) return GANFW_OK;
  ganfw_status st = storage_check(t, "acquire");
  if (st != GANFW_OK) return st;
  return ganfw_alloc_malloc(((tensor_impl *)t->impl)->ctx->alloc, (size_t)t->nbytes, t->category,
                            t->name, &t->data);
}

int32_t ganfw_tensor_is_view(const ganfw_tensor *t) {
  return ((const tensor_impl *)t->impl)->base != NULL;
}

int32_t ganfw_tensor_refcount(const ganfw_tensor *t) {
  return ((const tensor_impl *)t->impl)->refs;
}

ganfw_tensor *ganfw_tensor_view(ganfw_tensor *base, int32_t ndim, const int64_t *shape,
                                const char *name) {
  int64_t numel = 1;
  for (int32_t i = 0; i < ndim; i++) numel *= shape[i];
  if (ndim < 0 || ndim > GANFW_MAX_DIMS || numel != base->numel) {
    ganfw_error_set(GANFW_ERR_INVALID_ARG, "view '%s' of '%s': %lld elements do not match %lld",
                    name ? name : "", base->name, (long long)numel, (long long)base->numel);
    return NULL;
  }
  size_t name_len = name ? strlen(name) : 0;
  ganfw_tensor *t = calloc(1, sizeof *t + sizeof(tensor_impl) + name_len + 1);
  if (!t) {
    ganfw_error_set(GANFW_ERR_OOM, "out of host memory for view '%s'", name ? name : "");
    return NULL;
  }
  *t = *base;
  tensor_impl *impl = (tensor_impl *)(t + 1);
  char *name_copy = (char *)(impl + 1);
  if (name_len) memcpy(name_copy, name, name_len);
  impl->ctx = ganfw_tensor_ctx(base);
  impl->base = ganfw_tensor_retain(base);
  impl->refs = 1;
  t->impl = impl;
  t->name = name_copy;
  t->ndim = ndim;
  for (int32_t i = 0; i < GANFW_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
  return t;
}

ganfw_tensor *ganfw_tensor_rows(ganfw_tensor *base, int64_t start, int64_t rows, const char *name) {
  if (base->ndim < 1 || start < 0 || rows < 0 || start + rows > base->shape[0]) {
    ganfw_error_set(GANFW_ERR_INVALID_ARG, "rows [%lld, %lld) of '%s' with %lld rows",
                    (long long)start, (long long)(start + rows), base->name,
                    (long long)(base->ndim ? base->shape[0] : 0));
    return NULL;
  }
  int64_t per_row = base->shape[0] ? base->numel / base->shape[0] : 0;
  /* a view of the whole tensor, then moved and shortened */
  ganfw_tensor *t = ganfw_tensor_view(base, base->ndim, base->shape, name);
  if (!t) return NULL;
  t->shape[0] = rows;
  t->numel = rows * per_row;
  t->nbytes = t->numel * (int64_t)ganfw_dtype_size(t->dtype);
  t->data = (char *)base->data + start * per_row * (int64_t)ganfw_dtype_size(t->dtype);
  return t;
}

ganfw_ctx *ganfw_tensor_ctx(const ganfw_tensor *t) {
  return ((const tensor_impl *)t->impl)->ctx;
}

ganfw_status ganfw_tensor_from_host(ganfw_tensor *t, const void *src, int64_t nbytes) {
  if (!t || nbytes != t->nbytes)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "tensor '%s': copying %lld bytes into a tensor of %lld bytes",
                           t ? t->name : "", (long long)nbytes, t ? (long long)t->nbytes : 0LL);
  ganfw_backend *be = ganfw_tensor_ctx(t)->be;
  return be->vt->copy_h2d(be, t->data, src, (size_t)nbytes);
}

void *ganfw_host_staging_alloc(ganfw_ctx *ctx, size_t bytes, int32_t *pinned) {
  ganfw_backend *be = ctx->be;
  *pinned = 0;
  if (be->vt->host_alloc_pinned && be->vt->host_free_pinned) {
    void *p = be->vt->host_alloc_pinned(be, bytes);
    if (p) {
      *pinned = 1;
      return p;
    }
    ganfw_error_clear(); /* no page-locked memory to be had: plain memory works too */
  }
  return malloc(bytes ? bytes : 1);
}

void ganfw_host_staging_free(ganfw_ctx *ctx, void *p, int32_t pinned) {
  if (!p) return;
  if (pinned)
    ctx->be->vt->host_free_pinned(ctx->be, p);
  else
    free(p);
}

ganfw_status ganfw_tensor_from_staging(ganfw_tensor *t, const void *src, int64_t nbytes,
                                       int32_t pinned) {
  if (!t || !pinned || nbytes != t->nbytes) return ganfw_tensor_from_host(t, src, nbytes);
  ganfw_backend *be = ganfw_tensor_ctx(t)->be;
  if (!be->vt->copy_h2d_async) return ganfw_tensor_from_host(t, src, nbytes);
  return be->vt->copy_h2d_async(be, t->data, src, (size_t)nbytes);
}

ganfw_status ganfw_tensor_to_host(const ganfw_tensor *t, void *dst, int64_t nbytes) {
  if (!t || nbytes != t->nbytes)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "tensor '%s': copying %lld bytes out of a tensor of %lld bytes",
                           t ? t->name : "", (long long)nbytes, t ? (long long)t->nbytes : 0LL);
  ganfw_backend *be = ganfw_tensor_ctx(t)->be;
  return be->vt->copy_d2h(be, dst, t->data, (size_t)nbytes);
}
