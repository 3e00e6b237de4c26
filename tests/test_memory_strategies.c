/* The checkpoint and accumulate memory strategies on DC-GAN 32x32, batch 64, measured by
 * the allocator on the CPU: peak activation bytes of one training step against the plain
 * run from the same seed, weights, real batch and noise; checkpointing keeps gradients,
 * weights and BatchNorm statistics bitwise; accumulation without BatchNorm gives the
 * full-batch gradients; the plugins' config errors; the A/B configs in configs/. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "nn/net.h"
#include "train/session.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "train/trainer.h"

#define BATCH 64
#define NZ    100

static char dir[64];
static float host_x[BATCH * 32 * 32], host_z[BATCH * NZ];

static int suite_init(void) {
  /* One convolution algorithm for every batch size: the CPU runs the big 4x4 stride-2
   * layers with Winograd kernels only where they fit im2col's workspace (the batch of 64,
   * not accumulate's micro-batches of 16), and the two round differently, which the
   * accumulate-vs-full-batch comparison below would measure instead of accumulation */
  if (setenv("GANFW_CONV_IM2COL", "1", 1) != 0) return -1;
  snprintf(dir, sizeof dir, "/tmp/ganfw_memstrat_XXXXXX");
  if (!mkdtemp(dir)) return -1;
  gt_fill_uniform(host_x, BATCH * 32 * 32, -1, 1, 31);
  gt_fill_uniform(host_z, BATCH * NZ, -1.7f, 1.7f, 32);
  return 0;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* One session of a config, its step working set and the batch. */
typedef struct sess {
  ganfw_run *run;
  ganfw_session *s;
  ganfw_gan *gan;
  ganfw_tensor *x, *z;
} sess;

static void sess_close(sess *o) {
  ganfw_tensor_destroy(o->x);
  ganfw_tensor_destroy(o->z);
  ganfw_gan_destroy(o->gan);
  ganfw_session_close(o->s);
  ganfw_run_close(o->run);
  memset(o, 0, sizeof *o);
}

static ganfw_tensor *upload(ganfw_session *s, const float *v, int32_t ndim, const int64_t *shape,
                            const char *name) {
  ganfw_tensor *t = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_DATA, name);
  if (t && ganfw_tensor_from_host(t, v, t->nbytes) != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return NULL;
  }
  return t;
}

/* Opens a session of the DC-GAN config with BatchNorm on or off and the `memory:` YAML
 * (a whole line, or ""), or of `path` when not NULL; checks that every key was read. */
static ganfw_status sess_open_file(sess *o, const char *path) {
  memset(o, 0, sizeof *o);
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 32, .width = 32};
  ganfw_status st = ganfw_run_open_file(path, NULL, 0, &o->run);
  if (st == GANFW_OK) st = ganfw_session_open(o->run, 0, &info, &o->s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(o->run->config);
  if (st == GANFW_OK) st = ganfw_gan_create(o->s, &o->gan);
  if (st == GANFW_OK) {
    int64_t xs[4] = {BATCH, 1, 32, 32}, zs[4] = {BATCH, NZ, 1, 1};
    o->x = upload(o->s, host_x, 4, xs, "real");
    o->z = upload(o->s, host_z, 4, zs, "noise");
    if (!o->x || !o->z) st = ganfw_error_code();
  }
  if (st != GANFW_OK) sess_close(o);
  return st;
}

static ganfw_status sess_open(sess *o, int batchnorm, const char *memory) {
  static int k;
  char path[128];
  snprintf(path, sizeof path, "%s/c%d.yaml", dir, k++);
  FILE *f = fopen(path, "w");
  if (!f) return ganfw_error_set(GANFW_ERR_IO, "cannot write %s", path);
  fprintf(f,
          "seed: 1\n"
          "device: {type: cpu, threads: 2}\n"
          "model: {plugin: dcgan, image_size: 32, channels: 1, nz: %d, ngf: 64, ndf: 64,"
          " batchnorm: %s}\n"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
          "train: {batch_size: %d, max_steps: 1}\n"
          "%s\n",
          NZ, batchnorm ? "true" : "false", BATCH, memory);
  fclose(f);
  return sess_open_file(o, path);
}

static void open_ok(sess *o, int batchnorm, const char *memory) {
  ganfw_status st = sess_open(o, batchnorm, memory);
  if (st != GANFW_OK) printf("\n  %s: %s\n", memory, ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
}

/* One full training step; returns the peak activation bytes during it. */
static int64_t step_peak(sess *o, ganfw_gan_stats *gs) {
  ganfw_alloc_reset_peak(o->s->ctx->alloc);
  ganfw_status st = ganfw_gan_step(o->gan, o->x, o->z, gs);
  if (st != GANFW_OK) printf("\n  step: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_alloc_stats a;
  ganfw_alloc_get_stats(o->s->ctx->alloc, &a);
  CU_ASSERT_EQUAL(a.category[GANFW_MEM_ACTIVATION].current, 0);
  return a.category[GANFW_MEM_ACTIVATION].peak;
}

/* A run with `base` (the plain run: "") and one with `memory` from the same start, `steps`
 * steps each: checkpointing changes no bit of the losses, gradients, weights, running
 * statistics or counters. `micro`: the base's micro-batches. `base_keeps_all` 1: the base
 * runs with the executor's BatchNorm + activation recomputation off (its tapes keep every
 * activation output, as when the checkpoint targets were set; the variant keeps it on, so
 * the two are also compared bitwise across it). Returns peak(variant) / peak(base) of the
 * first step. */
static double check_bitwise_vs(const char *base, int micro, const char *memory, int32_t g_starts,
                               int32_t d_starts, int steps, int32_t base_keeps_all) {
  sess p, c;
  open_ok(&p, 1, base);
  open_ok(&c, 1, memory);
  if (base_keeps_all) {
    ganfw_net_set_bn_act_recompute(p.s->generator, 0);
    ganfw_net_set_bn_act_recompute(p.s->discriminator, 0);
  }
  CU_ASSERT_EQUAL(ganfw_net_checkpoint_layout(c.s->generator, NULL, 0), g_starts);
  CU_ASSERT_EQUAL(ganfw_net_checkpoint_layout(c.s->discriminator, NULL, 0), d_starts);
  double ratio = 0;
  for (int step = 0; step < steps; step++) {
    ganfw_gan_stats gp, gc;
    int64_t peak_p = step_peak(&p, &gp), peak_c = step_peak(&c, &gc);
    if (step == 0) ratio = (double)peak_c / (double)peak_p;
    CU_ASSERT(gp.loss_d == gc.loss_d && gp.loss_g == gc.loss_g && gp.d_x == gc.d_x &&
              gp.d_g_z1 == gc.d_g_z1 && gp.d_g_z2 == gc.d_g_z2);
    int ok = gt_net_bitwise(p.s->generator, c.s->generator) &&
             gt_net_bitwise(p.s->discriminator, c.s->discriminator);
    if (!ok) printf("\n  %s: step %d differs from the plain run\n", memory, step);
    CU_ASSERT(ok);
  }
  /* one BatchNorm update per forward, none for the recomputation: D sees real, fake and
   * the G step's fake per step, G its no-grad and its taped forward */
  ganfw_net_buffer b;
  CU_ASSERT_FATAL(ganfw_net_buffer_at(c.s->discriminator, 2, &b) && b.counter);
  CU_ASSERT_EQUAL(*b.counter, 3 * steps * micro);
  CU_ASSERT_FATAL(ganfw_net_buffer_at(c.s->generator, 2, &b) && b.counter);
  CU_ASSERT_EQUAL(*b.counter, 2 * steps * micro);
  sess_close(&p);
  sess_close(&c);
  return ratio;
}

static double check_bitwise(const char *memory, int32_t g_starts, int32_t d_starts, int steps) {
  return check_bitwise_vs("", 1, memory, g_starts, d_starts, steps, 0);
}

/* The target: segments 2 on both nets, peak activations <= 0.6x of the plain run
 * that keeps every activation output (14.50 of 25.26 MiB; the executor's BatchNorm +
 * activation recomputation alone brings the plain run to 18.26 MiB, and checkpointing
 * still saves on top of it). */
static void test_checkpoint_two_segments(void) {
  const char *ckpt = "memory: [{plugin: checkpoint, segments: 2}]";
  double ratio = check_bitwise_vs("", 1, ckpt, 1, 1, 2, 1);
  double ratio_now = check_bitwise(ckpt, 1, 1, 1);
  sess c;
  open_ok(&c, 1, "memory: [{plugin: checkpoint}]"); /* segments default 2, every net */
  int32_t g[2] = {0}, d[2] = {0};
  CU_ASSERT_EQUAL(ganfw_net_checkpoint_layout(c.s->generator, g, 2), 1);
  CU_ASSERT_EQUAL(ganfw_net_checkpoint_layout(c.s->discriminator, d, 2), 1);
  CU_ASSERT_EQUAL(g[0], 6); /* ceil(11/2): layers 0-5 and 6-10 */
  CU_ASSERT_EQUAL(d[0], 5); /* ceil(9/2): layers 0-4 and 5-8 */
  sess_close(&c);
  printf("\n  checkpoint segments=2 (G and D): peak activations %.3f of the plain run keeping "
         "every output (target <= 0.6), %.3f of the default plain run, gradients, weights and "
         "BatchNorm statistics bitwise equal\n",
         ratio, ratio_now);
  CU_ASSERT(ratio <= 0.6);
  CU_ASSERT(ratio_now < 1.0);
}

/* Other layouts, explicit boundaries, one net only, one segment (off), and checkpointing
 * combined with accumulation and with AMP (bitwise as those alone). */
static void test_checkpoint_layouts(void) {
  const struct {
    const char *memory;
    int32_t g, d;
  } cases[] = {
      {"memory: [{plugin: checkpoint, boundaries: {generator: [3, 9], discriminator: [2, 5, 8]}}]",
       2, 3},
      {"memory: [{plugin: checkpoint, boundaries: {generator: [main.3, main.9]}}]", 2, 1},
      {"memory: [{plugin: checkpoint, segments: 4, nets: [discriminator]}]", 0, 3},
      {"memory: [{plugin: checkpoint, segments: 3, nets: [generator],"
       " boundaries: {generator: [1]}}]",
       1, 0},
      {"memory: [{plugin: checkpoint, segments: 1}]", 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double ratio = check_bitwise(cases[i].memory, cases[i].g, cases[i].d, 1);
    printf("\n  %s: peak activations %.3f of the plain run", cases[i].memory, ratio);
    CU_ASSERT(cases[i].g + cases[i].d > 0 ? ratio < 1.0 : ratio == 1.0);
  }
  /* with accumulation: each micro-batch runs checkpointed, bitwise as accumulation alone */
  double ratio = check_bitwise_vs(
      "memory: [{plugin: accumulate, steps: 4}]", 4,
      "memory: [{plugin: accumulate, steps: 4}, {plugin: checkpoint, segments: 2}]", 1, 1, 1, 0);
  printf("\n  accumulate steps=4 + checkpoint segments=2: peak activations %.3f of accumulate "
         "alone\n",
         ratio);
  CU_ASSERT(ratio < 1.0);
  /* with AMP: f16 activations are kept and recomputed the same way */
  ratio =
      check_bitwise_vs("memory: [{plugin: amp}]", 1,
                       "memory: [{plugin: amp}, {plugin: checkpoint, segments: 2}]", 1, 1, 2, 1);
  printf("\n  amp + checkpoint segments=2: peak activations %.3f of amp alone (keeping every "
         "output)\n",
         ratio);
  CU_ASSERT(ratio <= 0.6);
}

/* The target: steps 4 of a batch of 64, peak activations <= 0.3x. BatchNorm then
 * normalises over each micro-batch of 16 and updates its running statistics once per
 * micro-batch. */
static void test_accumulate_peak(void) {
  sess p, a;
  open_ok(&p, 1, "");
  open_ok(&a, 1, "memory: [{plugin: accumulate, steps: 4}]");
  CU_ASSERT_EQUAL(a.s->exec.micro_batches, 4);
  ganfw_gan_stats gp, ga;
  int64_t peak_p = step_peak(&p, &gp), peak_a = step_peak(&a, &ga);
  double ratio = (double)peak_a / (double)peak_p;
  printf("\n  accumulate steps=4: peak activations %.3f of the plain batch of 64 (target <= "
         "0.3); %.2f MiB vs %.2f MiB\n",
         ratio, peak_a / 1048576.0, peak_p / 1048576.0);
  CU_ASSERT(ratio <= 0.3);
  CU_ASSERT(isfinite(ga.loss_d) && isfinite(ga.loss_g));
  ganfw_net_buffer bp, ba;
  CU_ASSERT_FATAL(ganfw_net_buffer_at(p.s->discriminator, 2, &bp) && bp.counter);
  CU_ASSERT_FATAL(ganfw_net_buffer_at(a.s->discriminator, 2, &ba) && ba.counter);
  CU_ASSERT_EQUAL(*bp.counter, 3);
  CU_ASSERT_EQUAL(*ba.counter, 12);
  sess_close(&p);
  sess_close(&a);
}

/* Gradient differences of a net against a reference, worst over its tensors: element-wise
 * max |a - b| / max(|b|, 1e-3 * max|b|), and norm-relative ||a - b|| / ||b||. */
typedef struct grad_err {
  double elem, norm;
} grad_err;

static grad_err grad_rel_err(ganfw_net *got, ganfw_net *want) {
  grad_err worst = {0, 0};
  for (int64_t i = 0; i < ganfw_net_param_count(want); i++) {
    ganfw_param_info p = {.struct_size = sizeof p}, q = {.struct_size = sizeof q};
    CU_ASSERT_FATAL(!ganfw_net_param_info(got, i, &p) && !ganfw_net_param_info(want, i, &q));
    const float *g = p.grad->data, *w = q.grad->data;
    double gmax = 0, dd = 0, ww = 0;
    for (int64_t k = 0; k < q.grad->numel; k++) {
      gmax = fmax(gmax, fabs(w[k]));
      dd += ((double)g[k] - w[k]) * ((double)g[k] - w[k]);
      ww += (double)w[k] * w[k];
    }
    worst.elem = fmax(worst.elem, gt_max_rel_err(g, w, q.grad->numel, 1e-3 * gmax));
    worst.norm = fmax(worst.norm, sqrt(dd / fmax(ww, 1e-300)));
  }
  return worst;
}

static void copy_weights(ganfw_net *to, ganfw_net *from) {
  for (int64_t i = 0; i < ganfw_net_param_count(from); i++) {
    ganfw_param_info p = {.struct_size = sizeof p}, q = {.struct_size = sizeof q};
    CU_ASSERT_FATAL(!ganfw_net_param_info(to, i, &p) && !ganfw_net_param_info(from, i, &q));
    memcpy(p.value->data, q.value->data, (size_t)q.value->nbytes);
  }
}

/* The batch's samples in reverse order: the same gradients up to f32 summation order. */
static void reverse_batch(sess *o) {
  static float rx[BATCH * 32 * 32], rz[BATCH * NZ];
  for (int i = 0; i < BATCH; i++) {
    memcpy(rx + i * 1024, host_x + (BATCH - 1 - i) * 1024, 1024 * sizeof(float));
    memcpy(rz + i * NZ, host_z + (BATCH - 1 - i) * NZ, NZ * sizeof(float));
  }
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(o->x, rx, o->x->nbytes), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(o->z, rz, o->z->nbytes), GANFW_OK);
}

/* Without BatchNorm every sample is independent, so 4 micro-batches of 16 with the loss
 * divided by 4 give the gradients of the batch of 64 up to f32 summation order. D's from
 * the D step; G's from the G step, after D has been given the plain run's updated weights
 * (Adam's first step moves a weight by ~lr whatever the size of its gradient, so
 * rounding-level gradient differences would otherwise show up in G's).
 * Tolerances: each tensor within 1e-5 norm-relative. Element-wise (floor 1e-3 of the
 * tensor's max |grad|) f32 summation order alone moves small gradients by ~1e-4 here:
 * the plain batch with its samples in reverse order (mathematically the same gradients)
 * is measured as the rounding baseline, and the accumulated run must stay within 3x of it
 * (a lost micro-batch or a wrong 1/N would be off by 0.25 or more). */
static void test_accumulate_equals_full_batch(void) {
  sess p, a, r;
  open_ok(&p, 0, "");
  open_ok(&a, 0, "memory: [{plugin: accumulate, steps: 4}]");
  open_ok(&r, 0, "");
  reverse_batch(&r);
  ganfw_net_buffer b;
  CU_ASSERT_FALSE(ganfw_net_buffer_at(p.s->discriminator, 0, &b)); /* no BatchNorm */
  ganfw_gan_stats gp = {0}, ga = {0}, gr = {0};
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_d_step(p.gan, p.x, p.z, &gp), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_d_step(a.gan, a.x, a.z, &ga), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_d_step(r.gan, r.x, r.z, &gr), GANFW_OK);
  grad_err d_acc = grad_rel_err(a.s->discriminator, p.s->discriminator);
  grad_err d_rev = grad_rel_err(r.s->discriminator, p.s->discriminator);
  copy_weights(a.s->discriminator, p.s->discriminator);
  copy_weights(r.s->discriminator, p.s->discriminator);
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_g_step(p.gan, p.z, &gp), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_g_step(a.gan, a.z, &ga), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_gan_g_step(r.gan, r.z, &gr), GANFW_OK);
  grad_err g_acc = grad_rel_err(a.s->generator, p.s->generator);
  grad_err g_rev = grad_rel_err(r.s->generator, p.s->generator);
  double loss_err = fmax(fabs(ga.loss_d - gp.loss_d) / fabs(gp.loss_d),
                         fabs(ga.loss_g - gp.loss_g) / fabs(gp.loss_g));
  printf("\n  accumulate steps=4 without BatchNorm vs the full batch of 64: gradients within "
         "%.2g (D) and %.2g (G) norm-relative (target 1e-5); element-wise (floor 1e-3 of max "
         "|grad|) %.2g (D) and %.2g (G), against %.2g and %.2g for the same batch in reverse "
         "order; losses %.2g\n",
         d_acc.norm, g_acc.norm, d_acc.elem, g_acc.elem, d_rev.elem, g_rev.elem, loss_err);
  CU_ASSERT(d_acc.norm <= 1e-5);
  CU_ASSERT(g_acc.norm <= 1e-5);
  CU_ASSERT(d_acc.elem <= fmax(1e-5, 3 * d_rev.elem));
  CU_ASSERT(g_acc.elem <= fmax(1e-5, 3 * g_rev.elem));
  CU_ASSERT(loss_err <= 1e-5);
  sess_close(&p);
  sess_close(&a);
  sess_close(&r);
}

static void expect_error(int batchnorm, const char *memory, const char *want1, const char *want2) {
  sess o;
  ganfw_error_clear();
  ganfw_status st = sess_open(&o, batchnorm, memory);
  CU_ASSERT_NOT_EQUAL(st, GANFW_OK);
  if (st == GANFW_OK) {
    sess_close(&o);
    printf("\n  %s: accepted\n", memory);
    return;
  }
  const char *msg = ganfw_error_message();
  int ok = strstr(msg, want1) && (!want2 || strstr(msg, want2));
  if (!ok) printf("\n  expected '%s'/'%s' in: %s\n", want1, want2 ? want2 : "", msg);
  CU_ASSERT(ok);
}

static void test_config_errors(void) {
  expect_error(1, "memory: [{plugin: checkpoint, segments: 0}]", "segments is 0", NULL);
  expect_error(1, "memory: [{plugin: checkpoint, segments: 12}]", "segments is 12",
               "generator has only 11 layers");
  expect_error(0, "memory: [{plugin: checkpoint, segments: 8, nets: [discriminator]}]",
               "segments is 8", "discriminator has only 7 layers");
  expect_error(1, "memory: [{plugin: checkpoint, nets: [critic]}]", "nets[0] is 'critic'", NULL);
  expect_error(1, "memory: [{plugin: checkpoint, nets: []}]", "nets is empty", NULL);
  expect_error(1, "memory: [{plugin: checkpoint, nets: generator}]", "nets", "list");
  expect_error(1, "memory: [{plugin: checkpoint, boundaries: {discriminator: [6, 3]}}]",
               "boundaries.discriminator[1] is 3", "increase strictly");
  expect_error(1, "memory: [{plugin: checkpoint, boundaries: {discriminator: [0]}}]",
               "boundaries.discriminator[0] is 0", NULL);
  expect_error(1, "memory: [{plugin: checkpoint, boundaries: {discriminator: [9]}}]",
               "boundaries.discriminator[0] is 9", "9 layers");
  expect_error(1, "memory: [{plugin: checkpoint, boundaries: {discriminator: []}}]",
               "boundaries.discriminator is empty", NULL);
  expect_error(1, "memory: [{plugin: checkpoint, boundaries: {discriminator: [main.2, mian.5]}}]",
               "boundaries.discriminator[1] is 'mian.5'", "names no layer");
  expect_error(1,
               "memory: [{plugin: checkpoint, nets: [discriminator],"
               " boundaries: {generator: [3]}}]",
               "boundaries.generator is set", "nets does not name");
  expect_error(1, "memory: [{plugin: checkpoint, boundaries: {discriminatr: [3]}}]", "discriminatr",
               NULL);
  expect_error(1, "memory: [{plugin: checkpoint, segmnts: 3}]", "segmnts", NULL);
  expect_error(1, "memory: [{plugin: accumulate, steps: 0}]", "steps is 0", NULL);
  expect_error(1, "memory: [{plugin: accumulate, steps: 3}]", "3 micro-batches",
               "train.batch_size 64");
  expect_error(1, "memory: [{plugin: accumulate, steps: 2}, {plugin: accumulate, steps: 2}]",
               "already splits", NULL);
  expect_error(1, "memory: [{plugin: accumulate, steps: two}]", "steps", NULL);
}

/* configs/dcgan_accum.yaml and configs/dcgan_ckpt.yaml: each changes dcgan.yaml by its
 * memory line (and out_dir), and every key is read. */
static void test_configs(void) {
  const char *src = getenv("GANFW_SOURCE_DIR");
  char path[1024];
  sess o;
  snprintf(path, sizeof path, "%s/configs/dcgan_accum.yaml", src ? src : "..");
  ganfw_status st = sess_open_file(&o, path);
  if (st != GANFW_OK) printf("\n  %s: %s\n", path, ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(o.s->exec.micro_batches, 4);
  CU_ASSERT_EQUAL(o.s->train.batch_size, 64);
  CU_ASSERT_EQUAL(ganfw_net_checkpoint_layout(o.s->generator, NULL, 0), 0);
  sess_close(&o);
  snprintf(path, sizeof path, "%s/configs/dcgan_ckpt.yaml", src ? src : "..");
  st = sess_open_file(&o, path);
  if (st != GANFW_OK) printf("\n  %s: %s\n", path, ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(o.s->exec.micro_batches, 1);
  CU_ASSERT_EQUAL(ganfw_net_checkpoint_layout(o.s->generator, NULL, 0), 1);
  CU_ASSERT_EQUAL(ganfw_net_checkpoint_layout(o.s->discriminator, NULL, 0), 1);
  sess_close(&o);
}

static CU_TestInfo tests[] = {
    {"checkpoint segments=2: <= 0.6x activations, bitwise", test_checkpoint_two_segments},
    {"checkpoint layouts, with accumulate, with amp", test_checkpoint_layouts},
    {"accumulate steps=4: <= 0.3x activations", test_accumulate_peak},
    {"accumulate without BatchNorm equals the full batch", test_accumulate_equals_full_batch},
    {"config errors name the key", test_config_errors},
    {"configs/dcgan_accum.yaml and dcgan_ckpt.yaml", test_configs},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("memory strategies", tests, suite_init, suite_clean);
}
