/* `ganfw plot`: one training step's memory as a picture (PNG or SVG, tools/timeline.h) or as a
 * Chrome trace (JSON, io/trace_file.h), from a traced run's memory.json or from a config's
 * plan (the step on the meta backend, before anything is allocated; --measure: a real step
 * on the config's device). `ganfw plan --plot FILE` is the config case. */
#ifndef GANFW_PLOT_H
#define GANFW_PLOT_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/status.h"
#include "tools/timeline.h"
#include "train/run.h"

typedef struct ganfw_plot_args {
  const char *source;      /* RUN_DIR (traced: device.trace) or CONFIG */
  const char *output;      /* .png, .svg or .json (Chrome trace); NULL: step.png */
  int32_t step;            /* the step to draw; 0: the last complete one */
  int32_t measure;         /* CONFIG: a real step on the device instead of the plan */
  const char *const *sets; /* --set, for a CONFIG */
  int nsets;
  /* the CONFIG source already read with its --set (`ganfw plan --plot`), or NULL: read here */
  const ganfw_run_config *config;
} ganfw_plot_args;

/* Draws or exports the step and says what it wrote on `log` (one line: the step, its peak
 * and what held it). A CONFIG is traced over a warm-up step and a measured one (step 2 is
 * drawn unless told otherwise). *summary (may be NULL) receives the drawn step's summary
 * (its top holders' names are not valid after the call). Errors name the source or the
 * output: an unknown extension, a run that was not traced, a step it does not hold. */
ganfw_status ganfw_plot(const ganfw_plot_args *a, FILE *log, ganfw_timeline_summary *summary);

#endif
