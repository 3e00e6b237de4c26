/* `ganfw prune` (tools/prune_tool.c) on a small residual classifier trained here on synthetic
 * MNIST: channel pruning writes a narrower model whose folder plans smaller, measures what it
 * plans, evaluates and fine-tunes; masks write weight_orig and weight_mask (or plain weights
 * with --remove) with the sparsity asked for; a sweep writes the table; --distill fine-tunes
 * the pruned model as the student of the source; bad amounts, a
 * missing -o and an unknown layer are refused naming the option or layer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "io/safetensors.h"
#include "tools/eval.h"
#include "tools/plan.h"
#include "tools/prune_tool.h"
#include "train/run.h"
#include "testutil.h"

static const char *root;

static const char *path_in(const char *rel) {
  static char buf[8][1024];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* A ResNet (stem 8, a stage of 8 and a stride-2 stage of 16, one basic block each) trained
 * 60 steps on 28x28 synthetic MNIST into <root>/run. */
static int suite_init(void) {
  root = gt_tmp_root("prune_tool");
  if (mkdir(path_in("mnist"), 0755) != 0 || gt_write_mnist(path_in("mnist"), 512, 128, 5) != 0)
    return -1;
  FILE *f = fopen(path_in("resnet.yaml"), "w");
  if (!f) return -1;
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist}\n"
          "model:\n"
          "  plugin: cnn\n"
          "  stem: {channels: 8, kernel: 3}\n"
          "  stages:\n"
          "    - {channels: 8, blocks: 1}\n"
          "    - {channels: 16, blocks: 1, stride: 2}\n"
          "  block: basic\n"
          "  linear: []\n"
          "optim: {plugin: sgd, lr: 0.05, momentum: 0.9}\n"
          "train: {batch_size: 32, max_steps: 60, log_every: 0, checkpoint_every: 60}\n"
          "run: {out_dir: %s/run}\n",
          root, root);
  fclose(f);
  if (gt_train(path_in("resnet.yaml"), NULL, 0) == GANFW_OK) return 0;
  printf("\n  training the source model: %s\n", ganfw_error_message());
  return -1;
}

static ganfw_prune_args args_for(int32_t method, double amount, const char *out) {
  ganfw_prune_args a;
  memset(&a, 0, sizeof a);
  a.source = path_in("run");
  a.method = method;
  a.amounts[0] = amount;
  a.n_amounts = 1;
  a.output = out;
  return a;
}

/* The planned peak (allocated) of a config. */
static int64_t planned_peak(const char *config) {
  ganfw_probe_result p;
  ganfw_status st = ganfw_plan_make(gt_config(config, NULL, 0), 0, NULL, &p);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  const int64_t peak = st == GANFW_OK ? p.peak_allocated : -1;
  if (st == GANFW_OK) ganfw_probe_result_free(&p);
  return peak;
}

static double accuracy(const char *config, const char *ckpt) {
  double acc = -1;
  ganfw_eval_args e = {.source = config, .checkpoint = ckpt, .accuracy = &acc};
  FILE *sink = fopen("/dev/null", "w");
  CU_ASSERT_EQUAL(ganfw_eval(&e, sink), GANFW_OK);
  fclose(sink);
  return acc;
}

/* 1 when the safetensors file at path holds a tensor named `name`. */
static int has_tensor(const char *path, const char *name) {
  ganfw_st_file *f = NULL;
  if (ganfw_st_open(path, &f) != GANFW_OK) return 0;
  const int found = ganfw_st_find(f, name) != NULL;
  ganfw_st_close(f);
  return found;
}

static void test_channels(void) {
  ganfw_prune_args a = args_for(GANFW_PRUNE_CHANNELS, 0.5, path_in("half"));
  FILE *sink = fopen("/dev/null", "w");
  CU_ASSERT_EQUAL_FATAL(ganfw_prune_tool(&a, sink), GANFW_OK);
  fclose(sink);
  CU_ASSERT_TRUE(exists(path_in("half/config.yaml")));
  CU_ASSERT_TRUE(exists(path_in("half/model.safetensors")));
  /* the stem's group is 8 channels: 4 are left; conv1 of the second stage's block 16 -> 8 */
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("half/model.safetensors"), &f), GANFW_OK);
  const ganfw_st_tensor *t = ganfw_st_find(f, "classifier.conv1.weight");
  CU_ASSERT_PTR_NOT_NULL(t);
  if (t) CU_ASSERT_EQUAL(t->shape[0], 4);
  t = ganfw_st_find(f, "classifier.layer2.0.conv1.weight");
  CU_ASSERT_PTR_NOT_NULL(t);
  if (t) CU_ASSERT_EQUAL(t->shape[0], 8);
  ganfw_st_close(f);
  /* smaller in the plan, exact against a real step, and it evaluates */
  const int64_t full = planned_peak(path_in("run/config.resolved.yaml"));
  const int64_t half = planned_peak(path_in("half/config.yaml"));
  printf("\n    planned peak %lld -> %lld bytes", (long long)full, (long long)half);
  CU_ASSERT(half > 0 && half < full);
  ganfw_probe_result plan, real;
  const ganfw_run_config *cfg = gt_config(path_in("half/config.yaml"), NULL, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_make(cfg, 0, NULL, &plan), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_measure(cfg, &plan, NULL, &real), GANFW_OK);
  CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
  CU_ASSERT_EQUAL(plan.peak_reserved, real.peak_reserved);
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
  const double acc = accuracy(path_in("half/config.yaml"), path_in("half/model.safetensors"));
  CU_ASSERT(acc >= 0.0 && acc <= 1.0);
}

/* The bytes of the file's weight_mask tensors. */
static int64_t mask_bytes(const char *path) {
  ganfw_st_file *f = NULL;
  if (ganfw_st_open(path, &f) != GANFW_OK) return -1;
  int64_t bytes = 0;
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    const size_t len = strlen(t->name);
    if (len > 12 && strcmp(t->name + len - 12, ".weight_mask") == 0) bytes += t->nbytes;
  }
  ganfw_st_close(f);
  return bytes;
}

/* The masked folder's config (model.init_from the masked file) planned as it runs: the
 * plan reads no values, yet has the masks the file installs on loading (param: a
 * weight_mask beside each weight_orig), as the measured step has them and a step that
 * loads the file's values, byte for byte. */
static void plan_masked(const char *weights) {
  const ganfw_run_config *cfg = gt_config(path_in("masked/config.yaml"), NULL, 0);
  ganfw_probe_result plan, real, loaded, unpruned;
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_make(cfg, 0, NULL, &plan), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_measure(cfg, &plan, NULL, &real), GANFW_OK);
  CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
  CU_ASSERT_EQUAL(plan.peak_reserved, real.peak_reserved);
  CU_ASSERT_EQUAL(plan.peak_category[GANFW_MEM_PARAM], real.peak_category[GANFW_MEM_PARAM]);
  ganfw_probe_options opt = {.meta = 0,
                             .warmup = 1,
                             .steps = 1,
                             .real_data = 1,
                             .limit_mode = GANFW_PROBE_LIMIT_CONFIG,
                             .batch_size = plan.batch_size};
  CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(cfg, &opt, &loaded), GANFW_OK);
  CU_ASSERT_EQUAL(plan.peak_category[GANFW_MEM_PARAM], loaded.peak_category[GANFW_MEM_PARAM]);
  CU_ASSERT_EQUAL(plan.peak_allocated, loaded.peak_allocated);
  const ganfw_run_config *src = gt_config(path_in("run/config.resolved.yaml"), NULL, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_make(src, 0, NULL, &unpruned), GANFW_OK);
  const int64_t masks = mask_bytes(weights);
  const int64_t more =
      plan.peak_category[GANFW_MEM_PARAM] - unpruned.peak_category[GANFW_MEM_PARAM];
  printf("\n    planned param %lld -> %lld bytes (masks %lld)",
         (long long)unpruned.peak_category[GANFW_MEM_PARAM],
         (long long)plan.peak_category[GANFW_MEM_PARAM], (long long)masks);
  CU_ASSERT(masks > 0 && more >= masks);
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
  ganfw_probe_result_free(&loaded);
  ganfw_probe_result_free(&unpruned);
}

static void test_masks(void) {
  ganfw_prune_args a = args_for(GANFW_PRUNE_L1_UNSTRUCTURED, 0.5, path_in("masked"));
  FILE *sink = fopen("/dev/null", "w");
  CU_ASSERT_EQUAL_FATAL(ganfw_prune_tool(&a, sink), GANFW_OK);
  const char *w = path_in("masked/model.safetensors");
  CU_ASSERT_TRUE(has_tensor(w, "classifier.conv1.weight_orig"));
  CU_ASSERT_TRUE(has_tensor(w, "classifier.conv1.weight_mask"));
  CU_ASSERT_FALSE(has_tensor(w, "classifier.conv1.weight"));
  /* the mask keeps round(0.5 * 72) = 36 of conv1's 8x1x3x3 weights */
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(w, &f), GANFW_OK);
  const ganfw_st_tensor *m = ganfw_st_find(f, "classifier.conv1.weight_mask");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL_FATAL(m->dtype, GANFW_DTYPE_F32);
  double kept = 0;
  for (int64_t i = 0; i < m->numel; i++) kept += ((const float *)m->data)[i];
  CU_ASSERT_EQUAL(m->numel, 72);
  CU_ASSERT_EQUAL(kept, 36.0);
  ganfw_st_close(f);
  /* the masked folder evaluates (the masks installed by loading) */
  const double acc = accuracy(path_in("masked/config.yaml"), w);
  CU_ASSERT(acc >= 0.0 && acc <= 1.0);
  plan_masked(w);
  /* --remove: plain weights */
  a = args_for(GANFW_PRUNE_GLOBAL_UNSTRUCTURED, 0.3, path_in("removed"));
  a.remove = 1;
  CU_ASSERT_EQUAL_FATAL(ganfw_prune_tool(&a, sink), GANFW_OK);
  fclose(sink);
  CU_ASSERT_TRUE(has_tensor(path_in("removed/model.safetensors"), "classifier.conv1.weight"));
  CU_ASSERT_FALSE(has_tensor(path_in("removed/model.safetensors"), "classifier.conv1.weight_mask"));
}

/* ganfw_prune_tool(a) with its output in *text (printed; the caller frees it). */
static ganfw_status run_tool(const ganfw_prune_args *a, char **text) {
  size_t len = 0;
  FILE *out = open_memstream(text, &len);
  const ganfw_status st = ganfw_prune_tool(a, out);
  fclose(out);
  printf("\n%s", *text);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  return st;
}

static void test_sweep(void) {
  ganfw_prune_args a = args_for(GANFW_PRUNE_CHANNELS, 0.25, path_in("sweep"));
  a.amounts[1] = 0.5;
  a.n_amounts = 2;
  a.finetune = 1;
  a.steps = 2;
  char *text = NULL;
  CU_ASSERT_EQUAL_FATAL(run_tool(&a, &text), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "| unpruned |"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "| channels 0.25 |"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "| channels 0.5 |"));
  /* every row measured what it planned */
  int rows = 0;
  for (const char *p = text; (p = strstr(p, "| +0.00% |")); p++) rows++;
  CU_ASSERT_EQUAL(rows, 3);
  free(text);
  CU_ASSERT_TRUE(exists(path_in("sweep/sweep.md")));
  CU_ASSERT_TRUE(exists(path_in("sweep/amount_0.50/config.yaml")));
  CU_ASSERT_TRUE(exists(path_in("sweep/amount_0.50/run/checkpoints")));
}

static int msg_has(const char *s) {
  const char *m = ganfw_error_message();
  if (strstr(m, s)) return 1;
  printf("\n  message \"%s\" lacks \"%s\"\n", m, s);
  return 0;
}

/* --distill: distill.yaml, the source (frozen, its checkpoint) teaching the pruned model
 * (its weights and widths) with the distill trainer; the fine-tune trains with it, and the
 * table's accuracy after it is the student's. The teacher in that run is the source as it
 * was pruned (the run's latest checkpoint): its test accuracy there is that checkpoint's. */
static void test_distill(void) {
  ganfw_prune_args a = args_for(GANFW_PRUNE_CHANNELS, 0.5, path_in("kd"));
  a.distill = 1;
  a.finetune = 1;
  a.steps = 2;
  char *text = NULL;
  CU_ASSERT_EQUAL_FATAL(run_tool(&a, &text), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "after 1 epoch(s) distilled"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "fine-tuning "));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "kd/distill.yaml"));
  free(text);
  CU_ASSERT_TRUE(exists(path_in("kd/config.yaml")));
  CU_ASSERT_TRUE(exists(path_in("kd/run_distill/checkpoints")));
  CU_ASSERT_FALSE(exists(path_in("kd/run")));
  /* the student's accuracy, and the teacher's, from the distill run's checkpoint */
  char *report = NULL;
  size_t len = 0;
  double student = -1, teacher = -1;
  FILE *out = open_memstream(&report, &len);
  ganfw_eval_args e = {.source = path_in("kd/distill.yaml"), .accuracy = &student};
  CU_ASSERT_EQUAL_FATAL(ganfw_eval(&e, out), GANFW_OK);
  fclose(out);
  const char *at = strstr(report, "teacher_acc");
  CU_ASSERT_PTR_NOT_NULL(at);
  if (at) CU_ASSERT_EQUAL(sscanf(at, "teacher_acc %lf", &teacher), 1);
  free(report);
  const double source = accuracy(path_in("run/config.resolved.yaml"),
                                 path_in("run/checkpoints/step_00000060.safetensors"));
  printf("\n    student %.4f, teacher %.4f, source %.4f", student, teacher, source);
  CU_ASSERT(student >= 0.0 && student <= 1.0);
  CU_ASSERT_DOUBLE_EQUAL(teacher, source, 1e-9);
  /* the student alone: the pruned model's config takes the distill run's checkpoint (its
   * one net that fits, "student."), with the accuracy the trainer measured */
  const double alone = accuracy(path_in("kd/config.yaml"),
                                path_in("kd/run_distill/checkpoints/step_00000016.safetensors"));
  CU_ASSERT_DOUBLE_EQUAL(alone, student, 1e-9);
  /* the pair planned as it runs: the teacher's forward and the narrow student's step */
  ganfw_probe_result plan, real;
  const ganfw_run_config *cfg = gt_config(path_in("kd/distill.yaml"), NULL, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_make(cfg, 0, NULL, &plan), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_measure(cfg, &plan, NULL, &real), GANFW_OK);
  CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
  /* a model of several nets has its trainer: --distill is refused, naming the option */
  FILE *sink = fopen("/dev/null", "w");
  a = args_for(GANFW_PRUNE_CHANNELS, 0.5, path_in("kd2"));
  a.source = path_in("kd/run_distill");
  a.distill = 1;
  CU_ASSERT_EQUAL(ganfw_prune_tool(&a, sink), GANFW_ERR_CONFIG);
  const char *m = ganfw_error_message();
  CU_ASSERT_PTR_NOT_NULL(strstr(m, "--distill"));
  CU_ASSERT_PTR_NOT_NULL(strstr(m, "prune without --distill"));
  CU_ASSERT_FALSE(exists(path_in("kd2/model.safetensors")));
  /* a pruned model (test_channels' half/) pruned again in one group only: the student keeps
   * the widths of the first pruning beside the new one, the teacher has the first ones, and
   * both load their weights (the plan reads the names and shapes) */
  a = args_for(GANFW_PRUNE_CHANNELS, 0.5, path_in("again"));
  a.source = path_in("half/model.safetensors");
  a.config = path_in("half/config.yaml");
  a.layers[0] = "layer2.0.conv1";
  a.n_layers = 1;
  a.distill = 1;
  const ganfw_status st = ganfw_prune_tool(&a, sink);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT(planned_peak(path_in("again/distill.yaml")) > 0);
  CU_ASSERT(planned_peak(path_in("again/config.yaml")) > 0);
  /* nothing pruned: teacher and student have one shape, and a checkpoint of both does not
   * say which one the model alone means; the error names both */
  a = args_for(GANFW_PRUNE_CHANNELS, 0.0, path_in("kd0"));
  a.distill = 1;
  a.finetune = 1;
  a.steps = 1;
  CU_ASSERT_EQUAL_FATAL(ganfw_prune_tool(&a, sink), GANFW_OK);
  ganfw_eval_args e0 = {.source = path_in("kd0/config.yaml"),
                        .checkpoint =
                            path_in("kd0/run_distill/checkpoints/step_00000016.safetensors")};
  CU_ASSERT_EQUAL(ganfw_eval(&e0, sink), GANFW_ERR_CONFIG);
  CU_ASSERT_TRUE(msg_has("2 of the file's nets fit this model ('teacher', 'student')"));
  fclose(sink);
}

static void test_bad(void) {
  FILE *sink = fopen("/dev/null", "w");
  ganfw_prune_args a = args_for(GANFW_PRUNE_CHANNELS, 1.0, path_in("bad"));
  CU_ASSERT_EQUAL(ganfw_prune_tool(&a, sink), GANFW_ERR_CONFIG);
  CU_ASSERT_TRUE(msg_has("--amount 1"));
  a = args_for(GANFW_PRUNE_L1_UNSTRUCTURED, -0.1, path_in("bad"));
  CU_ASSERT_EQUAL(ganfw_prune_tool(&a, sink), GANFW_ERR_CONFIG);
  CU_ASSERT_TRUE(msg_has("[0, 1)"));
  a = args_for(GANFW_PRUNE_CHANNELS, 0.5, NULL);
  CU_ASSERT_EQUAL(ganfw_prune_tool(&a, sink), GANFW_ERR_CONFIG);
  CU_ASSERT_TRUE(msg_has("-o OUT"));
  a = args_for(GANFW_PRUNE_L1_UNSTRUCTURED, 0.5, path_in("bad"));
  a.layers[0] = "layer1.0.conv9";
  a.n_layers = 1;
  CU_ASSERT_NOT_EQUAL(ganfw_prune_tool(&a, sink), GANFW_OK);
  CU_ASSERT_TRUE(msg_has("layer1.0.conv9"));
  a = args_for(GANFW_PRUNE_L1_UNSTRUCTURED, 0.5, path_in("bad"));
  a.layers[0] = "bn1";
  a.n_layers = 1;
  CU_ASSERT_NOT_EQUAL(ganfw_prune_tool(&a, sink), GANFW_OK);
  CU_ASSERT_TRUE(msg_has("bn1"));
  CU_ASSERT_FALSE(exists(path_in("bad/model.safetensors")));
  fclose(sink);
}

static void test_dry_run(void) {
  ganfw_prune_args a = args_for(GANFW_PRUNE_CHANNELS, 0.5, NULL);
  a.dry_run = 1;
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  CU_ASSERT_EQUAL_FATAL(ganfw_prune_tool(&a, out), GANFW_OK);
  fclose(out);
  printf("\n%s", text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "model.widths: {"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "conv1"));
  free(text);
}

static CU_TestInfo tests[] = {{"channels: a narrower model folder", test_channels},
                              {"masks: weight_orig and weight_mask, --remove", test_masks},
                              {"--sweep with a fine-tune: the table", test_sweep},
                              {"--distill: the source teaches the pruned model", test_distill},
                              {"bad amounts, -o, layers", test_bad},
                              {"--dry-run lists the groups", test_dry_run},
                              CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("prune_tool", tests, suite_init, NULL);
}
