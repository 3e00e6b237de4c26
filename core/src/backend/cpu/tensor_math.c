/* Tensor math on the CPU for the host's tensor_* ops (plugin layers and optimizers):
 * element-wise maps over n values, binary ops with broadcasting over four dims, sums over a
 * set of dims, and the per-channel scale and shift of x [N,C,inner]. Each output element is
 * computed by one thread in a fixed order (sums in double over the reduced dims in row-major
 * order), so no result depends on the thread count. */
#include <math.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many outputs a loop runs on one thread (memory-bound ops). */
#define MATH_OMP_MIN (1 << 15)

/* torch.pow(x, p) for a float p, with the exponents torch 1.13's CPU kernel computes without
 * pow() (pow_tensor_scalar_optimized_kernel): those give the same bits. */
static float pow_scalar(float x, float p) {
  if (p == 2.0f) return x * x;
  if (p == 3.0f) return x * x * x;
  if (p == 0.5f) return __builtin_sqrtf(x);
  if (p == -0.5f) return 1.0f / __builtin_sqrtf(x);
  if (p == -1.0f) return 1.0f / x;
  if (p == -2.0f) return 1.0f / (x * x);
  if (p == 1.0f) return x;
  if (p == 0.0f) return 1.0f;
  return powf(x, p);
}

/* torch.clamp(x, lo, hi): NaN stays NaN, lo > hi gives hi. */
static float clamp(float x, float lo, float hi) {
  if (x != x) return x;
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}

/* One unary map; the op is the same for a whole loop, so the switch is unswitched out of it
 * by the compiler (or predicted perfectly). */
static inline float unary_apply(int32_t op, float v, float a, float b) {
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
    return __builtin_sqrtf(v);
  case GANFW_UNARY_RSQRT:
    return 1.0f / __builtin_sqrtf(v);
  case GANFW_UNARY_CLAMP:
    return clamp(v, a, b);
  case GANFW_UNARY_MUL_SCALAR:
    return v * a;
  case GANFW_UNARY_ADD_SCALAR:
    return v + a;
  case GANFW_UNARY_POW_SCALAR:
    return pow_scalar(v, a);
  default:
    return v; /* the host checks op */
  }
}

static void unary(ganfw_backend *be, int32_t op, int64_t n, float *out, const float *x, float a,
                  float b) {
  (void)be;
#pragma omp parallel for if (n >= MATH_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = unary_apply(op, x[i], a, b);
}

static inline float binary_apply(int32_t op, float p, float q) {
  switch (op) {
  case GANFW_BINARY_ADD:
    return p + q;
  case GANFW_BINARY_SUB:
    return p - q;
  case GANFW_BINARY_MUL:
    return p * q;
  case GANFW_BINARY_DIV:
    return p / q;
  case GANFW_BINARY_MAXIMUM:
    return (p != p || q != q) ? p + q : (p > q ? p : q);
  case GANFW_BINARY_MINIMUM:
    return (p != p || q != q) ? p + q : (p < q ? p : q);
  default:
    return p; /* the host checks op */
  }
}

static void binary(ganfw_backend *be, int32_t op, const ganfw_bcast_shape *s, float *out,
                   const float *a, const float *b) {
  (void)be;
  const int64_t d0 = s->dim[0], d1 = s->dim[1], d2 = s->dim[2], d3 = s->dim[3];
  const int64_t n = d0 * d1 * d2 * d3;
  if (s->same) {
#pragma omp parallel for if (n >= MATH_OMP_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = binary_apply(op, a[i], b[i]);
    return;
  }
  /* out element (i0,i1,i2,i3) from a and b at their strides; rows (i0,i1) split across
   * threads */
#pragma omp parallel for if (n >= MATH_OMP_MIN) schedule(static)
  for (int64_t r = 0; r < d0 * d1; r++) {
    const int64_t i0 = r / d1, i1 = r % d1;
    float *o = out + r * d2 * d3;
    for (int64_t i2 = 0; i2 < d2; i2++) {
      const float *pa = a + i0 * s->sa[0] + i1 * s->sa[1] + i2 * s->sa[2];
      const float *pb = b + i0 * s->sb[0] + i1 * s->sb[1] + i2 * s->sb[2];
      for (int64_t i3 = 0; i3 < d3; i3++)
        o[i2 * d3 + i3] = binary_apply(op, pa[i3 * s->sa[3]], pb[i3 * s->sb[3]]);
    }
  }
}

static void reduce_sum(ganfw_backend *be, const ganfw_reduce_shape *s, double scale, const float *x,
                       float *out) {
  (void)be;
  int64_t od[4], rd[4], st[4];
  st[3] = 1;
  for (int k = 2; k >= 0; k--) st[k] = st[k + 1] * s->dim[k + 1];
  int64_t nout = 1;
  for (int k = 0; k < 4; k++) {
    const int reduced = (s->mask >> k) & 1u;
    od[k] = reduced ? 1 : s->dim[k];
    rd[k] = reduced ? s->dim[k] : 1;
    nout *= od[k];
  }
#pragma omp parallel for if (nout >= MATH_OMP_MIN / 8) schedule(static)
  for (int64_t o = 0; o < nout; o++) {
    const int64_t o3 = o % od[3], o2 = o / od[3] % od[2], o1 = o / (od[3] * od[2]) % od[1];
    const int64_t o0 = o / (od[3] * od[2] * od[1]);
    const float *base = x + o0 * st[0] + o1 * st[1] + o2 * st[2] + o3;
    double acc = 0.0;
    for (int64_t r0 = 0; r0 < rd[0]; r0++)
      for (int64_t r1 = 0; r1 < rd[1]; r1++)
        for (int64_t r2 = 0; r2 < rd[2]; r2++) {
          const float *p = base + r0 * st[0] + r1 * st[1] + r2 * st[2];
          for (int64_t r3 = 0; r3 < rd[3]; r3++) acc += (double)p[r3];
        }
    out[o] = (float)(acc * scale);
  }
}

static void channel_affine(ganfw_backend *be, int64_t N, int64_t C, int64_t inner, const float *x,
                           const float *s, const float *b, float *y) {
  (void)be;
  const int64_t n = N * C * inner;
#pragma omp parallel for if (n >= MATH_OMP_MIN) schedule(static)
  for (int64_t r = 0; r < N * C; r++) {
    const int64_t c = r % C;
    const float *xr = x + r * inner;
    float *yr = y + r * inner;
    if (s && b) {
      const float sc = s[c], bc = b[c];
      for (int64_t i = 0; i < inner; i++) yr[i] = fmaf(xr[i], sc, bc);
    } else if (s) {
      const float sc = s[c];
      for (int64_t i = 0; i < inner; i++) yr[i] = xr[i] * sc;
    } else {
      const float bc = b ? b[c] : 0.0f;
      for (int64_t i = 0; i < inner; i++) yr[i] = xr[i] + bc;
    }
  }
}

ganfw_status ganfw_cpu_op_unary(ganfw_backend *be, ganfw_op *op) {
  unary(be, op->mode, op->shape.d[0], op->out[0], op->in[0], (float)op->sc[0], (float)op->sc[1]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_binary(ganfw_backend *be, ganfw_op *op) {
  binary(be, op->mode, &op->shape.bcast, op->out[0], op->in[0], op->in[1]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_reduce_sum(ganfw_backend *be, ganfw_op *op) {
  reduce_sum(be, &op->shape.reduce, op->sc[0], op->in[0], op->out[0]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_channel_affine(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  channel_affine(be, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2], op->out[0]);
  return GANFW_OK;
}
