/* `ganfw sample RUN_DIR|CHECKPOINT`: rebuilds the generator from the run's resolved config
 * (or --config's) and a checkpoint's weights, and writes a grid of images from the
 * fixed-noise stream of a seed (the run's own by default, so -n 64 reproduces the run's
 * sample grids). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "data/data.h"
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
#include "train/train_program.h"

/* The data shape (and class count) a checkpoint was trained on, from its metadata; *found
 * = 0 (and GANFW_OK) when it has none, as a PyTorch state_dict saved as safetensors. */
static ganfw_status metadata_info(const char *path, ganfw_data_info *info, int *found) {
  ganfw_st_file *f = NULL;
  *found = 0;
  ganfw_status st = ganfw_st_open(path, &f);
  if (st != GANFW_OK) return st;
  const char *c = ganfw_st_metadata(f, "data.channels");
  const char *h = ganfw_st_metadata(f, "data.height");
  const char *w = ganfw_st_metadata(f, "data.width");
  const char *k = ganfw_st_metadata(f, "data.num_classes"); /* a conditional GAN needs it */
  if (c && h && w) {
    *info = (ganfw_data_info){.struct_size = sizeof *info,
                              .channels = atoi(c),
                              .height = atoi(h),
                              .width = atoi(w),
                              .num_classes = k ? atoi(k) : 0};
    *found = 1;
  }
  ganfw_st_close(f);
  return GANFW_OK;
}

/* The refusal of a checkpoint without data.* metadata, saying what to do. */
static ganfw_status no_metadata(const char *path) {
  return ganfw_error_set(GANFW_ERR_IO,
                         "%s: no ganfw metadata (data.channels/height/width); pass --config "
                         "CONFIG naming the config it was trained with",
                         path);
}

ganfw_status ganfw_sample_data_info(const char *path, ganfw_data_info *info) {
  int found = 0;
  ganfw_status st = metadata_info(path, info, &found);
  return st == GANFW_OK && !found ? no_metadata(path) : st;
}

ganfw_status ganfw_sample_config_info(const ganfw_run *run, ganfw_data_info *info) {
  const ganfw_cfg *data = ganfw_cfg_section(ganfw_config_root(run->config), "data");
  const char *kind = NULL, *path = NULL;
  ganfw_transform tf;
  int32_t ch = 0, h = 0, w = 0, classes = 0;
  ganfw_status st;
  if ((st = ganfw_data_source_from_config(data, &kind, &path)) != GANFW_OK ||
      (st = ganfw_transform_from_config(data, &tf)) != GANFW_OK)
    return st;
  if (!ganfw_dataset_nominal_shape(kind, &tf, &ch, &h, &w, &classes)) {
    ganfw_dataset *ds = NULL;
    if ((st = ganfw_dataset_open(kind, path, 1, &tf, &ds)) != GANFW_OK)
      return ganfw_error_wrap(
          st, "%s: the image shape of a checkpoint without ganfw metadata comes from its data set",
          run->config_path);
    ganfw_dataset_shape(ds, &ch, &h, &w);
    classes = ganfw_dataset_num_classes(ds);
    ganfw_dataset_destroy(ds);
  }
  *info = (ganfw_data_info){
      .struct_size = sizeof *info, .channels = ch, .height = h, .width = w, .num_classes = classes};
  return GANFW_OK;
}

/* With --config: the data shape of a checkpoint without metadata is the config's; one with
 * metadata must agree with it, when the config's data set tells its shape. */
static ganfw_status config_shape(const ganfw_run *run, const char *ckpt, int found,
                                 ganfw_data_info *info) {
  ganfw_data_info want;
  ganfw_status st = ganfw_sample_config_info(run, &want);
  if (found && st != GANFW_OK) { /* no data set here to check against: the metadata hold */
    ganfw_error_clear();
    return GANFW_OK;
  }
  if (st != GANFW_OK) return st;
  if (!found) {
    *info = want;
    return GANFW_OK;
  }
  if (info->channels != want.channels || info->height != want.height || info->width != want.width)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s was trained on %dx%dx%d images but the data of %s are %dx%dx%d; "
                           "pass the config it was trained with",
                           ckpt, (int)info->channels, (int)info->height, (int)info->width,
                           run->config_path, (int)want.channels, (int)want.height, (int)want.width);
  return GANFW_OK;
}

ganfw_status ganfw_sample_source(const char *what, const char *config_opt, char *config, size_t nc,
                                 char *ckpt, size_t nk, ganfw_data_info *info, ganfw_run **run) {
  *run = NULL;
  ganfw_status st = ganfw_sample_locate(what, config, nc, ckpt, nk);
  if (st != GANFW_OK) return st;
  if (config_opt && (size_t)snprintf(config, nc, "%s", config_opt) >= nc)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "--config %s: path too long", config_opt);
  int found = 0;
  if ((st = metadata_info(ckpt, info, &found)) != GANFW_OK) return st;
  if (!found && !config_opt) return no_metadata(ckpt);
  if ((st = ganfw_run_open_file(config, NULL, 0, run)) != GANFW_OK) return st;
  if (config_opt && (st = config_shape(*run, ckpt, found, info)) != GANFW_OK) {
    ganfw_run_close(*run);
    *run = NULL;
  }
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

/* The images a trainer's grid starts from: the test split, or the training images (not
 * augmented) of a data set without one (an image folder without train/ and test/), as the
 * training run's own grids do. */
static ganfw_status open_grid_images(ganfw_session *s, ganfw_dataset **out, const char **which) {
  *which = "test";
  if (ganfw_dataset_has_test_split(s->data_kind, s->data_path))
    return ganfw_classifier_open_test_split(s, out);
  *which = "training";
  ganfw_transform tf = s->transform;
  tf.crop_padding = 0;
  tf.hflip = 0;
  const ganfw_status st = ganfw_dataset_open(s->data_kind, s->data_path, 1, &tf, out);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "data.path");
}

/* A trainer plugin's run: its sample() grid (an autoencoder's inputs beside their
 * reconstructions and a VAE's prior samples, ...) for the first a->n test images. */
static ganfw_status sample_trainer(ganfw_session *s, const char *ckpt, const ganfw_sample_args *a) {
  if (!s->trainer_vt->sample)
    return ganfw_error_set(GANFW_ERR_CONFIG, "trainer '%s' draws no samples (it has no sample())",
                           s->trainer_name);
  ganfw_dataset *test = NULL;
  ganfw_program *prog = NULL;
  ganfw_tensor *x = NULL, *labels = NULL;
  const char *which = "test";
  ganfw_status st = ganfw_program_load_weights(s, ckpt);
  if (st == GANFW_OK) st = open_grid_images(s, &test, &which);
  if (st == GANFW_OK) st = ganfw_program_create(s, &prog);
  if (st == GANFW_OK) st = ganfw_program_grid_inputs(s, test, a->n, &x, &labels);
  if (st == GANFW_OK) st = ganfw_program_write_grid(prog, x, labels, a->output);
  if (st == GANFW_OK)
    ganfw_log(GANFW_LOG_INFO,
              "trainer %s's samples of %s for the first %lld %s images written to %s",
              s->trainer_name, ckpt, (long long)x->shape[0], which, a->output);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(labels);
  ganfw_program_destroy(prog);
  ganfw_dataset_destroy(test);
  return st;
}

ganfw_status ganfw_sample(const ganfw_sample_args *a) {
  char config[4200], ckpt[4200];
  ganfw_data_info info;
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_tensor *z = NULL, *y = NULL;
  float *host = NULL;
  ganfw_status st = ganfw_sample_source(a->source, a->config, config, sizeof config, ckpt,
                                        sizeof ckpt, &info, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 0, &info, &s);
  if (st == GANFW_OK && s->family == GANFW_MODEL_NETS && !s->generator) {
    st = sample_trainer(s, ckpt, a);
    ganfw_session_close(s);
    ganfw_run_close(run);
    return st;
  }
  if (st == GANFW_OK && s->family != GANFW_MODEL_GAN && !s->generator)
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
