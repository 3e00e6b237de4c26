/* What the one-step tests of trainer plugins against PyTorch share (tests/test_ref_trainer_
 * *.c): a session built from a config text with the reference file's weights, and the
 * comparisons of scalars and tensors at the 1e-4 relative, with the worst error of
 * each kind kept for the suite's summary line. */
#ifndef GANFW_TEST_REF_TRAINER_H
#define GANFW_TEST_REF_TRAINER_H

#include "testutil.h"
#include "train/program.h"
#include "train/run.h"

/* Tolerances: 1e-4 relative for the scalars, and for each tensor both as ||got - want|| /
 * ||want|| and element by element against a floor of 1e-2 of the tensor's largest value
 * (f32 sums of up to a few thousand products in another order than PyTorch's: a gradient far
 * below the largest one is known to fewer digits). */
#define RT_TOL_REL    1e-4
#define RT_ELEM_FLOOR 1e-2

typedef struct rt_step {
  gt_ref *ref;
  ganfw_run *run;
  ganfw_session *s;
  ganfw_program *p;
  double worst_loss, worst_grad, worst_grad_elem, worst_weight;
} rt_step;

/* The reference `name` (<GANFW_REF_DIR>/<name>.safetensors), a run of `config` (written to a
 * temporary file) with a session of data shape *info (no data set), every net's weights
 * from the reference and the trainer's program. Returns 0 when the reference is absent
 * (the test is skipped); a failure to build any of it fails the test. */
int rt_open(rt_step *t, const char *name, const char *config, const ganfw_data_info *info);
void rt_close(rt_step *t);

/* got (a tensor on the CPU backend) against the reference `key`: a gradient (is_grad) also
 * element by element. */
void rt_compare_tensor(rt_step *t, const char *key, const ganfw_tensor *got, int is_grad);
/* The program's reported scalar `name` against the reference's. */
void rt_compare_scalar(rt_step *t, const ganfw_program_stats *stats, const char *name);
/* The summary line: the worst errors, `after` naming what was compared after the step. */
void rt_report(const rt_step *t, const char *name, const char *after);

#endif
