/* The built-in trainers' steps: the GAN's (D step on real and fake, then G step through D)
 * and the classifier's (cross-entropy steps, evaluation on a test split), which the one
 * training loop (train/loop.h), the planner and the tools drive. */
#ifndef GANFW_TRAINER_H
#define GANFW_TRAINER_H

#include "train/session.h"

typedef struct ganfw_gan ganfw_gan;

typedef struct ganfw_gan_stats {
  double loss_d; /* BCE(D(x), real) + BCE(D(G(z)), fake), as PyTorch's DC-GAN example */
  double loss_g; /* BCE(D(G(z)), 1): the non-saturating G loss */
  double d_x;    /* mean sigmoid(D(x)) */
  double d_g_z1; /* mean sigmoid(D(G(z))) before the D step */
  double d_g_z2; /* ... after it */
  int32_t skipped_d, skipped_g; /* 1 when a strategy skipped that optimizer's step */
  /* 1 when train.on_nonfinite: skip skipped that net's update (its loss or gradient was NaN
   * or inf); what went non-finite, and where, is in `nonfinite` */
  int32_t nonfinite_d, nonfinite_g;
  char nonfinite[1024];
  int32_t g_stepped;               /* 0 on the D-only steps of train.d_steps_per_g_step */
  double grad_norm_g, grad_norm_d; /* before clipping (train.clip_grad_norm), else 0 */
  /* The penalties on D's input gradient (objective.gp, r1, r2) as added to loss_d's
   * gradient, weights and lazy factor included; r1 and r2 are 0 on the steps between their
   * turns (objective.r1_every). loss_d does not include them. */
  double gp, r1, r2;
} ganfw_gan_stats;

/* The step's working set over a session (borrowed; it must outlive the result). */
ganfw_status ganfw_gan_create(ganfw_session *s, ganfw_gan **out);
void ganfw_gan_destroy(ganfw_gan *g); /* accepts NULL */
/* One training step on the real batch x [N,C,H,W] with noise z [N,nz,1,1] (both
 * borrowed): D on x and on G(z) under no-grad, D's optimizer step; then G(z) with a tape,
 * D forward, backward through D without D's parameter gradients into G, G's optimizer
 * step. With micro-batches (memory strategy accumulate) each half runs on N/M rows at a
 * time, the losses divided by M, and steps once. The losses are multiplied by the
 * strategies' loss scale before backward, and each optimizer step may be skipped by them.
 * Without a strategy that scales the loss, each net's loss and (once per step) gradients
 * are checked: a NaN or inf one stops with GANFW_ERR_NUMERIC before that net's update
 * (train.on_nonfinite: stop; D's update of the step is applied when G's loss fails, as the
 * G step runs through the updated D), or (skip) leaves the net's parameters, optimizer
 * state and BatchNorm running statistics as they were before the step and sets
 * nonfinite_d / nonfinite_g. Either way the message names the loss, the net and the first
 * layer whose output (from a second, checked forward) or gradient went non-finite. With a
 * loss scaler the scaler skips such steps (skipped_d, skipped_g) and the key is not read,
 * unless a strategy reports non-finite gradients as an error (amp with scaler: none). */
ganfw_status ganfw_gan_step(ganfw_gan *g, ganfw_tensor *x, ganfw_tensor *z, ganfw_gan_stats *out);

/* The number of steps taken so far (resume): ganfw_gan_step runs G's half on the steps
 * whose count is a multiple of train.d_steps_per_g_step (n_critic). */
void ganfw_gan_set_step(ganfw_gan *g, int64_t step);

/* ganfw_gan_step reports the start of its halves to `hook` (NULL: none): phase 0 "D step",
 * phase 1 "G step" (on the steps that have one). */
/* The next step runs every penalty (objective.r1 and r2 whatever r1_every says), as a
 * plan's step must to show its phase. */
void ganfw_gan_every_penalty(ganfw_gan *g);
void ganfw_gan_set_phase_hook(ganfw_gan *g, ganfw_phase_hook hook, void *user);

/* Global-norm gradient clipping of optimizer `opt`'s gradients as PyTorch's
 * clip_grad_norm_(params, max_norm): *norm is the L2 norm of all of them together (before
 * clipping); when max_norm / (norm + 1e-6) < 1 every gradient is multiplied by it. */
ganfw_status ganfw_clip_grad_norm(ganfw_session *s, int32_t opt, double max_norm, double *norm);

/* The two halves of ganfw_gan_step, for tools that measure each phase: the D step
 * (micro-batches of x and G(z) under no-grad, D's optimizer) and the G step. ganfw_gan_step
 * also ends the step for the memory strategies (step_end). */
ganfw_status ganfw_gan_d_step(ganfw_gan *g, ganfw_tensor *x, ganfw_tensor *z, ganfw_gan_stats *out);
ganfw_status ganfw_gan_g_step(ganfw_gan *g, ganfw_tensor *z, ganfw_gan_stats *out);

/* Images of G for the noise z (and, for a conditional model, labels[0..N) of them; NULL
 * otherwise), in train mode with batch statistics but without touching
 * the running statistics, under no-grad; *y is f32 whatever the compute dtype, owned by
 * the caller. */
ganfw_status ganfw_gan_generate(ganfw_session *s, ganfw_tensor *z, const int32_t *labels,
                                ganfw_tensor **y);

/* model.conditional: the classes of the next step's batch (labels[0..n), copied); each
 * in [0, num_classes). A conditional model's step fails without them. */
ganfw_status ganfw_gan_set_labels(ganfw_gan *g, const int32_t *labels, int64_t n);

/* Classes for n images laid out one class per row of `nrow` images (image i gets
 * (i / nrow) % classes), or all `cls` when cls >= 0; labels[0..n). */
void ganfw_gan_grid_labels(int32_t *labels, int64_t n, int64_t nrow, int32_t classes, int32_t cls);

/* Noise of n latent vectors from the fixed-noise stream of `seed` (independent of the
 * training RNG), as a new tensor owned by the caller. */
ganfw_tensor *ganfw_gan_fixed_noise(ganfw_session *s, int64_t n, uint64_t seed);

/* --- the classifier (core/src/train/classifier_step.c, core/src/train/train_classifier.c)
 * --------- */
typedef struct ganfw_classifier ganfw_classifier;

typedef struct ganfw_classifier_stats {
  double loss;       /* mean softmax cross-entropy of the batch */
  double accuracy;   /* fraction of the batch predicted right (argmax of the logits) */
  int32_t skipped;   /* 1 when a strategy skipped the optimizer step */
  int32_t nonfinite; /* 1 when train.on_nonfinite: skip skipped the update (see what) */
  char nonfinite_what[1024];
  double grad_norm; /* before clipping (train.clip_grad_norm), else 0 */
} ganfw_classifier_stats;

/* The step's working set over a classifier session (borrowed; it must outlive it). */
ganfw_status ganfw_classifier_create(ganfw_session *s, ganfw_classifier **out);
void ganfw_classifier_destroy(ganfw_classifier *c); /* accepts NULL */
/* One training step on images x [N,C,H,W] with int32 labels [N] (both borrowed): forward
 * with a tape, softmax cross-entropy (times the strategies' loss scale), backward into the
 * parameter gradients, the strategies' after_backward, the optimizer step at
 * s->optim[0].lr, step_end. With micro-batches (accumulate) the batch runs N/M rows at a
 * time with the loss divided by M, and steps once. A non-finite loss or gradient is
 * handled by train.on_nonfinite as in ganfw_gan_step: stop (GANFW_ERR_NUMERIC before the
 * update) or skip (nonfinite set, parameters, optimizer state and BatchNorm statistics as
 * before the step), the message naming the first non-finite layer. */
ganfw_status ganfw_classifier_step(ganfw_classifier *c, ganfw_tensor *x, ganfw_tensor *labels,
                                   ganfw_classifier_stats *out);

/* What an evaluation found. */
typedef struct ganfw_eval_result {
  int64_t n;               /* images evaluated */
  int64_t correct;         /* of them predicted right */
  double loss;             /* mean softmax cross-entropy */
  double accuracy;         /* correct / n */
  int32_t classes;         /* logits per image */
  int64_t *confusion;      /* [classes * classes], row = true label, column = prediction; owned
                              by the result (ganfw_eval_result_free) */
  int64_t peak_activation; /* bytes: the allocator's activation peak during the evaluation */
  double seconds;
} ganfw_eval_result;

/* Evaluates the session's classifier on every image of `ds` (borrowed), `batch` at a time,
 * in eval mode (BatchNorm running statistics, no dropout) and no-grad (nothing is kept for
 * a backward): the allocator's peaks are reset first, so peak_activation is the
 * evaluation's own. The net is back in train mode afterwards. *out is the caller's to free
 * with ganfw_eval_result_free. */
ganfw_status ganfw_classifier_evaluate(ganfw_session *s, const ganfw_dataset *ds, int64_t batch,
                                       ganfw_eval_result *out);
void ganfw_eval_result_free(ganfw_eval_result *r); /* accepts NULL and a zeroed result */

/* The session's test split: data.dataset and data.path opened with train = 0 and the
 * session's transforms without the random flip. *out is owned by the caller. */
ganfw_status ganfw_classifier_open_test_split(ganfw_session *s, ganfw_dataset **out);

#endif
