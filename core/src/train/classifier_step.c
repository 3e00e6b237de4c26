/* One classifier training step and the no-grad evaluation (see trainer.h): images
 * [N,C,H,W] and int32 labels [N] in, logits [N,classes] out of the session's classifier,
 * softmax cross-entropy against the labels. Logits are small and are read back to the host
 * for the accuracy and the confusion matrix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "backend/ops.h"
#include "train/run_state.h"
#include "runtime/alloc.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "train/nonfinite.h"
#include "train/sib.h"
#include "train/dp.h"
#include "train/trainer.h"

struct ganfw_classifier {
  ganfw_session *s;
  ganfw_ctx *ctx;
  ganfw_tape *tape;
  ganfw_tensor *loss; /* one float */
  float *host_logits;
  int32_t *host_labels;
  int64_t host_cap;       /* logits floats the host buffers hold */
  ganfw_grad_list grads;  /* one non-finite check a step */
  ganfw_net_stats *stats; /* BatchNorm statistics before the step (train.on_nonfinite: skip) */
};

/* Host buffers for `rows` rows of logits and labels. */
static ganfw_status host_room(float **logits, int32_t **labels, int64_t *cap, int64_t n_logits,
                              int64_t rows) {
  if (n_logits <= *cap && rows <= *cap) return GANFW_OK;
  int64_t want = n_logits > rows ? n_logits : rows;
  free(*logits);
  free(*labels);
  *logits = malloc((size_t)want * sizeof **logits);
  *labels = malloc((size_t)want * sizeof **labels);
  *cap = (*logits && *labels) ? want : 0;
  return *cap ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
}

ganfw_status ganfw_classifier_create(ganfw_session *s, ganfw_classifier **out) {
  *out = NULL;
  if (!s->classifier)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "the session has no classifier net");
  ganfw_classifier *c = calloc(1, sizeof *c);
  if (!c) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  c->s = s;
  c->ctx = s->ctx;
  c->tape = ganfw_tape_create(s->classifier);
  int64_t one = 1;
  c->loss = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 1, &one, GANFW_MEM_OTHER, "loss");
  ganfw_status st = s->n_optim > 0 ? ganfw_grad_list_init(&c->grads, &s->optim[0]) : GANFW_OK;
  if (!c->tape || !c->loss || st != GANFW_OK) {
    ganfw_classifier_destroy(c);
    return ganfw_error_code() ? ganfw_error_code()
                              : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  *out = c;
  return GANFW_OK;
}

void ganfw_classifier_destroy(ganfw_classifier *c) {
  if (!c) return;
  ganfw_tape_destroy(c->tape);
  ganfw_tensor_destroy(c->loss);
  free(c->host_logits);
  free(c->host_labels);
  ganfw_grad_list_free(&c->grads);
  ganfw_net_stats_destroy(c->stats);
  free(c);
}

/* Classes per row of logits y for n rows, or an error when y is not [n, classes]. */
static ganfw_status logit_classes(const ganfw_tensor *y, int64_t n, int64_t *classes) {
  *classes = n > 0 ? y->numel / n : 0;
  if (y->shape[0] != n || *classes < 2 || *classes * n != y->numel)
    return ganfw_error_set(GANFW_ERR_PLUGIN,
                           "the classifier returns %lld values for %lld images; it must return "
                           "[N, classes] logits with at least 2 classes",
                           (long long)y->numel, (long long)n);
  return GANFW_OK;
}

/* Loss (device -> host) of logits against labels with label smoothing `smoothing`, and the
 * right predictions among the n rows (argmax, the first maximum on ties, as torch.argmax);
 * when confusion is not NULL it counts [label][prediction]. */
static ganfw_status score(ganfw_ctx *ctx, ganfw_tensor *logits, ganfw_tensor *labels,
                          int64_t classes, double smoothing, ganfw_tensor *loss_t,
                          float *host_logits, int32_t *host_labels, double *loss, int64_t *correct,
                          int64_t *confusion) {
  ganfw_backend *be = ctx->be;
  const int64_t n = logits->shape[0];
  float l = 0;
  ganfw_status st = ganfw_be_softmax_xent_forward(be, n, classes, logits->data, labels->data,
                                                  smoothing, loss_t->data);
  if (st == GANFW_OK) st = ganfw_tensor_to_host(loss_t, &l, sizeof l);
  if (st == GANFW_OK) st = be->vt->copy_d2h(be, host_logits, logits->data, (size_t)logits->nbytes);
  if (st == GANFW_OK) st = be->vt->copy_d2h(be, host_labels, labels->data, (size_t)n * 4);
  if (st != GANFW_OK) return st;
  *loss = l;
  int64_t right = 0;
  for (int64_t i = 0; i < n; i++) {
    const float *row = host_logits + i * classes;
    int64_t best = 0;
    for (int64_t j = 1; j < classes; j++)
      if (row[j] > row[best]) best = j;
    int32_t y = host_labels[i];
    right += best == y;
    if (confusion && y >= 0 && y < classes) confusion[y * classes + best]++;
  }
  *correct = right;
  return GANFW_OK;
}

/* The labels must be classes of the logits: a wrong one would silently add nothing. */
static ganfw_status check_labels(const int32_t *labels, int64_t n, int64_t classes) {
  for (int64_t i = 0; i < n; i++)
    if (labels[i] < 0 || labels[i] >= classes)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "label %d of the data is outside the model's %lld classes; set "
                             "model.num_classes to at least %d",
                             (int)labels[i], (long long)classes, (int)labels[i] + 1);
  return GANFW_OK;
}

/* The loss scale of the classifier's optimizer: the product of every strategy's factor. */
static double loss_scale(ganfw_session *s) {
  double scale = 1.0;
  for (int32_t i = 0; i < s->n_memory; i++)
    if (s->memory[i].vt->loss_scale) scale *= s->memory[i].vt->loss_scale(s->memory[i].self, 0);
  return scale;
}

/* Lets every strategy see the gradients, then steps the optimizer unless one says skip.
 * Without a loss scaler the gradients are checked once for NaN or inf first
 * (train.on_nonfinite), as is a strategy's GANFW_ERR_NUMERIC; out->nonfinite = 1 when the
 * update is skipped for it. */
static ganfw_status optim_step(ganfw_classifier *c, ganfw_classifier_stats *out) {
  ganfw_session *s = c->s;
  ganfw_session_optim *o = &s->optim[0];
  int32_t skip = 0, bad = 0;
  char found_by[512] = "", what[1024];
  for (int32_t i = 0; i < s->n_memory && !skip; i++) {
    const ganfw_session_memory *m = &s->memory[i];
    if (!m->vt->after_backward) continue;
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
  out->skipped = skip;
  if (skip) return GANFW_OK;
  if (!bad && !s->loss_scaling) {
    ganfw_status st = ganfw_grad_list_nonfinite(c->ctx, &c->grads, &bad);
    if (st != GANFW_OK) return st;
  }
  if (bad) {
    ganfw_nonfinite_grad_what(o->net, "classifier", "cross-entropy loss", out->loss, found_by, what,
                              sizeof what);
    ganfw_status st =
        ganfw_nonfinite_act(s, "classifier", what, out->nonfinite_what, sizeof out->nonfinite_what);
    if (st == GANFW_OK) out->nonfinite = 1;
    return st;
  }
  if (s->train.clip_grad_norm[0] > 0) {
    ganfw_status st = ganfw_clip_grad_norm(s, 0, s->train.clip_grad_norm[0], &out->grad_norm);
    if (st != GANFW_OK) return st;
  }
  ganfw_status st = o->vt->step(o->self, o->lr);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "optimizer step of the classifier");
}

/* Forward with the tape, loss, backward of one micro-batch (k of M); adds its loss / M and
 * right predictions to the totals. A non-finite loss without a loss scaler runs no backward:
 * it stops the step, or (train.on_nonfinite: skip) sets out->nonfinite. */
static ganfw_status learn(ganfw_classifier *c, ganfw_tensor *x, ganfw_tensor *labels, float dloss,
                          int32_t k, int32_t M, double *loss_sum, int64_t *correct,
                          ganfw_classifier_stats *out) {
  ganfw_session *s = c->s;
  ganfw_net *net = s->classifier;
  ganfw_backend *be = c->ctx->be;
  const int64_t n = x->shape[0];
  ganfw_tensor *y = NULL, *logits = NULL, *dlogits = NULL;
  int64_t classes = 0, right = 0;
  double loss = 0;
  const uint64_t rng = c->ctx->rng_offset;
  ganfw_status st = ganfw_net_forward(net, x, c->tape, &y);
  if (st == GANFW_OK) st = logit_classes(y, n, &classes);
  /* The loss reads f32: logits of a 16-bit compute dtype (AMP) are converted first. */
  if (st == GANFW_OK && !(logits = ganfw_tensor_as_dtype(y, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE)))
    st = ganfw_error_code();
  if (st == GANFW_OK)
    st = host_room(&c->host_logits, &c->host_labels, &c->host_cap, logits->numel, n);
  if (st == GANFW_OK)
    st = score(c->ctx, logits, labels, classes, s->train.label_smoothing, c->loss, c->host_logits,
               c->host_labels, &loss, &right, NULL);
  if (st == GANFW_OK) st = check_labels(c->host_labels, n, classes);
  /* data-parallel: the global batch's mean loss and right predictions (every rank decides
   * on a non-finite loss alike) */
  double v[2] = {loss, (double)right};
  if (st == GANFW_OK) st = ganfw_dp_mean(s, v, 2, "the step's loss");
  loss = v[0];
  right = (int64_t)llround(v[1] * ganfw_dp_ranks(s));
  if (st == GANFW_OK && !isfinite(loss) && !s->loss_scaling) {
    char where[768], what[1024], micro[48] = "";
    const ganfw_nonfinite_hop hop = {net, rng, "the batch"};
    ganfw_dp_local_begin(s); /* the checked forward stops where it likes: no collectives */
    ganfw_nonfinite_locate(&hop, 1, x, where, sizeof where);
    ganfw_dp_local_end(s);
    if (M > 1) snprintf(micro, sizeof micro, " (micro-batch %d of %d)", (int)k + 1, (int)M);
    snprintf(what, sizeof what, "the classifier's cross-entropy loss is %g%s: %s",
             isnan(loss) ? NAN : loss, micro, where);
    st =
        ganfw_nonfinite_act(s, "classifier", what, out->nonfinite_what, sizeof out->nonfinite_what);
    if (st == GANFW_OK) out->nonfinite = 1;
  }
  if (st == GANFW_OK && !out->nonfinite) {
    /* The gradient in f32, then in the logits' own dtype for the net's backward. */
    const int32_t dtype = y->dtype;
    ganfw_tensor *d = ganfw_tensor_create(
        c->ctx, GANFW_DTYPE_F32, y->ndim, y->shape,
        dtype == GANFW_DTYPE_F32 ? GANFW_MEM_ACTIVATION : GANFW_MEM_WORKSPACE, "dlogits");
    if (d && ganfw_be_softmax_xent_backward(be, n, classes, logits->data, labels->data,
                                            s->train.label_smoothing, dloss, d->data) != GANFW_OK)
      ganfw_tensor_destroy(d), d = NULL; /* the error recorded stays the step's */
    ganfw_tensor_destroy(logits);
    ganfw_tensor_destroy(y);
    logits = y = NULL;
    dlogits = d ? ganfw_tensor_as_dtype(d, dtype, GANFW_MEM_ACTIVATION) : NULL;
    ganfw_tensor_destroy(d);
    if (k == M - 1) ganfw_dp_arm(s, 0); /* the step's last backward: buckets start */
    /* memory: [step_in_backward]: each layer's update runs inside this backward */
    const int32_t sib = ganfw_sib_active(s->sib, 0) && k == M - 1 && dlogits;
    st = !dlogits ? ganfw_error_code() : sib ? ganfw_sib_arm(s->sib, 0) : GANFW_OK;
    if (st == GANFW_OK) st = ganfw_net_backward(net, c->tape, dlogits, GANFW_BWD_PARAM_GRAD, NULL);
    if (sib) st = ganfw_sib_finish(s->sib, 0, st);
  }
  ganfw_tape_clear(c->tape);
  ganfw_tensor_destroy(dlogits);
  ganfw_tensor_destroy(logits);
  ganfw_tensor_destroy(y);
  *loss_sum += loss * (double)n;
  *correct += right;
  return st;
}

/* Rows [k*m, (k+1)*m) of t, or t itself (retained) for a single micro-batch. */
static ganfw_tensor *micro(ganfw_tensor *t, int64_t k, int64_t m, int32_t count) {
  if (count == 1) return ganfw_tensor_retain(t);
  return ganfw_tensor_rows(t, k * m, m, t->name);
}

ganfw_status ganfw_classifier_step(ganfw_classifier *c, ganfw_tensor *x, ganfw_tensor *labels,
                                   ganfw_classifier_stats *out) {
  memset(out, 0, sizeof *out);
  ganfw_session *s = c->s;
  const int32_t M = s->exec.micro_batches;
  const int64_t N = x->shape[0];
  if (N < 1 || N % M != 0 || labels->numel != N || labels->dtype != GANFW_DTYPE_I32)
    return ganfw_error_set(
        GANFW_ERR_INVALID_ARG, "classifier step: batch %lld, %lld labels (%s), %d micro-batches",
        (long long)N, (long long)labels->numel, ganfw_dtype_name(labels->dtype), (int)M);
  const int64_t m = N / M;
  const float dloss = (float)(loss_scale(s) / M / ganfw_dp_ranks(s));
  double loss_sum = 0;
  int64_t correct = 0;
  ganfw_status st = GANFW_OK;
  ganfw_alloc_set_stage(s->ctx->alloc, GANFW_STAGE_CLASSIFIER); /* device.trace's phases */
  /* A skipped update leaves BatchNorm's statistics as they were before the step. */
  if (s->train.on_nonfinite == GANFW_NONFINITE_SKIP)
    st = ganfw_net_stats_save(s->classifier, &c->stats);
  ganfw_net_zero_grad(s->classifier);
  for (int32_t k = 0; k < M && st == GANFW_OK && !out->nonfinite; k++) {
    ganfw_tensor *xk = micro(x, k, m, M), *yk = micro(labels, k, m, M);
    st = xk && yk ? learn(c, xk, yk, dloss, k, M, &loss_sum, &correct, out) : ganfw_error_code();
    ganfw_tensor_destroy(xk);
    ganfw_tensor_destroy(yk);
  }
  out->loss = loss_sum / (double)N;
  out->accuracy = (double)correct / (double)(N * ganfw_dp_ranks(s));
  if (st == GANFW_OK && !out->nonfinite)
    st = ganfw_dp_reduce(s, 0); /* data-parallel: the sum of the ranks' gradients */
  else
    ganfw_dp_disarm(s, 0);
  if (st == GANFW_OK && !out->nonfinite && !ganfw_sib_active(s->sib, 0)) {
    const int32_t pass = ganfw_alloc_set_pass(s->ctx->alloc, GANFW_PASS_OPTIMIZER);
    st = optim_step(c, out);
    ganfw_alloc_set_pass(s->ctx->alloc, pass);
  }
  ganfw_alloc_set_stage(s->ctx->alloc, GANFW_STAGE_SETUP);
  if (st == GANFW_OK && out->nonfinite) st = ganfw_net_stats_restore(s->classifier, c->stats);
  for (int32_t i = 0; i < s->n_memory && st == GANFW_OK; i++)
    if (s->memory[i].vt->step_end) st = s->memory[i].vt->step_end(s->memory[i].self);
  return st;
}

/* --- evaluation ---------------------------------------------------------------------- */

void ganfw_eval_result_free(ganfw_eval_result *r) {
  if (!r) return;
  free(r->confusion);
  r->confusion = NULL;
}

/* The evaluation's working set. */
typedef struct eval_run {
  ganfw_loader *loader;
  float *host_x;
  int32_t *host_y;
  ganfw_tensor *x, *y, *loss;
  float *host_logits;
  int32_t *host_labels;
  int64_t host_cap;
} eval_run;

static void eval_close(eval_run *e) {
  ganfw_loader_destroy(e->loader);
  free(e->host_x);
  free(e->host_y);
  free(e->host_logits);
  free(e->host_labels);
  ganfw_tensor_destroy(e->x);
  ganfw_tensor_destroy(e->y);
  ganfw_tensor_destroy(e->loss);
}

/* One batch of n rows (of the loader's host buffers) through the net under no-grad. */
static ganfw_status eval_batch(ganfw_session *s, eval_run *e, int64_t n, ganfw_eval_result *out) {
  ganfw_tensor *x = ganfw_tensor_rows(e->x, 0, n, "eval.batch");
  ganfw_tensor *y = ganfw_tensor_rows(e->y, 0, n, "eval.labels");
  ganfw_tensor *out_y = NULL, *logits = NULL;
  int64_t classes = 0, right = 0;
  double loss = 0;
  ganfw_status st = x && y ? GANFW_OK : ganfw_error_code();
  if (st == GANFW_OK) st = ganfw_tensor_from_host(x, e->host_x, x->nbytes);
  if (st == GANFW_OK) st = ganfw_tensor_from_host(y, e->host_y, y->nbytes);
  if (st == GANFW_OK) st = ganfw_net_forward(s->classifier, x, NULL, &out_y); /* no-grad */
  if (st == GANFW_OK) st = logit_classes(out_y, n, &classes);
  if (st == GANFW_OK && out->classes && classes != out->classes)
    st = ganfw_error_set(GANFW_ERR_INTERNAL, "the classifier changed its class count");
  if (st == GANFW_OK && !out->confusion) {
    out->classes = (int32_t)classes;
    out->confusion = calloc((size_t)(classes * classes), sizeof *out->confusion);
    if (!out->confusion) st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  if (st == GANFW_OK &&
      !(logits = ganfw_tensor_as_dtype(out_y, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE)))
    st = ganfw_error_code();
  ganfw_tensor_destroy(out_y);
  if (st == GANFW_OK)
    st = host_room(&e->host_logits, &e->host_labels, &e->host_cap, n * classes, n);
  if (st == GANFW_OK) st = check_labels(e->host_y, n, classes);
  if (st == GANFW_OK)
    st = score(s->ctx, logits, y, classes, 0.0, e->loss, e->host_logits, e->host_labels, &loss,
               &right, out->confusion);
  ganfw_tensor_destroy(logits);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(y);
  out->loss += loss * (double)n;
  out->correct += right;
  out->n += n;
  return st;
}

static ganfw_status eval_open(ganfw_session *s, const ganfw_dataset *ds, int64_t batch,
                              eval_run *e) {
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  if (c != s->data_info.channels || h != s->data_info.height || w != s->data_info.width)
    return ganfw_error_set(
        GANFW_ERR_CONFIG, "%s gives %dx%dx%d images; the classifier was built for %dx%dx%d",
        ganfw_dataset_name(ds), (int)c, (int)h, (int)w, (int)s->data_info.channels,
        (int)s->data_info.height, (int)s->data_info.width);
  if (batch > ganfw_dataset_size(ds)) batch = ganfw_dataset_size(ds);
  ganfw_loader_config lc = {.batch_size = (int32_t)batch,
                            .seed = s->ctx->seed,
                            .shuffle = 0,
                            .drop_last = 0,
                            .prefetch = 1,
                            .workers = s->loader_cfg.workers};
  ganfw_status st = ganfw_loader_create(ds, &lc, &e->loader);
  if (st != GANFW_OK) return st;
  int64_t xs[4] = {batch, c, h, w}, one = 1;
  e->x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "eval.batch");
  e->y = ganfw_tensor_create(s->ctx, GANFW_DTYPE_I32, 1, &batch, GANFW_MEM_DATA, "eval.labels");
  e->loss = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 1, &one, GANFW_MEM_OTHER, "eval.loss");
  if (!e->x || !e->y || !e->loss) return ganfw_error_code();
  e->host_x = malloc((size_t)e->x->nbytes);
  e->host_y = malloc((size_t)batch * sizeof *e->host_y);
  if (!e->host_x || !e->host_y) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  return GANFW_OK;
}

ganfw_status ganfw_classifier_evaluate(ganfw_session *s, const ganfw_dataset *ds, int64_t batch,
                                       ganfw_eval_result *out) {
  memset(out, 0, sizeof *out);
  if (batch < 1 || !ds || ganfw_dataset_size(ds) < 1)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "evaluation needs a batch size and images");
  const double t0 = ganfw_now_s();
  eval_run e = {0};
  ganfw_status st = eval_open(s, ds, batch, &e);
  ganfw_net_set_train(s->classifier, 0, 0);
  ganfw_alloc_reset_peak(s->ctx->alloc);
  const int32_t stage = ganfw_alloc_set_stage(s->ctx->alloc, GANFW_STAGE_EVAL);
  for (int64_t b = 0, nb = st == GANFW_OK ? ganfw_loader_batches_per_epoch(e.loader) : 0;
       b < nb && st == GANFW_OK; b++) {
    ganfw_batch_info bi;
    st = ganfw_loader_next(e.loader, e.host_x, e.host_y, &bi);
    if (st == GANFW_OK) st = eval_batch(s, &e, bi.n, out);
  }
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  out->peak_activation = as.category[GANFW_MEM_ACTIVATION].peak;
  ganfw_alloc_set_stage(s->ctx->alloc, stage);
  ganfw_net_set_train(s->classifier, 1, 1);
  eval_close(&e);
  if (st != GANFW_OK) {
    ganfw_eval_result_free(out);
    return ganfw_error_wrap(st, "evaluating on %s", ganfw_dataset_name(ds));
  }
  out->loss = out->n ? out->loss / (double)out->n : 0;
  out->accuracy = out->n ? (double)out->correct / (double)out->n : 0;
  out->seconds = ganfw_now_s() - t0;
  return GANFW_OK;
}

ganfw_status ganfw_classifier_open_test_split(ganfw_session *s, ganfw_dataset **out) {
  ganfw_transform tf = s->transform;
  tf.hflip = 0; /* no random augmentation when measuring */
  ganfw_status st = ganfw_dataset_open(s->data_kind, s->data_path, 0, &tf, out);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "the test split of data.path");
}
