/* The layers' native 16-bit path (the ops a backend supports in f16 or bf16, op.h), on the
 * CPU: a test backend is the CPU's table with its own supports, workspace and run, which take
 * the conv, linear, BatchNorm and activation ops in 16 bits by converting whole tensors on the
 * host around the f32 kernels, counting every call. With it the layers must run those ops in
 * 16 bits for the groups the backend supports and take the converting path (layer_dtype.c) for
 * the rest, give what the CPU backend's converting path gives, never count a call in f32, and
 * `ganfw plan` (the meta backend with this backend as its shadow) must still predict the
 * measured step exactly, as it must on the CPU's own native kernels (the CPU reference runs
 * with them off: ganfw_cpu_lp_set).
 * Also the loss scaler's non-finite check through a backend's nonfinite_many op, and the
 * trainers' page-locked staging buffers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/ops.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "ganfw/host.h"
#include "nn/net.h"
#include "plan/probe.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "testutil.h"

/* --- the test backend ----------------------------------------------------------------- */

enum {
  C_CONV_FWD,
  C_CONV_BWD,
  C_CONVT_FWD,
  C_CONVT_BWD,
  C_LIN_FWD,
  C_LIN_BWD,
  C_BN_TRAIN,
  C_BN_EVAL,
  C_BN_BWD,
  C_ACT_FWD,
  C_ACT_BWD,
  C_COUNT
};
static int64_t calls[C_COUNT];
static uint32_t groups_f16 = GANFW_LP_CONV | GANFW_LP_LINEAR | GANFW_LP_BATCHNORM | GANFW_LP_ACT;
static uint32_t groups_bf16 = GANFW_LP_CONV | GANFW_LP_LINEAR | GANFW_LP_BATCHNORM | GANFW_LP_ACT;
static ganfw_backend_vt lp_vt;
static ganfw_backend lp_be = {.vt = &lp_vt};

static ganfw_backend *cpu(void) {
  return ganfw_cpu_backend();
}

static float *to_f32(int32_t dtype, int64_t n, const void *h) {
  if (!h) return NULL;
  float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
  CU_ASSERT_EQUAL_FATAL(ganfw_cast(cpu(), n, dtype, h, GANFW_DTYPE_F32, f), GANFW_OK);
  return f;
}

static float *scratch(int64_t n, const void *wanted) {
  return wanted ? malloc((size_t)(n > 0 ? n : 1) * sizeof(float)) : NULL;
}

/* Rounds f into h (when both are there) and frees f. */
static void store(int32_t dtype, int64_t n, float *f, void *h) {
  if (f && h) ganfw_cast(cpu(), n, GANFW_DTYPE_F32, f, dtype, h);
  free(f);
}

/* 1 when op is one of this backend's native 16-bit ops (a group the test switched on). */
static int32_t lp_native(const ganfw_op *op) {
  const uint32_t groups = op->dtype == GANFW_DTYPE_F16    ? groups_f16
                          : op->dtype == GANFW_DTYPE_BF16 ? groups_bf16
                                                          : 0;
  return (ganfw_op_lp_group(op->kind) & groups) != 0;
}

/* Every op in f32 and every other op as the CPU has them; the grouped ops in 16 bits only
 * where the test switched their group on (whatever the CPU's own native kernels are). */
static int32_t lp_supports(ganfw_backend *be, const ganfw_op *op) {
  (void)be;
  if (op->dtype != GANFW_DTYPE_F32 && ganfw_op_lp_group(op->kind)) return lp_native(op);
  return cpu()->vt->supports(cpu(), op);
}

/* The grouped ops in 16 bits: the CPU's f32 workspace, plus room for a 16-bit weight gradient
 * in a convolution, as the CUDA backend asks; every other op: the CPU's. */
static size_t lp_workspace(ganfw_backend *be, const ganfw_op *op) {
  (void)be;
  if (op->dtype == GANFW_DTYPE_F32 || !ganfw_op_lp_group(op->kind))
    return cpu()->vt->workspace(cpu(), op);
  ganfw_op f32 = *op;
  f32.dtype = GANFW_DTYPE_F32;
  size_t bytes = cpu()->vt->workspace(cpu(), &f32);
  if (lp_native(op) && ganfw_op_lp_group(op->kind) == GANFW_LP_CONV) {
    const ganfw_conv2d_shape *s = &op->shape.conv;
    const ganfw_convt2d_shape *t = &op->shape.convt;
    const int transposed =
        op->kind == GANFW_OP_CONVT2D_FORWARD || op->kind == GANFW_OP_CONVT2D_BACKWARD;
    bytes += (size_t)(transposed ? t->K * t->C * t->R * t->S : s->K * s->C * s->R * s->S) * 2;
  }
  return bytes;
}

static ganfw_status conv_fwd_lp(int32_t dt, const ganfw_conv2d_shape *s, const void *x,
                                const void *w, const float *b, void *y, void *ws) {
  calls[C_CONV_FWD]++;
  float *xf = to_f32(dt, s->N * s->C * s->H * s->W, x),
        *wf = to_f32(dt, s->K * s->C * s->R * s->S, w);
  float *yf = scratch(s->N * s->K * s->P * s->Q, y);
  const ganfw_status st = ganfw_be_conv2d_forward(cpu(), s, xf, wf, b, yf, ws);
  store(dt, s->N * s->K * s->P * s->Q, yf, y);
  free(xf), free(wf);
  return st;
}

static ganfw_status conv_bwd_lp(int32_t dt, const ganfw_conv2d_shape *s, const void *x,
                                const void *w, const void *dy, void *dx, float *dw, float *db,
                                int accumulate, void *ws) {
  calls[C_CONV_BWD]++;
  CU_ASSERT(w || !dx); /* the weight copy is there whenever dx is wanted */
  const int64_t nx = s->N * s->C * s->H * s->W;
  float *xf = to_f32(dt, nx, x), *wf = to_f32(dt, s->K * s->C * s->R * s->S, w);
  float *dyf = to_f32(dt, s->N * s->K * s->P * s->Q, dy), *dxf = scratch(nx, dx);
  const ganfw_status st =
      ganfw_be_conv2d_backward(cpu(), s, xf, wf, dyf, dxf, dw, db, accumulate, ws);
  store(dt, nx, dxf, dx);
  free(xf), free(wf), free(dyf);
  return st;
}

static ganfw_status convt_fwd_lp(int32_t dt, const ganfw_convt2d_shape *s, const void *x,
                                 const void *w, const float *b, void *y, void *ws) {
  calls[C_CONVT_FWD]++;
  float *xf = to_f32(dt, s->N * s->C * s->H * s->W, x),
        *wf = to_f32(dt, s->K * s->C * s->R * s->S, w);
  float *yf = scratch(s->N * s->K * s->P * s->Q, y);
  const ganfw_status st = ganfw_be_convt2d_forward(cpu(), s, xf, wf, b, yf, ws);
  store(dt, s->N * s->K * s->P * s->Q, yf, y);
  free(xf), free(wf);
  return st;
}

static ganfw_status convt_bwd_lp(int32_t dt, const ganfw_convt2d_shape *s, const void *x,
                                 const void *w, const void *dy, void *dx, float *dw, float *db,
                                 int accumulate, void *ws) {
  calls[C_CONVT_BWD]++;
  CU_ASSERT(w || !dx);
  const int64_t nx = s->N * s->C * s->H * s->W;
  float *xf = to_f32(dt, nx, x), *wf = to_f32(dt, s->K * s->C * s->R * s->S, w);
  float *dyf = to_f32(dt, s->N * s->K * s->P * s->Q, dy), *dxf = scratch(nx, dx);
  const ganfw_status st =
      ganfw_be_convt2d_backward(cpu(), s, xf, wf, dyf, dxf, dw, db, accumulate, ws);
  store(dt, nx, dxf, dx);
  free(xf), free(wf), free(dyf);
  return st;
}

static ganfw_status lin_fwd_lp(int32_t dt, int64_t N, int64_t IN, int64_t OUT, const void *x,
                               const void *w, const float *b, void *y) {
  calls[C_LIN_FWD]++;
  float *xf = to_f32(dt, N * IN, x), *wf = to_f32(dt, OUT * IN, w), *yf = scratch(N * OUT, y);
  const ganfw_status st = ganfw_be_linear_forward(cpu(), N, IN, OUT, xf, wf, b, yf);
  store(dt, N * OUT, yf, y);
  free(xf), free(wf);
  return st;
}

static ganfw_status lin_bwd_lp(int32_t dt, int64_t N, int64_t IN, int64_t OUT, const void *x,
                               const void *w, const void *dy, void *dx, float *dw, float *db,
                               int accumulate) {
  calls[C_LIN_BWD]++;
  CU_ASSERT(w || !dx);
  float *xf = to_f32(dt, N * IN, x), *wf = to_f32(dt, OUT * IN, w);
  float *dyf = to_f32(dt, N * OUT, dy), *dxf = scratch(N * IN, dx);
  const ganfw_status st =
      ganfw_be_linear_backward(cpu(), N, IN, OUT, xf, wf, dyf, dxf, dw, db, accumulate);
  store(dt, N * IN, dxf, dx);
  free(xf), free(wf), free(dyf);
  return st;
}

static ganfw_status bn_train_lp(int32_t dt, int64_t N, int64_t C, int64_t HW, const void *x,
                                const float *gamma, const float *beta, void *y, float *rm,
                                float *rv, float momentum, float eps, float *sm, float *si) {
  calls[C_BN_TRAIN]++;
  float *xf = to_f32(dt, N * C * HW, x), *yf = scratch(N * C * HW, y);
  const ganfw_status st = ganfw_be_batchnorm2d_forward_train(cpu(), N, C, HW, xf, gamma, beta, yf,
                                                             rm, rv, momentum, eps, sm, si);
  store(dt, N * C * HW, yf, y);
  free(xf);
  return st;
}

static ganfw_status bn_eval_lp(int32_t dt, int64_t N, int64_t C, int64_t HW, const void *x,
                               const float *gamma, const float *beta, void *y, const float *rm,
                               const float *rv, float eps) {
  calls[C_BN_EVAL]++;
  float *xf = to_f32(dt, N * C * HW, x), *yf = scratch(N * C * HW, y);
  const ganfw_status st =
      ganfw_be_batchnorm2d_forward_eval(cpu(), N, C, HW, xf, gamma, beta, yf, rm, rv, eps);
  store(dt, N * C * HW, yf, y);
  free(xf);
  return st;
}

static ganfw_status bn_bwd_lp(int32_t dt, int64_t N, int64_t C, int64_t HW, const void *x,
                              const void *dy, const float *gamma, const float *sm, const float *si,
                              void *dx, float *dgamma, float *dbeta, int accumulate) {
  calls[C_BN_BWD]++;
  float *xf = to_f32(dt, N * C * HW, x), *dyf = to_f32(dt, N * C * HW, dy);
  float *dxf = scratch(N * C * HW, dx);
  const ganfw_status st = ganfw_be_batchnorm2d_backward(cpu(), N, C, HW, xf, dyf, gamma, sm, si,
                                                        dxf, dgamma, dbeta, accumulate);
  store(dt, N * C * HW, dxf, dx);
  free(xf), free(dyf);
  return st;
}

static ganfw_status act_fwd_lp(int32_t dt, int32_t kind, float alpha, int64_t n, const void *x,
                               void *y) {
  calls[C_ACT_FWD]++;
  float *xf = to_f32(dt, n, x), *yf = scratch(n, y);
  const ganfw_status st = ganfw_be_act_forward(cpu(), kind, alpha, n, xf, yf);
  store(dt, n, yf, y);
  free(xf);
  return st;
}

static ganfw_status act_bwd_lp(int32_t dt, int32_t kind, float alpha, int64_t n, const void *y,
                               const void *dy, void *dx) {
  calls[C_ACT_BWD]++;
  float *yf = to_f32(dt, n, y), *dyf = to_f32(dt, n, dy), *dxf = scratch(n, dx);
  const ganfw_status st = ganfw_be_act_backward(cpu(), kind, alpha, n, yf, dyf, dxf);
  store(dt, n, dxf, dx);
  free(yf), free(dyf);
  return st;
}

/* A native 16-bit op: its tensors converted on the host around the CPU's f32 op. */
static ganfw_status run_lp(ganfw_op *op) {
  const int32_t dt = op->dtype;
  const int acc = (op->flags & GANFW_OP_ACCUMULATE) != 0;
  const int64_t *d = op->shape.d;
  const void *const *in = op->in;
  void *const *out = op->out;
  switch (op->kind) {
  case GANFW_OP_CONV2D_FORWARD:
    return conv_fwd_lp(dt, &op->shape.conv, in[0], in[1], in[2], out[0], op->ws);
  case GANFW_OP_CONV2D_BACKWARD:
    return conv_bwd_lp(dt, &op->shape.conv, in[0], in[1], in[2], out[0], op->grad[0], op->grad[1],
                       acc, op->ws);
  case GANFW_OP_CONVT2D_FORWARD:
    return convt_fwd_lp(dt, &op->shape.convt, in[0], in[1], in[2], out[0], op->ws);
  case GANFW_OP_CONVT2D_BACKWARD:
    return convt_bwd_lp(dt, &op->shape.convt, in[0], in[1], in[2], out[0], op->grad[0], op->grad[1],
                        acc, op->ws);
  case GANFW_OP_LINEAR_FORWARD:
    return lin_fwd_lp(dt, d[0], d[1], d[2], in[0], in[1], in[2], out[0]);
  case GANFW_OP_LINEAR_BACKWARD:
    return lin_bwd_lp(dt, d[0], d[1], d[2], in[0], in[1], in[2], out[0], op->grad[0], op->grad[1],
                      acc);
  case GANFW_OP_BATCHNORM2D_TRAIN:
    return bn_train_lp(dt, d[0], d[1], d[2], in[0], in[1], in[2], out[0], out[1], out[2],
                       (float)op->sc[0], (float)op->sc[1], out[3], out[4]);
  case GANFW_OP_BATCHNORM2D_EVAL:
    return bn_eval_lp(dt, d[0], d[1], d[2], in[0], in[1], in[2], out[0], in[3], in[4],
                      (float)op->sc[0]);
  case GANFW_OP_BATCHNORM2D_BACKWARD:
    return bn_bwd_lp(dt, d[0], d[1], d[2], in[0], in[1], in[2], in[3], in[4], out[0], op->grad[0],
                     op->grad[1], acc);
  case GANFW_OP_ACT_FORWARD:
    return act_fwd_lp(dt, op->mode, (float)op->sc[0], d[0], in[0], out[0]);
  case GANFW_OP_ACT_BACKWARD:
    return act_bwd_lp(dt, op->mode, (float)op->sc[0], d[0], in[0], in[1], out[0]);
  default:
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "test backend: %s has no 16-bit form",
                           ganfw_op_name(op->kind));
  }
}

static int64_t nonfinite_many_calls;

/* The loss scaler's check over a list of buffers, counted, per buffer on the CPU. */
static ganfw_status nonfinite_many(ganfw_op *op) {
  const float *const *x = op->in[0];
  const int64_t *numel = op->in[1];
  nonfinite_many_calls++;
  int32_t any = 0;
  for (int64_t i = 0; i < op->shape.d[0]; i++) any |= ganfw_be_nonfinite(cpu(), numel[i], x[i]);
  op->result = any;
  return GANFW_OK;
}

/* Page-locked memory as malloc'd memory with counters; `pinned_fails` refuses it. */
static int64_t pinned_allocs, pinned_frees, async_copies;
static int pinned_fails;

static void *host_alloc_pinned(ganfw_backend *be, size_t bytes) {
  (void)be;
  if (pinned_fails) {
    ganfw_error_set(GANFW_ERR_OOM, "test: no page-locked memory");
    return NULL;
  }
  pinned_allocs++;
  return malloc(bytes);
}

static void host_free_pinned(ganfw_backend *be, void *p) {
  (void)be;
  pinned_frees++;
  free(p);
}

static ganfw_status copy_h2d_async(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  async_copies++;
  return cpu()->vt->copy_h2d(be, dst, src, bytes);
}

/* The grouped ops in 16 bits where their group is on, the list check, and the CPU's run for
 * every other op; a grouped op in 16 bits whose group is off is refused as a backend does. */
static ganfw_status lp_run(ganfw_backend *be, ganfw_op *op) {
  if (op->kind == GANFW_OP_NONFINITE_MANY) return nonfinite_many(op);
  if (op->dtype != GANFW_DTYPE_F32 && ganfw_op_lp_group(op->kind)) {
    if (!lp_supports(be, op))
      return ganfw_error_set(GANFW_ERR_UNSUPPORTED, "the %s backend cannot run %s in %s",
                             be->vt->name, ganfw_op_name(op->kind), ganfw_dtype_name(op->dtype));
    return run_lp(op);
  }
  return cpu()->vt->run(cpu(), op);
}

static int suite_init(void) {
  lp_vt = *ganfw_cpu_backend()->vt;
  lp_vt.name = "cpu+lp";
  lp_vt.host_alloc_pinned = host_alloc_pinned;
  lp_vt.host_free_pinned = host_free_pinned;
  lp_vt.copy_h2d_async = copy_h2d_async;
  lp_vt.supports = lp_supports;
  lp_vt.workspace = lp_workspace;
  lp_vt.run = lp_run;
  return 0;
}

static int suite_clean(void) {
  ganfw_ctx_override_backend(NULL);
  return 0;
}

/* --- nets ------------------------------------------------------------------------------ */

/* A context on the CPU backend (lp 0) or on the test backend (lp 1). */
static ganfw_ctx *make_ctx(int lp) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 11};
  ganfw_ctx *c = NULL;
  ganfw_ctx_override_backend(lp ? &lp_be : NULL);
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c), GANFW_OK);
  ganfw_ctx_override_backend(NULL);
  CU_ASSERT_PTR_EQUAL(c->be, lp ? &lp_be : ganfw_cpu_backend());
  return c;
}

/* Every layer kind, the native ones mixed with some that have no 16-bit op (dropout, pooling),
 * and a convolution with a bias: leaky relu (which rounds the f32 input: a conv on an f32
 * input takes the converting path) -> conv -> bn -> sigmoid -> dropout -> conv-transpose
 * (bias) -> leaky relu -> avg pool -> flatten -> linear -> tanh, on [8,3,16,16]. Smooth
 * activations where the paths' rounding could flip a kink (see test_amp.c); no bias before
 * a BatchNorm (its gradient is zero up to rounding). */
static ganfw_net *make_net(ganfw_ctx *c) {
  ganfw_net *net = ganfw_net_create(c, "mix");
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "in", GANFW_ACT_LEAKY_RELU, 0.5f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c", 3, 16, 4, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(net, "bn", 16, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "sig", GANFW_ACT_SIGMOID, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_dropout(net, "drop", 0.25f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv_transpose2d(net, "t", 16, 8, 4, 2, 1, 0, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "lrelu", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_pool2d(net, "pool", GANFW_POOL_AVG, 4, 4, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc", 8 * 4 * 4, 10, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "tanh", GANFW_ACT_TANH, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 3, 16, 16), GANFW_OK);
  return net;
}

static ganfw_tensor *input(ganfw_ctx *c, int32_t ndim, const int64_t *shape, uint64_t seed) {
  ganfw_tensor *t = ganfw_tensor_create(c, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_DATA, "in");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  gt_fill_uniform(t->data, t->numel, -1, 1, seed);
  return t;
}

typedef struct pass_result {
  double y, dx, dw, running; /* norm-relative differences: lp backend vs CPU */
  int64_t ws_peak[2];        /* workspace peak: CPU, lp backend */
} pass_result;

/* The net in `dtype` on the CPU backend and on the test backend, same weights, inputs and
 * dropout masks: a training forward and a backward, then an eval forward. */
static pass_result compare_paths(int32_t dtype) {
  pass_result r = {0};
  ganfw_ctx *ctx[2] = {make_ctx(0), make_ctx(1)};
  ganfw_net *net[2];
  ganfw_tensor *y[2], *dx[2], *ye[2];
  for (int k = 0; k < 2; k++) {
    const int was = ganfw_cpu_lp_set(k == 1); /* the CPU reference converts */
    net[k] = make_net(ctx[k]);
    if (dtype != GANFW_DTYPE_F32)
      CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net[k], dtype), GANFW_OK);
    const int64_t xs[4] = {8, 3, 16, 16}, ys[2] = {8, 10};
    ganfw_tensor *x = input(ctx[k], 4, xs, 1), *dy = input(ctx[k], 2, ys, 2);
    ganfw_tape *t = ganfw_tape_create(net[k]);
    ganfw_alloc_reset_peak(ctx[k]->alloc);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net[k], x, t, &y[k]), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(
        ganfw_net_backward(net[k], t, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx[k]),
        GANFW_OK);
    ganfw_alloc_stats s;
    ganfw_alloc_get_stats(ctx[k]->alloc, &s);
    r.ws_peak[k] = s.category[GANFW_MEM_WORKSPACE].peak;
    ganfw_net_set_train(net[k], 0, 0);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net[k], x, NULL, &ye[k]), GANFW_OK);
    CU_ASSERT_EQUAL(y[k]->dtype, dtype);
    CU_ASSERT_EQUAL(dx[k]->dtype, dtype);
    ganfw_tape_destroy(t);
    ganfw_tensor_destroy(x);
    ganfw_tensor_destroy(dy);
    ganfw_cpu_lp_set(was);
  }
  r.y = fmax(gt_tensor_norm_rel(y[1], y[0]), gt_tensor_norm_rel(ye[1], ye[0]));
  r.dx = gt_tensor_norm_rel(dx[1], dx[0]);
  for (int64_t i = 0; i < ganfw_net_param_count(net[0]); i++) {
    ganfw_param_info a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
    ganfw_net_param_info(net[0], i, &a);
    ganfw_net_param_info(net[1], i, &b);
    r.dw = fmax(r.dw, gt_tensor_norm_rel(b.grad, a.grad));
  }
  for (int64_t i = 0;; i++) { /* BatchNorm's running statistics */
    ganfw_net_buffer a, b;
    if (!ganfw_net_buffer_at(net[0], i, &a) || !ganfw_net_buffer_at(net[1], i, &b)) break;
    if (a.tensor && b.tensor) r.running = fmax(r.running, gt_tensor_norm_rel(b.tensor, a.tensor));
  }
  for (int k = 0; k < 2; k++) {
    ganfw_tensor_destroy(y[k]);
    ganfw_tensor_destroy(dx[k]);
    ganfw_tensor_destroy(ye[k]);
    ganfw_net_destroy(net[k]);
    ganfw_alloc_stats s; /* everything handed back */
    ganfw_alloc_get_stats(ctx[k]->alloc, &s);
    CU_ASSERT_EQUAL(s.category[GANFW_MEM_ACTIVATION].current, 0);
    CU_ASSERT_EQUAL(s.category[GANFW_MEM_WORKSPACE].current, 0);
    ganfw_ctx_destroy(ctx[k]);
  }
  return r;
}

static void print_result(const char *what, const pass_result *r) {
  printf("\n  %s: y %.2g, dx %.2g, param grads %.2g, running stats %.2g (norm-relative); "
         "workspace peak %lld B converting, %lld B native",
         what, r->y, r->dx, r->dw, r->running, (long long)r->ws_peak[0], (long long)r->ws_peak[1]);
}

/* f16 with every group native: each native op is run (forward, backward, eval) and the
 * results are the converting path's up to the order of f32 sums. */
static void test_f16_all_groups(void) {
  memset(calls, 0, sizeof calls);
  pass_result r = compare_paths(GANFW_DTYPE_F16);
  print_result("f16", &r);
  for (int i = 0; i < C_COUNT; i++) {
    if (calls[i] == 0) printf("\n  native op %d never called", i);
    CU_ASSERT(calls[i] > 0);
  }
  CU_ASSERT(r.y < 2e-3);
  CU_ASSERT(r.dx < 2e-3);
  CU_ASSERT(r.dw < 2e-3);
  CU_ASSERT(r.running < 2e-3); /* running means near 0: relative to small values */
}

/* bf16 where the backend has no native BatchNorm (as a cuDNN without bf16 BatchNorm): the
 * BatchNorm layers convert, the others are native, and the mix still agrees. */
static void test_bf16_without_batchnorm(void) {
  memset(calls, 0, sizeof calls);
  groups_bf16 = GANFW_LP_CONV | GANFW_LP_LINEAR | GANFW_LP_ACT;
  pass_result r = compare_paths(GANFW_DTYPE_BF16);
  groups_bf16 |= GANFW_LP_BATCHNORM;
  print_result("bf16 without native BatchNorm", &r);
  CU_ASSERT_EQUAL(calls[C_BN_TRAIN] + calls[C_BN_EVAL] + calls[C_BN_BWD], 0);
  CU_ASSERT(calls[C_CONV_FWD] > 0 && calls[C_CONVT_BWD] > 0 && calls[C_LIN_BWD] > 0);
  CU_ASSERT(calls[C_ACT_FWD] > 0 && calls[C_ACT_BWD] > 0);
  CU_ASSERT(r.y < 3e-2); /* bf16 keeps 8 bits: one flipped rounding moves more */
  CU_ASSERT(r.dx < 3e-2);
  CU_ASSERT(r.dw < 3e-2);
}

/* A conv whose input is f32 (as a net's first layer: the data batch) reads it unrounded on
 * the converting path; the BatchNorm behind it, fed 16 bits, is native again. */
static void test_f32_input_converts(void) {
  memset(calls, 0, sizeof calls);
  ganfw_ctx *c = make_ctx(1);
  ganfw_net *net = ganfw_net_create(c, "first");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c", 3, 8, 4, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(net, "bn", 8, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 3, 8, 8), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, GANFW_DTYPE_F16), GANFW_OK);
  const int64_t xs[4] = {4, 3, 8, 8};
  ganfw_tensor *x = input(c, 4, xs, 3), *y = NULL;
  ganfw_tape *t = ganfw_tape_create(net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, t, &y), GANFW_OK);
  CU_ASSERT_EQUAL(y->dtype, GANFW_DTYPE_F16);
  CU_ASSERT_EQUAL(calls[C_CONV_FWD], 0);
  CU_ASSERT(calls[C_BN_TRAIN] > 0);
  ganfw_tape_destroy(t);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* In f32 the native 16-bit ops are never run, and the two backends agree bit for bit. */
static void test_f32_never_native(void) {
  memset(calls, 0, sizeof calls);
  pass_result r = compare_paths(GANFW_DTYPE_F32);
  for (int i = 0; i < C_COUNT; i++) CU_ASSERT_EQUAL(calls[i], 0);
  CU_ASSERT_EQUAL(r.y, 0.0);
  CU_ASSERT_EQUAL(r.dx, 0.0);
  CU_ASSERT_EQUAL(r.dw, 0.0);
}

/* --- the plan on a backend with native 16-bit entries ----------------------------------- */

/* `ganfw plan` of a DC-GAN AMP step on the meta backend shadowing the test backend equals
 * the measured step on it (every category and phase), and differs from the converting
 * path's plan (so the meta backend did follow the shadow's supports and workspace). */
static void test_plan_follows_native_path(void) {
  char dir[] = "/tmp/ganfw_lp_XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/amp.yaml", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "seed: 2\n"
             "device: {type: cpu, threads: 2}\n"
             "model: {plugin: dcgan, image_size: 32, channels: 1, nz: 16, ngf: 16, ndf: 16}\n"
             "optim: {plugin: adam, lr: 2.0e-4}\n"
             "train: {batch_size: 32, max_steps: 1}\n"
             "memory: [{plugin: amp, dtype: f16}]\n");
  fclose(f);
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 32, .width = 32};
  ganfw_probe_result res[5];
  memset(res, 0, sizeof res);
  /* 0: plan on the test backend, 1: measured on it, 2: plan on the CPU's converting path,
   * 3: plan on the CPU's own native kernels, 4: measured on them */
  for (int k = 0; k < 5; k++) {
    ganfw_probe_options o = {.meta = k != 1 && k != 4, .warmup = 1, .steps = 1, .info = &info};
    memset(calls, 0, sizeof calls);
    ganfw_ctx_override_backend(k < 2 ? &lp_be : NULL);
    const int was = ganfw_cpu_lp_set(k != 2);
    ganfw_status st = ganfw_probe_run(gt_config(path, NULL, 0), &o, &res[k]);
    ganfw_cpu_lp_set(was);
    ganfw_ctx_override_backend(NULL);
    if (st != GANFW_OK) printf("\n  probe %d: %s", k, ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(res[k].oom, 0);
    CU_ASSERT_EQUAL(res[k].compute_dtype, GANFW_DTYPE_F16);
    if (k == 1) CU_ASSERT(calls[C_CONV_FWD] > 0 && calls[C_BN_BWD] > 0);
    if (k != 1) CU_ASSERT_EQUAL(calls[C_CONV_FWD], 0); /* a plan runs no kernel */
  }
  /* The CPU's native kernels: the plan is the measured step there too. */
  CU_ASSERT_EQUAL(res[3].peak_allocated, res[4].peak_allocated);
  CU_ASSERT_EQUAL(res[3].peak_reserved, res[4].peak_reserved);
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    CU_ASSERT_EQUAL(res[3].peak_category[c], res[4].peak_category[c]);
  CU_ASSERT(res[3].peak_category[GANFW_MEM_WORKSPACE] != res[2].peak_category[GANFW_MEM_WORKSPACE]);
  const double mib = 1024.0 * 1024.0;
  printf("\n  DC-GAN f16 step, peak allocated: plan %.3f MiB, measured %.3f MiB (native); "
         "CPU converting path %.3f MiB (plan); CPU native plan %.3f, measured %.3f MiB",
         res[0].peak_allocated / mib, res[1].peak_allocated / mib, res[2].peak_allocated / mib,
         res[3].peak_allocated / mib, res[4].peak_allocated / mib);
  CU_ASSERT_EQUAL(res[0].peak_allocated, res[1].peak_allocated);
  CU_ASSERT_EQUAL(res[0].peak_reserved, res[1].peak_reserved);
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    CU_ASSERT_EQUAL(res[0].peak_category[c], res[1].peak_category[c]);
  for (int p = 0; p < res[0].n_phases; p++)
    CU_ASSERT_EQUAL(res[0].phase[p].allocated, res[1].phase[p].allocated);
  CU_ASSERT(res[0].peak_category[GANFW_MEM_WORKSPACE] != res[2].peak_category[GANFW_MEM_WORKSPACE]);
  CU_ASSERT_EQUAL(res[0].peak_category[GANFW_MEM_ACTIVATION],
                  res[2].peak_category[GANFW_MEM_ACTIVATION]); /* the same 16-bit activations */
  for (int k = 0; k < 5; k++) ganfw_probe_result_free(&res[k]);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
}

/* --- the loss scaler's check on a backend that answers for a whole list ---------------- */

/* foreach_nonfinite hands the backend up to 64 buffers per call and stops at the first
 * batch with a NaN or inf. */
static void test_nonfinite_many(void) {
  ganfw_ctx *c = make_ctx(1);
  enum { N = 70 };
  ganfw_tensor *t[N];
  for (int i = 0; i < N; i++) {
    const int64_t n = 1 + i % 5;
    t[i] = ganfw_tensor_create(c, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_GRAD, "g");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t[i]);
    for (int64_t k = 0; k < n; k++) ((float *)t[i]->data)[k] = (float)(i + k);
  }
  const ganfw_host *h = ganfw_host_table();
  int32_t bad = -1;
  nonfinite_many_calls = 0;
  CU_ASSERT_EQUAL(h->foreach_nonfinite(c, t, N, &bad), GANFW_OK);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(nonfinite_many_calls, 2); /* 64 + 6 */
  ((float *)t[N - 1]->data)[0] = INFINITY;  /* in the second batch */
  CU_ASSERT_EQUAL(h->foreach_nonfinite(c, t, N, &bad), GANFW_OK);
  CU_ASSERT_EQUAL(bad, 1);
  ((float *)t[3]->data)[0] = NAN; /* in the first: the second is not asked */
  nonfinite_many_calls = 0;
  CU_ASSERT_EQUAL(h->foreach_nonfinite(c, t, N, &bad), GANFW_OK);
  CU_ASSERT_EQUAL(bad, 1);
  CU_ASSERT_EQUAL(nonfinite_many_calls, 1);
  CU_ASSERT_EQUAL(h->foreach_nonfinite(c, t, 0, &bad), GANFW_OK);
  CU_ASSERT_EQUAL(bad, 0);
  for (int i = 0; i < N; i++) ganfw_tensor_destroy(t[i]);
  ganfw_ctx_destroy(c);
}

/* --- staging buffers for uploads ------------------------------------------------------- */

/* Page-locked staging when the backend has it (uploads through copy_h2d_async), plain
 * memory and plain copies when it refuses, with no error left behind; the CPU has none. */
static void test_staging(void) {
  ganfw_ctx *c = make_ctx(1);
  const int64_t n = 300;
  ganfw_tensor *t = ganfw_tensor_create(c, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_DATA, "batch");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  for (int fail = 0; fail < 2; fail++) {
    pinned_fails = fail;
    pinned_allocs = pinned_frees = async_copies = 0;
    int32_t pinned = -1;
    float *h = ganfw_host_staging_alloc(c, (size_t)n * sizeof *h, &pinned);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(pinned, !fail);
    CU_ASSERT_EQUAL(ganfw_error_code(), GANFW_OK);
    for (int64_t i = 0; i < n; i++) h[i] = (float)i * 0.5f;
    CU_ASSERT_EQUAL(ganfw_tensor_from_staging(t, h, t->nbytes, pinned), GANFW_OK);
    CU_ASSERT_EQUAL(async_copies, !fail);
    CU_ASSERT_EQUAL(memcmp(t->data, h, (size_t)t->nbytes), 0);
    CU_ASSERT_EQUAL(ganfw_tensor_from_staging(t, h, t->nbytes - 4, pinned), GANFW_ERR_INVALID_ARG);
    ganfw_host_staging_free(c, h, pinned);
    CU_ASSERT_EQUAL(pinned_frees, !fail);
    CU_ASSERT_EQUAL(pinned_allocs, !fail);
  }
  pinned_fails = 0;
  ganfw_tensor_destroy(t);
  ganfw_ctx_destroy(c);
  ganfw_ctx *plain = make_ctx(0);
  int32_t pinned = -1;
  void *h = ganfw_host_staging_alloc(plain, 64, &pinned);
  CU_ASSERT_PTR_NOT_NULL(h);
  CU_ASSERT_EQUAL(pinned, 0);
  ganfw_host_staging_free(plain, h, pinned);
  ganfw_ctx_destroy(plain);
}

static CU_TestInfo tests[] = {{"f16_all_groups", test_f16_all_groups},
                              {"bf16_without_batchnorm", test_bf16_without_batchnorm},
                              {"f32_never_native", test_f32_never_native},
                              {"f32_input_converts", test_f32_input_converts},
                              {"plan_follows_native_path", test_plan_follows_native_path},
                              {"nonfinite_many", test_nonfinite_many},
                              {"staging", test_staging},
                              CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("amp_native", tests, suite_init, suite_clean);
}
