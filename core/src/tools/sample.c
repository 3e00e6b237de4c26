/* `ganfw sample RUN_DIR|CHECKPOINT`: rebuilds the generator from the run's resolved config
 * and a checkpoint's weights, and writes a grid of images from the fixed-noise stream of a
 * seed (the run's own by default, so -n 64 reproduces the run's sample grids). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/checkpoint.h"
#include "base/error.h"
#include "base/log.h"
#include "train/ema.h"
#include "train/outputs.h"
#include "io/png_io.h"
#include "io/safetensors.h"
#include "tools/sample.h"
#include "runtime/tensor.h"
#include "train/trainer.h"

/* The data shape (and class count) a checkpoint was trained on, from its metadata. */
ganfw_status ganfw_sample_data_info(const char *path, ganfw_data_info *info) {
  ganfw_st_file *f = NULL;
  ganfw_status st = ganfw_st_open(path, &f);
  if (st != GANFW_OK) return st;
  const char *c = ganfw_st_metadata(f, "data.channels");
  const char *h = ganfw_st_metadata(f, "data.height");
  const char *w = ganfw_st_metadata(f, "data.width");
  const char *k = ganfw_st_metadata(f, "data.num_classes"); /* a conditional GAN needs it */
  if (!c || !h || !w)
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
  ganfw_st_close(f);
  return st;
}

/* RUN_DIR -> its config and latest checkpoint; CHECKPOINT -> the run folder above it. */
ganfw_status ganfw_sample_locate(const char *what, char *config, size_t nc, char *ckpt, size_t nk) {
  struct stat sb;
  if (stat(what, &sb) != 0)
    return ganfw_error_set(GANFW_ERR_IO, "%s: no such run folder or checkpoint", what);
  ganfw_status st;
  if (S_ISDIR(sb.st_mode)) {
    char dir[4096];
    int64_t step = -1;
    if ((st = ganfw_path_join(dir, sizeof dir, what, "checkpoints")) ||
        (st = ganfw_checkpoint_latest(dir, ckpt, nk, &step)))
      return st;
    if (step < 0)
      return ganfw_error_set(GANFW_ERR_IO,
                             "%s: no checkpoint yet (train longer, or set "
                             "train.checkpoint_every)",
                             dir);
    return ganfw_path_join(config, nc, what, "config.resolved.yaml");
  }
  snprintf(ckpt, nk, "%s", what);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", what);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  else
    snprintf(dir, sizeof dir, ".");
  return ganfw_path_join(config, nc, dir, "../config.resolved.yaml");
}

ganfw_status ganfw_sample(const ganfw_sample_args *a) {
  char config[4200], ckpt[4200];
  ganfw_status st = ganfw_sample_locate(a->source, config, sizeof config, ckpt, sizeof ckpt);
  if (st != GANFW_OK) return st;
  ganfw_data_info info;
  if ((st = ganfw_sample_data_info(ckpt, &info)) != GANFW_OK) return st;
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_tensor *z = NULL, *y = NULL;
  float *host = NULL;
  st = ganfw_run_open(config, NULL, 0, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 0, &info, &s);
  if (st == GANFW_OK && s->family != GANFW_MODEL_GAN)
    st = ganfw_error_set(GANFW_ERR_CONFIG, "%s: the model is not a GAN; nothing to sample", config);
  if (st == GANFW_OK && a->has_class && !s->n_classes)
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "--class %d: the generator of %s is not conditional (model.conditional "
                         "is not set in %s); drop --class",
                         (int)a->cls, ckpt, config);
  if (st == GANFW_OK && a->has_class && (a->cls < 0 || a->cls >= s->n_classes))
    st = ganfw_error_set(GANFW_ERR_CONFIG, "--class %d: the model has classes 0..%lld", (int)a->cls,
                         (long long)s->n_classes - 1);
  int32_t ema = 0, *labels = NULL;
  if (st == GANFW_OK && s->n_classes) {
    labels = calloc((size_t)a->n, sizeof *labels);
    if (!labels)
      st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    else
      ganfw_gan_grid_labels(labels, a->n, a->nrow, (int32_t)s->n_classes,
                            a->has_class ? a->cls : -1);
  }
  if (st == GANFW_OK) st = ganfw_ema_load_generator(s, ckpt, !a->no_ema, &ema);
  if (st == GANFW_OK) {
    z = ganfw_gan_fixed_noise(s, a->n, a->has_seed ? a->seed : s->ctx->seed);
    st = z ? ganfw_gan_generate(s, z, labels, &y) : ganfw_error_code();
  }
  if (st == GANFW_OK) {
    host = malloc((size_t)y->nbytes);
    st = host ? ganfw_tensor_to_host(y, host, y->nbytes)
              : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  if (st == GANFW_OK)
    st = ganfw_png_write_grid(a->output, host, (int32_t)y->shape[0], (int32_t)y->shape[1],
                              (int32_t)y->shape[2], (int32_t)y->shape[3], a->nrow, 2, 0.0f, 1);
  if (st == GANFW_OK)
    ganfw_log(GANFW_LOG_INFO, "%lld samples of %s%s written to %s", (long long)a->n, ckpt,
              ema ? " (the generator's EMA; --no-ema for the raw one)" : "", a->output);
  free(host);
  free(labels);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(z);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}
