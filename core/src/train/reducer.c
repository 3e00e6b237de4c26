/* Bucketed gradient all-reduce (see reducer.h). */
#include "train/reducer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"

typedef struct bucket {
  int64_t first, end; /* parameters [first, end) of the reducer's order */
  int64_t elems;
  int64_t pending; /* gradients of it not final yet in this backward */
  int32_t started;
  ganfw_tensor *buf; /* f32 [elems], category comm */
  ganfw_dist_req req;
} bucket;

struct ganfw_reducer {
  ganfw_ctx *ctx;
  ganfw_dist *d;
  int64_t n;
  ganfw_tensor **grad; /* [n]: the gradients, last parameter first */
  int64_t *offset;     /* [n]: where each sits in its bucket's buffer (elements) */
  int32_t *bucket_of;  /* [n] */
  int32_t *ready;      /* [n]: final in this backward */
  bucket *b;
  int32_t nb;
  ganfw_status st; /* the first failure inside the hook */
  char msg[1024];
  char role[64]; /* the net's, for messages */
};

static ganfw_status start(ganfw_reducer *r, bucket *bk) {
  ganfw_backend *be = r->ctx->be;
  char *dst = bk->buf->data;
  for (int64_t i = bk->first; i < bk->end; i++) {
    ganfw_tensor *g = r->grad[i];
    ganfw_status st = be->vt->copy_d2d(be, dst + r->offset[i] * (int64_t)sizeof(float), g->data,
                                       (size_t)g->nbytes);
    if (st != GANFW_OK) return st;
  }
  bk->started = 1;
  return ganfw_dist_iallreduce_sum_f32(r->d, bk->buf->data, bk->elems, &bk->req);
}

/* The net's hook: layer gradients grads[0..n) are final. */
static void on_grads(void *user, ganfw_tensor *const *grads, int32_t n) {
  ganfw_reducer *r = user;
  if (r->st != GANFW_OK) return;
  for (int32_t k = 0; k < n; k++) {
    for (int64_t i = 0; i < r->n; i++) {
      if (r->grad[i] != grads[k] || r->ready[i]) continue;
      r->ready[i] = 1;
      bucket *bk = &r->b[r->bucket_of[i]];
      if (--bk->pending == 0 && !bk->started && (r->st = start(r, bk)) != GANFW_OK)
        snprintf(r->msg, sizeof r->msg, "%s", ganfw_error_message());
      break;
    }
  }
  ganfw_dist_progress(r->d);
}

ganfw_status ganfw_reducer_create(ganfw_ctx *ctx, ganfw_dist *d, const ganfw_param *params,
                                  int64_t n, const char *role, ganfw_reducer **out) {
  *out = NULL;
  ganfw_reducer *r = calloc(1, sizeof *r);
  if (!r) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  r->ctx = ctx;
  r->d = d;
  r->n = n;
  snprintf(r->role, sizeof r->role, "%s", role ? role : "net");
  const size_t m = (size_t)(n > 0 ? n : 1);
  r->grad = calloc(m, sizeof *r->grad);
  r->offset = calloc(m, sizeof *r->offset);
  r->bucket_of = calloc(m, sizeof *r->bucket_of);
  r->ready = calloc(m, sizeof *r->ready);
  r->b = calloc(m, sizeof *r->b);
  if (!r->grad || !r->offset || !r->bucket_of || !r->ready || !r->b) {
    ganfw_reducer_destroy(r);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  const int64_t cap = d->set.bucket_cap / (int64_t)sizeof(float);
  for (int64_t i = 0; i < n; i++) {
    ganfw_tensor *g = params[n - 1 - i].grad; /* backward's order: the last layers first */
    r->grad[i] = g;
    bucket *bk = r->nb > 0 ? &r->b[r->nb - 1] : NULL;
    if (!bk || (bk->elems > 0 && bk->elems + g->numel > cap)) {
      bk = &r->b[r->nb++];
      bk->first = i;
      bk->req.slot = -1;
    }
    r->offset[i] = bk->elems;
    r->bucket_of[i] = r->nb - 1;
    bk->elems += g->numel;
    bk->end = i + 1;
  }
  for (int32_t k = 0; k < r->nb; k++) {
    char name[160];
    snprintf(name, sizeof name, "comm.%s.bucket%d", role, (int)k);
    int64_t shape = r->b[k].elems;
    r->b[k].buf = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &shape, GANFW_MEM_COMM, name);
    if (!r->b[k].buf) {
      ganfw_status st = ganfw_error_code();
      ganfw_reducer_destroy(r);
      return st;
    }
  }
  *out = r;
  return GANFW_OK;
}

void ganfw_reducer_destroy(ganfw_reducer *r) {
  if (!r) return;
  for (int32_t k = 0; r->b && k < r->nb; k++) {
    ganfw_dist_wait(r->d, &r->b[k].req, "gradients");
    ganfw_tensor_destroy(r->b[k].buf);
  }
  free(r->grad);
  free(r->offset);
  free(r->bucket_of);
  free(r->ready);
  free(r->b);
  free(r);
}

static void reset(ganfw_reducer *r) {
  memset(r->ready, 0, sizeof *r->ready * (size_t)(r->n > 0 ? r->n : 1));
  for (int32_t k = 0; k < r->nb; k++) {
    r->b[k].pending = r->b[k].end - r->b[k].first;
    r->b[k].started = 0;
  }
  r->st = GANFW_OK;
  r->msg[0] = '\0';
}

void ganfw_reducer_arm(ganfw_reducer *r, ganfw_net *net) {
  reset(r);
  ganfw_net_set_grad_hook(net, on_grads, r);
}

ganfw_status ganfw_reducer_finish(ganfw_reducer *r, ganfw_net *net) {
  ganfw_net_set_grad_hook(net, NULL, NULL);
  ganfw_status st = r->st;
  if (st != GANFW_OK) ganfw_error_set(st, "%s", r->msg);
  ganfw_backend *be = r->ctx->be;
  for (int32_t k = 0; k < r->nb; k++) {
    bucket *bk = &r->b[k];
    if (st == GANFW_OK && !bk->started) st = start(r, bk);
    char what[160]; /* a timeout names it */
    snprintf(what, sizeof what, "the gradient all-reduce of the %s (bucket %d of %d)", r->role,
             (int)k + 1, (int)r->nb);
    ganfw_status w = ganfw_dist_wait(r->d, &bk->req, what);
    if (st == GANFW_OK) st = w;
    if (st != GANFW_OK) continue;
    /* the sum over the ranks (each rank's loss carries 1/N), back into every gradient */
    const char *src = bk->buf->data;
    for (int64_t i = bk->first; i < bk->end && st == GANFW_OK; i++)
      st = be->vt->copy_d2d(be, r->grad[i]->data, src + r->offset[i] * (int64_t)sizeof(float),
                            (size_t)r->grad[i]->nbytes);
  }
  reset(r);
  return st;
}
