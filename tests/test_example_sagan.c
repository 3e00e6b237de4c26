/* The out-of-tree layer plugin example end to end: `cmake --install` this build tree into a
 * temporary prefix, build examples/sagan (SAGAN's self-attention as a layer plugin) against
 * that prefix alone, then:
 *  - run the layer forward and backward through the core (loaded from the built .so, in a
 *    net) on random data and check y, dx and every parameter gradient against PyTorch
 *    (tests/check_sagan_torch.py, /usr/bin/python3 with torch), and that a second backward
 *    adds to the gradients;
 *  - train the example's config (examples/sagan/dcgan_sagan.yaml: dcgan with the layer
 *    inserted into G and D by `model.insert`) two steps with the installed ganfw on a
 *    generated MNIST-format set, and check the checkpoint holds the inserted layers;
 *  - `ganfw plan --measure` on it: every row at +0.00%;
 *  - `ganfw plugins` lists the layer plugin; bad `model.insert` items end in one error naming
 *    the key (an unknown node or net, an unknown plugin, one of another kind or of ABI 1.7, an
 *    unknown key of the layer, a bad value, a def() of NULL).
 * Each step prints its command and output when it fails; the temporary folder is kept then (or
 * with GANFW_TEST_KEEP=1), and removed when all passed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "example_util.h"
#include "ganfw/plugin.h"
#include "ganfw/layer_plugin.h"
#include "io/safetensors.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"

#define SG_IMAGES 64
#define SG_SIDE   28
#define SG_STEPS  2
#define SG_BATCH  8
#define SG_SO     "ganfw_sagan_attention.so"

/* --- the steps, each run once and remembered, so that any test can run alone -------------- */

static int ensure_installed(void) {
  static const char *const expected[] = {"/" EX_INSTALL_BINDIR "/ganfw",
                                         "/" EX_INSTALL_LIBDIR "/cmake/ganfw/ganfwConfig.cmake",
                                         "/" EX_INSTALL_INCLUDEDIR "/ganfw/layer_plugin.h",
                                         "/" EX_INSTALL_LIBDIR "/ganfw/plugins/ganfw_dcgan.so",
                                         "/" EX_INSTALL_LIBDIR "/ganfw/plugins/ganfw_adam.so"};
  return ex_ensure_installed(expected, sizeof expected / sizeof expected[0], NULL);
}

static int ensure_built(void) {
  static const char *const made[] = {SG_SO};
  return ensure_installed() && ex_ensure_built("sagan", made, 1);
}

/* root/data: SG_IMAGES random 28x28 digits in the IDX format of MNIST (dcgan.yaml resizes
 * them to 32x32). */
static int ensure_data(void) {
  if (ex.data) return ex.data == EX_STEP_OK;
  ex.data = EX_STEP_FAILED;
  static unsigned char pixels[SG_IMAGES * SG_SIDE * SG_SIDE], labels[SG_IMAGES];
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < sizeof pixels; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    pixels[i] = (unsigned char)(s >> 24);
  }
  for (int i = 0; i < SG_IMAGES; i++) labels[i] = (unsigned char)(i % 10);
  if (!ex_write_idx("data", pixels, labels, SG_IMAGES, SG_SIDE)) return 0;
  ex.data = EX_STEP_OK;
  return 1;
}

/* root/run.yaml: the example's own config (extended, not copied), with the plugin from the
 * example build, the generated data, a CPU, small batches and two steps. */
static int write_config(void) {
  FILE *f = fopen(ex.config, "w");
  if (!f) {
    ex_fail("cannot write %s", ex.config);
    return 0;
  }
  char path[4400];
  snprintf(path, sizeof path, "%s/examples/sagan/dcgan_sagan.yaml", ex_source_dir());
  fprintf(f, "# Written by tests/test_example_sagan.c\nextends: ");
  ex_yaml_quoted(f, path);
  fprintf(f, "\nplugin_path: [build]\ndevice:\n  type: cpu\n  threads: 2\ndata:\n  path: ");
  snprintf(path, sizeof path, "%s/data", ex.root);
  ex_yaml_quoted(f, path);
  fprintf(f,
          "\ntrain:\n  batch_size: %d\n  max_steps: %d\n  log_every: 1\n"
          "run:\n  samples: 16\n  sample_nrow: 4\n  out_dir: ",
          SG_BATCH, SG_STEPS);
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
  if (!ex_log_has("train", log,
                  "model.insert[0]: inserted generator.attn (sagan_attention) after "
                  "generator.main.8",
                  "model.insert[1]: inserted discriminator.attn (sagan_attention) after "
                  "discriminator.main.1",
                  NULL))
    return 0;
  ex.trained = EX_STEP_OK;
  return 1;
}

/* --- the layer through the core, against PyTorch ----------------------------------------- */

/* The layer plugin from the example build, in a net "net" of that one layer for x [N,C,H,W]
 * (built), with random parameters and gamma 0.7 (at its initial 0 only the input would pass). */
typedef struct sg_net {
  ganfw_plugin *plugin;
  ganfw_ctx *ctx;
  ganfw_net *net;
} sg_net;

static int sg_net_make(sg_net *s, int64_t c, int64_t h, int64_t w, uint64_t seed) {
  memset(s, 0, sizeof *s);
  char so[4500];
  snprintf(so, sizeof so, "%s/" SG_SO, ex.build);
  if (ganfw_plugin_load(so, GANFW_PLUGIN_LAYER, "test", NULL, 0, &s->plugin) != GANFW_OK) {
    ex_fail("loading %s: %s", so, ganfw_error_message());
    return 0;
  }
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = seed};
  if (ganfw_ctx_create(&opt, &s->ctx) != GANFW_OK || !(s->net = ganfw_net_create(s->ctx, "net"))) {
    ex_fail("a CPU context and net: %s", ganfw_error_message());
    return 0;
  }
  const ganfw_layer_plugin_vt *vt = ganfw_plugin_vtable(s->plugin);
  void *state = NULL;
  ganfw_status st = vt->create(ganfw_host_table(), s->ctx, NULL, &state); /* the defaults */
  if (st == GANFW_OK) st = ganfw_net_custom(s->net, "attn", vt->def(), state);
  if (st == GANFW_OK) st = ganfw_net_build(s->net, c, h, w);
  for (int64_t i = 0; st == GANFW_OK && i < ganfw_net_param_count(s->net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    if ((st = ganfw_net_param_info(s->net, i, &p)) != GANFW_OK) break;
    gt_fill_uniform(p.value->data, p.value->numel, -0.5f, 0.5f, seed + 10 * (uint64_t)i);
    if (strcmp(p.name, "attn.gamma") == 0) ((float *)p.value->data)[0] = 0.7f;
  }
  if (st != GANFW_OK)
    ex_fail("the layer in a net for [%lld,%lld,%lld]: %s", (long long)c, (long long)h, (long long)w,
            ganfw_error_message());
  return st == GANFW_OK;
}

static void sg_net_free(sg_net *s) {
  ganfw_net_destroy(s->net);
  ganfw_ctx_destroy(s->ctx);
  ganfw_plugin_unload(s->plugin);
}

static ganfw_tensor *sg_random(ganfw_ctx *ctx, const int64_t *shape, const char *name,
                               uint64_t seed) {
  ganfw_tensor *t = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, name);
  if (t) gt_fill_uniform(t->data, t->numel, -1.0f, 1.0f, seed);
  return t;
}

/* One forward with a tape and one backward (dx and the parameter gradients). */
static ganfw_status sg_step(ganfw_net *net, ganfw_tensor *x, ganfw_tensor *dy, ganfw_tensor **y,
                            ganfw_tensor **dx) {
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_status st = tape ? ganfw_net_forward(net, x, tape, y) : GANFW_ERR_OOM;
  if (st == GANFW_OK)
    st = ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, dx);
  ganfw_tape_destroy(tape);
  return st;
}

/* Runs the layer on x [n,c,h,w] and dy, writes root/<io>.safetensors for the torch check, and
 * checks that a second backward adds the same gradients again. */
static int sg_export(const char *io, int64_t n, int64_t c, int64_t h, int64_t w, uint64_t seed) {
  sg_net s;
  if (!sg_net_make(&s, c, h, w, seed)) {
    sg_net_free(&s);
    return 0;
  }
  const int64_t shape[4] = {n, c, h, w};
  ganfw_tensor *x = sg_random(s.ctx, shape, "x", seed + 1),
               *dy = sg_random(s.ctx, shape, "dy", seed + 2);
  ganfw_tensor *y = NULL, *dx = NULL, *y2 = NULL, *dx2 = NULL;
  ganfw_st_writer *wr = ganfw_st_writer_create();
  ganfw_status st = x && dy && wr ? sg_step(s.net, x, dy, &y, &dx) : GANFW_ERR_OOM;
  if (st == GANFW_OK) st = ganfw_st_writer_add(wr, "x", GANFW_DTYPE_F32, 4, x->shape, x->data);
  if (st == GANFW_OK) st = ganfw_st_writer_add(wr, "dy", GANFW_DTYPE_F32, 4, dy->shape, dy->data);
  if (st == GANFW_OK) st = ganfw_st_writer_add(wr, "y", GANFW_DTYPE_F32, 4, y->shape, y->data);
  if (st == GANFW_OK) st = ganfw_st_writer_add(wr, "dx", GANFW_DTYPE_F32, 4, dx->shape, dx->data);
  float *first[3] = {0};
  for (int64_t i = 0; st == GANFW_OK && i < ganfw_net_param_count(s.net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    if ((st = ganfw_net_param_info(s.net, i, &p)) != GANFW_OK) break;
    const char *key = p.name + strlen("attn."); /* in_proj_weight, in_proj_bias, gamma */
    char gkey[64];
    snprintf(gkey, sizeof gkey, "grad.%s", key);
    st =
        ganfw_st_writer_add(wr, key, GANFW_DTYPE_F32, p.value->ndim, p.value->shape, p.value->data);
    if (st == GANFW_OK)
      st =
          ganfw_st_writer_add(wr, gkey, GANFW_DTYPE_F32, p.grad->ndim, p.grad->shape, p.grad->data);
    if (st == GANFW_OK && i < 3 && (first[i] = malloc((size_t)p.grad->nbytes)))
      memcpy(first[i], p.grad->data, (size_t)p.grad->nbytes);
  }
  char path[4500];
  snprintf(path, sizeof path, "%s/%s.safetensors", ex.root, io);
  if (st == GANFW_OK) st = ganfw_st_writer_write(wr, path);
  if (st != GANFW_OK)
    ex_fail("%s: the layer's forward and backward: %s", io, ganfw_error_message());
  /* gradient accumulation: the second backward (no zero_grad) adds its gradients */
  if (st == GANFW_OK && (st = sg_step(s.net, x, dy, &y2, &dx2)) != GANFW_OK)
    ex_fail("%s: a second step: %s", io, ganfw_error_message());
  for (int64_t i = 0; st == GANFW_OK && i < 3; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    if (ganfw_net_param_info(s.net, i, &p) != GANFW_OK || !first[i]) continue;
    const float *g = p.grad->data;
    double worst = 0, scale = 0;
    for (int64_t k = 0; k < p.grad->numel; k++) {
      worst = fmax(worst, fabs((double)g[k] - 2.0 * first[i][k]));
      scale = fmax(scale, fabs(2.0 * first[i][k]));
    }
    printf("\n    %s: accumulated gradient of %s off 2x the first by %.3g (of %.3g)", io, p.name,
           worst, scale);
    if (!(worst <= 1e-6 * scale))
      ex_fail("%s: the second backward did not add to %s's gradient", io, p.name);
  }
  for (int i = 0; i < 3; i++) free(first[i]);
  ganfw_st_writer_destroy(wr);
  ganfw_tensor *ts[] = {x, dy, y, dx, y2, dx2};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) ganfw_tensor_destroy(ts[i]);
  sg_net_free(&s);
  return st == GANFW_OK;
}

/* y, dx and the gradients of in_proj_weight, in_proj_bias and gamma against PyTorch's
 * SAGAN block in float64, within 1e-5 of each tensor's largest magnitude: C = 16 (2 query
 * channels) on a non-square 4x6 map, and C = 24 (3) on 5x5 with a batch of 3. */
static void test_torch_reference(void) {
  if (!ensure_built()) {
    ex_fail("torch reference: the example was not built");
    return;
  }
  if (!sg_export("sagan_a", 2, 16, 4, 6, 11) || !sg_export("sagan_b", 3, 24, 5, 5, 23)) return;
  char cmd[16384], script[4400], a[4500], b[4500], log[4400];
  snprintf(script, sizeof script, "%s/tests/check_sagan_torch.py", ex_source_dir());
  snprintf(a, sizeof a, "%s/sagan_a.safetensors", ex.root);
  snprintf(b, sizeof b, "%s/sagan_b.safetensors", ex.root);
  ex_shell_command(cmd, sizeof cmd, "/usr/bin/python3", script, a, b, "--tol", "1e-5", NULL);
  if (ex_run_logged("torch", cmd, 0, log, sizeof log) == 0) {
    ex_print_file_tail("torch check", log, 4000);
    ex_log_has("torch", log, "all within tolerance", NULL);
  }
}

/* --- the example config with the installed ganfw ------------------------------------------ */

static void test_install(void) {
  CU_ASSERT(ensure_installed());
}

static void test_build_example(void) {
  CU_ASSERT(ensure_built());
}

/* Two steps of dcgan with the layer inserted into both nets: the checkpoint holds the layers'
 * parameters under the names the config gave them ([2*64/8 + 64, 64] for 64 channels) and
 * their Adam state. */
static void test_train(void) {
  if (!ensure_trained()) {
    ex_fail("train: the example config did not train");
    return;
  }
  char path[4500];
  snprintf(path, sizeof path, "%s/checkpoints/step_%08d.safetensors", ex.out_dir, SG_STEPS);
  ganfw_st_file *f = NULL;
  if (ganfw_st_open(path, &f) != GANFW_OK) {
    ex_fail("cannot read the checkpoint %s", path);
    return;
  }
  const struct {
    const char *name;
    int32_t ndim;
    int64_t shape[2];
  } want[] = {{"generator.attn.in_proj_weight", 2, {80, 64}},
              {"generator.attn.in_proj_bias", 1, {80}},
              {"generator.attn.gamma", 1, {1}},
              {"discriminator.attn.in_proj_weight", 2, {80, 64}},
              {"discriminator.attn.gamma", 1, {1}},
              {"optim.generator.attn.gamma.exp_avg", 1, {1}},
              {"optim.discriminator.attn.in_proj_weight.exp_avg_sq", 2, {80, 64}},
              {"generator.main.9.weight", 2, {64, 1}}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const ganfw_st_tensor *t = ganfw_st_find(f, want[i].name);
    int ok = t && t->ndim >= want[i].ndim;
    for (int32_t d = 0; ok && d < want[i].ndim; d++) ok = t->shape[d] == want[i].shape[d];
    if (!ok) ex_fail("%s: tensor %s missing or of another shape", path, want[i].name);
  }
  ganfw_st_close(f);
}

/* `ganfw plan --measure`: the plan of the config with the inserted layers equals one real step
 * in every row; the per-layer table names them. */
static void test_plan_measure(void) {
  if (!ensure_trained()) {
    ex_fail("plan: the example config did not train");
    return;
  }
  char cmd[16384], log[4400];
  const char *args[] = {"plan", ex.config, "--measure"};
  ex_ganfw_command(cmd, sizeof cmd, args, 3);
  if (ex_run_logged("plan", cmd, 0, log, sizeof log) != 0) return;
  if (!ex_log_has("plan", log, "generator.attn", "discriminator.attn", NULL)) return;
  char *text = ex_read_text(log);
  const char *table = text ? strstr(text, "Plan against one real step") : NULL;
  if (!table) {
    ex_fail("plan --measure printed no comparison table");
    free(text);
    return;
  }
  int rows = 0, exact = 0;
  for (const char *line = strchr(table, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
    const char *end = strchr(line + 1, '\n');
    size_t len = end ? (size_t)(end - line - 1) : strlen(line + 1);
    if (len < 2 || line[len] != '%') continue; /* the rows end in their difference */
    rows++;
    exact += len >= 6 && strncmp(line + len - 4, "0.00%", 5) == 0 && line[len - 5] == '+';
    printf("\n    %.*s", (int)len, line + 1);
  }
  printf("\n    plan --measure: %d of %d rows at +0.00%%", exact, rows);
  if (rows < 6 || exact != rows) {
    ex_fail("plan --measure: %d of %d rows at +0.00%%", exact, rows);
    ex_print_file_tail("plan output", log, 8000);
  }
  free(text);
}

/* `ganfw plugins --plugin-path <example build>` lists the layer plugin. */
static void test_plugins_listing(void) {
  if (!ensure_built()) {
    ex_fail("plugins: the example was not built");
    return;
  }
  char log[4400], so[4500];
  char *text = ex_list_plugins(log, sizeof log);
  if (!text) return;
  snprintf(so, sizeof so, "%s/" SG_SO, ex.build);
  if (!ex_listing_has(text, "layer", "sagan_attention", "1.0.0", so, 0)) {
    ex_fail("ganfw plugins: no 'layer sagan_attention 1.0.0 %s' row", so);
    ex_print_file_tail("plugins output", log, 12000);
  }
  free(text);
}

/* root/stub/ganfw_<name>.so: a layer plugin that says it was built for ABI 1.<minor> and whose
 * def() gives NULL. */
static int build_stub_plugin(const char *name, int minor, char *so, size_t cap) {
  char dir[4400], src[4500], inc[4500], cmd[16384], log[4400];
  snprintf(dir, sizeof dir, "%s/stub", ex.root);
  snprintf(src, sizeof src, "%s/%s.c", dir, name);
  snprintf(so, cap, "%s/ganfw_%s.so", dir, name);
  snprintf(inc, sizeof inc, "-I%s/" EX_INSTALL_INCLUDEDIR, ex.prefix);
  ex_shell_command(cmd, sizeof cmd, "mkdir", "-p", dir, NULL);
  if (system(cmd) != 0) return 0;
  FILE *f = fopen(src, "w");
  if (!f) return 0;
  fprintf(f,
          "#include <ganfw/ganfw.h>\n"
          "static const ganfw_layer_def *def(void) { return 0; }\n"
          "static ganfw_status create(const ganfw_host *h, ganfw_ctx *c, const ganfw_cfg *g,\n"
          "                           void **s) { (void)h, (void)c, (void)g, (void)s; return 0; }\n"
          "static const ganfw_layer_plugin_vt vt = {sizeof vt, GANFW_VT_TAG_LAYER, def, "
          "create, 0};\n"
          "GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {\n"
          "  static const ganfw_plugin_desc d = {1, %d, sizeof d, GANFW_PLUGIN_LAYER,\n"
          "                                      \"%s\", \"0.1\", \"a stub\", &vt};\n"
          "  return &d;\n}\n",
          minor, name);
  if (fclose(f) != 0) return 0;
  ex_shell_command(cmd, sizeof cmd, EX_C_COMPILER, "-std=c11", "-shared", "-fPIC", inc, src, "-o",
                   so, NULL);
  return ex_run_logged(name, cmd, 0, log, sizeof log) == 0;
}

/* Each bad item of model.insert ends in one error (exit 2) naming the key and what to do. */
static void test_bad_config(void) {
  if (!ensure_built() || !ensure_data() || !ex_file_exists(ex.config)) {
    if (!ensure_trained()) {
      ex_fail("bad config: the example was not built");
      return;
    }
  }
  char old_so[4500], old_item[5000], nodef_so[4500], nodef_item[5000];
  if (!build_stub_plugin("old_layer", 7, old_so, sizeof old_so) ||
      !build_stub_plugin("no_def", GANFW_ABI_MINOR, nodef_so, sizeof nodef_so)) {
    ex_fail("could not build the stub layer plugins");
    return;
  }
  snprintf(old_item, sizeof old_item, "model.insert=[{after: generator.main.8, plugin: '%s'}]",
           old_so);
  snprintf(nodef_item, sizeof nodef_item, "model.insert=[{after: generator.main.8, plugin: '%s'}]",
           nodef_so);
  const struct {
    const char *name, *set, *want1, *want2;
  } cases[] = {
      {"unknown_node", "model.insert=[{after: generator.main.55, plugin: sagan_attention}]",
       "model.insert[0].after: the generator of model 'dcgan' has no node 'main.55'",
       "did you mean 'generator.main.5'?"},
      {"unknown_net", "model.insert=[{after: generatr.main.8, plugin: sagan_attention}]",
       "model.insert[0].after: model 'dcgan' builds no net 'generatr'",
       "did you mean 'generator.main.8'?"},
      {"no_net", "model.insert=[{after: main.8, plugin: sagan_attention}]",
       "model.insert[0].after: model 'dcgan' builds no net 'main'",
       "did you mean 'generator.main.8' or 'discriminator.main.8'?"},
      {"unknown_plugin", "model.insert=[{after: generator.main.8, plugin: sagan_atention}]",
       "model.insert[0].plugin: layer plugin 'sagan_atention' not found",
       "did you mean 'sagan_attention'?"},
      {"wrong_kind", "model.insert=[{after: generator.main.8, plugin: adam}]",
       "is an optimizer plugin, but model.insert[0].plugin needs a layer plugin", NULL},
      {"old_abi", old_item, "model.insert[0].plugin", "layer plugins exist from ABI 1.8"},
      {"no_def", nodef_item, "model.insert[0].plugin: layer plugin 'no_def'",
       "def() returned NULL"},
      {"unknown_key",
       "model.insert=[{after: generator.main.8, plugin: sagan_attention, reductoin: 4}]",
       "reductoin", "reduction"},
      {"bad_value",
       "model.insert=[{after: generator.main.8, plugin: sagan_attention, reduction: 0}]",
       "model.insert[0]", "reduction is 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char cmd[16384], log[4400];
    const char *args[] = {"validate", ex.config, "--set", cases[i].set};
    ex_ganfw_command(cmd, sizeof cmd, args, 4);
    if (ex_run_logged(cases[i].name, cmd, 2, log, sizeof log) == 2 &&
        ex_log_has(cases[i].name, log, cases[i].want1, cases[i].want2, NULL)) {
      char *text = ex_read_text(log);
      const char *line = text ? strstr(text, " error: ") : NULL; /* the message's line */
      while (line && line > text && line[-1] != '\n') line--;
      if (line) printf("\n    %s: %.*s", cases[i].name, (int)strcspn(line, "\n"), line);
      free(text);
    }
  }
}

static CU_TestInfo tests[] = {{"install", test_install},
                              {"build_example", test_build_example},
                              {"torch_reference", test_torch_reference},
                              {"train", test_train},
                              {"plan_measure", test_plan_measure},
                              {"plugins_listing", test_plugins_listing},
                              {"bad_config", test_bad_config},
                              CU_TEST_INFO_NULL};
int main(void) {
  ex_init("test_example_sagan", "ganfw_sagan");
  return gt_run("example_sagan", tests);
}
