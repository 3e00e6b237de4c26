/* The GAN training loop of `ganfw CONFIG`: batches from the loader, one ganfw_gan_step per
 * batch, and the run's outputs: metrics.csv, samples/step_NNNNNN.png from a fixed noise
 * batch, checkpoints/step_NNNNNNNN.safetensors, config.resolved.yaml and memory.json.
 * `train.resume` continues from a checkpoint with the same parameters, optimizer state,
 * RNG position and loader position, so that on the CPU the continued run is bitwise the
 * uninterrupted one. Ctrl-C finishes the step, writes a checkpoint and stops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "base/error.h"
#include "base/log.h"
#include "train/outputs.h"
#include "io/png_io.h"
#include "train/dp.h"
#include "train/ema.h"
#include "train/nonfinite.h"
#include "train/param_groups.h"
#include "train/run_state.h"
#include "runtime/tensor.h"
#include "train/trainer.h"

typedef struct gan_run {
  ganfw_session *s;
  ganfw_gan *gan;
  ganfw_loader *loader;
  float *host_batch;     /* staging for uploads (page-locked on CUDA) */
  int32_t *host_labels;  /* the batch's classes (model.conditional) */
  int32_t *fixed_labels; /* the sample grid's: one class per row */
  int32_t host_pinned;   /* host_batch is page-locked */
  ganfw_tensor *x, *z, *fixed;
  ganfw_tensor *z_local; /* data-parallel: this rank's rows of z (z itself alone) */
  double comm_seconds;   /* the last step's time in collectives */
  ganfw_metrics *metrics;
  char samples_dir[4096], ckpt_dir[4096];
  int64_t step, total;
  int64_t skipped_d, skipped_g;    /* optimizer steps skipped by a strategy, this run */
  ganfw_nonfinite_count nonfinite; /* steps train.on_nonfinite: skip skipped an update of */
} gan_run;

static void fill_ckpt_nets(ganfw_session *s, ganfw_ckpt_net nets[2]) {
  nets[0] = (ganfw_ckpt_net){.net = s->generator,
                             .prefix = "generator",
                             .optim_vt = s->optim[0].vt,
                             .optim_self = s->optim[0].self};
  nets[1] = (ganfw_ckpt_net){.net = s->discriminator,
                             .prefix = "discriminator",
                             .optim_vt = s->optim[1].vt,
                             .optim_self = s->optim[1].self};
  ganfw_ema_ckpt(s->ema, &nets[0]); /* train.ema: generator_ema.* */
}

/* Every rank: a sharded optimizer's state goes to rank 0 (memory: [zero]), which alone
 * writes; the others take its outcome. */
static ganfw_status save_checkpoint(gan_run *r) {
  char path[4200];
  ganfw_status st = ganfw_nonfinite_check_weights(r->s, r->step);
  if (st == GANFW_OK) st = ganfw_checkpoint_path(r->ckpt_dir, r->step, path, sizeof path);
  if (st != GANFW_OK) return st;
  ganfw_ckpt_net nets[2];
  fill_ckpt_nets(r->s, nets);
  st = ganfw_dp_before_save(r->s);
  if (st == GANFW_OK && ganfw_dp_writes(r->s))
    st = ganfw_run_save_checkpoint(r->s, path, nets, 2, r->loader, r->step, NULL);
  ganfw_dp_after_save(r->s);
  return ganfw_dp_agree(r->s, st, "writing the checkpoint");
}

static ganfw_status resume(gan_run *r) {
  ganfw_ckpt_net nets[2];
  fill_ckpt_nets(r->s, nets);
  ganfw_ckpt_meta *meta = NULL;
  ganfw_status st = ganfw_dp_before_resume(r->s);
  if (st == GANFW_OK) st = ganfw_run_resume(r->s, r->ckpt_dir, nets, 2, r->loader, &meta);
  ganfw_status sc = ganfw_dp_after_resume(r->s, st == GANFW_OK);
  if (st == GANFW_OK) st = sc;
  if (meta) r->step = meta->step;
  ganfw_ckpt_meta_free(meta);
  return st;
}

static ganfw_status write_samples(gan_run *r) {
  ganfw_session *s = r->s;
  ganfw_tensor *y = NULL;
  ganfw_status st = ganfw_gan_generate(s, r->fixed, r->fixed_labels, &y);
  if (st != GANFW_OK) return st;
  float *host = malloc((size_t)y->nbytes);
  char name[64], path[4200];
  snprintf(name, sizeof name, "step_%06lld.png", (long long)r->step);
  st = host ? ganfw_tensor_to_host(y, host, y->nbytes)
            : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK) st = ganfw_path_join(path, sizeof path, r->samples_dir, name);
  if (st == GANFW_OK)
    st = ganfw_png_write_grid(path, host, (int32_t)y->shape[0], (int32_t)y->shape[1],
                              (int32_t)y->shape[2], (int32_t)y->shape[3],
                              (int32_t)s->train.sample_nrow, 2, 0.0f, 1);
  free(host);
  ganfw_tensor_destroy(y);
  return st;
}

/* train.clip_grad_norm is on for either net: metrics.csv has the norms. */
static int clipping(const ganfw_session *s) {
  return s->train.clip_grad_norm[0] > 0 || s->train.clip_grad_norm[1] > 0;
}

static ganfw_status open_run(gan_run *r) {
  ganfw_session *s = r->s;
  const char *out = s->run->out_dir;
  ganfw_status st;
  if ((st = ganfw_path_join(r->samples_dir, sizeof r->samples_dir, out, "samples")) ||
      (st = ganfw_path_join(r->ckpt_dir, sizeof r->ckpt_dir, out, "checkpoints")) ||
      (st = ganfw_mkdirs(r->samples_dir)) || (st = ganfw_mkdirs(r->ckpt_dir)))
    return st;
  const int32_t writes = ganfw_dp_writes(s); /* rank 0 alone writes the run's outputs */
  if (writes) ganfw_run_folder_clean(out);
  if (writes && (st = ganfw_write_resolved_config(s->run->config, out)) != GANFW_OK) return st;
  ganfw_loader_config lc; /* data-parallel: this rank's rows of each batch */
  ganfw_dp_loader_config(s, &lc);
  if ((st = ganfw_loader_create(s->data, &lc, &r->loader)) != GANFW_OK) return st;
  int64_t per_epoch = ganfw_loader_batches_per_epoch(r->loader);
  r->total = s->train.epochs * per_epoch;
  if (s->train.max_steps > 0 && (r->total == 0 || s->train.max_steps < r->total))
    r->total = s->train.max_steps;
  if ((st = ganfw_gan_create(s, &r->gan)) != GANFW_OK) return st;
  /* x: this rank's rows; z: the global batch's noise (as one process draws it), of which
   * this rank takes its rows */
  const int64_t B = s->train.batch_size, b = ganfw_dp_local_batch(s);
  int64_t xs[4] = {b, s->data_info.channels, s->data_info.height, s->data_info.width};
  int64_t zs[4] = {B, s->nz, 1, 1};
  r->x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "batch");
  r->z = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "noise");
  r->z_local = r->z ? ganfw_dp_rows_tensor(s, r->z, "noise.rank") : NULL;
  r->fixed = ganfw_gan_fixed_noise(s, s->train.samples, s->ctx->seed);
  if (!r->x || !r->z || !r->z_local || !r->fixed) return ganfw_error_code();
  r->host_batch = ganfw_host_staging_alloc(s->ctx, (size_t)r->x->nbytes, &r->host_pinned);
  r->host_labels = calloc((size_t)B, sizeof *r->host_labels);
  r->fixed_labels = calloc((size_t)s->train.samples, sizeof *r->fixed_labels);
  if (!r->host_batch || !r->host_labels || !r->fixed_labels)
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_gan_grid_labels(r->fixed_labels, s->train.samples, s->train.sample_nrow,
                        (int32_t)s->n_classes, -1);
  if (*s->train.resume && (st = resume(r)) != GANFW_OK) return st;
  ganfw_gan_set_step(r->gan, r->step);
  char columns[4096] = "step,epoch,loss_d,loss_g,d_x,d_g_z1,d_g_z2,lr_g,lr_d,allocated,reserved,"
                       "step_seconds,skipped_d,skipped_g,nonfinite_skips";
  if (ganfw_dist_parallel(s->dist)) strcat(columns, ",comm_seconds");
  if (clipping(s)) strcat(columns, ",grad_norm_g,grad_norm_d");
  ganfw_extras e = {.n = 0};
  ganfw_extras_add_strategies(s, &e);
  for (int32_t i = 0; i < e.n; i++)
    snprintf(columns + strlen(columns), sizeof columns - strlen(columns), ",%s",
             e.keys[i] + strlen("memory."));
  if (!writes) return GANFW_OK;
  return ganfw_metrics_open(out, columns, *s->train.resume != '\0', r->step + 1, &r->metrics);
}

static void close_run(gan_run *r) {
  ganfw_metrics_close(r->metrics);
  ganfw_host_staging_free(r->s->ctx, r->host_batch, r->host_pinned);
  free(r->host_labels);
  free(r->fixed_labels);
  ganfw_tensor_destroy(r->x);
  ganfw_tensor_destroy(r->z_local);
  ganfw_tensor_destroy(r->z);
  ganfw_tensor_destroy(r->fixed);
  ganfw_gan_destroy(r->gan);
  ganfw_loader_destroy(r->loader);
}

static ganfw_status log_step(gan_run *r, const ganfw_gan_stats *gs, const ganfw_batch_info *bi,
                             double seconds, double rate, double eta) {
  ganfw_session *s = r->s;
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  double row[18 + GANFW_MAX_EXTRA] = {(double)r->step,
                                      (double)bi->epoch,
                                      gs->loss_d,
                                      gs->loss_g,
                                      gs->d_x,
                                      gs->d_g_z1,
                                      gs->d_g_z2,
                                      s->optim[0].lr,
                                      s->optim[1].lr,
                                      (double)as.allocated.current,
                                      (double)as.reserved.current,
                                      seconds,
                                      (double)r->skipped_d,
                                      (double)r->skipped_g,
                                      (double)r->nonfinite.total};
  int32_t n = 15;
  if (ganfw_dist_parallel(s->dist)) row[n++] = r->comm_seconds;
  if (clipping(s)) {
    row[n++] = gs->grad_norm_g;
    row[n++] = gs->grad_norm_d;
  }
  ganfw_extras e = {.n = 0};
  ganfw_extras_add_strategies(s, &e);
  for (int32_t i = 0; i < e.n; i++) row[n++] = strtod(e.values[i], NULL);
  char losses[160];
  snprintf(losses, sizeof losses, "loss_d %.4f loss_g %.4f D(x) %.3f D(G(z)) %.3f/%.3f", gs->loss_d,
           gs->loss_g, gs->d_x, gs->d_g_z1, gs->d_g_z2);
  if (!r->metrics) return GANFW_OK; /* a rank other than 0 */
  ganfw_progress(r->step, r->total, rate, eta, losses, s->ctx->alloc, r->step == r->total);
  return ganfw_metrics_row(r->metrics, row, n);
}

static ganfw_status train_loop(gan_run *r) {
  ganfw_session *s = r->s;
  const ganfw_host *host = ganfw_host_table();
  ganfw_status st = GANFW_OK;
  double rate = 0, t_start = ganfw_now_s();
  int64_t first_step = r->step;
  while (r->step < r->total && st == GANFW_OK) {
    ganfw_batch_info bi;
    int32_t *labels = s->n_classes ? r->host_labels : NULL; /* model.conditional */
    ganfw_alloc_trace_step(s->ctx->alloc, r->step + 1);     /* device.trace */
    if ((st = ganfw_dp_step_begin(s, r->step + 1)) != GANFW_OK) break;
    if ((st = ganfw_loader_next(r->loader, r->host_batch, labels, &bi)) != GANFW_OK) break;
    if (bi.n < s->train.batch_size) continue; /* a short last batch (drop_last: false) */
    if (labels && (st = ganfw_gan_set_labels(r->gan, labels, bi.n)) != GANFW_OK) break;
    double t0 = ganfw_now_s();
    /* asynchronous from page-locked memory: the step's losses, read back at its end, wait
     * for it before the loader refills host_batch */
    if ((st = ganfw_tensor_from_staging(r->x, r->host_batch, r->x->nbytes, r->host_pinned)) ||
        (st = host->rng_normal(s->ctx, r->z, 0.0f, 1.0f)) ||
        (st = ganfw_dp_take_rows(s, r->z, r->z_local)))
      break;
    for (int32_t i = 0; i < s->n_optim; i++) /* optim.schedule */
      ganfw_optim_set_lr(&s->optim[i], &s->schedule, r->step, r->total);
    ganfw_gan_stats gs;
    ganfw_dp_take_comm_seconds(s);
    if ((st = ganfw_gan_step(r->gan, r->x, r->z_local, &gs)) != GANFW_OK) {
      st = ganfw_error_wrap(st, "step %lld", (long long)(r->step + 1));
      break;
    }
    r->step++;
    r->comm_seconds = ganfw_dp_take_comm_seconds(s);
    ganfw_alloc_trace_step_end(s->ctx->alloc);
    r->skipped_d += gs.skipped_d;
    r->skipped_g += gs.skipped_g;
    const char *skipped = gs.nonfinite_d && gs.nonfinite_g ? "both updates were"
                          : gs.nonfinite_d                 ? "the discriminator's update was"
                          : gs.nonfinite_g                 ? "the generator's update was"
                                                           : NULL;
    if ((st = ganfw_nonfinite_after_step(s, r->step, skipped, gs.nonfinite, &r->nonfinite))) break;
    double t1 = ganfw_now_s();
    double elapsed = t1 - t_start;
    rate = elapsed > 0 ? (double)(r->step - first_step) * (double)s->train.batch_size / elapsed : 0;
    double eta = r->step > first_step
                     ? elapsed / (double)(r->step - first_step) * (double)(r->total - r->step)
                     : -1;
    int last = r->step == r->total;
    if ((s->train.log_every && r->step % s->train.log_every == 0) || r->step == first_step + 1 ||
        last)
      st = log_step(r, &gs, &bi, t1 - t0, rate, eta);
    const int sample = (s->train.sample_every && r->step % s->train.sample_every == 0) || last;
    const int ckpt =
        (s->train.checkpoint_every && r->step % s->train.checkpoint_every == 0) || last;
    if (sample || ckpt) ganfw_calibration_take(&s->predicted, s->ctx->alloc); /* the steps' peaks */
    if (st == GANFW_OK && sample && ganfw_dp_writes(s)) {
      st = write_samples(r);
      ganfw_ctx_empty_cache_at(s->ctx, GANFW_EMPTY_CACHE_AFTER_EVAL); /* device.empty_cache */
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
      if (st == GANFW_OK) st = ganfw_interrupt_error(r->step, r->ckpt_dir);
    }
  }
  return st;
}

ganfw_status ganfw_train_gan(ganfw_session *s) {
  gan_run r = {.s = s};
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
    ganfw_log(GANFW_LOG_INFO, "training %s for %lld steps (batch %lld) into %s",
              ganfw_run_model_name(s->run), (long long)r.total, (long long)s->train.batch_size,
              s->run->out_dir);
    ganfw_interrupt_begin();
    st = train_loop(&r);
    ganfw_interrupt_end();
    if (r.nonfinite.total > 0)
      ganfw_log(GANFW_LOG_WARN,
                "%lld of the steps skipped an update for NaN or inf values "
                "(train.on_nonfinite: skip; metrics.csv column nonfinite_skips)",
                (long long)r.nonfinite.total);
  }
  if (st == GANFW_OK && s->ctx) st = ganfw_dp_gather_peaks(s, &s->predicted); /* every rank */
  if (s->ctx && ganfw_dp_writes(s)) {
    ganfw_error_saved first;
    ganfw_error_save(&first, st);
    st = ganfw_error_first(&first,
                           ganfw_write_memory_json(s->ctx->alloc, s->run->out_dir, &s->predicted));
  }
  close_run(&r);
  return st;
}
