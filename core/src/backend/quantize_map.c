/* The dynamic quantisation map (quantize_map.h), from the published construction: with 7
 * exponent bits, decade k = 0..6 covers [0.1, 1] * 10^(k-6) with the midpoints of a linspace of
 * 2^k + 1 points (signed; 2^(k+1) + 1 unsigned, which has no sign bit to spend), each value
 * also negated when signed; then 0 and 1; sorted ascending. Signed: 127 * 2 + 2 = 256 values;
 * unsigned: 254 + 2. The extra "additional items" of the published code are 2^(7-7) - 1 = 0
 * here, and no padding is needed. */
#include <math.h>
#include <stdlib.h>

#include "backend/quantize_map.h"

#define EXPONENT_BITS 7

static int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

void ganfw_quantize_dynamic_map(int32_t is_signed, float *code) {
  int n = 0;
  for (int k = 0; k < EXPONENT_BITS; k++) {
    const int points = (is_signed ? 1 << k : 1 << (k + 1)) + 1;
    const double scale = pow(10.0, (double)(k - (EXPONENT_BITS - 1)));
    /* numpy.linspace(0.1, 1, points): 0.1 + j * step, the last point exactly 1 */
    const double step = (1.0 - 0.1) / (double)(points - 1);
    for (int j = 0; j + 1 < points; j++) {
      const double a = 0.1 + (double)j * step;
      const double b = j + 2 == points ? 1.0 : 0.1 + (double)(j + 1) * step;
      const double mean = (a + b) / 2.0;
      code[n++] = (float)(scale * mean);
      if (is_signed) code[n++] = (float)(-scale * mean);
    }
  }
  code[n++] = 0.0f;
  code[n++] = 1.0f;
  while (n < GANFW_QUANTIZE_CODE_SIZE) code[n++] = 0.0f; /* not reached with 8 bits */
  qsort(code, GANFW_QUANTIZE_CODE_SIZE, sizeof *code, cmp_float);
}
