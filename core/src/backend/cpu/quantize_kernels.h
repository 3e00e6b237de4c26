/* The blockwise quantisation kernel of quantize.c, compiled once per SIMD level by
 * isa_each.h (no include guard: included once per level). quantize_block maps one block:
 * its absolute maximum, then each value times its reciprocal to a code index with the
 * search of backend/quantize_search.h: with AVX-512 16 values a vector (the code values
 * gathered), else LANES values side by side as scalars (independent chains of loads that
 * overlap). The including file includes <immintrin.h> on x86-64. */
#define quantize_block GANFW_ISA(quantize_block)

static void quantize_block(int64_t n, const float *x, const float *code, uint8_t *q,
                           float *absmax) {
  /* LANES running maxima (a max is exact in any order); NaN is skipped, as fmaxf */
  float ms[LANES] = {0.0f};
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++) {
      const float a = fabsf(x[i + l]);
      ms[l] = a > ms[l] ? a : ms[l];
    }
  for (; i < n; i++) {
    const float a = fabsf(x[i]);
    ms[0] = a > ms[0] ? a : ms[0];
  }
  float m = 0.0f;
  for (int l = 0; l < LANES; l++) m = ms[l] > m ? ms[l] : m;
  *absmax = m;
  /* as bitsandbytes: a product with the reciprocal; an all-zero block stores code's 0 */
  const float inv = m > 0.0f ? 1.0f / m : 0.0f;
  i = 0;
#if defined(__AVX512F__)
  /* 16 values a vector, the code values gathered: the scalar path's comparisons and its
   * midpoint arithmetic (an add, then a multiply by 0.5, never fused), so the same bits */
  {
    const __m512 vinv = _mm512_set1_ps(inv), half = _mm512_set1_ps(0.5f);
    const __m512i one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512();
    /* four vectors at a time: the seven gathers of one are a dependent chain */
    for (; i + 64 <= n; i += 64) {
      __m512 xv[4];
      __m512i at[4];
      for (int k = 0; k < 4; k++) {
        xv[k] = _mm512_mul_ps(_mm512_loadu_ps(x + i + 16 * k), vinv);
        at[k] = _mm512_set1_epi32(127);
      }
      for (int32_t step = 64; step > 0; step >>= 1)
        for (int k = 0; k < 4; k++) {
          const __mmask16 gt =
              _mm512_cmp_ps_mask(xv[k], _mm512_i32gather_ps(at[k], code, 4), _CMP_GT_OQ);
          const __m512i down = _mm512_sub_epi32(at[k], _mm512_set1_epi32(step));
          at[k] = _mm512_mask_add_epi32(down, gt, down, _mm512_set1_epi32(step << 1));
        }
      for (int k = 0; k < 4; k++) {
        const __mmask16 below = _mm512_cmpgt_epi32_mask(at[k], zero);
        const __m512 v = _mm512_i32gather_ps(at[k], code, 4);
        const __m512 hi = _mm512_i32gather_ps(_mm512_add_epi32(at[k], one), code, 4);
        const __m512 lo =
            _mm512_i32gather_ps(_mm512_mask_sub_epi32(at[k], below, at[k], one), code, 4);
        const __m512 mid_hi = _mm512_mul_ps(_mm512_add_ps(hi, v), half);
        const __m512 mid_lo = _mm512_mul_ps(_mm512_add_ps(lo, v), half);
        const __mmask16 up = _mm512_cmp_ps_mask(xv[k], mid_hi, _CMP_GT_OQ);
        const __mmask16 dn = _mm512_cmp_ps_mask(xv[k], mid_lo, _CMP_LT_OQ) & below;
        __m512i r = _mm512_mask_add_epi32(at[k], up, at[k], one);
        r = _mm512_mask_sub_epi32(r, dn, r, one);
        _mm_storeu_si128((__m128i *)(q + i + 16 * k), _mm512_cvtepi32_epi8(r));
      }
    }
  }
#endif
  for (; i + LANES <= n; i += LANES) {
    float xs[LANES];
    int32_t at[LANES];
    for (int l = 0; l < LANES; l++) {
      xs[l] = x[i + l] * inv;
      at[l] = 127;
    }
    for (int32_t step = 64; step > 0; step >>= 1)
#pragma omp simd
      for (int l = 0; l < LANES; l++)
        at[l] = at[l] - step + (-(int32_t)(xs[l] > code[at[l]]) & (step << 1));
#pragma omp simd
    for (int l = 0; l < LANES; l++) {
      /* ganfw_quantize_finish, written out for the vectoriser */
      const int32_t below = at[l] > 0;
      const float v = code[at[l]];
      const float mid_hi = (code[at[l] + 1] + v) * 0.5f;
      const float mid_lo = (code[at[l] - below] + v) * 0.5f;
      q[i + l] = (uint8_t)(at[l] + (xs[l] > mid_hi) - ((xs[l] < mid_lo) & below));
    }
  }
  for (; i < n; i++) q[i] = ganfw_quantize_search(code, x[i] * inv);
}

#undef quantize_block
