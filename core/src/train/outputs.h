/* What a run leaves in run.out_dir: folders, the resolved config, metrics.csv, sample
 * grids, memory.json, and the progress line on the terminal. */
#ifndef GANFW_OUTPUTS_H
#define GANFW_OUTPUTS_H

#include <stdint.h>
#include <stdio.h>

#include "runtime/alloc.h"
#include "config/config.h"

/* mkdir -p; GANFW_ERR_IO naming the path. */
ganfw_status ganfw_mkdirs(const char *path);
/* "<a>/<b>" into buf; GANFW_ERR_INVALID_ARG when it does not fit. */
ganfw_status ganfw_path_join(char *buf, size_t n, const char *a, const char *b);
/* Removes the temporary files an interrupted write left in the run folder `dir`, its
 * checkpoints/ and samples/ (base/file.h), logging how many. */
void ganfw_run_folder_clean(const char *dir);
/* Writes the resolved config to <dir>/config.resolved.yaml atomically. */
ganfw_status ganfw_write_resolved_config(const ganfw_config *c, const char *dir);
/* What the planner predicted for a run before it started (the `ganfw CONFIG` command plans
 * the config on the meta backend first): peaks in bytes. */
#define GANFW_CALIBRATION_MAX_RANKS 64 /* ranks listed in memory.json */

typedef struct ganfw_calibration {
  int32_t have; /* 0: no prediction (the plan failed, or a caller without one) */
  int64_t allocated, reserved, category[GANFW_MEM_COUNT];
  /* the run's peaks over its steps, taken before its first sample grid, checkpoint or
   * evaluation (which the plan does not model); the end of the run when taken is 0 */
  int32_t taken;
  int64_t m_allocated, m_reserved, m_category[GANFW_MEM_COUNT];
  /* data-parallel runs: every rank's peaks (allocated, reserved, comm), for memory.json's
   * "ranks" (rank 0 writes it); n_ranks 0 alone */
  int32_t n_ranks;
  int64_t rank_peak[GANFW_CALIBRATION_MAX_RANKS][3];
} ganfw_calibration;

/* Takes the allocator's peaks as the run's measured step peaks, the first time only:
 * trainers call it before anything that is not a training step allocates. */
void ganfw_calibration_take(ganfw_calibration *cal, const ganfw_alloc *a);

/* Writes the allocator's stats and trace to <dir>/memory.json atomically, with the
 * planner's prediction against the allocator's peaks under "calibration" when cal->have
 * (cal may be NULL), and with device.trace the same events as a Chrome trace in
 * <dir>/trace.json. The layers'
 * backend algorithms (ctx->algorithms: JSON objects, or NULL) go under "algorithms". */
ganfw_status ganfw_write_memory_json(const ganfw_alloc *a, const char *algorithms, const char *dir,
                                     const ganfw_calibration *cal);

/* Rewrites the CSV file `path` atomically for a resumed run: `header` (NULL: the file's own
 * first line), then, when `keep`, the file's rows whose step (first column) is below
 * from_step. With no header and no file there is nothing to do. */
ganfw_status ganfw_csv_rewrite(const char *path, const char *header, int32_t keep,
                               int64_t from_step);

/* metrics.csv: one header, then a row per logged step. */
typedef struct ganfw_metrics ganfw_metrics;
/* Opens <dir>/metrics.csv with these comma-separated columns; `append` keeps the rows of
 * an earlier run (resume) and drops those at or after `from_step`, under the file's own
 * header, or under `columns` when they are that header with columns added at its end (a
 * file an older ganfw began): its rows then get empty fields for them. */
ganfw_status ganfw_metrics_open(const char *dir, const char *columns, int32_t append,
                                int64_t from_step, ganfw_metrics **out);
/* One row of n values (the first is the step), appended whole at once: a failed write
 * leaves no half row and names metrics.csv and the cause (base/file.h's appender). */
ganfw_status ganfw_metrics_row(ganfw_metrics *m, const double *values, int32_t n);
void ganfw_metrics_close(ganfw_metrics *m); /* accepts NULL */

/* The progress line: on a terminal one line rewritten in place, else a log line. Memory:
 * the allocator's allocated and reserved bytes now, and the peaks since the last line
 * (ganfw_alloc_window_peak), which a step reaches and leaves. */
void ganfw_progress(int64_t step, int64_t total, double images_per_s, double eta_s,
                    const char *losses, const ganfw_alloc *a, int64_t peak_allocated,
                    int64_t peak_reserved, int32_t final);

#endif
