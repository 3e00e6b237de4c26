/* The BatchNorm2d kernels of batchnorm2d.c, compiled once per SIMD level by isa_each.h.
 * No include guard: included once per level. Each name below becomes that level's
 * (GANFW_ISA: x -> x_portable, x_avx2, x_avx512). Every kernel takes the activations'
 * dtype dt: f32 arrays are read and written in place, f16/bf16 ones in pieces of at most
 * BN_LP_CHUNK values converted to f32 on the stack, so the arithmetic (and its bits) is the
 * same for all three. */
#define load_f32         GANFW_ISA(load_f32)
#define out_f32          GANFW_ISA(out_f32)
#define store_f32        GANFW_ISA(store_f32)
#define lp_span          GANFW_ISA(lp_span)
#define affine_rows      GANFW_ISA(affine_rows)
#define lanes_add        GANFW_ISA(lanes_add)
#define lanes_flush      GANFW_ISA(lanes_flush)
#define tile_sums        GANFW_ISA(tile_sums)
#define bn_forward_train GANFW_ISA(bn_forward_train)
#define bn_forward_eval  GANFW_ISA(bn_forward_eval)
#define bn_backward      GANFW_ISA(bn_backward)

#include "backend/cpu/cast_kernels.h"

/* len values of x (dtype dt) from element off, as f32: x itself for f32, else converted
 * into buf. */
BN_INLINE const float *load_f32(int32_t dt, const void *x, int64_t off, int64_t len, float *buf) {
  if (dt == GANFW_DTYPE_F32) return (const float *)x + off;
  lp_to_f32(dt, len, (const uint16_t *)x + off, buf);
  return buf;
}

/* Where len results for y (dtype dt) from element off are written: y itself for f32, else
 * buf, which store_f32 then rounds into y. */
BN_INLINE float *out_f32(int32_t dt, void *y, int64_t off, float *buf) {
  return dt == GANFW_DTYPE_F32 ? (float *)y + off : buf;
}

BN_INLINE void store_f32(int32_t dt, const float *buf, int64_t off, int64_t len, void *y) {
  if (dt != GANFW_DTYPE_F32) lp_from_f32(dt, len, buf, (uint16_t *)y + off);
}

/* A piece of the n-row of a tile (nc rows of HW values, contiguous) is `span` whole rows
 * and, when HW > BN_LP_CHUNK, one row at a time in runs of `piece` values: the whole tile
 * row for f32, at most BN_LP_CHUNK values for 16-bit dtypes. */
BN_INLINE void lp_span(int32_t dt, int64_t HW, int64_t nc, int64_t *span, int64_t *piece) {
  if (dt == GANFW_DTYPE_F32) {
    *span = nc, *piece = HW;
  } else {
    *span = HW >= BN_LP_CHUNK ? 1 : BN_LP_CHUNK / HW;
    *piece = BN_LP_CHUNK;
  }
}

/* Statistics accumulate in BN_LANES lanes per channel: float lanes for at most BN_FLUSH
 * values each (cheap vector adds; rounding over <= 8 terms), flushed into double lanes,
 * reduced once per channel at the end. Measured against f64 PyTorch at the DC-GAN shapes,
 * dgamma/dbeta come out 2-3x closer than PyTorch's own f32 kernel. */
#define BN_LANES 16
#define BN_FLUSH 8

/* y = (x - m[k]) * a[k] + b[k] for channels [c0, c0 + nc) of images [n0, n1) of x and y
 * ([N,C,HW], images `stride` apart, dtype dt), in pieces that lp_span sizes for buf. */
BN_INLINE void affine_rows(int32_t dt, const void *x, void *y, int64_t n0, int64_t n1,
                           int64_t stride, int64_t HW, int64_t c0, int64_t nc, const float *fm,
                           const float *fa, const float *fb, float *buf) {
  int64_t span, piece;
  lp_span(dt, HW, nc, &span, &piece);
  for (int64_t n = n0; n < n1; n++) {
    for (int64_t k0 = 0; k0 < nc; k0 += span) {
      const int64_t k1 = nc - k0 < span ? nc : k0 + span;
      for (int64_t p = 0; p < HW; p += piece) {
        const int64_t plen = HW - p < piece ? HW - p : piece;
        const int64_t off = n * stride + (c0 + k0) * HW + p, len = (k1 - k0) * plen;
        const float *xn = load_f32(dt, x, off, len, buf);
        float *yn = out_f32(dt, y, off, buf);
        for (int64_t k = k0; k < k1; k++) {
          const float m = fm[k], a = fa[k], b = fb[k];
          const float *r = xn + (k - k0) * plen;
          float *o = yn + (k - k0) * plen;
          /* simd: y may be x (and is, for 16-bit dtypes: buf), element by element; no alias
           * check per row */
#pragma omp simd
          for (int64_t j = 0; j < plen; j++) o[j] = (r[j] - m) * a + b;
        }
        store_f32(dt, yn, off, len, y);
      }
    }
  }
}

/* s[l] += (a - p), sq[l] += (a - p) * (b - q) over len floats, element j in lane j % 16. */
BN_INLINE void lanes_add(const float *a, const float *b, int64_t len, float p, float q, float *s,
                         float *sq) {
  int64_t j = 0;
  for (; j + BN_LANES <= len; j += BN_LANES) {
#pragma omp simd
    for (int l = 0; l < BN_LANES; l++) {
      float v = a[j + l] - p;
      s[l] += v;
      sq[l] += v * (b[j + l] - q);
    }
  }
  for (int l = 0; j + l < len; l++) {
    float v = a[j + l] - p;
    s[l] += v;
    sq[l] += v * (b[j + l] - q);
  }
}

BN_INLINE void lanes_flush(float *s, float *sq, double *ds, double *dq) {
#pragma omp simd
  for (int l = 0; l < BN_LANES; l++) {
    ds[l] += s[l];
    dq[l] += sq[l];
    s[l] = sq[l] = 0.0f;
  }
}

/* For the nc channels of a tile starting at channel c0: sa[k] = sum(a - pa[k]) and
 * sab[k] = sum((a - pa[k]) * (b - pb[k])) over the N rows of channel c0+k (a row of HW
 * values at a + n*stride + (c0+k)*HW, dtype dt), visiting the rows in memory order. Each
 * channel sees the same sequence of lanes_add and lanes_flush for every dt. */
BN_INLINE void tile_sums(int32_t dt, const void *a, const void *b, int64_t N, int64_t stride,
                         int64_t HW, int64_t c0, int64_t nc, const float *pa, const float *pb,
                         double *sa, double *sab) {
  float fs[BN_TILE_MAX][BN_LANES], fq[BN_TILE_MAX][BN_LANES];
  double ds[BN_TILE_MAX][BN_LANES], dq[BN_TILE_MAX][BN_LANES];
  float abuf[BN_LP_CHUNK], bbuf[BN_LP_CHUNK];
  for (int64_t k = 0; k < nc; k++)
    for (int l = 0; l < BN_LANES; l++) fs[k][l] = fq[k][l] = 0.0f, ds[k][l] = dq[k][l] = 0.0;
  int64_t span, piece;
  lp_span(dt, HW, nc, &span, &piece);
  const int64_t per_row = (HW + BN_LANES - 1) / BN_LANES; /* values per lane per row */
  if (per_row <= BN_FLUSH) {
    /* Short rows (HW <= BN_LANES * BN_FLUSH <= BN_LP_CHUNK): several rows per flush. */
    const int64_t rows = BN_FLUSH / per_row;
    for (int64_t n0 = 0; n0 < N; n0 += rows) {
      const int64_t n1 = N - n0 < rows ? N : n0 + rows;
      for (int64_t n = n0; n < n1; n++) {
        for (int64_t k0 = 0; k0 < nc; k0 += span) {
          const int64_t k1 = nc - k0 < span ? nc : k0 + span;
          const int64_t off = n * stride + (c0 + k0) * HW, len = (k1 - k0) * HW;
          const float *an = load_f32(dt, a, off, len, abuf);
          const float *bn = b == a ? an : load_f32(dt, b, off, len, bbuf);
          for (int64_t k = k0; k < k1; k++)
            lanes_add(an + (k - k0) * HW, bn + (k - k0) * HW, HW, pa[k], pb[k], fs[k], fq[k]);
        }
      }
      for (int64_t k = 0; k < nc; k++) lanes_flush(fs[k], fq[k], ds[k], dq[k]);
    }
  } else {
    /* Long rows: a flush every BN_LANES * BN_FLUSH values (a divisor of BN_LP_CHUNK, so a
     * piece ends on a flush). */
    const int64_t chunk = BN_LANES * BN_FLUSH;
    for (int64_t n = 0; n < N; n++) {
      for (int64_t k0 = 0; k0 < nc; k0 += span) {
        const int64_t k1 = nc - k0 < span ? nc : k0 + span;
        for (int64_t p = 0; p < HW; p += piece) {
          const int64_t plen = HW - p < piece ? HW - p : piece;
          const int64_t off = n * stride + (c0 + k0) * HW + p, len = (k1 - k0) * plen;
          const float *an = load_f32(dt, a, off, len, abuf);
          const float *bn = b == a ? an : load_f32(dt, b, off, len, bbuf);
          for (int64_t k = k0; k < k1; k++) {
            const float *ak = an + (k - k0) * plen, *bk = bn + (k - k0) * plen;
            for (int64_t j = 0; j < plen; j += chunk) {
              const int64_t clen = plen - j < chunk ? plen - j : chunk;
              lanes_add(ak + j, bk + j, clen, pa[k], pb[k], fs[k], fq[k]);
              lanes_flush(fs[k], fq[k], ds[k], dq[k]);
            }
          }
        }
      }
    }
  }
  for (int64_t k = 0; k < nc; k++) {
    double ts = 0.0, tq = 0.0;
    for (int l = 0; l < BN_LANES; l++) ts += ds[k][l], tq += dq[k][l];
    sa[k] = ts;
    sab[k] = tq;
  }
}

static void bn_forward_train(ganfw_backend *be, int32_t dt, int64_t N, int64_t C, int64_t HW,
                             const void *x, const float *gamma, const float *beta, void *y,
                             float *running_mean, float *running_var, float momentum, float eps,
                             float *save_mean, float *save_invstd) {
  (void)be;
  const int64_t stride = C * HW, M = N * HW;
  if (M <= 0 || C <= 0) return;
  const int64_t tile = tile_channels(1, N, C, HW), tiles = (C + tile - 1) / tile;
#pragma omp parallel for schedule(static) if (N * C * HW >= BN_PARALLEL_MIN)
  for (int64_t t = 0; t < tiles; t++) {
    const int64_t c0 = t * tile, nc = C - c0 < tile ? C - c0 : tile;
    double s[BN_TILE_MAX], q[BN_TILE_MAX];
    float pivot[BN_TILE_MAX], fm[BN_TILE_MAX], fscale[BN_TILE_MAX], fshift[BN_TILE_MAX];
    float buf[BN_LP_CHUNK];
    /* Shifting by the channel's first value keeps E[v^2] - E[v]^2 exact enough even when
     * |mean| >> std. */
    for (int64_t k = 0; k < nc; k++) pivot[k] = *load_f32(dt, x, (c0 + k) * HW, 1, buf);
    tile_sums(dt, x, x, N, stride, HW, c0, nc, pivot, pivot, s, q);
    for (int64_t k = 0; k < nc; k++) {
      const int64_t c = c0 + k;
      double dmean = s[k] / (double)M;
      double var = q[k] / (double)M - dmean * dmean;
      if (var < 0.0) var = 0.0;
      double mean = pivot[k] + dmean;
      double invstd = 1.0 / sqrt(var + (double)eps);
      if (save_mean) save_mean[c] = (float)mean;
      if (save_invstd) save_invstd[c] = (float)invstd;
      if (running_mean)
        running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * mean);
      if (running_var) {
        double unbiased = M > 1 ? var * (double)M / (double)(M - 1) : var;
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * unbiased);
      }
      double g = gamma ? gamma[c] : 1.0;
      fm[k] = (float)mean;
      fscale[k] = (float)(g * invstd);
      fshift[k] = beta ? beta[c] : 0.0f;
    }
    /* y = (x - mean) * scale + beta: centring first keeps it accurate when |mean| >> std. */
    affine_rows(dt, x, y, 0, N, stride, HW, c0, nc, fm, fscale, fshift, buf);
  }
}

/* Eval: one pass. Images are split into up to BN_EVAL_BLOCKS blocks across threads; each
 * block computes the per-channel coefficients a tile at a time. */
#define BN_EVAL_BLOCKS 16
static void bn_forward_eval(ganfw_backend *be, int32_t dt, int64_t N, int64_t C, int64_t HW,
                            const void *x, const float *gamma, const float *beta, void *y,
                            const float *running_mean, const float *running_var, float eps) {
  (void)be;
  const int64_t stride = C * HW, blocks = N < BN_EVAL_BLOCKS ? N : BN_EVAL_BLOCKS;
#pragma omp parallel for schedule(static) if (N * C * HW >= BN_PARALLEL_MIN)
  for (int64_t blk = 0; blk < blocks; blk++) {
    const int64_t n0 = blk * N / blocks, n1 = (blk + 1) * N / blocks;
    float buf[BN_LP_CHUNK];
    for (int64_t c0 = 0; c0 < C; c0 += BN_TILE_MAX) {
      const int64_t nc = C - c0 < BN_TILE_MAX ? C - c0 : BN_TILE_MAX;
      float fm[BN_TILE_MAX], fa[BN_TILE_MAX], fb[BN_TILE_MAX];
      for (int64_t k = 0; k < nc; k++) {
        const int64_t c = c0 + k;
        fm[k] = running_mean[c];
        fa[k] = (float)((gamma ? gamma[c] : 1.0) / sqrt((double)running_var[c] + eps));
        fb[k] = beta ? beta[c] : 0.0f;
      }
      affine_rows(dt, x, y, n0, n1, stride, HW, c0, nc, fm, fa, fb, buf);
    }
  }
}

/* With xhat = (x - mean) * invstd and M = N*HW per channel:
 *   dbeta = sum(dy), dgamma = sum(dy * xhat),
 *   dx = gamma * invstd * (dy - dbeta/M - xhat * dgamma/M),
 * written as dx = dy * a + (x - mean) * b + c0 so that the second pass is one fused map. */
static void bn_backward(ganfw_backend *be, int32_t dt, int64_t N, int64_t C, int64_t HW,
                        const void *x, const void *dy, const float *gamma, const float *save_mean,
                        const float *save_invstd, void *dx, float *dgamma, float *dbeta,
                        int accumulate) {
  (void)be;
  const int64_t stride = C * HW, M = N * HW;
  if (M <= 0 || C <= 0) return;
  const int64_t tile = tile_channels(2, N, C, HW), tiles = (C + tile - 1) / tile;
#pragma omp parallel for schedule(static) if (N * C * HW >= BN_PARALLEL_MIN)
  for (int64_t t = 0; t < tiles; t++) {
    const int64_t c0 = t * tile, nc = C - c0 < tile ? C - c0 : tile;
    double sdy[BN_TILE_MAX], sdyx[BN_TILE_MAX]; /* sum(dy), sum(dy * (x - mean)) */
    float fa[BN_TILE_MAX], fb[BN_TILE_MAX], fc[BN_TILE_MAX], fm[BN_TILE_MAX];
    float zero[BN_TILE_MAX];
    for (int64_t k = 0; k < nc; k++) zero[k] = 0.0f, fm[k] = save_mean[c0 + k];
    tile_sums(dt, dy, x, N, stride, HW, c0, nc, zero, fm, sdy, sdyx);
    for (int64_t k = 0; k < nc; k++) {
      const int64_t c = c0 + k;
      const double invstd = save_invstd[c];
      const double sdyxhat = sdyx[k] * invstd;
      if (dbeta) dbeta[c] = (float)(accumulate ? dbeta[c] + sdy[k] : sdy[k]);
      if (dgamma) dgamma[c] = (float)(accumulate ? dgamma[c] + sdyxhat : sdyxhat);
      const double a = (gamma ? gamma[c] : 1.0) * invstd;
      fa[k] = (float)a;
      fb[k] = (float)(-a * invstd * invstd * sdyx[k] / (double)M);
      fc[k] = (float)(-a * sdy[k] / (double)M);
    }
    if (!dx) continue;
    float dybuf[BN_LP_CHUNK], xbuf[BN_LP_CHUNK];
    int64_t span, piece;
    lp_span(dt, HW, nc, &span, &piece);
    for (int64_t n = 0; n < N; n++) {
      for (int64_t k0 = 0; k0 < nc; k0 += span) {
        const int64_t k1 = nc - k0 < span ? nc : k0 + span;
        for (int64_t p = 0; p < HW; p += piece) {
          const int64_t plen = HW - p < piece ? HW - p : piece;
          const int64_t off = n * stride + (c0 + k0) * HW + p, len = (k1 - k0) * plen;
          const float *dyn = load_f32(dt, dy, off, len, dybuf);
          const float *xn = load_f32(dt, x, off, len, xbuf);
          float *dxn = out_f32(dt, dx, off, dybuf);
          for (int64_t k = k0; k < k1; k++) {
            const float a = fa[k], b = fb[k], c = fc[k], m = fm[k];
            const float *rdy = dyn + (k - k0) * plen, *rx = xn + (k - k0) * plen;
            float *o = dxn + (k - k0) * plen;
#pragma omp simd
            for (int64_t j = 0; j < plen; j++) o[j] = rdy[j] * a + (rx[j] - m) * b + c;
          }
          store_f32(dt, dxn, off, len, dx);
        }
      }
    }
  }
}

#undef load_f32
#undef out_f32
#undef store_f32
#undef lp_span
#undef affine_rows
#undef lanes_add
#undef lanes_flush
#undef tile_sums
#undef bn_forward_train
#undef bn_forward_eval
#undef bn_backward
