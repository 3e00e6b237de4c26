/* Gradient checkpointing in the executor (ganfw_net_checkpoint): for several segment
 * layouts of a net with conv, BatchNorm, in-place activations, dropout, pooling, flatten
 * and linear layers, outputs, input and parameter gradients, BatchNorm running statistics
 * and the RNG position are bitwise those of the run without checkpointing (dropout replays
 * its random numbers); the tape keeps fewer bytes; argument errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "nn/net.h"
#include "runtime/tensor.h"
#include "testutil.h"

#define NLAYERS 12
#define BATCH   6

static ganfw_ctx *make_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 7};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  return ctx;
}

static int64_t allocated(ganfw_ctx *ctx, int32_t category) {
  ganfw_alloc_stats s;
  ganfw_alloc_get_stats(ctx->alloc, &s);
  return category < 0 ? s.allocated.current : s.category[category].current;
}

/* 0 conv, 1 bn, 2 relu, 3 dropout, 4 conv, 5 bn, 6 leaky relu, 7 max pool, 8 flatten,
 * 9 linear, 10 dropout, 11 tanh: [N,2,8,8] -> [N,5]. */
static ganfw_net *deep_net(ganfw_ctx *ctx) {
  ganfw_net *net = ganfw_net_create(ctx, "net");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c0", 2, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(net, "b0", 4, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "r0", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_dropout(net, "d0", 0.5f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c1", 4, 6, 3, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(net, "b1", 6, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "l1", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_pool2d(net, "p", GANFW_POOL_MAX, 2, 2, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(net, "f"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc", 24, 5, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_dropout(net, "d1", 0.3f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "t", GANFW_ACT_TANH, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 2, 8, 8), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_layer_count(net), NLAYERS);
  return net;
}

/* Everything a run produces, on the host. */
typedef struct outcome {
  float y[3][BATCH * 5]; /* outputs of the three rounds */
  float dx[3][BATCH * 2 * 64];
  float grads[4096], params[4096], buffers[64];
  int64_t counters[4];
  int64_t n_grads, n_buffers, n_counters;
  uint64_t rng_offset;
  int64_t held_after_forward; /* activation bytes after the first forward */
  int32_t x_unchanged;
} outcome;

static ganfw_tensor *input(ganfw_ctx *ctx, uint64_t seed) {
  int64_t shape[4] = {BATCH, 2, 8, 8};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "x");
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  gt_fill_uniform(x->data, x->numel, -1, 1, seed);
  return x;
}

static void collect(ganfw_net *net, outcome *o) {
  o->n_grads = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &p), GANFW_OK);
    CU_ASSERT_FATAL(o->n_grads + p.grad->numel <= 4096);
    memcpy(o->grads + o->n_grads, p.grad->data, (size_t)p.grad->nbytes);
    memcpy(o->params + o->n_grads, p.value->data, (size_t)p.value->nbytes);
    o->n_grads += p.grad->numel;
  }
  ganfw_net_buffer b;
  o->n_buffers = o->n_counters = 0;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++) {
    if (b.counter) {
      o->counters[o->n_counters++] = *b.counter;
      continue;
    }
    memcpy(o->buffers + o->n_buffers, b.tensor->data, (size_t)b.tensor->nbytes);
    o->n_buffers += b.tensor->numel;
  }
}

/* Three rounds of forward (tape) and backward on one fresh net with `starts` (n of them;
 * n < 0: no checkpointing): round 0 writes the gradients, round 1 adds to them, round 2
 * asks for the input gradient only. Each round draws new dropout masks. */
static void run_layout(const int32_t *starts, int32_t n, outcome *o) {
  memset(o, 0, sizeof *o);
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = deep_net(ctx);
  if (n >= 0) CU_ASSERT_EQUAL_FATAL(ganfw_net_checkpoint(net, starts, n), GANFW_OK);
  ganfw_tensor *x = input(ctx, 11);
  float *x0 = malloc((size_t)x->nbytes);
  memcpy(x0, x->data, (size_t)x->nbytes);
  ganfw_tape *tape = ganfw_tape_create(net);
  int64_t dshape[2] = {BATCH, 5};
  ganfw_tensor *dy = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 2, dshape, GANFW_MEM_OTHER, "dy");
  gt_fill_uniform(dy->data, dy->numel, -1, 1, 12);
  ganfw_net_zero_grad(net);
  for (int round = 0; round < 3; round++) {
    ganfw_tensor *y = NULL, *dx = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
    if (round == 0) o->held_after_forward = allocated(ctx, GANFW_MEM_ACTIVATION);
    CU_ASSERT_EQUAL_FATAL(y->numel, BATCH * 5);
    memcpy(o->y[round], y->data, sizeof o->y[round]);
    int32_t flags = GANFW_BWD_INPUT_GRAD | (round < 2 ? GANFW_BWD_PARAM_GRAD : 0);
    if (round == 2) collect(net, o);
    ganfw_status st = ganfw_net_backward(net, tape, dy, flags, &dx);
    if (st != GANFW_OK) printf("\n  backward: %s\n", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dx);
    memcpy(o->dx[round], dx->data, sizeof o->dx[round]);
    ganfw_tensor_destroy(dx);
    ganfw_tensor_destroy(y);
    if (round == 2) { /* no parameter gradients: the grads of round 1 stay */
      outcome after;
      collect(net, &after);
      CU_ASSERT_EQUAL(memcmp(after.grads, o->grads, (size_t)o->n_grads * sizeof(float)), 0);
    }
  }
  o->rng_offset = ctx->rng_offset;
  o->x_unchanged = memcmp(x0, x->data, (size_t)x->nbytes) == 0;
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_WORKSPACE), 0);
  free(x0);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(x);
  ganfw_tape_destroy(tape);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(allocated(ctx, -1), 0);
  ganfw_ctx_destroy(ctx);
}

static int same(const void *a, const void *b, size_t n) {
  return memcmp(a, b, n) == 0;
}

/* Every layout gives the plain run's numbers bit for bit: segments starting at a conv, at
 * BatchNorm, at an in-place activation (its input is the kept segment input, which must
 * not be overwritten), at dropout (replayed masks), at flatten, and one segment per layer. */
static void test_layouts_bitwise(void) {
  static outcome ref, got;
  run_layout(NULL, -1, &ref);
  CU_ASSERT(ref.x_unchanged);
  /* dropout is active: each round draws other masks */
  CU_ASSERT(!same(ref.y[0], ref.y[1], sizeof ref.y[0]));
  CU_ASSERT(!same(ref.dx[0], ref.dx[1], sizeof ref.dx[0]));
  CU_ASSERT(ref.n_counters == 2 && ref.counters[0] == 3 && ref.counters[1] == 3);
  const struct {
    int32_t n;
    int32_t starts[NLAYERS];
  } layouts[] = {
      {0, {0}},
      {1, {1}},
      {1, {2}},
      {1, {3}},
      {1, {4}},
      {1, {8}},
      {1, {11}},
      {2, {2, 7}},
      {2, {5, 10}},
      {3, {3, 6, 9}},
      {11, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
  };
  for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
    run_layout(layouts[k].starts, layouts[k].n, &got);
    int ok = same(got.y, ref.y, sizeof ref.y) && same(got.dx, ref.dx, sizeof ref.dx) &&
             got.n_grads == ref.n_grads &&
             same(got.grads, ref.grads, (size_t)ref.n_grads * sizeof(float)) &&
             same(got.params, ref.params, (size_t)ref.n_grads * sizeof(float)) &&
             got.n_buffers == ref.n_buffers &&
             same(got.buffers, ref.buffers, (size_t)ref.n_buffers * sizeof(float)) &&
             same(got.counters, ref.counters, sizeof ref.counters) &&
             got.rng_offset == ref.rng_offset && got.x_unchanged;
    if (!ok)
      printf("\n  layout %zu (%d starts, first %d) differs from the plain run\n", k,
             (int)layouts[k].n, (int)layouts[k].starts[0]);
    CU_ASSERT(ok);
    /* The tape keeps segment inputs only: less than the full record, except with one
     * segment per layer, where it keeps every layer's input. */
    if (layouts[k].n > 0 && layouts[k].n < 11)
      CU_ASSERT(got.held_after_forward < ref.held_after_forward);
  }
}

static void forward_backward(ganfw_net *net, ganfw_tensor *x, ganfw_tape *tape, ganfw_tensor *dy,
                             float *dx_out) {
  ganfw_tensor *y = NULL, *dx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
  ganfw_tensor_destroy(y);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD, &dx), GANFW_OK);
  memcpy(dx_out, dx->data, (size_t)dx->nbytes);
  ganfw_tensor_destroy(dx);
}

/* Two checkpointed tapes live at once (D on real and on fake), consumed in either order;
 * a tape keeps the layout of its forward when the net's changes before backward; a
 * cleared tape releases its segment inputs. */
static void test_tapes(void) {
  static float want_a[BATCH * 128], want_b[BATCH * 128], got_a[BATCH * 128], got_b[BATCH * 128];
  int64_t dshape[2] = {BATCH, 5};
  for (int ckpt = 0; ckpt < 2; ckpt++) {
    ganfw_ctx *ctx = make_ctx();
    ganfw_net *net = deep_net(ctx);
    ganfw_net_set_train(net, 1, 0);
    const int32_t starts[] = {4, 9};
    if (ckpt) CU_ASSERT_EQUAL(ganfw_net_checkpoint(net, starts, 2), GANFW_OK);
    ganfw_tensor *xa = input(ctx, 21), *xb = input(ctx, 22);
    ganfw_tensor *dy = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 2, dshape, GANFW_MEM_OTHER, "dy");
    gt_fill_uniform(dy->data, dy->numel, -1, 1, 23);
    ganfw_tape *a = ganfw_tape_create(net), *b = ganfw_tape_create(net);
    ganfw_tensor *ya = NULL, *yb = NULL, *dxa = NULL, *dxb = NULL;
    const uint64_t rng0 = ctx->rng_offset;
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, xa, a, &ya), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, xb, b, &yb), GANFW_OK);
    if (ckpt) CU_ASSERT_EQUAL(ganfw_net_checkpoint(net, NULL, 0), GANFW_OK); /* tapes keep theirs */
    CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(net, b, dy, GANFW_BWD_INPUT_GRAD, &dxb), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(net, a, dy, GANFW_BWD_INPUT_GRAD, &dxa), GANFW_OK);
    memcpy(ckpt ? got_a : want_a, dxa->data, (size_t)dxa->nbytes);
    memcpy(ckpt ? got_b : want_b, dxb->data, (size_t)dxb->nbytes);
    ganfw_tensor_destroy(ya);
    ganfw_tensor_destroy(yb);
    ganfw_tensor_destroy(dxa);
    ganfw_tensor_destroy(dxb);
    CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
    if (ckpt) {
      /* a forward whose backward never runs: clearing the tape frees the segment inputs */
      CU_ASSERT_EQUAL(ganfw_net_checkpoint(net, starts, 2), GANFW_OK);
      CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, xa, a, &ya), GANFW_OK);
      CU_ASSERT(allocated(ctx, GANFW_MEM_ACTIVATION) > 0);
      ganfw_tape_clear(a);
      ganfw_tensor_destroy(ya);
      CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
      /* the cleared tape records again; from the same RNG position, the same masks */
      ctx->rng_offset = rng0;
      forward_backward(net, xa, a, dy, got_a);
      CU_ASSERT(same(got_a, want_a, sizeof got_a));
    }
    ganfw_tape_destroy(a);
    ganfw_tape_destroy(b);
    ganfw_tensor_destroy(dy);
    ganfw_tensor_destroy(xa);
    ganfw_tensor_destroy(xb);
    ganfw_net_destroy(net);
    CU_ASSERT_EQUAL(allocated(ctx, -1), 0);
    ganfw_ctx_destroy(ctx);
  }
  /* Dropout masks differ between the two tapes' forwards, and each replays its own. */
  CU_ASSERT(same(got_a, want_a, sizeof got_a));
  CU_ASSERT(same(got_b, want_b, sizeof got_b));
}

static void expect_invalid(ganfw_net *net, const int32_t *starts, int32_t n, const char *want) {
  ganfw_error_clear();
  CU_ASSERT_EQUAL(ganfw_net_checkpoint(net, starts, n), GANFW_ERR_INVALID_ARG);
  const char *msg = ganfw_error_message();
  if (!strstr(msg, want)) printf("\n  expected '%s' in: %s\n", want, msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, want));
}

/* Bad layouts are refused with a message naming the net; a refused layout leaves the
 * previous one in place; n = 0 turns checkpointing off. The host table points here. */
static void test_errors(void) {
  const ganfw_host *h = ganfw_host_table();
  CU_ASSERT(GANFW_HOST_HAS(h, net_checkpoint));
  CU_ASSERT_PTR_EQUAL(h->net_checkpoint, ganfw_net_checkpoint);
  CU_ASSERT_PTR_EQUAL(h->net_layer_count, ganfw_net_layer_count);

  ganfw_ctx *ctx = make_ctx();
  ganfw_net *unbuilt = ganfw_net_create(ctx, "raw");
  CU_ASSERT_EQUAL(ganfw_net_linear(unbuilt, "a", 2, 2, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(unbuilt, "b", 2, 2, 1), GANFW_OK);
  const int32_t one[] = {1};
  expect_invalid(unbuilt, one, 1, "before net_build");
  ganfw_net_destroy(unbuilt);

  ganfw_net *net = deep_net(ctx);
  const int32_t good[] = {3, 8};
  CU_ASSERT_EQUAL(ganfw_net_checkpoint(net, good, 2), GANFW_OK);
  const int32_t zero[] = {0}, last[] = {NLAYERS}, dup[] = {5, 5}, down[] = {6, 3},
                all[NLAYERS] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  expect_invalid(net, zero, 1, "net net: checkpoint segment start 0");
  expect_invalid(net, last, 1, "within 1..11");
  expect_invalid(net, dup, 2, "(entry 1)");
  expect_invalid(net, down, 2, "out of order");
  expect_invalid(net, all, NLAYERS, "give 0 to 11 starts");
  expect_invalid(net, NULL, 1, "starts");
  expect_invalid(net, good, -1, "starts");
  int32_t layout[4] = {0};
  CU_ASSERT_EQUAL(ganfw_net_checkpoint_layout(net, layout, 4), 2);
  CU_ASSERT(layout[0] == 3 && layout[1] == 8);
  CU_ASSERT_EQUAL(ganfw_net_checkpoint(net, NULL, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_checkpoint_layout(net, NULL, 0), 0);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

static CU_TestInfo tests[] = {
    {"layouts give the plain run's results bitwise", test_layouts_bitwise},
    {"several tapes, layout changes, cleared tapes", test_tapes},
    {"bad layouts are refused", test_errors},
    CU_TEST_INFO_NULL,
};

GT_MAIN("net checkpoint", tests)
