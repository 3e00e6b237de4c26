/* The memory planner: the meta backend (a full table, fake addresses, nothing touched), the
 * allocator's peak hook and block walk, `ganfw plan` within 5% of a real step for every
 * config in configs/, `find-batch` (the size it finds runs, the next one up does not fit
 * by plan nor by a real step), and the advice an OOM run ends with. */
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "runtime/alloc.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "backend/backend.h"
#include "backend/ops.h"
#include "backend/cpu/cpu_ops.h"
#include "base/error.h"
#include "base/log.h"
#include "io/png_io.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "tools/plan.h"
#include "testutil.h"

#define MIB (1024.0 * 1024.0)

static char root[64];
static char ganfw[4096];
static char data_set[600]; /* "data.path=<synthetic MNIST>" */
static char out[65536];

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int write_text(const char *rel, const char *text) {
  FILE *f = fopen(path_in(rel), "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

/* A small DC-GAN on the synthetic data (fast real steps). */
static int write_small(const char *rel) {
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 2}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
           "optim: {plugin: adam, lr: 2.0e-4}\n"
           "train: {batch_size: 16, max_steps: 2}\n"
           "run: {out_dir: %s/run}\n",
           root, root);
  return write_text(rel, text);
}

/* A small CIFAR-10 binary set beside the MNIST files: every config in configs/ finds its
 * data in the same folder (and an image folder, write_image_folder). */
static int write_cifar(const char *dir) {
  const char *names[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                         "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
  unsigned char rec[3073];
  uint64_t x = 88172645463325252ull;
  for (int f = 0; f < 6; f++) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, names[f]);
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    for (int i = 0; i < 40; i++) {
      rec[0] = (unsigned char)(i % 10);
      for (int k = 1; k < 3073; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        rec[k] = (unsigned char)x;
      }
      fwrite(rec, 1, sizeof rec, fp);
    }
    if (fclose(fp) != 0) return -1;
  }
  return 0;
}

/* An image folder in the same folder too, for the configs of `data.dataset: folder`
 * (the emoji configs): train/ and test/, each with three class folders of 8x8 RGBA PNGs;
 * the MNIST and CIFAR-10 files lie beside train/ and test/, where the folder source leaves
 * them. */
static int write_image_folder(const char *dir) {
  const char *splits[] = {"train", "test"}, *classes[] = {"a", "b", "c"};
  uint8_t px[8 * 8 * 4];
  char path[700];
  for (int s = 0; s < 2; s++) {
    snprintf(path, sizeof path, "%s/%s", dir, splits[s]);
    if (mkdir(path, 0755) != 0) return -1;
    for (int k = 0; k < 3; k++) {
      snprintf(path, sizeof path, "%s/%s/%s", dir, splits[s], classes[k]);
      if (mkdir(path, 0755) != 0) return -1;
      for (int i = 0; i < 2; i++) {
        for (int j = 0; j < (int)sizeof px; j++) px[j] = (uint8_t)(j * 7 + k * 50 + i * 13);
        snprintf(path, sizeof path, "%s/%s/%s/%d.png", dir, splits[s], classes[k], i);
        if (ganfw_png_write_u8(path, px, 8, 8, 4) != GANFW_OK) return -1;
      }
    }
  }
  return 0;
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build || !getenv("GANFW_SOURCE_DIR")) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_plan_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 600, 20, 5) != 0) return -1;
  if (write_cifar(path_in("mnist")) != 0) return -1;
  if (write_image_folder(path_in("mnist")) != 0) return -1;
  snprintf(data_set, sizeof data_set, "data.path=%s/mnist", root);
  ganfw_log_set_level(GANFW_LOG_WARN);
  return write_small("small.yaml");
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs the ganfw binary with args (NULL-terminated); returns the exit code, output in out. */
static int run_ganfw(const char *const *args) {
  char cmd[8192];
  int n = snprintf(cmd, sizeof cmd, "'%s'", ganfw);
  for (const char *const *a = args; *a; a++) n += snprintf(cmd + n, sizeof cmd - n, " '%s'", *a);
  snprintf(cmd + n, sizeof cmd - n, " 2>&1");
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* --- the meta backend and the allocator's hooks ----------------------------------------- */

/* Every op the CPU backend has, the meta backend has too (a new table entry left out of
 * meta_backend.c would make a plan call NULL), and none of them is the CPU's kernel. */
static void test_meta_table_complete(void) {
  ganfw_backend *meta = ganfw_meta_backend(NULL), *cpu = ganfw_cpu_backend();
  CU_ASSERT_PTR_NOT_NULL_FATAL(meta);
  CU_ASSERT_PTR_EQUAL(ganfw_meta_backend(cpu), meta); /* one per shadow */
  CU_ASSERT_STRING_EQUAL(meta->vt->name, "meta");
  typedef void (*fn)(void);
  const size_t first = offsetof(ganfw_backend_vt, raw_alloc);
  const size_t n = (sizeof(ganfw_backend_vt) - first) / sizeof(fn);
  int missing = 0, shared = 0;
  for (size_t i = 0; i < n; i++) {
    fn m, c;
    memcpy(&m, (const char *)meta->vt + first + i * sizeof(fn), sizeof m);
    memcpy(&c, (const char *)cpu->vt + first + i * sizeof(fn), sizeof c);
    if (c && !m) missing++;
    if (c && m == c) shared++;
  }
  CU_ASSERT_EQUAL(missing, 0);
  CU_ASSERT_EQUAL(shared, 0);
  /* the sizes the allocator sees are the CPU's */
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
  CU_ASSERT_EQUAL(ganfw_be_conv2d_workspace(meta, &s), ganfw_be_conv2d_workspace(cpu, &s));
  size_t t1 = 0, f1 = 0, t2 = 0, f2 = 0;
  CU_ASSERT_EQUAL(meta->vt->capacity(meta, &t1, &f1), GANFW_OK);
  CU_ASSERT_EQUAL(cpu->vt->capacity(cpu, &t2, &f2), GANFW_OK);
  CU_ASSERT_EQUAL(t1, t2);
}

/* Fake addresses: distinct, far apart, never touched; host reads are zeros. */
static void test_meta_memory_untouched(void) {
  ganfw_backend *meta = ganfw_meta_backend(NULL);
  const size_t huge = (size_t)1 << 45; /* 32 TiB: far more than this machine has */
  char *a = meta->vt->raw_alloc(meta, huge), *b = meta->vt->raw_alloc(meta, 512);
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  CU_ASSERT((uintptr_t)b >= (uintptr_t)a + huge); /* no overlap */
  CU_ASSERT_EQUAL((uintptr_t)a % 512, 0);
  float host[4] = {1, 2, 3, 4};
  CU_ASSERT_EQUAL(meta->vt->copy_d2h(meta, host, a, sizeof host), GANFW_OK);
  CU_ASSERT(host[0] == 0 && host[3] == 0);
  CU_ASSERT_EQUAL(ganfw_be_nonfinite(meta, 4, (const float *)b), 0);
  CU_ASSERT_EQUAL(ganfw_be_gemm(meta, 0, 0, 1 << 20, 1 << 20, 1 << 20, 1.0f, (const float *)a,
                                1 << 20, (const float *)a, 1 << 20, 0.0f, (float *)b, 1 << 20),
                  GANFW_OK); /* no kernel runs */
  meta->vt->raw_free(meta, a, huge);
  meta->vt->raw_free(meta, b, 512);
  /* the caching allocator runs over it with a terabyte limit */
  ganfw_alloc_options opt = {.memory_limit = (size_t)1 << 40};
  ganfw_alloc *al = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_create(meta, &opt, &al), GANFW_OK);
  void *p = NULL;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(al, (size_t)600 << 30, GANFW_MEM_ACTIVATION, "x", &p),
                  GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(p);
  CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(al), 0);
  ganfw_alloc_destroy(al);
}

typedef struct hook_log {
  int calls;
  int64_t last_allocated;
  int64_t blocks_bytes; /* the block walk's sum at the last call */
  int named;            /* blocks named "w" at the last call */
} hook_log;

static void count_block(void *ud, const void *ptr, size_t size, int32_t category,
                        const char *owner) {
  hook_log *h = ud;
  (void)ptr, (void)category;
  h->blocks_bytes += (int64_t)size;
  h->named += owner && strcmp(owner, "w") == 0;
}

static void on_peak(void *ud, const ganfw_alloc *a) {
  hook_log *h = ud;
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  h->calls++;
  h->last_allocated = st.allocated.current;
  h->blocks_bytes = 0;
  h->named = 0;
  ganfw_alloc_for_each_block(a, count_block, h);
}

/* The peak hook fires exactly when allocated bytes reach a new high, and the block walk
 * sees every live block with its owner. */
static void test_alloc_peak_hook(void) {
  ganfw_alloc *a = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_create(ganfw_cpu_backend(), NULL, &a), GANFW_OK);
  hook_log h = {0};
  ganfw_alloc_set_peak_hook(a, on_peak, &h);
  void *p1, *p2, *p3;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 1000, GANFW_MEM_PARAM, "w", &p1), GANFW_OK);
  CU_ASSERT_EQUAL(h.calls, 1);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 5000, GANFW_MEM_ACTIVATION, "act", &p2), GANFW_OK);
  CU_ASSERT_EQUAL(h.calls, 2);
  CU_ASSERT_EQUAL(h.last_allocated, 1024 + 5120);
  CU_ASSERT_EQUAL(h.blocks_bytes, 1024 + 5120);
  CU_ASSERT_EQUAL(h.named, 1);
  ganfw_alloc_free(a, p2);
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 4000, GANFW_MEM_ACTIVATION, "act", &p3), GANFW_OK);
  CU_ASSERT_EQUAL(h.calls, 2); /* below the peak: no call */
  ganfw_alloc_reset_peak(a);   /* a new window: the next rise is a peak again */
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 512, GANFW_MEM_OTHER, NULL, &p2), GANFW_OK);
  CU_ASSERT_EQUAL(h.calls, 3);
  ganfw_alloc_set_peak_hook(a, NULL, NULL);
  void *p4;
  CU_ASSERT_EQUAL(ganfw_alloc_malloc(a, 1 << 20, GANFW_MEM_OTHER, NULL, &p4), GANFW_OK);
  CU_ASSERT_EQUAL(h.calls, 3);
  ganfw_alloc_destroy(a);
}

/* --- the issue-12 layers: planned bytes equal measured bytes ------------------------------ */

/* conv -> groupnorm -> relu -> upsample nearest -> instancenorm2d -> upsample bilinear ->
 * conv -> layernorm [C,H,W] -> global_avg_pool -> flatten -> layernorm [F] -> linear, built
 * through the host table's ABI 1.2 entries. */
static ganfw_net *layers_net(ganfw_ctx *c) {
  const ganfw_host *h = ganfw_host_table();
  CU_ASSERT_FATAL(GANFW_HOST_HAS(h, net_layernorm));
  ganfw_net *net = h->net_create(c, "g");
  const int64_t chw[3] = {8, 16, 16}, f[1] = {8};
  CU_ASSERT_EQUAL(h->net_conv2d(net, "c1", 3, 8, 3, 1, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_groupnorm(net, "gn", 2, 8, 1e-5f, 1), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_activation(net, "relu", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_upsample(net, "up1", 2, GANFW_UPSAMPLE_NEAREST), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_instancenorm2d(net, "in", 8, 1e-5f, 1), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_upsample(net, "up2", 2, GANFW_UPSAMPLE_BILINEAR), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_conv2d(net, "c2", 8, 8, 4, 2, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_layernorm(net, "ln", 3, chw, 1e-5f, 1), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_global_avg_pool(net, "pool"), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_layernorm(net, "ln_f", 1, f, 1e-5f, 0), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_linear(net, "fc", 8, 4, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(h->net_build(net, 3, 8, 8), GANFW_OK);
  return net;
}

/* One training step's allocator figures (forward with a tape, backward with input and
 * parameter gradients, then a no-grad forward), on the meta backend (meta 1: planned) or
 * the CPU (0: measured). */
static void layers_step(int32_t meta, int32_t dtype, int64_t batch, ganfw_alloc_stats *st) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 9, .meta = meta};
  ganfw_ctx *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c), GANFW_OK);
  ganfw_net *net = layers_net(c);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, dtype), GANFW_OK);
  const int64_t xs[4] = {batch, 3, 8, 8}, ys[2] = {batch, 4};
  ganfw_tensor *x = ganfw_tensor_create(c, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  ganfw_tensor *dy = ganfw_tensor_create(c, GANFW_DTYPE_F32, 2, ys, GANFW_MEM_DATA, "dy");
  CU_ASSERT_FATAL(x && dy);
  float *host = gt_alloc((size_t)x->nbytes);
  gt_fill_uniform(host, x->numel, -1, 1, 3);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(x, host, x->nbytes), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(dy, host, dy->nbytes), GANFW_OK);
  gt_free(host);
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
  ganfw_alloc_stats after; /* every activation and workspace handed back */
  ganfw_alloc_get_stats(c->alloc, &after);
  CU_ASSERT_EQUAL(after.category[GANFW_MEM_ACTIVATION].current, 0);
  CU_ASSERT_EQUAL(after.category[GANFW_MEM_WORKSPACE].current, 0);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* One step of a layer set's net on the meta backend (meta 1) or the CPU (0). */
typedef void (*layer_step_fn)(int32_t meta, int32_t dtype, int64_t batch, ganfw_alloc_stats *st);

/* The meta backend's peaks (allocated, reserved, per category) and allocation count equal a
 * real step's, in f32, f16 and bf16, at a batch whose 16-bit conversions go in several row
 * chunks. */
static void expect_plan_equals_measure(layer_step_fn step) {
  const int32_t dtypes[3] = {GANFW_DTYPE_F32, GANFW_DTYPE_F16, GANFW_DTYPE_BF16};
  const int64_t batches[2] = {8, 200};
  for (int b = 0; b < 2; b++) {
    for (int k = 0; k < 3; k++) {
      ganfw_alloc_stats plan, real;
      step(1, dtypes[k], batches[b], &plan);
      step(0, dtypes[k], batches[b], &real);
      printf("\n  %-4s batch %3lld: plan %10lld B allocated, %10lld B reserved; measured %10lld, "
             "%10lld",
             ganfw_dtype_name(dtypes[k]), (long long)batches[b], (long long)plan.allocated.peak,
             (long long)plan.reserved.peak, (long long)real.allocated.peak,
             (long long)real.reserved.peak);
      CU_ASSERT(plan.allocated.peak > 0);
      CU_ASSERT_EQUAL(plan.allocated.peak, real.allocated.peak);
      CU_ASSERT_EQUAL(plan.reserved.peak, real.reserved.peak);
      CU_ASSERT_EQUAL(plan.num_allocs, real.num_allocs);
      for (int32_t cat = 0; cat < GANFW_MEM_COUNT; cat++)
        CU_ASSERT_EQUAL(plan.category[cat].peak, real.category[cat].peak);
    }
  }
}

/* The plan counts every byte of the issue-12 layers. */
static void test_plan_new_layers(void) {
  expect_plan_equals_measure(layers_step);
}

/* --- embedding and spectral norm: planned bytes equal measured bytes ---------------------- */

/* Class ids -> embedding -> linear -> reshape -> conv_transpose2d -> leaky relu -> conv2d, the
 * three matmul layers spectrally normalised (dim 0, 1 and 0; 1, 1 and 2 power iterations),
 * built through the host table's ABI 1.3 entries. */
static ganfw_net *embed_sn_net(ganfw_ctx *c) {
  const ganfw_host *h = ganfw_host_table();
  CU_ASSERT_FATAL(GANFW_HOST_HAS(h, net_spectral_norm));
  ganfw_net *net = h->net_create(c, "g");
  CU_ASSERT_EQUAL(h->net_embedding(net, "label", 10, 32), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_linear(net, "fc", 32, 256, 1), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_spectral_norm(net, "fc", 1, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_reshape(net, "shape", 4, 8, 8), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_conv_transpose2d(net, "up", 4, 8, 4, 2, 1, 0, 1), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_spectral_norm(net, "up", 1, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_activation(net, "act", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_conv2d(net, "out", 8, 3, 3, 1, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(h->net_spectral_norm(net, "out", 2, 1e-12f), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(h->net_build(net, 1, 1, 1), GANFW_OK);
  return net;
}

/* One step's allocator figures as a GAN's D step makes them: two training forwards with
 * tapes (each keeps its u and v), the backward of the second (input and parameter
 * gradients) and of the first (parameter gradients, added), then a no-grad forward and an
 * eval forward; on the meta backend (meta 1: planned) or the CPU (0: measured). */
static void embed_sn_step(int32_t meta, int32_t dtype, int64_t batch, ganfw_alloc_stats *st) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 2, .seed = 9, .meta = meta};
  ganfw_ctx *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &c), GANFW_OK);
  ganfw_net *net = embed_sn_net(c);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_set_compute_dtype(net, dtype), GANFW_OK);
  const int64_t xs[4] = {batch, 1, 1, 1}, ys[4] = {batch, 3, 16, 16};
  ganfw_tensor *x = ganfw_tensor_create(c, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "labels");
  ganfw_tensor *dy = ganfw_tensor_create(c, GANFW_DTYPE_F32, 4, ys, GANFW_MEM_DATA, "dy");
  CU_ASSERT_FATAL(x && dy);
  float *host = gt_alloc((size_t)dy->nbytes);
  for (int64_t i = 0; i < batch; i++) host[i] = (float)(i % 10);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(x, host, x->nbytes), GANFW_OK);
  gt_fill_uniform(host, dy->numel, -1, 1, 3);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(dy, host, dy->nbytes), GANFW_OK);
  gt_free(host);
  ganfw_alloc_reset_peak(c->alloc);
  ganfw_tape *t1 = ganfw_tape_create(net), *t2 = ganfw_tape_create(net);
  ganfw_tensor *y1 = NULL, *y2 = NULL, *dx = NULL, *y3 = NULL, *y4 = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, t1, &y1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, t2, &y2), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(
      ganfw_net_backward(net, t2, dy, GANFW_BWD_INPUT_GRAD | GANFW_BWD_PARAM_GRAD, &dx), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_backward(net, t1, dy, GANFW_BWD_PARAM_GRAD, NULL), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y3), GANFW_OK);
  ganfw_net_set_train(net, 0, 1);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &y4), GANFW_OK);
  ganfw_alloc_get_stats(c->alloc, st);
  ganfw_tensor *all[] = {y1, y2, dx, y3, y4, x, dy};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ganfw_tensor_destroy(all[i]);
  ganfw_tape_destroy(t1);
  ganfw_tape_destroy(t2);
  ganfw_alloc_stats after; /* every activation and workspace handed back */
  ganfw_alloc_get_stats(c->alloc, &after);
  CU_ASSERT_EQUAL(after.category[GANFW_MEM_ACTIVATION].current, 0);
  CU_ASSERT_EQUAL(after.category[GANFW_MEM_WORKSPACE].current, 0);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(c);
}

/* The plan counts every byte of embedding and spectral norm. */
static void test_plan_embed_sn(void) {
  expect_plan_equals_measure(embed_sn_step);
}

/* --- plan against a real step, for every config ------------------------------------------ */

static void check_config(const char *path, int *checked) {
  const char *sets[] = {data_set};
  ganfw_probe_result plan, real;
  memset(&real, 0, sizeof real);
  ganfw_status st = ganfw_plan_make(gt_config(path, sets, 1), 0, NULL, &plan);
  if (st == GANFW_ERR_PLUGIN) { /* a strategy another part of the tree has not built yet */
    printf("\n  %s: skipped (%s)", path, ganfw_error_message());
    ganfw_probe_result_free(&plan);
    return;
  }
  if (st != GANFW_OK) printf("\n  %s: %s", path, ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT(plan.peak_allocated > plan.setup_allocated);
  CU_ASSERT(plan.n_layers > 0);
  st = ganfw_plan_measure(gt_config(path, sets, 1), &plan, NULL, &real);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  /* a config that does not fit its memory_limit: the real step runs out as well, and the
   * plan is compared with a real step without the limit */
  CU_ASSERT_EQUAL(real.oom, plan.oom);
  if (plan.oom) {
    const char *nolimit[] = {data_set, "device.memory_limit=0"};
    ganfw_probe_result_free(&real);
    st = ganfw_plan_measure(gt_config(path, nolimit, 2), &plan, NULL, &real);
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(real.oom, 0);
  }
  double d_alloc = ganfw_plan_diff_percent(plan.peak_allocated, real.peak_allocated);
  double d_res = ganfw_plan_diff_percent(plan.peak_reserved, real.peak_reserved);
  printf("\n  %-40s plan %8.2f MiB, measured %8.2f MiB allocated (%+.2f%%), reserved %+.2f%%", path,
         plan.peak_allocated / MIB, real.peak_allocated / MIB, d_alloc, d_res);
  CU_ASSERT(d_alloc >= -5.0 && d_alloc <= 5.0);
  CU_ASSERT(d_res >= -5.0 && d_res <= 5.0);
  for (int32_t k = 0; k < plan.n_phases; k++)
    CU_ASSERT(fabs(ganfw_plan_diff_percent(plan.phase[k].allocated, real.phase[k].allocated)) <=
              5.0);
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
  (*checked)++;
}

/* device.memory_layout: planned on the configs the layout matters most for: the plan
 * serves every step-local request of a real step at its planned offset (no step off the
 * plan after the first), plan = measured, the arena within 2% of its lower bound, reserved
 * within 5% of allocated, and the step's results bitwise those of the caching layout. */
static void test_planned_layout_configs(void) {
  const char *names[] = {"dcgan.yaml", "dcgan_ckpt.yaml", "cnn_mnist.yaml", "resgan_fashion.yaml"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/configs/%s", getenv("GANFW_SOURCE_DIR"), names[i]);
    const char *sets[] = {data_set};
    ganfw_probe_options opt = {
        .meta = 1, .warmup = 1, .steps = 1, .layout = GANFW_PROBE_LAYOUT_PLANNED};
    ganfw_probe_result plan, real, cache;
    CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(gt_config(path, sets, 1), &opt, &plan), GANFW_OK);
    opt.meta = 0;
    opt.steps = 2;
    CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(gt_config(path, sets, 1), &opt, &real), GANFW_OK);
    opt.layout = GANFW_PROBE_LAYOUT_CACHING;
    CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(gt_config(path, sets, 1), &opt, &cache), GANFW_OK);
    CU_ASSERT_EQUAL(plan.planned, 1);
    CU_ASSERT_EQUAL(real.planned, 1);
    CU_ASSERT_EQUAL(cache.planned, 0);
    CU_ASSERT(real.planned_steps >= 2); /* the measured steps, on the plan to their end */
    CU_ASSERT(real.num_planned > 0);
    CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
    CU_ASSERT_EQUAL(plan.peak_reserved, real.peak_reserved);
    CU_ASSERT(real.peak_allocated <= cache.peak_allocated); /* no block taken whole */
    CU_ASSERT(real.peak_reserved <= cache.peak_reserved);
    CU_ASSERT(real.peak_reserved * 100 <= real.peak_allocated * 105);
    CU_ASSERT(plan.layout.l.arena_bytes * 100 <= plan.layout.lower_bound * 102);
    /* the same kernels in the same order on other addresses: the same bits */
    CU_ASSERT(memcmp(&real.loss_d, &cache.loss_d, sizeof real.loss_d) == 0);
    CU_ASSERT(memcmp(&real.loss_g, &cache.loss_g, sizeof real.loss_g) == 0);
    CU_ASSERT(memcmp(&real.loss, &cache.loss, sizeof real.loss) == 0);
    printf("\n  %-22s planned: %.2f/%.2f MiB allocated/reserved (caching %.2f), arena %.3fx",
           names[i], real.peak_allocated / MIB, real.peak_reserved / MIB, cache.peak_reserved / MIB,
           (double)plan.layout.l.arena_bytes / (double)plan.layout.lower_bound);
    ganfw_probe_result_free(&plan);
    ganfw_probe_result_free(&real);
    ganfw_probe_result_free(&cache);
  }
}

static void test_plan_every_config(void) {
  char pattern[4200];
  snprintf(pattern, sizeof pattern, "%s/configs/*.yaml", getenv("GANFW_SOURCE_DIR"));
  glob_t g;
  CU_ASSERT_EQUAL_FATAL(glob(pattern, 0, NULL, &g), 0);
  int checked = 0, dcgan = 0;
  for (size_t i = 0; i < g.gl_pathc; i++) {
    check_config(g.gl_pathv[i], &checked);
    dcgan |= strstr(g.gl_pathv[i], "/dcgan.yaml") != NULL;
  }
  printf("\n  %d of %zu configs checked ", checked, g.gl_pathc);
  CU_ASSERT(dcgan);
  CU_ASSERT(checked >= 1);
  globfree(&g);
}

/* A plan never allocates on the device: a batch whose activations need more than the
 * machine's memory, under a memory_limit larger than the machine, is planned in moments. */
static void test_plan_beyond_the_machine(void) {
  const char *sets[] = {"train.batch_size=1000000", "device.memory_limit=64TiB", "model.nz=100",
                        "model.ngf=64", "model.ndf=64"}; /* about 0.5 MiB a sample */
  ganfw_probe_result plan;
  ganfw_status st = ganfw_plan_make(gt_config(path_in("small.yaml"), sets, 5), 0, NULL, &plan);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(plan.oom, 0);
  CU_ASSERT(plan.capacity > 0);
  CU_ASSERT(plan.peak_allocated > plan.capacity); /* more than the machine has */
  CU_ASSERT_EQUAL(plan.batch_size, 1000000);
  CU_ASSERT(plan.peak_reserved > plan.capacity);
  ganfw_probe_result_free(&plan);
}

/* --- find-batch -------------------------------------------------------------------------- */

static void test_find_batch(void) {
  CU_ASSERT_EQUAL_FATAL(
      write_text("fb.yaml", "extends: small.yaml\ndevice: {memory_limit: 24MiB}\n"), 0);
  ganfw_find_batch_options opt = {.margin = 0.0, .confirm = 1};
  ganfw_find_batch_result *res = calloc(1, sizeof *res);
  CU_ASSERT_PTR_NOT_NULL_FATAL(res);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  ganfw_status st = ganfw_find_batch(gt_config(path_in("fb.yaml"), NULL, 0), &opt, res, mem);
  fclose(mem);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  printf("\n%s", text);
  CU_ASSERT_EQUAL(res->budget, 24 << 20);
  CU_ASSERT_EQUAL(res->from_limit, 1);
  CU_ASSERT_EQUAL(res->granularity, 1);
  CU_ASSERT(res->batch > 56); /* the caching layout found 56 (5.60 MiB allocated, 24 reserved) */
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "Largest batch that fits"));
  /* the found size runs for real without OOM */
  CU_ASSERT_EQUAL(res->confirmed, 1);
  CU_ASSERT_EQUAL(res->real.oom, 0);
  CU_ASSERT_EQUAL(res->real.steps_done, 1);
  /* the next size up does not fit: by plan, and by a real step */
  ganfw_probe_options popt = {.meta = 1,
                              .warmup = 1,
                              .steps = 1,
                              .limit_mode = GANFW_PROBE_LIMIT_SET,
                              .memory_limit = res->limit,
                              .batch_size = res->batch + 1};
  ganfw_probe_result r;
  CU_ASSERT_EQUAL(ganfw_probe_run(gt_config(path_in("fb.yaml"), NULL, 0), &popt, &r), GANFW_OK);
  CU_ASSERT_EQUAL(r.oom, 1);
  ganfw_probe_result_free(&r);
  popt.meta = 0;
  ganfw_status pst = ganfw_probe_run(gt_config(path_in("fb.yaml"), NULL, 0), &popt, &r);
  if (pst != GANFW_OK)
    printf("\n  the real step at batch %lld: %s\n", (long long)popt.batch_size,
           ganfw_error_message());
  CU_ASSERT_EQUAL(pst, GANFW_OK);
  CU_ASSERT_EQUAL(r.oom, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.oom_report, "out of memory"));
  ganfw_probe_result_free(&r);
  /* a margin lowers the limit and the batch */
  ganfw_find_batch_result *res2 = calloc(1, sizeof *res2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(res2);
  opt = (ganfw_find_batch_options){.margin = 0.3, .confirm = 0};
  CU_ASSERT_EQUAL(ganfw_find_batch(gt_config(path_in("fb.yaml"), NULL, 0), &opt, res2, NULL),
                  GANFW_OK);
  CU_ASSERT(res2->batch < res->batch);
  CU_ASSERT_EQUAL(res2->limit, (int64_t)((24 << 20) * 0.7));
  CU_ASSERT_EQUAL(res2->confirmed, 0);
  ganfw_find_batch_free(res);
  ganfw_find_batch_free(res2);
  free(res);
  free(res2);
  free(text);
  /* with accumulation the sizes are multiples of the micro-batch count */
  res = calloc(1, sizeof *res);
  CU_ASSERT_PTR_NOT_NULL_FATAL(res);
  const char *accum[] = {"memory=[{plugin: accumulate, steps: 4}]"};
  opt = (ganfw_find_batch_options){.margin = 0.0, .confirm = 0};
  st = ganfw_find_batch(gt_config(path_in("fb.yaml"), accum, 1), &opt, res, NULL);
  if (st == GANFW_ERR_PLUGIN) {
    printf("\n  accumulate: skipped (%s)", ganfw_error_message());
  } else {
    CU_ASSERT_EQUAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(res->granularity, 4);
    CU_ASSERT(res->batch > 0 && res->batch % 4 == 0);
  }
  ganfw_find_batch_free(res);
  free(res);
}

/* --- OOM advice ------------------------------------------------------------------------ */

/* A run over its memory_limit ends with exit code 1, the allocator's report and one
 * planned line per variant, and writes no checkpoint. */
static void test_oom_advice_cli(void) {
  CU_ASSERT_EQUAL_FATAL(write_text("tight.yaml", "extends: small.yaml\n"
                                                 "device: {memory_limit: 5MiB}\n"
                                                 "train: {batch_size: 64}\n"),
                        0);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){path_in("tight.yaml"), NULL}), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "out of memory: tried to allocate"));
  CU_ASSERT_PTR_NOT_NULL(
      strstr(out, "What would fit (planned from shapes, memory_limit 5.00 MiB)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "as configured"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "batch 32"));
  const char *variants[] = {"amp", "checkpoint", "accumulate"};
  for (int i = 0; i < 3; i++) {
    char so[300];
    snprintf(so, sizeof so, "%s/plugins/ganfw_%s.so", getenv("GANFW_TEST_BUILD_DIR"), variants[i]);
    struct stat sb;
    if (stat(so, &sb) != 0) continue; /* only installed strategies are listed */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, variants[i]));
  }
  struct stat sb;
  CU_ASSERT_NOT_EQUAL(stat(path_in("run/checkpoints/step_00000001.safetensors"), &sb), 0);
  printf("\n%s", out);
  /* the library call: a line per variant, each saying whether it fits */
  char advice[4096];
  ganfw_oom_advice(gt_config(path_in("tight.yaml"), NULL, 0), advice, sizeof advice);
  CU_ASSERT_PTR_NOT_NULL(strstr(advice, "does not fit"));
  CU_ASSERT_PTR_NOT_NULL(strstr(advice, "batch 32"));
}

/* `ganfw plan --measure` and `find-batch` through the command line. */
static void test_plan_cli(void) {
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plan", path_in("small.yaml"), "--measure", NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Predicted peak"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "by layer"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "generator.main.0"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Plan against one real step"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "+0.00%"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "memory summary")); /* the allocator's table */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plan", path_in("tight.yaml"), NULL}), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "DOES NOT FIT"));
  /* a limit below the parameters runs out in the set-up, and says so like any other */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plan", path_in("small.yaml"), "--set",
                                             "device.memory_limit=64KiB", NULL}),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "DOES NOT FIT in memory_limit 0.06 MiB"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "in the set-up"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "Predicted peak"));
  CU_ASSERT_PTR_NULL(strstr(out, "the net was built for"));
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"find-batch", path_in("fb.yaml"), "--margin", "0.1",
                                             "--no-confirm", NULL}),
                  0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "less 10% margin"));
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){"find-batch", path_in("fb.yaml"), "--margin", "2", NULL}), 2);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"plan", NULL}), 2);
}

static CU_TestInfo tests[] = {
    {"planned_layout_configs", test_planned_layout_configs},
    {"meta backend: a full table with the CPU's sizes", test_meta_table_complete},
    {"meta backend: fake addresses, memory never touched", test_meta_memory_untouched},
    {"allocator: peak hook and block walk", test_alloc_peak_hook},
    {"plan equals a real step for the issue-12 layers", test_plan_new_layers},
    {"plan equals a real step for embedding and spectral norm", test_plan_embed_sn},
    {"plan within 5% of a real step for every config", test_plan_every_config},
    {"plan beyond the machine's memory", test_plan_beyond_the_machine},
    {"find-batch: fits, and the next size up does not", test_find_batch},
    {"OOM advice on a run over its memory_limit", test_oom_advice_cli},
    {"plan and find-batch on the command line", test_plan_cli},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("plan", tests, suite_init, suite_clean);
}
