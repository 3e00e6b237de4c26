/* Checkpoints: one safetensors file per save holding every net's parameters and buffers
 * under "<net>.<state_dict name>" (PyTorch-loadable), each optimizer's state under
 * "optim.<net>.<state name>", and the run's position (step, epoch, loader, RNG) as
 * metadata, guarded by crc32s of the header and of the data. */
#ifndef GANFW_CHECKPOINT_H
#define GANFW_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "ganfw/host.h"
#include "ganfw/optim.h"
#include "io/checkpoint_meta.h"

/* One net of a checkpoint, all borrowed. The net's parameters (ganfw_net_param_info) and
 * buffers (ganfw_net_buffer_at) are saved as "<prefix>.<name>"; num_batches_tracked as a
 * PyTorch int64 scalar (I64, shape []). With an optimizer, its state tensors
 * (state_tensor, optional) as "optim.<prefix>.<state name>" and its step (get_step,
 * optional) as metadata "optim.<prefix>.step". */
typedef struct ganfw_ckpt_net {
  ganfw_net *net;
  const char *prefix;             /* NULL: the net's name ("generator"); "": no prefix (a
                                     plain state_dict file, load_weights only) */
  const ganfw_optim_vt *optim_vt; /* NULL: no optimizer state */
  void *optim_self;
  /* Tensors saved and resumed beside the net's own as "<extra_prefix>.<extra_names[i]>"
   * (the generator's EMA: "generator_ema.main.0.weight"); with optimizer state only (save,
   * load, resume), not by load_weights. n_extra 0: none. */
  const char *extra_prefix;
  ganfw_tensor *const *extra;
  const char *const *extra_names;
  int64_t n_extra;
} ganfw_ckpt_net;

/* Writes nets[0..n) and meta to `path` atomically (temporary file, fsync, rename: a
 * failure leaves no partial file and an existing `path` untouched). Device tensors are
 * staged through host memory (a host copy of everything saved lives until the write
 * ends). GANFW_ERR_IO "PATH: ..." when the file cannot be written (e.g. a missing
 * directory: save does not create it), GANFW_ERR_INVALID_ARG for a reserved or duplicate
 * extra key or two nets yielding the same tensor name, GANFW_ERR_OOM. */
ganfw_status ganfw_checkpoint_save(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                   const ganfw_ckpt_meta *meta);

/* Resumes from `path`: checks, before touching any tensor, the format, the header and data
 * crc32s, that the file holds exactly the tensors of nets[0..n) (parameters, buffers,
 * optimizer state) with their shapes and dtypes, and the optimizer steps; then copies
 * every tensor in, sets each optimizer's step (set_step) and, when meta_out is not NULL,
 * stores a new ganfw_ckpt_meta owned by the caller (ganfw_ckpt_meta_free; the extra keys
 * and values live inside it). On failure nothing is changed and:
 *   GANFW_ERR_IO "PATH: cannot open: ..." or "PATH: corrupt or truncated checkpoint: ...",
 *   GANFW_ERR_CONFIG "PATH: checkpoint does not match this model: <tensor> is [..] in the
 *     file, [..] here (...)" / "... <tensor> is missing from the file" / "... the file
 *     holds <tensor>, which this model lacks" / not a ganfw checkpoint.
 * A backend failure while copying (GANFW_ERR_BACKEND) may leave the nets partly loaded. */
ganfw_status ganfw_checkpoint_load(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                   ganfw_ckpt_meta **meta_out);
/* The same for a run that continues: the metadata is also checked against the run's
 * numbers `lim` (ganfw_ckpt_meta_check_resume) before any tensor is touched. */
ganfw_status ganfw_checkpoint_resume(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                     const ganfw_ckpt_resume_limits *lim,
                                     ganfw_ckpt_meta **meta_out);

/* Weights only (`ganfw sample`, model.init_from): loads the parameters and buffers of
 * nets[0..n) from a checkpoint or any safetensors file of state_dicts: one without a
 * "format", or with "format": "pt" (PyTorch's safetensors.torch.save_file), ignoring
 * optimizer state, metadata and tensors outside the nets' prefixes. Another "format" is
 * GANFW_ERR_CONFIG naming it. crc32s are checked when the file has them. Shapes and dtypes
 * must match. Strict with flags 0, as PyTorch's load_state_dict: a tensor missing from the
 * file, or one under a net's prefix that the net lacks, is GANFW_ERR_CONFIG naming them (an
 * unexpected "<layer>.bias" whose "<layer>.weight" the net has is said to be a bias the
 * layer lacks). flags: GANFW_CKPT_ALLOW_*; what was allowed is logged as a warning naming
 * the tensors. *report (may be NULL) gets the counts, on failure too. Validates everything
 * before copying. */
enum {
  GANFW_CKPT_ALLOW_MISSING = 1,    /* a tensor of a net absent from the file keeps its value */
  GANFW_CKPT_ALLOW_UNEXPECTED = 2, /* a tensor under a net's prefix that the net lacks */
  /* One net and a file that is no ganfw checkpoint and holds none of the net's tensors
   * under its prefix: the file's names are read as the net's own state_dict names
   * (PyTorch's model.state_dict() saved as it is), as with prefix "". A ganfw checkpoint
   * of several nets (a trainer's run: "teacher.", "student.") that holds none of them:
   * the one net of the file whose tensors are all this net's, name, dtype and shape, is
   * loaded (the distilled student into the student's model alone); two that fit are an
   * error naming them. */
  GANFW_CKPT_BARE_NAMES = 4,
  /* The names and shapes only (a plan on the meta backend, a session opened without its
   * data): the masks the file implies are installed (all ones) and the names and shapes are
   * matched as above (report filled, the same errors), but no value is checked or copied,
   * the crc32s are not verified and nothing allowed is logged. The nets are then built as
   * a load of the file builds them. */
  GANFW_CKPT_NAMES_ONLY = 8,
};
typedef struct ganfw_ckpt_report {
  int64_t loaded, missing, unexpected;
  int64_t mismatched; /* in both, with another shape or dtype (always an error) */
} ganfw_ckpt_report;
ganfw_status ganfw_checkpoint_load_weights(const char *path, const ganfw_ckpt_net *nets, int32_t n,
                                           int32_t flags, ganfw_ckpt_report *report);

/* ganfw_ckpt_meta, ganfw_ckpt_meta_free and ganfw_ckpt_meta_extra: io/checkpoint_meta.h. */

/* --- files in a checkpoint directory ----------------------------------------------------
 * Checkpoints are named <dir>/step_NNNNNNNN.safetensors (the step, at least 8 digits). */

/* Writes "<dir>/step_%08lld.safetensors" into buf[0..n); GANFW_ERR_INVALID_ARG when it
 * does not fit or step < 0. */
ganfw_status ganfw_checkpoint_path(const char *dir, int64_t step, char *buf, size_t n);

/* Finds the checkpoint of the highest step in `dir`: names step_<digits>.safetensors
 * exactly (temporary files "....tmp.XXXXXX" and other names are ignored) of regular files
 * whose 8-byte header length fits in the file. Writes its path into buf[0..n) and its step
 * into *step (may be NULL); when there is none (or `dir` does not exist) buf is "" and
 * *step is -1, still GANFW_OK. GANFW_ERR_IO when `dir` cannot be read, GANFW_ERR_INVALID_ARG
 * when the path does not fit in buf. */
ganfw_status ganfw_checkpoint_latest(const char *dir, char *buf, size_t n, int64_t *step);

#endif
