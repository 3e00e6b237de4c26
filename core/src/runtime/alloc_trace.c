/* The caching allocator's event trace (see alloc.h): a ring of the latest alloc, free,
 * segment and OOM events with interned owner names, and memory.json's statistics and
 * trace written as JSON. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/json.h"
#include "runtime/alloc_internal.h"
#include "runtime/trace_event.h"

static int64_t now_ns(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec);
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The index of `s` among the interned owner names (copied once); -1 for NULL or when out
 * of host memory. Only called while tracing. */
static int32_t intern(ganfw_alloc *a, const char *s) {
  if (!s) return -1;
  if (!a->name_tab || (a->n_names + 1) * 2 > a->name_mask + 1) {
    size_t cap = a->name_tab ? (a->name_mask + 1) * 2 : 256;
    int32_t *tab = malloc(cap * sizeof *tab);
    if (!tab) return -1;
    for (size_t i = 0; i < cap; i++) tab[i] = -1;
    for (size_t k = 0; k < a->n_names; k++) {
      size_t i = (size_t)hash_str(a->names[k]) & (cap - 1);
      while (tab[i] >= 0) i = (i + 1) & (cap - 1);
      tab[i] = (int32_t)k;
    }
    free(a->name_tab);
    a->name_tab = tab;
    a->name_mask = cap - 1;
  }
  size_t i = (size_t)hash_str(s) & a->name_mask;
  while (a->name_tab[i] >= 0) {
    if (strcmp(a->names[a->name_tab[i]], s) == 0) return a->name_tab[i];
    i = (i + 1) & a->name_mask;
  }
  if (a->n_names == a->names_cap) {
    size_t cap = a->names_cap ? a->names_cap * 2 : 64;
    char **nn = realloc(a->names, cap * sizeof *nn);
    if (!nn) return -1;
    a->names = nn;
    a->names_cap = cap;
  }
  char *copy = strdup(s);
  if (!copy) return -1;
  a->names[a->n_names] = copy;
  a->name_tab[i] = (int32_t)a->n_names;
  return (int32_t)a->n_names++;
}

void ganfw_alloc_trace_add(ganfw_alloc *a, int32_t kind, const void *ptr, const seg *s, size_t size,
                           int32_t category, const char *owner) {
  trace_ev *e;
  if (a->ev_len < a->ev_cap) {
    e = &a->ev[(a->ev_head + a->ev_len++) % a->ev_cap];
  } else {
    e = &a->ev[a->ev_head];
    a->ev_head = (a->ev_head + 1) % a->ev_cap;
    a->ev_dropped++;
  }
  e->t_ns = now_ns(&a->t0);
  e->kind = kind;
  e->ptr = (uint64_t)(uintptr_t)ptr;
  e->offset = s ? (uint64_t)((const char *)ptr - s->base) : 0;
  e->size = size;
  e->allocated = a->st.allocated.current;
  e->reserved = a->st.reserved.current;
  e->category = category;
  e->owner = intern(a, owner);
  e->step = a->cur_step;
  e->stage = a->cur_stage;
  e->pass = a->cur_pass;
  e->slack = kind == GANFW_TEV_ALLOC ? a->trace_slack : 0;
}

size_t ganfw_alloc_trace_length(const ganfw_alloc *a) {
  return a ? a->ev_len : 0;
}

int32_t ganfw_alloc_tracing(const ganfw_alloc *a) {
  return a && a->trace_on;
}

typedef struct live_blk {
  const void *ptr;
  size_t size;
  int32_t category;
  const char *owner;
} live_blk;

typedef struct live_list {
  live_blk *b;
  size_t n, cap;
  int failed;
} live_list;

static void collect_live(void *ud, const void *ptr, size_t size, int32_t category,
                         const char *owner) {
  live_list *l = ud;
  if (l->failed) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    live_blk *nb = realloc(l->b, cap * sizeof *nb);
    if (!nb) {
      l->failed = 1;
      return;
    }
    l->b = nb;
    l->cap = cap;
  }
  l->b[l->n++] = (live_blk){ptr, size, category, owner};
}

static int by_address(const void *x, const void *y) {
  const uintptr_t a = (uintptr_t)((const live_blk *)x)->ptr,
                  b = (uintptr_t)((const live_blk *)y)->ptr;
  return (a > b) - (a < b);
}

void ganfw_alloc_trace_step(ganfw_alloc *a, int64_t step) {
  if (!a) return;
  if (a->ar) ganfw_arena_step_begin(a, step); /* device.memory_layout: planned */
  if (!a->trace_on) return;
  if (a->trace_steps && a->trace_seen >= a->trace_steps) {
    a->trace_on = 0;
    return;
  }
  a->trace_seen++;
  a->cur_step = step > INT32_MAX ? INT32_MAX : (int32_t)step;
  a->cur_stage = GANFW_STAGE_SETUP;
  a->cur_pass = GANFW_PASS_NONE;
  ganfw_alloc_trace_add(a, GANFW_TEV_STEP, NULL, NULL, 0, -1, NULL);
  live_list l = {0};
  ganfw_alloc_for_each_block(a, collect_live, &l);
  if (!l.failed) { /* out of host memory: the step has no snapshot, and says so by its size */
    qsort(l.b, l.n, sizeof *l.b, by_address);
    for (size_t i = 0; i < l.n; i++)
      ganfw_alloc_trace_add(a, GANFW_TEV_LIVE, l.b[i].ptr, NULL, l.b[i].size, l.b[i].category,
                            l.b[i].owner);
  }
  free(l.b);
}

void ganfw_alloc_trace_step_end(ganfw_alloc *a) {
  if (!a) return;
  if (a->ar) ganfw_arena_step_end(a);
  if (!a->trace_on || a->cur_step == 0) return;
  a->cur_step = 0;
  a->cur_stage = GANFW_STAGE_SETUP;
  a->cur_pass = GANFW_PASS_NONE;
  ganfw_alloc_trace_add(a, GANFW_TEV_STEP, NULL, NULL, 0, -1, NULL);
  if (a->trace_steps && a->trace_seen >= a->trace_steps) a->trace_on = 0;
}

int32_t ganfw_alloc_set_stage(ganfw_alloc *a, int32_t stage) {
  if (!a) return GANFW_STAGE_SETUP;
  const int32_t old = a->cur_stage;
  a->cur_stage = (int16_t)stage;
  return old;
}

int32_t ganfw_alloc_set_pass(ganfw_alloc *a, int32_t pass) {
  if (!a) return GANFW_PASS_NONE;
  const int32_t old = a->cur_pass;
  a->cur_pass = (int16_t)pass;
  return old;
}

void ganfw_alloc_trace_op(ganfw_alloc *a, int32_t begin, const char *layer) {
  if (!a || !a->trace_on) return;
  ganfw_alloc_trace_add(a, begin ? GANFW_TEV_OP_BEGIN : GANFW_TEV_OP_END, NULL, NULL, 0, -1, layer);
}

ganfw_status ganfw_alloc_trace_copy(const ganfw_alloc *a, ganfw_trace_event **out, int64_t *n) {
  *out = NULL;
  *n = 0;
  if (!a || a->ev_len == 0) return GANFW_OK;
  ganfw_trace_event *ev = malloc(a->ev_len * sizeof *ev);
  if (!ev)
    return ganfw_error_set(GANFW_ERR_OOM,
                           "out of host memory copying the allocator trace (%zu "
                           "events)",
                           a->ev_len);
  for (size_t k = 0; k < a->ev_len; k++) {
    const trace_ev *e = &a->ev[(a->ev_head + k) % a->ev_cap];
    ev[k] = (ganfw_trace_event){.t_ns = e->t_ns,
                                .kind = e->kind,
                                .category = e->category,
                                .size = (int64_t)e->size,
                                .ptr = e->ptr,
                                .owner = e->owner >= 0 ? a->names[e->owner] : NULL,
                                .step = e->step,
                                .stage = e->stage,
                                .pass = e->pass,
                                .slack = e->slack,
                                .allocated = e->allocated,
                                .reserved = e->reserved};
  }
  *out = ev;
  *n = (int64_t)a->ev_len;
  return GANFW_OK;
}

static void json_stat(FILE *f, const char *name, const ganfw_alloc_stat *s, int comma) {
  fprintf(f, "    \"%s\": {\"current\": %" PRId64 ", \"peak\": %" PRId64 "}%s\n", name, s->current,
          s->peak, comma ? "," : "");
}

ganfw_status ganfw_alloc_trace_write_json(const ganfw_alloc *a, FILE *f) {
  return ganfw_alloc_write_json(a, f, NULL);
}

ganfw_status ganfw_alloc_write_json(const ganfw_alloc *a, FILE *f, const char *more) {
  if (!a || !f)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_alloc_trace_write_json: NULL argument");
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  fprintf(f, "{\n  \"stats\": {\n");
  json_stat(f, "allocated_bytes", &st.allocated, 1);
  json_stat(f, "reserved_bytes", &st.reserved, 1);
  json_stat(f, "active_bytes", &st.active, 1);
  json_stat(f, "inactive_split_bytes", &st.inactive_split, 1);
  json_stat(f, "allocations", &st.allocations, 1);
  json_stat(f, "segments", &st.segments, 1);
  fprintf(f, "    \"num_empty_cache\": %" PRId64 ", \"empty_cache_bytes\": %" PRId64 ",\n",
          st.num_empty_cache, st.empty_cache_bytes);
  fprintf(f,
          "    \"memory_layout\": {\"layout\": \"%s\", \"arena_bytes\": %" PRId64
          ", \"num_planned\": %" PRId64 ", \"num_unplanned\": %" PRId64
          ", \"planned_steps\": %" PRId64 ", \"unplanned_steps\": %" PRId64 "},\n",
          a->ar ? "planned" : "caching", st.arena_bytes, st.num_planned, st.num_unplanned,
          st.planned_steps, st.unplanned_steps);
  fprintf(f, "    \"category\": {\n");
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    fprintf(f, "      \"%s\": {\"current\": %" PRId64 ", \"peak\": %" PRId64 "}%s\n",
            ganfw_mem_category_name(c), st.category[c].current, st.category[c].peak,
            c + 1 < GANFW_MEM_COUNT ? "," : "");
  fprintf(f, "    },\n");
  fprintf(f,
          "    \"num_alloc_retries\": %" PRId64 ", \"num_ooms\": %" PRId64
          ", \"num_segments\": %" PRId64 ", \"num_allocs\": %" PRId64 ", \"num_frees\": %" PRId64
          ",\n",
          st.num_alloc_retries, st.num_ooms, st.num_segments, st.num_allocs, st.num_frees);
  fprintf(f, "    \"largest_free_block\": %" PRId64 ", \"fragmentation\": %.6f,\n",
          st.largest_free_block, st.fragmentation);
  fprintf(f, "    \"memory_limit\": %zu, \"max_split_size\": %zu\n  },\n", a->memory_limit,
          a->max_split_size);
  fprintf(
      f,
      "  \"trace\": {\n    \"enabled\": %s, \"steps\": %d, \"capacity\": %zu, \"dropped\": %" PRId64
      ",\n    \"events\": [",
      a->ev ? "true" : "false", a->trace_steps, a->ev_cap, a->ev_dropped);
  for (size_t k = 0; k < a->ev_len; k++) {
    const trace_ev *e = &a->ev[(a->ev_head + k) % a->ev_cap];
    fprintf(f,
            "%s\n      {\"t_ns\": %" PRId64 ", \"kind\": \"%s\", \"step\": %d, \"stage\": \"%s\", "
            "\"pass\": \"%s\", \"ptr\": \"0x%" PRIx64 "\", \"offset\": %" PRIu64
            ", \"size\": %" PRIu64 ", \"allocated\": %" PRId64 ", \"reserved\": %" PRId64
            ", \"category\": ",
            k ? "," : "", e->t_ns, ganfw_trace_kind_name(e->kind), e->step,
            ganfw_trace_stage_name(e->stage), ganfw_trace_pass_name(e->pass), e->ptr, e->offset,
            e->size, e->allocated, e->reserved);
    if (e->category >= 0)
      ganfw_json_fputs(f, ganfw_mem_category_name(e->category));
    else
      fputs("null", f);
    fputs(", \"owner\": ", f);
    if (e->owner >= 0)
      ganfw_json_fputs(f, a->names[e->owner]);
    else
      fputs("null", f);
    fputc('}', f);
  }
  fprintf(f, "%s]\n  }%s%s\n}\n", a->ev_len ? "\n    " : "", more ? ",\n" : "", more ? more : "");
  if (ferror(f))
    return ganfw_error_set(GANFW_ERR_IO, "could not write the allocator trace (JSON): write "
                                         "error on the output stream (disk full?)");
  return GANFW_OK;
}
