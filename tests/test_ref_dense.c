/* The CPU conv2d, conv_transpose2d and linear kernels against PyTorch (tests/ref/gen_dense.py:
 * F.conv2d / F.conv_transpose2d / F.linear and autograd, computed in float64 from the same
 * f32 inputs): y, dx, dw and db on the DC-GAN 32x32 layers (batch 64 for one layer per op)
 * and on odd shapes. The error is max |got - want| / max(|want|, floor), with the floor a
 * fraction of the largest |want| of the tensor: at most REF_TOL with REF_FLOOR (asserted and
 * printed), and at most TIGHT_TOL with the tighter TIGHT_FLOOR (asserted and printed too).
 * PyTorch's own f32 kernels reach about the same errors against this float64 reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

#define REF_TOL     1e-4
#define REF_FLOOR   1e-2
#define TIGHT_TOL   1e-3
#define TIGHT_FLOOR 1e-3

static double max_abs(const float *p, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)p[i]));
  return m;
}

/* The worst errors over every tensor of one op, for the summary line: [0] with REF_FLOOR,
 * [1] with TIGHT_FLOOR. */
typedef struct worst {
  double y[2], dx[2], dw[2], db[2];
} worst;

static void check(const char *name, const char *what, const float *got, const float *want,
                  int64_t n, double *worst_err) {
  char label[96];
  snprintf(label, sizeof label, "%s.%s", name, what);
  const double scale = max_abs(want, n) + 1e-12;
  double err = gt_check_close(label, got, want, n, REF_TOL, REF_FLOOR * scale);
  char tight_label[128];
  snprintf(tight_label, sizeof tight_label, "%s (floor %.0e)", label, TIGHT_FLOOR);
  double tight = gt_check_close(tight_label, got, want, n, TIGHT_TOL, TIGHT_FLOOR * scale);
  printf("\n    %-16s max rel err %.2e (floor %.0e: %.2e)", label, err, TIGHT_FLOOR, tight);
  if (err > worst_err[0]) worst_err[0] = err;
  if (tight > worst_err[1]) worst_err[1] = tight;
}

static float *out_buffer(int64_t n) {
  float *p = gt_alloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = NAN; /* every output element must be written */
  return p;
}

static void run_conv(gt_ref *r, const char *name, worst *w) {
  int64_t v[12];
  if (!gt_ref_shape(r, name, v, 12)) return;
  ganfw_conv2d_shape s = {.N = v[0],
                          .C = v[1],
                          .H = v[2],
                          .W = v[3],
                          .K = v[4],
                          .R = v[5],
                          .S = v[6],
                          .stride_h = v[7],
                          .stride_w = v[8],
                          .pad_h = v[9],
                          .pad_w = v[10]};
  const int bias = (int)v[11];
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  const int64_t nx = s.N * s.C * s.H * s.W, nw = s.K * s.C * s.R * s.S, ny = s.N * s.K * s.P * s.Q;
  const float *x = gt_ref_part(r, name, "x", nx), *wt = gt_ref_part(r, name, "w", nw);
  const float *dy = gt_ref_part(r, name, "dy", ny), *y_ref = gt_ref_part(r, name, "y", ny);
  const float *dx_ref = gt_ref_part(r, name, "dx", nx), *dw_ref = gt_ref_part(r, name, "dw", nw);
  const float *b = bias ? gt_ref_part(r, name, "b", s.K) : NULL;
  const float *db_ref = bias ? gt_ref_part(r, name, "db", s.K) : NULL;
  if (!x || !wt || !dy || !y_ref || !dx_ref || !dw_ref || (bias && (!b || !db_ref))) return;
  size_t ws_bytes = ganfw_be_conv2d_workspace(cpu(), &s);
  void *ws = malloc(ws_bytes); /* exactly the reported size */
  CU_ASSERT_FATAL(ws != NULL || ws_bytes == 0);
  float *y = out_buffer(ny), *dx = out_buffer(nx), *dw = out_buffer(nw), *db = out_buffer(s.K);
  ganfw_be_conv2d_forward(cpu(), &s, x, wt, b, y, ws);
  ganfw_be_conv2d_backward(cpu(), &s, x, wt, dy, dx, dw, bias ? db : NULL, 0, ws);
  check(name, "y", y, y_ref, ny, w->y);
  check(name, "dx", dx, dx_ref, nx, w->dx);
  check(name, "dw", dw, dw_ref, nw, w->dw);
  if (bias) check(name, "db", db, db_ref, s.K, w->db);
  gt_free(y), gt_free(dx), gt_free(dw), gt_free(db);
  free(ws);
}

static void run_convt(gt_ref *r, const char *name, worst *w) {
  int64_t v[14];
  if (!gt_ref_shape(r, name, v, 14)) return;
  ganfw_convt2d_shape s = {.N = v[0],
                           .C = v[1],
                           .H = v[2],
                           .W = v[3],
                           .K = v[4],
                           .R = v[5],
                           .S = v[6],
                           .stride_h = v[7],
                           .stride_w = v[8],
                           .pad_h = v[9],
                           .pad_w = v[10],
                           .out_pad_h = v[11],
                           .out_pad_w = v[12]};
  const int bias = (int)v[13];
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&s), GANFW_OK);
  const int64_t nx = s.N * s.C * s.H * s.W, nw = s.C * s.K * s.R * s.S, ny = s.N * s.K * s.P * s.Q;
  const float *x = gt_ref_part(r, name, "x", nx), *wt = gt_ref_part(r, name, "w", nw);
  const float *dy = gt_ref_part(r, name, "dy", ny), *y_ref = gt_ref_part(r, name, "y", ny);
  const float *dx_ref = gt_ref_part(r, name, "dx", nx), *dw_ref = gt_ref_part(r, name, "dw", nw);
  const float *b = bias ? gt_ref_part(r, name, "b", s.K) : NULL;
  const float *db_ref = bias ? gt_ref_part(r, name, "db", s.K) : NULL;
  if (!x || !wt || !dy || !y_ref || !dx_ref || !dw_ref || (bias && (!b || !db_ref))) return;
  size_t ws_bytes = ganfw_be_convt2d_workspace(cpu(), &s);
  void *ws = malloc(ws_bytes);
  CU_ASSERT_FATAL(ws != NULL || ws_bytes == 0);
  float *y = out_buffer(ny), *dx = out_buffer(nx), *dw = out_buffer(nw), *db = out_buffer(s.K);
  ganfw_be_convt2d_forward(cpu(), &s, x, wt, b, y, ws);
  ganfw_be_convt2d_backward(cpu(), &s, x, wt, dy, dx, dw, bias ? db : NULL, 0, ws);
  check(name, "y", y, y_ref, ny, w->y);
  check(name, "dx", dx, dx_ref, nx, w->dx);
  check(name, "dw", dw, dw_ref, nw, w->dw);
  if (bias) check(name, "db", db, db_ref, s.K, w->db);
  gt_free(y), gt_free(dx), gt_free(dw), gt_free(db);
  free(ws);
}

static void run_linear(gt_ref *r, const char *name, worst *w) {
  int64_t v[4];
  if (!gt_ref_shape(r, name, v, 4)) return;
  const int64_t N = v[0], IN = v[1], OUT = v[2];
  const int bias = (int)v[3];
  const float *x = gt_ref_part(r, name, "x", N * IN), *wt = gt_ref_part(r, name, "w", OUT * IN);
  const float *dy = gt_ref_part(r, name, "dy", N * OUT),
              *y_ref = gt_ref_part(r, name, "y", N * OUT);
  const float *dx_ref = gt_ref_part(r, name, "dx", N * IN),
              *dw_ref = gt_ref_part(r, name, "dw", OUT * IN);
  const float *b = bias ? gt_ref_part(r, name, "b", OUT) : NULL;
  const float *db_ref = bias ? gt_ref_part(r, name, "db", OUT) : NULL;
  if (!x || !wt || !dy || !y_ref || !dx_ref || !dw_ref || (bias && (!b || !db_ref))) return;
  float *y = out_buffer(N * OUT), *dx = out_buffer(N * IN), *dw = out_buffer(OUT * IN);
  float *db = out_buffer(OUT);
  ganfw_be_linear_forward(cpu(), N, IN, OUT, x, wt, b, y);
  ganfw_be_linear_backward(cpu(), N, IN, OUT, x, wt, dy, dx, dw, bias ? db : NULL, 0);
  check(name, "y", y, y_ref, N * OUT, w->y);
  check(name, "dx", dx, dx_ref, N * IN, w->dx);
  check(name, "dw", dw, dw_ref, OUT * IN, w->dw);
  if (bias) check(name, "db", db, db_ref, OUT, w->db);
  gt_free(y), gt_free(dx), gt_free(dw), gt_free(db);
}

static void summary(const char *op, const worst *w) {
  const double tol[2] = {REF_TOL, TIGHT_TOL}, floor[2] = {REF_FLOOR, TIGHT_FLOOR};
  for (int i = 0; i < 2; i++) {
    printf("\n    %s worst (floor %.0e x max|want|, tol %.0e): y %.2e  dx %.2e  dw %.2e  db %.2e",
           op, floor[i], tol[i], w->y[i], w->dx[i], w->dw[i], w->db[i]);
  }
}

static void test_conv2d(void) {
  gt_ref *r = gt_ref_open("dense");
  if (!r) return;
  const char *names[] = {"conv_d1",  "conv_d2",   "conv_d3", "conv_d4",
                         "conv_odd", "conv_rect", "conv_n1"};
  worst w = {0};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run_conv(r, names[i], &w);
  summary("conv2d", &w);
  gt_ref_close(r);
}

static void test_convt2d(void) {
  gt_ref *r = gt_ref_open("dense");
  if (!r) return;
  const char *names[] = {"convt_g1", "convt_g2", "convt_g3", "convt_g4", "convt_odd", "convt_n1"};
  worst w = {0};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run_convt(r, names[i], &w);
  summary("conv_transpose2d", &w);
  gt_ref_close(r);
}

static void test_linear(void) {
  gt_ref *r = gt_ref_open("dense");
  if (!r) return;
  const char *names[] = {"linear_a", "linear_b", "linear_c"};
  worst w = {0};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run_linear(r, names[i], &w);
  summary("linear", &w);
  gt_ref_close(r);
}

static CU_TestInfo tests[] = {
    {"conv2d", test_conv2d},
    {"conv_transpose2d", test_convt2d},
    {"linear", test_linear},
    CU_TEST_INFO_NULL,
};

GT_MAIN("ref_dense", tests)
