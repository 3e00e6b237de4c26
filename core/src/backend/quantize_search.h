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

/* The index of code[0..256) nearest to x (x normalised by its block's absmax, so in [-1, 1]).
 * Seven halving steps from the middle (127) leave an even index `at` between the last codes
 * the search passed below (`lo`) and above (`hi`); the nearer of code[at] and that neighbour
 * wins, and a value exactly at their midpoint keeps `at`. A neighbour never passed is code[0]
 * or code[255]. NaN gives 0. */
GANFW_QUANTIZE_FN uint8_t ganfw_quantize_search(const float *code, float x) {
  int at = 127, lo = 0, hi = 255;
  float lo_v = -1.0f, hi_v = 1.0f;
  float v = code[at];
  for (int step = 64; step > 0; step >>= 1) {
    if (x > v) {
      lo = at;
      lo_v = v;
      at += step;
    } else {
      hi = at;
      hi_v = v;
      at -= step;
    }
    v = code[at];
  }
  if (hi == 255) hi_v = code[255];
  if (lo == 0) lo_v = code[0];
  if (x > v) return (uint8_t)(x > (hi_v + v) * 0.5f ? hi : at);
  return (uint8_t)(x < (lo_v + v) * 0.5f ? lo : at);
}

#endif
