/* Data-parallel training over MPI (DESIGN.md, "Planned memory, and more than one device"):
 * `mpirun -np N ganfw CONFIG` starts N ranks with the same config; each trains on its
 * 1/N of every global batch, gradients are averaged across ranks in buckets while backward
 * still runs (dist/reducer.c), BatchNorm may take its statistics over the global batch
 * (dist.batchnorm: sync), and memory strategy `zero` shards the optimizer state
 * (dist/zero.c). Rank 0 alone writes the run's outputs.
 *
 * Every collective waits with a deadline (dist.timeout). When a wait runs out, the rank asks
 * the others where they are over a side channel of the job; a rank that is stopped or stuck
 * cannot answer, which names it without its cooperation, and the message says which
 * collective of which step it did not reach. The command line then ends the job
 * (ganfw_dist_world_finish): at once when a rank hangs. Without MPI in the build, or outside
 * mpirun, the world is one rank and nothing here communicates. */
#ifndef GANFW_DIST_H
#define GANFW_DIST_H

#include <stdint.h>

#include "config/config.h"
#include "ganfw/status.h"

/* --- the job (process-wide, set up by the command line) ------------------------------- */

/* Joins the job when started by mpirun (its environment says so: OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK, PMI_SIZE): MPI_Init with one thread calling MPI. A build without MPI started
 * by mpirun with more than one rank is GANFW_ERR_UNSUPPORTED saying what to install. */
ganfw_status ganfw_dist_world_init(int *argc, char ***argv);
/* The end of the process: every rank offers its exit code rc; when they all arrive within
 * the timeout MPI ends cleanly and the highest code comes back; when one does not (it
 * hangs, or waits in a collective another rank left), `message` (may be NULL or "") is
 * printed as this rank's and the job is aborted (MPI_Abort), which ends every rank. After a
 * wait of this process named ranks that hang, the job is aborted at once, without waiting
 * for them again. One rank: rc. */
int ganfw_dist_world_finish(int rc, const char *message);
int32_t ganfw_dist_world_rank(void); /* 0 outside mpirun */
int32_t ganfw_dist_world_size(void); /* 1 outside mpirun */
/* Ranks of the job on this machine (for device.threads); 1 outside mpirun. */
int32_t ganfw_dist_world_local_size(void);
/* `ganfw plan --ranks N`: the sessions planned afterwards count bytes as rank 0 of N ranks
 * would (no communication). 0 or 1: the job's own size. */
void ganfw_dist_simulate(int32_t size);

/* --- one session's communicator --------------------------------------------------------- */

/* dist.batchnorm */
enum {
  GANFW_DIST_BN_SYNC = 0,  /* batch statistics over the global batch (SyncBatchNorm) */
  GANFW_DIST_BN_LOCAL = 1, /* each rank's own statistics; running statistics from rank 0 */
  GANFW_DIST_BN_COUNT
};

typedef struct ganfw_dist_settings {
  int32_t batchnorm;  /* GANFW_DIST_BN_*: sync for a GAN, local for a classifier (DDP) */
  int64_t bucket_cap; /* bytes of gradients per all-reduce (DDP's bucket_cap_mb: 25 MiB) */
  double timeout;     /* seconds a collective may wait for the other ranks */
} ganfw_dist_settings;

/* The `dist` section: batchnorm (sync | local), bucket_cap (bytes, 1 KiB..1 GiB), timeout
 * (seconds, > 0). Read on every run so that config.resolved.yaml shows them.
 * GANFW_ERR_CONFIG naming the key. */
ganfw_status ganfw_dist_settings_from_config(const ganfw_cfg *root, int32_t gan,
                                             ganfw_dist_settings *out);
const char *ganfw_dist_bn_name(int32_t mode); /* "sync", "local" */

typedef struct ganfw_dist ganfw_dist;

struct ganfw_dist {
  int32_t rank, size;
  int32_t simulated; /* 1: a plan: sizes as a rank of `size` has them, nothing sent */
  ganfw_dist_settings set;
  int32_t bn_local;    /* > 0: BatchNorm uses this rank's statistics (samples, checks) */
  int64_t step;        /* the training step in progress, from 1 (heartbeats, messages) */
  double comm_seconds; /* time in collectives (posting and waiting) since the last reset */
  struct ganfw_dist_impl *impl;
};

/* A communicator over the job's ranks (a duplicate of MPI_COMM_WORLD), or with `simulated`
 * one that counts as `size` ranks and sends nothing. *out is the caller's
 * (ganfw_dist_destroy). Every rank must create its sessions' communicators in the same
 * order. */
ganfw_status ganfw_dist_create(const ganfw_dist_settings *set, int32_t simulated, ganfw_dist **out);
void ganfw_dist_destroy(ganfw_dist *d); /* accepts NULL */

/* 1 when d splits the work over more than one rank (a plan of N ranks included). */
static inline int32_t ganfw_dist_parallel(const ganfw_dist *d) {
  return d && d->size > 1;
}
/* 1 when d really sends (more than one rank, not a plan). */
static inline int32_t ganfw_dist_sends(const ganfw_dist *d) {
  return d && d->size > 1 && !d->simulated;
}

/* Marks the start of training step `step` (from 1): tells the other ranks this one got
 * there (they name the ranks that did not when a wait times out). */
void ganfw_dist_step_begin(ganfw_dist *d, int64_t step);

/* Collectives over every rank of d; `what` names it in a timeout ("the discriminator's
 * gradients"). Without sending (ganfw_dist_sends 0) they leave the data as it is. */
ganfw_status ganfw_dist_allreduce_sum_f64(ganfw_dist *d, double *buf, int64_t n, const char *what);
ganfw_status ganfw_dist_allreduce_max_i64(ganfw_dist *d, int64_t *buf, int64_t n, const char *what);
ganfw_status ganfw_dist_bcast(ganfw_dist *d, void *buf, int64_t bytes, int32_t root,
                              const char *what);
/* In place: rank r's counts[r] floats already sit at buf + displs[r]; afterwards every
 * rank has everyone's. */
ganfw_status ganfw_dist_allgatherv_f32(ganfw_dist *d, float *buf, const int64_t *counts,
                                       const int64_t *displs, const char *what);

/* Rank r's send[0..counts[r]) go to recv + displs[r] on `root` (recv is read on root only). */
ganfw_status ganfw_dist_gatherv_f32(ganfw_dist *d, const float *send, float *recv,
                                    const int64_t *counts, const int64_t *displs, int32_t root,
                                    const char *what);

/* Non-blocking sum of floats in place: *req for ganfw_dist_wait. */
typedef struct ganfw_dist_req {
  int32_t slot; /* -1: nothing to wait for */
} ganfw_dist_req;
ganfw_status ganfw_dist_iallreduce_sum_f32(ganfw_dist *d, float *buf, int64_t n,
                                           ganfw_dist_req *req);
ganfw_status ganfw_dist_wait(ganfw_dist *d, ganfw_dist_req *req, const char *what);
/* Lets MPI move pending requests on (between two layers of backward). */
void ganfw_dist_progress(ganfw_dist *d);

/* Every rank's `bytes` bytes at `mine` into all[rank * bytes ..] on every rank (alone: a
 * copy). */
ganfw_status ganfw_dist_allgather(ganfw_dist *d, const void *mine, int64_t bytes, void *all,
                                  const char *what);

/* Refuses a job whose ranks resolved different configs: FNV-1a of `text` on every rank
 * against rank 0's. GANFW_ERR_CONFIG naming the first rank that differs. */
ganfw_status ganfw_dist_check_same(ganfw_dist *d, const char *text, const char *what);

/* GANFW_DIST_FAULT=KIND:R:S (tests): rank R at step S. Before the step starts (in_step 0):
 * die (SIGKILL itself) or hang (sleep for ever). Once it has started (in_step 1, its
 * heartbeat sent): stop (SIGSTOP itself, as `kill -STOP` does to a rank mid-step) or fail
 * (after half of dist.timeout, when the others wait in the step's first collective, return
 * GANFW_ERR_BACKEND, as a rank that fails alone). GANFW_OK otherwise. */
ganfw_status ganfw_dist_fault_point(const ganfw_dist *d, int64_t step, int32_t in_step);

#endif
