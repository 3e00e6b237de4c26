/* The data loader alone: images per second out of ganfw_loader_next for a data set, its
 * training augmentation and a number of worker threads, with nothing else running (the
 * caller only takes the batches). Default: Fashion-MNIST from its Debian package, batch 128,
 * RandomCrop(28, padding=2) + RandomHorizontalFlip, as configs/cnn_fashion.yaml trains.
 * --channels and --resize are data.channels and data.resize; --prefetch 0 makes the batches
 * in the caller's thread (data.prefetch: false), 1 in --workers threads.
 *   bench_loader [--dataset fashion_mnist] [--path DIR] [--workers 1] [--batch 128]
 *                [--batches 400] [--warmup 20] [--crop-padding 2] [--hflip 1] [--rounds 3]
 *                [--channels 0] [--resize 0] [--prefetch 1]
 *   loader dataset=... workers=N batch=B images_per_s=... (the best round) median_images_per_s=...
 * bench/run_loader64.sh runs it against torchvision's ImageFolder (bench/loader_torch.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "data/data.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void usage(void) {
  fprintf(stderr, "usage: bench_loader [--dataset KIND] [--path DIR] [--workers N] [--batch B] "
                  "[--batches N] [--warmup N] [--crop-padding P] [--hflip 0|1] [--rounds R] "
                  "[--channels 0|1|3] [--resize S] [--prefetch 0|1]\n");
}

int main(int argc, char **argv) {
  const char *kind = "fashion_mnist", *path = NULL;
  int workers = 1, batch = 128, batches = 400, warmup = 20, rounds = 3, prefetch = 1;
  ganfw_transform tf = {.crop_padding = 2, .hflip = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      usage();
      return 2;
    }
    if (!strcmp(a, "--dataset"))
      kind = v;
    else if (!strcmp(a, "--path"))
      path = v;
    else if (!strcmp(a, "--workers"))
      workers = atoi(v);
    else if (!strcmp(a, "--batch"))
      batch = atoi(v);
    else if (!strcmp(a, "--batches"))
      batches = atoi(v);
    else if (!strcmp(a, "--warmup"))
      warmup = atoi(v);
    else if (!strcmp(a, "--crop-padding"))
      tf.crop_padding = atoi(v);
    else if (!strcmp(a, "--hflip"))
      tf.hflip = atoi(v);
    else if (!strcmp(a, "--rounds"))
      rounds = atoi(v);
    else if (!strcmp(a, "--channels"))
      tf.channels = atoi(v);
    else if (!strcmp(a, "--resize"))
      tf.resize = atoi(v);
    else if (!strcmp(a, "--prefetch"))
      prefetch = atoi(v);
    else {
      usage();
      return 2;
    }
    i++;
  }
  if (rounds < 1 || rounds > 64 || batches < 1 || warmup < 0 || (prefetch != 0 && prefetch != 1) ||
      (!prefetch && workers > 1)) {
    usage();
    return 2;
  }
  if (!path) path = ganfw_dataset_default_path(kind);
  ganfw_dataset *ds = NULL;
  if (!path || ganfw_dataset_open(kind, path, 1, &tf, &ds) != GANFW_OK) {
    fprintf(stderr, "bench_loader: %s\n",
            path ? ganfw_error_message() : "give --path (the kind has no default folder)");
    return 1;
  }
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  float *images = malloc(sizeof(float) * (size_t)batch * c * h * w);
  int32_t *labels = malloc(sizeof(int32_t) * (size_t)batch);
  double rate[64];
  int rc = images && labels ? 0 : 1;
  for (int r = 0; r < rounds && rc == 0; r++) {
    ganfw_loader_config cfg = {.batch_size = batch,
                               .seed = (uint64_t)r + 1,
                               .shuffle = 1,
                               .drop_last = 1,
                               .prefetch = prefetch,
                               .workers = workers};
    ganfw_loader *l = NULL;
    if (ganfw_loader_create(ds, &cfg, &l) != GANFW_OK) {
      fprintf(stderr, "bench_loader: %s\n", ganfw_error_message());
      rc = 1;
      break;
    }
    int64_t n = 0;
    double t0 = 0;
    for (int b = 0; b < warmup + batches && rc == 0; b++) {
      if (b == warmup) t0 = now_s(), n = 0;
      ganfw_batch_info info;
      if (ganfw_loader_next(l, images, labels, &info) != GANFW_OK) {
        fprintf(stderr, "bench_loader: %s\n", ganfw_error_message());
        rc = 1;
      }
      n += info.n;
    }
    rate[r] = (double)n / (now_s() - t0);
    ganfw_loader_destroy(l);
  }
  if (rc == 0) {
    double sorted[64];
    memcpy(sorted, rate, sizeof(double) * rounds);
    qsort(sorted, (size_t)rounds, sizeof(double), cmp_double);
    printf("loader dataset=%s workers=%d prefetch=%d batch=%d shape=%dx%dx%d crop_padding=%d "
           "hflip=%d batches=%d images_per_s=%.0f median_images_per_s=%.0f\n",
           kind, workers, prefetch, batch, c, h, w, tf.crop_padding, tf.hflip, batches,
           sorted[rounds - 1], sorted[rounds / 2]);
  }
  free(images);
  free(labels);
  ganfw_dataset_destroy(ds);
  return rc;
}
