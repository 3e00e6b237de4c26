/* The vector kernels of conv_winograd.c (weight and filter transforms, planes, tile
 * transforms, and the stages built on them), compiled once per SIMD level by isa_each.h.
 * No include guard: included once per level. Each name below becomes that level's
 * (GANFW_ISA: wg_x -> wg_x_portable, wg_x_avx2, wg_x_avx512). */
#define wg_weight_block         GANFW_ISA(wg_weight_block)
#define wg_filter_block         GANFW_ISA(wg_filter_block)
#define wg_weights              GANFW_ISA(wg_weights)
#define wg_filter               GANFW_ISA(wg_filter)
#define wg_off                  GANFW_ISA(wg_off)
#define wg_offsets              GANFW_ISA(wg_offsets)
#define wg_to_lanes             GANFW_ISA(wg_to_lanes)
#define wg_from_lanes           GANFW_ISA(wg_from_lanes)
#define wg_image_in_plane       GANFW_ISA(wg_image_in_plane)
#define wg_plane_in             GANFW_ISA(wg_plane_in)
#define wg_plane_out_input      GANFW_ISA(wg_plane_out_input)
#define wg_plane_in_output      GANFW_ISA(wg_plane_in_output)
#define wg_plane_out            GANFW_ISA(wg_plane_out)
#define wg_input_tiles          GANFW_ISA(wg_input_tiles)
#define wg_input_tiles_adjoint  GANFW_ISA(wg_input_tiles_adjoint)
#define wg_output_tiles         GANFW_ISA(wg_output_tiles)
#define wg_output_tiles_adjoint GANFW_ISA(wg_output_tiles_adjoint)
#define wg_rows_in              GANFW_ISA(wg_rows_in)
#define wg_rows_dst             GANFW_ISA(wg_rows_dst)
#define wg_rows_out             GANFW_ISA(wg_rows_out)
#define wg_stage_input          GANFW_ISA(wg_stage_input)
#define wg_stage_dy             GANFW_ISA(wg_stage_dy)
#define wg_stage_output         GANFW_ISA(wg_stage_output)
#define wg_stage_dx             GANFW_ISA(wg_stage_dx)

/* --- weights: U = G W_ij G^T and its adjoint dW_ij = G^T dU G, 16 input channels at a time */

/* U[t][k][ph*C + c] for c in [c0, c0+n), n <= 16, from w[k][c][4][4]. */
static void wg_weight_block(const wg_geo *g, const float *w, int64_t k, int64_t c0, int64_t n,
                            float *U) {
  wg_v buf[16]; /* buf[r*4 + s][lane] = w[k][c0 + lane][r][s] */
  if (n == WG_LANES) {
    WG_UNROLL for (int l = 0; l < 16; l++) WG_LOAD(buf[l], w + (k * g->C + c0 + l) * 16);
    WG_TRANSPOSE16(buf);
  } else {
    float tmp[16][WG_LANES] = {{0}};
    for (int64_t l = 0; l < n; l++)
      for (int rs = 0; rs < 16; rs++) tmp[rs][l] = w[(k * g->C + c0 + l) * 16 + rs];
    for (int rs = 0; rs < 16; rs++) WG_LOAD(buf[rs], tmp[rs]);
  }
  for (int ph = 0; ph < 4; ph++) {
    const int i = ph >> 1, j = ph & 1;
    wg_v t[WG_A][2];
    WG_UNROLL for (int x = 0; x < WG_A; x++) WG_UNROLL for (int b = 0; b < 2; b++) {
      wg_v acc = {0};
      WG_UNROLL for (int a = 0; a < 2; a++)
          WG_MAC(acc, wg_G[x][a], buf[(2 * a + i) * 4 + 2 * b + j]);
      t[x][b] = acc;
    }
    WG_UNROLL for (int x = 0; x < WG_A; x++) WG_UNROLL for (int y = 0; y < WG_A; y++) {
      wg_v acc = {0};
      WG_UNROLL for (int b = 0; b < 2; b++) WG_MAC(acc, wg_G[y][b], t[x][b]);
      float *dst = U + ((x * WG_A + y) * g->K + k) * g->C4 + ph * g->C + c0;
      if (n == WG_LANES) {
        WG_STORE(dst, acc);
      } else {
        float tmp[WG_LANES];
        WG_STORE(tmp, acc);
        memcpy(dst, tmp, (size_t)n * sizeof *dst);
      }
    }
  }
}

/* dw[k][c][4][4] (+)= G^T dU[t][k][ph*C + c] G for c in [c0, c0+n). */
static void wg_filter_block(const wg_geo *g, const float *dU, int64_t k, int64_t c0, int64_t n,
                            int accumulate, float *dw) {
  wg_v out[16]; /* out[r*4 + s][lane] = dw[k][c0 + lane][r][s] */
  for (int ph = 0; ph < 4; ph++) {
    const int i = ph >> 1, j = ph & 1;
    wg_v e[WG_A][WG_A], t[2][WG_A];
    WG_UNROLL for (int x = 0; x < WG_A; x++) WG_UNROLL for (int y = 0; y < WG_A; y++) {
      const float *src = dU + ((x * WG_A + y) * g->K + k) * g->C4 + ph * g->C + c0;
      if (n == WG_LANES) {
        WG_LOAD(e[x][y], src);
      } else {
        float tmp[WG_LANES] = {0};
        memcpy(tmp, src, (size_t)n * sizeof *tmp);
        WG_LOAD(e[x][y], tmp);
      }
    }
    WG_UNROLL for (int a = 0; a < 2; a++) WG_UNROLL for (int y = 0; y < WG_A; y++) {
      wg_v acc = {0};
      WG_UNROLL for (int x = 0; x < WG_A; x++) WG_MAC(acc, wg_G[x][a], e[x][y]);
      t[a][y] = acc;
    }
    WG_UNROLL for (int a = 0; a < 2; a++) WG_UNROLL for (int b = 0; b < 2; b++) {
      wg_v acc = {0};
      WG_UNROLL for (int y = 0; y < WG_A; y++) WG_MAC(acc, wg_G[y][b], t[a][y]);
      out[(2 * a + i) * 4 + 2 * b + j] = acc;
    }
  }
  if (n == WG_LANES) {
    WG_TRANSPOSE16(out);
    WG_UNROLL for (int l = 0; l < 16; l++) {
      float *d = dw + (k * g->C + c0 + l) * 16;
      if (accumulate) {
        wg_v old;
        WG_LOAD(old, d);
        out[l] += old;
      }
      WG_STORE(d, out[l]);
    }
    return;
  }
  float buf[16][WG_LANES];
  for (int rs = 0; rs < 16; rs++) WG_STORE(buf[rs], out[rs]);
  for (int64_t l = 0; l < n; l++) {
    float *d = dw + (k * g->C + c0 + l) * 16;
    for (int rs = 0; rs < 16; rs++) d[rs] = accumulate ? d[rs] + buf[rs][l] : buf[rs][l];
  }
}

static void wg_weights(const wg_geo *g, const float *w, float *U) {
  const int nt = wg_threads();
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && g->K * g->C >= 256)
  for (int64_t k = 0; k < g->K; k++)
    for (int64_t c0 = 0; c0 < g->C; c0 += WG_LANES)
      wg_weight_block(g, w, k, c0, g->C - c0 < WG_LANES ? g->C - c0 : WG_LANES, U);
}

static void wg_filter(const wg_geo *g, const float *dU, int accumulate, float *dw) {
  const int nt = wg_threads();
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && g->K * g->C >= 256)
  for (int64_t k = 0; k < g->K; k++)
    for (int64_t c0 = 0; c0 < g->C; c0 += WG_LANES)
      wg_filter_block(g, dU, k, c0, g->C - c0 < WG_LANES ? g->C - c0 : WG_LANES, accumulate, dw);
}

/* --- planes: one channel of nb images, batch innermost ------------------------------------ */

static int64_t wg_off(const wg_map *m, int64_t e) {
  return m->base + e / m->width * m->pitch + e % m->width * m->lanes;
}

/* off[j] = wg_off(m, e0 + j) for j < 16, with one division. */
static void wg_offsets(const wg_map *m, int64_t e0, int64_t off[16]) {
  int64_t h = e0 / m->width, w = e0 % m->width;
  for (int j = 0; j < 16; j++) {
    off[j] = m->base + h * m->pitch + w * m->lanes;
    if (++w == m->width) w = 0, h++;
  }
}

/* pl[off(e) + n] = src[n*stride + e] for nb images of npix pixels. */
static void wg_to_lanes(const float *src, int64_t stride, int64_t nb, int64_t npix, const wg_map *m,
                        float *pl) {
  int64_t n0 = 0;
  for (; n0 + 16 <= nb; n0 += 16) {
    int64_t e0 = 0;
    for (; e0 + 16 <= npix; e0 += 16) {
      wg_v r[16];
      int64_t off[16];
      wg_offsets(m, e0, off);
      WG_UNROLL for (int i = 0; i < 16; i++) WG_LOAD(r[i], src + (n0 + i) * stride + e0);
      WG_TRANSPOSE16(r);
      WG_UNROLL for (int j = 0; j < 16; j++) WG_STORE(pl + off[j] + n0, r[j]);
    }
    for (; e0 < npix; e0++)
      for (int64_t n = n0; n < n0 + 16; n++) pl[wg_off(m, e0) + n] = src[n * stride + e0];
  }
  for (int64_t e = 0; e < npix; e++) {
    float *d = pl + wg_off(m, e);
    for (int64_t n = n0; n < nb; n++) d[n] = src[n * stride + e];
  }
}

/* dst[n*stride + e] = pl[off(e) + n] + bias for nb images of npix pixels. */
static void wg_from_lanes(const float *pl, const wg_map *m, int64_t nb, int64_t npix, float bias,
                          float *dst, int64_t stride) {
  int64_t n0 = 0;
  wg_v bv;
  WG_UNROLL for (int i = 0; i < 16; i++) bv[i] = bias;
  for (; n0 + 16 <= nb; n0 += 16) {
    int64_t e0 = 0;
    for (; e0 + 16 <= npix; e0 += 16) {
      wg_v r[16];
      int64_t off[16];
      wg_offsets(m, e0, off);
      WG_UNROLL for (int j = 0; j < 16; j++) WG_LOAD(r[j], pl + off[j] + n0);
      WG_TRANSPOSE16(r);
      WG_UNROLL for (int i = 0; i < 16; i++) {
        r[i] += bv;
        WG_STORE(dst + (n0 + i) * stride + e0, r[i]);
      }
    }
    for (; e0 < npix; e0++)
      for (int64_t n = n0; n < n0 + 16; n++) dst[n * stride + e0] = pl[wg_off(m, e0) + n] + bias;
  }
  for (int64_t e = 0; e < npix; e++) {
    const float *sp = pl + wg_off(m, e);
    for (int64_t n = n0; n < nb; n++) dst[n * stride + e] = sp[n] + bias;
  }
}

/* The whole image lies in the input plane (false only for some odd sizes without padding,
 * whose last row or column no output reads). */
static int wg_image_in_plane(const wg_geo *g) {
  return g->H + g->ph <= g->Hs && g->W + g->pw <= g->Ws;
}

/* plane[hp][wp][n] = x[n][h][w] at hp = h + pad_h, wp = w + pad_w, zeros elsewhere; x is
 * channel c of the chunk's first image, images `stride` floats apart. */
static void wg_plane_in(const wg_geo *g, const float *x, int64_t stride, int64_t nb, float *pl) {
  const int64_t L = g->lanes, Ws = g->Ws;
  if (!wg_image_in_plane(g)) {
    memset(pl, 0, (size_t)(g->Hs * Ws * L) * sizeof *pl);
    for (int64_t n = 0; n < nb; n++)
      for (int64_t h = 0; h + g->ph < g->Hs && h < g->H; h++)
        for (int64_t w = 0; w + g->pw < Ws && w < g->W; w++)
          pl[((h + g->ph) * Ws + w + g->pw) * L + n] = x[n * stride + h * g->W + w];
    return;
  }
  if (nb < L) {
    memset(pl, 0, (size_t)(g->Hs * Ws * L) * sizeof *pl);
  } else {
    /* Only the padding: rows above and below, columns left and right. */
    memset(pl, 0, (size_t)(g->ph * Ws * L) * sizeof *pl);
    const int64_t below = g->ph + g->H;
    memset(pl + below * Ws * L, 0, (size_t)((g->Hs - below) * Ws * L) * sizeof *pl);
    const int64_t right = g->pw + g->W;
    for (int64_t hp = g->ph; hp < below; hp++) {
      memset(pl + hp * Ws * L, 0, (size_t)(g->pw * L) * sizeof *pl);
      memset(pl + (hp * Ws + right) * L, 0, (size_t)((Ws - right) * L) * sizeof *pl);
    }
  }
  const wg_map m = {g->W, (g->ph * Ws + g->pw) * L, Ws * L, L};
  wg_to_lanes(x, stride, nb, g->H * g->W, &m, pl);
}

/* dx[n][h][w] = plane[h + pad_h][w + pad_w][n] (0 outside the plane) + bias. */
static void wg_plane_out_input(const wg_geo *g, const float *pl, int64_t stride, int64_t nb,
                               float bias, float *dx) {
  const int64_t L = g->lanes;
  if (!wg_image_in_plane(g)) {
    for (int64_t n = 0; n < nb; n++)
      for (int64_t h = 0; h < g->H; h++)
        for (int64_t w = 0; w < g->W; w++) {
          const int64_t hp = h + g->ph, wp = w + g->pw;
          dx[n * stride + h * g->W + w] =
              (hp < g->Hs && wp < g->Ws ? pl[(hp * g->Ws + wp) * L + n] : 0.0f) + bias;
        }
    return;
  }
  const wg_map m = {g->W, (g->ph * g->Ws + g->pw) * L, g->Ws * L, L};
  wg_from_lanes(pl, &m, nb, g->H * g->W, bias, dx, stride);
}

/* plane[p][q][n] = dy[n][p][q] over the output plane (Pm x Qm), zeros beyond P x Q. */
static void wg_plane_in_output(const wg_geo *g, const float *dy, int64_t stride, int64_t nb,
                               float *pl) {
  const int64_t L = g->lanes;
  if (nb < L || g->P < g->Pm || g->Q < g->Qm)
    memset(pl, 0, (size_t)(g->Pm * g->Qm * L) * sizeof *pl);
  const wg_map m = {g->Q, 0, g->Qm * L, L};
  wg_to_lanes(dy, stride, nb, g->P * g->Q, &m, pl);
}

/* y[n][p][q] = plane[p][q][n] + bias. */
static void wg_plane_out(const wg_geo *g, const float *pl, int64_t stride, int64_t nb, float bias,
                         float *y) {
  const wg_map m = {g->Q, 0, g->Qm * g->lanes, g->lanes};
  wg_from_lanes(pl, &m, nb, g->P * g->Q, bias, y, stride);
}

/* --- tile transforms over one plane ------------------------------------------------------ */

/* V[t][ph*C + c][T] = BT d BT^T for every tile T of the input plane and phase ph; Vc points
 * at row c of V[0]. */
static void wg_input_tiles(const wg_geo *g, const float *pl, float *Vc) {
  const int64_t L = g->lanes, rs = g->Ws * L, tstep = g->C4 * g->tiles, pstep = g->C * g->tiles;
  for (int64_t th = 0; th < g->TH; th++)
    for (int64_t tw = 0; tw < g->TW; tw++)
      for (int64_t l = 0; l < L; l += WG_LANES) {
        const float *src = pl + (2 * WG_M * th * g->Ws + 2 * WG_M * tw) * L + l;
        float *dst = Vc + (th * g->TW + tw) * L + l;
        for (int ph = 0; ph < 4; ph++) {
          const float *s0 = src + (ph >> 1) * rs + (ph & 1) * L;
          wg_v d[WG_A][WG_A], t[WG_A][WG_A];
          WG_UNROLL for (int a = 0; a < WG_A; a++) WG_UNROLL for (int b = 0; b < WG_A; b++)
              WG_LOAD(d[a][b], s0 + 2 * a * rs + 2 * b * L);
          WG_UNROLL for (int x = 0; x < WG_A; x++) WG_UNROLL for (int b = 0; b < WG_A; b++) {
            wg_v acc = {0};
            WG_UNROLL for (int a = 0; a < WG_A; a++) WG_MAC(acc, wg_BT[x][a], d[a][b]);
            t[x][b] = acc;
          }
          WG_UNROLL for (int x = 0; x < WG_A; x++) WG_UNROLL for (int y = 0; y < WG_A; y++) {
            wg_v acc = {0};
            WG_UNROLL for (int b = 0; b < WG_A; b++) WG_MAC(acc, wg_BT[y][b], t[x][b]);
            WG_STORE(dst + (x * WG_A + y) * tstep + ph * pstep, acc);
          }
        }
      }
}

/* The adjoint: plane (zeroed) += BT^T Z[t][ph*C + c][T] BT over the tiles, at their phase
 * positions; Zc points at row c of Z[0]. */
static void wg_input_tiles_adjoint(const wg_geo *g, const float *Zc, float *pl) {
  const int64_t L = g->lanes, rs = g->Ws * L, tstep = g->C4 * g->tiles, pstep = g->C * g->tiles;
  for (int64_t th = 0; th < g->TH; th++)
    for (int64_t tw = 0; tw < g->TW; tw++)
      for (int64_t l = 0; l < L; l += WG_LANES) {
        float *dst = pl + (2 * WG_M * th * g->Ws + 2 * WG_M * tw) * L + l;
        const float *src = Zc + (th * g->TW + tw) * L + l;
        for (int ph = 0; ph < 4; ph++) {
          float *d0 = dst + (ph >> 1) * rs + (ph & 1) * L;
          wg_v z[WG_A][WG_A], t[WG_A][WG_A];
          WG_UNROLL for (int x = 0; x < WG_A; x++) WG_UNROLL for (int y = 0; y < WG_A; y++)
              WG_LOAD(z[x][y], src + (x * WG_A + y) * tstep + ph * pstep);
          WG_UNROLL for (int a = 0; a < WG_A; a++) WG_UNROLL for (int y = 0; y < WG_A; y++) {
            wg_v acc = {0};
            WG_UNROLL for (int x = 0; x < WG_A; x++) WG_MAC(acc, wg_BT[x][a], z[x][y]);
            t[a][y] = acc;
          }
          WG_UNROLL for (int a = 0; a < WG_A; a++) WG_UNROLL for (int b = 0; b < WG_A; b++) {
            wg_v acc, old;
            WG_LOAD(old, d0 + 2 * a * rs + 2 * b * L);
            acc = old;
            WG_UNROLL for (int y = 0; y < WG_A; y++) WG_MAC(acc, wg_BT[y][b], t[a][y]);
            WG_STORE(d0 + 2 * a * rs + 2 * b * L, acc);
          }
        }
      }
}

/* Output plane [Pm][Qm][lanes] = AT M[t][k][T] AT^T for every tile; Mk points at row k of
 * M[0]. */
static void wg_output_tiles(const wg_geo *g, const float *Mk, float *pl) {
  const int64_t L = g->lanes, tstep = g->K * g->tiles;
  for (int64_t th = 0; th < g->TH; th++)
    for (int64_t tw = 0; tw < g->TW; tw++)
      for (int64_t l = 0; l < L; l += WG_LANES) {
        const float *src = Mk + (th * g->TW + tw) * L + l;
        float *dst = pl + (WG_M * th * g->Qm + WG_M * tw) * L + l;
        wg_v mm[WG_A][WG_A], t[WG_M][WG_A];
        WG_UNROLL for (int x = 0; x < WG_A; x++) WG_UNROLL for (int y = 0; y < WG_A; y++)
            WG_LOAD(mm[x][y], src + (x * WG_A + y) * tstep);
        WG_UNROLL for (int a = 0; a < WG_M; a++) WG_UNROLL for (int y = 0; y < WG_A; y++) {
          wg_v acc = {0};
          WG_UNROLL for (int x = 0; x < WG_A; x++) WG_MAC(acc, wg_AT[a][x], mm[x][y]);
          t[a][y] = acc;
        }
        WG_UNROLL for (int a = 0; a < WG_M; a++) WG_UNROLL for (int b = 0; b < WG_M; b++) {
          wg_v acc = {0};
          WG_UNROLL for (int y = 0; y < WG_A; y++) WG_MAC(acc, wg_AT[b][y], t[a][y]);
          WG_STORE(dst + (a * g->Qm + b) * L, acc);
        }
      }
}

/* The adjoint: E[t][k][T] = AT^T dy AT for every tile of the output plane. */
static void wg_output_tiles_adjoint(const wg_geo *g, const float *pl, float *Ek) {
  const int64_t L = g->lanes, tstep = g->K * g->tiles;
  for (int64_t th = 0; th < g->TH; th++)
    for (int64_t tw = 0; tw < g->TW; tw++)
      for (int64_t l = 0; l < L; l += WG_LANES) {
        const float *src = pl + (WG_M * th * g->Qm + WG_M * tw) * L + l;
        float *dst = Ek + (th * g->TW + tw) * L + l;
        wg_v e[WG_M][WG_M], t[WG_A][WG_M];
        WG_UNROLL for (int a = 0; a < WG_M; a++) WG_UNROLL for (int b = 0; b < WG_M; b++)
            WG_LOAD(e[a][b], src + (a * g->Qm + b) * L);
        WG_UNROLL for (int x = 0; x < WG_A; x++) WG_UNROLL for (int b = 0; b < WG_M; b++) {
          wg_v acc = {0};
          WG_UNROLL for (int a = 0; a < WG_M; a++) WG_MAC(acc, wg_AT[a][x], e[a][b]);
          t[x][b] = acc;
        }
        WG_UNROLL for (int x = 0; x < WG_A; x++) WG_UNROLL for (int y = 0; y < WG_A; y++) {
          wg_v acc = {0};
          WG_UNROLL for (int b = 0; b < WG_M; b++) WG_MAC(acc, wg_AT[b][y], t[x][b]);
          WG_STORE(dst + (x * WG_A + y) * tstep, acc);
        }
      }
}

/* --- the three stages of a chunk ----------------------------------------------------------- */

/* The f32 rows a stage reads: channel `c` of the chunk's images [n0, n0+nb) of t ([N, ch,
 * pixels], dtype w->dt), `*stride` floats apart: t itself in f32, else the slot's staging
 * plane with the rows converted into it. */
static const float *wg_rows_in(const wg_geo *g, const wg_ws *w, const void *t, int64_t ch,
                               int64_t pixels, int64_t c, int64_t n0, int64_t nb, int64_t *stride) {
  const int64_t first = n0 * ch * pixels + c * pixels;
  if (w->dt == GANFW_DTYPE_F32) {
    *stride = ch * pixels;
    return (const float *)t + first;
  }
  float *st = wg_slot_stage(g, w);
  for (int64_t n = 0; n < nb; n++)
    ganfw_cpu_row_to_f32(w->dt, pixels, ganfw_cpu_elem(w->dt, t, first + n * ch * pixels),
                         st + n * pixels);
  *stride = pixels;
  return st;
}

/* Where a stage writes the f32 rows of channel c of the chunk's images of t: t itself in
 * f32, else the slot's staging plane, which wg_rows_out then rounds into t. */
static float *wg_rows_dst(const wg_geo *g, const wg_ws *w, void *t, int64_t ch, int64_t pixels,
                          int64_t c, int64_t n0, int64_t *stride) {
  if (w->dt == GANFW_DTYPE_F32) {
    *stride = ch * pixels;
    return (float *)t + n0 * ch * pixels + c * pixels;
  }
  *stride = pixels;
  return wg_slot_stage(g, w);
}

static void wg_rows_out(const wg_geo *g, const wg_ws *w, void *t, int64_t ch, int64_t pixels,
                        int64_t c, int64_t n0, int64_t nb) {
  if (w->dt == GANFW_DTYPE_F32) return;
  const float *st = wg_slot_stage(g, w);
  for (int64_t n = 0; n < nb; n++)
    ganfw_cpu_row_from_f32(w->dt, pixels, st + n * pixels,
                           ganfw_cpu_elem_mut(w->dt, t, (n0 + n) * ch * pixels + c * pixels));
}

/* V of the chunk's images [n0, n0+nb) of x. */
static void wg_stage_input(const wg_geo *g, const wg_ws *w, const void *x, int64_t n0, int64_t nb) {
  const int nt = wg_threads();
#pragma omp parallel num_threads(nt) if (nt > 1 && g->C > 1)
  {
    float *pl = wg_slot(g, w);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < g->C; c++) {
      int64_t stride;
      const float *src = wg_rows_in(g, w, x, g->C, g->H * g->W, c, n0, nb, &stride);
      wg_plane_in(g, src, stride, nb, pl);
      wg_input_tiles(g, pl, w->v + c * g->tiles);
    }
  }
}

/* E (in M) of the chunk's images of dy. */
static void wg_stage_dy(const wg_geo *g, const wg_ws *w, const void *dy, int64_t n0, int64_t nb) {
  const int nt = wg_threads();
#pragma omp parallel num_threads(nt) if (nt > 1 && g->K > 1)
  {
    float *pl = wg_slot(g, w);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < g->K; k++) {
      int64_t stride;
      const float *src = wg_rows_in(g, w, dy, g->K, g->P * g->Q, k, n0, nb, &stride);
      wg_plane_in_output(g, src, stride, nb, pl);
      wg_output_tiles_adjoint(g, pl, w->m + k * g->tiles);
    }
  }
}

/* y of the chunk's images from M: AT M AT^T per tile, + bias. */
static void wg_stage_output(const wg_geo *g, const wg_ws *w, const float *b, void *y, int64_t n0,
                            int64_t nb) {
  const int nt = wg_threads();
  const int64_t PQ = g->P * g->Q;
#pragma omp parallel num_threads(nt) if (nt > 1 && g->K > 1)
  {
    float *pl = wg_slot(g, w);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < g->K; k++) {
      wg_output_tiles(g, w->m + k * g->tiles, pl);
      int64_t stride;
      float *dst = wg_rows_dst(g, w, y, g->K, PQ, k, n0, &stride);
      wg_plane_out(g, pl, stride, nb, b ? b[k] : 0.0f, dst);
      wg_rows_out(g, w, y, g->K, PQ, k, n0, nb);
    }
  }
}

/* dx of the chunk's images from Z (in V): BT^T Z BT per tile, phases back into planes,
 * + b[c] when b is not NULL. */
static void wg_stage_dx(const wg_geo *g, const wg_ws *w, const float *b, void *dx, int64_t n0,
                        int64_t nb) {
  const int nt = wg_threads();
  const int64_t HW = g->H * g->W;
#pragma omp parallel num_threads(nt) if (nt > 1 && g->C > 1)
  {
    float *pl = wg_slot(g, w);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < g->C; c++) {
      memset(pl, 0, (size_t)(g->Hs * g->Ws * g->lanes) * sizeof *pl);
      wg_input_tiles_adjoint(g, w->v + c * g->tiles, pl);
      int64_t stride;
      float *dst = wg_rows_dst(g, w, dx, g->C, HW, c, n0, &stride);
      wg_plane_out_input(g, pl, stride, nb, b ? b[c] : 0.0f, dst);
      wg_rows_out(g, w, dx, g->C, HW, c, n0, nb);
    }
  }
}

#undef wg_weight_block
#undef wg_filter_block
#undef wg_weights
#undef wg_filter
#undef wg_off
#undef wg_offsets
#undef wg_to_lanes
#undef wg_from_lanes
#undef wg_image_in_plane
#undef wg_plane_in
#undef wg_plane_out_input
#undef wg_plane_in_output
#undef wg_plane_out
#undef wg_input_tiles
#undef wg_input_tiles_adjoint
#undef wg_output_tiles
#undef wg_output_tiles_adjoint
#undef wg_rows_in
#undef wg_rows_dst
#undef wg_rows_out
#undef wg_stage_input
#undef wg_stage_dy
#undef wg_stage_output
#undef wg_stage_dx
