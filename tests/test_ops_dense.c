/* The CPU dense kernels (core/src/backend/cpu/{gemm,conv2d,conv_transpose2d,linear}.c) and the
 * shape helpers (core/src/backend/shapes.c): GEMM and the forward passes against direct double
 * sums, every input and parameter gradient against central differences (gt_gradcheck) and against
 * direct double sums, the accumulate flag, NULL gradients, workspaces allocated at exactly
 * the reported size (run under ASan) and results that do not depend on the thread count.
 * Shapes cover stride 2, padding, odd and non-square sizes, N=1, bias NULL, the dense
 * (kernel = whole input) path and several chunks of images. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "base/error.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

/* Errors reached (printed) must stay below these. The ops are linear in each input, so a
 * central difference with a large step is exact up to f32 rounding of the outputs. */
#define REF_TOL     1e-4 /* against direct double sums, floor REF_FLOOR * max |want| */
#define REF_FLOOR   1e-2
#define GRAD_TOL    2e-3 /* gradcheck, floor GRAD_FLOOR */
#define GRAD_FLOOR  1e-2
#define GRAD_EPS    0.5
#define GRAD_POINTS 150

static float *falloc(int64_t n) {
  return gt_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
}

static float *frand(int64_t n, float lo, float hi, uint64_t seed) {
  float *p = falloc(n);
  gt_fill_uniform(p, n, lo, hi, seed);
  return p;
}

static float *fcopy(const float *src, int64_t n) {
  float *p = falloc(n);
  memcpy(p, src, (size_t)n * sizeof *p);
  return p;
}

static void ffill(float *p, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++) p[i] = v;
}

/* A workspace of exactly `bytes` from malloc, so that ASan flags any access past it. */
static void *ws_alloc(size_t bytes) {
  void *p = malloc(bytes);
  CU_ASSERT_FATAL(p != NULL || bytes == 0);
  return p;
}

static double max_abs(const float *p, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)p[i]));
  return m;
}

/* Compares against a reference with a floor relative to the reference's scale. */
static double check_ref(const char *what, const float *got, const float *want, int64_t n) {
  double floor = REF_FLOOR * max_abs(want, n);
  if (floor < 1e-6) floor = 1e-6;
  double err = gt_check_close(what, got, want, n, REF_TOL, floor);
  printf("\n    %-58s max rel err %.2e", what, err);
  return err;
}

/* gt_gradcheck on one thread: it reruns the forward pass hundreds of times on small shapes,
 * where starting thread teams would dominate (threading has its own test below). */
static double gradcheck(gt_forward_fn forward, void *ctx, float *x, int64_t nx, const float *y,
                        const float *dy, int64_t ny, const float *grad, int64_t points) {
  const int threads = ganfw_cpu_threads();
  ganfw_cpu_set_threads(NULL, 1);
  double err = gt_gradcheck(forward, ctx, x, nx, y, dy, ny, grad, GRAD_EPS, points, GRAD_FLOOR);
  ganfw_cpu_set_threads(NULL, threads);
  return err;
}

static void check_grad(const char *what, double err) {
  printf("\n    %-58s gradcheck err %.2e", what, err);
  CU_ASSERT(err <= GRAD_TOL);
  if (!(err <= GRAD_TOL)) printf("  <-- above %.1e", GRAD_TOL);
}

/* Close, relative to the scale of b, for results that must agree up to summation order. */
static int same(const float *a, const float *b, int64_t n, double tol) {
  return gt_max_rel_err(a, b, n, REF_FLOOR * max_abs(b, n) + 1e-30) <= tol;
}

/* ====================================================================================== */
/* shapes                                                                                   */
/* ====================================================================================== */

static void test_shapes(void) {
  ganfw_conv2d_shape c = {.N = 2,
                          .C = 3,
                          .H = 32,
                          .W = 31,
                          .K = 4,
                          .R = 4,
                          .S = 3,
                          .stride_h = 2,
                          .stride_w = 1,
                          .pad_h = 1,
                          .pad_w = 0};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&c), GANFW_OK);
  CU_ASSERT_EQUAL(c.P, 16); /* (32 + 2 - 4) / 2 + 1 */
  CU_ASSERT_EQUAL(c.Q, 29); /* (31 - 3) / 1 + 1 */
  c.stride_h = 3;           /* floor: (30 / 3) + 1 */
  CU_ASSERT_EQUAL(ganfw_conv2d_shape_init(&c), GANFW_OK);
  CU_ASSERT_EQUAL(c.P, 11);
  c.R = 35; /* kernel larger than the padded input */
  CU_ASSERT_EQUAL(ganfw_conv2d_shape_init(&c), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(strstr(ganfw_error_message(), "conv2d") != NULL);
  c.R = 4;
  c.stride_w = 0;
  CU_ASSERT_EQUAL(ganfw_conv2d_shape_init(&c), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(strstr(ganfw_error_message(), "stride_w") != NULL);
  c.stride_w = 1;
  c.pad_h = -1;
  CU_ASSERT_EQUAL(ganfw_conv2d_shape_init(&c), GANFW_ERR_INVALID_ARG);
  c.pad_h = 0;
  c.N = 0;
  CU_ASSERT_EQUAL(ganfw_conv2d_shape_init(&c), GANFW_ERR_INVALID_ARG);

  /* DC-GAN's generator: 1x1 -> 4x4 -> 8x8 and a 3x3 stride-2 layer with output padding. */
  ganfw_convt2d_shape t = {
      .N = 64, .C = 100, .H = 1, .W = 1, .K = 256, .R = 4, .S = 4, .stride_h = 1, .stride_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&t), GANFW_OK);
  CU_ASSERT(t.P == 4 && t.Q == 4);
  t = (ganfw_convt2d_shape){.N = 1,
                            .C = 3,
                            .H = 4,
                            .W = 5,
                            .K = 2,
                            .R = 4,
                            .S = 4,
                            .stride_h = 2,
                            .stride_w = 2,
                            .pad_h = 1,
                            .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&t), GANFW_OK);
  CU_ASSERT(t.P == 8 && t.Q == 10);
  t = (ganfw_convt2d_shape){.N = 1,
                            .C = 3,
                            .H = 4,
                            .W = 5,
                            .K = 2,
                            .R = 3,
                            .S = 3,
                            .stride_h = 2,
                            .stride_w = 3,
                            .pad_h = 1,
                            .pad_w = 0,
                            .out_pad_h = 1,
                            .out_pad_w = 2};
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&t), GANFW_OK);
  CU_ASSERT_EQUAL(t.P, 3 * 2 - 2 + 3 + 1);
  CU_ASSERT_EQUAL(t.Q, 4 * 3 + 3 + 2);
  t.out_pad_h = 2; /* must be below the stride */
  CU_ASSERT_EQUAL(ganfw_convt2d_shape_init(&t), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(strstr(ganfw_error_message(), "output padding") != NULL);
  t = (ganfw_convt2d_shape){.N = 1,
                            .C = 1,
                            .H = 1,
                            .W = 1,
                            .K = 1,
                            .R = 2,
                            .S = 2,
                            .stride_h = 1,
                            .stride_w = 1,
                            .pad_h = 1,
                            .pad_w = 1};
  CU_ASSERT_EQUAL(ganfw_convt2d_shape_init(&t), GANFW_ERR_INVALID_ARG); /* 0x0 output */

  ganfw_pool2d_shape p = {.N = 2,
                          .C = 3,
                          .H = 7,
                          .W = 6,
                          .R = 3,
                          .S = 2,
                          .stride_h = 2,
                          .stride_w = 2,
                          .pad_h = 1,
                          .pad_w = 0};
  CU_ASSERT_EQUAL_FATAL(ganfw_pool2d_shape_init(&p), GANFW_OK);
  CU_ASSERT(p.P == 4 && p.Q == 3);
  p.pad_w = 2; /* more than half the window */
  CU_ASSERT_EQUAL(ganfw_pool2d_shape_init(&p), GANFW_ERR_INVALID_ARG);
  p.pad_w = 0;
  p.R = 10;
  CU_ASSERT_EQUAL(ganfw_pool2d_shape_init(&p), GANFW_ERR_INVALID_ARG);
}

/* ====================================================================================== */
/* GEMM                                                                                     */
/* ====================================================================================== */

static void gemm_ref(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < N; j++) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; k++) {
        double a = ta ? A[k * lda + i] : A[i * lda + k];
        double b = tb ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      C[i * ldc + j] = (float)(alpha * acc + (beta == 0.0f ? 0.0 : beta * C[i * ldc + j]));
    }
  }
}

static void test_gemm(void) {
  /* Serial (small) and split over threads by rows (M > N) and by columns (N >= M). */
  const int64_t sizes[][3] = {{3, 5, 7}, {200, 70, 90}, {37, 300, 64}, {129, 129, 33}};
  for (int t = 0; t < 4; t++) {
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
      const int64_t M = sizes[z][0], N = sizes[z][1], K = sizes[z][2];
      const int ta = t & 1, tb = t >> 1;
      /* Leading dimensions larger than the rows they hold. */
      const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
      const int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
      float *A = frand(na, -1, 1, 11 + z), *B = frand(nb, -1, 1, 23 + z);
      float *C = frand(nc, -1, 1, 37 + z), *Cref = fcopy(C, nc);
      ganfw_cpu_gemm(NULL, ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, C, ldc);
      gemm_ref(ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, Cref, ldc);
      char what[96];
      snprintf(what, sizeof what, "gemm %s%s %lldx%lldx%lld beta 0.5", ta ? "T" : "N",
               tb ? "T" : "N", (long long)M, (long long)N, (long long)K);
      check_ref(what, C, Cref, nc);
      /* beta = 0 ignores C, even NaN. */
      ffill(C, nc, NAN);
      memcpy(Cref, C, (size_t)nc * sizeof *C);
      ganfw_cpu_gemm(NULL, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
      gemm_ref(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, Cref, ldc);
      for (int64_t i = 0; i < M; i++) {
        CU_ASSERT(same(C + i * ldc, Cref + i * ldc, N, REF_TOL));
        CU_ASSERT(isnan(C[i * ldc + N])); /* the padding between rows is untouched */
      }
      gt_free(A), gt_free(B), gt_free(C), gt_free(Cref);
    }
  }
  /* K = 0: C = beta * C. */
  float C[6] = {1, 2, 3, 4, 5, 6};
  ganfw_cpu_gemm(NULL, 0, 0, 2, 3, 0, 1.0f, C, 1, C, 3, 2.0f, C, 3);
  CU_ASSERT(C[0] == 2.0f && C[5] == 12.0f);
  ganfw_cpu_gemm(NULL, 0, 0, 2, 3, 0, 1.0f, C, 1, C, 3, 0.0f, C, 3);
  CU_ASSERT(C[0] == 0.0f && C[5] == 0.0f);
}

/* ====================================================================================== */
/* conv2d                                                                                   */
/* ====================================================================================== */

typedef struct conv_case {
  int64_t N, C, H, W, K, R, S, sh, sw, ph, pw;
  int bias;
} conv_case;

static const conv_case conv_cases[] = {
    {2, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, 1},    /* stride 1, pad 1, odd sizes */
    {3, 4, 8, 8, 6, 4, 4, 2, 2, 1, 1, 0},    /* DC-GAN's k4 s2 p1, no bias */
    {1, 2, 9, 7, 3, 3, 2, 2, 1, 0, 1, 1},    /* N=1, non-square kernel, stride and padding */
    {4, 6, 4, 4, 7, 4, 4, 1, 1, 0, 0, 1},    /* dense: the kernel covers the input (-> 1x1) */
    {2, 5, 5, 6, 3, 1, 1, 1, 1, 0, 0, 0},    /* 1x1 */
    {2, 3, 6, 5, 4, 2, 3, 3, 2, 2, 1, 1},    /* stride 3, padding 2 */
    {5, 1, 32, 32, 8, 4, 4, 2, 2, 1, 1, 1},  /* DC-GAN's first D layer, one input channel */
    {3, 32, 44, 44, 3, 4, 4, 1, 1, 0, 0, 1}, /* large images: several chunks, the last partial */
    {2, 3, 10, 8, 4, 4, 4, 2, 2, 1, 1, 1},   /* stride 2, 5x4 output: 4 rows per vector + 1 */
    {2, 2, 6, 16, 3, 4, 4, 2, 2, 1, 1, 0},   /* stride 2, 3x8 output: 2 rows per vector + 1 */
    {1, 2, 6, 40, 2, 4, 4, 2, 2, 1, 1, 1},   /* stride 2, rows of 20: two vectors per row */
};
#define CONV_CASES ((int)(sizeof conv_cases / sizeof conv_cases[0]))

static ganfw_conv2d_shape conv_shape(const conv_case *c) {
  ganfw_conv2d_shape s = {.N = c->N,
                          .C = c->C,
                          .H = c->H,
                          .W = c->W,
                          .K = c->K,
                          .R = c->R,
                          .S = c->S,
                          .stride_h = c->sh,
                          .stride_w = c->sw,
                          .pad_h = c->ph,
                          .pad_w = c->pw};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  return s;
}

/* The input index a conv2d output (n, p, q) reads at (c, r, s), or -1 in the padding. */
static int64_t conv_src(const ganfw_conv2d_shape *s, int64_t n, int64_t c, int64_t p, int64_t q,
                        int64_t r, int64_t k) {
  int64_t ih = p * s->stride_h - s->pad_h + r, iw = q * s->stride_w - s->pad_w + k;
  if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) return -1;
  return ((n * s->C + c) * s->H + ih) * s->W + iw;
}

/* Direct double sums: y (forward) and dx, dw, db (backward). */
static void conv_ref(const ganfw_conv2d_shape *s, const float *x, const float *w, const float *b,
                     const float *dy, float *y, float *dx, float *dw, float *db) {
  const int64_t nx = s->N * s->C * s->H * s->W, nw = s->K * s->C * s->R * s->S;
  double *gx = calloc((size_t)nx, sizeof *gx), *gw = calloc((size_t)nw, sizeof *gw);
  double *gb = calloc((size_t)s->K, sizeof *gb);
  CU_ASSERT_FATAL(gx && gw && gb);
  for (int64_t n = 0; n < s->N; n++)
    for (int64_t k = 0; k < s->K; k++)
      for (int64_t p = 0; p < s->P; p++)
        for (int64_t q = 0; q < s->Q; q++) {
          const int64_t yi = ((n * s->K + k) * s->P + p) * s->Q + q;
          double acc = b ? b[k] : 0.0, g = dy[yi];
          gb[k] += g;
          for (int64_t c = 0; c < s->C; c++)
            for (int64_t r = 0; r < s->R; r++)
              for (int64_t t = 0; t < s->S; t++) {
                int64_t xi = conv_src(s, n, c, p, q, r, t);
                if (xi < 0) continue;
                int64_t wi = ((k * s->C + c) * s->R + r) * s->S + t;
                acc += (double)x[xi] * w[wi];
                gx[xi] += g * w[wi];
                gw[wi] += g * x[xi];
              }
          y[yi] = (float)acc;
        }
  for (int64_t i = 0; i < nx; i++) dx[i] = (float)gx[i];
  for (int64_t i = 0; i < nw; i++) dw[i] = (float)gw[i];
  for (int64_t i = 0; i < s->K; i++) db[i] = (float)gb[i];
  free(gx), free(gw), free(gb);
}

/* Everything one conv2d case needs: inputs, outputs, gradients and the workspace. */
typedef struct conv_data {
  ganfw_conv2d_shape s;
  int64_t nx, nw, ny;
  float *x, *w, *b, *y, *dy, *dx, *dw, *db;
  void *ws;
} conv_data;

static void conv_data_init(conv_data *d, const conv_case *c, uint64_t seed) {
  d->s = conv_shape(c);
  d->nx = c->N * c->C * c->H * c->W;
  d->nw = c->K * c->C * c->R * c->S;
  d->ny = c->N * c->K * d->s.P * d->s.Q;
  d->x = frand(d->nx, -1, 1, seed);
  d->w = frand(d->nw, -1, 1, seed + 1);
  d->b = c->bias ? frand(c->K, -1, 1, seed + 2) : NULL;
  d->dy = frand(d->ny, -1, 1, seed + 3);
  d->y = falloc(d->ny);
  d->dx = falloc(d->nx);
  d->dw = falloc(d->nw);
  d->db = falloc(c->K);
  d->ws = ws_alloc(ganfw_be_conv2d_workspace(cpu(), &d->s));
}

static void conv_data_free(conv_data *d) {
  gt_free(d->x), gt_free(d->w), gt_free(d->b), gt_free(d->dy), gt_free(d->y);
  gt_free(d->dx), gt_free(d->dw), gt_free(d->db);
  free(d->ws);
}

static void conv_forward_fn(void *p) {
  conv_data *d = p;
  ganfw_be_conv2d_forward(cpu(), &d->s, d->x, d->w, d->b, d->y, d->ws);
}

static void conv_label(char *buf, size_t n, const char *op, const conv_case *c, const char *what) {
  snprintf(buf, n, "%s N%lld C%lld %lldx%lld K%lld k%lldx%lld s%lld,%lld p%lld,%lld%s %s", op,
           (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->K,
           (long long)c->R, (long long)c->S, (long long)c->sh, (long long)c->sw, (long long)c->ph,
           (long long)c->pw, c->bias ? "" : " nobias", what);
}

static void test_conv2d_reference(void) {
  for (int i = 0; i < CONV_CASES; i++) {
    const conv_case *c = &conv_cases[i];
    conv_data d;
    conv_data_init(&d, c, 100 + 10 * (uint64_t)i);
    float *yr = falloc(d.ny), *dxr = falloc(d.nx), *dwr = falloc(d.nw), *dbr = falloc(c->K);
    conv_ref(&d.s, d.x, d.w, d.b, d.dy, yr, dxr, dwr, dbr);
    ffill(d.y, d.ny, NAN); /* outputs are overwritten, whatever they held */
    ffill(d.dx, d.nx, NAN);
    ffill(d.dw, d.nw, NAN);
    ffill(d.db, c->K, NAN);
    conv_forward_fn(&d);
    ganfw_be_conv2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, d.db, 0, d.ws);
    char what[160];
    conv_label(what, sizeof what, "conv2d", c, "y");
    check_ref(what, d.y, yr, d.ny);
    conv_label(what, sizeof what, "conv2d", c, "dx");
    check_ref(what, d.dx, dxr, d.nx);
    conv_label(what, sizeof what, "conv2d", c, "dw");
    check_ref(what, d.dw, dwr, d.nw);
    conv_label(what, sizeof what, "conv2d", c, "db");
    check_ref(what, d.db, dbr, c->K);
    gt_free(yr), gt_free(dxr), gt_free(dwr), gt_free(dbr);
    conv_data_free(&d);
  }
}

static void test_conv2d_gradcheck(void) {
  for (int i = 0; i < CONV_CASES; i++) {
    const conv_case *c = &conv_cases[i];
    conv_data d;
    conv_data_init(&d, c, 200 + 10 * (uint64_t)i);
    conv_forward_fn(&d);
    ganfw_be_conv2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, c->bias ? d.db : NULL, 0,
                             d.ws);
    const int64_t points = i == 7 ? 12 : GRAD_POINTS; /* the large case is slow */
    char what[160];
    conv_label(what, sizeof what, "conv2d", c, "dx");
    check_grad(what, gradcheck(conv_forward_fn, &d, d.x, d.nx, d.y, d.dy, d.ny, d.dx, points));
    conv_label(what, sizeof what, "conv2d", c, "dw");
    check_grad(what, gradcheck(conv_forward_fn, &d, d.w, d.nw, d.y, d.dy, d.ny, d.dw, points));
    if (c->bias) {
      conv_label(what, sizeof what, "conv2d", c, "db");
      check_grad(what, gradcheck(conv_forward_fn, &d, d.b, c->K, d.y, d.dy, d.ny, d.db, points));
    }
    conv_data_free(&d);
  }
}

/* accumulate=1 adds to dw and db, dx is always overwritten, and any gradient may be NULL
 * without changing the others. */
static void test_conv2d_accumulate_and_null(void) {
  const int which[] = {0, 1, 3, 7, 8};
  for (size_t j = 0; j < sizeof which / sizeof which[0]; j++) {
    const conv_case *c = &conv_cases[which[j]];
    conv_data d;
    conv_data_init(&d, c, 300 + 10 * (uint64_t)j);
    const int64_t K = c->K;
    ganfw_be_conv2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, d.db, 0, d.ws);
    float *dx0 = fcopy(d.dx, d.nx), *dw0 = fcopy(d.dw, d.nw), *db0 = fcopy(d.db, K);
    float *dw_pre = frand(d.nw, -2, 2, 77), *db_pre = frand(K, -2, 2, 78);
    float *want_dw = falloc(d.nw), *want_db = falloc(K);
    for (int64_t i = 0; i < d.nw; i++) want_dw[i] = dw_pre[i] + dw0[i];
    for (int64_t i = 0; i < K; i++) want_db[i] = db_pre[i] + db0[i];
    memcpy(d.dw, dw_pre, (size_t)d.nw * sizeof(float));
    memcpy(d.db, db_pre, (size_t)K * sizeof(float));
    ffill(d.dx, d.nx, NAN);
    ganfw_be_conv2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, d.db, 1, d.ws);
    CU_ASSERT(same(d.dw, want_dw, d.nw, 1e-4));
    CU_ASSERT(same(d.db, want_db, K, 1e-4));
    CU_ASSERT(same(d.dx, dx0, d.nx, 1e-6)); /* overwritten, not added */

    /* Each gradient alone, the others NULL (x may be NULL without dw). */
    ffill(d.dx, d.nx, NAN);
    ganfw_be_conv2d_backward(cpu(), &d.s, NULL, d.w, d.dy, d.dx, NULL, NULL, 0, d.ws);
    CU_ASSERT(same(d.dx, dx0, d.nx, 1e-6));
    ffill(d.dw, d.nw, NAN);
    ganfw_be_conv2d_backward(cpu(), &d.s, d.x, d.w, d.dy, NULL, d.dw, NULL, 0, d.ws);
    CU_ASSERT(same(d.dw, dw0, d.nw, 1e-6));
    ffill(d.db, K, NAN);
    ganfw_be_conv2d_backward(cpu(), &d.s, d.x, d.w, d.dy, NULL, NULL, d.db, 0, d.ws);
    CU_ASSERT(same(d.db, db0, K, 1e-6));
    ganfw_be_conv2d_backward(cpu(), &d.s, d.x, d.w, d.dy, NULL, NULL, NULL, 0, d.ws);
    gt_free(dx0), gt_free(dw0), gt_free(db0), gt_free(dw_pre), gt_free(db_pre);
    gt_free(want_dw), gt_free(want_db);
    conv_data_free(&d);
  }
}

/* ====================================================================================== */
/* conv_transpose2d                                                                         */
/* ====================================================================================== */

typedef struct convt_case {
  int64_t N, C, H, W, K, R, S, sh, sw, ph, pw, oph, opw;
  int bias;
} convt_case;

static const convt_case convt_cases[] = {
    {2, 3, 4, 5, 4, 3, 3, 1, 1, 1, 1, 0, 0, 1},    /* stride 1, pad 1 */
    {3, 5, 3, 3, 4, 4, 4, 2, 2, 1, 1, 0, 0, 0},    /* DC-GAN's k4 s2 p1, no bias */
    {4, 6, 1, 1, 5, 4, 4, 1, 1, 0, 0, 0, 0, 1},    /* DC-GAN's first G layer: 1x1 -> 4x4 */
    {1, 3, 3, 4, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1},    /* N=1, output padding */
    {2, 2, 5, 3, 3, 2, 3, 3, 2, 0, 1, 2, 1, 0},    /* non-square everything */
    {5, 8, 16, 16, 1, 4, 4, 2, 2, 1, 1, 0, 0, 1},  /* DC-GAN's last G layer, one output channel */
    {3, 3, 40, 40, 32, 4, 4, 1, 1, 0, 0, 0, 0, 1}, /* large output: several chunks */
};
#define CONVT_CASES ((int)(sizeof convt_cases / sizeof convt_cases[0]))

static ganfw_convt2d_shape convt_shape(const convt_case *c) {
  ganfw_convt2d_shape s = {.N = c->N,
                           .C = c->C,
                           .H = c->H,
                           .W = c->W,
                           .K = c->K,
                           .R = c->R,
                           .S = c->S,
                           .stride_h = c->sh,
                           .stride_w = c->sw,
                           .pad_h = c->ph,
                           .pad_w = c->pw,
                           .out_pad_h = c->oph,
                           .out_pad_w = c->opw};
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&s), GANFW_OK);
  return s;
}

/* Direct double sums from the definition: input (n, c, ih, iw) adds x * w[c,k,r,s] to output
 * (n, k, ih*sh - ph + r, iw*sw - pw + s). */
static void convt_ref(const ganfw_convt2d_shape *s, const float *x, const float *w, const float *b,
                      const float *dy, float *y, float *dx, float *dw, float *db) {
  const int64_t ny = s->N * s->K * s->P * s->Q, nw = s->C * s->K * s->R * s->S;
  double *gy = calloc((size_t)ny, sizeof *gy), *gw = calloc((size_t)nw, sizeof *gw);
  CU_ASSERT_FATAL(gy && gw);
  for (int64_t n = 0; n < s->N; n++)
    for (int64_t c = 0; c < s->C; c++)
      for (int64_t ih = 0; ih < s->H; ih++)
        for (int64_t iw = 0; iw < s->W; iw++) {
          const int64_t xi = ((n * s->C + c) * s->H + ih) * s->W + iw;
          double gx = 0.0;
          for (int64_t k = 0; k < s->K; k++)
            for (int64_t r = 0; r < s->R; r++)
              for (int64_t t = 0; t < s->S; t++) {
                int64_t oh = ih * s->stride_h - s->pad_h + r, ow = iw * s->stride_w - s->pad_w + t;
                if (oh < 0 || oh >= s->P || ow < 0 || ow >= s->Q) continue;
                int64_t yi = ((n * s->K + k) * s->P + oh) * s->Q + ow;
                int64_t wi = ((c * s->K + k) * s->R + r) * s->S + t;
                gy[yi] += (double)x[xi] * w[wi];
                gx += (double)dy[yi] * w[wi];
                gw[wi] += (double)dy[yi] * x[xi];
              }
          dx[xi] = (float)gx;
        }
  for (int64_t k = 0; k < s->K; k++) {
    double acc = 0.0;
    for (int64_t n = 0; n < s->N; n++)
      for (int64_t j = 0; j < s->P * s->Q; j++) {
        int64_t yi = (n * s->K + k) * s->P * s->Q + j;
        acc += dy[yi];
        y[yi] = (float)(gy[yi] + (b ? b[k] : 0.0));
      }
    db[k] = (float)acc;
  }
  for (int64_t i = 0; i < nw; i++) dw[i] = (float)gw[i];
  free(gy), free(gw);
}

typedef struct convt_data {
  ganfw_convt2d_shape s;
  int64_t nx, nw, ny;
  float *x, *w, *b, *y, *dy, *dx, *dw, *db;
  void *ws;
} convt_data;

static void convt_data_init(convt_data *d, const convt_case *c, uint64_t seed) {
  d->s = convt_shape(c);
  d->nx = c->N * c->C * c->H * c->W;
  d->nw = c->C * c->K * c->R * c->S;
  d->ny = c->N * c->K * d->s.P * d->s.Q;
  d->x = frand(d->nx, -1, 1, seed);
  d->w = frand(d->nw, -1, 1, seed + 1);
  d->b = c->bias ? frand(c->K, -1, 1, seed + 2) : NULL;
  d->dy = frand(d->ny, -1, 1, seed + 3);
  d->y = falloc(d->ny);
  d->dx = falloc(d->nx);
  d->dw = falloc(d->nw);
  d->db = falloc(c->K);
  d->ws = ws_alloc(ganfw_be_convt2d_workspace(cpu(), &d->s));
}

static void convt_data_free(convt_data *d) {
  gt_free(d->x), gt_free(d->w), gt_free(d->b), gt_free(d->dy), gt_free(d->y);
  gt_free(d->dx), gt_free(d->dw), gt_free(d->db);
  free(d->ws);
}

static void convt_forward_fn(void *p) {
  convt_data *d = p;
  ganfw_be_convt2d_forward(cpu(), &d->s, d->x, d->w, d->b, d->y, d->ws);
}

static void convt_label(char *buf, size_t n, const convt_case *c, const char *what) {
  snprintf(buf, n,
           "convT N%lld C%lld %lldx%lld K%lld k%lldx%lld s%lld,%lld p%lld,%lld op%lld,%lld%s %s",
           (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->K,
           (long long)c->R, (long long)c->S, (long long)c->sh, (long long)c->sw, (long long)c->ph,
           (long long)c->pw, (long long)c->oph, (long long)c->opw, c->bias ? "" : " nobias", what);
}

static void test_convt2d_reference(void) {
  for (int i = 0; i < CONVT_CASES; i++) {
    const convt_case *c = &convt_cases[i];
    convt_data d;
    convt_data_init(&d, c, 400 + 10 * (uint64_t)i);
    float *yr = falloc(d.ny), *dxr = falloc(d.nx), *dwr = falloc(d.nw), *dbr = falloc(c->K);
    convt_ref(&d.s, d.x, d.w, d.b, d.dy, yr, dxr, dwr, dbr);
    ffill(d.y, d.ny, NAN);
    ffill(d.dx, d.nx, NAN);
    ffill(d.dw, d.nw, NAN);
    ffill(d.db, c->K, NAN);
    convt_forward_fn(&d);
    ganfw_be_convt2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, d.db, 0, d.ws);
    char what[160];
    convt_label(what, sizeof what, c, "y");
    check_ref(what, d.y, yr, d.ny);
    convt_label(what, sizeof what, c, "dx");
    check_ref(what, d.dx, dxr, d.nx);
    convt_label(what, sizeof what, c, "dw");
    check_ref(what, d.dw, dwr, d.nw);
    convt_label(what, sizeof what, c, "db");
    check_ref(what, d.db, dbr, c->K);
    gt_free(yr), gt_free(dxr), gt_free(dwr), gt_free(dbr);
    convt_data_free(&d);
  }
}

static void test_convt2d_gradcheck(void) {
  for (int i = 0; i < CONVT_CASES; i++) {
    const convt_case *c = &convt_cases[i];
    convt_data d;
    convt_data_init(&d, c, 500 + 10 * (uint64_t)i);
    convt_forward_fn(&d);
    ganfw_be_convt2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, c->bias ? d.db : NULL, 0,
                              d.ws);
    const int64_t points = i == CONVT_CASES - 1 ? 12 : GRAD_POINTS;
    char what[160];
    convt_label(what, sizeof what, c, "dx");
    check_grad(what, gradcheck(convt_forward_fn, &d, d.x, d.nx, d.y, d.dy, d.ny, d.dx, points));
    convt_label(what, sizeof what, c, "dw");
    check_grad(what, gradcheck(convt_forward_fn, &d, d.w, d.nw, d.y, d.dy, d.ny, d.dw, points));
    if (c->bias) {
      convt_label(what, sizeof what, c, "db");
      check_grad(what, gradcheck(convt_forward_fn, &d, d.b, c->K, d.y, d.dy, d.ny, d.db, points));
    }
    convt_data_free(&d);
  }
}

static void test_convt2d_accumulate_and_null(void) {
  const int which[] = {0, 2, 3, 6};
  for (size_t j = 0; j < sizeof which / sizeof which[0]; j++) {
    const convt_case *c = &convt_cases[which[j]];
    convt_data d;
    convt_data_init(&d, c, 600 + 10 * (uint64_t)j);
    const int64_t K = c->K;
    ganfw_be_convt2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, d.db, 0, d.ws);
    float *dx0 = fcopy(d.dx, d.nx), *dw0 = fcopy(d.dw, d.nw), *db0 = fcopy(d.db, K);
    float *dw_pre = frand(d.nw, -2, 2, 87), *db_pre = frand(K, -2, 2, 88);
    float *want_dw = falloc(d.nw), *want_db = falloc(K);
    for (int64_t i = 0; i < d.nw; i++) want_dw[i] = dw_pre[i] + dw0[i];
    for (int64_t i = 0; i < K; i++) want_db[i] = db_pre[i] + db0[i];
    memcpy(d.dw, dw_pre, (size_t)d.nw * sizeof(float));
    memcpy(d.db, db_pre, (size_t)K * sizeof(float));
    ffill(d.dx, d.nx, NAN);
    ganfw_be_convt2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, d.db, 1, d.ws);
    CU_ASSERT(same(d.dw, want_dw, d.nw, 1e-4));
    CU_ASSERT(same(d.db, want_db, K, 1e-4));
    CU_ASSERT(same(d.dx, dx0, d.nx, 1e-6));

    ffill(d.dx, d.nx, NAN);
    ganfw_be_convt2d_backward(cpu(), &d.s, NULL, d.w, d.dy, d.dx, NULL, NULL, 0, d.ws);
    CU_ASSERT(same(d.dx, dx0, d.nx, 1e-6));
    ffill(d.dw, d.nw, NAN);
    ganfw_be_convt2d_backward(cpu(), &d.s, d.x, d.w, d.dy, NULL, d.dw, NULL, 0, d.ws);
    CU_ASSERT(same(d.dw, dw0, d.nw, 1e-6));
    ffill(d.db, K, NAN);
    ganfw_be_convt2d_backward(cpu(), &d.s, d.x, d.w, d.dy, NULL, NULL, d.db, 0, d.ws);
    CU_ASSERT(same(d.db, db0, K, 1e-6));
    ganfw_be_convt2d_backward(cpu(), &d.s, d.x, d.w, d.dy, NULL, NULL, NULL, 0, d.ws);
    gt_free(dx0), gt_free(dw0), gt_free(db0), gt_free(dw_pre), gt_free(db_pre);
    gt_free(want_dw), gt_free(want_db);
    convt_data_free(&d);
  }
}

/* convT is conv2d's adjoint: <convT(x), v> = <x, conv2d(v)> for the matching shapes. */
static void test_convt2d_adjoint(void) {
  const convt_case *c = &convt_cases[1];
  convt_data d;
  convt_data_init(&d, c, 700);
  ganfw_conv2d_shape cs = {.N = c->N,
                           .C = c->K,
                           .H = d.s.P,
                           .W = d.s.Q,
                           .K = c->C,
                           .R = c->R,
                           .S = c->S,
                           .stride_h = c->sh,
                           .stride_w = c->sw,
                           .pad_h = c->ph,
                           .pad_w = c->pw};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&cs), GANFW_OK);
  CU_ASSERT(cs.P == c->H && cs.Q == c->W);
  void *cws = ws_alloc(ganfw_be_conv2d_workspace(cpu(), &cs));
  float *cv = falloc(d.nx);
  ganfw_be_convt2d_forward(cpu(), &d.s, d.x, d.w, NULL, d.y, d.ws);
  ganfw_be_conv2d_forward(cpu(), &cs, d.dy, d.w, NULL, cv, cws);
  double lhs = 0.0, rhs = 0.0, scale = 0.0;
  for (int64_t i = 0; i < d.ny; i++) lhs += (double)d.y[i] * d.dy[i], scale += fabs(d.y[i]);
  for (int64_t i = 0; i < d.nx; i++) rhs += (double)d.x[i] * cv[i];
  printf("\n    convT adjoint: <convT x, v> = %.6f, <x, conv v> = %.6f", lhs, rhs);
  CU_ASSERT(fabs(lhs - rhs) <= 1e-5 * scale);
  free(cws);
  gt_free(cv);
  convt_data_free(&d);
}

/* ====================================================================================== */
/* linear                                                                                   */
/* ====================================================================================== */

typedef struct linear_data {
  int64_t N, IN, OUT;
  float *x, *w, *b, *y, *dy, *dx, *dw, *db;
} linear_data;

static void linear_forward_fn(void *p) {
  linear_data *d = p;
  ganfw_be_linear_forward(cpu(), d->N, d->IN, d->OUT, d->x, d->w, d->b, d->y);
}

static void test_linear(void) {
  /* Small, N=1 without bias, and large enough to split over threads both ways. */
  const int64_t cases[][4] = {{3, 5, 4, 1}, {1, 7, 3, 0}, {64, 300, 200, 1}, {130, 100, 20, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    linear_data d = {.N = cases[i][0], .IN = cases[i][1], .OUT = cases[i][2]};
    const int bias = (int)cases[i][3];
    const int64_t nx = d.N * d.IN, nw = d.OUT * d.IN, ny = d.N * d.OUT;
    d.x = frand(nx, -1, 1, 800 + i), d.w = frand(nw, -1, 1, 810 + i);
    d.b = bias ? frand(d.OUT, -1, 1, 820 + i) : NULL;
    d.dy = frand(ny, -1, 1, 830 + i);
    d.y = falloc(ny), d.dx = falloc(nx), d.dw = falloc(nw), d.db = falloc(d.OUT);
    float *yr = falloc(ny), *dxr = falloc(nx), *dwr = falloc(nw), *dbr = falloc(d.OUT);
    for (int64_t n = 0; n < d.N; n++)
      for (int64_t o = 0; o < d.OUT; o++) {
        double acc = d.b ? d.b[o] : 0.0;
        for (int64_t k = 0; k < d.IN; k++) acc += (double)d.x[n * d.IN + k] * d.w[o * d.IN + k];
        yr[n * d.OUT + o] = (float)acc;
      }
    for (int64_t n = 0; n < d.N; n++)
      for (int64_t k = 0; k < d.IN; k++) {
        double acc = 0.0;
        for (int64_t o = 0; o < d.OUT; o++) acc += (double)d.dy[n * d.OUT + o] * d.w[o * d.IN + k];
        dxr[n * d.IN + k] = (float)acc;
      }
    for (int64_t o = 0; o < d.OUT; o++) {
      double accb = 0.0;
      for (int64_t n = 0; n < d.N; n++) accb += d.dy[n * d.OUT + o];
      dbr[o] = (float)accb;
      for (int64_t k = 0; k < d.IN; k++) {
        double acc = 0.0;
        for (int64_t n = 0; n < d.N; n++) acc += (double)d.dy[n * d.OUT + o] * d.x[n * d.IN + k];
        dwr[o * d.IN + k] = (float)acc;
      }
    }
    ffill(d.y, ny, NAN), ffill(d.dx, nx, NAN), ffill(d.dw, nw, NAN), ffill(d.db, d.OUT, NAN);
    linear_forward_fn(&d);
    ganfw_be_linear_backward(cpu(), d.N, d.IN, d.OUT, d.x, d.w, d.dy, d.dx, d.dw, d.db, 0);
    char what[128];
    snprintf(what, sizeof what, "linear N%lld IN%lld OUT%lld%s", (long long)d.N, (long long)d.IN,
             (long long)d.OUT, bias ? "" : " nobias");
    char sub[160];
    snprintf(sub, sizeof sub, "%s y", what);
    check_ref(sub, d.y, yr, ny);
    snprintf(sub, sizeof sub, "%s dx", what);
    check_ref(sub, d.dx, dxr, nx);
    snprintf(sub, sizeof sub, "%s dw", what);
    check_ref(sub, d.dw, dwr, nw);
    snprintf(sub, sizeof sub, "%s db", what);
    check_ref(sub, d.db, dbr, d.OUT);

    snprintf(sub, sizeof sub, "%s dx", what);
    check_grad(sub, gradcheck(linear_forward_fn, &d, d.x, nx, d.y, d.dy, ny, d.dx, GRAD_POINTS));
    snprintf(sub, sizeof sub, "%s dw", what);
    check_grad(sub, gradcheck(linear_forward_fn, &d, d.w, nw, d.y, d.dy, ny, d.dw, GRAD_POINTS));
    if (bias) {
      snprintf(sub, sizeof sub, "%s db", what);
      check_grad(sub,
                 gradcheck(linear_forward_fn, &d, d.b, d.OUT, d.y, d.dy, ny, d.db, GRAD_POINTS));
    }

    /* accumulate=1 adds to dw and db; dx overwritten; NULL gradients skipped. */
    float *dw_pre = frand(nw, -2, 2, 840 + i), *db_pre = frand(d.OUT, -2, 2, 850 + i);
    memcpy(d.dw, dw_pre, (size_t)nw * sizeof(float));
    memcpy(d.db, db_pre, (size_t)d.OUT * sizeof(float));
    ffill(d.dx, nx, NAN);
    ganfw_be_linear_backward(cpu(), d.N, d.IN, d.OUT, d.x, d.w, d.dy, d.dx, d.dw, d.db, 1);
    for (int64_t k = 0; k < nw; k++) dw_pre[k] += dwr[k];
    for (int64_t k = 0; k < d.OUT; k++) db_pre[k] += dbr[k];
    CU_ASSERT(gt_max_rel_err(d.dw, dw_pre, nw, REF_FLOOR * max_abs(dw_pre, nw)) <= REF_TOL);
    CU_ASSERT(gt_max_rel_err(d.db, db_pre, d.OUT, REF_FLOOR * max_abs(db_pre, d.OUT)) <= REF_TOL);
    CU_ASSERT(gt_max_rel_err(d.dx, dxr, nx, REF_FLOOR * max_abs(dxr, nx)) <= REF_TOL);
    ffill(d.dw, nw, NAN);
    ganfw_be_linear_backward(cpu(), d.N, d.IN, d.OUT, NULL, d.w, d.dy, d.dx, NULL, NULL, 0);
    CU_ASSERT(isnan(d.dw[0]));
    ganfw_be_linear_backward(cpu(), d.N, d.IN, d.OUT, d.x, NULL, d.dy, NULL, d.dw, NULL, 0);
    CU_ASSERT(gt_max_rel_err(d.dw, dwr, nw, REF_FLOOR * max_abs(dwr, nw)) <= REF_TOL);
    ganfw_be_linear_backward(cpu(), d.N, d.IN, d.OUT, NULL, NULL, d.dy, NULL, NULL, NULL, 0);

    gt_free(dw_pre), gt_free(db_pre), gt_free(yr), gt_free(dxr), gt_free(dwr), gt_free(dbr);
    gt_free(d.x), gt_free(d.w), gt_free(d.b), gt_free(d.dy), gt_free(d.y), gt_free(d.dx);
    gt_free(d.dw), gt_free(d.db);
  }
}

/* ====================================================================================== */
/* threads and workspace                                                                    */
/* ====================================================================================== */

/* Bit for bit the same results on 1, 2, 3 and 4 threads, with the workspace size queried
 * once (it does not depend on the thread count): every split of the work (GEMM blocks,
 * conv groups, Winograd parts, BatchNorm tiles) depends on the shape alone, so each output
 * element is computed by the same operations in the same order whatever the team size. The
 * shapes are large enough that every pass splits: im2col conv2d with several groups and a
 * dW GEMM split in blocks, a Winograd one (N >= 16, C, K >= 64), convT with several chunks,
 * a dense (1x1-output) conv, and linear both ways. */
static int bits_equal(const float *a, const float *b, int64_t n) {
  return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static void report_bits(const char *what, int t, const float *a, const float *b, int64_t n) {
  const int eq = bits_equal(a, b, n);
  if (!eq)
    printf("\n    %s: %d threads differ from 1 thread (max rel err %.2e)", what, t,
           gt_max_rel_err(a, b, n, 1e-6));
  CU_ASSERT(eq);
}

static void thread_count_conv(const conv_case *c, const char *what) {
  const int saved = ganfw_cpu_threads();
  conv_data d;
  conv_data_init(&d, c, 900);
  const size_t ws_bytes = ganfw_be_conv2d_workspace(cpu(), &d.s);
  float *y1 = NULL, *dx1 = NULL, *dw1 = NULL, *db1 = NULL;
  char label[96];
  for (int t = 1; t <= 4; t++) {
    ganfw_cpu_set_threads(NULL, t);
    CU_ASSERT_EQUAL(ganfw_cpu_threads(), t);
    CU_ASSERT_EQUAL(ganfw_be_conv2d_workspace(cpu(), &d.s), ws_bytes);
    conv_forward_fn(&d);
    ganfw_be_conv2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, d.db, 0, d.ws);
    /* accumulate = 1 on top of the result: dw and db double, through the same order */
    ganfw_be_conv2d_backward(cpu(), &d.s, d.x, d.w, d.dy, NULL, d.dw, d.db, 1, d.ws);
    if (t == 1) {
      y1 = fcopy(d.y, d.ny), dx1 = fcopy(d.dx, d.nx), dw1 = fcopy(d.dw, d.nw);
      db1 = fcopy(d.db, c->K);
      continue;
    }
    snprintf(label, sizeof label, "conv2d %s y", what);
    report_bits(label, t, d.y, y1, d.ny);
    snprintf(label, sizeof label, "conv2d %s dx", what);
    report_bits(label, t, d.dx, dx1, d.nx);
    snprintf(label, sizeof label, "conv2d %s dw", what);
    report_bits(label, t, d.dw, dw1, d.nw);
    snprintf(label, sizeof label, "conv2d %s db", what);
    report_bits(label, t, d.db, db1, c->K);
  }
  ganfw_cpu_set_threads(NULL, saved);
  gt_free(y1), gt_free(dx1), gt_free(dw1), gt_free(db1);
  conv_data_free(&d);
}

static void thread_count_convt(const convt_case *c) {
  const int saved = ganfw_cpu_threads();
  convt_data d;
  convt_data_init(&d, c, 910);
  float *y1 = NULL, *dx1 = NULL, *dw1 = NULL, *db1 = NULL;
  for (int t = 1; t <= 4; t++) {
    ganfw_cpu_set_threads(NULL, t);
    convt_forward_fn(&d);
    ganfw_be_convt2d_backward(cpu(), &d.s, d.x, d.w, d.dy, d.dx, d.dw, d.db, 0, d.ws);
    if (t == 1) {
      y1 = fcopy(d.y, d.ny), dx1 = fcopy(d.dx, d.nx), dw1 = fcopy(d.dw, d.nw);
      db1 = fcopy(d.db, c->K);
      continue;
    }
    report_bits("convT y", t, d.y, y1, d.ny);
    report_bits("convT dx", t, d.dx, dx1, d.nx);
    report_bits("convT dw", t, d.dw, dw1, d.nw);
    report_bits("convT db", t, d.db, db1, c->K);
  }
  ganfw_cpu_set_threads(NULL, saved);
  gt_free(y1), gt_free(dx1), gt_free(dw1), gt_free(db1);
  convt_data_free(&d);
}

static void thread_count_linear(int64_t N, int64_t IN, int64_t OUT) {
  const int saved = ganfw_cpu_threads();
  float *x = frand(N * IN, -1, 1, 920), *w = frand(OUT * IN, -1, 1, 921);
  float *b = frand(OUT, -1, 1, 922), *dy = frand(N * OUT, -1, 1, 923);
  float *y = falloc(N * OUT), *dx = falloc(N * IN), *dw = falloc(OUT * IN), *db = falloc(OUT);
  float *y1 = NULL, *dx1 = NULL, *dw1 = NULL, *db1 = NULL;
  for (int t = 1; t <= 4; t++) {
    ganfw_cpu_set_threads(NULL, t);
    ganfw_be_linear_forward(cpu(), N, IN, OUT, x, w, b, y);
    ganfw_be_linear_backward(cpu(), N, IN, OUT, x, w, dy, dx, dw, db, 0);
    if (t == 1) {
      y1 = fcopy(y, N * OUT), dx1 = fcopy(dx, N * IN), dw1 = fcopy(dw, OUT * IN);
      db1 = fcopy(db, OUT);
      continue;
    }
    report_bits("linear y", t, y, y1, N * OUT);
    report_bits("linear dx", t, dx, dx1, N * IN);
    report_bits("linear dw", t, dw, dw1, OUT * IN);
    report_bits("linear db", t, db, db1, OUT);
  }
  ganfw_cpu_set_threads(NULL, saved);
  gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(y), gt_free(dx), gt_free(dw);
  gt_free(db), gt_free(y1), gt_free(dx1), gt_free(dw1), gt_free(db1);
}

/* A GEMM large enough to be cut into blocks (gemm.c), both ways and transposed. */
static void thread_count_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K) {
  const int saved = ganfw_cpu_threads();
  float *A = frand(M * K, -1, 1, 930), *B = frand(K * N, -1, 1, 931);
  float *C = falloc(M * N), *C1 = NULL;
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  for (int t = 1; t <= 4; t++) {
    ganfw_cpu_set_threads(NULL, t);
    gt_fill_uniform(C, M * N, -1, 1, 932);
    ganfw_cpu_gemm(NULL, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.5f, C, N);
    if (t == 1) {
      C1 = fcopy(C, M * N);
      continue;
    }
    report_bits("gemm", t, C, C1, M * N);
  }
  ganfw_cpu_set_threads(NULL, saved);
  gt_free(A), gt_free(B), gt_free(C), gt_free(C1);
}

static void test_thread_count(void) {
  const int saved = ganfw_cpu_threads();
  thread_count_gemm(0, 1, 200, 1000, 300); /* columns in 7 blocks */
  thread_count_gemm(1, 0, 1000, 130, 200); /* rows in 7 blocks */
  /* DC-GAN's k4 s2 p1 at 8 images and 16 channels: im2col, its dW GEMM split in blocks (the
   * case the issue reported: dW on 2 and 3 threads differed from 1 thread's). */
  const conv_case im2col = {8, 16, 16, 16, 32, 4, 4, 2, 2, 1, 1, 1};
  thread_count_conv(&im2col, "im2col k4s2");
  /* The same at 64 -> 64 channels: dW [64, 1024] over 512 columns, in 8 GEMM blocks. */
  const conv_case im2col_wide = {8, 64, 16, 16, 64, 4, 4, 2, 2, 1, 1, 1};
  thread_count_conv(&im2col_wide, "im2col k4s2 64ch");
  /* Stride 1, 3x3, 32 images of 8x8: many groups of 2 images. */
  const conv_case groups = {32, 8, 8, 8, 24, 3, 3, 1, 1, 1, 1, 1};
  thread_count_conv(&groups, "im2col k3s1");
  /* The Winograd path (ganfw_cpu_conv2d_winograd_use: 16 images, 64 -> 64 channels). */
  const conv_case wino = {16, 64, 8, 8, 64, 4, 4, 2, 2, 1, 1, 0};
  thread_count_conv(&wino, "winograd");
  /* Dense: the kernel covers the input (DC-GAN's last D layer), plain GEMMs over the batch. */
  const conv_case dense = {64, 128, 4, 4, 1, 4, 4, 1, 1, 0, 0, 1};
  thread_count_conv(&dense, "dense");
  const convt_case convt = {16, 64, 8, 8, 32, 4, 4, 2, 2, 1, 1, 0, 0, 1};
  thread_count_convt(&convt);
  thread_count_linear(64, 300, 200);  /* one GEMM call each */
  thread_count_linear(256, 512, 384); /* 3 and 4 blocks, columns and rows */
  ganfw_cpu_set_threads(NULL, 0);     /* one per processor */
  CU_ASSERT(ganfw_cpu_threads() >= 1);
  ganfw_cpu_set_threads(NULL, saved);
}

/* Workspaces stay bounded (a chunk of images, documented in conv2d.c as about 2 x 8 MiB, or one
 * image's columns when that is larger), and the dense 1x1-output layers need none. */
static void test_workspace_bounds(void) {
  const size_t bound = (size_t)16 << 20;
  /* DC-GAN D at 64x64 resolution, batch 256: the whole batch's columns would be 1 GiB. */
  ganfw_conv2d_shape s = {.N = 256,
                          .C = 64,
                          .H = 32,
                          .W = 32,
                          .K = 128,
                          .R = 4,
                          .S = 4,
                          .stride_h = 2,
                          .stride_w = 2,
                          .pad_h = 1,
                          .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  size_t ws = ganfw_be_conv2d_workspace(cpu(), &s);
  printf("\n    conv2d 64->128 32x32 batch 256 workspace %.2f MiB", (double)ws / (1 << 20));
  CU_ASSERT(ws > 0 && ws <= bound);
  ganfw_convt2d_shape t = {.N = 256,
                           .C = 128,
                           .H = 16,
                           .W = 16,
                           .K = 64,
                           .R = 4,
                           .S = 4,
                           .stride_h = 2,
                           .stride_w = 2,
                           .pad_h = 1,
                           .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&t), GANFW_OK);
  ws = ganfw_be_convt2d_workspace(cpu(), &t);
  CU_ASSERT(ws > 0 && ws <= bound);
  /* One image larger than the chunk budget: about one image's columns (plus its padded
   * input plane and alignment). */
  s = (ganfw_conv2d_shape){.N = 4,
                           .C = 64,
                           .H = 64,
                           .W = 64,
                           .K = 8,
                           .R = 5,
                           .S = 5,
                           .stride_h = 1,
                           .stride_w = 1,
                           .pad_h = 2,
                           .pad_w = 2};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  ws = ganfw_be_conv2d_workspace(cpu(), &s);
  const size_t one_image = (size_t)(64 * 25 + 8) * 64 * 64 * sizeof(float);
  CU_ASSERT(ws >= one_image && ws <= one_image + one_image / 50);
  /* Kernel = input: plain GEMMs, no workspace. */
  s = (ganfw_conv2d_shape){
      .N = 64, .C = 256, .H = 4, .W = 4, .K = 1, .R = 4, .S = 4, .stride_h = 1, .stride_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_be_conv2d_workspace(cpu(), &s), 0);
  t = (ganfw_convt2d_shape){
      .N = 64, .C = 100, .H = 1, .W = 1, .K = 256, .R = 4, .S = 4, .stride_h = 1, .stride_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&t), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_be_convt2d_workspace(cpu(), &t), 0);
}

static CU_TestInfo tests[] = {
    {"shapes", test_shapes},
    {"gemm", test_gemm},
    {"conv2d_reference", test_conv2d_reference},
    {"conv2d_gradcheck", test_conv2d_gradcheck},
    {"conv2d_accumulate_and_null", test_conv2d_accumulate_and_null},
    {"convt2d_reference", test_convt2d_reference},
    {"convt2d_gradcheck", test_convt2d_gradcheck},
    {"convt2d_accumulate_and_null", test_convt2d_accumulate_and_null},
    {"convt2d_adjoint", test_convt2d_adjoint},
    {"linear", test_linear},
    {"thread_count", test_thread_count},
    {"workspace_bounds", test_workspace_bounds},
    CU_TEST_INFO_NULL,
};

GT_MAIN("ops_dense", tests)
