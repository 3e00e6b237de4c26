/* How device selection behaves on the machine the suite runs on. Without a usable CUDA
 * device (a machine without a GPU, or a build without the CUDA backend) `device.type: cuda`
 * is refused with GANFW_ERR_UNSUPPORTED (exit code 2 from the CLI) and a message saying
 * why, and `auto` falls back to the CPU with exactly one log line. With a device, both pick
 * CUDA and say so. Runs in every build: this is what CI checks of the CUDA backend. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/ops.h"
#include "base/log.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "testutil.h"

static char root[64];
static char captured[65536]; /* stderr of the last capture, or the CLI's output */

/* 1 when this build has a CUDA backend and the machine a device for it. */
static int have_device(void) {
#ifdef GANFW_HAVE_CUDA
  return ganfw_cuda_device_count(NULL, 0) > 0;
#else
  return 0;
#endif
}

/* Occurrences of `needle` in `text`. */
static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* ganfw_ctx_create(opt) with stderr captured into `captured`. */
static ganfw_status create_captured(const ganfw_ctx_options *opt, ganfw_ctx **ctx) {
  char path[128];
  snprintf(path, sizeof path, "%s/stderr.txt", root);
  fflush(stderr);
  int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  CU_ASSERT_FATAL(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
  ganfw_status st = ganfw_ctx_create(opt, ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fopen(path, "r");
  size_t len = f ? fread(captured, 1, sizeof captured - 1, f) : 0;
  captured[len] = '\0';
  if (f) fclose(f);
  return st;
}

static void test_cuda_request(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CUDA};
  ganfw_ctx *ctx = NULL;
  ganfw_status st = create_captured(&opt, &ctx);
  if (have_device()) {
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(ctx->device_type, GANFW_DEVICE_CUDA);
    CU_ASSERT_STRING_EQUAL(ctx->be->vt->name, "cuda");
    ganfw_ctx_destroy(ctx);
    return;
  }
  CU_ASSERT_EQUAL(st, GANFW_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NULL(ctx);
  const char *msg = ganfw_error_message();
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "device.type: cuda"));
#ifdef GANFW_HAVE_CUDA
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "no CUDA device is visible ("));
#else
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "no CUDA backend"));
#endif
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "device.type: cpu"));
  /* refusing prints nothing: the caller prints the one message */
  CU_ASSERT_STRING_EQUAL(captured, "");
}

static void test_auto_falls_back_once(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_AUTO};
  ganfw_ctx *ctx = NULL;
  /* at the default level a machine without a GPU hears nothing of it (every command would
   * say it); -v (debug) says it once */
  ganfw_status st = create_captured(&opt, &ctx);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  if (!have_device()) CU_ASSERT_EQUAL(count(captured, "device.type auto"), 0);
  ganfw_ctx_destroy(ctx);
  const int32_t level = ganfw_log_level();
  ganfw_log_set_level(GANFW_LOG_DEBUG);
  st = create_captured(&opt, &ctx);
  ganfw_log_set_level(level);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(count(captured, "device.type auto"), 1);
  if (have_device()) {
    CU_ASSERT_EQUAL(ctx->device_type, GANFW_DEVICE_CUDA);
    CU_ASSERT_PTR_NOT_NULL(strstr(captured, "using CUDA device 0 ("));
  } else {
    CU_ASSERT_EQUAL(ctx->device_type, GANFW_DEVICE_CPU);
    CU_ASSERT_PTR_EQUAL(ctx->be, ganfw_cpu_backend());
    CU_ASSERT_PTR_NOT_NULL(strstr(captured, "using the CPU"));
  }
  /* the chosen backend works: a tensor round trip through the allocator */
  float in[5] = {1, 2, 3, 4, 5}, out[5] = {0};
  void *p = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_malloc(ctx->alloc, sizeof in, GANFW_MEM_OTHER, "t", &p),
                        GANFW_OK);
  CU_ASSERT_EQUAL(ctx->be->vt->copy_h2d(ctx->be, p, in, sizeof in), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_be_scale(ctx->be, 5, p, 2.0f), GANFW_OK);
  CU_ASSERT_EQUAL(ctx->be->vt->copy_d2h(ctx->be, out, p, sizeof out), GANFW_OK);
  CU_ASSERT_EQUAL(out[4], 10.0f);
  ganfw_alloc_free(ctx->alloc, p);
  ganfw_ctx_destroy(ctx);
}

static void test_cpu_request_is_silent(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(create_captured(&opt, &ctx), GANFW_OK);
  CU_ASSERT_EQUAL(ctx->device_type, GANFW_DEVICE_CPU);
  CU_ASSERT_STRING_EQUAL(captured, "");
  ganfw_ctx_destroy(ctx);
  /* cudnn_benchmark on the CPU times its convolutions at first use (tests/test_conv_direct.c):
   * nothing to say at start */
  opt.cudnn_benchmark = 1;
  CU_ASSERT_EQUAL_FATAL(create_captured(&opt, &ctx), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(captured, "");
  ganfw_ctx_destroy(ctx);
  opt.cudnn_benchmark = 0; /* the CPU's setting follows the last context made */
  CU_ASSERT_EQUAL_FATAL(create_captured(&opt, &ctx), GANFW_OK);
  ganfw_ctx_destroy(ctx);
}

/* The device keys as a config states them, cudnn_benchmark included (a key the CUDA
 * backend reads must be known in every build, so that one config runs everywhere). */
static void test_config_keys(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/dev.yaml", root);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("device: {type: cuda, cudnn_benchmark: true, memory_limit: 2GiB}\n", f);
  fclose(f);
  ganfw_config *cfg = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load(path, &cfg), GANFW_OK);
  ganfw_ctx_options opt;
  CU_ASSERT_EQUAL(ganfw_ctx_options_from_config(ganfw_config_root(cfg), &opt), GANFW_OK);
  CU_ASSERT_EQUAL(opt.device_type, GANFW_DEVICE_CUDA);
  CU_ASSERT_EQUAL(opt.cudnn_benchmark, 1);
  CU_ASSERT_EQUAL(opt.memory_limit, (int64_t)2 << 30);
  ganfw_config_destroy(cfg);
}

/* Runs the ganfw binary (with `flags`) on a config naming only the device; returns the exit
 * code and leaves stdout+stderr in `captured`. */
static int run_cli_with(const char *device_type, const char *flags) {
  char cfg[128], cmd[1024];
  snprintf(cfg, sizeof cfg, "%s/%s.yaml", root, device_type);
  FILE *f = fopen(cfg, "w");
  if (!f) return -1;
  fprintf(f, "device: {type: %s}\ntrain: {max_steps: 1}\nrun: {out_dir: %s/run}\n", device_type,
          root);
  fclose(f);
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(cmd, sizeof cmd, "'%s/ganfw' %s '%s' 2>&1", build ? build : ".", flags, cfg);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(captured, 1, sizeof captured - 1, p);
  captured[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int run_cli(const char *device_type) {
  return run_cli_with(device_type, "");
}

static void test_cli(void) {
  int rc = run_cli("cuda");
  if (!have_device()) {
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(captured, "device.type: cuda"));
    CU_ASSERT_EQUAL(count(captured, "\n"), 1); /* one clear message */
  } else {
    CU_ASSERT_PTR_NULL(strstr(captured, "no CUDA device"));
  }
  /* auto: one line about the device with -v, whatever fails later (this config has no
   * model); none without -v on a machine without a GPU */
  run_cli_with("auto", "-v");
  CU_ASSERT_EQUAL(count(captured, "device.type auto"), 1);
  run_cli("auto");
  if (!have_device()) CU_ASSERT_EQUAL(count(captured, "device.type auto"), 0);
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_cuda_cpu_XXXXXX");
  return mkdtemp(root) ? 0 : -1;
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static CU_TestInfo tests[] = {
    {"cuda_request", test_cuda_request},
    {"auto_falls_back_once", test_auto_falls_back_once},
    {"cpu_request_is_silent", test_cpu_request_is_silent},
    {"config_keys", test_config_keys},
    {"cli", test_cli},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("cuda on this machine", tests, suite_init, suite_clean);
}
