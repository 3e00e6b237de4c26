/* Selective recompute in the executor (ganfw_net_recompute): a tape drops the outputs of the
 * chosen nodes and backward recomputes them from the kept ones. Against the run that keeps
 * everything: outputs, input and parameter gradients, weights after SGD steps, BatchNorm's
 * running statistics and counters are bitwise equal for every subset of dropped nodes of a
 * graph net (a residual add, a value read twice, an active dropout, a frozen prefix), in f32,
 * f16 and bf16; dropping holds fewer bytes after the forward. The planner's figures for a
 * plan are checked by tests/test_recompute_plan.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "nn/net.h"
#include "plan/probe.h"
#include "train/run.h"
#include "train/session.h"
#include "train/trainer.h"
#include "runtime/alloc.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"

#define BATCH  6
#define NOUT   5
#define NNODES 11

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

typedef struct outcome {
  unsigned char y[3][BATCH * NOUT * 4], dx[3][BATCH * 2 * 64 * 4];
  float params[4096], grads[4096], buffers[64];
  int64_t counters[4], n_params, n_buffers, n_counters;
  int64_t held_after_forward;
} outcome;

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

/* Three rounds of forward (tape), backward and SGD on a fresh net with the nodes of bit mask
 * `drop` dropped (drop < 0: no plan at all, the default), in compute dtype `dtype`, layers
 * [0, frozen) frozen (round 1 then asks for no input gradient). */
static void run(int32_t drop, int32_t dtype, int32_t frozen, outcome *o) {
  memset(o, 0, sizeof *o);
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = gt_graph_net(ctx);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, dtype), GANFW_OK);
  if (drop >= 0) {
    int32_t nodes[NNODES], n = 0;
    for (int32_t i = 0; i < NNODES - 1; i++)
      if (drop & (1 << i)) nodes[n++] = i;
    CU_ASSERT_EQUAL_FATAL(ganfw_net_recompute(net, nodes, n), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_net_recompute_plan(net, NULL, 0), n);
  }
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
    memcpy(o->y[round], y->data, (size_t)y->nbytes);
    int32_t flags = GANFW_BWD_PARAM_GRAD | (frozen > 0 && round == 1 ? 0 : GANFW_BWD_INPUT_GRAD);
    ganfw_status st = ganfw_net_backward(net, tape, dy, flags, &dx);
    if (st != GANFW_OK)
      printf("\n  drop %#x backward: %s\n", (unsigned)drop, ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    if (dx) memcpy(o->dx[round], dx->data, (size_t)dx->nbytes);
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

/* Every subset of the 10 droppable nodes in f32 (every 7th in f16 and bf16) agrees bit for
 * bit with keeping everything; dropping everything holds less after the forward. */
static void test_every_subset_bitwise(void) {
  static outcome ref, got;
  const int32_t dtypes[3] = {GANFW_DTYPE_F32, GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  for (int d = 0; d < 3; d++) {
    run(0, dtypes[d], 0, &ref);
    const int64_t kept_all = ref.held_after_forward;
    int bad = 0;
    for (int32_t mask = 1; mask < (1 << (NNODES - 1)); mask += d == 0 ? 1 : 7) {
      run(mask, dtypes[d], 0, &got);
      if (!same_outcome(&got, &ref)) {
        if (bad++ < 5)
          printf("\n  %s: dropping %#x differs from keeping everything",
                 ganfw_dtype_name(dtypes[d]), (unsigned)mask);
      }
      CU_ASSERT(ref.counters[0] == 3 && got.counters[0] == 3); /* no update in a recompute */
    }
    CU_ASSERT_EQUAL(bad, 0);
    run((1 << (NNODES - 1)) - 1, dtypes[d], 0, &got);
    printf("\n  %s: after the forward %lld bytes kept with the plan keeping all, %lld dropping all",
           ganfw_dtype_name(dtypes[d]), (long long)kept_all, (long long)got.held_after_forward);
    CU_ASSERT(got.held_after_forward < kept_all);
    run(-1, dtypes[d], 0, &got); /* the default (BatchNorm + activation rule) computes the same */
    CU_ASSERT(same_outcome(&got, &ref));
  }
}

/* A frozen prefix: a backward without the input gradient stops early and drops the holes and
 * kept values it does not reach. */
static void test_frozen(void) {
  static outcome ref, got;
  run(0, GANFW_DTYPE_F32, 3, &ref);
  for (int32_t mask = 1; mask < (1 << (NNODES - 1)); mask += 5) {
    run(mask, GANFW_DTYPE_F32, 3, &got);
    CU_ASSERT(same_outcome(&got, &ref));
  }
}

/* Bad plans: out of range, the output node, with checkpoint segments (either order). */
static void test_bad_plans(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = gt_graph_net(ctx);
  int32_t bad[1] = {NNODES - 1};
  CU_ASSERT_EQUAL(ganfw_net_recompute(net, bad, 1), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "always kept"));
  bad[0] = -1;
  CU_ASSERT_EQUAL(ganfw_net_recompute(net, bad, 1), GANFW_ERR_INVALID_ARG);
  const int32_t starts[1] = {3}, drop[1] = {1};
  CU_ASSERT_EQUAL(ganfw_net_checkpoint(net, starts, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_recompute(net, drop, 1), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "checkpoint segments"));
  CU_ASSERT_EQUAL(ganfw_net_checkpoint(net, NULL, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_recompute(net, drop, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_checkpoint(net, starts, 1), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(ganfw_net_recompute(net, NULL, -1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_recompute_plan(net, NULL, 0), -1);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* --- the DC-GAN-32 step (configs/dcgan.yaml's nets), batch 64, through the plugin ------- */

#define MIB    (1024.0 * 1024.0)
#define GBATCH 64
#define NZ     100

static char dir[64];
static float host_x[GBATCH * 32 * 32], host_z[GBATCH * NZ];

static int suite_init(void) {
  snprintf(dir, sizeof dir, "/tmp/ganfw_recompute_XXXXXX");
  if (!mkdtemp(dir)) return -1;
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

/* The DC-GAN config with the `memory:` line (or "") written into dir; its path in path. */
static void write_config(const char *memory, char *path, size_t cap) {
  static int k;
  snprintf(path, cap, "%s/c%d.yaml", dir, k++);
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
}

static ganfw_status sess_open(sess *o, const char *memory) {
  char path[128];
  write_config(memory, path, sizeof path);
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
  return st;
}

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

/* The planned (meta backend) and the measured step of a config: the activation and
 * allocated peaks. */
static void plan_and_measure(const char *memory, ganfw_probe_result *plan,
                             ganfw_probe_result *real) {
  char path[128];
  write_config(memory, path, sizeof path);
  ganfw_run_config *rc = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_run_config_open(path, NULL, 0, &rc), GANFW_OK);
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 32, .width = 32};
  for (int meta = 1; meta >= 0; meta--) {
    ganfw_probe_options opt = {.meta = meta, .warmup = 1, .steps = 1, .info = &info};
    ganfw_status st = ganfw_probe_run(rc, &opt, meta ? plan : real);
    if (st != GANFW_OK) printf("\n  probe '%s': %s\n", memory, ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  }
  ganfw_run_config_free(rc);
}

/* Two Adam steps with the strategy against the same config without it: losses, weights,
 * gradients, running statistics bitwise equal after each; the plan equals the measurement
 * to the byte. */
static void test_dcgan_bitwise_and_plan(void) {
  const struct {
    const char *base, *with;
  } pairs[] = {
      {"", "memory: [{plugin: recompute}]"},
      {"", "memory: [{plugin: recompute, budget: 12MiB}]"},
      {"", "memory: [{plugin: recompute, drop: {generator: [0, 1, 2, 3, 4, 5, 7, 8], "
           "discriminator: [0, 1, 3, 4, 6, 7]}}]"},
      {"", "memory: [{plugin: recompute, nets: [discriminator]}]"},
      {"memory: [{plugin: amp, dtype: f16}]",
       "memory: [{plugin: amp, dtype: f16}, {plugin: recompute}]"},
      {"memory: [{plugin: amp, dtype: bf16}]",
       "memory: [{plugin: amp, dtype: bf16}, {plugin: recompute, budget: 5MiB}]"},
      {"memory: [{plugin: accumulate, micro_batches: 2}]",
       "memory: [{plugin: accumulate, micro_batches: 2}, {plugin: recompute}]"},
  };
  for (size_t m = 0; m < sizeof pairs / sizeof pairs[0]; m++) {
    sess a, b;
    CU_ASSERT_EQUAL_FATAL(sess_open(&a, pairs[m].base), GANFW_OK);
    ganfw_status st = sess_open(&b, pairs[m].with);
    if (st != GANFW_OK) printf("\n  '%s': %s\n", pairs[m].with, ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    int64_t peak_a = 0, peak_b = 0;
    for (int step = 0; step < 2; step++) {
      ganfw_gan_stats sa, sb;
      int64_t pa = step_peak(&a, &sa), pb = step_peak(&b, &sb);
      if (step == 0) peak_a = pa, peak_b = pb;
      CU_ASSERT(sa.loss_d == sb.loss_d && sa.loss_g == sb.loss_g && sa.d_x == sb.d_x &&
                sa.d_g_z1 == sb.d_g_z1 && sa.d_g_z2 == sb.d_g_z2);
      int ok = gt_net_bitwise(a.s->generator, b.s->generator) &&
               gt_net_bitwise(a.s->discriminator, b.s->discriminator);
      if (!ok) printf("\n  '%s': step %d differs\n", pairs[m].with, step);
      CU_ASSERT(ok);
    }
    sess_close(&a);
    sess_close(&b);
    ganfw_probe_result plan, real;
    plan_and_measure(pairs[m].with, &plan, &real);
    printf("\n  '%s': 2 steps bitwise; activation peak %.2f MiB (without: %.2f MiB); plan "
           "%.2f MiB activation, %.2f MiB allocated, measured %.2f, %.2f",
           pairs[m].with, peak_b / MIB, peak_a / MIB,
           plan.peak_category[GANFW_MEM_ACTIVATION] / MIB, plan.peak_allocated / MIB,
           real.peak_category[GANFW_MEM_ACTIVATION] / MIB, real.peak_allocated / MIB);
    CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
    CU_ASSERT_EQUAL(plan.peak_category[GANFW_MEM_ACTIVATION],
                    real.peak_category[GANFW_MEM_ACTIVATION]);
    ganfw_probe_result_free(&plan);
    ganfw_probe_result_free(&real);
  }
  printf("\n");
}

/* Bad config entries: each a config error naming the key. */
static void test_bad_config(void) {
  const struct {
    const char *memory, *needle;
  } cases[] = {
      {"memory: [{plugin: recompute, budget: 1MiB}]", "raise budget to at least"},
      {"memory: [{plugin: recompute, budget: 12 parsecs}]", "budget"},
      {"memory: [{plugin: recompute, drop: {generator: [main.99]}}]", "drop.generator[0]"},
      {"memory: [{plugin: recompute, drop: {generator: [12]}}]", "drop.generator[0]"},
      {"memory: [{plugin: recompute, nets: [critic]}]", "nets[0] is 'critic'"},
      {"memory: [{plugin: recompute, nets: [generator], drop: {discriminator: [1]}}]",
       "drop.discriminator is given"},
      {"memory: [{plugin: checkpoint}, {plugin: recompute}]", "cannot both apply"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    sess o;
    ganfw_status st = sess_open(&o, cases[k].memory);
    const char *msg = ganfw_error_message();
    printf("\n  '%s': %s", cases[k].memory, msg);
    CU_ASSERT_NOT_EQUAL(st, GANFW_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, cases[k].needle));
    sess_close(&o);
  }
  printf("\n");
}

int main(void) {
  CU_TestInfo tests[] = {
      {"graph net: every dropped subset = keeping everything, bitwise (f32, f16, bf16)",
       test_every_subset_bitwise},
      {"frozen prefix", test_frozen},
      {"bad plans name the net and the rule", test_bad_plans},
      {"DC-GAN-32 batch 64: 2 Adam steps bitwise, plan = measured", test_dcgan_bitwise_and_plan},
      {"bad config entries name the key", test_bad_config},
      CU_TEST_INFO_NULL,
  };
  return gt_run_fixture("recompute", tests, suite_init, suite_clean);
}
