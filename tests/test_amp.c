/* The amp memory strategy (plugins/memory/amp): its GradScaler against PyTorch's rules
 * (unscale, skip on inf/NaN, back off, grow, shared or per optimizer, bf16 without a
 * scaler, scalars for resume, config errors); the executor in f16/bf16 against f32 on small
 * nets; and DC-GAN 32x32 steps: an inf injected into one real batch skips exactly one D
 * step, and the peak activation bytes of f16/bf16 against f32 at batch 64 (the issue's
 * target, measured by the allocator). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "train/session.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "testutil.h"
#include "train/trainer.h"

static ganfw_ctx *ctx;
static ganfw_plugin *plugin;
static const ganfw_memory_vt *vt;
static char tmpdir[64];

static int suite_init(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 7};
  if (ganfw_ctx_create(&opt, &ctx) != GANFW_OK) return -1;
  if (ganfw_plugin_load("amp", GANFW_PLUGIN_MEMORY, "test", NULL, 0, &plugin) != GANFW_OK) {
    fprintf(stderr, "loading amp: %s\n", ganfw_error_message());
    return -1;
  }
  vt = ganfw_plugin_vtable(plugin);
  snprintf(tmpdir, sizeof tmpdir, "/tmp/ganfw_amp_XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int suite_clean(void) {
  ganfw_plugin_unload(plugin);
  ganfw_ctx_destroy(ctx);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* --- the plugin alone ------------------------------------------------------------------ */

/* One strategy instance made from a config item in YAML. */
typedef struct amp_inst {
  ganfw_config *cfg;
  void *self;
} amp_inst;

static ganfw_status amp_open(const char *yaml, amp_inst *a) {
  a->self = NULL;
  a->cfg = NULL;
  ganfw_status st = ganfw_config_load_string(yaml, "amp.yaml", &a->cfg);
  if (st != GANFW_OK) return st;
  return vt->create(ganfw_host_table(), ctx, ganfw_config_root(a->cfg), &a->self);
}

static void amp_close(amp_inst *a) {
  vt->destroy(a->self);
  ganfw_config_destroy(a->cfg);
}

/* The scalar `name`, or NAN when the strategy does not report it. */
static double scalar(const amp_inst *a, const char *name) {
  const char *n;
  double v;
  for (int32_t i = 0; vt->scalar(a->self, i, &n, &v); i++)
    if (strcmp(n, name) == 0) return v;
  return NAN;
}

/* Two gradient tensors of 4 values each, as an optimizer's parameter list. */
typedef struct grads {
  ganfw_tensor *value[2], *grad[2];
  ganfw_param p[2];
} grads;

static void grads_make(grads *g) {
  int64_t n = 4;
  for (int i = 0; i < 2; i++) {
    g->value[i] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_PARAM, "w");
    g->grad[i] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_GRAD, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g->grad[i]);
    g->p[i] = (ganfw_param){"w", g->value[i], g->grad[i]};
  }
}

static void grads_set(grads *g, float a, float b) {
  for (int k = 0; k < 4; k++) {
    ((float *)g->grad[0]->data)[k] = a * (float)(k + 1);
    ((float *)g->grad[1]->data)[k] = b * (float)(k + 1);
  }
}

static void grads_free(grads *g) {
  for (int i = 0; i < 2; i++) {
    ganfw_tensor_destroy(g->value[i]);
    ganfw_tensor_destroy(g->grad[i]);
  }
}

/* after_backward of optimizer `opt` on grads scaled by the current scale (the value `bad`
 * in one gradient when it is not 0), returning the skip flag. */
static int32_t backward_step(amp_inst *a, grads *g, int32_t opt, float bad) {
  float s = (float)vt->loss_scale(a->self, opt);
  grads_set(g, 0.25f * s, -0.5f * s);
  if (bad != 0) ((float *)g->grad[1]->data)[2] = bad;
  int32_t skip = 0;
  CU_ASSERT_EQUAL(vt->after_backward(a->self, opt, g->p, 2, &skip), GANFW_OK);
  return skip;
}

static void test_defaults_and_unscale(void) {
  amp_inst a;
  CU_ASSERT_EQUAL_FATAL(amp_open("plugin: amp\n", &a), GANFW_OK);
  ganfw_exec_options o = {
      .struct_size = sizeof o, .compute_dtype = GANFW_DTYPE_F32, .micro_batches = 1};
  CU_ASSERT_EQUAL(vt->configure(a.self, &o), GANFW_OK);
  CU_ASSERT_EQUAL(o.compute_dtype, GANFW_DTYPE_F16);
  CU_ASSERT_EQUAL(o.micro_batches, 1);
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 0), 65536.0);
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 1), 65536.0);
  CU_ASSERT_EQUAL(scalar(&a, "scale"), 65536.0);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker"), 0.0);
  CU_ASSERT_EQUAL(scalar(&a, "skipped_steps"), 0.0);
  grads g;
  grads_make(&g);
  grads_set(&g, 65536.0f, -3.0f * 65536.0f);
  int32_t skip = 0;
  CU_ASSERT_EQUAL(vt->after_backward(a.self, 0, g.p, 2, &skip), GANFW_OK);
  CU_ASSERT_EQUAL(skip, 0);
  for (int k = 0; k < 4; k++) { /* divided by the scale, exactly (a power of two) */
    CU_ASSERT_EQUAL(((float *)g.grad[0]->data)[k], (float)(k + 1));
    CU_ASSERT_EQUAL(((float *)g.grad[1]->data)[k], -3.0f * (float)(k + 1));
  }
  grads_free(&g);
  amp_close(&a);
}

static void test_skip_and_backoff(void) {
  amp_inst a;
  CU_ASSERT_EQUAL_FATAL(amp_open("{plugin: amp, growth_interval: 3}", &a), GANFW_OK);
  grads g;
  grads_make(&g);
  /* one clean step: tracker 1 */
  CU_ASSERT_EQUAL(backward_step(&a, &g, 1, 0), 0);
  CU_ASSERT_EQUAL(backward_step(&a, &g, 0, 0), 0);
  CU_ASSERT_EQUAL(vt->step_end(a.self), GANFW_OK);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker"), 1.0);
  /* inf in D's gradients: D skips, G steps, the shared scale halves once, tracker 0 */
  CU_ASSERT_EQUAL(backward_step(&a, &g, 1, INFINITY), 1);
  CU_ASSERT_EQUAL(backward_step(&a, &g, 0, 0), 0);
  CU_ASSERT_EQUAL(vt->step_end(a.self), GANFW_OK);
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 0), 32768.0);
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 1), 32768.0);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker"), 0.0);
  CU_ASSERT_EQUAL(scalar(&a, "skipped_steps"), 1.0);
  /* NaN in both: both skip, one more back-off */
  CU_ASSERT_EQUAL(backward_step(&a, &g, 1, NAN), 1);
  CU_ASSERT_EQUAL(backward_step(&a, &g, 0, -INFINITY), 1);
  CU_ASSERT_EQUAL(vt->step_end(a.self), GANFW_OK);
  CU_ASSERT_EQUAL(scalar(&a, "scale"), 16384.0);
  CU_ASSERT_EQUAL(scalar(&a, "skipped_steps"), 3.0);
  /* a step end without any checked gradients changes nothing (nothing to learn from) */
  CU_ASSERT_EQUAL(vt->step_end(a.self), GANFW_OK);
  CU_ASSERT_EQUAL(scalar(&a, "scale"), 16384.0);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker"), 0.0);
  grads_free(&g);
  amp_close(&a);
}

static void test_growth(void) {
  amp_inst a;
  CU_ASSERT_EQUAL_FATAL(
      amp_open("{plugin: amp, growth_interval: 3, init_scale: 1024, growth_factor: 4}", &a),
      GANFW_OK);
  grads g;
  grads_make(&g);
  const double want[] = {1024, 1024, 4096, 4096, 4096, 16384};
  for (int step = 0; step < 6; step++) {
    CU_ASSERT_EQUAL(backward_step(&a, &g, 1, 0), 0);
    CU_ASSERT_EQUAL(backward_step(&a, &g, 0, 0), 0);
    CU_ASSERT_EQUAL(vt->step_end(a.self), GANFW_OK);
    CU_ASSERT_EQUAL(vt->loss_scale(a.self, 0), want[step]);
    CU_ASSERT_EQUAL(scalar(&a, "growth_tracker"), (double)((step + 1) % 3));
  }
  /* two clean steps then an inf: the tracker restarts and the scale backs off */
  backward_step(&a, &g, 0, 0);
  vt->step_end(a.self);
  backward_step(&a, &g, 0, 0);
  vt->step_end(a.self);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker"), 2.0);
  CU_ASSERT_EQUAL(backward_step(&a, &g, 0, INFINITY), 1);
  vt->step_end(a.self);
  CU_ASSERT_EQUAL(scalar(&a, "scale"), 8192.0);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker"), 0.0);
  grads_free(&g);
  amp_close(&a);
}

static void test_growth_stays_finite(void) {
  amp_inst a;
  CU_ASSERT_EQUAL_FATAL(amp_open("{plugin: amp, growth_interval: 1, init_scale: 2.0e38}", &a),
                        GANFW_OK);
  grads g;
  grads_make(&g);
  grads_set(&g, 1, 1);
  int32_t skip = 0;
  CU_ASSERT_EQUAL(vt->after_backward(a.self, 0, g.p, 2, &skip), GANFW_OK);
  CU_ASSERT_EQUAL(skip, 0);
  vt->step_end(a.self); /* 4e38 is not an f32: PyTorch keeps the old scale */
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 0), (double)2.0e38f);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker"), 0.0);
  grads_free(&g);
  amp_close(&a);
}

static void test_per_optimizer(void) {
  amp_inst a;
  CU_ASSERT_EQUAL_FATAL(amp_open("{plugin: amp, scaler: per_optimizer, growth_interval: 3}", &a),
                        GANFW_OK);
  CU_ASSERT(isnan(scalar(&a, "scale")));
  grads g;
  grads_make(&g);
  CU_ASSERT_EQUAL(backward_step(&a, &g, 1, INFINITY), 1);
  CU_ASSERT_EQUAL(backward_step(&a, &g, 0, 0), 0);
  CU_ASSERT_EQUAL(vt->step_end(a.self), GANFW_OK);
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 0), 65536.0);
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 1), 32768.0);
  CU_ASSERT_EQUAL(scalar(&a, "scale_g"), 65536.0);
  CU_ASSERT_EQUAL(scalar(&a, "scale_d"), 32768.0);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker_g"), 1.0);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker_d"), 0.0);
  CU_ASSERT_EQUAL(scalar(&a, "skipped_steps"), 1.0);
  /* only G steps twice more: G grows, D (not checked) keeps its scale and tracker */
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(backward_step(&a, &g, 0, 0), 0);
    vt->step_end(a.self);
  }
  CU_ASSERT_EQUAL(scalar(&a, "scale_g"), 131072.0);
  CU_ASSERT_EQUAL(scalar(&a, "scale_d"), 32768.0);
  CU_ASSERT_EQUAL(scalar(&a, "growth_tracker_d"), 0.0);
  grads_free(&g);
  amp_close(&a);
}

static void test_bf16_has_no_scaler(void) {
  amp_inst a;
  CU_ASSERT_EQUAL_FATAL(amp_open("{plugin: amp, dtype: bf16}", &a), GANFW_OK);
  ganfw_exec_options o = {
      .struct_size = sizeof o, .compute_dtype = GANFW_DTYPE_F32, .micro_batches = 1};
  CU_ASSERT_EQUAL(vt->configure(a.self, &o), GANFW_OK);
  CU_ASSERT_EQUAL(o.compute_dtype, GANFW_DTYPE_BF16);
  const char *name;
  double v;
  CU_ASSERT_EQUAL(vt->scalar(a.self, 0, &name, &v), 0);
  grads g;
  grads_make(&g);
  for (int step = 0; step < 5; step++) {
    CU_ASSERT_EQUAL(vt->loss_scale(a.self, 0), 1.0);
    CU_ASSERT_EQUAL(vt->loss_scale(a.self, 1), 1.0);
    CU_ASSERT_EQUAL(backward_step(&a, &g, 0, 0), 0);
    CU_ASSERT_EQUAL(((float *)g.grad[0]->data)[3], 1.0f); /* 0.25 * 4, not rescaled */
    CU_ASSERT_EQUAL(vt->step_end(a.self), GANFW_OK);
  }
  /* a non-finite gradient is not skipped but stops training, as a NaN loss does in f32 */
  grads_set(&g, 1, 1);
  ((float *)g.grad[0]->data)[0] = NAN;
  int32_t skip = 0;
  CU_ASSERT_EQUAL(vt->after_backward(a.self, 1, g.p, 2, &skip), GANFW_ERR_NUMERIC);
  CU_ASSERT_EQUAL(skip, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "scaler"));
  amp_close(&a);
  /* bf16 with an explicit scaler runs it */
  CU_ASSERT_EQUAL_FATAL(amp_open("{plugin: amp, dtype: bf16, scaler: shared}", &a), GANFW_OK);
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 1), 65536.0);
  amp_close(&a);
  grads_free(&g);
}

static void test_scalars_round_trip(void) {
  amp_inst a, b;
  const char *yaml = "{plugin: amp, scaler: per_optimizer, growth_interval: 5}";
  CU_ASSERT_EQUAL_FATAL(amp_open(yaml, &a), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(amp_open(yaml, &b), GANFW_OK);
  grads g;
  grads_make(&g);
  for (int step = 0; step < 7; step++) {
    backward_step(&a, &g, 1, step == 2 ? INFINITY : 0);
    backward_step(&a, &g, 0, step == 4 ? NAN : 0);
    vt->step_end(a.self);
  }
  const char *name;
  double v;
  int32_t n = 0;
  for (; vt->scalar(a.self, n, &name, &v); n++) {
    CU_ASSERT_EQUAL(vt->set_scalar(b.self, name, v), GANFW_OK);
  }
  CU_ASSERT_EQUAL(n, 5);
  for (int32_t i = 0; i < n; i++) {
    double vb;
    const char *nb;
    vt->scalar(a.self, i, &name, &v);
    CU_ASSERT_EQUAL_FATAL(vt->scalar(b.self, i, &nb, &vb), 1);
    CU_ASSERT_STRING_EQUAL(name, nb);
    CU_ASSERT_EQUAL(v, vb);
  }
  CU_ASSERT_EQUAL(scalar(&b, "skipped_steps"), 2.0);
  CU_ASSERT_EQUAL(vt->loss_scale(b.self, 0), vt->loss_scale(a.self, 0));
  CU_ASSERT_EQUAL(vt->loss_scale(b.self, 1), 32768.0);
  /* the restored scaler goes on exactly as the original */
  for (int step = 0; step < 4; step++) {
    amp_inst *both[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
      backward_step(both[k], &g, 1, 0);
      backward_step(both[k], &g, 0, 0);
      vt->step_end(both[k]->self);
    }
    CU_ASSERT_EQUAL(vt->loss_scale(b.self, 0), vt->loss_scale(a.self, 0));
    CU_ASSERT_EQUAL(vt->loss_scale(b.self, 1), vt->loss_scale(a.self, 1));
  }
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 1), 65536.0); /* grew after 5 clean steps */
  CU_ASSERT_EQUAL(vt->set_scalar(b.self, "scale", 2.0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(vt->set_scalar(b.self, "scale_g", -1.0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(vt->set_scalar(b.self, "scale_g", NAN), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(vt->set_scalar(b.self, "skipped_steps", 1.5), GANFW_ERR_INVALID_ARG);
  grads_free(&g);
  amp_close(&a);
  amp_close(&b);
}

static void test_config(void) {
  static const char *const bad[] = {
      "{plugin: amp, dtype: f8}",           "{plugin: amp, dtype: 16}",
      "{plugin: amp, scaler: dynamic}",     "{plugin: amp, growth_factor: 1.0}",
      "{plugin: amp, backoff_factor: 1.5}", "{plugin: amp, backoff_factor: 0}",
      "{plugin: amp, growth_interval: 0}",  "{plugin: amp, init_scale: -1}",
      "{plugin: amp, init_scale: 1.0e39}",  "{plugin: amp, enabled: maybe}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    amp_inst a;
    ganfw_status st = amp_open(bad[i], &a);
    if (st != GANFW_ERR_CONFIG) printf("\n  %s: %d\n", bad[i], (int)st);
    CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
    CU_ASSERT_PTR_NULL(a.self);
    amp_close(&a);
  }
  /* disabled: f32, no scale, but a non-finite gradient still stops training */
  amp_inst a;
  CU_ASSERT_EQUAL_FATAL(amp_open("{plugin: amp, enabled: false}", &a), GANFW_OK);
  ganfw_exec_options o = {
      .struct_size = sizeof o, .compute_dtype = GANFW_DTYPE_F32, .micro_batches = 1};
  CU_ASSERT_EQUAL(vt->configure(a.self, &o), GANFW_OK);
  CU_ASSERT_EQUAL(o.compute_dtype, GANFW_DTYPE_F32);
  CU_ASSERT_EQUAL(vt->loss_scale(a.self, 0), 1.0);
  amp_close(&a);
}

/* --- the executor in f16 / bf16 ------------------------------------------------------ */

static ganfw_ctx *net_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 11};
  ganfw_ctx *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c), GANFW_OK);
  return c;
}

/* conv -> bn -> sigmoid -> dropout -> conv-transpose -> tanh -> avg pool -> flatten ->
 * linear -> tanh, on [20,3,32,32]: large enough that the 16-bit layers convert in several
 * row chunks (ganfw_layer_rows_run), the last one shorter. Smooth activations: the two
 * nets' inputs to a ReLU differ by rounding, which flips the gradient of the values next
 * to the kink and shows up in a norm as the square root of their fraction (ReLU in f16 is
 * checked exactly below). No conv bias before the BatchNorm: its gradient is zero up to
 * rounding. */
static ganfw_net *mixed_net(ganfw_ctx *c) {
  ganfw_net *net = ganfw_net_create(c, "mixed");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c", 3, 64, 3, 1, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(net, "bn", 64, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "sig", GANFW_ACT_SIGMOID, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_dropout(net, "drop", 0.25f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv_transpose2d(net, "t", 64, 4, 4, 2, 1, 0, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "tanh1", GANFW_ACT_TANH, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_pool2d(net, "pool", GANFW_POOL_AVG, 8, 8, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc", 4 * 8 * 8, 10, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "tanh", GANFW_ACT_TANH, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 3, 32, 32), GANFW_OK);
  return net;
}

static ganfw_tensor *host_tensor(ganfw_ctx *c, int32_t ndim, const int64_t *shape, float lo,
                                 float hi, uint64_t seed) {
  ganfw_tensor *t = ganfw_tensor_create(c, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_DATA, "in");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  gt_fill_uniform(t->data, t->numel, lo, hi, seed);
  return t;
}

/* The mixed net in `dtype` against the same net in f32: outputs, input gradients and
 * parameter gradients, the dtypes of what the executor hands out, and the activation
 * peak. */
static void check_executor(int32_t dtype, double tol) {
  ganfw_ctx *c32 = net_ctx(), *c16 = net_ctx();
  ganfw_net *n32 = mixed_net(c32), *n16 = mixed_net(c16);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(n16, dtype), GANFW_OK);
  const int64_t xs[4] = {20, 3, 32, 32}, ys[2] = {20, 10};
  ganfw_tensor *x32 = host_tensor(c32, 4, xs, -1, 1, 1), *x16 = host_tensor(c16, 4, xs, -1, 1, 1);
  ganfw_tensor *dy32 = host_tensor(c32, 2, ys, -1, 1, 2), *dy16 = host_tensor(c16, 2, ys, -1, 1, 2);
  ganfw_tape *t32 = ganfw_tape_create(n32), *t16 = ganfw_tape_create(n16);
  ganfw_tensor *y32 = NULL, *y16 = NULL, *dx32 = NULL, *dx16 = NULL;
  int64_t peak[2];
  ganfw_net *nets[2] = {n32, n16};
  ganfw_ctx *ctxs[2] = {c32, c16};
  ganfw_tape *tapes[2] = {t32, t16};
  ganfw_tensor *xin[2] = {x32, x16}, *dyin[2] = {dy32, dy16}, **yout[2] = {&y32, &y16},
               **dxout[2] = {&dx32, &dx16};
  for (int k = 0; k < 2; k++) {
    ganfw_alloc_reset_peak(ctxs[k]->alloc);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(nets[k], xin[k], tapes[k], yout[k]), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(nets[k], tapes[k], dyin[k],
                                             GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, dxout[k]),
                          GANFW_OK);
    ganfw_alloc_stats s;
    ganfw_alloc_get_stats(ctxs[k]->alloc, &s);
    peak[k] = s.category[GANFW_MEM_ACTIVATION].peak;
  }
  CU_ASSERT_EQUAL(y32->dtype, GANFW_DTYPE_F32);
  CU_ASSERT_EQUAL(y16->dtype, dtype);
  CU_ASSERT_EQUAL(dx16->dtype, dtype);
  double ey = gt_tensor_norm_rel(y16, y32), edx = gt_tensor_norm_rel(dx16, dx32), edw = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(n32); i++) {
    ganfw_param_info a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
    ganfw_net_param_info(n32, i, &a);
    ganfw_net_param_info(n16, i, &b);
    CU_ASSERT_EQUAL(b.value->dtype, GANFW_DTYPE_F32); /* f32 masters */
    CU_ASSERT_EQUAL(b.grad->dtype, GANFW_DTYPE_F32);  /* and f32 gradients */
    edw = fmax(edw, gt_tensor_norm_rel(b.grad, a.grad));
  }
  printf("\n  %s: output %.2g, input grad %.2g, param grads %.2g (norm-relative); activation "
         "peak %lld vs %lld bytes (%.3fx)",
         dtype == GANFW_DTYPE_F16 ? "f16" : "bf16", ey, edx, edw, (long long)peak[1],
         (long long)peak[0], (double)peak[1] / (double)peak[0]);
  CU_ASSERT(ey < tol);
  CU_ASSERT(edx < tol);
  CU_ASSERT(edw < tol);
  CU_ASSERT(ey > 0); /* it did compute in 16 bits */
  CU_ASSERT((double)peak[1] <= 0.55 * (double)peak[0]);
  ganfw_tensor *all[] = {y32, y16, dx32, dx16, x32, x16, dy32, dy16};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ganfw_tensor_destroy(all[i]);
  ganfw_tape_destroy(t32);
  ganfw_tape_destroy(t16);
  ganfw_net_destroy(n32);
  ganfw_net_destroy(n16);
  /* everything the nets allocated was handed back */
  ganfw_alloc_stats s;
  ganfw_alloc_get_stats(c16->alloc, &s);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_ACTIVATION].current, 0);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_WORKSPACE].current, 0);
  ganfw_ctx_destroy(c32);
  ganfw_ctx_destroy(c16);
}

static void test_executor_f16(void) {
  check_executor(GANFW_DTYPE_F16, 5e-3);
}

static void test_executor_bf16(void) {
  check_executor(GANFW_DTYPE_BF16, 3e-2);
}

/* Max pooling on f16-exact inputs: the f16 net gives exactly the f32 net's output and
 * input gradient (the argmax stays int32), and no-grad forwards keep nothing. */
static void test_maxpool_exact(void) {
  ganfw_ctx *c = net_ctx();
  ganfw_net *a = ganfw_net_create(c, "a"), *b = ganfw_net_create(c, "b");
  ganfw_net *nets[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    CU_ASSERT_EQUAL(ganfw_net_pool2d(nets[k], "p", GANFW_POOL_MAX, 2, 2, 0), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_net_activation(nets[k], "s", GANFW_ACT_RELU, 0), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_build(nets[k], 2, 6, 6), GANFW_OK);
  }
  CU_ASSERT_EQUAL(ganfw_net_set_compute_dtype(b, GANFW_DTYPE_F16), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_set_compute_dtype(b, GANFW_DTYPE_I32), GANFW_ERR_INVALID_ARG);
  const int64_t xs[4] = {3, 2, 6, 6};
  ganfw_tensor *x = host_tensor(c, 4, xs, -1, 1, 5);
  float *xv = x->data;
  for (int64_t i = 0; i < x->numel; i++) xv[i] = (float)((i * 37) % 101 - 50) / 64.0f;
  ganfw_tensor *y[2], *dx[2];
  for (int k = 0; k < 2; k++) {
    ganfw_tape *t = ganfw_tape_create(nets[k]);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(nets[k], x, t, &y[k]), GANFW_OK);
    ganfw_tensor *dy = host_tensor(c, 4, y[k]->shape, 0, 1, 9);
    for (int64_t i = 0; i < dy->numel; i++) ((float *)dy->data)[i] = (float)(i % 7) / 8.0f;
    CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(nets[k], t, dy, GANFW_BWD_INPUT_GRAD, &dx[k]),
                          GANFW_OK);
    ganfw_tensor_destroy(dy);
    ganfw_tape_destroy(t);
  }
  CU_ASSERT_EQUAL(y[1]->dtype, GANFW_DTYPE_F16);
  CU_ASSERT_EQUAL(gt_tensor_norm_rel(y[1], y[0]), 0.0);
  CU_ASSERT_EQUAL(gt_tensor_norm_rel(dx[1], dx[0]), 0.0);
  for (int k = 0; k < 2; k++) {
    ganfw_tensor_destroy(y[k]);
    ganfw_tensor_destroy(dx[k]);
  }
  /* no-grad in f16: only the output stays */
  ganfw_tensor *out = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(b, x, NULL, &out), GANFW_OK);
  ganfw_alloc_stats s;
  ganfw_alloc_get_stats(c->alloc, &s);
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_ACTIVATION].current, 512); /* 54 f16 values */
  CU_ASSERT_EQUAL(s.category[GANFW_MEM_WORKSPACE].current, 0);
  ganfw_tensor_destroy(out);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(a);
  ganfw_net_destroy(b);
  ganfw_ctx_destroy(c);
}

/* --- DC-GAN sessions ------------------------------------------------------------------ */

typedef struct gan_fx {
  ganfw_run *run;
  ganfw_session *s;
  ganfw_gan *gan;
  ganfw_tensor *x, *z;
} gan_fx;

static void gan_open(gan_fx *f, const char *name, const char *memory, int64_t batch, int64_t nz,
                     int64_t nf) {
  memset(f, 0, sizeof *f);
  char path[256];
  snprintf(path, sizeof path, "%s/%s.yaml", tmpdir, name);
  FILE *fp = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
  fprintf(fp,
          "seed: 1\n"
          "device: {type: cpu, threads: 2}\n"
          "model: {plugin: dcgan, image_size: 32, channels: 1, nz: %lld, ngf: %lld, ndf: %lld}\n"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
          "train: {batch_size: %lld, max_steps: 1}\n"
          "%s\n",
          (long long)nz, (long long)nf, (long long)nf, (long long)batch, memory);
  fclose(fp);
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 32, .width = 32};
  ganfw_status st = ganfw_run_open_file(path, NULL, 0, &f->run);
  if (st == GANFW_OK) st = ganfw_session_open(f->run, 0, &info, &f->s);
  if (st == GANFW_OK) st = ganfw_gan_create(f->s, &f->gan);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  const int64_t xs[4] = {batch, 1, 32, 32}, zs[4] = {batch, nz, 1, 1};
  f->x = ganfw_tensor_create(f->s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "batch");
  f->z = ganfw_tensor_create(f->s->ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "noise");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f->z);
}

/* Step `step`'s real batch (uniform in [-1, 1]) and noise (uniform in [-2, 2]). */
static void gan_batch(gan_fx *f, int step) {
  gt_fill_uniform(f->x->data, f->x->numel, -1, 1, 100 + (uint64_t)step);
  gt_fill_uniform(f->z->data, f->z->numel, -2, 2, 200 + (uint64_t)step);
}

static void gan_close(gan_fx *f) {
  ganfw_tensor_destroy(f->x);
  ganfw_tensor_destroy(f->z);
  ganfw_gan_destroy(f->gan);
  ganfw_session_close(f->s);
  ganfw_run_close(f->run);
}

/* The memory strategy's scalar `name` ("scale", ...), NAN when absent. */
static double session_scalar(ganfw_session *s, const char *name) {
  for (int32_t i = 0; i < s->n_memory; i++) {
    const char *n;
    double v;
    for (int32_t k = 0; s->memory[i].vt->scalar(s->memory[i].self, k, &n, &v); k++)
      if (strcmp(n, name) == 0) return v;
  }
  return NAN;
}

/* All parameter values of a net, concatenated into a new host buffer (free()). */
static float *params_copy(ganfw_net *net, int64_t *total) {
  int64_t n = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    ganfw_net_param_info(net, i, &p);
    n += p.value->numel;
  }
  float *buf = malloc((size_t)n * sizeof *buf), *at = buf;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    ganfw_net_param_info(net, i, &p);
    ganfw_tensor_to_host(p.value, at, p.value->nbytes);
    at += p.value->numel;
  }
  *total = n;
  return buf;
}

/* A small DC-GAN in f16 with a shared scaler for 5 steps; one pixel of the third real batch
 * is inf. That D step (and only it) is skipped with D's weights untouched, G learns every
 * step, the scale halves once and the growth tracker restarts. init_scale is 2048 here:
 * from PyTorch's 65536 this small model's first steps overflow f16 by themselves (G's
 * gradients grow through BatchNorm) and the scaler backs off to 8192 within two steps,
 * which would mix natural skips with the injected one. */
static void test_injected_inf_skips_one_d_step(void) {
  gan_fx f;
  gan_open(&f, "inf", "memory: [{plugin: amp, dtype: f16, init_scale: 2048}]", 16, 16, 16);
  CU_ASSERT_EQUAL(f.s->exec.compute_dtype, GANFW_DTYPE_F16);
  int32_t skipped_d = 0, skipped_g = 0;
  const int steps = 5, bad = 2;
  for (int step = 0; step < steps; step++) {
    gan_batch(&f, step);
    if (step == bad) ((float *)f.x->data)[123] = INFINITY; /* one corrupt pixel */
    int64_t nd = 0, ng = 0;
    float *d0 = params_copy(f.s->discriminator, &nd), *g0 = params_copy(f.s->generator, &ng);
    ganfw_gan_stats gs;
    ganfw_status st = ganfw_gan_step(f.gan, f.x, f.z, &gs);
    if (st != GANFW_OK) printf("\n  step %d: %s\n", step, ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    float *d1 = params_copy(f.s->discriminator, &nd), *g1 = params_copy(f.s->generator, &ng);
    int d_same = memcmp(d0, d1, (size_t)nd * sizeof *d0) == 0;
    int g_same = memcmp(g0, g1, (size_t)ng * sizeof *g0) == 0;
    CU_ASSERT_EQUAL(d_same, step == bad); /* D untouched exactly when its step was skipped */
    CU_ASSERT(!g_same);                   /* G learns every step */
    CU_ASSERT_EQUAL(gs.skipped_d, step == bad);
    if (step == bad) CU_ASSERT(!isfinite(gs.loss_d));
    if (step != bad) CU_ASSERT(isfinite(gs.loss_d) && isfinite(gs.loss_g));
    skipped_d += gs.skipped_d;
    skipped_g += gs.skipped_g;
    free(d0), free(d1), free(g0), free(g1);
  }
  CU_ASSERT_EQUAL(skipped_d, 1);
  CU_ASSERT_EQUAL(skipped_g, 0);
  CU_ASSERT_EQUAL(session_scalar(f.s, "scale"), 1024.0); /* halved once */
  CU_ASSERT_EQUAL(session_scalar(f.s, "growth_tracker"), (double)(steps - bad - 1));
  CU_ASSERT_EQUAL(session_scalar(f.s, "skipped_steps"), 1.0);
  gan_close(&f);
}

/* One full DC-GAN step (batch 64, nz 100, 64 filters, the dcgan.yaml model) per variant
 * from the same weights, batch and noise: peak activation bytes and losses. */
static void test_dcgan_peak_activation(void) {
  static const struct {
    const char *name, *memory;
  } variants[] = {{"f32", ""},
                  {"f16", "memory: [{plugin: amp, dtype: f16}]"},
                  {"bf16", "memory: [{plugin: amp, dtype: bf16}]"}};
  int64_t peak[3], peak_total[3], peak_ws[3];
  ganfw_gan_stats gs[3];
  int64_t nref_g = 0, nref_d = 0;
  float *ref_g = NULL, *ref_d = NULL;
  for (int v = 0; v < 3; v++) {
    gan_fx f;
    gan_open(&f, variants[v].name, variants[v].memory, 64, 100, 64);
    /* the same seed gives the same initial weights in every variant */
    int64_t ng = 0, nd = 0;
    float *wg = params_copy(f.s->generator, &ng), *wd = params_copy(f.s->discriminator, &nd);
    if (v == 0) {
      ref_g = wg, ref_d = wd, nref_g = ng, nref_d = nd;
    } else {
      CU_ASSERT(ng == nref_g && memcmp(wg, ref_g, (size_t)ng * 4) == 0);
      CU_ASSERT(nd == nref_d && memcmp(wd, ref_d, (size_t)nd * 4) == 0);
      free(wg), free(wd);
    }
    gan_batch(&f, 0);
    ganfw_alloc_reset_peak(f.s->ctx->alloc);
    ganfw_status st = ganfw_gan_step(f.gan, f.x, f.z, &gs[v]);
    if (st != GANFW_OK) printf("\n  %s: %s\n", variants[v].name, ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(gs[v].skipped_d + gs[v].skipped_g, 0);
    ganfw_alloc_stats s;
    ganfw_alloc_get_stats(f.s->ctx->alloc, &s);
    peak[v] = s.category[GANFW_MEM_ACTIVATION].peak;
    peak_total[v] = s.allocated.peak;
    peak_ws[v] = s.category[GANFW_MEM_WORKSPACE].peak;
    gan_close(&f);
  }
  free(ref_g);
  free(ref_d);
  const double mib = 1024.0 * 1024.0;
  for (int v = 0; v < 3; v++)
    printf("\n  %-4s peak activation %7.3f MiB (%.3fx f32), workspace %7.3f MiB, allocated "
           "%7.3f MiB; loss_d %.5f loss_g %.5f D(x) %.4f",
           variants[v].name, peak[v] / mib, (double)peak[v] / (double)peak[0], peak_ws[v] / mib,
           peak_total[v] / mib, gs[v].loss_d, gs[v].loss_g, gs[v].d_x);
  CU_ASSERT((double)peak[1] <= 0.55 * (double)peak[0]);
  CU_ASSERT((double)peak[2] <= 0.55 * (double)peak[0]);
  /* the 16-bit steps compute the f32 step's losses to within a few per cent */
  for (int v = 1; v < 3; v++) {
    CU_ASSERT(fabs(gs[v].loss_d - gs[0].loss_d) <= 0.03 * gs[0].loss_d);
    CU_ASSERT(fabs(gs[v].loss_g - gs[0].loss_g) <= 0.03 * gs[0].loss_g);
    CU_ASSERT(fabs(gs[v].d_x - gs[0].d_x) <= 0.01);
    CU_ASSERT(fabs(gs[v].d_g_z1 - gs[0].d_g_z1) <= 0.01);
  }
}

static CU_TestInfo tests[] = {
    {"defaults and unscale", test_defaults_and_unscale},
    {"skip and backoff", test_skip_and_backoff},
    {"growth", test_growth},
    {"growth stays finite", test_growth_stays_finite},
    {"per optimizer", test_per_optimizer},
    {"bf16 has no scaler", test_bf16_has_no_scaler},
    {"scalars round trip", test_scalars_round_trip},
    {"config", test_config},
    {"executor f16", test_executor_f16},
    {"executor bf16", test_executor_bf16},
    {"max pool exact", test_maxpool_exact},
    {"injected inf skips one D step", test_injected_inf_skips_one_d_step},
    {"DC-GAN peak activation", test_dcgan_peak_activation},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("amp", tests, suite_init, suite_clean);
}
