/* Learning-rate schedules (core/src/train/schedule.c) against PyTorch 1.13's schedulers stepped
 * once per optimizer step (tests/ref/gen_schedule.py): StepLR, CosineAnnealingLR, and a
 * LinearLR warm-up joined to cosine, step or nothing by SequentialLR; 60 steps each. */
#include <math.h>
#include <stdio.h>

#include "train/schedule.h"
#include "testutil.h"

#define STEPS   60
#define BASE_LR 0.1
#define W       8
#define TOL     2e-7 /* one or two f32 ulps */

static double worst;

static void check(const char *name, ganfw_schedule s) {
  gt_ref *ref = gt_ref_open("schedule");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  char key[64];
  snprintf(key, sizeof key, "%s.lr", name);
  int64_t n = 0;
  /* The reference is f64; the reader hands it over as f32, so the comparison is at f32's
   * resolution (a rate off by one step or by a factor would be far outside it). */
  const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_EQUAL_FATAL(n, STEPS);
  double err = 0;
  for (int64_t k = 0; k < STEPS; k++) {
    double got = ganfw_schedule_lr(&s, BASE_LR, k, STEPS);
    double e = fabs((float)got - want[k]) / fmax(fabs(want[k]), 1e-12);
    if (e > err) err = e;
    if (e > TOL)
      printf("\n  %s step %lld: got %.9g, PyTorch %.9g\n", name, (long long)k, got,
             (double)want[k]);
  }
  if (err > worst) worst = err;
  CU_ASSERT(err <= TOL);
  gt_ref_close(ref);
}

static void test_step(void) {
  check("step", (ganfw_schedule){.kind = GANFW_SCHEDULE_STEP, .step_size = 7, .gamma = 0.5});
}
static void test_cosine(void) {
  check("cosine", (ganfw_schedule){.kind = GANFW_SCHEDULE_COSINE, .min_lr = 1e-3});
}
static void test_warmup_cosine(void) {
  check("warmup_cosine", (ganfw_schedule){.kind = GANFW_SCHEDULE_COSINE, .warmup_steps = W});
}
static void test_warmup_step(void) {
  check("warmup_step",
        (ganfw_schedule){
            .kind = GANFW_SCHEDULE_STEP, .step_size = 10, .gamma = 0.1, .warmup_steps = W});
}
static void test_warmup_constant(void) {
  check("warmup_constant", (ganfw_schedule){.kind = GANFW_SCHEDULE_CONSTANT, .warmup_steps = W});
}

static void test_report(void) {
  printf("\n  max rel err vs PyTorch schedulers (as f32): %.3e (tol %.0e)\n", worst, TOL);
  CU_ASSERT(worst <= TOL);
}

static CU_TestInfo tests[] = {
    {"step_lr", test_step},
    {"cosine_annealing", test_cosine},
    {"linear_warmup_then_cosine", test_warmup_cosine},
    {"linear_warmup_then_step", test_warmup_step},
    {"linear_warmup_then_constant", test_warmup_constant},
    {"report", test_report},
    CU_TEST_INFO_NULL,
};

GT_MAIN("lr schedules vs PyTorch", tests)
