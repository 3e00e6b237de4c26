/* The dcgan model plugin and the executor against PyTorch (tests/ref/gen_dcgan.py): the
 * example's networks, narrowed, at 32 and 64 px. The parameters are loaded by their names
 * (so every name must be a PyTorch state_dict key), then one training-mode step
 * img = G(z), logit = D(img), L = sum(logit * w) and its backward are compared tensor by
 * tensor, with the BatchNorm running statistics, and an eval-mode forward after it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "ganfw/ganfw.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/tensor.h"
#include "testutil.h"

#define TOL 2e-4

static double worst; /* the largest relative error reached, for the report */

typedef struct ref_case {
  const char *name;
  const char *yaml; /* the model section matching gen_dcgan.py's CASES */
  int64_t nz;
} ref_case;

static const ref_case cases[] = {
    {"s32", "model:\n  image_size: 32\n  channels: 1\n  nz: 16\n  ngf: 8\n  ndf: 8\n", 16},
    {"s64", "model:\n  image_size: 64\n  channels: 3\n  nz: 12\n  ngf: 4\n  ndf: 6\n", 12},
};

static float max_abs(const float *x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
  return m;
}

/* Compares t with reference `key`: same element count, relative error floored at 1e-2 of
 * the reference's largest magnitude. */
static void compare(gt_ref *ref, const char *key, const ganfw_tensor *t) {
  int64_t n = 0;
  const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_EQUAL_FATAL(n, t->numel);
  float *got = malloc((size_t)t->nbytes);
  ganfw_tensor_to_host(t, got, t->nbytes);
  double err = gt_check_close(key, got, want, n, TOL, 1e-2 * max_abs(want, n) + 1e-12);
  if (err > worst) worst = err;
  free(got);
}

/* A new tensor holding reference `key`, shaped [N,C,H,W] as stored. */
static ganfw_tensor *from_ref(ganfw_ctx *ctx, gt_ref *ref, const char *key, int32_t category) {
  int64_t n = 0, shape[8];
  int nd = 0;
  const float *x = gt_ref_f32(ref, key, &n, shape, &nd);
  if (!x) return NULL;
  ganfw_tensor *t = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, nd, shape, category, key);
  if (t) ganfw_tensor_from_host(t, x, n * 4);
  return t;
}

/* For every parameter of `net`: key "<case>.<prefix>.<name>". load: copy the reference
 * into the parameter; else compare the gradient with it. */
static void each_param(gt_ref *ref, ganfw_net *net, const char *prefix, int load) {
  int64_t n = ganfw_net_param_count(net);
  CU_ASSERT(n > 0);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &p), GANFW_OK);
    char key[160];
    snprintf(key, sizeof key, "%s.%s", prefix, p.name);
    if (load) {
      int64_t numel = 0;
      const float *x = gt_ref_f32(ref, key, &numel, NULL, NULL); /* fails when misnamed */
      CU_ASSERT_PTR_NOT_NULL_FATAL(x);
      CU_ASSERT_EQUAL_FATAL(numel, p.value->numel);
      ganfw_tensor_from_host(p.value, x, numel * 4);
    } else {
      compare(ref, key, p.grad);
    }
  }
}

static void check_running_stats(gt_ref *ref, ganfw_net *net, const char *prefix) {
  ganfw_net_buffer b;
  int nbuf = 0;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++) {
    if (b.counter) {
      CU_ASSERT_EQUAL(*b.counter, 1);
      continue;
    }
    char key[160];
    snprintf(key, sizeof key, "%s.%s", prefix, b.name);
    compare(ref, key, b.tensor);
    nbuf++;
  }
  CU_ASSERT(nbuf >= 4);
}

static void run_case(const ref_case *c) {
  gt_ref *ref = gt_ref_open("dcgan");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = NULL;
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 5};
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  static char dir[1024];
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(dir, sizeof dir, "%s/plugins", build ? build : ".");
  const char *dirs[] = {dir};
  ganfw_plugin *plugin = NULL;
  ganfw_status st = ganfw_plugin_load("dcgan", GANFW_PLUGIN_MODEL, NULL, dirs, 1, &plugin);
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  const ganfw_model_vt *vt = ganfw_plugin_vtable(plugin);
  ganfw_config *config = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(c->yaml, "dcgan_ref.yaml", &config), GANFW_OK);
  void *model = NULL;
  st = vt->create(ganfw_host_table(), ctx, ganfw_cfg_child(ganfw_config_root(config), "model"),
                  NULL, &model);
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_net *g = vt->net(model, "generator"), *d = vt->net(model, "discriminator");
  CU_ASSERT_EQUAL(vt->latent_dim(model), c->nz);

  char key[96], prefix[64];
  snprintf(prefix, sizeof prefix, "%s.G", c->name);
  each_param(ref, g, prefix, 1);
  snprintf(prefix, sizeof prefix, "%s.D", c->name);
  each_param(ref, d, prefix, 1);

  snprintf(key, sizeof key, "%s.z", c->name);
  ganfw_tensor *z = from_ref(ctx, ref, key, GANFW_MEM_DATA);
  snprintf(key, sizeof key, "%s.w", c->name);
  ganfw_tensor *w = from_ref(ctx, ref, key, GANFW_MEM_ACTIVATION);
  CU_ASSERT_FATAL(z && w);

  /* One training-mode step. */
  ganfw_tape *tg = ganfw_tape_create(g), *td = ganfw_tape_create(d);
  ganfw_tensor *img = NULL, *logit = NULL, *dimg = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(g, z, tg, &img), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(d, img, td, &logit), GANFW_OK);
  snprintf(key, sizeof key, "%s.img", c->name);
  compare(ref, key, img);
  snprintf(key, sizeof key, "%s.logit", c->name);
  compare(ref, key, logit);
  ganfw_net_zero_grad(g);
  ganfw_net_zero_grad(d);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(d, td, w, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dimg), GANFW_OK);
  snprintf(key, sizeof key, "%s.dimg", c->name);
  compare(ref, key, dimg);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(g, tg, dimg, GANFW_BWD_PARAM_GRAD, NULL), GANFW_OK);
  snprintf(prefix, sizeof prefix, "%s.grad.G", c->name);
  each_param(ref, g, prefix, 0);
  snprintf(prefix, sizeof prefix, "%s.grad.D", c->name);
  each_param(ref, d, prefix, 0);
  snprintf(prefix, sizeof prefix, "%s.after.G", c->name);
  check_running_stats(ref, g, prefix);
  snprintf(prefix, sizeof prefix, "%s.after.D", c->name);
  check_running_stats(ref, d, prefix);
  ganfw_tensor_destroy(dimg);
  ganfw_tensor_destroy(logit);
  ganfw_tensor_destroy(img);

  /* Eval mode: the running statistics the step left. */
  ganfw_net_set_train(g, 0, 0);
  ganfw_net_set_train(d, 0, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(g, z, NULL, &img), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(d, img, NULL, &logit), GANFW_OK);
  snprintf(key, sizeof key, "%s.eval_img", c->name);
  compare(ref, key, img);
  snprintf(key, sizeof key, "%s.eval_logit", c->name);
  compare(ref, key, logit);
  ganfw_tensor_destroy(logit);
  ganfw_tensor_destroy(img);

  ganfw_tensor_destroy(z);
  ganfw_tensor_destroy(w);
  ganfw_tape_destroy(tg);
  ganfw_tape_destroy(td);
  vt->destroy(model);
  ganfw_config_destroy(config);
  ganfw_plugin_unload(plugin);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

static void test_32(void) {
  run_case(&cases[0]);
}

static void test_64(void) {
  run_case(&cases[1]);
}

static void test_report(void) {
  printf("\n  max rel err vs PyTorch (outputs, input and parameter gradients, running stats): "
         "%.3e (tol %.0e)\n",
         worst, TOL);
  CU_ASSERT(worst <= TOL);
}

static CU_TestInfo tests[] = {
    {"dcgan_32_step", test_32},
    {"dcgan_64_step", test_64},
    {"max_error_report", test_report},
    CU_TEST_INFO_NULL,
};

GT_MAIN("dcgan_ref", tests)
