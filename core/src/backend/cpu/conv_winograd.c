/* conv2d with a 4x4 kernel and stride 2 (DC-GAN's k4 s2 p1 layers), x [N,C,H,W] * w [K,C,4,4]
 * -> y [N,K,P,Q], and its backward, in 16/9 fewer multiplies than im2col + GEMM.
 *
 * Polyphase: with xpad the zero-padded input, phase (i,j) of it X_ij[u][v] = xpad[2u+i][2v+j]
 * and of the weight W_ij[a][b] = w[2a+i][2b+j], the conv is a 2x2 stride-1 correlation
 * y[p][q] = sum over c and the 4 phases of sum_ab X_ij[p+a][q+b] W_ij[a][b]: 4C input
 * channels (c4 = phase*C + c). That runs on Winograd F(m x m, 2x2): an m x m output tile from
 * an A x A input tile (A = m+1) and A*A products instead of 4*m*m,
 *   y_tile = AT [ sum_c4 (G W G^T)[c4] .* (BT d BT^T)[c4] ] AT^T,
 * done as A*A GEMMs over the batch: M[t] [K, T] = U[t] [K, 4C] * V[t] [4C, T], t the position
 * in the A x A tile, T the tiles of a chunk of images. m = WG_M = 2 (9 products for 16): its
 * errors stay within 1.1-2.3x of im2col's (tests/test_conv_winograd.c); m = 4 (25 for 64,
 * -DWG_M=4) is 5-15x, too inexact. The backward passes are the exact adjoints of these three
 * maps, on the same GEMM engine and transforms:
 *   backward-data    E = AT^T dy AT per tile, Z[t] = U[t]^T E[t], dX_ij += BT^T Z BT
 *                    (neighbouring tiles share a phase row/column), then dx from the phases
 *   backward-filter  dU[t] [K, 4C] (+)= E[t] V[t]^T over the chunks, dW_ij = G^T dU G
 * Layout: tiles lie batch-innermost so that the transforms work on 16 images at once, with
 * lanes = the chunk's images rounded up to 16 (the extra lanes are zeros):
 *   U [A*A][K][4C], V [A*A][4C][T], M [A*A][K][T] (E and the forward result),
 *   T = (th, tw, n), and per thread slot one plane [rows][cols][lanes]: a padded input channel
 *   (2A x 2A input patches per tile, 2 rows/columns shared between neighbours) or an output
 *   one. Planes and images trade places by 16x16 transposes.
 * A chunk holds at most WG_CHUNK_BYTES of V and M, or 16 images. */
#include <omp.h>
#include <string.h>

#include "backend/cpu/cast.h"
#include "backend/cpu/conv_winograd.h"

#ifndef WG_M
#define WG_M 2
#endif
#define WG_A  (WG_M + 1)
#define WG_AA (WG_A * WG_A)
/* Tiles transformed together: one vector of 16 floats. */
#define WG_LANES 16
/* Thread slots with a plane of their own in the workspace (so that its size does not depend
 * on the thread count); the transforms use at most this many threads. */
#define WG_SLOTS       8
#define WG_CHUNK_BYTES ((size_t)8 << 20)
/* Work below this many multiply-adds stays on one thread. */
#define WG_PARALLEL_MIN_MACS (1 << 21)
/* Each of the A*A GEMMs of a pass is split in this many blocks of rows or columns. */
#define WG_GEMM_PARTS 4

#if WG_M == 4
/* F(4x4, 2x2) on the points 0, 1, -1, 2 and infinity, rows scaled so that BT is integral. */
static const float wg_AT[WG_M][WG_A] = {
    {1, 1, 1, 1, 0}, {0, 1, -1, 2, 0}, {0, 1, 1, 4, 0}, {0, 1, -1, 8, 1}};
static const float wg_G[WG_A][2] = {
    {0.5f, 0}, {0.5f, 0.5f}, {1.0f / 6.0f, -1.0f / 6.0f}, {1.0f / 6.0f, 1.0f / 3.0f}, {0, 1}};
static const float wg_BT[WG_A][WG_A] = {
    {2, -1, -2, 1, 0}, {0, 2, 1, -1, 0}, {0, -2, 3, -1, 0}, {0, -1, 0, 1, 0}, {0, 2, -1, -2, 1}};
#elif WG_M == 2
/* F(2x2, 2x2) on the points 1, -1 and infinity (a little more exact than 0, 1, infinity). */
static const float wg_AT[WG_M][WG_A] = {{1, 1, 0}, {1, -1, 1}};
static const float wg_G[WG_A][2] = {{0.5f, 0.5f}, {0.5f, -0.5f}, {0, 1}};
static const float wg_BT[WG_A][WG_A] = {{1, 1, 0}, {1, -1, 0}, {-1, 0, 1}};
#else
#error "WG_M must be 2 or 4"
#endif

/* 16 floats, loaded and stored unaligned through memcpy. The transforms
 * (conv_winograd_kernels.h) are compiled once per SIMD level (isa.h) and the level in use
 * runs; their loops over the constant matrices are unrolled so that the zero and unit
 * coefficients fold away. The vector arithmetic is the same at every level, so are the
 * bits. */
typedef float wg_v __attribute__((vector_size(WG_LANES * sizeof(float))));
#define WG_LOAD(v, p)  memcpy(&(v), (p), sizeof(wg_v))
#define WG_STORE(p, v) memcpy((p), &(v), sizeof(wg_v))
#define WG_MAC(acc, coef, x)                                                                       \
  do {                                                                                             \
    if ((coef) == 1.0f)                                                                            \
      (acc) += (x);                                                                                \
    else if ((coef) == -1.0f)                                                                      \
      (acc) -= (x);                                                                                \
    else if ((coef) != 0.0f)                                                                       \
      (acc) += (coef) * (x);                                                                       \
  } while (0)
#define WG_UNROLL _Pragma("GCC unroll 16")

/* Sizes of one shape: tiles, planes and chunks. */
typedef struct wg_geo {
  int64_t N, C, K, H, W, P, Q, ph, pw;
  int64_t C4, TH, TW; /* 4C; tile rows and columns */
  int64_t Hs, Ws;     /* input plane: padded rows/columns the tiles read */
  int64_t Pm, Qm;     /* output plane: m*TH x m*TW */
  int64_t chunk;      /* images per chunk */
  int64_t lanes;      /* chunk rounded up to 16: the plane's innermost dimension */
  int64_t tiles;      /* TH*TW*lanes: GEMM columns of a chunk */
  int64_t plane;      /* floats of one slot's plane */
  int64_t u, v, m;    /* floats of U, V, M */
  int64_t stage;      /* floats of one slot's staging plane (16-bit calls) */
} wg_geo;

static int64_t round16(int64_t n) {
  return (n + 15) / 16 * 16;
}

/* The sizes for chunks of `chunk` images. */
static void wg_chunk_sizes(wg_geo *g, int64_t chunk) {
  g->chunk = chunk < g->N ? chunk : g->N;
  g->lanes = round16(g->chunk);
  g->tiles = g->TH * g->TW * g->lanes;
  g->plane = round16(g->Hs * g->Ws * g->lanes);
  g->u = round16(WG_AA * g->K * g->C4);
  g->v = round16(WG_AA * g->C4 * g->tiles);
  g->m = round16(WG_AA * g->K * g->tiles);
  const int64_t pixels = g->H * g->W > g->P * g->Q ? g->H * g->W : g->P * g->Q;
  g->stage = round16(g->chunk * pixels);
}

static size_t wg_bytes(const wg_geo *g) {
  return (size_t)(g->u + g->v + g->m + WG_SLOTS * g->plane) * sizeof(float);
}

/* The chunk is the largest multiple of 16 images whose V and M stay within WG_CHUNK_BYTES
 * and whose whole workspace stays within im2col's for the shape (so that taking this path
 * never raises a step's memory), and at least 16 images (or the batch) when nothing fits;
 * ganfw_cpu_conv2d_winograd_use then refuses the shape. */
static wg_geo wg_geometry(const ganfw_conv2d_shape *s) {
  wg_geo g = {.N = s->N, .C = s->C, .K = s->K, .H = s->H, .W = s->W, .P = s->P, .Q = s->Q};
  g.ph = s->pad_h, g.pw = s->pad_w, g.C4 = 4 * s->C;
  g.TH = (s->P + WG_M - 1) / WG_M, g.TW = (s->Q + WG_M - 1) / WG_M;
  g.Hs = 2 * WG_M * g.TH + 2, g.Ws = 2 * WG_M * g.TW + 2;
  g.Pm = WG_M * g.TH, g.Qm = WG_M * g.TW;
  const size_t per_img = (size_t)(WG_AA * (g.C4 + g.K) * g.TH * g.TW) * sizeof(float);
  int64_t chunk = (int64_t)(WG_CHUNK_BYTES / per_img) / 16 * 16;
  if (chunk > round16(g.N)) chunk = round16(g.N);
  const size_t budget = ganfw_cpu_conv2d_im2col_workspace(s);
  for (; chunk > 16; chunk -= 16) {
    wg_chunk_sizes(&g, chunk);
    if (wg_bytes(&g) <= budget) return g;
  }
  wg_chunk_sizes(&g, 16);
  return g;
}

/* The workspace: U (or dU), V (or Z), M (or E), then the slots' planes; the activations'
 * dtype and, for 16-bit ones, the slots' staging planes (elsewhere). */
typedef struct wg_ws {
  float *u, *v, *m, *planes, *stage;
  int32_t dt;
} wg_ws;

static wg_ws wg_split(const wg_geo *g, int32_t dt, float *stage, void *ws) {
  wg_ws w = {.u = ws, .stage = stage, .dt = dt};
  w.v = w.u + g->u, w.m = w.v + g->v, w.planes = w.m + g->m;
  return w;
}

int ganfw_cpu_conv2d_winograd_fits(const ganfw_conv2d_shape *s) {
  return s->R == 4 && s->S == 4 && s->stride_h == 2 && s->stride_w == 2 && s->pad_h >= 0 &&
         s->pad_h <= 3 && s->pad_w >= 0 && s->pad_w <= 3 && s->P >= 1 && s->Q >= 1;
}

size_t ganfw_cpu_conv2d_winograd_workspace(const ganfw_conv2d_shape *s) {
  const wg_geo g = wg_geometry(s);
  return wg_bytes(&g);
}

size_t ganfw_cpu_conv2d_winograd_spare(const ganfw_conv2d_shape *s, size_t *bytes) {
  const wg_geo g = wg_geometry(s);
  *bytes = (size_t)g.v * sizeof(float);
  return (size_t)g.u * sizeof(float);
}

size_t ganfw_cpu_conv2d_winograd_stage_bytes(const ganfw_conv2d_shape *s) {
  const wg_geo g = wg_geometry(s);
  return (size_t)(WG_SLOTS * g.stage) * sizeof(float);
}

/* Threads for the transforms (each needs a slot) and the GEMMs. */
static int wg_threads(void) {
  const int t = ganfw_cpu_threads();
  return t < WG_SLOTS ? t : WG_SLOTS;
}

static float *wg_slot(const wg_geo *g, const wg_ws *w) {
  return w->planes + (int64_t)omp_get_thread_num() * g->plane;
}

static float *wg_slot_stage(const wg_geo *g, const wg_ws *w) {
  return w->stage + (int64_t)omp_get_thread_num() * g->stage;
}

/* --- 16x16 transposes ---------------------------------------------------------------------- */

/* In-register transpose of 16 rows of 16 floats: four rounds of swapping the off-diagonal
 * blocks of size 8, 4, 2 and 1 between row pairs (GCC's __builtin_shuffle; element by element
 * elsewhere). */
#if defined(__GNUC__) && !defined(__clang__)
typedef int wg_vi __attribute__((vector_size(WG_LANES * sizeof(int))));
#define WG_TRANSPOSE_ROUND(r, b, lo, hi)                                                           \
  do {                                                                                             \
    WG_UNROLL for (int i_ = 0; i_ < 16; i_++) {                                                    \
      if (i_ & (b)) continue;                                                                      \
      const wg_v a_ = (r)[i_], c_ = (r)[i_ + (b)];                                                 \
      (r)[i_] = __builtin_shuffle(a_, c_, lo);                                                     \
      (r)[i_ + (b)] = __builtin_shuffle(a_, c_, hi);                                               \
    }                                                                                              \
  } while (0)
#define WG_TRANSPOSE16(r)                                                                          \
  do {                                                                                             \
    WG_TRANSPOSE_ROUND(r, 8, ((wg_vi){0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}),    \
                       ((wg_vi){8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}));   \
    WG_TRANSPOSE_ROUND(r, 4, ((wg_vi){0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27}),  \
                       ((wg_vi){4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}));     \
    WG_TRANSPOSE_ROUND(r, 2, ((wg_vi){0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}),  \
                       ((wg_vi){2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}));     \
    WG_TRANSPOSE_ROUND(r, 1, ((wg_vi){0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}), \
                       ((wg_vi){1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}));      \
  } while (0)
#else
#define WG_TRANSPOSE16(r)                                                                          \
  do {                                                                                             \
    wg_v t_[16];                                                                                   \
    for (int i_ = 0; i_ < 16; i_++)                                                                \
      for (int j_ = 0; j_ < 16; j_++) t_[j_][i_] = (r)[i_][j_];                                    \
    memcpy((r), t_, sizeof t_);                                                                    \
  } while (0)
#endif

/* Where pixel e of an image's [rows][width] plane goes in a plane of lanes: row pitch `pitch`
 * floats, first pixel at `base`. */
typedef struct wg_map {
  int64_t width, base, pitch, lanes;
} wg_map;

/* The kernels, once per SIMD level (isa.h); a pass runs the level in use. */
#define GANFW_ISA_BODY "backend/cpu/conv_winograd_kernels.h"
#include "backend/cpu/isa_each.h"

typedef struct wg_kernels {
  void (*weights)(const wg_geo *g, const float *w, float *U);
  void (*filter)(const wg_geo *g, const float *dU, int accumulate, float *dw);
  void (*stage_input)(const wg_geo *g, const wg_ws *w, const void *x, int64_t n0, int64_t nb);
  void (*stage_dy)(const wg_geo *g, const wg_ws *w, const void *dy, int64_t n0, int64_t nb);
  void (*stage_output)(const wg_geo *g, const wg_ws *w, const float *b, void *y, int64_t n0,
                       int64_t nb);
  void (*stage_dx)(const wg_geo *g, const wg_ws *w, const float *b, void *dx, int64_t n0,
                   int64_t nb);
} wg_kernels;

#define WG_KERNELS(isa)                                                                            \
  {                                                                                                \
    wg_weights_##isa, wg_filter_##isa, wg_stage_input_##isa, wg_stage_dy_##isa,                    \
        wg_stage_output_##isa, wg_stage_dx_##isa                                                   \
  }
#if GANFW_CPU_ISA_MULTI
static const wg_kernels wg_by_isa[GANFW_CPU_ISA_COUNT] = {WG_KERNELS(portable), WG_KERNELS(avx2),
                                                          WG_KERNELS(avx512)};
#else
static const wg_kernels wg_by_isa[GANFW_CPU_ISA_COUNT] = {
    WG_KERNELS(portable), WG_KERNELS(portable), WG_KERNELS(portable)};
#endif

/* A*A GEMMs C[t] = op(A[t]) op(B[t]) (+ beta C[t]), t-th operands sa, sb, sc floats apart,
 * each split in WG_GEMM_PARTS blocks of rows or columns (multiples of 16); a block's GEMM
 * is one OpenBLAS call on its thread. */
typedef struct wg_gemm {
  int32_t dt; /* the activations' dtype: bf16 runs on gemm_bf16.c where the CPU has it */
  int ta, tb;
  int64_t M, N, K;
  const float *A;
  int64_t lda, sa;
  const float *B;
  int64_t ldb, sb;
  float beta;
  float *C;
  int64_t ldc, sc;
} wg_gemm;

static void wg_gemm_batch(const wg_gemm *p) {
  const int nt = ganfw_cpu_threads();
  const int split_n = p->N >= p->M;
  const int64_t dim = split_n ? p->N : p->M, units = (dim + 15) / 16;
  /* The parts depend on the shape alone, so that the result does not depend on the thread
   * count (gemm.c says why): A*A*WG_GEMM_PARTS tasks share out evenly over 1, 2, 3, 4, 6
   * and 9 threads. */
  int64_t parts = WG_GEMM_PARTS < units ? WG_GEMM_PARTS : units;
  if (parts < 1) parts = 1;
  const int parallel = nt > 1 && WG_AA * p->M * p->N * p->K >= WG_PARALLEL_MIN_MACS;
#pragma omp parallel for schedule(static) num_threads(nt) if (parallel)
  for (int64_t task = 0; task < WG_AA * parts; task++) {
    const int64_t t = task / parts, part = task % parts;
    int64_t i0 = units * part / parts * 16, i1 = units * (part + 1) / parts * 16;
    if (i1 > dim) i1 = dim;
    if (i1 <= i0) continue;
    const float *A = p->A + t * p->sa, *B = p->B + t * p->sb;
    float *C = p->C + t * p->sc;
    if (split_n) {
      ganfw_cpu_gemm_single_dt(p->dt, p->ta, p->tb, p->M, i1 - i0, p->K, 1.0f, A, p->lda,
                               p->tb ? B + i0 * p->ldb : B + i0, p->ldb, p->beta, C + i0, p->ldc);
    } else {
      ganfw_cpu_gemm_single_dt(p->dt, p->ta, p->tb, i1 - i0, p->N, p->K, 1.0f,
                               p->ta ? A + i0 : A + i0 * p->lda, p->lda, B, p->ldb, p->beta,
                               C + i0 * p->ldc, p->ldc);
    }
  }
}

/* --- the passes ---------------------------------------------------------------------------- */

void ganfw_cpu_conv2d_winograd_forward(const ganfw_conv2d_shape *s, int32_t dt, const void *x,
                                       const float *w, const float *b, void *y, float *stage,
                                       void *ws) {
  const wg_geo g = wg_geometry(s);
  const wg_ws cw = wg_split(&g, dt, stage, ws);
  const wg_kernels *wk = &wg_by_isa[ganfw_cpu_isa_level()];
  wk->weights(&g, w, cw.u);
  for (int64_t n0 = 0; n0 < g.N; n0 += g.chunk) {
    const int64_t nb = g.N - n0 < g.chunk ? g.N - n0 : g.chunk;
    wk->stage_input(&g, &cw, x, n0, nb);
    /* M[t] [K, T] = U[t] [K, 4C] * V[t] [4C, T] */
    const wg_gemm mm = {.dt = dt,
                        .M = g.K,
                        .N = g.tiles,
                        .K = g.C4,
                        .A = cw.u,
                        .lda = g.C4,
                        .sa = g.K * g.C4,
                        .B = cw.v,
                        .ldb = g.tiles,
                        .sb = g.C4 * g.tiles,
                        .C = cw.m,
                        .ldc = g.tiles,
                        .sc = g.K * g.tiles};
    wg_gemm_batch(&mm);
    wk->stage_output(&g, &cw, b, y, n0, nb);
  }
}

void ganfw_cpu_conv2d_winograd_backward(const ganfw_conv2d_shape *s, int32_t dt, const void *x,
                                        const float *w, const void *dy, void *dx, float *dw,
                                        int accumulate, const float *bdx, float *stage, void *ws) {
  const wg_geo g = wg_geometry(s);
  const wg_ws cw = wg_split(&g, dt, stage, ws);
  const wg_kernels *wk = &wg_by_isa[ganfw_cpu_isa_level()];
  int e_ready = 0; /* M holds E of the only chunk */
  if (dx) {
    wk->weights(&g, w, cw.u);
    for (int64_t n0 = 0; n0 < g.N; n0 += g.chunk) {
      const int64_t nb = g.N - n0 < g.chunk ? g.N - n0 : g.chunk;
      wk->stage_dy(&g, &cw, dy, n0, nb);
      /* Z[t] [4C, T] = U[t]^T [4C, K] * E[t] [K, T], in V */
      const wg_gemm mm = {.dt = dt,
                          .ta = 1,
                          .M = g.C4,
                          .N = g.tiles,
                          .K = g.K,
                          .A = cw.u,
                          .lda = g.C4,
                          .sa = g.K * g.C4,
                          .B = cw.m,
                          .ldb = g.tiles,
                          .sb = g.K * g.tiles,
                          .C = cw.v,
                          .ldc = g.tiles,
                          .sc = g.C4 * g.tiles};
      wg_gemm_batch(&mm);
      wk->stage_dx(&g, &cw, bdx, dx, n0, nb);
    }
    e_ready = g.chunk >= g.N;
  }
  if (dw) {
    for (int64_t n0 = 0; n0 < g.N; n0 += g.chunk) {
      const int64_t nb = g.N - n0 < g.chunk ? g.N - n0 : g.chunk;
      if (!e_ready) wk->stage_dy(&g, &cw, dy, n0, nb);
      wk->stage_input(&g, &cw, x, n0, nb);
      /* dU[t] [K, 4C] (+)= E[t] [K, T] * V[t]^T, in U */
      const wg_gemm mm = {.dt = dt,
                          .tb = 1,
                          .M = g.K,
                          .N = g.C4,
                          .K = g.tiles,
                          .A = cw.m,
                          .lda = g.tiles,
                          .sa = g.K * g.tiles,
                          .B = cw.v,
                          .ldb = g.tiles,
                          .sb = g.C4 * g.tiles,
                          .beta = n0 == 0 ? 0.0f : 1.0f,
                          .C = cw.u,
                          .ldc = g.C4,
                          .sc = g.K * g.C4};
      wg_gemm_batch(&mm);
    }
    wk->filter(&g, cw.u, accumulate, dw);
  }
}

/* The (shape, pass) pairs measured faster than im2col + GEMM at 1 and 2 threads
 * (bench_conv ... wino): DC-GAN's layers from 64 channels up, at 16 images or more (a chunk
 * pads the batch to 16 lanes) and outputs of 4x4 or more. With 1 or 3 input channels (the
 * first D layer, the last G layer) the GEMMs are too thin and im2col is 2-4x faster. */
int ganfw_cpu_conv2d_winograd_use(const ganfw_conv2d_shape *s, ganfw_conv_pass pass) {
  (void)pass; /* the three passes measured alike */
  return ganfw_cpu_conv2d_winograd_fits(s) && s->N >= 16 && s->C >= 64 && s->K >= 64 && s->P >= 4 &&
         s->Q >= 4 &&
         ganfw_cpu_conv2d_winograd_workspace(s) <= ganfw_cpu_conv2d_im2col_workspace(s);
}
