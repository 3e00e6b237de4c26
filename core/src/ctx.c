/* The run context: picks the backend from `device`, creates the caching allocator over
 * it, and hands out Philox offsets (see ctx.h). */
#include "ctx.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

static const char *const device_names[] = {"cpu", "cuda", "auto"};
_Static_assert(sizeof(device_names) / sizeof(device_names[0]) == GANFW_DEVICE_COUNT,
               "device_names must name every GANFW_DEVICE_*");

const char *ganfw_device_name(int32_t type) {
  return type >= 0 && type < GANFW_DEVICE_COUNT ? device_names[type] : "unknown";
}

int32_t ganfw_device_from_name(const char *name) {
  for (int32_t i = 0; i < GANFW_DEVICE_COUNT; i++)
    if (name && strcmp(name, device_names[i]) == 0) return i;
  return -1;
}

ganfw_status ganfw_ctx_options_from_config(const ganfw_cfg *root, ganfw_ctx_options *opt) {
  memset(opt, 0, sizeof *opt);
  const ganfw_cfg *dev = ganfw_cfg_section(root, "device");
  const char *type = NULL;
  int64_t threads = 0, seed = 0;
  ganfw_status st;
  if ((st = ganfw_cfg_string(dev, "type", "auto", &type)) != GANFW_OK) return st;
  if ((st = ganfw_cfg_int(dev, "threads", 0, &threads)) != GANFW_OK) return st;
  if ((st = ganfw_cfg_bytes(dev, "memory_limit", 0, &opt->memory_limit)) != GANFW_OK) return st;
  if ((st = ganfw_cfg_bytes(dev, "max_split_size", 0, &opt->max_split_size)) != GANFW_OK) return st;
  if ((st = ganfw_cfg_int(root, "seed", 0, &seed)) != GANFW_OK) return st;
  opt->device_type = ganfw_device_from_name(type);
  if (opt->device_type < 0) {
    const ganfw_cfg *node = ganfw_cfg_child(dev, "type");
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: device.type: unknown device '%s' (use cpu, cuda or auto)",
                           node ? ganfw_cfg_where(node) : "config", type);
  }
  if (threads < 0 || threads > 1024)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: device.threads: %lld is out of range (0 = all cores, or 1..1024)",
                           ganfw_cfg_where(ganfw_cfg_child(dev, "threads")), (long long)threads);
  if (opt->memory_limit < 0 || opt->max_split_size < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG, "device.memory_limit and device.max_split_size "
                                             "must not be negative");
  opt->threads = (int32_t)threads;
  opt->seed = (uint64_t)seed;
  return GANFW_OK;
}

/* Resolves `auto` and refuses a device this build or machine does not have. */
static ganfw_status pick_backend(int32_t requested, ganfw_backend **be, int32_t *type) {
  if (requested == GANFW_DEVICE_CUDA)
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                           "device.type: cuda was asked for, but this ganfw has no CUDA backend "
                           "yet; use device.type: cpu (or auto)");
  if (requested == GANFW_DEVICE_AUTO)
    ganfw_log(GANFW_LOG_INFO, "device.type auto: no CUDA backend in this build, using the CPU");
  *be = ganfw_cpu_backend();
  *type = GANFW_DEVICE_CPU;
  return GANFW_OK;
}

ganfw_status ganfw_ctx_create(const ganfw_ctx_options *opt, ganfw_ctx **out) {
  *out = NULL;
  ganfw_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory creating the run context");
  ganfw_status st = pick_backend(opt->device_type, &ctx->be, &ctx->device_type);
  if (st != GANFW_OK) {
    free(ctx);
    return st;
  }
  ctx->threads = opt->threads;
  if (ctx->be->vt->set_threads) ctx->be->vt->set_threads(ctx->be, opt->threads);
  ganfw_alloc_options aopt = {.memory_limit = (size_t)opt->memory_limit,
                              .max_split_size = (size_t)opt->max_split_size,
                              .trace = opt->trace};
  st = ganfw_alloc_create(ctx->be, &aopt, &ctx->alloc);
  if (st != GANFW_OK) {
    free(ctx);
    return st;
  }
  ctx->seed = opt->seed;
  *out = ctx;
  return GANFW_OK;
}

void ganfw_ctx_destroy(ganfw_ctx *ctx) {
  if (!ctx) return;
  ganfw_alloc_destroy(ctx->alloc);
  free(ctx);
}

uint64_t ganfw_ctx_rng_take(ganfw_ctx *ctx, int64_t n) {
  uint64_t first = ctx->rng_offset;
  ctx->rng_offset += (uint64_t)((n + 3) / 4);
  return first;
}
