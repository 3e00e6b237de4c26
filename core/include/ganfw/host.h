/* The host table: everything the core offers a plugin. The core fills one table per run
 * and hands plugins a `const ganfw_host *`; plugins never link against the core.
 *
 * ABI rules: entries are only ever appended, in dated blocks, never inserted (the offset of
 * every entry is pinned by tests/headers/host_offsets.c). A plugin that uses an entry added
 * in minor version M checks that `struct_size` covers it (GANFW_HOST_HAS) before calling
 * it. Only fixed-width integers, float/double, opaque handles and `const char *` cross
 * this boundary.
 *
 * Threads: every entry may be called from the thread that called the plugin ([main-thread]
 * unless an entry says otherwise); the core does not call plugins from its prefetch
 * thread. */
#ifndef GANFW_HOST_H
#define GANFW_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ganfw_ctx ganfw_ctx; /* opaque: the run (backend, allocator, RNG, config) */
typedef struct ganfw_cfg ganfw_cfg; /* opaque: one node of the loaded config */
typedef struct ganfw_net ganfw_net; /* opaque: a sequence of layers run by the executor */

/* Activations (GANFW_ACT_*) and pooling kinds, stored as int32_t. */
enum {
  GANFW_ACT_IDENTITY = 0,
  GANFW_ACT_RELU = 1,
  GANFW_ACT_LEAKY_RELU = 2,
  GANFW_ACT_TANH = 3,
  GANFW_ACT_SIGMOID = 4,
  GANFW_ACT_COUNT
};
enum { GANFW_POOL_MAX = 0, GANFW_POOL_AVG = 1, GANFW_POOL_COUNT };
/* Upsampling modes (net_upsample, ABI 1.2). */
enum { GANFW_UPSAMPLE_NEAREST = 0, GANFW_UPSAMPLE_BILINEAR = 1, GANFW_UPSAMPLE_COUNT };

/* One parameter of a built net, for initialisation and inspection. */
typedef struct ganfw_param_info {
  uint32_t struct_size;   /* set by the caller to sizeof(ganfw_param_info) */
  int32_t trainable;      /* 0 when frozen */
  const char *name;       /* state_dict name, e.g. "main.1.weight"; owned by the net */
  const char *layer_type; /* "conv2d", "conv_transpose2d", "linear", "batchnorm2d" */
  ganfw_tensor *value;    /* f32; owned by the net */
  ganfw_tensor *grad;     /* f32; owned by the net; NULL when frozen */
} ganfw_param_info;

/* What the executor knows of one node before it runs (host->net_node_info, ABI 1.10): the
 * figures a memory strategy plans recomputation with. Sizes are per sample (batch row). */
typedef struct ganfw_node_info {
  uint32_t struct_size; /* set by the caller to sizeof(ganfw_node_info) */
  int32_t n_in;         /* inputs: the nodes in[0..n_in), -1 for the net's input */
  const int32_t *in;    /* [n_in]; owned by the net */
  int32_t kept;         /* 1 when a tape keeps this node's output for some backward (its
                           layer keeps its output, or a reader keeps its input) */
  int32_t in_place;     /* 1 when the node may overwrite its input (activations, dropout,
                           add): its output is then its input's memory */
  const char *name;     /* the node's name ("main.3"); owned by the net */
  const char *type;     /* its layer type ("conv2d") */
  int64_t out_elems;    /* output elements per sample */
  double flops;         /* forward floating-point operations per sample (a multiply-add is
                           2; element-wise layers count their output elements times the
                           operations per element) */
} ganfw_node_info;

/* The kind tag a vtable carries from ABI 1.1 (ganfw_model_vt.kind, ganfw_optim_vt.kind,
 * ganfw_memory_vt.kind): the loader refuses a vtable whose tag is not its descriptor's kind
 * (a descriptor that says "memory" but points at an optimizer's vtable). 0 is "untagged",
 * accepted only from a plugin built against ABI 1.0 headers. */
#define GANFW_VT_TAG_MODEL     0x67667400u /* "gft" + GANFW_PLUGIN_MODEL */
#define GANFW_VT_TAG_OPTIM     0x67667401u /* "gft" + GANFW_PLUGIN_OPTIM */
#define GANFW_VT_TAG_MEMORY    0x67667402u /* "gft" + GANFW_PLUGIN_MEMORY */
#define GANFW_VT_TAG_OBJECTIVE 0x67667403u /* "gft" + GANFW_PLUGIN_OBJECTIVE (ABI 1.4) */
#define GANFW_VT_TAG_TRAINER   0x67667404u /* "gft" + GANFW_PLUGIN_TRAINER (ABI 1.6) */
#define GANFW_VT_TAG_LAYER     0x67667405u /* "gft" + GANFW_PLUGIN_LAYER (ABI 1.8) */

/* The allocator's statistics (host->memory_stats), in bytes. The caller sets struct_size;
 * the core fills only the members that fit in it and leaves the rest untouched. */
#define GANFW_MEM_STATS_CATEGORIES 16 /* room for GANFW_MEM_COUNT categories and more */
typedef struct ganfw_memory_stats {
  uint32_t struct_size; /* set by the caller to sizeof(ganfw_memory_stats) */
  uint32_t reserved0;
  int64_t limit;          /* the run's memory_limit on reserved bytes; 0 when none is set */
  int64_t capacity;       /* limit when set, else the device's total memory; 0 when unknown */
  int64_t allocated;      /* bytes in live tensors now */
  int64_t allocated_peak; /* the most ever allocated (since the last peak reset) */
  int64_t reserved;       /* bytes held from the device (allocated + cached) */
  int64_t reserved_peak;
  /* allocated bytes per GANFW_MEM_* category, now and at their own peaks; entries from
   * GANFW_MEM_COUNT on are 0 */
  int64_t category[GANFW_MEM_STATS_CATEGORIES];
  int64_t category_peak[GANFW_MEM_STATS_CATEGORIES];
  int64_t num_ooms; /* failed requests so far */
} ganfw_memory_stats;

/* Log levels, stored as int32_t. */
enum { GANFW_LOG_DEBUG = 0, GANFW_LOG_INFO = 1, GANFW_LOG_WARN = 2, GANFW_LOG_ERROR = 3 };

/* --- layers defined by plugins (ABI 1.3, host->net_custom) -------------------------------
 * A plugin defines a layer kind the core does not have by filling a ganfw_layer_def and
 * appending it to a net with host->net_custom. The core runs it like its own layers: it
 * allocates the output, the input gradient and the parameters, converts a 16-bit compute
 * dtype to f32 around each call, keeps what the layer asks it to keep for backward, and
 * checks after every forward and backward that the tensors the layer created through
 * host->tensor_create add up to the bytes it reported (a mismatch is an error naming the
 * node and both figures), so that `ganfw plan` stays exact. docs/ABI.md, "Writing a layer",
 * walks through one. Every callback is [main-thread]. */

/* Limits per plugin layer. */
#define GANFW_CUSTOM_MAX_PARAMS  4 /* parameters declared by init */
#define GANFW_CUSTOM_MAX_BUFFERS 4 /* buffers declared by init */
#define GANFW_CUSTOM_MAX_SAVED   4 /* tensors forward keeps for backward in saved[] */

/* ganfw_layer_def.keep: what the core keeps for backward on the layer's behalf, as
 * references (no copy, not counted in saved_bytes): the input x, the output y. */
#define GANFW_KEEP_INPUT  1u
#define GANFW_KEEP_OUTPUT 2u

/* Opaque: a plugin layer being built, handed to its init (host->layer_add_param and
 * layer_add_buffer declare its tensors). Valid during init only. */
typedef struct ganfw_layer_init ganfw_layer_init;

/* What one forward or backward call of a plugin layer gets, filled by the core (struct_size
 * is the core's; a member past it reads as absent). Every tensor is f32 and borrowed for
 * the call. */
typedef struct ganfw_layer_call {
  uint32_t struct_size;
  int32_t train;        /* 1 in training mode (net_set_train), 0 in eval */
  int32_t update_stats; /* 1 when running buffers may be updated: training, and not a
                           checkpoint re-run or a second look after a non-finite step */
  int32_t param_grads;  /* backward: 1 when the parameter gradients are wanted */
  int32_t accumulate;   /* backward: 1 adds to grad[i], 0 overwrites it */
  int32_t n_param;      /* entries of param and grad: as many as init declared */
  int32_t n_buffer;     /* entries of buffer */
  int32_t reserved0;
  ganfw_ctx *ctx;
  const char *name;            /* the node's full name ("generator.pn1"): name the tensors a
                                  call creates after it, so memory reports show the node */
  ganfw_tensor *const *param;  /* [n_param], in the order init declared them */
  ganfw_tensor *const *grad;   /* [n_param]; an entry is NULL when the layer is frozen or
                                  param_grads is 0 */
  ganfw_tensor *const *buffer; /* [n_buffer] */
} ganfw_layer_call;

/* A layer kind. The core copies it (min(struct_size, its own size): a member past the
 * plugin's struct_size reads as absent), so it need not outlive net_custom. Shapes are
 * batch first, 1 to 4 dims ([N,F] or [N,C,H,W]). "Bytes" are the sum of nbytes
 * (numel * element size) of the tensors meant, before the allocator rounds them. */
typedef struct ganfw_layer_def {
  uint32_t struct_size; /* sizeof(ganfw_layer_def) */
  uint32_t keep;        /* GANFW_KEEP_* bits */
  const char *type;     /* the layer type in reports and ganfw_param_info ("pixelnorm");
                           copied */
  /* The output shape for the input shape in[0..in_ndim) (an error, through host->error,
   * says what does not fit). Called at net_build and before every forward. */
  ganfw_status (*infer)(void *state, const int64_t *in, int32_t in_ndim, int64_t *out,
                        int32_t *out_ndim);
  /* (optional: 0) Bytes of the tensors a forward with a tape puts in saved[] for the input
   * shape in (batch included). */
  int64_t (*saved_bytes)(void *state, const int64_t *in, int32_t in_ndim);
  /* (optional: 0) Bytes a call needs beyond that: the most bytes the tensors it creates hold
   * at once, less saved_bytes in a forward (backward 0), or all of it in a backward
   * (backward 1), or in backward2 (backward 2, ABI 1.9). A forward with a tape, and a
   * backward (or backward2) that computes dx and every parameter gradient, must hit their
   * figures exactly; a no-grad forward (saved NULL) and a backward that computes less may
   * stay below. */
  int64_t (*workspace_bytes)(void *state, const int64_t *in, int32_t in_ndim, int32_t backward);
  /* (optional) Declares the parameters (host->layer_add_param: f32, with gradients, in the
   * state_dict as "<node>.<name>") and buffers (host->layer_add_buffer) and sets their
   * initial values, e.g. with host->foreach_fill or rng_normal(ctx, ...): ctx is the net's
   * run. in is the input shape with N = 1. Called once, by net_build. */
  ganfw_status (*init)(void *state, ganfw_ctx *ctx, ganfw_layer_init *li, const int64_t *in,
                       int32_t in_ndim);
  /* y = f(x): y has infer's shape, uninitialised; write all of it and leave x as it is.
   * saved is NULL in no-grad mode; with a tape it is GANFW_CUSTOM_MAX_SAVED NULL slots where
   * forward may put tensors it created (host->tensor_create) for its backward: the core owns
   * them from then on and destroys them after backward. Any other tensor forward creates
   * must be destroyed before it returns. */
  ganfw_status (*forward)(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                          ganfw_tensor *y, ganfw_tensor **saved);
  /* From dy (the output's gradient): dx = dL/dx, overwritten (dx NULL: not wanted), and, when
   * call->param_grads, the gradients call->grad[i] (added to when call->accumulate, else
   * overwritten). x and y are the kept input and output (NULL unless keep says so); saved
   * holds what forward put there. Tensors backward creates must be destroyed before it
   * returns. */
  ganfw_status (*backward)(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                           const ganfw_tensor *y, ganfw_tensor *const *saved,
                           const ganfw_tensor *dy, ganfw_tensor *dx);
  /* (optional) Frees state. When set, the net owns state from net_custom on (even when it
   * fails) and calls it once, at net_destroy; when NULL, state stays the plugin's and must
   * outlive the net. */
  void (*destroy)(void *state);
  /* (optional, ABI 1.9) The backward of backward, for penalties on a discriminator's input
   * gradient (objective.gp, r1, r2): a layer without it is refused on a penalised net, naming
   * it. x, y, saved and dy are what backward got; u (the input's shape) is the penalty's
   * gradient with respect to the dx that backward made. Writes (all f32, overwritten):
   *   du (the output's shape): the forward linearised at x applied to u, J(x) u, without
   *      the parts that do not depend on the input (a bias);
   *   ax (the input's shape): the gradient of <u, dx> with respect to x with dy held fixed,
   *      zeros for a layer whose dx does not depend on x (linear in its input);
   * and, when call->param_grads, adds the gradient of <u, dx> with respect to each parameter
   * to call->grad[i] (call->accumulate is 1). workspace_bytes(state, in, ndim, 2) reports the
   * most bytes its tensors hold at once; the core checks it as for backward. */
  ganfw_status (*backward2)(void *state, const ganfw_layer_call *call, const ganfw_tensor *x,
                            const ganfw_tensor *y, ganfw_tensor *const *saved,
                            const ganfw_tensor *dy, const ganfw_tensor *u, ganfw_tensor *du,
                            ganfw_tensor *ax);
} ganfw_layer_def;

typedef struct ganfw_host ganfw_host;

struct ganfw_host {
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t struct_size; /* sizeof(ganfw_host) of the core that filled it */
  uint32_t reserved0;

  /* --- errors and logging (minor 0) --- */

  /* Records a message for `code` (printf-style) and returns `code`, so that a plugin can
   * write `return host->error(ctx, GANFW_ERR_CONFIG, "...")`. */
  ganfw_status (*error)(ganfw_ctx *ctx, ganfw_status code, const char *fmt, ...);
  void (*log)(ganfw_ctx *ctx, int32_t level, const char *fmt, ...);

  /* --- config (minor 0) ---
   * Getters mark the key as read; a key nobody reads is reported as an error. A missing
   * key yields the default; a value of the wrong type is GANFW_ERR_CONFIG with
   * file:line:col in the message. Strings and nodes are borrowed: valid while the run
   * lives. `node` may be NULL (an absent section): every getter then yields its default. */
  const ganfw_cfg *(*cfg_child)(const ganfw_cfg *node, const char *key);
  ganfw_status (*cfg_int)(const ganfw_cfg *node, const char *key, int64_t def, int64_t *out);
  ganfw_status (*cfg_float)(const ganfw_cfg *node, const char *key, double def, double *out);
  ganfw_status (*cfg_bool)(const ganfw_cfg *node, const char *key, int32_t def, int32_t *out);
  ganfw_status (*cfg_string)(const ganfw_cfg *node, const char *key, const char *def,
                             const char **out);
  ganfw_status (*cfg_bytes)(const ganfw_cfg *node, const char *key, int64_t def, int64_t *out);
  /* Number of items of the list at `key`; 0 when absent, -1 (and an error) when not a list. */
  int64_t (*cfg_list_len)(const ganfw_cfg *node, const char *key);
  /* Item i of the list at `key` as a node (a scalar item is a node too, read it with key
   * NULL). Borrowed. */
  const ganfw_cfg *(*cfg_list_at)(const ganfw_cfg *node, const char *key, int64_t i);

  /* --- tensors through the shared caching allocator (minor 0) ---
   * tensor_create returns a tensor owned by the caller, to be freed with tensor_destroy
   * (which accepts NULL); NULL on failure with the error recorded (GANFW_ERR_OOM carries
   * the allocator's report). Contents are uninitialised. */
  ganfw_tensor *(*tensor_create)(ganfw_ctx *ctx, int32_t dtype, int32_t ndim, const int64_t *shape,
                                 int32_t category, const char *name);
  void (*tensor_destroy)(ganfw_tensor *t);
  ganfw_status (*tensor_from_host)(ganfw_tensor *t, const void *src, int64_t nbytes);
  ganfw_status (*tensor_to_host)(const ganfw_tensor *t, void *dst, int64_t nbytes);

  /* --- foreach ops over lists of f32 tensors of equal shapes, pairwise (minor 0) ---
   * Named like PyTorch's torch._foreach_* in-place ops; they run on any backend. */
  ganfw_status (*foreach_fill)(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, float v);
  /* x *= a */
  ganfw_status (*foreach_scale)(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, float a);
  /* x += a */
  ganfw_status (*foreach_add_scalar)(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, float a);
  /* y += alpha * x */
  ganfw_status (*foreach_axpy)(ganfw_ctx *ctx, ganfw_tensor *const *y, float alpha,
                               ganfw_tensor *const *x, int64_t n);
  /* y *= x */
  ganfw_status (*foreach_mul)(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                              int64_t n);
  /* y += v * a * b */
  ganfw_status (*foreach_addcmul)(ganfw_ctx *ctx, ganfw_tensor *const *y, float v,
                                  ganfw_tensor *const *a, ganfw_tensor *const *b, int64_t n);
  /* y += v * a / b */
  ganfw_status (*foreach_addcdiv)(ganfw_ctx *ctx, ganfw_tensor *const *y, float v,
                                  ganfw_tensor *const *a, ganfw_tensor *const *b, int64_t n);
  /* out = sqrt(x) (out may be x) */
  ganfw_status (*foreach_sqrt)(ganfw_ctx *ctx, ganfw_tensor *const *out, ganfw_tensor *const *x,
                               int64_t n);
  /* y += w * (x - y), as torch.lerp_(y, x, w) */
  ganfw_status (*foreach_lerp)(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                               float w, int64_t n);
  /* y = max(y, x) */
  ganfw_status (*foreach_maximum)(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                                  int64_t n);
  /* y = x */
  ganfw_status (*foreach_copy)(ganfw_ctx *ctx, ganfw_tensor *const *y, ganfw_tensor *const *x,
                               int64_t n);
  /* *out = sum over all elements of all tensors (accumulated in double) */
  ganfw_status (*foreach_sum)(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, double *out);
  /* *out = sqrt(sum of squares) over all tensors, like torch.nn.utils.clip_grad_norm_ */
  ganfw_status (*foreach_norm)(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n, double *out);
  /* *out = 1 when any element of any tensor is NaN or inf, else 0 */
  ganfw_status (*foreach_nonfinite)(ganfw_ctx *ctx, ganfw_tensor *const *x, int64_t n,
                                    int32_t *out);

  /* --- random numbers: Philox 4x32-10 from the run's seed and offset (minor 0) --- */
  ganfw_status (*rng_normal)(ganfw_ctx *ctx, ganfw_tensor *t, float mean, float std);
  ganfw_status (*rng_uniform)(ganfw_ctx *ctx, ganfw_tensor *t, float lo, float hi);

  /* --- nets: a model plugin builds each net as a sequence of layers (minor 0) ---
   * net_create returns a net owned by the caller (net_destroy, which accepts NULL).
   * Layer names give the parameters their state_dict names: a conv2d named "main.0" owns
   * "main.0.weight" and "main.0.bias". Layers are appended in order; net_build fixes the
   * input shape [C,H,W], checks every layer's shapes (an error names the layer), and
   * allocates the parameters (category param, PyTorch's default initialisation) and their
   * gradients (category grad). */
  ganfw_net *(*net_create)(ganfw_ctx *ctx, const char *name);
  void (*net_destroy)(ganfw_net *net);
  ganfw_status (*net_conv2d)(ganfw_net *net, const char *name, int64_t in_channels,
                             int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
                             int32_t bias);
  ganfw_status (*net_conv_transpose2d)(ganfw_net *net, const char *name, int64_t in_channels,
                                       int64_t out_channels, int64_t kernel, int64_t stride,
                                       int64_t padding, int64_t output_padding, int32_t bias);
  ganfw_status (*net_linear)(ganfw_net *net, const char *name, int64_t in_features,
                             int64_t out_features, int32_t bias);
  /* BatchNorm2d with affine weight and bias, running statistics, eps and momentum. */
  ganfw_status (*net_batchnorm2d)(ganfw_net *net, const char *name, int64_t channels, float eps,
                                  float momentum);
  /* kind: GANFW_ACT_RELU, _LEAKY_RELU (alpha = negative slope), _TANH, _SIGMOID. Runs in
   * place on its input, as PyTorch's inplace=True. */
  ganfw_status (*net_activation)(ganfw_net *net, const char *name, int32_t kind, float alpha);
  /* kind: GANFW_POOL_MAX or GANFW_POOL_AVG */
  ganfw_status (*net_pool2d)(ganfw_net *net, const char *name, int32_t kind, int64_t kernel,
                             int64_t stride, int64_t padding);
  ganfw_status (*net_dropout)(ganfw_net *net, const char *name, float p);
  /* [N,C,H,W] -> [N,C*H*W] */
  ganfw_status (*net_flatten)(ganfw_net *net, const char *name);
  /* [N,F] -> [N,C,H,W] with F = C*H*W */
  ganfw_status (*net_reshape)(ganfw_net *net, const char *name, int64_t c, int64_t h, int64_t w);
  ganfw_status (*net_build)(ganfw_net *net, int64_t c, int64_t h, int64_t w);
  /* After net_build: the parameters, in layer order (weight before bias). *out borrows
   * tensors owned by the net, valid until net_destroy. */
  int64_t (*net_param_count)(const ganfw_net *net);
  ganfw_status (*net_param_info)(ganfw_net *net, int64_t i, ganfw_param_info *out);

  /* Number of layers of a built net. */
  int32_t (*net_layer_count)(const ganfw_net *net);
  /* Gradient checkpointing: starts[0..n) are the first layer indices of the segments after
   * the first (strictly increasing, in 1..layers-1). A forward with a tape then keeps only
   * each segment's input; backward recomputes a segment's forward (same random numbers,
   * BatchNorm running statistics not updated again) just before its backward. n = 0 turns
   * it off. */
  ganfw_status (*net_checkpoint)(ganfw_net *net, const int32_t *starts, int32_t n);

  /* --- added in minor 1 (ABI 1.1, 2026-12): check GANFW_HOST_HAS before use --- */

  /* The message of the last error recorded on this thread (by host->error or inside the
   * core), "" when none: e.g. to add context to a failure of a host entry before returning
   * it. Borrowed: valid until the next error is recorded on this thread. [any thread] */
  const char *(*error_message)(void);
  /* The run allocator's statistics into *out (out->struct_size set by the caller; only the
   * members it covers are written): e.g. a memory strategy that logs or caps memory. */
  ganfw_status (*memory_stats)(ganfw_ctx *ctx, ganfw_memory_stats *out);
  /* An optional capability of the host by its versioned id ("ganfw.<what>/<N>", see
   * ganfw/plugin.h), NULL when this core does not offer it. The pointer is owned by the
   * core, valid for the process lifetime. */
  const void *(*get_extension)(const ganfw_host *host, const char *id);

  /* --- added in minor 2 (ABI 1.2, 2026-12): layers; check GANFW_HOST_HAS before use ---
   * Appended to a net like the minor 0 layers; each keeps outputs and input gradients in
   * the net's compute dtype and reports its bytes from shapes (docs/ABI.md lists what each
   * keeps for backward). */

  /* nn.Upsample(scale_factor=2, mode): [N,C,H,W] -> [N,C,2H,2W]; scale must be 2; mode
   * GANFW_UPSAMPLE_NEAREST or GANFW_UPSAMPLE_BILINEAR (align_corners=False). */
  ganfw_status (*net_upsample)(ganfw_net *net, const char *name, int64_t scale, int32_t mode);
  /* nn.AdaptiveAvgPool2d(1): [N,C,H,W] -> [N,C,1,1] (net_flatten after it gives [N,C]). */
  ganfw_status (*net_global_avg_pool)(ganfw_net *net, const char *name);
  /* nn.GroupNorm(groups, channels, eps, affine) on [N,C,H,W] or [N,C]; groups divides
   * channels; affine: "<name>.weight" and "<name>.bias" [C], ones and zeros. */
  ganfw_status (*net_groupnorm)(ganfw_net *net, const char *name, int64_t groups, int64_t channels,
                                float eps, int32_t affine);
  /* nn.InstanceNorm2d(channels, eps, affine) without running statistics, on [N,C,H,W]
   * with H*W > 1; affine: weight and bias [C]. (PyTorch's default affine is 0.) */
  ganfw_status (*net_instancenorm2d)(ganfw_net *net, const char *name, int64_t channels, float eps,
                                     int32_t affine);
  /* nn.LayerNorm(shape[0..ndim), eps, elementwise_affine) over the whole sample: shape is
   * the input's shape without the batch, [F] for [N,F] or [C,H,W] for [N,C,H,W] (ndim 1
   * to 3); affine: weight and bias of that shape, ones and zeros. shape is read during the
   * call only. */
  ganfw_status (*net_layernorm)(ganfw_net *net, const char *name, int32_t ndim,
                                const int64_t *shape, float eps, int32_t affine);

  /* --- added in minor 3 (ABI 1.3, 2026-12): graph nets and more layers; check
   * GANFW_HOST_HAS before use ---
   * A net is a directed acyclic graph of named nodes, run in the order they are appended. A
   * layer takes its input from the node appended before it (the first one: the net's input)
   * unless net_input names another; a node's output may feed any number of later nodes
   * (backward adds up their gradients). The net's output is the last node. The net's input
   * is the node named "input" (no layer may take that name). Names are resolved by
   * net_build: a name no earlier node has, a node that feeds nothing, or an input from a
   * later node (a cycle) is an error naming the node. */

  /* The next layer appended takes its input from the node named `from` (a layer name or
   * "input") instead of the layer appended before it. `from` is copied. */
  ganfw_status (*net_input)(ganfw_net *net, const char *from);
  /* torch.add / a residual connection: the element-wise sum of n >= 2 nodes of one shape.
   * inputs[i] is a node name, or NULL for the node appended before this one. Keeps nothing
   * for backward; runs in place on its first input when nothing else holds it. */
  ganfw_status (*net_add)(ganfw_net *net, const char *name, const char *const *inputs, int32_t n);
  /* torch.cat(dim=1): n >= 2 nodes [N,Ci,...] equal in every dimension but the channels, in
   * the order given (NULL: the node appended before). Keeps nothing for backward. */
  ganfw_status (*net_concat)(ganfw_net *net, const char *name, const char *const *inputs,
                             int32_t n);
  /* nn.Embedding(num, dim): class ids (floats holding whole numbers in [0, num), shape [N,1]
   * or [N,1,1,1]) -> [N,dim]; "<name>.weight" [num,dim], N(0, 1). An id out of range is an
   * error naming the layer. The id input gets no gradient. */
  ganfw_status (*net_embedding)(ganfw_net *net, const char *name, int64_t num, int64_t dim);
  /* torch.nn.utils.spectral_norm on the layer named `layer` (a conv2d, conv_transpose2d or
   * linear appended before): its weight becomes "<layer>.weight_orig", with buffers
   * "<layer>.weight_u" and "<layer>.weight_v"; each training forward runs
   * n_power_iterations (>= 1) power iterations (none in eval, none when the net's running
   * statistics are frozen, as in a checkpoint re-run), and the layer uses
   * weight_orig / sigma. eps as PyTorch's (1e-12). */
  ganfw_status (*net_spectral_norm)(ganfw_net *net, const char *layer, int32_t n_power_iterations,
                                    float eps);
  /* The index of the node named `name` in a built net (append order, as net_checkpoint
   * counts), or -1 when it has none. */
  int32_t (*net_layer_index)(const ganfw_net *net, const char *name);
  /* 1 when a checkpoint segment of a built net may start at node `start` (1..layers-1): the
   * output of node start - 1 is the only tensor that crosses from the nodes before it to
   * the nodes from it on. Every start qualifies in a straight net; in a residual net, the
   * first node of a block does. */
  int32_t (*net_cut_ok)(const ganfw_net *net, int32_t start);

  /* --- added in minor 3 (ABI 1.3, 2026-12): tensor math; check GANFW_HOST_HAS before use ---
   * Element-wise ops and reductions on f32 tensors of the run, for plugin layers and
   * optimizers (Lion, Adafactor): each runs on the tensors' backend (CPU or CUDA; nothing is
   * computed while `ganfw plan` runs) and returns GANFW_ERR_INVALID_ARG, naming the tensors
   * and their shapes, when a tensor is not f32, belongs to another run, or does not fit.
   * Outputs are tensors the caller made in the right shape; an element-wise output may be one
   * of its inputs (in place). Each matches the PyTorch op of the same name on f32
   * (tests/test_host_ops.c). */

  /* out = a op b (torch.add, sub, mul, div, maximum, minimum) with broadcasting: the shapes
   * are aligned at their last dims, each pair of dims is equal or one of them is 1 (a missing
   * dim counts as 1), and out has the broadcast shape. maximum and minimum give NaN when
   * either input is NaN. */
  ganfw_status (*tensor_add)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                             const ganfw_tensor *b);
  ganfw_status (*tensor_sub)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                             const ganfw_tensor *b);
  ganfw_status (*tensor_mul)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                             const ganfw_tensor *b);
  ganfw_status (*tensor_div)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                             const ganfw_tensor *b);
  ganfw_status (*tensor_maximum)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                                 const ganfw_tensor *b);
  ganfw_status (*tensor_minimum)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                                 const ganfw_tensor *b);
  /* out = f(x), out and x of one element count: torch.abs, sign (-1, 0, 1; 0 for NaN, as
   * torch 1.13), exp, log, sqrt, rsqrt (1 / sqrt). */
  ganfw_status (*tensor_abs)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x);
  ganfw_status (*tensor_sign)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x);
  ganfw_status (*tensor_exp)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x);
  ganfw_status (*tensor_log)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x);
  ganfw_status (*tensor_sqrt)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x);
  ganfw_status (*tensor_rsqrt)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x);
  /* out = torch.clamp(x, lo, hi): lo and hi may be -INFINITY / INFINITY for one-sided; NaN
   * stays NaN; lo > hi gives hi. */
  ganfw_status (*tensor_clamp)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x, float lo,
                               float hi);
  /* out = x * a, out = x + a, out = torch.pow(x, p) */
  ganfw_status (*tensor_mul_scalar)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                    float a);
  ganfw_status (*tensor_add_scalar)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                    float a);
  ganfw_status (*tensor_pow_scalar)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                    float p);
  /* out = torch.sum(x, dims) / torch.mean(x, dims) over dims[0..n_dims) (distinct, each in
   * [-ndim, ndim), negative from the end; n_dims 0: every dim): out has x's shape with those
   * dims 1 (keepdim=True) or without them (keepdim=False; ndim 0 for all). Summed in double
   * in a fixed order (the result does not depend on the thread count), rounded once. dims is
   * read during the call only. */
  ganfw_status (*tensor_sum)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                             const int32_t *dims, int32_t n_dims);
  ganfw_status (*tensor_mean)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                              const int32_t *dims, int32_t n_dims);
  /* out[n,c,...] = x[n,c,...] * scale[c] + shift[c], per channel (dim 1) of x [N,C,...]
   * (ndim >= 2), rounded once (fused multiply-add); scale and shift have C elements, either
   * may be NULL (1, 0). out has x's shape and may be x. As x * scale.view(1,C,1,1) + shift. */
  ganfw_status (*tensor_channel_affine)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                        const ganfw_tensor *scale, const ganfw_tensor *shift);

  /* --- added in minor 3 (ABI 1.3, 2026-12): layers from plugins; check GANFW_HOST_HAS ---
   * (ganfw_layer_def above; docs/ABI.md "Writing a layer") */

  /* Appends a layer of kind *def (copied) named `name` to net, a single-input node like the
   * core's layers (net_input chooses its input). state is handed to every callback of def;
   * see def->destroy for who owns it. A def without infer, forward or backward, or with a
   * struct_size below the 1.3 one, is refused naming the node. */
  ganfw_status (*net_custom)(ganfw_net *net, const char *name, const ganfw_layer_def *def,
                             void *state);
  /* During def->init: declares parameter `name` of shape shape[0..ndim) (f32, category
   * param, with its gradient, category grad; zeros until init sets it) and returns it in
   * *out (owned by the net, valid until net_destroy). It is "<node>.<name>" in the
   * state_dict, net_param_info and checkpoints; call->param[i] in the order declared. At most
   * GANFW_CUSTOM_MAX_PARAMS; a name declared twice is refused. */
  ganfw_status (*layer_add_param)(ganfw_layer_init *li, const char *name, int32_t ndim,
                                  const int64_t *shape, ganfw_tensor **out);
  /* During def->init: declares buffer `name` (f32, category param, no gradient; zeros until
   * init sets it): saved with the weights as "<node>.<name>" after the parameters, as
   * PyTorch's register_buffer; call->buffer[i] in the order declared. At most
   * GANFW_CUSTOM_MAX_BUFFERS. */
  ganfw_status (*layer_add_buffer)(ganfw_layer_init *li, const char *name, int32_t ndim,
                                   const int64_t *shape, ganfw_tensor **out);

  /* --- added in minor 7 (ABI 1.7, 2026-12): check GANFW_HOST_HAS before use --- */

  /* out = torch.cat(xs[0..n), dim) of f32 tensors of one run: each x has out's ndim and
   * out's shape but in `dim` (in [-ndim, ndim), negative from the end), where out's is the
   * sum of theirs. Copied on the tensors' device (pix2pix joins an input and an image this
   * way). xs is read during the call only. */
  ganfw_status (*tensor_cat)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *const *xs,
                             int32_t n, int32_t dim);
  /* out = x.narrow(dim, start, out->shape[dim]), copied: out has x's shape but in `dim`, and
   * start + out->shape[dim] <= x->shape[dim] (the gradient of one part of a cat). */
  ganfw_status (*tensor_narrow)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                int32_t dim, int64_t start);

  /* --- added in minor 8 (ABI 1.8, 2026-12): attention, layouts and indexing; check
   * GANFW_HOST_HAS before use ---
   * What a layer such as SAGAN's self-attention needs, each on the tensors' device (CPU or
   * CUDA, and the meta backend under `ganfw plan`), f32 and contiguous, with the backward
   * written from the same entries (docs/ABI.md, "Writing a layer"). */

  /* out[i] = op(a[i]) @ op(b[i]) for each of the B matrices of a batch, as torch.bmm:
   * a [B,M,K] ([B,K,M] with trans_a: a[i] transposed), b [B,K,N] ([B,N,K] with trans_b),
   * out [B,M,N]. accumulate 1 adds to out (beta = 1), 0 overwrites it. The backward of
   * out = a @ b is da = dout @ b^T and db = a^T @ dout. */
  ganfw_status (*tensor_bmm)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *a,
                             int32_t trans_a, const ganfw_tensor *b, int32_t trans_b,
                             int32_t accumulate);
  /* out = softmax(x, dim), or log_softmax with log 1, as torch (the max subtracted first);
   * dim in [-ndim, ndim). out may be x. */
  ganfw_status (*tensor_softmax)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                 int32_t dim, int32_t log);
  /* dx from the forward's output y and dy: softmax: dx = y * (dy - sum(dy * y, dim));
   * log_softmax: dx = dy - exp(y) * sum(dy, dim). dx may be dy. */
  ganfw_status (*tensor_softmax_backward)(ganfw_ctx *ctx, ganfw_tensor *dx, const ganfw_tensor *y,
                                          const ganfw_tensor *dy, int32_t dim, int32_t log);
  /* out = x.permute(perm), copied contiguous: perm a permutation of [0, x->ndim), out's
   * shape x's permuted (ndim <= 4). Its backward is the inverse permutation; transpose(a, b)
   * is the permutation that swaps two dims. */
  ganfw_status (*tensor_permute)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                 const int32_t *perm);
  /* x.view(shape): a new tensor of another shape with x's element count sharing x's memory
   * (no copy), keeping x alive; one reference, freed with tensor_destroy. NULL with the
   * error recorded when the counts differ. */
  ganfw_tensor *(*tensor_reshape)(ganfw_tensor *x, int32_t ndim, const int64_t *shape,
                                  const char *name);
  /* out = torch.gather(x, dim, index): index (GANFW_DTYPE_I32, out's shape; x's shape but
   * in dim) holds values in [0, x->shape[dim]), checked; out[..i..] = x[..index[..i..]..]. */
  ganfw_status (*tensor_gather)(ganfw_ctx *ctx, ganfw_tensor *out, const ganfw_tensor *x,
                                int32_t dim, const ganfw_tensor *index);
  /* out.scatter_add_(dim, index, src): out[..index[..i..]..] += src[..i..], index and src of
   * one shape (out's but in dim), deterministic (in increasing i). The gather's backward:
   * zero dx, then scatter_add dy into it. */
  ganfw_status (*tensor_scatter_add)(ganfw_ctx *ctx, ganfw_tensor *out, int32_t dim,
                                     const ganfw_tensor *index, const ganfw_tensor *src);
  /* nn.PixelShuffle(factor): [N,C*r*r,H,W] -> [N,C,H*r,W*r] with r = factor, the sub-pixel
   * upsampling of super-resolution and GAN generators; with unshuffle 1 nn.PixelUnshuffle(factor):
   * [N,C,H*r,W*r] -> [N,C*r*r,H,W]. A layer appended like the minor 0 ones (factor 1 to 1024),
   * running in the net's compute dtype; it keeps nothing for backward. An input whose channels
   * (shuffle) or height and width (unshuffle) the factor does not divide is an error naming the
   * node, at net_build. */
  ganfw_status (*net_pixel_shuffle)(ganfw_net *net, const char *name, int64_t factor,
                                    int32_t unshuffle);

  /* --- added in minor 10 (ABI 1.10, 2026-12): selective recompute ---------------------- */
  /* Node i of a built net (0 <= i < net_layer_count) into *out (struct_size set by the
   * caller; members past it are left alone). GANFW_ERR_INVALID_ARG past the end. */
  ganfw_status (*net_node_info)(const ganfw_net *net, int32_t i, ganfw_node_info *out);
  /* Selective recompute: a tape keeps no output of nodes[0..n) (any of 0..layers-2; the
   * net's output is always kept); backward recomputes each from the kept values right
   * before the first backward that needs it, with the forward's RNG offsets and BatchNorm's
   * running statistics left alone, so the gradients are bitwise those of keeping everything.
   * n = 0 keeps every output; n < 0 goes back to the default. After net_build; an error with
   * checkpoint segments on the same net (one of the two strategies). */
  ganfw_status (*net_recompute)(ganfw_net *net, const int32_t *nodes, int32_t n);

  /* (minor 10, continued) 8-bit blockwise quantisation; check GANFW_HOST_HAS before use:
   * Dettmers et al., "8-bit Optimizers via Block-wise Quantization" (2022), as bitsandbytes'
   * quantize_blockwise / dequantize_blockwise: what an 8-bit optimizer (plugins/optim/adam8bit)
   * keeps its state in. Each runs on the tensors' device (CPU, CUDA, and the meta backend under
   * `ganfw plan`); all tensors belong to ctx's run and are contiguous. */

  /* Quantises x (f32, any shape, n values) blockwise: blocks of `block` consecutive values
   * (block >= 1; the last block may be shorter); absmax (f32, ceil(n / block) values, any
   * shape) gets each block's largest |x|; q (GANFW_DTYPE_U8, n values) the index into code
   * (f32, 256 values sorted ascending, e.g. from quantize_dynamic_map) of the code nearest to
   * x / absmax, as bitsandbytes' search finds it (a value exactly midway keeps the code the
   * search stood on; x * (1 / absmax) is what is searched, and a block whose absmax is 0 maps
   * to the code nearest 0). q and absmax share no memory with x or code. */
  ganfw_status (*quantize_blockwise)(ganfw_ctx *ctx, const ganfw_tensor *x,
                                     const ganfw_tensor *code, int64_t block, ganfw_tensor *q,
                                     ganfw_tensor *absmax);
  /* The inverse: x[i] = code[q[i]] * absmax[i / block], shapes and dtypes as above (x f32, n
   * values). */
  ganfw_status (*dequantize_blockwise)(ganfw_ctx *ctx, const ganfw_tensor *q,
                                       const ganfw_tensor *absmax, const ganfw_tensor *code,
                                       int64_t block, ganfw_tensor *x);
  /* Writes the 256 values of the dynamic (dynamic tree) quantisation map into code[0..256),
   * ascending: bitsandbytes' create_dynamic_map(signed, max_exponent_bits=7, total_bits=8).
   * is_signed 1: 127 positive values, their negatives, 0 and 1 (for Adam's exp_avg); 0: 254
   * values in (0, 1), 0 and 1 (for exp_avg_sq). Each value is computed in double (linspace,
   * means of neighbours, times its power of ten) and rounded to f32 once. Host memory; no
   * device work. */
  ganfw_status (*quantize_dynamic_map)(int32_t is_signed, float *code);

  /* New entries go here, in a block dated with the minor version that added them. */
};

/* True when the core's table is large enough to hold `member`. */
#define GANFW_HOST_HAS(host, member)                                                               \
  ((host)->struct_size >= offsetof(ganfw_host, member) + sizeof((host)->member))

#ifdef __cplusplus
}
#endif
#endif
