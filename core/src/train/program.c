/* A trainer plugin's step under the core (see program.h and ganfw/trainer.h). The trainer
 * chains nets by hand: each forward with a tape is one link that backward consumes, and
 * the gradient a backward returns for a net's input is what the trainer hands on to the
 * net that made that input (or not: PyTorch's detach). Everything a step call returns is
 * the step's, released when the trainer's call returns. */
#include "train/program.h"
#include "backend/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/error.h"
#include "base/log.h"
#include "runtime/alloc.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "train/dp.h"
#include "train/ema.h"
#include "train/nonfinite.h"
#include "train/trainer.h"

/* One tensor the step handed out: a forward's output (with its tape, net and the net's
 * dtype), a gradient, a loss gradient or the trainer's own tensor. */
typedef struct owned {
  ganfw_tensor *t;
  ganfw_tape *tape; /* NULL: no backward through t */
  ganfw_net *net;
  int32_t dtype; /* the dtype the net produced t in (its backward takes dy in it) */
} owned;

struct ganfw_step {
  ganfw_program *p;
  int32_t mode; /* GANFW_STEP_* */
  ganfw_tensor *input[GANFW_INPUT_COUNT];
  int64_t step_index;
  int32_t micro, micro_count;
  double grad_scale;
  owned *own;
  int32_t n_own, cap_own;
  double sum[GANFW_PROGRAM_MAX_SCALARS];
  int32_t count[GANFW_PROGRAM_MAX_SCALARS];
  uint64_t noise_offset; /* sample(): the fixed stream's position */
  float *sample_host;    /* sample(): the grid, copied to the host */
  int64_t sample_shape[4], sample_nrow;
};

struct ganfw_program {
  ganfw_session *s;
  const ganfw_host *host;
  const char *scalar[GANFW_PROGRAM_MAX_SCALARS];
  int32_t n_scalar;
  char phase[GANFW_PROGRAM_MAX_PHASES][64];
  int32_t n_phase, cur_phase;
  ganfw_phase_hook hook;
  void *hook_user;
  ganfw_step *st; /* the call running now */
  /* this step, per net */
  int32_t backward_params[GANFW_MAX_NETS]; /* a backward added its parameter gradients */
  int32_t stepped[GANFW_MAX_NETS];         /* its optimizer stepped */
  int32_t skip_updates;                    /* train.on_nonfinite: skip hit: no more updates */
  int32_t all_due;                         /* the next step updates every net (the planner) */
  ganfw_program_stats *stats;
  ganfw_net_stats *bn[GANFW_MAX_NETS]; /* running statistics before the step (skip) */
  ganfw_grad_list grads[GANFW_MAX_NETS];
  /* data.other: its loader (one batch per step, at the place the step index says) */
  ganfw_loader *other_loader;
  float *other_host;
  int64_t other_rows;
  ganfw_tensor *other_first; /* sample(): its first images (at most the grid's), loaded once */
};

/* --- the step calls ------------------------------------------------------------------ */

static int32_t net_index(const ganfw_program *p, const ganfw_net *net) {
  for (int32_t r = 0; r < p->s->n_nets; r++)
    if (p->s->nets[r].net == net) return r;
  return -1;
}

static int32_t role_index(const ganfw_program *p, const char *role) {
  for (int32_t r = 0; role && r < p->s->n_nets; r++)
    if (strcmp(p->s->nets[r].role, role) == 0) return r;
  return -1;
}

static ganfw_status no_role(const ganfw_program *p, const char *call, const char *role) {
  return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s': %s('%s'): the trainer named no such net",
                         p->s->trainer_name, call, role ? role : "(null)");
}

static ganfw_status keep(ganfw_step *st, ganfw_tensor *t, ganfw_tape *tape, ganfw_net *net,
                         int32_t dtype) {
  if (st->n_own == st->cap_own) {
    int32_t cap = st->cap_own ? st->cap_own * 2 : 32;
    owned *o = realloc(st->own, (size_t)cap * sizeof *o);
    if (!o) {
      ganfw_tape_destroy(tape);
      ganfw_tensor_destroy(t);
      return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    }
    st->own = o;
    st->cap_own = cap;
  }
  st->own[st->n_own++] = (owned){t, tape, net, dtype};
  return GANFW_OK;
}

static owned *find(ganfw_step *st, const ganfw_tensor *t) {
  for (int32_t i = st->n_own - 1; i >= 0; i--)
    if (st->own[i].t == t) return &st->own[i];
  return NULL;
}

static void release_all(ganfw_step *st) {
  for (int32_t i = st->n_own - 1; i >= 0; i--) {
    ganfw_tape_destroy(st->own[i].tape);
    ganfw_tensor_destroy(st->own[i].t);
  }
  st->n_own = 0;
}

static ganfw_net *api_net(ganfw_step *st, const char *role) {
  int32_t r = role_index(st->p, role);
  if (r < 0) {
    no_role(st->p, "net", role);
    return NULL;
  }
  return st->p->s->nets[r].net;
}

static ganfw_tensor *api_input(ganfw_step *st, int32_t which) {
  return which >= 0 && which < GANFW_INPUT_COUNT ? st->input[which] : NULL;
}

static int32_t api_mode(ganfw_step *st) {
  return st->mode;
}

static int64_t api_step_index(ganfw_step *st) {
  return st->step_index;
}

static double api_grad_scale(ganfw_step *st) {
  return st->grad_scale;
}

static ganfw_status api_phase(ganfw_step *st, const char *name) {
  ganfw_program *p = st->p;
  if (!name || !*name)
    return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s': phase() needs a name",
                           p->s->trainer_name);
  if (st->mode != GANFW_STEP_TRAIN) return GANFW_OK;
  int32_t k = 0;
  while (k < p->n_phase && strcmp(p->phase[k], name) != 0) k++;
  if (k == p->n_phase) {
    if (p->n_phase == GANFW_PROGRAM_MAX_PHASES)
      return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s': more than %d phases",
                             p->s->trainer_name, GANFW_PROGRAM_MAX_PHASES);
    snprintf(p->phase[p->n_phase++], sizeof p->phase[0], "%s", name);
  }
  p->cur_phase = k;
  if (p->hook) p->hook(p->hook_user, k, p->phase[k]);
  return GANFW_OK;
}

static ganfw_status api_forward(ganfw_step *st, ganfw_net *net, ganfw_tensor *x, int32_t mode,
                                ganfw_tensor **y) {
  ganfw_program *p = st->p;
  *y = NULL;
  int32_t r = net_index(p, net);
  if (r < 0)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s': forward() on a net that is none of the trainer's",
                           p->s->trainer_name);
  if (!x || x->dtype != GANFW_DTYPE_F32)
    return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s': forward() of the %s needs an f32 input",
                           p->s->trainer_name, p->s->nets[r].role);
  if (mode == GANFW_FWD_TAPE && st->mode != GANFW_STEP_TRAIN) mode = GANFW_FWD_NO_GRAD;
  ganfw_tape *tape = mode == GANFW_FWD_TAPE ? ganfw_tape_create(net) : NULL;
  if (mode == GANFW_FWD_TAPE && !tape) return ganfw_error_code();
  ganfw_tensor *native = NULL;
  ganfw_status st_ = ganfw_net_forward(net, x, tape, &native);
  if (st_ != GANFW_OK) {
    ganfw_tape_destroy(tape);
    return ganfw_error_wrap(st_, "the %s's forward", p->s->nets[r].role);
  }
  const int32_t dtype = native->dtype;
  ganfw_tensor *out = ganfw_tensor_as_dtype(native, GANFW_DTYPE_F32, GANFW_MEM_ACTIVATION);
  ganfw_tensor_destroy(native);
  if (!out) {
    ganfw_tape_destroy(tape);
    return ganfw_error_code();
  }
  ganfw_status k = keep(st, out, tape, net, dtype);
  if (k == GANFW_OK) *y = out;
  return k;
}

static ganfw_status api_backward(ganfw_step *st, ganfw_tensor *y, ganfw_tensor *dy, uint32_t flags,
                                 ganfw_tensor **dx) {
  ganfw_program *p = st->p;
  const char *tn = p->s->trainer_name;
  if (dx) *dx = NULL;
  owned *o = y ? find(st, y) : NULL;
  if (!o || !o->tape)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s': backward() of a tensor that is not the output of a "
                           "forward with a tape in this call, or whose tape a backward already "
                           "consumed",
                           tn);
  const int32_t r = net_index(p, o->net);
  const char *role = p->s->nets[r].role;
  if (!dy || dy->dtype != GANFW_DTYPE_F32 || dy->numel != y->numel)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s': backward() of the %s needs dy in f32 of y's %lld "
                           "elements",
                           tn, role, (long long)y->numel);
  if ((flags & GANFW_GRAD_PARAMS) && p->s->nets[r].frozen)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s': backward() asks for the parameter gradients of the %s, "
                           "which is frozen",
                           tn, role);
  if ((flags & GANFW_GRAD_INPUT) && !dx)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s': backward() with GANFW_GRAD_INPUT needs dx", tn);
  ganfw_tensor *dyn = ganfw_tensor_as_dtype(dy, o->dtype, GANFW_MEM_ACTIVATION);
  if (!dyn) return ganfw_error_code();
  int32_t bf = ((flags & GANFW_GRAD_PARAMS) ? GANFW_BWD_PARAM_GRAD : 0) |
               ((flags & GANFW_GRAD_INPUT) ? GANFW_BWD_INPUT_GRAD : 0);
  ganfw_tensor *dxn = NULL;
  ganfw_tape *tape = o->tape;
  o->tape = NULL;
  ganfw_status s_ = bf ? ganfw_net_backward(o->net, tape, dyn, bf, &dxn) : GANFW_OK;
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(dyn);
  if (s_ != GANFW_OK) return ganfw_error_wrap(s_, "the %s's backward", role);
  if (flags & GANFW_GRAD_PARAMS) p->backward_params[r] = 1;
  if (!dxn) return GANFW_OK;
  ganfw_tensor *d = ganfw_tensor_as_dtype(dxn, GANFW_DTYPE_F32, GANFW_MEM_ACTIVATION);
  ganfw_tensor_destroy(dxn);
  if (!d) return ganfw_error_code();
  s_ = keep(st, d, NULL, NULL, GANFW_DTYPE_F32);
  if (s_ == GANFW_OK) *dx = d;
  return s_;
}

static void api_release(ganfw_step *st, ganfw_tensor *t) {
  for (int32_t i = st->n_own - 1; t && i >= 0; i--) {
    if (st->own[i].t != t) continue;
    ganfw_tape_destroy(st->own[i].tape);
    ganfw_tensor_destroy(st->own[i].t);
    st->own[i] = st->own[--st->n_own];
    return;
  }
}

static ganfw_tensor *scratch(ganfw_ctx *ctx, const ganfw_tensor *like, const char *name) {
  return ganfw_tensor_create(ctx, GANFW_DTYPE_F32, like->ndim, like->shape, GANFW_MEM_WORKSPACE,
                             name);
}

/* The sum of every element of t (0 on the meta backend, which computes nothing). */
static ganfw_status sum_all(ganfw_ctx *ctx, const ganfw_host *h, const ganfw_tensor *t,
                            int32_t meta, double *out) {
  *out = 0;
  ganfw_tensor *s =
      ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 0, NULL, GANFW_MEM_WORKSPACE, "loss.sum");
  if (!s) return ganfw_error_code();
  float v = 0;
  ganfw_status st = h->tensor_sum(ctx, s, t, NULL, 0);
  if (st == GANFW_OK && !meta) st = ganfw_tensor_to_host(s, &v, sizeof v);
  ganfw_tensor_destroy(s);
  *out = v;
  return st;
}

static const char *const loss_names[GANFW_LOSS_KIND_COUNT] = {"mse", "l1", "bce_logits",
                                                              "cross_entropy", "kl_soft"};

/* log_softmax of row[0..k) into out (in double). */
static void log_softmax(const float *row, int64_t k, double *out) {
  double mx = row[0], sum = 0;
  for (int64_t j = 1; j < k; j++) mx = row[j] > mx ? row[j] : mx;
  for (int64_t j = 0; j < k; j++) sum += exp((double)row[j] - mx);
  const double lse = mx + log(sum);
  for (int64_t j = 0; j < k; j++) out[j] = (double)row[j] - lse;
}

/* The losses over classes (GANFW_LOSS_CROSS_ENTROPY, _KL_SOFT) of pred [N,K] logits, summed
 * over the rows into *sum, on the host (the logits are small), and their gradient times `g`
 * into grad (NULL: not wanted): softmax(pred) - target's distribution (a one-hot label, or
 * softmax(target)). Nothing is computed on the meta backend. */
static ganfw_status class_terms(int32_t kind, int32_t meta, ganfw_tensor *pred,
                                ganfw_tensor *target, float g, double *sum, ganfw_tensor *grad) {
  *sum = 0;
  if (meta) return GANFW_OK;
  const int64_t n = pred->shape[0], k = pred->numel / n;
  float *hp = malloc((size_t)pred->nbytes), *ht = malloc((size_t)target->nbytes),
        *hg = grad ? malloc((size_t)pred->nbytes) : NULL;
  double *lq = malloc((size_t)(2 * k) * sizeof *lq), *lp = lq ? lq + k : NULL;
  ganfw_status st = hp && ht && lq && (hg || !grad)
                        ? GANFW_OK
                        : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK) st = ganfw_tensor_to_host(pred, hp, pred->nbytes);
  if (st == GANFW_OK) st = ganfw_tensor_to_host(target, ht, target->nbytes);
  for (int64_t i = 0; st == GANFW_OK && i < n; i++) {
    log_softmax(hp + i * k, k, lq);
    if (kind == GANFW_LOSS_CROSS_ENTROPY) {
      const float label = ht[i];
      const int64_t y = (int64_t)label;
      if (!(label >= 0) || (float)y != label || y >= k) {
        st = ganfw_error_set(GANFW_ERR_PLUGIN,
                             "cross_entropy: row %lld's label %g is not a class id in [0, %lld)",
                             (long long)i, (double)label, (long long)k);
        break;
      }
      *sum -= lq[y];
      for (int64_t j = 0; hg && j < k; j++)
        hg[i * k + j] = (float)(g * (exp(lq[j]) - (j == y ? 1.0 : 0.0)));
    } else {
      log_softmax(ht + i * k, k, lp);
      for (int64_t j = 0; j < k; j++) *sum += exp(lp[j]) * (lp[j] - lq[j]);
      for (int64_t j = 0; hg && j < k; j++) hg[i * k + j] = (float)(g * (exp(lq[j]) - exp(lp[j])));
    }
  }
  if (st == GANFW_OK && grad) st = ganfw_tensor_from_host(grad, hg, grad->nbytes);
  free(hp);
  free(ht);
  free(hg);
  free(lq);
  return st;
}

/* The elementwise loss of `kind` summed into *sum, and its gradient d(loss_el)/d(pred)
 * times `g` into grad (NULL: not wanted). */
static ganfw_status loss_terms(ganfw_ctx *ctx, const ganfw_host *h, int32_t kind, int32_t meta,
                               ganfw_tensor *pred, ganfw_tensor *target, float g, double *sum,
                               ganfw_tensor *grad) {
  ganfw_tensor *a = scratch(ctx, pred, "loss.a"), *b = scratch(ctx, pred, "loss.b");
  ganfw_status st = a && b ? GANFW_OK : ganfw_error_code();
  if (st == GANFW_OK && kind == GANFW_LOSS_MSE) {
    if ((st = h->tensor_sub(ctx, a, pred, target)) == GANFW_OK &&
        (st = h->tensor_mul(ctx, b, a, a)) == GANFW_OK &&
        (st = sum_all(ctx, h, b, meta, sum)) == GANFW_OK && grad)
      st = h->tensor_mul_scalar(ctx, grad, a, 2.0f * g);
  } else if (st == GANFW_OK && kind == GANFW_LOSS_L1) {
    if ((st = h->tensor_sub(ctx, a, pred, target)) == GANFW_OK &&
        (st = h->tensor_abs(ctx, b, a)) == GANFW_OK &&
        (st = sum_all(ctx, h, b, meta, sum)) == GANFW_OK && grad &&
        (st = h->tensor_sign(ctx, grad, a)) == GANFW_OK)
      st = h->tensor_mul_scalar(ctx, grad, grad, g);
  } else if (st == GANFW_OK) {
    /* max(x, 0) - x t + log(1 + exp(-|x|)); gradient sigmoid(x) - t */
    if ((st = h->tensor_abs(ctx, a, pred)) == GANFW_OK &&
        (st = h->tensor_mul_scalar(ctx, a, a, -1.0f)) == GANFW_OK &&
        (st = h->tensor_exp(ctx, a, a)) == GANFW_OK &&
        (st = h->tensor_add_scalar(ctx, a, a, 1.0f)) == GANFW_OK &&
        (st = h->tensor_log(ctx, a, a)) == GANFW_OK &&
        (st = h->tensor_clamp(ctx, b, pred, 0.0f, INFINITY)) == GANFW_OK &&
        (st = h->tensor_add(ctx, a, a, b)) == GANFW_OK &&
        (st = h->tensor_mul(ctx, b, pred, target)) == GANFW_OK &&
        (st = h->tensor_sub(ctx, a, a, b)) == GANFW_OK &&
        (st = sum_all(ctx, h, a, meta, sum)) == GANFW_OK && grad) {
      if ((st = h->tensor_mul_scalar(ctx, a, pred, -1.0f)) == GANFW_OK &&
          (st = h->tensor_exp(ctx, a, a)) == GANFW_OK &&
          (st = h->tensor_add_scalar(ctx, a, a, 1.0f)) == GANFW_OK &&
          (st = h->tensor_pow_scalar(ctx, a, a, -1.0f)) == GANFW_OK &&
          (st = h->tensor_sub(ctx, a, a, target)) == GANFW_OK)
        st = h->tensor_mul_scalar(ctx, grad, a, g);
    }
  }
  ganfw_tensor_destroy(a);
  ganfw_tensor_destroy(b);
  return st;
}

/* A non-finite loss or gradient: stop (an error) or, with train.on_nonfinite: skip, no
 * update for the rest of the step. */
static ganfw_status nonfinite(ganfw_program *p, const char *role, const char *what) {
  ganfw_program_stats *out = p->stats;
  char buf[1024];
  ganfw_status st = ganfw_nonfinite_act(p->s, role, what, buf, sizeof buf);
  if (st == GANFW_OK) {
    p->skip_updates = 1;
    if (out && !out->nonfinite)
      snprintf(out->nonfinite_what, sizeof out->nonfinite_what, "%s", buf);
    if (out) out->nonfinite = 1;
  }
  return st;
}

static ganfw_status api_loss(ganfw_step *st, int32_t kind, int32_t reduction, ganfw_tensor *pred,
                             ganfw_tensor *target, double weight, const char *name, double *value,
                             ganfw_tensor **dpred) {
  ganfw_program *p = st->p;
  ganfw_ctx *ctx = p->s->ctx;
  const char *tn = p->s->trainer_name;
  *value = 0;
  if (dpred) *dpred = NULL;
  if (kind < 0 || kind >= GANFW_LOSS_KIND_COUNT || reduction < 0 || reduction >= GANFW_REDUCE_COUNT)
    return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s': loss kind %d, reduction %d unknown", tn,
                           (int)kind, (int)reduction);
  const int32_t by_class = kind == GANFW_LOSS_CROSS_ENTROPY || kind == GANFW_LOSS_KL_SOFT;
  const int64_t want = !pred || !pred->ndim               ? 0
                       : kind == GANFW_LOSS_CROSS_ENTROPY ? pred->shape[0]
                                                          : pred->numel;
  if (!pred || !target || pred->dtype != GANFW_DTYPE_F32 || target->dtype != GANFW_DTYPE_F32 ||
      pred->ndim < 1 || target->numel != want || pred->shape[0] != target->shape[0] ||
      pred->numel < 1 || (by_class && pred->numel / pred->shape[0] < 2))
    return ganfw_error_set(
        GANFW_ERR_PLUGIN,
        "trainer '%s': loss '%s' (%s) needs f32 pred and target %s, got %lld "
        "and %lld elements",
        tn, name ? name : "?", loss_names[kind],
        kind == GANFW_LOSS_CROSS_ENTROPY ? "[N,K] logits (K >= 2) and [N,1] class ids"
        : kind == GANFW_LOSS_KL_SOFT     ? "[N,K] logits of one shape (K >= 2)"
                                         : "of one shape",
        pred ? (long long)pred->numel : 0LL, target ? (long long)target->numel : 0LL);
  const double count =
      reduction == GANFW_REDUCE_MEAN && !by_class ? (double)pred->numel : (double)pred->shape[0];
  ganfw_tensor *grad = NULL;
  if (dpred && !(grad = scratch(ctx, pred, name ? name : "dloss"))) return ganfw_error_code();
  if (grad) grad->category = GANFW_MEM_ACTIVATION;
  double sum = 0;
  const float g = (float)(weight * st->grad_scale / count);
  const int32_t meta = p->s->run->ctx_opt.meta;
  ganfw_status s_ = by_class ? class_terms(kind, meta, pred, target, g, &sum, grad)
                             : loss_terms(ctx, p->host, kind, meta, pred, target, g, &sum, grad);
  if (s_ == GANFW_OK && grad)
    s_ = keep(st, grad, NULL, NULL, GANFW_DTYPE_F32);
  else if (grad)
    ganfw_tensor_destroy(grad);
  if (s_ != GANFW_OK) return s_;
  *value = sum / count;
  if (dpred) *dpred = grad;
  /* data-parallel: the global batch's mean, so that every rank decides on a non-finite
   * loss alike (each loss() is called in the same order on every rank) */
  if (st->mode == GANFW_STEP_TRAIN && ganfw_dp_ranks(p->s) > 1 &&
      (s_ = ganfw_dp_mean(p->s, value, 1, "the trainer's loss")) != GANFW_OK)
    return s_;
  if (st->mode == GANFW_STEP_TRAIN && !isfinite(*value) && !p->s->loss_scaling &&
      !p->s->run->ctx_opt.meta) {
    char what[768], micro[48] = "";
    if (st->micro_count > 1)
      snprintf(micro, sizeof micro, " (micro-batch %d of %d)", (int)st->micro + 1,
               (int)st->micro_count);
    snprintf(what, sizeof what, "trainer '%s': loss '%s' (%s) is %g%s", tn, name ? name : "?",
             loss_names[kind], *value, micro);
    return nonfinite(p, tn, what);
  }
  return GANFW_OK;
}

static ganfw_status api_zero_grad(ganfw_step *st, const char *role) {
  int32_t r = role_index(st->p, role);
  if (r < 0) return no_role(st->p, "zero_grad", role);
  if (st->mode == GANFW_STEP_TRAIN && st->micro == 0) ganfw_net_zero_grad(st->p->s->nets[r].net);
  return GANFW_OK;
}

/* The strategies' after_backward (unscale, skip on inf), the non-finite check, clipping,
 * the update. */
static ganfw_status update(ganfw_program *p, int32_t r) {
  ganfw_session *s = p->s;
  ganfw_session_optim *o = &s->optim[s->nets[r].optim];
  const char *role = s->nets[r].role;
  int32_t skip = 0, bad = 0;
  char found_by[512] = "";
  for (int32_t i = 0; i < s->n_memory && !skip; i++) {
    const ganfw_session_memory *m = &s->memory[i];
    if (!m->vt->after_backward) continue;
    /* a trainer's step has one loss scale: the strategies' first optimizer's */
    ganfw_status st = m->vt->after_backward(m->self, 0, o->params, o->n_params, &skip);
    if (st == GANFW_ERR_NUMERIC) {
      snprintf(found_by, sizeof found_by, "memory strategy '%s': %s", m->name,
               ganfw_error_message());
      ganfw_error_clear();
      bad = 1;
      break;
    }
    if (st != GANFW_OK) return ganfw_error_wrap(st, "memory strategy '%s'", m->name);
  }
  if (skip) {
    if (p->stats) p->stats->skipped++;
    return GANFW_OK;
  }
  if (!bad && !s->loss_scaling && !s->run->ctx_opt.meta) {
    ganfw_status st = ganfw_grad_list_nonfinite(s->ctx, &p->grads[r], &bad);
    if (st != GANFW_OK) return st;
  }
  if (bad) {
    char what[1024];
    ganfw_nonfinite_grad_what(o->net, role, "trainer's loss", NAN, found_by, what, sizeof what);
    return nonfinite(p, role, what);
  }
  if (s->train.clip_grad_norm[r] > 0) {
    double norm = 0;
    ganfw_status st = ganfw_clip_grad_norm(s, s->nets[r].optim, s->train.clip_grad_norm[r], &norm);
    if (st != GANFW_OK) return st;
    if (p->stats) p->stats->grad_norm[r] = norm;
  }
  ganfw_status st = o->vt->step(o->self, o->lr);
  if (st != GANFW_OK) return ganfw_error_wrap(st, "optimizer step of the %s", role);
  p->stepped[r] = 1;
  if (s->ema && s->ema->net == r) /* train.ema */
    st = ganfw_ema_update(s->ema, s->ctx->be, p->st->step_index + 1);
  ganfw_net_zero_grad(o->net);
  return st;
}

/* train.update_every: net r updates in step `step_index` (every one when the planner asks
 * for a step that runs every phase). */
static int32_t role_due(const ganfw_program *p, int32_t r, int64_t step_index) {
  const int64_t n = p->s->train.update_every[r];
  return p->all_due || n <= 1 || (step_index + 1) % n == 0;
}

static int32_t api_due(ganfw_step *st, const char *role) {
  ganfw_program *p = st->p;
  const int32_t r = role_index(p, role);
  if (r < 0 || st->mode != GANFW_STEP_TRAIN || p->s->nets[r].frozen) return 0;
  return role_due(p, r, st->step_index);
}

static ganfw_status api_optimizer_step(ganfw_step *st, const char *role) {
  ganfw_program *p = st->p;
  int32_t r = role_index(p, role);
  if (r < 0) return no_role(p, "optimizer_step", role);
  if (st->mode != GANFW_STEP_TRAIN)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s': optimizer_step('%s') outside a training step",
                           p->s->trainer_name, role);
  if (p->s->nets[r].frozen)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s': optimizer_step('%s'): the %s is frozen and has no "
                           "optimizer",
                           p->s->trainer_name, role, role);
  if (!role_due(p, r, st->step_index)) return GANFW_OK; /* train.update_every */
  if (st->micro < st->micro_count - 1) return GANFW_OK; /* accumulate: the last one steps */
  if (!p->backward_params[r])
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s' steps the optimizer of the %s, but no backward with "
                           "GANFW_GRAD_PARAMS reached the %s in this step: call backward() on "
                           "its output first",
                           p->s->trainer_name, role, role);
  if (p->skip_updates) return GANFW_OK;
  /* data-parallel: the sum of the ranks' gradients (each rank's carry 1/ranks) */
  ganfw_status s_ = ganfw_dp_reduce(p->s, p->s->nets[r].optim);
  if (s_ != GANFW_OK) return s_;
  const int32_t pass = ganfw_alloc_set_pass(p->s->ctx->alloc, GANFW_PASS_OPTIMIZER);
  s_ = update(p, r);
  ganfw_alloc_set_pass(p->s->ctx->alloc, pass);
  return s_;
}

static ganfw_status api_report(ganfw_step *st, const char *name, double value) {
  ganfw_program *p = st->p;
  for (int32_t i = 0; name && i < p->n_scalar; i++)
    if (strcmp(p->scalar[i], name) == 0) {
      st->sum[i] += value;
      st->count[i]++;
      return GANFW_OK;
    }
  return ganfw_error_set(GANFW_ERR_PLUGIN,
                         "trainer '%s' reports '%s', which is not among the scalars its "
                         "scalar() declares",
                         p->s->trainer_name, name ? name : "(null)");
}

static ganfw_status new_tensor(ganfw_step *st, int32_t ndim, const int64_t *shape, const char *name,
                               int32_t category, ganfw_tensor **out) {
  *out = NULL;
  if (ndim < 1 || ndim > GANFW_MAX_DIMS || !shape)
    return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s': a tensor of %d dims",
                           st->p->s->trainer_name, (int)ndim);
  ganfw_tensor *t = ganfw_tensor_create(st->p->s->ctx, GANFW_DTYPE_F32, ndim, shape, category,
                                        name ? name : "trainer");
  if (!t) return ganfw_error_code();
  ganfw_status s_ = keep(st, t, NULL, NULL, GANFW_DTYPE_F32);
  if (s_ == GANFW_OK) *out = t;
  return s_;
}

/* Data-parallel: noise with a row per image of the micro-batch is drawn for the global
 * micro-batch, as one process draws it, and this rank takes its rows (those its loader
 * gave it); other noise is drawn whole on every rank alike. */
static ganfw_status rank_rows_normal(ganfw_step *st, ganfw_tensor *out) {
  ganfw_session *s = st->p->s;
  const int64_t ranks = ganfw_dp_ranks(s), rows = out->shape[0];
  int64_t shape[GANFW_MAX_DIMS];
  memcpy(shape, out->shape, sizeof(int64_t) * (size_t)out->ndim);
  shape[0] = rows * ranks;
  ganfw_tensor *all =
      ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, out->ndim, shape, GANFW_MEM_ACTIVATION, "noise");
  if (!all) return ganfw_error_code();
  ganfw_status s_ = st->p->host->rng_normal(s->ctx, all, 0.0f, 1.0f);
  if (s_ == GANFW_OK)
    s_ = s->ctx->be->vt->copy_d2d(s->ctx->be, out->data,
                                  (const char *)all->data + s->dist->rank * out->nbytes,
                                  (size_t)out->nbytes);
  ganfw_tensor_destroy(all);
  return s_;
}

static ganfw_status api_normal(ganfw_step *st, int32_t ndim, const int64_t *shape,
                               ganfw_tensor **out) {
  ganfw_status s_ = new_tensor(st, ndim, shape, "noise", GANFW_MEM_ACTIVATION, out);
  if (s_ != GANFW_OK) return s_;
  ganfw_ctx *ctx = st->p->s->ctx;
  const ganfw_tensor *images = st->input[GANFW_INPUT_IMAGES];
  if (st->mode == GANFW_STEP_TRAIN && ganfw_dp_ranks(st->p->s) > 1 && images &&
      shape[0] == images->shape[0])
    return rank_rows_normal(st, *out);
  if (st->mode == GANFW_STEP_TRAIN) return st->p->host->rng_normal(ctx, *out, 0.0f, 1.0f);
  /* a stream of its own, as the GAN's fixed noise: the same grid every time */
  const uint64_t fixed_stream = 0x9e3779b97f4a7c15ull;
  st->noise_offset += (uint64_t)(*out)->numel;
  return ganfw_be_rng_normal(ctx->be, (*out)->numel, ctx->seed ^ fixed_stream,
                             st->noise_offset - (uint64_t)(*out)->numel, 0.0f, 1.0f, (*out)->data);
}

static ganfw_status api_tensor(ganfw_step *st, int32_t ndim, const int64_t *shape, const char *name,
                               ganfw_tensor **out) {
  return new_tensor(st, ndim, shape, name, GANFW_MEM_WORKSPACE, out);
}

static const ganfw_step_api step_api = {
    .struct_size = sizeof(ganfw_step_api),
    .net = api_net,
    .input = api_input,
    .mode = api_mode,
    .step_index = api_step_index,
    .grad_scale = api_grad_scale,
    .phase = api_phase,
    .forward = api_forward,
    .backward = api_backward,
    .release = api_release,
    .loss = api_loss,
    .zero_grad = api_zero_grad,
    .optimizer_step = api_optimizer_step,
    .report = api_report,
    .normal = api_normal,
    .tensor = api_tensor,
    .due = api_due,
};

const ganfw_step_api *ganfw_step_api_table(void) {
  return &step_api;
}

/* --- the program ------------------------------------------------------------------- */

ganfw_status ganfw_program_create(ganfw_session *s, ganfw_program **out) {
  *out = NULL;
  if (s->family != GANFW_MODEL_NETS || !s->trainer_vt)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "the session has no trainer plugin");
  ganfw_program *p = calloc(1, sizeof *p);
  if (!p) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  p->s = s;
  p->host = ganfw_host_table();
  const char *name = NULL;
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; st == GANFW_OK && s->trainer_vt->scalar(s->trainer, i, &name); i++) {
    if (i >= GANFW_PROGRAM_MAX_SCALARS || !name || !*name || strchr(name, ',')) {
      st = ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s': scalar %d is unnamed, has a comma, or is past the "
                           "%d a trainer may report",
                           s->trainer_name, (int)i, GANFW_PROGRAM_MAX_SCALARS);
      break;
    }
    p->scalar[p->n_scalar++] = name;
  }
  for (int32_t r = 0; st == GANFW_OK && r < s->n_nets; r++)
    if (s->nets[r].frozen && s->train.update_every[r] > 1)
      st = ganfw_error_set(
          GANFW_ERR_CONFIG,
          "%s: train.update_every.%s: the %s is frozen and never updates; remove the entry",
          ganfw_cfg_where(ganfw_cfg_child(
              ganfw_cfg_child(ganfw_cfg_section(ganfw_config_root(s->run->config), "train"),
                              "update_every"),
              s->nets[r].role)),
          s->nets[r].role, s->nets[r].role);
  for (int32_t r = 0; st == GANFW_OK && r < s->n_nets; r++)
    if (s->nets[r].optim >= 0) st = ganfw_grad_list_init(&p->grads[r], &s->optim[s->nets[r].optim]);
  if (st != GANFW_OK) {
    ganfw_program_destroy(p);
    return st;
  }
  *out = p;
  return GANFW_OK;
}

void ganfw_program_destroy(ganfw_program *p) {
  if (!p) return;
  ganfw_loader_destroy(p->other_loader);
  free(p->other_host);
  ganfw_tensor_destroy(p->other_first);
  for (int32_t r = 0; r < GANFW_MAX_NETS; r++) {
    ganfw_grad_list_free(&p->grads[r]);
    ganfw_net_stats_destroy(p->bn[r]);
  }
  free(p);
}

void ganfw_program_every_phase(ganfw_program *p) {
  p->all_due = 1;
}

ganfw_session *ganfw_program_session(const ganfw_program *p) {
  return p->s;
}

int32_t ganfw_program_scalar_count(const ganfw_program *p) {
  return p->n_scalar;
}

const char *ganfw_program_scalar_name(const ganfw_program *p, int32_t i) {
  return i >= 0 && i < p->n_scalar ? p->scalar[i] : NULL;
}

void ganfw_program_set_phase_hook(ganfw_program *p, ganfw_phase_hook hook, void *user) {
  p->hook = hook;
  p->hook_user = user;
}

int32_t ganfw_program_phase_count(const ganfw_program *p) {
  return p->n_phase;
}

const char *ganfw_program_phase_name(const ganfw_program *p, int32_t phase) {
  return phase >= 0 && phase < p->n_phase ? p->phase[phase] : "step";
}

/* Rows [k*m, (k+1)*m) of t, or t itself (retained) for a single micro-batch. */
static ganfw_tensor *micro_rows(ganfw_tensor *t, int64_t k, int64_t m, int32_t count) {
  if (!t) return NULL;
  if (count == 1) return ganfw_tensor_retain(t);
  return ganfw_tensor_rows(t, k * m, m, t->name);
}

/* The loss scale of the step: the product of every strategy's factor for optimizer 0. */
static double loss_scale(const ganfw_session *s) {
  double scale = 1.0;
  for (int32_t i = 0; i < s->n_memory; i++)
    if (s->memory[i].vt->loss_scale) scale *= s->memory[i].vt->loss_scale(s->memory[i].self, 0);
  return scale;
}

/* Runs one call of the trainer (fn: step, evaluate) on st, then releases what it holds. */
static ganfw_status call(ganfw_program *p, ganfw_step *st,
                         ganfw_status (*fn)(void *self, ganfw_step *st)) {
  p->st = st;
  ganfw_status s_ = fn(p->s->trainer, st);
  if (s_ != GANFW_OK && !ganfw_error_message()[0])
    s_ = ganfw_error_set(s_, "trainer '%s' failed without a message", p->s->trainer_name);
  else if (s_ != GANFW_OK)
    s_ = ganfw_error_wrap(s_, "trainer '%s'", p->s->trainer_name);
  release_all(st);
  p->st = NULL;
  return s_;
}

static void take_scalars(const ganfw_program *p, const ganfw_step *st, double weight, double *sum,
                         double *wsum) {
  for (int32_t i = 0; i < p->n_scalar; i++)
    if (st->count[i] > 0) {
      sum[i] += weight * st->sum[i] / st->count[i];
      wsum[i] += weight;
    }
}

/* The seed of data.pair's holes and data.other's order, apart from the main data's. */
static uint64_t side_seed(const ganfw_session *s, uint64_t salt) {
  return s->ctx->seed ^ salt;
}

/* data.pair's inputs of the images x (their host copy when the caller has one, else NULL):
 * *out a new f32 tensor of x's shape, NULL without data.pair. Holes are placed by (epoch,
 * index0 + row), see ganfw_pair_make. Only the shape on the meta backend. */
static ganfw_status make_pair(ganfw_program *p, ganfw_tensor *x, const float *host_x, int64_t epoch,
                              int64_t index0, ganfw_tensor **out) {
  ganfw_session *s = p->s;
  *out = NULL;
  if (s->pair.kind == GANFW_PAIR_NONE) return GANFW_OK;
  ganfw_tensor *t =
      ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, x->ndim, x->shape, GANFW_MEM_DATA, "pair");
  if (!t) return ganfw_error_code();
  if (s->run->ctx_opt.meta) {
    *out = t;
    return GANFW_OK;
  }
  float *in = host_x ? NULL : malloc((size_t)x->nbytes), *made = malloc((size_t)x->nbytes);
  ganfw_status st =
      (in || host_x) && made ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK && !host_x) st = ganfw_tensor_to_host(x, in, x->nbytes);
  if (st == GANFW_OK) {
    ganfw_pair_make(&s->pair, &s->transform, host_x ? host_x : in, x->shape[0],
                    (int32_t)x->shape[1], (int32_t)x->shape[2], (int32_t)x->shape[3],
                    side_seed(s, 0x7061697275ull), epoch, index0, made);
    st = ganfw_tensor_from_host(t, made, t->nbytes);
  }
  free(in);
  free(made);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return st;
  }
  *out = t;
  return GANFW_OK;
}

/* data.other's batch of step `step_index`: n images of the second set, shuffled per its own
 * epoch, at the place the step index says (so a resumed run draws what the first would
 * have). *out is a new tensor, NULL without data.other; only the shape on the meta
 * backend. */
static ganfw_status other_batch(ganfw_program *p, int64_t n, int64_t step_index,
                                ganfw_tensor **out) {
  ganfw_session *s = p->s;
  *out = NULL;
  if (!s->other && !s->other_kind) return GANFW_OK;
  const ganfw_data_info *di = &s->data_info;
  const int64_t shape[4] = {n, di->channels, di->height, di->width};
  ganfw_tensor *t = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "other");
  if (!t) return ganfw_error_code();
  if (s->run->ctx_opt.meta || !s->other) {
    *out = t;
    return GANFW_OK;
  }
  ganfw_status st = GANFW_OK;
  if (!p->other_loader || p->other_rows != n) {
    ganfw_loader_destroy(p->other_loader);
    free(p->other_host);
    p->other_loader = NULL;
    p->other_rows = n;
    ganfw_loader_config lc; /* data-parallel: this rank's rows of the global batch */
    ganfw_dp_loader_config(s, &lc);
    lc.batch_size = (int32_t)(n * ganfw_dp_ranks(s));
    lc.seed = side_seed(s, 0x6f74686572ull);
    lc.shuffle = 1;
    lc.drop_last = 1;
    p->other_host = malloc((size_t)t->nbytes);
    st = p->other_host ? ganfw_loader_create(s->other, &lc, &p->other_loader)
                       : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  if (st == GANFW_OK) {
    const int64_t per_epoch = ganfw_loader_batches_per_epoch(p->other_loader);
    const int64_t global = n * ganfw_dp_ranks(s);
    const int64_t epoch = step_index / per_epoch, offset = (step_index % per_epoch) * global;
    int64_t at_epoch, at_offset;
    ganfw_loader_position(p->other_loader, &at_epoch, &at_offset);
    if (at_epoch != epoch || at_offset != offset)
      st = ganfw_loader_seek(p->other_loader, epoch, offset);
  }
  if (st == GANFW_OK) st = ganfw_loader_next(p->other_loader, p->other_host, NULL, NULL);
  if (st == GANFW_OK) st = ganfw_tensor_from_host(t, p->other_host, t->nbytes);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return ganfw_error_wrap(st, "data.other (%s)", ganfw_dataset_name(s->other));
  }
  *out = t;
  return GANFW_OK;
}

/* sample(): data.other's first n images (fewer when it has fewer), in order, the same for
 * every grid; borrowed from the program. NULL without data.other. */
static ganfw_status other_first(ganfw_program *p, int64_t n, ganfw_tensor **out) {
  ganfw_session *s = p->s;
  *out = NULL;
  if (!s->other && !s->other_kind) return GANFW_OK;
  if (s->other && n > ganfw_dataset_size(s->other)) n = ganfw_dataset_size(s->other);
  if (p->other_first && p->other_first->shape[0] == n) {
    *out = p->other_first;
    return GANFW_OK;
  }
  ganfw_tensor_destroy(p->other_first);
  p->other_first = NULL;
  const ganfw_data_info *di = &s->data_info;
  const int64_t shape[4] = {n, di->channels, di->height, di->width};
  ganfw_tensor *t =
      ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "sample.other");
  if (!t) return ganfw_error_code();
  ganfw_status st = GANFW_OK;
  if (s->other && !s->run->ctx_opt.meta) {
    ganfw_loader_config lc = {.batch_size = (int32_t)n, .seed = s->ctx->seed, .workers = 1};
    ganfw_loader *ld = NULL;
    float *host = malloc((size_t)t->nbytes);
    st = host ? ganfw_loader_create(s->other, &lc, &ld)
              : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    if (st == GANFW_OK) st = ganfw_loader_next(ld, host, NULL, NULL);
    if (st == GANFW_OK) st = ganfw_tensor_from_host(t, host, t->nbytes);
    ganfw_loader_destroy(ld);
    free(host);
  }
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return ganfw_error_wrap(st, "data.other (%s)", ganfw_dataset_name(s->other));
  }
  *out = p->other_first = t;
  return GANFW_OK;
}

ganfw_status ganfw_program_step(ganfw_program *p, ganfw_tensor *x, ganfw_tensor *labels,
                                int64_t step_index, ganfw_program_stats *out) {
  memset(out, 0, sizeof *out);
  ganfw_session *s = p->s;
  const int32_t M = s->exec.micro_batches;
  const int64_t N = x->shape[0];
  if (N < 1 || N % M != 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "trainer step: batch %lld, %d micro-batches",
                           (long long)N, (int)M);
  const int64_t m = N / M;
  memset(p->backward_params, 0, sizeof p->backward_params);
  memset(p->stepped, 0, sizeof p->stepped);
  p->skip_updates = 0;
  p->stats = out;
  p->cur_phase = 0;
  ganfw_status st = GANFW_OK;
  for (int32_t r = 0; r < s->n_nets && st == GANFW_OK; r++) {
    if (s->nets[r].frozen) continue;
    if (s->train.on_nonfinite == GANFW_NONFINITE_SKIP)
      st = ganfw_net_stats_save(s->nets[r].net, &p->bn[r]);
    ganfw_net_zero_grad(s->nets[r].net);
  }
  double sum[GANFW_PROGRAM_MAX_SCALARS] = {0}, wsum[GANFW_PROGRAM_MAX_SCALARS] = {0};
  ganfw_step step = {.p = p,
                     .mode = GANFW_STEP_TRAIN,
                     .step_index = step_index,
                     .micro_count = M,
                     .grad_scale = loss_scale(s) / M / ganfw_dp_ranks(s)};
  ganfw_tensor *pair = NULL, *other = NULL;
  /* data-parallel: holes placed by this rank's rows' place in the global batch */
  const int64_t rank = ganfw_dp_ranks(s) > 1 ? s->dist->rank : 0;
  if (st == GANFW_OK) st = make_pair(p, x, NULL, step_index, rank * N, &pair);
  if (st == GANFW_OK) st = other_batch(p, N, step_index, &other);
  for (int32_t k = 0; k < M && st == GANFW_OK; k++) {
    ganfw_tensor *xk = micro_rows(x, k, m, M), *yk = micro_rows(labels, k, m, M),
                 *pk = micro_rows(pair, k, m, M), *ok = micro_rows(other, k, m, M);
    step.micro = k;
    step.input[GANFW_INPUT_IMAGES] = xk;
    step.input[GANFW_INPUT_LABELS] = yk;
    step.input[GANFW_INPUT_PAIR] = pk;
    step.input[GANFW_INPUT_OTHER] = ok;
    memset(step.sum, 0, sizeof step.sum);
    memset(step.count, 0, sizeof step.count);
    st = xk && (yk || !labels) && (pk || !pair) && (ok || !other)
             ? call(p, &step, s->trainer_vt->step)
             : ganfw_error_code();
    take_scalars(p, &step, 1.0, sum, wsum);
    ganfw_tensor_destroy(xk);
    ganfw_tensor_destroy(yk);
    ganfw_tensor_destroy(pk);
    ganfw_tensor_destroy(ok);
  }
  ganfw_tensor_destroy(pair);
  ganfw_tensor_destroy(other);
  free(step.own);
  for (int32_t i = 0; i < p->n_scalar; i++) {
    out->reported[i] = wsum[i] > 0;
    out->value[i] = wsum[i] > 0 ? sum[i] / wsum[i] : 0;
  }
  /* data-parallel: the global batch's means (the losses are already) */
  if (st == GANFW_OK && p->n_scalar > 0 && ganfw_dp_ranks(s) > 1)
    st = ganfw_dp_mean(s, out->value, p->n_scalar, "the trainer's scalars");
  int32_t changed = 0, due = 0;
  for (int32_t r = 0; r < s->n_nets; r++) {
    changed |= p->backward_params[r];
    due |= !s->nets[r].frozen && role_due(p, r, step_index);
  }
  p->all_due = 0;
  if (st == GANFW_OK && !changed && due)
    st = ganfw_error_set(GANFW_ERR_PLUGIN,
                         "trainer '%s' ran a step that changes no weights: no backward with "
                         "GANFW_GRAD_PARAMS reached a trained net (it computed its losses but "
                         "never called backward(), or only into frozen nets)",
                         s->trainer_name);
  /* a skipped update leaves the running statistics of the nets it skipped as they were */
  for (int32_t r = 0; r < s->n_nets && st == GANFW_OK && p->skip_updates; r++)
    if (!s->nets[r].frozen && !p->stepped[r])
      st = ganfw_net_stats_restore(s->nets[r].net, p->bn[r]);
  for (int32_t i = 0; i < s->n_memory && st == GANFW_OK; i++)
    if (s->memory[i].vt->step_end) st = s->memory[i].vt->step_end(s->memory[i].self);
  p->stats = NULL;
  return st;
}

/* Every net in eval mode (1) or back as training has them (0). */
static void eval_mode(ganfw_session *s, int32_t on) {
  for (int32_t r = 0; r < s->n_nets; r++) {
    const int32_t train = !on && !s->nets[r].frozen;
    ganfw_net_set_train(s->nets[r].net, train, train);
  }
}

static ganfw_status sample_call(void *self, ganfw_step *st) {
  ganfw_program *p = st->p;
  ganfw_tensor *images = NULL;
  int64_t nrow = 0;
  ganfw_status s_ = p->s->trainer_vt->sample(self, st, &images, &nrow);
  if (s_ != GANFW_OK) return s_;
  owned *o = images ? find(st, images) : NULL;
  if (!o || images->ndim != 4 || nrow < 1)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "trainer '%s': sample() must return a [K,C,H,W] tensor the step made "
                           "and a row length >= 1",
                           p->s->trainer_name);
  float *host = malloc((size_t)images->nbytes);
  if (!host) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  s_ = p->s->run->ctx_opt.meta ? (memset(host, 0, (size_t)images->nbytes), GANFW_OK)
                               : ganfw_tensor_to_host(images, host, images->nbytes);
  if (s_ != GANFW_OK) {
    free(host);
    return s_;
  }
  st->sample_host = host;
  st->sample_nrow = nrow;
  memcpy(st->sample_shape, images->shape, sizeof st->sample_shape);
  return GANFW_OK;
}

ganfw_status ganfw_program_sample(ganfw_program *p, ganfw_tensor *x, ganfw_tensor *labels,
                                  float **host, int64_t shape[4], int64_t *nrow) {
  *host = NULL;
  ganfw_session *s = p->s;
  if (!s->trainer_vt->sample)
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED, "trainer '%s' draws no samples (no sample())",
                           s->trainer_name);
  ganfw_step step = {.p = p, .mode = GANFW_STEP_SAMPLE, .micro_count = 1, .grad_scale = 1.0};
  step.input[GANFW_INPUT_IMAGES] = x;
  step.input[GANFW_INPUT_LABELS] = labels;
  /* the grid's pairs are those of the first images; data.other's, its first images */
  ganfw_tensor *pair = NULL, *other = NULL;
  ganfw_status st = make_pair(p, x, NULL, -1, 0, &pair);
  if (st == GANFW_OK) st = other_first(p, x->shape[0], &other);
  step.input[GANFW_INPUT_PAIR] = pair;
  step.input[GANFW_INPUT_OTHER] = other;
  eval_mode(s, 1);
  if (st == GANFW_OK) st = call(p, &step, sample_call);
  eval_mode(s, 0);
  ganfw_tensor_destroy(pair);
  free(step.own);
  if (st != GANFW_OK) {
    free(step.sample_host);
    return st;
  }
  *nrow = step.sample_nrow;
  memcpy(shape, step.sample_shape, sizeof step.sample_shape);
  *host = step.sample_host;
  return GANFW_OK;
}

int32_t ganfw_program_evaluates(const ganfw_program *p) {
  return p->s->trainer_vt->evaluate != NULL;
}

ganfw_status ganfw_program_evaluate(ganfw_program *p, const ganfw_dataset *ds, int64_t batch,
                                    ganfw_program_stats *out, int64_t *images,
                                    int64_t *peak_activation) {
  memset(out, 0, sizeof *out);
  *images = 0;
  *peak_activation = 0;
  ganfw_session *s = p->s;
  if (!s->trainer_vt->evaluate)
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED, "trainer '%s' does not evaluate (no evaluate())",
                           s->trainer_name);
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  if (c != s->data_info.channels || h != s->data_info.height || w != s->data_info.width)
    return ganfw_error_set(
        GANFW_ERR_CONFIG, "%s gives %dx%dx%d images; the nets were built for %dx%dx%d",
        ganfw_dataset_name(ds), (int)c, (int)h, (int)w, (int)s->data_info.channels,
        (int)s->data_info.height, (int)s->data_info.width);
  if (batch > ganfw_dataset_size(ds)) batch = ganfw_dataset_size(ds);
  ganfw_loader_config lc = {.batch_size = (int32_t)batch,
                            .seed = s->ctx->seed,
                            .shuffle = 0,
                            .drop_last = 0,
                            .prefetch = 1,
                            .workers = s->loader_cfg.workers};
  ganfw_loader *loader = NULL;
  int64_t xs[4] = {batch, c, h, w}, ls[2] = {batch, 1};
  ganfw_tensor *x = NULL, *lab = NULL;
  float *hx = malloc((size_t)(batch * c * h * w) * sizeof *hx), *hl = NULL;
  int32_t *hy = malloc((size_t)batch * sizeof *hy);
  hl = malloc((size_t)batch * sizeof *hl);
  ganfw_status st =
      hx && hy && hl ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK) st = ganfw_loader_create(ds, &lc, &loader);
  if (st == GANFW_OK) {
    x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "eval.batch");
    lab = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 2, ls, GANFW_MEM_DATA, "eval.labels");
    if (!x || !lab) st = ganfw_error_code();
  }
  const int32_t labelled = ganfw_dataset_num_classes(ds) > 0;
  double sum[GANFW_PROGRAM_MAX_SCALARS] = {0}, wsum[GANFW_PROGRAM_MAX_SCALARS] = {0};
  eval_mode(s, 1);
  ganfw_alloc_reset_peak(s->ctx->alloc);
  const int32_t stage = ganfw_alloc_set_stage(s->ctx->alloc, GANFW_STAGE_EVAL);
  ganfw_step step = {.p = p, .mode = GANFW_STEP_EVALUATE, .micro_count = 1, .grad_scale = 1.0};
  for (int64_t b = 0, nb = st == GANFW_OK ? ganfw_loader_batches_per_epoch(loader) : 0;
       b < nb && st == GANFW_OK; b++) {
    ganfw_batch_info bi;
    if ((st = ganfw_loader_next(loader, hx, labelled ? hy : NULL, &bi)) != GANFW_OK) break;
    ganfw_tensor *xb = ganfw_tensor_rows(x, 0, bi.n, "eval.batch");
    ganfw_tensor *lb = ganfw_tensor_rows(lab, 0, bi.n, "eval.labels");
    for (int64_t i = 0; labelled && i < bi.n; i++) hl[i] = (float)hy[i];
    st = xb && lb ? ganfw_tensor_from_host(xb, hx, xb->nbytes) : ganfw_error_code();
    if (st == GANFW_OK && labelled) st = ganfw_tensor_from_host(lb, hl, lb->nbytes);
    ganfw_tensor *pb = NULL;
    if (st == GANFW_OK) st = make_pair(p, xb, hx, -1, bi.offset, &pb);
    step.input[GANFW_INPUT_IMAGES] = xb;
    step.input[GANFW_INPUT_LABELS] = labelled ? lb : NULL;
    step.input[GANFW_INPUT_PAIR] = pb;
    memset(step.sum, 0, sizeof step.sum);
    memset(step.count, 0, sizeof step.count);
    if (st == GANFW_OK) st = call(p, &step, s->trainer_vt->evaluate);
    take_scalars(p, &step, (double)bi.n, sum, wsum);
    *images += bi.n;
    ganfw_tensor_destroy(xb);
    ganfw_tensor_destroy(lb);
    ganfw_tensor_destroy(pb);
  }
  free(step.own);
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  *peak_activation = as.category[GANFW_MEM_ACTIVATION].peak;
  ganfw_alloc_set_stage(s->ctx->alloc, stage);
  eval_mode(s, 0);
  for (int32_t i = 0; i < p->n_scalar; i++) {
    out->reported[i] = wsum[i] > 0;
    out->value[i] = wsum[i] > 0 ? sum[i] / wsum[i] : 0;
  }
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(lab);
  ganfw_loader_destroy(loader);
  free(hx);
  free(hy);
  free(hl);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "evaluating on %s", ganfw_dataset_name(ds));
}
