/* The residual models end to end: the cnn plugin's stem/stages syntax and the resgan plugin.
 * Config errors name the entry and key (model.stages[i].channels, .stride, .block, ...);
 * ResNet-20's parameter count and state_dict names; a small ResNet and a small residual GAN
 * train on synthetic MNIST through the trainers (the loss falls, the test accuracy is far
 * above chance; the GAN's losses stay finite and bounded), and their checkpoints load into
 * the PyTorch modules of tests/ref/gen_resnet.py with strict=True and reproduce ganfw's
 * eval-mode outputs (tests/check_resnet_torch.py). The values of a step are compared with
 * PyTorch in test_ref_resnet.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "config/config.h"
#include "ganfw/ganfw.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "train/session.h"
#include "train/loop.h"
#include "train/trainer.h"

static char root[64];

static const char *path_in(const char *rel) {
  static char buf[8][1024];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_resnet_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 240, 100, 7);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* --- a model from a config string ----------------------------------------------------------- */

typedef struct fixture {
  ganfw_ctx *ctx;
  ganfw_plugin *plugin;
  const ganfw_model_vt *vt;
  ganfw_config *config;
  void *model;
} fixture;

/* Loads `plugin` and creates it from the model section of `yaml` on data [c,h,w] with
 * `classes` labels; returns create's status (the fixture is always to be closed). */
static ganfw_status fixture_make(fixture *f, const char *plugin, const char *yaml, int32_t c,
                                 int32_t h, int32_t w, int32_t classes) {
  memset(f, 0, sizeof *f);
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 3};
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &f->ctx), GANFW_OK);
  static char dir[1024];
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(dir, sizeof dir, "%s/plugins", build ? build : ".");
  const char *dirs[] = {dir};
  ganfw_status st = ganfw_plugin_load(plugin, GANFW_PLUGIN_MODEL, NULL, dirs, 1, &f->plugin);
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  f->vt = ganfw_plugin_vtable(f->plugin);
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(yaml, "resnet_test.yaml", &f->config), GANFW_OK);
  ganfw_data_info data = {
      .struct_size = sizeof data, .channels = c, .height = h, .width = w, .num_classes = classes};
  ganfw_error_clear();
  return f->vt->create(ganfw_host_table(), f->ctx,
                       ganfw_cfg_child(ganfw_config_root(f->config), "model"), &data, &f->model);
}

static void fixture_close(fixture *f) {
  if (f->model) f->vt->destroy(f->model);
  ganfw_config_destroy(f->config);
  ganfw_plugin_unload(f->plugin);
  ganfw_ctx_destroy(f->ctx);
}

static int msg_has(const char *a, const char *b) {
  const char *msg = ganfw_error_message();
  int ok = strstr(msg, a) && (!b || strstr(msg, b));
  if (!ok) printf("\n  expected '%s'/'%s' in: %s\n", a, b ? b : "", msg);
  return ok;
}

/* create fails with a config error whose message holds want1 (and want2). */
static void expect_error(const char *plugin, const char *yaml, const char *want1,
                         const char *want2) {
  fixture f;
  CU_ASSERT_EQUAL(fixture_make(&f, plugin, yaml, 1, 28, 28, 10), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(f.model);
  CU_ASSERT(msg_has(want1, want2));
  fixture_close(&f);
}

/* --- config errors -------------------------------------------------------------------------- */

static void test_stage_errors(void) {
  expect_error("cnn",
               "model:\n  stem: {channels: 16}\n"
               "  stages:\n    - {channels: 16, blocks: 3}\n    - {blocks: 3, stride: 2}\n",
               "model.stages[1].channels must be set", "e.g. {channels: 32");
  expect_error("cnn",
               "model:\n  stages:\n    - {channels: 16}\n    - {channels: 8}\n"
               "    - {channels: 32, stride: 0}\n",
               "model.stages[2].stride is 0", "from 1 to 64");
  expect_error("cnn", "model:\n  stages: [{channels: 16, stride: -2}]\n",
               "model.stages[0].stride is -2", NULL);
  expect_error("cnn", "model:\n  stages: [{channels: 16}, {channels: 32, block: wide}]\n",
               "model.stages[1].block is 'wide'", "use basic or bottleneck");
  expect_error("cnn", "model:\n  block: resnext\n  stages: [{channels: 16}]\n",
               "model.block is 'resnext'", "basic or bottleneck");
  expect_error("cnn", "model:\n  stages: [{channels: 16, blocks: 0}]\n",
               "model.stages[0].blocks is 0", "1 to 256");
  expect_error("cnn", "model:\n  stages: [{channels: 70000}]\n", "model.stages[0].channels",
               "at most 65536");
  expect_error("cnn", "model:\n  block: bottleneck\n  stages: [{channels: 20000}]\n",
               "model.stages[0].channels is 20000", "4x");
  expect_error("cnn", "model:\n  stages: [{channels: 16, stride: two}]\n",
               "resnet_test.yaml:2:", "stride");
  expect_error("cnn", "model:\n  stages: {channels: 16}\n", "resnet_test.yaml:2:", "stages");
  expect_error("cnn", "model:\n  stem: {kernel: 3}\n  stages: [{channels: 16}]\n",
               "model.stem.channels must be set", NULL);
  expect_error("cnn", "model:\n  stem: {channels: 8, kernel: 31, padding: 0}\n",
               "model.stem: a 28x28 image is too small for kernel 31", NULL);
  expect_error("cnn", "model:\n  stem: {channels: 8}\n  pool: max\n", "model.pool is 'max'",
               "global_avg");
  expect_error("cnn", "model:\n  blocks: [{channels: 8}]\n  stages: [{channels: 16}]\n",
               "model.blocks and model.stem/model.stages", "use one of them");
  char yaml[2048] = "model:\n  stages:\n";
  for (int i = 0; i < 17; i++) strcat(yaml, "    - {channels: 4}\n");
  expect_error("cnn", yaml, "model.stages has 17 entries", "at most 16");
}

/* A misspelt key inside a stage is reported by the config check, with its line. */
static void test_stage_typo(void) {
  fixture f;
  ganfw_status st =
      fixture_make(&f, "cnn", "model:\n  stages:\n    - {channels: 8, blocs: 2}\n", 1, 28, 28, 10);
  if (st == GANFW_OK || st == GANFW_ERR_PLUGIN) { /* read, whether or not the net was built */
    const char *plugin = NULL;
    ganfw_cfg_string(ganfw_cfg_child(ganfw_config_root(f.config), "model"), "plugin", "cnn",
                     &plugin);
    CU_ASSERT_EQUAL(ganfw_config_check_unused(f.config), GANFW_ERR_CONFIG);
    CU_ASSERT(msg_has("resnet_test.yaml:3:", "blocs"));
  } else {
    CU_FAIL("the config was refused before its keys were read");
  }
  fixture_close(&f);
}

static void test_resgan_errors(void) {
  const char *d = "  discriminator:\n    blocks: [{channels: 8}, {channels: 16}]\n";
  char yaml[1024];
  snprintf(yaml, sizeof yaml, "model:\n  generator:\n    base: 6\n    blocks: [{channels: 8}]\n%s",
           d);
  expect_error("resgan", yaml, "model.generator: base 6 doubled by 1 upsampling block",
               "image_size / 2");
  snprintf(yaml, sizeof yaml,
           "model:\n  generator:\n    blocks: [{channels: 8}, {upsample: true}]\n%s", d);
  expect_error("resgan", yaml, "model.generator.blocks[1].channels must be set", NULL);
  /* 28 is not a multiple of 2^3 */
  snprintf(yaml, sizeof yaml,
           "model:\n  generator:\n    blocks: [{channels: 8}, {channels: 8}, {channels: 8}]\n%s",
           d);
  expect_error("resgan", yaml, "model.generator: base 0 doubled by 3 upsampling block(s)",
               "image_size / 8");
  expect_error("resgan", "model:\n  generator:\n    blocks: [{channels: 8}]\n",
               "model.discriminator.blocks is empty", NULL);
  expect_error("resgan",
               "model:\n  discriminator:\n    blocks: [{channels: 4}, {channels: 4}, {channels: 4},"
               " {channels: 4}, {channels: 4}, {channels: 4}]\n",
               "model.discriminator.blocks[4]: a 1x1 input cannot be average-pooled", NULL);
  expect_error("resgan",
               "model:\n  discriminator:\n    blocks: [{channels: 4, downsample: maybe}]\n",
               "resnet_test.yaml:3:", "downsample");
  expect_error("resgan", "model:\n  nz: 0\n  discriminator:\n    blocks: [{channels: 4}]\n",
               "model.nz (0)", "positive");
  expect_error(
      "resgan",
      "model:\n  generator: {channels: -1}\n  discriminator:\n    blocks: [{channels: 4}]\n",
      "model.generator.channels is -1", NULL);
}

/* --- what the nets are (needs the graph executor) -------------------------------------------- */

static int64_t count_params(ganfw_net *net) {
  int64_t total = 0, n = ganfw_net_param_count(net);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    if (ganfw_net_param_info(net, i, &p) != GANFW_OK) return -1;
    total += p.value->numel;
  }
  return total;
}

static int has_param(ganfw_net *net, const char *name) {
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    if (ganfw_net_param_info(net, i, &p) == GANFW_OK && strcmp(p.name, name) == 0) return 1;
  }
  return 0;
}

static const char *const resnet20_yaml = "model:\n"
                                         "  stem: {channels: 16, kernel: 3}\n"
                                         "  stages:\n"
                                         "    - {channels: 16, blocks: 3}\n"
                                         "    - {channels: 32, blocks: 3, stride: 2}\n"
                                         "    - {channels: 64, blocks: 3, stride: 2}\n"
                                         "  block: basic\n"
                                         "  pool: global_avg\n"
                                         "  linear: []\n";

/* ResNet-20 on 28x28x1: 272,186 parameters (CIFAR's 32x32x3: 272,474, as 0.27 M in He et
 * al. plus the two projection shortcuts), the common CIFAR code's names, logits [N,10]. */
static void test_resnet20_names(void) {
  fixture f;
  ganfw_status st = fixture_make(&f, "cnn", resnet20_yaml, 1, 28, 28, 10);
  if (st) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_net *net = f.vt->net(f.model, "classifier");
  CU_ASSERT_EQUAL(count_params(net), 272186);
  const char *names[] = {"conv1.weight",
                         "bn1.weight",
                         "layer1.0.conv1.weight",
                         "layer1.2.bn2.bias",
                         "layer2.0.conv1.weight",
                         "layer2.0.shortcut.0.weight",
                         "layer2.0.shortcut.1.weight",
                         "layer3.0.shortcut.1.bias",
                         "layer3.2.conv2.weight",
                         "linear.weight",
                         "linear.bias"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    CU_ASSERT(has_param(net, names[i]));
    if (!has_param(net, names[i])) printf("\n  no parameter %s\n", names[i]);
  }
  /* identity shortcuts where the shape stays */
  CU_ASSERT(!has_param(net, "layer1.0.shortcut.0.weight"));
  CU_ASSERT(!has_param(net, "layer2.1.shortcut.0.weight"));
  ganfw_param_info p = {.struct_size = sizeof p};
  CU_ASSERT_EQUAL(ganfw_net_param_info(net, 0, &p), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(p.name, "conv1.weight");
  ganfw_net_buffer b;
  CU_ASSERT(ganfw_net_buffer_at(net, 0, &b) && strcmp(b.name, "bn1.running_mean") == 0);
  int64_t shape[4];
  int32_t nd = 0;
  ganfw_net_output_shape(net, 5, shape, &nd);
  CU_ASSERT(nd == 2 && shape[0] == 5 && shape[1] == 10);
  /* the same at 32x32x3 */
  fixture g;
  CU_ASSERT_EQUAL_FATAL(fixture_make(&g, "cnn", resnet20_yaml, 3, 32, 32, 10), GANFW_OK);
  CU_ASSERT_EQUAL(count_params(g.vt->net(g.model, "classifier")), 272474);
  fixture_close(&g);
  fixture_close(&f);
}

/* The blocks syntax is untouched: the same names as before (no stem/stages keys). */
static void test_blocks_syntax_unchanged(void) {
  fixture f;
  CU_ASSERT_EQUAL_FATAL(
      fixture_make(&f, "cnn", "model:\n  blocks: [{channels: 4, pool: max}]\n  linear: [8]\n", 1,
                   28, 28, 10),
      GANFW_OK);
  ganfw_net *net = f.vt->net(f.model, "classifier");
  CU_ASSERT(has_param(net, "features.0.weight") && has_param(net, "features.1.weight"));
  CU_ASSERT(has_param(net, "classifier.0.weight") && has_param(net, "classifier.2.weight"));
  CU_ASSERT(!has_param(net, "linear.weight"));
  CU_ASSERT_EQUAL(count_params(net), 4 * 9 + 4 + 4 + 4 * 14 * 14 * 8 + 8 + 8 * 10 + 10);
  fixture_close(&f);
}

/* --- training -------------------------------------------------------------------------------- */

/* Column `col` (0-based) of every data row of a CSV file into v[0..*n). */
static void read_column(const char *path, int col, double *v, int cap, int *n) {
  *n = 0;
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[2048];
  CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f)); /* header */
  while (*n < cap && fgets(line, sizeof line, f)) {
    char *p = line;
    for (int c = 0; c < col && p; c++) {
      p = strchr(p, ',');
      if (p) p++;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    v[(*n)++] = strtod(p, NULL);
  }
  fclose(f);
}

/* The index of column `name` in the CSV header of `path`, -1 when absent. */
static int column_of(const char *path, const char *name) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[2048];
  int col = -1;
  if (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    int k = 0;
    for (char *tok = strtok(line, ","); tok; tok = strtok(NULL, ","), k++)
      if (strcmp(tok, name) == 0) col = k;
  }
  fclose(f);
  return col;
}

static ganfw_status train(const char *config, int gan) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(config, NULL, 0, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(run->config);
  if (st == GANFW_OK) st = ganfw_train(s);
  if (st) printf("\n  %s\n", ganfw_error_message());
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

/* /usr/bin/python3 tests/check_resnet_torch.py ARGS; its exit code. */
static int check_torch(const char *args) {
  char cmd[4096];
  const char *src = getenv("GANFW_SOURCE_DIR");
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/check_resnet_torch.py' %s 2>&1",
           src ? src : ".", args);
  printf("\n");
  fflush(stdout);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Eval-mode outputs of `net` (with the checkpoint's weights) for an input of `shape` into
 * the safetensors file io as in_name / out_name. */
static void export_io(ganfw_ctx *ctx, ganfw_net *net, const int64_t *shape, uint64_t seed,
                      const char *in_name, const char *out_name, ganfw_st_writer *w) {
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, in_name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  gt_fill_uniform(x->data, x->numel, -1, 1, seed);
  ganfw_tensor *y = NULL;
  ganfw_net_set_train(net, 0, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, in_name, GANFW_DTYPE_F32, 4, x->shape, x->data), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, out_name, GANFW_DTYPE_F32, y->ndim, y->shape, y->data),
                  GANFW_OK);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(x);
}

/* A ResNet (stem 8, stages 8 and 16 with stride 2) learns the synthetic digits in 4 epochs
 * (48 steps: the loss falls by more than 30%, the test accuracy in eval mode, with running
 * statistics of so few steps, is above 3x chance);
 * its last checkpoint loads into PyTorch's module and gives the same eval-mode logits. */
static void test_resnet_trains(void) {
  const char *model = "model:\n"
                      "  plugin: cnn\n"
                      "  stem: {channels: 8}\n"
                      "  stages:\n"
                      "    - {channels: 8, blocks: 1}\n"
                      "    - {channels: 16, blocks: 1, stride: 2}\n";
  FILE *f = fopen(path_in("resnet.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist}\n"
          "%s"
          "optim: {plugin: sgd, lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 5.0e-4,"
          " schedule: cosine}\n"
          "train: {batch_size: 20, epochs: 4, log_every: 1, checkpoint_every: 0}\n"
          "run: {out_dir: %s/r}\n",
          root, model, root);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(train(path_in("resnet.yaml"), 0), GANFW_OK);
  double loss[64], acc[8];
  int n = 0, ne = 0;
  read_column(path_in("r/metrics.csv"), 2, loss, 64, &n);
  CU_ASSERT_EQUAL(n, 4 * 12);
  double first = (loss[0] + loss[1] + loss[2]) / 3, last = (loss[n - 1] + loss[n - 2]) / 2;
  printf("\n  loss %.3f -> %.3f", first, last);
  CU_ASSERT(last < 0.7 * first);
  int col = column_of(path_in("r/eval.csv"), "test_acc");
  CU_ASSERT_FATAL(col >= 0);
  read_column(path_in("r/eval.csv"), col, acc, 8, &ne);
  CU_ASSERT_FATAL(ne >= 1);
  printf(", test accuracy by epoch");
  for (int i = 0; i < ne; i++) printf(" %.2f", acc[i]);
  CU_ASSERT(acc[ne - 1] > 0.3); /* chance: 0.1 */

  /* the checkpoint into PyTorch */
  char ckpt[1024];
  int64_t step = -1;
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_latest(path_in("r/checkpoints"), ckpt, sizeof ckpt, &step),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(step, 48);
  fixture fx;
  CU_ASSERT_EQUAL_FATAL(fixture_make(&fx, "cnn", model, 1, 28, 28, 10), GANFW_OK);
  ganfw_net *net = fx.vt->net(fx.model, "classifier");
  ganfw_ckpt_net cn = {.net = net, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL};
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_load_weights(ckpt, &cn, 1, 0, NULL), GANFW_OK);
  ganfw_st_writer *w = ganfw_st_writer_create();
  int64_t xs[4] = {3, 1, 28, 28};
  export_io(fx.ctx, net, xs, 41, "x", "y", w);
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path_in("resnet_io.safetensors")), GANFW_OK);
  ganfw_st_writer_destroy(w);
  fixture_close(&fx);
  char args[3072];
  snprintf(args, sizeof args, "'%s' --resnet 1,8,10 --stage 8,1,1 --stage 16,1,2 --io '%s'", ckpt,
           path_in("resnet_io.safetensors"));
  CU_ASSERT_EQUAL(check_torch(args), 0);
}

/* A small residual GAN trains 30 steps on the synthetic digits: both losses finite and
 * bounded; its checkpoint loads into PyTorch's G and D and gives the same eval outputs. */
static void test_resgan_trains(void) {
  const char *model = "model:\n"
                      "  plugin: resgan\n"
                      "  nz: 16\n"
                      "  generator:\n"
                      "    channels: 16\n"
                      "    blocks: [{channels: 16}, {channels: 8}]\n"
                      "  discriminator:\n"
                      "    blocks: [{channels: 8}, {channels: 16}, {channels: 16, downsample: "
                      "false}]\n";
  FILE *f = fopen(path_in("resgan.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist}\n"
          "%s"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
          "train: {batch_size: 16, max_steps: 30, log_every: 1, sample_every: 0,"
          " checkpoint_every: 0}\n"
          "run: {out_dir: %s/g, samples: 16}\n",
          root, model, root);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(train(path_in("resgan.yaml"), 1), GANFW_OK);
  int cd = column_of(path_in("g/metrics.csv"), "loss_d"),
      cg = column_of(path_in("g/metrics.csv"), "loss_g");
  CU_ASSERT_FATAL(cd >= 0 && cg >= 0);
  double ld[64], lg[64];
  int n = 0, m = 0;
  read_column(path_in("g/metrics.csv"), cd, ld, 64, &n);
  read_column(path_in("g/metrics.csv"), cg, lg, 64, &m);
  CU_ASSERT_EQUAL(n, 30);
  for (int i = 0; i < n; i++) CU_ASSERT(isfinite(ld[i]) && ld[i] > 0 && ld[i] < 10);
  for (int i = 0; i < m; i++) CU_ASSERT(isfinite(lg[i]) && lg[i] > 0 && lg[i] < 20);
  printf("\n  loss_d %.3f -> %.3f, loss_g %.3f -> %.3f", ld[0], ld[n - 1], lg[0], lg[m - 1]);
  struct stat sb;
  CU_ASSERT(stat(path_in("g/samples/step_000030.png"), &sb) == 0);

  char ckpt[1024];
  int64_t step = -1;
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_latest(path_in("g/checkpoints"), ckpt, sizeof ckpt, &step),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(step, 30);
  fixture fx;
  CU_ASSERT_EQUAL_FATAL(fixture_make(&fx, "resgan", model, 1, 28, 28, 0), GANFW_OK);
  ganfw_net *g = fx.vt->net(fx.model, "generator"), *d = fx.vt->net(fx.model, "discriminator");
  ganfw_ckpt_net cn[2] = {{.net = g, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL},
                          {.net = d, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL}};
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_load_weights(ckpt, cn, 2, 0, NULL), GANFW_OK);
  ganfw_st_writer *w = ganfw_st_writer_create();
  int64_t zs[4] = {3, 16, 1, 1}, xs[4] = {3, 1, 28, 28};
  export_io(fx.ctx, g, zs, 42, "z", "g_z", w);
  export_io(fx.ctx, d, xs, 43, "x", "d_x", w);
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path_in("resgan_io.safetensors")), GANFW_OK);
  ganfw_st_writer_destroy(w);
  fixture_close(&fx);
  char args[3072];
  snprintf(args, sizeof args,
           "'%s' --resgan 16,1,16,7 --g-block 16,1 --g-block 8,1 --d-block 8,1 --d-block 16,1 "
           "--d-block 16,0 --io '%s'",
           ckpt, path_in("resgan_io.safetensors"));
  CU_ASSERT_EQUAL(check_torch(args), 0);
}

static CU_TestInfo tests[] = {
    {"stage_errors_name_the_key", test_stage_errors},
    {"stage_typo_is_reported", test_stage_typo},
    {"resgan_errors_name_the_key", test_resgan_errors},
    {"resnet20_count_and_names", test_resnet20_names},
    {"blocks_syntax_unchanged", test_blocks_syntax_unchanged},
    {"resnet_trains_and_loads_in_torch", test_resnet_trains},
    {"resgan_trains_and_loads_in_torch", test_resgan_trains},
    CU_TEST_INFO_NULL,
};

int main(void) {
  ganfw_log_set_level(GANFW_LOG_WARN);
  return gt_run_fixture("resnet", tests, suite_init, suite_clean);
}
