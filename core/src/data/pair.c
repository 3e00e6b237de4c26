/* data.pair: an input made from each image (see pair.h). */
#include "data/pair.h"

#include <string.h>

#include "base/error.h"
#include "config/config.h"

static const char *const kind_names[GANFW_PAIR_KIND_COUNT] = {"none", "grayscale", "masked",
                                                              "downscaled"};

const char *ganfw_pair_kind_name(int32_t kind) {
  return kind >= 0 && kind < GANFW_PAIR_KIND_COUNT ? kind_names[kind] : "unknown";
}

ganfw_status ganfw_pair_from_config(const ganfw_cfg *data, ganfw_pair_spec *out) {
  memset(out, 0, sizeof *out);
  out->fill = 0.5f;
  out->factor = 2;
  if (!ganfw_cfg_has(data, "pair")) return GANFW_OK;
  const ganfw_cfg *pair = ganfw_cfg_child(data, "pair");
  const char *where = ganfw_cfg_where(pair);
  if (ganfw_cfg_kind_of(pair) != GANFW_CFG_KIND_MAP)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.pair must be a map {kind: grayscale|masked|downscaled, ...}",
                           where);
  const char *kind = NULL;
  ganfw_status st = ganfw_cfg_string(pair, "kind", NULL, &kind);
  if (st != GANFW_OK) return st;
  if (!kind)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.pair needs a kind: grayscale, masked or downscaled", where);
  for (int32_t k = 1; k < GANFW_PAIR_KIND_COUNT; k++)
    if (strcmp(kind, kind_names[k]) == 0) out->kind = k;
  if (out->kind == GANFW_PAIR_NONE)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.pair.kind '%s' is not one of grayscale, masked, downscaled",
                           ganfw_cfg_where(ganfw_cfg_child(pair, "kind")), kind);
  int64_t v;
  double f;
  if (out->kind == GANFW_PAIR_MASKED) {
    if ((st = ganfw_cfg_int_in(pair, "size", 0, 0, 1 << 16, &v)) != GANFW_OK) return st;
    out->size = (int32_t)v;
    if ((st = ganfw_cfg_float_in(pair, "fill", 0.5, 0.0, 1.0, 0, &f)) != GANFW_OK) return st;
    out->fill = (float)f;
  } else if (out->kind == GANFW_PAIR_DOWNSCALED) {
    if ((st = ganfw_cfg_int(pair, "factor", 2, &v)) != GANFW_OK) return st;
    if (v != 2 && v != 4)
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: data.pair.factor must be 2 or 4, got %lld",
                             ganfw_cfg_where(ganfw_cfg_child(pair, "factor")), (long long)v);
    out->factor = (int32_t)v;
  }
  return GANFW_OK;
}

ganfw_status ganfw_pair_check(const ganfw_pair_spec *p, const char *where, int32_t c, int32_t h,
                              int32_t w) {
  const int32_t edge = h < w ? h : w;
  switch (p->kind) {
  case GANFW_PAIR_GRAYSCALE:
    if (c != 3)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: data.pair.kind grayscale needs colour images; the data has %d "
                             "channel%s (use masked or downscaled)",
                             where, (int)c, c == 1 ? "" : "s");
    break;
  case GANFW_PAIR_MASKED:
    if (p->size > edge)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: data.pair.size %d is larger than the %dx%d images; at most %d",
                             where, (int)p->size, (int)h, (int)w, (int)edge);
    break;
  case GANFW_PAIR_DOWNSCALED:
    if (h % p->factor || w % p->factor)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: data.pair.factor %d does not divide the %dx%d images (resize "
                             "or crop them to a multiple of it)",
                             where, (int)p->factor, (int)h, (int)w);
    break;
  default:
    break;
  }
  return GANFW_OK;
}

/* The normalised value of pixel value v in channel k. */
static float normalised(const ganfw_transform *tf, int32_t k, float v) {
  if (tf->unit_range) return v;
  const int32_t i = tf->norm_n > 1 ? k : 0;
  const float mean = tf->norm_n ? tf->mean[i] : 0.5f, std = tf->norm_n ? tf->std[i] : 0.5f;
  return (v - mean) / std;
}

static float pixel(const ganfw_transform *tf, int32_t k, float x) {
  if (tf->unit_range) return x;
  const int32_t i = tf->norm_n > 1 ? k : 0;
  const float mean = tf->norm_n ? tf->mean[i] : 0.5f, std = tf->norm_n ? tf->std[i] : 0.5f;
  return x * std + mean;
}

void ganfw_pair_make(const ganfw_pair_spec *p, const ganfw_transform *tf, const float *x, int64_t n,
                     int32_t c, int32_t h, int32_t w, uint64_t seed, int64_t epoch, int64_t index0,
                     float *out) {
  const int64_t plane = (int64_t)h * w, image = (int64_t)c * plane;
  memcpy(out, x, (size_t)(n * image) * sizeof *out);
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * image;
    float *oi = out + i * image;
    if (p->kind == GANFW_PAIR_GRAYSCALE) {
      for (int64_t q = 0; q < plane; q++) {
        const float luma = 0.299f * pixel(tf, 0, xi[q]) + 0.587f * pixel(tf, 1, xi[plane + q]) +
                           0.114f * pixel(tf, 2, xi[2 * plane + q]);
        for (int32_t k = 0; k < c; k++) oi[k * plane + q] = normalised(tf, k, luma);
      }
    } else if (p->kind == GANFW_PAIR_MASKED) {
      const int32_t edge = h < w ? h : w, size = p->size ? p->size : edge / 2;
      const uint64_t key = ganfw_data_sample_key(seed, epoch, index0 + i);
      const int32_t top = (int32_t)((key >> 8) % (uint64_t)(h - size + 1)),
                    left = (int32_t)((key >> 36) % (uint64_t)(w - size + 1));
      for (int32_t k = 0; k < c; k++) {
        const float v = normalised(tf, k, p->fill);
        for (int32_t r = top; r < top + size; r++)
          for (int32_t q = left; q < left + size; q++) oi[k * plane + (int64_t)r * w + q] = v;
      }
    } else if (p->kind == GANFW_PAIR_DOWNSCALED) {
      const int32_t f = p->factor;
      for (int32_t k = 0; k < c; k++)
        for (int32_t r = 0; r < h; r += f)
          for (int32_t q = 0; q < w; q += f) {
            double sum = 0;
            for (int32_t a = 0; a < f; a++)
              for (int32_t b = 0; b < f; b++) sum += xi[k * plane + (int64_t)(r + a) * w + q + b];
            const float mean = (float)(sum / (f * f));
            for (int32_t a = 0; a < f; a++)
              for (int32_t b = 0; b < f; b++) oi[k * plane + (int64_t)(r + a) * w + q + b] = mean;
          }
    }
  }
}
