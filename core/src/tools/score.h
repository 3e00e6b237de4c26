/* `ganfw score RUN_DIR|CHECKPOINT --classifier CHECKPOINT`: n generated images judged by a
 * trained classifier: its mean confidence, the entropy of the mean predicted class
 * distribution (diversity), the Inception-Score-like exp(E[KL(p(y|x) || p(y))]) and the
 * Frechet distance (FID as pytorch-fid computes it, tools/fid.h) between the classifier's
 * penultimate features (the input of its last, linear, layer) of the generated images and
 * of the real test split of the classifier's data set. The classifier is this project's,
 * so the distance is not comparable to Inception-v3 FID figures. */
#ifndef GANFW_SCORE_H
#define GANFW_SCORE_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/host.h"
#include "ganfw/status.h"

typedef struct ganfw_score_args {
  const char *source;     /* the GAN: RUN_DIR or a checkpoint file */
  const char *classifier; /* the classifier: RUN_DIR or a checkpoint file */
  int64_t n;              /* images (default 10000) */
  int64_t batch;          /* images per batch (default 500) */
  int32_t has_seed;
  uint64_t seed;      /* noise seed when has_seed; else the GAN run's seed */
  int32_t no_fid;     /* 1: skip the Frechet distance (and the pass over the test split) */
  int32_t no_ema;     /* 1: the raw generator even when the checkpoint has its EMA */
  int32_t per_class;  /* print the class-conditional accuracy of each class (conditional GAN) */
  int64_t fid_real;   /* real test images for it, the first ones in file order (0: all) */
  const char *config; /* --config: the GAN's config (NULL: its run's config.resolved.yaml) */
} ganfw_score_args;

typedef struct ganfw_score_result {
  int64_t n;
  int32_t classes;
  double confidence;     /* mean over images of max_k p(k|x), in [1/K, 1] */
  double entropy;        /* of the mean distribution p(y), natural log, in [0, log K] */
  double inception;      /* exp(mean KL(p(y|x) || p(y))), in [1, K] */
  int64_t histogram[64]; /* argmax counts for the first 64 classes */
  /* The Frechet distance on the classifier's penultimate features (all 0 with no_fid): */
  double fid;         /* >= 0 up to rounding */
  int64_t fid_dim;    /* features per image (the last linear layer's in_features) */
  int64_t fid_n_fake; /* generated images (n) */
  int64_t fid_n_real; /* real test images */
  /* A conditional generator (model.conditional): image i is asked for class i % K; the
   * share of the images of class k that the classifier calls k, and over all images */
  int32_t conditional;
  double class_accuracy;
  double per_class_accuracy[64]; /* the first 64 classes */
} ganfw_score_result;

/* The node whose output the classifier's last layer reads, which must be a linear layer
 * reading another node: the penultimate features the Frechet distance compares. Otherwise
 * GANFW_ERR_CONFIG naming `what` (the checkpoint), the layer and its type. */
ganfw_status ganfw_score_feature_node(const ganfw_net *net, const char *what, int32_t *node);

/* Runs the score and fills *out; with `report` not NULL prints it there. */
ganfw_status ganfw_score(const ganfw_score_args *a, ganfw_score_result *out, FILE *report);

#endif
