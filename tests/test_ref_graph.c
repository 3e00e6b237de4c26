/* Graph nets (ABI 1.3: net_input, net_add, net_concat) against PyTorch 1.13
 * (tests/ref/gen_graph.py): a net where the input feeds two nodes, an in-place ReLU's
 * input also feeds a concat, a residual add and a three-way concat meet, forward and
 * backward within 1e-5 relative in f32, and in f16/bf16 against f32; a node reading one
 * value twice. Then what the executor promises: values freed after their last reader
 * (nothing left after a step), checkpoint segments on a graph (bitwise the gradients of the
 * run without, BatchNorm statistics updated once, cuts where two tensors would cross
 * refused naming the node), the plan equal to the measured step, and the errors a bad graph
 * ends with (a cycle, a misspelt name, mismatched shapes, a node that feeds nothing). */
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

static gt_ref *ref;
static const ganfw_host *host;

static ganfw_ctx *new_ctx(int32_t meta) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 5, .meta = meta};
  ganfw_ctx *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c), GANFW_OK);
  return c;
}

/* The residual/concat graph of gen_graph.py, built through the host table. */
static ganfw_net *graph_net(ganfw_ctx *c, const char *name) {
  CU_ASSERT_FATAL(GANFW_HOST_HAS(host, net_concat));
  ganfw_net *net = host->net_create(c, name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(net);
  const char *add_in[2] = {"c2", "sc"};
  const char *cat_in[3] = {"r2", "r1", "a"};
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c1", 3, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_activation(net, "r1", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c2", 4, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_input(net, "input"), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_conv2d(net, "sc", 3, 4, 1, 1, 0, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_add(net, "a", add_in, 2), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_activation(net, "r2", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_concat(net, "cat", cat_in, 3), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_upsample(net, "up", 2, GANFW_UPSAMPLE_NEAREST), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_batchnorm2d(net, "bn", 12, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c3", 12, 2, 3, 2, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, 3, 6, 6), GANFW_OK);
  return net;
}

/* y = c(x) + c(x) read as one value twice. */
static ganfw_net *dup_net(ganfw_ctx *c) {
  ganfw_net *net = host->net_create(c, "dup");
  const char *in[2] = {"c", "c"};
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c", 2, 5, 1, 1, 0, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_add(net, "twice", in, 2), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, 2, 4, 4), GANFW_OK);
  return net;
}

static ganfw_tensor *ref_tensor(ganfw_ctx *c, const char *key, int32_t dtype) {
  int64_t shape[8];
  int ndim = 0;
  const float *v = gt_ref_f32(ref, key, NULL, shape, &ndim);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  ganfw_tensor *t = ganfw_tensor_create(c, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_DATA, key);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(t, v, t->nbytes), GANFW_OK);
  ganfw_tensor *d = ganfw_tensor_as_dtype(t, dtype, GANFW_MEM_DATA);
  ganfw_tensor_destroy(t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  return d;
}

/* One run of net `prefix` in `dtype`: output and input gradient; the net stays built. */
typedef struct run_out {
  ganfw_ctx *ctx;
  ganfw_net *net;
  ganfw_tensor *y, *dx;
} run_out;

static void run_free(run_out *r) {
  ganfw_tensor_destroy(r->y);
  ganfw_tensor_destroy(r->dx);
  ganfw_net_destroy(r->net);
  ganfw_ctx_destroy(r->ctx);
  memset(r, 0, sizeof *r);
}

static void run(const char *prefix, int32_t dtype, run_out *r) {
  char key[64];
  r->ctx = new_ctx(0);
  r->net = strcmp(prefix, "g") == 0 ? graph_net(r->ctx, "g") : dup_net(r->ctx);
  gt_ref_load_params(ref, r->net, prefix);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(r->net, dtype), GANFW_OK);
  snprintf(key, sizeof key, "%s_x", prefix);
  ganfw_tensor *x = ref_tensor(r->ctx, key, GANFW_DTYPE_F32);
  snprintf(key, sizeof key, "%s_dy", prefix);
  ganfw_tensor *dy = ref_tensor(r->ctx, key, dtype);
  ganfw_tape *tape = ganfw_tape_create(r->net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(r->net, x, tape, &r->y), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(r->net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &r->dx),
      GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r->dx);
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(dy);
}

static void check(const char *what, const float *got, const char *key, int64_t n, double floor) {
  int64_t m = 0;
  const float *want = gt_ref_f32(ref, key, &m, NULL, NULL);
  CU_ASSERT_FATAL(want && m == n);
  double e = gt_check_close(what, got, want, n, 1e-5, floor);
  printf("\n    %-28s max rel err %.2e", what, e);
}

/* Output, input gradient, every parameter gradient and BatchNorm's running statistics. */
static void check_against_torch(const char *prefix) {
  run_out r = {0};
  run(prefix, GANFW_DTYPE_F32, &r);
  char key[96];
  snprintf(key, sizeof key, "%s_y", prefix);
  /* sums of ~100 terms of size ~1 in f32: relative to values of at least 0.5 */
  check(key, r.y->data, key, r.y->numel, 0.5);
  snprintf(key, sizeof key, "%s_dx", prefix);
  check(key, r.dx->data, key, r.dx->numel, 0.5);
  for (int64_t i = 0; i < host->net_param_count(r.net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(host->net_param_info(r.net, i, &p), GANFW_OK);
    snprintf(key, sizeof key, "%s_d%s", prefix, p.name);
    check(key, p.grad->data, key, p.grad->numel, 1.0);
  }
  ganfw_net_buffer b;
  for (int64_t i = 0; ganfw_net_buffer_at(r.net, i, &b); i++) {
    if (!b.tensor) continue;
    snprintf(key, sizeof key, "%s_%s", prefix, b.name);
    check(key, b.tensor->data, key, b.tensor->numel, 1e-2);
  }
  run_free(&r);
}

static void test_graph_f32(void) {
  check_against_torch("g");
  check_against_torch("dup");
}

/* f16 and bf16 against f32 on the same net: f16 within the amp tests' executor tolerance
 * everywhere; bf16 (8 significant bits) within 3e-2 on the output and 1e-1 on the
 * gradients, which come back through a BatchNorm over 2 samples; the biases of the convs
 * before it are left out in bf16: their gradients are sums that cancel to near zero (a
 * BatchNorm's input gradient sums to zero per channel), so any rounding is large against
 * them. */
static void test_graph_16bit(void) {
  run_out r32 = {0};
  run("g", GANFW_DTYPE_F32, &r32);
  const int32_t dtypes[2] = {GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  const double tols[2] = {5e-3, 3e-2}, grad_tols[2] = {5e-3, 1e-1};
  for (int k = 0; k < 2; k++) {
    run_out r = {0};
    run("g", dtypes[k], &r);
    CU_ASSERT_EQUAL(r.y->dtype, dtypes[k]);
    double ey = gt_tensor_norm_rel(r.y, r32.y), edx = gt_tensor_norm_rel(r.dx, r32.dx);
    printf("\n    %s: y %.2e (tol %.0e), dx %.2e (tol %.0e)", ganfw_dtype_name(dtypes[k]), ey,
           tols[k], edx, grad_tols[k]);
    CU_ASSERT(ey < tols[k]);
    CU_ASSERT(edx < grad_tols[k]);
    for (int64_t i = 0; i < host->net_param_count(r.net); i++) {
      ganfw_param_info a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
      CU_ASSERT_EQUAL(host->net_param_info(r.net, i, &a), GANFW_OK);
      CU_ASSERT_EQUAL(host->net_param_info(r32.net, i, &b), GANFW_OK);
      if (dtypes[k] == GANFW_DTYPE_BF16 && strstr(a.name, ".bias") && a.name[0] != 'b' &&
          strcmp(a.name, "c3.bias") != 0)
        continue;
      double e = gt_tensor_norm_rel(a.grad, b.grad);
      if (!(e < grad_tols[k])) printf("\n    %s %s: %.2e", ganfw_dtype_name(dtypes[k]), a.name, e);
      CU_ASSERT(e < grad_tols[k]);
    }
    run_free(&r);
  }
  run_free(&r32);
}

/* After a step and a no-grad forward, only the parameters and the caller's tensors are
 * left: the executor released every value after its last reader and every record. */
static void test_nothing_left(void) {
  run_out r = {0};
  run("g", GANFW_DTYPE_F32, &r);
  ganfw_tensor *y2 = NULL;
  ganfw_tensor *x = ref_tensor(r.ctx, "g_x", GANFW_DTYPE_F32);
  CU_ASSERT_EQUAL(ganfw_net_forward(r.net, x, NULL, &y2), GANFW_OK);
  ganfw_tensor_destroy(y2);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(r.y);
  ganfw_tensor_destroy(r.dx);
  r.y = r.dx = NULL;
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(r.ctx->alloc, &st);
  CU_ASSERT_EQUAL(st.category[GANFW_MEM_ACTIVATION].current, 0);
  CU_ASSERT_EQUAL(st.category[GANFW_MEM_WORKSPACE].current, 0);
  run_free(&r);
}

/* --- checkpoint segments on a graph ------------------------------------------------------ */

/* A straight stem (nodes 0-2), two residual blocks (conv-bn-relu-conv-bn + identity, add,
 * relu: nodes 3-9 and 10-16) and a head (17-20): a segment may start at a block's first
 * node or at its final relu, not inside it. */
static ganfw_net *res_net(ganfw_ctx *c) {
  ganfw_net *net = host->net_create(c, "res");
  CU_ASSERT_EQUAL(host->net_conv2d(net, "stem", 2, 4, 3, 1, 1, 0), GANFW_OK); /* 0 */
  CU_ASSERT_EQUAL(host->net_batchnorm2d(net, "stem_bn", 4, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_activation(net, "stem_relu", GANFW_ACT_RELU, 0), GANFW_OK);
  const char *prev = "stem_relu";
  for (int b = 0; b < 2; b++) {
    char n[6][16];
    const char *suffix[6] = {"conv1", "bn1", "relu1", "conv2", "bn2", "add"};
    for (int k = 0; k < 6; k++) snprintf(n[k], sizeof n[k], "b%d.%s", b, suffix[k]);
    CU_ASSERT_EQUAL(host->net_conv2d(net, n[0], 4, 4, 3, 1, 1, 0), GANFW_OK); /* 3, 10 */
    CU_ASSERT_EQUAL(host->net_batchnorm2d(net, n[1], 4, 1e-5f, 0.1f), GANFW_OK);
    CU_ASSERT_EQUAL(host->net_activation(net, n[2], GANFW_ACT_RELU, 0), GANFW_OK);
    CU_ASSERT_EQUAL(host->net_conv2d(net, n[3], 4, 4, 3, 1, 1, 0), GANFW_OK);
    CU_ASSERT_EQUAL(host->net_batchnorm2d(net, n[4], 4, 1e-5f, 0.1f), GANFW_OK);
    const char *in[2] = {NULL, prev};
    CU_ASSERT_EQUAL(host->net_add(net, n[5], in, 2), GANFW_OK);
    char r[16];
    snprintf(r, sizeof r, "b%d.relu", b);
    CU_ASSERT_EQUAL(host->net_activation(net, r, GANFW_ACT_RELU, 0), GANFW_OK);
    prev = b == 0 ? "b0.relu" : "b1.relu";
  }
  CU_ASSERT_EQUAL(host->net_global_avg_pool(net, "pool"), GANFW_OK); /* 17 */
  CU_ASSERT_EQUAL(host->net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_dropout(net, "drop", 0.3f), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_linear(net, "fc", 4, 3, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, 2, 5, 5), GANFW_OK);
  return net;
}

/* One training step of res_net with checkpoint starts[0..n); the gradients, dx and the
 * BatchNorm statistics into host buffers (caller frees). */
typedef struct step_out {
  float *grads, *stats, *dx;
  int64_t n_grads, n_stats, n_dx;
} step_out;

static void res_step(const int32_t *starts, int32_t n, step_out *o) {
  ganfw_ctx *c = new_ctx(0);
  ganfw_net *net = res_net(c);
  CU_ASSERT_EQUAL_FATAL(host->net_checkpoint(net, starts, n), GANFW_OK);
  const int64_t xs[4] = {3, 2, 5, 5}, ys[2] = {3, 3};
  ganfw_tensor *x = ganfw_tensor_create(c, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *dy = ganfw_tensor_create(c, GANFW_DTYPE_F32, 2, ys, GANFW_MEM_DATA, "dy");
  float *hx = gt_alloc((size_t)x->nbytes);
  gt_fill_uniform(hx, x->numel, -1, 1, 11);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(x, hx, x->nbytes), GANFW_OK);
  gt_fill_uniform(hx, dy->numel, -1, 1, 12);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(dy, hx, dy->nbytes), GANFW_OK);
  gt_free(hx);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *y = NULL, *dx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx),
      GANFW_OK);
  o->n_grads = o->n_stats = 0;
  for (int64_t i = 0; i < host->net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    host->net_param_info(net, i, &p);
    o->n_grads += p.grad->numel;
  }
  ganfw_net_buffer b;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++)
    o->n_stats += b.tensor ? b.tensor->numel : 1;
  o->grads = gt_alloc((size_t)o->n_grads * 4);
  o->stats = gt_alloc((size_t)o->n_stats * 4);
  o->n_dx = dx->numel;
  o->dx = gt_alloc((size_t)dx->nbytes);
  memcpy(o->dx, dx->data, (size_t)dx->nbytes);
  int64_t off = 0;
  for (int64_t i = 0; i < host->net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    host->net_param_info(net, i, &p);
    memcpy(o->grads + off, p.grad->data, (size_t)p.grad->nbytes);
    off += p.grad->numel;
  }
  off = 0;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++) {
    if (b.tensor) {
      memcpy(o->stats + off, b.tensor->data, (size_t)b.tensor->nbytes);
      off += b.tensor->numel;
    } else {
      o->stats[off++] = (float)*b.counter;
    }
  }
  ganfw_tensor *all[] = {x, dy, y, dx};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ganfw_tensor_destroy(all[i]);
  ganfw_tape_destroy(tape);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

static void step_free(step_out *o) {
  gt_free(o->grads);
  gt_free(o->stats);
  gt_free(o->dx);
}

static void test_checkpoint_graph(void) {
  step_out plain, ck;
  res_step(NULL, 0, &plain);
  const int32_t starts[3] = {3, 10, 17};
  res_step(starts, 3, &ck);
  CU_ASSERT_EQUAL_FATAL(plain.n_grads, ck.n_grads);
  CU_ASSERT(memcmp(plain.grads, ck.grads, (size_t)plain.n_grads * 4) == 0);
  CU_ASSERT(memcmp(plain.dx, ck.dx, (size_t)plain.n_dx * 4) == 0);
  /* the re-run left the running statistics (and num_batches_tracked = 1) alone */
  CU_ASSERT(memcmp(plain.stats, ck.stats, (size_t)plain.n_stats * 4) == 0);
  step_free(&plain);
  step_free(&ck);

  ganfw_ctx *c = new_ctx(0);
  ganfw_net *net = res_net(c);
  CU_ASSERT_EQUAL(host->net_layer_index(net, "b1.conv1"), 10);
  CU_ASSERT_EQUAL(host->net_layer_index(net, "nope"), -1);
  CU_ASSERT_EQUAL(host->net_layer_index(net, "input"), -1);
  int32_t ok[20] = {0};
  for (int32_t s = 1; s < 21; s++) ok[s - 1] = host->net_cut_ok(net, s);
  /* inside a block, the block's input crosses too */
  const int32_t want[20] = {1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  CU_ASSERT(memcmp(ok, want, sizeof ok) == 0);
  CU_ASSERT_EQUAL(host->net_cut_ok(net, 0), 0);
  CU_ASSERT_EQUAL(host->net_cut_ok(net, 21), 0);
  const int32_t bad[1] = {5};
  CU_ASSERT_EQUAL(host->net_checkpoint(net, bad, 1), GANFW_ERR_INVALID_ARG);
  const char *msg = ganfw_error_message();
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "layer 5 (b0.relu1)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "b0.add"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "stem_relu"));
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* --- the plan counts a graph's bytes ----------------------------------------------------- */

static void graph_step(int32_t meta, int32_t dtype, int32_t ckpt, ganfw_alloc_stats *st) {
  ganfw_ctx *c = new_ctx(meta);
  ganfw_net *net = graph_net(c, "g");
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, dtype), GANFW_OK);
  const int32_t starts[2] = {7, 9}; /* at the upsample and at c3 */
  if (ckpt) CU_ASSERT_EQUAL_FATAL(host->net_checkpoint(net, starts, 2), GANFW_OK);
  const int64_t xs[4] = {64, 3, 6, 6}, ys[4] = {64, 2, 6, 6};
  ganfw_tensor *x = ganfw_tensor_create(c, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *dy = ganfw_tensor_create(c, dtype, 4, ys, GANFW_MEM_DATA, "dy");
  CU_ASSERT_FATAL(x && dy);
  if (!meta) {
    float *hx = gt_alloc((size_t)x->nbytes);
    gt_fill_uniform(hx, x->numel, -1, 1, 3);
    CU_ASSERT_EQUAL(ganfw_tensor_from_host(x, hx, x->nbytes), GANFW_OK);
    memset(dy->data, 0, (size_t)dy->nbytes);
    gt_free(hx);
  }
  ganfw_alloc_reset_peak(c->alloc);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *y = NULL, *dx = NULL, *y2 = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, tape, &y), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx),
      GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y2), GANFW_OK);
  ganfw_alloc_get_stats(c->alloc, st);
  ganfw_tensor *all[] = {y, dx, y2, x, dy};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ganfw_tensor_destroy(all[i]);
  ganfw_tape_destroy(tape);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

static void test_plan_graph(void) {
  const int32_t dtypes[2] = {GANFW_DTYPE_F32, GANFW_DTYPE_BF16};
  for (int k = 0; k < 2; k++)
    for (int32_t ckpt = 0; ckpt < 2; ckpt++) {
      ganfw_alloc_stats plan, real;
      graph_step(1, dtypes[k], ckpt, &plan);
      graph_step(0, dtypes[k], ckpt, &real);
      printf("\n    %s%s: plan %lld B, measured %lld B", ganfw_dtype_name(dtypes[k]),
             ckpt ? " checkpointed" : "", (long long)plan.allocated.peak,
             (long long)real.allocated.peak);
      CU_ASSERT(plan.allocated.peak > 0);
      CU_ASSERT_EQUAL(plan.allocated.peak, real.allocated.peak);
      CU_ASSERT_EQUAL(plan.reserved.peak, real.reserved.peak);
      CU_ASSERT_EQUAL(plan.num_allocs, real.num_allocs);
      for (int32_t cat = 0; cat < GANFW_MEM_COUNT; cat++)
        CU_ASSERT_EQUAL(plan.category[cat].peak, real.category[cat].peak);
    }
}

/* --- bad graphs -------------------------------------------------------------------------- */

static void expect_build_error(ganfw_net *net, const char *p1, const char *p2) {
  CU_ASSERT_EQUAL(host->net_build(net, 3, 8, 8), GANFW_ERR_INVALID_ARG);
  const char *m = ganfw_error_message();
  if (!strstr(m, p1) || (p2 && !strstr(m, p2))) printf("\n    unexpected message: %s", m);
  CU_ASSERT_PTR_NOT_NULL(strstr(m, p1));
  if (p2) CU_ASSERT_PTR_NOT_NULL(strstr(m, p2));
}

static void test_errors(void) {
  ganfw_ctx *c = new_ctx(0);
  ganfw_net *net;
  /* a cycle: a reads b, b reads a */
  net = host->net_create(c, "cyc");
  host->net_input(net, "b");
  host->net_conv2d(net, "a", 3, 3, 3, 1, 1, 0);
  host->net_conv2d(net, "b", 3, 3, 3, 1, 1, 0);
  expect_build_error(net, "layer a (conv2d)", "cycle");
  ganfw_net_destroy(net);
  /* a node reading itself */
  net = host->net_create(c, "self");
  const char *self_in[2] = {NULL, "s"};
  host->net_conv2d(net, "c", 3, 3, 3, 1, 1, 0);
  host->net_add(net, "s", self_in, 2);
  expect_build_error(net, "layer s (add)", "cycle");
  ganfw_net_destroy(net);
  /* an input appended later, without a cycle */
  net = host->net_create(c, "order");
  host->net_conv2d(net, "a", 3, 3, 3, 1, 1, 0);
  const char *late[2] = {"a", "z"};
  host->net_add(net, "sum", late, 2);
  host->net_input(net, "a");
  host->net_conv2d(net, "z", 3, 3, 3, 1, 1, 0);
  expect_build_error(net, "layer sum (add)", "append 'z' first");
  ganfw_net_destroy(net);
  /* a misspelt name, with a suggestion */
  net = host->net_create(c, "typo");
  host->net_conv2d(net, "conv1", 3, 3, 3, 1, 1, 0);
  host->net_input(net, "cnov1");
  host->net_activation(net, "act", GANFW_ACT_RELU, 0);
  expect_build_error(net, "input 'cnov1'", "did you mean 'conv1'");
  ganfw_net_destroy(net);
  /* add of two shapes */
  net = host->net_create(c, "shapes");
  host->net_conv2d(net, "wide", 3, 4, 3, 1, 1, 0);
  host->net_input(net, "input");
  host->net_conv2d(net, "narrow", 3, 2, 3, 1, 1, 0);
  const char *pair[2] = {"wide", "narrow"};
  host->net_add(net, "sum", pair, 2);
  expect_build_error(net, "layer shapes.sum (add)", "[1,4,8,8] but narrow is [1,2,8,8]");
  ganfw_net_destroy(net);
  /* concat of two sizes */
  net = host->net_create(c, "cat");
  host->net_conv2d(net, "full", 3, 4, 3, 1, 1, 0);
  host->net_input(net, "input");
  host->net_conv2d(net, "half", 3, 2, 3, 2, 1, 0);
  const char *cat[2] = {"full", "half"};
  host->net_concat(net, "joined", cat, 2);
  expect_build_error(net, "layer cat.joined (concat)", "half is [1,2,4,4]");
  ganfw_net_destroy(net);
  /* a node nobody reads */
  net = host->net_create(c, "dead");
  host->net_conv2d(net, "used", 3, 3, 3, 1, 1, 0);
  host->net_conv2d(net, "orphan", 3, 3, 3, 1, 1, 0);
  host->net_input(net, "used");
  host->net_activation(net, "out", GANFW_ACT_RELU, 0);
  expect_build_error(net, "layer orphan (conv2d)", "feeds nothing");
  ganfw_net_destroy(net);
  /* net_input left dangling, "input" as a layer name, a join of one input */
  net = host->net_create(c, "misc");
  CU_ASSERT_EQUAL(host->net_conv2d(net, "input", 3, 3, 3, 1, 1, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "net's input"));
  const char *one[1] = {"x"};
  CU_ASSERT_EQUAL(host->net_add(net, "a1", one, 1), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "2 to 16 inputs"));
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c", 3, 3, 3, 1, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_input(net, "c"), GANFW_OK);
  expect_build_error(net, "net_input('c') was not followed", NULL);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

static int init(void) {
  host = ganfw_host_table();
  ref = gt_ref_open("graph");
  return ref ? 0 : 1;
}

static int cleanup(void) {
  gt_ref_close(ref);
  return 0;
}

static CU_TestInfo tests[] = {{"graph against torch, f32", test_graph_f32},
                              {"graph in f16 and bf16", test_graph_16bit},
                              {"every value released", test_nothing_left},
                              {"checkpoint segments on a graph", test_checkpoint_graph},
                              {"plan equals measure on a graph", test_plan_graph},
                              {"bad graphs", test_errors},
                              CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("ref_graph", tests, init, cleanup);
}
