/* The job and its collectives (see dist.h). Every wait polls its request with a deadline
 * and, between polls, the heartbeats: each rank tells the others which step it started, so
 * that a rank whose wait runs out can name those that never got there. */
#include "dist/dist.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"

#ifdef GANFW_HAVE_MPI
#include <mpi.h>
#include <sched.h>
#endif

/* The job as the command line joined it. */
static struct {
  int32_t rank, size, local_size;
  int32_t mpi;      /* MPI_Init ran */
  int32_t simulate; /* ganfw plan --ranks N */
  double timeout;   /* the last session's dist.timeout, for the end of the process */
} world = {.rank = 0, .size = 1, .local_size = 1, .timeout = 300.0};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An integer from the environment, or -1. */
static int32_t env_int(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return -1;
  char *end = NULL;
  long x = strtol(v, &end, 10);
  return end && *end == '\0' && x >= 0 && x < (1L << 30) ? (int32_t)x : -1;
}

/* The job size mpirun (Open MPI, PMIx or a PMI launcher) announced, or -1. */
static int32_t launched_size(void) {
  static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int32_t n = env_int(names[i]);
    if (n >= 0) return n;
  }
  return getenv("PMIX_RANK") ? 1 : -1;
}

ganfw_status ganfw_dist_world_init(int *argc, char ***argv) {
  const int32_t n = launched_size();
  if (n < 0) return GANFW_OK;
#ifdef GANFW_HAVE_MPI
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    return ganfw_error_set(GANFW_ERR_BACKEND, "MPI_Init failed: is this process started by "
                                              "a working mpirun (openmpi-bin)?");
  world.mpi = 1;
  int r = 0, s = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  world.rank = r;
  world.size = s;
  const int32_t local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  world.local_size = local > 0 ? local : s;
  return GANFW_OK;
#else
  (void)argc;
  (void)argv;
  if (n <= 1) return GANFW_OK;
  return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                         "started by mpirun with %d ranks, but this ganfw was built without "
                         "MPI: install libopenmpi-dev (apt-get install libopenmpi-dev "
                         "openmpi-bin), then configure and build again",
                         (int)n);
#endif
}

int32_t ganfw_dist_world_rank(void) {
  return world.rank;
}

int32_t ganfw_dist_world_size(void) {
  return world.simulate > 1 ? world.simulate : world.size;
}

int32_t ganfw_dist_world_local_size(void) {
  return world.local_size;
}

void ganfw_dist_simulate(int32_t size) {
  world.simulate = size > 1 ? size : 0;
}

static const char *const bn_names[GANFW_DIST_BN_COUNT] = {"sync", "local"};

const char *ganfw_dist_bn_name(int32_t mode) {
  return mode >= 0 && mode < GANFW_DIST_BN_COUNT ? bn_names[mode] : "unknown";
}

ganfw_status ganfw_dist_settings_from_config(const ganfw_cfg *root, int32_t gan,
                                             ganfw_dist_settings *out) {
  const ganfw_cfg *dist = ganfw_cfg_section(root, "dist");
  const char *bn = NULL;
  int64_t cap = 0;
  double timeout = 0;
  ganfw_status st;
  if ((st = ganfw_cfg_string(dist, "batchnorm", gan ? "sync" : "local", &bn)) ||
      (st = ganfw_cfg_bytes(dist, "bucket_cap", 25ll << 20, &cap)) ||
      (st = ganfw_cfg_float(dist, "timeout", 300.0, &timeout)))
    return st;
  out->batchnorm = -1;
  for (int32_t k = 0; bn && k < GANFW_DIST_BN_COUNT; k++)
    if (strcmp(bn, bn_names[k]) == 0) out->batchnorm = k;
  if (out->batchnorm < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: dist.batchnorm: '%s' is not a mode: expected sync (statistics "
                           "over the global batch, SyncBatchNorm) or local (each rank's own, "
                           "as DistributedDataParallel)",
                           ganfw_cfg_where(ganfw_cfg_child(dist, "batchnorm")), bn ? bn : "null");
  if (cap < 1024 || cap > (1ll << 30))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: dist.bucket_cap must be between 1KiB and 1GiB (default 25MiB), "
                           "got %lld bytes",
                           ganfw_cfg_where(ganfw_cfg_child(dist, "bucket_cap")), (long long)cap);
  if (!(timeout > 0 && timeout <= 86400))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: dist.timeout must be a number of seconds in (0, 86400] "
                           "(default 300), got %g",
                           ganfw_cfg_where(ganfw_cfg_child(dist, "timeout")), timeout);
  out->bucket_cap = cap;
  out->timeout = timeout;
  return GANFW_OK;
}

void ganfw_dist_fault_point(const ganfw_dist *d, int64_t step) {
  const char *f = getenv("GANFW_DIST_FAULT");
  if (!f || !ganfw_dist_sends(d)) return;
  char kind[8] = "";
  int rank = -1;
  long long at = -1;
  if (sscanf(f, "%7[a-z]:%d:%lld", kind, &rank, &at) != 3 || rank != d->rank || at != step) return;
  if (strcmp(kind, "die") == 0) {
    fprintf(stderr, "ganfw: rank %d: GANFW_DIST_FAULT: dying at step %lld\n", rank, at);
    raise(SIGKILL);
  } else if (strcmp(kind, "hang") == 0) {
    fprintf(stderr, "ganfw: rank %d: GANFW_DIST_FAULT: hanging at step %lld\n", rank, at);
    for (;;) pause();
  }
}

/* FNV-1a, 64 bits. */
static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

#ifdef GANFW_HAVE_MPI

enum { MAX_REQS = 512, TAG_BEAT = 7 };

struct ganfw_dist_impl {
  MPI_Comm comm; /* the collectives */
  MPI_Comm beat; /* heartbeats */
  MPI_Request reqs[MAX_REQS];
  int32_t used[MAX_REQS];
  /* heartbeats: per peer, the last step it said it started, and the posted receive */
  int64_t *seen, *inbox, *outbox;
  MPI_Request *recv, *send;
  int *ci, *di; /* [size]: counts and displacements of a v-collective */
};

static ganfw_status mpi_error(int rc, const char *call, const char *what) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return ganfw_error_set(GANFW_ERR_BACKEND, "%s of %s failed: %s", call, what, text);
}

/* Takes in every heartbeat that arrived. */
static void drain_beats(ganfw_dist *d) {
  struct ganfw_dist_impl *m = d->impl;
  for (int32_t p = 0; p < d->size; p++) {
    if (p == d->rank) continue;
    while (m->recv[p] != MPI_REQUEST_NULL) {
      int flag = 0;
      if (MPI_Test(&m->recv[p], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) break;
      if (m->inbox[p] > m->seen[p]) m->seen[p] = m->inbox[p];
      if (MPI_Irecv(&m->inbox[p], 1, MPI_INT64_T, p, TAG_BEAT, m->beat, &m->recv[p]) != MPI_SUCCESS)
        m->recv[p] = MPI_REQUEST_NULL;
    }
  }
}

/* The message of a wait that ran out: the ranks that did not start this step. */
static ganfw_status timed_out(ganfw_dist *d, const char *what, double waited) {
  struct ganfw_dist_impl *m = d->impl;
  drain_beats(d);
  char behind[512] = "";
  size_t used = 0;
  for (int32_t p = 0; p < d->size && used + 64 < sizeof behind; p++) {
    if (p == d->rank || m->seen[p] >= d->step) continue;
    used += (size_t)snprintf(behind + used, sizeof behind - used, "%srank %d (last at step %lld)",
                             used ? ", " : "", (int)p, (long long)m->seen[p]);
  }
  if (used)
    return ganfw_error_set(GANFW_ERR_BACKEND,
                           "rank %d: %s at step %lld waited %.0f s (dist.timeout) for the other "
                           "ranks: %s did not reach step %lld; it died or hangs",
                           (int)d->rank, what, (long long)d->step, waited, behind,
                           (long long)d->step);
  return ganfw_error_set(GANFW_ERR_BACKEND,
                         "rank %d: %s at step %lld waited %.0f s (dist.timeout) for the other "
                         "ranks: every rank started step %lld, so one of them hangs inside "
                         "it or failed there",
                         (int)d->rank, what, (long long)d->step, waited, (long long)d->step);
}

/* Polls r until it completes or dist.timeout runs out. */
static ganfw_status wait_request(ganfw_dist *d, MPI_Request *r, const char *what) {
  const double t0 = now_s();
  for (int64_t polls = 0;; polls++) {
    int flag = 0;
    int rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Test", what);
    if (flag) break;
    if ((polls & 63) == 0) {
      drain_beats(d);
      const double waited = now_s() - t0;
      if (waited > d->set.timeout) return timed_out(d, what, waited);
    }
    if (polls < 2000) {
      sched_yield();
    } else {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
  }
  d->comm_seconds += now_s() - t0;
  return GANFW_OK;
}

ganfw_status ganfw_dist_create(const ganfw_dist_settings *set, int32_t simulated,
                               ganfw_dist **out) {
  *out = NULL;
  ganfw_dist *d = calloc(1, sizeof *d);
  if (!d) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  d->set = *set;
  d->rank = world.rank;
  d->size = ganfw_dist_world_size();
  d->simulated = simulated || world.simulate > 1 || !world.mpi;
  world.timeout = set->timeout;
  if (!ganfw_dist_sends(d)) {
    *out = d;
    return GANFW_OK;
  }
  struct ganfw_dist_impl *m = calloc(1, sizeof *m);
  const size_t n = (size_t)d->size;
  if (m) {
    m->seen = calloc(n, sizeof *m->seen);
    m->inbox = calloc(n, sizeof *m->inbox);
    m->outbox = calloc(n, sizeof *m->outbox);
    m->recv = calloc(n, sizeof *m->recv);
    m->send = calloc(n, sizeof *m->send);
    m->ci = calloc(n, sizeof *m->ci);
    m->di = calloc(n, sizeof *m->di);
  }
  d->impl = m;
  if (!m || !m->seen || !m->inbox || !m->outbox || !m->recv || !m->send || !m->ci || !m->di) {
    ganfw_dist_destroy(d);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  m->comm = m->beat = MPI_COMM_NULL;
  for (int32_t p = 0; p < d->size; p++) m->recv[p] = m->send[p] = MPI_REQUEST_NULL;
  MPI_Request r[2];
  int rc = MPI_Comm_idup(MPI_COMM_WORLD, &m->comm, &r[0]);
  ganfw_status st = rc == MPI_SUCCESS ? GANFW_OK : mpi_error(rc, "MPI_Comm_idup", "the job");
  if (st == GANFW_OK) st = wait_request(d, &r[0], "joining the job");
  if (st == GANFW_OK && (rc = MPI_Comm_idup(MPI_COMM_WORLD, &m->beat, &r[1])) != MPI_SUCCESS)
    st = mpi_error(rc, "MPI_Comm_idup", "the job's heartbeats");
  if (st == GANFW_OK) st = wait_request(d, &r[1], "joining the job");
  if (st != GANFW_OK) {
    ganfw_dist_destroy(d);
    return st;
  }
  MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(m->beat, MPI_ERRORS_RETURN);
  for (int32_t p = 0; p < d->size; p++)
    if (p != d->rank) MPI_Irecv(&m->inbox[p], 1, MPI_INT64_T, p, TAG_BEAT, m->beat, &m->recv[p]);
  *out = d;
  return GANFW_OK;
}

void ganfw_dist_destroy(ganfw_dist *d) {
  if (!d) return;
  struct ganfw_dist_impl *m = d->impl;
  if (m) {
    for (int32_t p = 0; m->recv && p < d->size; p++) {
      if (m->recv[p] != MPI_REQUEST_NULL) {
        MPI_Cancel(&m->recv[p]);
        MPI_Request_free(&m->recv[p]);
      }
      if (m->send && m->send[p] != MPI_REQUEST_NULL) MPI_Request_free(&m->send[p]);
    }
    for (int32_t i = 0; i < MAX_REQS; i++)
      if (m->used[i] == 1) MPI_Request_free(&m->reqs[i]);
    if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
    if (m->beat != MPI_COMM_NULL) MPI_Comm_free(&m->beat);
    free(m->seen);
    free(m->inbox);
    free(m->outbox);
    free(m->recv);
    free(m->send);
    free(m->ci);
    free(m->di);
    free(m);
  }
  free(d);
}

void ganfw_dist_step_begin(ganfw_dist *d, int64_t step) {
  if (!d) return;
  d->step = step;
  if (!ganfw_dist_sends(d)) return;
  struct ganfw_dist_impl *m = d->impl;
  drain_beats(d);
  for (int32_t p = 0; p < d->size; p++) {
    if (p == d->rank) continue;
    int flag = 1;
    if (m->send[p] != MPI_REQUEST_NULL) MPI_Test(&m->send[p], &flag, MPI_STATUS_IGNORE);
    if (!flag) continue; /* the last one is still on its way: the peer is behind */
    m->outbox[p] = step;
    MPI_Isend(&m->outbox[p], 1, MPI_INT64_T, p, TAG_BEAT, m->beat, &m->send[p]);
  }
}

void ganfw_dist_progress(ganfw_dist *d) {
  if (!ganfw_dist_sends(d)) return;
  struct ganfw_dist_impl *m = d->impl;
  for (int32_t i = 0; i < MAX_REQS; i++) {
    if (!m->used[i]) continue;
    int flag = 0;
    MPI_Test(&m->reqs[i], &flag, MPI_STATUS_IGNORE);
    if (flag) m->used[i] = 2; /* done; ganfw_dist_wait finds it so */
    break;                    /* one test moves the progress engine for all */
  }
}

static ganfw_status collective(ganfw_dist *d, int rc, MPI_Request *r, const char *call,
                               const char *what) {
  if (rc != MPI_SUCCESS) return mpi_error(rc, call, what);
  return wait_request(d, r, what);
}

ganfw_status ganfw_dist_allreduce_sum_f64(ganfw_dist *d, double *buf, int64_t n, const char *what) {
  if (!ganfw_dist_sends(d) || n <= 0) return GANFW_OK;
  MPI_Request r;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, d->impl->comm, &r);
  return collective(d, rc, &r, "MPI_Iallreduce", what);
}

ganfw_status ganfw_dist_allreduce_max_i64(ganfw_dist *d, int64_t *buf, int64_t n,
                                          const char *what) {
  if (!ganfw_dist_sends(d) || n <= 0) return GANFW_OK;
  MPI_Request r;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_INT64_T, MPI_MAX, d->impl->comm, &r);
  return collective(d, rc, &r, "MPI_Iallreduce", what);
}

ganfw_status ganfw_dist_bcast(ganfw_dist *d, void *buf, int64_t bytes, int32_t root,
                              const char *what) {
  if (!ganfw_dist_sends(d) || bytes <= 0) return GANFW_OK;
  MPI_Request r;
  int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, d->impl->comm, &r);
  return collective(d, rc, &r, "MPI_Ibcast", what);
}

/* counts and displs as the int arrays MPI's v-collectives take (kept in impl). */
static void int_layout(ganfw_dist *d, const int64_t *counts, const int64_t *displs) {
  for (int32_t p = 0; p < d->size; p++) {
    d->impl->ci[p] = (int)counts[p];
    d->impl->di[p] = (int)displs[p];
  }
}

ganfw_status ganfw_dist_allgatherv_f32(ganfw_dist *d, float *buf, const int64_t *counts,
                                       const int64_t *displs, const char *what) {
  if (!ganfw_dist_sends(d)) return GANFW_OK;
  int_layout(d, counts, displs);
  MPI_Request r;
  int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, d->impl->ci, d->impl->di,
                           MPI_FLOAT, d->impl->comm, &r);
  return collective(d, rc, &r, "MPI_Iallgatherv", what);
}

ganfw_status ganfw_dist_gatherv_f32(ganfw_dist *d, const float *send, float *recv,
                                    const int64_t *counts, const int64_t *displs, int32_t root,
                                    const char *what) {
  if (!ganfw_dist_sends(d)) return GANFW_OK;
  int_layout(d, counts, displs);
  MPI_Request r;
  int rc = MPI_Igatherv(send, d->impl->ci[d->rank], MPI_FLOAT, recv, d->impl->ci, d->impl->di,
                        MPI_FLOAT, root, d->impl->comm, &r);
  return collective(d, rc, &r, "MPI_Igatherv", what);
}

ganfw_status ganfw_dist_iallreduce_sum_f32(ganfw_dist *d, float *buf, int64_t n,
                                           ganfw_dist_req *req) {
  req->slot = -1;
  if (!ganfw_dist_sends(d) || n <= 0) return GANFW_OK;
  struct ganfw_dist_impl *m = d->impl;
  int32_t k = 0;
  while (k < MAX_REQS && m->used[k]) k++;
  if (k == MAX_REQS)
    return ganfw_error_set(GANFW_ERR_INTERNAL, "more than %d all-reduces in flight", MAX_REQS);
  const double t0 = now_s();
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, m->comm, &m->reqs[k]);
  d->comm_seconds += now_s() - t0;
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iallreduce", "gradients");
  m->used[k] = 1;
  req->slot = k;
  return GANFW_OK;
}

ganfw_status ganfw_dist_wait(ganfw_dist *d, ganfw_dist_req *req, const char *what) {
  if (req->slot < 0) return GANFW_OK;
  struct ganfw_dist_impl *m = d->impl;
  const int32_t k = req->slot;
  req->slot = -1;
  ganfw_status st = m->used[k] == 2 ? GANFW_OK : wait_request(d, &m->reqs[k], what);
  m->used[k] = 0;
  return st;
}

ganfw_status ganfw_dist_check_same(ganfw_dist *d, const char *text, const char *what) {
  if (!ganfw_dist_sends(d)) return GANFW_OK;
  uint64_t mine = fnv1a(text);
  uint64_t *all = malloc(sizeof *all * (size_t)d->size);
  if (!all) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  MPI_Request r;
  int rc = MPI_Iallgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, d->impl->comm, &r);
  ganfw_status st = collective(d, rc, &r, "MPI_Iallgather", what);
  for (int32_t p = 1; st == GANFW_OK && p < d->size; p++)
    if (all[p] != all[0])
      st = ganfw_error_set(GANFW_ERR_CONFIG,
                           "rank %d resolved another config than rank 0 (%s hash %016llx, rank "
                           "0's %016llx): start every rank with the same config file and --set "
                           "options (config.resolved.yaml shows what a run resolved)",
                           (int)p, what, (unsigned long long)all[p], (unsigned long long)all[0]);
  free(all);
  return st;
}

/* 1 when r completed before `deadline` (now_s()). */
static int poll_until(MPI_Request *r, double deadline) {
  int flag = 0;
  while (MPI_Test(r, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag && now_s() < deadline) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  return flag;
}

int ganfw_dist_world_finish(int rc, const char *message) {
  if (!world.mpi) return rc;
  if (world.size <= 1) {
    MPI_Finalize();
    return rc;
  }
  /* Agree on the outcome on a communicator of its own: one rank may still be inside a
   * collective of the run's (waiting for this one), which this must not match. */
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Request r = MPI_REQUEST_NULL;
  int codes[2] = {rc, -rc}, ok = 0;
  const double deadline = now_s() + world.timeout;
  if (MPI_Comm_idup(MPI_COMM_WORLD, &c, &r) == MPI_SUCCESS && poll_until(&r, deadline) &&
      MPI_Iallreduce(MPI_IN_PLACE, codes, 2, MPI_INT, MPI_MAX, c, &r) == MPI_SUCCESS)
    ok = poll_until(&r, deadline);
  if (ok) {
    /* Everyone got here: a rank that failed alone says why (rank 0 already did). */
    if (rc != 0 && world.rank != 0 && message && *message && -codes[1] != codes[0])
      fprintf(stderr, "ganfw: rank %d: %s\n", (int)world.rank, message);
    MPI_Comm_free(&c);
    MPI_Finalize();
    return codes[0];
  }
  if (world.rank != 0 && message && *message)
    fprintf(stderr, "ganfw: rank %d: %s\n", (int)world.rank, message);
  fprintf(stderr,
          "ganfw: rank %d: the other ranks did not finish within %.0f s (dist.timeout); "
          "ending the job\n",
          (int)world.rank, world.timeout);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, rc ? rc : 1);
  return rc ? rc : 1;
}

#else /* one process: no communication */

struct ganfw_dist_impl {
  int unused;
};

ganfw_status ganfw_dist_create(const ganfw_dist_settings *set, int32_t simulated,
                               ganfw_dist **out) {
  (void)simulated;
  *out = NULL;
  ganfw_dist *d = calloc(1, sizeof *d);
  if (!d) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  d->set = *set;
  d->rank = 0;
  d->size = ganfw_dist_world_size();
  d->simulated = 1;
  *out = d;
  return GANFW_OK;
}

void ganfw_dist_destroy(ganfw_dist *d) {
  free(d);
}

void ganfw_dist_step_begin(ganfw_dist *d, int64_t step) {
  if (d) d->step = step;
}

void ganfw_dist_progress(ganfw_dist *d) {
  (void)d;
}

ganfw_status ganfw_dist_allreduce_sum_f64(ganfw_dist *d, double *buf, int64_t n, const char *what) {
  (void)d, (void)buf, (void)n, (void)what;
  return GANFW_OK;
}

ganfw_status ganfw_dist_allreduce_max_i64(ganfw_dist *d, int64_t *buf, int64_t n,
                                          const char *what) {
  (void)d, (void)buf, (void)n, (void)what;
  return GANFW_OK;
}

ganfw_status ganfw_dist_bcast(ganfw_dist *d, void *buf, int64_t bytes, int32_t root,
                              const char *what) {
  (void)d, (void)buf, (void)bytes, (void)root, (void)what;
  return GANFW_OK;
}

ganfw_status ganfw_dist_allgatherv_f32(ganfw_dist *d, float *buf, const int64_t *counts,
                                       const int64_t *displs, const char *what) {
  (void)d, (void)buf, (void)counts, (void)displs, (void)what;
  return GANFW_OK;
}

ganfw_status ganfw_dist_gatherv_f32(ganfw_dist *d, const float *send, float *recv,
                                    const int64_t *counts, const int64_t *displs, int32_t root,
                                    const char *what) {
  (void)d, (void)send, (void)recv, (void)counts, (void)displs, (void)root, (void)what;
  return GANFW_OK;
}

ganfw_status ganfw_dist_iallreduce_sum_f32(ganfw_dist *d, float *buf, int64_t n,
                                           ganfw_dist_req *req) {
  (void)d, (void)buf, (void)n;
  req->slot = -1;
  return GANFW_OK;
}

ganfw_status ganfw_dist_wait(ganfw_dist *d, ganfw_dist_req *req, const char *what) {
  (void)d, (void)what;
  req->slot = -1;
  return GANFW_OK;
}

ganfw_status ganfw_dist_check_same(ganfw_dist *d, const char *text, const char *what) {
  (void)d, (void)what;
  (void)fnv1a(text);
  return GANFW_OK;
}

int ganfw_dist_world_finish(int rc, const char *message) {
  (void)message;
  return rc;
}

#endif
