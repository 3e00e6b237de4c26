/* Nets and the executor (see net.h): building a graph of named nodes from layer
 * descriptions, forward with or without a tape (each node's output released after its last
 * reader), backward that consumes the tape, adds up the gradients of a node that feeds
 * several, and frees each node's saved tensors as soon as its gradient is computed. A
 * straight net is the graph whose nodes each read the one before: the same calls in the
 * same order as a plain loop over the layers. */
#include "nn/net.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "backend/ops.h"
#include "base/suggest.h"
#include "nn/layer.h"
#include "nn/net_widths.h"
#include "runtime/alloc.h"
#include "runtime/tensor_cast.h"

struct ganfw_net {
  ganfw_ctx *ctx;
  char *name;
  ganfw_layer **layers;
  int32_t n, cap;
  int32_t built;
  int64_t in_shape[GANFW_MAX_DIMS]; /* [1,C,H,W] */
  int32_t in_ndim;
  int32_t train, update_stats;
  int32_t grads_valid;  /* 0 after zero_grad: the next backward writes the gradients */
  int32_t dtype;        /* compute dtype (GANFW_DTYPE_F32, F16, BF16): activations stored in it */
  int32_t *ckpt_starts; /* checkpoint segment starts after the first, or NULL */
  int32_t n_ckpt;
  char *next_input; /* net_input's name for the next layer appended, or NULL */
  /* Set by net_build, per node i (slot i + 1 of the value arrays; slot 0 is the net's
   * input): */
  int32_t *last_use; /* [n + 1]: the last node that reads slot s (n for the net's output) */
  int32_t *up_train; /* [n]: node i or a node upstream of it has trainable parameters, so a
                        backward without an input gradient must reach node i */
  int64_t (*shape)[GANFW_MAX_DIMS]; /* [n]: node i's output shape for a batch of 1 */
  int32_t *ndim;                    /* [n] */
  /* BatchNorm + activation pairs whose activation output a tape does not keep (see
   * release_bn_act): bn_act[b] is the activation node that alone reads the batchnorm2d node
   * b, or -1. recompute_bn_act 0 keeps every output as recorded (GANFW_BN_ACT_RECOMPUTE=0 in
   * the environment at net_create, or ganfw_net_set_bn_act_recompute; for tests and
   * benchmarks). */
  int32_t *bn_act;
  int32_t recompute_bn_act;
  ganfw_grad_hook grad_hook; /* ganfw_net_set_grad_hook, or NULL */
  void *grad_hook_user;
  /* Selective recompute (ganfw_net_recompute): rc_drop[i] 1 when node i's output is not kept
   * by a tape but recomputed in backward; rc_on 0: no plan (the BatchNorm + activation rule
   * above applies instead). */
  uint8_t *rc_drop; /* [n] */
  uint8_t *rc_need; /* [n]: a dropped node backward will recompute (see the tape's need) */
  int32_t rc_on;
  /* model.widths (ganfw_net_set_widths): copies, applied by net_build */
  ganfw_net_width *widths;
  int32_t n_widths;
};

/* The name the net's input goes by in net_input, net_add and net_concat. */
#define NET_INPUT_NAME "input"

/* The value slot of node j's output (slot 0: the net's input). */
#define SLOT(j) ((j) + 1)

struct ganfw_tape {
  ganfw_net *net;
  ganfw_saved *saved; /* one per layer */
  int32_t n;
  int32_t recorded; /* a forward was recorded and not yet consumed */
  int64_t batch;    /* the recorded forward's batch size */
  /* Checkpointed forward: n_seg segments (0 without checkpointing), each with its first
   * layer, its input (a reference) and the Philox offset at its start; n entries each. */
  int32_t n_seg;
  int32_t *seg_start;
  ganfw_tensor **seg_in;
  uint64_t *seg_rng;
  /* [n * GANFW_SAVED_MAX]: hole[i * GANFW_SAVED_MAX + k] is the activation node a whose
   * output was released from saved[i].t[k] after the forward (recomputed before node i's
   * backward), or -1. */
  int32_t *hole;
  /* A backward kept for a second one (ganfw_net_backward_keep): the gradient each node's
   * backward received (references; [n]), the saved records left in place. */
  ganfw_tensor **gy;
  int32_t kept;
  int32_t full; /* ganfw_tape_set_full: every node recorded even on a checkpointed net */
  /* A forward recorded under a recompute plan (rc 1): the plan's drop flags as they were
   * ([n]), the Philox offset before each node ran ([n]), and the values the recomputations
   * start from (val[s] for slot s, [n + 1] references: a kept value that a dropped node
   * reads), each released at its producer's backward. Holes then name the dropped node whose
   * output they held. */
  int32_t rc;
  uint8_t *drop;
  uint8_t *need; /* [n]: a dropped node whose output backward will recompute (a record holds
                    it, or a dropped node that will be recomputed reads it) */
  uint64_t *rng_at;
  ganfw_tensor **val;
};

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

ganfw_net *ganfw_net_create(ganfw_ctx *ctx, const char *name) {
  ganfw_net *net = calloc(1, sizeof *net);
  if (!net || !(net->name = dup_str(name ? name : "net"))) {
    free(net);
    ganfw_error_set(GANFW_ERR_OOM, "out of host memory creating net '%s'", name ? name : "");
    return NULL;
  }
  net->ctx = ctx;
  net->train = 1;
  net->update_stats = 1;
  const char *env = getenv("GANFW_BN_ACT_RECOMPUTE");
  net->recompute_bn_act = !(env && strcmp(env, "0") == 0);
  return net;
}

static void layer_destroy(ganfw_layer *l) {
  if (!l) return;
  if (l->vt->release) l->vt->release(l);
  ganfw_mask_release(l);
  ganfw_mask_free_names(l); /* param_name[0] is one of its names */
  for (int32_t i = 0; i < GANFW_LAYER_MAX_PARAMS; i++) {
    ganfw_tensor_destroy(l->param[i]);
    ganfw_tensor_destroy(l->grad[i]);
    free(l->param_name[i]);
  }
  ganfw_batchnorm_args *bn = ganfw_batchnorm_of(l);
  if (bn) {
    ganfw_tensor_destroy(bn->running_mean);
    ganfw_tensor_destroy(bn->running_var);
    for (int i = 0; i < 3; i++) free(bn->buffer_name[i]);
  }
  for (int32_t k = 0; k < GANFW_NODE_MAX_INPUTS; k++) free(l->in_name[k]);
  for (int32_t i = 0; i < GANFW_LAYER_MAX_EXTRA; i++) {
    ganfw_tensor_destroy(l->extra[i]);
    free(l->extra_name[i]);
  }
  ganfw_spectral_release(l);
  free(l->name);
  free(l->qualified);
  free(l);
}

static void widths_free(ganfw_net *net) {
  for (int32_t i = 0; i < net->n_widths; i++) {
    free((char *)net->widths[i].layer);
    free((char *)net->widths[i].where);
  }
  free(net->widths);
  net->widths = NULL;
  net->n_widths = 0;
}

ganfw_status ganfw_net_set_widths(ganfw_net *net, const ganfw_net_width *w, int32_t n) {
  if (net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: widths set after net_build", net->name);
  widths_free(net);
  if (n <= 0) return GANFW_OK;
  if (!(net->widths = calloc((size_t)n, sizeof *net->widths)))
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  net->n_widths = n;
  for (int32_t i = 0; i < n; i++) {
    net->widths[i].width = w[i].width;
    net->widths[i].layer = dup_str(w[i].layer ? w[i].layer : "");
    net->widths[i].where = dup_str(w[i].where ? w[i].where : "model.widths");
    if (!net->widths[i].layer || !net->widths[i].where) {
      widths_free(net);
      return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    }
  }
  return GANFW_OK;
}

ganfw_layer *ganfw_net_layer_at(ganfw_net *net, int32_t i) {
  return net && i >= 0 && i < net->n ? net->layers[i] : NULL;
}

int32_t ganfw_net_node_shape(const ganfw_net *net, int32_t i, int64_t *shape, int32_t *ndim) {
  if (!net || !net->built || i < -1 || i >= net->n) return -1;
  memcpy(shape, i < 0 ? net->in_shape : net->shape[i], sizeof(int64_t) * GANFW_MAX_DIMS);
  *ndim = i < 0 ? net->in_ndim : net->ndim[i];
  return 0;
}

void ganfw_net_destroy(ganfw_net *net) {
  if (!net) return;
  for (int32_t i = 0; i < net->n; i++) layer_destroy(net->layers[i]);
  free(net->layers);
  free(net->ckpt_starts);
  free(net->next_input);
  free(net->last_use);
  free(net->up_train);
  free(net->shape);
  free(net->ndim);
  free(net->bn_act);
  free(net->rc_drop);
  free(net->rc_need);
  widths_free(net);
  free(net->name);
  free(net);
}

/* Appends a node of type vt with its arguments (NULL: none) that reads the nodes named
 * inputs[0..n_in) (NULL entries: the node appended before); inputs NULL: one input, the node
 * net_input named or else the one appended before. */
static ganfw_status add_node(ganfw_net *net, const ganfw_layer_vt *vt, const char *name,
                             const ganfw_layer_args *args, const char *const *inputs,
                             int32_t n_in) {
  if (net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: layer '%s' added after net_build; add every layer first",
                           net->name, name ? name : "");
  char index_name[32];
  if (!name || !*name) {
    snprintf(index_name, sizeof index_name, "%d", net->n);
    name = index_name;
  }
  if (strcmp(name, NET_INPUT_NAME) == 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: a layer cannot be named '%s': that name is the net's input",
                           net->name, NET_INPUT_NAME);
  for (int32_t i = 0; i < net->n; i++)
    if (strcmp(net->layers[i]->name, name) == 0)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: two layers are named '%s'", net->name,
                             name);
  if (net->n == net->cap) {
    int32_t cap = net->cap ? net->cap * 2 : 16;
    ganfw_layer **layers = realloc(net->layers, (size_t)cap * sizeof *layers);
    if (!layers) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    net->layers = layers;
    net->cap = cap;
  }
  ganfw_layer *l = calloc(1, sizeof *l);
  if (!l) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  l->vt = vt;
  l->net = net;
  l->ctx = net->ctx;
  l->trainable = 1;
  l->name = dup_str(name);
  l->qualified = ganfw_name_join(net->name, name);
  if (!l->name || !l->qualified) {
    layer_destroy(l);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  if (args) l->args = *args;
  l->n_in = inputs ? n_in : 1;
  if (!inputs) { /* the one input: net_input's name, handed over */
    l->in_name[0] = net->next_input;
    net->next_input = NULL;
  }
  for (int32_t k = 0; inputs && k < n_in; k++)
    if (inputs[k] && !(l->in_name[k] = dup_str(inputs[k]))) {
      layer_destroy(l);
      return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    }
  net->layers[net->n++] = l;
  return GANFW_OK;
}

static ganfw_status add_layer(ganfw_net *net, const ganfw_layer_vt *vt, const char *name,
                              const ganfw_layer_args *args) {
  return add_node(net, vt, name, args, NULL, 1);
}

ganfw_status ganfw_net_append(ganfw_net *net, const ganfw_layer_vt *vt, const char *name,
                              ganfw_layer **out) {
  ganfw_status st = add_layer(net, vt, name, NULL);
  *out = st == GANFW_OK ? net->layers[net->n - 1] : NULL;
  return st;
}

ganfw_status ganfw_net_input(ganfw_net *net, const char *from) {
  if (net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: net_input after net_build", net->name);
  if (!from || !*from)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: net_input needs a node name (a layer, or '%s')", net->name,
                           NET_INPUT_NAME);
  char *d = dup_str(from);
  if (!d) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  free(net->next_input);
  net->next_input = d;
  return GANFW_OK;
}

/* add and concat: n >= 2 inputs. */
static ganfw_status add_join(ganfw_net *net, const ganfw_layer_vt *vt, const char *name,
                             const char *const *inputs, int32_t n) {
  if (n < 2 || n > GANFW_NODE_MAX_INPUTS || !inputs)
    return ganfw_error_set(
        GANFW_ERR_INVALID_ARG, "net %s, layer %s: %s takes 2 to %d inputs, got %d%s", net->name,
        name ? name : "?", vt->type, GANFW_NODE_MAX_INPUTS, (int)n, inputs ? "" : " and no names");
  if (net->next_input)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: net_input('%s') before a %s, which names its "
                           "inputs itself; drop the net_input call",
                           net->name, name ? name : "?", net->next_input, vt->type);
  return add_node(net, vt, name, NULL, inputs, n);
}

ganfw_status ganfw_net_add(ganfw_net *net, const char *name, const char *const *inputs, int32_t n) {
  return add_join(net, &ganfw_layer_add, name, inputs, n);
}

ganfw_status ganfw_net_concat(ganfw_net *net, const char *name, const char *const *inputs,
                              int32_t n) {
  return add_join(net, &ganfw_layer_concat, name, inputs, n);
}

static ganfw_status positive(ganfw_net *net, const char *name, const char *what, int64_t v) {
  if (v > 0) return GANFW_OK;
  return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s, layer %s: %s must be positive, got %lld",
                         net->name, name ? name : "?", what, (long long)v);
}

ganfw_status ganfw_net_conv2d(ganfw_net *net, const char *name, int64_t in_channels,
                              int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
                              int32_t bias) {
  ganfw_status st;
  if ((st = positive(net, name, "in_channels", in_channels)) ||
      (st = positive(net, name, "out_channels", out_channels)) ||
      (st = positive(net, name, "kernel", kernel)) || (st = positive(net, name, "stride", stride)))
    return st;
  const ganfw_layer_args a = {.conv = {.in_channels = in_channels,
                                       .out_channels = out_channels,
                                       .kernel = kernel,
                                       .stride = stride,
                                       .padding = padding,
                                       .bias = bias != 0}};
  return add_layer(net, &ganfw_layer_conv2d, name, &a);
}

ganfw_status ganfw_net_conv_transpose2d(ganfw_net *net, const char *name, int64_t in_channels,
                                        int64_t out_channels, int64_t kernel, int64_t stride,
                                        int64_t padding, int64_t output_padding, int32_t bias) {
  ganfw_status st;
  if ((st = positive(net, name, "in_channels", in_channels)) ||
      (st = positive(net, name, "out_channels", out_channels)) ||
      (st = positive(net, name, "kernel", kernel)) || (st = positive(net, name, "stride", stride)))
    return st;
  const ganfw_layer_args a = {.conv = {.in_channels = in_channels,
                                       .out_channels = out_channels,
                                       .kernel = kernel,
                                       .stride = stride,
                                       .padding = padding,
                                       .output_padding = output_padding,
                                       .bias = bias != 0}};
  return add_layer(net, &ganfw_layer_conv_transpose2d, name, &a);
}

ganfw_status ganfw_net_linear(ganfw_net *net, const char *name, int64_t in_features,
                              int64_t out_features, int32_t bias) {
  ganfw_status st;
  if ((st = positive(net, name, "in_features", in_features)) ||
      (st = positive(net, name, "out_features", out_features)))
    return st;
  const ganfw_layer_args a = {
      .linear = {.in_features = in_features, .out_features = out_features, .bias = bias != 0}};
  return add_layer(net, &ganfw_layer_linear, name, &a);
}

ganfw_status ganfw_net_batchnorm2d(ganfw_net *net, const char *name, int64_t channels, float eps,
                                   float momentum) {
  ganfw_status st = positive(net, name, "channels", channels);
  if (st) return st;
  if (!(eps > 0) || !(momentum >= 0 && momentum <= 1))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: batchnorm2d needs eps > 0 and 0 <= momentum <= 1",
                           net->name, name ? name : "?");
  const ganfw_layer_args a = {
      .batchnorm = {.channels = channels, .eps = eps, .momentum = momentum}};
  return add_layer(net, &ganfw_layer_batchnorm2d, name, &a);
}

ganfw_status ganfw_net_activation(ganfw_net *net, const char *name, int32_t kind, float alpha) {
  if (kind < 0 || kind >= GANFW_ACT_COUNT || (kind == GANFW_ACT_LEAKY_RELU && !(alpha >= 0)))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: unknown activation %d or negative slope", net->name,
                           name ? name : "?", (int)kind);
  const ganfw_layer_args a = {.activation = {.kind = kind, .alpha = alpha}};
  return add_layer(net, &ganfw_layer_activation, name, &a);
}

ganfw_status ganfw_net_pool2d(ganfw_net *net, const char *name, int32_t kind, int64_t kernel,
                              int64_t stride, int64_t padding) {
  ganfw_status st;
  if ((st = positive(net, name, "kernel", kernel)) || (st = positive(net, name, "stride", stride)))
    return st;
  if (kind < 0 || kind >= GANFW_POOL_COUNT || padding < 0 || 2 * padding > kernel)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: pooling needs kind max or avg and 0 <= padding <= "
                           "kernel/2",
                           net->name, name ? name : "?");
  const ganfw_layer_args a = {
      .pool = {.kind = kind, .kernel = kernel, .stride = stride, .padding = padding}};
  return add_layer(net, &ganfw_layer_pool2d, name, &a);
}

ganfw_status ganfw_net_dropout(ganfw_net *net, const char *name, float p) {
  if (!(p >= 0 && p < 1))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s, layer %s: dropout p must be in [0, 1)",
                           net->name, name ? name : "?");
  const ganfw_layer_args a = {.dropout = {.p = p}};
  return add_layer(net, &ganfw_layer_dropout, name, &a);
}

ganfw_status ganfw_net_flatten(ganfw_net *net, const char *name) {
  const ganfw_layer_args a = {.reshape = {.flatten = 1}};
  return add_layer(net, &ganfw_layer_reshape, name, &a);
}

ganfw_status ganfw_net_reshape(ganfw_net *net, const char *name, int64_t c, int64_t h, int64_t w) {
  ganfw_status st;
  if ((st = positive(net, name, "c", c)) || (st = positive(net, name, "h", h)) ||
      (st = positive(net, name, "w", w)))
    return st;
  const ganfw_layer_args a = {.reshape = {.flatten = 0, .c = c, .h = h, .w = w}};
  return add_layer(net, &ganfw_layer_reshape, name, &a);
}

ganfw_status ganfw_net_upsample(ganfw_net *net, const char *name, int64_t scale, int32_t mode) {
  if (scale != 2 || mode < 0 || mode >= GANFW_UPSAMPLE_COUNT)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: upsample takes scale 2 and mode nearest (%d) or "
                           "bilinear (%d), got scale %lld and mode %d",
                           net->name, name ? name : "?", GANFW_UPSAMPLE_NEAREST,
                           GANFW_UPSAMPLE_BILINEAR, (long long)scale, (int)mode);
  const ganfw_layer_args a = {.upsample = {.mode = mode}};
  return add_layer(net, &ganfw_layer_upsample, name, &a);
}

ganfw_status ganfw_net_global_avg_pool(ganfw_net *net, const char *name) {
  return add_layer(net, &ganfw_layer_global_avg_pool, name, NULL);
}

/* eps of a normalisation layer: PyTorch's default is 1e-5. */
static ganfw_status norm_eps(ganfw_net *net, const char *name, const char *type, float eps) {
  if (eps > 0 && eps < 1) return GANFW_OK;
  return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                         "net %s, layer %s: %s needs eps in (0, 1) (PyTorch's default 1e-5), got "
                         "%g",
                         net->name, name ? name : "?", type, (double)eps);
}

ganfw_status ganfw_net_groupnorm(ganfw_net *net, const char *name, int64_t groups, int64_t channels,
                                 float eps, int32_t affine) {
  ganfw_status st;
  if ((st = positive(net, name, "groups", groups)) ||
      (st = positive(net, name, "channels", channels)) ||
      (st = norm_eps(net, name, "groupnorm", eps)))
    return st;
  if (channels % groups != 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: groupnorm's %lld channels do not split into %lld "
                           "groups; use a number of groups that divides the channels",
                           net->name, name ? name : "?", (long long)channels, (long long)groups);
  const ganfw_layer_args a = {
      .groupnorm = {.groups = groups, .channels = channels, .eps = eps, .affine = affine != 0}};
  return add_layer(net, &ganfw_layer_groupnorm, name, &a);
}

ganfw_status ganfw_net_instancenorm2d(ganfw_net *net, const char *name, int64_t channels, float eps,
                                      int32_t affine) {
  ganfw_status st;
  if ((st = positive(net, name, "channels", channels)) ||
      (st = norm_eps(net, name, "instancenorm2d", eps)))
    return st;
  const ganfw_layer_args a = {
      .instancenorm = {.channels = channels, .eps = eps, .affine = affine != 0}};
  return add_layer(net, &ganfw_layer_instancenorm2d, name, &a);
}

ganfw_status ganfw_net_layernorm(ganfw_net *net, const char *name, int32_t ndim,
                                 const int64_t *shape, float eps, int32_t affine) {
  if (ndim < 1 || ndim > 3 || !shape)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: layernorm normalises a sample of 1 to 3 dims ([F] "
                           "or [C,H,W]), got %d dims%s",
                           net->name, name ? name : "?", (int)ndim, shape ? "" : " and no shape");
  ganfw_status st = norm_eps(net, name, "layernorm", eps);
  for (int32_t d = 0; d < ndim && st == GANFW_OK; d++)
    st = positive(net, name, "every dim of the normalised shape", shape[d]);
  if (st != GANFW_OK) return st;
  ganfw_layer_args a = {
      .layernorm = {.ndim = ndim, .shape = {1, 1, 1}, .eps = eps, .affine = affine != 0}};
  for (int32_t d = 0; d < ndim; d++) a.layernorm.shape[d] = shape[d];
  return add_layer(net, &ganfw_layer_layernorm, name, &a);
}

ganfw_status ganfw_net_custom(ganfw_net *net, const char *name, const ganfw_layer_def *def,
                              void *state) {
  ganfw_status st = add_layer(net, &ganfw_layer_plugin, name, NULL);
  if (st != GANFW_OK) {
    ganfw_plugin_layer_discard(def, state);
    return st;
  }
  ganfw_layer *l = net->layers[net->n - 1];
  st = ganfw_plugin_layer_attach(l, def, state);
  if (st != GANFW_OK) { /* nothing appended: a pending net_input stays pending */
    net->n--;
    net->next_input = l->in_name[0];
    l->in_name[0] = NULL;
    layer_destroy(l);
  }
  return st;
}

/* The index of the layer named `name`, -1 for the net's input, -2 when none has it. */
static int32_t node_index(const ganfw_net *net, const char *name) {
  if (strcmp(name, NET_INPUT_NAME) == 0) return -1;
  for (int32_t i = 0; i < net->n; i++)
    if (strcmp(net->layers[i]->name, name) == 0) return i;
  return -2;
}

/* " (did you mean 'main.1'?)" for a name no node has, or "". */
static void near_name(const ganfw_net *net, const char *typed, char *buf, size_t cap) {
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (int32_t i = -1; i < net->n; i++) {
    const char *name = i < 0 ? NET_INPUT_NAME : net->layers[i]->name;
    size_t d = ganfw_edit_distance(typed, name);
    if (d < best_d) best_d = d, best = name;
  }
  buf[0] = 0;
  if (best && ganfw_suggest_near(strlen(typed), best_d))
    snprintf(buf, cap, " (did you mean '%s'?)", best);
}

ganfw_status ganfw_net_insert_custom(ganfw_net *net, const char *after, const char *name,
                                     const ganfw_layer_def *def, void *state) {
  const int32_t a = after && !net->built && !net->next_input ? node_index(net, after) : -2;
  if (a == -2) {
    ganfw_plugin_layer_discard(def, state);
    char hint[96] = "";
    if (after && !net->built) near_name(net, after, hint, sizeof hint);
    return net->built ? ganfw_error_set(GANFW_ERR_INVALID_ARG,
                                        "net %s: layer '%s' inserted after net_build", net->name,
                                        name ? name : "")
           : net->next_input
               ? ganfw_error_set(GANFW_ERR_INVALID_ARG,
                                 "net %s: layer '%s' inserted after net_input('%s')", net->name,
                                 name ? name : "", net->next_input)
               : ganfw_error_set(GANFW_ERR_INVALID_ARG,
                                 "net %s: layer '%s' inserted after '%s', which is no node of the "
                                 "net%s",
                                 net->name, name ? name : "", after ? after : "(null)", hint);
  }
  ganfw_status st = ganfw_net_custom(net, name, def, state); /* appended, reads the node before */
  if (st != GANFW_OK) return st;
  ganfw_layer *l = net->layers[net->n - 1];
  memmove(&net->layers[a + 2], &net->layers[a + 1], (size_t)(net->n - 2 - a) * sizeof *net->layers);
  net->layers[a + 1] = l; /* it reads node a, and the node after it reads it */
  for (int32_t i = a + 2; i < net->n; i++)
    for (int32_t k = 0; k < net->layers[i]->n_in; k++) {
      char **in = &net->layers[i]->in_name[k];
      if (!*in || strcmp(*in, after) != 0) continue;
      char *d = dup_str(l->name);
      if (!d) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
      free(*in);
      *in = d;
    }
  return GANFW_OK;
}

/* 1 when node `target` is upstream of node `from` (from itself included), following the
 * resolved inputs wherever they point. */
static int32_t reaches(const ganfw_net *net, int32_t from, int32_t target) {
  uint8_t *seen = calloc((size_t)net->n, 1);
  int32_t *stack = malloc((size_t)net->n * GANFW_NODE_MAX_INPUTS * sizeof *stack + sizeof *stack);
  int32_t found = 0, top = 0;
  if (seen && stack) {
    stack[top++] = from;
    seen[from] = 1;
    while (top > 0 && !found) {
      const ganfw_layer *l = net->layers[stack[--top]];
      for (int32_t k = 0; k < l->n_in; k++) {
        int32_t j = l->in[k];
        if (j == target) found = 1;
        if (j >= 0 && !seen[j]) seen[j] = 1, stack[top++] = j;
      }
    }
  }
  free(seen);
  free(stack);
  return found;
}

/* Resolves every node's input names into indices; a name no node has, or an input from the
 * node itself or a later one (a cycle, or nodes appended out of order), is an error naming
 * the node. */
static ganfw_status resolve_inputs(ganfw_net *net) {
  for (int32_t i = 0; i < net->n; i++) {
    ganfw_layer *l = net->layers[i];
    for (int32_t k = 0; k < l->n_in; k++) {
      const char *name = l->in_name[k];
      int32_t j = name ? node_index(net, name) : i - 1;
      if (j == -2) {
        char hint[96];
        near_name(net, name, hint, sizeof hint);
        return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                               "net %s, layer %s (%s): input '%s' is no node of the net%s; name "
                               "a layer appended before it, or '%s' for the net's input",
                               net->name, l->name, l->vt->type, name, hint, NET_INPUT_NAME);
      }
      l->in[k] = j;
    }
  }
  for (int32_t i = 0; i < net->n; i++) {
    const ganfw_layer *l = net->layers[i];
    for (int32_t k = 0; k < l->n_in; k++) {
      const int32_t j = l->in[k];
      if (j < i) continue;
      if (j == i || reaches(net, j, i))
        return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                               "net %s, layer %s (%s): the graph has a cycle: it reads '%s', "
                               "which %s; a net must be acyclic, so break the loop",
                               net->name, l->name, l->vt->type, net->layers[j]->name,
                               j == i ? "is itself" : "depends on its output");
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "net %s, layer %s (%s): it reads '%s', which is appended after it; "
                             "nodes run in the order they are appended, so append '%s' first",
                             net->name, l->name, l->vt->type, net->layers[j]->name,
                             net->layers[j]->name);
    }
  }
  return GANFW_OK;
}

/* up_train from the layers' trainable parameters (net_build, net_freeze). */
static void mark_up_train(ganfw_net *net) {
  for (int32_t i = 0; i < net->n; i++) {
    const ganfw_layer *l = net->layers[i];
    int32_t up = l->nparams > 0 && l->trainable;
    for (int32_t k = 0; k < l->n_in && !up; k++) up = l->in[k] >= 0 && net->up_train[l->in[k]];
    net->up_train[i] = up;
  }
}

/* The number of times nodes read node j's output (j = -1: the net's input). */
static int32_t readers_of(const ganfw_net *net, int32_t j) {
  int32_t n = 0;
  for (int32_t i = 0; i < net->n; i++)
    for (int32_t k = 0; k < net->layers[i]->n_in; k++) n += net->layers[i]->in[k] == j;
  return n;
}

/* bn_act (after last_use): a built-in batchnorm2d node b whose output one built-in
 * activation node a alone reads, once, as its only input, where a is not the net's output
 * and no reader of a's output is a plugin layer (its adapter may hand the output on) or a
 * view (reshape: the view would keep the memory alive, so releasing saves nothing). */
static void find_bn_act(ganfw_net *net) {
  for (int32_t b = 0; b < net->n; b++) {
    net->bn_act[b] = -1;
    if (net->layers[b]->vt != &ganfw_layer_batchnorm2d || readers_of(net, b) != 1) continue;
    const int32_t a = net->last_use[SLOT(b)];
    const ganfw_layer *la = net->layers[a];
    if (la->vt != &ganfw_layer_activation || la->n_in != 1 || a == net->n - 1) continue;
    int32_t ok = 1;
    for (int32_t i = a + 1; i < net->n && ok; i++)
      for (int32_t k = 0; k < net->layers[i]->n_in; k++)
        if (net->layers[i]->in[k] == a && (net->layers[i]->vt == &ganfw_layer_plugin ||
                                           net->layers[i]->vt == &ganfw_layer_reshape))
          ok = 0;
    if (ok) net->bn_act[b] = a;
  }
}

/* Each node's output shape (batch 1) from its inputs', the layers' parameters, and when each
 * value is last read; a node whose output nobody reads (other than the last, the net's
 * output) is an error naming it. */
static ganfw_status build_nodes(ganfw_net *net) {
  for (int32_t i = 0; i < net->n; i++) {
    ganfw_layer *l = net->layers[i];
    int64_t in[GANFW_NODE_MAX_INPUTS][GANFW_MAX_DIMS];
    int32_t in_ndim[GANFW_NODE_MAX_INPUTS];
    for (int32_t k = 0; k < l->n_in; k++) {
      const int32_t j = l->in[k];
      memcpy(in[k], j < 0 ? net->in_shape : net->shape[j], sizeof in[k]);
      in_ndim[k] = j < 0 ? net->in_ndim : net->ndim[j];
      l->in_c[k] = in[k][1];
    }
    int64_t *out = net->shape[i];
    for (int32_t d = 0; d < GANFW_MAX_DIMS; d++) out[d] = 1;
    ganfw_status st = l->vt->infer_n
                          ? l->vt->infer_n(l, l->n_in, (const int64_t(*)[GANFW_MAX_DIMS])in,
                                           in_ndim, out, &net->ndim[i])
                          : l->vt->infer(l, in[0], in_ndim[0], out, &net->ndim[i]);
    if (st != GANFW_OK) return st;
    if (l->vt->init && (st = l->vt->init(l, in[0], in_ndim[0])) != GANFW_OK) return st;
  }
  for (int32_t s = 0; s <= net->n; s++) net->last_use[s] = -1;
  for (int32_t i = 0; i < net->n; i++)
    for (int32_t k = 0; k < net->layers[i]->n_in; k++) net->last_use[net->layers[i]->in[k] + 1] = i;
  net->last_use[net->n] = net->n; /* the net's output: kept */
  for (int32_t j = 0; j + 1 < net->n; j++)
    if (net->last_use[j + 1] < 0)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "net %s, layer %s (%s): its output feeds nothing (only the last "
                             "node is the net's output); name it in a later node's inputs, or "
                             "remove it",
                             net->name, net->layers[j]->name, net->layers[j]->vt->type);
  mark_up_train(net);
  find_bn_act(net);
  return GANFW_OK;
}

ganfw_status ganfw_net_embedding(ganfw_net *net, const char *name, int64_t num, int64_t dim) {
  ganfw_status st;
  if ((st = positive(net, name, "num (the number of embeddings)", num)) ||
      (st = positive(net, name, "dim (the embedding size)", dim)))
    return st;
  if (num > INT32_MAX)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: embedding of %lld rows; at most %d are supported",
                           net->name, name ? name : "?", (long long)num, (int)INT32_MAX);
  const ganfw_layer_args a = {.embedding = {.num = num, .dim = dim}};
  return add_layer(net, &ganfw_layer_embedding, name, &a);
}

ganfw_status ganfw_net_spectral_norm(ganfw_net *net, const char *layer, int32_t n_power_iterations,
                                     float eps) {
  const char *name = layer ? layer : "";
  if (net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: spectral norm on '%s' after net_build; apply it right after "
                           "appending the layer",
                           net->name, name);
  ganfw_layer *l = NULL;
  for (int32_t i = 0; i < net->n && !l; i++)
    if (strcmp(net->layers[i]->name, name) == 0) l = net->layers[i];
  if (!l)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: spectral norm on '%s': no layer of that name was appended "
                           "before it",
                           net->name, name);
  if (l->vt != &ganfw_layer_conv2d && l->vt != &ganfw_layer_conv_transpose2d &&
      l->vt != &ganfw_layer_linear)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "spectral norm needs a layer with a weight matrix: a conv2d, "
                             "conv_transpose2d or linear layer");
  if (l->sn.n_power_iterations > 0)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "spectral norm is applied twice; apply it once per layer");
  if (n_power_iterations < 1 || !(eps > 0.0f) || !isfinite(eps))
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "spectral norm needs n_power_iterations >= 1 and a finite eps > 0 "
                             "(PyTorch's defaults: 1 and 1e-12), got %d and %g",
                             (int)n_power_iterations, (double)eps);
  l->sn.n_power_iterations = n_power_iterations;
  l->sn.eps = eps;
  return GANFW_OK;
}

ganfw_status ganfw_net_spectral_norm_sigma(const ganfw_net *net, const char *layer, double *sigma) {
  for (int32_t i = 0; i < net->n; i++) {
    const ganfw_layer *l = net->layers[i];
    if (strcmp(l->name, layer ? layer : "") != 0) continue;
    if (l->sn.n_power_iterations <= 0)
      return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG, "has no spectral norm");
    *sigma = l->sn.sigma;
    return GANFW_OK;
  }
  return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s has no layer '%s'", net->name,
                         layer ? layer : "");
}

ganfw_status ganfw_net_build(ganfw_net *net, int64_t c, int64_t h, int64_t w) {
  if (net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s is already built", net->name);
  if (net->n == 0) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s has no layers", net->name);
  if (net->next_input)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: net_input('%s') was not followed by a layer; append the "
                           "layer that reads it, or drop the call",
                           net->name, net->next_input);
  if (net->ctx && net->ctx->net_build_hook) { /* the config's model.insert */
    ganfw_status st = net->ctx->net_build_hook(net->ctx->net_build_user, net);
    if (st != GANFW_OK) return st;
  }
  int64_t shape[GANFW_MAX_DIMS] = {1, c, h, w};
  if (c <= 0 || h <= 0 || w <= 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: input shape [%lld,%lld,%lld] is empty",
                           net->name, (long long)c, (long long)h, (long long)w);
  memcpy(net->in_shape, shape, sizeof shape);
  net->in_ndim = 4;
  const size_t n = (size_t)net->n;
  net->last_use = calloc(n + 1, sizeof *net->last_use);
  net->up_train = calloc(n, sizeof *net->up_train);
  net->shape = calloc(n, sizeof *net->shape);
  net->ndim = calloc(n, sizeof *net->ndim);
  net->bn_act = calloc(n, sizeof *net->bn_act);
  net->rc_drop = calloc(n ? n : 1, sizeof *net->rc_drop);
  net->rc_need = calloc(n ? n : 1, sizeof *net->rc_need);
  if (!net->last_use || !net->up_train || !net->shape || !net->ndim || !net->bn_act ||
      !net->rc_drop || !net->rc_need)
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory building net %s", net->name);
  ganfw_status st = resolve_inputs(net);
  if (st == GANFW_OK)
    st = ganfw_net_widths_apply(net->name, net->layers, net->n, net->in_shape, net->in_ndim,
                                net->widths, net->n_widths);
  if (st == GANFW_OK) st = build_nodes(net);
  if (st != GANFW_OK) return st;
  net->built = 1;
  net->grads_valid = 0;
  return GANFW_OK;
}

int32_t ganfw_net_layer_index(const ganfw_net *net, const char *name) {
  if (!net || !name) return -1;
  int32_t i = node_index(net, name);
  return i >= 0 ? i : -1;
}

/* The first node at or after `start` that reads a value from before start - 1, or -1 when
 * none does (the output of node start - 1 is the only tensor crossing). */
static int32_t cut_crosser(const ganfw_net *net, int32_t start, int32_t *what) {
  for (int32_t i = start; i < net->n; i++)
    for (int32_t k = 0; k < net->layers[i]->n_in; k++)
      if (net->layers[i]->in[k] < start - 1) {
        *what = net->layers[i]->in[k];
        return i;
      }
  return -1;
}

int32_t ganfw_net_cut_ok(const ganfw_net *net, int32_t start) {
  int32_t what = 0;
  return net && net->built && start >= 1 && start < net->n && cut_crosser(net, start, &what) < 0;
}

const char *ganfw_net_layer_name(const ganfw_net *net, int32_t i) {
  return i >= 0 && i < net->n ? net->layers[i]->name : NULL;
}

int32_t ganfw_net_layer_trainable(const ganfw_net *net, int32_t i) {
  return i >= 0 && i < net->n && net->layers[i]->trainable;
}

ganfw_layer *ganfw_net_layer(ganfw_net *net, int32_t i) {
  return i >= 0 && i < net->n ? net->layers[i] : NULL;
}

const char *ganfw_net_layer_type(const ganfw_net *net, int32_t i) {
  return i >= 0 && i < net->n ? net->layers[i]->vt->type : NULL;
}

int32_t ganfw_net_layer_input(const ganfw_net *net, int32_t i, int32_t k) {
  if (!net->built || i < 0 || i >= net->n || k < 0 || k >= net->layers[i]->n_in) return -2;
  return net->layers[i]->in[k];
}

ganfw_status ganfw_net_freeze(ganfw_net *net, int32_t first_layer, int32_t end_layer) {
  if (!net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: freeze before net_build", net->name);
  if (first_layer < 0 || end_layer > net->n || first_layer >= end_layer)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: cannot freeze layers [%d, %d): the net has layers 0..%d",
                           net->name, (int)first_layer, (int)end_layer, (int)net->n - 1);
  for (int32_t i = first_layer; i < end_layer; i++) {
    ganfw_layer *l = net->layers[i];
    l->trainable = 0;
    for (int32_t k = 0; k < GANFW_LAYER_MAX_PARAMS; k++) {
      ganfw_tensor_destroy(l->grad[k]);
      l->grad[k] = NULL;
    }
  }
  mark_up_train(net);
  return GANFW_OK;
}

int64_t ganfw_net_param_count(const ganfw_net *net) {
  int64_t n = 0;
  for (int32_t i = 0; i < net->n; i++) n += net->layers[i]->nparams;
  return n;
}

ganfw_status ganfw_net_param_info(ganfw_net *net, int64_t i, ganfw_param_info *out) {
  if (!out || out->struct_size < sizeof(ganfw_param_info))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net_param_info: set out->struct_size to sizeof(ganfw_param_info)");
  for (int32_t k = 0; k < net->n; k++) {
    ganfw_layer *l = net->layers[k];
    if (i < l->nparams) {
      out->trainable = l->trainable;
      out->name = l->param_name[i];
      out->layer_type = l->vt->type;
      out->value = l->param[i];
      out->grad = l->trainable ? l->grad[i] : NULL;
      return GANFW_OK;
    }
    i -= l->nparams;
  }
  return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: no parameter %lld", net->name,
                         (long long)i);
}

const char *ganfw_net_name(const ganfw_net *net) {
  return net->name;
}

int32_t ganfw_net_layer_count(const ganfw_net *net) {
  return net->n;
}

void ganfw_net_output_shape(const ganfw_net *net, int64_t n, int64_t *out, int32_t *ndim) {
  /* every layer keeps the batch first: the batch-1 shape with n in front */
  memcpy(out, net->shape[net->n - 1], sizeof(int64_t) * GANFW_MAX_DIMS);
  out[0] = n;
  *ndim = net->ndim[net->n - 1];
}

int32_t ganfw_net_buffer_at(ganfw_net *net, int64_t i, ganfw_net_buffer *out) {
  for (int32_t k = 0; k < net->n; k++) {
    ganfw_layer *l = net->layers[k];
    ganfw_batchnorm_args *bn = ganfw_batchnorm_of(l);
    if (bn && bn->running_mean) {
      if (i < 3) {
        out->name = bn->buffer_name[i];
        out->tensor = i == 0 ? bn->running_mean : i == 1 ? bn->running_var : NULL;
        out->counter = i == 2 ? &bn->num_batches_tracked : NULL;
        return 1;
      }
      i -= 3;
    }
    if (i < l->nextra) {
      out->name = l->extra_name[i];
      out->tensor = l->extra[i];
      out->counter = NULL;
      return 1;
    }
    i -= l->nextra;
  }
  return 0;
}

void ganfw_net_set_train(ganfw_net *net, int32_t train, int32_t update_stats) {
  net->train = train != 0;
  net->update_stats = update_stats != 0;
}

ganfw_status ganfw_net_set_compute_dtype(ganfw_net *net, int32_t dtype) {
  if (dtype != GANFW_DTYPE_F32 && dtype != GANFW_DTYPE_F16 && dtype != GANFW_DTYPE_BF16)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: compute dtype %s is not f32, f16 or bf16", net->name,
                           ganfw_dtype_name(dtype));
  net->dtype = dtype;
  return GANFW_OK;
}

void ganfw_net_set_bn_act_recompute(ganfw_net *net, int32_t on) {
  net->recompute_bn_act = on != 0;
}

void ganfw_net_zero_grad(ganfw_net *net) {
  net->grads_valid = 0;
}

ganfw_status ganfw_net_checkpoint(ganfw_net *net, const int32_t *starts, int32_t n) {
  if (!net) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net_checkpoint: the net is NULL");
  if (!net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: net_checkpoint before net_build; set the segments of a built "
                           "net",
                           net->name);
  if (n < 0 || n > net->n - 1 || (n > 0 && !starts))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: %d checkpoint segment starts for %d layers; give 0 to %d "
                           "starts",
                           net->name, (int)n, (int)net->n, (int)(net->n - 1));
  for (int32_t i = 0; i < n; i++) {
    int32_t lo = i == 0 ? 1 : starts[i - 1] + 1;
    if (starts[i] < lo || starts[i] > net->n - 1)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "net %s: checkpoint segment start %d (entry %d) is out of order or "
                             "out of range; starts must increase strictly within 1..%d",
                             net->name, (int)starts[i], (int)i, (int)(net->n - 1));
    int32_t what = 0, at = cut_crosser(net, starts[i], &what);
    if (at >= 0)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "net %s: a checkpoint segment cannot start at layer %d (%s): layer "
                             "%d (%s) reads %s from before it, so more than one tensor would "
                             "cross the cut; start segments where one tensor crosses, e.g. at the "
                             "first layer of a residual block",
                             net->name, (int)starts[i], net->layers[starts[i]]->name, (int)at,
                             net->layers[at]->name,
                             what < 0 ? "the net's input" : net->layers[what]->name);
  }
  if (n > 0 && net->rc_on)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "net %s: checkpoint segments and selective recompute (a recompute "
                           "plan) cannot both apply to one net; recompute's choice of kept "
                           "tensors includes segments: use one of the two strategies",
                           net->name);
  int32_t *copy = NULL;
  if (n > 0) {
    copy = malloc((size_t)n * sizeof *copy);
    if (!copy) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    memcpy(copy, starts, (size_t)n * sizeof *copy);
  }
  free(net->ckpt_starts);
  net->ckpt_starts = copy;
  net->n_ckpt = n;
  return GANFW_OK;
}

int32_t ganfw_net_checkpoint_layout(const ganfw_net *net, int32_t *starts, int32_t cap) {
  for (int32_t i = 0; starts && i < net->n_ckpt && i < cap; i++) starts[i] = net->ckpt_starts[i];
  return net->n_ckpt;
}

/* 1 when layer l keeps its input k (a reference) for backward, 2 its output, as their
 * forwards do with a tape. */
static int32_t keeps(const ganfw_layer *l) {
  const ganfw_layer_vt *vt = l->vt;
  if (vt == &ganfw_layer_plugin) {
    const int32_t k = ganfw_plugin_layer_keep(l);
    return (k & GANFW_KEEP_INPUT ? 1 : 0) | (k & GANFW_KEEP_OUTPUT ? 2 : 0);
  }
  if (vt == &ganfw_layer_activation) return 2;
  if (vt == &ganfw_layer_conv2d || vt == &ganfw_layer_conv_transpose2d ||
      vt == &ganfw_layer_linear || vt == &ganfw_layer_batchnorm2d || vt == &ganfw_layer_groupnorm ||
      vt == &ganfw_layer_instancenorm2d || vt == &ganfw_layer_layernorm ||
      vt == &ganfw_layer_embedding)
    return 1;
  return 0; /* add, concat, reshape, upsample, pooling (max pooling keeps its argmax), pixel
               shuffle, dropout (its mask) */
}

/* 1 when a tape's records hold node i's output: its layer keeps its output, or a reader keeps
 * its input (the net's output, the caller's, counts as held). */
static int32_t out_kept(const ganfw_net *net, int32_t i) {
  if (i == net->n - 1 || (keeps(net->layers[i]) & 2)) return 1;
  for (int32_t j = i + 1; j < net->n; j++)
    for (int32_t k = 0; k < net->layers[j]->n_in; k++)
      if (net->layers[j]->in[k] == i && (keeps(net->layers[j]) & 1)) return 1;
  return 0;
}

ganfw_status ganfw_net_recompute(ganfw_net *net, const int32_t *nodes, int32_t n) {
  if (!net) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net_recompute: the net is NULL");
  if (!net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: net_recompute before net_build; set the plan of a built net",
                           net->name);
  if (n < 0) { /* back to the default */
    net->rc_on = 0;
    memset(net->rc_drop, 0, (size_t)net->n);
    memset(net->rc_need, 0, (size_t)net->n);
    return GANFW_OK;
  }
  if (n > 0 && !nodes)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: net_recompute: %d nodes and no list",
                           net->name, (int)n);
  if (net->n_ckpt > 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "net %s: selective recompute and checkpoint segments cannot both "
                           "apply to one net; recompute's choice of kept tensors includes "
                           "segments: use one of the two strategies",
                           net->name);
  for (int32_t k = 0; k < n; k++)
    if (nodes[k] < 0 || nodes[k] >= net->n - 1)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "net %s: recompute node %d is out of range; nodes 0..%d may be "
                             "recomputed (the last, the net's output, is always kept)",
                             net->name, (int)nodes[k], (int)net->n - 2);
  memset(net->rc_drop, 0, (size_t)net->n);
  memset(net->rc_need, 0, (size_t)net->n);
  for (int32_t k = 0; k < n; k++) net->rc_drop[nodes[k]] = 1;
  /* readers come after the nodes they read: from the last node down, a dropped node is
   * needed when a record holds its output or a needed dropped node reads it */
  for (int32_t i = net->n - 1; i >= 0; i--) {
    if (!net->rc_drop[i]) continue;
    if (out_kept(net, i)) net->rc_need[i] = 1;
    if (!net->rc_need[i]) continue;
    for (int32_t k = 0; k < net->layers[i]->n_in; k++) {
      const int32_t p = net->layers[i]->in[k];
      if (p >= 0 && net->rc_drop[p]) net->rc_need[p] = 1;
    }
  }
  net->rc_on = 1;
  return GANFW_OK;
}

int32_t ganfw_net_recompute_plan(const ganfw_net *net, int32_t *nodes, int32_t cap) {
  if (!net->rc_on) return -1;
  int32_t n = 0;
  for (int32_t i = 0; i < net->n; i++)
    if (net->rc_drop[i]) {
      if (nodes && n < cap) nodes[n] = i;
      n++;
    }
  return n;
}

static int64_t elems(const int64_t *shape, int32_t ndim) {
  int64_t n = 1;
  for (int32_t d = 1; d < ndim; d++) n *= shape[d];
  return n;
}

ganfw_status ganfw_net_node_info(const ganfw_net *net, int32_t i, ganfw_node_info *out) {
  if (!net || !net->built || i < 0 || i >= net->n || !out)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net_node_info: no node %d in net %s", (int)i,
                           net && net->name ? net->name : "?");
  const ganfw_layer *l = net->layers[i];
  ganfw_node_info o = {.struct_size = out->struct_size};
  o.n_in = l->n_in;
  o.in = l->in;
  o.name = l->name;
  o.type = l->vt->type;
  o.out_elems = elems(net->shape[i], net->ndim[i]);
  o.kept = out_kept(net, i);
  o.in_place = l->vt == &ganfw_layer_activation || l->vt == &ganfw_layer_dropout ||
               l->vt == &ganfw_layer_add;
  const int64_t *in = l->n_in > 0 && l->in[0] >= 0 ? net->shape[l->in[0]] : net->in_shape;
  const int32_t in_ndim = l->n_in > 0 && l->in[0] >= 0 ? net->ndim[l->in[0]] : net->in_ndim;
  const ganfw_conv_args *c = &l->args.conv;
  if (l->vt == &ganfw_layer_conv2d) /* 2 C K R S per output position */
    o.flops =
        2.0 * (double)c->in_channels * (double)c->kernel * (double)c->kernel * (double)o.out_elems;
  else if (l->vt == &ganfw_layer_conv_transpose2d) /* 2 C K R S per input position */
    o.flops = 2.0 * (double)c->out_channels * (double)c->kernel * (double)c->kernel *
              (double)elems(in, in_ndim);
  else if (l->vt == &ganfw_layer_linear)
    o.flops = 2.0 * (double)l->args.linear.in_features * (double)l->args.linear.out_features;
  else if (l->vt == &ganfw_layer_batchnorm2d || l->vt == &ganfw_layer_groupnorm ||
           l->vt == &ganfw_layer_instancenorm2d || l->vt == &ganfw_layer_layernorm)
    o.flops = 8.0 * (double)o.out_elems; /* statistics (two sweeps) and the affine map */
  else
    o.flops = (double)o.out_elems;
  memcpy(out, &o, out->struct_size < sizeof o ? out->struct_size : sizeof o);
  return GANFW_OK;
}

static void tape_free(ganfw_tape *t) {
  free(t->need);
  free(t->drop);
  free(t->rng_at);
  free(t->val);
  free(t->gy);
  free(t->saved);
  free(t->seg_start);
  free(t->seg_in);
  free(t->seg_rng);
  free(t->hole);
  free(t);
}

ganfw_tape *ganfw_tape_create(ganfw_net *net) {
  ganfw_tape *t = calloc(1, sizeof *t);
  size_t n = (size_t)(net->n ? net->n : 1);
  if (t) {
    t->saved = calloc(n, sizeof *t->saved);
    t->seg_start = calloc(n, sizeof *t->seg_start);
    t->seg_in = calloc(n, sizeof *t->seg_in);
    t->seg_rng = calloc(n, sizeof *t->seg_rng);
    t->hole = malloc(n * GANFW_SAVED_MAX * sizeof *t->hole);
    t->gy = calloc(n, sizeof *t->gy);
    t->drop = calloc(n, sizeof *t->drop);
    t->need = calloc(n, sizeof *t->need);
    t->rng_at = calloc(n, sizeof *t->rng_at);
    t->val = calloc(n + 1, sizeof *t->val);
  }
  if (!t || !t->saved || !t->seg_start || !t->seg_in || !t->seg_rng || !t->hole || !t->gy ||
      !t->drop || !t->need || !t->rng_at || !t->val) {
    if (t) tape_free(t);
    ganfw_error_set(GANFW_ERR_OOM, "out of host memory for a tape of net %s", net->name);
    return NULL;
  }
  t->net = net;
  t->n = net->n;
  for (size_t k = 0; k < n * GANFW_SAVED_MAX; k++) t->hole[k] = -1;
  return t;
}

void ganfw_tape_clear(ganfw_tape *tape) {
  if (!tape) return;
  for (int32_t i = 0; i < tape->n; i++) {
    ganfw_saved_clear(&tape->saved[i]);
    ganfw_tensor_destroy(tape->seg_in[i]);
    tape->seg_in[i] = NULL;
    ganfw_tensor_destroy(tape->gy[i]);
    tape->gy[i] = NULL;
    for (int32_t k = 0; k < GANFW_SAVED_MAX; k++) tape->hole[i * GANFW_SAVED_MAX + k] = -1;
  }
  for (int32_t s = 0; s <= tape->n; s++) {
    ganfw_tensor_destroy(tape->val[s]);
    tape->val[s] = NULL;
  }
  tape->rc = 0;
  tape->n_seg = 0;
  tape->recorded = 0;
  tape->kept = 0;
}

void ganfw_tape_set_full(ganfw_tape *tape, int32_t on) {
  tape->full = on;
}

void ganfw_tape_destroy(ganfw_tape *tape) {
  if (!tape) return;
  ganfw_tape_clear(tape);
  tape_free(tape);
}

static ganfw_exec exec_of(const ganfw_net *net) {
  ganfw_exec ex = {.ctx = net->ctx,
                   .be = net->ctx->be,
                   .train = net->train,
                   .update_stats = net->train && net->update_stats,
                   .dtype = net->dtype};
  return ex;
}

static void values_clear(ganfw_tensor **v, int32_t n) {
  for (int32_t s = 0; s < n; s++) {
    ganfw_tensor_destroy(v[s]);
    v[s] = NULL;
  }
}

/* Every reference to y in saved[from..to] becomes a hole naming node `node` (released; the
 * last reference frees y unless another holds it). */
static void punch_holes(ganfw_saved *saved, int32_t *hole, int32_t from, int32_t to,
                        ganfw_tensor *y, int32_t node) {
  int32_t dropped = 0;
  for (int32_t j = from; j <= to; j++)
    for (int32_t k = 0; k < GANFW_SAVED_MAX; k++)
      if (saved[j].t[k] && saved[j].t[k] == y) {
        hole[j * GANFW_SAVED_MAX + k] = node;
        saved[j].t[k] = NULL;
        dropped++;
      }
  while (dropped-- > 0) ganfw_tensor_destroy(y);
}

/* Puts y back into every hole naming node `node`; the number filled. */
static int32_t fill_holes(ganfw_tape *t, int32_t node, ganfw_tensor *y) {
  int32_t filled = 0;
  for (int32_t j = node; j < t->n; j++)
    for (int32_t k = 0; k < GANFW_SAVED_MAX; k++)
      if (t->hole[j * GANFW_SAVED_MAX + k] == node) {
        t->hole[j * GANFW_SAVED_MAX + k] = -1;
        t->saved[j].t[k] = ganfw_tensor_retain(y);
        filled++;
      }
  return filled;
}

/* A BatchNorm + activation pair (b, a = bn_act[b]) keeps on the tape only what BatchNorm
 * saved (its input x and the batch statistics): once the last reader of a's output in this
 * run [.., to) has run, every reference to that output y in saved[a..last] is dropped and
 * marked in `hole`, and backward recomputes y = act(bn(x)) before the first node that needs
 * it (recompute_bn_act). While the tape held them, y was shared, so no reader ran in place
 * on it: the recomputed y, from the same kernels on the same x, is bitwise the forward's.
 * Called after node i ran; pairs whose BatchNorm is before `from` (an earlier checkpoint
 * segment, not recorded in this run) or ran without a tape entry (eval) are left alone. */
static void release_bn_act(ganfw_net *net, ganfw_saved *saved, int32_t *hole, int32_t from,
                           int32_t to, int32_t i) {
  for (int32_t b = from; b < i && net->recompute_bn_act; b++) {
    const int32_t a = net->bn_act[b];
    if (a < 0 || a > i) continue;
    const int32_t last = net->last_use[SLOT(a)] < to ? net->last_use[SLOT(a)] : to - 1;
    ganfw_tensor *y = saved[a].t[0];
    if (last != i || !y || !saved[b].t[0] || !saved[b].t[1] || !saved[b].t[2]) continue;
    punch_holes(saved, hole, a, i, y, a);
  }
}

/* Puts back the output of activation node a released by release_bn_act: y = act(bn(x)) from
 * BatchNorm's saved input, run as the training forward ran (batch statistics, the same
 * kernels and chunking) but with the running statistics and num_batches_tracked left alone,
 * into every saved[j].t[k] whose hole names a. */
static ganfw_status recompute_bn_act(ganfw_net *net, const ganfw_exec *ex, ganfw_tape *tape,
                                     int32_t a) {
  ganfw_layer *la = net->layers[a], *lb = net->layers[la->in[0]];
  ganfw_exec rex = *ex;
  rex.train = 1; /* the tape holds batch statistics: the forward was a training one */
  rex.update_stats = 0;
  ganfw_tensor *x = tape->saved[la->in[0]].t[0], *t = NULL, *y = NULL;
  const int32_t pass = ganfw_alloc_set_pass(net->ctx->alloc, GANFW_PASS_RECOMPUTE);
  ganfw_alloc_trace_op(net->ctx->alloc, 1, lb->qualified);
  ganfw_status st = lb->vt->forward(lb, &rex, x, &t, NULL);
  ganfw_alloc_trace_op(net->ctx->alloc, 0, lb->qualified);
  ganfw_alloc_trace_op(net->ctx->alloc, 1, la->qualified);
  if (st == GANFW_OK) st = la->vt->forward(la, &rex, t, &y, NULL);
  ganfw_alloc_trace_op(net->ctx->alloc, 0, la->qualified);
  ganfw_alloc_set_pass(net->ctx->alloc, pass);
  ganfw_tensor_destroy(t); /* the activation ran in place on it, or copied it */
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(y);
    return st;
  }
  fill_holes(tape, a, y);
  ganfw_tensor_destroy(y);
  return GANFW_OK;
}

/* Selective recompute, after node i ran in a forward recorded under a plan: every input of
 * node i whose producer p is dropped and whose last reader is i leaves the tape. Each
 * reference to it in saved[p..i] becomes a hole naming p (recompute_node puts it back in
 * backward). obj[] are node i's inputs as they were handed to it (compared, never read: one
 * that no record holds is freed by now); an input that node i overwrote in place (out is the
 * same tensor) left with it, and no record holds its old value. */
static void release_dropped(ganfw_net *net, ganfw_tape *t, int32_t to, int32_t i,
                            const ganfw_tensor *const *obj, const ganfw_tensor *out) {
  const ganfw_layer *l = net->layers[i];
  for (int32_t k = 0; k < l->n_in; k++) {
    const int32_t p = l->in[k];
    int32_t seen = 0;
    for (int32_t m = 0; m < k; m++) seen |= l->in[m] == p;
    const int32_t last = net->last_use[SLOT(p)] < to ? net->last_use[SLOT(p)] : to - 1;
    if (seen || p < 0 || !t->drop[p] || last != i || obj[k] == out) continue;
    punch_holes(t->saved, t->hole, p, i, (ganfw_tensor *)obj[k], p);
  }
}

/* The output of dropped node a again, from the forward's kernels on its inputs: a kept value
 * (t->val), or a dropped one recomputed first, the same way. It runs as the recorded forward
 * ran (its Philox offset, batch statistics) but leaves BatchNorm's running statistics and
 * spectral norm's vectors alone, so that the value is bitwise the forward's. Fills every hole
 * naming a; *y (a new reference) when y is not NULL. A value that filled holes stays in
 * t->val until its producer's backward, so that another dropped reader finds it. */
static ganfw_status recompute_node(ganfw_net *net, const ganfw_exec *ex, ganfw_tape *t, int32_t a,
                                   ganfw_tensor **y) {
  ganfw_layer *l = net->layers[a];
  ganfw_tensor *x[GANFW_NODE_MAX_INPUTS] = {NULL}, *out = NULL;
  ganfw_status st = GANFW_OK;
  for (int32_t k = 0; k < l->n_in && st == GANFW_OK; k++) {
    const int32_t s = SLOT(l->in[k]);
    if (t->val[s])
      x[k] = ganfw_tensor_retain(t->val[s]);
    else if (s > 0 && t->drop[s - 1])
      st = recompute_node(net, ex, t, s - 1, &x[k]);
    else
      st = ganfw_error_set(GANFW_ERR_INTERNAL,
                           "layer %s: recomputing it needs input %d, which the tape neither kept "
                           "nor can recompute",
                           l->qualified, (int)k);
  }
  if (st == GANFW_OK) {
    ganfw_exec rex = *ex;
    rex.update_stats = 0;
    ganfw_ctx *ctx = net->ctx;
    const uint64_t rng_now = ctx->rng_offset;
    ctx->rng_offset = t->rng_at[a];
    const int32_t pass = ganfw_alloc_set_pass(ctx->alloc, GANFW_PASS_RECOMPUTE);
    ganfw_alloc_trace_op(ctx->alloc, 1, l->qualified);
    st = l->vt->forward_n ? l->vt->forward_n(l, &rex, l->n_in, x, &out, NULL)
                          : l->vt->forward(l, &rex, x[0], &out, NULL);
    ganfw_alloc_trace_op(ctx->alloc, 0, l->qualified);
    ganfw_alloc_set_pass(ctx->alloc, pass);
    ctx->rng_offset = rng_now;
  }
  for (int32_t k = 0; k < l->n_in; k++) ganfw_tensor_destroy(x[k]);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(out);
    return st;
  }
  const int32_t filled = fill_holes(t, a, out);
  /* kept for another dropped reader that recomputes later; one reader got it just now */
  int32_t readers = 0;
  for (int32_t j = a + 1; j < net->n; j++)
    for (int32_t k = 0; k < net->layers[j]->n_in; k++)
      readers += net->layers[j]->in[k] == a && t->need[j];
  if (filled && readers >= 2 && !t->val[SLOT(a)]) t->val[SLOT(a)] = ganfw_tensor_retain(out);
  if (y)
    *y = out;
  else
    ganfw_tensor_destroy(out);
  return GANFW_OK;
}

/* Runs nodes [from, to) on the values v (slots as SLOT; references), recording into
 * saved[from..to) when saved is not NULL (and then releasing BatchNorm + activation outputs
 * into `hole`, see release_bn_act). A node's inputs are handed over at their last
 * read (the node may then run in place on them, as in a straight net) and lent otherwise
 * (a second reference, so that nothing overwrites a value that another node still needs).
 * Node outputs fill their slots. On failure the slots still held are left for the caller. */
static ganfw_status run_nodes(ganfw_net *net, const ganfw_exec *ex, int32_t from, int32_t to,
                              ganfw_saved *saved, int32_t *hole, ganfw_tape *rc, ganfw_tensor **v) {
  for (int32_t i = from; i < to; i++) {
    ganfw_layer *l = net->layers[i];
    ganfw_tensor *x[GANFW_NODE_MAX_INPUTS];
    ganfw_status st = GANFW_OK;
    if (rc) rc->rng_at[i] = net->ctx->rng_offset;
    for (int32_t k = 0; k < l->n_in; k++) {
      const int32_t s = SLOT(l->in[k]);
      int32_t later = 0; /* the same value read again by this node */
      for (int32_t m = k + 1; m < l->n_in; m++) later |= l->in[m] == l->in[k];
      x[k] = v[s];
      if (!x[k])
        st = ganfw_error_set(GANFW_ERR_INTERNAL, "layer %s: input %d is not computed", l->qualified,
                             (int)k);
      else if (net->last_use[s] == i && !later)
        v[s] = NULL; /* handed over */
      else
        ganfw_tensor_retain(x[k]);
      /* a kept value a dropped node reads: the start of that node's recomputation (held
       * before the node runs, so that it does not overwrite it in place) */
      if (x[k] && rc && rc->need[i] && (s == 0 || !rc->drop[s - 1]) && !rc->val[s])
        rc->val[s] = ganfw_tensor_retain(x[k]);
    }
    const ganfw_tensor *obj[GANFW_NODE_MAX_INPUTS]; /* identities only, never dereferenced */
    for (int32_t k = 0; k < l->n_in; k++) obj[k] = x[k];
    ganfw_tensor *out = NULL;
    ganfw_alloc_trace_op(net->ctx->alloc, 1, l->qualified); /* device.trace: op slices */
    if (st == GANFW_OK)
      st = l->vt->forward_n ? l->vt->forward_n(l, ex, l->n_in, x, &out, saved ? &saved[i] : NULL)
                            : l->vt->forward(l, ex, x[0], &out, saved ? &saved[i] : NULL);
    ganfw_alloc_trace_op(net->ctx->alloc, 0, l->qualified);
    for (int32_t k = 0; k < l->n_in; k++)
      if (x[k]) ganfw_tensor_destroy(x[k]);
    if (st != GANFW_OK) {
      ganfw_tensor_destroy(out);
      return st;
    }
    v[SLOT(i)] = out;
    if (saved && rc)
      release_dropped(net, rc, to, i, obj, out);
    else if (saved)
      release_bn_act(net, saved, hole, from, to, i);
  }
  return GANFW_OK;
}

void ganfw_net_set_grad_hook(ganfw_net *net, ganfw_grad_hook hook, void *user) {
  net->grad_hook = hook;
  net->grad_hook_user = user;
}

/* Zeros of dtype shaped as slot s's value for a batch (slot 0: the net's input; s > 0: node
 * s - 1's output, named after it), e.g. the zero gradient of a node whose only readers pass it
 * no gradient (an embedding's ids), or the zero tangent of a join's input in a double
 * backward. NULL on failure. */
static ganfw_tensor *zeros_of(ganfw_net *net, const ganfw_exec *ex, int32_t s, int32_t dtype,
                              int64_t batch) {
  int64_t shape[GANFW_MAX_DIMS];
  memcpy(shape, s == 0 ? net->in_shape : net->shape[s - 1], sizeof shape);
  shape[0] = batch;
  const int32_t ndim = s == 0 ? net->in_ndim : net->ndim[s - 1];
  ganfw_layer *l = s == 0 ? NULL : net->layers[s - 1];
  const char *name = l ? l->qualified : net->name;
  ganfw_tensor *z = ganfw_tensor_create(ex->ctx, dtype, ndim, shape, GANFW_MEM_ACTIVATION, name);
  ganfw_tensor *f =
      z && z->dtype != GANFW_DTYPE_F32
          ? ganfw_tensor_create(ex->ctx, GANFW_DTYPE_F32, ndim, shape, GANFW_MEM_WORKSPACE, name)
          : NULL;
  if (!z || (z->dtype != GANFW_DTYPE_F32 && !f)) {
    ganfw_tensor_destroy(z);
    return NULL;
  }
  float *zf = f ? f->data : z->data;
  ganfw_status st =
      l ? ganfw_layer_fill(l, ex, z->numel, zf, 0.0f) : ganfw_be_fill(ex->be, z->numel, zf, 0.0f);
  if (st == GANFW_OK && f)
    st = ganfw_cast(ex->be, z->numel, GANFW_DTYPE_F32, f->data, z->dtype, z->data);
  ganfw_tensor_destroy(f);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(z);
    return NULL;
  }
  return z;
}

static ganfw_status grads_acquire(ganfw_layer *l, ganfw_backend *be, int32_t accumulate);

/* Backward through nodes [from, to) from the gradients g (slots as SLOT; references):
 * consumes each node's gradient and record, and adds its input gradients into their slots
 * (where a value feeds several nodes, the gradients add up). Slots of values nothing
 * upstream needs stay NULL. */
static ganfw_status backward_nodes(ganfw_net *net, const ganfw_exec *ex, ganfw_tape *tape,
                                   int32_t from, int32_t to, int32_t flags, int32_t accumulate,
                                   int64_t batch, int32_t keep, ganfw_tensor **g) {
  ganfw_saved *saved = tape->saved;
  const int32_t param_grads = (flags & GANFW_BWD_PARAM_GRAD) != 0;
  const int32_t input_grad = (flags & GANFW_BWD_INPUT_GRAD) != 0;
  for (int32_t i = to - 1; i >= from; i--) {
    ganfw_layer *l = net->layers[i];
    ganfw_tensor *dy = g[SLOT(i)];
    g[SLOT(i)] = NULL;
    int32_t *hole = &tape->hole[i * GANFW_SAVED_MAX];
    if (!input_grad && !net->up_train[i]) { /* frozen up to here: nothing left to compute */
      ganfw_saved_clear(&saved[i]);
      for (int32_t k = 0; k < GANFW_SAVED_MAX; k++) hole[k] = -1;
      ganfw_tensor_destroy(dy);
      ganfw_tensor_destroy(tape->val[SLOT(i)]); /* no reader of node i's output is left */
      tape->val[SLOT(i)] = NULL;
      continue;
    }
    ganfw_status st = GANFW_OK;
    for (int32_t k = 0; k < GANFW_SAVED_MAX && st == GANFW_OK; k++)
      if (hole[k] >= 0)
        st = tape->rc ? recompute_node(net, ex, tape, hole[k], NULL)
                      : recompute_bn_act(net, ex, tape, hole[k]);
    if (st != GANFW_OK) {
      ganfw_tensor_destroy(dy);
      return st;
    }
    if (!dy && !(dy = zeros_of(net, ex, SLOT(i), ex->dtype, batch))) return ganfw_error_code();
    int32_t want[GANFW_NODE_MAX_INPUTS];
    ganfw_tensor *dx[GANFW_NODE_MAX_INPUTS] = {NULL};
    for (int32_t k = 0; k < l->n_in; k++)
      want[k] = input_grad || (l->in[k] >= 0 && net->up_train[l->in[k]]);
    if (keep && (!l->vt->backward2_reads_dy || l->vt->backward2_reads_dy(l)))
      tape->gy[i] = ganfw_tensor_retain(dy); /* shared: no layer overwrites it */
    if (param_grads && l->trainable && (st = grads_acquire(l, net->ctx->be, accumulate))) {
      ganfw_tensor_destroy(dy);
      return st;
    }
    ganfw_alloc_trace_op(net->ctx->alloc, 1, l->qualified);
    st = l->vt->backward_n ? l->vt->backward_n(l, ex, &saved[i], dy, l->n_in, want, dx)
                           : l->vt->backward(l, ex, &saved[i], dy, want[0] ? &dx[0] : NULL,
                                             param_grads && l->trainable, accumulate);
    ganfw_alloc_trace_op(net->ctx->alloc, 0, l->qualified);
    if (st == GANFW_OK && net->grad_hook && param_grads && l->trainable && l->nparams > 0)
      net->grad_hook(net->grad_hook_user, l->grad, l->nparams);
    if (!keep) ganfw_saved_clear(&saved[i]);
    ganfw_tensor_destroy(dy);
    ganfw_tensor_destroy(tape->val[SLOT(i)]); /* no reader of node i's output is left */
    tape->val[SLOT(i)] = NULL;
    for (int32_t k = 0; k < l->n_in; k++) {
      if (!dx[k]) continue;
      ganfw_tensor **slot = &g[SLOT(l->in[k])];
      if (st == GANFW_OK && *slot)
        st = ganfw_join_accumulate(l, ex, slot, dx[k]);
      else if (st == GANFW_OK)
        *slot = ganfw_tensor_retain(dx[k]);
      ganfw_tensor_destroy(dx[k]);
    }
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* Segment s of the tape's layout: nodes [*from, *to). */
static void segment_range(const ganfw_net *net, const ganfw_tape *tape, int32_t s, int32_t *from,
                          int32_t *to) {
  *from = tape->seg_start[s];
  *to = s + 1 < tape->n_seg ? tape->seg_start[s + 1] : net->n;
}

/* The checkpointed forward: per segment, keeps its input and the RNG offset at its start,
 * and runs its nodes without recording (as no-grad). */
static ganfw_status forward_segments(ganfw_net *net, const ganfw_exec *ex, ganfw_tape *tape,
                                     ganfw_tensor **v) {
  tape->n_seg = net->n_ckpt + 1;
  for (int32_t s = 0; s < tape->n_seg; s++)
    tape->seg_start[s] = s == 0 ? 0 : net->ckpt_starts[s - 1];
  for (int32_t s = 0; s < tape->n_seg; s++) {
    int32_t from, to;
    segment_range(net, tape, s, &from, &to);
    tape->seg_in[s] = ganfw_tensor_retain(v[from]); /* SLOT(from - 1) */
    tape->seg_rng[s] = net->ctx->rng_offset;
    ganfw_status st = run_nodes(net, ex, from, to, NULL, NULL, NULL, v);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* The checkpointed backward: from the last segment to the first, re-runs the segment's
 * forward from its input with the RNG offsets of the first run and BatchNorm's running
 * statistics left alone, recording into the tape, then runs its backward. */
static ganfw_status backward_segments(ganfw_net *net, const ganfw_exec *ex, ganfw_tape *tape,
                                      int32_t flags, int32_t accumulate, int64_t batch,
                                      ganfw_tensor **v, ganfw_tensor **g) {
  ganfw_exec rex = *ex;
  rex.update_stats = 0;
  ganfw_ctx *ctx = net->ctx;
  for (int32_t s = tape->n_seg - 1; s >= 0; s--) {
    int32_t from, to;
    segment_range(net, tape, s, &from, &to);
    v[from] = tape->seg_in[s]; /* SLOT(from - 1): handed over */
    tape->seg_in[s] = NULL;
    if (!(flags & GANFW_BWD_INPUT_GRAD) && !net->up_train[to - 1]) { /* frozen: no re-run */
      values_clear(v, net->n + 1);
      values_clear(g, net->n + 1);
      continue;
    }
    const uint64_t rng_now = ctx->rng_offset;
    ctx->rng_offset = tape->seg_rng[s];
    ganfw_alloc_set_pass(ctx->alloc, GANFW_PASS_RECOMPUTE);
    ganfw_status st = run_nodes(net, &rex, from, to, tape->saved, tape->hole, NULL, v);
    ganfw_alloc_set_pass(ctx->alloc, GANFW_PASS_BACKWARD);
    ctx->rng_offset = rng_now;
    values_clear(v, net->n + 1); /* the segment's output again: the next segment's input */
    if (st == GANFW_OK)
      st = backward_nodes(net, ex, tape, from, to, flags, accumulate, batch, 0, g);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* Value slots for one forward or backward: n + 1 NULL references. */
static ganfw_tensor **values_new(const ganfw_net *net) {
  ganfw_tensor **v = calloc((size_t)net->n + 1, sizeof *v);
  if (!v) ganfw_error_set(GANFW_ERR_OOM, "out of host memory running net %s", net->name);
  return v;
}

static void values_free(ganfw_tensor **v, int32_t n) {
  if (!v) return;
  values_clear(v, n);
  free(v);
}

/* The checks before a forward: built, and x of the shape it was built for. */
static ganfw_status check_input(const ganfw_net *net, const ganfw_tensor *x) {
  if (!net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: forward before net_build", net->name);
  for (int32_t d = 1; d < net->in_ndim; d++)
    if (x->shape[d] != net->in_shape[d] || x->ndim != net->in_ndim)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "net %s: input '%s' is [%lld,%lld,%lld,%lld], the net was built for "
                             "[N,%lld,%lld,%lld]",
                             net->name, x->name, (long long)x->shape[0], (long long)x->shape[1],
                             (long long)x->shape[2], (long long)x->shape[3],
                             (long long)net->in_shape[1], (long long)net->in_shape[2],
                             (long long)net->in_shape[3]);
  return GANFW_OK;
}

ganfw_status ganfw_net_forward(ganfw_net *net, ganfw_tensor *x, ganfw_tape *tape,
                               ganfw_tensor **y) {
  *y = NULL;
  if (tape && (tape->net != net || tape->recorded))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: the tape belongs to another net or holds an unconsumed "
                           "forward",
                           net->name);
  ganfw_status st = check_input(net, x);
  if (st != GANFW_OK) return st;
  ganfw_tensor **v = values_new(net);
  if (!v) return ganfw_error_code();
  ganfw_exec ex = exec_of(net);
  v[0] = ganfw_tensor_retain(x);
  const int32_t pass = ganfw_alloc_set_pass(net->ctx->alloc, GANFW_PASS_FORWARD);
  ganfw_tape *rc = NULL;
  if (tape && net->rc_on && !tape->full) { /* a recompute plan: recorded with its flags */
    rc = tape;
    memcpy(tape->drop, net->rc_drop, (size_t)net->n);
    memcpy(tape->need, net->rc_need, (size_t)net->n);
    tape->rc = 1;
  }
  st = tape && net->n_ckpt > 0 && !tape->full
           ? forward_segments(net, &ex, tape, v)
           : run_nodes(net, &ex, 0, net->n, tape ? tape->saved : NULL, tape ? tape->hole : NULL, rc,
                       v);
  ganfw_alloc_set_pass(net->ctx->alloc, pass);
  if (st != GANFW_OK) {
    values_free(v, net->n + 1);
    if (tape) ganfw_tape_clear(tape);
    return st;
  }
  if (tape) {
    tape->recorded = 1;
    tape->batch = x->shape[0];
  }
  *y = v[SLOT(net->n - 1)];
  v[SLOT(net->n - 1)] = NULL;
  values_free(v, net->n + 1);
  return GANFW_OK;
}

ganfw_status ganfw_net_forward_node(ganfw_net *net, ganfw_tensor *x, int32_t node,
                                    ganfw_tensor **node_out, ganfw_tensor **y) {
  *node_out = NULL;
  if (y) *y = NULL;
  ganfw_status st = check_input(net, x);
  if (st != GANFW_OK) return st;
  if (node < 0 || node >= net->n)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: no node %d (it has nodes 0..%d)",
                           net->name, (int)node, (int)net->n - 1);
  ganfw_tensor **v = values_new(net);
  if (!v) return ganfw_error_code();
  ganfw_exec ex = exec_of(net);
  v[0] = ganfw_tensor_retain(x);
  st = run_nodes(net, &ex, 0, node + 1, NULL, NULL, NULL, v);
  if (st == GANFW_OK) {
    /* a second reference: a reader after `node` finds it shared and does not run in place */
    *node_out = ganfw_tensor_retain(v[SLOT(node)]);
    if (y) st = run_nodes(net, &ex, node + 1, net->n, NULL, NULL, NULL, v);
  }
  if (st == GANFW_OK && y) {
    *y = v[SLOT(net->n - 1)];
    v[SLOT(net->n - 1)] = NULL;
  }
  values_free(v, net->n + 1);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(*node_out);
    *node_out = NULL;
  }
  return st;
}

ganfw_status ganfw_net_backward(ganfw_net *net, ganfw_tape *tape, ganfw_tensor *dy, int32_t flags,
                                ganfw_tensor **dx) {
  if (dx) *dx = NULL;
  if (!tape || tape->net != net || !tape->recorded || tape->kept)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: backward needs the tape of a forward of this net", net->name);
  ganfw_tensor **g = values_new(net), **v = tape->n_seg > 0 ? values_new(net) : NULL;
  if (!g || (tape->n_seg > 0 && !v)) {
    values_free(g, net->n + 1);
    values_free(v, net->n + 1);
    ganfw_tape_clear(tape);
    return ganfw_error_code();
  }
  ganfw_exec ex = exec_of(net);
  int32_t param_grads = (flags & GANFW_BWD_PARAM_GRAD) != 0;
  int32_t accumulate = net->grads_valid;
  g[SLOT(net->n - 1)] = ganfw_tensor_retain(dy);
  const int32_t pass = ganfw_alloc_set_pass(net->ctx->alloc, GANFW_PASS_BACKWARD);
  ganfw_status st =
      tape->n_seg > 0
          ? backward_segments(net, &ex, tape, flags, accumulate, tape->batch, v, g)
          : backward_nodes(net, &ex, tape, 0, net->n, flags, accumulate, tape->batch, 0, g);
  ganfw_tape_clear(tape);
  ganfw_alloc_set_pass(net->ctx->alloc, pass);
  values_free(v, net->n + 1);
  if (st == GANFW_OK && param_grads) net->grads_valid = 1;
  if (st == GANFW_OK && (flags & GANFW_BWD_INPUT_GRAD) && dx) {
    *dx = g[0];
    g[0] = NULL;
  }
  values_free(g, net->n + 1);
  return st;
}

/* --- double backward: penalties on the input gradient ------------------------------------ */

ganfw_status ganfw_net_double_backward_check(const ganfw_net *net) {
  for (int32_t i = 0; i < net->n; i++) {
    const ganfw_layer *l = net->layers[i];
    char where[256];
    ganfw_net_layer_describe(net, i, where, sizeof where);
    if (l->vt == &ganfw_layer_batchnorm2d)
      return ganfw_error_set(
          GANFW_ERR_CONFIG,
          "%s: BatchNorm in training mode mixes the samples of a batch, so the gradient "
          "penalty of one sample depends on the others (the WGAN-GP paper drops it from the "
          "critic); a penalised net needs a critic without BatchNorm: use layer norm, instance "
          "norm or none (model.d_norm: layernorm | instancenorm | none for dcgan)",
          where);
    if (!l->vt->backward2)
      return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                             "%s has no double backward (the gradient of its input gradient), "
                             "which a penalty on the input gradient (gp, r1, r2) needs; %s",
                             where,
                             l->vt->forward == ganfw_layer_plugin.forward
                                 ? "a plugin layer gets one through ganfw_layer_def's backward2 "
                                   "member (ABI 1.9); this one does not set it"
                                 : "remove the layer from the penalised net or the penalty");
  }
  return GANFW_OK;
}

ganfw_status ganfw_net_backward_keep(ganfw_net *net, ganfw_tape *tape, ganfw_tensor *dy,
                                     ganfw_tensor **dx) {
  *dx = NULL;
  if (!tape || tape->net != net || !tape->recorded || tape->kept || tape->n_seg > 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: a kept backward needs the full tape (ganfw_tape_set_full) of "
                           "a forward of this net",
                           net->name);
  ganfw_status st = ganfw_net_double_backward_check(net);
  if (st != GANFW_OK) {
    ganfw_tape_clear(tape);
    return st;
  }
  ganfw_tensor **g = values_new(net);
  if (!g) {
    ganfw_tape_clear(tape);
    return ganfw_error_code();
  }
  ganfw_exec ex = exec_of(net);
  g[SLOT(net->n - 1)] = ganfw_tensor_retain(dy);
  const int32_t pass = ganfw_alloc_set_pass(net->ctx->alloc, GANFW_PASS_BACKWARD);
  st = backward_nodes(net, &ex, tape, 0, net->n, GANFW_BWD_INPUT_GRAD, 0, tape->batch, 1, g);
  ganfw_alloc_set_pass(net->ctx->alloc, pass);
  if (st == GANFW_OK) {
    *dx = g[0];
    g[0] = NULL;
    tape->kept = 1;
  } else {
    ganfw_tape_clear(tape);
  }
  values_free(g, net->n + 1);
  return st;
}

/* *acc += t (f32 tensors of one shape), or *acc = t when *acc is empty; takes t. */
static ganfw_status add_f32(ganfw_net *net, ganfw_tensor **acc, ganfw_tensor *t) {
  if (!*acc) {
    *acc = t;
    return GANFW_OK;
  }
  ganfw_status st = ganfw_be_add(net->ctx->be, t->numel, (*acc)->data, (*acc)->data, t->data);
  ganfw_tensor_destroy(t);
  return st;
}

/* Writes zeros into the parameter gradients nothing wrote since zero_grad. */
static ganfw_status grads_zero(ganfw_net *net) {
  for (int32_t i = 0; i < net->n; i++) {
    ganfw_layer *l = net->layers[i];
    for (int32_t p = 0; p < l->nparams && l->trainable; p++) {
      ganfw_tensor *g = l->grad[p];
      ganfw_status st = g ? ganfw_tensor_storage_acquire(g) : GANFW_OK;
      if (st == GANFW_OK && g) st = ganfw_be_fill(net->ctx->be, g->numel, g->data, 0.0f);
      if (st != GANFW_OK) return st;
    }
  }
  net->grads_valid = 1;
  return GANFW_OK;
}

/* The up sweep: tangents t (slots as SLOT) from the input to the output through each node's
 * backward2, with the forward adjoints ax summed into r. */
static ganfw_status up_sweep(ganfw_net *net, const ganfw_exec *ex, ganfw_tape *tape,
                             ganfw_tensor **t, ganfw_tensor **r) {
  for (int32_t i = 0; i < net->n; i++) {
    ganfw_layer *l = net->layers[i];
    ganfw_tensor *u[GANFW_NODE_MAX_INPUTS] = {NULL}, *ax[GANFW_NODE_MAX_INPUTS] = {NULL};
    ganfw_tensor *du = NULL;
    ganfw_status st = GANFW_OK;
    int32_t any = 0;
    for (int32_t k = 0; k < l->n_in; k++) any |= t[SLOT(l->in[k])] != NULL;
    for (int32_t k = 0; k < l->n_in && any && st == GANFW_OK; k++) {
      u[k] = t[SLOT(l->in[k])];
      if (u[k])
        ganfw_tensor_retain(u[k]); /* shared: no layer runs in place on a tangent */
      else if (!(u[k] = zeros_of(net, ex, SLOT(l->in[k]), GANFW_DTYPE_F32, tape->batch)))
        st = ganfw_error_code();
    }
    if (any && st == GANFW_OK) {
      ganfw_alloc_trace_op(net->ctx->alloc, 1, l->qualified);
      st = l->vt->backward2(l, ex, &tape->saved[i], tape->gy[i], l->n_in, u, &du, ax, l->trainable);
      ganfw_alloc_trace_op(net->ctx->alloc, 0, l->qualified);
    }
    for (int32_t k = 0; k < l->n_in; k++) {
      ganfw_tensor_destroy(u[k]);
      const int32_t s = SLOT(l->in[k]);
      if (net->last_use[s] == i) {
        ganfw_tensor_destroy(t[s]);
        t[s] = NULL;
      }
      if (!ax[k]) continue;
      if (st == GANFW_OK && s > 0)
        st = add_f32(net, &r[s], ax[k]);
      else
        ganfw_tensor_destroy(ax[k]);
    }
    ganfw_tensor_destroy(tape->gy[i]);
    tape->gy[i] = NULL;
    t[SLOT(i)] = du;
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

ganfw_status ganfw_net_backward_of_backward(ganfw_net *net, ganfw_tape *tape, ganfw_tensor *gdx) {
  if (!tape || tape->net != net || !tape->kept)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: the backward of a backward needs the tape of "
                           "ganfw_net_backward_keep",
                           net->name);
  ganfw_tensor **t = values_new(net), **r = t ? values_new(net) : NULL;
  ganfw_status st = r ? GANFW_OK : ganfw_error_code();
  ganfw_exec ex = exec_of(net);
  const int32_t pass = ganfw_alloc_set_pass(net->ctx->alloc, GANFW_PASS_BACKWARD);
  if (st == GANFW_OK && !net->grads_valid) st = grads_zero(net);
  if (st == GANFW_OK) {
    t[0] = ganfw_tensor_as_dtype(gdx, GANFW_DTYPE_F32, GANFW_MEM_ACTIVATION);
    st = t[0] ? up_sweep(net, &ex, tape, t, r) : ganfw_error_code();
  }
  /* the down sweep: the forward adjoints through the forward's own backward */
  int32_t top = -1;
  for (int32_t i = 0; i < net->n && st == GANFW_OK; i++)
    if (r[SLOT(i)]) top = i;
  for (int32_t i = 0; i <= top && st == GANFW_OK; i++) {
    ganfw_tensor *c = r[SLOT(i)];
    if (!c || c->dtype == net->dtype) continue;
    r[SLOT(i)] = ganfw_tensor_as_dtype(c, net->dtype, GANFW_MEM_ACTIVATION);
    ganfw_tensor_destroy(c);
    if (!r[SLOT(i)]) st = ganfw_error_code();
  }
  if (st == GANFW_OK && top >= 0)
    st = backward_nodes(net, &ex, tape, 0, top + 1, GANFW_BWD_PARAM_GRAD, 1, tape->batch, 0, r);
  ganfw_alloc_set_pass(net->ctx->alloc, pass);
  ganfw_tape_clear(tape);
  values_free(t, net->n + 1);
  values_free(r, net->n + 1);
  return st;
}

/* --- non-finite values: the checks after a step went non-finite -------------------------- */

/* 1 when t (any float dtype) holds NaN or inf; a 16-bit tensor is converted to f32 first. */
static ganfw_status tensor_nonfinite(ganfw_tensor *t, int32_t *bad) {
  *bad = 0;
  if (!t || t->numel == 0) return GANFW_OK;
  ganfw_tensor *f = ganfw_tensor_as_dtype(t, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE);
  if (!f) return ganfw_error_code();
  ganfw_op op = {.kind = GANFW_OP_NONFINITE, .shape.d = {f->numel}, .in = {f->data}};
  ganfw_status st = ganfw_backend_run(ganfw_tensor_ctx(f)->be, &op);
  *bad = st == GANFW_OK && op.result != 0;
  ganfw_tensor_destroy(f);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "checking '%s' for NaN and inf", t->name);
}

/* 1 when layer l's parameters or buffers (BatchNorm's running statistics, spectral norm's u
 * and v) hold NaN or inf. */
static ganfw_status layer_state_nonfinite(ganfw_layer *l, int32_t *bad) {
  ganfw_tensor *state[GANFW_LAYER_MAX_PARAMS + GANFW_LAYER_MAX_EXTRA + 2];
  size_t n = 0;
  for (int32_t k = 0; k < GANFW_LAYER_MAX_PARAMS; k++) state[n++] = l->param[k];
  for (int32_t k = 0; k < GANFW_LAYER_MAX_EXTRA; k++) state[n++] = l->extra[k];
  const ganfw_batchnorm_args *bn = ganfw_batchnorm_of(l);
  state[n++] = bn ? bn->running_mean : NULL;
  state[n++] = bn ? bn->running_var : NULL;
  *bad = 0;
  for (size_t k = 0; k < n && !*bad; k++) {
    ganfw_status st = tensor_nonfinite(state[k], bad);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

ganfw_status ganfw_net_find_nonfinite(ganfw_net *net, ganfw_tensor *x, uint64_t rng_offset,
                                      ganfw_net_nonfinite *out, ganfw_tensor **y) {
  out->layer = net->n;
  out->bad_state = 0;
  if (y) *y = NULL;
  if (!net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: forward before net_build", net->name);
  int32_t bad = 0;
  ganfw_status st = tensor_nonfinite(x, &bad);
  if (st != GANFW_OK) return st;
  if (bad) {
    out->layer = -1;
    return GANFW_OK;
  }
  ganfw_tensor **v = values_new(net);
  if (!v) return ganfw_error_code();
  ganfw_exec ex = exec_of(net);
  ex.update_stats = 0; /* a second look, not a second training forward */
  ganfw_ctx *ctx = net->ctx;
  const uint64_t rng_now = ctx->rng_offset;
  ctx->rng_offset = rng_offset; /* the same dropout masks as the forward that failed */
  v[0] = ganfw_tensor_retain(x);
  for (int32_t i = 0; i < net->n && st == GANFW_OK; i++) {
    st = run_nodes(net, &ex, i, i + 1, NULL, NULL, NULL, v);
    if (st == GANFW_OK) st = tensor_nonfinite(v[SLOT(i)], &bad);
    if (st == GANFW_OK && bad) {
      out->layer = i;
      st = layer_state_nonfinite(net->layers[i], &out->bad_state);
      break;
    }
  }
  ctx->rng_offset = rng_now;
  if (st == GANFW_OK && y && out->layer == net->n) {
    *y = v[SLOT(net->n - 1)];
    v[SLOT(net->n - 1)] = NULL;
  }
  values_free(v, net->n + 1);
  return st;
}

ganfw_status ganfw_net_nonfinite_grad_layer(ganfw_net *net, int32_t *layer) {
  *layer = -1;
  for (int32_t i = net->n - 1; i >= 0; i--) {
    ganfw_layer *l = net->layers[i];
    if (!l->trainable) continue;
    for (int32_t k = 0; k < l->nparams; k++) {
      int32_t bad = 0;
      ganfw_status st = tensor_nonfinite(l->grad[k], &bad);
      if (st != GANFW_OK) return st;
      if (bad) {
        *layer = i;
        return GANFW_OK;
      }
    }
  }
  return GANFW_OK;
}

ganfw_status ganfw_net_nonfinite_state_layer(ganfw_net *net, int32_t *layer) {
  *layer = -1;
  for (int32_t i = 0; i < net->n; i++) {
    int32_t bad = 0;
    ganfw_status st = layer_state_nonfinite(net->layers[i], &bad);
    if (st != GANFW_OK) return st;
    if (bad) {
      *layer = i;
      return GANFW_OK;
    }
  }
  return GANFW_OK;
}

void ganfw_net_layer_describe(const ganfw_net *net, int32_t i, char *buf, size_t n) {
  if (i >= 0 && i < net->n)
    snprintf(buf, n, "%s (%s, layer %d of %d)", net->layers[i]->qualified, net->layers[i]->vt->type,
             (int)i + 1, (int)net->n);
  else
    snprintf(buf, n, "%s (no layer %d)", net->name, (int)i);
}

/* --- a copy of the buffers (a skipped step puts them back) -------------------------------- */

struct ganfw_net_stats {
  int64_t n;              /* buffers: ganfw_net_buffer_at's, in its order */
  ganfw_tensor **tensors; /* [n]: copies of the f32 buffers (NULL for a counter) */
  int64_t *counters;      /* [n]: the int64 buffers (num_batches_tracked) */
};

void ganfw_net_stats_destroy(ganfw_net_stats *snap) {
  if (!snap) return;
  for (int64_t i = 0; i < snap->n; i++) ganfw_tensor_destroy(snap->tensors[i]);
  free(snap->tensors);
  free(snap->counters);
  free(snap);
}

/* A copy with room for every buffer of net: BatchNorm's running statistics and
 * num_batches_tracked, spectral norm's u and v. */
static ganfw_status stats_create(ganfw_net *net, ganfw_net_stats **out) {
  ganfw_net_stats *s = calloc(1, sizeof *s);
  ganfw_net_buffer b;
  int64_t n = 0;
  while (ganfw_net_buffer_at(net, n, &b)) n++;
  if (s) {
    s->tensors = calloc((size_t)(n + 1), sizeof *s->tensors);
    s->counters = calloc((size_t)(n + 1), sizeof *s->counters);
  }
  if (!s || !s->tensors || !s->counters) {
    ganfw_net_stats_destroy(s);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  for (; s->n < n; s->n++) {
    ganfw_net_buffer_at(net, s->n, &b);
    if (!b.tensor) continue;
    ganfw_tensor *t = ganfw_tensor_create(net->ctx, GANFW_DTYPE_F32, b.tensor->ndim,
                                          b.tensor->shape, GANFW_MEM_OTHER, b.tensor->name);
    if (!t) {
      ganfw_net_stats_destroy(s);
      return ganfw_error_code();
    }
    s->tensors[s->n] = t;
  }
  *out = s;
  return GANFW_OK;
}

/* Copies the buffers from net into the copy (save) or back (restore). */
static ganfw_status stats_copy(ganfw_net *net, ganfw_net_stats *s, int32_t save) {
  ganfw_backend *be = net->ctx->be;
  ganfw_net_buffer b;
  int64_t i = 0;
  for (; ganfw_net_buffer_at(net, i, &b); i++) {
    if (i >= s->n || !b.tensor != !s->tensors[i] ||
        (b.tensor && b.tensor->nbytes != s->tensors[i]->nbytes))
      return ganfw_error_set(GANFW_ERR_INTERNAL, "net %s: the statistics copy is of another net",
                             net->name);
    if (!b.tensor) {
      if (save)
        s->counters[i] = *b.counter;
      else
        *b.counter = s->counters[i];
      continue;
    }
    ganfw_tensor *copy = s->tensors[i];
    ganfw_status st = save ? be->vt->copy_d2d(be, copy->data, b.tensor->data, (size_t)copy->nbytes)
                           : be->vt->copy_d2d(be, b.tensor->data, copy->data, (size_t)copy->nbytes);
    if (st != GANFW_OK) return ganfw_error_wrap(st, "buffer %s of net %s", b.name, net->name);
  }
  if (i != s->n)
    return ganfw_error_set(GANFW_ERR_INTERNAL, "net %s: the statistics copy is of another net",
                           net->name);
  return GANFW_OK;
}

ganfw_status ganfw_net_stats_save(ganfw_net *net, ganfw_net_stats **snap) {
  if (!*snap) {
    ganfw_status st = stats_create(net, snap);
    if (st != GANFW_OK) return st;
  }
  return stats_copy(net, *snap, 1);
}

ganfw_status ganfw_net_stats_restore(ganfw_net *net, ganfw_net_stats *snap) {
  return snap ? stats_copy(net, snap, 0) : GANFW_OK;
}

/* --- gradients whose storage comes and goes (memory strategy step_in_backward) ----------- */

/* Gives layer l's parameter gradients their storage back when it was released after an
 * update (runtime/tensor.h), right before its backward writes them; zero-filled when that
 * backward adds to them (accumulate). Nothing to do for gradients that kept theirs. */
static ganfw_status grads_acquire(ganfw_layer *l, ganfw_backend *be, int32_t accumulate) {
  for (int32_t p = 0; p < l->nparams; p++) {
    ganfw_tensor *g = l->grad[p];
    if (!g || g->data) continue;
    ganfw_status st = ganfw_tensor_storage_acquire(g);
    if (st == GANFW_OK && accumulate) st = ganfw_be_fill(be, g->numel, g->data, 0.0f);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}
