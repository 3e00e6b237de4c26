/* The caching allocator's records, shared by its three files: the allocator itself
 * (alloc.c), its OOM report (alloc_oom.c) and its event trace (alloc_trace.c). Private to
 * runtime/: everything else goes through alloc.h. */
#ifndef GANFW_ALLOC_INTERNAL_H
#define GANFW_ALLOC_INTERNAL_H

#include <stdint.h>
#include <time.h>

#include "runtime/alloc.h"
#include "runtime/trace_event.h"

enum { POOL_SMALL = 0, POOL_LARGE = 1, POOL_COUNT };

/* Requests above this are refused as OOM before any rounding can overflow. */
#define MAX_REQUEST    (SIZE_MAX / 4)
#define BLK_CHUNK      256
#define MAP_MIN_BITS   10
#define TRACE_DEFAULT  65536
#define OWNER_COPY_MAX 96

#define BLK_HELD 2

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
  uint8_t allocated; /* 1: a live block; BLK_HELD: the planned arena's span, held by a step */
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
  int32_t pinned; /* the planned layout's segment: empty_cache keeps it */
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
  int64_t allocated, reserved; /* totals after the event */
  int32_t kind, category;      /* GANFW_TEV_*, GANFW_MEM_* or -1 */
  int32_t owner;               /* index into the interned names, -1 none */
  int32_t step;
  int16_t stage, pass;
  int32_t slack; /* ganfw_trace_event.slack */
} trace_ev;

/* device.memory_layout: planned (alloc_arena.c): the layout, copied, and its state. */
typedef struct arena_state {
  int64_t n, *size, *offset;
  int32_t *category;
  int64_t arena_bytes, from_step;
  int64_t *conf_at; /* [n + 1]: conf[conf_at[k] .. conf_at[k+1]) are the blocks placed at */
  int32_t *conf;    /* k's bytes before it, which must be free when k is served */
  int64_t *uoff;    /* the distinct offsets, ascending, and the live block at each (-1) */
  int32_t *at, n_uoff;
  seg *sg;       /* the segment, its top arena_bytes the arena */
  char *base;    /* sg->base + sg->size - arena_bytes */
  blk *held;     /* the arena span's record while a step holds it, else NULL */
  uint8_t *live; /* [n] */
  const char **owner;
  int64_t n_live;
  int64_t next;           /* the step's next planned request */
  int64_t n_arena;        /* requests with an offset */
  int64_t steps_begun;    /* steps started on the plan */
  int64_t served, missed; /* this step's planned blocks served, requests off the plan */
  int32_t in_step, warned, poison;
  int64_t step;
} arena_state;

struct ganfw_alloc {
  ganfw_backend *be;
  size_t memory_limit, max_split_size;
  int32_t trace_on;    /* recording now (trace_steps not yet passed) */
  int32_t no_retry;    /* ganfw_alloc_options.no_retry */
  int32_t trace_steps; /* steps to record, 0 = every step */
  int32_t trace_seen;  /* steps begun while recording */
  int32_t cur_step;    /* the step being recorded, 0 between steps */
  int16_t cur_stage, cur_pass;

  freeset *fs[POOL_COUNT]; /* free blocks per pool */
  seg *segs;               /* every segment, newest first */
  blk *blk_free;
  blk_chunk *chunks;
  uint32_t rng;

  map_slot *map; /* live blocks by pointer */
  size_t map_mask, map_count, map_grow_at;
  unsigned map_shift;

  ganfw_alloc_stats st; /* active, largest_free_block, fragmentation filled on read */
  int64_t window_allocated, window_reserved; /* peaks since ganfw_alloc_reset_window_peak */

  arena_state *ar; /* NULL: no planned layout */
  int64_t num_planned, num_unplanned, planned_steps, unplanned_steps;

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
  int32_t trace_slack; /* the slack of the ALLOC event being added */
  struct timespec t0;
  char **names;
  size_t n_names, names_cap;
  int32_t *name_tab; /* open addressing over names, -1 empty */
  size_t name_mask;
};

/* alloc.c for alloc_arena.c: a segment of exactly `bytes` (a 2 MiB multiple) that
 * empty_cache keeps; its free top from `from` taken as one BLK_HELD record (NULL when the
 * top block is not free or starts above `from`), and given back. */
seg *ganfw_alloc_seg_pinned(ganfw_alloc *a, size_t bytes);
blk *ganfw_alloc_hold_top(ganfw_alloc *a, seg *s, char *from);
void ganfw_alloc_unhold(ganfw_alloc *a, blk *b);
void ganfw_alloc_stat_add(ganfw_alloc_stat *s, int64_t d);
/* alloc_arena.c, called by alloc.c and alloc_trace.c: */
void ganfw_arena_step_begin(ganfw_alloc *a, int64_t step);
void ganfw_arena_step_end(ganfw_alloc *a);
/* 1 with *ptr set when the arena served the request; 0: the cache serves it. */
int ganfw_arena_malloc(ganfw_alloc *a, size_t size, int32_t category, const char *owner,
                       void **ptr);
/* 1 when ptr is a live planned block (freed here); 0 when it is not in the arena. */
int ganfw_arena_free(ganfw_alloc *a, void *ptr);
/* The live planned block at ptr: its index, or -1. */
int64_t ganfw_arena_find(const ganfw_alloc *a, const void *ptr);
void ganfw_arena_destroy(ganfw_alloc *a);

/* "512 bytes", "64.00 KiB", "20.00 MiB", "1.50 GiB" into buf; returns buf. */
const char *ganfw_alloc_fmt_bytes(char *buf, size_t n, int64_t b);
/* Records an OOM for a request of `size` (the report, the stats, a trace event) and
 * returns GANFW_ERR_OOM with the formatted report as the error message (alloc_oom.c). */
ganfw_status ganfw_alloc_oom(ganfw_alloc *a, size_t size, int32_t category, const char *owner);
/* Appends one event (GANFW_TEV_*) to the trace ring (alloc_trace.c), stamped with the
 * current step, stage, pass and totals; only called while a->trace_on. */
void ganfw_alloc_trace_add(ganfw_alloc *a, int32_t kind, const void *ptr, const seg *s, size_t size,
                           int32_t category, const char *owner);

#endif
