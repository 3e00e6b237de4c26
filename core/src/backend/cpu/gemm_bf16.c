/* Row-major GEMM on bf16 products for the CPU backend's bf16 mixed precision,
 * C[M,N] = op(A)[M,K] op(B)[K,N] + beta C, f32 in and out, operands rounded to bf16 while they
 * are packed, exact products summed in f32 (gemm_bf16.h). Two paths, chosen per call: AMX
 * tiles (TDPBF16PS, at the end of this file) where the CPU has AMX-BF16 and the OS grants the
 * tile data, else AVX-512 BF16 dot products (vdpbf16ps), described here.
 *
 * Blocking as in BLIS/GotoBLAS: for NC columns, for KC of K, pack op(B)[KC,NC]; for MC rows,
 * pack op(A)[MC,KC]; then the MR x NR micro-kernel over the block. Packed layout: a k-pair
 * (k even, k + 1) of one row or column is one 32-bit word, bf16 of k in the low half and of
 * k + 1 in the high half, which is how _mm512_dpbf16_ps pairs its operands
 * (dst.fp32[j] += a.bf16[2j+1] * b.bf16[2j+1] + a.bf16[2j] * b.bf16[2j]), and TDPBF16PS too.
 * A B panel is [KC/2][NR] words (one k-pair of NR = 32 columns is two zmm), an A panel
 * [KC/2][MR] words (each broadcast to a zmm). Odd K and ragged M and N edges are padded with
 * zeros in the packing, so the micro-kernel always runs a full tile and only masks its loads
 * and stores of C. The micro-kernel holds MR x 2 = 28 accumulators, two B registers and a
 * broadcast. */
#include "backend/cpu/gemm_bf16.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/isa.h"

#if GANFW_CPU_ISA_MULTI
#include <immintrin.h>

/* The register tile: MR rows of op(A) by NR columns of op(B) (two zmm of 16 f32). */
#define MR 14
#define NR 32
/* Cache blocks (Zen 4: 32 KiB L1D, 1 MiB L2 per core). A B micro-panel of KC = 256 is 16 KiB
 * (stays in L1 while the A block streams past it), an A block MC x KC 140 KiB (in L2), a B
 * block KC x NC 1 MiB. KC is even, so no k-pair straddles two K blocks. MC is a multiple of MR
 * and covers the common M = 256 in one block; NC is a multiple of NR. */
#define KC 256
#define MC (20 * MR)
#define NC 2048
_Static_assert(KC % 2 == 0 && MC % MR == 0 && NC % NR == 0, "blocks of whole k-pairs and tiles");

/* What the micro-kernel does with C: overwrite (first K block, beta 0: C is not read),
 * acc + beta C (first K block), acc + C (later K blocks). */
typedef enum c_mode { C_STORE, C_BETA, C_ADD } c_mode;

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* The first n (clamped to 0..16) lanes. */
static inline __mmask16 lanes16(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* Each lane's f32 rounded to bf16 (round to nearest even, as ganfw_f32_to_bf16_scalar), the
 * bf16 in the upper 16 bits (the lower ones are garbage). NaN: quiet bit set, payload kept. */
BF16_TARGET static inline __m512i bf16_round(__m512 x) {
  const __m512i f = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(f, 16), _mm512_set1_epi32(1));
  const __m512i rne = _mm512_add_epi32(f, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(f, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(rne, nan, f, _mm512_set1_epi32(0x00400000));
}

/* In-register transpose of a 16 x 16 matrix of 32-bit words: r[i] lane j -> r[j] lane i. */
BF16_TARGET static inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  /* r[4i + m], 128-bit lane l: word 4l + m of rows 4i .. 4i + 3 */
  for (int i = 0; i < 4; i++) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  /* a 4 x 4 transpose of 128-bit lanes among r[m], r[4 + m], r[8 + m], r[12 + m] */
  for (int m = 0; m < 4; m++) {
    const __m512i ab_lo = _mm512_shuffle_i32x4(r[m], r[4 + m], 0x44);
    const __m512i ab_hi = _mm512_shuffle_i32x4(r[m], r[4 + m], 0xee);
    const __m512i cd_lo = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0x44);
    const __m512i cd_hi = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0xee);
    t[m] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0x88);
    t[4 + m] = _mm512_shuffle_i32x4(ab_lo, cd_lo, 0xdd);
    t[8 + m] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0x88);
    t[12 + m] = _mm512_shuffle_i32x4(ab_hi, cd_hi, 0xdd);
  }
  for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* Packs kc values of k where consecutive k are ld apart and the n packed rows or columns are
 * adjacent (op(B) of an untransposed B, op(A) of a transposed A) into ceil(n / width) panels
 * of [rows][width] words (width <= 32, rows >= kp), a whole row pair of k at a time, so that
 * the source is read in order: panel q gets dst[(q rows + p) width + c] =
 * word(src[2p ld + q width + c], src[(2p + 1) ld + q width + c]), zero past n and in the
 * rows - kp rows after the k-pairs (the AMX path's padding to whole tiles). */
BF16_TARGET static void pack_k_strided(const float *src, int64_t ld, int64_t n, int width,
                                       int64_t kc, int64_t rows, uint32_t *dst) {
  const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
  const int64_t kp = (kc + 1) / 2;
  for (int64_t c = 0; c < n && rows > kp; c += width) {
    memset(dst + (c / width * rows + kp) * width, 0, (size_t)((rows - kp) * width) * 4);
  }
  for (int64_t p = 0; p < kp; p++) {
    const float *k0 = src + 2 * p * ld;
    const int have_k1 = 2 * p + 1 < kc;
    uint32_t *d = dst + p * width;
    for (int64_t c = 0; c < n; c += width, d += rows * width) {
      for (int g = 0; g < width; g += 16) {
        const __mmask16 load = lanes16(n - c - g), store = lanes16(width - g);
        __m512i w = _mm512_srli_epi32(bf16_round(_mm512_maskz_loadu_ps(load, k0 + c + g)), 16);
        if (have_k1) {
          const __m512i k1 = bf16_round(_mm512_maskz_loadu_ps(load, k0 + ld + c + g));
          w = _mm512_or_si512(w, _mm512_and_si512(k1, high));
        }
        _mm512_mask_storeu_epi32(d + g, store, w);
      }
    }
  }
}

/* Packs kc values of k where consecutive k are adjacent and the n <= width (<= 32) packed rows
 * or columns are ld apart (op(A) of an untransposed A, op(B) of a transposed B), 16 k-pairs
 * of 16 rows at a time through a register transpose: dst[p * width + r] =
 * word(src[r * ld + 2p], src[r * ld + 2p + 1]), zero for r >= n. */
BF16_TARGET static void pack_k_adjacent(const float *src, int64_t ld, int64_t n, int width,
                                        int64_t kc, uint32_t *dst) {
  /* the upper (bf16) halves of 32 rounded words: 16-bit elements 1, 3, ..., 63 of two zmm */
  const __m512i odd_halves =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const int64_t kp = (kc + 1) / 2;
  for (int64_t p0 = 0; p0 < kp; p0 += 16) {
    const __mmask16 k_lo = lanes16(kc - 2 * p0), k_hi = lanes16(kc - 2 * p0 - 16);
    const int64_t pairs = kp - p0 < 16 ? kp - p0 : 16;
    for (int g = 0; g < width; g += 16) {
      __m512i v[16];
      for (int r = 0; r < 16; r++) {
        if (g + r < n) {
          const float *s = src + (g + r) * ld + 2 * p0;
          /* the rows are ld apart (often a multiple of 4 KiB): fetch the chunk after next of
           * each, which the hardware prefetcher does not follow (a hint: never faults) */
          _mm_prefetch((const char *)((uintptr_t)s + 256), _MM_HINT_T0);
          _mm_prefetch((const char *)((uintptr_t)s + 320), _MM_HINT_T0);
          const __m512i lo = bf16_round(_mm512_maskz_loadu_ps(k_lo, s));
          const __m512i hi = bf16_round(_mm512_maskz_loadu_ps(k_hi, s + 16));
          v[r] = _mm512_permutex2var_epi16(lo, odd_halves, hi);
        } else {
          v[r] = _mm512_setzero_si512();
        }
      }
      transpose16(v);
      const __mmask16 store = lanes16(width - g);
      for (int64_t q = 0; q < pairs; q++) {
        _mm512_mask_storeu_epi32(dst + (p0 + q) * width + g, store, v[q]);
      }
    }
  }
}

/* op(A)[i0 : i0 + mc, k0 : k0 + kc] into ceil(mc / MR) panels of [kp][MR] words. */
BF16_TARGET static void pack_a(int trans_a, const float *A, int64_t lda, int64_t i0, int64_t mc,
                               int64_t k0, int64_t kc, uint32_t *dst) {
  const int64_t kp = (kc + 1) / 2;
  if (trans_a) {
    pack_k_strided(A + k0 * lda + i0, lda, mc, MR, kc, kp, dst);
    return;
  }
  for (int64_t i = 0; i < mc; i += MR, dst += kp * MR) {
    pack_k_adjacent(A + (i0 + i) * lda + k0, lda, mc - i < MR ? mc - i : MR, MR, kc, dst);
  }
}

/* op(B)[k0 : k0 + kc, j0 : j0 + nc] into ceil(nc / NR) panels of [rows][NR] words (rows >= kp,
 * zeros after the kp k-pairs). */
BF16_TARGET static void pack_b(int trans_b, const float *B, int64_t ldb, int64_t k0, int64_t kc,
                               int64_t j0, int64_t nc, int64_t rows, uint32_t *dst) {
  if (!trans_b) {
    pack_k_strided(B + k0 * ldb + j0, ldb, nc, NR, kc, rows, dst);
    return;
  }
  const int64_t kp = (kc + 1) / 2;
  for (int64_t j = 0; j < nc; j += NR, dst += rows * NR) {
    pack_k_adjacent(B + (j0 + j) * ldb + k0, ldb, nc - j < NR ? nc - j : NR, NR, kc, dst);
    memset(dst + kp * NR, 0, (size_t)((rows - kp) * NR) * 4);
  }
}

/* The MR x NR tile of C at c (mr <= MR rows and nr <= NR columns of it are real) from kp
 * k-pairs of an A panel a and a B panel b. */
BF16_TARGET static void micro_kernel(int64_t kp, const uint32_t *a, const uint32_t *b, float *c,
                                     int64_t ldc, int64_t mr, int64_t nr, c_mode mode, float beta) {
  __m512 acc[MR][2];
#pragma GCC unroll 14
  for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; p++, a += MR, b += NR) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + 16);
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32((int)a[r]);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
  }
  const __mmask16 m0 = lanes16(nr), m1 = lanes16(nr - 16);
  const __m512 vbeta = _mm512_set1_ps(beta);
#pragma GCC unroll 14
  for (int r = 0; r < MR; r++) {
    if (r >= mr) break;
    float *cr = c + r * ldc;
    __m512 c0 = acc[r][0], c1 = acc[r][1];
    if (mode == C_BETA) {
      c0 = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m0, cr), c0);
      c1 = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m1, cr + 16), c1);
    } else if (mode == C_ADD) {
      c0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cr), c0);
      c1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cr + 16), c1);
    }
    _mm512_mask_storeu_ps(cr, m0, c0);
    _mm512_mask_storeu_ps(cr + 16, m1, c1);
  }
}

/* --- per-thread scratch ---------------------------------------------------------------- */

typedef struct bf16_scratch {
  uint32_t *words; /* 64-byte aligned */
  size_t n;
} bf16_scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *p) {
  bf16_scratch *s = p;
  free(s->words);
  free(s);
}

static void scratch_key_create(void) {
  scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

/* The calling thread's buffer of at least n words, owned by the thread (freed when it exits)
 * and valid until its next call; NULL when it cannot be allocated. */
static uint32_t *scratch_words(size_t n) {
  pthread_once(&scratch_once, scratch_key_create);
  if (!scratch_key_ok) return NULL;
  bf16_scratch *s = pthread_getspecific(scratch_key);
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (pthread_setspecific(scratch_key, s) != 0) {
      free(s);
      return NULL;
    }
  }
  if (s->n < n) {
    free(s->words);
    const size_t bytes = (n * sizeof *s->words + 63) / 64 * 64;
    s->words = aligned_alloc(64, bytes);
    s->n = s->words ? n : 0;
  }
  return s->words;
}

static int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

BF16_TARGET static void gemm_bf16_blocked(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                                          const float *A, int64_t lda, const float *B, int64_t ldb,
                                          float beta, float *C, int64_t ldc) {
  const int64_t kc_max = K < KC ? round_up(K, 2) : KC;
  int64_t mc_max = M < MC ? round_up(M, MR) : MC;
  /* With one block of rows and a transposed B (a panel's 32 columns are 32 runs of k, read in
   * order), each B panel is packed just before the tiles that use it: it is still in L1 when
   * they run, and B needs no NC block. Otherwise a B block, packed a row pair at a time (an
   * untransposed B is read in order that way), serves every row block. The same sums in the
   * same order either way. */
  int b_by_panel = trans_b && M <= MC;
  int64_t nc_max = b_by_panel ? round_up(N, NR) : N < NC ? round_up(N, NR) : NC;
  _Alignas(64) uint32_t fallback[KC / 2 * (MR + NR)];
  const int64_t b_words = kc_max / 2 * (b_by_panel ? NR : nc_max);
  uint32_t *words = scratch_words((size_t)(b_words + kc_max / 2 * mc_max));
  uint32_t *pb = words, *pa = words + b_words;
  if (!words) { /* one tile at a time, repacking more often */
    pb = fallback;
    pa = fallback + KC / 2 * NR;
    mc_max = MR;
    nc_max = NR;
    b_by_panel = trans_b && M <= MR;
  }
  for (int64_t jc = 0; jc < N; jc += nc_max) {
    const int64_t nc = N - jc < nc_max ? N - jc : nc_max;
    for (int64_t pc = 0; pc < K; pc += kc_max) {
      const int64_t kc = K - pc < kc_max ? K - pc : kc_max, kp = (kc + 1) / 2;
      const c_mode mode = pc > 0 ? C_ADD : beta == 0.0f ? C_STORE : C_BETA;
      if (!b_by_panel) pack_b(trans_b, B, ldb, pc, kc, jc, nc, kp, pb);
      for (int64_t ic = 0; ic < M; ic += mc_max) {
        const int64_t mc = M - ic < mc_max ? M - ic : mc_max;
        pack_a(trans_a, A, lda, ic, mc, pc, kc, pa);
        for (int64_t j = 0; j < nc; j += NR) {
          const uint32_t *b = pb + j / NR * kp * NR;
          if (b_by_panel) {
            pack_b(trans_b, B, ldb, pc, kc, jc + j, nc - j < NR ? nc - j : NR, kp, pb);
            b = pb;
          }
          for (int64_t i = 0; i < mc; i += MR) {
            micro_kernel(kp, pa + i / MR * kp * MR, b, C + (ic + i) * ldc + jc + j, ldc, mc - i,
                         nc - j, mode, beta);
          }
        }
      }
    }
  }
}

/* --- AMX tiles ----------------------------------------------------------------------------
 * Where the CPU has AMX-BF16 (ganfw_cpu_use_amx, isa.h) one TDPBF16PS multiplies a 16 x 32
 * bf16 tile of A by a 32 x 16 one of B into a 16 x 16 f32 tile of C: 8192 multiply-adds, 16
 * times vdpbf16ps's. Each tile row is 64 bytes: A's rows are 16 k-pair words of one row of
 * op(A), B's rows 16 columns of one k-pair (the words of the B panels above, so pack_b
 * serves both paths), C's rows 16 f32. The register tile is 2 x 2 C tiles (AMX_MR = AMX_NR =
 * 32 = NR) from 2 A and 2 B tiles, the eight tile registers:
 *   tmm0 C[0:16, 0:16]  tmm1 C[0:16, 16:32]  tmm2 C[16:32, 0:16]  tmm3 C[16:32, 16:32]
 *   tmm4 A rows 0:16    tmm5 A rows 16:32    tmm6 B cols 0:16     tmm7 B cols 16:32
 * An A panel is [kp / 16][AMX_MR][16] words (a step's two A tiles are 2 KiB in a row), a B
 * panel [kp][NR] words read as two tiles of 128-byte rows, kp rounded up to whole steps of
 * 16 k-pairs with zero words. Full register tiles load C into the accumulators when they add
 * to it and store them straight to C; ragged ones go through a 32 x 32 scratch copy.
 * The tile configuration (all eight tiles 16 rows of 64 bytes, palette 1) is loaded at the
 * start of each product on the calling thread and released at its end (TILERELEASE), so a
 * thread holds tile state only while it multiplies: the kernel saves 8 KiB less at each
 * context switch of a thread that is not multiplying, and the configuration costs a few
 * hundred cycles against the product's hundreds of thousands. */
#define AMX_MR 32
#define AMX_NR NR
/* K block: 16 tile steps (32 k each); a B panel is 32 KiB (in the 48 KiB L1D of Sapphire
 * Rapids), an A block AMX_MC x AMX_KC 256 KiB (in its 2 MiB L2). Only AMX_KC decides the
 * order of the sums (the K blocks add into C one after another); AMX_MC and NC only how
 * often the operands are packed. */
#define AMX_KC      512
#define AMX_MC      (8 * AMX_MR)
#define AMX_STEP_KP 16 /* k-pairs per tile step: a tile row of 64 bytes */
_Static_assert(AMX_KC % (2 * AMX_STEP_KP) == 0 && AMX_MC % AMX_MR == 0 && AMX_NR == 32,
               "AMX blocks of whole tile steps and register tiles");

#define AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

/* GCC's tile intrinsics are asm statements that do not tell the compiler which memory they
 * read (_tile_loadconfig names 8 of its 64 bytes, _tile_loadd none), so the stores they
 * depend on (packing, the scratch copy of C, the configuration) are fenced off with this
 * compiler barrier before them; _tile_stored clobbers memory itself. */
#define AMX_COMPILER_BARRIER() __asm__ volatile("" ::: "memory")

/* LDTILECFG's 64-byte operand, palette 1. */
typedef struct amx_tilecfg {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16]; /* bytes per row of tmm0 .. tmm7 (the rest 0) */
  uint8_t rows[16];
} amx_tilecfg;
_Static_assert(sizeof(amx_tilecfg) == 64, "LDTILECFG reads 64 bytes");

AMX_TARGET static void amx_configure(void) {
  _Alignas(64) amx_tilecfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  AMX_COMPILER_BARRIER();
  _tile_loadconfig(&cfg);
}

/* op(A)[i0 : i0 + mc, k0 : k0 + kc] into ceil(mc / AMX_MR) panels of [steps][AMX_MR][16]
 * words, steps = ceil(kp / 16): word (s, r, q) = the k-pair 16 s + q of row r, zero past mc
 * and past kp. The source is read in order, each store a whole line. Untransposed A: a row at
 * a time, 32 k (one step) to one store. Transposed A: a step (32 rows of k) at a time, 16
 * k-pairs of 16 rows through a register transpose, as pack_k_adjacent the other way round. */
AMX_TARGET static void pack_a_amx(int trans_a, const float *A, int64_t lda, int64_t i0, int64_t mc,
                                  int64_t k0, int64_t kc, uint32_t *dst) {
  const int64_t kp = (kc + 1) / 2, steps = (kp + AMX_STEP_KP - 1) / AMX_STEP_KP;
  const int64_t panel_words = steps * AMX_MR * AMX_STEP_KP, step_words = AMX_MR * AMX_STEP_KP;
  const int64_t rows = (mc + AMX_MR - 1) / AMX_MR * AMX_MR; /* with the zero rows */
  if (!trans_a) {
    const __m512i odd_halves =
        _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                         25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int64_t i = 0; i < rows; i++) {
      uint32_t *d = dst + i / AMX_MR * panel_words + i % AMX_MR * AMX_STEP_KP;
      if (i >= mc) {
        for (int64_t s = 0; s < steps; s++)
          _mm512_store_si512(d + s * step_words, _mm512_setzero_si512());
        continue;
      }
      const float *src = A + (i0 + i) * lda + k0;
      for (int64_t s = 0; s < steps; s++, d += step_words) {
        const int64_t kleft = kc - 2 * AMX_STEP_KP * s;
        const float *sk = src + 2 * AMX_STEP_KP * s;
        const __m512i lo = bf16_round(_mm512_maskz_loadu_ps(lanes16(kleft), sk));
        const __m512i hi = bf16_round(_mm512_maskz_loadu_ps(lanes16(kleft - 16), sk + 16));
        _mm512_store_si512(d, _mm512_permutex2var_epi16(lo, odd_halves, hi));
      }
    }
    return;
  }
  const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
  for (int64_t s = 0; s < steps; s++) {
    const int64_t kleft = kc - 2 * AMX_STEP_KP * s; /* k of this step and after */
    const float *src = A + (k0 + 2 * AMX_STEP_KP * s) * lda + i0;
    for (int64_t g = 0; g < rows; g += 16) {
      const __mmask16 m = lanes16(mc - g);
      __m512i v[16];
      for (int64_t p = 0; p < 16; p++) {
        v[p] = _mm512_setzero_si512();
        if (2 * p >= kleft || m == 0) continue;
        const float *k0row = src + 2 * p * lda + g;
        v[p] = _mm512_srli_epi32(bf16_round(_mm512_maskz_loadu_ps(m, k0row)), 16);
        if (2 * p + 1 < kleft) {
          const __m512i k1 = bf16_round(_mm512_maskz_loadu_ps(m, k0row + lda));
          v[p] = _mm512_or_si512(v[p], _mm512_and_si512(k1, high));
        }
      }
      transpose16(v);
      uint32_t *d = dst + g / AMX_MR * panel_words + s * step_words + g % AMX_MR * AMX_STEP_KP;
      for (int64_t r = 0; r < 16; r++) _mm512_store_si512(d + r * AMX_STEP_KP, v[r]);
    }
  }
}

/* pack_a_amx for an op(A) held in bf16 (A16, lda in elements): the same words without the
 * rounding, from half the bytes. Untransposed, a step of a row is 32 adjacent bf16: one
 * 64-byte load is its 16 k-pair words. Transposed, a k-pair of 16 rows is two rows of 16 bf16
 * interleaved, then the register transpose. */
AMX_TARGET static void pack_a16_amx(int trans_a, const uint16_t *A, int64_t lda, int64_t i0,
                                    int64_t mc, int64_t k0, int64_t kc, uint32_t *dst) {
  const int64_t kp = (kc + 1) / 2, steps = (kp + AMX_STEP_KP - 1) / AMX_STEP_KP;
  const int64_t panel_words = steps * AMX_MR * AMX_STEP_KP, step_words = AMX_MR * AMX_STEP_KP;
  const int64_t rows = (mc + AMX_MR - 1) / AMX_MR * AMX_MR;
  if (!trans_a) {
    for (int64_t i = 0; i < rows; i++) {
      uint32_t *d = dst + i / AMX_MR * panel_words + i % AMX_MR * AMX_STEP_KP;
      if (i >= mc) {
        for (int64_t s = 0; s < steps; s++) {
          _mm512_store_si512(d + s * step_words, _mm512_setzero_si512());
        }
        continue;
      }
      const uint16_t *src = A + (i0 + i) * lda + k0;
      for (int64_t s = 0; s < steps; s++, d += step_words) {
        const int64_t kleft = kc - 2 * AMX_STEP_KP * s;
        const __mmask32 m = kleft >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << kleft) - 1u);
        _mm512_store_si512(d, _mm512_maskz_loadu_epi16(m, src + 2 * AMX_STEP_KP * s));
      }
    }
    return;
  }
  for (int64_t s = 0; s < steps; s++) {
    const int64_t kleft = kc - 2 * AMX_STEP_KP * s;
    const uint16_t *src = A + (k0 + 2 * AMX_STEP_KP * s) * lda + i0;
    for (int64_t g = 0; g < rows; g += 16) {
      const __mmask16 m = lanes16(mc - g);
      __m512i v[16];
      for (int64_t p = 0; p < 16; p++) {
        v[p] = _mm512_setzero_si512();
        if (2 * p >= kleft || m == 0) continue;
        const uint16_t *k0row = src + 2 * p * lda + g;
        v[p] = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, k0row));
        if (2 * p + 1 < kleft) {
          const __m512i k1 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, k0row + lda));
          v[p] = _mm512_or_si512(v[p], _mm512_slli_epi32(k1, 16));
        }
      }
      transpose16(v);
      uint32_t *d = dst + g / AMX_MR * panel_words + s * step_words + g % AMX_MR * AMX_STEP_KP;
      for (int64_t r = 0; r < 16; r++) _mm512_store_si512(d + r * AMX_STEP_KP, v[r]);
    }
  }
}

/* The rows x cols corner of a 32 x 32 block between C (ldc) and the scratch copy t (ld 32):
 * into t (zeros around it) or back out of it. */
AMX_TARGET static void amx_edge_in(float *t, const float *c, int64_t ldc, int64_t rows,
                                   int64_t cols) {
  const __mmask16 m0 = lanes16(cols), m1 = lanes16(cols - 16);
  for (int64_t r = 0; r < AMX_MR; r++) {
    __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
    if (r < rows) {
      lo = _mm512_maskz_loadu_ps(m0, c + r * ldc);
      hi = _mm512_maskz_loadu_ps(m1, c + r * ldc + 16);
    }
    _mm512_store_ps(t + r * AMX_NR, lo);
    _mm512_store_ps(t + r * AMX_NR + 16, hi);
  }
}

AMX_TARGET static void amx_edge_out(const float *t, float *c, int64_t ldc, int64_t rows,
                                    int64_t cols) {
  const __mmask16 m0 = lanes16(cols), m1 = lanes16(cols - 16);
  for (int64_t r = 0; r < rows; r++) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, _mm512_load_ps(t + r * AMX_NR));
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, _mm512_load_ps(t + r * AMX_NR + 16));
  }
}

/* The AMX_MR x AMX_NR tile of C at c (mr rows and nr columns of it real) from `steps` tile
 * steps of an A panel a and a B panel b. two_rows = 0 when mr <= 16: the lower half of the
 * tile is not computed (the upper is the same sums either way). */
AMX_TARGET static inline __attribute__((always_inline)) void
amx_tile(int two_rows, int64_t steps, const uint32_t *a, const uint32_t *b, float *c, int64_t ldc,
         int64_t mr, int64_t nr, c_mode mode, float beta) {
  _Alignas(64) float edge[AMX_MR * AMX_NR];
  const int full = mr >= AMX_MR && nr >= AMX_NR;
  const int add = mode == C_ADD || (mode == C_BETA && beta == 1.0f);
  float *t = full ? c : edge;
  const int64_t ldt = full ? ldc : AMX_NR, stride = ldt * (int64_t)sizeof(float);
  if (add && !full) amx_edge_in(edge, c, ldc, mr, nr);
  AMX_COMPILER_BARRIER();
  if (add) {
    _tile_loadd(0, t, stride);
    _tile_loadd(1, t + 16, stride);
    if (two_rows) {
      _tile_loadd(2, t + 16 * ldt, stride);
      _tile_loadd(3, t + 16 * ldt + 16, stride);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    if (two_rows) {
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  for (int64_t s = 0; s < steps; s++) {
    const uint32_t *as = a + s * AMX_MR * AMX_STEP_KP, *bs = b + s * AMX_STEP_KP * AMX_NR;
    _tile_loadd(4, as, AMX_STEP_KP * 4);
    _tile_loadd(6, bs, AMX_NR * 4);
    _tile_loadd(7, bs + 16, AMX_NR * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (two_rows) {
      _tile_loadd(5, as + 16 * AMX_STEP_KP, AMX_STEP_KP * 4);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  /* beta other than 0 and 1: the sums go to the scratch copy, then C = sum + beta C */
  const int scale = mode == C_BETA && !add;
  if (scale) {
    t = edge;
  }
  const int64_t ldo = scale ? AMX_NR : ldt, so = ldo * (int64_t)sizeof(float);
  _tile_stored(0, t, so);
  _tile_stored(1, t + 16, so);
  if (two_rows) {
    _tile_stored(2, t + 16 * ldo, so);
    _tile_stored(3, t + 16 * ldo + 16, so);
  }
  if (scale) {
    const __mmask16 m0 = lanes16(nr), m1 = lanes16(nr - 16);
    const __m512 vbeta = _mm512_set1_ps(beta);
    for (int64_t r = 0; r < mr && r < AMX_MR; r++) {
      float *cr = c + r * ldc;
      const float *er = edge + r * AMX_NR;
      _mm512_mask_storeu_ps(
          cr, m0, _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m0, cr), _mm512_load_ps(er)));
      _mm512_mask_storeu_ps(
          cr + 16, m1,
          _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m1, cr + 16), _mm512_load_ps(er + 16)));
    }
  } else if (!full) {
    amx_edge_out(edge, c, ldc, mr < AMX_MR ? mr : AMX_MR, nr);
  }
}

AMX_TARGET static void amx_tile_32(int64_t steps, const uint32_t *a, const uint32_t *b, float *c,
                                   int64_t ldc, int64_t mr, int64_t nr, c_mode mode, float beta) {
  amx_tile(1, steps, a, b, c, ldc, mr, nr, mode, beta);
}

AMX_TARGET static void amx_tile_16(int64_t steps, const uint32_t *a, const uint32_t *b, float *c,
                                   int64_t ldc, int64_t mr, int64_t nr, c_mode mode, float beta) {
  amx_tile(0, steps, a, b, c, ldc, mr, nr, mode, beta);
}

/* The blocked product on AMX tiles: the loops of gemm_bf16_blocked with the AMX blocks. op(A)
 * is A (f32) or, where A is NULL, A16 (bf16). */
AMX_TARGET static void gemm_bf16_amx(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                                     const float *A, const uint16_t *A16, int64_t lda,
                                     const float *B, int64_t ldb, float beta, float *C,
                                     int64_t ldc) {
  const int64_t kc_max = K < AMX_KC ? round_up(K, 2) : AMX_KC;
  const int64_t rows_max = round_up(kc_max / 2, AMX_STEP_KP); /* k-pair rows of a panel */
  int64_t mc_max = M < AMX_MC ? round_up(M, AMX_MR) : AMX_MC;
  int b_by_panel = trans_b && M <= AMX_MC;
  int64_t nc_max = b_by_panel ? round_up(N, AMX_NR) : N < NC ? round_up(N, AMX_NR) : NC;
  const int64_t b_words = rows_max * (b_by_panel ? AMX_NR : nc_max);
  uint32_t *words = scratch_words((size_t)(b_words + rows_max * mc_max));
  uint32_t *pb = words, *pa = words + b_words;
  _Alignas(64) uint32_t fallback[AMX_KC / 2 * (AMX_MR + AMX_NR)];
  if (!words) { /* one register tile at a time, repacking more often: the same sums */
    pb = fallback;
    pa = fallback + AMX_KC / 2 * AMX_NR;
    mc_max = AMX_MR;
    nc_max = AMX_NR;
    b_by_panel = trans_b && M <= AMX_MR;
  }
  amx_configure();
  for (int64_t jc = 0; jc < N; jc += nc_max) {
    const int64_t nc = N - jc < nc_max ? N - jc : nc_max;
    for (int64_t pc = 0; pc < K; pc += kc_max) {
      const int64_t kc = K - pc < kc_max ? K - pc : kc_max;
      const int64_t rows = round_up((kc + 1) / 2, AMX_STEP_KP), steps = rows / AMX_STEP_KP;
      const c_mode mode = pc > 0 ? C_ADD : beta == 0.0f ? C_STORE : C_BETA;
      if (!b_by_panel) pack_b(trans_b, B, ldb, pc, kc, jc, nc, rows, pb);
      for (int64_t ic = 0; ic < M; ic += mc_max) {
        const int64_t mc = M - ic < mc_max ? M - ic : mc_max;
        if (A) {
          pack_a_amx(trans_a, A, lda, ic, mc, pc, kc, pa);
        } else {
          pack_a16_amx(trans_a, A16, lda, ic, mc, pc, kc, pa);
        }
        for (int64_t j = 0; j < nc; j += AMX_NR) {
          const uint32_t *b = pb + j / AMX_NR * rows * AMX_NR;
          if (b_by_panel) {
            pack_b(trans_b, B, ldb, pc, kc, jc + j, nc - j < AMX_NR ? nc - j : AMX_NR, rows, pb);
            b = pb;
          }
          for (int64_t i = 0; i < mc; i += AMX_MR) {
            const uint32_t *a = pa + i / AMX_MR * rows * AMX_MR;
            float *c = C + (ic + i) * ldc + jc + j;
            if (mc - i > 16) {
              amx_tile_32(steps, a, b, c, ldc, mc - i, nc - j, mode, beta);
            } else {
              amx_tile_16(steps, a, b, c, ldc, mc - i, nc - j, mode, beta);
            }
          }
        }
      }
    }
  }
  _tile_release();
}
#endif /* GANFW_CPU_ISA_MULTI */

int ganfw_cpu_have_bf16_dot(void) {
#if GANFW_CPU_ISA_MULTI
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && ganfw_cpu_isa_level() >= GANFW_CPU_ISA_AVX512;
#else
  return 0;
#endif
}

int ganfw_cpu_gemm_bf16_amx(void) {
  return ganfw_cpu_have_bf16_dot() && ganfw_cpu_use_amx();
}

void ganfw_cpu_gemm_bf16(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                         int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    ganfw_cpu_gemm_scale_only(M, N, beta, C, ldc);
    return;
  }
#if GANFW_CPU_ISA_MULTI
  if (ganfw_cpu_gemm_bf16_amx()) {
    gemm_bf16_amx(trans_a, trans_b, M, N, K, A, NULL, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (ganfw_cpu_have_bf16_dot()) {
    gemm_bf16_blocked(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#endif
  fprintf(stderr, "ganfw_cpu_gemm_bf16: called where ganfw_cpu_have_bf16_dot() is 0 (no "
                  "AVX-512 BF16 at the SIMD level in use); check it before calling\n");
  abort();
}

void ganfw_cpu_gemm_bf16_a16(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                             const uint16_t *A, int64_t lda, const float *B, int64_t ldb,
                             float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    ganfw_cpu_gemm_scale_only(M, N, beta, C, ldc);
    return;
  }
#if GANFW_CPU_ISA_MULTI
  if (ganfw_cpu_gemm_bf16_amx()) {
    gemm_bf16_amx(trans_a, trans_b, M, N, K, NULL, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#endif
  fprintf(stderr, "ganfw_cpu_gemm_bf16_a16: called where ganfw_cpu_gemm_bf16_amx() is 0 (no AMX "
                  "tiles in use); check it before calling\n");
  abort();
}
