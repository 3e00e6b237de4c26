/* Element-wise kernels of the CUDA backend over n contiguous elements: the foreach ops of
 * the optimizers, activations (forward from x, backward from the output y; f32 and 16-bit),
 * f32 <-> f16 / bf16 casts, the bias broadcast of linear, and the 16-bit bias add and
 * weight-gradient accumulation of the 16-bit ops. Rounding is written out (__fmul_rn, fmaf)
 * wherever the CPU backend's result depends on it, so that these give the CPU's bits. */
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/lp.cuh"

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

/* --- activations: one formula per kind, shared by the f32 and the 16-bit kernels -------- */

static __device__ __forceinline__ float sigmoid_f(float x) {
  const float e = expf(-fabsf(x));
  return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}

static __device__ __forceinline__ float act_f(int32_t kind, float alpha, float v) {
  switch (kind) {
  case GANFW_ACT_RELU:
    return v < 0.0f ? 0.0f : v; /* NaN passes */
  case GANFW_ACT_LEAKY_RELU:
    return v * (v < 0.0f ? alpha : 1.0f);
  case GANFW_ACT_TANH:
    return tanhf(v);
  case GANFW_ACT_SIGMOID:
    return sigmoid_f(v);
  default:
    return v;
  }
}

/* dx from the output o = f(x) and the gradient g */
static __device__ __forceinline__ float act_b(int32_t kind, float alpha, float o, float g) {
  switch (kind) {
  case GANFW_ACT_RELU:
    return o > 0.0f ? g : 0.0f;
  case GANFW_ACT_LEAKY_RELU: /* alpha >= 0: y > 0 exactly when x > 0 */
    return g * (o > 0.0f ? 1.0f : alpha);
  case GANFW_ACT_TANH:
    return g * (1.0f - o * o);
  case GANFW_ACT_SIGMOID:
    return g * o * (1.0f - o);
  default:
    return g;
  }
}

/* T = float, __half or __nv_bfloat16: computed in float, stored rounded once. */
template <typename T>
static __global__ void act_forward_k(int32_t kind, float alpha, int64_t n, const T *x, T *y) {
  GANFW_CU_FOR(i, n) y[i] = lp_store<T>(act_f(kind, alpha, lp_load(x[i])));
}

template <typename T>
static __global__ void act_backward_k(int32_t kind, float alpha, int64_t n, const T *y, const T *dy,
                                      T *dx) {
  GANFW_CU_FOR(i, n) dx[i] = lp_store<T>(act_b(kind, alpha, lp_load(y[i]), lp_load(dy[i])));
}

extern "C" cudaError_t ganfw_cu_act_forward(cudaStream_t st, int32_t kind, float alpha, int64_t n,
                                            const float *x, float *y) {
  GANFW_CU_LAUNCH(st, n, act_forward_k<float>, kind, alpha, n, x, y);
}
extern "C" cudaError_t ganfw_cu_act_backward(cudaStream_t st, int32_t kind, float alpha, int64_t n,
                                             const float *y, const float *dy, float *dx) {
  GANFW_CU_LAUNCH(st, n, act_backward_k<float>, kind, alpha, n, y, dy, dx);
}

template <typename T>
static cudaError_t act_forward_lp(cudaStream_t st, int32_t kind, float alpha, int64_t n,
                                  const void *x, void *y) {
  GANFW_CU_LAUNCH(st, n, act_forward_k<T>, kind, alpha, n, (const T *)x, (T *)y);
}
template <typename T>
static cudaError_t act_backward_lp(cudaStream_t st, int32_t kind, float alpha, int64_t n,
                                   const void *y, const void *dy, void *dx) {
  GANFW_CU_LAUNCH(st, n, act_backward_k<T>, kind, alpha, n, (const T *)y, (const T *)dy, (T *)dx);
}

extern "C" cudaError_t ganfw_cu_act_forward_lp(cudaStream_t st, int32_t dtype, int32_t kind,
                                               float alpha, int64_t n, const void *x, void *y) {
  GANFW_LP_DISPATCH(dtype, act_forward_lp, st, kind, alpha, n, x, y);
}
extern "C" cudaError_t ganfw_cu_act_backward_lp(cudaStream_t st, int32_t dtype, int32_t kind,
                                                float alpha, int64_t n, const void *y,
                                                const void *dy, void *dx) {
  GANFW_LP_DISPATCH(dtype, act_backward_lp, st, kind, alpha, n, y, dy, dx);
}

/* --- casts: the integer rules of core/src/backend/cpu/cast.h, so that every value (NaN payloads
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

/* --- 16-bit bias and weight-gradient helpers of the 16-bit ops ---------------------------- */

template <typename T>
static __global__ void bias_add_lp_k(int64_t n, int64_t C, int64_t HW, const float *b, T *y) {
  GANFW_CU_FOR(i, n) y[i] = lp_store<T>(lp_load(y[i]) + b[i / HW % C]);
}

template <typename T>
static cudaError_t bias_add_lp(cudaStream_t st, int64_t N, int64_t C, int64_t HW, const float *b,
                               void *y) {
  const int64_t n = N * C * HW;
  GANFW_CU_LAUNCH(st, n, bias_add_lp_k<T>, n, C, HW, b, (T *)y);
}

extern "C" cudaError_t ganfw_cu_bias_add_lp(cudaStream_t st, int32_t dtype, int64_t N, int64_t C,
                                            int64_t HW, const float *b, void *y) {
  GANFW_LP_DISPATCH(dtype, bias_add_lp, st, N, C, HW, b, y);
}

template <typename T>
static __global__ void lp_to_f32_k(int64_t n, const T *x, float *y, int accumulate) {
  if (accumulate) {
    GANFW_CU_FOR(i, n) y[i] += lp_load(x[i]);
  } else {
    GANFW_CU_FOR(i, n) y[i] = lp_load(x[i]);
  }
}

template <typename T>
static cudaError_t lp_to_f32(cudaStream_t st, int64_t n, const void *x, float *y, int accumulate) {
  GANFW_CU_LAUNCH(st, n, lp_to_f32_k<T>, n, (const T *)x, y, accumulate);
}

extern "C" cudaError_t ganfw_cu_lp_to_f32(cudaStream_t st, int32_t dtype, int64_t n, const void *x,
                                          float *y, int accumulate) {
  GANFW_LP_DISPATCH(dtype, lp_to_f32, st, n, x, y, accumulate);
}
