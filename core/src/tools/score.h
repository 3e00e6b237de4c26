/* `ganfw score RUN_DIR|CHECKPOINT --classifier CHECKPOINT`: n generated images judged by a
 * trained classifier: its mean confidence, the entropy of the mean predicted class
 * distribution (diversity) and the Inception-Score-like exp(E[KL(p(y|x) || p(y))]). */
#ifndef GANFW_SCORE_H
#define GANFW_SCORE_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/status.h"

typedef struct ganfw_score_args {
  const char *source;     /* the GAN: RUN_DIR or a checkpoint file */
  const char *classifier; /* the classifier: RUN_DIR or a checkpoint file */
  int64_t n;              /* images (default 10000) */
  int64_t batch;          /* images per batch (default 500) */
  int32_t has_seed;
  uint64_t seed; /* noise seed when has_seed; else the GAN run's seed */
} ganfw_score_args;

typedef struct ganfw_score_result {
  int64_t n;
  int32_t classes;
  double confidence;     /* mean over images of max_k p(k|x), in [1/K, 1] */
  double entropy;        /* of the mean distribution p(y), natural log, in [0, log K] */
  double inception;      /* exp(mean KL(p(y|x) || p(y))), in [1, K] */
  int64_t histogram[64]; /* argmax counts for the first 64 classes */
} ganfw_score_result;

/* Runs the score and fills *out; with `report` not NULL prints it there. */
ganfw_status ganfw_score(const ganfw_score_args *a, ganfw_score_result *out, FILE *report);

#endif
