/* The dataset sources by name (data.kind in a config): one table, so that the generic
 * dataset code (data.c) names no source and a new source is one row here. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "data/data.h"

typedef struct {
  const char *kind;
  ganfw_status (*open)(const char *path, int32_t train, const ganfw_transform *tf,
                       ganfw_dataset **out);
} dataset_source;

/* The folder source has no train/test split. */
static ganfw_status open_folder(const char *path, int32_t train, const ganfw_transform *tf,
                                ganfw_dataset **out) {
  (void)train;
  return ganfw_dataset_open_folder(path, tf, out);
}

static const dataset_source sources[] = {
    {"mnist", ganfw_dataset_open_mnist},
    {"cifar10", ganfw_dataset_open_cifar10},
    {"folder", open_folder},
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
    snprintf(kinds + n, sizeof kinds - n, "%s%s", i == 0 ? "" : i + 1 == SOURCE_COUNT ? " and " : ", ",
             sources[i].kind);
  }
  return ganfw_error_set(GANFW_ERR_CONFIG, "unknown dataset kind '%s'; the kinds are %s",
                         kind ? kind : "(null)", kinds);
}
