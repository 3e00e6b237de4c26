/* The code search of 8-bit blockwise quantisation (op.h QUANTIZE_BLOCKWISE), shared by the CPU
 * kernel (cpu/quantize.c) and the CUDA one (cuda/quantize.cu) so that both pick the same index
 * bit for bit: bitsandbytes' search over a 256-entry code sorted ascending (Dettmers et al.,
 * "8-bit Optimizers via Block-wise Quantization", 2022). */
#ifndef GANFW_QUANTIZE_SEARCH_H
#define GANFW_QUANTIZE_SEARCH_H

#include <stdint.h>

#ifdef __CUDACC__
#define GANFW_QUANTIZE_FN static __host__ __device__ inline
#else
#define GANFW_QUANTIZE_FN static inline
#endif

/* One step of the search: at + step when x > code[at], else at - step, in arithmetic (a
 * branch here is mispredicted half the time). */
GANFW_QUANTIZE_FN int ganfw_quantize_halve(const float *code, float x, int at, int step) {
  return at - step + (-(int)(x > code[at]) & (step << 1));
}

/* The last part of the search: from the even index `at` the seven steps reached for x, the
 * index it returns. (ganfw_quantize_search below is the whole search; a caller may run the
 * steps itself, e.g. for several values at once.) */
GANFW_QUANTIZE_FN uint8_t ganfw_quantize_finish(const float *code, float x, int at) {
  /* at <= 254; the neighbour below index 0 is 0 itself */
  const int below = at > 0;
  const float v = code[at];
  const float mid_hi = (code[at + 1] + v) * 0.5f, mid_lo = (code[at - below] + v) * 0.5f;
  /* x > mid_hi implies x > v, x < mid_lo implies x <= v: bitsandbytes' two cases */
  return (uint8_t)(at + (x > mid_hi) - ((x < mid_lo) & below));
}

/* The index of code[0..256) nearest to x (x normalised by its block's absmax, so in [-1, 1]),
 * as bitsandbytes' search: seven halving steps from the middle (127) end on an even index
 * `at` with code[at - 1] < x <= code[at + 1] (within the code's range); the nearer of code[at]
 * and the neighbour on x's side wins, and a value exactly at their midpoint ((a + b) * 0.5f,
 * in f32) keeps `at`. Below code[0] gives 0, above code[255] 255, NaN 0. Written with
 * selects instead of branches: the comparisons are unpredictable. */
GANFW_QUANTIZE_FN uint8_t ganfw_quantize_search(const float *code, float x) {
  int at = 127;
  for (int step = 64; step > 0; step >>= 1) at = ganfw_quantize_halve(code, x, at, step);
  return ganfw_quantize_finish(code, x, at);
}

#endif
