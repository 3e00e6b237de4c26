/* For the data set harnesses (idx, cifar, folder): reads every sample of an opened data
 * set through ganfw_dataset_get, checking what the data set promised (shape, labels below
 * num_classes). A sample may fail (a folder image of another size); the message must then
 * name the data set or the file. */
#ifndef GANFW_FUZZ_DATASET_H
#define GANFW_FUZZ_DATASET_H

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/data.h"
#include "fuzz_util.h"

static inline void fz_read_dataset(const ganfw_dataset *ds, const char *dir) {
  int32_t c = 0, h = 0, w = 0;
  ganfw_dataset_shape(ds, &c, &h, &w);
  FZ_CHECK(c >= 1 && h >= 1 && w >= 1);
  const int64_t n = ganfw_dataset_size(ds);
  const int32_t classes = ganfw_dataset_num_classes(ds);
  FZ_CHECK(n >= 1 && classes >= 1);
  float *img = malloc(sizeof(float) * (size_t)c * h * w);
  FZ_CHECK(img != NULL);
  for (int64_t i = 0; i < n; i++) {
    int32_t label = -1;
    if (ganfw_dataset_get(ds, i, (uint64_t)i, img, &label) != GANFW_OK) {
      FZ_CHECK(strstr(ganfw_error_message(), dir) != NULL);
      fz_report("sample", 1, ganfw_error_message());
      continue;
    }
    FZ_CHECK(label >= 0 && label < classes);
  }
  FZ_CHECK(ganfw_dataset_get(ds, n, 0, img, NULL) == GANFW_ERR_INVALID_ARG);
  free(img);
}

/* A refused data set must say where: its directory (or a file in it) in the message. */
static inline void fz_check_refusal(ganfw_status st, const ganfw_dataset *ds, const char *dir) {
  FZ_CHECK((st == GANFW_OK) == (ds != NULL));
  fz_report(dir, st, ganfw_error_message());
  if (st != GANFW_OK) FZ_CHECK(strstr(ganfw_error_message(), dir) != NULL);
}

#endif
