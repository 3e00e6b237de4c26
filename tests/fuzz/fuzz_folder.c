/* Fuzz harness of the folder source (data/data_folder.c, decoding with io/png_io.c and
 * io/jpeg_io.c): the input is a mode byte, then files joined by FZ_SEP, written as 00.png,
 * 01.png, ... (the names say nothing: a file is taken by its content) of a scratch
 * directory; the source is opened and every sample read. The mode's low two bits choose the
 * transform (none; gray; resize to 12 x 12 RGB, which lets a JPEG decode scaled down; crop
 * 8 x 8 with pad and flip, which makes images of other sizes fail their get); bit 2 puts the
 * files into two class folders a/ and b/ (alternately); bit 3 adds a file that is no image
 * (skipped); bits 4-5 the alpha mode (over white, over a colour, dropped); bit 6 writes
 * every file into train/ and test/ both, and both splits are opened and read. A JPEG of
 * more than 1 Mpx by its header is written empty (a file that is no image): an arithmetic-
 * coded one describes a large image in a few bytes, legally, and its decode would measure
 * the image's size against the 1 s bound (fuzz_jpeg.c decodes those at 1/8). */
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "base/log.h"
#include "fuzz_dataset.h"
#include "io/jpeg_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The listing's warning of skipped files would be most of the output: errors only. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  ganfw_log_set_level(GANFW_LOG_ERROR);
  return 0;
}

static void open_and_read(const char *dir, int32_t train, const ganfw_transform *tf) {
  ganfw_dataset *ds = NULL;
  const ganfw_status st = ganfw_dataset_open_folder(dir, train, tf, &ds);
  fz_check_refusal(st, ds, dir);
  if (ds) fz_read_dataset(ds, dir);
  ganfw_dataset_destroy(ds);
  ganfw_error_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  fz_part parts[16];
  const size_t n = fz_split(data + 1, size - 1, parts, 16);
  const char *dir = fz_dir();
  char path[512];
  fz_clear(dir);
  const int classes = (mode & 4) != 0, split = (mode & 64) != 0;
  for (int s = 0; s < (split ? 2 : 1); s++) {
    char base[32] = "";
    if (split) {
      snprintf(base, sizeof base, "%s/", s ? "test" : "train");
      mkdir(fz_path(path, sizeof path, s ? "test" : "train"), 0755);
    }
    if (classes) {
      char sub[48];
      snprintf(sub, sizeof sub, "%sa", base);
      mkdir(fz_path(path, sizeof path, sub), 0755);
      snprintf(sub, sizeof sub, "%sb", base);
      mkdir(fz_path(path, sizeof path, sub), 0755);
    }
    for (size_t i = 0; i < n; i++) {
      char name[64];
      snprintf(name, sizeof name, "%s%s%02zu.png", base, classes ? (i % 2 ? "b/" : "a/") : "", i);
      fz_write(fz_path(path, sizeof path, name), parts[i].data, parts[i].size);
      int32_t c, h, w;
      if (ganfw_jpeg_read_size(path, &c, &h, &w) == GANFW_OK && (int64_t)h * w > (1 << 20))
        fz_write(path, parts[i].data, 0);
      ganfw_error_clear();
    }
  }
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
  switch ((mode >> 4) & 3) {
  case 1:
    tf.alpha = GANFW_ALPHA_OVER_COLOR;
    tf.background[0] = 1.0f;
    tf.background[2] = 0.5f;
    break;
  case 2:
    tf.alpha = GANFW_ALPHA_DROP;
    break;
  default:
    break;
  }
  open_and_read(dir, 1, &tf);
  if (split) open_and_read(dir, 0, &tf);
  return 0;
}
