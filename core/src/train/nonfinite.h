/* train.on_nonfinite inside the steps (gan_step.c, classifier_step.c): one check of an
 * optimizer's gradients per step, and, only once a loss or a gradient is known to be NaN or
 * inf, the search for where it started and the message that names step, net and layer. */
#ifndef GANFW_NONFINITE_H
#define GANFW_NONFINITE_H

#include <stddef.h>

#include "train/session.h"

/* An optimizer's gradients as one tensor list (the frozen parameters have none). */
typedef struct ganfw_grad_list {
  ganfw_tensor **t; /* borrowed from the net; the array is owned by the list */
  int64_t n;
} ganfw_grad_list;
ganfw_status ganfw_grad_list_init(ganfw_grad_list *g, const ganfw_session_optim *o);
void ganfw_grad_list_free(ganfw_grad_list *g); /* accepts a zeroed list */
/* *bad = 1 when any gradient holds NaN or inf: one reduction over all of them. */
ganfw_status ganfw_grad_list_nonfinite(ganfw_ctx *ctx, const ganfw_grad_list *g, int32_t *bad);

/* One net of the chain a loss came through, in forward order: its input (the first hop's is
 * given to ganfw_nonfinite_locate, the others are the previous net's output), the Philox
 * offset its forward started at, and what its input is called in the message. */
typedef struct ganfw_nonfinite_hop {
  ganfw_net *net;
  uint64_t rng_offset;
  const char *input; /* "the real batch", "the noise", ... */
} ganfw_nonfinite_hop;

/* Runs the chain again on x with checked forwards (ganfw_net_find_nonfinite) and writes
 * into buf[0..n) where it first went non-finite: "the first non-finite output is layer
 * discriminator.main.0 (conv2d, layer 1 of 12)...", or that the input already was, or that
 * every output was finite. A failure of the search itself is said in buf, not returned:
 * the non-finite value stays the error reported. */
void ganfw_nonfinite_locate(const ganfw_nonfinite_hop *hops, int32_t n_hops, ganfw_tensor *x,
                            char *buf, size_t n);

/* After a backward found NaN or inf gradients of the `role` net whose loss `loss_name`
 * ("loss loss_d", "cross-entropy loss") was `loss`: writes into buf[0..n) which layer backward
 * reached first with them, after found_by ("" or what reported them, e.g. a strategy's message). */
void ganfw_nonfinite_grad_what(ganfw_net *net, const char *role, const char *loss_name, double loss,
                               const char *found_by, char *buf, size_t n);

/* What a step does once `what` (the description: loss, value and where) went non-finite
 * for the `role` net's update: with train.on_nonfinite stop, GANFW_ERR_NUMERIC with the
 * message (the trainer adds the step); with skip, GANFW_OK with `what` copied into
 * note[0..note_n) for the trainer's warning (the caller skips the update). */
ganfw_status ganfw_nonfinite_act(const ganfw_session *s, const char *role, const char *what,
                                 char *note, size_t note_n);

/* Before a checkpoint is written: GANFW_ERR_NUMERIC naming the net and layer when a
 * parameter or BatchNorm running statistic of a net holds NaN or inf, so that no
 * checkpoint of non-finite weights replaces the good ones. */
ganfw_status ganfw_nonfinite_check_weights(const ganfw_session *s, int64_t step);

/* The trainers' count of steps whose update train.on_nonfinite: skip skipped. */
typedef struct ganfw_nonfinite_count {
  int64_t total;    /* this run */
  int64_t in_a_row; /* up to the last step */
} ganfw_nonfinite_count;
/* After step `step` (1-based): `skipped` names what was skipped ("the discriminator's
 * update", ...) or is NULL for a step without a skip. A skip is counted and logged as a
 * warning with `what`; train.max_nonfinite_skips in a row stop the run with
 * GANFW_ERR_NUMERIC. */
ganfw_status ganfw_nonfinite_after_step(const ganfw_session *s, int64_t step, const char *skipped,
                                        const char *what, ganfw_nonfinite_count *count);

#endif
