/* The shared test helpers themselves (tests/testutil.c): relative errors, the finite-
 * difference gradient check (on a function with a known gradient, and a wrong one), the
 * seeded uniform generator and aligned buffers. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "testutil.h"

static void test_max_rel_err(void) {
  float a[4] = {1.0f, 2.0f, 0.0f, -4.0f};
  float b[4] = {1.0f, 2.2f, 1e-6f, -4.0f};
  /* |2-2.2|/2.2 = 0.0909; |0-1e-6|/max(1e-6, 1e-3) = 1e-3 */
  CU_ASSERT_DOUBLE_EQUAL(gt_max_rel_err(a, b, 4, 1e-3), 0.2f / 2.2f, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(gt_max_rel_err(a + 2, b + 2, 1, 1e-3), 1e-3, 1e-9);
  CU_ASSERT_EQUAL(gt_max_rel_err(a, a, 4, 0.0), 0.0);
  CU_ASSERT_EQUAL(gt_max_rel_err(a, b, 0, 1e-3), 0.0);
  float n[2] = {NAN, 1.0f}, m[2] = {1.0f, 1.0f}, inf[1] = {INFINITY};
  CU_ASSERT(isinf(gt_max_rel_err(n, m, 2, 1e-3)));
  CU_ASSERT(isinf(gt_max_rel_err(m, n, 2, 1e-3)));
  CU_ASSERT(isinf(gt_max_rel_err(inf, m, 1, 1e-3)));
  CU_ASSERT_EQUAL(gt_max_rel_err(inf, inf, 1, 1e-3), 0.0);
  CU_ASSERT_DOUBLE_EQUAL(gt_check_close("close", a, b, 4, 0.1, 1e-3), 0.2f / 2.2f, 1e-6);
}

/* y_i = w_i x_i^2 + sin(x_{(i+1) % n}) */
typedef struct fn_ctx {
  const float *x, *w;
  float *y;
  int64_t n;
  int calls;
  int64_t touched[64];
  int ntouched;
  float x_ref[128];
} fn_ctx;

static void fn_forward(void *p) {
  fn_ctx *c = p;
  c->calls++;
  for (int64_t i = 0; i < c->n; i++) {
    if (c->x[i] != c->x_ref[i] && c->ntouched < 64 &&
        (c->ntouched == 0 || c->touched[c->ntouched - 1] != i))
      c->touched[c->ntouched++] = i;
    c->y[i] = c->w[i] * c->x[i] * c->x[i] + sinf(c->x[(i + 1) % c->n]);
  }
}

static void test_gradcheck(void) {
  enum { N = 101 };
  float x[N], w[N], y[N], dy[N], grad[N];
  gt_fill_uniform(x, N, -1.0f, 1.0f, 1);
  gt_fill_uniform(w, N, 0.5f, 2.0f, 2);
  gt_fill_uniform(dy, N, -1.0f, 1.0f, 3);
  fn_ctx c = {.x = x, .w = w, .y = y, .n = N};
  memcpy(c.x_ref, x, sizeof x);
  /* dL/dx_j = 2 w_j x_j dy_j + cos(x_j) dy_{j-1} */
  for (int j = 0; j < N; j++) grad[j] = 2 * w[j] * x[j] * dy[j] + cosf(x[j]) * dy[(j + N - 1) % N];
  double err = gt_gradcheck(fn_forward, &c, x, N, y, dy, N, grad, 1e-2, 5, 1e-3);
  printf("\n  gradcheck err (correct gradient, f32, eps 1e-2): %.2e\n", err);
  CU_ASSERT(err < 1e-3);
  CU_ASSERT_EQUAL(c.calls, 2 * 5 + 1);
  /* Five points spread evenly: 0, 25, 50, 75, 100 (each perturbed twice, in a row). */
  CU_ASSERT_EQUAL(c.ntouched, 5);
  int64_t want[5] = {0, 25, 50, 75, 100};
  for (int k = 0; k < 5 && k < c.ntouched; k++) CU_ASSERT_EQUAL(c.touched[k], want[k]);
  /* x restored bit for bit; y recomputed at the restored x. */
  CU_ASSERT_EQUAL(memcmp(x, c.x_ref, sizeof x), 0);
  float y2[N];
  memcpy(y2, y, sizeof y);
  fn_forward(&c);
  CU_ASSERT_EQUAL(memcmp(y, y2, sizeof y), 0);

  /* A gradient off by 2% at one checked index is caught. */
  grad[50] *= 1.02f;
  double bad = gt_gradcheck(fn_forward, &c, x, N, y, dy, N, grad, 1e-2, 5, 1e-3);
  CU_ASSERT(bad > 1e-2);
  /* max_points <= 0 or >= nx checks every index. */
  c.calls = 0;
  grad[50] /= 1.02f;
  grad[7] = -grad[7] + 1.0f;
  double all = gt_gradcheck(fn_forward, &c, x, N, y, dy, N, grad, 1e-2, 0, 1e-3);
  CU_ASSERT_EQUAL(c.calls, 2 * N + 1);
  CU_ASSERT(all > 1e-2);
}

static void test_fill_uniform(void) {
  enum { N = 100000 };
  float *a = gt_alloc(N * sizeof(float)), *b = gt_alloc(N * sizeof(float));
  gt_fill_uniform(a, N, -3.0f, 5.0f, 42);
  gt_fill_uniform(b, N, -3.0f, 5.0f, 42);
  CU_ASSERT_EQUAL(memcmp(a, b, N * sizeof(float)), 0);
  double sum = 0, lo = 1e9, hi = -1e9;
  for (int i = 0; i < N; i++) {
    sum += a[i];
    lo = a[i] < lo ? a[i] : lo;
    hi = a[i] > hi ? a[i] : hi;
  }
  CU_ASSERT(lo >= -3.0 && hi < 5.0);
  CU_ASSERT(lo < -2.99 && hi > 4.99);
  CU_ASSERT_DOUBLE_EQUAL(sum / N, 1.0, 0.03);
  gt_fill_uniform(b, N, -3.0f, 5.0f, 43);
  int same = 0;
  for (int i = 0; i < N; i++) same += a[i] == b[i];
  CU_ASSERT(same < 100);
  gt_fill_uniform(b, 4, 0.0f, 1.0f, 0); /* seed 0 is fine */
  CU_ASSERT(b[0] != b[1] && b[1] != b[2]);
  /* A range one float wide never returns hi. */
  gt_fill_uniform(b, 1000, 1.0f, nextafterf(1.0f, 2.0f), 5);
  for (int i = 0; i < 1000; i++) CU_ASSERT_EQUAL_FATAL(b[i], 1.0f);
  gt_free(a);
  gt_free(b);
}

static void test_alloc(void) {
  size_t sizes[] = {0, 1, 63, 64, 1000, 1 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = gt_alloc(sizes[i]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL((uintptr_t)p % 64, 0);
    int zero = 1;
    for (size_t k = 0; k < sizes[i]; k++) zero &= p[k] == 0;
    CU_ASSERT(zero);
    gt_free(p);
  }
  gt_free(NULL);
}

static CU_TestInfo tests[] = {
    {"max_rel_err", test_max_rel_err},
    {"gradcheck", test_gradcheck},
    {"fill_uniform", test_fill_uniform},
    {"alloc", test_alloc},
    CU_TEST_INFO_NULL,
};
GT_MAIN("testutil", tests)
