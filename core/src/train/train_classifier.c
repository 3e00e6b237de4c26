/* The classifier training loop of `ganfw CONFIG`: batches and labels from the loader, one
 * ganfw_classifier_step per batch, an evaluation on the test split at the end of every
 * epoch (and of the run) in no-grad eval mode, and the run's outputs: metrics.csv (per
 * logged step), eval.csv (per evaluation), checkpoints/step_NNNNNNNN.safetensors,
 * checkpoints/best.safetensors (the highest test accuracy), config.resolved.yaml and
 * memory.json. `train.resume` continues as the GAN trainer's does, the best accuracy so
 * far included. Ctrl-C finishes the step, writes a checkpoint and stops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "train/outputs.h"
#include "train/nonfinite.h"
#include "train/param_groups.h"
#include "train/dp.h"
#include "train/run_state.h"
#include "runtime/tensor.h"
#include "train/trainer.h"

#define EVAL_COLUMNS                                                                               \
  "step,epoch,test_loss,test_acc,eval_peak_activation,train_peak_activation,eval_seconds"

typedef struct cls_run {
  ganfw_session *s;
  ganfw_classifier *cls;
  ganfw_loader *loader;
  ganfw_dataset *test;
  float *host_x;
  int32_t *host_y;
  int32_t x_pinned, y_pinned; /* host_x/host_y are page-locked staging (CUDA) */
  ganfw_tensor *x, *y;
  ganfw_metrics *metrics;
  ganfw_file_appender *eval_csv;
  char ckpt_dir[4096], eval_path[4200];
  int64_t step, total, eval_batch;
  int64_t skipped;                 /* optimizer steps skipped by a strategy, this run */
  ganfw_nonfinite_count nonfinite; /* steps train.on_nonfinite: skip skipped */
  double best_acc;                 /* -1: no evaluation yet */
  int64_t best_step;
  int64_t last_eval_step;
  int32_t memory_written; /* memory.json was written before the final evaluation */
} cls_run;

static ganfw_ckpt_net ckpt_net(ganfw_session *s) {
  return (ganfw_ckpt_net){.net = s->classifier,
                          .prefix = "classifier",
                          .optim_vt = s->optim[0].vt,
                          .optim_self = s->optim[0].self};
}

/* A full checkpoint (weights, optimizer, position, best accuracy) at `path`; test_acc < 0
 * leaves out the "test_acc" of this checkpoint. */
static ganfw_status save_to(cls_run *r, const char *path, double test_acc) {
  ganfw_extras e = {.n = 0};
  if (r->best_acc >= 0) {
    ganfw_extras_add(&e, "classifier.best_test_acc", "%.17g", r->best_acc);
    ganfw_extras_add(&e, "classifier.best_step", "%.0f", (double)r->best_step);
  }
  if (test_acc >= 0) ganfw_extras_add(&e, "classifier.test_acc", "%.17g", test_acc);
  ganfw_ckpt_net net = ckpt_net(r->s);
  ganfw_status st = ganfw_nonfinite_check_weights(r->s, r->step);
  if (st != GANFW_OK) return st;
  /* every rank: zero's state goes to rank 0, which alone writes */
  st = ganfw_dp_before_save(r->s);
  if (st == GANFW_OK && ganfw_dp_writes(r->s))
    st = ganfw_run_save_checkpoint(r->s, path, &net, 1, r->loader, r->step, &e);
  ganfw_dp_after_save(r->s);
  return ganfw_dp_agree(r->s, st, "writing the checkpoint");
}

static ganfw_status save_checkpoint(cls_run *r) {
  char path[4200];
  ganfw_status st = ganfw_checkpoint_path(r->ckpt_dir, r->step, path, sizeof path);
  return st == GANFW_OK ? save_to(r, path, -1) : st;
}

static ganfw_status resume(cls_run *r) {
  ganfw_ckpt_net net = ckpt_net(r->s);
  ganfw_ckpt_meta *meta = NULL;
  ganfw_status st = ganfw_dp_before_resume(r->s);
  if (st == GANFW_OK) st = ganfw_run_resume(r->s, r->ckpt_dir, &net, 1, r->loader, &meta);
  ganfw_status sc = ganfw_dp_after_resume(r->s, st == GANFW_OK);
  if (st == GANFW_OK) st = sc;
  if (meta) {
    r->step = r->last_eval_step = meta->step;
    const char *best = ganfw_ckpt_meta_extra(meta, "classifier.best_test_acc");
    const char *best_step = ganfw_ckpt_meta_extra(meta, "classifier.best_step");
    if (best) r->best_acc = strtod(best, NULL);
    if (best_step) r->best_step = strtoll(best_step, NULL, 10);
  }
  ganfw_ckpt_meta_free(meta);
  return st;
}

/* eval.csv: the header, then one row per evaluation; on resume the rows of steps before
 * from_step are kept. */
static ganfw_status open_eval_csv(cls_run *r, int32_t append, int64_t from_step) {
  ganfw_status st = ganfw_csv_rewrite(r->eval_path, EVAL_COLUMNS, append, from_step);
  if (st != GANFW_OK) return st;
  return ganfw_file_append_open(r->eval_path, &r->eval_csv);
}

static ganfw_status open_run(cls_run *r) {
  ganfw_session *s = r->s;
  const char *out = s->run->out_dir;
  ganfw_status st;
  if ((st = ganfw_path_join(r->ckpt_dir, sizeof r->ckpt_dir, out, "checkpoints")) ||
      (st = ganfw_path_join(r->eval_path, sizeof r->eval_path, out, "eval.csv")) ||
      (st = ganfw_mkdirs(r->ckpt_dir)))
    return st;
  const int32_t writes = ganfw_dp_writes(s); /* rank 0 alone writes the run's outputs */
  if (writes) ganfw_run_folder_clean(out);
  if (writes && (st = ganfw_write_resolved_config(s->run->config, out)) != GANFW_OK) return st;
  ganfw_loader_config lc; /* data-parallel: this rank's rows of each batch */
  ganfw_dp_loader_config(s, &lc);
  if ((st = ganfw_loader_create(s->data, &lc, &r->loader)) != GANFW_OK) return st;
  if ((st = ganfw_classifier_open_test_split(s, &r->test)) != GANFW_OK) return st;
  const int64_t B = s->train.batch_size;
  int64_t full_batches = ganfw_dataset_size(s->data) / B; /* a short last batch is skipped */
  r->total = s->train.epochs * full_batches;
  if (s->train.max_steps > 0 && (r->total == 0 || s->train.max_steps < r->total))
    r->total = s->train.max_steps;
  if (full_batches == 0)
    return ganfw_error_set(
        GANFW_ERR_CONFIG, "train.batch_size %lld is larger than %s (%lld images); lower it",
        (long long)B, ganfw_dataset_name(s->data), (long long)ganfw_dataset_size(s->data));
  r->eval_batch = B / s->exec.micro_batches; /* as many rows at a time as training runs */
  if ((st = ganfw_classifier_create(s, &r->cls)) != GANFW_OK) return st;
  const int64_t b = ganfw_dp_local_batch(s); /* this rank's rows */
  int64_t xs[4] = {b, s->data_info.channels, s->data_info.height, s->data_info.width};
  r->x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "batch");
  r->y = ganfw_tensor_create(s->ctx, GANFW_DTYPE_I32, 1, &b, GANFW_MEM_DATA, "labels");
  if (!r->x || !r->y) return ganfw_error_code();
  r->host_x = ganfw_host_staging_alloc(s->ctx, (size_t)r->x->nbytes, &r->x_pinned);
  r->host_y = ganfw_host_staging_alloc(s->ctx, (size_t)b * sizeof *r->host_y, &r->y_pinned);
  if (!r->host_x || !r->host_y) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (*s->train.resume && (st = resume(r)) != GANFW_OK) return st;
  char columns[4096] = "step,epoch,loss,acc,lr,allocated,reserved,step_seconds,skipped,"
                       "nonfinite_skips";
  if (s->train.clip_grad_norm[0] > 0) strcat(columns, ",grad_norm");
  ganfw_extras e = {.n = 0};
  ganfw_extras_add_strategies(s, &e);
  for (int32_t i = 0; i < e.n; i++)
    snprintf(columns + strlen(columns), sizeof columns - strlen(columns), ",%s",
             e.keys[i] + strlen("memory."));
  const int32_t append = *s->train.resume != '\0';
  if (!writes) return GANFW_OK;
  if ((st = ganfw_metrics_open(out, columns, append, r->step + 1, &r->metrics)) != GANFW_OK)
    return st;
  return open_eval_csv(r, append, r->step + 1);
}

static void close_run(cls_run *r) {
  ganfw_metrics_close(r->metrics);
  ganfw_file_append_close(r->eval_csv);
  ganfw_host_staging_free(r->s->ctx, r->host_x, r->x_pinned);
  ganfw_host_staging_free(r->s->ctx, r->host_y, r->y_pinned);
  ganfw_tensor_destroy(r->x);
  ganfw_tensor_destroy(r->y);
  ganfw_classifier_destroy(r->cls);
  ganfw_loader_destroy(r->loader);
  ganfw_dataset_destroy(r->test);
}

static ganfw_status log_step(cls_run *r, const ganfw_classifier_stats *cs,
                             const ganfw_batch_info *bi, double seconds, double rate, double eta) {
  ganfw_session *s = r->s;
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  double row[11 + GANFW_MAX_EXTRA] = {(double)r->step,
                                      (double)bi->epoch,
                                      cs->loss,
                                      cs->accuracy,
                                      s->optim[0].lr,
                                      (double)as.allocated.current,
                                      (double)as.reserved.current,
                                      seconds,
                                      (double)r->skipped,
                                      (double)r->nonfinite.total};
  int32_t n = 10;
  if (s->train.clip_grad_norm[0] > 0) row[n++] = cs->grad_norm;
  ganfw_extras e = {.n = 0};
  ganfw_extras_add_strategies(s, &e);
  for (int32_t i = 0; i < e.n; i++) row[n++] = strtod(e.values[i], NULL);
  char losses[96];
  snprintf(losses, sizeof losses, "loss %.4f acc %.3f lr %.3g", cs->loss, cs->accuracy,
           s->optim[0].lr);
  if (!r->metrics) return GANFW_OK; /* a rank other than 0 */
  ganfw_progress(r->step, r->total, rate, eta, losses, s->ctx->alloc, r->step == r->total);
  return ganfw_metrics_row(r->metrics, row, n);
}

/* Evaluates on the test split after step r->step, `epochs` epochs into training: eval.csv,
 * a log line, and best.safetensors when the accuracy is the highest so far. The training
 * peak is the allocator's activation peak since the last evaluation reset it. */
static ganfw_status evaluate(cls_run *r, double epochs) {
  ganfw_session *s = r->s;
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  const int64_t train_peak = as.category[GANFW_MEM_ACTIVATION].peak;
  ganfw_status st = GANFW_OK;
  /* The evaluation resets the allocator's peaks: memory.json keeps training's. */
  if (r->step == r->total) {
    if ((st = ganfw_dp_gather_peaks(s, &s->predicted)) != GANFW_OK) return st; /* every rank */
    if (ganfw_dp_writes(s) &&
        (st = ganfw_write_memory_json(s->ctx->alloc, s->run->out_dir, &s->predicted)) != GANFW_OK)
      return st;
    r->memory_written = 1;
  }
  ganfw_eval_result ev;
  /* every rank evaluates alike (the same weights and running statistics), so that they
   * agree on the best checkpoint */
  if ((st = ganfw_dp_sync_buffers(s)) != GANFW_OK) return st;
  if ((st = ganfw_classifier_evaluate(s, r->test, r->eval_batch, &ev)) != GANFW_OK) return st;
  r->last_eval_step = r->step;
  if (r->eval_csv)
    st = ganfw_file_appendf(r->eval_csv, "%lld,%.6g,%.9g,%.9g,%lld,%lld,%.6g\n", (long long)r->step,
                            epochs, ev.loss, ev.accuracy, (long long)ev.peak_activation,
                            (long long)train_peak, ev.seconds);
  const double mib = 1024.0 * 1024.0;
  ganfw_log(GANFW_LOG_INFO,
            "step %lld (epoch %.2f): test accuracy %.2f%% (%lld/%lld), loss %.4f; peak activations "
            "%.2f MiB evaluating (no-grad) vs %.2f MiB training",
            (long long)r->step, epochs, 100.0 * ev.accuracy, (long long)ev.correct, (long long)ev.n,
            ev.loss, ev.peak_activation / mib, train_peak / mib);
  if (st == GANFW_OK && ev.accuracy > r->best_acc) {
    r->best_acc = ev.accuracy;
    r->best_step = r->step;
    char path[4200];
    st = ganfw_path_join(path, sizeof path, r->ckpt_dir, "best.safetensors");
    if (st == GANFW_OK) st = save_to(r, path, ev.accuracy);
  }
  ganfw_eval_result_free(&ev);
  return st;
}

static ganfw_status train_loop(cls_run *r) {
  ganfw_session *s = r->s;
  ganfw_status st = GANFW_OK;
  const int64_t B = s->train.batch_size, size = ganfw_dataset_size(s->data);
  double rate = 0, t_start = ganfw_now_s();
  int64_t first_step = r->step;
  while (r->step < r->total && st == GANFW_OK) {
    ganfw_batch_info bi;
    if ((st = ganfw_dp_step_begin(s, r->step + 1)) != GANFW_OK) break;
    if ((st = ganfw_loader_next(r->loader, r->host_x, r->host_y, &bi)) != GANFW_OK) break;
    if (bi.n == B) {
      ganfw_alloc_trace_step(s->ctx->alloc, r->step + 1); /* device.trace */
      double t0 = ganfw_now_s();
      /* asynchronous from page-locked memory: the step's loss, read back at its end, waits
       * for the copies before the loader refills the buffers */
      if ((st = ganfw_tensor_from_staging(r->x, r->host_x, r->x->nbytes, r->x_pinned)) ||
          (st = ganfw_tensor_from_staging(r->y, r->host_y, r->y->nbytes, r->y_pinned)))
        break;
      ganfw_optim_set_lr(&s->optim[0], &s->schedule, r->step, r->total);
      ganfw_classifier_stats cs;
      if ((st = ganfw_classifier_step(r->cls, r->x, r->y, &cs)) != GANFW_OK) {
        st = ganfw_error_wrap(st, "step %lld", (long long)(r->step + 1));
        break;
      }
      r->step++;
      ganfw_alloc_trace_step_end(s->ctx->alloc);
      r->skipped += cs.skipped;
      if ((st = ganfw_nonfinite_after_step(s, r->step, cs.nonfinite ? "the update was" : NULL,
                                           cs.nonfinite_what, &r->nonfinite)))
        break;
      double t1 = ganfw_now_s(), elapsed = t1 - t_start;
      rate = elapsed > 0 ? (double)(r->step - first_step) * (double)B / elapsed : 0;
      double eta = elapsed / (double)(r->step - first_step) * (double)(r->total - r->step);
      if ((s->train.log_every && r->step % s->train.log_every == 0) || r->step == first_step + 1 ||
          r->step == r->total)
        st = log_step(r, &cs, &bi, t1 - t0, rate, eta);
    }
    const int last = r->step == r->total;
    if ((bi.last_in_epoch || last) ||
        (s->train.checkpoint_every && r->step % s->train.checkpoint_every == 0))
      ganfw_calibration_take(&s->predicted, s->ctx->alloc); /* the steps' peaks */
    if (st == GANFW_OK && (bi.last_in_epoch || last) && r->last_eval_step != r->step) {
      double epochs = bi.last_in_epoch
                          ? (double)(bi.epoch + 1)
                          : (double)bi.epoch + (double)(bi.offset + bi.n) / (double)size;
      st = evaluate(r, epochs);
      ganfw_ctx_empty_cache_at(s->ctx, GANFW_EMPTY_CACHE_AFTER_EVAL); /* device.empty_cache */
    }
    if (st == GANFW_OK && bi.last_in_epoch)
      ganfw_ctx_empty_cache_at(s->ctx, GANFW_EMPTY_CACHE_PER_EPOCH);
    int saved = 0;
    if (st == GANFW_OK && bi.n == B &&
        ((s->train.checkpoint_every && r->step % s->train.checkpoint_every == 0) || last)) {
      st = save_checkpoint(r);
      saved = 1;
    }
    if (st == GANFW_OK && ganfw_dp_any(s, ganfw_interrupt_requested(), &st) && st == GANFW_OK) {
      if (!saved) st = save_checkpoint(r);
      if (st == GANFW_OK) st = ganfw_interrupt_error(r->step, r->ckpt_dir);
    }
  }
  return st;
}

ganfw_status ganfw_train_classifier(ganfw_session *s) {
  cls_run r = {.s = s, .best_acc = -1, .best_step = -1, .last_eval_step = -1};
  const double t0 = ganfw_now_s();
  ganfw_status st = open_run(&r);
  if (st == GANFW_OK && !ganfw_run_already_done(r.step, r.total)) {
    ganfw_alloc_stats as;
    ganfw_alloc_get_stats(s->ctx->alloc, &as);
    const double mib = 1024.0 * 1024.0;
    ganfw_log(GANFW_LOG_INFO,
              "memory before the first step: params %.2f MiB, grads %.2f MiB, optim_state %.2f "
              "MiB, data %.2f MiB (reserved %.2f MiB)",
              as.category[GANFW_MEM_PARAM].current / mib, as.category[GANFW_MEM_GRAD].current / mib,
              as.category[GANFW_MEM_OPTIM_STATE].current / mib,
              as.category[GANFW_MEM_DATA].current / mib, as.reserved.current / mib);
    ganfw_log(GANFW_LOG_INFO,
              "training %s for %lld steps (batch %lld, %lld training and %lld test images, "
              "lr schedule %s) into %s",
              ganfw_run_model_name(s->run), (long long)r.total, (long long)s->train.batch_size,
              (long long)ganfw_dataset_size(s->data), (long long)ganfw_dataset_size(r.test),
              ganfw_schedule_name(s->schedule.kind), s->run->out_dir);
    ganfw_interrupt_begin();
    st = train_loop(&r);
    ganfw_interrupt_end();
    if (st == GANFW_OK && r.best_acc >= 0)
      ganfw_log(GANFW_LOG_INFO, "done in %.1f s: best test accuracy %.2f%% at step %lld",
                ganfw_now_s() - t0, 100.0 * r.best_acc, (long long)r.best_step);
    if (r.nonfinite.total > 0)
      ganfw_log(GANFW_LOG_WARN,
                "%lld of the steps skipped their update for NaN or inf values "
                "(train.on_nonfinite: skip; metrics.csv column nonfinite_skips)",
                (long long)r.nonfinite.total);
  }
  if (st == GANFW_OK && s->ctx && !r.memory_written)
    st = ganfw_dp_gather_peaks(s, &s->predicted); /* every rank */
  if (s->ctx && !r.memory_written && ganfw_dp_writes(s)) {
    ganfw_error_saved first;
    ganfw_error_save(&first, st);
    st = ganfw_error_first(&first,
                           ganfw_write_memory_json(s->ctx->alloc, s->run->out_dir, &s->predicted));
  }
  close_run(&r);
  return st;
}
