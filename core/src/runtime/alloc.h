/* The caching allocator: one per run, holding everything a device keeps (params, grads,
 * optimizer state, activations, workspaces, data). It takes segments from a backend's
 * raw_alloc and hands out blocks with PyTorch's CUDACachingAllocator rules and vocabulary.
 *
 * Rules (as in PyTorch): requests round up to 512 B (0 -> 512). Rounded sizes <= 1 MiB use
 * the small pool, larger ones the large pool. A new segment is 2 MiB for a small request,
 * 20 MiB for a request under 10 MiB, else the request rounded up to 2 MiB. A request takes
 * the smallest cached free block of its pool that fits (ties: lowest address); the rest is
 * split off when it is >= 512 B (small pool) or > 1 MiB (large pool). A freed block merges
 * with its free neighbours in the segment. max_split_size (large pool only): a cached
 * block >= max_split_size is "oversize": it is never split, a request below
 * max_split_size never takes it, a larger request takes it only when the block is less
 * than request + 20 MiB. When a new segment cannot be had (raw_alloc returns NULL or
 * memory_limit would be passed), every fully free segment is released (empty_cache) and
 * the segment is tried once more (num_alloc_retries); failing again is an OOM (num_ooms,
 * an OOM report, GANFW_ERR_OOM with the report's text as the error message).
 *
 * Threads: not thread-safe, by design (no lock in the hot path). One allocator per run,
 * used from the training thread only; the data prefetch thread never calls it.
 * Performance: free blocks sit in size-class bins (exact 512-byte classes up to 2 MiB, 64
 * per power of two above), each bin a small treap keyed by (size, address), with a bitmap
 * that finds the next non-empty bin in O(1); pointer -> block is an open-addressing map;
 * block records come from a pool, so the hot path never calls malloc. A cached alloc/free
 * pair costs ~20-35 ns (bench/bench_alloc.c). Tracing, when off, costs one branch. */
#ifndef GANFW_ALLOC_H
#define GANFW_ALLOC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "ganfw/status.h"
#include "ganfw/tensor.h"
#include "runtime/trace_event.h"

#define GANFW_ALLOC_MIN_BLOCK    ((size_t)512)
#define GANFW_ALLOC_SMALL_SIZE   ((size_t)1 << 20)  /* largest small-pool request */
#define GANFW_ALLOC_SMALL_BUFFER ((size_t)2 << 20)  /* small-pool segment */
#define GANFW_ALLOC_LARGE_BUFFER ((size_t)20 << 20) /* segment for requests under 10 MiB */
#define GANFW_ALLOC_MIN_LARGE    ((size_t)10 << 20) /* from here segments fit the request */
#define GANFW_ALLOC_ROUND_LARGE  ((size_t)2 << 20)  /* large segments round to this */

typedef struct ganfw_alloc ganfw_alloc;

typedef struct ganfw_alloc_options {
  size_t memory_limit;   /* 0 = no limit; caps reserved bytes */
  size_t max_split_size; /* 0 = unlimited; else must be > 20 MiB, as in PyTorch */
  int32_t trace;         /* record alloc/free/segment events */
  int32_t trace_steps;   /* with trace: record the first N steps (ganfw_alloc_trace_step), 0 all */
  int32_t no_retry;      /* 1: a failed segment request is an OOM at once, without emptying
                            the cache and retrying (device.empty_cache: never) */
  int32_t reserved0;
  size_t trace_capacity; /* events kept (a ring: the latest ones); 0 = 65536 */
} ganfw_alloc_options;

typedef struct ganfw_alloc_stat {
  int64_t current, peak;
} ganfw_alloc_stat;

typedef struct ganfw_alloc_stats {
  /* bytes. active == allocated here (no streams: a freed block is inactive at once).
   * inactive_split: free blocks that are a split part of a segment (PyTorch's
   * "non-releasable memory"): they sit in a segment that also holds other blocks. */
  ganfw_alloc_stat allocated, reserved, active, inactive_split;
  ganfw_alloc_stat category[GANFW_MEM_COUNT]; /* allocated bytes per GANFW_MEM_* */
  int64_t num_alloc_retries, num_ooms;
  int64_t num_segments;          /* segments held now (== segments.current) */
  int64_t num_allocs, num_frees; /* successful calls since create */
  int64_t largest_free_block;    /* bytes, the largest cached free block */
  double fragmentation;          /* 1 - largest_free / (reserved - allocated); 0 if equal */
  int64_t num_empty_cache;       /* ganfw_alloc_empty_cache calls (the OOM retry's included) */
  int64_t empty_cache_bytes;     /* bytes of segments they released */
  ganfw_alloc_stat allocations;  /* live blocks (count) */
  ganfw_alloc_stat segments;     /* segments (count) */
  /* device.memory_layout: planned (ganfw_alloc_set_layout); all 0 without a layout */
  int64_t arena_bytes;     /* the arena's size */
  int64_t num_planned;     /* requests served at their planned offset */
  int64_t num_unplanned;   /* requests of a step that left the plan, served by the cache */
  int64_t planned_steps;   /* steps that followed the plan to their end */
  int64_t unplanned_steps; /* steps that left it (or could not start on it) */
} ganfw_alloc_stats;

/* Creates an allocator over `be` (borrowed; it must outlive the allocator). opt may be
 * NULL (defaults). *out is owned by the caller: ganfw_alloc_destroy. */
ganfw_status ganfw_alloc_create(ganfw_backend *be, const ganfw_alloc_options *opt,
                                ganfw_alloc **out);
void ganfw_alloc_destroy(ganfw_alloc *a); /* accepts NULL; releases every segment */

/* A block of at least `bytes` (rounded, see above) for `category` (GANFW_MEM_*). `owner`
 * names the layer/tensor, is borrowed (it must outlive the block) and may be NULL. On
 * failure *ptr is NULL: GANFW_ERR_OOM (see ganfw_alloc_last_oom) or
 * GANFW_ERR_INVALID_ARG. The block is valid until ganfw_alloc_free. */
ganfw_status ganfw_alloc_malloc(ganfw_alloc *a, size_t bytes, int32_t category, const char *owner,
                                void **ptr);
/* NULL ok. A pointer this allocator did not hand out (or a double free) is a programmer
 * error: it is reported on stderr and ignored. */
void ganfw_alloc_free(ganfw_alloc *a, void *ptr);
/* Releases every cached segment that holds no allocated block. */
void ganfw_alloc_empty_cache(ganfw_alloc *a);
/* Sets every peak (bytes, per category and counts) to its current value. */
void ganfw_alloc_reset_peak(ganfw_alloc *a);
/* A second pair of peaks, of allocated and reserved bytes, over a window that only
 * ganfw_alloc_reset_window_peak starts (first: at create): a training run's peaks since
 * its last logged row (metrics.csv's peak_allocated, peak_reserved), as PyTorch users take
 * max_memory_allocated and reset_peak_memory_stats per epoch. ganfw_alloc_reset_peak,
 * which planners and the evaluation call, leaves them alone. `a` may be NULL (0, 0). */
void ganfw_alloc_window_peak(const ganfw_alloc *a, int64_t *allocated, int64_t *reserved);
/* Starts a new window: its peaks become the current allocated and reserved bytes. */
void ganfw_alloc_reset_window_peak(ganfw_alloc *a);
void ganfw_alloc_get_stats(const ganfw_alloc *a, ganfw_alloc_stats *out);
/* The cap on reserved bytes the allocator enforces (after any adjustment by the context);
 * 0 when there is none. */
size_t ganfw_alloc_memory_limit(const ganfw_alloc *a);
/* The rounded size of a live block; 0 when ptr is not a live block of `a`. */
size_t ganfw_alloc_block_size(const ganfw_alloc *a, const void *ptr);

/* The rounding rules, for planners that must predict what the allocator will hold. */
size_t ganfw_alloc_round_size(size_t bytes);     /* 512-byte multiple, 0 -> 512 */
size_t ganfw_alloc_segment_size(size_t rounded); /* the segment a new request gets */

/* A table like torch.cuda.memory_summary(): bytes and counts (Cur Usage / Peak Usage),
 * then per category, then the retry and OOM counters. */
void ganfw_alloc_memory_summary(const ganfw_alloc *a, FILE *out);

/* "param", "grad", "optim_state", "activation", "workspace", "data", "other", "comm"; "?" outside
 * the range. Static strings. */
const char *ganfw_mem_category_name(int32_t category);
int32_t ganfw_mem_category_from_name(const char *name); /* -1 if unknown */

/* --- OOM report ---------------------------------------------------------------------- */
#define GANFW_OOM_TOP 5
typedef struct ganfw_oom_owner {
  const char *owner; /* a copy owned by the allocator, valid until the next OOM or destroy;
                        "(unnamed)" for blocks allocated without an owner */
  int32_t category;
  int64_t bytes; /* live bytes of (owner, category) */
} ganfw_oom_owner;

typedef struct ganfw_oom_report {
  int64_t requested;                  /* rounded bytes of the failed request */
  int32_t req_category;               /* its category */
  int32_t limited;                    /* 1 when capacity is the memory_limit */
  const char *req_owner;              /* its owner (a copy, as for top[]); "" when none */
  int64_t capacity;                   /* memory_limit when set, else the device total; 0 unknown */
  int64_t free_bytes;                 /* capacity - reserved (limit) or the device's free bytes */
  int64_t allocated;                  /* bytes in live blocks */
  int64_t reserved;                   /* bytes in segments (after the retry released the cache) */
  int64_t reserved_unallocated;       /* reserved - allocated */
  int64_t largest_free_block;         /* within reserved */
  double fragmentation;               /* 1 - largest_free_block / reserved_unallocated */
  int64_t category[GANFW_MEM_COUNT];  /* allocated bytes per category */
  ganfw_oom_owner top[GANFW_OOM_TOP]; /* biggest holders, largest first */
  int32_t n_top;
  /* why no block could be had: the request's pool and what its cache held, the segment a
   * new one would take, and what refused it */
  int32_t cause;          /* GANFW_OOM_CAUSE_* */
  int32_t large_pool;     /* 1: the request is served by the large pool (> 1 MiB, or a
                             planned layout); 0: the small pool */
  int64_t segment_bytes;  /* the new segment the request needed (0: beyond any device) */
  int64_t pool_free;      /* cached free bytes of the request's pool */
  int64_t pool_largest;   /* its largest free block */
  int64_t other_free;     /* cached free bytes of the other pool, which it cannot use */
  int64_t max_split_size; /* the allocator's (0: unlimited) */
} ganfw_oom_report;

/* ganfw_oom_report.cause: what refused the new segment the request needed. Whether the
 * request's pool is fragmented (its free bytes would hold the request, no block does) is
 * apart: pool_free >= requested > pool_largest. */
enum {
  GANFW_OOM_CAUSE_UNKNOWN = 0, /* not diagnosed (a report not made by the allocator) */
  GANFW_OOM_CAUSE_LIMIT,       /* reserved + the segment would pass memory_limit */
  GANFW_OOM_CAUSE_DEVICE,      /* the backend's raw_alloc refused the segment */
  GANFW_OOM_CAUSE_TOO_LARGE,   /* the request alone is larger than memory_limit, or than any
                                  device holds */
  GANFW_OOM_CAUSE_COUNT
};

/* Copies the latest OOM's report into *out and returns 1; 0 when none happened. */
int ganfw_alloc_last_oom(const ganfw_alloc *a, ganfw_oom_report *out);
/* Writes the report as text ("out of memory: tried to allocate 20.00 MiB (device
 * capacity ..., ... free; ... allocated by ganfw, ... reserved but unallocated). ...")
 * into buf (always NUL-terminated when n > 0), then lets the OOM hook append. `a` may be
 * NULL (no hook). */
void ganfw_oom_report_format(const ganfw_alloc *a, const ganfw_oom_report *r, char *buf, size_t n);
/* The hook is called while a report is formatted, with buf pointing at the end of the
 * text so far and n the room left there (n >= 1); it writes a NUL-terminated string,
 * e.g. advice lines ("batch 32 would fit with amp: ..."). fn NULL removes the hook. */
typedef void (*ganfw_oom_hook)(void *ud, const ganfw_oom_report *r, char *buf, size_t n);
void ganfw_alloc_set_oom_hook(ganfw_alloc *a, ganfw_oom_hook fn, void *ud);

/* --- inspection for planners (core/src/plan/probe.c) ----------------------------------------
 * Calls fn once per live block with its address, rounded size, category and owner (NULL
 * when unnamed; borrowed, valid during the call). Order unspecified. O(live blocks). */
typedef void (*ganfw_alloc_block_fn)(void *ud, const void *ptr, size_t size, int32_t category,
                                     const char *owner);
void ganfw_alloc_for_each_block(const ganfw_alloc *a, ganfw_alloc_block_fn fn, void *ud);
/* fn is called at the end of every ganfw_alloc_malloc that raised allocated.peak (after
 * the block is counted), e.g. to record who holds the bytes at the peak with
 * ganfw_alloc_for_each_block. fn NULL removes it; when none is set this costs one branch. */
typedef void (*ganfw_alloc_peak_fn)(void *ud, const ganfw_alloc *a);
void ganfw_alloc_set_peak_hook(ganfw_alloc *a, ganfw_alloc_peak_fn fn, void *ud);

/* --- trace ------------------------------------------------------------------------- */
/* Writes {"stats": {...}, "trace": {"enabled": .., "dropped": .., "events": [...]}} where
 * each event is {"t_ns", "kind" (alloc|free|segment_alloc|segment_free|oom), "ptr" (hex
 * address), "offset" (from its segment's base), "size", "category", "owner"}.
 * GANFW_ERR_IO when the stream reports an error. */
ganfw_status ganfw_alloc_trace_write_json(const ganfw_alloc *a, FILE *out);
/* The same with `more` (NULL: none), one or more `"key": value` members, after "trace". */
ganfw_status ganfw_alloc_write_json(const ganfw_alloc *a, FILE *out, const char *more);
/* Events currently kept (0 when tracing is off). */
size_t ganfw_alloc_trace_length(const ganfw_alloc *a);
/* 1 while events are being recorded (trace on and its trace_steps not yet passed). */
int32_t ganfw_alloc_tracing(const ganfw_alloc *a);
/* A step begins: with tracing on, records a GANFW_TEV_STEP event (step >= 1) and one
 * GANFW_TEV_LIVE event per live block (ordered by address), so each step's events stand
 * alone. The step after trace_steps recorded ones stops the recording for good (the events
 * kept stay). Stage and pass are reset to setup. One branch with tracing off. */
void ganfw_alloc_trace_step(ganfw_alloc *a, int64_t step);
/* The step ends: a GANFW_TEV_STEP event with step 0 (what follows, samples and checkpoints,
 * is between steps); after the last of trace_steps steps the recording stops here. */
void ganfw_alloc_trace_step_end(ganfw_alloc *a);
/* What the run is doing now, stamped on every later event: a GANFW_STAGE_* and a
 * GANFW_PASS_*. Each returns the previous value, for the caller to put back. Cheap stores,
 * traced or not. */
int32_t ganfw_alloc_set_stage(ganfw_alloc *a, int32_t stage);
int32_t ganfw_alloc_set_pass(ganfw_alloc *a, int32_t pass);
/* A layer's work begins (begin 1) or ends (0), for the op slices of the Chrome trace;
 * `layer` borrowed for the call (interned). No-op unless tracing. */
void ganfw_alloc_trace_op(ganfw_alloc *a, int32_t begin, const char *layer);
/* The kept events, oldest first, as a new array *out of *n (free() it); owners point into
 * the allocator's interned names (valid until ganfw_alloc_destroy). *out NULL and *n 0
 * when there are none; GANFW_ERR_OOM when the host has no memory for the copy. */
ganfw_status ganfw_alloc_trace_copy(const ganfw_alloc *a, ganfw_trace_event **out, int64_t *n);

/* --- planned layout (device.memory_layout: planned) ----------------------------------------
 * One step's requests in order, as a traced plan of the step saw them (plan/layout.c): a
 * step-local block gets an offset in one arena, laid out offline so that blocks that live
 * at the same time never overlap; the others (persistent tensors, blocks the step keeps)
 * are served by the caching allocator as usual. ganfw_alloc_set_layout reserves one
 * segment of base_bytes + arena_bytes (rounded up to 2 MiB) with the arena at its top;
 * everything the cache serves packs from its bottom, and with a layout every request goes
 * to the large pool, split down to 512 bytes, so that no small-pool segment holds slack.
 * From step from_step on, each step (ganfw_alloc_trace_step .. _step_end) holds the arena
 * span and serves its k-th request at base + offset[k] when the request has the planned
 * rounded size and category and every block the layout placed at those bytes before it
 * has been freed; the first request that differs (a shape that depends on the data, a
 * block freed later than planned) ends the plan for the rest of that step: it and all
 * later ones go to the cache, with one log line per run, and it is counted
 * (num_unplanned, unplanned_steps). The arena span goes back to the cache when the step
 * has ended and its last planned block is freed, so that what runs between steps (sample
 * grids, evaluation) can use it. Every planned step uses the same addresses. Under
 * AddressSanitizer on the CPU the arena's bytes outside live planned blocks are poisoned
 * while a step holds it. */
typedef struct ganfw_alloc_layout {
  int64_t n;           /* requests of one step */
  const int64_t *size; /* [n] rounded bytes */
  const int32_t *category;
  const int64_t *offset; /* [n] in the arena, or -1: the caching allocator serves it */
  int64_t arena_bytes;   /* 512-byte multiple */
  int64_t base_bytes;    /* room below the arena for what the cache serves */
  int64_t from_step;     /* the first step (as ganfw_alloc_trace_step numbers them) */
} ganfw_alloc_layout;

/* Copies the layout and reserves its segment. GANFW_ERR_INVALID_ARG for a layout that is not
 * one (an offset outside the arena, a size that is not a 512-byte multiple, a bad category)
 * or when the allocator already has one or holds blocks; GANFW_ERR_OOM when the segment
 * cannot be had. */
ganfw_status ganfw_alloc_set_layout(ganfw_alloc *a, const ganfw_alloc_layout *l);
/* Where a step's request of `size` rounded bytes and `category` stands in the layout when the
 * step's next planned request is k: k itself when it matches, else the first match among
 * the next GANFW_LAYOUT_LOOKAHEAD (planned requests the step skipped), else -1 (a request
 * the plan does not have: the cache serves it and the plan goes on at k). */
#define GANFW_LAYOUT_LOOKAHEAD 8
int64_t ganfw_alloc_layout_match(const ganfw_alloc_layout *l, int64_t k, int64_t size,
                                 int32_t category);
/* A step that leaves out a section the layout recorded (a lazy penalty on the steps between
 * its turns): the next `requests` planned requests are passed over, so that the step's
 * later requests meet their planned places. Nothing without a layout or outside a step. */
void ganfw_alloc_arena_skip(ganfw_alloc *a, int64_t requests);
/* The arena's first byte; NULL without a layout. */
const void *ganfw_alloc_arena_base(const ganfw_alloc *a);

/* --- testing ---------------------------------------------------------------------------
 * Walks every structure and checks: segments tile their blocks exactly and do not overlap,
 * no two adjacent free blocks, every free block is in its pool's tree (ordered, heap
 * property) and every allocated one in the pointer map, allocated/reserved/inactive_split/
 * per-category/count stats equal the sums they stand for, peaks >= currents, reserved <=
 * memory_limit. Returns 0, or -1 with the first violation recorded as the error message
 * (GANFW_ERR_INTERNAL). O(n log n). */
int ganfw_alloc_check_invariants(const ganfw_alloc *a);

#endif
