/* The one training loop of `ganfw CONFIG`, around any trainer: the built-in `gan`
 * (train_gan.c) and `classifier` (train_classifier.c), and the trainer plugins
 * (train_program.c). The loop owns what every run does the same way: the run folder, the
 * loader and the batch, the learning-rate schedule, the step count, logging cadence and the
 * progress line, metrics.csv and eval.csv, the non-finite policy's count, sample grids,
 * checkpoints and resume, Ctrl-C and SIGTERM, data-parallel agreement and memory.json. A
 * trainer says what one step does, which columns it reports and which nets a checkpoint
 * holds, through a ganfw_loop_trainer. */
#ifndef GANFW_LOOP_H
#define GANFW_LOOP_H

#include "base/file.h"
#include "io/checkpoint.h"
#include "train/outputs.h"
#include "train/run_state.h"
#include "train/session.h"

/* A running loop, as a trainer's hooks see it. */
#define GANFW_LOOP_MAX_COLUMNS 64

struct ganfw_loop_trainer;

typedef struct ganfw_loop {
  ganfw_session *s;
  const struct ganfw_loop_trainer *t;
  void *self; /* the trainer's working set (its open()) */
  ganfw_loader *loader;
  ganfw_dataset *test; /* the test split a trainer with evaluate() opened, else NULL */
  ganfw_tensor *x;     /* the batch [b, C, H, W] (this rank's rows), f32 */
  float *host_x;       /* its staging (page-locked on CUDA when x_pinned) */
  int32_t *host_y;     /* the batch's classes, [b]; NULL when the trainer takes none */
  int32_t x_pinned, y_pinned;
  int64_t step, total;           /* steps taken, steps of the run */
  ganfw_file_appender *eval_csv; /* open when the trainer evaluates; rank 0 */
  int32_t memory_written;        /* memory.json was written before the last evaluation */
  /* The planner's loop (plan/probe.c): open() leaves out the test split, which only a
   * run's evaluations read. A trainer allocates on the device in open() only what its
   * steps hold (a sample grid's inputs come at the first grid), so the plan is the run's. */
  int32_t planning;
  char ckpt_dir[4096];
} ganfw_loop;

/* What the loop counts that a trainer places among its metrics.csv columns. */
typedef struct ganfw_loop_row {
  int64_t nonfinite_skips; /* steps train.on_nonfinite: skip skipped, this run */
  double comm_seconds;     /* the last step's time in collectives (data-parallel) */
} ganfw_loop_row;

/* What compare shows of a step. */
typedef struct ganfw_step_report {
  double loss_d, loss_g;        /* a GAN's */
  double loss, accuracy;        /* a classifier's */
  int64_t skipped_d, skipped_g; /* optimizer steps a strategy skipped: a GAN's D and G;
                                   any other trainer's are in skipped_g */
  char scalars[160];            /* a trainer plugin's reported scalars, "name value, ..." */
} ganfw_step_report;

/* What one step tells the loop. */
typedef struct ganfw_loop_step {
  const char *nonfinite; /* "the update was", ... when train.on_nonfinite: skip skipped it */
  const char *what;      /* why (the loss or layer), with nonfinite */
} ganfw_loop_step;

typedef struct ganfw_loop_trainer {
  const char *name; /* "gan", "classifier", a plugin's */
  /* The working set, in the order the planner allocates it: the trainer's own state, then
   * the batch (ganfw_loop_open_batch), then its other inputs. Opens L->test when it
   * evaluates. */
  ganfw_status (*open)(ganfw_loop *L, void **self);
  void (*close)(void *self); /* accepts NULL */
  /* metrics.csv: the trainer's columns (comma-separated) before "allocated,reserved,
   * step_seconds" (tail 0) and after them (tail 1, which has the loop's nonfinite_skips and
   * comm_seconds where the trainer puts them); row() gives the values of the same columns
   * and returns how many (GANFW_LOOP_MAX_COLUMNS at most). */
  void (*columns)(void *self, int32_t tail, char *buf, size_t cap);
  int32_t (*row)(void *self, int32_t tail, const ganfw_loop_row *common, double *row);
  void (*progress)(void *self, char *text, size_t cap); /* the last step, for the progress line */
  /* One step on the batch in L->x (uploaded) and L->host_y, `L->step` steps into the run. */
  ganfw_status (*step)(void *self, ganfw_loop *L, const ganfw_batch_info *bi, ganfw_loop_step *out);
  /* The nets a checkpoint holds (at most GANFW_MAX_NETS + 1) and its extras (may be NULL). */
  int32_t (*ckpt_nets)(void *self, ganfw_ckpt_net *nets);
  void (*ckpt_extras)(void *self, ganfw_extras *e);
  void (*resumed)(void *self, const ganfw_ckpt_meta *meta); /* may be NULL */
  /* Optional: eval.csv's header, and one evaluation on L->test after L->step steps,
   * `epochs` into training (appending to L->eval_csv). */
  void (*eval_columns)(void *self, char *buf, size_t cap);
  ganfw_status (*evaluate)(void *self, ganfw_loop *L, double epochs);
  /* Optional: the sample grid of the step, written to the PNG `path`. */
  ganfw_status (*samples)(void *self, ganfw_loop *L, const char *path);
  /* Optional: the start line's words after the batch size ("%lld training and ...") and the
   * end line's after "done in N s" (": best ..."). */
  void (*describe)(void *self, ganfw_loop *L, char *buf, size_t cap);
  void (*finished)(void *self, char *buf, size_t cap);
  /* For the planner: the step's phases reported to `hook` (NULL: none; a trainer without
   * this hook is one phase), the next step made one that runs every phase (a GAN's G half
   * on a train.d_steps_per_g_step ratio; may be NULL), and the last step's report. */
  void (*set_phase_hook)(void *self, ganfw_phase_hook hook, void *user);
  void (*every_phase)(void *self);
  void (*report)(void *self, ganfw_step_report *out);
  /* The end of the non-finite warning: "skipped an update", ... */
  const char *skipped_words;
  /* Steps in an epoch: the loader's batches (the GAN's, which skips a short last one
   * without counting it) when 1, else the data set's full batches. */
  int32_t loader_epoch;
  int32_t samples_dir; /* 1: the run folder has samples/ */
} ganfw_loop_trainer;

/* The batch tensor and its staging (this rank's rows), with the classes' staging when
 * `labels` (the loader then fills L->host_y). */
ganfw_status ganfw_loop_open_batch(ganfw_loop *L, int32_t labels);

/* Frees what ganfw_loop_open_batch and the trainer's open() made, and the loader and the
 * test split; accepts a loop that opened nothing. */
void ganfw_loop_close(ganfw_loop *L);

/* A full checkpoint at `path` (weights, optimizer state, position, the trainer's extras
 * and `more`, which may be NULL), written by rank 0 with a sharded optimizer's state
 * gathered first; every rank returns the outcome. */
ganfw_status ganfw_loop_save(ganfw_loop *L, const char *path, const ganfw_extras *more);

/* The built-in trainers and the one for trainer plugins. */
extern const ganfw_loop_trainer ganfw_gan_trainer, ganfw_classifier_trainer, ganfw_program_trainer;

/* The trainer of a session: its trainer plugin, or its model family's built-in one. */
const ganfw_loop_trainer *ganfw_session_trainer(const ganfw_session *s);

/* The whole training run of `ganfw CONFIG` for a session, with its trainer. */
ganfw_status ganfw_train(ganfw_session *s);

#endif
