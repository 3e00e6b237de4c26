/* kill -9 at any moment never leaves a run that does not resume: a GAN run checkpointing
 * every step is SIGKILLed at seeded random moments (some at a random time, some right
 * after the k-th checkpoint appears, some while a checkpoint's temporary file is being
 * written), then every checkpoint under its final name must load, `latest` must pick a
 * complete one, and resuming from it to the last step must give bitwise the tensors of
 * an uninterrupted run, with metrics.csv holding each step's row once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "testutil.h"

/* Under AddressSanitizer every run is about four times slower: 20 trials there (about 75 s),
 * 24 in a release build (about 30 s). */
#if defined(__SANITIZE_ADDRESS__)
#define TRIALS 20
#else
#define TRIALS 24
#endif
#define STEPS 8

static char root[64];
static char ganfw[4096];

static const char *path_in(const char *rel) {
  static char buf[8][1024];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Starts `ganfw gan.yaml --set run.out_dir=DIR [--set train.resume=latest]` with its
 * output into DIR.log; returns the pid. */
static pid_t start(const char *dir, int resume) {
  char outset[1100], log[1100];
  snprintf(outset, sizeof outset, "run.out_dir=%s", dir);
  snprintf(log, sizeof log, "%s.log", dir);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | (resume ? O_APPEND : O_TRUNC), 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    if (resume)
      execl(ganfw, ganfw, path_in("gan.yaml"), "--set", outset, "--set", "train.resume=latest",
            (char *)NULL);
    else
      execl(ganfw, ganfw, path_in("gan.yaml"), "--set", outset, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static int wait_exit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* In <dir>/checkpoints: how many step_*.safetensors files, and whether a temporary. */
static void scan(const char *dir, int *finals, int *temps) {
  char ck[1100];
  snprintf(ck, sizeof ck, "%s/checkpoints", dir);
  *finals = *temps = 0;
  DIR *d = opendir(ck);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "step_", 5) != 0) continue;
    if (strstr(e->d_name, ".tmp."))
      ++*temps;
    else
      ++*finals;
  }
  closedir(d);
}

/* The reader accepts it and its data matches the "crc32" the writer recorded. */
static int checkpoint_ok(const char *path) {
  ganfw_st_file *f = NULL;
  if (ganfw_st_open(path, &f) != GANFW_OK) return 0;
  uLong crc = crc32(0L, Z_NULL, 0);
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    crc = crc32(crc, (const Bytef *)t->data, (uInt)t->nbytes);
  }
  const char *want = ganfw_st_metadata(f, "crc32");
  char got[16];
  snprintf(got, sizeof got, "%08lx", (unsigned long)(crc & 0xffffffffUL));
  int ok = want && strcmp(want, got) == 0;
  ganfw_st_close(f);
  return ok;
}

/* Every step_*.safetensors (not the temporaries) in <dir>/checkpoints loads. */
static int all_finals_load(const char *dir) {
  char ck[1100];
  snprintf(ck, sizeof ck, "%s/checkpoints", dir);
  DIR *d = opendir(ck);
  if (!d) return 1;
  int ok = 1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "step_", 5) != 0 || strstr(e->d_name, ".tmp.")) continue;
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", ck, e->d_name);
    if (!checkpoint_ok(p)) {
      fprintf(stderr, "\n  %s does not load\n", p);
      ok = 0;
    }
  }
  closedir(d);
  return ok;
}

/* The same tensors, byte for byte. */
static int same_tensors(const char *a, const char *b) {
  ganfw_st_file *x = NULL, *y = NULL;
  int ok = ganfw_st_open(a, &x) == GANFW_OK && ganfw_st_open(b, &y) == GANFW_OK &&
           ganfw_st_count(x) == ganfw_st_count(y) && ganfw_st_count(x) > 0;
  for (int64_t i = 0; ok && i < ganfw_st_count(x); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(x, i);
    const ganfw_st_tensor *u = ganfw_st_find(y, t->name);
    ok = u && u->nbytes == t->nbytes && memcmp(u->data, t->data, (size_t)t->nbytes) == 0;
    if (!ok) fprintf(stderr, "\n  %s differs from %s in '%s'\n", a, b, t->name);
  }
  ganfw_st_close(x);
  ganfw_st_close(y);
  return ok;
}

/* metrics.csv: the header, then the rows of steps 1..STEPS once each, in order. */
static int metrics_ok(const char *dir) {
  char p[1100];
  snprintf(p, sizeof p, "%s/metrics.csv", dir);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  char line[4096];
  int ok = fgets(line, sizeof line, f) && strncmp(line, "step,", 5) == 0;
  long want = 1;
  while (ok && fgets(line, sizeof line, f)) {
    ok = strchr(line, '\n') && strtol(line, NULL, 10) == want;
    want++;
  }
  fclose(f);
  return ok && want == STEPS + 1;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_kill9_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 64, 10, 4) != 0) return -1;
  FILE *f = fopen(path_in("gan.yaml"), "w");
  if (!f) return -1;
  fprintf(f,
          "seed: 7\n"
          "device: {type: cpu, threads: 1}\n"
          "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
          "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 16, ndf: 16}\n"
          "optim: {plugin: adam, lr: 2.0e-4}\n"
          "train: {batch_size: 8, max_steps: %d, log_every: 1, sample_every: 2, "
          "checkpoint_every: 1}\n"
          "run: {samples: 4, sample_nrow: 2}\n",
          root, STEPS);
  return fclose(f);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_kill9_trials(void) {
  /* the uninterrupted run, and how long it takes */
  const char *ref = path_in("ref");
  char ref_dir[256], ref_final[1200];
  snprintf(ref_dir, sizeof ref_dir, "%s", ref);
  snprintf(ref_final, sizeof ref_final, "%s/checkpoints/step_%08d.safetensors", ref_dir, STEPS);
  double t0 = now_s();
  CU_ASSERT_EQUAL_FATAL(wait_exit(start(ref_dir, 0)), 0);
  const double run_s = now_s() - t0;
  CU_ASSERT_FATAL(checkpoint_ok(ref_final));

  int resumable = 0, mid_write = 0, before_first = 0, finished = 0;
  for (int trial = 0; trial < TRIALS; trial++) {
    char dir[256], final[1200];
    snprintf(dir, sizeof dir, "%s/t%02d", root, trial);
    snprintf(final, sizeof final, "%s/checkpoints/step_%08d.safetensors", dir, STEPS);
    /* three kinds of moment: a random time within the run; just after the k-th
     * checkpoint appears; while a checkpoint's temporary exists (polled) */
    const int kind = trial % 3;
    const double at = uniform() * run_s;
    const int k = 1 + (int)(uniform() * (STEPS - 1));
    pid_t pid = start(dir, 0);
    double t = now_s();
    int finals = 0, temps = 0, exited = 0;
    for (;;) {
      if (waitpid(pid, NULL, WNOHANG) == pid) {
        exited = 1;
        break;
      }
      if (kind == 0 && now_s() - t >= at) break;
      if (kind != 0) {
        scan(dir, &finals, &temps);
        if (kind == 1 && finals >= k) break;
        if (kind == 2 && temps > 0 && finals >= k - 1) break;
      }
      if (now_s() - t > 20 * run_s + 30) break; /* never for ever */
      if (kind == 0) usleep(1000);
    }
    if (!exited) {
      kill(pid, SIGKILL);
      int rc = wait_exit(pid);
      exited = rc != 128 + SIGKILL; /* it had finished by itself just before */
    }
    finished += exited;
    scan(dir, &finals, &temps);
    mid_write += temps > 0;
    before_first += finals == 0;
    /* what kill -9 left: each final checkpoint whole, and `latest` a loadable one */
    char ck[1100], latest[1400];
    int64_t step = -1;
    snprintf(ck, sizeof ck, "%s/checkpoints", dir);
    int ok = all_finals_load(dir);
    ok = ok && ganfw_checkpoint_latest(ck, latest, sizeof latest, &step) == GANFW_OK;
    if (ok && step >= 0) ok = checkpoint_ok(latest);
    /* resumed to the end: bitwise the uninterrupted run, the temporaries gone */
    ok = ok && wait_exit(start(dir, 1)) == 0;
    ok = ok && same_tensors(final, ref_final) && metrics_ok(dir);
    scan(dir, &finals, &temps);
    ok = ok && temps == 0 && finals == STEPS;
    if (!ok)
      fprintf(stderr, "\n  trial %d (kind %d) killed at step %lld is not resumable: see %s.log\n",
              trial, kind, (long long)step, dir);
    resumable += ok;
  }
  fprintf(stderr,
          "\n  kill -9: %d of %d trials resumable bitwise (%d killed with a checkpoint's "
          "temporary on disk, %d before the first checkpoint, %d finished before the kill; an "
          "uninterrupted run takes %.2f s)\n",
          resumable, TRIALS, mid_write, before_first, finished, run_s);
  CU_ASSERT_EQUAL(resumable, TRIALS);
  CU_ASSERT(mid_write > 0); /* some kills did land inside a checkpoint write */
}

static CU_TestInfo tests[] = {
    {"kill -9 at random moments, then resume bitwise", test_kill9_trials},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("kill9", tests, suite_init, suite_clean);
}
