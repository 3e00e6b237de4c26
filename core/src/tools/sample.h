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
  int32_t cls; /* with has_class: every image of this class (a conditional model) */
} ganfw_sample_args;

ganfw_status ganfw_sample(const ganfw_sample_args *a);

/* RUN_DIR -> its config.resolved.yaml and latest checkpoint; CHECKPOINT -> itself and the
 * config of the run folder above checkpoints/ (also used by `ganfw score`). */
ganfw_status ganfw_sample_locate(const char *what, char *config, size_t nc, char *ckpt, size_t nk);
/* The data shape a training checkpoint was trained on (its data.* metadata). */
ganfw_status ganfw_sample_data_info(const char *path, ganfw_data_info *info);

#endif
