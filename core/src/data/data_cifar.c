/* The CIFAR-10 source: binary batches (data_batch_1..5.bin, test_batch.bin) of 3073-byte
 * records, 1 label byte then 3072 pixel bytes (R, G, B planes of 32 x 32), read whole.
 * Samples are [3,32,32] in [0,1]. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data_source.h"
#include "base/error.h"

#define CIFAR_SIDE   32
#define CIFAR_PIXELS (3 * CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
/* The largest batch file read (a real one holds 30 MB: 10000 records). */
#define CIFAR_MAX_BATCH_BYTES ((int64_t)1 << 30)
#define CIFAR_HINT                                                                                 \
  "download the binary version (cifar-10-binary.tar.gz) from "                                     \
  "https://www.cs.toronto.edu/~kriz/cifar.html and extract it there"

typedef struct cifar_src {
  uint8_t *records; /* [n, 3073] */
  int64_t n;
} cifar_src;

/* The records a batch file of this size holds; GANFW_ERR_IO naming it when the size is
 * not a positive multiple of the record or is too large for a batch. */
static ganfw_status batch_records(const char *path, const struct stat *sb, int64_t *n) {
  if (sb->st_size > CIFAR_MAX_BATCH_BYTES)
    return ganfw_error_set(GANFW_ERR_IO,
                           "CIFAR-10: '%s' has %lld bytes, more than the limit of %lld for one "
                           "batch file (a CIFAR-10 batch holds 30730000): not a CIFAR-10 batch",
                           path, (long long)sb->st_size, (long long)CIFAR_MAX_BATCH_BYTES);
  if (sb->st_size <= 0 || sb->st_size % CIFAR_RECORD != 0)
    return ganfw_error_set(GANFW_ERR_IO,
                           "CIFAR-10: '%s' has %lld bytes, not a positive multiple of the "
                           "%d-byte record (truncated or not a CIFAR-10 binary batch); " CIFAR_HINT,
                           path, (long long)sb->st_size, CIFAR_RECORD);
  *n = sb->st_size / CIFAR_RECORD;
  return GANFW_OK;
}

/* The folder of the batches: `dir`, or the cifar-10-batches-bin folder the tarball
 * extracts to inside it (as torchvision accepts). */
static void batch_folder(const char *dir, char *base, size_t n) {
  struct stat sb;
  snprintf(base, n, "%s/cifar-10-batches-bin", dir);
  if (stat(base, &sb) != 0 || !S_ISDIR(sb.st_mode)) snprintf(base, n, "%s", dir);
}

/* Batch b (1..5) of the train split, or the test split's one file. */
static void batch_path(const char *base, int32_t train, int b, char *path, size_t n) {
  if (train)
    snprintf(path, n, "%s/data_batch_%d.bin", base, b);
  else
    snprintf(path, n, "%s/test_batch.bin", base);
}

/* Appends the records of `path` to s->records. */
static ganfw_status read_batch(cifar_src *s, const char *path) {
  struct stat sb;
  /* Before opening: a FIFO would block the open itself. */
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
    return ganfw_error_set(GANFW_ERR_IO, "CIFAR-10: '%s' is %s, not a CIFAR-10 batch; " CIFAR_HINT,
                           path, S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
  FILE *f = fopen(path, "rb");
  if (!f)
    return ganfw_error_set(GANFW_ERR_IO, "CIFAR-10: cannot open '%s': %s; " CIFAR_HINT, path,
                           strerror(errno));
  if (fstat(fileno(f), &sb) != 0) {
    fclose(f);
    return ganfw_error_set(GANFW_ERR_IO, "CIFAR-10: cannot stat '%s': %s", path, strerror(errno));
  }
  int64_t n = 0;
  ganfw_status st = batch_records(path, &sb, &n);
  if (st != GANFW_OK) {
    fclose(f);
    return st;
  }
  uint8_t *grown = realloc(s->records, (size_t)(s->n + n) * CIFAR_RECORD);
  if (!grown) {
    fclose(f);
    return ganfw_error_set(GANFW_ERR_OOM, "CIFAR-10: no host memory for '%s'", path);
  }
  s->records = grown;
  uint8_t *dst = grown + (size_t)s->n * CIFAR_RECORD;
  const size_t got = fread(dst, 1, (size_t)sb.st_size, f);
  fclose(f);
  if (got != (size_t)sb.st_size)
    return ganfw_error_set(GANFW_ERR_IO, "CIFAR-10: read error in '%s' after %zu bytes", path, got);
  for (int64_t i = 0; i < n; i++)
    if (dst[(size_t)i * CIFAR_RECORD] > 9)
      return ganfw_error_set(GANFW_ERR_IO,
                             "CIFAR-10: '%s' record %lld has label %u (must be 0..9): not a "
                             "CIFAR-10 batch (CIFAR-100 uses a different layout)",
                             path, (long long)i, dst[(size_t)i * CIFAR_RECORD]);
  s->n += n;
  return GANFW_OK;
}

static ganfw_status cifar_load(const void *self, int64_t index, ganfw_raw_image *img,
                               int32_t *label) {
  const cifar_src *s = self;
  const uint8_t *r = s->records + (size_t)index * CIFAR_RECORD;
  img->pixels = malloc(sizeof(float) * CIFAR_PIXELS);
  if (!img->pixels) return ganfw_error_set(GANFW_ERR_OOM, "CIFAR-10: no host memory for a sample");
  for (int i = 0; i < CIFAR_PIXELS; i++) img->pixels[i] = (float)r[1 + i] / 255.0f;
  img->c = 3;
  img->h = CIFAR_SIDE;
  img->w = CIFAR_SIDE;
  *label = r[0];
  return GANFW_OK;
}

static void cifar_destroy(void *self) {
  cifar_src *s = self;
  if (!s) return;
  free(s->records);
  free(s);
}

static const ganfw_source_vt cifar_vt = {cifar_load, NULL, cifar_destroy};

ganfw_status ganfw_dataset_open_cifar10(const char *dir, int32_t train, const ganfw_transform *tf,
                                        ganfw_dataset **out) {
  *out = NULL;
  if (!dir) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "CIFAR-10: no directory given");
  char base[4200], path[4300];
  batch_folder(dir, base, sizeof base);
  cifar_src *s = calloc(1, sizeof *s);
  if (!s) return ganfw_error_set(GANFW_ERR_OOM, "CIFAR-10: no host memory");
  ganfw_status st = GANFW_OK;
  for (int b = 1; b <= (train ? 5 : 1) && st == GANFW_OK; b++) {
    batch_path(base, train, b, path, sizeof path);
    st = read_batch(s, path);
  }
  if (st != GANFW_OK) {
    cifar_destroy(s);
    return st;
  }
  char name[4400];
  snprintf(name, sizeof name, "CIFAR-10 %s '%s'", train ? "train" : "test", base);
  return ganfw_dataset_wrap(&cifar_vt, s, name, s->n, 10, CIFAR_SIDE, CIFAR_SIDE, 3, tf, out);
}

ganfw_status ganfw_dataset_count_cifar10(const char *dir, int32_t train, int64_t *n) {
  *n = 0;
  if (!dir) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "CIFAR-10: no directory given");
  char base[4200], path[4300];
  batch_folder(dir, base, sizeof base);
  for (int b = 1; b <= (train ? 5 : 1); b++) {
    batch_path(base, train, b, path, sizeof path);
    struct stat sb;
    int64_t records = 0;
    if (stat(path, &sb) != 0)
      return ganfw_error_set(GANFW_ERR_IO, "CIFAR-10: cannot open '%s': %s; " CIFAR_HINT, path,
                             strerror(errno));
    if (!S_ISREG(sb.st_mode))
      return ganfw_error_set(GANFW_ERR_IO,
                             "CIFAR-10: '%s' is %s, not a CIFAR-10 batch; " CIFAR_HINT, path,
                             S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
    ganfw_status st = batch_records(path, &sb, &records);
    if (st != GANFW_OK) return st;
    *n += records;
  }
  return GANFW_OK;
}
