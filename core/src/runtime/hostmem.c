/* The host memory a CPU run may take (see hostmem.h). */
#include "runtime/hostmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/file.h"

/* Values at or above this are "no limit" (cgroup v1 writes LONG_MAX rounded to a page). */
#define NO_LIMIT ((int64_t)1 << 60)

/* A byte count from `path` ("max" and absurd values: NO_LIMIT); -1 when unreadable. */
static int64_t read_bytes(const char *path) {
  char line[128];
  if (!ganfw_file_read_line(path, line, sizeof line)) return -1;
  if (strncmp(line, "max", 3) == 0) return NO_LIMIT;
  char *end = NULL;
  long long v = strtoll(line, &end, 10);
  if (end == line || v < 0) return -1;
  return v >= NO_LIMIT ? NO_LIMIT : (int64_t)v;
}

/* The value of `key` in a "key value" file (memory.stat); 0 when absent. */
static int64_t read_keyed(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[256];
  int64_t v = 0;
  const size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && line[n] == ' ') {
      v = (int64_t)strtoll(line + n + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

/* The limit of one cgroup folder (v2 when `v2`), kept in *best when it leaves less room
 * than what *best holds. */
static void cgroup_folder(const char *dir, int v2, ganfw_hostmem_limit *best) {
  char path[4200], usage_path[4200], stat_path[4200];
  if (snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes") >=
          (int)sizeof path ||
      snprintf(usage_path, sizeof usage_path, "%s/%s", dir,
               v2 ? "memory.current" : "memory.usage_in_bytes") >= (int)sizeof usage_path ||
      snprintf(stat_path, sizeof stat_path, "%s/memory.stat", dir) >= (int)sizeof stat_path)
    return; /* a folder no cgroup has */
  const int64_t limit = read_bytes(path);
  if (limit <= 0 || limit >= NO_LIMIT) return;
  int64_t usage = read_bytes(usage_path);
  if (usage < 0 || usage >= NO_LIMIT) usage = 0;
  /* file pages not recently used are dropped before the limit bites */
  usage -= read_keyed(stat_path, v2 ? "inactive_file" : "total_inactive_file");
  if (usage < 0) usage = 0;
  if (best->limit > 0 && limit - usage >= best->limit - best->used) return;
  best->limit = limit;
  best->used = usage;
  if (snprintf(best->source, sizeof best->source, "%s", path) >= (int)sizeof best->source)
    memcpy(best->source + sizeof best->source - 4, "...", 4);
  snprintf(best->how, sizeof best->how, "%s",
           v2 ? "raise the cgroup's memory.max" : "raise the cgroup's memory.limit_in_bytes");
}

/* `dir` (below `base`) and each folder above it up to `base`. */
static void cgroup_up(const char *base, char *dir, int v2, ganfw_hostmem_limit *best) {
  const size_t blen = strlen(base);
  for (;;) {
    cgroup_folder(dir, v2, best);
    char *slash = strrchr(dir, '/');
    if (!slash || (size_t)(slash - dir) < blen) break;
    *slash = '\0';
  }
}

void ganfw_hostmem_cgroup(const char *root, const char *self, ganfw_hostmem_limit *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "the cgroup's memory limit");
  FILE *f = fopen(self, "r");
  if (!f) return;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    /* "0::/path" (v2) or "4:memory:/path" (v1) */
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = '\0';
    const char *controllers = c1 + 1, *path = c2 + 1;
    if (strcmp(path, "/") == 0) path = "";
    char base[4200], dir[8400];
    if (*controllers == '\0') { /* v2: the root, or root/unified beside v1 hierarchies */
      const char *mounts[] = {"", "/unified"};
      for (int m = 0; m < 2; m++) {
        snprintf(base, sizeof base, "%s%s", root, mounts[m]);
        snprintf(dir, sizeof dir, "%s%s", base, path);
        cgroup_up(base, dir, 1, out);
      }
    } else {
      /* v1: the memory controller's own hierarchy */
      char list[256];
      snprintf(list, sizeof list, ",%s,", controllers);
      if (!strstr(list, ",memory,")) continue;
      snprintf(base, sizeof base, "%s/memory", root);
      snprintf(dir, sizeof dir, "%s%s", base, path);
      cgroup_up(base, dir, 0, out);
    }
  }
  fclose(f);
  if (out->limit > 0)
    snprintf(out->name, sizeof out->name, "%s",
             strstr(out->source, "memory.max") ? "the cgroup's memory.max"
                                               : "the cgroup's memory.limit_in_bytes");
}

/* VmSize, VmData and VmRSS of /proc/self/status in bytes. */
static void read_status(ganfw_hostmem *h) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  long long kib;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "VmSize: %lld kB", &kib) == 1) h->vm_size = (int64_t)kib * 1024;
    if (sscanf(line, "VmData: %lld kB", &kib) == 1) h->vm_data = (int64_t)kib * 1024;
    if (sscanf(line, "VmRSS: %lld kB", &kib) == 1) h->vm_rss = (int64_t)kib * 1024;
  }
  fclose(f);
}

/* The soft limit `resource` as a limit of *l (0: none). */
static void read_rlimit(int resource, int64_t used, const char *name, const char *how,
                        ganfw_hostmem_limit *l) {
  struct rlimit rl;
  snprintf(l->name, sizeof l->name, "%s", name);
  snprintf(l->how, sizeof l->how, "%s", how);
  snprintf(l->source, sizeof l->source, "getrlimit");
  l->mapped = 1;
  l->used = used;
  if (getrlimit(resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      (uint64_t)rl.rlim_cur < (uint64_t)NO_LIMIT)
    l->limit = (int64_t)rl.rlim_cur;
}

/* MemAvailable + SwapFree of /proc/meminfo. */
static void read_machine(ganfw_hostmem_limit *l) {
  snprintf(l->name, sizeof l->name, "the machine's available memory");
  snprintf(l->how, sizeof l->how, "free memory on the machine, or add swap");
  snprintf(l->source, sizeof l->source, "/proc/meminfo: MemAvailable + SwapFree");
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return;
  char line[256];
  long long kib, avail = -1, swap = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) avail = kib;
    if (sscanf(line, "SwapFree: %lld kB", &kib) == 1) swap = kib;
  }
  fclose(f);
  if (avail >= 0) l->limit = (int64_t)(avail + swap) * 1024;
}

void ganfw_hostmem_read(ganfw_hostmem *out) {
  memset(out, 0, sizeof *out);
  read_status(out);
  read_rlimit(RLIMIT_AS, out->vm_size, "RLIMIT_AS (ulimit -v)", "raise it (ulimit -v)",
              &out->limit[GANFW_HOSTMEM_AS]);
  read_rlimit(RLIMIT_DATA, out->vm_data, "RLIMIT_DATA (ulimit -d)", "raise it (ulimit -d)",
              &out->limit[GANFW_HOSTMEM_DATA]);
  const char *root = getenv("GANFW_TEST_CGROUP_ROOT");
  ganfw_hostmem_cgroup(root && *root ? root : "/sys/fs/cgroup", "/proc/self/cgroup",
                       &out->limit[GANFW_HOSTMEM_CGROUP]);
  read_machine(&out->limit[GANFW_HOSTMEM_RAM]);
}

int64_t ganfw_hostmem_needed(const ganfw_hostmem_limit *l, const ganfw_hostmem_need *need) {
  return need->step + need->both + (l->mapped ? need->mapped : need->resident);
}

int32_t ganfw_hostmem_check(const ganfw_hostmem *h, const ganfw_hostmem_need *need, int64_t *room) {
  int32_t worst = -1;
  int64_t worst_room = 0;
  for (int32_t i = 0; i < GANFW_HOSTMEM_COUNT; i++) {
    const ganfw_hostmem_limit *l = &h->limit[i];
    if (l->limit <= 0) continue;
    const int64_t left = l->limit - l->used - (ganfw_hostmem_needed(l, need) - need->step);
    if (need->step <= left) continue;
    if (worst < 0 || left < worst_room) {
      worst = i;
      worst_room = left;
    }
  }
  if (room) *room = worst_room;
  return worst;
}

const ganfw_hostmem_limit *ganfw_hostmem_tightest(const ganfw_hostmem *h) {
  const ganfw_hostmem_limit *t = NULL;
  for (int32_t k = 0; k < GANFW_HOSTMEM_COUNT; k++) {
    const ganfw_hostmem_limit *l = &h->limit[k];
    if (l->limit > 0 && (!t || l->limit - l->used < t->limit - t->used)) t = l;
  }
  return t;
}
