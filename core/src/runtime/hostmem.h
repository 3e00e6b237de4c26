/* The host memory a CPU run may take. On the CPU backend the host's memory is the
 * device's, and a process may be held to less than the machine has: RLIMIT_AS (ulimit -v,
 * mapped address space), RLIMIT_DATA (ulimit -d, private writable mappings), its cgroup's
 * memory limit (v2 memory.max, v1 memory.limit_in_bytes: pages in use) and the machine's
 * available memory (MemAvailable + SwapFree). Each limit is read with what already counts
 * against it, so that a run can be checked against all of them before it allocates. */
#ifndef GANFW_HOSTMEM_H
#define GANFW_HOSTMEM_H

#include <stddef.h>
#include <stdint.h>

enum {
  GANFW_HOSTMEM_AS = 0, /* RLIMIT_AS: every mapping counts, touched or not */
  GANFW_HOSTMEM_DATA,   /* RLIMIT_DATA: private writable mappings (heap, buffers, stacks) */
  GANFW_HOSTMEM_CGROUP, /* the cgroup's limit: pages in use, less reclaimable file cache */
  GANFW_HOSTMEM_RAM,    /* the machine: MemAvailable + SwapFree */
  GANFW_HOSTMEM_COUNT
};

typedef struct ganfw_hostmem_limit {
  int64_t limit;    /* bytes; 0: none */
  int64_t used;     /* bytes already counted against it (VmSize, VmData, the cgroup's usage
                       less its inactive file cache; 0 for the machine, whose limit is what
                       is still available) */
  int32_t mapped;   /* 1: counts mapped bytes (untouched buffers and stacks in full);
                       0: counts pages in use */
  char name[64];    /* "RLIMIT_AS (ulimit -v)" */
  char how[96];     /* what to do: "raise it (ulimit -v)", "raise the cgroup's memory.max" */
  char source[512]; /* where it was read: "/sys/fs/cgroup/x/memory.max", "getrlimit" */
} ganfw_hostmem_limit;

typedef struct ganfw_hostmem {
  ganfw_hostmem_limit limit[GANFW_HOSTMEM_COUNT];
  int64_t vm_size, vm_data, vm_rss; /* this process's, from /proc/self/status (0: unknown) */
} ganfw_hostmem;

/* What a run still needs, by how it counts. */
typedef struct ganfw_hostmem_need {
  int64_t step;     /* the allocator's bytes still to come (the plan's peak reserved less
                       what is reserved now): mapped and in use */
  int64_t mapped;   /* mapped only: OpenBLAS's per-thread buffers, thread stacks */
  int64_t resident; /* in use only: the part of those buffers OpenBLAS touches */
  int64_t both;     /* mapped and in use: the data loader's batches, and an allowance for
                       the run's outputs (sample grids, checkpoints) */
} ganfw_hostmem_need;

/* This process's limits and usage. Never fails: a limit whose files are absent or
 * unreadable is no limit. The cgroup is looked up below "/sys/fs/cgroup" from
 * /proc/self/cgroup; GANFW_TEST_CGROUP_ROOT replaces that folder (for tests only). */
void ganfw_hostmem_read(ganfw_hostmem *out);

/* The memory limit of the cgroup that `self` (a /proc/<pid>/cgroup file) names below
 * `root`: cgroup v2 ("0::/path": root/path or root/unified/path, memory.max,
 * memory.current, memory.stat's inactive_file) or v1 ("N:memory:/path": root/memory/path,
 * memory.limit_in_bytes, memory.usage_in_bytes, memory.stat's total_inactive_file). Of the
 * folder and each one above it up to the hierarchy's root, the one with the least room
 * (limit - usage) is kept in *out; out->limit 0 when none sets a limit. */
void ganfw_hostmem_cgroup(const char *root, const char *self, ganfw_hostmem_limit *out);

/* Of h's limits that are set, the one with the least room (limit - used); NULL when none
 * is set. Points into h. */
const ganfw_hostmem_limit *ganfw_hostmem_tightest(const ganfw_hostmem *h);
/* The bytes `need` takes under limit `l`. */
int64_t ganfw_hostmem_needed(const ganfw_hostmem_limit *l, const ganfw_hostmem_need *need);

/* The first limit of h that `need` does not fit (GANFW_HOSTMEM_*), or -1 when it fits all.
 * *room (may be NULL) receives, for that limit, the bytes left for the step: limit - used -
 * the need's other parts (negative when even those do not fit). */
int32_t ganfw_hostmem_check(const ganfw_hostmem *h, const ganfw_hostmem_need *need, int64_t *room);

#endif
