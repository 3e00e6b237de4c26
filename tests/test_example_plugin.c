/* The out-of-tree plugin example end to end: `cmake --install` this build tree into a
 * temporary prefix, build examples/mlp_gan against that prefix alone, train it 5 steps
 * with the installed ganfw on a generated 64-image MNIST-format (IDX) data set, and check
 * the run's outputs and the `ganfw plugins` listing. Each step prints its command and
 * output when it fails; the temporary folder is kept then (or with GANFW_TEST_KEEP=1), and
 * removed when all passed. */
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "example_plugin_config.h"
#include "io/safetensors.h"
#include "testutil.h"

#define EX_IMAGES 64
#define EX_SIDE   28
#define EX_NZ     32 /* not the defaults, so that the config is seen to reach the plugin */
#define EX_HIDDEN 48
#define EX_STEPS  5
#define EX_BATCH  16

enum { STEP_TODO = 0, STEP_OK = 1, STEP_FAILED = -1 };

static struct {
  char root[4096];    /* the mkdtemp folder */
  char prefix[4200];  /* root/prefix: the install */
  char build[4200];   /* root/build: the example's build folder */
  char config[4200];  /* root/run.yaml */
  char out_dir[4200]; /* root/out */
  char plugin_dir[4400], ganfw[4400];
  int tmp, installed, built, data, trained;
  int failures; /* any step or check failed: keep root for a look */
} ex;

/* --- small helpers ------------------------------------------------------------------------ */

static const char *env_or(const char *name, const char *def) {
  const char *v = getenv(name);
  return v && *v ? v : def;
}

/* Records a CUnit failure at `line` with a printf-style message, printed at once. */
#define fail_msg(...) fail_at(__LINE__, __VA_ARGS__)
static void fail_at(int line, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("\n  FAILED: %s\n", msg);
  fflush(stdout);
  ex.failures++;
  CU_assertImplementation(CU_FALSE, (unsigned)line, msg, __FILE__, "", CU_FALSE);
}

static int file_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* `s` as one single-quoted shell word appended to buf. */
static void shell_append(char *buf, size_t len, const char *s) {
  size_t n = strlen(buf);
  if (n + 1 < len) buf[n++] = '\'';
  for (; *s && n + 5 < len; s++) {
    if (*s == '\'') {
      memcpy(buf + n, "'\\''", 4);
      n += 4;
    } else {
      buf[n++] = *s;
    }
  }
  if (n + 2 < len) buf[n++] = '\'';
  if (n + 1 < len) buf[n++] = ' ';
  buf[n < len ? n : len - 1] = '\0';
}

/* A shell command from words (NULL-terminated); words starting with "@" are passed
 * unquoted without the "@" (environment assignments, redirections). */
static void shell_command(char *buf, size_t len, ...) {
  buf[0] = '\0';
  va_list ap;
  va_start(ap, len);
  for (const char *w; (w = va_arg(ap, const char *)) != NULL;) {
    if (w[0] == '@') {
      strncat(buf, w + 1, len - strlen(buf) - 1);
      strncat(buf, " ", len - strlen(buf) - 1);
    } else {
      shell_append(buf, len, w);
    }
  }
  va_end(ap);
}

/* Prints the last `tail` bytes of a file under a heading. */
static void print_file_tail(const char *heading, const char *path, long tail) {
  FILE *f = fopen(path, "rb");
  printf("  --- %s (%s) ---\n", heading, path);
  if (!f) {
    printf("  (cannot open)\n");
    return;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  if (size > tail) {
    fseek(f, size - tail, SEEK_SET);
    printf("  [... %ld bytes before this left out]\n", size - tail);
  } else {
    fseek(f, 0, SEEK_SET);
  }
  char chunk[4096];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, got, stdout);
  fclose(f);
  printf("\n  --- end of %s ---\n", heading);
  fflush(stdout);
}

/* Runs `cmd` with stdout and stderr into root/<name>.log; returns the exit status (-1 when
 * it did not run or was killed). *log receives the log's path. On an exit status other than
 * `want` it records a failure and prints the command and the log. */
static int run_logged(const char *name, const char *cmd, int want, char *log, size_t log_len) {
  snprintf(log, log_len, "%s/%s.log", ex.root, name);
  char *full = NULL;
  if (asprintf(&full, "%s >'%s' 2>&1", cmd, log) < 0) {
    fail_msg("%s: out of memory", name);
    return -1;
  }
  int raw = system(full);
  free(full);
  int rc = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  if (rc != want) {
    fail_msg("step '%s' exited with %d, expected %d", name, rc, want);
    printf("  command: %s\n", cmd);
    print_file_tail("output", log, 12000);
  }
  return rc;
}

/* Reads a whole small file; the caller frees. NULL when unreadable. */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s) {
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
  }
  fclose(f);
  return s;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void cleanup(void) {
  if (!ex.tmp) return;
  if (ex.failures == 0 && !getenv("GANFW_TEST_KEEP"))
    nftw(ex.root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  else
    printf("test_example_plugin: the temporary folder %s is kept for a look\n", ex.root);
}

/* --- the steps, each run once and remembered, so that any test can run alone -------------- */

static int ensure_tmp(void) {
  if (ex.tmp) return ex.tmp == STEP_OK;
  snprintf(ex.root, sizeof ex.root, "%s/ganfw_example_XXXXXX", env_or("TMPDIR", "/tmp"));
  if (!mkdtemp(ex.root)) {
    ex.tmp = STEP_FAILED;
    fail_msg("mkdtemp(%s) failed", ex.root);
    return 0;
  }
  ex.tmp = STEP_OK;
  atexit(cleanup);
  snprintf(ex.prefix, sizeof ex.prefix, "%s/prefix", ex.root);
  snprintf(ex.build, sizeof ex.build, "%s/build", ex.root);
  snprintf(ex.config, sizeof ex.config, "%s/run.yaml", ex.root);
  snprintf(ex.out_dir, sizeof ex.out_dir, "%s/out", ex.root);
  snprintf(ex.plugin_dir, sizeof ex.plugin_dir, "%s/" EX_INSTALL_LIBDIR "/ganfw/plugins",
           ex.prefix);
  snprintf(ex.ganfw, sizeof ex.ganfw, "%s/" EX_INSTALL_BINDIR "/ganfw", ex.prefix);
  printf("\n  working in %s\n", ex.root);
  return 1;
}

/* The install must hold every public header of the source tree. */
static int check_headers_installed(void) {
  char dir[4400];
  snprintf(dir, sizeof dir, "%s/core/include/ganfw", env_or("GANFW_SOURCE_DIR", EX_SOURCE_DIR));
  DIR *d = opendir(dir);
  if (!d) {
    fail_msg("cannot list the public headers in %s", dir);
    return 0;
  }
  int ok = 1, n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len < 3 || strcmp(e->d_name + len - 2, ".h") != 0) continue;
    char path[8800];
    snprintf(path, sizeof path, "%s/" EX_INSTALL_INCLUDEDIR "/ganfw/%s", ex.prefix, e->d_name);
    n++;
    if (!file_exists(path)) {
      fail_msg("cmake --install did not install the header %s", path);
      ok = 0;
    }
  }
  closedir(d);
  if (n == 0) fail_msg("no public headers found in %s", dir);
  return ok && n > 0;
}

static int ensure_installed(void) {
  if (ex.installed) return ex.installed == STEP_OK;
  ex.installed = STEP_FAILED;
  if (!ensure_tmp()) return 0;
  char cmd[16384], log[4400];
  shell_command(cmd, sizeof cmd, EX_CMAKE_COMMAND, "--install",
                env_or("GANFW_TEST_BUILD_DIR", EX_BUILD_DIR), "--prefix", ex.prefix, NULL);
  if (run_logged("install", cmd, 0, log, sizeof log) != 0) return 0;
  const char *const expected[] = {"/" EX_INSTALL_BINDIR "/ganfw",
                                  "/" EX_INSTALL_LIBDIR "/cmake/ganfw/ganfwConfig.cmake",
                                  "/" EX_INSTALL_LIBDIR "/cmake/ganfw/ganfwConfigVersion.cmake",
                                  "/" EX_INSTALL_LIBDIR "/ganfw/plugins/ganfw_adam.so",
                                  "/" EX_INSTALL_LIBDIR "/ganfw/plugins/ganfw_dcgan.so"};
  int ok = 1;
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
    char path[8800];
    snprintf(path, sizeof path, "%s%s", ex.prefix, expected[i]);
    if (!file_exists(path)) {
      fail_msg("cmake --install did not put %s in the prefix", path);
      ok = 0;
    }
  }
  if (access(ex.ganfw, X_OK) != 0) {
    fail_msg("the installed %s is not executable", ex.ganfw);
    ok = 0;
  }
  ok &= check_headers_installed();
  if (!ok) print_file_tail("install output", log, 12000);
  if (ok) ex.installed = STEP_OK;
  return ok;
}

/* Configures examples/mlp_gan against the prefix (and nothing else) and builds it. */
static int ensure_built(void) {
  if (ex.built) return ex.built == STEP_OK;
  ex.built = STEP_FAILED;
  if (!ensure_installed()) return 0;
  char src[4400], prefix_def[4400], cc_def[4400], flags_def[4400], link_def[4400];
  snprintf(src, sizeof src, "%s/examples/mlp_gan", env_or("GANFW_SOURCE_DIR", EX_SOURCE_DIR));
  snprintf(prefix_def, sizeof prefix_def, "-DCMAKE_PREFIX_PATH=%s", ex.prefix);
  snprintf(cc_def, sizeof cc_def, "-DCMAKE_C_COMPILER=%s", EX_C_COMPILER);
  snprintf(flags_def, sizeof flags_def, "-DCMAKE_C_FLAGS=%s", EX_C_FLAGS);
  snprintf(link_def, sizeof link_def, "-DCMAKE_MODULE_LINKER_FLAGS=%s", EX_LINK_FLAGS);
  char cmd[16384], log[4400];
  /* No user or system package registry: the package must come from the prefix. */
  shell_command(cmd, sizeof cmd, "@env -u ganfw_DIR -u CMAKE_PREFIX_PATH", EX_CMAKE_COMMAND, "-S",
                src, "-B", ex.build, "-DCMAKE_BUILD_TYPE=Release", prefix_def, cc_def, flags_def,
                link_def, "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF",
                "-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF", NULL);
  if (run_logged("configure_example", cmd, 0, log, sizeof log) != 0) return 0;

  char cache_path[4400], want[4400];
  snprintf(cache_path, sizeof cache_path, "%s/CMakeCache.txt", ex.build);
  snprintf(want, sizeof want, "ganfw_DIR:PATH=%s/" EX_INSTALL_LIBDIR "/cmake/ganfw\n", ex.prefix);
  char *cache = read_text(cache_path);
  int from_prefix = cache && strstr(cache, want);
  free(cache);
  if (!from_prefix) {
    fail_msg("find_package(ganfw) did not use the installed package: %s lacks '%.*s'", cache_path,
             (int)strlen(want) - 1, want);
    print_file_tail("configure output", log, 12000);
    return 0;
  }

  shell_command(cmd, sizeof cmd, EX_CMAKE_COMMAND, "--build", ex.build, NULL);
  if (run_logged("build_example", cmd, 0, log, sizeof log) != 0) return 0;
  char so[4400];
  snprintf(so, sizeof so, "%s/ganfw_mlp_gan.so", ex.build);
  if (!file_exists(so)) {
    fail_msg("the example's build did not make %s", so);
    print_file_tail("build output", log, 12000);
    return 0;
  }
  ex.built = STEP_OK;
  return 1;
}

static int write_be32(FILE *f, uint32_t v) {
  const unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                              (unsigned char)(v >> 8), (unsigned char)v};
  return fwrite(b, 1, 4, f) == 4;
}

/* root/data/train-{images-idx3,labels-idx1}-ubyte: EX_IMAGES random 28x28 images, labels
 * 0..9, in the IDX format of MNIST (big-endian magic 0x803 / 0x801 and dimensions). */
static int ensure_data(void) {
  if (ex.data) return ex.data == STEP_OK;
  ex.data = STEP_FAILED;
  if (!ensure_tmp()) return 0;
  char dir[4400], path[4500];
  snprintf(dir, sizeof dir, "%s/data", ex.root);
  if (mkdir(dir, 0755) != 0) {
    fail_msg("cannot create %s", dir);
    return 0;
  }
  static unsigned char pixels[EX_IMAGES * EX_SIDE * EX_SIDE], labels[EX_IMAGES];
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < sizeof pixels; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    pixels[i] = (unsigned char)(s >> 24);
  }
  for (int i = 0; i < EX_IMAGES; i++) labels[i] = (unsigned char)(i % 10);

  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
  FILE *f = fopen(path, "wb");
  int ok = f && write_be32(f, 0x00000803u) && write_be32(f, EX_IMAGES) && write_be32(f, EX_SIDE) &&
           write_be32(f, EX_SIDE) && fwrite(pixels, 1, sizeof pixels, f) == sizeof pixels;
  if (f && fclose(f) != 0) ok = 0;
  snprintf(path + strlen(dir), sizeof path - strlen(dir), "/train-labels-idx1-ubyte");
  f = ok ? fopen(path, "wb") : NULL;
  ok = ok && f && write_be32(f, 0x00000801u) && write_be32(f, EX_IMAGES) &&
       fwrite(labels, 1, sizeof labels, f) == sizeof labels;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok) {
    fail_msg("cannot write the IDX data set in %s", dir);
    return 0;
  }
  ex.data = STEP_OK;
  return 1;
}

/* A YAML single-quoted scalar of s. */
static void yaml_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

/* root/run.yaml: mlp_gan from the example build (a path relative to the config), adam. */
static int write_config(void) {
  FILE *f = fopen(ex.config, "w");
  if (!f) {
    fail_msg("cannot write %s", ex.config);
    return 0;
  }
  fprintf(f, "# Written by tests/test_example_plugin.c\n"
             "seed: 1\n"
             "device:\n  type: cpu\n  threads: 2\n"
             "plugin_path: [build]\n"
             "data:\n  dataset: mnist\n  path: ");
  char data_dir[4400];
  snprintf(data_dir, sizeof data_dir, "%s/data", ex.root);
  yaml_quoted(f, data_dir);
  fputc('\n', f);
  fprintf(f,
          "model:\n  plugin: mlp_gan\n  nz: %d\n  hidden: %d\n"
          "optim:\n  plugin: adam\n  lr: 2.0e-4\n  betas: [0.5, 0.999]\n"
          "train:\n  batch_size: %d\n  max_steps: %d\n  log_every: 1\n"
          "run:\n  samples: 16\n  sample_nrow: 4\n  out_dir: ",
          EX_NZ, EX_HIDDEN, EX_BATCH, EX_STEPS);
  yaml_quoted(f, ex.out_dir);
  fputc('\n', f);
  return fclose(f) == 0 || (fail_msg("cannot write %s", ex.config), 0);
}

/* The installed ganfw with args[0..n), with the installed plugins also named in
 * $GANFW_PLUGIN_PATH (test_installed_search_order runs it without). */
static void ganfw_command(char *cmd, size_t len, const char *const *args, int n) {
  char env[4600], quoted[4500] = "";
  shell_append(quoted, sizeof quoted, ex.plugin_dir);
  snprintf(env, sizeof env, "GANFW_PLUGIN_PATH=%s", quoted);
  snprintf(cmd, len, "%s", env);
  shell_append(cmd, len, ex.ganfw);
  for (int i = 0; i < n; i++) shell_append(cmd, len, args[i]);
}

static int ensure_trained(void) {
  if (ex.trained) return ex.trained == STEP_OK;
  ex.trained = STEP_FAILED;
  if (!ensure_built() || !ensure_data() || !write_config()) return 0;
  char cmd[16384], log[4400];
  const char *args[] = {ex.config};
  ganfw_command(cmd, sizeof cmd, args, 1);
  if (run_logged("train", cmd, 0, log, sizeof log) != 0) return 0;
  /* The plugin saw the config's sizes and the data set's shape. */
  char *text = read_text(log);
  char want[128];
  snprintf(want, sizeof want, "mlp_gan: nz %d, hidden %d, images [1,%d,%d]", EX_NZ, EX_HIDDEN,
           EX_SIDE, EX_SIDE);
  int seen = text && strstr(text, want);
  free(text);
  if (!seen) {
    fail_msg("the training log lacks the plugin's line '%s'", want);
    print_file_tail("train output", log, 12000);
    return 0;
  }
  ex.trained = STEP_OK;
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

/* metrics.csv: the header and one finite row per step (log_every 1), the last at EX_STEPS. */
static void test_metrics(void) {
  if (!ensure_trained()) {
    fail_msg("metrics: training did not succeed");
    return;
  }
  char path[4400];
  snprintf(path, sizeof path, "%s/metrics.csv", ex.out_dir);
  char *text = read_text(path);
  if (!text) {
    fail_msg("no %s after training", path);
    return;
  }
  int rows = 0, bad = 0;
  long last_step = -1;
  char *save = NULL;
  char *line = strtok_r(text, "\n", &save);
  if (!line || strncmp(line, "step,epoch,loss_d,loss_g", 24) != 0)
    fail_msg("%s: the header is '%s', not step,epoch,loss_d,loss_g,...", path, line ? line : "");
  while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
    rows++;
    char *end = NULL;
    last_step = strtol(line, &end, 10);
    double v[4];
    if (sscanf(line, "%*[^,],%*[^,],%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2], &v[3]) != 4) {
      bad++;
      continue;
    }
    for (int i = 0; i < 4; i++) bad += !isfinite(v[i]) || (i < 2 && v[i] <= 0.0);
  }
  free(text);
  if (rows != EX_STEPS || last_step != EX_STEPS || bad)
    fail_msg("%s: %d rows (want %d), last step %ld, %d malformed or non-finite values", path, rows,
             EX_STEPS, last_step, bad);
}

/* The final checkpoint holds both nets under mlp_gan's names and the config's sizes; the
 * samples grid and resolved config are there. */
static void test_outputs(void) {
  if (!ensure_trained()) {
    fail_msg("outputs: training did not succeed");
    return;
  }
  char path[4400];
  snprintf(path, sizeof path, "%s/checkpoints/step_%08d.safetensors", ex.out_dir, EX_STEPS);
  ganfw_st_file *f = NULL;
  if (ganfw_st_open(path, &f) != GANFW_OK) {
    fail_msg("cannot read the checkpoint %s", path);
    return;
  }
  const struct {
    const char *name;
    int64_t d0, d1;
  } want[] = {{"generator.main.0.weight", EX_HIDDEN, EX_NZ},
              {"generator.main.4.weight", EX_SIDE * EX_SIDE, EX_HIDDEN},
              {"generator.main.4.bias", EX_SIDE * EX_SIDE, -1},
              {"discriminator.main.0.weight", EX_HIDDEN, EX_SIDE * EX_SIDE},
              {"discriminator.main.2.weight", EX_HIDDEN, EX_HIDDEN},
              {"discriminator.main.4.weight", 1, EX_HIDDEN},
              {"discriminator.main.4.bias", 1, -1}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const ganfw_st_tensor *t = ganfw_st_find(f, want[i].name);
    int ndim = want[i].d1 < 0 ? 1 : 2;
    if (!t || t->ndim != ndim || t->shape[0] != want[i].d0 ||
        (ndim == 2 && t->shape[1] != want[i].d1))
      fail_msg("%s: tensor %s missing or of the wrong shape", path, want[i].name);
  }
  const char *step = ganfw_st_metadata(f, "step");
  if (!step || atoi(step) != EX_STEPS)
    fail_msg("%s: metadata step is %s, not %d", path, step ? step : "absent", EX_STEPS);
  ganfw_st_close(f);

  snprintf(path, sizeof path, "%s/samples/step_%06d.png", ex.out_dir, EX_STEPS);
  if (!file_exists(path)) fail_msg("no sample grid %s", path);
  snprintf(path, sizeof path, "%s/config.resolved.yaml", ex.out_dir);
  if (!file_exists(path)) fail_msg("no %s", path);
}

/* `ganfw plugins --plugin-path <example build>` lists mlp_gan from there and adam from the
 * installed prefix. */
static void test_plugins_listing(void) {
  if (!ensure_built()) {
    fail_msg("plugins: the example was not built");
    return;
  }
  char cmd[16384], log[4400];
  const char *args[] = {"plugins", "--plugin-path", ex.build};
  ganfw_command(cmd, sizeof cmd, args, 3);
  if (run_logged("plugins", cmd, 0, log, sizeof log) != 0) return;
  char *text = read_text(log);
  int mlp = 0, adam = 0;
  char *save = NULL;
  for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line;
       line = strtok_r(NULL, "\n", &save)) {
    char kind[32], name[64], version[32], abi[16], path[4400];
    if (sscanf(line, "%31s %63s %31s %15s %4399s", kind, name, version, abi, path) != 5) continue;
    char want_mlp[4500], want_adam[4500];
    snprintf(want_mlp, sizeof want_mlp, "%s/ganfw_mlp_gan.so", ex.build);
    snprintf(want_adam, sizeof want_adam, "%s/ganfw_adam.so", ex.plugin_dir);
    mlp |= strcmp(kind, "model") == 0 && strcmp(name, "mlp_gan") == 0 &&
           strcmp(version, "1.0.0") == 0 && strcmp(path, want_mlp) == 0 &&
           !strstr(line, "shadowed");
    adam |=
        strcmp(kind, "optimizer") == 0 && strcmp(name, "adam") == 0 && strcmp(path, want_adam) == 0;
  }
  free(text);
  if (!mlp || !adam) {
    fail_msg("ganfw plugins: %s%s",
             mlp ? "" : "no 'model mlp_gan 1.0.0' row from the example build; ",
             adam ? "" : "no 'optimizer adam' row from the installed prefix");
    print_file_tail("plugins output", log, 12000);
  }
}

/* The installed ganfw, with nothing in $GANFW_PLUGIN_PATH, searches the plugins installed
 * with it before the build tree it was built in: its adam is the installed one, and the
 * build tree's is listed as shadowed. */
static void test_installed_search_order(void) {
  if (!ensure_installed()) {
    fail_msg("search order: the install failed");
    return;
  }
  char cmd[16384], log[4400];
  snprintf(cmd, sizeof cmd, "env -u GANFW_PLUGIN_PATH ");
  shell_append(cmd, sizeof cmd, ex.ganfw);
  shell_append(cmd, sizeof cmd, "plugins");
  if (run_logged("plugins_search_order", cmd, 0, log, sizeof log) != 0) return;
  char *text = read_text(log);
  const char *install = text ? strstr(text, "(install prefix") : NULL;
  const char *build = text ? strstr(text, "(build tree") : NULL;
  /* The first adam row (the one a config gets) is the prefix's, not shadowed. */
  int unshadowed = 0;
  const char *row = text ? strstr(text, "\noptimizer  adam ") : NULL;
  if (row) {
    char kind[32], name[64], version[32], abi[16], path[4400];
    const char *eol = strchr(row + 1, '\n');
    unshadowed =
        sscanf(row + 1, "%31s %63s %31s %15s %4399s", kind, name, version, abi, path) == 5 &&
        strncmp(path, ex.prefix, strlen(ex.prefix)) == 0 &&
        !(eol ? memmem(row, (size_t)(eol - row), "shadowed", 8) : strstr(row, "shadowed"));
  }
  if (!install || (build && build < install) || !unshadowed)
    fail_msg("installed `ganfw plugins`: %s%s",
             !install || (build && build < install)
                 ? "the install prefix is not searched before the build tree; "
                 : "",
             unshadowed ? "" : "its installed adam is missing or shadowed");
  if (!install || (build && build < install) || !unshadowed)
    print_file_tail("plugins output", log, 12000);
  free(text);
}

/* A bad value reaches the user as a config error (exit 2) naming the key. */
static void test_bad_value(void) {
  if (!ensure_built() || !ensure_data() || !write_config()) {
    fail_msg("bad value: the example was not built");
    return;
  }
  char cmd[16384], log[4400], out_set[4500];
  snprintf(out_set, sizeof out_set, "run.out_dir=%s/out_bad", ex.root);
  const char *args[] = {ex.config, "--set", "model.hidden=0", "--set", out_set};
  ganfw_command(cmd, sizeof cmd, args, 5);
  if (run_logged("bad_value", cmd, 2, log, sizeof log) != 2) return;
  char *text = read_text(log);
  int named = text && strstr(text, "model.hidden is 0") && strstr(text, "mlp_gan");
  free(text);
  if (!named) {
    fail_msg("the error for model.hidden=0 does not name the key and plugin");
    print_file_tail("bad_value output", log, 12000);
  }
}

static CU_TestInfo tests[] = {{"install", test_install},
                              {"build_example", test_build_example},
                              {"train", test_train},
                              {"metrics", test_metrics},
                              {"outputs", test_outputs},
                              {"plugins_listing", test_plugins_listing},
                              {"installed_search_order", test_installed_search_order},
                              {"bad_value", test_bad_value},
                              CU_TEST_INFO_NULL};
GT_MAIN("example_plugin", tests)
