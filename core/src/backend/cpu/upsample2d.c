/* Upsampling by 2 on the CPU, as PyTorch's nn.Upsample(scale_factor=2): x [planes,H,W] ->
 * y [planes,2H,2W], nearest or bilinear with align_corners=False. The backward gathers:
 * each input value sums the outputs that read it, in a fixed order, so that planes are the
 * only unit split across threads and the result does not depend on the thread count. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many output values the kernels stay on one thread. */
#define UPSAMPLE_PARALLEL_MIN 32768

/* Where output o of an axis of n inputs reads (bilinear, align_corners=False, scale 2): the
 * inputs i0 <= i1 and their weights, computed in float as PyTorch does
 * (area_pixel_compute_source_index: src = 0.5 * (o + 0.5) - 0.5, clamped at 0). */
static void source(int64_t o, int64_t n, int64_t *i0, int64_t *i1, float *w0, float *w1) {
  float src = 0.5f * ((float)o + 0.5f) - 0.5f;
  if (src < 0.0f) src = 0.0f;
  *i0 = (int64_t)src;
  *i1 = *i0 + (*i0 < n - 1 ? 1 : 0);
  *w1 = src - (float)*i0;
  *w0 = 1.0f - *w1;
}

/* The weight with which output o reads input i along an axis of n inputs (0 when it does
 * not). */
static float weight(int64_t o, int64_t i, int64_t n) {
  int64_t i0, i1;
  float w0, w1;
  source(o, n, &i0, &i1, &w0, &w1);
  return (i0 == i ? w0 : 0.0f) + (i1 == i ? w1 : 0.0f);
}

static void bilinear_plane(const float *x, float *y, int64_t H, int64_t W) {
  const int64_t P = 2 * H, Q = 2 * W;
  for (int64_t p = 0; p < P; p++) {
    int64_t h0, h1;
    float a0, a1;
    source(p, H, &h0, &h1, &a0, &a1);
    const float *r0 = x + h0 * W, *r1 = x + h1 * W;
    float *o = y + p * Q;
    for (int64_t q = 0; q < Q; q++) {
      int64_t w0, w1;
      float b0, b1;
      source(q, W, &w0, &w1, &b0, &b1);
      /* in double: one rounding, as the backward */
      o[q] = (float)((double)a0 * ((double)b0 * r0[w0] + (double)b1 * r0[w1]) +
                     (double)a1 * ((double)b0 * r1[w0] + (double)b1 * r1[w1]));
    }
  }
}

/* dx[h][w] = sum over the outputs (p, q) that read (h, w) of weight * dy[p][q], in double:
 * along an axis, input i is read by outputs 2i-1 .. 2i+2 at most. */
static void bilinear_plane_backward(const float *dy, float *dx, int64_t H, int64_t W) {
  const int64_t P = 2 * H, Q = 2 * W;
  for (int64_t h = 0; h < H; h++) {
    const int64_t p0 = 2 * h - 1 < 0 ? 0 : 2 * h - 1, p1 = 2 * h + 3 > P ? P : 2 * h + 3;
    for (int64_t w = 0; w < W; w++) {
      const int64_t q0 = 2 * w - 1 < 0 ? 0 : 2 * w - 1, q1 = 2 * w + 3 > Q ? Q : 2 * w + 3;
      double g = 0.0; /* up to 16 terms: one rounding at the end */
      for (int64_t p = p0; p < p1; p++) {
        const float a = weight(p, h, H);
        if (a == 0.0f) continue;
        double row = 0.0;
        for (int64_t q = q0; q < q1; q++) row += (double)weight(q, w, W) * dy[p * Q + q];
        g += a * row;
      }
      dx[h * W + w] = (float)g;
    }
  }
}

static void upsample2d_forward(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H,
                               int64_t W, const float *x, float *y) {
  (void)be;
  const int64_t Q = 2 * W, out = 4 * H * W;
#pragma omp parallel for schedule(static) if (planes * out >= UPSAMPLE_PARALLEL_MIN)
  for (int64_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * H * W;
    float *yp = y + pl * out;
    if (mode == GANFW_UPSAMPLE_BILINEAR) {
      bilinear_plane(xp, yp, H, W);
      continue;
    }
    for (int64_t h = 0; h < H; h++) {
      float *r = yp + 2 * h * Q;
      for (int64_t w = 0; w < W; w++) r[2 * w] = r[2 * w + 1] = xp[h * W + w];
      memcpy(r + Q, r, (size_t)Q * sizeof *r);
    }
  }
}

static void upsample2d_backward(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H,
                                int64_t W, const float *dy, float *dx) {
  (void)be;
  const int64_t Q = 2 * W, out = 4 * H * W;
#pragma omp parallel for schedule(static) if (planes * out >= UPSAMPLE_PARALLEL_MIN)
  for (int64_t pl = 0; pl < planes; pl++) {
    const float *g = dy + pl * out;
    float *d = dx + pl * H * W;
    if (mode == GANFW_UPSAMPLE_BILINEAR) {
      bilinear_plane_backward(g, d, H, W);
      continue;
    }
    for (int64_t h = 0; h < H; h++) {
      const float *r0 = g + 2 * h * Q, *r1 = r0 + Q;
      for (int64_t w = 0; w < W; w++)
        d[h * W + w] =
            (float)(((double)r0[2 * w] + r0[2 * w + 1]) + ((double)r1[2 * w] + r1[2 * w + 1]));
    }
  }
}

ganfw_status ganfw_cpu_op_upsample2d_forward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  upsample2d_forward(be, op->mode, d[0], d[1], d[2], op->in[0], op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_upsample2d_backward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  upsample2d_backward(be, op->mode, d[0], d[1], d[2], op->in[0], op->out[0]);
  return GANFW_OK;
}
