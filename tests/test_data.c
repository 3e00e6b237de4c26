/* Datasets, transforms and the batch loader on fixtures written here at run time into a
 * mkdtemp directory under /tmp: synthetic MNIST IDX files (plain and gzipped), CIFAR-10
 * batches, a folder of PNGs in several formats. Checks values, labels, transformed shapes,
 * bilinear resize against PyTorch's formula, random crops and flips, shuffling, drop_last,
 * prefetch with one or more workers, resume, and that every corrupt input is refused with a
 * message naming its path. */
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "config/config.h"
#include "data/data.h"
#include "data/data_source.h"
#include "base/error.h"
#include "io/png_io.h"
#include "testutil.h"

/* --- fixtures ----------------------------------------------------------------------------- */
/* A new empty directory under this run's temporary root; the string lives until exit. */
static const char *new_dir(const char *name) {
  static char bufs[32][512];
  static int next;
  const char *tmp_root = gt_tmp_root("data");
  char *p = bufs[next++ % 32];
  snprintf(p, 512, "%s/%s", tmp_root, name);
  if (mkdir(p, 0755) != 0) {
    perror(p);
    abort();
  }
  return p;
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = v >> 24;
  p[1] = v >> 16;
  p[2] = v >> 8;
  p[3] = v;
}

static void write_bytes(const char *dir, const char *name, const uint8_t *data, size_t len,
                        int gz) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s%s", dir, name, gz ? ".gz" : "");
  if (gz) {
    gzFile g = gzopen(path, "wb");
    gzwrite(g, data, (unsigned)len);
    gzclose(g);
  } else {
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
  }
}

/* The pixel of synthetic MNIST image i at (y, x). */
static uint8_t mnist_px(int i, int y, int x) {
  return (uint8_t)((i * 31 + y * 7 + x * 3) % 256);
}

/* Writes an IDX pair of n images rows x cols and labels (label i = labels[i % nl], or i
 * when labels is NULL) for `prefix` ("train" or "t10k"), gzipped when gz. */
static void write_mnist(const char *dir, const char *prefix, int n, int rows, int cols,
                        const uint8_t *labels, int nl, int gz) {
  const size_t ilen = 16 + (size_t)n * rows * cols, llen = 8 + (size_t)n;
  uint8_t *img = malloc(ilen), *lbl = malloc(llen);
  put_be32(img, 0x803);
  put_be32(img + 4, n);
  put_be32(img + 8, rows);
  put_be32(img + 12, cols);
  for (int i = 0; i < n; i++)
    for (int y = 0; y < rows; y++)
      for (int x = 0; x < cols; x++)
        img[16 + ((size_t)i * rows + y) * cols + x] = mnist_px(i, y, x);
  put_be32(lbl, 0x801);
  put_be32(lbl + 4, n);
  for (int i = 0; i < n; i++) lbl[8 + i] = labels ? labels[i % nl] : (uint8_t)i;
  char name[64];
  snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
  write_bytes(dir, name, img, ilen, gz);
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
  write_bytes(dir, name, lbl, llen, gz);
  free(img);
  free(lbl);
}

static int msg_has(const char *s) {
  const char *m = ganfw_error_message();
  if (strstr(m, s)) return 1;
  printf("\n  message \"%s\" lacks \"%s\"\n", m, s);
  return 0;
}

/* --- MNIST -------------------------------------------------------------------------------- */
static void check_mnist_values(const char *dir, int gz) {
  const uint8_t labels[3] = {3, 9, 0};
  write_mnist(dir, "train", 7, 5, 6, labels, 3, gz);
  ganfw_dataset *ds = NULL;
  const ganfw_transform unit = {.unit_range = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 1, &unit, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), 7);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(ds), 10);
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  CU_ASSERT(c == 1 && h == 5 && w == 6);
  float img[30];
  int bad = 0;
  for (int i = 0; i < 7; i++) {
    int32_t label = -1;
    CU_ASSERT_EQUAL(ganfw_dataset_get(ds, i, 0, img, &label), GANFW_OK);
    CU_ASSERT_EQUAL(label, labels[i % 3]);
    for (int y = 0; y < 5; y++)
      for (int x = 0; x < 6; x++)
        if (img[y * 6 + x] != (float)mnist_px(i, y, x) / 255.0f) bad++;
  }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 7, 0, img, NULL), GANFW_ERR_INVALID_ARG);
  ganfw_dataset_destroy(ds);

  /* Default transform: [-1,1]. */
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 1, NULL, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 4, 0, img, NULL), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(img[13], mnist_px(4, 2, 1) / 255.0 * 2.0 - 1.0, 1e-6);
  ganfw_dataset_destroy(ds);
}

static void test_mnist_plain(void) {
  check_mnist_values(new_dir("mnist_plain"), 0);
}

static void test_mnist_gz(void) {
  check_mnist_values(new_dir("mnist_gz"), 1);
}

/* The test split reads t10k-*; train and test coexist. */
static void test_mnist_split(void) {
  const char *dir = new_dir("mnist_split");
  write_mnist(dir, "train", 4, 3, 3, NULL, 0, 0);
  write_mnist(dir, "t10k", 2, 3, 3, NULL, 0, 1);
  ganfw_dataset *ds = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open("mnist", dir, 0, NULL, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), 2);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(ds), 2); /* labels 0, 1 */
  ganfw_dataset_destroy(ds);
  CU_ASSERT_EQUAL(ganfw_dataset_open("imagenet", dir, 0, NULL, &ds), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("mnist, fashion_mnist, cifar10 and folder"));
  CU_ASSERT_PTR_NULL(ds);
}

/* Corrupts a valid pair one way each and expects GANFW_ERR_IO naming the file. */
static void test_mnist_corrupt(void) {
  const char *dir = new_dir("mnist_bad");
  ganfw_dataset *ds = (ganfw_dataset *)1;
  char ipath[600], lpath[600];
  snprintf(ipath, sizeof ipath, "%s/train-images-idx3-ubyte", dir);
  snprintf(lpath, sizeof lpath, "%s/train-labels-idx1-ubyte", dir);

  /* missing */
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(dir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(ds);
  CU_ASSERT(msg_has(ipath));
  CU_ASSERT(msg_has("run scripts/fetch_mnist.sh"));

  /* bad magic */
  write_mnist(dir, "train", 5, 4, 4, NULL, 0, 0);
  FILE *f = fopen(ipath, "r+b");
  fputc(0x09, f); /* first byte of the magic */
  fclose(f);
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(dir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(ipath) && msg_has("magic"));

  /* truncated */
  write_mnist(dir, "train", 5, 4, 4, NULL, 0, 0);
  CU_ASSERT_EQUAL(truncate(ipath, 16 + 4 * 16 + 3), 0);
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(dir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(ipath) && msg_has("truncated"));
  CU_ASSERT(msg_has("run scripts/fetch_mnist.sh"));

  /* trailing bytes */
  write_mnist(dir, "train", 5, 4, 4, NULL, 0, 0);
  f = fopen(lpath, "ab");
  fputc(1, f);
  fclose(f);
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(dir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(lpath));

  /* counts differ between images and labels */
  write_mnist(dir, "train", 5, 4, 4, NULL, 0, 0);
  char sub[600];
  snprintf(sub, sizeof sub, "%s/other", dir);
  mkdir(sub, 0755);
  write_mnist(sub, "train", 6, 4, 4, NULL, 0, 0);
  char src[700];
  snprintf(src, sizeof src, "%s/train-labels-idx1-ubyte", sub);
  CU_ASSERT_EQUAL(rename(src, lpath), 0);
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(dir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(ipath) && msg_has(lpath) && msg_has("5 images") && msg_has("6 labels"));

  /* a zero dimension in the header */
  write_mnist(dir, "train", 5, 4, 4, NULL, 0, 0);
  f = fopen(ipath, "r+b");
  fseek(f, 8, SEEK_SET);
  const uint8_t zero[4] = {0};
  fwrite(zero, 1, 4, f);
  fclose(f);
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(dir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(ipath));

  /* a gzip file cut short */
  const char *gzdir = new_dir("mnist_bad_gz");
  write_mnist(gzdir, "train", 50, 28, 28, NULL, 0, 1);
  char gzpath[600];
  snprintf(gzpath, sizeof gzpath, "%s/train-images-idx3-ubyte.gz", gzdir);
  struct stat sb;
  stat(gzpath, &sb);
  CU_ASSERT_EQUAL(truncate(gzpath, sb.st_size / 2), 0);
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(gzdir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(gzpath));
  CU_ASSERT_PTR_NULL(ds);

  /* A gzip file whose header promises 60000 images of 28 x 28 (47 MB) in a few dozen bytes:
   * refused before the 47 MB are allocated (deflate expands at most 1032-fold). */
  uint8_t hdr[16];
  put_be32(hdr, 0x803);
  put_be32(hdr + 4, 60000);
  put_be32(hdr + 8, 28);
  put_be32(hdr + 12, 28);
  write_bytes(gzdir, "train-images-idx3-ubyte", hdr, sizeof hdr, 1);
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(gzdir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(gzpath) && msg_has("47040000 bytes of data, more than its"));

  /* A directory where the image file should be says so. */
  const char *isdir = new_dir("mnist_dir");
  snprintf(ipath, sizeof ipath, "%s/train-images-idx3-ubyte", isdir);
  CU_ASSERT_EQUAL_FATAL(mkdir(ipath, 0755), 0);
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(isdir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(ipath) && msg_has("is a directory, not an IDX file"));
}

/* --- CIFAR-10 ------------------------------------------------------------------------------ */
static uint8_t cifar_px(int rec, int ch, int y, int x) {
  return (uint8_t)(rec * 11 + ch * 50 + y * 3 + x);
}

/* Writes n records numbered rec0.., record r with label r % 10 and pixels cifar_px(r, ...). */
static void write_cifar(const char *dir, const char *name, int n, int rec0) {
  uint8_t *buf = malloc((size_t)n * 3073);
  for (int r = 0; r < n; r++) {
    uint8_t *p = buf + (size_t)r * 3073;
    p[0] = (uint8_t)((rec0 + r) % 10);
    for (int ch = 0; ch < 3; ch++)
      for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++) p[1 + ch * 1024 + y * 32 + x] = cifar_px(rec0 + r, ch, y, x);
  }
  write_bytes(dir, name, buf, (size_t)n * 3073, 0);
  free(buf);
}

static void test_cifar(void) {
  const char *dir = new_dir("cifar");
  write_cifar(dir, "test_batch.bin", 4, 0);
  ganfw_dataset *ds = NULL;
  const ganfw_transform unit = {.unit_range = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_cifar10(dir, 0, &unit, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), 4);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(ds), 10);
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  CU_ASSERT(c == 3 && h == 32 && w == 32);
  float img[3072];
  int32_t label;
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 2, 0, img, &label), GANFW_OK);
  CU_ASSERT_EQUAL(label, 2);
  CU_ASSERT_EQUAL(img[0 * 1024 + 5 * 32 + 7], cifar_px(2, 0, 5, 7) / 255.0f);
  CU_ASSERT_EQUAL(img[1 * 1024 + 5 * 32 + 7], cifar_px(2, 1, 5, 7) / 255.0f);
  CU_ASSERT_EQUAL(img[2 * 1024 + 31 * 32 + 31], cifar_px(2, 2, 31, 31) / 255.0f);
  ganfw_dataset_destroy(ds);

  /* Gray conversion: PIL's luma. */
  const ganfw_transform gray = {.channels = 1, .unit_range = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_cifar10(dir, 0, &gray, &ds), GANFW_OK);
  ganfw_dataset_shape(ds, &c, &h, &w);
  CU_ASSERT_EQUAL(c, 1);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, img, &label), GANFW_OK);
  const double luma =
      (0.299 * cifar_px(1, 0, 3, 4) + 0.587 * cifar_px(1, 1, 3, 4) + 0.114 * cifar_px(1, 2, 3, 4)) /
      255.0;
  CU_ASSERT_DOUBLE_EQUAL(img[3 * 32 + 4], luma, 1e-5);
  ganfw_dataset_destroy(ds);

  /* Train: five batches in order, inside cifar-10-batches-bin/. */
  const char *tdir = new_dir("cifar_train");
  char sub[600];
  snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", tdir);
  mkdir(sub, 0755);
  for (int b = 1; b <= 5; b++) {
    char name[64];
    snprintf(name, sizeof name, "data_batch_%d.bin", b);
    write_cifar(sub, name, 2, 2 * (b - 1));
  }
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_cifar10(tdir, 1, &unit, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), 10);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 7, 0, img, &label), GANFW_OK);
  CU_ASSERT_EQUAL(label, 7);
  CU_ASSERT_EQUAL(img[1024 + 33], cifar_px(7, 1, 1, 1) / 255.0f);
  ganfw_dataset_destroy(ds);
}

static void test_cifar_corrupt(void) {
  ganfw_dataset *ds = (ganfw_dataset *)1;
  const char *dir = new_dir("cifar_bad");
  char path[600];
  snprintf(path, sizeof path, "%s/test_batch.bin", dir);
  CU_ASSERT_EQUAL(ganfw_dataset_open_cifar10(dir, 0, NULL, &ds), GANFW_ERR_IO); /* missing */
  CU_ASSERT_PTR_NULL(ds);
  CU_ASSERT(msg_has(path) && msg_has("cifar-10-binary"));

  write_cifar(dir, "test_batch.bin", 3, 0);
  CU_ASSERT_EQUAL(truncate(path, 3 * 3073 - 100), 0); /* not a multiple of 3073 */
  CU_ASSERT_EQUAL(ganfw_dataset_open_cifar10(dir, 0, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(path) && msg_has("3073"));

  CU_ASSERT_EQUAL(truncate(path, 0), 0); /* empty */
  CU_ASSERT_EQUAL(ganfw_dataset_open_cifar10(dir, 0, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(path));

  write_cifar(dir, "test_batch.bin", 3, 0);
  FILE *f = fopen(path, "r+b");
  fseek(f, 3073, SEEK_SET);
  fputc(42, f); /* label of record 1 */
  fclose(f);
  CU_ASSERT_EQUAL(ganfw_dataset_open_cifar10(dir, 0, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(path) && msg_has("label 42"));

  /* train with data_batch_3 missing */
  const char *tdir = new_dir("cifar_train_bad");
  write_cifar(tdir, "data_batch_1.bin", 1, 0);
  write_cifar(tdir, "data_batch_2.bin", 1, 0);
  snprintf(path, sizeof path, "%s/data_batch_3.bin", tdir);
  CU_ASSERT_EQUAL(ganfw_dataset_open_cifar10(tdir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(path));

  /* A directory where data_batch_3.bin should be says so. */
  CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
  CU_ASSERT_EQUAL(ganfw_dataset_open_cifar10(tdir, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(path) && msg_has("is a directory"));

  /* A (sparse) file above the 1 GiB limit of one batch is refused before it is read. */
  const char *bdir = new_dir("cifar_huge");
  snprintf(path, sizeof path, "%s/test_batch.bin", bdir);
  FILE *f2 = fopen(path, "wb");
  CU_ASSERT_FATAL(f2 != NULL);
  fclose(f2);
  CU_ASSERT_EQUAL_FATAL(truncate(path, (off_t)3073 * 350000), 0);
  CU_ASSERT_EQUAL(ganfw_dataset_open_cifar10(bdir, 0, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(path) && msg_has("more than the limit of 1073741824"));
  CU_ASSERT_PTR_NULL(ds);
}

/* --- folder of PNGs ------------------------------------------------------------------------ */
static int write_raw_png(const char *path, int w, int h, int color, int depth, const uint8_t *data,
                         size_t rowbytes, const png_color *pal, int npal) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    fclose(f);
    return -1;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, depth, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (pal) png_set_PLTE(png, info, pal, npal);
  png_write_info(png, info);
  for (int y = 0; y < h; y++) png_write_row(png, data + (size_t)y * rowbytes);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  fclose(f);
  return 0;
}

static const char *join(const char *dir, const char *name) {
  static char buf[4][600];
  static int next;
  char *p = buf[next++ % 4];
  snprintf(p, 600, "%s/%s", dir, name);
  return p;
}

/* 2 x 2 images of six formats; each pixel's R (or gray) value is known. Sorted order:
 * "B_pal.png" < "a_gray.png" < "b_rgb.png" < "c_rgba.PNG" < "d_ga.png" < "e_rgb16.png". */
static void make_png_folder(const char *dir) {
  const uint8_t gray[4] = {0, 85, 170, 255};
  const uint8_t rgb[12] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 30, 60, 90};
  const uint8_t rgba[16] = {10, 20, 30, 0, 40, 50, 60, 128, 70, 80, 90, 255, 1, 2, 3, 4};
  const uint8_t ga[8] = {7, 0, 77, 100, 177, 200, 250, 255};
  CU_ASSERT_EQUAL(ganfw_png_write_u8(join(dir, "a_gray.png"), gray, 2, 2, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_png_write_u8(join(dir, "b_rgb.png"), rgb, 2, 2, 3), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_png_write_u8(join(dir, "c_rgba.PNG"), rgba, 2, 2, 4), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_png_write_u8(join(dir, "d_ga.png"), ga, 2, 2, 2), GANFW_OK);
  const png_color pal[2] = {{200, 100, 50}, {5, 6, 7}};
  const uint8_t pal_rows[2] = {0x40, 0x00}; /* 2-bit indices; row 0: 1, 0; row 1: 0, 0 */
  CU_ASSERT_EQUAL(
      write_raw_png(join(dir, "B_pal.png"), 2, 2, PNG_COLOR_TYPE_PALETTE, 2, pal_rows, 1, pal, 2),
      0);
  uint8_t rgb16[2 * 12];
  for (int i = 0; i < 12; i++) {
    const uint16_t v = (uint16_t)(i * 5000 + 1);
    rgb16[2 * i] = v >> 8;
    rgb16[2 * i + 1] = v & 255;
  }
  CU_ASSERT_EQUAL(
      write_raw_png(join(dir, "e_rgb16.png"), 2, 2, PNG_COLOR_TYPE_RGB, 16, rgb16, 12, NULL, 0), 0);
  FILE *f = fopen(join(dir, "notes.txt"), "w"); /* not an image: skipped */
  fputs("not an image", f);
  fclose(f);
  mkdir(join(dir, ".cache"), 0755); /* hidden: not a class folder */
}

static void test_folder_formats(void) {
  const char *dir = new_dir("folder");
  make_png_folder(dir);
  ganfw_dataset *ds = NULL;
  const ganfw_transform unit = {.unit_range = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(dir, 1, &unit, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), 6);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(ds), 1);
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  CU_ASSERT(c == 3 && h == 2 && w == 2);
  float img[12];
  int32_t label = -1;
  /* 0: palette -> RGB, pixel 0 is index 1 = (5,6,7), pixel 1 index 0 = (200,100,50) */
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 0, 0, img, &label), GANFW_OK);
  CU_ASSERT_EQUAL(label, 0);
  CU_ASSERT_DOUBLE_EQUAL(img[0] * 255, 5, 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(img[4] * 255, 6, 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(img[8 + 1] * 255, 50, 1e-3);
  /* 1: gray replicated into R, G, B */
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, img, NULL), GANFW_OK);
  for (int k = 0; k < 3; k++) CU_ASSERT_DOUBLE_EQUAL(img[k * 4 + 2] * 255, 170, 1e-3);
  /* 2: RGB planar */
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 2, 0, img, NULL), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(img[0 * 4 + 0], 1.0, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(img[1 * 4 + 1], 1.0, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(img[2 * 4 + 2], 1.0, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(img[2 * 4 + 3] * 255, 90, 1e-3);
  /* 3: RGBA composited over white: alpha 0 is white, alpha 128 halfway, 255 the colour */
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 3, 0, img, NULL), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(img[0] * 255, 255, 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(img[1 * 4 + 1] * 255, 50 * 128 / 255.0 + 255 * (127 / 255.0), 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(img[2 * 4 + 2] * 255, 90, 1e-3);
  /* 4: gray+alpha -> gray replicated */
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 4, 0, img, NULL), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(img[2 * 4 + 3] * 255, 250, 1e-3);
  /* 5: 16-bit RGB, sample i = i*5000+1 over 65535 */
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 5, 0, img, NULL), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(img[1 * 4 + 3] * 65535.0, (3 * 3 + 1) * 5000 + 1, 1e-2);
  ganfw_dataset_destroy(ds);

  /* Gray output: RGB -> luma; gray stays exact. */
  const ganfw_transform gray = {.channels = 1, .unit_range = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(dir, 1, &gray, &ds), GANFW_OK);
  ganfw_dataset_shape(ds, &c, &h, &w);
  CU_ASSERT_EQUAL(c, 1);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 2, 0, img, NULL), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(img[0], 0.299, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(img[1], 0.587, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(img[3], (0.299 * 30 + 0.587 * 60 + 0.114 * 90) / 255.0, 1e-6);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, img, NULL), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(img[1] * 255, 85, 1e-3);
  ganfw_dataset_destroy(ds);
}

static void test_folder_sizes_and_errors(void) {
  ganfw_dataset *ds = (ganfw_dataset *)1;
  const char *missing = join(gt_tmp_root("data"), "no_such_folder_xyz");
  CU_ASSERT_EQUAL(ganfw_dataset_open_folder(missing, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(ds);
  CU_ASSERT(msg_has(missing));
  const char *empty = new_dir("folder_empty");
  CU_ASSERT_EQUAL(ganfw_dataset_open_folder(empty, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(empty) && msg_has("no PNG or JPEG images"));
  /* A file given as the folder says so. */
  const char *file_dir = new_dir("folder_is_file");
  const char *a_file = join(file_dir, "x.png");
  FILE *ff = fopen(a_file, "wb");
  CU_ASSERT_FATAL(ff != NULL);
  fclose(ff);
  CU_ASSERT_EQUAL(ganfw_dataset_open_folder(a_file, 1, NULL, &ds), GANFW_ERR_IO);
  CU_ASSERT(msg_has(a_file) && msg_has("is a file, not a folder"));

  /* Mixed sizes: the second image fails its get naming the file, unless cropped. */
  const char *dir = new_dir("folder_sizes");
  uint8_t px[6 * 8 * 3];
  for (int i = 0; i < (int)sizeof px; i++) px[i] = (uint8_t)i;
  CU_ASSERT_EQUAL(ganfw_png_write_u8(join(dir, "a.png"), px, 4, 4, 3), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_png_write_u8(join(dir, "b.png"), px, 6, 8, 3), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(dir, 1, NULL, &ds), GANFW_OK);
  float img[3 * 6 * 8];
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 0, 0, img, NULL), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, img, NULL), GANFW_ERR_IO);
  CU_ASSERT(msg_has("b.png") && msg_has("crop"));
  ganfw_dataset_destroy(ds);
  const ganfw_transform crop = {.crop_h = 4, .crop_w = 4};
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(dir, 1, &crop, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, img, NULL), GANFW_OK);
  /* 6 x 8 cropped to 4 x 4 at top 1, left 2: R of (0,0) is pixel (1,2) */
  CU_ASSERT_DOUBLE_EQUAL((img[0] + 1.0f) / 2.0f * 255.0f, px[(1 * 8 + 2) * 3], 1e-3);
  ganfw_dataset_destroy(ds);

  /* A corrupt PNG fails its get with the path. */
  FILE *f = fopen(join(dir, "c.png"), "wb");
  fputs("\x89PNG\r\n\x1a\n garbage", f);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(dir, 1, &crop, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), 3);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 2, 0, img, NULL), GANFW_ERR_IO);
  CU_ASSERT(msg_has(join(dir, "c.png")));
  ganfw_dataset_destroy(ds);
}

/* --- transforms ---------------------------------------------------------------------------- */
static void test_resize_bilinear(void) {
  /* F.interpolate([[1,2],[3,4]], size=4, mode="bilinear", align_corners=False) */
  const float x[4] = {1, 2, 3, 4};
  const float want[16] = {1.00f, 1.25f, 1.75f, 2.00f, 1.50f, 1.75f, 2.25f, 2.50f,
                          2.50f, 2.75f, 3.25f, 3.50f, 3.00f, 3.25f, 3.75f, 4.00f};
  float y[16];
  ganfw_resize_bilinear(x, 1, 2, 2, y, 4, 4);
  for (int i = 0; i < 16; i++) CU_ASSERT_DOUBLE_EQUAL(y[i], want[i], 1e-6);
  /* 1 x 4 -> 1 x 3 (downscale, scale 4/3): src = (i+0.5)*4/3-0.5 = 1/6, 3/2, 17/6 */
  const float r[4] = {0, 10, 20, 30};
  float d[3];
  ganfw_resize_bilinear(r, 1, 1, 4, d, 1, 3);
  CU_ASSERT_DOUBLE_EQUAL(d[0], 10.0 / 6.0, 1e-5);
  CU_ASSERT_DOUBLE_EQUAL(d[1], 15.0, 1e-5);
  CU_ASSERT_DOUBLE_EQUAL(d[2], 170.0 / 6.0, 1e-5);
  /* A constant image stays constant, up and down. */
  float cst[28 * 23], up[32 * 40], down[9 * 7];
  for (int i = 0; i < 28 * 23; i++) cst[i] = 0.3f;
  ganfw_resize_bilinear(cst, 1, 28, 23, up, 32, 40);
  ganfw_resize_bilinear(cst, 1, 28, 23, down, 9, 7);
  double worst = 0;
  for (int i = 0; i < 32 * 40; i++) worst = fmax(worst, fabs(up[i] - 0.3));
  for (int i = 0; i < 9 * 7; i++) worst = fmax(worst, fabs(down[i] - 0.3));
  CU_ASSERT(worst < 1e-6);
  /* A horizontal ramp stays a ramp in the interior (linear is reproduced exactly). */
  float ramp[8 * 8], big[8 * 16];
  for (int i = 0; i < 64; i++) ramp[i] = (float)(i % 8);
  ganfw_resize_bilinear(ramp, 1, 8, 8, big, 8, 16);
  for (int ox = 1; ox < 15; ox++)
    CU_ASSERT_DOUBLE_EQUAL(big[3 * 16 + ox], (ox + 0.5) / 2 - 0.5, 1e-5);
}

/* MNIST 28 x 28 -> 32 x 32 as the DC-GAN uses it; Resize(int) keeps the aspect ratio. */
static void test_transform_shapes(void) {
  int32_t oh, ow;
  const ganfw_transform r32 = {.resize = 32};
  CU_ASSERT_EQUAL(ganfw_transform_shape(&r32, 28, 28, &oh, &ow), GANFW_OK);
  CU_ASSERT(oh == 32 && ow == 32);
  CU_ASSERT_EQUAL(ganfw_transform_shape(&r32, 28, 40, &oh, &ow), GANFW_OK);
  CU_ASSERT(oh == 32 && ow == 45); /* int(32 * 40 / 28) = 45 */
  CU_ASSERT_EQUAL(ganfw_transform_shape(&r32, 50, 20, &oh, &ow), GANFW_OK);
  CU_ASSERT(oh == 80 && ow == 32);
  const ganfw_transform all = {.resize = 64, .crop_h = 60, .crop_w = 50, .pad = 3};
  CU_ASSERT_EQUAL(ganfw_transform_shape(&all, 218, 178, &oh, &ow), GANFW_OK);
  CU_ASSERT(oh == 66 && ow == 56);
  const ganfw_transform exact = {.resize = 10, .resize_h = 7, .resize_w = 9};
  CU_ASSERT_EQUAL(ganfw_transform_shape(&exact, 28, 28, &oh, &ow), GANFW_OK);
  CU_ASSERT(oh == 7 && ow == 9);
  const ganfw_transform half = {.resize_h = 7};
  CU_ASSERT_EQUAL(ganfw_transform_shape(&half, 28, 28, &oh, &ow), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("resize_w"));
  const ganfw_transform badc = {.channels = 2};
  CU_ASSERT_EQUAL(ganfw_transform_shape(&badc, 28, 28, &oh, &ow), GANFW_ERR_CONFIG);
  const ganfw_transform neg = {.pad = -1};
  CU_ASSERT_EQUAL(ganfw_transform_shape(&neg, 28, 28, &oh, &ow), GANFW_ERR_CONFIG);

  /* Through a dataset: MNIST-like 28 x 28 with resize 32, 3 channels. */
  const char *dir = new_dir("mnist_resize");
  write_mnist(dir, "train", 3, 28, 28, NULL, 0, 0);
  ganfw_dataset *ds = NULL;
  const ganfw_transform t = {.resize = 32, .channels = 3};
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 1, &t, &ds), GANFW_OK);
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  CU_ASSERT(c == 3 && h == 32 && w == 32);
  float img[3 * 32 * 32], src[28 * 28], want[32 * 32];
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, img, NULL), GANFW_OK);
  for (int y = 0; y < 28; y++)
    for (int x = 0; x < 28; x++) src[y * 28 + x] = mnist_px(1, y, x) / 255.0f;
  ganfw_resize_bilinear(src, 1, 28, 28, want, 32, 32);
  int bad = 0;
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 32 * 32; i++)
      if (fabsf(img[k * 1024 + i] - (want[i] * 2.0f - 1.0f)) > 1e-6f) bad++;
  CU_ASSERT_EQUAL(bad, 0);
  float lo = 1, hi = -1;
  for (int i = 0; i < 3 * 1024; i++) lo = fminf(lo, img[i]), hi = fmaxf(hi, img[i]);
  CU_ASSERT(lo >= -1.0f && hi <= 1.0f);
  ganfw_dataset_destroy(ds);
}

/* data.normalize from the config: absent it is the [-1,1] default (recorded in the
 * resolved config), one value applies to every channel, one per channel to each; bad
 * values are refused naming the key and its line, a count that is not the images'
 * channels when the dataset opens. */
static ganfw_transform tf_from(const char *yaml, ganfw_status want) {
  ganfw_config *cfg = NULL;
  ganfw_transform tf;
  memset(&tf, 0, sizeof tf);
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(yaml, "norm.yaml", &cfg), GANFW_OK);
  ganfw_status st =
      ganfw_transform_from_config(ganfw_cfg_section(ganfw_config_root(cfg), "data"), &tf);
  if (st != want) printf("\n  %s: got %d, %s\n", yaml, (int)st, ganfw_error_message());
  CU_ASSERT_EQUAL(st, want);
  if (st == GANFW_OK && !ganfw_cfg_has(ganfw_config_root(cfg), "data.normalize")) {
    char text[4096] = "";
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    CU_ASSERT_EQUAL(ganfw_config_write_resolved(cfg, f), GANFW_OK);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "mean: [0.5]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "std: [0.5]"));
  }
  ganfw_config_destroy(cfg);
  return tf;
}

/* Each transform size is refused out of its own range, with the range in the message. */
static void test_transform_ranges(void) {
  tf_from("data: {pad: 1024, crop: 4096, resize: 4096}\n", GANFW_OK);
  tf_from("data: {pad: 1025}\n", GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "pad"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "1024"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "norm.yaml:1:"));
  tf_from("data: {resize: 4097}\n", GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "resize"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "4096"));
  tf_from("data: {crop: -1}\n", GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "crop"));
}

static void test_normalize(void) {
  ganfw_transform tf = tf_from("data: {resize: 8}\n", GANFW_OK);
  CU_ASSERT(tf.norm_n == 0 && tf.resize == 8);
  tf = tf_from("data: {normalize: {mean: [0.1307], std: [0.3081]}}\n", GANFW_OK);
  CU_ASSERT(tf.norm_n == 1 && tf.mean[0] == 0.1307f && tf.std[0] == 0.3081f);

  /* MNIST with torchvision's usual Normalize((0.1307,), (0.3081,)) */
  const char *dir = new_dir("mnist_norm");
  write_mnist(dir, "train", 2, 4, 4, NULL, 0, 0);
  ganfw_dataset *ds = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 1, &tf, &ds), GANFW_OK);
  float img[16];
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, img, NULL), GANFW_OK);
  int bad = 0;
  for (int i = 0; i < 16; i++)
    bad += img[i] != ((float)mnist_px(1, i / 4, i % 4) / 255.0f - 0.1307f) / 0.3081f;
  CU_ASSERT_EQUAL(bad, 0);
  ganfw_dataset_destroy(ds);
  /* the default is exactly today's (x - 0.5) / 0.5 */
  ganfw_transform half = tf_from("data: {normalize: {mean: [0.5], std: [0.5]}}\n", GANFW_OK);
  float a[16], b[16];
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 1, &half, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, a, NULL), GANFW_OK);
  ganfw_dataset_destroy(ds);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 1, NULL, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, b, NULL), GANFW_OK);
  ganfw_dataset_destroy(ds);
  CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);

  /* per channel on 3-channel images; 3 values for gray ones are refused at open */
  ganfw_transform rgb = tf_from(
      "data: {channels: 3, normalize: {mean: [0.1, 0.2, 0.3], std: [1, 2, 4]}}\n", GANFW_OK);
  float rgbimg[3 * 16];
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 1, &rgb, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 0, 0, rgbimg, NULL), GANFW_OK);
  bad = 0;
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 16; i++)
      bad += rgbimg[k * 16 + i] !=
             ((float)mnist_px(0, i / 4, i % 4) / 255.0f - rgb.mean[k]) / rgb.std[k];
  CU_ASSERT_EQUAL(bad, 0);
  ganfw_dataset_destroy(ds);
  rgb.channels = 0;
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(dir, 1, &rgb, &ds), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("data.normalize gives 3 means and stds but the images have 1 channel"));
  CU_ASSERT_PTR_NULL(ds);

  tf_from("data: {channels: 1, normalize: {mean: [0.1, 0.2, 0.3], std: [1, 2, 4]}}\n",
          GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("norm.yaml:1:") && msg_has("data.channels 1"));
  tf_from("data: {normalize: {mean: [0.1, 0.2], std: [1]}}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("2 means and 1 stds"));
  tf_from("data: {normalize: {mean: [0.1], std: [0]}}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("data.normalize.std[0] must be > 0"));
  tf_from("data: {normalize: [0.5, 0.5]}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("data.normalize must be a map"));
  tf_from("data: {normalize: {mean: [0.5, 0.5, 0.5, 0.5], std: [1, 1, 1, 1]}}\n", GANFW_ERR_CONFIG);
  /* a transform built in code: unit_range and normalize exclude each other */
  const ganfw_transform both = {.unit_range = 1, .norm_n = 1, .mean = {0}, .std = {1}};
  int32_t oh, ow;
  CU_ASSERT_EQUAL(ganfw_transform_shape(&both, 4, 4, &oh, &ow), GANFW_ERR_CONFIG);
}

/* Center crop (round half to even, zero surround when larger), pad, flip, normalise. */
static void test_crop_pad_flip(void) {
  float src[6 * 6], dst[8 * 8];
  for (int i = 0; i < 36; i++) src[i] = (float)i / 35.0f;
  /* 6 -> 3: top = round(1.5) = 2 */
  const ganfw_transform c3 = {.crop_h = 3, .crop_w = 3, .unit_range = 1};
  CU_ASSERT_EQUAL(ganfw_transform_apply(&c3, src, 1, 6, 6, 0, dst, 1, 3, 3), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(dst[0], src[2 * 6 + 2], 1e-7);
  /* 5 x 6 -> 2 x 2: top = round(1.5) = 2, left = round(2) = 2 */
  const ganfw_transform c2 = {.crop_h = 2, .crop_w = 2, .unit_range = 1};
  CU_ASSERT_EQUAL(ganfw_transform_apply(&c2, src, 1, 5, 6, 0, dst, 1, 2, 2), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(dst[0], src[2 * 6 + 2], 1e-7);
  /* 7 x 6 -> 2 x 2: top = round(2.5) = 2 (half to even) */
  float src7[7 * 6];
  for (int i = 0; i < 42; i++) src7[i] = (float)i / 41.0f;
  CU_ASSERT_EQUAL(ganfw_transform_apply(&c2, src7, 1, 7, 6, 0, dst, 1, 2, 2), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(dst[0], src7[2 * 6 + 2], 1e-7);
  /* 2 x 2 -> crop 5 x 4: image at rows 1..2 (pad top (5-2)//2 = 1), cols 1..2 */
  const float s2[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  const ganfw_transform big = {.crop_h = 5, .crop_w = 4, .unit_range = 1};
  CU_ASSERT_EQUAL(ganfw_transform_apply(&big, s2, 1, 2, 2, 0, dst, 1, 5, 4), GANFW_OK);
  const float want_big[20] = {0,    0, 0, 0, 0, 0.1f, 0.2f, 0, 0, 0.3f,
                              0.4f, 0, 0, 0, 0, 0,    0,    0, 0, 0};
  for (int i = 0; i < 20; i++) CU_ASSERT_DOUBLE_EQUAL(dst[i], want_big[i], 1e-7);
  /* pad 1 with normalisation: border -1, centre 2x-1 */
  const ganfw_transform pad = {.pad = 1};
  CU_ASSERT_EQUAL(ganfw_transform_apply(&pad, s2, 1, 2, 2, 0, dst, 1, 4, 4), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(dst[0], -1.0, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(dst[15], -1.0, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(dst[5], 0.1 * 2 - 1, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(dst[10], 0.4 * 2 - 1, 1e-6);
  /* wrong output shape */
  CU_ASSERT_EQUAL(ganfw_transform_apply(&pad, s2, 1, 2, 2, 0, dst, 1, 3, 3), GANFW_ERR_INVALID_ARG);

  /* Flip: each key gives the image or its mirror, the same for the same key; both occur. */
  const ganfw_transform flip = {.hflip = 1, .unit_range = 1, .pad = 1};
  const float row[3] = {0.1f, 0.5f, 0.9f};
  int flipped = 0, plain = 0, unstable = 0;
  for (uint64_t k = 0; k < 200; k++) {
    float a[15], b[15]; /* 1 x 3 padded by 1: 3 x 5, the image in the middle row */
    const uint64_t key = ganfw_data_sample_key(7, 0, (int64_t)k);
    CU_ASSERT_EQUAL(ganfw_transform_apply(&flip, row, 1, 1, 3, key, a, 1, 3, 5), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_transform_apply(&flip, row, 1, 1, 3, key, b, 1, 3, 5), GANFW_OK);
    if (memcmp(a, b, sizeof a)) unstable++;
    if (a[5 + 1] == 0.9f && a[5 + 2] == 0.5f && a[5 + 3] == 0.1f)
      flipped++;
    else if (a[5 + 1] == 0.1f && a[5 + 2] == 0.5f && a[5 + 3] == 0.9f)
      plain++;
  }
  CU_ASSERT_EQUAL(unstable, 0);
  CU_ASSERT_EQUAL(flipped + plain, 200);
  CU_ASSERT(flipped > 60 && plain > 60);
}

/* The shift (dy, dx), |dy|, |dx| <= p, for which out[y][x] == src[y + dy][xs] (xs = x, or
 * w - 1 - x when mirrored) inside the image and 0 outside, or 0 when there is none. */
static int find_shift(const float *src, const float *out, int h, int w, int p, int mirrored,
                      int *dy, int *dx) {
  for (int sy = -p; sy <= p; sy++)
    for (int sx = -p; sx <= p; sx++) {
      int match = 1;
      for (int y = 0; y < h && match; y++)
        for (int x = 0; x < w && match; x++) {
          const int yy = y + sy, xx = (mirrored ? w - 1 - x : x) + sx;
          const float want = yy >= 0 && yy < h && xx >= 0 && xx < w ? src[yy * w + xx] : 0.0f;
          match = out[y * w + x] == want;
        }
      if (match) {
        *dy = sy;
        *dx = sx;
        return 1;
      }
    }
  return 0;
}

/* RandomCrop(size, padding=p) then RandomHorizontalFlip: each key moves the picture by at most
 * p pixels each way with zeros coming in, every shift in [-p, p]^2 occurs, a flip mirrors
 * exactly, and the same key gives the same picture. The source has no zero pixel, so a zero
 * in the output can only have come in from the padding. */
static void test_random_crop(void) {
  enum { H = 5, W = 6, P = 2, KEYS = 3000 };
  float src[H * W];
  for (int i = 0; i < H * W; i++) src[i] = (float)(i + 1) / (H * W);
  int seen[2 * P + 1][2 * P + 1] = {{0}};
  int unmatched = 0, unstable = 0, mirrored_n = 0, plain_n = 0;
  const ganfw_transform crop = {.crop_padding = P, .unit_range = 1};
  const ganfw_transform both = {.crop_padding = P, .hflip = 1, .unit_range = 1};
  for (int k = 0; k < KEYS; k++) {
    const uint64_t key = ganfw_data_sample_key(11, 2, k);
    float a[H * W], b[H * W];
    CU_ASSERT_EQUAL(ganfw_transform_apply(&crop, src, 1, H, W, key, a, 1, H, W), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_transform_apply(&crop, src, 1, H, W, key, b, 1, H, W), GANFW_OK);
    unstable += memcmp(a, b, sizeof a) != 0;
    int dy, dx;
    if (find_shift(src, a, H, W, P, 0, &dy, &dx))
      seen[dy + P][dx + P]++;
    else
      unmatched++;
    /* with the flip: the same crop (the flip draws from another part of the key), mirrored
     * or not */
    CU_ASSERT_EQUAL(ganfw_transform_apply(&both, src, 1, H, W, key, b, 1, H, W), GANFW_OK);
    int fy, fx;
    if (find_shift(src, b, H, W, P, 1, &fy, &fx) && memcmp(a, b, sizeof a) != 0) {
      mirrored_n++;
      /* mirror(crop(img)): output column x is crop column W-1-x, shifted by crop's dx */
      CU_ASSERT(fy == dy && fx == dx);
    } else if (memcmp(a, b, sizeof a) == 0) {
      plain_n++;
    }
  }
  CU_ASSERT_EQUAL(unmatched, 0);
  CU_ASSERT_EQUAL(unstable, 0);
  CU_ASSERT_EQUAL(mirrored_n + plain_n, KEYS);
  CU_ASSERT(mirrored_n > KEYS / 3 && plain_n > KEYS / 3);
  /* uniform offsets: each of the 25 shifts about KEYS / 25 = 120 times */
  int lo = KEYS, hi = 0;
  for (int i = 0; i <= 2 * P; i++)
    for (int j = 0; j <= 2 * P; j++)
      lo = seen[i][j] < lo ? seen[i][j] : lo, hi = seen[i][j] > hi ? seen[i][j] : hi;
  CU_ASSERT(lo > 60 && hi < 200);
  /* The padding is black: -1 after the default normalisation; the shape never changes, also
   * after a resize, a center crop and a pad of its own. */
  const ganfw_transform norm = {.crop_padding = 3};
  int zeros_in = 0;
  for (int k = 0; k < 50; k++) {
    float o[H * W];
    CU_ASSERT_EQUAL(ganfw_transform_apply(&norm, src, 1, H, W, (uint64_t)k, o, 1, H, W), GANFW_OK);
    for (int i = 0; i < H * W; i++) {
      CU_ASSERT(o[i] >= -1.0f && o[i] <= 1.0f);
      zeros_in += o[i] == -1.0f;
    }
  }
  CU_ASSERT(zeros_in > 0);
  const ganfw_transform chain = {
      .resize = 8, .crop_h = 6, .crop_w = 6, .pad = 1, .crop_padding = 4};
  int32_t oh = 0, ow = 0;
  CU_ASSERT_EQUAL(ganfw_transform_shape(&chain, H, W, &oh, &ow), GANFW_OK);
  CU_ASSERT(oh == 8 && ow == 8);
  const ganfw_transform neg = {.crop_padding = -1};
  CU_ASSERT_EQUAL(ganfw_transform_shape(&neg, H, W, &oh, &ow), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("crop_padding -1"));
}

/* data.augment: {crop_padding, hflip} from the config, with its range and its shape checked,
 * and the old data.hflip pointed to its new place. */
static void test_augment_config(void) {
  ganfw_transform tf = tf_from("data: {augment: {crop_padding: 4, hflip: true}}\n", GANFW_OK);
  CU_ASSERT(tf.crop_padding == 4 && tf.hflip == 1 && tf.pad == 0);
  tf = tf_from("data: {pad: 2}\n", GANFW_OK);
  CU_ASSERT(tf.crop_padding == 0 && tf.hflip == 0);
  tf_from("data: {augment: {crop_padding: 1025}}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("norm.yaml:1:") && msg_has("data.augment.crop_padding") && msg_has("1024"));
  tf_from("data: {augment: {hflip: 3}}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("data.augment.hflip"));
  tf_from("data: {augment: true}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("norm.yaml:1:") && msg_has("data.augment must be a map"));
  tf_from("data: {hflip: true}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("norm.yaml:1:") && msg_has("data.augment.hflip"));
}

/* --- loader -------------------------------------------------------------------------------- */
/* 23 samples 4 x 4 with label = index. */
static ganfw_dataset *open_indexed(const ganfw_transform *tf) {
  static const char *dir;
  if (!dir) {
    dir = new_dir("mnist_indexed");
    write_mnist(dir, "train", 23, 4, 4, NULL, 0, 0);
  }
  ganfw_dataset *ds = NULL;
  CU_ASSERT_EQUAL(ganfw_dataset_open_mnist(dir, 1, tf, &ds), GANFW_OK);
  return ds;
}

/* Runs `nb` batches and records labels, images and infos. */
typedef struct run_rec {
  int32_t labels[64][8];
  float images[64][8 * 16];
  ganfw_batch_info info[64];
} run_rec;

static ganfw_status run_batches(ganfw_loader *l, int nb, run_rec *r) {
  for (int b = 0; b < nb; b++) {
    memset(r->labels[b], 0xff, sizeof r->labels[b]);
    memset(r->images[b], 0, sizeof r->images[b]);
    ganfw_status st = ganfw_loader_next(l, r->images[b], r->labels[b], &r->info[b]);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

static void test_loader_shuffle(void) {
  ganfw_dataset *ds = open_indexed(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
  ganfw_loader_config cfg = {.batch_size = 5, .seed = 1234, .shuffle = 1};
  ganfw_loader *l = NULL, *l2 = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_loader_batches_per_epoch(l), 5);
  static run_rec a, b;
  CU_ASSERT_EQUAL_FATAL(run_batches(l, 10, &a), GANFW_OK);
  /* epoch 0: 5,5,5,5,3 covering 0..22 once; then epoch 1 */
  int seen[2][23] = {{0}};
  for (int bi = 0; bi < 10; bi++) {
    const ganfw_batch_info *in = &a.info[bi];
    CU_ASSERT_EQUAL(in->epoch, bi / 5);
    CU_ASSERT_EQUAL(in->n, bi % 5 == 4 ? 3 : 5);
    CU_ASSERT_EQUAL(in->offset, (bi % 5) * 5);
    CU_ASSERT_EQUAL(in->last_in_epoch, bi % 5 == 4);
    for (int i = 0; i < in->n; i++) {
      const int32_t lab = a.labels[bi][i];
      CU_ASSERT_FATAL(lab >= 0 && lab < 23);
      seen[bi / 5][lab]++;
      /* the image is that sample's */
      CU_ASSERT_DOUBLE_EQUAL(a.images[bi][i * 16 + 5], mnist_px(lab, 1, 1) / 255.0 * 2 - 1, 1e-6);
    }
    if (in->n == 3) CU_ASSERT_EQUAL(a.labels[bi][3], -1); /* rows past n untouched */
  }
  for (int e = 0; e < 2; e++)
    for (int i = 0; i < 23; i++) CU_ASSERT_EQUAL(seen[e][i], 1);
  /* shuffled, and differently in the two epochs */
  int identity = 1, same_epochs = 1;
  for (int i = 0; i < 23; i++) {
    if (a.labels[i / 5][i % 5] != i) identity = 0;
    if (a.labels[i / 5][i % 5] != a.labels[5 + i / 5][i % 5]) same_epochs = 0;
  }
  CU_ASSERT(!identity);
  CU_ASSERT(!same_epochs);
  /* same seed: same batches; other seed: other order */
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l2), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(run_batches(l2, 10, &b), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(a.labels, b.labels, sizeof a.labels), 0);
  CU_ASSERT_EQUAL(memcmp(a.images, b.images, sizeof a.images), 0);
  ganfw_loader_destroy(l2);
  cfg.seed = 99;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l2), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(run_batches(l2, 5, &b), GANFW_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(a.labels, b.labels, sizeof(a.labels[0]) * 5), 0);
  ganfw_loader_destroy(l2);
  /* no shuffle: index order */
  cfg.shuffle = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l2), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(run_batches(l2, 6, &b), GANFW_OK);
  for (int i = 0; i < 23; i++) CU_ASSERT_EQUAL(b.labels[i / 5][i % 5], i);
  CU_ASSERT_EQUAL(b.labels[5][0], 0);
  CU_ASSERT_EQUAL(b.info[5].epoch, 1);
  ganfw_loader_destroy(l2);
  ganfw_loader_destroy(l);
  ganfw_dataset_destroy(ds);
}

static void test_loader_drop_last(void) {
  ganfw_dataset *ds = open_indexed(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
  ganfw_loader_config cfg = {.batch_size = 5, .seed = 5, .shuffle = 1, .drop_last = 1};
  ganfw_loader *l = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_loader_batches_per_epoch(l), 4);
  static run_rec a;
  CU_ASSERT_EQUAL_FATAL(run_batches(l, 8, &a), GANFW_OK);
  for (int bi = 0; bi < 8; bi++) {
    CU_ASSERT_EQUAL(a.info[bi].n, 5);
    CU_ASSERT_EQUAL(a.info[bi].epoch, bi / 4);
    CU_ASSERT_EQUAL(a.info[bi].last_in_epoch, bi % 4 == 3);
  }
  int seen[23] = {0}, distinct = 0;
  for (int bi = 0; bi < 4; bi++)
    for (int i = 0; i < 5; i++) seen[a.labels[bi][i]]++;
  for (int i = 0; i < 23; i++) {
    CU_ASSERT(seen[i] <= 1);
    distinct += seen[i];
  }
  CU_ASSERT_EQUAL(distinct, 20);
  ganfw_loader_destroy(l);
  cfg.batch_size = 24;
  CU_ASSERT_EQUAL(ganfw_loader_create(ds, &cfg, &l), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("batch_size 24"));
  CU_ASSERT_PTR_NULL(l);
  cfg.batch_size = 0;
  CU_ASSERT_EQUAL(ganfw_loader_create(ds, &cfg, &l), GANFW_ERR_CONFIG);
  ganfw_dataset_destroy(ds);
}

/* Prefetch yields exactly the synchronous batches (with random flips on). */
static void test_loader_prefetch_same(void) {
  const ganfw_transform tf = {.hflip = 1};
  ganfw_dataset *ds = open_indexed(&tf);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
  ganfw_loader_config cfg = {.batch_size = 4, .seed = 42, .shuffle = 1};
  ganfw_loader *ls = NULL, *lp = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &ls), GANFW_OK);
  cfg.prefetch = 1;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &lp), GANFW_OK);
  static run_rec a, b;
  CU_ASSERT_EQUAL_FATAL(run_batches(ls, 20, &a), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(run_batches(lp, 20, &b), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(a.labels, b.labels, sizeof a.labels), 0);
  CU_ASSERT_EQUAL(memcmp(a.images, b.images, sizeof a.images), 0);
  CU_ASSERT_EQUAL(memcmp(a.info, b.info, sizeof a.info), 0);
  ganfw_loader_destroy(ls);
  ganfw_loader_destroy(lp); /* with a batch in flight */
  ganfw_dataset_destroy(ds);
  /* Destroying right after create (thread idle) is clean too. */
  ds = open_indexed(NULL);
  CU_ASSERT_EQUAL(ganfw_loader_create(ds, &cfg, &lp), GANFW_OK);
  ganfw_loader_destroy(lp);
  ganfw_dataset_destroy(ds);
}

/* Several workers yield exactly the batches of one and of none, in the same order, with the
 * random crop and flip on, over epochs of a short last batch or none (drop_last); a loader
 * destroyed with every worker busy ends cleanly. */
static void test_loader_workers_same(void) {
  const ganfw_transform tf = {.crop_padding = 1, .hflip = 1};
  ganfw_dataset *ds = open_indexed(&tf), *plain = open_indexed(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
  CU_ASSERT_PTR_NOT_NULL_FATAL(plain);
  static run_rec want, got;
  const int32_t counts[] = {1, 2, 3, 4, 7, 16};
  for (int drop = 0; drop <= 1; drop++) {
    ganfw_loader_config cfg = {.batch_size = 5, .seed = 2024, .shuffle = 1, .drop_last = drop};
    ganfw_loader *l = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(run_batches(l, 30, &want), GANFW_OK); /* 6 or 7.5 epochs */
    ganfw_loader_destroy(l);
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
      cfg.prefetch = 1;
      cfg.workers = counts[k];
      CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l), GANFW_OK);
      CU_ASSERT_EQUAL_FATAL(run_batches(l, 30, &got), GANFW_OK);
      if (memcmp(want.images, got.images, sizeof want.images) ||
          memcmp(want.labels, got.labels, sizeof want.labels) ||
          memcmp(want.info, got.info, sizeof want.info))
        printf("\n  %d workers (drop_last %d) differ from the synchronous loader\n", (int)counts[k],
               drop);
      CU_ASSERT_EQUAL(memcmp(want.images, got.images, sizeof want.images), 0);
      CU_ASSERT_EQUAL(memcmp(want.labels, got.labels, sizeof want.labels), 0);
      CU_ASSERT_EQUAL(memcmp(want.info, got.info, sizeof want.info), 0);
      ganfw_loader_destroy(l); /* with batches in flight */
    }
    cfg.prefetch = 0;
    cfg.workers = 0;
    /* the augmentation is on: the same order without it gives other pictures */
    CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(plain, &cfg, &l), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(run_batches(l, 30, &got), GANFW_OK);
    CU_ASSERT_EQUAL(memcmp(want.labels, got.labels, sizeof want.labels), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(want.images, got.images, sizeof want.images), 0);
    ganfw_loader_destroy(l);
  }
  /* The same seed, the same augmented batch; another seed, other crops and flips of the same
   * samples (no shuffle: the order is the same). */
  ganfw_loader_config cfg = {.batch_size = 8, .seed = 5, .prefetch = 1, .workers = 3};
  ganfw_loader *a = NULL, *b = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &a), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &b), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(run_batches(a, 3, &want), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(run_batches(b, 3, &got), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(want.images, got.images, sizeof(want.images[0]) * 3), 0);
  ganfw_loader_destroy(b);
  cfg.seed = 6;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &b), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(run_batches(b, 3, &got), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(want.labels, got.labels, sizeof(want.labels[0]) * 3), 0);
  CU_ASSERT_NOT_EQUAL(memcmp(want.images, got.images, sizeof(want.images[0]) * 3), 0);
  ganfw_loader_destroy(a);
  ganfw_loader_destroy(b);
  /* Destroyed at once, every worker waiting or busy: clean. */
  cfg.workers = GANFW_LOADER_MAX_WORKERS;
  cfg.batch_size = 1;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &a), GANFW_OK);
  ganfw_loader_destroy(a);
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &a), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_loader_next(a, want.images[0], want.labels[0], NULL), GANFW_OK);
  ganfw_loader_destroy(a);
  /* Out of range, or several workers without prefetch: refused. */
  cfg.workers = GANFW_LOADER_MAX_WORKERS + 1;
  CU_ASSERT_EQUAL(ganfw_loader_create(ds, &cfg, &a), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(a);
  cfg.workers = 2;
  cfg.prefetch = 0;
  CU_ASSERT_EQUAL(ganfw_loader_create(ds, &cfg, &a), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("data.prefetch"));
  ganfw_dataset_destroy(ds);
  ganfw_dataset_destroy(plain);
}

/* data.shuffle, drop_last, prefetch and workers from the config, with their defaults and
 * errors naming the key and its line. */
static void test_loader_config(void) {
  const struct {
    const char *yaml;
    ganfw_status want;
    int32_t workers, prefetch, shuffle, drop_last;
    const char *msg;
  } cases[] = {
      {"data: {}\n", GANFW_OK, 1, 1, 1, 1, NULL},
      {"data: {workers: 4, shuffle: false}\n", GANFW_OK, 4, 1, 0, 1, NULL},
      {"data: {workers: 16, drop_last: no}\n", GANFW_OK, 16, 1, 1, 0, NULL},
      {"data: {prefetch: false}\n", GANFW_OK, 1, 0, 1, 1, NULL},
      {"data: {workers: 0}\n", GANFW_ERR_CONFIG, 0, 0, 0, 0, "data.workers"},
      {"data: {workers: 17}\n", GANFW_ERR_CONFIG, 0, 0, 0, 0, "from 1 to 16"},
      {"data: {workers: 2, prefetch: false}\n", GANFW_ERR_CONFIG, 0, 0, 0, 0,
       "data.workers 2 needs data.prefetch"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ganfw_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(cases[i].yaml, "loader.yaml", &cfg), GANFW_OK);
    ganfw_loader_config lc = {0};
    ganfw_status st = ganfw_loader_config_from_config(
        ganfw_cfg_section(ganfw_config_root(cfg), "data"), 32, 9, &lc);
    if (st != cases[i].want) printf("\n  %s: %s\n", cases[i].yaml, ganfw_error_message());
    CU_ASSERT_EQUAL(st, cases[i].want);
    if (st == GANFW_OK) {
      CU_ASSERT(lc.batch_size == 32 && lc.seed == 9);
      CU_ASSERT_EQUAL(lc.workers, cases[i].workers);
      CU_ASSERT_EQUAL(lc.prefetch, cases[i].prefetch);
      CU_ASSERT_EQUAL(lc.shuffle, cases[i].shuffle);
      CU_ASSERT_EQUAL(lc.drop_last, cases[i].drop_last);
    } else {
      CU_ASSERT(msg_has("loader.yaml:1:") && msg_has(cases[i].msg));
    }
    ganfw_config_destroy(cfg);
  }
}

/* Position save/restore: a new loader seeked to a saved position continues identically,
 * with none, one or three workers. */
static void test_loader_resume(void) {
  const ganfw_transform tf = {.crop_padding = 1, .hflip = 1};
  ganfw_dataset *ds = open_indexed(&tf);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
  for (int mode = 0; mode < 3; mode++) {
    ganfw_loader_config cfg = {.batch_size = 3,
                               .seed = 77,
                               .shuffle = 1,
                               .prefetch = mode > 0,
                               .workers = mode == 2 ? 3 : 1};
    ganfw_loader *l = NULL, *r = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l), GANFW_OK);
    static run_rec a, b;
    CU_ASSERT_EQUAL_FATAL(run_batches(l, 11, &a), GANFW_OK); /* into epoch 1 (8 per epoch) */
    int64_t e, o;
    ganfw_loader_position(l, &e, &o);
    CU_ASSERT_EQUAL(e, 1);
    CU_ASSERT_EQUAL(o, 9);
    CU_ASSERT_EQUAL_FATAL(run_batches(l, 9, &a), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &r), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_loader_next(r, b.images[0], b.labels[0], NULL), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_loader_seek(r, e, o), GANFW_OK); /* discards what was prefetched */
    CU_ASSERT_EQUAL_FATAL(run_batches(r, 9, &b), GANFW_OK);
    CU_ASSERT_EQUAL(memcmp(a.labels, b.labels, sizeof(a.labels[0]) * 9), 0);
    CU_ASSERT_EQUAL(memcmp(a.images, b.images, sizeof(a.images[0]) * 9), 0);
    CU_ASSERT_EQUAL(memcmp(a.info, b.info, sizeof(a.info[0]) * 9), 0);
    /* an offset at the end of an epoch means the start of the next */
    CU_ASSERT_EQUAL(ganfw_loader_seek(r, 4, 23), GANFW_OK);
    ganfw_loader_position(r, &e, &o);
    CU_ASSERT(e == 5 && o == 0);
    CU_ASSERT_EQUAL(ganfw_loader_seek(r, 0, 24), GANFW_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(ganfw_loader_seek(r, -1, 0), GANFW_ERR_INVALID_ARG);
    ganfw_loader_destroy(l);
    ganfw_loader_destroy(r);
  }
  ganfw_dataset_destroy(ds);
}

/* An unreadable sample surfaces from a worker thread (one of one, or one of three with the
 * batches after it in flight) as the status of next(), with the same message as
 * synchronously; the position stays, calling again retries, and skipping it works. */
static void test_loader_errors(void) {
  const char *dir = new_dir("folder_bad");
  uint8_t px[12] = {0};
  CU_ASSERT_EQUAL(ganfw_png_write_u8(join(dir, "a.png"), px, 2, 2, 3), GANFW_OK);
  FILE *f = fopen(join(dir, "b.png"), "wb");
  fputs("\x89PNG\r\n\x1a\n truncated", f);
  fclose(f);
  CU_ASSERT_EQUAL(ganfw_png_write_u8(join(dir, "c.png"), px, 2, 2, 3), GANFW_OK);
  ganfw_dataset *ds = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(dir, 1, NULL, &ds), GANFW_OK);
  char sync_msg[1024] = "";
  for (int mode = 0; mode < 3; mode++) {
    const int prefetch = mode > 0;
    ganfw_loader_config cfg = {.batch_size = 1, .prefetch = prefetch, .workers = mode == 2 ? 3 : 1};
    ganfw_loader *l = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l), GANFW_OK);
    float img[12];
    ganfw_batch_info info;
    CU_ASSERT_EQUAL(ganfw_loader_next(l, img, NULL, &info), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_loader_next(l, img, NULL, &info), GANFW_ERR_IO);
    CU_ASSERT(msg_has(join(dir, "b.png")));
    if (!prefetch)
      snprintf(sync_msg, sizeof sync_msg, "%s", ganfw_error_message());
    else
      CU_ASSERT_STRING_EQUAL(ganfw_error_message(), sync_msg);
    CU_ASSERT_EQUAL(ganfw_loader_next(l, img, NULL, &info), GANFW_ERR_IO); /* retried */
    int64_t e, o;
    ganfw_loader_position(l, &e, &o);
    CU_ASSERT(e == 0 && o == 1);
    CU_ASSERT_EQUAL(ganfw_loader_seek(l, 0, 2), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_loader_next(l, img, NULL, &info), GANFW_OK);
    CU_ASSERT(info.offset == 2 && info.last_in_epoch == 1);
    ganfw_loader_destroy(l);
  }
  ganfw_dataset_destroy(ds);
}

/* Loader throughput on a DC-GAN-like MNIST pipeline (28 -> 32, B = 128); reported. */
static void test_loader_speed(void) {
  const char *dir = new_dir("mnist_speed");
  write_mnist(dir, "train", 2048, 28, 28, NULL, 0, 0);
  ganfw_dataset *ds = NULL;
  const ganfw_transform tf = {.resize = 32};
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 1, &tf, &ds), GANFW_OK);
  ganfw_loader_config cfg = {.batch_size = 128, .seed = 1, .shuffle = 1, .drop_last = 1};
  ganfw_loader *l = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l), GANFW_OK);
  float *img = malloc(sizeof(float) * 128 * 32 * 32);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int ok = 1;
  for (int b = 0; b < 32; b++) ok &= ganfw_loader_next(l, img, NULL, NULL) == GANFW_OK;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CU_ASSERT(ok);
  const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("\n    [loader: %.1f us per 128-sample batch, %.0f samples/s] ", 1e6 * s / 32,
         32 * 128 / s);
  free(img);
  ganfw_loader_destroy(l);
  ganfw_dataset_destroy(ds);
}

/* The real MNIST from scripts/fetch_mnist.sh, when present; skipped otherwise. */
static void test_real_mnist(void) {
  const char *src = getenv("GANFW_SOURCE_DIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/data/mnist", src ? src : ".");
  char probe[1100];
  snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte", dir);
  if (access(probe, R_OK) != 0) {
    printf("\n    [skipped: no MNIST in %s; run scripts/fetch_mnist.sh] ", dir);
    CU_PASS("real MNIST absent");
    return;
  }
  ganfw_dataset *tr = NULL, *te = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 1, NULL, &tr), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_mnist(dir, 0, NULL, &te), GANFW_OK);
  const int64_t ntr = ganfw_dataset_size(tr), nte = ganfw_dataset_size(te);
  printf("\n    [real MNIST: train %lld, test %lld] ", (long long)ntr, (long long)nte);
  CU_ASSERT(ntr >= 1000 && nte >= 100);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(tr), 10);
  int32_t c, h, w;
  ganfw_dataset_shape(tr, &c, &h, &w);
  CU_ASSERT(c == 1 && h == 28 && w == 28);
  /* Digits are mostly background (-1) with some ink (near +1). */
  float img[784];
  int32_t label;
  CU_ASSERT_EQUAL(ganfw_dataset_get(tr, 0, 0, img, &label), GANFW_OK);
  int bg = 0, ink = 0;
  for (int i = 0; i < 784; i++) bg += img[i] == -1.0f, ink += img[i] > 0.5f;
  CU_ASSERT(bg > 300 && ink > 20);
  CU_ASSERT(label >= 0 && label <= 9);
  ganfw_dataset_destroy(tr);
  ganfw_dataset_destroy(te);
}

/* The shape validate checks a model with when the files are not there: the format's own
 * image through the same transform a real data set gets. */
static void test_nominal_shape(void) {
  int32_t c = 0, h = 0, w = 0, k = 0;
  const ganfw_transform none = {0};
  CU_ASSERT_FATAL(ganfw_dataset_nominal_shape("mnist", &none, &c, &h, &w, &k));
  CU_ASSERT(c == 1 && h == 28 && w == 28 && k == 10);
  const ganfw_transform t = {.resize = 40, .crop_h = 36, .crop_w = 30, .pad = 2, .channels = 3};
  CU_ASSERT_FATAL(ganfw_dataset_nominal_shape("mnist", &t, &c, &h, &w, &k));
  CU_ASSERT(c == 3 && h == 40 && w == 34 && k == 10);
  CU_ASSERT_FATAL(ganfw_dataset_nominal_shape("cifar10", &none, &c, &h, &w, &k));
  CU_ASSERT(c == 3 && h == 32 && w == 32 && k == 10);
  const ganfw_transform gray = {.channels = 1};
  CU_ASSERT_FATAL(ganfw_dataset_nominal_shape("cifar10", &gray, &c, &h, &w, &k));
  CU_ASSERT_EQUAL(c, 1);
  CU_ASSERT_FATAL(ganfw_dataset_nominal_shape("fashion_mnist", &none, &c, &h, &w, &k));
  CU_ASSERT(c == 1 && h == 28 && w == 28 && k == 10);
  const ganfw_transform aug = {.crop_padding = 4, .hflip = 1};
  CU_ASSERT_FATAL(ganfw_dataset_nominal_shape("fashion_mnist", &aug, &c, &h, &w, &k));
  CU_ASSERT(c == 1 && h == 28 && w == 28);
  CU_ASSERT_FALSE(ganfw_dataset_nominal_shape("folder", &none, &c, &h, &w, &k));
  CU_ASSERT_FALSE(ganfw_dataset_nominal_shape("imagenet", &none, &c, &h, &w, &k));
  CU_ASSERT_FALSE(ganfw_dataset_nominal_shape(NULL, &none, &c, &h, &w, &k));
  const ganfw_transform empty = {.crop_h = 40, .crop_w = 40, .pad = 0, .resize = 1};
  int32_t h2 = -1;
  int ok = ganfw_dataset_nominal_shape("mnist", &empty, &c, &h2, &w, &k);
  CU_ASSERT(!ok || h2 > 0); /* an invalid transform gives no shape, never an empty one */
}

static CU_TestInfo tests[] = {
    {"mnist_plain", test_mnist_plain},
    {"nominal_shape", test_nominal_shape},
    {"transform_ranges", test_transform_ranges},
    {"mnist_gz", test_mnist_gz},
    {"mnist_split", test_mnist_split},
    {"mnist_corrupt", test_mnist_corrupt},
    {"cifar", test_cifar},
    {"cifar_corrupt", test_cifar_corrupt},
    {"folder_formats", test_folder_formats},
    {"folder_sizes_and_errors", test_folder_sizes_and_errors},
    {"resize_bilinear", test_resize_bilinear},
    {"transform_shapes", test_transform_shapes},
    {"normalize", test_normalize},
    {"crop_pad_flip", test_crop_pad_flip},
    {"random_crop", test_random_crop},
    {"augment_config", test_augment_config},
    {"loader_shuffle", test_loader_shuffle},
    {"loader_drop_last", test_loader_drop_last},
    {"loader_prefetch_same", test_loader_prefetch_same},
    {"loader_workers_same", test_loader_workers_same},
    {"loader_config", test_loader_config},
    {"loader_resume", test_loader_resume},
    {"loader_errors", test_loader_errors},
    {"loader_speed", test_loader_speed},
    {"real_mnist", test_real_mnist},
    CU_TEST_INFO_NULL,
};
GT_MAIN("data", tests)
