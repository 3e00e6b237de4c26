/* What caps `find-batch` (issue 35, item 14): the largest batch training takes from the data
 * set (its size, with data.drop_last either way; data.other's when smaller), counted from
 * the files' headers (ganfw_dataset_count); on a CPU device the host's free memory; and no
 * confirming step larger than what the host has free when it would run. The size found is
 * one training accepts, and one more is refused, by `ganfw` and `ganfw validate` alike. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/error.h"
#include "base/log.h"
#include "data/data.h"
#include "io/png_io.h"
#include "tools/plan.h"
#include "testutil.h"

#define MIB      (1024 * 1024)
#define N_IMAGES 40 /* the training set: far fewer than the memory budgets below would fit */
#define N_OTHER  24 /* data.other */

static char root[64];
static char ganfw[4096];
static char out[65536];

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int write_text(const char *rel, const char *text) {
  FILE *f = fopen(path_in(rel), "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

/* A small DC-GAN on N_IMAGES synthetic digits under a memory_limit far above their need. */
static int write_configs(void) {
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 2, memory_limit: 256MiB}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
           "optim: {plugin: adam, lr: 2.0e-4}\n"
           "train: {batch_size: 16, max_steps: 1, sample_every: 0, checkpoint_every: 0}\n"
           "run: {out_dir: %s/run, samples: 4}\n",
           root, root);
  if (write_text("gan.yaml", text) != 0) return -1;
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 2}\n"
           "data: {dataset: mnist, path: %s/mnist}\n"
           "model: {plugin: cnn, blocks: [{channels: 4, kernel: 3, pool: max}], linear: [8]}\n"
           "optim: {plugin: adam, lr: 1.0e-3}\n"
           "train: {batch_size: 8, max_steps: 1}\n"
           "run: {out_dir: %s/cls}\n",
           root, root);
  return write_text("cls.yaml", text);
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_fbcaps_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0 || mkdir(path_in("other"), 0755) != 0)
    return -1;
  if (gt_write_mnist(path_in("mnist"), N_IMAGES, 10, 5) != 0) return -1;
  if (gt_write_mnist(path_in("other"), N_OTHER, 10, 6) != 0) return -1;
  ganfw_log_set_level(GANFW_LOG_WARN);
  return write_configs();
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs the ganfw binary with args (NULL-terminated); returns the exit code, output in out. */
static int run_ganfw(const char *const *args) {
  char cmd[8192];
  int n = snprintf(cmd, sizeof cmd, "'%s'", ganfw);
  for (const char *const *a = args; *a; a++) n += snprintf(cmd + n, sizeof cmd - n, " '%s'", *a);
  snprintf(cmd + n, sizeof cmd - n, " 2>&1");
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* find-batch of `config` with `sets` into a new result, its printed text in *text (free
 * both: ganfw_find_batch_free, free). */
static ganfw_find_batch_result *find(const char *config, const char *const *sets, int nsets,
                                     const ganfw_find_batch_options *opt, char **text) {
  ganfw_find_batch_result *res = calloc(1, sizeof *res);
  CU_ASSERT_PTR_NOT_NULL_FATAL(res);
  size_t len = 0;
  FILE *mem = open_memstream(text, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
  ganfw_status st = ganfw_find_batch(gt_config(config, sets, nsets), opt, res, mem);
  fclose(mem);
  if (st != GANFW_OK) printf("\n  find-batch: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  return res;
}

static void free_find(ganfw_find_batch_result *res, char *text) {
  ganfw_find_batch_free(res);
  free(res);
  free(text);
}

/* The batch size as a --set. */
static const char *batch_set(int64_t b) {
  static char buf[4][64];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "train.batch_size=%lld", (long long)b);
  return buf[k];
}

/* --- the data set's size ------------------------------------------------------------------ */

/* 256 MiB would take hundreds of samples of this model: the answer is the data set's 40,
 * said so, confirmed by a real step, trained on by `ganfw`, and 41 is refused. */
static void test_capped_at_data_set(void) {
  ganfw_find_batch_options opt = {.margin = 0.05, .confirm = 1};
  char *text = NULL;
  ganfw_find_batch_result *res = find(path_in("gan.yaml"), NULL, 0, &opt, &text);
  printf("\n%s", text);
  CU_ASSERT_EQUAL(res->data_size, N_IMAGES);
  CU_ASSERT_EQUAL(res->data_cap, N_IMAGES);
  CU_ASSERT_EQUAL(res->batch, N_IMAGES);
  CU_ASSERT_EQUAL(res->capped, 1);
  for (int32_t i = 0; i < res->n_tries; i++) CU_ASSERT(res->tries[i].batch <= N_IMAGES);
  CU_ASSERT(res->plan.peak_reserved < res->limit / 2); /* memory was not what stopped it */
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "at most 40 (the data set's size)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "capped at 40: the data set's size (mnist '"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "40 images; data.drop_last is true"));
  CU_ASSERT_EQUAL(res->confirmed, 1);
  CU_ASSERT_EQUAL(res->confirm_skipped, 0);
  CU_ASSERT_EQUAL(res->real.oom, 0);
  CU_ASSERT_EQUAL(res->real.steps_done, 1);
  /* training takes the size found, and refuses one more */
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){path_in("gan.yaml"), "--set", batch_set(res->batch), NULL}), 0);
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){path_in("gan.yaml"), "--set", batch_set(res->batch + 1), NULL}),
      2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "train.batch_size 41 is larger than the 40 images"));
  free_find(res, text);
  /* the command line says the same */
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){"find-batch", path_in("gan.yaml"), "--no-confirm", NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Largest batch that fits: 40 "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "capped at 40: the data set's size"));
}

/* Without drop_last a larger batch still never trains (only full batches do): the same cap,
 * with that reason. */
static void test_capped_without_drop_last(void) {
  const char *sets[] = {"data.drop_last=false"};
  ganfw_find_batch_options opt = {.margin = 0.05, .confirm = 0};
  char *text = NULL;
  ganfw_find_batch_result *res = find(path_in("gan.yaml"), sets, 1, &opt, &text);
  CU_ASSERT_EQUAL(res->batch, N_IMAGES);
  CU_ASSERT_EQUAL(res->capped, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "a training step takes full batches only"));
  CU_ASSERT_EQUAL(res->confirmed, 0);
  free_find(res, text);
}

/* With gradient accumulation (batches in multiples of 3) the cap is the largest multiple
 * within the set. */
static void test_capped_multiple_of_micro_batches(void) {
  const char *sets[] = {"memory=[{plugin: accumulate, steps: 3}]", "train.batch_size=12"};
  ganfw_find_batch_options opt = {.margin = 0.05, .confirm = 0};
  ganfw_find_batch_result *res = calloc(1, sizeof *res);
  CU_ASSERT_PTR_NOT_NULL_FATAL(res);
  ganfw_status st = ganfw_find_batch(gt_config(path_in("gan.yaml"), sets, 2), &opt, res, NULL);
  if (st == GANFW_ERR_PLUGIN) {
    printf("\n  accumulate: skipped (%s)", ganfw_error_message());
  } else {
    CU_ASSERT_EQUAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(res->granularity, 3);
    CU_ASSERT_EQUAL(res->batch, 39);
    CU_ASSERT_EQUAL(res->capped, 1);
  }
  ganfw_find_batch_free(res);
  free(res);
}

/* data.other (24 images) under a data set of 40: the smaller one caps, and training agrees. */
static void test_capped_at_data_other(void) {
  char other[700];
  snprintf(other, sizeof other, "data.other={dataset: mnist, path: %s}", path_in("other"));
  const char *sets[] = {other};
  ganfw_find_batch_options opt = {.margin = 0.05, .confirm = 0};
  char *text = NULL;
  ganfw_find_batch_result *res = find(path_in("gan.yaml"), sets, 1, &opt, &text);
  CU_ASSERT_EQUAL(res->data_size, N_OTHER);
  CU_ASSERT_EQUAL(res->batch, N_OTHER);
  CU_ASSERT_EQUAL(res->capped, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "capped at 24: data.other's size"));
  free_find(res, text);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("gan.yaml"), "--set", other, "--set",
                                             batch_set(N_OTHER + 1), NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "fewer than train.batch_size 25"));
}

/* The rule is training's, whatever the trainer: a classifier batch larger than the set is
 * refused when the session opens, so `ganfw validate` says so too (it called such a config
 * valid when only the GAN step checked). */
static void test_classifier_batch_refused(void) {
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("cls.yaml"), "--set",
                                             batch_set(N_IMAGES + 1), NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "train.batch_size 41 is larger than the 40 images"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("cls.yaml"), "--set",
                                             batch_set(N_IMAGES), NULL}),
                  0);
}

/* --- the host's memory ---------------------------------------------------------------------- */

typedef struct host_script {
  int64_t bytes[2]; /* what the host has free at the first call, and at later ones */
  int calls;
} host_script;

static int64_t scripted_host(void *ud, char *source, size_t n) {
  host_script *h = ud;
  snprintf(source, n, "the test's host");
  return h->bytes[h->calls++ > 0];
}

/* On the CPU the host's memory is the device's: a memory_limit of 256 MiB on a host with
 * less free than batch 40 needs plans against the host's figure, and says so. */
static void test_capped_by_host_memory(void) {
  ganfw_probe_result plan40;
  ganfw_status st =
      ganfw_plan_make(gt_config(path_in("gan.yaml"), NULL, 0), N_IMAGES, NULL, &plan40);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  const int64_t need = plan40.peak_reserved;
  ganfw_probe_result_free(&plan40);
  host_script h = {{need - 1, need - 1}, 0};
  ganfw_find_batch_options opt = {
      .margin = 0.0, .confirm = 0, .host_free = scripted_host, .host_free_ud = &h};
  char *text = NULL;
  ganfw_find_batch_result *res = find(path_in("gan.yaml"), NULL, 0, &opt, &text);
  printf("\n%s", text);
  CU_ASSERT_EQUAL(h.calls, 1);
  CU_ASSERT_EQUAL(res->from_host, 1);
  CU_ASSERT_EQUAL(res->from_limit, 0);
  CU_ASSERT_EQUAL(res->host_free, need - 1);
  CU_ASSERT_EQUAL(res->budget, need - 1);
  CU_ASSERT(res->batch > 0 && res->batch < N_IMAGES);
  CU_ASSERT_EQUAL(res->capped, 0);
  CU_ASSERT(res->plan.peak_reserved <= need - 1);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(text, "(the host's free memory: the test's host, below device.memory_limit 256.00 "
                   "MiB)"));
  CU_ASSERT_PTR_NULL(strstr(text, "capped at"));
  free_find(res, text);
}

/* The host's memory shrank between the search and the confirmation: the real step is not
 * run, and the answer says why and what the plan predicts. */
static void test_confirm_skipped_without_host_memory(void) {
  host_script h = {{(int64_t)4096 * MIB, 1 * MIB}, 0};
  ganfw_find_batch_options opt = {
      .margin = 0.05, .confirm = 1, .host_free = scripted_host, .host_free_ud = &h};
  char *text = NULL;
  ganfw_find_batch_result *res = find(path_in("gan.yaml"), NULL, 0, &opt, &text);
  printf("\n%s", text);
  CU_ASSERT_EQUAL(h.calls, 2);
  CU_ASSERT_EQUAL(res->batch, N_IMAGES); /* the memory_limit (256 MiB) is below 4 GiB */
  CU_ASSERT_EQUAL(res->from_limit, 1);
  CU_ASSERT_EQUAL(res->confirm_skipped, 1);
  CU_ASSERT_EQUAL(res->confirmed, 0);
  CU_ASSERT_EQUAL(res->confirm_host_free, 1 * MIB);
  CU_ASSERT_EQUAL(res->real.steps_done, 0);
  char want[256];
  snprintf(want, sizeof want,
           "Not confirming with a real step: at batch 40 it would reserve %.2f MiB, more than "
           "the host's 1.00 MiB free now (the test's host). The plan predicts a peak of %.2f "
           "MiB allocated",
           (double)res->plan.peak_reserved / MIB, (double)res->plan.peak_allocated / MIB);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, want));
  free_find(res, text);
}

/* The machine's own reading (no callback): some free memory, and on the CPU no more budget
 * than that. */
static void test_machine_host_memory(void) {
  const char *sets[] = {"device.memory_limit=64TiB"};
  ganfw_find_batch_options opt = {.margin = 0.05, .confirm = 0};
  char *text = NULL;
  ganfw_find_batch_result *res = find(path_in("gan.yaml"), sets, 1, &opt, &text);
  CU_ASSERT(res->host_free > 0);
  CU_ASSERT_EQUAL(res->from_host, 1);
  CU_ASSERT_EQUAL(res->budget, res->host_free);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "(the host's free memory: "));
  free_find(res, text);
}

/* --- counting a data set without reading it ------------------------------------------------ */

static int64_t opened_size(const char *kind, const char *path, int32_t train) {
  ganfw_dataset *ds = NULL;
  ganfw_status st = ganfw_dataset_open(kind, path, train, NULL, &ds);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  const int64_t n = ds ? ganfw_dataset_size(ds) : -1;
  ganfw_dataset_destroy(ds);
  return n;
}

static void expect_count(const char *kind, const char *path, int32_t train, int64_t want) {
  int64_t n = -1;
  ganfw_status st = ganfw_dataset_count(kind, path, train, &n);
  if (st != GANFW_OK) printf("\n  count %s %s: %s\n", kind, path, ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(n, want);
  CU_ASSERT_EQUAL(opened_size(kind, path, train), want);
}

static int write_cifar_batch(const char *path, int records) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  unsigned char rec[3073] = {0};
  for (int i = 0; i < records; i++) {
    rec[0] = (unsigned char)(i % 10);
    fwrite(rec, 1, sizeof rec, f);
  }
  return fclose(f);
}

/* Every source's count equals the size of the set it opens: MNIST plain and gzipped, CIFAR-10
 * (train and test), a folder of PNG files (other files, one of them named *.png, left out). */
static void test_dataset_count(void) {
  expect_count("mnist", path_in("mnist"), 1, N_IMAGES);
  expect_count("mnist", path_in("mnist"), 0, 10);
  expect_count("fashion_mnist", path_in("mnist"), 1, N_IMAGES);
  char cmd[1024];
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("gz"), 0755), 0);
  snprintf(cmd, sizeof cmd, "cp '%s'/* '%s' && gzip '%s'/train-*", path_in("mnist"), path_in("gz"),
           path_in("gz"));
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  expect_count("mnist", path_in("gz"), 1, N_IMAGES);

  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("cifar"), 0755), 0);
  for (int b = 1; b <= 5; b++) {
    char name[64];
    snprintf(name, sizeof name, "cifar/data_batch_%d.bin", b);
    CU_ASSERT_EQUAL_FATAL(write_cifar_batch(path_in(name), b + 1), 0);
  }
  CU_ASSERT_EQUAL_FATAL(write_cifar_batch(path_in("cifar/test_batch.bin"), 7), 0);
  expect_count("cifar10", path_in("cifar"), 1, 2 + 3 + 4 + 5 + 6);
  expect_count("cifar10", path_in("cifar"), 0, 7);

  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("pngs"), 0755), 0);
  CU_ASSERT_EQUAL_FATAL(write_text("pngs/not_an_image.png", "not an image\n"), 0);
  CU_ASSERT_EQUAL_FATAL(write_text("pngs/notes.txt", "not an image\n"), 0);
  uint8_t px[4 * 4 * 3] = {0};
  const char *names[] = {"a.png", "b.PNG", "c.png"};
  for (int i = 0; i < 3; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "pngs/%s", names[i]);
    CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(path_in(rel), px, 4, 4, 3), GANFW_OK);
  }
  expect_count("folder", path_in("pngs"), 1, 3);

  /* what the readers say of a missing or damaged set, and an unknown kind */
  int64_t n = 7;
  CU_ASSERT_EQUAL(ganfw_dataset_count("mnist", path_in("nowhere"), 1, &n), GANFW_ERR_IO);
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "nowhere/train-images-idx3-ubyte"));
  CU_ASSERT_EQUAL(write_text("cifar/data_batch_3.bin", "short"), 0);
  CU_ASSERT_EQUAL(ganfw_dataset_count("cifar10", path_in("cifar"), 1, &n), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "not a positive multiple"));
  CU_ASSERT_EQUAL(ganfw_dataset_count("folder", path_in("mnist"), 1, &n), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "holds no PNG or JPEG images"));
  CU_ASSERT_EQUAL(ganfw_dataset_count("imagenet", path_in("mnist"), 1, &n), GANFW_ERR_CONFIG);
  ganfw_error_clear();
}

static CU_TestInfo tests[] = {
    {"capped at the data set's size, confirmed, trained on", test_capped_at_data_set},
    {"capped without drop_last too", test_capped_without_drop_last},
    {"capped at a multiple of the micro-batches", test_capped_multiple_of_micro_batches},
    {"capped at data.other's size", test_capped_at_data_other},
    {"a classifier batch larger than the set is refused", test_classifier_batch_refused},
    {"budget capped by the host's free memory", test_capped_by_host_memory},
    {"no confirming step beyond the host's free memory", test_confirm_skipped_without_host_memory},
    {"the machine's free memory is read", test_machine_host_memory},
    {"data set counts from headers and listings", test_dataset_count},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("find-batch caps", tests, suite_init, suite_clean);
}
