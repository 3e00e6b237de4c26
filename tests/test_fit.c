/* `ganfw fit` on a small DC-GAN over synthetic digits: the chosen candidate's planned peak
 * is within the budget and it is the fastest feasible one by the model; a budget below
 * every candidate names the smallest feasible budget; budgets with bad units are refused
 * naming --budget; the calibration cache is written, then reused; the written config loads,
 * `extends:` the input and plans to the chosen candidate's peak; `memory: [{plugin: auto}]`
 * searches at the start of a run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "tools/fit.h"
#include "tools/plan.h"
#include "testutil.h"

static char root[64];
static char ganfw[4096];
static char out[65536];

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_fit_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0 || mkdir(path_in("conf"), 0755) != 0)
    return -1;
  if (gt_write_mnist(path_in("mnist"), 32, 8, 5) != 0) return -1;
  ganfw_log_set_level(GANFW_LOG_WARN);
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 1, memory_limit: 256MiB}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 16, ndf: 16}\n"
           "optim: {plugin: adam, lr: 2.0e-4}\n"
           "train: {batch_size: 16, max_steps: 1, sample_every: 0, checkpoint_every: 0}\n"
           "run: {out_dir: %s/run, samples: 4}\n",
           root, root);
  FILE *f = fopen(path_in("conf/gan.yaml"), "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static int run_ganfw(const char *const *args) {
  char cmd[8192];
  int n = snprintf(cmd, sizeof cmd, "cd '%s' && '%s'", root, ganfw);
  for (const char *const *a = args; *a; a++) n += snprintf(cmd + n, sizeof cmd - n, " '%s'", *a);
  snprintf(cmd + n, sizeof cmd - n, " 2>&1");
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* fit of the small GAN under `budget` bytes into *res (free it), quiet, the cache in
 * root/cache, writing root/<output> unless output is NULL. */
static ganfw_status fit(int64_t budget, const char *output, int32_t confirm,
                        ganfw_fit_result *res) {
  static char outpath[512], cache[512];
  snprintf(cache, sizeof cache, "%s", path_in("cache"));
  if (output) snprintf(outpath, sizeof outpath, "%s", path_in(output));
  ganfw_fit_options opt = {.budget = budget,
                           .confirm = confirm,
                           .calib_steps = 1,
                           .output = output ? outpath : "",
                           .cache_dir = cache};
  return ganfw_fit(gt_config(path_in("conf/gan.yaml"), NULL, 0), &opt, res, NULL);
}

/* The smallest feasible budget, from a search that nothing fits. */
static int64_t smallest_budget(void) {
  ganfw_fit_result r;
  CU_ASSERT_EQUAL(fit(1, NULL, 0, &r), GANFW_ERR_OOM);
  ganfw_error_clear();
  const int64_t lo = r.smallest >= 0 ? r.candidates[r.smallest].peak_reserved : 0;
  CU_ASSERT(r.smallest >= 0 && r.candidates[r.smallest].verified);
  ganfw_fit_result_free(&r);
  return lo;
}

static int64_t largest_peak(const ganfw_fit_result *r) {
  int64_t m = 0;
  for (int32_t i = 0; i < r->n_candidates; i++)
    if (r->candidates[i].planned && r->candidates[i].peak_allocated > m)
      m = r->candidates[i].peak_allocated;
  return m;
}

static void test_budget_units(void) {
  int64_t b = 0;
  double p = 0;
  CU_ASSERT_EQUAL(ganfw_fit_parse_budget("512MiB", &b, &p), GANFW_OK);
  CU_ASSERT_EQUAL(b, 512ll << 20);
  CU_ASSERT_EQUAL(ganfw_fit_parse_budget("6GiB", &b, &p), GANFW_OK);
  CU_ASSERT_EQUAL(b, 6ll << 30);
  CU_ASSERT_EQUAL(ganfw_fit_parse_budget("12MB", &b, &p), GANFW_OK);
  CU_ASSERT_EQUAL(b, 12000000);
  CU_ASSERT_EQUAL(ganfw_fit_parse_budget("1048576", &b, &p), GANFW_OK);
  CU_ASSERT_EQUAL(b, 1048576);
  CU_ASSERT_EQUAL(ganfw_fit_parse_budget("60%", &b, &p), GANFW_OK);
  CU_ASSERT_EQUAL(b, 0);
  CU_ASSERT_DOUBLE_EQUAL(p, 60.0, 1e-12);
  const char *bad[] = {"6 parsecs", "12XB", "", "0%", "150%", "-5MiB", "0", "abc%"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_EQUAL(ganfw_fit_parse_budget(bad[i], &b, &p), GANFW_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "--budget"));
  }
  ganfw_error_clear();
}

/* The search at a budget between the smallest and the largest candidate. */
static void test_chosen_fits_and_is_fastest(void) {
  ganfw_fit_result all;
  CU_ASSERT_EQUAL_FATAL(fit((int64_t)1 << 40, NULL, 0, &all), GANFW_OK);
  const int64_t lo = smallest_budget(), hi = largest_peak(&all);
  CU_ASSERT_FATAL(lo > 0 && lo < hi);
  CU_ASSERT(all.n_candidates >= 3 * 5 * 3); /* precision x micro-batches 1,2,4,8,16 x ckpt */
  /* a budget just below the fastest candidate's peak (by the calibration, which depends on
   * the machine's load): the search must then pass over it */
  int64_t fastest_peak = 0;
  double fastest = 0.0;
  for (int32_t i = 0; i < all.n_candidates; i++) {
    const ganfw_fit_candidate *o = &all.candidates[i];
    if (!o->refused && o->predicted_s > 0.0 && (fastest == 0.0 || o->predicted_s < fastest))
      fastest = o->predicted_s, fastest_peak = o->peak_allocated;
  }
  ganfw_fit_result_free(&all);
  const int64_t budget = fastest_peak - 1 > lo ? fastest_peak - 1 : lo + (hi - lo) / 3;
  ganfw_fit_result r;
  CU_ASSERT_EQUAL_FATAL(fit(budget, "conf/out/gan_fit.yaml", 0, &r), GANFW_OK);
  CU_ASSERT_FATAL(r.chosen >= 0);
  const ganfw_fit_candidate *c = &r.candidates[r.chosen];
  CU_ASSERT(c->peak_reserved <= budget);
  CU_ASSERT(c->predicted_s > 0.0);
  /* every candidate faster by the model was planned as the config runs and did not fit, or
   * its allocated peak alone is over the budget */
  int32_t n_faster = 0;
  for (int32_t i = 0; i < r.n_candidates; i++) {
    const ganfw_fit_candidate *o = &r.candidates[i];
    if (!o->planned) continue;
    CU_ASSERT_DOUBLE_EQUAL(o->predicted_s, ganfw_fit_predict(&r.cal, o, r.n_dims), 1e-12);
    CU_ASSERT(o->peak_allocated <= o->peak_reserved || !o->verified);
    if (o->verified) CU_ASSERT_EQUAL(o->feasible, o->peak_reserved <= budget);
    if (o->predicted_s < c->predicted_s) {
      n_faster++;
      CU_ASSERT(o->peak_allocated > budget || (o->verified && o->peak_reserved > budget));
    }
  }
  if (fastest_peak - 1 > lo) CU_ASSERT(n_faster > 0); /* the budget excludes the fastest */
  /* the written config: extends the input (relative to its own folder), loads, and plans
   * to the chosen candidate's peak */
  FILE *f = fopen(r.written, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char text[4096];
  size_t len = fread(text, 1, sizeof text - 1, f);
  text[len] = '\0';
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nextends: ../gan.yaml\n"));
  ganfw_run_config *rc = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_run_config_open(r.written, NULL, 0, &rc), GANFW_OK);
  ganfw_probe_result plan;
  CU_ASSERT_EQUAL(ganfw_plan_make(rc, 0, NULL, &plan), GANFW_OK);
  CU_ASSERT_EQUAL(plan.oom, 0);
  CU_ASSERT_EQUAL(plan.peak_reserved, c->peak_reserved);
  CU_ASSERT_EQUAL(plan.peak_allocated, c->peak_allocated);
  CU_ASSERT_EQUAL(plan.micro_batches, c->micro_batches);
  ganfw_probe_result_free(&plan);
  ganfw_run_config_free(rc);
  ganfw_fit_result_free(&r);
}

/* The first search measured the calibration and wrote it; this one reads it. */
static void test_calibration_cached(void) {
  ganfw_fit_result r;
  CU_ASSERT_EQUAL_FATAL(fit((int64_t)1 << 40, NULL, 0, &r), GANFW_OK);
  CU_ASSERT_EQUAL(r.cal.cached, 1);
  CU_ASSERT(r.cal.n_points >= 3 * 3 + 2); /* 3 precisions x k 1,4,16; checkpoint 2, 3 */
  struct stat sb;
  CU_ASSERT_EQUAL(stat(r.cal.path, &sb), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.cal.path, path_in("cache")));
  const ganfw_fit_calibration first = r.cal;
  ganfw_fit_result_free(&r);
  /* a different config (another batch) has its own entry, measured now */
  ganfw_fit_options opt = {
      .budget = (int64_t)1 << 40, .calib_steps = 1, .output = "", .cache_dir = path_in("cache")};
  const char *sets[] = {"train.batch_size=4"};
  CU_ASSERT_EQUAL_FATAL(ganfw_fit(gt_config(path_in("conf/gan.yaml"), sets, 1), &opt, &r, NULL),
                        GANFW_OK);
  CU_ASSERT_EQUAL(r.cal.cached, 0);
  CU_ASSERT(strcmp(r.cal.path, first.path) != 0);
  ganfw_fit_result_free(&r);
  /* a strategy the config refuses alone (step_in_backward with clipping) is kept in the
   * cache as unpriced, so that the next search reuses the calibration */
  const char *clip[] = {"train.clip_grad_norm=1.0"};
  for (int run = 0; run < 2; run++) {
    CU_ASSERT_EQUAL_FATAL(ganfw_fit(gt_config(path_in("conf/gan.yaml"), clip, 1), &opt, &r, NULL),
                          GANFW_OK);
    CU_ASSERT_EQUAL(r.cal.cached, run);
    int32_t unpriced = 0;
    for (int32_t i = 0; i < r.cal.n_points; i++)
      unpriced += r.cal.points[i].dim >= 0 && r.cal.points[i].seconds == 0.0;
    CU_ASSERT(unpriced >= 1 || !r.dim_found[4]);
    ganfw_fit_result_free(&r);
  }
}

static void test_budget_below_every_candidate(void) {
  const int64_t lo = smallest_budget();
  CU_ASSERT_FATAL(lo > 0);
  ganfw_fit_result r;
  CU_ASSERT_EQUAL(fit(lo - 1, NULL, 0, &r), GANFW_ERR_OOM);
  char want[96];
  snprintf(want, sizeof want, "smallest feasible budget is %.2f MiB (%lld bytes)",
           (double)lo / (1024.0 * 1024.0), (long long)lo);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), want));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "is the largest part"));
  CU_ASSERT_EQUAL(r.chosen, -1);
  ganfw_fit_result_free(&r);
  ganfw_error_clear();
  CU_ASSERT_EQUAL(fit(lo, NULL, 0, &r), GANFW_OK); /* and at exactly that, it fits */
  CU_ASSERT(r.chosen >= 0 && r.candidates[r.chosen].peak_reserved <= lo);
  ganfw_fit_result_free(&r);
}

/* A percentage is of device.memory_limit (256 MiB here). */
static void test_percent_of_memory_limit(void) {
  ganfw_fit_options opt = {
      .budget_percent = 50.0, .calib_steps = 1, .output = "", .cache_dir = path_in("cache")};
  ganfw_fit_result r;
  CU_ASSERT_EQUAL(ganfw_fit(gt_config(path_in("conf/gan.yaml"), NULL, 0), &opt, &r, NULL),
                  GANFW_OK);
  CU_ASSERT_EQUAL(r.budget, (int64_t)128 << 20);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.budget_source, "device.memory_limit"));
  ganfw_fit_result_free(&r);
}

/* The command: its table and file, a confirming run, and the errors naming --budget. */
static void test_cli(void) {
  const char *ok[] = {"fit", "conf/gan.yaml", "--budget", "50%", "--calib-steps", "1", NULL};
  char env[600];
  snprintf(env, sizeof env, "%s", path_in("xdg"));
  setenv("XDG_CACHE_HOME", env, 1);
  int rc = run_ganfw(ok);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Pareto front"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Written: gan_fit.yaml"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "within the budget"));
  if (rc != 0) fprintf(stderr, "%s\n", out);
  struct stat sb;
  CU_ASSERT_EQUAL(stat(path_in("gan_fit.yaml"), &sb), 0);
  CU_ASSERT_EQUAL(stat(path_in("xdg/ganfw"), &sb), 0);
  const char *show[] = {"fit", "conf/gan.yaml", "--budget",
                        "50%", "--no-confirm",  "--show-calibration",
                        "-o",  "again.yaml",    NULL};
  CU_ASSERT_EQUAL(run_ganfw(show), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Calibration (from the cache"));
  const char *plot[] = {"fit",    "conf/gan.yaml", "--budget", "50%",          "--no-confirm",
                        "--plot", "front.svg",     "-o",       "plotted.yaml", NULL};
  CU_ASSERT_EQUAL(run_ganfw(plot), 0);
  FILE *f = fopen(path_in("front.svg"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char svg[65536];
  size_t len = fread(svg, 1, sizeof svg - 1, f);
  svg[len] = '\0';
  fclose(f);
  CU_ASSERT(strncmp(svg, "<svg", 4) == 0 && strstr(svg, "</svg>"));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "fill=\"#c00\"><title>")); /* the chosen one */
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "fill=\"#06c\"><title>")); /* the front */
  const char *html[] = {"fit",    "conf/gan.yaml", "--budget", "50%",           "--no-confirm",
                        "--html", "memory.html",   "-o",       "reported.yaml", NULL};
  CU_ASSERT_EQUAL(run_ganfw(html), 0);
  f = fopen(path_in("memory.html"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  len = fread(svg, 1, sizeof svg - 1, f);
  svg[len] = '\0';
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<caption>Pareto front"));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "reported.yaml: the chosen config, step 2 (plan)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<svg")); /* the front, and the step's timeline */
  const char *png[] = {"fit", "conf/gan.yaml", "--budget", "50%", "--plot", "front.png", NULL};
  CU_ASSERT_EQUAL(run_ganfw(png), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--plot 'front.png'"));
  const char *unit[] = {"fit", "conf/gan.yaml", "--budget", "6 parsecs", NULL};
  CU_ASSERT_EQUAL(run_ganfw(unit), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--budget '6 parsecs'"));
  /* a config that names memory strategies itself */
  FILE *m = fopen(path_in("conf/amp.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  fputs("extends: gan.yaml\nmemory: [{plugin: amp, dtype: f16}]\n", m);
  fclose(m);
  const char *strat[] = {"fit", "conf/amp.yaml", "--budget", "50%", NULL};
  CU_ASSERT_EQUAL(run_ganfw(strat), 2);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(out, "already names memory strategies (memory: at conf/amp.yaml:2"));
  const char *none[] = {"fit", "conf/gan.yaml", NULL};
  CU_ASSERT_EQUAL(run_ganfw(none), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--budget is required"));
  const char *tiny[] = {"fit", "conf/gan.yaml", "--budget", "1KiB", NULL};
  CU_ASSERT_EQUAL(run_ganfw(tiny), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "smallest feasible budget"));
  const char *fb[] = {"find-batch", "conf/gan.yaml", "--fit", "--budget",
                      "50%",        "--max-batch",   "32",    NULL};
  CU_ASSERT_EQUAL(run_ganfw(fb), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Largest batch that fits: 32"));
  unsetenv("XDG_CACHE_HOME");
}

/* A strategy found by name whose configure refuses accumulation (the stand-in for
 * step_in_backward in <build>/tests/plugins/fit): its dimension counts, the combinations it
 * refuses are skipped, the others are planned and priced by a measured ratio. */
static void test_refused_combinations_skipped(void) {
  char dir[4200], set[4300];
  snprintf(dir, sizeof dir, "%s/tests/plugins/fit", getenv("GANFW_TEST_BUILD_DIR"));
  snprintf(set, sizeof set, "plugin_path=[%s]", dir);
  const char *sets[] = {set};
  ganfw_fit_options opt = {
      .budget = (int64_t)1 << 40, .calib_steps = 1, .output = "", .cache_dir = path_in("cache")};
  ganfw_fit_result r;
  CU_ASSERT_EQUAL_FATAL(ganfw_fit(gt_config(path_in("conf/gan.yaml"), sets, 1), &opt, &r, NULL),
                        GANFW_OK);
  int32_t d = -1;
  for (int32_t i = 0; i < r.n_dims; i++)
    if (strcmp(r.dim_names[i], "step in backward") == 0) d = i;
  CU_ASSERT_FATAL(d >= 0);
  CU_ASSERT_EQUAL(r.dim_found[d], 1);
  int32_t refused = 0, with = 0;
  for (int32_t i = 0; i < r.n_candidates; i++) {
    const ganfw_fit_candidate *c = &r.candidates[i];
    if (c->choice[d] == 0) {
      CU_ASSERT_EQUAL(c->refused, 0);
      continue;
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(c->label, "step_in_backward"));
    CU_ASSERT_EQUAL(c->refused, c->micro_batches > 1);
    refused += c->refused;
    if (!c->refused) {
      with++;
      CU_ASSERT(c->predicted_s > 0.0); /* its ratio was measured */
    }
  }
  CU_ASSERT(refused > 0 && with > 0);
  ganfw_fit_result_free(&r);
}

/* `memory: [{plugin: auto, budget: B}]`: the search at the start of a run; the chosen config
 * plans within the budget and carries it as device.memory_limit; `ganfw CONFIG` trains with
 * it, the whole run within the budget; bad entries name their key. */
static ganfw_status auto_config(const char *name, const char *memory, ganfw_run_config **chosen) {
  char text[512];
  snprintf(text, sizeof text, "extends: gan.yaml\nmemory: %s\n", memory);
  FILE *f = fopen(path_in(name), "w");
  if (!f) return GANFW_ERR_IO;
  fputs(text, f);
  fclose(f);
  return ganfw_fit_auto(gt_config(path_in(name), NULL, 0), path_in("cache"), chosen);
}

static void test_auto(void) {
  const int64_t lo = smallest_budget();
  char memory[128];
  snprintf(memory, sizeof memory, "[{plugin: auto, budget: %lld}]", (long long)lo);
  ganfw_run_config *chosen = NULL;
  CU_ASSERT_EQUAL_FATAL(auto_config("conf/auto.yaml", memory, &chosen), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(chosen);
  ganfw_probe_options popt = {.meta = 1, .warmup = 1, .steps = 1};
  ganfw_probe_result r;
  CU_ASSERT_EQUAL(ganfw_probe_run(chosen, &popt, &r), GANFW_OK);
  CU_ASSERT(!r.oom && r.peak_reserved <= lo);
  CU_ASSERT_EQUAL(r.config_memory_limit, lo);
  ganfw_probe_result_free(&r);
  ganfw_run_config_free(chosen);
  chosen = NULL;
  /* no auto entry: nothing chosen, the config as is */
  CU_ASSERT_EQUAL(auto_config("conf/noauto.yaml", "[{plugin: amp, dtype: f16}]", &chosen),
                  GANFW_OK);
  CU_ASSERT_PTR_NULL(chosen);
  struct {
    const char *memory, *says;
    ganfw_status code;
  } bad[] = {
      {"[{plugin: auto}]", "memory[0].budget is required", GANFW_ERR_CONFIG},
      {"[{plugin: auto, budget: 6 parsecs}]", "memory[0].budget '6 parsecs'", GANFW_ERR_CONFIG},
      {"[{plugin: auto, budget: 40MiB, segments: 2}]", "memory[0].segments", GANFW_ERR_CONFIG},
      {"[{plugin: amp, dtype: f16}, {plugin: auto, budget: 40MiB}]", "names 1 others",
       GANFW_ERR_CONFIG},
      {"[{plugin: auto, budget: 1KiB}]", "memory[0].budget 0.00 MiB", GANFW_ERR_OOM},
      {"[{plugin: auto, budget: 1KiB}]", "smallest feasible budget", GANFW_ERR_OOM},
      {"[{plugin: auto, budget: 1KiB}]", "allow_batch: true", GANFW_ERR_OOM},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_EQUAL(auto_config("conf/bad.yaml", bad[i].memory, &chosen), bad[i].code);
    CU_ASSERT_PTR_NULL(chosen);
    const char *msg = ganfw_error_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, bad[i].says));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "conf/bad.yaml:2"));
    if (!strstr(msg, bad[i].says)) fprintf(stderr, "\n%s\n", msg);
    ganfw_error_clear();
  }
  /* `ganfw CONFIG` trains with the choice; the run's peak stays within the budget */
  char env[600];
  snprintf(env, sizeof env, "%s", path_in("xdg"));
  setenv("XDG_CACHE_HOME", env, 1);
  const char *train[] = {"conf/auto.yaml", "--set", "train.max_steps=2", NULL};
  const int train_rc = run_ganfw(train);
  CU_ASSERT_EQUAL(train_rc, 0);
  if (train_rc != 0) /* what the run said, to tell a refusal from an out-of-memory */
    fprintf(stderr, "\n  ganfw conf/auto.yaml exited %d:\n%s\n", train_rc,
            strlen(out) > 3000 ? out + strlen(out) - 3000 : out);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "memory: auto chose"));
  const char *peak = strstr(out, "peak memory of the run: ");
  double alloc = 0, resv = 0;
  CU_ASSERT(peak && sscanf(peak, "peak memory of the run: %lf MiB allocated, %lf MiB reserved",
                           &alloc, &resv) == 2);
  CU_ASSERT(resv > 0 && resv * 1048576.0 <= (double)lo + 0.06 * 1048576.0); /* printed to 0.1 */
  const char *plan[] = {"plan", "conf/auto.yaml", NULL};
  CU_ASSERT_EQUAL(run_ganfw(plan), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "memory: auto chose"));
  /* a command that does not search names the way */
  const char *fb[] = {"find-batch", "conf/auto.yaml", NULL};
  CU_ASSERT_EQUAL(run_ganfw(fb), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "plugin auto is resolved by `ganfw CONFIG`"));
  unsetenv("XDG_CACHE_HOME");
}

static CU_TestInfo tests[] = {
    {"combinations a strategy refuses are skipped", test_refused_combinations_skipped},
    {"budget units and percentages", test_budget_units},
    {"the chosen fits and is the fastest feasible", test_chosen_fits_and_is_fastest},
    {"the calibration is cached and reused", test_calibration_cached},
    {"a budget below every candidate names the smallest", test_budget_below_every_candidate},
    {"a percentage of device.memory_limit", test_percent_of_memory_limit},
    {"the fit command", test_cli},
    {"memory: plugin auto", test_auto},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("fit", tests, suite_init, suite_clean);
}
