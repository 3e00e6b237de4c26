/* A run's set-up, shared by `ganfw CONFIG`, `validate` and the tools: the config (after
 * extends and --set), the core's own keys, the plugin search path and the plugins the
 * config names, loaded and kind-checked. A command reads its config file once
 * (ganfw_run_config) and opens every run it makes from it: the plan before a training run,
 * the run itself, the OOM advice's variants. */
#ifndef GANFW_RUN_H
#define GANFW_RUN_H

#include "config/config.h"
#include "runtime/ctx.h"
#include "plugin/plugin_host.h"
#include "train/insert.h"

#define GANFW_MAX_MEMORY_PLUGINS 8
#define GANFW_MAX_ROLE_MODELS    8

typedef struct ganfw_run {
  ganfw_config *config;    /* the run's own copy */
  const char *config_path; /* the config file's, as the command named it (owned by config) */
  char **plugin_dirs;      /* plugin_path entries as absolute folders (see run.c) */
  int64_t n_plugin_dirs;
  ganfw_ctx_options ctx_opt;
  const char *out_dir;
  ganfw_plugin *model;         /* NULL when the config names none */
  ganfw_plugin *optim;         /* NULL when the config names none */
  ganfw_plugin *objective;     /* objective.plugin; NULL: the built-in BCE with logits */
  ganfw_plugin *trainer;       /* trainer.plugin when it names a plugin; NULL: the model family's
                                  built-in trainer (gan or classifier) */
  const char *trainer_builtin; /* trainer.plugin when it names a built-in ("gan",
                                  "classifier"); NULL otherwise */
  /* model.nets: {ROLE: {plugin: NAME, ...}, ...}: one model plugin per net a trainer
   * plugin drives (model is then NULL) */
  ganfw_plugin *role_model[GANFW_MAX_ROLE_MODELS];
  const char *role_model_role[GANFW_MAX_ROLE_MODELS];
  const ganfw_cfg *role_model_cfg[GANFW_MAX_ROLE_MODELS];
  int32_t n_role_models;
  /* model.insert and model.nets.ROLE.insert (train/insert.h): layers from layer plugins the
   * config inserts into the model's nets; NULL where there is no list */
  ganfw_inserts *inserts;
  ganfw_inserts *role_inserts[GANFW_MAX_ROLE_MODELS];
  ganfw_plugin *memory[GANFW_MAX_MEMORY_PLUGINS];
  const ganfw_cfg *memory_cfg[GANFW_MAX_MEMORY_PLUGINS];
  int32_t n_memory;
} ganfw_run;

/* One command's config: its file read once, with its `extends:` bases and the --set
 * assignments applied (config/config.h), for the runs the command opens from it. No one reads
 * it itself: each run reads a copy of its own (marks, defaults and unread keys are the run's),
 * so that a plan before a training run leaves the run's config as the file made it. The
 * plugins its runs load stay loaded with it, and its later runs share them
 * (plugin/plugin_host.h) instead of loading their files again. */
typedef struct ganfw_run_config ganfw_run_config;

/* Loads `path` and applies sets[0..nsets) in order. An unreadable file is GANFW_ERR_CONFIG
 * (the user's to fix, like a wrong key: exit code 2) with the loader's message; a bad
 * assignment is ganfw_config_set's error. *out owned by the caller (ganfw_run_config_free). */
ganfw_status ganfw_run_config_open(const char *path, const char *const *sets, int nsets,
                                   ganfw_run_config **out);
/* `base` with more --set assignments (a variant a tool plans), without reading the file
 * again; the plugins its runs load are kept with base's. *out owned by the caller, and
 * valid while `base` is. */
ganfw_status ganfw_run_config_derive(const ganfw_run_config *base, const char *const *sets,
                                     int nsets, ganfw_run_config **out);
void ganfw_run_config_free(ganfw_run_config *rc); /* accepts NULL */
/* The config file's path as the command named it, for messages; borrowed, valid while rc is. */
const char *ganfw_run_config_path(const ganfw_run_config *rc);
/* The parsed config, to copy (ganfw_config_copy) and read the copy: reading it itself would
 * mark its keys for every later run. Borrowed, valid while rc is. */
const ganfw_config *ganfw_run_config_tree(const ganfw_run_config *rc);

/* Reads the core's keys of a copy of rc's config and loads every plugin it names (kept with
 * rc for its next runs). *out is owned by the caller (ganfw_run_close) and does not need rc
 * after this call. */
ganfw_status ganfw_run_open(const ganfw_run_config *rc, ganfw_run **out);
/* ganfw_run_config_open and ganfw_run_open, for a caller that opens one run of the file. */
ganfw_status ganfw_run_open_file(const char *path, const char *const *sets, int nsets,
                                 ganfw_run **out);
void ganfw_run_close(ganfw_run *run); /* accepts NULL */

/* The model's name for messages: model.plugin's, or "model.nets" when each net has its own
 * plugin, or "none". */
const char *ganfw_run_model_name(const ganfw_run *run);

#endif
