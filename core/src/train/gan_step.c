/* One DC-GAN training step (see trainer.h), shaped like PyTorch's DC-GAN example with
 * BCE-with-logits: D learns from a real batch and from G(z) made under no-grad; G then
 * learns through D, whose parameter gradients are not computed. Logits and losses are
 * tiny ([N] and one float) and are read back to the host for the metrics. With an
 * objective plugin (objective.plugin) the losses and their gradients come from it, on the
 * host, in place of the built-in BCE on the device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "backend/ops.h"
#include "runtime/alloc.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "train/dp.h"
#include "train/ema.h"
#include "train/nonfinite.h"
#include "train/penalty.h"
#include "train/sib.h"
#include "train/trainer.h"

struct ganfw_gan {
  ganfw_session *s;
  ganfw_ctx *ctx;
  ganfw_tape *tape_real, *tape_fake, *tape_g, *tape_dg;
  ganfw_tape *tape_gp; /* D on a penalty's input (objective.gp, r1, r2): every node kept */
  int64_t n;           /* batch size the targets were made for */
  ganfw_tensor *real_t, *fake_t, *ones; /* BCE targets [N] */
  ganfw_tensor *loss;                   /* one float */
  float *host_logits;                   /* [N] */
  float *host_dy;                       /* [N]: an objective plugin's gradient */
  int64_t steps;                        /* ganfw_gan_step calls: G steps every n_critic-th */
  double last_loss_g, last_d_g_z2;      /* of the last G step (shown on D-only steps) */
  double grad_norm[2];                  /* of the last clipped step per optimizer */
  ganfw_tensor *kept_fake;              /* train.reuse_fake: G(z) of the D step, its tape in
                                           tape_g, for the G step of the same step */
  uint64_t kept_rng;                    /* the RNG offset before that forward */
  int32_t *labels;                      /* model.conditional: the batch's classes (host) */
  int64_t n_labels;
  ganfw_grad_list grads[2];  /* [0] G's, [1] D's: one non-finite check a step */
  ganfw_net_stats *stats[2]; /* G's, D's BatchNorm statistics before the step (skip) */
  ganfw_phase_hook hook;     /* the planner's: the D and G halves start */
  int32_t every_penalty;     /* the next step runs r1 and r2 whatever r1_every says */
  int64_t lazy_requests;     /* allocator requests r1 and r2 made when they last ran (-1:
                                not yet): a step between their turns passes over as many
                                of a planned layout's (ganfw_alloc_arena_skip) */
  void *hook_user;
};

static ganfw_status make_targets(ganfw_gan *g, int64_t n) {
  if (g->n == n) return GANFW_OK;
  ganfw_tensor_destroy(g->real_t);
  ganfw_tensor_destroy(g->fake_t);
  ganfw_tensor_destroy(g->ones);
  g->real_t = g->fake_t = g->ones = NULL;
  free(g->host_logits);
  free(g->host_dy);
  g->host_logits = malloc((size_t)n * sizeof(float));
  g->host_dy = malloc((size_t)n * sizeof(float));
  g->n = 0;
  if (!g->host_logits || !g->host_dy) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (g->s->objective_vt) { /* the plugin's losses need no targets on the device */
    g->n = n;
    return GANFW_OK;
  }
  g->real_t = ganfw_tensor_create(g->ctx, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_OTHER, "targets.real");
  g->fake_t = ganfw_tensor_create(g->ctx, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_OTHER, "targets.fake");
  g->ones = ganfw_tensor_create(g->ctx, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_OTHER, "targets.ones");
  if (!g->real_t || !g->fake_t || !g->ones)
    return ganfw_error_code() ? ganfw_error_code()
                              : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_backend *be = g->ctx->be;
  ganfw_status st =
      ganfw_be_fill(be, n, g->real_t->data, (float)(1.0 - g->s->train.label_smoothing));
  if (st == GANFW_OK) st = ganfw_be_fill(be, n, g->fake_t->data, 0.0f);
  if (st == GANFW_OK) st = ganfw_be_fill(be, n, g->ones->data, 1.0f);
  g->n = n;
  return st;
}

ganfw_status ganfw_gan_create(ganfw_session *s, ganfw_gan **out) {
  *out = NULL;
  ganfw_gan *g = calloc(1, sizeof *g);
  if (!g) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  g->s = s;
  g->ctx = s->ctx;
  g->tape_real = ganfw_tape_create(s->discriminator);
  g->tape_fake = ganfw_tape_create(s->discriminator);
  g->tape_dg = ganfw_tape_create(s->discriminator);
  g->tape_g = ganfw_tape_create(s->generator);
  g->tape_gp = ganfw_tape_create(s->discriminator);
  if (g->tape_gp) ganfw_tape_set_full(g->tape_gp, 1);
  g->lazy_requests = -1;
  int64_t one = 1;
  g->loss = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 1, &one, GANFW_MEM_OTHER, "loss");
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < s->n_optim && i < 2 && st == GANFW_OK; i++)
    st = ganfw_grad_list_init(&g->grads[i], &s->optim[i]);
  if (!g->tape_real || !g->tape_fake || !g->tape_dg || !g->tape_g || !g->tape_gp || !g->loss ||
      st) {
    ganfw_gan_destroy(g);
    return ganfw_error_code() ? ganfw_error_code()
                              : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  /* model.conditional: class 0 for every row until the trainer sets the batch's (plan,
   * probes and benchmarks run steps without data) */
  if (s->n_classes) {
    int32_t *zeros = calloc((size_t)s->train.batch_size, sizeof *zeros);
    st = zeros ? ganfw_gan_set_labels(g, zeros, s->train.batch_size)
               : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    free(zeros);
    if (st != GANFW_OK) {
      ganfw_gan_destroy(g);
      return st;
    }
  }
  *out = g;
  return GANFW_OK;
}

void ganfw_gan_destroy(ganfw_gan *g) {
  if (!g) return;
  ganfw_tensor_destroy(g->kept_fake);
  free(g->labels);
  ganfw_tape_destroy(g->tape_real);
  ganfw_tape_destroy(g->tape_fake);
  ganfw_tape_destroy(g->tape_g);
  ganfw_tape_destroy(g->tape_dg);
  ganfw_tape_destroy(g->tape_gp);
  ganfw_tensor_destroy(g->real_t);
  ganfw_tensor_destroy(g->fake_t);
  ganfw_tensor_destroy(g->ones);
  ganfw_tensor_destroy(g->loss);
  free(g->host_logits);
  free(g->host_dy);
  for (int i = 0; i < 2; i++) {
    ganfw_grad_list_free(&g->grads[i]);
    ganfw_net_stats_destroy(g->stats[i]);
  }
  free(g);
}

/* The gradient of the mean BCE-with-logits times dloss wrt the f32 logits lf, as a new
 * tensor in the logits' own dtype (f32 computed, then converted). */
static ganfw_status bce_grad(ganfw_gan *g, ganfw_tensor *lf, int32_t dtype, ganfw_tensor *target,
                             float dloss, ganfw_tensor **dlogits, const char *what) {
  ganfw_backend *be = g->ctx->be;
  *dlogits = NULL;
  ganfw_tensor *d = ganfw_tensor_create(
      g->ctx, GANFW_DTYPE_F32, lf->ndim, lf->shape,
      dtype == GANFW_DTYPE_F32 ? GANFW_MEM_ACTIVATION : GANFW_MEM_WORKSPACE, what);
  if (!d) return ganfw_error_code();
  ganfw_status st =
      ganfw_be_bce_logits_backward(be, lf->numel, lf->data, target->data, dloss, d->data);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(d);
    return st;
  }
  *dlogits = ganfw_tensor_as_dtype(d, dtype, GANFW_MEM_ACTIVATION);
  ganfw_tensor_destroy(d);
  return *dlogits ? GANFW_OK : ganfw_error_code();
}

/* An objective plugin's term `term` of the f32 logits lf (on the host): the loss in *l and,
 * when dlogits is not NULL and the loss is finite or scaled, dloss times its gradient as a
 * new tensor in the logits' own dtype, made as bce_grad makes it. */
static ganfw_status plugin_term(ganfw_gan *g, ganfw_tensor *lf, int32_t dtype, int32_t term,
                                float dloss, float *l, ganfw_tensor **dlogits, const char *what) {
  ganfw_session *s = g->s;
  const int64_t n = lf->numel;
  double value = 0;
  ganfw_status st = s->objective_vt->loss(s->objective, term, n, g->host_logits, &value,
                                          dlogits ? g->host_dy : NULL);
  if (st != GANFW_OK) return ganfw_error_wrap(st, "objective '%s'", s->objective_name);
  *l = (float)value;
  if (!dlogits || (!isfinite(value) && !s->loss_scaling)) return GANFW_OK;
  for (int64_t i = 0; i < n; i++) g->host_dy[i] *= dloss;
  ganfw_tensor *d = ganfw_tensor_create(
      g->ctx, GANFW_DTYPE_F32, lf->ndim, lf->shape,
      dtype == GANFW_DTYPE_F32 ? GANFW_MEM_ACTIVATION : GANFW_MEM_WORKSPACE, what);
  if (!d) return ganfw_error_code();
  st = ganfw_tensor_from_host(d, g->host_dy, n * (int64_t)sizeof(float));
  if (st == GANFW_OK && !(*dlogits = ganfw_tensor_as_dtype(d, dtype, GANFW_MEM_ACTIVATION)))
    st = ganfw_error_code();
  ganfw_tensor_destroy(d);
  return st;
}

/* 1 when a loss of `value` stops or skips the step here: non-finite, no loss scaler. */
static int loss_bad(const ganfw_session *s, double value) {
  return !isfinite(value) && !s->loss_scaling;
}

/* The loss term `term` (GANFW_OBJ_*) of `logits`: the built-in BCE-with-logits against
 * its target, or the objective plugin's. The loss (host), what the log shows of the logits
 * (mean sigmoid for the BCE) and, when dlogits is not NULL, a new gradient tensor of the
 * loss times dloss (left NULL when the loss is non-finite and no strategy scales it). */
static ganfw_status loss_term(ganfw_gan *g, ganfw_tensor *logits, int32_t term, float dloss,
                              double *loss, double *mean_prob, ganfw_tensor **dlogits,
                              const char *what) {
  ganfw_session *s = g->s;
  ganfw_backend *be = g->ctx->be;
  const int64_t n = logits->numel;
  if (n != g->n)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "the discriminator returns %lld values for %lld samples; it must "
                           "return one logit per sample ([N,1] or [N,1,1,1])",
                           (long long)n, (long long)g->n);
  ganfw_tensor *target = term == GANFW_OBJ_D_REAL   ? g->real_t
                         : term == GANFW_OBJ_D_FAKE ? g->fake_t
                                                    : g->ones;
  /* The loss reads f32: logits of a 16-bit compute dtype are converted first. */
  ganfw_tensor *lf = ganfw_tensor_as_dtype(logits, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE);
  if (!lf) return ganfw_error_code();
  float l = 0;
  ganfw_status st = GANFW_OK;
  if (s->objective_vt) {
    st = be->vt->copy_d2h(be, g->host_logits, lf->data, (size_t)n * 4);
    if (st == GANFW_OK) st = plugin_term(g, lf, logits->dtype, term, dloss, &l, dlogits, what);
  } else {
    st = ganfw_be_bce_logits_forward(be, n, lf->data, target->data, g->loss->data);
    if (st == GANFW_OK) st = ganfw_tensor_to_host(g->loss, &l, sizeof l);
    if (st == GANFW_OK) st = be->vt->copy_d2h(be, g->host_logits, lf->data, (size_t)n * 4);
  }
  double v[2] = {l, 0}; /* the loss and what the log shows of the logits */
  if (st == GANFW_OK && s->objective_vt && s->objective_vt->summary) {
    v[1] = s->objective_vt->summary(s->objective, n, g->host_logits);
  } else if (st == GANFW_OK) {
    double p = 0;
    for (int64_t i = 0; i < n; i++)
      p += s->objective_vt ? (double)g->host_logits[i]
                           : 1.0 / (1.0 + exp(-(double)g->host_logits[i]));
    v[1] = p / (double)n;
  }
  /* data-parallel: the global batch's means, so that every rank decides alike below */
  if (st == GANFW_OK) st = ganfw_dp_mean(s, v, 2, "the step's losses");
  /* Without a loss scaler a non-finite loss has no gradient worth computing: the caller
   * stops or skips (train.on_nonfinite). With one, backward runs and the scaler skips. */
  if (st == GANFW_OK && !s->objective_vt && dlogits && !loss_bad(s, v[0]))
    st = bce_grad(g, lf, logits->dtype, target, dloss, dlogits, what);
  ganfw_tensor_destroy(lf);
  if (st != GANFW_OK) return st;
  *loss = v[0];
  *mean_prob = v[1];
  return GANFW_OK;
}

/* D forward with a tape, the loss term `term`, backward into D's parameter gradients
 * (scaled by dloss); no backward when loss_term left no gradient (a non-finite loss). */
static ganfw_status d_learn(ganfw_gan *g, ganfw_tape *tape, ganfw_tensor *x, int32_t term,
                            float dloss, double *loss, double *prob, const char *what) {
  ganfw_net *D = g->s->discriminator;
  ganfw_tensor *logits = NULL, *dlogits = NULL;
  ganfw_status st = ganfw_net_forward(D, x, tape, &logits);
  if (st == GANFW_OK) st = loss_term(g, logits, term, dloss, loss, prob, &dlogits, what);
  if (st == GANFW_OK && dlogits && !loss_bad(g->s, *loss))
    st = ganfw_net_backward(D, tape, dlogits, GANFW_BWD_PARAM_GRAD, NULL);
  ganfw_tape_clear(tape);
  ganfw_tensor_destroy(logits);
  ganfw_tensor_destroy(dlogits);
  return st;
}

/* The loss scale of optimizer `opt`: the product of every strategy's factor. */
static double loss_scale(ganfw_session *s, int32_t opt) {
  double scale = 1.0;
  for (int32_t i = 0; i < s->n_memory; i++)
    if (s->memory[i].vt->loss_scale) scale *= s->memory[i].vt->loss_scale(s->memory[i].self, opt);
  return scale;
}

/* Appends `note` to the step's account of what went non-finite. */
static void note_nonfinite(ganfw_gan_stats *out, const char *note) {
  size_t used = strlen(out->nonfinite);
  snprintf(out->nonfinite + used, sizeof out->nonfinite - used, "%s%s", used ? "; and " : "", note);
}

/* The `role` net's loss `name` of micro-batch k (of M) is `value`, not finite: the checked
 * forwards of hops name the layer; stops (GANFW_ERR_NUMERIC) or notes it for a skip. */
static ganfw_status loss_nonfinite(ganfw_gan *g, const char *role, const char *name, double value,
                                   int32_t k, int32_t M, const ganfw_nonfinite_hop *hops,
                                   int32_t n_hops, ganfw_tensor *x, ganfw_gan_stats *out) {
  char where[768], what[1024], micro[48] = "", note[1024];
  ganfw_dp_local_begin(g->s); /* the checked forwards stop where they like: no collectives */
  ganfw_nonfinite_locate(hops, n_hops, x, where, sizeof where);
  ganfw_dp_local_end(g->s);
  if (M > 1) snprintf(micro, sizeof micro, " (micro-batch %d of %d)", (int)k + 1, (int)M);
  snprintf(what, sizeof what, "the %s's loss %s is %g%s: %s", role, name,
           isnan(value) ? NAN : value, micro, where); /* "nan", never "-nan" */
  ganfw_status st = ganfw_nonfinite_act(g->s, role, what, note, sizeof note);
  if (st == GANFW_OK) note_nonfinite(out, note);
  return st;
}

/* Requests the allocator served so far. */
static int64_t alloc_requests(ganfw_alloc *a) {
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  return st.num_allocs;
}

/* x_hat = fake + eps (real - fake) with eps ~ U(0, 1) per sample from the run's Philox
 * stream (WGAN-GP's interpolates), f32, as a new tensor. Data-parallel: every rank draws the
 * global micro-batch's eps and takes its own rows, so that the ranks together use the eps one
 * process would. */
static ganfw_status interpolate(ganfw_gan *g, ganfw_tensor *real, ganfw_tensor *fake,
                                ganfw_tensor **out) {
  ganfw_ctx *ctx = g->ctx;
  ganfw_backend *be = ctx->be;
  *out = NULL;
  const int64_t n = real->shape[0], inner = real->numel / n;
  const int64_t all = n * ganfw_dp_ranks(g->s), first = n * ganfw_dp_rank(g->s);
  ganfw_tensor *f = ganfw_tensor_as_dtype(fake, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE);
  ganfw_tensor *r = f ? ganfw_tensor_as_dtype(real, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE) : NULL;
  ganfw_tensor *eps =
      r ? ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &all, GANFW_MEM_WORKSPACE, "penalty.eps")
        : NULL;
  ganfw_tensor *x = eps ? ganfw_tensor_create(ctx, GANFW_DTYPE_F32, real->ndim, real->shape,
                                              GANFW_MEM_ACTIVATION, "penalty.x_hat")
                        : NULL;
  ganfw_status st = x ? ganfw_ctx_rng_uniform(ctx, all, eps->data, 0.0f, 1.0f) : ganfw_error_code();
  const float *mine = x ? (const float *)eps->data + first : NULL;
  const ganfw_bcast_shape same = ganfw_bcast_rows(1, real->numel, 0, 0);
  const ganfw_bcast_shape rows = ganfw_bcast_rows(n, inner, 0, 1);
  if (st == GANFW_OK) st = ganfw_be_binary(be, GANFW_BINARY_SUB, &same, x->data, r->data, f->data);
  if (st == GANFW_OK) st = ganfw_be_binary(be, GANFW_BINARY_MUL, &rows, x->data, x->data, mine);
  if (st == GANFW_OK) st = ganfw_be_add(be, real->numel, x->data, x->data, f->data);
  ganfw_tensor_destroy(eps);
  ganfw_tensor_destroy(r);
  ganfw_tensor_destroy(f);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(x);
    return st;
  }
  *out = x;
  return GANFW_OK;
}

/* One penalty on D's input gradient at x (train/penalty.h): D forward with every node kept,
 * its input gradient under the loss scale, the penalty of weight `weight` over the image's
 * channels, and its backward into D's parameter gradients, scaled as the step's losses (1/M
 * per micro-batch, 1/ranks). *value is the penalty (the global batch's mean); no backward
 * when it is not finite and no strategy scales the loss (the caller stops or skips). */
static ganfw_status d_penalty(ganfw_gan *g, ganfw_tensor *x, int32_t kind, double weight, int32_t M,
                              double *value) {
  ganfw_session *s = g->s;
  ganfw_net *D = s->discriminator;
  ganfw_tensor *logits = NULL, *dy = NULL, *gx = NULL, *v = NULL;
  const double scale = loss_scale(s, 1);
  ganfw_status st = ganfw_net_forward(D, x, g->tape_gp, &logits);
  if (st == GANFW_OK) {
    ganfw_tensor *ones = ganfw_tensor_create(g->ctx, GANFW_DTYPE_F32, logits->ndim, logits->shape,
                                             GANFW_MEM_WORKSPACE, "penalty.dy");
    st = ones ? ganfw_be_fill(g->ctx->be, ones->numel, ones->data, (float)scale)
              : ganfw_error_code();
    if (st == GANFW_OK && !(dy = ganfw_tensor_as_dtype(ones, logits->dtype, GANFW_MEM_ACTIVATION)))
      st = ganfw_error_code();
    ganfw_tensor_destroy(ones);
  }
  if (st == GANFW_OK) st = ganfw_net_backward_keep(D, g->tape_gp, dy, &gx);
  if (st == GANFW_OK)
    st = ganfw_penalty_grad(g->ctx, kind, weight, gx, scale, s->data_info.channels,
                            1.0 / M / ganfw_dp_ranks(s), value, &v);
  if (st == GANFW_OK) st = ganfw_dp_mean(s, value, 1, "the step's penalty");
  if (st == GANFW_OK && !loss_bad(s, *value)) st = ganfw_net_backward_of_backward(D, g->tape_gp, v);
  ganfw_tape_clear(g->tape_gp);
  ganfw_tensor_destroy(v);
  ganfw_tensor_destroy(gx);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(logits);
  return st;
}

/* The penalties of micro-batch k on D's inputs xk (real) and fin (fake) that this step has:
 * gp on the interpolates, r1 on the reals, r2 on the fakes (these two on every
 * objective.r1_every-th D step, their weight times r1_every). Adds each penalty / M to out;
 * *bad = 1 on a non-finite one without loss scaling (after loss_nonfinite decided). */
static ganfw_status d_penalties(ganfw_gan *g, ganfw_tensor *xk, ganfw_tensor *fin, int32_t k,
                                int32_t M, int32_t *bad, ganfw_gan_stats *out) {
  ganfw_session *s = g->s;
  if (s->penalty_gp <= 0 && s->penalty_r1 <= 0 && s->penalty_r2 <= 0) return GANFW_OK;
  const int64_t every = s->penalty_every; /* >= 1: the session's default, or the key's range */
  const int32_t lazy_turn = g->steps % every == 0 || g->every_penalty;
  struct {
    int32_t kind;
    double weight;
    double *sum;
    const char *name;
  } p[3] = {{GANFW_PENALTY_GP, s->penalty_gp, &out->gp, "gp"},
            {GANFW_PENALTY_R1, lazy_turn ? s->penalty_r1 * (double)every : 0, &out->r1, "r1"},
            {GANFW_PENALTY_R2, lazy_turn ? s->penalty_r2 * (double)every : 0, &out->r2, "r2"}};
  ganfw_status st = GANFW_OK;
  const int32_t any = p[0].weight > 0 || p[1].weight > 0 || p[2].weight > 0;
  if (any) {
    if (g->hook) g->hook(g->hook_user, 2, "D step, penalty");
    ganfw_alloc_set_stage(g->ctx->alloc, GANFW_STAGE_D_PENALTY);
  }
  const int32_t lazy = s->penalty_r1 > 0 || s->penalty_r2 > 0;
  int64_t requests = 0;
  for (int i = 0; i < 3 && st == GANFW_OK && !*bad; i++) {
    if (i == 1 && lazy && !lazy_turn && g->lazy_requests > 0)
      ganfw_alloc_arena_skip(g->ctx->alloc, g->lazy_requests); /* the plan has them here */
    if (i == 1 && lazy && lazy_turn) requests = alloc_requests(g->ctx->alloc);
    if (p[i].weight <= 0) continue;
    ganfw_tensor *x = NULL;
    if (p[i].kind == GANFW_PENALTY_GP)
      st = interpolate(g, xk, fin, &x);
    else
      x = ganfw_tensor_retain(p[i].kind == GANFW_PENALTY_R1 ? xk : fin);
    const uint64_t rng = g->ctx->rng_offset;
    double value = 0;
    if (st == GANFW_OK) st = d_penalty(g, x, p[i].kind, p[i].weight, M, &value);
    if (st == GANFW_OK && loss_bad(s, value)) {
      *bad = 1;
      char name[32];
      snprintf(name, sizeof name, "%s (penalty)", p[i].name);
      const ganfw_nonfinite_hop hops[] = {{s->discriminator, rng, "the penalty's input"}};
      st = loss_nonfinite(g, "discriminator", name, value, k, M, hops, 1, x, out);
    }
    ganfw_tensor_destroy(x);
    *p[i].sum += value / M;
  }
  if (st == GANFW_OK && !*bad && lazy && lazy_turn)
    g->lazy_requests = alloc_requests(g->ctx->alloc) - requests;
  if (any) {
    if (g->hook) g->hook(g->hook_user, 0, "D step");
    ganfw_alloc_set_stage(g->ctx->alloc, GANFW_STAGE_D_FAKE);
  }
  return st;
}

/* Lets every strategy see optimizer `opt`'s gradients, then steps it unless one of them
 * says to skip (a non-finite gradient under loss scaling). Without a loss scaler the
 * gradients are checked once for NaN or inf first (train.on_nonfinite), as is a strategy's
 * GANFW_ERR_NUMERIC: *nonfinite = 1 when the update is skipped for it. */
static ganfw_status update(ganfw_gan *g, int32_t opt, int32_t *skipped, int32_t *nonfinite,
                           ganfw_gan_stats *out) {
  ganfw_session *s = g->s;
  ganfw_session_optim *o = &s->optim[opt];
  int32_t skip = 0, bad = 0;
  char found_by[512] = "", what[1024], note[1024];
  for (int32_t i = 0; i < s->n_memory && !skip; i++) {
    const ganfw_session_memory *m = &s->memory[i];
    if (!m->vt->after_backward) continue;
    ganfw_status st = m->vt->after_backward(m->self, opt, o->params, o->n_params, &skip);
    if (st == GANFW_ERR_NUMERIC) {
      snprintf(found_by, sizeof found_by, "memory strategy '%s': %s", m->name,
               ganfw_error_message());
      ganfw_error_clear();
      bad = 1;
      break;
    }
    if (st != GANFW_OK) return ganfw_error_wrap(st, "memory strategy '%s'", m->name);
  }
  *skipped = skip;
  if (skip) return GANFW_OK;
  if (!bad && !s->loss_scaling) {
    ganfw_status st = ganfw_grad_list_nonfinite(g->ctx, &g->grads[opt], &bad);
    if (st != GANFW_OK) return st;
  }
  if (bad) {
    ganfw_nonfinite_grad_what(o->net, o->role, opt == 0 ? "loss loss_g" : "loss loss_d",
                              opt == 0 ? out->loss_g : out->loss_d, found_by, what, sizeof what);
    ganfw_status st = ganfw_nonfinite_act(s, o->role, what, note, sizeof note);
    if (st != GANFW_OK) return st;
    note_nonfinite(out, note);
    *nonfinite = 1;
    return GANFW_OK;
  }
  if (s->train.clip_grad_norm[opt] > 0) {
    ganfw_status st =
        ganfw_clip_grad_norm(s, opt, s->train.clip_grad_norm[opt], &g->grad_norm[opt]);
    if (st != GANFW_OK) return st;
  }
  ganfw_status st = o->vt->step(o->self, o->lr);
  if (st != GANFW_OK) return ganfw_error_wrap(st, "optimizer step of the %s", o->role);
  if (opt == 1 && s->objective_vt && s->objective_vt->after_d_step &&
      (st = s->objective_vt->after_d_step(s->objective, o->params, o->n_params)) != GANFW_OK)
    return ganfw_error_wrap(st, "objective '%s' after the discriminator's step", s->objective_name);
  return GANFW_OK;
}

/* The update of the optimizer `opt`, traced as the optimizer pass (device.trace). */
static ganfw_status optim_step(ganfw_gan *g, int32_t opt, int32_t *skipped, int32_t *nonfinite,
                               ganfw_gan_stats *out) {
  const int32_t pass = ganfw_alloc_set_pass(g->ctx->alloc, GANFW_PASS_OPTIMIZER);
  ganfw_status st = update(g, opt, skipped, nonfinite, out);
  /* memory: [step_in_backward]: the gradients' bytes go back until the next backward */
  if (st == GANFW_OK) st = ganfw_sib_release(g->s->sib, opt);
  ganfw_alloc_set_pass(g->ctx->alloc, pass);
  return st;
}

/* Rows [k*m, (k+1)*m) of t, or t itself (retained) for a single micro-batch. */
static ganfw_tensor *micro(ganfw_tensor *t, int64_t k, int64_t m, int32_t count) {
  if (count == 1) return ganfw_tensor_retain(t);
  return ganfw_tensor_rows(t, k * m, m, t->name);
}

/* --- conditional GANs (model.conditional) ---------------------------------------------
 * G gets [N, nz + K, 1, 1] (the noise, then the class one-hot) and D [N, C + K, H, W] (the
 * image, then K one-hot maps): both built here, so the nets keep one input. */

/* a and b joined along dim 1, sample by sample, as a new tensor of a's dtype (b's must
 * match): [N, Ca + Cb, H, W]. */
static ganfw_tensor *join_channels(ganfw_ctx *ctx, const ganfw_tensor *a, const ganfw_tensor *b,
                                   int32_t category, const char *name) {
  const int64_t n = a->shape[0];
  int64_t shape[4] = {n, a->shape[1] + b->shape[1], a->shape[2], a->shape[3]};
  ganfw_tensor *out = ganfw_tensor_create(ctx, a->dtype, 4, shape, category, name);
  if (!out) return NULL;
  const size_t ra = (size_t)(a->nbytes / n), rb = (size_t)(b->nbytes / n);
  ganfw_backend *be = ctx->be;
  for (int64_t i = 0; i < n; i++) {
    char *dst = (char *)out->data + (size_t)i * (ra + rb);
    if (be->vt->copy_d2d(be, dst, (const char *)a->data + (size_t)i * ra, ra) != GANFW_OK ||
        be->vt->copy_d2d(be, dst + ra, (const char *)b->data + (size_t)i * rb, rb) != GANFW_OK) {
      ganfw_tensor_destroy(out);
      ganfw_error_set(GANFW_ERR_BACKEND, "conditional GAN: copying %s", name);
      return NULL;
    }
  }
  return out;
}

/* The first c channels of t [N, C, H, W] as a new tensor. */
static ganfw_tensor *first_channels(ganfw_ctx *ctx, const ganfw_tensor *t, int64_t c,
                                    int32_t category, const char *name) {
  const int64_t n = t->shape[0];
  int64_t shape[4] = {n, c, t->shape[2], t->shape[3]};
  ganfw_tensor *out = ganfw_tensor_create(ctx, t->dtype, 4, shape, category, name);
  if (!out) return NULL;
  const size_t rt = (size_t)(t->nbytes / n), ro = (size_t)(out->nbytes / n);
  ganfw_backend *be = ctx->be;
  for (int64_t i = 0; i < n; i++)
    if (be->vt->copy_d2d(be, (char *)out->data + (size_t)i * ro,
                         (const char *)t->data + (size_t)i * rt, ro) != GANFW_OK) {
      ganfw_tensor_destroy(out);
      ganfw_error_set(GANFW_ERR_BACKEND, "conditional GAN: copying %s", name);
      return NULL;
    }
  return out;
}

/* One-hot maps [n, K, h, w] (f32) of labels[0..n): map k of sample i is 1 where k is its
 * class. A label outside [0, K) is refused naming it. */
static ganfw_tensor *one_hot(ganfw_session *s, const int32_t *labels, int64_t n, int64_t h,
                             int64_t w, int32_t category, const char *name) {
  const int64_t K = s->n_classes, hw = h * w;
  int64_t shape[4] = {n, K, h, w};
  ganfw_tensor *t = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, shape, category, name);
  float *host = t ? calloc((size_t)(n * K * hw), sizeof *host) : NULL;
  if (!t || !host) {
    ganfw_tensor_destroy(t);
    free(host);
    if (!ganfw_error_code()) ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) {
    if (labels[i] < 0 || labels[i] >= K) {
      ganfw_error_set(GANFW_ERR_INVALID_ARG,
                      "conditional GAN: sample %lld has class %d; the model has classes 0..%lld",
                      (long long)i, (int)labels[i], (long long)K - 1);
      ganfw_tensor_destroy(t);
      free(host);
      return NULL;
    }
    float *map = host + (i * K + labels[i]) * hw;
    for (int64_t j = 0; j < hw; j++) map[j] = 1.0f;
  }
  ganfw_status st = ganfw_tensor_from_host(t, host, t->nbytes);
  free(host);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return NULL;
  }
  return t;
}

/* The noise joined with its classes, or z itself (retained) for an unconditional model. */
static ganfw_tensor *g_input(ganfw_session *s, ganfw_tensor *z, const int32_t *labels) {
  if (!s->n_classes) return ganfw_tensor_retain(z);
  ganfw_tensor *oh = one_hot(s, labels, z->shape[0], 1, 1, GANFW_MEM_DATA, "noise.classes");
  ganfw_tensor *zc = oh ? join_channels(s->ctx, z, oh, GANFW_MEM_DATA, "noise+classes") : NULL;
  ganfw_tensor_destroy(oh);
  return zc;
}

/* D's input for images x (any compute dtype) with their class maps `maps` (f32, NULL for
 * an unconditional model): x joined with the maps, or x itself (retained). */
static ganfw_tensor *d_input(ganfw_session *s, ganfw_tensor *x, ganfw_tensor *maps) {
  if (!maps) return ganfw_tensor_retain(x);
  ganfw_tensor *m = ganfw_tensor_as_dtype(maps, x->dtype, GANFW_MEM_ACTIVATION);
  ganfw_tensor *xc = m ? join_channels(s->ctx, x, m, GANFW_MEM_ACTIVATION, "image+classes") : NULL;
  ganfw_tensor_destroy(m);
  return xc;
}

/* The class maps of the batch for D, or NULL (and GANFW_OK) without conditioning. */
static ganfw_status class_maps(ganfw_gan *g, int64_t n, ganfw_tensor **maps) {
  ganfw_session *s = g->s;
  *maps = NULL;
  if (!s->n_classes) return GANFW_OK;
  if (g->n_labels != n)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "conditional GAN: %lld labels set for a batch of %lld (call "
                           "ganfw_gan_set_labels before the step)",
                           (long long)g->n_labels, (long long)n);
  *maps = one_hot(s, g->labels, n, s->data_info.height, s->data_info.width, GANFW_MEM_DATA,
                  "classes.maps");
  return *maps ? GANFW_OK : ganfw_error_code();
}

void ganfw_gan_grid_labels(int32_t *labels, int64_t n, int64_t nrow, int32_t classes, int32_t cls) {
  for (int64_t i = 0; i < n; i++)
    labels[i] =
        cls >= 0 ? cls : (int32_t)((i / (nrow > 0 ? nrow : 1)) % (classes > 0 ? classes : 1));
}

ganfw_status ganfw_gan_set_labels(ganfw_gan *g, const int32_t *labels, int64_t n) {
  int32_t *copy = realloc(g->labels, (size_t)(n > 0 ? n : 1) * sizeof *copy);
  if (!copy) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  memcpy(copy, labels, (size_t)n * sizeof *copy);
  g->labels = copy;
  g->n_labels = n;
  return GANFW_OK;
}

/* 1 when this step (the g->steps-th, from 0) has a G update: train.d_steps_per_g_step. */
static int32_t g_turn(const ganfw_gan *g) {
  return (g->steps + 1) % g->s->train.d_steps_per_g_step == 0;
}

/* Drops a G(z) the D step kept and the G step did not take (an error between them). */
static void drop_kept(ganfw_gan *g) {
  if (!g->kept_fake) return;
  ganfw_tensor_destroy(g->kept_fake);
  g->kept_fake = NULL;
  ganfw_tape_clear(g->tape_g);
}

ganfw_status ganfw_gan_d_step(ganfw_gan *g, ganfw_tensor *x, ganfw_tensor *z,
                              ganfw_gan_stats *out) {
  ganfw_session *s = g->s;
  ganfw_net *G = s->generator, *D = s->discriminator;
  const int32_t M = s->exec.micro_batches;
  const int64_t m = x->shape[0] / M;
  ganfw_status st = make_targets(g, m);
  if (st != GANFW_OK) return st;
  const float dloss = (float)(loss_scale(s, 1) / M / ganfw_dp_ranks(s));
  drop_kept(g);
  out->loss_d = out->d_x = out->d_g_z1 = 0;
  ganfw_net_zero_grad(D);
  ganfw_tensor *maps = NULL, *xin = NULL, *zin = NULL; /* model.conditional: with classes */
  if ((st = class_maps(g, x->shape[0], &maps)) == GANFW_OK &&
      (!(xin = d_input(s, x, maps)) || !(zin = g_input(s, z, g->labels))))
    st = ganfw_error_code();
  int32_t bad = 0;
  for (int32_t k = 0; k < M && st == GANFW_OK && !bad; k++) {
    double loss_real = 0, loss_fake = 0, p_real = 0, p_fake = 0;
    ganfw_tensor *xk = micro(xin, k, m, M), *zk = micro(zin, k, m, M), *fake = NULL, *fin = NULL;
    ganfw_tensor *mk = maps ? micro(maps, k, m, M) : NULL;
    if (!xk || !zk || (maps && !mk)) st = ganfw_error_code();
    const uint64_t rng_real = g->ctx->rng_offset;
    ganfw_alloc_set_stage(g->ctx->alloc, GANFW_STAGE_D_REAL); /* device.trace's phases */
    if (st == GANFW_OK)
      st = d_learn(g, g->tape_real, xk, GANFW_OBJ_D_REAL, dloss, &loss_real, &p_real,
                   "loss_d (real)");
    if (st == GANFW_OK && loss_bad(s, loss_real)) {
      bad = 1;
      const ganfw_nonfinite_hop hops[] = {{D, rng_real, "the real batch"}};
      st = loss_nonfinite(g, "discriminator", "loss_d (real)", loss_real, k, M, hops, 1, xk, out);
    }
    const uint64_t rng_g = g->ctx->rng_offset;
    /* train.reuse_fake on a step with a G update: G(z) with its tape, kept for the G step
     * (G's BatchNorm statistics move once a step, as in PyTorch's DC-GAN example) */
    const int32_t keep = s->train.reuse_fake && g_turn(g);
    ganfw_alloc_set_stage(g->ctx->alloc, GANFW_STAGE_D_FAKE);
    if (st == GANFW_OK && !bad) st = ganfw_net_forward(G, zk, keep ? g->tape_g : NULL, &fake);
    if (st == GANFW_OK && !bad && keep) {
      g->kept_fake = ganfw_tensor_retain(fake);
      g->kept_rng = rng_g;
    }
    if (st == GANFW_OK && !bad && !(fin = d_input(s, fake, mk))) st = ganfw_error_code();
    if (st == GANFW_OK && !bad) st = d_penalties(g, xk, fin, k, M, &bad, out);
    const uint64_t rng_fake = g->ctx->rng_offset;
    if (k == M - 1) ganfw_dp_arm(s, 1); /* D's last backward of the step: buckets start */
    if (st == GANFW_OK && !bad)
      st = d_learn(g, g->tape_fake, fin, GANFW_OBJ_D_FAKE, dloss, &loss_fake, &p_fake,
                   "loss_d (fake)");
    if (st == GANFW_OK && !bad && loss_bad(s, loss_fake)) {
      bad = 1;
      /* a conditional D's input is G(z) with class maps: the checked forward stops at G */
      const ganfw_nonfinite_hop hops[] = {{G, rng_g, "the noise"}, {D, rng_fake, "G(z)"}};
      st = loss_nonfinite(g, "discriminator", "loss_d (fake)", loss_fake, k, M, hops, maps ? 1 : 2,
                          zk, out);
    }
    ganfw_tensor_destroy(fin);
    ganfw_tensor_destroy(fake);
    ganfw_tensor_destroy(mk);
    ganfw_tensor_destroy(xk);
    ganfw_tensor_destroy(zk);
    out->loss_d += (loss_real + loss_fake) / M;
    out->d_x += p_real / M;
    out->d_g_z1 += p_fake / M;
  }
  ganfw_tensor_destroy(xin);
  ganfw_tensor_destroy(zin);
  ganfw_tensor_destroy(maps);
  if (st == GANFW_OK && bad) out->nonfinite_d = 1; /* train.on_nonfinite: skip */
  /* data-parallel: the sum of the ranks' gradients (every rank decides `bad` alike) */
  if (st == GANFW_OK && !bad)
    st = ganfw_dp_reduce(s, 1);
  else
    ganfw_dp_disarm(s, 1);
  if (st == GANFW_OK && !bad) st = optim_step(g, 1, &out->skipped_d, &out->nonfinite_d, out);
  out->grad_norm_d = g->grad_norm[1];
  return st;
}

ganfw_status ganfw_gan_g_step(ganfw_gan *g, ganfw_tensor *z, ganfw_gan_stats *out) {
  ganfw_session *s = g->s;
  ganfw_net *G = s->generator, *D = s->discriminator;
  const int32_t M = s->exec.micro_batches;
  const int64_t m = z->shape[0] / M;
  ganfw_alloc_set_stage(g->ctx->alloc, GANFW_STAGE_G);
  ganfw_status st = make_targets(g, m);
  if (st != GANFW_OK) return st;
  const float dloss = (float)(loss_scale(s, 0) / M / ganfw_dp_ranks(s));
  out->loss_g = out->d_g_z2 = 0;
  ganfw_net_zero_grad(G);
  ganfw_tensor *maps = NULL, *zin = NULL; /* model.conditional: with classes */
  if ((st = class_maps(g, z->shape[0], &maps)) == GANFW_OK && !(zin = g_input(s, z, g->labels)))
    st = ganfw_error_code();
  int32_t bad = 0;
  for (int32_t k = 0; k < M && st == GANFW_OK && !bad; k++) {
    double loss = 0, prob = 0;
    ganfw_tensor *zk = micro(zin, k, m, M), *fake = NULL, *logits = NULL, *dlogits = NULL,
                 *dfake = NULL, *fin = NULL;
    ganfw_tensor *mk = maps ? micro(maps, k, m, M) : NULL;
    uint64_t rng_g = g->ctx->rng_offset;
    if (g->kept_fake) { /* train.reuse_fake: the D step's G(z) and tape */
      fake = g->kept_fake;
      g->kept_fake = NULL;
      rng_g = g->kept_rng;
    } else {
      st = zk ? ganfw_net_forward(G, zk, g->tape_g, &fake) : ganfw_error_code();
    }
    const uint64_t rng_d = g->ctx->rng_offset;
    if (st == GANFW_OK && !(fin = d_input(s, fake, mk))) st = ganfw_error_code();
    if (st == GANFW_OK) st = ganfw_net_forward(D, fin, g->tape_dg, &logits);
    ganfw_tensor_destroy(fin);
    ganfw_tensor_destroy(fake);
    if (st == GANFW_OK)
      st = loss_term(g, logits, GANFW_OBJ_G, dloss, &loss, &prob, &dlogits, "loss_g");
    ganfw_tensor_destroy(logits);
    if (st == GANFW_OK && loss_bad(s, loss)) {
      bad = 1;
      const ganfw_nonfinite_hop hops[] = {{G, rng_g, "the noise"}, {D, rng_d, "G(z)"}};
      st = loss_nonfinite(g, "generator", "loss_g", loss, k, M, hops, maps ? 1 : 2, zk, out);
    }
    /* through D without its parameter gradients, into G (a conditional D's input gradient
     * has the class maps' channels after the image's: G gets the image's) */
    if (st == GANFW_OK && !bad)
      st = ganfw_net_backward(D, g->tape_dg, dlogits, GANFW_BWD_INPUT_GRAD, &dfake);
    ganfw_tensor_destroy(dlogits);
    if (st == GANFW_OK && !bad && maps) {
      ganfw_tensor *di =
          first_channels(g->ctx, dfake, s->data_info.channels, GANFW_MEM_ACTIVATION, "grad.G(z)");
      ganfw_tensor_destroy(dfake);
      dfake = di;
      if (!di) st = ganfw_error_code();
    }
    ganfw_tensor_destroy(mk);
    if (k == M - 1) ganfw_dp_arm(s, 0); /* G's last backward of the step */
    /* memory: [step_in_backward]: each layer's update runs inside G's backward */
    const int32_t sib = ganfw_sib_active(s->sib, 0) && k == M - 1 && st == GANFW_OK && !bad;
    if (sib) st = ganfw_sib_arm(s->sib, 0);
    if (st == GANFW_OK && !bad)
      st = ganfw_net_backward(G, g->tape_g, dfake, GANFW_BWD_PARAM_GRAD, NULL);
    if (sib) st = ganfw_sib_finish(s->sib, 0, st);
    ganfw_tensor_destroy(dfake);
    ganfw_tensor_destroy(zk);
    ganfw_tape_clear(g->tape_g);
    ganfw_tape_clear(g->tape_dg);
    out->loss_g += loss / M;
    out->d_g_z2 += prob / M;
  }
  ganfw_tensor_destroy(zin);
  ganfw_tensor_destroy(maps);
  if (st == GANFW_OK && bad) out->nonfinite_g = 1; /* train.on_nonfinite: skip */
  if (st == GANFW_OK && !bad)
    st = ganfw_dp_reduce(s, 0);
  else
    ganfw_dp_disarm(s, 0);
  if (st == GANFW_OK && !bad && !ganfw_sib_active(s->sib, 0))
    st = optim_step(g, 0, &out->skipped_g, &out->nonfinite_g, out);
  if (st == GANFW_OK && s->ema && !bad && !out->skipped_g && !out->nonfinite_g)
    st = ganfw_ema_update(s->ema, g->ctx->be, g->steps + 1); /* train.ema */
  out->g_stepped = 1;
  out->grad_norm_g = g->grad_norm[0];
  g->last_loss_g = out->loss_g;
  g->last_d_g_z2 = out->d_g_z2;
  return st;
}

ganfw_status ganfw_gan_step(ganfw_gan *g, ganfw_tensor *x, ganfw_tensor *z, ganfw_gan_stats *out) {
  memset(out, 0, sizeof *out);
  ganfw_session *s = g->s;
  if (x->shape[0] % s->exec.micro_batches != 0 || z->shape[0] != x->shape[0])
    return ganfw_error_set(
        GANFW_ERR_INVALID_ARG, "gan step: batch %lld, noise %lld, %d micro-batches",
        (long long)x->shape[0], (long long)z->shape[0], (int)s->exec.micro_batches);
  ganfw_net *nets[2] = {s->generator, s->discriminator};
  const int32_t may_skip = s->train.on_nonfinite == GANFW_NONFINITE_SKIP;
  ganfw_status st = GANFW_OK;
  /* A skipped update leaves the net's BatchNorm statistics as they were before the step:
   * the forwards of the step (both halves touch both nets) updated them already. */
  for (int i = 0; i < 2 && may_skip && st == GANFW_OK; i++)
    st = ganfw_net_stats_save(nets[i], &g->stats[i]);
  /* train.d_steps_per_g_step (n_critic): G steps after every n-th D step; the steps
   * between show G's last loss */
  const int32_t with_g = g_turn(g);
  if (st == GANFW_OK && g->hook) g->hook(g->hook_user, 0, "D step");
  if (st == GANFW_OK) st = ganfw_gan_d_step(g, x, z, out);
  if (st == GANFW_OK && with_g && g->hook) g->hook(g->hook_user, 1, "G step");
  if (st == GANFW_OK && with_g) st = ganfw_gan_g_step(g, z, out);
  drop_kept(g);
  ganfw_alloc_set_stage(g->ctx->alloc, GANFW_STAGE_SETUP);
  if (st == GANFW_OK && !with_g) {
    out->loss_g = g->last_loss_g;
    out->d_g_z2 = g->last_d_g_z2;
    out->grad_norm_g = g->grad_norm[0];
  }
  if (st == GANFW_OK) g->steps++;
  g->every_penalty = 0;
  if (st == GANFW_OK && out->nonfinite_g) st = ganfw_net_stats_restore(nets[0], g->stats[0]);
  if (st == GANFW_OK && out->nonfinite_d) st = ganfw_net_stats_restore(nets[1], g->stats[1]);
  for (int32_t i = 0; i < s->n_memory && st == GANFW_OK; i++)
    if (s->memory[i].vt->step_end) st = s->memory[i].vt->step_end(s->memory[i].self);
  return st;
}

void ganfw_gan_set_step(ganfw_gan *g, int64_t step) {
  g->steps = step;
}

void ganfw_gan_every_penalty(ganfw_gan *g) {
  g->every_penalty = 1;
}

void ganfw_gan_set_phase_hook(ganfw_gan *g, ganfw_phase_hook hook, void *user) {
  g->hook = hook;
  g->hook_user = user;
}

ganfw_status ganfw_gan_generate(ganfw_session *s, ganfw_tensor *z, const int32_t *labels,
                                ganfw_tensor **y) {
  *y = NULL;
  if (s->n_classes && !labels)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "a conditional generator needs the classes");
  ganfw_tensor *zin = g_input(s, z, labels);
  if (!zin) return ganfw_error_code();
  /* Under accumulate the generator runs a micro-batch of rows at a time, as in training:
     the samples then fit the memory the step was planned in (BatchNorm takes the
     statistics of each micro-batch, as the training step's forward does). */
  const int64_t n = zin->shape[0], M = s->exec.micro_batches;
  int64_t m = M > 1 ? s->train.batch_size / M : n;
  if (m <= 0 || m > n) m = n;
  ganfw_tensor *all = NULL;
  ganfw_status st = GANFW_OK;
  ganfw_net_set_train(s->generator, 1, 0);
  ganfw_dp_local_begin(s); /* rank 0 alone makes samples: BatchNorm on its own batch */
  for (int64_t r = 0; st == GANFW_OK && r < n; r += m) {
    const int64_t rows = r + m <= n ? m : n - r;
    ganfw_tensor *zk =
        rows == n ? ganfw_tensor_retain(zin) : ganfw_tensor_rows(zin, r, rows, zin->name);
    ganfw_tensor *out = NULL;
    st = zk ? ganfw_net_forward(s->generator, zk, NULL, &out) : ganfw_error_code();
    ganfw_tensor_destroy(zk);
    if (st == GANFW_OK && rows == n) { /* images leave the compute dtype (f16/bf16) as f32 */
      all = ganfw_tensor_as_dtype(out, GANFW_DTYPE_F32, GANFW_MEM_ACTIVATION);
      if (!all) st = ganfw_error_code();
    } else if (st == GANFW_OK) {
      if (!all) {
        int64_t shape[4] = {n, out->shape[1], out->shape[2], out->shape[3]};
        all =
            ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_ACTIVATION, out->name);
      }
      ganfw_tensor *dst = all ? ganfw_tensor_rows(all, r, rows, all->name) : NULL;
      st = dst ? ganfw_cast(s->ctx->be, out->numel, out->dtype, out->data, GANFW_DTYPE_F32,
                            dst->data)
               : ganfw_error_code();
      ganfw_tensor_destroy(dst);
    }
    ganfw_tensor_destroy(out);
  }
  ganfw_dp_local_end(s);
  ganfw_tensor_destroy(zin);
  ganfw_net_set_train(s->generator, 1, 1);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(all);
    return st;
  }
  *y = all;
  return GANFW_OK;
}

ganfw_tensor *ganfw_gan_fixed_noise(ganfw_session *s, int64_t n, uint64_t seed) {
  int64_t shape[4] = {n, s->nz, 1, 1};
  ganfw_tensor *z =
      ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "fixed_noise");
  if (!z) return NULL;
  /* A stream of its own: the training RNG's position does not change the samples. */
  const uint64_t fixed_stream = 0x9e3779b97f4a7c15ull;
  if (ganfw_be_rng_normal(s->ctx->be, z->numel, seed ^ fixed_stream, 0, 0.0f, 1.0f, z->data)) {
    ganfw_tensor_destroy(z);
    return NULL;
  }
  return z;
}
