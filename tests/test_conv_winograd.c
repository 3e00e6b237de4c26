/* The Winograd conv2d kernels (core/src/backend/cpu/conv_winograd.c: 4x4 kernels, stride 2) against
 * direct double sums, side by side with the im2col + GEMM path on the same data: y (with
 * bias), dx, dw overwritten and accumulated, on DC-GAN's layer shapes at batch 64 and on odd
 * sizes (odd H or W, outputs not a multiple of the 2x2 tile, N = 1, C = 1, K = 1, padding 0
 * and 2, a batch over several chunks and a partial lane block). Each Winograd error must stay
 * within 3x of im2col's (or of 3 FLT_EPSILON where im2col's is smaller); shapes whose sums
 * have a few terms only (never dispatched) within 6x. GANFW_CONV_IM2COL=1 is set before the
 * first conv2d call, so that the CPU's conv2d ops take the im2col path here; the dispatch itself
 * (conv2d and conv_transpose2d give the Winograd results) is checked in a child process
 * forked before that. Also: dx alone and dw alone, 1 vs 2 threads, which shapes fit. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "backend/cpu/conv_winograd.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

#define ERR_RATIO 3.0
/* Sums of 4 to 48 terms (C = 1, K = 1, ...): a few roundings in the transforms weigh more
 * than the sum's own; conv2d never sends such shapes to Winograd. */
#define ERR_RATIO_TINY 6.0
#define REF_FLOOR      1e-2

typedef struct wg_case {
  const char *name;
  int64_t N, C, H, W, K, pad;
  int tiny; /* reductions of a few terms: not dispatched, checked against ERR_RATIO_TINY */
} wg_case;

static const wg_case cases[] = {
    {"D2/G3 64->128 16->8", 64, 64, 16, 16, 128, 1, 0},
    {"D3/G2 128->256 8->4", 64, 128, 8, 8, 256, 1, 0},
    {"D1/G4 1->64 32->16", 64, 1, 32, 32, 64, 1, 0},
    {"17 images 13x11 -> 6x5", 17, 64, 13, 11, 64, 1, 0},
    {"N=1 33x31 -> 16x15", 1, 64, 33, 31, 64, 1, 0},
    {"pad 0 12x12 -> 5x5", 16, 64, 12, 12, 64, 0, 0},
    {"pad 2 10x6 -> 6x4", 2, 16, 10, 6, 24, 2, 0},
    {"40 images 64x64 -> 32x32, 3 chunks", 40, 16, 64, 64, 16, 1, 0},
    {"odd 9x7 -> 4x3", 3, 5, 9, 7, 6, 1, 1},
    {"N=1 C=1 K=1 6x10 -> 3x5", 1, 1, 6, 10, 1, 1, 1},
    {"17 images 13x11 -> 6x5 K=1", 17, 3, 13, 11, 1, 1, 1},
    {"pad 2 10x6 -> 6x4 small", 2, 3, 10, 6, 5, 2, 1},
};
#define CASES ((int)(sizeof cases / sizeof cases[0]))

static ganfw_conv2d_shape case_shape(const wg_case *c) {
  ganfw_conv2d_shape s = {.N = c->N,
                          .C = c->C,
                          .H = c->H,
                          .W = c->W,
                          .K = c->K,
                          .R = 4,
                          .S = 4,
                          .stride_h = 2,
                          .stride_w = 2,
                          .pad_h = c->pad,
                          .pad_w = c->pad};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  CU_ASSERT_FATAL(ganfw_cpu_conv2d_winograd_fits(&s));
  return s;
}

/* The errors of one pass, Winograd's and im2col's, the largest over the draws. */
typedef struct pass_err {
  double wino, im2col;
} pass_err;

static void add_err(pass_err *e, const float *wino, const float *im2col, const double *want,
                    int64_t n) {
  e->wino = fmax(e->wino, gt_rel_err(wino, want, n, REF_FLOOR));
  e->im2col = fmax(e->im2col, gt_rel_err(im2col, want, n, REF_FLOOR));
}

static void check_pass(const wg_case *c, const char *pass, pass_err e, int draws) {
  const double bound = (c->tiny ? ERR_RATIO_TINY : ERR_RATIO) * fmax(e.im2col, FLT_EPSILON);
  printf("\n    %-36s %-4s x%-2d winograd %.2e  im2col %.2e  ratio %5.2f", c->name, pass, draws,
         e.wino, e.im2col, e.wino / fmax(e.im2col, FLT_EPSILON));
  CU_ASSERT(e.wino <= bound);
  if (!(e.wino <= bound)) printf("  <-- above %.2e", bound);
}

static int same(const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabsf(a[i] - b[i]) <= 1e-5f * fmaxf(1.0f, fabsf(b[i])))) return 0;
  return 1;
}

/* Errors of the four passes on one draw of random data; dx alone and dw alone must give
 * what both together gave. */
static void run_draw(const ganfw_conv2d_shape *s, uint64_t seed, void *wsw, void *wsi,
                     pass_err e[4]) {
  const int64_t nx = s->N * s->C * s->H * s->W, nw = s->K * s->C * 16;
  const int64_t ny = s->N * s->K * s->P * s->Q;
  float *x = gt_frand(nx, seed), *w = gt_frand(nw, seed + 1), *b = gt_frand(s->K, seed + 2);
  float *dy = gt_frand(ny, seed + 3), *dw0 = gt_frand(nw, seed + 4);
  double *yr = malloc((size_t)ny * sizeof *yr), *dxr = malloc((size_t)nx * sizeof *dxr);
  double *dwr = malloc((size_t)nw * sizeof *dwr), *dwa = malloc((size_t)nw * sizeof *dwa);
  CU_ASSERT_FATAL(yr && dxr && dwr && dwa);
  gt_conv2d_ref(s, x, w, b, dy, yr, dxr, dwr);
  for (int64_t i = 0; i < nw; i++) dwa[i] = dwr[i] + dw0[i];

  float *yw = gt_falloc(ny), *dxw = gt_falloc(nx), *dww = gt_falloc(nw), *dwaw = gt_falloc(nw);
  float *yi = gt_falloc(ny), *dxi = gt_falloc(nx), *dwi = gt_falloc(nw), *dwai = gt_falloc(nw);
  for (int64_t i = 0; i < nx; i++) dxw[i] = NAN; /* outputs are overwritten */
  for (int64_t i = 0; i < nw; i++) dww[i] = NAN;
  memcpy(dwaw, dw0, (size_t)nw * sizeof *dw0);
  memcpy(dwai, dw0, (size_t)nw * sizeof *dw0);

  ganfw_cpu_conv2d_winograd_forward(s, GANFW_DTYPE_F32, x, w, b, yw, NULL, wsw);
  ganfw_cpu_conv2d_winograd_backward(s, GANFW_DTYPE_F32, x, w, dy, dxw, dww, 0, NULL, NULL, wsw);
  ganfw_cpu_conv2d_winograd_backward(s, GANFW_DTYPE_F32, x, w, dy, NULL, dwaw, 1, NULL, NULL, wsw);
  ganfw_be_conv2d_forward(cpu(), s, x, w, b, yi, wsi);
  ganfw_be_conv2d_backward(cpu(), s, x, w, dy, dxi, dwi, NULL, 0, wsi);
  ganfw_be_conv2d_backward(cpu(), s, x, w, dy, NULL, dwai, NULL, 1, wsi);
  add_err(&e[0], yw, yi, yr, ny);
  add_err(&e[1], dxw, dxi, dxr, nx);
  add_err(&e[2], dww, dwi, dwr, nw);
  add_err(&e[3], dwaw, dwai, dwa, nw);

  float *dx1 = gt_falloc(nx), *dw1 = gt_falloc(nw);
  ganfw_cpu_conv2d_winograd_backward(s, GANFW_DTYPE_F32, x, w, dy, dx1, NULL, 0, NULL, NULL, wsw);
  ganfw_cpu_conv2d_winograd_backward(s, GANFW_DTYPE_F32, x, w, dy, NULL, dw1, 0, NULL, NULL, wsw);
  CU_ASSERT(same(dx1, dxw, nx));
  CU_ASSERT(same(dw1, dww, nw));

  gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(dw0);
  gt_free(yw), gt_free(dxw), gt_free(dww), gt_free(dwaw);
  gt_free(yi), gt_free(dxi), gt_free(dwi), gt_free(dwai), gt_free(dx1), gt_free(dw1);
  free(yr), free(dxr), free(dwr), free(dwa);
}

/* A maximum over a few values is a noisy estimate of an error's tail: small shapes get more
 * draws of random data, until each pass has compared at least DRAW_VALUES values. */
#define DRAW_VALUES 20000
#define MAX_DRAWS   32

static void run_case(const wg_case *c, uint64_t seed) {
  const ganfw_conv2d_shape s = case_shape(c);
  const int64_t nx = s.N * s.C * s.H * s.W, nw = s.K * s.C * 16, ny = s.N * s.K * s.P * s.Q;
  int64_t fewest = nx < nw ? nx : nw;
  if (ny < fewest) fewest = ny;
  int draws = (int)((DRAW_VALUES + fewest - 1) / fewest);
  if (draws > MAX_DRAWS) draws = MAX_DRAWS;
  void *wsw = gt_malloc_exact(ganfw_cpu_conv2d_winograd_workspace(&s));
  void *wsi = gt_malloc_exact(ganfw_be_conv2d_workspace(cpu(), &s));
  if (c->tiny) {
    for (int p = 0; p < GANFW_CONV_PASS_COUNT; p++)
      CU_ASSERT(!ganfw_cpu_conv2d_winograd_use(&s, (ganfw_conv_pass)p));
  }
  pass_err e[4] = {{0}};
  for (int d = 0; d < draws; d++) run_draw(&s, seed + 10 * (uint64_t)d, wsw, wsi, e);
  check_pass(c, "y", e[0], draws);
  check_pass(c, "dx", e[1], draws);
  check_pass(c, "dw", e[2], draws);
  check_pass(c, "dw+=", e[3], draws);
  free(wsw), free(wsi);
}

static void test_hot_shapes(void) {
  ganfw_cpu_set_threads(NULL, 2);
  for (int i = 0; i < 3; i++) run_case(&cases[i], 1000 + 1000 * (uint64_t)i);
}

static void test_odd_shapes(void) {
  ganfw_cpu_set_threads(NULL, 2);
  for (int i = 3; i < CASES; i++) run_case(&cases[i], 1000 + 1000 * (uint64_t)i);
}

/* One and two threads split the transforms and GEMMs differently, with the same result up to
 * summation order. */
static void test_threads(void) {
  const ganfw_conv2d_shape s = case_shape(&cases[6]);
  const int64_t nx = s.N * s.C * s.H * s.W, nw = s.K * s.C * 16, ny = s.N * s.K * s.P * s.Q;
  float *x = gt_frand(nx, 7), *w = gt_frand(nw, 8), *dy = gt_frand(ny, 9);
  float *y[2], *dx[2], *dw[2];
  void *ws = gt_malloc_exact(ganfw_cpu_conv2d_winograd_workspace(&s));
  for (int t = 0; t < 2; t++) {
    ganfw_cpu_set_threads(NULL, t + 1);
    y[t] = gt_falloc(ny), dx[t] = gt_falloc(nx), dw[t] = gt_falloc(nw);
    ganfw_cpu_conv2d_winograd_forward(&s, GANFW_DTYPE_F32, x, w, NULL, y[t], NULL, ws);
    ganfw_cpu_conv2d_winograd_backward(&s, GANFW_DTYPE_F32, x, w, dy, dx[t], dw[t], 0, NULL, NULL,
                                       ws);
  }
  CU_ASSERT(same(y[1], y[0], ny));
  CU_ASSERT(same(dx[1], dx[0], nx));
  CU_ASSERT(same(dw[1], dw[0], nw));
  for (int t = 0; t < 2; t++) gt_free(y[t]), gt_free(dx[t]), gt_free(dw[t]);
  gt_free(x), gt_free(w), gt_free(dy), free(ws);
}

/* Shapes the kernels do not take: other kernels, strides and paddings. */
static void test_fits(void) {
  ganfw_conv2d_shape s = {.N = 1,
                          .C = 2,
                          .H = 8,
                          .W = 8,
                          .K = 3,
                          .R = 4,
                          .S = 4,
                          .stride_h = 2,
                          .stride_w = 2,
                          .pad_h = 1,
                          .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  CU_ASSERT(ganfw_cpu_conv2d_winograd_fits(&s));
  ganfw_conv2d_shape t = s;
  t.stride_h = t.stride_w = 1;
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&t), GANFW_OK);
  CU_ASSERT(!ganfw_cpu_conv2d_winograd_fits(&t));
  t = s;
  t.R = t.S = 3;
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&t), GANFW_OK);
  CU_ASSERT(!ganfw_cpu_conv2d_winograd_fits(&t));
  t = s;
  t.pad_w = 4;
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&t), GANFW_OK);
  CU_ASSERT(!ganfw_cpu_conv2d_winograd_fits(&t));
}

/* --- the dispatch in conv2d.c and conv_transpose2d.c ---------------------------------------
 * Runs in a child process forked before anything read GANFW_CONV_IM2COL (the rest of the
 * suite sets it): conv2d and conv_transpose2d on a shape the dispatch takes must give
 * exactly the Winograd kernels' results, the bias gradient its direct sum, and the
 * workspace must be im2col's and hold the Winograd kernels'; a batch whose Winograd
 * workspace would exceed im2col's is refused. Returns the number of failed checks. */
static int dispatch_checks(void) {
  /* DC-GAN's batch of 64 on its 128 -> 256, 8x8 -> 4x4 layer: taken by the dispatch within
   * im2col's workspace (in chunks of 32 images); at batch 16 the transformed weights alone
   * exceed im2col's workspace and the dispatch must refuse it */
  ganfw_conv2d_shape small = {.N = 16,
                              .C = 128,
                              .H = 8,
                              .W = 8,
                              .K = 256,
                              .R = 4,
                              .S = 4,
                              .stride_h = 2,
                              .stride_w = 2,
                              .pad_h = 1,
                              .pad_w = 1};
  if (ganfw_conv2d_shape_init(&small) != GANFW_OK) return 1;
  int refused = 0;
  for (int p = 0; p < GANFW_CONV_PASS_COUNT; p++)
    refused += !ganfw_cpu_conv2d_winograd_use(&small, (ganfw_conv_pass)p);
  if (refused != GANFW_CONV_PASS_COUNT) return 1;
  ganfw_conv2d_shape s = {.N = 64,
                          .C = 128,
                          .H = 8,
                          .W = 8,
                          .K = 256,
                          .R = 4,
                          .S = 4,
                          .stride_h = 2,
                          .stride_w = 2,
                          .pad_h = 1,
                          .pad_w = 1};
  if (ganfw_conv2d_shape_init(&s) != GANFW_OK) return 1;
  ganfw_cpu_set_threads(NULL, 2);
  int fails = 0;
  for (int p = 0; p < GANFW_CONV_PASS_COUNT; p++)
    fails += !ganfw_cpu_conv2d_winograd_use(&s, (ganfw_conv_pass)p);
  const int64_t nx = s.N * s.C * s.H * s.W, nw = s.K * s.C * 16, ny = s.N * s.K * s.P * s.Q;
  float *x = gt_frand(nx, 1), *w = gt_frand(nw, 2), *b = gt_frand(s.K, 3), *dy = gt_frand(ny, 4);
  float *y0 = gt_falloc(ny), *dx0 = gt_falloc(nx), *dw0 = gt_falloc(nw);
  float *y1 = gt_falloc(ny), *dx1 = gt_falloc(nx), *dw1 = gt_falloc(nw), *db = gt_falloc(s.K);
  const size_t wsw = ganfw_cpu_conv2d_winograd_workspace(&s);
  const size_t wsc = ganfw_be_conv2d_workspace(cpu(), &s);
  fails += wsc < wsw;
  fails += wsc != ganfw_cpu_conv2d_im2col_workspace(&s); /* the same for both paths */
  void *ws = malloc(wsc); /* CUnit's assertions are not for the child */
  if (!ws) return 1;
  /* conv2d */
  ganfw_cpu_conv2d_winograd_forward(&s, GANFW_DTYPE_F32, x, w, b, y0, NULL, ws);
  ganfw_cpu_conv2d_winograd_backward(&s, GANFW_DTYPE_F32, x, w, dy, dx0, dw0, 0, NULL, NULL, ws);
  ganfw_be_conv2d_forward(cpu(), &s, x, w, b, y1, ws);
  ganfw_be_conv2d_backward(cpu(), &s, x, w, dy, dx1, dw1, db, 0, ws);
  fails += memcmp(y0, y1, (size_t)ny * sizeof *y0) != 0;
  fails += memcmp(dx0, dx1, (size_t)nx * sizeof *dx0) != 0;
  fails += memcmp(dw0, dw1, (size_t)nw * sizeof *dw0) != 0;
  for (int64_t k = 0; k < s.K; k++) {
    double sum = 0.0;
    for (int64_t n = 0; n < s.N; n++)
      for (int64_t i = 0; i < s.P * s.Q; i++) sum += dy[(n * s.K + k) * s.P * s.Q + i];
    fails += fabs(db[k] - sum) > 1e-4 * fmax(1.0, fabs(sum));
  }
  /* conv_transpose2d with the roles swapped: its x is the conv's dy, its y the conv's x */
  ganfw_convt2d_shape t = {.N = s.N,
                           .C = s.K,
                           .H = s.P,
                           .W = s.Q,
                           .K = s.C,
                           .R = 4,
                           .S = 4,
                           .stride_h = 2,
                           .stride_w = 2,
                           .pad_h = s.pad_h,
                           .pad_w = s.pad_w};
  if (ganfw_convt2d_shape_init(&t) != GANFW_OK) return 1;
  fails += t.P != s.H || t.Q != s.W;
  fails += ganfw_be_convt2d_workspace(cpu(), &t) < wsw;
  ganfw_be_convt2d_forward(cpu(), &t, dy, w, NULL, dx1, ws);            /* = conv backward-data */
  ganfw_be_convt2d_backward(cpu(), &t, dy, w, x, y1, dw1, NULL, 0, ws); /* dx = conv forward */
  ganfw_cpu_conv2d_winograd_forward(&s, GANFW_DTYPE_F32, x, w, NULL, y0, NULL, ws);
  fails += memcmp(dx0, dx1, (size_t)nx * sizeof *dx0) != 0;
  fails += memcmp(y0, y1, (size_t)ny * sizeof *y0) != 0;
  /* convT's dw is the conv's dw with the convT's dy (= the conv's x) as input */
  fails += memcmp(dw0, dw1, (size_t)nw * sizeof *dw0) != 0;
  printf("\ndispatch checks in a child process: %d failed\n", fails);
  fflush(stdout);
  gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(y0), gt_free(dx0), gt_free(dw0);
  gt_free(y1), gt_free(dx1), gt_free(dw1), gt_free(db), free(ws);
  return fails;
}

/* The child's exit status: 0 when every dispatch check passed. */
static int dispatch_status = -1;

static void test_dispatch(void) {
  CU_ASSERT_EQUAL(dispatch_status, 0);
}

static int suite_init(void) {
  return setenv("GANFW_CONV_IM2COL", "1", 1);
}

static CU_TestInfo tests[] = {{"fits", test_fits},
                              {"dispatch", test_dispatch},
                              {"hot_shapes", test_hot_shapes},
                              {"odd_shapes", test_odd_shapes},
                              {"threads", test_threads},
                              CU_TEST_INFO_NULL};

int main(void) {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) _exit(dispatch_checks() ? 1 : 0);
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status))
    dispatch_status = WEXITSTATUS(status);
  return gt_run_fixture("conv_winograd", tests, suite_init, NULL);
}
