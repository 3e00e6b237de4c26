/* Times the CPU conv2d / conv_transpose2d kernels on the DC-GAN 32x32 layers (G: convT
 * 100-256-128-64-1, D: conv 1-64-128-256-1, 4x4 kernels, no bias) at batch 64: forward, and
 * backward computing dx and dw, median over runs. Compare with bench_conv_torch.py.
 *   bench_conv [threads] [runs] [batch] [clock]      (defaults: 2, 15, 64, wall)
 *   bench_conv [threads] [runs] [batch] [clock] wino
 * The second form compares, on the conv2d shapes of DC-GAN's 4x4 stride-2 layers at 32x32
 * and 64x64 (a convT layer is the adjoint of one of them: its forward is that conv's dx
 * pass), the Winograd kernels (conv_winograd.c) with im2col + GEMM pass by pass in one
 * process, alternating the two every run, and prints the medians and their ratio.
 * clock "cpu" times process CPU time instead of wall time: on a shared machine that is the
 * steadier measure of the work done, meaningful with 1 thread (with more it also counts
 * threads waiting for each other). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/conv_winograd.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

typedef struct bench_layer {
  const char *name;
  int transposed;
  int64_t C, K, H, stride, pad;
} bench_layer;

static const bench_layer layers[] = {
    {"G1 convT 100->256 1->4", 1, 100, 256, 1, 1, 0},
    {"G2 convT 256->128 4->8", 1, 256, 128, 4, 2, 1},
    {"G3 convT 128->64 8->16", 1, 128, 64, 8, 2, 1},
    {"G4 convT 64->1 16->32", 1, 64, 1, 16, 2, 1},
    {"D1 conv 1->64 32->16", 0, 1, 64, 32, 2, 1},
    {"D2 conv 64->128 16->8", 0, 64, 128, 16, 2, 1},
    {"D3 conv 128->256 8->4", 0, 128, 256, 8, 2, 1},
    {"D4 conv 256->1 4->1", 0, 256, 1, 4, 1, 0},
};

static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now_s(void) {
  struct timespec t;
  clock_gettime(bench_clock, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static float *random_buffer(int64_t n, unsigned *seed) {
  float *p = malloc((size_t)n * sizeof *p);
  if (!p) {
    fprintf(stderr, "bench_conv: out of memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) p[i] = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
  return p;
}

/* conv2d shapes (C -> K channels, H x H input) of 4x4 stride-2 padding-1 layers. */
typedef struct wino_shape {
  const char *name;
  int64_t C, K, H;
} wino_shape;

static const wino_shape wino_shapes[] = {
    {"D1 / G4(T) 1->64 32->16", 1, 64, 32},     {"D2 / G3(T) 64->128 16->8", 64, 128, 16},
    {"D3 / G2(T) 128->256 8->4", 128, 256, 8},  {"64px D1/G5 3->64 64->32", 3, 64, 64},
    {"64px D2/G4 64->128 32->16", 64, 128, 32}, {"64px D3/G3 128->256 16->8", 128, 256, 16},
    {"64px D4/G2 256->512 8->4", 256, 512, 8},
};

/* One pass (0 forward, 1 dx, 2 dw) of shape s on one path (wino or im2col). */
static void run_pass(const ganfw_conv2d_shape *s, int pass, int wino, const float *x,
                     const float *w, const float *dy, float *y, float *dx, float *dw, void *ws) {
  if (wino) {
    if (pass == 0) ganfw_cpu_conv2d_winograd_forward(s, GANFW_DTYPE_F32, x, w, NULL, y, NULL, ws);
    if (pass == 1)
      ganfw_cpu_conv2d_winograd_backward(s, GANFW_DTYPE_F32, x, w, dy, dx, NULL, 0, NULL, NULL, ws);
    if (pass == 2)
      ganfw_cpu_conv2d_winograd_backward(s, GANFW_DTYPE_F32, x, w, dy, NULL, dw, 0, NULL, NULL, ws);
  } else {
    if (pass == 0) ganfw_be_conv2d_forward(cpu(), s, x, w, NULL, y, ws);
    if (pass == 1) ganfw_be_conv2d_backward(cpu(), s, x, w, dy, dx, NULL, NULL, 0, ws);
    if (pass == 2) ganfw_be_conv2d_backward(cpu(), s, x, w, dy, NULL, dw, NULL, 0, ws);
  }
}

static int compare_wino(int runs, int64_t N) {
  static const char *pass_name[3] = {"fwd", "dx", "dw"};
  double *t[2] = {malloc((size_t)runs * sizeof(double)), malloc((size_t)runs * sizeof(double))};
  unsigned seed = 1;
  printf("%-28s %-4s %10s %10s %7s %9s %9s\n", "conv2d shape", "pass", "im2col ms", "wino ms",
         "ratio", "ws im2col", "ws wino");
  for (size_t l = 0; l < sizeof wino_shapes / sizeof wino_shapes[0]; l++) {
    const wino_shape *L = &wino_shapes[l];
    ganfw_conv2d_shape cs = {.N = N,
                             .C = L->C,
                             .H = L->H,
                             .W = L->H,
                             .K = L->K,
                             .R = 4,
                             .S = 4,
                             .stride_h = 2,
                             .stride_w = 2,
                             .pad_h = 1,
                             .pad_w = 1};
    if (ganfw_conv2d_shape_init(&cs) != GANFW_OK) return 1;
    const int64_t nx = N * L->C * L->H * L->H, ny = N * L->K * cs.P * cs.Q, nw = L->C * L->K * 16;
    const size_t wsi = ganfw_be_conv2d_workspace(cpu(), &cs);
    const size_t wsw = ganfw_cpu_conv2d_winograd_workspace(&cs);
    float *x = random_buffer(nx, &seed), *w = random_buffer(nw, &seed);
    float *dy = random_buffer(ny, &seed), *y = random_buffer(ny, &seed);
    float *dx = random_buffer(nx, &seed), *dw = random_buffer(nw, &seed);
    void *ws = malloc(wsi > wsw ? wsi : wsw);
    for (int pass = 0; pass < 3; pass++) {
      for (int r = -2; r < runs; r++) { /* two warm-up runs */
        for (int k = 0; k < 2; k++) {
          const int wino = (r + k) & 1; /* alternate which path goes first */
          double t0 = now_s();
          run_pass(&cs, pass, wino, x, w, dy, y, dx, dw, ws);
          if (r >= 0) t[wino][r] = now_s() - t0;
        }
      }
      const double mi = median(t[0], runs) * 1e3, mw = median(t[1], runs) * 1e3;
      printf("%-28s %-4s %10.3f %10.3f %7.3f %8.2fM %8.2fM\n", L->name, pass_name[pass], mi, mw,
             mw / mi, (double)wsi / (1 << 20), (double)wsw / (1 << 20));
    }
    free(x), free(w), free(dy), free(y), free(dx), free(dw), free(ws);
  }
  free(t[0]), free(t[1]);
  return 0;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  int runs = argc > 2 ? atoi(argv[2]) : 15;
  int64_t N = argc > 3 ? atoll(argv[3]) : 64;
  const char *clock_name = argc > 4 ? argv[4] : "wall";
  if (runs < 1 || runs > 1000 || N < 1 ||
      (strcmp(clock_name, "wall") && strcmp(clock_name, "cpu"))) {
    fprintf(stderr, "usage: bench_conv [threads] [runs 1..1000] [batch] [wall|cpu]\n");
    return 2;
  }
  const int wino = argc > 5 && !strcmp(argv[5], "wino");
  if (!strcmp(clock_name, "cpu")) bench_clock = CLOCK_PROCESS_CPUTIME_ID;
  ganfw_cpu_set_threads(NULL, threads);
  if (wino) {
    /* the conv2d ops take the im2col path; the Winograd kernels are called directly. */
    setenv("GANFW_CONV_IM2COL", "1", 1);
    printf("conv2d Winograd vs im2col, batch %lld, %d threads, median of %d, %s time\n",
           (long long)N, ganfw_cpu_threads(), runs, clock_name);
    return compare_wino(runs, N);
  }
  printf("ganfw conv kernels, batch %lld, %d threads, median of %d, %s time\n", (long long)N,
         ganfw_cpu_threads(), runs, clock_name);
  double total_f = 0, total_b = 0;
  double *tf = malloc((size_t)runs * sizeof *tf), *tb = malloc((size_t)runs * sizeof *tb);
  unsigned seed = 1;
  for (size_t l = 0; l < sizeof layers / sizeof layers[0]; l++) {
    const bench_layer *L = &layers[l];
    int64_t nx, ny, nw = L->C * L->K * 16;
    size_t ws_bytes;
    ganfw_conv2d_shape cs = {0};
    ganfw_convt2d_shape ts = {0};
    if (L->transposed) {
      ts = (ganfw_convt2d_shape){.N = N,
                                 .C = L->C,
                                 .H = L->H,
                                 .W = L->H,
                                 .K = L->K,
                                 .R = 4,
                                 .S = 4,
                                 .stride_h = L->stride,
                                 .stride_w = L->stride,
                                 .pad_h = L->pad,
                                 .pad_w = L->pad};
      if (ganfw_convt2d_shape_init(&ts) != GANFW_OK) return 1;
      nx = N * L->C * L->H * L->H;
      ny = N * L->K * ts.P * ts.Q;
      ws_bytes = ganfw_be_convt2d_workspace(cpu(), &ts);
    } else {
      cs = (ganfw_conv2d_shape){.N = N,
                                .C = L->C,
                                .H = L->H,
                                .W = L->H,
                                .K = L->K,
                                .R = 4,
                                .S = 4,
                                .stride_h = L->stride,
                                .stride_w = L->stride,
                                .pad_h = L->pad,
                                .pad_w = L->pad};
      if (ganfw_conv2d_shape_init(&cs) != GANFW_OK) return 1;
      nx = N * L->C * L->H * L->H;
      ny = N * L->K * cs.P * cs.Q;
      ws_bytes = ganfw_be_conv2d_workspace(cpu(), &cs);
    }
    float *x = random_buffer(nx, &seed), *w = random_buffer(nw, &seed);
    float *dy = random_buffer(ny, &seed), *y = random_buffer(ny, &seed);
    float *dx = random_buffer(nx, &seed), *dw = random_buffer(nw, &seed);
    void *ws = malloc(ws_bytes ? ws_bytes : 1);
    for (int r = -2; r < runs; r++) { /* two warm-up runs */
      double t0 = now_s();
      if (L->transposed) {
        ganfw_be_convt2d_forward(cpu(), &ts, x, w, NULL, y, ws);
      } else {
        ganfw_be_conv2d_forward(cpu(), &cs, x, w, NULL, y, ws);
      }
      double t1 = now_s();
      if (L->transposed) {
        ganfw_be_convt2d_backward(cpu(), &ts, x, w, dy, dx, dw, NULL, 0, ws);
      } else {
        ganfw_be_conv2d_backward(cpu(), &cs, x, w, dy, dx, dw, NULL, 0, ws);
      }
      double t2 = now_s();
      if (r >= 0) {
        tf[r] = t1 - t0;
        tb[r] = t2 - t1;
      }
    }
    double mf = median(tf, runs) * 1e3, mb = median(tb, runs) * 1e3;
    double lf = tf[0] * 1e3, lb = tb[0] * 1e3; /* sorted by median() */
    total_f += mf;
    total_b += mb;
    printf("%-26s fwd %8.3f ms  bwd %8.3f ms  (min %.3f, %.3f; workspace %.2f MiB)\n", L->name, mf,
           mb, lf, lb, (double)ws_bytes / (1 << 20));
    free(x), free(w), free(dy), free(y), free(dx), free(dw), free(ws);
  }
  printf("%-26s fwd %8.3f ms  bwd %8.3f ms\n", "total", total_f, total_b);
  free(tf), free(tb);
  return 0;
}
