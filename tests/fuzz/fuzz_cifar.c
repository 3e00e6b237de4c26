/* Fuzz harness of the CIFAR-10 binary reader (data/data_cifar.c): the input's first part
 * (up to FZ_SEP) becomes test_batch.bin, opened as the test set; when further parts follow,
 * they become data_batch_1.bin .. data_batch_5.bin inside cifar-10-batches-bin/ (the folder
 * the tarball extracts to), opened as the training set. Every sample of an accepted set is
 * read. */
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fuzz_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_part parts[6];
  const size_t n = fz_split(data, size, parts, 6);
  const char *dir = fz_dir();
  char path[512];
  fz_clear(dir);
  fz_write(fz_path(path, sizeof path, "test_batch.bin"), parts[0].data, parts[0].size);
  ganfw_dataset *ds = NULL;
  ganfw_status st = ganfw_dataset_open_cifar10(dir, 0, NULL, &ds);
  fz_check_refusal(st, ds, dir);
  if (ds) fz_read_dataset(ds, dir);
  ganfw_dataset_destroy(ds);
  if (n > 1) {
    FZ_CHECK(mkdir(fz_path(path, sizeof path, "cifar-10-batches-bin"), 0755) == 0);
    for (size_t i = 1; i < n; i++) {
      char name[64];
      snprintf(name, sizeof name, "cifar-10-batches-bin/data_batch_%zu.bin", i);
      fz_write(fz_path(path, sizeof path, name), parts[i].data, parts[i].size);
    }
    ds = NULL;
    st = ganfw_dataset_open_cifar10(dir, 1, NULL, &ds);
    fz_check_refusal(st, ds, dir);
    if (ds) fz_read_dataset(ds, dir);
    ganfw_dataset_destroy(ds);
  }
  ganfw_error_clear();
  return 0;
}
