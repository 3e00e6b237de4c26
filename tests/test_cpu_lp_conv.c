/* The CPU backend's native 16-bit convolutions (the conv2d and convt2d ops in f16 and bf16,
 * op.h): with x, w, dy in f16 or bf16 they must give exactly the bits of converting every
 * 16-bit input to f32, running the f32 op on whole tensors and rounding every 16-bit output
 * once: the conversions inside the kernels are exact, the products and their order are the
 * f32 kernels'. Shapes cover the direct stride-1 kernels (odd sizes, ResNet's 3x3), im2col
 * + GEMM (stride 2, padding, odd sizes), the Winograd path (batches that do and do not fill 16
 * lanes), and dense convs (the kernel covers the input: DC-GAN's 4x4 -> 1x1 and the generator's 1x1
 * -> 4x4), with and without a bias, backward with and without accumulation and each gradient alone.
 * Every buffer is allocated to its exact size (ASan sees an overrun), the workspace to exactly what
 * the backend's workspace asks for the 16-bit op. The suite also runs once per SIMD level
 * (tests/isa.cmake). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"
#include "runtime/tensor_cast.h"
#include "testutil.h"

typedef struct lp_case {
  int64_t N, C, H, W, K, R, S, sh, sw, ph, pw;
  int bias;
} lp_case;

static const lp_case cases[] = {
    {2, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1},     /* direct, stride 1, odd sizes */
    {6, 16, 14, 14, 16, 3, 3, 1, 1, 1, 1, 0}, /* direct, ResNet's 3x3 */
    {3, 2, 9, 9, 5, 4, 4, 2, 2, 1, 1, 0},     /* im2col, stride 2 */
    {1, 4, 6, 6, 3, 3, 3, 2, 1, 0, 1, 1},     /* one image, mixed strides */
    {32, 64, 8, 8, 64, 4, 4, 2, 2, 1, 1, 1},  /* Winograd, lanes filled */
    {20, 64, 8, 8, 64, 4, 4, 2, 2, 1, 1, 0},  /* Winograd, lanes not filled */
    {5, 16, 4, 4, 8, 4, 4, 1, 1, 0, 0, 1},    /* dense: 4x4 -> 1x1 */
    {40, 64, 16, 16, 8, 4, 4, 2, 2, 1, 1, 1}, /* im2col in several chunks of images */
};
enum { CASES = sizeof cases / sizeof cases[0] };

static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

static void *xalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  return p;
}

/* n values in [-1, 1), rounded to dtype: f32 and 16-bit copies of the same numbers. */
typedef struct pair {
  int64_t n;
  float *f;
  void *h;
} pair;

static pair pair_random(int32_t dt, int64_t n, uint64_t seed) {
  pair p = {n, xalloc((size_t)n * sizeof(float)), xalloc((size_t)n * 2)};
  gt_fill_uniform(p.f, n, -1, 1, seed);
  CU_ASSERT_EQUAL(ganfw_cast(cpu(), n, GANFW_DTYPE_F32, p.f, dt, p.h), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cast(cpu(), n, dt, p.h, GANFW_DTYPE_F32, p.f), GANFW_OK);
  return p;
}

static void pair_free(pair *p) {
  free(p->f), free(p->h);
}

/* 1 when the 16-bit h holds exactly the rounding of the f32 f. */
static int same_rounded(int32_t dt, int64_t n, const float *f, const void *h) {
  void *r = xalloc((size_t)n * 2);
  ganfw_cast(cpu(), n, GANFW_DTYPE_F32, f, dt, r);
  const int same = memcmp(r, h, (size_t)n * 2) == 0;
  free(r);
  return same;
}

static ganfw_conv2d_shape conv_shape(const lp_case *c) {
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

/* The transposed conv whose adjoint conv2d is c: x has c's output shape. */
static ganfw_convt2d_shape convt_shape(const lp_case *c) {
  const ganfw_conv2d_shape a = conv_shape(c);
  ganfw_convt2d_shape s = {.N = c->N,
                           .C = c->K,
                           .H = a.P,
                           .W = a.Q,
                           .K = c->C,
                           .R = c->R,
                           .S = c->S,
                           .stride_h = c->sh,
                           .stride_w = c->sw,
                           .pad_h = c->ph,
                           .pad_w = c->pw};
  s.out_pad_h = c->H - ((a.P - 1) * c->sh - 2 * c->ph + c->R);
  s.out_pad_w = c->W - ((a.Q - 1) * c->sw - 2 * c->pw + c->S);
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&s), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(s.P, c->H);
  CU_ASSERT_EQUAL_FATAL(s.Q, c->W);
  return s;
}

/* Shape-independent view of one convolution kind. */
typedef struct conv_op {
  int transposed;
  ganfw_conv2d_shape c;
  ganfw_convt2d_shape t;
  int64_t nx, nw, ny, nb; /* elements of x, w, y and b */
} conv_op;

static conv_op conv_op_make(const lp_case *c, int transposed) {
  conv_op o = {.transposed = transposed};
  if (transposed) {
    o.t = convt_shape(c);
    o.nx = o.t.N * o.t.C * o.t.H * o.t.W, o.ny = o.t.N * o.t.K * o.t.P * o.t.Q;
    o.nw = o.t.C * o.t.K * o.t.R * o.t.S, o.nb = o.t.K;
  } else {
    o.c = conv_shape(c);
    o.nx = o.c.N * o.c.C * o.c.H * o.c.W, o.ny = o.c.N * o.c.K * o.c.P * o.c.Q;
    o.nw = o.c.K * o.c.C * o.c.R * o.c.S, o.nb = o.c.K;
  }
  return o;
}

static size_t ws_f32(const conv_op *o) {
  return o->transposed ? ganfw_be_convt2d_workspace(cpu(), &o->t)
                       : ganfw_be_conv2d_workspace(cpu(), &o->c);
}

static size_t ws_lp(const conv_op *o, int32_t dt) {
  return o->transposed ? ganfw_be_convt2d_workspace_lp(cpu(), dt, &o->t)
                       : ganfw_be_conv2d_workspace_lp(cpu(), dt, &o->c);
}

static void forward_f32(const conv_op *o, const float *x, const float *w, const float *b, float *y,
                        void *ws) {
  CU_ASSERT_EQUAL(o->transposed ? ganfw_be_convt2d_forward(cpu(), &o->t, x, w, b, y, ws)
                                : ganfw_be_conv2d_forward(cpu(), &o->c, x, w, b, y, ws),
                  GANFW_OK);
}

static void forward_lp(const conv_op *o, int32_t dt, const void *x, const void *w, const float *b,
                       void *y, void *ws) {
  CU_ASSERT_EQUAL(o->transposed ? ganfw_be_convt2d_forward_lp(cpu(), dt, &o->t, x, w, b, y, ws)
                                : ganfw_be_conv2d_forward_lp(cpu(), dt, &o->c, x, w, b, y, ws),
                  GANFW_OK);
}

static void backward_f32(const conv_op *o, const float *x, const float *w, const float *dy,
                         float *dx, float *dw, float *db, int acc, void *ws) {
  CU_ASSERT_EQUAL(o->transposed
                      ? ganfw_be_convt2d_backward(cpu(), &o->t, x, w, dy, dx, dw, db, acc, ws)
                      : ganfw_be_conv2d_backward(cpu(), &o->c, x, w, dy, dx, dw, db, acc, ws),
                  GANFW_OK);
}

static void backward_lp(const conv_op *o, int32_t dt, const void *x, const void *w, const void *dy,
                        void *dx, float *dw, float *db, int acc, void *ws) {
  CU_ASSERT_EQUAL(
      o->transposed ? ganfw_be_convt2d_backward_lp(cpu(), dt, &o->t, x, w, dy, dx, dw, db, acc, ws)
                    : ganfw_be_conv2d_backward_lp(cpu(), dt, &o->c, x, w, dy, dx, dw, db, acc, ws),
      GANFW_OK);
}

/* ||h - round(f)|| / ||round(f)|| over n values, h in dtype dt. */
static double rel_rounded(int32_t dt, int64_t n, const float *f, const void *h) {
  float *a = xalloc((size_t)n * 4), *b = xalloc((size_t)n * 4);
  void *r = xalloc((size_t)n * 2);
  ganfw_cast(cpu(), n, GANFW_DTYPE_F32, f, dt, r);
  ganfw_cast(cpu(), n, dt, r, GANFW_DTYPE_F32, a);
  ganfw_cast(cpu(), n, dt, h, GANFW_DTYPE_F32, b);
  double d = 0, m = 0;
  for (int64_t i = 0; i < n; i++)
    d += ((double)b[i] - a[i]) * ((double)b[i] - a[i]), m += (double)a[i] * a[i];
  free(a), free(b), free(r);
  return m > 0 ? sqrt(d / m) : sqrt(d);
}

static double rel_f32(int64_t n, const float *got, const float *want) {
  double d = 0, m = 0;
  for (int64_t i = 0; i < n; i++)
    d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]), m += (double)want[i] * want[i];
  return m > 0 ? sqrt(d / m) : sqrt(d);
}

/* 0: every result must be the converted f32 one bit for bit; else the norm-relative bound
 * that bf16 dot products must keep to it (test_conv_bf16_dot says why). */
static double tolerance;
static double worst[2]; /* the largest difference seen: im2col and dense shapes, Winograd ones */

static int failures;

static int is_winograd(const lp_case *c) {
  return c->R == 4 && c->S == 4 && c->sh == 2 && c->sw == 2 && c->C >= 64 && c->K >= 64;
}

/* Bitwise (tolerance 0), or within the tolerance: e is the norm-relative difference. */
static void check_close(int same, double e, const char *what, const lp_case *c, int transposed,
                        int32_t dt);

static void check(int ok, const char *what, const lp_case *c, int transposed, int32_t dt) {
  CU_ASSERT(ok);
  if (!ok && failures++ < 10)
    printf("\n  %s %s differs: N%lld C%lld %lldx%lld K%lld k%lldx%lld s%lld,%lld p%lld,%lld %s",
           transposed ? "convT" : "conv2d", what, (long long)c->N, (long long)c->C, (long long)c->H,
           (long long)c->W, (long long)c->K, (long long)c->R, (long long)c->S, (long long)c->sh,
           (long long)c->sw, (long long)c->ph, (long long)c->pw,
           dt == GANFW_DTYPE_F16 ? "f16" : "bf16");
}

static void check_close(int same, double e, const char *what, const lp_case *c, int transposed,
                        int32_t dt) {
  if (tolerance == 0) {
    check(same, what, c, transposed, dt);
    return;
  }
  double *w = &worst[is_winograd(c)];
  if (e > *w) *w = e;
  check(e <= tolerance * (is_winograd(c) ? 4 : 1), what, c, transposed, dt);
}

/* Forward and every backward variant of one case against the f32 ops on converted tensors. */
static void run_case(const lp_case *c, int transposed, int32_t dt, uint64_t seed) {
  const conv_op o = conv_op_make(c, transposed);
  const size_t wsl = ws_lp(&o, dt), wsf = ws_f32(&o);
  CU_ASSERT(wsl >= wsf);
  CU_ASSERT(wsl <= wsf + (size_t)(o.nw + 16) * 4 + (size_t)(o.nx + o.ny + 32) * 4 +
                       ((size_t)8 << 20)); /* the extras are bounded */
  void *ws = xalloc(wsl), *wsr = xalloc(wsf);
  pair x = pair_random(dt, o.nx, seed), w = pair_random(dt, o.nw, seed + 1);
  pair dy = pair_random(dt, o.ny, seed + 2);
  float *b = c->bias ? xalloc((size_t)o.nb * sizeof(float)) : NULL;
  if (b) gt_fill_uniform(b, o.nb, -1, 1, seed + 3);

  float *yr = xalloc((size_t)o.ny * 4);
  void *y = xalloc((size_t)o.ny * 2);
  forward_f32(&o, x.f, w.f, b, yr, wsr);
  forward_lp(&o, dt, x.h, w.h, b, y, ws);
  check_close(same_rounded(dt, o.ny, yr, y), rel_rounded(dt, o.ny, yr, y), "y", c, transposed, dt);

  float *dxr = xalloc((size_t)o.nx * 4), *dwr = xalloc((size_t)o.nw * 4);
  float *dbr = xalloc((size_t)o.nb * 4), *dw = xalloc((size_t)o.nw * 4);
  float *db = xalloc((size_t)o.nb * 4);
  void *dx = xalloc((size_t)o.nx * 2);
  for (int acc = 0; acc < 2; acc++) {
    /* accumulate adds to what is there: start both from the same values */
    gt_fill_uniform(dwr, o.nw, -1, 1, seed + 4);
    memcpy(dw, dwr, (size_t)o.nw * 4);
    gt_fill_uniform(dbr, o.nb, -1, 1, seed + 5);
    memcpy(db, dbr, (size_t)o.nb * 4);
    backward_f32(&o, x.f, w.f, dy.f, dxr, dwr, dbr, acc, wsr);
    backward_lp(&o, dt, x.h, w.h, dy.h, dx, dw, db, acc, ws);
    check_close(same_rounded(dt, o.nx, dxr, dx), rel_rounded(dt, o.nx, dxr, dx), "dx", c,
                transposed, dt);
    check_close(memcmp(dw, dwr, (size_t)o.nw * 4) == 0, rel_f32(o.nw, dw, dwr), "dw", c, transposed,
                dt);
    check(memcmp(db, dbr, (size_t)o.nb * 4) == 0, "db", c, transposed, dt); /* no GEMM */
  }
  /* dx alone (no weights needed for dw: w may be NULL only without dx), then dw alone */
  memset(dx, 0, (size_t)o.nx * 2);
  backward_f32(&o, NULL, w.f, dy.f, dxr, NULL, NULL, 0, wsr);
  backward_lp(&o, dt, NULL, w.h, dy.h, dx, NULL, NULL, 0, ws);
  check_close(same_rounded(dt, o.nx, dxr, dx), rel_rounded(dt, o.nx, dxr, dx), "dx alone", c,
              transposed, dt);
  backward_f32(&o, x.f, NULL, dy.f, NULL, dwr, NULL, 0, wsr);
  backward_lp(&o, dt, x.h, NULL, dy.h, NULL, dw, NULL, 0, ws);
  check_close(memcmp(dw, dwr, (size_t)o.nw * 4) == 0, rel_f32(o.nw, dw, dwr), "dw alone", c,
              transposed, dt);

  free(yr), free(y), free(dxr), free(dwr), free(dbr), free(dw), free(db), free(dx), free(b);
  pair_free(&x), pair_free(&w), pair_free(&dy);
  free(ws), free(wsr);
}

static void run_all(int32_t dt) {
  failures = 0;
  for (int i = 0; i < CASES; i++)
    for (int t = 0; t < 2; t++) run_case(&cases[i], t, dt, 1000 + 10 * (uint64_t)i + 5 * t);
}

static void test_conv_f16_bitwise(void) {
  run_all(GANFW_DTYPE_F16);
}

/* bf16 without dot products (forced below the avx512 level where the CPU has them): the
 * converted f32 result, bit for bit. */
static void test_conv_bf16_bitwise(void) {
  const ganfw_cpu_isa was = ganfw_cpu_isa_level();
  if (ganfw_cpu_have_bf16_dot()) ganfw_cpu_isa_force(GANFW_CPU_ISA_AVX2);
  CU_ASSERT_EQUAL(ganfw_cpu_have_bf16_dot(), 0);
  tolerance = 0;
  run_all(GANFW_DTYPE_BF16);
  ganfw_cpu_isa_force(was);
}

/* bf16 on bf16 products (gemm_bf16.c: AMX tiles where the CPU has AMX-BF16, else AVX-512 BF16
 * dot products; tests/isa.cmake also runs this suite with GANFW_CPU_AMX=off), where the CPU
 * has them. On im2col + GEMM the products are those of the f32 path (bf16 times bf16 is
 * exact in f32); only the order of the f32 sums differs (K * 2^-24 relative at worst), and then an
 * output may round to the other bf16 neighbour: a few of them at 2^-8 each keep the norm-relative
 * difference far below 2^-8 = 3.9e-3, the bound. On Winograd the transformed tiles (sums and
 * differences of up to 4 inputs, weights times 1/2) are rounded to bf16 before the products, 2^-9
 * relative each, so a product carries about 2^-8 and the result, after the output transform's
 * cancellations, a few times that: 4 x 3.9e-3 is the bound there. Measured: see the
 * printed figures. */
static void test_conv_bf16_dot(void) {
  if (!ganfw_cpu_have_bf16_dot()) {
    printf("\n  no bf16 dot products at this SIMD level: skipped");
    return;
  }
  tolerance = 1.0 / 256;
  worst[0] = worst[1] = 0;
  run_all(GANFW_DTYPE_BF16);
  printf("\n  on %s: largest norm-relative difference: im2col/dense %.2e, Winograd %.2e",
         ganfw_cpu_gemm_bf16_amx() ? "AMX tiles" : "dot products", worst[0], worst[1]);
  CU_ASSERT(worst[0] > 0 || worst[1] > 0); /* the bf16 products did run */
  tolerance = 0;
}

/* The CPU says which groups it runs natively, for both 16-bit dtypes and never for f32, and
 * its one-line description names the dtype. */
static void test_lp_ops(void) {
  const uint32_t f16 = ganfw_be_lp_ops(cpu(), GANFW_DTYPE_F16);
  CU_ASSERT(f16 & GANFW_LP_CONV);
  CU_ASSERT_EQUAL(ganfw_be_lp_ops(cpu(), GANFW_DTYPE_BF16), f16);
  CU_ASSERT_EQUAL(ganfw_be_lp_ops(cpu(), GANFW_DTYPE_F32), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_cpu_lp_describe(GANFW_DTYPE_BF16), "bf16"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_cpu_lp_describe(GANFW_DTYPE_F16), "f16 on the CPU"));
}

static CU_TestInfo tests[] = {{"conv f16 = converted f32, bit for bit", test_conv_f16_bitwise},
                              {"conv bf16 = converted f32, bit for bit", test_conv_bf16_bitwise},
                              {"conv bf16 on dot products, within bounds", test_conv_bf16_dot},
                              {"lp_ops and the log line", test_lp_ops},
                              CU_TEST_INFO_NULL};

int main(void) {
  return gt_run("cpu_lp_conv", tests);
}
