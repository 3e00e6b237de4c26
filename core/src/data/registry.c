/* The dataset sources by name (data.kind in a config): one table, so that the generic
 * dataset code (data.c) names no source and a new source is one row here. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "data/data_source.h"

typedef struct {
  const char *kind;
  ganfw_status (*open)(const char *path, int32_t train, const ganfw_transform *tf,
                       ganfw_dataset **out);
  int32_t c, h, w, num_classes; /* the format's own image shape; 0: none fixed */
} dataset_source;

/* The folder source has no train/test split. */
static ganfw_status open_folder(const char *path, int32_t train, const ganfw_transform *tf,
                                ganfw_dataset **out) {
  (void)train;
  return ganfw_dataset_open_folder(path, tf, out);
}

static const dataset_source sources[] = {
    {"mnist", ganfw_dataset_open_mnist, 1, 28, 28, 10},
    {"cifar10", ganfw_dataset_open_cifar10, 3, 32, 32, 10},
    {"folder", open_folder, 0, 0, 0, 0},
};
enum { SOURCE_COUNT = sizeof sources / sizeof sources[0] };

ganfw_status ganfw_dataset_open(const char *kind, const char *path, int32_t train,
                                const ganfw_transform *tf, ganfw_dataset **out) {
  *out = NULL;
  for (int i = 0; kind && i < SOURCE_COUNT; i++)
    if (strcmp(kind, sources[i].kind) == 0) return sources[i].open(path, train, tf, out);
  char kinds[256] = "";
  for (int i = 0; i < SOURCE_COUNT; i++) {
    size_t n = strlen(kinds);
    snprintf(kinds + n, sizeof kinds - n, "%s%s",
             i == 0                  ? ""
             : i + 1 == SOURCE_COUNT ? " and "
                                     : ", ",
             sources[i].kind);
  }
  return ganfw_error_set(GANFW_ERR_CONFIG, "unknown dataset kind '%s'; the kinds are %s",
                         kind ? kind : "(null)", kinds);
}

int ganfw_dataset_nominal_shape(const char *kind, const ganfw_transform *tf, int32_t *c, int32_t *h,
                                int32_t *w, int32_t *num_classes) {
  for (int i = 0; kind && i < SOURCE_COUNT; i++) {
    const dataset_source *s = &sources[i];
    if (strcmp(kind, s->kind) != 0) continue;
    if (s->c == 0) return 0;
    if (ganfw_transform_shape(tf, s->h, s->w, h, w) != GANFW_OK) {
      ganfw_error_clear();
      return 0;
    }
    *c = tf->channels ? tf->channels : s->c;
    *num_classes = s->num_classes;
    return 1;
  }
  return 0;
}
