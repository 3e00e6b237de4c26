/* What a training run keeps beside its nets' weights, shared by the GAN and classifier
 * trainers: checkpoint metadata (the data shape, the memory strategies' scalars, the run's
 * position) and resuming from `train.resume`. */
#ifndef GANFW_RUN_STATE_H
#define GANFW_RUN_STATE_H

#include "io/checkpoint.h"
#include "data/data.h"
#include "train/session.h"

#define GANFW_MAX_EXTRA 64

/* String metadata for a checkpoint; fixed room, extra entries past it are dropped. */
typedef struct ganfw_extras {
  char keys[GANFW_MAX_EXTRA][128], values[GANFW_MAX_EXTRA][40];
  const char *key_ptr[GANFW_MAX_EXTRA], *value_ptr[GANFW_MAX_EXTRA];
  int32_t n;
} ganfw_extras;

/* Adds key = v printed with fmt (e.g. "%.17g", "%.0f"). */
void ganfw_extras_add(ganfw_extras *e, const char *key, const char *fmt, double v);
/* Adds every memory strategy's scalars as "memory.<plugin>.<name>". */
void ganfw_extras_add_strategies(const ganfw_session *s, ganfw_extras *e);

/* Writes the session's nets[0..n) to `path` with the run's position (step, the loader's
 * epoch and offset, seed, RNG offset), the data shape, the strategies' scalars and the
 * caller's extras (may be NULL). */
ganfw_status ganfw_run_save_checkpoint(ganfw_session *s, const char *path,
                                       const ganfw_ckpt_net *nets, int32_t n,
                                       const ganfw_loader *loader, int64_t step,
                                       const ganfw_extras *extras);

/* Continues from s->train.resume ("latest": the newest checkpoint in ckpt_dir; else a
 * path): loads nets[0..n), restores the seed, RNG offset, strategies' scalars and the
 * loader's position. *meta is the checkpoint's metadata (owned by the caller:
 * ganfw_ckpt_meta_free), or NULL when "latest" found nothing to resume. */
ganfw_status ganfw_run_resume(ganfw_session *s, const char *ckpt_dir, const ganfw_ckpt_net *nets,
                              int32_t n, ganfw_loader *loader, ganfw_ckpt_meta **meta);

/* 1 when a resumed run is already at its last step (`step` >= `total`), saying so in the
 * log: the trainer then trains nothing and ends with 0. */
int32_t ganfw_run_already_done(int64_t step, int64_t total);

/* Seconds on a monotonic clock, for step and phase timings. */
double ganfw_now_s(void);

/* Ctrl-C (SIGINT) or SIGTERM (a batch scheduler, `docker stop`) during training: begin
 * installs handlers that only raise a flag (the loop finishes its step, writes a
 * checkpoint and stops); a second signal while the first is being handled ends the process
 * at once, killed by that signal. end restores the previous handlers.
 * A process that has not ended a grace period after the first signal (a step stuck in a
 * library, an exit that waits for a thread) is ended then, killed by that signal, after a
 * line on stderr: GANFW_STOP_GRACE seconds (default 30, 1..86400) plus three times the
 * longest stretch between two of the loop's asks (ganfw_interrupt_requested, once a step),
 * so that a step and its checkpoint always fit. The grace outlives end: it covers the run's
 * last files and exit too; the next begin, or ganfw_interrupt_disarm, cancels it. */
void ganfw_interrupt_begin(void);
void ganfw_interrupt_end(void);
void ganfw_interrupt_disarm(void);
/* Whether a stop was asked for; the loop asks once a step (see the grace above). */
int32_t ganfw_interrupt_requested(void);
/* The grace in seconds the first signal would get now. */
int32_t ganfw_interrupt_grace_s(void);
/* The signal that asked to stop (SIGINT or SIGTERM), 0 when none since begin. */
int32_t ganfw_interrupt_signal(void);
/* GANFW_ERR_INTERRUPTED with the message a stopped run ends with: the signal, the step,
 * the checkpoint folder and how to continue. */
ganfw_status ganfw_interrupt_error(int64_t step, const char *ckpt_dir);

#endif
