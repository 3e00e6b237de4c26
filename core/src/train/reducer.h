/* Gradient averaging across ranks in buckets, as DistributedDataParallel does it: the
 * optimizer's parameters are grouped last to first (the order backward produces their
 * gradients) into buckets of at most dist.bucket_cap bytes, each with a communication
 * buffer of its own (category comm). During the step's last backward the net tells the
 * reducer as each layer's gradients are final (ganfw_net_set_grad_hook); a bucket whose
 * gradients are all final is packed into its buffer and its all-reduce starts while the
 * layers below still run. finish waits for every bucket and writes the average back. */
#ifndef GANFW_TRAIN_REDUCER_H
#define GANFW_TRAIN_REDUCER_H

#include "dist/dist.h"
#include "ganfw/optim.h"
#include "nn/net.h"

typedef struct ganfw_reducer ganfw_reducer;

/* Buckets over params[0..n) (borrowed: they must outlive the reducer), buffers from ctx
 * named "comm.<role>.bucket<k>". *out is the caller's (ganfw_reducer_destroy). */
ganfw_status ganfw_reducer_create(ganfw_ctx *ctx, ganfw_dist *d, const ganfw_param *params,
                                  int64_t n, const char *role, ganfw_reducer **out);
void ganfw_reducer_destroy(ganfw_reducer *r); /* accepts NULL */

/* The next backward of `net` with parameter gradients is the step's last: buckets start
 * as they fill. */
void ganfw_reducer_arm(ganfw_reducer *r, ganfw_net *net);
/* After that backward (or without one): starts the buckets not started yet, waits for
 * all, and leaves every gradient the sum over the ranks (each rank's loss is its rows'
 * mean / N, so the sum is the global batch's gradient); disarms the net. The first
 * failure of a bucket started during backward is reported here. */
ganfw_status ganfw_reducer_finish(ganfw_reducer *r, ganfw_net *net);

#endif
