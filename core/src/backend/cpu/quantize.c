/* 8-bit blockwise quantisation on the CPU (op.h QUANTIZE_BLOCKWISE, DEQUANTIZE_BLOCKWISE): x (f32,
 * n values) in blocks of `block` values, each scaled by its absolute maximum and mapped to the
 * index of the nearest of 256 code values (backend/quantize_search.h), and back. One thread
 * owns whole blocks, so the result does not depend on the thread count. */
#include <math.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/quantize_search.h"

/* Below this many values the loops stay on one thread. */
#define QUANTIZE_PARALLEL_MIN 65536
/* Values searched side by side. */
#define LANES 8

ganfw_status ganfw_cpu_op_quantize_blockwise(ganfw_backend *be, ganfw_op *op) {
  (void)be;
  const int64_t n = op->shape.d[0], block = op->shape.d[1];
  const float *x = op->in[0], *code = op->in[1];
  uint8_t *q = op->out[0];
  float *absmax = op->out[1];
  const int64_t blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (n >= QUANTIZE_PARALLEL_MIN)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
    /* LANES running maxima (a max is exact in any order); NaN is skipped, as fmaxf */
    float ms[LANES] = {0.0f};
    int64_t j = i0;
    for (; j + LANES <= i1; j += LANES)
      for (int l = 0; l < LANES; l++) {
        const float a = fabsf(x[j + l]);
        ms[l] = a > ms[l] ? a : ms[l];
      }
    for (; j < i1; j++) {
      const float a = fabsf(x[j]);
      ms[0] = a > ms[0] ? a : ms[0];
    }
    float m = 0.0f;
    for (int l = 0; l < LANES; l++) m = ms[l] > m ? ms[l] : m;
    absmax[b] = m;
    /* as bitsandbytes: a product with the reciprocal; an all-zero block stores code's 0 */
    const float inv = m > 0.0f ? 1.0f / m : 0.0f;
    int64_t i = i0;
    /* LANES values searched side by side: each search is a chain of dependent loads, and
     * independent chains overlap */
    for (; i + LANES <= i1; i += LANES) {
      float xs[LANES];
      int at[LANES];
      for (int l = 0; l < LANES; l++) {
        xs[l] = x[i + l] * inv;
        at[l] = 127;
      }
      for (int step = 64; step > 0; step >>= 1)
        for (int l = 0; l < LANES; l++) at[l] = ganfw_quantize_halve(code, xs[l], at[l], step);
      for (int l = 0; l < LANES; l++) q[i + l] = ganfw_quantize_finish(code, xs[l], at[l]);
    }
    for (; i < i1; i++) q[i] = ganfw_quantize_search(code, x[i] * inv);
  }
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_dequantize_blockwise(ganfw_backend *be, ganfw_op *op) {
  (void)be;
  const int64_t n = op->shape.d[0], block = op->shape.d[1];
  const uint8_t *q = op->in[0];
  const float *absmax = op->in[1], *code = op->in[2];
  float *x = op->out[0];
  const int64_t blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (n >= QUANTIZE_PARALLEL_MIN)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
    const float m = absmax[b];
    for (int64_t i = i0; i < i1; i++) x[i] = code[q[i]] * m;
  }
  return GANFW_OK;
}
