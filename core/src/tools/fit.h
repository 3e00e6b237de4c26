/* `ganfw fit CONFIG --budget B`: the fastest setup of a config that fits a memory budget.
 * Every candidate (a combination of memory strategies, one option per dimension of
 * fit.c's table) is planned exactly on the meta backend, without allocating; its step
 * time is predicted by a model calibrated once by a few real steps on the config's device
 * and cached. The answer is a config file that `extends:` the input. */
#ifndef GANFW_FIT_H
#define GANFW_FIT_H

#include <stdint.h>
#include <stdio.h>

#include "plan/probe.h"

#define GANFW_FIT_MAX_DIMS       8
#define GANFW_FIT_MAX_CANDIDATES 512
#define GANFW_FIT_MAX_POINTS     64

typedef struct ganfw_fit_options {
  int64_t budget;           /* bytes (> 0), or 0 with budget_percent */
  double budget_percent;    /* (0, 100]: of device.memory_limit, else of the device's capacity */
  int32_t allow_batch;      /* 1: the batch itself may shrink (halved while nothing fits) */
  int32_t confirm;          /* 1: a few real steps of the chosen config under the budget */
  int32_t calib_steps;      /* measured steps per calibration run (0: 3) */
  const char *output;       /* the config to write; NULL: <config stem>_fit.yaml in the
                               current directory; "" writes none */
  const char *cache_dir;    /* NULL: $XDG_CACHE_HOME/ganfw, else ~/.cache/ganfw */
  int32_t show_calibration; /* 1: print the calibration table */
  const char *plot;         /* not NULL: the front drawn there (.svg, ganfw_fit_plot) */
  const char *html;         /* not NULL: a memory report there (ganfw_fit_html) */
  const char *budget_key;   /* how the budget was given, for messages; NULL: "--budget" */
} ganfw_fit_options;

/* One candidate: the strategies it adds to the config, its plan and its predicted time. */
typedef struct ganfw_fit_candidate {
  int32_t choice[GANFW_FIT_MAX_DIMS]; /* option index per dimension (0: off) */
  int64_t batch;                      /* the global batch */
  int32_t micro_batches;              /* 1: no accumulation */
  char memory[512];                   /* the `memory:` list, YAML flow: "[{plugin: amp, ...}]" */
  char optim[32];                     /* the optimizer plugin replacing optim.plugin, "" none */
  char label[160];                    /* "amp f16 + accumulate 4 + checkpoint 2", "as is" */
  int32_t refused;                    /* a strategy refused it when configured: not a candidate */
  int32_t planned;                    /* 1: its plan ran */
  int64_t peak_allocated, peak_reserved; /* planned; reserved on the caching allocator
                                            unless verified */
  int32_t verified;   /* planned again as the config runs (its device.memory_layout): its
                         peak_reserved is what the budget caps */
  double predicted_s; /* the model's step time */
  int32_t feasible;   /* verified, and peak_reserved <= the budget */
  int32_t pareto;     /* on the front: no other is both smaller and faster */
} ganfw_fit_candidate;

/* One calibrated point: the median step time of `micro_batches` micro-batches in the
 * precision `precision` (an option index of the precision dimension), or the ratio an
 * option of another dimension multiplies the step time by (dim >= 0). */
typedef struct ganfw_fit_point {
  int32_t dim;           /* -1: a step time point; else the dimension of a ratio */
  int32_t option;        /* the precision option, or the dimension's option */
  int32_t micro_batches; /* for a step time point */
  double seconds;        /* a step time point's median step; a ratio's value */
} ganfw_fit_point;

typedef struct ganfw_fit_calibration {
  char key[512];          /* what it is valid for: config hash, device, CPU features, batch */
  char path[1024];        /* the cache file */
  int32_t cached;         /* 1: read from the cache, 0: measured now */
  double measure_seconds; /* the wall time the measurement took (0 when cached) */
  ganfw_fit_point points[GANFW_FIT_MAX_POINTS];
  int32_t n_points;
} ganfw_fit_calibration;

typedef struct ganfw_fit_result {
  int64_t budget;          /* bytes */
  char budget_source[160]; /* "--budget 40MiB", "60% of device.memory_limit 1.00 GiB" */
  int64_t base_batch;
  int64_t config_limit; /* the config's device.memory_limit, 0: none */
  int32_t n_dims;
  const char *dim_names[GANFW_FIT_MAX_DIMS]; /* static strings */
  int32_t dim_found[GANFW_FIT_MAX_DIMS];     /* 1: its plugin was found */
  ganfw_fit_candidate *candidates;           /* owned (ganfw_fit_result_free) */
  int32_t n_candidates;
  int32_t chosen;   /* index into candidates; -1: none fits */
  int32_t smallest; /* nothing fits: the candidate of the smallest verified reserved peak
                       (the smallest feasible budget); -1 otherwise */
  ganfw_fit_calibration cal;
  char written[1024];      /* the config written, "" none */
  double search_seconds;   /* wall time of the planning and prediction */
  int32_t confirmed;       /* 1: the confirming run ran */
  ganfw_probe_result real; /* its result */
  int32_t confirm_fits;    /* measured reserved peak <= budget, without OOM */
  double confirm_error;    /* (fastest measured step - predicted) / predicted */
  /* the config as is measured just after (0: not measured: it does not fit the device, or
   * the batch changed), and the chosen one's time relative to it against the model's
   * ratio: what is left of the error when the machine's speed has drifted since the
   * calibration */
  double confirm_as_is_s, confirm_as_is_predicted_s, confirm_relative_error;
} ganfw_fit_result;

/* "6GiB", "512MiB", "12MB", "1048576" (byte units as config sizes read them) or "60%":
 * into *bytes or *percent (the other set to 0). GANFW_ERR_INVALID_ARG with a message naming
 * --budget when it is neither. */
ganfw_status ganfw_fit_parse_budget(const char *text, int64_t *bytes, double *percent);

/* Searches the candidates of `config` under opt's budget, writes the chosen config and
 * confirms it (opt->confirm), printing tables to `out` (NULL: quiet). A budget below every
 * candidate is GANFW_ERR_OOM with a message naming the smallest feasible budget and what
 * dominates it. Free *res with ganfw_fit_result_free, also after a failure. */
ganfw_status ganfw_fit(const ganfw_run_config *config, const ganfw_fit_options *opt,
                       ganfw_fit_result *res, FILE *out);
void ganfw_fit_result_free(ganfw_fit_result *res); /* accepts NULL */

/* The candidates of a search as an SVG at `path` (.svg): planned peak allocated against
 * predicted step time, the Pareto front and the chosen one marked, the budget a line.
 * Written atomically. */
ganfw_status ganfw_fit_plot(const ganfw_fit_result *res, const char *path);

/* memory.html for a search (tools/report.h) at `path`, written atomically: a section with
 * the front (as ganfw_fit_plot draws it) and the tables, then the chosen config's planned
 * step (its timeline and who holds its peak), read from res->written when there is one. */
ganfw_status ganfw_fit_html(const ganfw_fit_result *res, const char *path);

/* `find-batch --fit`: the largest batch (doubling from train.batch_size, then bisecting,
 * up to max_batch, 0: 1048576) at which some candidate without accumulation (under which
 * any batch fits) plans within opt's budget; *batch 0 when none does at batch 1. Plans
 * only: no calibration, nothing measured. Prints the tries and the answer to `out`. */
ganfw_status ganfw_fit_find_batch(const ganfw_run_config *config, const ganfw_fit_options *opt,
                                  int64_t max_batch, int64_t *batch, FILE *out);

/* `memory: [{plugin: auto, budget: B, allow_batch: false}]`: when config's memory list
 * holds the auto entry (and nothing else), runs fit's search on the config without it
 * (quiet, nothing written, nothing confirmed; the calibration cached in cache_dir, NULL:
 * fit's default) and derives *chosen from config with the chosen memory list, optimizer
 * and batch, and device.memory_limit the budget unless config's is lower (owned by the
 * caller, valid while config is). No auto entry: *chosen NULL and
 * GANFW_OK. A bad entry is GANFW_ERR_CONFIG naming the key; nothing fitting is
 * GANFW_ERR_OOM naming the smallest feasible budget, as fit's. */
ganfw_status ganfw_fit_auto(const ganfw_run_config *config, const char *cache_dir,
                            ganfw_run_config **chosen);

/* The model's prediction for a candidate from a calibration (seconds; 0 when the
 * calibration lacks a point it needs). */
double ganfw_fit_predict(const ganfw_fit_calibration *cal, const ganfw_fit_candidate *c,
                         int32_t n_dims);

#endif
