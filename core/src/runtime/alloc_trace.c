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
  e->category = category;
  e->owner = intern(a, owner);
  e->pad = 0;
}

size_t ganfw_alloc_trace_length(const ganfw_alloc *a) {
  return a ? a->ev_len : 0;
}

static void json_stat(FILE *f, const char *name, const ganfw_alloc_stat *s, int comma) {
  fprintf(f, "    \"%s\": {\"current\": %" PRId64 ", \"peak\": %" PRId64 "}%s\n", name, s->current,
          s->peak, comma ? "," : "");
}

static const char *const event_names[] = {"alloc", "free", "segment_alloc", "segment_free", "oom"};
_Static_assert(sizeof(event_names) / sizeof(event_names[0]) == EV_COUNT,
               "event_names must name every event kind");

ganfw_status ganfw_alloc_trace_write_json(const ganfw_alloc *a, FILE *f) {
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
  fprintf(f,
          "  \"trace\": {\n    \"enabled\": %s, \"capacity\": %zu, \"dropped\": %" PRId64
          ",\n    \"events\": [",
          a->trace_on ? "true" : "false", a->ev_cap, a->ev_dropped);
  for (size_t k = 0; k < a->ev_len; k++) {
    const trace_ev *e = &a->ev[(a->ev_head + k) % a->ev_cap];
    fprintf(f,
            "%s\n      {\"t_ns\": %" PRId64 ", \"kind\": \"%s\", \"ptr\": \"0x%" PRIx64
            "\", \"offset\": %" PRIu64 ", \"size\": %" PRIu64 ", \"category\": ",
            k ? "," : "", e->t_ns, event_names[e->kind], e->ptr, e->offset, e->size);
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
  fprintf(f, "%s]\n  }\n}\n", a->ev_len ? "\n    " : "");
  if (ferror(f))
    return ganfw_error_set(GANFW_ERR_IO, "could not write the allocator trace (JSON): write "
                                         "error on the output stream (disk full?)");
  return GANFW_OK;
}
