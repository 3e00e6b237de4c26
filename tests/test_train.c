/* The GAN trainer end to end on a small synthetic MNIST: its outputs, resume that is
 * bitwise the uninterrupted run, refusal of corrupt checkpoints and missing data, and
 * `ganfw sample`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "io/png_io.h"
#include "io/safetensors.h"
#include "tools/sample.h"
#include "train/session.h"
#include "testutil.h"
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

static int exists(const char *rel) {
  struct stat sb;
  return stat(path_in(rel), &sb) == 0;
}

static void write_config(void) {
  FILE *f = fopen(path_in("gan.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
          "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
          "train: {batch_size: 8, max_steps: 6, log_every: 1, sample_every: 3,"
          " checkpoint_every: 3}\n"
          "run: {out_dir: %s/a, samples: 16}\n",
          root, root);
  fclose(f);
}

/* `ganfw CONFIG` in-process with extra --set assignments. */
static ganfw_status train(const char *const *sets, int nsets) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(path_in("gan.yaml"), sets, nsets, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(run->config);
  if (st == GANFW_OK) st = ganfw_train(s);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_train_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 96, 20, 5);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_outputs(void) {
  write_config();
  ganfw_status st = train(NULL, 0);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT(exists("a/config.resolved.yaml"));
  CU_ASSERT(exists("a/memory.json"));
  CU_ASSERT(exists("a/samples/step_000003.png"));
  CU_ASSERT(exists("a/samples/step_000006.png"));
  CU_ASSERT(exists("a/checkpoints/step_00000003.safetensors"));
  CU_ASSERT(exists("a/checkpoints/step_00000006.safetensors"));
  FILE *f = fopen(path_in("a/metrics.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[1024];
  int rows = 0;
  CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
  CU_ASSERT_EQUAL(strncmp(line, "step,epoch,loss_d,loss_g", 24), 0);
  while (fgets(line, sizeof line, f)) CU_ASSERT_EQUAL(atoi(line), ++rows);
  fclose(f);
  CU_ASSERT_EQUAL(rows, 6);
}

/* The metadata that places a run: equal in two checkpoints of the same point. */
static const char *const position_keys[] = {"step", "epoch", "loader_position", "rng_offset",
                                            "seed"};

/* 6 steps straight vs 3 steps, stop, resume to 6: bitwise the same weights, optimizer
 * state, RNG and loader position. The batch (8) does not divide the epoch (96 images
 * after drop_last: 12 batches), and prefetching is on. */
static void test_resume_is_bitwise(void) {
  write_config();
  const char *first[] = {"train.max_steps=3", "run.out_dir=%s"};
  char out[512];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("b"));
  first[1] = out;
  CU_ASSERT_EQUAL_FATAL(train(first, 2), GANFW_OK);
  const char *second[] = {out, "train.resume=latest"};
  ganfw_status st = train(second, 2);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  gt_assert_same_checkpoint(path_in("a/checkpoints/step_00000006.safetensors"),
                            path_in("b/checkpoints/step_00000006.safetensors"), position_keys,
                            sizeof position_keys / sizeof position_keys[0]);
  /* metrics of the resumed run continue the first: steps 1..6 once each */
  FILE *f = fopen(path_in("b/metrics.csv"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[1024];
  int rows = 0;
  CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
  while (fgets(line, sizeof line, f)) CU_ASSERT_EQUAL(atoi(line), ++rows);
  fclose(f);
  CU_ASSERT_EQUAL(rows, 6);
}

static void copy_prefix(const char *from, const char *to, long keep, long flip) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  CU_ASSERT_FATAL(in && out);
  long i = 0;
  int c;
  while ((c = fgetc(in)) != EOF && (keep < 0 || i < keep)) {
    fputc(i == flip ? c ^ 0x10 : c, out);
    i++;
  }
  fclose(in);
  fclose(out);
}

static void test_corrupt_checkpoint_is_refused(void) {
  write_config();
  const char *good = path_in("a/checkpoints/step_00000003.safetensors");
  struct stat sb;
  CU_ASSERT_EQUAL_FATAL(stat(good, &sb), 0);
  const char *bad = path_in("bad.safetensors");
  char set_resume[600], set_out[600];
  snprintf(set_resume, sizeof set_resume, "train.resume=%s", bad);
  snprintf(set_out, sizeof set_out, "run.out_dir=%s", path_in("c"));
  const char *sets[] = {set_resume, set_out};
  const long cuts[] = {7, 100, sb.st_size / 2, sb.st_size - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    copy_prefix(good, bad, cuts[i], -1);
    ganfw_status st = train(sets, 2);
    CU_ASSERT_EQUAL(st, GANFW_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), bad));
    CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "train.resume"));
  }
  copy_prefix(good, bad, -1, sb.st_size - 3); /* one flipped bit in the data */
  CU_ASSERT_EQUAL(train(sets, 2), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "corrupt"));
  /* a checkpoint of another model shape */
  char resume_good[600];
  snprintf(resume_good, sizeof resume_good, "train.resume=%s", good);
  const char *mismatch[] = {set_out, "model.ngf=16", resume_good};
  CU_ASSERT_EQUAL(train(mismatch, 3), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "does not match"));
}

static void test_missing_data_names_the_fetch_command(void) {
  write_config();
  const char *sets[] = {"data.path=/nonexistent/mnist"};
  CU_ASSERT_EQUAL(train(sets, 1), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "/nonexistent/mnist"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "scripts/fetch_mnist.sh"));
}

static void test_sample_command(void) {
  ganfw_sample_args a = {.source = path_in("a"), .output = path_in("grid.png"), .n = 10, .nrow = 5};
  ganfw_status st = ganfw_sample(&a);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT(exists("grid.png"));
  a.source = path_in("a/checkpoints/step_00000003.safetensors");
  a.output = path_in("grid3.png");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_OK);
  CU_ASSERT(exists("grid3.png"));
  a.source = path_in("nothing-here");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_ERR_IO);
}

static int same_file(const char *a, const char *b) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
  return system(cmd) == 0;
}

static int msg_has(const char *s) {
  return strstr(ganfw_error_message(), s) != NULL;
}

static void write_text(const char *rel, const char *text) {
  FILE *f = fopen(path_in(rel), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

/* --config: a checkpoint without ganfw's metadata samples the same images as the ganfw
 * checkpoint it came from, with a built-in data set's shape (by its format) or a folder's
 * (by its first image); without --config, with a tensor missing, or with a config of other
 * shapes, it is refused saying what to do. */
static void test_sample_foreign_checkpoint(void) {
  char ckpt[512], foreign[512], text[1024]; /* path_in's buffers are reused */
  snprintf(ckpt, sizeof ckpt, "%s", path_in("a/checkpoints/step_00000006.safetensors"));
  snprintf(foreign, sizeof foreign, "%s", path_in("foreign.safetensors"));
  gt_write_bare_generator(ckpt, foreign, NULL);
  ganfw_sample_args a = {.source = ckpt, .output = path_in("own.png"), .n = 8, .nrow = 4};
  CU_ASSERT_EQUAL_FATAL(ganfw_sample(&a), GANFW_OK);
  a.source = foreign;
  a.output = path_in("foreign.png");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_ERR_IO);
  CU_ASSERT(msg_has(foreign) && msg_has("no ganfw metadata (data.channels/height/width)") &&
            msg_has("pass --config CONFIG"));
  a.config = path_in("gan.yaml");
  ganfw_status st = ganfw_sample(&a);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT(same_file(path_in("own.png"), path_in("foreign.png")));
  /* a run folder with --config: its latest checkpoint, built from the config named */
  a.source = path_in("a");
  a.output = path_in("dir.png");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_OK);
  CU_ASSERT(same_file(path_in("own.png"), path_in("dir.png")));
  /* a folder data set: the shape of its first image after the transforms (20x20 RGB ->
   * gray 32x32), read from the file */
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("pngs"), 0755), 0);
  uint8_t rgb[20 * 20 * 3];
  for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 7);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(path_in("pngs/x.png"), rgb, 20, 20, 3), GANFW_OK);
  snprintf(text, sizeof text,
           "extends: %s\ndata: {dataset: folder, path: %s, resize: 32, channels: 1}\n",
           path_in("gan.yaml"), path_in("pngs"));
  write_text("folder.yaml", text);
  a.source = foreign;
  a.config = path_in("folder.yaml");
  a.output = path_in("folder.png");
  st = ganfw_sample(&a);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT(same_file(path_in("own.png"), path_in("folder.png")));
  /* ... as RGB: the generator's last layer has one output channel, not 3 */
  snprintf(text, sizeof text, "extends: %s\ndata: {channels: 3}\n", path_in("folder.yaml"));
  write_text("folder3.yaml", text);
  a.config = path_in("folder3.yaml");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has(foreign) && msg_has("generator.main."));
  /* ... and a folder that is not there: no shape to build the model for */
  snprintf(text, sizeof text, "extends: %s\ndata: {path: %s}\n", path_in("folder.yaml"),
           path_in("no-pngs"));
  write_text("nofolder.yaml", text);
  a.config = path_in("nofolder.yaml");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_ERR_IO);
  CU_ASSERT(msg_has(path_in("nofolder.yaml")) && msg_has(path_in("no-pngs")));
  /* a ganfw checkpoint keeps its recorded shape when the config's data set cannot tell one */
  a.source = ckpt;
  a.output = path_in("own2.png");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_OK);
  CU_ASSERT(same_file(path_in("own.png"), path_in("own2.png")));
  /* a tensor missing from the file: named, with the file */
  gt_write_bare_generator(ckpt, path_in("holey.safetensors"), "generator.main.1.running_var");
  a.source = path_in("holey.safetensors");
  a.config = path_in("gan.yaml");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has(path_in("holey.safetensors")) &&
            msg_has("generator.main.1.running_var is missing from the file"));
  /* a config whose generator has other shapes: the tensor is named, with the file */
  snprintf(text, sizeof text, "extends: %s\nmodel: {ngf: 16}\n", path_in("gan.yaml"));
  write_text("wide.yaml", text);
  a.source = foreign;
  a.config = path_in("wide.yaml");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has(foreign) && msg_has("generator.main.0.weight is F32 "));
  /* a ganfw checkpoint whose recorded data shape is not the config's: both files named */
  snprintf(text, sizeof text, "extends: %s\ndata: {resize: 64}\nmodel: {image_size: 64}\n",
           path_in("gan.yaml"));
  write_text("big.yaml", text);
  a.source = ckpt;
  a.config = path_in("big.yaml");
  CU_ASSERT_EQUAL(ganfw_sample(&a), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has(ckpt) && msg_has(path_in("big.yaml")) && msg_has("1x32x32") &&
            msg_has("1x64x64"));
  /* the command line: --config is taken, and the refusal without it exits 1 */
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s/ganfw' sample '%s' --config '%s' -n 8 --nrow 4 -o '%s' -q",
           build ? build : ".", foreign, path_in("gan.yaml"), path_in("cli.png"));
  CU_ASSERT_EQUAL(system(cmd), 0);
  CU_ASSERT(same_file(path_in("own.png"), path_in("cli.png")));
  snprintf(cmd, sizeof cmd, "'%s/ganfw' sample '%s' -o '%s' -q 2>/dev/null", build ? build : ".",
           foreign, path_in("cli2.png"));
  int rc = system(cmd);
  CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
}

static CU_TestInfo tests[] = {
    {"a run writes metrics, samples, checkpoints, config, memory.json", test_outputs},
    {"resume is bitwise the uninterrupted run", test_resume_is_bitwise},
    {"corrupt, truncated or mismatched checkpoints are refused",
     test_corrupt_checkpoint_is_refused},
    {"a missing data set names the path and the fetch command",
     test_missing_data_names_the_fetch_command},
    {"ganfw sample from a run folder and a checkpoint", test_sample_command},
    {"ganfw sample --config reads a checkpoint without ganfw metadata",
     test_sample_foreign_checkpoint},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("train", tests, suite_init, suite_clean);
}
