/* Memory strategy step_in_backward (train/sib.c) on the CPU: the weights after several
 * steps are bitwise those of the ordinary step (DC-GAN with BatchNorm and Adam, a CNN
 * classifier with Adam and with SGD + momentum), the grad category's peak in a step is at
 * most D's gradients (GAN) or the largest layer's (classifier) while the ordinary step holds
 * every net's, the plan on the meta backend equals the measured step, and each refusal
 * names its key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "nn/net.h"
#include "plan/probe.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "train/session.h"
#include "train/trainer.h"

#define BATCH 32
#define NZ    16

static char dir[64];
static float host_x[BATCH * 32 * 32], host_z[BATCH * NZ];
static int32_t host_labels[BATCH];

static int suite_init(void) {
  snprintf(dir, sizeof dir, "/tmp/ganfw_sib_XXXXXX");
  if (!mkdtemp(dir)) return -1;
  gt_fill_uniform(host_x, BATCH * 32 * 32, -1, 1, 41);
  gt_fill_uniform(host_z, BATCH * NZ, -1.7f, 1.7f, 42);
  for (int i = 0; i < BATCH; i++) host_labels[i] = (i * 7) % 10;
  return 0;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

typedef struct sess {
  ganfw_run *run;
  ganfw_session *s;
  ganfw_gan *gan;
  ganfw_classifier *cls;
  ganfw_tensor *x, *z, *labels;
} sess;

static void sess_close(sess *o) {
  ganfw_tensor_destroy(o->x);
  ganfw_tensor_destroy(o->z);
  ganfw_tensor_destroy(o->labels);
  ganfw_gan_destroy(o->gan);
  ganfw_classifier_destroy(o->cls);
  ganfw_session_close(o->s);
  ganfw_run_close(o->run);
  memset(o, 0, sizeof *o);
}

static ganfw_tensor *upload(ganfw_session *s, int32_t dtype, const void *v, int32_t ndim,
                            const int64_t *shape, const char *name) {
  ganfw_tensor *t = ganfw_tensor_create(s->ctx, dtype, ndim, shape, GANFW_MEM_DATA, name);
  if (t && ganfw_tensor_from_host(t, v, t->nbytes) != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return NULL;
  }
  return t;
}

static const char *gan_body = "model: {plugin: dcgan, image_size: 32, channels: 1, nz: 16, ngf: "
                              "16, ndf: 16}\n"
                              "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n";
static const char *gan_adam8bit = "model: {plugin: dcgan, image_size: 32, channels: 1, nz: 16, "
                                  "ngf: 16, ndf: 16}\n"
                                  "optim: {plugin: adam8bit, lr: 2.0e-4, betas: [0.5, 0.999]}\n";
static const char *cnn_adam = "model: {plugin: cnn, blocks: [{channels: 8, kernel: 3, pool: max}, "
                              "{channels: 16, kernel: 3, pool: max}], linear: [32]}\n"
                              "optim: {plugin: adam, lr: 1.0e-3}\n";
static const char *cnn_sgd = "model: {plugin: cnn, blocks: [{channels: 8, kernel: 3, pool: max}, "
                             "{channels: 16, kernel: 3, pool: max}], linear: [32]}\n"
                             "optim: {plugin: sgd, lr: 0.05, momentum: 0.9, weight_decay: 1e-4}\n";

/* Writes a config of `body` (model and optim), `train` (extra train keys, "" none) and
 * `memory` (a whole line or ""), and returns its path (static storage). */
static const char *write_config(const char *body, const char *train, const char *memory) {
  static int k;
  static char path[128];
  snprintf(path, sizeof path, "%s/c%d.yaml", dir, k++);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fprintf(f,
          "seed: 1\ndevice: {type: cpu, threads: 2}\n%s"
          "train: {batch_size: %d, max_steps: 4%s}\n%s\n",
          body, BATCH, train, memory);
  fclose(f);
  return path;
}

static ganfw_status sess_open(sess *o, const char *body, const char *train, const char *memory) {
  memset(o, 0, sizeof *o);
  const int gan = body == gan_body || body == gan_adam8bit;
  ganfw_data_info info = {.struct_size = sizeof info,
                          .channels = 1,
                          .height = 32,
                          .width = 32,
                          .num_classes = gan ? 0 : 10};
  const char *path = write_config(body, train, memory);
  if (!path) return ganfw_error_set(GANFW_ERR_IO, "cannot write a config in %s", dir);
  ganfw_status st = ganfw_run_open_file(path, NULL, 0, &o->run);
  if (st == GANFW_OK) st = ganfw_session_open(o->run, 0, &info, &o->s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(o->run->config);
  if (st == GANFW_OK)
    st = gan ? ganfw_gan_create(o->s, &o->gan) : ganfw_classifier_create(o->s, &o->cls);
  if (st == GANFW_OK) {
    int64_t xs[4] = {BATCH, 1, 32, 32}, zs[4] = {BATCH, NZ, 1, 1}, ls[1] = {BATCH};
    o->x = upload(o->s, GANFW_DTYPE_F32, host_x, 4, xs, "real");
    o->z = upload(o->s, GANFW_DTYPE_F32, host_z, 4, zs, "noise");
    o->labels = upload(o->s, GANFW_DTYPE_I32, host_labels, 1, ls, "labels");
    if (!o->x || !o->z || !o->labels) st = ganfw_error_code();
  }
  if (st != GANFW_OK) sess_close(o);
  return st;
}

static void open_ok(sess *o, const char *body, const char *memory) {
  ganfw_status st = sess_open(o, body, "", memory);
  if (st != GANFW_OK) printf("\n  %s: %s\n", memory, ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
}

/* One step; returns the grad category's peak during it. */
static int64_t step_grad_peak(sess *o) {
  ganfw_alloc_reset_peak(o->s->ctx->alloc);
  ganfw_status st;
  if (o->gan) {
    ganfw_gan_stats gs;
    st = ganfw_gan_step(o->gan, o->x, o->z, &gs);
  } else {
    ganfw_classifier_stats cs;
    st = ganfw_classifier_step(o->cls, o->x, o->labels, &cs);
  }
  if (st != GANFW_OK) printf("\n  step: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_alloc_stats a;
  ganfw_alloc_get_stats(o->s->ctx->alloc, &a);
  return a.category[GANFW_MEM_GRAD].peak;
}

/* gt_net_bitwise without the gradients (step_in_backward released them): every weight,
 * BatchNorm statistic and counter. */
static int weights_bitwise(ganfw_net *a, ganfw_net *b) {
  int64_t n = ganfw_net_param_count(a);
  if (n != ganfw_net_param_count(b)) return 0;
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p}, q = {.struct_size = sizeof q};
    if (ganfw_net_param_info(a, i, &p) || ganfw_net_param_info(b, i, &q)) return 0;
    if (memcmp(p.value->data, q.value->data, (size_t)p.value->nbytes) != 0) {
      printf("\n  %s.%s differs\n", ganfw_net_name(a), p.name);
      return 0;
    }
  }
  ganfw_net_buffer x, y;
  for (int64_t i = 0; ganfw_net_buffer_at(a, i, &x); i++) {
    if (!ganfw_net_buffer_at(b, i, &y)) return 0;
    int eq = x.counter ? *x.counter == *y.counter
                       : memcmp(x.tensor->data, y.tensor->data, (size_t)x.tensor->nbytes) == 0;
    if (!eq) {
      printf("\n  %s.%s differs\n", ganfw_net_name(a), x.name);
      return 0;
    }
  }
  return 1;
}

/* All of a net's gradient bytes as the allocator counts them, and the largest layer's. */
static void grad_bytes(ganfw_net *net, int64_t *all, int64_t *largest) {
  *all = *largest = 0;
  for (int32_t i = 0; i < ganfw_net_layer_count(net); i++) {
    int64_t layer = 0;
    const char *name = ganfw_net_layer_name(net, i);
    for (int64_t p = 0; p < ganfw_net_param_count(net); p++) {
      ganfw_param_info info = {.struct_size = sizeof info};
      if (ganfw_net_param_info(net, p, &info) != GANFW_OK || !info.trainable || !info.grad)
        continue;
      size_t n = strlen(name);
      if (strncmp(info.name, name, n) == 0 && info.name[n] == '.')
        layer += (info.grad->nbytes + 511) / 512 * 512; /* the allocator rounds to 512 B */
    }
    *all += layer;
    if (layer > *largest) *largest = layer;
  }
}

/* A run of the ordinary step and one with step_in_backward from the same start: after each
 * of `steps` steps every weight, BatchNorm statistic and counter is bitwise equal; returns
 * the peaks of the last step. */
static void check_bitwise(const char *body, int steps, int64_t *peak_plain, int64_t *peak_sib) {
  sess p, c;
  open_ok(&p, body, "");
  open_ok(&c, body, "memory: [{plugin: step_in_backward}]");
  for (int step = 0; step < steps; step++) {
    *peak_plain = step_grad_peak(&p);
    *peak_sib = step_grad_peak(&c);
    int ok = p.gan ? weights_bitwise(p.s->generator, c.s->generator) &&
                         weights_bitwise(p.s->discriminator, c.s->discriminator)
                   : weights_bitwise(p.s->classifier, c.s->classifier);
    if (!ok) printf("\n  step %d differs from the ordinary step\n", step);
    CU_ASSERT(ok);
  }
  /* the optimizer's step counter moved as often (Adam's bias correction, resume) */
  CU_ASSERT_EQUAL(p.s->optim[0].vt->get_step(p.s->optim[0].self),
                  c.s->optim[0].vt->get_step(c.s->optim[0].self));
  if (p.gan) {
    int64_t g_all, g_max, d_all, d_max;
    grad_bytes(c.s->generator, &g_all, &g_max);
    grad_bytes(c.s->discriminator, &d_all, &d_max);
    printf("\n    GAN grad peak: ordinary %.3f MiB, step_in_backward %.3f MiB (D %.3f, G's "
           "largest layer %.3f)",
           *peak_plain / 1048576.0, *peak_sib / 1048576.0, d_all / 1048576.0, g_max / 1048576.0);
    CU_ASSERT_EQUAL(*peak_plain, g_all + d_all);
    CU_ASSERT(*peak_sib <= (d_all > g_max ? d_all : g_max));
  } else {
    int64_t all, max;
    grad_bytes(c.s->classifier, &all, &max);
    printf("\n    classifier grad peak: ordinary %.3f MiB, step_in_backward %.3f MiB (largest "
           "layer %.3f)",
           *peak_plain / 1048576.0, *peak_sib / 1048576.0, max / 1048576.0);
    CU_ASSERT_EQUAL(*peak_plain, all);
    CU_ASSERT(*peak_sib <= max);
  }
  sess_close(&p);
  sess_close(&c);
}

static void test_gan_bitwise(void) {
  int64_t a, b;
  check_bitwise(gan_body, 4, &a, &b);
  CU_ASSERT(b < a);
}

/* adam8bit's step in parts: its 8-bit slots (the 16x32x4x4 convolutions and up) quantise
 * the same bits per parameter as in one step. */
static void test_gan_adam8bit_bitwise(void) {
  int64_t a, b;
  check_bitwise(gan_adam8bit, 4, &a, &b);
  CU_ASSERT(b < a);
}

static void test_classifier_adam_bitwise(void) {
  int64_t a, b;
  check_bitwise(cnn_adam, 4, &a, &b);
  CU_ASSERT(b < a);
}

static void test_classifier_sgd_bitwise(void) {
  int64_t a, b;
  check_bitwise(cnn_sgd, 4, &a, &b);
  CU_ASSERT(b < a);
}

/* The planner's grad peak (meta backend) equals the measured one, and so does the whole
 * step's allocated peak. */
static void test_plan_matches(void) {
  const char *path = write_config(gan_body, "", "memory: [{plugin: step_in_backward}]");
  CU_ASSERT_PTR_NOT_NULL_FATAL(path);
  const ganfw_run_config *cfg = gt_config(path, NULL, 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 32, .width = 32};
  ganfw_probe_options o = {.meta = 1, .warmup = 1, .steps = 1, .info = &info};
  ganfw_probe_result plan, real;
  ganfw_status st = ganfw_probe_run(cfg, &o, &plan);
  if (st != GANFW_OK) printf("\n  plan: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  o.meta = 0;
  CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(cfg, &o, &real), GANFW_OK);
  printf("\n    plan grad peak %.3f MiB, measured %.3f MiB",
         plan.peak_category[GANFW_MEM_GRAD] / 1048576.0,
         real.peak_category[GANFW_MEM_GRAD] / 1048576.0);
  CU_ASSERT(plan.peak_category[GANFW_MEM_GRAD] > 0);
  CU_ASSERT_EQUAL(plan.peak_category[GANFW_MEM_GRAD], real.peak_category[GANFW_MEM_GRAD]);
  CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
}

static void expect_error(const char *body, const char *train, const char *memory, const char *want1,
                         const char *want2) {
  sess o;
  ganfw_error_clear();
  ganfw_status st = sess_open(&o, body, train, memory);
  CU_ASSERT_NOT_EQUAL(st, GANFW_OK);
  if (st == GANFW_OK) {
    sess_close(&o);
    printf("\n  %s %s: accepted\n", train, memory);
    return;
  }
  const char *msg = ganfw_error_message();
  int ok = strstr(msg, want1) && (!want2 || strstr(msg, want2));
  if (!ok) printf("\n  expected '%s'/'%s' in: %s\n", want1, want2 ? want2 : "", msg);
  CU_ASSERT(ok);
}

static void test_refusals(void) {
  const char *sib = "memory: [{plugin: step_in_backward}]";
  expect_error(gan_body, ", clip_grad_norm: 1.0", sib, "train.clip_grad_norm", "step_in_backward");
  expect_error(cnn_adam, ", clip_grad_norm: 1.0", sib, "train.clip_grad_norm", NULL);
  expect_error(gan_body, ", on_nonfinite: skip", sib, "train.on_nonfinite", "step_in_backward");
  expect_error(gan_body, "",
               "memory: [{plugin: step_in_backward}, {plugin: accumulate, micro_batches: 2}]",
               "accumulate", "step_in_backward");
  expect_error(gan_body, "",
               "memory: [{plugin: accumulate, micro_batches: 2}, {plugin: step_in_backward}]",
               "accumulate", "step_in_backward");
  expect_error(gan_body, "", "memory: [{plugin: step_in_backward}, {plugin: zero}]", "zero",
               "step_in_backward");
  expect_error(gan_body, "", "memory: [{plugin: amp, dtype: f16}, {plugin: step_in_backward}]",
               "loss scaler", "bf16");
}

/* f16 without a scaler and bf16 have no inf check over every gradient: accepted. */
static void test_bf16_accepted(void) {
  sess o;
  ganfw_status st = sess_open(&o, gan_body, "",
                              "memory: [{plugin: amp, dtype: bf16}, {plugin: step_in_backward}]");
  if (st != GANFW_OK) printf("\n  bf16: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  step_grad_peak(&o);
  step_grad_peak(&o);
  sess_close(&o);
}

static CU_TestInfo tests[] = {
    {"GAN: bitwise vs the ordinary step, grad peak <= D's", test_gan_bitwise},
    {"GAN with adam8bit: bitwise vs the ordinary step", test_gan_adam8bit_bitwise},
    {"classifier (adam): bitwise, grad peak <= largest layer", test_classifier_adam_bitwise},
    {"classifier (sgd momentum): bitwise, grad peak <= largest layer", test_classifier_sgd_bitwise},
    {"plan's grad peak equals the measured one", test_plan_matches},
    {"refusals name their key", test_refusals},
    {"amp bf16 runs with it", test_bf16_accepted},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("step_in_backward", tests, suite_init, suite_clean);
}
