/* The safetensors file format (checkpoints, PyTorch reference tensors): an 8-byte
 * little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, ...,
 * "__metadata__": {key: value}}, then the raw little-endian bytes of every tensor. */
#ifndef GANFW_SAFETENSORS_H
#define GANFW_SAFETENSORS_H

#include <stdint.h>

#include "ganfw/status.h"
#include "ganfw/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GANFW_ST_MAX_DIMS    8
#define GANFW_ST_MAX_HEADER  (100 * 1024 * 1024) /* bytes; a longer header is refused */
#define GANFW_ST_DTYPE_OTHER (-1)                /* a valid safetensors dtype ganfw lacks */

/* --- reading ---------------------------------------------------------------------------- */
typedef struct ganfw_st_file ganfw_st_file;

/* One tensor of an opened file; owned by the file, valid until ganfw_st_close. */
typedef struct ganfw_st_tensor {
  const char *name;
  int32_t dtype;          /* GANFW_DTYPE_*, or GANFW_ST_DTYPE_OTHER (F64, I64, BOOL, ...) */
  const char *dtype_name; /* "F32", "F64", "I64", ... as written in the file */
  int32_t elem_size;      /* bytes per element */
  int32_t ndim;           /* 0 (a scalar) .. GANFW_ST_MAX_DIMS */
  int64_t shape[GANFW_ST_MAX_DIMS];
  int64_t numel;
  const void *data; /* nbytes raw little-endian bytes, aligned to elem_size */
  int64_t nbytes;   /* numel * elem_size */
} ganfw_st_tensor;

/* Reads the file at `path` into memory and validates it: the header length (below the file
 * size and GANFW_ST_MAX_HEADER), a well-formed strict JSON header, known dtypes, shapes,
 * offsets that cover the data section exactly (contiguous, non-overlapping, in range) and
 * nbytes == numel * elem_size. On success *out is the file (freed with ganfw_st_close); on
 * failure *out is NULL and GANFW_ERR_IO is returned with "PATH: ..." recorded (an
 * unreadable file, or "corrupt safetensors file: <why>"). */
ganfw_status ganfw_st_open(const char *path, ganfw_st_file **out);
/* The same for a file image already in memory; `what` names it in messages. `bytes` is
 * copied. */
ganfw_status ganfw_st_open_memory(const void *bytes, int64_t nbytes, const char *what,
                                  ganfw_st_file **out);
void ganfw_st_close(ganfw_st_file *f); /* accepts NULL */

/* Tensors in the order of their data in the file. */
int64_t ganfw_st_count(const ganfw_st_file *f);
/* The i-th tensor, 0 <= i < ganfw_st_count (NULL outside); owned by f. */
const ganfw_st_tensor *ganfw_st_at(const ganfw_st_file *f, int64_t i);
/* The tensor called `name`, or NULL; owned by f. */
const ganfw_st_tensor *ganfw_st_find(const ganfw_st_file *f, const char *name);
/* The "__metadata__" string `key`, or NULL; owned by f. */
const char *ganfw_st_metadata(const ganfw_st_file *f, const char *key);
/* The number of metadata entries and the i-th key/value (NULL outside); owned by f. */
int64_t ganfw_st_metadata_count(const ganfw_st_file *f);
const char *ganfw_st_metadata_key(const ganfw_st_file *f, int64_t i);
const char *ganfw_st_metadata_value(const ganfw_st_file *f, int64_t i);

/* "F32", "F16", "BF16", "I32", "U8" for a GANFW_DTYPE_*; NULL outside the range. */
const char *ganfw_st_dtype_name(int32_t dtype);

/* --- writing ---------------------------------------------------------------------------
 * Collect tensors and metadata, then write them atomically: a temporary file in the
 * target's directory is written, flushed, fsync'ed and renamed over `path`, so a failure
 * never leaves a half-written file nor clobbers an existing one. */
typedef struct ganfw_st_writer ganfw_st_writer;

/* A new, empty writer freed with ganfw_st_writer_destroy; NULL when out of memory. */
ganfw_st_writer *ganfw_st_writer_create(void);
void ganfw_st_writer_destroy(ganfw_st_writer *w); /* accepts NULL */
/* Adds the tensor `name` (unique, non-empty, not "__metadata__") of a GANFW_DTYPE_* with
 * ndim (0..GANFW_ST_MAX_DIMS) dimensions `shape`. The data (numel * element size bytes)
 * and the name are copied. GANFW_ERR_INVALID_ARG on a bad argument, GANFW_ERR_OOM. */
ganfw_status ganfw_st_writer_add(ganfw_st_writer *w, const char *name, int32_t dtype, int32_t ndim,
                                 const int64_t *shape, const void *data);
/* The same, without copying the data: `data` is borrowed and must stay valid and unchanged
 * until ganfw_st_writer_write returns or the writer is destroyed. */
ganfw_status ganfw_st_writer_add_borrowed(ganfw_st_writer *w, const char *name, int32_t dtype,
                                          int32_t ndim, const int64_t *shape, const void *data);
/* The same for any safetensors dtype by its name ("I64", "F64", "BOOL", ...; see
 * ganfw_st_tensor.dtype_name), e.g. PyTorch's int64 num_batches_tracked. `data` (numel *
 * the dtype's size bytes, little-endian) and the name are copied. GANFW_ERR_INVALID_ARG
 * on an unknown dtype name or a bad argument, GANFW_ERR_OOM. */
ganfw_status ganfw_st_writer_add_raw(ganfw_st_writer *w, const char *name, const char *dtype_name,
                                     int32_t ndim, const int64_t *shape, const void *data);
/* Sets "__metadata__" `key` to `value` (both copied; a later call with the same key
 * replaces the value). */
ganfw_status ganfw_st_writer_metadata(ganfw_st_writer *w, const char *key, const char *value);
/* Writes everything added so far to `path` (the writer may be written again). Tensor data
 * is laid out by decreasing element size (in the order added among equal sizes), so every
 * tensor is aligned in the file.
 * GANFW_ERR_IO with "PATH: ..." when the file cannot be written; `path` is then untouched
 * and no temporary file is left behind. */
ganfw_status ganfw_st_writer_write(ganfw_st_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#endif
