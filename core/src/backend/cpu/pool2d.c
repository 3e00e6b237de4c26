/* Max and average pooling on the CPU, forward and backward: x [N,C,H,W] -> y [N,C,P,Q]
 * with an R x S window, stride and zero/-inf padding as in ganfw_pool2d_shape. Max pooling
 * saves the argmax (index into the H*W plane) per output; average pooling divides by the
 * window size including padding (PyTorch's count_include_pad=True). Windows that lie
 * inside the input take a fast path compiled for 2x2 and 3x3 (fixed trip counts, no
 * branches on the data); border windows a general one. Planes (N*C) are split across
 * OpenMP threads. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"

#if defined(__GNUC__)
#define POOL_INLINE static inline __attribute__((always_inline))
#else
#define POOL_INLINE static inline
#endif

/* Below this many input elements the kernels stay on one thread. */
#define POOL_PARALLEL_MIN 32768

/* The window of output row p (or column q) clipped to the input: [*lo, *hi). */
static inline void window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t in,
                          int64_t *lo, int64_t *hi) {
  int64_t start = o * stride - pad;
  int64_t end = start + k;
  *lo = start < 0 ? 0 : start;
  *hi = end > in ? in : end;
}

/* The divisor of average pooling with padding counted: the window clipped only to the
 * padded input, as PyTorch computes it. */
static inline int64_t padded_extent(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t in) {
  int64_t start = o * stride - pad;
  int64_t end = start + k;
  if (end > in + pad) end = in + pad;
  return end - start;
}

/* The outputs o in [*lo, *hi) of [0, n) whose window [o*stride - pad, +k) lies inside
 * [0, in). */
static inline void interior(int64_t n, int64_t stride, int64_t pad, int64_t k, int64_t in,
                            int64_t *lo, int64_t *hi) {
  int64_t l = (pad + stride - 1) / stride;                        /* o*stride >= pad */
  int64_t h = in - k + pad < 0 ? 0 : (in - k + pad) / stride + 1; /* o*stride + k - pad <= in */
  *lo = l < n ? l : n;
  *hi = h < *lo ? *lo : (h > n ? n : h);
}

/* --- max ---------------------------------------------------------------------------------- */

/* One output over the clipped window [h0,h1) x [w0,w1), exactly as PyTorch: start from the
 * first element's index with -inf, take a larger value or a NaN (so that it reaches the
 * loss). -1 marks a window wholly in the padding (only possible when pad > R/2, which
 * PyTorch refuses); its gradient goes nowhere. */
static void max_window(const float *xp, int64_t W, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                       float *y, int32_t *arg) {
  int64_t best = h0 < h1 && w0 < w1 ? h0 * W + w0 : -1;
  float m = -INFINITY;
  for (int64_t h = h0; h < h1; h++) {
    for (int64_t w = w0; w < w1; w++) {
      float v = xp[h * W + w];
      if (v > m || isnan(v)) m = v, best = h * W + w;
    }
  }
  *y = m;
  *arg = (int32_t)best;
}

/* Outputs q in [q0, q1) of a row whose windows (from row hs, column q*sw - pw) lie inside
 * the input: max and argmax by selects (the comparisons are unpredictable on real data);
 * a window with a NaN is redone by max_window. R and S are constants where inlined. arow
 * may be NULL (no-grad). */
POOL_INLINE void max_row_inside(const float *xp, int64_t W, int64_t hs, int64_t R, int64_t S,
                                int64_t sw, int64_t pw, int64_t q0, int64_t q1, float *yrow,
                                int32_t *arow) {
  for (int64_t q = q0; q < q1; q++) {
    const int64_t ws = q * sw - pw;
    float m = -INFINITY;
    int32_t best = (int32_t)(hs * W + ws);
    int nan = 0;
    for (int64_t r = 0; r < R; r++) {
      for (int64_t t = 0; t < S; t++) {
        const int32_t i = (int32_t)((hs + r) * W + ws + t);
        const float v = xp[i];
        const int32_t gt = -(int32_t)(v > m); /* all ones or 0; bit ops keep it branch-free */
        best = (i & gt) | (best & ~gt);
        m = v > m ? v : m; /* maxss */
        nan |= v != v;
      }
    }
    if (nan) max_window(xp, W, hs, hs + R, ws, ws + S, &m, &best);
    yrow[q] = m;
    if (arow) arow[q] = best;
  }
}

static void maxpool2d_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                              float *y, int32_t *argmax) {
  (void)be;
  const int64_t planes = s->N * s->C, H = s->H, W = s->W, P = s->P, Q = s->Q;
  const int64_t R = s->R, S = s->S, sw = s->stride_w, pw = s->pad_w;
  int64_t p_in0, p_in1, q_in0, q_in1;
  interior(P, s->stride_h, s->pad_h, R, H, &p_in0, &p_in1);
  interior(Q, sw, pw, S, W, &q_in0, &q_in1);
#pragma omp parallel for schedule(static) if (planes * H * W >= POOL_PARALLEL_MIN)
  for (int64_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * H * W;
    float *yp = y + pl * P * Q;
    int32_t *ap = argmax ? argmax + pl * P * Q : NULL; /* NULL in no-grad mode */
    for (int64_t p = 0; p < P; p++) {
      int64_t h0, h1, w0, w1;
      window(p, s->stride_h, s->pad_h, R, H, &h0, &h1);
      float *yrow = yp + p * Q;
      int32_t *arow = ap ? ap + p * Q : NULL;
      const int inside_rows = p >= p_in0 && p < p_in1;
      for (int64_t q = 0; q < Q; q++) {
        if (inside_rows && q == q_in0 && q_in0 < q_in1) {
          if (R == 2 && S == 2)
            max_row_inside(xp, W, h0, 2, 2, sw, pw, q_in0, q_in1, yrow, arow);
          else if (R == 3 && S == 3)
            max_row_inside(xp, W, h0, 3, 3, sw, pw, q_in0, q_in1, yrow, arow);
          else
            max_row_inside(xp, W, h0, R, S, sw, pw, q_in0, q_in1, yrow, arow);
          q = q_in1 - 1;
          continue;
        }
        window(q, sw, pw, S, W, &w0, &w1);
        int32_t a;
        max_window(xp, W, h0, h1, w0, w1, &yrow[q], &a);
        if (arow) arow[q] = a;
      }
    }
  }
}

static void maxpool2d_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                               const int32_t *argmax, float *dx) {
  (void)be;
  const int64_t planes = s->N * s->C, HW = s->H * s->W, PQ = s->P * s->Q;
#pragma omp parallel for schedule(static) if (planes * HW >= POOL_PARALLEL_MIN)
  for (int64_t pl = 0; pl < planes; pl++) {
    float *dxp = dx + pl * HW;
    const float *dyp = dy + pl * PQ;
    const int32_t *ap = argmax + pl * PQ;
    memset(dxp, 0, (size_t)HW * sizeof *dxp);
    for (int64_t o = 0; o < PQ; o++) {
      if (ap[o] >= 0) dxp[ap[o]] += dyp[o];
    }
  }
}

/* --- average ------------------------------------------------------------------------------ */

/* Outputs q in [q0, q1) of a row whose windows lie inside the input (divisor R*S). */
POOL_INLINE void avg_row_inside(const float *xp, int64_t W, int64_t hs, int64_t R, int64_t S,
                                int64_t sw, int64_t pw, int64_t q0, int64_t q1, float *yrow) {
  const float div = (float)(R * S);
  for (int64_t q = q0; q < q1; q++) {
    const float *win = xp + hs * W + q * sw - pw;
    float sum = 0.0f;
    for (int64_t r = 0; r < R; r++)
      for (int64_t t = 0; t < S; t++) sum += win[r * W + t];
    yrow[q] = sum / div;
  }
}

static void avgpool2d_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                              float *y) {
  (void)be;
  const int64_t planes = s->N * s->C, H = s->H, W = s->W, P = s->P, Q = s->Q;
  const int64_t R = s->R, S = s->S, sw = s->stride_w, pw = s->pad_w;
  int64_t p_in0, p_in1, q_in0, q_in1;
  interior(P, s->stride_h, s->pad_h, R, H, &p_in0, &p_in1);
  interior(Q, sw, pw, S, W, &q_in0, &q_in1);
#pragma omp parallel for schedule(static) if (planes * H * W >= POOL_PARALLEL_MIN)
  for (int64_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * H * W;
    float *yp = y + pl * P * Q;
    for (int64_t p = 0; p < P; p++) {
      int64_t h0, h1, w0, w1;
      window(p, s->stride_h, s->pad_h, R, H, &h0, &h1);
      const int64_t eh = padded_extent(p, s->stride_h, s->pad_h, R, H);
      float *yrow = yp + p * Q;
      const int inside_rows = p >= p_in0 && p < p_in1;
      for (int64_t q = 0; q < Q; q++) {
        if (inside_rows && q == q_in0 && q_in0 < q_in1) {
          if (R == 2 && S == 2)
            avg_row_inside(xp, W, h0, 2, 2, sw, pw, q_in0, q_in1, yrow);
          else if (R == 3 && S == 3)
            avg_row_inside(xp, W, h0, 3, 3, sw, pw, q_in0, q_in1, yrow);
          else
            avg_row_inside(xp, W, h0, R, S, sw, pw, q_in0, q_in1, yrow);
          q = q_in1 - 1;
          continue;
        }
        window(q, sw, pw, S, W, &w0, &w1);
        float sum = 0.0f;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) sum += xp[h * W + w];
        yrow[q] = sum / (float)(eh * padded_extent(q, sw, pw, S, W));
      }
    }
  }
}

/* Adds g[q] / (R*S) over the windows of outputs [q0, q1) that lie inside the input. */
POOL_INLINE void avg_row_inside_backward(float *dxp, int64_t W, int64_t hs, int64_t R, int64_t S,
                                         int64_t sw, int64_t pw, int64_t q0, int64_t q1,
                                         const float *dyrow) {
  const float div = (float)(R * S);
  for (int64_t q = q0; q < q1; q++) {
    float *win = dxp + hs * W + q * sw - pw;
    const float g = dyrow[q] / div;
    for (int64_t r = 0; r < R; r++)
      for (int64_t t = 0; t < S; t++) win[r * W + t] += g;
  }
}

static void avgpool2d_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                               float *dx) {
  (void)be;
  const int64_t planes = s->N * s->C, H = s->H, W = s->W, P = s->P, Q = s->Q;
  const int64_t R = s->R, S = s->S, sw = s->stride_w, pw = s->pad_w;
  int64_t p_in0, p_in1, q_in0, q_in1;
  interior(P, s->stride_h, s->pad_h, R, H, &p_in0, &p_in1);
  interior(Q, sw, pw, S, W, &q_in0, &q_in1);
#pragma omp parallel for schedule(static) if (planes * H * W >= POOL_PARALLEL_MIN)
  for (int64_t pl = 0; pl < planes; pl++) {
    float *dxp = dx + pl * H * W;
    const float *dyp = dy + pl * P * Q;
    memset(dxp, 0, (size_t)(H * W) * sizeof *dxp);
    for (int64_t p = 0; p < P; p++) {
      int64_t h0, h1, w0, w1;
      window(p, s->stride_h, s->pad_h, R, H, &h0, &h1);
      const int64_t eh = padded_extent(p, s->stride_h, s->pad_h, R, H);
      const float *dyrow = dyp + p * Q;
      const int inside_rows = p >= p_in0 && p < p_in1;
      for (int64_t q = 0; q < Q; q++) {
        if (inside_rows && q == q_in0 && q_in0 < q_in1) {
          if (R == 2 && S == 2)
            avg_row_inside_backward(dxp, W, h0, 2, 2, sw, pw, q_in0, q_in1, dyrow);
          else if (R == 3 && S == 3)
            avg_row_inside_backward(dxp, W, h0, 3, 3, sw, pw, q_in0, q_in1, dyrow);
          else
            avg_row_inside_backward(dxp, W, h0, R, S, sw, pw, q_in0, q_in1, dyrow);
          q = q_in1 - 1;
          continue;
        }
        window(q, sw, pw, S, W, &w0, &w1);
        const float g = dyrow[q] / (float)(eh * padded_extent(q, sw, pw, S, W));
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) dxp[h * W + w] += g;
      }
    }
  }
}

/* --- the ops ------------------------------------------------------------------------------ */

ganfw_status ganfw_cpu_op_maxpool2d_forward(ganfw_backend *be, ganfw_op *op) {
  maxpool2d_forward(be, &op->shape.pool, op->in[0], op->out[0], op->out[1]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_maxpool2d_backward(ganfw_backend *be, ganfw_op *op) {
  maxpool2d_backward(be, &op->shape.pool, op->in[0], op->in[1], op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_avgpool2d_forward(ganfw_backend *be, ganfw_op *op) {
  avgpool2d_forward(be, &op->shape.pool, op->in[0], op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_avgpool2d_backward(ganfw_backend *be, ganfw_op *op) {
  avgpool2d_backward(be, &op->shape.pool, op->in[0], op->out[0]);
  return GANFW_OK;
}
