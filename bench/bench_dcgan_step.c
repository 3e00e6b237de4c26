/* Times ganfw's whole DC-GAN training step (ganfw_gan_step: D on real and on G(z), D's Adam
 * step, G through D, G's Adam step) on a random real batch [N,C,H,W] in [-1,1] and noise
 * [N,nz,1,1], without a data set. bench/dcgan_torch.py is the PyTorch twin and
 * bench/run_dcgan.sh runs both alternately. Prints one machine-readable line:
 *   ganfw median_ms=... min_ms=... rss_mib=... gflops=... alloc_peak_mib=...
 *         alloc_reserved_peak_mib=...
 * alloc_peak_mib and alloc_reserved_peak_mib are the allocator's allocated and reserved
 * peaks over the timed steps (reset after the warm-up, as the PyTorch twins reset
 * torch.cuda's peak memory stats).
 *
 *   build/bench/bench_dcgan_step [CONFIG] [--steps S] [--warmup W] [--threads T]
 *                                [--batch N] [--channels C] [--size HxW] [--layers] [--profile]
 *                                [--layout caching|planned]
 *
 * CONFIG defaults to configs/dcgan.yaml (run from the repository root; the plugins come
 * from the build tree). --layers also prints the per-layer FLOP table; --profile times every
 * backend op of the timed steps by op and shape (a few microseconds of overhead per op).
 * --layout sets device.memory_layout (default: the config's, planned unless it says); with
 * planned the step's layout is planned first as `ganfw CONFIG` does, and every step is marked
 * for the allocator so that it is served at its planned offsets. The line then also says
 * layout=... planned_steps=... */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/error.h"
#include "runtime/alloc.h"
#include "plan/probe.h"
#include "train/run.h"
#include "train/session.h"
#include "runtime/tensor.h"
#include "train/trainer.h"

#define MAX_CONVS 16

typedef struct bench_args {
  const char *config;
  int steps, warmup, threads, layers, profile;
  long long batch;
  int channels, height, width;
  const char *layout; /* NULL: the config's device.memory_layout */
} bench_args;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int usage(const char *why) {
  fprintf(stderr,
          "bench_dcgan_step: %s\n"
          "usage: bench_dcgan_step [CONFIG] [--steps S] [--warmup W] [--threads T] [--batch N]\n"
          "                        [--channels C] [--size HxW] [--layers] [--profile]\n"
          "                        [--layout caching|planned]\n",
          why);
  return 2;
}

/* An integer option value of at least `min`; -1 when it is not one. */
static long long number(const char *v, long long min) {
  char *end = NULL;
  long long n = v ? strtoll(v, &end, 10) : -1;
  return (v && *v && end && *end == '\0' && n >= min) ? n : -1;
}

static int parse_args(int argc, char **argv, bench_args *a) {
  *a = (bench_args){"configs/dcgan.yaml", 20, 5, 0, 0, 0, 0, 1, 32, 32, NULL};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (o[0] != '-') {
      a->config = o;
    } else if (strcmp(o, "--layers") == 0) {
      a->layers = 1;
    } else if (strcmp(o, "--profile") == 0) {
      a->profile = 1;
    } else if (strcmp(o, "--layout") == 0) {
      if (!v || (strcmp(v, "caching") != 0 && strcmp(v, "planned") != 0))
        return usage("--layout needs caching or planned");
      a->layout = v;
      i++;
    } else if (strcmp(o, "--size") == 0) {
      if (!v || sscanf(v, "%dx%d", &a->height, &a->width) != 2 || a->height < 1 || a->width < 1)
        return usage("--size needs HxW, e.g. 32x32");
      i++;
    } else {
      int *slot = strcmp(o, "--steps") == 0      ? &a->steps
                  : strcmp(o, "--warmup") == 0   ? &a->warmup
                  : strcmp(o, "--threads") == 0  ? &a->threads
                  : strcmp(o, "--channels") == 0 ? &a->channels
                                                 : NULL;
      if (!slot && strcmp(o, "--batch") != 0) {
        fprintf(stderr, "bench_dcgan_step: unknown option '%s'\n", o);
        return usage("see the options below");
      }
      const long long n = number(v, slot == &a->warmup ? 0 : 1);
      if (n < 0 || n > 1000000) return usage("an option needs a number (positive but --warmup)");
      if (slot)
        *slot = (int)n;
      else
        a->batch = n;
      i++;
    }
  }
  return -1;
}

/* One convolution of the step: C -> K channels, R x S kernel, over a P x Q grid, where the
 * grid is the output of a conv and the input of a transposed conv (the smaller side of
 * both: each of the P*Q positions meets every C*R*S weight of every K). */
typedef struct conv_flops {
  const char *name;
  int transposed;
  int64_t c, k, r, s, p, q;
} conv_flops;

/* The convolutions of a DC-GAN net from its weight shapes: conv2d weights are [K,C,R,S],
 * conv_transpose2d weights [C,K,R,S]. The grids follow the DC-GAN structure: D halves
 * the image with every stride-2 conv down to 4x4, then a 4x4 valid conv to 1x1; G starts
 * at 1x1, its first convT makes 4x4, and every later one doubles. Returns the count. */
static int dcgan_convs(ganfw_net *net, int transposed, int64_t h, int64_t w,
                       conv_flops out[MAX_CONVS]) {
  int n = 0;
  int64_t count = ganfw_net_param_count(net);
  for (int64_t i = 0; i < count && n < MAX_CONVS; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    if (ganfw_net_param_info(net, i, &p) != GANFW_OK) break;
    const char *want = transposed ? "conv_transpose2d" : "conv2d";
    if (strcmp(p.layer_type, want) != 0 || p.value->ndim != 4) continue;
    const int64_t *sh = p.value->shape;
    conv_flops *f = &out[n++];
    *f = (conv_flops){
        p.name, transposed, transposed ? sh[0] : sh[1], transposed ? sh[1] : sh[0], sh[2], sh[3],
        0,      0};
    if (transposed) {
      f->p = h, f->q = w; /* the input grid */
      h = n == 1 ? h * sh[2] : h * 2, w = n == 1 ? w * sh[3] : w * 2;
    } else {
      const int valid = h <= sh[2] && w <= sh[3]; /* the final 4x4 -> 1x1 */
      h = valid ? h - sh[2] + 1 : h / 2, w = valid ? w - sh[3] + 1 : w / 2;
      f->p = h, f->q = w; /* the output grid */
    }
  }
  return n;
}

/* 2*N*K*C*R*S*P*Q: one pass (forward, backward-data or backward-filter) of a conv. */
static double pass_flops(const conv_flops *f, int64_t n) {
  return 2.0 * (double)n * (double)f->k * (double)f->c * (double)f->r * (double)f->s *
         (double)f->p * (double)f->q;
}

/* The FLOPs of one training step (see README): D forward 3x (real, fake, G step), G
 * forward 2x (no-grad fake, G step); D backward with filter grads 2x (real, fake) and with
 * data grads 3x (real, fake, G step) but never into its first layer's input except in the
 * G step; G backward with filter grads and data grads into every layer but the first. */
static double step_flops(ganfw_session *s, int64_t n, int print) {
  conv_flops d[MAX_CONVS], g[MAX_CONVS];
  int nd = dcgan_convs(s->discriminator, 0, s->data_info.height, s->data_info.width, d);
  int ng = dcgan_convs(s->generator, 1, 1, 1, g);
  double total = 0;
  for (int i = 0; i < nd + ng; i++) {
    const int is_d = i < nd;
    const conv_flops *f = is_d ? &d[i] : &g[i - nd];
    const int first = is_d ? i == 0 : i == nd;
    const double one = pass_flops(f, n);
    const int passes = is_d ? 3 + 2 + (first ? 1 : 3) : 2 + 1 + (first ? 0 : 1);
    total += passes * one;
    if (print)
      printf("# %s %-14s %-6s C=%-4lld K=%-4lld %lldx%lld grid %lldx%lld  %8.1f MFLOP/pass "
             "x %d passes\n",
             is_d ? "D" : "G", f->name, f->transposed ? "convT" : "conv", (long long)f->c,
             (long long)f->k, (long long)f->r, (long long)f->s, (long long)f->p, (long long)f->q,
             one * 1e-6, passes);
  }
  if (print) printf("# total %.3f GFLOP per step\n", total * 1e-9);
  return total;
}

/* --- --profile: every backend op of the step timed by op and shape ---------------------
 * The backend's op table is swapped for a copy whose entries time the original ones (with
 * a synchronize around each on an asynchronous backend), keyed by op and shape. */
#define PROF_MAX 160

typedef struct prof_entry {
  char key[112];
  double ms, flops;
  int64_t calls;
} prof_entry;

static prof_entry prof[PROF_MAX];
static int n_prof;
static const ganfw_backend_vt *prof_orig;
static ganfw_backend_vt prof_vt;

static double prof_begin(ganfw_backend *be) {
  if (prof_orig->synchronize) prof_orig->synchronize(be);
  return now_ms();
}

static void prof_end(ganfw_backend *be, double t0, double flops, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void prof_end(ganfw_backend *be, double t0, double flops, const char *fmt, ...) {
  if (prof_orig->synchronize) prof_orig->synchronize(be);
  const double ms = now_ms() - t0;
  char key[sizeof prof[0].key];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(key, sizeof key, fmt, ap);
  va_end(ap);
  int i = 0;
  while (i < n_prof && strcmp(prof[i].key, key) != 0) i++;
  if (i == n_prof) {
    if (n_prof == PROF_MAX)
      i = PROF_MAX - 1, snprintf(key, sizeof key, "(other ops)");
    else
      n_prof++;
    snprintf(prof[i].key, sizeof prof[i].key, "%s", key);
  }
  prof[i].ms += ms, prof[i].flops += flops, prof[i].calls++;
}

static const char *grads(const float *dx, const float *dw) {
  return dx && dw ? "dx+dw" : dx ? "dx" : dw ? "dw" : "-";
}

static void p_conv2d_forward(ganfw_backend *be, const ganfw_conv2d_shape *c, const float *x,
                             const float *w, const float *b, float *y, void *ws) {
  double t0 = prof_begin(be);
  prof_orig->conv2d_forward(be, c, x, w, b, y, ws);
  const double f = 2.0 * c->N * c->K * c->C * c->R * c->S * c->P * c->Q;
  prof_end(be, t0, f, "conv2d  fwd       %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld", (long long)c->C,
           (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P, (long long)c->Q);
}

static void p_conv2d_backward(ganfw_backend *be, const ganfw_conv2d_shape *c, const float *x,
                              const float *w, const float *dy, float *dx, float *dw, float *db,
                              int accumulate, void *ws) {
  double t0 = prof_begin(be);
  prof_orig->conv2d_backward(be, c, x, w, dy, dx, dw, db, accumulate, ws);
  const double f =
      ((dx != NULL) + (dw != NULL)) * 2.0 * c->N * c->K * c->C * c->R * c->S * c->P * c->Q;
  prof_end(be, t0, f, "conv2d  bwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld", grads(dx, dw),
           (long long)c->C, (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P,
           (long long)c->Q);
}

static void p_convt2d_forward(ganfw_backend *be, const ganfw_convt2d_shape *c, const float *x,
                              const float *w, const float *b, float *y, void *ws) {
  double t0 = prof_begin(be);
  prof_orig->convt2d_forward(be, c, x, w, b, y, ws);
  const double f = 2.0 * c->N * c->K * c->C * c->R * c->S * c->H * c->W;
  prof_end(be, t0, f, "convT   fwd       %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld", (long long)c->C,
           (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P, (long long)c->Q);
}

static void p_convt2d_backward(ganfw_backend *be, const ganfw_convt2d_shape *c, const float *x,
                               const float *w, const float *dy, float *dx, float *dw, float *db,
                               int accumulate, void *ws) {
  double t0 = prof_begin(be);
  prof_orig->convt2d_backward(be, c, x, w, dy, dx, dw, db, accumulate, ws);
  const double f =
      ((dx != NULL) + (dw != NULL)) * 2.0 * c->N * c->K * c->C * c->R * c->S * c->H * c->W;
  prof_end(be, t0, f, "convT   bwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld", grads(dx, dw),
           (long long)c->C, (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P,
           (long long)c->Q);
}

static void p_bn_forward_train(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, const float *x,
                               const float *gamma, const float *beta, float *y, float *rm,
                               float *rv, float momentum, float eps, float *mean, float *invstd) {
  double t0 = prof_begin(be);
  prof_orig->batchnorm2d_forward_train(be, N, C, HW, x, gamma, beta, y, rm, rv, momentum, eps, mean,
                                       invstd);
  prof_end(be, t0, 0, "bn2d    fwd       C=%-4lld HW=%lld", (long long)C, (long long)HW);
}

static void p_bn_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, const float *x,
                          const float *dy, const float *gamma, const float *mean,
                          const float *invstd, float *dx, float *dgamma, float *dbeta,
                          int accumulate) {
  double t0 = prof_begin(be);
  prof_orig->batchnorm2d_backward(be, N, C, HW, x, dy, gamma, mean, invstd, dx, dgamma, dbeta,
                                  accumulate);
  prof_end(be, t0, 0, "bn2d    bwd %-5s C=%-4lld HW=%lld", dgamma ? "dx+dp" : "dx", (long long)C,
           (long long)HW);
}

static const char *act_name(int32_t kind) {
  return kind == GANFW_ACT_RELU         ? "relu"
         : kind == GANFW_ACT_LEAKY_RELU ? "lrelu"
         : kind == GANFW_ACT_TANH       ? "tanh"
                                        : "act";
}

static void p_act_forward(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *x,
                          float *y) {
  double t0 = prof_begin(be);
  prof_orig->act_forward(be, kind, alpha, n, x, y);
  prof_end(be, t0, 0, "%-7s fwd       n=%lld", act_name(kind), (long long)n);
}

static void p_act_backward(ganfw_backend *be, int32_t kind, float alpha, int64_t n, const float *y,
                           const float *dy, float *dx) {
  double t0 = prof_begin(be);
  prof_orig->act_backward(be, kind, alpha, n, y, dy, dx);
  prof_end(be, t0, 0, "%-7s bwd       n=%lld", act_name(kind), (long long)n);
}

/* The native 16-bit entries: the same keys with the dtype after the pass. */
static const char *lp_name(int32_t dtype) {
  return dtype == GANFW_DTYPE_BF16 ? "bf16" : "f16";
}

static void p_conv2d_forward_lp(ganfw_backend *be, int32_t dt, const ganfw_conv2d_shape *c,
                                const void *x, const void *w, const float *b, void *y, void *ws) {
  double t0 = prof_begin(be);
  prof_orig->conv2d_forward_lp(be, dt, c, x, w, b, y, ws);
  const double f = 2.0 * c->N * c->K * c->C * c->R * c->S * c->P * c->Q;
  prof_end(be, t0, f, "conv2d  fwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld", lp_name(dt),
           (long long)c->C, (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P,
           (long long)c->Q);
}

static void p_conv2d_backward_lp(ganfw_backend *be, int32_t dt, const ganfw_conv2d_shape *c,
                                 const void *x, const void *w, const void *dy, void *dx, float *dw,
                                 float *db, int accumulate, void *ws) {
  double t0 = prof_begin(be);
  prof_orig->conv2d_backward_lp(be, dt, c, x, w, dy, dx, dw, db, accumulate, ws);
  const double f =
      ((dx != NULL) + (dw != NULL)) * 2.0 * c->N * c->K * c->C * c->R * c->S * c->P * c->Q;
  prof_end(be, t0, f, "conv2d  bwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld %s", grads(dx, dw),
           (long long)c->C, (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P,
           (long long)c->Q, lp_name(dt));
}

static void p_convt2d_forward_lp(ganfw_backend *be, int32_t dt, const ganfw_convt2d_shape *c,
                                 const void *x, const void *w, const float *b, void *y, void *ws) {
  double t0 = prof_begin(be);
  prof_orig->convt2d_forward_lp(be, dt, c, x, w, b, y, ws);
  const double f = 2.0 * c->N * c->K * c->C * c->R * c->S * c->H * c->W;
  prof_end(be, t0, f, "convT   fwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld", lp_name(dt),
           (long long)c->C, (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P,
           (long long)c->Q);
}

static void p_convt2d_backward_lp(ganfw_backend *be, int32_t dt, const ganfw_convt2d_shape *c,
                                  const void *x, const void *w, const void *dy, void *dx, float *dw,
                                  float *db, int accumulate, void *ws) {
  double t0 = prof_begin(be);
  prof_orig->convt2d_backward_lp(be, dt, c, x, w, dy, dx, dw, db, accumulate, ws);
  const double f =
      ((dx != NULL) + (dw != NULL)) * 2.0 * c->N * c->K * c->C * c->R * c->S * c->H * c->W;
  prof_end(be, t0, f, "convT   bwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld %s", grads(dx, dw),
           (long long)c->C, (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P,
           (long long)c->Q, lp_name(dt));
}

static void p_bn_forward_train_lp(ganfw_backend *be, int32_t dt, int64_t N, int64_t C, int64_t HW,
                                  const void *x, const float *gamma, const float *beta, void *y,
                                  float *rm, float *rv, float momentum, float eps, float *mean,
                                  float *invstd) {
  double t0 = prof_begin(be);
  prof_orig->batchnorm2d_forward_train_lp(be, dt, N, C, HW, x, gamma, beta, y, rm, rv, momentum,
                                          eps, mean, invstd);
  prof_end(be, t0, 0, "bn2d    fwd %-5s C=%-4lld HW=%lld", lp_name(dt), (long long)C,
           (long long)HW);
}

static void p_bn_backward_lp(ganfw_backend *be, int32_t dt, int64_t N, int64_t C, int64_t HW,
                             const void *x, const void *dy, const float *gamma, const float *mean,
                             const float *invstd, void *dx, float *dgamma, float *dbeta,
                             int accumulate) {
  double t0 = prof_begin(be);
  prof_orig->batchnorm2d_backward_lp(be, dt, N, C, HW, x, dy, gamma, mean, invstd, dx, dgamma,
                                     dbeta, accumulate);
  prof_end(be, t0, 0, "bn2d    bwd %-5s C=%-4lld HW=%lld %s", dgamma ? "dx+dp" : "dx", (long long)C,
           (long long)HW, lp_name(dt));
}

static void p_act_forward_lp(ganfw_backend *be, int32_t dt, int32_t kind, float alpha, int64_t n,
                             const void *x, void *y) {
  double t0 = prof_begin(be);
  prof_orig->act_forward_lp(be, dt, kind, alpha, n, x, y);
  prof_end(be, t0, 0, "%-7s fwd %-5s n=%lld", act_name(kind), lp_name(dt), (long long)n);
}

static void p_act_backward_lp(ganfw_backend *be, int32_t dt, int32_t kind, float alpha, int64_t n,
                              const void *y, const void *dy, void *dx) {
  double t0 = prof_begin(be);
  prof_orig->act_backward_lp(be, dt, kind, alpha, n, y, dy, dx);
  prof_end(be, t0, 0, "%-7s bwd %-5s n=%lld", act_name(kind), lp_name(dt), (long long)n);
}

static void p_gemm(ganfw_backend *be, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                   int64_t ldc) {
  double t0 = prof_begin(be);
  prof_orig->gemm(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  prof_end(be, t0, 2.0 * M * N * K, "gemm    %lldx%lldx%lld", (long long)M, (long long)N,
           (long long)K);
}

/* The element-wise ops (Adam's foreach ops, losses, RNG, copies) by name only. */
#define PROF_VOID(name, params, args)                                                              \
  static void p_##name params {                                                                    \
    double t0 = prof_begin(be);                                                                    \
    prof_orig->name args;                                                                          \
    prof_end(be, t0, 0, "elementwise %s", #name);                                                  \
  }
#define PROF_RET(type, name, params, args)                                                         \
  static type p_##name params {                                                                    \
    double t0 = prof_begin(be);                                                                    \
    type r = prof_orig->name args;                                                                 \
    prof_end(be, t0, 0, "elementwise %s", #name);                                                  \
    return r;                                                                                      \
  }
PROF_VOID(fill, (ganfw_backend * be, int64_t n, float *x, float v), (be, n, x, v))
PROF_VOID(scale, (ganfw_backend * be, int64_t n, float *x, float a), (be, n, x, a))
PROF_VOID(add_scalar, (ganfw_backend * be, int64_t n, float *x, float a), (be, n, x, a))
PROF_VOID(add, (ganfw_backend * be, int64_t n, float *o, const float *a, const float *b),
          (be, n, o, a, b))
PROF_VOID(axpy, (ganfw_backend * be, int64_t n, float *y, float al, const float *x),
          (be, n, y, al, x))
PROF_VOID(mul, (ganfw_backend * be, int64_t n, float *o, const float *a, const float *b),
          (be, n, o, a, b))
PROF_VOID(addcmul,
          (ganfw_backend * be, int64_t n, float *y, float v, const float *a, const float *b),
          (be, n, y, v, a, b))
PROF_VOID(addcdiv,
          (ganfw_backend * be, int64_t n, float *y, float v, const float *a, const float *b),
          (be, n, y, v, a, b))
PROF_VOID(sqrt, (ganfw_backend * be, int64_t n, float *o, const float *x), (be, n, o, x))
PROF_VOID(lerp, (ganfw_backend * be, int64_t n, float *y, const float *x, float w),
          (be, n, y, x, w))
PROF_VOID(maximum, (ganfw_backend * be, int64_t n, float *y, const float *x), (be, n, y, x))
PROF_VOID(bce_logits_forward,
          (ganfw_backend * be, int64_t n, const float *l, const float *t, float *loss),
          (be, n, l, t, loss))
PROF_VOID(bce_logits_backward,
          (ganfw_backend * be, int64_t n, const float *l, const float *t, float d, float *dx),
          (be, n, l, t, d, dx))
PROF_VOID(rng_normal,
          (ganfw_backend * be, int64_t n, uint64_t seed, uint64_t off, float m, float sd, float *o),
          (be, n, seed, off, m, sd, o))
PROF_VOID(f32_to_f16, (ganfw_backend * be, int64_t n, const float *x, uint16_t *y), (be, n, x, y))
PROF_VOID(f16_to_f32, (ganfw_backend * be, int64_t n, const uint16_t *x, float *y), (be, n, x, y))
PROF_VOID(f32_to_bf16, (ganfw_backend * be, int64_t n, const float *x, uint16_t *y), (be, n, x, y))
PROF_VOID(bf16_to_f32, (ganfw_backend * be, int64_t n, const uint16_t *x, float *y), (be, n, x, y))
PROF_RET(double, sum, (ganfw_backend * be, int64_t n, const float *x), (be, n, x))
PROF_RET(double, sumsq, (ganfw_backend * be, int64_t n, const float *x), (be, n, x))
PROF_RET(int32_t, nonfinite, (ganfw_backend * be, int64_t n, const float *x), (be, n, x))
PROF_RET(ganfw_status, copy_d2h, (ganfw_backend * be, void *d, const void *sr, size_t b),
         (be, d, sr, b))
PROF_RET(ganfw_status, copy_h2d, (ganfw_backend * be, void *d, const void *sr, size_t b),
         (be, d, sr, b))
PROF_RET(ganfw_status, copy_d2d, (ganfw_backend * be, void *d, const void *sr, size_t b),
         (be, d, sr, b))

static void prof_install(ganfw_backend *be) {
  prof_orig = be->vt;
  prof_vt = *be->vt;
#define WRAP(entry, fn)                                                                            \
  if (prof_vt.entry) prof_vt.entry = fn
  WRAP(conv2d_forward, p_conv2d_forward);
  WRAP(conv2d_backward, p_conv2d_backward);
  WRAP(convt2d_forward, p_convt2d_forward);
  WRAP(convt2d_backward, p_convt2d_backward);
  WRAP(batchnorm2d_forward_train, p_bn_forward_train);
  WRAP(batchnorm2d_backward, p_bn_backward);
  WRAP(act_forward, p_act_forward);
  WRAP(act_backward, p_act_backward);
  WRAP(conv2d_forward_lp, p_conv2d_forward_lp);
  WRAP(conv2d_backward_lp, p_conv2d_backward_lp);
  WRAP(convt2d_forward_lp, p_convt2d_forward_lp);
  WRAP(convt2d_backward_lp, p_convt2d_backward_lp);
  WRAP(batchnorm2d_forward_train_lp, p_bn_forward_train_lp);
  WRAP(batchnorm2d_backward_lp, p_bn_backward_lp);
  WRAP(act_forward_lp, p_act_forward_lp);
  WRAP(act_backward_lp, p_act_backward_lp);
  WRAP(f32_to_f16, p_f32_to_f16);
  WRAP(f16_to_f32, p_f16_to_f32);
  WRAP(f32_to_bf16, p_f32_to_bf16);
  WRAP(bf16_to_f32, p_bf16_to_f32);
  WRAP(gemm, p_gemm);
  WRAP(fill, p_fill);
  WRAP(scale, p_scale);
  WRAP(add_scalar, p_add_scalar);
  WRAP(add, p_add);
  WRAP(axpy, p_axpy);
  WRAP(mul, p_mul);
  WRAP(addcmul, p_addcmul);
  WRAP(addcdiv, p_addcdiv);
  WRAP(sqrt, p_sqrt);
  WRAP(lerp, p_lerp);
  WRAP(maximum, p_maximum);
  WRAP(bce_logits_forward, p_bce_logits_forward);
  WRAP(bce_logits_backward, p_bce_logits_backward);
  WRAP(rng_normal, p_rng_normal);
  WRAP(sum, p_sum);
  WRAP(sumsq, p_sumsq);
  WRAP(nonfinite, p_nonfinite);
  WRAP(copy_d2h, p_copy_d2h);
  WRAP(copy_h2d, p_copy_h2d);
  WRAP(copy_d2d, p_copy_d2d);
#undef WRAP
  be->vt = &prof_vt;
  n_prof = 0;
}

static void prof_remove(ganfw_backend *be) {
  if (be && prof_orig) be->vt = prof_orig;
  prof_orig = NULL;
}

static int cmp_prof(const void *a, const void *b) {
  double x = ((const prof_entry *)a)->ms, y = ((const prof_entry *)b)->ms;
  return x > y ? -1 : x < y;
}

/* The table per step, slowest first; `total_ms` is the summed step time of `steps`. */
static void prof_print(int steps, double total_ms) {
  qsort(prof, (size_t)n_prof, sizeof prof[0], cmp_prof);
  double ops = 0;
  printf("# profile over %d steps: ms per step, share of the step, calls per step, GFLOP/s\n",
         steps);
  for (int i = 0; i < n_prof; i++) {
    const prof_entry *e = &prof[i];
    ops += e->ms;
    char rate[32] = "";
    if (e->flops > 0) snprintf(rate, sizeof rate, "%7.1f", e->flops / (e->ms * 1e6));
    printf("# %-48s %9.2f ms %5.1f%% %5.1f calls %s\n", e->key, e->ms / steps,
           100.0 * e->ms / total_ms, (double)e->calls / steps, rate);
  }
  printf("# %-48s %9.2f ms %5.1f%%\n", "outside the ops (executor, allocator, host)",
         (total_ms - ops) / steps, 100.0 * (total_ms - ops) / total_ms);
}

static int fail(ganfw_status st) {
  const char *msg = ganfw_error_message();
  fprintf(stderr, "bench_dcgan_step: %s: %s\n", ganfw_status_name(st), *msg ? msg : "(no message)");
  return 1;
}

int main(int argc, char **argv) {
  bench_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;

  char set_threads[64], set_batch[64], set_layout[64];
  const char *sets[3];
  int nsets = 0;
  if (a.threads) {
    snprintf(set_threads, sizeof set_threads, "device.threads=%d", a.threads);
    sets[nsets++] = set_threads;
  }
  if (a.batch) {
    snprintf(set_batch, sizeof set_batch, "train.batch_size=%lld", a.batch);
    sets[nsets++] = set_batch;
  }
  if (a.layout) {
    snprintf(set_layout, sizeof set_layout, "device.memory_layout=%s", a.layout);
    sets[nsets++] = set_layout;
  }
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_gan *gan = NULL;
  ganfw_probe_result plan = {0};
  ganfw_tensor *x = NULL, *z = NULL;
  double *times = NULL;
  ganfw_data_info info = {
      .struct_size = sizeof info, .channels = a.channels, .height = a.height, .width = a.width};
  ganfw_run_config *cfg = NULL; /* read once, for the run and its plan */
  ganfw_status st = ganfw_run_config_open(a.config, sets, nsets, &cfg);
  if (st == GANFW_OK) st = ganfw_run_open(cfg, &run);
  /* device.memory_layout: planned: the layout from the plan, as `ganfw CONFIG` makes it */
  if (st == GANFW_OK && run->ctx_opt.memory_layout == GANFW_LAYOUT_PLANNED) {
    const ganfw_probe_options popt = {.meta = 1,
                                      .warmup = 1,
                                      .steps = 1,
                                      .limit_mode = GANFW_PROBE_LIMIT_CONFIG,
                                      .info = &info}; /* the bench's shape, no data set */
    st = ganfw_probe_run(cfg, &popt, &plan);
    if (st == GANFW_OK && plan.planned) run->ctx_opt.layout = &plan.layout.l;
  }
  if (st == GANFW_OK) st = ganfw_session_open(run, 0, &info, &s);
  if (st == GANFW_OK && s->family != GANFW_MODEL_GAN)
    st = ganfw_error_set(GANFW_ERR_UNSUPPORTED, "%s: the model is not a GAN", a.config);
  if (st == GANFW_OK) st = ganfw_gan_create(s, &gan);
  if (st != GANFW_OK) goto done;

  const ganfw_host *host = ganfw_host_table();
  const int64_t n = s->train.batch_size;
  int64_t xs[4] = {n, s->data_info.channels, s->data_info.height, s->data_info.width};
  int64_t zs[4] = {n, s->nz, 1, 1};
  x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "batch");
  z = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "noise");
  times = malloc((size_t)a.steps * sizeof *times);
  if (!x || !z || !times) {
    st = ganfw_error_code() ? ganfw_error_code()
                            : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    goto done;
  }
  /* One real batch for the whole run, as the PyTorch twin; fresh noise every step. */
  if ((st = host->rng_uniform(s->ctx, x, -1.0f, 1.0f)) != GANFW_OK) goto done;
  const double flops = step_flops(s, n, a.layers);

  double total_ms = 0;
  for (int i = 0; i < a.warmup + a.steps; i++) {
    if (a.profile && i == a.warmup) prof_install(s->ctx->be);
    if (i == a.warmup) ganfw_alloc_reset_peak(s->ctx->alloc);
    double t0 = now_ms();
    ganfw_gan_stats gs;
    if ((st = host->rng_normal(s->ctx, z, 0.0f, 1.0f)) != GANFW_OK) goto done;
    ganfw_alloc_trace_step(s->ctx->alloc, i + 1); /* the planned layout's step */
    st = ganfw_gan_step(gan, x, z, &gs);
    ganfw_alloc_trace_step_end(s->ctx->alloc);
    if (st != GANFW_OK) goto done;
    double t1 = now_ms();
    if (i >= a.warmup) times[i - a.warmup] = t1 - t0, total_ms += t1 - t0;
  }
  if (a.profile) prof_print(a.steps, total_ms);
  qsort(times, (size_t)a.steps, sizeof *times, cmp_double);
  const double median =
      a.steps % 2 ? times[a.steps / 2] : 0.5 * (times[a.steps / 2 - 1] + times[a.steps / 2]);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  printf("ganfw median_ms=%.2f min_ms=%.2f rss_mib=%.1f gflops=%.1f step_gflop=%.3f "
         "alloc_peak_mib=%.1f alloc_reserved_peak_mib=%.1f threads=%d batch=%lld steps=%d "
         "layout=%s planned_steps=%lld\n",
         median, times[0], (double)ru.ru_maxrss / 1024.0, flops / (median * 1e6), flops * 1e-9,
         (double)as.allocated.peak / (1024.0 * 1024.0),
         (double)as.reserved.peak / (1024.0 * 1024.0), (int)s->ctx->threads, (long long)n, a.steps,
         as.arena_bytes ? "planned" : "caching", (long long)as.planned_steps);

done:
  prof_remove(s && s->ctx ? s->ctx->be : NULL);
  free(times);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(z);
  ganfw_gan_destroy(gan);
  ganfw_session_close(s);
  ganfw_run_close(run);
  ganfw_run_config_free(cfg);
  ganfw_probe_result_free(&plan);
  return st == GANFW_OK ? 0 : fail(st);
}
