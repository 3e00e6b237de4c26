/* The backend interface as op descriptors (core/src/backend/op.h, backend.h): every op kind has
 * its own name; the CPU backend supports every kind in f32 and refuses a kind it lacks in a
 * dtype (GEMM in f16) with a message naming the op and the dtype; a kind out of range is
 * refused before any backend sees it; the meta backend runs every kind without touching
 * anything and answers supports and workspace as its shadow does (the CPU by default, or a
 * test backend whose answers differ from the CPU's); and the table stays small. */
#include <stdio.h>
#include <string.h>

#include "backend/ops.h"
#include "base/error.h"
#include "testutil.h"

/* A conv2d shape of DC-GAN's discriminator, and its conv_transpose2d twin. */
static ganfw_conv2d_shape conv_shape(void) {
  ganfw_conv2d_shape s = {.N = 8,
                          .C = 3,
                          .H = 32,
                          .W = 32,
                          .K = 16,
                          .R = 4,
                          .S = 4,
                          .stride_h = 2,
                          .stride_w = 2,
                          .pad_h = 1,
                          .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&s), GANFW_OK);
  return s;
}

static ganfw_convt2d_shape convt_shape(void) {
  ganfw_convt2d_shape s = {.N = 8,
                           .C = 16,
                           .H = 8,
                           .W = 8,
                           .K = 3,
                           .R = 4,
                           .S = 4,
                           .stride_h = 2,
                           .stride_w = 2,
                           .pad_h = 1,
                           .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_convt2d_shape_init(&s), GANFW_OK);
  return s;
}

/* Every kind has a non-empty name of its own; out of range reads "?". */
static void test_op_names(void) {
  int distinct = 1;
  for (int32_t k = 0; k < GANFW_OP_COUNT; k++) {
    const char *a = ganfw_op_name(k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT(a[0] != '\0');
    CU_ASSERT_STRING_NOT_EQUAL(a, "?");
    for (int32_t j = 0; j < k; j++)
      if (strcmp(a, ganfw_op_name(j)) == 0) {
        printf("\n  ops %d and %d are both named %s", (int)j, (int)k, a);
        distinct = 0;
      }
  }
  CU_ASSERT(distinct);
  CU_ASSERT_STRING_EQUAL(ganfw_op_name(GANFW_OP_GEMM), "gemm");
  CU_ASSERT_STRING_EQUAL(ganfw_op_name(GANFW_OP_CONV2D_FORWARD), "conv2d_forward");
  CU_ASSERT_STRING_EQUAL(ganfw_op_name(-1), "?");
  CU_ASSERT_STRING_EQUAL(ganfw_op_name(GANFW_OP_COUNT), "?");
}

/* The CPU, the reference, runs every op in f32. */
static void test_cpu_supports_every_op_in_f32(void) {
  ganfw_backend *cpu = ganfw_cpu_backend();
  for (int32_t k = 0; k < GANFW_OP_COUNT; k++) {
    const ganfw_op op = {.kind = k, .dtype = GANFW_DTYPE_F32};
    if (!ganfw_backend_supports(cpu, &op)) printf("\n  cpu: no %s in f32", ganfw_op_name(k));
    CU_ASSERT_EQUAL(ganfw_backend_supports(cpu, &op), 1);
  }
}

/* GEMM is f32 only: in f16 the CPU says so in supports, and run refuses it, naming the op and
 * the dtype, without touching the (NULL) buffers. */
static void test_cpu_refuses_unsupported_dtype(void) {
  ganfw_backend *cpu = ganfw_cpu_backend();
  ganfw_op op = {.kind = GANFW_OP_GEMM,
                 .dtype = GANFW_DTYPE_F16,
                 .shape.d = {4, 4, 4, 4, 4, 4},
                 .sc = {1.0, 0.0}};
  CU_ASSERT_EQUAL(ganfw_backend_supports(cpu, &op), 0);
  ganfw_error_clear();
  CU_ASSERT_EQUAL(ganfw_backend_run(cpu, &op), GANFW_ERR_UNSUPPORTED);
  CU_ASSERT_EQUAL(ganfw_error_code(), GANFW_ERR_UNSUPPORTED);
  const char *msg = ganfw_error_message();
  printf("\n  %s", msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "gemm"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "f16"));
  ganfw_error_clear();
}

/* A kind out of range is no op: refused by ganfw_backend_run before the backend's run, not
 * supported, no workspace; on the CPU and on the meta backend alike. */
static void test_kind_out_of_range(void) {
  ganfw_backend *bes[2] = {ganfw_cpu_backend(), ganfw_meta_backend(NULL)};
  const int32_t kinds[3] = {-1, GANFW_OP_COUNT, 1000};
  CU_ASSERT_PTR_NOT_NULL_FATAL(bes[1]);
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < 3; i++) {
      ganfw_op op = {.kind = kinds[i]};
      ganfw_error_clear();
      CU_ASSERT_EQUAL(ganfw_backend_run(bes[b], &op), GANFW_ERR_INVALID_ARG);
      CU_ASSERT_EQUAL(ganfw_error_code(), GANFW_ERR_INVALID_ARG);
      CU_ASSERT_EQUAL(ganfw_backend_supports(bes[b], &op), 0);
      CU_ASSERT_EQUAL(ganfw_backend_workspace(bes[b], &op), 0);
    }
  ganfw_error_clear();
}

/* The meta backend answers run with GANFW_OK for every kind, on fake (here NULL) buffers, and
 * 0 for the ops that answer a value; what it supports is what the CPU supports. */
static void test_meta_runs_every_op(void) {
  ganfw_backend *meta = ganfw_meta_backend(NULL), *cpu = ganfw_cpu_backend();
  CU_ASSERT_PTR_NOT_NULL_FATAL(meta);
  const int32_t dtypes[3] = {GANFW_DTYPE_F32, GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  for (int32_t k = 0; k < GANFW_OP_COUNT; k++) {
    ganfw_op op = {.kind = k, .result = 7.0};
    const ganfw_status st = ganfw_backend_run(meta, &op);
    if (st != GANFW_OK) printf("\n  meta: %s: %s", ganfw_op_name(k), ganfw_error_message());
    CU_ASSERT_EQUAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(op.result, 0.0);
    for (int d = 0; d < 3; d++) {
      const ganfw_op q = {.kind = k, .dtype = dtypes[d]};
      CU_ASSERT_EQUAL(ganfw_backend_supports(meta, &q), ganfw_backend_supports(cpu, &q));
    }
  }
  CU_ASSERT_EQUAL(ganfw_be_batchnorm2d_backward_in_place(meta),
                  ganfw_be_batchnorm2d_backward_in_place(cpu));
  for (int d = 1; d < 3; d++)
    CU_ASSERT_EQUAL(ganfw_be_lp_ops(meta, dtypes[d]), ganfw_be_lp_ops(cpu, dtypes[d]));
  /* the typed wrappers over it: a value op answers 0, a kernel returns OK */
  CU_ASSERT_EQUAL(ganfw_be_sum(meta, 4, (const float *)NULL), 0.0);
  CU_ASSERT_EQUAL(ganfw_be_nonfinite(meta, 4, (const float *)NULL), 0);
  CU_ASSERT_EQUAL(ganfw_be_fill(meta, 4, NULL, 1.0f), GANFW_OK);
}

/* The meta backend's workspace is the CPU's for the same conv and conv-transpose, and not 0
 * for the conv (so that the comparison says something). */
static void test_meta_workspace_is_cpus(void) {
  ganfw_backend *meta = ganfw_meta_backend(NULL), *cpu = ganfw_cpu_backend();
  CU_ASSERT_PTR_NOT_NULL_FATAL(meta);
  const ganfw_conv2d_shape s = conv_shape();
  const ganfw_convt2d_shape t = convt_shape();
  const size_t ws = ganfw_be_conv2d_workspace(cpu, &s);
  CU_ASSERT(ws > 0);
  CU_ASSERT_EQUAL(ganfw_be_conv2d_workspace(meta, &s), ws);
  CU_ASSERT_EQUAL(ganfw_be_convt2d_workspace(meta, &t), ganfw_be_convt2d_workspace(cpu, &t));
  CU_ASSERT_EQUAL(ganfw_be_conv2d_workspace_lp(meta, GANFW_DTYPE_BF16, &s),
                  ganfw_be_conv2d_workspace_lp(cpu, GANFW_DTYPE_BF16, &s));
}

/* --- a shadow whose answers are not the CPU's ---------------------------------------------- */

#define SHADOW_EXTRA 4096 /* bytes the shadow asks beyond the CPU's workspace */

static ganfw_backend_vt shadow_vt;
static ganfw_backend shadow = {.vt = &shadow_vt};
static int64_t shadow_supports_calls, shadow_workspace_calls;

/* The CPU's answers, and GEMM in f16 besides. */
static int32_t shadow_supports(ganfw_backend *be, const ganfw_op *op) {
  (void)be;
  shadow_supports_calls++;
  if (op->kind == GANFW_OP_GEMM && op->dtype == GANFW_DTYPE_F16) return 1;
  return ganfw_backend_supports(ganfw_cpu_backend(), op);
}

static size_t shadow_workspace(ganfw_backend *be, const ganfw_op *op) {
  (void)be;
  shadow_workspace_calls++;
  return ganfw_backend_workspace(ganfw_cpu_backend(), op) + SHADOW_EXTRA;
}

/* A meta backend over that shadow asks it, and answers what it answers. */
static void test_meta_asks_its_shadow(void) {
  shadow_vt = *ganfw_cpu_backend()->vt;
  shadow_vt.name = "shadow";
  shadow_vt.supports = shadow_supports;
  shadow_vt.workspace = shadow_workspace;
  ganfw_backend *meta = ganfw_meta_backend(&shadow), *cpu = ganfw_cpu_backend();
  CU_ASSERT_PTR_NOT_NULL_FATAL(meta);
  CU_ASSERT_PTR_NOT_EQUAL(meta, ganfw_meta_backend(NULL)); /* one meta backend per shadow */
  CU_ASSERT_PTR_EQUAL(ganfw_meta_backend(&shadow), meta);

  const ganfw_op gemm16 = {.kind = GANFW_OP_GEMM, .dtype = GANFW_DTYPE_F16};
  shadow_supports_calls = 0;
  CU_ASSERT_EQUAL(ganfw_backend_supports(meta, &gemm16), 1);
  CU_ASSERT(shadow_supports_calls > 0);
  CU_ASSERT_EQUAL(ganfw_backend_supports(cpu, &gemm16), 0);
  CU_ASSERT_EQUAL(ganfw_backend_supports(ganfw_meta_backend(NULL), &gemm16), 0);

  const ganfw_conv2d_shape s = conv_shape();
  shadow_workspace_calls = 0;
  CU_ASSERT_EQUAL(ganfw_be_conv2d_workspace(meta, &s),
                  ganfw_be_conv2d_workspace(cpu, &s) + SHADOW_EXTRA);
  CU_ASSERT(shadow_workspace_calls > 0);
  /* running asks nothing and runs nothing of the shadow's */
  ganfw_op op = {.kind = GANFW_OP_CONV2D_FORWARD, .shape.conv = s};
  CU_ASSERT_EQUAL(ganfw_backend_run(meta, &op), GANFW_OK);
}

/* The algorithm a convolution's pass runs on: the CPU answers for conv2d and convT (whose
 * forward is its adjoint conv2d's backward-data), the meta backend what the CPU answers,
 * and ops without a choice get NULL. */
static void test_algorithm(void) {
  ganfw_backend *cpu = ganfw_cpu_backend(), *meta = ganfw_meta_backend(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(meta);
  ganfw_conv2d_shape r = {.N = 8,
                          .C = 16,
                          .H = 14,
                          .W = 14,
                          .K = 16,
                          .R = 3,
                          .S = 3,
                          .stride_h = 1,
                          .stride_w = 1,
                          .pad_h = 1,
                          .pad_w = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&r), GANFW_OK);
  ganfw_op op = {.kind = GANFW_OP_CONV2D_FORWARD, .shape.conv = r};
  for (int32_t p = 0; p < GANFW_OP_PASS_COUNT; p++) {
    CU_ASSERT_STRING_EQUAL(ganfw_backend_algorithm(cpu, &op, p), "direct");
    CU_ASSERT_STRING_EQUAL(ganfw_backend_algorithm(meta, &op, p), "direct");
  }
  CU_ASSERT_PTR_NULL(ganfw_backend_algorithm(cpu, &op, GANFW_OP_PASS_COUNT));
  r.stride_h = r.stride_w = 2; /* strided: im2col */
  CU_ASSERT_EQUAL_FATAL(ganfw_conv2d_shape_init(&r), GANFW_OK);
  op.shape.conv = r;
  CU_ASSERT_STRING_EQUAL(ganfw_backend_algorithm(cpu, &op, GANFW_OP_PASS_FORWARD), "im2col+gemm");
  const ganfw_op t = {.kind = GANFW_OP_CONVT2D_FORWARD, .shape.convt = convt_shape()};
  const char *tf = ganfw_backend_algorithm(cpu, &t, GANFW_OP_PASS_FORWARD);
  CU_ASSERT_PTR_NOT_NULL(tf);
  const ganfw_op gemm = {.kind = GANFW_OP_GEMM};
  CU_ASSERT_PTR_NULL(ganfw_backend_algorithm(cpu, &gemm, GANFW_OP_PASS_FORWARD));
}

/* The table: memory members and three op entries, at most 20 members in all. */
static void test_table_size(void) {
  const size_t members = sizeof(ganfw_backend_vt) / sizeof(void *);
  printf("\n  ganfw_backend_vt: %zu members", members);
  CU_ASSERT(sizeof(ganfw_backend_vt) <= 20 * sizeof(void *));
  ganfw_backend *cpu = ganfw_cpu_backend(), *meta = ganfw_meta_backend(NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(meta);
  CU_ASSERT(cpu->vt->supports && cpu->vt->workspace && cpu->vt->run);
  CU_ASSERT(meta->vt->supports && meta->vt->workspace && meta->vt->run);
}

static CU_TestInfo tests[] = {
    {"op names distinct", test_op_names},
    {"cpu supports every op in f32", test_cpu_supports_every_op_in_f32},
    {"cpu refuses gemm in f16", test_cpu_refuses_unsupported_dtype},
    {"kind out of range", test_kind_out_of_range},
    {"meta runs every op", test_meta_runs_every_op},
    {"meta workspace is the cpu's", test_meta_workspace_is_cpus},
    {"meta asks its shadow", test_meta_asks_its_shadow},
    {"algorithm", test_algorithm},
    {"table size", test_table_size},
    CU_TEST_INFO_NULL,
};
GT_MAIN("backend_ops", tests)
