/* The batch loader: walks a dataset epoch after epoch in a per-epoch permutation drawn from
 * (seed, epoch), filling batches [B,C,H,W] + labels [B]. With prefetch, `workers` pthreads
 * fill the next batches into slots of their own, up to one batch ahead per worker, while the
 * caller trains on the current one; batch k always goes to slot k % workers and leaves it in
 * order, so the batches are those of the synchronous loader, bit for bit. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_source.h"
#include "base/error.h"

typedef enum {
  SLOT_FREE = 0, /* nothing asked of it */
  SLOT_QUEUED,   /* a batch to make, not taken by a worker yet */
  SLOT_BUSY,     /* a worker is making it (outside the lock) */
  SLOT_READY,    /* made, or failed: status and msg say which */
  SLOT_STATE_COUNT
} slot_state;

/* One batch in the making: a host buffer of the loader's, never shared by two batches at once. */
typedef struct slot {
  slot_state state;
  float *images;   /* [batch_size, C, H, W] */
  int32_t *labels; /* [batch_size] */
  int64_t *index;  /* [batch_size]: the samples, copied from the permutation when taken */
  ganfw_batch_info info;
  ganfw_status status;
  char msg[4096];
  atomic_int cancel; /* 1: drop this batch (a seek, a failure before it), between samples */
} slot;

struct ganfw_loader {
  const ganfw_dataset *ds;
  ganfw_loader_config cfg;
  int64_t n;             /* dataset size */
  size_t sample_elems;   /* C*H*W */
  int64_t epoch, offset; /* where the caller's next batch starts; changed by the caller only */

  /* The permutation of one epoch; made by whoever takes a batch of another epoch (the caller
   * without prefetch, a worker under mu with it). */
  int64_t *perm;
  int64_t perm_epoch;  /* -1: none yet */
  int64_t *sync_index; /* [batch_size]: the synchronous loader's samples */

  /* Prefetch: slots[seq % nslots] holds batch seq; head is the caller's next one, tail the
   * next one to queue, at (tail_epoch, tail_offset). Everything here is under mu. */
  int32_t nworkers, nslots;
  pthread_t threads[GANFW_LOADER_MAX_WORKERS];
  slot *slots;
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* a slot was queued, or stop */
  pthread_cond_t done_cv; /* a slot became ready */
  int stop;
  int64_t head, tail;
  int64_t tail_epoch, tail_offset;
  atomic_int abandon; /* destroy: every worker stops between samples */
};

/* The permutation of `epoch`: Fisher-Yates driven by splitmix64 from (seed, epoch). j is
 * drawn by a modulo, whose bias (< n / 2^64) does not matter here. */
static void make_perm(ganfw_loader *l, int64_t epoch) {
  for (int64_t i = 0; i < l->n; i++) l->perm[i] = i;
  uint64_t state = ganfw_data_mix64(ganfw_data_mix64(l->cfg.seed) ^ (uint64_t)epoch);
  for (int64_t i = l->n - 1; i > 0; i--) {
    state += 0x9E3779B97F4A7C15ull;
    const uint64_t j = ganfw_data_mix64(state) % (uint64_t)(i + 1);
    const int64_t t = l->perm[i];
    l->perm[i] = l->perm[j];
    l->perm[j] = t;
  }
  l->perm_epoch = epoch;
}

/* The position after a batch of `taken` samples starting at (epoch, offset). */
static void advance(const ganfw_loader *l, int64_t *epoch, int64_t *offset, int64_t taken) {
  *offset += taken;
  if (*offset >= l->n || (l->cfg.drop_last && *offset + l->cfg.batch_size > l->n)) {
    (*epoch)++;
    *offset = 0;
  }
}

/* What the batch at (epoch, offset) is, before any sample is read. */
static ganfw_batch_info batch_at(const ganfw_loader *l, int64_t epoch, int64_t offset) {
  const int64_t rest = l->n - offset;
  ganfw_batch_info info = {.n = rest < l->cfg.batch_size ? (int32_t)rest : l->cfg.batch_size,
                           .epoch = epoch,
                           .offset = offset};
  int64_t e = epoch, o = offset;
  advance(l, &e, &o, info.n);
  info.last_in_epoch = e != epoch;
  return info;
}

/* The samples of a batch into index[0..info->n). The caller owns perm (see above). */
static void batch_index(ganfw_loader *l, const ganfw_batch_info *info, int64_t *index) {
  if (l->cfg.shuffle && l->perm_epoch != info->epoch) make_perm(l, info->epoch);
  for (int32_t i = 0; i < info->n; i++)
    index[i] = l->cfg.shuffle ? l->perm[info->offset + i] : info->offset + i;
}

/* Decodes and transforms the samples index[0..info->n) into images/labels; stops between two
 * samples when the loader is destroyed or `cancel` is raised. */
/* Group g of a batch of n: the batch rows [*lo, *hi) this loader's shard decodes, into its
 * caller's rows from *to (see ganfw_loader_config). */
static void shard_rows(const ganfw_loader *l, int32_t n, int32_t g, int32_t *lo, int32_t *hi,
                       int32_t *to) {
  if (l->cfg.shard_count <= 1) {
    *lo = 0;
    *hi = n;
    *to = 0;
    return;
  }
  const int32_t groups = l->cfg.shard_groups > 1 ? l->cfg.shard_groups : 1;
  const int32_t m = l->cfg.batch_size / groups, per = m / l->cfg.shard_count;
  *lo = g * m + per * l->cfg.shard_rank;
  *hi = *lo + per;
  *to = g * per;
  if (*hi > n) *hi = n;
  if (*lo > *hi) *lo = *hi;
}

static ganfw_status fill(ganfw_loader *l, ganfw_batch_info *info, const int64_t *index,
                         float *images, int32_t *labels, atomic_int *cancel) {
  const int32_t groups =
      l->cfg.shard_count > 1 && l->cfg.shard_groups > 1 ? l->cfg.shard_groups : 1;
  info->rows = 0;
  for (int32_t g = 0; g < groups; g++) {
    int32_t lo, hi, to;
    shard_rows(l, info->n, g, &lo, &hi, &to);
    if (g == 0) info->first = lo;
    for (int32_t i = lo; i < hi; i++) { /* row i of the batch lands in the caller's to + i - lo */
      if (atomic_load_explicit(&l->abandon, memory_order_relaxed) ||
          (cancel && atomic_load_explicit(cancel, memory_order_relaxed)))
        return ganfw_error_set(GANFW_ERR_INTERRUPTED, "loader stopped");
      int32_t label = 0;
      const int32_t row = to + i - lo;
      ganfw_status st = ganfw_dataset_get(l->ds, index[i],
                                          ganfw_data_sample_key(l->cfg.seed, info->epoch, index[i]),
                                          images + (size_t)row * l->sample_elems, &label);
      if (st != GANFW_OK) return st;
      if (labels) labels[row] = label;
      if (row + 1 > info->rows) info->rows = row + 1;
    }
  }
  return GANFW_OK;
}

/* The queued slot of the lowest batch number, or NULL. Under mu. Taking batches in order
 * keeps the epochs of consecutive takes non-decreasing, so one cached permutation serves. */
static slot *next_queued_locked(ganfw_loader *l) {
  for (int64_t seq = l->head; seq < l->tail; seq++) {
    slot *s = &l->slots[seq % l->nslots];
    if (s->state == SLOT_QUEUED) return s;
  }
  return NULL;
}

static void *worker_main(void *arg) {
  ganfw_loader *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    slot *s = NULL;
    while (!l->stop && !(s = next_queued_locked(l))) pthread_cond_wait(&l->work_cv, &l->mu);
    if (l->stop) break;
    s->state = SLOT_BUSY;
    batch_index(l, &s->info, s->index);
    pthread_mutex_unlock(&l->mu);
    const ganfw_status st = fill(l, &s->info, s->index, s->images, s->labels, &s->cancel);
    pthread_mutex_lock(&l->mu);
    if (st != GANFW_OK) snprintf(s->msg, sizeof s->msg, "%s", ganfw_error_message());
    s->status = st;
    s->state = SLOT_READY;
    pthread_cond_broadcast(&l->done_cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

/* Queues batches from the tail until every slot has one. Under mu. */
static void queue_locked(ganfw_loader *l) {
  int queued = 0;
  while (l->tail < l->head + l->nslots) {
    slot *s = &l->slots[l->tail % l->nslots];
    s->info = batch_at(l, l->tail_epoch, l->tail_offset);
    s->status = GANFW_OK;
    atomic_store(&s->cancel, 0);
    s->state = SLOT_QUEUED;
    advance(l, &l->tail_epoch, &l->tail_offset, s->info.n);
    l->tail++;
    queued = 1;
  }
  if (queued) pthread_cond_broadcast(&l->work_cv);
}

/* Drops every batch in flight: queued ones at once, those being made when their worker stops
 * (at the next sample); the next queue_locked starts again at the caller's position. Under
 * mu. */
static void drain_locked(ganfw_loader *l) {
  for (;;) {
    int busy = 0;
    for (int32_t i = 0; i < l->nslots; i++) {
      slot *s = &l->slots[i];
      if (s->state == SLOT_BUSY) {
        atomic_store(&s->cancel, 1);
        busy = 1;
      } else {
        s->state = SLOT_FREE;
      }
    }
    if (!busy) break;
    pthread_cond_wait(&l->done_cv, &l->mu);
  }
  l->head = l->tail = 0;
  l->tail_epoch = l->epoch;
  l->tail_offset = l->offset;
}

/* Stops and joins the first `started` workers. */
static void stop_workers(ganfw_loader *l, int32_t started) {
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  atomic_store(&l->abandon, 1);
  pthread_cond_broadcast(&l->work_cv);
  pthread_mutex_unlock(&l->mu);
  for (int32_t i = 0; i < started; i++) pthread_join(l->threads[i], NULL);
}

/* Starts the workers with the signals that tell a process to stop (or something else from
 * outside) blocked, so that SIGINT and SIGTERM reach the training thread, whose handler asks
 * for a clean stop, and never interrupt a worker's read (the handler does not restart system
 * calls). Faults (SIGSEGV, SIGBUS, ...) stay unblocked: they belong to the thread that makes
 * them. */
static ganfw_status start_workers(ganfw_loader *l) {
  static const int outside[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                                SIGALRM, SIGUSR1, SIGUSR2, SIGCHLD};
  sigset_t block, old;
  sigemptyset(&block);
  for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) sigaddset(&block, outside[i]);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  int rc = 0;
  int32_t started = 0;
  while (started < l->nworkers &&
         (rc = pthread_create(&l->threads[started], NULL, worker_main, l)) == 0)
    started++;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (started == l->nworkers) return GANFW_OK;
  stop_workers(l, started);
  return ganfw_error_set(GANFW_ERR_OOM,
                         "loader: cannot start data loader worker %d of %d: %s; lower "
                         "data.workers or turn data.prefetch off",
                         (int)started + 1, (int)l->nworkers, strerror(rc));
}

static void free_loader(ganfw_loader *l) {
  for (int32_t i = 0; l->slots && i < l->nslots; i++) {
    free(l->slots[i].images);
    free(l->slots[i].labels);
    free(l->slots[i].index);
  }
  free(l->slots);
  free(l->perm);
  free(l->sync_index);
  free(l);
}

ganfw_status ganfw_loader_create(const ganfw_dataset *ds, const ganfw_loader_config *cfg,
                                 ganfw_loader **out) {
  *out = NULL;
  if (!ds || !cfg || cfg->batch_size <= 0)
    return ganfw_error_set(GANFW_ERR_CONFIG, "loader: batch_size must be positive (got %d)",
                           cfg ? cfg->batch_size : 0);
  const int32_t groups = cfg->shard_groups > 1 ? cfg->shard_groups : 1;
  if (cfg->shard_count > 1 && (cfg->shard_rank < 0 || cfg->shard_rank >= cfg->shard_count ||
                               cfg->batch_size % (cfg->shard_count * groups) != 0))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "loader: shard %d of %d does not split batches of %d (%d micro-batches) "
                           "evenly",
                           cfg->shard_rank, cfg->shard_count, cfg->batch_size, groups);
  if (cfg->workers < 0 || cfg->workers > GANFW_LOADER_MAX_WORKERS ||
      (!cfg->prefetch && cfg->workers > 1))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "loader: %d workers asked for; data.workers must be 1..%d, and more "
                           "than 1 needs data.prefetch",
                           cfg->workers, GANFW_LOADER_MAX_WORKERS);
  const int64_t n = ganfw_dataset_size(ds);
  if (n <= 0) return ganfw_error_set(GANFW_ERR_IO, "loader: %s is empty", ganfw_dataset_name(ds));
  if (cfg->drop_last && cfg->batch_size > n)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "loader: batch_size %d is larger than the %lld samples of %s and "
                           "drop_last is set, so no batch would ever be produced; lower "
                           "batch_size or unset drop_last",
                           cfg->batch_size, (long long)n, ganfw_dataset_name(ds));
  ganfw_loader *l = calloc(1, sizeof *l);
  if (!l) return ganfw_error_set(GANFW_ERR_OOM, "loader: no host memory");
  l->ds = ds;
  l->cfg = *cfg;
  l->n = n;
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  l->sample_elems = (size_t)c * h * w;
  l->perm_epoch = -1;
  atomic_init(&l->abandon, 0);
  if (cfg->shuffle && !(l->perm = malloc(sizeof(int64_t) * (size_t)n))) {
    free_loader(l);
    return ganfw_error_set(GANFW_ERR_OOM, "loader: no host memory for a %lld-entry permutation",
                           (long long)n);
  }
  if (!cfg->prefetch) {
    if (!(l->sync_index = malloc(sizeof(int64_t) * (size_t)cfg->batch_size))) {
      free_loader(l);
      return ganfw_error_set(GANFW_ERR_OOM, "loader: no host memory");
    }
    *out = l;
    return GANFW_OK;
  }
  l->nworkers = l->nslots = cfg->workers > 1 ? cfg->workers : 1;
  l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
  int ok = l->slots != NULL;
  for (int32_t i = 0; ok && i < l->nslots; i++) {
    slot *s = &l->slots[i];
    atomic_init(&s->cancel, 0);
    s->images = malloc(sizeof(float) * l->sample_elems * cfg->batch_size);
    s->labels = malloc(sizeof(int32_t) * cfg->batch_size);
    s->index = malloc(sizeof(int64_t) * cfg->batch_size);
    ok = s->images && s->labels && s->index;
  }
  if (!ok) {
    const size_t elems = l->sample_elems;
    free_loader(l);
    return ganfw_error_set(GANFW_ERR_OOM,
                           "loader: no host memory for %d prefetch buffers of %d x %zu floats; "
                           "lower data.workers or train.batch_size",
                           cfg->workers > 1 ? cfg->workers : 1, cfg->batch_size, elems);
  }
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->work_cv, NULL);
  pthread_cond_init(&l->done_cv, NULL);
  ganfw_status st = start_workers(l);
  if (st != GANFW_OK) {
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->done_cv);
    free_loader(l);
    return st;
  }
  *out = l;
  return GANFW_OK;
}

void ganfw_loader_destroy(ganfw_loader *l) {
  if (!l) return;
  if (l->nworkers) {
    stop_workers(l, l->nworkers);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->done_cv);
  }
  free_loader(l);
}

ganfw_status ganfw_loader_next(ganfw_loader *l, float *images, int32_t *labels,
                               ganfw_batch_info *info) {
  ganfw_batch_info got;
  if (!l->nworkers) {
    got = batch_at(l, l->epoch, l->offset);
    batch_index(l, &got, l->sync_index);
    ganfw_status st = fill(l, &got, l->sync_index, images, labels, NULL);
    if (st != GANFW_OK) return st;
  } else {
    pthread_mutex_lock(&l->mu);
    queue_locked(l);
    slot *s = &l->slots[l->head % l->nslots];
    while (s->state != SLOT_READY) pthread_cond_wait(&l->done_cv, &l->mu);
    if (s->status != GANFW_OK) {
      const ganfw_status st = ganfw_error_set(s->status, "%s", s->msg);
      drain_locked(l); /* the batches after it, too: the next call starts again here */
      pthread_mutex_unlock(&l->mu);
      return st;
    }
    pthread_mutex_unlock(&l->mu);
    /* A ready slot is the caller's alone until it is freed: no worker writes it. */
    got = s->info;
    memcpy(images, s->images, sizeof(float) * l->sample_elems * got.rows);
    if (labels) memcpy(labels, s->labels, sizeof(int32_t) * got.rows);
    pthread_mutex_lock(&l->mu);
    s->state = SLOT_FREE;
    l->head++;
    queue_locked(l); /* the next batches, while the caller works on this one */
    pthread_mutex_unlock(&l->mu);
  }
  advance(l, &l->epoch, &l->offset, got.n);
  if (info) *info = got;
  return GANFW_OK;
}

int64_t ganfw_loader_max_batch(int64_t n, int32_t drop_last, const char **why) {
  if (why)
    *why = drop_last ? "data.drop_last is true, so the loader would make no batch larger than "
                       "the set"
                     : "a training step takes full batches only, and with data.drop_last "
                       "false a larger batch would only give short ones, which are skipped";
  return n;
}

int64_t ganfw_loader_batches_per_epoch(const ganfw_loader *l) {
  const int64_t b = l->cfg.batch_size;
  return l->cfg.drop_last ? l->n / b : (l->n + b - 1) / b;
}

void ganfw_loader_position(const ganfw_loader *l, int64_t *epoch, int64_t *offset) {
  *epoch = l->epoch;
  *offset = l->offset;
}

ganfw_status ganfw_loader_seek(ganfw_loader *l, int64_t epoch, int64_t offset) {
  if (epoch < 0 || offset < 0 || offset > l->n)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "loader: position (epoch %lld, offset %lld) is outside %s (%lld "
                           "samples); was the checkpoint made with another dataset?",
                           (long long)epoch, (long long)offset, ganfw_dataset_name(l->ds),
                           (long long)l->n);
  if (l->nworkers) pthread_mutex_lock(&l->mu);
  l->epoch = epoch;
  l->offset = offset;
  advance(l, &l->epoch, &l->offset, 0);
  if (l->nworkers) {
    drain_locked(l); /* batches made for the old position */
    pthread_mutex_unlock(&l->mu);
  }
  return GANFW_OK;
}
