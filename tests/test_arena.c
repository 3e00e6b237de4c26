/* The offline arena layout of a step (core/src/plan/arena.c): lifetimes from a trace,
 * persistent and kept blocks left out, the lower bound, no two blocks that live at the same
 * time sharing bytes (on a hand-made step and on many random ones, checked pair by pair and
 * against a bound computed here), the same layout for the same trace, and on the planned
 * step of every shipped config that plans: lower bound + persistent = the step's peak, and a
 * layout within 2% of the bound. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/log.h"
#include "config/config.h"
#include "tools/timeline.h"
#include "io/png_io.h"
#include "plan/arena.h"
#include "tools/report.h"
#include "testutil.h"

#define MiB ((int64_t)1 << 20)

typedef struct trace {
  ganfw_trace_event ev[64];
  int64_t n;
} trace;

static void ev(trace *t, int32_t kind, int64_t size, uint64_t ptr, const char *owner) {
  CU_ASSERT_FATAL(t->n < 64);
  t->ev[t->n++] = (ganfw_trace_event){.kind = kind,
                                      .category = kind == GANFW_TEV_STEP ? -1 : 3,
                                      .size = size,
                                      .ptr = ptr,
                                      .owner = owner,
                                      .step = 1};
}

static void test_layout(void) {
  trace t = {.n = 0};
  ev(&t, GANFW_TEV_STEP, 0, 0, NULL);
  ev(&t, GANFW_TEV_LIVE, 8 * MiB, 0x1000, "w");     /* persistent */
  ev(&t, GANFW_TEV_ALLOC, 4 * MiB, 0x2000, "a");    /* 2: a [2, 6] */
  ev(&t, GANFW_TEV_ALLOC, 2 * MiB, 0x3000, "b");    /* 3: b [3, 4] */
  ev(&t, GANFW_TEV_FREE, 2 * MiB, 0x3000, "b");     /* 4 */
  ev(&t, GANFW_TEV_ALLOC, 2 * MiB, 0x3000, "c");    /* 5: c [5, 8], b's address again */
  ev(&t, GANFW_TEV_FREE, 4 * MiB, 0x2000, "a");     /* 6 */
  ev(&t, GANFW_TEV_ALLOC, 6 * MiB, 0x4000, "d");    /* 7: d [7, 9] */
  ev(&t, GANFW_TEV_FREE, 2 * MiB, 0x3000, "c");     /* 8 */
  ev(&t, GANFW_TEV_FREE, 6 * MiB, 0x4000, "d");     /* 9 */
  ev(&t, GANFW_TEV_ALLOC, 1 * MiB, 0x5000, "kept"); /* never freed: persistent */
  ev(&t, GANFW_TEV_FREE, 8 * MiB, 0x1000, "w");     /* an earlier step's block */
  ganfw_arena_plan p;
  CU_ASSERT_EQUAL_FATAL(ganfw_arena_plan_step(t.ev, t.n, &p), GANFW_OK);
  CU_ASSERT_EQUAL(p.n, 4);
  CU_ASSERT_EQUAL(p.persistent, 8 * MiB);
  CU_ASSERT_EQUAL(p.kept, 1 * MiB);
  /* live sums: a+b 6, a+c 6, c+d 8: the bound is 8 MiB */
  CU_ASSERT_EQUAL(p.lower_bound, 8 * MiB);
  CU_ASSERT_TRUE(ganfw_arena_plan_valid(&p));
  CU_ASSERT(p.arena_bytes >= p.lower_bound);
  /* skyline by size x lifetime: a (4 x 5) at 0; d (6 x 3) meets no a ([2,6] and [7,9]): 0;
   * b (2) meets a only: on a at 4; c (2) meets a and d: on d at 6 */
  for (int64_t i = 0; i < p.n; i++) {
    const ganfw_arena_block *b = &p.blocks[i];
    if (strcmp(b->owner, "d") == 0) CU_ASSERT_EQUAL(b->offset, 0);
    if (strcmp(b->owner, "a") == 0) CU_ASSERT_EQUAL(b->offset, 0);
    if (strcmp(b->owner, "c") == 0) CU_ASSERT_EQUAL(b->offset, 6 * MiB);
    if (strcmp(b->owner, "b") == 0) CU_ASSERT_EQUAL(b->offset, 4 * MiB);
  }
  CU_ASSERT_EQUAL(p.arena_bytes, 8 * MiB);
  /* the check itself fails on an overlap */
  for (int64_t i = 0; i < p.n; i++)
    if (strcmp(p.blocks[i].owner, "c") == 0) p.blocks[i].offset = 5 * MiB;
  CU_ASSERT_FALSE(ganfw_arena_plan_valid(&p));
  ganfw_arena_plan_free(&p);
  CU_ASSERT_EQUAL(ganfw_arena_plan_step(t.ev + 1, t.n - 1, &p), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_arena_plan_step(NULL, 0, &p), GANFW_ERR_INVALID_ARG);
}

/* A plan needs the data's shape only: a small MNIST (read for Fashion-MNIST too), six
 * CIFAR-10 batch files of 100 records, and an image folder (folder/, train/ and test/ of two
 * classes of 8x8 colour PNGs) in `dir`. */
static void write_data(char *dir) {
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  CU_ASSERT_EQUAL_FATAL(gt_write_mnist(dir, 100, 10, 7), 0);
  static uint8_t rec[3073];
  for (int b = 0; b <= 5; b++) {
    char path[128];
    if (b == 0)
      snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    else
      snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, b);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int r = 0; r < 100; r++) {
      rec[0] = (uint8_t)(r % 10);
      for (int i = 1; i < 3073; i++) rec[i] = (uint8_t)(i * 7 + r * 13 + b);
      CU_ASSERT_EQUAL(fwrite(rec, 1, sizeof rec, f), sizeof rec);
    }
    CU_ASSERT_EQUAL(fclose(f), 0);
  }
  static const char *const sub[] = {"folder",         "folder/train",   "folder/test",
                                    "folder/train/a", "folder/train/b", "folder/test/a",
                                    "folder/test/b"};
  char path[160];
  for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, sub[i]);
    CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
  }
  static uint8_t px[8 * 8 * 3];
  for (int k = 0; k < 8; k++) {
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 5 + k * 31);
    snprintf(path, sizeof path, "%s/folder/%s/%c/%d.png", dir, k < 6 ? "train" : "test",
             k % 2 ? 'b' : 'a', k);
    CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(path, px, 8, 8, 3), GANFW_OK);
  }
}

/* 1 when the config at `path` (with what it extends) reads an image folder
 * (data.dataset: folder). */
static int reads_folder(const char *path) {
  ganfw_config *c = NULL;
  const char *kind = NULL;
  int found = 0;
  if (ganfw_config_load(path, &c) == GANFW_OK &&
      ganfw_cfg_string(ganfw_cfg_child(ganfw_config_root(c), "data"), "dataset", "", &kind) ==
          GANFW_OK)
    found = strcmp(kind, "folder") == 0;
  ganfw_error_clear();
  ganfw_config_destroy(c);
  return found;
}

static void remove_data(const char *dir) {
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  CU_ASSERT_EQUAL(system(rm), 0);
}

/* Plans configs/<name> on the data in `dir` and checks its step 2's layout: valid, within 2%
 * of the bound, bound + persistent = the step's peak. Returns 0 (checking nothing) when the
 * config does not plan (it runs out of memory on purpose, say). */
static int check_planned(const char *name, const char *dir) {
  char cfg[4200], set[600];
  snprintf(cfg, sizeof cfg, "%s/configs/%s", getenv("GANFW_SOURCE_DIR"), name);
  snprintf(set, sizeof set, "data.path=%s%s", dir, reads_folder(cfg) ? "/folder" : "");
  const char *sets[] = {set};
  ganfw_probe_result plan;
  int64_t first = 0, count = 0;
  if (ganfw_report_plan(gt_config(cfg, sets, 1), &plan) != GANFW_OK || plan.oom ||
      ganfw_trace_find_step(plan.trace, plan.n_trace, 2, &first, &count) != GANFW_OK) {
    printf("\n  %s: does not plan (%s) ", name, plan.oom ? "out of memory" : ganfw_error_message());
    ganfw_error_clear();
    ganfw_probe_result_free(&plan);
    return 0;
  }
  ganfw_timeline_summary s;
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_summarize(plan.trace + first, count, &s), GANFW_OK);
  ganfw_arena_plan a;
  CU_ASSERT_EQUAL_FATAL(ganfw_arena_plan_step(plan.trace + first, count, &a), GANFW_OK);
  CU_ASSERT_TRUE(ganfw_arena_plan_valid(&a));
  CU_ASSERT_EQUAL(a.kept, 0); /* step 2 keeps nothing */
  CU_ASSERT_EQUAL(a.lower_bound + a.persistent, s.peak_allocated);
  CU_ASSERT(a.arena_bytes >= a.lower_bound);
  CU_ASSERT(a.arena_bytes <= a.lower_bound + a.lower_bound / 50);
  CU_ASSERT_PTR_NOT_NULL(a.strategy);
  printf("\n  %s: %lld blocks, arena %lld, bound %lld (%.3fx, %s) ", name, (long long)a.n,
         (long long)a.arena_bytes, (long long)a.lower_bound,
         a.lower_bound ? (double)a.arena_bytes / (double)a.lower_bound : 1.0,
         a.strategy ? a.strategy : "?");
  ganfw_arena_plan_free(&a);
  ganfw_probe_result_free(&plan);
  return 1;
}

/* DC-GAN in f32, in mixed precision and with checkpointing (recomputed blocks) must plan. */
static void test_planned_dcgan(void) {
  char dir[64] = "/tmp/ganfw_arena_XXXXXX";
  write_data(dir);
  CU_ASSERT_TRUE(check_planned("dcgan.yaml", dir));
  CU_ASSERT_TRUE(check_planned("dcgan_amp.yaml", dir));
  CU_ASSERT_TRUE(check_planned("dcgan_ckpt.yaml", dir));
  remove_data(dir);
}

static int by_name(const void *x, const void *y) {
  return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Every configs/ *.yaml; only one named for running out of memory (oom_demo.yaml) may not
 * plan. */
static void test_planned_configs(void) {
  char path[4200], dir[64] = "/tmp/ganfw_arena_XXXXXX";
  snprintf(path, sizeof path, "%s/configs", getenv("GANFW_SOURCE_DIR"));
  DIR *d = opendir(path);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  char *names[256];
  int n = 0, planned = 0;
  for (struct dirent *e; (e = readdir(d)) && n < 256;) {
    const size_t len = strlen(e->d_name);
    if (len > 5 && strcmp(e->d_name + len - 5, ".yaml") == 0) names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, by_name);
  write_data(dir);
  for (int i = 0; i < n; i++) {
    const int ok = check_planned(names[i], dir);
    if (!strstr(names[i], "oom")) CU_ASSERT_TRUE(ok);
    planned += ok;
    free(names[i]);
  }
  remove_data(dir);
  CU_ASSERT(n >= 20);
  CU_ASSERT(planned >= n - 1);
}

/* --- random steps ------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

#define RANDOM_MAX_BLOCKS 160

typedef struct random_step {
  ganfw_trace_event ev[4 * RANDOM_MAX_BLOCKS + 8];
  int64_t n;
  /* the step-local blocks in the order of their ALLOC events */
  int64_t size[RANDOM_MAX_BLOCKS], first[RANDOM_MAX_BLOCKS], last[RANDOM_MAX_BLOCKS];
  int64_t n_blocks, persistent, kept;
} random_step;

/* A step of `nb` blocks: a persistent block live at its start (freed in the step: still
 * persistent), then either a random interleaving of ALLOC and FREE (free of a random live
 * block) or forward/backward nesting (activations freed in reverse, with temporaries and
 * workspaces), addresses reused as an allocator would; a few blocks are never freed. */
static void random_step_make(random_step *t, uint64_t *rng, int64_t nb, int nested) {
  memset(t, 0, sizeof *t);
  int64_t live_ptr[RANDOM_MAX_BLOCKS], live_blk[RANDOM_MAX_BLOCKS], n_live = 0;
  int64_t block_of_alloc[RANDOM_MAX_BLOCKS];
  uint64_t free_ptrs[RANDOM_MAX_BLOCKS + 1];
  int64_t n_free_ptrs = 0, n_alloc = 0;
  uint64_t next_ptr = 0x10000;
  t->ev[t->n++] = (ganfw_trace_event){.kind = GANFW_TEV_STEP, .category = -1, .step = 2};
  t->ev[t->n++] = (ganfw_trace_event){
      .kind = GANFW_TEV_LIVE, .size = 8 * MiB, .ptr = 0x100, .owner = "w", .category = 3};
  t->persistent = 8 * MiB;
  (void)block_of_alloc;
  int64_t made = 0, depth = 0;
  while (made < nb || n_live > 0) {
    int alloc;
    int64_t victim = n_live - 1; /* nested: free the newest */
    if (nested) {
      /* forward: grow; backward: shrink, with a temporary now and then */
      const int forward = made < nb / 2;
      alloc = made < nb && (n_live == 0 || (forward ? rng_next(rng) % 4 != 0
                                                    : rng_next(rng) % 3 == 0 || depth == 0));
      if (!alloc && n_live > 1 && rng_next(rng) % 5 == 0) victim = n_live - 2;
    } else {
      alloc = made < nb && (n_live == 0 || rng_next(rng) % 100 < 55);
      victim = n_live > 0 ? (int64_t)(rng_next(rng) % (uint64_t)n_live) : 0;
    }
    if (alloc) {
      const uint64_t r = rng_next(rng);
      int64_t size = (int64_t)(1 + r % 64) * 512;
      if (r % 7 == 0) size = (int64_t)(1 + (r >> 8) % 16) * MiB;
      const uint64_t ptr =
          n_free_ptrs > 0 && r % 3 != 0 ? free_ptrs[--n_free_ptrs] : (next_ptr += 0x100);
      t->ev[t->n] = (ganfw_trace_event){
          .kind = GANFW_TEV_ALLOC, .size = size, .ptr = ptr, .owner = "t", .category = 3};
      live_ptr[n_live] = (int64_t)ptr;
      live_blk[n_live++] = n_alloc;
      t->size[n_alloc] = size;
      t->first[n_alloc] = t->n++;
      t->last[n_alloc++] = -1;
      made++;
      depth++;
    } else {
      const int64_t b = live_blk[victim];
      const uint64_t ptr = (uint64_t)live_ptr[victim];
      for (int64_t i = victim; i + 1 < n_live; i++) {
        live_ptr[i] = live_ptr[i + 1];
        live_blk[i] = live_blk[i + 1];
      }
      n_live--;
      depth--;
      if (rng_next(rng) % 20 == 0) continue; /* never freed: kept */
      t->ev[t->n] = (ganfw_trace_event){
          .kind = GANFW_TEV_FREE, .size = t->size[b], .ptr = ptr, .owner = "t", .category = 3};
      t->last[b] = t->n++;
      free_ptrs[n_free_ptrs++] = ptr;
    }
  }
  t->ev[t->n++] = (ganfw_trace_event){
      .kind = GANFW_TEV_FREE, .size = 8 * MiB, .ptr = 0x100, .owner = "w", .category = 3};
  /* the step-local blocks: those freed in the step */
  for (int64_t i = 0; i < n_alloc; i++) {
    if (t->last[i] < 0) {
      t->kept += t->size[i];
      continue;
    }
    t->size[t->n_blocks] = t->size[i];
    t->first[t->n_blocks] = t->first[i];
    t->last[t->n_blocks++] = t->last[i];
  }
}

/* Many random steps of 1 to 160 blocks (fixed seed): the blocks and their lifetimes as
 * generated, the bound as computed here, every pair of blocks that live at the same time
 * apart in the arena, every block inside it, and the same layout when planned again. */
static void test_random_steps(void) {
  static random_step t;
  uint64_t rng = 0x2545f4914f6cdd1dull;
  const char *strategies[64];
  int n_strategies = 0, at_bound = 0, bad_pairs = 0;
  const int n_steps = 400;
  for (int it = 0; it < n_steps; it++) {
    random_step_make(&t, &rng, 1 + (int64_t)(rng_next(&rng) % RANDOM_MAX_BLOCKS), it % 2);
    ganfw_arena_plan p, q;
    CU_ASSERT_EQUAL_FATAL(ganfw_arena_plan_step(t.ev, t.n, &p), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(p.n, t.n_blocks);
    CU_ASSERT_EQUAL(p.persistent, t.persistent);
    CU_ASSERT_EQUAL(p.kept, t.kept);
    int64_t bound = 0, top = 0;
    for (int64_t e = 0; e < t.n; e++) {
      int64_t live = 0;
      for (int64_t i = 0; i < t.n_blocks; i++)
        if (t.first[i] <= e && e <= t.last[i]) live += t.size[i];
      if (live > bound) bound = live;
    }
    CU_ASSERT_EQUAL(p.lower_bound, bound);
    for (int64_t i = 0; i < p.n; i++) {
      const ganfw_arena_block *a = &p.blocks[i];
      CU_ASSERT(a->size == t.size[i] && a->first == t.first[i] && a->last == t.last[i]);
      CU_ASSERT(a->offset >= 0 && a->offset + a->size <= p.arena_bytes);
      if (a->offset + a->size > top) top = a->offset + a->size;
      for (int64_t j = i + 1; j < p.n; j++) {
        const ganfw_arena_block *b = &p.blocks[j];
        const int together = a->first <= b->last && b->first <= a->last;
        const int overlap = a->offset < b->offset + b->size && b->offset < a->offset + a->size;
        bad_pairs += together && overlap;
      }
    }
    CU_ASSERT_EQUAL(p.arena_bytes, top);
    CU_ASSERT(p.arena_bytes >= p.lower_bound);
    CU_ASSERT_TRUE(ganfw_arena_plan_valid(&p));
    at_bound += p.arena_bytes == p.lower_bound;
    /* deterministic */
    CU_ASSERT_EQUAL_FATAL(ganfw_arena_plan_step(t.ev, t.n, &q), GANFW_OK);
    CU_ASSERT_EQUAL(q.arena_bytes, p.arena_bytes);
    CU_ASSERT_PTR_EQUAL(q.strategy, p.strategy);
    for (int64_t i = 0; i < p.n; i++) CU_ASSERT_EQUAL(q.blocks[i].offset, p.blocks[i].offset);
    int seen = 0;
    for (int s = 0; s < n_strategies; s++) seen |= strategies[s] == p.strategy;
    if (!seen && n_strategies < 64) strategies[n_strategies++] = p.strategy;
    ganfw_arena_plan_free(&q);
    ganfw_arena_plan_free(&p);
  }
  CU_ASSERT_EQUAL(bad_pairs, 0);
  printf("\n  %d random steps: %d at the bound, %d strategies kept:", n_steps, at_bound,
         n_strategies);
  for (int s = 0; s < n_strategies; s++) printf("\n    %s", strategies[s]);
  printf(" ");
  /* the layouts checked come from more than the first strategy */
  CU_ASSERT(n_strategies >= 3);
}

static CU_TestInfo tests[] = {
    {"a hand-made step: lifetimes, bound, skyline, validity", test_layout},
    {"the planned DC-GAN steps: bound + persistent = the peak, within 2%", test_planned_dcgan},
    {"every shipped config's planned step: valid, within 2% of the bound", test_planned_configs},
    {"random steps: every pair apart, the bound, deterministic", test_random_steps},
    CU_TEST_INFO_NULL,
};

int main(void) {
  ganfw_log_set_level(GANFW_LOG_WARN);
  return gt_run("arena", tests);
}
