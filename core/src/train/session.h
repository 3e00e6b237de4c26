/* A training session: what `ganfw CONFIG`, `sample`, `validate` and the A/B tools build
 * from a run's config: the context (backend + allocator), the model plugin's nets, one
 * optimizer per trainable net, and the training data. */
#ifndef GANFW_SESSION_H
#define GANFW_SESSION_H

#include "data/data.h"
#include "data/pair.h"
#include "ganfw/ganfw.h"
#include "nn/net.h"
#include "train/outputs.h"
#include "train/run.h"
#include "train/schedule.h"

/* The most nets a model builds for one run (the roles a trainer names). */
#define GANFW_MAX_NETS 8

/* One net of the model by role, in the order the trainer names them (generator,
 * discriminator for a GAN; classifier). */
/* Called when a step starts its phase number `phase` (0, 1, ...) named `name` ("D step",
 * a trainer plugin's "reconstruction pass"): the planner measures each phase apart. */
typedef void (*ganfw_phase_hook)(void *user, int32_t phase, const char *name);

typedef struct ganfw_session_net {
  const char *role; /* owned by the trainer plugin or static */
  ganfw_net *net;   /* owned by the model */
  int32_t frozen;   /* trained by no optimizer: eval mode, no gradients */
  int32_t optim;    /* index into ganfw_session.optim, -1 when frozen */
} ganfw_session_net;

/* One optimizer and the net it moves. */
typedef struct ganfw_session_optim {
  const char *role; /* "generator", "discriminator", "classifier" */
  ganfw_net *net;
  const ganfw_optim_vt *vt;
  void *self;
  ganfw_param *params; /* the net's trainable parameters, owned by the session */
  int64_t n_params;
  double lr;      /* the rate of the next step: the trainers set it from the schedule */
  double base_lr; /* the configured rate (optim.lr, lr_generator, lr_discriminator) */
} ganfw_session_optim;

/* One memory strategy of the config's `memory:` list. */
typedef struct ganfw_session_memory {
  const char *name;
  const ganfw_memory_vt *vt;
  void *self;
} ganfw_session_memory;

/* train.on_nonfinite: what a step does when, without a loss scaler, a loss or a gradient is
 * NaN or inf. */
enum {
  GANFW_NONFINITE_STOP = 0, /* stop the run before the net's update, naming step, net, layer */
  GANFW_NONFINITE_SKIP = 1, /* skip the net's update (and put its BatchNorm statistics back) */
  GANFW_NONFINITE_COUNT
};
/* "stop", "skip"; "unknown" outside the range. */
const char *ganfw_nonfinite_policy_name(int32_t policy);

typedef struct ganfw_ema ganfw_ema;         /* train/ema.h */
typedef struct ganfw_dist ganfw_dist;       /* dist/dist.h */
typedef struct ganfw_reducer ganfw_reducer; /* train/reducer.h */
typedef struct ganfw_sib ganfw_sib;         /* train/sib.h */

typedef struct ganfw_prune_run ganfw_prune_run; /* train/prune_run.h */

typedef struct ganfw_train_settings {
  int64_t batch_size;
  int64_t epochs;    /* 0: until max_steps */
  int64_t max_steps; /* 0: until epochs */
  int64_t log_every, sample_every, checkpoint_every;
  double label_smoothing; /* D's real target is 1 - label_smoothing */
  const char *resume;     /* "" none, "latest", or a checkpoint path */
  int64_t samples;        /* images in each sample grid */
  int64_t sample_nrow;
  int32_t on_nonfinite;        /* GANFW_NONFINITE_* (train.on_nonfinite) */
  int64_t max_nonfinite_skips; /* with skip: this many skipped steps in a row stop the run */
  int64_t d_steps_per_g_step;  /* a GAN's n_critic: G steps after every this many D steps */
  int32_t reuse_fake;          /* train.reuse_fake: the G step reuses the D step's G(z) */
  double ema_decay;            /* train.ema.decay; 0: no generator EMA */
  int64_t ema_start;           /* train.ema.start */
  const char *ema_net;         /* train.ema.net: a trainer plugin's averaged net; NULL: its
                                  generating net */
  double clip_grad_norm[GANFW_MAX_NETS]; /* global-norm clipping per optimizer ([0] G or
                                            classifier, [1] D; a trainer plugin's in the
                                            order of its optimizers) as
                                            torch.nn.utils.clip_grad_norm_; 0: off */
  int64_t update_every[GANFW_MAX_NETS];  /* train.update_every: a trainer plugin's net r
                                            updates on every this-many-th step (1: each) */
} ganfw_train_settings;

typedef struct ganfw_session {
  ganfw_run *run;              /* borrowed */
  ganfw_calibration predicted; /* the plan's peaks, set by the caller before training */
  ganfw_ctx *ctx;
  const ganfw_model_vt *model_vt;
  void *model;
  struct {
    const ganfw_model_vt *vt;
    void *self;
  } role_model[GANFW_MAX_ROLE_MODELS];    /* model.nets: run->role_model[i]'s instance */
  int32_t family;                         /* GANFW_MODEL_* */
  ganfw_session_net nets[GANFW_MAX_NETS]; /* every net by role (the GAN's and the
                                             classifier's too) */
  int32_t n_nets;
  const ganfw_trainer_vt *trainer_vt; /* family GANFW_MODEL_NETS: the trainer plugin */
  void *trainer;
  const char *trainer_name;
  ganfw_net *generator, *discriminator, *classifier; /* owned by the model */
  const char *generator_role; /* the generator's role: "generator" for a GAN, a trainer
                                 plugin's generating net (its generator()), NULL: none */
  int64_t nz;
  int64_t n_classes; /* model.conditional: the data set's classes K (G and D get one-hot
                        classes beside the noise and the image); 0: unconditional */
  ganfw_session_optim optim[GANFW_MAX_NETS]; /* [0] generator or classifier, [1]
                                                discriminator; a trainer plugin's in its
                                                roles' order */
  int32_t n_optim;
  ganfw_session_memory memory[GANFW_MAX_MEMORY_PLUGINS]; /* in config order */
  int32_t n_memory;
  ganfw_exec_options exec; /* after every strategy's configure */
  int32_t loss_scaling;    /* a strategy scales the loss: non-finite steps are skipped,
                              not fatal */
  ganfw_data_info data_info;
  ganfw_dataset *data; /* NULL when opened without data */
  ganfw_loader_config loader_cfg;
  const char *data_kind, *data_path; /* data.dataset and data.path (borrowed from the config) */
  ganfw_transform transform;         /* data's transforms, e.g. to open the test split */
  ganfw_pair_spec pair;              /* data.pair: the trainer's GANFW_INPUT_PAIR */
  ganfw_dataset *other;              /* data.other: GANFW_INPUT_OTHER; NULL when absent */
  const char *other_kind, *other_path;
  ganfw_train_settings train;
  const ganfw_objective_vt *objective_vt; /* objective.plugin; NULL: the built-in BCE */
  void *objective;
  const char *objective_name;
  /* Penalties on D's input gradient (objective.gp, r1, r2, r1_every; train/penalty.h): 0
   * weights are off. r1 and r2 run on every r1_every-th D step with their weight times
   * r1_every (StyleGAN2's lazy regularisation). */
  double penalty_gp, penalty_r1, penalty_r2;
  int64_t penalty_every;
  ganfw_ema *ema;                        /* train.ema: the generator's averages; NULL when off */
  ganfw_schedule schedule;               /* optim.schedule, for every optimizer */
  struct ganfw_group_spec *param_groups; /* optim.param_groups (train/param_groups.h) */
  int32_t n_param_groups;
  /* `mpirun -np N` (train/dp.h): this rank's communicator and, per optimizer, its gradient
   * buckets; NULL alone */
  ganfw_dist *dist;
  ganfw_reducer *reducer[GANFW_MAX_NETS]; /* data-parallel: one per optimizer */
  ganfw_sib *sib; /* memory strategy step_in_backward (train/sib.h); NULL when off */

  /* the config's prune: section (train/prune_run.h); NULL: none */
  ganfw_prune_run *prune;
} ganfw_session;

/* Builds everything from run's config. With `with_data` 0 the data set is not opened and
 * `info` (not NULL) gives its shape (e.g. from a checkpoint). *out is owned by the caller
 * (ganfw_session_close). */
ganfw_status ganfw_session_open(ganfw_run *run, int32_t with_data, const ganfw_data_info *info,
                                ganfw_session **out);
void ganfw_session_close(ganfw_session *s); /* accepts NULL */

/* The net a layer item names (model.freeze, prune.layers, `ganfw prune --layers`): "ROLE:"
 * before the rest ("generator:main.0"), which may be left out when the model has one net;
 * *rest points after the colon. NULL when no net has that role, or the role is left out
 * with several nets. */
ganfw_net *ganfw_session_item_net(const ganfw_session *s, const char *item, const char **rest);
/* The same for a config list item (model.freeze, prune.layers): its text in *text, the net
 * in *net, the rest in *rest; an empty item, or one whose net is not named, is
 * GANFW_ERR_CONFIG naming the item and the roles to put first. */
ganfw_status ganfw_session_cfg_item_net(const ganfw_session *s, const ganfw_cfg *item,
                                        const char **text, ganfw_net **net, const char **rest);

#endif
