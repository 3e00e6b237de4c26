/* Tensors: a descriptor (ganfw/tensor.h) over a block of the run's caching allocator,
 * tagged with its category and named for memory reports. */
#ifndef GANFW_TENSOR_INTERNAL_H
#define GANFW_TENSOR_INTERNAL_H

#include <stddef.h>

#include "ganfw/host.h"

/* Bytes per element; 0 for an unknown dtype. */
size_t ganfw_dtype_size(int32_t dtype);
/* "f32", "f16", "bf16", "i32", "u8"; "unknown" outside the range. */
const char *ganfw_dtype_name(int32_t dtype);
int32_t ganfw_dtype_from_name(const char *name); /* -1 when unknown */

/* A new tensor owned by the caller (ganfw_tensor_destroy), its memory from ctx's
 * allocator; NULL with the error recorded (GANFW_ERR_OOM carries the allocator's report).
 * `name` is copied. Contents are uninitialised. */
ganfw_tensor *ganfw_tensor_create(ganfw_ctx *ctx, int32_t dtype, int32_t ndim, const int64_t *shape,
                                  int32_t category, const char *name);
/* Tensors are reference counted: create and retain take a reference, destroy drops one
 * and frees the memory with the last. Plugins see destroy only (one reference each). */
void ganfw_tensor_destroy(ganfw_tensor *t); /* accepts NULL */
ganfw_tensor *ganfw_tensor_retain(ganfw_tensor *t);
int32_t ganfw_tensor_refcount(const ganfw_tensor *t);
/* 1 when the caller's reference is the only way to reach t's memory: one reference to t
 * and, for a view, to every tensor below it. Only then may t be overwritten in place. */
int32_t ganfw_tensor_exclusive(const ganfw_tensor *t);
/* A new tensor (one reference, owned by the caller) sharing `base`'s memory with another
 * shape of the same element count; it keeps `base` alive. */
ganfw_tensor *ganfw_tensor_view(ganfw_tensor *base, int32_t ndim, const int64_t *shape,
                                const char *name);
/* 1 when t is a view (ganfw_tensor_view, ganfw_tensor_rows): its memory is another tensor's. */
int32_t ganfw_tensor_is_view(const ganfw_tensor *t);
ganfw_status ganfw_tensor_from_host(ganfw_tensor *t, const void *src, int64_t nbytes);
ganfw_status ganfw_tensor_to_host(const ganfw_tensor *t, void *dst, int64_t nbytes);
/* Host staging memory for a trainer's uploads: page-locked when ctx's backend offers it
 * (its copies run at full bus speed and asynchronously), else malloc'd; *pinned says which,
 * for ganfw_host_staging_free and ganfw_tensor_from_staging. NULL when out of memory. */
void *ganfw_host_staging_alloc(ganfw_ctx *ctx, size_t bytes, int32_t *pinned);
void ganfw_host_staging_free(ganfw_ctx *ctx, void *p, int32_t pinned); /* accepts NULL */
/* ganfw_tensor_from_host from a staging buffer: with a pinned one the copy may still be
 * running when this returns (ordered before every op that follows), so src must not change
 * until the backend has synchronised: a copy back to the host (e.g. a step's losses) or
 * ganfw_ctx's synchronize. */
ganfw_status ganfw_tensor_from_staging(ganfw_tensor *t, const void *src, int64_t nbytes,
                                       int32_t pinned);
/* Rows [start, start + rows) of `base` along its first dimension, as a new tensor (one
 * reference, owned by the caller) sharing base's memory and keeping it alive. */
ganfw_tensor *ganfw_tensor_rows(ganfw_tensor *base, int64_t start, int64_t rows, const char *name);
/* Storage that comes and goes under one descriptor (memory strategy step_in_backward: a
 * gradient's bytes return to the allocator after its update, while the optimizer keeps its
 * borrowed pointer to the tensor). _release frees t's memory and sets t->data to NULL;
 * _acquire allocates it again (contents uninitialised) when t->data is NULL, with t's
 * category and name; both do nothing otherwise. Only for a plain tensor (not a view) that
 * no view shares; GANFW_ERR_INVALID_ARG else, GANFW_ERR_OOM with the allocator's report. */
ganfw_status ganfw_tensor_storage_release(ganfw_tensor *t);
ganfw_status ganfw_tensor_storage_acquire(ganfw_tensor *t);

/* The context a tensor was created in. */
ganfw_ctx *ganfw_tensor_ctx(const ganfw_tensor *t);

#endif
