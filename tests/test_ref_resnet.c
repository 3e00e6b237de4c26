/* Residual nets against PyTorch (tests/ref/gen_resnet.py): the cnn plugin's stem/stages
 * syntax (two basic blocks, one with a projection shortcut; bottleneck blocks with hidden
 * linear layers; the ResNet-20 of configs/resnet20_fashion.yaml) and the resgan plugin's
 * generator and discriminator. The parameters are loaded by their names (so every name must
 * be a PyTorch state_dict key, and their number must be PyTorch's), then one training-mode
 * step y = f(x), L = sum(y * w) and its backward are compared tensor by tensor (output,
 * input gradient, every parameter gradient), with the BatchNorm running statistics, and an
 * eval-mode forward after it. The reference is computed in f64: every tensor is within
 * 1e-4 of it relative to its norm, and every element within 1e-4 relative (floored at 1% of
 * the tensor's largest magnitude), except in ResNet-20, where PyTorch's own f32 run is
 * 1.95e-4 off its f64 one on that scale (layer3.2.conv1.weight's gradient), so 5e-4. */
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

#define TOL_NORM 1e-4 /* ||got - want|| / ||want|| of every tensor */
#define TOL      1e-4 /* per element, relative, floored at 1% of the largest |want| */
#define TOL_DEEP 5e-4 /* per element in ResNet-20 (see above) */

static double tol = TOL;                     /* the element tolerance of the case running */
static double worst, worst_deep, worst_norm; /* the largest errors reached, for the report */

/* A classifier case of gen_resnet.py's CLASSIFIER_CASES: the model section (or, with
 * `config`, the model section of that file under the source tree), the data's shape. */
typedef struct ref_case {
  const char *name;
  const char *yaml;
  const char *config;
  int32_t c, h, w, classes;
  int64_t numel; /* the parameter count, when known (0: only PyTorch's is checked) */
} ref_case;

static const ref_case cases[] = {
    {"block", "model:\n  stages: [{channels: 6, blocks: 2, stride: 2}]\n", NULL, 3, 9, 9, 4, 0},
    {"bottleneck",
     "model:\n"
     "  stem: {channels: 4}\n"
     "  block: bottleneck\n"
     "  stages:\n"
     "    - {channels: 2, blocks: 2}\n"
     "    - {channels: 3, stride: 2}\n"
     "  linear: [5]\n",
     NULL, 2, 8, 8, 3, 0},
    /* He et al.'s ResNet-20 with projection shortcuts on 28x28x1: 272,186 parameters */
    {"resnet20", NULL, "configs/resnet20_fashion.yaml", 1, 28, 28, 10, 272186},
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
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL_FATAL(n, t->numel);
  float *got = malloc((size_t)t->nbytes);
  ganfw_tensor_to_host(t, got, t->nbytes);
  double err = gt_check_close(key, got, want, n, tol, 1e-2 * max_abs(want, n) + 1e-12);
  double d2 = 0, w2 = 0;
  for (int64_t i = 0; i < n; i++) {
    d2 += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
    w2 += (double)want[i] * want[i];
  }
  double norm = sqrt(d2 / (w2 > 0 ? w2 : 1e-300));
  if (norm > TOL_NORM) printf("\n  FAILED: %s: ||got - want|| / ||want|| = %.3e\n", key, norm);
  CU_ASSERT(norm <= TOL_NORM);
  if (tol == TOL && err > worst) worst = err;
  if (tol != TOL && err > worst_deep) worst_deep = err;
  if (norm > worst_norm) worst_norm = norm;
  free(got);
}

/* A new tensor holding reference `key`, shaped as stored. */
static ganfw_tensor *from_ref(ganfw_ctx *ctx, gt_ref *ref, const char *key, int32_t category) {
  int64_t n = 0, shape[8];
  int nd = 0;
  const float *x = gt_ref_f32(ref, key, &n, shape, &nd);
  if (!x) return NULL;
  ganfw_tensor *t = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, nd, shape, category, key);
  if (t) ganfw_tensor_from_host(t, x, n * 4);
  return t;
}

/* For every parameter of `net`: key "<prefix>.<name>". load: copy the reference into the
 * parameter (and check that the net has as many tensors and values as PyTorch's module);
 * else compare the gradient with it. */
static void each_param(gt_ref *ref, ganfw_net *net, const char *prefix, int load) {
  int64_t n = ganfw_net_param_count(net), numel = 0;
  CU_ASSERT(n > 0);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &p), GANFW_OK);
    char key[160];
    snprintf(key, sizeof key, "%s.%s", prefix, p.name);
    numel += p.value->numel;
    if (load) {
      int64_t k = 0;
      const float *x = gt_ref_f32(ref, key, &k, NULL, NULL); /* fails when misnamed */
      CU_ASSERT_PTR_NOT_NULL_FATAL(x);
      CU_ASSERT_EQUAL_FATAL(k, p.value->numel);
      ganfw_tensor_from_host(p.value, x, k * 4);
    } else {
      compare(ref, key, p.grad);
    }
  }
  if (load) {
    char key[160];
    snprintf(key, sizeof key, "%s.n_params", prefix);
    CU_ASSERT_EQUAL(n, (int64_t)gt_ref_scalar(ref, key));
    snprintf(key, sizeof key, "%s.numel", prefix);
    CU_ASSERT_EQUAL(numel, (int64_t)gt_ref_scalar(ref, key));
  }
}

/* BatchNorm running statistics after the step; num_batches_tracked is 1. */
static void check_running_stats(gt_ref *ref, ganfw_net *net, const char *prefix, int min_bn) {
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
  CU_ASSERT(nbuf >= 2 * min_bn);
}

typedef struct fixture {
  ganfw_ctx *ctx;
  ganfw_plugin *plugin;
  const ganfw_model_vt *vt;
  ganfw_config *config;
  void *model;
} fixture;

/* Loads `plugin` and creates it from the model section of `yaml` (or of the file `config`
 * under GANFW_SOURCE_DIR) with data of shape [c,h,w] and `classes` labels. */
static void fixture_open(fixture *f, const char *plugin, const char *yaml, const char *config,
                         int32_t c, int32_t h, int32_t w, int32_t classes) {
  memset(f, 0, sizeof *f);
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 5};
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &f->ctx), GANFW_OK);
  static char dir[1024], path[1024];
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(dir, sizeof dir, "%s/plugins", build ? build : ".");
  const char *dirs[] = {dir};
  ganfw_status st = ganfw_plugin_load(plugin, GANFW_PLUGIN_MODEL, NULL, dirs, 1, &f->plugin);
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  f->vt = ganfw_plugin_vtable(f->plugin);
  if (config) {
    const char *src = getenv("GANFW_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/%s", src ? src : ".", config);
    st = ganfw_config_load(path, &f->config);
  } else {
    st = ganfw_config_load_string(yaml, "resnet_ref.yaml", &f->config);
  }
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_data_info data = {
      .struct_size = sizeof data, .channels = c, .height = h, .width = w, .num_classes = classes};
  st = f->vt->create(ganfw_host_table(), f->ctx,
                     ganfw_cfg_child(ganfw_config_root(f->config), "model"), &data, &f->model);
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
}

static void fixture_close(fixture *f) {
  if (f->model) f->vt->destroy(f->model);
  ganfw_config_destroy(f->config);
  ganfw_plugin_unload(f->plugin);
  ganfw_ctx_destroy(f->ctx);
}

static void run_classifier(const ref_case *c, int min_bn, double element_tol) {
  tol = element_tol;
  gt_ref *ref = gt_ref_open("resnet");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  fixture f;
  fixture_open(&f, "cnn", c->yaml, c->config, c->c, c->h, c->w, c->classes);
  ganfw_net *net = f.vt->net(f.model, "classifier");
  CU_ASSERT_PTR_NOT_NULL_FATAL(net);
  char key[96], prefix[64];
  each_param(ref, net, c->name, 1);
  if (c->numel) {
    snprintf(key, sizeof key, "%s.numel", c->name);
    CU_ASSERT_EQUAL((int64_t)gt_ref_scalar(ref, key), c->numel);
  }
  snprintf(key, sizeof key, "%s.x", c->name);
  ganfw_tensor *x = from_ref(f.ctx, ref, key, GANFW_MEM_DATA);
  snprintf(key, sizeof key, "%s.w", c->name);
  ganfw_tensor *w = from_ref(f.ctx, ref, key, GANFW_MEM_ACTIVATION);
  CU_ASSERT_FATAL(x && w);

  /* One training-mode step. */
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *y = NULL, *dx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
  snprintf(key, sizeof key, "%s.y", c->name);
  compare(ref, key, y);
  ganfw_net_zero_grad(net);
  ganfw_status st =
      ganfw_net_backward(net, tape, w, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx);
  if (st) fprintf(stderr, "\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  snprintf(key, sizeof key, "%s.dx", c->name);
  compare(ref, key, dx);
  snprintf(prefix, sizeof prefix, "%s.grad", c->name);
  each_param(ref, net, prefix, 0);
  snprintf(prefix, sizeof prefix, "%s.after", c->name);
  check_running_stats(ref, net, prefix, min_bn);
  ganfw_tensor_destroy(dx);
  ganfw_tensor_destroy(y);

  /* Eval mode: the running statistics the step left. */
  ganfw_net_set_train(net, 0, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y), GANFW_OK);
  snprintf(key, sizeof key, "%s.eval_y", c->name);
  compare(ref, key, y);
  ganfw_tensor_destroy(y);

  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(w);
  ganfw_tape_destroy(tape);
  fixture_close(&f);
  gt_ref_close(ref);
  tol = TOL;
}

/* Two basic blocks without a stem: a stride-2 projection shortcut from the net's input, then
 * an identity shortcut. */
static void test_block(void) {
  run_classifier(&cases[0], 5, TOL);
}

static void test_bottleneck(void) {
  run_classifier(&cases[1], 12, TOL);
}

static void test_resnet20(void) {
  run_classifier(&cases[2], 21, TOL_DEEP);
}

/* The resgan case of gen_resnet.py's GAN_CASES: img = G(z), logit = D(img), L = sum(logit *
 * w), as test_ref_dcgan.c. */
static void test_resgan(void) {
  gt_ref *ref = gt_ref_open("resnet");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  fixture f;
  fixture_open(&f, "resgan",
               "model:\n"
               "  nz: 8\n"
               "  generator:\n"
               "    channels: 6\n"
               "    blocks: [{channels: 6}, {channels: 4}]\n"
               "  discriminator:\n"
               "    blocks: [{channels: 4}, {channels: 6}, {channels: 6, downsample: false}]\n",
               NULL, 1, 12, 12, 0);
  ganfw_net *g = f.vt->net(f.model, "generator"), *d = f.vt->net(f.model, "discriminator");
  CU_ASSERT_FATAL(g && d);
  CU_ASSERT_EQUAL(f.vt->latent_dim(f.model), 8);
  each_param(ref, g, "resgan.G", 1);
  each_param(ref, d, "resgan.D", 1);
  ganfw_tensor *z = from_ref(f.ctx, ref, "resgan.z", GANFW_MEM_DATA);
  ganfw_tensor *w = from_ref(f.ctx, ref, "resgan.w", GANFW_MEM_ACTIVATION);
  CU_ASSERT_FATAL(z && w);

  ganfw_tape *tg = ganfw_tape_create(g), *td = ganfw_tape_create(d);
  ganfw_tensor *img = NULL, *logit = NULL, *dimg = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(g, z, tg, &img), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(d, img, td, &logit), GANFW_OK);
  compare(ref, "resgan.img", img);
  compare(ref, "resgan.logit", logit);
  ganfw_net_zero_grad(g);
  ganfw_net_zero_grad(d);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(d, td, w, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dimg), GANFW_OK);
  compare(ref, "resgan.dimg", dimg);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(g, tg, dimg, GANFW_BWD_PARAM_GRAD, NULL), GANFW_OK);
  each_param(ref, g, "resgan.grad.G", 0);
  each_param(ref, d, "resgan.grad.D", 0);
  check_running_stats(ref, g, "resgan.after.G", 5);
  ganfw_tensor_destroy(dimg);
  ganfw_tensor_destroy(logit);
  ganfw_tensor_destroy(img);

  ganfw_net_set_train(g, 0, 0);
  ganfw_net_set_train(d, 0, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(g, z, NULL, &img), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(d, img, NULL, &logit), GANFW_OK);
  compare(ref, "resgan.eval_img", img);
  compare(ref, "resgan.eval_logit", logit);
  ganfw_tensor_destroy(logit);
  ganfw_tensor_destroy(img);

  ganfw_tensor_destroy(z);
  ganfw_tensor_destroy(w);
  ganfw_tape_destroy(tg);
  ganfw_tape_destroy(td);
  fixture_close(&f);
  gt_ref_close(ref);
}

static void test_report(void) {
  printf("\n  vs PyTorch in f64 (outputs, input and parameter gradients, running stats): max "
         "rel err per element %.3e (tol %.0e), in ResNet-20 %.3e (tol %.0e); per tensor, "
         "relative to its norm, %.3e (tol %.0e)\n",
         worst, TOL, worst_deep, TOL_DEEP, worst_norm, TOL_NORM);
  CU_ASSERT(worst > 0 && worst <= TOL);
  CU_ASSERT(worst_deep > 0 && worst_deep <= TOL_DEEP);
  CU_ASSERT(worst_norm > 0 && worst_norm <= TOL_NORM);
}

static CU_TestInfo tests[] = {
    {"basic_blocks_projection_and_identity", test_block},
    {"bottleneck_blocks_hidden_linear", test_bottleneck},
    {"resnet20_config", test_resnet20},
    {"resgan_step", test_resgan},
    {"max_error_report", test_report},
    CU_TEST_INFO_NULL,
};

GT_MAIN("resnet_ref", tests)
