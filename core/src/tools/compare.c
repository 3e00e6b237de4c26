/* `ganfw compare` (see compare.h): every config through ganfw_probe_run on its device with
 * its data set, and the rows as a Markdown table, CSV or JSON with the same fields. */
#include "tools/compare.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "base/json.h"
#include "tools/plan.h"
#include "tools/report.h"
#include "runtime/tensor.h"

#define MIB (1024.0 * 1024.0)

/* --set assignments a row adds device.memory_layout to */
#define COMPARE_SETS_MAX 64

/* One row: the config with the --set assignments (and device.memory_layout=layout when not
 * NULL), read once, measured, then planned for the plan-vs-measured column and the report. */
static void compare_one(const char *config, const char *layout, const char *const *sets, int nsets,
                        const ganfw_probe_options *popt, const char *progress,
                        ganfw_compare_row *row, FILE *log) {
  const char *more[COMPARE_SETS_MAX + 1];
  char layout_set[64];
  int nmore = 0;
  for (int i = 0; i < nsets && nmore < COMPARE_SETS_MAX; i++) more[nmore++] = sets[i];
  if (layout) {
    snprintf(layout_set, sizeof layout_set, "device.memory_layout=%s", layout);
    more[nmore++] = layout_set;
  }
  row->config = config;
  if (layout)
    snprintf(row->label, sizeof row->label, "%s (%s)", config, layout);
  else
    snprintf(row->label, sizeof row->label, "%s", config);
  if (log) {
    fprintf(log, "compare: %s (%s): %d warm-up + %d measured steps\n", row->label, progress,
            (int)popt->warmup, (int)popt->steps);
    fflush(log);
  }
  ganfw_run_config *rc = NULL;
  row->status = ganfw_run_config_open(config, more, nmore, &rc);
  if (row->status == GANFW_OK) row->status = ganfw_probe_run(rc, popt, &row->r);
  if (row->status != GANFW_OK) {
    snprintf(row->error, sizeof row->error, "%s", ganfw_error_message());
    ganfw_error_clear();
  }
  /* the planner's calibration: its peak against the measured; kept for the report */
  if (row->status == GANFW_OK && ganfw_report_plan(rc, &row->plan) == GANFW_OK && !row->plan.oom) {
    row->planned = 1;
    row->plan_allocated = row->plan.peak_allocated;
    row->plan_reserved = row->plan.peak_reserved;
  }
  ganfw_error_clear();
  ganfw_run_config_free(rc);
  if (log && row->status != GANFW_OK)
    fprintf(log, "compare: %s failed: %s\n", row->label, row->error);
  else if (log && row->r.oom)
    fprintf(log, "compare: %s ran out of memory in the %s\n", row->label, row->r.oom_where);
}

ganfw_status ganfw_compare_run(const char *const *configs, int n, const char *const *sets,
                               int nsets, const ganfw_compare_options *opt, ganfw_compare_row *rows,
                               FILE *log) {
  const int per = opt->n_layouts > 0 ? opt->n_layouts : 1;
  memset(rows, 0, (size_t)(n > 0 ? n : 0) * (size_t)per * sizeof *rows);
  if (opt->steps < 1 || opt->warmup < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "compare: --steps must be at least 1 and --warmup at least 0");
  if (opt->n_layouts < 0 || opt->n_layouts > 2 || nsets > COMPARE_SETS_MAX)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "compare: at most two layouts and %d --set assignments",
                           COMPARE_SETS_MAX);
  ganfw_probe_options popt = {.meta = 0,
                              .warmup = opt->warmup,
                              .steps = opt->steps,
                              .real_data = 1,
                              .limit_mode = GANFW_PROBE_LIMIT_CONFIG};
  for (int i = 0; i < n; i++)
    for (int k = 0; k < per; k++) {
      char progress[32];
      snprintf(progress, sizeof progress, "%d/%d", i * per + k + 1, n * per);
      compare_one(configs[i], opt->n_layouts > 0 ? opt->layouts[k] : NULL, sets, nsets, &popt,
                  progress, &rows[i * per + k], log);
    }
  return GANFW_OK;
}

void ganfw_compare_rows_free(ganfw_compare_row *rows, int n) {
  for (int i = 0; rows && i < n; i++) {
    ganfw_probe_result_free(&rows[i].r);
    ganfw_probe_result_free(&rows[i].plan);
  }
}

static const char *row_state(const ganfw_compare_row *row) {
  return row->status != GANFW_OK ? "error" : row->r.oom ? "oom" : "ok";
}

/* The first line of the OOM report or the error, into buf. */
static const char *first_line(const ganfw_compare_row *row, char *buf, size_t n) {
  const char *text = row->status != GANFW_OK ? row->error : row->r.oom ? row->r.oom_report : "";
  const char *nl = strchr(text, '\n');
  snprintf(buf, n, "%.*s", nl ? (int)(nl - text) : (int)strlen(text), text);
  return buf;
}

void ganfw_compare_print(const ganfw_compare_row *rows, int n, FILE *out) {
  int dp = 0; /* data-parallel rows (mpirun): a rank's figures, and time in collectives */
  for (int i = 0; i < n; i++) dp |= rows[i].status == GANFW_OK && rows[i].r.ranks > 1;
  fprintf(out, "| config | layout | batch | peak allocated MiB | peak reserved MiB |");
  for (int c = 0; c < GANFW_MEM_COUNT; c++) fprintf(out, " %s |", ganfw_mem_category_name(c));
  fprintf(out,
          " step s |%s images/s | final losses | skipped | OOM | plan - measured |\n"
          "|---|---|--:|--:|--:|",
          dp ? " ranks | comm s |" : "");
  for (int c = 0; c < GANFW_MEM_COUNT; c++) fprintf(out, "--:|");
  fprintf(out, "--:|%s--:|---|--:|---|--:|\n", dp ? "--:|--:|" : "");
  for (int i = 0; i < n; i++) {
    const ganfw_compare_row *row = &rows[i];
    const ganfw_probe_result *r = &row->r;
    if (row->status != GANFW_OK) {
      fprintf(out, "| %s | | | | |", row->config);
      for (int c = 0; c < GANFW_MEM_COUNT; c++) fprintf(out, " |");
      fprintf(out, "%s | | | | error | |\n", dp ? " | |" : "");
      continue;
    }
    fprintf(out, "| %s | %s | %lld | %.2f | %.2f |", row->config, ganfw_compare_row_layout(row),
            (long long)r->batch_size, (double)r->peak_allocated / MIB,
            (double)r->peak_reserved / MIB);
    for (int c = 0; c < GANFW_MEM_COUNT; c++)
      fprintf(out, " %.2f |", (double)r->peak_category[c] / MIB);
    char step[64] = " - |";
    if (r->steps_done > 0) snprintf(step, sizeof step, " %.3f |", r->step_seconds);
    if (dp && r->steps_done > 0)
      snprintf(step + strlen(step), sizeof step - strlen(step), " %d | %.3f |", (int)r->ranks,
               r->comm_seconds);
    else if (dp)
      snprintf(step + strlen(step), sizeof step - strlen(step), " %d | - |", (int)r->ranks);
    if (r->steps_done > 0 && r->family == GANFW_MODEL_GAN)
      fprintf(out, "%s %.1f | D %.4f, G %.4f |", step, r->images_per_s, r->loss_d, r->loss_g);
    else if (r->steps_done > 0 && r->family == GANFW_MODEL_NETS)
      fprintf(out, "%s %.1f | %s |", step, r->images_per_s, r->scalars);
    else if (r->steps_done > 0)
      fprintf(out, "%s %.1f | loss %.4f, acc %.3f |", step, r->images_per_s, r->loss, r->accuracy);
    else
      fprintf(out, "%s - | - |", step);
    if (r->family == GANFW_MODEL_GAN)
      fprintf(out, " D %lld, G %lld |", (long long)r->skipped_d, (long long)r->skipped_g);
    else
      fprintf(out, " %lld |", (long long)r->skipped_g);
    fprintf(out, " %s |", r->oom ? "yes" : "no");
    /* the planner's calibration: a drift between plan and device shows here */
    if (row->planned && !r->oom)
      fprintf(out, " %+.2f%% |\n", ganfw_plan_diff_percent(row->plan_allocated, r->peak_allocated));
    else
      fprintf(out, " - |\n");
  }
  for (int i = 0; i < n; i++) {
    const ganfw_compare_row *row = &rows[i];
    char line[1024];
    if (row->status != GANFW_OK)
      fprintf(out, "\n%s: failed: %s", row->label, first_line(row, line, sizeof line));
    else if (row->r.oom)
      fprintf(out, "\n%s: OOM in the %s: %s", row->label, row->r.oom_where,
              first_line(row, line, sizeof line));
  }
  fprintf(out, "\n");
}

/* --- machine-readable ----------------------------------------------------------------------- */

/* A row's fields in order: name, text and whether the text is a string (quoted). */
#define MAX_FIELDS 40

typedef struct field {
  const char *key;
  char value[1024];
  int32_t is_string;
} field;

static void put(field *f, int *n, const char *key, int32_t is_string, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void put(field *f, int *n, const char *key, int32_t is_string, const char *fmt, ...) {
  if (*n == MAX_FIELDS) return;
  field *x = &f[(*n)++];
  x->key = key;
  x->is_string = is_string;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->value, sizeof x->value, fmt, ap);
  va_end(ap);
}

static int row_fields(const ganfw_compare_row *row, field *f) {
  static const char *const peak_keys[GANFW_MEM_COUNT] = {
      "peak_param",     "peak_grad", "peak_optim_state", "peak_activation",
      "peak_workspace", "peak_data", "peak_other",       "peak_comm"};
  _Static_assert(GANFW_MEM_COUNT == 8, "peak_keys names every memory category");
  const ganfw_probe_result *r = &row->r;
  char line[1024];
  int n = 0;
  put(f, &n, "config", 1, "%s", row->config);
  put(f, &n, "layout", 1, "%s", ganfw_compare_row_layout(row));
  put(f, &n, "status", 1, "%s", row_state(row));
  put(f, &n, "family", 1, "%s", r->family == GANFW_MODEL_GAN ? "gan" : "classifier");
  put(f, &n, "batch_size", 0, "%lld", (long long)r->batch_size);
  put(f, &n, "micro_batches", 0, "%d", (int)r->micro_batches);
  put(f, &n, "compute_dtype", 1, "%s", ganfw_dtype_name(r->compute_dtype));
  put(f, &n, "memory_limit", 0, "%lld", (long long)r->memory_limit);
  put(f, &n, "peak_allocated", 0, "%lld", (long long)r->peak_allocated);
  put(f, &n, "peak_reserved", 0, "%lld", (long long)r->peak_reserved);
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    put(f, &n, peak_keys[c], 0, "%lld", (long long)r->peak_category[c]);
  put(f, &n, "steps", 0, "%d", (int)r->steps_done);
  put(f, &n, "step_seconds", 0, "%.6f", r->step_seconds);
  put(f, &n, "ranks", 0, "%d", (int)(r->ranks > 0 ? r->ranks : 1));
  put(f, &n, "comm_seconds", 0, "%.6f", r->comm_seconds);
  put(f, &n, "images_per_s", 0, "%.3f", r->images_per_s);
  put(f, &n, "loss_d", 0, "%.6f", r->loss_d);
  put(f, &n, "loss_g", 0, "%.6f", r->loss_g);
  put(f, &n, "loss", 0, "%.6f", r->loss);
  put(f, &n, "accuracy", 0, "%.6f", r->accuracy);
  put(f, &n, "skipped_d", 0, "%lld", (long long)r->skipped_d);
  put(f, &n, "skipped_g", 0, "%lld", (long long)r->skipped_g);
  put(f, &n, "plan_peak_allocated", 0, "%lld",
      (long long)(row->planned ? row->plan_allocated : -1));
  put(f, &n, "plan_peak_reserved", 0, "%lld", (long long)(row->planned ? row->plan_reserved : -1));
  put(f, &n, "oom", 0, "%d", r->oom ? 1 : 0);
  put(f, &n, "oom_where", 1, "%s", r->oom_where);
  put(f, &n, "report", 1, "%s", first_line(row, line, sizeof line));
  return n;
}

static void csv_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

typedef struct {
  const ganfw_compare_row *rows;
  int n;
} compare_job;

static ganfw_status write_csv(FILE *f, void *ud) {
  const compare_job *j = ud;
  field fl[MAX_FIELDS];
  ganfw_compare_row empty = {.config = ""};
  int nf = row_fields(&empty, fl);
  for (int k = 0; k < nf; k++) fprintf(f, "%s%s", k ? "," : "", fl[k].key);
  fputc('\n', f);
  for (int i = 0; i < j->n; i++) {
    nf = row_fields(&j->rows[i], fl);
    for (int k = 0; k < nf; k++) {
      if (k) fputc(',', f);
      if (fl[k].is_string)
        csv_string(f, fl[k].value);
      else
        fputs(fl[k].value, f);
    }
    fputc('\n', f);
  }
  return GANFW_OK;
}

static ganfw_status write_json(FILE *f, void *ud) {
  const compare_job *j = ud;
  field fl[MAX_FIELDS];
  fputs("[\n", f);
  for (int i = 0; i < j->n; i++) {
    int nf = row_fields(&j->rows[i], fl);
    fputs("  {", f);
    for (int k = 0; k < nf; k++) {
      fprintf(f, "%s\"%s\": ", k ? ", " : "", fl[k].key);
      if (fl[k].is_string)
        ganfw_json_fputs(f, fl[k].value);
      else
        fputs(fl[k].value, f);
    }
    fprintf(f, "}%s\n", i + 1 < j->n ? "," : "");
  }
  fputs("]\n", f);
  return GANFW_OK;
}

/* Both reports go through the atomic writer: a failed write leaves no half report. */
ganfw_status ganfw_compare_write_csv(const ganfw_compare_row *rows, int n, const char *path) {
  compare_job j = {rows, n};
  ganfw_status st = ganfw_file_write_atomic(path, write_csv, &j);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "compare --csv");
}

ganfw_status ganfw_compare_write_json(const ganfw_compare_row *rows, int n, const char *path) {
  compare_job j = {rows, n};
  ganfw_status st = ganfw_file_write_atomic(path, write_json, &j);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "compare --json");
}

ganfw_status ganfw_compare_write_html(const ganfw_compare_row *rows, int n, const char *path) {
  ganfw_report_part *parts = calloc((size_t)(n > 0 ? n : 1), sizeof *parts);
  if (!parts) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory for %s", path);
  int k = 0;
  for (int i = 0; i < n; i++) {
    const ganfw_probe_result *p = &rows[i].plan;
    int64_t first = 0, count = 0;
    if (!rows[i].planned || ganfw_trace_find_step(p->trace, p->n_trace, 2, &first, &count))
      continue;
    parts[k++] = (ganfw_report_part){.name = rows[i].label,
                                     .caption = "step 2 (plan)",
                                     .ev = p->trace + first,
                                     .n = count,
                                     .plan = p};
  }
  ganfw_error_clear();
  ganfw_status st = ganfw_report_write_html(path, "ganfw compare", parts, k, rows, n);
  free(parts);
  return st;
}
