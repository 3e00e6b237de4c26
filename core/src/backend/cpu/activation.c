/* Element-wise activations on the CPU (identity, ReLU, LeakyReLU, tanh, sigmoid) over n
 * values: forward y = f(x) and backward from the output y (dx = dy * f'(x), f' written in
 * terms of y), in f32 and in f16 or bf16 (the op's dtype), 16-bit values converted to f32 a
 * chunk at a time on the stack (the bits of converting whole tensors around the f32 ops).
 * y may alias x and dx may alias dy. tanh and sigmoid use a branch-free exp so the loops
 * vectorise. The kernels live in activation_kernels.h, compiled once per SIMD level. */
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h> /* F16C and AVX-512 conversions in the kernels of the levels that have them */
#endif

#include "backend/cpu/cast.h"
#include "backend/cpu/cpu_ops.h"

/* The row helpers must be inlined into each clone to get its instruction set. */
#if defined(__GNUC__)
#define ACT_INLINE static inline __attribute__((always_inline))
#else
#define ACT_INLINE static inline
#endif

/* Below this many elements the kernels stay on one thread. */
#define ACT_PARALLEL_MIN 65536
/* The drivers walk the tensors in chunks of this many values (16-bit ones converted to
 * f32 on the stack, a chunk at a time). */
#define ACT_CHUNK 1024

/* The kernels, once per SIMD level (isa.h); each call runs the level in use. */
#define GANFW_ISA_BODY "backend/cpu/activation_kernels.h"
#include "backend/cpu/isa_each.h"

typedef void (*act_forward_fn)(int32_t dt, int32_t kind, float alpha, int64_t n, const void *x,
                               void *y);
typedef void (*act_backward_fn)(int32_t dt, int32_t kind, float alpha, int64_t n, const void *y,
                                const void *dy, void *dx);
static const act_forward_fn act_forward[GANFW_CPU_ISA_COUNT] = GANFW_ISA_TABLE(act_forward);
static const act_backward_fn act_backward[GANFW_CPU_ISA_COUNT] = GANFW_ISA_TABLE(act_backward);

/* The activations' dtype goes to the kernels, which convert 16-bit rows themselves. */
ganfw_status ganfw_cpu_op_act_forward(ganfw_backend *be, ganfw_op *op) {
  act_forward[ganfw_cpu_isa_level()](op->dtype, op->mode, (float)op->sc[0], op->shape.d[0],
                                     op->in[0], op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_act_backward(ganfw_backend *be, ganfw_op *op) {
  act_backward[ganfw_cpu_isa_level()](op->dtype, op->mode, (float)op->sc[0], op->shape.d[0],
                                      op->in[0], op->in[1], op->out[0]);
  return GANFW_OK;
}
