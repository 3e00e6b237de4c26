/* `ganfw prune RUN_DIR|CHECKPOINT`: a trained model pruned, written as a new model folder
 * (its config and weights) that trains, fine-tunes, evaluates and plans as any other; with
 * --sweep, the trade-off table of several amounts: parameters, planned and measured peak
 * memory per category, step time, and test accuracy as pruned and after a fine-tune.
 * Masks (nn/prune.h, as torch.nn.utils.prune) keep every byte and FLOP; channel pruning
 * (nn/prune_channels.h) writes a narrower model (model.widths). docs/PRUNING.md. */
#ifndef GANFW_PRUNE_TOOL_H
#define GANFW_PRUNE_TOOL_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/status.h"

/* The pruning methods. */
enum {
  GANFW_PRUNE_L1_UNSTRUCTURED = 0, /* masks: prune.l1_unstructured on each layer */
  GANFW_PRUNE_GLOBAL_UNSTRUCTURED, /* masks: prune.global_unstructured over the layers */
  GANFW_PRUNE_LN_STRUCTURED,       /* masks: prune.ln_structured (dim 0) on each layer */
  GANFW_PRUNE_CHANNELS,            /* channels removed: a narrower model */
  GANFW_PRUNE_METHOD_COUNT
};
/* "l1_unstructured", ..., "channels"; NULL outside the range. */
const char *ganfw_prune_method_name(int32_t method);
/* The method named `name`, or -1. */
int32_t ganfw_prune_method_parse(const char *name);

#define GANFW_PRUNE_MAX_SWEEP  16
#define GANFW_PRUNE_MAX_LAYERS 256

typedef struct ganfw_prune_args {
  const char *source; /* a run folder (its config.resolved.yaml and latest checkpoint) or
                         a checkpoint file (the run folder above it, or --config) */
  const char *config; /* --config: the config to build the model from, else the run's */
  const char *output; /* -o: the folder written (required but with dry_run) */
  int32_t method;     /* GANFW_PRUNE_* */
  int32_t importance; /* channels: GANFW_CHANNEL_IMPORTANCE_*; ln_structured: l1 -> n 1,
                         l2 -> n 2 */
  double amounts[GANFW_PRUNE_MAX_SWEEP];      /* fractions in [0, 1) (masks: or counts >= 1) */
  int32_t n_amounts;                          /* 1: one model in `output`; more: a sweep */
  const char *layers[GANFW_PRUNE_MAX_LAYERS]; /* the layers to prune ("NET:" prefixed for a
                                                 model of several nets); 0: every one */
  int32_t n_layers;
  int32_t remove;   /* masks: written as plain weights (prune.remove) */
  int32_t finetune; /* epochs of fine-tuning each pruned model (a child `ganfw` run); 0: none */
  int32_t distill;  /* also write distill.yaml (the source teaching the pruned model, the
                       distill trainer), and fine-tune with it; a classifier source only */
  int32_t steps;    /* measured steps per row of the table (0: 5) */
  int32_t dry_run;  /* channels: print the groups and widths, write nothing */
  const char *const *sets; /* --set assignments for the fine-tune runs (optim.lr=0.01) */
  int nsets;
} ganfw_prune_args;

/* Loads the source's weights, prunes them by each amount and writes, for one amount, into
 * a->output (for several, into a->output/amount_<A>/): config.yaml (extends the source's
 * config; model.init_from the weights; model.widths for channels; run.out_dir <folder>/run)
 * and model.safetensors (with --distill, distill.yaml: the source as the frozen teacher of
 * the pruned model, run.out_dir <folder>/run_distill); then, with several amounts or a
 * fine-tune, the table (also as <output>/sweep.md). Progress and the table go to `out`.
 * Errors name the option, layer, file or folder. */
ganfw_status ganfw_prune_tool(const ganfw_prune_args *a, FILE *out);

#endif
