/* ZeRO stage 1 (see zero.h): the optimizer over this rank's range of the parameters. */
#include "train/zero.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"

typedef struct zero_opt {
  ganfw_ctx *ctx;
  ganfw_dist *d;
  const char *role;
  const ganfw_optim_vt *inner;
  void *self;
  const ganfw_param *full; /* the session's parameters, borrowed */
  int64_t n;
  int64_t *start; /* [n]: where each parameter begins when they are laid end to end */
  int64_t total, chunk;
  ganfw_param *slice; /* this rank's pieces: views of values and gradients */
  int64_t *slice_of;  /* [n_slice]: the parameter each piece is of */
  int64_t *slice_off; /* [n_slice]: its first element inside that parameter */
  int64_t n_slice;
  int64_t *counts, *displs; /* [size]: scratch for the collectives */
  /* checkpoints: the whole state in full-size tensors, big[i * nstate + s] of parameter i
   * under "<name>.<suffix[s]>" */
  int32_t nstate;
  char **suffix;
  ganfw_tensor **big;
  char **big_name;
  ganfw_tensor **mine; /* [n_slice * nstate]: the plugin's state tensor of each piece */
} zero_opt;

static void free_big(zero_opt *z) {
  for (int64_t i = 0; z->big && i < z->n * z->nstate; i++) {
    ganfw_tensor_destroy(z->big[i]);
    free(z->big_name[i]);
  }
  free(z->big);
  free(z->big_name);
  z->big = NULL;
  z->big_name = NULL;
  for (int32_t s = 0; z->suffix && s < z->nstate; s++) free(z->suffix[s]);
  free(z->suffix);
  free(z->mine);
  z->suffix = NULL;
  z->mine = NULL;
  z->nstate = 0;
}

static void zero_destroy(void *self) {
  zero_opt *z = self;
  if (!z) return;
  free_big(z);
  if (z->self) z->inner->destroy(z->self);
  for (int64_t k = 0; z->slice && k < z->n_slice; k++) {
    ganfw_tensor_destroy(z->slice[k].value);
    ganfw_tensor_destroy(z->slice[k].grad);
  }
  free(z->slice);
  free(z->slice_of);
  free(z->slice_off);
  free(z->start);
  free(z->counts);
  free(z->displs);
  free(z);
}

/* Elements [*a, *b) of parameter i that rank r holds (*a == *b: none). */
static void piece(const zero_opt *z, int64_t i, int32_t r, int64_t *a, int64_t *b) {
  const int64_t lo = z->chunk * r, hi = lo + z->chunk < z->total ? lo + z->chunk : z->total;
  const int64_t s = z->start[i], e = s + z->full[i].value->numel;
  *a = (s > lo ? s : lo) - s;
  *b = (e < hi ? e : hi) - s;
  if (*b < *a) *b = *a;
}

/* counts/displs of parameter i over the ranks. */
static void layout_of(zero_opt *z, int64_t i) {
  for (int32_t r = 0; r < z->d->size; r++) {
    int64_t a, b;
    piece(z, i, r, &a, &b);
    z->counts[r] = b - a;
    z->displs[r] = a;
  }
}

static ganfw_status zero_step(void *self, double lr) {
  zero_opt *z = self;
  ganfw_status st = z->inner->step(z->self, lr);
  char what[128];
  snprintf(what, sizeof what, "gathering the %s's updated parameters (zero)", z->role);
  for (int64_t i = 0; i < z->n && st == GANFW_OK; i++) {
    layout_of(z, i);
    st = ganfw_dist_allgatherv_f32(z->d, z->full[i].value->data, z->counts, z->displs, what);
  }
  return st;
}

static ganfw_tensor *zero_state_tensor(void *self, int64_t i, const char **name) {
  zero_opt *z = self;
  if (!z->big || i < 0 || i >= z->n * z->nstate) return NULL;
  if (name) *name = z->big_name[i];
  return z->big[i];
}

static int64_t zero_get_step(void *self) {
  zero_opt *z = self;
  return z->inner->get_step ? z->inner->get_step(z->self) : 0;
}

static void zero_set_step(void *self, int64_t step) {
  zero_opt *z = self;
  if (z->inner->set_step) z->inner->set_step(z->self, step);
}

static const ganfw_optim_vt zero_vt = {
    .struct_size = sizeof(ganfw_optim_vt),
    .kind = GANFW_VT_TAG_OPTIM,
    .create = NULL, /* made by ganfw_zero_create */
    .destroy = zero_destroy,
    .step = zero_step,
    .state_tensor = zero_state_tensor,
    .get_step = zero_get_step,
    .set_step = zero_set_step,
    .get_extension = NULL,
};

int32_t ganfw_zero_sharded(const ganfw_session_optim *so) {
  return so->vt == &zero_vt;
}

int64_t ganfw_zero_shard_elems(const ganfw_session_optim *so) {
  if (!ganfw_zero_sharded(so)) return 0;
  const zero_opt *z = so->self;
  int64_t e = 0;
  for (int64_t k = 0; k < z->n_slice; k++) e += z->slice[k].value->numel;
  return e;
}

/* A view of elements [a, b) of t, flattened. */
static ganfw_tensor *flat_range(ganfw_tensor *t, int64_t a, int64_t b, const char *name) {
  int64_t n = t->numel;
  ganfw_tensor *flat = ganfw_tensor_view(t, 1, &n, name);
  ganfw_tensor *r = flat ? ganfw_tensor_rows(flat, a, b - a, name) : NULL;
  ganfw_tensor_destroy(flat);
  return r;
}

ganfw_status ganfw_zero_create(ganfw_ctx *ctx, ganfw_dist *d, ganfw_session_optim *so,
                               const ganfw_optim_vt *vt, const ganfw_cfg *cfg) {
  zero_opt *z = calloc(1, sizeof *z);
  if (!z) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  z->ctx = ctx;
  z->d = d;
  z->role = so->role;
  z->inner = vt;
  z->full = so->params;
  z->n = so->n_params;
  const size_t n = (size_t)(z->n > 0 ? z->n : 1), ranks = (size_t)d->size;
  z->start = calloc(n, sizeof *z->start);
  z->slice = calloc(n, sizeof *z->slice);
  z->slice_of = calloc(n, sizeof *z->slice_of);
  z->slice_off = calloc(n, sizeof *z->slice_off);
  z->counts = calloc(ranks, sizeof *z->counts);
  z->displs = calloc(ranks, sizeof *z->displs);
  if (!z->start || !z->slice || !z->slice_of || !z->slice_off || !z->counts || !z->displs) {
    zero_destroy(z);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  for (int64_t i = 0; i < z->n; i++) {
    z->start[i] = z->total;
    z->total += z->full[i].value->numel;
  }
  z->chunk = (z->total + d->size - 1) / d->size;
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; i < z->n && st == GANFW_OK; i++) {
    int64_t a, b;
    piece(z, i, d->rank, &a, &b);
    if (a == b) continue;
    ganfw_param *p = &z->slice[z->n_slice];
    p->name = z->full[i].name;
    p->value = flat_range(z->full[i].value, a, b, z->full[i].value->name);
    p->grad = p->value ? flat_range(z->full[i].grad, a, b, z->full[i].grad->name) : NULL;
    z->slice_of[z->n_slice] = i;
    z->slice_off[z->n_slice] = a;
    z->n_slice++;
    if (!p->value || !p->grad) st = ganfw_error_code();
  }
  if (st == GANFW_OK) st = vt->create(ganfw_host_table(), ctx, cfg, z->slice, z->n_slice, &z->self);
  if (st != GANFW_OK) {
    zero_destroy(z);
    return st;
  }
  so->vt = &zero_vt;
  so->self = z;
  return GANFW_OK;
}

/* The plugin's state tensors of every piece, by suffix: "<param>.<suffix>". The suffixes
 * are those of the first piece; every piece must have them, and every rank as many. */
static ganfw_status find_state(zero_opt *z) {
  free_big(z);
  if (!z->inner->state_tensor || z->n_slice == 0) return GANFW_OK;
  const char *name = NULL;
  const char *first = z->slice[0].name;
  const size_t flen = strlen(first);
  int64_t total = 0;
  int32_t ns = 0;
  for (int64_t j = 0; z->inner->state_tensor(z->self, j, &name); j++, total++)
    if (name && strncmp(name, first, flen) == 0 && name[flen] == '.') ns++;
  int64_t agree[2] = {ns, -ns};
  ganfw_status st = ganfw_dist_allreduce_max_i64(z->d, agree, 2, "the optimizer's state (zero)");
  if (st != GANFW_OK) return st;
  if (total != ns * z->n_slice || agree[0] != -agree[1])
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                           "memory strategy zero: the %s's optimizer does not keep the same "
                           "state tensors, named \"<parameter>.<what>\", for every parameter, so "
                           "its state cannot be sharded; drop zero from memory:",
                           z->role);
  z->nstate = ns;
  z->suffix = calloc((size_t)(ns > 0 ? ns : 1), sizeof *z->suffix);
  z->mine = calloc((size_t)(ns * z->n_slice + 1), sizeof *z->mine);
  if (!z->suffix || !z->mine) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  int32_t s = 0;
  for (int64_t j = 0; s < ns && z->inner->state_tensor(z->self, j, &name); j++)
    if (name && strncmp(name, first, flen) == 0 && name[flen] == '.' &&
        !(z->suffix[s++] = strdup(name + flen + 1)))
      return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int64_t k = 0; k < z->n_slice; k++) {
    const char *pn = z->slice[k].name;
    const size_t plen = strlen(pn);
    for (int32_t q = 0; q < ns; q++) {
      ganfw_tensor *t = NULL;
      for (int64_t j = 0; !z->mine[k * ns + q] && (t = z->inner->state_tensor(z->self, j, &name));
           j++)
        if (name && strncmp(name, pn, plen) == 0 && name[plen] == '.' &&
            strcmp(name + plen + 1, z->suffix[q]) == 0)
          z->mine[k * ns + q] = t;
      if (!z->mine[k * ns + q])
        return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                               "memory strategy zero: the %s's optimizer has no \"%s.%s\"; its "
                               "state cannot be sharded",
                               z->role, pn, z->suffix[q]);
    }
  }
  return GANFW_OK;
}

/* Full-size tensors for the whole state (every rank, or rank 0 alone). */
static ganfw_status make_big(zero_opt *z, int32_t here) {
  const int64_t m = z->n * z->nstate;
  z->big = calloc((size_t)(m > 0 ? m : 1), sizeof *z->big);
  z->big_name = calloc((size_t)(m > 0 ? m : 1), sizeof *z->big_name);
  if (!z->big || !z->big_name) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int64_t i = 0; here && i < z->n; i++)
    for (int32_t q = 0; q < z->nstate; q++) {
      const ganfw_tensor *v = z->full[i].value;
      size_t len = strlen(z->full[i].name) + strlen(z->suffix[q]) + 2;
      char *nm = malloc(len);
      if (!nm) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
      snprintf(nm, len, "%s.%s", z->full[i].name, z->suffix[q]);
      z->big_name[i * z->nstate + q] = nm;
      if (!(z->big[i * z->nstate + q] = ganfw_tensor_create(z->ctx, GANFW_DTYPE_F32, v->ndim,
                                                            v->shape, GANFW_MEM_OTHER, nm)))
        return ganfw_error_code();
    }
  return GANFW_OK;
}

/* This rank's piece of parameter i, or -1. */
static int64_t slice_index(const zero_opt *z, int64_t i) {
  for (int64_t k = 0; k < z->n_slice; k++)
    if (z->slice_of[k] == i) return k;
  return -1;
}

ganfw_status ganfw_zero_gather(ganfw_session_optim *so) {
  if (!ganfw_zero_sharded(so)) return GANFW_OK;
  zero_opt *z = so->self;
  ganfw_status st = find_state(z);
  if (st == GANFW_OK) st = make_big(z, z->d->rank == 0);
  char what[128];
  snprintf(what, sizeof what, "gathering the %s's optimizer state (zero)", z->role);
  for (int64_t i = 0; i < z->n && st == GANFW_OK; i++) {
    layout_of(z, i);
    const int64_t k = slice_index(z, i);
    for (int32_t q = 0; q < z->nstate && st == GANFW_OK; q++) {
      ganfw_tensor *b = z->big[i * z->nstate + q];
      st = ganfw_dist_gatherv_f32(z->d, k >= 0 ? z->mine[k * z->nstate + q]->data : NULL,
                                  b ? b->data : NULL, z->counts, z->displs, 0, what);
    }
  }
  if (st == GANFW_OK && !ganfw_dist_sends(z->d)) /* one rank: the pieces are the whole */
    for (int64_t k = 0; k < z->n_slice && st == GANFW_OK; k++)
      for (int32_t q = 0; q < z->nstate && st == GANFW_OK; q++) {
        ganfw_tensor *b = z->big[z->slice_of[k] * z->nstate + q], *p = z->mine[k * z->nstate + q];
        if (b)
          st = z->ctx->be->vt->copy_d2d(z->ctx->be, (float *)b->data + z->slice_off[k], p->data,
                                        (size_t)p->nbytes);
      }
  if (st != GANFW_OK) free_big(z);
  return st;
}

ganfw_status ganfw_zero_expand(ganfw_session_optim *so) {
  if (!ganfw_zero_sharded(so)) return GANFW_OK;
  zero_opt *z = so->self;
  ganfw_status st = find_state(z);
  if (st == GANFW_OK) st = make_big(z, 1);
  if (st != GANFW_OK) free_big(z);
  return st;
}

ganfw_status ganfw_zero_scatter(ganfw_session_optim *so) {
  if (!ganfw_zero_sharded(so)) return GANFW_OK;
  zero_opt *z = so->self;
  ganfw_status st = GANFW_OK;
  for (int64_t k = 0; z->big && k < z->n_slice && st == GANFW_OK; k++)
    for (int32_t q = 0; q < z->nstate && st == GANFW_OK; q++) {
      ganfw_tensor *b = z->big[z->slice_of[k] * z->nstate + q], *p = z->mine[k * z->nstate + q];
      st = z->ctx->be->vt->copy_d2d(z->ctx->be, p->data, (const float *)b->data + z->slice_off[k],
                                    (size_t)p->nbytes);
    }
  return st;
}

void ganfw_zero_release(ganfw_session_optim *so) {
  if (ganfw_zero_sharded(so)) free_big(so->self);
}
