/* Structured channel pruning that shrinks a net (issue 41, part 2; docs/PRUNING.md):
 * the channel dependency groups of a built net (the channel spaces that must lose the same
 * channels: the outputs that meet in an add, through the layers that pass channels through),
 * a choice of channels to keep per group by importance, and what the narrower net needs: its
 * model.widths and its sliced state_dict, which model.init_from loads into the config with
 * those widths. The command that drives it (`ganfw prune`) is built on this API. */
#ifndef GANFW_PRUNE_CHANNELS_H
#define GANFW_PRUNE_CHANNELS_H

#include <stdint.h>

#include "ganfw/host.h"
#include "nn/net.h"

/* How a channel's importance is measured. */
typedef enum ganfw_channel_importance {
  /* sum over the group's producers of the L1 norm of the channel's filter (conv2d: weight
   * row k of [K,C,R,S]; conv_transpose2d: weight[:, k] of [C,K,R,S]; linear: row k) */
  GANFW_CHANNEL_IMPORTANCE_L1 = 0,
  GANFW_CHANNEL_IMPORTANCE_L2 = 1, /* the same with each filter's L2 norm */
  /* sum of |gamma| of the group's BatchNorms (network slimming, Liu et al. 2017); a group
   * without a BatchNorm is an error naming it */
  GANFW_CHANNEL_IMPORTANCE_BN_GAMMA = 2,
  GANFW_CHANNEL_IMPORTANCE_COUNT
} ganfw_channel_importance;

/* "l1", "l2", "bn_gamma"; NULL outside the range. */
const char *ganfw_channel_importance_name(int32_t kind);
/* The kind named `name`, or -1. */
int32_t ganfw_channel_importance_parse(const char *name);

/* The amount of one group, named by any of its producers (a conv or linear whose out
 * channels form it). */
typedef struct ganfw_channel_prune_amount {
  const char *layer;
  double amount; /* fraction of the group's channels removed, [0, 1) */
} ganfw_channel_prune_amount;

typedef struct ganfw_channel_prune_opts {
  int32_t importance;                        /* GANFW_CHANNEL_IMPORTANCE_* */
  double amount;                             /* for every prunable group not in `amounts`: [0, 1) */
  const ganfw_channel_prune_amount *amounts; /* (optional) per group; n_amounts of them */
  int32_t n_amounts;
  /* (optional) only the groups with a producer among layers[0..n_layers) get `amount`;
   * NULL: every prunable group */
  const char *const *layers;
  int32_t n_layers;
} ganfw_channel_prune_opts;

typedef struct ganfw_channel_prune_plan ganfw_channel_prune_plan;

/* The groups of `net` (built; its weights read for the importances, borrowed until the plan
 * is destroyed) and the channels each keeps under `o`: round(amount * C) channels (Python's
 * rounding, half to even) with the lowest importance are removed, the rest kept in their
 * order. A group the net's output (logits, image) or a layer that cannot follow a width
 * change reads is never pruned; naming one in o->amounts is an error saying why (a concat
 * whose inputs meet in an add is named). Errors name the layer or group: an amount outside
 * [0, 1), one that would remove every channel, an unknown layer (with the nearest name),
 * bn_gamma on a group without BatchNorm. *out owned by the caller
 * (ganfw_channel_prune_plan_destroy), NULL on failure. */
ganfw_status ganfw_channel_prune_plan_create(ganfw_net *net, const ganfw_channel_prune_opts *o,
                                             ganfw_channel_prune_plan **out);
void ganfw_channel_prune_plan_destroy(ganfw_channel_prune_plan *p); /* accepts NULL */

/* One group as the plan sees it; the strings live as long as the plan. */
typedef struct ganfw_channel_group_info {
  const char *name; /* its first producer's layer name ("conv1"), or the node it starts at */
  int64_t channels; /* C */
  int64_t kept;     /* channels after pruning (C when not pruned) */
  int32_t prunable; /* 0: locked (why says by what) */
  const char *why;  /* "" when prunable, else "the net's output", "read by ..." */
  int32_t n_producers, n_consumers, n_norms;
  const int32_t *producers; /* layer indices */
  const int32_t *consumers; /* conv / linear layers reading the group */
  const int32_t *norms;     /* batchnorm2d / groupnorm / instancenorm2d on it */
  const int64_t *keep;      /* the kept channels, ascending, `kept` of them */
} ganfw_channel_group_info;

/* Groups that hold at least one producer (the net's input and locked non-matmul outputs are
 * left out), in the order of their first producer. */
int32_t ganfw_channel_prune_group_count(const ganfw_channel_prune_plan *p);
ganfw_status ganfw_channel_prune_group_at(const ganfw_channel_prune_plan *p, int32_t i,
                                          ganfw_channel_group_info *out);

/* The groups listed for a `--dry-run`: one line per group ("group 2 conv1: 16 -> 8
 * channels; producers ...; consumers ...; norms ..."). *text malloc'ed, owned by the
 * caller (free). */
ganfw_status ganfw_channel_prune_describe(const ganfw_channel_prune_plan *p, char **text);

/* The widths of the pruned net: one entry per producer whose group loses channels, in layer
 * order, into out[0..min(n, cap)); returns n. The names live as long as the plan; where is
 * NULL. */
int32_t ganfw_channel_prune_widths(const ganfw_channel_prune_plan *p, ganfw_net_width *out,
                                   int32_t cap);
/* The same as the YAML flow map for model.widths, nested by the names' dotted parts
 * ("{conv1: 8, layer1: {0: {conv1: 8}}}"); with n > 1 plans each net's first part is
 * prefixed "NET:" as model.widths wants for a model of several nets. *text malloc'ed, owned
 * by the caller (free). */
ganfw_status ganfw_channel_prune_widths_text(const ganfw_channel_prune_plan *const *p, int32_t n,
                                             char **text);

/* The net the plan is of (borrowed from the caller of plan_create). */
ganfw_net *ganfw_channel_prune_plan_net(const ganfw_channel_prune_plan *p);

/* One tensor of the pruned net's state_dict (ganfw_channel_prune_each). */
typedef struct ganfw_channel_pruned {
  const char *name;              /* its state_dict name, "layer1.0.conv1.weight" */
  int32_t ndim;                  /* 0 for num_batches_tracked */
  int64_t shape[GANFW_MAX_DIMS]; /* cut to the kept channels */
  const float *data;             /* f32 host values, or NULL for a counter */
  const int64_t *counter;        /* num_batches_tracked (PyTorch's int64 scalar), or NULL */
} ganfw_channel_pruned;
/* Called with each tensor; its pointers are valid during the call only. A status other than
 * GANFW_OK stops the walk and is returned. */
typedef ganfw_status (*ganfw_channel_pruned_fn)(void *user, const ganfw_channel_pruned *t);
/* Every parameter and buffer of the plan's net, layer by layer as the net saves them, copied
 * to the host and cut: producers' weight rows (conv_transpose2d: dim 1) and biases,
 * consumers' weight columns (a linear after flatten: the kept channels' H*W blocks), the
 * norms' weight, bias, running_mean and running_var; num_batches_tracked and the rest as they
 * are. io/prune_file.h writes them as a file model.init_from loads. */
ganfw_status ganfw_channel_prune_each(const ganfw_channel_prune_plan *p, ganfw_channel_pruned_fn fn,
                                      void *user);

#endif
