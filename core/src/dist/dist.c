/* The job and its collectives (see dist.h). Every wait polls its request with a deadline
 * and, between polls, the heartbeats (each rank tells the others which step it started) and
 * the side channel's questions: a rank whose wait runs out asks the others where they are,
 * and names those that never got there or do not answer. */
#include "dist/dist.h"

#include <signal.h>
#include <stdarg.h>
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

static void side_open(void);
#endif

/* The job as the command line joined it. */
static struct {
  int32_t rank, size, local_size;
  int32_t mpi;      /* MPI_Init ran */
  int32_t simulate; /* ganfw plan --ranks N */
  double timeout;   /* the last session's dist.timeout, for the end of the process */
  int32_t hung;     /* a wait ran out and named ranks that hang: the end aborts at once */
  int32_t speak;    /* a wait ran out and found ranks that ended with a failure: they say why */
} world = {.rank = 0, .size = 1, .local_size = 1, .timeout = 300.0};

#ifdef GANFW_HAVE_MPI
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif

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
  if (s > 1) side_open();
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

ganfw_status ganfw_dist_fault_point(const ganfw_dist *d, int64_t step, int32_t in_step) {
  const char *f = getenv("GANFW_DIST_FAULT");
  if (!f || !ganfw_dist_sends(d)) return GANFW_OK;
  char kind[8] = "";
  int rank = -1;
  long long at = -1;
  if (sscanf(f, "%7[a-z]:%d:%lld", kind, &rank, &at) != 3 || rank != d->rank || at != step)
    return GANFW_OK;
  const int stop = strcmp(kind, "stop") == 0, fail = strcmp(kind, "fail") == 0;
  if ((stop || fail) != (in_step != 0)) return GANFW_OK;
  if (strcmp(kind, "die") == 0) {
    fprintf(stderr, "ganfw: rank %d (pid %d): GANFW_DIST_FAULT: dying at step %lld\n", rank,
            (int)getpid(), at);
    raise(SIGKILL);
  } else if (strcmp(kind, "hang") == 0) {
    fprintf(stderr, "ganfw: rank %d (pid %d): GANFW_DIST_FAULT: hanging at step %lld\n", rank,
            (int)getpid(), at);
    for (;;) pause();
  } else if (stop) {
    fprintf(stderr,
            "ganfw: rank %d (pid %d): GANFW_DIST_FAULT: stopping (SIGSTOP) inside step %lld\n",
            rank, (int)getpid(), at);
    raise(SIGSTOP);
  } else if (fail) {
    /* half the timeout first: the other ranks wait in the step's first collective by then */
    const double half = d->set.timeout / 2;
    struct timespec ts = {(time_t)half, (long)((half - (double)(time_t)half) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
    return ganfw_error_set(GANFW_ERR_BACKEND, "rank %d: GANFW_DIST_FAULT: failing inside step %lld",
                           rank, at);
  }
  return GANFW_OK;
}

/* FNV-1a, 64 bits. */
static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

#ifdef GANFW_HAVE_MPI

/* "in step N", or "before the first step" for step 0. */
static const char *step_words(int64_t step, char *buf, size_t cap) {
  if (step > 0)
    snprintf(buf, cap, "in step %lld", (long long)step);
  else
    snprintf(buf, cap, "before the first step");
  return buf;
}

enum { MAX_REQS = 512, TAG_BEAT = 7, TAG_QUERY = 8, TAG_ANSWER = 100 };

/* How long a rank whose wait ran out waits for the others to say where they are. A rank
 * in a wait answers within milliseconds; one that does not answer in this time hangs. */
#define ANSWER_WAIT_S 1.0

/* Where a rank is, as it answers a rank whose wait ran out. */
enum { AT_RUNNING = 1, AT_WAITING = 2, AT_FINISHING = 3 };
typedef struct where_msg {
  int64_t state;   /* AT_* */
  int64_t session; /* the communicator (creation order, from 1); 0 none */
  int64_t step;    /* the training step it started; 0 none */
  int64_t seq;     /* AT_WAITING: the collective it waits in (its number on the communicator) */
  int64_t rc;      /* AT_FINISHING: the exit code it offers */
  char what[104];  /* AT_WAITING: what that collective is */
} where_msg;

typedef struct rank_id {
  int64_t pid;
  char host[56];
} rank_id;

/* The job's side channel (a duplicate of MPI_COMM_WORLD, with more than one rank): a rank
 * whose wait runs out asks the others where they are, and each answers from its waits, its
 * progress calls, its step starts and the end of its process. A rank that is stopped or
 * stuck (in a plugin, in a step far longer than dist.timeout) cannot answer, and that
 * names it without its cooperation. */
static struct {
  int32_t on;
  MPI_Comm comm;
  MPI_Request query; /* the posted receive of the next question */
  int64_t query_in;  /* the asker's round */
  where_msg here;    /* this rank's answer */
  where_msg *reply;  /* [size]: answers on their way, per asker */
  MPI_Request *reply_req;
  where_msg *answer;    /* [size]: the others' answers to this rank's question */
  int32_t *got;         /* [size]: 1 when answer[p] came */
  MPI_Request *ask_req; /* [2 * size]: the question to p, its answer from p */
  int64_t round;        /* this rank's questions */
  rank_id *id;          /* [size]: each rank's process id and host */
  int64_t sessions;     /* communicators created */
} side;

struct ganfw_dist_impl {
  MPI_Comm comm; /* the collectives */
  MPI_Comm beat; /* heartbeats */
  MPI_Request reqs[MAX_REQS];
  int32_t used[MAX_REQS];
  int64_t req_seq[MAX_REQS]; /* the collective number of each request in flight */
  int64_t seq;               /* collectives posted on comm */
  int64_t session;           /* side.sessions when created */
  int32_t failed;            /* a wait ran out: nothing more is posted or waited for */
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

static void side_free(void) {
  free(side.reply);
  free(side.reply_req);
  free(side.answer);
  free(side.got);
  free(side.ask_req);
  free(side.id);
  side.reply = side.answer = NULL;
  side.reply_req = side.ask_req = NULL;
  side.got = NULL;
  side.id = NULL;
}

/* The side channel of a job of world.size ranks (collective, at the start). Without it
 * (out of memory) a rank whose wait runs out names every other rank as not answering. */
static void side_open(void) {
  const size_t n = (size_t)world.size;
  side.reply = calloc(n, sizeof *side.reply);
  side.reply_req = calloc(n, sizeof *side.reply_req);
  side.answer = calloc(n, sizeof *side.answer);
  side.got = calloc(n, sizeof *side.got);
  side.ask_req = calloc(2 * n, sizeof *side.ask_req);
  side.id = calloc(n, sizeof *side.id);
  rank_id mine = {.pid = (int64_t)getpid()};
  if (gethostname(mine.host, sizeof mine.host - 1) != 0) snprintf(mine.host, sizeof mine.host, "?");
  /* every rank takes part in both calls, whatever its allocations gave */
  int ok = side.reply && side.reply_req && side.answer && side.got && side.ask_req && side.id;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!ok || MPI_Comm_dup(MPI_COMM_WORLD, &side.comm) != MPI_SUCCESS) {
    side_free();
    return;
  }
  MPI_Comm_set_errhandler(side.comm, MPI_ERRORS_RETURN);
  if (MPI_Allgather(&mine, sizeof mine, MPI_BYTE, side.id, sizeof mine, MPI_BYTE, side.comm) !=
      MPI_SUCCESS)
    memset(side.id, 0, n * sizeof *side.id);
  for (size_t p = 0; p < n; p++) side.reply_req[p] = MPI_REQUEST_NULL;
  for (size_t p = 0; p < 2 * n; p++) side.ask_req[p] = MPI_REQUEST_NULL;
  side.here.state = AT_RUNNING;
  side.on = MPI_Irecv(&side.query_in, 1, MPI_INT64_T, MPI_ANY_SOURCE, TAG_QUERY, side.comm,
                      &side.query) == MPI_SUCCESS;
}

static void side_close(void) {
  if (side.on) {
    MPI_Cancel(&side.query);
    MPI_Request_free(&side.query);
    for (int32_t p = 0; p < world.size; p++)
      if (side.reply_req[p] != MPI_REQUEST_NULL) MPI_Request_free(&side.reply_req[p]);
    MPI_Comm_free(&side.comm);
    side.on = 0;
  }
  side_free();
}

/* Answers every question that arrived with side.here. */
static void answer_questions(void) {
  while (side.on && side.query != MPI_REQUEST_NULL) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Test(&side.query, &flag, &status) != MPI_SUCCESS || !flag) return;
    const int q = status.MPI_SOURCE;
    const int tag = TAG_ANSWER + (int)(side.query_in & 0x3fff);
    int free_slot = 1;
    if (q >= 0 && q < world.size) {
      if (side.reply_req[q] != MPI_REQUEST_NULL)
        MPI_Test(&side.reply_req[q], &free_slot, MPI_STATUS_IGNORE);
      if (free_slot) {
        side.reply[q] = side.here;
        if (MPI_Isend(&side.reply[q], sizeof side.reply[q], MPI_BYTE, q, tag, side.comm,
                      &side.reply_req[q]) != MPI_SUCCESS)
          side.reply_req[q] = MPI_REQUEST_NULL;
      }
    }
    if (MPI_Irecv(&side.query_in, 1, MPI_INT64_T, MPI_ANY_SOURCE, TAG_QUERY, side.comm,
                  &side.query) != MPI_SUCCESS)
      side.query = MPI_REQUEST_NULL;
  }
}

/* This rank's answer from now on. */
static void set_here(int64_t state, const ganfw_dist *d, int64_t seq, const char *what) {
  side.here.state = state;
  side.here.session = d && d->impl ? d->impl->session : 0;
  side.here.step = d ? d->step : 0;
  side.here.seq = seq;
  snprintf(side.here.what, sizeof side.here.what, "%s", what ? what : "");
}

/* Asks every other rank where it is and takes the answers that come within ANSWER_WAIT_S,
 * answering the others' questions meanwhile: side.got[p] 1 for each that answered. */
static void ask_others(void) {
  const int32_t n = world.size, me = world.rank;
  for (int32_t p = 0; side.got && p < n; p++) side.got[p] = 0;
  if (!side.on) return;
  const int64_t round = ++side.round;
  const int tag = TAG_ANSWER + (int)(round & 0x3fff);
  static int64_t question;
  question = round;
  MPI_Request *ask = side.ask_req, *ans = side.ask_req + n;
  int32_t waiting = 0;
  for (int32_t p = 0; p < n; p++) {
    if (p == me) continue;
    if (MPI_Irecv(&side.answer[p], sizeof side.answer[p], MPI_BYTE, p, tag, side.comm, &ans[p]) !=
        MPI_SUCCESS)
      continue;
    if (MPI_Isend(&question, 1, MPI_INT64_T, p, TAG_QUERY, side.comm, &ask[p]) != MPI_SUCCESS)
      ask[p] = MPI_REQUEST_NULL;
    waiting++;
  }
  const double deadline = now_s() + ANSWER_WAIT_S;
  while (waiting > 0 && now_s() < deadline) {
    answer_questions();
    for (int32_t p = 0; p < n; p++) {
      int flag = 0;
      if (p == me || side.got[p] || ans[p] == MPI_REQUEST_NULL) continue;
      if (MPI_Test(&ans[p], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag) {
        side.got[p] = 1;
        waiting--;
      }
    }
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  for (int32_t p = 0; p < n; p++) {
    if (ans[p] != MPI_REQUEST_NULL) {
      MPI_Cancel(&ans[p]);
      MPI_Request_free(&ans[p]);
    }
    if (ask[p] != MPI_REQUEST_NULL) MPI_Request_free(&ask[p]);
  }
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

/* Appends printf-style text to buf[cap] at *len (truncating at the end). */
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  if (*len >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (w > 0) *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
}

/* "1 (pid 4242 on node7)" for rank p; "1" when its id is unknown. */
static const char *rank_words(int32_t p, char *buf, size_t cap) {
  if (side.id && side.id[p].pid > 0)
    snprintf(buf, cap, "%d (pid %lld on %s)", (int)p, (long long)side.id[p].pid, side.id[p].host);
  else
    snprintf(buf, cap, "%d", (int)p);
  return buf;
}

/* The ranks of `list` ([n], ascending), as "rank 1 (pid ...)" or "ranks 1 (...) and 3 (...)". */
static void put_ranks(char *buf, size_t cap, size_t *len, const int32_t *list, int32_t n) {
  put(buf, cap, len, "rank%s ", n > 1 ? "s" : "");
  for (int32_t i = 0; i < n; i++) {
    char who[128];
    put(buf, cap, len, "%s%s",
        i == 0      ? ""
        : i + 1 < n ? ", "
                    : " and ",
        rank_words(list[i], who, sizeof who));
  }
}

/* The message of a wait that ran out, after asking the other ranks where they are. Ranks
 * that do not answer hang: they are named, and world.hung makes the end of the process
 * abort the job at once. Ranks that already ended (with a failure of their own) answer so;
 * then the job ends through the agreement of ganfw_dist_world_finish, where they say why. */
static ganfw_status timed_out(ganfw_dist *d, const char *what, int64_t seq, double waited) {
  struct ganfw_dist_impl *m = d->impl;
  const int32_t n = d->size;
  ask_others();
  drain_beats(d);
  int32_t *before = calloc((size_t)n, sizeof *before), *inside = calloc((size_t)n, sizeof *inside);
  if (!before || !inside) {
    free(before);
    free(inside);
    world.hung = 1;
    return ganfw_error_set(GANFW_ERR_BACKEND,
                           "rank %d: %s waited %.0f s (dist.timeout) for the other ranks; ending "
                           "the job",
                           (int)d->rank, what, waited);
  }
  int32_t nb = 0, ni = 0, ended = 0, same = 0, other = 0;
  char msg[3072], at[48], who[128];
  size_t len = 0;
  const char *here = step_words(d->step, at, sizeof at);
  put(msg, sizeof msg, &len, "rank %d: ", (int)d->rank);
  const size_t head = len;
  for (int32_t p = 0; p < n; p++) {
    if (p == d->rank) continue;
    if (!side.got || !side.got[p]) {
      if (m->seen[p] < d->step)
        before[nb++] = p;
      else
        inside[ni++] = p;
    }
  }
  if (ni > 0) {
    put_ranks(msg, sizeof msg, &len, inside, ni);
    put(msg, sizeof msg, &len,
        " did not reach %s %s within %.0f s (dist.timeout) and %s not answer: %s inside the "
        "step (stopped, or stuck in a plugin)",
        what, here, waited, ni > 1 ? "do" : "does", ni > 1 ? "they hang" : "it hangs");
  }
  if (nb > 0) {
    put(msg, sizeof msg, &len, "%s", ni ? "; " : "");
    put_ranks(msg, sizeof msg, &len, before, nb);
    put(msg, sizeof msg, &len, " did not reach step %lld (last at step %lld", (long long)d->step,
        (long long)m->seen[before[0]]);
    put(msg, sizeof msg, &len,
        ") within %.0f s (dist.timeout) and %s not answer: %s before the step (stopped, or "
        "stuck in a plugin or the data loader)",
        waited, nb > 1 ? "do" : "does", nb > 1 ? "they hang" : "it hangs");
  }
  for (int32_t p = 0; side.got && p < n; p++) {
    if (p == d->rank || !side.got[p]) continue;
    const where_msg *a = &side.answer[p];
    char there[48];
    const char *sep = len > head ? "; " : "";
    if (a->state == AT_FINISHING) {
      ended++;
      world.speak |= a->rc != 0;
      if (a->rc != 0)
        put(msg, sizeof msg, &len,
            "%srank %s already ended with exit code %lld (its message "
            "follows) while this rank waited in %s %s",
            sep, rank_words(p, who, sizeof who), (long long)a->rc, what, here);
      else
        put(msg, sizeof msg, &len,
            "%srank %s already finished its run while this rank waited in "
            "%s %s: the ranks ran different collectives (a bug; please report it)",
            sep, rank_words(p, who, sizeof who), what, here);
    } else if (a->state == AT_WAITING && a->session == m->session && a->seq == seq) {
      same++;
    } else if (a->state == AT_WAITING) {
      other++;
      put(msg, sizeof msg, &len,
          "%srank %s waits in %.100s %s while this rank waits in %s %s: "
          "the ranks run different collectives (a bug; please report it)",
          sep, rank_words(p, who, sizeof who), a->what, step_words(a->step, there, sizeof there),
          what, here);
    } else {
      other++;
      put(msg, sizeof msg, &len,
          "%srank %s is alive %s but did not reach %s %s within %.0f s "
          "(dist.timeout): its step takes longer than that (raise dist.timeout), or it runs "
          "other collectives than this rank",
          sep, rank_words(p, who, sizeof who), step_words(a->step, there, sizeof there), what, here,
          waited);
    }
  }
  if (ni + nb + ended + other == 0)
    put(msg, sizeof msg, &len,
        "every rank waits in %s %s, yet it did not complete within %.0f s "
        "(dist.timeout): the network between the ranks failed, or MPI hangs",
        what, here, waited);
  /* The job ends through the agreement at the end of the process only when every rank that
   * is not waiting here already ended; otherwise it is aborted at once. */
  world.hung = ni + nb + other > 0 || ended == 0;
  if (world.hung) put(msg, sizeof msg, &len, "; ending the job");
  if (ni + nb > 0) {
    const int32_t first = ni ? inside[0] : before[0];
    if (side.id && side.id[first].pid > 0)
      put(msg, sizeof msg, &len, ". Look at that process (gdb -p %lld on %s)",
          (long long)side.id[first].pid, side.id[first].host);
    put(msg, sizeof msg, &len, "%s raise dist.timeout if a step can take that long",
        side.id && side.id[first].pid > 0 ? ", or" : ". Or");
  }
  free(before);
  free(inside);
  return ganfw_error_set(GANFW_ERR_BACKEND, "%s", msg);
}

/* A collective after a wait ran out on this communicator: refused at once. */
static ganfw_status refused(const ganfw_dist *d, const char *what) {
  char at[48];
  return ganfw_error_set(GANFW_ERR_BACKEND,
                         "rank %d: %s %s was not started: an earlier wait of this job ran out "
                         "(dist.timeout; its message names the ranks)",
                         (int)d->rank, what, step_words(d->step, at, sizeof at));
}

/* Polls r (collective number seq) until it completes or dist.timeout runs out, answering
 * the other ranks' questions meanwhile. */
static ganfw_status wait_request(ganfw_dist *d, MPI_Request *r, const char *what, int64_t seq) {
  struct ganfw_dist_impl *m = d->impl;
  if (m->failed) return refused(d, what);
  const double t0 = now_s();
  set_here(AT_WAITING, d, seq, what);
  for (int64_t polls = 0;; polls++) {
    int flag = 0;
    int rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      set_here(AT_RUNNING, d, 0, NULL);
      return mpi_error(rc, "MPI_Test", what);
    }
    if (flag) break;
    if ((polls & 63) == 0) {
      drain_beats(d);
      answer_questions();
      const double waited = now_s() - t0;
      if (waited > d->set.timeout) {
        m->failed = 1;
        ganfw_status st = timed_out(d, what, seq, waited);
        set_here(AT_RUNNING, d, 0, NULL);
        return st;
      }
    }
    if (polls < 2000) {
      sched_yield();
    } else {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
  }
  set_here(AT_RUNNING, d, 0, NULL);
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
  m->session = ++side.sessions;
  m->comm = m->beat = MPI_COMM_NULL;
  for (int32_t p = 0; p < d->size; p++) m->recv[p] = m->send[p] = MPI_REQUEST_NULL;
  MPI_Request r[2];
  int rc = MPI_Comm_idup(MPI_COMM_WORLD, &m->comm, &r[0]);
  ganfw_status st = rc == MPI_SUCCESS ? GANFW_OK : mpi_error(rc, "MPI_Comm_idup", "the job");
  if (st == GANFW_OK) st = wait_request(d, &r[0], "joining the job", 0);
  if (st == GANFW_OK && (rc = MPI_Comm_idup(MPI_COMM_WORLD, &m->beat, &r[1])) != MPI_SUCCESS)
    st = mpi_error(rc, "MPI_Comm_idup", "the job's heartbeats");
  if (st == GANFW_OK) st = wait_request(d, &r[1], "joining the job", 0);
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
    /* After a wait ran out the collectives still in flight are left to the end of the
     * process: they may never complete, and MPI forbids freeing them. */
    for (int32_t i = 0; i < MAX_REQS && !m->failed; i++)
      if (m->used[i] == 1) MPI_Request_free(&m->reqs[i]);
    if (m->comm != MPI_COMM_NULL && !m->failed) MPI_Comm_free(&m->comm);
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
  set_here(AT_RUNNING, d, 0, NULL);
  drain_beats(d);
  answer_questions();
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
  answer_questions();
  for (int32_t i = 0; i < MAX_REQS; i++) {
    if (!m->used[i]) continue;
    int flag = 0;
    MPI_Test(&m->reqs[i], &flag, MPI_STATUS_IGNORE);
    if (flag) m->used[i] = 2; /* done; ganfw_dist_wait finds it so */
    break;                    /* one test moves the progress engine for all */
  }
}

/* The next collective's number on d, or 0 when d may post none (a wait ran out). */
static int64_t next_seq(ganfw_dist *d) {
  return d->impl->failed ? 0 : ++d->impl->seq;
}

static ganfw_status collective(ganfw_dist *d, int rc, MPI_Request *r, int64_t seq, const char *call,
                               const char *what) {
  if (rc != MPI_SUCCESS) return mpi_error(rc, call, what);
  return wait_request(d, r, what, seq);
}

ganfw_status ganfw_dist_allreduce_sum_f64(ganfw_dist *d, double *buf, int64_t n, const char *what) {
  if (!ganfw_dist_sends(d) || n <= 0) return GANFW_OK;
  const int64_t seq = next_seq(d);
  if (!seq) return refused(d, what);
  MPI_Request r;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, d->impl->comm, &r);
  return collective(d, rc, &r, seq, "MPI_Iallreduce", what);
}

ganfw_status ganfw_dist_allreduce_max_i64(ganfw_dist *d, int64_t *buf, int64_t n,
                                          const char *what) {
  if (!ganfw_dist_sends(d) || n <= 0) return GANFW_OK;
  const int64_t seq = next_seq(d);
  if (!seq) return refused(d, what);
  MPI_Request r;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_INT64_T, MPI_MAX, d->impl->comm, &r);
  return collective(d, rc, &r, seq, "MPI_Iallreduce", what);
}

ganfw_status ganfw_dist_bcast(ganfw_dist *d, void *buf, int64_t bytes, int32_t root,
                              const char *what) {
  if (!ganfw_dist_sends(d) || bytes <= 0) return GANFW_OK;
  const int64_t seq = next_seq(d);
  if (!seq) return refused(d, what);
  MPI_Request r;
  int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, d->impl->comm, &r);
  return collective(d, rc, &r, seq, "MPI_Ibcast", what);
}

ganfw_status ganfw_dist_allgather(ganfw_dist *d, const void *mine, int64_t bytes, void *all,
                                  const char *what) {
  if (!ganfw_dist_sends(d)) {
    if (bytes > 0 && all != mine) memcpy(all, mine, (size_t)bytes);
    return GANFW_OK;
  }
  if (bytes <= 0) return GANFW_OK;
  const int64_t seq = next_seq(d);
  if (!seq) return refused(d, what);
  MPI_Request r;
  int rc = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, d->impl->comm, &r);
  return collective(d, rc, &r, seq, "MPI_Iallgather", what);
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
  const int64_t seq = next_seq(d);
  if (!seq) return refused(d, what);
  int_layout(d, counts, displs);
  MPI_Request r;
  int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, d->impl->ci, d->impl->di,
                           MPI_FLOAT, d->impl->comm, &r);
  return collective(d, rc, &r, seq, "MPI_Iallgatherv", what);
}

ganfw_status ganfw_dist_gatherv_f32(ganfw_dist *d, const float *send, float *recv,
                                    const int64_t *counts, const int64_t *displs, int32_t root,
                                    const char *what) {
  if (!ganfw_dist_sends(d)) return GANFW_OK;
  const int64_t seq = next_seq(d);
  if (!seq) return refused(d, what);
  int_layout(d, counts, displs);
  MPI_Request r;
  int rc = MPI_Igatherv(send, d->impl->ci[d->rank], MPI_FLOAT, recv, d->impl->ci, d->impl->di,
                        MPI_FLOAT, root, d->impl->comm, &r);
  return collective(d, rc, &r, seq, "MPI_Igatherv", what);
}

ganfw_status ganfw_dist_iallreduce_sum_f32(ganfw_dist *d, float *buf, int64_t n,
                                           ganfw_dist_req *req) {
  req->slot = -1;
  if (!ganfw_dist_sends(d) || n <= 0) return GANFW_OK;
  struct ganfw_dist_impl *m = d->impl;
  const int64_t seq = next_seq(d);
  if (!seq) return refused(d, "the all-reduce of the gradients");
  int32_t k = 0;
  while (k < MAX_REQS && m->used[k]) k++;
  if (k == MAX_REQS)
    return ganfw_error_set(GANFW_ERR_INTERNAL, "more than %d all-reduces in flight", MAX_REQS);
  const double t0 = now_s();
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, m->comm, &m->reqs[k]);
  d->comm_seconds += now_s() - t0;
  if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iallreduce", "gradients");
  m->used[k] = 1;
  m->req_seq[k] = seq;
  req->slot = k;
  return GANFW_OK;
}

ganfw_status ganfw_dist_wait(ganfw_dist *d, ganfw_dist_req *req, const char *what) {
  if (req->slot < 0) return GANFW_OK;
  struct ganfw_dist_impl *m = d->impl;
  const int32_t k = req->slot;
  req->slot = -1;
  if (m->failed) return refused(d, what); /* the request stays in flight (ganfw_dist_destroy) */
  ganfw_status st = m->used[k] == 2 ? GANFW_OK : wait_request(d, &m->reqs[k], what, m->req_seq[k]);
  if (st == GANFW_OK || !m->failed) m->used[k] = 0;
  return st;
}

ganfw_status ganfw_dist_check_same(ganfw_dist *d, const char *text, const char *what) {
  if (!ganfw_dist_sends(d)) return GANFW_OK;
  uint64_t mine = fnv1a(text);
  uint64_t *all = malloc(sizeof *all * (size_t)d->size);
  if (!all) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = ganfw_dist_allgather(d, &mine, sizeof mine, all, what);
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

/* 1 when r completed before `deadline` (now_s()); answers the others' questions meanwhile. */
static int poll_until(MPI_Request *r, double deadline) {
  int flag = 0;
  while (MPI_Test(r, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag && now_s() < deadline) {
    answer_questions();
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
  if (world.hung) {
    /* A wait ran out and named the ranks that hang: waiting for them again would only
     * double the time the job takes to end. */
    if (world.rank != 0 && message && *message)
      fprintf(stderr, "ganfw: rank %d: %s\n", (int)world.rank, message);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, rc ? rc : 1);
    return rc ? rc : 1;
  }
  side.here.state = AT_FINISHING;
  side.here.rc = rc;
  /* Agree on the outcome on a communicator of its own: one rank may still be inside a
   * collective of the run's (waiting for this one), which this must not match. */
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Request r = MPI_REQUEST_NULL;
  int codes[3] = {rc, -rc, world.speak}, ok = 0;
  const double deadline = now_s() + world.timeout;
  if (MPI_Comm_idup(MPI_COMM_WORLD, &c, &r) == MPI_SUCCESS && poll_until(&r, deadline) &&
      MPI_Iallreduce(MPI_IN_PLACE, codes, 3, MPI_INT, MPI_MAX, c, &r) == MPI_SUCCESS)
    ok = poll_until(&r, deadline);
  if (ok) {
    /* Everyone got here: a rank that failed alone says why (rank 0 already did), and so
     * does every failed rank when a rank's wait found them ended ("its message follows"). */
    if (rc != 0 && world.rank != 0 && message && *message && (-codes[1] != codes[0] || codes[2]))
      fprintf(stderr, "ganfw: rank %d: %s\n", (int)world.rank, message);
    MPI_Comm_free(&c);
    side_close();
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

ganfw_status ganfw_dist_allgather(ganfw_dist *d, const void *mine, int64_t bytes, void *all,
                                  const char *what) {
  (void)d, (void)what;
  if (bytes > 0 && all != mine) memcpy(all, mine, (size_t)bytes);
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
