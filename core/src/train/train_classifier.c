/* The built-in trainer `classifier` (loop.h): one ganfw_classifier_step per batch and its
 * labels, an evaluation on the test split at the end of every epoch (and of the run) in
 * no-grad eval mode into eval.csv, and checkpoints/best.safetensors at the highest test
 * accuracy, which a resumed run remembers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "runtime/tensor.h"
#include "train/dp.h"
#include "train/loop.h"
#include "train/trainer.h"

typedef struct cls_run {
  ganfw_session *s;
  ganfw_classifier *cls;
  ganfw_tensor *y;
  int64_t eval_batch;
  int64_t skipped; /* optimizer steps skipped by a strategy, this run */
  double best_acc; /* -1: no evaluation yet */
  int64_t best_step;
  ganfw_classifier_stats last; /* the last step's */
} cls_run;

static int32_t ckpt_nets(void *self, ganfw_ckpt_net *nets) {
  ganfw_session *s = ((cls_run *)self)->s;
  nets[0] = (ganfw_ckpt_net){.net = s->classifier,
                             .prefix = "classifier",
                             .optim_vt = s->optim[0].vt,
                             .optim_self = s->optim[0].self};
  return 1;
}

/* The best accuracy so far, in every checkpoint. */
static void ckpt_extras(void *self, ganfw_extras *e) {
  const cls_run *r = self;
  if (r->best_acc < 0) return;
  ganfw_extras_add(e, "classifier.best_test_acc", "%.17g", r->best_acc);
  ganfw_extras_add(e, "classifier.best_step", "%.0f", (double)r->best_step);
}

static void resumed(void *self, const ganfw_ckpt_meta *meta) {
  cls_run *r = self;
  const char *best = ganfw_ckpt_meta_extra(meta, "classifier.best_test_acc");
  const char *best_step = ganfw_ckpt_meta_extra(meta, "classifier.best_step");
  if (best) r->best_acc = strtod(best, NULL);
  if (best_step) r->best_step = strtoll(best_step, NULL, 10);
}

static void cls_close(void *self) {
  cls_run *r = self;
  if (!r) return;
  ganfw_tensor_destroy(r->y);
  ganfw_classifier_destroy(r->cls);
  free(r);
}

static ganfw_status cls_open(ganfw_loop *L, void **self) {
  ganfw_session *s = L->s;
  cls_run *r = calloc(1, sizeof *r);
  if (!r) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  *self = r;
  r->s = s;
  r->best_acc = -1;
  r->best_step = -1;
  ganfw_status st;
  if (!L->planning && (st = ganfw_classifier_open_test_split(s, &L->test)) != GANFW_OK) return st;
  r->eval_batch = s->train.batch_size / s->exec.micro_batches; /* as many rows as training */
  if ((st = ganfw_classifier_create(s, &r->cls)) != GANFW_OK) return st;
  if ((st = ganfw_loop_open_batch(L, 1)) != GANFW_OK) return st;
  const int64_t b = L->x->shape[0]; /* this rank's rows */
  r->y = ganfw_tensor_create(s->ctx, GANFW_DTYPE_I32, 1, &b, GANFW_MEM_DATA, "labels");
  return r->y ? GANFW_OK : ganfw_error_code();
}

static ganfw_status cls_step(void *self, ganfw_loop *L, const ganfw_batch_info *bi,
                             ganfw_loop_step *out) {
  cls_run *r = self;
  (void)bi;
  ganfw_status st = ganfw_tensor_from_staging(r->y, L->host_y, r->y->nbytes, L->y_pinned);
  if (st == GANFW_OK) st = ganfw_classifier_step(r->cls, L->x, r->y, &r->last);
  if (st != GANFW_OK) return st;
  r->skipped += r->last.skipped;
  out->nonfinite = r->last.nonfinite ? "the update was" : NULL;
  out->what = r->last.nonfinite_what;
  return GANFW_OK;
}

static void columns(void *self, int32_t tail, char *buf, size_t cap) {
  const ganfw_session *s = ((cls_run *)self)->s;
  snprintf(buf, cap, "%s",
           !tail                            ? "loss,acc,lr"
           : s->train.clip_grad_norm[0] > 0 ? "skipped,nonfinite_skips,grad_norm"
                                            : "skipped,nonfinite_skips");
}

static int32_t row(void *self, int32_t tail, const ganfw_loop_row *c, double *v) {
  const cls_run *r = self;
  const ganfw_classifier_stats *cs = &r->last;
  int32_t n = 0;
  if (!tail) {
    v[n++] = cs->loss;
    v[n++] = cs->accuracy;
    v[n++] = r->s->optim[0].lr;
    return n;
  }
  v[n++] = (double)r->skipped;
  v[n++] = (double)c->nonfinite_skips;
  if (r->s->train.clip_grad_norm[0] > 0) v[n++] = cs->grad_norm;
  return n;
}

static void progress(void *self, char *text, size_t cap) {
  const cls_run *r = self;
  snprintf(text, cap, "loss %.4f acc %.3f lr %.3g", r->last.loss, r->last.accuracy,
           r->s->optim[0].lr);
}

static void eval_columns(void *self, char *buf, size_t cap) {
  (void)self;
  snprintf(buf, cap,
           "step,epoch,test_loss,test_acc,eval_peak_activation,train_peak_activation,"
           "eval_seconds");
}

/* Evaluates on the test split after L->step steps, `epochs` epochs into training: eval.csv,
 * a log line, and best.safetensors when the accuracy is the highest so far. The training
 * peak is the allocator's activation peak since the last evaluation reset it. */
static ganfw_status evaluate(void *self, ganfw_loop *L, double epochs) {
  cls_run *r = self;
  ganfw_session *s = r->s;
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  const int64_t train_peak = as.category[GANFW_MEM_ACTIVATION].peak;
  ganfw_eval_result ev;
  /* every rank evaluates alike (the same weights and running statistics), so that they
   * agree on the best checkpoint */
  ganfw_status st = ganfw_dp_sync_buffers(s);
  if (st != GANFW_OK) return st;
  if ((st = ganfw_classifier_evaluate(s, L->test, r->eval_batch, &ev)) != GANFW_OK) return st;
  if (L->eval_csv)
    st = ganfw_file_appendf(L->eval_csv, "%lld,%.6g,%.9g,%.9g,%lld,%lld,%.6g\n", (long long)L->step,
                            epochs, ev.loss, ev.accuracy, (long long)ev.peak_activation,
                            (long long)train_peak, ev.seconds);
  const double mib = 1024.0 * 1024.0;
  ganfw_log(GANFW_LOG_INFO,
            "step %lld (epoch %.2f): test accuracy %.2f%% (%lld/%lld), loss %.4f; peak activations "
            "%.2f MiB evaluating (no-grad) vs %.2f MiB training",
            (long long)L->step, epochs, 100.0 * ev.accuracy, (long long)ev.correct, (long long)ev.n,
            ev.loss, ev.peak_activation / mib, train_peak / mib);
  if (st == GANFW_OK && ev.accuracy > r->best_acc) {
    r->best_acc = ev.accuracy;
    r->best_step = L->step;
    char path[4200];
    ganfw_extras more = {.n = 0};
    ganfw_extras_add(&more, "classifier.test_acc", "%.17g", ev.accuracy);
    st = ganfw_path_join(path, sizeof path, L->ckpt_dir, "best.safetensors");
    if (st == GANFW_OK) st = ganfw_loop_save(L, path, &more);
  }
  ganfw_eval_result_free(&ev);
  return st;
}

static void describe(void *self, ganfw_loop *L, char *buf, size_t cap) {
  const ganfw_session *s = ((cls_run *)self)->s;
  snprintf(buf, cap, ", %lld training and %lld test images, lr schedule %s",
           (long long)ganfw_dataset_size(s->data), (long long)ganfw_dataset_size(L->test),
           ganfw_schedule_name(s->schedule.kind));
}

static void finished(void *self, char *buf, size_t cap) {
  const cls_run *r = self;
  if (r->best_acc >= 0)
    snprintf(buf, cap, ": best test accuracy %.2f%% at step %lld", 100.0 * r->best_acc,
             (long long)r->best_step);
}

static void report(void *self, ganfw_step_report *out) {
  const ganfw_classifier_stats *cs = &((cls_run *)self)->last;
  *out = (ganfw_step_report){.loss = cs->loss, .accuracy = cs->accuracy, .skipped_g = cs->skipped};
}

const ganfw_loop_trainer ganfw_classifier_trainer = {
    .name = "classifier",
    .open = cls_open,
    .close = cls_close,
    .columns = columns,
    .row = row,
    .progress = progress,
    .step = cls_step,
    .ckpt_nets = ckpt_nets,
    .ckpt_extras = ckpt_extras,
    .resumed = resumed,
    .eval_columns = eval_columns,
    .evaluate = evaluate,
    .describe = describe,
    .finished = finished,
    .report = report,
    .skipped_words = "skipped their update",
};
