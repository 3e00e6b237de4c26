/* The cores this process may use, for device.threads: auto: the CPUs of its affinity mask
 * (taskset, cpusets, a container's --cpuset-cpus), capped by its cgroup's CPU quota (a
 * container's --cpus, a systemd CPUQuota, a batch scheduler's share), rounded up. */
#ifndef GANFW_CPUS_H
#define GANFW_CPUS_H

#include <stdint.h>

typedef struct ganfw_cpus {
  int32_t affinity; /* CPUs in the affinity mask (the online CPUs when it cannot be read) */
  double quota;     /* the cgroup's CPU quota in cores; 0: none */
  int32_t usable;   /* min(affinity, ceil(quota)), at least 1 */
} ganfw_cpus;

/* This process's (computed once). */
const ganfw_cpus *ganfw_cpus_available(void);

/* The CPU quota in cores of the cgroup folder `dir`: cgroup v2's cpu.max ("max 100000" is
 * none, "150000 100000" is 1.5), else v1's cpu.cfs_quota_us / cpu.cfs_period_us (-1: none);
 * 0 when neither says one. */
double ganfw_cgroup_quota_at(const char *dir);

/* The quota of this process's cgroup below `root` ("/sys/fs/cgroup"), as /proc/self/cgroup
 * (`self`) names it, the smallest along the path up to the root; 0 when none. */
double ganfw_cgroup_quota(const char *root, const char *self);

#endif
