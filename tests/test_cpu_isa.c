/* The CPU backend's SIMD levels (core/src/backend/cpu/isa.h): GANFW_CPU_ISA chooses the level
 * (clamped to what the CPU runs), and every kernel with a per-level copy gives, at each level
 * this CPU runs, the same bits as the portable fallback: activations, BatchNorm, dropout,
 * the fmaf foreach ops, the f16 casts (F16C), im2col conv2d (the AVX-512 block copies) and
 * the Winograd transforms. Bitwise, not within a tolerance, because the arithmetic is the
 * same at every level: the core builds as ISO C11 (-ffp-contract=off), so no level fuses a
 * multiply and an add the source does not fuse, fmaf is exact by definition on all of them,
 * float reductions are not reordered (no -ffast-math; BatchNorm's lanes are explicit), and
 * the vector code only copies, selects or adds lane by lane. OpenBLAS is outside the levels
 * (it has its own dispatch), so the GEMMs run the same code on each. Levels the CPU lacks are
 * reported and skipped. tests/isa.cmake runs this and the op suites once per level. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"
#include "backend/cpu/isa.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

static float *frand(int64_t n, float lo, float hi, uint64_t seed) {
  float *p = gt_alloc((size_t)n * sizeof *p);
  gt_fill_uniform(p, n, lo, hi, seed);
  return p;
}

static float *falloc(int64_t n) {
  return gt_alloc((size_t)n * sizeof(float));
}

/* The env level, its parsing and the clamping of ganfw_cpu_isa_force. */
static void test_levels(void) {
  const ganfw_cpu_isa have = ganfw_cpu_isa_supported(), now = ganfw_cpu_isa_level();
  printf("\n    supported %s, in use %s", ganfw_cpu_isa_name(have), ganfw_cpu_isa_name(now));
  CU_ASSERT(now >= GANFW_CPU_ISA_PORTABLE && now <= have);
  const char *env = getenv("GANFW_CPU_ISA");
  ganfw_cpu_isa want;
  if (env && ganfw_cpu_isa_parse(env, &want) == 0) {
    /* the level asked for, or the highest the CPU runs when it asked for more */
    CU_ASSERT_EQUAL(now, want <= have ? want : have);
  } else if (!env || !*env || !strcmp(env, "auto")) {
    CU_ASSERT_EQUAL(now, have);
  }
  for (int i = 0; i < GANFW_CPU_ISA_COUNT; i++) {
    ganfw_cpu_isa back;
    CU_ASSERT_EQUAL(ganfw_cpu_isa_parse(ganfw_cpu_isa_name((ganfw_cpu_isa)i), &back), 0);
    CU_ASSERT_EQUAL(back, (ganfw_cpu_isa)i);
  }
  CU_ASSERT_EQUAL(ganfw_cpu_isa_parse("AVX2", &want), 0);
  CU_ASSERT_EQUAL(want, GANFW_CPU_ISA_AVX2);
  CU_ASSERT_EQUAL(ganfw_cpu_isa_parse("avx3", &want), -1);
  CU_ASSERT_EQUAL(ganfw_cpu_isa_parse(NULL, &want), -1);
  CU_ASSERT_STRING_EQUAL(ganfw_cpu_isa_name(GANFW_CPU_ISA_COUNT), "?");
  CU_ASSERT_EQUAL(ganfw_cpu_isa_force(GANFW_CPU_ISA_PORTABLE), GANFW_CPU_ISA_PORTABLE);
  CU_ASSERT_EQUAL(ganfw_cpu_isa_level(), GANFW_CPU_ISA_PORTABLE);
  CU_ASSERT_EQUAL(ganfw_cpu_isa_force(GANFW_CPU_ISA_AVX512), have); /* clamped */
  ganfw_cpu_isa_force(now);
}

/* Runs `run` (which writes nbytes at out) at the portable level and at every higher level
 * this CPU runs, and asserts the bytes are the same. */
typedef void (*isa_run_fn)(void *ctx);
static void same_at_every_level(const char *what, isa_run_fn run, void *ctx, const void *out,
                                size_t nbytes) {
  const ganfw_cpu_isa saved = ganfw_cpu_isa_level();
  ganfw_cpu_isa_force(GANFW_CPU_ISA_PORTABLE);
  run(ctx);
  void *ref = gt_alloc(nbytes);
  memcpy(ref, out, nbytes);
  for (int l = GANFW_CPU_ISA_AVX2; l < GANFW_CPU_ISA_COUNT; l++) {
    if (ganfw_cpu_isa_force((ganfw_cpu_isa)l) != (ganfw_cpu_isa)l) {
      printf("\n    %-40s %s: not on this CPU, skipped", what,
             ganfw_cpu_isa_name((ganfw_cpu_isa)l));
      continue;
    }
    memset((void *)out, 0xa5, nbytes);
    run(ctx);
    const int eq = memcmp(ref, out, nbytes) == 0;
    printf("\n    %-40s %s == portable: %s", what, ganfw_cpu_isa_name((ganfw_cpu_isa)l),
           eq ? "yes" : "NO");
    CU_ASSERT(eq);
  }
  gt_free(ref);
  ganfw_cpu_isa_force(saved);
}

/* --- activations ------------------------------------------------------------------------ */

typedef struct act_ctx {
  int32_t kind;
  int64_t n;
  const float *x, *dy;
  float *out; /* y then dx */
} act_ctx;

static void act_run(void *p) {
  act_ctx *c = p;
  ganfw_be_act_forward(cpu(), c->kind, 0.2f, c->n, c->x, c->out);
  ganfw_be_act_backward(cpu(), c->kind, 0.2f, c->n, c->out, c->dy, c->out + c->n);
}

static void test_activations(void) {
  const int64_t n = 100003; /* a vector tail, and past the parallel threshold */
  float *x = frand(n, -30, 30, 1), *dy = frand(n, -1, 1, 2), *out = falloc(2 * n);
  x[0] = 0.0f, x[1] = -0.0f, x[2] = NAN, x[3] = INFINITY, x[4] = -INFINITY, x[5] = 1e-30f;
  const int32_t kinds[] = {GANFW_ACT_RELU, GANFW_ACT_LEAKY_RELU, GANFW_ACT_TANH, GANFW_ACT_SIGMOID};
  const char *names[] = {"relu", "leaky_relu", "tanh", "sigmoid"};
  for (int k = 0; k < 4; k++) {
    act_ctx c = {kinds[k], n, x, dy, out};
    char what[64];
    snprintf(what, sizeof what, "act %s y, dx", names[k]);
    same_at_every_level(what, act_run, &c, out, (size_t)(2 * n) * sizeof *out);
  }
  gt_free(x), gt_free(dy), gt_free(out);
}

/* --- BatchNorm ------------------------------------------------------------------------- */

typedef struct bn_ctx {
  int64_t N, C, HW;
  const float *x, *dy, *gamma, *beta;
  float *out; /* y [NCHW], dx [NCHW], mean, invstd, rm, rv, dgamma, dbeta, eval y [NCHW] */
} bn_ctx;

static void bn_run(void *p) {
  bn_ctx *c = p;
  const int64_t n = c->N * c->C * c->HW;
  float *y = c->out, *dx = y + n, *mean = dx + n, *invstd = mean + c->C, *rm = invstd + c->C;
  float *rv = rm + c->C, *dg = rv + c->C, *db = dg + c->C, *ye = db + c->C;
  for (int64_t i = 0; i < c->C; i++) rm[i] = 0.0f, rv[i] = 1.0f;
  ganfw_be_batchnorm2d_forward_train(cpu(), c->N, c->C, c->HW, c->x, c->gamma, c->beta, y, rm, rv,
                                     0.1f, 1e-5f, mean, invstd);
  ganfw_be_batchnorm2d_backward(cpu(), c->N, c->C, c->HW, c->x, c->dy, c->gamma, mean, invstd, dx,
                                dg, db, 0);
  ganfw_be_batchnorm2d_forward_eval(cpu(), c->N, c->C, c->HW, c->x, c->gamma, c->beta, ye, rm, rv,
                                    1e-5f);
}

static void test_batchnorm(void) {
  /* DC-GAN's 64 channels at 8x8 (short rows), and 3 channels of 33x35 (long rows, tails) */
  const int64_t shapes[][3] = {{16, 64, 64}, {4, 3, 33 * 35}};
  for (int s = 0; s < 2; s++) {
    const int64_t N = shapes[s][0], C = shapes[s][1], HW = shapes[s][2], n = N * C * HW;
    float *x = frand(n, -2, 3, 10), *dy = frand(n, -1, 1, 11);
    float *gamma = frand(C, 0.5f, 1.5f, 12), *beta = frand(C, -1, 1, 13);
    const int64_t nout = 3 * n + 6 * C;
    float *out = falloc(nout);
    bn_ctx c = {N, C, HW, x, dy, gamma, beta, out};
    char what[64];
    snprintf(what, sizeof what, "batchnorm %lldx%lldx%lld", (long long)N, (long long)C,
             (long long)HW);
    same_at_every_level(what, bn_run, &c, out, (size_t)nout * sizeof *out);
    gt_free(x), gt_free(dy), gt_free(gamma), gt_free(beta), gt_free(out);
  }
}

/* --- dropout ---------------------------------------------------------------------------- */

typedef struct dropout_ctx {
  int64_t n;
  const float *x, *dy;
  float *out; /* y, dx, then the mask's bytes */
} dropout_ctx;

static void dropout_run(void *p) {
  dropout_ctx *c = p;
  uint8_t *mask = (uint8_t *)(c->out + 2 * c->n);
  ganfw_be_dropout_forward(cpu(), c->n, 0.3f, 1234, 77, c->x, c->out, mask);
  ganfw_be_dropout_backward(cpu(), c->n, 0.3f, mask, c->dy, c->out + c->n);
}

static void test_dropout(void) {
  const int64_t n = 70001;
  float *x = frand(n, -1, 1, 20), *dy = frand(n, -1, 1, 21);
  const size_t nbytes = (size_t)(2 * n) * sizeof(float) + (size_t)n;
  float *out = gt_alloc(nbytes);
  dropout_ctx c = {n, x, dy, out};
  same_at_every_level("dropout y, dx, mask", dropout_run, &c, out, nbytes);
  gt_free(x), gt_free(dy), gt_free(out);
}

/* --- foreach (fmaf) ---------------------------------------------------------------------- */

typedef struct foreach_ctx {
  int64_t n;
  const float *y0, *a, *b;
  float *out; /* axpy, addcmul, lerp (small w), lerp (large w) */
} foreach_ctx;

static void foreach_run(void *p) {
  foreach_ctx *c = p;
  const int64_t n = c->n;
  for (int k = 0; k < 4; k++) memcpy(c->out + k * n, c->y0, (size_t)n * sizeof *c->out);
  ganfw_be_axpy(cpu(), n, c->out, -1e-3f, c->a);
  ganfw_be_addcmul(cpu(), n, c->out + n, 0.999f, c->a, c->b);
  ganfw_be_lerp(cpu(), n, c->out + 2 * n, c->a, 0.1f);
  ganfw_be_lerp(cpu(), n, c->out + 3 * n, c->a, 0.9f);
}

static void test_foreach(void) {
  const int64_t n = 50001;
  float *y0 = frand(n, -1, 1, 30), *a = frand(n, -1, 1, 31), *b = frand(n, -1, 1, 32);
  float *out = falloc(4 * n);
  foreach_ctx c = {n, y0, a, b, out};
  same_at_every_level("axpy, addcmul, lerp", foreach_run, &c, out, (size_t)(4 * n) * sizeof *out);
  gt_free(y0), gt_free(a), gt_free(b), gt_free(out);
}

/* --- casts ------------------------------------------------------------------------------ */

typedef struct cast_ctx {
  const float *x;
  uint16_t *h; /* f32 -> f16 of x [65536 + n], then every f16 value */
  float *f;    /* every f16 value back to f32 */
  int64_t n;
} cast_ctx;

static void cast_run(void *p) {
  cast_ctx *c = p;
  ganfw_be_f32_to_f16(cpu(), c->n, c->x, c->h);
  for (int64_t i = 0; i < 65536; i++) c->h[c->n + i] = (uint16_t)i;
  ganfw_be_f16_to_f32(cpu(), 65536, c->h + c->n, c->f);
}

static void test_casts(void) {
  const int64_t n = 200003;
  float *x = frand(n, -70000, 70000, 40);
  for (int64_t i = 0; i < n / 2; i++) x[i] *= 1e-9f; /* subnormal f16 range */
  /* one buffer, compared whole: f [65536] then h [n + 65536] */
  const size_t nbytes = 65536 * sizeof(float) + (size_t)(n + 65536) * sizeof(uint16_t);
  float *buf = gt_alloc(nbytes);
  cast_ctx c = {x, (uint16_t *)(void *)(buf + 65536), buf, n};
  same_at_every_level("f32 <-> f16 (F16C from avx2)", cast_run, &c, buf, nbytes);
  gt_free(x), gt_free(buf);
}

/* --- convolutions ----------------------------------------------------------------------- */

typedef struct conv_ctx {
  ganfw_conv2d_shape s;
  const float *x, *w, *b, *dy;
  float *out; /* y, dx, dw, db */
  void *ws;
} conv_ctx;

static void conv_run(void *p) {
  conv_ctx *c = p;
  const ganfw_conv2d_shape *s = &c->s;
  const int64_t ny = s->N * s->K * s->P * s->Q, nx = s->N * s->C * s->H * s->W;
  const int64_t nw = s->K * s->C * s->R * s->S;
  ganfw_be_conv2d_forward(cpu(), s, c->x, c->w, c->b, c->out, c->ws);
  ganfw_be_conv2d_backward(cpu(), s, c->x, c->w, c->dy, c->out + ny, c->out + ny + nx,
                           c->out + ny + nx + nw, 0, c->ws);
}

static void conv_case(const char *what, int64_t N, int64_t C, int64_t H, int64_t K, int64_t R,
                      int64_t stride, int64_t pad) {
  conv_ctx c = {.s = {.N = N,
                      .C = C,
                      .H = H,
                      .W = H,
                      .K = K,
                      .R = R,
                      .S = R,
                      .stride_h = stride,
                      .stride_w = stride,
                      .pad_h = pad,
                      .pad_w = pad}};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&c.s), GANFW_OK);
  const int64_t ny = N * K * c.s.P * c.s.Q, nx = N * C * H * H, nw = K * C * R * R;
  float *x = frand(nx, -1, 1, 50), *w = frand(nw, -1, 1, 51), *b = frand(K, -1, 1, 52);
  float *dy = frand(ny, -1, 1, 53);
  const int64_t nout = ny + nx + nw + K;
  float *out = falloc(nout);
  c.x = x, c.w = w, c.b = b, c.dy = dy, c.out = out;
  c.ws = gt_alloc(ganfw_be_conv2d_workspace(cpu(), &c.s));
  same_at_every_level(what, conv_run, &c, out, (size_t)nout * sizeof *out);
  gt_free(x), gt_free(w), gt_free(b), gt_free(dy), gt_free(out), gt_free(c.ws);
}

static void test_conv(void) {
  /* im2col with the stride-2 and stride-1 block copies (AVX-512 gather/scatter) */
  conv_case("conv2d im2col k4 s2 (block copies)", 4, 8, 18, 16, 4, 2, 1);
  conv_case("conv2d im2col k3 s1 (block copies)", 3, 5, 21, 7, 3, 1, 1);
  /* Winograd (ganfw_cpu_conv2d_winograd_use: 16 images, 64 -> 64 channels, 4x4 out) */
  conv_case("conv2d winograd (transforms)", 16, 64, 8, 64, 4, 2, 1);
}

static CU_TestInfo tests[] = {{"levels", test_levels},       {"activations", test_activations},
                              {"batchnorm", test_batchnorm}, {"dropout", test_dropout},
                              {"foreach", test_foreach},     {"casts", test_casts},
                              {"conv", test_conv},           CU_TEST_INFO_NULL};

GT_MAIN("cpu_isa", tests)
