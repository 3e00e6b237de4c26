/* Layers inserted into a net after a named node (nn/net.h, ganfw_net_insert_custom) and
 * `model.insert` in a config (train/insert.c), which inserts a layer plugin's layer into the
 * nets of any model while it builds them: the rewiring of the node's readers (the next node,
 * a residual join that names it, the net's input and output), the errors, who frees the
 * layer's state, and whole sessions of dcgan, of cnn's residual graph and of model.nets with
 * the test layer plugin tests/plugins/layer.c (ganfw_tplayer.so: y = factor * x). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "ganfw/layer_plugin.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "train/run.h"
#include "train/session.h"

/* --- a layer defined here: y = 2x, counting the states it frees ---------------------------- */

static int freed;

static ganfw_status twice_infer(void *state, const int64_t *in, int32_t ndim, int64_t *out,
                                int32_t *out_ndim) {
  (void)state;
  for (int32_t d = 0; d < ndim; d++) out[d] = in[d];
  *out_ndim = ndim;
  return GANFW_OK;
}

static ganfw_status twice_forward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                  ganfw_tensor *y, ganfw_tensor **saved) {
  (void)state, (void)saved;
  return ganfw_host_table()->tensor_mul_scalar(call->ctx, y, x, 2.0f);
}

static ganfw_status twice_backward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                   const ganfw_tensor *y, ganfw_tensor *const *saved,
                                   const ganfw_tensor *dy, ganfw_tensor *dx) {
  (void)state, (void)x, (void)y, (void)saved;
  return dx ? ganfw_host_table()->tensor_mul_scalar(call->ctx, dx, dy, 2.0f) : GANFW_OK;
}

static void twice_destroy(void *state) {
  (void)state;
  freed++;
}

static const ganfw_layer_def twice = {.struct_size = sizeof(ganfw_layer_def),
                                      .type = "twice",
                                      .infer = twice_infer,
                                      .forward = twice_forward,
                                      .backward = twice_backward,
                                      .destroy = twice_destroy};

static int state_token; /* any non-NULL state */

static ganfw_ctx *make_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 3};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  return ctx;
}

/* r0 = relu(x), r1 = relu(r0), sum = r0 + r1 (r0 named), out = tanh(sum), on [N,4]. */
static ganfw_net *residual_net(ganfw_ctx *ctx) {
  ganfw_net *net = ganfw_net_create(ctx, "net");
  CU_ASSERT_PTR_NOT_NULL_FATAL(net);
  const char *in[2] = {"r0", NULL};
  CU_ASSERT_EQUAL_FATAL(ganfw_net_activation(net, "r0", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_activation(net, "r1", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_add(net, "sum", in, 2), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_activation(net, "out", GANFW_ACT_TANH, 0), GANFW_OK);
  return net;
}

/* A node after r0 is read by r1 (the node after it) and by the join that names r0; one after
 * "input" is the first node; one after the last is the output. The values follow: with
 * ins = 2 r0, out = tanh(ins + relu(ins)) = tanh(4 relu(x)), and twice more at the ends. */
static void test_rewiring(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = residual_net(ctx);
  freed = 0;
  CU_ASSERT_EQUAL(ganfw_net_insert_custom(net, "r0", "ins", &twice, &state_token), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_insert_custom(net, "input", "pre", &twice, &state_token), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_insert_custom(net, "out", "post", &twice, &state_token), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 4, 1, 1), GANFW_OK);
  static const char *const order[] = {"pre", "r0", "ins", "r1", "sum", "out", "post"};
  CU_ASSERT_EQUAL_FATAL(ganfw_net_layer_count(net), 7);
  for (int32_t i = 0; i < 7; i++) CU_ASSERT_STRING_EQUAL(ganfw_net_layer_name(net, i), order[i]);
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 0, 0), -1); /* pre reads the input */
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 1, 0), 0);  /* r0 reads pre */
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 2, 0), 1);  /* ins reads r0 */
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 3, 0), 2);  /* r1 reads ins */
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 4, 0), 2);  /* the join named r0: now ins */
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 4, 1), 3);
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 6, 0), 5); /* post reads out, and is the output */
  ganfw_tensor *x =
      ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, (int64_t[]){3, 4, 1, 1}, GANFW_MEM_DATA, "x");
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  gt_fill_uniform(x->data, x->numel, -0.3f, 0.3f, 5);
  ganfw_tensor *y = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y), GANFW_OK);
  const float *xv = x->data, *yv = y->data;
  double worst = 0;
  for (int64_t i = 0; i < x->numel; i++) {
    const double r0 = fmax(2.0 * xv[i], 0.0), want = 2.0 * tanh(4.0 * r0);
    worst = fmax(worst, fabs(yv[i] - want));
  }
  CU_ASSERT(worst < 1e-6);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(freed, 3); /* the net owned the three states */
  ganfw_ctx_destroy(ctx);
}

/* A name no node has (with the nearest), an insertion after net_build: refused, and the
 * state is freed then too; a taken name is refused by net_custom's rule. */
static void test_errors(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = residual_net(ctx);
  freed = 0;
  CU_ASSERT_EQUAL(ganfw_net_insert_custom(net, "r9", "ins", &twice, &state_token),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "'r9', which is no node of the net"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "did you mean 'r0'?"));
  CU_ASSERT_EQUAL(freed, 1);
  CU_ASSERT_EQUAL(ganfw_net_insert_custom(net, "r0", "r1", &twice, &state_token),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "two layers are named 'r1'"));
  CU_ASSERT_EQUAL(freed, 2);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 4, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_layer_count(net), 4); /* nothing was inserted */
  CU_ASSERT_EQUAL(ganfw_net_insert_custom(net, "r0", "late", &twice, &state_token),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "after net_build"));
  CU_ASSERT_EQUAL(freed, 3);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* --- model.insert in whole sessions --------------------------------------------------------- */

static char root[64];

static const char *path_in(const char *name) {
  static char buf[4][256];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, name);
  return buf[k];
}

static const char *plugin_dir(void) {
  static char dir[1024];
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(dir, sizeof dir, "%s/tests/plugins", build ? build : ".");
  return dir;
}

/* The config `body` after the common lines, as root/<name>. */
static const char *write_config(const char *name, const char *body) {
  const char *path = path_in(name);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 1\nplugin_path: ['%s']\ndevice: {type: cpu, threads: 1}\n"
          "data: {dataset: mnist, path: %s}\noptim: {plugin: adam}\n"
          "train: {batch_size: 4, max_steps: 1}\nrun: {out_dir: %s}\n%s",
          plugin_dir(), path_in("nodata"), path_in("out"), body);
  CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
  return path;
}

/* The test layer plugin's counts of states made and freed. */
typedef struct tp_counts {
  int64_t made, freed;
} tp_counts;

/* Opens a session of `config` for 1x28x28 images of 10 classes (no data read); the error
 * message is printed when it fails. */
static ganfw_status open_session(const char *config, ganfw_run **run, ganfw_session **s) {
  *run = NULL, *s = NULL;
  ganfw_data_info info = {
      .struct_size = sizeof info, .channels = 1, .height = 28, .width = 28, .num_classes = 10};
  ganfw_status st = ganfw_run_open_file(config, NULL, 0, run);
  if (st == GANFW_OK) st = ganfw_session_open(*run, 0, &info, s);
  if (st == GANFW_OK) st = ganfw_config_check_unused((*run)->config);
  if (st != GANFW_OK) printf("\n    %s", ganfw_error_message());
  return st;
}

static void close_session(ganfw_run *run, ganfw_session *s) {
  ganfw_session_close(s);
  ganfw_run_close(run);
}

/* dcgan: after a node of G and before D's first; the layer's key reaches it; each state is
 * freed with its net. */
static void test_model_insert_dcgan(void) {
  const char *dirs[] = {plugin_dir()};
  ganfw_plugin *tp = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("tplayer", GANFW_PLUGIN_LAYER, "test", dirs, 1, &tp),
                        GANFW_OK);
  const tp_counts *counts = ganfw_plugin_get_extension(tp, "ganfw.test.tplayer/1");
  CU_ASSERT_PTR_NOT_NULL_FATAL(counts);
  const int64_t made0 = counts->made, freed0 = counts->freed;
  const char *config = write_config(
      "dcgan.yaml", "model:\n  plugin: dcgan\n  image_size: 32\n  ngf: 8\n  ndf: 8\n  insert:\n"
                    "    - {after: generator.main.2, name: scale, plugin: tplayer, factor: 0.5}\n"
                    "    - {after: discriminator.input, plugin: tplayer}\n");
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  CU_ASSERT_EQUAL_FATAL(open_session(config, &run, &s), GANFW_OK);
  ganfw_net *g = s->generator, *d = s->discriminator;
  CU_ASSERT_STRING_EQUAL(ganfw_net_layer_name(g, 3), "scale");
  CU_ASSERT_STRING_EQUAL(ganfw_net_layer_type(g, 3), "tplayer");
  CU_ASSERT_STRING_EQUAL(ganfw_net_layer_name(g, 4), "main.3");
  CU_ASSERT_EQUAL(ganfw_net_layer_input(g, 4, 0), 3);
  CU_ASSERT_STRING_EQUAL(ganfw_net_layer_name(d, 0), "tplayer"); /* the plugin's name */
  CU_ASSERT_EQUAL(ganfw_net_layer_input(d, 1, 0), 0);
  CU_ASSERT_EQUAL(counts->made - made0, 2);
  close_session(run, s);
  CU_ASSERT_EQUAL(counts->freed - freed0, 2);
  ganfw_plugin_unload(tp);
}

/* cnn's residual graph: after the first block's ReLU, which the next block's shortcut reads by
 * name; the join reads the inserted node. */
static void test_model_insert_graph(void) {
  const char *config = write_config(
      "resnet.yaml", "model:\n  plugin: cnn\n  stem: {channels: 4}\n"
                     "  stages:\n    - {channels: 4, blocks: 2}\n  insert:\n"
                     "    - {after: classifier.layer1.0.relu, name: mid, plugin: tplayer}\n");
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  CU_ASSERT_EQUAL_FATAL(open_session(config, &run, &s), GANFW_OK);
  ganfw_net *net = s->classifier;
  const int32_t relu = ganfw_net_layer_index(net, "layer1.0.relu");
  const int32_t mid = ganfw_net_layer_index(net, "mid");
  const int32_t add = ganfw_net_layer_index(net, "layer1.1.add");
  CU_ASSERT_FATAL(relu >= 0 && mid == relu + 1 && add > mid);
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, mid, 0), relu);
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, mid + 1, 0), mid); /* the next block's conv */
  int reads_mid = 0, reads_relu = 0;
  for (int32_t k = 0; k < 2; k++) {
    reads_mid += ganfw_net_layer_input(net, add, k) == mid;
    reads_relu += ganfw_net_layer_input(net, add, k) == relu;
  }
  CU_ASSERT_EQUAL(reads_mid, 1); /* the shortcut */
  CU_ASSERT_EQUAL(reads_relu, 0);
  close_session(run, s);
}

/* model.nets: each role's own list, model.nets.ROLE.insert; model.insert there is refused. */
static void test_model_insert_nets(void) {
  const char *nets = "model:\n  nets:\n"
                     "    teacher: {plugin: cnn, blocks: [{channels: 4}], linear: []}\n"
                     "    student:\n      plugin: cnn\n      blocks: [{channels: 2}]\n"
                     "      linear: []\n      insert: [{after: classifier.features.0, "
                     "plugin: tplayer, factor: 3}]\n"
                     "trainer: {plugin: distill}\n";
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  CU_ASSERT_EQUAL_FATAL(open_session(write_config("nets.yaml", nets), &run, &s), GANFW_OK);
  int found = 0;
  for (int32_t r = 0; r < s->n_nets; r++) {
    const int32_t i = ganfw_net_layer_index(s->nets[r].net, "tplayer");
    if (strcmp(s->nets[r].role, "student") == 0)
      found += i == 1;
    else
      CU_ASSERT_EQUAL(i, -1);
  }
  CU_ASSERT_EQUAL(found, 1);
  close_session(run, s);

  char both[1024];
  snprintf(both, sizeof both, "%s  insert: [{after: classifier.features.0, plugin: tplayer}]\n",
           "model:\n  nets:\n    student: {plugin: cnn, blocks: [{channels: 2}], linear: []}\n");
  CU_ASSERT_EQUAL(ganfw_run_open_file(write_config("both.yaml", both), NULL, 0, &run),
                  GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "model.insert with model.nets"));
  ganfw_run_close(run);
}

/* An item without `after` or without a net in it, or without `plugin`: refused when the run
 * opens, naming the item. */
static void test_model_insert_items(void) {
  const struct {
    const char *item, *want;
  } cases[] = {
      {"{plugin: tplayer}", "model.insert[0].after is missing"},
      {"{after: generator., plugin: tplayer}", "model.insert[0].after is 'generator.'"},
      {"{after: generator.main.2}", "model.insert[0] needs `plugin:`"},
      {"generator.main.2", "model.insert[0] must be a map"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char body[512];
    snprintf(body, sizeof body, "model:\n  plugin: dcgan\n  insert: [%s]\n", cases[i].item);
    ganfw_run *run = NULL;
    CU_ASSERT_EQUAL(ganfw_run_open_file(write_config("item.yaml", body), NULL, 0, &run),
                    GANFW_ERR_CONFIG);
    if (!strstr(ganfw_error_message(), cases[i].want))
      printf("\n    %s: %s", cases[i].item, ganfw_error_message());
    CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), cases[i].want));
    ganfw_run_close(run);
  }
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_net_insert_XXXXXX");
  return mkdtemp(root) ? 0 : -1;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static CU_TestInfo tests[] = {{"rewiring", test_rewiring},
                              {"errors", test_errors},
                              {"model_insert_dcgan", test_model_insert_dcgan},
                              {"model_insert_graph", test_model_insert_graph},
                              {"model_insert_nets", test_model_insert_nets},
                              {"model_insert_items", test_model_insert_items},
                              CU_TEST_INFO_NULL};
int main(void) {
  return gt_run_fixture("net insert", tests, suite_init, suite_clean);
}
