/* The sample transforms of a dataset, in torchvision's order: alpha compositing, channel
 * conversion, bilinear resize, center crop, pad, random crop with zero padding, random
 * horizontal flip, normalise ((x - mean) / std per channel, [-1,1] by default). Works on one
 * image [c,h,w] of floats in [0,1] and writes [oc,oh,ow]; the random steps are drawn from the
 * sample's key. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_source.h"
#include "base/error.h"

uint64_t ganfw_data_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Source index and weight of output position `dst` along an axis of `in` -> `out`, as
 * PyTorch's CPU upsample_bilinear2d computes them for align_corners=False: the scale in
 * float, the source coordinate (dst + 0.5) * scale - 0.5 in double (its 0.5 literals are
 * double), the weight rounded to float last. Measured against torch 1.13 this matches the
 * weights bit for bit (tests/test_ref_data.c). */
static void linear_coord(int32_t dst, float scale, int32_t in, int32_t *i0, int32_t *i1,
                         float *lambda) {
  double src = (double)scale * ((double)dst + 0.5) - 0.5;
  if (src < 0.0) src = 0.0;
  int32_t i = (int32_t)src; /* src >= 0: truncation is floor */
  if (i > in - 1) i = in - 1;
  const double l = src - (double)i;
  *lambda = (float)(l < 0.0 ? 0.0 : (l > 1.0 ? 1.0 : l));
  *i0 = i;
  *i1 = i < in - 1 ? i + 1 : i;
}

ganfw_status ganfw_resize_bilinear(const float *x, int32_t c, int32_t h, int32_t w, float *y,
                                   int32_t oh, int32_t ow) {
  const float sh = (float)h / (float)oh, sw = (float)w / (float)ow;
  int32_t *xi = malloc(sizeof(int32_t) * 2 * ow);
  float *xl = malloc(sizeof(float) * ow);
  if (!xi || !xl) {
    free(xi);
    free(xl);
    return ganfw_error_set(GANFW_ERR_OOM, "resize: no host memory");
  }
  for (int32_t ox = 0; ox < ow; ox++)
    linear_coord(ox, sw, w, &xi[2 * ox], &xi[2 * ox + 1], &xl[ox]);
  for (int32_t k = 0; k < c; k++) {
    const float *p = x + (size_t)k * h * w;
    for (int32_t oy = 0; oy < oh; oy++) {
      int32_t y0, y1;
      float ly;
      linear_coord(oy, sh, h, &y0, &y1, &ly);
      const float *r0 = p + (size_t)y0 * w, *r1 = p + (size_t)y1 * w;
      float *out = y + ((size_t)k * oh + oy) * ow;
      for (int32_t ox = 0; ox < ow; ox++) {
        const int32_t x0 = xi[2 * ox], x1 = xi[2 * ox + 1];
        const float lx = xl[ox];
        out[ox] = (1.0f - ly) * ((1.0f - lx) * r0[x0] + lx * r0[x1]) +
                  ly * ((1.0f - lx) * r1[x0] + lx * r1[x1]);
      }
    }
  }
  free(xi);
  free(xl);
  return GANFW_OK;
}

/* The size after the resize step. */
static void resized_size(const ganfw_transform *tf, int32_t h, int32_t w, int32_t *rh,
                         int32_t *rw) {
  if (tf->resize_h > 0 && tf->resize_w > 0) {
    *rh = tf->resize_h;
    *rw = tf->resize_w;
  } else if (tf->resize > 0) {
    /* torchvision Resize(int): the smaller edge becomes `resize`. */
    if (h <= w) {
      *rh = tf->resize;
      *rw = (int32_t)((int64_t)tf->resize * w / h);
    } else {
      *rw = tf->resize;
      *rh = (int32_t)((int64_t)tf->resize * h / w);
    }
  } else {
    *rh = h;
    *rw = w;
  }
}

ganfw_status ganfw_transform_shape(const ganfw_transform *tf, int32_t h, int32_t w, int32_t *oh,
                                   int32_t *ow) {
  static const ganfw_transform none;
  if (!tf) tf = &none;
  if (tf->channels != 0 && tf->channels != 1 && tf->channels != 3)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "transform: channels must be 1, 3 or 0 (the "
                           "source's own), not %d",
                           tf->channels);
  if (tf->resize < 0 || tf->resize_h < 0 || tf->resize_w < 0 || tf->crop_h < 0 || tf->crop_w < 0 ||
      tf->pad < 0 || tf->crop_padding < 0 || tf->resize > 65536 || tf->resize_h > 65536 ||
      tf->resize_w > 65536 || tf->crop_h > 65536 || tf->crop_w > 65536 || tf->pad > 65536 ||
      tf->crop_padding > 65536)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "transform: resize, crop and pad sizes must be in 0..65536 "
                           "(got resize %d, resize_h %d, resize_w %d, crop %d x %d, pad %d, "
                           "crop_padding %d)",
                           tf->resize, tf->resize_h, tf->resize_w, tf->crop_h, tf->crop_w, tf->pad,
                           tf->crop_padding);
  if ((tf->resize_h > 0) != (tf->resize_w > 0))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "transform: resize_h and resize_w go together (got %d and %d); "
                           "use `resize` for the smaller edge",
                           tf->resize_h, tf->resize_w);
  if ((tf->crop_h > 0) != (tf->crop_w > 0))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "transform: crop_h and crop_w go together (got %d and %d)", tf->crop_h,
                           tf->crop_w);
  if ((tf->hflip != 0 && tf->hflip != 1) || (tf->unit_range != 0 && tf->unit_range != 1) ||
      (tf->jpeg_full_size != 0 && tf->jpeg_full_size != 1))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "transform: hflip, unit_range and jpeg_full_size are 0 or 1");
  if (tf->alpha < 0 || tf->alpha >= GANFW_ALPHA_COUNT)
    return ganfw_error_set(GANFW_ERR_CONFIG, "transform: alpha mode %d is not a ganfw_alpha_mode",
                           tf->alpha);
  for (int32_t k = 0; tf->alpha == GANFW_ALPHA_OVER_COLOR && k < 3; k++)
    if (!(tf->background[k] >= 0.0f && tf->background[k] <= 1.0f))
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "data.background: channel %d is %g, outside [0,1] (0..255 in the "
                             "config)",
                             k, (double)tf->background[k]);
  if (tf->norm_n < 0 || tf->norm_n > 3 || (tf->unit_range && tf->norm_n))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "transform: normalize takes 1 to 3 means and stds (got %d) and "
                           "excludes unit_range",
                           tf->norm_n);
  for (int32_t k = 0; k < tf->norm_n; k++)
    if (!(tf->std[k] > 0) || !isfinite(tf->std[k]) || !isfinite(tf->mean[k]))
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "transform: normalize std[%d] is %g, mean[%d] %g: every std must be "
                             "> 0 and every value finite",
                             k, (double)tf->std[k], k, (double)tf->mean[k]);
  if (h <= 0 || w <= 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "transform: empty input image %d x %d", h, w);
  int32_t rh, rw;
  resized_size(tf, h, w, &rh, &rw);
  if (rh <= 0 || rw <= 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "data.resize %d turns a %d x %d image into %d x %d pixels: give a "
                           "larger data.resize",
                           tf->resize, h, w, rh, rw);
  if (tf->crop_h > 0) {
    rh = tf->crop_h;
    rw = tf->crop_w;
  }
  *oh = rh + 2 * tf->pad;
  *ow = rw + 2 * tf->pad;
  return GANFW_OK;
}

/* Where a center crop of `crop` starts in `n` pixels (negative: the crop is larger and the
 * image sits in its middle, zeros around), as torchvision's center_crop. */
static int32_t crop_offset(int32_t n, int32_t crop) {
  if (crop > n) return -((crop - n) / 2);
  return (int32_t)nearbyint((double)(n - crop) / 2.0); /* Python's round: half to even */
}

void ganfw_transform_decode_min(const ganfw_transform *tf, int32_t *min_h, int32_t *min_w) {
  *min_h = *min_w = 0;
  if (tf->jpeg_full_size) return;
  if (tf->resize_h > 0 && tf->resize_w > 0) {
    *min_h = tf->resize_h;
    *min_w = tf->resize_w;
  } else if (tf->resize > 0) {
    *min_h = *min_w = tf->resize;
  }
}

/* The number of channels src [c,h,w] (2 gray+alpha or 4 RGBA) has once its alpha is
 * composited over bg: 1 when both image and background are gray, else 3. */
static int32_t composited_channels(int32_t c, const float bg[3]) {
  return c == 2 && bg[0] == bg[1] && bg[1] == bg[2] ? 1 : 3;
}

/* x = a * x + (1 - a) * bg of src [c,h,w] (2 or 4 channels, alpha last) into dst
 * [composited_channels(c, bg),h,w]. */
static void composite_alpha(const float *src, int32_t c, size_t plane, const float bg[3],
                            float *dst) {
  const float *alpha = src + (size_t)(c - 1) * plane;
  const int32_t oc = composited_channels(c, bg);
  for (int32_t k = 0; k < oc; k++) {
    const float *x = src + (c == 2 ? 0 : (size_t)k * plane);
    float *y = dst + (size_t)k * plane;
    for (size_t i = 0; i < plane; i++) y[i] = alpha[i] * x[i] + (1.0f - alpha[i]) * bg[k];
  }
}

/* Converts src [c,h,w] (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA) to dst [oc,h,w] (1 or 3). */
static void convert_channels(const float *src, int32_t c, size_t plane, float *dst, int32_t oc) {
  if (oc == 1) {
    if (c <= 2) {
      memcpy(dst, src, sizeof(float) * plane);
    } else {
      for (size_t i = 0; i < plane; i++)
        dst[i] = 0.299f * src[i] + 0.587f * src[plane + i] + 0.114f * src[2 * plane + i];
    }
  } else {
    for (int32_t k = 0; k < 3; k++)
      memcpy(dst + k * plane, src + (c <= 2 ? 0 : k * plane), sizeof(float) * plane);
  }
}

ganfw_status ganfw_transform_apply(const ganfw_transform *tf, const float *src, int32_t c,
                                   int32_t h, int32_t w, uint64_t key, float *dst, int32_t oc,
                                   int32_t oh, int32_t ow) {
  return ganfw_transform_apply_scaled(tf, src, c, h, w, h, w, key, dst, oc, oh, ow);
}

ganfw_status ganfw_transform_apply_scaled(const ganfw_transform *tf, const float *src, int32_t c,
                                          int32_t h, int32_t w, int32_t full_h, int32_t full_w,
                                          uint64_t key, float *dst, int32_t oc, int32_t oh,
                                          int32_t ow) {
  static const ganfw_transform none;
  if (!tf) tf = &none;
  int32_t eh, ew;
  ganfw_status st = ganfw_transform_shape(tf, full_h, full_w, &eh, &ew);
  if (st != GANFW_OK) return st;
  if (eh != oh || ew != ow || (oc != 1 && oc != 3) || c < 1 || c > 4 || h <= 0 || w <= 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "a %d-channel %d x %d image becomes %d x %d, not the data set's %d x "
                           "%d (%d channels): images of different sizes or shapes need data.crop "
                           "(a center crop after data.resize) to come out one size",
                           c, full_h, full_w, eh, ew, oh, ow, oc);
  const size_t plane = (size_t)h * w;
  const float *cur = src;
  float *comp = NULL, *conv = NULL, *rs = NULL;
  if ((c == 2 || c == 4) && tf->alpha != GANFW_ALPHA_DROP) {
    static const float white[3] = {1.0f, 1.0f, 1.0f};
    const float *bg = tf->alpha == GANFW_ALPHA_OVER_COLOR ? tf->background : white;
    const int32_t cc = composited_channels(c, bg);
    comp = malloc(sizeof(float) * cc * plane);
    if (!comp) return ganfw_error_set(GANFW_ERR_OOM, "transform: no host memory");
    composite_alpha(src, c, plane, bg, comp);
    cur = comp;
    c = cc;
  }
  if (c != oc) {
    conv = malloc(sizeof(float) * oc * plane);
    if (!conv) {
      free(comp);
      return ganfw_error_set(GANFW_ERR_OOM, "transform: no host memory");
    }
    convert_channels(cur, c, plane, conv, oc);
    cur = conv;
  }
  int32_t rh, rw;
  resized_size(tf, full_h, full_w, &rh, &rw);
  if (rh != h || rw != w) {
    rs = malloc(sizeof(float) * oc * rh * rw);
    if (!rs) {
      free(comp);
      free(conv);
      return ganfw_error_set(GANFW_ERR_OOM, "transform: no host memory");
    }
    st = ganfw_resize_bilinear(cur, oc, h, w, rs, rh, rw);
    if (st != GANFW_OK) {
      free(comp);
      free(conv);
      free(rs);
      return st;
    }
    cur = rs;
  }
  /* One pass for crop, pad, random crop, flip and normalise: output (y, x) <- the flipped
   * column xf, shifted by the random crop to (y + dy, xf + dx) of the padded image, which is
   * resized (y', x') or a zero. */
  const int32_t cropped_h = tf->crop_h > 0 ? tf->crop_h : rh;
  const int32_t cropped_w = tf->crop_w > 0 ? tf->crop_w : rw;
  const int32_t oy0 = tf->crop_h > 0 ? crop_offset(rh, tf->crop_h) : 0;
  const int32_t ox0 = tf->crop_w > 0 ? crop_offset(rw, tf->crop_w) : 0;
  const int flip = tf->hflip && (ganfw_data_mix64(key ^ 0x666C6970ull) >> 63);
  const int32_t pad = tf->pad;
  int32_t dy = 0, dx = 0;
  if (tf->crop_padding > 0) {
    /* RandomCrop's top i and left j in the image padded by p: uniform in 0..2p each (the
     * modulo's bias is below 2^-15 for p <= 65536), i.e. a shift of i - p, j - p. */
    const uint64_t r = ganfw_data_mix64(key ^ 0x63726F70ull),
                   span = 2 * (uint64_t)tf->crop_padding + 1;
    dy = (int32_t)((r & 0xFFFFFFFFull) % span) - tf->crop_padding;
    dx = (int32_t)((r >> 32) % span) - tf->crop_padding;
  }
  if (tf->norm_n > 1 && tf->norm_n != oc) {
    free(comp);
    free(conv);
    free(rs);
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "normalize gives %d means and stds for %d-channel images: give one, "
                           "or one per channel",
                           tf->norm_n, oc);
  }
  for (int32_t k = 0; k < oc; k++) {
    const float *p = cur + (size_t)k * rh * rw;
    const int32_t nk = tf->norm_n > 1 ? k : 0;
    const float mean = tf->norm_n ? tf->mean[nk] : 0.5f, std = tf->norm_n ? tf->std[nk] : 0.5f;
    for (int32_t y = 0; y < oh; y++) {
      float *out = dst + ((size_t)k * oh + y) * ow;
      const int32_t yp = y + dy, yc = yp - pad, ys = yc + oy0;
      const int row_in = yp >= 0 && yp < oh && yc >= 0 && yc < cropped_h && ys >= 0 && ys < rh;
      for (int32_t x = 0; x < ow; x++) {
        const int32_t xp = (flip ? ow - 1 - x : x) + dx, xc = xp - pad, xs = xc + ox0;
        float v = 0.0f;
        if (row_in && xp >= 0 && xp < ow && xc >= 0 && xc < cropped_w && xs >= 0 && xs < rw)
          v = p[(size_t)ys * rw + xs];
        out[x] = tf->unit_range ? v : (v - mean) / std;
      }
    }
  }
  free(comp);
  free(conv);
  free(rs);
  return GANFW_OK;
}
