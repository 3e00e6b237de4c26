/* The bf16 GEMM (core/src/backend/cpu/gemm_bf16.c) on each of its paths this CPU has, AMX
 * tiles and AVX-512 BF16 dot products (ganfw_cpu_amx_force switches between them, as
 * GANFW_CPU_AMX=off does), against a double-precision reference on the bf16-rounded operands
 * for all four transpose cases, odd and blocked sizes, leading dimensions above the row
 * length, beta 0 over NaN, beta 1 and others, K = 0; the two paths against each other on
 * ragged shapes, and each path bit for bit the same run to run; the packing's rounding bit for
 * bit against ganfw_f32_to_bf16_scalar (ties, NaN, overflow); on AMX, op(A) given in bf16
 * (ganfw_cpu_gemm_bf16_a16) gives the bits of the f32 call; threads calling it at once (each
 * with its own scratch) get the same bits. A path the CPU (or the SIMD level in use) lacks is
 * reported and its cases skipped; that ganfw_cpu_have_bf16_dot and ganfw_cpu_gemm_bf16_amx
 * follow the CPU's flags and the switches is checked everywhere. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "backend/cpu/cast.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"

static float *falloc(int64_t n) {
  return gt_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
}

static void ffill(float *p, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++) p[i] = v;
}

static float bf16_rounded(float x) {
  return ganfw_bf16_to_f32_scalar(ganfw_f32_to_bf16_scalar(x));
}

/* 1 when /proc/cpuinfo lists the flag (" name" followed by a blank or the line's end), 0 when
 * it does not, -1 when it cannot be read. */
static int cpuinfo_has(const char *name) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return -1;
  char line[8192], want[64];
  snprintf(want, sizeof want, " %s", name);
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    for (const char *at = strstr(line, want); at && !found; at = strstr(at + 1, want)) {
      const char end = at[strlen(want)];
      found = end == ' ' || end == '\n' || end == '\0';
    }
  }
  fclose(f);
  return found;
}

/* The two paths of ganfw_cpu_gemm_bf16. */
enum { PATH_AMX, PATH_DOT, PATHS };
static const char *const path_names[PATHS] = {"AMX tiles", "dot products"};

/* Switches the GEMM to path p; returns 1 when it runs there now, else prints why the cases
 * are skipped and returns 0. */
static int use_path(int p) {
  ganfw_cpu_amx_force(p == PATH_AMX);
  const int dot = ganfw_cpu_have_bf16_dot(), amx = ganfw_cpu_gemm_bf16_amx();
  if (p == PATH_AMX ? amx : dot && !amx) return 1;
  printf("\n    %s skipped: %s", path_names[p],
         !dot ? "no AVX-512 BF16 at this SIMD level" : "no AMX-BF16 (or no tile data from the OS)");
  return 0;
}

/* Back to the default (AMX where there is AMX), as GANFW_CPU_AMX unset. */
static void default_path(void) {
  ganfw_cpu_amx_force(1);
}

/* ganfw_cpu_have_bf16_dot follows the CPU flag and the SIMD level in use, also when forced;
 * ganfw_cpu_gemm_bf16_amx follows AMX-TILE and AMX-BF16, the dot products' availability and
 * the switch. */
static void test_availability(void) {
  const int flag = cpuinfo_has("avx512_bf16");
  const int amx_flags = cpuinfo_has("amx_bf16") > 0 && cpuinfo_has("amx_tile") > 0;
  const ganfw_cpu_isa level = ganfw_cpu_isa_level();
  const char *env = getenv("GANFW_CPU_AMX");
  const int env_off = env && (!strcmp(env, "0") || !strcmp(env, "off"));
  printf("\n    cpuinfo avx512_bf16 %d amx_bf16+amx_tile %d, level %s, have_bf16_dot %d, AMX "
         "supported %d, AMX in use %d",
         flag, amx_flags, ganfw_cpu_isa_name(level), ganfw_cpu_have_bf16_dot(),
         ganfw_cpu_amx_supported(), ganfw_cpu_gemm_bf16_amx());
  if (flag >= 0) CU_ASSERT_EQUAL(ganfw_cpu_have_bf16_dot(), flag && level >= GANFW_CPU_ISA_AVX512);
  /* the OS may refuse the tile data (then it is not used), never grant it without the flags */
  if (!amx_flags) CU_ASSERT_EQUAL(ganfw_cpu_amx_supported(), 0);
  CU_ASSERT_EQUAL(ganfw_cpu_gemm_bf16_amx(),
                  ganfw_cpu_have_bf16_dot() && ganfw_cpu_amx_supported() && !env_off);
  CU_ASSERT_EQUAL(ganfw_cpu_amx_force(0), 0);
  CU_ASSERT_EQUAL(ganfw_cpu_gemm_bf16_amx(), 0);
  CU_ASSERT_EQUAL(ganfw_cpu_amx_force(1),
                  ganfw_cpu_amx_supported() && level >= GANFW_CPU_ISA_AVX512);
  for (int forced = GANFW_CPU_ISA_PORTABLE; forced < GANFW_CPU_ISA_AVX512; forced++) {
    ganfw_cpu_isa_force((ganfw_cpu_isa)forced);
    CU_ASSERT_EQUAL(ganfw_cpu_have_bf16_dot(), 0);
    CU_ASSERT_EQUAL(ganfw_cpu_gemm_bf16_amx(), 0);
    CU_ASSERT_EQUAL(ganfw_cpu_use_amx(), 0);
  }
  ganfw_cpu_isa_force(GANFW_CPU_ISA_AVX512);
  if (flag >= 0) {
    CU_ASSERT_EQUAL(ganfw_cpu_have_bf16_dot(),
                    flag && ganfw_cpu_isa_supported() >= GANFW_CPU_ISA_AVX512);
  }
  CU_ASSERT_EQUAL(ganfw_cpu_gemm_bf16_amx(),
                  ganfw_cpu_have_bf16_dot() && ganfw_cpu_amx_supported());
  CU_ASSERT_EQUAL(ganfw_cpu_isa_force(level), level);
  ganfw_cpu_amx_force(!env_off); /* as the environment says, for the tests below */
}

/* One product: op(A) is M x K, op(B) K x N, leading dimensions the row length plus pad. */
typedef struct case_t {
  int trans_a, trans_b;
  int64_t M, N, K, pad;
  float beta;
} case_t;

/* Runs the case on a, b (f32, the values the kernel gets) and checks every element of C
 * against the double sum over the bf16-rounded values of a and b plus beta C0. Error bound:
 * the bf16 products are exact in f32 (8-bit by 8-bit significands), so the only errors are
 * the f32 roundings of the running sum: per element, K - 1 additions of products, one per K
 * block into C and one for beta C (beta C itself is exact for the betas here), at most
 * K + 2 roundings of a partial sum of magnitude <= S = sum_k |a_ik b_kj| + |beta c0|, each
 * off by at most 2^-24 of it: |err| <= (K + 2) 2^-24 S (< 2^-23 K S). The bound below takes
 * (K + 2) 2^-23 S, twice that, plus 2^-100 for the zeros. Subnormal products (flushed by
 * the instruction) cannot occur with the inputs here (|x| >= 2^-30 or 0). The bound holds for
 * any order of the sums, so for both paths: the dot products add each k-pair's two products
 * to a lane and the K blocks' sums into C, the AMX tiles add product after product into the
 * accumulators they loaded C into (K roundings, + 1 for beta C with beta other than 0 and 1).
 * Returns the worst error relative to its bound; with `out`, C (M x ldc) is copied there. */
static double run_case(const case_t *t, const float *a, const float *b, uint64_t seed, float *out) {
  const int64_t M = t->M, N = t->N, K = t->K;
  const int64_t a_cols = t->trans_a ? M : K, b_cols = t->trans_b ? K : N;
  const int64_t lda = a_cols + t->pad, ldb = b_cols + t->pad, ldc = N + t->pad;
  float *c = falloc(M * ldc), *c0 = falloc(M * ldc);
  if (t->beta == 0.0f) {
    ffill(c0, M * ldc, NAN); /* must not leak into C */
  } else {
    gt_fill_uniform(c0, M * ldc, -2.0f, 2.0f, seed);
  }
  memcpy(c, c0, (size_t)(M * ldc) * sizeof *c);
  ganfw_cpu_gemm_bf16(t->trans_a, t->trans_b, M, N, K, a, lda, b, ldb, t->beta, c, ldc);
  double worst = 0.0;
  int64_t bad = 0;
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < N; j++) {
      double sum = 0.0, mag = 0.0;
      for (int64_t k = 0; k < K; k++) {
        const double x = bf16_rounded(t->trans_a ? a[k * lda + i] : a[i * lda + k]);
        const double y = bf16_rounded(t->trans_b ? b[j * ldb + k] : b[k * ldb + j]);
        sum += x * y;
        mag += fabs(x * y);
      }
      if (t->beta != 0.0f) {
        sum += (double)t->beta * c0[i * ldc + j];
        mag += fabs((double)t->beta * c0[i * ldc + j]);
      }
      const double bound = (double)(K + 2) * ldexp(mag, -23) + 0x1p-100;
      const double err = fabs((double)c[i * ldc + j] - sum);
      const double rel = isnan(err) ? INFINITY : err / bound;
      if (rel > worst) worst = rel;
      if (rel > 1.0 && bad++ < 3) {
        printf("\n    (%d,%d) M %lld N %lld K %lld beta %g: C[%lld,%lld] = %.9g, want %.9g +- %.3g",
               t->trans_a, t->trans_b, (long long)M, (long long)N, (long long)K, t->beta,
               (long long)i, (long long)j, c[i * ldc + j], sum, bound);
      }
    }
  }
  CU_ASSERT_EQUAL(bad, 0);
  if (out) memcpy(out, c, (size_t)(M * ldc) * sizeof *c);
  /* the padding between rows of C is not written */
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = N; j < ldc; j++) {
      const float got = c[i * ldc + j], want = c0[i * ldc + j];
      CU_ASSERT(memcmp(&got, &want, sizeof got) == 0);
    }
  }
  gt_free(c);
  gt_free(c0);
  return worst;
}

/* Random inputs of the case's shapes, a (op(A)) and b (op(B)) with the leading dimensions of
 * run_case; bf16-exact when `exact` (the packing rounds nothing), else arbitrary f32 of which
 * every 5th is a tie halfway between two bf16 values (the reference rounds them with
 * ganfw_f32_to_bf16_scalar, so a packing that truncates or rounds ties away from zero is off
 * by 2^-8 of a product, far above the bound for K <= 64). The caller frees both. */
static void case_inputs(const case_t *t, int exact, uint64_t seed, float **pa, float **pb) {
  const int64_t na = t->M * t->K + (t->trans_a ? t->K : t->M) * t->pad;
  const int64_t nb = t->K * t->N + (t->trans_b ? t->N : t->K) * t->pad;
  float *a = falloc(na), *b = falloc(nb);
  gt_fill_uniform(a, na, -1.0f, 1.0f, seed);
  gt_fill_uniform(b, nb, -1.0f, 1.0f, seed + 1);
  for (int64_t i = 0; i < na; i++) {
    if (exact) {
      a[i] = bf16_rounded(a[i]);
    } else if (i % 5 == 2) {
      a[i] = ganfw_f32_from_bits((ganfw_f32_bits(a[i]) & 0xffff0000u) | 0x8000u);
    }
  }
  for (int64_t i = 0; i < nb; i++) {
    if (exact) {
      b[i] = bf16_rounded(b[i]);
    } else if (i % 5 == 3) {
      b[i] = ganfw_f32_from_bits((ganfw_f32_bits(b[i]) & 0xffff0000u) | 0x8000u);
    }
  }
  *pa = a;
  *pb = b;
}

static double check_case(const case_t *t, int exact, uint64_t seed) {
  float *a, *b;
  case_inputs(t, exact, seed, &a, &b);
  const double worst = run_case(t, a, b, seed + 2, NULL);
  gt_free(a);
  gt_free(b);
  return worst;
}

static const int transposes[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
enum { TRANSPOSES = 4 };

/* Runs a test body once per path the CPU has, then goes back to the default path. */
static void each_path(void (*body)(int path)) {
  for (int p = 0; p < PATHS; p++) {
    if (!use_path(p)) continue;
    printf("\n    %s:", path_names[p]);
    body(p);
  }
  default_path();
}

/* Every odd small shape: ragged register tiles (dot products 14 x 32, AMX 32 x 32 of 16 x 16
 * tiles, 32 k a tile step), odd K, 1-wide products, every beta. */
static void small_on(int path) {
  (void)path;
  static const int64_t Ms[] = {1, 2, 5, 13, 14, 15, 16, 17, 32, 33};
  static const int64_t Ns[] = {1, 3, 16, 17, 31, 32, 33, 40};
  static const int64_t Ks[] = {1, 2, 3, 7, 16, 31, 32, 33, 64, 65};
  static const float betas[] = {0.0f, 1.0f, 0.5f, -2.0f};
  double worst = 0.0;
  uint64_t seed = 100;
  int n = 0;
  for (int tr = 0; tr < TRANSPOSES; tr++) {
    for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
      for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
        for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++, n++) {
          const case_t t = {transposes[tr][0], transposes[tr][1], Ms[mi], Ns[ni], Ks[ki],
                            (int64_t)(n % 3),  betas[n % 4]};
          worst = fmax(worst, check_case(&t, 1, seed += 3));
        }
      }
    }
  }
  printf("\n    %d small products, worst error %.3f of the bound", n, worst);
}

/* Shapes across the K, M and N blocks (dot products: KC 256, MC 280, NC 2048; AMX: KC 512,
 * MC 256, NC 2048) and DC-GAN-like ones. */
static void blocked_on(int path) {
  (void)path;
  static const case_t cases[] = {
      {0, 0, 64, 96, 513, 0, 0.0f},   {1, 0, 64, 96, 513, 5, 1.0f},   {0, 1, 64, 96, 513, 1, 0.0f},
      {1, 1, 64, 96, 513, 2, -2.0f},  {0, 0, 300, 40, 520, 3, 1.0f},  {1, 0, 300, 40, 520, 0, 0.0f},
      {0, 1, 300, 40, 520, 2, 1.0f},  {1, 1, 300, 40, 520, 1, 0.5f},  {0, 0, 3, 2081, 300, 1, 0.0f},
      {1, 0, 3, 2081, 300, 0, 1.0f},  {0, 1, 3, 2081, 300, 7, 0.0f},  {0, 0, 29, 70, 257, 0, 0.5f},
      {0, 1, 45, 33, 1024, 16, 0.0f}, {0, 0, 96, 64, 1100, 0, -2.0f}, {1, 0, 70, 48, 1100, 3, 1.0f},
      {0, 1, 128, 80, 2048, 0, 1.0f}};
  double worst = 0.0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    worst = fmax(worst, check_case(&cases[i], 1, 1000 + 7 * i));
  }
  printf("\n    %zu blocked products, worst error %.3f of the bound", sizeof cases / sizeof *cases,
         worst);
}

/* Inputs that are not bf16 values: the packing rounds them to nearest even. */
static void rounding_in_packing_on(int path) {
  (void)path;
  double worst = 0.0;
  int n = 0;
  for (int tr = 0; tr < TRANSPOSES; tr++) {
    for (int64_t K = 1; K <= 64; K += 9, n++) {
      const case_t t = {transposes[tr][0], transposes[tr][1], 17 + K % 5, 37 - K % 7, K, K % 2,
                        (float)(n % 2)};
      worst = fmax(worst, check_case(&t, 0, 5000 + 11 * (uint64_t)n));
    }
  }
  printf("\n    %d products, worst error %.3f of the bound", n, worst);
}

/* The rounding bit for bit: op(A) (or op(B)) holds special values in one k of a k-pair and 1
 * in op(B) (op(A)) at that k, zeros at the other k, so C is the packed bf16 value, exactly. */
static void rounding_bits_on(int path) {
  (void)path;
  static const uint32_t bits[] = {
      0x3f800000u, 0x3f808000u, /* tie, even below: stays 0x3f80 */
      0x3f818000u,              /* tie, odd below: up to 0x3f82 */
      0x3f808001u, 0x3f807fffu, 0xbf818000u, 0xbf808000u, 0xbf80c000u, 0x7f7f8000u, /* -> inf */
      0x7f7f7fffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x00000000u, 0x7fc00001u,
      0xffa12345u, /* NaN (signalling, payload): stays NaN */
      0x3a7fffffu, 0x40490fdbu, 0x00800000u /* smallest normal */};
  const int64_t n = sizeof bits / sizeof *bits;
  int64_t wrong = 0;
  for (int tr = 0; tr < TRANSPOSES; tr++) {
    const int ta = transposes[tr][0], tb = transposes[tr][1];
    for (int side = 0; side < 2; side++) {
      for (int64_t K = 1; K <= 2; K++) {
        const int64_t kv = K - 1; /* the k holding the values: the low, then the high half */
        /* side 0: values in op(A) (M = n, N = 1); side 1: in op(B) (M = 1, N = n) */
        const int64_t M = side ? 1 : n, N = side ? n : 1;
        float *a = falloc(M * K), *b = falloc(K * N), *c = falloc(M * N);
        for (int64_t i = 0; i < M; i++) {
          for (int64_t k = 0; k < K; k++) {
            const float v = k != kv ? 0.0f : side ? 1.0f : ganfw_f32_from_bits(bits[i]);
            a[ta ? k * M + i : i * K + k] = v;
          }
        }
        for (int64_t k = 0; k < K; k++) {
          for (int64_t j = 0; j < N; j++) {
            const float v = k != kv ? 0.0f : side ? ganfw_f32_from_bits(bits[j]) : 1.0f;
            b[tb ? j * K + k : k * N + j] = v;
          }
        }
        ganfw_cpu_gemm_bf16(ta, tb, M, N, K, a, ta ? M : K, b, tb ? K : N, 0.0f, c, N);
        for (int64_t i = 0; i < n; i++) {
          const float want = bf16_rounded(ganfw_f32_from_bits(bits[i]));
          const int ok = isnan(want) ? isnan(c[i]) : ganfw_f32_bits(c[i]) == ganfw_f32_bits(want);
          if (!ok && wrong++ < 5) {
            printf("\n    (%d,%d) side %d K %lld: 0x%08x packed as 0x%08x, want 0x%08x", ta, tb,
                   side, (long long)K, bits[i], ganfw_f32_bits(c[i]), ganfw_f32_bits(want));
          }
        }
        gt_free(a);
        gt_free(b);
        gt_free(c);
      }
    }
  }
  CU_ASSERT_EQUAL(wrong, 0);
}

/* K = 0: C = beta C, zeros (not NaN) with beta 0. */
static void k_zero_on(int path) {
  (void)path;
  const int64_t M = 5, N = 7, ldc = 9;
  float a[1] = {1.0f}, b[1] = {1.0f}, c[5 * 9];
  for (int tr = 0; tr < TRANSPOSES; tr++) {
    ffill(c, M * ldc, NAN);
    ganfw_cpu_gemm_bf16(transposes[tr][0], transposes[tr][1], M, N, 0, a, 1, b, 1, 0.0f, c, ldc);
    for (int64_t i = 0; i < M; i++) {
      for (int64_t j = 0; j < ldc; j++) {
        if (j < N) {
          CU_ASSERT(ganfw_f32_bits(c[i * ldc + j]) == 0);
        } else {
          CU_ASSERT(isnan(c[i * ldc + j]));
        }
      }
    }
    for (int64_t i = 0; i < M * ldc; i++) c[i] = (float)i;
    ganfw_cpu_gemm_bf16(transposes[tr][0], transposes[tr][1], M, N, 0, a, 1, b, 1, 0.5f, c, ldc);
    for (int64_t i = 0; i < M; i++) {
      for (int64_t j = 0; j < ldc; j++) {
        const float i0 = (float)(i * ldc + j);
        CU_ASSERT_EQUAL(c[i * ldc + j], j < N ? 0.5f * i0 : i0);
      }
    }
  }
}

/* Threads calling it at once, each with its own scratch (grown on first use, freed at thread
 * exit, which ASan checks), give the bits of the calling thread's product. */
typedef struct thread_job {
  const float *a, *b;
  float *c;
} thread_job;

enum { JOB_M = 70, JOB_N = 300, JOB_K = 600, JOB_THREADS = 4 };

static void *thread_run(void *p) {
  thread_job *j = p;
  ganfw_cpu_gemm_bf16(0, 1, JOB_M, JOB_N, JOB_K, j->a, JOB_K, j->b, JOB_K, 0.0f, j->c, JOB_N);
  return NULL;
}

static void threads_on(int path) {
  (void)path;
  float *a = falloc(JOB_M * JOB_K), *b = falloc(JOB_N * JOB_K), *want = falloc(JOB_M * JOB_N);
  gt_fill_uniform(a, JOB_M * JOB_K, -1.0f, 1.0f, 7);
  gt_fill_uniform(b, JOB_N * JOB_K, -1.0f, 1.0f, 8);
  thread_job jobs[JOB_THREADS];
  pthread_t threads[JOB_THREADS];
  for (int t = 0; t < JOB_THREADS; t++) {
    jobs[t] = (thread_job){a, b, falloc(JOB_M * JOB_N)};
    CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[t], NULL, thread_run, &jobs[t]), 0);
  }
  thread_job self = {a, b, want};
  thread_run(&self);
  for (int t = 0; t < JOB_THREADS; t++) {
    CU_ASSERT_EQUAL(pthread_join(threads[t], NULL), 0);
    CU_ASSERT(memcmp(jobs[t].c, want, sizeof(float) * JOB_M * JOB_N) == 0);
    gt_free(jobs[t].c);
  }
  gt_free(a);
  gt_free(b);
  gt_free(want);
}

/* The two paths and the reference on the same ragged inputs: each path within the bound of
 * the reference (run_case), so the paths within twice the bound of each other; the printed
 * figure is the largest |AMX - dot products| relative to that. Each path gives the same bits
 * when run again. Skipped (with a message) unless the CPU has both. */
static void test_paths_agree(void) {
  if (!use_path(PATH_AMX) || !use_path(PATH_DOT)) {
    default_path();
    return;
  }
  static const int64_t shapes[][3] = {{1, 1, 1},    {7, 5, 3},     {16, 16, 32},  {17, 33, 65},
                                      {31, 47, 95}, {33, 31, 127}, {45, 70, 257}, {70, 100, 531}};
  static const float betas[] = {0.0f, 1.0f, 0.5f};
  double worst[PATHS] = {0}, apart = 0.0;
  int64_t differ = 0, total = 0;
  int n = 0;
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    for (int tr = 0; tr < TRANSPOSES; tr++, n++) {
      const case_t t = {transposes[tr][0], transposes[tr][1], shapes[si][0],
                        shapes[si][1],     shapes[si][2],     n % 2,
                        betas[n % 3]};
      const int64_t ldc = t.N + t.pad, cn = t.M * ldc;
      float *a, *b, *c[PATHS][2];
      case_inputs(&t, n % 2, 7000 + 13 * (uint64_t)n, &a, &b);
      for (int p = 0; p < PATHS; p++) {
        use_path(p);
        for (int run = 0; run < 2; run++) {
          c[p][run] = falloc(cn);
          worst[p] = fmax(worst[p], run_case(&t, a, b, 99 + (uint64_t)n, c[p][run]));
        }
        CU_ASSERT(memcmp(c[p][0], c[p][1], (size_t)cn * sizeof(float)) == 0);
      }
      /* |amx - dot| against the bound of run_case, recomputed here per element */
      for (int64_t i = 0; i < t.M; i++) {
        for (int64_t j = 0; j < t.N; j++) {
          const int64_t lda = (t.trans_a ? t.M : t.K) + t.pad,
                        ldb = (t.trans_b ? t.K : t.N) + t.pad;
          double mag = 0.0;
          for (int64_t k = 0; k < t.K; k++) {
            mag += fabs((double)bf16_rounded(t.trans_a ? a[k * lda + i] : a[i * lda + k]) *
                        bf16_rounded(t.trans_b ? b[j * ldb + k] : b[k * ldb + j]));
          }
          const double bound = (double)(t.K + 2) * ldexp(mag + 2.0 * fabs(t.beta), -23) + 0x1p-100;
          const double d = fabs((double)c[PATH_AMX][0][i * ldc + j] - c[PATH_DOT][0][i * ldc + j]);
          apart = fmax(apart, d / bound);
          differ += d != 0.0;
          total++;
        }
      }
      for (int p = 0; p < PATHS; p++) gt_free(c[p][0]), gt_free(c[p][1]);
      gt_free(a);
      gt_free(b);
    }
  }
  CU_ASSERT(apart <= 2.0);
  printf("\n    %d products: worst error AMX %.3f, dot products %.3f of the bound; AMX - dot "
         "products up to %.3f of it, %lld of %lld elements differ",
         n, worst[PATH_AMX], worst[PATH_DOT], apart, (long long)differ, (long long)total);
  default_path();
}

/* ganfw_cpu_gemm_bf16_a16 (op(A) held in bf16) gives the bits of ganfw_cpu_gemm_bf16 on the
 * same values in f32, for every transpose, ragged shapes across the AMX blocks, odd K, padded
 * leading dimensions and each beta. AMX only: skipped elsewhere. */
static void test_a16(void) {
  if (!use_path(PATH_AMX)) {
    default_path();
    return;
  }
  static const int64_t shapes[][3] = {{1, 1, 1},     {7, 5, 3},      {17, 33, 65},
                                      {33, 31, 127}, {70, 100, 531}, {300, 40, 1100}};
  static const float betas[] = {0.0f, 1.0f, 0.5f};
  int n = 0;
  int64_t wrong = 0;
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    for (int tr = 0; tr < TRANSPOSES; tr++, n++) {
      const int ta = transposes[tr][0], tb = transposes[tr][1];
      const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], pad = n % 3;
      const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
      const int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb;
      float *a = falloc(na), *b = falloc(nb), *c = falloc(M * ldc), *c16 = falloc(M * ldc);
      uint16_t *a16 = gt_alloc((size_t)na * sizeof *a16);
      gt_fill_uniform(a, na, -1.0f, 1.0f, 9000 + (uint64_t)n);
      gt_fill_uniform(b, nb, -1.0f, 1.0f, 9500 + (uint64_t)n);
      gt_fill_uniform(c, M * ldc, -2.0f, 2.0f, 9900 + (uint64_t)n);
      memcpy(c16, c, (size_t)(M * ldc) * sizeof *c);
      for (int64_t i = 0; i < na; i++) {
        a16[i] = ganfw_f32_to_bf16_scalar(a[i]);
        a[i] = ganfw_bf16_to_f32_scalar(a16[i]);
      }
      const float beta = betas[n % 3];
      ganfw_cpu_gemm_bf16(ta, tb, M, N, K, a, lda, b, ldb, beta, c, ldc);
      ganfw_cpu_gemm_bf16_a16(ta, tb, M, N, K, a16, lda, b, ldb, beta, c16, ldc);
      for (int64_t i = 0; i < M * ldc; i++) wrong += ganfw_f32_bits(c[i]) != ganfw_f32_bits(c16[i]);
      gt_free(a), gt_free(b), gt_free(c), gt_free(c16), gt_free(a16);
    }
  }
  CU_ASSERT_EQUAL(wrong, 0);
  printf("\n    %d products, %lld elements differ", n, (long long)wrong);
  default_path();
}

static void test_small(void) {
  each_path(small_on);
}

static void test_blocked(void) {
  each_path(blocked_on);
}

static void test_rounding_in_packing(void) {
  each_path(rounding_in_packing_on);
}

static void test_rounding_bits(void) {
  each_path(rounding_bits_on);
}

static void test_k_zero(void) {
  each_path(k_zero_on);
}

static void test_threads(void) {
  each_path(threads_on);
}

static CU_TestInfo tests[] = {{"availability", test_availability},
                              {"paths_agree", test_paths_agree},
                              {"a16", test_a16},
                              {"small", test_small},
                              {"blocked", test_blocked},
                              {"rounding_in_packing", test_rounding_in_packing},
                              {"rounding_bits", test_rounding_bits},
                              {"k_zero", test_k_zero},
                              {"threads", test_threads},
                              CU_TEST_INFO_NULL};

GT_MAIN("cpu_gemm_bf16", tests)
