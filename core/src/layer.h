/* The layer interface behind the executor (net.c): a table of functions per layer type,
 * forward and backward side by side in core/src/layers/<type>.c. Shapes carry the batch
 * dimension first: [N,C,H,W] or [N,F]. */
#ifndef GANFW_LAYER_H
#define GANFW_LAYER_H

#include "backend.h"
#include "ctx.h"
#include "error.h"
#include "ganfw/host.h"
#include "tensor.h"

/* How a forward or backward runs. */
typedef struct ganfw_exec {
  ganfw_ctx *ctx;
  ganfw_backend *be;
  int32_t train;        /* BatchNorm batch statistics, Dropout active */
  int32_t update_stats; /* BatchNorm running statistics updated */
} ganfw_exec;

/* What one layer keeps for its backward: references released by the executor. */
#define GANFW_SAVED_MAX 3
typedef struct ganfw_saved {
  ganfw_tensor *t[GANFW_SAVED_MAX];
  uint64_t rng_offset;
  int64_t shape[GANFW_MAX_DIMS]; /* the input shape, for layers that keep no tensor */
  int32_t ndim;
} ganfw_saved;

typedef struct ganfw_layer ganfw_layer;

typedef struct ganfw_layer_vt {
  const char *type; /* "conv2d", ... */
  /* The output shape for an input shape (batch first); an error names the layer. */
  ganfw_status (*infer)(const ganfw_layer *l, const int64_t *in, int32_t in_ndim, int64_t *out,
                        int32_t *out_ndim);
  /* (optional) Allocates and initialises parameters and buffers; in is the input shape
   * with N = 1. */
  ganfw_status (*init)(ganfw_layer *l, const int64_t *in, int32_t in_ndim);
  /* *y: a new reference (it may be x itself, retained, for in-place layers when the
   * caller holds the only reference to x). saved is NULL in no-grad mode. */
  ganfw_status (*forward)(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x, ganfw_tensor **y,
                          ganfw_saved *saved);
  /* dx NULL: no input gradient wanted. param_grads 0: no parameter gradients.
   * accumulate 1: add to the existing parameter gradients. */
  ganfw_status (*backward)(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                           ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                           int32_t accumulate);
} ganfw_layer_vt;

#define GANFW_LAYER_MAX_PARAMS 2
#define GANFW_LAYER_MAX_ARGS   8

struct ganfw_layer {
  const ganfw_layer_vt *vt;
  ganfw_net *net;
  ganfw_ctx *ctx;
  char *name;                        /* "main.0" */
  char *qualified;                   /* "generator.main.0": owner name in memory reports */
  int64_t arg[GANFW_LAYER_MAX_ARGS]; /* type-specific integer arguments */
  float farg[2];                     /* type-specific float arguments */
  int32_t nparams;
  ganfw_tensor *param[GANFW_LAYER_MAX_PARAMS]; /* weight, bias */
  ganfw_tensor *grad[GANFW_LAYER_MAX_PARAMS];
  char *param_name[GANFW_LAYER_MAX_PARAMS]; /* "main.0.weight" */
  ganfw_tensor *running_mean, *running_var; /* batchnorm2d */
  int64_t num_batches_tracked;
  char *buffer_name[3];
  int32_t trainable;
};

/* The layer types. */
extern const ganfw_layer_vt ganfw_layer_conv2d;
extern const ganfw_layer_vt ganfw_layer_conv_transpose2d;
extern const ganfw_layer_vt ganfw_layer_linear;
extern const ganfw_layer_vt ganfw_layer_batchnorm2d;
extern const ganfw_layer_vt ganfw_layer_activation;
extern const ganfw_layer_vt ganfw_layer_pool2d;
extern const ganfw_layer_vt ganfw_layer_dropout;
extern const ganfw_layer_vt ganfw_layer_reshape;

/* Helpers for layer implementations (net.c). */
/* A new activation tensor named after the layer. */
ganfw_tensor *ganfw_layer_tensor(ganfw_layer *l, const ganfw_exec *ex, int32_t dtype, int32_t ndim,
                                 const int64_t *shape, int32_t category);
/* A workspace tensor of `bytes` (category workspace) for one call, or NULL with *st set;
 * NULL with GANFW_OK for 0 bytes. */
ganfw_tensor *ganfw_layer_workspace(ganfw_layer *l, const ganfw_exec *ex, size_t bytes,
                                    ganfw_status *st);
/* Creates parameter `i` (f32, category param, with its grad) named "<layer>.<suffix>". */
ganfw_status ganfw_layer_add_param(ganfw_layer *l, int32_t i, const char *suffix, int32_t ndim,
                                   const int64_t *shape);
/* PyTorch's default init of a weight and bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
ganfw_status ganfw_layer_init_uniform(ganfw_layer *l, int64_t fan_in);
/* Error naming the layer: "generator.main.3 (conv2d): ..." */
ganfw_status ganfw_layer_error(const ganfw_layer *l, ganfw_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Releases the saved references. */
void ganfw_saved_clear(ganfw_saved *s);

#endif
