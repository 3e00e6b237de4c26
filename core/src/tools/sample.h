/* `ganfw sample`: a grid of generator images from a run folder or checkpoint. */
#ifndef GANFW_SAMPLE_H
#define GANFW_SAMPLE_H

#include <stdint.h>

#include <stddef.h>

#include "ganfw/model.h"
#include "train/run.h"

typedef struct ganfw_sample_args {
  const char *source; /* RUN_DIR or a checkpoint file */
  const char *output; /* PNG path */
  int64_t n;          /* images */
  int32_t nrow;       /* images per grid row */
  int32_t has_seed;
  uint64_t seed;  /* noise seed when has_seed; else the run's seed */
  int32_t no_ema; /* the raw generator even when the checkpoint has its EMA (train.ema) */
  int32_t has_class;
  int32_t cls;        /* with has_class: every image of this class (a conditional model) */
  const char *config; /* --config: the config to build the generator from (NULL: the run's) */
} ganfw_sample_args;

ganfw_status ganfw_sample(const ganfw_sample_args *a);

/* RUN_DIR -> its config.resolved.yaml and latest checkpoint; CHECKPOINT -> itself and the
 * config of the run folder above checkpoints/ (also used by `ganfw score`). */
ganfw_status ganfw_sample_locate(const char *what, char *config, size_t nc, char *ckpt, size_t nk);
/* The data shape a training checkpoint was trained on (its data.* metadata); a file without
 * it is GANFW_ERR_IO saying to pass --config. */
ganfw_status ganfw_sample_data_info(const char *path, ganfw_data_info *info);
/* The shape the data set of the run's config has after its transforms: from its format
 * alone (MNIST, Fashion-MNIST, CIFAR-10, no file read), else from its files (a folder: its
 * first image). What a checkpoint without ganfw metadata is rebuilt for. */
ganfw_status ganfw_sample_config_info(const ganfw_run *run, ganfw_data_info *info);
/* The run to rebuild the generator of `what` from and the data shape to build it for:
 * ganfw_sample_locate and ganfw_sample_data_info, with `config_opt` (--config, or NULL) in
 * place of the run folder's config.resolved.yaml. With it `what` may be any checkpoint file:
 * one without ganfw metadata (a PyTorch state_dict under ganfw's names) takes the shape of
 * the config's data set after its transforms (a built-in data set's by its format, a
 * folder's from its first image); one with metadata keeps them, and is GANFW_ERR_CONFIG
 * naming both files and shapes when the config's data set is of another shape (unchecked
 * when that data set cannot be read, a folder that is not there). Without it a file without
 * metadata is GANFW_ERR_IO saying to pass --config. *run is the caller's (ganfw_run_close),
 * NULL on error. */
ganfw_status ganfw_sample_source(const char *what, const char *config_opt, char *config, size_t nc,
                                 char *ckpt, size_t nk, ganfw_data_info *info, ganfw_run **run);

#endif
