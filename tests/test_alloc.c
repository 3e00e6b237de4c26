/* The caching allocator against a simple model of its rules (alloc.h): rounding, pools
 * and segment sizes, best fit, split thresholds, merging, max_split_size, memory_limit,
 * the retry ladder, OOM reports, stats, the trace, and a long random sequence checked
 * after every operation. Runs on a fake backend with a simulated capacity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "base/error.h"
#include "testutil.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* --- a fake backend: real (untouched) memory, a simulated device capacity ------------- */

#define FAKE_MAX_RAW 4096
typedef struct fake_be {
  ganfw_backend be; /* first: the allocator sees &f->be */
  ganfw_backend_vt vt;
  size_t capacity; /* raw_alloc fails when used + bytes would pass it */
  size_t used;
  int fail_all;    /* refuse every raw_alloc */
  int virtual_mem; /* hand out fake, never-dereferenced addresses (huge devices) */
  uintptr_t next_addr;
  int64_t n_alloc_calls, n_allocs, n_frees, bad_frees;
  void *raw_ptr[FAKE_MAX_RAW];
  size_t raw_size[FAKE_MAX_RAW];
} fake_be;

static void *fake_raw_alloc(ganfw_backend *be, size_t bytes) {
  fake_be *f = (fake_be *)be;
  f->n_alloc_calls++;
  if (f->fail_all || f->used + bytes > f->capacity) return NULL;
  void *p;
  if (f->virtual_mem) {
    p = (void *)f->next_addr;
    f->next_addr += bytes + (64 << 20); /* a gap: segments are never adjacent */
  } else {
    p = aligned_alloc(4096, bytes);
  }
  if (!p) return NULL;
  for (int i = 0; i < FAKE_MAX_RAW; i++)
    if (!f->raw_ptr[i]) {
      f->raw_ptr[i] = p;
      f->raw_size[i] = bytes;
      f->used += bytes;
      f->n_allocs++;
      return p;
    }
  free(p);
  return NULL;
}

static void fake_raw_free(ganfw_backend *be, void *ptr, size_t bytes) {
  fake_be *f = (fake_be *)be;
  for (int i = 0; i < FAKE_MAX_RAW; i++)
    if (f->raw_ptr[i] == ptr) {
      if (f->raw_size[i] != bytes) f->bad_frees++;
      f->used -= f->raw_size[i];
      f->raw_ptr[i] = NULL;
      f->n_frees++;
      if (!f->virtual_mem) free(ptr);
      return;
    }
  f->bad_frees++;
}

static ganfw_status fake_capacity(ganfw_backend *be, size_t *total, size_t *free_bytes) {
  fake_be *f = (fake_be *)be;
  *total = f->capacity;
  *free_bytes = f->capacity - f->used;
  return GANFW_OK;
}

static fake_be *fake_new(size_t capacity) {
  fake_be *f = calloc(1, sizeof *f);
  f->vt.name = "fake";
  f->vt.raw_alloc = fake_raw_alloc;
  f->vt.raw_free = fake_raw_free;
  f->vt.capacity = fake_capacity;
  f->be.vt = &f->vt;
  f->capacity = capacity;
  f->next_addr = (uintptr_t)1 << 44;
  return f;
}

/* An allocator over a fresh fake device; `opt` may be NULL. */
static ganfw_alloc *mk(fake_be **fout, size_t capacity, const ganfw_alloc_options *opt) {
  fake_be *f = fake_new(capacity);
  ganfw_alloc *a = NULL;
  ganfw_status st = ganfw_alloc_create(&f->be, opt, &a);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  *fout = f;
  return a;
}

/* Destroys both and checks the device got every segment back with its size. */
static void done(ganfw_alloc *a, fake_be *f) {
  CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
  ganfw_alloc_destroy(a);
  CU_ASSERT_EQUAL(f->used, 0);
  CU_ASSERT_EQUAL(f->n_allocs, f->n_frees);
  CU_ASSERT_EQUAL(f->bad_frees, 0);
  free(f);
}

static void *xmalloc(ganfw_alloc *a, size_t bytes, int32_t cat, const char *owner) {
  void *p = NULL;
  ganfw_status st = ganfw_alloc_malloc(a, bytes, cat, owner, &p);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  if (st != GANFW_OK) fprintf(stderr, "unexpected failure: %s\n", ganfw_error_message());
  CU_ASSERT_PTR_NOT_NULL(p);
  return p;
}

static ganfw_alloc_stats stats(const ganfw_alloc *a) {
  ganfw_alloc_stats s;
  ganfw_alloc_get_stats(a, &s);
  return s;
}

static void check_inv(const ganfw_alloc *a) {
  int r = ganfw_alloc_check_invariants(a);
  CU_ASSERT_EQUAL(r, 0);
  if (r != 0) fprintf(stderr, "%s\n", ganfw_error_message());
}

/* --- rules ---------------------------------------------------------------------------- */

static void test_rounding(void) {
  CU_ASSERT_EQUAL(ganfw_alloc_round_size(0), 512);
  CU_ASSERT_EQUAL(ganfw_alloc_round_size(1), 512);
  CU_ASSERT_EQUAL(ganfw_alloc_round_size(512), 512);
  CU_ASSERT_EQUAL(ganfw_alloc_round_size(513), 1024);
  CU_ASSERT_EQUAL(ganfw_alloc_round_size(MiB + 1), MiB + 512);
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  size_t req[] = {0, 1, 511, 512, 513, 1000, 4097, 100000};
  int64_t sum = 0;
  void *p[8];
  for (int i = 0; i < 8; i++) {
    p[i] = xmalloc(a, req[i], GANFW_MEM_OTHER, NULL);
    size_t want = req[i] <= 512 ? 512 : (req[i] + 511) / 512 * 512;
    CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, p[i]), want);
    sum += (int64_t)want;
  }
  ganfw_alloc_stats s = stats(a);
  CU_ASSERT_EQUAL(s.allocated.current, sum);
  CU_ASSERT_EQUAL(s.num_allocs, 8);
  CU_ASSERT_EQUAL(s.allocations.current, 8);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, (char *)p[0] + 1), 0); /* not a block start */
  for (int i = 0; i < 8; i++) ganfw_alloc_free(a, p[i]);
  CU_ASSERT_EQUAL(stats(a).allocated.current, 0);
  CU_ASSERT_EQUAL(stats(a).num_frees, 8);
  done(a, f);
}

static void test_pool_segment_sizes(void) {
  CU_ASSERT_EQUAL(ganfw_alloc_segment_size(512), 2 * MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_segment_size(MiB), 2 * MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_segment_size(MiB + 512), 20 * MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_segment_size(10 * MiB - 512), 20 * MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_segment_size(10 * MiB), 10 * MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_segment_size(11 * MiB), 12 * MiB);
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  struct {
    size_t bytes;
    int64_t reserved;
    int64_t segments;
  } steps[] = {
      {KiB, 2, 1},             /* small: a 2 MiB segment */
      {64 * KiB, 2, 1},        /* fits in it */
      {MiB, 2, 1},             /* 1 MiB is still small; 2 MiB - 65 KiB left */
      {MiB, 4, 2},             /* does not fit: a second small segment */
      {10 * MiB, 14, 3},       /* 10 MiB: exactly 10 MiB */
      {11 * MiB, 26, 4},       /* rounded to 12 MiB (1 MiB rest: not split) */
      {20 * MiB + 1, 48, 5},   /* rounded to 22 MiB; 2 MiB - 512 rest split off */
      {5 * MiB, 68, 6},        /* large, under 10 MiB: a 20 MiB segment */
      {13 * MiB + 512, 68, 6}, /* fits in its 15 MiB rest */
      {MiB + 1, 68, 6}         /* fits in the 22 MiB segment's 2 MiB - 512 rest */
  };
  void *p[10];
  for (int i = 0; i < 10; i++) {
    p[i] = xmalloc(a, steps[i].bytes, GANFW_MEM_ACTIVATION, "x");
    ganfw_alloc_stats s = stats(a);
    CU_ASSERT_EQUAL(s.reserved.current, steps[i].reserved * (int64_t)MiB);
    CU_ASSERT_EQUAL(s.num_segments, steps[i].segments);
    if (s.num_segments != steps[i].segments) fprintf(stderr, "pool step %d\n", i);
    check_inv(a);
  }
  /* small requests never land in a large segment and vice versa */
  CU_ASSERT_EQUAL(f->n_allocs, 6);
  for (int i = 0; i < 10; i++) ganfw_alloc_free(a, p[i]);
  CU_ASSERT_EQUAL(stats(a).reserved.current, 68 * (int64_t)MiB); /* cached */
  ganfw_alloc_empty_cache(a);
  CU_ASSERT_EQUAL(stats(a).reserved.current, 0);
  CU_ASSERT_EQUAL(stats(a).num_segments, 0);
  CU_ASSERT_EQUAL(f->used, 0);
  done(a, f);
}

static void test_small_and_large_pools_separate(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  void *big = xmalloc(a, 2 * MiB, GANFW_MEM_DATA, NULL); /* large: 20 MiB segment, 18 free */
  void *small = xmalloc(a, 4 * KiB, GANFW_MEM_DATA, NULL);
  ganfw_alloc_stats s = stats(a);
  CU_ASSERT_EQUAL(s.num_segments, 2); /* the small one did not use the large free block */
  CU_ASSERT_EQUAL(s.reserved.current, 22 * (int64_t)MiB);
  ganfw_alloc_free(a, small);
  void *big2 = xmalloc(a, MiB + 512, GANFW_MEM_DATA, NULL); /* large; cached small ignored */
  CU_ASSERT_EQUAL(stats(a).num_segments, 2);
  CU_ASSERT_PTR_EQUAL(big2, (char *)big + 2 * MiB);
  ganfw_alloc_free(a, big);
  ganfw_alloc_free(a, big2);
  done(a, f);
}

static void test_best_fit(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  /* one small segment: A4 B8 C4 D16 E4 F12 G4 H8 I4 (KiB), then the free tail */
  size_t sz[] = {4, 8, 4, 16, 4, 12, 4, 8, 4};
  void *p[9];
  for (int i = 0; i < 9; i++) p[i] = xmalloc(a, sz[i] * KiB, GANFW_MEM_OTHER, NULL);
  for (int i = 1; i < 9; i++) CU_ASSERT_PTR_EQUAL(p[i], (char *)p[i - 1] + sz[i - 1] * KiB);
  ganfw_alloc_free(a, p[1]); /* 8 KiB hole, low address */
  ganfw_alloc_free(a, p[3]); /* 16 KiB hole */
  ganfw_alloc_free(a, p[5]); /* 12 KiB hole */
  ganfw_alloc_free(a, p[7]); /* 8 KiB hole, high address */
  check_inv(a);
  void *q = xmalloc(a, 10 * KiB, GANFW_MEM_OTHER, NULL); /* smallest fitting: the 12 */
  CU_ASSERT_PTR_EQUAL(q, p[5]);
  void *r = xmalloc(a, 8 * KiB, GANFW_MEM_OTHER, NULL); /* two 8s: the lower address */
  CU_ASSERT_PTR_EQUAL(r, p[1]);
  void *t = xmalloc(a, 7 * KiB, GANFW_MEM_OTHER, NULL); /* the other 8 */
  CU_ASSERT_PTR_EQUAL(t, p[7]);
  void *u = xmalloc(a, 14 * KiB, GANFW_MEM_OTHER, NULL); /* the 16 */
  CU_ASSERT_PTR_EQUAL(u, p[3]);
  /* 2 KiB holes remain after the 10 KiB in the 12 and after the 14 KiB in the 16: the
   * lower address (in the 16) wins */
  void *v = xmalloc(a, 2 * KiB, GANFW_MEM_OTHER, NULL);
  CU_ASSERT_PTR_EQUAL(v, (char *)p[3] + 14 * KiB);
  CU_ASSERT_EQUAL(stats(a).num_segments, 1);
  check_inv(a);
  done(a, f);
}

static void test_split_thresholds(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  /* small pool: a remainder of exactly 512 B is split off */
  void *p1 = xmalloc(a, MiB, GANFW_MEM_OTHER, NULL);
  void *p = xmalloc(a, MiB - 512, GANFW_MEM_OTHER, NULL);
  CU_ASSERT_PTR_EQUAL(p, (char *)p1 + MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, p), MiB - 512);
  CU_ASSERT_EQUAL(stats(a).inactive_split.current, 512);
  void *q = xmalloc(a, 1, GANFW_MEM_OTHER, NULL);
  CU_ASSERT_PTR_EQUAL(q, (char *)p1 + 2 * MiB - 512);
  CU_ASSERT_EQUAL(stats(a).num_segments, 1);
  CU_ASSERT_EQUAL(stats(a).inactive_split.current, 0);
  ganfw_alloc_free(a, p);
  ganfw_alloc_free(a, q);
  ganfw_alloc_free(a, p1);

  /* large pool: remainder 1 MiB is not split (needs > 1 MiB), 1.5 MiB is */
  void *base = xmalloc(a, 2 * MiB, GANFW_MEM_OTHER, NULL); /* 20 MiB segment, 18 MiB free */
  void *x = xmalloc(a, 17 * MiB, GANFW_MEM_OTHER, NULL);   /* takes the 18, remainder 1 */
  CU_ASSERT_PTR_EQUAL(x, (char *)base + 2 * MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, x), 18 * MiB);
  CU_ASSERT_EQUAL(stats(a).allocated.current, 20 * (int64_t)MiB);
  ganfw_alloc_free(a, x);
  void *y = xmalloc(a, 16 * MiB + 512 * KiB, GANFW_MEM_OTHER, NULL); /* remainder 1.5 MiB */
  CU_ASSERT_PTR_EQUAL(y, (char *)base + 2 * MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, y), 16 * MiB + 512 * KiB);
  CU_ASSERT_EQUAL(stats(a).inactive_split.current, (int64_t)(MiB + 512 * KiB));
  void *z = xmalloc(a, MiB + 512 * KiB, GANFW_MEM_OTHER, NULL); /* the remainder, exactly */
  CU_ASSERT_PTR_EQUAL(z, (char *)y + 16 * MiB + 512 * KiB);
  CU_ASSERT_EQUAL(stats(a).num_segments, 2);
  check_inv(a);
  done(a, f);
}

static void test_merge(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  void *p0 = xmalloc(a, 4 * MiB, GANFW_MEM_OTHER, NULL); /* 20 MiB segment */
  void *p1 = xmalloc(a, 4 * MiB, GANFW_MEM_OTHER, NULL);
  void *p2 = xmalloc(a, 4 * MiB, GANFW_MEM_OTHER, NULL);
  CU_ASSERT_EQUAL(stats(a).num_segments, 1);
  CU_ASSERT_EQUAL(stats(a).inactive_split.current, 8 * (int64_t)MiB); /* the tail */
  ganfw_alloc_free(a, p1); /* middle: no free neighbour */
  CU_ASSERT_EQUAL(stats(a).inactive_split.current, 12 * (int64_t)MiB);
  CU_ASSERT_EQUAL(stats(a).largest_free_block, 8 * (int64_t)MiB);
  check_inv(a);
  ganfw_alloc_free(a, p0); /* merges with p1 */
  CU_ASSERT_EQUAL(stats(a).largest_free_block, 8 * (int64_t)MiB);
  check_inv(a);
  ganfw_alloc_free(a, p2); /* merges with both sides: one 20 MiB block */
  ganfw_alloc_stats s = stats(a);
  CU_ASSERT_EQUAL(s.largest_free_block, 20 * (int64_t)MiB);
  CU_ASSERT_EQUAL(s.inactive_split.current, 0);              /* a whole segment is not a split */
  CU_ASSERT_EQUAL(s.inactive_split.peak, 16 * (int64_t)MiB); /* the tail after p0 */
  CU_ASSERT_DOUBLE_EQUAL(s.fragmentation, 0.0, 1e-12);
  void *all = xmalloc(a, 20 * MiB, GANFW_MEM_OTHER, NULL); /* reuses the whole segment */
  CU_ASSERT_PTR_EQUAL(all, p0);
  CU_ASSERT_EQUAL(stats(a).num_segments, 1);
  CU_ASSERT_EQUAL(f->n_allocs, 1);
  ganfw_alloc_free(a, all);

  /* small pool: the same, then a 1 MiB request twice from the merged 2 MiB */
  void *s0 = xmalloc(a, 100 * KiB, GANFW_MEM_OTHER, NULL);
  void *s1 = xmalloc(a, 200 * KiB, GANFW_MEM_OTHER, NULL);
  void *s2 = xmalloc(a, 300 * KiB, GANFW_MEM_OTHER, NULL);
  ganfw_alloc_free(a, s1);
  ganfw_alloc_free(a, s2);
  ganfw_alloc_free(a, s0);
  void *m0 = xmalloc(a, MiB, GANFW_MEM_OTHER, NULL);
  void *m1 = xmalloc(a, MiB, GANFW_MEM_OTHER, NULL);
  CU_ASSERT_PTR_EQUAL(m0, s0);
  CU_ASSERT_PTR_EQUAL(m1, (char *)s0 + MiB);
  CU_ASSERT_EQUAL(stats(a).num_segments, 2);
  check_inv(a);
  done(a, f);
}

/* Blocks of very different sizes (size classes spanning octaves up to GiB) on a device
 * with fake addresses: best fit still picks the smallest block that fits. */
static void test_best_fit_huge(void) {
  const size_t GiB = (size_t)1 << 30;
  fake_be *f = fake_new(64 * GiB);
  f->virtual_mem = 1;
  ganfw_alloc *a = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_create(&f->be, NULL, &a), GANFW_OK);
  size_t sz[] = {100 * MiB, 300 * MiB, GiB, 3 * GiB, 16 * GiB + 2 * MiB, 300 * MiB + 2 * MiB};
  void *p[6];
  for (int i = 0; i < 6; i++) p[i] = xmalloc(a, sz[i], GANFW_MEM_DATA, NULL);
  for (int i = 0; i < 6; i++) ganfw_alloc_free(a, p[i]);
  CU_ASSERT_EQUAL(stats(a).largest_free_block, (int64_t)(16 * GiB + 2 * MiB));
  struct {
    size_t req;
    int want;
  } cases[] = {{250 * MiB, 1}, {90 * MiB, 0},        {GiB, 2},
               {2 * GiB, 3},   {300 * MiB + 512, 5}, {10 * GiB, 4}};
  void *q[6];
  for (int i = 0; i < 6; i++) {
    q[i] = xmalloc(a, cases[i].req, GANFW_MEM_DATA, NULL);
    CU_ASSERT_PTR_EQUAL(q[i], p[cases[i].want]);
  }
  CU_ASSERT_EQUAL(stats(a).num_segments, 6);
  void *more = xmalloc(a, 17 * GiB, GANFW_MEM_DATA, NULL); /* nothing cached fits */
  CU_ASSERT_EQUAL(stats(a).num_segments, 7);
  check_inv(a);
  ganfw_alloc_free(a, more);
  for (int i = 0; i < 6; i++) ganfw_alloc_free(a, q[i]);
  done(a, f);
}

static void test_max_split_size(void) {
  ganfw_alloc_options bad = {.max_split_size = 8 * MiB};
  fake_be *f = fake_new(1024 * MiB);
  ganfw_alloc *a = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_create(&f->be, &bad, &a), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(a);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "max_split_size"));
  free(f);

  ganfw_alloc_options opt = {.max_split_size = 32 * MiB};
  a = mk(&f, 4096 * MiB, &opt);
  void *big = xmalloc(a, 40 * MiB, GANFW_MEM_OTHER, NULL);
  ganfw_alloc_free(a, big);                              /* a cached oversize 40 MiB block */
  void *s8 = xmalloc(a, 8 * MiB, GANFW_MEM_OTHER, NULL); /* below max_split: not the 40 */
  CU_ASSERT_EQUAL(stats(a).num_segments, 2);
  CU_ASSERT_PTR_NOT_EQUAL(s8, big);
  void *s30 = xmalloc(a, 30 * MiB, GANFW_MEM_OTHER, NULL); /* still below: a new segment */
  CU_ASSERT_PTR_NOT_EQUAL(s30, big);
  CU_ASSERT_EQUAL(stats(a).num_segments, 3);
  void *s36 = xmalloc(a, 36 * MiB, GANFW_MEM_OTHER, NULL); /* >= max_split, 40 < 36+20 */
  CU_ASSERT_PTR_EQUAL(s36, big);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, s36), 40 * MiB); /* never split */
  CU_ASSERT_EQUAL(stats(a).num_segments, 3);
  ganfw_alloc_free(a, s36);
  ganfw_alloc_free(a, s8);
  ganfw_alloc_free(a, s30);
  ganfw_alloc_empty_cache(a);
  CU_ASSERT_EQUAL(stats(a).num_segments, 0);

  void *b60 = xmalloc(a, 60 * MiB, GANFW_MEM_OTHER, NULL);
  ganfw_alloc_free(a, b60);
  void *r34 = xmalloc(a, 34 * MiB, GANFW_MEM_OTHER, NULL); /* 60 >= 34 + 20: refused */
  CU_ASSERT_PTR_NOT_EQUAL(r34, b60);
  CU_ASSERT_EQUAL(stats(a).num_segments, 2);
  void *r42 = xmalloc(a, 42 * MiB, GANFW_MEM_OTHER, NULL); /* 60 < 42 + 20: taken whole */
  CU_ASSERT_PTR_EQUAL(r42, b60);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, r42), 60 * MiB);
  CU_ASSERT_EQUAL(stats(a).inactive_split.current, 0);
  ganfw_alloc_free(a, r34);
  ganfw_alloc_free(a, r42);

  /* below max_split_size blocks still split as usual */
  void *m = xmalloc(a, 2 * MiB, GANFW_MEM_OTHER, NULL);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, m), 2 * MiB);
  ganfw_alloc_free(a, m);
  check_inv(a);
  done(a, f);

  /* without max_split_size the same 60 MiB block is split for a 34 MiB request */
  a = mk(&f, 4096 * MiB, NULL);
  b60 = xmalloc(a, 60 * MiB, GANFW_MEM_OTHER, NULL);
  ganfw_alloc_free(a, b60);
  r34 = xmalloc(a, 34 * MiB, GANFW_MEM_OTHER, NULL);
  CU_ASSERT_PTR_EQUAL(r34, b60);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, r34), 34 * MiB);
  CU_ASSERT_EQUAL(stats(a).num_segments, 1);
  done(a, f);
}

static void test_memory_limit(void) {
  ganfw_alloc_options opt = {.memory_limit = 30 * MiB};
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, &opt);
  void *p = xmalloc(a, 8 * MiB, GANFW_MEM_ACTIVATION, "a"); /* 20 MiB segment */
  int64_t calls = f->n_alloc_calls;
  void *q = (void *)1;
  ganfw_status st = ganfw_alloc_malloc(a, 14 * MiB, GANFW_MEM_ACTIVATION, "b", &q);
  CU_ASSERT_EQUAL(st, GANFW_ERR_OOM);
  CU_ASSERT_PTR_NULL(q);
  CU_ASSERT_EQUAL(f->n_alloc_calls, calls); /* refused before asking the device */
  ganfw_alloc_stats s = stats(a);
  CU_ASSERT_EQUAL(s.num_ooms, 1);
  CU_ASSERT_EQUAL(s.num_alloc_retries, 1);
  CU_ASSERT_TRUE(s.reserved.peak <= (int64_t)(30 * MiB));
  void *r = xmalloc(a, 10 * MiB, GANFW_MEM_ACTIVATION, "c"); /* fits in the cached 12 */
  CU_ASSERT_EQUAL(stats(a).reserved.current, 20 * (int64_t)MiB);
  ganfw_alloc_free(a, p);
  ganfw_alloc_free(a, r);
  /* 26 MiB needs the 20 MiB cache released first (20 + 26 > 30) */
  void *big = xmalloc(a, 26 * MiB, GANFW_MEM_ACTIVATION, "d");
  s = stats(a);
  CU_ASSERT_EQUAL(s.reserved.current, 26 * (int64_t)MiB);
  CU_ASSERT_EQUAL(s.num_alloc_retries, 2);
  CU_ASSERT_EQUAL(s.num_ooms, 1);
  CU_ASSERT_TRUE(s.reserved.peak <= (int64_t)(30 * MiB));
  ganfw_alloc_free(a, big);
  /* larger than the limit: OOM even with an empty cache */
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 31 * MiB, GANFW_MEM_DATA, NULL, &q), GANFW_ERR_OOM);
  CU_ASSERT_EQUAL(stats(a).num_segments, 0);
  check_inv(a);
  done(a, f);
}

static void test_retry_ladder(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 40 * MiB, NULL); /* the device itself has 40 MiB */
  void *p = xmalloc(a, 12 * MiB, GANFW_MEM_OTHER, NULL);
  void *q = xmalloc(a, 12 * MiB, GANFW_MEM_OTHER, NULL);
  void *keep = xmalloc(a, 4 * KiB, GANFW_MEM_OTHER, NULL); /* a small segment stays in use */
  ganfw_alloc_free(a, p);
  ganfw_alloc_free(a, q);
  CU_ASSERT_EQUAL(stats(a).reserved.current, 26 * (int64_t)MiB);
  void *r = xmalloc(a, 30 * MiB, GANFW_MEM_OTHER, NULL); /* 26 + 30 > 40: retry */
  ganfw_alloc_stats s = stats(a);
  CU_ASSERT_EQUAL(s.num_alloc_retries, 1);
  CU_ASSERT_EQUAL(s.num_ooms, 0);
  CU_ASSERT_EQUAL(s.num_segments, 2); /* the small one in use + the new 30 MiB */
  CU_ASSERT_EQUAL(s.reserved.current, 32 * (int64_t)MiB);
  CU_ASSERT_EQUAL(f->used, 32 * MiB);
  ganfw_alloc_free(a, r);
  ganfw_alloc_free(a, keep);
  check_inv(a);
  done(a, f);
}

static void test_oom_then_recovery(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 40 * MiB, NULL);
  void *p = xmalloc(a, 30 * MiB, GANFW_MEM_ACTIVATION, "G.main.3");
  void *q = (void *)1;
  ganfw_error_clear();
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 20 * MiB, GANFW_MEM_ACTIVATION, "G.main.4", &q),
                  GANFW_ERR_OOM);
  CU_ASSERT_PTR_NULL(q);
  CU_ASSERT_EQUAL(ganfw_error_code(), GANFW_ERR_OOM);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "tried to allocate 20.00 MiB"));
  CU_ASSERT_EQUAL(stats(a).num_ooms, 1);
  CU_ASSERT_EQUAL(stats(a).num_alloc_retries, 1);
  check_inv(a);
  ganfw_alloc_free(a, p);
  q = xmalloc(a, 20 * MiB, GANFW_MEM_ACTIVATION, "G.main.4"); /* from the cached 30 */
  CU_ASSERT_PTR_EQUAL(q, p);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, q), 20 * MiB); /* 10 MiB rest split off */
  CU_ASSERT_EQUAL(stats(a).num_ooms, 1);
  ganfw_alloc_free(a, q);
  /* a device that refuses everything: OOM, and nothing is leaked */
  f->fail_all = 1;
  ganfw_alloc_empty_cache(a);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 1, GANFW_MEM_DATA, NULL, &q), GANFW_ERR_OOM);
  f->fail_all = 0;
  q = xmalloc(a, 1, GANFW_MEM_DATA, NULL);
  ganfw_alloc_free(a, q);
  /* absurd sizes are an OOM, not an overflow */
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, SIZE_MAX, GANFW_MEM_DATA, NULL, &q), GANFW_ERR_OOM);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, SIZE_MAX - 100, GANFW_MEM_DATA, NULL, &q), GANFW_ERR_OOM);
  CU_ASSERT_EQUAL(stats(a).num_ooms, 4);
  done(a, f);
}

static void advice_hook(void *ud, const ganfw_oom_report *r, char *buf, size_t n) {
  int *calls = ud;
  (*calls)++;
  snprintf(buf, n, "\nadvice: %s would fit with amp", r->n_top ? r->top[0].owner : "?");
}

static void test_oom_report(void) {
  ganfw_alloc_options opt = {.memory_limit = 64 * MiB};
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, &opt);
  CU_ASSERT_EQUAL(ganfw_alloc_last_oom(a, NULL), 0);
  char owner_g3[] = "G.main.3";
  void *w = xmalloc(a, 8 * MiB, GANFW_MEM_PARAM, "G.w");            /* seg 20 */
  void *g = xmalloc(a, 6 * MiB, GANFW_MEM_GRAD, "G.w");             /* same seg; 6 free */
  void *a1 = xmalloc(a, 12 * MiB, GANFW_MEM_ACTIVATION, owner_g3);  /* seg 12 */
  void *a2 = xmalloc(a, 12 * MiB, GANFW_MEM_ACTIVATION, owner_g3);  /* seg 12 */
  void *d1 = xmalloc(a, 2 * MiB, GANFW_MEM_ACTIVATION, "D.main.1"); /* in the 20's rest */
  void *x = xmalloc(a, 512, GANFW_MEM_DATA, NULL);                  /* seg 2 (small) */
  void *ws = xmalloc(a, 10 * MiB, GANFW_MEM_WORKSPACE, "conv");     /* seg 10 */
  ganfw_alloc_free(a, ws); /* a cached 10 MiB segment, released by the retry */
  int hook_calls = 0;
  ganfw_alloc_set_oom_hook(a, advice_hook, &hook_calls);
  void *q = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 40 * MiB - 100, GANFW_MEM_ACTIVATION, "G.main.5", &q),
                  GANFW_ERR_OOM);
  owner_g3[0] = 'X'; /* the report holds its own copies of owner names */
  ganfw_oom_report r;
  CU_ASSERT_EQUAL(ganfw_alloc_last_oom(a, &r), 1);
  CU_ASSERT_EQUAL(r.requested, 40 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.req_category, GANFW_MEM_ACTIVATION);
  CU_ASSERT_STRING_EQUAL(r.req_owner, "G.main.5");
  CU_ASSERT_EQUAL(r.limited, 1);
  CU_ASSERT_EQUAL(r.capacity, 64 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.reserved, 46 * (int64_t)MiB); /* 20 + 12 + 12 + 2; the 10 released */
  CU_ASSERT_EQUAL(r.free_bytes, 18 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.allocated, 40 * (int64_t)MiB + 512);
  CU_ASSERT_EQUAL(r.reserved_unallocated, 6 * (int64_t)MiB - 512);
  CU_ASSERT_EQUAL(r.largest_free_block, 4 * (int64_t)MiB);
  CU_ASSERT_DOUBLE_EQUAL(r.fragmentation, 1.0 - 4.0 * MiB / (6.0 * MiB - 512), 1e-9);
  CU_ASSERT_EQUAL(r.category[GANFW_MEM_PARAM], 8 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.category[GANFW_MEM_GRAD], 6 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.category[GANFW_MEM_ACTIVATION], 26 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.category[GANFW_MEM_DATA], 512);
  CU_ASSERT_EQUAL(r.category[GANFW_MEM_WORKSPACE], 0);
  CU_ASSERT_EQUAL(r.n_top, 5);
  CU_ASSERT_STRING_EQUAL(r.top[0].owner, "G.main.3");
  CU_ASSERT_EQUAL(r.top[0].category, GANFW_MEM_ACTIVATION);
  CU_ASSERT_EQUAL(r.top[0].bytes, 24 * (int64_t)MiB);
  CU_ASSERT_STRING_EQUAL(r.top[1].owner, "G.w");
  CU_ASSERT_EQUAL(r.top[1].category, GANFW_MEM_PARAM);
  CU_ASSERT_STRING_EQUAL(r.top[2].owner, "G.w");
  CU_ASSERT_EQUAL(r.top[2].category, GANFW_MEM_GRAD);
  CU_ASSERT_STRING_EQUAL(r.top[3].owner, "D.main.1");
  CU_ASSERT_STRING_EQUAL(r.top[4].owner, "(unnamed)");
  CU_ASSERT_EQUAL(r.top[4].bytes, 512);
  CU_ASSERT_EQUAL(hook_calls, 1); /* formatting the error message called the hook */

  const char *msg = ganfw_error_message();
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "out of memory: tried to allocate 40.00 MiB"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "memory_limit 64.00 MiB, 18.00 MiB free"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "40.00 MiB allocated by ganfw"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "reserved but unallocated"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "fragmentation"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "activation 26.00 MiB"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "G.main.3 (activation) 24.00 MiB"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "advice: G.main.3 would fit with amp"));

  char buf[4096];
  ganfw_oom_report_format(NULL, &r, buf, sizeof buf); /* no allocator: no hook */
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "tried to allocate 40.00 MiB"));
  CU_ASSERT_PTR_NULL(strstr(buf, "advice"));
  ganfw_oom_report_format(a, &r, buf, sizeof buf);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "advice"));
  CU_ASSERT_EQUAL(hook_calls, 2);
  char tiny[16];
  memset(tiny, 'z', sizeof tiny);
  ganfw_oom_report_format(a, &r, tiny, sizeof tiny);
  CU_ASSERT_EQUAL(strlen(tiny), sizeof tiny - 1);
  CU_ASSERT_PTR_NULL(strstr(msg, "fragmented")); /* 6 MiB cached cannot hold 40 */
  ganfw_alloc_set_oom_hook(a, NULL, NULL);
  ganfw_alloc_free(a, w);
  ganfw_alloc_free(a, a1);
  ganfw_alloc_free(a, g);
  ganfw_alloc_free(a, a2);
  ganfw_alloc_free(a, d1);
  ganfw_alloc_free(a, x);
  done(a, f);
}

static void test_oom_fragmentation_advice(void) {
  ganfw_alloc_options opt = {.memory_limit = 40 * MiB};
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, &opt);
  void *p[5];
  for (int i = 0; i < 5; i++) p[i] = xmalloc(a, 4 * MiB, GANFW_MEM_ACTIVATION, "act");
  void *other = xmalloc(a, 20 * MiB, GANFW_MEM_PARAM, "w"); /* reserved 40 */
  ganfw_alloc_free(a, p[0]);
  ganfw_alloc_free(a, p[2]);
  ganfw_alloc_free(a, p[4]); /* 12 MiB cached in three 4 MiB holes */
  void *q = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 10 * MiB, GANFW_MEM_ACTIVATION, NULL, &q), GANFW_ERR_OOM);
  ganfw_oom_report r;
  CU_ASSERT_EQUAL(ganfw_alloc_last_oom(a, &r), 1);
  CU_ASSERT_EQUAL(r.reserved_unallocated, 12 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.largest_free_block, 4 * (int64_t)MiB);
  CU_ASSERT_DOUBLE_EQUAL(r.fragmentation, 2.0 / 3.0, 1e-12);
  CU_ASSERT_EQUAL(r.free_bytes, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "fragmentation 66.7%"));
  /* the fragmentation is named; whether max_split_size would help only a plan can say */
  CU_ASSERT_PTR_NOT_NULL(
      strstr(ganfw_error_message(), "fragmented (the largest free block is 4.00 MiB)"));
  CU_ASSERT_PTR_NULL(strstr(ganfw_error_message(), "max_split_size"));
  CU_ASSERT_EQUAL(stats(a).num_ooms, 1);
  ganfw_alloc_free(a, p[1]);
  ganfw_alloc_free(a, p[3]);
  q = xmalloc(a, 10 * MiB, GANFW_MEM_ACTIVATION, NULL); /* merged back: fits now */
  CU_ASSERT_PTR_EQUAL(q, p[0]);
  ganfw_alloc_free(a, q);
  ganfw_alloc_free(a, other);
  done(a, f);
}

static void test_empty_cache(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  void *full = xmalloc(a, 12 * MiB, GANFW_MEM_OTHER, NULL);  /* in use, whole */
  void *gone = xmalloc(a, 14 * MiB, GANFW_MEM_OTHER, NULL);  /* will be fully free */
  void *part = xmalloc(a, 4 * MiB, GANFW_MEM_OTHER, NULL);   /* 20 MiB, partly used */
  void *small = xmalloc(a, 64 * KiB, GANFW_MEM_OTHER, NULL); /* small, will be free */
  void *part2 = xmalloc(a, 4 * MiB, GANFW_MEM_OTHER, NULL);  /* in `part` */
  CU_ASSERT_EQUAL(stats(a).num_segments, 4);
  ganfw_alloc_free(a, gone);
  ganfw_alloc_free(a, small);
  ganfw_alloc_free(a, part2); /* `part` keeps one block in use */
  ganfw_alloc_empty_cache(a);
  ganfw_alloc_stats s = stats(a);
  CU_ASSERT_EQUAL(s.num_segments, 2);
  CU_ASSERT_EQUAL(s.reserved.current, 32 * (int64_t)MiB);
  CU_ASSERT_EQUAL(f->used, 32 * MiB);
  CU_ASSERT_EQUAL(s.largest_free_block, 16 * (int64_t)MiB); /* cached inside `part` */
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, full), 12 * MiB);
  check_inv(a);
  void *again = xmalloc(a, 15 * MiB, GANFW_MEM_OTHER, NULL); /* the cached rest of `part` */
  CU_ASSERT_PTR_EQUAL(again, (char *)part + 4 * MiB);
  CU_ASSERT_EQUAL(stats(a).num_segments, 2);
  ganfw_alloc_free(a, again);
  ganfw_alloc_free(a, part);
  ganfw_alloc_free(a, full);
  ganfw_alloc_empty_cache(a);
  CU_ASSERT_EQUAL(stats(a).reserved.current, 0);
  CU_ASSERT_EQUAL(stats(a).reserved.peak, 48 * (int64_t)MiB);
  done(a, f);
}

static void test_category_stats_and_peaks(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  void *p = xmalloc(a, 1000, GANFW_MEM_PARAM, "w");
  void *x1 = xmalloc(a, 4 * KiB, GANFW_MEM_ACTIVATION, "a1");
  void *x2 = xmalloc(a, 4 * KiB, GANFW_MEM_ACTIVATION, "a2");
  ganfw_alloc_free(a, x1);
  ganfw_alloc_stats s = stats(a);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_PARAM].current, 1024);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_ACTIVATION].current, 4096);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_ACTIVATION].peak, 8192);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_GRAD].peak, 0);
  CU_ASSERT_EQUAL(s.allocated.current, 1024 + 4096);
  CU_ASSERT_EQUAL(s.allocated.peak, 1024 + 8192);
  CU_ASSERT_EQUAL(s.active.current, s.allocated.current);
  CU_ASSERT_EQUAL(s.allocations.peak, 3);
  ganfw_alloc_reset_peak(a);
  s = stats(a);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_ACTIVATION].peak, 4096);
  CU_ASSERT_EQUAL(s.allocated.peak, 1024 + 4096);
  CU_ASSERT_EQUAL(s.allocations.peak, 2);
  CU_ASSERT_EQUAL(s.reserved.peak, s.reserved.current);
  CU_ASSERT_EQUAL(s.inactive_split.peak, s.inactive_split.current);
  void *g = xmalloc(a, 3000, GANFW_MEM_GRAD, "w");
  CU_ASSERT_EQUAL(stats(a).category[GANFW_MEM_GRAD].peak, 3072);
  ganfw_alloc_free(a, g);
  CU_ASSERT_EQUAL(stats(a).category[GANFW_MEM_GRAD].current, 0);
  CU_ASSERT_EQUAL(stats(a).category[GANFW_MEM_GRAD].peak, 3072);
  ganfw_alloc_free(a, p);
  ganfw_alloc_free(a, x2);
  done(a, f);
}

static void test_inactive_split_and_fragmentation(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  void *p = xmalloc(a, 512 * KiB, GANFW_MEM_OTHER, NULL);
  CU_ASSERT_EQUAL(stats(a).inactive_split.current, (int64_t)(MiB + 512 * KiB));
  void *q = xmalloc(a, 512 * KiB, GANFW_MEM_OTHER, NULL);
  CU_ASSERT_EQUAL(stats(a).inactive_split.current, (int64_t)MiB);
  ganfw_alloc_free(a, p);
  ganfw_alloc_stats s = stats(a);
  CU_ASSERT_EQUAL(s.inactive_split.current, (int64_t)(MiB + 512 * KiB));
  CU_ASSERT_EQUAL(s.largest_free_block, (int64_t)MiB);
  CU_ASSERT_DOUBLE_EQUAL(s.fragmentation, 1.0 - 1.0 / 1.5, 1e-12);
  ganfw_alloc_free(a, q);
  s = stats(a);
  CU_ASSERT_EQUAL(s.inactive_split.current, 0);
  CU_ASSERT_EQUAL(s.inactive_split.peak, (int64_t)(MiB + 512 * KiB));
  CU_ASSERT_EQUAL(s.largest_free_block, 2 * (int64_t)MiB);
  CU_ASSERT_DOUBLE_EQUAL(s.fragmentation, 0.0, 1e-12);
  done(a, f);
}

static void test_bad_calls(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  void *p = (void *)1;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 10, GANFW_MEM_COUNT, "x", &p), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 10, -1, "x", &p), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 10, GANFW_MEM_DATA, "x", NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(NULL, 10, GANFW_MEM_DATA, "x", &p), GANFW_ERR_INVALID_ARG);
  ganfw_alloc_free(a, NULL);
  ganfw_alloc_free(NULL, NULL);
  ganfw_alloc_destroy(NULL);
  p = xmalloc(a, 10, GANFW_MEM_DATA, "x");
  ganfw_alloc_free(a, p);
  ganfw_alloc_stats before = stats(a);
  fprintf(stderr, "(a double-free warning is expected next)\n");
  ganfw_alloc_free(a, p); /* double free: reported and ignored */
  ganfw_alloc_stats after = stats(a);
  CU_ASSERT_EQUAL(after.num_frees, before.num_frees);
  CU_ASSERT_EQUAL(after.allocated.current, before.allocated.current);
  CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, p), 0);
  CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(NULL), -1);
  ganfw_backend_vt novt = {0};
  ganfw_backend nobe = {&novt, NULL};
  ganfw_alloc *b = (ganfw_alloc *)1;
  CU_ASSERT_EQUAL(ganfw_alloc_create(&nobe, NULL, &b), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(b);
  done(a, f);
}

static void test_category_names(void) {
  const char *names[] = {"param",     "grad", "optim_state", "activation",
                         "workspace", "data", "other",       "comm"};
  for (int32_t c = 0; c < GANFW_MEM_COUNT; c++) {
    CU_ASSERT_STRING_EQUAL(ganfw_mem_category_name(c), names[c]);
    CU_ASSERT_EQUAL(ganfw_mem_category_from_name(names[c]), c);
  }
  CU_ASSERT_EQUAL(ganfw_mem_category_from_name("params"), -1);
  CU_ASSERT_EQUAL(ganfw_mem_category_from_name(NULL), -1);
  CU_ASSERT_STRING_EQUAL(ganfw_mem_category_name(GANFW_MEM_COUNT), "?");
}

/* The whole content of a temporary file as a string (caller frees); closes it. */
static char *slurp(FILE *t) {
  long len = ftell(t);
  char *buf = calloc((size_t)len + 1, 1);
  rewind(t);
  CU_ASSERT_EQUAL(fread(buf, 1, (size_t)len, t), (size_t)len);
  fclose(t);
  return buf;
}

static char *capture_summary(const ganfw_alloc *a) {
  FILE *t = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  ganfw_alloc_memory_summary(a, t);
  return slurp(t);
}

static void test_memory_summary(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  void *p = xmalloc(a, 3 * MiB, GANFW_MEM_OPTIM_STATE, "adam.m");
  char *s = capture_summary(a);
  const char *must[] = {"Allocated memory",
                        "Active memory",
                        "Reserved memory",
                        "Inactive split memory",
                        "Cur Usage",
                        "Peak Usage",
                        "Allocations",
                        "Segments",
                        "OOMs",
                        "retries",
                        "Largest free block",
                        "Fragmentation",
                        "param",
                        "grad",
                        "optim_state",
                        "activation",
                        "workspace",
                        "data",
                        "other",
                        "3.00 MiB",
                        "20.00 MiB"};
  for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
    CU_ASSERT_PTR_NOT_NULL(strstr(s, must[i]));
    if (!strstr(s, must[i])) fprintf(stderr, "summary lacks '%s'\n", must[i]);
  }
  free(s);
  ganfw_alloc_free(a, p);
  done(a, f);
}

static size_t count_str(const char *s, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static char *capture_json(const ganfw_alloc *a) {
  FILE *t = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(ganfw_alloc_trace_write_json(a, t), GANFW_OK);
  return slurp(t);
}

/* Braces and brackets balance outside strings, and the text is one object. */
static int json_balanced(const char *s) {
  int depth = 0, in_str = 0;
  while (*s == ' ' || *s == '\n') s++;
  if (*s != '{') return 0;
  for (; *s; s++) {
    if (in_str) {
      if (*s == '\\' && s[1])
        s++;
      else if (*s == '"')
        in_str = 0;
    } else if (*s == '"') {
      in_str = 1;
    } else if (*s == '{' || *s == '[') {
      depth++;
    } else if (*s == '}' || *s == ']') {
      if (--depth < 0) return 0;
    }
  }
  return depth == 0 && !in_str;
}

static void test_trace_json(void) {
  ganfw_alloc_options opt = {.trace = 1, .memory_limit = 40 * MiB};
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, &opt);
  void *p = xmalloc(a, 100, GANFW_MEM_PARAM, "G.\"w\"\\1");
  void *q = xmalloc(a, 12 * MiB, GANFW_MEM_ACTIVATION, "G.main.3");
  void *r = xmalloc(a, 4 * KiB, GANFW_MEM_ACTIVATION, "G.main.3");
  ganfw_alloc_free(a, q);
  void *x = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 39 * MiB, GANFW_MEM_DATA, "batch", &x), GANFW_ERR_OOM);
  ganfw_alloc_free(a, r);
  ganfw_alloc_free(a, p);
  ganfw_alloc_empty_cache(a);
  /* events: 3 alloc, 3 free, 2 segment_alloc (12 MiB + small), 2 segment_free (12 MiB by
   * the retry, small by empty_cache), 2 empty_cache (the retry's, the call's), 1 oom */
  CU_ASSERT_EQUAL(ganfw_alloc_trace_length(a), 13);
  char *j = capture_json(a);
  CU_ASSERT_TRUE(json_balanced(j));
  CU_ASSERT_EQUAL(count_str(j, "\"kind\": \"alloc\""), 3);
  CU_ASSERT_EQUAL(count_str(j, "\"kind\": \"free\""), 3);
  CU_ASSERT_EQUAL(count_str(j, "\"kind\": \"segment_alloc\""), 2);
  CU_ASSERT_EQUAL(count_str(j, "\"kind\": \"segment_free\""), 2);
  CU_ASSERT_EQUAL(count_str(j, "\"kind\": \"oom\""), 1);
  CU_ASSERT_EQUAL(count_str(j, "\"kind\": \"empty_cache\""), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"num_empty_cache\": 2"));
  CU_ASSERT_EQUAL(count_str(j, "\"owner\": \"G.main.3\""), 4);
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"owner\": \"G.\\\"w\\\"\\\\1\"")); /* escaped */
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"size\": 40894464"));              /* the OOM's 39 MiB */
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"num_ooms\": 1"));
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"allocated_bytes\": {\"current\": 0"));
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"activation\": {\"current\": 0, \"peak\": 12587008}"));
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"enabled\": true"));
  free(j);
  done(a, f);

  /* a ring: only the latest events are kept */
  ganfw_alloc_options ring = {.trace = 1, .trace_capacity = 4};
  a = mk(&f, 1024 * MiB, &ring);
  for (int i = 0; i < 5; i++) ganfw_alloc_free(a, xmalloc(a, 512, GANFW_MEM_OTHER, "o"));
  CU_ASSERT_EQUAL(ganfw_alloc_trace_length(a), 4);
  j = capture_json(a);
  CU_ASSERT_TRUE(json_balanced(j));
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"dropped\": 7")); /* 1 segment + 10 events - 4 */
  CU_ASSERT_EQUAL(count_str(j, "\"kind\""), 4);
  free(j);
  done(a, f);

  /* tracing off: stats only, no events */
  a = mk(&f, 1024 * MiB, NULL);
  ganfw_alloc_free(a, xmalloc(a, 512, GANFW_MEM_OTHER, "o"));
  CU_ASSERT_EQUAL(ganfw_alloc_trace_length(a), 0);
  j = capture_json(a);
  CU_ASSERT_TRUE(json_balanced(j));
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"enabled\": false"));
  CU_ASSERT_EQUAL(count_str(j, "\"kind\""), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"num_allocs\": 1"));
  free(j);
  done(a, f);
}

/* --- random sequence against a model ------------------------------------------------------ */

typedef struct live {
  unsigned char *p;
  size_t bytes, size;
  int32_t cat;
  unsigned char tag;
} live;

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int live_cmp(const void *x, const void *y) {
  const live *p = x, *q = y;
  return p->p < q->p ? -1 : p->p > q->p ? 1 : 0;
}

/* Model checks: live blocks disjoint, sizes rounded, sums of live sizes = stats. */
static int model_ok(const ganfw_alloc *a, live *L, int n) {
  int64_t sum = 0, cat[GANFW_MEM_COUNT] = {0};
  for (int i = 0; i < n; i++) {
    size_t bs = ganfw_alloc_block_size(a, L[i].p);
    if (bs != L[i].size || bs < ganfw_alloc_round_size(L[i].bytes) || bs % 512) return 0;
    sum += (int64_t)bs;
    cat[L[i].cat] += (int64_t)bs;
  }
  live *sorted = malloc((size_t)(n ? n : 1) * sizeof *sorted);
  memcpy(sorted, L, (size_t)n * sizeof *L);
  qsort(sorted, (size_t)n, sizeof *sorted, live_cmp);
  int ok = 1;
  for (int i = 1; i < n; i++)
    if (sorted[i - 1].p + sorted[i - 1].size > sorted[i].p) ok = 0;
  free(sorted);
  ganfw_alloc_stats s;
  ganfw_alloc_get_stats(a, &s);
  if (s.allocated.current != sum || s.allocations.current != n) ok = 0;
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    if (s.category[c].current != cat[c]) ok = 0;
  if (s.largest_free_block > s.reserved.current - s.allocated.current) ok = 0;
  return ok;
}

static void random_run(const ganfw_alloc_options *opt, size_t device, int ops, uint64_t seed,
                       int expect_ooms) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, device, opt);
  enum { MAXLIVE = 400 };
  live *L = calloc(MAXLIVE, sizeof *L);
  int n = 0, bad_inv = 0, bad_model = 0, bad_tag = 0;
  int64_t ooms = 0;
  for (int op = 0; op < ops; op++) {
    uint64_t r = rng_next(&seed);
    int do_alloc = n == 0 || (n < MAXLIVE && (r % 100) < 55);
    if ((r >> 8) % 500 == 0) {
      ganfw_alloc_empty_cache(a);
    } else if (do_alloc) {
      uint64_t k = (r >> 16) % 100;
      size_t bytes;
      if (k < 60)
        bytes = (size_t)(rng_next(&seed) % (64 * KiB)); /* small, incl. 0 */
      else if (k < 85)
        bytes = (size_t)(rng_next(&seed) % MiB) + 1;
      else if (k < 97)
        bytes = MiB + (size_t)(rng_next(&seed) % (12 * MiB));
      else
        bytes = 10 * MiB + (size_t)(rng_next(&seed) % (60 * MiB));
      int32_t cat = (int32_t)((r >> 40) % GANFW_MEM_COUNT);
      void *p = NULL;
      ganfw_status st = ganfw_alloc_malloc(a, bytes, cat, "rnd", &p);
      if (st == GANFW_ERR_OOM) {
        ooms++;
        if (p) bad_model++;
      } else if (st == GANFW_OK) {
        L[n].p = p;
        L[n].bytes = bytes;
        L[n].size = ganfw_alloc_block_size(a, p);
        L[n].cat = cat;
        L[n].tag = (unsigned char)(op & 0xff);
        L[n].p[0] = L[n].tag; /* first and last byte of the block carry a tag */
        L[n].p[L[n].size - 1] = L[n].tag;
        n++;
      } else {
        bad_model++;
      }
    } else {
      int i = (int)((r >> 16) % (uint64_t)n);
      if (L[i].p[0] != L[i].tag || L[i].p[L[i].size - 1] != L[i].tag) bad_tag++;
      ganfw_alloc_free(a, L[i].p);
      L[i] = L[--n];
    }
    if (ganfw_alloc_check_invariants(a) != 0) {
      if (bad_inv++ == 0) fprintf(stderr, "op %d: %s\n", op, ganfw_error_message());
    }
    if (!model_ok(a, L, n)) {
      if (bad_model++ == 0) fprintf(stderr, "op %d: model mismatch\n", op);
    }
  }
  CU_ASSERT_EQUAL(bad_inv, 0);
  CU_ASSERT_EQUAL(bad_model, 0);
  CU_ASSERT_EQUAL(bad_tag, 0);
  ganfw_alloc_stats s = stats(a);
  CU_ASSERT_EQUAL(s.num_ooms, ooms);
  if (expect_ooms) CU_ASSERT_TRUE(ooms > 0);
  if (!expect_ooms) CU_ASSERT_EQUAL(ooms, 0);
  if (opt && opt->memory_limit) CU_ASSERT_TRUE(s.reserved.peak <= (int64_t)opt->memory_limit);
  CU_ASSERT_TRUE(s.num_allocs > ops / 3);
  while (n > 0) ganfw_alloc_free(a, L[--n].p);
  CU_ASSERT_EQUAL(stats(a).allocated.current, 0);
  check_inv(a);
  ganfw_alloc_empty_cache(a);
  CU_ASSERT_EQUAL(stats(a).reserved.current, 0);
  free(L);
  done(a, f);
}

static void test_random_default(void) {
  random_run(NULL, (size_t)8 << 30, 20000, 0x1234567ull, 0);
}

static void test_random_limited(void) {
  /* a tight limit and max_split_size: OOMs and retries happen, and recover */
  ganfw_alloc_options opt = {.memory_limit = 300 * MiB, .max_split_size = 24 * MiB};
  random_run(&opt, (size_t)8 << 30, 20000, 0xfeedbeefull, 1);
}

static void test_random_device_bound_traced(void) {
  /* the device (not a limit) is what runs out; tracing on with a small ring */
  ganfw_alloc_options opt = {.trace = 1, .trace_capacity = 1000};
  random_run(&opt, 256 * MiB, 20000, 0xabcdef01ull, 1);
}

/* device.memory_layout: planned. A layout of four step-local blocks (a and c share bytes:
 * a ends before c begins) and one the cache serves: every planned request lands at its
 * offset in the arena, two steps use identical addresses, the persistent block packs at
 * the bottom of the one segment, live planned blocks never share a byte, and a step that
 * frees a late block or asks off the plan goes to the cache instead. */
static void test_planned_layout(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  const int64_t size[] = {4 * MiB, 2 * MiB, 512, 4 * MiB, 1 * MiB};
  const int32_t cat[] = {GANFW_MEM_ACTIVATION, GANFW_MEM_WORKSPACE, GANFW_MEM_OTHER,
                         GANFW_MEM_ACTIVATION, GANFW_MEM_ACTIVATION};
  const int64_t off[] = {0, 4 * MiB, -1, 0, 6 * MiB};
  ganfw_alloc_layout l = {.n = 5,
                          .size = size,
                          .category = cat,
                          .offset = off,
                          .arena_bytes = 7 * MiB,
                          .base_bytes = 3 * MiB,
                          .from_step = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_set_layout(a, &l), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_alloc_set_layout(a, &l), GANFW_ERR_INVALID_ARG); /* only once */
  const char *base = ganfw_alloc_arena_base(a);
  CU_ASSERT_PTR_NOT_NULL_FATAL(base);
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  CU_ASSERT_EQUAL(st.reserved.current, (int64_t)(10 * MiB)); /* 3 + 7, a 2 MiB multiple */
  void *w = xmalloc(a, 2 * MiB, GANFW_MEM_PARAM, "w");       /* persistent: the segment's bottom */
  CU_ASSERT_PTR_EQUAL(w, base - 3 * MiB);
  void *first[5] = {0};
  for (int step = 1; step <= 2; step++) {
    ganfw_alloc_trace_step(a, step);
    void *pa = xmalloc(a, 4 * MiB, GANFW_MEM_ACTIVATION, "a");
    void *pb = xmalloc(a, 2 * MiB - 100, GANFW_MEM_WORKSPACE, "b");
    void *pk = xmalloc(a, 100, GANFW_MEM_OTHER, "kept");
    CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
    ganfw_alloc_free(a, pa);
    void *pc = xmalloc(a, 4 * MiB, GANFW_MEM_ACTIVATION, "c");
    void *pd = xmalloc(a, 1 * MiB, GANFW_MEM_ACTIVATION, "d");
    CU_ASSERT_PTR_EQUAL(pa, base);
    CU_ASSERT_PTR_EQUAL(pb, base + 4 * MiB);
    CU_ASSERT_PTR_EQUAL(pc, base); /* a's bytes again: a was freed */
    CU_ASSERT_PTR_EQUAL(pd, base + 6 * MiB);
    CU_ASSERT((char *)pk < base); /* the cache's part, below the arena */
    CU_ASSERT_EQUAL(ganfw_alloc_block_size(a, pb), 2 * MiB);
    CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
    void *now[5] = {pa, pb, pk, pc, pd};
    for (int i = 0; i < 5; i++) {
      if (step == 1) first[i] = now[i];
      CU_ASSERT_PTR_EQUAL(now[i], first[i]); /* fixed addresses */
    }
    ganfw_alloc_free(a, pb);
    ganfw_alloc_free(a, pc);
    ganfw_alloc_free(a, pd);
    ganfw_alloc_free(a, pk);
    ganfw_alloc_trace_step_end(a);
    CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
  }
  ganfw_alloc_get_stats(a, &st);
  CU_ASSERT_EQUAL(st.num_planned, 8);
  CU_ASSERT_EQUAL(st.planned_steps, 2);
  CU_ASSERT_EQUAL(st.unplanned_steps, 0);
  CU_ASSERT_EQUAL(st.reserved.current, (int64_t)(10 * MiB)); /* nothing beyond the one segment */
  CU_ASSERT_EQUAL(st.allocated.current, 2 * MiB);

  /* between steps the cache may use the arena's bytes too */
  void *between = xmalloc(a, 6 * MiB, GANFW_MEM_ACTIVATION, "sample");
  CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
  ganfw_alloc_free(a, between);

  /* step 3 keeps a alive past c's start: c must not land on a's bytes */
  ganfw_alloc_trace_step(a, 3);
  void *pa = xmalloc(a, 4 * MiB, GANFW_MEM_ACTIVATION, "a");
  void *pb = xmalloc(a, 2 * MiB, GANFW_MEM_WORKSPACE, "b");
  void *pk = xmalloc(a, 512, GANFW_MEM_OTHER, "kept");
  void *pc = xmalloc(a, 4 * MiB, GANFW_MEM_ACTIVATION, "c");
  CU_ASSERT_PTR_EQUAL(pa, base);
  CU_ASSERT_PTR_NOT_EQUAL(pc, base);
  CU_ASSERT(!((char *)pc < (char *)pa + 4 * MiB && (char *)pa < (char *)pc + 4 * MiB));
  memset(pa, 1, 4 * MiB); /* both writable without touching the other */
  memset(pc, 2, 4 * MiB);
  CU_ASSERT_EQUAL(((unsigned char *)pa)[4 * MiB - 1], 1);
  /* a request the plan does not have: the cache serves it */
  void *odd = xmalloc(a, 3 * MiB, GANFW_MEM_ACTIVATION, "odd");
  CU_ASSERT((char *)odd < base || (char *)odd >= base + 7 * MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
  ganfw_alloc_free(a, pa);
  ganfw_alloc_free(a, pb);
  ganfw_alloc_free(a, pk);
  ganfw_alloc_free(a, pc);
  ganfw_alloc_free(a, odd);
  ganfw_alloc_trace_step_end(a);
  ganfw_alloc_get_stats(a, &st);
  CU_ASSERT_EQUAL(st.unplanned_steps, 1);
  CU_ASSERT_EQUAL(st.num_unplanned, 2); /* c and odd */
  ganfw_alloc_empty_cache(a);           /* keeps the layout's segment */
  ganfw_alloc_get_stats(a, &st);
  CU_ASSERT(st.reserved.current >= (int64_t)(10 * MiB));
  ganfw_alloc_free(a, w);
  done(a, f);
}

/* Layouts that are not one are refused, naming the request. */
static void test_planned_layout_bad(void) {
  fake_be *f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, NULL);
  const int64_t size[] = {4 * MiB};
  const int32_t cat[] = {GANFW_MEM_ACTIVATION};
  const int64_t off[] = {2 * MiB};
  ganfw_alloc_layout l = {
      .n = 1, .size = size, .category = cat, .offset = off, .arena_bytes = 4 * MiB, .from_step = 1};
  CU_ASSERT_EQUAL(ganfw_alloc_set_layout(a, &l), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "request 0"));
  l.arena_bytes = 6 * MiB + 100;
  CU_ASSERT_EQUAL(ganfw_alloc_set_layout(a, &l), GANFW_ERR_INVALID_ARG);
  ganfw_error_clear();
  CU_ASSERT_PTR_NULL(ganfw_alloc_arena_base(a));
  done(a, f);
}

static CU_TestInfo tests[] = {
    {"rounding", test_rounding},
    {"pool_segment_sizes", test_pool_segment_sizes},
    {"small_and_large_pools_separate", test_small_and_large_pools_separate},
    {"best_fit", test_best_fit},
    {"split_thresholds", test_split_thresholds},
    {"merge", test_merge},
    {"best_fit_huge", test_best_fit_huge},
    {"max_split_size", test_max_split_size},
    {"memory_limit", test_memory_limit},
    {"retry_ladder", test_retry_ladder},
    {"oom_then_recovery", test_oom_then_recovery},
    {"oom_report", test_oom_report},
    {"oom_fragmentation_advice", test_oom_fragmentation_advice},
    {"empty_cache", test_empty_cache},
    {"category_stats_and_peaks", test_category_stats_and_peaks},
    {"inactive_split_and_fragmentation", test_inactive_split_and_fragmentation},
    {"bad_calls", test_bad_calls},
    {"category_names", test_category_names},
    {"memory_summary", test_memory_summary},
    {"trace_json", test_trace_json},
    {"random_default", test_random_default},
    {"random_limited", test_random_limited},
    {"random_device_bound_traced", test_random_device_bound_traced},
    {"planned_layout", test_planned_layout},
    {"planned_layout_bad", test_planned_layout_bad},
    CU_TEST_INFO_NULL,
};

GT_MAIN("alloc", tests)
