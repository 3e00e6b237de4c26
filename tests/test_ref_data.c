/* The resize transform against PyTorch: F.interpolate(mode="bilinear", align_corners=False)
 * on random images (tests/ref/gen_data.py), upsampling (MNIST 28 -> 32), downsampling and
 * odd sizes. */
#include <stdio.h>
#include <stdlib.h>

#include "data/data_source.h"
#include "testutil.h"

static void check_case(const char *name) {
  gt_ref *r = gt_ref_open("data");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  char kx[32], ky[32];
  snprintf(kx, sizeof kx, "x_%s", name);
  snprintf(ky, sizeof ky, "y_%s", name);
  int64_t xs[4], ys[4], nx, ny;
  int ndx, ndy;
  const float *x = gt_ref_f32(r, kx, &nx, xs, &ndx);
  const float *y = gt_ref_f32(r, ky, &ny, ys, &ndy);
  CU_ASSERT_FATAL(x && y && ndx == 4 && ndy == 4);
  float *got = malloc(sizeof(float) * ny);
  /* N and C are independent planes: resize them as N*C channels. */
  CU_ASSERT_EQUAL(ganfw_resize_bilinear(x, (int32_t)(xs[0] * xs[1]), (int32_t)xs[2], (int32_t)xs[3],
                                        got, (int32_t)ys[2], (int32_t)ys[3]),
                  GANFW_OK);
  /* floor 1: values are in [0,1], so this is an absolute error. */
  const double err = gt_check_close(name, got, y, ny, 3e-7, 1.0);
  printf("\n    [%s: %lldx%lld -> %lldx%lld, max abs err %.2e] ", name, (long long)xs[2],
         (long long)xs[3], (long long)ys[2], (long long)ys[3], err);
  free(got);
  gt_ref_close(r);
}

static void test_up(void) {
  check_case("up");
}
static void test_down(void) {
  check_case("down");
}
static void test_odd(void) {
  check_case("odd");
}
static void test_far(void) {
  check_case("far");
}
static void test_mixed(void) {
  check_case("mixed");
}

static CU_TestInfo tests[] = {
    {"resize_up_28_to_32", test_up}, {"resize_down", test_down},   {"resize_odd", test_odd},
    {"resize_far", test_far},        {"resize_mixed", test_mixed}, CU_TEST_INFO_NULL,
};
GT_MAIN("ref_data", tests)
