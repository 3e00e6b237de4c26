/* Inline f16/bf16 <-> f32 row conversions for the kernel bodies compiled once per SIMD
 * level (isa_each.h), included by such a body: no include guard, each name becomes that
 * level's through GANFW_ISA. The row helpers of cast.c cost a call per row and convert bf16
 * with scalar code; inlined here they vectorise at the level of the body that includes
 * them. The including file includes <immintrin.h> on x86-64. */
#define lp_to_f32   GANFW_ISA(lp_to_f32)
#define lp_from_f32 GANFW_ISA(lp_from_f32)

#ifndef CAST_ROWS_INLINE
#if defined(__GNUC__)
#define CAST_ROWS_INLINE static inline __attribute__((always_inline))
#else
#define CAST_ROWS_INLINE static inline
#endif
#endif

/* len values of dtype dt (f16 or bf16) at x to f32 at y, and back (to nearest even), inline
 * and vectorised at this level: bf16 is a shift; f16 uses AVX-512 or F16C where this level
 * has them (isa_each.h's target pragma defines __AVX512F__, __F16C__), else cast.c's
 * scalar rules. The bits of ganfw_cast either way (cast.h). */
CAST_ROWS_INLINE void lp_to_f32(int32_t dt, int64_t len, const uint16_t *x, float *y) {
  int64_t i = 0;
  if (dt == GANFW_DTYPE_BF16) {
#pragma omp simd
    for (i = 0; i < len; i++) y[i] = ganfw_bf16_to_f32_scalar(x[i]);
    return;
  }
#if defined(__AVX512F__)
  for (; i + 16 <= len; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
#elif defined(__F16C__)
  for (; i + 8 <= len; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
#endif
  if (i < len) ganfw_cpu_row_to_f32(dt, len - i, x + i, y + i);
}

CAST_ROWS_INLINE void lp_from_f32(int32_t dt, int64_t len, const float *x, uint16_t *y) {
  int64_t i = 0;
  if (dt == GANFW_DTYPE_BF16) {
#pragma omp simd
    for (i = 0; i < len; i++) y[i] = ganfw_f32_to_bf16_scalar(x[i]);
    return;
  }
#if defined(__AVX512F__)
  for (; i + 16 <= len; i += 16)
    _mm256_storeu_si256((__m256i *)(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
  for (; i + 8 <= len; i += 8)
    _mm_storeu_si128((__m128i *)(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  if (i < len) ganfw_cpu_row_from_f32(dt, len - i, x + i, y + i);
}
