/* The generic dataset: a source (MNIST, Fashion-MNIST, CIFAR-10, image folder) plus its
 * transforms; get(i) decodes sample i and writes the transformed image [C,H,W] and its
 * label. */
#include <stdio.h>
#include <stdlib.h>

#include "data/data_source.h"
#include "base/error.h"

struct ganfw_dataset {
  const ganfw_source_vt *vt;
  void *self;
  char name[512];
  int64_t size;
  int32_t num_classes;
  ganfw_transform tf;
  int32_t c, h, w;                /* output shape */
  const char *const *class_names; /* [num_class_names], static or the source's; NULL: none */
  int32_t num_class_names;
};

ganfw_status ganfw_dataset_wrap(const ganfw_source_vt *vt, void *self, const char *name,
                                int64_t size, int32_t num_classes, int32_t src_h, int32_t src_w,
                                int32_t native_c, const ganfw_transform *tf, ganfw_dataset **out) {
  static const ganfw_transform none;
  *out = NULL;
  ganfw_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) {
    vt->destroy(self);
    return ganfw_error_set(GANFW_ERR_OOM, "%s: no host memory", name);
  }
  ds->vt = vt;
  ds->self = self;
  snprintf(ds->name, sizeof ds->name, "%s", name);
  ds->size = size;
  ds->num_classes = num_classes;
  ds->tf = tf ? *tf : none;
  ds->c = ds->tf.channels ? ds->tf.channels : native_c;
  ganfw_status st = ganfw_transform_shape(&ds->tf, src_h, src_w, &ds->h, &ds->w);
  if (st == GANFW_OK && ds->tf.norm_n > 1 && ds->tf.norm_n != ds->c)
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "data.normalize gives %d means and stds but the images have %d "
                         "channel%s: give one value, or one per channel",
                         (int)ds->tf.norm_n, (int)ds->c, ds->c == 1 ? "" : "s");
  if (st != GANFW_OK) {
    ganfw_dataset_destroy(ds);
    return ganfw_error_wrap(st, "%s", name);
  }
  *out = ds;
  return GANFW_OK;
}

void ganfw_dataset_destroy(ganfw_dataset *ds) {
  if (!ds) return;
  ds->vt->destroy(ds->self);
  free(ds);
}

int64_t ganfw_dataset_size(const ganfw_dataset *ds) {
  return ds->size;
}

int32_t ganfw_dataset_num_classes(const ganfw_dataset *ds) {
  return ds->num_classes;
}

void ganfw_dataset_shape(const ganfw_dataset *ds, int32_t *c, int32_t *h, int32_t *w) {
  *c = ds->c;
  *h = ds->h;
  *w = ds->w;
}

const char *ganfw_dataset_name(const ganfw_dataset *ds) {
  return ds->name;
}

void ganfw_dataset_set_class_names(ganfw_dataset *ds, const char *const *names, int32_t n) {
  ds->class_names = names;
  ds->num_class_names = n;
}

const char *ganfw_dataset_class_name(const ganfw_dataset *ds, int32_t label) {
  if (!ds->class_names || label < 0 || label >= ds->num_class_names) return NULL;
  return ds->class_names[label];
}

uint64_t ganfw_data_sample_key(uint64_t seed, int64_t epoch, int64_t index) {
  return ganfw_data_mix64(ganfw_data_mix64(ganfw_data_mix64(seed) ^ (uint64_t)epoch) ^
                          (uint64_t)index);
}

ganfw_status ganfw_dataset_get(const ganfw_dataset *ds, int64_t index, uint64_t key, float *image,
                               int32_t *label) {
  if (index < 0 || index >= ds->size)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: sample %lld is out of range 0..%lld",
                           ds->name, (long long)index, (long long)ds->size - 1);
  ganfw_raw_image img = {0};
  int32_t lab = 0;
  ganfw_status st = ds->vt->load(ds->self, index, &img, &lab);
  if (st != GANFW_OK) return st;
  st = ganfw_transform_apply_scaled(
      &ds->tf, img.pixels, img.c, img.h, img.w, img.full_h ? img.full_h : img.h,
      img.full_w ? img.full_w : img.w, key, image, ds->c, ds->h, ds->w);
  free(img.pixels);
  if (st != GANFW_OK) {
    const char *path = ds->vt->sample_path ? ds->vt->sample_path(ds->self, index) : NULL;
    return ganfw_error_wrap(st == GANFW_ERR_INVALID_ARG ? GANFW_ERR_IO : st, "%s, sample %lld",
                            path ? path : ds->name, (long long)index);
  }
  if (label) *label = lab;
  return GANFW_OK;
}
