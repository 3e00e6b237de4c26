/* The cores this process may use (see cpus.h). */
#include "runtime/cpus.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"

double ganfw_cgroup_quota_at(const char *dir) {
  char path[4096], line[256];
  snprintf(path, sizeof path, "%s/cpu.max", dir);
  if (ganfw_file_read_line(path, line, sizeof line)) { /* v2: "<quota|max> <period>" */
    char q[64] = "";
    double period = 0;
    if (sscanf(line, "%63s %lf", q, &period) == 2 && strcmp(q, "max") != 0 && period > 0) {
      double quota = strtod(q, NULL);
      return quota > 0 ? quota / period : 0;
    }
    return 0;
  }
  snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
  if (!ganfw_file_read_line(path, line, sizeof line)) return 0;
  const double quota = strtod(line, NULL);
  snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
  if (quota <= 0 || !ganfw_file_read_line(path, line, sizeof line)) return 0;
  const double period = strtod(line, NULL);
  return period > 0 ? quota / period : 0;
}

/* The smallest quota from `dir` up to `root` (each parent may cap its children). */
static double smallest_up(const char *root, char *dir) {
  double best = 0;
  const size_t rlen = strlen(root);
  for (;;) {
    double q = ganfw_cgroup_quota_at(dir);
    if (q > 0 && (best == 0 || q < best)) best = q;
    char *slash = strrchr(dir, '/');
    if (!slash || (size_t)(slash - dir) < rlen) break;
    *slash = '\0';
  }
  return best;
}

double ganfw_cgroup_quota(const char *root, const char *self) {
  FILE *f = fopen(self, "r");
  if (!f) return ganfw_cgroup_quota_at(root);
  char line[4096];
  double best = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    /* "0::/path" (v2) or "4:cpu,cpuacct:/path" (v1) */
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = '\0';
    const char *controllers = c1 + 1, *path = c2 + 1;
    char dir[8192];
    double q = 0;
    if (*controllers == '\0') { /* v2 */
      snprintf(dir, sizeof dir, "%s%s", root, strcmp(path, "/") == 0 ? "" : path);
      q = smallest_up(root, dir);
    } else if (strstr(controllers, "cpu")) { /* v1: the cpu controller's own hierarchy */
      const char *mounts[] = {"cpu,cpuacct", "cpu", "cpuacct,cpu"};
      for (size_t m = 0; m < sizeof mounts / sizeof mounts[0] && q == 0; m++) {
        char base[4200];
        snprintf(base, sizeof base, "%s/%s", root, mounts[m]);
        snprintf(dir, sizeof dir, "%s%s", base, strcmp(path, "/") == 0 ? "" : path);
        if (access(base, F_OK) == 0) q = smallest_up(base, dir);
      }
    }
    if (q > 0 && (best == 0 || q < best)) best = q;
  }
  fclose(f);
  return best;
}

static ganfw_cpus cpus;
static pthread_once_t cpus_once = PTHREAD_ONCE_INIT;

static void find_cpus(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  cpus.affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (cpus.affinity <= 0) cpus.affinity = (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus.affinity <= 0) cpus.affinity = 1;
  cpus.quota = ganfw_cgroup_quota("/sys/fs/cgroup", "/proc/self/cgroup");
  cpus.usable = cpus.affinity;
  if (cpus.quota > 0 && (int32_t)ceil(cpus.quota) < cpus.usable)
    cpus.usable = (int32_t)ceil(cpus.quota);
  if (cpus.usable < 1) cpus.usable = 1;
}

const ganfw_cpus *ganfw_cpus_available(void) {
  pthread_once(&cpus_once, find_cpus);
  return &cpus;
}
