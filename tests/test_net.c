/* The executor: gradients of whole nets against finite differences, tapes (several live,
 * consumed by backward), no-grad keeping nothing, in-place activations, parameter
 * gradient accumulation and the backward flags. */
#include <math.h>
#include <string.h>

#include "runtime/ctx.h"
#include "base/error.h"
#include "nn/net.h"
#include "runtime/tensor.h"
#include "testutil.h"

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

/* conv -> bn -> sigmoid -> avg pool -> flatten -> linear -> tanh. The activations are
 * smooth here: finite differences across the kink of a ReLU measure the step, not the
 * gradient (the ReLU kernels have their own checks in test_ops_nn). */
static ganfw_net *small_net(ganfw_ctx *ctx) {
  ganfw_net *net = ganfw_net_create(ctx, "net");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c", 2, 3, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(net, "bn", 3, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "act", GANFW_ACT_SIGMOID, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_pool2d(net, "pool", GANFW_POOL_AVG, 2, 2, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc", 12, 5, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "out", GANFW_ACT_TANH, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 2, 4, 4), GANFW_OK);
  return net;
}

/* convT -> tanh -> conv -> sigmoid */
static ganfw_net *up_net(ganfw_ctx *ctx) {
  ganfw_net *net = ganfw_net_create(ctx, "up");
  CU_ASSERT_EQUAL(ganfw_net_conv_transpose2d(net, "t", 3, 2, 4, 2, 1, 0, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "r", GANFW_ACT_TANH, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c", 2, 1, 3, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "s", GANFW_ACT_SIGMOID, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 3, 3, 3), GANFW_OK);
  return net;
}

/* conv -> sigmoid -> flatten -> tanh: the tanh's input is a view of the sigmoid's saved
 * output, so it must not run in place. */
static ganfw_net *view_net(ganfw_ctx *ctx) {
  ganfw_net *net = ganfw_net_create(ctx, "view");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c", 2, 2, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "s", GANFW_ACT_SIGMOID, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(net, "f"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "t", GANFW_ACT_TANH, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 2, 3, 3), GANFW_OK);
  return net;
}

typedef struct fd_ctx {
  ganfw_net *net;
  ganfw_tensor *x;
  float *y; /* host copy of the output */
  int64_t ny;
} fd_ctx;

static void run_forward(void *p) {
  fd_ctx *c = p;
  ganfw_tensor *y = NULL;
  CU_ASSERT_EQUAL(ganfw_net_forward(c->net, c->x, NULL, &y), GANFW_OK);
  if (y) memcpy(c->y, y->data, (size_t)c->ny * sizeof(float));
  ganfw_tensor_destroy(y);
}

/* Checks d(sum y*dy)/dx and /dparams of `net` at a random point by central differences.
 * BatchNorm running statistics are frozen (update_stats 0) so that repeated forwards see
 * the same function. */
static void check_net_gradients(ganfw_ctx *ctx, ganfw_net *net, int64_t n, int64_t c, int64_t h,
                                int64_t w) {
  ganfw_net_set_train(net, 1, 0);
  int64_t shape[4] = {n, c, h, w};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "x");
  gt_fill_uniform(x->data, x->numel, -1, 1, 3);
  int64_t out[4];
  int32_t ndim;
  ganfw_net_output_shape(net, n, out, &ndim);
  int64_t ny = 1;
  for (int32_t d = 0; d < ndim; d++) ny *= out[d];
  ganfw_tensor *dy = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, ndim, out, GANFW_MEM_OTHER, "dy");
  CU_ASSERT_EQUAL_FATAL(dy->numel, ny);
  gt_fill_uniform(dy->data, ny, -1, 1, 4);

  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *y = NULL, *dx = NULL;
  ganfw_net_zero_grad(net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx),
      GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(dx);

  float *ybuf = gt_alloc((size_t)ny * sizeof(float));
  fd_ctx fc = {net, x, ybuf, ny};
  double err = gt_gradcheck(run_forward, &fc, x->data, x->numel, ybuf, dy->data, ny, dx->data, 1e-2,
                            40, 1e-2);
  CU_ASSERT(err < 2e-2);
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &info), GANFW_OK);
    double perr = gt_gradcheck(run_forward, &fc, info.value->data, info.value->numel, ybuf,
                               dy->data, ny, info.grad->data, 1e-2, 20, 1e-2);
    if (perr >= 2e-2) printf("\n  %s: gradient error %.3g\n", info.name, perr);
    CU_ASSERT(perr < 2e-2);
  }
  gt_free(ybuf);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(dx);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(x);
  ganfw_tape_destroy(tape);
}

static void test_gradients_small_net(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = small_net(ctx);
  check_net_gradients(ctx, net, 3, 2, 4, 4);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(allocated(ctx, -1), 0);
  ganfw_ctx_destroy(ctx);
}

static void test_gradients_up_net(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = up_net(ctx);
  check_net_gradients(ctx, net, 2, 3, 3, 3);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(allocated(ctx, -1), 0);
  ganfw_ctx_destroy(ctx);
}

static void test_gradients_through_views(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = view_net(ctx);
  check_net_gradients(ctx, net, 2, 2, 3, 3);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(allocated(ctx, -1), 0);
  ganfw_ctx_destroy(ctx);
}

/* No-grad keeps nothing: after forward only params, grads, the input and the output are
 * allocated; with a tape the saved activations stay until backward frees them. */
static void test_nograd_and_tape_memory(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = small_net(ctx);
  int64_t shape[4] = {8, 2, 4, 4};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "x");
  gt_fill_uniform(x->data, x->numel, -1, 1, 5);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
  ganfw_tensor *y = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y), GANFW_OK);
  /* the output [8,5] rounds to one 512-byte block */
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 512);
  ganfw_tensor_destroy(y);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);

  ganfw_tape *a = ganfw_tape_create(net), *b = ganfw_tape_create(net);
  ganfw_tensor *ya = NULL, *yb = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, a, &ya), GANFW_OK);
  int64_t one_tape = allocated(ctx, GANFW_MEM_ACTIVATION);
  CU_ASSERT(one_tape > 512);
  /* a second tape of the same net while the first is live */
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, b, &yb), GANFW_OK);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 2 * one_tape);
  /* a tape holding a forward cannot record another */
  ganfw_tensor *yc = NULL;
  CU_ASSERT_EQUAL(ganfw_net_forward(net, x, a, &yc), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NULL(yc);
  ganfw_tensor *dy = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 2, ya->shape, GANFW_MEM_OTHER, "dy");
  gt_fill_uniform(dy->data, dy->numel, -1, 1, 6);
  CU_ASSERT_EQUAL(ganfw_net_backward(net, a, dy, GANFW_BWD_PARAM_GRAD, NULL), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_backward(net, b, dy, GANFW_BWD_PARAM_GRAD, NULL), GANFW_OK);
  /* a consumed tape cannot be replayed */
  CU_ASSERT_EQUAL(ganfw_net_backward(net, a, dy, GANFW_BWD_PARAM_GRAD, NULL),
                  GANFW_ERR_INVALID_ARG);
  ganfw_tensor_destroy(ya);
  ganfw_tensor_destroy(yb);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
  CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_WORKSPACE), 0);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(x);
  ganfw_tape_destroy(a);
  ganfw_tape_destroy(b);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(allocated(ctx, -1), 0);
  ganfw_ctx_destroy(ctx);
}

/* Two backward passes without zero_grad add up; zero_grad makes the next one write. The
 * flags skip parameter gradients (the G step through D) and the input gradient. */
static void test_accumulation_and_flags(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = up_net(ctx);
  int64_t shape[4] = {2, 3, 3, 3};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "x");
  gt_fill_uniform(x->data, x->numel, -1, 1, 8);
  ganfw_param_info w = {.struct_size = sizeof w};
  CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, 0, &w), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(w.name, "t.weight");
  CU_ASSERT_STRING_EQUAL(w.layer_type, "conv_transpose2d");
  float *once = gt_alloc((size_t)w.grad->nbytes);
  ganfw_tape *tape = ganfw_tape_create(net);
  for (int round = 0; round < 3; round++) {
    ganfw_tensor *y = NULL, *dx = NULL;
    if (round != 1) ganfw_net_zero_grad(net); /* round 1 adds to round 0's gradients */
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
    ganfw_tensor *dy =
        ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, y->shape, GANFW_MEM_OTHER, "dy");
    gt_fill_uniform(dy->data, dy->numel, 0.5f, 1, 9);
    if (round == 2) {
      /* no parameter gradients: grads stay as they are */
      float *before = gt_alloc((size_t)w.grad->nbytes);
      memcpy(before, w.grad->data, (size_t)w.grad->nbytes);
      CU_ASSERT_EQUAL(ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD, &dx), GANFW_OK);
      CU_ASSERT_PTR_NOT_NULL(dx);
      CU_ASSERT_EQUAL(memcmp(before, w.grad->data, (size_t)w.grad->nbytes), 0);
      gt_free(before);
    } else {
      CU_ASSERT_EQUAL(ganfw_net_backward(net, tape, dy, GANFW_BWD_PARAM_GRAD, &dx), GANFW_OK);
      CU_ASSERT_PTR_NULL(dx);
    }
    if (round == 0) memcpy(once, w.grad->data, (size_t)w.grad->nbytes);
    if (round == 1) {
      float *twice = gt_alloc((size_t)w.grad->nbytes);
      for (int64_t i = 0; i < w.grad->numel; i++) twice[i] = 2 * once[i];
      gt_check_close("accumulated grad", w.grad->data, twice, w.grad->numel, 1e-6, 1e-6);
      gt_free(twice);
    }
    ganfw_tensor_destroy(dx);
    ganfw_tensor_destroy(dy);
    ganfw_tensor_destroy(y);
  }
  gt_free(once);
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* Shape errors name the layer; a net cannot grow after build. */
static void test_build_errors(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = ganfw_net_create(ctx, "D");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "main.0", 1, 8, 4, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "main.1", 4, 8, 4, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_build(net, 1, 32, 32), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "D.main.1"));
  ganfw_net_destroy(net);
  net = ganfw_net_create(ctx, "E");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c", 1, 8, 5, 1, 0, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_build(net, 1, 3, 3), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "too small"));
  ganfw_net_destroy(net);
  net = ganfw_net_create(ctx, "F");
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc", 4, 2, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc", 2, 2, 1), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_net_build(net, 4, 1, 1), GANFW_ERR_INVALID_ARG); /* 4-D into linear */
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "flatten"));
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(allocated(ctx, -1), 0);
  ganfw_ctx_destroy(ctx);
}

static CU_TestInfo tests[] = {
    {"gradients through conv, bn, sigmoid, avg pool, linear, tanh", test_gradients_small_net},
    {"gradients through convT, tanh, conv, sigmoid", test_gradients_up_net},
    {"in-place activations never overwrite a view's saved base", test_gradients_through_views},
    {"no-grad keeps nothing, tapes keep until backward", test_nograd_and_tape_memory},
    {"gradient accumulation and backward flags", test_accumulation_and_flags},
    {"build errors name the layer", test_build_errors},
    CU_TEST_INFO_NULL,
};

GT_MAIN("net", tests)
