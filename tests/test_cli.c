/* The ganfw command line as a user runs it: exit codes (0 ok, 1 runtime, 2 usage or
 * config, 130 interrupted), one clear message per failure, `validate` naming file:line:col
 * of a misspelt key, `plugins`, and Ctrl-C writing a checkpoint. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "testutil.h"

static char root[64];
static char ganfw[4096];
static char out[65536]; /* stdout and stderr of the last command */

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

/* Runs the ganfw binary with args (NULL-terminated), capturing its output; returns the
 * exit code (128 + signal when killed). */
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

/* The same with the working directory `dir` (for paths relative to it). */
static int run_ganfw_in(const char *dir, const char *const *args) {
  char cmd[8192];
  int n = snprintf(cmd, sizeof cmd, "cd '%s' && '%s'", dir, ganfw);
  for (const char *const *a = args; *a; a++) n += snprintf(cmd + n, sizeof cmd - n, " '%s'", *a);
  snprintf(cmd + n, sizeof cmd - n, " 2>&1");
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void write_file(const char *rel, const char *text) {
  FILE *f = fopen(path_in(rel), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_cli_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  /* An out-of-tree plugin folder: the test plugins, which the default search never sees. */
  char plugs[4200];
  snprintf(plugs, sizeof plugs, "%s/tests/plugins", build);
  if (mkdir(path_in("cfgs"), 0755) != 0 || symlink(plugs, path_in("plugs")) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 256, 20, 9) != 0) return -1;
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 1\n"
           "device: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
           "optim: {plugin: adam, lr: 2.0e-4}\n"
           "train:\n"
           "  batch_size: 8\n"
           "  max_steps: 4\n"
           "run: {out_dir: %s/run}\n",
           root, root);
  FILE *f = fopen(path_in("ok.yaml"), "w");
  if (!f) return -1;
  fputs(text, f);
  fclose(f);
  return 0;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_help_version_usage(void) {
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"--help", NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ganfw validate"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"--version", NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "plugin ABI 1."));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){NULL}), 2);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"--bogus", NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown option '--bogus'"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", "/nonexistent.yaml", NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "/nonexistent.yaml"));
  /* An output that is a folder is refused before any sample is drawn. */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"sample", root, "-o", root, NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "is a directory; give the PNG file"));
}

static void test_validate(void) {
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "valid"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "batch_size: 8"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "# default")); /* defaults are shown */
  /* a misspelt key: exit 2, file:line:col and the nearest known key */
  char text[512];
  snprintf(text, sizeof text, "extends: ok.yaml\ntrain:\n  bach_size: 32\n");
  write_file("typo.yaml", text);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("typo.yaml"), NULL}), 2);
  char where[600];
  snprintf(where, sizeof where, "%s:3:3", path_in("typo.yaml"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, where));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "did you mean 'batch_size'"));
  /* --set overrides, and a typo in --set is caught too */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set",
                                             "train.batch_size=16", NULL}),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "batch_size: 16"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set",
                                             "train.bach_size=16", NULL}),
                  2);
  /* a wrong value type names its position */
  write_file("type.yaml", "extends: ok.yaml\ntrain: {batch_size: many}\n");
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("type.yaml"), NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "type.yaml:2:21"));
  /* an optimizer named where a model belongs */
  write_file("kind.yaml", "extends: ok.yaml\nmodel: {plugin: adam}\n");
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("kind.yaml"), NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "optimizer plugin"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "model.plugin"));
  /* a value outside the range the core accepts names the range and where it came from */
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set", "optim.lr=20", NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(out, "--set optim.lr=20: optim.lr: 20 is out of range: expected a number in (0, 10)"));
  /* step counts are bounded so that none of their arithmetic can overflow */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set",
                                             "train.epochs=9223372036854775807", NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--set train.epochs=9223372036854775807: train.epochs"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "out of range"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set",
                                             "train.batch_size=0", NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--set train.batch_size=0: train.batch_size"));
  /* a plugin that does not exist lists where it looked */
  write_file("missing.yaml", "extends: ok.yaml\noptim: {plugin: adamw2}\n");
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("missing.yaml"), NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ganfw_adamw2.so"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "GANFW_PLUGIN_PATH"));
  /* a plugin's own refusal points at the key it names, or at its section */
  write_file("plugin_key.yaml", "extends: ok.yaml\nmodel:\n  ngf: 100000000\n");
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("plugin_key.yaml"), NULL}), 2);
  snprintf(where, sizeof where, "%s:3:8: model 'dcgan': dcgan: model.ngf",
           path_in("plugin_key.yaml"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, where));
  write_file("plugin_word.yaml", "extends: ok.yaml\noptim:\n  lr: 1.0e-3\n  betas: [2, 0.9]\n");
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("plugin_word.yaml"), NULL}), 2);
  snprintf(where, sizeof where, "%s:4:10: optimizer 'adam'", path_in("plugin_word.yaml"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, where));
}

static void test_plugins_listing(void) {
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plugins", NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "dcgan"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "adam"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "optimizer"));
}

static void test_train_and_missing_data(void) {
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("ok.yaml"), NULL}), 0);
  struct stat sb;
  CU_ASSERT_EQUAL(stat(path_in("run/checkpoints/step_00000004.safetensors"), &sb), 0);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("ok.yaml"), "--set",
                                             "data.path=/nonexistent/mnist", NULL}),
                  1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "scripts/fetch_mnist.sh"));
  /* the message points at the --set that gave data.path, not at the config's data section */
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--set data.path=/nonexistent/mnist: data:"));
  /* exactly one message line for the failure */
  int lines = 0;
  for (const char *p = out; (p = strstr(p, "ganfw: I/O error")); p++) lines++;
  CU_ASSERT_EQUAL(lines, 1);
}

/* A scalar or a list where a section belongs: refused at that value (its file:line:col, or
 * its --set) saying a map is expected, not blamed on a key the section would have held. */
static void test_scalar_for_a_section(void) {
  write_file("scalar.yaml", "extends: ok.yaml\ntrain: 5\n");
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("scalar.yaml"), NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(out, "scalar.yaml:2:8: train: expected a section (a map of keys), got '5'"));
  CU_ASSERT_PTR_NULL(strstr(out, "train.epochs"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("ok.yaml"), "--set", "train=5", NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--set train=5: train: expected a section"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("ok.yaml"), "--set", "model=[1, 2]", NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "model: expected a section (a map of keys), got a list"));
}

/* 1 when the environment of process `pid` holds the entry `want` ("NAME=VALUE"). */
static int environ_has(pid_t pid, const char *want) {
  char path[64], buf[1 << 16];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
    if (strcmp(buf + i, want) == 0) return 1;
  return 0;
}

/* Ctrl-C (SIGINT) or SIGTERM during training: the step finishes, a checkpoint is written,
 * exit code 130 or 143, and the run continues from it with train.resume: latest. */
static void signal_writes_checkpoint(int sig, const char *dir, int want_exit) {
  char outdir[600], metrics[600];
  snprintf(outdir, sizeof outdir, "run.out_dir=%s", path_in(dir));
  snprintf(metrics, sizeof metrics, "%s/metrics.csv", path_in(dir));
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    int devnull = open("/dev/null", 1);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl(ganfw, ganfw, path_in("ok.yaml"), "--set", "train.max_steps=100000", "--set",
          "train.checkpoint_every=0", "--set", outdir, (char *)NULL);
    _exit(127);
  }
  /* wait until training has started: metrics.csv has its first row */
  int started = 0;
  for (int i = 0; i < 600 && !started; i++) {
    FILE *f = fopen(metrics, "r");
    if (f) {
      char line[512];
      started = fgets(line, sizeof line, f) && fgets(line, sizeof line, f);
      fclose(f);
    }
    if (!started) usleep(50000);
  }
  CU_ASSERT(started);
  /* OpenMP's workers poll briefly, then sleep (cli/main.c), unless the user chose */
  if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
    CU_ASSERT(environ_has(pid, "GOMP_SPINCOUNT=1000"));
  kill(pid, sig);
  int status = 0;
  waitpid(pid, &status, 0);
  CU_ASSERT(WIFEXITED(status));
  CU_ASSERT_EQUAL(WEXITSTATUS(status), want_exit);
  char latest[600];
  snprintf(latest, sizeof latest, "%s/checkpoints", path_in(dir));
  int found = 0;
  FILE *p;
  char cmd[700];
  snprintf(cmd, sizeof cmd, "ls '%s'", latest);
  if ((p = popen(cmd, "r"))) {
    char name[256];
    while (fgets(name, sizeof name, p)) found += strncmp(name, "step_", 5) == 0;
    pclose(p);
  }
  CU_ASSERT_EQUAL(found, 1);
}

/* A GAN batch larger than the data set can never be trained on, with or without drop_last:
 * refused at once instead of looping over short batches for ever. */
static void test_gan_batch_larger_than_data(void) {
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("ok.yaml"), "--set", "train.batch_size=100000",
                                             "--set", "data.drop_last=false", NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "train.batch_size 100000 is larger than"));
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){path_in("ok.yaml"), "--set", "train.batch_size=100000", NULL}), 2);
}

/* Resuming a run that already reached its last step trains nothing, says so and exits 0;
 * metrics.csv keeps its rows. */
static void test_resume_at_end(void) {
  char outdir[600], metrics[600];
  snprintf(outdir, sizeof outdir, "run.out_dir=%s", path_in("done"));
  snprintf(metrics, sizeof metrics, "%s/metrics.csv", path_in("done"));
  CU_ASSERT_EQUAL_FATAL(run_ganfw((const char *[]){path_in("ok.yaml"), "--set", outdir, NULL}), 0);
  struct stat before, after;
  CU_ASSERT_EQUAL_FATAL(stat(metrics, &before), 0);
  /* what a checkpoint write killed half-way leaves: removed when the run starts again */
  char stale[700];
  snprintf(stale, sizeof stale, "%s/checkpoints/step_00000004.safetensors.tmp.Ab12Cd",
           path_in("done"));
  FILE *f = fopen(stale, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("half a checkpoint", f);
  fclose(f);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("ok.yaml"), "--set", outdir, "--set",
                                             "train.resume=latest", NULL}),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "nothing left to train"));
  CU_ASSERT_NOT_EQUAL(access(stale, F_OK), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "removed 1 temporary file that"));
  CU_ASSERT_PTR_NULL(strstr(out, "training dcgan for"));
  CU_ASSERT_EQUAL_FATAL(stat(metrics, &after), 0);
  CU_ASSERT_EQUAL(after.st_size, before.st_size);
}

/* A checkpoint whose loader position the data set cannot hold (resumed on a smaller data
 * set) is refused on resume through the real run, naming the checkpoint and the field. */
static void test_resume_checks_metadata(void) {
  char outdir[600], small[600], data[700];
  snprintf(outdir, sizeof outdir, "run.out_dir=%s", path_in("meta"));
  snprintf(small, sizeof small, "%s", path_in("mnist_small"));
  CU_ASSERT_EQUAL_FATAL(mkdir(small, 0755), 0);
  CU_ASSERT_EQUAL_FATAL(gt_write_mnist(small, 16, 20, 9), 0);
  snprintf(data, sizeof data, "data.path=%s", small);
  CU_ASSERT_EQUAL_FATAL(run_ganfw((const char *[]){path_in("ok.yaml"), "--set", outdir, NULL}), 0);
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){path_in("ok.yaml"), "--set", outdir, "--set", data, "--set",
                                 "train.max_steps=6", "--set", "train.resume=latest", NULL}),
      2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "step_00000004.safetensors"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "field loader_position: 32 is past the data set's 16 items"));
}

static void test_sigint_writes_checkpoint(void) {
  signal_writes_checkpoint(SIGINT, "int", 130);
}

static void test_sigterm_writes_checkpoint(void) {
  signal_writes_checkpoint(SIGTERM, "term", 143);
}

/* A relative plugin_path is written absolute into config.resolved.yaml, so that the run
 * folder's config finds an out-of-tree plugin from anywhere (`ganfw sample RUN`). */
static void test_plugin_path_resolved_absolute(void) {
  char text[1024];
  snprintf(text, sizeof text,
           "extends: ../ok.yaml\n"
           "plugin_path: [../plugs]\n"
           "optim: {plugin: tpsgd, lr: 0.01}\n"
           "train: {max_steps: 2}\n"
           "run: {out_dir: %s}\n",
           path_in("tprun"));
  write_file("cfgs/tp.yaml", text);
  CU_ASSERT_EQUAL_FATAL(run_ganfw((const char *[]){"-q", path_in("cfgs/tp.yaml"), NULL}), 0);
  FILE *f = fopen(path_in("tprun/config.resolved.yaml"), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char resolved[8192];
  size_t len = fread(resolved, 1, sizeof resolved - 1, f);
  resolved[len] = '\0';
  fclose(f);
  char want[700];
  snprintf(want, sizeof want, "plugin_path: [%s]", path_in("plugs"));
  if (!strstr(resolved, want)) printf("\n  resolved config lacks \"%s\":\n%s", want, resolved);
  CU_ASSERT_PTR_NOT_NULL(strstr(resolved, want));
  /* the run folder is usable from another working directory */
  CU_ASSERT_EQUAL(run_ganfw_in("/", (const char *[]){"sample", path_in("tprun"), "-n", "4", "-o",
                                                     path_in("tp.png"), NULL}),
                  0);
  struct stat sb;
  CU_ASSERT_EQUAL(stat(path_in("tp.png"), &sb), 0);
}

/* --set plugin_path=[rel] is relative to the working directory, as every command-line
 * path is, not to the text of the --set argument. */
static void test_set_plugin_path_relative_to_cwd(void) {
  write_file("cfgs/tp2.yaml", "extends: ../ok.yaml\noptim: {plugin: tpsgd, lr: 0.01}\n");
  CU_ASSERT_EQUAL(run_ganfw_in(root, (const char *[]){"validate", "cfgs/tp2.yaml", "--set",
                                                      "plugin_path=[plugs]", NULL}),
                  0);
  char want[700];
  snprintf(want, sizeof want, "plugin_path: [%s]", path_in("plugs"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  /* without it the plugin is not found, and the message says where it looked */
  CU_ASSERT_EQUAL(run_ganfw_in(root, (const char *[]){"validate", "cfgs/tp2.yaml", NULL}), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "tpsgd"));
}

/* Global options go before or after the subcommand; SUBCOMMAND --help is its own usage. */
static void test_global_options_and_command_help(void) {
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"-q", "validate", path_in("ok.yaml"), NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "valid"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"--set", "train.batch_size=16", "-q", "validate",
                                             path_in("ok.yaml"), NULL}),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "batch_size: 16"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"-q", "plan", path_in("ok.yaml"), NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "peak"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", "--help", NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: ganfw validate"));
  CU_ASSERT_PTR_NULL(strstr(out, "find-batch")); /* that command's usage, not the list */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"-q", "compare", "-h", NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: ganfw compare"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--steps"));
  /* an option of another command is still refused, naming the command */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", "--measure", path_in("ok.yaml"), NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown option '--measure'"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: ganfw validate"));
}

/* Data that is there but unreadable (a bad magic number, a truncated file) is not "not
 * there": validate fails with exit 2, naming the file and where data.path came from. */
static void test_validate_corrupt_data(void) {
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("badmnist"), 0755), 0);
  write_file("badmnist/train-images-idx3-ubyte", "not an IDX file at all, just text\n");
  char set[600];
  snprintf(set, sizeof set, "data.path=%s", path_in("badmnist"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set", set, NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "badmnist/train-images-idx3-ubyte' has magic number"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--set data.path="));
  CU_ASSERT_PTR_NULL(strstr(out, "is not there"));
  /* a truncated copy of a real file */
  char cmd[1600];
  snprintf(cmd, sizeof cmd, "head -c 1000 '%s/mnist/train-images-idx3-ubyte' > '%s'", root,
           path_in("badmnist/train-images-idx3-ubyte"));
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "cp '%s/mnist/train-labels-idx1-ubyte' '%s/badmnist/'", root, root);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set", set, NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "badmnist/train-images-idx3-ubyte"));
}

/* validate checks the config; data that is not there is one line of its own, and a valid
 * config still exits 0. A config error is still exit 2. */
static void test_validate_without_data(void) {
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set",
                                             "data.path=/nonexistent/mnist", NULL}),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "valid"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "/nonexistent/mnist"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "scripts/fetch_mnist.sh"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "batch_size: 8")); /* the resolved config follows */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set",
                                             "data.path=/nonexistent/mnist", "--set",
                                             "train.bach_size=3", NULL}),
                  2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "did you mean 'batch_size'"));
  /* model.init_from is a key of the config even when no weights can be loaded into a model
   * built without its data: checked, not reported as unknown */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set",
                                             "data.path=/nonexistent/mnist", "--set",
                                             "model.init_from=/nonexistent/w.safetensors", "--set",
                                             "model.init_from_strict=false", NULL}),
                  0);
  CU_ASSERT_PTR_NULL(strstr(out, "unknown key"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "init_from: /nonexistent/w.safetensors"));
  /* a folder of images has no shape without its files: the model cannot be checked, so
   * the missing data stays a failure (exit 1) naming the folder */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("ok.yaml"), "--set",
                                             "data.path=/nonexistent/imgs", "--set",
                                             "data.dataset=folder", NULL}),
                  1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "/nonexistent/imgs"));
  CU_ASSERT_PTR_NULL(strstr(out, "valid"));
}

/* extends can drop an inherited key (`~key:`) or replace a whole section
 * (`_replace_: true`): dcgan.yaml's Adam betas do not reach an SGD optimizer. */
static void test_extends_drop_and_replace(void) {
  char text[1024];
  snprintf(text, sizeof text,
           "extends: %s/configs/dcgan.yaml\n"
           "data: {path: %s/mnist}\n"
           "optim: {plugin: sgd, ~betas: }\n",
           getenv("GANFW_SOURCE_DIR"), root);
  write_file("drop.yaml", text);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("drop.yaml"), NULL}), 0);
  CU_ASSERT_PTR_NULL(strstr(out, "betas"));
  snprintf(text, sizeof text,
           "extends: %s/configs/dcgan.yaml\n"
           "data: {path: %s/mnist}\n"
           "optim: {_replace_: true, plugin: sgd, lr: 0.01}\n",
           getenv("GANFW_SOURCE_DIR"), root);
  write_file("replace.yaml", text);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("replace.yaml"), NULL}), 0);
  CU_ASSERT_PTR_NULL(strstr(out, "betas"));
  CU_ASSERT_PTR_NULL(strstr(out, "2.0e-4")); /* the base's lr went with the section */
  /* --set ~key drops a key too */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("drop.yaml"), "--set",
                                             "~train.max_steps", "--set", "train.epochs=1", NULL}),
                  0);
  CU_ASSERT_PTR_NULL(strstr(out, "max_steps: 1500"));
}

/* scripts/link.sh (what scripts/setup.sh runs) puts `ganfw` on the PATH as a link to the
 * build's binary: a bare `ganfw --version` then runs it; again is harmless, and an
 * installed ganfw (not a link) is left alone. */
static void test_setup_puts_ganfw_on_path(void) {
  const char *src = getenv("GANFW_SOURCE_DIR");
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  CU_ASSERT_PTR_NOT_NULL_FATAL(src);
  char cmd[8192];
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("bin"), 0755), 0);
  for (int round = 0; round < 2; round++) {
    snprintf(cmd, sizeof cmd,
             "GANFW_BIN_DIR='%s' bash '%s/scripts/link.sh' '%s' >/dev/null && "
             "PATH='%s':/usr/bin:/bin ganfw --version >/dev/null",
             path_in("bin"), src, build, path_in("bin"));
    CU_ASSERT_EQUAL(system(cmd), 0);
  }
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("bin2"), 0755), 0);
  write_file("bin2/ganfw", "#!/bin/sh\necho installed\n");
  snprintf(cmd, sizeof cmd,
           "GANFW_BIN_DIR='%s' bash '%s/scripts/link.sh' '%s' | grep -q 'left as it is' && "
           "grep -q installed '%s'",
           path_in("bin2"), src, build, path_in("bin2/ganfw"));
  CU_ASSERT_EQUAL(system(cmd), 0);
}

static CU_TestInfo tests[] = {
    {"help, version and usage errors", test_help_version_usage},
    {"validate: resolved config, typos with file:line:col, wrong kinds", test_validate},
    {"plugins lists kind and name", test_plugins_listing},
    {"train, and a missing data set in one message", test_train_and_missing_data},
    {"a scalar where a section belongs is refused at it", test_scalar_for_a_section},
    {"a GAN batch larger than the data set is refused", test_gan_batch_larger_than_data},
    {"resume at the last step trains nothing, exit 0", test_resume_at_end},
    {"Ctrl-C writes a checkpoint and exits 130", test_sigint_writes_checkpoint},
    {"SIGTERM writes a checkpoint and exits 143", test_sigterm_writes_checkpoint},
    {"resume checks the checkpoint's metadata against the run", test_resume_checks_metadata},
    {"a relative plugin_path is absolute in the resolved config",
     test_plugin_path_resolved_absolute},
    {"--set plugin_path is relative to the working directory",
     test_set_plugin_path_relative_to_cwd},
    {"global options before the subcommand, SUBCOMMAND --help",
     test_global_options_and_command_help},
    {"validate without the data set: exit 0, one line", test_validate_without_data},
    {"validate: present but unreadable data is an error", test_validate_corrupt_data},
    {"extends: ~key drops, _replace_ replaces a section", test_extends_drop_and_replace},
    {"scripts/link.sh puts ganfw on the PATH", test_setup_puts_ganfw_on_path},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("cli", tests, suite_init, suite_clean);
}
