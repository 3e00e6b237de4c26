/* Dropout on the CPU over n floats: element i is kept when the uniform u01 of word i%4 of
 * Philox block offset + i/4 (core/src/base/philox.h) is >= p, and scaled by 1/(1-p); the keep
 * mask (1 = kept, NULL to skip) is saved for backward. Same seed and offset give the same mask on
 * every backend. */
#include "backend/cpu/cpu_ops.h"
#include "base/philox.h"

/* Below this many elements the kernels stay on one thread. */
#define DROPOUT_PARALLEL_MIN 16384
#define DROPOUT_BLOCKS       16

/* The kernels, once per SIMD level (isa.h); each call runs the level in use. */
#define GANFW_ISA_BODY "backend/cpu/dropout_kernels.h"
#include "backend/cpu/isa_each.h"

typedef void (*dropout_forward_fn)(ganfw_backend *be, int64_t n, float p, uint64_t seed,
                                   uint64_t offset, const float *x, float *y, uint8_t *mask);
static const dropout_forward_fn dropout_forward_by_isa[GANFW_CPU_ISA_COUNT] =
    GANFW_ISA_TABLE(dropout_forward);

typedef void (*dropout_backward_fn)(ganfw_backend *be, int64_t n, float p, const uint8_t *mask,
                                    const float *dy, float *dx);
static const dropout_backward_fn dropout_backward_by_isa[GANFW_CPU_ISA_COUNT] =
    GANFW_ISA_TABLE(dropout_backward);

ganfw_status ganfw_cpu_op_dropout_forward(ganfw_backend *be, ganfw_op *op) {
  dropout_forward_by_isa[ganfw_cpu_isa_level()](be, op->shape.d[0], (float)op->sc[0], op->seed,
                                                op->offset, op->in[0], op->out[0], op->out[1]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_dropout_backward(ganfw_backend *be, ganfw_op *op) {
  dropout_backward_by_isa[ganfw_cpu_isa_level()](be, op->shape.d[0], (float)op->sc[0], op->in[0],
                                                 op->in[1], op->out[0]);
  return GANFW_OK;
}
