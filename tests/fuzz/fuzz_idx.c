/* Fuzz harness of the MNIST IDX reader (data/data_mnist.c): the input is the image file
 * and the label file joined by FZ_SEP (either may be gzipped: zlib tells by the bytes),
 * written as train-images-idx3-ubyte and train-labels-idx1-ubyte of a scratch directory,
 * opened as a data set and read sample by sample. A third part, when present, becomes
 * t10k-images-idx3-ubyte.gz with the labels missing, for the .gz fallback and the
 * missing-file path. */
#include <stdint.h>

#include "fuzz_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_part parts[3];
  const size_t n = fz_split(data, size, parts, 3);
  const char *dir = fz_dir();
  char path[512];
  fz_clear(dir);
  fz_write(fz_path(path, sizeof path, "train-images-idx3-ubyte"), parts[0].data, parts[0].size);
  if (n > 1)
    fz_write(fz_path(path, sizeof path, "train-labels-idx1-ubyte"), parts[1].data, parts[1].size);
  ganfw_dataset *ds = NULL;
  ganfw_status st = ganfw_dataset_open_mnist(dir, 1, NULL, &ds);
  fz_check_refusal(st, ds, dir);
  if (ds) fz_read_dataset(ds, dir);
  ganfw_dataset_destroy(ds);
  if (n > 2) {
    fz_write(fz_path(path, sizeof path, "t10k-images-idx3-ubyte.gz"), parts[2].data, parts[2].size);
    ds = NULL;
    st = ganfw_dataset_open_mnist(dir, 0, NULL, &ds);
    FZ_CHECK(st != GANFW_OK); /* no t10k labels */
    fz_check_refusal(st, ds, dir);
  }
  ganfw_error_clear();
  return 0;
}
