/* The trainer of a trainer plugin (ganfw/trainer.h) under the one loop (loop.h): one
 * ganfw_program_step per batch, metrics.csv with the trainer's scalars, a learning rate per
 * optimizer and a gradient norm per clipped net, eval.csv with the trainer's evaluation on
 * the test split after every epoch, the trainer's sample grid, and checkpoints with every
 * net and optimizer. Also the grid and weights helpers of `ganfw eval` and `sample`. */
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
#include "train/loop.h"
#include "train/program.h"
#include "train/train_program.h"
#include "train/trainer.h" /* ganfw_classifier_open_test_split: any session's test split */

typedef struct prog_run {
  ganfw_session *s;
  ganfw_program *prog;
  float *host_lf;
  ganfw_tensor *labels;       /* f32 [N,1], NULL when unlabelled */
  ganfw_tensor *sx, *slabels; /* the sample grid's inputs */
  int64_t skipped;
  ganfw_program_stats last; /* the last step's */
} prog_run;

static int32_t ckpt_nets(void *self, ganfw_ckpt_net *nets) {
  ganfw_session *s = ((prog_run *)self)->s;
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

/* The sample grid: the first train.samples images of the test split (the training set
 * without one), the same every time, loaded at the first grid (after the steps' peaks are
 * taken, as the plan has no grid); nothing for a trainer without sample(). */
static ganfw_status samples(void *self, ganfw_loop *L, const char *path) {
  prog_run *r = self;
  ganfw_session *s = r->s;
  ganfw_status st = GANFW_OK;
  if (!s->trainer_vt->sample) return GANFW_OK;
  if (!r->sx)
    st = ganfw_program_grid_inputs(s, L->test ? L->test : s->data, s->train.samples, &r->sx,
                                   &r->slabels);
  if (st == GANFW_OK) st = ganfw_program_write_grid(r->prog, r->sx, r->slabels, path);
  if (st == GANFW_ERR_UNSUPPORTED) {
    ganfw_error_clear();
    return GANFW_OK;
  }
  return st;
}

static void prog_close(void *self) {
  prog_run *r = self;
  if (!r) return;
  free(r->host_lf);
  ganfw_tensor_destroy(r->labels);
  ganfw_tensor_destroy(r->sx);
  ganfw_tensor_destroy(r->slabels);
  ganfw_program_destroy(r->prog);
  free(r);
}

static ganfw_status prog_open(ganfw_loop *L, void **self) {
  ganfw_session *s = L->s;
  prog_run *r = calloc(1, sizeof *r);
  if (!r) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  *self = r;
  r->s = s;
  ganfw_status st;
  if ((st = ganfw_program_create(s, &r->prog)) != GANFW_OK) return st;
  if (!L->planning && ganfw_program_evaluates(r->prog)) {
    if (!ganfw_dataset_has_test_split(s->data_kind, s->data_path))
      ganfw_log(GANFW_LOG_WARN,
                "%s has no test split (an image folder without train/ and test/): trainer '%s' "
                "trains without evaluating, and eval.csv is not written",
                s->data_path, s->trainer_name);
    else if ((st = ganfw_classifier_open_test_split(s, &L->test)))
      return st;
  }
  const int32_t labelled = s->data_info.num_classes > 0;
  if ((st = ganfw_loop_open_batch(L, labelled)) != GANFW_OK) return st;
  const int64_t b = L->x->shape[0]; /* this rank's rows */
  int64_t ls[2] = {b, 1};
  if (labelled &&
      !(r->labels = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 2, ls, GANFW_MEM_DATA, "labels")))
    return ganfw_error_code();
  if (labelled && !(r->host_lf = malloc((size_t)b * sizeof *r->host_lf)))
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  return GANFW_OK;
}

static ganfw_status prog_step(void *self, ganfw_loop *L, const ganfw_batch_info *bi,
                              ganfw_loop_step *out) {
  prog_run *r = self;
  (void)bi;
  ganfw_status st = GANFW_OK;
  if (r->labels) {
    for (int64_t i = 0; i < r->labels->shape[0]; i++) r->host_lf[i] = (float)L->host_y[i];
    st = ganfw_tensor_from_host(r->labels, r->host_lf, r->labels->nbytes);
  }
  if (st == GANFW_OK) st = ganfw_program_step(r->prog, L->x, r->labels, L->step, &r->last);
  if (st != GANFW_OK) return st;
  r->skipped += r->last.skipped;
  out->nonfinite = r->last.nonfinite ? "the updates were" : NULL;
  out->what = r->last.nonfinite_what;
  return GANFW_OK;
}

static int32_t clipped(const ganfw_session *s, int32_t net) {
  return s->train.clip_grad_norm[net] > 0 && !s->nets[net].frozen;
}

static void columns(void *self, int32_t tail, char *buf, size_t cap) {
  const prog_run *r = self;
  const ganfw_session *s = r->s;
  buf[0] = '\0';
  if (!tail) {
    for (int32_t i = 0; i < ganfw_program_scalar_count(r->prog); i++)
      snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? "," : "",
               ganfw_program_scalar_name(r->prog, i));
    for (int32_t i = 0; i < s->n_optim; i++)
      snprintf(buf + strlen(buf), cap - strlen(buf), "%slr_%s", buf[0] ? "," : "",
               s->optim[i].role);
    return;
  }
  snprintf(buf, cap, "skipped,nonfinite_skips");
  for (int32_t k = 0; k < s->n_nets; k++)
    if (clipped(s, k))
      snprintf(buf + strlen(buf), cap - strlen(buf), ",grad_norm_%s", s->nets[k].role);
}

static int32_t row(void *self, int32_t tail, const ganfw_loop_row *c, double *v) {
  const prog_run *r = self;
  const ganfw_session *s = r->s;
  int32_t n = 0;
  if (!tail) {
    for (int32_t i = 0; i < ganfw_program_scalar_count(r->prog); i++) v[n++] = r->last.value[i];
    for (int32_t i = 0; i < s->n_optim; i++) v[n++] = s->optim[i].lr;
    return n;
  }
  v[n++] = (double)r->skipped;
  v[n++] = (double)c->nonfinite_skips;
  for (int32_t k = 0; k < s->n_nets; k++)
    if (clipped(s, k)) v[n++] = r->last.grad_norm[k];
  return n;
}

static void progress(void *self, char *text, size_t cap) {
  const prog_run *r = self;
  text[0] = '\0';
  for (int32_t i = 0; i < ganfw_program_scalar_count(r->prog); i++)
    if (r->last.reported[i] && strlen(text) < 160)
      snprintf(text + strlen(text), cap - strlen(text), "%s%s %.4g", text[0] ? " " : "",
               ganfw_program_scalar_name(r->prog, i), r->last.value[i]);
}

static void eval_columns(void *self, char *buf, size_t cap) {
  const prog_run *r = self;
  snprintf(buf, cap, "step,epoch,images");
  for (int32_t i = 0; i < ganfw_program_scalar_count(r->prog); i++)
    snprintf(buf + strlen(buf), cap - strlen(buf), ",%s", ganfw_program_scalar_name(r->prog, i));
  snprintf(buf + strlen(buf), cap - strlen(buf), ",peak_activation_eval,seconds");
}

/* The trainer's evaluation on the test split: eval.csv and a log line. */
static ganfw_status evaluate(void *self, ganfw_loop *L, double epochs) {
  prog_run *r = self;
  ganfw_session *s = r->s;
  const double t0 = ganfw_now_s();
  ganfw_program_stats ev;
  int64_t images = 0, peak = 0;
  const int64_t batch = s->train.batch_size / s->exec.micro_batches;
  /* every rank evaluates alike (rank 0's running statistics with dist.batchnorm: local) */
  ganfw_status st = ganfw_dp_sync_buffers(s);
  if (st == GANFW_OK) st = ganfw_program_evaluate(r->prog, L->test, batch, &ev, &images, &peak);
  if (st != GANFW_OK) return st;
  const double seconds = ganfw_now_s() - t0;
  char line[1024] = "", row[2048];
  snprintf(row, sizeof row, "%lld,%.6g,%lld", (long long)L->step, epochs, (long long)images);
  for (int32_t i = 0; i < ganfw_program_scalar_count(r->prog); i++) {
    snprintf(row + strlen(row), sizeof row - strlen(row), ",%.9g", ev.value[i]);
    if (ev.reported[i])
      snprintf(line + strlen(line), sizeof line - strlen(line), " %s %.6g",
               ganfw_program_scalar_name(r->prog, i), ev.value[i]);
  }
  ganfw_log(GANFW_LOG_INFO, "step %lld (epoch %.2f): test (%lld images):%s", (long long)L->step,
            epochs, (long long)images, line);
  if (!L->eval_csv) return GANFW_OK;
  return ganfw_file_appendf(L->eval_csv, "%s,%lld,%.6g\n", row, (long long)peak, seconds);
}

static void set_phase_hook(void *self, ganfw_phase_hook hook, void *user) {
  ganfw_program_set_phase_hook(((prog_run *)self)->prog, hook, user);
}

static void every_phase(void *self) {
  ganfw_program_every_phase(((prog_run *)self)->prog);
}

/* The first three reported scalars. */
static void report(void *self, ganfw_step_report *out) {
  const prog_run *r = self;
  *out = (ganfw_step_report){.skipped_g = r->last.skipped};
  for (int32_t i = 0, shown = 0; i < ganfw_program_scalar_count(r->prog) && shown < 3; i++) {
    if (!r->last.reported[i]) continue;
    const size_t used = strlen(out->scalars);
    snprintf(out->scalars + used, sizeof out->scalars - used, "%s%s %.4f", shown++ ? ", " : "",
             ganfw_program_scalar_name(r->prog, i), r->last.value[i]);
  }
}

const ganfw_loop_trainer ganfw_program_trainer = {
    .name = NULL, /* the plugin's */
    .open = prog_open,
    .close = prog_close,
    .columns = columns,
    .row = row,
    .progress = progress,
    .step = prog_step,
    .ckpt_nets = ckpt_nets,
    .eval_columns = eval_columns,
    .evaluate = evaluate,
    .samples = samples,
    .set_phase_hook = set_phase_hook,
    .every_phase = every_phase,
    .report = report,
    .skipped_words = "skipped their updates",
    .samples_dir = 1,
};
