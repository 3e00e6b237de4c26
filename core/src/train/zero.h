/* ZeRO stage 1 (memory strategy zero): the optimizer state sharded across the ranks of a
 * data-parallel run. The parameters of one optimizer, laid end to end in their order, are cut
 * into N equal ranges (the last may be shorter); rank r creates the optimizer plugin over
 * views of the parameters and gradients inside range r, so it keeps 1/N of the state and
 * updates 1/N of the weights; after the step every parameter is gathered from the ranks
 * holding its pieces. Adam and SGD update element by element, so the result is the one
 * unsharded optimizer's. Checkpoints hold the whole state under the unsharded names (rank
 * 0 gathers it before writing; on resume each rank takes its range), so a run resumes on
 * any number of ranks, with or without zero. */
#ifndef GANFW_TRAIN_ZERO_H
#define GANFW_TRAIN_ZERO_H

#include "dist/dist.h"
#include "train/session.h"

/* Creates optimizer `vt` (its plugin named `plugin_name`, its section `cfg`) for so's
 * parameters as this rank's shard, and puts the wrapper in so->vt / so->self. */
ganfw_status ganfw_zero_create(ganfw_ctx *ctx, ganfw_dist *d, ganfw_session_optim *so,
                               const ganfw_optim_vt *vt, const ganfw_cfg *cfg);
/* 1 when so's optimizer is sharded. */
int32_t ganfw_zero_sharded(const ganfw_session_optim *so);
/* Elements of optimizer state this rank keeps, and the number of state tensors per
 * parameter (for reports). */
int64_t ganfw_zero_shard_elems(const ganfw_session_optim *so);

/* Checkpoints (every rank calls them, in the same order):
 * gather: before a save, rank 0 gets the whole state in full-size tensors under the
 *   unsharded names; the optimizer's state_tensor then hands those out;
 * expand: before a resume, every rank gets such tensors for the file's values;
 * scatter: after a resume, each rank copies its range out of them;
 * release: frees them (after the save or the scatter). */
ganfw_status ganfw_zero_gather(ganfw_session_optim *so);
ganfw_status ganfw_zero_expand(ganfw_session_optim *so);
ganfw_status ganfw_zero_scatter(ganfw_session_optim *so);
void ganfw_zero_release(ganfw_session_optim *so);

#endif
