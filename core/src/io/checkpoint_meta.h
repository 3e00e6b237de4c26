/* A checkpoint's metadata without its tensors: the run's position (step, epoch, loader
 * position, seed, RNG offset), each optimizer's step, the extra keys (data shape, memory
 * strategies' scalars, ...) and the crc32s that guard the header and the data. Read and
 * validated from an opened safetensors file, and checked against the run that resumes, with
 * the safetensors reader and base/ alone (tests/fuzz/fuzz_checkpoint.c links just these). */
#ifndef GANFW_CHECKPOINT_META_H
#define GANFW_CHECKPOINT_META_H

#include <stdint.h>

#include "ganfw/status.h"
#include "io/safetensors.h"

/* "format" metadata of every checkpoint this code writes; resuming refuses any other. */
#define GANFW_CKPT_FORMAT "ganfw-checkpoint-1"
/* "format" metadata of a PyTorch state_dict written by the safetensors library's torch
 * helpers (safetensors.torch.save_file, Hugging Face): load_weights reads it as a plain
 * state_dict file. */
#define GANFW_CKPT_FORMAT_PT "pt"

/* The largest step, epoch or optimizer step a checkpoint may hold: train.max_steps' bound,
 * so that no sum or product of counts overflows. */
#define GANFW_CKPT_MAX_COUNT ((int64_t)1 << 52)
/* The largest RNG offset (Philox blocks): far past any run, far below a wrap. */
#define GANFW_CKPT_MAX_RNG_OFFSET ((uint64_t)1 << 62)

/* Where the run stands, stored as decimal string metadata. On save, every field is read
 * (the caller copies seed and rng_offset from its ganfw_ctx); on load, filled from the file
 * (the caller restores ctx->seed and ctx->rng_offset from it). */
typedef struct ganfw_ckpt_meta {
  int64_t step;            /* global training step: "step" */
  int64_t epoch;           /* loader epoch: "epoch" */
  int64_t loader_position; /* loader offset within the epoch: "loader_position" */
  uint64_t seed;           /* run seed: "seed" */
  uint64_t rng_offset;     /* next free Philox block: "rng_offset" */
  /* Any other string metadata (GradScaler scale, growth tracker, ...): keys must not be
   * reserved (format, step, epoch, loader_position, seed, rng_offset, crc32, header_crc32,
   * optim.*). */
  int32_t n_extra;
  const char *const *extra_keys;
  const char *const *extra_values;
} ganfw_ckpt_meta;

/* Reads the metadata of the opened checkpoint `f` (`path` names it in messages): checks
 * its "format", both crc32s, and that step, epoch and loader_position are integers in
 * [0, GANFW_CKPT_MAX_COUNT], seed an unsigned 64-bit integer and rng_offset one up to
 * GANFW_CKPT_MAX_RNG_OFFSET; the other keys but optim.* become the extras. *out is owned by
 * the caller (ganfw_ckpt_meta_free). Refusals name the file and the field:
 *   GANFW_ERR_CONFIG: no "format", a PyTorch state_dict, another format;
 *   GANFW_ERR_IO "PATH: corrupt or truncated checkpoint: field step: ..." for a crc that
 *     does not match, or a field that is missing, not an integer, or out of its range. */
ganfw_status ganfw_ckpt_meta_read(const char *path, const ganfw_st_file *f, ganfw_ckpt_meta **out);
void ganfw_ckpt_meta_free(ganfw_ckpt_meta *meta); /* accepts NULL */
/* The extra value of `key` in meta, or NULL; owned by meta. */
const char *ganfw_ckpt_meta_extra(const ganfw_ckpt_meta *meta, const char *key);

/* The step of the optimizer of the net saved under `prefix` ("optim.<prefix>.step", an
 * integer in [0, GANFW_CKPT_MAX_COUNT]). GANFW_ERR_CONFIG naming the file and the field
 * when it is missing or not such a count. */
ganfw_status ganfw_ckpt_optim_step(const char *path, const ganfw_st_file *f, const char *prefix,
                                   int64_t *step);

/* What the run that resumes holds, in plain numbers, for ganfw_ckpt_meta_check_resume. */
typedef struct ganfw_ckpt_resume_limits {
  int64_t data_items;              /* items in an epoch of the run's data set */
  int64_t channels, height, width; /* the run's data shape (0: not checked) */
  int64_t num_classes;             /* the data set's classes (0: not checked) */
} ganfw_ckpt_resume_limits;

/* The checks of a resume, before the run continues from `m`: the loader position within
 * the data set, the data shape (data.channels, data.height, data.width, data.num_classes),
 * where the checkpoint records it, equal to the run's, and every memory strategy's scalar
 * (memory.<plugin>.<name>) a finite number: a loss scale ("scale...") > 0 and at most f32's
 * largest, a counter (any other name: growth tracker, skipped steps) an integer >= 0.
 * GANFW_ERR_CONFIG "PATH: field loader_position: 70000 is past the data set's 60000 items ..." for
 * a checkpoint of another run, GANFW_ERR_IO (corrupt) for a value no ganfw run writes. */
ganfw_status ganfw_ckpt_meta_check_resume(const char *path, const ganfw_ckpt_meta *m,
                                          const ganfw_ckpt_resume_limits *lim);

/* --- the crc32s --------------------------------------------------------------------------
 * "crc32" is zlib's crc32 of the data section (every tensor's bytes in file order);
 * "header_crc32" covers what the header says (metadata, names, dtypes, shapes, order). */

/* Whether `key` is reserved by the format (format, step, epoch, loader_position, seed,
 * rng_offset, crc32, header_crc32, optim.*). */
int32_t ganfw_ckpt_key_reserved(const char *key);

/* One tensor as the header describes it (all borrowed). */
typedef struct ganfw_ckpt_desc {
  const char *name, *dtype;
  int32_t ndim;
  const int64_t *shape;
} ganfw_ckpt_desc;

/* crc32 of the header's content, independent of its JSON layout: every metadata entry but
 * the two crcs, sorted by key, as "M" key NUL value NUL; then every tensor in file order
 * as "T" name NUL dtype NUL "d0,d1,...," NUL. -1 when out of memory. */
int64_t ganfw_ckpt_header_crc(const char *const *keys, const char *const *values, int64_t nmeta,
                              const ganfw_ckpt_desc *t, int64_t nt);
/* zlib's crc32 continued over n bytes (any n). */
uint32_t ganfw_ckpt_crc_bytes(uint32_t crc, const void *p, int64_t n);
/* crc as the 8 lowercase hex digits the metadata holds. */
void ganfw_ckpt_crc_format(int64_t crc, char out[9]);
/* Verifies the crcs `f` records; `required` makes a missing one an error (GANFW_ERR_IO
 * "PATH: corrupt or truncated checkpoint: ..."). */
ganfw_status ganfw_ckpt_verify_crcs(const char *path, const ganfw_st_file *f, int32_t required);

#endif
