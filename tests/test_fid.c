/* The Frechet distance (tools/fid.h) against PyTorch/numpy references (tests/ref/gen_fid.py):
 * the symmetric eigensolver, tr(sqrtm(S1 S2)), the feature statistics and the distance;
 * FID(x, x) = 0 and symmetry; the executor's forward that hands out a node's output; the
 * penultimate-layer check; and `ganfw score` end to end on small synthetic MNIST runs (its
 * FID finite and positive, reproducible, different for another generator, --fid-real and
 * --no-fid, bad input refused with exit code 2, generated images mapped into the
 * classifier's normalisation). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/error.h"
#include "io/safetensors.h"
#include "nn/net.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "tools/fid.h"
#include "tools/score.h"
#include "train/session.h"
#include "train/loop.h"
#include "train/trainer.h"

static int msg_has(const char *s) {
  return strstr(ganfw_error_message(), s) != NULL;
}

/* --- references --------------------------------------------------------------------------- */

static ganfw_st_file *ref;

/* The reference fid.safetensors (gt_ref_open records a failure naming the command that
 * writes it when it is missing). */
static int open_ref(void) {
  if (ref) return 1;
  gt_ref *r = gt_ref_open("fid");
  if (!r) return 0;
  gt_ref_close(r);
  char path[4096];
  snprintf(path, sizeof path, "%s/fid.safetensors", getenv("GANFW_REF_DIR"));
  return ganfw_st_open(path, &ref) == GANFW_OK;
}

/* Tensor `key` (f32 or f64) as doubles, malloc'd; *n elements. */
static double *ref_f64(const char *key, int64_t *n) {
  const ganfw_st_tensor *t = ganfw_st_find(ref, key);
  if (!t) {
    printf("\n  fid.safetensors has no \"%s\"; rerun tests/ref/generate.py\n", key);
    CU_FAIL_FATAL("reference tensor missing");
  }
  double *out = malloc((size_t)t->numel * sizeof *out);
  for (int64_t i = 0; i < t->numel; i++) {
    if (strcmp(t->dtype_name, "F64") == 0) {
      memcpy(&out[i], (const char *)t->data + i * 8, 8);
    } else {
      float f;
      memcpy(&f, (const char *)t->data + i * 4, 4);
      out[i] = f;
    }
  }
  *n = t->numel;
  return out;
}

static const float *ref_f32(const char *key, int64_t *rows, int64_t *cols) {
  const ganfw_st_tensor *t = ganfw_st_find(ref, key);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_STRING_EQUAL_FATAL(t->dtype_name, "F32");
  *rows = t->shape[0];
  *cols = t->ndim > 1 ? t->shape[1] : 1;
  return t->data;
}

static int has_key(const char *key) {
  return ganfw_st_find(ref, key) != NULL;
}

static double rel(double got, double want, double floor) {
  return fabs(got - want) / (fabs(want) > floor ? fabs(want) : floor);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* --- the eigensolver ---------------------------------------------------------------------- */

static void test_eigh(void) {
  if (!open_ref()) return;
  int cases = 0;
  for (int k = 0;; k++) {
    char ka[64], kw[64];
    snprintf(ka, sizeof ka, "sym%d.a", k);
    snprintf(kw, sizeof kw, "sym%d.w", k);
    if (!has_key(ka)) break;
    int64_t nn, n;
    double *a = ref_f64(ka, &nn), *want = ref_f64(kw, &n);
    CU_ASSERT_EQUAL_FATAL(nn, n * n);
    double *w = malloc((size_t)n * sizeof *w), *v = malloc((size_t)nn * sizeof *v);
    CU_ASSERT_EQUAL_FATAL(ganfw_fid_eigh(n, a, w, v), GANFW_OK);
    double scale = 1e-300;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    /* A V = V diag(w) and V^T V = I */
    double resid = 0, ortho = 0;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double av = 0, vv = 0;
        for (int64_t m = 0; m < n; m++) {
          av += a[i * n + m] * v[m * n + j];
          vv += v[m * n + i] * v[m * n + j];
        }
        resid = fmax(resid, fabs(av - v[i * n + j] * w[j]) / scale);
        ortho = fmax(ortho, fabs(vv - (i == j)));
      }
    /* the eigenvalues, sorted, against torch.linalg.eigvalsh; and eigenvalues alone */
    double *w2 = malloc((size_t)n * sizeof *w2);
    CU_ASSERT_EQUAL(ganfw_fid_eigh(n, a, w2, NULL), GANFW_OK);
    qsort(w, (size_t)n, sizeof *w, cmp_double);
    qsort(w2, (size_t)n, sizeof *w2, cmp_double);
    double werr = 0;
    for (int64_t i = 0; i < n; i++)
      werr = fmax(werr, fmax(fabs(w[i] - want[i]), fabs(w2[i] - want[i])) / scale);
    printf("\n  sym%d (n=%lld): |AV - VW| %.2e, |V'V - I| %.2e, eigenvalues %.2e", k, (long long)n,
           resid, ortho, werr);
    CU_ASSERT(resid < 1e-12);
    CU_ASSERT(ortho < 1e-12);
    CU_ASSERT(werr < 1e-12);
    free(a);
    free(want);
    free(w);
    free(w2);
    free(v);
    cases++;
  }
  CU_ASSERT(cases >= 6);
  /* NaN never converges: an error, not a hang */
  double bad[4] = {1, NAN, NAN, 2}, w[2];
  CU_ASSERT_EQUAL(ganfw_fid_eigh(2, bad, w, NULL), GANFW_ERR_INTERNAL);
}

/* --- tr(sqrtm(S1 S2)) --------------------------------------------------------------------------
 */

static void test_sqrtm_trace(void) {
  if (!open_ref()) return;
  int cases = 0;
  for (int k = 0;; k++) {
    char k1[64], k2[64], kt[64];
    snprintf(k1, sizeof k1, "spd%d.s1", k);
    snprintf(k2, sizeof k2, "spd%d.s2", k);
    snprintf(kt, sizeof kt, "spd%d.trace", k);
    if (!has_key(k1)) break;
    int64_t nn, n1;
    double *s1 = ref_f64(k1, &nn), *s2 = ref_f64(k2, &nn), *want = ref_f64(kt, &n1);
    const int64_t d = (int64_t)llround(sqrt((double)nn));
    double got = 0, swapped = 0;
    CU_ASSERT_EQUAL_FATAL(ganfw_fid_sqrtm_trace(d, s1, s2, &got), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_fid_sqrtm_trace(d, s2, s1, &swapped), GANFW_OK);
    const double e = rel(got, want[0], 1e-12), es = rel(swapped, want[0], 1e-12);
    printf("\n  spd%d (d=%lld): %.12g vs torch %.12g, rel %.2e (swapped %.2e)", k, (long long)d,
           got, want[0], e, es);
    /* spd4 and spd5 are singular (rank 10 or 7 of 24), their reference the nuclear norm of
     * their integer factors' product; torch.linalg.eigvals of S1 S2 leaves rounding noise of
     * ~1e-16 * |S1||S2| in the zero eigenvalues, whose square roots it adds (the cut-off
     * here counts them as zero), so it is only near */
    snprintf(kt, sizeof kt, "spd%d.trace_eigvals", k);
    double *eig = ref_f64(kt, &n1);
    const double ee = rel(got, eig[0], 1e-12);
    printf(", eigvals route rel %.2e", ee);
    CU_ASSERT(e < 1e-12);
    CU_ASSERT(es < 1e-12);
    CU_ASSERT(ee < (d == 24 ? 1e-7 : 1e-12));
    free(eig);
    free(s1);
    free(s2);
    free(want);
    cases++;
  }
  CU_ASSERT(cases >= 6);
  /* sqrtm(S S) = S for S positive definite: tr = tr(S) */
  double s[9] = {4, 1, 0.5, 1, 3, 0.2, 0.5, 0.2, 2}, t = 0;
  CU_ASSERT_EQUAL(ganfw_fid_sqrtm_trace(3, s, s, &t), GANFW_OK);
  CU_ASSERT(fabs(t - 9.0) < 1e-12);
}

/* --- statistics and the distance ------------------------------------------------------------- */

/* Statistics of rows x[n*D], fed in uneven batches (1, 2, 3, ... rows) as score feeds them. */
static void stats_of(const float *x, int64_t n, int64_t D, ganfw_fid_stats *s) {
  CU_ASSERT_EQUAL_FATAL(ganfw_fid_stats_init(s, D), GANFW_OK);
  for (int64_t at = 0, b = 1; at < n; at += b, b++) {
    const int64_t m = n - at < b ? n - at : b;
    CU_ASSERT_EQUAL_FATAL(ganfw_fid_stats_add(s, x + at * D, m), GANFW_OK);
  }
  CU_ASSERT_EQUAL_FATAL(ganfw_fid_stats_finish(s), GANFW_OK);
}

static double max_rel(const double *got, const double *want, int64_t n, double floor) {
  double e = 0;
  for (int64_t i = 0; i < n; i++) e = fmax(e, rel(got[i], want[i], floor));
  return e;
}

static void test_fid_features(void) {
  if (!open_ref()) return;
  int cases = 0;
  for (int k = 0;; k++) {
    char key[64];
    snprintf(key, sizeof key, "feat%d.x1", k);
    if (!has_key(key)) break;
    int64_t n1, n2, D, D2, m;
    const float *x1 = ref_f32(key, &n1, &D);
    snprintf(key, sizeof key, "feat%d.x2", k);
    const float *x2 = ref_f32(key, &n2, &D2);
    CU_ASSERT_EQUAL_FATAL(D, D2);
    ganfw_fid_stats a, b;
    stats_of(x1, n1, D, &a);
    stats_of(x2, n2, D, &b);
    CU_ASSERT_EQUAL(a.n, n1);
    CU_ASSERT_EQUAL(b.n, n2);
    const char *names[4] = {"mu1", "mu2", "cov1", "cov2"};
    const double *got[4] = {a.mean, b.mean, a.cov, b.cov};
    double stat_err = 0;
    for (int q = 0; q < 4; q++) {
      snprintf(key, sizeof key, "feat%d.%s", k, names[q]);
      double *want = ref_f64(key, &m);
      CU_ASSERT_EQUAL_FATAL(m, q < 2 ? D : D * D);
      stat_err = fmax(stat_err, max_rel(got[q], want, m, 1e-3));
      free(want);
    }
    snprintf(key, sizeof key, "feat%d.fid", k);
    double *want = ref_f64(key, &m), fid = 0, back = 0, self = 0;
    CU_ASSERT_EQUAL_FATAL(ganfw_fid_distance(&a, &b, &fid), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_fid_distance(&b, &a, &back), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_fid_distance(&a, &a, &self), GANFW_OK);
    double tr = 0;
    for (int64_t i = 0; i < D; i++) tr += a.cov[i * D + i];
    printf("\n  feat%d (%lldx%lld vs %lld): stats rel %.2e; FID %.10g vs pytorch-fid formula "
           "%.10g (rel %.2e), reversed rel %.2e, FID(x,x) %.2e (tr S %.3g)",
           k, (long long)n1, (long long)D, (long long)n2, stat_err, fid, want[0],
           rel(fid, want[0], 1e-9), rel(back, fid, 1e-9), self, tr);
    CU_ASSERT(stat_err < 1e-9);
    CU_ASSERT(rel(fid, want[0], 1e-9) < (n1 < D ? 1e-7 : 1e-9));
    CU_ASSERT(rel(back, fid, 1e-9) < 1e-9);
    CU_ASSERT(fabs(self) < 1e-9 * tr);
    CU_ASSERT(fid > 0);
    free(want);
    ganfw_fid_stats_free(&a);
    ganfw_fid_stats_free(&b);
    cases++;
  }
  CU_ASSERT(cases >= 3);
}

static void test_stats_errors(void) {
  ganfw_fid_stats s, t;
  const float row[3] = {1, 2, 3}, bad[3] = {1, NAN, 3};
  CU_ASSERT_EQUAL(ganfw_fid_stats_init(&s, 0), GANFW_ERR_INVALID_ARG);
  ganfw_fid_stats_free(&s);
  CU_ASSERT_EQUAL_FATAL(ganfw_fid_stats_init(&s, 3), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_fid_stats_add(&s, row, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_fid_stats_finish(&s), GANFW_ERR_INVALID_ARG); /* one row */
  CU_ASSERT(msg_has("at least 2 rows"));
  CU_ASSERT_EQUAL(ganfw_fid_stats_add(&s, bad, 1), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("feature 1 of row 1 is NaN"));
  CU_ASSERT_EQUAL(ganfw_fid_stats_add(&s, row, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_fid_stats_finish(&s), GANFW_OK);
  CU_ASSERT_EQUAL(s.n, 2);
  for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(s.cov[i], 0.0); /* two equal rows */
  CU_ASSERT_EQUAL_FATAL(ganfw_fid_stats_init(&t, 2), GANFW_OK);
  double fid = 0;
  CU_ASSERT_EQUAL(ganfw_fid_distance(&s, &t, &fid), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("same dimension"));
  ganfw_fid_stats_free(&s);
  ganfw_fid_stats_free(&t);
  ganfw_fid_stats_free(NULL);
}

/* --- the executor's forward to a node ----------------------------------------------------- */

static ganfw_ctx *make_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 7};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  return ctx;
}

static float *to_host(ganfw_tensor *t) {
  float *h = malloc((size_t)t->numel * sizeof *h);
  CU_ASSERT_EQUAL_FATAL(ganfw_tensor_to_host(t, h, t->numel * (int64_t)sizeof *h), GANFW_OK);
  return h;
}

/* conv -> bn -> relu -> flatten -> fc1 -> relu -> fc2: fc1's output is what the ReLU after it
 * would overwrite in place; forward_node must hand it out intact. */
static void test_forward_node(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *net = ganfw_net_create(ctx, "cls");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c", 1, 2, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(net, "bn", 2, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "r0", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc1", 32, 6, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "r1", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc2", 6, 3, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 1, 4, 4), GANFW_OK);
  ganfw_net_set_train(net, 0, 0);
  CU_ASSERT_STRING_EQUAL(ganfw_net_layer_type(net, 4), "linear");
  CU_ASSERT_PTR_NULL(ganfw_net_layer_type(net, 7));
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 6, 0), 5);
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 0, 0), -1);
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 6, 1), -2);
  CU_ASSERT_EQUAL(ganfw_net_layer_input(net, 7, 0), -2);

  const int64_t B = 5, xs[4] = {B, 1, 4, 4};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  float hx[80];
  gt_fill_uniform(hx, 80, -1, 1, 3);
  ganfw_tensor_from_host(x, hx, sizeof hx);
  ganfw_tensor *y0 = NULL, *feat = NULL, *y = NULL, *feat_only = NULL, *none = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward_node(net, x, 4, &feat, &y), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward_node(net, x, 4, &feat_only, NULL), GANFW_OK);
  CU_ASSERT_EQUAL(feat->ndim, 2);
  CU_ASSERT_EQUAL(feat->shape[0], B);
  CU_ASSERT_EQUAL(feat->shape[1], 6);
  float *h0 = to_host(y0), *hy = to_host(y), *hf = to_host(feat), *hf2 = to_host(feat_only);
  CU_ASSERT_EQUAL(memcmp(h0, hy, (size_t)y->nbytes), 0); /* the output is forward's, bitwise */
  CU_ASSERT_EQUAL(memcmp(hf, hf2, (size_t)feat->nbytes), 0);
  /* fc1's output before the ReLU (some negative), and fc2(relu(it)) is the output */
  int negative = 0;
  for (int64_t i = 0; i < feat->numel; i++) negative |= hf[i] < 0;
  CU_ASSERT(negative);
  ganfw_param_info w = {.struct_size = sizeof w}, bias = {.struct_size = sizeof bias};
  const int64_t np = ganfw_net_param_count(net);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, np - 2, &w), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, np - 1, &bias), GANFW_OK);
  float *hw = to_host(w.value), *hb = to_host(bias.value);
  double err = 0;
  for (int64_t i = 0; i < B; i++)
    for (int64_t k = 0; k < 3; k++) {
      double t = hb[k];
      for (int64_t j = 0; j < 6; j++) t += (double)hw[k * 6 + j] * fmax(hf[i * 6 + j], 0.0);
      err = fmax(err, fabs(t - hy[i * 3 + k]));
    }
  CU_ASSERT(err < 1e-5);
  /* the last node: its output is the net's */
  ganfw_tensor *last = NULL, *y2 = NULL;
  CU_ASSERT_EQUAL(ganfw_net_forward_node(net, x, 6, &last, &y2), GANFW_OK);
  float *hl = to_host(last);
  CU_ASSERT_EQUAL(memcmp(hl, h0, (size_t)y0->nbytes), 0);
  CU_ASSERT_EQUAL(ganfw_net_forward_node(net, x, 7, &none, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("no node 7"));
  CU_ASSERT_PTR_NULL(none);
  /* the penultimate-layer check of score */
  int32_t node = -5;
  CU_ASSERT_EQUAL(ganfw_score_feature_node(net, "cls.ckpt", &node), GANFW_OK);
  CU_ASSERT_EQUAL(node, 5);
  free(h0);
  free(hy);
  free(hf);
  free(hf2);
  free(hw);
  free(hb);
  free(hl);
  ganfw_tensor_destroy(last);
  ganfw_tensor_destroy(y2);
  ganfw_tensor_destroy(y0);
  ganfw_tensor_destroy(y);
  ganfw_tensor_destroy(feat);
  ganfw_tensor_destroy(feat_only);
  ganfw_tensor_destroy(x);
  ganfw_net_destroy(net);

  /* a classifier that ends in something else than a linear layer */
  net = ganfw_net_create(ctx, "odd");
  CU_ASSERT_EQUAL(ganfw_net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc", 16, 4, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "head.act", GANFW_ACT_SIGMOID, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 1, 4, 4), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_score_feature_node(net, "odd.ckpt", &node), GANFW_ERR_CONFIG);
  printf("\n  %s", ganfw_error_message());
  CU_ASSERT(msg_has("odd.ckpt") && msg_has("head.act") && msg_has("activation") &&
            msg_has("--no-fid"));
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* --- ganfw score end to end ------------------------------------------------------------------ */

static char root[64];

static const char *path_in(const char *rel_path) {
  static char buf[8][1024];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel_path);
  return buf[k];
}

static ganfw_status train(const char *config) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(config, NULL, 0, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_train(s);
  if (st != GANFW_OK) printf("\n  %s: %s\n", config, ganfw_error_message());
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

static void write_file(const char *name, const char *text) {
  FILE *f = fopen(path_in(name), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

/* Two tiny DC-GANs (other seeds: other generators) and a small cnn classifier (a hidden
 * linear layer of 32: the features) on 32x32 synthetic MNIST with 40 test images. */
static void write_runs(void) {
  char text[2048];
  for (int seed = 3; seed <= 4; seed++) {
    snprintf(text, sizeof text,
             "seed: %d\n"
             "device: {type: cpu, threads: 2}\n"
             "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
             "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
             "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
             "train: {batch_size: 8, max_steps: 4, log_every: 0, sample_every: 0,"
             " checkpoint_every: 4}\n"
             "run: {out_dir: %s/gan%d}\n",
             seed, root, root, seed);
    char name[32];
    snprintf(name, sizeof name, "gan%d.yaml", seed);
    write_file(name, text);
  }
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 2}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model:\n"
           "  plugin: cnn\n"
           "  blocks:\n"
           "    - {channels: 8, pool: max}\n"
           "    - {channels: 16, pool: max}\n"
           "  linear: [32]\n"
           "optim: {plugin: adam, lr: 0.003}\n"
           "train: {batch_size: 16, max_steps: 20, log_every: 0, checkpoint_every: 20}\n"
           "run: {out_dir: %s/judge}\n",
           root, root);
  write_file("judge.yaml", text);
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_fid_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 160, 40, 11);
}

static int suite_clean(void) {
  if (ref) ganfw_st_close(ref);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static char *score_text(const ganfw_score_args *a, ganfw_score_result *r, ganfw_status *st) {
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  *st = ganfw_score(a, r, m);
  fclose(m);
  return text;
}

/* `ganfw score ARGS` (stdout and stderr) into out; the exit code. */
static int run_cli(const char *args, char *out, size_t cap) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s/ganfw' score %s -q 2>&1", build ? build : ".", args);
  FILE *p = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  size_t len = fread(out, 1, cap - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_score_fid(void) {
  write_runs();
  CU_ASSERT_EQUAL_FATAL(train(path_in("gan3.yaml")), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(train(path_in("gan4.yaml")), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(train(path_in("judge.yaml")), GANFW_OK);
  ganfw_score_args a = {.source = path_in("gan3"),
                        .classifier = path_in("judge"),
                        .n = 120,
                        .batch = 32,
                        .has_seed = 1,
                        .seed = 7};
  ganfw_score_result r1, r2, r3, r4;
  ganfw_status st;
  char *t1 = score_text(&a, &r1, &st);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  printf("\n%s", t1);
  CU_ASSERT(isfinite(r1.fid) && r1.fid > 0);
  CU_ASSERT_EQUAL(r1.fid_dim, 32); /* model.linear: [32] */
  CU_ASSERT_EQUAL(r1.fid_n_fake, 120);
  CU_ASSERT_EQUAL(r1.fid_n_real, 40); /* the whole test split */
  CU_ASSERT_PTR_NOT_NULL(strstr(t1, "classifier FID: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(t1, "32 features, 120 generated vs 40 real images"));
  CU_ASSERT_PTR_NOT_NULL(strstr(t1, "layer classifier.2\n")); /* the output Linear */
  CU_ASSERT_PTR_NOT_NULL(strstr(t1, "not comparable to Inception-v3 FID"));
  char *t2 = score_text(&a, &r2, &st);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT_STRING_EQUAL(t1, t2); /* deterministic */

  /* another generator, another distance */
  a.source = path_in("gan4");
  char *t3 = score_text(&a, &r3, &st);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  printf("  gan4: FID %.6f vs gan3 %.6f\n", r3.fid, r1.fid);
  CU_ASSERT(isfinite(r3.fid) && r3.fid > 0 && r3.fid != r1.fid);

  /* fewer real images */
  a.source = path_in("gan3");
  a.fid_real = 30;
  char *t4 = score_text(&a, &r4, &st);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(r4.fid_n_real, 30);
  CU_ASSERT(r4.fid != r1.fid && isfinite(r4.fid));
  CU_ASSERT_PTR_NOT_NULL(strstr(t4, "the first 30 images of MNIST test"));
  free(t4);
  a.fid_real = 41;
  t4 = score_text(&a, &r4, &st);
  CU_ASSERT_EQUAL(st, GANFW_ERR_INVALID_ARG);
  CU_ASSERT(msg_has("--fid-real 41") && msg_has("has 40 images"));
  free(t4);

  /* --no-fid: the other figures are the same, bit for bit */
  a.fid_real = 0;
  a.no_fid = 1;
  t4 = score_text(&a, &r4, &st);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(r4.fid, 0.0);
  CU_ASSERT_EQUAL(r4.fid_n_real, 0);
  CU_ASSERT_EQUAL(r4.confidence, r1.confidence);
  CU_ASSERT_EQUAL(r4.entropy, r1.entropy);
  CU_ASSERT_EQUAL(r4.inception, r1.inception);
  CU_ASSERT_PTR_NULL(strstr(t4, "FID"));
  free(t4);
  free(t1);
  free(t2);
  free(t3);

  /* the command line */
  char args[2048], out[8192];
  snprintf(args, sizeof args, "'%s' --classifier '%s' -n 64 --batch 32 --fid-real 20",
           path_in("gan3"), path_in("judge"));
  CU_ASSERT_EQUAL(run_cli(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "64 generated vs 20 real images"));
  snprintf(args, sizeof args, "'%s' --classifier '%s' -n 64 --fid-real 0", path_in("gan3"),
           path_in("judge"));
  CU_ASSERT_EQUAL(run_cli(args, out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--fid-real"));
  snprintf(args, sizeof args, "'%s' --classifier '%s' -n 64 --fid-real 1000", path_in("gan3"),
           path_in("judge"));
  CU_ASSERT_EQUAL(run_cli(args, out, sizeof out), 2);
  printf("  %s", out);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--fid-real 1000") && strstr(out, "has 40 images"));
  snprintf(args, sizeof args, "'%s' --classifier '%s' -n 1", path_in("gan3"), path_in("judge"));
  CU_ASSERT_EQUAL(run_cli(args, out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "at least 2 generated images"));
  snprintf(args, sizeof args, "'%s' --classifier '%s' -n 1 --no-fid", path_in("gan3"),
           path_in("judge"));
  CU_ASSERT_EQUAL(run_cli(args, out, sizeof out), 0);
}

/* --config: a generator checkpoint without ganfw metadata is judged as the ganfw
 * checkpoint it came from, figure for figure; without --config it is refused saying to
 * pass it. Uses the runs of test_score_fid. */
static void test_score_foreign_checkpoint(void) {
  char ckpt[1024], foreign[1024];
  snprintf(ckpt, sizeof ckpt, "%s", path_in("gan3/checkpoints/step_00000004.safetensors"));
  snprintf(foreign, sizeof foreign, "%s", path_in("foreign.safetensors"));
  gt_write_bare_generator(ckpt, foreign, NULL);
  ganfw_score_args a = {.source = ckpt,
                        .classifier = path_in("judge"),
                        .n = 64,
                        .batch = 32,
                        .has_seed = 1,
                        .seed = 7,
                        .fid_real = 20};
  ganfw_score_result r1, r2;
  ganfw_status st;
  free(score_text(&a, &r1, &st));
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  a.source = foreign;
  free(score_text(&a, &r2, &st));
  CU_ASSERT_EQUAL(st, GANFW_ERR_IO);
  CU_ASSERT(msg_has(foreign) && msg_has("pass --config CONFIG"));
  a.config = path_in("gan3.yaml");
  free(score_text(&a, &r2, &st));
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT(isfinite(r1.fid) && r1.fid > 0);
  CU_ASSERT_EQUAL(r2.fid, r1.fid);
  CU_ASSERT_EQUAL(r2.confidence, r1.confidence);
  CU_ASSERT_EQUAL(r2.entropy, r1.entropy);
  CU_ASSERT_EQUAL(r2.inception, r1.inception);
  /* another generator's config (gan4: the same shapes, another seed) scores the same weights
   * the same: only the shapes come from the config */
  a.config = path_in("gan4.yaml");
  free(score_text(&a, &r2, &st));
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(r2.fid, r1.fid);

  /* the command line */
  char args[4096], out[8192];
  snprintf(args, sizeof args, "'%s' --config '%s' --classifier '%s' -n 64 --batch 32 --fid-real 20",
           foreign, path_in("gan3.yaml"), path_in("judge"));
  CU_ASSERT_EQUAL(run_cli(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "64 generated vs 20 real images"));
  snprintf(args, sizeof args, "'%s' --classifier '%s' -n 64 --no-fid", foreign, path_in("judge"));
  CU_ASSERT_EQUAL(run_cli(args, out, sizeof out), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "pass --config CONFIG"));
}

/* A classifier on [0,1] images (normalize mean 0, std 1) and its twin on the default [-1,1]
 * images: the same weights but for the first conv, W / 2, and its BatchNorm's running mean
 * moved by sum(W) / 2 (no padding, so that every window holds image pixels only); on any
 * image both compute the same function. Scoring the same [-1,1] generator with either
 * gives the same figures only when score maps the generated images into each classifier's
 * range, as its real test images are. */
static void write_twin(const char *src, const char *dst) {
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(src, &f), GANFW_OK);
  ganfw_st_writer *w = ganfw_st_writer_create();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  /* the data.* metadata score reads; without "format" and the crcs the file is a plain
   * state_dict, which loads without them */
  for (int64_t i = 0; i < ganfw_st_metadata_count(f); i++) {
    const char *key = ganfw_st_metadata_key(f, i);
    if (strncmp(key, "data.", 5) != 0) continue;
    CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, key, ganfw_st_metadata_value(f, i)), GANFW_OK);
  }
  const ganfw_st_tensor *wt = ganfw_st_find(f, "classifier.features.0.weight");
  const ganfw_st_tensor *rm = ganfw_st_find(f, "classifier.features.1.running_mean");
  CU_ASSERT_PTR_NOT_NULL_FATAL(wt);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rm);
  CU_ASSERT_PTR_NULL_FATAL(ganfw_st_find(f, "classifier.features.0.bias"));
  const int64_t K = wt->shape[0], per = wt->numel / K;
  float *w2 = malloc((size_t)wt->nbytes), *rm2 = malloc((size_t)rm->nbytes);
  const float *w1 = wt->data, *rm1 = rm->data;
  for (int64_t k = 0; k < K; k++) {
    double sum = 0;
    for (int64_t j = 0; j < per; j++) {
      sum += w1[k * per + j];
      w2[k * per + j] = w1[k * per + j] / 2; /* exact */
    }
    rm2[k] = (float)(rm1[k] - sum / 2);
  }
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    const void *data = t == wt ? w2 : t == rm ? rm2 : t->data;
    CU_ASSERT_EQUAL(ganfw_st_writer_add_raw(w, t->name, t->dtype_name, t->ndim, t->shape, data),
                    GANFW_OK);
  }
  CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_write(w, dst), GANFW_OK);
  ganfw_st_writer_destroy(w);
  ganfw_st_close(f);
  free(w2);
  free(rm2);
}

static void test_score_normalisation(void) {
  char text[2048];
  for (int unit = 0; unit <= 1; unit++) {
    snprintf(text, sizeof text,
             "seed: 5\n"
             "device: {type: cpu, threads: 2}\n"
             "data: {dataset: mnist, path: %s/mnist, resize: 32%s}\n"
             "model:\n"
             "  plugin: cnn\n"
             "  blocks:\n"
             "    - {channels: 8, padding: 0, pool: max}\n"
             "    - {channels: 16, padding: 0, pool: max}\n"
             "  linear: [32]\n"
             "optim: {plugin: adam, lr: 0.003}\n"
             "train: {batch_size: 16, max_steps: %d, log_every: 0, checkpoint_every: %d}\n"
             "run: {out_dir: %s/judge%s}\n",
             root, unit ? ", normalize: {mean: [0.0], std: [1.0]}" : "", unit ? 20 : 1,
             unit ? 20 : 1, root, unit ? "01" : "pm");
    write_file(unit ? "judge01.yaml" : "judgepm.yaml", text);
  }
  CU_ASSERT_EQUAL_FATAL(train(path_in("judge01.yaml")), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(train(path_in("judgepm.yaml")), GANFW_OK); /* the run folder */
  char twin[1024];
  snprintf(twin, sizeof twin, "%s", path_in("judgepm/checkpoints/twin.safetensors"));
  write_twin(path_in("judge01/checkpoints/step_00000020.safetensors"), twin);
  ganfw_score_args a = {.source = path_in("gan3"),
                        .classifier = path_in("judge01"),
                        .n = 96,
                        .batch = 32,
                        .has_seed = 1,
                        .seed = 9};
  ganfw_score_result r01, rpm;
  ganfw_status st;
  char *t01 = score_text(&a, &r01, &st);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  a.classifier = twin;
  char *tpm = score_text(&a, &rpm, &st);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  printf("\n  [0,1] classifier: confidence %.6f, IS %.6f, FID %.6f; its [-1,1] twin: %.6f, "
         "%.6f, %.6f\n",
         r01.confidence, r01.inception, r01.fid, rpm.confidence, rpm.inception, rpm.fid);
  CU_ASSERT(rel(rpm.confidence, r01.confidence, 1e-9) < 1e-4);
  CU_ASSERT(rel(rpm.entropy, r01.entropy, 1e-9) < 1e-4);
  CU_ASSERT(rel(rpm.inception, r01.inception, 1e-9) < 1e-4);
  CU_ASSERT(rel(rpm.fid, r01.fid, 1e-9) < 1e-4);
  CU_ASSERT(r01.fid > 0 && isfinite(r01.fid));
  free(t01);
  free(tpm);
}

/* A GAN written as a trainer plugin (tests/plugins/gan_trainer.c, with a generator()):
 * `ganfw score` and `ganfw sample` take its run as a GAN's, through that net. Uses the judge
 * of test_score_fid. */
static void test_score_trainer_plugin(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 3\n"
           "plugin_path: ['%s/tests/plugins']\n"
           "device: {type: cpu, threads: 2}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
           "trainer: {plugin: tpgan, nz: 16}\n"
           "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
           "train: {batch_size: 8, max_steps: 4, log_every: 0, sample_every: 0,"
           " checkpoint_every: 4}\n"
           "run: {out_dir: %s/tpgan}\n",
           build ? build : ".", root, root);
  write_file("tpgan.yaml", text);
  CU_ASSERT_EQUAL_FATAL(train(path_in("tpgan.yaml")), GANFW_OK);
  ganfw_score_args a = {.source = path_in("tpgan"),
                        .classifier = path_in("judge"),
                        .n = 64,
                        .batch = 32,
                        .has_seed = 1,
                        .seed = 7};
  ganfw_score_result r;
  ganfw_status st;
  char *t = score_text(&a, &r, &st);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(r.n, 64);
  CU_ASSERT(isfinite(r.fid) && r.fid > 0);
  CU_ASSERT(r.inception >= 1.0 && r.inception <= 10.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(t, "64 generated vs 40 real images"));
  free(t);
  char *t2 = score_text(&a, &r, &st); /* deterministic, as a GAN's */
  CU_ASSERT_EQUAL(st, GANFW_OK);
  free(t2);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s/ganfw' sample '%s' -o '%s' -q", build ? build : ".",
           path_in("tpgan"), path_in("tpgan.png"));
  CU_ASSERT_EQUAL(system(cmd), 0);
  struct stat sb;
  CU_ASSERT(stat(path_in("tpgan.png"), &sb) == 0 && sb.st_size > 100);
}

static CU_TestInfo tests[] = {
    {"symmetric eigendecomposition vs torch", test_eigh},
    {"tr sqrtm(S1 S2) vs torch", test_sqrtm_trace},
    {"statistics and FID vs numpy/pytorch-fid", test_fid_features},
    {"statistics errors", test_stats_errors},
    {"forward to a node, penultimate check", test_forward_node},
    {"score with FID end to end", test_score_fid},
    {"score --config judges a checkpoint without ganfw metadata", test_score_foreign_checkpoint},
    {"score maps images into the classifier's range", test_score_normalisation},
    {"score and sample a trainer plugin's generator()", test_score_trainer_plugin},
    CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("fid", tests, suite_init, suite_clean);
}
