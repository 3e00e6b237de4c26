/* What a PyTorch user brings, against PyTorch (tests/ref/gen_torch_interop.py): a
 * torchvision ToTensor + Normalize(mean, std) batch matched bit for bit by data.normalize;
 * a state_dict saved as safetensors.torch.save_file saves it ({"format": "pt"}) loaded
 * strictly into the cnn plugin's classifier; BatchNorm's eps and momentum set by
 * model.batchnorm_eps / model.batchnorm_momentum, checked by the train-mode logits and
 * running statistics and the eval-mode logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/config.h"
#include "data/data_source.h"
#include "ganfw/ganfw.h"
#include "io/checkpoint.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"

#define N  4
#define C  3
#define HW 8

/* The model and data sections a user would write for gen_torch_interop.py's Net. The
 * means and stds are the generator's (CIFAR-10's usual ones). */
static const char *const yaml =
    "data:\n"
    "  normalize: {mean: [0.4914, 0.4822, 0.4465], std: [0.2470, 0.2435, 0.2616]}\n"
    "model:\n"
    "  blocks: [{channels: 4, kernel: 3, pool: max}]\n"
    "  num_classes: 5\n"
    "  batchnorm_eps: 1.0e-3\n"
    "  batchnorm_momentum: 0.3\n";

static int contains(const char *s, const char *sub) {
  return s && strstr(s, sub) != NULL;
}

/* data.normalize read from the config and applied to ToTensor's values: the same f32
 * numbers as torchvision's Normalize. */
static void test_normalize_matches_torchvision(void) {
  gt_ref *r = gt_ref_open("torch_interop");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  ganfw_config *cfg = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(yaml, "interop.yaml", &cfg), GANFW_OK);
  ganfw_transform tf;
  CU_ASSERT_EQUAL_FATAL(
      ganfw_transform_from_config(ganfw_cfg_child(ganfw_config_root(cfg), "data"), &tf), GANFW_OK);
  CU_ASSERT_EQUAL(tf.norm_n, 3);
  int64_t n = 0;
  const int32_t *img = gt_ref_i32(r, "images", &n);
  const float *want = gt_ref_f32(r, "x", NULL, NULL, NULL);
  CU_ASSERT_FATAL(img && want && n == N * C * HW * HW);
  float src[C * HW * HW], got[N * C * HW * HW];
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < C * HW * HW; k++)
      src[k] = (float)img[i * C * HW * HW + k] / 255.0f; /* ToTensor, as the data sources do */
    CU_ASSERT_EQUAL(ganfw_transform_apply(&tf, src, C, HW, HW, 0, got + i * C * HW * HW, C, HW, HW),
                    GANFW_OK);
  }
  int64_t same = 0;
  for (int64_t k = 0; k < n; k++) same += memcmp(&got[k], &want[k], sizeof(float)) == 0;
  printf("\n    [%lld of %lld values bit-identical to ToTensor + Normalize] ", (long long)same,
         (long long)n);
  CU_ASSERT_EQUAL(same, n);
  ganfw_config_destroy(cfg);
  gt_ref_close(r);
}

static void compare(gt_ref *r, const char *key, const ganfw_tensor *t) {
  int64_t n = 0;
  const float *want = gt_ref_f32(r, key, &n, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_EQUAL_FATAL(n, t->numel);
  float got[64];
  CU_ASSERT_FATAL(n <= 64);
  ganfw_tensor_to_host(t, got, t->nbytes);
  double err = gt_check_close(key, got, want, n, 2e-5, 1e-3);
  printf("\n    [%s: max rel err %.2e] ", key, err);
}

/* The cnn plugin built from `yaml` on a context that reads the run's config, as a session
 * makes it. */
typedef struct rig {
  ganfw_ctx *ctx;
  ganfw_config *cfg;
  ganfw_plugin *plugin;
  const ganfw_model_vt *vt;
  void *model;
  ganfw_net *net;
} rig;

static ganfw_status rig_open(rig *g, const char *text) {
  memset(g, 0, sizeof *g);
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 5};
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &g->ctx), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(text, "interop.yaml", &g->cfg), GANFW_OK);
  g->ctx->config = g->cfg;
  char dir[1024];
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(dir, sizeof dir, "%s/plugins", build ? build : ".");
  const char *dirs[] = {dir};
  ganfw_status st = ganfw_plugin_load("cnn", GANFW_PLUGIN_MODEL, NULL, dirs, 1, &g->plugin);
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  g->vt = ganfw_plugin_vtable(g->plugin);
  ganfw_data_info info = {
      .struct_size = sizeof info, .channels = C, .height = HW, .width = HW, .num_classes = 5};
  st = g->vt->create(ganfw_host_table(), g->ctx,
                     ganfw_cfg_child(ganfw_config_root(g->cfg), "model"), &info, &g->model);
  if (st == GANFW_OK) g->net = g->vt->net(g->model, "classifier");
  return st;
}

static void rig_close(rig *g) {
  if (g->model) g->vt->destroy(g->model);
  ganfw_plugin_unload(g->plugin);
  ganfw_config_destroy(g->cfg);
  ganfw_ctx_destroy(g->ctx);
}

static void test_pt_state_dict_and_batchnorm(void) {
  gt_ref *r = gt_ref_open("torch_interop");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  rig g;
  ganfw_status st = rig_open(&g, yaml);
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);

  /* The bare state_dict names (prefix ""), strict: every tensor on both sides. */
  char path[1024];
  const char *dir = getenv("GANFW_REF_DIR");
  snprintf(path, sizeof path, "%s/torch_interop_pt.safetensors", dir ? dir : ".");
  ganfw_ckpt_net cn = {.net = g.net, .prefix = "", .optim_vt = NULL, .optim_self = NULL};
  ganfw_ckpt_report rep;
  st = ganfw_checkpoint_load_weights(path, &cn, 1, 0, &rep);
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(rep.loaded, 8); /* conv weight, BN weight/bias/stats/count, linear w/b */
  CU_ASSERT_EQUAL(rep.missing + rep.unexpected + rep.mismatched, 0);

  int64_t xs[4] = {N, C, HW, HW}, n = 0;
  const float *xv = gt_ref_f32(r, "x", &n, NULL, NULL);
  CU_ASSERT_FATAL(xv && n == N * C * HW * HW);
  ganfw_tensor *x = ganfw_tensor_create(g.ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  ganfw_tensor_from_host(x, xv, x->nbytes);

  ganfw_tape *tape = ganfw_tape_create(g.net);
  ganfw_tensor *y = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(g.net, x, tape, &y), GANFW_OK);
  compare(r, "y_train", y);
  ganfw_tensor_destroy(y);
  ganfw_tape_destroy(tape);
  ganfw_net_buffer b;
  const char *want[3] = {"running_mean", "running_var", "num_batches_tracked"};
  for (int64_t i = 0; i < 3; i++) {
    CU_ASSERT_FATAL(ganfw_net_buffer_at(g.net, i, &b));
    CU_ASSERT_FATAL(contains(b.name, want[i]));
    if (b.counter) {
      CU_ASSERT_EQUAL(*b.counter, (int64_t)gt_ref_scalar(r, want[i])); /* 7 + 1 */
    } else {
      compare(r, want[i], b.tensor);
    }
  }

  ganfw_net_set_train(g.net, 0, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(g.net, x, NULL, &y), GANFW_OK);
  compare(r, "y_eval", y);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(x);
  rig_close(&g);
  gt_ref_close(r);
}

/* Out-of-range values are refused naming the key and where it is. */
static void test_batchnorm_keys_refused(void) {
  rig g;
  CU_ASSERT_EQUAL(rig_open(&g, "model:\n  blocks: [{channels: 4}]\n  num_classes: 5\n"
                               "  batchnorm_momentum: 1.5\n"),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "interop.yaml:4:") &&
            contains(ganfw_error_message(), "model.batchnorm_momentum must be in [0, 1]"));
  rig_close(&g);
  CU_ASSERT_EQUAL(rig_open(&g, "model:\n  blocks: [{channels: 4}]\n  num_classes: 5\n"
                               "  batchnorm_eps: 0\n"),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "model.batchnorm_eps must be in (0, 1)"));
  rig_close(&g);
}

static CU_TestInfo tests[] = {
    {"normalize_matches_torchvision", test_normalize_matches_torchvision},
    {"pt_state_dict_and_batchnorm", test_pt_state_dict_and_batchnorm},
    {"batchnorm_keys_refused", test_batchnorm_keys_refused},
    CU_TEST_INFO_NULL,
};
GT_MAIN("ref_torch_interop", tests)
