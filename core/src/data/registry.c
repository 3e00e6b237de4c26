/* The dataset sources by name (data.kind in a config): one table, so that the generic
 * dataset code (data.c) names no source and a new source is one row here. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/suggest.h"
#include "data/data_source.h"

typedef struct {
  const char *kind;
  ganfw_status (*open)(const char *path, int32_t train, const ganfw_transform *tf,
                       ganfw_dataset **out);
  ganfw_status (*count)(const char *path, int32_t train, int64_t *n);
  int (*has_test)(const char *path); /* (optional) NULL: every data set of the kind has one */
  int32_t c, h, w, num_classes;      /* the format's own image shape; 0: none fixed */
  const char *default_path;          /* data.path when not given; NULL: required */
} dataset_source;

static const dataset_source sources[] = {
    {"mnist", ganfw_dataset_open_mnist, ganfw_dataset_count_mnist, NULL, 1, 28, 28, 10,
     "data/mnist"},
    {"fashion_mnist", ganfw_dataset_open_fashion_mnist, ganfw_dataset_count_fashion_mnist, NULL, 1,
     28, 28, 10, "/usr/share/datasets/fashion-mnist"},
    {"cifar10", ganfw_dataset_open_cifar10, ganfw_dataset_count_cifar10, NULL, 3, 32, 32, 10,
     "data/cifar10"},
    {"folder", ganfw_dataset_open_folder, ganfw_dataset_count_folder, ganfw_dataset_folder_has_test,
     0, 0, 0, 0, NULL},
};
enum { SOURCE_COUNT = sizeof sources / sizeof sources[0] };

static const dataset_source *find_source(const char *kind) {
  for (int i = 0; kind && i < SOURCE_COUNT; i++)
    if (strcmp(kind, sources[i].kind) == 0) return &sources[i];
  return NULL;
}

ganfw_status ganfw_dataset_check_kind(const char *kind) {
  if (find_source(kind)) return GANFW_OK;
  char kinds[256] = "";
  const char *near = NULL;
  size_t best = (size_t)-1;
  for (int i = 0; i < SOURCE_COUNT; i++) {
    size_t n = strlen(kinds);
    snprintf(kinds + n, sizeof kinds - n, "%s%s",
             i == 0                  ? ""
             : i + 1 == SOURCE_COUNT ? " and "
                                     : ", ",
             sources[i].kind);
    const size_t d = kind ? ganfw_edit_distance(kind, sources[i].kind) : (size_t)-1;
    if (d < best) best = d, near = sources[i].kind;
  }
  const int suggest = kind && near && ganfw_suggest_near(strlen(kind), best);
  return ganfw_error_set(GANFW_ERR_CONFIG, "unknown dataset kind '%s'%s%s%s; the kinds are %s",
                         kind ? kind : "(null)", suggest ? " (did you mean '" : "",
                         suggest ? near : "", suggest ? "'?)" : "", kinds);
}

ganfw_status ganfw_dataset_open(const char *kind, const char *path, int32_t train,
                                const ganfw_transform *tf, ganfw_dataset **out) {
  *out = NULL;
  const dataset_source *src = find_source(kind);
  if (!src) return ganfw_dataset_check_kind(kind);
  if (train || !tf) return src->open(path, train, tf, out);
  ganfw_transform plain = *tf; /* the test split is measured, never augmented */
  plain.crop_padding = 0;
  plain.hflip = 0;
  return src->open(path, train, &plain, out);
}

ganfw_status ganfw_dataset_count(const char *kind, const char *path, int32_t train, int64_t *n) {
  *n = 0;
  const dataset_source *src = find_source(kind);
  return src ? src->count(path, train, n) : ganfw_dataset_check_kind(kind);
}

int ganfw_dataset_has_test_split(const char *kind, const char *path) {
  const dataset_source *src = find_source(kind);
  return !src || !src->has_test || !path || src->has_test(path);
}

const char *ganfw_dataset_default_path(const char *kind) {
  const dataset_source *s = find_source(kind);
  return s ? s->default_path : NULL;
}

int ganfw_dataset_nominal_shape(const char *kind, const ganfw_transform *tf, int32_t *c, int32_t *h,
                                int32_t *w, int32_t *num_classes) {
  const dataset_source *s = find_source(kind);
  if (!s || s->c == 0) return 0;
  if (ganfw_transform_shape(tf, s->h, s->w, h, w) != GANFW_OK) {
    ganfw_error_clear();
    return 0;
  }
  *c = tf->channels ? tf->channels : s->c;
  *num_classes = s->num_classes;
  return 1;
}
