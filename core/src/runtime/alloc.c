/* The caching allocator (rules in alloc.h): segments from the backend, blocks split and
 * merged inside them, size-class bins with a bitmap per pool for best fit, an
 * open-addressing map from pointer to live block, PyTorch-named stats, the OOM report and
 * an optional event trace. Sizes are bytes; every block is a 512-byte multiple. */
#include "runtime/alloc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"

enum { POOL_SMALL = 0, POOL_LARGE = 1, POOL_COUNT };
enum { EV_ALLOC = 0, EV_FREE, EV_SEGMENT_ALLOC, EV_SEGMENT_FREE, EV_OOM, EV_COUNT };

/* Requests above this are refused as OOM before any rounding can overflow. */
#define MAX_REQUEST    (SIZE_MAX / 4)
#define BLK_CHUNK      256
#define MAP_MIN_BITS   10
#define TRACE_DEFAULT  65536
#define OWNER_COPY_MAX 96

typedef struct seg seg;
typedef struct blk blk;

/* A block: a run of bytes inside one segment, allocated or free. */
struct blk {
  char *ptr;
  size_t size;
  blk *prev, *next;  /* address neighbours inside the segment */
  blk *l, *r;        /* treap children while free; r links the record free list */
  seg *sg;           /* the segment it lies in */
  const char *owner; /* while allocated (borrowed) */
  uint32_t prio;     /* treap priority */
  int16_t category;  /* while allocated */
  uint8_t allocated;
  uint8_t pool;
};

/* A segment: one raw_alloc of the backend. Its lowest block never changes (splits keep
 * the low part, merges keep the lower block), so `first` walks every block in it. */
struct seg {
  char *base;
  size_t size;
  blk *first;
  seg *prev, *next;
  int32_t pool;
};

/* Free blocks of one pool, by size class: exact 512-byte classes up to 2 MiB, then 64
 * classes per power of two. Each class is a treap keyed by (size, ptr), usually of one or
 * two blocks; a two-level bitmap finds the next non-empty class in O(1). */
#define EXACT_CLASSES 4096 /* sizes 512 .. 2 MiB */
#define SUB_BITS      6    /* 64 classes per power of two above */
#define N_CLASSES     (EXACT_CLASSES + (64 - 21) * (1 << SUB_BITS))
#define N_WORDS       (N_CLASSES / 64)
_Static_assert(N_CLASSES % 64 == 0 && N_WORDS <= 128, "class bitmap layout");

typedef struct freeset {
  blk *bin[N_CLASSES];
  uint64_t bits[N_WORDS]; /* bit c: bin[c] is non-empty */
  uint64_t summary[2];    /* bit w: bits[w] != 0 */
} freeset;

typedef struct blk_chunk {
  struct blk_chunk *next;
  blk b[BLK_CHUNK];
} blk_chunk;

typedef struct map_slot {
  const void *key; /* NULL = empty */
  blk *b;
} map_slot;

typedef struct trace_ev {
  int64_t t_ns;
  uint64_t ptr, offset, size;
  int32_t kind, category;
  int32_t owner; /* index into the interned names, -1 none */
  int32_t pad;
} trace_ev;

struct ganfw_alloc {
  ganfw_backend *be;
  size_t memory_limit, max_split_size;
  int32_t trace_on;

  freeset *fs[POOL_COUNT]; /* free blocks per pool */
  seg *segs;               /* every segment, newest first */
  blk *blk_free;
  blk_chunk *chunks;
  uint32_t rng;

  map_slot *map; /* live blocks by pointer */
  size_t map_mask, map_count, map_grow_at;
  unsigned map_shift;

  ganfw_alloc_stats st; /* active, largest_free_block, fragmentation filled on read */

  int have_oom;
  ganfw_oom_report oom;
  char oom_names[GANFW_OOM_TOP + 1][OWNER_COPY_MAX];
  ganfw_oom_hook hook;
  void *hook_ud;
  ganfw_alloc_peak_fn peak_hook;
  void *peak_ud;

  /* trace: a ring of the latest events, owner names interned */
  trace_ev *ev;
  size_t ev_cap, ev_head, ev_len;
  int64_t ev_dropped;
  struct timespec t0;
  char **names;
  size_t n_names, names_cap;
  int32_t *name_tab; /* open addressing over names, -1 empty */
  size_t name_mask;
};

/* --- small helpers ------------------------------------------------------------------- */

static inline void stat_add(ganfw_alloc_stat *s, int64_t d) {
  s->current += d;
  if (s->current > s->peak) s->peak = s->current;
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

static const char *const category_names[] = {
    "param", "grad", "optim_state", "activation", "workspace", "data", "other",
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

/* "512 bytes", "64.00 KiB", "20.00 MiB", "1.50 GiB" */
static const char *fmt_bytes(char *buf, size_t n, int64_t b) {
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

static int64_t now_ns(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec);
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

/* --- trace ------------------------------------------------------------------------------ */

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

static void trace_add(ganfw_alloc *a, int32_t kind, const void *ptr, const seg *s, size_t size,
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
  seg *s = a->segs;
  while (s) {
    seg *next = s->next;
    blk *b = s->first;
    if (!b->allocated && !b->next) {
      fs_erase(a, b);
      if (a->trace_on) trace_add(a, EV_SEGMENT_FREE, s->base, s, s->size, -1, NULL);
      blk_release(a, b);
      seg_release(a, s);
    }
    s = next;
  }
}

/* A new segment for a request of `size` bytes in `pool`, as one free block outside the
 * tree; NULL when the backend (or memory_limit) refuses even after emptying the cache. */
static blk *seg_new(ganfw_alloc *a, int pool, size_t size) {
  size_t bytes = ganfw_alloc_segment_size(size);
  void *p = raw_try(a, bytes);
  if (!p) {
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
  s->prev = NULL;
  s->next = a->segs;
  if (a->segs) a->segs->prev = s;
  a->segs = s;
  b->ptr = p;
  b->size = bytes;
  b->sg = s;
  b->pool = (uint8_t)pool;
  stat_add(&a->st.reserved, (int64_t)bytes);
  stat_add(&a->st.segments, 1);
  a->st.num_segments = a->st.segments.current;
  if (a->trace_on) trace_add(a, EV_SEGMENT_ALLOC, p, s, bytes, -1, NULL);
  return b;
}

/* --- OOM ------------------------------------------------------------------------------------ */

typedef struct owner_row {
  const char *owner;
  int32_t category;
  int64_t bytes;
} owner_row;

static int owner_row_cmp(const void *x, const void *y) {
  const owner_row *p = x, *q = y;
  if (p->category != q->category) return p->category < q->category ? -1 : 1;
  if (p->owner == q->owner) return 0;
  if (!p->owner) return -1;
  if (!q->owner) return 1;
  return strcmp(p->owner, q->owner);
}

static void copy_name(char *dst, const char *src) {
  snprintf(dst, OWNER_COPY_MAX, "%s", src);
}

/* The biggest (owner, category) holders of live blocks, into r->top. */
static void oom_top_owners(ganfw_alloc *a, ganfw_oom_report *r) {
  r->n_top = 0;
  if (a->map_count == 0) return;
  owner_row *rows = malloc(a->map_count * sizeof *rows);
  if (!rows) return;
  size_t n = 0;
  for (size_t i = 0; i <= a->map_mask; i++) {
    const blk *b = a->map[i].b;
    if (!a->map[i].key) continue;
    rows[n].owner = b->owner;
    rows[n].category = b->category;
    rows[n].bytes = (int64_t)b->size;
    n++;
  }
  qsort(rows, n, sizeof *rows, owner_row_cmp);
  size_t m = 0; /* merge equal (owner, category) runs in place */
  for (size_t i = 0; i < n; i++) {
    if (m > 0 && owner_row_cmp(&rows[m - 1], &rows[i]) == 0)
      rows[m - 1].bytes += rows[i].bytes;
    else
      rows[m++] = rows[i];
  }
  for (int k = 0; k < GANFW_OOM_TOP && (size_t)k < m; k++) { /* selection of the top few */
    size_t best = (size_t)k;
    for (size_t i = (size_t)k + 1; i < m; i++)
      if (rows[i].bytes > rows[best].bytes) best = i;
    owner_row t = rows[k];
    rows[k] = rows[best];
    rows[best] = t;
    copy_name(a->oom_names[k], rows[k].owner ? rows[k].owner : "(unnamed)");
    r->top[k].owner = a->oom_names[k];
    r->top[k].category = rows[k].category;
    r->top[k].bytes = rows[k].bytes;
    r->n_top = k + 1;
  }
  free(rows);
}

static ganfw_status oom(ganfw_alloc *a, size_t size, int32_t category, const char *owner) {
  ganfw_oom_report *r = &a->oom;
  memset(r, 0, sizeof *r);
  a->st.num_ooms++;
  a->have_oom = 1;
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  r->requested = (int64_t)(size > INT64_MAX ? INT64_MAX : size);
  r->req_category = category;
  copy_name(a->oom_names[GANFW_OOM_TOP], owner ? owner : "");
  r->req_owner = a->oom_names[GANFW_OOM_TOP];
  size_t total = 0, dev_free = 0;
  int have_dev = a->be->vt->capacity && a->be->vt->capacity(a->be, &total, &dev_free) == GANFW_OK;
  if (a->memory_limit) {
    r->limited = 1;
    r->capacity = (int64_t)a->memory_limit;
    int64_t left = (int64_t)a->memory_limit - st.reserved.current;
    if (left < 0) left = 0;
    if (have_dev && (int64_t)dev_free < left) left = (int64_t)dev_free;
    r->free_bytes = left;
  } else if (have_dev) {
    r->capacity = (int64_t)total;
    r->free_bytes = (int64_t)dev_free;
  }
  r->allocated = st.allocated.current;
  r->reserved = st.reserved.current;
  r->reserved_unallocated = st.reserved.current - st.allocated.current;
  r->largest_free_block = st.largest_free_block;
  r->fragmentation = st.fragmentation;
  for (int c = 0; c < GANFW_MEM_COUNT; c++) r->category[c] = st.category[c].current;
  oom_top_owners(a, r);
  if (a->trace_on) trace_add(a, EV_OOM, NULL, NULL, size, category, owner);
  char text[3072];
  ganfw_oom_report_format(a, r, text, sizeof text);
  return ganfw_error_set(GANFW_ERR_OOM, "%s", text);
}

int ganfw_alloc_last_oom(const ganfw_alloc *a, ganfw_oom_report *out) {
  if (!a || !a->have_oom) return 0;
  if (out) *out = a->oom;
  return 1;
}

void ganfw_alloc_set_oom_hook(ganfw_alloc *a, ganfw_oom_hook fn, void *ud) {
  if (!a) return;
  a->hook = fn;
  a->hook_ud = ud;
}

/* Appends printf-style text at *len, keeping buf NUL-terminated and *len <= n - 1. */
__attribute__((format(printf, 4, 5))) static void app(char *buf, size_t n, size_t *len,
                                                      const char *fmt, ...) {
  if (*len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *len, n - *len, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  *len = (*len + (size_t)k < n - 1) ? *len + (size_t)k : n - 1;
}

void ganfw_oom_report_format(const ganfw_alloc *a, const ganfw_oom_report *r, char *buf, size_t n) {
  if (!buf || n == 0) return;
  buf[0] = '\0';
  if (!r) return;
  size_t len = 0;
  char s1[32], s2[32], s3[32], s4[32];
  app(buf, n, &len, "out of memory: tried to allocate %s", fmt_bytes(s1, sizeof s1, r->requested));
  if (r->req_category >= 0 && r->req_category < GANFW_MEM_COUNT)
    app(buf, n, &len, " for %s", ganfw_mem_category_name(r->req_category));
  if (r->req_owner && r->req_owner[0]) app(buf, n, &len, " '%s'", r->req_owner);
  if (r->capacity > 0)
    app(buf, n, &len, " (%s %s, %s free; ", r->limited ? "memory_limit" : "device capacity",
        fmt_bytes(s1, sizeof s1, r->capacity), fmt_bytes(s2, sizeof s2, r->free_bytes));
  else
    app(buf, n, &len, " (device capacity unknown; ");
  app(buf, n, &len, "%s allocated by ganfw, %s reserved but unallocated).",
      fmt_bytes(s3, sizeof s3, r->allocated), fmt_bytes(s4, sizeof s4, r->reserved_unallocated));
  app(buf, n, &len, " Largest free block %s, fragmentation %.1f%%.",
      fmt_bytes(s1, sizeof s1, r->largest_free_block), 100.0 * r->fragmentation);

  /* categories, largest first */
  int order[GANFW_MEM_COUNT], k = 0;
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    if (r->category[c] > 0) order[k++] = c;
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && r->category[order[j]] > r->category[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  if (k > 0) {
    app(buf, n, &len, "\nBy category:");
    for (int i = 0; i < k; i++)
      app(buf, n, &len, "%s %s %s", i ? "," : "", ganfw_mem_category_name(order[i]),
          fmt_bytes(s1, sizeof s1, r->category[order[i]]));
    app(buf, n, &len, ".");
  }
  if (r->n_top > 0) {
    app(buf, n, &len, "\nBiggest holders:");
    for (int i = 0; i < r->n_top && i < GANFW_OOM_TOP; i++)
      app(buf, n, &len, "%s %s (%s) %s", i ? "," : "", r->top[i].owner ? r->top[i].owner : "?",
          ganfw_mem_category_name(r->top[i].category), fmt_bytes(s1, sizeof s1, r->top[i].bytes));
    app(buf, n, &len, ".");
  }
  if (r->reserved_unallocated >= r->requested && r->requested > 0)
    app(buf, n, &len,
        "\nReserved but unallocated memory would hold the request but is fragmented: try "
        "device.max_split_size (e.g. 64 MiB) so large cached blocks are not split.");
  if (a && a->hook && len + 1 < n) {
    a->hook(a->hook_ud, r, buf + len, n - len);
    buf[n - 1] = '\0';
  }
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
  if (pool == POOL_SMALL) return remaining >= GANFW_ALLOC_MIN_BLOCK;
  return (a->max_split_size == 0 || size < a->max_split_size) && remaining > GANFW_ALLOC_SMALL_SIZE;
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
  if (bytes > MAX_REQUEST) return oom(a, bytes, category, owner);
  if (a->map_count >= a->map_grow_at && map_grow(a) != 0)
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory for the allocator's block map");
  size_t size = ganfw_alloc_round_size(bytes);
  int pool = size <= GANFW_ALLOC_SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
  blk *b = find_fit(a, pool, size);
  if (b) {
    fs_erase(a, b);
  } else {
    b = seg_new(a, pool, size);
    if (!b) return oom(a, size, category, owner);
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
  const int64_t old_peak = a->st.allocated.peak;
  stat_add(&a->st.allocated, (int64_t)b->size);
  stat_add(&a->st.category[category], (int64_t)b->size);
  stat_add(&a->st.allocations, 1);
  a->st.num_allocs++;
  if (a->trace_on) trace_add(a, EV_ALLOC, b->ptr, b->sg, b->size, category, owner);
  *ptr = b->ptr;
  if (a->peak_hook && a->st.allocated.peak > old_peak) a->peak_hook(a->peak_ud, a);
  return GANFW_OK;
}

void ganfw_alloc_for_each_block(const ganfw_alloc *a, ganfw_alloc_block_fn fn, void *ud) {
  if (!a || !fn) return;
  for (size_t i = 0; i <= a->map_mask; i++) {
    const blk *b = a->map[i].b;
    if (a->map[i].key) fn(ud, b->ptr, b->size, b->category, b->owner);
  }
}

void ganfw_alloc_set_peak_hook(ganfw_alloc *a, ganfw_alloc_peak_fn fn, void *ud) {
  if (!a) return;
  a->peak_hook = fn;
  a->peak_ud = ud;
}

void ganfw_alloc_free(ganfw_alloc *a, void *ptr) {
  if (!a || !ptr) return;
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
  stat_add(&a->st.allocated, -(int64_t)b->size);
  stat_add(&a->st.category[b->category], -(int64_t)b->size);
  stat_add(&a->st.allocations, -1);
  a->st.num_frees++;
  if (a->trace_on) trace_add(a, EV_FREE, b->ptr, b->sg, b->size, b->category, b->owner);
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

size_t ganfw_alloc_block_size(const ganfw_alloc *a, const void *ptr) {
  if (!a || !ptr) return 0;
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
    summary_row(out, bytes_rows[i].name, fmt_bytes(s1, sizeof s1, bytes_rows[i].s->current),
                fmt_bytes(s2, sizeof s2, bytes_rows[i].s->peak));
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
  summary_row(out, "Largest free block", fmt_bytes(s1, sizeof s1, st.largest_free_block), "");
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
    summary_row(out, ganfw_mem_category_name(c), fmt_bytes(s1, sizeof s1, st.category[c].current),
                fmt_bytes(s2, sizeof s2, st.category[c].peak));
  fputs(thin, out);
  summary_row(out, "memory_limit",
              a->memory_limit ? fmt_bytes(s1, sizeof s1, (int64_t)a->memory_limit) : "none", "");
  summary_row(
      out, "max_split_size",
      a->max_split_size ? fmt_bytes(s2, sizeof s2, (int64_t)a->max_split_size) : "unlimited", "");
  fputs(rule, out);
}

/* --- JSON ----------------------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
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
      json_str(f, ganfw_mem_category_name(e->category));
    else
      fputs("null", f);
    fputs(", \"owner\": ", f);
    if (e->owner >= 0)
      json_str(f, a->names[e->owner]);
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
      else if (b->allocated) {
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
      if (b->allocated) {
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
  if (a->memory_limit && reserved > (int64_t)a->memory_limit)
    FAIL("reserved %" PRId64 " exceeds memory_limit %zu", reserved, a->memory_limit);
  return 0;
}
