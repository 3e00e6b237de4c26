/* conv2d of stride 1 on the CPU by direct kernels, x [N,C,H,W] * w [K,C,R,S] -> y [N,K,P,Q]
 * and its backward, for ResNet's 3x3 "same" layers: their 16-64 channels make thin GEMMs,
 * and im2col copies every input R*S times.
 *
 * Flat planes: each input channel is copied once into a zero-padded plane of row pitch
 * wp = W + 2*pad_w. Output (p, q) then reads in[(p + r)*wp + q + s], so with the flat index
 * f = p*wp + q an output row's neighbours are the next lanes, and a vector of 16 outputs
 * reads 16 consecutive floats at offset r*wp + s for each kernel tap: no gathers. The wp - Q
 * columns past each row's end are computed and dropped (2 of 30 at 28x28, 2 of 16 at 14x14,
 * 2 of 9 at 7x7).
 *   forward        y[k][f] = sum_c sum_t w[k][c][t] * xpad[c][f + off_t], off_t = r*wp + s;
 *                  a task is 8 output channels of one image, in register tiles of
 *                  8 channels x 3 vectors (AVX-512)
 *   backward-data  the same kernels: dx is the stride-1 conv of dy padded by R-1-pad_h and
 *                  S-1-pad_w with w transposed to [C][K] and flipped
 *   backward-filt  dw[k][c][r][s] = sum_n sum_f dyf[k][f] * xpad[c][f + r*wp + s], dyf dy
 *                  in rows of pitch wp with zeros past each row; a task is (8 k, c, r) over
 *                  a chunk of images, the lanes summed at the chunk's end
 * Every element is summed in an order fixed by the shape alone (not the thread count, not
 * the SIMD level), with fused multiply-adds. Weights are packed [K/8][C][R*S][8]. The
 * workspace (ganfw_cpu_conv2d_direct_workspace) holds the packed weights and a chunk's
 * planes, within im2col's (so every memory figure and plan is the same for both paths);
 * 16-bit activations are converted into the planes and out of the register tiles. */
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/cast.h"
#include "backend/cpu/conv_direct.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/gemm_bf16.h"

#define DK_LANES 16
/* Output channels per task and per packed weight block. */
#define DK_KB 8
/* Vectors per register tile (AVX-512); DK_ROW: floats of a tile's output row. */
#define DK_VB  3
#define DK_ROW (DK_VB * DK_LANES)
/* Largest kernel size. */
#define DK_SMAX 7
/* A chunk's planes take at most this many bytes (and a filter chunk DK_FILTER_BYTES, so
 * that its images stay in a core's cache while every task reads them). */
#define DK_CHUNK_BYTES  ((size_t)4 << 20)
#define DK_FILTER_BYTES ((size_t)768 << 10)
/* Work below this many multiply-adds stays on one thread. */
#define DK_PARALLEL_MIN_MACS (1 << 21)
#define DK_UNROLL            _Pragma("GCC unroll 16")

typedef float dk_v __attribute__((vector_size(DK_LANES * sizeof(float))));

/* A stride-1 pass on flat planes: cin padded planes in, cout channels out (ho x wo). */
typedef struct dk_geo {
  int64_t cin, cout, hi, wi, ph, pw, ho, wo;
  int64_t wp;    /* row pitch of the padded planes */
  int64_t nv;    /* vectors covering ho*wp flat outputs */
  int64_t plane; /* floats of one padded plane, with slack for the last vector's taps */
  int64_t nrs;   /* kernel taps R*S */
  int64_t off[DK_SMAX * DK_SMAX];
} dk_geo;

/* The weight-gradient pass: x's padded planes and dy flat in rows of pitch wp. */
typedef struct dk_fgeo {
  int64_t cin, cout; /* C, and K rounded up to 8 (dyf's channels) */
  int64_t S, wp, nv, plane, fplane;
} dk_fgeo;

static int64_t round16(int64_t n) {
  return (n + 15) / 16 * 16;
}

static dk_geo dk_geometry(int64_t cin, int64_t cout, int64_t hi, int64_t wi, int64_t R, int64_t S,
                          int64_t ph, int64_t pw) {
  dk_geo g = {.cin = cin, .cout = cout, .hi = hi, .wi = wi, .ph = ph, .pw = pw, .nrs = R * S};
  g.wp = wi + 2 * pw;
  g.ho = hi + 2 * ph - R + 1, g.wo = g.wp - S + 1;
  g.nv = (g.ho * g.wp + DK_LANES - 1) / DK_LANES;
  /* the taps of the last vector reach S - 1 floats past it, the AVX-512 weight-gradient
   * tile loads one whole vector past it */
  const int64_t rows = (hi + 2 * ph) * g.wp, reach = (R - 1) * g.wp + g.nv * DK_LANES + DK_LANES;
  g.plane = round16(rows > reach ? rows : reach);
  for (int64_t r = 0; r < R; r++)
    for (int64_t s = 0; s < S; s++) g.off[r * S + s] = r * g.wp + s;
  return g;
}

static dk_geo dk_forward_geo(const ganfw_conv2d_shape *s) {
  return dk_geometry(s->C, s->K, s->H, s->W, s->R, s->S, s->pad_h, s->pad_w);
}

static dk_geo dk_data_geo(const ganfw_conv2d_shape *s) {
  return dk_geometry(s->K, s->C, s->P, s->Q, s->R, s->S, s->R - 1 - s->pad_h, s->S - 1 - s->pad_w);
}

static dk_fgeo dk_filter_geo(const ganfw_conv2d_shape *s) {
  const dk_geo x = dk_forward_geo(s);
  return (dk_fgeo){.cin = s->C,
                   .cout = (s->K + DK_KB - 1) / DK_KB * DK_KB,
                   .S = s->S,
                   .wp = x.wp,
                   .nv = x.nv,
                   .plane = x.plane,
                   .fplane = round16(x.nv * DK_LANES)};
}

/* Floats of the packed weights of either direction. */
static int64_t dk_weight_floats(const ganfw_conv2d_shape *s) {
  const int64_t k8 = (s->K + DK_KB - 1) / DK_KB * DK_KB, c8 = (s->C + DK_KB - 1) / DK_KB * DK_KB;
  const int64_t a = k8 * s->C, b = c8 * s->K;
  return round16((a > b ? a : b) * s->R * s->S);
}

/* Floats one image takes in each pass's chunk. */
static int64_t dk_forward_image(const ganfw_conv2d_shape *s) {
  const dk_geo g = dk_forward_geo(s);
  return g.cin * g.plane;
}

static int64_t dk_data_image(const ganfw_conv2d_shape *s) {
  const dk_geo g = dk_data_geo(s);
  return g.cin * g.plane;
}

static int64_t dk_filter_image(const ganfw_conv2d_shape *s) {
  const dk_fgeo g = dk_filter_geo(s);
  return g.cin * g.plane + g.cout * g.fplane;
}

/* Images per chunk of a pass whose image takes `per` floats: within `cap` bytes and within
 * what im2col's workspace leaves beside the packed weights, at least one. */
static int64_t dk_chunk(const ganfw_conv2d_shape *s, int64_t per, size_t cap) {
  const size_t im2col = ganfw_cpu_conv2d_im2col_workspace(s);
  const size_t weights = (size_t)dk_weight_floats(s) * sizeof(float);
  size_t bytes = im2col > weights ? im2col - weights : 0;
  if (bytes > cap) bytes = cap;
  int64_t n = (int64_t)(bytes / ((size_t)per * sizeof(float)));
  if (n > s->N) n = s->N;
  return n < 1 ? 1 : n;
}

static int64_t dk_max3(int64_t a, int64_t b, int64_t c) {
  const int64_t m = a > b ? a : b;
  return m > c ? m : c;
}

size_t ganfw_cpu_conv2d_direct_workspace(const ganfw_conv2d_shape *s) {
  const int64_t f = dk_forward_image(s), d = dk_data_image(s), w = dk_filter_image(s);
  const int64_t area =
      dk_max3(dk_chunk(s, f, DK_CHUNK_BYTES) * f, dk_chunk(s, d, DK_CHUNK_BYTES) * d,
              dk_chunk(s, w, DK_FILTER_BYTES) * w);
  return (size_t)(dk_weight_floats(s) + area) * sizeof(float);
}

int ganfw_cpu_conv2d_direct_fits(const ganfw_conv2d_shape *s) {
  return s->stride_h == 1 && s->stride_w == 1 && s->R >= 1 && s->R <= DK_SMAX && s->S >= 1 &&
         s->S <= DK_SMAX && s->pad_h >= 0 && s->pad_h < s->R && s->pad_w >= 0 && s->pad_w < s->S &&
         s->P >= 1 && s->Q >= 1 &&
         ganfw_cpu_conv2d_direct_workspace(s) <= ganfw_cpu_conv2d_im2col_workspace(s);
}

/* The shapes measured faster than im2col + GEMM (bench_conv ... direct): all that fit up to
 * 128 channels each way, where the GEMMs are thin. */
int ganfw_cpu_conv2d_direct_use(const ganfw_conv2d_shape *s, ganfw_conv_pass pass) {
  (void)pass;
  return ganfw_cpu_conv2d_direct_fits(s) && s->C <= 128 && s->K <= 128;
}

/* The output rows of a register tile tmp [8][DK_ROW] holding the flat positions of vectors
 * [v0, v0 + vb): out [cout][ho][wo] (dtype dt) of channels [k0, k0 + 8) ∩ [0, cout) where
 * those positions lie in the image (+ bias[k] when bias is not NULL, before the rounding). */
static void dk_store(const dk_geo *g, float *tmp, int64_t v0, int64_t vb, int64_t k0,
                     const float *bias, int32_t dt, void *out) {
  const int64_t kn = g->cout - k0 < DK_KB ? g->cout - k0 : DK_KB, flat = g->ho * g->wp;
  const int64_t f0 = v0 * DK_LANES, f1 = f0 + vb * DK_LANES < flat ? f0 + vb * DK_LANES : flat;
  for (int64_t p = f0 / g->wp; p * g->wp < f1; p++) {
    const int64_t q0 = f0 > p * g->wp ? f0 - p * g->wp : 0;
    const int64_t q1 = f1 - p * g->wp < g->wo ? f1 - p * g->wp : g->wo;
    if (q1 <= q0) continue;
    for (int64_t k = 0; k < kn; k++) {
      float *src = tmp + k * DK_ROW + (p * g->wp + q0 - f0);
      const int64_t at = ((k0 + k) * g->ho + p) * g->wo + q0;
      if (bias)
        for (int64_t q = 0; q < q1 - q0; q++) src[q] += bias[k0 + k];
      if (dt == GANFW_DTYPE_F32) { /* short rows: a loop, not a library call */
        float *d = (float *)out + at;
        for (int64_t q = 0; q < q1 - q0; q++) d[q] = src[q];
      } else {
        ganfw_cpu_row_from_f32(dt, q1 - q0, src, ganfw_cpu_elem_mut(dt, out, at));
      }
    }
  }
}

/* The kernels, once per SIMD level (isa.h); a pass runs the level in use. */
#define GANFW_ISA_BODY "backend/cpu/conv_direct_kernels.h"
#include "backend/cpu/isa_each.h"

typedef void (*dk_task_fn)(const dk_geo *g, const float *in, const float *wb, int64_t k0,
                           const float *bias, int32_t dt, void *out);
static const dk_task_fn dk_task_by_isa[GANFW_CPU_ISA_COUNT] = GANFW_ISA_TABLE(dk_task);
typedef void (*dk_filter_fn)(const dk_fgeo *g, const float *xpl, const float *dyf, int64_t nb,
                             int64_t k0, int64_t c, int64_t r, float part[DK_KB][DK_SMAX]);
static const dk_filter_fn dk_filter_by_isa[GANFW_CPU_ISA_COUNT] = GANFW_ISA_TABLE(dk_filter_task);

/* n values of a row in dtype dt into f32 at dst: f32 by a plain loop (rows are short, 7 to 56
 * values in ResNets, where a library call costs as much as the copy). */
static inline void dk_row_in(int32_t dt, int64_t n, const void *src, float *dst) {
  if (dt == GANFW_DTYPE_F32) {
    const float *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = s[i];
  } else {
    ganfw_cpu_row_to_f32(dt, n, src, dst);
  }
}

/* One input plane (hi x wi, dtype dt) into pl at row pitch wp, with zeros in the padding
 * around it and in the slack after it, each float written once. */
static void dk_pack_plane(const dk_geo *g, int32_t dt, const void *src, float *pl) {
  const int64_t top = g->ph * g->wp, right = g->wp - g->pw - g->wi;
  for (int64_t i = 0; i < top + g->pw; i++) pl[i] = 0.0f;
  float *row = pl + top + g->pw;
  for (int64_t h = 0; h < g->hi; h++, row += g->wp) {
    dk_row_in(dt, g->wi, ganfw_cpu_elem(dt, src, h * g->wi), row);
    /* the right padding of this row and the left padding of the next */
    for (int64_t j = g->wi; j < g->wi + right + g->pw; j++) row[j] = 0.0f;
  }
  /* written so far: [0, row); the bottom padding and the slack */
  for (float *p = row, *end = pl + g->plane; p < end; p++) *p = 0.0f;
}

/* The nb images from `src` (each [cin][hi][wi]) as padded planes [nb][cin][plane]. */
static void dk_pack(const dk_geo *g, int32_t dt, const void *src, int64_t nb, float *planes) {
  const int64_t n_planes = nb * g->cin, per = g->hi * g->wi;
#pragma omp parallel for schedule(static)                                                          \
    num_threads(ganfw_cpu_threads()) if (n_planes * g->plane >= 65536)
  for (int64_t i = 0; i < n_planes; i++)
    dk_pack_plane(g, dt, ganfw_cpu_elem(dt, src, i * per), planes + i * g->plane);
}

/* wb[kb][c][t][j] = w[kb*8 + j][c][t] (forward) or w[c][kb*8 + j][R*S - 1 - t] (transpose:
 * backward-data, whose output channels are w's input channels), zeros past cout. */
static void dk_pack_weights(const ganfw_conv2d_shape *s, const dk_geo *g, int transpose,
                            const float *w, float *wb) {
  const int64_t nrs = g->nrs, blocks = (g->cout + DK_KB - 1) / DK_KB;
  for (int64_t kb = 0; kb < blocks; kb++)
    for (int64_t c = 0; c < g->cin; c++)
      for (int64_t t = 0; t < nrs; t++)
        for (int64_t j = 0; j < DK_KB; j++) {
          const int64_t k = kb * DK_KB + j;
          float v = 0.0f;
          if (k < g->cout)
            v = transpose ? w[(c * s->C + k) * nrs + nrs - 1 - t] : w[(k * s->C + c) * nrs + t];
          wb[((kb * g->cin + c) * nrs + t) * DK_KB + j] = v;
        }
}

/* out = the stride-1 conv of `in` (N images [cin][hi][wi] in dt) by the packed weights wb,
 * + bias, into N images [cout][ho][wo] in dt, chunk by chunk. */
static void dk_run(const ganfw_conv2d_shape *s, const dk_geo *g, int32_t dt, const void *in,
                   const float *wb, const float *bias, void *out, float *planes) {
  const int64_t per = g->cin * g->plane, chunk = dk_chunk(s, per, DK_CHUNK_BYTES);
  const int64_t blocks = (g->cout + DK_KB - 1) / DK_KB, in_img = g->cin * g->hi * g->wi;
  const int64_t out_img = g->cout * g->ho * g->wo;
  const dk_task_fn task = dk_task_by_isa[ganfw_cpu_isa_level()];
  for (int64_t n0 = 0; n0 < s->N; n0 += chunk) {
    const int64_t nb = s->N - n0 < chunk ? s->N - n0 : chunk;
    dk_pack(g, dt, ganfw_cpu_elem(dt, in, n0 * in_img), nb, planes);
    const int parallel =
        nb * blocks > 1 && nb * g->cout * g->cin * g->nrs * g->ho * g->wo >= DK_PARALLEL_MIN_MACS;
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (parallel)
    for (int64_t i = 0; i < nb * blocks; i++) {
      const int64_t n = i / blocks, kb = i % blocks;
      task(g, planes + n * per, wb + kb * g->cin * g->nrs * DK_KB, kb * DK_KB, bias, dt,
           ganfw_cpu_elem_mut(dt, out, (n0 + n) * out_img));
    }
  }
}

/* --- bf16 on AVX-512 BF16 dot products ------------------------------------------------------
 * With bf16 activations on a CPU with vdpbf16ps (ganfw_cpu_have_bf16_dot), each instruction
 * multiplies 16 pairs and adds both products to an f32 lane: twice the multiply-adds of an
 * f32 FMA. Forward and backward-data pair consecutive input channels: their planes are
 * interleaved (channel 2i in the low half of each 32-bit word, 2i+1 in the high half) and
 * the weights packed as pairs [K/8][C/2][R*S][8], rounded to bf16 (exact for amp's bf16
 * weights). Backward-filter pairs consecutive flat positions: dy and x planes stay plain bf16
 * and a lane sums the products at positions 2l and 2l+1. Sums in f32, the instruction's
 * subnormals flushed, as gemm_bf16.c; tests/test_conv_direct.c bounds the error. */
#if GANFW_CPU_ISA_MULTI
#define DKB_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* The nb images of `src` (bf16, each [cin][hi][wi]) as planes of channel pairs
 * [nb][(cin+1)/2][plane] (32-bit words), zeros in the padding and slack. */
static void dkb_pack_pairs(const dk_geo *g, const uint16_t *src, int64_t nb, uint32_t *planes) {
  const int64_t cpn = (g->cin + 1) / 2, hw = g->hi * g->wi;
#pragma omp parallel for schedule(static)                                                          \
    num_threads(ganfw_cpu_threads()) if (nb * cpn * g->plane >= 65536)
  for (int64_t i = 0; i < nb * cpn; i++) {
    const int64_t n = i / cpn, cp = i % cpn;
    uint32_t *pl = planes + i * g->plane;
    const uint16_t *a = src + (n * g->cin + 2 * cp) * hw;
    const uint16_t *b = 2 * cp + 1 < g->cin ? a + hw : NULL;
    memset(pl, 0, (size_t)g->plane * sizeof *pl);
    for (int64_t h = 0; h < g->hi; h++) {
      uint32_t *row = pl + (h + g->ph) * g->wp + g->pw;
      const uint16_t *ra = a + h * g->wi, *rb = b ? b + h * g->wi : NULL;
      for (int64_t w = 0; w < g->wi; w++)
        row[w] = (uint32_t)ra[w] | (rb ? (uint32_t)rb[w] << 16 : 0u);
    }
  }
}

/* wb[kb][cp][t][j]: the bf16 pair (w of input channel 2cp, of 2cp+1) of output channel
 * kb*8 + j at tap t, as dk_pack_weights (transpose: backward-data). */
static void dkb_pack_weights(const ganfw_conv2d_shape *s, const dk_geo *g, int transpose,
                             const float *w, uint32_t *wb) {
  const int64_t nrs = g->nrs, blocks = (g->cout + DK_KB - 1) / DK_KB, cpn = (g->cin + 1) / 2;
  for (int64_t kb = 0; kb < blocks; kb++)
    for (int64_t cp = 0; cp < cpn; cp++)
      for (int64_t t = 0; t < nrs; t++)
        for (int64_t j = 0; j < DK_KB; j++) {
          const int64_t k = kb * DK_KB + j;
          uint32_t pair = 0;
          for (int64_t h = 0; h < 2; h++) {
            const int64_t c = 2 * cp + h;
            if (k >= g->cout || c >= g->cin) continue;
            const float v =
                transpose ? w[(c * s->C + k) * nrs + nrs - 1 - t] : w[(k * s->C + c) * nrs + t];
            pair |= (uint32_t)ganfw_f32_to_bf16_scalar(v) << (16 * h);
          }
          wb[((kb * cpn + cp) * nrs + t) * DK_KB + j] = pair;
        }
}

/* dk_tile on channel pairs: out[k][v*16 + lane] += the pair products, k < 8, v < VB. */
#define DKB_TILE(VB)                                                                               \
  DKB_TARGET static void dkb_tile_##VB(const uint32_t *in, int64_t plane, int64_t cpn,             \
                                       const int64_t *off, int64_t nrs, const uint32_t *wb,        \
                                       float *out) {                                               \
    __m512 acc[DK_KB][VB];                                                                         \
    DK_UNROLL for (int k = 0; k < DK_KB; k++) DK_UNROLL for (int v = 0; v < VB; v++) acc[k][v] =   \
        _mm512_setzero_ps();                                                                       \
    for (int64_t cp = 0; cp < cpn; cp++) {                                                         \
      const uint32_t *ic = in + cp * plane, *wc = wb + cp * nrs * DK_KB;                           \
      for (int64_t t = 0; t < nrs; t++) {                                                          \
        const uint32_t *src = ic + off[t], *wt = wc + t * DK_KB;                                   \
        __m512bh xv[VB];                                                                           \
        DK_UNROLL for (int v = 0; v < VB; v++) xv[v] =                                             \
            (__m512bh)_mm512_loadu_si512(src + v * DK_LANES);                                      \
        DK_UNROLL for (int k = 0; k < DK_KB; k++) {                                                \
          const __m512bh wk = (__m512bh)_mm512_set1_epi32((int)wt[k]);                             \
          DK_UNROLL for (int v = 0; v < VB; v++) acc[k][v] =                                       \
              _mm512_dpbf16_ps(acc[k][v], xv[v], wk);                                              \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    DK_UNROLL for (int k = 0; k < DK_KB; k++) DK_UNROLL for (int v = 0; v < VB; v++)               \
        _mm512_storeu_ps(out + k * DK_ROW + v * DK_LANES, acc[k][v]);                              \
  }
DKB_TILE(1)
DKB_TILE(2)
DKB_TILE(3)
#undef DKB_TILE

/* dk_task on channel pairs, with a bf16 output. */
DKB_TARGET static void dkb_task(const dk_geo *g, const uint32_t *in, const uint32_t *wb, int64_t k0,
                                const float *bias, void *out) {
  float tmp[DK_KB * DK_ROW] __attribute__((aligned(64)));
  const int64_t cpn = (g->cin + 1) / 2;
  for (int64_t v0 = 0; v0 < g->nv; v0 += DK_VB) {
    const int64_t vb = g->nv - v0 < DK_VB ? g->nv - v0 : DK_VB;
    const uint32_t *at = in + v0 * DK_LANES;
    if (vb == 1) dkb_tile_1(at, g->plane, cpn, g->off, g->nrs, wb, tmp);
    if (vb == 2) dkb_tile_2(at, g->plane, cpn, g->off, g->nrs, wb, tmp);
    if (vb == 3) dkb_tile_3(at, g->plane, cpn, g->off, g->nrs, wb, tmp);
    dk_store(g, tmp, v0, vb, k0, bias, GANFW_DTYPE_BF16, out);
  }
}

/* dk_run for bf16 on dot products; wb and planes in the same places of the workspace (a
 * pair plane of 32-bit words takes the bytes of one f32 plane of the two channels' one). */
static void dkb_run(const ganfw_conv2d_shape *s, const dk_geo *g, const uint16_t *in,
                    const uint32_t *wb, const float *bias, uint16_t *out, float *area) {
  const int64_t per = g->cin * g->plane, chunk = dk_chunk(s, per, DK_CHUNK_BYTES);
  const int64_t cpn = (g->cin + 1) / 2, blocks = (g->cout + DK_KB - 1) / DK_KB;
  const int64_t in_img = g->cin * g->hi * g->wi, out_img = g->cout * g->ho * g->wo;
  uint32_t *planes = (uint32_t *)(void *)area;
  for (int64_t n0 = 0; n0 < s->N; n0 += chunk) {
    const int64_t nb = s->N - n0 < chunk ? s->N - n0 : chunk;
    dkb_pack_pairs(g, in + n0 * in_img, nb, planes);
    const int parallel =
        nb * blocks > 1 && nb * g->cout * g->cin * g->nrs * g->ho * g->wo >= DK_PARALLEL_MIN_MACS;
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (parallel)
    for (int64_t i = 0; i < nb * blocks; i++) {
      const int64_t n = i / blocks, kb = i % blocks;
      dkb_task(g, planes + n * cpn * g->plane, wb + kb * cpn * g->nrs * DK_KB, kb * DK_KB, bias,
               out + (n0 + n) * out_img);
    }
  }
}

/* The weight-gradient pass's sizes in bf16 elements: vectors of 32 positions, plain x planes
 * (the taps of the last vector, and the two more a tile of 3 loads, reach past it) and dy
 * planes. 0 when they do not fit in the bytes of the f32 planes. */
typedef struct dkb_fsizes {
  int64_t nv, xplane, fplane;
} dkb_fsizes;

static dkb_fsizes dkb_filter_sizes(const ganfw_conv2d_shape *s) {
  const dk_fgeo g = dk_filter_geo(s);
  dkb_fsizes z = {.nv = (s->P * g.wp + 31) / 32};
  const int64_t reach = (s->R - 1) * g.wp + s->S + 1 + z.nv * 32 + 32;
  const int64_t rows = (s->H + 2 * s->pad_h) * g.wp;
  z.xplane = (reach > rows ? reach : rows + 32) / 32 * 32 + 32;
  z.fplane = (z.nv + 1) * 32;
  if (z.xplane > 2 * g.plane || z.fplane > 2 * g.fplane) z.nv = 0;
  return z;
}

/* part[k][s] for output channels [k0, k0 + 8), input channel c, kernel row r: the sum over
 * the nb images, the 32-position vectors and the lanes of dy[k][f] * x[c][r*wp + s + f],
 * pairs of positions per lane. */
DKB_TARGET static void dkb_filter_task(const dk_fgeo *g, int64_t nv, int64_t xplane, int64_t fplane,
                                       const uint16_t *x, const uint16_t *dyf, int64_t nb,
                                       int64_t k0, int64_t c, int64_t r,
                                       float part[DK_KB][DK_SMAX]) {
  __m512 acc[DK_KB][DK_SMAX];
  for (int64_t s0 = 0; s0 < g->S; s0 += 3) {
    const int64_t ss = g->S - s0 < 3 ? g->S - s0 : 3;
    __m512 a[DK_KB][3];
    DK_UNROLL for (int k = 0; k < DK_KB; k++) DK_UNROLL for (int q = 0; q < 3; q++) a[k][q] =
        _mm512_setzero_ps();
    for (int64_t n = 0; n < nb; n++) {
      const uint16_t *xr = x + (n * g->cin + c) * xplane + r * g->wp + s0;
      const uint16_t *dk = dyf + (n * g->cout + k0) * fplane;
      for (int64_t v = 0; v < nv; v++) {
        const uint16_t *xv = xr + v * 32;
        const __m512bh x0 = (__m512bh)_mm512_loadu_si512(xv);
        const __m512bh x1 = (__m512bh)_mm512_loadu_si512(xv + 1);
        const __m512bh x2 = (__m512bh)_mm512_loadu_si512(xv + 2);
        DK_UNROLL for (int k = 0; k < DK_KB; k++) {
          __m512i di = _mm512_loadu_si512(dk + k * fplane + v * 32);
          __asm__("" : "+v"(di)); /* one load into a register, not one per use */
          const __m512bh d = (__m512bh)di;
          a[k][0] = _mm512_dpbf16_ps(a[k][0], d, x0);
          a[k][1] = _mm512_dpbf16_ps(a[k][1], d, x1);
          a[k][2] = _mm512_dpbf16_ps(a[k][2], d, x2);
        }
      }
    }
    for (int k = 0; k < DK_KB; k++)
      for (int64_t q = 0; q < ss; q++) acc[k][s0 + q] = a[k][q];
  }
  for (int k = 0; k < DK_KB; k++)
    for (int64_t q = 0; q < g->S; q++) {
      float l[DK_LANES];
      _mm512_storeu_ps(l, acc[k][q]);
      float t = l[0];
      for (int i = 1; i < DK_LANES; i++) t += l[i];
      part[k][q] = t;
    }
}

/* The weight gradient on bf16 dot products, as the f32 pass below: x's planes plain bf16
 * (xplane elements), dy flat (fplane elements), in the bytes of the f32 ones. */
static void dkb_filter(const ganfw_conv2d_shape *s, const uint16_t *x, const uint16_t *dy,
                       float *dw, int accumulate, float *area) {
  const dk_fgeo g = dk_filter_geo(s);
  const dk_geo xg = dk_forward_geo(s);
  const int64_t per = g.cin * g.plane + g.cout * g.fplane,
                chunk = dk_chunk(s, per, DK_FILTER_BYTES);
  const dkb_fsizes z = dkb_filter_sizes(s);
  const int64_t nv = z.nv, xplane = z.xplane, fplane = z.fplane;
  const int64_t blocks = g.cout / DK_KB, R = s->R, tasks = blocks * g.cin * R;
  const int64_t HW = s->H * s->W, PQ = s->P * s->Q, crs = s->C * R * s->S;
  uint16_t *xpl = (uint16_t *)(void *)area;
  uint16_t *dyf = (uint16_t *)(void *)(area + chunk * g.cin * g.plane);
  for (int64_t n0 = 0; n0 < s->N; n0 += chunk) {
    const int64_t nb = s->N - n0 < chunk ? s->N - n0 : chunk;
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (nb * g.cin > 1)
    for (int64_t i = 0; i < nb * g.cin; i++) {
      uint16_t *pl = xpl + i * xplane;
      memset(pl, 0, (size_t)xplane * sizeof *pl);
      for (int64_t h = 0; h < s->H; h++)
        memcpy(pl + (h + xg.ph) * xg.wp + xg.pw, x + (n0 * g.cin + i) * HW + h * s->W,
               (size_t)s->W * sizeof *pl);
    }
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (nb * g.cout > 1)
    for (int64_t i = 0; i < nb * g.cout; i++) {
      uint16_t *pl = dyf + i * fplane;
      const int64_t n = i / g.cout, k = i % g.cout;
      memset(pl, 0, (size_t)fplane * sizeof *pl);
      if (k < s->K)
        for (int64_t p = 0; p < s->P; p++)
          memcpy(pl + p * g.wp, dy + ((n0 + n) * s->K + k) * PQ + p * s->Q,
                 (size_t)s->Q * sizeof *pl);
    }
    const int first = n0 == 0 && !accumulate;
    const int parallel = tasks > 1 && nb * s->K * crs * nv * 32 >= DK_PARALLEL_MIN_MACS;
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (parallel)
    for (int64_t i = 0; i < tasks; i++) {
      const int64_t kb = i / (g.cin * R), c = i / R % g.cin, r = i % R;
      float part[DK_KB][DK_SMAX];
      dkb_filter_task(&g, nv, xplane, fplane, xpl, dyf, nb, kb * DK_KB, c, r, part);
      for (int64_t j = 0; j < DK_KB && kb * DK_KB + j < s->K; j++) {
        float *d = dw + (kb * DK_KB + j) * crs + (c * R + r) * s->S;
        for (int64_t q = 0; q < s->S; q++) d[q] = first ? part[j][q] : d[q] + part[j][q];
      }
    }
  }
}
#endif

int ganfw_cpu_conv2d_direct_bf16(const ganfw_conv2d_shape *s, int32_t dt) {
#if GANFW_CPU_ISA_MULTI
  return dt == GANFW_DTYPE_BF16 && ganfw_cpu_have_bf16_dot() && dkb_filter_sizes(s).nv > 0;
#else
  (void)s, (void)dt;
  return 0;
#endif
}

void ganfw_cpu_conv2d_direct_forward(const ganfw_conv2d_shape *s, int32_t dt, const void *x,
                                     const float *w, const float *b, void *y, void *ws) {
  const dk_geo g = dk_forward_geo(s);
  float *wb = ws, *planes = wb + dk_weight_floats(s);
#if GANFW_CPU_ISA_MULTI
  if (ganfw_cpu_conv2d_direct_bf16(s, dt)) {
    dkb_pack_weights(s, &g, 0, w, (uint32_t *)ws);
    dkb_run(s, &g, x, (const uint32_t *)ws, b, y, planes);
    return;
  }
#endif
  dk_pack_weights(s, &g, 0, w, wb);
  dk_run(s, &g, dt, x, wb, b, y, planes);
}

/* dyf [nb][cout8][fplane]: dy's rows at pitch wp, zeros elsewhere. */
static void dk_pack_dy(const ganfw_conv2d_shape *s, const dk_fgeo *g, int32_t dt, const void *dy,
                       int64_t nb, float *dyf) {
  const int64_t n_planes = nb * g->cout, PQ = s->P * s->Q;
#pragma omp parallel for schedule(static)                                                          \
    num_threads(ganfw_cpu_threads()) if (n_planes * g->fplane >= 65536)
  for (int64_t i = 0; i < n_planes; i++) {
    float *pl = dyf + i * g->fplane;
    const int64_t n = i / g->cout, k = i % g->cout;
    int64_t done = 0; /* floats written */
    if (k < s->K) {
      for (int64_t p = 0; p < s->P; p++, done = p * g->wp) {
        dk_row_in(dt, s->Q, ganfw_cpu_elem(dt, dy, (n * s->K + k) * PQ + p * s->Q), pl + done);
        for (int64_t q = s->Q; q < g->wp; q++) pl[done + q] = 0.0f;
      }
    }
    for (int64_t j = done; j < g->fplane; j++) pl[j] = 0.0f;
  }
}

void ganfw_cpu_conv2d_direct_backward(const ganfw_conv2d_shape *s, int32_t dt, const void *x,
                                      const float *w, const void *dy, void *dx, float *dw,
                                      int accumulate, const float *bdx, void *ws) {
  float *wb = ws, *area = wb + dk_weight_floats(s);
#if GANFW_CPU_ISA_MULTI
  if (ganfw_cpu_conv2d_direct_bf16(s, dt)) {
    if (dx) {
      const dk_geo g = dk_data_geo(s);
      dkb_pack_weights(s, &g, 1, w, (uint32_t *)ws);
      dkb_run(s, &g, dy, (const uint32_t *)ws, bdx, dx, area);
    }
    if (dw) dkb_filter(s, x, dy, dw, accumulate, area);
    return;
  }
#endif
  if (dx) {
    const dk_geo g = dk_data_geo(s);
    dk_pack_weights(s, &g, 1, w, wb);
    dk_run(s, &g, dt, dy, wb, bdx, dx, area);
  }
  if (!dw) return;
  const dk_fgeo g = dk_filter_geo(s);
  const dk_geo xg = dk_forward_geo(s);
  const int64_t per = g.cin * g.plane + g.cout * g.fplane,
                chunk = dk_chunk(s, per, DK_FILTER_BYTES);
  const int64_t blocks = g.cout / DK_KB, R = s->R, tasks = blocks * g.cin * R;
  const int64_t CHW = s->C * s->H * s->W, KPQ = s->K * s->P * s->Q, crs = s->C * R * s->S;
  const dk_filter_fn task = dk_filter_by_isa[ganfw_cpu_isa_level()];
  float *xpl = area, *dyf = area + chunk * g.cin * g.plane;
  for (int64_t n0 = 0; n0 < s->N; n0 += chunk) {
    const int64_t nb = s->N - n0 < chunk ? s->N - n0 : chunk;
    dk_pack(&xg, dt, ganfw_cpu_elem(dt, x, n0 * CHW), nb, xpl);
    dk_pack_dy(s, &g, dt, ganfw_cpu_elem(dt, dy, n0 * KPQ), nb, dyf);
    const int first = n0 == 0 && !accumulate;
    const int parallel = tasks > 1 && nb * s->K * crs * g.nv * DK_LANES >= DK_PARALLEL_MIN_MACS;
#pragma omp parallel for schedule(static) num_threads(ganfw_cpu_threads()) if (parallel)
    for (int64_t i = 0; i < tasks; i++) {
      const int64_t kb = i / (g.cin * R), c = i / R % g.cin, r = i % R;
      float part[DK_KB][DK_SMAX];
      task(&g, xpl, dyf, nb, kb * DK_KB, c, r, part);
      for (int64_t j = 0; j < DK_KB && kb * DK_KB + j < s->K; j++) {
        float *d = dw + (kb * DK_KB + j) * crs + (c * R + r) * s->S;
        for (int64_t q = 0; q < s->S; q++) d[q] = first ? part[j][q] : d[q] + part[j][q];
      }
    }
  }
}
