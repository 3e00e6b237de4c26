/* The dcgan model plugin (plugins/models/dcgan) on the CPU executor: parameter counts and
 * state_dict names of PyTorch's examples/dcgan networks at 32 and 64 px, forward shapes and
 * ranges, the weights_init statistics, config errors, and a training-mode forward/backward
 * through D and G (its values are compared with PyTorch in test_ref_dcgan.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "config/config.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "ganfw/ganfw.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/tensor.h"
#include "testutil.h"

/* --- fixture ------------------------------------------------------------------------------ */

typedef struct fixture {
  ganfw_ctx *ctx;
  ganfw_plugin *plugin;
  const ganfw_model_vt *vt;
  ganfw_config *config;
  void *model;
  ganfw_net *g, *d;
} fixture;

static int fixture_open(fixture *f, uint64_t seed) {
  memset(f, 0, sizeof *f);
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = seed};
  if (ganfw_ctx_create(&opt, &f->ctx) != GANFW_OK) {
    fprintf(stderr, "\n  ctx: %s\n", ganfw_error_message());
    return 0;
  }
  static char dir[1024];
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(dir, sizeof dir, "%s/plugins", build ? build : ".");
  const char *dirs[] = {dir};
  if (ganfw_plugin_load("dcgan", GANFW_PLUGIN_MODEL, "model.plugin", dirs, 1, &f->plugin) !=
      GANFW_OK) {
    fprintf(stderr, "\n  loading dcgan: %s\n", ganfw_error_message());
    return 0;
  }
  f->vt = ganfw_plugin_vtable(f->plugin);
  return f->vt->family == GANFW_MODEL_GAN;
}

/* Creates the model from `yaml` (a config with a model section) and data info of
 * `channels` (0: none given). */
static ganfw_status fixture_model(fixture *f, const char *yaml, int32_t channels) {
  ganfw_status st = ganfw_config_load_string(yaml, "dcgan_test.yaml", &f->config);
  if (st != GANFW_OK) return st;
  const ganfw_cfg *model = ganfw_cfg_child(ganfw_config_root(f->config), "model");
  const char *plugin = NULL;
  ganfw_cfg_string(model, "plugin", "dcgan", &plugin); /* the core reads this key */
  ganfw_data_info data = {.struct_size = sizeof data, .channels = channels};
  st = f->vt->create(ganfw_host_table(), f->ctx, model, channels ? &data : NULL, &f->model);
  if (st == GANFW_OK) {
    f->g = f->vt->net(f->model, "generator");
    f->d = f->vt->net(f->model, "discriminator");
  }
  return st;
}

static void fixture_close(fixture *f) {
  if (f->vt && f->model) f->vt->destroy(f->model);
  ganfw_config_destroy(f->config);
  ganfw_plugin_unload(f->plugin);
  ganfw_ctx_destroy(f->ctx);
}

static int64_t count_params(ganfw_net *net) {
  int64_t total = 0, n = ganfw_net_param_count(net);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    if (ganfw_net_param_info(net, i, &p) != GANFW_OK) return -1;
    total += p.value->numel;
  }
  return total;
}

/* --- the host table ---------------------------------------------------------------------- */

/* The model reaches the executor only through these entries. */
static void test_host_has_net_entries(void) {
  const ganfw_host *h = ganfw_host_table();
  CU_ASSERT_PTR_NOT_NULL(h->net_create);
  CU_ASSERT_PTR_NOT_NULL(h->net_destroy);
  CU_ASSERT_PTR_NOT_NULL(h->net_conv2d);
  CU_ASSERT_PTR_NOT_NULL(h->net_conv_transpose2d);
  CU_ASSERT_PTR_NOT_NULL(h->net_batchnorm2d);
  CU_ASSERT_PTR_NOT_NULL(h->net_activation);
  CU_ASSERT_PTR_NOT_NULL(h->net_build);
  CU_ASSERT_PTR_NOT_NULL(h->net_param_count);
  CU_ASSERT_PTR_NOT_NULL(h->net_param_info);
}

/* --- 32 px, one channel -------------------------------------------------------------------- */

static const char *const yaml32 = "model:\n  plugin: dcgan\n  image_size: 32\n  channels: 1\n";

/* state_dict keys of the example's networks with one stage fewer (see dcgan.c). */
static const char *const g32_names[] = {
    "main.0.weight", "main.1.weight", "main.1.bias",   "main.3.weight", "main.4.weight",
    "main.4.bias",   "main.6.weight", "main.7.weight", "main.7.bias",   "main.9.weight",
};
static const char *const d32_names[] = {
    "main.0.weight", "main.2.weight", "main.3.weight", "main.3.bias",
    "main.5.weight", "main.6.weight", "main.6.bias",   "main.8.weight",
};

/* Shapes of those parameters (nz 100, ngf = ndf = 64, one channel). */
static const int64_t g32_shapes[][4] = {
    {100, 256, 4, 4}, {256}, {256}, {256, 128, 4, 4}, {128}, {128},
    {128, 64, 4, 4},  {64},  {64},  {64, 1, 4, 4}};
static const int64_t d32_shapes[][4] = {{64, 1, 4, 4},    {128, 64, 4, 4}, {128}, {128},
                                        {256, 128, 4, 4}, {256},           {256}, {1, 256, 4, 4}};

static void check_names(ganfw_net *net, const char *const *names, const int64_t (*shapes)[4],
                        int64_t n) {
  CU_ASSERT_EQUAL_FATAL(ganfw_net_param_count(net), n);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &p), GANFW_OK);
    CU_ASSERT_STRING_EQUAL(p.name, names[i]);
    CU_ASSERT(p.trainable == 1 && p.grad != NULL);
    CU_ASSERT_EQUAL(p.value->category, GANFW_MEM_PARAM);
    int32_t nd = shapes[i][1] ? 4 : 1;
    CU_ASSERT_EQUAL(p.value->ndim, nd);
    for (int32_t k = 0; k < nd; k++) CU_ASSERT_EQUAL(p.value->shape[k], shapes[i][k]);
  }
}

static void test_counts_and_names_32(void) {
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f, 1));
  ganfw_status st = fixture_model(&f, yaml32, 1);
  if (st) fprintf(stderr, "\n  create: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(f.config), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f.g);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f.d);
  CU_ASSERT_PTR_NULL(f.vt->net(f.model, "classifier"));
  CU_ASSERT_STRING_EQUAL(ganfw_net_name(f.g), "generator");
  CU_ASSERT_STRING_EQUAL(ganfw_net_name(f.d), "discriminator");
  CU_ASSERT_EQUAL(f.vt->latent_dim(f.model), 100);
  /* G: 100*256*16 + 2*256 + 256*128*16 + 2*128 + 128*64*16 + 2*64 + 64*1*16 */
  CU_ASSERT_EQUAL(count_params(f.g), 1066880);
  /* D: 1*64*16 + 64*128*16 + 2*128 + 128*256*16 + 2*256 + 256*1*16 */
  CU_ASSERT_EQUAL(count_params(f.d), 661248);
  check_names(f.g, g32_names, g32_shapes, 10);
  check_names(f.d, d32_names, d32_shapes, 8);
  /* 11 and 9 nn.Sequential entries, activations included. */
  CU_ASSERT_EQUAL(ganfw_net_layer_count(f.g), 11);
  CU_ASSERT_EQUAL(ganfw_net_layer_count(f.d), 9);
  /* BatchNorm buffers carry state_dict names too. */
  ganfw_net_buffer b;
  CU_ASSERT_FATAL(ganfw_net_buffer_at(f.g, 0, &b));
  CU_ASSERT_STRING_EQUAL(b.name, "main.1.running_mean");
  CU_ASSERT_FATAL(ganfw_net_buffer_at(f.d, 2, &b));
  CU_ASSERT_STRING_EQUAL(b.name, "main.3.num_batches_tracked");
  fixture_close(&f);
}

/* model.batchnorm: false leaves out every BatchNorm2d: the parameter counts lose the BN
 * weights and biases, the Sequential indices count without them, no buffers remain, and
 * the nets still map z to an image and an image to a logit. */
static const char *const g32_nobn_names[] = {"main.0.weight", "main.2.weight", "main.4.weight",
                                             "main.6.weight"};
static const int64_t g32_nobn_shapes[][4] = {
    {100, 256, 4, 4}, {256, 128, 4, 4}, {128, 64, 4, 4}, {64, 1, 4, 4}};
static const char *const d32_nobn_names[] = {"main.0.weight", "main.2.weight", "main.4.weight",
                                             "main.6.weight"};
static const int64_t d32_nobn_shapes[][4] = {
    {64, 1, 4, 4}, {128, 64, 4, 4}, {256, 128, 4, 4}, {1, 256, 4, 4}};

static void check_forward(fixture *f, int64_t channels, int64_t size);

static void test_without_batchnorm_32(void) {
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f, 1));
  ganfw_status st = fixture_model(&f, "model:\n  image_size: 32\n  batchnorm: false\n", 1);
  if (st) fprintf(stderr, "\n  create: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(f.config), GANFW_OK);
  /* G: 100*256*16 + 256*128*16 + 128*64*16 + 64*1*16 = 1066880 - 2*(256+128+64) */
  CU_ASSERT_EQUAL(count_params(f.g), 1065984);
  /* D: 1*64*16 + 64*128*16 + 128*256*16 + 256*1*16 = 661248 - 2*(128+256) */
  CU_ASSERT_EQUAL(count_params(f.d), 660480);
  check_names(f.g, g32_nobn_names, g32_nobn_shapes, 4);
  check_names(f.d, d32_nobn_names, d32_nobn_shapes, 4);
  CU_ASSERT_EQUAL(ganfw_net_layer_count(f.g), 8);
  CU_ASSERT_EQUAL(ganfw_net_layer_count(f.d), 7);
  ganfw_net_buffer b;
  CU_ASSERT_FALSE(ganfw_net_buffer_at(f.g, 0, &b));
  CU_ASSERT_FALSE(ganfw_net_buffer_at(f.d, 0, &b));
  check_forward(&f, 1, 32);
  fixture_close(&f);
  /* true is the default and gives the example's nets. */
  CU_ASSERT_FATAL(fixture_open(&f, 1));
  CU_ASSERT_EQUAL_FATAL(fixture_model(&f, "model:\n  image_size: 32\n  batchnorm: true\n", 1),
                        GANFW_OK);
  CU_ASSERT_EQUAL(count_params(f.g), 1066880);
  CU_ASSERT_EQUAL(ganfw_net_layer_count(f.d), 9);
  fixture_close(&f);
}

/* --- forward --------------------------------------------------------------------------------- */

static ganfw_tensor *latent(fixture *f, int64_t n, int64_t nz) {
  int64_t shape[4] = {n, nz, 1, 1};
  ganfw_tensor *z = ganfw_tensor_create(f->ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "z");
  if (z) ganfw_host_table()->rng_normal(f->ctx, z, 0.0f, 1.0f);
  return z;
}

static float *to_host(const ganfw_tensor *t) {
  float *x = malloc((size_t)t->nbytes);
  ganfw_tensor_to_host(t, x, t->nbytes);
  return x;
}

static void check_forward(fixture *f, int64_t channels, int64_t size) {
  ganfw_tensor *z = latent(f, 4, 100), *img = NULL, *logit = NULL;
  CU_ASSERT_PTR_NOT_NULL_FATAL(z);
  ganfw_status st = ganfw_net_forward(f->g, z, NULL, &img);
  if (st) fprintf(stderr, "\n  G forward: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(img->ndim, 4);
  CU_ASSERT(img->shape[0] == 4 && img->shape[1] == channels && img->shape[2] == size &&
            img->shape[3] == size);
  float *x = to_host(img);
  float lo = INFINITY, hi = -INFINITY;
  double sum = 0;
  for (int64_t i = 0; i < img->numel; i++) {
    lo = fminf(lo, x[i]);
    hi = fmaxf(hi, x[i]);
    sum += fabs(x[i]);
  }
  CU_ASSERT(lo >= -1.0f && hi <= 1.0f);
  CU_ASSERT(hi > lo && sum > 0); /* not constant */
  free(x);
  st = ganfw_net_forward(f->d, img, NULL, &logit);
  if (st) fprintf(stderr, "\n  D forward: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT(logit->ndim == 4 && logit->shape[0] == 4 && logit->shape[1] == 1 &&
            logit->shape[2] == 1 && logit->shape[3] == 1);
  float *y = to_host(logit);
  for (int i = 0; i < 4; i++) CU_ASSERT(isfinite(y[i]));
  free(y);
  ganfw_tensor_destroy(logit);
  ganfw_tensor_destroy(img);
  ganfw_tensor_destroy(z);
  /* No-grad forwards keep nothing once their outputs are gone. */
  ganfw_alloc_stats s;
  ganfw_alloc_get_stats(f->ctx->alloc, &s);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_ACTIVATION].current, 0);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_WORKSPACE].current, 0);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_DATA].current, 0);
}

static void test_forward_32(void) {
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f, 2));
  CU_ASSERT_EQUAL_FATAL(fixture_model(&f, yaml32, 1), GANFW_OK);
  check_forward(&f, 1, 32);
  /* Eval mode (running statistics) too. */
  ganfw_net_set_train(f.g, 0, 0);
  ganfw_net_set_train(f.d, 0, 0);
  check_forward(&f, 1, 32);
  fixture_close(&f);
}

/* --- 64 px RGB (the example's networks) ----------------------------------------------------- */

static void test_counts_64_rgb(void) {
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f, 3));
  /* No image_size (default 64), no channels: the data's 3 channels. */
  CU_ASSERT_EQUAL_FATAL(fixture_model(&f, "model:\n  plugin: dcgan\n", 3), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(f.config), GANFW_OK);
  /* G: 100*512*16 + 2*512 + 512*256*16 + 2*256 + 256*128*16 + 2*128 + 128*64*16 + 2*64
   *    + 64*3*16 = 3,576,704 */
  CU_ASSERT_EQUAL(count_params(f.g), 3576704);
  /* D: 3*64*16 + 64*128*16 + 2*128 + 128*256*16 + 2*256 + 256*512*16 + 2*512 + 512*1*16
   *    = 2,765,568 */
  CU_ASSERT_EQUAL(count_params(f.d), 2765568);
  CU_ASSERT_EQUAL(ganfw_net_param_count(f.g), 13);
  CU_ASSERT_EQUAL(ganfw_net_param_count(f.d), 11);
  ganfw_param_info p = {.struct_size = sizeof p};
  CU_ASSERT_EQUAL(ganfw_net_param_info(f.g, 12, &p), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(p.name, "main.12.weight"); /* ConvT(ngf, nc); main.13 is Tanh */
  CU_ASSERT_EQUAL(ganfw_net_param_info(f.d, 10, &p), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(p.name, "main.11.weight"); /* Conv(ndf*8, 1); no Sigmoid */
  check_forward(&f, 3, 64);
  fixture_close(&f);

  /* Without data info the default is 3 channels; other widths follow the config. */
  CU_ASSERT_FATAL(fixture_open(&f, 3));
  CU_ASSERT_EQUAL_FATAL(
      fixture_model(&f, "model:\n  image_size: 32\n  nz: 16\n  ngf: 8\n  ndf: 4\n", 0), GANFW_OK);
  CU_ASSERT_EQUAL(f.vt->latent_dim(f.model), 16);
  /* G: 16*32*16 + 64 + 32*16*16 + 32 + 16*8*16 + 16 + 8*3*16; D: 3*4*16 + 4*8*16 + 16 +
   * 8*16*16 + 32 + 16*1*16 */
  CU_ASSERT_EQUAL(count_params(f.g), 8192 + 64 + 8192 + 32 + 2048 + 16 + 384);
  CU_ASSERT_EQUAL(count_params(f.d), 192 + 512 + 16 + 2048 + 32 + 256);
  fixture_close(&f);
}

/* --- weights_init -------------------------------------------------------------------------- */

static void test_init_statistics(void) {
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f, 4));
  CU_ASSERT_EQUAL_FATAL(fixture_model(&f, yaml32, 1), GANFW_OK);
  ganfw_net *nets[2] = {f.g, f.d};
  int nconv = 0, nbn = 0;
  for (int k = 0; k < 2; k++) {
    int64_t n = ganfw_net_param_count(nets[k]);
    for (int64_t i = 0; i < n; i++) {
      ganfw_param_info p = {.struct_size = sizeof p};
      CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(nets[k], i, &p), GANFW_OK);
      float *x = to_host(p.value);
      double mean = 0, var = 0;
      for (int64_t j = 0; j < p.value->numel; j++) mean += x[j];
      mean /= (double)p.value->numel;
      for (int64_t j = 0; j < p.value->numel; j++) var += (x[j] - mean) * (x[j] - mean);
      double sd = sqrt(var / (double)p.value->numel);
      /* Sampling error of the mean is 0.02/sqrt(numel); allow 5 of those. */
      double tol = 5 * 0.02 / sqrt((double)p.value->numel);
      int is_bias = strstr(p.name, ".bias") != NULL;
      if (strcmp(p.layer_type, "batchnorm2d") == 0) {
        nbn++;
        if (is_bias) {
          CU_ASSERT(mean == 0.0 && sd == 0.0);
        } else {
          CU_ASSERT(fabs(mean - 1.0) < tol);
          CU_ASSERT(sd > 0.01 && sd < 0.03);
        }
      } else {
        nconv++;
        CU_ASSERT(fabs(mean) < tol);
        if (p.value->numel >= 1000) CU_ASSERT(fabs(sd - 0.02) < 0.002);
        if (fabs(mean) >= tol || (p.value->numel >= 1000 && fabs(sd - 0.02) >= 0.002))
          fprintf(stderr, "\n  %s: mean %g sd %g\n", p.name, mean, sd);
      }
      free(x);
    }
  }
  CU_ASSERT_EQUAL(nconv, 8);
  CU_ASSERT_EQUAL(nbn, 10);
  fixture_close(&f);
}

/* The same seed gives the same weights; another seed other weights. */
static void test_init_seeded(void) {
  float first[3][16];
  for (int run = 0; run < 3; run++) {
    fixture f;
    CU_ASSERT_FATAL(fixture_open(&f, run < 2 ? 7 : 8));
    CU_ASSERT_EQUAL_FATAL(fixture_model(&f, yaml32, 1), GANFW_OK);
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(f.d, 1, &p), GANFW_OK);
    float *x = to_host(p.value);
    memcpy(first[run], x, sizeof first[run]);
    free(x);
    fixture_close(&f);
  }
  CU_ASSERT(memcmp(first[0], first[1], sizeof first[0]) == 0);
  CU_ASSERT(memcmp(first[0], first[2], sizeof first[0]) != 0);
}

/* --- config errors --------------------------------------------------------------------------- */

static void expect_error(const char *yaml, const char *want1, const char *want2) {
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f, 1));
  ganfw_error_clear();
  CU_ASSERT_EQUAL(fixture_model(&f, yaml, 1), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(f.model);
  const char *msg = ganfw_error_message();
  int ok = strstr(msg, want1) && (!want2 || strstr(msg, want2));
  if (!ok) fprintf(stderr, "\n  expected '%s'/'%s' in: %s\n", want1, want2 ? want2 : "", msg);
  CU_ASSERT(ok);
  fixture_close(&f);
}

static void test_bad_config(void) {
  expect_error("model:\n  image_size: 48\n", "model.image_size", "32 or 64");
  expect_error("model:\n  image_size: 128\n", "model.image_size", NULL);
  expect_error("model:\n  image_size: big\n", "dcgan_test.yaml:2:", "image_size");
  expect_error("model:\n  image_size: 32\n  channels: 0\n", "model.channels", "positive");
  expect_error("model:\n  image_size: 32\n  nz: -5\n", "model.nz", NULL);
  expect_error("model:\n  image_size: 32\n  ngf: 0\n", "model.ngf", NULL);
  expect_error("model:\n  image_size: 32\n  ndf: 0\n", "model.ndf", NULL);
  expect_error("model:\n  ndf: 1.5\n", "dcgan_test.yaml:2:", "ndf");
  expect_error("model:\n  batchnorm: maybe\n", "dcgan_test.yaml:2:", "batchnorm");
}

/* --- training mode: forward with tapes, backward --------------------------------------------
 * (The values of the gradients are checked against PyTorch in test_ref_dcgan.c; finite
 * differences are useless here: with weights of std 0.02 the ReLU kinks are closer than any
 * step float32 can resolve.) */

static void test_backward(void) {
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f, 11));
  CU_ASSERT_EQUAL_FATAL(fixture_model(&f, yaml32, 1), GANFW_OK);
  ganfw_tensor *z = latent(&f, 4, 100);
  ganfw_tape *tg = ganfw_tape_create(f.g), *td = ganfw_tape_create(f.d);
  ganfw_tensor *img = NULL, *logit = NULL, *dimg = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(f.g, z, tg, &img), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(f.d, img, td, &logit), GANFW_OK);
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(f.ctx->alloc, &as);
  CU_ASSERT(as.category[GANFW_MEM_ACTIVATION].current > 0); /* the tapes hold activations */
  int64_t one[4] = {4, 1, 1, 1};
  const float w[4] = {1.0f, -0.5f, 0.25f, 2.0f};
  ganfw_tensor *dy =
      ganfw_tensor_create(f.ctx, GANFW_DTYPE_F32, 4, one, GANFW_MEM_ACTIVATION, "dy");
  ganfw_tensor_from_host(dy, w, sizeof w);
  ganfw_net_zero_grad(f.g);
  ganfw_net_zero_grad(f.d);
  ganfw_status st =
      ganfw_net_backward(f.d, td, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dimg);
  if (st) fprintf(stderr, "\n  D backward: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(dimg);
  CU_ASSERT(dimg->shape[0] == 4 && dimg->shape[1] == 1 && dimg->shape[2] == 32);
  st = ganfw_net_backward(f.g, tg, dimg, GANFW_BWD_PARAM_GRAD, NULL);
  if (st) fprintf(stderr, "\n  G backward: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  /* Every parameter of both nets got a finite, non-zero gradient. */
  ganfw_net *nets[2] = {f.g, f.d};
  for (int k = 0; k < 2; k++) {
    int64_t n = ganfw_net_param_count(nets[k]);
    for (int64_t i = 0; i < n; i++) {
      ganfw_param_info p = {.struct_size = sizeof p};
      CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(nets[k], i, &p), GANFW_OK);
      CU_ASSERT_EQUAL(p.grad->category, GANFW_MEM_GRAD);
      float *g = to_host(p.grad);
      double sumsq = 0;
      int finite = 1;
      for (int64_t j = 0; j < p.grad->numel; j++) {
        finite &= isfinite(g[j]) != 0;
        sumsq += (double)g[j] * g[j];
      }
      CU_ASSERT(finite && sumsq > 0);
      if (!finite || !(sumsq > 0))
        fprintf(stderr, "\n  %s.%s: gradient %s\n", ganfw_net_name(nets[k]), p.name,
                finite ? "zero" : "not finite");
      free(g);
    }
  }
  /* The train-mode forward updated each BatchNorm's running statistics once. */
  ganfw_net_buffer b;
  CU_ASSERT_FATAL(ganfw_net_buffer_at(f.g, 2, &b));
  CU_ASSERT(b.counter && *b.counter == 1);
  /* Backward consumed the tapes: once the outputs are gone, no activation is left. */
  ganfw_tensor_destroy(dimg);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(logit);
  ganfw_tensor_destroy(img);
  ganfw_tensor_destroy(z);
  ganfw_alloc_get_stats(f.ctx->alloc, &as);
  CU_ASSERT_EQUAL(as.category[GANFW_MEM_ACTIVATION].current, 0);
  CU_ASSERT_EQUAL(as.category[GANFW_MEM_WORKSPACE].current, 0);
  ganfw_tape_destroy(tg);
  ganfw_tape_destroy(td);
  fixture_close(&f);
}

static CU_TestInfo tests[] = {
    {"host_has_net_entries", test_host_has_net_entries},
    {"counts_and_names_32", test_counts_and_names_32},
    {"without_batchnorm_32", test_without_batchnorm_32},
    {"forward_32", test_forward_32},
    {"counts_and_forward_64_rgb", test_counts_64_rgb},
    {"init_statistics", test_init_statistics},
    {"init_seeded", test_init_seeded},
    {"bad_config", test_bad_config},
    {"backward", test_backward},
    CU_TEST_INFO_NULL,
};

GT_MAIN("dcgan", tests)
