/* The names a trace's events use (kinds, stages, passes, and the memory categories declared
 * in alloc.h) and the copy of their owner names (see trace_event.h): apart from the
 * allocator, so that a trace's readers link without it. */
#include "runtime/trace_event.h"

#include <stdlib.h>
#include <string.h>

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
static const char *const stage_names[] = {"setup", "D real", "D fake", "G", "classifier", "eval"};
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
