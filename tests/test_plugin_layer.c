/* Layers defined by plugins (ganfw_layer_def, host->net_custom, ABI 1.3) and the example
 * layer plugin examples/pixelnorm:
 *  - pixelnorm's forward against the formula and its input and parameter gradients against
 *    central differences, on [N,C,H,W] and [N,C], with gradient accumulation, and under
 *    f16/bf16 compute against f32;
 *  - its parameters and a test layer's buffer in net_param_info, ganfw_net_buffer_at and a
 *    checkpoint round trip, as "<node>.<name>";
 *  - planned bytes equal measured bytes for a net using it (meta backend against the CPU, f32,
 *    f16, bf16), and `plan` equal to a real step for a config of the example model plugin;
 *  - the adapter's checks: a layer whose reported bytes disagree with what it allocates (on
 *    the CPU and while planning), one that leaks or destroys what is not its own, a def
 *    without its required members, bad parameter names; each an error naming the node;
 *  - the example built out of tree against an installed ganfw, planned and trained with it. */
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "example_config.h"
#include "ganfw/ganfw.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/net.h"
#include "pixelnorm.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "testutil.h"
#include "tools/plan.h"

static const ganfw_host *H;
static char root[400]; /* the suite's temporary folder (suite_init) */

static ganfw_ctx *make_ctx(int meta) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 5, .meta = meta};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  return ctx;
}

static ganfw_tensor *make(ganfw_ctx *ctx, int32_t ndim, const int64_t *shape, const char *name) {
  ganfw_tensor *t = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_DATA, name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  return t;
}

static int64_t allocated(ganfw_ctx *ctx, int32_t category) {
  ganfw_alloc_stats s;
  ganfw_alloc_get_stats(ctx->alloc, &s);
  return category < 0 ? s.allocated.current : s.category[category].current;
}

static int message_has(const char *first, ...) {
  const char *msg = ganfw_error_message();
  va_list ap;
  va_start(ap, first);
  int ok = 1;
  for (const char *s = first; s; s = va_arg(ap, const char *))
    if (!strstr(msg, s)) {
      printf("\n    expected '%s' in: %s", s, msg);
      ok = 0;
    }
  va_end(ap);
  return ok;
}

/* A net "g" of one pixelnorm "pn" over C channels on inputs [C,H,W] (h, w > 0) or [C]
 * (h = 0: the net flattens first). */
static ganfw_net *pixelnorm_net(ganfw_ctx *ctx, int64_t C, int64_t h, int64_t w, int32_t affine,
                                float eps) {
  ganfw_net *net = H->net_create(ctx, "g");
  if (h == 0) CU_ASSERT_EQUAL(H->net_flatten(net, "flat"), GANFW_OK);
  void *state = pixelnorm_state_create(H, ctx, C, eps, affine);
  CU_ASSERT_PTR_NOT_NULL_FATAL(state);
  CU_ASSERT_EQUAL_FATAL(H->net_custom(net, "pn", pixelnorm_def(), state), GANFW_OK);
  ganfw_status st = h == 0 ? H->net_build(net, C, 1, 1) : H->net_build(net, C, h, w);
  if (st != GANFW_OK) printf("\n    %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  return net;
}

/* Sets the net's parameters to values from `seed` (weight around 1, bias around 0). */
static void randomise_params(ganfw_net *net, uint64_t seed) {
  for (int64_t i = 0; i < H->net_param_count(net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    CU_ASSERT_EQUAL_FATAL(H->net_param_info(net, i, &info), GANFW_OK);
    float *v = info.value->data; /* CPU: host memory */
    gt_fill_uniform(v, info.value->numel, i == 0 ? 0.5f : -0.5f, i == 0 ? 1.5f : 0.5f, seed + i);
  }
}

/* --- pixelnorm: forward and gradients ------------------------------------------------------ */

typedef struct fwd_ctx {
  ganfw_net *net;
  ganfw_tensor *x;
  float *y; /* the output's values */
} fwd_ctx;

static void run_forward(void *p) {
  fwd_ctx *f = p;
  ganfw_tensor *y = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(f->net, f->x, NULL, &y), GANFW_OK);
  memcpy(f->y, y->data, (size_t)y->nbytes);
  ganfw_tensor_destroy(y);
}

/* x / sqrt(mean_c x^2 + eps) * w + b in double, x [N,C,P] */
static void pixelnorm_reference(const float *x, int64_t N, int64_t C, int64_t P, double eps,
                                const float *w, const float *b, float *y) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t p = 0; p < P; p++) {
      double ms = 0;
      for (int64_t c = 0; c < C; c++) ms += (double)x[(n * C + c) * P + p] * x[(n * C + c) * P + p];
      const double r = 1.0 / sqrt(ms / (double)C + eps);
      for (int64_t c = 0; c < C; c++) {
        const int64_t i = (n * C + c) * P + p;
        y[i] = (float)(x[i] * r * (w ? w[c] : 1.0) + (b ? b[c] : 0.0));
      }
    }
}

/* Forward against the formula, then dx, dweight, dbias against central differences of
 * L = sum(y * dy), then a second backward without zero_grad doubling the parameter gradients. */
static void check_pixelnorm(int64_t N, int64_t C, int64_t h, int64_t w, int32_t affine) {
  ganfw_ctx *ctx = make_ctx(0);
  ganfw_net *net = pixelnorm_net(ctx, C, h, w, affine, 1e-5f);
  if (affine) randomise_params(net, 40);
  const int64_t P = h ? h * w : 1;
  ganfw_tensor *x = make(ctx, 4, (int64_t[]){N, C, h ? h : 1, w ? w : 1}, "x");
  gt_fill_uniform(x->data, x->numel, -2, 2, 7);
  ganfw_tensor *dy = make(ctx, h ? 4 : 2, (int64_t[]){N, C, h, w}, "dy");
  gt_fill_uniform(dy->data, dy->numel, -1, 1, 8);
  float *y = gt_alloc((size_t)x->nbytes), *want = gt_alloc((size_t)x->nbytes);
  fwd_ctx f = {net, x, y};
  run_forward(&f);
  ganfw_param_info pw = {.struct_size = sizeof pw}, pb = {.struct_size = sizeof pb};
  if (affine) {
    CU_ASSERT_EQUAL(H->net_param_info(net, 0, &pw), GANFW_OK);
    CU_ASSERT_EQUAL(H->net_param_info(net, 1, &pb), GANFW_OK);
  }
  pixelnorm_reference(x->data, N, C, P, 1e-5, affine ? pw.value->data : NULL,
                      affine ? pb.value->data : NULL, want);
  gt_check_close("pixelnorm forward", y, want, x->numel, 2e-6, 1e-6);

  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *out = NULL, *dx = NULL;
  ganfw_net_zero_grad(net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &out), GANFW_OK);
  ganfw_status st =
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx);
  if (st != GANFW_OK) printf("\n    %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  /* step 1e-2, relative errors with a floor of 0.1 (the gradients are O(1)): the f32
   * forward's rounding of L over the step stays near 1e-4, the truncation near 1e-4 too */
  const double err = gt_gradcheck(run_forward, &f, x->data, x->numel, y, dy->data, x->numel,
                                  dx->data, 1e-2, 200, 1e-1);
  printf("\n    [%lld,%lld,%lld,%lld]%s: dx err %.2e", (long long)N, (long long)C, (long long)h,
         (long long)w, affine ? " affine" : "", err);
  CU_ASSERT(err < 2e-3);
  if (affine) {
    float *g1[2];
    for (int i = 0; i < 2; i++) {
      ganfw_param_info *pi = i ? &pb : &pw;
      const double perr = gt_gradcheck(run_forward, &f, pi->value->data, pi->value->numel, y,
                                       dy->data, x->numel, pi->grad->data, 1e-2, 0, 1e-1);
      printf(", d%s err %.2e", i ? "bias" : "weight", perr);
      CU_ASSERT(perr < 2e-3);
      g1[i] = gt_alloc((size_t)pi->grad->nbytes);
      memcpy(g1[i], pi->grad->data, (size_t)pi->grad->nbytes);
    }
    /* again without zero_grad: the gradients add up */
    ganfw_tensor_destroy(out);
    ganfw_tensor_destroy(dx);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &out), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(net, tape, dy, GANFW_BWD_PARAM_GRAD, &dx), GANFW_OK);
    for (int i = 0; i < 2; i++) {
      ganfw_param_info *pi = i ? &pb : &pw;
      float *twice = gt_alloc((size_t)pi->grad->nbytes);
      for (int64_t k = 0; k < pi->grad->numel; k++) twice[k] = 2 * g1[i][k];
      gt_check_close("accumulated gradient", pi->grad->data, twice, pi->grad->numel, 1e-6, 1e-6);
      gt_free(twice);
      gt_free(g1[i]);
    }
  }
  ganfw_tensor_destroy(out);
  ganfw_tensor_destroy(dx);
  ganfw_tape_destroy(tape);
  gt_free(want);
  gt_free(y);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_WORKSPACE), 0);
  ganfw_ctx_destroy(ctx);
}

static void test_pixelnorm_gradients(void) {
  check_pixelnorm(2, 3, 4, 5, 1);
  check_pixelnorm(3, 5, 2, 2, 0);
  check_pixelnorm(4, 6, 0, 0, 1); /* [N,C] */
  check_pixelnorm(1, 7, 1, 3, 1); /* more channels than pixels: the backward's peak order */
}

/* ||a - b|| / ||b|| in double. */
static double norm_rel(const float *a, const float *b, int64_t n) {
  double d = 0, r = 0;
  for (int64_t i = 0; i < n; i++)
    d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
  return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* In a graph net: the net's input feeds a conv and, through net_input, a pixelnorm; their sum
 * is the output (a residual block around pixelnorm). The input gradient sums both paths
 * (fan-out), against central differences. */
static void test_pixelnorm_in_a_graph(void) {
  ganfw_ctx *ctx = make_ctx(0);
  ganfw_net *net = H->net_create(ctx, "g");
  CU_ASSERT_EQUAL(H->net_conv2d(net, "c", 3, 3, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(H->net_input(net, "input"), GANFW_OK);
  CU_ASSERT_EQUAL(
      H->net_custom(net, "pn", pixelnorm_def(), pixelnorm_state_create(H, ctx, 3, 1e-5f, 1)),
      GANFW_OK);
  const char *in[2] = {"c", "pn"};
  CU_ASSERT_EQUAL(H->net_add(net, "sum", in, 2), GANFW_OK);
  ganfw_status st = H->net_build(net, 3, 4, 4);
  if (st != GANFW_OK) printf("\n    %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_tensor *x = make(ctx, 4, (int64_t[]){2, 3, 4, 4}, "x");
  ganfw_tensor *dy = make(ctx, 4, (int64_t[]){2, 3, 4, 4}, "dy");
  gt_fill_uniform(x->data, x->numel, -2, 2, 17);
  gt_fill_uniform(dy->data, dy->numel, -1, 1, 18);
  float *y = gt_alloc((size_t)x->nbytes);
  fwd_ctx f = {net, x, y};
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *out = NULL, *dx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &out), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx),
      GANFW_OK);
  const double err = gt_gradcheck(run_forward, &f, x->data, x->numel, y, dy->data, x->numel,
                                  dx->data, 1e-2, 96, 1e-1);
  printf("\n    residual around pixelnorm: dx err %.2e", err);
  CU_ASSERT(err < 2e-3);
  ganfw_tensor_destroy(out);
  ganfw_tensor_destroy(dx);
  ganfw_tape_destroy(tape);
  gt_free(y);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_WORKSPACE), 0);
  ganfw_ctx_destroy(ctx);
}

/* conv -> pixelnorm (affine) -> leaky relu -> conv -> pixelnorm, one training step with the
 * checkpoint layout starts[0..n) (n 0: none) and the first `frozen` layers frozen: the input
 * gradient and every parameter gradient into g (in net_param_info order, frozen ones 0). */
static void ckpt_step(const int32_t *starts, int32_t n, int32_t frozen, float *dx, float *g) {
  ganfw_ctx *ctx = make_ctx(0);
  ganfw_net *net = H->net_create(ctx, "g");
  CU_ASSERT_EQUAL(H->net_conv2d(net, "c1", 2, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(
      H->net_custom(net, "pn1", pixelnorm_def(), pixelnorm_state_create(H, ctx, 4, 1e-8f, 1)),
      GANFW_OK);
  CU_ASSERT_EQUAL(H->net_activation(net, "a1", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(H->net_conv2d(net, "c2", 4, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(
      H->net_custom(net, "pn2", pixelnorm_def(), pixelnorm_state_create(H, ctx, 4, 1e-8f, 1)),
      GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(H->net_build(net, 2, 5, 5), GANFW_OK);
  randomise_params(net, 9);
  if (n) CU_ASSERT_EQUAL_FATAL(H->net_checkpoint(net, starts, n), GANFW_OK);
  if (frozen) CU_ASSERT_EQUAL_FATAL(ganfw_net_freeze(net, 0, frozen), GANFW_OK);
  ganfw_tensor *x = make(ctx, 4, (int64_t[]){3, 2, 5, 5}, "x");
  ganfw_tensor *dy = make(ctx, 4, (int64_t[]){3, 4, 5, 5}, "dy");
  gt_fill_uniform(x->data, x->numel, -1, 1, 21);
  gt_fill_uniform(dy->data, dy->numel, -1, 1, 22);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *y = NULL, *gx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &gx),
      GANFW_OK);
  memcpy(dx, gx->data, (size_t)gx->nbytes);
  for (int64_t i = 0, off = 0; i < H->net_param_count(net); i++) {
    ganfw_param_info pi = {.struct_size = sizeof pi};
    CU_ASSERT_EQUAL_FATAL(H->net_param_info(net, i, &pi), GANFW_OK);
    if (pi.grad)
      memcpy(g + off, pi.grad->data, (size_t)pi.grad->nbytes);
    else
      memset(g + off, 0, (size_t)pi.value->nbytes);
    off += pi.value->numel;
  }
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(gx);
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* Gradient checkpointing re-runs the plugin layers' forward before their backward: the
 * gradients are bitwise those of the run without it. Freezing the first layers (pn1 among
 * them) leaves their gradients out and the others unchanged. */
static void test_checkpoint_and_freeze(void) {
  enum { NX = 3 * 2 * 25, NG = 4 * 2 * 9 + 4 + 4 + 4 + 4 * 4 * 9 + 4 + 4 + 4 };
  static float dx[4][NX], g[4][NG];
  const int32_t one[1] = {3}, two[2] = {1, 3};
  ckpt_step(NULL, 0, 0, dx[0], g[0]);
  ckpt_step(one, 1, 0, dx[1], g[1]);
  ckpt_step(two, 2, 0, dx[2], g[2]);
  for (int k = 1; k < 3; k++) {
    CU_ASSERT_EQUAL(memcmp(dx[k], dx[0], sizeof dx[0]), 0);
    CU_ASSERT_EQUAL(memcmp(g[k], g[0], sizeof g[0]), 0);
  }
  ckpt_step(NULL, 0, 3, dx[3], g[3]); /* c1, pn1, a1 frozen */
  const int64_t frozen = 4 * 2 * 9 + 4 + 4 + 4;
  int64_t zeros = 0;
  for (int64_t i = 0; i < frozen; i++) zeros += g[3][i] == 0.0f;
  CU_ASSERT_EQUAL(zeros, frozen);
  CU_ASSERT_EQUAL(memcmp(g[3] + frozen, g[0] + frozen, sizeof(float) * (NG - frozen)), 0);
  CU_ASSERT_EQUAL(memcmp(dx[3], dx[0], sizeof dx[0]), 0);
}

/* One training step's output, input gradient and weight gradient of a conv -> pixelnorm
 * (affine) net in `dtype`, as f32 host copies. */
static void pixelnorm_step(int32_t dtype, float *y, float *dx, float *dw) {
  ganfw_ctx *ctx = make_ctx(0);
  ganfw_net *net = H->net_create(ctx, "g");
  CU_ASSERT_EQUAL(H->net_conv2d(net, "c", 2, 6, 3, 1, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(
      H->net_custom(net, "pn", pixelnorm_def(), pixelnorm_state_create(H, ctx, 6, 1e-8f, 1)),
      GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(H->net_build(net, 2, 5, 5), GANFW_OK);
  randomise_params(net, 3);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, dtype), GANFW_OK);
  ganfw_tensor *x = make(ctx, 4, (int64_t[]){3, 2, 5, 5}, "x");
  ganfw_tensor *dy = make(ctx, 4, (int64_t[]){3, 6, 5, 5}, "dy");
  gt_fill_uniform(x->data, x->numel, -1, 1, 1);
  gt_fill_uniform(dy->data, dy->numel, -1, 1, 2);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *out = NULL, *g = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &out), GANFW_OK);
  CU_ASSERT_EQUAL(out->dtype, dtype);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &g), GANFW_OK);
  ganfw_tensor *o32 = ganfw_tensor_as_dtype(out, GANFW_DTYPE_F32, GANFW_MEM_OTHER);
  ganfw_tensor *g32 = ganfw_tensor_as_dtype(g, GANFW_DTYPE_F32, GANFW_MEM_OTHER);
  memcpy(y, o32->data, (size_t)o32->nbytes);
  memcpy(dx, g32->data, (size_t)g32->nbytes);
  ganfw_param_info pi = {.struct_size = sizeof pi};
  CU_ASSERT_EQUAL(H->net_param_info(net, 1, &pi), GANFW_OK); /* after c.weight */
  CU_ASSERT_STRING_EQUAL(pi.name, "pn.weight");
  memcpy(dw, pi.grad->data, (size_t)pi.grad->nbytes);
  ganfw_tensor *all[] = {o32, g32, out, g, dy, x};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ganfw_tensor_destroy(all[i]);
  ganfw_tape_destroy(tape);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* Under AMP the adapter converts the 16-bit activations to f32 for the plugin and back: the
 * results follow f32's within the 16-bit rounding of the activations. */
static void test_pixelnorm_16bit(void) {
  enum { NY = 3 * 6 * 5 * 5, NX = 3 * 2 * 5 * 5 };
  static float y[3][NY], dx[3][NX], dw[3][6];
  const int32_t dtypes[3] = {GANFW_DTYPE_F32, GANFW_DTYPE_BF16, GANFW_DTYPE_F16};
  for (int k = 0; k < 3; k++) pixelnorm_step(dtypes[k], y[k], dx[k], dw[k]);
  for (int k = 1; k < 3; k++) {
    /* ||16-bit - f32|| / ||f32||: a few unit roundoffs (bf16 2^-8, f16 2^-11), from the
     * conv's rounded inputs and weights and the rounded activations between the layers */
    const double tol = dtypes[k] == GANFW_DTYPE_BF16 ? 3e-2 : 4e-3;
    const double ey = norm_rel(y[k], y[0], NY), edx = norm_rel(dx[k], dx[0], NX);
    const double edw = norm_rel(dw[k], dw[0], 6);
    printf("\n    %s: y %.2e, dx %.2e, dweight %.2e (relative norms of the differences)",
           ganfw_dtype_name(dtypes[k]), ey, edx, edw);
    CU_ASSERT(ey > 0 && ey < tol); /* > 0: it did compute in 16 bits */
    CU_ASSERT(edx < tol);
    CU_ASSERT(edw < tol);
  }
}

/* --- a test layer: y = x * gain[c], a buffer counting training forwards ------------------- */

/* What the probe layer does wrong, and what it saw. */
typedef struct probe {
  int64_t saved_lie, ws_lie, bwd_ws_lie; /* added to the honest figures it reports */
  int32_t leak;                          /* forward leaves its temporary behind */
  int32_t vandal;                        /* forward destroys x */
  int32_t batch_change;                  /* infer changes the batch */
  int32_t bad_names;                     /* init: 1 a dot, 2 a name twice, 3 five parameters */
  int32_t destroyed;                     /* times destroy ran */
} probe;

static ganfw_status probe_infer(void *state, const int64_t *in, int32_t ndim, int64_t *out,
                                int32_t *out_ndim) {
  const probe *p = state;
  for (int32_t d = 0; d < ndim; d++) out[d] = in[d];
  if (p->batch_change) out[0] = in[0] + 1;
  *out_ndim = ndim;
  return GANFW_OK;
}

static int64_t numel_of(const int64_t *in, int32_t ndim) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= in[d];
  return n;
}

/* saved: a copy of x; forward workspace: one tensor of x's size; backward: one of x's size and
 * one of C values */
static int64_t probe_saved(void *state, const int64_t *in, int32_t ndim) {
  return 4 * numel_of(in, ndim) + ((const probe *)state)->saved_lie;
}

static int64_t probe_ws(void *state, const int64_t *in, int32_t ndim, int32_t backward) {
  const probe *p = state;
  return backward ? 4 * numel_of(in, ndim) + 4 * in[1] + p->bwd_ws_lie
                  : 4 * numel_of(in, ndim) + p->ws_lie;
}

static ganfw_status probe_init(void *state, ganfw_ctx *ctx, ganfw_layer_init *li, const int64_t *in,
                               int32_t ndim) {
  const probe *p = state;
  (void)ndim;
  ganfw_tensor *gain = NULL, *calls = NULL;
  const int64_t one = 1;
  ganfw_status st = H->layer_add_param(li, p->bad_names == 1 ? "ga.in" : "gain", 1, &in[1], &gain);
  if (st == GANFW_OK) st = H->foreach_fill(ctx, &gain, 1, 2.0f);
  if (st == GANFW_OK)
    st = H->layer_add_buffer(li, p->bad_names == 2 ? "gain" : "calls", 1, &one, &calls);
  for (int i = 0; st == GANFW_OK && p->bad_names == 3 && i < 4; i++) {
    char name[8];
    snprintf(name, sizeof name, "p%d", i);
    st = H->layer_add_param(li, name, 1, &one, NULL);
  }
  return st;
}

static ganfw_status probe_forward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                  ganfw_tensor *y, ganfw_tensor **saved) {
  const probe *p = state;
  ganfw_ctx *ctx = call->ctx;
  ganfw_tensor *t =
      H->tensor_create(ctx, GANFW_DTYPE_F32, x->ndim, x->shape, GANFW_MEM_WORKSPACE, call->name);
  ganfw_tensor *s = saved ? H->tensor_create(ctx, GANFW_DTYPE_F32, x->ndim, x->shape,
                                             GANFW_MEM_ACTIVATION, call->name)
                          : NULL;
  if (!t || (saved && !s)) return GANFW_ERR_OOM;
  ganfw_status st = H->tensor_channel_affine(ctx, t, x, call->param[0], NULL);
  if (st == GANFW_OK) st = H->tensor_mul_scalar(ctx, y, t, 1.0f);
  if (st == GANFW_OK && s) st = H->tensor_mul_scalar(ctx, s, x, 1.0f);
  if (st == GANFW_OK && call->update_stats)
    st = H->tensor_add_scalar(ctx, call->buffer[0], call->buffer[0], 1.0f);
  if (!p->leak) H->tensor_destroy(t);
  if (p->vandal) H->tensor_destroy((ganfw_tensor *)x);
  if (saved) saved[0] = s;
  return st;
}

static ganfw_status probe_backward(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                                   const ganfw_tensor *y, ganfw_tensor *const *saved,
                                   const ganfw_tensor *dy, ganfw_tensor *dx) {
  (void)state, (void)x, (void)y;
  ganfw_ctx *ctx = call->ctx;
  const ganfw_tensor *xs = saved[0];
  ganfw_tensor *t =
      H->tensor_create(ctx, GANFW_DTYPE_F32, xs->ndim, xs->shape, GANFW_MEM_WORKSPACE, call->name);
  ganfw_tensor *s =
      H->tensor_create(ctx, GANFW_DTYPE_F32, 1, &xs->shape[1], GANFW_MEM_WORKSPACE, call->name);
  ganfw_status st = t && s ? GANFW_OK : GANFW_ERR_OOM;
  const int32_t dims[3] = {0, 2, 3};
  if (st == GANFW_OK && dx) st = H->tensor_channel_affine(ctx, dx, dy, call->param[0], NULL);
  if (st == GANFW_OK && call->param_grads) {
    ganfw_tensor *g = call->grad[0];
    st = H->tensor_mul(ctx, t, dy, xs);
    if (st == GANFW_OK) st = H->tensor_sum(ctx, s, t, dims, xs->ndim == 4 ? 3 : 1);
    if (st == GANFW_OK)
      st = call->accumulate ? H->foreach_axpy(ctx, &g, 1.0f, &s, 1)
                            : H->foreach_copy(ctx, &g, &s, 1);
  }
  H->tensor_destroy(s);
  H->tensor_destroy(t);
  return st;
}

static void probe_destroy(void *state) {
  ((probe *)state)->destroyed++;
}

static const ganfw_layer_def probe_def = {
    .struct_size = sizeof(ganfw_layer_def),
    .type = "probe",
    .infer = probe_infer,
    .saved_bytes = probe_saved,
    .workspace_bytes = probe_ws,
    .init = probe_init,
    .forward = probe_forward,
    .backward = probe_backward,
    .destroy = probe_destroy,
};

/* A net "g": conv "c" -> probe "pr" on [2,4,4] inputs. */
static ganfw_net *probe_net(ganfw_ctx *ctx, probe *p, ganfw_status *build) {
  ganfw_net *net = H->net_create(ctx, "g");
  CU_ASSERT_EQUAL(H->net_conv2d(net, "c", 2, 3, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(H->net_custom(net, "pr", &probe_def, p), GANFW_OK);
  *build = H->net_build(net, 2, 4, 4);
  return net;
}

/* One training step (forward with a tape, backward with every gradient) of a probe net on a
 * batch of 3; returns the first failure. */
static ganfw_status probe_step(ganfw_ctx *ctx, ganfw_net *net) {
  ganfw_tensor *x = make(ctx, 4, (int64_t[]){3, 2, 4, 4}, "x");
  ganfw_tensor *dy = make(ctx, 4, (int64_t[]){3, 3, 4, 4}, "dy");
  float host[3 * 3 * 4 * 4];
  gt_fill_uniform(host, 3 * 3 * 4 * 4, -1, 1, 4);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(x, host, x->nbytes), GANFW_OK); /* no-ops on meta */
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(dy, host, dy->nbytes), GANFW_OK);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *y = NULL, *dx = NULL;
  ganfw_status st = ganfw_net_forward(net, x, tape, &y);
  if (st == GANFW_OK)
    st = ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(dx);
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(x);
  return st;
}

/* The probe's parameter and buffer are the node's: "pr.gain", "pr.calls", in net_param_info,
 * ganfw_net_buffer_at and a checkpoint, which loads back into a fresh net. The buffer counts
 * training forwards (update_stats), not eval ones. */
static void test_params_and_buffers(void) {
  char dir[600];
  snprintf(dir, sizeof dir, "%s/ck_XXXXXX", root); /* inside the suite's folder */
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  ganfw_ctx *ctx = make_ctx(0);
  probe p = {0}, q = {0};
  ganfw_status st;
  ganfw_net *net = probe_net(ctx, &p, &st);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(H->net_param_count(net), 3); /* c.weight, c.bias, pr.gain */
  ganfw_param_info pi = {.struct_size = sizeof pi};
  CU_ASSERT_EQUAL(H->net_param_info(net, 2, &pi), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(pi.name, "pr.gain");
  CU_ASSERT_STRING_EQUAL(pi.layer_type, "probe");
  CU_ASSERT(pi.trainable && pi.grad && pi.value->numel == 3);
  CU_ASSERT_EQUAL(((float *)pi.value->data)[2], 2.0f); /* init's value */
  ganfw_net_buffer b;
  CU_ASSERT_EQUAL(ganfw_net_buffer_at(net, 0, &b), 1);
  CU_ASSERT_STRING_EQUAL(b.name, "pr.calls");
  CU_ASSERT(b.tensor && !b.counter && b.tensor->numel == 1);
  CU_ASSERT_EQUAL(ganfw_net_buffer_at(net, 1, &b), 0);

  CU_ASSERT_EQUAL(probe_step(ctx, net), GANFW_OK);
  CU_ASSERT_EQUAL(probe_step(ctx, net), GANFW_OK);
  ganfw_net_set_train(net, 0, 0);
  CU_ASSERT_EQUAL(probe_step(ctx, net), GANFW_OK);
  CU_ASSERT_EQUAL(((float *)b.tensor->data)[0], 2.0f);
  ((float *)pi.value->data)[1] = -7.5f;

  char path[700];
  snprintf(path, sizeof path, "%s/ck.safetensors", dir);
  ganfw_ckpt_net cn = {.net = net};
  ganfw_ckpt_meta meta = {0};
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, &cn, 1, &meta), GANFW_OK);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &f), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "g.pr.gain"));
  CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, "g.pr.calls"));
  ganfw_st_close(f);

  ganfw_net *fresh = probe_net(ctx, &q, &st);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_ckpt_net cf = {.net = fresh};
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, &cf, 1, NULL), GANFW_OK);
  ganfw_param_info fi = {.struct_size = sizeof fi};
  ganfw_net_buffer fb;
  CU_ASSERT_EQUAL(H->net_param_info(fresh, 2, &fi), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_buffer_at(fresh, 0, &fb), 1);
  CU_ASSERT_EQUAL(((float *)fi.value->data)[1], -7.5f);
  CU_ASSERT_EQUAL(((float *)fb.tensor->data)[0], 2.0f);
  ganfw_net_destroy(fresh);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(p.destroyed, 1); /* the net owned the state: destroyed once, with it */
  CU_ASSERT_EQUAL(q.destroyed, 1);
  ganfw_ctx_destroy(ctx);
  remove(path);
  rmdir(dir);
}

/* --- the adapter's checks ------------------------------------------------------------------ */

/* A probe net with `p`'s faults: its step fails with a message naming the node and holding
 * each needle, and leaves no activation or workspace behind. On the meta backend too (meta
 * 1), as `ganfw plan` runs it. */
static void expect_step_error(probe p, int meta, const char *a, const char *b, const char *c) {
  ganfw_ctx *ctx = make_ctx(meta);
  ganfw_status st;
  ganfw_net *net = probe_net(ctx, &p, &st);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(probe_step(ctx, net), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("layer g.pr (probe)", a, b, c, NULL));
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_WORKSPACE), 0);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* The probe's input is the conv's output [3,3,4,4]: 144 values, 576 bytes; its backward
 * needs 576 + 12 (a sum of 3 channels). */
static void test_reported_bytes(void) {
  for (int meta = 0; meta < 2; meta++) {
    expect_step_error((probe){.saved_lie = -256}, meta, "forward kept 576 bytes in saved[]",
                      "input [3,3,4,4]", "saved_bytes reports 320");
    expect_step_error((probe){.ws_lie = 100}, meta, "held 576 bytes at most beyond the 576",
                      "workspace_bytes (forward) reports 676", "plan");
    expect_step_error((probe){.bwd_ws_lie = -12}, meta, "backward's tensors held 588 bytes",
                      "workspace_bytes (backward) reports 576", "input [3,3,4,4]");
  }
  /* honest figures: the same step passes on both backends */
  for (int meta = 0; meta < 2; meta++) {
    ganfw_ctx *ctx = make_ctx(meta);
    probe p = {0};
    ganfw_status st;
    ganfw_net *net = probe_net(ctx, &p, &st);
    CU_ASSERT_EQUAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(probe_step(ctx, net), GANFW_OK);
    ganfw_net_destroy(net);
    ganfw_ctx_destroy(ctx);
  }
}

static void test_misbehaving_layers(void) {
  expect_step_error((probe){.leak = 1}, 0, "forward left 1 tensor(s) of 576 bytes",
                    "the first 'g.pr'", "destroy each temporary");
  expect_step_error((probe){.vandal = 1}, 0, "forward destroyed tensor 'g.c'",
                    "did not create in this call", "belong to the core");
  /* infer may not change the batch: refused at net_build, naming the node */
  ganfw_ctx *ctx = make_ctx(0);
  probe p = {.batch_change = 1};
  ganfw_status st;
  ganfw_net *net = probe_net(ctx, &p, &st);
  CU_ASSERT_EQUAL(st, GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("layer g.pr (probe)", "infer gives [2,3,4,4] for input [1,3,4,4]",
                        "keeps the batch", NULL));
  ganfw_net_destroy(net);
  /* parameter and buffer names */
  const char *why[] = {"the name 'ga.in' has a '.'", "the name 'gain' is declared twice",
                       "at most 4 parameters"};
  for (int k = 0; k < 3; k++) {
    probe q = {.bad_names = k + 1};
    net = probe_net(ctx, &q, &st);
    CU_ASSERT_EQUAL(st, GANFW_ERR_INVALID_ARG);
    CU_ASSERT(message_has("layer g.pr (probe)", why[k], NULL));
    ganfw_net_destroy(net);
    CU_ASSERT_EQUAL(q.destroyed, 1);
  }
  ganfw_ctx_destroy(ctx);
}

/* net_custom refuses a def without its required members or of a too small struct_size,
 * naming the node; the state is destroyed all the same (the net owned it). */
static void test_bad_defs(void) {
  ganfw_ctx *ctx = make_ctx(0);
  ganfw_net *net = H->net_create(ctx, "d");
  ganfw_layer_def no_fwd = probe_def, small = probe_def, no_type = probe_def, keep = probe_def;
  no_fwd.forward = NULL;
  small.struct_size = 16;
  no_type.type = "";
  keep.keep = 4;
  const struct {
    const ganfw_layer_def *def;
    const char *want;
  } cases[] = {{&no_fwd, "lacks infer, forward or backward"},
               {&small, "struct_size is below the ABI 1.3 size"},
               {&no_type, "has no type name"},
               {&keep, "keep has bits other than"},
               {NULL, "ganfw_layer_def is NULL"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    probe p = {0};
    CU_ASSERT_EQUAL(H->net_custom(net, "bad", cases[i].def, &p), GANFW_ERR_INVALID_ARG);
    CU_ASSERT(message_has("net_custom: layer d.bad", cases[i].want, NULL));
    CU_ASSERT_EQUAL(p.destroyed, cases[i].def && cases[i].def->struct_size > 16 ? 1 : 0);
  }
  /* nothing was appended: a good layer of the same name still goes in */
  probe p = {0};
  CU_ASSERT_EQUAL(H->net_custom(net, "bad", &probe_def, &p), GANFW_OK);
  CU_ASSERT_EQUAL(H->net_layer_count(net), 1);
  /* a name taken: refused by the net, and the state still destroyed */
  probe dup = {0};
  CU_ASSERT_EQUAL(H->net_custom(net, "bad", &probe_def, &dup), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(dup.destroyed, 1);
  /* layer_add_param outside init */
  CU_ASSERT_EQUAL(H->layer_add_param(NULL, "w", 1, (int64_t[]){1}, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("no layer being built", NULL));
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(p.destroyed, 1);
  ganfw_ctx_destroy(ctx);
}

/* --- plans ------------------------------------------------------------------------------- */

/* conv -> pixelnorm (affine) -> leaky relu -> upsample -> conv -> pixelnorm: one training
 * step and a no-grad forward on the meta backend (meta 1) or the CPU, its allocator figures
 * into *st. */
static void plan_step(int32_t meta, int32_t dtype, int64_t batch, ganfw_alloc_stats *st) {
  ganfw_ctx *ctx = make_ctx(meta);
  ganfw_net *net = H->net_create(ctx, "g");
  CU_ASSERT_EQUAL(H->net_conv2d(net, "c1", 3, 8, 3, 1, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(
      H->net_custom(net, "pn1", pixelnorm_def(), pixelnorm_state_create(H, ctx, 8, 1e-8f, 1)),
      GANFW_OK);
  CU_ASSERT_EQUAL(H->net_activation(net, "a1", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(H->net_upsample(net, "up", 2, GANFW_UPSAMPLE_NEAREST), GANFW_OK);
  CU_ASSERT_EQUAL(H->net_conv2d(net, "c2", 8, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(
      H->net_custom(net, "pn2", pixelnorm_def(), pixelnorm_state_create(H, ctx, 4, 1e-8f, 0)),
      GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(H->net_build(net, 3, 8, 8), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, dtype), GANFW_OK);
  ganfw_tensor *x = make(ctx, 4, (int64_t[]){batch, 3, 8, 8}, "x");
  ganfw_tensor *dy = make(ctx, 4, (int64_t[]){batch, 4, 16, 16}, "dy");
  float *host = gt_alloc((size_t)dy->nbytes);
  gt_fill_uniform(host, dy->numel, -1, 1, 3);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(x, host, x->nbytes), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(dy, host, dy->nbytes), GANFW_OK);
  gt_free(host);
  ganfw_alloc_reset_peak(ctx->alloc);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *y = NULL, *dx = NULL, *y2 = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx),
      GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y2), GANFW_OK);
  ganfw_alloc_get_stats(ctx->alloc, st);
  ganfw_tensor *all[] = {y, dx, y2, x, dy};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ganfw_tensor_destroy(all[i]);
  ganfw_tape_destroy(tape);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_WORKSPACE), 0);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* Planned bytes equal measured bytes for a net with plugin layers, every category, in f32,
 * f16 and bf16. */
static void test_plan_exact_net(void) {
  const int32_t dtypes[3] = {GANFW_DTYPE_F32, GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  for (int k = 0; k < 3; k++) {
    ganfw_alloc_stats plan, real;
    plan_step(1, dtypes[k], 16, &plan);
    plan_step(0, dtypes[k], 16, &real);
    printf("\n    %-4s: plan %lld B allocated, %lld B reserved; measured %lld, %lld",
           ganfw_dtype_name(dtypes[k]), (long long)plan.allocated.peak,
           (long long)plan.reserved.peak, (long long)real.allocated.peak,
           (long long)real.reserved.peak);
    CU_ASSERT(plan.allocated.peak > 0);
    CU_ASSERT_EQUAL(plan.allocated.peak, real.allocated.peak);
    CU_ASSERT_EQUAL(plan.reserved.peak, real.reserved.peak);
    CU_ASSERT_EQUAL(plan.num_allocs, real.num_allocs);
    for (int32_t c = 0; c < GANFW_MEM_COUNT; c++)
      CU_ASSERT_EQUAL(plan.category[c].peak, real.category[c].peak);
  }
}

/* --- the example model plugin: plan against a real step, and out of tree ---------------- */

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

/* A pixelnorm_gan config (affine pixel norms, optional memory strategies) on the synthetic
 * MNIST, loading the plugin from `plugin_dir`. */
static int write_config(const char *rel, const char *plugin_dir, const char *memory) {
  FILE *f = fopen(path_in(rel), "w");
  if (!f) return -1;
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "plugin_path: ['%s']\n"
          "data: {dataset: mnist, path: '%s'}\n"
          "model: {plugin: pixelnorm_gan, nz: 16, ngf: 8, ndf: 8, affine: true}\n"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
          "train: {batch_size: 16, max_steps: 2, log_every: 1}\n"
          "%s"
          "run: {out_dir: '%s', samples: 16, sample_nrow: 4}\n",
          plugin_dir, path_in("mnist"), memory, path_in("run"));
  return fclose(f);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static int suite_init(void) {
  H = ganfw_host_table();
  const char *tmp = getenv("TMPDIR");
  snprintf(root, sizeof root, "%s/ganfw_plugin_layer_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(root)) return 1;
  char mnist[600];
  snprintf(mnist, sizeof mnist, "%s/mnist", root);
  if (mkdir(mnist, 0755) != 0 || gt_write_mnist(mnist, 64, 16, 5) != 0) return 1;
  return 0;
}

static int suite_clean(void) {
  if (!getenv("GANFW_TEST_KEEP")) nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

/* `plan` equals one real step of the example GAN (built from the public headers into
 * <build>/tests/plugin_layer): peaks allocated and reserved, per phase and per category, in
 * f32 and under amp. */
static void test_plan_config(void) {
  char plugins[4200];
  snprintf(plugins, sizeof plugins, "%s/tests/plugin_layer", getenv("GANFW_TEST_BUILD_DIR"));
  const char *memory[2] = {"", "memory: [{plugin: amp}]\n"};
  for (int k = 0; k < 2; k++) {
    CU_ASSERT_EQUAL_FATAL(write_config("plan.yaml", plugins, memory[k]), 0);
    ganfw_probe_result plan, real;
    memset(&real, 0, sizeof real);
    ganfw_status st = ganfw_plan_make(gt_config(path_in("plan.yaml"), NULL, 0), 0, NULL, &plan);
    if (st != GANFW_OK) printf("\n    plan: %s", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    st = ganfw_plan_measure(gt_config(path_in("plan.yaml"), NULL, 0), &plan, NULL, &real);
    if (st != GANFW_OK) printf("\n    measure: %s", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    printf("\n    %s: plan %lld B, measured %lld B allocated (%+.2f%%); reserved %+.2f%%",
           k ? "amp" : "f32", (long long)plan.peak_allocated, (long long)real.peak_allocated,
           ganfw_plan_diff_percent(plan.peak_allocated, real.peak_allocated),
           ganfw_plan_diff_percent(plan.peak_reserved, real.peak_reserved));
    CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
    CU_ASSERT_EQUAL(plan.peak_reserved, real.peak_reserved);
    for (int32_t p = 0; p < plan.n_phases; p++)
      CU_ASSERT_EQUAL(plan.phase[p].allocated, real.phase[p].allocated);
    for (int32_t c = 0; c < GANFW_MEM_COUNT; c++)
      CU_ASSERT_EQUAL(plan.peak_category[c], real.peak_category[c]);
    ganfw_probe_result_free(&plan);
    ganfw_probe_result_free(&real);
  }
}

/* Runs a shell command with its output into root/<name>.log; prints the log on an exit
 * status other than 0 and returns the status. */
static int run_logged(const char *name, const char *cmd) {
  char full[16384];
  snprintf(full, sizeof full, "( %s ) >'%s' 2>&1", cmd, path_in(name));
  int raw = system(full);
  int rc = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  if (rc != 0) {
    printf("\n    %s exited with %d:\n    %s\n", name, rc, cmd);
    char show[16384];
    snprintf(show, sizeof show, "tail -c 6000 '%s'", path_in(name));
    if (system(show) != 0) printf("    (no log)\n");
  }
  return rc;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s) s[fread(s, 1, (size_t)n, f)] = '\0';
  fclose(f);
  return s;
}

/* Installs this build into root/prefix, builds examples/pixelnorm against that prefix alone,
 * then with the installed ganfw: `plan --measure` shows every row at +0.00%, and two training
 * steps write a checkpoint with the plugin layers' parameters. */
static void test_out_of_tree(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR"), *src = getenv("GANFW_SOURCE_DIR");
  CU_ASSERT_FATAL(build && src);
  char cmd[16384];
  snprintf(cmd, sizeof cmd, "'%s' --install '%s' --prefix '%s'", EX_CMAKE_COMMAND, build,
           path_in("prefix"));
  CU_ASSERT_EQUAL_FATAL(run_logged("install.log", cmd), 0);
  snprintf(cmd, sizeof cmd,
           "env -u ganfw_DIR -u CMAKE_PREFIX_PATH '%s' -S '%s/examples/pixelnorm' -B '%s' "
           "-DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH='%s' -DCMAKE_C_COMPILER='%s' "
           "-DCMAKE_C_FLAGS='%s' -DCMAKE_MODULE_LINKER_FLAGS='%s' "
           "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF "
           "&& '%s' --build '%s'",
           EX_CMAKE_COMMAND, src, path_in("build"), path_in("prefix"), EX_C_COMPILER, EX_C_FLAGS,
           EX_LINK_FLAGS, EX_CMAKE_COMMAND, path_in("build"));
  CU_ASSERT_EQUAL_FATAL(run_logged("build.log", cmd), 0);
  CU_ASSERT_EQUAL_FATAL(write_config("oot.yaml", path_in("build"), ""), 0);
  char ganfw[700];
  snprintf(ganfw, sizeof ganfw, "%s/" EX_INSTALL_BINDIR "/ganfw", path_in("prefix"));
  snprintf(cmd, sizeof cmd, "'%s' plan '%s' --measure", ganfw, path_in("oot.yaml"));
  CU_ASSERT_EQUAL_FATAL(run_logged("plan.log", cmd), 0);
  char *text = read_text(path_in("plan.log"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  const char *table = strstr(text, "Plan against one real step");
  CU_ASSERT_PTR_NOT_NULL_FATAL(table);
  int rows = 0, exact = 0;
  for (const char *line = strchr(table, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
    const char *end = strchr(line + 1, '\n');
    size_t len = end ? (size_t)(end - line - 1) : strlen(line + 1);
    if (len < 2 || line[len] != '%') continue; /* the rows end in their difference */
    rows++;
    exact += len >= 6 && strncmp(line + len - 4, "0.00%", 5) == 0 && line[len - 5] == '+';
  }
  printf("\n    installed ganfw plan --measure: %d of %d rows at +0.00%%", exact, rows);
  CU_ASSERT(rows >= 9);
  CU_ASSERT_EQUAL(exact, rows);
  free(text);
  snprintf(cmd, sizeof cmd, "'%s' '%s'", ganfw, path_in("oot.yaml"));
  CU_ASSERT_EQUAL_FATAL(run_logged("train.log", cmd), 0);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("run/checkpoints/step_00000002.safetensors"), &f),
                        GANFW_OK);
  const char *names[] = {"generator.pn0.weight", "generator.pn1.bias", "generator.pn2.weight",
                         "optim.generator.pn1.weight.exp_avg"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const ganfw_st_tensor *t = ganfw_st_find(f, names[i]);
    if (!t) printf("\n    the checkpoint lacks %s", names[i]);
    CU_ASSERT_PTR_NOT_NULL(t);
  }
  ganfw_st_close(f);
}

static CU_TestInfo tests[] = {{"pixelnorm_gradients", test_pixelnorm_gradients},
                              {"pixelnorm_in_a_graph", test_pixelnorm_in_a_graph},
                              {"pixelnorm_16bit", test_pixelnorm_16bit},
                              {"checkpoint_and_freeze", test_checkpoint_and_freeze},
                              {"params_and_buffers", test_params_and_buffers},
                              {"reported_bytes", test_reported_bytes},
                              {"misbehaving_layers", test_misbehaving_layers},
                              {"bad_defs", test_bad_defs},
                              {"plan_exact_net", test_plan_exact_net},
                              {"plan_config", test_plan_config},
                              {"out_of_tree", test_out_of_tree},
                              CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("plugin_layer", tests, suite_init, suite_clean);
}
