/* Fuzz harness of the folder source (data/data_folder.c, decoding with io/png_io.c): the
 * input is a mode byte, then files joined by FZ_SEP, written as 00.png, 01.png, ... of a
 * scratch directory; the source is opened and every sample read. The mode's low two bits
 * choose the transform (none; gray; resize to 12 x 12 RGB; crop 8 x 8 with pad and flip,
 * which makes images of other sizes fail their get), bit 2 adds a directory named
 * zz.png (not a sample), bit 3 a file without the .png suffix (ignored). */
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fuzz_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  fz_part parts[16];
  const size_t n = fz_split(data + 1, size - 1, parts, 16);
  const char *dir = fz_dir();
  char path[512];
  fz_clear(dir);
  for (size_t i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "%02zu.png", i);
    fz_write(fz_path(path, sizeof path, name), parts[i].data, parts[i].size);
  }
  if (mode & 4) FZ_CHECK(mkdir(fz_path(path, sizeof path, "zz.png"), 0755) == 0);
  if (mode & 8) fz_write(fz_path(path, sizeof path, "notes.txt"), data, size);
  ganfw_transform tf = {0};
  switch (mode & 3) {
  case 1:
    tf.channels = 1;
    break;
  case 2:
    tf.channels = 3;
    tf.resize_h = tf.resize_w = 12;
    break;
  case 3:
    tf.crop_h = tf.crop_w = 8;
    tf.pad = 1;
    tf.hflip = 1;
    break;
  default:
    break;
  }
  ganfw_dataset *ds = NULL;
  const ganfw_status st = ganfw_dataset_open_folder(dir, &tf, &ds);
  fz_check_refusal(st, ds, dir);
  if (ds) fz_read_dataset(ds, dir);
  ganfw_dataset_destroy(ds);
  ganfw_error_clear();
  return 0;
}
