/* Out-of-memory failures explained (issue 35, items 8, 13, 15): the allocator's diagnosis
 * names what refused the request (memory_limit reached by reserved memory, the device, a
 * request larger than the limit, max_split_size) and calls it fragmentation only when the
 * request's own pool holds enough free bytes in sum; the advice for a model whose state
 * alone does not fit (by category, by how much, what reduces it) from the OOM advice and
 * find-batch; the flight recorder's files at start-up; and the OOM picture marking the
 * failed request and the memory_limit. Allocator cases run on a fake device of fake
 * addresses; the rest plans a DC-GAN on the meta backend over a small synthetic MNIST, in
 * a mkdtemp folder removed at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/error.h"
#include "base/log.h"
#include "dist/dist.h"
#include "tools/timeline.h"
#include "runtime/alloc.h"
#include "tools/oom.h"
#include "tools/plan.h"
#include "tools/report.h"
#include "testutil.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* --- a fake device: addresses only, never touched ---------------------------------------- */

typedef struct fake_be {
  ganfw_backend be; /* first: the allocator sees &f->be */
  ganfw_backend_vt vt;
  size_t capacity, used;
  uintptr_t next;
} fake_be;

static void *fake_raw_alloc(ganfw_backend *be, size_t bytes) {
  fake_be *f = (fake_be *)be;
  if (f->used + bytes > f->capacity) return NULL;
  f->used += bytes;
  void *p = (void *)f->next;
  f->next += bytes + (64 << 20);
  return p;
}

static void fake_raw_free(ganfw_backend *be, void *ptr, size_t bytes) {
  (void)ptr;
  ((fake_be *)be)->used -= bytes;
}

static ganfw_status fake_capacity(ganfw_backend *be, size_t *total, size_t *free_bytes) {
  fake_be *f = (fake_be *)be;
  *total = f->capacity;
  *free_bytes = f->capacity - f->used;
  return GANFW_OK;
}

static ganfw_alloc *mk(fake_be *f, size_t capacity, ganfw_alloc_options opt) {
  memset(f, 0, sizeof *f);
  f->vt.name = "fake";
  f->vt.raw_alloc = fake_raw_alloc;
  f->vt.raw_free = fake_raw_free;
  f->vt.capacity = fake_capacity;
  f->be.vt = &f->vt;
  f->capacity = capacity;
  f->next = (uintptr_t)1 << 44;
  ganfw_alloc *a = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_create(&f->be, &opt, &a), GANFW_OK);
  return a;
}

static void *xmalloc(ganfw_alloc *a, size_t bytes, const char *owner) {
  void *p = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, bytes, GANFW_MEM_PARAM, owner, &p), GANFW_OK);
  return p;
}

/* The OOM of a request that must fail: its report and message (static, until the next). */
static const char *oom_of(ganfw_alloc *a, size_t bytes, ganfw_oom_report *r) {
  static char msg[8192];
  void *p = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, bytes, GANFW_MEM_PARAM, "req", &p), GANFW_ERR_OOM);
  snprintf(msg, sizeof msg, "%s", ganfw_error_message());
  CU_ASSERT_EQUAL(ganfw_alloc_last_oom(a, r), 1);
  CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
  return msg;
}

#define HAS(text, s)                                                                               \
  do {                                                                                             \
    if (!strstr((text), (s))) printf("\n  missing \"%s\" in:\n%s\n", (s), (text));                 \
    CU_ASSERT_PTR_NOT_NULL(strstr((text), (s)));                                                   \
  } while (0)

static char *svg_of(const ganfw_trace_event *ev, int64_t n, const ganfw_timeline_options *opt);

/* --- item 8: the diagnosis ------------------------------------------------------------------- */

/* The 20 MiB case: a 1.56 MiB parameter took a 20 MiB large-pool segment, so the
 * limit is reached; a 1 KiB request needs a 2 MiB small-pool segment, and the 18.44 MiB
 * cached in the large pool cannot serve it. That is not fragmentation. */
static void test_limit_reached_other_pool(void) {
  fake_be f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, (ganfw_alloc_options){.memory_limit = 20 * MiB});
  void *w = xmalloc(a, 1600 * KiB, "generator.main.0.weight");
  ganfw_oom_report r;
  const char *msg = oom_of(a, 1 * KiB, &r);
  CU_ASSERT_EQUAL(r.cause, GANFW_OOM_CAUSE_LIMIT);
  CU_ASSERT_EQUAL(r.large_pool, 0);
  CU_ASSERT_EQUAL(r.segment_bytes, 2 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.pool_free, 0);
  CU_ASSERT_EQUAL(r.other_free, (int64_t)(20 * MiB - 1600 * KiB));
  CU_ASSERT_EQUAL(r.largest_free_block, (int64_t)(20 * MiB - 1600 * KiB)); /* as before */
  HAS(msg, "tried to allocate 1.00 KiB");
  HAS(msg, "Why: the limit is reached by reserved memory: 20.00 MiB reserved of memory_limit "
           "20.00 MiB, and the new 2.00 MiB segment this request needs");
  HAS(msg, "18.44 MiB cached free in the large pool cannot serve it");
  CU_ASSERT_PTR_NULL(strstr(msg, "fragment"
                                 "ed"));
  ganfw_alloc_free(a, w);
  ganfw_alloc_destroy(a);
}

/* The 40 MiB case: the cache holds more than the request in sum, but split between
 * the pools, and the request's own pool has less than it: not fragmentation either. */
static void test_cache_split_between_pools(void) {
  fake_be f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, (ganfw_alloc_options){.memory_limit = 24 * MiB});
  void *p1 = xmalloc(a, 8 * MiB, "a"), *p2 = xmalloc(a, 8 * MiB, "b"); /* 20 MiB, 4 free */
  void *s = xmalloc(a, 512, "s");                                      /* 2 MiB small */
  ganfw_oom_report r;
  const char *msg = oom_of(a, 5 * MiB, &r);
  CU_ASSERT_TRUE(r.reserved_unallocated >= r.requested); /* the old test for "fragmented" */
  CU_ASSERT_EQUAL(r.cause, GANFW_OOM_CAUSE_LIMIT);
  CU_ASSERT_EQUAL(r.large_pool, 1);
  CU_ASSERT_EQUAL(r.pool_free, 4 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.pool_largest, 4 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.other_free, (int64_t)(2 * MiB - 512));
  CU_ASSERT_EQUAL(r.segment_bytes, 20 * (int64_t)MiB);
  HAS(msg, "22.00 MiB reserved of memory_limit 24.00 MiB, and the new 20.00 MiB segment");
  HAS(msg, "a request of 1-10 MiB gets a 20 MiB segment");
  HAS(msg, "The large pool's cached free memory (4.00 MiB) is less than the request.");
  HAS(msg, "2.00 MiB cached free in the small pool cannot serve it");
  CU_ASSERT_PTR_NULL(strstr(msg, "fragment"
                                 "ed"));
  ganfw_alloc_free(a, p1);
  ganfw_alloc_free(a, p2);
  ganfw_alloc_free(a, s);
  ganfw_alloc_destroy(a);
}

/* Real fragmentation is still named: the request's pool holds 12 MiB free in three 4 MiB
 * holes, for a 10 MiB request. */
static void test_fragmentation_in_the_pool(void) {
  fake_be f;
  ganfw_alloc *a = mk(&f, 1024 * MiB, (ganfw_alloc_options){.memory_limit = 40 * MiB});
  void *p[5];
  for (int i = 0; i < 5; i++) p[i] = xmalloc(a, 4 * MiB, "act");
  void *other = xmalloc(a, 20 * MiB, "w");
  ganfw_alloc_free(a, p[0]);
  ganfw_alloc_free(a, p[2]);
  ganfw_alloc_free(a, p[4]);
  ganfw_oom_report r;
  const char *msg = oom_of(a, 10 * MiB, &r);
  CU_ASSERT_EQUAL(r.cause, GANFW_OOM_CAUSE_LIMIT);
  CU_ASSERT_EQUAL(r.pool_free, 12 * (int64_t)MiB);
  CU_ASSERT_EQUAL(r.pool_largest, 4 * (int64_t)MiB);
  HAS(msg, "Reserved but unallocated memory of the large pool (12.00 MiB) would hold the "
           "request but is fragmented (the largest free block is 4.00 MiB).");
  for (int i = 1; i < 5; i += 2) ganfw_alloc_free(a, p[i]);
  ganfw_alloc_free(a, other);
  ganfw_alloc_destroy(a);
}

/* The device refuses (no limit), a request larger than the limit, one larger than any
 * device, and a cached block that max_split_size keeps whole. */
static void test_other_causes(void) {
  fake_be f;
  ganfw_oom_report r;
  ganfw_alloc *a = mk(&f, 30 * MiB, (ganfw_alloc_options){0});
  void *big = xmalloc(a, 25 * MiB, "big"); /* a 26 MiB segment */
  const char *msg = oom_of(a, 8 * MiB, &r);
  CU_ASSERT_EQUAL(r.cause, GANFW_OOM_CAUSE_DEVICE);
  HAS(msg, "Why: the device refused the new 20.00 MiB segment this request needs");
  HAS(msg, "it has 4.00 MiB free");
  ganfw_alloc_free(a, big);
  ganfw_alloc_destroy(a);

  a = mk(&f, 1024 * MiB, (ganfw_alloc_options){.memory_limit = 10 * MiB});
  msg = oom_of(a, 12 * MiB, &r);
  CU_ASSERT_EQUAL(r.cause, GANFW_OOM_CAUSE_TOO_LARGE);
  HAS(msg, "Why: the request alone (12.00 MiB) is larger than memory_limit 10.00 MiB.");
  msg = oom_of(a, SIZE_MAX - 100, &r);
  CU_ASSERT_EQUAL(r.cause, GANFW_OOM_CAUSE_TOO_LARGE);
  HAS(msg, "is larger than any device holds");
  /* a 1.5 MiB request under a 10 MiB limit: its 20 MiB segment passes the limit at once */
  msg = oom_of(a, 1536 * KiB, &r);
  CU_ASSERT_EQUAL(r.cause, GANFW_OOM_CAUSE_LIMIT);
  HAS(msg, "0 bytes reserved of memory_limit 10.00 MiB, and the new 20.00 MiB segment");
  ganfw_alloc_destroy(a);

  a = mk(
      &f, 1024 * MiB,
      (ganfw_alloc_options){.memory_limit = 50 * MiB, .max_split_size = 32 * MiB, .no_retry = 1});
  void *p = xmalloc(a, 40 * MiB, "x");
  ganfw_alloc_free(a, p); /* a cached 40 MiB block, oversize */
  msg = oom_of(a, 8 * MiB, &r);
  CU_ASSERT_EQUAL(r.cause, GANFW_OOM_CAUSE_LIMIT);
  CU_ASSERT_EQUAL(r.pool_largest, 40 * (int64_t)MiB);
  HAS(msg, "The large pool's largest free block (40.00 MiB) would hold it, but max_split_size "
           "32.00 MiB keeps it whole");
  CU_ASSERT_PTR_NULL(strstr(msg, "fragment"
                                 "ed"));
  ganfw_alloc_destroy(a);
}

/* --- configs planned on the meta backend ---------------------------------------------------- */

static char root[64];
static char ganfw_bin[4096];
static char out[1 << 16];

static const char *path_in(const char *rel) {
  static char buf[8][600];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

/* configs/dcgan.yaml on the synthetic set, with the model's widths, the limit and the run
 * folder given. */
static const char *write_dcgan(const char *name, int width, const char *limit) {
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 1\n"
           "device: {type: cpu, threads: 2, memory_limit: %s}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 100, ngf: %d, ndf: %d}\n"
           "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
           "train: {batch_size: 64, max_steps: 3}\n"
           "run: {out_dir: %s/run_%s}\n",
           limit, root, width, width, root, name);
  char file[128];
  snprintf(file, sizeof file, "%s.yaml", name);
  const char *path = path_in(file);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static int file_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && sb.st_size > 0;
}

/* Runs the ganfw binary with args (NULL-terminated); the exit code, its output in out. */
static int run_ganfw(const char *const *args) {
  char cmd[8192];
  int n = snprintf(cmd, sizeof cmd, "'%s'", ganfw_bin);
  for (const char *const *a = args; *a; a++) n += snprintf(cmd + n, sizeof cmd - n, " '%s'", *a);
  snprintf(cmd + n, sizeof cmd - n, " 2>&1");
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char *mib_text(int64_t bytes) {
  static char buf[8][32];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%.2f MiB", (double)bytes / (double)MiB);
  return buf[k];
}

/* The 20 MiB limit, planned: the allocator's message says the limit is reached by
 * reserved memory, not that 16.88 MiB free are fragmented. */
static void test_plan_small_limit(void) {
  const char *cfg = write_dcgan("limit20", 64, "20MiB");
  ganfw_probe_result plan;
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_make(gt_config(cfg, NULL, 0), 0, NULL, &plan), GANFW_OK);
  ganfw_probe_result_free(&plan);
  CU_ASSERT_EQUAL(plan.oom, 1);
  HAS(plan.oom_report, "tried to allocate 1.00 KiB");
  HAS(plan.oom_report, "Why: the limit is reached by reserved memory: 20.00 MiB reserved of "
                       "memory_limit 20.00 MiB");
  HAS(plan.oom_report, "cached free in the large pool cannot serve it");
  CU_ASSERT_PTR_NULL(strstr(plan.oom_report, "fragment"
                                             "ed"));
  /* its picture: the set-up replayed, a request under a MiB labelled in KiB */
  ganfw_probe_result replay;
  CU_ASSERT_EQUAL_FATAL(ganfw_oom_setup_replay(gt_config(cfg, NULL, 0), plan.memory_limit, &replay),
                        GANFW_OK);
  CU_ASSERT_EQUAL(replay.oom, 1);
  ganfw_oom_picture pic;
  CU_ASSERT_EQUAL_FATAL(ganfw_oom_picture_make(&replay, &pic), GANFW_OK);
  ganfw_timeline_options opt = {.title = "setup", .memory_limit = pic.memory_limit};
  char *svg = svg_of(pic.ev, pic.n, &opt);
  HAS(svg, ">failed: generator.main.1.weight (param) 1.00 KiB</text>");
  HAS(svg, ">memory_limit 20.00 MiB</text>");
  free(svg);
  ganfw_oom_picture_free(&pic);
  ganfw_probe_result_free(&replay);
}

/* --- item 13: the model's state alone does not fit ------------------------------------------ */

/* DC-GAN with widths 256 under 256 MiB: parameters, gradients and Adam's two moments take
 * 345.5 MiB before any activation. The advice says so with the plan's figures, and what
 * reduces the state: a smaller model, SGD (planned: the bytes it saves, and the one that
 * fits), ZeRO over ranks. */
static void test_state_advice(void) {
  const char *cfg = write_dcgan("state", 256, "256MiB");
  ganfw_probe_result plan;
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_make(gt_config(cfg, NULL, 0), 0, NULL, &plan), GANFW_OK);
  ganfw_probe_result_free(&plan);
  CU_ASSERT_EQUAL_FATAL(plan.oom, 1);
  CU_ASSERT_STRING_EQUAL(plan.oom_where, "set-up");
  const int64_t *sc = plan.setup_category;
  const int64_t state = sc[GANFW_MEM_PARAM] + sc[GANFW_MEM_GRAD] + sc[GANFW_MEM_OPTIM_STATE];
  const int64_t limit = 256 * (int64_t)MiB;
  CU_ASSERT_TRUE_FATAL(state > limit);
  CU_ASSERT_EQUAL(sc[GANFW_MEM_OPTIM_STATE], 2 * sc[GANFW_MEM_GRAD]); /* Adam: two moments */

  static char advice[8192], want[512];
  ganfw_oom_advice(gt_config(cfg, NULL, 0), advice, sizeof advice);
  snprintf(want, sizeof want,
           "The model's state alone does not fit: parameters %s + gradients %s + optimizer "
           "state %s (adam) = %s, %s over memory_limit 256.00 MiB before any activation",
           mib_text(sc[GANFW_MEM_PARAM]), mib_text(sc[GANFW_MEM_GRAD]),
           mib_text(sc[GANFW_MEM_OPTIM_STATE]), mib_text(state), mib_text(state - limit));
  HAS(advice, want);
  HAS(advice, "a smaller model");
  snprintf(want, sizeof want, "parameters of at most %s for the state alone to fit (now %s",
           mib_text((int64_t)((double)limit / ((double)state / (double)sc[GANFW_MEM_PARAM]))),
           mib_text(sc[GANFW_MEM_PARAM]));
  HAS(advice, want);
  /* SGD with momentum keeps one buffer (saves one moment), without none (saves both) */
  snprintf(want, sizeof want, "%-24s optimizer state %s (saves %s)", "sgd, momentum 0.9",
           mib_text(sc[GANFW_MEM_GRAD]), mib_text(sc[GANFW_MEM_OPTIM_STATE] - sc[GANFW_MEM_GRAD]));
  HAS(advice, want);
  snprintf(want, sizeof want, "%-24s optimizer state 0.00 MiB (saves %s)", "sgd, no momentum",
           mib_text(sc[GANFW_MEM_OPTIM_STATE]));
  HAS(advice, want);
  HAS(advice, "Try: optim: {plugin: sgd} in place of the optim section (keep its lr).");
  CU_ASSERT_PTR_NULL(strstr(advice, "or `ganfw find-batch` for the largest batch"));

  /* ZeRO: planned on simulated ranks, as `ganfw plan --ranks 2` does. Parameters,
   * gradients and the gradient buckets stay whole on every rank: over 256 MiB already */
  ganfw_dist_simulate(2);
  ganfw_probe_result dp;
  ganfw_status st = ganfw_plan_make(gt_config(cfg, NULL, 0), 0, "{plugin: zero}", &dp);
  ganfw_dist_simulate(1);
  ganfw_probe_result_free(&dp);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  const int64_t floor_bytes =
      sc[GANFW_MEM_PARAM] + sc[GANFW_MEM_GRAD] + dp.setup_category[GANFW_MEM_COMM];
  CU_ASSERT_TRUE(floor_bytes > limit);
  snprintf(want, sizeof want,
           "%-24s memory: [{plugin: zero}] shards only the optimizer state (%s; %s a rank on 2 "
           "ranks); parameters, gradients and the gradient buckets (comm %s) stay whole on "
           "every rank: %s per rank at any number of ranks, %s over",
           "zero over ranks", mib_text(sc[GANFW_MEM_OPTIM_STATE]),
           mib_text(dp.setup_category[GANFW_MEM_OPTIM_STATE]),
           mib_text(dp.setup_category[GANFW_MEM_COMM]), mib_text(floor_bytes),
           mib_text(floor_bytes - limit));
  HAS(advice, want);
  /* under 300 MiB that floor fits: the fewest ranks (a power of two) whose share does */
  const int64_t limit300 = 300 * (int64_t)MiB;
  int ranks = 2;
  while (floor_bytes + sc[GANFW_MEM_OPTIM_STATE] / ranks > limit300) ranks *= 2;
  cfg = write_dcgan("state300", 256, "300MiB");
  ganfw_oom_advice(gt_config(cfg, NULL, 0), advice, sizeof advice);
  snprintf(want, sizeof want, "zero on %d ranks", ranks);
  HAS(advice, want);
  snprintf(want, sizeof want, "memory: [{plugin: zero}] on %d ranks (ganfw launch -n %d)", ranks,
           ranks);
  HAS(advice, want);
  ganfw_error_clear();
}

/* find-batch finds no batch, and says that the model's state alone is why. */
static void test_find_batch_no_fit(void) {
  const char *cfg = write_dcgan("state", 256, "256MiB");
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  ganfw_find_batch_options opt = {.margin = 0.05, .confirm = 0};
  ganfw_find_batch_result *res = calloc(1, sizeof *res);
  CU_ASSERT_PTR_NOT_NULL_FATAL(res);
  CU_ASSERT_EQUAL(ganfw_find_batch(gt_config(cfg, NULL, 0), &opt, res, f), GANFW_OK);
  fclose(f);
  CU_ASSERT_EQUAL(res->batch, 0);
  HAS(text, "No batch size fits");
  HAS(text, "The model's state alone does not fit");
  char want[128];
  snprintf(want, sizeof want, "over the plans' limit %s", mib_text(res->limit));
  HAS(text, want);
  HAS(text, "sgd, no momentum");
  ganfw_find_batch_free(res);
  free(res);
  free(text);
}

/* A failure in the set-up: the plan keeps no events, so the advice replays the set-up's
 * requests under the limit; the replay fails at the request the plan failed at, with the
 * same allocator state, and the recorder draws it. Without the advice the recorder says
 * why it has no picture, and still writes report.txt. */
static void test_setup_recorder(void) {
  const char *cfg = write_dcgan("state", 256, "256MiB");
  ganfw_probe_result plan;
  CU_ASSERT_EQUAL_FATAL(ganfw_report_plan(gt_config(cfg, NULL, 0), &plan), GANFW_OK);
  CU_ASSERT_EQUAL(plan.oom, 1);
  CU_ASSERT_EQUAL(plan.n_trace, 0);

  ganfw_probe_result replay;
  CU_ASSERT_EQUAL_FATAL(ganfw_oom_setup_replay(gt_config(cfg, NULL, 0), plan.memory_limit, &replay),
                        GANFW_OK);
  CU_ASSERT_EQUAL(replay.oom, 1);
  CU_ASSERT_TRUE(replay.n_trace > 0);
  /* the allocator's report of the replay is the plan's (after its "optimizer ...: ") */
  CU_ASSERT_TRUE(replay.oom_report[0] != '\0');
  CU_ASSERT_PTR_NOT_NULL(strstr(plan.oom_report, replay.oom_report));
  ganfw_oom_picture pic;
  CU_ASSERT_EQUAL_FATAL(ganfw_oom_picture_make(&replay, &pic), GANFW_OK);
  CU_ASSERT_EQUAL(pic.setup, 1);
  CU_ASSERT_EQUAL(pic.memory_limit, 256 * (int64_t)MiB);
  CU_ASSERT_TRUE(pic.summary.oom_index > 0);
  CU_ASSERT_STRING_EQUAL(pic.summary.oom_owner, "generator.main.3.weight.exp_avg_sq");
  CU_ASSERT_EQUAL(pic.summary.oom_category, GANFW_MEM_OPTIM_STATE);
  char want[256];
  snprintf(want, sizeof want,
           "tried to allocate %s for optim_state 'generator.main.3.weight.exp_avg_sq'",
           mib_text(pic.summary.oom_bytes));
  HAS(plan.oom_report, want);
  snprintf(want, sizeof want, "(memory_limit 256.00 MiB, %s free; %s allocated by ganfw",
           mib_text(256 * (int64_t)MiB - pic.summary.oom_reserved),
           mib_text(pic.summary.oom_allocated));
  HAS(plan.oom_report, want);
  ganfw_oom_picture_free(&pic);
  ganfw_probe_result_free(&replay);

  /* the recorder without the advice: report.txt, and why there is no picture */
  static char written[8192];
  const char *other = write_dcgan("other", 256, "256MiB"); /* no advice was made for it */
  ganfw_status st = ganfw_oom_record(gt_config(other, NULL, 0), &plan, path_in("rec_noadvice"),
                                     "the message", "", written, sizeof written);
  CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
  HAS(ganfw_error_message(), "ran out of memory in the set-up, which keeps no events");
  CU_ASSERT_TRUE(file_exists(path_in("rec_noadvice/oom/report.txt")));
  CU_ASSERT_FALSE(file_exists(path_in("rec_noadvice/oom/step.png")));

  /* after the advice, as `ganfw CONFIG` calls them: the set-up drawn */
  static char advice[8192];
  ganfw_oom_advice(gt_config(cfg, NULL, 0), advice, sizeof advice);
  st = ganfw_oom_record(gt_config(cfg, NULL, 0), &plan, path_in("rec/nested"), "the message",
                        advice, written, sizeof written);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  HAS(written, "oom/step.png");
  CU_ASSERT_TRUE(file_exists(path_in("rec/nested/oom/report.txt")));
  CU_ASSERT_TRUE(file_exists(path_in("rec/nested/oom/trace.json")));
  CU_ASSERT_TRUE(file_exists(path_in("rec/nested/oom/step.png")));
  ganfw_probe_result_free(&plan);
  ganfw_error_clear();
}

/* The whole run through the command line: exit 1, the state's advice, the oom/ files. */
static void test_state_cli(void) {
  const char *cfg = write_dcgan("cli", 256, "256MiB");
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, NULL}), 1);
  HAS(out, "The model's state alone does not fit");
  HAS(out, "oom/step.png");
  CU_ASSERT_PTR_NULL(strstr(out, "flight recorder stopped"));
  CU_ASSERT_TRUE(file_exists(path_in("run_cli/oom/report.txt")));
  CU_ASSERT_TRUE(file_exists(path_in("run_cli/oom/step.png")));
}

/* --- item 15: the picture marks the failed request and the limit ----------------------------- */

#define TMiB ((int64_t)1 << 20)

/* A step whose peak (a 10 MiB workspace of D.main.2, freed) comes before the failure (a
 * 9.18 MiB workspace of D.main.5, with D.main.0's activation live). */
static int64_t build_failing_step(ganfw_trace_event *ev) {
  int64_t n = 0, alloc = 0;
  const int64_t reserved = 46 * TMiB;
  struct {
    int32_t kind, cat;
    int64_t size;
    uint64_t ptr;
    const char *owner;
  } steps[] = {
      {GANFW_TEV_STEP, -1, 0, 0, NULL},
      {GANFW_TEV_LIVE, GANFW_MEM_PARAM, 20 * TMiB, 0x1000, "D.main.5.weight"},
      {GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, 4 * TMiB, 0x2000, "D.main.0"},
      {GANFW_TEV_ALLOC, GANFW_MEM_WORKSPACE, 10 * TMiB, 0x3000, "D.main.2"},
      {GANFW_TEV_FREE, GANFW_MEM_WORKSPACE, 10 * TMiB, 0x3000, "D.main.2"},
      {GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, 2 * TMiB, 0x4000, "D.main.3"},
      {GANFW_TEV_OOM, GANFW_MEM_WORKSPACE, 9625600, 0, "D.main.5"},
      {GANFW_TEV_FREE, GANFW_MEM_ACTIVATION, 2 * TMiB, 0x4000, "D.main.3"},
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    if (steps[i].kind == GANFW_TEV_ALLOC || steps[i].kind == GANFW_TEV_LIVE) alloc += steps[i].size;
    if (steps[i].kind == GANFW_TEV_FREE) alloc -= steps[i].size;
    ev[n++] = (ganfw_trace_event){.kind = steps[i].kind,
                                  .category = steps[i].cat,
                                  .size = steps[i].size,
                                  .ptr = steps[i].ptr,
                                  .owner = steps[i].owner,
                                  .step = 1,
                                  .stage = GANFW_STAGE_D_REAL,
                                  .pass = GANFW_PASS_FORWARD,
                                  .allocated = alloc,
                                  .reserved = reserved};
  }
  return n;
}

static char *svg_of(const ganfw_trace_event *ev, int64_t n, const ganfw_timeline_options *opt) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(ganfw_timeline_write_svg(f, ev, n, opt), GANFW_OK);
  fclose(f);
  return text;
}

static void test_picture_marks(void) {
  ganfw_trace_event ev[16];
  const int64_t n = build_failing_step(ev);
  ganfw_timeline_summary s;
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_summarize(ev, n, &s), GANFW_OK);
  CU_ASSERT_EQUAL(s.peak_index, 3); /* the workspace of D.main.2 */
  CU_ASSERT_STRING_EQUAL(s.top[0].owner, "D.main.5.weight");
  CU_ASSERT_EQUAL(s.oom_index, 6);
  CU_ASSERT_STRING_EQUAL(s.oom_owner, "D.main.5");
  CU_ASSERT_EQUAL(s.oom_category, GANFW_MEM_WORKSPACE);
  CU_ASSERT_EQUAL(s.oom_bytes, 9625600);
  CU_ASSERT_EQUAL(s.oom_allocated, 26 * TMiB);
  CU_ASSERT_EQUAL(s.oom_reserved, 46 * TMiB);
  CU_ASSERT_EQUAL(s.n_oom_top, 3); /* live then: the weight, D.main.0, D.main.3 */
  for (int i = 0; i < s.n_oom_top; i++) CU_ASSERT_STRING_NOT_EQUAL(s.oom_top[i].owner, "D.main.2");

  ganfw_timeline_options opt = {.title = "oom", .memory_limit = 50 * TMiB};
  char *svg = svg_of(ev, n, &opt);
  HAS(svg, "<line class=\"limit\"");
  HAS(svg, "class=\"limit-label\"");
  HAS(svg, ">memory_limit 50.00 MiB</text>");
  HAS(svg, "<line class=\"oom\"");
  HAS(svg, "<rect class=\"oom-request\"");
  HAS(svg, ">failed: D.main.5 (workspace) 9.18 MiB</text>");
  HAS(svg, "live at the failure: event 6");
  CU_ASSERT_PTR_NULL(strstr(svg, "at the peak: event"));
  /* the y axis reaches the limit: a tick at 56 MiB (8 MiB steps) */
  HAS(svg, ">56</text>");
  free(svg);

  /* no limit, no OOM event: neither is drawn */
  svg = svg_of(ev, 6, &(ganfw_timeline_options){.title = "ok"});
  CU_ASSERT_PTR_NULL(strstr(svg, "class=\"limit"));
  CU_ASSERT_PTR_NULL(strstr(svg, "class=\"oom"));
  HAS(svg, "at the peak: event 3");
  free(svg);
}

/* The recorder's picture of a run that fails in its first step: the step of the OOM event,
 * the failed request (not the peak's holder) and the limit. */
static void test_step_recorder(void) {
  const char *cfg = write_dcgan("step", 64, "50MiB");
  ganfw_probe_result plan;
  CU_ASSERT_EQUAL_FATAL(ganfw_report_plan(gt_config(cfg, NULL, 0), &plan), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(plan.oom, 1);
  ganfw_oom_picture pic;
  CU_ASSERT_EQUAL_FATAL(ganfw_oom_picture_make(&plan, &pic), GANFW_OK);
  CU_ASSERT_EQUAL(pic.setup, 0);
  CU_ASSERT_EQUAL(pic.memory_limit, 50 * (int64_t)MiB);
  CU_ASSERT_TRUE(pic.summary.step >= 1);
  CU_ASSERT_TRUE(pic.summary.oom_index > 0);
  char want[256];
  snprintf(want, sizeof want, "tried to allocate %s for %s '%s'", mib_text(pic.summary.oom_bytes),
           ganfw_mem_category_name(pic.summary.oom_category), pic.summary.oom_owner);
  HAS(plan.oom_report, want);
  ganfw_timeline_options opt = {.title = "step", .memory_limit = pic.memory_limit};
  char *svg = svg_of(pic.ev, pic.n, &opt);
  snprintf(want, sizeof want, ">failed: %s (%s) %s</text>", pic.summary.oom_owner,
           ganfw_mem_category_name(pic.summary.oom_category), mib_text(pic.summary.oom_bytes));
  HAS(svg, want);
  HAS(svg, ">memory_limit 50.00 MiB</text>");
  free(svg);
  static char written[8192];
  CU_ASSERT_EQUAL(ganfw_oom_record(gt_config(cfg, NULL, 0), &plan, path_in("rec_step"), "msg", "",
                                   written, sizeof written),
                  GANFW_OK);
  CU_ASSERT_TRUE(file_exists(path_in("rec_step/oom/step.png")));
  ganfw_oom_picture_free(&pic);
  ganfw_probe_result_free(&plan);
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw_bin, sizeof ganfw_bin, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_oom_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 200, 20, 5) != 0) return -1;
  ganfw_log_set_level(GANFW_LOG_WARN);
  return 0;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static CU_TestInfo tests[] = {
    {"limit reached: the cache is in the other pool", test_limit_reached_other_pool},
    {"the cache split between the pools is not fragmentation", test_cache_split_between_pools},
    {"fragmentation in the request's pool is named", test_fragmentation_in_the_pool},
    {"device, too large, max_split_size", test_other_causes},
    {"a 20 MiB limit planned", test_plan_small_limit},
    {"the model's state alone does not fit: the advice", test_state_advice},
    {"find-batch: no batch fits, and why", test_find_batch_no_fit},
    {"the recorder at a set-up failure", test_setup_recorder},
    {"the state's advice and oom/ on the command line", test_state_cli},
    {"the picture marks the failed request and the limit", test_picture_marks},
    {"the recorder's picture of a failing step", test_step_recorder},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("oom", tests, suite_init, suite_clean);
}
