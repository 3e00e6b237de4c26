/* Element-wise kernels of the CUDA backend over n contiguous elements: the foreach ops of
 * the optimizers, activations (forward from x, backward from the output y), f32 <-> f16 /
 * bf16 casts and the bias broadcast of linear. Rounding is written out (__fmul_rn, fmaf)
 * wherever the CPU backend's result depends on it, so that these give the CPU's bits. */
#include "kernels.h"
#include "launch.cuh"

/* --- foreach --------------------------------------------------------------------------- */

static __global__ void fill_k(int64_t n, float *x, float v) {
  GANFW_CU_FOR(i, n) x[i] = v;
}
static __global__ void scale_k(int64_t n, float *x, float a) {
  GANFW_CU_FOR(i, n) x[i] = __fmul_rn(x[i], a);
}
static __global__ void add_scalar_k(int64_t n, float *x, float a) {
  GANFW_CU_FOR(i, n) x[i] = __fadd_rn(x[i], a);
}
static __global__ void add_k(int64_t n, float *out, const float *a, const float *b) {
  GANFW_CU_FOR(i, n) out[i] = __fadd_rn(a[i], b[i]);
}
/* y += alpha * x, fused as on the CPU */
static __global__ void axpy_k(int64_t n, float *y, float alpha, const float *x) {
  GANFW_CU_FOR(i, n) y[i] = fmaf(alpha, x[i], y[i]);
}
static __global__ void mul_k(int64_t n, float *out, const float *a, const float *b) {
  GANFW_CU_FOR(i, n) out[i] = __fmul_rn(a[i], b[i]);
}
/* y += (v * a) * b, the product with y fused */
static __global__ void addcmul_k(int64_t n, float *y, float v, const float *a, const float *b) {
  GANFW_CU_FOR(i, n) y[i] = fmaf(__fmul_rn(v, a[i]), b[i], y[i]);
}
/* y += (v * a) / b, nothing fused */
static __global__ void addcdiv_k(int64_t n, float *y, float v, const float *a, const float *b) {
  GANFW_CU_FOR(i, n) y[i] = __fadd_rn(y[i], __fdiv_rn(__fmul_rn(v, a[i]), b[i]));
}
static __global__ void sqrt_k(int64_t n, float *out, const float *x) {
  GANFW_CU_FOR(i, n) out[i] = __fsqrt_rn(x[i]);
}
/* lerp from the nearer end, as torch.lerp and the CPU */
static __global__ void lerp_k(int64_t n, float *y, const float *x, float w) {
  if (fabsf(w) < 0.5f) {
    GANFW_CU_FOR(i, n) y[i] = fmaf(w, __fsub_rn(x[i], y[i]), y[i]);
  } else {
    const float omw = __fsub_rn(1.0f, w);
    GANFW_CU_FOR(i, n) y[i] = fmaf(__fsub_rn(y[i], x[i]), omw, x[i]);
  }
}
/* y = max(y, x); NaN (a + b) when either is NaN */
static __global__ void maximum_k(int64_t n, float *y, const float *x) {
  GANFW_CU_FOR(i, n) {
    const float a = y[i], b = x[i];
    y[i] = (a != a || b != b) ? __fadd_rn(a, b) : (a > b ? a : b);
  }
}

extern "C" cudaError_t ganfw_cu_fill(cudaStream_t st, int64_t n, float *x, float v) {
  GANFW_CU_LAUNCH(st, n, fill_k, n, x, v);
}
extern "C" cudaError_t ganfw_cu_scale(cudaStream_t st, int64_t n, float *x, float a) {
  GANFW_CU_LAUNCH(st, n, scale_k, n, x, a);
}
extern "C" cudaError_t ganfw_cu_add_scalar(cudaStream_t st, int64_t n, float *x, float a) {
  GANFW_CU_LAUNCH(st, n, add_scalar_k, n, x, a);
}
extern "C" cudaError_t ganfw_cu_add(cudaStream_t st, int64_t n, float *out, const float *a,
                                    const float *b) {
  GANFW_CU_LAUNCH(st, n, add_k, n, out, a, b);
}
extern "C" cudaError_t ganfw_cu_axpy(cudaStream_t st, int64_t n, float *y, float alpha,
                                     const float *x) {
  GANFW_CU_LAUNCH(st, n, axpy_k, n, y, alpha, x);
}
extern "C" cudaError_t ganfw_cu_mul(cudaStream_t st, int64_t n, float *out, const float *a,
                                    const float *b) {
  GANFW_CU_LAUNCH(st, n, mul_k, n, out, a, b);
}
extern "C" cudaError_t ganfw_cu_addcmul(cudaStream_t st, int64_t n, float *y, float v,
                                        const float *a, const float *b) {
  GANFW_CU_LAUNCH(st, n, addcmul_k, n, y, v, a, b);
}
extern "C" cudaError_t ganfw_cu_addcdiv(cudaStream_t st, int64_t n, float *y, float v,
                                        const float *a, const float *b) {
  GANFW_CU_LAUNCH(st, n, addcdiv_k, n, y, v, a, b);
}
extern "C" cudaError_t ganfw_cu_sqrt(cudaStream_t st, int64_t n, float *out, const float *x) {
  GANFW_CU_LAUNCH(st, n, sqrt_k, n, out, x);
}
extern "C" cudaError_t ganfw_cu_lerp(cudaStream_t st, int64_t n, float *y, const float *x,
                                     float w) {
  GANFW_CU_LAUNCH(st, n, lerp_k, n, y, x, w);
}
extern "C" cudaError_t ganfw_cu_maximum(cudaStream_t st, int64_t n, float *y, const float *x) {
  GANFW_CU_LAUNCH(st, n, maximum_k, n, y, x);
}

/* --- activations ----------------------------------------------------------------------- */

static __device__ __forceinline__ float sigmoid_f(float x) {
  const float e = expf(-fabsf(x));
  return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}

static __global__ void act_forward_k(int32_t kind, float alpha, int64_t n, const float *x,
                                     float *y) {
  GANFW_CU_FOR(i, n) {
    const float v = x[i];
    float r;
    switch (kind) {
    case GANFW_ACT_RELU:
      r = v < 0.0f ? 0.0f : v; /* NaN passes */
      break;
    case GANFW_ACT_LEAKY_RELU:
      r = v * (v < 0.0f ? alpha : 1.0f);
      break;
    case GANFW_ACT_TANH:
      r = tanhf(v);
      break;
    case GANFW_ACT_SIGMOID:
      r = sigmoid_f(v);
      break;
    default:
      r = v;
      break;
    }
    y[i] = r;
  }
}

static __global__ void act_backward_k(int32_t kind, float alpha, int64_t n, const float *y,
                                      const float *dy, float *dx) {
  GANFW_CU_FOR(i, n) {
    const float o = y[i], g = dy[i];
    float r;
    switch (kind) {
    case GANFW_ACT_RELU:
      r = o > 0.0f ? g : 0.0f;
      break;
    case GANFW_ACT_LEAKY_RELU: /* alpha >= 0: y > 0 exactly when x > 0 */
      r = g * (o > 0.0f ? 1.0f : alpha);
      break;
    case GANFW_ACT_TANH:
      r = g * (1.0f - o * o);
      break;
    case GANFW_ACT_SIGMOID:
      r = g * o * (1.0f - o);
      break;
    default:
      r = g;
      break;
    }
    dx[i] = r;
  }
}

extern "C" cudaError_t ganfw_cu_act_forward(cudaStream_t st, int32_t kind, float alpha, int64_t n,
                                            const float *x, float *y) {
  GANFW_CU_LAUNCH(st, n, act_forward_k, kind, alpha, n, x, y);
}
extern "C" cudaError_t ganfw_cu_act_backward(cudaStream_t st, int32_t kind, float alpha, int64_t n,
                                             const float *y, const float *dy, float *dx) {
  GANFW_CU_LAUNCH(st, n, act_backward_k, kind, alpha, n, y, dy, dx);
}

/* --- casts: the integer rules of core/src/cpu/cast.h, so that every value (NaN payloads
 * too) converts to the same bits as on the CPU ------------------------------------------ */

static __device__ __forceinline__ uint16_t f32_to_f16_bits(float x) {
  const uint32_t f = __float_as_uint(x);
  const uint16_t sign = (uint16_t)((f >> 16) & 0x8000u);
  const uint32_t a = f & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf, or inf */
  if (a >= 0x38800000u) {                                  /* normal f16 */
    uint32_t m = a - 0x38000000u;
    m += 0x0fffu + ((m >> 13) & 1u);
    return (uint16_t)(sign | (m >> 13));
  }
  if (a <= 0x33000000u) return sign; /* <= 2^-25: ties to 0 */
  const uint32_t e = a >> 23;        /* f16 subnormal */
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t r = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) r++;
  return (uint16_t)(sign | r);
}

static __device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  uint32_t f;
  if (e == 0x1fu) {
    f = sign | 0x7f800000u | (m << 13);
    if (m) f |= 0x00400000u;
  } else if (e != 0) {
    f = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    f = sign;
  } else {
    const uint32_t p = 31u - (uint32_t)__clz(m);
    f = sign | ((p + 103u) << 23) | ((m << (23u - p)) & 0x7fffffu);
  }
  return __uint_as_float(f);
}

static __device__ __forceinline__ uint16_t f32_to_bf16_bits(float x) {
  const uint32_t f = __float_as_uint(x);
  const uint32_t rne = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
  const uint32_t nan = (f >> 16) | 0x40u;
  return (uint16_t)((f & 0x7fffffffu) > 0x7f800000u ? nan : rne);
}

static __global__ void f32_to_f16_k(int64_t n, const float *x, uint16_t *y) {
  GANFW_CU_FOR(i, n) y[i] = f32_to_f16_bits(x[i]);
}
static __global__ void f16_to_f32_k(int64_t n, const uint16_t *x, float *y) {
  GANFW_CU_FOR(i, n) y[i] = f16_bits_to_f32(x[i]);
}
static __global__ void f32_to_bf16_k(int64_t n, const float *x, uint16_t *y) {
  GANFW_CU_FOR(i, n) y[i] = f32_to_bf16_bits(x[i]);
}
static __global__ void bf16_to_f32_k(int64_t n, const uint16_t *x, float *y) {
  GANFW_CU_FOR(i, n) y[i] = __uint_as_float((uint32_t)x[i] << 16);
}

extern "C" cudaError_t ganfw_cu_f32_to_f16(cudaStream_t st, int64_t n, const float *x,
                                           uint16_t *y) {
  GANFW_CU_LAUNCH(st, n, f32_to_f16_k, n, x, y);
}
extern "C" cudaError_t ganfw_cu_f16_to_f32(cudaStream_t st, int64_t n, const uint16_t *x,
                                           float *y) {
  GANFW_CU_LAUNCH(st, n, f16_to_f32_k, n, x, y);
}
extern "C" cudaError_t ganfw_cu_f32_to_bf16(cudaStream_t st, int64_t n, const float *x,
                                            uint16_t *y) {
  GANFW_CU_LAUNCH(st, n, f32_to_bf16_k, n, x, y);
}
extern "C" cudaError_t ganfw_cu_bf16_to_f32(cudaStream_t st, int64_t n, const uint16_t *x,
                                            float *y) {
  GANFW_CU_LAUNCH(st, n, bf16_to_f32_k, n, x, y);
}

/* --- bias broadcast ---------------------------------------------------------------------- */

static __global__ void bias_rows_k(int64_t n, int64_t cols, const float *b, float *y) {
  GANFW_CU_FOR(i, n) y[i] = b[i % cols];
}

extern "C" cudaError_t ganfw_cu_bias_rows(cudaStream_t st, int64_t rows, int64_t cols,
                                          const float *b, float *y) {
  const int64_t n = rows * cols;
  GANFW_CU_LAUNCH(st, n, bias_rows_k, n, cols, b, y);
}
