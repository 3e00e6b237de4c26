/* Shared helpers for the CUnit suites: a main that runs the registered suites, PyTorch
 * reference tensors (safetensors files written by tests/ref/generate.py), tolerant
 * comparisons and a finite-difference gradient check. */
#ifndef GANFW_TESTUTIL_H
#define GANFW_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stdint.h>

#include "ganfw/status.h"
#include "ganfw/host.h"
#include "ganfw/tensor.h"

/* A suite file defines `static CU_TestInfo tests[] = {{"name", fn}, ..., CU_TEST_INFO_NULL};`
 * and ends with GT_MAIN("suite name", tests). The runner exits non-zero when any assertion
 * failed (so CTest sees it), and prints CUnit's summary. */
int gt_run(const char *suite, CU_TestInfo *tests);
/* The same with a suite fixture: init runs before the first test (non-zero: the suite
 * fails), clean after the last. */
int gt_run_fixture(const char *suite, CU_TestInfo *tests, CU_InitializeFunc init,
                   CU_CleanupFunc clean);
#define GT_MAIN(suite, tests)                                                                      \
  int main(void) {                                                                                 \
    return gt_run(suite, tests);                                                                   \
  }

/* --- configs ----------------------------------------------------------------------------- */
/* The config at `path` with the --set assignments sets[0..nsets), read now (train/run.h), as
 * the planner and the tools take it; owned by the runner, which frees it after the suite's
 * last test. A config that cannot be read is a fatal CUnit failure naming the message. */
typedef struct ganfw_run_config ganfw_run_config;
const ganfw_run_config *gt_config(const char *path, const char *const *sets, int nsets);

/* --- reference tensors ---------------------------------------------------------------- */
typedef struct gt_ref gt_ref;
/* Opens $GANFW_REF_DIR/<name>.safetensors. Returns NULL (and records a CUnit failure
 * naming the file and the command that writes it) when it is missing or corrupt. */
gt_ref *gt_ref_open(const char *name);
void gt_ref_close(gt_ref *r); /* accepts NULL */
/* The tensor `key` converted to f32 (f32, f64, i64 and i32 are accepted), owned by the
 * ref and valid until gt_ref_close. Fills shape[0..*ndim) when ndim is not NULL. NULL
 * (and a CUnit failure) when absent. */
const float *gt_ref_f32(gt_ref *r, const char *key, int64_t *numel, int64_t *shape, int *ndim);
/* The same, for integer tensors (labels, indices), converted to int32. */
const int32_t *gt_ref_i32(gt_ref *r, const char *key, int64_t *numel);
/* The f32 tensor "<name>.<key>" of numel values; NULL (and a CUnit failure) when it is absent
 * or of another size. */
const float *gt_ref_part(gt_ref *r, const char *name, const char *key, int64_t numel);
/* "<name>.shape" (integers) into v[0..count); 0 (and a CUnit failure) when it is absent or
 * of another length. */
int gt_ref_shape(gt_ref *r, const char *name, int64_t *v, int64_t count);
/* A scalar stored as a one-element tensor. */
double gt_ref_scalar(gt_ref *r, const char *key);
/* The reference tensor `key` as a new f32 tensor of ctx (GANFW_MEM_DATA), owned by the
 * caller; a missing key is a fatal CUnit failure. */
typedef struct ganfw_ctx ganfw_ctx;
ganfw_tensor *gt_ref_tensor_new(ganfw_ctx *ctx, gt_ref *r, const char *key);
/* Every parameter of net from the reference's "<prefix>_<state_dict name>" (each must be
 * there with the parameter's element count). */
void gt_ref_load_params(gt_ref *r, ganfw_net *net, const char *prefix);

/* --- GAN sessions from reference weights ------------------------------------------------ */
/* A GAN session of 1x32x32 images built from `config_text` (written to a temporary file
 * that is removed again), its generator and discriminator loaded from the tensors
 * "generator.*" and "discriminator.*" of $GANFW_REF_DIR/<ref>.safetensors. The caller
 * closes *s and *run (ganfw_session_close, ganfw_run_close). Failures are fatal. */
/* The generator's tensors of ganfw checkpoint `src` ("generator.*", but `skip` when not
 * NULL) written to `dst` without any metadata: how a PyTorch state_dict saved as
 * safetensors under ganfw's names looks. Failures are CUnit failures. */
void gt_write_bare_generator(const char *src, const char *dst, const char *skip);
typedef struct ganfw_run ganfw_run;
typedef struct ganfw_session ganfw_session;
void gt_ref_gan_session(const char *config_text, const char *ref, ganfw_run **run,
                        ganfw_session **s);

/* --- comparisons -------------------------------------------------------------------- */
/* Two checkpoint (safetensors) files hold the same tensors, bit for bit (the first three
 * that differ are printed), and the same value of each metadata key keys[0..n_keys). */
void gt_assert_same_checkpoint(const char *a, const char *b, const char *const *keys,
                               size_t n_keys);
/* max_i |a-b| / max(|b|, floor): the relative error with a floor for values near zero. */
double gt_max_rel_err(const float *a, const float *b, int64_t n, double floor);
/* Asserts max rel err <= tol (with floor), printing the worst index and values on
 * failure under `what`. Returns the error reached, so suites can report tolerances. */
double gt_check_close(const char *what, const float *got, const float *want, int64_t n, double tol,
                      double floor);

/* ||a - b|| / ||b|| over the values of two tensors of equal element count and any float
 * dtype (f32, f16, bf16: compared as f32), in double; asserts (fatally) that both can be
 * read. */
double gt_tensor_norm_rel(ganfw_tensor *a, ganfw_tensor *b);

/* --- finite differences ----------------------------------------------------------------
 * For a function y = f(inputs) that `forward(ctx)` recomputes into y[0..ny), checks the
 * analytic gradient `grad` of L = sum_i y_i * dy_i with respect to x[0..nx) by central
 * differences with step eps, computing L in double, at up to `max_points` indices spread
 * over x. Returns max |num - ana| / max(|num|, |ana|, floor). */
typedef void (*gt_forward_fn)(void *ctx);
double gt_gradcheck(gt_forward_fn forward, void *ctx, float *x, int64_t nx, const float *y,
                    const float *dy, int64_t ny, const float *grad, double eps, int64_t max_points,
                    double floor);

/* --- random data ----------------------------------------------------------------------- */
/* Deterministic uniform [lo, hi) floats from a small xorshift generator. */
void gt_fill_uniform(float *x, int64_t n, float lo, float hi, uint64_t seed);

/* --- runs ------------------------------------------------------------------------------ */
/* `ganfw CONFIG --set ...` in-process: the run, its session with data, the unread-key check
 * and the training loop of the model's family (GAN, classifier or trainer plugin). */
ganfw_status gt_train(const char *config, const char *const *sets, int nsets);
/* Column `col` (0-based) of every data row of a CSV file (after its header) into
 * v[0..cap); returns the rows read, -1 when the file cannot be opened. */
int gt_csv_column(const char *path, int col, double *v, int cap);

/* --- data sets ------------------------------------------------------------------------ */
/* Writes a small MNIST-format data set into `dir` (train-* and t10k-* IDX files, 28x28):
 * n_train and n_test images of blurred strokes whose position depends on the label
 * (label = index % 10), deterministic from `seed`. Returns 0 on success. */
int gt_write_mnist(const char *dir, int n_train, int n_test, uint64_t seed);

/* --- JPEG files ------------------------------------------------------------------------ */
/* How gt_write_jpeg encodes (all zero: baseline, Huffman, quality 90, 4:2:0 chroma, the
 * usual colour space: gray for 1 channel, YCbCr for 3, CMYK for 4). */
typedef struct gt_jpeg_opts {
  int32_t quality;     /* 1..100; 0: 90 */
  int32_t progressive; /* 1: libjpeg's simple progression */
  int32_t arithmetic;  /* 1: arithmetic coding */
  int32_t full_chroma; /* 1: 4:4:4 (no chroma subsampling) */
  int32_t restart;     /* > 0: a restart marker every that many MCU rows */
  int32_t stored;      /* 0: the usual; 'R': 3 channels stored as RGB (no YCbCr); 'Y': 4
                        * channels stored as YCCK */
} gt_jpeg_opts;
/* Writes interleaved 8-bit pixels [h,w,c] (c = 1 gray, 3 RGB, 4 CMYK as stored, Adobe's
 * inverted convention being the caller's) as a JPEG with libjpeg. 0 on success, -1 (with a
 * message on stdout) on failure. opts may be NULL. */
int gt_write_jpeg(const char *path, const uint8_t *px, int32_t h, int32_t w, int32_t c,
                  const gt_jpeg_opts *opts);
/* 1 when `/usr/bin/python3 -c "import <modules>"` succeeds (e.g. "PIL", "torchvision"). */
int gt_python_has(const char *modules);

/* This process's temporary folder, /tmp/ganfw_test_<suite>.XXXXXX, made on the first call
 * and removed with everything in it at exit; aborts when it cannot be made. */
const char *gt_tmp_root(const char *suite);

/* An aligned, zeroed buffer freed with gt_free. Aborts on failure (a test, not the core). */
void *gt_alloc(size_t bytes);
void gt_free(void *p);
/* n zeroed floats (at least one), freed with gt_free. */
float *gt_falloc(int64_t n);
/* n floats (at least one) uniform in [-1, 1) from `seed`, freed with gt_free. */
float *gt_frand(int64_t n, uint64_t seed);
/* Exactly `bytes` (at least one) from malloc, freed with free, so that ASan flags any access
 * past them (a kernel's workspace); a failed allocation fails the test. */
void *gt_malloc_exact(size_t bytes);

/* --- convolutions ----------------------------------------------------------------------- */
typedef struct ganfw_conv2d_shape ganfw_conv2d_shape;
/* Double sums of conv2d (backend/op.h's shape, any kernel, stride and padding):
 * y = conv(x, w) + b, and dx, dw for the upstream gradient dy. */
void gt_conv2d_ref(const ganfw_conv2d_shape *s, const float *x, const float *w, const float *b,
                   const float *dy, double *y, double *dx, double *dw);
/* max |got - want| / max(|want|, floor * max |want|) over n values (NaN wins). */
double gt_rel_err(const float *got, const double *want, int64_t n, double floor);

/* 1 when every parameter, gradient, running statistic and counter of the two nets (built
 * alike) is bitwise equal; prints the first difference. */
typedef struct ganfw_net ganfw_net;
int gt_net_bitwise(ganfw_net *a, ganfw_net *b);
/* The executor tests' graph net: 0 c0, 1 b0, 2 r0 (read by c1 and sum), 3 c1, 4 sum = r0 + c1,
 * 5 b1, 6 l1, 7 dropout, 8 flatten, 9 fc, 10 tanh: [N,2,8,8] -> [N,5], built on ctx. */
ganfw_net *gt_graph_net(ganfw_ctx *ctx);
/* A plain SGD step, w -= lr * grad, on every trainable parameter (on the host). */
void gt_net_sgd(ganfw_net *net, float lr);

#endif
