/* Tests for the plugin host (core/src/plugin/plugin_host.c) against the test plugins that
 * tests/plugins.cmake builds into $GANFW_TEST_BUILD_DIR/tests/plugins: valid plugins of each
 * kind (called through their vtables with a small fake host), every broken descriptor and
 * file, the search order, loading by path, the `ganfw plugins` listing and the exports. */
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "config/config.h"
#include "ganfw/ganfw.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "train/run.h"
#include "train/session.h"
#include "train/trainer.h"

#ifndef GANFW_NM
#define GANFW_NM "nm"
#endif

/* --- where the test plugins are ------------------------------------------------------ */

/* Sizes chosen so that every path built from these fits (and GCC can tell). */
#define TP_DIR_MAX  1024
#define TP_FILE_MAX (TP_DIR_MAX + 128)

static const char *tp_dir(void) {
  static char dir[TP_DIR_MAX];
  if (!dir[0]) {
    const char *build = getenv("GANFW_TEST_BUILD_DIR");
    if (!build) {
      fprintf(stderr, "GANFW_TEST_BUILD_DIR is not set; run this suite through ctest\n");
      build = ".";
    }
    snprintf(dir, sizeof dir, "%s/tests/plugins", build);
  }
  return dir;
}

static const char *tp_alt_dir(void) {
  static char dir[TP_DIR_MAX + 8];
  if (!dir[0]) snprintf(dir, sizeof dir, "%s/alt", tp_dir());
  return dir;
}

/* The file of test plugin `name` (a static buffer, one of four in rotation). */
static const char *tp_file(const char *dir, const char *name) {
  static char buf[4][TP_FILE_MAX];
  static int next;
  char *p = buf[next++ % 4];
  snprintf(p, TP_FILE_MAX, "%s/ganfw_%s.so", dir, name);
  return p;
}

static int contains(const char *haystack, const char *needle) {
  int ok = strstr(haystack, needle) != NULL;
  if (!ok) fprintf(stderr, "\n  expected \"%s\" in:\n  %s\n", needle, haystack);
  return ok;
}

static int starts_with(const char *s, const char *prefix) {
  int ok = strncmp(s, prefix, strlen(prefix)) == 0;
  if (!ok) fprintf(stderr, "\n  expected \"%s\" at the start of:\n  %s\n", prefix, s);
  return ok;
}

/* True when `path` is no longer mapped into the process (it was dlclosed). */
static int is_unloaded(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h == NULL;
}

/* --- a fake host: config values from a key list, foreach_axpy on host floats ---------- */

typedef struct fake_kv {
  const char *key;
  double value;
} fake_kv;

static char fake_error_msg[512];

static ganfw_status fake_error(ganfw_ctx *ctx, ganfw_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fake_error_msg, sizeof fake_error_msg, fmt, ap);
  va_end(ap);
  return code;
}

static const fake_kv *fake_find(const ganfw_cfg *node, const char *key) {
  for (const fake_kv *kv = (const fake_kv *)node; kv && kv->key; kv++)
    if (strcmp(kv->key, key) == 0) return kv;
  return NULL;
}

static ganfw_status fake_cfg_int(const ganfw_cfg *node, const char *key, int64_t def,
                                 int64_t *out) {
  const fake_kv *kv = fake_find(node, key);
  *out = kv ? (int64_t)kv->value : def;
  return GANFW_OK;
}

static ganfw_status fake_cfg_float(const ganfw_cfg *node, const char *key, double def,
                                   double *out) {
  const fake_kv *kv = fake_find(node, key);
  *out = kv ? kv->value : def;
  return GANFW_OK;
}

static ganfw_status fake_axpy(ganfw_ctx *ctx, ganfw_tensor *const *y, float alpha,
                              ganfw_tensor *const *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float *yd = y[i]->data;
    const float *xd = x[i]->data;
    for (int64_t j = 0; j < y[i]->numel; j++) yd[j] += alpha * xd[j];
  }
  return GANFW_OK;
}

static ganfw_host fake_host(void) {
  ganfw_host h;
  memset(&h, 0, sizeof h);
  h.abi_major = GANFW_ABI_MAJOR;
  h.abi_minor = GANFW_ABI_MINOR;
  h.struct_size = sizeof h;
  h.error = fake_error;
  h.cfg_int = fake_cfg_int;
  h.cfg_float = fake_cfg_float;
  h.foreach_axpy = fake_axpy;
  return h;
}

static ganfw_tensor fake_tensor(float *data, int64_t n) {
  ganfw_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.shape[0] = n;
  t.shape[1] = t.shape[2] = t.shape[3] = 1;
  t.numel = n;
  t.nbytes = n * (int64_t)sizeof(float);
  t.ndim = 1;
  t.dtype = GANFW_DTYPE_F32;
  t.category = GANFW_MEM_PARAM;
  t.name = "";
  return t;
}

/* --- valid plugins ---------------------------------------------------------------------- */

static void test_valid_model(void) {
  const char *dirs[] = {tp_dir()};
  ganfw_plugin *p = NULL;
  ganfw_status st = ganfw_plugin_load("tpmodel", GANFW_PLUGIN_MODEL, "model.plugin", dirs, 1, &p);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  const ganfw_plugin_desc *d = ganfw_plugin_desc_of(p);
  CU_ASSERT_EQUAL(d->kind, GANFW_PLUGIN_MODEL);
  CU_ASSERT_EQUAL(ganfw_plugin_kind(p), GANFW_PLUGIN_MODEL);
  CU_ASSERT_STRING_EQUAL(d->name, "tpmodel");
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_name(p), "tpmodel");
  CU_ASSERT_STRING_EQUAL(d->version, "1.0.0");
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_path(p), tp_file(tp_dir(), "tpmodel"));
  /* The core calls through its own copy of the vtable, equal to the plugin's. */
  CU_ASSERT_PTR_NOT_EQUAL(ganfw_plugin_vtable(p), d->vtable);
  CU_ASSERT_EQUAL(ganfw_plugin_vtable_size(p), sizeof(ganfw_model_vt));
  CU_ASSERT_EQUAL(memcmp(ganfw_plugin_vtable(p), d->vtable, sizeof(ganfw_model_vt)), 0);

  const ganfw_model_vt *vt = ganfw_plugin_vtable(p);
  ganfw_host host = fake_host();
  const fake_kv cfg[] = {{"latent_dim", 64}, {NULL, 0}};
  ganfw_data_info data = {sizeof data, 3, 64, 64, 0, 0};
  void *self = NULL;
  CU_ASSERT_EQUAL(vt->family, GANFW_MODEL_GAN);
  CU_ASSERT_EQUAL_FATAL(vt->create(&host, NULL, (const ganfw_cfg *)cfg, &data, &self), GANFW_OK);
  CU_ASSERT_EQUAL(vt->latent_dim(self), 64);
  CU_ASSERT_PTR_NULL(vt->net(self, "generator"));
  vt->destroy(self);
  vt->destroy(NULL);
  ganfw_plugin_unload(p);
  CU_ASSERT(is_unloaded(tp_file(tp_dir(), "tpmodel")));
}

static void test_valid_sgd(void) {
  const char *dirs[] = {tp_dir()};
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("tpsgd", GANFW_PLUGIN_OPTIM, "optim.plugin", dirs, 1, &p),
                        GANFW_OK);
  const ganfw_optim_vt *vt = ganfw_plugin_vtable(p);
  CU_ASSERT_EQUAL(ganfw_plugin_desc_of(p)->kind, GANFW_PLUGIN_OPTIM);

  float w0[3] = {1.0f, -2.0f, 0.5f}, g0[3] = {0.1f, 0.2f, -0.3f};
  float w1[2] = {4.0f, 0.0f}, g1[2] = {-1.0f, 2.0f};
  const float w0_init[3] = {1.0f, -2.0f, 0.5f}, g0_init[3] = {0.1f, 0.2f, -0.3f};
  const float w1_init[2] = {4.0f, 0.0f}, g1_init[2] = {-1.0f, 2.0f};
  ganfw_tensor tw0 = fake_tensor(w0, 3), tg0 = fake_tensor(g0, 3);
  ganfw_tensor tw1 = fake_tensor(w1, 2), tg1 = fake_tensor(g1, 2);
  const ganfw_param params[2] = {{"a.weight", &tw0, &tg0}, {"b.weight", &tw1, &tg1}};
  const fake_kv cfg[] = {{"weight_decay", 0.5}, {NULL, 0}};
  ganfw_host host = fake_host();
  void *self = NULL;
  CU_ASSERT_EQUAL_FATAL(vt->create(&host, NULL, (const ganfw_cfg *)cfg, params, 2, &self),
                        GANFW_OK);
  const double lr = 0.1, wd = 0.5;
  CU_ASSERT_EQUAL(vt->step(self, lr), GANFW_OK);
  double err = 0;
  for (int i = 0; i < 3; i++) {
    double want = w0_init[i] - lr * (g0_init[i] + wd * w0_init[i]);
    err = fmax(err, fabs(w0[i] - want));
  }
  for (int i = 0; i < 2; i++) {
    double want = w1_init[i] - lr * (g1_init[i] + wd * w1_init[i]);
    err = fmax(err, fabs(w1[i] - want));
  }
  CU_ASSERT(err < 1e-6);
  CU_ASSERT_PTR_NOT_NULL_FATAL(vt->get_step);
  CU_ASSERT_EQUAL(vt->get_step(self), 1);
  vt->set_step(self, 41);
  CU_ASSERT_EQUAL(vt->get_step(self), 41);
  vt->destroy(self);
  vt->destroy(NULL);
  ganfw_plugin_unload(p);
}

static void test_valid_memory(void) {
  const char *dirs[] = {tp_dir()};
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL_FATAL(
      ganfw_plugin_load("tpmem", GANFW_PLUGIN_MEMORY, "memory[0].plugin", dirs, 1, &p), GANFW_OK);
  const ganfw_memory_vt *vt = ganfw_plugin_vtable(p);
  ganfw_host host = fake_host();
  const fake_kv cfg[] = {{"micro_batches", 4}, {NULL, 0}};
  void *self = NULL;
  CU_ASSERT_EQUAL_FATAL(vt->create(&host, NULL, (const ganfw_cfg *)cfg, &self), GANFW_OK);
  ganfw_exec_options opts = {
      .struct_size = sizeof opts, .compute_dtype = GANFW_DTYPE_F32, .micro_batches = 1};
  CU_ASSERT_EQUAL(vt->configure(self, &opts), GANFW_OK);
  CU_ASSERT_EQUAL(opts.micro_batches, 4);
  CU_ASSERT_EQUAL(opts.compute_dtype, GANFW_DTYPE_F32);
  CU_ASSERT_PTR_NULL(vt->loss_scale);
  vt->destroy(self);

  const fake_kv bad[] = {{"micro_batches", 0}, {NULL, 0}};
  self = NULL;
  CU_ASSERT_EQUAL(vt->create(&host, NULL, (const ganfw_cfg *)bad, &self), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(self);
  CU_ASSERT(contains(fake_error_msg, "micro_batches"));
  ganfw_plugin_unload(p);
}

/* A trainer runs the step through the step calls of its own minor: one built for a newer
 * minor, or for one before trainers existed, is refused naming both versions. */
static void test_trainer_minor(void) {
  const char *dirs[] = {tp_dir()};
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL_FATAL(
      ganfw_plugin_load("tptrainer", GANFW_PLUGIN_TRAINER, "trainer.plugin", dirs, 1, &p),
      GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_plugin_kind(p), GANFW_PLUGIN_TRAINER);
  ganfw_plugin_unload(p);
  p = NULL;
  CU_ASSERT_EQUAL(
      ganfw_plugin_load("newtrainer", GANFW_PLUGIN_TRAINER, "trainer.plugin", dirs, 1, &p),
      GANFW_ERR_PLUGIN);
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT(contains(ganfw_error_message(), "1.99, newer than this ganfw's"));
  CU_ASSERT(contains(ganfw_error_message(), "trainer.plugin"));
  CU_ASSERT_EQUAL(
      ganfw_plugin_load("oldtrainer", GANFW_PLUGIN_TRAINER, "trainer.plugin", dirs, 1, &p),
      GANFW_ERR_PLUGIN);
  CU_ASSERT(contains(ganfw_error_message(), "declares kind 4 (trainer) but was built for ABI 1.5"));
  ganfw_error_clear();
}

/* A plugin built for a newer minor ABI is accepted (it checks host->struct_size itself). */
static void test_newer_minor_accepted(void) {
  const char *dirs[] = {tp_dir()};
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("newminor", -1, NULL, dirs, 1, &p), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_plugin_desc_of(p)->abi_major, GANFW_ABI_MAJOR);
  CU_ASSERT_EQUAL(ganfw_plugin_desc_of(p)->abi_minor, 99);
  ganfw_plugin_unload(p);
  /* Its vtable claims 64 bytes more than this core knows: the copy takes the core's size
   * (AddressSanitizer would catch a read of the plugin's claimed size). */
  p = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("bigvt", GANFW_PLUGIN_OPTIM, NULL, dirs, 1, &p),
                        GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_plugin_vtable_size(p), sizeof(ganfw_optim_vt) + 64);
  const ganfw_optim_vt *vt = ganfw_plugin_vtable(p);
  CU_ASSERT_PTR_NOT_NULL(vt->step);
  CU_ASSERT_EQUAL(vt->step(NULL, 0.1), GANFW_OK);
  ganfw_plugin_unload(p);
}

/* --- broken plugins ---------------------------------------------------------------------- */

/* Loads `name` from the test plugin directory and checks the refusal: GANFW_ERR_PLUGIN, no
 * plugin, a message with the `what` prefix, the file's path and each key phrase, and the
 * file no longer loaded. */
static void expect_refused(const char *name, int32_t kind, const char *phrase1,
                           const char *phrase2) {
  const char *dirs[] = {tp_dir()};
  const char *what = "config.yaml:7:11: optim.plugin";
  const char *path = tp_file(tp_dir(), name);
  ganfw_plugin *p = (ganfw_plugin *)&p; /* must be reset to NULL */
  ganfw_error_clear();
  ganfw_status st = ganfw_plugin_load(name, kind, what, dirs, 1, &p);
  CU_ASSERT_EQUAL(st, GANFW_ERR_PLUGIN);
  CU_ASSERT_EQUAL(ganfw_error_code(), GANFW_ERR_PLUGIN);
  CU_ASSERT_PTR_NULL(p);
  const char *msg = ganfw_error_message();
  CU_ASSERT(starts_with(msg, "config.yaml:7:11: optim.plugin: "));
  CU_ASSERT(contains(msg, path));
  CU_ASSERT(contains(msg, phrase1));
  if (phrase2) CU_ASSERT(contains(msg, phrase2));
  CU_ASSERT(is_unloaded(path));
  if (st == GANFW_OK) ganfw_plugin_unload(p);
}

#define STR2(x)  #x
#define STR(x)   STR2(x)
#define THIS_ABI STR(GANFW_ABI_MAJOR) "." STR(GANFW_ABI_MINOR)

static void test_wrong_abi_major(void) {
  expect_refused("badabi", -1,
                 "was built for ABI 2.0, this ganfw speaks ABI " THIS_ABI ": rebuild the plugin "
                 "against this ganfw's headers",
                 NULL);
}

static void test_missing_entry(void) {
  expect_refused("noentry", -1, "does not export ganfw_plugin_entry", "GANFW_PLUGIN_EXPORT");
}

static void test_entry_returns_null(void) {
  expect_refused("nullentry", -1, "ganfw_plugin_entry() returned NULL", NULL);
}

static void test_not_elf(void) {
  /* glibc says "invalid ELF header" or "file too short" depending on the size. */
  expect_refused("notelf", -1, "cannot load plugin", "is not a shared library");
  CU_ASSERT(strstr(ganfw_error_message(), "invalid ELF header") ||
            strstr(ganfw_error_message(), "file too short"));
}

static void test_unresolved_symbol(void) {
  expect_refused("unresolved", -1, "undefined symbol: ganfw_tp_function_nobody_defines",
                 "host table");
}

static void test_small_descriptor(void) {
  expect_refused("smalldesc", -1, "descriptor struct_size is 16 bytes",
                 "sizeof(ganfw_plugin_desc)");
}

static void test_kind_out_of_range(void) {
  expect_refused("badkind", -1, "declares kind 7", "GANFW_PLUGIN_");
}

static void test_empty_name(void) {
  expect_refused("noname", -1, "has no name (descriptor name is empty)", NULL);
}

static void test_name_mismatch(void) {
  expect_refused("wrongname", GANFW_PLUGIN_OPTIM, "calls itself 'othername'",
                 "found as 'wrongname'");
  /* Loaded by path, the file's own name is what counts. */
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL_FATAL(
      ganfw_plugin_load(tp_file(tp_dir(), "wrongname"), GANFW_PLUGIN_OPTIM, NULL, NULL, 0, &p),
      GANFW_OK);
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_name(p), "othername");
  ganfw_plugin_unload(p);
}

static void test_null_vtable(void) {
  expect_refused("nullvt", -1, "has a NULL vtable", "ganfw_optim_vt");
}

static void test_small_vtable(void) {
  expect_refused("smallvt", -1, "vtable struct_size is 8 bytes",
                 "up to its last required member 'step'");
}

static void test_null_required_member(void) {
  expect_refused("nullmember", GANFW_PLUGIN_OPTIM, "required vtable member 'step' is NULL", NULL);
}

static void test_unknown_model_family(void) {
  expect_refused("badfamily", GANFW_PLUGIN_MODEL, "declares family 5", "GANFW_MODEL_GAN");
}

static void test_wrong_kind(void) {
  const char *dirs[] = {tp_dir()};
  const char *path = tp_file(tp_dir(), "tpsgd");
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL(ganfw_plugin_load("tpsgd", GANFW_PLUGIN_MODEL, "model.plugin", dirs, 1, &p),
                  GANFW_ERR_PLUGIN);
  CU_ASSERT_PTR_NULL(p);
  char want[PATH_MAX + 128];
  snprintf(want, sizeof want,
           "'tpsgd' at %s is an optimizer plugin, but model.plugin needs a model plugin", path);
  CU_ASSERT(contains(ganfw_error_message(), want));
  CU_ASSERT(is_unloaded(path));
}

/* A file loaded twice is one plugin with two holds: the second load reads nothing, a load
 * asking for another kind is refused as a first load would be, and the file stays mapped
 * until the last hold is given up. */
static void test_loaded_twice(void) {
  const char *dirs[] = {tp_dir()};
  const char *path = tp_file(tp_dir(), "tpsgd");
  ganfw_plugin *a = NULL, *b = NULL, *m = (ganfw_plugin *)&m;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("tpsgd", GANFW_PLUGIN_OPTIM, "a", dirs, 1, &a), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load(path, -1, "b", NULL, 0, &b), GANFW_OK);
  CU_ASSERT_PTR_EQUAL(a, b);
  CU_ASSERT_EQUAL(ganfw_plugin_load("tpsgd", GANFW_PLUGIN_MODEL, "model.plugin", dirs, 1, &m),
                  GANFW_ERR_PLUGIN);
  CU_ASSERT_PTR_NULL(m);
  char want[PATH_MAX + 128];
  snprintf(want, sizeof want,
           "'tpsgd' at %s is an optimizer plugin, but model.plugin needs a model plugin", path);
  CU_ASSERT(contains(ganfw_error_message(), want));
  ganfw_plugin_unload(a);
  CU_ASSERT_FALSE(is_unloaded(path));
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_name(b), "tpsgd");
  CU_ASSERT_PTR_EQUAL(ganfw_plugin_retain(b), b);
  ganfw_plugin_unload(b);
  CU_ASSERT_FALSE(is_unloaded(path));
  ganfw_plugin_unload(b);
  CU_ASSERT(is_unloaded(path));
}

/* A command's config keeps the plugins its runs loaded: its next run, and a variant
 * derived from it, share them; freeing the config unloads them. */
static void test_run_config_keeps_plugins(void) {
  char dir[] = "/tmp/ganfw_plugin_keep_XXXXXX", path[PATH_MAX];
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/keep.yaml", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "plugin_path: [%s]\nmodel: {plugin: tpmodel}\noptim: {plugin: tpsgd}\n", tp_dir());
  fclose(f);
  const char *model = tp_file(tp_dir(), "tpmodel"), *optim = tp_file(tp_dir(), "tpsgd");
  ganfw_run_config *rc = NULL, *variant = NULL;
  ganfw_run *run = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_run_config_open(path, NULL, 0, &rc), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_run_open(rc, &run), GANFW_OK);
  const ganfw_plugin *first = run->model;
  ganfw_run_close(run);
  CU_ASSERT_FALSE(is_unloaded(model));
  CU_ASSERT_FALSE(is_unloaded(optim));
  CU_ASSERT_EQUAL_FATAL(ganfw_run_open(rc, &run), GANFW_OK);
  CU_ASSERT_PTR_EQUAL(run->model, first);
  ganfw_run_close(run);
  const char *no_optim[] = {"~optim"};
  CU_ASSERT_EQUAL_FATAL(ganfw_run_config_derive(rc, no_optim, 1, &variant), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_run_open(variant, &run), GANFW_OK);
  CU_ASSERT_PTR_EQUAL(run->model, first);
  CU_ASSERT_PTR_NULL(run->optim);
  ganfw_run_close(run);
  ganfw_run_config_free(variant);
  CU_ASSERT_FALSE(is_unloaded(model));
  ganfw_run_config_free(rc);
  CU_ASSERT(is_unloaded(model));
  CU_ASSERT(is_unloaded(optim));
  unlink(path);
  rmdir(dir);
}

/* A copy of a valid plugin with the ELF header's e_machine changed to another CPU. */
static void test_wrong_architecture(void) {
  char dir[] = "/tmp/ganfw_plugin_host_XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/ganfw_tpmodel.so", dir);
  FILE *in = fopen(tp_file(tp_dir(), "tpmodel"), "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(in);
  static unsigned char buf[1 << 22];
  size_t n = fread(buf, 1, sizeof buf, in);
  fclose(in);
  CU_ASSERT_FATAL(n > 64 && n < sizeof buf && memcmp(buf, "\177ELF", 4) == 0);
  /* e_machine at offset 18 (little endian): x86-64 is 62, AArch64 183. */
  unsigned machine = buf[18] | (unsigned)buf[19] << 8;
  unsigned other = machine == 62 ? 183 : 62;
  buf[18] = (unsigned char)(other & 0xff);
  buf[19] = (unsigned char)(other >> 8);
  FILE *outf = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(outf);
  CU_ASSERT_EQUAL(fwrite(buf, 1, n, outf), n);
  fclose(outf);

  const char *dirs[] = {dir};
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL(ganfw_plugin_load("tpmodel", GANFW_PLUGIN_MODEL, "model.plugin", dirs, 1, &p),
                  GANFW_ERR_PLUGIN);
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT(contains(ganfw_error_message(), path));
  CU_ASSERT(contains(ganfw_error_message(), "cannot load plugin"));
  char want[128];
  snprintf(want, sizeof want, "(ELF machine %u), but this ganfw runs on", other);
  CU_ASSERT(contains(ganfw_error_message(), want));
  CU_ASSERT(contains(ganfw_error_message(), "rebuild the plugin for this machine"));
  remove(path);
  rmdir(dir);
}

/* --- finding plugins ------------------------------------------------------------------ */

static void test_not_found(void) {
  setenv(GANFW_PLUGIN_PATH_ENV, "/nonexistent/env_a::/nonexistent/env_b:", 1);
  const char *dirs[] = {"/nonexistent/config_dir"};
  ganfw_plugin *p = NULL;
  ganfw_status st = ganfw_plugin_load("nosuchplugin", GANFW_PLUGIN_MODEL,
                                      "cfg.yaml:3:11: model.plugin", dirs, 1, &p);
  unsetenv(GANFW_PLUGIN_PATH_ENV);
  CU_ASSERT_EQUAL(st, GANFW_ERR_PLUGIN);
  CU_ASSERT_PTR_NULL(p);
  const char *msg = ganfw_error_message();
  CU_ASSERT(starts_with(msg, "cfg.yaml:3:11: model.plugin: "));
  CU_ASSERT(contains(msg, "model plugin 'nosuchplugin' not found"));
  CU_ASSERT(contains(msg, "ganfw_nosuchplugin.so"));
  CU_ASSERT(contains(msg, "/nonexistent/config_dir (plugin_path, missing)"));
  CU_ASSERT(contains(msg, "/nonexistent/env_a (GANFW_PLUGIN_PATH, missing)"));
  CU_ASSERT(contains(msg, "/nonexistent/env_b (GANFW_PLUGIN_PATH, missing)"));
  CU_ASSERT(contains(msg, GANFW_BUILD_PLUGIN_DIR " (build tree"));
  CU_ASSERT(contains(msg, GANFW_INSTALL_PLUGIN_REL " (install prefix"));
  CU_ASSERT(contains(msg, "to plugin_path in the config or to GANFW_PLUGIN_PATH"));
  /* The order of the directories is the search order. */
  CU_ASSERT(strstr(msg, "config_dir") < strstr(msg, "env_a"));
  CU_ASSERT(strstr(msg, "env_b") < strstr(msg, GANFW_BUILD_PLUGIN_DIR));

  CU_ASSERT_EQUAL(ganfw_plugin_load("", -1, "model.plugin", NULL, 0, &p), GANFW_ERR_PLUGIN);
  CU_ASSERT_EQUAL(ganfw_plugin_load(NULL, -1, "model.plugin", NULL, 0, &p), GANFW_ERR_PLUGIN);
  CU_ASSERT_EQUAL(ganfw_plugin_load("tpmodel", -1, NULL, NULL, 0, NULL), GANFW_ERR_INVALID_ARG);
}

static const char *loaded_version(const char *const *dirs, int64_t ndirs, char *path_out) {
  static char version[64];
  ganfw_plugin *p = NULL;
  version[0] = '\0';
  if (ganfw_plugin_load("tpmodel", GANFW_PLUGIN_MODEL, NULL, dirs, ndirs, &p) != GANFW_OK) {
    fprintf(stderr, "\n  %s\n", ganfw_error_message());
    return "(failed)";
  }
  snprintf(version, sizeof version, "%s", ganfw_plugin_desc_of(p)->version);
  snprintf(path_out, PATH_MAX, "%s", ganfw_plugin_path(p));
  ganfw_plugin_unload(p);
  return version;
}

static void test_search_order(void) {
  char path[PATH_MAX];
  unsetenv(GANFW_PLUGIN_PATH_ENV);
  const char *main_first[] = {tp_dir(), tp_alt_dir()};
  CU_ASSERT_STRING_EQUAL(loaded_version(main_first, 2, path), "1.0.0");
  CU_ASSERT_STRING_EQUAL(path, tp_file(tp_dir(), "tpmodel"));
  const char *alt_first[] = {tp_alt_dir(), tp_dir()};
  CU_ASSERT_STRING_EQUAL(loaded_version(alt_first, 2, path), "9.9.9-alt");
  CU_ASSERT_STRING_EQUAL(path, tp_file(tp_alt_dir(), "tpmodel"));

  /* GANFW_PLUGIN_PATH is searched after the config's directories, before the build tree. */
  char env[2 * PATH_MAX];
  snprintf(env, sizeof env, "/nonexistent::%s:%s", tp_alt_dir(), tp_dir());
  setenv(GANFW_PLUGIN_PATH_ENV, env, 1);
  CU_ASSERT_STRING_EQUAL(loaded_version(NULL, 0, path), "9.9.9-alt");
  CU_ASSERT_STRING_EQUAL(path, tp_file(tp_alt_dir(), "tpmodel"));
  const char *cfg_dirs[] = {tp_dir()};
  CU_ASSERT_STRING_EQUAL(loaded_version(cfg_dirs, 1, path), "1.0.0");
  unsetenv(GANFW_PLUGIN_PATH_ENV);
  /* Neither configured nor in the environment: not on the search path at all. */
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL(ganfw_plugin_load("tpmodel", -1, NULL, NULL, 0, &p), GANFW_ERR_PLUGIN);
}

static void test_load_by_path(void) {
  ganfw_plugin *p = NULL;
  const char *path = tp_file(tp_dir(), "tpmem");
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load(path, GANFW_PLUGIN_MEMORY, NULL, NULL, 0, &p), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_path(p), path);
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_name(p), "tpmem");
  ganfw_plugin_unload(p);

  /* "ganfw_tpmem.so" is a file in the current directory, not a library-path lookup. */
  char cwd[PATH_MAX];
  CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
  CU_ASSERT_EQUAL_FATAL(chdir(tp_dir()), 0);
  p = NULL;
  ganfw_status st = ganfw_plugin_load("ganfw_tpmem.so", -1, NULL, NULL, 0, &p);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  if (st == GANFW_OK) {
    CU_ASSERT_STRING_EQUAL(ganfw_plugin_path(p), "./ganfw_tpmem.so");
    ganfw_plugin_unload(p);
  }
  p = NULL;
  st = ganfw_plugin_load("alt/ganfw_tpmodel.so", -1, NULL, NULL, 0, &p);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  if (st == GANFW_OK) {
    CU_ASSERT_STRING_EQUAL(ganfw_plugin_desc_of(p)->version, "9.9.9-alt");
    ganfw_plugin_unload(p);
  }
  CU_ASSERT_EQUAL(chdir(cwd), 0);

  p = NULL;
  const char *missing = "/nonexistent/dir/ganfw_gone.so";
  CU_ASSERT_EQUAL(ganfw_plugin_load(missing, -1, "model.plugin", NULL, 0, &p), GANFW_ERR_PLUGIN);
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT(
      contains(ganfw_error_message(), "plugin file /nonexistent/dir/ganfw_gone.so not found"));
  /* A directory is not a plugin file. */
  CU_ASSERT_EQUAL(ganfw_plugin_load(tp_dir(), -1, NULL, NULL, 0, &p), GANFW_ERR_PLUGIN);
}

/* --- `ganfw plugins` ------------------------------------------------------------------ */

/* Copies the listing line that mentions `path` (followed by a space or the end of the line)
 * into line, and the line after it into next. Returns line, or NULL when there is none. */
static const char *find_row(const char *text, const char *path, char *line, char *next,
                            size_t cap) {
  for (const char *s = text; *s;) {
    const char *e = strchr(s, '\n');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if (len < cap) {
      memcpy(line, s, len);
      line[len] = '\0';
      const char *at = strstr(line, path);
      if (at && (at[strlen(path)] == ' ' || at[strlen(path)] == '\0')) {
        next[0] = '\0';
        if (e) {
          size_t nlen = strcspn(e + 1, "\n");
          if (nlen < cap) {
            memcpy(next, e + 1, nlen);
            next[nlen] = '\0';
          }
        }
        return line;
      }
    }
    if (!e) break;
    s = e + 1;
  }
  return NULL;
}

static void test_list(void) {
  char env[PATH_MAX + 32];
  snprintf(env, sizeof env, "%s:/nonexistent/listed", tp_alt_dir());
  setenv(GANFW_PLUGIN_PATH_ENV, env, 1);
  const char *dirs[] = {tp_dir(), tp_dir()}; /* named twice: scanned once */
  FILE *f = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  ganfw_error_set(GANFW_ERR_CONFIG, "stale");
  CU_ASSERT_EQUAL(ganfw_plugin_list(dirs, 2, f), GANFW_OK);
  unsetenv(GANFW_PLUGIN_PATH_ENV);
  long size = ftell(f);
  CU_ASSERT_FATAL(size > 0);
  char *text = calloc(1, (size_t)size + 1);
  rewind(f);
  CU_ASSERT_EQUAL(fread(text, 1, (size_t)size, f), (size_t)size);
  fclose(f);

  CU_ASSERT(contains(text, "/nonexistent/listed (GANFW_PLUGIN_PATH, missing)"));
  CU_ASSERT(contains(text, GANFW_BUILD_PLUGIN_DIR " (build tree"));
  char line[4096], next[4096];
  const char *row = find_row(text, tp_file(tp_dir(), "tpmodel"), line, next, sizeof line);
  CU_ASSERT_PTR_NOT_NULL_FATAL(row);
  CU_ASSERT(starts_with(row, "model "));
  CU_ASSERT(contains(row, " tpmodel "));
  CU_ASSERT(contains(row, " 1.0.0 "));
  CU_ASSERT(contains(row, " " THIS_ABI " "));
  CU_ASSERT(strstr(row, "shadowed") == NULL);
  row = find_row(text, tp_file(tp_alt_dir(), "tpmodel"), line, next, sizeof line);
  CU_ASSERT_PTR_NOT_NULL_FATAL(row);
  CU_ASSERT(contains(row, "9.9.9-alt"));
  CU_ASSERT(contains(row, "(shadowed by "));
  CU_ASSERT(contains(row, tp_file(tp_dir(), "tpmodel")));
  row = find_row(text, tp_file(tp_dir(), "tpsgd"), line, next, sizeof line);
  CU_ASSERT_PTR_NOT_NULL_FATAL(row);
  CU_ASSERT(starts_with(row, "optimizer "));
  row = find_row(text, tp_file(tp_dir(), "tpmem"), line, next, sizeof line);
  CU_ASSERT_PTR_NOT_NULL_FATAL(row);
  CU_ASSERT(starts_with(row, "memory "));
  row = find_row(text, tp_file(tp_dir(), "newminor"), line, next, sizeof line);
  CU_ASSERT_PTR_NOT_NULL_FATAL(row);
  CU_ASSERT(contains(row, " 1.99 "));
  CU_ASSERT(contains(row, "newer ABI minor"));
  /* Broken files are rows with their error on the next line; the listing goes on. */
  const char *broken[] = {"notelf",  "badabi",     "noentry", "nullentry", "unresolved",
                          "smallvt", "nullmember", "badkind", "wrongname"};
  for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
    const char *path = tp_file(tp_dir(), broken[i]);
    row = find_row(text, path, line, next, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(row);
    if (!row) continue;
    CU_ASSERT(starts_with(row, "error "));
    CU_ASSERT(starts_with(next, "           error: "));
    CU_ASSERT(contains(next, path));
  }
  CU_ASSERT(contains(text, "this ganfw speaks ABI " THIS_ABI));
  /* Each file once: the directory named twice is not listed twice. */
  const char *first = strstr(text, tp_file(tp_dir(), "tpsgd"));
  CU_ASSERT(first && !strstr(first + 1, tp_file(tp_dir(), "tpsgd")));
  CU_ASSERT_EQUAL(ganfw_error_code(), GANFW_OK);
  free(text);
  CU_ASSERT(is_unloaded(tp_file(tp_dir(), "tpmodel")));
}

/* --- exports ------------------------------------------------------------------------- */

/* The number of defined dynamic symbols of `path` (nm -D --defined-only); *only_entry is
 * set when the one symbol is ganfw_plugin_entry. -1 when nm could not run. */
static int count_exports(const char *path, int *only_entry) {
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "'%s' -D --defined-only '%s' 2>&1", GANFW_NM, path);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  char line[512];
  int n = 0;
  *only_entry = 0;
  while (fgets(line, sizeof line, f)) {
    char addr[64], type[8], sym[256];
    if (sscanf(line, "%63s %7s %255s", addr, type, sym) != 3) {
      fprintf(stderr, "\n  nm %s: %s", path, line);
      n = -1000;
      continue;
    }
    n++;
    *only_entry = strcmp(sym, GANFW_PLUGIN_ENTRY_SYMBOL) == 0 && n == 1;
    if (strcmp(sym, GANFW_PLUGIN_ENTRY_SYMBOL) != 0)
      fprintf(stderr, "\n  %s exports %s", path, sym);
  }
  if (pclose(f) != 0) return -1;
  if (n != 1) *only_entry = 0;
  return n;
}

static void test_exports_only_entry(void) {
  const char *valid[] = {tp_file(tp_dir(), "tpmodel"), tp_file(tp_dir(), "tpsgd"),
                         tp_file(tp_dir(), "tpmem"), tp_file(tp_alt_dir(), "tpmodel")};
  for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
    int only_entry = 0;
    CU_ASSERT_EQUAL(count_exports(valid[i], &only_entry), 1);
    CU_ASSERT(only_entry);
  }
  /* A function with external linkage inside the plugin stays invisible to dlsym. */
  void *h = dlopen(tp_file(tp_dir(), "tpmodel"), RTLD_NOW | RTLD_LOCAL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  CU_ASSERT_PTR_NOT_NULL(dlsym(h, GANFW_PLUGIN_ENTRY_SYMBOL));
  CU_ASSERT_PTR_NULL(dlsym(h, "tp_model_internal_latent"));
  dlclose(h);

  /* The same for every real plugin built into the build tree so far; each also loads. */
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "ls '%s'/ganfw_*.so 2>/dev/null", GANFW_BUILD_PLUGIN_DIR);
  FILE *f = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char path[PATH_MAX];
  int n = 0;
  while (fgets(path, sizeof path, f)) {
    path[strcspn(path, "\n")] = '\0';
    ganfw_plugin *p = NULL;
    ganfw_status st = ganfw_plugin_load(path, -1, NULL, NULL, 0, &p);
    if (st != GANFW_OK) fprintf(stderr, "\n  %s\n", ganfw_error_message());
    CU_ASSERT_EQUAL(st, GANFW_OK);
    ganfw_plugin_unload(p);
    int only_entry = 0;
    CU_ASSERT_EQUAL(count_exports(path, &only_entry), 1);
    CU_ASSERT(only_entry);
    n++;
  }
  pclose(f);
  printf("(%d real plugins also checked) ", n);
}

static void test_kind_names(void) {
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_kind_name(GANFW_PLUGIN_MODEL), "model");
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_kind_name(GANFW_PLUGIN_OPTIM), "optimizer");
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_kind_name(GANFW_PLUGIN_MEMORY), "memory");
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_kind_name(GANFW_PLUGIN_KIND_COUNT), "unknown");
  CU_ASSERT_STRING_EQUAL(ganfw_plugin_kind_name(-1), "unknown");
  ganfw_plugin_unload(NULL);
}

#define END_OF_SET_STEP (offsetof(ganfw_optim_vt, set_step) + sizeof(void *))

/* --- ABI 1.1: kind tags, the vtable copy, extensions --------------------------------- */

static void test_wrong_kind_tag(void) {
  /* A memory descriptor whose vtable is an optimizer's: before 1.1 it was accepted (the
   * optimizer's step sat where configure goes) and crashed in the plugin's create. */
  expect_refused("wrongtag", GANFW_PLUGIN_MEMORY, "the descriptor says memory",
                 "tagged GANFW_VT_TAG_OPTIM, an optimizer's ganfw_optim_vt");
  expect_refused("wrongtag", -1, "the descriptor says memory", "ganfw_memory_vt");
  expect_refused("wrongtagmodel", -1, "the descriptor says model", "tagged GANFW_VT_TAG_OPTIM");
  /* The kind to set is the tag's own: it read GANFW_PLUGIN_MEMORY for these two. */
  expect_refused("objtagoptim", -1, "tagged GANFW_VT_TAG_OBJECTIVE, an objective's",
                 "set its kind to the vtable's (GANFW_PLUGIN_OBJECTIVE)");
  expect_refused("trainertagoptim", -1, "tagged GANFW_VT_TAG_TRAINER, a trainer's",
                 "set its kind to the vtable's (GANFW_PLUGIN_TRAINER)");
}

static void test_unknown_kind_tag(void) {
  expect_refused("badtag", -1, "vtable kind tag is 0x12345678, not GANFW_VT_TAG_OPTIM", NULL);
}

/* A plugin of a newer minor whose vtable leaves the kind tag 0 (a 1.0 source rebuilt
 * today never sets it): untagged, the descriptor's kind stands. */
static void test_untagged_from_new_abi(void) {
  const char *dirs[] = {tp_dir()};
  ganfw_plugin *p = NULL;
  ganfw_status st = ganfw_plugin_load("notag", -1, "optim.plugin", dirs, 1, &p);
  if (st != GANFW_OK) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_plugin_kind(p), GANFW_PLUGIN_OPTIM);
  ganfw_plugin_unload(p);
}

static void test_bad_config_keys(void) {
  expect_refused("badkeys", -1, "declared config key 1 is 'nested.key'", "without dots");
  expect_refused("badkeylist", -1, "config key 'betas' is a float list of 2 items",
                 "give 1 to 16 items and their defaults");
  expect_refused("dupkeys", -1, "declares config key 'lr_scale' twice", NULL);
}

static const char *abi10_dir(void) {
  static char dir[TP_DIR_MAX + 8];
  if (!dir[0]) snprintf(dir, sizeof dir, "%s/abi10", tp_dir());
  return dir;
}

/* A plugin built against the 1.0 headers loads; the core sees a core-sized copy of its
 * vtable in which every 1.1 member is absent, whatever follows its vtable in memory. */
static void test_abi10_vtable_copy(void) {
  const char *dirs[] = {abi10_dir()};
  const char *names[] = {"old_sgd", "old_sgd_poison"};
  for (int k = 0; k < 2; k++) {
    ganfw_plugin *p = NULL;
    ganfw_status st = ganfw_plugin_load(names[k], GANFW_PLUGIN_OPTIM, NULL, dirs, 1, &p);
    if (st != GANFW_OK) fprintf(stderr, "\n  %s\n", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_plugin_desc_of(p)->abi_minor, 0);
    CU_ASSERT_EQUAL(ganfw_plugin_vtable_size(p), END_OF_SET_STEP);
    const ganfw_optim_vt *vt = ganfw_plugin_vtable(p);
    CU_ASSERT_PTR_NOT_EQUAL(vt, ganfw_plugin_desc_of(p)->vtable);
    CU_ASSERT_EQUAL(vt->kind, 0u);
    CU_ASSERT_PTR_NULL(vt->get_extension); /* poison: 0x0ddba11 without the copy */
    CU_ASSERT_PTR_NULL(ganfw_plugin_get_extension(p, GANFW_EXT_CONFIG_KEYS));
    CU_ASSERT_PTR_NOT_NULL(vt->get_step);

    /* ... and runs: one SGD step through the host's foreach_axpy. */
    float w[2] = {1.0f, 2.0f}, g[2] = {0.5f, -1.0f};
    ganfw_tensor tw = fake_tensor(w, 2), tg = fake_tensor(g, 2);
    const ganfw_param params[1] = {{"w", &tw, &tg}};
    ganfw_host host = fake_host();
    void *self = NULL;
    CU_ASSERT_EQUAL_FATAL(vt->create(&host, NULL, NULL, params, 1, &self), GANFW_OK);
    CU_ASSERT_EQUAL(vt->step(self, 0.1), GANFW_OK);
    CU_ASSERT(fabsf(w[0] - 0.95f) < 1e-6f && fabsf(w[1] - 2.1f) < 1e-6f);
    CU_ASSERT_EQUAL(vt->get_step(self), 1);
    vt->destroy(self);
    ganfw_plugin_unload(p);
  }
}

/* A 1.1 plugin's extension comes through its vtable copy; unknown ids are NULL. */
static void test_extension_lookup(void) {
  const char *dirs[] = {GANFW_BUILD_PLUGIN_DIR};
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("adam", GANFW_PLUGIN_OPTIM, NULL, dirs, 1, &p), GANFW_OK);
  const ganfw_config_keys *t = ganfw_plugin_get_extension(p, GANFW_EXT_CONFIG_KEYS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  int found_betas = 0;
  for (int64_t i = 0; i < t->n; i++)
    if (strcmp(t->keys[i].key, "betas") == 0)
      found_betas = t->keys[i].type == GANFW_KEY_FLOAT_LIST && t->keys[i].count == 2 &&
                    t->keys[i].def_floats[1] == 0.999;
  CU_ASSERT(found_betas);
  CU_ASSERT_PTR_NULL(ganfw_plugin_get_extension(p, "ganfw.config_keys/2"));
  CU_ASSERT_PTR_NULL(ganfw_plugin_get_extension(p, "ganfw.optim.fused/1"));
  CU_ASSERT_PTR_NULL(ganfw_plugin_get_extension(p, NULL));
  CU_ASSERT_EQUAL(((const ganfw_optim_vt *)ganfw_plugin_vtable(p))->kind, GANFW_VT_TAG_OPTIM);
  ganfw_plugin_unload(p);
}

/* --- plugin names ---------------------------------------------------------------------- */

static void test_did_you_mean(void) {
  unsetenv(GANFW_PLUGIN_PATH_ENV);
  const char *dirs[] = {tp_dir()};
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL(ganfw_plugin_load("tpmodle", GANFW_PLUGIN_MODEL, "model.plugin", dirs, 1, &p),
                  GANFW_ERR_PLUGIN);
  CU_ASSERT(
      contains(ganfw_error_message(), "plugin 'tpmodle' not found (did you mean 'tpmodel'?)"));
  const char *real[] = {GANFW_BUILD_PLUGIN_DIR};
  CU_ASSERT_EQUAL(ganfw_plugin_load("adma", GANFW_PLUGIN_OPTIM, "optim.plugin", real, 1, &p),
                  GANFW_ERR_PLUGIN);
  CU_ASSERT(contains(ganfw_error_message(), "(did you mean 'adam'?)"));
  /* Nothing near: no suggestion. */
  CU_ASSERT_EQUAL(ganfw_plugin_load("zzzzqqqq", -1, NULL, dirs, 1, &p), GANFW_ERR_PLUGIN);
  CU_ASSERT(strstr(ganfw_error_message(), "did you mean") == NULL);
}

/* --- the real host table ------------------------------------------------------------- */

static ganfw_ctx *cpu_ctx(int64_t memory_limit) {
  ganfw_ctx_options opt;
  memset(&opt, 0, sizeof opt);
  opt.device_type = GANFW_DEVICE_CPU;
  opt.threads = 1;
  opt.memory_limit = memory_limit;
  opt.seed = 7;
  ganfw_ctx *ctx = NULL;
  if (ganfw_ctx_create(&opt, &ctx) != GANFW_OK) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  return ctx;
}

static void test_host_new_entries(void) {
  const ganfw_host *h = ganfw_host_table();
  CU_ASSERT_EQUAL(h->abi_minor, GANFW_ABI_MINOR);
  CU_ASSERT(GANFW_HOST_HAS(h, get_extension));
  CU_ASSERT_PTR_NULL(h->get_extension(h, "ganfw.nothing/1"));
  ganfw_ctx *ctx = cpu_ctx(64 << 20);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);

  CU_ASSERT_EQUAL(h->error(ctx, GANFW_ERR_CONFIG, "plugin x: bad %d", 42), GANFW_ERR_CONFIG);
  CU_ASSERT_STRING_EQUAL(h->error_message(), "plugin x: bad 42");

  int64_t shape[2] = {256, 1024};
  ganfw_tensor *t = h->tensor_create(ctx, GANFW_DTYPE_F32, 2, shape, GANFW_MEM_OPTIM_STATE, "s");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  ganfw_memory_stats m;
  memset(&m, 0xab, sizeof m);
  m.struct_size = sizeof m;
  CU_ASSERT_EQUAL(h->memory_stats(ctx, &m), GANFW_OK);
  CU_ASSERT_EQUAL(m.limit, 64 << 20);
  CU_ASSERT_EQUAL(m.capacity, 64 << 20);
  CU_ASSERT(m.allocated >= t->nbytes && m.allocated_peak >= m.allocated);
  CU_ASSERT(m.reserved >= m.allocated && m.reserved_peak >= m.reserved);
  CU_ASSERT_EQUAL(m.category[GANFW_MEM_OPTIM_STATE], t->nbytes);
  CU_ASSERT_EQUAL(m.category_peak[GANFW_MEM_OPTIM_STATE], t->nbytes);
  CU_ASSERT_EQUAL(m.category[GANFW_MEM_STATS_CATEGORIES - 1], 0);
  CU_ASSERT_EQUAL(m.num_ooms, 0);
  /* A caller whose struct ends before `reserved` gets only what it has room for. */
  memset(&m, 0xab, sizeof m);
  m.struct_size = (uint32_t)offsetof(ganfw_memory_stats, reserved);
  CU_ASSERT_EQUAL(h->memory_stats(ctx, &m), GANFW_OK);
  CU_ASSERT(m.allocated >= t->nbytes);
  CU_ASSERT_EQUAL(m.struct_size, offsetof(ganfw_memory_stats, reserved));
  int64_t untouched;
  memset(&untouched, 0xab, sizeof untouched);
  CU_ASSERT_EQUAL(m.reserved, untouched);
  CU_ASSERT_EQUAL(h->memory_stats(ctx, NULL), GANFW_ERR_INVALID_ARG);
  h->tensor_destroy(t);

  /* net_param_info fills a smaller (older) ganfw_param_info instead of refusing it. */
  ganfw_net *net = h->net_create(ctx, "n");
  CU_ASSERT_PTR_NOT_NULL_FATAL(net);
  CU_ASSERT_EQUAL(h->net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_linear(net, "fc", 3, 2, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(h->net_build(net, 3, 1, 1), GANFW_OK);
  ganfw_param_info info;
  memset(&info, 0xcd, sizeof info);
  info.struct_size = (uint32_t)offsetof(ganfw_param_info, value);
  CU_ASSERT_EQUAL_FATAL(h->net_param_info(net, 0, &info), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(info.name, "fc.weight");
  CU_ASSERT_STRING_EQUAL(info.layer_type, "linear");
  CU_ASSERT_EQUAL(info.trainable, 1);
  ganfw_tensor *poison;
  memset(&poison, 0xcd, sizeof poison);
  CU_ASSERT_PTR_EQUAL(info.value, poison); /* past its struct_size: not written */
  CU_ASSERT_EQUAL(info.struct_size, offsetof(ganfw_param_info, value));
  info.struct_size = sizeof info;
  CU_ASSERT_EQUAL(h->net_param_info(net, 1, &info), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(info.value);
  CU_ASSERT_PTR_NOT_NULL(info.grad);
  h->net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* `plugin: adamw` is Adam with decoupled weight decay (PyTorch's AdamW, default decay
 * 0.01): the same update, bit for bit, as adam with decoupled: true. */
static void test_adamw(void) {
  const char *dirs[] = {GANFW_BUILD_PLUGIN_DIR};
  const char *yaml[2] = {"optim: {weight_decay: 0.01, decoupled: true}\n", "optim: {}\n"};
  const char *names[2] = {"adam", "adamw"};
  float result[2][4];
  const ganfw_host *h = ganfw_host_table();
  for (int k = 0; k < 2; k++) {
    ganfw_plugin *p = NULL;
    ganfw_status st = ganfw_plugin_load(names[k], GANFW_PLUGIN_OPTIM, NULL, dirs, 1, &p);
    if (st != GANFW_OK) fprintf(stderr, "\n  %s\n", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    CU_ASSERT_STRING_EQUAL(ganfw_plugin_name(p), names[k]);
    ganfw_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(yaml[k], "adamw.yaml", &cfg), GANFW_OK);
    const ganfw_cfg *sec = ganfw_cfg_section(ganfw_config_root(cfg), "optim");
    CU_ASSERT_EQUAL(ganfw_plugin_apply_config_keys(p, sec), GANFW_OK);
    ganfw_ctx *ctx = cpu_ctx(0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
    int64_t shape[1] = {4};
    ganfw_tensor *w = h->tensor_create(ctx, GANFW_DTYPE_F32, 1, shape, GANFW_MEM_PARAM, "w");
    ganfw_tensor *g = h->tensor_create(ctx, GANFW_DTYPE_F32, 1, shape, GANFW_MEM_GRAD, "g");
    const float w0[4] = {1.0f, -2.0f, 3.0f, 0.5f}, g0[4] = {0.1f, 0.2f, -0.3f, 0.0f};
    CU_ASSERT_EQUAL(h->tensor_from_host(w, w0, sizeof w0), GANFW_OK);
    CU_ASSERT_EQUAL(h->tensor_from_host(g, g0, sizeof g0), GANFW_OK);
    const ganfw_param params[1] = {{"w", w, g}};
    const ganfw_optim_vt *vt = ganfw_plugin_vtable(p);
    void *self = NULL;
    CU_ASSERT_EQUAL_FATAL(vt->create(h, ctx, sec, params, 1, &self), GANFW_OK);
    CU_ASSERT_EQUAL(vt->step(self, 0.1), GANFW_OK);
    CU_ASSERT_EQUAL(vt->step(self, 0.1), GANFW_OK);
    CU_ASSERT_EQUAL(h->tensor_to_host(w, result[k], sizeof result[k]), GANFW_OK);
    /* The config check passes: every key was read or declared. */
    CU_ASSERT_EQUAL(ganfw_config_check_unused(cfg), GANFW_OK);
    vt->destroy(self);
    h->tensor_destroy(w);
    h->tensor_destroy(g);
    ganfw_ctx_destroy(ctx);
    ganfw_config_destroy(cfg);
    ganfw_plugin_unload(p);
  }
  CU_ASSERT_EQUAL(memcmp(result[0], result[1], sizeof result[0]), 0);
  /* Decoupled decay moved w[3] (zero gradient): 0.5 * (1 - 0.1 * 0.01) twice. */
  CU_ASSERT(fabsf(result[1][3] - 0.5f * 0.999f * 0.999f) < 1e-6f);

  /* adamw with decoupled: false is a contradiction, refused by name. */
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("adamw", GANFW_PLUGIN_OPTIM, NULL, dirs, 1, &p),
                        GANFW_OK);
  ganfw_config *cfg = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string("optim: {decoupled: false}\n", "x.yaml", &cfg),
                        GANFW_OK);
  ganfw_ctx *ctx = cpu_ctx(0);
  void *self = NULL;
  const ganfw_optim_vt *vt = ganfw_plugin_vtable(p);
  CU_ASSERT_EQUAL(
      vt->create(h, ctx, ganfw_cfg_section(ganfw_config_root(cfg), "optim"), NULL, 0, &self),
      GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "use `plugin: adam`"));
  ganfw_ctx_destroy(ctx);
  ganfw_config_destroy(cfg);
  ganfw_plugin_unload(p);
}

/* --- a session with plugins of both ABIs ---------------------------------------------- */

/* The ABI 1.0 model, optimizer and memory strategy train a step beside a 1.1 strategy that
 * reads the batch size, through the core's real call sites; the 1.1 plugins' declared
 * keys land in the resolved config. `old_dir` holds the 1.0 plugins: their 1.0 binaries,
 * or the same sources built against today's headers. */
static void session_mixed_abi(const char *old_dir) {
  char dir[] = "/tmp/ganfw_abi_mix_XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/mix.yaml", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "plugin_path: [%s, %s]\n"
          "device: {type: cpu, threads: 1}\n"
          "model: {plugin: old_model, latent_dim: 3}\n"
          "optim: {plugin: adam, lr: 0.001}\n"
          "memory:\n"
          "  - {plugin: old_mem}\n"
          "  - {plugin: accumulate, micro_batch_size: 2}\n"
          "train: {batch_size: 8, max_steps: 1}\n"
          "run: {out_dir: %s/out}\n",
          old_dir, GANFW_BUILD_PLUGIN_DIR, dir);
  fclose(f);
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_gan *gan = NULL;
  ganfw_data_info info = {sizeof info, 1, 2, 2, 0, 0};
  ganfw_status st = ganfw_run_open_file(path, NULL, 0, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 0, &info, &s);
  if (st == GANFW_OK) st = ganfw_gan_create(s, &gan);
  if (st != GANFW_OK) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(s->exec.batch_size, 8);
  CU_ASSERT_EQUAL(s->exec.micro_batches, 4); /* 8 rows / micro_batch_size 2 */
  CU_ASSERT_EQUAL(s->nz, 3);
  CU_ASSERT_PTR_NULL(s->memory[0].vt->get_extension);
  CU_ASSERT_PTR_NULL(s->model_vt->get_extension);

  int64_t xs[4] = {8, 1, 2, 2}, zs[4] = {8, 3, 1, 1};
  ganfw_tensor *x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *z = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "z");
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  CU_ASSERT_PTR_NOT_NULL_FATAL(z);
  ganfw_ctx_rng_uniform(s->ctx, x->numel, x->data, -1.0f, 1.0f);
  ganfw_ctx_rng_normal(s->ctx, z->numel, z->data, 0.0f, 1.0f);
  ganfw_gan_stats gs;
  memset(&gs, 0, sizeof gs);
  st = ganfw_gan_step(gan, x, z, &gs);
  if (st != GANFW_OK) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  const char *name = NULL;
  double value = 0;
  CU_ASSERT_EQUAL(s->memory[0].vt->scalar(s->memory[0].self, 0, &name, &value), 1);
  CU_ASSERT_EQUAL(value, 1.0); /* the 1.0 strategy's step_end ran once */

  /* Adam's declared betas, absent from the file, appear with their default. */
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
  CU_ASSERT_EQUAL(ganfw_config_write_resolved(run->config, mem), GANFW_OK);
  fclose(mem);
  CU_ASSERT(contains(text, "betas"));
  CU_ASSERT(contains(text, "0.999"));
  CU_ASSERT(contains(text, "amsgrad"));
  free(text);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(run->config), GANFW_OK);

  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(z);
  ganfw_gan_destroy(gan);
  ganfw_session_close(s);
  ganfw_run_close(run);
  remove(path);
  rmdir(dir);
}

static void test_session_mixed_abi(void) {
  session_mixed_abi(abi10_dir());
}

/* The 1.0 sources unchanged, rebuilt against today's headers (their vtables leave the kind
 * tag 0 and their descriptors say today's minor): they load and train the same way. */
static void test_abi10_sources_today(void) {
  static char dir[TP_DIR_MAX + 16];
  snprintf(dir, sizeof dir, "%s/abi10src", tp_dir());
  session_mixed_abi(dir);
}

/* accumulate's micro_batch_size against the batch size the core hands strategies. */
static void test_accumulate_micro_batch_size(void) {
  const char *dirs[] = {GANFW_BUILD_PLUGIN_DIR};
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("accumulate", GANFW_PLUGIN_MEMORY, NULL, dirs, 1, &p),
                        GANFW_OK);
  const ganfw_memory_vt *vt = ganfw_plugin_vtable(p);
  const ganfw_host *h = ganfw_host_table();
  const char *yaml[] = {"m: {micro_batch_size: 16}\n", "m: {micro_batch_size: 24}\n",
                        "m: {micro_batch_size: 16, steps: 4}\n"};
  for (int k = 0; k < 3; k++) {
    ganfw_config *cfg = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(yaml[k], "acc.yaml", &cfg), GANFW_OK);
    void *self = NULL;
    ganfw_status st = vt->create(h, NULL, ganfw_cfg_child(ganfw_config_root(cfg), "m"), &self);
    if (k == 2) {
      CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
      CU_ASSERT(contains(ganfw_error_message(), "set steps or micro_batch_size, not both"));
    } else {
      CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
      ganfw_exec_options o = {.struct_size = sizeof o, .micro_batches = 1, .batch_size = 64};
      st = vt->configure(self, &o);
      if (k == 0) {
        CU_ASSERT_EQUAL(st, GANFW_OK);
        CU_ASSERT_EQUAL(o.micro_batches, 4);
      } else {
        CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
        CU_ASSERT(contains(ganfw_error_message(), "micro_batch_size 24 does not divide"));
      }
      /* A 1.0 core's options end before batch_size: refused with a message, not read. */
      ganfw_exec_options old = {.struct_size = (uint32_t)offsetof(ganfw_exec_options, batch_size),
                                .micro_batches = 1};
      CU_ASSERT_EQUAL(vt->configure(self, &old), GANFW_ERR_UNSUPPORTED);
    }
    vt->destroy(self);
    ganfw_config_destroy(cfg);
  }
  ganfw_plugin_unload(p);
}

/* A wrong type for a declared key is reported with file:line:col before the plugin runs. */
static void test_declared_key_type(void) {
  const char *dirs[] = {GANFW_BUILD_PLUGIN_DIR};
  ganfw_plugin *p = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("sgd", GANFW_PLUGIN_OPTIM, NULL, dirs, 1, &p), GANFW_OK);
  ganfw_config *cfg = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string("optim:\n  nesterov: maybe\n", "k.yaml", &cfg),
                        GANFW_OK);
  const ganfw_cfg *sec = ganfw_cfg_section(ganfw_config_root(cfg), "optim");
  CU_ASSERT_EQUAL(ganfw_plugin_apply_config_keys(p, sec), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "optimizer plugin 'sgd'"));
  CU_ASSERT(contains(ganfw_error_message(), "k.yaml:2:13"));
  ganfw_config_destroy(cfg);
  ganfw_plugin_unload(p);
}

static CU_TestInfo tests[] = {
    {"valid model", test_valid_model},
    {"valid optimizer (SGD through foreach_axpy)", test_valid_sgd},
    {"valid memory strategy", test_valid_memory},
    {"newer ABI minor accepted", test_newer_minor_accepted},
    {"a trainer of a newer or pre-trainer minor is refused", test_trainer_minor},
    {"wrong ABI major", test_wrong_abi_major},
    {"missing entry symbol", test_missing_entry},
    {"entry returns NULL", test_entry_returns_null},
    {"not an ELF file", test_not_elf},
    {"unresolved symbol", test_unresolved_symbol},
    {"descriptor too small", test_small_descriptor},
    {"kind out of range", test_kind_out_of_range},
    {"empty name", test_empty_name},
    {"name differs from file", test_name_mismatch},
    {"NULL vtable", test_null_vtable},
    {"vtable too small", test_small_vtable},
    {"required member NULL", test_null_required_member},
    {"unknown model family", test_unknown_model_family},
    {"wrong kind", test_wrong_kind},
    {"a file loaded twice is shared", test_loaded_twice},
    {"a command's config keeps its plugins loaded", test_run_config_keeps_plugins},
    {"wrong architecture", test_wrong_architecture},
    {"not found lists the search path", test_not_found},
    {"search order", test_search_order},
    {"load by path", test_load_by_path},
    {"ganfw plugins listing", test_list},
    {"plugins export only the entry", test_exports_only_entry},
    {"kind names", test_kind_names},
    {"vtable tagged with another kind", test_wrong_kind_tag},
    {"unknown kind tag", test_unknown_kind_tag},
    {"ABI 1.1 plugin without a kind tag", test_untagged_from_new_abi},
    {"malformed config-key tables", test_bad_config_keys},
    {"ABI 1.0 plugin: core-sized vtable copy, runs", test_abi10_vtable_copy},
    {"ABI 1.0 plugin sources rebuilt against today's headers train", test_abi10_sources_today},
    {"extensions by versioned id", test_extension_lookup},
    {"plugin name typo: did you mean", test_did_you_mean},
    {"host 1.1 entries: error_message, memory_stats, param_info", test_host_new_entries},
    {"adamw", test_adamw},
    {"session with ABI 1.0 and 1.1 plugins", test_session_mixed_abi},
    {"declared key of the wrong type", test_declared_key_type},
    {"accumulate micro_batch_size uses the batch size", test_accumulate_micro_batch_size},
    CU_TEST_INFO_NULL,
};

GT_MAIN("plugin_host", tests)
