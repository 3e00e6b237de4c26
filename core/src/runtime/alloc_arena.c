/* device.memory_layout: planned (rules in alloc.h): the step's planned requests served at
 * their offsets in the arena at the top of one pinned segment. The layout is checked as the
 * step goes: the k-th request must have the planned rounded size and category, and every
 * block placed at its bytes earlier in the step must have been freed; the first request
 * that differs hands the rest of the step to the cache, so a wrong plan costs memory,
 * never a corrupted tensor. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "ganfw/host.h"
#include "runtime/alloc_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(r, p, n)                                                                            \
  do {                                                                                             \
    if ((r)->poison) ASAN_POISON_MEMORY_REGION((p), (n));                                          \
  } while (0)
#define UNPOISON(r, p, n)                                                                          \
  do {                                                                                             \
    if ((r)->poison) ASAN_UNPOISON_MEMORY_REGION((p), (n));                                        \
  } while (0)
#else
#define POISON(r, p, n)   ((void)(r), (void)(p), (void)(n))
#define UNPOISON(r, p, n) ((void)(r), (void)(p), (void)(n))
#endif

static void arena_free_state(arena_state *r) {
  if (!r) return;
  free(r->size), free(r->offset), free(r->category), free(r->conf_at), free(r->conf);
  free(r->uoff), free(r->at), free(r->live), free(r->owner);
  free(r);
}

static int cmp_i64(const void *x, const void *y) {
  const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* The index of offset `off` among the distinct offsets, or -1. */
static int64_t uoff_index(const arena_state *r, int64_t off) {
  int64_t lo = 0, hi = r->n_uoff - 1;
  while (lo <= hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (r->uoff[mid] == off) return mid;
    if (r->uoff[mid] < off)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return -1;
}

/* For each planned block, the blocks placed at its bytes before it in the step. */
static int build_conflicts(arena_state *r) {
  int64_t count = 0, cap = 1024;
  r->conf_at = malloc((size_t)(r->n + 1) * sizeof *r->conf_at);
  r->conf = malloc((size_t)cap * sizeof *r->conf);
  if (!r->conf_at || !r->conf) return -1;
  for (int64_t k = 0; k < r->n; k++) {
    r->conf_at[k] = count;
    if (r->offset[k] < 0) continue;
    for (int64_t j = 0; j < k; j++) {
      if (r->offset[j] < 0 || r->offset[j] >= r->offset[k] + r->size[k] ||
          r->offset[k] >= r->offset[j] + r->size[j])
        continue;
      if (count == cap) {
        int32_t *grown = realloc(r->conf, (size_t)(cap *= 2) * sizeof *r->conf);
        if (!grown) return -1;
        r->conf = grown;
      }
      r->conf[count++] = (int32_t)j;
    }
  }
  r->conf_at[r->n] = count;
  return 0;
}

ganfw_status ganfw_alloc_set_layout(ganfw_alloc *a, const ganfw_alloc_layout *l) {
  if (!a || !l || l->n < 0 || l->n > INT32_MAX ||
      (l->n && (!l->size || !l->category || !l->offset)))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_alloc_set_layout: no layout");
  if (a->ar || a->st.allocations.current || a->segs)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "ganfw_alloc_set_layout: the allocator already has a layout or "
                           "holds memory; set the layout right after creating it");
  if (l->arena_bytes < 0 || l->arena_bytes % (int64_t)GANFW_ALLOC_MIN_BLOCK || l->base_bytes < 0)
    return ganfw_error_set(
        GANFW_ERR_INVALID_ARG,
        "planned layout: an arena of %" PRId64 " bytes is not a 512-byte multiple", l->arena_bytes);
  for (int64_t k = 0; k < l->n; k++) {
    if (l->size[k] <= 0 || l->size[k] % (int64_t)GANFW_ALLOC_MIN_BLOCK || l->category[k] < 0 ||
        l->category[k] >= GANFW_MEM_COUNT ||
        (l->offset[k] >= 0 && l->offset[k] + l->size[k] > l->arena_bytes) ||
        (l->offset[k] >= 0 && l->offset[k] % (int64_t)GANFW_ALLOC_MIN_BLOCK))
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "planned layout: request %" PRId64 " (%" PRId64
                             " bytes at offset %" PRId64 ", category %d) does not fit an arena "
                             "of %" PRId64 " bytes",
                             k, l->size[k], l->offset[k], (int)l->category[k], l->arena_bytes);
  }
  arena_state *r = calloc(1, sizeof *r);
  const size_t n = (size_t)(l->n ? l->n : 1);
  if (r) {
    r->size = malloc(n * sizeof *r->size);
    r->offset = malloc(n * sizeof *r->offset);
    r->category = malloc(n * sizeof *r->category);
    r->uoff = malloc(n * sizeof *r->uoff);
    r->at = malloc(n * sizeof *r->at);
    r->live = calloc(n, 1);
    r->owner = calloc(n, sizeof *r->owner);
  }
  if (!r || !r->size || !r->offset || !r->category || !r->uoff || !r->at || !r->live || !r->owner) {
    arena_free_state(r);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory for the planned layout");
  }
  r->n = l->n;
  memcpy(r->size, l->size, (size_t)l->n * sizeof *r->size);
  memcpy(r->offset, l->offset, (size_t)l->n * sizeof *r->offset);
  memcpy(r->category, l->category, (size_t)l->n * sizeof *r->category);
  r->arena_bytes = l->arena_bytes;
  r->from_step = l->from_step < 1 ? 1 : l->from_step;
  for (int64_t k = 0; k < r->n; k++)
    if (r->offset[k] >= 0) r->uoff[r->n_uoff++] = r->offset[k];
  r->n_arena = r->n_uoff;
  qsort(r->uoff, (size_t)r->n_uoff, sizeof *r->uoff, cmp_i64);
  int32_t m = 0;
  for (int32_t i = 0; i < r->n_uoff; i++)
    if (i == 0 || r->uoff[i] != r->uoff[m - 1]) r->uoff[m++] = r->uoff[i];
  r->n_uoff = m;
  for (int32_t i = 0; i < m; i++) r->at[i] = -1;
  if (build_conflicts(r) != 0) {
    arena_free_state(r);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory for the planned layout");
  }
  const int64_t round = (int64_t)GANFW_ALLOC_ROUND_LARGE;
  int64_t bytes = (l->base_bytes + l->arena_bytes + round - 1) / round * round;
  if (bytes == 0) bytes = round;
  r->sg = ganfw_alloc_seg_pinned(a, (size_t)bytes);
  if (!r->sg) {
    arena_free_state(r);
    return ganfw_error_set(GANFW_ERR_OOM,
                           "no room for the layout's segment of %.2f MiB (%.2f MiB of it "
                           "arena)",
                           (double)bytes / 1048576.0, (double)l->arena_bytes / 1048576.0);
  }
  r->base = r->sg->base + r->sg->size - r->arena_bytes;
  r->poison = a->be->vt->name && strcmp(a->be->vt->name, "cpu") == 0; /* host memory */
  a->ar = r;
  return GANFW_OK;
}

const void *ganfw_alloc_arena_base(const ganfw_alloc *a) {
  return a && a->ar ? a->ar->base : NULL;
}

void ganfw_arena_destroy(ganfw_alloc *a) {
  arena_state *r = a->ar;
  if (!r) return;
  if (r->held) UNPOISON(r, r->base, (size_t)r->arena_bytes);
  arena_free_state(r);
  a->ar = NULL;
}

/* A request of the step that the plan cannot serve: the cache serves it, and the step
 * goes on with the plan (one log line per run). */
static void miss(ganfw_alloc *a, size_t size, int32_t category, const char *owner,
                 const char *why) {
  arena_state *r = a->ar;
  a->num_unplanned++;
  r->missed++;
  /* the first step may make buffers it keeps (not in the plan of a later step): no line */
  if (r->warned || r->steps_begun <= 1) return;
  r->warned = 1;
  ganfw_log(GANFW_LOG_WARN,
            "device.memory_layout: planned: step %" PRId64
            " asked for a block off the plan (%s, %s, "
            "%zu bytes: %s); the caching allocator serves it (memory.json counts such requests)",
            r->step, owner ? owner : "unnamed", ganfw_mem_category_name(category), size, why);
}

int64_t ganfw_alloc_layout_match(const ganfw_alloc_layout *l, int64_t k, int64_t size,
                                 int32_t category) {
  for (int64_t j = k; j < l->n && j <= k + GANFW_LAYOUT_LOOKAHEAD; j++)
    if (l->size[j] == size && l->category[j] == category) return j;
  return -1;
}

int ganfw_arena_malloc(ganfw_alloc *a, size_t size, int32_t category, const char *owner,
                       void **ptr) {
  arena_state *r = a->ar;
  const ganfw_alloc_layout l = {.n = r->n, .size = r->size, .category = r->category};
  const int64_t k = ganfw_alloc_layout_match(&l, r->next, (int64_t)size, category);
  if (k < 0) {
    miss(a, size, category, owner, "the plan has no such request here");
    return 0;
  }
  r->next = k + 1;
  if (r->offset[k] < 0) return 0; /* planned for the cache */
  for (int64_t c = r->conf_at[k]; c < r->conf_at[k + 1]; c++)
    if (r->live[r->conf[c]]) {
      miss(a, size, category, owner, "a block planned to end before it is still live");
      return 0;
    }
  char *p = r->base + r->offset[k];
  r->live[k] = 1;
  r->owner[k] = owner;
  r->at[uoff_index(r, r->offset[k])] = (int32_t)k;
  r->n_live++;
  r->served++;
  a->num_planned++;
  UNPOISON(r, p, size);
  *ptr = p;
  return 1;
}

void ganfw_alloc_arena_skip(ganfw_alloc *a, int64_t requests) {
  arena_state *r = a ? a->ar : NULL;
  if (!r || !r->in_step || requests <= 0) return;
  r->next = r->next + requests < r->n ? r->next + requests : r->n;
}

int64_t ganfw_arena_find(const ganfw_alloc *a, const void *ptr) {
  const arena_state *r = a->ar;
  const char *p = ptr;
  if (!r->n_live || p < r->base || p >= r->base + r->arena_bytes) return -1;
  const int64_t u = uoff_index(r, (int64_t)(p - r->base));
  return u < 0 ? -1 : r->at[u];
}

static void give_back(ganfw_alloc *a) {
  arena_state *r = a->ar;
  UNPOISON(r, r->base, (size_t)r->arena_bytes);
  ganfw_alloc_unhold(a, r->held);
  r->held = NULL;
}

int ganfw_arena_free(ganfw_alloc *a, void *ptr) {
  arena_state *r = a->ar;
  const int64_t k = ganfw_arena_find(a, ptr);
  if (k < 0) return 0;
  r->live[k] = 0;
  r->owner[k] = NULL;
  r->at[uoff_index(r, r->offset[k])] = -1;
  r->n_live--;
  POISON(r, ptr, (size_t)r->size[k]);
  if (!r->in_step && r->n_live == 0 && r->held) give_back(a);
  return 1;
}

void ganfw_arena_step_begin(ganfw_alloc *a, int64_t step) {
  arena_state *r = a->ar;
  if (r->in_step) ganfw_arena_step_end(a); /* a step that began again (a skipped batch) */
  if (step < r->from_step) return;
  r->step = step;
  if (!r->held && (r->held = ganfw_alloc_hold_top(a, r->sg, r->base)) != NULL)
    POISON(r, r->base, (size_t)r->arena_bytes);
  if (!r->held || r->n_live) {
    a->unplanned_steps++;
    if (!r->warned) {
      r->warned = 1;
      ganfw_log(GANFW_LOG_WARN,
                "device.memory_layout: planned: step %" PRId64
                " runs on the caching allocator: the arena's bytes are still in use",
                step);
    }
    return;
  }
  r->in_step = 1;
  r->steps_begun++;
  r->next = 0;
  r->served = 0;
  r->missed = 0;
}

void ganfw_arena_step_end(ganfw_alloc *a) {
  arena_state *r = a->ar;
  if (!r->in_step) return;
  if (r->served == r->n_arena && r->missed == 0)
    a->planned_steps++;
  else
    a->unplanned_steps++;
  r->in_step = 0;
  if (r->n_live == 0 && r->held) give_back(a);
}
