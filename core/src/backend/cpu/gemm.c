/* Row-major single-precision GEMM for the CPU backend, C[M,N] = alpha op(A) op(B) + beta C,
 * over OpenBLAS, and the backend's thread count. One threading system: OpenBLAS runs
 * single-threaded and large products are split into column (or row) blocks over OpenMP.
 * The blocks depend on the shape alone, never on the thread count or on whether the caller
 * is already in a parallel region: OpenBLAS rounds an element of C differently depending on
 * where it sits in the block it was called for (its last tile of columns takes another
 * path), so a thread-count-dependent split would change the bits of every GEMM-based op
 * (conv, convT, linear) with the thread count. With fixed blocks the result is the same
 * for 1, 2, 3, ... threads, bit for bit (tests/test_ops_dense.c thread_count).
 * The _dt variants take the activations' dtype of the conv that calls them: bf16 runs on
 * bf16 dot products or AMX tiles (gemm_bf16.c) where the CPU has them, everything else on
 * sgemm. */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"

/* OpenBLAS's own thread control and core name (declared in its cblas.h, repeated for other
 * providers). */
void openblas_set_num_threads(int num_threads);
char *openblas_get_corename(void);

const char *ganfw_cpu_blas_core_hint(void) {
  static const char *const generic[] = {"prescott", "core2", "penryn", "dunnington",
                                        "nehalem",  "atom",  "unknown"};
  const char *core = openblas_get_corename();
  int is_generic = 0;
  for (size_t i = 0; core && i < sizeof generic / sizeof generic[0]; i++)
    is_generic |= strcasecmp(core, generic[i]) == 0;
  if (!is_generic) return NULL;
  const ganfw_cpu_isa level = ganfw_cpu_isa_supported();
  return level >= GANFW_CPU_ISA_AVX512 ? "SkylakeX"
         : level >= GANFW_CPU_ISA_AVX2 ? "Haswell"
                                       : NULL;
}

void ganfw_cpu_blas_restart(char **argv) {
  const char *core = getenv("OPENBLAS_CORETYPE") ? NULL : ganfw_cpu_blas_core_hint();
  if (!core || setenv("OPENBLAS_CORETYPE", core, 1) != 0) return;
  execv("/proc/self/exe", argv); /* returns only on failure: run on with the library's choice */
  unsetenv("OPENBLAS_CORETYPE");
}

/* Products below this many multiply-adds are one OpenBLAS call on the calling thread:
 * starting a team costs microseconds, and far more when the cores are shared. */
#define GEMM_PARALLEL_MIN_MACS (1 << 21)
/* Larger ones are cut into at most GEMM_MAX_BLOCKS blocks of at least GEMM_BLOCK_MIN_MACS
 * multiply-adds and GEMM_BLOCK_MIN_DIM rows/columns each (narrower blocks repack the shared
 * operand too often and run OpenBLAS's kernel below speed), multiples of GEMM_BLOCK_ALIGN
 * rows/columns (the SIMD kernels' register tile). 12 blocks share out evenly over 1, 2, 3,
 * 4 and 6 threads. Callers that split the work themselves (a conv's groups, Winograd's
 * parts) call ganfw_cpu_gemm_single instead: one OpenBLAS call per piece of their split. */
#define GEMM_MAX_BLOCKS     12
#define GEMM_BLOCK_MIN_MACS (1 << 22)
#define GEMM_BLOCK_MIN_DIM  32
#define GEMM_BLOCK_ALIGN    16

/* 0 until set: then omp_get_max_threads() is used. */
static atomic_int cpu_threads;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_single_thread(void) {
  openblas_set_num_threads(1);
}

int ganfw_cpu_threads(void) {
  pthread_once(&blas_once, blas_single_thread);
  int t = atomic_load(&cpu_threads);
  return t > 0 ? t : omp_get_max_threads();
}

/* Sets the OpenMP team size for every CPU kernel (threads <= 0: one per processor) and
 * keeps OpenBLAS single-threaded: the kernels call it from inside their OpenMP regions,
 * where a threaded OpenBLAS would oversubscribe the cores. */
void ganfw_cpu_set_threads(ganfw_backend *be, int threads) {
  (void)be;
  if (threads <= 0) threads = omp_get_num_procs();
  pthread_once(&blas_once, blas_single_thread);
  atomic_store(&cpu_threads, threads);
  omp_set_num_threads(threads);
}

/* bf16 products (gemm_bf16.c: AMX tiles or dot products) for the calls of a bf16 conv where
 * the CPU has them. */
static int use_bf16_dot(int32_t dt, float alpha) {
  return dt == GANFW_DTYPE_BF16 && alpha == 1.0f && ganfw_cpu_have_bf16_dot();
}

static void gemm_serial_dt(int32_t dt, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                           float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                           float beta, float *C, int64_t ldc) {
  if (use_bf16_dot(dt, alpha)) {
    ganfw_cpu_gemm_bf16(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda, B,
              (int)ldb, beta, C, (int)ldc);
}

/* C = beta * C for an empty inner dimension (some BLAS builds skip it); beta 0 writes zeros
 * without reading C. */
void ganfw_cpu_gemm_scale_only(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    float *c = C + i * ldc;
    if (beta == 0.0f) {
      memset(c, 0, (size_t)N * sizeof *c);
    } else {
      for (int64_t j = 0; j < N; j++) c[j] *= beta;
    }
  }
}

void ganfw_cpu_gemm_single_dt(int32_t dt, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                              float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                              float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    ganfw_cpu_gemm_scale_only(M, N, beta, C, ldc);
    return;
  }
  gemm_serial_dt(dt, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void ganfw_cpu_gemm_single(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                           float *C, int64_t ldc) {
  ganfw_cpu_gemm_single_dt(GANFW_DTYPE_F32, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta,
                           C, ldc);
}

void ganfw_cpu_gemm(ganfw_backend *be, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc) {
  ganfw_cpu_gemm_dt(be, GANFW_DTYPE_F32, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                    ldc);
}

void ganfw_cpu_gemm_dt(ganfw_backend *be, int32_t dt, int trans_a, int trans_b, int64_t M,
                       int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  (void)be;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    ganfw_cpu_gemm_scale_only(M, N, beta, C, ldc);
    return;
  }
  /* Split the larger of M and N into blocks that depend on the shape alone. */
  const int split_n = N >= M;
  const int64_t dim = split_n ? N : M, units = (dim + GEMM_BLOCK_ALIGN - 1) / GEMM_BLOCK_ALIGN;
  const int64_t macs = M * N * K;
  int64_t blocks = macs < GEMM_PARALLEL_MIN_MACS ? 1 : macs / GEMM_BLOCK_MIN_MACS;
  if (blocks > GEMM_MAX_BLOCKS) blocks = GEMM_MAX_BLOCKS;
  if (blocks > dim / GEMM_BLOCK_MIN_DIM) blocks = dim / GEMM_BLOCK_MIN_DIM;
  if (blocks <= 1) {
    gemm_serial_dt(dt, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const int threads = ganfw_cpu_threads();
  /* Inside a parallel region the blocks run on the calling thread. */
#pragma omp parallel for schedule(static)                                                          \
    num_threads(threads) if (threads > 1 && !omp_in_parallel())
  for (int64_t blk = 0; blk < blocks; blk++) {
    const int64_t i0 = units * blk / blocks * GEMM_BLOCK_ALIGN;
    int64_t i1 = units * (blk + 1) / blocks * GEMM_BLOCK_ALIGN;
    if (i1 > dim) i1 = dim;
    if (split_n) {
      /* Columns [i0, i1) of C come from columns [i0, i1) of op(B). */
      const float *Bb = trans_b ? B + i0 * ldb : B + i0;
      gemm_serial_dt(dt, trans_a, trans_b, M, i1 - i0, K, alpha, A, lda, Bb, ldb, beta, C + i0,
                     ldc);
    } else {
      /* Rows [i0, i1) of C come from rows [i0, i1) of op(A). */
      const float *Ab = trans_a ? A + i0 : A + i0 * lda;
      gemm_serial_dt(dt, trans_a, trans_b, i1 - i0, N, K, alpha, Ab, lda, B, ldb, beta,
                     C + i0 * ldc, ldc);
    }
  }
}

/* mode bit 0 transposes A, bit 1 B. */
ganfw_status ganfw_cpu_op_gemm(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  ganfw_cpu_gemm(be, op->mode & 1, (op->mode >> 1) & 1, d[0], d[1], d[2], (float)op->sc[0],
                 op->in[0], d[3], op->in[1], d[4], (float)op->sc[1], op->out[0], d[5]);
  return GANFW_OK;
}
