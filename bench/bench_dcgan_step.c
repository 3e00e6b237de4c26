/* Times ganfw's whole DC-GAN training step (ganfw_gan_step: D on real and on G(z), D's Adam
 * step, G through D, G's Adam step) on a random real batch [N,C,H,W] in [-1,1] and noise
 * [N,nz,1,1], without a data set. Given a classifier's config (configs/resnet20_fashion.yaml
 * with --channels 1 --size 28x28) it times ganfw_classifier_step instead, on the same kind of
 * batch with labels i % classes (--classes, default 10), and counts the step's FLOPs from the
 * convolutions and GEMMs of its first step; bench/run_resnet.sh runs it against PyTorch.
 * bench/dcgan_torch.py is the PyTorch twin and bench/run_dcgan.sh runs both alternately. Prints one
 * machine-readable line: ganfw median_ms=... min_ms=... rss_mib=... gflops=... alloc_peak_mib=...
 *         alloc_reserved_peak_mib=...
 * alloc_peak_mib and alloc_reserved_peak_mib are the allocator's allocated and reserved
 * peaks over the timed steps (reset after the warm-up, as the PyTorch twins reset
 * torch.cuda's peak memory stats).
 *
 *   build/bench/bench_dcgan_step [CONFIG] [--steps S] [--warmup W] [--threads T]
 *                                [--batch N] [--channels C] [--size HxW] [--layers] [--profile]
 *                                [--layout caching|planned] [--classes K]
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
#include <unistd.h>

#include "backend/backend.h"
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
  int channels, height, width, classes;
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
          "                        [--layout caching|planned] [--classes K]\n",
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
  *a = (bench_args){"configs/dcgan.yaml", 20, 5, 0, 0, 0, 0, 1, 32, 32, 10, NULL};
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
                  : strcmp(o, "--classes") == 0  ? &a->classes
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
 * The backend's table is swapped for a copy whose run (and copies) time the original ones
 * (with a synchronize around each on an asynchronous backend), keyed by op and shape. */
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

static const char *grads(const void *dx, const void *dw) {
  return dx && dw ? "dx+dw" : dx ? "dx" : dw ? "dw" : "-";
}

static const char *act_name(int32_t kind) {
  return kind == GANFW_ACT_RELU         ? "relu"
         : kind == GANFW_ACT_LEAKY_RELU ? "lrelu"
         : kind == GANFW_ACT_TANH       ? "tanh"
                                        : "act";
}

/* A forward's dtype in the pass's column ("" in f32), a backward's after its key. */
static const char *lp_name(int32_t dtype) {
  return dtype == GANFW_DTYPE_BF16 ? "bf16" : dtype == GANFW_DTYPE_F16 ? "f16" : "";
}

static const char *lp_suffix(int32_t dtype) {
  return dtype == GANFW_DTYPE_BF16 ? " bf16" : dtype == GANFW_DTYPE_F16 ? " f16" : "";
}

/* The ops keyed by name only: Adam's foreach ops, losses, RNG, casts, dropout, tensor math. */
static int by_name(int32_t kind) {
  switch (kind) {
  case GANFW_OP_DROPOUT_FORWARD:
  case GANFW_OP_DROPOUT_BACKWARD:
  case GANFW_OP_BCE_LOGITS_FORWARD:
  case GANFW_OP_BCE_LOGITS_BACKWARD:
  case GANFW_OP_SOFTMAX_XENT_FORWARD:
  case GANFW_OP_SOFTMAX_XENT_BACKWARD:
  case GANFW_OP_FILL:
  case GANFW_OP_SCALE:
  case GANFW_OP_ADD_SCALAR:
  case GANFW_OP_ADD:
  case GANFW_OP_AXPY:
  case GANFW_OP_MUL:
  case GANFW_OP_ADDCMUL:
  case GANFW_OP_ADDCDIV:
  case GANFW_OP_SQRT:
  case GANFW_OP_LERP:
  case GANFW_OP_MAXIMUM:
  case GANFW_OP_SUM:
  case GANFW_OP_SUMSQ:
  case GANFW_OP_NONFINITE:
  case GANFW_OP_NONFINITE_MANY:
  case GANFW_OP_CAST_FROM_F32:
  case GANFW_OP_CAST_TO_F32:
  case GANFW_OP_RNG_UNIFORM:
  case GANFW_OP_RNG_NORMAL:
  case GANFW_OP_UNARY:
  case GANFW_OP_BINARY:
  case GANFW_OP_REDUCE_SUM:
  case GANFW_OP_CHANNEL_AFFINE:
    return 1;
  default:
    return 0;
  }
}

/* The casts by direction and dtype ("f32_to_f16"), the other ops by their op name. */
static const char *elementwise_name(const ganfw_op *op) {
  const int bf16 = op->dtype == GANFW_DTYPE_BF16;
  if (op->kind == GANFW_OP_CAST_FROM_F32) return bf16 ? "f32_to_bf16" : "f32_to_f16";
  if (op->kind == GANFW_OP_CAST_TO_F32) return bf16 ? "bf16_to_f32" : "f16_to_f32";
  return ganfw_op_name(op->kind);
}

/* op's key in the table and its FLOPs: by op and shape for the layers' kernels and GEMM, by
 * name for the rest. */
static double prof_key(const ganfw_op *op, char *key, size_t n) {
  const ganfw_conv2d_shape *c = &op->shape.conv;
  const ganfw_convt2d_shape *t = &op->shape.convt;
  const int64_t *d = op->shape.d;
  const char *lp = lp_name(op->dtype), *lps = lp_suffix(op->dtype);
  const void *dx = op->out[0], *dw = op->grad[0];
  switch (op->kind) {
  case GANFW_OP_CONV2D_FORWARD:
    snprintf(key, n, "conv2d  fwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld", lp,
             (long long)c->C, (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P,
             (long long)c->Q);
    return 2.0 * c->N * c->K * c->C * c->R * c->S * c->P * c->Q;
  case GANFW_OP_CONV2D_BACKWARD:
    snprintf(key, n, "conv2d  bwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld%s", grads(dx, dw),
             (long long)c->C, (long long)c->K, (long long)c->H, (long long)c->W, (long long)c->P,
             (long long)c->Q, lps);
    return ((dx != NULL) + (dw != NULL)) * 2.0 * c->N * c->K * c->C * c->R * c->S * c->P * c->Q;
  case GANFW_OP_CONVT2D_FORWARD:
    snprintf(key, n, "convT   fwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld", lp,
             (long long)t->C, (long long)t->K, (long long)t->H, (long long)t->W, (long long)t->P,
             (long long)t->Q);
    return 2.0 * t->N * t->K * t->C * t->R * t->S * t->H * t->W;
  case GANFW_OP_CONVT2D_BACKWARD:
    snprintf(key, n, "convT   bwd %-5s %4lld->%-4lld %2lldx%-2lld->%2lldx%-2lld%s", grads(dx, dw),
             (long long)t->C, (long long)t->K, (long long)t->H, (long long)t->W, (long long)t->P,
             (long long)t->Q, lps);
    return ((dx != NULL) + (dw != NULL)) * 2.0 * t->N * t->K * t->C * t->R * t->S * t->H * t->W;
  case GANFW_OP_BATCHNORM2D_TRAIN:
    snprintf(key, n, "bn2d    fwd %-5s C=%-4lld HW=%lld", lp, (long long)d[1], (long long)d[2]);
    return 0;
  case GANFW_OP_BATCHNORM2D_BACKWARD:
    snprintf(key, n, "bn2d    bwd %-5s C=%-4lld HW=%lld%s", dw ? "dx+dp" : "dx", (long long)d[1],
             (long long)d[2], lps);
    return 0;
  case GANFW_OP_ACT_FORWARD:
    snprintf(key, n, "%-7s fwd %-5s n=%lld", act_name(op->mode), lp, (long long)d[0]);
    return 0;
  case GANFW_OP_ACT_BACKWARD:
    snprintf(key, n, "%-7s bwd %-5s n=%lld", act_name(op->mode), lp, (long long)d[0]);
    return 0;
  case GANFW_OP_GEMM:
    snprintf(key, n, "gemm    %lldx%lldx%lld", (long long)d[0], (long long)d[1], (long long)d[2]);
    return 2.0 * d[0] * d[1] * d[2];
  default:
    if (by_name(op->kind))
      snprintf(key, n, "elementwise %s", elementwise_name(op));
    else
      snprintf(key, n, "%s%s", ganfw_op_name(op->kind), lps);
    return 0;
  }
}

static ganfw_status p_run(ganfw_backend *be, ganfw_op *op) {
  char key[sizeof prof[0].key];
  const double f = prof_key(op, key, sizeof key);
  const double t0 = prof_begin(be);
  const ganfw_status st = prof_orig->run(be, op);
  prof_end(be, t0, f, "%s", key);
  return st;
}

/* The copies by name only. */
#define PROF_RET(type, name, params, args)                                                         \
  static type p_##name params {                                                                    \
    double t0 = prof_begin(be);                                                                    \
    type r = prof_orig->name args;                                                                 \
    prof_end(be, t0, 0, "elementwise %s", #name);                                                  \
    return r;                                                                                      \
  }
PROF_RET(ganfw_status, copy_d2h, (ganfw_backend * be, void *d, const void *sr, size_t b),
         (be, d, sr, b))
PROF_RET(ganfw_status, copy_h2d, (ganfw_backend * be, void *d, const void *sr, size_t b),
         (be, d, sr, b))
PROF_RET(ganfw_status, copy_d2d, (ganfw_backend * be, void *d, const void *sr, size_t b),
         (be, d, sr, b))

static void prof_install(ganfw_backend *be) {
  prof_orig = be->vt;
  prof_vt = *be->vt;
  prof_vt.run = p_run;
  prof_vt.copy_d2h = p_copy_d2h;
  prof_vt.copy_h2d = p_copy_h2d;
  prof_vt.copy_d2d = p_copy_d2d;
  be->vt = &prof_vt;
  n_prof = 0;
  memset(prof, 0, sizeof prof);
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

/* The FLOPs of the ops timed so far (a classifier's first step: every conv pass and GEMM),
 * with the table by op and shape when `print`; the table is emptied. */
static double prof_flops(int print) {
  double total = 0;
  for (int i = 0; i < n_prof; i++) {
    total += prof[i].flops;
    if (print && prof[i].flops > 0)
      printf("# %-48s %8.1f MFLOP x %lld calls\n", prof[i].key,
             prof[i].flops * 1e-6 / (double)prof[i].calls, (long long)prof[i].calls);
  }
  if (print) printf("# total %.3f GFLOP per step\n", total * 1e-9);
  n_prof = 0;
  return total;
}

/* Labels [N] (int32): image i has class i % classes. */
static ganfw_status fill_labels(ganfw_tensor *labels, int classes) {
  const int64_t n = labels->shape[0];
  int32_t *v = malloc((size_t)n * sizeof *v);
  if (!v) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int64_t i = 0; i < n; i++) v[i] = (int32_t)(i % classes);
  ganfw_status st = ganfw_tensor_from_host(labels, v, n * (int64_t)sizeof *v);
  free(v);
  return st;
}

static int fail(ganfw_status st) {
  const char *msg = ganfw_error_message();
  fprintf(stderr, "bench_dcgan_step: %s: %s\n", ganfw_status_name(st), *msg ? msg : "(no message)");
  return 1;
}

int main(int argc, char **argv) {
  /* as the ganfw CLI (cli/main.c): OpenBLAS's kernels for this CPU when it took it for a
   * generic one, unless OPENBLAS_CORETYPE says otherwise */
  ganfw_cpu_blas_restart(argv);
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
  ganfw_classifier *cls = NULL;
  ganfw_probe_result plan = {0};
  ganfw_tensor *x = NULL, *z = NULL;
  double *times = NULL;
  ganfw_data_info info = {.struct_size = sizeof info,
                          .channels = a.channels,
                          .height = a.height,
                          .width = a.width,
                          .num_classes = a.classes};
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
  if (st == GANFW_OK && s->family != GANFW_MODEL_GAN && s->family != GANFW_MODEL_CLASSIFIER)
    st = ganfw_error_set(GANFW_ERR_UNSUPPORTED, "%s: the model is neither a GAN nor a classifier",
                         a.config);
  if (st == GANFW_OK)
    st =
        s->family == GANFW_MODEL_GAN ? ganfw_gan_create(s, &gan) : ganfw_classifier_create(s, &cls);
  if (st != GANFW_OK) goto done;

  const ganfw_host *host = ganfw_host_table();
  const int64_t n = s->train.batch_size;
  int64_t xs[4] = {n, s->data_info.channels, s->data_info.height, s->data_info.width};
  int64_t zs[4] = {n, s->nz, 1, 1};
  x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "batch");
  if (gan)
    z = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "noise");
  else
    z = ganfw_tensor_create(s->ctx, GANFW_DTYPE_I32, 1, &n, GANFW_MEM_DATA, "labels");
  times = malloc((size_t)a.steps * sizeof *times);
  if (!x || !z || !times) {
    st = ganfw_error_code() ? ganfw_error_code()
                            : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    goto done;
  }
  /* One real batch for the whole run, as the PyTorch twin; fresh noise every step (a
   * classifier's labels: image i has class i % classes). */
  if ((st = host->rng_uniform(s->ctx, x, -1.0f, 1.0f)) != GANFW_OK) goto done;
  if (cls && (st = fill_labels(z, a.classes)) != GANFW_OK) goto done;
  double flops = gan ? step_flops(s, n, a.layers) : 0;

  double total_ms = 0;
  for (int i = 0; i < a.warmup + a.steps; i++) {
    /* A classifier's FLOPs are counted from its ops in the first step. */
    if (cls && i == 0) prof_install(s->ctx->be);
    if (a.profile && i == a.warmup) prof_install(s->ctx->be);
    if (i == a.warmup) ganfw_alloc_reset_peak(s->ctx->alloc);
    double t0 = now_ms();
    if (gan) {
      ganfw_gan_stats gs;
      if ((st = host->rng_normal(s->ctx, z, 0.0f, 1.0f)) != GANFW_OK) goto done;
      ganfw_alloc_trace_step(s->ctx->alloc, i + 1); /* the planned layout's step */
      st = ganfw_gan_step(gan, x, z, &gs);
    } else {
      ganfw_classifier_stats cs;
      ganfw_alloc_trace_step(s->ctx->alloc, i + 1);
      st = ganfw_classifier_step(cls, x, z, &cs);
    }
    ganfw_alloc_trace_step_end(s->ctx->alloc);
    if (st != GANFW_OK) goto done;
    double t1 = now_ms();
    if (cls && i == 0) {
      flops = prof_flops(a.layers);
      prof_remove(s->ctx->be);
    }
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
  ganfw_classifier_destroy(cls);
  ganfw_session_close(s);
  ganfw_run_close(run);
  ganfw_run_config_free(cfg);
  ganfw_probe_result_free(&plan);
  return st == GANFW_OK ? 0 : fail(st);
}
