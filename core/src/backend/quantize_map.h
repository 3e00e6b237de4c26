/* The dynamic (dynamic tree) quantisation map of 8-bit optimizers (Dettmers et al., "8-bit
 * Optimizers via Block-wise Quantization", 2022): 256 code values in [-1, 1] for
 * QUANTIZE_BLOCKWISE (op.h). Host-side math, no device. */
#ifndef GANFW_QUANTIZE_MAP_H
#define GANFW_QUANTIZE_MAP_H

#include <stdint.h>

#define GANFW_QUANTIZE_CODE_SIZE 256

/* Writes code[0..256) ascending, bitsandbytes' create_dynamic_map(is_signed,
 * max_exponent_bits=7, total_bits=8); each value computed in double and rounded to f32 once. */
void ganfw_quantize_dynamic_map(int32_t is_signed, float *code);

#endif
