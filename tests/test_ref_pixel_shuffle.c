/* pixel_shuffle and pixel_unshuffle (layers/pixel_shuffle.c, op.h's PIXEL_SHUFFLE and
 * PIXEL_UNSHUFFLE) against PyTorch 1.13's nn.PixelShuffle and nn.PixelUnshuffle
 * (tests/ref/gen_pixel_shuffle.py), each built as a one-layer net through the host table's
 * net_pixel_shuffle on the CPU: forward and backward bit for bit in f32 (a permutation), and
 * in f16 and bf16 bit for bit PyTorch's result in that dtype, which is the f32 result rounded;
 * the 16-bit nets run natively (no f32 copy: no workspace at all). Then the errors bad
 * arguments and shapes end with, naming the layer, and the planner: a net using both layers
 * is planned (meta backend) to the byte of a real step in f32, f16 and bf16. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/alloc.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "testutil.h"

static const ganfw_host *host;

typedef struct ps_case {
  const char *name; /* the reference's key prefix */
  int64_t factor;
  int32_t unshuffle;
} ps_case;

static const ps_case cases[] = {
    {"ps_r2", 2, 0}, {"ps_r3", 3, 0}, {"ps_r1", 1, 0},  {"ps_big", 2, 0},
    {"pu_r2", 2, 1}, {"pu_r3", 3, 1}, {"pu_big", 2, 1},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static ganfw_ctx *new_ctx(int32_t meta) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 5, .meta = meta};
  ganfw_ctx *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c), GANFW_OK);
  return c;
}

/* A tensor of ctx in `dtype` holding data (f32) rounded to it. */
static ganfw_tensor *upload(ganfw_ctx *c, const float *data, int ndim, const int64_t *shape,
                            int32_t dtype) {
  ganfw_tensor *t = ganfw_tensor_create(c, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_DATA, "in");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(t, data, t->nbytes), GANFW_OK);
  ganfw_tensor *d = ganfw_tensor_as_dtype(t, dtype, GANFW_MEM_DATA);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  ganfw_tensor_destroy(t);
  return d;
}

/* t's values as f32 in out[0..numel). */
static void download(ganfw_tensor *t, float *out) {
  ganfw_tensor *f = ganfw_tensor_as_dtype(t, GANFW_DTYPE_F32, GANFW_MEM_DATA);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(f, out, f->nbytes), GANFW_OK);
  ganfw_tensor_destroy(f);
}

/* want[0..n) rounded to dtype and back (the core's cast: round to nearest even). */
static void round_to(ganfw_ctx *c, int32_t dtype, const float *want, int64_t n, float *out) {
  ganfw_tensor *t = upload(c, want, 1, &n, dtype);
  download(t, out);
  ganfw_tensor_destroy(t);
}

/* Appends the case's layer, named "layer". */
static ganfw_status add_layer(ganfw_net *net, const ps_case *pc) {
  return host->net_pixel_shuffle(net, "layer", pc->factor, pc->unshuffle);
}

/* n floats equal bit for bit; prints the first difference. */
static void expect_same(const char *what, const float *got, const float *want, int64_t n) {
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (memcmp(&got[i], &want[i], sizeof got[i]) != 0) bad = i;
  if (bad >= 0)
    printf("\n    %s: element %lld is %.9g, want %.9g", what, (long long)bad, got[bad], want[bad]);
  CU_ASSERT(bad < 0);
}

/* The case's net in compute dtype `dtype` on x and dy (the reference's) handed over in
 * in_dtype: y and dx as f32 into the caller's y[0..ny), dx[0..nx); the workspace bytes the
 * step took at its peak into *ws_peak. */
static void run_case(gt_ref *ref, const ps_case *pc, int32_t dtype, int32_t in_dtype, float *y,
                     float *dx, int64_t *ws_peak) {
  char key[96];
  int64_t xs[8], ys[8];
  int xnd, ynd;
  snprintf(key, sizeof key, "%s_x", pc->name);
  const float *x = gt_ref_f32(ref, key, NULL, xs, &xnd);
  snprintf(key, sizeof key, "%s_dy", pc->name);
  const float *dy = gt_ref_f32(ref, key, NULL, ys, &ynd);
  CU_ASSERT_FATAL(x && dy && xnd == 4 && ynd == 4);
  ganfw_ctx *c = new_ctx(0);
  ganfw_net *net = host->net_create(c, "net");
  CU_ASSERT_EQUAL_FATAL(add_layer(net, pc), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, xs[1], xs[2], xs[3]), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, dtype), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(ganfw_net_layer_type(net, 0),
                         pc->unshuffle ? "pixel_unshuffle" : "pixel_shuffle");
  CU_ASSERT_EQUAL(host->net_param_count(net), 0);
  ganfw_tensor *xt = upload(c, x, 4, xs, in_dtype), *dyt = upload(c, dy, 4, ys, in_dtype);
  ganfw_alloc_reset_peak(c->alloc);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *yt = NULL, *dxt = NULL;
  ganfw_status st = ganfw_net_forward(net, xt, tape, &yt);
  if (st != GANFW_OK) printf("\n    %s: %s", pc->name, ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(net, tape, dyt, GANFW_BWD_INPUT_GRAD, &dxt), GANFW_OK);
  ganfw_alloc_stats stats;
  ganfw_alloc_get_stats(c->alloc, &stats);
  *ws_peak = stats.category[GANFW_MEM_WORKSPACE].peak;
  CU_ASSERT_EQUAL(yt->dtype, dtype);
  CU_ASSERT_EQUAL(dxt->dtype, dtype);
  CU_ASSERT(yt->ndim == 4 && memcmp(yt->shape, ys, sizeof(int64_t) * 4) == 0);
  CU_ASSERT(dxt->ndim == 4 && memcmp(dxt->shape, xs, sizeof(int64_t) * 4) == 0);
  download(yt, y);
  download(dxt, dx);
  ganfw_tape_destroy(tape);
  ganfw_tensor *all[] = {xt, dyt, yt, dxt};
  for (size_t i = 0; i < 4; i++) ganfw_tensor_destroy(all[i]);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* f32: PyTorch's y and dx, bit for bit. */
static void test_f32(void) {
  host = ganfw_host_table();
  gt_ref *ref = gt_ref_open("pixel_shuffle");
  if (!ref) return;
  for (size_t k = 0; k < N_CASES; k++) {
    char key[96], what[96];
    int64_t ny, nx;
    snprintf(key, sizeof key, "%s_y", cases[k].name);
    const float *want_y = gt_ref_f32(ref, key, &ny, NULL, NULL);
    snprintf(key, sizeof key, "%s_dx", cases[k].name);
    const float *want_dx = gt_ref_f32(ref, key, &nx, NULL, NULL);
    CU_ASSERT_FATAL(want_y && want_dx);
    float *y = gt_alloc((size_t)ny * sizeof *y), *dx = gt_alloc((size_t)nx * sizeof *dx);
    int64_t ws;
    run_case(ref, &cases[k], GANFW_DTYPE_F32, GANFW_DTYPE_F32, y, dx, &ws);
    snprintf(what, sizeof what, "%s f32 y", cases[k].name);
    expect_same(what, y, want_y, ny);
    snprintf(what, sizeof what, "%s f32 dx", cases[k].name);
    expect_same(what, dx, want_dx, nx);
    CU_ASSERT_EQUAL(ws, 0);
    printf("\n    %-8s f32 y [%lld], dx [%lld] bit for bit", cases[k].name, (long long)ny,
           (long long)nx);
    gt_free(y);
    gt_free(dx);
  }
  gt_ref_close(ref);
}

/* f16 and bf16 on 16-bit inputs: natively (no workspace), bit for bit PyTorch's result in that
 * dtype and the f32 result rounded; an f32 input (a data batch) into a 16-bit net gives the
 * same bits, converted once on the way in. */
static void test_16bit(void) {
  host = ganfw_host_table();
  gt_ref *ref = gt_ref_open("pixel_shuffle");
  if (!ref) return;
  const int32_t dtypes[2] = {GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  ganfw_ctx *c = new_ctx(0);
  for (size_t k = 0; k < N_CASES; k++) {
    for (int d = 0; d < 2; d++) {
      const char *dn = ganfw_dtype_name(dtypes[d]);
      char key[96], what[96];
      int64_t ny, nx;
      snprintf(key, sizeof key, "%s_y_%s", cases[k].name, dn);
      const float *torch_y = gt_ref_f32(ref, key, &ny, NULL, NULL);
      snprintf(key, sizeof key, "%s_dx_%s", cases[k].name, dn);
      const float *torch_dx = gt_ref_f32(ref, key, &nx, NULL, NULL);
      snprintf(key, sizeof key, "%s_y", cases[k].name);
      const float *y32 = gt_ref_f32(ref, key, NULL, NULL, NULL);
      snprintf(key, sizeof key, "%s_dx", cases[k].name);
      const float *dx32 = gt_ref_f32(ref, key, NULL, NULL, NULL);
      CU_ASSERT_FATAL(torch_y && torch_dx && y32 && dx32);
      float *y = gt_alloc((size_t)ny * sizeof *y), *dx = gt_alloc((size_t)nx * sizeof *dx);
      float *ry = gt_alloc((size_t)ny * sizeof *ry), *rdx = gt_alloc((size_t)nx * sizeof *rdx);
      round_to(c, dtypes[d], y32, ny, ry);
      round_to(c, dtypes[d], dx32, nx, rdx);
      int64_t ws;
      run_case(ref, &cases[k], dtypes[d], dtypes[d], y, dx, &ws);
      snprintf(what, sizeof what, "%s %s y vs torch", cases[k].name, dn);
      expect_same(what, y, torch_y, ny);
      snprintf(what, sizeof what, "%s %s dx vs torch", cases[k].name, dn);
      expect_same(what, dx, torch_dx, nx);
      snprintf(what, sizeof what, "%s %s y vs f32 rounded", cases[k].name, dn);
      expect_same(what, y, ry, ny);
      snprintf(what, sizeof what, "%s %s dx vs f32 rounded", cases[k].name, dn);
      expect_same(what, dx, rdx, nx);
      CU_ASSERT_EQUAL(ws, 0); /* natively: not one f32 copy */
      /* the data batch in f32: rounded on the way in, the same bits out */
      run_case(ref, &cases[k], dtypes[d], GANFW_DTYPE_F32, y, dx, &ws);
      snprintf(what, sizeof what, "%s %s y from f32 input", cases[k].name, dn);
      expect_same(what, y, torch_y, ny);
      snprintf(what, sizeof what, "%s %s dx from f32 dy", cases[k].name, dn);
      expect_same(what, dx, torch_dx, nx);
      printf("\n    %-8s %-4s y, dx bit for bit torch's and f32's rounded", cases[k].name, dn);
      gt_free(y), gt_free(dx), gt_free(ry), gt_free(rdx);
    }
  }
  ganfw_ctx_destroy(c);
  gt_ref_close(ref);
}

/* Bad arguments and shapes: refused with one message naming the net, the layer and what to
 * change. */
static void expect_error(ganfw_status st, const char *part1, const char *part2) {
  CU_ASSERT_EQUAL(st, GANFW_ERR_INVALID_ARG);
  const char *msg = ganfw_error_message();
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, part1));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, part2));
  printf("\n    %s", msg);
}

static void test_errors(void) {
  host = ganfw_host_table();
  ganfw_ctx *c = new_ctx(0);
  ganfw_net *net = host->net_create(c, "g");
  expect_error(host->net_pixel_shuffle(net, "ps", 0, 0), "layer ps", "factor");
  expect_error(host->net_pixel_shuffle(net, "ps", 2, 2), "layer ps", "unshuffle 0");
  CU_ASSERT_EQUAL(host->net_layer_count(net), 0);
  ganfw_net_destroy(net);
  /* shapes that do not fit, found at net_build */
  struct {
    int64_t factor;
    int32_t unshuffle, flat;
    int64_t c, h, w;
    const char *part;
  } bad[] = {
      {2, 0, 0, 6, 4, 4, "channels divisible by 4 (the factor squared), gets 6 channels"},
      {3, 0, 0, 12, 4, 4, "channels divisible by 9 (the factor squared), gets 12 channels"},
      {2, 1, 0, 3, 5, 4, "height and width divisible by 2, gets 5x4"},
      {3, 1, 0, 3, 9, 4, "height and width divisible by 3, gets 9x4"},
      {2, 0, 1, 8, 2, 2, "expects [N,C,H,W] input"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    net = host->net_create(c, "g");
    ganfw_status st = bad[k].flat ? host->net_flatten(net, "f") : GANFW_OK;
    if (st == GANFW_OK) st = host->net_pixel_shuffle(net, "up", bad[k].factor, bad[k].unshuffle);
    CU_ASSERT_EQUAL(st, GANFW_OK);
    expect_error(host->net_build(net, bad[k].c, bad[k].h, bad[k].w), "g.up", bad[k].part);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(ganfw_error_message(), bad[k].unshuffle ? "pixel_unshuffle" : "pixel_shuffle"));
    ganfw_net_destroy(net);
  }
  ganfw_ctx_destroy(c);
}

/* --- the planner: planned bytes equal measured bytes ------------------------------------- */

/* conv(3 -> 16) -> pixel_shuffle(2) -> relu -> conv(4 -> 4) -> pixel_unshuffle(2) -> conv(16 ->
 * 8): a generator's sub-pixel upsampling and a space-to-depth downsampling, on [N,3,8,8]. */
static ganfw_net *plan_net(ganfw_ctx *c) {
  ganfw_net *net = host->net_create(c, "g");
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c1", 3, 16, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_pixel_shuffle(net, "up", 2, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_activation(net, "relu", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c2", 4, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_pixel_shuffle(net, "down", 2, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c3", 16, 8, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, 3, 8, 8), GANFW_OK);
  return net;
}

/* One training step's allocator figures (forward with a tape, backward with input and
 * parameter gradients, then a no-grad forward) on the meta backend (meta 1: planned) or the
 * CPU (0: measured). */
static void plan_step(int32_t meta, int32_t dtype, int64_t batch, ganfw_alloc_stats *st) {
  ganfw_ctx *c = new_ctx(meta);
  ganfw_net *net = plan_net(c);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, dtype), GANFW_OK);
  const int64_t xs[4] = {batch, 3, 8, 8}, ys[4] = {batch, 8, 8, 8};
  ganfw_tensor *x = ganfw_tensor_create(c, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *dy = ganfw_tensor_create(c, GANFW_DTYPE_F32, 4, ys, GANFW_MEM_DATA, "dy");
  CU_ASSERT_FATAL(x && dy);
  float *h = gt_alloc((size_t)dy->nbytes);
  gt_fill_uniform(h, dy->numel, -1, 1, 3);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(x, h, x->nbytes), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(dy, h, dy->nbytes), GANFW_OK);
  gt_free(h);
  ganfw_alloc_reset_peak(c->alloc);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *y = NULL, *dx = NULL, *y2 = NULL;
  ganfw_status s = ganfw_net_forward(net, x, tape, &y);
  if (s != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(s, GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx),
      GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y2), GANFW_OK);
  ganfw_alloc_get_stats(c->alloc, st);
  ganfw_tensor *all[] = {y, dx, y2, x, dy};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ganfw_tensor_destroy(all[i]);
  ganfw_tape_destroy(tape);
  ganfw_alloc_stats after; /* every activation and workspace handed back */
  ganfw_alloc_get_stats(c->alloc, &after);
  CU_ASSERT_EQUAL(after.category[GANFW_MEM_ACTIVATION].current, 0);
  CU_ASSERT_EQUAL(after.category[GANFW_MEM_WORKSPACE].current, 0);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* The meta backend's peaks (allocated, reserved, per category) and allocation count equal a
 * real step's, in f32, f16 and bf16, at a small batch and one whose 16-bit conversions (of
 * the f32 input, in the convolutions) go in several row chunks. */
static void test_plan(void) {
  host = ganfw_host_table();
  const int32_t dtypes[3] = {GANFW_DTYPE_F32, GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  const int64_t batches[2] = {8, 200};
  for (int b = 0; b < 2; b++) {
    for (int k = 0; k < 3; k++) {
      ganfw_alloc_stats plan, real;
      plan_step(1, dtypes[k], batches[b], &plan);
      plan_step(0, dtypes[k], batches[b], &real);
      printf("\n  %-4s batch %3lld: plan %9lld B allocated, %9lld B reserved; measured %9lld, "
             "%9lld",
             ganfw_dtype_name(dtypes[k]), (long long)batches[b], (long long)plan.allocated.peak,
             (long long)plan.reserved.peak, (long long)real.allocated.peak,
             (long long)real.reserved.peak);
      CU_ASSERT(plan.allocated.peak > 0);
      CU_ASSERT_EQUAL(plan.allocated.peak, real.allocated.peak);
      CU_ASSERT_EQUAL(plan.reserved.peak, real.reserved.peak);
      CU_ASSERT_EQUAL(plan.num_allocs, real.num_allocs);
      for (int32_t cat = 0; cat < GANFW_MEM_COUNT; cat++)
        CU_ASSERT_EQUAL(plan.category[cat].peak, real.category[cat].peak);
    }
  }
}

static CU_TestInfo tests[] = {
    {"f32 forward and backward bit for bit PyTorch's", test_f32},
    {"f16 and bf16 natively, bit for bit PyTorch's and f32's rounded", test_16bit},
    {"bad arguments and shapes name the layer", test_errors},
    {"plan equals a real step's bytes", test_plan},
    CU_TEST_INFO_NULL,
};

GT_MAIN("ref_pixel_shuffle", tests)
