/* nn.Embedding and torch.nn.utils.spectral_norm against PyTorch 1.13 (tests/ref/
 * gen_embed_sn.py, references computed in f64 from the same f32 inputs), built through the
 * host table's ABI 1.3 entries and run on the CPU:
 *   embedding: output and weight gradient within 1e-5 relative (ids with repeats), zeros as
 *     the ids' gradient, the scatter-add bit for bit on 1 and 2 threads, f16/bf16 outputs;
 *     ids that are not whole numbers in [0, num) refused naming the layer and the sample.
 *   spectral norm on linear, conv2d (dim 0) and conv_transpose2d (dim 1): the state_dict
 *     loaded strictly by PyTorch's names, u and v after a training forward's power
 *     iterations, sigma, output, input gradient and weight_orig/bias gradients within 1e-5,
 *     also for two training forwards before one backward (a GAN's D on real and fake); eval
 *     and a train forward with frozen statistics run no power iteration; f16/bf16 compute
 *     against f32, through the converting path and through a backend's native 16-bit
 *     ops (a test backend); a checkpointed net's gradients bit for bit those of the plain
 *     one; u and v in the buffers, the checkpoint file and a skipped step's snapshot; bad
 *     uses refused.
 *   the backend ops behind them: transpose01 and the embedding scatter-add's accumulate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/ops.h"
#include "base/error.h"
#include "io/checkpoint.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "testutil.h"

static gt_ref *ref;
static const ganfw_host *host;

static ganfw_ctx *new_ctx(int32_t threads) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = threads, .seed = 5};
  ganfw_ctx *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c), GANFW_OK);
  return c;
}

/* A tensor of dtype holding data (f32 values) rounded to it. */
static ganfw_tensor *upload(ganfw_ctx *c, const float *data, int ndim, const int64_t *shape,
                            int32_t dtype) {
  ganfw_tensor *t = ganfw_tensor_create(c, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_DATA, "in");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(t, data, t->nbytes), GANFW_OK);
  if (dtype == GANFW_DTYPE_F32) return t;
  ganfw_tensor *h = ganfw_tensor_as_dtype(t, dtype, GANFW_MEM_DATA);
  CU_ASSERT_PTR_NOT_NULL_FATAL(h);
  ganfw_tensor_destroy(t);
  return h;
}

/* The values of t (any float dtype) as f32, gt_alloc'ed (gt_free). */
static float *values(ganfw_tensor *t) {
  ganfw_tensor *f = ganfw_tensor_as_dtype(t, GANFW_DTYPE_F32, GANFW_MEM_OTHER);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  float *v = gt_alloc((size_t)f->nbytes);
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(f, v, f->nbytes), GANFW_OK);
  ganfw_tensor_destroy(f);
  return v;
}

/* max |got - want| / max(|want|, floor * max |want|) <= tol: relative, with a floor that is a
 * fraction of the tensor's largest value (as tests/test_ref_dense.c: f32 sums round at the
 * size of their terms). */
static void check(const char *what, ganfw_tensor *got, const float *want, int64_t n, double tol,
                  double floor) {
  CU_ASSERT_EQUAL_FATAL(got->numel, n);
  double scale = 1e-30;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
  float *v = values(got);
  double e = gt_check_close(what, v, want, n, tol, floor * scale);
  printf("\n    %-36s max rel err %.2e (tol %.0e)", what, e, tol);
  gt_free(v);
}

static const float *ref_key(const char *name, const char *suffix, int64_t *n, int64_t *shape,
                            int *ndim) {
  char key[96];
  snprintf(key, sizeof key, "%s_%s", name, suffix);
  const float *v = gt_ref_f32(ref, key, n, shape, ndim);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  return v;
}

static ganfw_tensor *param_named(ganfw_net *net, const char *name, const char **type) {
  for (int64_t i = 0; i < host->net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(host->net_param_info(net, i, &p), GANFW_OK);
    if (strcmp(p.name, name) != 0) continue;
    if (type) *type = p.layer_type;
    return p.value;
  }
  CU_FAIL_FATAL("parameter missing");
  return NULL;
}

static ganfw_tensor *grad_named(ganfw_net *net, const char *name) {
  for (int64_t i = 0; i < host->net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(host->net_param_info(net, i, &p), GANFW_OK);
    if (strcmp(p.name, name) == 0) return p.grad;
  }
  CU_FAIL_FATAL("gradient missing");
  return NULL;
}

static ganfw_tensor *buffer_named(ganfw_net *net, const char *name) {
  ganfw_net_buffer b;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++)
    if (strcmp(b.name, name) == 0) return b.tensor;
  CU_FAIL_FATAL("buffer missing");
  return NULL;
}

/* 1 when a and b (equal element counts, any float dtype) hold the same bits as f32. */
static int same_values(ganfw_tensor *a, ganfw_tensor *b) {
  if (a->numel != b->numel) return 0;
  float *x = values(a), *y = values(b);
  int same = memcmp(x, y, (size_t)a->numel * sizeof *x) == 0;
  gt_free(x);
  gt_free(y);
  return same;
}

static void expect_error(ganfw_status st, const char *part1, const char *part2) {
  CU_ASSERT_EQUAL(st, GANFW_ERR_INVALID_ARG);
  const char *msg = ganfw_error_message();
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, part1));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, part2));
  printf("\n    %s", msg);
}

/* Nothing of a step is left in the allocator once its tensors are released. */
static void expect_no_activations(ganfw_ctx *c) {
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(c->alloc, &st);
  CU_ASSERT_EQUAL(st.category[GANFW_MEM_ACTIVATION].current, 0);
  CU_ASSERT_EQUAL(st.category[GANFW_MEM_WORKSPACE].current, 0);
}

/* --- embedding -------------------------------------------------------------------------- */

typedef struct run_out {
  ganfw_ctx *ctx;
  ganfw_net *net;
  ganfw_tensor *y, *dx, *y2, *dx2;
} run_out;

static void run_free(run_out *r) {
  ganfw_tensor *t[4] = {r->y, r->dx, r->y2, r->dx2};
  for (int i = 0; i < 4; i++) ganfw_tensor_destroy(t[i]);
  ganfw_net_destroy(r->net);
  if (r->ctx) expect_no_activations(r->ctx);
  ganfw_ctx_destroy(r->ctx);
  memset(r, 0, sizeof *r);
}

/* The case's one-layer net ("emb") in `dtype` on `threads` threads: the reference's weight,
 * one forward and a backward asking for every gradient. The ids come in as f32 data. */
static void emb_run(const char *name, int32_t dtype, int32_t threads, run_out *r) {
  int64_t xs[8], ws[8], ys[8], nx;
  int xnd, wnd, ynd;
  const float *x = ref_key(name, "x", &nx, xs, &xnd);
  const float *w = ref_key(name, "weight", NULL, ws, &wnd);
  const float *dy = ref_key(name, "dy", NULL, ys, &ynd);
  r->ctx = new_ctx(threads);
  r->net = host->net_create(r->ctx, "net");
  CU_ASSERT_EQUAL_FATAL(host->net_embedding(r->net, "emb", ws[0], ws[1]), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(r->net, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(r->net, dtype), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_param_count(r->net), 1);
  const char *type = NULL;
  ganfw_tensor *wt = param_named(r->net, "emb.weight", &type);
  CU_ASSERT_STRING_EQUAL(type, "embedding");
  CU_ASSERT(wt->ndim == 2 && wt->shape[0] == ws[0] && wt->shape[1] == ws[1]);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(wt, w, wt->nbytes), GANFW_OK);
  ganfw_tensor *xt = upload(r->ctx, x, xnd, xs, GANFW_DTYPE_F32);
  ganfw_tensor *dyt = upload(r->ctx, dy, ynd, ys, dtype);
  ganfw_tape *tape = ganfw_tape_create(r->net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(r->net, xt, tape, &r->y), GANFW_OK);
  CU_ASSERT(r->y->ndim == 2 && r->y->shape[0] == xs[0] && r->y->shape[1] == ws[1]);
  CU_ASSERT_EQUAL(r->y->dtype, dtype);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(r->net, tape, dyt, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &r->dx),
      GANFW_OK);
  CU_ASSERT_EQUAL(r->dx->dtype, dtype);
  CU_ASSERT(r->dx->ndim == xnd && memcmp(r->dx->shape, xs, (size_t)xnd * sizeof xs[0]) == 0);
  float *g = values(r->dx);
  for (int64_t i = 0; i < nx; i++) CU_ASSERT_EQUAL(g[i], 0.0f); /* the ids get no gradient */
  gt_free(g);
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(xt);
  ganfw_tensor_destroy(dyt);
}

static void test_embedding(void) {
  if (!(ref = gt_ref_open("embed_sn"))) return;
  host = ganfw_host_table();
  CU_ASSERT_FATAL(GANFW_HOST_HAS(host, net_embedding));
  const char *cases[3] = {"emb", "emb_one", "emb_big"};
  for (int k = 0; k < 3; k++) {
    run_out r = {0}, r1 = {0};
    emb_run(cases[k], GANFW_DTYPE_F32, 2, &r);
    int64_t ny, nw;
    char what[96];
    const float *y = ref_key(cases[k], "y", &ny, NULL, NULL);
    const float *dw = ref_key(cases[k], "dweight", &nw, NULL, NULL);
    snprintf(what, sizeof what, "%s y", cases[k]);
    check(what, r.y, y, ny, 0.0, 1e-2); /* a copy of the rows: exact */
    snprintf(what, sizeof what, "%s dweight", cases[k]);
    check(what, grad_named(r.net, "emb.weight"), dw, nw, 1e-5, 1e-2);
    /* the scatter-add adds in sample order whatever the thread count */
    emb_run(cases[k], GANFW_DTYPE_F32, 1, &r1);
    CU_ASSERT(same_values(grad_named(r.net, "emb.weight"), grad_named(r1.net, "emb.weight")));
    run_free(&r1);
    const int32_t dtypes[2] = {GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
    const double tols[2] = {5e-3, 3e-2};
    for (int d = 0; d < 2; d++) {
      run_out h = {0};
      emb_run(cases[k], dtypes[d], 2, &h);
      const double ey = gt_tensor_norm_rel(h.y, r.y);
      ganfw_tensor *gw = grad_named(h.net, "emb.weight");
      const double ew = gt_tensor_norm_rel(gw, grad_named(r.net, "emb.weight"));
      printf("\n    %-36s y %.1e, dweight %.1e (tol %.0e) %s", cases[k], ey, ew, tols[d],
             d == 0 ? "f16" : "bf16");
      CU_ASSERT(ey > 0.0 && ey < tols[d]); /* stored rounded to 16 bits */
      CU_ASSERT(ew > 0.0 && ew < tols[d]); /* from a 16-bit dy */
      CU_ASSERT_EQUAL(gw->dtype, GANFW_DTYPE_F32);
      run_free(&h);
    }
    run_free(&r);
  }
  gt_ref_close(ref);
}

/* The weight starts as N(0, 1) draws from the run's Philox stream. */
static void test_embedding_init(void) {
  host = ganfw_host_table();
  ganfw_ctx *c = new_ctx(2);
  ganfw_net *net = host->net_create(c, "g");
  CU_ASSERT_EQUAL_FATAL(host->net_embedding(net, "label", 100, 64), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, 1, 1, 1), GANFW_OK);
  float *w = values(param_named(net, "label.weight", NULL));
  double s = 0, s2 = 0;
  for (int i = 0; i < 6400; i++) s += w[i], s2 += (double)w[i] * w[i];
  const double mean = s / 6400, sd = sqrt(s2 / 6400 - mean * mean);
  printf("\n    6400 draws: mean %.4f, std %.4f", mean, sd);
  CU_ASSERT(fabs(mean) < 0.05 && fabs(sd - 1.0) < 0.05);
  gt_free(w);
  int64_t out[4];
  int32_t nd;
  ganfw_net_output_shape(net, 7, out, &nd);
  CU_ASSERT(nd == 2 && out[0] == 7 && out[1] == 64);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* An id that is not a whole number in [0, num) ends the forward with a message naming the
 * layer, the sample and the id, with a tape or without, in f32 or 16-bit compute, and holds
 * nothing afterwards. */
static void test_embedding_bad_ids(void) {
  host = ganfw_host_table();
  ganfw_ctx *c = new_ctx(2);
  const float bad[] = {10.0f, -1.0f, 2.5f, NAN, INFINITY, 1e9f, -0.5f};
  const char *shown[] = {"class id 10,", "class id -1,",   "class id 2.5,", "class id nan",
                         "class id inf", "class id 1e+09", "class id -0.5"};
  for (int dt = 0; dt < 2; dt++) {
    ganfw_net *net = host->net_create(c, "net");
    CU_ASSERT_EQUAL_FATAL(host->net_embedding(net, "emb", 10, 3), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(host->net_build(net, 1, 1, 1), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_net_set_compute_dtype(net, dt ? GANFW_DTYPE_BF16 : GANFW_DTYPE_F32),
                    GANFW_OK);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      float ids[3] = {9.0f, bad[k], 0.0f};
      const int64_t xs[4] = {3, 1, 1, 1};
      ganfw_tensor *x = upload(c, ids, 4, xs, GANFW_DTYPE_F32), *y = NULL;
      ganfw_tape *tape = ganfw_tape_create(net);
      expect_error(ganfw_net_forward(net, x, k % 2 ? tape : NULL, &y), "layer net.emb (embedding)",
                   "sample 1 has ");
      CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), shown[k]));
      CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "[0, 10)"));
      CU_ASSERT_PTR_NULL(y);
      ganfw_tape_destroy(tape);
      ganfw_tensor_destroy(x);
      expect_no_activations(c);
    }
    ganfw_net_destroy(net);
  }
  /* shapes and arguments */
  ganfw_net *net = host->net_create(c, "net");
  expect_error(host->net_embedding(net, "emb", 0, 3), "layer emb", "num");
  expect_error(host->net_embedding(net, "emb", 4, -2), "layer emb", "dim");
  CU_ASSERT_EQUAL(host->net_layer_count(net), 0);
  CU_ASSERT_EQUAL(host->net_embedding(net, "emb", 4, 2), GANFW_OK);
  expect_error(host->net_build(net, 3, 1, 1), "layer net.emb (embedding)", "gets [N,3,1,1]");
  ganfw_net_destroy(net);
  net = host->net_create(c, "net");
  CU_ASSERT_EQUAL(host->net_embedding(net, "emb", 4, 2), GANFW_OK);
  expect_error(host->net_build(net, 1, 2, 2), "layer net.emb (embedding)", "[N,1] or [N,1,1,1]");
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* --- a CPU backend with native 16-bit conv and linear ops ---------------------------------
 * Its run takes the conv, conv-transpose and linear ops in f16 and bf16 by converting whole
 * tensors on the host around the CPU's f32 kernels, counting the calls, so that the layers'
 * native path (ganfw_layer_lp_param with W / sigma, the weight gradient redirected) runs here
 * as on a GPU; every other op is the CPU's (BatchNorm and activations convert). */
static ganfw_backend_vt lp_vt;
static ganfw_backend lp_be = {.vt = &lp_vt};
static int64_t lp_calls;

static float *lp_in(int32_t dt, int64_t n, const void *h) {
  if (!h) return NULL;
  ganfw_backend *c = ganfw_cpu_backend();
  float *f = gt_alloc((size_t)n * sizeof *f);
  CU_ASSERT_EQUAL(dt == GANFW_DTYPE_F16 ? ganfw_be_f16_to_f32(c, n, h, f)
                                        : ganfw_be_bf16_to_f32(c, n, h, f),
                  GANFW_OK);
  return f;
}

static float *lp_buf(int64_t n, const void *wanted) {
  return wanted ? gt_alloc((size_t)n * sizeof(float)) : NULL;
}

static void lp_out(int32_t dt, int64_t n, float *f, void *h) {
  ganfw_backend *c = ganfw_cpu_backend();
  if (h)
    CU_ASSERT_EQUAL(dt == GANFW_DTYPE_F16 ? ganfw_be_f32_to_f16(c, n, f, h)
                                          : ganfw_be_f32_to_bf16(c, n, f, h),
                    GANFW_OK);
  gt_free(f);
}

/* 1 for the ops this backend runs natively in 16 bits. */
static int32_t lp_native_kind(int32_t kind) {
  return kind == GANFW_OP_CONV2D_FORWARD || kind == GANFW_OP_CONV2D_BACKWARD ||
         kind == GANFW_OP_CONVT2D_FORWARD || kind == GANFW_OP_CONVT2D_BACKWARD ||
         kind == GANFW_OP_LINEAR_FORWARD || kind == GANFW_OP_LINEAR_BACKWARD;
}

/* The ops with a native 16-bit form on a GPU: conv, conv-transpose, linear, BatchNorm and
 * activations. */
static int32_t lp_grouped_kind(int32_t kind) {
  return lp_native_kind(kind) || kind == GANFW_OP_BATCHNORM2D_TRAIN ||
         kind == GANFW_OP_BATCHNORM2D_EVAL || kind == GANFW_OP_BATCHNORM2D_BACKWARD ||
         kind == GANFW_OP_ACT_FORWARD || kind == GANFW_OP_ACT_BACKWARD;
}

/* Conv, conv-transpose and linear in 16 bits, BatchNorm and activations not (those layers
 * convert, whatever the CPU's own native kernels are); everything else as the CPU. */
static int32_t lp_supports(ganfw_backend *be, const ganfw_op *op) {
  (void)be;
  ganfw_backend *c = ganfw_cpu_backend();
  if (op->dtype != GANFW_DTYPE_F32 && lp_grouped_kind(op->kind)) return lp_native_kind(op->kind);
  return c->vt->supports(c, op);
}

/* The CPU's f32 workspace for the grouped ops in 16 bits too; the CPU's for every other op. */
static size_t lp_workspace(ganfw_backend *be, const ganfw_op *op) {
  (void)be;
  ganfw_backend *c = ganfw_cpu_backend();
  if (op->dtype == GANFW_DTYPE_F32 || !lp_grouped_kind(op->kind)) return c->vt->workspace(c, op);
  ganfw_op f32 = *op;
  f32.dtype = GANFW_DTYPE_F32;
  return c->vt->workspace(c, &f32);
}

static ganfw_status lp_conv_fwd(int32_t dt, const ganfw_conv2d_shape *s, const void *x,
                                const void *w, const float *b, void *y, void *ws) {
  lp_calls++;
  const int64_t ny = s->N * s->K * s->P * s->Q;
  float *xf = lp_in(dt, s->N * s->C * s->H * s->W, x),
        *wf = lp_in(dt, s->K * s->C * s->R * s->S, w);
  float *yf = lp_buf(ny, y);
  const ganfw_status st = ganfw_be_conv2d_forward(ganfw_cpu_backend(), s, xf, wf, b, yf, ws);
  lp_out(dt, ny, yf, y);
  gt_free(xf), gt_free(wf);
  return st;
}

static ganfw_status lp_conv_bwd(int32_t dt, const ganfw_conv2d_shape *s, const void *x,
                                const void *w, const void *dy, void *dx, float *dw, float *db,
                                int accumulate, void *ws) {
  lp_calls++;
  const int64_t nx = s->N * s->C * s->H * s->W;
  float *xf = lp_in(dt, nx, x), *wf = lp_in(dt, s->K * s->C * s->R * s->S, w);
  float *dyf = lp_in(dt, s->N * s->K * s->P * s->Q, dy), *dxf = lp_buf(nx, dx);
  const ganfw_status st =
      ganfw_be_conv2d_backward(ganfw_cpu_backend(), s, xf, wf, dyf, dxf, dw, db, accumulate, ws);
  lp_out(dt, nx, dxf, dx);
  gt_free(xf), gt_free(wf), gt_free(dyf);
  return st;
}

static ganfw_status lp_convt_fwd(int32_t dt, const ganfw_convt2d_shape *s, const void *x,
                                 const void *w, const float *b, void *y, void *ws) {
  lp_calls++;
  const int64_t ny = s->N * s->K * s->P * s->Q;
  float *xf = lp_in(dt, s->N * s->C * s->H * s->W, x),
        *wf = lp_in(dt, s->K * s->C * s->R * s->S, w);
  float *yf = lp_buf(ny, y);
  const ganfw_status st = ganfw_be_convt2d_forward(ganfw_cpu_backend(), s, xf, wf, b, yf, ws);
  lp_out(dt, ny, yf, y);
  gt_free(xf), gt_free(wf);
  return st;
}

static ganfw_status lp_convt_bwd(int32_t dt, const ganfw_convt2d_shape *s, const void *x,
                                 const void *w, const void *dy, void *dx, float *dw, float *db,
                                 int accumulate, void *ws) {
  lp_calls++;
  const int64_t nx = s->N * s->C * s->H * s->W;
  float *xf = lp_in(dt, nx, x), *wf = lp_in(dt, s->K * s->C * s->R * s->S, w);
  float *dyf = lp_in(dt, s->N * s->K * s->P * s->Q, dy), *dxf = lp_buf(nx, dx);
  const ganfw_status st =
      ganfw_be_convt2d_backward(ganfw_cpu_backend(), s, xf, wf, dyf, dxf, dw, db, accumulate, ws);
  lp_out(dt, nx, dxf, dx);
  gt_free(xf), gt_free(wf), gt_free(dyf);
  return st;
}

static ganfw_status lp_lin_fwd(int32_t dt, int64_t N, int64_t IN, int64_t OUT, const void *x,
                               const void *w, const float *b, void *y) {
  lp_calls++;
  float *xf = lp_in(dt, N * IN, x), *wf = lp_in(dt, OUT * IN, w), *yf = lp_buf(N * OUT, y);
  const ganfw_status st = ganfw_be_linear_forward(ganfw_cpu_backend(), N, IN, OUT, xf, wf, b, yf);
  lp_out(dt, N * OUT, yf, y);
  gt_free(xf), gt_free(wf);
  return st;
}

static ganfw_status lp_lin_bwd(int32_t dt, int64_t N, int64_t IN, int64_t OUT, const void *x,
                               const void *w, const void *dy, void *dx, float *dw, float *db,
                               int accumulate) {
  lp_calls++;
  float *xf = lp_in(dt, N * IN, x), *wf = lp_in(dt, OUT * IN, w);
  float *dyf = lp_in(dt, N * OUT, dy), *dxf = lp_buf(N * IN, dx);
  const ganfw_status st = ganfw_be_linear_backward(ganfw_cpu_backend(), N, IN, OUT, xf, wf, dyf,
                                                   dxf, dw, db, accumulate);
  lp_out(dt, N * IN, dxf, dx);
  gt_free(xf), gt_free(wf), gt_free(dyf);
  return st;
}

static ganfw_status lp_run(ganfw_backend *be, ganfw_op *op) {
  ganfw_backend *c = ganfw_cpu_backend();
  if (op->dtype == GANFW_DTYPE_F32 || !lp_native_kind(op->kind)) {
    if (!lp_supports(be, op))
      return ganfw_error_set(GANFW_ERR_UNSUPPORTED, "the %s backend cannot run %s in %s",
                             be->vt->name, ganfw_op_name(op->kind), ganfw_dtype_name(op->dtype));
    return c->vt->run(c, op);
  }
  const int32_t dt = op->dtype;
  const int acc = (op->flags & GANFW_OP_ACCUMULATE) != 0;
  const int64_t *d = op->shape.d;
  const void *const *in = op->in;
  void *const *out = op->out;
  switch (op->kind) {
  case GANFW_OP_CONV2D_FORWARD:
    return lp_conv_fwd(dt, &op->shape.conv, in[0], in[1], in[2], out[0], op->ws);
  case GANFW_OP_CONV2D_BACKWARD:
    return lp_conv_bwd(dt, &op->shape.conv, in[0], in[1], in[2], out[0], op->grad[0], op->grad[1],
                       acc, op->ws);
  case GANFW_OP_CONVT2D_FORWARD:
    return lp_convt_fwd(dt, &op->shape.convt, in[0], in[1], in[2], out[0], op->ws);
  case GANFW_OP_CONVT2D_BACKWARD:
    return lp_convt_bwd(dt, &op->shape.convt, in[0], in[1], in[2], out[0], op->grad[0], op->grad[1],
                        acc, op->ws);
  case GANFW_OP_LINEAR_FORWARD:
    return lp_lin_fwd(dt, d[0], d[1], d[2], in[0], in[1], in[2], out[0]);
  default: /* GANFW_OP_LINEAR_BACKWARD */
    return lp_lin_bwd(dt, d[0], d[1], d[2], in[0], in[1], in[2], out[0], op->grad[0], op->grad[1],
                      acc);
  }
}

static int suite_init(void) {
  lp_vt = *ganfw_cpu_backend()->vt;
  lp_vt.name = "cpu+lp";
  lp_vt.supports = lp_supports;
  lp_vt.workspace = lp_workspace;
  lp_vt.run = lp_run;
  return 0;
}

static int suite_clean(void) {
  ganfw_ctx_override_backend(NULL);
  return 0;
}

/* --- spectral norm ---------------------------------------------------------------------- */

enum { SN_LINEAR, SN_CONV, SN_CONVT };

typedef struct sn_case {
  const char *name; /* the reference's keys */
  int32_t kind;
  int64_t in, out, kernel, stride, padding;
  int32_t bias, iters, two; /* two: a second training forward before the backward */
} sn_case;

static const sn_case sn_cases[] = {
    {"sn_linear", SN_LINEAR, 12, 7, 0, 0, 0, 1, 1, 0},
    {"sn_linear_two", SN_LINEAR, 9, 4, 0, 0, 0, 0, 1, 1},
    {"sn_conv", SN_CONV, 3, 6, 3, 1, 1, 1, 1, 0},
    {"sn_conv_3it", SN_CONV, 4, 5, 4, 2, 1, 0, 3, 0},
    {"sn_convt", SN_CONVT, 6, 4, 4, 2, 1, 1, 1, 0},
    {"sn_convt_2it", SN_CONVT, 5, 3, 3, 1, 0, 1, 2, 1},
};

static ganfw_status sn_add(ganfw_net *net, const char *name, const sn_case *c) {
  switch (c->kind) {
  case SN_LINEAR:
    return host->net_linear(net, name, c->in, c->out, c->bias);
  case SN_CONV:
    return host->net_conv2d(net, name, c->in, c->out, c->kernel, c->stride, c->padding, c->bias);
  default:
    return host->net_conv_transpose2d(net, name, c->in, c->out, c->kernel, c->stride, c->padding, 0,
                                      c->bias);
  }
}

/* The case's net ("layer" with spectral norm, a flatten before a linear one) in `dtype`,
 * its state_dict loaded strictly from the reference by PyTorch's names, then one or two
 * training forwards and the backward of both (the second first, so that the first adds). */
static void sn_run(const sn_case *c, int32_t dtype, int32_t native, run_out *r) {
  int64_t xs[8], ys[8];
  int xnd, ynd;
  const float *x = ref_key(c->name, "x", NULL, xs, &xnd);
  const float *dy = ref_key(c->name, "dy", NULL, ys, &ynd);
  ganfw_ctx_override_backend(native ? &lp_be : NULL);
  r->ctx = new_ctx(2);
  ganfw_ctx_override_backend(NULL);
  CU_ASSERT_PTR_EQUAL(r->ctx->be, native ? &lp_be : ganfw_cpu_backend());
  r->net = host->net_create(r->ctx, "net");
  const int flat = xnd == 2;
  if (flat) CU_ASSERT_EQUAL_FATAL(host->net_flatten(r->net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(sn_add(r->net, "layer", c), GANFW_OK);
  CU_ASSERT_FATAL(GANFW_HOST_HAS(host, net_spectral_norm));
  CU_ASSERT_EQUAL_FATAL(host->net_spectral_norm(r->net, "layer", c->iters, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(r->net, xs[1], flat ? 1 : xs[2], flat ? 1 : xs[3]),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(r->net, dtype), GANFW_OK);
  /* PyTorch's names: weight_orig and bias the parameters, weight_u and weight_v buffers */
  CU_ASSERT_EQUAL(host->net_param_count(r->net), c->bias ? 2 : 1);
  const char *type = NULL;
  ganfw_tensor *w = param_named(r->net, "layer.weight_orig", &type);
  CU_ASSERT_STRING_EQUAL(type, c->kind == SN_LINEAR ? "linear"
                               : c->kind == SN_CONV ? "conv2d"
                                                    : "conv_transpose2d");
  const int64_t h = c->kind == SN_CONVT ? w->shape[1] : w->shape[0];
  CU_ASSERT_EQUAL(buffer_named(r->net, "layer.weight_u")->numel, h);
  CU_ASSERT_EQUAL(buffer_named(r->net, "layer.weight_v")->numel, w->numel / h);
  char path[512];
  snprintf(path, sizeof path, "%s/embed_sn.safetensors", getenv("GANFW_REF_DIR"));
  ganfw_ckpt_net cn = {.net = r->net, .prefix = c->name};
  ganfw_ckpt_report rep = {0};
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_load_weights(path, &cn, 1, 0, &rep), GANFW_OK);
  CU_ASSERT_EQUAL(rep.loaded, (c->bias ? 2 : 1) + 2);
  const int64_t xs4[4] = {xs[0], xs[1], flat ? 1 : xs[2], flat ? 1 : xs[3]};
  ganfw_tensor *xt = upload(r->ctx, x, 4, xs4, dtype), *dyt = upload(r->ctx, dy, ynd, ys, dtype);
  ganfw_tensor *xt2 = NULL, *dyt2 = NULL;
  ganfw_tape *tape = ganfw_tape_create(r->net), *tape2 = ganfw_tape_create(r->net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(r->net, xt, tape, &r->y), GANFW_OK);
  if (c->two) {
    xt2 = upload(r->ctx, ref_key(c->name, "x2", NULL, NULL, NULL), 4, xs4, dtype);
    dyt2 = upload(r->ctx, ref_key(c->name, "dy2", NULL, NULL, NULL), ynd, ys, dtype);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(r->net, xt2, tape2, &r->y2), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(r->net, tape2, dyt2,
                                             GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &r->dx2),
                          GANFW_OK);
  }
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(r->net, tape, dyt, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &r->dx),
      GANFW_OK);
  CU_ASSERT_EQUAL(r->y->dtype, dtype);
  CU_ASSERT_EQUAL(r->dx->dtype, dtype);
  ganfw_tape_destroy(tape);
  ganfw_tape_destroy(tape2);
  ganfw_tensor *t[4] = {xt, dyt, xt2, dyt2};
  for (int i = 0; i < 4; i++) ganfw_tensor_destroy(t[i]);
}

/* After the training step: eval and a train forward with frozen statistics use the stored u
 * and v (no power iteration), the same output bit for bit; eval's against PyTorch. */
static void sn_check_no_iteration(const sn_case *c, run_out *r) {
  int64_t xs[8], n;
  int xnd;
  const float *x = ref_key(c->name, "x", NULL, xs, &xnd);
  const float *y_eval = ref_key(c->name, "y_eval", &n, NULL, NULL);
  const int64_t xs4[4] = {xs[0], xs[1], xnd == 2 ? 1 : xs[2], xnd == 2 ? 1 : xs[3]};
  ganfw_tensor *xt = upload(r->ctx, x, 4, xs4, GANFW_DTYPE_F32);
  ganfw_tensor *u = buffer_named(r->net, "layer.weight_u");
  ganfw_tensor *v = buffer_named(r->net, "layer.weight_v");
  float *u0 = values(u), *v0 = values(v);
  ganfw_tensor *ye = NULL, *yf = NULL;
  ganfw_net_set_train(r->net, 0, 1);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(r->net, xt, NULL, &ye), GANFW_OK);
  char what[96];
  snprintf(what, sizeof what, "%s y (eval)", c->name);
  check(what, ye, y_eval, n, 1e-5, 1e-2);
  ganfw_net_set_train(r->net, 1, 0); /* a checkpoint re-run */
  ganfw_tape *tape = ganfw_tape_create(r->net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(r->net, xt, tape, &yf), GANFW_OK);
  CU_ASSERT(same_values(ye, yf));
  float *u1 = values(u), *v1 = values(v);
  CU_ASSERT(memcmp(u0, u1, (size_t)u->nbytes) == 0);
  CU_ASSERT(memcmp(v0, v1, (size_t)v->nbytes) == 0);
  ganfw_net_set_train(r->net, 1, 1);
  float *p[4] = {u0, v0, u1, v1};
  for (int i = 0; i < 4; i++) gt_free(p[i]);
  ganfw_tape_destroy(tape);
  ganfw_tensor_destroy(ye);
  ganfw_tensor_destroy(yf);
  ganfw_tensor_destroy(xt);
}

static void test_spectral_norm(void) {
  if (!(ref = gt_ref_open("embed_sn"))) return;
  host = ganfw_host_table();
  for (size_t k = 0; k < sizeof sn_cases / sizeof sn_cases[0]; k++) {
    const sn_case *c = &sn_cases[k];
    run_out r = {0};
    sn_run(c, GANFW_DTYPE_F32, 0, &r);
    char what[96];
    int64_t n;
    struct {
      const char *key;
      ganfw_tensor *got;
    } outs[] = {
        {"u", buffer_named(r.net, "layer.weight_u")},
        {"v", buffer_named(r.net, "layer.weight_v")},
        {"y", r.y},
        {"dx", r.dx},
        {"dweight_orig", grad_named(r.net, "layer.weight_orig")},
        {"dbias", c->bias ? grad_named(r.net, "layer.bias") : NULL},
        {"y2", r.y2},
        {"dx2", r.dx2},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
      if (!outs[i].got) continue;
      snprintf(what, sizeof what, "%s %s", c->name, outs[i].key);
      const float *want = ref_key(c->name, outs[i].key, &n, NULL, NULL);
      check(what, outs[i].got, want, n, 1e-5, 1e-2);
    }
    double sigma = 0.0;
    CU_ASSERT_EQUAL(ganfw_net_spectral_norm_sigma(r.net, "layer", &sigma), GANFW_OK);
    const double want = ref_key(c->name, "sigma", NULL, NULL, NULL)[0];
    printf("\n    %-36s %.7f, PyTorch's %.7f", c->name, sigma, want);
    CU_ASSERT(fabs(sigma - want) <= 1e-6 * want);
    sn_check_no_iteration(c, &r);
    /* 16-bit compute: the matmul in f16/bf16 with W / sigma rounded, the power iteration,
     * sigma and the normalisation in f32 on the f32 master weight */
    const int32_t dtypes[2] = {GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
    const double tols[2] = {5e-3, 3e-2};
    for (int d = 0; d < 2; d++) {
      run_out h = {0}, nat = {0};
      sn_run(c, dtypes[d], 0, &h);
      double s16 = 0.0;
      CU_ASSERT_EQUAL(ganfw_net_spectral_norm_sigma(h.net, "layer", &s16), GANFW_OK);
      CU_ASSERT_EQUAL(s16, sigma);
      CU_ASSERT(same_values(buffer_named(h.net, "layer.weight_u"),
                            buffer_named(r.net, "layer.weight_u")));
      CU_ASSERT(same_values(buffer_named(h.net, "layer.weight_v"),
                            buffer_named(r.net, "layer.weight_v")));
      const double ey = gt_tensor_norm_rel(h.y, r.y), edx = gt_tensor_norm_rel(h.dx, r.dx);
      double edw = gt_tensor_norm_rel(grad_named(h.net, "layer.weight_orig"),
                                      grad_named(r.net, "layer.weight_orig"));
      if (c->bias)
        edw = fmax(edw, gt_tensor_norm_rel(grad_named(h.net, "layer.bias"),
                                           grad_named(r.net, "layer.bias")));
      printf("\n    %-36s y %.1e, dx %.1e, dparams %.1e (tol %.0e) %s", c->name, ey, edx, edw,
             tols[d], d == 0 ? "f16" : "bf16");
      CU_ASSERT(ey > 0.0 && ey < tols[d]);
      CU_ASSERT(edx > 0.0 && edx < tols[d]);
      CU_ASSERT(edw > 0.0 && edw < tols[d]);
      if (d == 1) { /* bf16 against PyTorch's f64 directly, looser */
        int64_t ny;
        const float *y = ref_key(c->name, "y", &ny, NULL, NULL);
        float *got = values(h.y);
        double num = 0, den = 0;
        for (int64_t i = 0; i < ny; i++)
          num += ((double)got[i] - y[i]) * ((double)got[i] - y[i]), den += (double)y[i] * y[i];
        CU_ASSERT(sqrt(num / den) < tols[d]);
        gt_free(got);
      }
      /* the native 16-bit path: the backend's 16-bit ops get W / sigma rounded and write the
       * gradient of W / sigma where spectral norm turns it into weight_orig's */
      const int64_t calls = lp_calls;
      sn_run(c, dtypes[d], 1, &nat);
      CU_ASSERT(lp_calls >= calls + 2 * (1 + c->two));
      const double ny = gt_tensor_norm_rel(nat.y, h.y), ndx = gt_tensor_norm_rel(nat.dx, h.dx);
      double ndw = gt_tensor_norm_rel(grad_named(nat.net, "layer.weight_orig"),
                                      grad_named(h.net, "layer.weight_orig"));
      printf("\n    %-36s native against converting: y %.1e, dx %.1e, dweight_orig %.1e", c->name,
             ny, ndx, ndw);
      /* the gradients agree; y differs by the bias, rounded to 16 bits by the converting
       * path (ganfw_layer_f32_params) and added in f32 by the native one */
      CU_ASSERT(ny < (c->bias ? tols[d] : 1e-6));
      CU_ASSERT(ndx < 1e-6 && ndw < 1e-6);
      run_free(&nat);
      run_free(&h);
    }
    run_free(&r);
  }
  gt_ref_close(ref);
}

/* Two identical nets (convT with spectral norm, relu, conv with spectral norm), one with a
 * checkpoint segment boundary: the re-run forward in backward runs no power iteration and
 * reuses the u and v of the first, so outputs, gradients, u and v agree bit for bit, step
 * after step. */
static ganfw_net *sn_pair_net(ganfw_ctx *c) {
  ganfw_net *net = host->net_create(c, "d");
  CU_ASSERT_EQUAL_FATAL(host->net_conv_transpose2d(net, "a", 3, 4, 4, 2, 1, 0, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_spectral_norm(net, "a", 1, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_activation(net, "r", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_conv2d(net, "b", 4, 2, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_spectral_norm(net, "b", 2, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, 3, 4, 4), GANFW_OK);
  return net;
}

static void test_spectral_norm_checkpointing(void) {
  host = ganfw_host_table();
  ganfw_ctx *c[2] = {new_ctx(2), new_ctx(2)};
  ganfw_net *net[2] = {sn_pair_net(c[0]), sn_pair_net(c[1])};
  const int32_t starts[1] = {2};
  CU_ASSERT_EQUAL_FATAL(ganfw_net_checkpoint(net[1], starts, 1), GANFW_OK);
  const int64_t xs[4] = {2, 3, 4, 4}, ys[4] = {2, 2, 8, 8};
  float xh[96], dyh[256];
  for (int step = 0; step < 3; step++) {
    gt_fill_uniform(xh, 96, -1, 1, 11 + (uint64_t)step);
    gt_fill_uniform(dyh, 256, -1, 1, 21 + (uint64_t)step);
    ganfw_tensor *y[2], *dx[2];
    for (int k = 0; k < 2; k++) {
      ganfw_tensor *x = upload(c[k], xh, 4, xs, GANFW_DTYPE_F32);
      ganfw_tensor *dy = upload(c[k], dyh, 4, ys, GANFW_DTYPE_F32);
      ganfw_tape *tape = ganfw_tape_create(net[k]);
      ganfw_net_zero_grad(net[k]);
      CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net[k], x, tape, &y[k]), GANFW_OK);
      CU_ASSERT_EQUAL_FATAL(
          ganfw_net_backward(net[k], tape, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx[k]),
          GANFW_OK);
      ganfw_tape_destroy(tape);
      ganfw_tensor_destroy(x);
      ganfw_tensor_destroy(dy);
    }
    CU_ASSERT(same_values(y[0], y[1]));
    CU_ASSERT(same_values(dx[0], dx[1]));
    const char *names[] = {"a.weight_orig", "a.bias", "b.weight_orig", "b.bias"};
    for (int i = 0; i < 4; i++)
      CU_ASSERT(same_values(grad_named(net[0], names[i]), grad_named(net[1], names[i])));
    const char *bufs[] = {"a.weight_u", "a.weight_v", "b.weight_u", "b.weight_v"};
    for (int i = 0; i < 4; i++)
      CU_ASSERT(same_values(buffer_named(net[0], bufs[i]), buffer_named(net[1], bufs[i])));
    for (int k = 0; k < 2; k++) {
      ganfw_tensor_destroy(y[k]);
      ganfw_tensor_destroy(dx[k]);
    }
  }
  for (int k = 0; k < 2; k++) {
    ganfw_net_destroy(net[k]);
    ganfw_ctx_destroy(c[k]);
  }
}

/* u and v are buffers after the layer's parameters, unit vectors from the start; a skipped
 * step's snapshot puts them back; a checkpoint file holds them and a load restores them. */
static void test_spectral_norm_buffers(void) {
  host = ganfw_host_table();
  ganfw_ctx *c = new_ctx(2);
  ganfw_net *net = host->net_create(c, "d");
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c", 3, 4, 3, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_spectral_norm(net, "c", 1, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_batchnorm2d(net, "bn", 4, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_linear(net, "fc", 64, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_spectral_norm(net, "fc", 1, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, 3, 8, 8), GANFW_OK);
  const char *pnames[5] = {"c.weight_orig", "bn.weight", "bn.bias", "fc.weight_orig", "fc.bias"};
  CU_ASSERT_EQUAL_FATAL(host->net_param_count(net), 5);
  for (int64_t i = 0; i < 5; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL(host->net_param_info(net, i, &p), GANFW_OK);
    CU_ASSERT_STRING_EQUAL(p.name, pnames[i]);
  }
  const char *bnames[7] = {
      "c.weight_u",  "c.weight_v", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
      "fc.weight_u", "fc.weight_v"};
  const int64_t blen[7] = {4, 27, 4, 4, 1, 1, 64};
  ganfw_net_buffer b;
  int64_t nb = 0;
  for (; ganfw_net_buffer_at(net, nb, &b); nb++) {
    CU_ASSERT_FATAL(nb < 7);
    CU_ASSERT_STRING_EQUAL(b.name, bnames[nb]);
    CU_ASSERT_EQUAL(!b.counter, nb != 4);
    if (!b.tensor) continue;
    CU_ASSERT_EQUAL(b.tensor->numel, blen[nb]);
    if (nb == 2 || nb == 3) continue;
    float *v = values(b.tensor);
    double s = 0;
    for (int64_t i = 0; i < blen[nb]; i++) s += (double)v[i] * v[i];
    CU_ASSERT(fabs(sqrt(s) - 1.0) < 1e-6); /* normalised, as PyTorch's */
    gt_free(v);
  }
  CU_ASSERT_EQUAL(nb, 7);
  /* a skipped step: the snapshot before it puts u and v back */
  ganfw_tensor *u = buffer_named(net, "c.weight_u"), *fv = buffer_named(net, "fc.weight_v");
  float *u0 = values(u), *fv0 = values(fv);
  ganfw_net_stats *snap = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_stats_save(net, &snap), GANFW_OK);
  float xh[384];
  gt_fill_uniform(xh, 384, -1, 1, 3);
  const int64_t xs[4] = {2, 3, 8, 8};
  ganfw_tensor *x = upload(c, xh, 4, xs, GANFW_DTYPE_F32), *y = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y), GANFW_OK); /* a training forward */
  ganfw_tensor_destroy(y);
  float *u1 = values(u);
  CU_ASSERT(memcmp(u0, u1, (size_t)u->nbytes) != 0); /* the power iteration moved it */
  CU_ASSERT_EQUAL(ganfw_net_stats_restore(net, snap), GANFW_OK);
  float *u2 = values(u);
  CU_ASSERT(memcmp(u0, u2, (size_t)u->nbytes) == 0);
  ganfw_net_stats_destroy(snap);
  /* the checkpoint file holds them */
  char dir[] = "/tmp/ganfw_test_sn_XXXXXX", path[64];
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/sn.safetensors", dir);
  ganfw_ckpt_net cn = {.net = net};
  ganfw_ckpt_meta meta = {.step = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, &cn, 1, &meta), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y), GANFW_OK);
  ganfw_tensor_destroy(y);
  float *fv1 = values(fv);
  CU_ASSERT(memcmp(fv0, fv1, (size_t)fv->nbytes) != 0);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, &cn, 1, NULL), GANFW_OK);
  float *u3 = values(u), *fv2 = values(fv);
  CU_ASSERT(memcmp(u0, u3, (size_t)u->nbytes) == 0);
  CU_ASSERT(memcmp(fv0, fv2, (size_t)fv->nbytes) == 0);
  float *all[] = {u0, fv0, u1, u2, fv1, u3, fv2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gt_free(all[i]);
  unlink(path);
  rmdir(dir);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(net);
  expect_no_activations(c);
  ganfw_ctx_destroy(c);
}

static void test_spectral_norm_errors(void) {
  host = ganfw_host_table();
  ganfw_ctx *c = new_ctx(2);
  ganfw_net *net = host->net_create(c, "d");
  CU_ASSERT_EQUAL(host->net_conv2d(net, "c", 3, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_activation(net, "relu", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_pool2d(net, "pool", GANFW_POOL_MAX, 2, 2, 0), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_batchnorm2d(net, "bn", 4, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_flatten(net, "flat"), GANFW_OK);
  expect_error(host->net_spectral_norm(net, "relu", 1, 1e-12f), "layer d.relu (activation)",
               "conv2d, conv_transpose2d or linear");
  expect_error(host->net_spectral_norm(net, "pool", 1, 1e-12f), "layer d.pool (pool2d)",
               "weight matrix");
  expect_error(host->net_spectral_norm(net, "bn", 1, 1e-12f), "layer d.bn (batchnorm2d)",
               "weight matrix");
  expect_error(host->net_spectral_norm(net, "fc", 1, 1e-12f), "net d: spectral norm on 'fc'",
               "no layer of that name");
  expect_error(host->net_spectral_norm(net, NULL, 1, 1e-12f), "net d: spectral norm on ''",
               "no layer of that name");
  expect_error(host->net_spectral_norm(net, "c", 0, 1e-12f), "layer d.c (conv2d)",
               "n_power_iterations >= 1");
  expect_error(host->net_spectral_norm(net, "c", 1, 0.0f), "layer d.c (conv2d)", "eps > 0");
  expect_error(host->net_spectral_norm(net, "c", 1, NAN), "layer d.c (conv2d)", "eps > 0");
  CU_ASSERT_EQUAL(host->net_spectral_norm(net, "c", 1, 1e-12f), GANFW_OK);
  expect_error(host->net_spectral_norm(net, "c", 1, 1e-12f), "layer d.c (conv2d)", "applied twice");
  CU_ASSERT_EQUAL(host->net_embedding(net, "emb", 4, 2), GANFW_OK);
  expect_error(host->net_spectral_norm(net, "emb", 1, 1e-12f), "layer d.emb (embedding)",
               "weight matrix");
  double sigma;
  expect_error(ganfw_net_spectral_norm_sigma(net, "relu", &sigma), "layer d.relu", "no spectral");
  ganfw_net_destroy(net);
  net = host->net_create(c, "d");
  CU_ASSERT_EQUAL(host->net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(host->net_linear(net, "fc", 4, 2, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(host->net_build(net, 4, 1, 1), GANFW_OK);
  expect_error(host->net_spectral_norm(net, "fc", 1, 1e-12f), "net d: spectral norm on 'fc'",
               "after net_build");
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* --- the backend ops -------------------------------------------------------------------- */

static void test_backend_ops(void) {
  ganfw_backend *be = ganfw_cpu_backend();
  /* transpose01 against the definition, and back */
  enum { A = 5, B = 7, C = 3 };
  float x[A * B * C], y[A * B * C], z[A * B * C];
  gt_fill_uniform(x, A * B * C, -1, 1, 1);
  ganfw_be_transpose01(be, A, B, C, x, y);
  int ok = 1;
  for (int a = 0; a < A; a++)
    for (int b = 0; b < B; b++)
      for (int c = 0; c < C; c++) ok &= y[(b * A + a) * C + c] == x[(a * B + b) * C + c];
  CU_ASSERT(ok);
  ganfw_be_transpose01(be, B, A, C, y, z);
  CU_ASSERT(memcmp(x, z, sizeof x) == 0);
  /* the scatter-add: overwrite (untouched rows 0), then add */
  const int32_t ids[5] = {2, 0, 2, 2, 3};
  float dy[5 * 2], dw[5 * 2], want[5 * 2];
  gt_fill_uniform(dy, 10, -1, 1, 2);
  for (int i = 0; i < 10; i++) dw[i] = 100.0f;
  ganfw_be_embedding_backward(be, 5, 5, 2, ids, dy, dw, 0);
  memset(want, 0, sizeof want);
  for (int n = 0; n < 5; n++)
    for (int d = 0; d < 2; d++) want[ids[n] * 2 + d] += dy[n * 2 + d];
  CU_ASSERT(memcmp(dw, want, sizeof dw) == 0);
  ganfw_be_embedding_backward(be, 5, 5, 2, ids, dy, dw, 1);
  for (int n = 0; n < 5; n++)
    for (int d = 0; d < 2; d++) want[ids[n] * 2 + d] += dy[n * 2 + d];
  CU_ASSERT(memcmp(dw, want, sizeof dw) == 0);
  float w[5 * 2], out[5 * 2];
  gt_fill_uniform(w, 10, -1, 1, 3);
  ganfw_be_embedding_forward(be, 5, 2, ids, w, out);
  for (int n = 0; n < 5; n++) CU_ASSERT(memcmp(out + 2 * n, w + 2 * ids[n], 8) == 0);
}

static CU_TestInfo tests[] = {
    {"embedding against PyTorch (f32, f16, bf16; 1 and 2 threads)", test_embedding},
    {"embedding weight init N(0, 1)", test_embedding_init},
    {"embedding: bad ids and shapes", test_embedding_bad_ids},
    {"spectral norm against PyTorch (linear, conv2d, conv_transpose2d)", test_spectral_norm},
    {"spectral norm under gradient checkpointing", test_spectral_norm_checkpointing},
    {"spectral norm buffers: order, snapshot, checkpoint file", test_spectral_norm_buffers},
    {"spectral norm: bad uses", test_spectral_norm_errors},
    {"backend: transpose01 and the embedding scatter-add", test_backend_ops},
    CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("ref_embed_sn", tests, suite_init, suite_clean);
}
