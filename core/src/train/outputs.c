/* A run's files and progress line (see outputs.h). Whole files go through the atomic
 * writer (base/file.c), so a crash never leaves half a file. */
#include "train/outputs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/file.h"
#include "io/trace_file.h"
#include "base/log.h"

struct ganfw_metrics {
  ganfw_file_appender *f;
};

ganfw_status ganfw_path_join(char *buf, size_t n, const char *a, const char *b) {
  int len = snprintf(buf, n, "%s/%s", a, b);
  if (len < 0 || (size_t)len >= n)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "path too long: %s/%s", a, b);
  return GANFW_OK;
}

ganfw_status ganfw_mkdirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return ganfw_error_set(GANFW_ERR_IO, "bad folder name '%s'", path);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return ganfw_error_set(GANFW_ERR_IO,
                             "%s: cannot create the folder: %s (check that the folder above it "
                             "is writable, or point run.out_dir elsewhere)",
                             buf, strerror(errno));
    buf[i] = c;
  }
  struct stat sb;
  if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return ganfw_error_set(GANFW_ERR_IO, "%s: exists and is not a folder", path);
  return GANFW_OK;
}

void ganfw_run_folder_clean(const char *dir) {
  const char *subs[] = {"", "checkpoints", "samples"};
  int64_t removed = 0;
  for (int i = 0; i < 3; i++) {
    char path[4096];
    if (ganfw_path_join(path, sizeof path, dir, subs[i]) != GANFW_OK) continue;
    removed += ganfw_file_remove_stale_temporaries(i == 0 ? dir : path);
  }
  if (removed > 0)
    ganfw_log(GANFW_LOG_INFO, "%s: removed %lld temporary file%s that an interrupted write left",
              dir, (long long)removed, removed == 1 ? "" : "s");
}

/* Writes <dir>/<name> atomically through `write`. */
static ganfw_status write_in(const char *dir, const char *name, ganfw_file_writer write,
                             void *obj) {
  char path[4096];
  ganfw_status st = ganfw_path_join(path, sizeof path, dir, name);
  if (st != GANFW_OK) return st;
  return ganfw_file_write_atomic(path, write, obj);
}

static ganfw_status write_config(FILE *f, void *c) {
  return ganfw_config_write_resolved(c, f);
}

ganfw_status ganfw_write_resolved_config(const ganfw_config *c, const char *dir) {
  return write_in(dir, "config.resolved.yaml", write_config, (void *)c);
}

void ganfw_calibration_take(ganfw_calibration *cal, const ganfw_alloc *a) {
  if (!cal || cal->taken) return;
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  cal->taken = 1;
  cal->m_allocated = st.allocated.peak;
  cal->m_reserved = st.reserved.peak;
  for (int c = 0; c < GANFW_MEM_COUNT; c++) cal->m_category[c] = st.category[c].peak;
}

typedef struct memory_job {
  const ganfw_alloc *a;
  const char *more;
} memory_job;

static ganfw_status write_memory(FILE *f, void *ud) {
  const memory_job *j = ud;
  return ganfw_alloc_write_json(j->a, f, j->more);
}

static double diff_percent(int64_t plan, int64_t measured) {
  return measured ? 100.0 * (double)(plan - measured) / (double)measured : plan ? 100.0 : 0.0;
}

/* "calibration": the plan's peaks, the run's and their difference, per total and category. */
static void calibration_json(const ganfw_alloc *a, const ganfw_calibration *cal, char *buf,
                             size_t n) {
  ganfw_calibration m = *cal;
  ganfw_calibration_take(&m, a);
  size_t len = 0;
#define APP(...) len += (size_t)snprintf(buf + len, len < n ? n - len : 0, __VA_ARGS__)
  APP("  \"calibration\": {\n    \"source\": \"plan (meta backend, before the first step)\",\n"
      "    \"measured\": \"the run's peaks over its steps before its first sample grid, "
      "checkpoint or evaluation\",\n");
  APP("    \"allocated\": {\"predicted\": %lld, \"measured\": %lld, \"diff_percent\": %.4f},\n",
      (long long)cal->allocated, (long long)m.m_allocated,
      diff_percent(cal->allocated, m.m_allocated));
  APP("    \"reserved\": {\"predicted\": %lld, \"measured\": %lld, \"diff_percent\": %.4f},\n",
      (long long)cal->reserved, (long long)m.m_reserved, diff_percent(cal->reserved, m.m_reserved));
  APP("    \"category\": {");
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    APP("%s\n      \"%s\": {\"predicted\": %lld, \"measured\": %lld, \"diff_percent\": %.4f}",
        c ? "," : "", ganfw_mem_category_name(c), (long long)cal->category[c],
        (long long)m.m_category[c], diff_percent(cal->category[c], m.m_category[c]));
  APP("\n    }\n  }");
#undef APP
}

/* ",\n  \"ranks\": [...]": every rank's peaks of a data-parallel run, appended to buf. */
static void ranks_json(const ganfw_calibration *cal, char *buf, size_t n) {
  size_t len = strlen(buf);
  len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s  \"ranks\": [", len ? ",\n" : "");
  for (int32_t r = 0; r < cal->n_ranks && len < n; r++)
    len += (size_t)snprintf(buf + len, len < n ? n - len : 0,
                            "%s\n    {\"rank\": %d, \"peak_allocated\": %lld, \"peak_reserved\": "
                            "%lld, \"peak_comm\": %lld}",
                            r ? "," : "", (int)r, (long long)cal->rank_peak[r][0],
                            (long long)cal->rank_peak[r][1], (long long)cal->rank_peak[r][2]);
  if (len < n) snprintf(buf + len, n - len, "\n  ]");
}

ganfw_status ganfw_write_memory_json(const ganfw_alloc *a, const char *algorithms, const char *dir,
                                     const ganfw_calibration *cal) {
  const size_t cap =
      2048 + 160 * GANFW_CALIBRATION_MAX_RANKS + (algorithms ? strlen(algorithms) : 0);
  char *more = calloc(1, cap + 64);
  if (!more) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory for memory.json");
  if (cal && cal->have) calibration_json(a, cal, more, cap);
  if (cal && cal->n_ranks > 1) ranks_json(cal, more, cap);
  if (algorithms) {
    const size_t len = strlen(more);
    snprintf(more + len, cap + 64 - len, "%s  \"algorithms\": [\n%s\n  ]", len ? ",\n" : "",
             algorithms);
  }
  memory_job mj = {a, *more ? more : NULL};
  ganfw_status st = write_in(dir, "memory.json", write_memory, &mj);
  free(more);
  if (st == GANFW_OK && ganfw_alloc_trace_length(a) == 0) {
    char path[4096]; /* an earlier traced run's trace.json would not describe this run */
    if (ganfw_path_join(path, sizeof path, dir, "trace.json") == GANFW_OK) unlink(path);
  }
  if (st != GANFW_OK || ganfw_alloc_trace_length(a) == 0) return st;
  ganfw_trace_event *ev = NULL; /* device.trace: the same events for ui.perfetto.dev */
  int64_t n = 0;
  char path[4096];
  if ((st = ganfw_alloc_trace_copy(a, &ev, &n)) != GANFW_OK) return st;
  st = ganfw_path_join(path, sizeof path, dir, "trace.json");
  if (st == GANFW_OK) st = ganfw_trace_write_chrome_file(path, ev, n, dir);
  free(ev);
  return st;
}

typedef struct {
  const char *path, *header;
  FILE *old; /* the file as it was, or NULL */
  int64_t from_step;
  int32_t pad; /* empty fields appended to each row kept (columns the header gained) */
} csv_rewrite;

static int whole_line(const char *line) {
  size_t n = strlen(line);
  return n > 0 && line[n - 1] == '\n';
}

static ganfw_status write_csv_rows(FILE *f, void *ud) {
  csv_rewrite *r = ud;
  char line[8192];
  int have_header = r->old && fgets(line, sizeof line, r->old) != NULL;
  if (r->header)
    fprintf(f, "%s\n", r->header);
  else if (have_header)
    fputs(line, f);
  if (!r->header && have_header && !whole_line(line)) fputc('\n', f);
  /* a last row without its newline is half a row (a write cut short): dropped */
  while (have_header && fgets(line, sizeof line, r->old)) {
    if (!whole_line(line) || strtoll(line, NULL, 10) >= r->from_step) continue;
    line[strlen(line) - 1] = '\0';
    fputs(line, f);
    for (int32_t i = 0; i < r->pad; i++) fputc(',', f);
    fputc('\n', f);
  }
  if (r->old && ferror(r->old))
    return ganfw_error_set(GANFW_ERR_IO, "%s: cannot read it back for resume", r->path);
  return GANFW_OK;
}

static ganfw_status csv_rewrite_padded(const char *path, const char *header, int32_t keep,
                                       int64_t from_step, int32_t pad) {
  csv_rewrite r = {path, header, keep ? fopen(path, "r") : NULL, from_step, pad};
  if (!r.old && !header) return GANFW_OK;
  ganfw_status st = ganfw_file_write_atomic(path, write_csv_rows, &r);
  if (r.old) fclose(r.old);
  return st;
}

ganfw_status ganfw_csv_rewrite(const char *path, const char *header, int32_t keep,
                               int64_t from_step) {
  return csv_rewrite_padded(path, header, keep, from_step, 0);
}

/* The header a resumed metrics.csv keeps: its own, unless `columns` is it with columns
 * added at its end (a run of an older ganfw, before peak_allocated and peak_reserved):
 * then `columns`, with *pad the fields its kept rows gain (empty). */
static const char *resumed_header(const char *path, const char *columns, int32_t *pad) {
  *pad = 0;
  char line[8192];
  FILE *f = fopen(path, "r");
  const int have = f && fgets(line, sizeof line, f) && whole_line(line);
  if (f) fclose(f);
  if (!have) return NULL;
  const size_t len = strlen(line) - 1;
  if (len == 0 || strncmp(columns, line, len) != 0 || columns[len] != ',') return NULL;
  for (const char *c = columns + len; *c; c++) *pad += *c == ',';
  return columns;
}

ganfw_status ganfw_metrics_open(const char *dir, const char *columns, int32_t append,
                                int64_t from_step, ganfw_metrics **out) {
  *out = NULL;
  char path[4096];
  ganfw_status st = ganfw_path_join(path, sizeof path, dir, "metrics.csv");
  if (st != GANFW_OK) return st;
  /* The header (and on resume the rows kept) are written whole by the atomic writer
   * before any row is appended, so metrics.csv never lacks its header (an empty one, left
   * by an older version, gets it too). */
  struct stat sb;
  int32_t pad = 0;
  if (append && stat(path, &sb) == 0 && sb.st_size > 0) {
    const char *header = resumed_header(path, columns, &pad);
    st = csv_rewrite_padded(path, header, 1, from_step, pad);
  } else {
    st = ganfw_csv_rewrite(path, columns, 0, 0);
  }
  if (st != GANFW_OK) return st;
  ganfw_metrics *m = calloc(1, sizeof *m);
  if (!m) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if ((st = ganfw_file_append_open(path, &m->f)) != GANFW_OK) {
    free(m);
    return st;
  }
  *out = m;
  return GANFW_OK;
}

ganfw_status ganfw_metrics_row(ganfw_metrics *m, const double *values, int32_t n) {
  char row[8192];
  size_t len = 0;
  for (int32_t i = 0; i < n && len < sizeof row; i++)
    len += (size_t)snprintf(row + len, sizeof row - len, i ? ",%.9g" : "%.0f", values[i]);
  if (len + 1 >= sizeof row)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: a row of %d values is too long",
                           ganfw_file_append_path(m->f), n);
  row[len++] = '\n';
  return ganfw_file_append(m->f, row, len);
}

void ganfw_metrics_close(ganfw_metrics *m) {
  if (!m) return;
  ganfw_file_append_close(m->f);
  free(m);
}

void ganfw_progress(int64_t step, int64_t total, double images_per_s, double eta_s,
                    const char *losses, const ganfw_alloc *a, int64_t peak_allocated,
                    int64_t peak_reserved, int32_t final) {
  ganfw_alloc_stats s;
  ganfw_alloc_get_stats(a, &s);
  char eta[32] = "-";
  if (eta_s >= 0 && !final) {
    long long t = (long long)(eta_s + 0.5);
    snprintf(eta, sizeof eta, "%lldm%02llds", t / 60, t % 60);
  }
  const double mib = 1024.0 * 1024.0;
  char memory[128];
  snprintf(memory, sizeof memory, "alloc %.1f MiB (peak %.1f)  reserved %.1f MiB (peak %.1f)",
           s.allocated.current / mib, peak_allocated / mib, s.reserved.current / mib,
           peak_reserved / mib);
  if (isatty(STDERR_FILENO)) {
    fprintf(stderr, "\r\033[Kstep %lld/%lld  %.1f img/s  ETA %s  %s  %s%s", (long long)step,
            (long long)total, images_per_s, eta, losses, memory, final ? "\n" : "");
    fflush(stderr);
  } else {
    ganfw_log(GANFW_LOG_INFO, "step %lld/%lld  %.1f img/s  ETA %s  %s  %s", (long long)step,
              (long long)total, images_per_s, eta, losses, memory);
  }
}
