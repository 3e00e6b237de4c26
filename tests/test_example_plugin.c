/* The out-of-tree plugin example end to end: `cmake --install` this build tree into a
 * temporary prefix, build examples/mlp_gan against that prefix alone, train it 5 steps
 * with the installed ganfw on a generated 64-image MNIST-format (IDX) data set, and check
 * the run's outputs and the `ganfw plugins` listing. Each step prints its command and
 * output when it fails; the temporary folder is kept then (or with GANFW_TEST_KEEP=1), and
 * removed when all passed. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"
#include "io/safetensors.h"

#define EX_IMAGES 64
#define EX_SIDE   28
#define EX_NZ     32 /* not the defaults, so that the config is seen to reach the plugin */
#define EX_HIDDEN 48
#define EX_STEPS  5
#define EX_BATCH  16

/* --- the steps, each run once and remembered, so that any test can run alone -------------- */

/* The install must hold every public header of the source tree. */
static int check_headers_installed(void) {
  char dir[4400];
  snprintf(dir, sizeof dir, "%s/core/include/ganfw", ex_source_dir());
  DIR *d = opendir(dir);
  if (!d) {
    ex_fail("cannot list the public headers in %s", dir);
    return 0;
  }
  int ok = 1, n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len < 3 || strcmp(e->d_name + len - 2, ".h") != 0) continue;
    char path[8800];
    snprintf(path, sizeof path, "%s/" EX_INSTALL_INCLUDEDIR "/ganfw/%s", ex.prefix, e->d_name);
    n++;
    if (!ex_file_exists(path)) {
      ex_fail("cmake --install did not install the header %s", path);
      ok = 0;
    }
  }
  closedir(d);
  if (n == 0) ex_fail("no public headers found in %s", dir);
  return ok && n > 0;
}

static int ensure_installed(void) {
  static const char *const expected[] = {
      "/" EX_INSTALL_BINDIR "/ganfw", "/" EX_INSTALL_LIBDIR "/cmake/ganfw/ganfwConfig.cmake",
      "/" EX_INSTALL_LIBDIR "/cmake/ganfw/ganfwConfigVersion.cmake",
      "/" EX_INSTALL_LIBDIR "/ganfw/plugins/ganfw_adam.so",
      "/" EX_INSTALL_LIBDIR "/ganfw/plugins/ganfw_dcgan.so"};
  return ex_ensure_installed(expected, sizeof expected / sizeof expected[0],
                             check_headers_installed);
}

/* Configures examples/mlp_gan against the prefix (and nothing else) and builds it. */
static int ensure_built(void) {
  static const char *const made[] = {"ganfw_mlp_gan.so"};
  return ensure_installed() && ex_ensure_built("mlp_gan", made, 1);
}

/* root/data/train-{images-idx3,labels-idx1}-ubyte: EX_IMAGES random 28x28 images, labels
 * 0..9, in the IDX format of MNIST. */
static int ensure_data(void) {
  if (ex.data) return ex.data == EX_STEP_OK;
  ex.data = EX_STEP_FAILED;
  static unsigned char pixels[EX_IMAGES * EX_SIDE * EX_SIDE], labels[EX_IMAGES];
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < sizeof pixels; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    pixels[i] = (unsigned char)(s >> 24);
  }
  for (int i = 0; i < EX_IMAGES; i++) labels[i] = (unsigned char)(i % 10);
  if (!ex_write_idx("data", pixels, labels, EX_IMAGES, EX_SIDE)) return 0;
  ex.data = EX_STEP_OK;
  return 1;
}

/* root/run.yaml: mlp_gan from the example build (a path relative to the config), adam. */
static int write_config(void) {
  FILE *f = fopen(ex.config, "w");
  if (!f) {
    ex_fail("cannot write %s", ex.config);
    return 0;
  }
  fprintf(f, "# Written by tests/test_example_plugin.c\n"
             "seed: 1\n"
             "device:\n  type: cpu\n  threads: 2\n"
             "plugin_path: [build]\n"
             "data:\n  dataset: mnist\n  path: ");
  char data_dir[4400];
  snprintf(data_dir, sizeof data_dir, "%s/data", ex.root);
  ex_yaml_quoted(f, data_dir);
  fputc('\n', f);
  fprintf(f,
          "model:\n  plugin: mlp_gan\n  nz: %d\n  hidden: %d\n"
          "optim:\n  plugin: adam\n  lr: 2.0e-4\n  betas: [0.5, 0.999]\n"
          "train:\n  batch_size: %d\n  max_steps: %d\n  log_every: 1\n"
          "run:\n  samples: 16\n  sample_nrow: 4\n  out_dir: ",
          EX_NZ, EX_HIDDEN, EX_BATCH, EX_STEPS);
  ex_yaml_quoted(f, ex.out_dir);
  fputc('\n', f);
  return fclose(f) == 0 || (ex_fail("cannot write %s", ex.config), 0);
}

static int ensure_trained(void) {
  if (ex.trained) return ex.trained == EX_STEP_OK;
  ex.trained = EX_STEP_FAILED;
  if (!ensure_built() || !ensure_data() || !write_config()) return 0;
  char cmd[16384], log[4400];
  const char *args[] = {ex.config};
  ex_ganfw_command(cmd, sizeof cmd, args, 1);
  if (ex_run_logged("train", cmd, 0, log, sizeof log) != 0) return 0;
  /* The plugin saw the config's sizes and the data set's shape. */
  char want[128];
  snprintf(want, sizeof want, "mlp_gan: nz %d, hidden %d, images [1,%d,%d]", EX_NZ, EX_HIDDEN,
           EX_SIDE, EX_SIDE);
  if (!ex_log_has("train", log, want, NULL)) return 0;
  ex.trained = EX_STEP_OK;
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

/* Losses D and G finite and positive, D(x) and D(G(z)) finite. */
static int bad_losses(const double *v) {
  int bad = 0;
  for (int i = 0; i < 4; i++) bad += !isfinite(v[i]) || (i < 2 && v[i] <= 0.0);
  return bad;
}

/* metrics.csv: the header and one finite row per step (log_every 1), the last at EX_STEPS. */
static void test_metrics(void) {
  if (!ensure_trained()) {
    ex_fail("metrics: training did not succeed");
    return;
  }
  ex_check_metrics("step,epoch,loss_d,loss_g", 4, bad_losses, "finite (losses positive)", EX_STEPS);
}

/* The final checkpoint holds both nets under mlp_gan's names and the config's sizes; the
 * samples grid and resolved config are there. */
static void test_outputs(void) {
  if (!ensure_trained()) {
    ex_fail("outputs: training did not succeed");
    return;
  }
  char path[4400];
  snprintf(path, sizeof path, "%s/checkpoints/step_%08d.safetensors", ex.out_dir, EX_STEPS);
  ganfw_st_file *f = NULL;
  if (ganfw_st_open(path, &f) != GANFW_OK) {
    ex_fail("cannot read the checkpoint %s", path);
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
      ex_fail("%s: tensor %s missing or of the wrong shape", path, want[i].name);
  }
  const char *step = ganfw_st_metadata(f, "step");
  if (!step || atoi(step) != EX_STEPS)
    ex_fail("%s: metadata step is %s, not %d", path, step ? step : "absent", EX_STEPS);
  ganfw_st_close(f);

  snprintf(path, sizeof path, "%s/samples/step_%06d.png", ex.out_dir, EX_STEPS);
  if (!ex_file_exists(path)) ex_fail("no sample grid %s", path);
  snprintf(path, sizeof path, "%s/config.resolved.yaml", ex.out_dir);
  if (!ex_file_exists(path)) ex_fail("no %s", path);
}

/* `ganfw plugins --plugin-path <example build>` lists mlp_gan from there and adam from the
 * installed prefix. */
static void test_plugins_listing(void) {
  if (!ensure_built()) {
    ex_fail("plugins: the example was not built");
    return;
  }
  char log[4400], want_mlp[4500], want_adam[4500];
  char *text = ex_list_plugins(log, sizeof log);
  if (!text) return;
  snprintf(want_mlp, sizeof want_mlp, "%s/ganfw_mlp_gan.so", ex.build);
  snprintf(want_adam, sizeof want_adam, "%s/ganfw_adam.so", ex.plugin_dir);
  int mlp = ex_listing_has(text, "model", "mlp_gan", "1.0.0", want_mlp, 1);
  int adam = ex_listing_has(text, "optimizer", "adam", NULL, want_adam, 0);
  free(text);
  if (!mlp || !adam) {
    ex_fail("ganfw plugins: %s%s",
            mlp ? "" : "no 'model mlp_gan 1.0.0' row from the example build; ",
            adam ? "" : "no 'optimizer adam' row from the installed prefix");
    ex_print_file_tail("plugins output", log, 12000);
  }
}

/* The installed ganfw, with nothing in $GANFW_PLUGIN_PATH, searches the plugins installed
 * with it before the build tree it was built in: its adam is the installed one, and the
 * build tree's is listed as shadowed. */
static void test_installed_search_order(void) {
  if (!ensure_installed()) {
    ex_fail("search order: the install failed");
    return;
  }
  char cmd[16384], log[4400];
  snprintf(cmd, sizeof cmd, "env -u GANFW_PLUGIN_PATH ");
  ex_shell_append(cmd, sizeof cmd, ex.ganfw);
  ex_shell_append(cmd, sizeof cmd, "plugins");
  if (ex_run_logged("plugins_search_order", cmd, 0, log, sizeof log) != 0) return;
  char *text = ex_read_text(log);
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
    ex_fail("installed `ganfw plugins`: %s%s",
            !install || (build && build < install)
                ? "the install prefix is not searched before the build tree; "
                : "",
            unshadowed ? "" : "its installed adam is missing or shadowed");
  if (!install || (build && build < install) || !unshadowed)
    ex_print_file_tail("plugins output", log, 12000);
  free(text);
}

/* The build tree is a package too: examples/mlp_gan configures against ganfw_DIR=<this
 * build>, nothing installed, and builds with the source tree's headers. */
static void test_build_tree_package(void) {
  if (!ex_ensure_tmp()) return;
  char src[4400], dir_def[4400], build[4400], cc_def[4400], flags_def[4400], link_def[4400];
  snprintf(src, sizeof src, "%s/examples/mlp_gan", ex_source_dir());
  const char *tree = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(dir_def, sizeof dir_def, "-Dganfw_DIR=%s", tree && *tree ? tree : EX_BUILD_DIR);
  snprintf(build, sizeof build, "%s/build_tree_example", ex.root);
  snprintf(cc_def, sizeof cc_def, "-DCMAKE_C_COMPILER=%s", EX_C_COMPILER);
  snprintf(flags_def, sizeof flags_def, "-DCMAKE_C_FLAGS=%s", EX_C_FLAGS);
  snprintf(link_def, sizeof link_def, "-DCMAKE_MODULE_LINKER_FLAGS=%s", EX_LINK_FLAGS);
  char cmd[16384], log[4400];
  ex_shell_command(cmd, sizeof cmd, "@env -u CMAKE_PREFIX_PATH", EX_CMAKE_COMMAND, "-S", src, "-B",
                   build, "-DCMAKE_BUILD_TYPE=Release", dir_def, cc_def, flags_def, link_def, NULL);
  if (ex_run_logged("configure_build_tree", cmd, 0, log, sizeof log) != 0) return;
  ex_shell_command(cmd, sizeof cmd, EX_CMAKE_COMMAND, "--build", build, NULL);
  if (ex_run_logged("build_build_tree", cmd, 0, log, sizeof log) != 0) return;
  char so[4500];
  snprintf(so, sizeof so, "%s/ganfw_mlp_gan.so", build);
  if (!ex_file_exists(so)) {
    ex_fail("building against the build tree's package did not make %s", so);
    ex_print_file_tail("build output", log, 12000);
  }
}

/* A bad value reaches the user as a config error (exit 2) naming the key. */
static void test_bad_value(void) {
  if (!ensure_built() || !ensure_data() || !write_config()) {
    ex_fail("bad value: the example was not built");
    return;
  }
  char cmd[16384], log[4400], out_set[4500];
  snprintf(out_set, sizeof out_set, "run.out_dir=%s/out_bad", ex.root);
  const char *args[] = {ex.config, "--set", "model.hidden=0", "--set", out_set};
  ex_ganfw_command(cmd, sizeof cmd, args, 5);
  if (ex_run_logged("bad_value", cmd, 2, log, sizeof log) == 2)
    ex_log_has("bad_value", log, "model.hidden is 0", "mlp_gan", NULL);
}

static CU_TestInfo tests[] = {{"install", test_install},
                              {"build_example", test_build_example},
                              {"build_tree_package", test_build_tree_package},
                              {"train", test_train},
                              {"metrics", test_metrics},
                              {"outputs", test_outputs},
                              {"plugins_listing", test_plugins_listing},
                              {"installed_search_order", test_installed_search_order},
                              {"bad_value", test_bad_value},
                              CU_TEST_INFO_NULL};
int main(void) {
  ex_init("test_example_plugin", "ganfw_example");
  return gt_run("example_plugin", tests);
}
