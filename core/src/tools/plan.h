/* The memory planner's tools, all built on ganfw_probe_run (probe.h) over the meta
 * backend: `ganfw plan` (peak memory per category, per phase and per layer from shapes
 * alone, and against one real step), `ganfw find-batch` (the largest batch that fits the
 * device budget) and the advice an out-of-memory failure ends with (what each memory
 * strategy would bring the peak to). */
#ifndef GANFW_PLAN_H
#define GANFW_PLAN_H

#include <stdio.h>

#include "plan/probe.h"

/* --- plan (plan.c) ---------------------------------------------------------------------- */

/* The plan of a config: one warm-up and one measured step on the meta backend with the
 * per-layer table, under the config's memory_limit. When that limit is too small, *out
 * has oom = 1 with the report, and its peaks and layers come from a second plan without
 * the limit. batch_size > 0 replaces train.batch_size; extra_memory as in
 * ganfw_probe_options. Free *out with ganfw_probe_result_free. */
ganfw_status ganfw_plan_make(const ganfw_run_config *config, int64_t batch_size,
                             const char *extra_memory, ganfw_probe_result *out);

/* One real step on the config's device after one warm-up step, with the plan's data
 * shape (noise instead of the data set), for comparing with the plan. With `summary` not
 * NULL the allocator's memory_summary after the step is written there. */
ganfw_status ganfw_plan_measure(const ganfw_run_config *config, const ganfw_probe_result *plan,
                                FILE *summary, ganfw_probe_result *out);

/* The plan as tables: per category and phase, totals, and per layer at the peak. */
void ganfw_plan_print(const char *config, const ganfw_probe_result *plan, FILE *out);
/* The layout a planned run is served from (device.memory_layout: planned), one line:
 * "Arena (device.memory_layout: planned, ...): N of the step's M requests at planned offsets
 * in X MiB, ...". */
void ganfw_plan_print_layout(const ganfw_layout *l, FILE *out);
/* The step-local blocks of step 2 of `traced` (a traced plan, as ganfw_report_plan makes it)
 * laid out in one arena (plan/arena.h), one line: "Arena (...): N blocks in X MiB, lower bound
 * Y MiB (R x); ...". Writes nothing for a plan that ran out of memory or holds no step 2
 * (the plan printed before it says why). */
void ganfw_plan_print_arena(const ganfw_probe_result *traced, FILE *out);
/* Plan against measured: peaks allocated and reserved, per phase, per category, with the
 * difference in percent of the measured value. */
void ganfw_plan_print_vs(const ganfw_probe_result *plan, const ganfw_probe_result *measured,
                         FILE *out);
/* (plan - measured) / measured in percent; 0 when both are 0. */
double ganfw_plan_diff_percent(int64_t plan, int64_t measured);

/* --- find-batch (find_batch.c) ------------------------------------------------------------ */

#define GANFW_FIND_BATCH_MAX_TRIES 64

typedef struct ganfw_find_batch_options {
  double margin;     /* fraction of the budget kept free, in [0, 0.9] (default 0.05) */
  int32_t confirm;   /* 1: one real step at the found size */
  int64_t max_batch; /* upper bound of the search (0: 1048576) */
  /* The host's free memory in bytes (0: unknown), with where the figure comes from written
   * into source[n] (optional: NULL reads the machine's). On a CPU device, where the host's
   * memory is the device's, it is called when the search starts and again before the
   * confirming step. */
  int64_t (*host_free)(void *ud, char *source, size_t n);
  void *host_free_ud;
} ganfw_find_batch_options;

typedef struct ganfw_find_batch_try {
  int64_t batch;
  int32_t fits;
  int64_t peak_allocated, peak_reserved; /* of the plan (up to the OOM when it does not fit) */
  char oom_where[64];
} ganfw_find_batch_try;

typedef struct ganfw_find_batch_result {
  int64_t budget;          /* memory_limit, or the device's free bytes; on a CPU device no
                              more than the host's free memory */
  int32_t from_limit;      /* 1: the budget is device.memory_limit */
  int32_t from_host;       /* 1: the budget is the host's free memory (CPU device) */
  int64_t host_free;       /* CPU device: the host's free memory when the search started;
                              0: another device, or unknown */
  char budget_source[256]; /* what the budget is, for messages ("device.memory_limit") */
  int64_t data_size;       /* samples of the data set (data.other's when fewer) */
  int64_t data_cap;        /* the largest batch training takes from them (loader.c's
                              ganfw_loader_max_batch); the search goes no higher */
  char data_cap_what[32];  /* "the data set's size" or "data.other's size" */
  char data_cap_why[768];  /* "mnist 'data/mnist': 8,495 images; data.drop_last is true, ..." */
  int32_t capped;          /* 1: the answer is data_cap rounded down to the granularity: more
                              memory would not make it larger */
  int64_t limit;           /* budget * (1 - margin): the memory_limit the plans run under */
  int64_t granularity;     /* batch sizes are multiples of this (the micro-batch count) */
  int64_t batch;           /* the largest batch that fits; 0 when none does */
  ganfw_probe_result plan; /* at `batch` */
  ganfw_find_batch_try tries[GANFW_FIND_BATCH_MAX_TRIES];
  int32_t n_tries;
  int32_t confirmed;         /* 1: a real step ran (see real) */
  int32_t confirm_skipped;   /* 1: no real step: on a CPU device its planned reserved bytes are
                                more than the host's free memory at that moment */
  int64_t confirm_host_free; /* the host's free memory just before the confirming step */
  ganfw_probe_result real;   /* the confirming step, under `limit` */
} ganfw_find_batch_result;

/* Searches batch sizes (doubling from train.batch_size, then bisecting) with plans under
 * `limit`, up to the largest batch training takes from the data set (data_cap), then
 * confirms the result with one real step under the same limit, unless on a CPU device that
 * step would reserve more than the host has free (confirm_skipped, said in `out`). The
 * result is the largest multiple of the granularity that fits, such that the next multiple
 * does not (or data_cap rounded down: capped). Prints the table of tries and what capped
 * the search to `out` when not NULL. Free *res with ganfw_find_batch_free. */
ganfw_status ganfw_find_batch(const ganfw_run_config *config, const ganfw_find_batch_options *opt,
                              ganfw_find_batch_result *res, FILE *out);
void ganfw_find_batch_free(ganfw_find_batch_result *res);

/* --- OOM advice (oom_advice.c) ------------------------------------------------------------- */

/* After a run of `config` ran out of memory: plans the config with each
 * memory strategy whose plugin is installed added (amp f16, checkpoint segments=2,
 * accumulate steps=2; one already in the config is left out) and with half the batch, and
 * writes one line per variant into buf ("  + amp f16: peak 310.00 MiB reserved, fits in
 * memory_limit 256.00 MiB"), after a heading; when the model's state alone is over the
 * budget, what reduces it (tools/oom.h, ganfw_oom_state_advice), and for a plan that runs
 * out in its set-up it keeps the set-up replayed for the recorder
 * (ganfw_oom_advice_setup_replay). buf is always NUL-terminated; "" when no variant could
 * be planned. */
void ganfw_oom_advice(const ganfw_run_config *config, char *buf, size_t n);

/* --- the OOM flight recorder (oom_record.c) ------------------------------------------------ */

/* After a training run of `config` ran out of memory: writes <out_dir>/oom/report.txt
 * (report then advice), and from `replay`, the config's traced plan under the same
 * memory_limit (ganfw_report_plan, made before the run; NULL or without events when it
 * could not be made), <out_dir>/oom/trace.json (Chrome's trace format) and
 * <out_dir>/oom/step.png (the failing step's timeline, or the set-up's, with the failed
 * request and the limit marked: tools/oom.h). out_dir is made when missing. `written`
 * receives the paths written, comma separated, also when a later file failed (whose error
 * is returned). */
ganfw_status ganfw_oom_record(const ganfw_run_config *config, const ganfw_probe_result *replay,
                              const char *out_dir, const char *report, const char *advice,
                              char *written, size_t n);

#endif
