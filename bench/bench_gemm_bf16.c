/* Times ganfw's bf16 GEMM (core/src/backend/cpu/gemm_bf16.c) on its two paths, AMX tiles and
 * AVX-512 BF16 dot products (GANFW_CPU_AMX switched per call with ganfw_cpu_amx_force), against
 * OpenBLAS cblas_sgemm, all single-threaded on the same inputs, on the GEMMs one training step
 * of DC-GAN-64 in amp bf16 makes (configs/dcgan64_emoji_bf16.yaml at batch 64: each conv and
 * conv-transpose's forward, input-gradient and weight-gradient products, as gemm.c and conv2d.c
 * cut them, with the number of calls per step). AMX runs twice: as the conv calls it (where
 * op(A) is the weights, marked w, read in bf16 through ganfw_cpu_gemm_bf16_a16) and with A in
 * f32. The four alternate every run; it prints each one's median, GFLOP/s and the speed-ups of
 * AMX over the dot products and sgemm, then the totals over a step's calls (single-threaded
 * GEMM time per step). Where the CPU has no AMX the AMX columns say "-"; without AVX-512 BF16
 * there is nothing to compare.
 *   bench_gemm_bf16 [runs]      (default 21) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cpu/cast.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"

/* OpenBLAS's own thread control (declared in its cblas.h, repeated for other providers). */
void openblas_set_num_threads(int num_threads);

typedef struct bench_shape {
  int trans_a, trans_b;
  int64_t M, N, K;
  float beta;
  int calls;   /* per training step */
  int weights; /* op(A) is the conv's weights: on AMX the conv passes them in bf16 (a16) */
} bench_shape;

/* DC-GAN-64's bf16 GEMMs of one step, traced from bench_dcgan_step (M = output channels or
 * im2col rows, N = one image's output positions or a column block, K = the reduction). */
static const bench_shape shapes[] = {
    {0, 0, 128, 256, 1024, 0.0f, 256, 1}, /* conv fwd 64->128 32x32, one image */
    {1, 0, 1024, 256, 128, 0.0f, 320, 1}, /* its input gradient (col = w^T dy) */
    {0, 1, 128, 80, 2048, 1.0f, 176, 0},  /* its weight gradient, a column block of a chunk */
    {0, 0, 256, 128, 2048, 0.0f, 128, 1}, /* conv fwd 128->256 16x16 */
    {1, 0, 2048, 128, 256, 0.0f, 160, 1}, /* its input gradient */
    {0, 1, 256, 176, 1024, 1.0f, 80, 0},  /* its weight gradient */
    {0, 0, 512, 64, 4096, 0.0f, 64, 1},   /* conv fwd 256->512 8x8 */
    {1, 0, 4096, 64, 512, 0.0f, 80, 1},   /* its input gradient */
    {0, 1, 512, 336, 512, 1.0f, 32, 0},   /* its weight gradient */
    {0, 0, 64, 1024, 48, 0.0f, 192, 1},   /* 3-channel layers: K = 3 x 4 x 4 */
    {1, 0, 48, 1024, 64, 0.0f, 192, 1},   /* and the other way */
    {0, 1, 32, 48, 32768, 1.0f, 6, 0},    /* a weight gradient with a long K */
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static float *random_buffer(int64_t n, unsigned *seed) {
  float *p = malloc((size_t)n * sizeof *p);
  if (!p) {
    fprintf(stderr, "bench_gemm_bf16: out of memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) p[i] = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
  return p;
}

/* AMX as the conv calls it (with op(A) in bf16 where it is the weights), AMX on f32 A, dot
 * products, sgemm. */
enum { PATH_AMX, PATH_AMX_F32, PATH_DOT, PATH_SGEMM, PATHS };

/* One product on one path; returns its seconds. A16 holds A's values (bf16 already). */
static double run_path(int path, const bench_shape *s, const float *A, const uint16_t *A16,
                       const float *B, float *C) {
  const int64_t lda = s->trans_a ? s->M : s->K, ldb = s->trans_b ? s->K : s->N;
  if (path != PATH_SGEMM) ganfw_cpu_amx_force(path == PATH_AMX || path == PATH_AMX_F32);
  const double t0 = now_s();
  if (path == PATH_AMX && s->weights) {
    ganfw_cpu_gemm_bf16_a16(s->trans_a, s->trans_b, s->M, s->N, s->K, A16, lda, B, ldb, s->beta, C,
                            s->N);
  } else if (path == PATH_SGEMM) {
    cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans,
                s->trans_b ? CblasTrans : CblasNoTrans, (int)s->M, (int)s->N, (int)s->K, 1.0f, A,
                (int)lda, B, (int)ldb, s->beta, C, (int)s->N);
  } else {
    ganfw_cpu_gemm_bf16(s->trans_a, s->trans_b, s->M, s->N, s->K, A, lda, B, ldb, s->beta, C, s->N);
  }
  return now_s() - t0;
}

/* A buffer of n random bf16 values, and the same as f32 in *f. */
static uint16_t *random_bf16(int64_t n, unsigned *seed, float **f) {
  uint16_t *h = malloc((size_t)n * sizeof *h);
  *f = random_buffer(n, seed);
  if (!h) {
    fprintf(stderr, "bench_gemm_bf16: out of memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) {
    h[i] = ganfw_f32_to_bf16_scalar((*f)[i]);
    (*f)[i] = ganfw_bf16_to_f32_scalar(h[i]);
  }
  return h;
}

static int path_runs(int path, int amx) {
  return amx || (path != PATH_AMX && path != PATH_AMX_F32);
}

int main(int argc, char **argv) {
  /* OpenBLAS's kernels for this CPU, as the CLI and bench_dcgan_step run it */
  ganfw_cpu_blas_restart(argv);
  const int runs = argc > 1 ? atoi(argv[1]) : 21;
  if (runs < 1) {
    fprintf(stderr, "usage: bench_gemm_bf16 [runs >= 1]\n");
    return 2;
  }
  if (!ganfw_cpu_have_bf16_dot()) {
    printf("no AVX-512 BF16 at SIMD level %s: nothing to compare\n",
           ganfw_cpu_isa_name(ganfw_cpu_isa_level()));
    return 0;
  }
  const int amx = ganfw_cpu_amx_force(1);
  printf("AMX %s (GANFW_CPU_AMX switched per call), SIMD level %s, one thread, %d runs; amx: as "
         "the conv calls it (w: weights read in bf16), amx f32: A read in f32\n",
         amx ? "on" : "not available", ganfw_cpu_isa_name(ganfw_cpu_isa_level()), runs);
  openblas_set_num_threads(1);
  double *t[PATHS];
  for (int p = 0; p < PATHS; p++) {
    t[p] = malloc((size_t)runs * sizeof *t[p]);
    if (!t[p]) return 1;
  }
  printf("%-5s %5s %5s %5s %4s %5s | %8s %8s %8s %8s | %7s %7s %7s %7s | %7s %7s\n", "trans", "M",
         "N", "K", "beta", "calls", "amx ms", "amx f32", "dot ms", "sgemm ms", "amx GF", "amxf32",
         "dot GF", "sgemm GF", "dot/amx", "sg/amx");
  double total[PATHS] = {0};
  unsigned seed = 1;
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    const bench_shape *s = &shapes[i];
    float *A, *B = random_buffer(s->K * s->N, &seed), *C = random_buffer(s->M * s->N, &seed);
    uint16_t *A16 = random_bf16(s->M * s->K, &seed, &A);
    double med[PATHS] = {0};
    for (int r = -1; r < runs; r++) { /* run -1 warms up */
      for (int p = 0; p < PATHS; p++) {
        if (!path_runs(p, amx)) continue;
        const double dt = run_path(p, s, A, A16, B, C);
        if (r >= 0) t[p][r] = dt;
      }
    }
    for (int p = 0; p < PATHS; p++) {
      if (!path_runs(p, amx)) continue;
      med[p] = median(t[p], runs);
      total[p] += s->calls * med[p];
    }
    const double gflop = 2e-9 * (double)(s->M * s->N * s->K);
    printf("(%d,%d) %5lld %5lld %5lld %4g %5d | ", s->trans_a, s->trans_b, (long long)s->M,
           (long long)s->N, (long long)s->K, s->beta, s->calls);
    if (amx) {
      printf("%7.4f%s %8.4f %8.4f %8.4f | %7.1f %7.1f %7.1f %7.1f | %7.2f %7.2f\n",
             1e3 * med[PATH_AMX], s->weights ? "w" : " ", 1e3 * med[PATH_AMX_F32],
             1e3 * med[PATH_DOT], 1e3 * med[PATH_SGEMM], gflop / med[PATH_AMX],
             gflop / med[PATH_AMX_F32], gflop / med[PATH_DOT], gflop / med[PATH_SGEMM],
             med[PATH_DOT] / med[PATH_AMX], med[PATH_SGEMM] / med[PATH_AMX]);
    } else {
      printf("%8s %8s %8.4f %8.4f | %7s %7s %7.1f %7.1f | %7s %7s\n", "-", "-", 1e3 * med[PATH_DOT],
             1e3 * med[PATH_SGEMM], "-", "-", gflop / med[PATH_DOT], gflop / med[PATH_SGEMM], "-",
             "-");
    }
    free(A);
    free(A16);
    free(B);
    free(C);
  }
  printf("per step, one thread: dot products %.1f ms, sgemm %.1f ms", 1e3 * total[PATH_DOT],
         1e3 * total[PATH_SGEMM]);
  if (amx) {
    printf(", amx %.1f ms (amx f32 %.1f ms; dot/amx %.2f, sgemm/amx %.2f)", 1e3 * total[PATH_AMX],
           1e3 * total[PATH_AMX_F32], total[PATH_DOT] / total[PATH_AMX],
           total[PATH_SGEMM] / total[PATH_AMX]);
  }
  printf("\n");
  ganfw_cpu_amx_force(1);
  for (int p = 0; p < PATHS; p++) free(t[p]);
  return 0;
}
