/* Whole DC-GAN training steps on CUDA against the same steps on the CPU: configs/dcgan.yaml,
 * dcgan_amp.yaml and dcgan_ckpt.yaml (32x32, batch 16) with the same seed, real batch and
 * noise (Philox on each backend), three steps each; the losses and D's outputs must agree
 * (1e-3 at the first step, 2e-2 after three: Adam amplifies the ulps the backends differ
 * by). AMP runs natively in 16 bits on CUDA (the layers run their ops in f16 where the backend
 * supports them) but in f32 on rounded values on the CPU, so its results differ from
 * the first step (f16 weight gradients inside cuDNN, f16 outputs of every op, another
 * summation order): 2e-2 at every step. Skips (exit 77) without a CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/ops.h"
#include "base/error.h"
#include "train/run.h"
#include "train/session.h"
#include "runtime/tensor.h"
#include "train/trainer.h"
#include "testutil.h"

#define STEPS 3

/* The path of configs/<name> in the source tree. */
static const char *config_path(const char *name) {
  static char path[1024];
  const char *src = getenv("GANFW_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/configs/%s", src ? src : ".", name);
  return path;
}

/* The stats of STEPS steps of configs/<name> on `device`. */
static int run_steps(const char *device, const char *name, ganfw_gan_stats out[STEPS]) {
  char config[1024], set_dev[64];
  snprintf(config, sizeof config, "%s", config_path(name));
  snprintf(set_dev, sizeof set_dev, "device.type=%s", device);
  const char *sets[3] = {set_dev, "train.batch_size=16", "device.threads=2"};
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_gan *gan = NULL;
  ganfw_tensor *x = NULL, *z = NULL;
  ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 32, .width = 32};
  ganfw_status st = ganfw_run_open_file(config, sets, 3, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 0, &info, &s);
  if (st == GANFW_OK) st = ganfw_gan_create(s, &gan);
  if (st == GANFW_OK) {
    const ganfw_host *host = ganfw_host_table();
    int64_t xs[4] = {16, 1, 32, 32}, zs[4] = {16, s->nz, 1, 1};
    x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "batch");
    z = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "noise");
    if (!x || !z) st = ganfw_error_code();
    if (st == GANFW_OK) st = host->rng_uniform(s->ctx, x, -1.0f, 1.0f);
    for (int i = 0; i < STEPS && st == GANFW_OK; i++) {
      st = host->rng_normal(s->ctx, z, 0.0f, 1.0f);
      if (st == GANFW_OK) st = ganfw_gan_step(gan, x, z, &out[i]);
    }
  }
  if (st != GANFW_OK) printf("\n  %s on %s: %s\n", name, device, ganfw_error_message());
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(z);
  ganfw_gan_destroy(gan);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st == GANFW_OK;
}

static double rel(double a, double b) {
  return fabs(a - b) / fmax(fabs(b), 1e-2);
}

/* first_tol: the tolerance of the first step; 2e-2 after it. */
static void compare(const char *what, const char *name, double first_tol) {
  ganfw_gan_stats c[STEPS], g[STEPS];
  CU_ASSERT_FATAL(run_steps("cpu", name, c));
  CU_ASSERT_FATAL(run_steps("cuda", name, g));
  for (int i = 0; i < STEPS; i++) {
    const double tol = i == 0 ? first_tol : 2e-2;
    const double e = fmax(fmax(rel(g[i].loss_d, c[i].loss_d), rel(g[i].loss_g, c[i].loss_g)),
                          fmax(rel(g[i].d_x, c[i].d_x), rel(g[i].d_g_z2, c[i].d_g_z2)));
    printf("\n  %s step %d: loss_d %.6f / %.6f  loss_g %.6f / %.6f (cuda / cpu), worst rel %.2e",
           what, i + 1, g[i].loss_d, c[i].loss_d, g[i].loss_g, c[i].loss_g, e);
    CU_ASSERT(e <= tol);
  }
}

static void test_dcgan_f32(void) {
  compare("f32", "dcgan.yaml", 1e-3);
}

static void test_dcgan_amp(void) {
  /* which of the layers' ops run natively in f16 on CUDA (dcgan_amp.yaml's dtype) */
  ganfw_backend *gpu = ganfw_cuda_backend();
  const uint32_t lp = gpu ? ganfw_be_lp_ops(gpu, GANFW_DTYPE_F16) : 0;
  printf("\n  amp on cuda: native f16 groups 0x%x (conv 1, linear 2, batchnorm 4, act 8)%s",
         (unsigned)lp, lp ? "" : ", none: f32 compute on f16-rounded values");
  compare("amp", "dcgan_amp.yaml", 2e-2);
}

static void test_dcgan_ckpt(void) {
  compare("checkpoint", "dcgan_ckpt.yaml", 1e-3);
}

static CU_TestInfo tests[] = {
    {"dcgan_f32", test_dcgan_f32},
    {"dcgan_amp", test_dcgan_amp},
    {"dcgan_ckpt", test_dcgan_ckpt},
    CU_TEST_INFO_NULL,
};

int main(void) {
  char why[256];
  if (ganfw_cuda_device_count(why, sizeof why) == 0) {
    printf("no CUDA device, skipped (%s)\n", why);
    return 77;
  }
  return gt_run("dcgan step cuda vs cpu", tests);
}
