/* Gradient penalties through the executor's double backward against PyTorch 1.13's
 * torch.autograd.grad(create_graph=True) (tests/ref/gen_penalty.py): for critics covering
 * every layer kind with a double backward (conv2d, conv_transpose2d, linear with and without
 * bias, ReLU, LeakyReLU, tanh, sigmoid, layernorm, groupnorm, instancenorm, flatten, global
 * average pool, add, concat, upsample), the input gradient, WGAN-GP's penalty and every
 * parameter's gradient of the penalty within 1e-4 relative per tensor; the same nets in f16
 * and bf16 against f32; a finite-difference check of the penalty's parameter gradient; the
 * errors a penalised net without a double backward gets (BatchNorm, a plugin layer). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "pixelnorm.h"
#include "train/penalty.h"
#include "train/session.h"
#include "train/trainer.h"
#include "testutil.h"

static gt_ref *ref;
static const ganfw_host *host;

static ganfw_ctx *new_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 5};
  ganfw_ctx *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c), GANFW_OK);
  return c;
}

#define OK(call) CU_ASSERT_EQUAL_FATAL((call), GANFW_OK)

/* The critics of gen_penalty.py, built through the host table. */
static ganfw_net *build(ganfw_ctx *c, const char *name) {
  ganfw_net *n = host->net_create(c, name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(n);
  const float lrelu = 0.2f, eps = 1e-5f;
  if (strcmp(name, "lin") == 0) {
    OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 1));
    OK(host->net_activation(n, "a1", GANFW_ACT_LEAKY_RELU, lrelu));
    OK(host->net_conv2d(n, "c2", 4, 2, 4, 2, 1, 1));
    OK(host->net_flatten(n, "flat"));
    OK(host->net_linear(n, "fc", 18, 1, 1));
  } else if (strcmp(name, "curve") == 0) {
    OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 0));
    OK(host->net_activation(n, "a1", GANFW_ACT_TANH, 0));
    OK(host->net_conv_transpose2d(n, "ct", 4, 3, 3, 1, 1, 0, 1));
    OK(host->net_activation(n, "a2", GANFW_ACT_SIGMOID, 0));
    OK(host->net_conv2d(n, "c2", 3, 2, 4, 2, 1, 0));
    OK(host->net_activation(n, "a3", GANFW_ACT_RELU, 0));
    OK(host->net_flatten(n, "flat"));
    OK(host->net_linear(n, "fc1", 18, 3, 1));
    OK(host->net_linear(n, "fc2", 3, 1, 1));
  } else if (strcmp(name, "ln") == 0) {
    const int64_t shape[3] = {4, 6, 6};
    OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 1));
    OK(host->net_layernorm(n, "ln", 3, shape, eps, 1));
    OK(host->net_activation(n, "a1", GANFW_ACT_LEAKY_RELU, lrelu));
    OK(host->net_conv2d(n, "c2", 4, 2, 4, 2, 1, 0));
    OK(host->net_flatten(n, "flat"));
    OK(host->net_linear(n, "fc", 18, 1, 1));
  } else if (strcmp(name, "gn") == 0) {
    OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 0));
    OK(host->net_groupnorm(n, "gn", 2, 4, eps, 1));
    OK(host->net_activation(n, "a1", GANFW_ACT_RELU, 0));
    OK(host->net_conv2d(n, "c2", 4, 4, 4, 2, 1, 1));
    OK(host->net_instancenorm2d(n, "in", 4, eps, 1));
    OK(host->net_activation(n, "a2", GANFW_ACT_TANH, 0));
    OK(host->net_global_avg_pool(n, "gap"));
    OK(host->net_flatten(n, "flat"));
    OK(host->net_linear(n, "fc", 4, 1, 1));
  } else if (strcmp(name, "pn") == 0) { /* the plugin layer of examples/pixelnorm */
    OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 1));
    void *state = pixelnorm_state_create(host, c, 4, 1e-8f, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(state);
    OK(host->net_custom(n, "pn", pixelnorm_def(), state));
    OK(host->net_activation(n, "a1", GANFW_ACT_LEAKY_RELU, lrelu));
    OK(host->net_conv2d(n, "c2", 4, 2, 4, 2, 1, 0));
    OK(host->net_flatten(n, "flat"));
    OK(host->net_linear(n, "fc", 18, 1, 1));
  } else if (strcmp(name, "sn") == 0) { /* spectral norm on a conv and a linear layer */
    OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 1));
    OK(host->net_activation(n, "a1", GANFW_ACT_LEAKY_RELU, lrelu));
    OK(host->net_conv2d(n, "c2", 4, 2, 4, 2, 1, 0));
    OK(host->net_flatten(n, "flat"));
    OK(host->net_linear(n, "fc", 18, 1, 1));
    OK(host->net_spectral_norm(n, "c1", 1, 1e-12f));
    OK(host->net_spectral_norm(n, "fc", 1, 1e-12f));
  } else { /* graph */
    const char *add_in[2] = {"c2", "sc"}, *cat_in[2] = {"a", "r1"};
    OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 1));
    OK(host->net_activation(n, "r1", GANFW_ACT_RELU, 0));
    OK(host->net_conv2d(n, "c2", 4, 4, 3, 1, 1, 1));
    OK(host->net_input(n, "input"));
    OK(host->net_conv2d(n, "sc", 3, 4, 1, 1, 0, 0));
    OK(host->net_add(n, "a", add_in, 2));
    OK(host->net_concat(n, "cat", cat_in, 2));
    OK(host->net_upsample(n, "up", 2, GANFW_UPSAMPLE_NEAREST));
    OK(host->net_conv2d(n, "c3", 8, 2, 4, 2, 1, 1));
    OK(host->net_activation(n, "a3", GANFW_ACT_TANH, 0));
    OK(host->net_flatten(n, "flat"));
    OK(host->net_linear(n, "fc", 72, 1, 1));
  }
  OK(host->net_build(n, 3, 6, 6));
  return n;
}

/* The reference's key as a tensor of dtype. */
static ganfw_tensor *ref_tensor(ganfw_ctx *c, const char *key, int32_t dtype) {
  ganfw_tensor *t = gt_ref_tensor_new(c, ref, key);
  ganfw_tensor *d = ganfw_tensor_as_dtype(t, dtype, GANFW_MEM_DATA);
  ganfw_tensor_destroy(t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  return d;
}

/* One penalised pass of net `name` in dtype: the input gradient gx and the penalty P; the
 * parameter gradients stay in the net. */
typedef struct pass {
  ganfw_ctx *ctx;
  ganfw_net *net;
  ganfw_tensor *gx;
  double P;
} pass;

static void pass_free(pass *p) {
  ganfw_tensor_destroy(p->gx);
  ganfw_net_destroy(p->net);
  ganfw_ctx_destroy(p->ctx);
  memset(p, 0, sizeof *p);
}

static void run(const char *name, int32_t dtype, pass *p) {
  char key[64];
  p->ctx = new_ctx();
  p->net = build(p->ctx, name);
  gt_ref_load_params(ref, p->net, name);
  ganfw_net_buffer b; /* spectral norm's u and v where the reference has them */
  for (int64_t i = 0; ganfw_net_buffer_at(p->net, i, &b); i++) {
    snprintf(key, sizeof key, "%s_%s", name, b.name);
    int64_t m = 0;
    const float *v = b.tensor ? gt_ref_f32(ref, key, &m, NULL, NULL) : NULL;
    if (v && m == b.tensor->numel) OK(ganfw_tensor_from_host(b.tensor, v, b.tensor->nbytes));
  }
  OK(ganfw_net_set_compute_dtype(p->net, dtype));
  snprintf(key, sizeof key, "%s_x", name);
  ganfw_tensor *x = ref_tensor(p->ctx, key, GANFW_DTYPE_F32);
  snprintf(key, sizeof key, "%s_dy", name);
  ganfw_tensor *dy = ref_tensor(p->ctx, key, dtype);
  ganfw_tape *tape = ganfw_tape_create(p->net);
  ganfw_tensor *y = NULL, *v = NULL;
  ganfw_tape_set_full(tape, 1);
  ganfw_net_zero_grad(p->net);
  OK(ganfw_net_forward(p->net, x, tape, &y));
  OK(ganfw_net_backward_keep(p->net, tape, dy, &p->gx));
  OK(ganfw_penalty_grad(p->ctx, GANFW_PENALTY_GP, 1.0, p->gx, 1.0, 0, 1.0, &p->P, &v));
  OK(ganfw_net_backward_of_backward(p->net, tape, v));
  ganfw_tensor_destroy(v);
  ganfw_tensor_destroy(y);
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(dy);
}

/* ||got - want|| / ||want|| for f32 values of the reference's key, against at least 1e-3: a
 * gradient that is zero in exact arithmetic (a bias before an instance norm) is compared
 * absolutely. */
static double norm_rel(const float *got, const char *key, int64_t n) {
  int64_t m = 0;
  const float *want = gt_ref_f32(ref, key, &m, NULL, NULL);
  CU_ASSERT_FATAL(want && m == n);
  double d = 0, r = 0;
  for (int64_t i = 0; i < n; i++) {
    d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
    r += (double)want[i] * want[i];
  }
  return sqrt(d) / fmax(sqrt(r), 1e-3);
}

static void check_against_torch(const char *name) {
  pass p = {0};
  run(name, GANFW_DTYPE_F32, &p);
  char key[96];
  snprintf(key, sizeof key, "%s_gx", name);
  double e = norm_rel(p.gx->data, key, p.gx->numel);
  printf("\n    %-22s %.2e", key, e);
  CU_ASSERT(e < 1e-5);
  snprintf(key, sizeof key, "%s_P", name);
  const double P = gt_ref_scalar(ref, key);
  printf("\n    %-22s %.6f (torch %.6f)", key, p.P, P);
  CU_ASSERT(fabs(p.P - P) <= 1e-5 * fmax(1.0, fabs(P)));
  for (int64_t i = 0; i < host->net_param_count(p.net); i++) {
    ganfw_param_info q = {.struct_size = sizeof q};
    OK(host->net_param_info(p.net, i, &q));
    snprintf(key, sizeof key, "%s_d%s", name, q.name);
    e = norm_rel(q.grad->data, key, q.grad->numel);
    printf("\n    %-22s %.2e", key, e);
    CU_ASSERT(e < 1e-4);
  }
  pass_free(&p);
}

static void test_lin(void) {
  check_against_torch("lin");
}
static void test_curve(void) {
  check_against_torch("curve");
}
static void test_layernorm(void) {
  check_against_torch("ln");
}
static void test_group_instance_norm(void) {
  check_against_torch("gn");
}
static void test_graph(void) {
  check_against_torch("graph");
}

/* A plugin layer's backward2 (ABI 1.9; examples/pixelnorm's), its byte figure checked by the
 * core as for backward. */
static void test_plugin_layer(void) {
  check_against_torch("pn");
}

/* Spectral norm (one power iteration in the penalty's forward, as PyTorch's training forward;
 * the gradient through sigma with u and v constant). */
static void test_spectral_norm(void) {
  check_against_torch("sn");
}

/* f16 and bf16 compute against f32 on the same critic: the penalty's parameter gradients
 * within 1e-2 (f16) and 5e-2 (bf16) relative per tensor. */
static void test_16bit(void) {
  const char *names[2] = {"lin", "ln"};
  for (int k = 0; k < 2; k++) {
    pass p32 = {0};
    run(names[k], GANFW_DTYPE_F32, &p32);
    const int32_t dtypes[2] = {GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
    const double tols[2] = {1e-2, 5e-2};
    for (int d = 0; d < 2; d++) {
      pass p = {0};
      run(names[k], dtypes[d], &p);
      double worst = 0;
      for (int64_t i = 0; i < host->net_param_count(p.net); i++) {
        ganfw_param_info a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
        OK(host->net_param_info(p.net, i, &a));
        OK(host->net_param_info(p32.net, i, &b));
        double e = gt_tensor_norm_rel(a.grad, b.grad);
        worst = e > worst ? e : worst;
      }
      printf("\n    %s %s: P %.5f (f32 %.5f), worst gradient %.2e (tol %.0e)", names[k],
             ganfw_dtype_name(dtypes[d]), p.P, p32.P, worst, tols[d]);
      CU_ASSERT(worst < tols[d]);
      CU_ASSERT(fabs(p.P - p32.P) < tols[d] * fmax(1.0, p32.P));
      pass_free(&p);
    }
    pass_free(&p32);
  }
}

/* The penalty of net on x with the context's Philox stream at `offset` (dropout's masks
 * repeat): P, and with grads the parameter gradients in the net. */
static double penalty_at(ganfw_ctx *c, ganfw_net *net, ganfw_tensor *x, uint64_t offset,
                         int32_t grads) {
  ganfw_tensor *y = NULL, *gx = NULL, *v = NULL, *dy = NULL;
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tape_set_full(tape, 1);
  c->rng_offset = offset;
  ganfw_net_zero_grad(net);
  OK(ganfw_net_forward(net, x, tape, &y));
  int64_t n = y->numel;
  dy = ganfw_tensor_create(c, GANFW_DTYPE_F32, y->ndim, y->shape, GANFW_MEM_DATA, "dy");
  float *ones = gt_falloc(n);
  for (int64_t i = 0; i < n; i++) ones[i] = 1.0f;
  OK(ganfw_tensor_from_host(dy, ones, n * 4));
  gt_free(ones);
  OK(ganfw_net_backward_keep(net, tape, dy, &gx));
  double P = 0;
  OK(ganfw_penalty_grad(c, GANFW_PENALTY_GP, 1.0, gx, 1.0, 0, 1.0, &P, &v));
  if (grads) {
    OK(ganfw_net_backward_of_backward(net, tape, v));
  } else {
    ganfw_tape_clear(tape);
  }
  ganfw_tensor_destroy(v);
  ganfw_tensor_destroy(gx);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(y);
  ganfw_tape_destroy(tape);
  return P;
}

/* Dropout (no PyTorch twin: its masks are the run's Philox draws) by central differences:
 * conv, tanh, dropout 0.3, linear; each parameter element's analytic penalty gradient against
 * (P(w + h) - P(w - h)) / 2h with the same masks, within 2% of the gradient's scale. */
static void test_dropout_numeric(void) {
  ganfw_ctx *c = new_ctx();
  ganfw_net *n = host->net_create(c, "drop");
  OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 1));
  OK(host->net_activation(n, "a1", GANFW_ACT_TANH, 0));
  OK(host->net_dropout(n, "d1", 0.3f));
  OK(host->net_flatten(n, "flat"));
  OK(host->net_linear(n, "fc", 144, 1, 1));
  OK(host->net_build(n, 3, 6, 6));
  const int64_t xs[4] = {3, 3, 6, 6};
  ganfw_tensor *x = ganfw_tensor_create(c, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  float *xv = gt_frand(x->numel, 7);
  OK(ganfw_tensor_from_host(x, xv, x->nbytes));
  gt_free(xv);
  const uint64_t offset = 1000;
  penalty_at(c, n, x, offset, 1);
  double worst = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(n); i++) {
    ganfw_param_info q = {.struct_size = sizeof q};
    OK(ganfw_net_param_info(n, i, &q));
    float *w = q.value->data, *g = q.grad->data;
    double scale = 0;
    for (int64_t k = 0; k < q.value->numel; k++) scale = fmax(scale, fabs(g[k]));
    float *analytic = gt_falloc(q.value->numel);
    memcpy(analytic, g, q.value->nbytes);
    for (int64_t k = 0; k < q.value->numel; k += 1 + q.value->numel / 12) {
      const float keep = w[k], h = 1e-2f * fmaxf(fabsf(keep), 0.1f);
      w[k] = keep + h;
      const double pp = penalty_at(c, n, x, offset, 0);
      w[k] = keep - h;
      const double pm = penalty_at(c, n, x, offset, 0);
      w[k] = keep;
      const double e = fabs((pp - pm) / (2.0 * h) - analytic[k]) / fmax(scale, 1e-6);
      worst = fmax(worst, e);
    }
    gt_free(analytic);
  }
  printf("\n    worst difference %.2e of each tensor's largest gradient", worst);
  CU_ASSERT(worst < 2e-2);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(n);
  ganfw_ctx_destroy(c);
}

/* A penalised net must have a double backward at every layer: BatchNorm is refused naming
 * the layer and the norms to use instead. */
static void test_batchnorm_refused(void) {
  ganfw_ctx *c = new_ctx();
  ganfw_net *n = host->net_create(c, "critic");
  OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 0));
  OK(host->net_batchnorm2d(n, "bn", 4, 1e-5f, 0.1f));
  OK(host->net_flatten(n, "flat"));
  OK(host->net_linear(n, "fc", 144, 1, 1));
  OK(host->net_build(n, 3, 6, 6));
  CU_ASSERT_EQUAL(ganfw_net_double_backward_check(n), GANFW_ERR_CONFIG);
  const char *m = ganfw_error_message();
  printf("\n    %s", m);
  CU_ASSERT_PTR_NOT_NULL(strstr(m, "critic.bn"));
  CU_ASSERT_PTR_NOT_NULL(strstr(m, "layer norm"));
  ganfw_error_clear();
  ganfw_net_destroy(n);
  ganfw_ctx_destroy(c);
}

/* A plugin layer whose def has no backward2 (one of ABI 1.8) is refused naming it. */
static void test_plugin_without_backward2_refused(void) {
  ganfw_ctx *c = new_ctx();
  ganfw_net *n = host->net_create(c, "critic");
  static ganfw_layer_def old;
  old = *pixelnorm_def();
  old.backward2 = NULL;
  OK(host->net_conv2d(n, "c1", 3, 4, 3, 1, 1, 0));
  OK(host->net_custom(n, "pn", &old, pixelnorm_state_create(host, c, 4, 1e-8f, 0)));
  OK(host->net_flatten(n, "flat"));
  OK(host->net_linear(n, "fc", 144, 1, 1));
  OK(host->net_build(n, 3, 6, 6));
  CU_ASSERT_EQUAL(ganfw_net_double_backward_check(n), GANFW_ERR_UNSUPPORTED);
  const char *m = ganfw_error_message();
  printf("\n    %s", m);
  CU_ASSERT_PTR_NOT_NULL(strstr(m, "critic.pn (pixelnorm"));
  CU_ASSERT_PTR_NOT_NULL(strstr(m, "backward2"));
  ganfw_error_clear();
  ganfw_net_destroy(n);
  ganfw_ctx_destroy(c);
}

/* One whole WGAN-GP critic step (tests/ref/gen_wgan_gp_step.py): the DC-GAN critic with
 * layer norm, loss mean(D(G(z))) - mean(D(x)) + 10 GP on interpolates whose eps come from
 * the run's Philox stream at a known offset, then Adam: the gradients and the weights after
 * the step within 1e-4 relative per tensor, the penalty and the loss to 1e-5. */
static const char wgan_gp_config[] =
    "seed: 1\n"
    "device: {type: cpu, threads: 2}\n"
    "model: {plugin: dcgan, image_size: 32, channels: 1, nz: 100, ngf: 64, ndf: 64, d_norm: "
    "layernorm}\n"
    "objective: {plugin: wgan, clip: 0, gp: 10}\n"
    "optim: {plugin: adam, lr: 1.0e-4, betas: [0.0, 0.9]}\n"
    "train: {batch_size: 8, max_steps: 1, d_steps_per_g_step: 5}\n";

static void test_whole_critic_step(void) {
  gt_ref *r = gt_ref_open("wgan_gp_step");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_gan *gan = NULL;
  gt_ref_gan_session(wgan_gp_config, "wgan_gp_step", &run, &s);
  ganfw_tensor *x = gt_ref_tensor_new(s->ctx, r, "real"), *z = gt_ref_tensor_new(s->ctx, r, "z");
  OK(ganfw_gan_create(s, &gan));
  s->ctx->rng_offset = 5000; /* gen_wgan_gp_step.py's EPS_OFFSET */
  ganfw_gan_stats gs;
  ganfw_status st = ganfw_gan_step(gan, x, z, &gs);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(gs.g_stepped, 0);
  const double gp = gt_ref_scalar(r, "gp"), loss = gt_ref_scalar(r, "loss_d");
  printf("\n    gp %.6f (torch %.6f), loss_d %.6f (torch %.6f)", gs.gp, gp, gs.loss_d, loss);
  CU_ASSERT(fabs(gs.gp - gp) <= 1e-5 * fmax(1, fabs(gp)));
  CU_ASSERT(fabs(gs.loss_d - loss) <= 1e-5 * fmax(1, fabs(loss)));
  ganfw_net *D = s->discriminator;
  for (int64_t i = 0; i < ganfw_net_param_count(D); i++) {
    ganfw_param_info q = {.struct_size = sizeof q};
    OK(ganfw_net_param_info(D, i, &q));
    char key[160];
    gt_ref *keep = ref;
    ref = r; /* norm_rel reads the suite's reference */
    snprintf(key, sizeof key, "grad.discriminator.%s", q.name);
    const double eg = norm_rel(q.grad->data, key, q.grad->numel);
    snprintf(key, sizeof key, "after.discriminator.%s", q.name);
    const double ew = norm_rel(q.value->data, key, q.value->numel);
    ref = keep;
    printf("\n    %-24s gradient %.2e, after the step %.2e", q.name, eg, ew);
    CU_ASSERT(eg < 1e-4);
    CU_ASSERT(ew < 1e-4);
  }
  ganfw_gan_destroy(gan);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(z);
  ganfw_session_close(s);
  ganfw_run_close(run);
  gt_ref_close(r);
}

static int init(void) {
  host = ganfw_host_table();
  ref = gt_ref_open("penalty");
  return ref ? 0 : 1;
}

static int clean(void) {
  gt_ref_close(ref);
  return 0;
}

int main(void) {
  CU_TestInfo tests[] = {
      {"conv, leaky relu, linear", test_lin},
      {"tanh, sigmoid, conv_transpose, relu", test_curve},
      {"layernorm", test_layernorm},
      {"groupnorm, instancenorm, global avg pool", test_group_instance_norm},
      {"graph: add, concat, upsample", test_graph},
      {"f16 and bf16 against f32", test_16bit},
      {"a plugin layer's backward2 (pixelnorm)", test_plugin_layer},
      {"spectral norm", test_spectral_norm},
      {"dropout by central differences", test_dropout_numeric},
      {"batchnorm refused", test_batchnorm_refused},
      {"a plugin layer without backward2 refused", test_plugin_without_backward2_refused},
      {"one whole WGAN-GP critic step", test_whole_critic_step},
      CU_TEST_INFO_NULL};
  return gt_run_fixture("penalty", tests, init, clean);
}
