/* A run's set-up, shared by `ganfw CONFIG`, `validate` and the tools: the config (after
 * extends and --set), the core's own keys, the plugin search path and the plugins the
 * config names, loaded and kind-checked. */
#ifndef GANFW_RUN_H
#define GANFW_RUN_H

#include "config/config.h"
#include "runtime/ctx.h"
#include "plugin/plugin_host.h"
#include "train/insert.h"

#define GANFW_MAX_MEMORY_PLUGINS 8
#define GANFW_MAX_ROLE_MODELS    8

typedef struct ganfw_run {
  ganfw_config *config;
  const char *config_path;
  char **plugin_dirs; /* plugin_path entries as absolute folders (see run.c) */
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

/* Loads `config_path`, applies the `--set` assignments, reads the core's keys and loads
 * every plugin named. *out is owned by the caller (ganfw_run_close). */
ganfw_status ganfw_run_open(const char *config_path, const char *const *sets, int nsets,
                            ganfw_run **out);
void ganfw_run_close(ganfw_run *run); /* accepts NULL */

/* The model's name for messages: model.plugin's, or "model.nets" when each net has its own
 * plugin, or "none". */
const char *ganfw_run_model_name(const ganfw_run *run);

#endif
