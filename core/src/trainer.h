/* The trainers: the GAN loop (D step on real and fake, then G step through D) with its
 * outputs (samples, metrics, checkpoints), and the pieces tools and tests reuse. */
#ifndef GANFW_TRAINER_H
#define GANFW_TRAINER_H

#include "session.h"

typedef struct ganfw_gan ganfw_gan;

typedef struct ganfw_gan_stats {
  double loss_d; /* BCE(D(x), real) + BCE(D(G(z)), fake), as PyTorch's DC-GAN example */
  double loss_g; /* BCE(D(G(z)), 1): the non-saturating G loss */
  double d_x;    /* mean sigmoid(D(x)) */
  double d_g_z1; /* mean sigmoid(D(G(z))) before the D step */
  double d_g_z2; /* ... after it */
  int32_t skipped_d, skipped_g; /* 1 when a strategy skipped that optimizer's step */
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
 * A non-finite loss stops with GANFW_ERR_NUMERIC before any update is applied, unless a
 * strategy scales the loss (then the step is skipped by it). */
ganfw_status ganfw_gan_step(ganfw_gan *g, ganfw_tensor *x, ganfw_tensor *z, ganfw_gan_stats *out);

/* The two halves of ganfw_gan_step, for tools that measure each phase: the D step
 * (micro-batches of x and G(z) under no-grad, D's optimizer) and the G step. ganfw_gan_step
 * also ends the step for the memory strategies (step_end). */
ganfw_status ganfw_gan_d_step(ganfw_gan *g, ganfw_tensor *x, ganfw_tensor *z, ganfw_gan_stats *out);
ganfw_status ganfw_gan_g_step(ganfw_gan *g, ganfw_tensor *z, ganfw_gan_stats *out);

/* Images of G for the noise z, in train mode with batch statistics but without touching
 * the running statistics, under no-grad; *y is owned by the caller. */
ganfw_status ganfw_gan_generate(ganfw_session *s, ganfw_tensor *z, ganfw_tensor **y);

/* Noise of n latent vectors from the fixed-noise stream of `seed` (independent of the
 * training RNG), as a new tensor owned by the caller. */
ganfw_tensor *ganfw_gan_fixed_noise(ganfw_session *s, int64_t n, uint64_t seed);

/* The whole training run of `ganfw CONFIG` for a GAN session. */
ganfw_status ganfw_train_gan(ganfw_session *s);

#endif
