/* The optimizer step alone on DC-GAN 32x32's parameters (ngf = ndf = 64, one channel: the
 * generator's and discriminator's 1.73 M values in 18 tensors), for the optimizer plugins named
 * on the command line, in alternating rounds so that a busy machine slows each alike:
 *
 *   build/bench/bench_optim_step [--threads N] [--steps 50] [--rounds 3] adam adam8bit
 *
 * prints each round's milliseconds per step and the median of the rounds per plugin. Plugins
 * come from <build>/plugins (GANFW_PLUGIN_PATH first). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "config/config.h"
#include "ganfw/ganfw.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "backend/backend.h"
#include "runtime/tensor.h"

#define MAX_PLUGINS 4
#define NPARAM      18

/* DC-GAN's parameter shapes: G (convT 100->256->128->64->1, BatchNorm), D (conv 1->64->...). */
static const int64_t shapes[NPARAM][4] = {{100, 256, 4, 4},
                                          {256},
                                          {256},
                                          {256, 128, 4, 4},
                                          {128},
                                          {128},
                                          {128, 64, 4, 4},
                                          {64},
                                          {64},
                                          {64, 1, 4, 4},
                                          {64, 1, 4, 4},
                                          {128, 64, 4, 4},
                                          {128},
                                          {128},
                                          {256, 128, 4, 4},
                                          {256},
                                          {256},
                                          {1, 256, 4, 4}};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int threads = 0, steps = 50, rounds = 3, n = 0;
  const char *names[MAX_PLUGINS];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (n < MAX_PLUGINS)
      names[n++] = argv[i];
  }
  if (n == 0 || steps < 1 || rounds < 1 || rounds > 64) {
    fprintf(stderr, "usage: %s [--threads N] [--steps 50] [--rounds 3] PLUGIN...\n", argv[0]);
    return 2;
  }
  ganfw_ctx_options copt = {.device_type = GANFW_DEVICE_CPU, .threads = threads, .seed = 1};
  ganfw_ctx *ctx = NULL;
  if (ganfw_ctx_create(&copt, &ctx) != GANFW_OK) {
    fprintf(stderr, "ctx: %s\n", ganfw_error_message());
    return 1;
  }
  static char dir[1024];
  snprintf(dir, sizeof dir, "%s",
           getenv("GANFW_PLUGIN_PATH") ? getenv("GANFW_PLUGIN_PATH") : "plugins");
  const char *dirs[] = {dir};
  ganfw_plugin *plugin[MAX_PLUGINS] = {0};
  const ganfw_optim_vt *vt[MAX_PLUGINS];
  void *opt[MAX_PLUGINS] = {0};
  ganfw_config *cfg[MAX_PLUGINS] = {0};
  ganfw_tensor *value[MAX_PLUGINS][NPARAM], *grad[MAX_PLUGINS][NPARAM];
  int64_t total = 0;
  for (int p = 0; p < n; p++) {
    if (ganfw_plugin_load(names[p], GANFW_PLUGIN_OPTIM, "optim.plugin", dirs, 1, &plugin[p]) !=
        GANFW_OK) {
      fprintf(stderr, "%s: %s\n", names[p], ganfw_error_message());
      return 1;
    }
    vt[p] = ganfw_plugin_vtable(plugin[p]);
    ganfw_param params[NPARAM];
    total = 0;
    for (int j = 0; j < NPARAM; j++) {
      int nd = shapes[j][1] ? 4 : 1;
      value[p][j] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, nd, shapes[j], GANFW_MEM_PARAM, "w");
      grad[p][j] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, nd, shapes[j], GANFW_MEM_GRAD, "g");
      const int64_t m = value[p][j]->numel;
      float *h = malloc((size_t)m * 4);
      for (int64_t k = 0; k < m; k++) h[k] = (float)((k * 2654435761u) % 1000) * 1e-4f - 0.05f;
      ganfw_tensor_from_host(value[p][j], h, m * 4);
      ganfw_tensor_from_host(grad[p][j], h, m * 4);
      free(h);
      char nm[32];
      snprintf(nm, sizeof nm, "p%d", j);
      params[j] = (ganfw_param){strdup(nm), value[p][j], grad[p][j]};
      total += m;
    }
    char yaml[128];
    snprintf(yaml, sizeof yaml, "optim:\n  plugin: %s\n  betas: [0.5, 0.999]\n", names[p]);
    const ganfw_cfg *sec = NULL;
    if (ganfw_config_load_string(yaml, "bench.yaml", &cfg[p]) != GANFW_OK ||
        !(sec = ganfw_cfg_child(ganfw_config_root(cfg[p]), "optim"))) {
      fprintf(stderr, "config: %s\n", ganfw_error_message());
      return 1;
    }
    const char *pl = NULL;
    ganfw_cfg_string(sec, "plugin", "", &pl);
    if (vt[p]->create(ganfw_host_table(), ctx, sec, params, NPARAM, &opt[p]) != GANFW_OK) {
      fprintf(stderr, "%s: %s\n", names[p], ganfw_error_message());
      return 1;
    }
    for (int j = 0; j < NPARAM; j++) free((char *)params[j].name);
    vt[p]->step(opt[p], 2e-4); /* warm-up: the allocator's cache */
  }
  printf("optimizer step on %lld parameter values (DC-GAN 32x32), %d steps a round\n",
         (long long)total, steps);
  double ms[MAX_PLUGINS][64];
  for (int r = 0; r < rounds; r++)
    for (int q = 0; q < n; q++) {
      const int p = r % 2 ? n - 1 - q : q; /* alternate the order */
      ctx->be->vt->synchronize(ctx->be);
      const double t0 = now();
      for (int s = 0; s < steps; s++)
        if (vt[p]->step(opt[p], 2e-4) != GANFW_OK) {
          fprintf(stderr, "%s: %s\n", names[p], ganfw_error_message());
          return 1;
        }
      ctx->be->vt->synchronize(ctx->be);
      ms[p][r] = (now() - t0) * 1e3 / steps;
      printf("round %d  %-10s %8.2f ms/step\n", r + 1, names[p], ms[p][r]);
    }
  for (int p = 0; p < n; p++) {
    qsort(ms[p], (size_t)rounds, sizeof(double), cmp_double);
    printf("median    %-10s %8.2f ms/step\n", names[p], ms[p][rounds / 2]);
  }
  for (int p = 0; p < n; p++) {
    vt[p]->destroy(opt[p]);
    for (int j = 0; j < NPARAM; j++) {
      ganfw_tensor_destroy(value[p][j]);
      ganfw_tensor_destroy(grad[p][j]);
    }
    ganfw_config_destroy(cfg[p]);
    ganfw_plugin_unload(plugin[p]);
  }
  ganfw_ctx_destroy(ctx);
  return 0;
}
