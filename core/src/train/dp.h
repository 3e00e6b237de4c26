/* A session's data parallelism (dist/dist.h): what the trainers call around a step when
 * the session runs as one of N ranks. With one rank every call here does nothing. */
#ifndef GANFW_TRAIN_DP_H
#define GANFW_TRAIN_DP_H

#include "dist/dist.h"
#include "train/session.h"

/* After the model is built (open_session): reads the `dist` section, joins the job's
 * communicator (a plan: one that sends nothing), refuses a config that differs between
 * the ranks, checks train.batch_size splits evenly, and gives every rank rank 0's
 * parameters and buffers. s->dist stays NULL alone. */
ganfw_status ganfw_dp_open(ganfw_session *s);
/* After the optimizers: the gradient buckets of each (train/reducer.h). */
ganfw_status ganfw_dp_open_reducers(ganfw_session *s);
void ganfw_dp_close(ganfw_session *s);

/* 1 when this process writes the run's outputs (rank 0, or alone). */
int32_t ganfw_dp_writes(const ganfw_session *s);
/* The ranks sharing each batch (1 alone). A rank's loss is its rows' mean times 1/ranks, so
 * that its gradients are its rows' part of the global batch's and their sum over the
 * ranks (ganfw_dp_reduce) is the global gradient, with the magnitudes one process has (a
 * loss scaler's overflow point included). */
int32_t ganfw_dp_ranks(const ganfw_session *s);
/* This process's rank among them (0 alone). */
int32_t ganfw_dp_rank(const ganfw_session *s);
/* This rank's rows of the global batch (train.batch_size alone). */
int64_t ganfw_dp_local_batch(const ganfw_session *s);

/* The loader settings of this rank: its share of every global batch (by micro-batch, so
 * that its micro-batch k is its part of the global micro-batch k). */
void ganfw_dp_loader_config(const ganfw_session *s, ganfw_loader_config *lc);
/* A [local batch, ...] tensor for this rank's rows of the [train.batch_size, ...] tensor
 * `global` (the noise every rank draws whole): `global` itself (a new reference) alone, else
 * a new tensor of the same category that ganfw_dp_take_rows fills. NULL on failure. */
ganfw_tensor *ganfw_dp_rows_tensor(ganfw_session *s, ganfw_tensor *global, const char *name);
/* Copies this rank's rows of `global` into `local` (the rows its loader decodes); nothing
 * alone. */
ganfw_status ganfw_dp_take_rows(ganfw_session *s, const ganfw_tensor *global, ganfw_tensor *local);

/* The start of training step `step` (from 1): heartbeat, fault point (tests), and with
 * dist.batchnorm: local the running statistics from rank 0 (DDP's broadcast_buffers). */
ganfw_status ganfw_dp_step_begin(ganfw_session *s, int64_t step);
/* With dist.batchnorm: local, rank 0's running statistics on every rank (before an
 * evaluation, which every rank runs alike). */
ganfw_status ganfw_dp_sync_buffers(ganfw_session *s);
/* The next backward of optimizer opt's net is the step's last for it. */
void ganfw_dp_arm(ganfw_session *s, int32_t opt);
/* Before optimizer opt steps: its gradients become the sum over the ranks. */
ganfw_status ganfw_dp_reduce(ganfw_session *s, int32_t opt);
/* The step ends without an update of opt (a failure, a skipped non-finite step): its
 * net's backward no longer starts buckets. */
void ganfw_dp_disarm(ganfw_session *s, int32_t opt);
/* v[0..n) become their mean over the ranks (a step's losses, for the log and for the
 * decisions every rank must take alike). */
ganfw_status ganfw_dp_mean(ganfw_session *s, double *v, int32_t n, const char *what);
/* BatchNorm takes this rank's own statistics until _end (rank 0 alone making samples). */
void ganfw_dp_local_begin(ganfw_session *s);
void ganfw_dp_local_end(ganfw_session *s);

/* Checkpoints of a sharded optimizer (train/zero.h), on every rank: before a save and
 * after it; before a resume and after it (ok 0: the resume failed). */
ganfw_status ganfw_dp_before_save(ganfw_session *s);
void ganfw_dp_after_save(ganfw_session *s);
ganfw_status ganfw_dp_before_resume(ganfw_session *s);
ganfw_status ganfw_dp_after_resume(ganfw_session *s, int32_t ok);
/* Every rank takes rank 0's outcome `st` of something rank 0 alone did (writing a
 * checkpoint or samples): on the others a failure there becomes one naming rank 0. */
ganfw_status ganfw_dp_agree(ganfw_session *s, ganfw_status st, const char *what);

/* 1 when any rank's flag is set (e.g. Ctrl-C reached one of them): every rank stops
 * alike. Alone: the flag. */
int32_t ganfw_dp_any(ganfw_session *s, int32_t flag, ganfw_status *st);

/* Every rank: the peaks of each rank (allocated, reserved, comm) into cal->rank_peak for
 * memory.json, and rank 0 logs them. Nothing alone. */
ganfw_status ganfw_dp_gather_peaks(ganfw_session *s, ganfw_calibration *cal);

/* Seconds the ranks spent in collectives since the last call (then reset). */
double ganfw_dp_take_comm_seconds(ganfw_session *s);

#endif
