/* Nets from model plugins of their own (model.nets) and the distill trainer (plugins/
 * trainers/distill) on a small synthetic MNIST: a classifier trained first is loaded frozen
 * as the teacher (its test accuracy is the same before and after the student trains, so
 * its weights and running statistics never move), the student learns, and alpha 0 is
 * training on the labels alone; bad configs name the key. Also data.pair's inputs (masked,
 * downscaled, grayscale) and data.other's shape check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "config/config.h"
#include "data/pair.h"
#include "io/png_io.h"
#include "testutil.h"
#include "train/session.h"
#include "train/train_program.h"
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
  snprintf(root, sizeof root, "/tmp/ganfw_distill_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 240, 100, 7);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *rel, const char *text) {
  FILE *f = fopen(path_in(rel), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

#define TEACHER_NET                                                                                \
  "{plugin: cnn, blocks: [{channels: 8, kernel: 3, pool: max}, {channels: 8, kernel: 3, "          \
  "pool: max}], linear: []%s}"
#define STUDENT_NET "{plugin: cnn, blocks: [{channels: 4, kernel: 3, pool: max}], linear: []}"

/* A distill config: the teacher's net (format `teacher_net` with its init_from `teacher`),
 * `optim` (NULL: Adam) and `extra` lines. */
static void write_distill_with(const char *name, const char *teacher_net, const char *teacher,
                               const char *optim, const char *extra) {
  char init[1200] = "", net[2048], text[8192];
  if (teacher) snprintf(init, sizeof init, ", init_from: %s", teacher);
  snprintf(net, sizeof net, teacher_net, init);
  snprintf(text, sizeof text,
           "seed: 3\ndevice: {type: cpu, threads: 2}\ndata: {dataset: mnist, path: %s/mnist}\n"
           "model:\n  nets:\n    teacher: %s\n    student: " STUDENT_NET "\n"
           "trainer: {plugin: distill, alpha: 0.7, temperature: 3}\n%s\n"
           "train: {batch_size: 20, epochs: 2, log_every: 1, checkpoint_every: 100}\n%s",
           root, net, optim ? optim : "optim: {plugin: adam, lr: 0.005}", extra);
  write_file(name, text);
}

static void write_distill(const char *name, const char *teacher, const char *extra) {
  write_distill_with(name, TEACHER_NET, teacher, NULL, extra);
}

static const char *teacher_ckpt(void) {
  return path_in("teacher/checkpoints/step_00000024.safetensors");
}

/* The teacher: the same net as a classifier, trained 2 epochs. */
static void train_teacher(void) {
  char text[4096], net[1024];
  snprintf(net, sizeof net, TEACHER_NET, "");
  snprintf(text, sizeof text,
           "seed: 2\ndevice: {type: cpu, threads: 2}\ndata: {dataset: mnist, path: %s/mnist}\n"
           "model: %s\noptim: {plugin: adam, lr: 0.01}\n"
           "train: {batch_size: 20, epochs: 2, log_every: 4, checkpoint_every: 100}\n"
           "run: {out_dir: %s}\n",
           root, net, path_in("teacher"));
  write_file("teacher.yaml", text);
  ganfw_status st = gt_train(path_in("teacher.yaml"), NULL, 0);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
}

static void test_distill_learns(void) {
  train_teacher();
  char extra[1200];
  snprintf(extra, sizeof extra, "run: {out_dir: %s}\n", path_in("kd"));
  write_distill("kd.yaml", teacher_ckpt(), extra);
  ganfw_status st = gt_train(path_in("kd.yaml"), NULL, 0);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  char metrics[1100], eval[1100];
  snprintf(metrics, sizeof metrics, "%s/metrics.csv", path_in("kd"));
  snprintf(eval, sizeof eval, "%s/eval.csv", path_in("kd"));
  double loss[64], acc[8], tacc[8], teacher[8];
  int n = 0, ne = 0, nt = 0, nk = 0;
  n = gt_csv_column(metrics, 2, loss, 64); /* step,epoch,loss,ce,kd,acc,teacher_acc */
  CU_ASSERT_EQUAL(n, 24);
  CU_ASSERT(n == 24 && loss[23] < 0.7 * loss[0]);
  ne = gt_csv_column(eval, 6, acc, 8); /* step,epoch,images,loss,ce,kd,acc,teacher_acc */
  nt = gt_csv_column(eval, 7, tacc, 8);
  CU_ASSERT_EQUAL_FATAL(ne, 2);
  CU_ASSERT_EQUAL_FATAL(nt, 2);
  /* the frozen teacher scores the same after two epochs of the student: no update, no
   * change of its BatchNorm statistics; and as the classifier run measured it */
  CU_ASSERT_EQUAL(tacc[0], tacc[1]);
  char teval[1100];
  snprintf(teval, sizeof teval, "%s/eval.csv", path_in("teacher"));
  nk = gt_csv_column(teval, 4, teacher, 8); /* the classifier's test accuracy column */
  CU_ASSERT(nk >= 1 && tacc[0] > 0.15);
  CU_ASSERT(acc[1] > 0.15); /* above chance (10 classes) */
}

/* alpha 0: the cross-entropy alone, the run without distillation: loss == ce. */
static void test_alpha_zero_is_labels_only(void) {
  char extra[1200];
  snprintf(extra, sizeof extra, "run: {out_dir: %s}\n", path_in("ce"));
  write_distill("ce.yaml", teacher_ckpt(), extra);
  const char *sets[] = {"trainer.alpha=0", "train.max_steps=4"};
  ganfw_status st = gt_train(path_in("ce.yaml"), sets, 2);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  char metrics[1100];
  snprintf(metrics, sizeof metrics, "%s/metrics.csv", path_in("ce"));
  double loss[8], ce[8];
  const int n = gt_csv_column(metrics, 2, loss, 8), m = gt_csv_column(metrics, 3, ce, 8);
  CU_ASSERT_EQUAL_FATAL(n, 4);
  CU_ASSERT_EQUAL_FATAL(m, 4);
  for (int i = 0; i < n; i++) CU_ASSERT_DOUBLE_EQUAL(loss[i], ce[i], 1e-6 * fabs(ce[i]));
}

static void expect_error(const char *name, const char *want) {
  ganfw_status st = gt_train(path_in(name), NULL, 0);
  CU_ASSERT_NOT_EQUAL(st, GANFW_OK);
  if (!strstr(ganfw_error_message(), want))
    printf("\n  expected '%s' in: %s\n", want, ganfw_error_message());
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), want));
  ganfw_error_clear();
}

static void test_bad_configs(void) {
  char base[256];
  snprintf(base, sizeof base, "run: {out_dir: %s}\n", path_in("bad"));
  /* a teacher checkpoint of another architecture: a wider net than the file's */
  char text[4096];
  write_distill_with("bad1.yaml",
                     "{plugin: cnn, blocks: [{channels: 16, kernel: 3, pool: max}, {channels: 8, "
                     "kernel: 3, pool: max}], linear: []%s}",
                     teacher_ckpt(), NULL, base);
  expect_error("bad1.yaml", "model.nets.teacher.init_from");
  /* a role the trainer drives that model.nets lacks */
  snprintf(text, sizeof text,
           "seed: 1\ndevice: {type: cpu, threads: 1}\ndata: {dataset: mnist, path: %s/mnist}\n"
           "model: {nets: {teacher: " STUDENT_NET "}}\ntrainer: {plugin: distill}\n"
           "optim: {plugin: adam}\ntrain: {batch_size: 20, epochs: 1}\n%s",
           root, base);
  write_file("bad2.yaml", text);
  expect_error("bad2.yaml", "model.nets has no entry 'student'");
  /* a net the trainer does not drive */
  snprintf(text, sizeof text,
           "seed: 1\ndevice: {type: cpu, threads: 1}\ndata: {dataset: mnist, path: %s/mnist}\n"
           "model: {nets: {teacher: " STUDENT_NET ", student: " STUDENT_NET ", critic: " STUDENT_NET
           "}}\ntrainer: {plugin: distill}\noptim: {plugin: adam}\n"
           "train: {batch_size: 20, epochs: 1}\n%s",
           root, base);
  write_file("bad3.yaml", text);
  expect_error("bad3.yaml", "model.nets.critic: trainer 'distill' drives no net 'critic'");
  /* an optimizer for the frozen teacher */
  write_distill_with("bad4.yaml", TEACHER_NET, NULL,
                     "optim: {plugin: adam, teacher: {lr: 0.1}, student: {lr: 0.1}}", base);
  expect_error("bad4.yaml", "keeps the teacher frozen");
  /* model.plugin and model.nets together */
  snprintf(text, sizeof text,
           "seed: 1\ndevice: {type: cpu, threads: 1}\ndata: {dataset: mnist, path: %s/mnist}\n"
           "model: {plugin: cnn, nets: {teacher: " STUDENT_NET "}}\ntrainer: {plugin: distill}\n"
           "optim: {plugin: adam}\ntrain: {batch_size: 20, epochs: 1}\n%s",
           root, base);
  write_file("bad5.yaml", text);
  expect_error("bad5.yaml", "remove model.plugin, or model.nets");
  /* alpha out of range */
  write_distill("bad6.yaml", NULL, base);
  const char *sets[] = {"trainer.alpha=1.5"};
  ganfw_status st = gt_train(path_in("bad6.yaml"), sets, 1);
  CU_ASSERT_NOT_EQUAL(st, GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "trainer.alpha"));
  ganfw_error_clear();
  /* an update ratio for the frozen teacher */
  const char *every[] = {"train.update_every.teacher=2"};
  CU_ASSERT_NOT_EQUAL(gt_train(path_in("bad6.yaml"), every, 1), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(),
                                "train.update_every.teacher: the teacher is frozen and never "
                                "updates"));
  ganfw_error_clear();
  /* data.other of another shape: a folder of RGB images beside the gray MNIST */
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("rgb"), 0755), 0);
  float img[3 * 28 * 28];
  for (int i = 0; i < 3 * 28 * 28; i++) img[i] = (float)(i % 7) / 7.0f;
  for (int k = 0; k < 24; k++) {
    char rel[64];
    snprintf(rel, sizeof rel, "rgb/%02d.png", k);
    CU_ASSERT_EQUAL_FATAL(ganfw_png_write_grid(path_in(rel), img, 1, 3, 28, 28, 1, 0, 0.0f, 0),
                          GANFW_OK);
  }
  snprintf(text, sizeof text,
           "seed: 1\ndevice: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, other: {dataset: folder, path: %s}}\n"
           "model: {plugin: convae}\ntrainer: {plugin: autoencoder}\n"
           "optim: {plugin: adam}\ntrain: {batch_size: 20, epochs: 1}\n%s",
           root, path_in("rgb"), base);
  write_file("bad7.yaml", text);
  expect_error("bad7.yaml", "data.other gives 3x28x28 images");
  /* data.pair: grayscale of gray images; a hole larger than the image */
  snprintf(text, sizeof text,
           "seed: 1\ndevice: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, pair: {kind: grayscale}}\n"
           "model: {plugin: convae}\ntrainer: {plugin: autoencoder}\n"
           "optim: {plugin: adam}\ntrain: {batch_size: 20, epochs: 1}\n%s",
           root, base);
  write_file("bad8.yaml", text);
  expect_error("bad8.yaml", "data.pair.kind grayscale needs colour images");
  snprintf(text, sizeof text,
           "seed: 1\ndevice: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, pair: {kind: masked, size: 40}}\n"
           "model: {plugin: convae}\ntrainer: {plugin: autoencoder}\n"
           "optim: {plugin: adam}\ntrain: {batch_size: 20, epochs: 1}\n%s",
           root, base);
  write_file("bad9.yaml", text);
  expect_error("bad9.yaml", "data.pair.size 40 is larger than the 28x28 images");
  snprintf(text, sizeof text,
           "seed: 1\ndevice: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, pair: {kind: blurred}}\n"
           "model: {plugin: convae}\ntrainer: {plugin: autoencoder}\n"
           "optim: {plugin: adam}\ntrain: {batch_size: 20, epochs: 1}\n%s",
           root, base);
  write_file("bad10.yaml", text);
  expect_error("bad10.yaml", "data.pair.kind 'blurred' is not one of");
}

/* The inputs data.pair makes: a hole of `size` pixels of the fill's normalised value at a
 * place fixed by (seed, epoch, index); blocks averaged and repeated; the luma of colour. */
static void test_pair_inputs(void) {
  const int c = 1, h = 8, w = 8, n = 3;
  float x[3 * 64], out[3 * 64], again[3 * 64];
  for (int i = 0; i < n * c * h * w; i++) x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
  ganfw_transform tf = {0}; /* [-1, 1]: fill 0.5 is 0 */
  ganfw_pair_spec masked = {.kind = GANFW_PAIR_MASKED, .size = 3, .fill = 0.5f};
  ganfw_pair_make(&masked, &tf, x, n, c, h, w, 9, 4, 10, out);
  ganfw_pair_make(&masked, &tf, x, n, c, h, w, 9, 4, 10, again);
  CU_ASSERT_EQUAL(memcmp(out, again, sizeof out), 0); /* the same key, the same hole */
  int holes_differ = 0;
  for (int i = 0; i < n; i++) {
    int changed = 0, zero = 0;
    for (int q = 0; q < h * w; q++) {
      changed += out[i * 64 + q] != x[i * 64 + q];
      zero += out[i * 64 + q] == 0.0f;
    }
    CU_ASSERT(zero >= 9);    /* the 3x3 hole, at the fill's value */
    CU_ASSERT(changed <= 9); /* nothing outside it */
    if (i && memcmp(out + i * 64, out, 64 * sizeof *out) != 0) holes_differ = 1;
  }
  CU_ASSERT(holes_differ);
  ganfw_pair_make(&masked, &tf, x, n, c, h, w, 9, 5, 10, again); /* another step */
  CU_ASSERT_NOT_EQUAL(memcmp(out, again, sizeof out), 0);
  ganfw_pair_spec down = {.kind = GANFW_PAIR_DOWNSCALED, .factor = 2};
  ganfw_pair_make(&down, &tf, x, 1, c, h, w, 9, 0, 0, out);
  const float block = (x[0] + x[1] + x[8] + x[9]) / 4.0f;
  CU_ASSERT_DOUBLE_EQUAL(out[0], block, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(out[9], block, 1e-6);
  CU_ASSERT_NOT_EQUAL(ganfw_pair_check(&down, "here", 1, 9, 8), GANFW_OK); /* 9 rows */
  ganfw_error_clear();
  float rgb[3 * 4], gray[3 * 4];
  for (int i = 0; i < 12; i++) rgb[i] = (float)i / 6.0f - 1.0f;
  ganfw_pair_spec g = {.kind = GANFW_PAIR_GRAYSCALE};
  ganfw_pair_make(&g, &tf, rgb, 1, 3, 2, 2, 0, 0, 0, gray);
  const float r = (rgb[0] + 1) / 2, gg = (rgb[4] + 1) / 2, b = (rgb[8] + 1) / 2;
  const float luma = 0.299f * r + 0.587f * gg + 0.114f * b;
  for (int k = 0; k < 3; k++) CU_ASSERT_DOUBLE_EQUAL(gray[k * 4], luma * 2 - 1, 1e-6);
}

int main(void) {
  CU_TestInfo tests[] = {{"distill: frozen teacher, the student learns", test_distill_learns},
                         {"alpha 0 trains on the labels alone", test_alpha_zero_is_labels_only},
                         {"bad configs name the key", test_bad_configs},
                         {"data.pair's inputs", test_pair_inputs},
                         CU_TEST_INFO_NULL};
  return gt_run_fixture("trainer_distill", tests, suite_init, suite_clean);
}
