/* The built-in trainer `gan` (loop.h): one ganfw_gan_step per batch on the real images
 * and noise of the training RNG, metrics.csv's D and G columns, and sample grids from a
 * fixed noise batch (one class a row for a conditional model). Checkpoints hold the
 * generator, the discriminator, their optimizers and train.ema's generator_ema. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/png_io.h"
#include "runtime/tensor.h"
#include "train/dp.h"
#include "train/ema.h"
#include "train/loop.h"
#include "train/trainer.h"

typedef struct gan_run {
  ganfw_session *s;
  ganfw_gan *gan;
  int32_t *fixed_labels; /* the sample grid's: one class per row */
  ganfw_tensor *z, *fixed;
  ganfw_tensor *z_local;        /* data-parallel: this rank's rows of z (z itself alone) */
  int64_t skipped_d, skipped_g; /* optimizer steps skipped by a strategy, this run */
  ganfw_gan_stats last;         /* the last step's */
} gan_run;

static int32_t ckpt_nets(void *self, ganfw_ckpt_net *nets) {
  ganfw_session *s = ((gan_run *)self)->s;
  nets[0] = (ganfw_ckpt_net){.net = s->generator,
                             .prefix = "generator",
                             .optim_vt = s->optim[0].vt,
                             .optim_self = s->optim[0].self};
  nets[1] = (ganfw_ckpt_net){.net = s->discriminator,
                             .prefix = "discriminator",
                             .optim_vt = s->optim[1].vt,
                             .optim_self = s->optim[1].self};
  ganfw_ema_ckpt(s->ema, &nets[0]); /* train.ema: generator_ema.* */
  return 2;
}

static void resumed(void *self, const ganfw_ckpt_meta *meta) {
  ganfw_gan_set_step(((gan_run *)self)->gan, meta->step);
}

static ganfw_status samples(void *self, ganfw_loop *L, const char *path) {
  gan_run *r = self;
  ganfw_session *s = r->s;
  (void)L;
  ganfw_tensor *y = NULL;
  ganfw_status st = ganfw_gan_generate(s, r->fixed, r->fixed_labels, &y);
  if (st != GANFW_OK) return st;
  float *host = malloc((size_t)y->nbytes);
  st = host ? ganfw_tensor_to_host(y, host, y->nbytes)
            : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
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

static void gan_close(void *self) {
  gan_run *r = self;
  if (!r) return;
  free(r->fixed_labels);
  ganfw_tensor_destroy(r->z_local);
  ganfw_tensor_destroy(r->z);
  ganfw_tensor_destroy(r->fixed);
  ganfw_gan_destroy(r->gan);
  free(r);
}

static ganfw_status gan_open(ganfw_loop *L, void **self) {
  ganfw_session *s = L->s;
  gan_run *r = calloc(1, sizeof *r);
  if (!r) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  *self = r;
  r->s = s;
  ganfw_status st;
  if ((st = ganfw_gan_create(s, &r->gan)) != GANFW_OK) return st;
  /* x: this rank's rows; z: the global batch's noise (as one process draws it), of which
   * this rank takes its rows */
  if ((st = ganfw_loop_open_batch(L, s->n_classes > 0)) != GANFW_OK) return st;
  int64_t zs[4] = {s->train.batch_size, s->nz, 1, 1};
  r->z = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "noise");
  r->z_local = r->z ? ganfw_dp_rows_tensor(s, r->z, "noise.rank") : NULL;
  r->fixed = ganfw_gan_fixed_noise(s, s->train.samples, s->ctx->seed);
  if (!r->z || !r->z_local || !r->fixed) return ganfw_error_code();
  r->fixed_labels = calloc((size_t)s->train.samples, sizeof *r->fixed_labels);
  if (!r->fixed_labels) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_gan_grid_labels(r->fixed_labels, s->train.samples, s->train.sample_nrow,
                        (int32_t)s->n_classes, -1);
  return GANFW_OK;
}

static ganfw_status gan_step(void *self, ganfw_loop *L, const ganfw_batch_info *bi,
                             ganfw_loop_step *out) {
  gan_run *r = self;
  ganfw_session *s = r->s;
  ganfw_status st;
  if (L->host_y && (st = ganfw_gan_set_labels(r->gan, L->host_y, bi->n)) != GANFW_OK) return st;
  if ((st = ganfw_host_table()->rng_normal(s->ctx, r->z, 0.0f, 1.0f)) ||
      (st = ganfw_dp_take_rows(s, r->z, r->z_local)))
    return st;
  ganfw_gan_stats *gs = &r->last;
  if ((st = ganfw_gan_step(r->gan, L->x, r->z_local, gs)) != GANFW_OK) return st;
  r->skipped_d += gs->skipped_d;
  r->skipped_g += gs->skipped_g;
  out->nonfinite = gs->nonfinite_d && gs->nonfinite_g ? "both updates were"
                   : gs->nonfinite_d                  ? "the discriminator's update was"
                   : gs->nonfinite_g                  ? "the generator's update was"
                                                      : NULL;
  out->what = gs->nonfinite;
  return GANFW_OK;
}

static void columns(void *self, int32_t tail, char *buf, size_t cap) {
  const ganfw_session *s = ((gan_run *)self)->s;
  if (!tail) {
    snprintf(buf, cap, "loss_d,loss_g,d_x,d_g_z1,d_g_z2,lr_g,lr_d");
    return;
  }
  snprintf(buf, cap, "skipped_d,skipped_g,nonfinite_skips%s%s%s%s%s",
           ganfw_dist_parallel(s->dist) ? ",comm_seconds" : "",
           clipping(s) ? ",grad_norm_g,grad_norm_d" : "", s->penalty_gp > 0 ? ",gp" : "",
           s->penalty_r1 > 0 ? ",r1" : "", s->penalty_r2 > 0 ? ",r2" : "");
}

static int32_t row(void *self, int32_t tail, const ganfw_loop_row *c, double *v) {
  const gan_run *r = self;
  const ganfw_session *s = r->s;
  const ganfw_gan_stats *gs = &r->last;
  int32_t n = 0;
  if (!tail) {
    v[n++] = gs->loss_d;
    v[n++] = gs->loss_g;
    v[n++] = gs->d_x;
    v[n++] = gs->d_g_z1;
    v[n++] = gs->d_g_z2;
    v[n++] = s->optim[0].lr;
    v[n++] = s->optim[1].lr;
    return n;
  }
  v[n++] = (double)r->skipped_d;
  v[n++] = (double)r->skipped_g;
  v[n++] = (double)c->nonfinite_skips;
  if (ganfw_dist_parallel(s->dist)) v[n++] = c->comm_seconds;
  if (clipping(s)) {
    v[n++] = gs->grad_norm_g;
    v[n++] = gs->grad_norm_d;
  }
  if (s->penalty_gp > 0) v[n++] = gs->gp;
  if (s->penalty_r1 > 0) v[n++] = gs->r1;
  if (s->penalty_r2 > 0) v[n++] = gs->r2;
  return n;
}

static void progress(void *self, char *text, size_t cap) {
  const gan_run *r = self;
  const ganfw_gan_stats *gs = &r->last;
  int k = snprintf(text, cap, "loss_d %.4f loss_g %.4f D(x) %.3f D(G(z)) %.3f/%.3f", gs->loss_d,
                   gs->loss_g, gs->d_x, gs->d_g_z1, gs->d_g_z2);
  const struct {
    double on, v;
    const char *name;
  } p[3] = {{r->s->penalty_gp, gs->gp, "gp"},
            {r->s->penalty_r1, gs->r1, "r1"},
            {r->s->penalty_r2, gs->r2, "r2"}};
  for (int i = 0; i < 3 && k > 0 && (size_t)k < cap; i++)
    if (p[i].on > 0) k += snprintf(text + k, cap - (size_t)k, " %s %.4f", p[i].name, p[i].v);
}

static void set_phase_hook(void *self, ganfw_phase_hook hook, void *user) {
  ganfw_gan_set_phase_hook(((gan_run *)self)->gan, hook, user);
}

/* The next step has a G half whatever train.d_steps_per_g_step says, and every penalty
 * whatever objective.r1_every says. */
static void every_phase(void *self) {
  gan_run *r = self;
  ganfw_gan_set_step(r->gan, r->s->train.d_steps_per_g_step - 1);
  ganfw_gan_every_penalty(r->gan);
}

static void report(void *self, ganfw_step_report *out) {
  const ganfw_gan_stats *gs = &((gan_run *)self)->last;
  *out = (ganfw_step_report){.loss_d = gs->loss_d,
                             .loss_g = gs->loss_g,
                             .skipped_d = gs->skipped_d,
                             .skipped_g = gs->skipped_g};
}

const ganfw_loop_trainer ganfw_gan_trainer = {
    .name = "gan",
    .open = gan_open,
    .close = gan_close,
    .columns = columns,
    .row = row,
    .progress = progress,
    .step = gan_step,
    .ckpt_nets = ckpt_nets,
    .resumed = resumed,
    .samples = samples,
    .set_phase_hook = set_phase_hook,
    .every_phase = every_phase,
    .report = report,
    .skipped_words = "skipped an update",
    .loader_epoch = 1,
    .samples_dir = 1,
};
