/* The run context: picks the backend from `device`, creates the caching allocator over
 * it, and hands out Philox offsets (see ctx.h). */
#include "runtime/ctx.h"
#include "runtime/cpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "base/error.h"
#include "base/log.h"

#ifdef GANFW_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

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

/* device.memory_layout when the config does not say */
#define GANFW_LAYOUT_DEFAULT_NAME "planned"

/* device.trace: true | false | {steps: N, capacity: M}. */
static ganfw_status read_trace(const ganfw_cfg *dev, ganfw_ctx_options *opt) {
  const ganfw_cfg *node = ganfw_cfg_child(dev, "trace");
  int64_t steps = GANFW_TRACE_STEPS_DEFAULT, cap = GANFW_TRACE_CAPACITY_DEFAULT;
  ganfw_status st;
  if (node && ganfw_cfg_kind_of(node) == GANFW_CFG_KIND_MAP) {
    opt->trace = 1;
    if ((st = ganfw_cfg_int_in(node, "steps", steps, 1, 1000000, &steps)) != GANFW_OK) return st;
    if ((st = ganfw_cfg_int_in(node, "capacity", cap, 64, 1 << 26, &cap)) != GANFW_OK) return st;
  } else if ((st = ganfw_cfg_bool(dev, "trace", 0, &opt->trace)) != GANFW_OK) {
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: device.trace must be true, false or a map such as "
                           "`trace: {steps: 3, capacity: 262144}`",
                           ganfw_cfg_where(node));
  }
  opt->trace_steps = (int32_t)steps;
  opt->trace_capacity = cap;
  return GANFW_OK;
}

/* device.threads: `auto` (the default: the cores this process may use, runtime/cpus.h) or a
 * number of threads 1..1024 (0 is auto too), as *out (0 for auto). */
static ganfw_status read_threads(const ganfw_cfg *dev, int64_t *out) {
  const char *text = NULL;
  ganfw_status st = ganfw_cfg_string(dev, "threads", "auto", &text);
  if (st != GANFW_OK) return st;
  char *end = NULL;
  long long n = text ? strtoll(text, &end, 10) : -1;
  if (text && strcmp(text, "auto") == 0) {
    *out = 0;
    return GANFW_OK;
  }
  if (!text || !*text || *end || n < 0 || n > 1024)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: device.threads: '%s' is not a thread count: use auto (the cores "
                           "this process may use: its affinity mask and cgroup CPU quota) or "
                           "1..1024",
                           ganfw_cfg_where(ganfw_cfg_child(dev, "threads")), text ? text : "null");
  *out = n;
  return GANFW_OK;
}

ganfw_status ganfw_ctx_options_from_config(const ganfw_cfg *root, ganfw_ctx_options *opt) {
  memset(opt, 0, sizeof *opt);
  const ganfw_cfg *dev = ganfw_cfg_section(root, "device");
  const char *type = NULL;
  int64_t threads = 0, seed = 0;
  ganfw_status st;
  if ((st = ganfw_cfg_string(dev, "type", "auto", &type)) != GANFW_OK) return st;
  if ((st = read_threads(dev, &threads)) != GANFW_OK) return st;
  if ((st = ganfw_cfg_bytes(dev, "memory_limit", 0, &opt->memory_limit)) != GANFW_OK) return st;
  if ((st = ganfw_cfg_bytes(dev, "max_split_size", 0, &opt->max_split_size)) != GANFW_OK) return st;
  if ((st = ganfw_cfg_bool(dev, "cudnn_benchmark", 0, &opt->cudnn_benchmark)) != GANFW_OK)
    return st;
  if ((st = read_trace(dev, opt)) != GANFW_OK) return st;
  const char *policy = NULL;
  if ((st = ganfw_cfg_string(dev, "empty_cache", "on_oom", &policy)) != GANFW_OK) return st;
  opt->empty_cache = -1;
  for (int32_t i = 0; i < GANFW_EMPTY_CACHE_COUNT; i++)
    if (strcmp(policy, ganfw_empty_cache_name(i)) == 0) opt->empty_cache = i;
  if (opt->empty_cache < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: device.empty_cache: unknown policy '%s' (use on_oom, never, "
                           "per_epoch or after_eval)",
                           ganfw_cfg_where(ganfw_cfg_child(dev, "empty_cache")), policy);
  const char *layout = NULL;
  if ((st = ganfw_cfg_string(dev, "memory_layout", GANFW_LAYOUT_DEFAULT_NAME, &layout)) != GANFW_OK)
    return st;
  if (strcmp(layout, "caching") == 0)
    opt->memory_layout = GANFW_LAYOUT_CACHING;
  else if (strcmp(layout, "planned") == 0)
    opt->memory_layout = GANFW_LAYOUT_PLANNED;
  else
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: device.memory_layout: unknown layout '%s' (use planned: the "
                           "step's blocks at offsets planned before the run, or caching: "
                           "every request served by the caching allocator)",
                           ganfw_cfg_where(ganfw_cfg_child(dev, "memory_layout")), layout);
  if ((st = ganfw_cfg_int(root, "seed", 0, &seed)) != GANFW_OK) return st;
  opt->device_type = ganfw_device_from_name(type);
  if (opt->device_type < 0) {
    const ganfw_cfg *node = ganfw_cfg_child(dev, "type");
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: device.type: unknown device '%s' (use cpu, cuda or auto)",
                           node ? ganfw_cfg_where(node) : "config", type);
  }
  if (opt->memory_limit < 0 || opt->max_split_size < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG, "device.memory_limit and device.max_split_size "
                                             "must not be negative");
  opt->threads = (int32_t)threads;
  opt->seed = (uint64_t)seed;
  return GANFW_OK;
}

static ganfw_backend *backend_override;

void ganfw_ctx_override_backend(ganfw_backend *be) {
  backend_override = be;
}

/* Resolves `auto` and refuses a device this build or machine does not have. */
static ganfw_status pick_backend(const ganfw_ctx_options *opt, ganfw_backend **be, int32_t *type) {
  const int32_t requested = opt->device_type;
  if (backend_override) {
    *be = backend_override;
    *type = GANFW_DEVICE_CPU; /* no CUDA-only settings (context size) apply to it */
    return GANFW_OK;
  }
#ifdef GANFW_HAVE_CUDA
  if (requested == GANFW_DEVICE_CUDA || requested == GANFW_DEVICE_AUTO) {
    char why[512] = "";
    const int count = ganfw_cuda_device_count(why, sizeof why);
    ganfw_backend *cuda = count > 0 ? ganfw_cuda_backend() : NULL;
    if (cuda) {
      ganfw_cuda_info info;
      ganfw_cuda_get_info(cuda, &info);
      ganfw_cuda_set_cudnn_benchmark(cuda, opt->cudnn_benchmark);
      ganfw_log(GANFW_LOG_INFO, "device.type %s: using CUDA device %d (%s, %.1f GiB)",
                ganfw_device_name(requested), (int)info.device, info.name,
                (double)info.total_bytes / (1024.0 * 1024.0 * 1024.0));
      *be = cuda;
      *type = GANFW_DEVICE_CUDA;
      return GANFW_OK;
    }
    if (count > 0) { /* a device, but the backend could not start on it */
      if (requested == GANFW_DEVICE_CUDA)
        return ganfw_error_wrap(GANFW_ERR_BACKEND, "device.type: cuda");
      snprintf(why, sizeof why, "%s", ganfw_error_message());
    } else if (requested == GANFW_DEVICE_CUDA) {
      return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                             "device.type: cuda, but no CUDA device is visible (%s); check "
                             "nvidia-smi and CUDA_VISIBLE_DEVICES, or use device.type: cpu or "
                             "auto",
                             why);
    }
    /* every command on a machine without a GPU would say it: -v shows it */
    ganfw_log(GANFW_LOG_DEBUG, "device.type auto: no usable CUDA device (%s), using the CPU", why);
  }
#else
  if (requested == GANFW_DEVICE_CUDA)
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                           "device.type: cuda was asked for, but this ganfw has no CUDA backend "
                           "yet; use device.type: cpu (or auto)");
  if (requested == GANFW_DEVICE_AUTO) /* as the CUDA build's fallback: -v says it */
    ganfw_log(GANFW_LOG_DEBUG, "device.type auto: no CUDA backend in this build, using the CPU");
#endif
  *be = ganfw_cpu_backend();
  *type = GANFW_DEVICE_CPU;
  return GANFW_OK;
}

/* The allocator's cap. On CUDA, memory_limit is a per-process cap that counts the CUDA
 * context (and cuBLAS/cuDNN), measured when the backend started: the allocator may
 * reserve the limit minus that. */
static ganfw_status allocator_limit(const ganfw_ctx *ctx, int64_t limit, size_t *out) {
  *out = (size_t)limit;
#ifdef GANFW_HAVE_CUDA
  if (limit > 0 && ctx->device_type == GANFW_DEVICE_CUDA) {
    ganfw_cuda_info info;
    ganfw_cuda_get_info(ctx->be, &info);
    const double mib = 1024.0 * 1024.0;
    if ((size_t)limit <= info.context_bytes)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "device.memory_limit: %.1f MiB is not more than the %.1f MiB the "
                             "CUDA context already holds on %s; raise the limit",
                             (double)limit / mib, (double)info.context_bytes / mib, info.name);
    *out = (size_t)limit - info.context_bytes;
    /* no single convolution workspace may take more than an eighth of what is left */
    size_t ws_limit = *out / 8;
    ganfw_cuda_set_workspace_limit(ctx->be,
                                   ws_limit < ((size_t)1 << 30) ? ws_limit : ((size_t)1 << 30));
    ganfw_log(GANFW_LOG_INFO,
              "device.memory_limit %.1f MiB counts the CUDA context (%.1f MiB): the allocator "
              "may reserve %.1f MiB",
              (double)limit / mib, (double)info.context_bytes / mib, (double)*out / mib);
  }
#else
  (void)ctx;
#endif
  return GANFW_OK;
}

ganfw_status ganfw_ctx_create(const ganfw_ctx_options *opt, ganfw_ctx **out) {
  *out = NULL;
  ganfw_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory creating the run context");
  ganfw_status st = pick_backend(opt, &ctx->be, &ctx->device_type);
  if (st != GANFW_OK) {
    free(ctx);
    return st;
  }
  /* device.cudnn_benchmark on the CPU: its convolutions' paths timed at first use */
  if (ctx->device_type == GANFW_DEVICE_CPU && !opt->meta)
    ganfw_cpu_set_conv_benchmark(opt->cudnn_benchmark);
  /* device.threads: auto (0) is the cores this process may use, not all of the machine's */
  ctx->threads = opt->threads > 0 ? opt->threads : ganfw_cpus_available()->usable;
  ctx->empty_cache = opt->empty_cache;
  if (ctx->be->vt->set_threads) ctx->be->vt->set_threads(ctx->be, ctx->threads);
  size_t limit = 0;
  if ((st = allocator_limit(ctx, opt->memory_limit, &limit)) != GANFW_OK) {
    free(ctx);
    return st;
  }
  if (opt->meta && !(ctx->be = ganfw_meta_backend(ctx->be))) { /* planning: see ctx.h */
    free(ctx);
    return ganfw_error_set(GANFW_ERR_INTERNAL, "no meta backend for this device");
  }
  ganfw_alloc_options aopt = {.memory_limit = limit,
                              .max_split_size = (size_t)opt->max_split_size,
                              .trace = opt->trace,
                              .no_retry = opt->empty_cache == GANFW_EMPTY_CACHE_NEVER,
                              .trace_steps = opt->trace_steps,
                              .trace_capacity = (size_t)opt->trace_capacity};
  st = ganfw_alloc_create(ctx->be, &aopt, &ctx->alloc);
  if (st != GANFW_OK) {
    free(ctx);
    return st;
  }
  if (opt->layout && (st = ganfw_alloc_set_layout(ctx->alloc, opt->layout)) != GANFW_OK) {
    /* no room for its segment under the limit: the run goes on the cache, which may fit (a
     * plan says so in its figures: the reserved bytes are the cache's) */
    ganfw_log(opt->meta ? GANFW_LOG_DEBUG : GANFW_LOG_WARN,
              "device.memory_layout: planned: %s; the caching allocator serves "
              "the run",
              ganfw_error_message());
    ganfw_error_clear();
  }
  ctx->seed = opt->seed;
  *out = ctx;
  return GANFW_OK;
}

void ganfw_ctx_destroy(ganfw_ctx *ctx) {
  if (!ctx) return;
  ganfw_alloc_destroy(ctx->alloc);
  free(ctx->algorithms);
  free(ctx);
}

void ganfw_ctx_note_algorithm(ganfw_ctx *ctx, const char *json) {
  const size_t had = ctx->algorithms ? strlen(ctx->algorithms) : 0, add = strlen(json);
  char *p = realloc(ctx->algorithms, had + add + 3);
  if (!p) return;
  if (had) memcpy(p + had, ",\n", 2);
  memcpy(p + had + (had ? 2 : 0), json, add + 1);
  ctx->algorithms = p;
}

uint64_t ganfw_ctx_rng_take(ganfw_ctx *ctx, int64_t n) {
  uint64_t first = ctx->rng_offset;
  ctx->rng_offset += (uint64_t)((n + 3) / 4);
  return first;
}

ganfw_status ganfw_ctx_rng_uniform(ganfw_ctx *ctx, int64_t n, float *data, float lo, float hi) {
  uint64_t offset = ganfw_ctx_rng_take(ctx, n);
  return ganfw_be_rng_uniform(ctx->be, n, ctx->seed, offset, lo, hi, data);
}

ganfw_status ganfw_ctx_rng_normal(ganfw_ctx *ctx, int64_t n, float *data, float mean, float std) {
  uint64_t offset = ganfw_ctx_rng_take(ctx, n);
  return ganfw_be_rng_normal(ctx->be, n, ctx->seed, offset, mean, std, data);
}

static const char *const empty_cache_names[] = {"on_oom", "never", "per_epoch", "after_eval"};
_Static_assert(sizeof(empty_cache_names) / sizeof(empty_cache_names[0]) == GANFW_EMPTY_CACHE_COUNT,
               "empty_cache_names must name every policy");

const char *ganfw_empty_cache_name(int32_t policy) {
  return policy >= 0 && policy < GANFW_EMPTY_CACHE_COUNT ? empty_cache_names[policy] : NULL;
}

void ganfw_ctx_empty_cache_at(ganfw_ctx *ctx, int32_t moment) {
  if (ctx && ctx->empty_cache == moment) ganfw_alloc_empty_cache(ctx->alloc);
}
