/* The CPU's native bf16 convolution (the conv2d ops in bf16) against PyTorch's own bf16
 * convolution on the CPU (tests/ref/gen_conv_bf16.py: oneDNN, as autocast runs it), on the same
 * bf16 inputs, weights and dy: a DC-GAN-sized layer that runs on Winograd and a small odd one on
 * im2col + GEMM (conv-transposes run on the same kernels, adjoint, and PyTorch 1.13's bf16
 * conv_transpose2d is no reference: gen_conv_bf16.py says why), at the SIMD level in use (with bf16
 * AMX tiles or dot products where the CPU has them; the suite also runs at avx2, tests/isa.cmake,
 * on f32 GEMMs, and with GANFW_CPU_AMX=off on dot products where the CPU has AMX).
 *
 * Tolerances (norm-relative, ||ganfw - torch|| / ||torch||): both sides multiply bf16 values
 * exactly and sum in f32, in different orders (K * 2^-24 at worst), then round y and dx to
 * bf16 (2^-9 relative each): where the two f32 sums straddle a rounding boundary they round
 * to neighbours, so y and dx differ by at most about 2^-8 = 3.9e-3 in norm, far less in
 * practice. PyTorch's dw is rounded to bf16 too (its weight is a bf16 tensor) and ganfw's is
 * f32: up to 2^-9 more. On Winograd ganfw rounds its transformed tiles to bf16 when it
 * multiplies on bf16 products (tests/test_cpu_lp_conv.c argues 4 x 2^-8 there). So:
 * 2^-8 on im2col, 4 x 2^-8 on Winograd, for every tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "runtime/tensor_cast.h"
#include "testutil.h"

static double norm_rel(const float *got, const float *want, int64_t n) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < n; i++) {
    const double e = (double)got[i] - want[i];
    d += e * e, m += (double)want[i] * want[i];
  }
  return m > 0 ? sqrt(d / m) : sqrt(d);
}

/* n f32 values (bf16 values all) as bf16. */
static uint16_t *to_bf16(const float *f, int64_t n) {
  uint16_t *h = malloc((size_t)n * 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  CU_ASSERT_EQUAL(ganfw_cast(ganfw_cpu_backend(), n, GANFW_DTYPE_F32, f, GANFW_DTYPE_BF16, h),
                  GANFW_OK);
  return h;
}

static float *to_f32(const uint16_t *h, int64_t n) {
  float *f = malloc((size_t)n * 4);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(ganfw_cast(ganfw_cpu_backend(), n, GANFW_DTYPE_BF16, h, GANFW_DTYPE_F32, f),
                  GANFW_OK);
  return f;
}

/* One case: forward and backward (dx and dw) on the CPU's bf16 entries, each tensor against
 * PyTorch's within tol. */
static void run_case(gt_ref *r, const char *name, double tol) {
  int64_t v[12];
  if (!gt_ref_shape(r, name, v, 12)) return;
  ganfw_backend *be = ganfw_cpu_backend();
  ganfw_conv2d_shape c = {.N = v[0],
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
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&c), GANFW_OK);
  const int64_t nx = c.N * c.C * c.H * c.W, ny = c.N * c.K * c.P * c.Q;
  const int64_t nw = c.K * c.C * c.R * c.S;
  const float *x = gt_ref_part(r, name, "x", nx), *w = gt_ref_part(r, name, "w", nw);
  const float *dy = gt_ref_part(r, name, "dy", ny), *y_ref = gt_ref_part(r, name, "y", ny);
  const float *dx_ref = gt_ref_part(r, name, "dx", nx), *dw_ref = gt_ref_part(r, name, "dw", nw);
  if (!x || !w || !dy || !y_ref || !dx_ref || !dw_ref) return;
  uint16_t *xh = to_bf16(x, nx), *wh = to_bf16(w, nw), *dyh = to_bf16(dy, ny);
  uint16_t *yh = malloc((size_t)ny * 2), *dxh = malloc((size_t)nx * 2);
  float *dw = malloc((size_t)nw * 4);
  const size_t ws_bytes = ganfw_be_conv2d_workspace_lp(be, GANFW_DTYPE_BF16, &c);
  void *ws = malloc(ws_bytes ? ws_bytes : 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(yh && dxh && dw && ws);
  CU_ASSERT_EQUAL(ganfw_be_conv2d_forward_lp(be, GANFW_DTYPE_BF16, &c, xh, wh, NULL, yh, ws),
                  GANFW_OK);
  CU_ASSERT_EQUAL(
      ganfw_be_conv2d_backward_lp(be, GANFW_DTYPE_BF16, &c, xh, wh, dyh, dxh, dw, NULL, 0, ws),
      GANFW_OK);
  float *y = to_f32(yh, ny), *dx = to_f32(dxh, nx);
  const double ey = norm_rel(y, y_ref, ny), edx = norm_rel(dx, dx_ref, nx);
  const double edw = norm_rel(dw, dw_ref, nw);
  printf("\n    %-12s y %.2e, dx %.2e, dw %.2e (bound %.1e)", name, ey, edx, edw, tol);
  CU_ASSERT(ey <= tol);
  CU_ASSERT(edx <= tol);
  CU_ASSERT(edw <= tol);
  free(xh), free(wh), free(dyh), free(yh), free(dxh), free(dw), free(ws), free(y), free(dx);
}

static void test_conv_bf16_torch(void) {
  gt_ref *r = gt_ref_open("conv_bf16");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT(ganfw_be_lp_ops(ganfw_cpu_backend(), GANFW_DTYPE_BF16) & GANFW_LP_CONV);
  run_case(r, "conv_wino", 4.0 / 256);
  run_case(r, "conv_small", 1.0 / 256);
  gt_ref_close(r);
}

static CU_TestInfo tests[] = {{"bf16 conv = PyTorch's bf16 conv", test_conv_bf16_torch},
                              CU_TEST_INFO_NULL};

int main(void) {
  return gt_run("ref_conv_bf16", tests);
}
