/* The shared part of the trainer plugins' one-step tests (see ref_trainer.h). */
#include "ref_trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "train/session.h"
#include "train/train_program.h"

int rt_open(rt_step *t, const char *name, const char *config, const ganfw_data_info *info) {
  memset(t, 0, sizeof *t);
  t->ref = gt_ref_open(name);
  if (!t->ref) return 0;
  char dir[] = "/tmp/ganfw_reftrainer_XXXXXX", path[256], ref_path[4096];
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/config.yaml", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(config, f);
  fclose(f);
  ganfw_status st = ganfw_run_open_file(path, NULL, 0, &t->run);
  if (st == GANFW_OK) st = ganfw_session_open(t->run, 0, info, &t->s);
  unlink(path);
  rmdir(dir);
  snprintf(ref_path, sizeof ref_path, "%s/%s.safetensors", getenv("GANFW_REF_DIR"), name);
  if (st == GANFW_OK) st = ganfw_program_load_weights(t->s, ref_path);
  if (st == GANFW_OK) st = ganfw_program_create(t->s, &t->p);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  return 1;
}

void rt_close(rt_step *t) {
  ganfw_program_destroy(t->p);
  ganfw_session_close(t->s);
  ganfw_run_close(t->run);
  gt_ref_close(t->ref);
  memset(t, 0, sizeof *t);
}

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

void rt_compare_tensor(rt_step *t, const char *key, const ganfw_tensor *got, int is_grad) {
  int64_t n = 0;
  const float *want = gt_ref_f32(t->ref, key, &n, NULL, NULL);
  if (!want) return;
  CU_ASSERT_EQUAL_FATAL(n, got->numel);
  const float *g = got->data;
  double e = norm_rel(g, want, n);
  if (e > RT_TOL_REL) printf("\n  %s: differs by %.3g (norm-relative)\n", key, e);
  CU_ASSERT(e <= RT_TOL_REL);
  if (!is_grad) {
    t->worst_weight = fmax(t->worst_weight, e);
    return;
  }
  t->worst_grad = fmax(t->worst_grad, e);
  double el = gt_check_close(key, g, want, n, RT_TOL_REL, RT_ELEM_FLOOR * abs_max(want, n));
  t->worst_grad_elem = fmax(t->worst_grad_elem, el);
}

void rt_compare_scalar(rt_step *t, const ganfw_program_stats *stats, const char *name) {
  int32_t i = 0;
  while (i < ganfw_program_scalar_count(t->p) &&
         strcmp(ganfw_program_scalar_name(t->p, i), name) != 0)
    i++;
  CU_ASSERT_FATAL(i < ganfw_program_scalar_count(t->p));
  CU_ASSERT_FATAL(stats->reported[i]);
  const double want = gt_ref_scalar(t->ref, name), got = stats->value[i];
  const double e = fabs(got - want) / fmax(fabs(want), 1e-6);
  if (e > RT_TOL_REL) printf("\n  %s: %.9g vs PyTorch %.9g\n", name, got, want);
  CU_ASSERT(e <= RT_TOL_REL);
  t->worst_loss = fmax(t->worst_loss, e);
}

void rt_report(const rt_step *t, const char *name, const char *after) {
  printf("\n  %s relative: losses %.2g, gradients %.2g (norm) %.2g (element-wise, floor 1e-2 "
         "of the largest), %s after the step %.2g (norm)\n",
         name, t->worst_loss, t->worst_grad, t->worst_grad_elem, after, t->worst_weight);
}
