/* Nets and the executor (see net.h): building from layer descriptions, forward with or
 * without a tape, backward that consumes the tape and frees each layer's saved tensors as
 * soon as its gradient is computed. */
#include "nn/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nn/layer.h"
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
  int32_t stop; /* the first layer with trainable parameters (n: none): backward without an
                   input gradient ends there */
};

struct ganfw_tape {
  ganfw_net *net;
  ganfw_saved *saved; /* one per layer */
  int32_t n;
  int32_t recorded; /* a forward was recorded and not yet consumed */
  /* Checkpointed forward: n_seg segments (0 without checkpointing), each with its first
   * layer, its input (a reference) and the Philox offset at its start; n entries each. */
  int32_t n_seg;
  int32_t *seg_start;
  ganfw_tensor **seg_in;
  uint64_t *seg_rng;
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
  return net;
}

static void layer_destroy(ganfw_layer *l) {
  if (!l) return;
  for (int32_t i = 0; i < GANFW_LAYER_MAX_PARAMS; i++) {
    ganfw_tensor_destroy(l->param[i]);
    ganfw_tensor_destroy(l->grad[i]);
    free(l->param_name[i]);
  }
  ganfw_tensor_destroy(l->running_mean);
  ganfw_tensor_destroy(l->running_var);
  for (int i = 0; i < 3; i++) free(l->buffer_name[i]);
  free(l->name);
  free(l->qualified);
  free(l);
}

void ganfw_net_destroy(ganfw_net *net) {
  if (!net) return;
  for (int32_t i = 0; i < net->n; i++) layer_destroy(net->layers[i]);
  free(net->layers);
  free(net->ckpt_starts);
  free(net->name);
  free(net);
}

/* Appends a layer of type vt with its arguments. */
static ganfw_status add_layer(ganfw_net *net, const ganfw_layer_vt *vt, const char *name,
                              const int64_t *args, int32_t nargs, const float *fargs,
                              int32_t nfargs) {
  if (net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: layer '%s' added after net_build; add every layer first",
                           net->name, name ? name : "");
  char index_name[32];
  if (!name || !*name) {
    snprintf(index_name, sizeof index_name, "%d", net->n);
    name = index_name;
  }
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
  for (int32_t i = 0; i < nargs; i++) l->arg[i] = args[i];
  for (int32_t i = 0; i < nfargs; i++) l->farg[i] = fargs[i];
  net->layers[net->n++] = l;
  return GANFW_OK;
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
  int64_t args[] = {in_channels, out_channels, kernel, stride, padding, 0, bias != 0};
  return add_layer(net, &ganfw_layer_conv2d, name, args, 7, NULL, 0);
}

ganfw_status ganfw_net_conv_transpose2d(ganfw_net *net, const char *name, int64_t in_channels,
                                        int64_t out_channels, int64_t kernel, int64_t stride,
                                        int64_t padding, int64_t output_padding, int32_t bias) {
  ganfw_status st;
  if ((st = positive(net, name, "in_channels", in_channels)) ||
      (st = positive(net, name, "out_channels", out_channels)) ||
      (st = positive(net, name, "kernel", kernel)) || (st = positive(net, name, "stride", stride)))
    return st;
  int64_t args[] = {in_channels, out_channels, kernel, stride, padding, output_padding, bias != 0};
  return add_layer(net, &ganfw_layer_conv_transpose2d, name, args, 7, NULL, 0);
}

ganfw_status ganfw_net_linear(ganfw_net *net, const char *name, int64_t in_features,
                              int64_t out_features, int32_t bias) {
  ganfw_status st;
  if ((st = positive(net, name, "in_features", in_features)) ||
      (st = positive(net, name, "out_features", out_features)))
    return st;
  int64_t args[] = {in_features, out_features, bias != 0};
  return add_layer(net, &ganfw_layer_linear, name, args, 3, NULL, 0);
}

ganfw_status ganfw_net_batchnorm2d(ganfw_net *net, const char *name, int64_t channels, float eps,
                                   float momentum) {
  ganfw_status st = positive(net, name, "channels", channels);
  if (st) return st;
  if (!(eps > 0) || !(momentum >= 0 && momentum <= 1))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: batchnorm2d needs eps > 0 and 0 <= momentum <= 1",
                           net->name, name ? name : "?");
  int64_t args[] = {channels};
  float fargs[] = {eps, momentum};
  return add_layer(net, &ganfw_layer_batchnorm2d, name, args, 1, fargs, 2);
}

ganfw_status ganfw_net_activation(ganfw_net *net, const char *name, int32_t kind, float alpha) {
  if (kind < 0 || kind >= GANFW_ACT_COUNT || (kind == GANFW_ACT_LEAKY_RELU && !(alpha >= 0)))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: unknown activation %d or negative slope", net->name,
                           name ? name : "?", (int)kind);
  int64_t args[] = {kind};
  float fargs[] = {alpha};
  return add_layer(net, &ganfw_layer_activation, name, args, 1, fargs, 1);
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
  int64_t args[] = {kind, kernel, stride, padding};
  return add_layer(net, &ganfw_layer_pool2d, name, args, 4, NULL, 0);
}

ganfw_status ganfw_net_dropout(ganfw_net *net, const char *name, float p) {
  if (!(p >= 0 && p < 1))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s, layer %s: dropout p must be in [0, 1)",
                           net->name, name ? name : "?");
  float fargs[] = {p};
  return add_layer(net, &ganfw_layer_dropout, name, NULL, 0, fargs, 1);
}

ganfw_status ganfw_net_flatten(ganfw_net *net, const char *name) {
  int64_t args[] = {0};
  return add_layer(net, &ganfw_layer_reshape, name, args, 1, NULL, 0);
}

ganfw_status ganfw_net_reshape(ganfw_net *net, const char *name, int64_t c, int64_t h, int64_t w) {
  ganfw_status st;
  if ((st = positive(net, name, "c", c)) || (st = positive(net, name, "h", h)) ||
      (st = positive(net, name, "w", w)))
    return st;
  int64_t args[] = {1, c, h, w};
  return add_layer(net, &ganfw_layer_reshape, name, args, 4, NULL, 0);
}

ganfw_status ganfw_net_upsample(ganfw_net *net, const char *name, int64_t scale, int32_t mode) {
  if (scale != 2 || mode < 0 || mode >= GANFW_UPSAMPLE_COUNT)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: upsample takes scale 2 and mode nearest (%d) or "
                           "bilinear (%d), got scale %lld and mode %d",
                           net->name, name ? name : "?", GANFW_UPSAMPLE_NEAREST,
                           GANFW_UPSAMPLE_BILINEAR, (long long)scale, (int)mode);
  int64_t args[] = {mode};
  return add_layer(net, &ganfw_layer_upsample, name, args, 1, NULL, 0);
}

ganfw_status ganfw_net_global_avg_pool(ganfw_net *net, const char *name) {
  return add_layer(net, &ganfw_layer_global_avg_pool, name, NULL, 0, NULL, 0);
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
  int64_t args[] = {groups, channels, affine != 0};
  float fargs[] = {eps};
  return add_layer(net, &ganfw_layer_groupnorm, name, args, 3, fargs, 1);
}

ganfw_status ganfw_net_instancenorm2d(ganfw_net *net, const char *name, int64_t channels, float eps,
                                      int32_t affine) {
  ganfw_status st;
  if ((st = positive(net, name, "channels", channels)) ||
      (st = norm_eps(net, name, "instancenorm2d", eps)))
    return st;
  int64_t args[] = {channels, affine != 0};
  float fargs[] = {eps};
  return add_layer(net, &ganfw_layer_instancenorm2d, name, args, 2, fargs, 1);
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
  int64_t args[5] = {ndim, 1, 1, 1, affine != 0};
  for (int32_t d = 0; d < ndim; d++) args[1 + d] = shape[d];
  float fargs[] = {eps};
  return add_layer(net, &ganfw_layer_layernorm, name, args, 5, fargs, 1);
}

ganfw_status ganfw_net_build(ganfw_net *net, int64_t c, int64_t h, int64_t w) {
  if (net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s is already built", net->name);
  if (net->n == 0) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s has no layers", net->name);
  int64_t shape[GANFW_MAX_DIMS] = {1, c, h, w};
  int32_t ndim = 4;
  if (c <= 0 || h <= 0 || w <= 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: input shape [%lld,%lld,%lld] is empty",
                           net->name, (long long)c, (long long)h, (long long)w);
  memcpy(net->in_shape, shape, sizeof shape);
  net->in_ndim = ndim;
  for (int32_t i = 0; i < net->n; i++) {
    ganfw_layer *l = net->layers[i];
    int64_t out[GANFW_MAX_DIMS] = {1, 1, 1, 1};
    int32_t out_ndim = 0;
    ganfw_status st = l->vt->infer(l, shape, ndim, out, &out_ndim);
    if (st != GANFW_OK) return st;
    if (l->vt->init && (st = l->vt->init(l, shape, ndim)) != GANFW_OK) return st;
    memcpy(shape, out, sizeof shape);
    ndim = out_ndim;
  }
  net->built = 1;
  net->grads_valid = 0;
  net->stop = 0;
  return GANFW_OK;
}

const char *ganfw_net_layer_name(const ganfw_net *net, int32_t i) {
  return i >= 0 && i < net->n ? net->layers[i]->name : NULL;
}

int32_t ganfw_net_layer_trainable(const ganfw_net *net, int32_t i) {
  return i >= 0 && i < net->n && net->layers[i]->trainable;
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
  net->stop = net->n;
  for (int32_t i = 0; i < net->n; i++)
    if (net->layers[i]->nparams > 0 && net->layers[i]->trainable) {
      net->stop = i;
      break;
    }
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
  int64_t shape[GANFW_MAX_DIMS];
  memcpy(shape, net->in_shape, sizeof shape);
  shape[0] = n;
  int32_t nd = net->in_ndim;
  for (int32_t i = 0; i < net->n; i++) {
    int64_t next[GANFW_MAX_DIMS] = {1, 1, 1, 1};
    net->layers[i]->vt->infer(net->layers[i], shape, nd, next, &nd);
    memcpy(shape, next, sizeof shape);
  }
  memcpy(out, shape, sizeof shape);
  *ndim = nd;
}

int32_t ganfw_net_buffer_at(ganfw_net *net, int64_t i, ganfw_net_buffer *out) {
  for (int32_t k = 0; k < net->n; k++) {
    ganfw_layer *l = net->layers[k];
    if (!l->running_mean) continue;
    if (i < 3) {
      out->name = l->buffer_name[i];
      out->tensor = i == 0 ? l->running_mean : i == 1 ? l->running_var : NULL;
      out->counter = i == 2 ? &l->num_batches_tracked : NULL;
      return 1;
    }
    i -= 3;
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
  }
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

static void tape_free(ganfw_tape *t) {
  free(t->saved);
  free(t->seg_start);
  free(t->seg_in);
  free(t->seg_rng);
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
  }
  if (!t || !t->saved || !t->seg_start || !t->seg_in || !t->seg_rng) {
    if (t) tape_free(t);
    ganfw_error_set(GANFW_ERR_OOM, "out of host memory for a tape of net %s", net->name);
    return NULL;
  }
  t->net = net;
  t->n = net->n;
  return t;
}

void ganfw_tape_clear(ganfw_tape *tape) {
  if (!tape) return;
  for (int32_t i = 0; i < tape->n; i++) {
    ganfw_saved_clear(&tape->saved[i]);
    ganfw_tensor_destroy(tape->seg_in[i]);
    tape->seg_in[i] = NULL;
  }
  tape->n_seg = 0;
  tape->recorded = 0;
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

/* A failure the backend recorded in layer l's ops (CUDA: a failed launch or library call;
 * optional vt->last_error), named after the layer. */
static ganfw_status backend_error(const ganfw_exec *ex, const ganfw_layer *l) {
  if (!ex->be->vt->last_error) return GANFW_OK;
  ganfw_status st = ex->be->vt->last_error(ex->be);
  return st == GANFW_OK ? st : ganfw_error_wrap(st, "layer %s", l->qualified);
}

/* Runs layers [from, to) on *cur (a reference, consumed and replaced by the output),
 * recording into saved[from..to) when saved is not NULL. On failure *cur is released. */
static ganfw_status run_layers(ganfw_net *net, const ganfw_exec *ex, int32_t from, int32_t to,
                               ganfw_saved *saved, ganfw_tensor **cur) {
  for (int32_t i = from; i < to; i++) {
    ganfw_layer *l = net->layers[i];
    ganfw_tensor *out = NULL;
    ganfw_status st = l->vt->forward(l, ex, *cur, &out, saved ? &saved[i] : NULL);
    if (st == GANFW_OK) st = backend_error(ex, l);
    ganfw_tensor_destroy(*cur);
    *cur = out;
    if (st != GANFW_OK) {
      ganfw_tensor_destroy(out);
      *cur = NULL;
      return st;
    }
  }
  return GANFW_OK;
}

/* Backward through layers [from, to) from the gradient *g (a reference, consumed and
 * replaced by the input gradient, NULL when not wanted), freeing each layer's record. */
static ganfw_status backward_layers(ganfw_net *net, const ganfw_exec *ex, ganfw_saved *saved,
                                    int32_t from, int32_t to, int32_t flags, int32_t accumulate,
                                    ganfw_tensor **g) {
  const int32_t param_grads = (flags & GANFW_BWD_PARAM_GRAD) != 0;
  const int32_t input_grad = (flags & GANFW_BWD_INPUT_GRAD) != 0;
  for (int32_t i = to - 1; i >= from; i--) {
    ganfw_layer *l = net->layers[i];
    if (!input_grad && i < net->stop) { /* frozen below: nothing left to compute */
      ganfw_saved_clear(&saved[i]);
      ganfw_tensor_destroy(*g);
      *g = NULL;
      continue;
    }
    int32_t want_dx = input_grad || i > net->stop;
    ganfw_tensor *next = NULL;
    ganfw_status st = l->vt->backward(l, ex, &saved[i], *g, want_dx ? &next : NULL,
                                      param_grads && l->trainable, accumulate);
    if (st == GANFW_OK) st = backend_error(ex, l);
    ganfw_saved_clear(&saved[i]);
    ganfw_tensor_destroy(*g);
    *g = next;
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* The checkpointed forward: per segment, keeps its input and the RNG offset at its start,
 * and runs its layers without recording (as no-grad). */
static ganfw_status forward_segments(ganfw_net *net, const ganfw_exec *ex, ganfw_tape *tape,
                                     ganfw_tensor **cur) {
  tape->n_seg = net->n_ckpt + 1;
  for (int32_t s = 0; s < tape->n_seg; s++) {
    tape->seg_start[s] = s == 0 ? 0 : net->ckpt_starts[s - 1];
    tape->seg_in[s] = ganfw_tensor_retain(*cur);
    tape->seg_rng[s] = net->ctx->rng_offset;
    int32_t to = s + 1 < tape->n_seg ? net->ckpt_starts[s] : net->n;
    ganfw_status st = run_layers(net, ex, tape->seg_start[s], to, NULL, cur);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* The checkpointed backward: from the last segment to the first, re-runs the segment's
 * forward from its input with the RNG offsets of the first run and BatchNorm's running
 * statistics left alone, recording into the tape, then runs its backward. */
static ganfw_status backward_segments(ganfw_net *net, const ganfw_exec *ex, ganfw_tape *tape,
                                      int32_t flags, int32_t accumulate, ganfw_tensor **g) {
  ganfw_exec rex = *ex;
  rex.update_stats = 0;
  ganfw_ctx *ctx = net->ctx;
  for (int32_t s = tape->n_seg - 1; s >= 0; s--) {
    const int32_t from = tape->seg_start[s];
    const int32_t to = s + 1 < tape->n_seg ? tape->seg_start[s + 1] : net->n;
    ganfw_tensor *cur = tape->seg_in[s];
    tape->seg_in[s] = NULL;
    if (!(flags & GANFW_BWD_INPUT_GRAD) && to <= net->stop) { /* frozen: no re-run */
      ganfw_tensor_destroy(cur);
      ganfw_tensor_destroy(*g);
      *g = NULL;
      continue;
    }
    const uint64_t rng_now = ctx->rng_offset;
    ctx->rng_offset = tape->seg_rng[s];
    ganfw_status st = run_layers(net, &rex, from, to, tape->saved, &cur);
    ctx->rng_offset = rng_now;
    ganfw_tensor_destroy(cur); /* the segment's output again: the next segment's input */
    if (st == GANFW_OK) st = backward_layers(net, ex, tape->saved, from, to, flags, accumulate, g);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

ganfw_status ganfw_net_forward(ganfw_net *net, ganfw_tensor *x, ganfw_tape *tape,
                               ganfw_tensor **y) {
  *y = NULL;
  if (!net->built)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "net %s: forward before net_build", net->name);
  if (tape && (tape->net != net || tape->recorded))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: the tape belongs to another net or holds an unconsumed "
                           "forward",
                           net->name);
  for (int32_t d = 1; d < net->in_ndim; d++)
    if (x->shape[d] != net->in_shape[d] || x->ndim != net->in_ndim)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "net %s: input '%s' is [%lld,%lld,%lld,%lld], the net was built for "
                             "[N,%lld,%lld,%lld]",
                             net->name, x->name, (long long)x->shape[0], (long long)x->shape[1],
                             (long long)x->shape[2], (long long)x->shape[3],
                             (long long)net->in_shape[1], (long long)net->in_shape[2],
                             (long long)net->in_shape[3]);
  ganfw_exec ex = exec_of(net);
  ganfw_tensor *cur = ganfw_tensor_retain(x);
  ganfw_status st = tape && net->n_ckpt > 0
                        ? forward_segments(net, &ex, tape, &cur)
                        : run_layers(net, &ex, 0, net->n, tape ? tape->saved : NULL, &cur);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(cur);
    if (tape) ganfw_tape_clear(tape);
    return st;
  }
  if (tape) tape->recorded = 1;
  *y = cur;
  return GANFW_OK;
}

ganfw_status ganfw_net_backward(ganfw_net *net, ganfw_tape *tape, ganfw_tensor *dy, int32_t flags,
                                ganfw_tensor **dx) {
  if (dx) *dx = NULL;
  if (!tape || tape->net != net || !tape->recorded)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s: backward needs the tape of a forward of this net", net->name);
  ganfw_exec ex = exec_of(net);
  int32_t param_grads = (flags & GANFW_BWD_PARAM_GRAD) != 0;
  int32_t accumulate = net->grads_valid;
  ganfw_tensor *g = ganfw_tensor_retain(dy);
  ganfw_status st = tape->n_seg > 0
                        ? backward_segments(net, &ex, tape, flags, accumulate, &g)
                        : backward_layers(net, &ex, tape->saved, 0, net->n, flags, accumulate, &g);
  ganfw_tape_clear(tape);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  if (param_grads) net->grads_valid = 1;
  if ((flags & GANFW_BWD_INPUT_GRAD) && dx)
    *dx = g;
  else
    ganfw_tensor_destroy(g);
  return GANFW_OK;
}

/* --- non-finite values: the checks after a step went non-finite -------------------------- */

/* 1 when t (any float dtype) holds NaN or inf; a 16-bit tensor is converted to f32 first. */
static ganfw_status tensor_nonfinite(ganfw_tensor *t, int32_t *bad) {
  *bad = 0;
  if (!t || t->numel == 0) return GANFW_OK;
  ganfw_tensor *f = ganfw_tensor_as_dtype(t, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE);
  if (!f) return ganfw_error_code();
  ganfw_backend *be = ganfw_tensor_ctx(f)->be;
  *bad = be->vt->nonfinite(be, f->numel, f->data) != 0;
  ganfw_tensor_destroy(f);
  return GANFW_OK;
}

/* 1 when layer l's parameters or BatchNorm running statistics hold NaN or inf. */
static ganfw_status layer_state_nonfinite(ganfw_layer *l, int32_t *bad) {
  ganfw_tensor *state[] = {l->param[0], l->param[1], l->running_mean, l->running_var};
  *bad = 0;
  for (size_t k = 0; k < sizeof state / sizeof state[0] && !*bad; k++) {
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
  ganfw_exec ex = exec_of(net);
  ex.update_stats = 0; /* a second look, not a second training forward */
  ganfw_ctx *ctx = net->ctx;
  const uint64_t rng_now = ctx->rng_offset;
  ctx->rng_offset = rng_offset; /* the same dropout masks as the forward that failed */
  ganfw_tensor *cur = ganfw_tensor_retain(x);
  for (int32_t i = 0; i < net->n && st == GANFW_OK; i++) {
    st = run_layers(net, &ex, i, i + 1, NULL, &cur);
    if (st == GANFW_OK) st = tensor_nonfinite(cur, &bad);
    if (st == GANFW_OK && bad) {
      out->layer = i;
      st = layer_state_nonfinite(net->layers[i], &out->bad_state);
      break;
    }
  }
  ctx->rng_offset = rng_now;
  if (st == GANFW_OK && y && out->layer == net->n)
    *y = cur;
  else
    ganfw_tensor_destroy(cur);
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

/* --- a copy of the BatchNorm running statistics (a skipped step puts them back) ---------- */

struct ganfw_net_stats {
  int32_t n;              /* BatchNorm layers */
  ganfw_tensor **tensors; /* [2n]: running_mean, running_var per layer */
  int64_t *counters;      /* [n]: num_batches_tracked */
};

void ganfw_net_stats_destroy(ganfw_net_stats *snap) {
  if (!snap) return;
  for (int32_t i = 0; i < 2 * snap->n; i++) ganfw_tensor_destroy(snap->tensors[i]);
  free(snap->tensors);
  free(snap->counters);
  free(snap);
}

/* A copy with room for the statistics of every BatchNorm layer of net. */
static ganfw_status stats_create(ganfw_net *net, ganfw_net_stats **out) {
  ganfw_net_stats *s = calloc(1, sizeof *s);
  int32_t n = 0;
  for (int32_t i = 0; i < net->n; i++) n += net->layers[i]->running_mean != NULL;
  if (s) {
    s->tensors = calloc((size_t)(2 * n + 1), sizeof *s->tensors);
    s->counters = calloc((size_t)(n + 1), sizeof *s->counters);
  }
  if (!s || !s->tensors || !s->counters) {
    ganfw_net_stats_destroy(s);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  for (int32_t i = 0; i < net->n; i++) {
    const ganfw_layer *l = net->layers[i];
    if (!l->running_mean) continue;
    ganfw_tensor *src[2] = {l->running_mean, l->running_var};
    for (int k = 0; k < 2; k++) {
      ganfw_tensor *t = ganfw_tensor_create(net->ctx, GANFW_DTYPE_F32, src[k]->ndim, src[k]->shape,
                                            GANFW_MEM_OTHER, src[k]->name);
      if (!t) {
        ganfw_net_stats_destroy(s);
        return ganfw_error_code();
      }
      s->tensors[2 * s->n + k] = t;
    }
    s->n++;
  }
  *out = s;
  return GANFW_OK;
}

/* Copies the running statistics from net into the copy (save) or back (restore). */
static ganfw_status stats_copy(ganfw_net *net, ganfw_net_stats *s, int32_t save) {
  ganfw_backend *be = net->ctx->be;
  for (int32_t i = 0, k = 0; i < net->n; i++) {
    ganfw_layer *l = net->layers[i];
    if (!l->running_mean) continue;
    if (k >= s->n)
      return ganfw_error_set(GANFW_ERR_INTERNAL, "net %s: the statistics copy is of another net",
                             net->name);
    ganfw_tensor *live[2] = {l->running_mean, l->running_var};
    for (int j = 0; j < 2; j++) {
      ganfw_tensor *copy = s->tensors[2 * k + j];
      ganfw_status st = save
                            ? be->vt->copy_d2d(be, copy->data, live[j]->data, (size_t)copy->nbytes)
                            : be->vt->copy_d2d(be, live[j]->data, copy->data, (size_t)copy->nbytes);
      if (st != GANFW_OK) return ganfw_error_wrap(st, "layer %s", l->qualified);
    }
    if (save)
      s->counters[k] = l->num_batches_tracked;
    else
      l->num_batches_tracked = s->counters[k];
    k++;
  }
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
