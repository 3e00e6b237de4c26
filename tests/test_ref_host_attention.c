/* The host's attention, layout and indexing ops (ganfw/host.h, ABI 1.8: tensor_bmm,
 * tensor_softmax, tensor_softmax_backward, tensor_permute, tensor_reshape, tensor_gather,
 * tensor_scatter_add) through the host table, against PyTorch 1.13 (tests/ref/
 * gen_host_attention.py), forward and backward: bmm in every transpose combination, with
 * accumulate and its gradients; softmax and log_softmax over several dims (negative ones, in
 * place, masked entries); permutes of 2 to 4 dims and their inverse; views sharing memory;
 * gather with repeated indices and its gradient by scatter_add; and a SAGAN-style attention
 * block written with these ops alone, against autograd. Copies (permute, gather) must give the
 * same bits; products and sums are held to a few f32 roundings of the f64 reference. Then:
 * results independent of the thread count, bad input refused with a message naming the op and
 * tensors (shapes, dtypes, out-of-range indices, overlapping outputs), and the ops under
 * planning (the meta backend). The torch comparisons run on the CPU backend, and again on
 * CUDA where the build has it and the machine a device (else those tests note a skip). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/error.h"
#include "ganfw/ganfw.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"

static const ganfw_host *H;

static int have_cuda(void) {
#ifdef GANFW_HAVE_CUDA
  return ganfw_cuda_device_count(NULL, 0) > 0;
#else
  return 0;
#endif
}

static ganfw_ctx *make_ctx(int32_t device, int threads, int meta) {
  ganfw_ctx_options opt = {.device_type = device, .threads = threads, .seed = 5, .meta = meta};
  ganfw_ctx *ctx = NULL;
  ganfw_status st = ganfw_ctx_create(&opt, &ctx);
  if (st != GANFW_OK) printf("\n    %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  return ctx;
}

static ganfw_tensor *make_dt(ganfw_ctx *ctx, int32_t dtype, int32_t ndim, const int64_t *shape,
                             const char *name) {
  ganfw_tensor *t = H->tensor_create(ctx, dtype, ndim, shape, GANFW_MEM_OTHER, name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  return t;
}

static ganfw_tensor *make(ganfw_ctx *ctx, int32_t ndim, const int64_t *shape, const char *name) {
  return make_dt(ctx, GANFW_DTYPE_F32, ndim, shape, name);
}

/* A tensor shaped like the reference `key` (f32, contents unset). */
static ganfw_tensor *make_like(ganfw_ctx *ctx, gt_ref *ref, const char *key, const char *name) {
  int64_t n = 0, shape[8] = {0};
  int nd = 0;
  CU_ASSERT_PTR_NOT_NULL_FATAL(gt_ref_f32(ref, key, &n, shape, &nd));
  return make(ctx, nd, shape, name);
}

/* A tensor holding the reference values of `key` in its shape: f32, or i32 for an index. */
static ganfw_tensor *from_ref_dt(ganfw_ctx *ctx, gt_ref *ref, const char *key, int32_t dtype) {
  int64_t n = 0, shape[8] = {0};
  int nd = 0;
  const float *v = gt_ref_f32(ref, key, &n, shape, &nd);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  ganfw_tensor *t = make_dt(ctx, dtype, nd, shape, key);
  const void *src = v;
  if (dtype == GANFW_DTYPE_I32) {
    src = gt_ref_i32(ref, key, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
  }
  CU_ASSERT_EQUAL_FATAL(H->tensor_from_host(t, src, n * 4), GANFW_OK);
  return t;
}

static ganfw_tensor *from_ref(ganfw_ctx *ctx, gt_ref *ref, const char *key) {
  return from_ref_dt(ctx, ref, key, GANFW_DTYPE_F32);
}

/* The tensor's values, malloc'ed. */
static float *values(const ganfw_tensor *t) {
  float *v = malloc((size_t)t->nbytes);
  CU_ASSERT_FATAL(v && H->tensor_to_host(t, v, t->nbytes) == GANFW_OK);
  return v;
}

/* Compares t with the reference `key` of the same element count: tol 0 asks for the same bits,
 * else max |got - want| / max(|want|, floor) <= tol. */
static void expect(const char *what, const ganfw_tensor *t, gt_ref *ref, const char *key,
                   double tol, double floor) {
  int64_t n = 0;
  const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_EQUAL_FATAL(n, t->numel);
  float *got = values(t);
  if (tol == 0) {
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++)
      if (memcmp(&got[i], &want[i], 4) != 0 && diff++ < 3)
        printf("\n    %s[%lld]: got %.9g, torch %.9g", what, (long long)i, got[i], want[i]);
    if (diff) printf("\n    %s: %lld of %lld differ", what, (long long)diff, (long long)n);
    CU_ASSERT_EQUAL(diff, 0);
  } else {
    gt_check_close(what, got, want, n, tol, floor);
  }
  free(got);
}

/* The recorded error message contains each of the NULL-terminated needles. */
static int message_has(const char *first, ...) {
  const char *msg = ganfw_error_message();
  va_list ap;
  va_start(ap, first);
  int ok = 1;
  for (const char *s = first; s; s = va_arg(ap, const char *))
    if (!strstr(msg, s)) {
      printf("\n    expected '%s' in: %s", s, msg);
      ok = 0;
    }
  va_end(ap);
  return ok;
}

static void destroy_all(ganfw_tensor **t, int n) {
  for (int i = n - 1; i >= 0; i--) H->tensor_destroy(t[i]);
}

/* --- the table ----------------------------------------------------------------------------- */

static void test_table(void) {
  CU_ASSERT(H->abi_minor >= 8);
  CU_ASSERT(GANFW_HOST_HAS(H, tensor_scatter_add));
  void (*const entries[])(void) = {(void (*)(void))H->tensor_bmm,
                                   (void (*)(void))H->tensor_softmax,
                                   (void (*)(void))H->tensor_softmax_backward,
                                   (void (*)(void))H->tensor_permute,
                                   (void (*)(void))H->tensor_reshape,
                                   (void (*)(void))H->tensor_gather,
                                   (void (*)(void))H->tensor_scatter_add};
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    CU_ASSERT_PTR_NOT_NULL(entries[i]);
}

/* --- bmm ----------------------------------------------------------------------------------- */

/* f32 products of K terms against f64: a few roundings of the values' scale (about 1 for K 5,
 * about 10 for K 80 and 192, hence BIG_FLOOR). Measured on the CPU: 1.8e-7, and 1.3e-6 of 10. */
#define BMM_TOL   1e-6
#define BIG_TOL   4e-6
#define BIG_FLOOR 10.0

static void check_bmm(int32_t device) {
  gt_ref *ref = gt_ref_open("host_attention");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(device, 2, 0);
  ganfw_tensor *a = from_ref(ctx, ref, "bmm_a"), *at = from_ref(ctx, ref, "bmm_at");
  ganfw_tensor *b = from_ref(ctx, ref, "bmm_b"), *bt = from_ref(ctx, ref, "bmm_bt");
  ganfw_tensor *dy = from_ref(ctx, ref, "bmm_dy"), *y = make_like(ctx, ref, "bmm_y", "y");
  const struct {
    const ganfw_tensor *a;
    int32_t ta;
    const ganfw_tensor *b;
    int32_t tb;
    const char *what;
  } cases[] = {{a, 0, b, 0, "a @ b"},
               {at, 1, b, 0, "at^T @ b"},
               {a, 0, bt, 1, "a @ bt^T"},
               {at, 1, bt, 1, "at^T @ bt^T"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CU_ASSERT_EQUAL(H->tensor_bmm(ctx, y, cases[i].a, cases[i].ta, cases[i].b, cases[i].tb, 0),
                    GANFW_OK);
    expect(cases[i].what, y, ref, "bmm_y", BMM_TOL, 1.0);
  }
  /* accumulate: y = c0 + a @ b */
  int64_t n = 0;
  const float *c0 = gt_ref_f32(ref, "bmm_c0", &n, NULL, NULL);
  CU_ASSERT_EQUAL_FATAL(H->tensor_from_host(y, c0, n * 4), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, y, a, 0, b, 0, 1), GANFW_OK);
  expect("c0 + a @ b", y, ref, "bmm_acc", BMM_TOL, 1.0);
  /* the gradients of y = a @ b: da = dy @ b^T, db = a^T @ dy */
  ganfw_tensor *da = make(ctx, 3, a->shape, "da"), *db = make(ctx, 3, b->shape, "db");
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, da, dy, 0, b, 1, 0), GANFW_OK);
  expect("da = dy @ b^T", da, ref, "bmm_da", BMM_TOL, 1.0);
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, db, a, 1, dy, 0, 0), GANFW_OK);
  expect("db = a^T @ dy", db, ref, "bmm_db", BMM_TOL, 1.0);
  /* a batch shared out over the threads; one matrix split in blocks (K 80 and 192) */
  ganfw_tensor *big_a = from_ref(ctx, ref, "bmm_big_a"), *big_b = from_ref(ctx, ref, "bmm_big_b");
  ganfw_tensor *big_y = make_like(ctx, ref, "bmm_big_y", "big_y");
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, big_y, big_a, 0, big_b, 0, 0), GANFW_OK);
  expect("big batch", big_y, ref, "bmm_big_y", BIG_TOL, BIG_FLOOR);
  ganfw_tensor *one_a = from_ref(ctx, ref, "bmm_one_a"), *one_b = from_ref(ctx, ref, "bmm_one_b");
  ganfw_tensor *one_y = make_like(ctx, ref, "bmm_one_y", "one_y");
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, one_y, one_a, 0, one_b, 1, 0), GANFW_OK);
  expect("one large matrix", one_y, ref, "bmm_one_y", BIG_TOL, BIG_FLOOR);
  ganfw_tensor *all[] = {a, at, b, bt, dy, y, da, db, big_a, big_b, big_y, one_a, one_b, one_y};
  destroy_all(all, sizeof all / sizeof all[0]);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* --- softmax ------------------------------------------------------------------------------- */

/* softmax: relative to the probabilities (exp and the subtraction of the max: a few
 * roundings; measured 5.4e-7 on the CPU); log_softmax: to the scale of the values (1.1e-7);
 * gradients to that of dy (1.1e-7). */
#define SOFTMAX_TOL 2e-6
#define LOG_TOL     5e-7
#define SM_GRAD_TOL 1e-6

static void check_softmax(int32_t device) {
  gt_ref *ref = gt_ref_open("host_attention");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(device, 2, 0);
  ganfw_tensor *x = from_ref(ctx, ref, "sm_x"), *dy = from_ref(ctx, ref, "sm_dy");
  ganfw_tensor *y = make(ctx, x->ndim, x->shape, "y"), *dx = make(ctx, x->ndim, x->shape, "dx");
  const struct {
    const char *name;
    int32_t dim, log;
  } cases[] = {
      {"d1", 1, 0}, {"dlast", -1, 0}, {"d0", 0, 0}, {"log_d2", 2, 1}, {"log_dlast", -1, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char ky[32], kdx[32];
    snprintf(ky, sizeof ky, "sm_%s_y", cases[i].name);
    snprintf(kdx, sizeof kdx, "sm_%s_dx", cases[i].name);
    CU_ASSERT_EQUAL(H->tensor_softmax(ctx, y, x, cases[i].dim, cases[i].log), GANFW_OK);
    if (cases[i].log)
      expect(ky, y, ref, ky, LOG_TOL, 1.0);
    else
      expect(ky, y, ref, ky, SOFTMAX_TOL, 1e-6);
    CU_ASSERT_EQUAL(H->tensor_softmax_backward(ctx, dx, y, dy, cases[i].dim, cases[i].log),
                    GANFW_OK);
    expect(kdx, dx, ref, kdx, SM_GRAD_TOL, 1.0);
  }
  /* in place: out is x, dx is dy */
  int64_t n = 0;
  const float *xv = gt_ref_f32(ref, "sm_x", &n, NULL, NULL),
              *dyv = gt_ref_f32(ref, "sm_dy", &n, NULL, NULL);
  CU_ASSERT_EQUAL(H->tensor_from_host(y, xv, n * 4), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_softmax(ctx, y, y, -1, 0), GANFW_OK);
  expect("softmax in place", y, ref, "sm_dlast_y", SOFTMAX_TOL, 1e-6);
  CU_ASSERT_EQUAL(H->tensor_from_host(dx, dyv, n * 4), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_softmax_backward(ctx, dx, y, dx, -1, 0), GANFW_OK);
  expect("softmax_backward in place", dx, ref, "sm_dlast_dx", SM_GRAD_TOL, 1.0);
  /* masked entries (-inf, as an attention mask): probability 0, gradient 0 */
  ganfw_tensor *m = from_ref(ctx, ref, "sm_masked"), *dym = from_ref(ctx, ref, "sm_dy_masked");
  ganfw_tensor *ym = make(ctx, 2, m->shape, "ym"), *dxm = make(ctx, 2, m->shape, "dxm");
  CU_ASSERT_EQUAL(H->tensor_softmax(ctx, ym, m, -1, 0), GANFW_OK);
  expect("masked softmax", ym, ref, "sm_masked_y", SOFTMAX_TOL, 1e-6);
  CU_ASSERT_EQUAL(H->tensor_softmax_backward(ctx, dxm, ym, dym, 1, 0), GANFW_OK);
  expect("masked softmax backward", dxm, ref, "sm_masked_dx", SM_GRAD_TOL, 1.0);
  ganfw_tensor *all[] = {x, dy, y, dx, m, dym, ym, dxm};
  destroy_all(all, sizeof all / sizeof all[0]);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* --- permute ------------------------------------------------------------------------------- */

static void check_permute(int32_t device) {
  gt_ref *ref = gt_ref_open("host_attention");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(device, 2, 0);
  const struct {
    const char *name;
    int32_t perm[4];
  } cases[] = {{"p3a", {2, 0, 1}},    {"p3b", {0, 2, 1}},       {"p4a", {0, 2, 3, 1}},
               {"p4b", {3, 1, 0, 2}}, {"p4neg", {0, -1, 1, 2}}, {"p2", {1, 0}}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char k[4][32];
    const char *part[4] = {"x", "y", "dy", "dx"};
    for (int j = 0; j < 4; j++) snprintf(k[j], sizeof k[j], "perm_%s_%s", cases[i].name, part[j]);
    ganfw_tensor *x = from_ref(ctx, ref, k[0]), *y = make_like(ctx, ref, k[1], "y");
    CU_ASSERT_EQUAL(H->tensor_permute(ctx, y, x, cases[i].perm), GANFW_OK);
    expect(k[1], y, ref, k[1], 0, 0);
    /* the backward: dy permuted by the inverse permutation */
    int32_t inv[4];
    for (int32_t d = 0; d < x->ndim; d++) {
      const int32_t p = cases[i].perm[d] < 0 ? cases[i].perm[d] + x->ndim : cases[i].perm[d];
      inv[p] = d;
    }
    ganfw_tensor *dy = from_ref(ctx, ref, k[2]), *dx = make(ctx, x->ndim, x->shape, "dx");
    CU_ASSERT_EQUAL(H->tensor_permute(ctx, dx, dy, inv), GANFW_OK);
    expect(k[3], dx, ref, k[3], 0, 0);
    ganfw_tensor *all[] = {x, y, dy, dx};
    destroy_all(all, 4);
  }
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* --- reshape ------------------------------------------------------------------------------- */

/* A view shares its tensor's memory both ways, keeps it alive, and takes its name by default;
 * any dtype views. */
static void check_reshape(int32_t device) {
  ganfw_ctx *ctx = make_ctx(device, 1, 0);
  ganfw_tensor *x = make(ctx, 4, (int64_t[]){2, 3, 4, 5}, "x");
  float v[120], back[120];
  gt_fill_uniform(v, 120, -1, 1, 3);
  CU_ASSERT_EQUAL(H->tensor_from_host(x, v, sizeof v), GANFW_OK);
  ganfw_tensor *r = H->tensor_reshape(x, 2, (int64_t[]){6, 20}, "x.rows");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT(r->data == x->data && r->ndim == 2 && r->shape[0] == 6 && r->shape[1] == 20);
  CU_ASSERT(r->numel == 120 && r->nbytes == 480 && r->dtype == GANFW_DTYPE_F32);
  CU_ASSERT_STRING_EQUAL(r->name, "x.rows");
  CU_ASSERT_EQUAL(H->tensor_to_host(r, back, sizeof back), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(back, v, sizeof v), 0);
  /* a write through the view is seen in x */
  for (int i = 0; i < 120; i++) v[i] = (float)i;
  CU_ASSERT_EQUAL(H->tensor_from_host(r, v, sizeof v), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_to_host(x, back, sizeof back), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(back, v, sizeof v), 0);
  /* a view of a view, named after its tensor when no name is given; it outlives x */
  ganfw_tensor *flat = H->tensor_reshape(r, 1, (int64_t[]){120}, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(flat);
  CU_ASSERT_STRING_EQUAL(flat->name, "x.rows");
  H->tensor_destroy(x);
  H->tensor_destroy(r);
  CU_ASSERT_EQUAL(H->tensor_to_host(flat, back, sizeof back), GANFW_OK);
  CU_ASSERT_EQUAL(back[119], 119.0f);
  /* an index tensor views too */
  ganfw_tensor *idx = make_dt(ctx, GANFW_DTYPE_I32, 2, (int64_t[]){4, 3}, "idx");
  ganfw_tensor *idx_v = H->tensor_reshape(idx, 3, (int64_t[]){2, 2, 3}, "idx.v");
  CU_ASSERT(idx_v && idx_v->dtype == GANFW_DTYPE_I32 && idx_v->data == idx->data);
  /* other counts, negative sizes, too many dims: NULL with the error */
  CU_ASSERT_PTR_NULL(H->tensor_reshape(flat, 2, (int64_t[]){7, 20}, "bad"));
  CU_ASSERT(message_has("tensor_reshape", "'x.rows' [120] has 120 elements", "[7,20]", NULL));
  CU_ASSERT_PTR_NULL(H->tensor_reshape(flat, 2, (int64_t[]){-12, -10}, "bad"));
  CU_ASSERT(message_has("tensor_reshape", "negative size", NULL));
  CU_ASSERT_PTR_NULL(H->tensor_reshape(flat, 5, (int64_t[]){1, 1, 1, 1, 120}, "bad"));
  CU_ASSERT(message_has("tensor_reshape", "5 dims", NULL));
  CU_ASSERT_PTR_NULL(H->tensor_reshape(NULL, 1, (int64_t[]){1}, "bad"));
  CU_ASSERT(message_has("tensor_reshape: x is NULL", NULL));
  H->tensor_destroy(idx_v);
  H->tensor_destroy(idx);
  H->tensor_destroy(flat);
  ganfw_ctx_destroy(ctx);
}

/* --- gather and scatter_add ---------------------------------------------------------------- */

static void check_gather(int32_t device) {
  gt_ref *ref = gt_ref_open("host_attention");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(device, 2, 0);
  ganfw_tensor *x = from_ref(ctx, ref, "ga_x");
  const struct {
    const char *name;
    int32_t dim;
  } cases[] = {{"g1", 1}, {"glast", -1}, {"g0", 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char k[4][32];
    const char *part[4] = {"idx", "y", "dy", "dx"};
    for (int j = 0; j < 4; j++) snprintf(k[j], sizeof k[j], "ga_%s_%s", cases[i].name, part[j]);
    ganfw_tensor *idx = from_ref_dt(ctx, ref, k[0], GANFW_DTYPE_I32);
    ganfw_tensor *y = make(ctx, idx->ndim, idx->shape, "y");
    CU_ASSERT_EQUAL(H->tensor_gather(ctx, y, x, cases[i].dim, idx), GANFW_OK);
    expect(k[1], y, ref, k[1], 0, 0);
    /* the backward: zero dx, then scatter_add dy into it (repeated indices add up) */
    ganfw_tensor *dy = from_ref(ctx, ref, k[2]), *dx = make(ctx, x->ndim, x->shape, "dx");
    CU_ASSERT_EQUAL(H->foreach_fill(ctx, &dx, 1, 0.0f), GANFW_OK);
    CU_ASSERT_EQUAL(H->tensor_scatter_add(ctx, dx, cases[i].dim, idx, dy), GANFW_OK);
    expect(k[3], dx, ref, k[3], 1e-6, 1.0);
    ganfw_tensor *all[] = {idx, y, dy, dx};
    destroy_all(all, 4);
  }
  /* scatter_add into values already there */
  ganfw_tensor *out = from_ref(ctx, ref, "ga_sc_out0"), *src = from_ref(ctx, ref, "ga_sc_src");
  ganfw_tensor *idx = from_ref_dt(ctx, ref, "ga_sc_idx", GANFW_DTYPE_I32);
  CU_ASSERT_EQUAL(H->tensor_scatter_add(ctx, out, 1, idx, src), GANFW_OK);
  expect("scatter_add", out, ref, "ga_sc_y", 1e-6, 1.0);
  /* an index outside the dim, read back from the device, is refused before any kernel runs */
  int32_t bad[84];
  for (int i = 0; i < 84; i++) bad[i] = i % 5;
  bad[61] = 5;
  CU_ASSERT_EQUAL(H->tensor_from_host(idx, bad, sizeof bad), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_scatter_add(ctx, out, 1, idx, src), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_scatter_add", "'ga_sc_idx' [3,7,4] holds 5 at element 61",
                        "outside [0, 5)", "dim 1 of out 'ga_sc_out0' [3,5,4]", NULL));
  bad[61] = -1;
  CU_ASSERT_EQUAL(H->tensor_from_host(idx, bad, sizeof bad), GANFW_OK);
  ganfw_tensor *y = make(ctx, 3, idx->shape, "y");
  CU_ASSERT_EQUAL(H->tensor_gather(ctx, y, x, 1, idx), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_gather", "holds -1 at element 61", "dim 1 of x 'ga_x'", NULL));
  ganfw_tensor *all[] = {x, out, src, idx, y};
  destroy_all(all, sizeof all / sizeof all[0]);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* --- an attention block -------------------------------------------------------------------- */

/* SAGAN's attention on q, k, v [N,C,H,W] with the host ops alone, as a plugin layer would write
 * it: views [N,C,L], q and v permuted to [N,L,C], S = q^T k * scale, P = softmax(S, -1),
 * O = P v; backward dP = dO v^T, dv = P^T dO, dS = softmax_backward(P, dP) * scale,
 * dq = dS k^T, dk = q^T dS, then permuted and viewed back to [N,C,H,W]. */
static void check_attention(int32_t device) {
  gt_ref *ref = gt_ref_open("host_attention");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx(device, 2, 0);
  ganfw_tensor *q = from_ref(ctx, ref, "att_q"), *k = from_ref(ctx, ref, "att_k");
  ganfw_tensor *v = from_ref(ctx, ref, "att_v"), *d_o = from_ref(ctx, ref, "att_do");
  const float scale = (float)gt_ref_scalar(ref, "att_scale");
  const int64_t N = q->shape[0], C = q->shape[1], L = q->shape[2] * q->shape[3];
  const int64_t ncl[3] = {N, C, L}, nlc[3] = {N, L, C}, nll[3] = {N, L, L};
  const int32_t swap[3] = {0, 2, 1};
  ganfw_tensor *qv = H->tensor_reshape(q, 3, ncl, "q.view"),
               *kv = H->tensor_reshape(k, 3, ncl, "k.view");
  ganfw_tensor *vv = H->tensor_reshape(v, 3, ncl, "v.view");
  CU_ASSERT_FATAL(qv && kv && vv);
  ganfw_tensor *qt = make(ctx, 3, nlc, "qt"), *vt = make(ctx, 3, nlc, "vt");
  ganfw_tensor *s = make(ctx, 3, nll, "s"), *p = make(ctx, 3, nll, "p"),
               *o = make(ctx, 3, nlc, "o");
  ganfw_status st;
  if ((st = H->tensor_permute(ctx, qt, qv, swap)) || (st = H->tensor_permute(ctx, vt, vv, swap)) ||
      (st = H->tensor_bmm(ctx, s, qt, 0, kv, 0, 0)) ||
      (st = H->tensor_mul_scalar(ctx, s, s, scale)) || (st = H->tensor_softmax(ctx, p, s, -1, 0)) ||
      (st = H->tensor_bmm(ctx, o, p, 0, vt, 0, 0)))
    printf("\n    %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  expect("attention P", p, ref, "att_p", SOFTMAX_TOL, 1e-6);
  expect("attention O", o, ref, "att_o", BMM_TOL, 1.0);
  ganfw_tensor *dp = make(ctx, 3, nll, "dp"), *dvt = make(ctx, 3, nlc, "dvt");
  ganfw_tensor *dqt = make(ctx, 3, nlc, "dqt"), *dkv = make(ctx, 3, ncl, "dk");
  ganfw_tensor *dqv = make(ctx, 3, ncl, "dq"), *dvv = make(ctx, 3, ncl, "dv");
  if ((st = H->tensor_bmm(ctx, dp, d_o, 0, vt, 1, 0)) ||
      (st = H->tensor_bmm(ctx, dvt, p, 1, d_o, 0, 0)) ||
      (st = H->tensor_softmax_backward(ctx, dp, p, dp, -1, 0)) ||
      (st = H->tensor_mul_scalar(ctx, dp, dp, scale)) ||
      (st = H->tensor_bmm(ctx, dqt, dp, 0, kv, 1, 0)) ||
      (st = H->tensor_bmm(ctx, dkv, qt, 1, dp, 0, 0)) ||
      (st = H->tensor_permute(ctx, dqv, dqt, swap)) ||
      (st = H->tensor_permute(ctx, dvv, dvt, swap)))
    printf("\n    %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_tensor *dq = H->tensor_reshape(dqv, 4, q->shape, "dq.nchw");
  CU_ASSERT_PTR_NOT_NULL_FATAL(dq);
  CU_ASSERT_EQUAL(dq->ndim, 4);
  /* four products and a softmax deep: measured 1.1e-6 of 0.1 */
  expect("attention dq", dq, ref, "att_dq", 5e-6, 1e-1);
  expect("attention dk", dkv, ref, "att_dk", 5e-6, 1e-1);
  expect("attention dv", dvv, ref, "att_dv", 5e-6, 1e-1);
  ganfw_tensor *all[] = {q, k, v,  d_o, qv,  kv,  vv,  qt,  vt, s,
                         p, o, dp, dvt, dqt, dkv, dqv, dvv, dq};
  destroy_all(all, sizeof all / sizeof all[0]);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* --- the CPU and CUDA runs of each check ------------------------------------------------- */

#define ON_BOTH(check)                                                                             \
  static void check##_cpu(void) {                                                                  \
    check(GANFW_DEVICE_CPU);                                                                       \
  }                                                                                                \
  static void check##_cuda(void) {                                                                 \
    if (have_cuda())                                                                               \
      check(GANFW_DEVICE_CUDA);                                                                    \
    else                                                                                           \
      printf("(no CUDA device: skipped) ");                                                        \
  }
ON_BOTH(check_bmm)
ON_BOTH(check_softmax)
ON_BOTH(check_permute)
ON_BOTH(check_reshape)
ON_BOTH(check_gather)
ON_BOTH(check_attention)

/* --- threads ------------------------------------------------------------------------------- */

/* The ops' results on CPU runs of 1, 2 and 3 threads, bit for bit, on shapes past every
 * parallel threshold: a batch of products, one product split in blocks, softmax over the last
 * and a strided dim, and scatter_add with repeated indices. */
static void test_threads(void) {
  enum { OUTS = 6 };
  float *first[OUTS] = {0};
  int64_t count[OUTS] = {0};
  for (int threads = 1; threads <= 3; threads++) {
    ganfw_ctx *ctx = make_ctx(GANFW_DEVICE_CPU, threads, 0);
    const int64_t sa[3] = {8, 64, 96}, sb[3] = {8, 96, 80}, sy[3] = {8, 64, 80};
    const int64_t oa[3] = {1, 256, 192}, ob[3] = {1, 200, 192}, oy[3] = {1, 256, 200};
    const int64_t sx[3] = {16, 48, 64}, so[3] = {4, 50, 300}, si[3] = {4, 200, 300};
    ganfw_tensor *in[] = {make(ctx, 3, sa, "a"),  make(ctx, 3, sb, "b"),  make(ctx, 3, oa, "oa"),
                          make(ctx, 3, ob, "ob"), make(ctx, 3, sx, "sx"), make(ctx, 3, si, "src")};
    ganfw_tensor *out[OUTS] = {make(ctx, 3, sy, "y"),  make(ctx, 3, oy, "oy"),
                               make(ctx, 3, sx, "p1"), make(ctx, 3, sx, "p2"),
                               make(ctx, 3, sx, "dx"), make(ctx, 3, so, "acc")};
    for (int i = 0; i < 6; i++) {
      float *v = malloc((size_t)in[i]->nbytes);
      gt_fill_uniform(v, in[i]->numel, -3, 3, 40 + (uint64_t)i);
      CU_ASSERT_EQUAL(H->tensor_from_host(in[i], v, in[i]->nbytes), GANFW_OK);
      free(v);
    }
    ganfw_tensor *idx = make_dt(ctx, GANFW_DTYPE_I32, 3, si, "idx");
    int32_t *iv = malloc((size_t)idx->nbytes);
    float *u = malloc((size_t)idx->numel * sizeof *u);
    gt_fill_uniform(u, idx->numel, 0, 50, 77);
    for (int64_t i = 0; i < idx->numel; i++) iv[i] = (int32_t)u[i] % 50;
    CU_ASSERT_EQUAL(H->tensor_from_host(idx, iv, idx->nbytes), GANFW_OK);
    free(u);
    free(iv);
    CU_ASSERT_EQUAL(H->tensor_bmm(ctx, out[0], in[0], 0, in[1], 0, 0), GANFW_OK);
    CU_ASSERT_EQUAL(H->tensor_bmm(ctx, out[1], in[2], 0, in[3], 1, 0), GANFW_OK);
    CU_ASSERT_EQUAL(H->tensor_softmax(ctx, out[2], in[4], -1, 0), GANFW_OK);
    CU_ASSERT_EQUAL(H->tensor_softmax(ctx, out[3], in[4], 1, 1), GANFW_OK);
    CU_ASSERT_EQUAL(H->tensor_softmax_backward(ctx, out[4], out[2], in[4], 1, 0), GANFW_OK);
    CU_ASSERT_EQUAL(H->foreach_fill(ctx, &out[5], 1, 0.5f), GANFW_OK);
    CU_ASSERT_EQUAL(H->tensor_scatter_add(ctx, out[5], 1, idx, in[5]), GANFW_OK);
    for (int i = 0; i < OUTS; i++) {
      float *v = values(out[i]);
      if (threads == 1) {
        first[i] = v, count[i] = out[i]->numel;
        continue;
      }
      if (memcmp(v, first[i], (size_t)count[i] * sizeof *v) != 0)
        printf("\n    output %d differs between 1 and %d threads", i, threads);
      CU_ASSERT_EQUAL(memcmp(v, first[i], (size_t)count[i] * sizeof *v), 0);
      free(v);
    }
    H->tensor_destroy(idx);
    destroy_all(out, OUTS);
    destroy_all(in, 6);
    ganfw_ctx_destroy(ctx);
  }
  for (int i = 0; i < OUTS; i++) free(first[i]);
}

/* --- bad input ------------------------------------------------------------------------------ */

static void test_bad_input(void) {
  ganfw_ctx *ctx = make_ctx(GANFW_DEVICE_CPU, 1, 0), *other = make_ctx(GANFW_DEVICE_CPU, 1, 0);
  ganfw_tensor *q = make(ctx, 3, (int64_t[]){2, 3, 4}, "q"),
               *k = make(ctx, 3, (int64_t[]){2, 5, 6}, "k");
  ganfw_tensor *s = make(ctx, 3, (int64_t[]){2, 3, 6}, "s"),
               *m2 = make(ctx, 2, (int64_t[]){3, 4}, "m2");
  ganfw_tensor *h = make_dt(ctx, GANFW_DTYPE_F16, 3, (int64_t[]){2, 3, 4}, "half");
  ganfw_tensor *foreign = make(other, 3, (int64_t[]){2, 3, 4}, "foreign");
  const int64_t zeros[12] = {0};
  /* bmm: inner dims, out's shape, dims, dtype, run, out over an input */
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, s, q, 0, k, 0, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_bmm", "'q' [2,3,4]", "'k' [2,5,6]", "do not multiply",
                        "op(a) is [2,3,4] and op(b) [2,5,6]", NULL));
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, s, q, 1, k, 0, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("'q' [2,3,4] (transposed)", NULL));
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, q, q, 0, q, 1, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_bmm: out 'q' is [2,3,4], but op(a) @ op(b)", "is [2,3,3]", NULL));
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, s, m2, 0, k, 0, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("'m2' [3,4]", "must each have 3 dims", NULL));
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, s, h, 0, k, 0, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_bmm: a 'half' is f16, f32 is required", NULL));
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, s, foreign, 0, k, 0, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("'foreign' belongs to another run", NULL));
  ganfw_tensor *sq = make(ctx, 3, (int64_t[]){2, 4, 4}, "sq");
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, sq, sq, 0, sq, 0, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_bmm: out 'sq' shares memory with a 'sq'", NULL));
  /* softmax: dim, shapes, a partial overlap */
  CU_ASSERT_EQUAL(H->tensor_softmax(ctx, q, q, 3, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_softmax", "dim 3 is outside x 'q' [2,3,4]", "[-3, 3)", NULL));
  CU_ASSERT_EQUAL(H->tensor_softmax(ctx, s, q, -1, 1), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_softmax (log)", "out 's' is [2,3,6]", "one shape", NULL));
  CU_ASSERT_EQUAL(H->tensor_softmax_backward(ctx, q, q, s, 0, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_softmax_backward", "dy 's' is [2,3,6]", NULL));
  /* in place through a view is fine; rows 0-1 over rows 1-2 of one tensor are not */
  ganfw_tensor *sqv = H->tensor_reshape(sq, 3, (int64_t[]){2, 4, 4}, "sq.view");
  CU_ASSERT_PTR_NOT_NULL_FATAL(sqv);
  CU_ASSERT_EQUAL(H->tensor_softmax(ctx, sqv, sq, 1, 0), GANFW_OK);
  ganfw_tensor *three = make(ctx, 3, (int64_t[]){3, 4, 4}, "three");
  ganfw_tensor *r01 = ganfw_tensor_rows(three, 0, 2, "r01"),
               *r12 = ganfw_tensor_rows(three, 1, 2, "r12");
  CU_ASSERT_FATAL(r01 && r12);
  CU_ASSERT_EQUAL(H->tensor_softmax(ctx, r01, r12, -1, 0), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_softmax: out 'r01' shares memory with x 'r12'", "not a part of it",
                        NULL));
  /* permute: not a permutation, a wrong out, NULL perm */
  CU_ASSERT_EQUAL(H->tensor_permute(ctx, q, q, (int32_t[]){0, 0, 1}), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_permute: perm (0,0,1) is not a permutation of the 3 dims", NULL));
  CU_ASSERT_EQUAL(H->tensor_permute(ctx, q, k, (int32_t[]){0, 3, 1}), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("perm (0,3,1)", NULL));
  CU_ASSERT_EQUAL(H->tensor_permute(ctx, s, q, (int32_t[]){0, 2, 1}), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(
      message_has("out 's' is [2,3,6], but x 'q' [2,3,4] permuted by (0,2,1) is [2,4,3]", NULL));
  CU_ASSERT_EQUAL(H->tensor_permute(ctx, q, q, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_permute: perm is NULL", NULL));
  CU_ASSERT_EQUAL(H->tensor_permute(ctx, sqv, sq, (int32_t[]){0, 2, 1}), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_permute: out 'sq.view' shares memory with x 'sq'",
                        "give it a tensor of its own", NULL));
  /* gather / scatter_add: index dtype, shapes, dims, values */
  ganfw_tensor *idx = make_dt(ctx, GANFW_DTYPE_I32, 3, (int64_t[]){2, 3, 2}, "idx");
  CU_ASSERT_EQUAL(H->tensor_from_host(idx, zeros, 12 * 4), GANFW_OK);
  ganfw_tensor *g = make(ctx, 3, (int64_t[]){2, 3, 2}, "g");
  CU_ASSERT_EQUAL(H->tensor_gather(ctx, g, q, 2, g), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_gather: index 'g' is f32, i32 is required", NULL));
  CU_ASSERT_EQUAL(H->tensor_gather(ctx, g, q, 1, idx), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("index 'idx' is [2,3,2] and x 'q' is [2,3,4]", "but in dim 1", NULL));
  CU_ASSERT_EQUAL(H->tensor_gather(ctx, g, q, -4, idx), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_gather: dim -4 is outside x 'q'", NULL));
  CU_ASSERT_EQUAL(H->tensor_gather(ctx, s, q, 2, idx), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("out 's' is [2,3,6] and index 'idx' is [2,3,2]", NULL));
  CU_ASSERT_EQUAL(H->tensor_gather(ctx, g, q, 2, idx), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_scatter_add(ctx, q, 2, idx, s), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(
      message_has("tensor_scatter_add", "index 'idx' is [2,3,2] and src 's' is [2,3,6]", NULL));
  CU_ASSERT_EQUAL(H->tensor_scatter_add(ctx, k, 2, idx, g), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("index needs out's shape but in dim 2", NULL));
  CU_ASSERT_EQUAL(H->tensor_scatter_add(ctx, q, 2, NULL, g), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("tensor_scatter_add: index is NULL", NULL));
  CU_ASSERT_EQUAL(H->tensor_scatter_add(ctx, q, 2, idx, g), GANFW_OK);
  ganfw_tensor *all[] = {q, k, s, m2, h, foreign, sq, sqv, three, r01, r12, idx, g};
  destroy_all(all, sizeof all / sizeof all[0]);
  ganfw_ctx_destroy(other);
  ganfw_ctx_destroy(ctx);
}

/* --- planning -------------------------------------------------------------------------------- */

/* On the meta backend (`ganfw plan`) every op checks its shapes and computes nothing: the
 * tensors have fake addresses, so touching one would fault; the index check reads zeros. */
static void test_meta(void) {
  ganfw_ctx *ctx = make_ctx(GANFW_DEVICE_CPU, 1, 1);
  const int64_t ncl[3] = {2, 8, 16}, nlc[3] = {2, 16, 8}, nll[3] = {2, 16, 16};
  ganfw_tensor *x = make(ctx, 4, (int64_t[]){2, 8, 4, 4}, "x");
  ganfw_tensor *xv = H->tensor_reshape(x, 3, ncl, "x.view");
  CU_ASSERT_PTR_NOT_NULL_FATAL(xv);
  ganfw_tensor *xt = make(ctx, 3, nlc, "xt"), *s = make(ctx, 3, nll, "s");
  ganfw_tensor *idx = make_dt(ctx, GANFW_DTYPE_I32, 3, nlc, "idx"), *g = make(ctx, 3, nlc, "g");
  const int32_t swap[3] = {0, 2, 1};
  CU_ASSERT_EQUAL(H->tensor_permute(ctx, xt, xv, swap), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, s, xt, 0, xv, 0, 0), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, s, xt, 0, xt, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_softmax(ctx, s, s, -1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_softmax_backward(ctx, s, s, s, -1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_gather(ctx, g, xt, 1, idx), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_scatter_add(ctx, xt, 1, idx, g), GANFW_OK);
  CU_ASSERT_EQUAL(H->tensor_bmm(ctx, s, xt, 0, xt, 0, 0), GANFW_ERR_INVALID_ARG); /* 8 vs 16 */
  ganfw_tensor *all[] = {x, xv, xt, s, idx, g};
  destroy_all(all, sizeof all / sizeof all[0]);
  ganfw_ctx_destroy(ctx);
}

/* --- views inside a plugin layer ------------------------------------------------------------- */

/* A plugin layer "spatial softmax" written with views: y [N,C,H,W] = softmax over each
 * channel's H*W values, as x.view(N,C,HW).softmax(-1); backward from the kept output. Its
 * views hold no bytes of their own, so it reports no workspace and the adapter's byte checks
 * hold; with save_view it puts a view in saved[], which the adapter refuses. */
typedef struct spatial_state {
  int32_t save_view;
} spatial_state;

static ganfw_status spatial_infer(void *state, const int64_t *in, int32_t ndim, int64_t *out,
                                  int32_t *out_ndim) {
  for (int32_t d = 0; d < ndim; d++) out[d] = in[d];
  *out_ndim = ndim;
  return ndim == 4 ? GANFW_OK : GANFW_ERR_INVALID_ARG;
}

/* t [N,C,H,W] viewed as [N,C,H*W]; const dropped as a plugin does for call tensors. */
static ganfw_tensor *rows_of(const ganfw_tensor *t, const char *name) {
  const int64_t s[3] = {t->shape[0], t->shape[1], t->shape[2] * t->shape[3]};
  return H->tensor_reshape((ganfw_tensor *)t, 3, s, name);
}

static ganfw_status spatial_forward(void *state, const ganfw_layer_call *call,
                                    const ganfw_tensor *x, ganfw_tensor *y, ganfw_tensor **saved) {
  ganfw_tensor *xv = rows_of(x, "x.rows"), *yv = rows_of(y, "y.rows");
  ganfw_status st = xv && yv ? H->tensor_softmax(call->ctx, yv, xv, -1, 0) : GANFW_ERR_INVALID_ARG;
  H->tensor_destroy(xv);
  if (saved && ((spatial_state *)state)->save_view) {
    saved[0] = yv;
    return st;
  }
  H->tensor_destroy(yv);
  return st;
}

static ganfw_status spatial_backward(void *state, const ganfw_layer_call *call,
                                     const ganfw_tensor *x, const ganfw_tensor *y,
                                     ganfw_tensor *const *saved, const ganfw_tensor *dy,
                                     ganfw_tensor *dx) {
  if (!dx) return GANFW_OK;
  ganfw_tensor *yv = rows_of(y, "y.rows"), *dyv = rows_of(dy, "dy.rows"),
               *dxv = rows_of(dx, "dx.rows");
  ganfw_status st = yv && dyv && dxv ? H->tensor_softmax_backward(call->ctx, dxv, yv, dyv, -1, 0)
                                     : GANFW_ERR_INVALID_ARG;
  H->tensor_destroy(dxv);
  H->tensor_destroy(dyv);
  H->tensor_destroy(yv);
  return st;
}

static const ganfw_layer_def spatial_def = {
    .struct_size = sizeof(ganfw_layer_def),
    .keep = GANFW_KEEP_OUTPUT,
    .type = "spatial_softmax",
    .infer = spatial_infer,
    .forward = spatial_forward,
    .backward = spatial_backward,
};

/* One training step of conv "c" -> spatial softmax "sm" on x [2,2,3,4]; y and dx into the
 * caller's buffers when not NULL (and the run is not planning). */
static ganfw_status spatial_step(int meta, spatial_state *state, float *y_out, float *x_in,
                                 float *dx_out) {
  ganfw_ctx *ctx = make_ctx(GANFW_DEVICE_CPU, 1, meta);
  ganfw_net *net = H->net_create(ctx, "g");
  CU_ASSERT_EQUAL(H->net_custom(net, "sm", &spatial_def, state), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(H->net_build(net, 2, 3, 4), GANFW_OK);
  ganfw_tensor *x = make(ctx, 4, (int64_t[]){2, 2, 3, 4}, "x");
  ganfw_tensor *dy = make(ctx, 4, (int64_t[]){2, 2, 3, 4}, "dy");
  float host[48];
  gt_fill_uniform(host, 48, -2, 2, 9);
  if (x_in) memcpy(x_in, host, sizeof host);
  CU_ASSERT_EQUAL(H->tensor_from_host(x, host, sizeof host), GANFW_OK);
  gt_fill_uniform(host, 48, -1, 1, 10);
  CU_ASSERT_EQUAL(H->tensor_from_host(dy, host, sizeof host), GANFW_OK);
  ganfw_tape *tape = ganfw_tape_create(net);
  ganfw_tensor *y = NULL, *dx = NULL;
  ganfw_status st = ganfw_net_forward(net, x, tape, &y);
  if (st == GANFW_OK && y_out) CU_ASSERT_EQUAL(H->tensor_to_host(y, y_out, 48 * 4), GANFW_OK);
  if (st == GANFW_OK) st = ganfw_net_backward(net, tape, dy, GANFW_BWD_INPUT_GRAD, &dx);
  if (st == GANFW_OK && dx_out) CU_ASSERT_EQUAL(H->tensor_to_host(dx, dx_out, 48 * 4), GANFW_OK);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(dx);
  ganfw_tape_destroy(tape);
  H->tensor_destroy(dy);
  H->tensor_destroy(x);
  H->net_destroy(net);
  ganfw_ctx_destroy(ctx);
  return st;
}

static void test_plugin_layer_views(void) {
  spatial_state state = {0};
  float x[48], y[48], dx[48], dy[48];
  ganfw_status st = spatial_step(0, &state, y, x, dx);
  if (st != GANFW_OK) printf("\n    %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  /* against the formula in double, per (n, c) row of 12 */
  gt_fill_uniform(dy, 48, -1, 1, 10);
  float want_y[48], want_dx[48];
  for (int r = 0; r < 4; r++) {
    double m = -INFINITY, sum = 0, dot = 0;
    for (int j = 0; j < 12; j++) m = fmax(m, x[r * 12 + j]);
    for (int j = 0; j < 12; j++) sum += exp(x[r * 12 + j] - m);
    for (int j = 0; j < 12; j++) dot += exp(x[r * 12 + j] - m) / sum * dy[r * 12 + j];
    for (int j = 0; j < 12; j++) {
      const double p = exp(x[r * 12 + j] - m) / sum;
      want_y[r * 12 + j] = (float)p, want_dx[r * 12 + j] = (float)(p * (dy[r * 12 + j] - dot));
    }
  }
  gt_check_close("spatial softmax y", y, want_y, 48, 2e-6, 1e-6);
  gt_check_close("spatial softmax dx", dx, want_dx, 48, 1e-6, 1.0);
  /* planned: the same code on the meta backend */
  st = spatial_step(1, &state, NULL, NULL, NULL);
  if (st != GANFW_OK) printf("\n    %s", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  /* a view in saved[] is refused, naming the node */
  state.save_view = 1;
  CU_ASSERT_EQUAL(spatial_step(0, &state, NULL, NULL, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(message_has("sm", "'y.rows' in saved[0]", "a view from tensor_reshape", NULL));
}

static int suite_init(void) {
  H = ganfw_host_table();
  return H == NULL;
}

static CU_TestInfo tests[] = {{"table", test_table},
                              {"bmm (cpu)", check_bmm_cpu},
                              {"softmax (cpu)", check_softmax_cpu},
                              {"permute (cpu)", check_permute_cpu},
                              {"reshape (cpu)", check_reshape_cpu},
                              {"gather, scatter_add (cpu)", check_gather_cpu},
                              {"attention block (cpu)", check_attention_cpu},
                              {"threads", test_threads},
                              {"bad input", test_bad_input},
                              {"meta", test_meta},
                              {"views in a plugin layer", test_plugin_layer_views},
                              {"bmm (cuda)", check_bmm_cuda},
                              {"softmax (cuda)", check_softmax_cuda},
                              {"permute (cuda)", check_permute_cuda},
                              {"reshape (cuda)", check_reshape_cuda},
                              {"gather, scatter_add (cuda)", check_gather_cuda},
                              {"attention block (cuda)", check_attention_cuda},
                              CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("host_attention", tests, suite_init, NULL);
}
