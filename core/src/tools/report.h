/* memory.html: one self-contained page per run or comparison (no network, no script, the
 * pictures inline as SVG): the step's memory timeline (tools/timeline.h), the plan's table of
 * who holds the bytes at the peak, per layer and category, and the compare table when there
 * is one. `ganfw CONFIG` writes it into the run folder; `ganfw compare ... --html FILE`
 * writes a comparison. */
#ifndef GANFW_REPORT_H
#define GANFW_REPORT_H

#include <stdint.h>

#include "ganfw/status.h"
#include "runtime/trace_event.h"
#include "plan/probe.h"

/* One config's row of `ganfw compare` (tools/compare.h runs them), which the page's compare
 * table shows. */
typedef struct ganfw_compare_row {
  const char *config;  /* borrowed from the caller */
  char label[512];     /* config, and "(layout)" when compare set the layout */
  ganfw_status status; /* GANFW_OK, or the failure other than OOM (see error) */
  char error[512];
  ganfw_probe_result r;                  /* r.oom: it ran out of memory (r.oom_report) */
  int32_t planned;                       /* the plan of the same config ran: */
  int64_t plan_allocated, plan_reserved; /* its peaks, for the plan-vs-measured column */
  ganfw_probe_result plan; /* ... and the plan itself, by layer and traced (the report) */
} ganfw_compare_row;

/* The device.memory_layout a row ran with: "planned", or "caching" (also when the planned
 * layout's segment did not fit under the memory_limit and the cache served the run). */
const char *ganfw_compare_row_layout(const ganfw_compare_row *row);

typedef struct ganfw_report_part {
  const char *name;            /* the config or run, a heading */
  const char *caption;         /* where the timeline is from, e.g. "step 3 (traced)" */
  const ganfw_trace_event *ev; /* one step's events (ganfw_trace_find_step); NULL: none */
  int64_t n;
  const ganfw_probe_result *plan; /* with layers: the by-layer table; NULL: none */
  const char *html;               /* (optional) a tool's own section, an HTML fragment written as is
                                     first in the part (fit's front and tables); NULL: none */
} ganfw_report_part;

/* Writes the page to `path` atomically. Its <title> is `title` followed by ": peak X MiB
 * allocated" of the first part's step (when it has one). rows (may be NULL) is the compare
 * table. GANFW_ERR_IO naming the path on failure. */
ganfw_status ganfw_report_write_html(const char *path, const char *title,
                                     const ganfw_report_part *parts, int n_parts,
                                     const ganfw_compare_row *rows, int n_rows);

/* The plan of a config as ganfw_plan_make makes it (by layer), with its allocator events
 * traced (out->trace) over a warm-up and a measured step; step 2 is the one to draw. */
ganfw_status ganfw_report_plan(const ganfw_run_config *config, ganfw_probe_result *out);

#endif
