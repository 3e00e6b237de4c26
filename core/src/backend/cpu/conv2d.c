/* conv2d on the CPU: x [N,C,H,W] * w [K,C,R,S] (+ b [K]) -> y [N,K,P,Q], and its backward,
 * by im2col and GEMM (OpenBLAS through ganfw_cpu_gemm). Images go in chunks, and a chunk in
 * groups of at least CONV_GROUP_COLS GEMM columns that one thread takes from im2col to the
 * result while the group's columns are in its core's cache (col has CRS = C*R*S rows):
 *   forward        col_g = im2col(x_g) [CRS, n*PQ]; out_g = w[K, CRS] * col_g; scatter into y
 *   backward-data  col_g = w^T * dy_g;  col2im(col_g) into dx_g
 *   backward-filt  dw[K, CRS] (+)= dyc * col^T over a whole chunk: one GEMM with a long inner
 *                  dimension, split over the threads by ganfw_cpu_gemm
 * Workspace (ganfw_cpu_conv2d_workspace): one chunk's col [CRS, ld] and out/dyc [K, ld] with
 * ld ~ chunk*P*Q, plus a zero-padded input plane per image of the chunk. A chunk holds at
 * most CONV_CHUNK_BYTES (8 MiB) of columns and as much of outputs, or one image when that is
 * larger: about 16 MiB at most whatever the batch, and the same for any thread count. A
 * kernel that covers the whole unpadded input (P = Q = 1, DC-GAN's 4x4 -> 1x1) is a plain
 * GEMM over the batch without workspace. conv_transpose2d.c runs on these functions with
 * the roles swapped.
 * 4x4 kernels of stride 2 (DC-GAN's layers) go to conv_winograd.c instead, for the shapes
 * ganfw_cpu_conv2d_winograd_use picks: those where it is faster and its workspace (the
 * transformed weights, 2.25x the weights, and chunks of transformed tiles) fits within
 * im2col's, so that the workspace a conv reports, and every memory figure and plan built on
 * it, is the same for both paths. Stride-1 convs (ResNet's 3x3 layers) go to the direct
 * kernels of conv_direct.c, on the same terms: ganfw_cpu_conv2d_direct_use takes the shapes
 * with at most 128 channels each way whose workspace fits within im2col's.
 * GANFW_CONV_IM2COL=1 in the environment (read once) keeps every conv on im2col + GEMM, for
 * benchmarks and tests.
 * The same kernels take f16 and bf16 activations (an op's dtype, for amp; the ops are at the
 * end of this file): the conversions happen where the kernels copy (into pad_plane and
 * gather_dy, out of scatter_out and col2im, around the Winograd transforms). The GEMMs
 * are f32, where the result has the bits of converting whole tensors around the f32 ops
 * (tests/test_cpu_lp_conv.c), except a bf16 conv's on a CPU with bf16 dot products or AMX
 * tiles (gemm.c's _dt variants, and conv_direct.c's own dot-product tiles). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define CONV_AVX512 1
#endif

#include "backend/cpu/cast.h"
#include "backend/cpu/conv_direct.h"
#include "backend/cpu/conv_internal.h"
#include "backend/cpu/conv_winograd.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/isa.h"
#include "base/log.h"

/* Chunk buffers are sized to hold at most this many bytes each (col and the GEMM
 * output), or one image when a single image is larger. */
#define CONV_CHUNK_BYTES ((size_t)8 << 20)
/* A group (the images one thread takes through im2col, GEMM and scatter in a row) spans at
 * least this many GEMM columns, so that the single-threaded GEMM runs at full speed. */
#define CONV_GROUP_COLS 128
/* Loops over fewer elements than this stay on one thread, and so do chunks of fewer
 * multiply-adds than CONV_PARALLEL_MIN_MACS: starting a team costs microseconds, and far more
 * when the cores are shared. */
#define CONV_PARALLEL_MIN      65536
#define CONV_PARALLEL_MIN_MACS (1 << 21)

/* The kernel covers the whole unpadded input: col of an image is the image itself. */
static int conv_is_dense(const ganfw_conv2d_shape *s) {
  return s->P == 1 && s->Q == 1 && s->pad_h == 0 && s->pad_w == 0 && s->R == s->H && s->S == s->W;
}

/* Images per chunk. */
static int64_t conv_chunk(const ganfw_conv2d_shape *s) {
  size_t PQ = (size_t)(s->P * s->Q);
  size_t col_img = (size_t)(s->C * s->R * s->S) * PQ * sizeof(float);
  size_t out_img = (size_t)s->K * PQ * sizeof(float);
  size_t per_img = col_img > out_img ? col_img : out_img;
  int64_t nb = (int64_t)(CONV_CHUNK_BYTES / per_img);
  if (nb < 1) nb = 1;
  if (nb > s->N) nb = s->N;
  return nb;
}

/* Images per group within a chunk of nb: enough GEMM columns, yet at least CONV_GROUPS_MIN
 * groups when the chunk allows, so that that many threads find work. It depends on the
 * shape alone: a group is one GEMM, whose rounding depends on its width (gemm.c), so a
 * thread-count-dependent group would make y and dx depend on the thread count. */
#define CONV_GROUPS_MIN 8
static int64_t conv_group(const ganfw_conv2d_shape *s, int64_t nb) {
  const int64_t PQ = s->P * s->Q;
  int64_t g = (CONV_GROUP_COLS + PQ - 1) / PQ;
  const int64_t most = nb / CONV_GROUPS_MIN;
  if (g > most) g = most;
  return g < 1 ? 1 : g;
}

/* Floats of the scratch plane each image of a chunk owns: the input plane padded with zeros
 * (im2col reads it; col2im accumulates into it), plus slack so that the vector code may
 * read and write whole 16-float vectors past a row's end. */
#define CONV_PLANE_SLACK 32
static int64_t conv_plane(const ganfw_conv2d_shape *s) {
  const int64_t floats = (s->H + 2 * s->pad_h) * (s->W + 2 * s->pad_w) + CONV_PLANE_SLACK;
  return (floats + 15) / 16 * 16;
}

/* Plane x (H x W, dtype dt) with pad_h rows and pad_w columns of zeros around it, in f32 in
 * pad: a 16-bit input is converted here, row by row, on its way into im2col. */
static void pad_plane(const ganfw_conv2d_shape *s, int32_t dt, const void *x, float *pad) {
  const int64_t H = s->H, W = s->W, ph = s->pad_h, pw = s->pad_w, Wp = W + 2 * pw;
  memset(pad, 0, (size_t)(ph * Wp) * sizeof *pad);
  float *row = pad + ph * Wp;
  for (int64_t h = 0; h < H; h++, row += Wp) {
    for (int64_t j = 0; j < pw; j++) row[j] = 0.0f;
    ganfw_cpu_row_to_f32(dt, W, ganfw_cpu_elem(dt, x, h * W), row + pw);
    for (int64_t j = pw + W; j < Wp; j++) row[j] = 0.0f;
  }
  memset(row, 0, (size_t)(ph * Wp + CONV_PLANE_SLACK) * sizeof *pad);
}

/* The strided block copies behind im2col and col2im, for one (c, r, s) row of one image,
 * between the compact block d/src [P, Q] and the padded plane (rows `step` apart):
 *   gather   d[p*Q + q]  = plane[p*step + q*sw]
 *   scatter  plane[p*step + q*sw] += src[p*Q + q]
 * Rows are short (Q = 4..16 in DC-GAN), too short for the compiler's vector loops, so
 * strides 1 and 2 have AVX-512 versions; the plane's slack lets them read (gather) and
 * read-add-write (scatter) whole vectors past a row's end. Other strides are scalar. */
static void block_gather_scalar(float *restrict d, const float *restrict plane, int64_t P,
                                int64_t Q, int64_t step, int64_t sw) {
  for (int64_t p = 0; p < P; p++, d += Q, plane += step)
    for (int64_t q = 0; q < Q; q++) d[q] = plane[q * sw];
}

static void block_scatter_scalar(float *restrict plane, const float *restrict src, int64_t P,
                                 int64_t Q, int64_t step, int64_t sw) {
  for (int64_t p = 0; p < P; p++, src += Q, plane += step)
    for (int64_t q = 0; q < Q; q++) plane[q * sw] += src[q];
}

#ifdef CONV_AVX512
/* Lanes [0, n) of a 16-lane mask. */
static inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* Stores lanes [0, n) of v with plain stores of 16, 8, 4, 2 and 1 floats: masked stores are
 * many times slower on some CPUs (AMD Zen 4). */
__attribute__((target("avx512f"))) static inline void store_n(float *d, __m512 v, int64_t n) {
  if (n >= 16) {
    _mm512_storeu_ps(d, v);
    return;
  }
  __m256 y = _mm512_castps512_ps256(v);
  if (n >= 8) {
    _mm256_storeu_ps(d, y);
    y = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    d += 8, n -= 8;
  }
  __m128 x = _mm256_castps256_ps128(y);
  if (n >= 4) {
    _mm_storeu_ps(d, x);
    x = _mm256_extractf128_ps(y, 1);
    d += 4, n -= 4;
  }
  if (n >= 2) {
    _mm_storel_pi((__m64 *)d, x);
    x = _mm_movehl_ps(x, x);
    d += 2, n -= 2;
  }
  if (n >= 1) _mm_store_ss(d, x);
}

__attribute__((target("avx512f"))) static void
block_gather_avx512(float *d, const float *plane, int64_t P, int64_t Q, int64_t step, int64_t sw) {
  if (sw == 1) {
    for (int64_t p = 0; p < P; p++, d += Q, plane += step)
      for (int64_t q = 0; q < Q; q += 16) store_n(d + q, _mm512_loadu_ps(plane + q), Q - q);
    return;
  }
  /* Stride 2: the even lanes of two consecutive vectors, picked by one permute. */
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  int64_t p = 0;
  if (Q == 4) {
    /* Four rows of 4 make one vector (DC-GAN's 8x8 -> 4x4): pairs of rows, then halves. */
    const __m512i pair = _mm512_setr_epi32(0, 2, 4, 6, 16, 18, 20, 22, 0, 2, 4, 6, 16, 18, 20, 22);
    for (; p + 3 < P; p += 4, d += 16, plane += 4 * step) {
      __m512 v01 =
          _mm512_permutex2var_ps(_mm512_loadu_ps(plane), pair, _mm512_loadu_ps(plane + step));
      __m512 v23 = _mm512_permutex2var_ps(_mm512_loadu_ps(plane + 2 * step), pair,
                                          _mm512_loadu_ps(plane + 3 * step));
      _mm512_storeu_ps(d, _mm512_shuffle_f32x4(v01, v23, _MM_SHUFFLE(1, 0, 1, 0)));
    }
  }
  if (Q == 8) {
    /* Two rows of 8 make one vector (DC-GAN's 16x16 -> 8x8). */
    for (; p + 1 < P; p += 2, d += 16, plane += 2 * step) {
      __m512 v =
          _mm512_permutex2var_ps(_mm512_loadu_ps(plane), even, _mm512_loadu_ps(plane + step));
      _mm512_storeu_ps(d, v);
    }
  }
  for (; p < P; p++, d += Q, plane += step) {
    for (int64_t q = 0; q < Q; q += 16) {
      __m512 v = _mm512_permutex2var_ps(_mm512_loadu_ps(plane + 2 * q), even,
                                        _mm512_loadu_ps(plane + 2 * q + 16));
      store_n(d + q, v, Q - q);
    }
  }
}

__attribute__((target("avx512f"))) static void block_scatter_avx512(float *plane, const float *src,
                                                                    int64_t P, int64_t Q,
                                                                    int64_t step, int64_t sw) {
  if (sw == 1) {
    for (int64_t p = 0; p < P; p++, src += Q, plane += step) {
      for (int64_t q = 0; q < Q; q += 16) {
        __m512 v = _mm512_maskz_loadu_ps(lanes(Q - q), src + q);
        _mm512_storeu_ps(plane + q, _mm512_add_ps(_mm512_loadu_ps(plane + q), v));
      }
    }
    return;
  }
  /* Stride 2: spread 16 source floats over the even lanes of two vectors (odd lanes 0). */
  const __m512i spread_lo =
      _mm512_setr_epi32(0, 16, 1, 16, 2, 16, 3, 16, 4, 16, 5, 16, 6, 16, 7, 16);
  const __m512i spread_hi =
      _mm512_setr_epi32(8, 16, 9, 16, 10, 16, 11, 16, 12, 16, 13, 16, 14, 16, 15, 16);
  const __m512 zero = _mm512_setzero_ps();
  int64_t p = 0;
  if (Q == 4) {
    /* Four rows of 4 come from one vector. */
    const __m512i row[4] = {
        _mm512_setr_epi32(0, 16, 1, 16, 2, 16, 3, 16, 16, 16, 16, 16, 16, 16, 16, 16),
        _mm512_setr_epi32(4, 16, 5, 16, 6, 16, 7, 16, 16, 16, 16, 16, 16, 16, 16, 16),
        _mm512_setr_epi32(8, 16, 9, 16, 10, 16, 11, 16, 16, 16, 16, 16, 16, 16, 16, 16),
        _mm512_setr_epi32(12, 16, 13, 16, 14, 16, 15, 16, 16, 16, 16, 16, 16, 16, 16, 16)};
    for (; p + 3 < P; p += 4, src += 16, plane += 4 * step) {
      __m512 v = _mm512_loadu_ps(src);
      for (int j = 0; j < 4; j++) {
        float *t = plane + j * step;
        _mm512_storeu_ps(
            t, _mm512_add_ps(_mm512_loadu_ps(t), _mm512_permutex2var_ps(v, row[j], zero)));
      }
    }
  }
  if (Q == 8) {
    /* Two rows of 8 come from one vector. */
    for (; p + 1 < P; p += 2, src += 16, plane += 2 * step) {
      __m512 v = _mm512_loadu_ps(src);
      _mm512_storeu_ps(
          plane, _mm512_add_ps(_mm512_loadu_ps(plane), _mm512_permutex2var_ps(v, spread_lo, zero)));
      float *t = plane + step;
      _mm512_storeu_ps(
          t, _mm512_add_ps(_mm512_loadu_ps(t), _mm512_permutex2var_ps(v, spread_hi, zero)));
    }
  }
  for (; p < P; p++, src += Q, plane += step) {
    for (int64_t q = 0; q < Q; q += 16) {
      __m512 v = _mm512_maskz_loadu_ps(lanes(Q - q), src + q);
      float *t = plane + 2 * q;
      _mm512_storeu_ps(
          t, _mm512_add_ps(_mm512_loadu_ps(t), _mm512_permutex2var_ps(v, spread_lo, zero)));
      _mm512_storeu_ps(t + 16, _mm512_add_ps(_mm512_loadu_ps(t + 16),
                                             _mm512_permutex2var_ps(v, spread_hi, zero)));
    }
  }
}
#endif

typedef void (*block_fn)(float *d, const float *src, int64_t P, int64_t Q, int64_t step,
                         int64_t sw);

/* The fastest block copy for stride sw at the SIMD level in use (isa.h): both give the
 * same bits (copies and single adds). */
static block_fn pick_gather(int64_t sw) {
#ifdef CONV_AVX512
  if ((sw == 1 || sw == 2) && ganfw_cpu_isa_level() >= GANFW_CPU_ISA_AVX512)
    return block_gather_avx512;
#endif
  (void)sw;
  return block_gather_scalar;
}

static block_fn pick_scatter(int64_t sw) {
#ifdef CONV_AVX512
  if ((sw == 1 || sw == 2) && ganfw_cpu_isa_level() >= GANFW_CPU_ISA_AVX512)
    return block_scatter_avx512;
#endif
  (void)sw;
  return block_scatter_scalar;
}

/* im2col of one image: col[(c*R + r)*S + s][p*Q + q] = xpad[c][p*sh + r][q*sw + s], xpad
 * being the image x [C,H,W] (dtype dt) padded with zeros, plane by plane in `scratch`. col
 * rows are ld floats apart. */
static void im2col(const ganfw_conv2d_shape *s, int32_t dt, const void *x, float *col, int64_t ld,
                   float *scratch) {
  const int64_t C = s->C, H = s->H, W = s->W, R = s->R, S = s->S;
  const int64_t Wp = W + 2 * s->pad_w, step = s->stride_h * Wp;
  const block_fn gather = pick_gather(s->stride_w);
  for (int64_t c = 0; c < C; c++) {
    pad_plane(s, dt, ganfw_cpu_elem(dt, x, c * H * W), scratch);
    for (int64_t r = 0; r < R; r++) {
      for (int64_t k = 0; k < S; k++) {
        gather(col + ((c * R + r) * S + k) * ld, scratch + r * Wp + k, s->P, s->Q, step,
               s->stride_w);
      }
    }
  }
}

/* The adjoint of im2col for one image: dx [C,H,W] (dtype dt) = the sum of the col entries
 * that im2col took from there (+ bias[c] when bias is not NULL), accumulated in the padded
 * plane `scratch` and then cropped, and rounded there once for a 16-bit dx. */
static void col2im(const ganfw_conv2d_shape *s, const float *col, int64_t ld, float *scratch,
                   const float *bias, int32_t dt, void *dx) {
  const int64_t C = s->C, H = s->H, W = s->W, R = s->R, S = s->S;
  const int64_t ph = s->pad_h, pw = s->pad_w, Wp = W + 2 * pw;
  const int64_t step = s->stride_h * Wp;
  const block_fn scatter = pick_scatter(s->stride_w);
  for (int64_t c = 0; c < C; c++) {
    memset(scratch, 0, (size_t)conv_plane(s) * sizeof *scratch);
    for (int64_t r = 0; r < R; r++) {
      for (int64_t k = 0; k < S; k++) {
        scatter(scratch + r * Wp + k, col + ((c * R + r) * S + k) * ld, s->P, s->Q, step,
                s->stride_w);
      }
    }
    void *plane = ganfw_cpu_elem_mut(dt, dx, c * H * W);
    for (int64_t h = 0; h < H; h++) {
      float *src = scratch + (h + ph) * Wp + pw;
      if (bias)
        for (int64_t j = 0; j < W; j++) src[j] += bias[c];
      ganfw_cpu_row_from_f32(dt, W, src, ganfw_cpu_elem_mut(dt, plane, h * W));
    }
  }
}

/* Rows of nb images' columns in the chunk-wide layout: nb*PQ rounded up to an odd number
 * of 64-byte lines, so that walking down a column does not hit the same cache sets. */
static int64_t conv_ld(int64_t nb, int64_t PQ) {
  int64_t lines = (nb * PQ + 15) / 16;
  if (lines % 2 == 0) lines++;
  return lines * 16;
}

static pthread_once_t im2col_once = PTHREAD_ONCE_INIT;
static int im2col_forced;

static void read_im2col_env(void) {
  const char *v = getenv("GANFW_CONV_IM2COL");
  im2col_forced = v && *v && strcmp(v, "0") != 0;
}

/* --- measured choice (device.cudnn_benchmark on the CPU) ----------------------------------
 * By default each pass takes its path by the shape rules the kernels' files give (measured
 * once, offline: bench_conv and bench_dcgan_step --profile), the same bits on every run.
 * With the benchmark on, the first call of each (shape, pass) instead times every path that
 * computes it within im2col's workspace (im2col + GEMM, Winograd, direct), keeps the
 * fastest for the rest of the process and logs the times; the result then depends on what
 * the timing found. */
enum { CONV_IM2COL, CONV_WINOGRAD, CONV_DIRECT, CONV_ALGOS };
static const char *const conv_algo_name[CONV_ALGOS] = {"im2col+gemm", "winograd", "direct"};

#define CONV_BENCH_MAX 256
typedef struct conv_bench_entry {
  ganfw_conv2d_shape s;
  int32_t pass, algo;
} conv_bench_entry;
static int conv_bench_on;
static pthread_mutex_t conv_bench_mu = PTHREAD_MUTEX_INITIALIZER;
static conv_bench_entry conv_bench[CONV_BENCH_MAX];
static int conv_bench_n;
/* While a measurement runs, the path it forces on this thread (-1: none). */
static _Thread_local int conv_forced = -1;

void ganfw_cpu_set_conv_benchmark(int32_t on) {
  conv_bench_on = on != 0;
}

static int same_shape(const ganfw_conv2d_shape *a, const ganfw_conv2d_shape *b) {
  return a->N == b->N && a->C == b->C && a->H == b->H && a->W == b->W && a->K == b->K &&
         a->R == b->R && a->S == b->S && a->stride_h == b->stride_h && a->stride_w == b->stride_w &&
         a->pad_h == b->pad_h && a->pad_w == b->pad_w;
}

/* The measured path of (s, pass), or -1. */
static int conv_bench_find(const ganfw_conv2d_shape *s, ganfw_conv_pass pass) {
  int algo = -1;
  pthread_mutex_lock(&conv_bench_mu);
  for (int i = 0; i < conv_bench_n && algo < 0; i++)
    if (conv_bench[i].pass == (int32_t)pass && same_shape(&conv_bench[i].s, s))
      algo = conv_bench[i].algo;
  pthread_mutex_unlock(&conv_bench_mu);
  return algo;
}

/* 1 when path `algo` computes `pass` of s within im2col's workspace. */
static int conv_can(const ganfw_conv2d_shape *s, ganfw_conv_pass pass, int algo) {
  const size_t room = ganfw_cpu_conv2d_im2col_workspace(s);
  switch (algo) {
  case CONV_WINOGRAD:
    return ganfw_cpu_conv2d_winograd_fits(s) && ganfw_cpu_conv2d_winograd_workspace(s) <= room;
  case CONV_DIRECT:
    return ganfw_cpu_conv2d_direct_fits(s) && (s->stride_h == 1 || pass != GANFW_CONV_PASS_DATA);
  default:
    return 1;
  }
}

/* The path `pass` of this shape takes with activations in dt: forced (a measurement),
 * measured (f32 only: a 16-bit call's workspace layout follows the rules), or by the
 * rules. */
static int conv_path(const ganfw_conv2d_shape *s, ganfw_conv_pass pass, int32_t dt) {
  pthread_once(&im2col_once, read_im2col_env);
  if (im2col_forced || conv_is_dense(s)) return CONV_IM2COL;
  if (conv_forced >= 0) return conv_forced;
  const int measured = conv_bench_on && dt == GANFW_DTYPE_F32 ? conv_bench_find(s, pass) : -1;
  if (measured >= 0) return measured;
  if (ganfw_cpu_conv2d_winograd_use(s, pass)) return CONV_WINOGRAD;
  if (ganfw_cpu_conv2d_direct_use(s, pass)) return CONV_DIRECT;
  return CONV_IM2COL;
}

/* 1 when `pass` of this shape runs on the Winograd kernels. */
static int conv_winograd(const ganfw_conv2d_shape *s, ganfw_conv_pass pass, int32_t dt) {
  return conv_path(s, pass, dt) == CONV_WINOGRAD;
}

/* 1 when `pass` of this shape runs on the direct kernels (conv_direct.c). */
static int conv_direct(const ganfw_conv2d_shape *s, ganfw_conv_pass pass, int32_t dt) {
  return conv_path(s, pass, dt) == CONV_DIRECT;
}

/* 1 when (s, pass) is still to be measured: the benchmark is on, the call is f32, no
 * measurement runs, the shape has a choice and no time yet. */
static int conv_bench_due(const ganfw_conv2d_shape *s, ganfw_conv_pass pass, int32_t dt) {
  pthread_once(&im2col_once, read_im2col_env);
  if (!conv_bench_on || dt != GANFW_DTYPE_F32 || conv_forced >= 0 || im2col_forced ||
      conv_is_dense(s))
    return 0;
  int choices = 0;
  for (int a = 0; a < CONV_ALGOS; a++) choices += conv_can(s, pass, a);
  return choices > 1 && conv_bench_find(s, pass) < 0;
}

static double conv_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef void (*conv_pass_fn)(void *call, ganfw_conv_pass pass);

/* Times run(call, pass) on every path that can take it (the best of 2 after a warm-up),
 * keeps the fastest and logs them all. */
static void conv_bench_measure(const ganfw_conv2d_shape *s, ganfw_conv_pass pass, conv_pass_fn run,
                               void *call) {
  static const char *const pass_name[] = {"forward", "input gradient", "weight gradient"};
  double best[CONV_ALGOS];
  int pick = CONV_IM2COL;
  for (int a = 0; a < CONV_ALGOS; a++) {
    best[a] = -1;
    if (!conv_can(s, pass, a)) continue;
    conv_forced = a;
    run(call, pass);
    for (int r = 0; r < 2; r++) {
      const double t0 = conv_now();
      run(call, pass);
      const double t = conv_now() - t0;
      if (best[a] < 0 || t < best[a]) best[a] = t;
    }
    if (best[a] < best[pick]) pick = a;
  }
  conv_forced = -1;
  char times[160] = "";
  size_t len = 0;
  for (int a = 0; a < CONV_ALGOS && len < sizeof times; a++)
    if (best[a] >= 0)
      len += (size_t)snprintf(times + len, sizeof times - len, "%s%s %.2f ms", len ? ", " : "",
                              conv_algo_name[a], best[a] * 1e3);
  ganfw_log(GANFW_LOG_INFO,
            "conv benchmark (device.cudnn_benchmark): %lld->%lld %lldx%lld, %lldx%lld kernel, "
            "stride %lld, batch %lld, %s: %s: %s",
            (long long)s->C, (long long)s->K, (long long)s->H, (long long)s->W, (long long)s->R,
            (long long)s->S, (long long)s->stride_h, (long long)s->N, pass_name[pass], times,
            conv_algo_name[pick]);
  pthread_mutex_lock(&conv_bench_mu);
  if (conv_bench_n < CONV_BENCH_MAX)
    conv_bench[conv_bench_n++] = (conv_bench_entry){*s, (int32_t)pass, pick};
  pthread_mutex_unlock(&conv_bench_mu);
}

/* The GEMM-based paths name what a bf16 GEMM multiplies on (gemm_bf16.h): "(bf16 AMX tiles)"
 * or "(bf16 dot products)"; the direct kernels have dot-product tiles of their own. */
const char *ganfw_cpu_conv2d_algorithm(const ganfw_conv2d_shape *s, int32_t dt, int32_t pass) {
  const ganfw_conv_pass p = (ganfw_conv_pass)pass;
  const int bf16_dot = dt == GANFW_DTYPE_BF16 && ganfw_cpu_have_bf16_dot();
  const int amx = bf16_dot && ganfw_cpu_gemm_bf16_amx();
  if (conv_is_dense(s))
    return !bf16_dot ? "gemm (dense)"
           : amx     ? "gemm (dense, bf16 AMX tiles)"
                     : "gemm (dense, bf16 dot products)";
  if (conv_winograd(s, p, dt))
    return !bf16_dot ? "winograd F(2x2,2x2) polyphase"
           : amx     ? "winograd F(2x2,2x2) polyphase (bf16 AMX tiles)"
                     : "winograd F(2x2,2x2) polyphase (bf16 dot products)";
  if (conv_direct(s, p, dt))
    return ganfw_cpu_conv2d_direct_bf16(s, dt) ? "direct (bf16 dot products)" : "direct";
  return !bf16_dot ? "im2col+gemm"
         : amx     ? "im2col+gemm (bf16 AMX tiles)"
                   : "im2col+gemm (bf16 dot products)";
}

size_t ganfw_cpu_conv2d_im2col_workspace(const ganfw_conv2d_shape *s) {
  if (conv_is_dense(s)) return 0;
  const int64_t chunk = conv_chunk(s), ld = conv_ld(chunk, s->P * s->Q);
  const int64_t floats = (s->C * s->R * s->S + s->K) * ld + chunk * conv_plane(s);
  return (size_t)floats * sizeof(float);
}

/* y[i][k][:] = out[k][i*PQ ...] (+ b[k]) for the n images of a group, y in dtype dt (the
 * bias is added to out in place, then each row rounded once); out rows hold ld. */
static void scatter_out(int64_t n, int64_t K, int64_t PQ, int64_t ld, float *out, const float *b,
                        int32_t dt, void *y) {
  for (int64_t i = 0; i < n; i++) {
    for (int64_t k = 0; k < K; k++) {
      float *src = out + k * ld + i * PQ;
      if (b) {
        const float bk = b[k];
        for (int64_t j = 0; j < PQ; j++) src[j] += bk;
      }
      ganfw_cpu_row_from_f32(dt, PQ, src, ganfw_cpu_elem_mut(dt, y, (i * K + k) * PQ));
    }
  }
}

/* y[k][:] += b[k] for one image's output [K, PQ]. */
static void add_bias(int64_t K, int64_t PQ, const float *b, float *y) {
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < PQ; j++) y[k * PQ + j] += b[k];
}

/* dyc[k][i*PQ ...] = dy[i][k][:] for n images of dy (dtype dt), in f32; dyc rows hold ld
 * floats. */
static void gather_dy(int64_t n, int64_t K, int64_t PQ, int64_t ld, int32_t dt, const void *dy,
                      float *dyc) {
  for (int64_t k = 0; k < K; k++) {
    for (int64_t i = 0; i < n; i++)
      ganfw_cpu_row_to_f32(dt, PQ, ganfw_cpu_elem(dt, dy, (i * K + k) * PQ), dyc + k * ld + i * PQ);
  }
}

/* Values a 16-bit row is converted in at a time, on the stack. */
#define CONV_ROW_PIECE 256

/* db[k] (+)= sum of dy[n][k][:] over n, dy [N,K,PQ] in dtype dt: each row summed in order in
 * f32, the rows in double (conv_transpose2d.c uses it too). */
void ganfw_cpu_conv_bias_grad(int64_t N, int64_t K, int64_t PQ, int32_t dt, const void *dy,
                              float *db, int accumulate) {
#pragma omp parallel for schedule(static)                                                          \
    num_threads(ganfw_cpu_threads()) if (N * K * PQ >= CONV_PARALLEL_MIN)
  for (int64_t k = 0; k < K; k++) {
    double acc = 0.0;
    float piece[CONV_ROW_PIECE];
    for (int64_t n = 0; n < N; n++) {
      float part = 0.0f;
      if (dt == GANFW_DTYPE_F32) {
        const float *row = (const float *)dy + (n * K + k) * PQ;
        for (int64_t j = 0; j < PQ; j++) part += row[j];
      } else {
        for (int64_t j0 = 0; j0 < PQ; j0 += CONV_ROW_PIECE) {
          const int64_t len = PQ - j0 < CONV_ROW_PIECE ? PQ - j0 : CONV_ROW_PIECE;
          ganfw_cpu_row_to_f32(dt, len, ganfw_cpu_elem(dt, dy, (n * K + k) * PQ + j0), piece);
          for (int64_t j = 0; j < len; j++) part += piece[j];
        }
      }
      acc += part;
    }
    db[k] = accumulate ? db[k] + (float)acc : (float)acc;
  }
}

/* The workspace of a chunk: col [CRS, ld] and out/dyc [K, ld] in the chunk-wide layout, or
 * group by group in the compact layout (a group of n images starting at image i0 owns
 * col + i0*CRS*PQ as [CRS, n*PQ] and out + i0*K*PQ as [K, n*PQ]), then one padded plane
 * per image. */
typedef struct conv_ws {
  float *col, *out, *scratch;
  int64_t plane;
} conv_ws;

static conv_ws conv_ws_split(const ganfw_conv2d_shape *s, void *ws) {
  const int64_t PQ = s->P * s->Q, ld = conv_ld(conv_chunk(s), PQ);
  conv_ws w = {.col = ws, .plane = conv_plane(s)};
  w.out = w.col + s->C * s->R * s->S * ld;
  w.scratch = w.out + s->K * ld;
  return w;
}

static float *conv_scratch(const conv_ws *w, int64_t i) {
  return w->scratch + i * w->plane;
}

/* C = op(A) op(B) for one group: a group is one OpenBLAS call when the chunk has several
 * (the groups are the split), else the one GEMM is split in blocks (gemm.c). Either way the
 * split depends on the shape alone. A16 is A (the weights) in bf16 when the call is bf16
 * (lw->w16, else NULL): on AMX tiles a group's GEMM reads it instead of A, half the bytes for
 * the same bits (every group packs the whole weight matrix again, which is what the tiles
 * wait for). */
static void conv_gemm(ganfw_backend *be, int32_t dt, int64_t groups, int ta, int tb, int64_t M,
                      int64_t N, int64_t K, const float *A, const uint16_t *A16, int64_t lda,
                      const float *B, int64_t ldb, float *C, int64_t ldc) {
  if (groups > 1 && A16 && dt == GANFW_DTYPE_BF16 && ganfw_cpu_gemm_bf16_amx())
    ganfw_cpu_gemm_bf16_a16(ta, tb, M, N, K, A16, lda, B, ldb, 0.0f, C, ldc);
  else if (groups > 1)
    ganfw_cpu_gemm_single_dt(dt, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
  else
    ganfw_cpu_gemm_dt(be, dt, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

/* One conv2d pass's arguments, for conv_bench_measure: forward (y), backward-data (dx) or
 * backward-filter (dw, overwritten). */
typedef struct conv_call {
  ganfw_backend *be;
  const ganfw_conv2d_shape *s;
  int32_t dt;
  const void *x;
  const float *w, *b;
  const void *dy;
  void *y, *dx;
  float *dw, *db;
  int accumulate;
  const float *bdx;
  const conv_lp_ws *lw;
  void *ws;
} conv_call;

static void conv_call_run(void *p, ganfw_conv_pass pass) {
  const conv_call *c = p;
  if (pass == GANFW_CONV_PASS_FORWARD)
    ganfw_cpu_conv2d_forward_dt(c->be, c->s, c->dt, c->x, c->w, c->b, c->y, c->lw, c->ws);
  else
    ganfw_cpu_conv2d_backward_dt(c->be, c->s, c->dt, c->x, c->w, c->dy, c->dx, c->dw, NULL, 0,
                                 c->bdx, c->lw, c->ws);
}

void ganfw_cpu_conv2d_forward_dt(ganfw_backend *be, const ganfw_conv2d_shape *s, int32_t dt,
                                 const void *x, const float *w, const float *b, void *y,
                                 const conv_lp_ws *lw, void *ws) {
  const int64_t N = s->N, K = s->K, CRS = s->C * s->R * s->S, PQ = s->P * s->Q;
  const int64_t CHW = s->C * s->H * s->W;
  if (conv_bench_due(s, GANFW_CONV_PASS_FORWARD, dt)) {
    conv_call c = {be, s, dt, x, w, b, NULL, y, NULL, NULL, NULL, 0, NULL, lw, ws};
    conv_bench_measure(s, GANFW_CONV_PASS_FORWARD, conv_call_run, &c);
  }
  if (conv_winograd(s, GANFW_CONV_PASS_FORWARD, dt)) {
    ganfw_cpu_conv2d_winograd_forward(s, dt, x, w, b, y, lw ? lw->stage : NULL, ws);
    return;
  }
  if (conv_direct(s, GANFW_CONV_PASS_FORWARD, dt)) {
    ganfw_cpu_conv2d_direct_forward(s, dt, x, w, b, y, ws);
    return;
  }
  if (conv_is_dense(s)) {
    /* y[N, K] = x[N, CRS] * w[K, CRS]^T (+ b): start from the bias, then add. A 16-bit x and
     * y go through f32 copies (dense convs are small: DC-GAN's 4x4 -> 1x1). */
    const float *xf = dt == GANFW_DTYPE_F32 ? x : lw->dense_in;
    float *yf = dt == GANFW_DTYPE_F32 ? y : lw->dense_out;
    if (dt != GANFW_DTYPE_F32) ganfw_cpu_row_to_f32(dt, N * CRS, x, lw->dense_in);
    if (b) {
      for (int64_t n = 0; n < N; n++) memcpy(yf + n * K, b, (size_t)K * sizeof *yf);
    }
    ganfw_cpu_gemm_dt(be, dt, 0, 1, N, K, CRS, 1.0f, xf, CRS, w, CRS, b ? 1.0f : 0.0f, yf, K);
    if (dt != GANFW_DTYPE_F32) ganfw_cpu_row_from_f32(dt, N * K, yf, y);
    return;
  }
  const int64_t chunk = conv_chunk(s);
  const conv_ws cw = conv_ws_split(s, ws);
  const uint16_t *w16 = lw ? lw->w16 : NULL; /* w in bf16, for conv_gemm */
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t nb = N - n0 < chunk ? N - n0 : chunk;
    const int64_t g = conv_group(s, nb), groups = (nb + g - 1) / g;
    const int parallel = groups > 1 && K * CRS * nb * PQ >= CONV_PARALLEL_MIN_MACS;
    /* Each group, in the compact layout: im2col, GEMM and scatter on one thread, while its
     * columns are in that core's cache. */
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (parallel)
    for (int64_t gi = 0; gi < groups; gi++) {
      const int64_t i0 = gi * g, n = i0 + g < nb ? g : nb - i0, cols = n * PQ;
      float *col = cw.col + i0 * CRS * PQ, *out = cw.out + i0 * K * PQ;
      void *yg = ganfw_cpu_elem_mut(dt, y, (n0 + i0) * K * PQ);
      for (int64_t i = 0; i < n; i++)
        im2col(s, dt, ganfw_cpu_elem(dt, x, (n0 + i0 + i) * CHW), col + i * PQ, cols,
               conv_scratch(&cw, i0 + i));
      if (n == 1 && dt == GANFW_DTYPE_F32) {
        /* One image: its output rows are y's rows, no scatter needed. */
        conv_gemm(be, dt, groups, 0, 0, K, PQ, CRS, w, NULL, CRS, col, PQ, yg, PQ);
        if (b) add_bias(K, PQ, b, yg);
      } else {
        conv_gemm(be, dt, groups, 0, 0, K, cols, CRS, w, w16, CRS, col, cols, out, cols);
        scatter_out(n, K, PQ, cols, out, b, dt, yg);
      }
    }
  }
}

void ganfw_cpu_conv2d_backward_dt(ganfw_backend *be, const ganfw_conv2d_shape *s, int32_t dt,
                                  const void *x, const float *w, const void *dy, void *dx,
                                  float *dw, float *db, int accumulate, const float *bdx,
                                  const conv_lp_ws *lw, void *ws) {
  const int64_t N = s->N, K = s->K, CRS = s->C * s->R * s->S, PQ = s->P * s->Q;
  const int64_t CHW = s->C * s->H * s->W;
  if (db) ganfw_cpu_conv_bias_grad(N, K, PQ, dt, dy, db, accumulate);
  if (dx && conv_bench_due(s, GANFW_CONV_PASS_DATA, dt)) {
    conv_call c = {be, s, dt, x, w, NULL, dy, NULL, dx, NULL, NULL, 0, bdx, lw, ws};
    conv_bench_measure(s, GANFW_CONV_PASS_DATA, conv_call_run, &c);
  }
  if (dw && conv_bench_due(s, GANFW_CONV_PASS_FILTER, dt)) {
    /* the measurements overwrite dw: keep what an accumulating call adds to */
    const size_t bytes = (size_t)(K * CRS) * sizeof *dw;
    float *keep = accumulate ? malloc(bytes) : NULL;
    if (keep || !accumulate) {
      if (keep) memcpy(keep, dw, bytes);
      conv_call c = {be, s, dt, x, w, NULL, dy, NULL, NULL, dw, NULL, 0, NULL, lw, ws};
      conv_bench_measure(s, GANFW_CONV_PASS_FILTER, conv_call_run, &c);
      if (keep) memcpy(dw, keep, bytes);
      free(keep);
    }
  }
  const int wino_dx = dx && conv_winograd(s, GANFW_CONV_PASS_DATA, dt);
  const int wino_dw = dw && conv_winograd(s, GANFW_CONV_PASS_FILTER, dt);
  if (wino_dx || wino_dw) {
    /* The passes Winograd does not take stay on im2col + GEMM below. */
    ganfw_cpu_conv2d_winograd_backward(s, dt, x, w, dy, wino_dx ? dx : NULL, wino_dw ? dw : NULL,
                                       accumulate, bdx, lw ? lw->stage : NULL, ws);
    if (wino_dx) dx = NULL;
    if (wino_dw) dw = NULL;
  }
  const int direct_dx = dx && conv_direct(s, GANFW_CONV_PASS_DATA, dt);
  const int direct_dw = dw && conv_direct(s, GANFW_CONV_PASS_FILTER, dt);
  if (direct_dx || direct_dw) {
    ganfw_cpu_conv2d_direct_backward(s, dt, x, w, dy, direct_dx ? dx : NULL, direct_dw ? dw : NULL,
                                     accumulate, bdx, ws);
    if (direct_dx) dx = NULL;
    if (direct_dw) dw = NULL;
  }
  if (conv_is_dense(s)) {
    /* dy is [N, K]: dx[N, CRS] = dy * w[K, CRS]; dw[K, CRS] (+)= dy^T * x[N, CRS]. A 16-bit
     * dy, x and dx go through f32 copies, x and dx sharing one. */
    const int lp = dt != GANFW_DTYPE_F32;
    const float *dyf = lp ? lw->dense_out : dy;
    if (lp && (dw || dx)) ganfw_cpu_row_to_f32(dt, N * K, dy, lw->dense_out);
    if (dw) {
      const float *xf = lp ? lw->dense_in : x;
      if (lp) ganfw_cpu_row_to_f32(dt, N * CRS, x, lw->dense_in);
      ganfw_cpu_gemm_dt(be, dt, 1, 0, K, CRS, N, 1.0f, dyf, K, xf, CRS, accumulate ? 1.0f : 0.0f,
                        dw, CRS);
    }
    if (dx) {
      float *dxf = lp ? lw->dense_in : dx;
      ganfw_cpu_gemm_dt(be, dt, 0, 0, N, CRS, K, 1.0f, dyf, K, w, CRS, 0.0f, dxf, CRS);
      if (bdx)
        for (int64_t n = 0; n < N; n++) add_bias(s->C, s->H * s->W, bdx, dxf + n * CRS);
      if (lp) ganfw_cpu_row_from_f32(dt, N * CRS, dxf, dx);
    }
    return;
  }
  if (!dx && !dw) return;
  const int64_t chunk = conv_chunk(s);
  const conv_ws cw = conv_ws_split(s, ws);
  const uint16_t *w16 = lw ? lw->w16 : NULL; /* w in bf16, for conv_gemm */
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t nb = N - n0 < chunk ? N - n0 : chunk, ld = conv_ld(nb, PQ);
    const int64_t g = conv_group(s, nb), groups = (nb + g - 1) / g;
    const int parallel = groups > 1 && K * CRS * nb * PQ >= CONV_PARALLEL_MIN_MACS;
    const void *dyn = ganfw_cpu_elem(dt, dy, n0 * K * PQ);
    if (dw) {
      /* dw[K, CRS] (+)= dyc * col^T over all the chunk's columns (chunk-wide layout): one
       * GEMM with a long inner dimension, split over the threads. */
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (parallel)
      for (int64_t gi = 0; gi < groups; gi++) {
        const int64_t i0 = gi * g, n = i0 + g < nb ? g : nb - i0;
        gather_dy(n, K, PQ, ld, dt, ganfw_cpu_elem(dt, dyn, i0 * K * PQ), cw.out + i0 * PQ);
        for (int64_t i = i0; i < i0 + n; i++)
          im2col(s, dt, ganfw_cpu_elem(dt, x, (n0 + i) * CHW), cw.col + i * PQ, ld,
                 conv_scratch(&cw, i));
      }
      const float beta = (n0 == 0 && !accumulate) ? 0.0f : 1.0f;
      ganfw_cpu_gemm_dt(be, dt, 0, 1, K, CRS, nb * PQ, 1.0f, cw.out, ld, cw.col, ld, beta, dw, CRS);
    }
    if (dx) {
      /* Each group, in the compact layout: col = w^T * dyc and col2im on one thread. */
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (parallel)
      for (int64_t gi = 0; gi < groups; gi++) {
        const int64_t i0 = gi * g, n = i0 + g < nb ? g : nb - i0, cols = n * PQ;
        float *col = cw.col + i0 * CRS * PQ;
        const float *dyc = cw.out + i0 * K * PQ;
        if (n == 1 && dt == GANFW_DTYPE_F32) /* one f32 image: dy's rows are the rows needed */
          dyc = (const float *)dyn + i0 * K * PQ;
        else
          gather_dy(n, K, PQ, cols, dt, ganfw_cpu_elem(dt, dyn, i0 * K * PQ), cw.out + i0 * K * PQ);
        conv_gemm(be, dt, groups, 1, 0, CRS, cols, K, w, w16, CRS, dyc, cols, col, cols);
        for (int64_t i = 0; i < n; i++)
          col2im(s, col + i * PQ, cols, conv_scratch(&cw, i0 + i), bdx, dt,
                 ganfw_cpu_elem_mut(dt, dx, (n0 + i0 + i) * CHW));
      }
    }
  }
}

/* --- 16-bit activations -----------------------------------------------------------------
 * The f32 kernels above with the conversions where they touch the activations: into
 * pad_plane (im2col), gather_dy and the dense copies, out of scatter_out and col2im, and
 * around the Winograd transforms (a staging plane per thread slot). The GEMMs are those of
 * ganfw_cpu_gemm_dt for the dtype. The workspace is the f32 one, then the weights in f32, the dense
 * f32 copies and the Winograd staging planes. */

/* Floats, rounded up to whole 64-byte lines. */
static size_t lines_of(int64_t floats) {
  return (size_t)((floats + 15) / 16 * 16) * sizeof(float);
}

typedef struct conv_lp_sizes {
  size_t f32_ws, w, dense_in, dense_out, stage;
  size_t w_at; /* where the f32 weights lie */
} conv_lp_sizes;

static conv_lp_sizes conv_lp_layout(const ganfw_conv2d_shape *s) {
  const int64_t CRS = s->C * s->R * s->S;
  conv_lp_sizes z = {.f32_ws = ganfw_cpu_conv2d_im2col_workspace(s), .w = lines_of(s->K * CRS)};
  z.w_at = z.f32_ws;
  /* When both passes that read the weights run on Winograd, their f32 copy lies in V, which
   * is free until the weights are transformed. */
  size_t spare = 0;
  if (ganfw_cpu_conv2d_winograd_use(s, GANFW_CONV_PASS_FORWARD) &&
      ganfw_cpu_conv2d_winograd_use(s, GANFW_CONV_PASS_DATA) && !conv_is_dense(s) &&
      !im2col_forced) {
    const size_t at = ganfw_cpu_conv2d_winograd_spare(s, &spare);
    if (spare >= z.w) z.w_at = at, z.w = 0;
  }
  if (conv_is_dense(s)) {
    z.dense_in = lines_of(s->N * CRS);
    z.dense_out = lines_of(s->N * s->K);
  }
  if (ganfw_cpu_conv2d_winograd_fits(s)) z.stage = ganfw_cpu_conv2d_winograd_stage_bytes(s);
  return z;
}

size_t ganfw_cpu_conv2d_lp_workspace(const ganfw_conv2d_shape *s) {
  const conv_lp_sizes z = conv_lp_layout(s);
  return z.f32_ws + z.w + z.dense_in + z.dense_out + z.stage;
}

/* The parts of the workspace ws, and w (dtype dt, may be NULL) converted to f32 into it. */
conv_lp_ws ganfw_cpu_conv2d_lp_split(const ganfw_conv2d_shape *s, int32_t dt, const void *w,
                                     void *ws) {
  const conv_lp_sizes z = conv_lp_layout(s);
  conv_lp_ws lw = {.w = (float *)(void *)((char *)ws + z.w_at),
                   .w16 = dt == GANFW_DTYPE_BF16 ? w : NULL};
  char *p = (char *)ws + z.f32_ws + z.w;
  lw.dense_in = z.dense_in ? (float *)(void *)p : NULL;
  p += z.dense_in;
  lw.dense_out = z.dense_out ? (float *)(void *)p : NULL;
  p += z.dense_out;
  lw.stage = z.stage ? (float *)(void *)p : NULL;
  if (w) ganfw_cpu_row_to_f32(dt, s->K * s->C * s->R * s->S, w, lw.w);
  return lw;
}

/* In f32, the im2col kernels' own workspace: the Winograd path sizes its chunks to fit it too
 * (conv_winograd.h), so the workspace of a conv is the same whichever path runs it. */
size_t ganfw_cpu_conv2d_workspace(const ganfw_conv2d_shape *s, int32_t dt) {
  return dt == GANFW_DTYPE_F32 ? ganfw_cpu_conv2d_im2col_workspace(s)
                               : ganfw_cpu_conv2d_lp_workspace(s);
}

/* In 16 bits, the weights are converted to f32 into the workspace first (lw). */
ganfw_status ganfw_cpu_op_conv2d_forward(ganfw_backend *be, ganfw_op *op) {
  const ganfw_conv2d_shape *s = &op->shape.conv;
  const int32_t dt = op->dtype;
  if (dt == GANFW_DTYPE_F32) {
    ganfw_cpu_conv2d_forward_dt(be, s, dt, op->in[0], op->in[1], op->in[2], op->out[0], NULL,
                                op->ws);
    return GANFW_OK;
  }
  const conv_lp_ws lw = ganfw_cpu_conv2d_lp_split(s, dt, op->in[1], op->ws);
  ganfw_cpu_conv2d_forward_dt(be, s, dt, op->in[0], lw.w, op->in[2], op->out[0], &lw, op->ws);
  return GANFW_OK;
}

/* w is read (and, in 16 bits, converted) only for dx. */
ganfw_status ganfw_cpu_op_conv2d_backward(ganfw_backend *be, ganfw_op *op) {
  const ganfw_conv2d_shape *s = &op->shape.conv;
  const int32_t dt = op->dtype;
  void *dx = op->out[0];
  if (dt == GANFW_DTYPE_F32) {
    ganfw_cpu_conv2d_backward_dt(be, s, dt, op->in[0], op->in[1], op->in[2], dx, op->grad[0],
                                 op->grad[1], ganfw_cpu_accumulate(op), NULL, NULL, op->ws);
    return GANFW_OK;
  }
  const conv_lp_ws lw = ganfw_cpu_conv2d_lp_split(s, dt, dx ? op->in[1] : NULL, op->ws);
  ganfw_cpu_conv2d_backward_dt(be, s, dt, op->in[0], dx ? lw.w : NULL, op->in[2], dx, op->grad[0],
                               op->grad[1], ganfw_cpu_accumulate(op), NULL, &lw, op->ws);
  return GANFW_OK;
}
