/* The training loop of `ganfw CONFIG` around a trainer plugin (ganfw/trainer.h): batches
 * from the loader, one ganfw_program_step per batch, and the run's outputs: metrics.csv
 * (step, epoch, the trainer's scalars, learning rates, memory), eval.csv (the trainer's
 * evaluation on the test split after every epoch), samples/step_NNNNNN.png (the trainer's
 * grid), checkpoints/step_NNNNNNNN.safetensors with every net and optimizer, config.resolved.yaml
 * and memory.json. train.resume continues bitwise, as the built-in trainers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "io/checkpoint.h"
#include "io/png_io.h"
#include "runtime/tensor.h"
#include "train/dp.h"
#include "train/ema.h"
#include "train/nonfinite.h"
#include "train/outputs.h"
#include "train/param_groups.h"
#include "train/program.h"
#include "train/run_state.h"
#include "train/train_program.h"
#include "train/trainer.h" /* ganfw_classifier_open_test_split: any session's test split */

typedef struct prog_run {
  ganfw_session *s;
  ganfw_program *prog;
  ganfw_loader *loader;
  ganfw_dataset *test; /* NULL when the data set has no test split */
  float *host_x, *host_lf;
  int32_t *host_y;
  ganfw_tensor *x, *labels;   /* labels: f32 [N,1], NULL when unlabelled */
  ganfw_tensor *sx, *slabels; /* the sample grid's inputs */
  ganfw_metrics *metrics;
  ganfw_file_appender *eval_csv;
  char samples_dir[4096], ckpt_dir[4096], eval_path[4200];
  int64_t step, total, skipped;
  ganfw_nonfinite_count nonfinite;
  int32_t memory_written;
} prog_run;

static int32_t fill_ckpt_nets(ganfw_session *s, ganfw_ckpt_net *nets) {
  for (int32_t r = 0; r < s->n_nets; r++) {
    const int32_t o = s->nets[r].optim;
    nets[r] = (ganfw_ckpt_net){.net = s->nets[r].net,
                               .prefix = s->nets[r].role,
                               .optim_vt = o >= 0 ? s->optim[o].vt : NULL,
                               .optim_self = o >= 0 ? s->optim[o].self : NULL};
  }
  if (s->ema) ganfw_ema_ckpt(s->ema, &nets[s->ema->net]); /* train.ema: <role>_ema.* */
  return s->n_nets;
}

static ganfw_status save_checkpoint(prog_run *r) {
  char path[4200];
  ganfw_status st = ganfw_nonfinite_check_weights(r->s, r->step);
  if (st == GANFW_OK) st = ganfw_checkpoint_path(r->ckpt_dir, r->step, path, sizeof path);
  if (st != GANFW_OK) return st;
  ganfw_ckpt_net nets[GANFW_MAX_NETS];
  int32_t n = fill_ckpt_nets(r->s, nets);
  return ganfw_run_save_checkpoint(r->s, path, nets, n, r->loader, r->step, NULL);
}

static ganfw_status resume(prog_run *r) {
  ganfw_ckpt_net nets[GANFW_MAX_NETS];
  int32_t n = fill_ckpt_nets(r->s, nets);
  ganfw_ckpt_meta *meta = NULL;
  ganfw_status st = ganfw_run_resume(r->s, r->ckpt_dir, nets, n, r->loader, &meta);
  if (meta) r->step = meta->step;
  ganfw_ckpt_meta_free(meta);
  return st;
}

ganfw_status ganfw_program_grid_inputs(ganfw_session *s, const ganfw_dataset *ds, int64_t n,
                                       ganfw_tensor **x, ganfw_tensor **labels) {
  *x = *labels = NULL;
  if (n > ganfw_dataset_size(ds)) n = ganfw_dataset_size(ds);
  int64_t xs[4] = {n, s->data_info.channels, s->data_info.height, s->data_info.width},
          ls[2] = {n, 1};
  ganfw_tensor *tx =
      ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "sample.batch");
  ganfw_tensor *tl =
      ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 2, ls, GANFW_MEM_DATA, "sample.labels");
  float *hx = tx ? malloc((size_t)tx->nbytes) : NULL, *hl = malloc((size_t)n * sizeof *hl);
  int32_t *hy = malloc((size_t)n * sizeof *hy);
  ganfw_status st = !tx || !tl       ? ganfw_error_code()
                    : hx && hl && hy ? GANFW_OK
                                     : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_loader_config lc = {.batch_size = (int32_t)n,
                            .seed = s->ctx->seed,
                            .shuffle = 0,
                            .drop_last = 0,
                            .prefetch = 0,
                            .workers = 1};
  ganfw_loader *ld = NULL;
  ganfw_batch_info bi;
  const int32_t labelled = ganfw_dataset_num_classes(ds) > 0;
  if (st == GANFW_OK) st = ganfw_loader_create(ds, &lc, &ld);
  if (st == GANFW_OK) st = ganfw_loader_next(ld, hx, labelled ? hy : NULL, &bi);
  for (int64_t i = 0; st == GANFW_OK && i < n; i++) hl[i] = labelled ? (float)hy[i] : 0.0f;
  if (st == GANFW_OK) st = ganfw_tensor_from_host(tx, hx, tx->nbytes);
  if (st == GANFW_OK) st = ganfw_tensor_from_host(tl, hl, tl->nbytes);
  ganfw_loader_destroy(ld);
  free(hx);
  free(hl);
  free(hy);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(tx);
    ganfw_tensor_destroy(tl);
    return st;
  }
  *x = tx;
  *labels = tl;
  return GANFW_OK;
}

ganfw_status ganfw_program_write_grid(ganfw_program *prog, ganfw_tensor *x, ganfw_tensor *labels,
                                      const char *path) {
  float *host = NULL;
  int64_t shape[4], nrow;
  ganfw_status st = ganfw_program_sample(prog, x, labels, &host, shape, &nrow);
  if (st != GANFW_OK) return st;
  /* back to [0, 1] through the data's normalize (x * std + mean per channel) */
  const ganfw_transform *tf = &ganfw_program_session(prog)->transform;
  const int64_t plane = shape[2] * shape[3];
  for (int64_t i = 0; !tf->unit_range && i < shape[0] * shape[1]; i++) {
    const int32_t c = tf->norm_n > 1 ? (int32_t)(i % shape[1]) : 0;
    const float mean = tf->norm_n ? tf->mean[c] : 0.5f, std = tf->norm_n ? tf->std[c] : 0.5f;
    for (int64_t k = 0; k < plane; k++) host[i * plane + k] = host[i * plane + k] * std + mean;
  }
  st = ganfw_png_write_grid(path, host, (int32_t)shape[0], (int32_t)shape[1], (int32_t)shape[2],
                            (int32_t)shape[3], (int32_t)nrow, 2, 0.0f, 0);
  free(host);
  return st;
}

ganfw_status ganfw_program_load_weights(ganfw_session *s, const char *path) {
  ganfw_ckpt_net nets[GANFW_MAX_NETS];
  for (int32_t r = 0; r < s->n_nets; r++)
    nets[r] = (ganfw_ckpt_net){.net = s->nets[r].net, .prefix = s->nets[r].role};
  return ganfw_checkpoint_load_weights(path, nets, s->n_nets, 0, NULL);
}

/* The sample grid's inputs: the first train.samples images of the test split (the training
 * set without one), the same every time. */
static ganfw_status open_sample_inputs(prog_run *r) {
  return ganfw_program_grid_inputs(r->s, r->test ? r->test : r->s->data, r->s->train.samples,
                                   &r->sx, &r->slabels);
}

static ganfw_status write_samples(prog_run *r) {
  char name[64], path[4200];
  snprintf(name, sizeof name, "step_%06lld.png", (long long)r->step);
  ganfw_status st = ganfw_path_join(path, sizeof path, r->samples_dir, name);
  if (st == GANFW_OK) st = ganfw_program_write_grid(r->prog, r->sx, r->slabels, path);
  if (st == GANFW_ERR_UNSUPPORTED) {
    ganfw_error_clear();
    return GANFW_OK;
  }
  return st;
}

static ganfw_status open_run(prog_run *r) {
  ganfw_session *s = r->s;
  const char *out = s->run->out_dir;
  ganfw_status st;
  if ((st = ganfw_path_join(r->samples_dir, sizeof r->samples_dir, out, "samples")) ||
      (st = ganfw_path_join(r->ckpt_dir, sizeof r->ckpt_dir, out, "checkpoints")) ||
      (st = ganfw_path_join(r->eval_path, sizeof r->eval_path, out, "eval.csv")) ||
      (st = ganfw_mkdirs(r->samples_dir)) || (st = ganfw_mkdirs(r->ckpt_dir)))
    return st;
  ganfw_run_folder_clean(out);
  if ((st = ganfw_write_resolved_config(s->run->config, out)) != GANFW_OK) return st;
  if ((st = ganfw_loader_create(s->data, &s->loader_cfg, &r->loader)) != GANFW_OK) return st;
  if ((st = ganfw_program_create(s, &r->prog)) != GANFW_OK) return st;
  if (ganfw_program_evaluates(r->prog) && (st = ganfw_classifier_open_test_split(s, &r->test)))
    return st;
  const int64_t B = s->train.batch_size;
  int64_t full = ganfw_dataset_size(s->data) / B; /* a short last batch is skipped */
  if (full == 0)
    return ganfw_error_set(
        GANFW_ERR_CONFIG, "train.batch_size %lld is larger than %s (%lld images); lower it",
        (long long)B, ganfw_dataset_name(s->data), (long long)ganfw_dataset_size(s->data));
  r->total = s->train.epochs * full;
  if (s->train.max_steps > 0 && (r->total == 0 || s->train.max_steps < r->total))
    r->total = s->train.max_steps;
  int64_t xs[4] = {B, s->data_info.channels, s->data_info.height, s->data_info.width},
          ls[2] = {B, 1};
  r->x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "batch");
  if (!r->x) return ganfw_error_code();
  if (s->data_info.num_classes > 0 &&
      !(r->labels = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 2, ls, GANFW_MEM_DATA, "labels")))
    return ganfw_error_code();
  r->host_x = malloc((size_t)r->x->nbytes);
  r->host_y = malloc((size_t)B * sizeof *r->host_y);
  r->host_lf = malloc((size_t)B * sizeof *r->host_lf);
  if (!r->host_x || !r->host_y || !r->host_lf)
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if ((st = open_sample_inputs(r)) != GANFW_OK) return st;
  if (*s->train.resume && (st = resume(r)) != GANFW_OK) return st;
  char columns[4096] = "step,epoch";
  for (int32_t i = 0; i < ganfw_program_scalar_count(r->prog); i++)
    snprintf(columns + strlen(columns), sizeof columns - strlen(columns), ",%s",
             ganfw_program_scalar_name(r->prog, i));
  for (int32_t i = 0; i < s->n_optim; i++)
    snprintf(columns + strlen(columns), sizeof columns - strlen(columns), ",lr_%s",
             s->optim[i].role);
  strcat(columns, ",allocated,reserved,step_seconds,skipped,nonfinite_skips");
  for (int32_t r2 = 0; r2 < s->n_nets; r2++)
    if (s->train.clip_grad_norm[r2] > 0 && !s->nets[r2].frozen)
      snprintf(columns + strlen(columns), sizeof columns - strlen(columns), ",grad_norm_%s",
               s->nets[r2].role);
  ganfw_extras e = {.n = 0};
  ganfw_extras_add_strategies(s, &e);
  for (int32_t i = 0; i < e.n; i++)
    snprintf(columns + strlen(columns), sizeof columns - strlen(columns), ",%s",
             e.keys[i] + strlen("memory."));
  const int32_t append = *s->train.resume != '\0';
  if ((st = ganfw_metrics_open(out, columns, append, r->step + 1, &r->metrics)) != GANFW_OK)
    return st;
  if (!r->test) return GANFW_OK;
  char header[4096] = "step,epoch,images";
  for (int32_t i = 0; i < ganfw_program_scalar_count(r->prog); i++)
    snprintf(header + strlen(header), sizeof header - strlen(header), ",%s",
             ganfw_program_scalar_name(r->prog, i));
  strcat(header, ",peak_activation_eval,seconds");
  if ((st = ganfw_csv_rewrite(r->eval_path, header, append, r->step + 1)) != GANFW_OK) return st;
  return ganfw_file_append_open(r->eval_path, &r->eval_csv);
}

static void close_run(prog_run *r) {
  ganfw_metrics_close(r->metrics);
  ganfw_file_append_close(r->eval_csv);
  free(r->host_x);
  free(r->host_y);
  free(r->host_lf);
  ganfw_tensor_destroy(r->x);
  ganfw_tensor_destroy(r->labels);
  ganfw_tensor_destroy(r->sx);
  ganfw_tensor_destroy(r->slabels);
  ganfw_program_destroy(r->prog);
  ganfw_loader_destroy(r->loader);
  ganfw_dataset_destroy(r->test);
}

static ganfw_status log_step(prog_run *r, const ganfw_program_stats *ps, const ganfw_batch_info *bi,
                             double seconds, double rate, double eta) {
  ganfw_session *s = r->s;
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  double row[2 + GANFW_PROGRAM_MAX_SCALARS + 3 * GANFW_MAX_NETS + 5 + GANFW_MAX_EXTRA];
  int32_t n = 0;
  row[n++] = (double)r->step;
  row[n++] = (double)bi->epoch;
  char text[256] = "";
  for (int32_t i = 0; i < ganfw_program_scalar_count(r->prog); i++) {
    row[n++] = ps->value[i];
    if (ps->reported[i] && strlen(text) < 160)
      snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s %.4g", text[0] ? " " : "",
               ganfw_program_scalar_name(r->prog, i), ps->value[i]);
  }
  for (int32_t i = 0; i < s->n_optim; i++) row[n++] = s->optim[i].lr;
  row[n++] = (double)as.allocated.current;
  row[n++] = (double)as.reserved.current;
  row[n++] = seconds;
  row[n++] = (double)r->skipped;
  row[n++] = (double)r->nonfinite.total;
  for (int32_t k = 0; k < s->n_nets; k++)
    if (s->train.clip_grad_norm[k] > 0 && !s->nets[k].frozen) row[n++] = ps->grad_norm[k];
  ganfw_extras e = {.n = 0};
  ganfw_extras_add_strategies(s, &e);
  for (int32_t i = 0; i < e.n; i++) row[n++] = strtod(e.values[i], NULL);
  ganfw_progress(r->step, r->total, rate, eta, text, s->ctx->alloc, r->step == r->total);
  return ganfw_metrics_row(r->metrics, row, n);
}

/* The trainer's evaluation on the test split: eval.csv and a log line. */
static ganfw_status evaluate(prog_run *r, double epochs) {
  ganfw_session *s = r->s;
  ganfw_status st;
  if (r->step == r->total) { /* the evaluation resets the peaks: memory.json keeps training's */
    if ((st = ganfw_write_memory_json(s->ctx->alloc, s->run->out_dir, &s->predicted)) != GANFW_OK)
      return st;
    r->memory_written = 1;
  }
  const double t0 = ganfw_now_s();
  ganfw_program_stats ev;
  int64_t images = 0, peak = 0;
  const int64_t batch = s->train.batch_size / s->exec.micro_batches;
  if ((st = ganfw_program_evaluate(r->prog, r->test, batch, &ev, &images, &peak)) != GANFW_OK)
    return st;
  const double seconds = ganfw_now_s() - t0;
  char line[1024] = "", row[2048];
  snprintf(row, sizeof row, "%lld,%.6g,%lld", (long long)r->step, epochs, (long long)images);
  for (int32_t i = 0; i < ganfw_program_scalar_count(r->prog); i++) {
    snprintf(row + strlen(row), sizeof row - strlen(row), ",%.9g", ev.value[i]);
    if (ev.reported[i])
      snprintf(line + strlen(line), sizeof line - strlen(line), " %s %.6g",
               ganfw_program_scalar_name(r->prog, i), ev.value[i]);
  }
  ganfw_log(GANFW_LOG_INFO, "step %lld (epoch %.2f): test (%lld images):%s", (long long)r->step,
            epochs, (long long)images, line);
  return ganfw_file_appendf(r->eval_csv, "%s,%lld,%.6g\n", row, (long long)peak, seconds);
}

static ganfw_status train_loop(prog_run *r) {
  ganfw_session *s = r->s;
  ganfw_status st = GANFW_OK;
  const int64_t B = s->train.batch_size, size = ganfw_dataset_size(s->data);
  double rate = 0, t_start = ganfw_now_s();
  int64_t first_step = r->step;
  const int32_t labelled = r->labels != NULL;
  while (r->step < r->total && st == GANFW_OK) {
    ganfw_batch_info bi;
    if ((st = ganfw_loader_next(r->loader, r->host_x, labelled ? r->host_y : NULL, &bi))) break;
    if (bi.n == B) {
      ganfw_alloc_trace_step(s->ctx->alloc, r->step + 1); /* device.trace */
      double t0 = ganfw_now_s();
      for (int64_t i = 0; labelled && i < B; i++) r->host_lf[i] = (float)r->host_y[i];
      if ((st = ganfw_tensor_from_host(r->x, r->host_x, r->x->nbytes)) ||
          (labelled && (st = ganfw_tensor_from_host(r->labels, r->host_lf, r->labels->nbytes))))
        break;
      for (int32_t i = 0; i < s->n_optim; i++) /* optim.schedule */
        ganfw_optim_set_lr(&s->optim[i], &s->schedule, r->step, r->total);
      ganfw_program_stats ps;
      if ((st = ganfw_program_step(r->prog, r->x, r->labels, r->step, &ps)) != GANFW_OK) {
        st = ganfw_error_wrap(st, "step %lld", (long long)(r->step + 1));
        break;
      }
      r->step++;
      ganfw_alloc_trace_step_end(s->ctx->alloc);
      r->skipped += ps.skipped;
      if ((st = ganfw_nonfinite_after_step(s, r->step, ps.nonfinite ? "the updates were" : NULL,
                                           ps.nonfinite_what, &r->nonfinite)))
        break;
      double t1 = ganfw_now_s(), elapsed = t1 - t_start;
      rate = elapsed > 0 ? (double)(r->step - first_step) * (double)B / elapsed : 0;
      double eta = elapsed / (double)(r->step - first_step) * (double)(r->total - r->step);
      if ((s->train.log_every && r->step % s->train.log_every == 0) || r->step == first_step + 1 ||
          r->step == r->total)
        st = log_step(r, &ps, &bi, t1 - t0, rate, eta);
    }
    const int last = r->step == r->total;
    const int sample =
        (s->train.sample_every && r->step % s->train.sample_every == 0 && bi.n == B) || last;
    const int ckpt =
        bi.n == B &&
        ((s->train.checkpoint_every && r->step % s->train.checkpoint_every == 0) || last);
    if (bi.last_in_epoch || last || sample || ckpt)
      ganfw_calibration_take(&s->predicted, s->ctx->alloc); /* the steps' peaks */
    if (st == GANFW_OK && r->test && (bi.last_in_epoch || last)) {
      double epochs = bi.last_in_epoch
                          ? (double)(bi.epoch + 1)
                          : (double)bi.epoch + (double)(bi.offset + bi.n) / (double)size;
      st = evaluate(r, epochs);
      ganfw_ctx_empty_cache_at(s->ctx, GANFW_EMPTY_CACHE_AFTER_EVAL);
    }
    if (st == GANFW_OK && sample) st = write_samples(r);
    if (st == GANFW_OK && bi.last_in_epoch)
      ganfw_ctx_empty_cache_at(s->ctx, GANFW_EMPTY_CACHE_PER_EPOCH);
    int saved = 0;
    if (st == GANFW_OK && ckpt) {
      st = save_checkpoint(r);
      saved = 1;
    }
    if (st == GANFW_OK && ganfw_interrupt_requested()) {
      if (!saved) st = save_checkpoint(r);
      if (st == GANFW_OK) st = ganfw_interrupt_error(r->step, r->ckpt_dir);
    }
  }
  return st;
}

ganfw_status ganfw_train_program(ganfw_session *s) {
  prog_run r = {.s = s};
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
    ganfw_log(GANFW_LOG_INFO, "training %s with trainer %s for %lld steps (batch %lld) into %s",
              ganfw_run_model_name(s->run), s->trainer_name, (long long)r.total,
              (long long)s->train.batch_size, s->run->out_dir);
    ganfw_interrupt_begin();
    st = train_loop(&r);
    ganfw_interrupt_end();
    if (st == GANFW_OK) ganfw_log(GANFW_LOG_INFO, "done in %.1f s", ganfw_now_s() - t0);
    if (r.nonfinite.total > 0)
      ganfw_log(GANFW_LOG_WARN,
                "%lld of the steps skipped their updates for NaN or inf values "
                "(train.on_nonfinite: skip; metrics.csv column nonfinite_skips)",
                (long long)r.nonfinite.total);
  }
  if (s->ctx && !r.memory_written) {
    ganfw_error_saved first;
    ganfw_error_save(&first, st);
    st = ganfw_error_first(&first,
                           ganfw_write_memory_json(s->ctx->alloc, s->run->out_dir, &s->predicted));
  }
  close_run(&r);
  return st;
}
