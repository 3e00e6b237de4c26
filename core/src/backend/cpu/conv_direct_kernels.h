/* The vector kernels of conv_direct.c, compiled once per SIMD level by isa_each.h. No
 * include guard: included once per level. Each name below becomes that level's
 * (GANFW_ISA: dk_x -> dk_x_portable, dk_x_avx2, dk_x_avx512).
 *
 * Every output element is one lane of one accumulator, summed with fused multiply-adds in
 * the same order at every level (over the input channels, then the kernel's rows and
 * columns; a weight gradient over the images, then the planes' vectors, then the lanes),
 * so the levels differ only in how many accumulators they keep in registers: the bits are
 * the same (tests/test_conv_direct.c). */
#define dk_fma         GANFW_ISA(dk_fma)
#define dk_tile_8_1    GANFW_ISA(dk_tile_8_1)
#define dk_tile_8_2    GANFW_ISA(dk_tile_8_2)
#define dk_tile_8_3    GANFW_ISA(dk_tile_8_3)
#define dk_tile_4_1    GANFW_ISA(dk_tile_4_1)
#define dk_tile_1_1    GANFW_ISA(dk_tile_1_1)
#define dk_block       GANFW_ISA(dk_block)
#define dk_task        GANFW_ISA(dk_task)
#define dk_ftile3_8    GANFW_ISA(dk_ftile3_8)
#define dk_ftile3_4    GANFW_ISA(dk_ftile3_4)
#define dk_ftile_2_3   GANFW_ISA(dk_ftile_2_3)
#define dk_ftile_8_1   GANFW_ISA(dk_ftile_8_1)
#define dk_ftile_2_1   GANFW_ISA(dk_ftile_2_1)
#define dk_filter_task GANFW_ISA(dk_filter_task)

/* *acc = a * b + *acc, rounded once, lane by lane (through pointers: vectors of 64 bytes
 * passed by value change the ABI below AVX-512). */
static inline __attribute__((always_inline)) void dk_fma(dk_v *acc, const dk_v *a, const dk_v *b) {
#if defined(__AVX512F__)
  *acc = (dk_v)_mm512_fmadd_ps((__m512)*a, (__m512)*b, (__m512)*acc);
#elif defined(__FMA__)
  const float *pa = (const float *)a, *pb = (const float *)b;
  float *pc = (float *)acc;
  _mm256_storeu_ps(pc,
                   _mm256_fmadd_ps(_mm256_loadu_ps(pa), _mm256_loadu_ps(pb), _mm256_loadu_ps(pc)));
  _mm256_storeu_ps(pc + 8, _mm256_fmadd_ps(_mm256_loadu_ps(pa + 8), _mm256_loadu_ps(pb + 8),
                                           _mm256_loadu_ps(pc + 8)));
#else
  for (int l = 0; l < DK_LANES; l++) (*acc)[l] = fmaf((*a)[l], (*b)[l], (*acc)[l]);
#endif
}

/* out[k*ostride + v*16 + lane], k < KN, v < VB: the sum over the cin input channels and the
 * nrs kernel taps of wb[(c*nrs + t)*8 + k] * in[c*plane + off[t] + v*16 + lane]. */
#define DK_TILE(KN, VB)                                                                            \
  static void dk_tile_##KN##_##VB(const float *in, int64_t plane, int64_t cin, const int64_t *off, \
                                  int64_t nrs, const float *wb, float *out, int64_t ostride) {     \
    dk_v acc[KN][VB];                                                                              \
    DK_UNROLL for (int k = 0; k < KN; k++) DK_UNROLL for (int v = 0; v < VB; v++) acc[k][v] =      \
        (dk_v){0};                                                                                 \
    for (int64_t c = 0; c < cin; c++) {                                                            \
      const float *ic = in + c * plane, *wc = wb + c * nrs * DK_KB;                                \
      for (int64_t t = 0; t < nrs; t++) {                                                          \
        const float *src = ic + off[t], *wt = wc + t * DK_KB;                                      \
        dk_v xv[VB];                                                                               \
        DK_UNROLL for (int v = 0; v < VB; v++) memcpy(&xv[v], src + v * DK_LANES, sizeof xv[v]);   \
        DK_UNROLL for (int k = 0; k < KN; k++) {                                                   \
          const dk_v wk = (dk_v){0} + wt[k];                                                       \
          DK_UNROLL for (int v = 0; v < VB; v++) dk_fma(&acc[k][v], &wk, &xv[v]);                  \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    DK_UNROLL for (int k = 0; k < KN; k++) DK_UNROLL for (int v = 0; v < VB; v++)                  \
        memcpy(out + k * ostride + v * DK_LANES, &acc[k][v], sizeof acc[k][v]);                    \
  }
#if defined(__AVX512F__)
DK_TILE(8, 1)
DK_TILE(8, 2)
DK_TILE(8, 3)
#elif defined(__AVX2__)
/* AVX2: dk_tile for 4 output channels and one 16-lane vector as two registers of 8 (the
 * generic tile's 64-byte vectors compile to stack traffic at this level). */
static void dk_tile_4_1(const float *in, int64_t plane, int64_t cin, const int64_t *off,
                        int64_t nrs, const float *wb, float *out, int64_t ostride) {
  __m256 acc[4][2];
  DK_UNROLL for (int k = 0; k < 4; k++) acc[k][0] = acc[k][1] = _mm256_setzero_ps();
  for (int64_t c = 0; c < cin; c++) {
    const float *ic = in + c * plane, *wc = wb + c * nrs * DK_KB;
    for (int64_t t = 0; t < nrs; t++) {
      const float *src = ic + off[t], *wt = wc + t * DK_KB;
      const __m256 x0 = _mm256_loadu_ps(src), x1 = _mm256_loadu_ps(src + 8);
      DK_UNROLL for (int k = 0; k < 4; k++) {
        const __m256 wk = _mm256_broadcast_ss(wt + k);
        acc[k][0] = _mm256_fmadd_ps(wk, x0, acc[k][0]);
        acc[k][1] = _mm256_fmadd_ps(wk, x1, acc[k][1]);
      }
    }
  }
  DK_UNROLL for (int k = 0; k < 4; k++) {
    _mm256_storeu_ps(out + k * ostride, acc[k][0]);
    _mm256_storeu_ps(out + k * ostride + 8, acc[k][1]);
  }
}
#else
DK_TILE(1, 1)
#endif
#undef DK_TILE

/* out[k*ostride + 0 .. vb*16) for the 8 channels of a block, vb <= DK_VB vectors from `in`
 * (cin channels `plane` floats apart, nrs taps at off[]). */
static void dk_block(const float *in, int64_t plane, int64_t cin, const int64_t *off, int64_t nrs,
                     const float *wb, int64_t vb, float *out, int64_t ostride) {
#if defined(__AVX512F__)
  switch (vb) {
  case 1:
    dk_tile_8_1(in, plane, cin, off, nrs, wb, out, ostride);
    break;
  case 2:
    dk_tile_8_2(in, plane, cin, off, nrs, wb, out, ostride);
    break;
  default:
    dk_tile_8_3(in, plane, cin, off, nrs, wb, out, ostride);
    break;
  }
#elif defined(__AVX2__)
  for (int64_t v = 0; v < vb; v++)
    for (int k = 0; k < DK_KB; k += 4)
      dk_tile_4_1(in + v * DK_LANES, plane, cin, off, nrs, wb + k, out + k * ostride + v * DK_LANES,
                  ostride);
#else
  for (int64_t v = 0; v < vb; v++)
    for (int k = 0; k < DK_KB; k++)
      dk_tile_1_1(in + v * DK_LANES, plane, cin, off, nrs, wb + k, out + k * ostride + v * DK_LANES,
                  ostride);
#endif
}

/* Output channels [k0, k0 + 8) ∩ [0, cout) of one image: out [cout][ho][wo] in dtype dt
 * (+ bias[k] when bias is not NULL, added before the rounding) from the image's padded
 * planes `in` and the block's packed weights wb. */
static void dk_task(const dk_geo *g, const float *in, const float *wb, int64_t k0,
                    const float *bias, int32_t dt, void *out) {
  float tmp[DK_KB * DK_ROW] __attribute__((aligned(64)));
  for (int64_t v0 = 0; v0 < g->nv; v0 += DK_VB) {
    const int64_t vb = g->nv - v0 < DK_VB ? g->nv - v0 : DK_VB;
    dk_block(in + v0 * DK_LANES, g->plane, g->cin, g->off, g->nrs, wb, vb, tmp, DK_ROW);
    dk_store(g, tmp, v0, vb, k0, bias, dt, out);
  }
}

/* part[k][s] = sum over the nb images, the nv vectors and then the lanes of
 * dy[n][k0 + k][f] * x[n][c][r*wp + s0 + s + f], k < KN, s < SS, for one (c, r): dy flat
 * in rows of pitch wp with zeros outside the output (fplane floats per channel), x the
 * padded planes (plane floats per channel). Accumulators go to acc[k][s] as 16 lanes. */
#define DK_FTILE(KN, SS)                                                                           \
  static void dk_ftile_##KN##_##SS(const dk_fgeo *g, const float *xpl, const float *dyf,           \
                                   int64_t nb, int64_t k0, int64_t c, int64_t r, int64_t s0,       \
                                   dk_v out[][DK_SMAX]) {                                          \
    dk_v acc[KN][SS];                                                                              \
    DK_UNROLL for (int k = 0; k < KN; k++) DK_UNROLL for (int s = 0; s < SS; s++) acc[k][s] =      \
        (dk_v){0};                                                                                 \
    for (int64_t n = 0; n < nb; n++) {                                                             \
      const float *xr = xpl + (n * g->cin + c) * g->plane + r * g->wp + s0;                        \
      const float *dk = dyf + (n * g->cout + k0) * g->fplane;                                      \
      for (int64_t v = 0; v < g->nv; v++) {                                                        \
        dk_v xv[SS];                                                                               \
        DK_UNROLL for (int s = 0; s < SS; s++)                                                     \
            memcpy(&xv[s], xr + s + v * DK_LANES, sizeof xv[s]);                                   \
        DK_UNROLL for (int k = 0; k < KN; k++) {                                                   \
          dk_v d;                                                                                  \
          memcpy(&d, dk + k * g->fplane + v * DK_LANES, sizeof d);                                 \
          DK_UNROLL for (int s = 0; s < SS; s++) dk_fma(&acc[k][s], &d, &xv[s]);                   \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    DK_UNROLL for (int k = 0; k < KN; k++) DK_UNROLL for (int s = 0; s < SS; s++) out[k][s0 + s] = \
        acc[k][s];                                                                                 \
  }
#if defined(__AVX512F__)
DK_FTILE(8, 1)
#elif defined(__AVX2__)
DK_FTILE(2, 1)
#else
DK_FTILE(2, 3)
DK_FTILE(2, 1)
#endif
#undef DK_FTILE

#if defined(__AVX512F__)
/* dk_ftile for 8 output channels and S = 3 with AVX-512: each x vector is loaded once and
 * shifted by one and two lanes against the next (valignd), each dy vector loaded once for
 * its three taps: 1 + 8 loads per 24 multiply-adds, where the generic tile's compiled code
 * loads 27 and runs out of the L2 cache's bandwidth. The same sums in the same order. */
static void dk_ftile3_8(const dk_fgeo *g, const float *xpl, const float *dyf, int64_t nb,
                        int64_t k0, int64_t c, int64_t r, dk_v out[][DK_SMAX]) {
  __m512 acc[8][3];
  DK_UNROLL for (int k = 0; k < 8; k++) DK_UNROLL for (int s = 0; s < 3; s++) acc[k][s] =
      _mm512_setzero_ps();
  for (int64_t n = 0; n < nb; n++) {
    const float *xr = xpl + (n * g->cin + c) * g->plane + r * g->wp;
    const float *dk = dyf + (n * g->cout + k0) * g->fplane;
    __m512 x0 = _mm512_loadu_ps(xr);
    for (int64_t v = 0; v < g->nv; v++) {
      const __m512 x1 = _mm512_loadu_ps(xr + (v + 1) * DK_LANES);
      const __m512i a = _mm512_castps_si512(x0), b = _mm512_castps_si512(x1);
      const __m512 x_1 = _mm512_castsi512_ps(_mm512_alignr_epi32(b, a, 1));
      const __m512 x_2 = _mm512_castsi512_ps(_mm512_alignr_epi32(b, a, 2));
      DK_UNROLL for (int k = 0; k < 8; k++) {
        __m512 d = _mm512_loadu_ps(dk + k * g->fplane + v * DK_LANES);
        __asm__("" : "+v"(d)); /* one load into a register, not one per use */
        acc[k][0] = _mm512_fmadd_ps(d, x0, acc[k][0]);
        acc[k][1] = _mm512_fmadd_ps(d, x_1, acc[k][1]);
        acc[k][2] = _mm512_fmadd_ps(d, x_2, acc[k][2]);
      }
      x0 = x1;
    }
  }
  DK_UNROLL for (int k = 0; k < 8; k++) DK_UNROLL for (int s = 0; s < 3; s++)
      memcpy(&out[k][s], &acc[k][s], sizeof out[k][s]);
}
#endif

#if defined(__AVX2__) && !defined(__AVX512F__)
/* AVX2: dk_ftile for 4 output channels and S = 3, a 16-lane vector as two halves of 8
 * lanes, each over all images and vectors (12 accumulators, 3 + 4 loads per 12
 * multiply-adds); every lane sums what the generic tile's does, in the same order. */
static void dk_ftile3_4(const dk_fgeo *g, const float *xpl, const float *dyf, int64_t nb,
                        int64_t k0, int64_t c, int64_t r, dk_v out[][DK_SMAX]) {
  for (int half = 0; half < 2; half++) {
    __m256 acc[4][3];
    DK_UNROLL for (int k = 0; k < 4; k++) DK_UNROLL for (int s = 0; s < 3; s++) acc[k][s] =
        _mm256_setzero_ps();
    for (int64_t n = 0; n < nb; n++) {
      const float *xr = xpl + (n * g->cin + c) * g->plane + r * g->wp + 8 * half;
      const float *dk = dyf + (n * g->cout + k0) * g->fplane + 8 * half;
      for (int64_t v = 0; v < g->nv; v++) {
        const float *xv = xr + v * DK_LANES;
        const __m256 x0 = _mm256_loadu_ps(xv), x1 = _mm256_loadu_ps(xv + 1);
        const __m256 x2 = _mm256_loadu_ps(xv + 2);
        DK_UNROLL for (int k = 0; k < 4; k++) {
          const __m256 d = _mm256_loadu_ps(dk + k * g->fplane + v * DK_LANES);
          acc[k][0] = _mm256_fmadd_ps(d, x0, acc[k][0]);
          acc[k][1] = _mm256_fmadd_ps(d, x1, acc[k][1]);
          acc[k][2] = _mm256_fmadd_ps(d, x2, acc[k][2]);
        }
      }
    }
    DK_UNROLL for (int k = 0; k < 4; k++) DK_UNROLL for (int s = 0; s < 3; s++)
        memcpy((float *)&out[k][s] + 8 * half, &acc[k][s], sizeof acc[k][s]);
  }
}
#endif

/* The lanes of the accumulators of output channels [k0, k0 + 8) for input channel c and
 * kernel row r, summed in lane order into part[k][s] (s < S). */
static void dk_filter_task(const dk_fgeo *g, const float *xpl, const float *dyf, int64_t nb,
                           int64_t k0, int64_t c, int64_t r, float part[DK_KB][DK_SMAX]) {
  dk_v acc[DK_KB][DK_SMAX];
#if defined(__AVX512F__)
  if (g->S == 3)
    dk_ftile3_8(g, xpl, dyf, nb, k0, c, r, acc);
  else
    for (int64_t s = 0; s < g->S; s++) dk_ftile_8_1(g, xpl, dyf, nb, k0, c, r, s, acc);
#elif defined(__AVX2__)
  for (int k = 0; k < DK_KB; k += 4) {
    if (g->S == 3)
      dk_ftile3_4(g, xpl, dyf, nb, k0 + k, c, r, acc + k);
    else
      for (int64_t s = 0; s < g->S; s++)
        for (int j = 0; j < 4; j += 2)
          dk_ftile_2_1(g, xpl, dyf, nb, k0 + k + j, c, r, s, acc + k + j);
  }
#else
  for (int k = 0; k < DK_KB; k += 2) {
    if (g->S == 3)
      dk_ftile_2_3(g, xpl, dyf, nb, k0 + k, c, r, 0, acc + k);
    else
      for (int64_t s = 0; s < g->S; s++) dk_ftile_2_1(g, xpl, dyf, nb, k0 + k, c, r, s, acc + k);
  }
#endif
  for (int k = 0; k < DK_KB; k++)
    for (int64_t s = 0; s < g->S; s++) {
      float t = acc[k][s][0];
      for (int l = 1; l < DK_LANES; l++) t += acc[k][s][l];
      part[k][s] = t;
    }
}
