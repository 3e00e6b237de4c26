/* Magnitude pruning with masks, as torch.nn.utils.prune: computes 0/1 masks on the weights
 * of conv2d, conv_transpose2d and linear layers and installs them (layers/mask.c: the layer
 * then computes with weight_orig * mask), makes them permanent, and reports sparsity.
 * Pruning a layer that has a mask again prunes among the entries (or slices) the mask still
 * keeps, with the amount relative to those, and the masks multiply (torch's
 * PruningContainer). Masks are computed on the host from the weights' values; docs/PRUNING.md
 * says what matches PyTorch and what differs. */
#ifndef GANFW_PRUNE_H
#define GANFW_PRUNE_H

#include <stddef.h>
#include <stdint.h>

#include "ganfw/host.h"

typedef struct ganfw_layer ganfw_layer;

/* How much to prune: a fraction of the entries still unpruned, in [0, 1) (count < 0), or a
 * count of them (count >= 0; fraction ignored). A fraction gives round(fraction * remaining)
 * entries, rounded half to even as Python's round. */
typedef struct ganfw_prune_amount {
  double fraction;
  int64_t count;
} ganfw_prune_amount;
static inline ganfw_prune_amount ganfw_prune_fraction(double f) {
  ganfw_prune_amount a = {f, -1};
  return a;
}
static inline ganfw_prune_amount ganfw_prune_count(int64_t n) {
  ganfw_prune_amount a = {0.0, n};
  return a;
}

/* One weight of a global pruning: layer `layer` of `net` (both borrowed). */
typedef struct ganfw_prune_target {
  ganfw_net *net;
  const char *layer;
} ganfw_prune_target;

/* The layer named `layer` of a built net (owned by the net), or NULL with an error naming
 * the net and the nearest layer name. */
ganfw_layer *ganfw_prune_find_layer(ganfw_net *net, const char *layer);
/* 1 when layer i of net can carry a mask (conv2d, conv_transpose2d, linear). */
int32_t ganfw_prune_layer_prunable(ganfw_net *net, int32_t i);

/* prune.l1_unstructured(module, 'weight', amount): the entries of smallest |weight_orig|
 * among those the mask keeps are masked. Installs the mask when the layer has none. Errors
 * name the layer: no such layer (nearest name), a layer without a weight, an amount
 * outside [0, 1) or a count above the entries remaining. */
ganfw_status ganfw_prune_l1_unstructured(ganfw_net *net, const char *layer,
                                         ganfw_prune_amount amount);
/* prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount): one
 * threshold over the entries all targets[0..n) still keep together (|weight_orig|
 * concatenated in the order given), the amount relative to all of them. */
ganfw_status ganfw_prune_global_unstructured(const ganfw_prune_target *targets, int32_t n,
                                             ganfw_prune_amount amount);
/* prune.ln_structured(module, 'weight', amount, n, dim): whole slices along `dim` (0: the
 * weight's first dimension, output channels of conv2d and linear; 1: its second) with the
 * smallest L_n norm of weight_orig (n 1 or 2) among the slices the mask still keeps (any
 * nonzero) are masked; the amount counts slices. */
ganfw_status ganfw_prune_ln_structured(ganfw_net *net, const char *layer, ganfw_prune_amount amount,
                                       int32_t n, int32_t dim);
/* An all-ones mask on the layer (pruning nothing), as a first prune of amount 0 does; a
 * no-op when it has one. */
ganfw_status ganfw_prune_mask_layer(ganfw_net *net, const char *layer);
/* prune.remove(module, 'weight'): weight_orig * mask becomes the plain weight "<layer>.weight"
 * and the mask is gone. An error for a layer without a mask. _remove_all does it for every
 * masked layer of the net (none: nothing to do). */
ganfw_status ganfw_prune_remove(ganfw_net *net, const char *layer);
ganfw_status ganfw_prune_remove_all(ganfw_net *net);

/* Zeros of the effective weight (weight_orig * mask, or the plain weight) of one layer. */
typedef struct ganfw_prune_sparsity {
  int64_t zeros, total;
  int32_t masked; /* 1: the layer has a mask */
} ganfw_prune_sparsity;
ganfw_status ganfw_prune_layer_sparsity(ganfw_net *net, const char *layer,
                                        ganfw_prune_sparsity *out);
/* What the mask of a layer keeps (all of it without a mask): entries with mask 1, *kept of
 * *total; with dim 0 or 1 also the slices along dim with any nonzero mask, *kept_slices of
 * *slices (else both 0). Any output may be NULL. */
ganfw_status ganfw_prune_layer_kept(ganfw_net *net, const char *layer, int32_t dim, int64_t *kept,
                                    int64_t *total, int64_t *kept_slices, int64_t *slices);
/* The report of every prunable layer of the net, one line each and an overall line
 * "<net>: 1234 of 5678 weights zero (21.7%)", into buf[0..cap) (truncated to fit); *overall
 * (may be NULL) gets the totals over those layers. */
ganfw_status ganfw_prune_report(ganfw_net *net, char *buf, size_t cap,
                                ganfw_prune_sparsity *overall);

/* Validation of a mask loaded from a file (io/checkpoint.c): every value of layer's mask is
 * 0 or 1; else GANFW_ERR_CONFIG naming the tensor and `path`. */
ganfw_status ganfw_prune_check_mask(ganfw_layer *l, const char *path);

#endif
