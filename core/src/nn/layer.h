/* The layer interface behind the executor (net.c): a table of functions per layer type,
 * forward and backward side by side in core/src/nn/layers/<type>.c. Shapes carry the batch
 * dimension first: [N,C,H,W] or [N,F]. Outputs and input gradients are stored in the
 * exec's compute dtype (f32, or f16/bf16 under AMP); kernels run in f32 through the
 * conversion helpers at the end of this file. */
#ifndef GANFW_LAYER_H
#define GANFW_LAYER_H

#include "backend/backend.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "ganfw/host.h"
#include "runtime/tensor.h"

/* How a forward or backward runs. */
typedef struct ganfw_exec {
  ganfw_ctx *ctx;
  ganfw_backend *be;
  int32_t train;        /* BatchNorm batch statistics, Dropout active */
  int32_t update_stats; /* BatchNorm running statistics updated */
  int32_t dtype;        /* compute dtype (GANFW_DTYPE_F32 = 0, F16, BF16): every activation a
                           layer allocates (outputs, input gradients) is stored in it */
} ganfw_exec;

/* What one layer keeps for its backward: references released by the executor. */
#define GANFW_SAVED_MAX 6 /* a plugin layer: its input, output and GANFW_CUSTOM_MAX_SAVED more */
typedef struct ganfw_saved {
  ganfw_tensor *t[GANFW_SAVED_MAX];
  uint64_t rng_offset;
  double value;                  /* a scalar kept for backward (spectral norm: sigma) */
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
  /* Layers of several inputs (add, concat) set these three instead: n inputs x[0..n), in
   * the order the node names them; shapes in[k][0..in_ndim[k]). forward_n may return x[0]
   * retained under the same rule as forward. backward_n sets dx[k] (a new reference) for
   * each k with want[k], and leaves the others NULL. */
  ganfw_status (*infer_n)(const ganfw_layer *l, int32_t n, const int64_t (*in)[GANFW_MAX_DIMS],
                          const int32_t *in_ndim, int64_t *out, int32_t *out_ndim);
  ganfw_status (*forward_n)(ganfw_layer *l, const ganfw_exec *ex, int32_t n, ganfw_tensor *const *x,
                            ganfw_tensor **y, ganfw_saved *saved);
  ganfw_status (*backward_n)(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                             ganfw_tensor *dy, int32_t n, const int32_t *want, ganfw_tensor **dx);
  /* (optional) Frees l->impl (the net frees everything else of the layer). */
  void (*release)(ganfw_layer *l);
  /* (optional) The backward of the backward, for penalties on an input gradient (WGAN-GP,
   * R1; net.h's ganfw_net_backward_of_backward). After a backward that kept its record
   * (saved, and dy, the gradient that backward received), u[k] is the penalty's gradient
   * with respect to the input gradient dx[k] that backward made (f32, NULL: zero). Sets
   *   *du: the penalty's gradient with respect to dy: the layer's forward linearised at its
   *        input applied to u (a JVP without bias), f32 of dy's shape, NULL when zero;
   *   ax[k]: the penalty's gradient with respect to input k of the forward, through dx's
   *        dependence on it (f32, NULL when zero: conv, linear, piecewise-linear layers);
   * and with param_grads adds the penalty's gradient with respect to the parameters to
   * grad[]. Layers without it are refused on a penalised net (ganfw_net_double_backward_check),
   * and so is BatchNorm in training mode (whose member says so). */
  ganfw_status (*backward2)(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                            ganfw_tensor *dy, int32_t n, ganfw_tensor *const *u, ganfw_tensor **du,
                            ganfw_tensor **ax, int32_t param_grads);
  /* (optional) 0 when backward2 does not read dy (it then gets NULL), so that a kept
   * backward does not keep it: the second tape holds only the gradients some layer reads.
   * NULL: dy is read. */
  int32_t (*backward2_reads_dy)(const ganfw_layer *l);
} ganfw_layer_vt;

/* Inputs of one node: add and concat take up to this many. */
#define GANFW_NODE_MAX_INPUTS 16

#define GANFW_LAYER_MAX_PARAMS 4 /* GANFW_CUSTOM_MAX_PARAMS: a plugin layer's */
#define GANFW_LAYER_MAX_EXTRA  4 /* spectral norm's u and v; GANFW_CUSTOM_MAX_BUFFERS */

/* --- the arguments of each layer kind, as its builder in net.c (ganfw_net_<kind>) got them,
 * checked there. global_avg_pool, add, concat and plugin layers have none. */

/* conv2d and conv_transpose2d: a square kernel, one stride and padding for both dims. */
typedef struct ganfw_conv_args {
  int64_t in_channels, out_channels; /* C, K */
  int64_t kernel, stride, padding;
  int64_t output_padding; /* conv_transpose2d only; 0 for conv2d */
  int32_t bias;           /* 1: a bias [K] */
} ganfw_conv_args;

typedef struct ganfw_linear_args {
  int64_t in_features, out_features;
  int32_t bias; /* 1: a bias [out_features] */
} ganfw_linear_args;

/* batchnorm2d: its hyper-parameters, and its buffers saved with the weights
 * (ganfw_net_buffer_at), made by its init. */
typedef struct ganfw_batchnorm_args {
  int64_t channels;
  float eps, momentum; /* the model's, or model.batchnorm_eps / _momentum (batchnorm2d.c) */
  ganfw_tensor *running_mean, *running_var; /* [C] f32 */
  int64_t num_batches_tracked;
  char *buffer_name[3]; /* the state_dict names of the three: "main.1.running_mean", ... */
} ganfw_batchnorm_args;

typedef struct ganfw_activation_args {
  int32_t kind; /* GANFW_ACT_* */
  float alpha;  /* LeakyReLU's slope */
} ganfw_activation_args;

typedef struct ganfw_pool_args {
  int32_t kind; /* GANFW_POOL_MAX or _AVG */
  int64_t kernel, stride, padding;
} ganfw_pool_args;

typedef struct ganfw_dropout_args {
  float p; /* the probability of zeroing a value */
} ganfw_dropout_args;

/* flatten ([N,C,H,W] -> [N,C*H*W]) or reshape ([N,F] -> [N,c,h,w]). */
typedef struct ganfw_reshape_args {
  int32_t flatten; /* 1: flatten; 0: reshape into c, h, w */
  int64_t c, h, w;
} ganfw_reshape_args;

typedef struct ganfw_upsample_args {
  int32_t mode; /* GANFW_UPSAMPLE_NEAREST or _BILINEAR; the scale is 2 */
} ganfw_upsample_args;

typedef struct ganfw_groupnorm_args {
  int64_t groups, channels;
  float eps;
  int32_t affine; /* 1: weight and bias [channels] */
} ganfw_groupnorm_args;

typedef struct ganfw_instancenorm_args {
  int64_t channels;
  float eps;
  int32_t affine; /* 1: weight and bias [channels] */
} ganfw_instancenorm_args;

/* layernorm over a sample of shape[0..ndim) (the dims past ndim are 1). */
typedef struct ganfw_layernorm_args {
  int32_t ndim; /* 1 to 3 */
  int64_t shape[3];
  float eps;
  int32_t affine; /* 1: weight and bias of `shape` */
} ganfw_layernorm_args;

typedef struct ganfw_embedding_args {
  int64_t num, dim; /* weight [num, dim] */
} ganfw_embedding_args;

/* A layer's arguments: the member of its kind. */
typedef union ganfw_layer_args {
  ganfw_conv_args conv; /* conv2d, conv_transpose2d */
  ganfw_linear_args linear;
  ganfw_batchnorm_args batchnorm;
  ganfw_activation_args activation;
  ganfw_pool_args pool; /* pool2d */
  ganfw_dropout_args dropout;
  ganfw_reshape_args reshape; /* flatten and reshape */
  ganfw_upsample_args upsample;
  ganfw_groupnorm_args groupnorm;
  ganfw_instancenorm_args instancenorm; /* instancenorm2d */
  ganfw_layernorm_args layernorm;
  ganfw_embedding_args embedding;
} ganfw_layer_args;

/* torch.nn.utils.spectral_norm on a matmul layer's weight (layers/spectral_norm.c). The
 * weight, parameter 0 ("<layer>.weight_orig"), is seen as [A,h,B] and its matrix W_mat
 * [h, A*B] has dimension `dim` of the weight first: dim 0 (conv2d [K,C,R,S], linear
 * [OUT,IN]) is the weight itself (A = 1), dim 1 (conv_transpose2d [C,K,R,S]) swaps the first
 * two dimensions (A = C, h = K). u [h] and v [A*B] are the layer's extra buffers 0 and 1
 * ("<layer>.weight_u", "<layer>.weight_v"). */
typedef struct ganfw_spectral_norm {
  int32_t n_power_iterations; /* 0: the layer's weight is not normalised */
  float eps;
  int32_t dim;
  int64_t A, h, B;
  ganfw_tensor *w_eff;    /* weight_orig / sigma (f32, workspace) while the layer's forward or
                             backward runs, else NULL: ganfw_layer_param_value hands it out */
  ganfw_tensor *grad_eff; /* the gradient of w_eff during a backward when it is not grad[0] */
  double sigma;           /* the last forward's */
} ganfw_spectral_norm;

/* A pruning mask on a matmul layer's weight, as torch.nn.utils.prune's forward pre-hook
 * (layers/mask.c; nn/prune.h computes masks). While a layer has one, parameter 0 is named
 * "<layer>.weight_orig", the mask (f32 0/1 of the weight's shape, category param) is its
 * extra buffer `extra` ("<layer>.weight_mask"), and the layer computes with
 * weight_orig * mask; the gradient written to weight_orig's is the gradient of that product
 * times the mask. Not on a spectrally normalised layer. */
typedef struct ganfw_weight_mask {
  int32_t on;             /* 1: the layer has a mask */
  int32_t extra;          /* its index in the layer's extra[] */
  ganfw_tensor *w_eff;    /* weight_orig * mask (f32, workspace) while the layer's forward or
                             backward runs, else NULL: ganfw_layer_param_value hands it out */
  ganfw_tensor *grad_eff; /* the gradient of w_eff during an accumulating backward */
  /* "<layer>.weight" and "<layer>.weight_orig": param_name[0] points at one of them while
   * the layer has (had) a mask; both live until the layer is destroyed, so that a name an
   * optimizer borrowed stays valid after a remove. NULL before the first mask. */
  char *plain_name, *orig_name;
} ganfw_weight_mask;

struct ganfw_layer {
  const ganfw_layer_vt *vt;
  ganfw_net *net;
  ganfw_ctx *ctx;
  char *name;            /* "main.0" */
  char *qualified;       /* "generator.main.0": owner name in memory reports */
  ganfw_layer_args args; /* the member of its kind (vt): args.conv, args.batchnorm, ... */
  int32_t nparams;
  ganfw_tensor *param[GANFW_LAYER_MAX_PARAMS]; /* weight, bias */
  ganfw_tensor *grad[GANFW_LAYER_MAX_PARAMS];
  char *param_name[GANFW_LAYER_MAX_PARAMS]; /* "main.0.weight" */
  /* More buffers saved with the weights, after BatchNorm's statistics (ganfw_net_buffer_at):
   * f32 tensors owned by the layer, extra_name[i] their state_dict name ("main.0.weight_u"). */
  int32_t nextra;
  ganfw_tensor *extra[GANFW_LAYER_MAX_EXTRA];
  char *extra_name[GANFW_LAYER_MAX_EXTRA];
  ganfw_spectral_norm sn;
  ganfw_weight_mask mask;
  int32_t trainable;
  /* Where its inputs come from (net.c): in_name[k] as the builder named it (NULL: the node
   * appended before), resolved by net_build into in[k], the producing layer's index or -1
   * for the net's input. */
  int32_t n_in;
  char *in_name[GANFW_NODE_MAX_INPUTS];
  int32_t in[GANFW_NODE_MAX_INPUTS];
  int64_t in_c[GANFW_NODE_MAX_INPUTS]; /* dim 1 of each input's shape, set by net_build */
  void *impl;               /* the layer type's own state (plugin layers), freed by vt->release */
  int32_t algorithms_noted; /* its backend algorithms are in the log and ctx->algorithms */
};

/* What a matmul layer computes with for parameter i: param[i], except the weight of a
 * spectrally normalised layer while its forward or backward runs (weight_orig / sigma) and
 * the weight of a masked layer then (weight_orig * mask). */
static inline ganfw_tensor *ganfw_layer_param_value(const ganfw_layer *l, int32_t i) {
  if (i == 0 && l->sn.w_eff) return l->sn.w_eff;
  return i == 0 && l->mask.w_eff ? l->mask.w_eff : l->param[i];
}

/* The layer types. */
extern const ganfw_layer_vt ganfw_layer_conv2d;
extern const ganfw_layer_vt ganfw_layer_conv_transpose2d;
extern const ganfw_layer_vt ganfw_layer_linear;
extern const ganfw_layer_vt ganfw_layer_batchnorm2d;
extern const ganfw_layer_vt ganfw_layer_activation;
extern const ganfw_layer_vt ganfw_layer_pool2d;
extern const ganfw_layer_vt ganfw_layer_dropout;
extern const ganfw_layer_vt ganfw_layer_reshape;
extern const ganfw_layer_vt ganfw_layer_upsample;
extern const ganfw_layer_vt ganfw_layer_global_avg_pool;
extern const ganfw_layer_vt ganfw_layer_groupnorm;
extern const ganfw_layer_vt ganfw_layer_instancenorm2d;
extern const ganfw_layer_vt ganfw_layer_layernorm;
extern const ganfw_layer_vt ganfw_layer_add;
extern const ganfw_layer_vt ganfw_layer_concat;

/* l's BatchNorm arguments and statistics (inside l, valid while l is) when l is a
 * batchnorm2d, else NULL. */
static inline ganfw_batchnorm_args *ganfw_batchnorm_of(ganfw_layer *l) {
  return l->vt == &ganfw_layer_batchnorm2d ? &l->args.batchnorm : NULL;
}

/* The matmul layers, conv2d, conv_transpose2d and linear (layers/matmul.c): y = x * weight
 * (+ bias) by one backend op each way, in one frame the three share. Forward keeps x for
 * backward; both run inside spectral norm's begin and end (when the layer has it) and compute
 * either natively in 16 bits on the whole batch (the backend runs the layer's GANFW_LP_* group
 * in the compute dtype and x has it) or in f32 over row chunks (ganfw_layer_rows_run) with the
 * weights rounded to the compute dtype (ganfw_layer_f32_params). A layer supplies its op: */
typedef struct ganfw_matmul_kind {
  uint32_t lp_group; /* GANFW_LP_CONV or GANFW_LP_LINEAR */
  int32_t workspace; /* 1: the op takes a workspace (the forward's size, op.h's ws) */
  /* The op for `rows` samples of an input of shape in (batch first) with kind and shape
   * filled (forward, or backward when `backward`); the frame fills the rest. Its slots are
   * the matmul ops' of op.h: forward in: x, w, b; out: y; backward in: x, w, dy; out: dx;
   * grad: dw, db. */
  ganfw_op (*op)(const ganfw_layer *l, const int64_t *in, int64_t rows, int32_t backward);
} ganfw_matmul_kind;
/* *y: a new tensor out[0..out_ndim) in the compute dtype holding the layer's output. */
ganfw_status ganfw_matmul_forward(ganfw_layer *l, const ganfw_exec *ex, const ganfw_matmul_kind *k,
                                  ganfw_tensor *x, int32_t out_ndim, const int64_t *out,
                                  ganfw_tensor **y, ganfw_saved *saved);
/* The layer's backward (ganfw_layer_vt's contract) from the x forward kept. */
ganfw_status ganfw_matmul_backward(ganfw_layer *l, const ganfw_exec *ex, const ganfw_matmul_kind *k,
                                   ganfw_saved *saved, ganfw_tensor *dy, ganfw_tensor **dx,
                                   int32_t param_grads, int32_t accumulate);

/* The double backward of a matmul layer (ganfw_layer_vt.backward2): *du = the op's forward of
 * u[0] without bias, and with param_grads the weight gradient of u[0] against dy added
 * (through spectral norm's chain when the layer has it). */
ganfw_status ganfw_matmul_backward2(ganfw_layer *l, const ganfw_exec *ex,
                                    const ganfw_matmul_kind *k, ganfw_saved *saved,
                                    ganfw_tensor *dy, ganfw_tensor *const *u, ganfw_tensor **du,
                                    int32_t param_grads);

/* f32 arithmetic for the double-backward members (layer_grad2.c): each call runs one backend
 * op through ganfw_layer_op on f32 device buffers, and does nothing once c->st holds an
 * error, so that a member writes its formula as a list of calls and checks c->st once.
 * Buffers from ganfw_g2_buf are released by ganfw_g2_end. */
#define GANFW_G2_MAX 24
typedef struct ganfw_g2 {
  ganfw_layer *l;
  const ganfw_exec *ex;
  ganfw_status st;
  ganfw_tensor *t[GANFW_G2_MAX];
  int32_t n;
} ganfw_g2;
/* An f32 workspace buffer of n floats (NULL once c->st holds an error). */
float *ganfw_g2_buf(ganfw_g2 *c, int64_t n);
/* t's values as f32: t's own data when it is f32, else a converted workspace copy. */
float *ganfw_g2_f32(ganfw_g2 *c, ganfw_tensor *t);
/* A new f32 tensor (category activation) of `like`'s shape (the caller owns it), or NULL. */
ganfw_tensor *ganfw_g2_tensor(ganfw_g2 *c, const ganfw_tensor *like);
/* Over R rows of m values: out = a op b (GANFW_BINARY_*), where a and b are [R,m] or, with
 * a_col / b_col 1, [R,1] broadcast along the row. out is [R,m] and may be a [R,m] operand. */
void ganfw_g2_bin(ganfw_g2 *c, int32_t op, int64_t R, int64_t m, float *out, const float *a,
                  int32_t a_col, const float *b, int32_t b_col);
/* out[r] = scale * sum of x[r][0..m) (out [R]). */
void ganfw_g2_rowsum(ganfw_g2 *c, int64_t R, int64_t m, double scale, const float *x, float *out);
/* out = f(x) over n values (GANFW_UNARY_*, scalars a, b); out may be x. */
void ganfw_g2_unary(ganfw_g2 *c, int32_t f, int64_t n, float *out, const float *x, float a,
                    float b);
/* y += v * a * b over n values. */
void ganfw_g2_addcmul(ganfw_g2 *c, int64_t n, float *y, float v, const float *a, const float *b);
/* Releases the buffers; returns c->st. */
ganfw_status ganfw_g2_end(ganfw_g2 *c);
/* backward2 of a layer whose forward is linear in its inputs and reads no parameter and no
 * random draw (reshape, global_avg_pool, add, concat, upsample, pixel shuffle): the
 * linearisation is the forward itself, run in f32 on u without a tape; no ax, no parameter
 * gradients. */
/* backward2_reads_dy of the layers whose backward2 does not read dy: 0. */
int32_t ganfw_layer_backward2_no_dy(const ganfw_layer *l);
ganfw_status ganfw_layer_backward2_by_forward(ganfw_layer *l, const ganfw_exec *ex,
                                              ganfw_saved *saved, ganfw_tensor *dy, int32_t n,
                                              ganfw_tensor *const *u, ganfw_tensor **du,
                                              ganfw_tensor **ax, int32_t param_grads);

/* *acc += g for the executor's gradients of a node that feeds several others
 * (layers/join.c): in place when the executor holds the only reference to *acc, else *acc
 * is replaced by a new tensor holding the sum (in the compute dtype). l names the node. */
ganfw_status ganfw_join_accumulate(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor **acc,
                                   ganfw_tensor *g);

extern const ganfw_layer_vt ganfw_layer_embedding;

/* Spectral norm inside conv2d, conv_transpose2d and linear (layers/spectral_norm.c); each
 * call does nothing for a layer whose sn.n_power_iterations is 0.
 *   init: after the layer created its weight; creates u and v, N(0, 1) normalised, as
 *     PyTorch does (from the context's Philox stream).
 *   forward_begin: power iterations on u and v when ex->update_stats (a training forward
 *     whose running statistics count; none in eval or in a checkpoint re-run), then sigma =
 *     u^T W_mat v and sn.w_eff = W / sigma. With a tape, saved->t[1] gets a copy of u and v
 *     ([h + A*B] f32, category activation: another forward may move them before this
 *     backward) and saved->value sigma. Transient workspace: W_mat (conv_transpose2d only),
 *     then w_eff, both the weight's size, and a vector of h.
 *   backward_begin: sn.w_eff again from the saved sigma; with param_grads, *dw is where the
 *     layer's kernel writes the gradient G of w_eff (grad[0] itself when it can be, else a
 *     workspace the weight's size, zeroed when `accumulate`: the kernel keeps its own
 *     accumulate flag for the bias). backward_end turns G into weight_orig's gradient as
 *     PyTorch's autograd does with u and v constant, dW = (G - <G, w_eff> u v^T) / sigma
 *     (through W_mat's layout), written to or added to grad[0]; it releases what begin
 *     made, and so does release on an error path. */
ganfw_status ganfw_spectral_init(ganfw_layer *l, int32_t dim);
ganfw_status ganfw_spectral_forward_begin(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved);
ganfw_status ganfw_spectral_backward_begin(ganfw_layer *l, const ganfw_exec *ex,
                                           const ganfw_saved *saved, int32_t param_grads,
                                           int32_t accumulate, float **dw);
ganfw_status ganfw_spectral_backward_end(ganfw_layer *l, const ganfw_exec *ex,
                                         const ganfw_saved *saved, int32_t param_grads,
                                         int32_t accumulate);
void ganfw_spectral_release(ganfw_layer *l);

/* Pruning masks inside conv2d, conv_transpose2d and linear (layers/mask.c); the begin, end
 * and release calls do nothing for a layer without a mask.
 *   install: gives the layer an all-ones mask (a no-op when it has one): renames parameter 0
 *     to "<layer>.weight_orig" and appends the buffer "<layer>.weight_mask" (f32, category
 *     param). Refused, naming the layer, for a layer that is not a matmul layer or that is
 *     spectrally normalised.
 *   remove: weight_orig * mask becomes parameter 0 again, named "<layer>.weight"; the mask
 *     buffer is freed (torch.nn.utils.prune.remove). A no-op without a mask.
 *   forward_begin: mask.w_eff = weight_orig * mask (workspace, the weight's size).
 *   backward_begin: mask.w_eff again; with param_grads, *dw is where the kernel writes the
 *     gradient G of w_eff: grad[0] itself without `accumulate`, else a zeroed workspace the
 *     weight's size. backward_end multiplies G by the mask into grad[0] (written or added),
 *     and releases what begin made; so does release on an error path. */
ganfw_status ganfw_mask_install(ganfw_layer *l);
ganfw_status ganfw_mask_remove(ganfw_layer *l);
ganfw_status ganfw_mask_forward_begin(ganfw_layer *l, const ganfw_exec *ex);
ganfw_status ganfw_mask_backward_begin(ganfw_layer *l, const ganfw_exec *ex, int32_t param_grads,
                                       int32_t accumulate, float **dw);
ganfw_status ganfw_mask_backward_end(ganfw_layer *l, const ganfw_exec *ex, int32_t param_grads,
                                     int32_t accumulate);
void ganfw_mask_release(ganfw_layer *l);
/* Frees the names install kept (layer destruction). */
void ganfw_mask_free_names(ganfw_layer *l);
/* The mask tensor of l (f32, the weight's shape), or NULL without one. */
static inline ganfw_tensor *ganfw_layer_mask(const ganfw_layer *l) {
  return l->mask.on ? l->extra[l->mask.extra] : NULL;
}

/* Layers defined by plugins (layers/plugin_layer.c, ganfw_layer_def in ganfw/host.h): an
 * adapter from the layer vtable to the plugin's callbacks. It hands the plugin f32 tensors
 * (converting a 16-bit compute dtype around each call), keeps the input and output for
 * backward when the def asks, owns the tensors the plugin saves, and checks after each call
 * that what the plugin created through host->tensor_create matches its saved_bytes and
 * workspace_bytes (an error names the node and both figures). */
extern const ganfw_layer_vt ganfw_layer_plugin;
/* Makes l (just appended with ganfw_layer_plugin) a layer of kind *def with `state`: checks
 * and copies def. Owns state from here on: on failure it is freed with def->destroy (when
 * set) and the caller destroys l. */
ganfw_status ganfw_plugin_layer_attach(ganfw_layer *l, const ganfw_layer_def *def, void *state);
/* The def's keep flags (GANFW_KEEP_INPUT | GANFW_KEEP_OUTPUT) of a plugin layer. */
int32_t ganfw_plugin_layer_keep(const ganfw_layer *l);
/* Frees state as def says (def->destroy), for a net_custom that failed before attaching. */
void ganfw_plugin_layer_discard(const ganfw_layer_def *def, void *state);
/* host->layer_add_param (buffer 0) and layer_add_buffer (buffer 1). */
ganfw_status ganfw_plugin_layer_add_tensor(ganfw_layer_init *li, int32_t buffer, const char *name,
                                           int32_t ndim, const int64_t *shape, ganfw_tensor **out);
/* The host table's tensor_create and tensor_destroy report to these (plugin/host.c): inside a
 * plugin layer's call on this thread they count the tensors it creates and destroys. A
 * destroy of a tensor the call did not create is refused (0: do not destroy; the call then
 * fails naming the tensor); 1 otherwise. Outside a call both do nothing. */
void ganfw_plugin_layer_note_create(ganfw_tensor *t);
int32_t ganfw_plugin_layer_note_destroy(ganfw_tensor *t);

/* The normalisation shared by groupnorm, instancenorm2d and layernorm (layers/groupnorm.c):
 * the input seen as [N,C,HW] (N its first dimension) in G groups, normalised per sample and
 * group by the backend's groupnorm_forward, then scaled and shifted by parameters 0 and 1
 * (weight and bias of C values; absent: affine=False). Train and eval behave the same (no
 * running statistics). With a tape, forward keeps x (a reference) and the statistics, one
 * tensor of 2*N*G doubles (means, then 1/std; 16*N*G bytes): the whole of what the layer
 * adds for backward. Outputs and input gradients are stored in the compute dtype; the kernels
 * run in f32 over row chunks (ganfw_layer_rows_run), the parameters stay f32. */
typedef struct ganfw_norm_view {
  int64_t C, HW, G;
  float eps;
} ganfw_norm_view;
ganfw_status ganfw_norm_forward(ganfw_layer *l, const ganfw_exec *ex, const ganfw_norm_view *v,
                                ganfw_tensor *x, ganfw_tensor **y, ganfw_saved *saved);
ganfw_status ganfw_norm_backward(ganfw_layer *l, const ganfw_exec *ex, const ganfw_norm_view *v,
                                 ganfw_saved *saved, ganfw_tensor *dy, ganfw_tensor **dx,
                                 int32_t param_grads, int32_t accumulate);
/* The normalisation's double backward (ganfw_layer_vt.backward2), for groupnorm,
 * instancenorm2d and layernorm alike. */
ganfw_status ganfw_norm_backward2(ganfw_layer *l, const ganfw_exec *ex, const ganfw_norm_view *v,
                                  ganfw_saved *saved, ganfw_tensor *dy, ganfw_tensor *const *u,
                                  ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads);
/* Adds the affine parameters "weight" (ones) and "bias" (zeros) of shape shape[0..ndim), as
 * PyTorch's reset_parameters does. */
ganfw_status ganfw_norm_add_affine(ganfw_layer *l, int32_t ndim, const int64_t *shape);

/* Helpers for layer implementations (layer.c). */
/* Runs op (backend/op.h) on ex's backend: every op a layer computes goes through here, and
 * its status comes back out of the layer's forward or backward. A failure is wrapped with
 * the layer's name ("layer generator.main.3: ..."). */
ganfw_status ganfw_layer_op(const ganfw_layer *l, const ganfw_exec *ex, ganfw_op *op);
/* x[0..n) = v (f32, device memory of ex's backend), by ganfw_layer_op. */
ganfw_status ganfw_layer_fill(const ganfw_layer *l, const ganfw_exec *ex, int64_t n, void *x,
                              float v);
/* The exec of a layer's init: the net's context and backend, outside any pass. */
static inline ganfw_exec ganfw_layer_init_exec(const ganfw_layer *l) {
  ganfw_exec ex = {.ctx = l->ctx, .be = l->ctx->be};
  return ex;
}
/* "a.b", malloc'ed (the caller frees it); NULL when out of memory. */
char *ganfw_name_join(const char *a, const char *b);
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

/* The compute-dtype boundary of a layer (layer_dtype.c). Kernels read and write f32; a
 * layer's tensors may be f32, f16 or bf16. Around one kernel call a layer collects its f32
 * buffers in a ganfw_layer_scratch: with every tensor f32 they are the tensors' own memory
 * (no copy, no allocation); otherwise they are workspace tensors that hold the converted
 * values. Usage:
 *   ganfw_layer_scratch sc = {0};
 *   const float *xf = ganfw_layer_f32_in(l, ex, &sc, x);     (NULL: failed, error set)
 *   float *yf = xf ? ganfw_layer_f32_out(l, ex, &sc, y) : NULL;
 *   if (!yf) { ganfw_layer_scratch_release(&sc); ...; return ganfw_error_code(); }
 *   st = op(xf, yf);                                         (ganfw_layer_op)
 *   if (st == GANFW_OK) st = ganfw_layer_store_out(l, ex, &sc); (converts into y, releases)
 *   else ganfw_layer_scratch_release(&sc); */
#define GANFW_LAYER_SCRATCH_MAX 8
typedef struct ganfw_layer_scratch {
  ganfw_tensor *t[GANFW_LAYER_SCRATCH_MAX];   /* f32 workspace tensors, released together */
  ganfw_tensor *out[GANFW_LAYER_SCRATCH_MAX]; /* where t[i] is stored by store_out, or NULL */
  int32_t n;
} ganfw_layer_scratch;
/* The values of t (f32, f16 or bf16) as f32 for a kernel: t's own memory when t is f32,
 * else a workspace copy that the kernel may also overwrite. NULL on failure. */
float *ganfw_layer_f32_in(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                          ganfw_tensor *t);
/* Where a kernel writes the f32 values of `out` (f32, f16 or bf16): out's own memory when
 * out is f32, else a workspace buffer that ganfw_layer_store_out converts into out. NULL on
 * failure. */
float *ganfw_layer_f32_out(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                           ganfw_tensor *out);
/* The parameters of a matmul layer (conv, conv-transpose, linear) as its kernel uses them:
 * the f32 masters when the compute dtype is f32, else one workspace copy rounded to the
 * compute dtype (f32 -> f16/bf16 -> f32), so that the kernel computes with f16/bf16 inputs
 * and f32 accumulation. p[i] is NULL for an absent parameter. */
ganfw_status ganfw_layer_f32_params(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                                    const float *p[GANFW_LAYER_MAX_PARAMS]);
/* Converts every buffer from ganfw_layer_f32_out into its tensor, then releases the
 * scratch (also on failure); the first conversion's failure, if any. */
ganfw_status ganfw_layer_store_out(const ganfw_layer *l, const ganfw_exec *ex,
                                   ganfw_layer_scratch *sc);
/* Releases the scratch without storing (an error path). */
void ganfw_layer_scratch_release(ganfw_layer_scratch *sc);

/* Native 16-bit compute: with a 16-bit compute dtype and a backend that supports a layer's
 * group (GANFW_LP_*, backend.h; ganfw_be_lp_ops) in it, the layer runs its ops in that dtype
 * on the whole batch instead: its 16-bit tensors as they are, no f32 copies. Scratch use as
 * above (ganfw_layer_scratch_release frees the copies these make). */
/* 1 when ex's compute dtype is f16/bf16 and the backend runs `group` natively in it. */
int32_t ganfw_layer_lp(const ganfw_exec *ex, uint32_t group);
/* ganfw_layer_lp for a matmul layer (conv, conv-transpose, linear) with input x: 0 also when
 * x is f32 (the data batch, the noise), which the converting path reads unrounded. Rounding
 * it (as PyTorch's autocast does) costs digits that later layers can amplify: 10x in dx
 * through a pixel norm's backward (tests/test_plugin_layer.c). */
int32_t ganfw_layer_lp_matmul(const ganfw_exec *ex, uint32_t group, const ganfw_tensor *x);
/* t's data in the compute dtype: t's own memory when it has that dtype (activations), else
 * a workspace copy converted to it (an f32 input such as the data batch). NULL on failure. */
void *ganfw_layer_lp_in(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                        ganfw_tensor *t);
/* Parameter i (f32 master) rounded to the compute dtype in a workspace copy, or NULL. */
void *ganfw_layer_lp_param(ganfw_layer *l, const ganfw_exec *ex, ganfw_layer_scratch *sc,
                           int32_t i);

/* A kernel call over rows [n0, n0 + rows) of a batch: f[i] is the f32 data of those rows of
 * tensor i of ganfw_layer_rows_run's list (NULL for a NULL tensor). */
typedef ganfw_status (*ganfw_layer_rows_fn)(ganfw_layer *l, const ganfw_exec *ex, void *arg,
                                            int64_t n0, int64_t rows, float *const *f);
#define GANFW_LAYER_ROWS_MAX 4
/* Bytes of f32 copies one chunk of ganfw_layer_rows_run may convert at a time. */
#define GANFW_LAYER_CHUNK_BYTES ((int64_t)2 << 20)
/* Runs fn over a batch whose tensors t[0..n) all have the batch first (inputs t[0..n_in),
 * then outputs; NULL entries allowed). With every tensor f32, fn runs once on all rows and
 * the tensors' own memory. Otherwise the rows go in equal chunks whose f32 copies stay
 * within GANFW_LAYER_CHUNK_BYTES (at least one row), each converted in, computed and
 * converted out before the next, so that converting a 16-bit batch never holds a full f32
 * copy of it. fn must be row-separable for its outputs (parameter gradients accumulate over
 * the chunks: n0 > 0 means add). */
ganfw_status ganfw_layer_rows_run(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *const *t,
                                  int32_t n_in, int32_t n, ganfw_layer_rows_fn fn, void *arg);
/* A kernel call over channels [c0, c0 + channels) of [N,C,H,W] tensors: f[i] holds those
 * channels of tensor i compactly, [N,channels,H,W] (NULL for a NULL tensor). */
typedef ganfw_status (*ganfw_layer_channels_fn)(ganfw_layer *l, const ganfw_exec *ex, void *arg,
                                                int64_t c0, int64_t channels, float *const *f);
/* ganfw_layer_rows_run for per-channel kernels (BatchNorm, whose statistics span the
 * batch): with every tensor f32, fn runs once on all channels and the tensors' own memory;
 * otherwise each chunk of channels is gathered into compact f32 copies within
 * GANFW_LAYER_CHUNK_BYTES (at least one channel), computed, and the outputs scattered back
 * converted. */
ganfw_status ganfw_layer_channels_run(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *const *t,
                                      int32_t n_in, int32_t n, ganfw_layer_channels_fn fn,
                                      void *arg);

#endif
