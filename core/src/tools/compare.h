/* `ganfw compare A.yaml B.yaml ...`: each config trained for a few steps on its device
 * with batches from its data set, side by side: peak allocated and reserved, peak per
 * category, step time and images/s, final losses, skipped optimizer steps, and whether
 * it ran out of memory (a row, not a failure). As a Markdown table, CSV or JSON. */
#ifndef GANFW_COMPARE_H
#define GANFW_COMPARE_H

#include <stdio.h>

#include "plan/probe.h"
#include "tools/report.h" /* ganfw_compare_row */

typedef struct ganfw_compare_options {
  int32_t warmup; /* steps before measuring (default 2) */
  int32_t steps;  /* measured steps (default 10) */
  /* device.memory_layout per run: n_layouts 0 runs each config as it says; otherwise each
   * config runs once per layouts[k] ("caching" or "planned"), the rows side by side */
  const char *layouts[2];
  int32_t n_layouts;
} ganfw_compare_options;

/* Runs configs[0..n) one after the other (each with the --set assignments) into rows
 * (n * max(1, opt->n_layouts) of them, filled by this call: each config's rows together,
 * in the order of opt->layouts). A config that runs out of memory, or fails in another
 * way, is a row saying so; the others still run. Prints a progress line per config to
 * `log` when not NULL. Returns GANFW_OK, or GANFW_ERR_INVALID_ARG for bad options. */
ganfw_status ganfw_compare_run(const char *const *configs, int n, const char *const *sets,
                               int nsets, const ganfw_compare_options *opt, ganfw_compare_row *rows,
                               FILE *log);
void ganfw_compare_rows_free(ganfw_compare_row *rows, int n);

/* The table (Markdown), then one line per OOM or failed row with its report's first line. */
void ganfw_compare_print(const ganfw_compare_row *rows, int n, FILE *out);
/* The same fields, one row per config: CSV with a header line, or a JSON array of
 * objects. Bytes are integers, times seconds. GANFW_ERR_IO naming the path on failure. */
ganfw_status ganfw_compare_write_csv(const ganfw_compare_row *rows, int n, const char *path);
ganfw_status ganfw_compare_write_json(const ganfw_compare_row *rows, int n, const char *path);
/* memory.html for the comparison (tools/report.h): the table, then each config's planned
 * step timeline and by-layer table. */
ganfw_status ganfw_compare_write_html(const ganfw_compare_row *rows, int n, const char *path);

#endif
