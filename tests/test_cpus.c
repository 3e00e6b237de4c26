/* device.threads: auto: the cores this process may use, from its affinity mask and its
 * cgroup's CPU quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, the
 * smallest along the path up to the root), read here from fake cgroup trees; and the key
 * itself: auto, a count, or an error naming it. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "config/config.h"
#include "runtime/cpus.h"
#include "runtime/ctx.h"
#include "testutil.h"

static char root[64];

static const char *at(const char *rel) {
  static char buf[8][600];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static void put(const char *rel, const char *text) {
  FILE *f = fopen(at(rel), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_cpus_XXXXXX");
  if (!mkdtemp(root)) return -1;
  const char *dirs[] = {
      "v2", "v2/job", "v2/job/task", "v1", "v1/cpu,cpuacct", "v1/cpu,cpuacct/slurm", "none"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (mkdir(at(dirs[i]), 0755) != 0) return -1;
  return 0;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_quota_files(void) {
  put("v2/cpu.max", "max 100000\n");
  CU_ASSERT_EQUAL(ganfw_cgroup_quota_at(at("v2")), 0.0); /* no limit */
  put("v2/job/cpu.max", "150000 100000\n");
  CU_ASSERT_DOUBLE_EQUAL(ganfw_cgroup_quota_at(at("v2/job")), 1.5, 1e-12);
  put("v1/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  put("v1/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  CU_ASSERT_EQUAL(ganfw_cgroup_quota_at(at("v1/cpu,cpuacct")), 0.0);
  put("v1/cpu,cpuacct/slurm/cpu.cfs_quota_us", "300000\n");
  put("v1/cpu,cpuacct/slurm/cpu.cfs_period_us", "100000\n");
  CU_ASSERT_DOUBLE_EQUAL(ganfw_cgroup_quota_at(at("v1/cpu,cpuacct/slurm")), 3.0, 1e-12);
  CU_ASSERT_EQUAL(ganfw_cgroup_quota_at(at("none")), 0.0); /* no files: no quota */
  put("none/cpu.max", "garbage\n");
  CU_ASSERT_EQUAL(ganfw_cgroup_quota_at(at("none")), 0.0);
}

/* The process's cgroup as /proc/self/cgroup names it; a parent's quota caps a child's. */
static void test_quota_of_process(void) {
  put("v2/job/task/cpu.max", "max 100000\n");
  put("self_v2", "0::/job/task\n");
  CU_ASSERT_DOUBLE_EQUAL(ganfw_cgroup_quota(at("v2"), at("self_v2")), 1.5, 1e-12);
  put("v2/job/task/cpu.max", "50000 100000\n"); /* the smaller, further down */
  CU_ASSERT_DOUBLE_EQUAL(ganfw_cgroup_quota(at("v2"), at("self_v2")), 0.5, 1e-12);
  put("self_v1", "4:memory:/x\n2:cpu,cpuacct:/slurm\n0::/\n");
  CU_ASSERT_DOUBLE_EQUAL(ganfw_cgroup_quota(at("v1"), at("self_v1")), 3.0, 1e-12);
  put("self_root", "0::/\n");
  CU_ASSERT_EQUAL(ganfw_cgroup_quota(at("v2"), at("self_root")), 0.0);
}

/* This process: at least one core, at most its affinity mask. */
static void test_available(void) {
  const ganfw_cpus *c = ganfw_cpus_available();
  cpu_set_t set;
  CU_ASSERT_EQUAL_FATAL(sched_getaffinity(0, sizeof set, &set), 0);
  CU_ASSERT_EQUAL(c->affinity, CPU_COUNT(&set));
  CU_ASSERT(c->usable >= 1 && c->usable <= c->affinity);
  if (c->quota > 0) CU_ASSERT(c->usable <= (int)c->quota + 1);
}

static ganfw_status threads_of(const char *yaml, int32_t *threads) {
  ganfw_config *cfg = NULL;
  ganfw_status st = ganfw_config_load_string(yaml, "t.yaml", &cfg);
  ganfw_ctx_options opt;
  if (st == GANFW_OK) st = ganfw_ctx_options_from_config(ganfw_config_root(cfg), &opt);
  if (st == GANFW_OK) *threads = opt.threads;
  ganfw_config_destroy(cfg);
  return st;
}

static void test_threads_key(void) {
  int32_t t = -1;
  CU_ASSERT_EQUAL(threads_of("device: {threads: auto}\n", &t), GANFW_OK);
  CU_ASSERT_EQUAL(t, 0); /* auto: resolved when the context is made */
  CU_ASSERT_EQUAL(threads_of("device: {type: cpu}\n", &t), GANFW_OK);
  CU_ASSERT_EQUAL(t, 0); /* the default is auto */
  CU_ASSERT_EQUAL(threads_of("device: {threads: 3}\n", &t), GANFW_OK);
  CU_ASSERT_EQUAL(t, 3);
  CU_ASSERT_EQUAL(threads_of("device: {threads: many}\n", &t), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "t.yaml:1:19: device.threads: 'many'"));
  CU_ASSERT_EQUAL(threads_of("device: {threads: 2000}\n", &t), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(threads_of("device: {threads: -1}\n", &t), GANFW_ERR_CONFIG);
  /* a context of auto gets the usable cores */
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 0};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  CU_ASSERT_EQUAL(ctx->threads, ganfw_cpus_available()->usable);
  ganfw_ctx_destroy(ctx);
}

static CU_TestInfo tests[] = {
    {"cgroup v1 and v2 quota files", test_quota_files},
    {"the quota of a process's cgroup path", test_quota_of_process},
    {"this process's usable cores", test_available},
    {"device.threads: auto, a count, or an error", test_threads_key},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("cpus", tests, suite_init, suite_clean);
}
