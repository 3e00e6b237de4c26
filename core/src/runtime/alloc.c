/* The caching allocator (rules in alloc.h): segments from the backend, blocks split and
 * merged inside them, size-class bins with a bitmap per pool for best fit, an
 * open-addressing map from pointer to live block and PyTorch-named stats; the OOM report is
 * alloc_oom.c, the event trace and its JSON alloc_trace.c, the shared records
 * alloc_internal.h. Sizes are bytes; every block is a 512-byte multiple. */
#include "runtime/alloc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "runtime/alloc_internal.h"

/* --- small helpers ------------------------------------------------------------------- */

static inline void stat_add(ganfw_alloc_stat *s, int64_t d) {
  s->current += d;
  if (s->current > s->peak) s->peak = s->current;
}

void ganfw_alloc_stat_add(ganfw_alloc_stat *s, int64_t d) {
  stat_add(s, d);
}

static inline int blk_is_split(const blk *b) {
  return b->prev != NULL || b->next != NULL;
}

size_t ganfw_alloc_round_size(size_t bytes) {
  if (bytes < GANFW_ALLOC_MIN_BLOCK) return GANFW_ALLOC_MIN_BLOCK;
  return (bytes + GANFW_ALLOC_MIN_BLOCK - 1) / GANFW_ALLOC_MIN_BLOCK * GANFW_ALLOC_MIN_BLOCK;
}

size_t ganfw_alloc_segment_size(size_t rounded) {
  if (rounded <= GANFW_ALLOC_SMALL_SIZE) return GANFW_ALLOC_SMALL_BUFFER;
  if (rounded < GANFW_ALLOC_MIN_LARGE) return GANFW_ALLOC_LARGE_BUFFER;
  return (rounded + GANFW_ALLOC_ROUND_LARGE - 1) / GANFW_ALLOC_ROUND_LARGE *
         GANFW_ALLOC_ROUND_LARGE;
}

/* --- block records --------------------------------------------------------------------- */

static blk *blk_new(ganfw_alloc *a) {
  if (!a->blk_free) {
    blk_chunk *c = malloc(sizeof *c);
    if (!c) return NULL;
    c->next = a->chunks;
    a->chunks = c;
    for (int i = BLK_CHUNK - 1; i >= 0; i--) {
      c->b[i].r = a->blk_free;
      a->blk_free = &c->b[i];
    }
  }
  blk *b = a->blk_free;
  a->blk_free = b->r;
  memset(b, 0, sizeof *b);
  return b;
}

static void blk_release(ganfw_alloc *a, blk *b) {
  b->r = a->blk_free;
  a->blk_free = b;
}

/* --- treap of free blocks, keyed by (size, ptr) ------------------------------------------ */

static inline int key_less(const blk *x, const blk *y) {
  return x->size < y->size || (x->size == y->size && x->ptr < y->ptr);
}

/* Splits the subtree t into keys < k (*l) and keys > k (*r); k itself is not in t. */
static void tr_split(blk *t, const blk *k, blk **l, blk **r) {
  while (t) {
    if (key_less(t, k)) {
      *l = t;
      l = &t->r;
      t = t->r;
    } else {
      *r = t;
      r = &t->l;
      t = t->l;
    }
  }
  *l = NULL;
  *r = NULL;
}

/* Joins two treaps where every key of x is below every key of y. */
static blk *tr_join(blk *x, blk *y) {
  blk *res = NULL, **p = &res;
  while (x && y) {
    if (x->prio > y->prio) {
      *p = x;
      p = &x->r;
      x = x->r;
    } else {
      *p = y;
      p = &y->l;
      y = y->l;
    }
  }
  *p = x ? x : y;
  return res;
}

static void tr_insert(blk **p, blk *n) {
  while (*p && (*p)->prio > n->prio) p = key_less(n, *p) ? &(*p)->l : &(*p)->r;
  tr_split(*p, n, &n->l, &n->r);
  *p = n;
}

static void tr_erase(blk **p, blk *n) {
  while (*p != n) p = key_less(n, *p) ? &(*p)->l : &(*p)->r;
  *p = tr_join(n->l, n->r);
  n->l = n->r = NULL;
}

/* --- size classes -------------------------------------------------------------------------- */

/* The class of a 512-byte multiple. Monotone: a larger size never has a lower class. */
static inline unsigned size_class(size_t size) {
  if (size <= (size_t)EXACT_CLASSES * GANFW_ALLOC_MIN_BLOCK)
    return (unsigned)(size / GANFW_ALLOC_MIN_BLOCK) - 1;
  unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)size); /* >= 21 */
  unsigned sub = (unsigned)(size >> (lg - SUB_BITS)) & ((1u << SUB_BITS) - 1);
  return EXACT_CLASSES + (lg - 21) * (1u << SUB_BITS) + sub;
}

static void fs_insert(ganfw_alloc *a, blk *n) {
  freeset *f = a->fs[n->pool];
  unsigned c = size_class(n->size);
  a->rng ^= a->rng << 13;
  a->rng ^= a->rng >> 17;
  a->rng ^= a->rng << 5;
  n->prio = a->rng;
  n->l = n->r = NULL;
  if (!f->bin[c]) {
    f->bits[c >> 6] |= 1ull << (c & 63);
    f->summary[c >> 12] |= 1ull << ((c >> 6) & 63);
    f->bin[c] = n;
    return;
  }
  tr_insert(&f->bin[c], n);
}

static void fs_erase(ganfw_alloc *a, blk *n) {
  freeset *f = a->fs[n->pool];
  unsigned c = size_class(n->size);
  tr_erase(&f->bin[c], n);
  if (!f->bin[c]) {
    f->bits[c >> 6] &= ~(1ull << (c & 63));
    if (!f->bits[c >> 6]) f->summary[c >> 12] &= ~(1ull << ((c >> 6) & 63));
  }
}

/* The first non-empty class >= c, or N_CLASSES. */
static inline unsigned fs_next(const freeset *f, unsigned c) {
  if (c >= N_CLASSES) return N_CLASSES;
  unsigned w = c >> 6;
  uint64_t m = f->bits[w] & (~0ull << (c & 63));
  if (m) return (w << 6) + (unsigned)__builtin_ctzll(m);
  for (unsigned sw = w + 1; sw < N_WORDS;) { /* at most two summary words */
    uint64_t sm = f->summary[sw >> 6] & (~0ull << (sw & 63));
    if (sm) {
      unsigned ww = ((sw >> 6) << 6) + (unsigned)__builtin_ctzll(sm);
      return (ww << 6) + (unsigned)__builtin_ctzll(f->bits[ww]);
    }
    sw = ((sw >> 6) + 1) << 6;
  }
  return N_CLASSES;
}

/* The smallest free block of size >= `size` (lowest address among equals), or NULL. */
static inline blk *fs_lower_bound(const freeset *f, size_t size) {
  unsigned c = size_class(size);
  blk *t = f->bin[c], *best = NULL;
  while (t) {
    if (t->size >= size) {
      best = t;
      t = t->l;
    } else {
      t = t->r;
    }
  }
  if (best) return best;
  c = fs_next(f, c + 1);
  if (c == N_CLASSES) return NULL;
  for (t = f->bin[c]; t->l;) t = t->l;
  return t;
}

static size_t fs_largest(const freeset *f) {
  for (int w = N_WORDS - 1; w >= 0; w--)
    if (f->bits[w]) {
      unsigned c = ((unsigned)w << 6) + 63u - (unsigned)__builtin_clzll(f->bits[w]);
      const blk *t = f->bin[c];
      while (t->r) t = t->r;
      return t->size;
    }
  return 0;
}

static int fs_contains(const ganfw_alloc *a, const blk *k) {
  const blk *t = a->fs[k->pool]->bin[size_class(k->size)];
  while (t && t != k) t = key_less(k, t) ? t->l : t->r;
  return t == k;
}

/* --- pointer -> live block map (linear probing, backward-shift deletion) ---------------- */

static inline size_t map_home(const ganfw_alloc *a, const void *key) {
  uint64_t x = (uint64_t)(uintptr_t)key >> 9;
  return (size_t)((x * 0x9E3779B97F4A7C15ull) >> a->map_shift);
}

static int map_init(ganfw_alloc *a, unsigned bits) {
  map_slot *m = calloc((size_t)1 << bits, sizeof *m);
  if (!m) return -1;
  a->map = m;
  a->map_mask = ((size_t)1 << bits) - 1;
  a->map_shift = 64 - bits;
  a->map_grow_at = ((size_t)1 << bits) / 2;
  return 0;
}

static inline void map_put(ganfw_alloc *a, blk *b) {
  size_t i = map_home(a, b->ptr);
  while (a->map[i].key) i = (i + 1) & a->map_mask;
  a->map[i].key = b->ptr;
  a->map[i].b = b;
  a->map_count++;
}

static inline size_t map_find(const ganfw_alloc *a, const void *key) {
  size_t i = map_home(a, key);
  while (a->map[i].key) {
    if (a->map[i].key == key) return i;
    i = (i + 1) & a->map_mask;
  }
  return SIZE_MAX;
}

static void map_del(ganfw_alloc *a, size_t i) {
  size_t j = i;
  for (;;) {
    j = (j + 1) & a->map_mask;
    if (!a->map[j].key) break;
    size_t k = map_home(a, a->map[j].key);
    /* The entry at j may move back to the hole at i unless its home lies in (i, j]. */
    int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
    if (!stays) {
      a->map[i] = a->map[j];
      i = j;
    }
  }
  a->map[i].key = NULL;
  a->map[i].b = NULL;
  a->map_count--;
}

static int map_grow(ganfw_alloc *a) {
  map_slot *old = a->map;
  size_t old_n = a->map_mask + 1;
  unsigned bits = 64 - a->map_shift + 1;
  if (map_init(a, bits) != 0) {
    a->map = old;
    return -1;
  }
  a->map_count = 0;
  for (size_t i = 0; i < old_n; i++)
    if (old[i].key) map_put(a, old[i].b);
  free(old);
  return 0;
}

/* --- create / destroy -------------------------------------------------------------------- */

ganfw_status ganfw_alloc_create(ganfw_backend *be, const ganfw_alloc_options *opt,
                                ganfw_alloc **out) {
  if (!out) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_alloc_create: out is NULL");
  *out = NULL;
  if (!be || !be->vt || !be->vt->raw_alloc || !be->vt->raw_free)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "ganfw_alloc_create: the backend has no raw_alloc/raw_free");
  ganfw_alloc_options o = {0};
  if (opt) o = *opt;
  if (o.max_split_size != 0 && o.max_split_size <= GANFW_ALLOC_LARGE_BUFFER)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "max_split_size %zu bytes is too small: use 0 (unlimited) or more "
                           "than 20 MiB (a 1-10 MiB request gets a 20 MiB segment; PyTorch "
                           "has the same lower bound for max_split_size_mb)",
                           o.max_split_size);
  ganfw_alloc *a = calloc(1, sizeof *a);
  if (!a) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory creating the allocator");
  a->be = be;
  a->memory_limit = o.memory_limit;
  a->max_split_size = o.max_split_size;
  a->no_retry = o.no_retry != 0;
  a->rng = 0x9E3779B9u;
  clock_gettime(CLOCK_MONOTONIC, &a->t0);
  a->fs[POOL_SMALL] = calloc(1, sizeof(freeset));
  a->fs[POOL_LARGE] = calloc(1, sizeof(freeset));
  if (!a->fs[POOL_SMALL] || !a->fs[POOL_LARGE] || map_init(a, MAP_MIN_BITS) != 0) {
    free(a->fs[POOL_SMALL]);
    free(a->fs[POOL_LARGE]);
    free(a);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory creating the allocator");
  }
  if (o.trace) {
    a->ev_cap = o.trace_capacity ? o.trace_capacity : TRACE_DEFAULT;
    a->ev = malloc(a->ev_cap * sizeof *a->ev);
    if (!a->ev) {
      free(a->fs[POOL_SMALL]);
      free(a->fs[POOL_LARGE]);
      free(a->map);
      free(a);
      return ganfw_error_set(GANFW_ERR_OOM,
                             "out of host memory for the allocator trace (%zu events); lower "
                             "the trace capacity or turn tracing off",
                             o.trace_capacity);
    }
    a->trace_on = 1;
    a->trace_steps = o.trace_steps > 0 ? o.trace_steps : 0;
  }
  *out = a;
  return GANFW_OK;
}

static void seg_release(ganfw_alloc *a, seg *s) {
  a->be->vt->raw_free(a->be, s->base, s->size);
  stat_add(&a->st.reserved, -(int64_t)s->size);
  stat_add(&a->st.segments, -1);
  a->st.num_segments = a->st.segments.current;
  if (s->prev)
    s->prev->next = s->next;
  else
    a->segs = s->next;
  if (s->next) s->next->prev = s->prev;
  free(s);
}

void ganfw_alloc_destroy(ganfw_alloc *a) {
  if (!a) return;
  ganfw_arena_destroy(a);
  while (a->segs) seg_release(a, a->segs);
  while (a->chunks) {
    blk_chunk *c = a->chunks;
    a->chunks = c->next;
    free(c);
  }
  for (size_t i = 0; i < a->n_names; i++) free(a->names[i]);
  free(a->names);
  free(a->name_tab);
  free(a->ev);
  free(a->map);
  free(a->fs[POOL_SMALL]);
  free(a->fs[POOL_LARGE]);
  free(a);
}

/* --- segments ----------------------------------------------------------------------------- */

static void *raw_try(ganfw_alloc *a, size_t bytes) {
  if (a->memory_limit && (size_t)a->st.reserved.current + bytes > a->memory_limit) return NULL;
  return a->be->vt->raw_alloc(a->be, bytes);
}

void ganfw_alloc_empty_cache(ganfw_alloc *a) {
  if (!a) return;
  int64_t released = 0;
  seg *s = a->segs;
  while (s) {
    seg *next = s->next;
    blk *b = s->first;
    if (!b->allocated && !b->next && !s->pinned) {
      void *base = s->base;
      const size_t size = s->size;
      fs_erase(a, b);
      released += (int64_t)size;
      blk_release(a, b);
      seg_release(a, s);
      if (a->trace_on) ganfw_alloc_trace_add(a, GANFW_TEV_SEGMENT_FREE, base, NULL, size, -1, NULL);
    }
    s = next;
  }
  a->st.num_empty_cache++;
  a->st.empty_cache_bytes += released;
  if (a->trace_on)
    ganfw_alloc_trace_add(a, GANFW_TEV_EMPTY_CACHE, NULL, NULL, (size_t)released, -1, NULL);
}

/* A new segment for a request of `size` bytes in `pool`, as one free block outside the
 * tree; NULL when the backend (or memory_limit) refuses even after emptying the cache. */
static blk *seg_make(ganfw_alloc *a, int pool, size_t bytes) {
  void *p = raw_try(a, bytes);
  if (!p) {
    if (a->no_retry) return NULL;
    a->st.num_alloc_retries++;
    ganfw_alloc_empty_cache(a);
    p = raw_try(a, bytes);
    if (!p) return NULL;
  }
  seg *s = malloc(sizeof *s);
  blk *b = s ? blk_new(a) : NULL;
  if (!b) {
    free(s);
    a->be->vt->raw_free(a->be, p, bytes);
    return NULL;
  }
  s->base = p;
  s->size = bytes;
  s->first = b;
  s->pool = pool;
  s->pinned = 0;
  s->prev = NULL;
  s->next = a->segs;
  if (a->segs) a->segs->prev = s;
  a->segs = s;
  b->ptr = p;
  b->size = bytes;
  b->sg = s;
  b->pool = (uint8_t)pool;
  stat_add(&a->st.reserved, (int64_t)bytes);
  if (a->st.reserved.current > a->window_reserved) a->window_reserved = a->st.reserved.current;
  stat_add(&a->st.segments, 1);
  a->st.num_segments = a->st.segments.current;
  if (a->trace_on) ganfw_alloc_trace_add(a, GANFW_TEV_SEGMENT_ALLOC, p, s, bytes, -1, NULL);
  return b;
}

static blk *seg_new(ganfw_alloc *a, int pool, size_t size) {
  return seg_make(a, pool, ganfw_alloc_segment_size(size));
}

seg *ganfw_alloc_seg_pinned(ganfw_alloc *a, size_t bytes) {
  blk *b = seg_make(a, POOL_LARGE, bytes);
  if (!b) return NULL;
  b->sg->pinned = 1;
  fs_insert(a, b);
  return b->sg;
}

/* --- malloc / free ------------------------------------------------------------------------ */

/* The best cached block of `pool` for `size`, or NULL (PyTorch's get_free_block). */
static inline blk *find_fit(const ganfw_alloc *a, int pool, size_t size) {
  blk *best = fs_lower_bound(a->fs[pool], size);
  if (best && pool == POOL_LARGE && a->max_split_size) {
    if (size < a->max_split_size && best->size >= a->max_split_size) return NULL;
    if (size >= a->max_split_size && best->size >= size + GANFW_ALLOC_LARGE_BUFFER) return NULL;
  }
  return best;
}

static inline int should_split(const ganfw_alloc *a, int pool, size_t size, size_t remaining) {
  if (pool == POOL_SMALL || a->ar) return remaining >= GANFW_ALLOC_MIN_BLOCK;
  return (a->max_split_size == 0 || size < a->max_split_size) && remaining > GANFW_ALLOC_SMALL_SIZE;
}

/* The stats, trace and peak hook of a block handed out (by the cache or the arena). */
static void account_alloc(ganfw_alloc *a, void *ptr, const seg *sg, size_t size, size_t asked,
                          int32_t category, const char *owner) {
  const int64_t old_peak = a->st.allocated.peak;
  stat_add(&a->st.allocated, (int64_t)size);
  if (a->st.allocated.current > a->window_allocated) a->window_allocated = a->st.allocated.current;
  stat_add(&a->st.category[category], (int64_t)size);
  stat_add(&a->st.allocations, 1);
  a->st.num_allocs++;
  if (a->trace_on) {
    a->trace_slack = (int32_t)(size - asked);
    ganfw_alloc_trace_add(a, GANFW_TEV_ALLOC, ptr, sg, size, category, owner);
  }
  if (a->peak_hook && a->st.allocated.peak > old_peak) a->peak_hook(a->peak_ud, a);
}

static void account_free(ganfw_alloc *a, const void *ptr, const seg *sg, size_t size,
                         int32_t category, const char *owner) {
  stat_add(&a->st.allocated, -(int64_t)size);
  stat_add(&a->st.category[category], -(int64_t)size);
  stat_add(&a->st.allocations, -1);
  a->st.num_frees++;
  if (a->trace_on) ganfw_alloc_trace_add(a, GANFW_TEV_FREE, ptr, sg, size, category, owner);
}

ganfw_status ganfw_alloc_malloc(ganfw_alloc *a, size_t bytes, int32_t category, const char *owner,
                                void **ptr) {
  if (!ptr) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_alloc_malloc: ptr is NULL");
  *ptr = NULL;
  if (!a) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_alloc_malloc: allocator is NULL");
  if (category < 0 || category >= GANFW_MEM_COUNT)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "ganfw_alloc_malloc: category %d (owner '%s') is not a GANFW_MEM_* "
                           "value",
                           (int)category, owner ? owner : "");
  if (bytes > MAX_REQUEST) return ganfw_alloc_oom(a, bytes, category, owner);
  if (a->map_count >= a->map_grow_at && map_grow(a) != 0)
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory for the allocator's block map");
  size_t size = ganfw_alloc_round_size(bytes);
  void *planned = NULL;
  if (a->ar && a->ar->in_step && ganfw_arena_malloc(a, size, category, owner, &planned)) {
    account_alloc(a, planned, a->ar->sg, size, size, category, owner);
    *ptr = planned;
    return GANFW_OK;
  }
  /* with a planned layout everything is in the large pool (see ganfw_alloc_set_layout) */
  int pool = size <= GANFW_ALLOC_SMALL_SIZE && !a->ar ? POOL_SMALL : POOL_LARGE;
  blk *b = find_fit(a, pool, size);
  if (b) {
    fs_erase(a, b);
  } else {
    b = seg_new(a, pool, size);
    if (!b) return ganfw_alloc_oom(a, size, category, owner);
  }
  int64_t inactive = blk_is_split(b) ? -(int64_t)b->size : 0;
  size_t remaining = b->size - size;
  if (should_split(a, pool, size, remaining)) {
    blk *rest = blk_new(a); /* out of host memory: hand out the whole block instead */
    if (rest) {
      rest->ptr = b->ptr + size;
      rest->size = remaining;
      rest->sg = b->sg;
      rest->pool = (uint8_t)pool;
      rest->prev = b;
      rest->next = b->next;
      if (b->next) b->next->prev = rest;
      b->next = rest;
      b->size = size;
      fs_insert(a, rest);
      inactive += (int64_t)remaining;
    }
  }
  if (inactive) stat_add(&a->st.inactive_split, inactive);
  b->allocated = 1;
  b->category = (int16_t)category;
  b->owner = owner;
  map_put(a, b);
  account_alloc(a, b->ptr, b->sg, b->size, size, category, owner);
  *ptr = b->ptr;
  return GANFW_OK;
}

void ganfw_alloc_for_each_block(const ganfw_alloc *a, ganfw_alloc_block_fn fn, void *ud) {
  if (!a || !fn) return;
  for (size_t i = 0; i <= a->map_mask; i++) {
    const blk *b = a->map[i].b;
    if (a->map[i].key) fn(ud, b->ptr, b->size, b->category, b->owner);
  }
  const arena_state *r = a->ar;
  if (r && r->n_live)
    for (int64_t k = 0; k < r->n; k++)
      if (r->live[k])
        fn(ud, r->base + r->offset[k], (size_t)r->size[k], r->category[k], r->owner[k]);
}

void ganfw_alloc_set_peak_hook(ganfw_alloc *a, ganfw_alloc_peak_fn fn, void *ud) {
  if (!a) return;
  a->peak_hook = fn;
  a->peak_ud = ud;
}

/* A block record back into its pool's free set, merged with its free neighbours. */
static void blk_free_merge(ganfw_alloc *a, blk *b) {
  b->allocated = 0;
  b->owner = NULL;
  int64_t inactive = 0;
  blk *p = b->prev;
  if (p && !p->allocated) { /* merge into the lower neighbour, which keeps its record */
    fs_erase(a, p);
    inactive -= (int64_t)p->size;
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    blk_release(a, b);
    b = p;
  }
  blk *n = b->next;
  if (n && !n->allocated) {
    fs_erase(a, n);
    inactive -= (int64_t)n->size;
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    blk_release(a, n);
  }
  if (blk_is_split(b)) inactive += (int64_t)b->size;
  if (inactive) stat_add(&a->st.inactive_split, inactive);
  fs_insert(a, b);
}

blk *ganfw_alloc_hold_top(ganfw_alloc *a, seg *s, char *from) {
  blk *top = s->first;
  while (top->next) top = top->next;
  if (top->allocated || top->ptr > from) return NULL;
  fs_erase(a, top);
  int64_t inactive = blk_is_split(top) ? -(int64_t)top->size : 0;
  blk *held = top;
  if (top->ptr < from) { /* the free part below stays in the cache */
    held = blk_new(a);
    if (!held) {
      fs_insert(a, top);
      return NULL;
    }
    held->ptr = from;
    held->size = (size_t)(top->ptr + top->size - from);
    held->sg = s;
    held->pool = top->pool;
    held->prev = top;
    held->next = NULL;
    top->next = held;
    top->size -= held->size;
    inactive += (int64_t)top->size; /* split now */
    fs_insert(a, top);
  }
  held->allocated = BLK_HELD;
  if (inactive) stat_add(&a->st.inactive_split, inactive);
  return held;
}

void ganfw_alloc_unhold(ganfw_alloc *a, blk *b) {
  blk_free_merge(a, b);
}

void ganfw_alloc_free(ganfw_alloc *a, void *ptr) {
  if (!a || !ptr) return;
  if (a->ar) {
    const int64_t k = ganfw_arena_find(a, ptr);
    if (k >= 0) {
      const arena_state *r = a->ar;
      account_free(a, ptr, r->sg, (size_t)r->size[k], r->category[k], r->owner[k]);
      ganfw_arena_free(a, ptr);
      return;
    }
  }
  size_t i = map_find(a, ptr);
  if (i == SIZE_MAX) {
    fprintf(stderr,
            "ganfw: ganfw_alloc_free(%p): not a live block of this allocator (double free or "
            "foreign pointer); ignored\n",
            ptr);
    return;
  }
  blk *b = a->map[i].b;
  map_del(a, i);
  account_free(a, b->ptr, b->sg, b->size, b->category, b->owner);
  blk_free_merge(a, b);
}

size_t ganfw_alloc_block_size(const ganfw_alloc *a, const void *ptr) {
  if (!a || !ptr) return 0;
  const int64_t k = a->ar ? ganfw_arena_find(a, ptr) : -1;
  if (k >= 0) return (size_t)a->ar->size[k];
  size_t i = map_find(a, ptr);
  return i == SIZE_MAX ? 0 : a->map[i].b->size;
}

/* --- stats ------------------------------------------------------------------------------------ */

void ganfw_alloc_reset_peak(ganfw_alloc *a) {
  if (!a) return;
  ganfw_alloc_stat *all[] = {&a->st.allocated,      &a->st.reserved,    &a->st.active,
                             &a->st.inactive_split, &a->st.allocations, &a->st.segments};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) all[i]->peak = all[i]->current;
  for (int c = 0; c < GANFW_MEM_COUNT; c++) a->st.category[c].peak = a->st.category[c].current;
}

void ganfw_alloc_window_peak(const ganfw_alloc *a, int64_t *allocated, int64_t *reserved) {
  *allocated = a ? a->window_allocated : 0;
  *reserved = a ? a->window_reserved : 0;
}

void ganfw_alloc_reset_window_peak(ganfw_alloc *a) {
  if (!a) return;
  a->window_allocated = a->st.allocated.current;
  a->window_reserved = a->st.reserved.current;
}

size_t ganfw_alloc_memory_limit(const ganfw_alloc *a) {
  return a ? a->memory_limit : 0;
}

void ganfw_alloc_get_stats(const ganfw_alloc *a, ganfw_alloc_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!a) return;
  *out = a->st;
  out->active = a->st.allocated;
  int64_t largest = 0;
  for (int p = 0; p < POOL_COUNT; p++) {
    int64_t m = (int64_t)fs_largest(a->fs[p]);
    if (m > largest) largest = m;
  }
  out->largest_free_block = largest;
  int64_t cached = out->reserved.current - out->allocated.current;
  out->fragmentation = cached > 0 ? 1.0 - (double)largest / (double)cached : 0.0;
  out->arena_bytes = a->ar ? a->ar->arena_bytes : 0;
  out->num_planned = a->num_planned;
  out->num_unplanned = a->num_unplanned;
  out->planned_steps = a->planned_steps;
  out->unplanned_steps = a->unplanned_steps;
}

/* One row of the summary: a name and up to two right-aligned cells. */
static void summary_row(FILE *out, const char *name, const char *cur, const char *peak) {
  fprintf(out, "| %-23s| %15s | %15s |\n", name, cur, peak);
}

void ganfw_alloc_memory_summary(const ganfw_alloc *a, FILE *out) {
  if (!a || !out) return;
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  char s1[32], s2[32];
  const char *rule = "|============================================================|\n";
  const char *thin = "|------------------------------------------------------------|\n";
  fputs(rule, out);
  fprintf(out, "| %-59s|\n", "ganfw caching allocator: memory summary");
  fputs(rule, out);
  summary_row(out, "Metric", "Cur Usage", "Peak Usage");
  fputs(thin, out);
  const struct {
    const char *name;
    const ganfw_alloc_stat *s;
  } bytes_rows[] = {{"Allocated memory", &st.allocated},
                    {"Active memory", &st.active},
                    {"Reserved memory", &st.reserved},
                    {"Inactive split memory", &st.inactive_split}};
  for (size_t i = 0; i < sizeof bytes_rows / sizeof bytes_rows[0]; i++)
    summary_row(out, bytes_rows[i].name,
                ganfw_alloc_fmt_bytes(s1, sizeof s1, bytes_rows[i].s->current),
                ganfw_alloc_fmt_bytes(s2, sizeof s2, bytes_rows[i].s->peak));
  fputs(thin, out);
  const struct {
    const char *name;
    const ganfw_alloc_stat *s;
  } count_rows[] = {{"Allocations", &st.allocations}, {"Segments", &st.segments}};
  for (size_t i = 0; i < sizeof count_rows / sizeof count_rows[0]; i++) {
    snprintf(s1, sizeof s1, "%" PRId64, count_rows[i].s->current);
    snprintf(s2, sizeof s2, "%" PRId64, count_rows[i].s->peak);
    summary_row(out, count_rows[i].name, s1, s2);
  }
  fputs(thin, out);
  summary_row(out, "Largest free block",
              ganfw_alloc_fmt_bytes(s1, sizeof s1, st.largest_free_block), "");
  snprintf(s1, sizeof s1, "%.1f%%", 100.0 * st.fragmentation);
  summary_row(out, "Fragmentation", s1, "");
  const struct {
    const char *name;
    int64_t v;
  } totals[] = {{"Allocs (total)", st.num_allocs},
                {"Frees (total)", st.num_frees},
                {"Alloc retries", st.num_alloc_retries},
                {"OOMs", st.num_ooms}};
  for (size_t i = 0; i < sizeof totals / sizeof totals[0]; i++) {
    snprintf(s1, sizeof s1, "%" PRId64, totals[i].v);
    summary_row(out, totals[i].name, s1, "");
  }
  fputs(rule, out);
  summary_row(out, "Category", "Cur Usage", "Peak Usage");
  fputs(thin, out);
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    summary_row(out, ganfw_mem_category_name(c),
                ganfw_alloc_fmt_bytes(s1, sizeof s1, st.category[c].current),
                ganfw_alloc_fmt_bytes(s2, sizeof s2, st.category[c].peak));
  fputs(thin, out);
  summary_row(out, "memory_limit",
              a->memory_limit ? ganfw_alloc_fmt_bytes(s1, sizeof s1, (int64_t)a->memory_limit)
                              : "none",
              "");
  summary_row(out, "max_split_size",
              a->max_split_size ? ganfw_alloc_fmt_bytes(s2, sizeof s2, (int64_t)a->max_split_size)
                                : "unlimited",
              "");
  fputs(rule, out);
}

/* --- invariants (tests) ----------------------------------------------------------------------- */

typedef struct seg_span {
  const char *base;
  size_t size;
} seg_span;

static int span_cmp(const void *x, const void *y) {
  const seg_span *p = x, *q = y;
  return p->base < q->base ? -1 : p->base > q->base ? 1 : 0;
}

/* In-order walk of one class: keys increase, priorities form a heap, nodes are free, of
 * `pool` and of class `c`. */
static int check_tree(const blk *t, int pool, unsigned c, const blk **last, size_t *count) {
  if (!t) return 0;
  if (t->l && t->l->prio > t->prio) return -1;
  if (t->r && t->r->prio > t->prio) return -1;
  if (check_tree(t->l, pool, c, last, count) != 0) return -1;
  if (t->allocated || t->pool != pool || size_class(t->size) != c) return -1;
  if (*last && !key_less(*last, t)) return -1;
  *last = t;
  (*count)++;
  return check_tree(t->r, pool, c, last, count);
}

/* Every marked class holds a valid tree, keys increase across classes, and the summary
 * matches the bitmap. A non-empty class left unmarked shows up as a free block that the
 * count (compared with the segments' free blocks by the caller) misses. */
static int check_freeset(const freeset *f, int pool, size_t *count) {
  const blk *last = NULL;
  for (unsigned w = 0; w < N_WORDS; w++)
    for (uint64_t m = f->bits[w]; m; m &= m - 1) {
      unsigned c = (w << 6) + (unsigned)__builtin_ctzll(m);
      if (!f->bin[c] || check_tree(f->bin[c], pool, c, &last, count) != 0) return -1;
    }
  for (unsigned w = 0; w < N_WORDS; w++)
    if ((int)((f->summary[w >> 6] >> (w & 63)) & 1) != (f->bits[w] != 0)) return -1;
  return 0;
}

#define FAIL(...) return (ganfw_error_set(GANFW_ERR_INTERNAL, "alloc invariant: " __VA_ARGS__), -1)

int ganfw_alloc_check_invariants(const ganfw_alloc *a) {
  if (!a) FAIL("allocator is NULL");
  int64_t allocated = 0, reserved = 0, inactive = 0, n_alloc = 0, n_seg = 0;
  int64_t cat[GANFW_MEM_COUNT] = {0};
  size_t n_free = 0;
  for (const seg *s = a->segs; s; s = s->next) n_seg++;
  seg_span *spans = malloc((size_t)(n_seg ? n_seg : 1) * sizeof *spans);
  if (!spans) FAIL("out of host memory while checking");
  size_t k = 0;
  for (const seg *s = a->segs; s; s = s->next) {
    spans[k].base = s->base;
    spans[k++].size = s->size;
    reserved += (int64_t)s->size;
    if (s->next && s->next->prev != s) {
      free(spans);
      FAIL("segment list links broken at %p", (void *)s->base);
    }
    if ((s->pool == POOL_SMALL && s->size != GANFW_ALLOC_SMALL_BUFFER) ||
        s->size % GANFW_ALLOC_ROUND_LARGE != 0) {
      free(spans);
      FAIL("segment %p has size %zu: not 2 MiB (small pool) or a 2 MiB multiple", (void *)s->base,
           s->size);
    }
    const char *expect = s->base;
    const blk *prev = NULL;
    if (!s->first || s->first->prev) {
      free(spans);
      FAIL("segment %p: first block missing or has a predecessor", (void *)s->base);
    }
    for (const blk *b = s->first; b; prev = b, b = b->next) {
      const char *why = NULL;
      if (b->ptr != expect)
        why = "block does not start where its predecessor ends";
      else if (b->prev != prev)
        why = "prev link broken";
      else if (b->sg != s || b->pool != s->pool)
        why = "block's segment or pool differs from its segment's";
      else if (b->size == 0 || b->size % GANFW_ALLOC_MIN_BLOCK != 0)
        why = "block size is not a positive 512-byte multiple";
      else if (!b->allocated && prev && !prev->allocated)
        why = "two adjacent free blocks (missed merge)";
      else if (b->allocated == BLK_HELD) {
        if (!a->ar || a->ar->held != b || b->ptr != a->ar->base || b->next)
          why = "a held span that is not the planned arena's";
      } else if (b->allocated) {
        size_t i = map_find(a, b->ptr);
        if (i == SIZE_MAX || a->map[i].b != b) why = "allocated block missing from the map";
        if (b->category < 0 || b->category >= GANFW_MEM_COUNT) why = "bad category";
      } else if (!fs_contains(a, b)) {
        why = "free block missing from its pool's tree";
      }
      if (why) {
        free(spans);
        FAIL("segment %p block at +%zu (%zu bytes): %s", (void *)s->base,
             (size_t)(b->ptr - s->base), b->size, why);
      }
      if (b->allocated == BLK_HELD) {
      } else if (b->allocated) {
        allocated += (int64_t)b->size;
        cat[b->category] += (int64_t)b->size;
        n_alloc++;
      } else {
        n_free++;
        if (blk_is_split(b)) inactive += (int64_t)b->size;
      }
      expect += b->size;
    }
    if (expect != s->base + s->size) {
      free(spans);
      FAIL("segment %p: blocks cover %zu of %zu bytes", (void *)s->base, (size_t)(expect - s->base),
           s->size);
    }
  }
  qsort(spans, k, sizeof *spans, span_cmp);
  for (size_t i = 1; i < k; i++)
    if (spans[i - 1].base + spans[i - 1].size > spans[i].base) {
      const void *lo = spans[i - 1].base, *hi = spans[i].base;
      free(spans);
      FAIL("segments %p and %p overlap", lo, hi);
    }
  free(spans);
  size_t in_trees = 0;
  for (int p = 0; p < POOL_COUNT; p++)
    if (check_freeset(a->fs[p], p, &in_trees) != 0)
      FAIL("pool %d free set: order, heap, class, bitmap or membership broken", p);
  if (in_trees != n_free) FAIL("%zu blocks in the trees but %zu free blocks", in_trees, n_free);
  if ((int64_t)a->map_count != n_alloc)
    FAIL("map holds %zu blocks but %" PRId64 " are allocated", a->map_count, n_alloc);
  const arena_state *r = a->ar;
  if (r) { /* the live planned blocks: inside the held arena, no two sharing a byte */
    int64_t n_live = 0;
    for (int64_t q = 0; q < r->n; q++) {
      if (!r->live[q]) continue;
      if (!r->held) FAIL("planned block %" PRId64 " is live but no step holds the arena", q);
      for (int64_t j = q + 1; j < r->n; j++)
        if (r->live[j] && r->offset[j] < r->offset[q] + r->size[q] &&
            r->offset[q] < r->offset[j] + r->size[j])
          FAIL("live planned blocks %" PRId64 " and %" PRId64 " overlap", q, j);
      allocated += r->size[q];
      cat[r->category[q]] += r->size[q];
      n_alloc++;
      n_live++;
    }
    if (n_live != r->n_live)
      FAIL("%" PRId64 " planned blocks live, counted %" PRId64, n_live, r->n_live);
  }
  if (a->st.allocated.current != allocated)
    FAIL("allocated stat %" PRId64 " != sum of live blocks %" PRId64, a->st.allocated.current,
         allocated);
  if (a->st.reserved.current != reserved)
    FAIL("reserved stat %" PRId64 " != sum of segments %" PRId64, a->st.reserved.current, reserved);
  if (a->st.inactive_split.current != inactive)
    FAIL("inactive_split stat %" PRId64 " != sum of split free blocks %" PRId64,
         a->st.inactive_split.current, inactive);
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    if (a->st.category[c].current != cat[c] || a->st.category[c].peak < cat[c])
      FAIL("category %s stat %" PRId64 " != sum %" PRId64, ganfw_mem_category_name(c),
           a->st.category[c].current, cat[c]);
  if (a->st.allocations.current != n_alloc || a->st.segments.current != n_seg ||
      a->st.num_segments != n_seg)
    FAIL("count stats (allocations %" PRId64 ", segments %" PRId64 ") != %" PRId64 ", %" PRId64,
         a->st.allocations.current, a->st.segments.current, n_alloc, n_seg);
  if (a->st.allocated.peak < allocated || a->st.reserved.peak < reserved ||
      a->st.inactive_split.peak < inactive || a->st.allocations.peak < n_alloc ||
      a->st.segments.peak < n_seg)
    FAIL("a peak is below its current value");
  if (a->window_allocated < allocated || a->window_reserved < reserved)
    FAIL("a window peak is below its current value");
  if (a->memory_limit && reserved > (int64_t)a->memory_limit)
    FAIL("reserved %" PRId64 " exceeds memory_limit %zu", reserved, a->memory_limit);
  return 0;
}
/* "512 bytes", "64.00 KiB", "20.00 MiB", "1.50 GiB" */
const char *ganfw_alloc_fmt_bytes(char *buf, size_t n, int64_t b) {
  double v = (double)b;
  if (b < 1024) {
    snprintf(buf, n, "%" PRId64 " bytes", b);
  } else if (b < ((int64_t)1 << 20)) {
    snprintf(buf, n, "%.2f KiB", v / 1024.0);
  } else if (b < ((int64_t)1 << 30)) {
    snprintf(buf, n, "%.2f MiB", v / 1048576.0);
  } else {
    snprintf(buf, n, "%.2f GiB", v / 1073741824.0);
  }
  return buf;
}
