/* The config's `prune:` section during a run (docs/CONFIG.md, docs/PRUNING.md): which
 * layers get masks, how (l1_unstructured, global_unstructured, ln_structured) and when: once
 * before the first step, or on the gradual schedule of Zhu & Gupta (2017) with the total
 * sparsity s_t = s_f + (s_i - s_f) (1 - (t - t0) / (end - t0))^3 at t0, t0 + dt, ..., end.
 * Every target layer gets its mask (all ones) when the session opens, before the optimizers
 * exist, so that names, checkpoints and the plan stay the same for the whole run. */
#ifndef GANFW_PRUNE_RUN_H
#define GANFW_PRUNE_RUN_H

#include <stdint.h>

#include "base/error.h"

typedef struct ganfw_session ganfw_session;
typedef struct ganfw_prune_run ganfw_prune_run;

enum {
  GANFW_PRUNE_L1_UNSTRUCTURED = 0,
  GANFW_PRUNE_GLOBAL_UNSTRUCTURED = 1,
  GANFW_PRUNE_LN_STRUCTURED = 2,
  GANFW_PRUNE_METHOD_COUNT
};

/* The schedule's total sparsity target s_t at step t (completed steps) for start t0, end,
 * initial s_i and final s_f: s_i before t0, s_f from end on. */
double ganfw_prune_schedule_target(int64_t t0, int64_t end, double s_i, double s_f, int64_t t);
/* 1 when a pruning event happens before the step after `t` completed steps: t0 <= t <= end
 * and (t - t0) is a multiple of `every`, or t == end. */
int32_t ganfw_prune_schedule_due(int64_t t0, int64_t end, int64_t every, int64_t t);

/* Reads the root's `prune:` section (absent: *out NULL, nothing to do) and installs the
 * target layers' masks. After the model is built and model.init_from loaded, before the
 * optimizers. *out is owned by the caller (ganfw_prune_run_destroy). Errors name the key's
 * file:line, or the layer. */
ganfw_status ganfw_prune_run_open(ganfw_session *s, ganfw_prune_run **out);
void ganfw_prune_run_destroy(ganfw_prune_run *p); /* accepts NULL */
/* Before the step that follows `step` completed steps (the training loop, every trainer):
 * prunes when an event is due, logging the sparsity reached. p NULL: nothing. */
ganfw_status ganfw_prune_run_step(ganfw_prune_run *p, int64_t step);
/* After the last step: with prune.remove, makes the masks permanent. p NULL: nothing. */
ganfw_status ganfw_prune_run_finish(ganfw_prune_run *p);

#endif
