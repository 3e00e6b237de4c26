/* device.trace end to end: the allocator's step/stage/pass stamps and LIVE snapshots, the
 * first-N-steps bound, the picture's peak against `plan` and a real step to the byte, the
 * Chrome trace parsed by Python's json with its counters reaching the allocator's peak, a
 * traced run plotted from its memory.json, the OOM flight recorder's files, the OOM advice
 * that names only what fits, and docs/MEMORY.md's OOM example against the binary's output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/error.h"
#include "base/log.h"
#include "tools/timeline.h"
#include "io/trace_file.h"
#include "runtime/alloc.h"
#include "tools/plan.h"
#include "tools/plot.h"
#include "tools/report.h"
#include "io/png_io.h"
#include "testutil.h"

#define MiB ((int64_t)1 << 20)

static char root[64];
static char ganfw[4096];
static char data_set[600]; /* "data.path=<synthetic MNIST>" */
static char out[1 << 17];

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int write_text(const char *rel, const char *text) {
  FILE *f = fopen(path_in(rel), "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && sb.st_size > 0;
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build || !getenv("GANFW_SOURCE_DIR")) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_trace_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 200, 20, 5) != 0) return -1;
  snprintf(data_set, sizeof data_set, "data.path=%s/mnist", root);
  ganfw_log_set_level(GANFW_LOG_WARN);
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 2}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
           "optim: {plugin: adam, lr: 2.0e-4}\n"
           "train: {batch_size: 16, max_steps: 5, sample_every: 0, checkpoint_every: 0}\n"
           "run: {out_dir: %s/run}\n",
           root, root);
  return write_text("small.yaml", text);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs the ganfw binary with args (NULL-terminated); returns the exit code, output in out. */
static int run_ganfw(const char *const *args) {
  char cmd[8192];
  int n = snprintf(cmd, sizeof cmd, "'%s'", ganfw);
  for (const char *const *a = args; *a; a++) n += snprintf(cmd + n, sizeof cmd - n, " '%s'", *a);
  snprintf(cmd + n, sizeof cmd - n, " 2>&1");
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* --- the allocator's recording ------------------------------------------------------------ */

static void test_alloc_steps(void) {
  ganfw_backend *be = ganfw_cpu_backend();
  ganfw_alloc_options opt = {.trace = 1, .trace_steps = 2};
  ganfw_alloc *a = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_create(be, &opt, &a), GANFW_OK);
  void *w = NULL, *x = NULL, *y = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 3 * MiB, GANFW_MEM_PARAM, "net.w", &w), GANFW_OK);
  for (int64_t step = 1; step <= 3; step++) {
    ganfw_alloc_trace_step(a, step);
    CU_ASSERT_EQUAL(ganfw_alloc_tracing(a), step <= 2);
    ganfw_alloc_set_stage(a, GANFW_STAGE_D_REAL);
    const int32_t was = ganfw_alloc_set_pass(a, GANFW_PASS_FORWARD);
    CU_ASSERT_EQUAL(was, GANFW_PASS_NONE);
    ganfw_alloc_trace_op(a, 1, "net.conv");
    CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 2 * MiB, GANFW_MEM_ACTIVATION, "net.conv", &x), GANFW_OK);
    ganfw_alloc_trace_op(a, 0, "net.conv");
    ganfw_alloc_set_pass(a, GANFW_PASS_BACKWARD);
    CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 1 * MiB, GANFW_MEM_WORKSPACE, "net.conv", &y), GANFW_OK);
    ganfw_alloc_free(a, y);
    ganfw_alloc_free(a, x);
    ganfw_alloc_set_pass(a, was);
    ganfw_alloc_trace_step_end(a);
  }
  CU_ASSERT_FALSE(ganfw_alloc_tracing(a)); /* step 3 was past trace_steps */
  ganfw_trace_event *ev = NULL;
  int64_t n = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_trace_copy(a, &ev, &n), GANFW_OK);
  /* setup: segment + alloc; per step: STEP, LIVE w, op begin, seg, alloc, op end, seg?,
   * alloc, free, free, STEP(0) */
  int steps = 0, ends = 0, live = 0, begins = 0, ws = 0;
  for (int64_t i = 0; i < n; i++) {
    const ganfw_trace_event *e = &ev[i];
    if (e->kind == GANFW_TEV_STEP) e->step > 0 ? steps++ : ends++;
    if (e->kind == GANFW_TEV_LIVE) {
      live++;
      CU_ASSERT_EQUAL(e->size, 3 * MiB);
      CU_ASSERT_STRING_EQUAL(e->owner, "net.w");
      CU_ASSERT_EQUAL(e->category, GANFW_MEM_PARAM);
    }
    if (e->kind == GANFW_TEV_OP_BEGIN) {
      begins++;
      CU_ASSERT_STRING_EQUAL(e->owner, "net.conv");
      CU_ASSERT_EQUAL(e->pass, GANFW_PASS_FORWARD);
    }
    if (e->kind == GANFW_TEV_ALLOC && e->category == GANFW_MEM_WORKSPACE) {
      ws++;
      CU_ASSERT_EQUAL(e->stage, GANFW_STAGE_D_REAL);
      CU_ASSERT_EQUAL(e->pass, GANFW_PASS_BACKWARD);
      CU_ASSERT_EQUAL(e->allocated, 6 * MiB); /* totals after the event */
      CU_ASSERT(e->reserved >= 6 * MiB);
      CU_ASSERT(e->step == 1 || e->step == 2);
    }
  }
  CU_ASSERT_EQUAL(steps, 2);
  CU_ASSERT_EQUAL(ends, 2);
  CU_ASSERT_EQUAL(live, 2);
  CU_ASSERT_EQUAL(begins, 2);
  CU_ASSERT_EQUAL(ws, 2);
  /* a step drawn alone: its peak from its own events */
  int64_t first = 0, count = 0;
  ganfw_timeline_summary s;
  CU_ASSERT_EQUAL(ganfw_trace_find_step(ev, n, 2, &first, &count), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_timeline_summarize(ev + first, count, &s), GANFW_OK);
  CU_ASSERT_EQUAL(s.peak_allocated, 6 * MiB);
  CU_ASSERT_EQUAL(s.peak_stage, GANFW_STAGE_D_REAL);
  CU_ASSERT_EQUAL(s.peak_pass, GANFW_PASS_BACKWARD);
  /* the names outlive the allocator once owned */
  char *pool = NULL;
  CU_ASSERT_EQUAL(ganfw_trace_own_names(ev, n, &pool), 0);
  ganfw_alloc_free(a, w);
  ganfw_alloc_destroy(a);
  int named = 0;
  for (int64_t i = 0; i < n; i++) named += ev[i].owner && strcmp(ev[i].owner, "net.conv") == 0;
  CU_ASSERT(named >= 8);
  free(pool);
  free(ev);

  /* empty_cache is counted and traced */
  ganfw_alloc_options on = {.trace = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_create(be, &on, &a), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 12 * MiB, GANFW_MEM_ACTIVATION, "big", &x), GANFW_OK);
  ganfw_alloc_free(a, x);
  ganfw_alloc_empty_cache(a);
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  CU_ASSERT_EQUAL(st.num_empty_cache, 1);
  CU_ASSERT_EQUAL(st.empty_cache_bytes, 12 * MiB); /* the segment of a 12 MiB request */
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_trace_copy(a, &ev, &n), GANFW_OK);
  CU_ASSERT_FATAL(n >= 1);
  CU_ASSERT_EQUAL(ev[n - 1].kind, GANFW_TEV_EMPTY_CACHE);
  CU_ASSERT_EQUAL(ev[n - 1].size, 12 * MiB);
  CU_ASSERT_EQUAL(ev[n - 1].reserved, 0);
  free(ev);
  ganfw_alloc_destroy(a);
}

/* --- the picture's peak, the plan's and a real step's -------------------------------------- */

static void test_plot_peak_exact(void) {
  char cfg[512]; /* path_in's buffers rotate */
  snprintf(cfg, sizeof cfg, "%s", path_in("small.yaml"));
  ganfw_probe_result plan, real;
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_make(gt_config(cfg, NULL, 0), 0, NULL, &plan), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_measure(gt_config(cfg, NULL, 0), &plan, NULL, &real), GANFW_OK);
  ganfw_timeline_summary s;
  ganfw_plot_args pa = {.source = cfg, .output = path_in("plan.svg")};
  CU_ASSERT_EQUAL_FATAL(ganfw_plot(&pa, NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL(s.step, 2);
  CU_ASSERT_EQUAL(s.peak_allocated, plan.peak_allocated);
  CU_ASSERT_EQUAL(s.peak_reserved, plan.peak_reserved);
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    CU_ASSERT_EQUAL(s.peak_category[c], plan.peak_category[c]);
  pa.measure = 1; /* a real step on the CPU, traced */
  pa.output = path_in("real.png");
  CU_ASSERT_EQUAL_FATAL(ganfw_plot(&pa, NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL(s.peak_allocated, real.peak_allocated);
  CU_ASSERT_EQUAL(s.peak_allocated, plan.peak_allocated);
  CU_ASSERT_TRUE(exists(path_in("real.png")));
  printf("\n  plan %lld, real step %lld, picture %lld bytes ", (long long)plan.peak_allocated,
         (long long)real.peak_allocated, (long long)s.peak_allocated);
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
  /* the SVG's title holds the peak */
  FILE *f = fopen(path_in("plan.svg"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  size_t len = fread(out, 1, sizeof out - 1, f);
  out[len] = '\0';
  fclose(f);
  char want[96];
  snprintf(want, sizeof want, "peak %.2f MiB allocated", (double)s.peak_allocated / (double)MiB);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "class=\"cat-activation\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "G backward") ? out : strstr(out, "G bwd"));
  CU_ASSERT_PTR_NULL(strstr(out, "class=\"limit\"")); /* no memory_limit: no line */
  /* a config's device.memory_limit is drawn as a line, labelled */
  const char *limit[] = {"device.memory_limit=200MiB"};
  ganfw_plot_args pl = {.source = cfg, .output = path_in("limit.svg"), .sets = limit, .nsets = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_plot(&pl, NULL, &s), GANFW_OK);
  f = fopen(path_in("limit.svg"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  len = fread(out, 1, sizeof out - 1, f);
  out[len] = '\0';
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "class=\"limit\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "memory_limit 200.00 MiB"));
}

/* --- Chrome's format, read by Python's json ---------------------------------------------- */

static void test_chrome_trace(void) {
  if (system("/usr/bin/python3 -c 'import json' >/dev/null 2>&1") != 0) {
    printf("\n  skipped: /usr/bin/python3 cannot run (it parses the trace) ");
    return;
  }
  char cfg[512]; /* path_in's buffers rotate */
  snprintf(cfg, sizeof cfg, "%s", path_in("small.yaml"));
  ganfw_probe_result plan;
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_make(gt_config(cfg, NULL, 0), 0, NULL, &plan), GANFW_OK);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plot", cfg, "-o", path_in("trace.json"), NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "trace.json: step 2"));
  /* the largest sum of the category counters, the slices and the layer names */
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c \"import json,sys; d=json.load(open('%s')); "
           "ev=d['traceEvents']; c=[e for e in ev if e['ph']=='C' and e['name']=='allocated']; "
           "x=[e for e in ev if e['ph']=='X']; "
           "print('peak', max(sum(e['args'].values()) for e in c)); "
           "print('reserved', max(e['args']['reserved'] for e in ev if e['ph']=='C' and "
           "e['name']=='reserved')); "
           "print('ops', len([e for e in x if e['tid']==3])); "
           "print('layer', int(any(e['name']=='generator.main.0' for e in x))); "
           "print('phases', len(set(e['name'] for e in x if e['tid']==2))); "
           "print('steps', len([e for e in x if e['tid']==1]))\" 2>&1",
           path_in("trace.json"));
  FILE *p = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  long long peak = -1, reserved = -1, ops = -1, layer = -1, phases = -1, steps = -1;
  char line[512];
  while (fgets(line, sizeof line, p)) {
    sscanf(line, "peak %lld", &peak);
    sscanf(line, "reserved %lld", &reserved);
    sscanf(line, "ops %lld", &ops);
    sscanf(line, "layer %lld", &layer);
    sscanf(line, "phases %lld", &phases);
    sscanf(line, "steps %lld", &steps);
    if (!strstr(line, " ")) fputs(line, stdout);
  }
  CU_ASSERT_EQUAL(pclose(p), 0);
  CU_ASSERT_EQUAL(peak, plan.peak_allocated); /* over the set-up and both steps */
  CU_ASSERT_EQUAL(reserved, plan.peak_reserved);
  CU_ASSERT(ops > 20);
  CU_ASSERT_EQUAL(layer, 1);
  CU_ASSERT(phases >= 6); /* D real/D fake/G, forward/backward/optimizer */
  CU_ASSERT_EQUAL(steps, 2);
  ganfw_probe_result_free(&plan);
}

/* --- a traced run, plotted from its memory.json; bad input ---------------------------------- */

static void test_traced_run(void) {
  char cfg[512]; /* path_in's buffers rotate */
  snprintf(cfg, sizeof cfg, "%s", path_in("small.yaml"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--trace", NULL}), 0);
  CU_ASSERT_TRUE(exists(path_in("run/trace.json")));
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){"plot", path_in("run"), "-o", path_in("run.png"), NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "step 3 of")); /* the last of the 3 traced steps */
  CU_ASSERT_TRUE(exists(path_in("run.png")));
  ganfw_trace_event *ev = NULL;
  char *names = NULL;
  int64_t n = 0;
  CU_ASSERT_EQUAL(ganfw_trace_read_memory_json(path_in("run/memory.json"), &ev, &n, &names),
                  GANFW_OK);
  int steps = 0, last_step = 0, ops = 0, states = 0, states_of_a_net = 0;
  for (int64_t i = 0; i < n; i++) {
    if (ev[i].kind == GANFW_TEV_STEP && ev[i].step > 0) steps++, last_step = ev[i].step;
    ops += ev[i].kind == GANFW_TEV_OP_BEGIN && ev[i].owner &&
           strncmp(ev[i].owner, "discriminator.", 14) == 0;
    /* optimizer state says whose it is: "generator.main.0.weight.exp_avg" */
    if (ev[i].kind == GANFW_TEV_ALLOC && ev[i].category == GANFW_MEM_OPTIM_STATE) {
      states++;
      states_of_a_net += ev[i].owner && (strncmp(ev[i].owner, "generator.", 10) == 0 ||
                                         strncmp(ev[i].owner, "discriminator.", 14) == 0);
    }
  }
  CU_ASSERT_EQUAL(steps, 3); /* device.trace: true records the first 3 of the 5 steps */
  CU_ASSERT_EQUAL(last_step, 3);
  CU_ASSERT(ops > 0);
  CU_ASSERT(states > 0);
  CU_ASSERT_EQUAL(states_of_a_net, states);
  free(ev);
  free(names);
  /* step 2 by number; one the trace does not hold */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plot", path_in("run"), "--step", "2", "-o",
                                             path_in("s2.svg"), NULL}),
                  0);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plot", path_in("run"), "--step", "9", "-o",
                                             path_in("s9.svg"), NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "steps 1-3"));
  CU_ASSERT_FALSE(exists(path_in("s9.svg")));
  /* device.trace as a map, and wrong values */
  int rc =
      run_ganfw((const char *[]){cfg, "--set", "device.trace={steps: 1, capacity: 4096}", NULL});
  CU_ASSERT_EQUAL(rc, 0);
  if (rc != 0) printf("\n%s", out);
  CU_ASSERT_EQUAL(ganfw_trace_read_memory_json(path_in("run/memory.json"), &ev, &n, &names),
                  GANFW_OK);
  steps = 0;
  for (int64_t i = 0; i < n; i++) steps += ev[i].kind == GANFW_TEV_STEP && ev[i].step > 0;
  CU_ASSERT_EQUAL(steps, 1);
  free(ev);
  free(names);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", "device.trace=3", NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "device.trace"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", "device.trace={steps: 0}", NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "steps"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", "device.trace={step: 2}", NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "step"));
  /* an untraced run cannot be plotted, and says how to trace one */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, NULL}), 0);
  CU_ASSERT_FALSE(exists(path_in("run/trace.json")));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plot", path_in("run"), "-o", path_in("u.png"), NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "device.trace: true"));
  CU_ASSERT_FALSE(exists(path_in("u.png")));
  /* an output the command cannot write */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plot", cfg, "-o", path_in("x.gif"), NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, ".png or .svg"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plot", path_in("nothing.yaml"), NULL}), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "nothing.yaml"));
  /* plan --plot draws the planned step */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plan", cfg, "--plot", path_in("pp.svg"), NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Predicted peak"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "pp.svg: step 2"));
  CU_ASSERT_TRUE(exists(path_in("pp.svg")));
}

/* --- the OOM flight recorder and the advice ------------------------------------------------- */

static void test_oom_recorder(void) {
  CU_ASSERT_EQUAL_FATAL(write_text("tight.yaml", "extends: small.yaml\n"
                                                 "device: {memory_limit: 5MiB}\n"
                                                 "train: {batch_size: 64}\n"
                                                 "run: {out_dir: oomrun}\n"),
                        0);
  char dir[600];
  snprintf(dir, sizeof dir, "run.out_dir=%s/oomrun", root);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("tight.yaml"), "--set", dir, NULL}), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "out of memory: tried to allocate"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "the failing step:"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "oomrun/oom/report.txt"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "oomrun/oom/step.png"));
  CU_ASSERT_TRUE(exists(path_in("oomrun/oom/report.txt")));
  CU_ASSERT_TRUE(exists(path_in("oomrun/oom/trace.json")));
  CU_ASSERT_TRUE(exists(path_in("oomrun/oom/step.png")));
  /* the report holds the message and the advice */
  FILE *f = fopen(path_in("oomrun/oom/report.txt"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  size_t len = fread(out, 1, sizeof out - 1, f);
  out[len] = '\0';
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "tried to allocate"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "What would fit"));
  /* advice: every variant named after "Try:" is one whose row says it fits */
  const char *try = strstr(out, "\nTry:");
  if (try) {
    const char *labels[] = {"amp f16", "checkpoint segments=2", "accumulate steps=2", "batch 32",
                            "max_split_size 64 MiB"};
    for (int i = 0; i < 5; i++) {
      if (!strstr(try, labels[i])) continue;
      char row[128];
      snprintf(row, sizeof row, "  %-24s peak", labels[i]);
      const char *r = strstr(out, row);
      CU_ASSERT_PTR_NOT_NULL_FATAL(r);
      const char *eol = strchr(r, '\n');
      const char *fits = strstr(r, ": fits");
      CU_ASSERT(fits && (!eol || fits < eol));
    }
  } else {
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Nothing above fits"));
  }
  CU_ASSERT_PTR_NULL(strstr(out, "try device.max_split_size"));
}

/* docs/MEMORY.md shows `ganfw configs/oom_demo.yaml`'s advice as the binary prints it. */
static void test_memory_md_example(void) {
  char cfg[4200], doc[4200], dir[700];
  snprintf(cfg, sizeof cfg, "%s/configs/oom_demo.yaml", getenv("GANFW_SOURCE_DIR"));
  snprintf(doc, sizeof doc, "%s/docs/MEMORY.md", getenv("GANFW_SOURCE_DIR"));
  snprintf(dir, sizeof dir, "run.out_dir=%s/demo", root);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", data_set, "--set", dir, NULL}), 1);
  const char *fit = strstr(out, "What would fit");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fit);
  const char *end = strstr(fit, "\nganfw: the failing step:");
  CU_ASSERT_PTR_NOT_NULL_FATAL(end);
  size_t n = (size_t)(end - fit);
  FILE *f = fopen(doc, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  static char md[1 << 18];
  size_t len = fread(md, 1, sizeof md - 1, f);
  md[len] = '\0';
  fclose(f);
  const char *in_doc = strstr(md, "What would fit");
  CU_ASSERT_PTR_NOT_NULL_FATAL(in_doc);
  CU_ASSERT_EQUAL(strncmp(in_doc, fit, n), 0);
  if (strncmp(in_doc, fit, n) != 0) printf("\n  docs/MEMORY.md should show:\n%.*s\n", (int)n, fit);
}

/* --- device.empty_cache ------------------------------------------------------------------- */

/* The number after `"key": ` in the run's memory.json; -1 when missing. */
static long long memory_json_value(const char *dir, const char *key) {
  char path[700], pat[80];
  snprintf(path, sizeof path, "%s/%s/memory.json", root, dir);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t len = fread(out, 1, sizeof out - 1, f);
  out[len] = '\0';
  fclose(f);
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(out, pat);
  return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static void test_empty_cache_policy(void) {
  char cfg[512], dir[700];
  snprintf(cfg, sizeof cfg, "%s", path_in("small.yaml"));
  snprintf(dir, sizeof dir, "run.out_dir=%s/ec", root);
  /* on_oom (the default): nothing released while the run goes well */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", dir, NULL}), 0);
  CU_ASSERT_EQUAL(memory_json_value("ec", "num_empty_cache"), 0);
  /* after_eval: after each of the 2 sample grids (steps 2 and 4) */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", dir, "--set", "train.max_steps=4",
                                             "--set", "train.sample_every=2", "--set",
                                             "device.empty_cache=after_eval", NULL}),
                  0);
  CU_ASSERT_EQUAL(memory_json_value("ec", "num_empty_cache"), 2);
  CU_ASSERT(memory_json_value("ec", "empty_cache_bytes") > 0);
  /* per_epoch: 200 images of batch 16 are 12 steps an epoch; 13 steps end one epoch */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", dir, "--set", "train.max_steps=13",
                                             "--set", "device.empty_cache=per_epoch", NULL}),
                  0);
  CU_ASSERT_EQUAL(memory_json_value("ec", "num_empty_cache"), 1);
  /* never: an OOM without the release-and-retry */
  CU_ASSERT_EQUAL_FATAL(write_text("tight2.yaml", "extends: small.yaml\n"
                                                  "device: {memory_limit: 5MiB}\n"
                                                  "train: {batch_size: 64}\n"),
                        0);
  /* (in-process: `ganfw CONFIG` refuses a run its plan finds out of memory before it
   * allocates, so the allocator's policy is seen on the run itself) */
  CU_ASSERT_EQUAL(gt_train(path_in("tight2.yaml"), (const char *[]){dir}, 1), GANFW_ERR_OOM);
  CU_ASSERT_EQUAL(memory_json_value("ec", "num_alloc_retries"), 1);
  CU_ASSERT_EQUAL(
      gt_train(path_in("tight2.yaml"), (const char *[]){dir, "device.empty_cache=never"}, 2),
      GANFW_ERR_OOM);
  CU_ASSERT_EQUAL(memory_json_value("ec", "num_alloc_retries"), 0);
  CU_ASSERT_EQUAL(memory_json_value("ec", "num_empty_cache"), 0);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", "device.empty_cache=sometimes", NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "device.empty_cache: unknown policy 'sometimes'"));
}

/* --- the planner's calibration ------------------------------------------------------------ */

static void test_calibration(void) {
  char cfg[512], dir[700];
  snprintf(cfg, sizeof cfg, "%s", path_in("small.yaml"));
  snprintf(dir, sizeof dir, "run.out_dir=%s/cal", root);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", dir, NULL}), 0);
  char path[700];
  snprintf(path, sizeof path, "%s/cal/memory.json", root);
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  size_t len = fread(out, 1, sizeof out - 1, f);
  out[len] = '\0';
  fclose(f);
  const char *cal = strstr(out, "\"calibration\": {");
  CU_ASSERT_PTR_NOT_NULL_FATAL(cal);
  long long pred = -1, meas = -2;
  const char *a = strstr(cal, "\"allocated\": {");
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  CU_ASSERT_EQUAL(
      sscanf(a, "\"allocated\": {\"predicted\": %lld, \"measured\": %lld", &pred, &meas), 2);
  CU_ASSERT_EQUAL(pred, meas); /* a drift would show here */
  CU_ASSERT(pred > 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(cal, "\"activation\": {\"predicted\": "));
  CU_ASSERT_EQUAL(memory_json_value("cal", "num_allocs") > 0, 1);
  /* compare: the plan-vs-measured column */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"compare", cfg, "--steps", "1", "--warmup", "0",
                                             "--csv", path_in("cal.csv"), NULL}),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "plan - measured |"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "| no | +0.00% |"));
}

/* --- memory.html, and what headless Chromium makes of it ------------------------------------ */

static int count_str(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)len + 1);
  if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
    free(buf);
    buf = NULL;
  }
  if (buf) buf[len] = '\0';
  fclose(f);
  return buf;
}

/* Chromium's path, or NULL when this machine has none. */
static const char *chromium(void) {
  static const char *const paths[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser"};
  for (int i = 0; i < 2; i++)
    if (access(paths[i], X_OK) == 0) return paths[i];
  return NULL;
}

static void test_memory_html(void) {
  char cfg[512], dir[700], html[700];
  snprintf(cfg, sizeof cfg, "%s", path_in("small.yaml"));
  snprintf(dir, sizeof dir, "run.out_dir=%s/rep", root);
  snprintf(html, sizeof html, "%s/rep/memory.html", root);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){cfg, "--set", dir, NULL}), 0);
  char *page = read_file(html);
  CU_ASSERT_PTR_NOT_NULL_FATAL(page);
  /* what the page must hold: the planned step's peak in the title, one path per category
   * the step has, the by-layer table; and nothing it would fetch */
  ganfw_probe_result plan;
  CU_ASSERT_EQUAL_FATAL(ganfw_report_plan(gt_config(cfg, NULL, 0), &plan), GANFW_OK);
  int64_t first = 0, count = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_trace_find_step(plan.trace, plan.n_trace, 2, &first, &count),
                        GANFW_OK);
  ganfw_timeline_summary sum;
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_summarize(plan.trace + first, count, &sum), GANFW_OK);
  int cats = 0;
  for (int c = 0; c < GANFW_MEM_COUNT; c++) cats += sum.peak_category[c] > 0;
  char want[128];
  snprintf(want, sizeof want, "peak %.2f MiB allocated</title>", (double)sum.peak_allocated / MiB);
  CU_ASSERT_PTR_NOT_NULL(strstr(page, want));
  CU_ASSERT_EQUAL(count_str(page, "<path class=\"cat-"), cats);
  CU_ASSERT_PTR_NOT_NULL(strstr(page, "<td>generator.main.0</td>"));
  CU_ASSERT_PTR_NULL(strstr(page, "<script"));
  CU_ASSERT_PTR_NULL(strstr(page, " src="));
  CU_ASSERT_PTR_NULL(strstr(page, " href="));
  CU_ASSERT_PTR_NULL(strstr(page, "url("));
  ganfw_probe_result_free(&plan);
  free(page);
  /* compare --html: the table first, then each config's step */
  char cmp[700];
  snprintf(cmp, sizeof cmp, "%s/compare.html", root);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"compare", cfg, "--steps", "1", "--warmup", "0",
                                             "--html", cmp, NULL}),
                  0);
  page = read_file(cmp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(page);
  CU_ASSERT_PTR_NOT_NULL(strstr(page, "Side by side (ganfw compare)"));
  CU_ASSERT_EQUAL(count_str(page, "<svg"), 1);
  free(page);

  const char *chrome = chromium();
  if (!chrome) {
    printf("\n  skipped the browser: no Chromium here (Debian's package chromium) ");
    return;
  }
  /* the page as Chromium rendered it (the DOM after parsing), and a screenshot */
  char cmd[4096], shot[700], profile[700];
  snprintf(shot, sizeof shot, "%s/shot.png", root);
  snprintf(profile, sizeof profile, "%s/chromium-profile", root);
  const char *flags = "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                      "--disable-background-networking --disable-component-update "
                      "--disable-sync --disable-dev-shm-usage";
  snprintf(cmd, sizeof cmd,
           "timeout 120 '%s' %s --user-data-dir='%s' --dump-dom 'file://%s' 2>/dev/null", chrome,
           flags, profile, html);
  FILE *p = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  CU_ASSERT_EQUAL(pclose(p), 0);
  CU_ASSERT_EQUAL(count_str(out, "<path class=\"cat-"), cats);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  snprintf(cmd, sizeof cmd,
           "timeout 120 '%s' %s --user-data-dir='%s' --hide-scrollbars --window-size=1280,1000 "
           "--screenshot='%s' 'file://%s' >/dev/null 2>&1",
           chrome, flags, profile, shot, html);
  CU_ASSERT_EQUAL(system(cmd), 0);
  float *px = NULL;
  int32_t c = 0, h = 0, w = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(shot, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT_EQUAL(w, 1280);
  CU_ASSERT_EQUAL(h, 1000);
  /* the picture was drawn: many pixels far from the white page and from grey */
  int64_t coloured = 0;
  for (int64_t i = 0; i < (int64_t)h * w; i++) {
    const float r = px[i], g = px[(int64_t)h * w + i], b = px[2 * (int64_t)h * w + i];
    const float hi = r > g ? (r > b ? r : b) : (g > b ? g : b);
    const float lo = r < g ? (r < b ? r : b) : (g < b ? g : b);
    coloured += hi - lo > 0.25f;
  }
  printf("\n  screenshot %dx%d, %lld coloured pixels ", (int)w, (int)h, (long long)coloured);
  CU_ASSERT(coloured > 20000);
  free(px);
}

static CU_TestInfo tests[] = {
    {"allocator: steps, stages, passes, LIVE snapshots, the step bound", test_alloc_steps},
    {"plot: the picture's peak is the plan's and a real step's", test_plot_peak_exact},
    {"plot: Chrome trace parses, its counters reach the peak", test_chrome_trace},
    {"a traced run, plotted from memory.json; bad input", test_traced_run},
    {"OOM flight recorder and advice that fits", test_oom_recorder},
    {"docs/MEMORY.md's OOM example is the binary's output", test_memory_md_example},
    {"device.empty_cache: on_oom, after_eval, per_epoch, never", test_empty_cache_policy},
    {"calibration: the plan's peaks in memory.json and compare", test_calibration},
    {"memory.html: self-contained, and as headless Chromium renders it", test_memory_html},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("trace", tests, suite_init, suite_clean);
}
