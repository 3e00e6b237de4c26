/* The offline arena layout of a step (core/src/tools/arena.c): lifetimes from a trace,
 * persistent and kept blocks left out, the lower bound, no two blocks that live at the same
 * time sharing bytes, and on a real planned DC-GAN step: lower bound + persistent = the
 * step's peak, and a layout within the bound's reach. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "io/timeline.h"
#include "tools/arena.h"
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
  /* greedy by size: d (6) at 0; a (4) meets no d... a [2,6] and d [7,9] do not meet: 0;
   * c (2) meets a and d: after d at 6; b (2) meets a only: 4 */
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

static void check_planned(const char *name) {
  char cfg[4200];
  snprintf(cfg, sizeof cfg, "%s/configs/%s", getenv("GANFW_SOURCE_DIR"), name);
  ganfw_probe_result plan;
  char dir[64] = "/tmp/ganfw_arena_XXXXXX", set[600]; /* a plan needs the data's shape only */
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  CU_ASSERT_EQUAL_FATAL(gt_write_mnist(dir, 100, 10, 7), 0);
  snprintf(set, sizeof set, "data.path=%s", dir);
  const char *sets[] = {set};
  CU_ASSERT_EQUAL_FATAL(ganfw_report_plan(cfg, sets, 1, &plan), GANFW_OK);
  char rm[128];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  CU_ASSERT_EQUAL(system(rm), 0);
  int64_t first = 0, count = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_find_step(plan.trace, plan.n_trace, 2, &first, &count),
                        GANFW_OK);
  ganfw_timeline_summary s;
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_summarize(plan.trace + first, count, &s), GANFW_OK);
  ganfw_arena_plan a;
  CU_ASSERT_EQUAL_FATAL(ganfw_arena_plan_step(plan.trace + first, count, &a), GANFW_OK);
  CU_ASSERT_TRUE(ganfw_arena_plan_valid(&a));
  CU_ASSERT_EQUAL(a.kept, 0); /* step 2 keeps nothing */
  CU_ASSERT_EQUAL(a.lower_bound + a.persistent, s.peak_allocated);
  CU_ASSERT(a.arena_bytes >= a.lower_bound);
  CU_ASSERT(a.arena_bytes <= a.lower_bound + a.lower_bound / 10);
  CU_ASSERT_PTR_NOT_NULL(a.strategy);
  printf("\n  %s: %lld blocks, arena %lld, bound %lld (%.3fx, %s) ", name, (long long)a.n,
         (long long)a.arena_bytes, (long long)a.lower_bound,
         (double)a.arena_bytes / (double)a.lower_bound, a.strategy ? a.strategy : "?");
  ganfw_arena_plan_free(&a);
  ganfw_probe_result_free(&plan);
}

/* Three steps whose layouts come from different strategies (size/first fit, breadth/best
 * fit, and checkpointing's recomputed blocks): each valid and within 10% of its bound. */
static void test_planned_dcgan(void) {
  check_planned("dcgan.yaml");
  check_planned("dcgan_amp.yaml");
  check_planned("dcgan_ckpt.yaml");
}

static CU_TestInfo tests[] = {
    {"a hand-made step: lifetimes, bound, greedy by size, validity", test_layout},
    {"the planned DC-GAN step: bound + persistent = its peak", test_planned_dcgan},
    CU_TEST_INFO_NULL,
};

int main(void) {
  ganfw_log_set_level(GANFW_LOG_WARN);
  return gt_run("arena", tests);
}
