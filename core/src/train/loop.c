/* The one training loop of `ganfw CONFIG` (loop.h): batches from the loader, one trainer
 * step per full batch, and the run's outputs: metrics.csv, eval.csv, samples/step_NNNNNN.png,
 * checkpoints/step_NNNNNNNN.safetensors, config.resolved.yaml and memory.json.
 * `train.resume` continues from a checkpoint with the same parameters, optimizer state, RNG
 * position and loader position, so that on the CPU the continued run is bitwise the
 * uninterrupted one. Ctrl-C or SIGTERM finishes the step, writes a checkpoint and stops.
 * Memory is logged as the allocator holds it at the row and as its peaks since the row
 * before (the steps' peaks, which a between-steps reading never sees), and the run's peaks
 * at its end. */
#include "train/loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "runtime/tensor.h"
#include "train/dp.h"
#include "train/nonfinite.h"
#include "train/param_groups.h"
#include "train/prune_run.h"

typedef struct loop_run {
  ganfw_loop L;
  ganfw_metrics *metrics;
  char samples_dir[4096], eval_path[4200];
  int64_t last_eval_step; /* -1: none yet */
  double comm_seconds;    /* the last step's time in collectives */
  ganfw_nonfinite_count nonfinite;
  int64_t peak_allocated, peak_reserved; /* the run's, over the windows taken so far */
} loop_run;

const ganfw_loop_trainer *ganfw_session_trainer(const ganfw_session *s) {
  return s->family == GANFW_MODEL_NETS         ? &ganfw_program_trainer
         : s->family == GANFW_MODEL_CLASSIFIER ? &ganfw_classifier_trainer
                                               : &ganfw_gan_trainer;
}

static const char *trainer_name(const ganfw_loop *L) {
  return L->t->name ? L->t->name : L->s->trainer_name;
}

ganfw_status ganfw_loop_open_batch(ganfw_loop *L, int32_t labels) {
  ganfw_session *s = L->s;
  const int64_t b = ganfw_dp_local_batch(s); /* data-parallel: this rank's rows */
  int64_t xs[4] = {b, s->data_info.channels, s->data_info.height, s->data_info.width};
  L->x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "batch");
  if (!L->x) return ganfw_error_code();
  L->host_x = ganfw_host_staging_alloc(s->ctx, (size_t)L->x->nbytes, &L->x_pinned);
  if (labels)
    L->host_y = ganfw_host_staging_alloc(s->ctx, (size_t)b * sizeof *L->host_y, &L->y_pinned);
  if (!L->host_x || (labels && !L->host_y))
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  return GANFW_OK;
}

/* Every rank: a sharded optimizer's state goes to rank 0 (memory: [zero]), which alone
 * writes; the others take its outcome. */
ganfw_status ganfw_loop_save(ganfw_loop *L, const char *path, const ganfw_extras *more) {
  ganfw_session *s = L->s;
  ganfw_ckpt_net nets[GANFW_MAX_NETS + 1];
  const int32_t n = L->t->ckpt_nets(L->self, nets);
  ganfw_extras e = {.n = 0};
  if (L->t->ckpt_extras) L->t->ckpt_extras(L->self, &e);
  for (int32_t i = 0; more && i < more->n; i++)
    if (e.n < GANFW_MAX_EXTRA) {
      snprintf(e.keys[e.n], sizeof e.keys[e.n], "%s", more->keys[i]);
      snprintf(e.values[e.n], sizeof e.values[e.n], "%s", more->values[i]);
      e.n++;
    }
  ganfw_status st = ganfw_nonfinite_check_weights(s, L->step);
  if (st != GANFW_OK) return st;
  st = ganfw_dp_before_save(s);
  if (st == GANFW_OK && ganfw_dp_writes(s))
    st = ganfw_run_save_checkpoint(s, path, nets, n, L->loader, L->step, e.n ? &e : NULL);
  ganfw_dp_after_save(s);
  return ganfw_dp_agree(s, st, "writing the checkpoint");
}

static ganfw_status save_checkpoint(loop_run *r) {
  char path[4200];
  ganfw_status st = ganfw_checkpoint_path(r->L.ckpt_dir, r->L.step, path, sizeof path);
  return st == GANFW_OK ? ganfw_loop_save(&r->L, path, NULL) : st;
}

static ganfw_status resume(loop_run *r) {
  ganfw_loop *L = &r->L;
  ganfw_ckpt_net nets[GANFW_MAX_NETS + 1];
  const int32_t n = L->t->ckpt_nets(L->self, nets);
  ganfw_ckpt_meta *meta = NULL;
  ganfw_status st = ganfw_dp_before_resume(L->s);
  if (st == GANFW_OK) st = ganfw_run_resume(L->s, L->ckpt_dir, nets, n, L->loader, &meta);
  ganfw_status sc = ganfw_dp_after_resume(L->s, st == GANFW_OK);
  if (st == GANFW_OK) st = sc;
  if (meta) {
    L->step = r->last_eval_step = meta->step;
    if (L->t->resumed) L->t->resumed(L->self, meta);
  }
  ganfw_ckpt_meta_free(meta);
  return st;
}

static void append_extras_columns(const ganfw_session *s, char *columns, size_t cap) {
  ganfw_extras e = {.n = 0};
  ganfw_extras_add_strategies(s, &e);
  for (int32_t i = 0; i < e.n; i++)
    snprintf(columns + strlen(columns), cap - strlen(columns), ",%s",
             e.keys[i] + strlen("memory."));
}

static ganfw_status open_run(loop_run *r) {
  ganfw_loop *L = &r->L;
  ganfw_session *s = L->s;
  const ganfw_loop_trainer *t = L->t;
  const char *out = s->run->out_dir;
  ganfw_status st;
  if ((st = ganfw_path_join(L->ckpt_dir, sizeof L->ckpt_dir, out, "checkpoints")) ||
      (st = ganfw_path_join(r->samples_dir, sizeof r->samples_dir, out, "samples")) ||
      (st = ganfw_path_join(r->eval_path, sizeof r->eval_path, out, "eval.csv")) ||
      (t->samples_dir && (st = ganfw_mkdirs(r->samples_dir))) || (st = ganfw_mkdirs(L->ckpt_dir)))
    return st;
  const int32_t writes = ganfw_dp_writes(s); /* rank 0 alone writes the run's outputs */
  if (writes) ganfw_run_folder_clean(out);
  if (writes && (st = ganfw_write_resolved_config(s->run->config, out)) != GANFW_OK) return st;
  ganfw_loader_config lc; /* data-parallel: this rank's rows of each batch */
  ganfw_dp_loader_config(s, &lc);
  if ((st = ganfw_loader_create(s->data, &lc, &L->loader)) != GANFW_OK) return st;
  const int64_t B = s->train.batch_size;
  const int64_t per_epoch =
      t->loader_epoch ? ganfw_loader_batches_per_epoch(L->loader) : ganfw_dataset_size(s->data) / B;
  if (per_epoch == 0) /* a short last batch is skipped */
    return ganfw_error_set(
        GANFW_ERR_CONFIG, "train.batch_size %lld is larger than %s (%lld images); lower it",
        (long long)B, ganfw_dataset_name(s->data), (long long)ganfw_dataset_size(s->data));
  L->total = s->train.epochs * per_epoch;
  if (s->train.max_steps > 0 && (L->total == 0 || s->train.max_steps < L->total))
    L->total = s->train.max_steps;
  if ((st = t->open(L, &L->self)) != GANFW_OK) return st;
  if (*s->train.resume && (st = resume(r)) != GANFW_OK) return st;
  char columns[4096] = "step,epoch,";
  t->columns(L->self, 0, columns + strlen(columns), sizeof columns - strlen(columns));
  strcat(columns, ",allocated,reserved,step_seconds,");
  t->columns(L->self, 1, columns + strlen(columns), sizeof columns - strlen(columns));
  append_extras_columns(s, columns, sizeof columns);
  strcat(columns, ",peak_allocated,peak_reserved"); /* last: earlier columns keep their place */
  const int32_t append = *s->train.resume != '\0';
  if (!writes) return GANFW_OK;
  if ((st = ganfw_metrics_open(out, columns, append, L->step + 1, &r->metrics)) != GANFW_OK)
    return st;
  if (!t->evaluate || !L->test) return GANFW_OK;
  char header[4096];
  t->eval_columns(L->self, header, sizeof header);
  if ((st = ganfw_csv_rewrite(r->eval_path, header, append, L->step + 1)) != GANFW_OK) return st;
  return ganfw_file_append_open(r->eval_path, &L->eval_csv);
}

void ganfw_loop_close(ganfw_loop *L) {
  if (L->t && L->t->close) L->t->close(L->self);
  L->self = NULL;
  if (L->s && L->s->ctx) {
    ganfw_host_staging_free(L->s->ctx, L->host_x, L->x_pinned);
    ganfw_host_staging_free(L->s->ctx, L->host_y, L->y_pinned);
  }
  L->host_x = NULL;
  L->host_y = NULL;
  ganfw_tensor_destroy(L->x);
  ganfw_loader_destroy(L->loader);
  ganfw_dataset_destroy(L->test);
  L->x = NULL;
  L->loader = NULL;
  L->test = NULL;
}

static void close_run(loop_run *r) {
  ganfw_metrics_close(r->metrics);
  ganfw_file_append_close(r->L.eval_csv);
  ganfw_loop_close(&r->L);
}

/* The allocator's peaks since the last call (or the run's start), folded into the run's; a
 * new window starts. */
static void take_window_peak(loop_run *r, int64_t *allocated, int64_t *reserved) {
  ganfw_alloc *a = r->L.s->ctx->alloc;
  ganfw_alloc_window_peak(a, allocated, reserved);
  ganfw_alloc_reset_window_peak(a);
  if (*allocated > r->peak_allocated) r->peak_allocated = *allocated;
  if (*reserved > r->peak_reserved) r->peak_reserved = *reserved;
}

static ganfw_status log_step(loop_run *r, const ganfw_batch_info *bi, double seconds, double rate,
                             double eta) {
  ganfw_loop *L = &r->L;
  ganfw_session *s = L->s;
  if (!r->metrics) return GANFW_OK; /* a rank other than 0 */
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  int64_t peak_allocated, peak_reserved;
  take_window_peak(r, &peak_allocated, &peak_reserved);
  const ganfw_loop_row c = {.nonfinite_skips = r->nonfinite.total, .comm_seconds = r->comm_seconds};
  double row[2 + 2 * GANFW_LOOP_MAX_COLUMNS + 3 + GANFW_MAX_EXTRA + 2];
  int32_t n = 0;
  row[n++] = (double)L->step;
  row[n++] = (double)bi->epoch;
  n += L->t->row(L->self, 0, &c, row + n);
  row[n++] = (double)as.allocated.current;
  row[n++] = (double)as.reserved.current;
  row[n++] = seconds;
  n += L->t->row(L->self, 1, &c, row + n);
  ganfw_extras e = {.n = 0};
  ganfw_extras_add_strategies(s, &e);
  for (int32_t i = 0; i < e.n; i++) row[n++] = strtod(e.values[i], NULL);
  row[n++] = (double)peak_allocated;
  row[n++] = (double)peak_reserved;
  char text[256] = "";
  L->t->progress(L->self, text, sizeof text);
  ganfw_progress(L->step, L->total, rate, eta, text, s->ctx->alloc, peak_allocated, peak_reserved,
                 L->step == L->total);
  return ganfw_metrics_row(r->metrics, row, n);
}

/* The evaluation resets the allocator's peaks: before the last one memory.json takes
 * training's. Every rank. */
static ganfw_status before_last_eval(loop_run *r) {
  ganfw_session *s = r->L.s;
  ganfw_status st = ganfw_dp_gather_peaks(s, &s->predicted);
  if (st == GANFW_OK && ganfw_dp_writes(s))
    st = ganfw_write_memory_json(s->ctx->alloc, s->ctx->algorithms, s->run->out_dir, &s->predicted);
  if (st == GANFW_OK) r->L.memory_written = 1;
  return st;
}

static ganfw_status train_loop(loop_run *r) {
  ganfw_loop *L = &r->L;
  ganfw_session *s = L->s;
  const ganfw_loop_trainer *t = L->t;
  ganfw_status st = GANFW_OK;
  const int64_t B = s->train.batch_size, size = ganfw_dataset_size(s->data);
  double rate = 0, t_start = ganfw_now_s();
  const int64_t first_step = L->step;
  while (L->step < L->total && st == GANFW_OK) {
    ganfw_batch_info bi;
    ganfw_alloc_trace_step(s->ctx->alloc, L->step + 1); /* device.trace */
    if ((st = ganfw_dp_step_begin(s, L->step + 1)) != GANFW_OK) break;
    if ((st = ganfw_loader_next(L->loader, L->host_x, L->host_y, &bi)) != GANFW_OK) break;
    const int full = bi.n == B; /* a short last batch (drop_last: false) is skipped */
    if (full) {
      double t0 = ganfw_now_s();
      /* asynchronous from page-locked memory: the step's losses, read back at its end, wait
       * for the copy before the loader refills the staging */
      if ((st = ganfw_tensor_from_staging(L->x, L->host_x, L->x->nbytes, L->x_pinned))) break;
      if ((st = ganfw_prune_run_step(s->prune, L->step)) != GANFW_OK) break; /* prune: */
      for (int32_t i = 0; i < s->n_optim; i++)                               /* optim.schedule */
        ganfw_optim_set_lr(&s->optim[i], &s->schedule, L->step, L->total);
      ganfw_loop_step ls = {NULL, NULL};
      ganfw_dp_take_comm_seconds(s);
      if ((st = t->step(L->self, L, &bi, &ls)) != GANFW_OK) {
        st = ganfw_error_wrap(st, "step %lld", (long long)(L->step + 1));
        break;
      }
      L->step++;
      if (L->step == L->total && (st = ganfw_prune_run_finish(s->prune)) != GANFW_OK) break;
      r->comm_seconds = ganfw_dp_take_comm_seconds(s);
      ganfw_alloc_trace_step_end(s->ctx->alloc);
      if ((st = ganfw_nonfinite_after_step(s, L->step, ls.nonfinite, ls.what, &r->nonfinite)))
        break;
      double t1 = ganfw_now_s(), elapsed = t1 - t_start;
      rate = elapsed > 0 ? (double)(L->step - first_step) * (double)B / elapsed : 0;
      double eta = elapsed / (double)(L->step - first_step) * (double)(L->total - L->step);
      if ((s->train.log_every && L->step % s->train.log_every == 0) || L->step == first_step + 1 ||
          L->step == L->total)
        st = log_step(r, &bi, t1 - t0, rate, eta);
    }
    const int last = L->step == L->total;
    const int evaluate =
        t->evaluate && L->test && (bi.last_in_epoch || last) && r->last_eval_step != L->step;
    const int sample = t->samples && full &&
                       ((s->train.sample_every && L->step % s->train.sample_every == 0) || last);
    const int ckpt =
        full && ((s->train.checkpoint_every && L->step % s->train.checkpoint_every == 0) || last);
    if (evaluate || sample || ckpt) /* the steps' peaks, before anything else allocates */
      ganfw_calibration_take(&s->predicted, s->ctx->alloc);
    if (st == GANFW_OK && evaluate) {
      const double epochs = bi.last_in_epoch
                                ? (double)(bi.epoch + 1)
                                : (double)bi.epoch + (double)(bi.offset + bi.n) / (double)size;
      if (last) st = before_last_eval(r);
      if (st == GANFW_OK) st = t->evaluate(L->self, L, epochs);
      r->last_eval_step = L->step;
      ganfw_ctx_empty_cache_at(s->ctx, GANFW_EMPTY_CACHE_AFTER_EVAL); /* device.empty_cache */
    }
    if (st == GANFW_OK && sample && ganfw_dp_writes(s)) {
      char name[64], path[4200];
      snprintf(name, sizeof name, "step_%06lld.png", (long long)L->step);
      st = ganfw_path_join(path, sizeof path, r->samples_dir, name);
      if (st == GANFW_OK) st = t->samples(L->self, L, path);
      ganfw_ctx_empty_cache_at(s->ctx, GANFW_EMPTY_CACHE_AFTER_EVAL);
    }
    if (st == GANFW_OK && bi.last_in_epoch)
      ganfw_ctx_empty_cache_at(s->ctx, GANFW_EMPTY_CACHE_PER_EPOCH);
    int saved = 0;
    if (st == GANFW_OK && ckpt) {
      st = save_checkpoint(r);
      saved = 1;
    }
    if (st == GANFW_OK && ganfw_dp_any(s, ganfw_interrupt_requested(), &st) && st == GANFW_OK) {
      if (!saved) st = save_checkpoint(r);
      if (st == GANFW_OK) st = ganfw_interrupt_error(L->step, L->ckpt_dir);
    }
  }
  return st;
}

ganfw_status ganfw_train(ganfw_session *s) {
  loop_run r = {.L = {.s = s, .t = ganfw_session_trainer(s)}, .last_eval_step = -1};
  ganfw_loop *L = &r.L;
  const double t0 = ganfw_now_s();
  ganfw_status st = open_run(&r);
  if (st == GANFW_OK && !ganfw_run_already_done(L->step, L->total)) {
    ganfw_alloc_stats as;
    ganfw_alloc_get_stats(s->ctx->alloc, &as);
    const double mib = 1024.0 * 1024.0;
    ganfw_log(GANFW_LOG_INFO,
              "memory before the first step: params %.2f MiB, grads %.2f MiB, optim_state %.2f "
              "MiB, data %.2f MiB (reserved %.2f MiB)",
              as.category[GANFW_MEM_PARAM].current / mib, as.category[GANFW_MEM_GRAD].current / mib,
              as.category[GANFW_MEM_OPTIM_STATE].current / mib,
              as.category[GANFW_MEM_DATA].current / mib, as.reserved.current / mib);
    char more[512] = "";
    if (L->t->describe) L->t->describe(L->self, L, more, sizeof more);
    ganfw_log(GANFW_LOG_INFO, "training %s with trainer %s for %lld steps (batch %lld%s) into %s",
              ganfw_run_model_name(s->run), trainer_name(L), (long long)L->total,
              (long long)s->train.batch_size, more, s->run->out_dir);
    ganfw_alloc_reset_window_peak(s->ctx->alloc); /* the run's peaks count from its steps */
    ganfw_interrupt_begin();
    st = train_loop(&r);
    ganfw_interrupt_end();
    int64_t last_allocated, last_reserved;
    take_window_peak(&r, &last_allocated, &last_reserved);
    if (st == GANFW_OK) {
      char done[256] = "";
      if (L->t->finished) L->t->finished(L->self, done, sizeof done);
      ganfw_log(GANFW_LOG_INFO, "done in %.1f s%s", ganfw_now_s() - t0, done);
      ganfw_log(GANFW_LOG_INFO,
                "peak memory of the run: %.1f MiB allocated, %.1f MiB reserved (metrics.csv "
                "columns peak_allocated, peak_reserved: per logged row)",
                r.peak_allocated / mib, r.peak_reserved / mib);
    }
    if (r.nonfinite.total > 0)
      ganfw_log(GANFW_LOG_WARN,
                "%lld of the steps %s for NaN or inf values (train.on_nonfinite: skip; "
                "metrics.csv column nonfinite_skips)",
                (long long)r.nonfinite.total, L->t->skipped_words);
  }
  if (st == GANFW_OK && s->ctx && !L->memory_written)
    st = ganfw_dp_gather_peaks(s, &s->predicted); /* every rank */
  if (s->ctx && !L->memory_written && ganfw_dp_writes(s)) {
    ganfw_error_saved first;
    ganfw_error_save(&first, st);
    st = ganfw_error_first(&first, ganfw_write_memory_json(s->ctx->alloc, s->ctx->algorithms,
                                                           s->run->out_dir, &s->predicted));
  }
  close_run(&r);
  return st;
}
