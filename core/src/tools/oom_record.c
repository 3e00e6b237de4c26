/* The out-of-memory flight recorder: when a training run stops for lack of memory, its
 * folder gets oom/report.txt (the message and the advice), oom/trace.json (Chrome's trace
 * format) and oom/step.png (the failing step's timeline). The events are those of the plan
 * `ganfw CONFIG` made before the run (the meta backend, the same allocator and limit,
 * traced), which ran out of memory at the same request as the device did, so the recorder
 * costs nothing while a run goes well and needs no tracing turned on. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/file.h"
#include "io/timeline.h"
#include "io/trace_file.h"
#include "tools/plan.h"

typedef struct text_job {
  const char *a, *b;
} text_job;

static ganfw_status write_text(FILE *f, void *ud) {
  const text_job *j = ud;
  fputs(j->a, f);
  fputs(j->b, f);
  fputc('\n', f);
  return GANFW_OK;
}

/* The step of the last OOM event, else 0 (the last complete step). */
static int32_t oom_step(const ganfw_trace_event *ev, int64_t n) {
  for (int64_t i = n - 1; i >= 0; i--)
    if (ev[i].kind == GANFW_TEV_OOM) return ev[i].step;
  return 0;
}

ganfw_status ganfw_oom_record(const char *config, const ganfw_probe_result *replay,
                              const char *out_dir, const char *report, const char *advice,
                              char *written, size_t n) {
  if (n) written[0] = '\0';
  char dir[4096], path[4200];
  if (snprintf(dir, sizeof dir, "%s/oom", out_dir) >= (int)sizeof dir)
    return ganfw_error_set(GANFW_ERR_IO, "%s: the run folder's path is too long", out_dir);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return ganfw_error_set(GANFW_ERR_IO, "%s: cannot make it: %s", dir, strerror(errno));
  snprintf(path, sizeof path, "%s/report.txt", dir);
  text_job tj = {report, advice};
  ganfw_status st = ganfw_file_write_atomic(path, write_text, &tj);
  if (st != GANFW_OK) return st;
  snprintf(written, n, "%s", path);
  const ganfw_probe_result *res = replay;
  int64_t first = 0, count = 0;
  if (!res || res->n_trace == 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s could not be planned, so there is no step to draw (oom/report.txt "
                           "holds the message)",
                           config);
  st = ganfw_timeline_find_step(res->trace, res->n_trace, oom_step(res->trace, res->n_trace),
                                &first, &count);
  char title[4600];
  snprintf(title, sizeof title, "%s: %s (replayed on the planner)", config,
           res->oom ? "out of memory" : "the step did not run out of memory when replayed");
  if (st == GANFW_OK) {
    snprintf(path, sizeof path, "%s/trace.json", dir);
    st = ganfw_trace_write_chrome_file(path, res->trace, res->n_trace, title);
    if (st == GANFW_OK) snprintf(written + strlen(written), n - strlen(written), ", %s", path);
  }
  if (st == GANFW_OK) {
    snprintf(path, sizeof path, "%s/step.png", dir);
    ganfw_timeline_options to = {.title = title};
    st = ganfw_timeline_write_png(path, res->trace + first, count, &to);
    if (st == GANFW_OK) snprintf(written + strlen(written), n - strlen(written), ", %s", path);
  }
  return st;
}
