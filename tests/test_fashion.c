/* Fashion-MNIST (data.dataset: fashion_mnist) end to end on a small gzipped IDX set written
 * here in Debian's layout: the kind reads the same IDX files as MNIST with its ten class
 * names, its default path and its install hint; the test split is the t10k files and never
 * augmented; a classifier trains with data.augment and several loader workers, bit for bit
 * as with one worker and after a resume; SIGTERM with busy workers still writes a
 * checkpoint and exits 143; `ganfw eval` names the classes. With the real data set in
 * /usr/share/datasets/fashion-mnist it also checks its standard 60,000 / 10,000 split. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "base/error.h"
#include "config/config.h"
#include "data/data.h"
#include "io/safetensors.h"
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

static int msg_has(const char *s) {
  const char *m = ganfw_error_message();
  if (strstr(m, s)) return 1;
  printf("\n  message \"%s\" lacks \"%s\"\n", m, s);
  return 0;
}

/* Replaces dir/name by dir/name.gz, as the Debian package ships them. */
static int gzip_file(const char *dir, const char *name) {
  char plain[700], gz[710];
  snprintf(plain, sizeof plain, "%s/%s", dir, name);
  snprintf(gz, sizeof gz, "%s.gz", plain);
  FILE *f = fopen(plain, "rb");
  gzFile g = gzopen(gz, "wb");
  if (!f || !g) return -1;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    if (gzwrite(g, buf, (unsigned)n) != (int)n) return -1;
  fclose(f);
  if (gzclose(g) != Z_OK) return -1;
  return unlink(plain);
}

static const char *const idx_files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

/* 300 training and 60 test images of gt_write_mnist's strokes (label = index % 10), gzipped
 * in fashion/, and the same files plain in plain/. */
static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_fashion_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("fashion"), 0755) != 0 || mkdir(path_in("plain"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("fashion"), 300, 60, 21) != 0) return -1;
  if (gt_write_mnist(path_in("plain"), 300, 60, 21) != 0) return -1;
  for (int i = 0; i < 4; i++)
    if (gzip_file(path_in("fashion"), idx_files[i]) != 0) return -1;
  return 0;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* --- the kind ------------------------------------------------------------------------ */

/* The gzipped files read as the same images and labels as their plain MNIST twins, with ten
 * named classes; the test split is the t10k pair. */
static void test_open_and_names(void) {
  ganfw_dataset *tr = NULL, *te = NULL, *mn = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open("fashion_mnist", path_in("fashion"), 1, NULL, &tr),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open("fashion_mnist", path_in("fashion"), 0, NULL, &te),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open("mnist", path_in("plain"), 1, NULL, &mn), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(tr), 300);
  CU_ASSERT_EQUAL(ganfw_dataset_size(te), 60);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(tr), 10);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_dataset_name(tr), "Fashion-MNIST train"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_dataset_name(te), "Fashion-MNIST test"));
  int32_t c, h, w;
  ganfw_dataset_shape(tr, &c, &h, &w);
  CU_ASSERT(c == 1 && h == 28 && w == 28);
  static const char *const names[10] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                        "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                        "Bag",         "Ankle boot"};
  for (int32_t k = 0; k < 10; k++) {
    const char *got = ganfw_dataset_class_name(tr, k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_STRING_EQUAL(got, names[k]);
  }
  CU_ASSERT_PTR_NULL(ganfw_dataset_class_name(tr, 10));
  CU_ASSERT_PTR_NULL(ganfw_dataset_class_name(tr, -1));
  CU_ASSERT_PTR_NULL(ganfw_dataset_class_name(mn, 3)); /* digits are their own names */
  float a[784], b[784];
  int differ = 0;
  for (int64_t i = 0; i < 300; i += 7) {
    int32_t la = -1, lb = -2;
    CU_ASSERT_EQUAL(ganfw_dataset_get(tr, i, 0, a, &la), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_dataset_get(mn, i, 0, b, &lb), GANFW_OK);
    differ += la != lb || la != (int32_t)(i % 10) || memcmp(a, b, sizeof a) != 0;
  }
  CU_ASSERT_EQUAL(differ, 0);
  ganfw_dataset_destroy(tr);
  ganfw_dataset_destroy(te);
  ganfw_dataset_destroy(mn);
}

/* A missing folder says how to install the package and names data.path; a label past the
 * ten classes is refused naming the file. */
static void test_missing_and_bad_labels(void) {
  ganfw_dataset *ds = (ganfw_dataset *)1;
  CU_ASSERT_EQUAL(ganfw_dataset_open("fashion_mnist", path_in("nowhere"), 1, NULL, &ds),
                  GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(ds);
  CU_ASSERT(msg_has(path_in("nowhere/train-images-idx3-ubyte")));
  CU_ASSERT(msg_has("sudo apt-get install dataset-fashion-mnist"));
  CU_ASSERT(msg_has("scripts/deps.sh"));
  CU_ASSERT(msg_has("data.path"));
  CU_ASSERT(msg_has("Fashion-MNIST: "));
  CU_ASSERT(strstr(ganfw_error_message(), "fetch_mnist") == NULL);

  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("badlabel"), 0755), 0);
  CU_ASSERT_EQUAL_FATAL(gt_write_mnist(path_in("badlabel"), 20, 10, 3), 0);
  FILE *f = fopen(path_in("badlabel/train-labels-idx1-ubyte"), "r+b");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fseek(f, 8 + 13, SEEK_SET);
  fputc(10, f);
  fclose(f);
  CU_ASSERT_EQUAL(ganfw_dataset_open("fashion_mnist", path_in("badlabel"), 1, NULL, &ds),
                  GANFW_ERR_IO);
  CU_ASSERT(msg_has(path_in("badlabel/train-labels-idx1-ubyte")) && msg_has("item 13") &&
            msg_has("10 classes"));
  /* MNIST takes the same file: its classes are its labels */
  CU_ASSERT_EQUAL(ganfw_dataset_open("mnist", path_in("badlabel"), 1, NULL, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(ds), 11);
  ganfw_dataset_destroy(ds);
}

/* data.path defaults to the package's folder (recorded in the resolved config), an explicit
 * one wins, a folder needs one, and a misspelt kind is named with the nearest. */
static void test_source_config(void) {
  const struct {
    const char *yaml;
    ganfw_status want;
    const char *path, *msg;
  } cases[] = {
      {"data: {dataset: fashion_mnist}\n", GANFW_OK, "/usr/share/datasets/fashion-mnist", NULL},
      {"data: {dataset: fashion_mnist, path: /x/f}\n", GANFW_OK, "/x/f", NULL},
      {"data: {}\n", GANFW_OK, "data/mnist", NULL},
      {"data: {dataset: cifar10}\n", GANFW_OK, "data/cifar10", NULL},
      {"data: {dataset: folder}\n", GANFW_ERR_CONFIG, NULL, "data.path is required"},
      {"data: {dataset: fashion-mnist}\n", GANFW_ERR_CONFIG, NULL,
       "src.yaml:1:17: data.dataset: unknown dataset kind 'fashion-mnist' (did you mean "
       "'fashion_mnist'?); the kinds are mnist, fashion_mnist, cifar10 and folder"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ganfw_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(cases[i].yaml, "src.yaml", &cfg), GANFW_OK);
    const char *kind = NULL, *path = NULL;
    ganfw_status st = ganfw_data_source_from_config(
        ganfw_cfg_section(ganfw_config_root(cfg), "data"), &kind, &path);
    if (st != cases[i].want) printf("\n  %s: %s\n", cases[i].yaml, ganfw_error_message());
    CU_ASSERT_EQUAL(st, cases[i].want);
    if (st == GANFW_OK) {
      CU_ASSERT_STRING_EQUAL(path, cases[i].path);
      char text[4096] = "";
      FILE *f = fmemopen(text, sizeof text - 1, "w");
      CU_ASSERT_EQUAL(ganfw_config_write_resolved(cfg, f), GANFW_OK);
      fclose(f);
      CU_ASSERT_PTR_NOT_NULL(strstr(text, cases[i].path));
    } else {
      CU_ASSERT(msg_has(cases[i].msg));
    }
    ganfw_config_destroy(cfg);
  }
  CU_ASSERT_STRING_EQUAL(ganfw_dataset_default_path("fashion_mnist"),
                         "/usr/share/datasets/fashion-mnist");
  CU_ASSERT_PTR_NULL(ganfw_dataset_default_path("folder"));
  CU_ASSERT_PTR_NULL(ganfw_dataset_default_path("imagenet"));
}

/* The test split is never augmented: with crop_padding and hflip asked for, its images are
 * those without, while the training split's move. */
static void test_test_split_plain(void) {
  const ganfw_transform aug = {.crop_padding = 4, .hflip = 1};
  ganfw_dataset *te_aug = NULL, *te = NULL, *tr_aug = NULL, *tr = NULL;
  const char *dir = path_in("fashion");
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open("fashion_mnist", dir, 0, &aug, &te_aug), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open("fashion_mnist", dir, 0, NULL, &te), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open("fashion_mnist", dir, 1, &aug, &tr_aug), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open("fashion_mnist", dir, 1, NULL, &tr), GANFW_OK);
  float a[784], b[784];
  int test_moved = 0, train_moved = 0;
  for (int64_t i = 0; i < 60; i++) {
    const uint64_t key = ganfw_data_sample_key(1, 0, i);
    CU_ASSERT_EQUAL(ganfw_dataset_get(te_aug, i, key, a, NULL), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_dataset_get(te, i, key, b, NULL), GANFW_OK);
    test_moved += memcmp(a, b, sizeof a) != 0;
    CU_ASSERT_EQUAL(ganfw_dataset_get(tr_aug, i, key, a, NULL), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_dataset_get(tr, i, key, b, NULL), GANFW_OK);
    train_moved += memcmp(a, b, sizeof a) != 0;
  }
  CU_ASSERT_EQUAL(test_moved, 0);
  CU_ASSERT(train_moved > 40); /* 1/81 of the crops are the identity, half of them unflipped */
  ganfw_dataset_destroy(te_aug);
  ganfw_dataset_destroy(te);
  ganfw_dataset_destroy(tr_aug);
  ganfw_dataset_destroy(tr);
}

/* --- training ------------------------------------------------------------------------ */

/* A small classifier on the fixture with the training augmentation and `workers` loader
 * threads: 15 batches of 20 a epoch, 3 epochs, a checkpoint every 9 steps. */
static void write_config(const char *name, const char *out_dir, int workers) {
  FILE *f = fopen(path_in(name), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 4\n"
          "device: {type: cpu, threads: 2}\n"
          "data:\n"
          "  dataset: fashion_mnist\n"
          "  path: %s/fashion\n"
          "  augment: {crop_padding: 2, hflip: true}\n"
          "  workers: %d\n"
          "model:\n"
          "  plugin: cnn\n"
          "  blocks:\n"
          "    - {channels: 8, pool: max}\n"
          "    - {channels: 16, pool: max, dropout: 0.1}\n"
          "  linear: [32]\n"
          "optim: {plugin: adam, lr: 3.0e-3}\n"
          "train: {batch_size: 20, epochs: 3, log_every: 1, checkpoint_every: 9}\n"
          "run: {out_dir: %s/%s}\n",
          root, workers, root, out_dir);
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
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
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

/* The metadata that places a run: equal in two checkpoints of the same point. */
static const char *const position_keys[] = {"step", "epoch", "loader_position", "rng_offset",
                                            "seed"};

/* Trains with one worker and with three: the loss falls, the test accuracy (on the 60 t10k
 * images) is far above chance, and the two runs end with the same weights, bit for bit. */
static void test_trains_same_with_workers(void) {
  write_config("one.yaml", "one", 1);
  write_config("three.yaml", "three", 3);
  CU_ASSERT_EQUAL_FATAL(train(path_in("one.yaml"), NULL, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(train(path_in("three.yaml"), NULL, 0), GANFW_OK);
  double loss[64], acc[8];
  int n = 0;
  read_column(path_in("one/metrics.csv"), 2, loss, 64, &n);
  CU_ASSERT_EQUAL_FATAL(n, 45);
  const double first = (loss[0] + loss[1] + loss[2]) / 3,
               last = (loss[42] + loss[43] + loss[44]) / 3;
  read_column(path_in("one/eval.csv"), 3, acc, 8, &n);
  CU_ASSERT_EQUAL_FATAL(n, 3);
  printf("\n  train loss %.3f -> %.3f, test accuracy by epoch %.2f %.2f %.2f ", first, last, acc[0],
         acc[1], acc[2]);
  CU_ASSERT(last < 0.7 * first);
  CU_ASSERT(acc[2] > 0.3);
  gt_assert_same_checkpoint(path_in("one/checkpoints/step_00000045.safetensors"),
                            path_in("three/checkpoints/step_00000045.safetensors"), position_keys,
                            sizeof position_keys / sizeof position_keys[0]);
}

/* A run resumed from the one-worker run's step 18 (in its second epoch) with two workers ends
 * as the straight run did: the augmentation of every batch is that sample's in that epoch. */
static void test_resume_with_workers(void) {
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("resumed"), 0755), 0);
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("resumed/checkpoints"), 0755), 0);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path_in("one/checkpoints/step_00000018.safetensors"),
           path_in("resumed/checkpoints/"));
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  char out[512];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("resumed"));
  const char *sets[] = {out, "train.resume=latest", "data.workers=2"};
  CU_ASSERT_EQUAL_FATAL(train(path_in("one.yaml"), sets, 3), GANFW_OK);
  gt_assert_same_checkpoint(path_in("one/checkpoints/step_00000045.safetensors"),
                            path_in("resumed/checkpoints/step_00000045.safetensors"), position_keys,
                            sizeof position_keys / sizeof position_keys[0]);
}

/* Runs the ganfw binary with args (a shell-quoted string), stdout and stderr into out. */
static int run_ganfw(const char *args, char *out, size_t n) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s/ganfw' %s 2>&1", build ? build : ".", args);
  FILE *p = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  size_t len = fread(out, 1, n - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* `ganfw eval` measures on the 60 t10k images and names the classes beside the rows. */
static void test_eval_names_classes(void) {
  static char out[16384];
  char args[1024];
  snprintf(args, sizeof args, "eval '%s'", path_in("one"));
  CU_ASSERT_EQUAL_FATAL(run_ganfw(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Fashion-MNIST test"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "60 images"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "  T-shirt/top\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "  Ankle boot\n"));
  /* the confusion matrix's rows still add up to the test images */
  long total = 0;
  const char *row = strstr(out, "\n    0:");
  for (int r = 0; r < 10 && row; r++) {
    const char *p = row + 7;
    for (int c = 0; c < 10; c++) total += strtol(p, (char **)&p, 10);
    row = strstr(row + 1, "\n    ");
  }
  CU_ASSERT_EQUAL(total, 60);
}

/* SIGTERM while four workers prepare batches: the step finishes, a checkpoint is written,
 * the exit code is 143, the workers are joined (no hang), and the run resumes from it. */
static void test_sigterm_with_workers(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  char ganfw[4200], outdir[600], metrics[600];
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build ? build : ".");
  snprintf(outdir, sizeof outdir, "run.out_dir=%s", path_in("term"));
  snprintf(metrics, sizeof metrics, "%s", path_in("term/metrics.csv"));
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(ganfw, ganfw, path_in("one.yaml"), "--set", "train.epochs=0", "--set",
          "train.max_steps=100000", "--set", "train.checkpoint_every=0", "--set", "data.workers=4",
          "--set", outdir, (char *)NULL);
    _exit(127);
  }
  int started = 0;
  for (int i = 0; i < 1200 && !started; i++) {
    FILE *f = fopen(metrics, "r");
    if (f) {
      char line[512];
      started = fgets(line, sizeof line, f) && fgets(line, sizeof line, f);
      fclose(f);
    }
    if (!started) usleep(50000);
  }
  CU_ASSERT(started);
  kill(pid, SIGTERM);
  int status = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  CU_ASSERT(WIFEXITED(status));
  CU_ASSERT_EQUAL(WEXITSTATUS(status), 143);
  static char out[16384];
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "ls '%s'", path_in("term/checkpoints"));
  FILE *p = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  int found = 0;
  long last_step = -1;
  char name[256];
  while (fgets(name, sizeof name, p))
    if (strncmp(name, "step_", 5) == 0) found++, last_step = strtol(name + 5, NULL, 10);
  pclose(p);
  CU_ASSERT_EQUAL_FATAL(found, 1);
  char args[2048];
  snprintf(args, sizeof args,
           "'%s' --set train.epochs=0 --set train.max_steps=%ld --set train.checkpoint_every=0 "
           "--set data.workers=4 --set '%s' --set train.resume=latest",
           path_in("one.yaml"), last_step + 3, outdir);
  CU_ASSERT_EQUAL(run_ganfw(args, out, sizeof out), 0);
  double steps[4096];
  int n = 0;
  read_column(metrics, 0, steps, 4096, &n);
  CU_ASSERT_FATAL(n >= 1);
  CU_ASSERT_EQUAL((long)steps[n - 1], last_step + 3);
}

/* --- the real data set --------------------------------------------------------------- */

/* Debian's dataset-fashion-mnist, when installed (scripts/deps.sh installs it): the standard
 * split, 6,000 training and 1,000 test images of each class. Skipped otherwise. */
static void test_real_fashion_mnist(void) {
  const char *dir = ganfw_dataset_default_path("fashion_mnist");
  char probe[512];
  snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", dir);
  if (access(probe, R_OK) != 0) {
    printf("\n    [skipped: no Fashion-MNIST in %s; sudo apt-get install dataset-fashion-mnist] ",
           dir);
    CU_PASS("Fashion-MNIST absent");
    return;
  }
  for (int train_split = 1; train_split >= 0; train_split--) {
    ganfw_dataset *ds = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open("fashion_mnist", dir, train_split, NULL, &ds),
                          GANFW_OK);
    const int64_t n = ganfw_dataset_size(ds), per_class = train_split ? 6000 : 1000;
    CU_ASSERT_EQUAL(n, train_split ? 60000 : 10000);
    int64_t count[10] = {0};
    float img[784];
    int32_t label = -1;
    for (int64_t i = 0; i < n; i++) {
      CU_ASSERT_EQUAL_FATAL(ganfw_dataset_get(ds, i, 0, img, &label), GANFW_OK);
      CU_ASSERT_FATAL(label >= 0 && label < 10);
      count[label]++;
    }
    for (int k = 0; k < 10; k++) CU_ASSERT_EQUAL(count[k], per_class);
    printf("\n    [real Fashion-MNIST %s: %lld images] ", train_split ? "train" : "test",
           (long long)n);
    ganfw_dataset_destroy(ds);
  }
}

static CU_TestInfo tests[] = {
    {"open_and_names", test_open_and_names},
    {"missing_and_bad_labels", test_missing_and_bad_labels},
    {"source_config", test_source_config},
    {"test_split_plain", test_test_split_plain},
    {"trains_same_with_workers", test_trains_same_with_workers},
    {"resume_with_workers", test_resume_with_workers},
    {"eval_names_classes", test_eval_names_classes},
    {"sigterm_with_workers", test_sigterm_with_workers},
    {"real_fashion_mnist", test_real_fashion_mnist},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("fashion", tests, suite_init, suite_clean);
}
