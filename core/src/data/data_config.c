/* The keys of the config's `data` section (docs/CONFIG.md): the source (dataset, path), the
 * transform (channels, background, resize, jpeg_dct_scale, crop, pad, augment: {crop_padding,
 * hflip}, normalize: {mean: [..], std: [..]}) and the loader (shuffle, drop_last, prefetch,
 * workers). Errors name the key and where it is. */
#include <string.h>

#include "base/error.h"
#include "config/config.h"
#include "data/data.h"
#include "data/data_source.h"

/* data.normalize: {mean: [m..], std: [s..]}, 1 value or one per channel (up to 3), as
 * torchvision's Normalize(mean, std) after ToTensor. Absent: the [-1,1] default (mean = std
 * = 0.5, tf->norm_n 0), recorded for the resolved config. */
static ganfw_status read_normalize(const ganfw_cfg *data, ganfw_transform *tf) {
  static const double half[1] = {0.5};
  double v;
  ganfw_status st;
  if (!ganfw_cfg_has(data, "normalize")) {
    if ((st = ganfw_cfg_float_list(data, "normalize.mean", 1, half, &v)) != GANFW_OK) return st;
    return ganfw_cfg_float_list(data, "normalize.std", 1, half, &v);
  }
  const ganfw_cfg *node = ganfw_cfg_child(data, "normalize");
  const char *where = ganfw_cfg_where(node);
  if (ganfw_cfg_kind_of(node) != GANFW_CFG_KIND_MAP)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.normalize must be a map {mean: [..], std: [..]} (per "
                           "channel, as torchvision's Normalize after ToTensor)",
                           where);
  const int64_t nm = ganfw_cfg_list_len(node, "mean"), ns = ganfw_cfg_list_len(node, "std");
  if (nm < 0 || ns < 0) return ganfw_error_code();
  if (nm < 1 || nm > 3 || ns != nm)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.normalize needs mean and std lists of the same length, 1 "
                           "(every channel) or one per channel (up to 3); got %lld means and "
                           "%lld stds",
                           where, (long long)nm, (long long)ns);
  for (int64_t i = 0; i < nm; i++) {
    double m, s;
    const ganfw_cfg *si = ganfw_cfg_list_at(node, "std", i);
    if ((st = ganfw_cfg_float(ganfw_cfg_list_at(node, "mean", i), NULL, 0.0, &m)) ||
        (st = ganfw_cfg_float(si, NULL, 1.0, &s)))
      return st;
    if (!(s > 0) || !((float)s > 0))
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: data.normalize.std[%lld] must be > 0, got %g",
                             ganfw_cfg_where(si), (long long)i, s);
    tf->mean[i] = (float)m;
    tf->std[i] = (float)s;
  }
  tf->norm_n = (int32_t)nm;
  return GANFW_OK;
}

/* data.augment: {crop_padding: N, hflip: bool}, the random transforms of training batches
 * (the test split never gets them). */
static ganfw_status read_augment(const ganfw_cfg *data, ganfw_transform *tf) {
  if (ganfw_cfg_has(data, "hflip"))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.hflip is now data.augment.hflip (the training "
                           "augmentation): write `augment: {hflip: true}` under data",
                           ganfw_cfg_where(ganfw_cfg_child(data, "hflip")));
  if (ganfw_cfg_has(data, "augment") &&
      ganfw_cfg_kind_of(ganfw_cfg_child(data, "augment")) != GANFW_CFG_KIND_MAP)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.augment must be a map {crop_padding: N, hflip: true|false} "
                           "(the random transforms of training batches)",
                           ganfw_cfg_where(ganfw_cfg_child(data, "augment")));
  int64_t crop_padding = 0;
  int32_t hflip = 0;
  ganfw_status st;
  if ((st = ganfw_cfg_int_in(data, "augment.crop_padding", 0, 0, 1024, &crop_padding)) ||
      (st = ganfw_cfg_bool(data, "augment.hflip", 0, &hflip)))
    return st;
  tf->crop_padding = (int32_t)crop_padding;
  tf->hflip = hflip;
  return GANFW_OK;
}

/* data.background: what an image's alpha is composited over: white (the default), black,
 * [r, g, b] in 0..255, or none (alpha dropped, as PIL's convert("RGB")). */
static ganfw_status read_background(const ganfw_cfg *data, ganfw_transform *tf) {
  static const char *const usage =
      "data.background is white, black, none (alpha dropped, as PIL's convert(\"RGB\")) or "
      "[r, g, b] with each in 0..255";
  const ganfw_cfg *node =
      ganfw_cfg_has(data, "background") ? ganfw_cfg_child(data, "background") : NULL;
  if (node && ganfw_cfg_kind_of(node) == GANFW_CFG_KIND_LIST) {
    const int64_t n = ganfw_cfg_list_len(data, "background");
    if (n != 3)
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s; got a list of %lld", ganfw_cfg_where(node),
                             usage, (long long)n);
    for (int64_t k = 0; k < 3; k++) {
      int64_t v;
      ganfw_status st =
          ganfw_cfg_int_in(ganfw_cfg_list_at(data, "background", k), NULL, 0, 0, 255, &v);
      if (st != GANFW_OK) return st;
      tf->background[k] = (float)v / 255.0f;
    }
    tf->alpha = GANFW_ALPHA_OVER_COLOR;
    return GANFW_OK;
  }
  if (node && ganfw_cfg_kind_of(node) != GANFW_CFG_KIND_SCALAR)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s", ganfw_cfg_where(node), usage);
  const char *text = NULL;
  ganfw_status st = ganfw_cfg_string(data, "background", "white", &text);
  if (st != GANFW_OK) return st;
  if (text && strcmp(text, "white") == 0) {
    tf->alpha = GANFW_ALPHA_OVER_WHITE;
  } else if (text && strcmp(text, "black") == 0) {
    tf->alpha = GANFW_ALPHA_OVER_COLOR; /* background[] stays 0 */
  } else if (text && strcmp(text, "none") == 0) {
    tf->alpha = GANFW_ALPHA_DROP;
  } else {
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s, not '%s'", ganfw_cfg_where(node), usage,
                           text ? text : "null");
  }
  return GANFW_OK;
}

ganfw_status ganfw_transform_from_config(const ganfw_cfg *data, ganfw_transform *tf) {
  memset(tf, 0, sizeof *tf);
  int64_t channels = 0, resize = 0, crop = 0, pad = 0;
  int32_t dct_scale = 1;
  ganfw_status st;
  if ((st = ganfw_cfg_int(data, "channels", 0, &channels)) || (st = read_background(data, tf)) ||
      (st = ganfw_cfg_int_in(data, "resize", 0, 0, 4096, &resize)) ||
      (st = ganfw_cfg_bool(data, "jpeg_dct_scale", 1, &dct_scale)) ||
      (st = ganfw_cfg_int_in(data, "crop", 0, 0, 4096, &crop)) ||
      (st = ganfw_cfg_int_in(data, "pad", 0, 0, 1024, &pad)) || (st = read_augment(data, tf)))
    return st;
  if (channels != 0 && channels != 1 && channels != 3)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: data.channels must be 1 (gray) or 3 (RGB)",
                           ganfw_cfg_where(ganfw_cfg_child(data, "channels")));
  tf->channels = (int32_t)channels;
  tf->resize = (int32_t)resize;
  tf->jpeg_full_size = !dct_scale;
  tf->crop_h = tf->crop_w = (int32_t)crop;
  tf->pad = (int32_t)pad;
  if ((st = read_normalize(data, tf)) != GANFW_OK) return st;
  if (tf->channels && tf->norm_n > 1 && tf->norm_n != tf->channels)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.normalize gives %d means and stds for data.channels %d: "
                           "give one value, or one per channel",
                           ganfw_cfg_where(ganfw_cfg_child(data, "normalize")), (int)tf->norm_n,
                           (int)tf->channels);
  return GANFW_OK;
}

ganfw_status ganfw_data_source_from_config(const ganfw_cfg *data, const char **kind,
                                           const char **path) {
  *path = NULL;
  ganfw_status st = ganfw_cfg_string(data, "dataset", "mnist", kind);
  if (st != GANFW_OK) return st;
  if (ganfw_dataset_check_kind(*kind) != GANFW_OK)
    return ganfw_error_wrap(GANFW_ERR_CONFIG, "%s: data.dataset",
                            ganfw_cfg_where(ganfw_cfg_child(data, "dataset")));
  const char *def = ganfw_dataset_default_path(*kind);
  if ((st = ganfw_cfg_string(data, "path", def, path)) != GANFW_OK) return st;
  if (!*path)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.path is required with data.dataset: %s (the folder of the "
                           "data set's files)",
                           ganfw_cfg_where(data), *kind);
  return GANFW_OK;
}

ganfw_status ganfw_loader_config_from_config(const ganfw_cfg *data, int32_t batch_size,
                                             uint64_t seed, ganfw_loader_config *out) {
  int32_t prefetch = 1, shuffle = 1, drop_last = 1;
  int64_t workers = 1;
  ganfw_status st;
  if ((st = ganfw_cfg_bool(data, "prefetch", 1, &prefetch)) ||
      (st = ganfw_cfg_bool(data, "shuffle", 1, &shuffle)) ||
      (st = ganfw_cfg_bool(data, "drop_last", 1, &drop_last)) ||
      (st = ganfw_cfg_int_in(data, "workers", 1, 1, GANFW_LOADER_MAX_WORKERS, &workers)))
    return st;
  if (workers > 1 && !prefetch)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.workers %lld needs data.prefetch (the workers prepare the "
                           "batches ahead): set data.prefetch: true or data.workers: 1",
                           ganfw_cfg_where(ganfw_cfg_child(data, "workers")), (long long)workers);
  *out = (ganfw_loader_config){.batch_size = batch_size,
                               .seed = seed,
                               .shuffle = shuffle,
                               .drop_last = drop_last,
                               .prefetch = prefetch,
                               .workers = (int32_t)workers};
  return GANFW_OK;
}
