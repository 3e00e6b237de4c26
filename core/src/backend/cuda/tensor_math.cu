/* Tensor math of the CUDA backend for the host's tensor_* ops, with the CPU backend's rules
 * (core/src/backend/cpu/tensor_math.c): element-wise maps, broadcast binary ops over four
 * dims, sums over a set of dims (in double, one fixed grid and order per shape, so results
 * repeat exactly) and the per-channel scale and shift. Basic arithmetic, sqrt and rsqrt are
 * rounded as on the CPU (__fadd_rn, __fsqrt_rn, ...); exp, log and pow are CUDA's expf,
 * logf and powf (within 2 ulp of the CPU's). */
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

#define MATH_THREADS 256
/* A reduction over fewer values than this runs one thread per output, else one block. */
#define MATH_BLOCK_MIN 256

static __device__ __forceinline__ float pow_scalar(float x, float p) {
  if (p == 2.0f) return __fmul_rn(x, x);
  if (p == 3.0f) return __fmul_rn(__fmul_rn(x, x), x);
  if (p == 0.5f) return __fsqrt_rn(x);
  if (p == -0.5f) return __fdiv_rn(1.0f, __fsqrt_rn(x));
  if (p == -1.0f) return __fdiv_rn(1.0f, x);
  if (p == -2.0f) return __fdiv_rn(1.0f, __fmul_rn(x, x));
  if (p == 1.0f) return x;
  if (p == 0.0f) return 1.0f;
  return powf(x, p);
}

static __device__ __forceinline__ float unary_apply(int32_t op, float v, float a, float b) {
  switch (op) {
  case GANFW_UNARY_ABS:
    return fabsf(v);
  case GANFW_UNARY_SIGN:
    return (float)((v > 0.0f) - (v < 0.0f));
  case GANFW_UNARY_EXP:
    return expf(v);
  case GANFW_UNARY_LOG:
    return logf(v);
  case GANFW_UNARY_SQRT:
    return __fsqrt_rn(v);
  case GANFW_UNARY_RSQRT:
    return __fdiv_rn(1.0f, __fsqrt_rn(v));
  case GANFW_UNARY_CLAMP: {
    if (v != v) return v;
    v = v < a ? a : v;
    return v > b ? b : v;
  }
  case GANFW_UNARY_MUL_SCALAR:
    return __fmul_rn(v, a);
  case GANFW_UNARY_ADD_SCALAR:
    return __fadd_rn(v, a);
  case GANFW_UNARY_POW_SCALAR:
    return pow_scalar(v, a);
  default:
    return v;
  }
}

static __device__ __forceinline__ float binary_apply(int32_t op, float p, float q) {
  switch (op) {
  case GANFW_BINARY_ADD:
    return __fadd_rn(p, q);
  case GANFW_BINARY_SUB:
    return __fsub_rn(p, q);
  case GANFW_BINARY_MUL:
    return __fmul_rn(p, q);
  case GANFW_BINARY_DIV:
    return __fdiv_rn(p, q);
  case GANFW_BINARY_MAXIMUM:
    return (p != p || q != q) ? __fadd_rn(p, q) : (p > q ? p : q);
  case GANFW_BINARY_MINIMUM:
    return (p != p || q != q) ? __fadd_rn(p, q) : (p < q ? p : q);
  default:
    return p;
  }
}

static __global__ void unary_k(int32_t op, int64_t n, float *out, const float *x, float a,
                               float b) {
  GANFW_CU_FOR(i, n) out[i] = unary_apply(op, x[i], a, b);
}

static __global__ void binary_same_k(int32_t op, int64_t n, float *out, const float *a,
                                     const float *b) {
  GANFW_CU_FOR(i, n) out[i] = binary_apply(op, a[i], b[i]);
}

static __global__ void binary_bcast_k(int32_t op, ganfw_bcast_shape s, int64_t n, float *out,
                                      const float *a, const float *b) {
  GANFW_CU_FOR(i, n) {
    const int64_t i3 = i % s.dim[3], i2 = i / s.dim[3] % s.dim[2];
    const int64_t i1 = i / (s.dim[3] * s.dim[2]) % s.dim[1];
    const int64_t i0 = i / (s.dim[3] * s.dim[2] * s.dim[1]);
    const int64_t ia = i0 * s.sa[0] + i1 * s.sa[1] + i2 * s.sa[2] + i3 * s.sa[3];
    const int64_t ib = i0 * s.sb[0] + i1 * s.sb[1] + i2 * s.sb[2] + i3 * s.sb[3];
    out[i] = binary_apply(op, a[ia], b[ib]);
  }
}

extern "C" cudaError_t ganfw_cu_unary(cudaStream_t st, int32_t op, int64_t n, float *out,
                                      const float *x, float a, float b) {
  GANFW_CU_LAUNCH(st, n, unary_k, op, n, out, x, a, b);
}

extern "C" cudaError_t ganfw_cu_binary(cudaStream_t st, int32_t op, const ganfw_bcast_shape *s,
                                       float *out, const float *a, const float *b) {
  const int64_t n = s->dim[0] * s->dim[1] * s->dim[2] * s->dim[3];
  if (s->same) {
    GANFW_CU_LAUNCH(st, n, binary_same_k, op, n, out, a, b);
  }
  GANFW_CU_LAUNCH(st, n, binary_bcast_k, op, *s, n, out, a, b);
}

/* The reduction as index arithmetic: output o sits at x offset base(o); its count reduced
 * values at base(o) + off(r), r in [0, count) in the row-major order of the reduced dims. */
typedef struct reduce_plan {
  int64_t od[4], rd[4], st[4];
  int64_t nout, count;
} reduce_plan;

static __device__ __forceinline__ int64_t reduce_base(const reduce_plan &p, int64_t o) {
  const int64_t o3 = o % p.od[3], o2 = o / p.od[3] % p.od[2];
  const int64_t o1 = o / (p.od[3] * p.od[2]) % p.od[1], o0 = o / (p.od[3] * p.od[2] * p.od[1]);
  return o0 * p.st[0] + o1 * p.st[1] + o2 * p.st[2] + o3;
}

static __device__ __forceinline__ int64_t reduce_off(const reduce_plan &p, int64_t r) {
  const int64_t r3 = r % p.rd[3], r2 = r / p.rd[3] % p.rd[2];
  const int64_t r1 = r / (p.rd[3] * p.rd[2]) % p.rd[1], r0 = r / (p.rd[3] * p.rd[2] * p.rd[1]);
  return r0 * p.st[0] + r1 * p.st[1] + r2 * p.st[2] + r3 * p.st[3];
}

/* Few values per output: one thread each, in order. */
static __global__ void reduce_thread_k(reduce_plan p, double scale, const float *x, float *out) {
  GANFW_CU_FOR(o, p.nout) {
    const float *base = x + reduce_base(p, o);
    double acc = 0.0;
    for (int64_t r = 0; r < p.count; r++) acc += (double)base[reduce_off(p, r)];
    out[o] = (float)(acc * scale);
  }
}

/* Many values per output: one block each, a fixed tree over the block's threads. */
static __global__ void reduce_block_k(reduce_plan p, double scale, const float *x, float *out) {
  __shared__ double part[MATH_THREADS];
  for (int64_t o = blockIdx.x; o < p.nout; o += gridDim.x) {
    const float *base = x + reduce_base(p, o);
    double acc = 0.0;
    for (int64_t r = threadIdx.x; r < p.count; r += blockDim.x)
      acc += (double)base[reduce_off(p, r)];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = MATH_THREADS / 2; w > 0; w >>= 1) {
      if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[o] = (float)(part[0] * scale);
    __syncthreads();
  }
}

extern "C" cudaError_t ganfw_cu_reduce_sum(cudaStream_t st, const ganfw_reduce_shape *s,
                                           double scale, const float *x, float *out) {
  reduce_plan p;
  p.st[3] = 1;
  for (int k = 2; k >= 0; k--) p.st[k] = p.st[k + 1] * s->dim[k + 1];
  p.nout = 1, p.count = 1;
  for (int k = 0; k < 4; k++) {
    const int reduced = (s->mask >> k) & 1u;
    p.od[k] = reduced ? 1 : s->dim[k];
    p.rd[k] = reduced ? s->dim[k] : 1;
    p.nout *= p.od[k];
    p.count *= p.rd[k];
  }
  if (p.nout <= 0) return cudaSuccess;
  if (p.count < MATH_BLOCK_MIN) {
    reduce_thread_k<<<ganfw_cu_blocks(p.nout), GANFW_CU_THREADS, 0, st>>>(p, scale, x, out);
  } else {
    const unsigned blocks = (unsigned)(p.nout < GANFW_CU_MAX_BLOCKS ? p.nout : GANFW_CU_MAX_BLOCKS);
    reduce_block_k<<<blocks, MATH_THREADS, 0, st>>>(p, scale, x, out);
  }
  return cudaGetLastError();
}

static __global__ void channel_affine_k(int64_t n, int64_t C, int64_t inner, const float *x,
                                        const float *s, const float *b, float *y) {
  GANFW_CU_FOR(i, n) {
    const int64_t c = i / inner % C;
    if (s && b)
      y[i] = fmaf(x[i], s[c], b[c]);
    else if (s)
      y[i] = __fmul_rn(x[i], s[c]);
    else
      y[i] = __fadd_rn(x[i], b ? b[c] : 0.0f);
  }
}

extern "C" cudaError_t ganfw_cu_channel_affine(cudaStream_t st, int64_t N, int64_t C, int64_t inner,
                                               const float *x, const float *s, const float *b,
                                               float *y) {
  const int64_t n = N * C * inner;
  GANFW_CU_LAUNCH(st, n, channel_affine_k, n, C, inner, x, s, b, y);
}
