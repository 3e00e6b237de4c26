/* One step of the distill trainer plugin (plugins/trainers/distill, nets from model.nets of
 * the cnn model) against PyTorch's (tests/ref/gen_trainer_distill.py), through the core's
 * trainer program as `ganfw CONFIG` runs it: from the same weights, batch and labels, the
 * reported scalars (loss, ce, kd), every student parameter gradient, the student's weights
 * and BatchNorm statistics after the update; the teacher runs in eval mode (its running
 * statistics, which the reference sets far from (0, 1)), has no optimizer and no state in
 * one, and keeps its weights and buffers bit for bit. alpha 0.7 and T 3 are not the
 * plugin's defaults, so the config's values must reach it. The gradients are read back from
 * SGD's momentum buffers, which hold the gradient itself after the first step (PyTorch's
 * torch.clone(d_p)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "nn/net.h"
#include "runtime/tensor.h"
#include "ref_trainer.h"
#include "testutil.h"
#include "train/program.h"
#include "train/session.h"
#include "train/train_program.h"

/* The nets and trainer of gen_trainer_distill.py: 1x28x28 images, 10 classes, batch 8. */
static const char distill_config[] =
    "seed: 1\n"
    "device: {type: cpu, threads: 2}\n"
    "model:\n"
    "  nets:\n"
    "    teacher: {plugin: cnn, blocks: [{channels: 4, kernel: 3, pool: max}], linear: []}\n"
    "    student: {plugin: cnn, blocks: [{channels: 3, kernel: 3, pool: max}], linear: []}\n"
    "trainer: {plugin: distill, alpha: 0.7, temperature: 3}\n"
    "optim: {plugin: sgd, lr: 0.01, momentum: 0.9}\n"
    "train: {batch_size: 8, max_steps: 1}\n";

/* got (n values) bit for bit the reference `key` (f32 in the file, so exact). */
static void expect_unchanged(gt_ref *ref, const char *key, const ganfw_tensor *got) {
  int64_t n = 0;
  const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
  if (!want) return;
  CU_ASSERT_EQUAL_FATAL(n, got->numel);
  const int same = memcmp(got->data, want, (size_t)n * sizeof *want) == 0;
  if (!same) printf("\n  %s: the frozen teacher's tensor moved in the step\n", key);
  CU_ASSERT(same);
}

/* The session's nets by role: the teacher frozen and without an optimizer, the student
 * trained by the only one. */
static void check_roles(ganfw_session *s, ganfw_net **teacher, ganfw_net **student) {
  CU_ASSERT_EQUAL_FATAL(s->n_nets, 2);
  CU_ASSERT_STRING_EQUAL_FATAL(s->nets[0].role, "teacher");
  CU_ASSERT_STRING_EQUAL_FATAL(s->nets[1].role, "student");
  CU_ASSERT(s->nets[0].frozen);
  CU_ASSERT_EQUAL(s->nets[0].optim, -1);
  CU_ASSERT(!s->nets[1].frozen);
  CU_ASSERT_EQUAL_FATAL(s->n_optim, 1);
  CU_ASSERT_STRING_EQUAL(s->optim[0].role, "student");
  CU_ASSERT_PTR_EQUAL(s->optim[0].net, s->nets[1].net);
  *teacher = s->nets[0].net;
  *student = s->nets[1].net;
}

/* The student's trainable parameters, each once: its gradient (the momentum buffer
 * "<param>.momentum_buffer") and its value after the step; the optimizer holds no other
 * state (none for the teacher's parameters). */
static void compare_student(rt_step *t, ganfw_session *s) {
  char key[256];
  const ganfw_session_optim *opt = &s->optim[0];
  CU_ASSERT_PTR_NOT_NULL_FATAL(opt->vt->state_tensor);
  /* conv weight, BatchNorm weight and bias, linear weight and bias */
  CU_ASSERT_EQUAL_FATAL(opt->n_params, 5);
  for (int64_t i = 0; i < opt->n_params; i++) {
    const ganfw_param *p = &opt->params[i];
    const char *name = NULL;
    ganfw_tensor *buf = opt->vt->state_tensor(opt->self, i, &name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    char want_name[200];
    snprintf(want_name, sizeof want_name, "%s.momentum_buffer", p->name);
    CU_ASSERT_STRING_EQUAL_FATAL(name, want_name);
    snprintf(key, sizeof key, "grad.student.%s", p->name);
    rt_compare_tensor(t, key, buf, 1);
    snprintf(key, sizeof key, "after.student.%s", p->name);
    rt_compare_tensor(t, key, p->value, 0);
  }
  const char *name = NULL;
  CU_ASSERT_PTR_NULL(opt->vt->state_tensor(opt->self, opt->n_params, &name));
}

/* The student's BatchNorm statistics after a train-mode step (running_mean, running_var,
 * num_batches_tracked) against PyTorch's. */
static void compare_student_buffers(rt_step *t, ganfw_net *student) {
  gt_ref *ref = t->ref;
  char key[256];
  ganfw_net_buffer b;
  int64_t n = 0;
  for (int64_t i = 0; ganfw_net_buffer_at(student, i, &b); i++, n++) {
    snprintf(key, sizeof key, "after.student.%s", b.name);
    if (b.tensor)
      rt_compare_tensor(t, key, b.tensor, 0);
    else
      CU_ASSERT_EQUAL(*b.counter, (int64_t)gt_ref_scalar(ref, key));
  }
  CU_ASSERT_EQUAL(n, 3);
}

/* The teacher's parameters and buffers, as loaded, after the step. */
static void check_teacher_unchanged(gt_ref *ref, ganfw_net *teacher) {
  char key[256];
  const int64_t np = ganfw_net_param_count(teacher);
  CU_ASSERT_EQUAL(np, 5);
  for (int64_t i = 0; i < np; i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(teacher, i, &info), GANFW_OK);
    snprintf(key, sizeof key, "teacher.%s", info.name);
    expect_unchanged(ref, key, info.value);
  }
  ganfw_net_buffer b;
  int64_t n = 0;
  for (int64_t i = 0; ganfw_net_buffer_at(teacher, i, &b); i++, n++) {
    snprintf(key, sizeof key, "teacher.%s", b.name);
    if (b.tensor)
      expect_unchanged(ref, key, b.tensor);
    else
      CU_ASSERT_EQUAL(*b.counter, (int64_t)gt_ref_scalar(ref, key));
  }
  CU_ASSERT_EQUAL(n, 3);
}

static void test_distill_step_matches_pytorch(void) {
  const char *name = "trainer_distill_step";
  ganfw_data_info info = {
      .struct_size = sizeof info, .channels = 1, .height = 28, .width = 28, .num_classes = 10};
  rt_step t;
  if (!rt_open(&t, name, distill_config, &info)) return;
  CU_ASSERT_STRING_EQUAL(t.s->trainer_name, "distill");
  ganfw_net *teacher = NULL, *student = NULL;
  check_roles(t.s, &teacher, &student);

  ganfw_tensor *x = gt_ref_tensor_new(t.s->ctx, t.ref, "x"),
               *y = gt_ref_tensor_new(t.s->ctx, t.ref, "y");
  ganfw_program_stats stats;
  ganfw_status st = ganfw_program_step(t.p, x, y, 0, &stats);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);

  rt_compare_scalar(&t, &stats, "loss");
  rt_compare_scalar(&t, &stats, "ce");
  rt_compare_scalar(&t, &stats, "kd");
  compare_student(&t, t.s);
  compare_student_buffers(&t, student);
  check_teacher_unchanged(t.ref, teacher);
  rt_report(&t, name, "student weights and BatchNorm statistics");

  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(y);
  rt_close(&t);
}

static CU_TestInfo tests[] = {
    {"a distill step (alpha 0.7, T 3, eval-mode teacher) matches PyTorch",
     test_distill_step_matches_pytorch},
    CU_TEST_INFO_NULL,
};

GT_MAIN("distill trainer step vs PyTorch", tests)
