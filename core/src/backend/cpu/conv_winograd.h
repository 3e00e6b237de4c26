/* Private to the CPU backend: conv2d with a 4x4 kernel, stride 2, by polyphase decomposition
 * and Winograd F(2x2, 2x2) (conv_winograd.c). conv2d.c calls these for the shapes and passes
 * ganfw_cpu_conv2d_winograd_use accepts; conv_transpose2d.c reaches them through conv2d.c. */
#ifndef GANFW_CPU_CONV_WINOGRAD_H
#define GANFW_CPU_CONV_WINOGRAD_H

#include "backend/cpu/cpu_ops.h"

/* The three passes of a conv2d. */
typedef enum ganfw_conv_pass {
  GANFW_CONV_PASS_FORWARD,
  GANFW_CONV_PASS_DATA,   /* backward-data: dx */
  GANFW_CONV_PASS_FILTER, /* backward-filter: dw */
  GANFW_CONV_PASS_COUNT
} ganfw_conv_pass;

/* 1 when the Winograd kernels compute this shape at all: R = S = 4, stride 2, padding 0..3. */
int ganfw_cpu_conv2d_winograd_fits(const ganfw_conv2d_shape *s);
/* 1 when conv2d should run `pass` of this shape on the Winograd kernels: it fits, was
 * measured faster than im2col + GEMM (bench/bench_conv.c), and needs no more workspace. */
int ganfw_cpu_conv2d_winograd_use(const ganfw_conv2d_shape *s, ganfw_conv_pass pass);
/* The workspace im2col + GEMM needs for a shape (conv2d.c): the Winograd path sizes its
 * chunks to stay within it, and is not used for a shape where it cannot. */
size_t ganfw_cpu_conv2d_im2col_workspace(const ganfw_conv2d_shape *s);
/* Workspace bytes of all three passes of a shape that fits. */
size_t ganfw_cpu_conv2d_winograd_workspace(const ganfw_conv2d_shape *s);
/* Where in the workspace V lies (its byte offset; *bytes: its size): the forward and
 * backward-data passes read the weights only before V is written, so an f32 copy of the
 * weights may lie there. */
size_t ganfw_cpu_conv2d_winograd_spare(const ganfw_conv2d_shape *s, size_t *bytes);
/* Bytes of the staging planes a call with 16-bit activations needs besides the workspace
 * (one per thread slot: a chunk's images of one channel in f32). */
size_t ganfw_cpu_conv2d_winograd_stage_bytes(const ganfw_conv2d_shape *s);
/* y = conv2d(x, w) (+ b), as conv2d's forward op, with x and y in dtype dt (f32, f16 or
 * bf16; stage: the staging planes, NULL for f32) and w in f32. */
void ganfw_cpu_conv2d_winograd_forward(const ganfw_conv2d_shape *s, int32_t dt, const void *x,
                                       const float *w, const float *b, void *y, float *stage,
                                       void *ws);
/* dx = conv2d's input gradient (when dx is not NULL; + bdx[c] per channel when bdx is not
 * NULL) and dw (+)= its weight gradient (when dw is not NULL; accumulate adds), as
 * conv2d's backward op without the bias, with x, dy and dx in dt. */
void ganfw_cpu_conv2d_winograd_backward(const ganfw_conv2d_shape *s, int32_t dt, const void *x,
                                        const float *w, const void *dy, void *dx, float *dw,
                                        int accumulate, const float *bdx, float *stage, void *ws);

#endif
