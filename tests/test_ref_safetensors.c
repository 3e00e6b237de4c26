/* Reads the file tests/ref/gen_safetensors.py writes with PyTorch (every dtype the reader
 * and testutil convert, scalar/empty/5-D shapes, metadata with escapes and UTF-8) and checks
 * each value against what the C side recomputes from its index. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "testutil.h"

static double exact_value(int k) {
  return k / 4.0 - 3.0;
}

/* The raw file through the core reader: names, dtypes, shapes, metadata. */
static void test_raw_layout(void) {
  const char *dir = getenv("GANFW_REF_DIR");
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  char path[4096];
  snprintf(path, sizeof path, "%s/safetensors.safetensors", dir);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_count(f), 12);
  static const struct {
    const char *name, *dtype;
    int32_t ganfw_dtype;
    int32_t ndim;
    int64_t shape[5];
  } want[] = {
      {"f32", "F32", GANFW_DTYPE_F32, 3, {2, 3, 4}},
      {"f64", "F64", GANFW_ST_DTYPE_OTHER, 2, {4, 6}},
      {"f16", "F16", GANFW_DTYPE_F16, 1, {24}},
      {"bf16", "BF16", GANFW_DTYPE_BF16, 2, {6, 4}},
      {"i64", "I64", GANFW_ST_DTYPE_OTHER, 1, {10}},
      {"i32", "I32", GANFW_DTYPE_I32, 2, {7, 1}},
      {"u8", "U8", GANFW_DTYPE_U8, 1, {6}},
      {"scalar_f64", "F64", GANFW_ST_DTYPE_OTHER, 0, {0}},
      {"empty", "F32", GANFW_DTYPE_F32, 2, {0, 3}},
      {"x5d", "F32", GANFW_DTYPE_F32, 5, {1, 2, 1, 3, 2}},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const ganfw_st_tensor *t = ganfw_st_find(f, want[i].name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(t->name, want[i].name);
    CU_ASSERT_STRING_EQUAL(t->dtype_name, want[i].dtype);
    CU_ASSERT_EQUAL(t->dtype, want[i].ganfw_dtype);
    CU_ASSERT_EQUAL(t->ndim, want[i].ndim);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
      CU_ASSERT_EQUAL(t->shape[d], want[i].shape[d]);
      numel *= want[i].shape[d];
    }
    CU_ASSERT_EQUAL(t->numel, numel);
    CU_ASSERT_EQUAL(t->nbytes, numel * t->elem_size);
    CU_ASSERT_EQUAL((uintptr_t)t->data % (uintptr_t)t->elem_size, 0);
  }
  CU_ASSERT_PTR_NULL(ganfw_st_find(f, "missing"));
  CU_ASSERT_EQUAL(ganfw_st_metadata_count(f), 3);
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "format"), "pt");
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "writer"), "tests/ref/reflib.py");
  const char *odd = ganfw_st_metadata(f, "quote\"and\\slash");
  CU_ASSERT_PTR_NOT_NULL(odd);
  if (odd) CU_ASSERT_STRING_EQUAL(odd, "\xc3\xbc \xe2\x9c\x93"); /* "ü ✓" */
  ganfw_st_close(f);
}

static void test_float_dtypes(void) {
  gt_ref *r = gt_ref_open("safetensors");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  float want[24], want_f64[24];
  for (int k = 0; k < 24; k++) {
    want[k] = (float)exact_value(k);
    want_f64[k] = (float)(exact_value(k) / 3.0);
  }
  int64_t numel = 0, shape[8] = {0};
  int ndim = 0;
  const char *keys[] = {"f32", "f16", "bf16"};
  for (int i = 0; i < 3; i++) {
    const float *v = gt_ref_f32(r, keys[i], &numel, shape, &ndim);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(numel, 24);
    CU_ASSERT_EQUAL(gt_check_close(keys[i], v, want, 24, 0.0, 1e-30), 0.0);
  }
  const float *v = gt_ref_f32(r, "f64", &numel, shape, &ndim);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  CU_ASSERT_EQUAL(ndim, 2);
  CU_ASSERT_EQUAL(shape[0], 4);
  CU_ASSERT_EQUAL(shape[1], 6);
  /* f64 -> f32 rounds to nearest: the same float as the C cast. */
  CU_ASSERT_EQUAL(gt_check_close("f64", v, want_f64, 24, 0.0, 1e-30), 0.0);
  CU_ASSERT_EQUAL(gt_ref_scalar(r, "scalar_f64"), 0.1);
  /* randn_sum is PyTorch's f64 sum of the f32 tensor randn. */
  const float *rn = gt_ref_f32(r, "randn", &numel, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rn);
  CU_ASSERT_EQUAL(numel, 15);
  double sum = 0.0;
  for (int i = 0; i < 15; i++) sum += rn[i];
  CU_ASSERT_DOUBLE_EQUAL(sum, gt_ref_scalar(r, "randn_sum"), 1e-12 * (1.0 + fabs(sum)));
  const float *e = gt_ref_f32(r, "empty", &numel, shape, &ndim);
  CU_ASSERT_PTR_NOT_NULL(e);
  CU_ASSERT_EQUAL(numel, 0);
  CU_ASSERT_EQUAL(ndim, 2);
  CU_ASSERT_EQUAL(shape[0], 0);
  CU_ASSERT_EQUAL(shape[1], 3);
  gt_ref_close(r);
}

static void test_int_dtypes(void) {
  gt_ref *r = gt_ref_open("safetensors");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  int64_t numel = 0;
  const int32_t *i64 = gt_ref_i32(r, "i64", &numel);
  CU_ASSERT_PTR_NOT_NULL_FATAL(i64);
  CU_ASSERT_EQUAL(numel, 10);
  for (int k = 0; k < 10; k++) CU_ASSERT_EQUAL(i64[k], k * 1000003 - 5000000);
  const int32_t *i32 = gt_ref_i32(r, "i32", &numel);
  CU_ASSERT_PTR_NOT_NULL_FATAL(i32);
  CU_ASSERT_EQUAL(numel, 7);
  for (int k = 0; k < 7; k++) CU_ASSERT_EQUAL(i32[k], k * -3 + 2);
  const int32_t *u8 = gt_ref_i32(r, "u8", &numel);
  CU_ASSERT_PTR_NOT_NULL_FATAL(u8);
  CU_ASSERT_EQUAL(numel, 6);
  for (int k = 0; k < 6; k++) CU_ASSERT_EQUAL(u8[k], 250 + k);
  /* Integers also convert to f32 (i64 values here are exact in float up to rounding). */
  const float *f = gt_ref_f32(r, "i32", &numel, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  for (int k = 0; k < 7; k++) CU_ASSERT_EQUAL(f[k], (float)(k * -3 + 2));
  const float *g = gt_ref_f32(r, "i64", &numel, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  for (int k = 0; k < 10; k++) CU_ASSERT_EQUAL(g[k], (float)(k * 1000003 - 5000000));
  gt_ref_close(r);
}

/* A file we write with a PyTorch-written tensor reads back the same bytes. */
static void test_roundtrip_through_writer(void) {
  gt_ref *r = gt_ref_open("safetensors");
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  int64_t numel = 0, shape[8];
  int ndim = 0;
  const float *x = gt_ref_f32(r, "x5d", &numel, shape, &ndim);
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  const char *dir = getenv("GANFW_REF_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/test_ref_safetensors.roundtrip.safetensors", dir);
  ganfw_st_writer *w = ganfw_st_writer_create();
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "x5d", GANFW_DTYPE_F32, ndim, shape, x), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_OK);
  ganfw_st_writer_destroy(w);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &f), GANFW_OK);
  const ganfw_st_tensor *t = ganfw_st_find(f, "x5d");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->numel, numel);
  CU_ASSERT_EQUAL(memcmp(t->data, x, (size_t)numel * sizeof(float)), 0);
  ganfw_st_close(f);
  remove(path);
  gt_ref_close(r);
}

static CU_TestInfo tests[] = {
    {"raw_layout", test_raw_layout},
    {"float_dtypes", test_float_dtypes},
    {"int_dtypes", test_int_dtypes},
    {"roundtrip_through_writer", test_roundtrip_through_writer},
    CU_TEST_INFO_NULL,
};
GT_MAIN("ref_safetensors", tests)
