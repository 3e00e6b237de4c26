/* 8-bit blockwise quantisation on the CPU (op.h QUANTIZE_BLOCKWISE, DEQUANTIZE_BLOCKWISE): x (f32,
 * n values) in blocks of `block` values, each scaled by its absolute maximum and mapped to the
 * index of the nearest of 256 code values (backend/quantize_search.h), and back. One thread
 * owns whole blocks, so the result does not depend on the thread count; every SIMD level
 * (quantize_kernels.h) runs the same comparisons, so gives the same bits. */
#include <math.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_ops.h"
#include "backend/quantize_search.h"

/* Below this many values the loops stay on one thread. */
#define QUANTIZE_PARALLEL_MIN 65536
/* Values searched side by side. */
#define LANES 16

/* The kernel, once per SIMD level (isa.h); each call runs the level in use. */
#define GANFW_ISA_BODY "backend/cpu/quantize_kernels.h"
#include "backend/cpu/isa_each.h"

typedef void (*quantize_block_fn)(int64_t n, const float *x, const float *code, uint8_t *q,
                                  float *absmax);
static const quantize_block_fn quantize_block[GANFW_CPU_ISA_COUNT] =
    GANFW_ISA_TABLE(quantize_block);

ganfw_status ganfw_cpu_op_quantize_blockwise(ganfw_backend *be, ganfw_op *op) {
  (void)be;
  const int64_t n = op->shape.d[0], block = op->shape.d[1];
  const float *x = op->in[0], *code = op->in[1];
  uint8_t *q = op->out[0];
  float *absmax = op->out[1];
  const int64_t blocks = (n + block - 1) / block;
  const quantize_block_fn run = quantize_block[ganfw_cpu_isa_level()];
#pragma omp parallel for schedule(static) if (n >= QUANTIZE_PARALLEL_MIN)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t i0 = b * block, len = i0 + block < n ? block : n - i0;
    run(len, x + i0, code, q + i0, absmax + b);
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
