/* `ganfw sample`: a grid of generator images from a run folder or checkpoint. */
#ifndef GANFW_SAMPLE_H
#define GANFW_SAMPLE_H

#include <stdint.h>

#include <stddef.h>

#include "ganfw/model.h"

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
/* ganfw_sample_locate and ganfw_sample_data_info for `what`, with `config_opt` (--config, or
 * NULL) in place of the run folder's config.resolved.yaml: then `what` may be any checkpoint
 * file, and one without ganfw metadata (a PyTorch state_dict under ganfw's names) takes the
 * shape of the config's data set after its transforms. A checkpoint whose metadata disagree
 * with the config's data is GANFW_ERR_CONFIG naming both files and shapes. */
ganfw_status ganfw_sample_source(const char *what, const char *config_opt, char *config, size_t nc,
                                 char *ckpt, size_t nk, ganfw_data_info *info);

#endif
