/* The host's memory limits on the CPU backend (runtime/hostmem.c, backend/cpu/blas_buffers.c
 * and `ganfw CONFIG`'s check before it allocates): the cgroup readers against fake cgroup
 * folders (v2, v1, nested, the v2 hierarchy beside v1), what each limit counts, OpenBLAS's
 * per-thread buffers measured in a child, and the command line under RLIMIT_AS, a fake
 * cgroup memory.max (GANFW_TEST_CGROUP_ROOT: no cgroup can be made here), a model far too
 * big for the machine and a device.memory_limit the plan already misses: each trains or
 * exits 1 within 5 s naming the limit, never hangs, and nothing is allocated first. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/blas_buffers.h"
#include "runtime/hostmem.h"
#include "testutil.h"

/* RLIMIT_AS and AddressSanitizer's terabytes of shadow memory do not go together. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define MIB ((int64_t)1 << 20)

static char root[64];
static char ganfw[4096];
static char out[65536]; /* stdout and stderr of the last command */

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

static void mkdirs(const char *path) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_hostmem_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 256, 20, 3) != 0) return -1;
  /* configs/dcgan.yaml's model and batch on a small data set */
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 1\n"
           "device: {type: cpu}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 100, ngf: 64, ndf: 64}\n"
           "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
           "train: {batch_size: 64, max_steps: 3, sample_every: 0}\n"
           "run: {out_dir: %s/run}\n",
           root, root);
  FILE *f = fopen(path_in("dcgan.yaml"), "w");
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

/* Runs the ganfw binary with args (NULL-terminated) under RLIMIT_AS `as` (0: none) and with
 * `env` ("K=V", NULL: none) added, its output in out; killed (SIGKILL) after `limit_s`.
 * Returns the exit code (128 + signal when killed); *seconds and *maxrss_mib say how long
 * it ran and its peak resident memory. */
static int run_ganfw(const char *const *args, int64_t as, const char *env, double limit_s,
                     double *seconds, double *maxrss_mib) {
  const char *argv[64] = {ganfw};
  int n = 1;
  for (const char *const *a = args; *a && n < 63; a++) argv[n++] = *a;
  argv[n] = NULL;
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const double t0 = now_s();
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    if (env) putenv((char *)env);
    if (as > 0) {
      struct rlimit rl = {(rlim_t)as, (rlim_t)as}; /* as `ulimit -v` sets it */
      setrlimit(RLIMIT_AS, &rl);
    }
    execv(ganfw, (char *const *)argv);
    _exit(127);
  }
  close(fds[1]);
  size_t len = 0;
  int killed = 0;
  for (;;) {
    const double left = limit_s - (now_s() - t0);
    if (left <= 0) {
      kill(pid, SIGKILL);
      killed = 1;
      break;
    }
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    const int r = poll(&p, 1, (int)(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t k = read(fds[0], out + len, sizeof out - 1 - len);
    if (k <= 0) break;
    len += (size_t)k;
    if (len == sizeof out - 1) len = 0; /* keep reading; the tail is what counts */
  }
  out[len] = '\0';
  close(fds[0]);
  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  wait4(pid, &status, 0, &ru);
  *seconds = now_s() - t0;
  if (maxrss_mib) *maxrss_mib = (double)ru.ru_maxrss / 1024.0;
  if (killed) printf("\n  killed after %.1f s: %s\n", *seconds, out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* --- the cgroup readers -------------------------------------------------------------------- */

static void test_cgroup_v2_nested(void) {
  char self[600];
  snprintf(self, sizeof self, "%s", path_in("self_v2"));
  write_text(self, "0::/a/b\n");
  const char *cg = path_in("cg2");
  char dir[700], file[800];
  snprintf(dir, sizeof dir, "%s/a/b", cg);
  mkdirs(dir);
  ganfw_hostmem_limit l;
  ganfw_hostmem_cgroup(cg, self, &l);
  CU_ASSERT_EQUAL(l.limit, 0); /* no files: no limit */
  snprintf(file, sizeof file, "%s/a/b/memory.max", cg);
  write_text(file, "max\n");
  snprintf(file, sizeof file, "%s/a/memory.max", cg);
  write_text(file, "104857600\n");
  snprintf(file, sizeof file, "%s/a/memory.current", cg);
  write_text(file, "31457280\n");
  snprintf(file, sizeof file, "%s/a/memory.stat", cg);
  write_text(file, "anon 20971520\nfile 10485760\ninactive_file 10485760\n");
  ganfw_hostmem_cgroup(cg, self, &l);
  CU_ASSERT_EQUAL(l.limit, 100 * MIB); /* the parent's limit caps the child */
  CU_ASSERT_EQUAL(l.used, 20 * MIB);   /* inactive file cache is dropped first */
  CU_ASSERT_PTR_NOT_NULL(strstr(l.source, "/a/memory.max"));
  CU_ASSERT_PTR_NOT_NULL(strstr(l.name, "memory.max"));
  CU_ASSERT_EQUAL(l.mapped, 0);
  /* a tighter one below wins: less room */
  snprintf(file, sizeof file, "%s/a/b/memory.max", cg);
  write_text(file, "62914560\n");
  snprintf(file, sizeof file, "%s/a/b/memory.current", cg);
  write_text(file, "10485760\n");
  ganfw_hostmem_cgroup(cg, self, &l);
  CU_ASSERT_EQUAL(l.limit, 60 * MIB);
  CU_ASSERT_EQUAL(l.used, 10 * MIB);
  CU_ASSERT_PTR_NOT_NULL(strstr(l.source, "/a/b/memory.max"));
}

static void test_cgroup_v1_and_unified(void) {
  char self[600];
  snprintf(self, sizeof self, "%s", path_in("self_v1"));
  write_text(self, "9:name=systemd:/\n4:cpu,memory:/job/7\n0::/job/7\n");
  const char *cg = path_in("cg1");
  char dir[700], file[800];
  snprintf(dir, sizeof dir, "%s/memory/job/7", cg);
  mkdirs(dir);
  snprintf(file, sizeof file, "%s/memory.limit_in_bytes", dir);
  write_text(file, "9223372036854771712\n"); /* v1's "unlimited" */
  ganfw_hostmem_limit l;
  ganfw_hostmem_cgroup(cg, self, &l);
  CU_ASSERT_EQUAL(l.limit, 0);
  write_text(file, "209715200\n");
  snprintf(file, sizeof file, "%s/memory.usage_in_bytes", dir);
  write_text(file, "157286400\n");
  snprintf(file, sizeof file, "%s/memory.stat", dir);
  write_text(file, "cache 1\ntotal_inactive_file 52428800\n");
  ganfw_hostmem_cgroup(cg, self, &l);
  CU_ASSERT_EQUAL(l.limit, 200 * MIB);
  CU_ASSERT_EQUAL(l.used, 100 * MIB);
  CU_ASSERT_PTR_NOT_NULL(strstr(l.name, "memory.limit_in_bytes"));
  /* the v2 hierarchy mounted beside v1 (root/unified) with less room */
  snprintf(dir, sizeof dir, "%s/unified/job/7", cg);
  mkdirs(dir);
  snprintf(file, sizeof file, "%s/memory.max", dir);
  write_text(file, "83886080\n");
  ganfw_hostmem_cgroup(cg, self, &l);
  CU_ASSERT_EQUAL(l.limit, 80 * MIB);
  CU_ASSERT_EQUAL(l.used, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(l.source, "/unified/job/7/memory.max"));
  /* an unreadable /proc/<pid>/cgroup is no limit, not an error */
  ganfw_hostmem_cgroup(cg, path_in("no_such_file"), &l);
  CU_ASSERT_EQUAL(l.limit, 0);
}

/* --- what each limit counts ---------------------------------------------------------------- */

static void test_check_counts_by_kind(void) {
  ganfw_hostmem h;
  memset(&h, 0, sizeof h);
  h.limit[GANFW_HOSTMEM_AS] =
      (ganfw_hostmem_limit){.limit = 1000 * MIB, .used = 400 * MIB, .mapped = 1};
  h.limit[GANFW_HOSTMEM_CGROUP] = (ganfw_hostmem_limit){.limit = 500 * MIB, .used = 300 * MIB};
  ganfw_hostmem_need need = {
      .step = 100 * MIB, .mapped = 300 * MIB, .resident = 16 * MIB, .both = 50 * MIB};
  int64_t room = -1;
  /* AS: 400 + 100 + 300 + 50 = 850 <= 1000; cgroup: 300 + 100 + 16 + 50 = 466 <= 500 */
  CU_ASSERT_EQUAL(ganfw_hostmem_check(&h, &need, &room), -1);
  CU_ASSERT_EQUAL(ganfw_hostmem_needed(&h.limit[GANFW_HOSTMEM_AS], &need), 450 * MIB);
  CU_ASSERT_EQUAL(ganfw_hostmem_needed(&h.limit[GANFW_HOSTMEM_CGROUP], &need), 166 * MIB);
  /* OpenBLAS's buffers count in full against the address space only */
  need.mapped = 500 * MIB;
  CU_ASSERT_EQUAL(ganfw_hostmem_check(&h, &need, &room), GANFW_HOSTMEM_AS);
  CU_ASSERT_EQUAL(room, 50 * MIB); /* 1000 - 400 - 500 - 50 */
  /* both short: the one with less room is named */
  need.step = 200 * MIB;
  CU_ASSERT_EQUAL(ganfw_hostmem_check(&h, &need, &room), GANFW_HOSTMEM_AS);
  h.limit[GANFW_HOSTMEM_CGROUP].limit = 350 * MIB;
  CU_ASSERT_EQUAL(ganfw_hostmem_check(&h, &need, &room), GANFW_HOSTMEM_CGROUP);
  CU_ASSERT_EQUAL(room, -16 * MIB); /* 350 - 300 - 16 - 50: nothing left for the step */
}

/* RLIMIT_AS and this process's mapped bytes, read in a child that set the limit. */
static void test_read_rlimit(void) {
  ganfw_hostmem h;
  ganfw_hostmem_read(&h);
  CU_ASSERT(h.vm_size > 0 && h.vm_rss > 0 && h.vm_data > 0);
  CU_ASSERT_EQUAL(h.limit[GANFW_HOSTMEM_AS].used, h.vm_size);
  CU_ASSERT(h.limit[GANFW_HOSTMEM_RAM].limit > 0);
  if (UNDER_ASAN) return;
  int fds[2];
  CU_ASSERT_FATAL(pipe(fds) == 0);
  const pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    struct rlimit rl = {(rlim_t)(h.vm_size + 512 * MIB), RLIM_INFINITY};
    setrlimit(RLIMIT_AS, &rl);
    ganfw_hostmem c;
    ganfw_hostmem_read(&c);
    long long v[2] = {c.limit[GANFW_HOSTMEM_AS].limit, c.limit[GANFW_HOSTMEM_AS].mapped};
    (void)!write(fds[1], v, sizeof v);
    _exit(0);
  }
  close(fds[1]);
  long long v[2] = {0, 0};
  CU_ASSERT_EQUAL(read(fds[0], v, sizeof v), (ssize_t)sizeof v);
  close(fds[0]);
  waitpid(pid, NULL, 0);
  CU_ASSERT_EQUAL(v[0], h.vm_size + 512 * MIB);
  CU_ASSERT_EQUAL(v[1], 1);
}

/* --- OpenBLAS's buffers -------------------------------------------------------------------- */

static void test_blas_buffers(void) {
  ganfw_blas_buffers b;
  CU_ASSERT_EQUAL_FATAL(ganfw_cpu_blas_buffers_measure(3, 5.0, &b), GANFW_OK);
  CU_ASSERT_EQUAL(b.done, 1);
  CU_ASSERT_EQUAL(b.threads, 3);
  CU_ASSERT_EQUAL(b.held, 3);
  CU_ASSERT(b.mapped > 0); /* OpenBLAS's buffers are at least 32 MiB each */
  printf("\n  3 threads' OpenBLAS buffers and stacks: %.1f MiB mapped\n", (double)b.mapped / MIB);
  if (UNDER_ASAN) return;
  /* a child with room for the threads' stacks but not for one more buffer: stuck in
   * OpenBLAS's retry, stopped, reported. OpenBLAS may keep a free buffer per pool thread
   * (cores - 1): cores + 1 threads need a new one. */
  const pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    const int32_t threads = (int32_t)sysconf(_SC_NPROCESSORS_ONLN) + 1;
    ganfw_hostmem h;
    ganfw_hostmem_read(&h);
    struct rlimit rl = {(rlim_t)(h.vm_size + (threads * 9 + 8) * MIB), RLIM_INFINITY};
    setrlimit(RLIMIT_AS, &rl);
    ganfw_blas_buffers s;
    const double t0 = now_s();
    if (ganfw_cpu_blas_buffers_measure(threads, 0.5, &s) != GANFW_OK) _exit(2);
    if (s.done || s.held >= threads || !strstr(s.why, "could not map")) {
      fprintf(stderr, "done %d held %d of %d: %s\n", s.done, s.held, threads, s.why);
      _exit(3);
    }
    _exit(now_s() - t0 < 3.0 ? 0 : 4);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    printf("\n  the child ended with status %d (signal %d)\n",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1,
           WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* --- the command line ---------------------------------------------------------------------- */

/* Under `ulimit -v` the run trains or says which limit it misses within 5 s. Eight threads
 * (OpenBLAS maps a buffer of 32 to 256 MiB for each, by its build) under 0.25 GB never
 * fit; under 0.5 GB and six under 1 GB they do not on a build with 128 MiB buffers, and
 * spun in OpenBLAS for ever before, deaf to SIGTERM; two under 1.5 GB always fit. */
static void test_rlimit_as_trains_or_says(void) {
  if (UNDER_ASAN) {
    printf("\n  skipped under AddressSanitizer (RLIMIT_AS)\n");
    return;
  }
  const struct {
    int64_t as;
    const char *threads;
    int want; /* the exit code, -1: 0 or 1 (the buffers' size is the build's) */
  } cases[] = {{250 * 1000 * 1000, "device.threads=8", 1},
               {500 * 1000 * 1000, "device.threads=8", -1},
               {1000 * 1000 * 1000, "device.threads=6", -1},
               {1500 * 1000 * 1000, "device.threads=2", 0}};
  char dir[600];
  snprintf(dir, sizeof dir, "run.out_dir=%s", path_in("asrun"));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double seconds = 0;
    const int rc = run_ganfw(
        (const char *[]){path_in("dcgan.yaml"), "--set", cases[i].threads, "--set", dir, NULL},
        cases[i].as, NULL, 30.0, &seconds, NULL);
    printf("\n  RLIMIT_AS %.2f GB, %s: exit %d after %.1f s", (double)cases[i].as / 1e9,
           cases[i].threads, rc, seconds);
    /* A build with the CUDA backend maps cuBLAS and cuDNN at load (about 0.8 GB of address
     * space): below that the dynamic loader refuses to start it, with its own message, at
     * once. Nothing of ganfw runs; it neither hangs nor trains. */
    if (rc == 127 && strstr(out, "error while loading shared libraries")) {
      CU_ASSERT(cases[i].want != 0);
      CU_ASSERT(seconds < 5.0);
      continue;
    }
    if (cases[i].want >= 0) {
      CU_ASSERT_EQUAL(rc, cases[i].want);
    } else {
      CU_ASSERT(rc == 0 || rc == 1);
    }
    if (rc == 1) {
      CU_ASSERT(seconds < 5.0);
      CU_ASSERT_PTR_NOT_NULL(strstr(out, "RLIMIT_AS (ulimit -v) allows"));
      /* the threads' buffers are named, unless planning itself ran out (a CUDA build's
       * libraries leave less room) */
      CU_ASSERT(strstr(out, "OpenBLAS") || strstr(out, "planning the run already ran out"));
      CU_ASSERT_PTR_NULL(strstr(out, "training dcgan")); /* said before the first step */
    }
  }
  printf("\n");
}

/* A cgroup memory.max below what the run needs (a fake cgroup folder): said before
 * anything is allocated, naming the file, with what would fit under it. */
static void test_cgroup_limit_says(void) {
  char dir[600], file[700], env[700];
  snprintf(dir, sizeof dir, "%s", path_in("fakecg"));
  mkdirs(dir);
  snprintf(file, sizeof file, "%s/memory.max", dir);
  write_text(file, "83886080\n"); /* 80 MiB */
  snprintf(file, sizeof file, "%s/memory.current", dir);
  write_text(file, "20971520\n");
  snprintf(env, sizeof env, "GANFW_TEST_CGROUP_ROOT=%s", dir);
  double seconds = 0;
  const int rc =
      run_ganfw((const char *[]){path_in("dcgan.yaml"), NULL}, 0, env, 20.0, &seconds, NULL);
  printf("\n  cgroup memory.max 80 MiB: exit %d after %.1f s\n", rc, seconds);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT(seconds < 5.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "the cgroup's memory.max ("));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "fakecg/memory.max) allows 80.00 MiB"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "What would fit (planned from shapes, memory_limit"));
  CU_ASSERT_PTR_NULL(strstr(out, "training dcgan")); /* refused before the run began */
}

/* A model far too big for the machine: refused from the plan in a second, without
 * allocating. Before, it allocated 2.87 GiB over 15 s before the same advice. */
static void test_too_big_refused_before_allocating(void) {
  double seconds = 0, rss = 0;
  const int rc =
      run_ganfw((const char *[]){path_in("dcgan.yaml"), "--set", "model.ngf=60000", NULL}, 0, NULL,
                60.0, &seconds, &rss);
  printf("\n  model.ngf=60000: exit %d after %.1f s, peak RSS %.0f MiB\n", rc, seconds, rss);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT(seconds < 5.0);
  CU_ASSERT(rss < 400.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "the step's planned peak"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "What would fit"));
}

/* A device.memory_limit the plan already misses: the OOM advice and the flight recorder's
 * files before anything is allocated. */
static void test_memory_limit_refused_from_plan(void) {
  char dir[600];
  snprintf(dir, sizeof dir, "run.out_dir=%s", path_in("limited"));
  double seconds = 0;
  const int rc = run_ganfw((const char *[]){path_in("dcgan.yaml"), "--set",
                                            "device.memory_limit=40MiB", "--set", dir, NULL},
                           0, NULL, 60.0, &seconds, NULL);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "planned before anything was allocated, the run does not "
                                     "fit device.memory_limit 40.00 MiB"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "out of memory: tried to allocate"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "What would fit"));
  CU_ASSERT_EQUAL(access(path_in("limited/oom/report.txt"), F_OK), 0);
  CU_ASSERT_EQUAL(access(path_in("limited/checkpoints"), F_OK), -1); /* no run began */
}

static CU_TestInfo tests[] = {
    {"cgroup v2, nested", test_cgroup_v2_nested},
    {"cgroup v1 and v2 beside it", test_cgroup_v1_and_unified},
    {"each limit counts its kind of bytes", test_check_counts_by_kind},
    {"RLIMIT_AS is read with VmSize", test_read_rlimit},
    {"OpenBLAS's buffers measured in a child", test_blas_buffers},
    {"under ulimit -v: trains or says so within 5 s", test_rlimit_as_trains_or_says},
    {"a cgroup memory.max below the run: said at once", test_cgroup_limit_says},
    {"a model far too big: refused before allocating", test_too_big_refused_before_allocating},
    {"a memory_limit the plan misses: refused from the plan", test_memory_limit_refused_from_plan},
    CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("hostmem", tests, suite_init, suite_clean);
}
