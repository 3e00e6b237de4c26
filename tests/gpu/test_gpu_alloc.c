/* The caching allocator over the CUDA backend against cudaMalloc's real behaviour: raw
 * segments are device memory (cudaMemGetInfo sees them come and go), a request larger than
 * the card is an OOM with one retry and leaves no CUDA error behind, memory_limit caps the
 * process including the CUDA context, blocks hold data, and pinned buffers upload
 * asynchronously. Skips (exit 77) without a CUDA device. */
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/ctx.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/ops.h"
#include "base/error.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)

static ganfw_backend *gpu;

static size_t device_free(void) {
  size_t total = 0, free_bytes = 0;
  CU_ASSERT_EQUAL(gpu->vt->capacity(gpu, &total, &free_bytes), GANFW_OK);
  return free_bytes;
}

static void test_raw_memory(void) {
  size_t total = 0, free0 = 0;
  CU_ASSERT_EQUAL_FATAL(gpu->vt->capacity(gpu, &total, &free0), GANFW_OK);
  ganfw_cuda_info info;
  ganfw_cuda_get_info(gpu, &info);
  CU_ASSERT_EQUAL(total, info.total_bytes);
  CU_ASSERT(free0 <= total);
  /* more than the card: NULL, no recorded error, and the next allocation works */
  CU_ASSERT_PTR_NULL(gpu->vt->raw_alloc(gpu, total + 64 * MiB));
  CU_ASSERT_EQUAL(gpu->vt->synchronize(gpu), GANFW_OK);
  void *p = gpu->vt->raw_alloc(gpu, 256 * MiB);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  const size_t free1 = device_free();
  CU_ASSERT(free0 - free1 >= 250 * MiB); /* the driver works in pages: allow slack */
  gpu->vt->raw_free(gpu, p, 256 * MiB);
  CU_ASSERT(device_free() >= free1 + 250 * MiB);
}

static void test_segments_are_device_memory(void) {
  ganfw_alloc *a = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_create(gpu, NULL, &a), GANFW_OK);
  const size_t free0 = device_free();
  void *small = NULL, *mid = NULL, *big = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 1000, GANFW_MEM_PARAM, "small", &small), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 5 * MiB, GANFW_MEM_ACTIVATION, "mid", &mid), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 301 * MiB, GANFW_MEM_WORKSPACE, "big", &big), GANFW_OK);
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  /* 2 MiB small segment, 20 MiB for the 5 MiB request, 302 MiB (rounded to 2 MiB) */
  CU_ASSERT_EQUAL(st.reserved.current, (int64_t)(324 * MiB));
  CU_ASSERT(free0 - device_free() >= 320 * MiB);
  /* the blocks hold data: a pattern through the big block and back */
  static float in[1 << 16], out[1 << 16];
  for (int i = 0; i < (1 << 16); i++) in[i] = (float)i * 0.5f;
  char *end = (char *)big + 301 * MiB - sizeof in;
  CU_ASSERT_EQUAL(gpu->vt->copy_h2d(gpu, end, in, sizeof in), GANFW_OK);
  CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, out, end, sizeof out), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(in, out, sizeof in), 0);
  ganfw_alloc_free(a, big);
  ganfw_alloc_free(a, mid);
  ganfw_alloc_free(a, small);
  const size_t cached = device_free();
  ganfw_alloc_empty_cache(a);
  ganfw_alloc_get_stats(a, &st);
  CU_ASSERT_EQUAL(st.reserved.current, 0);
  CU_ASSERT(device_free() >= cached + 320 * MiB);
  CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
  ganfw_alloc_destroy(a);
}

static void test_device_oom(void) {
  ganfw_alloc *a = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_create(gpu, NULL, &a), GANFW_OK);
  size_t total = 0;
  CU_ASSERT_EQUAL(gpu->vt->capacity(gpu, &total, NULL), GANFW_OK);
  void *keep = NULL, *p = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 64 * MiB, GANFW_MEM_PARAM, "keep", &keep), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, total, GANFW_MEM_ACTIVATION, "too big", &p), GANFW_ERR_OOM);
  CU_ASSERT_PTR_NULL(p);
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  CU_ASSERT_EQUAL(st.num_ooms, 1);
  CU_ASSERT_EQUAL(st.num_alloc_retries, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "out of memory"));
  /* the failed cudaMalloc left nothing behind: the backend and the next request are fine */
  CU_ASSERT_EQUAL(gpu->vt->synchronize(gpu), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 32 * MiB, GANFW_MEM_ACTIVATION, "ok", &p), GANFW_OK);
  ganfw_alloc_free(a, p);
  ganfw_alloc_free(a, keep);
  ganfw_alloc_destroy(a);
}

/* memory_limit counts the CUDA context: with limit = context + 100 MiB the allocator may
 * reserve 100 MiB, not more; a limit under the context is a config error. */
static void test_memory_limit_counts_context(void) {
  ganfw_cuda_info info;
  ganfw_cuda_get_info(gpu, &info);
  CU_ASSERT(info.context_bytes > 0);
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CUDA,
                           .memory_limit = (int64_t)(info.context_bytes + 100 * MiB)};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  void *p = NULL, *q = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(ctx->alloc, 80 * MiB, GANFW_MEM_PARAM, "fits", &p), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(ctx->alloc, 40 * MiB, GANFW_MEM_PARAM, "over", &q),
                  GANFW_ERR_OOM);
  ganfw_oom_report r;
  CU_ASSERT_EQUAL(ganfw_alloc_last_oom(ctx->alloc, &r), 1);
  CU_ASSERT_EQUAL(r.limited, 1);
  CU_ASSERT_EQUAL(r.capacity, (int64_t)(100 * MiB));
  ganfw_alloc_free(ctx->alloc, p);
  ganfw_ctx_destroy(ctx);

  opt.memory_limit = (int64_t)(info.context_bytes / 2);
  CU_ASSERT_EQUAL(ganfw_ctx_create(&opt, &ctx), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "CUDA context"));
}

static void test_pinned_async_upload(void) {
  const size_t n = 1 << 20;
  float *host = gpu->vt->host_alloc_pinned(gpu, n * sizeof(float));
  CU_ASSERT_PTR_NOT_NULL_FATAL(host);
  for (size_t i = 0; i < n; i++) host[i] = (float)i;
  float *d = gpu->vt->raw_alloc(gpu, n * sizeof(float));
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  CU_ASSERT_EQUAL(gpu->vt->copy_h2d_async(gpu, d, host, n * sizeof(float)), GANFW_OK);
  /* ordered after the upload on the stream */
  CU_ASSERT_EQUAL(ganfw_be_scale(gpu, (int64_t)n, d, 2.0f), GANFW_OK);
  CU_ASSERT_EQUAL(gpu->vt->synchronize(gpu), GANFW_OK);
  for (size_t i = 0; i < n; i++) host[i] = -1.0f;
  CU_ASSERT_EQUAL(gpu->vt->copy_d2h(gpu, host, d, n * sizeof(float)), GANFW_OK);
  CU_ASSERT_EQUAL(host[0], 0.0f);
  CU_ASSERT_EQUAL(host[n - 1], 2.0f * (float)(n - 1));
  gpu->vt->raw_free(gpu, d, n * sizeof(float));
  gpu->vt->host_free_pinned(gpu, host);
  CU_ASSERT_EQUAL(gpu->vt->synchronize(gpu), GANFW_OK);
}

static int suite_init(void) {
  gpu = ganfw_cuda_backend();
  if (!gpu) fprintf(stderr, "test_gpu_alloc: %s\n", ganfw_error_message());
  return gpu ? 0 : -1;
}

static CU_TestInfo tests[] = {
    {"raw_memory", test_raw_memory},
    {"segments_are_device_memory", test_segments_are_device_memory},
    {"device_oom", test_device_oom},
    {"memory_limit_counts_context", test_memory_limit_counts_context},
    {"pinned_async_upload", test_pinned_async_upload},
    CU_TEST_INFO_NULL,
};

int main(void) {
  char why[256];
  if (ganfw_cuda_device_count(why, sizeof why) == 0) {
    printf("no CUDA device, skipped (%s)\n", why);
    return 77;
  }
  return gt_run_fixture("gpu allocator", tests, suite_init, NULL);
}
