/* A run's set-up (see run.h): the command's config read once, then per run a copy of it,
 * core keys, plugin search path, plugins. */
#include "train/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

/* --- the command's config ------------------------------------------------------------------ */

/* The plugins a command's runs loaded, one hold on each, so that its next runs share them
 * (ganfw_plugin_load) instead of loading their files again. */
typedef struct kept_plugins {
  ganfw_plugin **p;
  int64_t n, cap;
} kept_plugins;

struct ganfw_run_config {
  ganfw_config *config; /* as loaded and --set; only copied */
  kept_plugins *kept;   /* own, or the base's of a derived config */
  kept_plugins own;
};

static int grow_kept(kept_plugins *k) {
  int64_t cap = k->cap ? 2 * k->cap : 8;
  ganfw_plugin **p = realloc(k->p, (size_t)cap * sizeof *p);
  if (!p) return 0;
  k->p = p;
  k->cap = cap;
  return 1;
}

/* A hold on p (NULL: none) unless one is kept; out of host memory it is only not kept. */
static void keep(kept_plugins *k, ganfw_plugin *p) {
  for (int64_t i = 0; p && i < k->n; i++)
    if (k->p[i] == p) return;
  if (!p || (k->n == k->cap && !grow_kept(k))) return;
  k->p[k->n++] = ganfw_plugin_retain(p);
}

static void keep_run(kept_plugins *k, const ganfw_run *run) {
  keep(k, run->model);
  keep(k, run->optim);
  keep(k, run->objective);
  keep(k, run->trainer);
  for (int32_t i = 0; i < run->n_role_models; i++) keep(k, run->role_model[i]);
  for (int32_t i = 0; i < run->n_memory; i++) keep(k, run->memory[i]);
}

static ganfw_status run_config_new(ganfw_config *config, kept_plugins *kept,
                                   ganfw_run_config **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) {
    ganfw_config_destroy(config);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  (*out)->config = config;
  (*out)->kept = kept ? kept : &(*out)->own;
  return GANFW_OK;
}

ganfw_status ganfw_run_config_open(const char *path, const char *const *sets, int nsets,
                                   ganfw_run_config **out) {
  *out = NULL;
  ganfw_config *config = NULL;
  ganfw_status st = ganfw_config_load(path, &config);
  /* An unreadable config file is the user's to fix, like a wrong key: exit code 2. */
  if (st == GANFW_ERR_IO) return ganfw_error_wrap(GANFW_ERR_CONFIG, "config");
  for (int i = 0; st == GANFW_OK && i < nsets; i++) st = ganfw_config_set(config, sets[i]);
  if (st != GANFW_OK) {
    ganfw_config_destroy(config);
    return st;
  }
  return run_config_new(config, NULL, out);
}

ganfw_status ganfw_run_config_derive(const ganfw_run_config *base, const char *const *sets,
                                     int nsets, ganfw_run_config **out) {
  *out = NULL;
  ganfw_config *config = NULL;
  ganfw_status st = ganfw_config_copy(base->config, sets, nsets, &config);
  return st == GANFW_OK ? run_config_new(config, base->kept, out) : st;
}

void ganfw_run_config_free(ganfw_run_config *rc) {
  if (!rc) return;
  for (int64_t i = 0; i < rc->own.n; i++) ganfw_plugin_unload(rc->own.p[i]);
  free(rc->own.p);
  ganfw_config_destroy(rc->config);
  free(rc);
}

const char *ganfw_run_config_path(const ganfw_run_config *rc) {
  return ganfw_config_file(rc->config);
}

const ganfw_config *ganfw_run_config_tree(const ganfw_run_config *rc) {
  return rc->config;
}

/* --- a run -------------------------------------------------------------------------------- */

/* The folder a relative path in `node` starts from: that of the config file it was written
 * in ("a/b.yaml:3:5" -> "a"), or the working directory (".") for a value from --set. */
static char *node_dir(const ganfw_cfg *node) {
  const char *where = ganfw_cfg_where(node);
  if (!where || strncmp(where, "--set ", 6) == 0) return strdup(".");
  char *s = strdup(where);
  if (!s) return NULL;
  for (int k = 0; k < 2; k++) { /* drop ":line:col" */
    char *colon = strrchr(s, ':');
    if (colon) *colon = '\0';
  }
  char *slash = strrchr(s, '/');
  if (slash)
    *slash = '\0';
  else
    strcpy(s, ".");
  return s;
}

/* Removes "." and "x/.." parts of the absolute path `p` in place, as Python's
 * os.path.abspath does (lexically: symbolic links are kept as written). */
static void normalize_path(char *p) {
  char *out = p, *in = p;
  while (*in) {
    while (*in == '/') in++;
    char *end = strchr(in, '/');
    size_t len = end ? (size_t)(end - in) : strlen(in);
    if (len == 0) break;
    if (len == 1 && in[0] == '.') {
    } else if (len == 2 && in[0] == '.' && in[1] == '.') {
      while (out > p && *--out != '/') {
      }
    } else {
      *out++ = '/';
      memmove(out, in, len);
      out += len;
    }
    in += len;
  }
  if (out == p) *out++ = '/';
  *out = '\0';
}

/* `dir` as an absolute folder: relative to base (itself relative to the working directory
 * unless absolute). Heap string, NULL when out of memory or the working directory is
 * unknown (error recorded). */
static char *absolute_dir(const char *base, const char *dir) {
  char cwd[4096] = "";
  if (dir[0] != '/' && base[0] != '/' && !getcwd(cwd, sizeof cwd)) {
    ganfw_error_set(GANFW_ERR_IO, "plugin_path: cannot read the working directory: %s",
                    strerror(errno));
    return NULL;
  }
  size_t len = strlen(cwd) + strlen(base) + strlen(dir) + 3;
  char *p = malloc(len);
  if (!p) {
    ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    return NULL;
  }
  if (dir[0] == '/')
    snprintf(p, len, "%s", dir);
  else
    snprintf(p, len, "%s%s%s/%s", cwd, cwd[0] ? "/" : "", base, dir);
  normalize_path(p);
  return p;
}

/* The sections the core reads are maps: `train: 5` (or `--set train=5`) is refused at the
 * scalar, saying a map is expected, before a later read blames a key it could not find. */
static ganfw_status check_sections(const ganfw_cfg *root) {
  static const char *const sections[] = {"device", "data", "model",   "optim",    "train",
                                         "run",    "dist", "trainer", "objective"};
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
    if (ganfw_cfg_has(root, sections[i]) && !ganfw_cfg_section(root, sections[i]))
      return ganfw_error_code();
  return GANFW_OK;
}

/* Each plugin_path entry becomes an absolute folder: relative to the config file that
 * names it, or to the working directory for --set. The config holds the absolute folder
 * from then on, so that config.resolved.yaml finds the plugins from any run folder. */
static ganfw_status read_plugin_path(ganfw_run *run, const ganfw_cfg *root) {
  int64_t n = ganfw_cfg_list_len(root, "plugin_path");
  if (n < 0) return ganfw_error_code();
  if (n == 0) return GANFW_OK;
  run->plugin_dirs = calloc((size_t)n, sizeof *run->plugin_dirs);
  if (!run->plugin_dirs) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int64_t i = 0; i < n; i++) {
    const ganfw_cfg *item = ganfw_cfg_list_at(root, "plugin_path", i);
    const char *dir = NULL;
    ganfw_status st = ganfw_cfg_string(item, NULL, NULL, &dir);
    if (st != GANFW_OK) return st;
    if (!dir || !*dir)
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: plugin_path: empty entry",
                             ganfw_cfg_where(item));
    char *base = node_dir(item);
    if (!base) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    run->plugin_dirs[i] = absolute_dir(base, dir);
    free(base);
    if (!run->plugin_dirs[i]) return ganfw_error_code();
    run->n_plugin_dirs = i + 1;
    if ((st = ganfw_cfg_replace_string(item, run->plugin_dirs[i])) != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* Loads the plugin named by `section.plugin` (when the section names one). */
static ganfw_status load_named(ganfw_run *run, const ganfw_cfg *section, const char *key,
                               int32_t kind, ganfw_plugin **out) {
  const char *name = NULL;
  ganfw_status st = ganfw_cfg_string(section, "plugin", NULL, &name);
  if (st != GANFW_OK || !name) return st;
  char what[512];
  snprintf(what, sizeof what, "%s: %s", ganfw_cfg_where(ganfw_cfg_child(section, "plugin")), key);
  return ganfw_plugin_load(name, kind, what, (const char *const *)run->plugin_dirs,
                           run->n_plugin_dirs, out);
}

/* model.nets: {ROLE: {plugin: NAME, ...}}: each net a trainer plugin drives from a model
 * plugin of its own (a distillation's teacher and student), in place of model.plugin. */
static ganfw_status load_role_models(ganfw_run *run, const ganfw_cfg *model) {
  if (!ganfw_cfg_has(model, "nets")) return GANFW_OK;
  const ganfw_cfg *nets = ganfw_cfg_child(model, "nets");
  const char *where = ganfw_cfg_where(nets);
  if (run->model)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: model.nets gives each net its own model plugin; remove "
                           "model.plugin, or model.nets",
                           where);
  if (ganfw_cfg_kind_of(nets) != GANFW_CFG_KIND_MAP || !ganfw_cfg_key_at(nets, 0))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: model.nets must be a map of roles to model sections, e.g. "
                           "{teacher: {plugin: cnn, ...}, student: {plugin: cnn, ...}}",
                           where);
  const char *role;
  for (int64_t i = 0; (role = ganfw_cfg_key_at(nets, i)) != NULL; i++) {
    if (i >= GANFW_MAX_ROLE_MODELS)
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: model.nets: at most %d nets", where,
                             GANFW_MAX_ROLE_MODELS);
    const ganfw_cfg *section = ganfw_cfg_child(nets, role);
    char key[160];
    snprintf(key, sizeof key, "model.nets.%s.plugin", role);
    if (ganfw_cfg_kind_of(section) != GANFW_CFG_KIND_MAP || !ganfw_cfg_has(section, "plugin"))
      return ganfw_error_set(GANFW_ERR_CONFIG, "%s: model.nets.%s needs a `plugin:` (a model)",
                             ganfw_cfg_where(section), role);
    ganfw_status st = load_named(run, section, key, GANFW_PLUGIN_MODEL, &run->role_model[i]);
    if (st != GANFW_OK) return st;
    run->role_model_role[i] = role;
    run->role_model_cfg[i] = section;
    run->n_role_models = (int32_t)(i + 1);
    snprintf(key, sizeof key, "model.nets.%s", role);
    if ((st = ganfw_inserts_open(section, key, (const char *const *)run->plugin_dirs,
                                 run->n_plugin_dirs, &run->role_inserts[i])) != GANFW_OK)
      return st;
  }
  return GANFW_OK;
}

const char *ganfw_run_model_name(const ganfw_run *run) {
  return run->model ? ganfw_plugin_name(run->model) : run->n_role_models ? "model.nets" : "none";
}

static ganfw_status open_run(ganfw_run *run, const ganfw_run_config *rc) {
  ganfw_status st = ganfw_config_copy(rc->config, NULL, 0, &run->config);
  if (st != GANFW_OK) return st;
  run->config_path = ganfw_config_file(run->config);
  const ganfw_cfg *root = ganfw_config_root(run->config);
  if ((st = check_sections(root)) != GANFW_OK) return st;
  if ((st = ganfw_ctx_options_from_config(root, &run->ctx_opt)) != GANFW_OK) return st;
  if ((st = ganfw_cfg_string(root, "run.out_dir", "runs/default", &run->out_dir)) != GANFW_OK)
    return st;
  if ((st = read_plugin_path(run, root)) != GANFW_OK) return st;
  if ((st = load_named(run, ganfw_cfg_child(root, "model"), "model.plugin", GANFW_PLUGIN_MODEL,
                       &run->model)) != GANFW_OK)
    return st;
  if ((st = load_role_models(run, ganfw_cfg_child(root, "model"))) != GANFW_OK) return st;
  if (run->n_role_models && ganfw_cfg_has(ganfw_cfg_child(root, "model"), "insert"))
    return ganfw_error_set(
        GANFW_ERR_CONFIG,
        "%s: model.insert with model.nets: give each net its own list, as "
        "model.nets.ROLE.insert",
        ganfw_cfg_where(ganfw_cfg_child(ganfw_cfg_child(root, "model"), "insert")));
  if (run->model && (st = ganfw_inserts_open(ganfw_cfg_child(root, "model"), "model",
                                             (const char *const *)run->plugin_dirs,
                                             run->n_plugin_dirs, &run->inserts)) != GANFW_OK)
    return st;
  if ((st = load_named(run, ganfw_cfg_child(root, "optim"), "optim.plugin", GANFW_PLUGIN_OPTIM,
                       &run->optim)) != GANFW_OK)
    return st;
  if ((st = load_named(run, ganfw_cfg_child(root, "objective"), "objective.plugin",
                       GANFW_PLUGIN_OBJECTIVE, &run->objective)) != GANFW_OK)
    return st;
  /* trainer.plugin: the built-in trainers by name, anything else a trainer plugin */
  const ganfw_cfg *trainer = ganfw_cfg_child(root, "trainer");
  const char *tname = NULL;
  if ((st = ganfw_cfg_string(trainer, "plugin", NULL, &tname)) != GANFW_OK) return st;
  if (trainer && !tname)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: trainer: name the trainer, e.g. `trainer: {plugin: autoencoder}` "
                           "(built in: gan, classifier; `ganfw plugins` lists the installed ones)",
                           ganfw_cfg_where(trainer));
  if (tname && (strcmp(tname, "gan") == 0 || strcmp(tname, "classifier") == 0))
    run->trainer_builtin = tname;
  else if (tname && (st = load_named(run, trainer, "trainer.plugin", GANFW_PLUGIN_TRAINER,
                                     &run->trainer)) != GANFW_OK)
    return st;
  int64_t n = ganfw_cfg_list_len(root, "memory");
  if (n < 0) return ganfw_error_code();
  if (n > GANFW_MAX_MEMORY_PLUGINS)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: memory: at most %d strategies can be combined",
                           ganfw_cfg_where(ganfw_cfg_child(root, "memory")),
                           GANFW_MAX_MEMORY_PLUGINS);
  for (int64_t i = 0; i < n; i++) {
    const ganfw_cfg *item = ganfw_cfg_list_at(root, "memory", i);
    const char *name = NULL;
    if ((st = ganfw_cfg_string(item, "plugin", NULL, &name)) != GANFW_OK) return st;
    if (!name)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: memory[%lld]: each strategy needs a `plugin:` name "
                             "(amp, accumulate, checkpoint)",
                             ganfw_cfg_where(item), (long long)i);
    if (strcmp(name, "auto") == 0)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: memory[%lld]: plugin auto is resolved by `ganfw CONFIG` and "
                             "`ganfw plan CONFIG` (fit's search at the start); for this command, "
                             "run `ganfw fit CONFIG --budget B` and give it the config fit "
                             "writes",
                             ganfw_cfg_where(item), (long long)i);
    char key[64];
    snprintf(key, sizeof key, "memory[%lld].plugin", (long long)i);
    if ((st = load_named(run, item, key, GANFW_PLUGIN_MEMORY, &run->memory[i])) != GANFW_OK)
      return st;
    run->memory_cfg[i] = item;
    run->n_memory = (int32_t)(i + 1);
  }
  return GANFW_OK;
}

ganfw_status ganfw_run_open(const ganfw_run_config *rc, ganfw_run **out) {
  *out = NULL;
  ganfw_run *run = calloc(1, sizeof *run);
  if (!run) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = open_run(run, rc);
  if (st != GANFW_OK) {
    ganfw_run_close(run);
    return st;
  }
  keep_run(rc->kept, run);
  *out = run;
  return GANFW_OK;
}

ganfw_status ganfw_run_open_file(const char *path, const char *const *sets, int nsets,
                                 ganfw_run **out) {
  ganfw_run_config *rc = NULL;
  *out = NULL;
  ganfw_status st = ganfw_run_config_open(path, sets, nsets, &rc);
  if (st == GANFW_OK) st = ganfw_run_open(rc, out);
  ganfw_run_config_free(rc);
  return st;
}

void ganfw_run_close(ganfw_run *run) {
  if (!run) return;
  for (int32_t i = 0; i < run->n_memory; i++) ganfw_plugin_unload(run->memory[i]);
  ganfw_plugin_unload(run->trainer);
  ganfw_plugin_unload(run->objective);
  ganfw_plugin_unload(run->optim);
  ganfw_plugin_unload(run->model);
  for (int32_t i = 0; i < run->n_role_models; i++) ganfw_plugin_unload(run->role_model[i]);
  ganfw_inserts_destroy(run->inserts);
  for (int32_t i = 0; i < GANFW_MAX_ROLE_MODELS; i++) ganfw_inserts_destroy(run->role_inserts[i]);
  for (int64_t i = 0; i < run->n_plugin_dirs; i++) free(run->plugin_dirs[i]);
  free(run->plugin_dirs);
  ganfw_config_destroy(run->config);
  free(run);
}
