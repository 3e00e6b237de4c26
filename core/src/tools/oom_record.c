/* The out-of-memory flight recorder: when a training run stops for lack of memory, its
 * folder gets oom/report.txt (the message and the advice), oom/trace.json (Chrome's trace
 * format) and oom/step.png (the failing step's timeline, or the set-up's when the model ran
 * out before its first step, with the failed request and the memory_limit marked). The
 * events are those of the plan `ganfw CONFIG` made before the run (the meta backend, the
 * same allocator and limit, traced), which ran out of memory at the same request as the
 * device did, so the recorder costs nothing while a run goes well and needs no tracing
 * turned on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h" // defines: ganfw_meta_backend
#include "base/error.h"
#include "base/file.h"
#include "tools/timeline.h"
#include "io/trace_file.h"
#include "runtime/alloc.h"
#include "runtime/ctx.h"
#include "tools/oom.h"
#include "tools/plan.h"
#include "train/outputs.h" // defines: ganfw_mkdirs
#include "train/run.h"

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

/* The last OOM event, else -1. */
static int64_t last_oom(const ganfw_trace_event *ev, int64_t n) {
  for (int64_t i = n - 1; i >= 0; i--)
    if (ev[i].kind == GANFW_TEV_OOM) return i;
  return -1;
}

/* A set-up failure: its events (everything before the first step) behind a STEP event of
 * step 0, which the timeline needs first; the allocator was empty when the set-up began,
 * so no LIVE snapshot is missing. */
static ganfw_status setup_range(const ganfw_probe_result *replay, ganfw_oom_picture *out) {
  int64_t end = 0;
  while (end < replay->n_trace && replay->trace[end].kind != GANFW_TEV_STEP) end++;
  out->owned = malloc((size_t)(end + 1) * sizeof *out->owned);
  if (!out->owned)
    return ganfw_error_set(GANFW_ERR_OOM,
                           "the OOM flight recorder: out of host memory for %lld "
                           "events",
                           (long long)end);
  out->owned[0] = (ganfw_trace_event){.kind = GANFW_TEV_STEP,
                                      .category = -1,
                                      .step = 0,
                                      .stage = GANFW_STAGE_SETUP,
                                      .pass = GANFW_PASS_NONE};
  if (end > 0) out->owned[0].t_ns = replay->trace[0].t_ns;
  memcpy(out->owned + 1, replay->trace, (size_t)end * sizeof *out->owned);
  out->ev = out->owned;
  out->n = end + 1;
  out->setup = 1;
  return GANFW_OK;
}

ganfw_status ganfw_oom_picture_make(const ganfw_probe_result *replay, ganfw_oom_picture *out) {
  memset(out, 0, sizeof *out);
  out->summary.oom_index = -1;
  if (replay && replay->n_trace == 0 && replay->oom && strcmp(replay->oom_where, "set-up") == 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "no step to draw: the plan ran out of memory in the set-up, which "
                           "keeps no events (ganfw_oom_setup_replay replays them)");
  if (!replay || replay->n_trace == 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "the config could not be planned, so there is no step to draw");
  out->memory_limit = replay->memory_limit;
  const int64_t k = last_oom(replay->trace, replay->n_trace);
  ganfw_status st;
  if (k >= 0 && replay->trace[k].step == 0) {
    st = setup_range(replay, out);
  } else {
    int64_t first = 0, count = 0;
    st = ganfw_trace_find_step(replay->trace, replay->n_trace, k >= 0 ? replay->trace[k].step : 0,
                               &first, &count);
    out->ev = replay->trace + first;
    out->n = count;
  }
  if (st == GANFW_OK) st = ganfw_timeline_summarize(out->ev, out->n, &out->summary);
  return st;
}

void ganfw_oom_picture_free(ganfw_oom_picture *pic) {
  if (!pic) return;
  free(pic->owned);
  pic->owned = NULL;
}

/* The live blocks of the replay: the plan's address -> the replaying allocator's. */
typedef struct live_map {
  uint64_t *from;
  void **to;
  int64_t n, cap;
} live_map;

static int live_put(live_map *m, uint64_t from, void *to) {
  if (m->n == m->cap) {
    int64_t cap = m->cap ? m->cap * 2 : 256;
    uint64_t *f = realloc(m->from, (size_t)cap * sizeof *f);
    if (f) m->from = f;
    void **t = f ? realloc(m->to, (size_t)cap * sizeof *t) : NULL;
    if (t) m->to = t;
    if (!f || !t) return -1;
    m->cap = cap;
  }
  m->from[m->n] = from;
  m->to[m->n++] = to;
  return 0;
}

/* The replaying allocator's block for the plan's `from` (removed from the map), or NULL. */
static void *live_take(live_map *m, uint64_t from) {
  for (int64_t i = m->n - 1; i >= 0; i--)
    if (m->from[i] == from) {
      void *to = m->to[i];
      m->from[i] = m->from[--m->n];
      m->to[i] = m->to[m->n];
      return to;
    }
  return NULL;
}

/* Serves the set-up's requests of `ev` (up to its first STEP event) with `a`, in order,
 * until one fails; out gets the OOM. */
static ganfw_status serve_setup(ganfw_alloc *a, const ganfw_trace_event *ev, int64_t n,
                                ganfw_probe_result *out) {
  live_map m = {0};
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; i < n && ev[i].kind != GANFW_TEV_STEP && st == GANFW_OK; i++) {
    const ganfw_trace_event *e = &ev[i];
    ganfw_alloc_set_stage(a, e->stage);
    ganfw_alloc_set_pass(a, e->pass);
    if (e->kind == GANFW_TEV_OP_BEGIN || e->kind == GANFW_TEV_OP_END) {
      ganfw_alloc_trace_op(a, e->kind == GANFW_TEV_OP_BEGIN, e->owner);
    } else if (e->kind == GANFW_TEV_FREE) {
      ganfw_alloc_free(a, live_take(&m, e->ptr));
    } else if (e->kind == GANFW_TEV_ALLOC) {
      void *p = NULL;
      st = ganfw_alloc_malloc(a, (size_t)(e->size - e->slack), e->category, e->owner, &p);
      if (st == GANFW_ERR_OOM) {
        out->oom = 1;
        snprintf(out->oom_where, sizeof out->oom_where, "set-up");
        snprintf(out->oom_report, sizeof out->oom_report, "%s", ganfw_error_message());
      } else if (st == GANFW_OK && live_put(&m, e->ptr, p) != 0) {
        ganfw_alloc_free(a, p);
        st = ganfw_error_set(GANFW_ERR_OOM, "the OOM flight recorder: out of host memory");
      }
    }
  }
  free(m.from);
  free(m.to);
  return st == GANFW_ERR_OOM && out->oom ? GANFW_OK : st;
}

ganfw_status ganfw_oom_setup_replay(const ganfw_run_config *config, int64_t memory_limit,
                                    ganfw_probe_result *out) {
  memset(out, 0, sizeof *out);
  out->meta = 1;
  out->memory_limit = memory_limit;
  ganfw_probe_options opt = {
      .meta = 1, .warmup = 0, .steps = 1, .limit_mode = GANFW_PROBE_LIMIT_NONE, .trace = 1};
  ganfw_probe_result plan;
  ganfw_status st = ganfw_probe_run(config, &opt, &plan);
  int32_t no_retry = 0;
  ganfw_run *run = NULL;
  if (st == GANFW_OK && (st = ganfw_run_open(config, &run)) == GANFW_OK)
    no_retry = run->ctx_opt.empty_cache == GANFW_EMPTY_CACHE_NEVER;
  ganfw_run_close(run);
  ganfw_alloc *a = NULL;
  ganfw_alloc_options ao = {.memory_limit = (size_t)(memory_limit > 0 ? memory_limit : 0),
                            .trace = 1,
                            .no_retry = no_retry,
                            .trace_capacity = (size_t)plan.n_trace + 16};
  if (st == GANFW_OK) st = ganfw_alloc_create(ganfw_meta_backend(NULL), &ao, &a);
  if (st == GANFW_OK) st = serve_setup(a, plan.trace, plan.n_trace, out);
  if (st == GANFW_OK) st = ganfw_alloc_trace_copy(a, &out->trace, &out->n_trace);
  if (st == GANFW_OK && ganfw_trace_own_names(out->trace, out->n_trace, &out->trace_names) != 0)
    st = ganfw_error_set(GANFW_ERR_OOM, "the OOM flight recorder: out of host memory");
  ganfw_alloc_destroy(a); /* after the names are copied */
  ganfw_probe_result_free(&plan);
  return st;
}

ganfw_status ganfw_oom_record(const ganfw_run_config *config, const ganfw_probe_result *replay,
                              const char *out_dir, const char *report, const char *advice,
                              char *written, size_t n) {
  const char *path_of_config = ganfw_run_config_path(config);
  if (n) written[0] = '\0';
  char dir[4096], path[4200];
  if (snprintf(dir, sizeof dir, "%s/oom", out_dir) >= (int)sizeof dir)
    return ganfw_error_set(GANFW_ERR_IO, "%s: the run folder's path is too long", out_dir);
  ganfw_status st = ganfw_mkdirs(dir); /* the run folder too: a set-up failure comes first */
  if (st != GANFW_OK) return st;
  snprintf(path, sizeof path, "%s/report.txt", dir);
  text_job tj = {report, advice};
  st = ganfw_file_write_atomic(path, write_text, &tj);
  if (st != GANFW_OK) return st;
  snprintf(written, n, "%s", path);
  /* a failure in the set-up: the plan kept no events, the advice replayed them */
  const ganfw_probe_result *setup = ganfw_oom_advice_setup_replay(config);
  if (replay && replay->n_trace == 0 && replay->oom && setup) replay = setup;
  ganfw_oom_picture pic;
  st = ganfw_oom_picture_make(replay, &pic);
  if (st != GANFW_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", ganfw_error_message());
    ganfw_oom_picture_free(&pic);
    return ganfw_error_set(st, "%s: %s (oom/report.txt holds the message)", path_of_config, why);
  }
  char title[4600];
  snprintf(title, sizeof title, "%s: %s (replayed on the planner)", path_of_config,
           !replay->oom ? "the step did not run out of memory when replayed"
           : pic.setup  ? "out of memory in the set-up"
                        : "out of memory");
  snprintf(path, sizeof path, "%s/trace.json", dir);
  st = ganfw_trace_write_chrome_file(path, replay->trace, replay->n_trace, title);
  if (st == GANFW_OK) snprintf(written + strlen(written), n - strlen(written), ", %s", path);
  if (st == GANFW_OK) {
    snprintf(path, sizeof path, "%s/step.png", dir);
    ganfw_timeline_options to = {.title = title, .memory_limit = pic.memory_limit};
    st = ganfw_timeline_write_png(path, pic.ev, pic.n, &to);
    if (st == GANFW_OK) snprintf(written + strlen(written), n - strlen(written), ", %s", path);
  }
  ganfw_oom_picture_free(&pic);
  return st;
}
