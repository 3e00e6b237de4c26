/* Scalar f32 <-> f16 / bf16 conversions (IEEE round-to-nearest-even, NaN stays a quiet NaN
 * with its upper payload bits, overflow becomes inf, subnormals exact, -0 kept) and the
 * array paths of core/src/backend/cpu/cast.c, which tests compare against each other. The scalar
 * rules are those of the x86 F16C instructions, so both array paths give the same bits. */
#ifndef GANFW_CPU_CAST_H
#define GANFW_CPU_CAST_H

#include <stdint.h>
#include <string.h>

#include "ganfw/tensor.h"

static inline uint32_t ganfw_f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static inline float ganfw_f32_from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* f32 -> f16, round to nearest even. NaN -> sign | 0x7e00 | upper 9 payload bits. */
static inline uint16_t ganfw_f32_to_f16_scalar(float x) {
  uint32_t f = ganfw_f32_bits(x);
  uint16_t sign = (uint16_t)((f >> 16) & 0x8000u);
  uint32_t a = f & 0x7fffffffu;
  if (a > 0x7f800000u) /* NaN: quiet it, keep the payload that fits */
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) /* >= 65520 (halfway above 65504) and inf */
    return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) { /* normal f16: >= 2^-14. Rebias 127 -> 15, round at bit 13 */
    uint32_t m = a - 0x38000000u;
    m += 0x0fffu + ((m >> 13) & 1u);
    return (uint16_t)(sign | (m >> 13)); /* a carry into the exponent is correct */
  }
  if (a <= 0x33000000u) /* <= 2^-25: half of the smallest subnormal ties to 0 */
    return sign;
  /* f16 subnormal: value / 2^-24 = mant * 2^(e - 126), shift in [14, 24] */
  uint32_t e = a >> 23;
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - e;
  uint32_t r = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) r++;
  return (uint16_t)(sign | r); /* r == 0x400 is the smallest normal, also correct */
}

/* f16 -> f32, exact. A signalling NaN comes back quiet (bit 22 set), as F16C does. */
static inline float ganfw_f16_to_f32_scalar(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  uint32_t f;
  if (e == 0x1fu) {
    f = sign | 0x7f800000u | (m << 13);
    if (m) f |= 0x00400000u;
  } else if (e != 0) {
    f = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    f = sign;
  } else { /* subnormal: normalise; m * 2^-24 with the leading bit at position p */
    uint32_t p = 31u - (uint32_t)__builtin_clz(m); /* 0..9 */
    f = sign | ((p + 103u) << 23) | ((m << (23u - p)) & 0x7fffffu);
  }
  return ganfw_f32_from_bits(f);
}

/* f32 -> bf16, round to nearest even (subnormals too, no flush). NaN -> sign | upper
 * payload | quiet bit 0x40. Overflow rounds into inf through the carry. */
static inline uint16_t ganfw_f32_to_bf16_scalar(float x) {
  uint32_t f = ganfw_f32_bits(x);
  uint32_t rne = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
  uint32_t nan = (f >> 16) | 0x40u;
  return (uint16_t)((f & 0x7fffffffu) > 0x7f800000u ? nan : rne);
}

/* bf16 -> f32, exact (a shift; NaN payloads are kept as they are). */
static inline float ganfw_bf16_to_f32_scalar(uint16_t h) {
  return ganfw_f32_from_bits((uint32_t)h << 16);
}

/* Array paths. The portable ones run on any CPU; the F16C ones only where
 * ganfw_cpu_have_f16c() says so. The cast ops (cast.c) pick the fastest at the SIMD level in
 * use (isa.h: F16C from avx2 up). */
void ganfw_cpu_f32_to_f16_portable(int64_t n, const float *x, uint16_t *y);
void ganfw_cpu_f16_to_f32_portable(int64_t n, const uint16_t *x, float *y);
int ganfw_cpu_have_f16c(void);
void ganfw_cpu_f32_to_f16_f16c(int64_t n, const float *x, uint16_t *y);
void ganfw_cpu_f16_to_f32_f16c(int64_t n, const uint16_t *x, float *y);

/* Row conversions for the kernels that read and write 16-bit tensors themselves (the ops the
 * CPU runs natively in f16 and bf16): n values of dtype dt (GANFW_DTYPE_F32, _F16 or
 * _BF16) at x to f32 at y, and f32 back to dt (round to nearest even), on the calling thread
 * (no OpenMP team: they run inside the kernels' parallel loops), with F16C from the AVX2
 * level up. The same bits as the cast ops; f32 is a copy. */
static inline int64_t ganfw_cpu_dtype_bytes(int32_t dt) {
  return dt == GANFW_DTYPE_F32 ? 4 : 2;
}
/* Element i of an array of dtype dt. */
static inline const void *ganfw_cpu_elem(int32_t dt, const void *p, int64_t i) {
  return (const char *)p + i * ganfw_cpu_dtype_bytes(dt);
}
static inline void *ganfw_cpu_elem_mut(int32_t dt, void *p, int64_t i) {
  return (char *)p + i * ganfw_cpu_dtype_bytes(dt);
}
/* 1 when the f16 conversions run on F16C: the CPU has it and the SIMD level in use is
 * avx2 or higher (GANFW_CPU_ISA=portable forces the scalar path). */
int ganfw_cpu_use_f16c(void);
void ganfw_cpu_row_to_f32(int32_t dt, int64_t n, const void *x, float *y);
void ganfw_cpu_row_from_f32(int32_t dt, int64_t n, const float *x, void *y);

#endif
