/* `ganfw eval CONFIG|RUN_DIR`: rebuilds the classifier from the run's config, loads the
 * weights of its best checkpoint (else the latest, or --checkpoint) and evaluates them on
 * the test split in no-grad eval mode (under the config's memory strategies, so AMP's
 * compute dtype applies), then prints accuracy, mean loss and the confusion matrix. */
#include "tools/eval.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/checkpoint.h"
#include "base/error.h"
#include "train/outputs.h"
#include "tools/sample.h"
#include "io/safetensors.h"
#include "train/session.h"
#include "train/train_program.h"
#include "runtime/tensor.h"
#include "train/trainer.h"

static int is_dir(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The data shape, class count, step and recorded test accuracy of a checkpoint. A file
 * without ganfw metadata (a PyTorch state_dict saved with safetensors, as model.init_from
 * takes it) is rebuilt for the shape of the config's data set, step and accuracy unknown. */
static ganfw_status checkpoint_info(const char *path, const ganfw_run *run, ganfw_data_info *info,
                                    int64_t *step, double *test_acc) {
  ganfw_st_file *f = NULL;
  ganfw_status st = ganfw_st_open(path, &f);
  if (st != GANFW_OK) return st;
  const char *c = ganfw_st_metadata(f, "data.channels");
  const char *h = ganfw_st_metadata(f, "data.height");
  const char *w = ganfw_st_metadata(f, "data.width");
  const char *k = ganfw_st_metadata(f, "data.num_classes");
  const char *s = ganfw_st_metadata(f, "step");
  const char *acc = ganfw_st_metadata(f, "classifier.test_acc");
  const char *format = ganfw_st_metadata(f, "format");
  if (!format || strcmp(format, GANFW_CKPT_FORMAT) != 0)
    st = ganfw_sample_config_info(run, info);
  else if (!c || !h || !w)
    st = ganfw_error_set(GANFW_ERR_IO,
                         "%s: not a ganfw training checkpoint (no data.channels/height/width "
                         "metadata)",
                         path);
  else
    *info = (ganfw_data_info){.struct_size = sizeof *info,
                              .channels = atoi(c),
                              .height = atoi(h),
                              .width = atoi(w),
                              .num_classes = k ? atoi(k) : 0};
  *step = s ? strtoll(s, NULL, 10) : -1;
  *test_acc = acc ? strtod(acc, NULL) : -1;
  ganfw_st_close(f);
  return st;
}

/* checkpoints/best.safetensors of `run_dir`, else its latest step_*.safetensors. */
static ganfw_status find_checkpoint(const char *run_dir, char *buf, size_t n) {
  char dir[4096];
  ganfw_status st = ganfw_path_join(dir, sizeof dir, run_dir, "checkpoints");
  if (st == GANFW_OK) st = ganfw_path_join(buf, n, dir, "best.safetensors");
  if (st != GANFW_OK || is_file(buf)) return st;
  int64_t step = -1;
  if ((st = ganfw_checkpoint_latest(dir, buf, n, &step)) != GANFW_OK) return st;
  if (step < 0)
    return ganfw_error_set(GANFW_ERR_IO,
                           "%s: no checkpoint yet; train first (`ganfw CONFIG`) or name one with "
                           "--checkpoint",
                           dir);
  return GANFW_OK;
}

static void print_report(FILE *out, const char *ckpt, int64_t step, double saved_acc,
                         const ganfw_session *s, const ganfw_dataset *ds, int64_t batch,
                         const ganfw_eval_result *ev) {
  const double mib = 1024.0 * 1024.0;
  if (step < 0) {
    fprintf(out, "checkpoint: %s (a state_dict without ganfw metadata)\n", ckpt);
  } else {
    fprintf(out, "checkpoint: %s (step %lld", ckpt, (long long)step);
    if (saved_acc >= 0) fprintf(out, ", test accuracy %.2f%% when saved", 100.0 * saved_acc);
    fprintf(out, ")\n");
  }
  fprintf(out, "data: %s, %lld images, batch %lld, no-grad eval mode, compute %s\n",
          ganfw_dataset_name(ds), (long long)ev->n, (long long)batch,
          ganfw_dtype_name(s->exec.compute_dtype));
  fprintf(out, "accuracy: %.2f%% (%lld/%lld)\n", 100.0 * ev->accuracy, (long long)ev->correct,
          (long long)ev->n);
  fprintf(out, "mean loss: %.4f\n", ev->loss);
  fprintf(out, "peak activation memory: %.2f MiB\n", ev->peak_activation / mib);
  fprintf(out, "confusion matrix (rows: true class, columns: predicted):\n");
  const int32_t K = ev->classes;
  int64_t biggest = 1;
  for (int64_t i = 0; i < (int64_t)K * K; i++)
    if (ev->confusion[i] > biggest) biggest = ev->confusion[i];
  int width = 1;
  for (int64_t v = biggest; v >= 10; v /= 10) width++;
  if (width < 3) width = 3;
  fprintf(out, "%*s", 6, "");
  for (int32_t j = 0; j < K; j++) fprintf(out, " %*d", width, (int)j);
  fprintf(out, "\n");
  for (int32_t i = 0; i < K; i++) {
    fprintf(out, "%5d:", (int)i);
    for (int32_t j = 0; j < K; j++)
      fprintf(out, " %*lld", width, (long long)ev->confusion[(int64_t)i * K + j]);
    const char *name = ganfw_dataset_class_name(ds, i);
    fprintf(out, "%s%s\n", name ? "  " : "", name ? name : "");
  }
}

/* A trainer plugin's run: its evaluate() over the test split, each scalar's mean over the
 * images (an autoencoder's reconstruction error, a VAE's ELBO, a student's accuracy). */
static ganfw_status eval_trainer(ganfw_session *s, const char *ckpt, int64_t step, int64_t batch,
                                 double *accuracy, FILE *out) {
  ganfw_dataset *test = NULL;
  ganfw_program *prog = NULL;
  ganfw_program_stats ev;
  int64_t images = 0, peak = 0;
  ganfw_status st = ganfw_program_load_weights(s, ckpt);
  if (st == GANFW_OK) st = ganfw_program_create(s, &prog);
  if (st == GANFW_OK && !ganfw_program_evaluates(prog))
    st = ganfw_error_set(GANFW_ERR_CONFIG, "trainer '%s' does not evaluate (it has no evaluate())",
                         s->trainer_name);
  if (st == GANFW_OK) st = ganfw_classifier_open_test_split(s, &test);
  if (st == GANFW_OK) {
    if (batch <= 0) batch = s->train.batch_size / s->exec.micro_batches;
    st = ganfw_program_evaluate(prog, test, batch, &ev, &images, &peak);
  }
  if (st == GANFW_OK) {
    fprintf(out, "checkpoint %s", ckpt);
    if (step >= 0) fprintf(out, " (step %lld)", (long long)step);
    fprintf(out, "\ntrainer %s on %s: %lld images, batch %lld\n", s->trainer_name,
            ganfw_dataset_name(test), (long long)images, (long long)batch);
    for (int32_t i = 0; i < ganfw_program_scalar_count(prog); i++) {
      if (!ev.reported[i]) continue;
      const char *name = ganfw_program_scalar_name(prog, i);
      fprintf(out, "  %-14s %.6g\n", name, ev.value[i]);
      if (accuracy && strcmp(name, "acc") == 0) *accuracy = ev.value[i];
    }
    fprintf(out, "peak activations evaluating: %.2f MiB\n", (double)peak / (1024.0 * 1024.0));
  }
  ganfw_program_destroy(prog);
  ganfw_dataset_destroy(test);
  return st;
}

ganfw_status ganfw_eval(const ganfw_eval_args *a, FILE *out) {
  char config[4200], ckpt[4200];
  const int from_dir = is_dir(a->source);
  ganfw_status st = GANFW_OK;
  if (from_dir)
    st = ganfw_path_join(config, sizeof config, a->source, "config.resolved.yaml");
  else
    snprintf(config, sizeof config, "%s", a->source);
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_dataset *test = NULL;
  ganfw_eval_result ev = {0};
  ganfw_data_info info = {0};
  int64_t step = -1, batch = a->batch;
  double saved_acc = -1;
  if (st == GANFW_OK) st = ganfw_run_open_file(config, a->sets, a->nsets, &run);
  if (st == GANFW_OK) {
    if (a->checkpoint)
      snprintf(ckpt, sizeof ckpt, "%s", a->checkpoint);
    else
      st = find_checkpoint(from_dir ? a->source : run->out_dir, ckpt, sizeof ckpt);
  }
  if (st == GANFW_OK) st = checkpoint_info(ckpt, run, &info, &step, &saved_acc);
  if (st == GANFW_OK) st = ganfw_session_open(run, 0, &info, &s);
  if (st == GANFW_OK && s->family == GANFW_MODEL_NETS) {
    st = eval_trainer(s, ckpt, step, batch, a->accuracy, out);
    ganfw_session_close(s);
    ganfw_run_close(run);
    return st;
  }
  if (st == GANFW_OK && s->family != GANFW_MODEL_CLASSIFIER)
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s: model '%s' is not a classifier; `ganfw eval` measures classifiers "
                         "(use `ganfw sample` for a GAN)",
                         config, ganfw_run_model_name(run));
  if (st == GANFW_OK) {
    ganfw_ckpt_net net = {
        .net = s->classifier, .prefix = "classifier", .optim_vt = NULL, .optim_self = NULL};
    st = ganfw_checkpoint_load_weights(ckpt, &net, 1, GANFW_CKPT_BARE_NAMES, NULL);
  }
  if (st == GANFW_OK) st = ganfw_classifier_open_test_split(s, &test);
  if (st == GANFW_OK) {
    if (batch <= 0) batch = s->train.batch_size / s->exec.micro_batches;
    st = ganfw_classifier_evaluate(s, test, batch, &ev);
  }
  if (st == GANFW_OK) print_report(out, ckpt, step, saved_acc, s, test, batch, &ev);
  if (st == GANFW_OK && a->accuracy) *a->accuracy = ev.accuracy;
  ganfw_eval_result_free(&ev);
  ganfw_dataset_destroy(test);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}
