/* The pix2pix trainer (plugins/trainers/pix2pix) with its model unet_patchgan (plugins/models/
 * pix2pix) end to end on a small synthetic MNIST, inpainting a masked square (data.pair kind
 * masked): three dozen steps lower the test L1 well below that of the first step; metrics.csv,
 * eval.csv, the sample grid (rows of inputs, outputs, targets) and a checkpoint of both nets;
 * `ganfw eval` and `ganfw sample` of the run; the plan on the meta backend equals the measured
 * step, per phase; bad configs end in one error naming the key. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "io/png_io.h"
#include "io/safetensors.h"
#include "testutil.h"
#include "tools/eval.h"
#include "plan/probe.h"
#include "tools/sample.h"

static char root[64];

static const char *path_in(const char *rel) {
  static char buf[8][1024];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int exists(const char *rel) {
  struct stat sb;
  return stat(path_in(rel), &sb) == 0;
}

/* A config of small nets (U-Net of 8, 16 channels; PatchGAN of 2 stride-2 convs), 12 steps
 * an epoch, `extra` lines appended. */
static void write_config(const char *name, const char *pair, const char *extra) {
  FILE *f = fopen(path_in(name), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 5\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist%s}\n"
          "model: {plugin: unet_patchgan, channels: 8, d_channels: 8, d_layers: 2}\n"
          "trainer: {plugin: pix2pix}\n"
          "optim: {plugin: adam, lr: 0.002, betas: [0.5, 0.999]}\n"
          "train: {batch_size: 20, epochs: 3, log_every: 1, checkpoint_every: 12, "
          "sample_every: 12}\n"
          "%s",
          root, pair, extra);
  fclose(f);
}

static const char *const masked = ", pair: {kind: masked, size: 10}";

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_pix2pix_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 240, 100, 11);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* eval.csv: step,epoch,images,loss_d,loss_g,loss_g_gan,loss_l1,l1,... */
enum { EVAL_L1 = 7, METRICS_LOSS_L1 = 5 };

static double last_test_l1(const char *dir) {
  char eval[1100];
  double v[8];
  snprintf(eval, sizeof eval, "%s/eval.csv", path_in(dir));
  int n = gt_csv_column(eval, EVAL_L1, v, 8);
  CU_ASSERT_FATAL(n >= 1);
  return v[n - 1];
}

/* One step against 36: the test L1 of G(x) against y falls; the trainer's scalars, its
 * evaluation per epoch, the grid and a checkpoint of both nets are written. */
static void test_learns(void) {
  char extra[512];
  snprintf(extra, sizeof extra, "run: {out_dir: %s}\n", path_in("one"));
  write_config("one.yaml", masked, extra);
  const char *one_step[] = {"train.max_steps=1"};
  ganfw_status st = gt_train(path_in("one.yaml"), one_step, 1);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  snprintf(extra, sizeof extra, "run: {out_dir: %s}\n", path_in("p2p"));
  write_config("p2p.yaml", masked, extra);
  st = gt_train(path_in("p2p.yaml"), NULL, 0);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);

  const double first = last_test_l1("one"), trained = last_test_l1("p2p");
  printf("\n  test L1 after 1 step %.4f, after 36 steps %.4f\n", first, trained);
  CU_ASSERT(trained > 0 && trained < 0.6 * first);

  char metrics[1100], eval[1100];
  snprintf(metrics, sizeof metrics, "%s/metrics.csv", path_in("p2p"));
  snprintf(eval, sizeof eval, "%s/eval.csv", path_in("p2p"));
  double l1[64], test[8], loss_d[64];
  const int n = gt_csv_column(metrics, METRICS_LOSS_L1, l1, 64);
  CU_ASSERT_EQUAL(n, 36); /* 12 full batches an epoch, every step logged */
  CU_ASSERT(n == 36 && l1[35] < 0.6 * l1[0]);
  CU_ASSERT_EQUAL(gt_csv_column(metrics, 2, loss_d, 64), 36);
  CU_ASSERT(loss_d[0] > 0 && isfinite(loss_d[35]));
  const int ne = gt_csv_column(eval, EVAL_L1, test, 8);
  CU_ASSERT_EQUAL(ne, 3); /* once per epoch */
  CU_ASSERT(ne == 3 && test[2] < test[0]);
  CU_ASSERT(exists("p2p/samples/step_000036.png"));
  CU_ASSERT(exists("p2p/checkpoints/step_00000036.safetensors"));

  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("p2p/checkpoints/step_00000036.safetensors"), &f),
                        GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "generator.down0.conv.weight"));
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "generator.up0.convt.bias"));
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "discriminator.model.0.weight"));
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "optim.discriminator.model.0.weight.exp_avg"));
  const ganfw_st_tensor *w = ganfw_st_find(f, "discriminator.model.0.weight");
  CU_ASSERT(w && w->ndim == 4 && w->shape[1] == 2); /* D sees the pair: 2 x 1 channel */
  ganfw_st_close(f);
}

/* `ganfw eval` prints the test L1 eval.csv has after the last epoch; `ganfw sample -n 5` is
 * a grid of 3 rows (inputs, outputs, targets) of 5 images. */
static void test_eval_and_sample_a_run(void) {
  char text[4096] = "";
  FILE *f = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  ganfw_eval_args ea = {.source = path_in("p2p")};
  ganfw_status st = ganfw_eval(&ea, f);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  rewind(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  const char *l1 = strstr(text, "l1");
  while (l1 && l1 > text && l1[-1] == '_') l1 = strstr(l1 + 2, "l1"); /* not loss_l1 */
  CU_ASSERT_PTR_NOT_NULL_FATAL(l1);
  const double got = strtod(l1 + 2, NULL), want = last_test_l1("p2p");
  CU_ASSERT(got > 0 && fabs(got - want) <= 1e-4 * want);

  ganfw_sample_args sa = {
      .source = path_in("p2p"), .output = path_in("grid.png"), .n = 5, .nrow = 5};
  st = ganfw_sample(&sa);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  int32_t c = 0, h = 0, w = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read_size(path_in("grid.png"), &c, &h, &w), GANFW_OK);
  CU_ASSERT_EQUAL(h, 3 * (28 + 2) + 2);
  CU_ASSERT_EQUAL(w, 5 * (28 + 2) + 2);
}

/* The plan (meta backend) and the measured step agree exactly, per phase. */
static void test_plan_is_exact(void) {
  char extra[512];
  snprintf(extra, sizeof extra, "run: {out_dir: %s}\n", path_in("plan"));
  write_config("plan.yaml", masked, extra);
  ganfw_probe_options opt = {.meta = 1, .warmup = 1, .steps = 1, .real_data = 0};
  ganfw_probe_result plan, real;
  CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(gt_config(path_in("plan.yaml"), NULL, 0), &opt, &plan),
                        GANFW_OK);
  opt.meta = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(gt_config(path_in("plan.yaml"), NULL, 0), &opt, &real),
                        GANFW_OK);
  CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
  CU_ASSERT_EQUAL(plan.n_phases, 2);
  CU_ASSERT_EQUAL(real.n_phases, 2);
  CU_ASSERT_STRING_EQUAL(ganfw_probe_phase_name(&plan, 0), "D step");
  CU_ASSERT_STRING_EQUAL(ganfw_probe_phase_name(&plan, 1), "G step");
  for (int k = 0; k < plan.n_phases && k < real.n_phases; k++)
    CU_ASSERT_EQUAL(plan.phase[k].allocated, real.phase[k].allocated);
  CU_ASSERT(plan.peak_allocated > 0);
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
}

/* A config that must fail with `want` in the message. */
static void expect_error(const char *pair, const char *const *sets, int nsets, const char *want) {
  write_config("bad.yaml", pair, "");
  char out[512];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("bad"));
  const char *all[8] = {out, "train.max_steps=2"};
  for (int i = 0; i < nsets && i < 6; i++) all[i + 2] = sets[i];
  ganfw_status st = gt_train(path_in("bad.yaml"), all, nsets + 2);
  CU_ASSERT_NOT_EQUAL(st, GANFW_OK);
  if (!strstr(ganfw_error_message(), want))
    printf("\n  expected '%s' in: %s\n", want, ganfw_error_message());
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), want));
  ganfw_error_clear();
}

static void test_bad_configs(void) {
  /* no data.pair: nothing to translate from */
  expect_error("", NULL, 0, "data.pair");
  /* a negative weight of the L1 term */
  const char *neg[] = {"trainer.lambda_l1=-1"};
  expect_error(masked, neg, 1, "trainer.lambda_l1 is -1");
  /* 28x28 halves twice (7x7), not three times */
  const char *deep[] = {"model.depth=3"};
  expect_error(masked, deep, 1, "model.depth 3");
  /* a PatchGAN deeper than the image */
  const char *dl[] = {"model.d_layers=5"};
  expect_error(masked, dl, 1, "model.d_layers 5");
  /* an unknown output activation */
  const char *act[] = {"model.output=relu"};
  expect_error(masked, act, 1, "model.output is 'relu'");
}

int main(void) {
  CU_TestInfo tests[] = {
      {"pix2pix lowers the test L1; scalars, eval, grid, checkpoint", test_learns},
      {"ganfw eval and sample of a pix2pix run", test_eval_and_sample_a_run},
      {"the plan equals the measured step", test_plan_is_exact},
      {"bad configs name the key", test_bad_configs},
      CU_TEST_INFO_NULL};
  return gt_run_fixture("trainer_pix2pix", tests, suite_init, suite_clean);
}
