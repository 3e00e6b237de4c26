/* Conditional GANs (model.conditional) end to end on a small synthetic MNIST:
 *   the nets' first layers take the classes (G nz + K channels, D 1 + K);
 *   the generator's input is the noise joined with the class one-hot, bit for bit;
 *   resume of a conditional run is bitwise the uninterrupted one;
 *   `ganfw sample --class` draws one class (other classes give other images), the default
 *   grid one class per row, and bad classes are refused;
 *   `ganfw score` reports the class-conditional accuracy (per class with --per-class) and
 *   refuses --per-class for an unconditional generator. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "io/safetensors.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "tools/sample.h"
#include "tools/score.h"
#include "train/ema.h"
#include "train/session.h"
#include "train/loop.h"
#include "train/trainer.h"

static char root[64];

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

/* Called from the suite's init (no CUnit assertions there): 0 on success. */
static int write_file(const char *name, const char *text) {
  FILE *f = fopen(path_in(name), "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f) == 0 ? 0 : -1;
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_cgan_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 96, 40, 5) != 0) return -1;
  char text[1024];
  for (int cond = 0; cond <= 1; cond++) {
    snprintf(text, sizeof text,
             "seed: 3\n"
             "device: {type: cpu, threads: 2}\n"
             "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
             "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8, conditional: %s}\n"
             "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
             "train: {batch_size: 8, max_steps: 6, log_every: 0, sample_every: 0,"
             " checkpoint_every: 3}\n"
             "run: {out_dir: %s/%s, samples: 20, sample_nrow: 10}\n",
             root, cond ? "true" : "false", root, cond ? "c" : "u");
    if (write_file(cond ? "c.yaml" : "u.yaml", text) != 0) return -1;
  }
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 2}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: cnn, blocks: [{channels: 8, pool: max}], linear: [16]}\n"
           "optim: {plugin: adam, lr: 0.003}\n"
           "train: {batch_size: 16, max_steps: 10, log_every: 0, checkpoint_every: 10}\n"
           "run: {out_dir: %s/judge}\n",
           root, root);
  return write_file("judge.yaml", text);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static ganfw_status train(const char *config, const char *const *sets, int nsets) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(path_in(config), sets, nsets, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(run->config);
  if (st == GANFW_OK) st = ganfw_train(s);
  if (st != GANFW_OK) printf("\n  %s: %s\n", config, ganfw_error_message());
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

static void test_train_and_shapes(void) {
  CU_ASSERT_EQUAL_FATAL(train("c.yaml", NULL, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(train("u.yaml", NULL, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(train("judge.yaml", NULL, 0), GANFW_OK);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("c/checkpoints/step_00000006.safetensors"), &f),
                        GANFW_OK);
  const ganfw_st_tensor *g0 = ganfw_st_find(f, "generator.main.0.weight");
  const ganfw_st_tensor *d0 = ganfw_st_find(f, "discriminator.main.0.weight");
  CU_ASSERT_PTR_NOT_NULL_FATAL(g0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d0);
  CU_ASSERT_EQUAL(g0->shape[0], 16 + 10); /* ConvTranspose weight [in, out, k, k] */
  CU_ASSERT_EQUAL(d0->shape[1], 1 + 10);  /* Conv weight [out, in, k, k] */
  ganfw_st_close(f);
}

/* 3 steps, stop, resume to 6: the same checkpoint, byte for byte. */
static void test_resume_bitwise(void) {
  char out[600];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("c2"));
  const char *first[] = {out, "train.max_steps=3"};
  CU_ASSERT_EQUAL_FATAL(train("c.yaml", first, 2), GANFW_OK);
  const char *second[] = {out, "train.resume=latest"};
  CU_ASSERT_EQUAL_FATAL(train("c.yaml", second, 2), GANFW_OK);
  gt_assert_same_checkpoint(path_in("c/checkpoints/step_00000006.safetensors"),
                            path_in("c2/checkpoints/step_00000006.safetensors"), NULL, 0);
}

/* ganfw_gan_generate of class 3 equals G run on [z, one_hot(3)] built here, bit for bit. */
static void test_generator_input(void) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_data_info info;
  CU_ASSERT_EQUAL_FATAL(
      ganfw_sample_data_info(path_in("c/checkpoints/step_00000006.safetensors"), &info), GANFW_OK);
  CU_ASSERT_EQUAL(info.num_classes, 10);
  CU_ASSERT_EQUAL_FATAL(ganfw_run_open_file(path_in("c/config.resolved.yaml"), NULL, 0, &run),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_session_open(run, 0, &info, &s), GANFW_OK);
  CU_ASSERT_EQUAL(s->n_classes, 10);
  int32_t used = 0;
  CU_ASSERT_EQUAL_FATAL(
      ganfw_ema_load_generator(s, path_in("c/checkpoints/step_00000006.safetensors"), 1, &used),
      GANFW_OK);
  const int64_t n = 4;
  ganfw_tensor *z = ganfw_gan_fixed_noise(s, n, 7);
  CU_ASSERT_PTR_NOT_NULL_FATAL(z);
  int32_t labels[4] = {3, 3, 3, 3};
  ganfw_tensor *y = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_generate(s, z, labels, &y), GANFW_OK);
  float zh[4 * 16], zc[4 * 26];
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(z, zh, sizeof zh), GANFW_OK);
  for (int64_t i = 0; i < n; i++)
    for (int j = 0; j < 26; j++) zc[i * 26 + j] = j < 16 ? zh[i * 16 + j] : (j - 16 == 3);
  int64_t shape[4] = {n, 26, 1, 1};
  ganfw_tensor *zt = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "zc");
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(zt, zc, sizeof zc), GANFW_OK);
  ganfw_tensor *y2 = NULL;
  ganfw_net_set_train(s->generator, 1, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(s->generator, zt, NULL, &y2), GANFW_OK);
  ganfw_net_set_train(s->generator, 1, 1);
  float *a = gt_alloc((size_t)y->nbytes), *b = gt_alloc((size_t)y2->nbytes);
  CU_ASSERT_EQUAL_FATAL(y->nbytes, y2->nbytes);
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(y, a, y->nbytes), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(y2, b, y2->nbytes), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(a, b, (size_t)y->nbytes), 0);
  /* another class, other images */
  int32_t other[4] = {4, 4, 4, 4};
  ganfw_tensor *y4 = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_generate(s, z, other, &y4), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(y4, b, y4->nbytes), GANFW_OK);
  CU_ASSERT_NOT_EQUAL(memcmp(a, b, (size_t)y->nbytes), 0);
  int32_t bad[4] = {3, 10, 3, 3};
  ganfw_tensor *yb = NULL;
  CU_ASSERT_EQUAL(ganfw_gan_generate(s, z, bad, &yb), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "class 10"));
  ganfw_error_clear();
  gt_free(a);
  gt_free(b);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(y2);
  ganfw_tensor_destroy(y4);
  ganfw_tensor_destroy(zt);
  ganfw_tensor_destroy(z);
  ganfw_session_close(s);
  ganfw_run_close(run);
}

static void test_sample_class(void) {
  ganfw_sample_args a = {.source = path_in("c"),
                         .output = path_in("threes.png"),
                         .n = 16,
                         .nrow = 4,
                         .has_class = 1,
                         .cls = 3};
  CU_ASSERT_EQUAL_FATAL(ganfw_sample(&a), GANFW_OK);
  a.output = path_in("fours.png");
  a.cls = 4;
  CU_ASSERT_EQUAL_FATAL(ganfw_sample(&a), GANFW_OK);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", path_in("threes.png"), path_in("fours.png"));
  CU_ASSERT_NOT_EQUAL(system(cmd), 0);
  a.output = path_in("bad.png");
  a.cls = 10; /* out of range */
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "classes 0..9"));
  ganfw_error_clear();
  a.source = path_in("u");
  a.cls = 1; /* an unconditional model */
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "not conditional"));
  ganfw_error_clear();
  struct stat sb;
  CU_ASSERT_NOT_EQUAL(stat(path_in("bad.png"), &sb), 0);
  /* the grid of the run: one class a row of 10 */
  CU_ASSERT_EQUAL(stat(path_in("c/samples/step_000006.png"), &sb), 0);
}

static void test_score_per_class(void) {
  ganfw_score_args a = {.source = path_in("c"),
                        .classifier = path_in("judge"),
                        .n = 100,
                        .batch = 50,
                        .no_fid = 1,
                        .per_class = 1};
  ganfw_score_result r;
  memset(&r, 0, sizeof r);
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  ganfw_status st = ganfw_score(&a, &r, m);
  fclose(m);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(r.conditional, 1);
  CU_ASSERT(r.class_accuracy >= 0 && r.class_accuracy <= 1);
  double mean = 0; /* 100 images, 10 a class: the mean of the classes is the overall share */
  for (int k = 0; k < 10; k++) mean += r.per_class_accuracy[k] / 10;
  CU_ASSERT_DOUBLE_EQUAL(mean, r.class_accuracy, 1e-12);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "class-conditional accuracy"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "class 9:"));
  free(text);
  a.source = path_in("u");
  CU_ASSERT_EQUAL(ganfw_score(&a, &r, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "--per-class"));
  ganfw_error_clear();
}

static void test_classifier_refuses_conditional(void) {
  const char *sets[] = {"model.conditional=true"};
  CU_ASSERT_EQUAL(train("judge.yaml", sets, 1), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "model.conditional"));
  ganfw_error_clear();
}

int main(void) {
  CU_TestInfo tests[] = {
      {"conditional nets take the classes", test_train_and_shapes},
      {"resume of a conditional run is bitwise", test_resume_bitwise},
      {"G's input is the noise joined with the one-hot", test_generator_input},
      {"sample --class, bad classes refused", test_sample_class},
      {"score: class-conditional accuracy", test_score_per_class},
      {"a classifier refuses model.conditional", test_classifier_refuses_conditional},
      CU_TEST_INFO_NULL,
  };
  return gt_run_fixture("cgan", tests, suite_init, suite_clean);
}
