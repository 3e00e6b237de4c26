/* `ganfw eval CONFIG|RUN_DIR`: a trained classifier's accuracy, mean loss and confusion
 * matrix on the test split, in no-grad eval mode. */
#ifndef GANFW_EVAL_H
#define GANFW_EVAL_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/status.h"

typedef struct ganfw_eval_args {
  const char *source;      /* a run folder (its config.resolved.yaml and checkpoints/) or a
                              config (its run.out_dir's checkpoints/) */
  const char *checkpoint;  /* NULL: <run>/checkpoints/best.safetensors, else the latest */
  int64_t batch;           /* 0: train.batch_size / micro-batches, as the trainer evaluates */
  const char *const *sets; /* --set assignments applied to the config */
  int nsets;
  double *accuracy; /* (optional) receives a classifier's test accuracy, in [0, 1]; for a
                       trainer plugin's model, its scalar "acc" (distill: the student's) */
} ganfw_eval_args;

/* Rebuilds the classifier from the config, loads the checkpoint's weights and evaluates it
 * on the test split, printing the report to `out`. Errors name the folder, config or
 * checkpoint (no checkpoint yet, not a classifier, a data set that cannot be read). */
ganfw_status ganfw_eval(const ganfw_eval_args *a, FILE *out);

#endif
