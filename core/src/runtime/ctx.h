/* The run context behind the opaque ganfw_ctx of the host table: the backend, the one
 * caching allocator every tensor comes from, the config, and the Philox RNG position. */
#ifndef GANFW_CTX_H
#define GANFW_CTX_H

#include <stdint.h>

#include "runtime/alloc.h"
#include "backend/backend.h"
#include "config/config.h"
#include "ganfw/host.h"

#define GANFW_TRACE_STEPS_DEFAULT    3      /* device.trace: true records steps 1-3 */
#define GANFW_TRACE_CAPACITY_DEFAULT 262144 /* events (about 20 MiB of host memory) */

typedef struct ganfw_ctx_options {
  int32_t device_type;    /* GANFW_DEVICE_* */
  int32_t threads;        /* 0: all cores */
  int64_t memory_limit;   /* bytes, 0: the device's capacity */
  int64_t max_split_size; /* bytes, 0: unlimited */
  int32_t empty_cache;    /* device.empty_cache: GANFW_EMPTY_CACHE_* */
  int32_t trace;          /* device.trace: record allocator events */
  int32_t trace_steps;    /* ... of the first N steps */
  int64_t trace_capacity; /* events kept at most */
  uint64_t seed;
  int32_t meta; /* 1: plan only: the device is picked as usual, then the meta backend
                   stands in for it (nothing allocated or computed; the allocator, its
                   memory_limit and the workspace sizes as on the device); not a config key */
  /* device.cudnn_benchmark (CUDA): time the convolution algorithms once per shape */
  int32_t cudnn_benchmark;
  /* device.memory_layout: GANFW_LAYOUT_* (see alloc.h, "planned layout") */
  int32_t memory_layout;
  /* the planned layout the allocator gets before anything is allocated (borrowed; NULL:
   * none, the caching allocator serves everything); made by the caller from a plan of the
   * config (plan/layout.h), not a config key */
  const ganfw_alloc_layout *layout;
} ganfw_ctx_options;

/* device.memory_layout */
enum { GANFW_LAYOUT_CACHING = 0, GANFW_LAYOUT_PLANNED = 1 };

/* device.empty_cache: when cached segments go back to the device. */
enum {
  GANFW_EMPTY_CACHE_ON_OOM = 0, /* only when a request fails, before it is retried (default) */
  GANFW_EMPTY_CACHE_NEVER,      /* not even then: the request fails at once */
  GANFW_EMPTY_CACHE_PER_EPOCH,  /* also at the end of every epoch */
  GANFW_EMPTY_CACHE_AFTER_EVAL, /* also after every evaluation (a GAN: every sample grid) */
  GANFW_EMPTY_CACHE_COUNT
};

enum { GANFW_DEVICE_CPU = 0, GANFW_DEVICE_CUDA = 1, GANFW_DEVICE_AUTO = 2, GANFW_DEVICE_COUNT };

struct ganfw_ctx {
  ganfw_backend *be;
  ganfw_alloc *alloc;
  const ganfw_config *config; /* borrowed, may be NULL */
  int32_t device_type;        /* resolved: GANFW_DEVICE_CPU or _CUDA */
  int32_t threads;
  int32_t empty_cache; /* device.empty_cache */
  uint64_t seed;
  uint64_t rng_offset; /* next free Philox block */
  /* a data-parallel run's communicator (dist/dist.h; the session's, borrowed), else NULL:
   * BatchNorm's statistics over the global batch (dist.batchnorm: sync) */
  struct ganfw_dist *dist;
  /* While set (borrowed): the net whose optimizer is being created. A tensor created then
   * is named "<name_scope>.<name>" (optimizer plugins name their state after the
   * parameter's state_dict name, which lacks the net), so memory.json, the picture and the
   * OOM report say whose state it is. The plugin keeps its own name for checkpoints. */
  const char *name_scope;
  /* (optional) Called by net_build on each net of this run before it resolves the net's
   * nodes, with net_build_user: the config's model.insert adds its layers there
   * (train/insert.c). NULL: nothing is inserted. */
  ganfw_status (*net_build_hook)(void *user, ganfw_net *net);
  void *net_build_user;
  /* The algorithms the backend chose for the layers that have a choice (convolutions), as
   * JSON objects separated by ",\n" for memory.json's "algorithms" (ganfw_ctx_note_algorithm);
   * NULL while there is none. Owned. */
  char *algorithms;
  /* Memory strategy step_in_backward (train/sib.h): 1 while the nets are built makes each
   * parameter gradient a descriptor without storage (runtime/tensor.h's storage release,
   * right after its allocation), taken by the executor before the backward that writes it. */
  int32_t grads_deferred;
};

/* Reads the `device` section and `seed` of a config into options; config errors name the
 * key. `root` may be NULL (defaults). */
ganfw_status ganfw_ctx_options_from_config(const ganfw_cfg *root, ganfw_ctx_options *opt);
/* Creates the backend and the allocator. *out is owned by the caller (ganfw_ctx_destroy). */
ganfw_status ganfw_ctx_create(const ganfw_ctx_options *opt, ganfw_ctx **out);
void ganfw_ctx_destroy(ganfw_ctx *ctx); /* accepts NULL */
/* Appends one JSON object to ctx->algorithms; out of memory drops it (the report only). */
void ganfw_ctx_note_algorithm(ganfw_ctx *ctx, const char *json);
/* For tests: every context created afterwards runs on `be` (a backend table built by the
 * test, e.g. the CPU's with extra entries) instead of the one device.type picks; with
 * options.meta it is the meta backend's shadow. NULL: pick by device.type again. Not for
 * use while contexts are being created on other threads. */
void ganfw_ctx_override_backend(ganfw_backend *be);
/* device.empty_cache's policy at a moment of the run (GANFW_EMPTY_CACHE_PER_EPOCH at an
 * epoch's end, _AFTER_EVAL after an evaluation): releases the cached segments when the
 * policy asks for it there. */
void ganfw_ctx_empty_cache_at(ganfw_ctx *ctx, int32_t moment);
/* "on_oom", "never", "per_epoch", "after_eval"; NULL outside. */
const char *ganfw_empty_cache_name(int32_t policy);
/* Reserves n values' worth of Philox blocks and returns the first block's offset. */
uint64_t ganfw_ctx_rng_take(ganfw_ctx *ctx, int64_t n);
/* Fills data[0..n) (device memory of ctx's backend, f32) with U(lo, hi) or N(mean, std)
 * from the run's Philox stream: ctx's seed at the next n values' offsets. */
ganfw_status ganfw_ctx_rng_uniform(ganfw_ctx *ctx, int64_t n, float *data, float lo, float hi);
ganfw_status ganfw_ctx_rng_normal(ganfw_ctx *ctx, int64_t n, float *data, float mean, float std);
/* "cpu", "cuda", "auto" and back; -1 when unknown. */
const char *ganfw_device_name(int32_t type);
int32_t ganfw_device_from_name(const char *name);

#endif
