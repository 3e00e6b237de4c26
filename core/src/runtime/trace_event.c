/* The names a trace's events use (kinds, stages, passes, and the memory categories declared
 * in alloc.h), the copy of their owner names and the range of one step (see trace_event.h):
 * apart from the allocator, so that a trace's readers link without it. Its messages say
 * "timeline:", as the pictures of a step (tools/timeline.c) always have. */
#include "runtime/trace_event.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/alloc.h"

static const char *const category_names[] = {
    "param", "grad", "optim_state", "activation", "workspace", "data", "other", "comm",
};
_Static_assert(sizeof(category_names) / sizeof(category_names[0]) == GANFW_MEM_COUNT,
               "category_names must name every GANFW_MEM_* value");

const char *ganfw_mem_category_name(int32_t category) {
  if (category < 0 || category >= GANFW_MEM_COUNT) return "?";
  return category_names[category];
}

int32_t ganfw_mem_category_from_name(const char *name) {
  if (!name) return -1;
  for (int32_t c = 0; c < GANFW_MEM_COUNT; c++)
    if (strcmp(name, category_names[c]) == 0) return c;
  return -1;
}

static const char *const tev_names[] = {"alloc",  "free",       "segment_alloc", "segment_free",
                                        "oom",    "live",       "step",          "op_begin",
                                        "op_end", "empty_cache"};
_Static_assert(sizeof(tev_names) / sizeof(tev_names[0]) == GANFW_TEV_COUNT,
               "tev_names must name every trace event kind");
static const char *const stage_names[] = {"setup",      "D real", "D fake",   "G",
                                          "classifier", "eval",   "D penalty"};
_Static_assert(sizeof(stage_names) / sizeof(stage_names[0]) == GANFW_STAGE_COUNT,
               "stage_names must name every stage");
static const char *const pass_names[] = {"", "forward", "backward", "recompute", "optimizer"};
_Static_assert(sizeof(pass_names) / sizeof(pass_names[0]) == GANFW_PASS_COUNT,
               "pass_names must name every pass");

const char *ganfw_trace_kind_name(int32_t kind) {
  return kind >= 0 && kind < GANFW_TEV_COUNT ? tev_names[kind] : "?";
}

const char *ganfw_trace_stage_name(int32_t stage) {
  return stage >= 0 && stage < GANFW_STAGE_COUNT ? stage_names[stage] : "?";
}

const char *ganfw_trace_pass_name(int32_t pass) {
  return pass >= 0 && pass < GANFW_PASS_COUNT ? pass_names[pass] : "?";
}

int ganfw_trace_own_names(ganfw_trace_event *ev, int64_t n, char **pool) {
  size_t bytes = 0;
  *pool = NULL;
  for (int64_t i = 0; i < n; i++)
    if (ev[i].owner) bytes += strlen(ev[i].owner) + 1;
  if (bytes == 0) return 0;
  char *p = malloc(bytes), *at = p;
  if (!p) return -1;
  /* consecutive events often share a name: copy it once */
  const char *last = NULL, *last_copy = NULL;
  for (int64_t i = 0; i < n; i++) {
    if (!ev[i].owner) continue;
    if (last && strcmp(ev[i].owner, last) == 0) {
      ev[i].owner = last_copy;
      continue;
    }
    const size_t len = strlen(ev[i].owner) + 1;
    memcpy(at, ev[i].owner, len);
    last = ev[i].owner;
    last_copy = at;
    ev[i].owner = at;
    at += len;
  }
  *pool = p;
  return 0;
}

/* --- one step of a trace ---------------------------------------------------------------- */

/* "1-3, 7, 9-12" for the step numbers of the trace's STEP events (in trace order),
 * ending in "..." when they do not all fit. */
static void list_steps(const ganfw_trace_event *ev, int64_t n, char *buf, size_t cap) {
  size_t len = 0;
  int have = 0, full = 0;
  int32_t lo = 0, hi = 0;
  buf[0] = '\0';
  for (int64_t i = 0; i <= n && !full; i++) {
    int is_step = i < n && ev[i].kind == GANFW_TEV_STEP && ev[i].step > 0;
    if (i < n && !is_step) continue;
    if (is_step && have && ev[i].step == hi + 1) {
      hi = ev[i].step;
      continue;
    }
    if (have) {
      char piece[48];
      if (lo == hi) {
        snprintf(piece, sizeof piece, "%s%d", len ? ", " : "", lo);
      } else {
        snprintf(piece, sizeof piece, "%s%d-%d", len ? ", " : "", lo, hi);
      }
      size_t pl = strlen(piece);
      if (len + pl + 6 > cap) {
        snprintf(buf + len, cap - len, ", ...");
        full = 1;
        break;
      }
      memcpy(buf + len, piece, pl + 1);
      len += pl;
    }
    if (is_step) {
      lo = hi = ev[i].step;
      have = 1;
    }
  }
}

ganfw_status ganfw_trace_find_step(const ganfw_trace_event *ev, int64_t n, int32_t step,
                                   int64_t *first, int64_t *count) {
  if (!first || !count || n < 0 || (!ev && n > 0) || step < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "timeline: find_step needs events, n >= 0, step >= 0 (%d) and two "
                           "outputs",
                           step);
  *first = 0;
  *count = 0;
  /* a STEP event with step <= 0 only ends the step before it (what follows is between
   * steps); `closed` is the last step that such an event or a next step ended */
  int64_t n_steps = 0, last = -1, closed = -1, found = -1;
  for (int64_t i = 0; i < n; i++) {
    if (ev[i].kind != GANFW_TEV_STEP) continue;
    if (last >= 0) closed = last;
    last = -1;
    if (ev[i].step <= 0) continue;
    n_steps++;
    last = i;
    if (step > 0 && found < 0 && ev[i].step == step) found = i;
  }
  if (n_steps == 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "timeline: the trace holds no step (no step event among its %lld "
                           "events); trace at least one training step",
                           (long long)n);
  if (step == 0) found = closed >= 0 ? closed : last;
  if (found < 0) {
    char steps[256];
    list_steps(ev, n, steps, sizeof steps);
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "timeline: the trace has no step %d; it holds step%s %s (pick one of "
                           "them, or 0 for the last complete step)",
                           step, n_steps > 1 ? "s" : "", steps);
  }
  int64_t end = found + 1;
  while (end < n && ev[end].kind != GANFW_TEV_STEP) end++;
  *first = found;
  *count = end - found;
  return GANFW_OK;
}
