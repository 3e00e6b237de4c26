/* Times the AVX-512 BF16 GEMM (core/src/backend/cpu/gemm_bf16.c) against OpenBLAS cblas_sgemm,
 * both single-threaded on the same f32 inputs, on the GEMM shapes of DC-GAN's conv layers at
 * batch 64, each in all three transpose cases (0,0), (1,0), (0,1). The two alternate every run;
 * it prints the medians and sgemm / bf16 (above 1: bf16 is faster).
 *   bench_gemm_bf16 [runs]      (default 21) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"

/* OpenBLAS's own thread control (declared in its cblas.h, repeated for other providers). */
void openblas_set_num_threads(int num_threads);

typedef struct bench_shape {
  int64_t M, N, K;
} bench_shape;

static const bench_shape shapes[] = {
    {256, 256, 512}, {512, 256, 256},  {256, 512, 256},  {128, 1024, 1024}, {256, 2048, 1024},
    {64, 4096, 256}, {128, 256, 2048}, {64, 1024, 2048}, {17, 40, 33},
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

int main(int argc, char **argv) {
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
  openblas_set_num_threads(1);
  double *t_bf16 = malloc((size_t)runs * sizeof *t_bf16);
  double *t_sgemm = malloc((size_t)runs * sizeof *t_sgemm);
  if (!t_bf16 || !t_sgemm) return 1;
  printf("%-5s %5s %5s %5s %11s %11s %8s %9s\n", "trans", "M", "N", "K", "bf16 ms", "sgemm ms",
         "ratio", "bf16 GF/s");
  unsigned seed = 1;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    const int64_t M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
    float *A = random_buffer(M * K, &seed), *B = random_buffer(K * N, &seed);
    float *C = random_buffer(M * N, &seed);
    for (int tr = 0; tr < 3; tr++) {
      const int ta = tr == 1, tb = tr == 2;
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      for (int r = -1; r < runs; r++) { /* run -1 warms up */
        double t0 = now_s();
        ganfw_cpu_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, C, N);
        double t1 = now_s();
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, 0.0f, C, (int)N);
        double t2 = now_s();
        if (r >= 0) {
          t_bf16[r] = t1 - t0;
          t_sgemm[r] = t2 - t1;
        }
      }
      const double mb = median(t_bf16, runs), ms = median(t_sgemm, runs);
      printf("(%d,%d) %5lld %5lld %5lld %11.4f %11.4f %8.2f %9.1f\n", ta, tb, (long long)M,
             (long long)N, (long long)K, 1e3 * mb, 1e3 * ms, ms / mb,
             2e-9 * (double)(M * N * K) / mb);
    }
    free(A);
    free(B);
    free(C);
  }
  free(t_bf16);
  free(t_sgemm);
  return 0;
}
