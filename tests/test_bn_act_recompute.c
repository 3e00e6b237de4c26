/* BatchNorm + activation recomputation in the executor (ganfw_net_set_bn_act_recompute): a
 * tape keeps BatchNorm's input and statistics but not the activation's output, which
 * backward recomputes. Against the same runs with it switched off: outputs, input and
 * parameter gradients, weights after Adam steps, running statistics and counters are
 * bitwise equal, in f32, f16 and bf16, with checkpoint segments, an output read by two
 * nodes, dropout after the activation and frozen layers; the tape holds fewer bytes; the
 * planned DC-GAN-32 step (configs/dcgan.yaml) has the lower activation peak. BatchNorm's
 * backward writing its input gradient over its output gradient gives the same bits as a
 * tensor of its own, with fewer requests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/ops.h"
#include "base/error.h"
#include "nn/net.h"
#include "runtime/alloc.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "tools/plan.h"
#include "train/session.h"
#include "train/trainer.h"

#define MIB (1024.0 * 1024.0)

/* --- a graph net, forward and backward ------------------------------------------------- */

#define BATCH 6
#define NOUT  5

static ganfw_ctx *make_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 7};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  return ctx;
}

static int64_t allocated(ganfw_ctx *ctx, int32_t category) {
  ganfw_alloc_stats s;
  ganfw_alloc_get_stats(ctx->alloc, &s);
  return category < 0 ? s.allocated.current : s.category[category].current;
}

/* What a run produces, on the host (f32 views of f16/bf16 outputs are compared as bytes). */
typedef struct outcome {
  unsigned char y[3][BATCH * NOUT * 4], dx[3][BATCH * 2 * 64 * 4];
  float params[4096], grads[4096], buffers[64];
  int64_t counters[4], n_params, n_buffers, n_counters;
  int64_t held_after_forward;
  int64_t backward_allocs; /* the allocator's successful requests in round 0's backward */
} outcome;

/* 1: run() puts the CPU backend behind a copy of its table whose supports() says no to
 * BatchNorm's backward in place (GANFW_OP_IN_PLACE), so that BatchNorm's input gradient gets
 * its own tensor. */
static int32_t no_bn_in_place;
static const ganfw_backend_vt *cpu_vt;
static ganfw_backend_vt cpu_vt_copy;
static ganfw_backend cpu_copy;

static int32_t supports_not_in_place(ganfw_backend *be, const ganfw_op *op) {
  if (op->kind == GANFW_OP_BATCHNORM2D_BACKWARD && (op->flags & GANFW_OP_IN_PLACE)) return 0;
  return cpu_vt->supports(be, op);
}

static void collect(ganfw_net *net, outcome *o) {
  o->n_params = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &p), GANFW_OK);
    CU_ASSERT_FATAL(o->n_params + p.value->numel <= 4096);
    memcpy(o->params + o->n_params, p.value->data, (size_t)p.value->nbytes);
    if (p.grad) memcpy(o->grads + o->n_params, p.grad->data, (size_t)p.grad->nbytes);
    o->n_params += p.value->numel;
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

/* Three rounds of forward (tape), backward and SGD on a fresh net, recompute on or off, in
 * compute dtype `dtype`, with checkpoint segment starts[0..n) (n < 0: none) and layers
 * [0, frozen) frozen (then round 1 asks for no input gradient). */
static void run(int32_t recompute, int32_t dtype, const int32_t *starts, int32_t n, int32_t frozen,
                outcome *o) {
  memset(o, 0, sizeof *o);
  ganfw_ctx *ctx = make_ctx();
  if (no_bn_in_place) {
    cpu_vt = ctx->be->vt;
    cpu_vt_copy = *cpu_vt;
    cpu_vt_copy.supports = supports_not_in_place;
    cpu_copy = (ganfw_backend){.vt = &cpu_vt_copy, .impl = ctx->be->impl};
    ctx->be = &cpu_copy;
  }
  ganfw_net *net = gt_graph_net(ctx);
  ganfw_net_set_bn_act_recompute(net, recompute);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, dtype), GANFW_OK);
  if (n >= 0) CU_ASSERT_EQUAL_FATAL(ganfw_net_checkpoint(net, starts, n), GANFW_OK);
  if (frozen > 0) CU_ASSERT_EQUAL_FATAL(ganfw_net_freeze(net, 0, frozen), GANFW_OK);
  int64_t xs[4] = {BATCH, 2, 8, 8}, ds[2] = {BATCH, NOUT};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *dy = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 2, ds, GANFW_MEM_OTHER, "dy");
  CU_ASSERT_FATAL(x && dy);
  gt_fill_uniform(x->data, x->numel, -1, 1, 11);
  gt_fill_uniform(dy->data, dy->numel, -1, 1, 12);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_net_zero_grad(net);
  for (int round = 0; round < 3; round++) {
    ganfw_tensor *y = NULL, *dx = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
    if (round == 0) o->held_after_forward = allocated(ctx, GANFW_MEM_ACTIVATION);
    CU_ASSERT_FATAL(y->nbytes <= (int64_t)sizeof o->y[round]);
    memcpy(o->y[round], y->data, (size_t)y->nbytes);
    int32_t flags = GANFW_BWD_PARAM_GRAD | (frozen > 0 && round == 1 ? 0 : GANFW_BWD_INPUT_GRAD);
    ganfw_alloc_stats before, after;
    ganfw_alloc_get_stats(ctx->alloc, &before);
    ganfw_status st = ganfw_net_backward(net, tape, dy, flags, &dx);
    ganfw_alloc_get_stats(ctx->alloc, &after);
    if (round == 0) o->backward_allocs = after.num_allocs - before.num_allocs;
    if (st != GANFW_OK) printf("\n  backward: %s\n", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    if (dx) {
      CU_ASSERT_FATAL(dx->nbytes <= (int64_t)sizeof o->dx[round]);
      memcpy(o->dx[round], dx->data, (size_t)dx->nbytes);
    }
    ganfw_tensor_destroy(dx);
    ganfw_tensor_destroy(y);
    if (round < 2) gt_net_sgd(net, 0.05f);
    CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_ACTIVATION), 0);
    CU_ASSERT_EQUAL(allocated(ctx, GANFW_MEM_WORKSPACE), 0);
  }
  collect(net, o);
  ganfw_tensor_destroy(dy);
  ganfw_tensor_destroy(x);
  ganfw_tape_destroy(tape);
  ganfw_net_destroy(net);
  CU_ASSERT_EQUAL(allocated(ctx, -1), 0);
  ganfw_ctx_destroy(ctx);
}

static int same_outcome(const outcome *a, const outcome *b) {
  return memcmp(a->y, b->y, sizeof a->y) == 0 && memcmp(a->dx, b->dx, sizeof a->dx) == 0 &&
         a->n_params == b->n_params &&
         memcmp(a->params, b->params, (size_t)a->n_params * sizeof(float)) == 0 &&
         memcmp(a->grads, b->grads, (size_t)a->n_params * sizeof(float)) == 0 &&
         a->n_buffers == b->n_buffers &&
         memcmp(a->buffers, b->buffers, (size_t)a->n_buffers * sizeof(float)) == 0 &&
         memcmp(a->counters, b->counters, sizeof a->counters) == 0;
}

/* On and off agree bit for bit in every dtype and checkpoint layout (segments cutting
 * between BatchNorm and its activation, after the activation, inside a pair's readers);
 * without checkpointing the tape holds less after the forward. */
static void test_graph_bitwise(void) {
  static outcome off, on;
  const int32_t dtypes[3] = {GANFW_DTYPE_F32, GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  const struct {
    int32_t n, starts[3];
  } layouts[] = {{-1, {0}}, {1, {2}}, {1, {3}}, {1, {6}}, {2, {3, 7}}, {3, {1, 5, 9}}};
  for (int d = 0; d < 3; d++)
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
      run(0, dtypes[d], layouts[k].starts, layouts[k].n, 0, &off);
      run(1, dtypes[d], layouts[k].starts, layouts[k].n, 0, &on);
      int ok = same_outcome(&on, &off);
      if (!ok)
        printf("\n  %s, layout %zu: recompute on differs from off\n", ganfw_dtype_name(dtypes[d]),
               k);
      CU_ASSERT(ok);
      CU_ASSERT(off.counters[0] == 3 && on.counters[0] == 3); /* no update in a recompute */
      if (layouts[k].n < 0) {
        /* the two released outputs, [6,4,8,8] each, in the compute dtype */
        const int64_t released = 2 * BATCH * 4 * 64 * (dtypes[d] == GANFW_DTYPE_F32 ? 4 : 2);
        CU_ASSERT(off.held_after_forward - on.held_after_forward >= released);
      }
    }
}

/* BatchNorm's backward writes its input gradient over its output gradient when nothing else
 * holds it (the CPU's kernel allows dx == dy): the same bits as with a tensor of its own, in
 * every dtype and with recomputation on or off, and fewer requests in backward. */
static void test_bn_backward_in_place(void) {
  static outcome own, in_place;
  const int32_t dtypes[3] = {GANFW_DTYPE_F32, GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  for (int d = 0; d < 3; d++)
    for (int32_t recompute = 0; recompute < 2; recompute++) {
      no_bn_in_place = 1;
      run(recompute, dtypes[d], NULL, -1, 0, &own);
      no_bn_in_place = 0;
      run(recompute, dtypes[d], NULL, -1, 0, &in_place);
      printf("\n  %s, recompute %d: backward requests %lld with dx over dy, %lld without",
             ganfw_dtype_name(dtypes[d]), (int)recompute, (long long)in_place.backward_allocs,
             (long long)own.backward_allocs);
      CU_ASSERT(same_outcome(&in_place, &own));
      /* b0 and b1: one input-gradient tensor each fewer */
      CU_ASSERT_EQUAL(own.backward_allocs - in_place.backward_allocs, 2);
    }
}

/* Frozen layers below the pairs: a backward without the input gradient stops early and
 * drops the released entries it does not reach. */
static void test_frozen(void) {
  static outcome off, on;
  run(0, GANFW_DTYPE_F32, NULL, -1, 3, &off);
  run(1, GANFW_DTYPE_F32, NULL, -1, 3, &on);
  CU_ASSERT(same_outcome(&on, &off));
}

/* --- the DC-GAN-32 step of configs/dcgan.yaml, batch 64 ------------------------------- */

#define GBATCH 64
#define NZ     100

static char dir[64];
static float host_x[GBATCH * 32 * 32], host_z[GBATCH * NZ];

static int suite_init(void) {
  snprintf(dir, sizeof dir, "/tmp/ganfw_bnact_XXXXXX");
  if (!mkdtemp(dir)) return -1;
  char mnist[96];
  snprintf(mnist, sizeof mnist, "%s/mnist", dir);
  if (mkdir(mnist, 0755) != 0 || gt_write_mnist(mnist, 200, 20, 5) != 0) return -1;
  gt_fill_uniform(host_x, GBATCH * 32 * 32, -1, 1, 31);
  gt_fill_uniform(host_z, GBATCH * NZ, -1.7f, 1.7f, 32);
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

/* A session of the DC-GAN config with the `memory:` line (or ""), recompute on or off in
 * both nets. */
static void sess_open(sess *o, const char *memory, int32_t recompute) {
  static int k;
  char path[128];
  snprintf(path, sizeof path, "%s/c%d.yaml", dir, k++);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 1\n"
          "device: {type: cpu, threads: 2}\n"
          "model: {plugin: dcgan, image_size: 32, channels: 1, nz: %d, ngf: 64, ndf: 64}\n"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
          "train: {batch_size: %d, max_steps: 1}\n"
          "%s\n",
          NZ, GBATCH, memory);
  fclose(f);
  memset(o, 0, sizeof *o);
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 32, .width = 32};
  ganfw_status st = ganfw_run_open_file(path, NULL, 0, &o->run);
  if (st == GANFW_OK) st = ganfw_session_open(o->run, 0, &info, &o->s);
  if (st == GANFW_OK) st = ganfw_gan_create(o->s, &o->gan);
  if (st == GANFW_OK) {
    int64_t xs[4] = {GBATCH, 1, 32, 32}, zs[4] = {GBATCH, NZ, 1, 1};
    o->x = upload(o->s, host_x, 4, xs, "real");
    o->z = upload(o->s, host_z, 4, zs, "noise");
    if (!o->x || !o->z) st = ganfw_error_code();
  }
  if (st != GANFW_OK) printf("\n  %s: %s\n", memory, ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_net_set_bn_act_recompute(o->s->generator, recompute);
  ganfw_net_set_bn_act_recompute(o->s->discriminator, recompute);
}

/* One training step; the peak activation bytes during it. */
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

/* Two Adam steps with recompute on and off from the same start: losses, weights,
 * gradients, running statistics and counters bitwise equal after each, in f32, f16, bf16
 * and with checkpointing; the step's activation peak is lower with it on. */
static void test_dcgan_steps_bitwise(void) {
  const char *memories[] = {
      "",
      "memory: [{plugin: amp, dtype: f16}]",
      "memory: [{plugin: amp, dtype: bf16}]",
      "memory: [{plugin: checkpoint, segments: 2}]",
      "memory: [{plugin: amp}, {plugin: checkpoint, segments: 2}]",
  };
  for (size_t m = 0; m < sizeof memories / sizeof memories[0]; m++) {
    sess off, on;
    sess_open(&off, memories[m], 0);
    sess_open(&on, memories[m], 1);
    int64_t peak_off = 0, peak_on = 0;
    for (int step = 0; step < 2; step++) {
      ganfw_gan_stats a, b;
      int64_t p_off = step_peak(&off, &a), p_on = step_peak(&on, &b);
      if (step == 0) peak_off = p_off, peak_on = p_on;
      CU_ASSERT(a.loss_d == b.loss_d && a.loss_g == b.loss_g && a.d_x == b.d_x &&
                a.d_g_z1 == b.d_g_z1 && a.d_g_z2 == b.d_g_z2);
      int ok = gt_net_bitwise(off.s->generator, on.s->generator) &&
               gt_net_bitwise(off.s->discriminator, on.s->discriminator);
      if (!ok) printf("\n  '%s': step %d differs with recompute on\n", memories[m], step);
      CU_ASSERT(ok);
    }
    printf("\n  '%s': 2 steps bitwise; peak activations %.2f MiB (off: %.2f MiB)", memories[m],
           peak_on / MIB, peak_off / MIB);
    CU_ASSERT(peak_on <= peak_off);
    if (m == 0) { /* f32: 25.26 -> 18.26 MiB (0.75 of PyTorch's 24.3 MiB saved) */
      CU_ASSERT(peak_off > 25.0 * MIB);
      CU_ASSERT(peak_on <= 18.3 * MIB);
    }
    if (m == 1) CU_ASSERT(peak_on <= 9.2 * MIB); /* f16: 12.63 -> 9.13 MiB */
    sess_close(&off);
    sess_close(&on);
  }
  printf("\n");
}

/* The plan of configs/dcgan.yaml (the meta backend runs the same executor): the G step's
 * activation peak drops from 25.26 to 18.26 MiB (target <= 19.4), the D step's does not
 * rise, and the allocated peak drops by the same 7 MiB. */
static void test_dcgan_plan(void) {
  char path[4200];
  snprintf(path, sizeof path, "%s/configs/dcgan.yaml", getenv("GANFW_SOURCE_DIR"));
  char data_set[128];
  snprintf(data_set, sizeof data_set, "data.path=%s/mnist", dir);
  const char *sets[] = {data_set};
  ganfw_probe_result on, off;
  ganfw_status st = ganfw_plan_make(gt_config(path, sets, 1), 0, NULL, &on);
  if (st != GANFW_OK) printf("\n  plan: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(setenv("GANFW_BN_ACT_RECOMPUTE", "0", 1), 0);
  st = ganfw_plan_make(gt_config(path, sets, 1), 0, NULL, &off);
  unsetenv("GANFW_BN_ACT_RECOMPUTE");
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(on.n_phases, 2);
  const double g_on = on.phase[GANFW_PHASE_G].category[GANFW_MEM_ACTIVATION] / MIB;
  const double g_off = off.phase[GANFW_PHASE_G].category[GANFW_MEM_ACTIVATION] / MIB;
  const double d_on = on.phase[GANFW_PHASE_D].category[GANFW_MEM_ACTIVATION] / MIB;
  const double d_off = off.phase[GANFW_PHASE_D].category[GANFW_MEM_ACTIVATION] / MIB;
  printf("\n  plan of configs/dcgan.yaml: activation peak G step %.2f MiB (off %.2f), D step "
         "%.2f MiB (off %.2f); allocated peak %.2f MiB (off %.2f)\n",
         g_on, g_off, d_on, d_off, on.peak_allocated / MIB, off.peak_allocated / MIB);
  CU_ASSERT(g_off > 25.2);
  CU_ASSERT(g_on <= 18.3);
  CU_ASSERT(d_on <= d_off);
  CU_ASSERT(off.peak_allocated - on.peak_allocated >= (int64_t)(6.9 * MIB));
  ganfw_probe_result_free(&on);
  ganfw_probe_result_free(&off);
}

int main(void) {
  CU_TestInfo tests[] = {
      {"graph net: on = off bitwise (f32, f16, bf16, checkpoint layouts)", test_graph_bitwise},
      {"frozen layers below the pairs", test_frozen},
      {"BatchNorm backward writes dx over dy: same bits, fewer requests",
       test_bn_backward_in_place},
      {"DC-GAN-32 batch 64: 2 Adam steps bitwise, lower peak", test_dcgan_steps_bitwise},
      {"DC-GAN-32 plan: G-step activation peak <= 18.3 MiB", test_dcgan_plan},
      CU_TEST_INFO_NULL,
  };
  return gt_run_fixture("bn_act_recompute", tests, suite_init, suite_clean);
}
