/* Private to the CPU backend: conv2d of stride 1 (ResNet's 3x3 "same" convolutions, 1x1
 * convolutions) by direct kernels on zero-padded planes, without im2col (conv_direct.c).
 * conv2d.c calls these for the shapes and passes ganfw_cpu_conv2d_direct_use accepts;
 * conv_transpose2d.c reaches them through conv2d.c. */
#ifndef GANFW_CPU_CONV_DIRECT_H
#define GANFW_CPU_CONV_DIRECT_H

#include "backend/cpu/conv_winograd.h"

/* 1 when the direct kernels compute this shape at all: stride 1, 0 <= pad < kernel size,
 * kernels up to 7x7, and a workspace within im2col's. */
int ganfw_cpu_conv2d_direct_fits(const ganfw_conv2d_shape *s);
/* 1 when conv2d should run `pass` of this shape on the direct kernels: it fits and the pass
 * was measured faster than im2col + GEMM (bench/bench_conv.c). */
int ganfw_cpu_conv2d_direct_use(const ganfw_conv2d_shape *s, ganfw_conv_pass pass);
/* Workspace bytes of the passes of a shape that fits (at most ganfw_cpu_conv2d_im2col_workspace).
 */
size_t ganfw_cpu_conv2d_direct_workspace(const ganfw_conv2d_shape *s);
/* 1 when the passes of this shape in dtype dt run on bf16 dot products. */
int ganfw_cpu_conv2d_direct_bf16(const ganfw_conv2d_shape *s, int32_t dt);
/* y = conv2d(x, w) (+ b), x and y in dtype dt, w in f32. */
void ganfw_cpu_conv2d_direct_forward(const ganfw_conv2d_shape *s, int32_t dt, const void *x,
                                     const float *w, const float *b, void *y, void *ws);
/* dx = conv2d's input gradient (when dx is not NULL; + bdx[c] per channel when bdx is not
 * NULL, before dx is rounded) and dw (+)= its weight gradient (when dw is not NULL;
 * accumulate adds), x, dy and dx in dt. */
void ganfw_cpu_conv2d_direct_backward(const ganfw_conv2d_shape *s, int32_t dt, const void *x,
                                      const float *w, const void *dy, void *dx, float *dw,
                                      int accumulate, const float *bdx, void *ws);

#endif
