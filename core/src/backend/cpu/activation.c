/* Element-wise activations on the CPU (identity, ReLU, LeakyReLU, tanh, sigmoid) over n
 * floats: forward y = f(x) and backward from the output y (dx = dy * f'(x), f' written in
 * terms of y).
 * y may alias x and dx may alias dy. tanh and sigmoid use a branch-free exp so the loops
 * vectorise. The kernels live in activation_kernels.h, compiled once per SIMD level. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many elements the kernels stay on one thread. */
#define ACT_PARALLEL_MIN 65536

/* The kernels, once per SIMD level (isa.h); each call runs the level in use. */
#define GANFW_ISA_BODY "backend/cpu/activation_kernels.h"
#include "backend/cpu/isa_each.h"

typedef void (*act_forward_fn)(int32_t kind, float alpha, int64_t n, const float *x, float *y);
typedef void (*act_backward_fn)(int32_t kind, float alpha, int64_t n, const float *y,
                                const float *dy, float *dx);
static const act_forward_fn act_forward[GANFW_CPU_ISA_COUNT] = GANFW_ISA_TABLE(act_forward);
static const act_backward_fn act_backward[GANFW_CPU_ISA_COUNT] = GANFW_ISA_TABLE(act_backward);

void ganfw_cpu_act_forward(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *x,
                           float *y) {
  (void)be;
  act_forward[ganfw_cpu_isa_level()](kind, alpha, n, x, y);
}

void ganfw_cpu_act_backward(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *y,
                            const float *dy, float *dx) {
  (void)be;
  act_backward[ganfw_cpu_isa_level()](kind, alpha, n, y, dy, dx);
}
