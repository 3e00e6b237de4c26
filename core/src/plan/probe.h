/* Running a config's training step to see its memory: on the meta backend (a plan,
 * from shapes alone: nothing allocated on the device, no kernel run) or on the config's
 * device (a measurement), with the same session, step and allocator code, so that a plan
 * and a measurement can only differ where the device does something the shapes do not
 * say. `ganfw plan`, `find-batch`, `compare` and the OOM advice are built on it. */
#ifndef GANFW_PROBE_H
#define GANFW_PROBE_H

#include <stdint.h>
#include <stdio.h>

#include "runtime/alloc.h"
#include "ganfw/model.h"
#include "ganfw/status.h"
#include "plan/layout.h"
#include "train/run.h"

/* The phases of a step, measured apart, as its trainer names them (train/loop.h's
 * set_phase_hook): the gan trainer's "D step" and "G step", a trainer plugin's own
 * (ganfw_step_api.phase); a trainer that names none is one phase, "step". */
enum { GANFW_PHASE_D = 0, GANFW_PHASE_G = 1 };
#define GANFW_PHASE_COUNT 8
#define GANFW_PHASE_STEP  0

/* Which memory_limit the allocator runs under. */
enum { GANFW_PROBE_LIMIT_CONFIG = 0, GANFW_PROBE_LIMIT_NONE = 1, GANFW_PROBE_LIMIT_SET = 2 };

typedef struct ganfw_probe_options {
  int32_t meta;                /* 1: plan on the meta backend; 0: measure on the config's device */
  int32_t warmup;              /* whole steps before the measured ones (>= 0) */
  int32_t steps;               /* measured steps (>= 1); peaks are reset after the warm-up */
  int32_t real_data;           /* 1: batches from the data set's loader; 0: uniform noise */
  int32_t layers;              /* 1: record which layer holds which bytes at the peak */
  int32_t limit_mode;          /* GANFW_PROBE_LIMIT_* */
  int64_t memory_limit;        /* bytes, with GANFW_PROBE_LIMIT_SET (0: none) */
  int64_t batch_size;          /* > 0: instead of train.batch_size */
  const char *extra_memory;    /* NULL, or one more memory strategy appended to the
                                  config's `memory:` list, as a YAML flow map:
                                  "{plugin: checkpoint, segments: 2}" */
  const ganfw_data_info *info; /* not NULL (and real_data 0): the data set is not opened,
                                  its shape is this */
  FILE *summary;               /* not NULL: the allocator's memory_summary after the
                                  measured steps is written here */
  int32_t trace;               /* 1: record the allocator's events of every step
                                  (device.trace) into out->trace */
  int32_t layout;              /* GANFW_PROBE_LAYOUT_*: device.memory_layout as the config
                                  says, or forced */
} ganfw_probe_options;

/* options.layout */
enum { GANFW_PROBE_LAYOUT_CONFIG = 0, GANFW_PROBE_LAYOUT_CACHING, GANFW_PROBE_LAYOUT_PLANNED };

#define GANFW_PROBE_NAME_MAX 96

/* The bytes one layer (or named buffer: "batch", "noise", "targets.real") holds. */
typedef struct ganfw_probe_layer {
  char name[GANFW_PROBE_NAME_MAX]; /* "generator.main.3" */
  int64_t bytes[GANFW_MEM_COUNT];
  int64_t total;
} ganfw_probe_layer;

typedef struct ganfw_probe_phase {
  int64_t allocated, reserved;       /* peaks over the phase of every measured step */
  int64_t category[GANFW_MEM_COUNT]; /* each category's own peak */
} ganfw_probe_phase;

typedef struct ganfw_probe_result {
  int64_t batch_size;
  int32_t micro_batches, compute_dtype; /* after the memory strategies */
  int32_t meta;
  int32_t family;                          /* GANFW_MODEL_GAN or GANFW_MODEL_CLASSIFIER */
  int32_t n_phases;                        /* 2 for a GAN (D, G), 1 for a classifier, a trainer
                                              plugin's as many as it named */
  char phase_names[GANFW_PHASE_COUNT][64]; /* the trainer's phase names ("" for "step") */
  int64_t memory_limit;                    /* the limit the allocator ran under; 0: none */
  int64_t config_memory_limit;             /* the config's device.memory_limit; 0: none */
  int64_t capacity, free_bytes;            /* the device's, when the probe started */
  ganfw_data_info data;                    /* the data shape used (reusable as options.info) */
  int64_t ema_bytes; /* train.ema: the generator's averages (in param); 0: off */
  /* the config's device, resolved (GANFW_DEVICE_CPU or _CUDA), a plan's too */
  int32_t device_type;
  double ema_decay;

  /* set-up: the session and the step's buffers, before the first step */
  int64_t setup_allocated, setup_reserved, setup_category[GANFW_MEM_COUNT];
  ganfw_probe_phase phase[GANFW_PHASE_COUNT];
  /* over the set-up and the measured steps */
  int64_t peak_allocated, peak_reserved, peak_category[GANFW_MEM_COUNT];
  int32_t peak_phase; /* the phase of the allocated peak; -1: the set-up */
  /* with options.layers: who holds the bytes at the allocated peak, largest first */
  int64_t at_peak[GANFW_MEM_COUNT];
  ganfw_probe_layer *layers; /* owned (ganfw_probe_result_free) */
  int32_t n_layers;

  /* the steps (on the meta backend the losses read 0 and the times mean nothing) */
  int32_t steps_done;           /* measured steps completed */
  double step_seconds;          /* median of the measured steps */
  double step_seconds_min;      /* the fastest of them: the least disturbed by other work on
                                   the machine (fit's time model) */
  double images_per_s;          /* batch_size / step_seconds (the global batch's) */
  int32_t ranks;                /* data-parallel: the ranks sharing each batch (1 alone) */
  int64_t zero_elems;           /* memory strategy zero: the parameter elements whose
                                   optimizer state this rank keeps (0: not sharded) */
  int64_t zero_total;           /* ... of that many in all */
  double comm_seconds;          /* data-parallel: median time per step in collectives */
  double loss_d, loss_g;        /* GAN: of the last step */
  double loss, accuracy;        /* classifier: of the last step */
  char scalars[160];            /* a trainer plugin: "name value, ..." of the last step's
                                   first scalars */
  int64_t skipped_d, skipped_g; /* optimizer steps a strategy skipped, warm-up included
                                   (a classifier's count as skipped_g) */
  int64_t num_alloc_retries;

  /* an out-of-memory stop: the run is unwound and the result kept (not an error) */
  int32_t oom;
  char oom_where[64];    /* "set-up", "warm-up", "D step", "G step", a trainer's phase */
  char oom_report[4096]; /* the message with the allocator's report; "" without OOM */

  /* with options.trace: the events of the set-up, the warm-up steps (1..warmup) and the
   * measured steps (after them), owners in trace_names; owned */
  ganfw_trace_event *trace;
  int64_t n_trace;
  char *trace_names;

  /* device.memory_layout: planned: the layout the run was served from, made from a traced
   * plan of the config on the caching allocator (owned); planned 0 when the run was on
   * the cache alone (caching, or the plan ran out of memory) */
  int32_t planned;
  ganfw_layout layout;
  int64_t num_planned, num_unplanned, planned_steps, unplanned_steps; /* the allocator's */
} ganfw_probe_result;

/* Opens a run of `config` (train/run.h), builds the session (on the meta backend when
 * opt->meta) and runs opt->warmup then opt->steps training steps as `ganfw CONFIG` does (a
 * GAN step measured as a D phase and a G phase). An OOM anywhere is reported in out->oom
 * (GANFW_OK is returned); other failures return their status with the message. Free out
 * with ganfw_probe_result_free (also after a failure). */
ganfw_status ganfw_probe_run(const ganfw_run_config *config, const ganfw_probe_options *opt,
                             ganfw_probe_result *out);
void ganfw_probe_result_free(ganfw_probe_result *r); /* the layers; accepts NULL */

/* "D step", "G step", "step" (classifier) or "set-up" (phase -1). Static strings. */
const char *ganfw_probe_phase_name(const ganfw_probe_result *r, int32_t phase);

#endif
