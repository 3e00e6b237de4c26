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

/* Tolerances: the 1e-4 relative, for the scalars, and for each tensor both as
 * ||got - want|| / ||want|| and element by element against a floor of 1e-2 of the tensor's
 * largest value (f32 sums of up to a few thousand products in another order than PyTorch's: a
 * gradient far below the largest one is known to fewer digits). */
#define TOL_REL    1e-4
#define ELEM_FLOOR 1e-2

static double worst_loss, worst_grad, worst_grad_elem, worst_weight;

static double norm_rel(const float *a, const float *b, int64_t n) {
  double d = 0, r = 0;
  for (int64_t k = 0; k < n; k++)
    d += ((double)a[k] - b[k]) * ((double)a[k] - b[k]), r += (double)b[k] * b[k];
  return sqrt(d / fmax(r, 1e-30));
}

static double abs_max(const float *v, int64_t n) {
  double m = 0;
  for (int64_t k = 0; k < n; k++) m = fmax(m, fabs(v[k]));
  return m;
}

/* got (a tensor of n values on the CPU backend) against the reference `key`. */
static void compare_tensor(gt_ref *ref, const char *key, const ganfw_tensor *got, int is_grad) {
  int64_t n = 0;
  const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
  if (!want) return;
  CU_ASSERT_EQUAL_FATAL(n, got->numel);
  const float *g = got->data;
  double e = norm_rel(g, want, n);
  if (e > TOL_REL) printf("\n  %s: differs by %.3g (norm-relative)\n", key, e);
  CU_ASSERT(e <= TOL_REL);
  if (!is_grad) {
    worst_weight = fmax(worst_weight, e);
    return;
  }
  worst_grad = fmax(worst_grad, e);
  double el = gt_check_close(key, g, want, n, TOL_REL, ELEM_FLOOR * abs_max(want, n));
  worst_grad_elem = fmax(worst_grad_elem, el);
}

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
static void compare_student(gt_ref *ref, ganfw_session *s) {
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
    compare_tensor(ref, key, buf, 1);
    snprintf(key, sizeof key, "after.student.%s", p->name);
    compare_tensor(ref, key, p->value, 0);
  }
  const char *name = NULL;
  CU_ASSERT_PTR_NULL(opt->vt->state_tensor(opt->self, opt->n_params, &name));
}

/* The student's BatchNorm statistics after a train-mode step (running_mean, running_var,
 * num_batches_tracked) against PyTorch's. */
static void compare_student_buffers(gt_ref *ref, ganfw_net *student) {
  char key[256];
  ganfw_net_buffer b;
  int64_t n = 0;
  for (int64_t i = 0; ganfw_net_buffer_at(student, i, &b); i++, n++) {
    snprintf(key, sizeof key, "after.student.%s", b.name);
    if (b.tensor)
      compare_tensor(ref, key, b.tensor, 0);
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

/* The reported scalar `name` against the reference's. */
static void compare_scalar(gt_ref *ref, ganfw_program *p, const ganfw_program_stats *stats,
                           const char *name) {
  int32_t i = 0;
  while (i < ganfw_program_scalar_count(p) && strcmp(ganfw_program_scalar_name(p, i), name) != 0)
    i++;
  CU_ASSERT_FATAL(i < ganfw_program_scalar_count(p));
  CU_ASSERT_FATAL(stats->reported[i]);
  const double want = gt_ref_scalar(ref, name), got = stats->value[i];
  const double e = fabs(got - want) / fmax(fabs(want), 1e-6);
  if (e > TOL_REL) printf("\n  %s: %.9g vs PyTorch %.9g\n", name, got, want);
  CU_ASSERT(e <= TOL_REL);
  worst_loss = fmax(worst_loss, e);
}

static void test_distill_step_matches_pytorch(void) {
  const char *name = "trainer_distill_step";
  worst_loss = worst_grad = worst_grad_elem = worst_weight = 0;
  gt_ref *ref = gt_ref_open(name);
  if (!ref) return;
  char dir[] = "/tmp/ganfw_refkd_XXXXXX", path[256], ref_path[4096];
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/distill.yaml", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(distill_config, f);
  fclose(f);
  ganfw_data_info info = {
      .struct_size = sizeof info, .channels = 1, .height = 28, .width = 28, .num_classes = 10};
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_program *p = NULL;
  ganfw_status st = ganfw_run_open(path, NULL, 0, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 0, &info, &s);
  unlink(path);
  rmdir(dir);
  snprintf(ref_path, sizeof ref_path, "%s/%s.safetensors", getenv("GANFW_REF_DIR"), name);
  if (st == GANFW_OK) st = ganfw_program_load_weights(s, ref_path);
  if (st == GANFW_OK) st = ganfw_program_create(s, &p);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s->trainer_name, "distill");
  ganfw_net *teacher = NULL, *student = NULL;
  check_roles(s, &teacher, &student);

  ganfw_tensor *x = gt_ref_tensor_new(s->ctx, ref, "x"), *y = gt_ref_tensor_new(s->ctx, ref, "y");
  ganfw_program_stats stats;
  st = ganfw_program_step(p, x, y, 0, &stats);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);

  compare_scalar(ref, p, &stats, "loss");
  compare_scalar(ref, p, &stats, "ce");
  compare_scalar(ref, p, &stats, "kd");
  compare_student(ref, s);
  compare_student_buffers(ref, student);
  check_teacher_unchanged(ref, teacher);
  printf("\n  %s relative: losses %.2g, gradients %.2g (norm) %.2g (element-wise, floor "
         "1e-2 of the largest), student weights and BatchNorm statistics after the step %.2g "
         "(norm)\n",
         name, worst_loss, worst_grad, worst_grad_elem, worst_weight);

  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(y);
  ganfw_program_destroy(p);
  ganfw_session_close(s);
  ganfw_run_close(run);
  gt_ref_close(ref);
}

static CU_TestInfo tests[] = {
    {"a distill step (alpha 0.7, T 3, eval-mode teacher) matches PyTorch",
     test_distill_step_matches_pytorch},
    CU_TEST_INFO_NULL,
};

GT_MAIN("distill trainer step vs PyTorch", tests)
