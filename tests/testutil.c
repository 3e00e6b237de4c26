/* The shared test helpers of tests/testutil.h: the CUnit runner, PyTorch reference tensors
 * read from safetensors files (any of f32/f64/f16/bf16/i64/i32/u8, converted on request),
 * tolerant comparisons, a central-difference gradient check and seeded random data. */
#include "testutil.h"

#include "backend/op.h"

#include <CUnit/Basic.h>
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>

#include "backend/backend.h"
#include "base/error.h"
#include "config/config.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/net.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"
#include "train/run.h"
#include "train/session.h"
#include "train/train_program.h"
#include "train/loop.h"
#include "train/trainer.h"

/* Records a CUnit failure with `msg` (CUnit copies it) and prints it at once. */
static void gt_fail(const char *msg) {
  printf("\n  FAILED: %s\n", msg);
  fflush(stdout);
  CU_assertImplementation(CU_FALSE, __LINE__, msg, __FILE__, "", CU_FALSE);
}

/* --- the runner --------------------------------------------------------------------------- */
/* --- configs ------------------------------------------------------------------------------- */

static ganfw_run_config **gt_configs;
static size_t gt_n_configs, gt_cap_configs;

static void gt_configs_free(void) {
  for (size_t i = 0; i < gt_n_configs; i++) ganfw_run_config_free(gt_configs[i]);
  free(gt_configs);
  gt_configs = NULL;
  gt_n_configs = gt_cap_configs = 0;
}

const ganfw_run_config *gt_config(const char *path, const char *const *sets, int nsets) {
  ganfw_run_config *rc = NULL;
  ganfw_status st = ganfw_run_config_open(path, sets, nsets, &rc);
  if (st != GANFW_OK) fprintf(stderr, "\n  %s: %s\n", path, ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  if (gt_n_configs == gt_cap_configs) {
    size_t cap = gt_cap_configs ? 2 * gt_cap_configs : 16;
    ganfw_run_config **grown = realloc(gt_configs, cap * sizeof *grown);
    if (!grown) ganfw_run_config_free(rc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(grown);
    gt_configs = grown;
    gt_cap_configs = cap;
  }
  gt_configs[gt_n_configs++] = rc;
  return rc;
}

/* Every suite computes with the OpenBLAS kernels the ganfw CLI uses on this machine
 * (ganfw_cpu_blas_restart), so that a run in the suite and one through the CLI give the same
 * bits: before main, from the command line in /proc/self/cmdline. */
__attribute__((constructor)) static void gt_blas_like_cli(void) {
  if (getenv("OPENBLAS_CORETYPE") || !ganfw_cpu_blas_core_hint()) return;
  static char buf[8192];
  static char *argv[64];
  FILE *f = fopen("/proc/self/cmdline", "rb");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  if (n == 0 || n == sizeof buf - 1) return; /* unreadable or too long: run as it is */
  int argc = 0;
  for (size_t k = 0; k < n && argc < 63; k += strlen(buf + k) + 1) argv[argc++] = buf + k;
  argv[argc] = NULL;
  ganfw_cpu_blas_restart(argv);
}

int gt_run(const char *suite, CU_TestInfo *tests) {
  return gt_run_fixture(suite, tests, NULL, NULL);
}

int gt_run_fixture(const char *suite, CU_TestInfo *tests, CU_InitializeFunc init,
                   CU_CleanupFunc clean) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (CU_initialize_registry() != CUE_SUCCESS) {
    fprintf(stderr, "%s: CUnit registry: %s\n", suite, CU_get_error_msg());
    return 1;
  }
  int bad = 0;
  CU_pSuite s = CU_add_suite(suite, init, clean);
  if (!s) {
    fprintf(stderr, "%s: cannot add the suite: %s\n", suite, CU_get_error_msg());
    bad = 1;
  }
  /* GT_TEST=name runs only that test (for debugging one case). */
  const char *only = getenv("GT_TEST");
  if (only && !only[0]) only = NULL;
  int registered = 0;
  for (CU_TestInfo *t = tests; s && t && t->pName; t++) {
    if (only && strcmp(only, t->pName) != 0) continue;
    if (!CU_add_test(s, t->pName, t->pTestFunc)) {
      fprintf(stderr, "%s: cannot add test \"%s\": %s\n", suite, t->pName, CU_get_error_msg());
      bad = 1;
    }
    registered++;
  }
  if (registered == 0) {
    fprintf(stderr, "%s: no tests to run%s%s\n", suite, only ? " matching GT_TEST=" : "",
            only ? only : "");
    bad = 1;
  }
  if (!bad) {
    CU_basic_set_mode(CU_BRM_VERBOSE);
    if (CU_basic_run_tests() != CUE_SUCCESS) {
      fprintf(stderr, "%s: CUnit run: %s\n", suite, CU_get_error_msg());
      bad = 1;
    }
    if (CU_get_number_of_failures() > 0 || CU_get_number_of_tests_failed() > 0 ||
        CU_get_number_of_suites_failed() > 0)
      bad = 1;
    printf("\n");
  }
  CU_cleanup_registry();
  gt_configs_free();
  return bad ? 1 : 0;
}

/* --- reference tensors ------------------------------------------------------------------- */
typedef struct gt_buf {
  struct gt_buf *next;
  void *p;
} gt_buf;

struct gt_ref {
  ganfw_st_file *file;
  char *path;
  gt_buf *bufs; /* converted tensors, freed at close */
};

gt_ref *gt_ref_open(const char *name) {
  char msg[2048];
  const char *dir = getenv("GANFW_REF_DIR");
  if (!dir || !dir[0]) {
    snprintf(msg, sizeof msg,
             "reference \"%s\": GANFW_REF_DIR is not set; run the suite with ctest (which sets "
             "it and runs tests/ref/generate.py as ref_generate first)",
             name);
    gt_fail(msg);
    return NULL;
  }
  size_t n = strlen(dir) + strlen(name) + 32;
  char *path = malloc(n);
  if (!path) abort();
  snprintf(path, n, "%s/%s.safetensors", dir, name);
  ganfw_st_file *f = NULL;
  if (ganfw_st_open(path, &f) != GANFW_OK) {
    snprintf(msg, sizeof msg,
             "reference tensors \"%s\" unavailable: %s; run tests/ref/generate.py (ctest runs "
             "it as ref_generate): /usr/bin/python3 tests/ref/generate.py %s",
             name, ganfw_error_message(), dir);
    gt_fail(msg);
    free(path);
    return NULL;
  }
  gt_ref *r = calloc(1, sizeof *r);
  if (!r) abort();
  r->file = f;
  r->path = path;
  return r;
}

void gt_ref_close(gt_ref *r) {
  if (!r) return;
  for (gt_buf *b = r->bufs; b;) {
    gt_buf *next = b->next;
    gt_free(b->p);
    free(b);
    b = next;
  }
  ganfw_st_close(r->file);
  free(r->path);
  free(r);
}

static void *gt_ref_keep(gt_ref *r, size_t bytes) {
  gt_buf *b = malloc(sizeof *b);
  if (!b) abort();
  b->p = gt_alloc(bytes);
  b->next = r->bufs;
  r->bufs = b;
  return b->p;
}

/* Finds `key`, recording a failure that names the file and key when absent. */
static const ganfw_st_tensor *gt_ref_tensor(gt_ref *r, const char *key) {
  char msg[1024];
  if (!r) {
    gt_fail("reference tensor requested from a reference file that failed to open");
    return NULL;
  }
  const ganfw_st_tensor *t = ganfw_st_find(r->file, key);
  if (!t) {
    snprintf(msg, sizeof msg,
             "reference file %s has no tensor \"%s\"; regenerate it with tests/ref/generate.py "
             "(ctest runs it as ref_generate)",
             r->path, key);
    gt_fail(msg);
  }
  return t;
}

static float gt_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  float v;
  if (exp == 0)
    v = ldexpf((float)man, -24); /* zero or subnormal */
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = ldexpf((float)(man | 0x400), (int)exp - 25);
  return sign ? -v : v;
}

static float gt_bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

/* Element i of t as a double; 0 with *ok = 0 when the dtype is not numeric/known. */
static double gt_elem(const ganfw_st_tensor *t, int64_t i, int *ok) {
  const char *d = t->dtype_name;
  const unsigned char *p = (const unsigned char *)t->data + i * t->elem_size;
  if (strcmp(d, "F32") == 0) {
    float v;
    memcpy(&v, p, 4);
    return v;
  }
  if (strcmp(d, "F64") == 0) {
    double v;
    memcpy(&v, p, 8);
    return v;
  }
  if (strcmp(d, "I64") == 0) {
    int64_t v;
    memcpy(&v, p, 8);
    return (double)v;
  }
  if (strcmp(d, "I32") == 0) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  if (strcmp(d, "F16") == 0 || strcmp(d, "BF16") == 0) {
    uint16_t v;
    memcpy(&v, p, 2);
    return d[0] == 'F' ? gt_half_to_float(v) : gt_bf16_to_float(v);
  }
  if (strcmp(d, "U8") == 0 || strcmp(d, "BOOL") == 0) return p[0];
  *ok = 0;
  return 0;
}

const float *gt_ref_f32(gt_ref *r, const char *key, int64_t *numel, int64_t *shape, int *ndim) {
  const ganfw_st_tensor *t = gt_ref_tensor(r, key);
  if (!t) return NULL;
  if (t->dtype == GANFW_DTYPE_F32) {
    /* The reader guarantees element alignment, so the file's bytes are used directly. */
    if (numel) *numel = t->numel;
    if (shape)
      for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
    if (ndim) *ndim = t->ndim;
    return t->data;
  }
  float *out = gt_ref_keep(r, (size_t)t->numel * sizeof(float));
  int ok = 1;
  for (int64_t i = 0; i < t->numel && ok; i++) out[i] = (float)gt_elem(t, i, &ok);
  if (!ok) {
    char msg[1024];
    snprintf(msg, sizeof msg, "reference %s: tensor \"%s\" has dtype %s, not convertible to f32",
             r->path, key, t->dtype_name);
    gt_fail(msg);
    return NULL;
  }
  if (numel) *numel = t->numel;
  if (shape)
    for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
  if (ndim) *ndim = t->ndim;
  return out;
}

const int32_t *gt_ref_i32(gt_ref *r, const char *key, int64_t *numel) {
  const ganfw_st_tensor *t = gt_ref_tensor(r, key);
  if (!t) return NULL;
  char msg[1024];
  const char *d = t->dtype_name;
  if (strcmp(d, "I32") != 0 && strcmp(d, "I64") != 0 && strcmp(d, "U8") != 0 &&
      strcmp(d, "BOOL") != 0) {
    snprintf(msg, sizeof msg,
             "reference %s: tensor \"%s\" has dtype %s; an integer tensor (I32, I64, U8) was "
             "expected",
             r->path, key, d);
    gt_fail(msg);
    return NULL;
  }
  if (numel) *numel = t->numel;
  if (t->dtype == GANFW_DTYPE_I32) return t->data;
  int32_t *out = gt_ref_keep(r, (size_t)t->numel * sizeof(int32_t));
  for (int64_t i = 0; i < t->numel; i++) {
    int64_t v;
    if (strcmp(d, "I64") == 0)
      memcpy(&v, (const unsigned char *)t->data + 8 * i, 8);
    else
      v = ((const unsigned char *)t->data)[i];
    if (v < INT32_MIN || v > INT32_MAX) {
      snprintf(msg, sizeof msg, "reference %s: tensor \"%s\"[%lld] = %lld does not fit int32",
               r->path, key, (long long)i, (long long)v);
      gt_fail(msg);
      return NULL;
    }
    out[i] = (int32_t)v;
  }
  return out;
}

double gt_ref_scalar(gt_ref *r, const char *key) {
  const ganfw_st_tensor *t = gt_ref_tensor(r, key);
  if (!t) return NAN;
  char msg[1024];
  if (t->numel != 1) {
    snprintf(msg, sizeof msg, "reference %s: \"%s\" has %lld elements, a scalar was expected",
             r->path, key, (long long)t->numel);
    gt_fail(msg);
    return NAN;
  }
  int ok = 1;
  double v = gt_elem(t, 0, &ok);
  if (!ok) {
    snprintf(msg, sizeof msg, "reference %s: scalar \"%s\" has unsupported dtype %s", r->path, key,
             t->dtype_name);
    gt_fail(msg);
    return NAN;
  }
  return v;
}

/* --- comparisons --------------------------------------------------------------------------- */
static double rel_err1(double a, double b, double floor) {
  if (a == b) return 0.0; /* equal, including equal infinities */
  if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) return INFINITY;
  double den = fabs(b) > floor ? fabs(b) : floor;
  return fabs(a - b) / den;
}

/* The worst relative error and its index (-1 when n == 0). */
static double gt_worst(const float *a, const float *b, int64_t n, double floor, int64_t *at) {
  double worst = 0.0;
  *at = n > 0 ? 0 : -1;
  for (int64_t i = 0; i < n; i++) {
    double e = rel_err1(a[i], b[i], floor);
    if (e > worst || (isinf(e) && !isinf(worst))) {
      worst = e;
      *at = i;
    }
  }
  return worst;
}

double gt_max_rel_err(const float *a, const float *b, int64_t n, double floor) {
  int64_t at;
  return gt_worst(a, b, n, floor, &at);
}

double gt_check_close(const char *what, const float *got, const float *want, int64_t n, double tol,
                      double floor) {
  char msg[1024];
  if (!got || !want) {
    snprintf(msg, sizeof msg, "%s: nothing to compare (a NULL buffer)", what);
    gt_fail(msg);
    return INFINITY;
  }
  int64_t at;
  double err = gt_worst(got, want, n, floor, &at);
  int ok = err <= tol;
  const char *verbose = getenv("GT_VERBOSE");
  if (!ok || (verbose && verbose[0] && strcmp(verbose, "0") != 0)) {
    snprintf(msg, sizeof msg,
             "%s: max rel err %.3e %s tol %.3e (floor %.1e, n %lld); worst [%lld]: got %.9g "
             "want %.9g",
             what, err, ok ? "<=" : ">", tol, floor, (long long)n, (long long)at,
             at >= 0 ? (double)got[at] : 0.0, at >= 0 ? (double)want[at] : 0.0);
    if (ok)
      printf("\n  %s\n", msg);
    else
      gt_fail(msg);
  } else {
    CU_PASS(what);
  }
  return err;
}

/* --- finite differences -------------------------------------------------------------------- */
static double gt_loss(const float *y, const float *dy, int64_t ny) {
  double l = 0.0;
  for (int64_t i = 0; i < ny; i++) l += (double)y[i] * (double)dy[i];
  return l;
}

double gt_gradcheck(gt_forward_fn forward, void *ctx, float *x, int64_t nx, const float *y,
                    const float *dy, int64_t ny, const float *grad, double eps, int64_t max_points,
                    double floor) {
  if (nx <= 0) return 0.0;
  int64_t points = (max_points <= 0 || max_points >= nx) ? nx : max_points;
  double worst = 0.0;
  int64_t worst_at = -1;
  double worst_num = 0.0;
  for (int64_t k = 0; k < points; k++) {
    /* Evenly spread over x, first and last included. */
    int64_t j = points == nx ? k : (points == 1 ? 0 : k * (nx - 1) / (points - 1));
    float x0 = x[j];
    float xp = (float)(x0 + eps), xm = (float)(x0 - eps);
    x[j] = xp;
    forward(ctx);
    double lp = gt_loss(y, dy, ny);
    x[j] = xm;
    forward(ctx);
    double lm = gt_loss(y, dy, ny);
    x[j] = x0;
    /* Divide by the step actually taken in float, not the nominal 2*eps. */
    double num = (lp - lm) / ((double)xp - (double)xm);
    double ana = grad[j];
    double den = fabs(num);
    if (fabs(ana) > den) den = fabs(ana);
    if (floor > den) den = floor;
    double e = (isfinite(num) && isfinite(ana)) ? fabs(num - ana) / den : INFINITY;
    if (e > worst || (isinf(e) && worst_at < 0)) {
      worst = e;
      worst_at = j;
      worst_num = num;
    }
  }
  forward(ctx); /* leave y consistent with the restored x */
  const char *verbose = getenv("GT_VERBOSE");
  if (verbose && verbose[0] && strcmp(verbose, "0") != 0 && worst_at >= 0)
    printf("\n  gradcheck: max err %.3e at x[%lld]: numeric %.9g analytic %.9g\n", worst,
           (long long)worst_at, worst_num, (double)grad[worst_at]);
  return worst;
}

/* --- random data ------------------------------------------------------------------------- */
void gt_fill_uniform(float *x, int64_t n, float lo, float hi, uint64_t seed) {
  /* splitmix64 turns any seed (0 included) into a good non-zero xorshift64* state. */
  uint64_t s = seed + 0x9E3779B97F4A7C15ull;
  s = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9ull;
  s = (s ^ (s >> 27)) * 0x94D049BB133111EBull;
  s ^= s >> 31;
  if (s == 0) s = 0x2545F4914F6CDD1Dull;
  for (int64_t i = 0; i < n; i++) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    uint64_t r = s * 0x2545F4914F6CDD1Dull;
    double u = (double)(r >> 11) * 0x1.0p-53; /* [0, 1) */
    float v = (float)(lo + (hi - (double)lo) * u);
    if (v >= hi) v = nextafterf(hi, lo); /* rounding to float must not reach hi */
    if (v < lo) v = lo;
    x[i] = v;
  }
}

void *gt_alloc(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void *p = aligned_alloc(64, rounded);
  if (!p) {
    fprintf(stderr, "gt_alloc: out of memory allocating %zu bytes\n", bytes);
    abort();
  }
  memset(p, 0, rounded);
  return p;
}

void gt_free(void *p) {
  free(p);
}

float *gt_falloc(int64_t n) {
  return gt_alloc((size_t)(n > 0 ? n : 1) * sizeof(float));
}

void *gt_malloc_exact(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  CU_ASSERT_FATAL(p != NULL);
  return p;
}

float *gt_frand(int64_t n, uint64_t seed) {
  float *p = gt_falloc(n);
  gt_fill_uniform(p, n, -1.0f, 1.0f, seed);
  return p;
}

void gt_conv2d_ref(const ganfw_conv2d_shape *s, const float *x, const float *w, const float *b,
                   const float *dy, double *y, double *dx, double *dw) {
  const int64_t nx = s->N * s->C * s->H * s->W, nw = s->K * s->C * s->R * s->S;
  memset(dx, 0, (size_t)nx * sizeof *dx);
  memset(dw, 0, (size_t)nw * sizeof *dw);
  for (int64_t n = 0; n < s->N; n++)
    for (int64_t k = 0; k < s->K; k++)
      for (int64_t p = 0; p < s->P; p++)
        for (int64_t q = 0; q < s->Q; q++) {
          const int64_t yi = ((n * s->K + k) * s->P + p) * s->Q + q;
          double acc = b ? b[k] : 0.0;
          const double g = dy[yi];
          for (int64_t c = 0; c < s->C; c++)
            for (int64_t r = 0; r < s->R; r++) {
              const int64_t h = p * s->stride_h - s->pad_h + r;
              if (h < 0 || h >= s->H) continue;
              for (int64_t t = 0; t < s->S; t++) {
                const int64_t v = q * s->stride_w - s->pad_w + t;
                if (v < 0 || v >= s->W) continue;
                const int64_t xi = ((n * s->C + c) * s->H + h) * s->W + v;
                const int64_t wi = ((k * s->C + c) * s->R + r) * s->S + t;
                acc += (double)x[xi] * w[wi];
                dx[xi] += g * w[wi];
                dw[wi] += g * x[xi];
              }
            }
          y[yi] = acc;
        }
}

double gt_rel_err(const float *got, const double *want, int64_t n, double floor) {
  double scale = 0.0, err = 0.0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
  const double f = fmax(floor * scale, 1e-30);
  for (int64_t i = 0; i < n; i++) {
    const double e = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), f);
    if (!(e <= err)) err = e; /* NaN wins */
  }
  return err;
}

/* --- data sets ------------------------------------------------------------------------ */

static void put_be32(FILE *f, uint32_t v) {
  unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                        (unsigned char)v};
  fwrite(b, 1, 4, f);
}

static int write_idx_pair(const char *dir, const char *prefix, int n, uint64_t seed) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
  FILE *fi = fopen(path, "wb");
  snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
  FILE *fl = fopen(path, "wb");
  if (!fi || !fl) {
    if (fi) fclose(fi);
    if (fl) fclose(fl);
    return -1;
  }
  put_be32(fi, 0x00000803);
  put_be32(fi, (uint32_t)n);
  put_be32(fi, 28);
  put_be32(fi, 28);
  put_be32(fl, 0x00000801);
  put_be32(fl, (uint32_t)n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  unsigned char img[28 * 28];
  for (int i = 0; i < n; i++) {
    int label = i % 10;
    memset(img, 0, sizeof img);
    /* a bar whose angle and offset depend on the label, with a little jitter */
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    int jitter = (int)(s % 3) - 1;
    for (int t = 4; t < 24; t++) {
      int x = 6 + label * 2 + jitter + (t - 14) * (label % 3 - 1) / 3;
      for (int dx = -1; dx <= 1; dx++)
        if (x + dx >= 0 && x + dx < 28) img[t * 28 + x + dx] = dx == 0 ? 255 : 128;
    }
    fwrite(img, 1, sizeof img, fi);
    unsigned char l = (unsigned char)label;
    fwrite(&l, 1, 1, fl);
  }
  int bad = fclose(fi) != 0;
  bad |= fclose(fl) != 0;
  return bad ? -1 : 0;
}

ganfw_status gt_train(const char *config, const char *const *sets, int nsets) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(config, sets, nsets, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(run->config);
  if (st == GANFW_OK) st = ganfw_train(s);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

int gt_csv_column(const char *path, int col, double *v, int cap) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[8192];
  int n = 0;
  if (!fgets(line, sizeof line, f)) n = -1; /* the header */
  while (n >= 0 && n < cap && fgets(line, sizeof line, f)) {
    char *p = line;
    for (int c = 0; c < col && p; c++) {
      p = strchr(p, ',');
      if (p) p++;
    }
    if (!p) break;
    v[n++] = strtod(p, NULL);
  }
  fclose(f);
  return n;
}

int gt_write_mnist(const char *dir, int n_train, int n_test, uint64_t seed) {
  if (write_idx_pair(dir, "train", n_train, seed) != 0) return -1;
  return write_idx_pair(dir, "t10k", n_test, seed + 1);
}

typedef struct gt_jpeg_err {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
} gt_jpeg_err;

static void gt_jpeg_fail(j_common_ptr cinfo) {
  char msg[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, msg);
  printf("\n  gt_write_jpeg: libjpeg: %s\n", msg);
  longjmp(((gt_jpeg_err *)cinfo->err)->jump, 1);
}

int gt_write_jpeg(const char *path, const uint8_t *px, int32_t h, int32_t w, int32_t c,
                  const gt_jpeg_opts *opts) {
  static const gt_jpeg_opts plain;
  const gt_jpeg_opts o = opts ? *opts : plain; /* a copy: nothing the longjmp could clobber */
  FILE *const f = fopen(path, "wb");
  if (!f) {
    printf("\n  gt_write_jpeg: cannot create %s\n", path);
    return -1;
  }
  struct jpeg_compress_struct cinfo;
  gt_jpeg_err err;
  memset(&cinfo, 0, sizeof cinfo);
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = gt_jpeg_fail;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    fclose(f);
    return -1;
  }
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, f);
  cinfo.image_width = (JDIMENSION)w;
  cinfo.image_height = (JDIMENSION)h;
  cinfo.input_components = c;
  cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : c == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  if (o.stored == 'R') jpeg_set_colorspace(&cinfo, JCS_RGB);
  if (o.stored == 'Y') jpeg_set_colorspace(&cinfo, JCS_YCCK);
  jpeg_set_quality(&cinfo, o.quality ? o.quality : 90, TRUE);
  if (o.full_chroma)
    for (int k = 0; k < cinfo.num_components; k++)
      cinfo.comp_info[k].h_samp_factor = cinfo.comp_info[k].v_samp_factor = 1;
  if (o.progressive) jpeg_simple_progression(&cinfo);
  cinfo.arith_code = o.arithmetic ? TRUE : FALSE;
  if (o.restart > 0) cinfo.restart_in_rows = o.restart;
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = (JSAMPROW)(px + (size_t)cinfo.next_scanline * w * c);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return fclose(f) == 0 ? 0 : -1;
}

int gt_python_has(const char *modules) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import %s' >/dev/null 2>&1", modules);
  return system(cmd) == 0;
}

double gt_tensor_norm_rel(ganfw_tensor *a, ganfw_tensor *b) {
  ganfw_tensor *fa = ganfw_tensor_as_dtype(a, GANFW_DTYPE_F32, GANFW_MEM_OTHER);
  ganfw_tensor *fb = ganfw_tensor_as_dtype(b, GANFW_DTYPE_F32, GANFW_MEM_OTHER);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fa);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fb);
  CU_ASSERT_EQUAL_FATAL(fa->numel, fb->numel);
  double d = 0, r = 0;
  const float *x = fa->data, *y = fb->data;
  for (int64_t i = 0; i < fa->numel; i++) {
    d += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    r += (double)y[i] * y[i];
  }
  ganfw_tensor_destroy(fa);
  ganfw_tensor_destroy(fb);
  return sqrt(d / fmax(r, 1e-30));
}

void gt_assert_same_checkpoint(const char *a, const char *b, const char *const *keys,
                               size_t n_keys) {
  ganfw_st_file *fa = NULL, *fb = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(a, &fa), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(b, &fb), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_count(fa), ganfw_st_count(fb));
  int64_t differ = 0;
  for (int64_t i = 0; i < ganfw_st_count(fa); i++) {
    const ganfw_st_tensor *ta = ganfw_st_at(fa, i);
    const ganfw_st_tensor *tb = ganfw_st_find(fb, ta->name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tb);
    CU_ASSERT_EQUAL_FATAL(ta->nbytes, tb->nbytes);
    if (memcmp(ta->data, tb->data, (size_t)ta->nbytes) != 0 && differ++ < 3)
      printf("\n  %s differs between %s and %s\n", ta->name, a, b);
  }
  CU_ASSERT_EQUAL(differ, 0);
  for (size_t i = 0; i < n_keys; i++) {
    const char *va = ganfw_st_metadata(fa, keys[i]), *vb = ganfw_st_metadata(fb, keys[i]);
    CU_ASSERT_FATAL(va && vb);
    CU_ASSERT_STRING_EQUAL(va, vb);
  }
  ganfw_st_close(fa);
  ganfw_st_close(fb);
}

ganfw_net *gt_graph_net(ganfw_ctx *ctx) {
  ganfw_net *net = ganfw_net_create(ctx, "net");
  const char *sum_in[2] = {"r0", "c1"};
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c0", 2, 4, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(net, "b0", 4, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "r0", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv2d(net, "c1", 4, 4, 3, 1, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_add(net, "sum", sum_in, 2), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(net, "b1", 4, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "l1", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_dropout(net, "d", 0.3f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(net, "f"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(net, "fc", 4 * 64, 5, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(net, "t", GANFW_ACT_TANH, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(net, 2, 8, 8), GANFW_OK);
  return net;
}

void gt_net_sgd(ganfw_net *net, float lr) {
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &p), GANFW_OK);
    if (!p.grad) continue;
    float *w = p.value->data;
    const float *g = p.grad->data;
    for (int64_t k = 0; k < p.value->numel; k++) w[k] -= lr * g[k];
  }
}

int gt_net_bitwise(ganfw_net *a, ganfw_net *b) {
  int64_t n = ganfw_net_param_count(a);
  if (n != ganfw_net_param_count(b)) return 0;
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p}, q = {.struct_size = sizeof q};
    if (ganfw_net_param_info(a, i, &p) || ganfw_net_param_info(b, i, &q)) return 0;
    if (memcmp(p.value->data, q.value->data, (size_t)p.value->nbytes) != 0 ||
        memcmp(p.grad->data, q.grad->data, (size_t)p.grad->nbytes) != 0) {
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

const float *gt_ref_part(gt_ref *r, const char *name, const char *key, int64_t numel) {
  char full[96];
  snprintf(full, sizeof full, "%s.%s", name, key);
  int64_t n = 0;
  const float *p = gt_ref_f32(r, full, &n, NULL, NULL);
  CU_ASSERT(p != NULL && n == numel);
  return p && n == numel ? p : NULL;
}

int gt_ref_shape(gt_ref *r, const char *name, int64_t *v, int64_t count) {
  char full[96];
  snprintf(full, sizeof full, "%s.shape", name);
  int64_t n = 0;
  const int32_t *p = gt_ref_i32(r, full, &n);
  CU_ASSERT(p != NULL && n == count);
  if (!p || n != count) return 0;
  for (int64_t i = 0; i < count; i++) v[i] = p[i];
  return 1;
}

ganfw_tensor *gt_ref_tensor_new(ganfw_ctx *ctx, gt_ref *r, const char *key) {
  int64_t shape[8], n = 0;
  int ndim = 0;
  const float *v = gt_ref_f32(r, key, &n, shape, &ndim);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  ganfw_tensor *t = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_DATA, key);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(t, v, n * 4), GANFW_OK);
  return t;
}

void gt_ref_load_params(gt_ref *r, ganfw_net *net, const char *prefix) {
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &p), GANFW_OK);
    char key[160];
    snprintf(key, sizeof key, "%s_%s", prefix, p.name);
    int64_t n = 0;
    const float *v = gt_ref_f32(r, key, &n, NULL, NULL);
    if (!v) printf("\n    the reference has no %s", key);
    CU_ASSERT_FATAL(v && n == p.value->numel);
    CU_ASSERT_EQUAL(ganfw_tensor_from_host(p.value, v, p.value->nbytes), GANFW_OK);
  }
}

void gt_ref_gan_session(const char *config_text, const char *ref, ganfw_run **run,
                        ganfw_session **s) {
  char dir[] = "/tmp/ganfw_refgan_XXXXXX", path[256], ref_path[4096];
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/gan.yaml", dir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(config_text, f);
  fclose(f);
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 32, .width = 32};
  ganfw_status st = ganfw_run_open_file(path, NULL, 0, run);
  if (st == GANFW_OK) st = ganfw_session_open(*run, 0, &info, s);
  unlink(path);
  rmdir(dir);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_ckpt_net nets[2] = {{.net = (*s)->generator, .prefix = "generator"},
                            {.net = (*s)->discriminator, .prefix = "discriminator"}};
  ganfw_ckpt_report report = {0};
  snprintf(ref_path, sizeof ref_path, "%s/%s.safetensors", getenv("GANFW_REF_DIR"), ref);
  st = ganfw_checkpoint_load_weights(ref_path, nets, 2, 0, &report);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(report.missing, 0);
}

void gt_write_bare_generator(const char *src, const char *dst, const char *skip) {
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(src, &f), GANFW_OK);
  ganfw_st_writer *w = ganfw_st_writer_create();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  int copied = 0;
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    if (strncmp(t->name, "generator.", 10) != 0 || (skip && strcmp(t->name, skip) == 0)) continue;
    CU_ASSERT_EQUAL(ganfw_st_writer_add_raw(w, t->name, t->dtype_name, t->ndim, t->shape, t->data),
                    GANFW_OK);
    copied++;
  }
  CU_ASSERT(copied > 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_write(w, dst), GANFW_OK);
  ganfw_st_writer_destroy(w);
  ganfw_st_close(f);
}

/* --- a temporary folder per test process -------------------------------------------------- */

static char tmp_root[128];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void remove_tmp_root(void) {
  if (tmp_root[0]) nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *gt_tmp_root(const char *suite) {
  if (!tmp_root[0]) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/ganfw_test_%s.XXXXXX", suite);
    if (!mkdtemp(tmp_root)) {
      perror("mkdtemp");
      abort();
    }
    atexit(remove_tmp_root);
  }
  return tmp_root;
}
