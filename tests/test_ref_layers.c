/* The single-input layers of issue 12 against PyTorch 1.13 (tests/ref/gen_layers.py,
 * references computed in f64 from the same f32 inputs): upsample (nearest, bilinear),
 * global_avg_pool, groupnorm, instancenorm2d and layernorm, each built as a one-layer net
 * through the host table, forward and backward on the CPU: output, input gradient and
 * parameter gradients within 1e-5 relative. The same nets in f16 and bf16 against f32
 * within the amp tests' tolerances, and the errors bad arguments and shapes end with. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/ctx.h"
#include "base/error.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "testutil.h"

static gt_ref *ref;
static const ganfw_host *host;

/* Appends the layer under test, named "layer", to net; arg is the case's. */
typedef ganfw_status (*add_fn)(ganfw_net *net, const void *arg);

typedef struct layer_case {
  const char *name; /* the reference's key prefix */
  add_fn add;
  const void *arg;
  int affine;
} layer_case;

static ganfw_status add_nearest(ganfw_net *net, const void *arg) {
  (void)arg;
  return host->net_upsample(net, "layer", 2, GANFW_UPSAMPLE_NEAREST);
}

static ganfw_status add_bilinear(ganfw_net *net, const void *arg) {
  (void)arg;
  return host->net_upsample(net, "layer", 2, GANFW_UPSAMPLE_BILINEAR);
}

static ganfw_status add_gap(ganfw_net *net, const void *arg) {
  (void)arg;
  return host->net_global_avg_pool(net, "layer");
}

typedef struct norm_arg {
  int64_t groups, channels;
  float eps;
  int32_t affine;
  int32_t ndim;
  int64_t shape[3];
} norm_arg;

static ganfw_status add_groupnorm(ganfw_net *net, const void *arg) {
  const norm_arg *a = arg;
  return host->net_groupnorm(net, "layer", a->groups, a->channels, a->eps, a->affine);
}

static ganfw_status add_instancenorm(ganfw_net *net, const void *arg) {
  const norm_arg *a = arg;
  return host->net_instancenorm2d(net, "layer", a->channels, 1e-5f, a->affine);
}

static ganfw_status add_layernorm(ganfw_net *net, const void *arg) {
  const norm_arg *a = arg;
  return host->net_layernorm(net, "layer", a->ndim, a->shape, 1e-5f, a->affine);
}

static ganfw_ctx *new_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 5};
  ganfw_ctx *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c), GANFW_OK);
  return c;
}

static ganfw_tensor *upload(ganfw_ctx *c, const float *data, int ndim, const int64_t *shape) {
  ganfw_tensor *t = ganfw_tensor_create(c, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_DATA, "in");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(t, data, t->nbytes), GANFW_OK);
  return t;
}

/* One run of a case's net in `dtype`: what it handed out. */
typedef struct run_out {
  ganfw_ctx *ctx;
  ganfw_net *net;
  ganfw_tensor *y, *dx;
} run_out;

static void run_free(run_out *r) {
  ganfw_tensor_destroy(r->y);
  ganfw_tensor_destroy(r->dx);
  ganfw_net_destroy(r->net);
  ganfw_ctx_destroy(r->ctx);
  memset(r, 0, sizeof *r);
}

static void param(ganfw_net *net, int64_t i, ganfw_param_info *p) {
  p->struct_size = sizeof *p;
  CU_ASSERT_EQUAL_FATAL(host->net_param_info(net, i, p), GANFW_OK);
}

/* Builds the case's net for x of shape[0..ndim) (a [N,F] input goes in as [N,F,1,1] and is
 * flattened first), loads its parameters from the reference, runs forward and backward. */
static int run_case(const layer_case *lc, int32_t dtype, run_out *r) {
  char key[96];
  int64_t shape[8];
  int ndim;
  snprintf(key, sizeof key, "%s_x", lc->name);
  const float *x = gt_ref_f32(ref, key, NULL, shape, &ndim);
  snprintf(key, sizeof key, "%s_dy", lc->name);
  int64_t yshape[8];
  int yndim;
  const float *dy = gt_ref_f32(ref, key, NULL, yshape, &yndim);
  if (!x || !dy) return 0;
  r->ctx = new_ctx();
  r->net = host->net_create(r->ctx, "net");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r->net);
  const int flat = ndim == 2;
  if (flat) CU_ASSERT_EQUAL_FATAL(host->net_flatten(r->net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(lc->add(r->net, lc->arg), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(r->net, shape[1], flat ? 1 : shape[2], flat ? 1 : shape[3]),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(r->net, dtype), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_param_count(r->net), lc->affine ? 2 : 0);
  for (int64_t i = 0; i < host->net_param_count(r->net); i++) {
    ganfw_param_info p;
    param(r->net, i, &p);
    snprintf(key, sizeof key, "%s_%s", lc->name, i == 0 ? "weight" : "bias");
    CU_ASSERT_STRING_EQUAL(p.name, i == 0 ? "layer.weight" : "layer.bias");
    int64_t n;
    const float *v = gt_ref_f32(ref, key, &n, NULL, NULL);
    CU_ASSERT_FATAL(v && n == p.value->numel);
    CU_ASSERT_EQUAL(ganfw_tensor_from_host(p.value, v, p.value->nbytes), GANFW_OK);
  }
  const int64_t xs[4] = {shape[0], shape[1], flat ? 1 : shape[2], flat ? 1 : shape[3]};
  /* in the compute dtype, as the layers before and after it would hand them over */
  ganfw_tensor *x32 = upload(r->ctx, x, 4, xs), *dy32 = upload(r->ctx, dy, yndim, yshape);
  ganfw_tensor *xt = ganfw_tensor_as_dtype(x32, dtype, GANFW_MEM_DATA);
  ganfw_tensor *dyt = ganfw_tensor_as_dtype(dy32, dtype, GANFW_MEM_DATA);
  CU_ASSERT_FATAL(xt && dyt);
  ganfw_tensor_destroy(x32);
  ganfw_tensor_destroy(dy32);
  ganfw_tape *tape = ganfw_tape_create(r->net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(r->net, xt, tape, &r->y), GANFW_OK);
  CU_ASSERT_EQUAL(r->y->ndim, yndim);
  CU_ASSERT(memcmp(r->y->shape, yshape, (size_t)yndim * sizeof yshape[0]) == 0);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(r->net, tape, dyt, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &r->dx),
      GANFW_OK);
  CU_ASSERT_EQUAL(r->y->dtype, dtype);
  CU_ASSERT_EQUAL(r->dx->dtype, dtype);
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(xt);
  ganfw_tensor_destroy(dyt);
  return 1;
}

static void check(const char *what, const float *got, const float *want, int64_t n, double tol,
                  double floor) {
  double e = gt_check_close(what, got, want, n, tol, floor);
  printf("\n    %-36s max rel err %.2e (tol %.0e)", what, e, tol);
}

/* f32 against PyTorch; then f16 and bf16 against f32. */
static void check_case(const layer_case *lc) {
  run_out r32 = {0};
  if (!run_case(lc, GANFW_DTYPE_F32, &r32)) return;
  char key[96], what[96];
  const char *outs[2] = {"y", "dx"};
  ganfw_tensor *got[2] = {r32.y, r32.dx};
  for (int k = 0; k < 2; k++) {
    int64_t n;
    snprintf(key, sizeof key, "%s_%s", lc->name, outs[k]);
    const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
    CU_ASSERT_FATAL(want && n == got[k]->numel);
    snprintf(what, sizeof what, "%s %s", lc->name, outs[k]);
    /* normalised values are O(1); a floor of 1e-2 keeps the check relative elsewhere */
    check(what, got[k]->data, want, n, 1e-5, 1e-2);
  }
  for (int64_t i = 0; i < host->net_param_count(r32.net); i++) {
    ganfw_param_info p;
    param(r32.net, i, &p);
    int64_t n;
    snprintf(key, sizeof key, "%s_d%s", lc->name, i == 0 ? "weight" : "bias");
    const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
    CU_ASSERT_FATAL(want && n == p.grad->numel);
    snprintf(what, sizeof what, "%s d%s", lc->name, i == 0 ? "weight" : "bias");
    /* sums of N*HW terms of size ~1: their error is absolute, hence the floor of 1 */
    check(what, p.grad->data, want, n, 1e-5, 1.0);
  }
  const int32_t dtypes[2] = {GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  const double tols[2] = {5e-3, 3e-2}; /* tests/test_amp.c's executor tolerances */
  for (int k = 0; k < 2; k++) {
    run_out r16 = {0};
    if (!run_case(lc, dtypes[k], &r16)) break;
    double ey = gt_tensor_norm_rel(r16.y, r32.y), edx = gt_tensor_norm_rel(r16.dx, r32.dx);
    double edw = 0.0;
    for (int64_t i = 0; i < host->net_param_count(r32.net); i++) {
      ganfw_param_info a, b;
      param(r32.net, i, &a);
      param(r16.net, i, &b);
      CU_ASSERT_EQUAL(b.grad->dtype, GANFW_DTYPE_F32);
      edw = fmax(edw, gt_tensor_norm_rel(b.grad, a.grad));
    }
    printf("\n    %-36s y %.1e, dx %.1e, dparams %.1e (tol %.0e)", lc->name, ey, edx, edw, tols[k]);
    printf(" %s", k == 0 ? "f16" : "bf16");
    CU_ASSERT(ey < tols[k]);
    CU_ASSERT(edx < tols[k]);
    CU_ASSERT(edw < tols[k]);
    CU_ASSERT(ey > 0.0); /* it did round to 16 bits */
    CU_ASSERT(edw > 0.0 || !lc->affine);
    run_free(&r16);
  }
  run_free(&r32);
}

static void run_cases(const layer_case *cases, size_t n) {
  if (!(ref = gt_ref_open("layers"))) return;
  host = ganfw_host_table();
  for (size_t i = 0; i < n; i++) check_case(&cases[i]);
  gt_ref_close(ref);
}

static void test_upsample(void) {
  const layer_case cases[] = {
      {"up_nearest", add_nearest, NULL, 0},
      {"up_bilinear", add_bilinear, NULL, 0},
      {"up_bilinear_1x3", add_bilinear, NULL, 0},
      {"up_bilinear_big", add_bilinear, NULL, 0},
  };
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_global_avg_pool(void) {
  const layer_case cases[] = {
      {"gap", add_gap, NULL, 0},
      {"gap_1x1", add_gap, NULL, 0},
      {"gap_big", add_gap, NULL, 0},
  };
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_groupnorm(void) {
  static const norm_arg g3 = {.groups = 3, .channels = 6, .eps = 1e-5f, .affine = 1};
  static const norm_arg g1 = {.groups = 1, .channels = 4, .eps = 1e-5f, .affine = 1};
  static const norm_arg gc = {.groups = 5, .channels = 5, .eps = 1e-3f, .affine = 0};
  static const norm_arg g2d = {.groups = 2, .channels = 8, .eps = 1e-5f, .affine = 1};
  static const norm_arg big = {.groups = 8, .channels = 32, .eps = 1e-5f, .affine = 1};
  const layer_case cases[] = {
      {"gn_g3", add_groupnorm, &g3, 1},   {"gn_g1", add_groupnorm, &g1, 1},
      {"gn_gc", add_groupnorm, &gc, 0},   {"gn_2d", add_groupnorm, &g2d, 1},
      {"gn_big", add_groupnorm, &big, 1},
  };
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_instancenorm2d(void) {
  static const norm_arg plain = {.channels = 3}, affine = {.channels = 4, .affine = 1};
  static const norm_arg tiny = {.channels = 2, .affine = 1};
  const layer_case cases[] = {
      {"in_plain", add_instancenorm, &plain, 0},
      {"in_affine", add_instancenorm, &affine, 1},
      {"in_1x2", add_instancenorm, &tiny, 1},
  };
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_layernorm(void) {
  static const norm_arg chw = {.ndim = 3, .shape = {4, 5, 5}, .affine = 1};
  static const norm_arg f = {.ndim = 1, .shape = {10}, .affine = 1};
  static const norm_arg plain = {.ndim = 1, .shape = {7}, .affine = 0};
  static const norm_arg big = {.ndim = 3, .shape = {64, 8, 8}, .affine = 1};
  const layer_case cases[] = {
      {"ln_chw", add_layernorm, &chw, 1},
      {"ln_f", add_layernorm, &f, 1},
      {"ln_f_plain", add_layernorm, &plain, 0},
      {"ln_big", add_layernorm, &big, 1},
  };
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* The parameters are named and shaped as PyTorch's state_dict has them. */
static void test_param_shapes(void) {
  host = ganfw_host_table();
  ganfw_ctx *c = new_ctx();
  ganfw_net *net = host->net_create(c, "d");
  const int64_t ln[3] = {8, 4, 4};
  CU_ASSERT_EQUAL(host->net_groupnorm(net, "gn", 2, 8, 1e-5f, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_instancenorm2d(net, "in", 8, 1e-5f, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_layernorm(net, "ln", 3, ln, 1e-5f, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_instancenorm2d(net, "in2", 8, 1e-5f, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_upsample(net, "up", 2, GANFW_UPSAMPLE_BILINEAR), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_global_avg_pool(net, "pool"), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_flatten(net, "flat"), GANFW_OK);
  const int64_t f[1] = {8};
  CU_ASSERT_EQUAL(host->net_layernorm(net, "ln_f", 1, f, 1e-5f, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, 8, 4, 4), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_param_count(net), 8);
  const char *names[8] = {"gn.weight", "gn.bias", "in.weight",   "in.bias",
                          "ln.weight", "ln.bias", "ln_f.weight", "ln_f.bias"};
  const char *types[8] = {"groupnorm", "groupnorm", "instancenorm2d", "instancenorm2d",
                          "layernorm", "layernorm", "layernorm",      "layernorm"};
  for (int64_t i = 0; i < 8; i++) {
    ganfw_param_info p;
    param(net, i, &p);
    CU_ASSERT_STRING_EQUAL(p.name, names[i]);
    CU_ASSERT_STRING_EQUAL(p.layer_type, types[i]);
    const int32_t want_ndim = i == 4 || i == 5 ? 3 : 1;
    CU_ASSERT_EQUAL(p.value->ndim, want_ndim);
    CU_ASSERT_EQUAL(p.value->numel, i == 4 || i == 5 ? 128 : 8);
    float v[128];
    CU_ASSERT_EQUAL(ganfw_tensor_to_host(p.value, v, p.value->nbytes), GANFW_OK);
    CU_ASSERT_EQUAL(v[0], i % 2 == 0 ? 1.0f : 0.0f); /* ones and zeros, as PyTorch */
  }
  int64_t out[4];
  int32_t nd;
  ganfw_net_output_shape(net, 3, out, &nd);
  CU_ASSERT_EQUAL(nd, 2);
  CU_ASSERT(out[0] == 3 && out[1] == 8);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* Bad arguments and shapes: refused with one message naming the net, the layer and what
 * to change. */
static void expect_error(ganfw_status st, const char *part1, const char *part2) {
  CU_ASSERT_EQUAL(st, GANFW_ERR_INVALID_ARG);
  const char *msg = ganfw_error_message();
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, part1));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, part2));
  if (!strstr(msg, part1) || !strstr(msg, part2)) printf("\n    message: %s", msg);
}

static void test_errors(void) {
  host = ganfw_host_table();
  ganfw_ctx *c = new_ctx();
  ganfw_net *net = host->net_create(c, "d");
  const int64_t ln_bad[3] = {8, 0, 4}, ln4[3] = {8, 4, 5};
  expect_error(host->net_upsample(net, "u", 3, GANFW_UPSAMPLE_NEAREST), "layer u", "scale 2");
  expect_error(host->net_upsample(net, "u", 2, 7), "layer u", "mode 7");
  expect_error(host->net_groupnorm(net, "g", 4, 6, 1e-5f, 1), "layer g", "divides the channels");
  expect_error(host->net_groupnorm(net, "g", 0, 6, 1e-5f, 1), "layer g", "groups");
  expect_error(host->net_groupnorm(net, "g", 2, 6, 0.0f, 1), "layer g", "eps");
  expect_error(host->net_instancenorm2d(net, "i", 4, -1.0f, 0), "layer i", "eps");
  expect_error(host->net_instancenorm2d(net, "i", 0, 1e-5f, 0), "layer i", "channels");
  expect_error(host->net_layernorm(net, "l", 4, ln4, 1e-5f, 1), "layer l", "1 to 3 dims");
  expect_error(host->net_layernorm(net, "l", 3, NULL, 1e-5f, 1), "layer l", "no shape");
  expect_error(host->net_layernorm(net, "l", 3, ln_bad, 1e-5f, 1), "layer l", "positive");
  CU_ASSERT_EQUAL(host->net_layer_count(net), 0);
  ganfw_net_destroy(net);
  /* shapes that do not fit, found at net_build */
  struct {
    const char *what;
    int32_t kind;
    const char *part;
  } bad[] = {
      {"groupnorm of 6 channels on 8", 0, "expects [N,6,H,W] or [N,6]"},
      {"instancenorm2d on 1x1", 1, "more than one value per channel"},
      {"layernorm [8,4,5] on [8,4,4]", 2,
       "samples of shape [8,4,5], gets samples of shape "
       "[8,4,4]"},
      {"upsample on [N,F]", 3, "expects [N,C,H,W]"},
      {"global_avg_pool on [N,F]", 4, "expects [N,C,H,W]"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    net = host->net_create(c, "d");
    int64_t h = 4;
    ganfw_status st = GANFW_OK;
    switch (bad[k].kind) {
    case 0:
      st = host->net_groupnorm(net, "x", 2, 6, 1e-5f, 1);
      break;
    case 1:
      st = host->net_instancenorm2d(net, "x", 8, 1e-5f, 0), h = 1;
      break;
    case 2:
      st = host->net_layernorm(net, "x", 3, ln4, 1e-5f, 1);
      break;
    case 3:
    case 4:
      st = host->net_flatten(net, "f");
      if (st == GANFW_OK)
        st = bad[k].kind == 3 ? host->net_upsample(net, "x", 2, 0)
                              : host->net_global_avg_pool(net, "x");
      break;
    }
    CU_ASSERT_EQUAL(st, GANFW_OK);
    printf("\n    %s:", bad[k].what);
    expect_error(host->net_build(net, 8, h, h), "layer d.x", bad[k].part);
    printf(" %s", ganfw_error_message());
    ganfw_net_destroy(net);
  }
  ganfw_ctx_destroy(c);
}

static CU_TestInfo tests[] = {{"upsample", test_upsample},
                              {"global_avg_pool", test_global_avg_pool},
                              {"groupnorm", test_groupnorm},
                              {"instancenorm2d", test_instancenorm2d},
                              {"layernorm", test_layernorm},
                              {"parameters named and shaped as PyTorch's", test_param_shapes},
                              {"bad arguments and shapes", test_errors},
                              CU_TEST_INFO_NULL};

GT_MAIN("ref_layers", tests)
