/* The IDX sources, MNIST and Fashion-MNIST: an IDX image file (magic 0x803: count, rows,
 * cols, then uint8 pixels) and its IDX label file (magic 0x801: count, then uint8 labels),
 * plain or gzipped, read whole and checked by one parser. Samples are [1,rows,cols] in
 * [0,1]. The two kinds differ only in their messages, what to do about a missing file, and
 * Fashion-MNIST's fixed 10 named classes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data/data_source.h"
#include "base/error.h"

/* The most data bytes one IDX file may declare (EMNIST's largest file holds 550 MB). */
#define IDX_MAX_BYTES ((int64_t)1 << 32)
/* deflate expands at most 1032-fold: a .gz file of n bytes holds at most that many times n. */
#define GZ_MAX_RATIO 1032

/* What distinguishes one IDX data set from another. */
typedef struct idx_format {
  const char *label;   /* "MNIST": the first word of its messages and of its name */
  const char *missing; /* what to do when a file is not there */
  const char *corrupt; /* what to do when a file is damaged or of another data set */
  int fix_names_dir;   /* 1: the folder follows those hints (the fetch script's argument) */
  const char *const *class_names; /* [num_classes]; NULL: no names, num_classes from labels */
  int32_t num_classes;
} idx_format;

static const idx_format mnist_format = {
    "MNIST", "run scripts/fetch_mnist.sh", "run scripts/fetch_mnist.sh", 1, NULL, 0};

/* torchvision's FashionMNIST.classes. */
static const char *const fashion_classes[10] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                "Bag",         "Ankle boot"};
static const idx_format fashion_format = {
    "Fashion-MNIST",
    "install it with `sudo apt-get install dataset-fashion-mnist` (or scripts/deps.sh), which "
    "puts its four files in /usr/share/datasets/fashion-mnist, the default data.path; or set "
    "data.path to a folder holding them",
    "reinstall it with `sudo apt-get install --reinstall dataset-fashion-mnist`, or set "
    "data.path to a folder holding the four Fashion-MNIST IDX files",
    0,
    fashion_classes,
    10};

/* The folder after a hint, when the format wants it: "%s%s" with these two. */
#define HINT_DIR(fmt, dir) (fmt)->fix_names_dir ? " " : "", (fmt)->fix_names_dir ? (dir) : ""

typedef struct mnist_src {
  const idx_format *fmt;
  uint8_t *images; /* [n, rows, cols] */
  uint8_t *labels; /* [n] */
  int64_t n;
  int32_t rows, cols;
} mnist_src;

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads exactly `len` bytes; returns the count read, -1 on a zlib error (message in *why). */
static int64_t gz_read_all(gzFile gz, uint8_t *dst, int64_t len, const char **why) {
  int64_t got = 0;
  while (got < len) {
    int64_t want = len - got > (1 << 30) ? (1 << 30) : len - got;
    int r = gzread(gz, dst + got, (unsigned)want);
    if (r < 0) {
      int errnum;
      *why = gzerror(gz, &errnum);
      return -1;
    }
    if (r == 0) break;
    got += r;
  }
  return got;
}

/* Opens dir/base or dir/base.gz and reads and checks the header of an IDX file with `ndim`
 * dimensions (1 labels, 3 images): dims[0] is the count, *payload the data bytes that
 * follow. path receives the file used, *gz_out the open file positioned after the header
 * (the caller closes it; NULL on failure). */
static ganfw_status open_idx_header(const idx_format *fmt, const char *dir, const char *base,
                                    uint32_t magic, int ndim, char *path, size_t path_len,
                                    uint32_t dims[3], int64_t *payload, gzFile *gz_out) {
  *gz_out = NULL;
  struct stat sb;
  snprintf(path, path_len, "%s/%s", dir, base);
  if (stat(path, &sb) != 0) {
    char gz_path[4200];
    snprintf(gz_path, sizeof gz_path, "%s.gz", path);
    if (stat(gz_path, &sb) != 0)
      return ganfw_error_set(GANFW_ERR_IO, "%s: cannot open '%s' (nor '%s.gz'): %s; %s%s%s",
                             fmt->label, path, path, strerror(errno), fmt->missing,
                             HINT_DIR(fmt, dir));
    snprintf(path, path_len, "%s", gz_path);
  }
  if (!S_ISREG(sb.st_mode))
    return ganfw_error_set(GANFW_ERR_IO, "%s: '%s' is %s, not an IDX file; %s%s%s", fmt->label,
                           path, S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file",
                           fmt->corrupt, HINT_DIR(fmt, dir));
  gzFile gz = gzopen(path, "rb");
  if (!gz)
    return ganfw_error_set(GANFW_ERR_IO, "%s: cannot open '%s': %s; %s", fmt->label, path,
                           errno ? strerror(errno) : "out of memory", fmt->missing);
  /* No larger buffers than the file needs (zlib's minimum is 8 KiB). */
  gzbuffer(gz, sb.st_size < (1 << 17) ? 8192 : 1 << 17);
  const char *why = "unexpected end of file";
  uint8_t hdr[16];
  const int64_t hdr_len = 4 + 4 * (int64_t)ndim;
  ganfw_status st = GANFW_OK;
  int64_t got = gz_read_all(gz, hdr, hdr_len, &why);
  if (got != hdr_len) {
    st = ganfw_error_set(GANFW_ERR_IO, "%s: '%s' is too short for an IDX header (%s); %s",
                         fmt->label, path, got < 0 ? why : "truncated", fmt->corrupt);
    goto done;
  }
  if (be32(hdr) != magic) {
    st = ganfw_error_set(GANFW_ERR_IO,
                         "%s: '%s' has magic number 0x%08x, expected 0x%08x for IDX %s (a "
                         "corrupt or different file); %s",
                         fmt->label, path, be32(hdr), magic, ndim == 1 ? "labels" : "images",
                         fmt->corrupt);
    goto done;
  }
  *payload = 1;
  for (int i = 0; i < ndim; i++) {
    dims[i] = be32(hdr + 4 + 4 * i);
    const uint32_t limit = i == 0 ? (1u << 30) : 4096u;
    if (dims[i] == 0 || dims[i] > limit) {
      st = ganfw_error_set(GANFW_ERR_IO,
                           "%s: '%s' declares dimension %d of size %u (allowed 1..%u): "
                           "corrupt header; %s",
                           fmt->label, path, i, dims[i], limit, fmt->corrupt);
      goto done;
    }
    *payload *= dims[i];
  }
  if (*payload > IDX_MAX_BYTES) {
    st = ganfw_error_set(GANFW_ERR_IO,
                         "%s: '%s' declares %lld bytes of data, more than the limit of %lld "
                         "bytes an IDX file may hold: corrupt header; %s",
                         fmt->label, path, (long long)*payload, (long long)IDX_MAX_BYTES,
                         fmt->corrupt);
    goto done;
  }
  if (!gzdirect(gz) && *payload > (int64_t)sb.st_size * GZ_MAX_RATIO) {
    st =
        ganfw_error_set(GANFW_ERR_IO,
                        "%s: '%s' declares %lld bytes of data, more than its %lld compressed "
                        "bytes can hold (truncated or corrupt); %s",
                        fmt->label, path, (long long)*payload, (long long)sb.st_size, fmt->corrupt);
    goto done;
  }
  if (gzdirect(gz) && sb.st_size != hdr_len + *payload) {
    st = ganfw_error_set(
        GANFW_ERR_IO, "%s: '%s' has %lld bytes but its header promises %lld (%s); %s", fmt->label,
        path, (long long)sb.st_size, (long long)(hdr_len + *payload),
        sb.st_size < hdr_len + *payload ? "truncated" : "trailing data", fmt->corrupt);
    goto done;
  }
done:
  if (st != GANFW_OK) {
    gzclose(gz);
    return st;
  }
  *gz_out = gz;
  return GANFW_OK;
}

/* Opens dir/base or dir/base.gz and reads one IDX file with `ndim` dimensions (1 labels,
 * 3 images) into a new buffer; dims[0] is the count. path receives the file used. */
static ganfw_status read_idx(const idx_format *fmt, const char *dir, const char *base,
                             uint32_t magic, int ndim, char *path, size_t path_len, uint8_t **data,
                             uint32_t dims[3]) {
  *data = NULL;
  gzFile gz;
  int64_t payload = 0;
  ganfw_status st =
      open_idx_header(fmt, dir, base, magic, ndim, path, path_len, dims, &payload, &gz);
  if (st != GANFW_OK) return st;
  const char *why = "unexpected end of file";
  int64_t got;
  *data = malloc((size_t)payload);
  if (!*data) {
    st = ganfw_error_set(GANFW_ERR_OOM, "%s: no host memory for the %lld bytes of '%s'", fmt->label,
                         (long long)payload, path);
    goto done;
  }
  got = gz_read_all(gz, *data, payload, &why);
  if (got != payload) {
    st = ganfw_error_set(GANFW_ERR_IO,
                         "%s: '%s' ends after %lld of the %lld data bytes its header "
                         "promises (%s); %s",
                         fmt->label, path, (long long)(got < 0 ? 0 : got), (long long)payload,
                         got < 0 ? why : "truncated", fmt->corrupt);
    goto done;
  }
  uint8_t extra;
  got = gz_read_all(gz, &extra, 1, &why);
  if (got != 0) {
    st = ganfw_error_set(
        GANFW_ERR_IO, "%s: '%s' %s after the %lld data bytes its header promises; %s", fmt->label,
        path, got < 0 ? why : "has trailing data", (long long)payload, fmt->corrupt);
    goto done;
  }
done:
  gzclose(gz);
  if (st != GANFW_OK) {
    free(*data);
    *data = NULL;
  }
  return st;
}

static ganfw_status mnist_load(const void *self, int64_t index, ganfw_raw_image *img,
                               int32_t *label) {
  const mnist_src *s = self;
  const size_t plane = (size_t)s->rows * s->cols;
  img->pixels = malloc(sizeof(float) * plane);
  if (!img->pixels)
    return ganfw_error_set(GANFW_ERR_OOM, "%s: no host memory for a sample", s->fmt->label);
  const uint8_t *p = s->images + plane * index;
  for (size_t i = 0; i < plane; i++) img->pixels[i] = (float)p[i] / 255.0f;
  img->c = 1;
  img->h = s->rows;
  img->w = s->cols;
  *label = s->labels[index];
  return GANFW_OK;
}

static void mnist_destroy(void *self) {
  mnist_src *s = self;
  if (!s) return;
  free(s->images);
  free(s->labels);
  free(s);
}

static const ganfw_source_vt mnist_vt = {mnist_load, NULL, mnist_destroy};

static ganfw_status open_idx(const idx_format *fmt, const char *dir, int32_t train,
                             const ganfw_transform *tf, ganfw_dataset **out) {
  *out = NULL;
  if (!dir) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: no directory given", fmt->label);
  const char *prefix = train ? "train" : "t10k";
  char img_name[64], lbl_name[64], img_path[4200], lbl_path[4200];
  snprintf(img_name, sizeof img_name, "%s-images-idx3-ubyte", prefix);
  snprintf(lbl_name, sizeof lbl_name, "%s-labels-idx1-ubyte", prefix);
  mnist_src *s = calloc(1, sizeof *s);
  if (!s) return ganfw_error_set(GANFW_ERR_OOM, "%s: no host memory", fmt->label);
  s->fmt = fmt;
  uint32_t idims[3] = {0}, ldims[3] = {0};
  ganfw_status st =
      read_idx(fmt, dir, img_name, 0x00000803u, 3, img_path, sizeof img_path, &s->images, idims);
  if (st == GANFW_OK)
    st = read_idx(fmt, dir, lbl_name, 0x00000801u, 1, lbl_path, sizeof lbl_path, &s->labels, ldims);
  if (st == GANFW_OK && idims[0] != ldims[0])
    st = ganfw_error_set(GANFW_ERR_IO,
                         "%s: '%s' holds %u images but '%s' holds %u labels; the two files "
                         "do not belong together; %s%s%s",
                         fmt->label, img_path, idims[0], lbl_path, ldims[0], fmt->corrupt,
                         HINT_DIR(fmt, dir));
  int32_t max_label = 0;
  for (int64_t i = 0; st == GANFW_OK && i < (int64_t)ldims[0]; i++) {
    if (s->labels[i] > max_label) max_label = s->labels[i];
    if (fmt->num_classes && s->labels[i] >= fmt->num_classes)
      st = ganfw_error_set(GANFW_ERR_IO,
                           "%s: '%s' gives item %lld the label %u, but %s has %d classes (labels "
                           "0..%d): a corrupt file or another data set's; %s",
                           fmt->label, lbl_path, (long long)i, s->labels[i], fmt->label,
                           (int)fmt->num_classes, (int)fmt->num_classes - 1, fmt->corrupt);
  }
  if (st != GANFW_OK) {
    mnist_destroy(s);
    return st;
  }
  s->n = idims[0];
  s->rows = (int32_t)idims[1];
  s->cols = (int32_t)idims[2];
  char name[4300];
  snprintf(name, sizeof name, "%s %s '%s'", fmt->label, train ? "train" : "test", dir);
  st = ganfw_dataset_wrap(&mnist_vt, s, name, s->n,
                          fmt->num_classes ? fmt->num_classes : max_label + 1, s->rows, s->cols, 1,
                          tf, out);
  if (st == GANFW_OK && fmt->class_names)
    ganfw_dataset_set_class_names(*out, fmt->class_names, fmt->num_classes);
  return st;
}

ganfw_status ganfw_dataset_open_mnist(const char *dir, int32_t train, const ganfw_transform *tf,
                                      ganfw_dataset **out) {
  return open_idx(&mnist_format, dir, train, tf, out);
}

ganfw_status ganfw_dataset_open_fashion_mnist(const char *dir, int32_t train,
                                              const ganfw_transform *tf, ganfw_dataset **out) {
  return open_idx(&fashion_format, dir, train, tf, out);
}

/* The image count from the images file's header alone (the labels are not read). */
static ganfw_status count_idx(const idx_format *fmt, const char *dir, int32_t train, int64_t *n) {
  *n = 0;
  if (!dir) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: no directory given", fmt->label);
  char name[64], path[4200];
  snprintf(name, sizeof name, "%s-images-idx3-ubyte", train ? "train" : "t10k");
  uint32_t dims[3] = {0};
  int64_t payload = 0;
  gzFile gz;
  ganfw_status st =
      open_idx_header(fmt, dir, name, 0x00000803u, 3, path, sizeof path, dims, &payload, &gz);
  if (st != GANFW_OK) return st;
  gzclose(gz);
  *n = dims[0];
  return GANFW_OK;
}

ganfw_status ganfw_dataset_count_mnist(const char *dir, int32_t train, int64_t *n) {
  return count_idx(&mnist_format, dir, train, n);
}

ganfw_status ganfw_dataset_count_fashion_mnist(const char *dir, int32_t train, int64_t *n) {
  return count_idx(&fashion_format, dir, train, n);
}
