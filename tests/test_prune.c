/* Pruning masks (nn/prune.h, layers/mask.c, train/prune_run.h): the masks of l1, global and
 * ln_structured pruning against torch.nn.utils.prune (tests/prune_torch.py; skipped without
 * torch), forward and gradients of a masked layer bitwise those of the plain layer with
 * weight = orig * mask, checkpoints of masked models (save, load into the unpruned model,
 * remove, the errors), the schedule's sparsity, and the `prune:` section in a run, its plan
 * against the measured step and its resume. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/layer.h"
#include "nn/net.h"
#include "nn/prune.h"
#include "runtime/alloc.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "tools/plan.h"
#include "train/loop.h"
#include "train/prune_run.h"
#include "train/session.h"

static const char *path_in(const char *rel) {
  static char buf[8][1024];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", gt_tmp_root("prune"), rel);
  return buf[k];
}

static ganfw_ctx *make_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 7};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  return ctx;
}

static int msg_has(const char *s) {
  const int ok = strstr(ganfw_error_message(), s) != NULL;
  if (!ok) printf("\n  message without '%s': %s", s, ganfw_error_message());
  return ok;
}

/* The three layers prune_torch.py builds, one net each: conv2d 3->8 k3, linear 12->5,
 * conv_transpose2d 4->6 k3, named "conv", "fc", "up". */
typedef struct trio {
  ganfw_ctx *ctx;
  ganfw_net *conv, *fc, *up;
} trio;

static void set_weight(ganfw_net *net, const char *layer, uint64_t seed) {
  ganfw_layer *l = ganfw_prune_find_layer(net, layer);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  float *w = gt_frand(l->param[0]->numel, seed);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(l->param[0], w, l->param[0]->nbytes), GANFW_OK);
  gt_free(w);
}

static void trio_init(trio *t, ganfw_ctx *ctx) {
  t->ctx = ctx;
  t->conv = ganfw_net_create(ctx, "conv");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(t->conv, "conv", 3, 8, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(t->conv, 3, 5, 5), GANFW_OK);
  t->fc = ganfw_net_create(ctx, "fc");
  CU_ASSERT_EQUAL(ganfw_net_flatten(t->fc, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(t->fc, "fc", 12, 5, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(t->fc, 12, 1, 1), GANFW_OK);
  t->up = ganfw_net_create(ctx, "up");
  CU_ASSERT_EQUAL(ganfw_net_conv_transpose2d(t->up, "up", 4, 6, 3, 1, 0, 0, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(t->up, 4, 2, 2), GANFW_OK);
  set_weight(t->conv, "conv", 1);
  set_weight(t->fc, "fc", 2);
  set_weight(t->up, "up", 3);
}

static void trio_free(trio *t) {
  ganfw_net_destroy(t->conv);
  ganfw_net_destroy(t->fc);
  ganfw_net_destroy(t->up);
}

static float *host_of(const ganfw_tensor *t) {
  float *h = gt_falloc(t->numel);
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(t, h, t->nbytes), GANFW_OK);
  return h;
}

static int64_t read_file(const char *path, float *out, int64_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  const size_t got = fread(out, sizeof(float), (size_t)n, f);
  fclose(f);
  return (int64_t)got;
}

static void write_file(const char *path, const float *v, int64_t n) {
  FILE *f = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fwrite(v, sizeof(float), (size_t)n, f), (size_t)n);
  fclose(f);
}

/* The layer's mask equals the one torch wrote for `scenario`, and its state_dict names
 * (parameters and buffers) are the keys torch listed. */
static void expect_like_torch(const char *scenario, ganfw_net *net, const char *layer) {
  ganfw_layer *l = ganfw_prune_find_layer(net, layer);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  char file[256];
  const ganfw_tensor *m = ganfw_layer_mask(l);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  snprintf(file, sizeof file, "%s.%s.mask.bin", scenario, layer);
  float *want = gt_falloc(m->numel), *got = host_of(m);
  CU_ASSERT_EQUAL_FATAL(read_file(path_in(file), want, m->numel), m->numel);
  int64_t differ = 0, zeros = 0;
  for (int64_t i = 0; i < m->numel; i++) differ += got[i] != want[i], zeros += got[i] == 0.0f;
  if (differ)
    printf("\n  %s %s: %lld of %lld mask entries differ from torch", scenario, layer,
           (long long)differ, (long long)m->numel);
  CU_ASSERT_EQUAL(differ, 0);
  CU_ASSERT(zeros > 0);
  gt_free(want);
  gt_free(got);
  /* names: torch's keys of the module, ours without the layer's name */
  snprintf(file, sizeof file, "%s.keys.json", scenario);
  char json[4096] = "";
  FILE *f = fopen(path_in(file), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  const size_t n = fread(json, 1, sizeof json - 1, f);
  json[n] = '\0';
  fclose(f);
  char *keys = strstr(json, layer); /* {"conv": ["bias", "weight_orig", "weight_mask"], ...} */
  CU_ASSERT_PTR_NOT_NULL_FATAL(keys);
  char *end = strchr(keys, ']');
  CU_ASSERT_PTR_NOT_NULL_FATAL(end);
  *end = '\0';
  int torch_keys = 0;
  for (char *q = keys; (q = strchr(q, ',')) != NULL; q++) torch_keys++;
  torch_keys++;
  int ours = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++, ours++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &info), GANFW_OK);
    char quoted[128];
    snprintf(quoted, sizeof quoted, "\"%s\"", info.name + strlen(layer) + 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(keys, quoted));
  }
  ganfw_net_buffer b;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++, ours++) {
    char quoted[128];
    snprintf(quoted, sizeof quoted, "\"%s\"", b.name + strlen(layer) + 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(keys, quoted));
  }
  CU_ASSERT_EQUAL(ours, torch_keys);
}

static void test_against_torch(void) {
  if (!gt_python_has("torch, numpy")) {
    printf("\n  skipped: /usr/bin/python3 has no torch (tests/prune_torch.py needs it)");
    return;
  }
  ganfw_ctx *ctx = make_ctx();
  trio t;
  trio_init(&t, ctx);
  ganfw_net *nets[3] = {t.conv, t.fc, t.up};
  const char *names[3] = {"conv", "fc", "up"};
  for (int k = 0; k < 3; k++) {
    ganfw_layer *l = ganfw_prune_find_layer(nets[k], names[k]);
    float *w = host_of(l->param[0]);
    char file[64];
    snprintf(file, sizeof file, "%s.bin", names[k]);
    write_file(path_in(file), w, l->param[0]->numel);
    gt_free(w);
  }
  char cmd[2048];
  const char *src = getenv("GANFW_SOURCE_DIR");
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/prune_torch.py %s", src ? src : ".",
           gt_tmp_root("prune"));
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);

  /* l1: a fraction, then a count over what remains */
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(t.conv, "conv", ganfw_prune_fraction(0.3)), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(t.conv, "conv", ganfw_prune_count(5)), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(t.fc, "fc", ganfw_prune_fraction(0.5)), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(t.fc, "fc", ganfw_prune_fraction(0.5)), GANFW_OK);
  expect_like_torch("l1", t.conv, "conv");
  expect_like_torch("l1", t.fc, "fc");
  trio_free(&t);

  /* global over three nets, twice */
  trio_init(&t, ctx);
  const ganfw_prune_target all[3] = {{t.conv, "conv"}, {t.fc, "fc"}, {t.up, "up"}};
  CU_ASSERT_EQUAL(ganfw_prune_global_unstructured(all, 3, ganfw_prune_fraction(0.4)), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_global_unstructured(all, 3, ganfw_prune_fraction(0.25)), GANFW_OK);
  expect_like_torch("global", t.conv, "conv");
  expect_like_torch("global", t.fc, "fc");
  expect_like_torch("global", t.up, "up");
  trio_free(&t);

  /* ln_structured */
  trio_init(&t, ctx);
  CU_ASSERT_EQUAL(ganfw_prune_ln_structured(t.conv, "conv", ganfw_prune_fraction(0.5), 2, 0),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_ln_structured(t.conv, "conv", ganfw_prune_fraction(0.34), 1, 1),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_ln_structured(t.fc, "fc", ganfw_prune_fraction(0.4), 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_ln_structured(t.up, "up", ganfw_prune_count(2), 2, 1), GANFW_OK);
  expect_like_torch("ln", t.conv, "conv");
  expect_like_torch("ln", t.fc, "fc");
  expect_like_torch("ln", t.up, "up");
  trio_free(&t);

  /* remove: the plain weight orig * mask, named weight, no buffer */
  trio_init(&t, ctx);
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(t.conv, "conv", ganfw_prune_fraction(0.3)), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_remove(t.conv, "conv"), GANFW_OK);
  ganfw_layer *l = ganfw_prune_find_layer(t.conv, "conv");
  CU_ASSERT_STRING_EQUAL(l->param_name[0], "conv.weight");
  CU_ASSERT_EQUAL(l->nextra, 0);
  float *got = host_of(l->param[0]), *want = gt_falloc(l->param[0]->numel);
  CU_ASSERT_EQUAL(read_file(path_in("remove.conv.weight.bin"), want, l->param[0]->numel),
                  l->param[0]->numel);
  CU_ASSERT_EQUAL(memcmp(got, want, (size_t)l->param[0]->nbytes), 0);
  gt_free(got);
  gt_free(want);
  FILE *f = fopen(path_in("remove.keys.json"), "r");
  char json[512] = "";
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT(fread(json, 1, sizeof json - 1, f) > 0);
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"weight\""));
  CU_ASSERT_PTR_NULL(strstr(json, "weight_orig"));
  trio_free(&t);
  ganfw_ctx_destroy(ctx);
}

/* --- forward and gradients: bitwise those of weight = orig * mask ----------------------- */

static ganfw_net *chain(ganfw_ctx *ctx, const char *name) {
  ganfw_net *n = ganfw_net_create(ctx, name);
  CU_ASSERT_EQUAL(ganfw_net_conv2d(n, "c", 3, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(n, "a", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv_transpose2d(n, "t", 4, 2, 3, 1, 1, 0, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(n, "f"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(n, "l", 50, 6, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(n, 3, 5, 5), GANFW_OK);
  return n;
}

static int same_tensor(const ganfw_tensor *a, const ganfw_tensor *b) {
  float *x = host_of(a), *y = host_of(b);
  const int same = a->numel == b->numel && memcmp(x, y, (size_t)a->nbytes) == 0;
  gt_free(x);
  gt_free(y);
  return same;
}

/* One forward and backward of net on x with dy; *y and *dx new references. */
static void pass(ganfw_net *net, ganfw_tensor *x, ganfw_tensor *dy, ganfw_tensor **y,
                 ganfw_tensor **dx) {
  ganfw_tape *tape = ganfw_tape_create(net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, y), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, dx), GANFW_OK);
  ganfw_tape_destroy(tape);
}

/* in the compute dtype (f32, or f16/bf16 as under AMP: the product is rounded as the plain
 * weight is) */
static void bitwise_in(int32_t dtype) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *a = chain(ctx, "masked"), *b = chain(ctx, "plain");
  CU_ASSERT_EQUAL(ganfw_net_set_compute_dtype(a, dtype), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_set_compute_dtype(b, dtype), GANFW_OK);
  const char *layers[3] = {"c", "t", "l"};
  /* same parameters in both */
  for (int64_t i = 0; i < ganfw_net_param_count(a); i++) {
    ganfw_param_info pa = {.struct_size = sizeof pa}, pb = {.struct_size = sizeof pb};
    ganfw_net_param_info(a, i, &pa);
    ganfw_net_param_info(b, i, &pb);
    float *v = host_of(pa.value);
    ganfw_tensor_from_host(pb.value, v, pb.value->nbytes);
    gt_free(v);
  }
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(a, "c", ganfw_prune_fraction(0.4)), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_ln_structured(a, "t", ganfw_prune_count(1), 2, 1), GANFW_OK);
  const ganfw_prune_target g[2] = {{a, "t"}, {a, "l"}};
  CU_ASSERT_EQUAL(ganfw_prune_global_unstructured(g, 2, ganfw_prune_fraction(0.3)), GANFW_OK);
  /* b: weight = orig * mask */
  float *mask[3];
  for (int k = 0; k < 3; k++) {
    ganfw_layer *la = ganfw_prune_find_layer(a, layers[k]),
                *lb = ganfw_prune_find_layer(b, layers[k]);
    mask[k] = host_of(ganfw_layer_mask(la));
    float *w = host_of(la->param[0]);
    for (int64_t i = 0; i < la->param[0]->numel; i++) w[i] *= mask[k][i];
    ganfw_tensor_from_host(lb->param[0], w, lb->param[0]->nbytes);
    gt_free(w);
  }
  const int64_t xs[4] = {3, 3, 5, 5}, ys[2] = {3, 6};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *dy = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 2, ys, GANFW_MEM_DATA, "dy");
  float *hx = gt_frand(x->numel, 5), *hdy = gt_frand(dy->numel, 6);
  ganfw_tensor_from_host(x, hx, x->nbytes);
  ganfw_tensor_from_host(dy, hdy, dy->nbytes);
  /* two backwards each: the second accumulates */
  float *gb1[3];
  ganfw_tensor *ya, *dxa, *yb, *dxb;
  for (int rep = 0; rep < 2; rep++) {
    pass(a, x, dy, &ya, &dxa);
    ganfw_net_zero_grad(b);
    pass(b, x, dy, &yb, &dxb);
    CU_ASSERT(same_tensor(ya, yb));
    CU_ASSERT(same_tensor(dxa, dxb));
    for (int k = 0; k < 3; k++) {
      ganfw_layer *la = ganfw_prune_find_layer(a, layers[k]),
                  *lb = ganfw_prune_find_layer(b, layers[k]);
      float *ga = host_of(la->grad[0]), *gb = host_of(lb->grad[0]);
      int64_t differ = 0;
      for (int64_t i = 0; i < la->param[0]->numel; i++) {
        float want = gb[i] * mask[k][i];
        if (rep == 1) want = gb1[k][i] * mask[k][i] + want; /* autograd: g1*m + g2*m */
        differ += memcmp(&ga[i], &want, sizeof want) != 0;
      }
      if (differ)
        printf("\n  layer %s, backward %d, %s: %lld gradients differ", layers[k], rep + 1,
               ganfw_dtype_name(dtype), (long long)differ);
      CU_ASSERT_EQUAL(differ, 0);
      CU_ASSERT(same_tensor(la->grad[1], lb->grad[1]) || rep == 1);
      if (rep == 0)
        gb1[k] = gb;
      else
        gt_free(gb), gt_free(gb1[k]);
      gt_free(ga);
    }
    ganfw_tensor_destroy(ya);
    ganfw_tensor_destroy(dxa);
    ganfw_tensor_destroy(yb);
    ganfw_tensor_destroy(dxb);
  }
  for (int k = 0; k < 3; k++) gt_free(mask[k]);
  gt_free(hx);
  gt_free(hdy);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(dy);
  ganfw_net_destroy(a);
  ganfw_net_destroy(b);
  ganfw_ctx_destroy(ctx);
}

static void test_forward_backward_bitwise(void) {
  bitwise_in(GANFW_DTYPE_F32);
  bitwise_in(GANFW_DTYPE_BF16);
  bitwise_in(GANFW_DTYPE_F16);
}

/* The double backward (a penalty on the input gradient, WGAN-GP / R1) of a masked net: the
 * parameter gradients are those of the plain net with weight = orig * mask, times the mask. */
static void test_double_backward(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *a = chain(ctx, "masked"), *b = chain(ctx, "plain");
  const char *layers[3] = {"c", "t", "l"};
  for (int64_t i = 0; i < ganfw_net_param_count(a); i++) {
    ganfw_param_info pa = {.struct_size = sizeof pa}, pb = {.struct_size = sizeof pb};
    ganfw_net_param_info(a, i, &pa);
    ganfw_net_param_info(b, i, &pb);
    float *v = host_of(pa.value);
    ganfw_tensor_from_host(pb.value, v, pb.value->nbytes);
    gt_free(v);
  }
  for (int k = 0; k < 3; k++)
    CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(a, layers[k], ganfw_prune_fraction(0.5)), GANFW_OK);
  float *mask[3];
  for (int k = 0; k < 3; k++) {
    ganfw_layer *la = ganfw_prune_find_layer(a, layers[k]);
    ganfw_layer *lb = ganfw_prune_find_layer(b, layers[k]);
    mask[k] = host_of(ganfw_layer_mask(la));
    float *w = host_of(la->param[0]);
    for (int64_t i = 0; i < la->param[0]->numel; i++) w[i] *= mask[k][i];
    ganfw_tensor_from_host(lb->param[0], w, lb->param[0]->nbytes);
    gt_free(w);
  }
  const int64_t xs[4] = {2, 3, 5, 5}, ys[2] = {2, 6};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *dy = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 2, ys, GANFW_MEM_DATA, "dy");
  ganfw_tensor *v = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "v");
  float *hx = gt_frand(x->numel, 8), *hdy = gt_frand(dy->numel, 9), *hv = gt_frand(v->numel, 10);
  ganfw_tensor_from_host(x, hx, x->nbytes);
  ganfw_tensor_from_host(dy, hdy, dy->nbytes);
  ganfw_tensor_from_host(v, hv, v->nbytes);
  ganfw_net *nets[2] = {a, b};
  ganfw_tensor *gx[2];
  for (int j = 0; j < 2; j++) {
    ganfw_net_zero_grad(nets[j]);
    ganfw_tape *tape = ganfw_tape_create(nets[j]);
    ganfw_tape_set_full(tape, 1);
    ganfw_tensor *y = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(nets[j], x, tape, &y), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_backward_keep(nets[j], tape, dy, &gx[j]), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_backward_of_backward(nets[j], tape, v), GANFW_OK);
    ganfw_tensor_destroy(y);
    ganfw_tape_destroy(tape);
  }
  CU_ASSERT(same_tensor(gx[0], gx[1]));
  for (int k = 0; k < 3; k++) {
    ganfw_layer *la = ganfw_prune_find_layer(a, layers[k]);
    ganfw_layer *lb = ganfw_prune_find_layer(b, layers[k]);
    float *ga = host_of(la->grad[0]), *gb = host_of(lb->grad[0]);
    /* equal values: the masked entries may be +0 where the plain product gives -0 (the
     * mask's gradient is added to a zeroed gradient) */
    int64_t differ = 0, nonzero = 0;
    for (int64_t i = 0; i < la->param[0]->numel; i++) {
      const float want = gb[i] * mask[k][i];
      differ += ga[i] != want;
      nonzero += want != 0.0f;
    }
    if (differ) printf("\n  layer %s: %lld gradients differ", layers[k], (long long)differ);
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT(nonzero > 0);
    gt_free(ga);
    gt_free(gb);
    gt_free(mask[k]);
  }
  for (int j = 0; j < 2; j++) ganfw_tensor_destroy(gx[j]);
  gt_free(hx);
  gt_free(hdy);
  gt_free(hv);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(v);
  ganfw_net_destroy(a);
  ganfw_net_destroy(b);
  ganfw_ctx_destroy(ctx);
}

/* --- API errors --------------------------------------------------------------------------- */

static void test_errors(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *n = ganfw_net_create(ctx, "d");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(n, "features.0", 3, 4, 3, 1, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(n, "features.1", 4, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(n, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(n, "classifier", 4 * 25, 3, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_spectral_norm(n, "classifier", 1, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(n, 3, 5, 5), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(n, "features.0", ganfw_prune_fraction(1.0)),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("features.0") && msg_has("[0, 1)"));
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(n, "features.0", ganfw_prune_fraction(-0.1)),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(n, "features.0", ganfw_prune_count(109)),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("108"));
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(n, "features.1", ganfw_prune_fraction(0.5)),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("features.1") && msg_has("batchnorm2d") && msg_has("conv2d, conv_transpose2d"));
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(n, "feature.0", ganfw_prune_fraction(0.5)),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("did you mean 'features.0'"));
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(n, "classifier", ganfw_prune_fraction(0.5)),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("classifier") && msg_has("spectral"));
  CU_ASSERT_EQUAL(ganfw_prune_ln_structured(n, "features.0", ganfw_prune_fraction(0.5), 3, 0),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_prune_remove(n, "features.0"), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("no pruning mask"));
  /* nothing was installed by the failures */
  CU_ASSERT_PTR_NULL(ganfw_layer_mask(ganfw_prune_find_layer(n, "features.0")));
  /* amount 0: a mask of ones; the count is over what remains */
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(n, "features.0", ganfw_prune_fraction(0.0)),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(n, "features.0", ganfw_prune_count(100)), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(n, "features.0", ganfw_prune_count(9)),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("8 entries still unpruned"));
  ganfw_prune_sparsity sp;
  CU_ASSERT_EQUAL(ganfw_prune_layer_sparsity(n, "features.0", &sp), GANFW_OK);
  CU_ASSERT_EQUAL(sp.zeros, 100);
  CU_ASSERT_EQUAL(sp.total, 108);
  char report[1024];
  CU_ASSERT_EQUAL(ganfw_prune_report(n, report, sizeof report, &sp), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(report, "d.features.0: 100 of 108 weights zero"));
  ganfw_net_destroy(n);
  ganfw_ctx_destroy(ctx);
}

/* --- checkpoints -------------------------------------------------------------------------- */

static ganfw_net *small(ganfw_ctx *ctx, int64_t ch) {
  ganfw_net *n = ganfw_net_create(ctx, "classifier");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(n, "features.0", 3, ch, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(n, "features.1", ch, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(n, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(n, "fc", ch * 25, 3, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(n, 3, 5, 5), GANFW_OK);
  return n;
}

static void test_checkpoint_round_trip(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *a = small(ctx, 4);
  CU_ASSERT_EQUAL(ganfw_prune_l1_unstructured(a, "features.0", ganfw_prune_fraction(0.5)),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_prune_ln_structured(a, "fc", ganfw_prune_count(1), 2, 0), GANFW_OK);
  ganfw_ckpt_net cn = {.net = a};
  const ganfw_ckpt_meta meta = {.step = 1, .seed = 7};
  const char *file = path_in("pruned.safetensors");
  ganfw_status st = ganfw_checkpoint_save(file, &cn, 1, &meta);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(file, &f), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "classifier.features.0.weight_orig"));
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "classifier.features.0.weight_mask"));
  CU_ASSERT_PTR_NULL(ganfw_st_find(f, "classifier.features.0.weight"));
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "classifier.fc.weight_mask"));
  ganfw_st_close(f);

  /* into the unpruned model: weights only and a full load both install the masks */
  for (int full = 0; full < 2; full++) {
    ganfw_net *b = small(ctx, 4);
    ganfw_ckpt_net bn = {.net = b};
    CU_ASSERT_EQUAL(full ? ganfw_checkpoint_load(file, &bn, 1, NULL)
                         : ganfw_checkpoint_load_weights(file, &bn, 1, 0, NULL),
                    GANFW_OK);
    for (int k = 0; k < 2; k++) {
      const char *name = k ? "fc" : "features.0";
      ganfw_layer *la = ganfw_prune_find_layer(a, name), *lb = ganfw_prune_find_layer(b, name);
      CU_ASSERT_PTR_NOT_NULL_FATAL(ganfw_layer_mask(lb));
      CU_ASSERT(same_tensor(ganfw_layer_mask(la), ganfw_layer_mask(lb)));
      CU_ASSERT(same_tensor(la->param[0], lb->param[0]));
      CU_ASSERT_STRING_EQUAL(lb->param_name[0], la->param_name[0]);
    }
    /* remove: the plain weights, then saved as weight */
    CU_ASSERT_EQUAL(ganfw_prune_remove_all(b), GANFW_OK);
    ganfw_layer *lb = ganfw_prune_find_layer(b, "features.0");
    CU_ASSERT_PTR_NULL(ganfw_layer_mask(lb));
    CU_ASSERT_STRING_EQUAL(lb->param_name[0], "features.0.weight");
    ganfw_prune_sparsity sp;
    CU_ASSERT_EQUAL(ganfw_prune_layer_sparsity(b, "features.0", &sp), GANFW_OK);
    CU_ASSERT_EQUAL(sp.zeros, 54);
    ganfw_net_destroy(b);
  }

  /* the mask errors: a mask of other values, a wrong shape, a lone half */
  ganfw_layer *la = ganfw_prune_find_layer(a, "features.0");
  float *m = host_of(ganfw_layer_mask(la));
  m[3] = 0.5f;
  ganfw_tensor_from_host(ganfw_layer_mask(la), m, ganfw_layer_mask(la)->nbytes);
  gt_free(m);
  const char *bad = path_in("bad_mask.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(bad, &cn, 1, &meta), GANFW_OK);
  ganfw_net *b = small(ctx, 4);
  ganfw_ckpt_net bn = {.net = b};
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(bad, &bn, 1, 0, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("classifier.features.0.weight_mask") && msg_has(bad) && msg_has("0 and 1"));
  /* the failed load left the model as it was */
  CU_ASSERT_PTR_NULL(ganfw_layer_mask(ganfw_prune_find_layer(b, "features.0")));
  CU_ASSERT_STRING_EQUAL(ganfw_prune_find_layer(b, "features.0")->param_name[0],
                         "features.0.weight");
  ganfw_net_destroy(b);
  b = small(ctx, 2);
  bn.net = b;
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(file, &bn, 1, 0, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("weight_") && msg_has(file));
  ganfw_net_destroy(b);
  /* a state_dict with weight_orig and no weight_mask */
  ganfw_st_writer *w = ganfw_st_writer_create();
  float *orig = host_of(la->param[0]);
  ganfw_layer *lfc = ganfw_prune_find_layer(a, "fc");
  float *fc = host_of(lfc->param[0]), *bias = host_of(la->param[1]), *fcb = host_of(lfc->param[1]);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "features.0.weight_orig", GANFW_DTYPE_F32, 4,
                                      la->param[0]->shape, orig),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "fc.weight", GANFW_DTYPE_F32, 2, lfc->param[0]->shape, fc),
                  GANFW_OK);
  CU_ASSERT_EQUAL(
      ganfw_st_writer_add(w, "features.0.bias", GANFW_DTYPE_F32, 1, la->param[1]->shape, bias),
      GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "fc.bias", GANFW_DTYPE_F32, 1, lfc->param[1]->shape, fcb),
                  GANFW_OK);
  const char *lone = path_in("lone.safetensors");
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, lone), GANFW_OK);
  ganfw_st_writer_destroy(w);
  gt_free(orig);
  gt_free(fc);
  gt_free(bias);
  gt_free(fcb);
  b = small(ctx, 4);
  bn = (ganfw_ckpt_net){.net = b, .prefix = ""};
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(lone, &bn, 1, GANFW_CKPT_ALLOW_MISSING, NULL),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("features.0.weight_orig") && msg_has("without its weight_mask") &&
            msg_has(lone));
  ganfw_net_destroy(b);
  ganfw_net_destroy(a);
  ganfw_ctx_destroy(ctx);
}

/* A PyTorch state_dict saved after torch.nn.utils.prune (safetensors.torch) loads into the
 * unpruned model; skipped without torch and safetensors. */
static void test_torch_state_dict(void) {
  if (!gt_python_has("torch, numpy")) {
    printf("\n  skipped: /usr/bin/python3 has no torch");
    return;
  }
  const char *file = path_in("torch_pruned.safetensors");
  char cmd[2048];
  const char *src = getenv("GANFW_SOURCE_DIR");
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/prune_torch.py --state-dict %s",
           src ? src : ".", file);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *n = ganfw_net_create(ctx, "m");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(n, "0", 3, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(n, "1"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(n, "2", 100, 3, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(n, 3, 5, 5), GANFW_OK);
  ganfw_ckpt_net cn = {.net = n};
  ganfw_ckpt_report rep;
  ganfw_status st = ganfw_checkpoint_load_weights(file, &cn, 1, GANFW_CKPT_BARE_NAMES, &rep);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(rep.loaded, 5);
  ganfw_prune_sparsity sp;
  CU_ASSERT_EQUAL(ganfw_prune_layer_sparsity(n, "0", &sp), GANFW_OK);
  CU_ASSERT_EQUAL(sp.zeros, 54);
  CU_ASSERT(sp.masked);
  ganfw_net_destroy(n);
  ganfw_ctx_destroy(ctx);
}

/* --- the schedule --------------------------------------------------------------------------- */

static void test_schedule(void) {
  /* s_t = s_f + (s_i - s_f)(1 - (t - t0)/(end - t0))^3, t0 = 100, end = 500, s_i 0, s_f 0.8 */
  const double eps = 1e-12;
  CU_ASSERT_DOUBLE_EQUAL(ganfw_prune_schedule_target(100, 500, 0.0, 0.8, 100), 0.0, eps);
  CU_ASSERT_DOUBLE_EQUAL(ganfw_prune_schedule_target(100, 500, 0.0, 0.8, 200),
                         0.8 - 0.8 * 0.75 * 0.75 * 0.75, eps);
  CU_ASSERT_DOUBLE_EQUAL(ganfw_prune_schedule_target(100, 500, 0.0, 0.8, 300), 0.7, eps);
  CU_ASSERT_DOUBLE_EQUAL(ganfw_prune_schedule_target(100, 500, 0.0, 0.8, 500), 0.8, eps);
  CU_ASSERT_DOUBLE_EQUAL(ganfw_prune_schedule_target(100, 500, 0.2, 0.8, 50), 0.2, eps);
  CU_ASSERT_DOUBLE_EQUAL(ganfw_prune_schedule_target(100, 500, 0.2, 0.8, 900), 0.8, eps);
  CU_ASSERT_FALSE(ganfw_prune_schedule_due(100, 500, 100, 99));
  CU_ASSERT_TRUE(ganfw_prune_schedule_due(100, 500, 100, 100));
  CU_ASSERT_FALSE(ganfw_prune_schedule_due(100, 500, 100, 150));
  CU_ASSERT_TRUE(ganfw_prune_schedule_due(100, 500, 100, 400));
  CU_ASSERT_TRUE(ganfw_prune_schedule_due(100, 450, 100, 450)); /* end off the grid */
  CU_ASSERT_FALSE(ganfw_prune_schedule_due(100, 500, 100, 600));
}

/* --- prune: in a run -------------------------------------------------------------------- */

static void write_config(const char *name, const char *out_dir, const char *prune, int64_t steps,
                         const char *resume) {
  FILE *f = fopen(path_in(name), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s}\n"
          "model:\n"
          "  plugin: cnn\n"
          "  blocks:\n"
          "    - {channels: 8, pool: max}\n"
          "    - {channels: 16, pool: max}\n"
          "  linear: [32]\n"
          "optim: {plugin: adam, lr: 0.003}\n"
          "train: {batch_size: 16, max_steps: %lld, log_every: 0, checkpoint_every: 2%s%s}\n"
          "run: {out_dir: %s}\n"
          "%s",
          path_in("mnist"), (long long)steps, resume ? ", resume: " : "", resume ? resume : "",
          path_in(out_dir), prune);
  fclose(f);
}

static ganfw_status open_session(const char *config, ganfw_run **run, ganfw_session **s) {
  *s = NULL;
  ganfw_status st = ganfw_run_open_file(config, NULL, 0, run);
  if (st == GANFW_OK) st = ganfw_session_open(*run, 1, NULL, s);
  if (st == GANFW_OK) st = ganfw_config_check_unused((*run)->config);
  return st;
}

/* Trains `config`; *zeros and *total of the classifier's prunable weights after the run. */
static ganfw_status train(const char *config, int64_t *zeros, int64_t *total) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = open_session(config, &run, &s);
  if (st == GANFW_OK) st = ganfw_train(s);
  if (st != GANFW_OK) printf("\n  %s: %s", config, ganfw_error_message());
  if (st == GANFW_OK && zeros) {
    char report[4096];
    ganfw_prune_sparsity all;
    CU_ASSERT_EQUAL(ganfw_prune_report(s->classifier, report, sizeof report, &all), GANFW_OK);
    *zeros = all.zeros;
    *total = all.total;
  }
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

static void test_run_schedule_and_resume(void) {
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("mnist"), 0755), 0);
  CU_ASSERT_EQUAL_FATAL(gt_write_mnist(path_in("mnist"), 96, 16, 11), 0);
  const char *sched = "prune:\n"
                      "  method: global_unstructured\n"
                      "  amount: 0.6\n"
                      "  schedule: {start_step: 0, end_step: 4, every: 2, initial: 0.2}\n";
  write_config("sched.yaml", "sched", sched, 6, NULL);
  int64_t zeros = 0, total = 0;
  CU_ASSERT_EQUAL_FATAL(train(path_in("sched.yaml"), &zeros, &total), GANFW_OK);
  /* the last event (step 4) reached 60% of the prunable weights (Adam does not move masked
   * weights' effective values: they stay 0) */
  CU_ASSERT(total > 0);
  CU_ASSERT_EQUAL(zeros, (int64_t)nearbyint(0.6 * (double)total));
  /* the same run in two halves: resume at step 2 goes on with the schedule, bitwise */
  write_config("half.yaml", "half", sched, 2, NULL);
  CU_ASSERT_EQUAL_FATAL(train(path_in("half.yaml"), NULL, NULL), GANFW_OK);
  write_config("rest.yaml", "half", sched, 6, "latest");
  CU_ASSERT_EQUAL_FATAL(train(path_in("rest.yaml"), &zeros, &total), GANFW_OK);
  CU_ASSERT_EQUAL(zeros, (int64_t)nearbyint(0.6 * (double)total));
  gt_assert_same_checkpoint(path_in("sched/checkpoints/step_00000006.safetensors"),
                            path_in("half/checkpoints/step_00000006.safetensors"), NULL, 0);
  /* remove: the final checkpoint holds plain weights */
  const char *once = "prune: {method: l1_unstructured, amount: 0.5, layers: [features.0], "
                     "remove: true}\n";
  write_config("once.yaml", "once", once, 2, NULL);
  CU_ASSERT_EQUAL_FATAL(train(path_in("once.yaml"), NULL, NULL), GANFW_OK);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("once/checkpoints/step_00000002.safetensors"), &f),
                        GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "classifier.features.0.weight"));
  CU_ASSERT_PTR_NULL(ganfw_st_find(f, "classifier.features.0.weight_mask"));
  ganfw_st_close(f);
  /* and loads into the same config's model (ganfw sample), whose mask is all ones */
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  CU_ASSERT_EQUAL_FATAL(open_session(path_in("once.yaml"), &run, &s), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(ganfw_layer_mask(ganfw_prune_find_layer(s->classifier, "features.0")));
  ganfw_ckpt_net cn = {.net = s->classifier};
  ganfw_status st = ganfw_checkpoint_load_weights(
      path_in("once/checkpoints/step_00000002.safetensors"), &cn, 1, 0, NULL);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  ganfw_prune_sparsity sp;
  CU_ASSERT_EQUAL(ganfw_prune_layer_sparsity(s->classifier, "features.0", &sp), GANFW_OK);
  CU_ASSERT_EQUAL(sp.zeros, 36);
  CU_ASSERT_FALSE(sp.masked);
  ganfw_session_close(s);
  ganfw_run_close(run);
  /* config errors */
  write_config("typo.yaml", "typo", "prune: {amount: 0.5, metod: l1_unstructured}\n", 2, NULL);
  CU_ASSERT_EQUAL(open_session(path_in("typo.yaml"), &run, &s), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("metod") && msg_has("did you mean 'method'"));
  ganfw_session_close(s);
  ganfw_run_close(run);
  write_config("bn.yaml", "bn", "prune: {amount: 0.5, layers: [features.1]}\n", 2, NULL);
  CU_ASSERT_EQUAL(open_session(path_in("bn.yaml"), &run, &s), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("features.1") && msg_has("no weight to prune"));
  ganfw_session_close(s);
  ganfw_run_close(run);
  write_config("name.yaml", "name", "prune: {amount: 0.5, layers: [feature.0]}\n", 2, NULL);
  CU_ASSERT_NOT_EQUAL(open_session(path_in("name.yaml"), &run, &s), GANFW_OK);
  CU_ASSERT(msg_has("did you mean 'features.0'"));
  ganfw_session_close(s);
  ganfw_run_close(run);
  write_config("amount.yaml", "amount", "prune: {amount: 1.5}\n", 2, NULL);
  CU_ASSERT_EQUAL(open_session(path_in("amount.yaml"), &run, &s), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("prune.amount"));
  ganfw_session_close(s);
  ganfw_run_close(run);
}

/* The masks of every weight_mask tensor of a checkpoint: *differ the entries that are not
 * equal to those of `ref` (the same names and sizes), *n all entries. */
static void mask_diff(const char *path, const char *ref, int64_t *differ, int64_t *n) {
  ganfw_st_file *a = NULL, *b = NULL;
  *differ = *n = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &a), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(ref, &b), GANFW_OK);
  for (int64_t i = 0; i < ganfw_st_count(b); i++) {
    const ganfw_st_tensor *want = ganfw_st_at(b, i);
    if (!strstr(want->name, ".weight_mask")) continue;
    const ganfw_st_tensor *got = ganfw_st_find(a, want->name);
    CU_ASSERT_PTR_NOT_NULL(got);
    if (!got || got->numel != want->numel) continue;
    for (int64_t k = 0; k < want->numel; k++)
      *differ += ((const float *)got->data)[k] != ((const float *)want->data)[k];
    *n += want->numel;
  }
  ganfw_st_close(a);
  ganfw_st_close(b);
}

/* The schedule under the memory strategies that change how the step runs: accumulate (the
 * event sees the weights after the step's micro-batches) and step_in_backward (each
 * layer's optimizer steps inside backward). Both reach the sparsity the schedule asks for,
 * and their masks are those of the plain run: step_in_backward's exactly (the same
 * arithmetic), accumulate's but for entries near the threshold (BatchNorm takes each
 * micro-batch's statistics, so the weights differ a little; 1 in 20 at most, where masks
 * drawn apart would differ in about half). */
static void test_strategies(void) {
  const char *sched = "prune:\n"
                      "  method: global_unstructured\n"
                      "  amount: 0.6\n"
                      "  schedule: {start_step: 0, end_step: 4, every: 2, initial: 0.2}\n";
  char text[1024];
  const char *memory[2] = {"memory: [{plugin: accumulate, steps: 2}]\n",
                           "memory: [{plugin: step_in_backward}]\n"};
  const char *dirs[2] = {"sched_acc", "sched_sib"};
  const char *names[2] = {"sched_acc.yaml", "sched_sib.yaml"};
  for (int i = 0; i < 2; i++) {
    snprintf(text, sizeof text, "%s%s", sched, memory[i]);
    write_config(names[i], dirs[i], text, 6, NULL);
    int64_t zeros = 0, total = 0;
    CU_ASSERT_EQUAL_FATAL(train(path_in(names[i]), &zeros, &total), GANFW_OK);
    CU_ASSERT(total > 0);
    CU_ASSERT_EQUAL(zeros, (int64_t)nearbyint(0.6 * (double)total));
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints/step_00000006.safetensors", dirs[i]);
    int64_t differ = 0, n = 0;
    mask_diff(path_in(ckpt), path_in("sched/checkpoints/step_00000006.safetensors"), &differ, &n);
    printf("\n  %s: %lld of %lld mask entries differ from the plain run's", dirs[i],
           (long long)differ, (long long)n);
    CU_ASSERT(n == total);
    if (i == 0) {
      CU_ASSERT(differ <= n / 20);
    } else {
      CU_ASSERT_EQUAL(differ, 0);
    }
  }
}

/* A DC-GAN with prune: items naming the nets: the masks are where the items say, pruned
 * before the first step by slices. */
static void test_gan(void) {
  FILE *f = fopen(path_in("gan.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s, resize: 32}\n"
          "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
          "train: {batch_size: 8, max_steps: 2, log_every: 0, sample_every: 0,"
          " checkpoint_every: 2}\n"
          "run: {out_dir: %s}\n"
          "prune: {method: ln_structured, amount: 0.25, n: 1, dim: 0,\n"
          "        layers: [\"generator:main.3\", \"discriminator:main.2\"]}\n",
          path_in("mnist"), path_in("gan"));
  fclose(f);
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = open_session(path_in("gan.yaml"), &run, &s);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_train(s), GANFW_OK);
  int64_t kept, total, ks, ns;
  CU_ASSERT_EQUAL(ganfw_prune_layer_kept(s->generator, "main.3", 0, &kept, &total, &ks, &ns),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ns - ks, (int64_t)nearbyint(0.25 * (double)ns));
  CU_ASSERT_EQUAL(ganfw_prune_layer_kept(s->discriminator, "main.2", 0, &kept, &total, &ks, &ns),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ns - ks, (int64_t)nearbyint(0.25 * (double)ns));
  CU_ASSERT_PTR_NULL(ganfw_layer_mask(ganfw_prune_find_layer(s->generator, "main.0")));
  CU_ASSERT_PTR_NULL(ganfw_layer_mask(ganfw_prune_find_layer(s->discriminator, "main.0")));
  ganfw_session_close(s);
  ganfw_run_close(run);
}

/* The plan of a masked config equals its measured step, and counts the masks as params. */
static void test_plan(void) {
  write_config("plain_plan.yaml", "pp", "", 2, NULL);
  write_config("mask_plan.yaml", "mp", "prune: {method: ln_structured, amount: 0.25}\n", 2, NULL);
  ganfw_probe_result plain, plan, real;
  CU_ASSERT_EQUAL_FATAL(
      ganfw_plan_make(gt_config(path_in("plain_plan.yaml"), NULL, 0), 0, NULL, &plain), GANFW_OK);
  ganfw_status st = ganfw_plan_make(gt_config(path_in("mask_plan.yaml"), NULL, 0), 0, NULL, &plan);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  memset(&real, 0, sizeof real);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_plan_measure(gt_config(path_in("mask_plan.yaml"), NULL, 0), &plan, NULL, &real),
      GANFW_OK);
  printf("\n  plan %lld B, measured %lld B allocated; params %lld B (unpruned %lld B)",
         (long long)plan.peak_allocated, (long long)real.peak_allocated,
         (long long)plan.setup_category[GANFW_MEM_PARAM],
         (long long)plain.setup_category[GANFW_MEM_PARAM]);
  CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
  for (int32_t k = 0; k < plan.n_phases; k++)
    CU_ASSERT_EQUAL(plan.phase[k].allocated, real.phase[k].allocated);
  /* the masks: one f32 buffer the size of each conv and linear weight */
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  CU_ASSERT_EQUAL_FATAL(open_session(path_in("plain_plan.yaml"), &run, &s), GANFW_OK);
  int64_t masks = 0;
  for (int32_t i = 0; i < ganfw_net_layer_count(s->classifier); i++)
    if (ganfw_prune_layer_prunable(s->classifier, i))
      masks += (int64_t)ganfw_alloc_round_size(
          (size_t)ganfw_net_layer(s->classifier, i)->param[0]->nbytes);
  ganfw_session_close(s);
  ganfw_run_close(run);
  CU_ASSERT(masks > 0);
  CU_ASSERT_EQUAL(plan.setup_category[GANFW_MEM_PARAM] - plain.setup_category[GANFW_MEM_PARAM],
                  masks);
  ganfw_probe_result_free(&plain);
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
}

static CU_TestInfo tests[] = {{"against_torch", test_against_torch},
                              {"forward_backward_bitwise", test_forward_backward_bitwise},
                              {"double_backward", test_double_backward},
                              {"errors", test_errors},
                              {"checkpoint_round_trip", test_checkpoint_round_trip},
                              {"torch_state_dict", test_torch_state_dict},
                              {"schedule", test_schedule},
                              {"run_schedule_and_resume", test_run_schedule_and_resume},
                              {"strategies", test_strategies},
                              {"gan", test_gan},
                              {"plan", test_plan},
                              CU_TEST_INFO_NULL};

GT_MAIN("prune", tests)
