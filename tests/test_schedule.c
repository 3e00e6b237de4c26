/* Learning-rate schedules (core/src/train/schedule.c): the rate of each step against values
 * worked out here from the formulas in docs/CONFIG.md, reading the optim.schedule keys
 * (defaults, the keys each kind reads, errors naming the key). PyTorch's schedulers are
 * compared in test_ref_schedule.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "base/error.h"
#include "train/schedule.h"
#include "testutil.h"

#define EQ(a, b) CU_ASSERT(fabs((a) - (b)) <= 1e-12 * fmax(1.0, fabs(b)))

static void test_constant(void) {
  ganfw_schedule s = {.kind = GANFW_SCHEDULE_CONSTANT};
  for (int64_t k = 0; k < 100; k += 7) EQ(ganfw_schedule_lr(&s, 0.3, k, 100), 0.3);
  EQ(ganfw_schedule_lr(&s, 0.3, 1000, 100), 0.3); /* past the end: unchanged */
}

static void test_step(void) {
  ganfw_schedule s = {.kind = GANFW_SCHEDULE_STEP, .step_size = 10, .gamma = 0.1};
  EQ(ganfw_schedule_lr(&s, 1.0, 0, 50), 1.0);
  EQ(ganfw_schedule_lr(&s, 1.0, 9, 50), 1.0);
  EQ(ganfw_schedule_lr(&s, 1.0, 10, 50), 0.1);
  EQ(ganfw_schedule_lr(&s, 1.0, 19, 50), 0.1);
  EQ(ganfw_schedule_lr(&s, 1.0, 25, 50), 0.01);
  EQ(ganfw_schedule_lr(&s, 2.0, 30, 50), 2e-3); /* scales with the base rate */
}

static void test_cosine(void) {
  ganfw_schedule s = {.kind = GANFW_SCHEDULE_COSINE, .min_lr = 0.01};
  const double pi = 3.14159265358979323846;
  EQ(ganfw_schedule_lr(&s, 0.1, 0, 40), 0.1);
  EQ(ganfw_schedule_lr(&s, 0.1, 20, 40), 0.01 + 0.09 * 0.5); /* half way */
  EQ(ganfw_schedule_lr(&s, 0.1, 10, 40), 0.01 + 0.09 * (1 + cos(pi / 4)) / 2);
  EQ(ganfw_schedule_lr(&s, 0.1, 40, 40), 0.01);
  EQ(ganfw_schedule_lr(&s, 0.1, 41, 40), 0.01); /* held at min_lr past the end */
  /* monotone decreasing over the run */
  for (int64_t k = 1; k < 40; k++)
    CU_ASSERT(ganfw_schedule_lr(&s, 0.1, k, 40) < ganfw_schedule_lr(&s, 0.1, k - 1, 40));
}

static void test_warmup(void) {
  ganfw_schedule s = {.kind = GANFW_SCHEDULE_COSINE, .warmup_steps = 4};
  /* base * (k+1)/(W+1) for k < W: 0.2, 0.4, 0.6, 0.8 of the base; then cosine from the
   * base over the 16 remaining steps */
  for (int64_t k = 0; k < 4; k++) EQ(ganfw_schedule_lr(&s, 0.5, k, 20), 0.5 * (k + 1) / 5.0);
  EQ(ganfw_schedule_lr(&s, 0.5, 4, 20), 0.5);
  EQ(ganfw_schedule_lr(&s, 0.5, 12, 20), 0.25);
  ganfw_schedule st = {
      .kind = GANFW_SCHEDULE_STEP, .step_size = 3, .gamma = 0.5, .warmup_steps = 2};
  EQ(ganfw_schedule_lr(&st, 1.0, 1, 20), 2.0 / 3.0);
  EQ(ganfw_schedule_lr(&st, 1.0, 2, 20), 1.0);
  EQ(ganfw_schedule_lr(&st, 1.0, 4, 20), 1.0);
  EQ(ganfw_schedule_lr(&st, 1.0, 5, 20), 0.5); /* decays counted from the end of warm-up */
}

/* Reads the schedule of an optim section written as YAML. */
static ganfw_status read(const char *yaml, ganfw_schedule *s, ganfw_config **c) {
  *c = NULL;
  ganfw_status st = ganfw_config_load_string(yaml, "sched.yaml", c);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  return ganfw_schedule_read(*c, ganfw_cfg_child(ganfw_config_root(*c), "optim"), s);
}

static void test_config(void) {
  ganfw_schedule s;
  ganfw_config *c = NULL;
  CU_ASSERT_EQUAL(read("optim: {lr: 0.1}\n", &s, &c), GANFW_OK);
  CU_ASSERT_EQUAL(s.kind, GANFW_SCHEDULE_CONSTANT);
  CU_ASSERT_EQUAL(s.warmup_steps, 0);
  CU_ASSERT_STRING_EQUAL(ganfw_schedule_name(s.kind), "constant");
  ganfw_config_destroy(c);

  CU_ASSERT_EQUAL(read("optim: {schedule: step, step_size: 30, gamma: 0.2}\n", &s, &c), GANFW_OK);
  CU_ASSERT_EQUAL(s.kind, GANFW_SCHEDULE_STEP);
  CU_ASSERT_EQUAL(s.step_size, 30);
  EQ(s.gamma, 0.2);
  ganfw_config_destroy(c);

  CU_ASSERT_EQUAL(read("optim: {schedule: cosine, min_lr: 1e-4, warmup_steps: 100}\n", &s, &c),
                  GANFW_OK);
  CU_ASSERT_EQUAL(s.kind, GANFW_SCHEDULE_COSINE);
  EQ(s.min_lr, 1e-4);
  CU_ASSERT_EQUAL(s.warmup_steps, 100);
  ganfw_config_destroy(c);

  /* gamma belongs to the step schedule: with cosine nobody reads it, and the unread-key
   * check says so */
  CU_ASSERT_EQUAL(read("optim: {schedule: cosine, gamma: 0.5}\n", &s, &c), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "gamma"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "not used by this configuration"));
  ganfw_config_destroy(c);
}

static void expect_error(const char *yaml, const char *want1, const char *want2) {
  ganfw_schedule s;
  ganfw_config *c = NULL;
  ganfw_error_clear();
  CU_ASSERT_EQUAL(read(yaml, &s, &c), GANFW_ERR_CONFIG);
  const char *msg = ganfw_error_message();
  int ok = strstr(msg, want1) && (!want2 || strstr(msg, want2));
  if (!ok) printf("\n  expected '%s'/'%s' in: %s\n", want1, want2 ? want2 : "", msg);
  CU_ASSERT(ok);
  ganfw_config_destroy(c);
}

static void test_errors(void) {
  expect_error("optim: {schedule: cosin}\n", "sched.yaml:1:", "constant, step or cosine");
  expect_error("optim: {schedule: step}\n", "step_size", NULL);
  expect_error("optim: {schedule: step, step_size: 0}\n", "step_size", NULL);
  expect_error("optim: {schedule: step, step_size: 5, gamma: 1.5}\n", "optim.gamma", "(0, 1]");
  expect_error("optim: {schedule: cosine, min_lr: -1}\n", "optim.min_lr", NULL);
  expect_error("optim: {warmup_steps: -3}\n", "warmup_steps", NULL);
  expect_error("optim: {warmup_steps: many}\n", "sched.yaml:1:", "many");
}

static CU_TestInfo tests[] = {
    {"constant", test_constant},
    {"step", test_step},
    {"cosine", test_cosine},
    {"linear_warmup", test_warmup},
    {"config_keys", test_config},
    {"config_errors", test_errors},
    CU_TEST_INFO_NULL,
};

GT_MAIN("lr schedules", tests)
