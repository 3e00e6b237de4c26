/* The file of a channel-pruned model (nn/prune_channels.h): the pruned state_dicts of its
 * nets as one safetensors file that model.init_from loads into the config with the plans'
 * model.widths, and PyTorch into the same architecture with the reduced widths. */
#ifndef GANFW_PRUNE_FILE_H
#define GANFW_PRUNE_FILE_H

#include "nn/prune_channels.h"

/* Writes the pruned state_dicts of plans p[0..n) ("format": "pt"; each tensor as
 * "<net name>.<state_dict name>", num_batches_tracked as PyTorch's int64 scalar), atomically
 * as ganfw_st_writer_write does. GANFW_ERR_IO naming the path, GANFW_ERR_OOM. */
ganfw_status ganfw_channel_prune_write(const ganfw_channel_prune_plan *const *p, int32_t n,
                                       const char *path);

#endif
