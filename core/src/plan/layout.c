/* The planned layout from a traced plan (see layout.h). */
#include "plan/layout.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "plan/arena.h"

void ganfw_layout_free(ganfw_layout *l) {
  if (!l) return;
  free(l->size), free(l->offset), free(l->category);
  memset(l, 0, sizeof *l);
}

typedef struct slot {
  uint64_t ptr; /* 0: empty */
  int64_t size; /* a planned block's bytes while live, else 0 */
} slot;

static slot *slot_at(slot *t, size_t mask, uint64_t ptr) {
  size_t i = (size_t)((ptr >> 9) * 0x9E3779B97F4A7C15ull) & mask;
  while (t[i].ptr && t[i].ptr != ptr) i = (i + 1) & mask;
  return &t[i];
}

/* The room the cache needs below the arena: replays the trace, the planned blocks of each
 * step from from_step on in the arena and everything else in the cache, which has the whole
 * segment outside those steps. */
static int64_t base_bytes(const ganfw_trace_event *ev, int64_t n, const ganfw_layout *l) {
  size_t cap = 64;
  for (int64_t i = 0; i < n; i++)
    if (ev[i].kind == GANFW_TEV_ALLOC) cap++;
  size_t pow = 64;
  while (pow < cap * 2) pow *= 2;
  slot *t = calloc(pow, sizeof *t);
  if (!t) return -1;
  int64_t need = 0, in_arena = 0, k = 0;
  int armed = 0;
  for (int64_t i = 0; i < n; i++) {
    const ganfw_trace_event *e = &ev[i];
    if (e->kind == GANFW_TEV_STEP) {
      armed = e->step >= l->l.from_step;
      k = 0;
    } else if (e->kind == GANFW_TEV_ALLOC && armed) { /* as the allocator matches them */
      const int64_t j = ganfw_alloc_layout_match(&l->l, k, e->size - e->slack, e->category);
      if (j >= 0) k = j + 1;
      if (j >= 0 && l->offset[j] >= 0 && e->ptr) {
        slot *s = slot_at(t, pow - 1, e->ptr);
        s->ptr = e->ptr;
        s->size = e->size;
        in_arena += e->size;
      }
    } else if (e->kind == GANFW_TEV_FREE && e->ptr) {
      slot *s = slot_at(t, pow - 1, e->ptr);
      in_arena -= s->size;
      s->size = 0;
    }
    if (e->kind == GANFW_TEV_STEP || e->kind == GANFW_TEV_LIVE) continue;
    const int64_t cache = armed ? e->allocated - in_arena : e->allocated - l->l.arena_bytes;
    if (cache > need) need = cache;
  }
  free(t);
  return need;
}

ganfw_status ganfw_layout_from_trace(const ganfw_trace_event *ev, int64_t n, ganfw_layout *out) {
  memset(out, 0, sizeof *out);
  int64_t f2 = 0, n2 = 0;
  if (ganfw_trace_find_step(ev, n, 2, &f2, &n2) != GANFW_OK)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "planned layout: the plan has no step 2");
  /* the requests as asked (rounded), not the cached blocks that served them */
  ganfw_trace_event *asked = malloc((size_t)n2 * sizeof *asked);
  if (!asked) return ganfw_error_set(GANFW_ERR_OOM, "planned layout: out of host memory");
  for (int64_t i = 0; i < n2; i++) {
    asked[i] = ev[f2 + i];
    if (asked[i].kind == GANFW_TEV_ALLOC || asked[i].kind == GANFW_TEV_FREE) asked[i].slack = 0;
    if (asked[i].kind == GANFW_TEV_ALLOC) asked[i].size -= ev[f2 + i].slack;
  }
  /* a FREE carries its block's size: the ALLOC's asked size is the one that counts */
  ganfw_arena_plan a;
  ganfw_status st = ganfw_arena_plan_step(asked, n2, &a);
  if (st != GANFW_OK) {
    free(asked);
    return st;
  }
  int64_t nreq = 0;
  for (int64_t i = 0; i < n2; i++) nreq += ev[f2 + i].kind == GANFW_TEV_ALLOC;
  const size_t cap = (size_t)(nreq ? nreq : 1);
  out->size = malloc(cap * sizeof *out->size);
  out->offset = malloc(cap * sizeof *out->offset);
  out->category = malloc(cap * sizeof *out->category);
  if (!out->size || !out->offset || !out->category) {
    free(asked);
    ganfw_arena_plan_free(&a);
    ganfw_layout_free(out);
    return ganfw_error_set(GANFW_ERR_OOM, "planned layout: out of host memory");
  }
  int64_t k = 0, b = 0; /* a.blocks are in the order of their ALLOC events */
  for (int64_t i = 0; i < n2; i++) {
    const ganfw_trace_event *e = &asked[i];
    if (e->kind != GANFW_TEV_ALLOC) continue;
    out->size[k] = e->size;
    out->category[k] = e->category;
    out->offset[k] = -1;
    if (b < a.n && a.blocks[b].first == i) {
      out->offset[k] = a.blocks[b++].offset;
      out->n_planned++;
    }
    k++;
  }
  out->lower_bound = a.lower_bound;
  out->strategy = a.strategy;
  out->l = (ganfw_alloc_layout){.n = nreq,
                                .size = out->size,
                                .category = out->category,
                                .offset = out->offset,
                                .arena_bytes = a.arena_bytes,
                                .from_step = 1};
  ganfw_arena_plan_free(&a);
  free(asked);
  /* step 1 may ask for more (buffers made at the first step and kept): those go to the
   * cache, the rest of it follows the plan */
  out->l.from_step = 1;
  const int64_t base = base_bytes(ev, n, out);
  if (base < 0) {
    ganfw_layout_free(out);
    return ganfw_error_set(GANFW_ERR_OOM, "planned layout: out of host memory");
  }
  out->l.base_bytes = base;
  return GANFW_OK;
}
