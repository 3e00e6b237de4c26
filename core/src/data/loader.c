/* The batch loader: walks a dataset epoch after epoch in a per-epoch permutation drawn from
 * (seed, epoch), filling batches [B,C,H,W] + labels [B]; with prefetch, one pthread fills
 * the next batch into a second host buffer while the caller trains on the current one. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_source.h"
#include "base/error.h"

struct ganfw_loader {
  const ganfw_dataset *ds;
  ganfw_loader_config cfg;
  int64_t n;             /* dataset size */
  size_t sample_elems;   /* C*H*W */
  int64_t epoch, offset; /* where the caller's next batch starts; changed by the caller only */

  /* Producer state, touched only by whoever fills batches (the caller without prefetch, the
   * thread with it): the permutation of one epoch. */
  int64_t *perm;
  int64_t perm_epoch; /* -1: none yet */

  /* Prefetch: the thread's request, its result buffer and status, under mu. */
  int threaded;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop, req_pending, busy, ready;
  int64_t req_epoch, req_offset;
  float *buf;
  int32_t *buf_labels;
  ganfw_batch_info buf_info;
  ganfw_status buf_status;
  char buf_msg[4096];
  atomic_int abandon; /* destroy: stop filling between samples */
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

/* Fills the batch at (epoch, offset) into images/labels. */
static ganfw_status fill(ganfw_loader *l, int64_t epoch, int64_t offset, float *images,
                         int32_t *labels, ganfw_batch_info *info) {
  if (l->cfg.shuffle && l->perm_epoch != epoch) make_perm(l, epoch);
  const int64_t rest = l->n - offset;
  const int32_t nb = rest < l->cfg.batch_size ? (int32_t)rest : l->cfg.batch_size;
  for (int32_t i = 0; i < nb; i++) {
    if (atomic_load_explicit(&l->abandon, memory_order_relaxed))
      return ganfw_error_set(GANFW_ERR_INTERRUPTED, "loader stopped");
    const int64_t idx = l->cfg.shuffle ? l->perm[offset + i] : offset + i;
    int32_t label = 0;
    ganfw_status st = ganfw_dataset_get(l->ds, idx, ganfw_data_sample_key(l->cfg.seed, epoch, idx),
                                        images + (size_t)i * l->sample_elems, &label);
    if (st != GANFW_OK) return st;
    if (labels) labels[i] = label;
  }
  int64_t e = epoch, o = offset;
  advance(l, &e, &o, nb);
  info->n = nb;
  info->last_in_epoch = e != epoch;
  info->epoch = epoch;
  info->offset = offset;
  return GANFW_OK;
}

static void *prefetch_main(void *arg) {
  ganfw_loader *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stop && !l->req_pending) pthread_cond_wait(&l->cv, &l->mu);
    if (l->stop) break;
    const int64_t e = l->req_epoch, o = l->req_offset;
    l->req_pending = 0;
    l->busy = 1;
    pthread_mutex_unlock(&l->mu);
    ganfw_batch_info info = {0};
    const ganfw_status st = fill(l, e, o, l->buf, l->buf_labels, &info);
    pthread_mutex_lock(&l->mu);
    if (st != GANFW_OK) snprintf(l->buf_msg, sizeof l->buf_msg, "%s", ganfw_error_message());
    l->buf_status = st;
    l->buf_info = info;
    l->busy = 0;
    l->ready = 1;
    pthread_cond_broadcast(&l->cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

/* Asks the thread for the batch at the caller's position. Under mu. */
static void request_locked(ganfw_loader *l) {
  l->req_epoch = l->epoch;
  l->req_offset = l->offset;
  l->req_pending = 1;
  pthread_cond_broadcast(&l->cv);
}

ganfw_status ganfw_loader_create(const ganfw_dataset *ds, const ganfw_loader_config *cfg,
                                 ganfw_loader **out) {
  *out = NULL;
  if (!ds || !cfg || cfg->batch_size <= 0)
    return ganfw_error_set(GANFW_ERR_CONFIG, "loader: batch_size must be positive (got %d)",
                           cfg ? cfg->batch_size : 0);
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
    free(l);
    return ganfw_error_set(GANFW_ERR_OOM, "loader: no host memory for a %lld-entry permutation",
                           (long long)n);
  }
  if (cfg->prefetch) {
    l->buf = malloc(sizeof(float) * l->sample_elems * cfg->batch_size);
    l->buf_labels = malloc(sizeof(int32_t) * cfg->batch_size);
    if (!l->buf || !l->buf_labels) {
      ganfw_loader_destroy(l);
      return ganfw_error_set(GANFW_ERR_OOM,
                             "loader: no host memory for the prefetch buffer "
                             "(%d x %zu floats)",
                             cfg->batch_size, l->sample_elems);
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    const int rc = pthread_create(&l->thread, NULL, prefetch_main, l);
    if (rc != 0) {
      pthread_mutex_destroy(&l->mu);
      pthread_cond_destroy(&l->cv);
      ganfw_loader_destroy(l);
      return ganfw_error_set(GANFW_ERR_OOM,
                             "loader: cannot start the prefetch thread: %s; turn prefetch off",
                             strerror(rc));
    }
    l->threaded = 1;
  }
  *out = l;
  return GANFW_OK;
}

void ganfw_loader_destroy(ganfw_loader *l) {
  if (!l) return;
  if (l->threaded) {
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    atomic_store(&l->abandon, 1);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
  }
  free(l->perm);
  free(l->buf);
  free(l->buf_labels);
  free(l);
}

ganfw_status ganfw_loader_next(ganfw_loader *l, float *images, int32_t *labels,
                               ganfw_batch_info *info) {
  ganfw_batch_info got = {0};
  if (!l->threaded) {
    ganfw_status st = fill(l, l->epoch, l->offset, images, labels, &got);
    if (st != GANFW_OK) return st;
  } else {
    pthread_mutex_lock(&l->mu);
    if (!l->ready && !l->busy && !l->req_pending) request_locked(l);
    while (!l->ready) pthread_cond_wait(&l->cv, &l->mu);
    l->ready = 0;
    if (l->buf_status != GANFW_OK) {
      const ganfw_status st = ganfw_error_set(l->buf_status, "%s", l->buf_msg);
      pthread_mutex_unlock(&l->mu);
      return st;
    }
    got = l->buf_info;
    memcpy(images, l->buf, sizeof(float) * l->sample_elems * got.n);
    if (labels) memcpy(labels, l->buf_labels, sizeof(int32_t) * got.n);
  }
  advance(l, &l->epoch, &l->offset, got.n);
  if (l->threaded) {
    request_locked(l); /* the next batch, while the caller works on this one */
    pthread_mutex_unlock(&l->mu);
  }
  if (info) *info = got;
  return GANFW_OK;
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
  if (l->threaded) {
    pthread_mutex_lock(&l->mu);
    l->req_pending = 0; /* not taken yet: cancel */
    while (l->busy) pthread_cond_wait(&l->cv, &l->mu);
    l->ready = 0; /* a prefetched batch for the old position */
  }
  l->epoch = epoch;
  l->offset = offset;
  advance(l, &l->epoch, &l->offset, 0);
  if (l->threaded) pthread_mutex_unlock(&l->mu);
  return GANFW_OK;
}
