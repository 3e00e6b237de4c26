/* Learning-rate schedules (see schedule.h): constant, step decay and cosine annealing per
 * optimizer step, after an optional linear warm-up. Pure functions of the step. */
#include "train/schedule.h"

#include <math.h>
#include <string.h>

#include "base/error.h"

static const char *const schedule_names[GANFW_SCHEDULE_COUNT] = {"constant", "step", "cosine"};
_Static_assert(sizeof schedule_names / sizeof schedule_names[0] == GANFW_SCHEDULE_COUNT,
               "one name per schedule kind");

const char *ganfw_schedule_name(int32_t kind) {
  return kind >= 0 && kind < GANFW_SCHEDULE_COUNT ? schedule_names[kind] : "unknown";
}

ganfw_status ganfw_schedule_read(ganfw_config *c, const ganfw_cfg *optim, ganfw_schedule *out) {
  *out = (ganfw_schedule){.kind = GANFW_SCHEDULE_CONSTANT, .gamma = 0.1};
  static const char *const keys[] = {"schedule", "step_size", "gamma", "min_lr", "warmup_steps"};
  if (c) ganfw_config_known_keys(c, "optim", keys, sizeof keys / sizeof keys[0]);
  const char *kind = NULL;
  ganfw_status st = ganfw_cfg_string(optim, "schedule", "constant", &kind);
  if (st != GANFW_OK) return st;
  out->kind = -1;
  for (int32_t k = 0; kind && k < GANFW_SCHEDULE_COUNT; k++)
    if (strcmp(kind, schedule_names[k]) == 0) out->kind = k;
  if (out->kind < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: optim.schedule is '%s'; use constant, step or cosine",
                           ganfw_cfg_where(ganfw_cfg_child(optim, "schedule")), kind ? kind : "");
  if ((st = ganfw_cfg_int(optim, "warmup_steps", 0, &out->warmup_steps)) != GANFW_OK) return st;
  if (out->warmup_steps < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: optim.warmup_steps must be >= 0 (0 = none)",
                           ganfw_cfg_where(ganfw_cfg_child(optim, "warmup_steps")));
  if (out->kind == GANFW_SCHEDULE_STEP) {
    if ((st = ganfw_cfg_int(optim, "step_size", 0, &out->step_size)) ||
        (st = ganfw_cfg_float(optim, "gamma", 0.1, &out->gamma)))
      return st;
    if (out->step_size <= 0)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: optim.schedule step needs optim.step_size, the number of "
                             "optimizer steps between decays (a positive number)",
                             ganfw_cfg_where(optim));
    if (!(out->gamma > 0 && out->gamma <= 1))
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: optim.gamma must be in (0, 1], got %g",
                             ganfw_cfg_where(ganfw_cfg_child(optim, "gamma")), out->gamma);
  } else if (out->kind == GANFW_SCHEDULE_COSINE) {
    if ((st = ganfw_cfg_float(optim, "min_lr", 0.0, &out->min_lr)) != GANFW_OK) return st;
    if (!(out->min_lr >= 0))
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: optim.min_lr must be >= 0",
                             ganfw_cfg_where(ganfw_cfg_child(optim, "min_lr")));
  }
  return GANFW_OK;
}

double ganfw_schedule_lr(const ganfw_schedule *s, double base_lr, int64_t step,
                         int64_t total_steps) {
  if (step < 0) step = 0;
  const int64_t W = s->warmup_steps;
  /* LinearLR(start_factor = 1/(W+1), end_factor = 1, total_iters = W) */
  if (step < W) return base_lr * (double)(step + 1) / (double)(W + 1);
  const int64_t k = step - W; /* SequentialLR: the main schedule restarts at the milestone */
  switch (s->kind) {
  case GANFW_SCHEDULE_STEP:
    return base_lr * pow(s->gamma, (double)(k / s->step_size));
  case GANFW_SCHEDULE_COSINE: {
    /* eta_min + (base - eta_min) * (1 + cos(pi * k / T)) / 2, held at eta_min past T */
    int64_t T = total_steps - W;
    if (T < 1) T = 1;
    if (k >= T) return s->min_lr;
    const double pi = 3.14159265358979323846;
    return s->min_lr + (base_lr - s->min_lr) * (1.0 + cos(pi * (double)k / (double)T)) / 2.0;
  }
  default:
    return base_lr;
  }
}
