/* Learning-rate schedules, applied by the core to every optimizer (GAN and classifier): the
 * rate of optimizer step k (0-based: the number of steps taken before it) is a pure
 * function of k, the optimizer's base rate and the run's total steps, so a resumed run
 * continues the schedule exactly. Semantics are PyTorch's schedulers stepped once per
 * optimizer step (see docs/CONFIG.md, `optim.schedule`). */
#ifndef GANFW_SCHEDULE_H
#define GANFW_SCHEDULE_H

#include <stdint.h>

#include "config/config.h"

/* Schedule kinds, stored as int32_t. */
enum {
  GANFW_SCHEDULE_CONSTANT = 0, /* the base rate */
  GANFW_SCHEDULE_STEP = 1,     /* StepLR: base * gamma^floor(k / step_size) */
  GANFW_SCHEDULE_COSINE = 2,   /* CosineAnnealingLR(T_max = total, eta_min = min_lr) */
  GANFW_SCHEDULE_COUNT
};

typedef struct ganfw_schedule {
  int32_t kind;         /* GANFW_SCHEDULE_* */
  int64_t step_size;    /* step: optimizer steps between decays (> 0) */
  double gamma;         /* step: the decay factor */
  double min_lr;        /* cosine: the rate reached at the last step (eta_min) */
  int64_t warmup_steps; /* 0: none; else steps k < W use base * (k+1) / (W+1), and the
                           schedule above starts after them (SequentialLR at milestone W) */
} ganfw_schedule;

/* Reads optim.schedule, step_size, gamma (step), min_lr (cosine) and warmup_steps from the
 * `optim` section (may be NULL: constant). Keys of another schedule kind are declared to
 * `c` so that one left in the file is reported as "not used by this configuration".
 * GANFW_ERR_CONFIG naming the key for an unknown kind or a value out of range. */
ganfw_status ganfw_schedule_read(ganfw_config *c, const ganfw_cfg *optim, ganfw_schedule *out);

/* The learning rate of optimizer step `step` (0-based) of a run of `total_steps` steps for
 * an optimizer whose configured rate is `base_lr`. */
double ganfw_schedule_lr(const ganfw_schedule *s, double base_lr, int64_t step,
                         int64_t total_steps);

/* "constant", "step", "cosine"; "unknown" outside the range. */
const char *ganfw_schedule_name(int32_t kind);

#endif
