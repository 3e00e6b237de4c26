/* A trainer plugin's step under the core (ganfw/trainer.h): the step calls (forwards,
 * backwards, losses, optimizer steps, scalars) and what the core keeps around them: micro-
 * batches, the loss scale, clipping, the non-finite policy, the strategies' hooks. The
 * loop of `ganfw CONFIG` (train_program.c), the probe (plan, compare) and `ganfw eval` and
 * `sample` drive a trainer through this. */
#ifndef GANFW_PROGRAM_H
#define GANFW_PROGRAM_H

#include "train/session.h"

#define GANFW_PROGRAM_MAX_SCALARS 32
#define GANFW_PROGRAM_MAX_PHASES  8

typedef struct ganfw_program ganfw_program;

/* What one step (or one evaluation) reported. */
typedef struct ganfw_program_stats {
  double value[GANFW_PROGRAM_MAX_SCALARS];     /* the trainer's scalars, in its order (averaged
                                                  over micro-batches, or over the evaluated
                                                  images) */
  int32_t reported[GANFW_PROGRAM_MAX_SCALARS]; /* 1 when the trainer reported it */
  int32_t skipped;                  /* optimizer steps a strategy skipped (inf gradients) */
  int32_t nonfinite;                /* 1 when train.on_nonfinite: skip skipped the step's updates */
  char nonfinite_what[1024];        /* why */
  double grad_norm[GANFW_MAX_NETS]; /* per net, before clipping (train.clip_grad_norm) */
} ganfw_program_stats;

/* The step's working set over a session of family GANFW_MODEL_NETS (borrowed). */
ganfw_status ganfw_program_create(ganfw_session *s, ganfw_program **out);
void ganfw_program_destroy(ganfw_program *p); /* accepts NULL */
ganfw_session *ganfw_program_session(const ganfw_program *p);

/* The trainer's scalars (metrics.csv columns). */
int32_t ganfw_program_scalar_count(const ganfw_program *p);
const char *ganfw_program_scalar_name(const ganfw_program *p, int32_t i);

/* The trainer's phase() calls reach `hook` (session.h), numbered 0, 1, ... in their
 * order in the step. NULL: none. */
void ganfw_program_set_phase_hook(ganfw_program *p, ganfw_phase_hook hook, void *user);
/* The phases seen so far (names owned by the program). */
int32_t ganfw_program_phase_count(const ganfw_program *p);
const char *ganfw_program_phase_name(const ganfw_program *p, int32_t phase);

/* The next step updates every trained net whatever train.update_every says: the planner
 * measures a step that runs every phase. */
void ganfw_program_every_phase(ganfw_program *p);

/* One training step on images x [N,C,H,W] and labels (f32 [N,1] class ids, or NULL), both
 * borrowed, `step_index` steps into the run: the trainer's step() once per micro-batch,
 * then the strategies' step_end. A step that runs no backward into any trained net and no
 * optimizer step is an error naming the trainer. */
ganfw_status ganfw_program_step(ganfw_program *p, ganfw_tensor *x, ganfw_tensor *labels,
                                int64_t step_index, ganfw_program_stats *out);

/* The trainer's sample grid for inputs x (and labels, may be NULL), nets in eval mode:
 * *host is a malloc'd f32 [shape[0..4)] copy (the caller frees it), *nrow images a row.
 * GANFW_ERR_UNSUPPORTED when the trainer has no sample(). */
ganfw_status ganfw_program_sample(ganfw_program *p, ganfw_tensor *x, ganfw_tensor *labels,
                                  float **host, int64_t shape[4], int64_t *nrow);

/* 1 when the trainer evaluates (has evaluate()). */
int32_t ganfw_program_evaluates(const ganfw_program *p);
/* The trainer's evaluate() over every image of ds (borrowed), `batch` at a time, nets in
 * eval mode: out->value is each reported scalar's mean over the images; *peak_activation the
 * allocator's activation peak during it (peaks are reset first). */
ganfw_status ganfw_program_evaluate(ganfw_program *p, const ganfw_dataset *ds, int64_t batch,
                                    ganfw_program_stats *out, int64_t *images,
                                    int64_t *peak_activation);

/* The step calls (host->get_extension(GANFW_EXT_STEP)). */
const ganfw_step_api *ganfw_step_api_table(void);

#endif
