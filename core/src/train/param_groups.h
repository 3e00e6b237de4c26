/* optim.param_groups: PyTorch's parameter groups for any optimizer plugin. Each group picks
 * parameters by name prefix and/or shape, and sets its own lr and optimizer keys on top of
 * the `optim` section's; a parameter joins the first group that matches it, the rest stay
 * in the default group (the section itself). The core makes one instance of the plugin per
 * group over that group's parameters and hands the trainers, checkpoints and plans one
 * optimizer table over them all, so a plugin needs nothing to support groups. Without the
 * key the plugin is created as before, alone. Users: docs/CONFIG.md, "Parameter groups". */
#ifndef GANFW_PARAM_GROUPS_H
#define GANFW_PARAM_GROUPS_H

#include "train/session.h"

/* What a group's `select` picks, beside its prefix. */
enum {
  GANFW_GROUP_SELECT_ALL = 0,           /* every parameter (of the prefix) */
  GANFW_GROUP_SELECT_BIAS_AND_NORM = 1, /* 1-D ones: biases and normalisation weights */
  GANFW_GROUP_SELECT_WEIGHTS = 2,       /* the others: conv and linear weights, embeddings */
  GANFW_GROUP_SELECT_COUNT
};

/* One item of optim.param_groups as read from the config. */
typedef struct ganfw_group_spec {
  const ganfw_cfg *node; /* the list item (a map) */
  const char *prefix;    /* NULL: any name */
  int32_t select;        /* GANFW_GROUP_SELECT_* */
  const char *net;       /* a role ("generator", ...), NULL: every net */
  double lr;             /* the group's base rate; 0: the optimizer's */
  int64_t matched;       /* parameters it matched over every net */
  int64_t taken;         /* of those, the ones that joined it (no earlier group had them) */
  const char *taken_by;  /* the earlier group's path that took one of its parameters */
} ganfw_group_spec;

/* Reads optim.param_groups of `optim` into *out (NULL and 0 when absent). A malformed group
 * (not a map, neither prefix nor select, an unknown select or net, a key of the whole
 * optimizer such as schedule) is GANFW_ERR_CONFIG naming its key. `roles` are the model's
 * nets, for `net`. *out owned by the caller (free). */
ganfw_status ganfw_param_groups_read(const ganfw_cfg *optim, const char *const *roles,
                                     int32_t n_roles, ganfw_group_spec **out, int32_t *n);

/* Creates o's optimizer over o->params[0..o->n_params) split into `specs` groups (their
 * match counts grow): o->vt and o->self become the grouped table's. `optim` is the config's
 * section; `plugin` the loaded optimizer. Plugin errors name the group. */
ganfw_status ganfw_param_groups_create(ganfw_ctx *ctx, ganfw_session_optim *o,
                                       const ganfw_cfg *optim, ganfw_plugin *plugin,
                                       ganfw_group_spec *specs, int32_t n_specs);

/* After every optimizer was created: a group that matched no trainable parameter of any
 * net, or whose every parameter an earlier group took, is GANFW_ERR_CONFIG naming it and
 * the parameters there are. */
ganfw_status ganfw_param_groups_check(const ganfw_group_spec *specs, int32_t n_specs,
                                      const ganfw_session_optim *optims, int32_t n_optim);

/* Sets o->lr, and every group's rate, for optimizer step `step` of `total`. */
void ganfw_optim_set_lr(ganfw_session_optim *o, const ganfw_schedule *schedule, int64_t step,
                        int64_t total);

/* The number of groups of o's optimizer, the default one first (0: not grouped), and the
 * i-th one's parameter count and current rate, for logs and tests. */
int32_t ganfw_param_groups_count(const ganfw_session_optim *o);
int64_t ganfw_param_group_size(const ganfw_session_optim *o, int32_t i);
double ganfw_param_group_lr(const ganfw_session_optim *o, int32_t i);

#endif
