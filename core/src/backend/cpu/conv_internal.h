/* Private to the CPU backend: the convolution kernels of conv2d.c with the activations in
 * any of f32, f16 and bf16 (an op's dtype, op.h), for conv_transpose2d.c, which runs on them
 * with the roles swapped. */
#ifndef GANFW_CPU_CONV_INTERNAL_H
#define GANFW_CPU_CONV_INTERNAL_H

#include "backend/cpu/cpu_ops.h"

/* The parts of a 16-bit call's workspace after the f32 kernels' own: the weights in f32,
 * f32 copies of a dense conv's input and output (NULL unless the conv is dense), and one
 * Winograd staging plane per thread slot (NULL unless the shape fits Winograd). */
typedef struct conv_lp_ws {
  float *w, *dense_in, *dense_out, *stage;
  const uint16_t *w16; /* the weights as given, when they are bf16 (w is their f32 copy) */
} conv_lp_ws;

/* Bytes of a 16-bit call's workspace for every pass of the shape. */
size_t ganfw_cpu_conv2d_lp_workspace(const ganfw_conv2d_shape *s);
/* The parts of ws, with w (dtype dt; NULL: none) converted into lw.w. */
conv_lp_ws ganfw_cpu_conv2d_lp_split(const ganfw_conv2d_shape *s, int32_t dt, const void *w,
                                     void *ws);
/* y = conv2d(x, w) (+ b), x and y in dt, w in f32; lw NULL for f32. */
void ganfw_cpu_conv2d_forward_dt(ganfw_backend *be, const ganfw_conv2d_shape *s, int32_t dt,
                                 const void *x, const float *w, const float *b, void *y,
                                 const conv_lp_ws *lw, void *ws);
/* dx (dt; + bdx[c] per channel when bdx is not NULL, before dx is rounded: conv_transpose2d's
 * forward bias), dw (f32, accumulate adds) and db of conv2d(x, w); x and dy in dt, w in f32;
 * lw NULL for f32. */
void ganfw_cpu_conv2d_backward_dt(ganfw_backend *be, const ganfw_conv2d_shape *s, int32_t dt,
                                  const void *x, const float *w, const void *dy, void *dx,
                                  float *dw, float *db, int accumulate, const float *bdx,
                                  const conv_lp_ws *lw, void *ws);
/* db[k] (+)= the sum of dy[n][k][:] over n for dy [N,K,PQ] in dt. */
void ganfw_cpu_conv_bias_grad(int64_t N, int64_t K, int64_t PQ, int32_t dt, const void *dy,
                              float *db, int accumulate);

#endif
