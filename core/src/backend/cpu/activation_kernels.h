/* The activation kernels of activation.c, compiled once per SIMD level by isa_each.h.
 * No include guard: included once per level. Each name below becomes that level's
 * (GANFW_ISA: pick -> pick_avx2, ...). The drivers take the tensors' dtype dt and walk
 * them in chunks of ACT_CHUNK: f32 chunks in place, f16/bf16 ones converted to f32 on the
 * stack and rounded back, through the same row functions (so with the same bits). */
#define bits_to_float GANFW_ISA(bits_to_float)
#define float_to_bits GANFW_ISA(float_to_bits)
#define pick          GANFW_ISA(pick)
#define exp_vec       GANFW_ISA(exp_vec)
#define tanh_vec      GANFW_ISA(tanh_vec)
#define sigmoid_vec   GANFW_ISA(sigmoid_vec)
#define forward_row   GANFW_ISA(forward_row)
#define backward_row  GANFW_ISA(backward_row)
#define act_forward   GANFW_ISA(act_forward)
#define act_backward  GANFW_ISA(act_backward)

#include "backend/cpu/cast_kernels.h"

static inline float bits_to_float(uint32_t i) {
  float f;
  memcpy(&f, &i, sizeof f);
  return f;
}

static inline uint32_t float_to_bits(float f) {
  uint32_t i;
  memcpy(&i, &f, sizeof i);
  return i;
}

/* c ? a : b as a bit blend. Written as `c ? a : b` (or x * (c ? a : b)) GCC sinks the
 * arithmetic into the branch and, since it might trap, does not vectorise it for targets
 * without masked instructions (SSE2, AVX2). Both a and b are computed. */
static inline float pick(int c, float a, float b) {
  uint32_t m = 0u - (uint32_t)c;
  return bits_to_float((float_to_bits(a) & m) | (float_to_bits(b) & ~m));
}

/* exp(x) within ~2 ulp for every float: n = round(x / ln2), r = x - n ln2 (two-part ln2),
 * a degree-6 polynomial for exp(r), and 2^n applied as two factors so that results down to
 * the subnormals and up to inf come out right without branches. NaN stays NaN. */
static inline float exp_vec(float x) {
  x = pick(x < -104.0f, -104.0f, x);
  x = pick(x > 89.0f, 89.0f, x);
  /* Adding 1.5 * 2^23 rounds to an integer, which then sits in the low mantissa bits. */
  const float round_magic = 12582912.0f;
  float t = x * 1.44269504088896341f + round_magic;
  float nf = t - round_magic;
  /* nf as an integer, in [-150, 129] */
  int32_t n = (int32_t)(float_to_bits(t) & 0x7fffff) - 0x400000;
  float r = x - nf * 0.693359375f; /* ln2 = 0.693359375 - 2.12194440e-4, first part exact */
  r = r + nf * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  int32_t n1 = n >> 1, n2 = n - n1;
  return p * bits_to_float((uint32_t)(n1 + 127) << 23) * bits_to_float((uint32_t)(n2 + 127) << 23);
}

/* tanh: an odd polynomial near 0 (where 1 - 2/(e^2|x| + 1) would cancel), else the exp
 * form. The polynomial's input is clamped so that it stays finite when not chosen. */
static inline float tanh_vec(float x) {
  float ax = fabsf(x);
  float xs = pick(x < -0.625f, -0.625f, x);
  xs = pick(xs > 0.625f, 0.625f, xs);
  float z = xs * xs;
  float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                  1.33314422036e-1f) *
                     z -
                 3.33332819422e-1f) *
                    z * xs +
                xs;
  float big = copysignf(1.0f - 2.0f / (exp_vec(2.0f * ax) + 1.0f), x);
  return pick(ax < 0.625f, small, big);
}

/* sigmoid from exp(-|x|) so that neither side overflows: 1/(1+e), times e for x < 0. */
static inline float sigmoid_vec(float x) {
  float e = exp_vec(-fabsf(x));
  return pick(x < 0.0f, e, 1.0f) / (1.0f + e);
}

/* y = f(x) over len floats on this thread. */
ACT_INLINE void forward_row(int32_t kind, float alpha, int64_t len, const float *x, float *y) {
  switch (kind) {
  case GANFW_ACT_RELU:
#pragma omp simd
    for (int64_t i = 0; i < len; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i]; /* NaN passes */
    break;
  case GANFW_ACT_LEAKY_RELU:
#pragma omp simd
    for (int64_t i = 0; i < len; i++) y[i] = x[i] * pick(x[i] < 0.0f, alpha, 1.0f);
    break;
  case GANFW_ACT_TANH:
#pragma omp simd
    for (int64_t i = 0; i < len; i++) y[i] = tanh_vec(x[i]);
    break;
  case GANFW_ACT_SIGMOID:
#pragma omp simd
    for (int64_t i = 0; i < len; i++) y[i] = sigmoid_vec(x[i]);
    break;
  default: /* identity */
    if (y != x) memmove(y, x, (size_t)len * sizeof *y);
    break;
  }
}

/* dx = dy * f'(x), f' from the output y, over len floats on this thread. */
ACT_INLINE void backward_row(int32_t kind, float alpha, int64_t len, const float *y,
                             const float *dy, float *dx) {
  switch (kind) {
  case GANFW_ACT_RELU:
#pragma omp simd
    for (int64_t i = 0; i < len; i++) dx[i] = pick(y[i] <= 0.0f, 0.0f, dy[i]); /* as PyTorch */
    break;
  case GANFW_ACT_LEAKY_RELU: /* alpha >= 0, so y > 0 exactly when x > 0 */
#pragma omp simd
    for (int64_t i = 0; i < len; i++) dx[i] = dy[i] * pick(y[i] > 0.0f, 1.0f, alpha);
    break;
  case GANFW_ACT_TANH:
#pragma omp simd
    for (int64_t i = 0; i < len; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
    break;
  case GANFW_ACT_SIGMOID:
#pragma omp simd
    for (int64_t i = 0; i < len; i++) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
    break;
  default: /* identity */
    if (dx != dy) memmove(dx, dy, (size_t)len * sizeof *dx);
    break;
  }
}

/* y = f(x) over n values of dtype dt; y may be x. One call of the row function serves both
 * kinds of chunk, so that each element meets the same instructions (even which of two NaNs
 * comes out) for every dt. */
static void act_forward(int32_t dt, int32_t kind, float alpha, int64_t n, const void *x, void *y) {
  const int64_t chunks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
  const int64_t min =
      kind == GANFW_ACT_TANH || kind == GANFW_ACT_SIGMOID ? ACT_PARALLEL_MIN / 8 : ACT_PARALLEL_MIN;
  const int lp = dt != GANFW_DTYPE_F32;
#pragma omp parallel for schedule(static) if (n >= min)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t off = c * ACT_CHUNK, len = n - off < ACT_CHUNK ? n - off : ACT_CHUNK;
    _Alignas(64) float buf[ACT_CHUNK];
    if (lp) lp_to_f32(dt, len, (const uint16_t *)x + off, buf);
    forward_row(kind, alpha, len, lp ? buf : (const float *)x + off, lp ? buf : (float *)y + off);
    if (lp) lp_from_f32(dt, len, buf, (uint16_t *)y + off);
  }
}

/* dx = dy * f'(x) over n values of dtype dt; dx may be dy. As in act_forward, one call of
 * the row function for every dt. */
static void act_backward(int32_t dt, int32_t kind, float alpha, int64_t n, const void *y,
                         const void *dy, void *dx) {
  const int64_t chunks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
  const int lp = dt != GANFW_DTYPE_F32;
#pragma omp parallel for schedule(static) if (n >= ACT_PARALLEL_MIN)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t off = c * ACT_CHUNK, len = n - off < ACT_CHUNK ? n - off : ACT_CHUNK;
    _Alignas(64) float ybuf[ACT_CHUNK], dbuf[ACT_CHUNK];
    if (lp) {
      lp_to_f32(dt, len, (const uint16_t *)y + off, ybuf);
      lp_to_f32(dt, len, (const uint16_t *)dy + off, dbuf);
    }
    backward_row(kind, alpha, len, lp ? ybuf : (const float *)y + off,
                 lp ? dbuf : (const float *)dy + off, lp ? dbuf : (float *)dx + off);
    if (lp) lp_from_f32(dt, len, dbuf, (uint16_t *)dx + off);
  }
}

#undef bits_to_float
#undef float_to_bits
#undef pick
#undef exp_vec
#undef tanh_vec
#undef sigmoid_vec
#undef forward_row
#undef backward_row
#undef act_forward
#undef act_backward
