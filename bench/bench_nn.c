/* Times the CPU nn kernels at the DC-GAN shapes (batch 64, 32 and 64 px): BatchNorm2d
 * training forward and backward, ReLU / LeakyReLU(0.2) / tanh forward and backward, and
 * BCE-with-logits, and the classifier's 2x2 pooling. Prints one line per op, "name median_us
 * min_us", in the same format as bench/bench_nn_torch.py; bench/run_nn.sh runs both alternately and
 * prints the ratios.
 *
 *   build/bench/bench_nn [reps]        (default 50; OMP_NUM_THREADS sets the threads) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/ops.h"

/* The CPU backend: its ops run through the typed wrappers of backend/ops.h. */
static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct bufs {
  int64_t N, C, HW;
  float *x, *y, *dy, *dx, *gamma, *beta, *rm, *rv, *mean, *invstd, *dg, *db;
} bufs;

typedef void (*op_fn)(bufs *b);

static void bn_fwd(bufs *b) {
  ganfw_be_batchnorm2d_forward_train(cpu(), b->N, b->C, b->HW, b->x, b->gamma, b->beta, b->y, b->rm,
                                     b->rv, 0.1f, 1e-5f, b->mean, b->invstd);
}
static void bn_bwd(bufs *b) { /* after bn_fwd, for the saved statistics */
  ganfw_be_batchnorm2d_backward(cpu(), b->N, b->C, b->HW, b->x, b->dy, b->gamma, b->mean, b->invstd,
                                b->dx, b->dg, b->db, 0);
}
static void relu_fwd(bufs *b) {
  ganfw_be_act_forward(cpu(), GANFW_ACT_RELU, 0.0f, b->N * b->C * b->HW, b->x, b->y);
}
static void relu_bwd(bufs *b) {
  ganfw_be_act_backward(cpu(), GANFW_ACT_RELU, 0.0f, b->N * b->C * b->HW, b->y, b->dy, b->dx);
}
static void lrelu_fwd(bufs *b) {
  ganfw_be_act_forward(cpu(), GANFW_ACT_LEAKY_RELU, 0.2f, b->N * b->C * b->HW, b->x, b->y);
}
static void lrelu_bwd(bufs *b) {
  ganfw_be_act_backward(cpu(), GANFW_ACT_LEAKY_RELU, 0.2f, b->N * b->C * b->HW, b->y, b->dy, b->dx);
}
static void tanh_fwd(bufs *b) {
  ganfw_be_act_forward(cpu(), GANFW_ACT_TANH, 0.0f, b->N * b->C * b->HW, b->x, b->y);
}
static void tanh_bwd(bufs *b) {
  ganfw_be_act_backward(cpu(), GANFW_ACT_TANH, 0.0f, b->N * b->C * b->HW, b->y, b->dy, b->dx);
}
/* 2x2/2 pooling over [N,C,H,W] (the classifier's); y, dy and argmax fit in the buffers. */
static ganfw_pool2d_shape pool_shape(const bufs *b) {
  int64_t H = 1;
  while (H * H < b->HW) H++;
  ganfw_pool2d_shape s = {b->N, b->C, H, H, 2, 2, 2, 2, 0, 0, H / 2, H / 2};
  return s;
}
static void maxpool_fwd(bufs *b) {
  ganfw_pool2d_shape s = pool_shape(b);
  ganfw_be_maxpool2d_forward(cpu(), &s, b->x, b->y, (int32_t *)b->gamma);
}
static void maxpool_bwd(bufs *b) {
  ganfw_pool2d_shape s = pool_shape(b);
  ganfw_be_maxpool2d_backward(cpu(), &s, b->dy, (const int32_t *)b->gamma, b->dx);
}
static void avgpool_fwd(bufs *b) {
  ganfw_pool2d_shape s = pool_shape(b);
  ganfw_be_avgpool2d_forward(cpu(), &s, b->x, b->y);
}
static void avgpool_bwd(bufs *b) {
  ganfw_pool2d_shape s = pool_shape(b);
  ganfw_be_avgpool2d_backward(cpu(), &s, b->dy, b->dx);
}
static void bce_fwd_bwd(bufs *b) {
  int64_t n = b->N * b->C * b->HW;
  ganfw_be_bce_logits_forward(cpu(), n, b->x, b->gamma, b->mean);
  ganfw_be_bce_logits_backward(cpu(), n, b->x, b->gamma, 1.0f, b->dx);
}

/* Page-aligned like the framework's blocks (512-byte granules in 2 MiB segments): with
 * two buffers 64 bytes apart modulo 4 KiB, loads alias the previous stores ("4K
 * aliasing") and an element-wise op runs ~30% slower, which would measure malloc's
 * placement rather than the kernel. */
static float *make(int64_t n, unsigned seed) {
  float *p = aligned_alloc(4096, ((size_t)n * sizeof(float) + 4095) / 4096 * 4096);
  if (!p) {
    fprintf(stderr, "bench_nn: out of memory\n");
    exit(1);
  }
  srand(seed);
  for (int64_t i = 0; i < n; i++) p[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
  return p;
}

/* Times fn on fresh buffers of [N,C,H,W] after `setup` (when not NULL) has run once. */
static void run_with(const char *name, op_fn setup, op_fn fn, int64_t N, int64_t C, int64_t H,
                     int64_t W, int reps) {
  bufs b = {N, C, H * W, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  int64_t n = N * C * H * W, c = C > 64 ? C : 64;
  b.x = make(n, 1), b.y = make(n, 2), b.dy = make(n, 3), b.dx = make(n, 4);
  b.gamma = make(n > c ? n : c, 5), b.beta = make(c, 6), b.rm = make(c, 7), b.rv = make(c, 8);
  b.mean = make(c, 9), b.invstd = make(c, 10), b.dg = make(c, 11), b.db = make(c, 12);
  for (int64_t i = 0; i < c; i++) b.rv[i] = 1.0f, b.invstd[i] = 1.0f;
  if (setup) setup(&b);
  for (int i = 0; i < 5; i++) fn(&b); /* warm the caches and the thread pool */
  double *t = malloc((size_t)reps * sizeof(double));
  for (int r = 0; r < reps; r++) {
    double t0 = now_us();
    fn(&b);
    t[r] = now_us() - t0;
  }
  qsort(t, (size_t)reps, sizeof(double), cmp_double);
  char key[96];
  snprintf(key, sizeof key, "%s %lldx%lldx%lldx%lld", name, (long long)N, (long long)C,
           (long long)H, (long long)W);
  printf("%-34s %10.1f %10.1f\n", key, t[reps / 2], t[0]);
  fflush(stdout);
  free(t);
  float *all[] = {b.x, b.y, b.dy, b.dx, b.gamma, b.beta, b.rm, b.rv, b.mean, b.invstd, b.dg, b.db};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static void run(const char *name, op_fn fn, int64_t N, int64_t C, int64_t H, int64_t W, int reps) {
  run_with(name, NULL, fn, N, C, H, W, reps);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 50;
  if (reps < 1) reps = 1;
  /* BN + ReLU (generator) and BN + LeakyReLU (discriminator) shapes, 32 and 64 px. */
  static const int64_t shapes[][4] = {{64, 256, 4, 4}, {64, 128, 8, 8}, {64, 64, 16, 16},
                                      {64, 512, 4, 4}, {64, 256, 8, 8}, {64, 128, 16, 16},
                                      {64, 64, 32, 32}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    const int64_t *s = shapes[k];
    run("bn_fwd", bn_fwd, s[0], s[1], s[2], s[3], reps);
    run_with("bn_bwd", bn_fwd, bn_bwd, s[0], s[1], s[2], s[3], reps);
    run("relu_fwd", relu_fwd, s[0], s[1], s[2], s[3], reps);
    run_with("relu_bwd", relu_fwd, relu_bwd, s[0], s[1], s[2], s[3], reps);
    run("lrelu_fwd", lrelu_fwd, s[0], s[1], s[2], s[3], reps);
    run_with("lrelu_bwd", lrelu_fwd, lrelu_bwd, s[0], s[1], s[2], s[3], reps);
  }
  run("tanh_fwd", tanh_fwd, 64, 3, 32, 32, reps);
  run_with("tanh_bwd", tanh_fwd, tanh_bwd, 64, 3, 32, 32, reps);
  run("tanh_fwd", tanh_fwd, 64, 3, 64, 64, reps);
  run_with("tanh_bwd", tanh_fwd, tanh_bwd, 64, 3, 64, 64, reps);
  run("bce_fwd_bwd", bce_fwd_bwd, 64, 1, 1, 1, reps);
  /* The classifier's pooling (not in DC-GAN). */
  run("maxpool_fwd", maxpool_fwd, 64, 32, 28, 28, reps);
  run_with("maxpool_bwd", maxpool_fwd, maxpool_bwd, 64, 32, 28, 28, reps);
  run("avgpool_fwd", avgpool_fwd, 64, 32, 28, 28, reps);
  run("avgpool_bwd", avgpool_bwd, 64, 32, 28, 28, reps);
  return 0;
}
