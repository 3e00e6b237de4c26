/* `ganfw score` (see score.h): rebuilds the generator as `ganfw sample` does and the
 * classifier from its run folder, generates n images [B,C,H,W] in batches from the
 * fixed-noise stream (batch b uses seed + b), classifies them in no-grad eval mode and
 * reduces the [B,K] softmax probabilities on the host in double precision. */
#include "tools/score.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "base/error.h"
#include "nn/net.h"
#include "io/safetensors.h"
#include "tools/sample.h"
#include "train/session.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "train/trainer.h"

typedef struct side {
  ganfw_run *run;
  ganfw_session *s;
  char config[4200], ckpt[4200];
  ganfw_data_info info;
} side;

static void side_close(side *d) {
  ganfw_session_close(d->s);
  ganfw_run_close(d->run);
}

/* The class count a classifier checkpoint records. */
static ganfw_status num_classes(const char *path, int32_t *k) {
  ganfw_st_file *f = NULL;
  ganfw_status st = ganfw_st_open(path, &f);
  if (st != GANFW_OK) return st;
  const char *v = ganfw_st_metadata(f, "data.num_classes");
  *k = v ? atoi(v) : 0;
  ganfw_st_close(f);
  return GANFW_OK;
}

/* Opens the run of `what` (RUN_DIR or checkpoint) as `family`, weights loaded for `role`. */
static ganfw_status side_open(side *d, const char *what, int32_t family, const char *role) {
  ganfw_status st = ganfw_sample_locate(what, d->config, sizeof d->config, d->ckpt, sizeof d->ckpt);
  if (st == GANFW_OK) st = ganfw_sample_data_info(d->ckpt, &d->info);
  if (st == GANFW_OK && family == GANFW_MODEL_CLASSIFIER)
    st = num_classes(d->ckpt, &d->info.num_classes);
  if (st == GANFW_OK) st = ganfw_run_open(d->config, NULL, 0, &d->run);
  if (st == GANFW_OK) st = ganfw_session_open(d->run, 0, &d->info, &d->s);
  if (st == GANFW_OK && d->s->family != family)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: the model is not a %s (from %s)", d->config,
                           family == GANFW_MODEL_GAN ? "GAN" : "classifier", what);
  if (st != GANFW_OK) return st;
  ganfw_net *net = family == GANFW_MODEL_GAN ? d->s->generator : d->s->classifier;
  ganfw_ckpt_net cn = {.net = net, .prefix = role, .optim_vt = NULL, .optim_self = NULL};
  return ganfw_checkpoint_load_weights(d->ckpt, &cn, 1, 0, NULL);
}

/* One batch of m generated images through the classifier: probabilities p[m*K] on the
 * host. */
static ganfw_status classify_batch(side *g, side *c, int64_t m, uint64_t seed, float *img,
                                   int64_t img_bytes, float *logits, int64_t logit_bytes) {
  ganfw_tensor *z = ganfw_gan_fixed_noise(g->s, m, seed);
  ganfw_tensor *y = NULL, *x = NULL, *out = NULL, *out32 = NULL;
  ganfw_status st = z ? ganfw_gan_generate(g->s, z, &y) : ganfw_error_code();
  if (st == GANFW_OK) st = ganfw_tensor_to_host(y, img, img_bytes);
  if (st == GANFW_OK) {
    x = ganfw_tensor_create(c->s->ctx, GANFW_DTYPE_F32, 4, y->shape, GANFW_MEM_DATA, "score_x");
    st = x ? ganfw_tensor_from_host(x, img, img_bytes) : ganfw_error_code();
  }
  if (st == GANFW_OK) st = ganfw_net_forward(c->s->classifier, x, NULL, &out); /* no-grad */
  if (st == GANFW_OK) {
    out32 = ganfw_tensor_as_dtype(out, GANFW_DTYPE_F32, GANFW_MEM_ACTIVATION);
    st = out32 ? ganfw_tensor_to_host(out32, logits, logit_bytes) : ganfw_error_code();
  }
  ganfw_tensor_destroy(out32);
  ganfw_tensor_destroy(out);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(z);
  return st;
}

/* Softmax of row[0..k) into p (double, max-subtracted). */
static void softmax(const float *row, int32_t k, double *p) {
  double mx = row[0], sum = 0;
  for (int32_t j = 1; j < k; j++)
    if (row[j] > mx) mx = row[j];
  for (int32_t j = 0; j < k; j++) sum += (p[j] = exp((double)row[j] - mx));
  for (int32_t j = 0; j < k; j++) p[j] /= sum;
}

static ganfw_status score(side *g, side *c, const ganfw_score_args *a, ganfw_score_result *r) {
  const ganfw_data_info *gi = &g->info, *ci = &c->info;
  if (gi->channels != ci->channels || gi->height != ci->height || gi->width != ci->width)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "the generator of %s makes [%d,%d,%d] images, the classifier of %s "
                           "takes [%d,%d,%d]; score needs the same shape (no resizing)",
                           g->ckpt, (int)gi->channels, (int)gi->height, (int)gi->width, c->ckpt,
                           (int)ci->channels, (int)ci->height, (int)ci->width);
  int64_t oshape[GANFW_MAX_DIMS];
  int32_t ondim = 0;
  ganfw_net_output_shape(c->s->classifier, 1, oshape, &ondim);
  const int32_t K = (int32_t)oshape[ondim - 1];
  if (ondim != 2 || K < 2)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: the classifier's output is not [N,K] logits",
                           c->ckpt);
  const int64_t B = a->batch > 0 ? a->batch : 500, n = a->n > 0 ? a->n : 10000;
  const uint64_t seed = a->has_seed ? a->seed : g->s->ctx->seed;
  const int64_t per = (int64_t)gi->channels * gi->height * gi->width;
  float *img = malloc((size_t)(B * per) * sizeof *img);
  float *logits = malloc((size_t)(B * K) * sizeof *logits);
  double *p = malloc((size_t)K * sizeof *p), *mean = calloc((size_t)K, sizeof *mean);
  ganfw_status st = GANFW_OK;
  if (!img || !logits || !p || !mean) st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  memset(r, 0, sizeof *r);
  r->classes = K;
  double conf = 0, cond_entropy = 0;
  ganfw_net_set_train(c->s->classifier, 0, 0);
  for (int64_t done = 0, b = 0; st == GANFW_OK && done < n; done += B, b++) {
    const int64_t m = n - done < B ? n - done : B;
    st = classify_batch(g, c, m, seed + (uint64_t)b, img, m * per * (int64_t)sizeof *img, logits,
                        m * K * (int64_t)sizeof *logits);
    for (int64_t i = 0; st == GANFW_OK && i < m; i++) {
      softmax(logits + i * K, K, p);
      int32_t best = 0;
      for (int32_t j = 0; j < K; j++) {
        if (p[j] > p[best]) best = j;
        mean[j] += p[j];
        if (p[j] > 0) cond_entropy -= p[j] * log(p[j]);
      }
      conf += p[best];
      if (best < 64) r->histogram[best]++;
    }
  }
  ganfw_net_set_train(c->s->classifier, 1, 1);
  if (st == GANFW_OK) {
    double h = 0;
    for (int32_t j = 0; j < K; j++) {
      mean[j] /= (double)n;
      if (mean[j] > 0) h -= mean[j] * log(mean[j]);
    }
    r->n = n;
    r->confidence = conf / (double)n;
    r->entropy = h;
    /* E[KL(p(y|x) || p(y))] = H(p(y)) - E[H(p(y|x))] */
    double kl = h - cond_entropy / (double)n;
    r->inception = exp(kl > 0 ? kl : 0);
  }
  free(img);
  free(logits);
  free(p);
  free(mean);
  return st;
}

ganfw_status ganfw_score(const ganfw_score_args *a, ganfw_score_result *out, FILE *report) {
  side *g = calloc(1, sizeof *g), *c = calloc(1, sizeof *c);
  ganfw_status st = g && c ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK && !a->classifier)
    st = ganfw_error_set(GANFW_ERR_INVALID_ARG,
                         "score needs --classifier RUN_DIR|CHECKPOINT of a trained classifier");
  if (st == GANFW_OK) st = side_open(g, a->source, GANFW_MODEL_GAN, "generator");
  if (st == GANFW_OK) st = side_open(c, a->classifier, GANFW_MODEL_CLASSIFIER, "classifier");
  if (st == GANFW_OK) st = score(g, c, a, out);
  if (st == GANFW_OK && report) {
    fprintf(report, "generator: %s\nclassifier: %s\n", g->ckpt, c->ckpt);
    fprintf(report, "images: %lld (seed %llu)\n", (long long)out->n,
            (unsigned long long)(a->has_seed ? a->seed : g->s->ctx->seed));
    fprintf(report, "mean confidence: %.6f\n", out->confidence);
    fprintf(report, "class entropy: %.6f (perfect: log %d = %.4f)\n", out->entropy,
            (int)out->classes, log((double)out->classes));
    fprintf(report, "inception score: %.6f (of at most %d)\n", out->inception, (int)out->classes);
    fprintf(report, "predicted classes:");
    for (int32_t j = 0; j < out->classes && j < 64; j++)
      fprintf(report, " %lld", (long long)out->histogram[j]);
    fprintf(report, "\n");
  }
  if (g) side_close(g);
  if (c) side_close(c);
  free(g);
  free(c);
  return st;
}
