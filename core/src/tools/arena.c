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

/* Orders to place the blocks in: by size (TFLite's greedy by size), and by breadth (the
 * most bytes live at any moment of the block's life, then size: the blocks of the peak
 * first, as TFLite's and TVM's greedy by breadth). */
enum { ORDER_SIZE = 0, ORDER_BREADTH, ORDER_COUNT };
/* Where in the gaps a block goes: the lowest one it fits (first fit) or the tightest. */
enum { FIT_FIRST = 0, FIT_BEST, FIT_COUNT };
static const char *const strategy_names[ORDER_COUNT][FIT_COUNT] = {
    {"greedy by size, first fit", "greedy by size, best fit"},
    {"greedy by breadth, first fit", "greedy by breadth, best fit"}};

typedef struct placer {
  ganfw_arena_block **order, **placed, **near;
  int64_t *breadth; /* per block, for ORDER_BREADTH */
  const ganfw_arena_block *base;
} placer;

static const placer *sort_ctx; /* qsort has no context argument */

static int by_breadth(const void *x, const void *y) {
  const ganfw_arena_block *a = *(const ganfw_arena_block *const *)x;
  const ganfw_arena_block *b = *(const ganfw_arena_block *const *)y;
  const int64_t ba = sort_ctx->breadth[a - sort_ctx->base],
                bb = sort_ctx->breadth[b - sort_ctx->base];
  if (ba != bb) return ba > bb ? -1 : 1;
  return by_size(x, y);
}

/* Places every block in `order`, writing offsets into the blocks; returns the arena size. */
static int64_t place(placer *pl, int64_t n, int fit) {
  int64_t n_placed = 0, arena = 0;
  for (int64_t i = 0; i < n; i++) {
    ganfw_arena_block *b = pl->order[i];
    /* the placed blocks whose lifetimes meet b's, by offset; the gaps between them */
    int64_t m = 0;
    for (int64_t j = 0; j < n_placed; j++)
      if (meets(pl->placed[j], b)) pl->near[m++] = pl->placed[j];
    qsort(pl->near, (size_t)m, sizeof *pl->near, by_offset);
    int64_t offset = -1, best_gap = INT64_MAX, at = 0;
    for (int64_t j = 0; j <= m; j++) {
      const int64_t next = j < m ? pl->near[j]->offset : INT64_MAX;
      if (next - at >= b->size) {
        if (fit == FIT_FIRST || j == m) {
          if (offset < 0) offset = at;
          if (fit == FIT_FIRST) break;
        } else if (next - at < best_gap) {
          best_gap = next - at;
          offset = at;
        }
      }
      if (j < m && pl->near[j]->offset + pl->near[j]->size > at)
        at = pl->near[j]->offset + pl->near[j]->size;
    }
    b->offset = offset;
    pl->placed[n_placed++] = b;
    if (offset + b->size > arena) arena = offset + b->size;
  }
  return arena;
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
  const size_t nb = (size_t)(out->n > 0 ? out->n : 1);
  placer pl = {malloc(nb * sizeof *pl.order), malloc(nb * sizeof *pl.placed),
               malloc(nb * sizeof *pl.near), calloc(nb, sizeof *pl.breadth), out->blocks};
  int64_t *live = calloc((size_t)n + 1, sizeof *live), *best = malloc(nb * sizeof *best);
  out->lower_bound = lower_bound(out, n);
  if (!pl.order || !pl.placed || !pl.near || !pl.breadth || !live || !best ||
      out->lower_bound < 0) {
    free(pl.order), free(pl.placed), free(pl.near), free(pl.breadth), free(live), free(best);
    ganfw_arena_plan_free(out);
    return ganfw_error_set(GANFW_ERR_OOM, "arena plan: out of host memory");
  }
  /* the live bytes at each event, then each block's breadth */
  for (int64_t i = 0; i < out->n; i++) {
    live[out->blocks[i].first] += out->blocks[i].size;
    live[out->blocks[i].last + 1] -= out->blocks[i].size;
  }
  for (int64_t i = 1; i <= n; i++) live[i] += live[i - 1];
  for (int64_t i = 0; i < out->n; i++)
    for (int64_t t = out->blocks[i].first; t <= out->blocks[i].last; t++)
      if (live[t] > pl.breadth[i]) pl.breadth[i] = live[t];
  /* every strategy; the smallest arena is kept (ties: the first tried) */
  out->arena_bytes = INT64_MAX;
  for (int o = 0; o < ORDER_COUNT; o++)
    for (int fit = 0; fit < FIT_COUNT; fit++) {
      for (int64_t i = 0; i < out->n; i++) pl.order[i] = &out->blocks[i];
      sort_ctx = &pl;
      qsort(pl.order, (size_t)out->n, sizeof *pl.order, o == ORDER_SIZE ? by_size : by_breadth);
      const int64_t arena = place(&pl, out->n, fit);
      if (arena < out->arena_bytes) {
        out->arena_bytes = arena;
        out->strategy = strategy_names[o][fit];
        for (int64_t i = 0; i < out->n; i++) best[i] = out->blocks[i].offset;
      }
    }
  for (int64_t i = 0; i < out->n; i++) out->blocks[i].offset = best[i];
  if (out->n == 0) {
    out->arena_bytes = 0;
    out->strategy = strategy_names[0][0];
  }
  free(pl.order), free(pl.placed), free(pl.near), free(pl.breadth), free(live), free(best);
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
            "Arena (a layout of the step's step-local blocks, %s; not yet used by the "
            "step): %lld blocks in %.2f MiB, lower bound %.2f MiB (%.3fx); %.2f MiB persistent "
            "stay in the caching allocator%s\n",
            a.strategy, (long long)a.n, (double)a.arena_bytes / mib, (double)a.lower_bound / mib,
            a.lower_bound ? (double)a.arena_bytes / (double)a.lower_bound : 1.0,
            (double)(a.persistent + a.kept) / mib, ganfw_arena_plan_valid(&a) ? "" : " (INVALID)");
  }
  ganfw_error_clear();
  ganfw_arena_plan_free(&a);
  ganfw_probe_result_free(&plan);
}
