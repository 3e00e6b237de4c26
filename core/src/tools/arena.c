/* The offline arena layout of a step (see arena.h): lifetimes from the trace, then greedy
 * by size with first fit among the blocks whose lifetimes meet. O(n^2) in the step-local
 * blocks (about a thousand for DC-GAN), run once per plan. */
#include "tools/arena.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/timeline.h"
#include "tools/report.h"

/* Pointer -> open block, for matching FREE events to their ALLOC. */
typedef struct open_slot {
  uint64_t ptr; /* 0: empty */
  int64_t block;
} open_slot;

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

static int64_t *slot_of(open_slot *t, size_t mask, uint64_t ptr, int insert) {
  for (size_t i = (size_t)mix(ptr) & mask;; i = (i + 1) & mask) {
    if (t[i].ptr == ptr) return &t[i].block;
    if (t[i].ptr == 0) {
      if (!insert) return NULL;
      t[i].ptr = ptr;
      return &t[i].block;
    }
  }
}

static int meets(const ganfw_arena_block *a, const ganfw_arena_block *b) {
  return a->first <= b->last && b->first <= a->last;
}

static int by_size(const void *x, const void *y) {
  const ganfw_arena_block *a = *(const ganfw_arena_block *const *)x;
  const ganfw_arena_block *b = *(const ganfw_arena_block *const *)y;
  if (a->size != b->size) return a->size > b->size ? -1 : 1;
  return (a->first > b->first) - (a->first < b->first);
}

static int by_offset(const void *x, const void *y) {
  const ganfw_arena_block *a = *(const ganfw_arena_block *const *)x;
  const ganfw_arena_block *b = *(const ganfw_arena_block *const *)y;
  return (a->offset > b->offset) - (a->offset < b->offset);
}

void ganfw_arena_plan_free(ganfw_arena_plan *p) {
  if (!p) return;
  free(p->blocks);
  memset(p, 0, sizeof *p);
}

int ganfw_arena_plan_valid(const ganfw_arena_plan *p) {
  for (int64_t i = 0; i < p->n; i++) {
    const ganfw_arena_block *a = &p->blocks[i];
    if (a->offset < 0 || a->offset + a->size > p->arena_bytes) return 0;
    for (int64_t j = i + 1; j < p->n; j++) {
      const ganfw_arena_block *b = &p->blocks[j];
      if (meets(a, b) && a->offset < b->offset + b->size && b->offset < a->offset + a->size)
        return 0;
    }
  }
  return 1;
}

/* The step-local blocks with their lifetimes, and the persistent and kept bytes. */
static ganfw_status lifetimes(const ganfw_trace_event *ev, int64_t n, ganfw_arena_plan *out) {
  size_t cap = 64;
  while (cap < (size_t)n * 2) cap *= 2;
  open_slot *open = calloc(cap, sizeof *open);
  out->blocks = malloc((size_t)(n > 0 ? n : 1) * sizeof *out->blocks);
  if (!open || !out->blocks) {
    free(open);
    return ganfw_error_set(GANFW_ERR_OOM, "arena plan: out of host memory (%lld events)",
                           (long long)n);
  }
  for (int64_t i = 0; i < n; i++) {
    const ganfw_trace_event *e = &ev[i];
    if (e->kind == GANFW_TEV_LIVE) {
      out->persistent += e->size;
    } else if (e->kind == GANFW_TEV_ALLOC) {
      ganfw_arena_block *b = &out->blocks[out->n];
      *b = (ganfw_arena_block){.owner = e->owner,
                               .category = e->category,
                               .size = e->size,
                               .first = i,
                               .last = -1,
                               .offset = -1};
      *slot_of(open, cap - 1, e->ptr, 1) = out->n++;
    } else if (e->kind == GANFW_TEV_FREE) {
      int64_t *k = slot_of(open, cap - 1, e->ptr, 0);
      if (!k || *k < 0) continue; /* a block of an earlier step */
      out->blocks[*k].last = i;
      *k = -1; /* the address may be handed out again */
    }
  }
  free(open);
  /* blocks never freed in the step stay persistent */
  int64_t m = 0;
  for (int64_t i = 0; i < out->n; i++) {
    if (out->blocks[i].last < 0)
      out->kept += out->blocks[i].size;
    else
      out->blocks[m++] = out->blocks[i];
  }
  out->n = m;
  return GANFW_OK;
}

/* The largest sum of step-local bytes live at one moment (a block is live from its ALLOC
 * event through its FREE event). */
static int64_t lower_bound(const ganfw_arena_plan *p, int64_t n_events) {
  int64_t *delta = calloc((size_t)n_events + 1, sizeof *delta);
  if (!delta) return -1;
  for (int64_t i = 0; i < p->n; i++) {
    delta[p->blocks[i].first] += p->blocks[i].size;
    delta[p->blocks[i].last + 1] -= p->blocks[i].size;
  }
  int64_t live = 0, best = 0;
  for (int64_t i = 0; i <= n_events; i++) {
    live += delta[i];
    if (live > best) best = live;
  }
  free(delta);
  return best;
}

ganfw_status ganfw_arena_plan_step(const ganfw_trace_event *ev, int64_t n, ganfw_arena_plan *out) {
  memset(out, 0, sizeof *out);
  if (!ev || n < 1 || ev[0].kind != GANFW_TEV_STEP)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "arena plan: pass one step's events (they start with a step event)");
  ganfw_status st = lifetimes(ev, n, out);
  if (st != GANFW_OK) {
    ganfw_arena_plan_free(out);
    return st;
  }
  ganfw_arena_block **order = malloc((size_t)(out->n > 0 ? out->n : 1) * sizeof *order);
  ganfw_arena_block **placed = malloc((size_t)(out->n > 0 ? out->n : 1) * sizeof *placed);
  ganfw_arena_block **near = malloc((size_t)(out->n > 0 ? out->n : 1) * sizeof *near);
  out->lower_bound = lower_bound(out, n);
  if (!order || !placed || !near || out->lower_bound < 0) {
    free(order);
    free(placed);
    free(near);
    ganfw_arena_plan_free(out);
    return ganfw_error_set(GANFW_ERR_OOM, "arena plan: out of host memory");
  }
  for (int64_t i = 0; i < out->n; i++) order[i] = &out->blocks[i];
  qsort(order, (size_t)out->n, sizeof *order, by_size);
  int64_t n_placed = 0;
  for (int64_t i = 0; i < out->n; i++) {
    ganfw_arena_block *b = order[i];
    /* the placed blocks whose lifetimes meet b's, by offset: b goes in the first gap */
    int64_t offset = 0, m = 0;
    for (int64_t j = 0; j < n_placed; j++)
      if (meets(placed[j], b)) near[m++] = placed[j];
    qsort(near, (size_t)m, sizeof *near, by_offset);
    for (int64_t j = 0; j < m; j++) {
      if (near[j]->offset >= offset + b->size) break; /* the gap before it holds b */
      const int64_t end = near[j]->offset + near[j]->size;
      if (end > offset) offset = end;
    }
    b->offset = offset;
    placed[n_placed++] = b;
    if (offset + b->size > out->arena_bytes) out->arena_bytes = offset + b->size;
  }
  free(order);
  free(placed);
  free(near);
  return GANFW_OK;
}

void ganfw_arena_print_for(const char *config, const char *const *sets, int nsets, FILE *out) {
  ganfw_probe_result plan;
  ganfw_arena_plan a;
  int64_t first = 0, count = 0;
  memset(&a, 0, sizeof a);
  if (ganfw_report_plan(config, sets, nsets, &plan) == GANFW_OK && !plan.oom &&
      ganfw_timeline_find_step(plan.trace, plan.n_trace, 2, &first, &count) == GANFW_OK &&
      ganfw_arena_plan_step(plan.trace + first, count, &a) == GANFW_OK) {
    const double mib = 1024.0 * 1024.0;
    fprintf(out,
            "Arena (a layout of the step's step-local blocks, greedy by size; not yet used by the "
            "step): %lld blocks in %.2f MiB, lower bound %.2f MiB (%.3fx); %.2f MiB persistent "
            "stay in the caching allocator%s\n",
            (long long)a.n, (double)a.arena_bytes / mib, (double)a.lower_bound / mib,
            a.lower_bound ? (double)a.arena_bytes / (double)a.lower_bound : 1.0,
            (double)(a.persistent + a.kept) / mib, ganfw_arena_plan_valid(&a) ? "" : " (INVALID)");
  }
  ganfw_error_clear();
  ganfw_arena_plan_free(&a);
  ganfw_probe_result_free(&plan);
}
