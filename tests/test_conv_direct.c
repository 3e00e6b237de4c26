/* The direct stride-1 conv2d kernels (core/src/backend/cpu/conv_direct.c) against double
 * sums, side by side with the im2col + GEMM path on the same data: y (with bias), dx, dw
 * overwritten and accumulated, on ResNet-20's 3x3 layers, its stem (C = 1), a 1x1 conv, 5x5
 * and 7x7 kernels, padding 0, odd sizes, channel counts that are not multiples of the
 * kernels' block of 8, one image, and a batch over several chunks. Each error must stay
 * within 4x of im2col's (or of 4 FLT_EPSILON where im2col's is smaller). The kernels' bits
 * must not depend on the thread count (1, 2, 3) nor on the SIMD level (portable, AVX2,
 * AVX-512 where the CPU has them: the same fused multiply-adds in the same order), and dx
 * alone and dw alone must give the bits of both together; 16-bit activations give the bits
 * of converting around the f32 kernels. GANFW_CONV_IM2COL=1 is set before the first conv2d
 * op so that the ops take the im2col path; the dispatch (conv2d and conv_transpose2d give
 * the direct kernels' results, in im2col's workspace) is checked in a child process forked
 * before that. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "backend/cpu/cast.h"
#include "backend/cpu/conv_direct.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"
#include "backend/ops.h"

static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

/* dx is one chain of fused multiply-adds over K*R*S terms where im2col sums K terms in its
 * GEMM and then the R*S partial sums in col2im: up to 2-3x im2col's rounding error on the
 * stem (K*R*S = 144 against 16 + 9), still a few FLT_EPSILON of the sums. */
#define ERR_RATIO 4.0
#define REF_FLOOR 1e-2

typedef struct dk_case {
  const char *name;
  int64_t N, C, H, W, K, R, pad;
} dk_case;

static const dk_case cases[] = {
    {"ResNet 16->16 28x28", 4, 16, 28, 28, 16, 3, 1},
    {"ResNet 32->32 14x14", 8, 32, 14, 14, 32, 3, 1},
    {"ResNet 64->64 7x7", 8, 64, 7, 7, 64, 3, 1},
    {"stem 1->16 28x28", 4, 1, 28, 28, 16, 3, 1},
    {"1x1 16->24 7x7", 5, 16, 7, 7, 24, 1, 0},
    {"5x5 pad 2 6->13 11x9", 3, 6, 11, 9, 13, 5, 2},
    {"7x7 pad 3 N=1 3->5 15x4", 1, 3, 15, 4, 5, 7, 3},
    {"3x3 pad 0 7->9 10x12", 2, 7, 10, 12, 9, 3, 0},
    {"3x3 pad 2 5->3 6x6", 3, 5, 6, 6, 3, 3, 2},
    {"40 images 16->16 48x48, chunks", 40, 16, 48, 48, 16, 3, 1},
};
#define CASES ((int)(sizeof cases / sizeof cases[0]))

static ganfw_conv2d_shape case_shape(const dk_case *c) {
  ganfw_conv2d_shape s = {.N = c->N,
                          .C = c->C,
                          .H = c->H,
                          .W = c->W,
                          .K = c->K,
                          .R = c->R,
                          .S = c->R,
                          .stride_h = 1,
                          .stride_w = 1,
                          .pad_h = c->pad,
                          .pad_w = c->pad};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  CU_ASSERT_FATAL(ganfw_cpu_conv2d_direct_fits(&s));
  return s;
}

typedef struct sizes {
  int64_t nx, nw, ny;
} sizes;

static sizes sizes_of(const ganfw_conv2d_shape *s) {
  return (sizes){s->N * s->C * s->H * s->W, s->K * s->C * s->R * s->S, s->N * s->K * s->P * s->Q};
}

static void check_pass(const dk_case *c, const char *pass, const float *direct, const float *im2col,
                       const double *want, int64_t n) {
  const double ed = gt_rel_err(direct, want, n, REF_FLOOR),
               ei = gt_rel_err(im2col, want, n, REF_FLOOR);
  const double bound = ERR_RATIO * fmax(ei, FLT_EPSILON);
  printf("\n    %-32s %-4s direct %.2e  im2col %.2e  ratio %5.2f", c->name, pass, ed, ei,
         ed / fmax(ei, FLT_EPSILON));
  CU_ASSERT(ed <= bound);
  if (!(ed <= bound)) printf("  <-- above %.2e", bound);
}

/* The direct kernels' four results on one draw: y, dx, dw, and dw accumulated onto dw0. */
typedef struct results {
  float *y, *dx, *dw, *dwa;
} results;

static results run_direct(const ganfw_conv2d_shape *s, const float *x, const float *w,
                          const float *b, const float *dy, const float *dw0, void *ws) {
  const sizes z = sizes_of(s);
  results r = {gt_falloc(z.ny), gt_falloc(z.nx), gt_falloc(z.nw), gt_falloc(z.nw)};
  for (int64_t i = 0; i < z.nx; i++) r.dx[i] = NAN; /* outputs are overwritten */
  for (int64_t i = 0; i < z.nw; i++) r.dw[i] = NAN;
  memcpy(r.dwa, dw0, (size_t)z.nw * sizeof *dw0);
  ganfw_cpu_conv2d_direct_forward(s, GANFW_DTYPE_F32, x, w, b, r.y, ws);
  ganfw_cpu_conv2d_direct_backward(s, GANFW_DTYPE_F32, x, w, dy, r.dx, r.dw, 0, NULL, ws);
  ganfw_cpu_conv2d_direct_backward(s, GANFW_DTYPE_F32, x, w, dy, NULL, r.dwa, 1, NULL, ws);
  return r;
}

static void results_free(results *r) {
  gt_free(r->y), gt_free(r->dx), gt_free(r->dw), gt_free(r->dwa);
}

static int same_bits(const results *a, const results *b, const sizes *z) {
  return memcmp(a->y, b->y, (size_t)z->ny * sizeof(float)) == 0 &&
         memcmp(a->dx, b->dx, (size_t)z->nx * sizeof(float)) == 0 &&
         memcmp(a->dw, b->dw, (size_t)z->nw * sizeof(float)) == 0 &&
         memcmp(a->dwa, b->dwa, (size_t)z->nw * sizeof(float)) == 0;
}

static void run_case(const dk_case *c, uint64_t seed) {
  const ganfw_conv2d_shape s = case_shape(c);
  const sizes z = sizes_of(&s);
  float *x = gt_frand(z.nx, seed), *w = gt_frand(z.nw, seed + 1), *b = gt_frand(s.K, seed + 2);
  float *dy = gt_frand(z.ny, seed + 3), *dw0 = gt_frand(z.nw, seed + 4);
  double *yr = malloc((size_t)z.ny * sizeof *yr), *dxr = malloc((size_t)z.nx * sizeof *dxr);
  double *dwr = malloc((size_t)z.nw * sizeof *dwr), *dwa = malloc((size_t)z.nw * sizeof *dwa);
  CU_ASSERT_FATAL(yr && dxr && dwr && dwa);
  gt_conv2d_ref(&s, x, w, b, dy, yr, dxr, dwr);
  for (int64_t i = 0; i < z.nw; i++) dwa[i] = dwr[i] + dw0[i];

  void *wsd = gt_malloc_exact(ganfw_cpu_conv2d_direct_workspace(&s));
  void *wsi = gt_malloc_exact(ganfw_be_conv2d_workspace(cpu(), &s));
  CU_ASSERT(ganfw_cpu_conv2d_direct_workspace(&s) <= ganfw_be_conv2d_workspace(cpu(), &s));
  ganfw_cpu_set_threads(NULL, 2);
  results d = run_direct(&s, x, w, b, dy, dw0, wsd);
  results i2 = {gt_falloc(z.ny), gt_falloc(z.nx), gt_falloc(z.nw), gt_falloc(z.nw)};
  memcpy(i2.dwa, dw0, (size_t)z.nw * sizeof *dw0);
  ganfw_be_conv2d_forward(cpu(), &s, x, w, b, i2.y, wsi);
  ganfw_be_conv2d_backward(cpu(), &s, x, w, dy, i2.dx, i2.dw, NULL, 0, wsi);
  ganfw_be_conv2d_backward(cpu(), &s, x, w, dy, NULL, i2.dwa, NULL, 1, wsi);
  check_pass(c, "y", d.y, i2.y, yr, z.ny);
  check_pass(c, "dx", d.dx, i2.dx, dxr, z.nx);
  check_pass(c, "dw", d.dw, i2.dw, dwr, z.nw);
  check_pass(c, "dw+=", d.dwa, i2.dwa, dwa, z.nw);

  /* dx alone and dw alone: the bits of both together */
  float *dx1 = gt_falloc(z.nx), *dw1 = gt_falloc(z.nw);
  ganfw_cpu_conv2d_direct_backward(&s, GANFW_DTYPE_F32, x, w, dy, dx1, NULL, 0, NULL, wsd);
  ganfw_cpu_conv2d_direct_backward(&s, GANFW_DTYPE_F32, x, w, dy, NULL, dw1, 0, NULL, wsd);
  CU_ASSERT(memcmp(dx1, d.dx, (size_t)z.nx * sizeof *dx1) == 0);
  CU_ASSERT(memcmp(dw1, d.dw, (size_t)z.nw * sizeof *dw1) == 0);

  /* 1 and 3 threads, and every SIMD level the CPU has: the same bits */
  for (int t = 1; t <= 3; t += 2) {
    ganfw_cpu_set_threads(NULL, t);
    results o = run_direct(&s, x, w, b, dy, dw0, wsd);
    CU_ASSERT(same_bits(&o, &d, &z));
    results_free(&o);
  }
  ganfw_cpu_set_threads(NULL, 2);
  const ganfw_cpu_isa was = ganfw_cpu_isa_level();
  for (int level = 0; level < GANFW_CPU_ISA_COUNT; level++) {
    if (ganfw_cpu_isa_force((ganfw_cpu_isa)level) != (ganfw_cpu_isa)level) continue;
    results o = run_direct(&s, x, w, b, dy, dw0, wsd);
    const int ok = same_bits(&o, &d, &z);
    CU_ASSERT(ok);
    if (!ok) printf("  <-- %s differs", ganfw_cpu_isa_name((ganfw_cpu_isa)level));
    results_free(&o);
  }
  ganfw_cpu_isa_force(was);

  results_free(&d), results_free(&i2);
  gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(dw0), gt_free(dx1), gt_free(dw1);
  free(yr), free(dxr), free(dwr), free(dwa), free(wsd), free(wsi);
}

static void test_resnet_shapes(void) {
  for (int i = 0; i < 4; i++) run_case(&cases[i], 1000 + 1000 * (uint64_t)i);
}

static void test_other_shapes(void) {
  for (int i = 4; i < CASES; i++) run_case(&cases[i], 1000 + 1000 * (uint64_t)i);
}

/* Norm-relative difference of n values. */
static double rel_norm(const float *got, const float *want, int64_t n) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < n; i++)
    d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]), m += (double)want[i] * want[i];
  return m > 0 ? sqrt(d / m) : sqrt(d);
}

/* f16 and bf16 activations: the bits of the f32 kernels on the converted inputs, rounded
 * (bf16 below the avx512 level: without dot products). bf16 on AVX-512 BF16 dot products,
 * where the CPU has them: the products are exact and only the order of the f32 sums differs,
 * so each output is within a rounding of the f32 one (2^-8 norm-relative, the bound of
 * tests/test_cpu_lp_conv.c), and the bits do not depend on the thread count. */
static void run_16bit(const ganfw_conv2d_shape *s, int32_t dt, int dot) {
  const sizes z = sizes_of(s);
  void *ws = gt_malloc_exact(ganfw_cpu_conv2d_direct_workspace(s));
  float *x = gt_frand(z.nx, 5), *w = gt_frand(z.nw, 6), *b = gt_frand(s->K, 7),
        *dy = gt_frand(z.ny, 8);
  uint16_t *xh = gt_alloc((size_t)z.nx * 2), *dyh = gt_alloc((size_t)z.ny * 2);
  uint16_t *yh = gt_alloc((size_t)z.ny * 2), *dxh = gt_alloc((size_t)z.nx * 2);
  ganfw_cpu_row_from_f32(dt, z.nx, x, xh), ganfw_cpu_row_to_f32(dt, z.nx, xh, x);
  ganfw_cpu_row_from_f32(dt, z.ny, dy, dyh), ganfw_cpu_row_to_f32(dt, z.ny, dyh, dy);
  if (dot) { /* amp's weights are bf16 values */
    uint16_t *wh = gt_alloc((size_t)z.nw * 2);
    ganfw_cpu_row_from_f32(dt, z.nw, w, wh), ganfw_cpu_row_to_f32(dt, z.nw, wh, w);
    gt_free(wh);
  }
  float *y = gt_falloc(z.ny), *dx = gt_falloc(z.nx), *dw = gt_falloc(z.nw), *dwh = gt_falloc(z.nw);
  const ganfw_cpu_isa was = ganfw_cpu_isa_level();
  if (!dot) ganfw_cpu_isa_force(GANFW_CPU_ISA_AVX2); /* no dot products below avx512 */
  ganfw_cpu_conv2d_direct_forward(s, GANFW_DTYPE_F32, x, w, b, y, ws);
  ganfw_cpu_conv2d_direct_backward(s, GANFW_DTYPE_F32, x, w, dy, dx, dw, 0, NULL, ws);
  ganfw_cpu_conv2d_direct_forward(s, dt, xh, w, b, yh, ws);
  ganfw_cpu_conv2d_direct_backward(s, dt, xh, w, dyh, dxh, dwh, 0, NULL, ws);
  float *yf = gt_falloc(z.ny), *dxf = gt_falloc(z.nx);
  ganfw_cpu_row_to_f32(dt, z.ny, yh, yf), ganfw_cpu_row_to_f32(dt, z.nx, dxh, dxf);
  if (!dot) {
    uint16_t *want = gt_alloc((size_t)(z.nx > z.ny ? z.nx : z.ny) * 2);
    ganfw_cpu_row_from_f32(dt, z.ny, y, want);
    CU_ASSERT(memcmp(want, yh, (size_t)z.ny * 2) == 0);
    ganfw_cpu_row_from_f32(dt, z.nx, dx, want);
    CU_ASSERT(memcmp(want, dxh, (size_t)z.nx * 2) == 0);
    CU_ASSERT(memcmp(dw, dwh, (size_t)z.nw * sizeof *dw) == 0);
    gt_free(want);
  } else {
    const double ey = rel_norm(yf, y, z.ny), ex = rel_norm(dxf, dx, z.nx);
    const double ew = rel_norm(dwh, dw, z.nw);
    printf("\n    bf16 dot products N%lld C%lld K%lld %lldx%lld k%lld: y %.2e dx %.2e dw %.2e",
           (long long)s->N, (long long)s->C, (long long)s->K, (long long)s->H, (long long)s->W,
           (long long)s->R, ey, ex, ew);
    CU_ASSERT(ey <= 1.0 / 256 && ex <= 1.0 / 256 && ew <= 1.0 / 256);
    CU_ASSERT(ey > 0 || ex > 0 || ew > 0); /* the dot products did run */
    /* 1 and 3 threads: the same bits */
    uint16_t *y1 = gt_alloc((size_t)z.ny * 2), *dx1 = gt_alloc((size_t)z.nx * 2);
    float *dw1 = gt_falloc(z.nw);
    for (int t = 1; t <= 3; t += 2) {
      ganfw_cpu_set_threads(NULL, t);
      ganfw_cpu_conv2d_direct_forward(s, dt, xh, w, b, y1, ws);
      ganfw_cpu_conv2d_direct_backward(s, dt, xh, w, dyh, dx1, dw1, 0, NULL, ws);
      CU_ASSERT(memcmp(y1, yh, (size_t)z.ny * 2) == 0);
      CU_ASSERT(memcmp(dx1, dxh, (size_t)z.nx * 2) == 0);
      CU_ASSERT(memcmp(dw1, dwh, (size_t)z.nw * 4) == 0);
    }
    ganfw_cpu_set_threads(NULL, 2);
    gt_free(y1), gt_free(dx1), gt_free(dw1);
  }
  ganfw_cpu_isa_force(was);
  gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(xh), gt_free(dyh), gt_free(yh);
  gt_free(dxh), gt_free(y), gt_free(dx), gt_free(dw), gt_free(dwh), gt_free(yf), gt_free(dxf);
  free(ws);
}

static void test_16bit(void) {
  for (int i = 0; i < CASES; i++) {
    const ganfw_conv2d_shape s = case_shape(&cases[i]);
    run_16bit(&s, GANFW_DTYPE_F16, 0);
    run_16bit(&s, GANFW_DTYPE_BF16, 0);
  }
}

static void test_bf16_dot(void) {
  if (!ganfw_cpu_have_bf16_dot()) {
    printf("\n  no bf16 dot products at this SIMD level: skipped");
    return;
  }
  for (int i = 0; i < CASES; i++) {
    const ganfw_conv2d_shape s = case_shape(&cases[i]);
    run_16bit(&s, GANFW_DTYPE_BF16, 1);
  }
}

/* Shapes the kernels do not take, and ResNet-20's at batch 128 that they do, within
 * im2col's workspace. */
static void test_fits(void) {
  ganfw_conv2d_shape s = {.N = 128,
                          .C = 16,
                          .H = 28,
                          .W = 28,
                          .K = 16,
                          .R = 3,
                          .S = 3,
                          .stride_h = 1,
                          .stride_w = 1,
                          .pad_h = 1,
                          .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  CU_ASSERT(ganfw_cpu_conv2d_direct_use(&s, GANFW_CONV_PASS_FORWARD));
  for (int64_t c = 16; c <= 64; c *= 2) {
    ganfw_conv2d_shape t = s;
    t.C = t.K = c, t.H = t.W = 28 * 16 / c;
    CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&t), GANFW_OK);
    CU_ASSERT(ganfw_cpu_conv2d_direct_fits(&t));
    CU_ASSERT(ganfw_cpu_conv2d_direct_workspace(&t) <= ganfw_cpu_conv2d_im2col_workspace(&t));
  }
  ganfw_conv2d_shape t = s;
  t.stride_h = t.stride_w = 2;
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&t), GANFW_OK);
  CU_ASSERT(!ganfw_cpu_conv2d_direct_fits(&t));
  t = s;
  t.pad_h = 3; /* a padding of the kernel's size or more: no stride-1 backward-data */
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&t), GANFW_OK);
  CU_ASSERT(!ganfw_cpu_conv2d_direct_fits(&t));
  t = s;
  t.R = t.S = 9, t.pad_h = t.pad_w = 4;
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&t), GANFW_OK);
  CU_ASSERT(!ganfw_cpu_conv2d_direct_fits(&t));
  t = s;
  t.C = t.K = 256; /* wide GEMMs stay on im2col */
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&t), GANFW_OK);
  CU_ASSERT(!ganfw_cpu_conv2d_direct_use(&t, GANFW_CONV_PASS_FORWARD));
}

/* Within 1e-4 of each other, relative to the larger magnitude (another path's rounding). */
static int close_to(const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabsf(a[i] - b[i]) <= 1e-4f * fmaxf(1.0f, fabsf(b[i])))) return 0;
  return 1;
}

/* --- the dispatch in conv2d.c and conv_transpose2d.c, in a child process forked before
 * anything read GANFW_CONV_IM2COL: the ops give exactly the direct kernels' results in
 * im2col's workspace. Returns the number of failed checks. */
static int dispatch_checks(void) {
  ganfw_conv2d_shape s = {.N = 6,
                          .C = 16,
                          .H = 14,
                          .W = 14,
                          .K = 24,
                          .R = 3,
                          .S = 3,
                          .stride_h = 1,
                          .stride_w = 1,
                          .pad_h = 1,
                          .pad_w = 1};
  if (ganfw_conv2d_shape_init(&s) != GANFW_OK) return 1;
  ganfw_cpu_set_threads(NULL, 2);
  int fails = 0;
  for (int p = 0; p < GANFW_CONV_PASS_COUNT; p++)
    fails += !ganfw_cpu_conv2d_direct_use(&s, (ganfw_conv_pass)p);
  const sizes z = sizes_of(&s);
  float *x = gt_frand(z.nx, 1), *w = gt_frand(z.nw, 2), *b = gt_frand(s.K, 3),
        *dy = gt_frand(z.ny, 4);
  float *y0 = gt_falloc(z.ny), *dx0 = gt_falloc(z.nx), *dw0 = gt_falloc(z.nw);
  float *y1 = gt_falloc(z.ny), *dx1 = gt_falloc(z.nx), *dw1 = gt_falloc(z.nw), *db = gt_falloc(s.K);
  const size_t wsc = ganfw_be_conv2d_workspace(cpu(), &s);
  fails += wsc != ganfw_cpu_conv2d_im2col_workspace(&s); /* the same for both paths */
  fails += wsc < ganfw_cpu_conv2d_direct_workspace(&s);
  void *ws = malloc(wsc);
  if (!ws) return 1;
  ganfw_cpu_conv2d_direct_forward(&s, GANFW_DTYPE_F32, x, w, b, y0, ws);
  ganfw_cpu_conv2d_direct_backward(&s, GANFW_DTYPE_F32, x, w, dy, dx0, dw0, 0, NULL, ws);
  ganfw_be_conv2d_forward(cpu(), &s, x, w, b, y1, ws);
  ganfw_be_conv2d_backward(cpu(), &s, x, w, dy, dx1, dw1, db, 0, ws);
  fails += memcmp(y0, y1, (size_t)z.ny * sizeof *y0) != 0;
  fails += memcmp(dx0, dx1, (size_t)z.nx * sizeof *dx0) != 0;
  fails += memcmp(dw0, dw1, (size_t)z.nw * sizeof *dw0) != 0;
  /* conv_transpose2d with the roles swapped: its x is the conv's dy, its y the conv's x */
  ganfw_convt2d_shape t = {.N = s.N,
                           .C = s.K,
                           .H = s.P,
                           .W = s.Q,
                           .K = s.C,
                           .R = 3,
                           .S = 3,
                           .stride_h = 1,
                           .stride_w = 1,
                           .pad_h = 1,
                           .pad_w = 1};
  if (ganfw_convt2d_shape_init(&t) != GANFW_OK) return 1;
  fails += t.P != s.H || t.Q != s.W;
  fails += ganfw_be_convt2d_workspace(cpu(), &t) < ganfw_cpu_conv2d_direct_workspace(&s);
  ganfw_be_convt2d_forward(cpu(), &t, dy, w, NULL, dx1, ws);            /* = conv backward-data */
  ganfw_be_convt2d_backward(cpu(), &t, dy, w, x, y1, dw1, NULL, 0, ws); /* dx = conv forward */
  ganfw_cpu_conv2d_direct_forward(&s, GANFW_DTYPE_F32, x, w, NULL, y0, ws);
  fails += memcmp(dx0, dx1, (size_t)z.nx * sizeof *dx0) != 0;
  fails += memcmp(y0, y1, (size_t)z.ny * sizeof *y0) != 0;
  fails += memcmp(dw0, dw1, (size_t)z.nw * sizeof *dw0) != 0;
  /* device.cudnn_benchmark: the first call of each pass times its paths and keeps one; the
   * results are those of a path (close to the direct kernels'), an accumulating dw adds to
   * what was there, and later calls take the kept path (the same bits) */
  ganfw_cpu_set_conv_benchmark(1);
  float *yb = gt_falloc(z.ny), *dxb = gt_falloc(z.nx), *dwb = gt_frand(z.nw, 9);
  float *y2 = gt_falloc(z.ny), *dx2 = gt_falloc(z.nx), *dw2 = gt_falloc(z.nw);
  float *dwa = gt_falloc(z.nw);
  memcpy(dwa, dwb, (size_t)z.nw * sizeof *dwa);
  ganfw_be_conv2d_forward(cpu(), &s, x, w, NULL, yb, ws);
  ganfw_be_conv2d_backward(cpu(), &s, x, w, dy, dxb, dwb, NULL, 1, ws);
  ganfw_be_conv2d_forward(cpu(), &s, x, w, NULL, y2, ws);
  ganfw_be_conv2d_backward(cpu(), &s, x, w, dy, dx2, dw2, NULL, 0, ws);
  ganfw_cpu_set_conv_benchmark(0);
  for (int64_t i = 0; i < z.nw; i++) dwa[i] += dw0[i];
  fails += !close_to(yb, y0, z.ny) + !close_to(dxb, dx0, z.nx) + !close_to(dwb, dwa, z.nw);
  fails += memcmp(y2, yb, (size_t)z.ny * sizeof *y2) != 0;
  fails += memcmp(dx2, dxb, (size_t)z.nx * sizeof *dx2) != 0;
  for (int64_t i = 0; i < z.nw; i++) dw2[i] += dwa[i] - dw0[i]; /* the same sum, as added */
  fails += !close_to(dw2, dwb, z.nw);
  gt_free(yb), gt_free(dxb), gt_free(dwb), gt_free(y2), gt_free(dx2), gt_free(dw2), gt_free(dwa);
  printf("\ndispatch checks in a child process: %d failed\n", fails);
  fflush(stdout);
  gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(y0), gt_free(dx0), gt_free(dw0);
  gt_free(y1), gt_free(dx1), gt_free(dw1), gt_free(db), free(ws);
  return fails;
}

static int dispatch_status = -1;

static void test_dispatch(void) {
  CU_ASSERT_EQUAL(dispatch_status, 0);
}

static int suite_init(void) {
  return setenv("GANFW_CONV_IM2COL", "1", 1);
}

static CU_TestInfo tests[] = {{"fits", test_fits},
                              {"dispatch", test_dispatch},
                              {"resnet_shapes", test_resnet_shapes},
                              {"other_shapes", test_other_shapes},
                              {"16bit", test_16bit},
                              {"bf16_dot", test_bf16_dot},
                              CU_TEST_INFO_NULL};

int main(void) {
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) _exit(dispatch_checks() ? 1 : 0);
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status))
    dispatch_status = WEXITSTATUS(status);
  return gt_run_fixture("conv_direct", tests, suite_init, NULL);
}
