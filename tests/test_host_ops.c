/* The host's tensor math (ganfw/host.h, ABI 1.3: tensor_add ... tensor_channel_affine)
 * through the host table on the CPU backend, against PyTorch 1.13
 * (tests/ref/gen_host_ops.py): element-wise ops bit for bit where IEEE arithmetic fixes the
 * result, exp/log/pow within a few ulp; broadcasting in every arrangement the generator
 * writes; sums and means over dims (keepdim and not) within one f32 rounding of the f64
 * result; the per-channel affine. Then: in-place outputs, the shape and dtype errors (each
 * naming the tensors), results independent of the thread count, the ops on the meta backend
 * (planning: no memory touched), and a Lion optimizer step written with these ops against
 * Lion's formula. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "ganfw/ganfw.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"

static const ganfw_host *H;

static ganfw_ctx *make_ctx(int threads, int meta) {
  ganfw_ctx_options opt = {
      .device_type = GANFW_DEVICE_CPU, .threads = threads, .seed = 3, .meta = meta};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  return ctx;
}

static ganfw_tensor *make(ganfw_ctx *ctx, int32_t ndim, const int64_t *shape, const char *name) {
  ganfw_tensor *t = H->tensor_create(ctx, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_OTHER, name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  return t;
}

/* A tensor holding the reference values of `key`, in its shape. */
static ganfw_tensor *from_ref(ganfw_ctx *ctx, gt_ref *ref, const char *key) {
  int64_t n = 0, shape[8] = {0};
  int nd = 0;
  const float *v = gt_ref_f32(ref, key, &n, shape, &nd);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  ganfw_tensor *t = make(ctx, nd, shape, key);
  CU_ASSERT_EQUAL_FATAL(H->tensor_from_host(t, v, n * 4), GANFW_OK);
  return t;
}

/* The tensor's values, malloc'ed. */
static float *values(const ganfw_tensor *t) {
  float *v = malloc((size_t)t->nbytes);
  CU_ASSERT_FATAL(v && H->tensor_to_host(t, v, t->nbytes) == GANFW_OK);
  return v;
}

/* Compares t with the reference `key`: tol 0 asks for the same bits (NaN matches NaN), else
 * max relative error <= tol with a floor of 1e-6. The element counts must agree. */
static void expect(const char *what, const ganfw_tensor *t, gt_ref *ref, const char *key,
                   double tol) {
  int64_t n = 0;
  const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_EQUAL_FATAL(n, t->numel);
  float *got = values(t);
  if (tol == 0) {
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++) {
      if (isnan(got[i]) && isnan(want[i])) continue;
      if (memcmp(&got[i], &want[i], 4) != 0 && diff++ < 3)
        printf("\n    %s[%lld]: got %.9g, torch %.9g", what, (long long)i, got[i], want[i]);
    }
    if (diff)
      printf("\n    %s: %lld of %lld differ in their bits", what, (long long)diff, (long long)n);
    CU_ASSERT_EQUAL(diff, 0);
  } else {
    gt_check_close(what, got, want, n, tol, 1e-6);
  }
  free(got);
}

/* The recorded error message contains each of the NULL-terminated needles. */
static int message_has(const char *first, ...) {
  const char *msg = ganfw_error_message();
  va_list ap;
  va_start(ap, first);
  int ok = 1;
  for (const char *s = first; s; s = va_arg(ap, const char *))
    if (!strstr(msg, s)) {
      printf("\n    expected '%s' in: %s", s, msg);
      ok = 0;
    }
  va_end(ap);
  return ok;
}

/* --- element-wise ------------------------------------------------------------------------ */

typedef ganfw_status (*unary_fn)(ganfw_ctx *, ganfw_tensor *, const ganfw_tensor *);

static void test_table(void) {
  /* every tensor-math and plugin-layer entry of 1.3 is in the table, after the 1.3 layers */
  CU_ASSERT(GANFW_HOST_HAS(H, net_spectral_norm));
  CU_ASSERT(GANFW_HOST_HAS(H, layer_add_buffer));
  void (*const entries[])(void) = {(void (*)(void))H->tensor_add,
                                   (void (*)(void))H->tensor_sub,
                                   (void (*)(void))H->tensor_mul,
                                   (void (*)(void))H->tensor_div,
                                   (void (*)(void))H->tensor_maximum,
                                   (void (*)(void))H->tensor_minimum,
                                   (void (*)(void))H->tensor_abs,
                                   (void (*)(void))H->tensor_sign,
                                   (void (*)(void))H->tensor_exp,
                                   (void (*)(void))H->tensor_log,
                                   (void (*)(void))H->tensor_sqrt,
                                   (void (*)(void))H->tensor_rsqrt,
                                   (void (*)(void))H->tensor_clamp,
                                   (void (*)(void))H->tensor_mul_scalar,
                                   (void (*)(void))H->tensor_add_scalar,
                                   (void (*)(void))H->tensor_pow_scalar,
                                   (void (*)(void))H->tensor_sum,
                                   (void (*)(void))H->tensor_mean,
                                   (void (*)(void))H->tensor_channel_affine,
                                   (void (*)(void))H->net_custom,
                                   (void (*)(void))H->layer_add_param,
                                   (void (*)(void))H->layer_add_buffer};
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    CU_ASSERT_PTR_NOT_NULL(entries[i]);
}

static void test_unary(void) {
  gt_ref *ref = gt_ref_open("host_ops");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(2, 0);
  ganfw_tensor *x = from_ref(ctx, ref, "u_x"), *pos = from_ref(ctx, ref, "u_pos");
  ganfw_tensor *y = make(ctx, x->ndim, x->shape, "y");
  const struct {
    const char *key;
    unary_fn fn;
    int positive;
    double tol;
  } ops[] = {{"u_abs", H->tensor_abs, 0, 0},    {"u_sign", H->tensor_sign, 0, 0},
             {"u_exp", H->tensor_exp, 0, 4e-7}, {"u_log", H->tensor_log, 1, 4e-7},
             {"u_sqrt", H->tensor_sqrt, 1, 0},  {"u_rsqrt", H->tensor_rsqrt, 1, 0}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    CU_ASSERT_EQUAL(ops[i].fn(ctx, y, ops[i].positive ? pos : x), GANFW_OK);
    expect(ops[i].key, y, ref, ops[i].key, ops[i].tol);
  }
  CU_ASSERT_EQUAL(H->tensor_clamp(ctx, y, x, -0.7f, 1.3f), GANFW_OK);
  expect("clamp", y, ref, "u_clamp", 0);
  CU_ASSERT_EQUAL(H->tensor_clamp(ctx, y, x, 0.25f, INFINITY), GANFW_OK);
  expect("clamp(min)", y, ref, "u_clamp_lo", 0);
  CU_ASSERT_EQUAL(H->tensor_mul_scalar(ctx, y, x, 0.37f), GANFW_OK);
  expect("mul_scalar", y, ref, "u_mul_scalar", 0);
  CU_ASSERT_EQUAL(H->tensor_add_scalar(ctx, y, x, 1.7f), GANFW_OK);
  expect("add_scalar", y, ref, "u_add_scalar", 0);
  /* the exponents torch computes without pow() give its bits; the others are powf */
  const float powers[] = {2.0f, 3.0f, 0.5f, -0.5f, -1.0f, -2.0f, 1.7f, -2.3f};
  for (int i = 0; i < 8; i++) {
    char key[16];
    snprintf(key, sizeof key, "u_pow%d", i);
    CU_ASSERT_EQUAL(H->tensor_pow_scalar(ctx, y, pos, powers[i]), GANFW_OK);
    expect(key, y, ref, key, i < 6 ? 0 : 4e-7);
  }
  /* in place: out is x */
  CU_ASSERT_EQUAL(H->tensor_abs(ctx, x, x), GANFW_OK);
  expect("abs in place", x, ref, "u_abs", 0);
  H->tensor_destroy(y);
  H->tensor_destroy(pos);
  H->tensor_destroy(x);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

typedef ganfw_status (*binary_fn)(ganfw_ctx *, ganfw_tensor *, const ganfw_tensor *,
                                  const ganfw_tensor *);

/* The broadcast shape of a and b (torch's rule), for the output. */
static int32_t bcast(const ganfw_tensor *a, const ganfw_tensor *b, int64_t *shape) {
  int32_t nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int32_t k = 0; k < nd; k++) {
    int64_t da = k < a->ndim ? a->shape[a->ndim - 1 - k] : 1;
    int64_t db = k < b->ndim ? b->shape[b->ndim - 1 - k] : 1;
    shape[nd - 1 - k] = da > db ? da : db;
  }
  return nd;
}

static void test_binary_broadcast(void) {
  gt_ref *ref = gt_ref_open("host_ops");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(2, 0);
  const char *cases[] = {"same", "chan", "pix", "rank", "row", "scalar"};
  const struct {
    const char *name;
    binary_fn fn;
  } ops[] = {{"add", H->tensor_add},
             {"sub", H->tensor_sub},
             {"mul", H->tensor_mul},
             {"div", H->tensor_div}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char ka[32], kb[32], kw[32];
    snprintf(ka, sizeof ka, "b_%s_a", cases[c]);
    snprintf(kb, sizeof kb, "b_%s_b", cases[c]);
    ganfw_tensor *a = from_ref(ctx, ref, ka), *b = from_ref(ctx, ref, kb);
    int64_t shape[4];
    int32_t nd = bcast(a, b, shape);
    ganfw_tensor *out = make(ctx, nd, shape, "out");
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      snprintf(kw, sizeof kw, "b_%s_%s", cases[c], ops[o].name);
      CU_ASSERT_EQUAL(ops[o].fn(ctx, out, a, b), GANFW_OK);
      expect(kw, out, ref, kw, 0);
      /* b op a broadcasts the same way (a - b and b - a differ only in sign) */
      if (o == 1) {
        CU_ASSERT_EQUAL(ops[o].fn(ctx, out, b, a), GANFW_OK);
        float *got = values(out);
        int64_t n = 0;
        const float *want = gt_ref_f32(ref, kw, &n, NULL, NULL);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += got[i] != -want[i];
        CU_ASSERT_EQUAL(bad, 0);
        free(got);
      }
    }
    /* in place into a, where a has the output's shape */
    if (a->numel == out->numel) {
      snprintf(kw, sizeof kw, "b_%s_mul", cases[c]);
      CU_ASSERT_EQUAL(H->tensor_mul(ctx, a, a, b), GANFW_OK);
      expect("mul in place", a, ref, kw, 0);
    }
    H->tensor_destroy(out);
    H->tensor_destroy(b);
    H->tensor_destroy(a);
  }
  /* maximum and minimum with NaN and inf */
  ganfw_tensor *a = from_ref(ctx, ref, "b_nan_a"), *b = from_ref(ctx, ref, "b_nan_b");
  ganfw_tensor *out = make(ctx, a->ndim, a->shape, "out");
  CU_ASSERT_EQUAL(H->tensor_maximum(ctx, out, a, b), GANFW_OK);
  expect("maximum", out, ref, "b_nan_maximum", 0);
  CU_ASSERT_EQUAL(H->tensor_minimum(ctx, out, a, b), GANFW_OK);
  expect("minimum", out, ref, "b_nan_minimum", 0);
  H->tensor_destroy(out);
  H->tensor_destroy(b);
  H->tensor_destroy(a);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* --- reductions -------------------------------------------------------------------------- */

/* A double sum rounded once to f32 is within half an ulp of the f64 result torch wrote
 * (converted to f32 by the reference reader): 1.2e-7 relative covers one ulp. */
#define ONE_ULP 1.2e-7

static void test_reduce(void) {
  gt_ref *ref = gt_ref_open("host_ops");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(2, 0);
  ganfw_tensor *x = from_ref(ctx, ref, "r_x"),
               *x2 = from_ref(ctx, ref, "r_x2"); /* [3,4,5,6], [7,9] */
  const struct {
    const char *key;
    int mean;
    ganfw_tensor *x;
    int32_t ndim, n_dims;
    int64_t shape[4];
    int32_t dims[4];
  } cases[] = {
      {"r_sum_c", 0, x, 4, 1, {3, 1, 5, 6}, {1}},
      {"r_mean_c", 1, x, 4, 1, {3, 1, 5, 6}, {-3}},
      {"r_sum_nhw", 0, x, 4, 3, {1, 4, 1, 1}, {0, 2, 3}},
      {"r_mean_nhw", 1, x, 1, 3, {4}, {3, 0, 2}}, /* keepdim=False, dims in any order */
      {"r_sum_last", 0, x2, 1, 1, {7}, {-1}},
      {"r_mean_batch", 1, x2, 2, 1, {1, 9}, {0}},
      {"r_sum_all", 0, x, 0, 0, {0}, {0}}, /* every dim, keepdim=False: a 0-dim result */
      {"r_mean_all", 1, x2, 2, 2, {1, 1}, {0, 1}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ganfw_tensor *out = make(ctx, cases[i].ndim, cases[i].shape, "out");
    ganfw_status st = cases[i].mean
                          ? H->tensor_mean(ctx, out, cases[i].x, cases[i].dims, cases[i].n_dims)
                          : H->tensor_sum(ctx, out, cases[i].x, cases[i].dims, cases[i].n_dims);
    CU_ASSERT_EQUAL(st, GANFW_OK);
    if (st != GANFW_OK) printf("\n    %s: %s", cases[i].key, ganfw_error_message());
    expect(cases[i].key, out, ref, cases[i].key, ONE_ULP);
    H->tensor_destroy(out);
  }
  H->tensor_destroy(x2);
  H->tensor_destroy(x);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* A sum over the batch of a large tensor gives the same bits with 1 and 3 threads, and so do
 * the element-wise ops (each output element has one fixed order). */
static void test_threads(void) {
  enum { N = 64, F = 4099 };
  float *host = malloc(sizeof(float) * N * F);
  CU_ASSERT_PTR_NOT_NULL_FATAL(host);
  gt_fill_uniform(host, (int64_t)N * F, -2, 2, 11);
  float *res[2][2];
  for (int k = 0; k < 2; k++) {
    ganfw_ctx *ctx = make_ctx(k == 0 ? 1 : 3, 0);
    ganfw_tensor *x = make(ctx, 2, (int64_t[]){N, F}, "x");
    ganfw_tensor *s = make(ctx, 1, (int64_t[]){F}, "s"), *all = make(ctx, 0, NULL, "all");
    CU_ASSERT_EQUAL(H->tensor_from_host(x, host, x->nbytes), GANFW_OK);
    CU_ASSERT_EQUAL(H->tensor_mean(ctx, s, x, (int32_t[]){0}, 1), GANFW_OK);
    CU_ASSERT_EQUAL(H->tensor_sum(ctx, all, x, NULL, 0), GANFW_OK);
    res[k][0] = values(s);
    res[k][1] = values(all);
    H->tensor_destroy(all);
    H->tensor_destroy(s);
    H->tensor_destroy(x);
    ganfw_ctx_destroy(ctx);
  }
  CU_ASSERT_EQUAL(memcmp(res[0][0], res[1][0], sizeof(float) * F), 0);
  CU_ASSERT_EQUAL(memcmp(res[0][1], res[1][1], sizeof(float)), 0);
  /* and the sum is the sum: the f64 total of the inputs, rounded once */
  double total = 0;
  for (int64_t i = 0; i < (int64_t)N * F; i++) total += host[i];
  CU_ASSERT_DOUBLE_EQUAL(res[0][1][0], (float)total, fabs(total) * 1e-6 + 1e-3);
  for (int k = 0; k < 2; k++) free(res[k][0]), free(res[k][1]);
  free(host);
}

static void test_channel_affine(void) {
  gt_ref *ref = gt_ref_open("host_ops");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(2, 0);
  ganfw_tensor *x = from_ref(ctx, ref, "a_x"), *s = from_ref(ctx, ref, "a_s");
  ganfw_tensor *b = from_ref(ctx, ref, "a_b"), *x2 = from_ref(ctx, ref, "a_x2");
  ganfw_tensor *y = make(ctx, x->ndim, x->shape, "y"), *y2 = make(ctx, 2, x2->shape, "y2");
  CU_ASSERT_EQUAL(H->tensor_channel_affine(ctx, y, x, s, b), GANFW_OK);
  expect("x * s + b (fused)", y, ref, "a_both", ONE_ULP);
  CU_ASSERT_EQUAL(H->tensor_channel_affine(ctx, y, x, s, NULL), GANFW_OK);
  expect("x * s", y, ref, "a_scale", 0);
  CU_ASSERT_EQUAL(H->tensor_channel_affine(ctx, y, x, NULL, b), GANFW_OK);
  expect("x + b", y, ref, "a_shift", 0);
  CU_ASSERT_EQUAL(H->tensor_channel_affine(ctx, y2, x2, s, b), GANFW_OK);
  expect("[N,C] rows", y2, ref, "a_rows", ONE_ULP);
  CU_ASSERT_EQUAL(H->tensor_channel_affine(ctx, x, x, s, b), GANFW_OK); /* in place */
  expect("in place", x, ref, "a_both", ONE_ULP);
  H->tensor_destroy(y2);
  H->tensor_destroy(y);
  H->tensor_destroy(x2);
  H->tensor_destroy(b);
  H->tensor_destroy(s);
  H->tensor_destroy(x);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* torch.cat and Tensor.narrow: copies, the same bits; shapes that do not fit are refused
 * naming the tensors. */
static void test_cat_narrow(void) {
  gt_ref *ref = gt_ref_open("host_ops");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(2, 0);
  if (!GANFW_HOST_HAS(H, tensor_narrow)) CU_FAIL_FATAL("the host table has no tensor_narrow");
  ganfw_tensor *a = from_ref(ctx, ref, "c_a"), *b = from_ref(ctx, ref, "c_b");
  ganfw_tensor *c = from_ref(ctx, ref, "c_c"), *d = from_ref(ctx, ref, "c_d");
  const int64_t s_ab[4] = {2, 5, 4, 5}, s_ada[4] = {5, 3, 4, 5}, s_aca[4] = {2, 3, 4, 11};
  const int64_t s_n1[4] = {2, 2, 4, 5}, s_nl[4] = {2, 3, 4, 3};
  ganfw_tensor *ab = make(ctx, 4, s_ab, "ab"), *ada = make(ctx, 4, s_ada, "ada");
  ganfw_tensor *aca = make(ctx, 4, s_aca, "aca"), *n1 = make(ctx, 4, s_n1, "n1");
  ganfw_tensor *nl = make(ctx, 4, s_nl, "nl");
  const ganfw_tensor *two[2] = {a, b}, *three[3] = {a, d, a}, *last[3] = {a, c, a};
  CU_ASSERT_EQUAL(H->tensor_cat(ctx, ab, two, 2, 1), GANFW_OK);
  expect("cat dim 1", ab, ref, "c_ab", 0);
  CU_ASSERT_EQUAL(H->tensor_cat(ctx, ada, three, 3, 0), GANFW_OK);
  expect("cat dim 0", ada, ref, "c_ada", 0);
  CU_ASSERT_EQUAL(H->tensor_cat(ctx, aca, last, 3, -1), GANFW_OK);
  expect("cat dim -1", aca, ref, "c_aca", 0);
  CU_ASSERT_EQUAL(H->tensor_narrow(ctx, n1, ab, 1, 3), GANFW_OK);
  expect("narrow dim 1", n1, ref, "c_narrow1", 0);
  CU_ASSERT_EQUAL(H->tensor_narrow(ctx, nl, a, -1, 1), GANFW_OK);
  expect("narrow dim -1", nl, ref, "c_narrow_last", 0);
  /* refusals */
  CU_ASSERT_EQUAL(H->tensor_cat(ctx, ab, two, 2, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_cat", "they must agree but in dim 0", NULL));
  CU_ASSERT_EQUAL(H->tensor_cat(ctx, aca, two, 2, 3), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_cat", "'c_b'", NULL));
  CU_ASSERT_EQUAL(H->tensor_cat(ctx, ab, two, 2, 4), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("dim 4 is outside", NULL));
  CU_ASSERT_EQUAL(H->tensor_cat(ctx, ab, three, 1, 1), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("have 3 in dim 1 together", "has 5", NULL));
  CU_ASSERT_EQUAL(H->tensor_narrow(ctx, n1, ab, 1, 4), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_narrow", "fit in x from there", NULL));
  ganfw_error_clear();
  ganfw_tensor *all[] = {nl, n1, aca, ada, ab, d, c, b, a};
  for (int i = 0; i < 9; i++) H->tensor_destroy(all[i]);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* --- bad input ------------------------------------------------------------------------- */

static void test_bad_input(void) {
  ganfw_ctx *ctx = make_ctx(1, 0), *other = make_ctx(1, 0);
  ganfw_tensor *a = make(ctx, 4, (int64_t[]){2, 3, 4, 5}, "act");
  ganfw_tensor *b = make(ctx, 2, (int64_t[]){3, 4}, "gain");
  ganfw_tensor *c = make(ctx, 1, (int64_t[]){3}, "three");
  ganfw_tensor *o = make(ctx, 4, (int64_t[]){2, 3, 4, 5}, "out");
  ganfw_tensor *foreign = make(other, 4, (int64_t[]){2, 3, 4, 5}, "foreign");
  ganfw_tensor *h =
      H->tensor_create(ctx, GANFW_DTYPE_F16, 4, (int64_t[]){2, 3, 4, 5}, GANFW_MEM_OTHER, "half");
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);

  /* [2,3,4,5] with [3,4]: the last dims 5 and 4 differ */
  CU_ASSERT_EQUAL(H->tensor_add(ctx, o, a, b), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_add", "'act' [2,3,4,5]", "'gain' [3,4]", "do not broadcast", NULL));
  /* an output of the wrong shape */
  ganfw_tensor *small = make(ctx, 2, (int64_t[]){4, 5}, "small");
  CU_ASSERT_EQUAL(H->tensor_mul(ctx, small, a, a), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("out 'small' is [4,5]", "broadcast to [2,3,4,5]", NULL));
  CU_ASSERT_EQUAL(H->tensor_exp(ctx, small, a), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_exp", "'small' [4,5]", "'act' [2,3,4,5]", NULL));
  /* not f32; another run's tensor */
  CU_ASSERT_EQUAL(H->tensor_sqrt(ctx, o, h), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_sqrt", "'half' is f16, f32 is required", NULL));
  CU_ASSERT_EQUAL(H->tensor_sub(ctx, o, a, foreign), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("'foreign' belongs to another run", NULL));
  CU_ASSERT_EQUAL(H->tensor_abs(ctx, NULL, a), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_abs: out is NULL", NULL));
  /* reductions: dims out of range or twice, an output that is neither keepdim nor not */
  ganfw_tensor *r = make(ctx, 4, (int64_t[]){2, 1, 4, 5}, "r");
  CU_ASSERT_EQUAL(H->tensor_sum(ctx, r, a, (int32_t[]){4}, 1), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_sum", "dim 4", "out of range", "[-4, 4)", NULL));
  CU_ASSERT_EQUAL(H->tensor_sum(ctx, r, a, (int32_t[]){1, -3}, 2), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("given twice", NULL));
  CU_ASSERT_EQUAL(H->tensor_mean(ctx, r, a, (int32_t[]){2}, 1), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_mean", "out 'r' is [2,1,4,5]", "gives [2,3,1,5] (keepdim)", NULL));
  CU_ASSERT_EQUAL(H->tensor_mean(ctx, r, a, (int32_t[]){1}, 1), GANFW_OK);
  /* per-channel: scale of the wrong length, x without channels */
  CU_ASSERT_EQUAL(H->tensor_channel_affine(ctx, o, a, b, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("scale 'gain' is [3,4]", "has 3 channels", NULL));
  CU_ASSERT_EQUAL(H->tensor_channel_affine(ctx, c, c, c, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("'three' is [3]", "[N,C,...]", NULL));
  CU_ASSERT_EQUAL(H->tensor_channel_affine(ctx, o, a, c, c), GANFW_OK);

  H->tensor_destroy(r);
  H->tensor_destroy(small);
  H->tensor_destroy(h);
  H->tensor_destroy(foreign);
  H->tensor_destroy(o);
  H->tensor_destroy(c);
  H->tensor_destroy(b);
  H->tensor_destroy(a);
  ganfw_ctx_destroy(other);
  ganfw_ctx_destroy(ctx);
}

/* On the meta backend (`ganfw plan`) every op checks its shapes and computes nothing: the
 * tensors have fake addresses, so touching one would fault. */
static void test_meta(void) {
  ganfw_ctx *ctx = make_ctx(1, 1);
  ganfw_tensor *a = make(ctx, 4, (int64_t[]){2, 3, 4, 5}, "a");
  ganfw_tensor *s = make(ctx, 1, (int64_t[]){3}, "s"),
               *m = make(ctx, 4, (int64_t[]){2, 1, 4, 5}, "m");
  CU_ASSERT_EQUAL(H->tensor_mul(ctx, a, a, m), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_rsqrt(ctx, a, a), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_mean(ctx, m, a, (int32_t[]){1}, 1), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_channel_affine(ctx, a, a, s, s), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_add(ctx, a, a, s), GANFW_ERR_INVALID_ARG); /* [..,5] with [3] */
  H->tensor_destroy(m);
  H->tensor_destroy(s);
  H->tensor_destroy(a);
  ganfw_ctx_destroy(ctx);
}

/* --- Lion (Chen et al. 2023) with host ops ------------------------------------------------ */

typedef struct lion_hp {
  float lr, beta1, beta2, wd;
} lion_hp;

/* One Lion step as an optimizer plugin would write it:
 *   c = beta1 * m + (1 - beta1) * g;  p = p * (1 - lr * wd) - lr * sign(c);
 *   m = beta2 * m + (1 - beta2) * g.  c is a scratch tensor of p's shape. */
static ganfw_status lion_step(ganfw_ctx *ctx, const lion_hp *hp, ganfw_tensor *p, ganfw_tensor *g,
                              ganfw_tensor *m, ganfw_tensor *c) {
  ganfw_status st;
  if ((st = H->tensor_mul_scalar(ctx, c, m, hp->beta1)) ||
      (st = H->foreach_axpy(ctx, &c, 1.0f - hp->beta1, &g, 1)) ||
      (st = H->tensor_sign(ctx, c, c)) ||
      (st = H->tensor_mul_scalar(ctx, p, p, 1.0f - hp->lr * hp->wd)) ||
      (st = H->foreach_axpy(ctx, &p, -hp->lr, &c, 1)) ||
      (st = H->tensor_mul_scalar(ctx, m, m, hp->beta2)))
    return st;
  return H->foreach_axpy(ctx, &m, 1.0f - hp->beta2, &g, 1);
}

static void test_lion(void) {
  enum { N = 257, STEPS = 4 };
  const lion_hp hp = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.99f, .wd = 0.1f};
  ganfw_ctx *ctx = make_ctx(1, 0);
  const int64_t shape[1] = {N};
  ganfw_tensor *p = make(ctx, 1, shape, "w"), *g = make(ctx, 1, shape, "w.grad");
  ganfw_tensor *m = make(ctx, 1, shape, "w.exp_avg"), *c = make(ctx, 1, shape, "scratch");
  double pw[N], mw[N]; /* the formula, by hand in double */
  float host[N], grad[N];
  gt_fill_uniform(host, N, -1, 1, 5);
  for (int i = 0; i < N; i++) pw[i] = host[i], mw[i] = 0;
  CU_ASSERT_EQUAL(H->tensor_from_host(p, host, sizeof host), GANFW_OK);
  CU_ASSERT_EQUAL(H->foreach_fill(ctx, &m, 1, 0.0f), GANFW_OK);
  for (int s = 0; s < STEPS; s++) {
    gt_fill_uniform(grad, N, -1, 1, 100 + (uint64_t)s);
    CU_ASSERT_EQUAL(H->tensor_from_host(g, grad, sizeof grad), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(lion_step(ctx, &hp, p, g, m, c), GANFW_OK);
    if (s == 0) { /* m was 0: every weight moves by exactly lr against its gradient's sign */
      float after[N];
      CU_ASSERT_EQUAL(H->tensor_to_host(p, after, sizeof after), GANFW_OK);
      int exact = 0;
      for (int i = 0; i < N; i++) {
        const float decayed = host[i] * (1.0f - hp.lr * hp.wd);
        exact += fabsf(after[i] - (decayed - (grad[i] > 0 ? hp.lr : -hp.lr))) < 1e-6f;
      }
      CU_ASSERT_EQUAL(exact, N);
    }
    for (int i = 0; i < N; i++) {
      const double u = hp.beta1 * mw[i] + (1.0 - hp.beta1) * grad[i];
      const double sign = u > 0 ? 1.0 : u < 0 ? -1.0 : 0.0;
      pw[i] = pw[i] - hp.lr * (sign + hp.wd * pw[i]);
      mw[i] = hp.beta2 * mw[i] + (1.0 - hp.beta2) * grad[i];
    }
  }
  float got_p[N], got_m[N], want_p[N], want_m[N];
  CU_ASSERT_EQUAL(H->tensor_to_host(p, got_p, sizeof got_p), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_to_host(m, got_m, sizeof got_m), GANFW_OK);
  for (int i = 0; i < N; i++) want_p[i] = (float)pw[i], want_m[i] = (float)mw[i];
  /* f32 roundings of each step against the f64 formula: a few 1e-7 of the values' scale */
  gt_check_close("Lion parameters", got_p, want_p, N, 2e-6, 1e-2);
  gt_check_close("Lion momentum", got_m, want_m, N, 2e-6, 1e-2);
  H->tensor_destroy(c);
  H->tensor_destroy(m);
  H->tensor_destroy(g);
  H->tensor_destroy(p);
  ganfw_ctx_destroy(ctx);
}

static int suite_init(void) {
  H = ganfw_host_table();
  return H == NULL;
}

static CU_TestInfo tests[] = {{"table", test_table},
                              {"unary", test_unary},
                              {"binary_broadcast", test_binary_broadcast},
                              {"reduce", test_reduce},
                              {"threads", test_threads},
                              {"channel_affine", test_channel_affine},
                              {"cat_narrow", test_cat_narrow},
                              {"bad_input", test_bad_input},
                              {"meta", test_meta},
                              {"lion", test_lion},
                              CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("host_ops", tests, suite_init, NULL);
}
