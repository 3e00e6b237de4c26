/* The out-of-tree trainer example end to end: `cmake --install` this build tree into a
 * temporary prefix, build examples/cyclegan (a trainer plugin and its model of four nets)
 * against that prefix alone, and train it 5 steps with the installed ganfw on two generated
 * MNIST-format (IDX) sets of different content, the data set (A: horizontal stripes) and
 * data.other (B: vertical ones). Checks the run's scalars, a checkpoint holding all four
 * nets and their optimizers, the plan's phases, the `ganfw plugins` listing and the errors of
 * a bad config. Each step prints its command and output when it fails; the temporary folder
 * is kept then (or with GANFW_TEST_KEEP=1), and removed when all passed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"
#include "io/safetensors.h"

#define CY_IMAGES   32 /* per set */
#define CY_SIDE     28
#define CY_CHANNELS 4 /* model.channels, d_channels and blocks: not the defaults, so that */
#define CY_D_CH     6 /* the config is seen to reach the plugin */
#define CY_BLOCKS   1
#define CY_STEPS    5
#define CY_BATCH    8

/* --- the steps, each run once and remembered, so that any test can run alone -------------- */

static int ensure_installed(void) {
  static const char *const expected[] = {"/" EX_INSTALL_BINDIR "/ganfw",
                                         "/" EX_INSTALL_LIBDIR "/cmake/ganfw/ganfwConfig.cmake",
                                         "/" EX_INSTALL_INCLUDEDIR "/ganfw/trainer.h",
                                         "/" EX_INSTALL_LIBDIR "/ganfw/plugins/ganfw_adam.so"};
  return ex_ensure_installed(expected, sizeof expected / sizeof expected[0], NULL);
}

/* Configures examples/cyclegan against the prefix (and nothing else) and builds it. */
static int ensure_built(void) {
  static const char *const made[] = {"ganfw_cyclegan.so", "ganfw_cyclegan_nets.so"};
  return ensure_installed() && ex_ensure_built("cyclegan", made, 2);
}

/* root/<name>/train-{images-idx3,labels-idx1}-ubyte: CY_IMAGES 28x28 images in the IDX
 * format of MNIST, labels 0..9. Set A has bright horizontal stripes, set B vertical ones, 4
 * pixels wide at a phase per image, with a little noise: two sets of one shape and different
 * content. */
static int write_set(const char *name, int vertical, uint64_t seed) {
  static unsigned char pixels[CY_IMAGES * CY_SIDE * CY_SIDE], labels[CY_IMAGES];
  uint64_t s = seed;
  for (int i = 0; i < CY_IMAGES; i++) {
    labels[i] = (unsigned char)(i % 10);
    for (int y = 0; y < CY_SIDE; y++)
      for (int x = 0; x < CY_SIDE; x++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const int on = (((vertical ? x : y) + i) / 4) % 2;
        pixels[(i * CY_SIDE + y) * CY_SIDE + x] =
            (unsigned char)((on ? 200 : 20) + (int)((s >> 24) % 40));
      }
  }
  return ex_write_idx(name, pixels, labels, CY_IMAGES, CY_SIDE);
}

static int ensure_data(void) {
  if (ex.data) return ex.data == EX_STEP_OK;
  ex.data = EX_STEP_FAILED;
  if (!write_set("data_a", 0, 0x9e3779b97f4a7c15ull) ||
      !write_set("data_b", 1, 0x2545f4914f6cdd1dull))
    return 0;
  ex.data = EX_STEP_OK;
  return 1;
}

/* A config at `path`: the example's trainer and nets from its build (a path relative to the
 * config), adam, data_a as the data set and, with `other`, data_b as data.other. */
static int write_config(const char *path, int other) {
  FILE *f = fopen(path, "w");
  if (!f) {
    ex_fail("cannot write %s", path);
    return 0;
  }
  char dir[4400];
  fprintf(f, "# Written by tests/test_example_cyclegan.c\n"
             "seed: 1\n"
             "device:\n  type: cpu\n  threads: 2\n"
             "plugin_path: [build]\n"
             "data:\n  dataset: mnist\n  path: ");
  snprintf(dir, sizeof dir, "%s/data_a", ex.root);
  ex_yaml_quoted(f, dir);
  if (other) {
    fprintf(f, "\n  other:\n    dataset: mnist\n    path: ");
    snprintf(dir, sizeof dir, "%s/data_b", ex.root);
    ex_yaml_quoted(f, dir);
  }
  fprintf(f,
          "\nmodel:\n  plugin: cyclegan_nets\n  channels: %d\n  d_channels: %d\n  blocks: %d\n"
          "trainer:\n  plugin: cyclegan\n  lambda_cycle: 5.0\n  lambda_identity: 0.5\n"
          "optim:\n  plugin: adam\n  lr: 2.0e-4\n  betas: [0.5, 0.999]\n"
          "train:\n  batch_size: %d\n  max_steps: %d\n  log_every: 1\n"
          "run:\n  samples: %d\n  sample_nrow: %d\n  out_dir: ",
          CY_CHANNELS, CY_D_CH, CY_BLOCKS, CY_BATCH, CY_STEPS, CY_BATCH, CY_BATCH);
  ex_yaml_quoted(f, ex.out_dir);
  fputc('\n', f);
  return fclose(f) == 0 || (ex_fail("cannot write %s", path), 0);
}

static int ensure_trained(void) {
  if (ex.trained) return ex.trained == EX_STEP_OK;
  ex.trained = EX_STEP_FAILED;
  if (!ensure_built() || !ensure_data() || !write_config(ex.config, 1)) return 0;
  char cmd[16384], log[4400];
  const char *args[] = {ex.config};
  ex_ganfw_command(cmd, sizeof cmd, args, 1);
  if (ex_run_logged("train", cmd, 0, log, sizeof log) != 0) return 0;
  /* Both plugins saw the config's values and the data set's shape. */
  char nets_line[160];
  snprintf(nets_line, sizeof nets_line,
           "cyclegan_nets: channels %d, d_channels %d, blocks %d, images [1,%d,%d], patch map "
           "[1,5,5]",
           CY_CHANNELS, CY_D_CH, CY_BLOCKS, CY_SIDE, CY_SIDE);
  if (!ex_log_has("train", log, nets_line, "cyclegan: lambda_cycle 5, lambda_identity 0.5", NULL))
    return 0;
  ex.trained = EX_STEP_OK;
  return 1;
}

/* --- the tests ---------------------------------------------------------------------------- */

static void test_install(void) {
  CU_ASSERT(ensure_installed());
}

static void test_build_example(void) {
  CU_ASSERT(ensure_built());
}

static void test_train(void) {
  CU_ASSERT(ensure_trained());
}

/* The trainer's scalars and learning rates finite and positive; loss_g adds up its terms:
 * adversarial + 5 * (cycle + 0.5 * identity). */
static int bad_scalars(const double *v) {
  int bad = 0;
  for (int i = 0; i < 11; i++) bad += !(isfinite(v[i]) && v[i] > 0.0);
  const double sum = v[1] + v[2] + 5.0 * (v[3] + 0.5 * v[6]);
  return bad + !(fabs(v[0] - sum) <= 1e-5 * fabs(sum));
}

/* metrics.csv: the trainer's scalars in its order, then the four nets' learning rates, and
 * one row per step (log_every 1) of finite positive losses, the last at CY_STEPS. */
static void test_metrics(void) {
  if (!ensure_trained()) {
    ex_fail("metrics: training did not succeed");
    return;
  }
  ex_check_metrics("step,epoch,loss_g,loss_g_ab,loss_g_ba,loss_cycle,loss_d_a,loss_d_b,loss_idt,"
                   "lr_g_ab,lr_g_ba,lr_d_a,lr_d_b,",
                   11, bad_scalars, "finite, positive and adding up to loss_g", CY_STEPS);
}

/* The final checkpoint holds the four nets under their roles and each one's Adam state, every
 * optimizer stepped CY_STEPS times; the sample grid is there. */
static void test_checkpoint(void) {
  if (!ensure_trained()) {
    ex_fail("checkpoint: training did not succeed");
    return;
  }
  char path[4400];
  snprintf(path, sizeof path, "%s/checkpoints/step_%08d.safetensors", ex.out_dir, CY_STEPS);
  ganfw_st_file *f = NULL;
  if (ganfw_st_open(path, &f) != GANFW_OK) {
    ex_fail("cannot read the checkpoint %s", path);
    return;
  }
  const int64_t ch = CY_CHANNELS, dch = CY_D_CH;
  static const char *const gens[] = {"g_ab", "g_ba"}, *const discs[] = {"d_a", "d_b"};
  struct {
    char name[96];
    int64_t shape[4];
  } want[2 * 6];
  int n = 0;
  for (int r = 0; r < 2; r++) {
    snprintf(want[n].name, sizeof want[n].name, "%s.in.conv.weight", gens[r]);
    memcpy(want[n++].shape, (int64_t[4]){ch, 1, 7, 7}, sizeof want[0].shape);
    snprintf(want[n].name, sizeof want[n].name, "%s.res.0.conv2.weight", gens[r]);
    memcpy(want[n++].shape, (int64_t[4]){2 * ch, 2 * ch, 3, 3}, sizeof want[0].shape);
    snprintf(want[n].name, sizeof want[n].name, "%s.up.conv.weight", gens[r]);
    memcpy(want[n++].shape, (int64_t[4]){2 * ch, ch, 3, 3}, sizeof want[0].shape);
    snprintf(want[n].name, sizeof want[n].name, "%s.out.conv.weight", gens[r]);
    memcpy(want[n++].shape, (int64_t[4]){1, ch, 7, 7}, sizeof want[0].shape);
    snprintf(want[n].name, sizeof want[n].name, "%s.conv2.weight", discs[r]);
    memcpy(want[n++].shape, (int64_t[4]){4 * dch, 2 * dch, 4, 4}, sizeof want[0].shape);
    snprintf(want[n].name, sizeof want[n].name, "%s.out.weight", discs[r]);
    memcpy(want[n++].shape, (int64_t[4]){1, 4 * dch, 4, 4}, sizeof want[0].shape);
  }
  for (int i = 0; i < n; i++) {
    const ganfw_st_tensor *t = ganfw_st_find(f, want[i].name);
    if (!t || t->ndim != 4 || memcmp(t->shape, want[i].shape, sizeof want[i].shape) != 0)
      ex_fail("%s: tensor %s missing or not [%lld,%lld,%lld,%lld]", path, want[i].name,
              (long long)want[i].shape[0], (long long)want[i].shape[1], (long long)want[i].shape[2],
              (long long)want[i].shape[3]);
  }
  /* per role: its parameters, its optimizer's state and step count */
  static const char *const roles[] = {"g_ab", "g_ba", "d_a", "d_b"};
  for (int r = 0; r < 4; r++) {
    char net[32], optim[48], key[64];
    snprintf(net, sizeof net, "%s.", roles[r]);
    snprintf(optim, sizeof optim, "optim.%s.", roles[r]);
    int64_t params = 0, state = 0;
    for (int64_t i = 0; i < ganfw_st_count(f); i++) {
      const char *name = ganfw_st_at(f, i)->name;
      params += strncmp(name, net, strlen(net)) == 0;
      state += strncmp(name, optim, strlen(optim)) == 0;
    }
    snprintf(key, sizeof key, "optim.%s.step", roles[r]);
    const char *step = ganfw_st_metadata(f, key);
    /* g: 7 convs of weight and bias (in, down, 2 per block, up, out); d: 4 */
    const int64_t want_params = r < 2 ? 2 * (4 + 2 * CY_BLOCKS) : 8;
    if (params != want_params || state != 2 * want_params || !step || atoi(step) != CY_STEPS)
      ex_fail("%s: the %s has %lld tensors (want %lld), %lld optimizer state tensors (want "
              "%lld), %s %s (want %d)",
              path, roles[r], (long long)params, (long long)want_params, (long long)state,
              (long long)(2 * want_params), key, step ? step : "absent", CY_STEPS);
  }
  const char *step = ganfw_st_metadata(f, "step");
  if (!step || atoi(step) != CY_STEPS)
    ex_fail("%s: metadata step is %s, not %d", path, step ? step : "absent", CY_STEPS);
  ganfw_st_close(f);

  snprintf(path, sizeof path, "%s/samples/step_%06d.png", ex.out_dir, CY_STEPS);
  if (!ex_file_exists(path)) ex_fail("no sample grid %s", path);
}

/* `ganfw plan` runs the trainer on the meta backend and measures its two phases apart. */
static void test_plan(void) {
  if (!ensure_trained()) {
    ex_fail("plan: training did not succeed");
    return;
  }
  char cmd[16384], log[4400];
  const char *args[] = {"plan", ex.config};
  ex_ganfw_command(cmd, sizeof cmd, args, 2);
  if (ex_run_logged("plan", cmd, 0, log, sizeof log) == 0)
    ex_log_has("plan", log, "G step", "D step", "g_ab.res.0.conv1", "d_b.out", NULL);
}

/* `ganfw plugins --plugin-path <example build>` lists the trainer and the model from there. */
static void test_plugins_listing(void) {
  if (!ensure_built()) {
    ex_fail("plugins: the example was not built");
    return;
  }
  char log[4400], want_trainer[4500], want_model[4500];
  char *text = ex_list_plugins(log, sizeof log);
  if (!text) return;
  snprintf(want_trainer, sizeof want_trainer, "%s/ganfw_cyclegan.so", ex.build);
  snprintf(want_model, sizeof want_model, "%s/ganfw_cyclegan_nets.so", ex.build);
  int trainer = ex_listing_has(text, "trainer", "cyclegan", "1.0.0", want_trainer, 0);
  int model = ex_listing_has(text, "model", "cyclegan_nets", "1.0.0", want_model, 0);
  free(text);
  if (!trainer || !model) {
    ex_fail("ganfw plugins: %s%s", trainer ? "" : "no 'trainer cyclegan 1.0.0' row; ",
            model ? "" : "no 'model cyclegan_nets 1.0.0' row");
    ex_print_file_tail("plugins output", log, 12000);
  }
}

/* Bad configs end in one config error (exit 2) naming the key: no data.other, a negative
 * lambda_cycle, a zero width. */
static void test_bad_config(void) {
  if (!ensure_built() || !ensure_data()) {
    ex_fail("bad config: the example was not built");
    return;
  }
  char no_other[4400];
  snprintf(no_other, sizeof no_other, "%s/no_other.yaml", ex.root);
  if (!write_config(no_other, 0)) return;
  const struct {
    const char *name, *config, *set, *want;
  } cases[] = {
      {"no_other", no_other, NULL, "the config has no data.other"},
      {"bad_lambda", ex.config, "trainer.lambda_cycle=-1", "trainer.lambda_cycle is -1"},
      {"bad_channels", ex.config, "model.channels=0", "model.channels is 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char cmd[16384], log[4400], out_set[4500];
    snprintf(out_set, sizeof out_set, "run.out_dir=%s/out_%s", ex.root, cases[i].name);
    const char *args[] = {cases[i].config, "--set", out_set, "--set", cases[i].set};
    ex_ganfw_command(cmd, sizeof cmd, args, cases[i].set ? 5 : 3);
    if (ex_run_logged(cases[i].name, cmd, 2, log, sizeof log) == 2)
      ex_log_has(cases[i].name, log, "config error", cases[i].want, NULL);
  }
}

static CU_TestInfo tests[] = {{"install", test_install},
                              {"build_example", test_build_example},
                              {"train", test_train},
                              {"metrics", test_metrics},
                              {"checkpoint", test_checkpoint},
                              {"plan", test_plan},
                              {"plugins_listing", test_plugins_listing},
                              {"bad_config", test_bad_config},
                              CU_TEST_INFO_NULL};
int main(void) {
  ex_init("test_example_cyclegan", "ganfw_cyclegan");
  return gt_run("example_cyclegan", tests);
}
