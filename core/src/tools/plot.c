/* `ganfw plot` (see plot.h): the events of a traced run or of a config's plan, one step of
 * them drawn, or all of them exported for Perfetto. */
#include "tools/plot.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/file.h"
#include "io/trace_file.h"
#include "plan/probe.h"

enum { OUT_PNG = 0, OUT_SVG, OUT_JSON };

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

typedef struct svg_job {
  const ganfw_trace_event *ev;
  int64_t n;
  const ganfw_timeline_options *opt;
} svg_job;

static ganfw_status write_svg(FILE *f, void *ud) {
  const svg_job *j = ud;
  return ganfw_timeline_write_svg(f, j->ev, j->n, j->opt);
}

/* The events of a config's probe: set-up, one warm-up step, one measured step. The config
 * is a->config, or read from a->source with a->sets. */
static ganfw_status config_events(const ganfw_plot_args *a, ganfw_probe_result *res) {
  ganfw_probe_options opt = {.meta = !a->measure,
                             .warmup = 1,
                             .steps = 1,
                             .layers = 0,
                             .limit_mode = GANFW_PROBE_LIMIT_CONFIG,
                             .trace = 1};
  ganfw_run_config *read = NULL;
  ganfw_status st =
      a->config ? GANFW_OK : ganfw_run_config_open(a->source, a->sets, a->nsets, &read);
  if (st == GANFW_OK) st = ganfw_probe_run(a->config ? a->config : read, &opt, res);
  ganfw_run_config_free(read);
  if (st != GANFW_OK) return st;
  if (res->n_trace == 0)
    return ganfw_error_set(GANFW_ERR_INTERNAL, "%s: the plan recorded no allocator events",
                           a->source);
  return GANFW_OK;
}

ganfw_status ganfw_plot(const ganfw_plot_args *a, FILE *log, ganfw_timeline_summary *summary) {
  const char *output = a->output ? a->output : "step.png";
  int kind = ends_with(output, ".png")    ? OUT_PNG
             : ends_with(output, ".svg")  ? OUT_SVG
             : ends_with(output, ".json") ? OUT_JSON
                                          : -1;
  if (kind < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: the output must end in .png or .svg (a picture of the step) or "
                           ".json (Chrome's trace format, for ui.perfetto.dev)",
                           output);
  struct stat sb;
  if (stat(a->source, &sb) != 0)
    return ganfw_error_set(GANFW_ERR_IO, "%s: no such run folder or config file", a->source);
  const int is_run = S_ISDIR(sb.st_mode);
  ganfw_probe_result res;
  memset(&res, 0, sizeof res);
  ganfw_trace_event *ev = NULL;
  char *names = NULL;
  int64_t n = 0;
  ganfw_status st;
  char path[4096], title[4352];
  if (is_run) {
    snprintf(path, sizeof path, "%s/memory.json", a->source);
    st = ganfw_trace_read_memory_json(path, &ev, &n, &names);
  } else {
    st = config_events(a, &res);
    ev = res.trace;
    n = res.n_trace;
  }
  int64_t first = 0, count = 0;
  int32_t step = a->step;
  if (st == GANFW_OK && step == 0 && !is_run) step = 2; /* the measured step */
  if (st == GANFW_OK) st = ganfw_trace_find_step(ev, n, step, &first, &count);
  ganfw_timeline_summary sum;
  memset(&sum, 0, sizeof sum);
  if (st == GANFW_OK) st = ganfw_timeline_summarize(ev + first, count, &sum);
  const char *how = is_run ? "traced" : a->measure ? "measured" : "plan";
  snprintf(title, sizeof title, "%s, step %d (%s)", a->source, (int)sum.step, how);
  /* a config's device.memory_limit is drawn as a line (a run folder's memory.json does not
   * keep it with the trace) */
  ganfw_timeline_options topt = {.title = title,
                                 .memory_limit = is_run ? 0 : res.config_memory_limit};
  if (st == GANFW_OK && kind == OUT_PNG) {
    st = ganfw_timeline_write_png(output, ev + first, count, &topt);
  } else if (st == GANFW_OK && kind == OUT_SVG) {
    svg_job j = {ev + first, count, &topt};
    st = ganfw_file_write_atomic(output, write_svg, &j);
  } else if (st == GANFW_OK) { /* the whole trace: every step */
    st = ganfw_trace_write_chrome_file(output, ev, n, title);
  }
  if (st == GANFW_OK && log) {
    const double mib = 1024.0 * 1024.0;
    const char *pass = ganfw_trace_pass_name(sum.peak_pass);
    fprintf(log, "%s: step %d of %s (%s): peak %.2f MiB allocated in %s%s%s, %.2f MiB reserved",
            output, (int)sum.step, a->source, how, sum.peak_allocated / mib,
            ganfw_trace_stage_name(sum.peak_stage), *pass ? " " : "", pass,
            sum.peak_reserved / mib);
    for (int32_t i = 0; i < sum.n_top && i < 3; i++)
      fprintf(log, "%s%s %.2f MiB", i ? ", " : "; held by ", sum.top[i].owner,
              sum.top[i].bytes / mib);
    fputc('\n', log);
  }
  if (summary) *summary = sum;
  if (is_run) {
    free(ev);
    free(names);
  }
  ganfw_probe_result_free(&res);
  return st;
}
