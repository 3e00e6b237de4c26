/* `ganfw sample`: a grid of generator images from a run folder or checkpoint. */
#ifndef GANFW_SAMPLE_H
#define GANFW_SAMPLE_H

#include <stdint.h>

#include "ganfw/status.h"

typedef struct ganfw_sample_args {
  const char *source; /* RUN_DIR or a checkpoint file */
  const char *output; /* PNG path */
  int64_t n;          /* images */
  int32_t nrow;       /* images per grid row */
  int32_t has_seed;
  uint64_t seed; /* noise seed when has_seed; else the run's seed */
} ganfw_sample_args;

ganfw_status ganfw_sample(const ganfw_sample_args *a);

#endif
