/* Penalties on the discriminator's input gradient (objective.gp, r1, r2, r1_every) end to
 * end on a small synthetic MNIST: training with each, its column in metrics.csv, R1's lazy
 * turns, a resumed WGAN-GP run bitwise the uninterrupted one (the interpolation draws come
 * from the run's Philox stream), the penalty the same with micro-batches (accumulate), runs
 * under amp f16 with loss scaling and with checkpoint segments, the plan equal to the
 * measured step with the penalty's phase, and the errors bad keys get. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "plan/probe.h"
#include "testutil.h"
#include "train/loop.h"
#include "train/session.h"

static char root[64];

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_penalty_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 64, 16, 5) != 0) return -1;
  char text[1024];
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 2}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8, d_norm: layernorm}\n"
           "optim: {plugin: adam, lr: 1.0e-4, betas: [0.0, 0.9]}\n"
           "train: {batch_size: 8, max_steps: 6, d_steps_per_g_step: 2, log_every: 1,"
           " sample_every: 0, checkpoint_every: 3}\n"
           "run: {out_dir: %s/gp}\n",
           root, root);
  FILE *f = fopen(path_in("gan.yaml"), "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f) == 0 ? 0 : -1;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* Trains gan.yaml with the overrides; quiet = 1 keeps a failure's message for the caller. */
static ganfw_status train(const char *const *sets, int nsets, int quiet) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(path_in("gan.yaml"), sets, nsets, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(run->config);
  if (st == GANFW_OK) st = ganfw_train(s);
  if (st != GANFW_OK && !quiet) printf("\n  %s\n", ganfw_error_message());
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

/* The values of metrics.csv's column `name` in run folder dir, into v (count returned). */
static int column(const char *dir, const char *name, double *v, int cap) {
  char path[600], line[4096];
  snprintf(path, sizeof path, "%s/metrics.csv", dir);
  FILE *f = fopen(path, "r");
  if (!f || !fgets(line, sizeof line, f)) {
    if (f) fclose(f);
    return -1;
  }
  fclose(f);
  int col = 0, found = -1;
  for (char *p = strtok(line, ",\n"); p; p = strtok(NULL, ",\n"), col++)
    if (strcmp(p, name) == 0) found = col;
  return found < 0 ? -1 : gt_csv_column(path, found, v, cap);
}

static const char gp_on[] = "objective.plugin=wgan", gp_clip[] = "objective.clip=0",
                  gp_ten[] = "objective.gp=10";

static void test_gp_trains(void) {
  const char *sets[] = {gp_on, gp_clip, gp_ten};
  CU_ASSERT_EQUAL_FATAL(train(sets, 3, 0), GANFW_OK);
  double v[8];
  const int n = column(path_in("gp"), "gp", v, 8);
  CU_ASSERT_EQUAL(n, 6);
  for (int i = 0; i < n; i++) {
    CU_ASSERT(isfinite(v[i]) && v[i] > 0);
  }
  printf("\n    gp column: %.3f .. %.3f", v[0], v[n - 1]);
}

/* 3 steps, stop, resume to 6: the same checkpoint byte for byte. */
static void test_gp_resume_bitwise(void) {
  char out[600];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("gp2"));
  const char *first[] = {gp_on, gp_clip, gp_ten, out, "train.max_steps=3"};
  CU_ASSERT_EQUAL_FATAL(train(first, 5, 0), GANFW_OK);
  const char *second[] = {gp_on, gp_clip, gp_ten, out, "train.resume=latest"};
  CU_ASSERT_EQUAL_FATAL(train(second, 5, 0), GANFW_OK);
  gt_assert_same_checkpoint(path_in("gp/checkpoints/step_00000006.safetensors"),
                            path_in("gp2/checkpoints/step_00000006.safetensors"), NULL, 0);
}

/* r1 and r2 every 2nd D step: their columns hold the penalties on steps 1, 3, 5 and 0
 * between. */
static void test_r1_lazy(void) {
  char out[600];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("r1"));
  const char *sets[] = {"objective.plugin=bce", "objective.r1=1", "objective.r2=0.5",
                        "objective.r1_every=2", out};
  CU_ASSERT_EQUAL_FATAL(train(sets, 5, 0), GANFW_OK);
  const char *cols[2] = {"r1", "r2"};
  for (int c = 0; c < 2; c++) {
    double v[8];
    CU_ASSERT_EQUAL_FATAL(column(path_in("r1"), cols[c], v, 8), 6);
    for (int i = 0; i < 6; i++) {
      CU_ASSERT(i % 2 == 0 ? v[i] > 0 : v[i] == 0);
    }
  }
}

/* Micro-batches: the penalty is a mean over samples, so two halves give the whole batch's
 * value (step 1, before any update; G without BatchNorm, whose batch statistics would
 * differ per half and so would G(z)). */
static void test_accumulate(void) {
  double v[2][8];
  for (int k = 0; k < 2; k++) {
    char out[600];
    snprintf(out, sizeof out, "run.out_dir=%s", path_in(k ? "acc" : "acc1"));
    const char *sets[] = {gp_on,
                          gp_clip,
                          gp_ten,
                          out,
                          "train.max_steps=1",
                          "model.batchnorm=false",
                          "memory=[{plugin: accumulate, steps: 2}]"};
    CU_ASSERT_EQUAL_FATAL(train(sets, k ? 7 : 6, 0), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(column(path_in(k ? "acc" : "acc1"), "gp", v[k], 8), 1);
  }
  printf("\n    gp with 2 micro-batches %.7f, without %.7f", v[1][0], v[0][0]);
  CU_ASSERT(fabs(v[1][0] - v[0][0]) <= 1e-5 * fabs(v[0][0]));
}

/* amp f16 (loss scaling covers the penalty's backward: the first steps overflow the f16
 * input gradient under the initial scale and are skipped until the scale fits, as with
 * PyTorch's GradScaler) and checkpoint segments (the penalty pass keeps every node) train
 * to finite penalties. */
static void test_amp_and_checkpoint(void) {
  const char *memory[2] = {"memory=[{plugin: amp, dtype: f16}]",
                           "memory=[{plugin: checkpoint, segments: 2}]"};
  for (int k = 0; k < 2; k++) {
    char out[600];
    snprintf(out, sizeof out, "run.out_dir=%s", path_in(k ? "ckpt" : "amp"));
    const char *sets[] = {gp_on, gp_clip, gp_ten, out, memory[k], "train.max_steps=10"};
    CU_ASSERT_EQUAL_FATAL(train(sets, 6, 0), GANFW_OK);
    double v[12];
    CU_ASSERT_EQUAL(column(path_in(k ? "ckpt" : "amp"), "gp", v, 12), 10);
    printf("\n    %s: gp at step 10 %.4f", k ? "checkpoint" : "amp f16", v[9]);
    CU_ASSERT(isfinite(v[9]) && v[9] > 0);
  }
}

/* The plan on the meta backend equals the measured step, with the penalty's own phase. */
static void test_plan_matches(void) {
  const char *sets[] = {gp_on, gp_clip, gp_ten};
  const ganfw_run_config *cfg = gt_config(path_in("gan.yaml"), sets, 3);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  ganfw_probe_options o = {.meta = 1, .warmup = 1, .steps = 1};
  ganfw_probe_result plan, real;
  CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(cfg, &o, &plan), GANFW_OK);
  o.meta = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(cfg, &o, &real), GANFW_OK);
  CU_ASSERT_EQUAL(plan.n_phases, 3);
  CU_ASSERT_STRING_EQUAL(ganfw_probe_phase_name(&plan, 2), "D step, penalty");
  CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
  for (int p = 0; p < plan.n_phases; p++) {
    CU_ASSERT_EQUAL(plan.phase[p].allocated, real.phase[p].allocated);
  }
  printf("\n    penalty phase %.2f MiB, D step %.2f MiB", plan.phase[2].allocated / 1048576.0,
         plan.phase[0].allocated / 1048576.0);
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
}

/* Each bad key ends with one message naming it. */
static void test_errors(void) {
  const struct {
    const char *sets[4];
    int n;
    const char *want[2];
  } cases[] = {
      {{"objective.plugin=hinge", "objective.gp=10"}, 2, {"objective.gp", "r1"}},
      {{"objective.plugin=wgan", "objective.gp=10"}, 2, {"objective.gp", "clip: 0"}},
      {{"objective.plugin=wgan", "objective.clip=0.01", "objective.gp=10"}, 3, {"clip: 0", "0.01"}},
      {{"objective.plugin=wgan", "objective.clip=0", "objective.gp=-1"},
       3,
       {"objective.gp", "range"}},
      {{"objective.plugin=bce", "objective.r1=1", "objective.r1_every=0"},
       3,
       {"r1_every", "range"}},
      {{"objective.plugin=bce", "objective.r1_every=4"}, 2, {"r1_every", "set r1"}},
      {{"objective.plugin=bce", "objective.r1=1", "model.d_norm=batchnorm"},
       3,
       {"discriminator.main.3 (batchnorm2d", "objective.r1"}},
      {{"objective.plugin=bce", "objective.r2=-0.5"}, 2, {"objective.r2", "range"}},
      {{"objective.plugin=bce", "model.d_norm=groupnorm"}, 2, {"d_norm", "layernorm"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ganfw_status st = train(cases[i].sets, cases[i].n, 1);
    const char *m = ganfw_error_message();
    printf("\n    %s", m);
    CU_ASSERT_NOT_EQUAL(st, GANFW_OK);
    for (int k = 0; k < 2; k++) {
      if (!strstr(m, cases[i].want[k])) printf("\n      (missing '%s')", cases[i].want[k]);
      CU_ASSERT_PTR_NOT_NULL(strstr(m, cases[i].want[k]));
    }
    ganfw_error_clear();
  }
}

int main(void) {
  CU_TestInfo tests[] = {{"gp trains, column in metrics.csv", test_gp_trains},
                         {"gp resume bitwise", test_gp_resume_bitwise},
                         {"r1 lazy turns", test_r1_lazy},
                         {"gp with micro-batches", test_accumulate},
                         {"gp under amp f16 and checkpoint segments", test_amp_and_checkpoint},
                         {"plan equals the measured step", test_plan_matches},
                         {"bad keys", test_errors},
                         CU_TEST_INFO_NULL};
  return gt_run_fixture("penalty", tests, suite_init, suite_clean);
}
