/* Data-parallel training as a user starts it: `mpirun -np 2 ganfw CONFIG` against one
 * process at the same global batch (weights and losses), memory strategy zero (the same
 * run, half the optimizer state per rank), a checkpoint resumed on another number of
 * ranks, the per-rank plan, and the faults: a rank that hangs or dies ends the job within
 * a bounded time naming it, ranks with different configs are refused, a batch that does
 * not split is refused, and `ganfw launch` without mpirun says what to install.
 *
 * The runs are a small DC-GAN (nz 16, ngf 8, ndf 8) at 32x32 on a generated MNIST-format
 * data set, 20 steps at the global batch 64 (32 rows per rank), Adam as PyTorch's DC-GAN
 * example sets it. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "testutil.h"

static char root[64];
static char ganfw[4096];
static char mpirun[4096];
static char out[1 << 16]; /* stdout and stderr of the last command */

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

/* Runs `cmd` through the shell, capturing stdout and stderr; the exit code (128 + signal
 * when killed); *seconds the wall time. */
static int run(const char *cmd, double *seconds) {
  char full[33000];
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  FILE *p = popen(full, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (seconds)
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ganfw ARGS as one process. */
static int one(const char *args) {
  char cmd[32768];
  snprintf(cmd, sizeof cmd, "'%s' %s", ganfw, args);
  return run(cmd, NULL);
}

/* The sanitizer settings of the ranks: Open MPI's plugins leak what they keep for the
 * life of the process from code LeakSanitizer cannot name, so the ranks run without leak
 * detection (ASan's other checks and UBSan stay on); the same sessions, reducers and
 * sharded optimizers are leak-checked in this process's own runs (plan --ranks). */
static const char *rank_sanitizers(void) {
  static char opts[512];
  const char *asan = getenv("ASAN_OPTIONS");
  snprintf(opts, sizeof opts, "-x ASAN_OPTIONS=%s%sdetect_leaks=0", asan ? asan : "",
           asan && *asan ? ":" : "");
  return opts;
}

/* The command line of mpirun -np N ganfw ARGS (env: extra `-x NAME=VALUE` options, or ""). */
static void ranks_cmd(char *cmd, size_t cap, int n, const char *env, const char *args) {
  snprintf(cmd, cap,
           "timeout 300 '%s' --oversubscribe %s -x OPENBLAS_CORETYPE %s %s -np %d '%s' %s", mpirun,
           geteuid() == 0 ? "--allow-run-as-root" : "", rank_sanitizers(), env, n, ganfw, args);
}

/* mpirun -np N ganfw ARGS (env: extra `-x NAME=VALUE` options, or ""). */
static int ranks(int n, const char *env, const char *args, double *seconds) {
  char cmd[32768];
  ranks_cmd(cmd, sizeof cmd, n, env, args);
  return run(cmd, seconds);
}

/* ranks(), reading the output as it comes: *after the seconds from the first line that
 * contains `mark` to the end of the job (-1 when no line did). */
static int ranks_after(int n, const char *env, const char *args, const char *mark, double *after) {
  char cmd[32768], full[33000];
  ranks_cmd(cmd, sizeof cmd, n, env, args);
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  *after = -1;
  FILE *p = popen(full, "r");
  if (!p) return -1;
  struct timespec t0 = {0, 0}, t1;
  int seen = 0;
  size_t len = 0;
  char line[8192];
  while (fgets(line, sizeof line, p)) {
    if (!seen && strstr(line, mark)) {
      seen = 1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
    }
    const size_t k = strlen(line);
    if (len + k < sizeof out) {
      memcpy(out + len, line, k);
      len += k;
    }
  }
  out[len] = '\0';
  const int status = pclose(p);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (seen) *after = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int have_mpi(void) {
#ifdef GANFW_HAVE_MPI
  return 1;
#else
  return 0;
#endif
}

/* The suite needs mpirun where the build has MPI; a build without MPI skips (and says). */
static int skip(void) {
  if (have_mpi()) return 0;
  fprintf(stderr, "test_dist: this build has no MPI: the data-parallel runs are skipped\n");
  return 1;
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR"), *src = getenv("GANFW_SOURCE_DIR");
  if (!build || !src) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_dist_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 640, 20, 11) != 0) return -1;
  /* One OpenBLAS kernel on every machine of this kind (AVX2 and AVX-512 ones alike), so
   * that the runs below sum in the same order wherever the suite runs; ganfw's own kernels
   * give the same bits at every SIMD level. */
  setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  if (run("command -v mpirun", NULL) == 0) {
    size_t n = strcspn(out, "\n");
    snprintf(mpirun, sizeof mpirun, "%.*s", (int)n, out);
  }
  if (have_mpi() && !*mpirun) {
    fprintf(stderr, "test_dist: this build has MPI but mpirun is not on PATH: install "
                    "openmpi-bin (scripts/deps.sh)\n");
    return -1;
  }
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32, prefetch: false}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
           "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
           "train:\n"
           "  batch_size: 64\n"
           "  max_steps: 20\n"
           "  log_every: 1\n"
           "  sample_every: 0\n"
           "  checkpoint_every: 10\n",
           root);
  FILE *f = fopen(path_in("gan.yaml"), "w");
  if (!f) return -1;
  fputs(text, f);
  fclose(f);
  return 0;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* The largest ||a - b|| / ||a|| over the tensors of two checkpoints whose names start with
 * `prefix` ("" every one; names that start with "optim." are left out unless `optim`);
 * *count the tensors compared. -1 when a file is unreadable or they differ in names. */
static double worst_rel(const char *a, const char *b, int optim, int *count, char *worst,
                        size_t n) {
  ganfw_st_file *fa = NULL, *fb = NULL;
  double w = -1;
  *count = 0;
  if (ganfw_st_open(a, &fa) != GANFW_OK || ganfw_st_open(b, &fb) != GANFW_OK) goto done;
  if (ganfw_st_count(fa) != ganfw_st_count(fb)) goto done;
  w = 0;
  for (int64_t i = 0; i < ganfw_st_count(fa); i++) {
    const ganfw_st_tensor *x = ganfw_st_at(fa, i), *y = ganfw_st_find(fb, x->name);
    if (!y || y->nbytes != x->nbytes) {
      w = -1;
      break;
    }
    if ((!optim && strncmp(x->name, "optim.", 6) == 0) || x->dtype != GANFW_DTYPE_F32) continue;
    const float *p = x->data, *q = y->data;
    double d = 0, s = 0;
    for (int64_t k = 0; k < x->numel; k++) {
      d += ((double)p[k] - q[k]) * ((double)p[k] - q[k]);
      s += (double)p[k] * p[k];
    }
    const double r = s > 0 ? sqrt(d / s) : sqrt(d);
    if (r > w) {
      w = r;
      snprintf(worst, n, "%s", x->name);
    }
    (*count)++;
  }
done:
  ganfw_st_close(fa);
  ganfw_st_close(fb);
  return w;
}

/* Column `col` (0: step) of every row of <dir>/metrics.csv into v[0..cap); the row count. */
static int metric_column(const char *dir, int col, double *v, int cap) {
  char p[600];
  snprintf(p, sizeof p, "%s/metrics.csv", dir);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  char line[4096];
  int n = 0;
  if (!fgets(line, sizeof line, f)) n = 0; /* the header */
  while (n < cap && fgets(line, sizeof line, f)) {
    char *s = line;
    for (int c = 0; c < col && s; c++) {
      s = strchr(s, ',');
      if (s) s++;
    }
    if (s) v[n++] = strtod(s, NULL);
  }
  fclose(f);
  return n;
}

/* The largest relative difference of loss_d and loss_g (columns 2, 3) over the steps. */
static double worst_loss(const char *a, const char *b, int *steps) {
  double w = 0;
  *steps = 0;
  for (int col = 2; col <= 3; col++) {
    double x[64], y[64];
    int n = metric_column(a, col, x, 64), m = metric_column(b, col, y, 64);
    if (n != m || n == 0) return -1;
    for (int i = 0; i < n; i++) {
      double r = fabs(x[i] - y[i]) / fmax(fabs(x[i]), 1e-12);
      if (r > w) w = r;
    }
    *steps = n;
  }
  return w;
}

/* Relative per-tensor tolerance of a 2-rank run against one process after 20 steps.
 * SyncBatchNorm, the gradient average and the loss mean sum the same numbers in another
 * order, so the two runs are not bitwise equal (measured: about 2e-7). */
#define TOL 1e-5

static void test_two_ranks_match_one(void) {
  if (skip()) return;
  char args[4096];
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s'", path_in("gan.yaml"),
           path_in("one"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s'", path_in("gan.yaml"),
           path_in("two"));
  int rc = ranks(2, "", args, NULL);
  if (rc != 0) fprintf(stderr, "%s\n", out);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  /* rank 0 alone wrote the run's outputs: one metrics row per step */
  double steps[64];
  CU_ASSERT_EQUAL(metric_column(path_in("two"), 0, steps, 64), 20);
  int count = 0, n = 0;
  char worst[256] = "";
  double w = worst_rel(path_in("one/checkpoints/step_00000020.safetensors"),
                       path_in("two/checkpoints/step_00000020.safetensors"), 0, &count, worst,
                       sizeof worst);
  printf("\n  2 ranks vs 1 process, 20 steps: worst weight %.3g (%s) over %d tensors", w, worst,
         count);
  CU_ASSERT(count > 20);
  CU_ASSERT(w >= 0 && w <= TOL);
  double l = worst_loss(path_in("one"), path_in("two"), &n);
  printf("; worst loss %.3g over %d steps", l, n);
  /* Adam's moments too */
  double o = worst_rel(path_in("one/checkpoints/step_00000020.safetensors"),
                       path_in("two/checkpoints/step_00000020.safetensors"), 1, &count, worst,
                       sizeof worst);
  printf("; with the optimizer state %.3g (%s)\n", o, worst);
  CU_ASSERT(o >= 0 && o <= TOL);
  CU_ASSERT_EQUAL(n, 20);
  CU_ASSERT(l >= 0 && l <= TOL);
  /* memory.json (rank 0's) lists every rank's peaks */
  char mj[600], text[1 << 15];
  snprintf(mj, sizeof mj, "%s", path_in("two/memory.json"));
  FILE *f = fopen(mj, "r");
  size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[len] = '\0';
  if (f) fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"ranks\": ["));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "{\"rank\": 1, \"peak_allocated\": "));
  /* metrics.csv has the time in collectives */
  double comm[64];
  CU_ASSERT_EQUAL(metric_column(path_in("two"), 15, comm, 64), 20);
  CU_ASSERT(comm[19] > 0);
}

/* memory strategy zero: the same updates (bitwise: the optimizer is elementwise), the
 * whole state in the checkpoint, half of it per rank. */
static void test_zero(void) {
  if (skip()) return;
  char args[4096];
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' --set 'memory=[{plugin: zero}]'",
           path_in("gan.yaml"), path_in("zero"));
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s'", path_in("gan.yaml"),
           path_in("dp_adam"));
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  int count = 0;
  char worst[256] = "";
  double w = worst_rel(path_in("zero/checkpoints/step_00000020.safetensors"),
                       path_in("dp_adam/checkpoints/step_00000020.safetensors"), 1, &count, worst,
                       sizeof worst);
  CU_ASSERT(count > 40); /* weights and both moments of every parameter */
  CU_ASSERT_EQUAL(w, 0.0);
  if (w != 0.0) fprintf(stderr, "zero vs plain data-parallel: %g at %s\n", w, worst);
  /* per rank: the compare row's optimizer state is half of one process's */
  char json1[600], json2[600];
  snprintf(json1, sizeof json1, "%s", path_in("c1.json"));
  snprintf(json2, sizeof json2, "%s", path_in("c2.json"));
  snprintf(args, sizeof args,
           "-q compare '%s' --steps 1 --warmup 0 --json '%s' --set 'memory=[{plugin: zero}]'",
           path_in("gan.yaml"), json2);
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  snprintf(args, sizeof args, "-q compare '%s' --steps 1 --warmup 0 --json '%s'",
           path_in("gan.yaml"), json1);
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  long long s1 = -1, s2 = -1, c2 = -1, r2 = -1;
  char buf[1 << 14];
  FILE *f = fopen(json1, "r");
  size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  buf[len] = '\0';
  if (f) fclose(f);
  const char *k = strstr(buf, "\"peak_optim_state\":");
  if (k) s1 = strtoll(k + strlen("\"peak_optim_state\":"), NULL, 10);
  f = fopen(json2, "r");
  len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  buf[len] = '\0';
  if (f) fclose(f);
  if ((k = strstr(buf, "\"peak_optim_state\":"))) s2 = strtoll(k + 19, NULL, 10);
  if ((k = strstr(buf, "\"peak_comm\":"))) c2 = strtoll(k + 12, NULL, 10);
  if ((k = strstr(buf, "\"ranks\":"))) r2 = strtoll(k + 8, NULL, 10);
  printf("\n  optimizer state: one process %lld bytes, a rank of 2 with zero %lld; comm %lld\n", s1,
         s2, c2);
  CU_ASSERT(s1 > 0);
  /* the elements split exactly (below); the allocator rounds each piece to 512 bytes */
  CU_ASSERT(2 * s2 >= s1 && 2 * s2 <= s1 + 4096);
  CU_ASSERT(c2 > 0);
  CU_ASSERT_EQUAL(r2, 2);
}

/* Losses (loss_d, loss_g) of step `step` (from 1) of <dir>/metrics.csv. */
static int losses_at(const char *dir, int step, double *d, double *g) {
  double s[64], a[64], b[64];
  int n = metric_column(dir, 0, s, 64);
  if (metric_column(dir, 2, a, 64) != n || metric_column(dir, 3, b, 64) != n) return 0;
  for (int i = 0; i < n; i++)
    if ((int)s[i] == step) {
      *d = a[i];
      *g = b[i];
      return 1;
    }
  return 0;
}

/* A checkpoint of 2 ranks with zero (the whole optimizer state gathered into it) goes on
 * as one process, and one of one process goes on on 2 ranks. Each continuation starts
 * from the same state as the uninterrupted run of the first part's rank count: its first
 * step gives that run's losses (the arithmetic after it differs by summation order only). */
static void test_resume_other_ranks(void) {
  if (skip()) return;
  char args[4096];
  const char *zero = "--set 'memory=[{plugin: zero}]'";
  /* uninterrupted: 2 ranks with zero, and one process */
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' %s", path_in("gan.yaml"),
           path_in("u2"), zero);
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s'", path_in("gan.yaml"), path_in("u1"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  /* 2 ranks with zero to step 10, then one process */
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' --set train.max_steps=10 %s",
           path_in("gan.yaml"), path_in("r21"), zero);
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' --set train.resume=latest",
           path_in("gan.yaml"), path_in("r21"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  /* one process to step 10, then 2 ranks with zero */
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' --set train.max_steps=10",
           path_in("gan.yaml"), path_in("r12"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' --set train.resume=latest %s",
           path_in("gan.yaml"), path_in("r12"), zero);
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  /* the checkpoints at step 10 hold the whole state of their run, bit for bit */
  int count = 0;
  char worst[256] = "";
  CU_ASSERT_EQUAL(worst_rel(path_in("u2/checkpoints/step_00000010.safetensors"),
                            path_in("r21/checkpoints/step_00000010.safetensors"), 1, &count, worst,
                            sizeof worst),
                  0.0);
  CU_ASSERT(count > 40);
  CU_ASSERT_EQUAL(worst_rel(path_in("u1/checkpoints/step_00000010.safetensors"),
                            path_in("r12/checkpoints/step_00000010.safetensors"), 1, &count, worst,
                            sizeof worst),
                  0.0);
  /* the first step after the resume continues each run */
  double d0 = 0, g0 = 0, d1 = 0, g1 = 0;
  CU_ASSERT_FATAL(losses_at(path_in("u2"), 11, &d0, &g0) &&
                  losses_at(path_in("r21"), 11, &d1, &g1));
  printf("\n  step 11 after 2 ranks then 1: loss_d %.9g vs %.9g, loss_g %.9g vs %.9g", d1, d0, g1,
         g0);
  CU_ASSERT(fabs(d1 - d0) <= TOL * fabs(d0) && fabs(g1 - g0) <= TOL * fabs(g0));
  CU_ASSERT_FATAL(losses_at(path_in("u1"), 11, &d0, &g0) &&
                  losses_at(path_in("r12"), 11, &d1, &g1));
  printf("; after 1 then 2 ranks: loss_d %.9g vs %.9g\n", d1, d0);
  CU_ASSERT(fabs(d1 - d0) <= TOL * fabs(d0) && fabs(g1 - g0) <= TOL * fabs(g0));
  /* and both reach step 20, rank 0 alone appending to metrics.csv */
  double steps[64];
  CU_ASSERT_EQUAL(metric_column(path_in("r21"), 0, steps, 64), 20);
  CU_ASSERT_EQUAL(metric_column(path_in("r12"), 0, steps, 64), 20);
}

/* The memory strategies under 2 ranks: accumulate (each rank's micro-batch k is its part of
 * the global micro-batch k, so BatchNorm sees what one process's micro-batch sees) ends
 * within TOL of one process; amp keeps one process's loss-scaler history (a rank's
 * gradients have one process's magnitudes, so they overflow where its do) with f16's
 * rounding on top. */
static void test_strategies(void) {
  if (skip()) return;
  char args[4096];
  snprintf(args, sizeof args,
           "-q '%s' --set run.out_dir='%s' --set train.max_steps=5 --set 'memory=[{plugin: "
           "accumulate, steps: 2}]'",
           path_in("gan.yaml"), path_in("acc1"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  snprintf(args, sizeof args,
           "-q '%s' --set run.out_dir='%s' --set train.max_steps=5 --set 'memory=[{plugin: "
           "accumulate, steps: 2}, {plugin: zero}]'",
           path_in("gan.yaml"), path_in("acc2"));
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  int count = 0;
  char worst[256] = "";
  double w = worst_rel(path_in("acc1/checkpoints/step_00000005.safetensors"),
                       path_in("acc2/checkpoints/step_00000005.safetensors"), 1, &count, worst,
                       sizeof worst);
  printf("\n  accumulate 2 (+ zero on 2 ranks), 5 steps: worst %.3g (%s)", w, worst);
  CU_ASSERT(w >= 0 && w <= TOL);
  snprintf(args, sizeof args,
           "-q '%s' --set run.out_dir='%s' --set train.max_steps=5 --set 'memory=[{plugin: amp}]'",
           path_in("gan.yaml"), path_in("amp1"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  snprintf(args, sizeof args,
           "-q '%s' --set run.out_dir='%s' --set train.max_steps=5 --set 'memory=[{plugin: amp}]'",
           path_in("gan.yaml"), path_in("amp2"));
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  /* amp.scale and amp.skipped_steps: columns 15 and 17 alone, 16 and 18 after comm_seconds */
  double s1[8], s2[8], k1[8], k2[8];
  CU_ASSERT_EQUAL(metric_column(path_in("amp1"), 15, s1, 8), 5);
  CU_ASSERT_EQUAL(metric_column(path_in("amp2"), 16, s2, 8), 5);
  CU_ASSERT_EQUAL(metric_column(path_in("amp1"), 17, k1, 8), 5);
  CU_ASSERT_EQUAL(metric_column(path_in("amp2"), 18, k2, 8), 5);
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_EQUAL(s1[i], s2[i]);
    CU_ASSERT_EQUAL(k1[i], k2[i]);
  }
  double d1 = 0, g1 = 0, d2 = 0, g2 = 0;
  CU_ASSERT_FATAL(losses_at(path_in("amp1"), 1, &d1, &g1) &&
                  losses_at(path_in("amp2"), 1, &d2, &g2));
  printf("; amp step 1 loss_d %.7f vs %.7f, scale %g, skipped %g\n", d2, d1, s2[4], k2[4]);
  CU_ASSERT(fabs(d1 - d2) <= 1e-4 * fabs(d1) && fabs(g1 - g2) <= 1e-4 * fabs(g1));
}

/* WGAN-GP on 2 ranks: each rank draws the global micro-batch's interpolation weights and
 * takes its rows, and the penalty's gradients join the all-reduce, so the weights after 6
 * steps (with micro-batches too) are one process's within TOL. The critic has no norm: a
 * layer norm's biases get gradients near Adam's eps, where g / (|g| + eps) turns the f32
 * rounding of the ranks' sum into a visible part of lr (their gradients agree to 1e-7). */
static void test_penalty(void) {
  if (skip()) return;
  const char *memory[2] = {"", " --set 'memory=[{plugin: accumulate, steps: 2}]'"};
  for (int k = 0; k < 2; k++) {
    char args[4096], dir1[16], dir2[16];
    snprintf(dir1, sizeof dir1, "gp1_%d", k);
    snprintf(dir2, sizeof dir2, "gp2_%d", k);
    const char *gp = "--set model.d_norm=none --set objective.plugin=wgan --set "
                     "objective.clip=0 --set objective.gp=10 --set train.max_steps=6 --set "
                     "train.checkpoint_every=6";
    snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' %s%s", path_in("gan.yaml"),
             path_in(dir1), gp, memory[k]);
    CU_ASSERT_EQUAL_FATAL(one(args), 0);
    snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' %s%s", path_in("gan.yaml"),
             path_in(dir2), gp, memory[k]);
    int rc = ranks(2, "", args, NULL);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char a[600], b[600], worst[256] = "";
    snprintf(a, sizeof a, "%s/checkpoints/step_00000006.safetensors", path_in(dir1));
    snprintf(b, sizeof b, "%s/checkpoints/step_00000006.safetensors", path_in(dir2));
    int count = 0;
    double w = worst_rel(a, b, 0, &count, worst, sizeof worst);
    printf("\n  gp 10%s, 2 ranks vs 1 process, 6 steps: worst weight %.3g (%s)",
           k ? ", accumulate 2" : "", w, worst);
    CU_ASSERT(w >= 0 && w <= TOL);
  }
}

/* dist.batchnorm: local (DistributedDataParallel's default): each rank normalises its own
 * 32 rows, so the first step's losses are not the global batch's; the running statistics
 * are rank 0's on every rank (broadcast each step), so the checkpoint is rank 0's. */
static void test_local_batchnorm(void) {
  if (skip()) return;
  char args[4096];
  snprintf(args, sizeof args,
           "-q '%s' --set run.out_dir='%s' --set dist.batchnorm=local --set train.max_steps=4",
           path_in("gan.yaml"), path_in("local"));
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  double d0 = 0, g0 = 0, d1 = 0, g1 = 0;
  CU_ASSERT_FATAL(losses_at(path_in("local"), 1, &d1, &g1));
  /* the sync run of test_two_ranks_match_one, or a new one-process run */
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' --set train.max_steps=1",
           path_in("gan.yaml"), path_in("one1"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  CU_ASSERT_FATAL(losses_at(path_in("one1"), 1, &d0, &g0));
  printf("\n  step 1 loss_d: local BatchNorm %.6f, global batch %.6f\n", d1, d0);
  CU_ASSERT(fabs(d1 - d0) > 1e-4 * fabs(d0));
  double steps[64];
  CU_ASSERT_EQUAL(metric_column(path_in("local"), 0, steps, 64), 4);
  /* a mode that does not exist: the key and the two modes */
  snprintf(args, sizeof args, "validate '%s' --set dist.batchnorm=global", path_in("gan.yaml"));
  CU_ASSERT_EQUAL(one(args), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "dist.batchnorm: 'global' is not a mode"));
}

/* A classifier on 2 ranks with synced BatchNorm: rank 0 writes metrics, eval.csv and the
 * best checkpoint; the first step is one process's (dropout included: a rank takes its rows'
 * part of the global batch's mask), and the test accuracy after 10 steps
 * (every rank evaluates the whole test split with the same weights) is close to it. */
/* The config `text` written as <name>.yaml and trained as one process into <name>1 and on
 * 2 ranks into <name>2; 0 when both ran (else the failing command's output is printed). */
static int one_and_two(const char *name, const char *text) {
  char rel[64], file[1024], args[4096];
  snprintf(rel, sizeof rel, "%s.yaml", name);
  snprintf(file, sizeof file, "%s", path_in(rel));
  FILE *f = fopen(file, "w");
  if (!f) return -1;
  fputs(text, f);
  fclose(f);
  for (int n = 1; n <= 2; n++) {
    char dir[64];
    snprintf(dir, sizeof dir, "%s%d", name, n);
    snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s'", file, path_in(dir));
    const int rc = n == 1 ? one(args) : ranks(2, "", args, NULL);
    if (rc != 0) {
      fprintf(stderr, "%s\n", out);
      return rc;
    }
  }
  return 0;
}

static void test_classifier(void) {
  if (skip()) return;
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 5\n"
           "device: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, prefetch: false}\n"
           "model: {plugin: cnn, blocks: [{channels: 8, kernel: 3, pool: max, dropout: 0.25}], "
           "linear: [16]}\n"
           "optim: {plugin: adam, lr: 1.0e-3}\n"
           "train: {batch_size: 64, max_steps: 10, log_every: 1, checkpoint_every: 10}\n"
           "dist: {batchnorm: sync}\n",
           root);
  CU_ASSERT_EQUAL_FATAL(one_and_two("cnn", text), 0);
  double l1[16], l2[16];
  CU_ASSERT_EQUAL(metric_column(path_in("cnn1"), 2, l1, 16), 10);
  CU_ASSERT_EQUAL(metric_column(path_in("cnn2"), 2, l2, 16), 10);
  char e1[600], e2[600];
  snprintf(e1, sizeof e1, "%s", path_in("cnn1/eval.csv"));
  snprintf(e2, sizeof e2, "%s", path_in("cnn2/eval.csv"));
  /* eval.csv: step, epoch, test_loss, test_acc */
  FILE *f1 = fopen(e1, "r"), *f2 = fopen(e2, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f2);
  char h[512], r1[512] = "", r2[512] = "";
  CU_ASSERT_PTR_NOT_NULL(fgets(h, sizeof h, f1));
  CU_ASSERT_PTR_NOT_NULL(fgets(r1, sizeof r1, f1));
  CU_ASSERT_PTR_NOT_NULL(fgets(h, sizeof h, f2));
  CU_ASSERT_PTR_NOT_NULL(fgets(r2, sizeof r2, f2));
  fclose(f1);
  fclose(f2);
  double s1 = 0, ep1 = 0, ta1 = 0, tl1 = 0, s2 = 0, ep2 = 0, ta2 = 0, tl2 = 0;
  CU_ASSERT_EQUAL(sscanf(r1, "%lf,%lf,%lf,%lf", &s1, &ep1, &tl1, &ta1), 4);
  CU_ASSERT_EQUAL(sscanf(r2, "%lf,%lf,%lf,%lf", &s2, &ep2, &tl2, &ta2), 4);
  printf("\n  classifier, 2 ranks vs 1: step 1 loss %.7f vs %.7f; test accuracy %.4f vs %.4f\n",
         l2[0], l1[0], ta2, ta1);
  CU_ASSERT(fabs(l2[0] - l1[0]) <= TOL * fabs(l1[0]));
  CU_ASSERT_EQUAL(s2, 10);
  CU_ASSERT(fabs(ta2 - ta1) <= 0.05);
  struct stat sb;
  CU_ASSERT_EQUAL(stat(path_in("cnn2/checkpoints/best.safetensors"), &sb), 0);
}

/* Masks during a data-parallel run (prune: with a schedule): each rank prunes its own copy
 * of the weights, which the run keeps identical, so the ranks agree and the run is the
 * one-process run (BatchNorm synchronised): the same losses, the sparsity asked for, and
 * the masks of the one-process run but for rare entries at the threshold (the all-reduce
 * sums in another order; none differed when this was written). */
static void test_prune_masks(void) {
  if (skip()) return;
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 5\n"
           "device: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, prefetch: false}\n"
           "model: {plugin: cnn, blocks: [{channels: 8, kernel: 3, pool: max}], linear: [16]}\n"
           "optim: {plugin: adam, lr: 1.0e-3}\n"
           "train: {batch_size: 64, max_steps: 10, log_every: 1, checkpoint_every: 10}\n"
           "prune: {method: global_unstructured, amount: 0.7,\n"
           "        schedule: {start_step: 2, end_step: 6, every: 2}}\n"
           "dist: {batchnorm: sync}\n",
           root);
  CU_ASSERT_EQUAL_FATAL(one_and_two("prune", text), 0);
  double l1[16], l2[16];
  CU_ASSERT_EQUAL_FATAL(metric_column(path_in("prune1"), 2, l1, 16), 10);
  CU_ASSERT_EQUAL_FATAL(metric_column(path_in("prune2"), 2, l2, 16), 10);
  double worst = 0;
  for (int i = 0; i < 10; i++) worst = fmax(worst, fabs(l2[i] - l1[i]) / fabs(l1[i]));
  ganfw_st_file *a = NULL, *b = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("prune1/checkpoints/step_00000010.safetensors"), &a),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("prune2/checkpoints/step_00000010.safetensors"), &b),
                        GANFW_OK);
  int64_t n = 0, zeros = 0, differ = 0;
  for (int64_t i = 0; i < ganfw_st_count(a); i++) {
    const ganfw_st_tensor *m1 = ganfw_st_at(a, i);
    if (!strstr(m1->name, ".weight_mask")) continue;
    const ganfw_st_tensor *m2 = ganfw_st_find(b, m1->name);
    CU_ASSERT_PTR_NOT_NULL(m2);
    if (!m2 || m2->numel != m1->numel) continue;
    for (int64_t k = 0; k < m1->numel; k++) {
      const float x = ((const float *)m1->data)[k], y = ((const float *)m2->data)[k];
      differ += x != y;
      zeros += y == 0.0f;
    }
    n += m1->numel;
  }
  ganfw_st_close(a);
  ganfw_st_close(b);
  printf("\n  prune: on 2 ranks vs 1: losses within %.2g; %lld of %lld mask entries pruned, "
         "%lld differ\n",
         worst, (long long)zeros, (long long)n, (long long)differ);
  CU_ASSERT(worst <= TOL);
  CU_ASSERT(n > 0);
  CU_ASSERT_EQUAL(zeros, (int64_t)nearbyint(0.7 * (double)n));
  CU_ASSERT(differ <= n / 1000);
}

/* A trainer plugin (the autoencoder trainer's VAE, two nets and two optimizers) on 2 ranks:
 * the run of one process at the global batch, the reparameterisation noise drawn for the
 * global batch as one process draws it; with zero, the same run bitwise. */
static void test_trainer_plugin(void) {
  if (skip()) return;
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 5\n"
           "device: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, prefetch: false, normalize: {mean: [0.0], "
           "std: [1.0]}}\n"
           "model: {plugin: convae, latent: 8, channels: 8, vae: true, output: none}\n"
           "trainer: {plugin: autoencoder, vae: true, beta: 1.0, loss: bce}\n"
           "optim: {plugin: adam, lr: 1.0e-3}\n"
           "train: {batch_size: 64, max_steps: 10, log_every: 1, checkpoint_every: 10}\n",
           root);
  FILE *f = fopen(path_in("vae.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
  char args[4096];
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s'", path_in("vae.yaml"),
           path_in("vae1"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s'", path_in("vae.yaml"),
           path_in("vae2"));
  int rc = ranks(2, "", args, NULL);
  if (rc != 0) fprintf(stderr, "%s\n", out);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' --set 'memory=[{plugin: zero}]'",
           path_in("vae.yaml"), path_in("vae2z"));
  CU_ASSERT_EQUAL_FATAL(ranks(2, "", args, NULL), 0);
  double l1[16], l2[16];
  CU_ASSERT_EQUAL(metric_column(path_in("vae1"), 2, l1, 16), 10);
  CU_ASSERT_EQUAL(metric_column(path_in("vae2"), 2, l2, 16), 10);
  double wl = 0;
  for (int i = 0; i < 10; i++) wl = fmax(wl, fabs(l2[i] - l1[i]) / fabs(l1[i]));
  int count = 0;
  char worst[256] = "";
  double w = worst_rel(path_in("vae1/checkpoints/step_00000010.safetensors"),
                       path_in("vae2/checkpoints/step_00000010.safetensors"), 1, &count, worst,
                       sizeof worst);
  printf("\n  VAE trainer, 2 ranks vs 1 process, 10 steps: worst loss %.3g, worst tensor %.3g "
         "(%s) over %d\n",
         wl, w, worst, count);
  CU_ASSERT(wl <= TOL);
  CU_ASSERT(count >= 30); /* encoder, decoder and both optimizers' moments */
  CU_ASSERT(w >= 0 && w <= TOL);
  double z = worst_rel(path_in("vae2/checkpoints/step_00000010.safetensors"),
                       path_in("vae2z/checkpoints/step_00000010.safetensors"), 1, &count, worst,
                       sizeof worst);
  CU_ASSERT_EQUAL(z, 0.0);
  if (z != 0.0) fprintf(stderr, "zero vs plain data-parallel VAE: %g at %s\n", z, worst);
}

/* `ganfw plan --ranks 2`: one rank's rows, gradient buckets as comm, zero's half state. */
static void test_plan_ranks(void) {
  char args[4096];
  snprintf(args, sizeof args, "plan '%s' --set 'memory=[{plugin: zero}]' --ranks 2",
           path_in("gan.yaml"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "one rank's of 2, with 32 rows of the global batch"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "zero"));
  const char *c = strstr(out, "\ncomm ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  CU_ASSERT(strtod(c + 5, NULL) > 0);
  const char *o = strstr(out, "\noptim_state ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  const double half = strtod(o + 13, NULL);
  /* the optimizer state of exactly half the parameter elements */
  const char *z = strstr(out, "zero: this rank keeps the optimizer state of ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(z);
  char *end = NULL;
  long long kept = strtoll(z + strlen("zero: this rank keeps the optimizer state of "), &end, 10);
  long long all = end ? strtoll(end + strlen(" of the "), NULL, 10) : 0;
  printf("\n  zero on rank 0 of 2: %lld of %lld parameter elements\n", kept, all);
  CU_ASSERT(all > 0 && 2 * kept == all);
  snprintf(args, sizeof args, "plan '%s'", path_in("gan.yaml"));
  CU_ASSERT_EQUAL_FATAL(one(args), 0);
  o = strstr(out, "\noptim_state ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  const double whole = strtod(o + 13, NULL);
  CU_ASSERT(whole > 0 && fabs(2 * half - whole) <= 0.011); /* MiB to two decimals */
  CU_ASSERT_PTR_NULL(strstr(out, "one rank's"));
}

static void test_faults(void) {
  if (skip()) return;
  char args[4096];
  double sec = 0;
  const char *quick = "--set train.max_steps=6 --set train.checkpoint_every=0 --set dist.timeout=3";
  /* a rank that hangs: every rank ends within the timeouts, the message names it */
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' %s", path_in("gan.yaml"),
           path_in("hang"), quick);
  int rc = ranks(2, "-x GANFW_DIST_FAULT=hang:1:3", args, &sec);
  CU_ASSERT(rc != 0 && rc != 124);
  CU_ASSERT(sec < 60);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "did not reach step 3 (last at step 2) within 3 s "
                                     "(dist.timeout) and does not answer"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "rank 0: rank 1 (pid "));
  /* a rank that dies: mpirun ends the others and names it */
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' %s", path_in("gan.yaml"),
           path_in("die"), quick);
  rc = ranks(2, "-x GANFW_DIST_FAULT=die:1:3", args, &sec);
  CU_ASSERT(rc != 0 && rc != 124);
  CU_ASSERT(sec < 60);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "rank 1"));
  /* different configs on the ranks: refused at the start, naming the rank */
  char cmd[32768];
  snprintf(cmd, sizeof cmd,
           "timeout 120 '%s' --oversubscribe %s -x OPENBLAS_CORETYPE %s -np 1 '%s' -q '%s' "
           "--set run.out_dir='%s' : -np 1 '%s' -q '%s' --set run.out_dir='%s' --set "
           "train.label_smoothing=0.1",
           mpirun, geteuid() == 0 ? "--allow-run-as-root" : "", rank_sanitizers(), ganfw,
           path_in("gan.yaml"), path_in("mm"), ganfw, path_in("gan.yaml"), path_in("mm"));
  rc = run(cmd, NULL);
  CU_ASSERT_EQUAL(rc, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "rank 1 resolved another config than rank 0"));
  /* a global batch the ranks cannot share */
  snprintf(args, sizeof args, "-q '%s' --set run.out_dir='%s' --set train.batch_size=63",
           path_in("gan.yaml"), path_in("odd"));
  rc = ranks(2, "", args, NULL);
  CU_ASSERT_EQUAL(rc, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "does not split over 2 ranks"));
  /* nothing of the failed runs' outputs is half-written: no checkpoint of the hung step */
  struct stat sb;
  CU_ASSERT_NOT_EQUAL(stat(path_in("hang/checkpoints/step_00000003.safetensors"), &sb), 0);
}

/* The pid a GANFW_DIST_FAULT line of the last command names ("rank R (pid N): ..."), or -1. */
static long fault_pid(void) {
  const char *f = strstr(out, "GANFW_DIST_FAULT");
  if (!f) return -1;
  const char *line = f;
  while (line > out && line[-1] != '\n') line--;
  const char *p = strstr(line, "(pid ");
  return p && p < f ? strtol(p + 5, NULL, 10) : -1;
}

/* A rank stopped (SIGSTOP) inside a step, after it told the others it started the step, as
 * `kill -STOP` does to it: the rank whose wait runs out names it, its pid and the collective
 * it did not reach, and the job ends within dist.timeout and a few seconds (the others'
 * answers, 1 s at most, and MPI's abort). Before, the job ended after twice the timeout
 * with "every rank started step 3, so one of them hangs inside it". */
#define STOP_TIMEOUT 4
#define END_BOUND    3.0 /* seconds past dist.timeout */
static void test_stopped_rank(void) {
  if (skip()) return;
  char args[4096], want[256];
  double after = -1;
  snprintf(args, sizeof args,
           "-q '%s' --set run.out_dir='%s' --set train.max_steps=6 --set "
           "train.checkpoint_every=0 --set dist.timeout=%d",
           path_in("gan.yaml"), path_in("stop"), STOP_TIMEOUT);
  int rc = ranks_after(2, "-x GANFW_DIST_FAULT=stop:1:3", args, "GANFW_DIST_FAULT", &after);
  printf("\n  rank 1 stopped inside step 3, dist.timeout %d s: the job ended %.1f s later (exit "
         "%d)\n",
         STOP_TIMEOUT, after, rc);
  CU_ASSERT(rc != 0 && rc != 124);
  CU_ASSERT(after > 0 && after < STOP_TIMEOUT + END_BOUND);
  const long pid = fault_pid();
  CU_ASSERT(pid > 0);
  snprintf(want, sizeof want, "rank 0: rank 1 (pid %ld on ", pid);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  snprintf(want, sizeof want,
           " in step 3 within %d s (dist.timeout) and does not answer: it hangs inside the step "
           "(stopped, or stuck in a plugin); ending the job",
           STOP_TIMEOUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, ") did not reach the "));
  snprintf(want, sizeof want, "gdb -p %ld", pid);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  if (!strstr(out, "does not answer")) fprintf(stderr, "%s\n", out);
}

/* A rank that fails alone inside a step while the other waits for it: the waiting rank's
 * timeout finds it ended (it answers so), says that its message follows, and does not
 * abort; the failed rank then says why, and the job ends with its exit code. */
static void test_rank_fails_alone(void) {
  if (skip()) return;
  char args[4096];
  double sec = 0;
  snprintf(args, sizeof args,
           "-q '%s' --set run.out_dir='%s' --set train.max_steps=6 --set "
           "train.checkpoint_every=0 --set dist.timeout=3",
           path_in("gan.yaml"), path_in("fail"));
  int rc = ranks(2, "-x GANFW_DIST_FAULT=fail:1:3", args, &sec);
  CU_ASSERT_EQUAL(rc, 1); /* a backend error on either rank */
  CU_ASSERT(sec < 60);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "rank 0: rank 1 (pid "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "already ended with exit code 1 (its message follows)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ganfw: rank 1: backend error: rank 1: GANFW_DIST_FAULT: "
                                     "failing inside step 3"));
  CU_ASSERT_PTR_NULL(strstr(out, "MPI_ABORT"));
  if (!strstr(out, "its message follows")) fprintf(stderr, "%s\n", out);
}

/* mpirun with rank 0 and rank 1 finding plugins in different folders (GANFW_PLUGIN_PATH),
 * under one config that names the optimizer tpdrift. */
static int drift_ranks(const char *dir0, const char *dir1, const char *run_dir) {
  char cmd[32768];
  const char *sudo = geteuid() == 0 ? "--allow-run-as-root" : "";
  /* each app context gets its environment through env: Open MPI 4.1 gives a -x before
   * the first context to that context alone */
  const char *asan = rank_sanitizers() + strlen("-x ");
  snprintf(cmd, sizeof cmd,
           "timeout 120 '%s' --oversubscribe %s -x OPENBLAS_CORETYPE -np 1 env '%s' "
           "GANFW_PLUGIN_PATH='%s' '%s' -q '%s' --set run.out_dir='%s' : -np 1 env '%s' "
           "GANFW_PLUGIN_PATH='%s' '%s' -q '%s' --set run.out_dir='%s'",
           mpirun, sudo, asan, dir0, ganfw, path_in("drift.yaml"), run_dir, asan, dir1, ganfw,
           path_in("drift.yaml"), run_dir);
  return run(cmd, NULL);
}

/* Ranks that load different builds of one plugin under the same config: refused before the
 * first step, naming the plugin and each rank's file and what to do. Before, they trained
 * and drifted apart (the config check hashed the config alone). A copy of the same build
 * in another folder is the same plugin and runs. */
static void test_plugin_builds(void) {
  if (skip()) return;
  char a[600], b[600], copy[600], cmd[2048];
  snprintf(a, sizeof a, "%s/tests/plugins/drift_a", getenv("GANFW_TEST_BUILD_DIR"));
  snprintf(b, sizeof b, "%s/tests/plugins/drift_b", getenv("GANFW_TEST_BUILD_DIR"));
  snprintf(copy, sizeof copy, "%s", path_in("drift_copy"));
  FILE *f = fopen(path_in("drift.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 1}\n"
          "data: {dataset: mnist, path: %s/mnist, resize: 32, prefetch: false}\n"
          "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
          "optim: {plugin: tpdrift, lr: 0.01}\n"
          "train: {batch_size: 64, max_steps: 2, log_every: 1, sample_every: 0, "
          "checkpoint_every: 0}\n",
          root);
  fclose(f);
  /* a copy of build a elsewhere: the same bytes, another path */
  snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/ganfw_tpdrift.so' '%s/'", copy, a, copy);
  CU_ASSERT_EQUAL_FATAL(run(cmd, NULL), 0);
  int rc = drift_ranks(a, copy, path_in("drift_same"));
  if (rc != 0) fprintf(stderr, "%s\n", out);
  CU_ASSERT_EQUAL(rc, 0);
  /* build b on rank 1 */
  rc = drift_ranks(a, b, path_in("drift_differ"));
  CU_ASSERT_EQUAL(rc, 2);
  char want[1400];
  snprintf(want, sizeof want,
           "plugin 'tpdrift' is not the same build on every rank: rank 0 loaded "
           "%s/ganfw_tpdrift.so (ABI ",
           a);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  snprintf(want, sizeof want, ", rank 1 %s/ganfw_tpdrift.so (ABI ", b);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "file hash "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "install the same build of every plugin on every node"));
  if (!strstr(out, "is not the same build")) fprintf(stderr, "%s\n", out);
  /* before step 1: rank 0 wrote no metrics row */
  struct stat sb;
  snprintf(want, sizeof want, "%s/metrics.csv", path_in("drift_differ"));
  CU_ASSERT_NOT_EQUAL(stat(want, &sb), 0);
}

/* A signal to `ganfw launch -n 2` whose steps take seconds (a 640-image batch of a 64-filter
 * DC-GAN on one thread a rank): every rank finishes its step, the checkpoint is written,
 * and launch exits 130 (SIGINT) or 143 (SIGTERM) within a step or two. Before, Open MPI
 * killed the ranks 1 s after SIGTERM: the work since the last checkpoint was lost. */
static void launch_signal(int sig, const char *dir, int want) {
  char outdir[600], metrics[700], log[700];
  snprintf(outdir, sizeof outdir, "run.out_dir=%s", path_in(dir));
  snprintf(metrics, sizeof metrics, "%s/metrics.csv", path_in(dir));
  snprintf(log, sizeof log, "%s.log", path_in(dir));
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    const char *asan = getenv("ASAN_OPTIONS"); /* the ranks inherit it: see rank_sanitizers */
    char opts[512];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", asan ? asan : "", asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    execl(ganfw, ganfw, "launch", "-n", "2", path_in("gan.yaml"), "--set", "train.batch_size=640",
          "--set", "model.ngf=64", "--set", "model.ndf=64", "--set", "train.max_steps=100000",
          "--set", "train.checkpoint_every=0", "--set", outdir, (char *)NULL);
    _exit(127);
  }
  int started = 0; /* a first metrics row: training runs */
  for (int i = 0; i < 1200 && !started; i++) {
    FILE *f = fopen(metrics, "r");
    if (f) {
      char line[1024];
      started = fgets(line, sizeof line, f) && fgets(line, sizeof line, f);
      fclose(f);
    }
    if (!started) usleep(100000);
  }
  CU_ASSERT(started);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  kill(pid, sig);
  int status = 0;
  waitpid(pid, &status, 0);
  clock_gettime(CLOCK_MONOTONIC, &b);
  const double waited = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
  printf("\n  launch -n 2, %s: exit %d after %.1f s\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
         WIFEXITED(status) ? WEXITSTATUS(status) : -1, waited);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == want);
  CU_ASSERT(waited < 120); /* a step and a checkpoint, not Open MPI's kill timeouts */
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "ls '%s/checkpoints' | grep -c '^step_'", path_in(dir));
  CU_ASSERT_EQUAL(run(cmd, NULL), 0);
  CU_ASSERT_EQUAL(atoi(out), 1);
  snprintf(cmd, sizeof cmd, "grep -c 'forwarded as SIGUSR' '%s'", log);
  CU_ASSERT_EQUAL(run(cmd, NULL), 0);
}

static void test_launch_signals(void) {
  if (skip()) return;
  launch_signal(SIGTERM, "sigterm", 143);
  launch_signal(SIGINT, "sigint", 130);
  /* the checkpoint resumes: one more step from it */
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "ls '%s/checkpoints'", path_in("sigterm"));
  CU_ASSERT_EQUAL(run(cmd, NULL), 0);
  long step = 0;
  const char *p = strstr(out, "step_");
  if (p) step = strtol(p + 5, NULL, 10);
  CU_ASSERT(step >= 1);
  char args[4096];
  snprintf(args, sizeof args,
           "-q '%s' --set run.out_dir='%s' --set train.batch_size=640 --set model.ngf=64 --set "
           "model.ndf=64 --set train.resume=latest --set train.max_steps=%ld",
           path_in("gan.yaml"), path_in("sigterm"), step + 1);
  CU_ASSERT_EQUAL(one(args), 0);
}

/* `ganfw launch` without mpirun on PATH: what to install. */
static void test_launch_without_mpirun(void) {
  char cmd[32768];
  snprintf(cmd, sizeof cmd, "PATH=/nonexistent '%s' launch -n 2 '%s'", ganfw, path_in("gan.yaml"));
  CU_ASSERT_EQUAL(run(cmd, NULL), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "mpirun is not on PATH: install Open MPI"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "openmpi-bin"));
}

static CU_TestInfo tests[] = {
    {"2 ranks match one process at the global batch", test_two_ranks_match_one},
    {"zero: same run, half the optimizer state per rank", test_zero},
    {"a checkpoint resumes on another number of ranks", test_resume_other_ranks},
    {"accumulate and amp on 2 ranks", test_strategies},
    {"WGAN-GP on 2 ranks matches one process", test_penalty},
    {"dist.batchnorm: local", test_local_batchnorm},
    {"a classifier on 2 ranks", test_classifier},
    {"a trainer plugin on 2 ranks, with and without zero", test_trainer_plugin},
    {"prune: masks on 2 ranks match one process", test_prune_masks},
    {"plan --ranks 2 shows one rank's bytes", test_plan_ranks},
    {"a hung or dead rank, mismatched configs, an odd batch", test_faults},
    {"a rank stopped inside a step is named within the timeout", test_stopped_rank},
    {"a rank that fails alone says why after the other's timeout", test_rank_fails_alone},
    {"ranks with different builds of a plugin are refused", test_plugin_builds},
    {"launch without mpirun says what to install", test_launch_without_mpirun},
    {"SIGTERM and Ctrl-C to launch: every rank checkpoints", test_launch_signals},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("dist", tests, suite_init, suite_clean);
}
