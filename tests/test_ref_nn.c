/* The CPU nn kernels against PyTorch 1.13 (tests/ref/gen_nn.py, references computed in f64
 * from the same f32 inputs): BatchNorm2d training (y, running stats, dx/dgamma/dbeta) and
 * eval at the DC-GAN shapes, the activations, max/avg pooling with padding, and the
 * BCE-with-logits / cross-entropy losses, forward and backward. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

/* The reference file, opened by each test (gt_ref_open records the failure when it is
 * missing) and closed at its end. */
static gt_ref *ref;

static const float *get(const char *name, const char *key, int64_t *numel, int64_t *shape,
                        int *ndim) {
  char full[128];
  snprintf(full, sizeof full, "%s_%s", name, key);
  return gt_ref_f32(ref, full, numel, shape, ndim);
}

static float *copy_of(const float *src, int64_t n) {
  float *p = gt_alloc((size_t)n * sizeof(float));
  memcpy(p, src, (size_t)n * sizeof(float));
  return p;
}

static void check(const char *what, const float *got, const float *want, int64_t n, double tol,
                  double floor) {
  double e = gt_check_close(what, got, want, n, tol, floor);
  printf("\n    %-40s max rel err %.2e (tol %.0e)", what, e, tol);
}

static void bn_case(const char *name, int affine) {
  int64_t n, C, shape[8];
  int ndim;
  const float *x = get(name, "x", &n, shape, &ndim);
  const float *dy = get(name, "dy", NULL, NULL, NULL);
  const float *y_want = get(name, "y", NULL, NULL, NULL);
  const float *dx_want = get(name, "dx", NULL, NULL, NULL);
  const float *rm_in = get(name, "rm_in", &C, NULL, NULL);
  const float *rv_in = get(name, "rv_in", NULL, NULL, NULL);
  const float *rm_want = get(name, "rm", NULL, NULL, NULL);
  const float *rv_want = get(name, "rv", NULL, NULL, NULL);
  const float *gamma = affine ? get(name, "gamma", NULL, NULL, NULL) : NULL;
  const float *beta = affine ? get(name, "beta", NULL, NULL, NULL) : NULL;
  if (!x || !dy || !y_want || !dx_want || !rm_in || !rv_in || !rm_want || !rv_want ||
      (affine && (!gamma || !beta)) || ndim != 4)
    return;
  const int64_t N = shape[0], HW = shape[2] * shape[3];
  CU_ASSERT_EQUAL(shape[1], C);
  float *y = gt_alloc((size_t)n * sizeof(float)), *dx = gt_alloc((size_t)n * sizeof(float));
  float *rm = copy_of(rm_in, C), *rv = copy_of(rv_in, C);
  float *mean = gt_alloc((size_t)C * sizeof(float)), *invstd = gt_alloc((size_t)C * sizeof(float));
  float *dg = gt_alloc((size_t)C * sizeof(float)), *db = gt_alloc((size_t)C * sizeof(float));
  char what[96];
  printf("\n    -- %s [%lld,%lld,%lld,%lld]%s", name, (long long)N, (long long)C,
         (long long)shape[2], (long long)shape[3], affine ? "" : " affine=False");

  ganfw_be_batchnorm2d_forward_train(cpu(), N, C, HW, x, gamma, beta, y, rm, rv, 0.1f, 1e-5f, mean,
                                     invstd);
  snprintf(what, sizeof what, "%s y", name);
  /* y = (x - mean) * scale + beta rounds at the size of its terms (~1), hence floor 0.1. */
  check(what, y, y_want, n, 1e-5, 0.1);
  snprintf(what, sizeof what, "%s running_mean", name);
  check(what, rm, rm_want, C, 1e-5, 1e-3);
  snprintf(what, sizeof what, "%s running_var", name);
  check(what, rv, rv_want, C, 1e-5, 1e-3);

  ganfw_be_batchnorm2d_backward(cpu(), N, C, HW, x, dy, gamma, mean, invstd, dx, affine ? dg : NULL,
                                affine ? db : NULL, 0);
  snprintf(what, sizeof what, "%s dx", name);
  check(what, dx, dx_want, n, 1e-5, 1e-2);
  if (affine) {
    /* dgamma and dbeta are sums of M = N*HW terms of size ~1 that mostly cancel: the error
     * is absolute (floor 1). PyTorch's own f32 backward is 1e-5 .. 4.5e-5 away from f64 at
     * these shapes. */
    snprintf(what, sizeof what, "%s dgamma", name);
    check(what, dg, get(name, "dgamma", NULL, NULL, NULL), C, 3e-5, 1.0);
    snprintf(what, sizeof what, "%s dbeta", name);
    check(what, db, get(name, "dbeta", NULL, NULL, NULL), C, 3e-5, 1.0);
  }

  /* Eval mode with the running statistics PyTorch started from (small cases only). */
  char key[128];
  snprintf(key, sizeof key, "%s_y_eval", name);
  if (n <= 4096) {
    const float *ye_want = gt_ref_f32(ref, key, NULL, NULL, NULL);
    ganfw_be_batchnorm2d_forward_eval(cpu(), N, C, HW, x, gamma, beta, y, rm_in, rv_in, 1e-5f);
    snprintf(what, sizeof what, "%s y (eval)", name);
    if (ye_want) check(what, y, ye_want, n, 1e-5, 1e-2);
  }
  gt_free(y), gt_free(dx), gt_free(rm), gt_free(rv), gt_free(mean), gt_free(invstd);
  gt_free(dg), gt_free(db);
}

static void test_batchnorm(void) {
  if (!(ref = gt_ref_open("nn"))) return;
  bn_case("bn_tiny", 1);
  bn_case("bn_d128", 1);
  bn_case("bn_d256", 1);
  bn_case("bn_g64", 1);
  bn_case("bn_odd", 0);
  gt_ref_close(ref);
}

static void test_activations(void) {
  if (!(ref = gt_ref_open("nn"))) return;
  int64_t n;
  const float *x = gt_ref_f32(ref, "act_x", &n, NULL, NULL);
  const float *dy = gt_ref_f32(ref, "act_dy", NULL, NULL, NULL);
  if (!x || !dy) {
    gt_ref_close(ref);
    return;
  }
  const struct {
    const char *name;
    int32_t kind;
  } acts[] = {{"relu", GANFW_ACT_RELU},
              {"leaky_relu", GANFW_ACT_LEAKY_RELU},
              {"tanh", GANFW_ACT_TANH},
              {"sigmoid", GANFW_ACT_SIGMOID}};
  float *y = gt_alloc((size_t)n * sizeof(float)), *dx = gt_alloc((size_t)n * sizeof(float));
  for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++) {
    char key[64];
    snprintf(key, sizeof key, "act_%s_y", acts[k].name);
    const float *y_want = gt_ref_f32(ref, key, NULL, NULL, NULL);
    snprintf(key, sizeof key, "act_%s_dx", acts[k].name);
    const float *dx_want = gt_ref_f32(ref, key, NULL, NULL, NULL);
    if (!y_want || !dx_want) continue;
    ganfw_be_act_forward(cpu(), acts[k].kind, 0.2f, n, x, y);
    ganfw_be_act_backward(cpu(), acts[k].kind, 0.2f, n, y, dy, dx);
    char what[64];
    snprintf(what, sizeof what, "%s y", acts[k].name);
    check(what, y, y_want, n, 1e-6, 1e-6);
    /* The backward is computed from the f32 output y (as PyTorch does), so tanh' and
     * sigmoid' inherit its rounding: near saturation 1 - y^2 carries an absolute error of
     * ~1e-7, hence the floor of 1e-2 (|dy| is about 1); PyTorch's own f32 backward is 1.7e-5
     * (tanh) and 1.4e-5 (sigmoid) away from f64 on such data. */
    snprintf(what, sizeof what, "%s dx", acts[k].name);
    check(what, dx, dx_want, n, 3e-5, 1e-2);
  }
  gt_free(y), gt_free(dx);
  gt_ref_close(ref);
}

static void pool_case(const char *name, int64_t R, int64_t S, int64_t sh, int64_t sw, int64_t ph,
                      int64_t pw) {
  int64_t nx, ny, shape[8], yshape[8];
  int ndim, yndim;
  const float *x = get(name, "x", &nx, shape, &ndim);
  const float *dy = get(name, "dy", &ny, yshape, &yndim);
  if (!x || !dy) return;
  ganfw_pool2d_shape s = {shape[0], shape[1], shape[2], shape[3], R, S, sh, sw, ph, pw, 0, 0};
  CU_ASSERT_EQUAL_FATAL(ganfw_pool2d_shape_init(&s), GANFW_OK);
  CU_ASSERT_EQUAL(s.P, yshape[2]);
  CU_ASSERT_EQUAL(s.Q, yshape[3]);
  if (s.P != yshape[2] || s.Q != yshape[3]) return;
  float *y = gt_alloc((size_t)ny * sizeof(float)), *dx = gt_alloc((size_t)nx * sizeof(float));
  int32_t *am = gt_alloc((size_t)ny * sizeof(int32_t));
  char what[96];

  ganfw_be_maxpool2d_forward(cpu(), &s, x, y, am);
  ganfw_be_maxpool2d_backward(cpu(), &s, dy, am, dx);
  snprintf(what, sizeof what, "%s max y", name);
  check(what, y, get(name, "max_y", NULL, NULL, NULL), ny, 0.0, 1e-6);
  snprintf(what, sizeof what, "%s max dx", name);
  check(what, dx, get(name, "max_dx", NULL, NULL, NULL), nx, 1e-6, 1e-3);
  char key[96];
  snprintf(key, sizeof key, "%s_max_idx", name);
  const int32_t *idx = gt_ref_i32(ref, key, NULL);
  if (idx) CU_ASSERT(memcmp(idx, am, (size_t)ny * sizeof(int32_t)) == 0);

  ganfw_be_avgpool2d_forward(cpu(), &s, x, y);
  ganfw_be_avgpool2d_backward(cpu(), &s, dy, dx);
  snprintf(what, sizeof what, "%s avg y", name);
  check(what, y, get(name, "avg_y", NULL, NULL, NULL), ny, 1e-5, 1e-2);
  snprintf(what, sizeof what, "%s avg dx", name);
  check(what, dx, get(name, "avg_dx", NULL, NULL, NULL), nx, 1e-5, 1e-2);
  gt_free(y), gt_free(dx), gt_free(am);
}

static void test_pooling(void) {
  if (!(ref = gt_ref_open("nn"))) return;
  pool_case("pool_k3s2p1", 3, 3, 2, 2, 1, 1);
  pool_case("pool_k2s2", 2, 2, 2, 2, 0, 0);
  pool_case("pool_k32s13p11", 3, 2, 1, 3, 1, 1);
  gt_ref_close(ref);
}

static void test_losses(void) {
  if (!(ref = gt_ref_open("nn"))) return;
  const float dloss = (float)gt_ref_scalar(ref, "loss_dloss");
  const char *bce[] = {"bce_smooth", "bce_zero", "bce_soft", "bce_extreme"};
  for (size_t k = 0; k < 4; k++) {
    int64_t n;
    const float *x = get(bce[k], "x", &n, NULL, NULL);
    const float *t = get(bce[k], "t", NULL, NULL, NULL);
    const float *loss_want = get(bce[k], "loss", NULL, NULL, NULL);
    const float *dx_want = get(bce[k], "dx", NULL, NULL, NULL);
    if (!x || !t || !loss_want || !dx_want) continue;
    float loss, *dx = gt_alloc((size_t)n * sizeof(float));
    ganfw_be_bce_logits_forward(cpu(), n, x, t, &loss);
    ganfw_be_bce_logits_backward(cpu(), n, x, t, dloss, dx);
    char what[64];
    CU_ASSERT(isfinite(loss));
    snprintf(what, sizeof what, "%s loss", bce[k]);
    check(what, &loss, loss_want, 1, 1e-6, 1e-6);
    snprintf(what, sizeof what, "%s dx", bce[k]);
    check(what, dx, dx_want, n, 1e-6, 1e-6);
    gt_free(dx);
  }
  const char *ce[] = {"ce_mnist", "ce_extreme"};
  for (size_t k = 0; k < 2; k++) {
    int64_t n, N, shape[8];
    int ndim;
    const float *x = get(ce[k], "x", &n, shape, &ndim);
    char key[64];
    snprintf(key, sizeof key, "%s_labels", ce[k]);
    const int32_t *labels = gt_ref_i32(ref, key, &N);
    const float *loss_want = get(ce[k], "loss", NULL, NULL, NULL);
    const float *dx_want = get(ce[k], "dx", NULL, NULL, NULL);
    if (!x || !labels || !loss_want || !dx_want || ndim != 2) continue;
    float loss, *dx = gt_alloc((size_t)n * sizeof(float));
    ganfw_be_softmax_xent_forward(cpu(), N, shape[1], x, labels, 0.0f, &loss);
    ganfw_be_softmax_xent_backward(cpu(), N, shape[1], x, labels, 0.0f, dloss, dx);
    char what[64];
    CU_ASSERT(isfinite(loss));
    snprintf(what, sizeof what, "%s loss", ce[k]);
    check(what, &loss, loss_want, 1, 1e-6, 1e-6);
    snprintf(what, sizeof what, "%s dx", ce[k]);
    check(what, dx, dx_want, n, 1e-6, 1e-6);
    /* label smoothing 0.1 and 0.3: F.cross_entropy(label_smoothing=eps) */
    for (int tenths = 1; tenths <= 3; tenths += 2) {
      char name[32];
      snprintf(name, sizeof name, "%.16s_smooth%d", ce[k], tenths);
      const float *sl_want = get(name, "loss", NULL, NULL, NULL);
      const float *sdx_want = get(name, "dx", NULL, NULL, NULL);
      CU_ASSERT_PTR_NOT_NULL_FATAL(sl_want);
      CU_ASSERT_PTR_NOT_NULL_FATAL(sdx_want);
      ganfw_be_softmax_xent_forward(cpu(), N, shape[1], x, labels, tenths / 10.0, &loss);
      ganfw_be_softmax_xent_backward(cpu(), N, shape[1], x, labels, tenths / 10.0, dloss, dx);
      CU_ASSERT(fabsf(loss - loss_want[0]) > 1e-3f); /* smoothing changed the loss */
      snprintf(what, sizeof what, "%s loss", name);
      check(what, &loss, sl_want, 1, 1e-6, 1e-6);
      snprintf(what, sizeof what, "%s dx", name);
      check(what, dx, sdx_want, n, 1e-6, 1e-6);
    }
    gt_free(dx);
  }
  gt_ref_close(ref);
}

static CU_TestInfo tests[] = {{"batchnorm", test_batchnorm},
                              {"activations", test_activations},
                              {"pooling", test_pooling},
                              {"losses", test_losses},
                              CU_TEST_INFO_NULL};

GT_MAIN("ref_nn", tests)
