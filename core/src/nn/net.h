/* Nets and the executor: a net is a graph of layers (a sequence when each reads the one
 * before; ganfw/host.h's minor-3 block has the rules); forward records on a tape what
 * backward needs, backward consumes the tape. Several tapes can be live at once (D on the
 * real batch and D on the fake one). Without a tape (no-grad) nothing is kept: each
 * layer's input is released as soon as its output exists. Every tensor comes from the
 * run's caching allocator, tagged param, grad, activation or workspace, and named after
 * its layer for the memory reports. */
#ifndef GANFW_NET_H
#define GANFW_NET_H

#include "ganfw/host.h"

typedef struct ganfw_tape ganfw_tape;

/* Backward flags. */
enum {
  GANFW_BWD_INPUT_GRAD = 1, /* compute the gradient of the net's input */
  GANFW_BWD_PARAM_GRAD = 2, /* compute (accumulate) parameter gradients */
};

/* Building (the host table's net_* entries point here; see ganfw/host.h). */
ganfw_net *ganfw_net_create(ganfw_ctx *ctx, const char *name);
void ganfw_net_destroy(ganfw_net *net);
ganfw_status ganfw_net_conv2d(ganfw_net *net, const char *name, int64_t in_channels,
                              int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding,
                              int32_t bias);
ganfw_status ganfw_net_conv_transpose2d(ganfw_net *net, const char *name, int64_t in_channels,
                                        int64_t out_channels, int64_t kernel, int64_t stride,
                                        int64_t padding, int64_t output_padding, int32_t bias);
ganfw_status ganfw_net_linear(ganfw_net *net, const char *name, int64_t in_features,
                              int64_t out_features, int32_t bias);
ganfw_status ganfw_net_batchnorm2d(ganfw_net *net, const char *name, int64_t channels, float eps,
                                   float momentum);
ganfw_status ganfw_net_activation(ganfw_net *net, const char *name, int32_t kind, float alpha);
ganfw_status ganfw_net_pool2d(ganfw_net *net, const char *name, int32_t kind, int64_t kernel,
                              int64_t stride, int64_t padding);
ganfw_status ganfw_net_dropout(ganfw_net *net, const char *name, float p);
ganfw_status ganfw_net_flatten(ganfw_net *net, const char *name);
ganfw_status ganfw_net_reshape(ganfw_net *net, const char *name, int64_t c, int64_t h, int64_t w);
ganfw_status ganfw_net_upsample(ganfw_net *net, const char *name, int64_t scale, int32_t mode);
ganfw_status ganfw_net_global_avg_pool(ganfw_net *net, const char *name);
ganfw_status ganfw_net_groupnorm(ganfw_net *net, const char *name, int64_t groups, int64_t channels,
                                 float eps, int32_t affine);
ganfw_status ganfw_net_instancenorm2d(ganfw_net *net, const char *name, int64_t channels, float eps,
                                      int32_t affine);
ganfw_status ganfw_net_layernorm(ganfw_net *net, const char *name, int32_t ndim,
                                 const int64_t *shape, float eps, int32_t affine);
/* nn.PixelShuffle(factor), or nn.PixelUnshuffle(factor) with unshuffle 1 (layers/pixel_shuffle.c,
 * host->net_pixel_shuffle). */
ganfw_status ganfw_net_pixel_shuffle(ganfw_net *net, const char *name, int64_t factor,
                                     int32_t unshuffle);
/* Graph nets (ganfw/host.h, ABI 1.3): the next layer's input, and the joins. */
ganfw_status ganfw_net_input(ganfw_net *net, const char *from);
ganfw_status ganfw_net_add(ganfw_net *net, const char *name, const char *const *inputs, int32_t n);
ganfw_status ganfw_net_concat(ganfw_net *net, const char *name, const char *const *inputs,
                              int32_t n);
ganfw_status ganfw_net_embedding(ganfw_net *net, const char *name, int64_t num, int64_t dim);
ganfw_status ganfw_net_spectral_norm(ganfw_net *net, const char *layer, int32_t n_power_iterations,
                                     float eps);
/* sigma (the weight's largest singular value as estimated) of the last forward of the
 * spectrally normalised layer named `layer`; 0 before its first forward. */
ganfw_status ganfw_net_spectral_norm_sigma(const ganfw_net *net, const char *layer, double *sigma);
/* A layer defined by a plugin (host->net_custom, see ganfw/host.h). */
ganfw_status ganfw_net_custom(ganfw_net *net, const char *name, const ganfw_layer_def *def,
                              void *state);
/* As net_custom, but the node is placed right after the node named `after` (a layer, or
 * "input" for the net's first place) instead of at the end: it reads that node's output, and
 * every node that read it reads the new node instead (after the last node, it becomes the
 * net's output). Before net_build; `after` not being a node is an error with the nearest
 * name. state's ownership is net_custom's, also on failure. */
ganfw_status ganfw_net_insert_custom(ganfw_net *net, const char *after, const char *name,
                                     const ganfw_layer_def *def, void *state);
/* For a layer file that defines its own builder (layers/pixel_shuffle.c): appends a layer of
 * type vt named `name` as the builders above do (NULL or "": its index; its input as
 * net_input said), with no arguments, and hands it out in *out (owned by the net; NULL on
 * failure) for the builder to set its args or impl. */
typedef struct ganfw_layer ganfw_layer;
typedef struct ganfw_layer_vt ganfw_layer_vt;
ganfw_status ganfw_net_append(ganfw_net *net, const ganfw_layer_vt *vt, const char *name,
                              ganfw_layer **out);
ganfw_status ganfw_net_build(ganfw_net *net, int64_t c, int64_t h, int64_t w);

/* model.widths (nn/net_widths.h, docs/PRUNING.md): the out channels (features)
 * `width` of the conv2d, conv_transpose2d or linear layer named `layer`; `where` heads the
 * messages about the entry ("a.yaml:7:5: model.widths.layer1.0.conv1"). */
typedef struct ganfw_net_width {
  const char *layer;
  int64_t width;
  const char *where;
} ganfw_net_width;
/* Before net_build: net_build gives the layers w[0..n) these widths and every dependent
 * layer the channels that follow, before it infers shapes and makes parameters (a later
 * call replaces the list; n 0 clears it). The entries are copied. Errors of the widths
 * come out of net_build. */
ganfw_status ganfw_net_set_widths(ganfw_net *net, const ganfw_net_width *w, int32_t n);
/* Layer i of the net (owned by it, valid while it is), or NULL past the end: for the
 * core's passes over a built net (nn/prune_channels.c). */
ganfw_layer *ganfw_net_layer_at(ganfw_net *net, int32_t i);
/* After net_build: node i's output shape for a batch of 1 into shape[0..*ndim) (i = -1: the
 * net's input); 0, or -1 when there is no such node. */
int32_t ganfw_net_node_shape(const ganfw_net *net, int32_t i, int64_t *shape, int32_t *ndim);
/* The index of the node named `name` (-1: none), and whether a checkpoint segment may start
 * at node `start` (ganfw/host.h). */
int32_t ganfw_net_layer_index(const ganfw_net *net, const char *name);
int32_t ganfw_net_cut_ok(const ganfw_net *net, int32_t start);
int64_t ganfw_net_param_count(const ganfw_net *net);
ganfw_status ganfw_net_param_info(ganfw_net *net, int64_t i, ganfw_param_info *out);

/* Inspection. */
const char *ganfw_net_name(const ganfw_net *net);
int32_t ganfw_net_layer_count(const ganfw_net *net);
/* The output shape for a batch of n: out[0..*ndim), n first. */
void ganfw_net_output_shape(const ganfw_net *net, int64_t n, int64_t *out, int32_t *ndim);
/* Buffers saved with the weights, layer by layer after the parameters (BatchNorm's
 * running_mean, running_var and spectral norm's weight_u, weight_v as f32 tensors owned by
 * the net; num_batches_tracked as an int64 counter): i-th buffer, or 0 past the end.
 * Exactly one of the tensor and the counter is set. */
typedef struct ganfw_net_buffer {
  const char *name;     /* state_dict name, "main.1.running_mean" */
  ganfw_tensor *tensor; /* f32 buffer, or NULL */
  int64_t *counter;     /* int64 buffer, or NULL */
} ganfw_net_buffer;
int32_t ganfw_net_buffer_at(ganfw_net *net, int64_t i, ganfw_net_buffer *out);

/* The name of layer i ("features.0"), or NULL past the end; 1 when layer i is trainable. */
const char *ganfw_net_layer_name(const ganfw_net *net, int32_t i);
int32_t ganfw_net_layer_trainable(const ganfw_net *net, int32_t i);
/* Layer i (owned by the net, valid until it is destroyed), or NULL past the end: for the
 * core's own tools on layers (nn/prune.c). */
ganfw_layer *ganfw_net_layer(ganfw_net *net, int32_t i);
/* The type of layer i ("linear", "conv2d", a plugin layer's own), or NULL past the end. */
const char *ganfw_net_layer_type(const ganfw_net *net, int32_t i);
/* After net_build: the node whose output layer i reads as its input k (the layer appended
 * before it unless net_input, net_add or net_concat named another), -1 for the net's input,
 * -2 when layer i or its input k does not exist. */
int32_t ganfw_net_layer_input(const ganfw_net *net, int32_t i, int32_t k);

/* Freezes layers [first_layer, end_layer) (after net_build, before optimizers are
 * created): their parameters get no gradient (the grad tensors are freed, and
 * net_param_info reports trainable 0 and grad NULL) and keep their values. A backward
 * without GANFW_BWD_INPUT_GRAD stops at the first layer with trainable parameters: the
 * layers below compute nothing (their tape entries are just released). */
ganfw_status ganfw_net_freeze(ganfw_net *net, int32_t first_layer, int32_t end_layer);

/* Modes: train uses batch statistics in BatchNorm and drops units in Dropout; eval uses
 * the running statistics and no dropout. `update_stats` 0 keeps BatchNorm's running
 * statistics untouched in train mode (checkpoint recomputation, samples). */
void ganfw_net_set_train(ganfw_net *net, int32_t train, int32_t update_stats);

/* The dtype activations are stored in and matmul layers compute in (GANFW_DTYPE_F32, F16
 * or BF16; see ganfw_exec_options). */
ganfw_status ganfw_net_set_compute_dtype(ganfw_net *net, int32_t dtype);

/* Recomputing BatchNorm + activation outputs (on by default): a tape then keeps, for a
 * built-in batchnorm2d whose output only a built-in activation reads, BatchNorm's input and
 * batch statistics but not the activation's output; backward recomputes that output with
 * the forward's kernels right before the first node that needs it, bitwise as the forward
 * computed it (docs/MEMORY.md, "What each layer saves for backward"). on 0 keeps it as
 * recorded; for tests and benchmarks (GANFW_BN_ACT_RECOMPUTE=0 in the environment sets 0 at
 * net_create). Applies to the tapes recorded after the call. */
void ganfw_net_set_bn_act_recompute(ganfw_net *net, int32_t on);

/* Gradient checkpointing (host->net_checkpoint, see ganfw/host.h): starts[0..n) are the
 * first layers of the segments after the first, strictly increasing in 1..layers-1; n = 0
 * turns it off. After net_build. A forward with a tape then keeps only each segment's input
 * and the Philox offset at its start, and runs the layers inside as in no-grad mode;
 * backward re-runs each segment (last to first) from its input with the same offsets and
 * without touching BatchNorm's running statistics, then runs its backward. The gradients
 * are bitwise those of the run without checkpointing. A tape keeps the layout of its
 * forward. */
ganfw_status ganfw_net_checkpoint(ganfw_net *net, const int32_t *starts, int32_t n);
/* The current layout: number of segment starts after the first, copied into
 * starts[0..min(n, cap)) when starts is not NULL. */
int32_t ganfw_net_checkpoint_layout(const ganfw_net *net, int32_t *starts, int32_t cap);

/* Selective recompute (host->net_recompute, see ganfw/host.h): nodes[0..n) are the nodes
 * whose outputs a tape does not keep (any of 0..layers-2; the net's output is always kept);
 * n = 0 keeps every output (and no BatchNorm + activation output is released either); n < 0
 * goes back to the default (no plan). After net_build; not with checkpoint segments. A
 * forward with a tape then releases each dropped output after its last reader ran (every
 * record's reference to it becomes a hole) and holds the kept values that dropped nodes read;
 * backward recomputes a dropped output right before the first node whose record needs it,
 * from the kept values (recursively through dropped ones), with the forward's Philox offset
 * and BatchNorm's running statistics left alone: the gradients are bitwise those of the run
 * that keeps everything. A tape keeps the plan of its forward. */
ganfw_status ganfw_net_recompute(ganfw_net *net, const int32_t *nodes, int32_t n);
/* Node i of a built net as host->net_node_info describes it (ganfw/host.h). */
ganfw_status ganfw_net_node_info(const ganfw_net *net, int32_t i, ganfw_node_info *out);
/* The current plan: the number of dropped nodes (-1: no plan), copied into
 * nodes[0..min(n, cap)) when nodes is not NULL. */
int32_t ganfw_net_recompute_plan(const ganfw_net *net, int32_t *nodes, int32_t cap);

/* A function told, during a backward with parameter gradients, that the gradients
 * grads[0..n) of one trainable layer are final for that backward (data-parallel training
 * starts their all-reduce while the layers below still run: dist/reducer.c). The next
 * backward calls it too until it is set to NULL. */
typedef void (*ganfw_grad_hook)(void *user, ganfw_tensor *const *grads, int32_t n);
void ganfw_net_set_grad_hook(ganfw_net *net, ganfw_grad_hook hook, void *user);

/* Forgets the gradients: the next backward writes them instead of adding to them (as
 * zero_grad, without touching memory). */
void ganfw_net_zero_grad(ganfw_net *net);

/* A tape for one forward/backward pair; owned by the caller, reusable after backward. */
ganfw_tape *ganfw_tape_create(ganfw_net *net);
void ganfw_tape_destroy(ganfw_tape *tape); /* accepts NULL; releases what it holds */
/* Drops what the tape holds (a forward whose backward will not run). */
void ganfw_tape_clear(ganfw_tape *tape);

/* Runs the net on x ([N,C,H,W] as built, borrowed). With a tape, records what backward
 * needs; with tape NULL, keeps nothing (no-grad). *y is a new reference owned by the
 * caller (ganfw_tensor_destroy). */
ganfw_status ganfw_net_forward(ganfw_net *net, ganfw_tensor *x, ganfw_tape *tape, ganfw_tensor **y);
/* A no-grad forward (as ganfw_net_forward with tape NULL) that also hands out the output
 * of node `node` (0 <= node < layer count), e.g. the features a classifier's last layer
 * reads: *node_out is a new reference owned by the caller, never overwritten in place by
 * the nodes after it. With y NULL the nodes after `node` do not run; otherwise *y is the
 * net's output (a new reference owned by the caller), the same values ganfw_net_forward
 * gives. */
ganfw_status ganfw_net_forward_node(ganfw_net *net, ganfw_tensor *x, int32_t node,
                                    ganfw_tensor **node_out, ganfw_tensor **y);
/* Consumes the tape from the last layer to the first with the output gradient dy
 * (borrowed). flags: GANFW_BWD_*. When GANFW_BWD_INPUT_GRAD is set, *dx is a new
 * reference owned by the caller; dx may be NULL otherwise. */
ganfw_status ganfw_net_backward(ganfw_net *net, ganfw_tape *tape, ganfw_tensor *dy, int32_t flags,
                                ganfw_tensor **dx);

/* --- double backward: penalties on the input gradient (WGAN-GP, R1) ---------------------
 * PyTorch's torch.autograd.grad(D(x).sum(), x, create_graph=True) followed by a backward of
 * a loss on that gradient, in two calls on one tape:
 *   ganfw_tape_set_full(tape, 1); ganfw_net_forward(net, x, tape, &y);
 *   ganfw_net_backward_keep(net, tape, dy, &gx);        gx: d<y, dy>/dx; the tape is kept
 *   ... the penalty P(gx) and its gradient v = dP/dgx (of gx's shape) ...
 *   ganfw_net_backward_of_backward(net, tape, v);       adds dP/dparams to the gradients
 * The first is an input-gradient backward that leaves every layer's record on the tape and
 * keeps the gradient each node received (the second tape: the penalty's own bytes). The
 * second runs each layer's backward2 (layer.h) from the input to the output, carrying the
 * tangent of the input gradient forward and adding the parameter terms, then a backward of
 * the forward from the adjoints that the curved layers (tanh, sigmoid, the norms) leave on
 * their inputs; it consumes the tape. Tangents are f32 whatever the compute dtype. */
/* A tape that records every node even on a checkpointed net (on 1), as a kept backward needs. */
void ganfw_tape_set_full(ganfw_tape *tape, int32_t on);
/* GANFW_OK when every layer has a double backward; else an error naming the first one
 * that has not (a plugin layer without it) or that is refused (BatchNorm). */
ganfw_status ganfw_net_double_backward_check(const ganfw_net *net);
ganfw_status ganfw_net_backward_keep(ganfw_net *net, ganfw_tape *tape, ganfw_tensor *dy,
                                     ganfw_tensor **dx);
ganfw_status ganfw_net_backward_of_backward(ganfw_net *net, ganfw_tape *tape, ganfw_tensor *gdx);

/* --- non-finite values (the slow path after a step's loss or gradient went NaN or inf) ---
 * Nothing here runs on a good step: the trainers call these only once a loss or a
 * gradient is known to be non-finite, to name where it started. */

/* What a checked forward found. */
typedef struct ganfw_net_nonfinite {
  int32_t layer;     /* the first layer whose output holds NaN or inf; -1: the input already
                        does; the layer count: none (every output is finite) */
  int32_t bad_state; /* 1 when that layer's parameters or running statistics hold NaN or inf
                        themselves (an earlier update overflowed) */
} ganfw_net_nonfinite;
/* Runs the net again on x (borrowed) as a training forward with Philox offset `rng_offset`
 * did (the context's offset is put back afterwards), without a tape and without updating
 * BatchNorm's running statistics, checking x and then every layer's output for NaN or inf.
 * When y is not NULL and every output was finite, *y is the output (a new reference owned by
 * the caller), e.g. to check the net it feeds; else *y is NULL. */
ganfw_status ganfw_net_find_nonfinite(ganfw_net *net, ganfw_tensor *x, uint64_t rng_offset,
                                      ganfw_net_nonfinite *out, ganfw_tensor **y);
/* After a backward: the trainable layer nearest the output (the first one backward reached)
 * whose parameter gradients hold NaN or inf, or -1 when none does. */
ganfw_status ganfw_net_nonfinite_grad_layer(ganfw_net *net, int32_t *layer);
/* The first layer whose parameters or BatchNorm running statistics hold NaN or inf, or -1. */
ganfw_status ganfw_net_nonfinite_state_layer(ganfw_net *net, int32_t *layer);
/* "discriminator.main.0 (conv2d, layer 1 of 12)" for layer i, into buf[0..n). */
void ganfw_net_layer_describe(const ganfw_net *net, int32_t i, char *buf, size_t n);

/* A copy of a net's buffers (BatchNorm's running statistics and num_batches_tracked,
 * spectral norm's u and v), so that a skipped step can leave them as they were before it. _save
 * copies them into *snap, creating it on the first call (owned by the caller:
 * ganfw_net_stats_destroy); _restore copies them back (snap NULL: nothing to do). */
typedef struct ganfw_net_stats ganfw_net_stats;
ganfw_status ganfw_net_stats_save(ganfw_net *net, ganfw_net_stats **snap);
ganfw_status ganfw_net_stats_restore(ganfw_net *net, ganfw_net_stats *snap);
void ganfw_net_stats_destroy(ganfw_net_stats *snap); /* accepts NULL */

#endif
