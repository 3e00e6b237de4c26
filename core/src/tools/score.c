/* `ganfw score` (see score.h): rebuilds the generator as `ganfw sample` does and the
 * classifier from its run folder, generates n images [B,C,H,W] in batches from the
 * fixed-noise stream (batch b uses seed + b), classifies them in no-grad eval mode and
 * reduces the [B,K] softmax probabilities on the host in double precision. For the Frechet
 * distance the same forward also hands out the input of the classifier's last layer
 * ([B,D] features), and the classifier runs over the real test split of its data set (the
 * first fid_real images in file order, all by default) for the reference statistics. */
#include "tools/score.h"
#include "train/ema.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "base/error.h"
#include "data/data.h"
#include "nn/net.h"
#include "io/safetensors.h"
#include "tools/fid.h"
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
  int32_t ema; /* the generator's weights are its EMA (train.ema) */
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
static ganfw_status side_open(side *d, const char *what, const char *config, int32_t family,
                              const char *role, int32_t use_ema) {
  ganfw_status st = ganfw_sample_source(what, config, d->config, sizeof d->config, d->ckpt,
                                        sizeof d->ckpt, &d->info, &d->run);
  if (st == GANFW_OK && family == GANFW_MODEL_CLASSIFIER)
    st = num_classes(d->ckpt, &d->info.num_classes);
  if (st == GANFW_OK) st = ganfw_session_open(d->run, 0, &d->info, &d->s);
  /* a trainer plugin's generating net stands for a GAN's generator */
  const int32_t generates = family == GANFW_MODEL_GAN && d->s && d->s->generator;
  if (st == GANFW_OK && d->s->family != family && !generates)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: the model is not a %s%s (from %s)", d->config,
                           family == GANFW_MODEL_GAN ? "GAN" : "classifier",
                           family == GANFW_MODEL_GAN && d->s->family == GANFW_MODEL_NETS
                               ? ", and its trainer names no generating net"
                               : "",
                           what);
  if (st != GANFW_OK) return st;
  if (family == GANFW_MODEL_GAN) return ganfw_ema_load_generator(d->s, d->ckpt, use_ema, &d->ema);
  ganfw_net *net = d->s->classifier;
  ganfw_ckpt_net cn = {.net = net, .prefix = role, .optim_vt = NULL, .optim_self = NULL};
  return ganfw_checkpoint_load_weights(d->ckpt, &cn, 1, 0, NULL);
}

/* The mean and std that data.normalize (or unit_range) gives channel k: x = (x01 - mean) / std. */
static void channel_norm(const ganfw_transform *tf, int32_t k, double *mean, double *std) {
  if (tf->unit_range) {
    *mean = 0, *std = 1;
  } else if (tf->norm_n == 0) {
    *mean = 0.5, *std = 0.5;
  } else {
    const int32_t j = tf->norm_n == 1 ? 0 : k;
    *mean = tf->mean[j], *std = tf->std[j];
  }
}

/* The affine map per channel from the generator's value range to the classifier's (each
 * from its run's data section): x_c = x_g * scale[k] + offset[k]. Returns 0 when it is the
 * identity (the same normalisation on both sides, the common case). */
static int input_map(const side *g, const side *c, int32_t channels, double *scale,
                     double *offset) {
  int differs = 0;
  for (int32_t k = 0; k < channels; k++) {
    double mg, sg, mc, sc;
    channel_norm(&g->s->transform, k, &mg, &sg);
    channel_norm(&c->s->transform, k, &mc, &sc);
    scale[k] = sg / sc; /* x01 = x_g * sg + mg; x_c = (x01 - mc) / sc */
    offset[k] = (mg - mc) / sc;
    differs |= scale[k] != 1.0 || offset[k] != 0.0;
  }
  return differs;
}

/* The features f ([m, ...], any float dtype) added to *fs, which is initialised with their
 * row size on the first call; `buf` is host scratch grown as needed. */
static ganfw_status add_features(ganfw_fid_stats *fs, ganfw_tensor *f, float **buf, int64_t *cap) {
  const int64_t rows = f->shape[0], D = rows > 0 ? f->numel / rows : 0;
  ganfw_status st = GANFW_OK;
  if (!fs->dim && (st = ganfw_fid_stats_init(fs, D)) != GANFW_OK) return st;
  if (D != fs->dim)
    return ganfw_error_set(GANFW_ERR_INTERNAL, "features of %lld values per image, then %lld",
                           (long long)fs->dim, (long long)D);
  if (f->numel > *cap) {
    float *nb = realloc(*buf, (size_t)f->numel * sizeof *nb);
    if (!nb) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    *buf = nb;
    *cap = f->numel;
  }
  ganfw_tensor *f32 = ganfw_tensor_as_dtype(f, GANFW_DTYPE_F32, GANFW_MEM_ACTIVATION);
  st = f32 ? ganfw_tensor_to_host(f32, *buf, f->numel * (int64_t)sizeof **buf) : ganfw_error_code();
  ganfw_tensor_destroy(f32);
  return st == GANFW_OK ? ganfw_fid_stats_add(fs, *buf, rows) : st;
}

/* What one batch of generated images needs besides its buffers: the noise seed, the value
 * map into the classifier's range (map NULL: none), and the feature node and statistics
 * (fs NULL: no Frechet distance). */
typedef struct fake_batch {
  uint64_t seed;
  const int32_t *labels; /* the batch's classes (conditional generator) or NULL */
  const double *scale, *offset;
  int32_t feature_node;
  ganfw_fid_stats *fs;
  float **fbuf;
  int64_t *fcap;
} fake_batch;

/* One batch of m generated images through the classifier: logits[m*K] on the host, and
 * their features added to fb->fs. */
static ganfw_status classify_batch(side *g, side *c, int64_t m, const fake_batch *fb, float *img,
                                   int64_t img_bytes, float *logits, int64_t logit_bytes) {
  ganfw_tensor *z = ganfw_gan_fixed_noise(g->s, m, fb->seed);
  ganfw_tensor *y = NULL, *x = NULL, *out = NULL, *out32 = NULL, *feat = NULL;
  ganfw_status st = z ? ganfw_gan_generate(g->s, z, fb->labels, &y) : ganfw_error_code();
  if (st == GANFW_OK) st = ganfw_tensor_to_host(y, img, img_bytes);
  if (st == GANFW_OK && fb->scale) {
    const int64_t C = y->shape[1], per = y->numel / (m * C);
    for (int64_t i = 0; i < m * C; i++)
      for (int64_t p = 0; p < per; p++)
        img[i * per + p] = (float)(img[i * per + p] * fb->scale[i % C] + fb->offset[i % C]);
  }
  if (st == GANFW_OK) {
    x = ganfw_tensor_create(c->s->ctx, GANFW_DTYPE_F32, 4, y->shape, GANFW_MEM_DATA, "score_x");
    st = x ? ganfw_tensor_from_host(x, img, img_bytes) : ganfw_error_code();
  }
  if (st == GANFW_OK) /* no-grad */
    st = fb->fs ? ganfw_net_forward_node(c->s->classifier, x, fb->feature_node, &feat, &out)
                : ganfw_net_forward(c->s->classifier, x, NULL, &out);
  if (st == GANFW_OK) {
    out32 = ganfw_tensor_as_dtype(out, GANFW_DTYPE_F32, GANFW_MEM_ACTIVATION);
    st = out32 ? ganfw_tensor_to_host(out32, logits, logit_bytes) : ganfw_error_code();
  }
  if (st == GANFW_OK && fb->fs) st = add_features(fb->fs, feat, fb->fbuf, fb->fcap);
  ganfw_tensor_destroy(feat);
  ganfw_tensor_destroy(out32);
  ganfw_tensor_destroy(out);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(z);
  return st;
}

ganfw_status ganfw_score_feature_node(const ganfw_net *net, const char *what, int32_t *node) {
  const int32_t last = ganfw_net_layer_count(net) - 1;
  const char *type = ganfw_net_layer_type(net, last);
  *node = ganfw_net_layer_input(net, last, 0);
  if (!type || strcmp(type, "linear") != 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: the classifier's last layer %s is a %s, not a linear layer; the "
                           "Frechet distance uses the features a final linear layer reads "
                           "(pass --no-fid to score without it)",
                           what, last >= 0 ? ganfw_net_layer_name(net, last) : "(none)",
                           type ? type : "(none)");
  if (*node < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: the classifier's last layer %s reads the images themselves; "
                           "there are no penultimate features for the Frechet distance (pass "
                           "--no-fid to score without it)",
                           what, ganfw_net_layer_name(net, last));
  return GANFW_OK;
}

/* The reference statistics: the classifier's features of the first `want` images of its
 * test split (want 0: all), B at a time. */
static ganfw_status real_stats(side *c, ganfw_dataset *test, int64_t want, int64_t B, int32_t node,
                               ganfw_fid_stats *fs, float **fbuf, int64_t *fcap) {
  const int64_t size = ganfw_dataset_size(test), n = want > 0 ? want : size;
  if (n > size || n < 2)
    return ganfw_error_set(
        GANFW_ERR_INVALID_ARG, "--fid-real %lld: %s has %lld images; give 2 to %lld (default: all)",
        (long long)want, ganfw_dataset_name(test), (long long)size, (long long)size);
  int32_t C, H, W;
  ganfw_dataset_shape(test, &C, &H, &W);
  const ganfw_data_info *ci = &c->info;
  if (C != ci->channels || H != ci->height || W != ci->width)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s gives [%d,%d,%d] images, the classifier of %s was trained on "
                           "[%d,%d,%d]",
                           ganfw_dataset_name(test), (int)C, (int)H, (int)W, c->ckpt,
                           (int)ci->channels, (int)ci->height, (int)ci->width);
  const int64_t per = (int64_t)C * H * W;
  float *img = malloc((size_t)(B * per) * sizeof *img);
  if (!img) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = GANFW_OK;
  for (int64_t done = 0; st == GANFW_OK && done < n; done += B) {
    const int64_t m = n - done < B ? n - done : B;
    for (int64_t i = 0; st == GANFW_OK && i < m; i++)
      st = ganfw_dataset_get(test, done + i, 0, img + i * per, NULL);
    int64_t shape[4] = {m, C, H, W};
    ganfw_tensor *x = NULL, *feat = NULL;
    if (st == GANFW_OK) {
      x = ganfw_tensor_create(c->s->ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "fid_real");
      st = x ? ganfw_tensor_from_host(x, img, m * per * (int64_t)sizeof *img) : ganfw_error_code();
    }
    if (st == GANFW_OK) st = ganfw_net_forward_node(c->s->classifier, x, node, &feat, NULL);
    if (st == GANFW_OK) st = add_features(fs, feat, fbuf, fcap);
    ganfw_tensor_destroy(feat);
    ganfw_tensor_destroy(x);
  }
  free(img);
  return st == GANFW_OK ? ganfw_fid_stats_finish(fs) : st;
}

/* Softmax of row[0..k) into p (double, max-subtracted). */
static void softmax(const float *row, int32_t k, double *p) {
  double mx = row[0], sum = 0;
  for (int32_t j = 1; j < k; j++)
    if (row[j] > mx) mx = row[j];
  for (int32_t j = 0; j < k; j++) sum += (p[j] = exp((double)row[j] - mx));
  for (int32_t j = 0; j < k; j++) p[j] /= sum;
}

static ganfw_status score(side *g, side *c, const ganfw_score_args *a, ganfw_dataset **test,
                          ganfw_score_result *r) {
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
  const int fid = !a->no_fid;
  double scale[3] = {1, 1, 1}, offset[3] = {0, 0, 0};
  const int remap = gi->channels <= 3 && input_map(g, c, gi->channels, scale, offset);
  fake_batch fb = {.scale = remap ? scale : NULL, .offset = offset};
  ganfw_fid_stats fake = {0}, real = {0};
  float *fbuf = NULL;
  int64_t fcap = 0;
  memset(r, 0, sizeof *r);
  r->classes = K;
  ganfw_status st = GANFW_OK;
  if (fid && n < 2)
    st = ganfw_error_set(GANFW_ERR_INVALID_ARG,
                         "-n %lld: the Frechet distance needs at least 2 generated images (or "
                         "pass --no-fid)",
                         (long long)n);
  ganfw_net_set_train(c->s->classifier, 0, 0);
  if (fid && st == GANFW_OK)
    st = ganfw_score_feature_node(c->s->classifier, c->ckpt, &fb.feature_node);
  if (fid && st == GANFW_OK) { /* first, so that missing test data fails before the work */
    st = ganfw_classifier_open_test_split(c->s, test);
    if (st != GANFW_OK) st = ganfw_error_wrap(st, "the Frechet distance (or pass --no-fid)");
  }
  if (fid && st == GANFW_OK)
    st = real_stats(c, *test, a->fid_real, B, fb.feature_node, &real, &fbuf, &fcap);
  fb.fs = fid ? &fake : NULL;
  fb.fbuf = &fbuf;
  fb.fcap = &fcap;
  float *img = malloc((size_t)(B * per) * sizeof *img);
  float *logits = malloc((size_t)(B * K) * sizeof *logits);
  double *p = malloc((size_t)K * sizeof *p), *mean = calloc((size_t)K, sizeof *mean);
  if (st == GANFW_OK && (!img || !logits || !p || !mean))
    st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  double conf = 0, cond_entropy = 0;
  const int64_t Kg = g->s->n_classes; /* a conditional generator's classes */
  int32_t *labels = Kg ? malloc((size_t)B * sizeof *labels) : NULL;
  int64_t asked[64] = {0}, hit[64] = {0}, hits = 0;
  if (st == GANFW_OK && Kg && !labels) st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK && Kg && Kg != K)
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "the generator is conditional on %lld classes and the classifier %s "
                         "has %d: score it with a classifier of the same data set",
                         (long long)Kg, c->ckpt, (int)K);
  fb.labels = labels;
  for (int64_t done = 0, b = 0; st == GANFW_OK && done < n; done += B, b++) {
    const int64_t m = n - done < B ? n - done : B;
    fb.seed = seed + (uint64_t)b;
    for (int64_t i = 0; labels && i < m; i++) labels[i] = (int32_t)((done + i) % Kg);
    st = classify_batch(g, c, m, &fb, img, m * per * (int64_t)sizeof *img, logits,
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
      if (labels) { /* class-conditional accuracy */
        const int32_t want = labels[i];
        hits += best == want;
        if (want < 64) asked[want]++, hit[want] += best == want;
      }
    }
  }
  ganfw_net_set_train(c->s->classifier, 1, 1);
  free(labels);
  if (Kg && st == GANFW_OK) {
    r->conditional = 1;
    r->class_accuracy = (double)hits / (double)n;
    for (int32_t j = 0; j < 64 && j < K; j++)
      r->per_class_accuracy[j] = asked[j] ? (double)hit[j] / (double)asked[j] : 0;
  }
  if (fid && st == GANFW_OK) st = ganfw_fid_stats_finish(&fake);
  if (fid && st == GANFW_OK) st = ganfw_fid_distance(&fake, &real, &r->fid);
  if (fid && st == GANFW_OK) {
    r->fid_dim = fake.dim;
    r->fid_n_fake = fake.n;
    r->fid_n_real = real.n;
  }
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
  ganfw_fid_stats_free(&fake);
  ganfw_fid_stats_free(&real);
  free(fbuf);
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
  if (st == GANFW_OK)
    st = side_open(g, a->source, a->config, GANFW_MODEL_GAN, "generator", !a->no_ema);
  if (st == GANFW_OK)
    st = side_open(c, a->classifier, NULL, GANFW_MODEL_CLASSIFIER, "classifier", 0);
  if (st == GANFW_OK && a->per_class && !g->s->n_classes)
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "--per-class: the generator of %s is not conditional (no "
                         "model.conditional); drop --per-class",
                         g->ckpt);
  ganfw_dataset *test = NULL;
  if (st == GANFW_OK) st = score(g, c, a, &test, out);
  if (st == GANFW_OK && report) {
    fprintf(report, "generator: %s%s\nclassifier: %s\n", g->ckpt,
            g->ema ? " (its EMA weights, train.ema; --no-ema for the raw ones)" : "", c->ckpt);
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
    if (out->conditional) {
      fprintf(report,
              "class-conditional accuracy: %.6f (image i asked for class i %% %d; the share the "
              "classifier calls that class)\n",
              out->class_accuracy, (int)out->classes);
      for (int32_t j = 0; a->per_class && j < out->classes && j < 64; j++)
        fprintf(report, "  class %d: %.4f\n", (int)j, out->per_class_accuracy[j]);
    }
    if (!a->no_fid) {
      const ganfw_net *net = c->s->classifier;
      const int32_t last = ganfw_net_layer_count(net) - 1;
      fprintf(report,
              "classifier FID: %.6f (Frechet distance of %lld features, %lld generated vs %lld "
              "real images)\n",
              out->fid, (long long)out->fid_dim, (long long)out->fid_n_fake,
              (long long)out->fid_n_real);
      fprintf(report, "  features: the input of the classifier's last linear layer %s\n",
              ganfw_net_layer_name(net, last));
      fprintf(report, "  real: the first %lld images of %s\n", (long long)out->fid_n_real,
              ganfw_dataset_name(test));
      fprintf(report, "  this is on the project's own classifier's features and not comparable to "
                      "Inception-v3 FID figures\n");
    }
  }
  ganfw_dataset_destroy(test);
  if (g) side_close(g);
  if (c) side_close(c);
  free(g);
  free(c);
  return st;
}
