/* Paired data made from one image set (data.pair): each image is a target, and its input
 * is a transform of it, so an image-to-image model (pix2pix) needs no second data set:
 *
 *   grayscale   the image's luma (0.299 R + 0.587 G + 0.114 B) in every channel
 *               (colourisation; needs 3 channels)
 *   masked      a square hole of `size` pixels filled with the grey `fill` (inpainting);
 *               the hole sits at a random place per training image and step, and at a place
 *               fixed per image index for the test split and sample grids
 *   downscaled  `factor` x `factor` blocks averaged, then repeated back to the full size
 *               (super-resolution x2 or x4, the input as big as the target)
 *
 * The input has the image's shape. Values stay in the data's normalised range: `fill` is a
 * pixel value in [0, 1] and goes through data.normalize as an image would. */
#ifndef GANFW_DATA_PAIR_H
#define GANFW_DATA_PAIR_H

#include <stdint.h>

#include "data/data.h"

enum {
  GANFW_PAIR_NONE = 0,
  GANFW_PAIR_GRAYSCALE = 1,
  GANFW_PAIR_MASKED = 2,
  GANFW_PAIR_DOWNSCALED = 3,
  GANFW_PAIR_KIND_COUNT
};

typedef struct ganfw_pair_spec {
  int32_t kind;   /* GANFW_PAIR_* */
  int32_t size;   /* masked: the hole's edge in pixels; 0: half the image's smaller edge */
  int32_t factor; /* downscaled: 2 or 4 */
  float fill;     /* masked: the hole's pixel value in [0, 1] before data.normalize */
} ganfw_pair_spec;

/* data.pair: {kind: grayscale|masked|downscaled, size: N, fill: F, factor: 2|4} into *out
 * (kind NONE when absent). GANFW_ERR_CONFIG naming the key and where it is. */
ganfw_status ganfw_pair_from_config(const ganfw_cfg *data, ganfw_pair_spec *out);

/* Whether images of c x h x w can be paired as *p says: GANFW_ERR_CONFIG naming data.pair's
 * key otherwise (grayscale of one channel, a hole larger than the image, a size the factor
 * does not divide). `where` is the config position for the message. */
ganfw_status ganfw_pair_check(const ganfw_pair_spec *p, const char *where, int32_t c, int32_t h,
                              int32_t w);

/* The inputs of n images x [n,c,h,w] (normalised as tf says) into out (the same shape; not
 * x). A masked image's hole is placed by ganfw_data_sample_key(seed, epoch, index0 + i) for
 * row i: training passes the step as `epoch`, the test split and sample grids -1 and the
 * image's index. */
void ganfw_pair_make(const ganfw_pair_spec *p, const ganfw_transform *tf, const float *x, int64_t n,
                     int32_t c, int32_t h, int32_t w, uint64_t seed, int64_t epoch, int64_t index0,
                     float *out);

/* "grayscale", "masked", "downscaled" ("none" for NONE), static. */
const char *ganfw_pair_kind_name(int32_t kind);

#endif
