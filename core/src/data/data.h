/* Training data on the host: a dataset yields sample i as (image f32 [C,H,W] after its
 * transforms, label int32); the loader turns it into batches [B,C,H,W] + labels [B],
 * shuffled per epoch from (seed, epoch), optionally prepared by prefetch worker threads.
 * Sources: MNIST and Fashion-MNIST IDX (plain or .gz), CIFAR-10 binary batches, a folder of
 * PNG and JPEG files (flat, or one sub-folder a class, optionally under train/ and test/). */
#ifndef GANFW_DATA_H
#define GANFW_DATA_H

#include <stdint.h>

#include "ganfw/host.h"
#include "ganfw/status.h"

/* --- transforms ---------------------------------------------------------------------------
 * Applied in this fixed order, as a torchvision pipeline (alpha composited and channels
 * converted by the loader) -> Resize -> CenterCrop -> Pad -> RandomCrop(size, padding) ->
 * RandomHorizontalFlip -> ToTensor -> Normalize(mean, std) would be (default mean = std =
 * 0.5 per channel). All zero is "no resize, no crop, no pad, no augmentation, the source's
 * channels, alpha over white, JPEGs decoded scaled when the resize allows, values in
 * [-1,1]". The two random ones (crop_padding,
 * hflip: the training augmentation) are decided by the sample's key, never by a global
 * generator, so a batch is the same whichever thread makes it and after a resume. */
typedef struct ganfw_transform {
  int32_t channels; /* 1 gray or 3 RGB; 0: the source's own (MNIST 1, CIFAR 3, folder 3, as
                     * torchvision's ImageFolder converts every image to RGB). Gray from RGB
                     * is PIL's luma 0.299 R + 0.587 G + 0.114 B; alpha: see `alpha`. */
  int32_t resize;   /* > 0: the smaller edge to `resize`, the other int(resize * long / short)
                     * (torchvision Resize(int)). Bilinear, the formula of
                     * F.interpolate(mode="bilinear", align_corners=False, antialias=False):
                     * identical to torchvision when upsampling; when downsampling torchvision
                     * (PIL, antialias=True) blurs first and this does not. */
  int32_t resize_h, resize_w; /* both > 0: resize to exactly h x w (Resize((h, w))); wins
                               * over `resize` */
  int32_t crop_h, crop_w;     /* both > 0: center crop (torchvision CenterCrop((h, w)): top =
                               * round((H - h) / 2) with round half to even, zeros where the crop
                               * is larger than the image) */
  int32_t pad;                /* >= 0: that many zero pixels (black, -1 after normalising) on
                               * each side */
  int32_t crop_padding;       /* > 0: RandomCrop((H, W), padding=crop_padding) of the H x W image
                               * so far: pad that many zero pixels on each side, cut an H x W
                               * window at offsets i, j uniform in 0..2*crop_padding. The
                               * picture moves by up to crop_padding pixels each way, zeros
                               * coming in; the shape does not change. */
  int32_t hflip;              /* 1: mirror left-right with p = 0.5, decided by the sample key */
  int32_t unit_range;         /* 1: keep values in [0,1] (no Normalize; norm_n must be 0) */
  /* Normalize after ToTensor's [0,1], in f32 as torchvision: (x - mean[k]) / std[k].
   * norm_n 0: mean = std = 0.5, i.e. [-1,1]; 1: mean[0], std[0] for every channel; 2..3:
   * one per output channel (the dataset refuses a count other than its channels). std > 0. */
  int32_t norm_n;
  float mean[3], std[3];
  /* What an image's alpha does (a ganfw_alpha_mode), per channel x = a x + (1 - a) bg, with
   * bg white or background[] (R, G, B in [0,1]) for GANFW_ALPHA_OVER_COLOR. */
  int32_t alpha;
  float background[3];
  /* 0: a JPEG may be decoded at 1/2, 1/4 or 1/8 in the DCT domain when the resize leaves
   * it no smaller than its target (the shorter side >= resize, or >= resize_h x resize_w;
   * ganfw_transform_decode_min), the resize then starting from that; 1: always at full
   * size. */
  int32_t jpeg_full_size;
} ganfw_transform;

/* What an image's alpha channel (a PNG's gray+alpha or RGBA) does, before the channel
 * conversion: composited over white (the default), over ganfw_transform.background, or
 * dropped (PIL's convert("RGB"), torchvision's ImageFolder loader). */
typedef enum {
  GANFW_ALPHA_OVER_WHITE = 0,
  GANFW_ALPHA_OVER_COLOR = 1,
  GANFW_ALPHA_DROP = 2,
  GANFW_ALPHA_COUNT
} ganfw_alpha_mode;

/* The transform of the config's `data` section (data.channels, background, resize,
 * jpeg_dct_scale, crop, pad, augment: {crop_padding: N, hflip: bool}, normalize: {mean:
 * [..], std: [..]}; docs/CONFIG.md) into *tf. GANFW_ERR_CONFIG naming the key and its
 * file:line:col for a bad value. `data` may be NULL (all defaults). */
ganfw_status ganfw_transform_from_config(const ganfw_cfg *data, ganfw_transform *tf);
/* The source of the `data` section: data.dataset (default "mnist"; an unknown kind is
 * GANFW_ERR_CONFIG naming the key and listing the kinds) and data.path (default: the kind's,
 * see ganfw_dataset_default_path; required for a folder), strings borrowed from the config.
 * `data` may be NULL. */
ganfw_status ganfw_data_source_from_config(const ganfw_cfg *data, const char **kind,
                                           const char **path);

/* --- datasets ------------------------------------------------------------------------------ */
typedef struct ganfw_dataset ganfw_dataset;

/* MNIST (or any IDX pair of the same layout) from `dir`:
 * train-images-idx3-ubyte + train-labels-idx1-ubyte (train != 0) or t10k-* (train == 0),
 * each plain or with a .gz suffix. The files are read and checked whole (magic numbers,
 * dimensions, counts, sizes); a missing or corrupt one is GANFW_ERR_IO naming the path and
 * "run scripts/fetch_mnist.sh". num_classes = largest label + 1. `tf` may be NULL (all
 * zero). The caller owns *out (ganfw_dataset_destroy). */
ganfw_status ganfw_dataset_open_mnist(const char *dir, int32_t train, const ganfw_transform *tf,
                                      ganfw_dataset **out);

/* Fashion-MNIST (Zalando's 28 x 28 gray clothing images; Debian's dataset-fashion-mnist
 * installs them gzipped in /usr/share/datasets/fashion-mnist) from `dir`: the same four IDX
 * files as MNIST (train-* 60,000 images, t10k-* the standard 10,000 test images), read by
 * the same parser. Exactly 10 classes with names (ganfw_dataset_class_name); a label above 9
 * is GANFW_ERR_IO naming the file. A missing file is GANFW_ERR_IO naming it and saying how
 * to install the package or set data.path. */
ganfw_status ganfw_dataset_open_fashion_mnist(const char *dir, int32_t train,
                                              const ganfw_transform *tf, ganfw_dataset **out);

/* CIFAR-10 binary version from `dir` (or `dir`/cifar-10-batches-bin): data_batch_1..5.bin
 * (train != 0) or test_batch.bin, records of 1 label byte + 3072 bytes (R, G, B planes of
 * 32 x 32). A file whose size is not a positive multiple of 3073, or a label > 9, is
 * GANFW_ERR_IO naming the path. */
ganfw_status ganfw_dataset_open_cifar10(const char *dir, int32_t train, const ganfw_transform *tf,
                                        ganfw_dataset **out);

/* An image folder as torchvision's ImageFolder reads one. Every file is taken by its content
 * (a PNG or JPEG signature), whatever its name; names starting with '.' are ignored.
 * - `dir` holds sub-folders: each is a class, numbered in strcmp order of the names, with
 *   the images anywhere below it (in strcmp order of their folder, then of their name, as
 *   torchvision's os.walk order); class names from ganfw_dataset_class_name. A class folder
 *   without images is GANFW_ERR_IO naming it.
 * - otherwise: the images directly in `dir`, in strcmp order, label 0, one class.
 * - `dir` holds both train/ and test/: the split reads dir/train (train != 0) or dir/test,
 *   each as above; the other entries beside them are ignored, and the two must have the
 *   same class folders (GANFW_ERR_IO naming both). Without both, the test split (train ==
 *   0) is GANFW_ERR_IO saying that there is no test/ sub-folder.
 * Files that are not images, and images directly in a folder of class folders, are skipped
 * and counted in one warning (log) naming an example. Images may differ in size and format;
 * each is decoded when its sample is requested (JPEGs scaled in the DCT domain as
 * tf->jpeg_full_size says). The output shape is that of the first image after the
 * transforms; an image whose transformed shape differs fails its get() with GANFW_ERR_IO
 * naming the file (set data.crop). No images is GANFW_ERR_IO. */
ganfw_status ganfw_dataset_open_folder(const char *dir, int32_t train, const ganfw_transform *tf,
                                       ganfw_dataset **out);

/* kind: "mnist", "fashion_mnist", "cifar10" or "folder"; an unknown kind is GANFW_ERR_CONFIG
 * listing the kinds. The test split (train == 0) is never augmented: tf's crop_padding and hflip
 * are ignored for it. */
ganfw_status ganfw_dataset_open(const char *kind, const char *path, int32_t train,
                                const ganfw_transform *tf, ganfw_dataset **out);
/* 0 when the data set at `path` has no test split by its layout (an image folder without
 * both train/ and test/: ganfw_dataset_open(kind, path, 0, ...) would fail saying so), 1
 * otherwise (MNIST, Fashion-MNIST and CIFAR-10 always have one; a missing file is the open's
 * error). For a caller that only evaluates along the way (a trainer plugin's training, its
 * sample grid) and may go without. Reads no file; an unknown kind gives 1. */
int ganfw_dataset_has_test_split(const char *kind, const char *path);
/* The number of samples ganfw_dataset_open(kind, path, train, ...) would hold, from the
 * files' headers or the folder's listing, without reading the images (for a tool that
 * needs the size before or instead of opening the set). A missing or damaged file is
 * GANFW_ERR_IO naming it; an unknown kind GANFW_ERR_CONFIG listing the kinds. */
ganfw_status ganfw_dataset_count(const char *kind, const char *path, int32_t train, int64_t *n);
/* Where a kind's files are when data.path is not given ("data/mnist",
 * "/usr/share/datasets/fashion-mnist", "data/cifar10"); NULL for a folder (no default) or an
 * unknown kind. A static string. */
const char *ganfw_dataset_default_path(const char *kind);

/* The output shape [*c,*h,*w] and class count a source's data set has by its format, before
 * its files are read (MNIST 1x28x28 and CIFAR-10 3x32x32, 10 classes each, through tf), for
 * checking a model when the files are not there. 0 when the kind has no fixed shape (a
 * folder of images) or tf yields none; no error is recorded. */
int ganfw_dataset_nominal_shape(const char *kind, const ganfw_transform *tf, int32_t *c, int32_t *h,
                                int32_t *w, int32_t *num_classes);

void ganfw_dataset_destroy(ganfw_dataset *ds); /* accepts NULL */

int64_t ganfw_dataset_size(const ganfw_dataset *ds);
int32_t ganfw_dataset_num_classes(const ganfw_dataset *ds);
/* The shape of one sample after the transforms. */
void ganfw_dataset_shape(const ganfw_dataset *ds, int32_t *c, int32_t *h, int32_t *w);
/* "MNIST train '<dir>'" etc., owned by the dataset, for messages. */
const char *ganfw_dataset_name(const ganfw_dataset *ds);
/* The name of class `label` ("T-shirt/top" for Fashion-MNIST's 0, "airplane" for
 * CIFAR-10's), a static string; NULL when the data set has no names (MNIST's digits are
 * their labels, a flat folder is unlabelled) or label is out of range. */
const char *ganfw_dataset_class_name(const ganfw_dataset *ds, int32_t label);

/* Sample `index` (0 <= index < size) into image[C*H*W] and *label (label may be NULL).
 * `key` drives the random transforms (crop, flip): the same key, the same picture. The loader
 * passes ganfw_data_sample_key(seed, epoch, index). Safe to call from several threads at
 * once. */
ganfw_status ganfw_dataset_get(const ganfw_dataset *ds, int64_t index, uint64_t key, float *image,
                               int32_t *label);

/* The random-transform key of sample `index` in `epoch` of a run seeded with `seed`. */
uint64_t ganfw_data_sample_key(uint64_t seed, int64_t epoch, int64_t index);

/* --- batch loader --------------------------------------------------------------------------- */
typedef struct ganfw_loader ganfw_loader;

typedef struct ganfw_loader_config {
  int32_t batch_size; /* > 0 */
  uint64_t seed;
  int32_t shuffle;   /* 1: epoch e visits a permutation drawn from (seed, e) (Fisher-Yates with
                      * splitmix64); 0: index order */
  int32_t drop_last; /* 1: an epoch ends before a batch that would be short */
  int32_t prefetch;  /* 1: worker threads prepare the next batches in host buffers of their own
                      * while the caller trains on the current one */
  int32_t workers;   /* with prefetch: that many worker threads (0 counts as 1, at most
                      * GANFW_LOADER_MAX_WORKERS), each making one whole batch at a time, up
                      * to `workers` batches ahead; batches come out in order and are bit for
                      * bit those of one worker or none. Without prefetch it must be 0 or 1. */
  /* Data-parallel (0 and 0 or 1: off): each batch of batch_size samples is the global
   * batch, cut into shard_groups micro-batches (0 counts as 1) of m = batch_size /
   * shard_groups rows; of micro-batch g only rows [g*m + shard_rank*p, g*m + (shard_rank +
   * 1)*p), p = m / shard_count, are decoded, into the caller's rows g*p .. (g+1)*p. So the
   * caller's micro-batch g is this rank's part of the global micro-batch g. Positions,
   * epochs and permutations stay the global ones: a checkpoint's position means the same
   * on any number of ranks. */
  int32_t shard_rank, shard_count, shard_groups;
} ganfw_loader_config;

enum { GANFW_LOADER_MAX_WORKERS = 16 };

/* The loader keys of the config's `data` section: data.shuffle, drop_last, prefetch (each
 * default true) and workers (default 1, 1..GANFW_LOADER_MAX_WORKERS; more than 1 needs
 * prefetch), with batch_size and seed from the caller. GANFW_ERR_CONFIG naming the key and
 * its file:line:col. `data` may be NULL (all defaults). */
ganfw_status ganfw_loader_config_from_config(const ganfw_cfg *data, int32_t batch_size,
                                             uint64_t seed, ganfw_loader_config *out);

/* What one ganfw_loader_next call returned. */
typedef struct ganfw_batch_info {
  int32_t n;             /* samples written; < batch_size only for an epoch's short last batch */
  int32_t last_in_epoch; /* 1: the next batch starts a new epoch */
  int32_t rows;          /* rows written into the caller's buffers: n, or this shard's part */
  int32_t first;         /* the batch row the caller's row 0 is (0 unless sharded) */
  int64_t epoch;         /* the epoch this batch belongs to (from 0) */
  int64_t offset;        /* position of its first sample within the epoch */
} ganfw_batch_info;

/* A loader over `ds`, which it borrows: the dataset must outlive the loader. Starts at epoch
 * 0, offset 0. A batch size larger than the dataset with drop_last is GANFW_ERR_CONFIG, and
 * so is a worker count out of range. The worker threads block SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGALRM, SIGUSR1, SIGUSR2 and SIGCHLD, which thus reach the caller's thread (or
 * another that takes them). The caller owns *out
 * (ganfw_loader_destroy). */
ganfw_status ganfw_loader_create(const ganfw_dataset *ds, const ganfw_loader_config *cfg,
                                 ganfw_loader **out);
/* Stops and joins the worker threads (batches in progress are abandoned between two
 * samples). Accepts NULL. */
void ganfw_loader_destroy(ganfw_loader *l);

/* The next batch into the caller's images[batch_size*C*H*W] and labels[batch_size] (labels
 * and info may be NULL); rows past info->n are left untouched. Epochs follow each other
 * without end; info->last_in_epoch marks the boundary. With prefetch it blocks until the
 * batch is ready. On failure (an unreadable sample, also one met by a worker thread) it
 * returns that status and message, the batches prepared after it are dropped, and the
 * position does not move: calling again retries. */
ganfw_status ganfw_loader_next(ganfw_loader *l, float *images, int32_t *labels,
                               ganfw_batch_info *info);

/* The largest batch size a training run takes from a data set of n samples: n, whatever
 * drop_last says, because a training step runs on full batches only (train/loop.c skips a
 * short last batch): with drop_last the loader would make no batch at all, without it only
 * short ones. *why (may be NULL) receives which, for messages (a static string). */
int64_t ganfw_loader_max_batch(int64_t n, int32_t drop_last, const char **why);

/* Batches in one epoch (the last one short unless drop_last). */
int64_t ganfw_loader_batches_per_epoch(const ganfw_loader *l);

/* Where the next ganfw_loader_next will start: save these two numbers with a checkpoint... */
void ganfw_loader_position(const ganfw_loader *l, int64_t *epoch, int64_t *offset);
/* ...and restore them in a new loader with the same dataset and config: it then yields the
 * same batches the first one would have. 0 <= offset <= dataset size (an offset that leaves
 * no further batch in that epoch moves to the start of the next); otherwise
 * GANFW_ERR_INVALID_ARG. Batches already prefetched are discarded. */
ganfw_status ganfw_loader_seek(ganfw_loader *l, int64_t epoch, int64_t offset);

#endif
