/* The trainer plugin interface (ABI 1.6): the program of one training step, as PyTorch
 * Lightning's training_step. A trainer names the nets it drives by role ("encoder",
 * "decoder", "student", ...), and the model plugin builds them; the config gives each
 * trained net its optimizer. Once per step (once per micro-batch with memory strategy
 * accumulate) the core calls step(), and the trainer runs the nets through the step calls
 * of ganfw_step_api (host->get_extension(host, GANFW_EXT_STEP)): forwards with or without a
 * tape, the core's losses, backwards into the nets it chooses, optimizer steps by role, and
 * named scalars for the progress line and metrics.csv.
 *
 * The core keeps around every trainer, without the trainer knowing: the compute dtype and
 * the loss scaler (amp), micro-batches (accumulate: zero_grad and optimizer_step act on
 * the first and the last micro-batch only), checkpoint segments, the plan (`ganfw plan`
 * runs step() on the meta backend), gradient clipping (train.clip_grad_norm per role),
 * the non-finite policy (train.on_nonfinite), learning-rate schedules, checkpoints of
 * every net and optimizer, and resume. docs/ABI.md, "Writing a trainer", walks through one.
 *
 * Tensors: every tensor a step call returns is f32, owned by the step, and released when
 * the call to step() (or sample/evaluate) returns; release() drops one earlier. Gradients
 * returned by loss() already carry the step's gradient scale (the loss scale over the
 * micro-batch count): a gradient the trainer computes itself is multiplied by
 * grad_scale() before it goes into backward(). */
#ifndef GANFW_TRAINER_PLUGIN_H
#define GANFW_TRAINER_PLUGIN_H

#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* host->get_extension(host, GANFW_EXT_STEP): const ganfw_step_api * (cores from ABI 1.6). */
#define GANFW_EXT_STEP "ganfw.step/1"

typedef struct ganfw_step ganfw_step; /* opaque: the step, sample or evaluation running now */

/* What the data gives a step (ganfw_step_api.input), stored as int32_t. */
enum {
  GANFW_INPUT_IMAGES = 0, /* f32 [N,C,H,W] after the data's transforms */
  GANFW_INPUT_LABELS = 1, /* f32 [N,1]: class ids as whole numbers; NULL when unlabelled */
  GANFW_INPUT_PAIR = 2,   /* f32 [N,C,H,W]: data.pair's input made from each image of
                             GANFW_INPUT_IMAGES (grayscale, masked, downscaled), which is
                             its target; NULL without data.pair */
  GANFW_INPUT_OTHER = 3,  /* f32 [N,C,H,W]: images of data.other, a second data set drawn
                             apart from the first (unpaired, its own shuffle), of the same
                             shape; NULL without data.other */
  GANFW_INPUT_COUNT
};

/* The core's losses (ganfw_step_api.loss), stored as int32_t. pred and target are f32 of
 * one shape; the loss is reduced as `reduction` says. */
enum {
  GANFW_LOSS_MSE = 0,           /* (pred - target)^2, as nn.MSELoss */
  GANFW_LOSS_L1 = 1,            /* |pred - target|, as nn.L1Loss (gradient sign(pred - target)) */
  GANFW_LOSS_BCE_LOGITS = 2,    /* nn.BCEWithLogitsLoss: pred logits, target in [0, 1] */
  GANFW_LOSS_CROSS_ENTROPY = 3, /* nn.CrossEntropyLoss: pred logits [N,K], target class ids
                                   f32 [N,1] (GANFW_INPUT_LABELS); the mean over the rows
                                   (either reduction) */
  GANFW_LOSS_KL_SOFT = 4,       /* KL(softmax(target) || softmax(pred)) per row, summed over
                                   the K classes and averaged over the rows (F.kl_div(
                                   log_softmax(pred), softmax(target), 'batchmean')); pred
                                   and target logits [N,K], no gradient into target.
                                   Distillation at temperature T passes pred/T and target/T
                                   and weight T^2 / T (the 1/T of d(pred/T)/dpred) */
  GANFW_LOSS_KIND_COUNT
};
enum {
  GANFW_REDUCE_MEAN = 0,    /* the mean over every element (PyTorch's reduction='mean') */
  GANFW_REDUCE_ROW_SUM = 1, /* summed over each row, averaged over the rows (a VAE's
                               per-image reconstruction term) */
  GANFW_REDUCE_COUNT
};

/* ganfw_step_api.forward modes, stored as int32_t. */
enum {
  GANFW_FWD_NO_GRAD = 0, /* keeps nothing: no backward through this output */
  GANFW_FWD_TAPE = 1,    /* records what backward needs */
};

/* ganfw_step_api.backward flags. */
#define GANFW_GRAD_PARAMS 1u /* add the parameter gradients of the output's net */
#define GANFW_GRAD_INPUT  2u /* return the gradient of the forward's input in *dx */

/* ganfw_trainer_vt.role flags. */
#define GANFW_ROLE_FROZEN 1u /* not trained: eval mode, no gradients, no optimizer */

/* What a call of the trainer is for (ganfw_step_api.mode). */
enum {
  GANFW_STEP_TRAIN = 0,    /* a training step: backward and optimizer_step are allowed */
  GANFW_STEP_SAMPLE = 1,   /* sample(): no-grad forwards; normal() draws fixed noise */
  GANFW_STEP_EVALUATE = 2, /* evaluate(): no-grad, nets in eval mode */
};

/* The step calls. Every entry is [main-thread] and valid only during a call of step(),
 * sample() or evaluate() with the `st` the core passed. Errors are recorded as with
 * host->error and returned. */
typedef struct ganfw_step_api {
  uint32_t struct_size; /* sizeof(ganfw_step_api) of the core */
  uint32_t reserved0;
  /* The net of `role` (one the trainer declared), or NULL with an error. */
  ganfw_net *(*net)(ganfw_step *st, const char *role);
  /* The batch's tensor `which` (GANFW_INPUT_*), borrowed; NULL when the data has none. */
  ganfw_tensor *(*input)(ganfw_step *st, int32_t which);
  /* GANFW_STEP_*. */
  int32_t (*mode)(ganfw_step *st);
  /* The number of steps finished before this one (0 on the first). */
  int64_t (*step_index)(ganfw_step *st);
  /* The factor a trainer's own gradient is multiplied by before backward (loss() applies
   * it itself): the strategies' loss scale over the micro-batch count. */
  double (*grad_scale)(ganfw_step *st);
  /* Starts a phase named `name` ("reconstruction pass", "D step"): `ganfw plan` and
   * `compare` measure each phase's peak apart and an OOM report names the phase. */
  ganfw_status (*phase)(ganfw_step *st, const char *name);
  /* y = net(x): x is f32 [N,...] of the shape the net was built for (a batch input, an
   * output of an earlier forward, or a tensor the trainer made). With GANFW_FWD_TAPE,
   * backward(y) may run once. *y is f32, owned by the step. */
  ganfw_status (*forward)(ganfw_step *st, ganfw_net *net, ganfw_tensor *x, int32_t mode,
                          ganfw_tensor **y);
  /* Backward through the net that made y (a forward with a tape in this call) with dy = dL/dy
   * (f32, y's shape, already times grad_scale): GANFW_GRAD_PARAMS adds its parameter
   * gradients (a trained net only), GANFW_GRAD_INPUT returns dL/dx in *dx (f32, owned by
   * the step), e.g. to go on into the net that made x. Consumes y's tape. A call without
   * GANFW_GRAD_PARAMS leaves the net's gradients as they are (PyTorch's backward into
   * G through a D whose gradients are not wanted). */
  ganfw_status (*backward)(ganfw_step *st, ganfw_tensor *y, ganfw_tensor *dy, uint32_t flags,
                           ganfw_tensor **dx);
  /* Releases a tensor the step returned (and y's tape when it has one) before the call
   * ends. */
  void (*release)(ganfw_step *st, ganfw_tensor *t);
  /* A loss of the core (GANFW_LOSS_*, GANFW_REDUCE_*): *value is the loss (unscaled), and
   * when dpred is not NULL, *dpred = weight * grad_scale * dL/dpred (owned by the step).
   * `name` ("loss_rec") names the loss when it is NaN or inf: the core then stops the run or
   * (train.on_nonfinite: skip) skips the rest of the step's updates, as for its own trainers;
   * a skipped step's remaining backward and optimizer_step calls do nothing. */
  ganfw_status (*loss)(ganfw_step *st, int32_t kind, int32_t reduction, ganfw_tensor *pred,
                       ganfw_tensor *target, double weight, const char *name, double *value,
                       ganfw_tensor **dpred);
  /* Forgets the gradients of `role` (the next backward writes them). The core zeroes every
   * trained net at the start of a step and after its optimizer step; with micro-batches the
   * call does nothing after the first micro-batch. */
  ganfw_status (*zero_grad)(ganfw_step *st, const char *role);
  /* Steps the optimizer of `role` with the gradients its backwards added: the strategies'
   * after_backward (unscale, skip on inf), the non-finite check, train.clip_grad_norm, the
   * scheduled learning rate. With micro-batches it runs on the last micro-batch only. */
  ganfw_status (*optimizer_step)(ganfw_step *st, const char *role);
  /* Reports scalar `name` (one the trainer declared) for this call: metrics.csv and the
   * progress line (averaged over micro-batches), or eval.csv and `ganfw eval` (averaged over
   * the evaluated images, weighted by rows). */
  ganfw_status (*report)(ganfw_step *st, const char *name, double value);
  /* A new f32 tensor of shape[0..ndim) drawn from N(0, 1), owned by the step: from the
   * training RNG in a step (resumed bitwise), from a fixed stream of the run's seed in
   * sample() (the same grid every time). */
  ganfw_status (*normal)(ganfw_step *st, int32_t ndim, const int64_t *shape, ganfw_tensor **out);
  /* A new uninitialised f32 tensor owned by the step, e.g. for the trainer's own math with
   * host->tensor_* ops. `name` shows in memory reports. */
  ganfw_status (*tensor)(ganfw_step *st, int32_t ndim, const int64_t *shape, const char *name,
                         ganfw_tensor **out);
  /* --- added in minor 7 (ABI 1.7, 2026-12): read when struct_size covers it --- */
  /* 1 when the optimizer of `role` updates in this step: train.update_every.<role> (N: on
   * every N-th step, the 1st being step_index() N - 1; 1 when unset). optimizer_step(role)
   * on another step does nothing, so a trainer that skips the role's backward there saves
   * its work (WGAN's n_critic: the generator's every 5th step). 0 outside a training step
   * and for a frozen net. */
  int32_t (*due)(ganfw_step *st, const char *role);
} ganfw_step_api;

/* Add new members at the end only, in a block dated with the minor version. Callbacks are
 * [main-thread]. */
typedef struct ganfw_trainer_vt {
  uint32_t struct_size; /* sizeof(ganfw_trainer_vt) */
  uint32_t kind;        /* GANFW_VT_TAG_TRAINER */
  /* Reads the config's `trainer` section. *self is owned by the plugin, freed by destroy.
   * `api` stays valid while the plugin is loaded. */
  ganfw_status (*create)(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                         const ganfw_step_api *api, void **self);
  void (*destroy)(void *self); /* accepts NULL */
  /* The i-th role the trainer drives: fills *name (owned by the plugin) and *flags
   * (GANFW_ROLE_*) and returns 1, or returns 0 past the last. The core asks the model for
   * each (a role the model does not build is an error naming the trainer and the model). */
  int32_t (*role)(void *self, int32_t i, const char **name, uint32_t *flags);
  /* The i-th scalar the trainer reports, as role(): metrics.csv's columns after "step,epoch". */
  int32_t (*scalar)(void *self, int32_t i, const char **name);
  /* One training step (one micro-batch of it). */
  ganfw_status (*step)(void *self, ganfw_step *st);
  /* (optional) What a sample grid shows: images [K,C,H,W] (f32, the data's range; a tensor
   * the step returned) in rows of *nrow. The batch input holds the first train.samples
   * images of the test split (of the training set when there is none). */
  ganfw_status (*sample)(void *self, ganfw_step *st, ganfw_tensor **images, int64_t *nrow);
  /* (optional) One test batch, nets in eval mode and no-grad: the scalars it reports are
   * averaged over the test split into eval.csv (per epoch) and `ganfw eval`. */
  ganfw_status (*evaluate)(void *self, ganfw_step *st);
  /* (optional) The name of the net `ganfw sample` and `score` take as the generator (one
   * that maps noise [N,nz,1,1] or [N,nz] to images), and its latent size; NULL when none. */
  const char *(*generator)(void *self, int64_t *latent_dim);
  /* (optional) An optional capability by its versioned id (see ganfw/plugin.h). */
  const void *(*get_extension)(const char *id);
} ganfw_trainer_vt;

#ifdef __cplusplus
}
#endif
#endif
