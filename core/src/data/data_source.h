/* Inside the data module: what a dataset source (MNIST, CIFAR-10, folder) supplies to the
 * generic dataset in data.c, and the transform pipeline (transform.c) that turns a decoded
 * image [c,h,w] in [0,1] into the dataset's output [C,H,W]. */
#ifndef GANFW_DATA_SOURCE_H
#define GANFW_DATA_SOURCE_H

#include <stdint.h>

#include "data/data.h"

/* A decoded image, float [c,h,w] in [0,1]; `pixels` is malloc'd and owned by whoever holds
 * the struct (free()). full_h x full_w is the size the transforms take it for: the file's
 * own size when it was decoded smaller (a JPEG scaled in the DCT domain), so that its
 * resize ends at the size the full image would have had; 0: h x w. */
typedef struct ganfw_raw_image {
  float *pixels;
  int32_t c, h, w;
  int32_t full_h, full_w;
} ganfw_raw_image;

typedef struct ganfw_source_vt {
  /* Decodes sample `index` into *img (a new buffer) and its label. Thread-safe. */
  ganfw_status (*load)(const void *self, int64_t index, ganfw_raw_image *img, int32_t *label);
  /* The file a sample comes from, for messages (optional: NULL = the dataset's name). */
  const char *(*sample_path)(const void *self, int64_t index);
  void (*destroy)(void *self);
} ganfw_source_vt;

/* Wraps a source into a dataset. `src_h` x `src_w` is the decoded size of a typical sample (the
 * first one) from which the output shape is computed; `native_c` is the channel count used
 * when tf->channels is 0. Takes ownership of `self` (destroyed on failure too). */
ganfw_status ganfw_dataset_wrap(const ganfw_source_vt *vt, void *self, const char *name,
                                int64_t size, int32_t num_classes, int32_t src_h, int32_t src_w,
                                int32_t native_c, const ganfw_transform *tf, ganfw_dataset **out);
/* Gives `ds` the names of its classes: names[0..n), strings that outlive it (static, or
 * owned by its source, which the dataset destroys last). */
void ganfw_dataset_set_class_names(ganfw_dataset *ds, const char *const *names, int32_t n);

/* Each source's sample count from its headers or listing, without reading the images
 * (registry.c's ganfw_dataset_count): the MNIST and Fashion-MNIST images file's header, the
 * CIFAR-10 batch files' sizes, the folder's image files (each file's first bytes read to
 * tell an image; no warning for the files skipped). Errors as the source's open gives for a
 * missing or damaged file. */
ganfw_status ganfw_dataset_count_mnist(const char *dir, int32_t train, int64_t *n);
ganfw_status ganfw_dataset_count_fashion_mnist(const char *dir, int32_t train, int64_t *n);
ganfw_status ganfw_dataset_count_cifar10(const char *dir, int32_t train, int64_t *n);
ganfw_status ganfw_dataset_count_folder(const char *dir, int32_t train, int64_t *n);
/* 1 when the image folder `dir` holds both train/ and test/ (its test split is dir/test). */
int ganfw_dataset_folder_has_test(const char *dir);

/* GANFW_OK when registry.c knows `kind`; else GANFW_ERR_CONFIG listing the kinds (and the
 * nearest one, for a typo). */
ganfw_status ganfw_dataset_check_kind(const char *kind);

/* --- transform.c --------------------------------------------------------------------------- */
/* The output shape of `tf` for an input of h x w (channels resolved by the caller). Returns
 * GANFW_ERR_CONFIG naming the field when the transform is invalid or yields an empty image. */
ganfw_status ganfw_transform_shape(const ganfw_transform *tf, int32_t h, int32_t w, int32_t *oh,
                                   int32_t *ow);

/* Applies tf to src [c,h,w] in [0,1] (c = 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA): alpha
 * composited (tf->alpha), converted to oc channels (1 or 3), into dst [oc,oh,ow] (which must
 * be the shape ganfw_transform_shape gives; GANFW_ERR_INVALID_ARG otherwise). `key` decides
 * the random crop and the flip. */
ganfw_status ganfw_transform_apply(const ganfw_transform *tf, const float *src, int32_t c,
                                   int32_t h, int32_t w, uint64_t key, float *dst, int32_t oc,
                                   int32_t oh, int32_t ow);
/* The same for an image decoded at h x w in place of its full_h x full_w (a JPEG scaled in
 * the DCT domain): shapes and the resize target come from the full size, the resize starts
 * from the h x w pixels. */
ganfw_status ganfw_transform_apply_scaled(const ganfw_transform *tf, const float *src, int32_t c,
                                          int32_t h, int32_t w, int32_t full_h, int32_t full_w,
                                          uint64_t key, float *dst, int32_t oc, int32_t oh,
                                          int32_t ow);
/* How far a decoder may scale an image down before tf's resize: to no less than min_h x
 * min_w, i.e. resize x resize for Resize(int) (the shorter side stays >= resize, and so
 * does the longer) and resize_h x resize_w for an exact resize; both 0 when the transform
 * needs the full size (no resize, or tf->jpeg_full_size). */
void ganfw_transform_decode_min(const ganfw_transform *tf, int32_t *min_h, int32_t *min_w);

/* Bilinear resize of x [c,h,w] into y [c,oh,ow] with the formula of PyTorch's
 * F.interpolate(mode="bilinear", align_corners=False) without antialiasing: source coordinate
 * (dst + 0.5) * (in / out) - 0.5, clamped at 0, neighbours clamped at the last pixel.
 * GANFW_ERR_OOM when its small index table cannot be allocated. */
ganfw_status ganfw_resize_bilinear(const float *x, int32_t c, int32_t h, int32_t w, float *y,
                                   int32_t oh, int32_t ow);

/* splitmix64's finaliser: a well-mixed 64-bit hash of x. */
uint64_t ganfw_data_mix64(uint64_t x);

#endif
