/* The classifier family end to end on small synthetic data sets: the cnn plugin trained by
 * the classifier trainer learns (loss falls, test accuracy far above chance), evaluation
 * in no-grad eval mode peaks under half of training's activation memory at the same batch
 * size, `ganfw eval` reproduces the run's accuracy with a confusion matrix, resume is
 * bitwise the uninterrupted run, the learning-rate schedule reaches the metrics, CIFAR-10
 * binary batches train through configs/cnn_cifar10.yaml, every memory strategy works, and
 * shape errors name the block. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "tools/eval.h"
#include "io/safetensors.h"
#include "train/session.h"
#include "runtime/tensor.h"
#include "testutil.h"
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

static int exists(const char *rel) {
  struct stat sb;
  return stat(path_in(rel), &sb) == 0;
}

/* A small classifier on the synthetic MNIST (240 training, 100 test images): two conv
 * blocks, dropout (so the RNG matters for resume), a hidden linear layer; SGD with a
 * cosine schedule over the run. */
static void write_config(const char *name, const char *out_dir) {
  FILE *f = fopen(path_in(name), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist}\n"
          "model:\n"
          "  plugin: cnn\n"
          "  blocks:\n"
          "    - {channels: 8, pool: max}\n"
          "    - {channels: 16, pool: max, dropout: 0.1}\n"
          "  linear: [32]\n"
          "optim: {plugin: sgd, lr: 0.05, momentum: 0.9, schedule: cosine}\n"
          "train: {batch_size: 20, epochs: 3, log_every: 1, checkpoint_every: 6}\n"
          "run: {out_dir: %s/%s}\n",
          root, root, out_dir);
  fclose(f);
}

/* `ganfw CONFIG` in-process with --set assignments. */
static ganfw_status train(const char *config, const char *const *sets, int nsets) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(config, sets, nsets, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(run->config);
  if (st == GANFW_OK) st = ganfw_train(s);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

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

/* A synthetic CIFAR-10 batch file: n records, label (rec0 + r) % 10, pixels a blurred
 * square whose place depends on the label (learnable), plus a per-record ramp. */
static void write_cifar(const char *name, int n, int rec0) {
  uint8_t *buf = malloc((size_t)n * 3073);
  for (int r = 0; r < n; r++) {
    uint8_t *p = buf + (size_t)r * 3073;
    int label = (rec0 + r) % 10;
    p[0] = (uint8_t)label;
    int cx = 4 + 3 * (label % 5) + 2, cy = label < 5 ? 8 : 22;
    for (int ch = 0; ch < 3; ch++)
      for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++) {
          int d = abs(x - cx) + abs(y - cy);
          int v = (d < 5 ? 230 - 30 * d : 20) + ((rec0 + r) * 7 + ch * 13 + x) % 16;
          p[1 + ch * 1024 + y * 32 + x] = (uint8_t)(v > 255 ? 255 : v);
        }
  }
  FILE *f = fopen(path_in(name), "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fwrite(buf, 1, (size_t)n * 3073, f), (size_t)n * 3073);
  fclose(f);
  free(buf);
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_classifier_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0 || mkdir(path_in("cifar"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 240, 100, 5);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* --- training learns; outputs ------------------------------------------------------ */

static void test_learns(void) {
  write_config("cls.yaml", "a");
  ganfw_status st = train(path_in("cls.yaml"), NULL, 0);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT(exists("a/config.resolved.yaml"));
  CU_ASSERT(exists("a/memory.json"));
  { /* memory.json says which algorithm each convolution's passes ran on */
    FILE *m = fopen(path_in("a/memory.json"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    static char text[1 << 16];
    const size_t len = fread(text, 1, sizeof text - 1, m);
    text[len] = '\0';
    fclose(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"algorithms\": ["));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(text, "\"type\": \"conv2d\", \"batch\": 20, \"forward\": \"direct\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"weight_gradient\": \"direct\""));
  }
  CU_ASSERT(exists("a/checkpoints/step_00000006.safetensors"));
  CU_ASSERT(exists("a/checkpoints/step_00000036.safetensors"));
  CU_ASSERT(exists("a/checkpoints/best.safetensors"));
  /* metrics.csv: a row per step (12 a epoch), the loss falls, lr follows the cosine */
  double loss[64], lr[64], step[64];
  int n = 0;
  read_column(path_in("a/metrics.csv"), 0, step, 64, &n);
  CU_ASSERT_EQUAL(n, 36);
  CU_ASSERT_EQUAL(step[35], 36);
  read_column(path_in("a/metrics.csv"), 2, loss, 64, &n);
  double first = (loss[0] + loss[1] + loss[2]) / 3, last = (loss[33] + loss[34] + loss[35]) / 3;
  printf("\n  train loss %.3f -> %.3f", first, last);
  CU_ASSERT(last < 0.5 * first);
  read_column(path_in("a/metrics.csv"), 4, lr, 64, &n);
  CU_ASSERT_DOUBLE_EQUAL(lr[0], 0.05, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(lr[18], 0.025, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(lr[35], 0.025 * (1 + cos(3.14159265358979 * 35 / 36)), 1e-9);
  /* eval.csv: one row per epoch, test accuracy far above chance (0.1) */
  double acc[8], epoch[8], estep[8];
  read_column(path_in("a/eval.csv"), 3, acc, 8, &n);
  CU_ASSERT_EQUAL_FATAL(n, 3);
  read_column(path_in("a/eval.csv"), 1, epoch, 8, &n);
  read_column(path_in("a/eval.csv"), 0, estep, 8, &n);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_DOUBLE_EQUAL(epoch[i], i + 1, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(estep[i], 12 * (i + 1), 1e-9);
  }
  printf(", test accuracy by epoch %.2f %.2f %.2f ", acc[0], acc[1], acc[2]);
  CU_ASSERT(acc[2] > 0.6);
}

/* --- evaluation memory: no-grad eval under 0.7x of training at the same batch size ------
 * (evaluation keeps no tape and frees each activation after its last reader; training keeps
 * what backward needs, which the executor's BatchNorm + activation recomputation already
 * trims: 0.66x at batch 20, under 0.5x without it) */

static void test_eval_memory(void) {
  write_config("mem.yaml", "mem");
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_classifier *cls = NULL;
  ganfw_dataset *test = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_run_open_file(path_in("mem.yaml"), NULL, 0, &run), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_session_open(run, 1, NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_classifier_create(s, &cls), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_classifier_open_test_split(s, &test), GANFW_OK);
  const int64_t B = 20;
  int64_t xs[4] = {B, 1, 28, 28};
  ganfw_tensor *x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *y = ganfw_tensor_create(s->ctx, GANFW_DTYPE_I32, 1, &B, GANFW_MEM_DATA, "y");
  float *hx = malloc((size_t)x->nbytes);
  int32_t hy[20];
  for (int64_t i = 0; i < B; i++)
    CU_ASSERT_EQUAL(ganfw_dataset_get(s->data, i, 0, hx + i * 784, &hy[i]), GANFW_OK);
  ganfw_tensor_from_host(x, hx, x->nbytes);
  ganfw_tensor_from_host(y, hy, sizeof hy);
  ganfw_alloc_reset_peak(s->ctx->alloc);
  ganfw_classifier_stats cs;
  CU_ASSERT_EQUAL_FATAL(ganfw_classifier_step(cls, x, y, &cs), GANFW_OK);
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  const int64_t train_peak = as.category[GANFW_MEM_ACTIVATION].peak;
  CU_ASSERT_EQUAL(as.category[GANFW_MEM_ACTIVATION].current, 0); /* nothing left behind */
  /* BatchNorm's running statistics after the step: evaluation must not change them */
  ganfw_net_buffer buf;
  CU_ASSERT_FATAL(ganfw_net_buffer_at(s->classifier, 0, &buf) && buf.tensor);
  float mean_before[8], mean_after[8];
  CU_ASSERT_EQUAL_FATAL(buf.tensor->numel, 8);
  ganfw_tensor_to_host(buf.tensor, mean_before, sizeof mean_before);
  ganfw_eval_result ev;
  CU_ASSERT_EQUAL_FATAL(ganfw_classifier_evaluate(s, test, B, &ev), GANFW_OK);
  ganfw_tensor_to_host(buf.tensor, mean_after, sizeof mean_after);
  CU_ASSERT_EQUAL(memcmp(mean_before, mean_after, sizeof mean_before), 0);
  CU_ASSERT_EQUAL(ev.n, 100);
  CU_ASSERT_EQUAL(ev.classes, 10);
  int64_t total = 0;
  for (int i = 0; i < 100; i++) total += ev.confusion[i];
  CU_ASSERT_EQUAL(total, 100);
  printf("\n  peak activations at batch %lld: training %lld B, evaluation %lld B (%.2fx) ",
         (long long)B, (long long)train_peak, (long long)ev.peak_activation,
         (double)ev.peak_activation / (double)train_peak);
  CU_ASSERT(ev.peak_activation > 0);
  CU_ASSERT(ev.peak_activation < 0.7 * train_peak);
  ganfw_eval_result_free(&ev);
  /* the trainer's eval.csv records the same comparison at every epoch */
  double evp[8], trp[8];
  int n = 0;
  read_column(path_in("a/eval.csv"), 4, evp, 8, &n);
  read_column(path_in("a/eval.csv"), 5, trp, 8, &n);
  CU_ASSERT_EQUAL(n, 3);
  for (int i = 0; i < n; i++) CU_ASSERT(evp[i] > 0 && evp[i] < 0.7 * trp[i]);
  free(hx);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(y);
  ganfw_dataset_destroy(test);
  ganfw_classifier_destroy(cls);
  ganfw_session_close(s);
  ganfw_run_close(run);
}

/* --- ganfw eval ------------------------------------------------------------------------ */

/* Runs the ganfw binary with `args`; its stdout into out[0..n), the exit status back. */
static int run_ganfw(const char *args, char *out, size_t n) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s/ganfw' %s 2>/dev/null", build ? build : ".", args);
  FILE *p = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  size_t len = fread(out, 1, n - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The percentage after "accuracy: " in a report; -1 when absent. */
static double report_accuracy(const char *text) {
  const char *p = strstr(text, "\naccuracy: ");
  return p ? strtod(p + strlen("\naccuracy: "), NULL) : -1;
}

/* The "classifier.*" tensors of ganfw checkpoint `src` under their bare names, without any
 * metadata, in `dst`: PyTorch's model.state_dict() saved with safetensors. */
static void write_state_dict(const char *src, const char *dst) {
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(src, &f), GANFW_OK);
  ganfw_st_writer *w = ganfw_st_writer_create();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  int copied = 0;
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    if (strncmp(t->name, "classifier.", 11) != 0) continue;
    CU_ASSERT_EQUAL(
        ganfw_st_writer_add_raw(w, t->name + 11, t->dtype_name, t->ndim, t->shape, t->data),
        GANFW_OK);
    copied++;
  }
  CU_ASSERT(copied > 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_write(w, dst), GANFW_OK);
  ganfw_st_writer_destroy(w);
  ganfw_st_close(f);
}

static void test_eval_command(void) {
  static char out[8192], out2[8192];
  char args[1024];
  snprintf(args, sizeof args, "eval '%s'", path_in("a"));
  CU_ASSERT_EQUAL_FATAL(run_ganfw(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "best.safetensors"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "mean loss: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "confusion matrix (rows: true class, columns: predicted)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n    9:")); /* ten rows */
  CU_ASSERT_PTR_NULL(strstr(out, "\n   10:"));
  /* the best accuracy of the run's eval.csv, reproduced */
  double acc[8], best = 0;
  int n = 0;
  read_column(path_in("a/eval.csv"), 3, acc, 8, &n);
  for (int i = 0; i < n; i++) best = fmax(best, acc[i]);
  double got = report_accuracy(out);
  printf("\n  ganfw eval: %.2f%%, the run's best %.2f%% ", got, 100 * best);
  CU_ASSERT_DOUBLE_EQUAL(got, 100 * best, 0.006);
  /* the confusion matrix rows add up to the test images: 100 in all */
  long total = 0;
  const char *row = strstr(out, "\n    0:");
  for (int r = 0; r < 10 && row; r++) {
    const char *p = row + 7;
    for (int c = 0; c < 10; c++) total += strtol(p, (char **)&p, 10);
    row = strstr(row + 1, "\n    ");
  }
  CU_ASSERT_EQUAL(total, 100);
  /* through the config instead of the run folder, with another batch size: eval mode uses
   * the running statistics, so the batch size does not change the result */
  snprintf(args, sizeof args, "eval '%s' --batch 7", path_in("cls.yaml"));
  CU_ASSERT_EQUAL(run_ganfw(args, out2, sizeof out2), 0);
  CU_ASSERT_DOUBLE_EQUAL(report_accuracy(out2), got, 1e-9);
  CU_ASSERT_PTR_NOT_NULL(strstr(out2, "batch 7"));
  /* a named checkpoint */
  snprintf(args, sizeof args, "eval '%s' --checkpoint '%s'", path_in("a"),
           path_in("a/checkpoints/step_00000006.safetensors"));
  CU_ASSERT_EQUAL(run_ganfw(args, out2, sizeof out2), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out2, "(step 6)"));
  /* a PyTorch state_dict (no ganfw metadata, bare names), as model.init_from takes it: the
   * config's data shape, the same weights and accuracy as the checkpoint it came from */
  write_state_dict(path_in("a/checkpoints/best.safetensors"), path_in("state_dict.safetensors"));
  snprintf(args, sizeof args, "eval '%s' --checkpoint '%s'", path_in("cls.yaml"),
           path_in("state_dict.safetensors"));
  CU_ASSERT_EQUAL(run_ganfw(args, out2, sizeof out2), 0);
  CU_ASSERT_DOUBLE_EQUAL(report_accuracy(out2), got, 1e-9);
  CU_ASSERT_PTR_NOT_NULL(strstr(out2, "(a state_dict without ganfw metadata)"));
  /* in-process: a run folder without checkpoints is an error naming the folder */
  CU_ASSERT_EQUAL(mkdir(path_in("empty"), 0755), 0);
  FILE *f = fopen(path_in("empty/config.resolved.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  FILE *src = fopen(path_in("a/config.resolved.yaml"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(src);
  char line[512];
  while (fgets(line, sizeof line, src)) fputs(line, f);
  fclose(src);
  fclose(f);
  ganfw_eval_args ea = {.source = path_in("empty")};
  CU_ASSERT_EQUAL(ganfw_eval(&ea, stdout), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "no checkpoint yet"));
  CU_ASSERT_EQUAL(run_ganfw("eval", out2, sizeof out2), 2); /* usage */
}

/* --- resume ------------------------------------------------------------------------- */

/* The metadata that places a run: equal in two checkpoints of the same point. */
static const char *const position_keys[] = {"step",
                                            "epoch",
                                            "loader_position",
                                            "rng_offset",
                                            "seed",
                                            "classifier.best_test_acc",
                                            "classifier.best_step"};

/* 3 epochs straight (test_learns) vs a run that starts from that run's checkpoint of step
 * 18 (half way through the second epoch) and resumes to 36: bitwise the same weights,
 * momentum buffers, RNG and loader position, the same best checkpoint and the same
 * evaluations. */
static void test_resume_is_bitwise(void) {
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("b"), 0755), 0);
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("b/checkpoints"), 0755), 0);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path_in("a/checkpoints/step_00000018.safetensors"),
           path_in("b/checkpoints/"));
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  char out[512];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("b"));
  const char *sets[] = {out, "train.resume=latest"};
  ganfw_status st = train(path_in("cls.yaml"), sets, 2);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  gt_assert_same_checkpoint(path_in("a/checkpoints/step_00000036.safetensors"),
                            path_in("b/checkpoints/step_00000036.safetensors"), position_keys,
                            sizeof position_keys / sizeof position_keys[0]);
  /* best.safetensors is written only when an epoch beats the best restored from step 18
   * (that of step 12) */
  double aa[8], ab[8], sa[8], sb[8];
  int na = 0, nb = 0;
  read_column(path_in("a/eval.csv"), 3, aa, 8, &na);
  if (fmax(aa[1], aa[2]) > aa[0])
    gt_assert_same_checkpoint(path_in("a/checkpoints/best.safetensors"),
                              path_in("b/checkpoints/best.safetensors"), position_keys,
                              sizeof position_keys / sizeof position_keys[0]);
  else
    CU_ASSERT(!exists("b/checkpoints/best.safetensors")); /* the best was at step 12 */
  /* eval.csv of the resumed run: the evaluations at steps 24 and 36, as the straight run's */
  read_column(path_in("a/eval.csv"), 0, sa, 8, &na);
  read_column(path_in("b/eval.csv"), 0, sb, 8, &nb);
  CU_ASSERT_EQUAL_FATAL(nb, 2);
  read_column(path_in("b/eval.csv"), 3, ab, 8, &nb);
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(sb[i], sa[i + 1]);
    CU_ASSERT_EQUAL(ab[i], aa[i + 1]);
  }
}

/* --- schedules reach the metrics ------------------------------------------------------ */

static void test_schedule_in_metrics(void) {
  char out[512];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("sched"));
  const char *sets[] = {out,
                        "train.max_steps=10",
                        "optim.schedule=step",
                        "optim.step_size=4",
                        "optim.gamma=0.5",
                        "optim.warmup_steps=2"};
  CU_ASSERT_EQUAL_FATAL(train(path_in("cls.yaml"), sets, 6), GANFW_OK);
  double lr[16];
  int n = 0;
  read_column(path_in("sched/metrics.csv"), 4, lr, 16, &n);
  CU_ASSERT_EQUAL_FATAL(n, 10);
  /* warm-up 1/3, 2/3 of 0.05; then 0.05 for 4 steps, 0.025 for 4 */
  const double want[10] = {0.05 / 3, 0.1 / 3, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025};
  for (int i = 0; i < 10; i++) CU_ASSERT_DOUBLE_EQUAL(lr[i], want[i], 1e-9);
}

/* --- train.label_smoothing: the classifier's cross entropy as nn.CrossEntropyLoss ----------- */

/* The same 3 steps with and without smoothing (same weights, batches and dropout): the
 * training loss and the weights move apart from the first step on; the evaluation's loss
 * stays plain cross entropy, so runs compare; out of [0, 1) is refused naming the key. */
static void test_label_smoothing(void) {
  char out[512];
  double plain[8], smooth[8];
  int n = 0;
  for (int k = 0; k < 2; k++) {
    snprintf(out, sizeof out, "run.out_dir=%s", path_in(k ? "smooth" : "plain"));
    const char *sets[] = {out, "train.max_steps=3", k ? "train.label_smoothing=0.2" : "seed=3"};
    ganfw_status st = train(path_in("cls.yaml"), sets, 3);
    if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    read_column(path_in(k ? "smooth/metrics.csv" : "plain/metrics.csv"), 2, k ? smooth : plain, 8,
                &n);
    CU_ASSERT_EQUAL_FATAL(n, 3);
  }
  for (int i = 0; i < 3; i++) {
    CU_ASSERT(isfinite(smooth[i]) && smooth[i] > 0);
    CU_ASSERT(fabs(smooth[i] - plain[i]) > 1e-5);
  }
  ganfw_st_file *a = NULL, *b = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("plain/checkpoints/step_00000003.safetensors"), &a),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("smooth/checkpoints/step_00000003.safetensors"), &b),
                        GANFW_OK);
  const ganfw_st_tensor *wa = ganfw_st_find(a, "classifier.features.0.weight");
  const ganfw_st_tensor *wb = ganfw_st_find(b, "classifier.features.0.weight");
  CU_ASSERT_PTR_NOT_NULL_FATAL(wa);
  CU_ASSERT_PTR_NOT_NULL_FATAL(wb);
  CU_ASSERT_NOT_EQUAL(memcmp(wa->data, wb->data, (size_t)wa->nbytes), 0);
  ganfw_st_close(a);
  ganfw_st_close(b);
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("smooth_bad"));
  const char *bad[] = {out, "train.label_smoothing=1"};
  CU_ASSERT_EQUAL(train(path_in("cls.yaml"), bad, 2), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "train.label_smoothing"));
  CU_ASSERT(!exists("smooth_bad"));
  ganfw_error_clear();
}

/* --- CIFAR-10 binary batches through configs/cnn_cifar10.yaml ---------------------------- */

static void test_cifar10_config(void) {
  for (int b = 1; b <= 5; b++) {
    char name[64];
    snprintf(name, sizeof name, "cifar/data_batch_%d.bin", b);
    write_cifar(name, 12, 12 * (b - 1));
  }
  write_cifar("cifar/test_batch.bin", 20, 1000);
  const char *src = getenv("GANFW_SOURCE_DIR");
  char config[1024], data[600], out[600];
  snprintf(config, sizeof config, "%s/configs/cnn_cifar10.yaml", src ? src : "..");
  snprintf(data, sizeof data, "data.path=%s", path_in("cifar"));
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("c"));
  const char *sets[] = {data,
                        out,
                        "train.epochs=2",
                        "train.batch_size=10",
                        "optim.warmup_steps=2",
                        "train.log_every=1",
                        "device.threads=2"};
  ganfw_status st = train(config, sets, 7);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  double acc[4], loss[16];
  int n = 0;
  read_column(path_in("c/eval.csv"), 3, acc, 4, &n);
  CU_ASSERT_EQUAL(n, 2);
  read_column(path_in("c/metrics.csv"), 2, loss, 16, &n);
  CU_ASSERT_EQUAL(n, 12); /* 60 images / 10 a batch, two epochs */
  for (int i = 0; i < n; i++) CU_ASSERT(isfinite(loss[i]) && loss[i] > 0);
  CU_ASSERT(exists("c/checkpoints/best.safetensors"));
  /* the weights carry the PyTorch Sequential names of the blocks and the classifier */
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("c/checkpoints/step_00000012.safetensors"), &f),
                        GANFW_OK);
  const ganfw_st_tensor *w = ganfw_st_find(f, "classifier.features.0.weight");
  CU_ASSERT(w && w->ndim == 4 && w->shape[0] == 32 && w->shape[1] == 3 && w->shape[2] == 3);
  CU_ASSERT_PTR_NULL(ganfw_st_find(f, "classifier.features.0.bias")); /* BN follows */
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "classifier.features.1.running_var"));
  w = ganfw_st_find(f, "classifier.classifier.0.weight"); /* 128 x 4 x 4 -> 256 */
  CU_ASSERT(w && w->ndim == 2 && w->shape[0] == 256 && w->shape[1] == 128 * 4 * 4);
  w = ganfw_st_find(f, "classifier.classifier.3.weight"); /* after ReLU, Dropout */
  CU_ASSERT(w && w->shape[0] == 10 && w->shape[1] == 256);
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "optim.classifier.classifier.3.weight.momentum_buffer"));
  ganfw_st_close(f);
}

/* --- memory strategies ------------------------------------------------------------------ */

static void train_with(const char *memory, const char *dir, double *final_acc) {
  char mem[256], out[512];
  snprintf(mem, sizeof mem, "memory=%s", memory);
  snprintf(out, sizeof out, "run.out_dir=%s", path_in(dir));
  const char *sets[] = {mem, out, "train.epochs=1", "train.log_every=6"};
  ganfw_status st = train(path_in("cls.yaml"), sets, 4);
  if (st != GANFW_OK) printf("\n  %s: %s\n", memory, ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  double acc[4];
  int n = 0;
  char path[128];
  snprintf(path, sizeof path, "%s/eval.csv", dir);
  read_column(path_in(path), 3, acc, 4, &n);
  CU_ASSERT_EQUAL_FATAL(n, 1);
  *final_acc = acc[0];
}

static void test_memory_strategies(void) {
  double plain = 0, ckpt = 0, accum = 0, amp = 0, all = 0;
  train_with("[]", "m_plain", &plain);
  /* checkpointing recomputes with the same random numbers: the same run exactly */
  train_with("[{plugin: checkpoint, segments: 2}]", "m_ckpt", &ckpt);
  CU_ASSERT_EQUAL(ckpt, plain);
  gt_assert_same_checkpoint(path_in("m_plain/checkpoints/step_00000012.safetensors"),
                            path_in("m_ckpt/checkpoints/step_00000012.safetensors"), position_keys,
                            sizeof position_keys / sizeof position_keys[0]);
  train_with("[{plugin: accumulate, steps: 2}]", "m_accum", &accum);
  train_with("[{plugin: amp}]", "m_amp", &amp);
  train_with("[{plugin: amp}, {plugin: accumulate, steps: 2}, {plugin: checkpoint}]", "m_all",
             &all);
  printf("\n  test accuracy after 1 epoch: plain %.2f, checkpoint %.2f, accumulate %.2f, amp "
         "%.2f, all three %.2f ",
         plain, ckpt, accum, amp, all);
  CU_ASSERT(plain > 0.5 && accum > 0.5 && amp > 0.5 && all > 0.5);
  /* AMP evaluates in f16 too: the eval command says so */
  static char text[8192];
  char args[1024];
  snprintf(args, sizeof args, "eval '%s'", path_in("m_amp"));
  CU_ASSERT_EQUAL(run_ganfw(args, text, sizeof text), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "compute f16"));
}

/* --- errors ------------------------------------------------------------------------------ */

static ganfw_status open_with_model(const char *model_yaml) {
  FILE *f = fopen(path_in("bad.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "device: {type: cpu, threads: 1}\n"
          "data: {dataset: mnist, path: %s/mnist}\n"
          "model:\n%s"
          "optim: {plugin: sgd}\n"
          "train: {batch_size: 10, epochs: 1}\n"
          "run: {out_dir: %s/bad}\n",
          root, model_yaml, root);
  fclose(f);
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_error_clear();
  ganfw_status st = ganfw_run_open_file(path_in("bad.yaml"), NULL, 0, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

static int msg_has(const char *a, const char *b) {
  const char *msg = ganfw_error_message();
  int ok = strstr(msg, a) && (!b || strstr(msg, b));
  if (!ok) printf("\n  expected '%s'/'%s' in: %s\n", a, b ? b : "", msg);
  return ok;
}

static void test_shape_errors(void) {
  /* 28 -> 14 -> 7 after two pooled blocks: a 9x9 kernel without padding does not fit */
  CU_ASSERT_EQUAL(open_with_model("  plugin: cnn\n"
                                  "  blocks:\n"
                                  "    - {channels: 4, pool: max}\n"
                                  "    - {channels: 4, pool: max}\n"
                                  "    - {channels: 4, kernel: 9, padding: 0}\n"),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("model.blocks[2]: a 7x7 input is too small for kernel 9", NULL));
  /* a stride-2 conv leaves 14x14, too small for a 16x16 pooling window */
  CU_ASSERT_EQUAL(open_with_model("  plugin: cnn\n"
                                  "  blocks:\n"
                                  "    - {channels: 4, stride: 2, pool: avg, pool_kernel: 16}\n"),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("model.blocks[0]", "pool_kernel 16"));
  CU_ASSERT_EQUAL(open_with_model("  plugin: cnn\n"
                                  "  blocks:\n"
                                  "    - {channels: 4}\n"
                                  "    - {channels: 4, activation: gelu}\n"),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("model.blocks[1].activation", "gelu"));
  CU_ASSERT_EQUAL(open_with_model("  plugin: cnn\n"
                                  "  blocks:\n"
                                  "    - {kernel: 3}\n"),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("model.blocks[0].channels", NULL));
  CU_ASSERT_EQUAL(open_with_model("  plugin: cnn\n"
                                  "  blocks: [{channels: 4, pool: mean}]\n"),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("model.blocks[0].pool", "none, max or avg"));
  CU_ASSERT_EQUAL(open_with_model("  plugin: cnn\n"
                                  "  linear: [16, 0]\n"),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("model.linear[1]", NULL));
  /* more classes than the data's labels is allowed; fewer is caught at the first step */
  CU_ASSERT_EQUAL(open_with_model("  plugin: cnn\n  num_classes: 1\n"), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("num_classes", "at least 2"));
  /* no blocks at all is a linear classifier, and fine */
  CU_ASSERT_EQUAL(open_with_model("  plugin: cnn\n  linear: [16]\n"), GANFW_OK);
}

/* A diverging run stops with one message naming the loss, before saving NaN weights. */
static void test_nan_loss(void) {
  char out[512];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("nan"));
  const char *sets[] = {out,
                        "model={plugin: cnn, blocks: [], linear: [64, 64, 64, 64, 64], "
                        "linear_activation: none}",
                        "optim={plugin: sgd, lr: 9, momentum: 0.99}", "train.max_steps=200"};
  ganfw_status st = train(path_in("cls.yaml"), sets, 4);
  CU_ASSERT_EQUAL(st, GANFW_ERR_NUMERIC);
  CU_ASSERT(msg_has("cross-entropy loss is", "lower optim.lr"));
  CU_ASSERT(!exists("nan/checkpoints/step_00000200.safetensors"));
}

static CU_TestInfo tests[] = {
    {"training_learns", test_learns},
    {"eval_peak_under_0.7x_of_training", test_eval_memory},
    {"eval_command", test_eval_command},
    {"resume_is_bitwise", test_resume_is_bitwise},
    {"schedule_in_metrics", test_schedule_in_metrics},
    {"cifar10_batches_through_cnn_cifar10_config", test_cifar10_config},
    {"memory_strategies", test_memory_strategies},
    {"shape_errors_name_the_block", test_shape_errors},
    {"nan_loss_stops", test_nan_loss},
    {"label_smoothing_reaches_the_loss", test_label_smoothing},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("classifier", tests, suite_init, suite_clean);
}
