/* A training session (see session.h): context, data, model nets, optimizers. */
#include "train/session.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "runtime/alloc.h"
#include "runtime/cpus.h"
#include "io/checkpoint.h"
#include "config/config.h"
#include "data/pair.h"
#include "base/error.h"
#include "base/log.h"
#include "base/suggest.h"
#include "nn/net.h"
#include "dist/dist.h"
#include "train/dp.h"
#include "train/ema.h"
#include "train/param_groups.h"
#include "train/program.h"
#include "train/prune_run.h"
#include "train/sib.h"
#include "train/widths.h"
#include "train/zero.h"

/* data.other: {dataset: KIND, path: DIR}, a second training set of the same image shape
 * (through data's transforms), drawn apart from the first. */
static ganfw_status open_other(ganfw_session *s, const ganfw_cfg *other) {
  ganfw_status st = ganfw_dataset_open(s->other_kind, s->other_path, 1, &s->transform, &s->other);
  if (st != GANFW_OK) return ganfw_error_wrap(st, "%s: data.other", ganfw_cfg_where(other));
  int32_t c, h, w;
  ganfw_dataset_shape(s->other, &c, &h, &w);
  const ganfw_data_info *di = &s->data_info;
  if (c != di->channels || h != di->height || w != di->width)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.other gives %dx%dx%d images (%s) but data gives %dx%dx%d: "
                           "both sets must have one shape (set data.channels, resize or crop)",
                           ganfw_cfg_where(other), (int)c, (int)h, (int)w,
                           ganfw_dataset_name(s->other), (int)di->channels, (int)di->height,
                           (int)di->width);
  if (s->train.batch_size > ganfw_loader_max_batch(ganfw_dataset_size(s->other), 1, NULL))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: data.other (%s) has %lld images, fewer than train.batch_size %lld",
                           ganfw_cfg_where(other), ganfw_dataset_name(s->other),
                           (long long)ganfw_dataset_size(s->other), (long long)s->train.batch_size);
  return GANFW_OK;
}

static ganfw_status open_data(ganfw_session *s, const ganfw_cfg *root, int32_t with_data,
                              const ganfw_data_info *info) {
  const ganfw_cfg *data = ganfw_cfg_section(root, "data");
  const char *kind = NULL, *path = NULL;
  ganfw_transform tf;
  ganfw_status st;
  if ((st = ganfw_data_source_from_config(data, &kind, &path)) ||
      (st = ganfw_loader_config_from_config(data, (int32_t)s->train.batch_size,
                                            s->run->ctx_opt.seed, &s->loader_cfg)) ||
      (st = ganfw_transform_from_config(data, &tf)))
    return st;
  s->data_kind = kind;
  s->data_path = path;
  s->transform = tf;
  s->data_info.struct_size = sizeof s->data_info;
  if ((st = ganfw_pair_from_config(data, &s->pair)) != GANFW_OK) return st;
  const ganfw_cfg *other = ganfw_cfg_has(data, "other") ? ganfw_cfg_child(data, "other") : NULL;
  if (other && (st = ganfw_data_source_from_config(other, &s->other_kind, &s->other_path)))
    return st;
  if (!with_data) {
    s->data_info = *info;
  } else {
    /* at data.path when the config (or a --set) gives it, else at the section */
    const ganfw_cfg *at = ganfw_cfg_has(data, "path") ? ganfw_cfg_child(data, "path") : data;
    if ((st = ganfw_dataset_open(kind, path, 1, &tf, &s->data)) != GANFW_OK)
      return ganfw_error_wrap(st, "%s: data", ganfw_cfg_where(at ? at : root));
    int32_t c, h, w;
    ganfw_dataset_shape(s->data, &c, &h, &w);
    s->data_info.channels = c;
    s->data_info.height = h;
    s->data_info.width = w;
    s->data_info.num_classes = ganfw_dataset_num_classes(s->data);
  }
  const ganfw_data_info *di = &s->data_info;
  if (s->pair.kind != GANFW_PAIR_NONE &&
      (st = ganfw_pair_check(&s->pair, ganfw_cfg_where(ganfw_cfg_child(data, "pair")), di->channels,
                             di->height, di->width)))
    return st;
  return other && with_data ? open_other(s, other) : GANFW_OK;
}

static const char *const nonfinite_names[GANFW_NONFINITE_COUNT] = {"stop", "skip"};
_Static_assert(sizeof nonfinite_names / sizeof nonfinite_names[0] == GANFW_NONFINITE_COUNT,
               "one name per train.on_nonfinite policy");

const char *ganfw_nonfinite_policy_name(int32_t policy) {
  return policy >= 0 && policy < GANFW_NONFINITE_COUNT ? nonfinite_names[policy] : "unknown";
}

/* train.on_nonfinite: stop (the default) or skip; anything else is refused with where it is
 * written and the nearest policy name. */
static ganfw_status read_nonfinite_policy(const ganfw_cfg *train, int32_t *out) {
  const char *text = NULL;
  ganfw_status st = ganfw_cfg_string(train, "on_nonfinite", "stop", &text);
  if (st != GANFW_OK) return st;
  for (int32_t k = 0; text && k < GANFW_NONFINITE_COUNT; k++)
    if (strcmp(text, nonfinite_names[k]) == 0) {
      *out = k;
      return GANFW_OK;
    }
  const char *near = NULL;
  size_t best = (size_t)-1;
  for (int32_t k = 0; text && k < GANFW_NONFINITE_COUNT; k++) {
    size_t d = ganfw_edit_distance(text, nonfinite_names[k]);
    if (d < best) best = d, near = nonfinite_names[k];
  }
  const int suggest = near && ganfw_suggest_near(strlen(text), best);
  return ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s: train.on_nonfinite: '%s' is not a policy: expected stop (end the "
                         "run at a NaN or inf loss or gradient) or skip (skip that update)%s%s%s",
                         ganfw_cfg_where(ganfw_cfg_child(train, "on_nonfinite")),
                         text ? text : "null", suggest ? " (did you mean '" : "",
                         suggest ? near : "", suggest ? "'?)" : "");
}

static ganfw_status read_train(ganfw_session *s, const ganfw_cfg *root) {
  const ganfw_cfg *train = ganfw_cfg_section(root, "train");
  const ganfw_cfg *run = ganfw_cfg_section(root, "run");
  ganfw_train_settings *t = &s->train;
  ganfw_status st;
  /* Step counts are bounded so that no product or sum of them can overflow: epochs times
   * the batches of an epoch (at most 2^40 items) stays below 2^62. */
  const int64_t max_count = (int64_t)1 << 52;
  if ((st = ganfw_cfg_int_in(train, "batch_size", 64, 1, 1 << 20, &t->batch_size)) ||
      (st = ganfw_cfg_int_in(train, "epochs", 0, 0, 1 << 20, &t->epochs)) ||
      (st = ganfw_cfg_int_in(train, "max_steps", 0, 0, max_count, &t->max_steps)) ||
      (st = ganfw_cfg_int_in(train, "log_every", 50, 0, max_count, &t->log_every)) ||
      (st = ganfw_cfg_int_in(train, "sample_every", 500, 0, max_count, &t->sample_every)) ||
      (st =
           ganfw_cfg_int_in(train, "checkpoint_every", 1000, 0, max_count, &t->checkpoint_every)) ||
      (st = ganfw_cfg_float(train, "label_smoothing", 0.0, &t->label_smoothing)) ||
      (st = ganfw_cfg_string(train, "resume", "", &t->resume)) ||
      (st = ganfw_cfg_int(run, "samples", 64, &t->samples)) ||
      (st = ganfw_cfg_int(run, "sample_nrow", 8, &t->sample_nrow)) ||
      (st = read_nonfinite_policy(train, &t->on_nonfinite)) ||
      (st = ganfw_cfg_int_in(train, "max_nonfinite_skips", 100, 1, INT32_MAX,
                             &t->max_nonfinite_skips)))
    return st;
  const char *where = ganfw_cfg_where(train ? train : root);
  if (t->epochs == 0 && t->max_steps == 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: set train.epochs or train.max_steps (a positive number)", where);
  if (!(t->label_smoothing >= 0 && t->label_smoothing < 1))
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: train.label_smoothing must be in [0, 1)",
                           ganfw_cfg_where(ganfw_cfg_child(train, "label_smoothing")));
  if (t->samples < 1 || t->samples > 1024 || t->sample_nrow < 1)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: run.samples must be in 1..1024 and run.sample_nrow positive",
                           ganfw_cfg_where(run ? run : root));
  return GANFW_OK;
}

/* Where a plugin's refusal of its config section points: the key it names as
 * "<section>.<key>" when the section holds that key, else the first word of the message
 * that is a key of the section, else the section itself. A message
 * that starts with a location already ("file:line:col: ...", as the host's getters write)
 * gets none. */
static const char *plugin_error_where(const ganfw_cfg *node, const char *section) {
  const char *msg = ganfw_error_message();
  const char *colon = strchr(msg, ':');
  if (colon && colon[1] >= '0' && colon[1] <= '9') return NULL;
  size_t n = strlen(section);
  for (const char *p = strstr(msg, section); p; p = strstr(p + 1, section)) {
    if ((p > msg && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) || p[n] != '.') continue;
    char key[128];
    size_t k = 0;
    for (const char *q = p + n + 1;
         k + 1 < sizeof key && (isalnum((unsigned char)*q) || *q == '_' || *q == '.'); q++)
      key[k++] = *q;
    while (k > 0 && key[k - 1] == '.') k--; /* a sentence's full stop */
    key[k] = '\0';
    if (k > 0 && ganfw_cfg_has(node, key)) return ganfw_cfg_where(ganfw_cfg_child(node, key));
  }
  /* A bare key of the section as a word ("betas[0] (beta1) is 2"). */
  for (const char *p = msg; *p;) {
    if (!isalpha((unsigned char)*p) && *p != '_') {
      p++;
      continue;
    }
    char key[64];
    size_t k = 0;
    int start = p == msg || !(isalnum((unsigned char)p[-1]) || p[-1] == '.');
    for (; isalnum((unsigned char)*p) || *p == '_'; p++)
      if (k + 1 < sizeof key) key[k++] = *p;
    key[k] = '\0';
    if (start && *p != '.' && ganfw_cfg_has(node, key))
      return ganfw_cfg_where(ganfw_cfg_child(node, key));
  }
  return node ? ganfw_cfg_where(node) : NULL;
}

/* Wraps a plugin's failure to create itself from its config section with where it points
 * to (plugin_error_where) and `what` ("model 'dcgan'"). */
static ganfw_status plugin_error(ganfw_status st, const ganfw_cfg *node, const char *section,
                                 const char *what) {
  const char *where = st == GANFW_ERR_OOM ? NULL : plugin_error_where(node, section);
  return where ? ganfw_error_wrap(st, "%s: %s", where, what) : ganfw_error_wrap(st, "%s", what);
}

/* trainer: {plugin: NAME, ...}: a trainer plugin's create, with the section's declared
 * keys. */
static ganfw_status create_trainer(ganfw_session *s, const ganfw_cfg *root) {
  const ganfw_cfg *section = ganfw_cfg_section(root, "trainer");
  ganfw_status st = ganfw_plugin_apply_config_keys(s->run->trainer, section);
  if (st != GANFW_OK) return st;
  s->trainer_vt = ganfw_plugin_vtable(s->run->trainer);
  s->trainer_name = ganfw_plugin_name(s->run->trainer);
  const ganfw_host *host = ganfw_host_table();
  if ((st = ganfw_host_provide_extension(GANFW_EXT_STEP, ganfw_step_api_table())) != GANFW_OK)
    return st;
  const ganfw_step_api *api = host->get_extension(host, GANFW_EXT_STEP);
  if ((st = s->trainer_vt->create(host, s->ctx, section, api, &s->trainer)) != GANFW_OK) {
    s->trainer = NULL;
    char what[160];
    snprintf(what, sizeof what, "trainer '%s'", s->trainer_name);
    return plugin_error(st, section, "trainer", what);
  }
  return GANFW_OK;
}

/* The net of `role`: the model's, or with model.nets the one its plugin for that role
 * builds (asked by the role's name, then as its family's net: a classifier's
 * "classifier", a GAN's "generator"). *net NULL when there is none; an error only for a
 * model.nets plugin that builds nothing under either name. */
static ganfw_status role_net(ganfw_session *s, const char *role, ganfw_net **net) {
  *net = NULL;
  if (!s->run->n_role_models) {
    *net = s->model_vt->net(s->model, role);
    return GANFW_OK;
  }
  for (int32_t i = 0; i < s->run->n_role_models; i++) {
    if (strcmp(s->run->role_model_role[i], role) != 0) continue;
    const ganfw_model_vt *vt = s->role_model[i].vt;
    void *self = s->role_model[i].self;
    static const char *const family_role[GANFW_MODEL_FAMILY_COUNT] = {"generator", "classifier",
                                                                      NULL};
    *net = vt->net(self, role);
    if (!*net && vt->family >= 0 && vt->family < GANFW_MODEL_FAMILY_COUNT &&
        family_role[vt->family])
      *net = vt->net(self, family_role[vt->family]);
    if (!*net)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: model.nets.%s: model '%s' builds no net '%s' (nor its "
                             "family's)",
                             ganfw_cfg_where(s->run->role_model_cfg[i]), role,
                             ganfw_plugin_name(s->run->role_model[i]), role);
    return GANFW_OK;
  }
  return GANFW_OK;
}

/* model.nets: every role's model plugin, created from its section, and every role there
 * one the trainer drives. */
static ganfw_status create_role_models(ganfw_session *s) {
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < s->run->n_role_models && st == GANFW_OK; i++) {
    ganfw_plugin *pl = s->run->role_model[i];
    const ganfw_cfg *section = s->run->role_model_cfg[i];
    const char *path = NULL;
    /* the core's keys in a role's section (below): read before the plugin sees it */
    if ((st = ganfw_cfg_string(section, "init_from", NULL, &path)) != GANFW_OK) return st;
    if ((st = ganfw_plugin_apply_config_keys(pl, section)) != GANFW_OK) return st;
    s->role_model[i].vt = ganfw_plugin_vtable(pl);
    char where[160];
    snprintf(where, sizeof where, "model.nets.%s", s->run->role_model_role[i]);
    ganfw_widths *widths = NULL; /* model.nets.ROLE.widths */
    if ((st = ganfw_widths_open(section, where, &widths)) != GANFW_OK) return st;
    ganfw_inserts_arm(s->run->role_inserts[i], s->ctx, ganfw_plugin_name(pl));
    ganfw_widths_arm(widths, s->ctx);
    st = s->role_model[i].vt->create(ganfw_host_table(), s->ctx, section, &s->data_info,
                                     &s->role_model[i].self);
    ganfw_status done = ganfw_widths_finish(widths, s->ctx, st == GANFW_OK);
    ganfw_widths_destroy(widths);
    if (done != GANFW_OK) {
      ganfw_inserts_finish(s->run->role_inserts[i], s->ctx, 0);
      return done;
    }
    done = ganfw_inserts_finish(s->run->role_inserts[i], s->ctx, st == GANFW_OK);
    if (done != GANFW_OK) return done;
    if (st != GANFW_OK) {
      s->role_model[i].self = NULL;
      char what[200];
      snprintf(what, sizeof what, "model.nets.%s ('%s')", s->run->role_model_role[i],
               ganfw_plugin_name(pl));
      return plugin_error(st, section, "model", what);
    }
  }
  return st;
}

/* Every entry of model.nets is a role the trainer drives. */
static ganfw_status check_role_models_used(ganfw_session *s) {
  for (int32_t i = 0; i < s->run->n_role_models; i++) {
    int32_t used = 0;
    for (int32_t r = 0; r < s->n_nets; r++)
      used |= strcmp(s->nets[r].role, s->run->role_model_role[i]) == 0;
    if (!used)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: model.nets.%s: trainer '%s' drives no net '%s'; remove it (the "
                             "trainer's nets are listed in docs/TRAINERS.md)",
                             ganfw_cfg_where(s->run->role_model_cfg[i]), s->run->role_model_role[i],
                             s->trainer_name, s->run->role_model_role[i]);
  }
  return GANFW_OK;
}

/* How an init_from file is read: its values when the session loads them (`load`, not on
 * the meta backend); otherwise (a plan, a session without its data: validate, sample,
 * score) only its names, which install the masks a pruned model's file implies, so that a
 * plan builds the nets the run will train (GANFW_CKPT_NAMES_ONLY). A file not there then
 * is left to the run that loads it (a config validated before the run that writes it):
 * *skip is set. */
static int32_t init_from_flags(const ganfw_session *s, int32_t load, const char *path,
                               int32_t *skip) {
  struct stat sb;
  const int32_t values = load && !s->run->ctx_opt.meta;
  *skip = !values && stat(path, &sb) != 0;
  return values ? 0 : GANFW_CKPT_NAMES_ONLY;
}

/* model.nets.ROLE.init_from: that net's weights from a checkpoint or state_dict file whose
 * tensors are named "<net name>.<state_dict name>" (the net's own name, as a run of that
 * model alone saves it: a classifier's "classifier.") or "<ROLE>.<name>" (a checkpoint of
 * this trainer). Strict as PyTorch's load_state_dict: a file of another architecture is an
 * error naming the tensors. Without data, and on the meta backend, only the names are
 * read (init_from_flags). */
static ganfw_status role_init_from(ganfw_session *s, int32_t load) {
  for (int32_t i = 0; i < s->run->n_role_models; i++) {
    const ganfw_cfg *section = s->run->role_model_cfg[i];
    const char *role = s->run->role_model_role[i], *path = NULL;
    ganfw_status st = ganfw_cfg_string(section, "init_from", NULL, &path);
    if (st != GANFW_OK) return st;
    if (!path || !*path) continue;
    int32_t skip = 0;
    const int32_t how = init_from_flags(s, load, path, &skip);
    if (skip) continue;
    ganfw_net *net = NULL;
    for (int32_t r = 0; r < s->n_nets; r++)
      if (strcmp(s->nets[r].role, role) == 0) net = s->nets[r].net;
    if (!net) continue;
    ganfw_ckpt_report rep = {0};
    ganfw_ckpt_net one = {.net = net, .prefix = NULL};
    st = ganfw_checkpoint_load_weights(path, &one, 1, GANFW_CKPT_BARE_NAMES | how, &rep);
    if (st != GANFW_OK && rep.loaded == 0 && !rep.mismatched) { /* a checkpoint of this trainer? */
      ganfw_error_saved first;
      ganfw_error_save(&first, st);
      one.prefix = role;
      ganfw_ckpt_report again = {0};
      if (ganfw_checkpoint_load_weights(path, &one, 1, how, &again) == GANFW_OK) {
        st = GANFW_OK;
        rep = again;
      } else {
        st = ganfw_error_set(first.code, "%s", first.msg);
      }
    }
    if (st != GANFW_OK)
      return ganfw_error_wrap(st, "%s: model.nets.%s.init_from%s",
                              ganfw_cfg_where(ganfw_cfg_child(section, "init_from")), role,
                              st == GANFW_ERR_CONFIG
                                  ? " (strict, as PyTorch's load_state_dict: the file must hold "
                                    "this net's architecture)"
                                  : "");
    if (!how)
      ganfw_log(GANFW_LOG_INFO, "model.nets.%s.init_from %s: %lld tensors loaded", role, path,
                (long long)rep.loaded);
  }
  return GANFW_OK;
}

/* The trainer's generating net (ganfw_trainer_vt.generator), for `ganfw sample` and
 * `score`: noise [N, nz, 1, 1] to images. */
static ganfw_status take_generator(ganfw_session *s) {
  if (!s->trainer_vt->generator) return GANFW_OK;
  int64_t latent = 0;
  const char *role = s->trainer_vt->generator(s->trainer, &latent);
  if (!role) return GANFW_OK;
  for (int32_t r = 0; r < s->n_nets; r++)
    if (strcmp(s->nets[r].role, role) == 0 && latent > 0) {
      s->generator = s->nets[r].net;
      s->generator_role = s->nets[r].role;
      s->nz = latent;
      return GANFW_OK;
    }
  return ganfw_error_set(GANFW_ERR_PLUGIN,
                         "trainer '%s': generator() names '%s' with latent size %lld; it must be "
                         "one of its nets and the size > 0",
                         s->trainer_name, role, (long long)latent);
}

/* The nets a trainer plugin names, from the model, each once. */
static ganfw_status take_trainer_nets(ganfw_session *s) {
  const char *model = ganfw_run_model_name(s->run);
  const char *name = NULL;
  uint32_t flags = 0;
  ganfw_status st;
  char role_list[512] = "";
  for (int32_t i = 0; i < s->run->n_role_models; i++)
    snprintf(role_list + strlen(role_list), sizeof role_list - strlen(role_list), "%s'%s'",
             i ? ", " : "", s->run->role_model_role[i]);
  for (int32_t i = 0; s->trainer_vt->role(s->trainer, i, &name, &flags); i++) {
    if (i >= GANFW_MAX_NETS)
      return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s' names more than %d nets",
                             s->trainer_name, GANFW_MAX_NETS);
    if (!name || !*name)
      return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s': role %d has no name", s->trainer_name,
                             (int)i);
    for (int32_t k = 0; k < s->n_nets; k++)
      if (strcmp(s->nets[k].role, name) == 0)
        return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s' names the role '%s' twice",
                               s->trainer_name, name);
    ganfw_net *net = NULL;
    if ((st = role_net(s, name, &net)) != GANFW_OK) return st;
    if (!net && s->run->n_role_models)
      return ganfw_error_set(
          GANFW_ERR_CONFIG,
          "%s: trainer '%s' drives a net '%s' and model.nets has no entry "
          "'%s' (it has %s); add `%s: {plugin: MODEL, ...}` under model.nets",
          ganfw_cfg_where(ganfw_cfg_child(
              ganfw_cfg_section(ganfw_config_root(s->run->config), "model"), "nets")),
          s->trainer_name, name, name, role_list, name);
    if (!net)
      return ganfw_error_set(
          GANFW_ERR_CONFIG,
          "%s: trainer '%s' drives a net '%s' that model '%s' does not build; "
          "use a model that builds it (set model.plugin), or a trainer for "
          "this model's nets",
          ganfw_cfg_where(ganfw_cfg_child(
              ganfw_cfg_section(ganfw_config_root(s->run->config), "trainer"), "plugin")),
          s->trainer_name, name, model);
    s->nets[s->n_nets++] = (ganfw_session_net){
        .role = name, .net = net, .frozen = (flags & GANFW_ROLE_FROZEN) != 0, .optim = -1};
  }
  if (s->n_nets == 0)
    return ganfw_error_set(GANFW_ERR_PLUGIN, "trainer '%s' names no nets", s->trainer_name);
  return take_generator(s);
}

/* model.nets: a model plugin per role, for a trainer plugin. */
static ganfw_status create_nets_model(ganfw_session *s, const ganfw_cfg *root) {
  if (!s->run->trainer)
    return ganfw_error_set(
        GANFW_ERR_CONFIG,
        "%s: model.nets builds nets for a trainer plugin: name it with "
        "`trainer: {plugin: NAME}` (distill; `ganfw plugins` lists the "
        "installed ones)",
        ganfw_cfg_where(ganfw_cfg_child(ganfw_cfg_section(root, "model"), "nets")));
  if (ganfw_cfg_has(ganfw_cfg_section(root, "model"), "init_from"))
    return ganfw_error_set(
        GANFW_ERR_CONFIG,
        "%s: model.init_from with model.nets: give each net its own, as "
        "model.nets.ROLE.init_from",
        ganfw_cfg_where(ganfw_cfg_child(ganfw_cfg_section(root, "model"), "init_from")));
  if (ganfw_cfg_has(ganfw_cfg_section(root, "model"), "widths"))
    return ganfw_error_set(
        GANFW_ERR_CONFIG,
        "%s: model.widths with model.nets: give each net its own, as model.nets.ROLE.widths",
        ganfw_cfg_where(ganfw_cfg_child(ganfw_cfg_section(root, "model"), "widths")));
  s->family = GANFW_MODEL_NETS;
  ganfw_status st;
  if ((st = create_trainer(s, root)) != GANFW_OK) return st;
  if ((st = create_role_models(s)) != GANFW_OK) return st;
  if ((st = take_trainer_nets(s)) != GANFW_OK) return st;
  return check_role_models_used(s);
}

static ganfw_status create_model(ganfw_session *s, const ganfw_cfg *root) {
  if (s->run->n_role_models) return create_nets_model(s, root);
  if (!s->run->model)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: no model: set model.plugin (`ganfw plugins` lists the installed "
                           "ones)",
                           s->run->config_path);
  s->model_vt = ganfw_plugin_vtable(s->run->model);
  s->family = s->model_vt->family;
  const char *model = ganfw_plugin_name(s->run->model);
  const char *builtin = s->run->trainer_builtin;
  const char *where =
      ganfw_cfg_where(ganfw_cfg_child(ganfw_cfg_section(root, "trainer"), "plugin"));
  if (builtin &&
      s->family != (strcmp(builtin, "gan") == 0 ? GANFW_MODEL_GAN : GANFW_MODEL_CLASSIFIER))
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: trainer.plugin '%s' drives a %s, and model '%s' is %s; remove "
                           "the key or name a trainer for this model",
                           where, builtin, strcmp(builtin, "gan") == 0 ? "GAN" : "classifier",
                           model,
                           s->family == GANFW_MODEL_GAN          ? "a GAN"
                           : s->family == GANFW_MODEL_CLASSIFIER ? "a classifier"
                                                                 : "nets for a trainer plugin");
  if (s->family == GANFW_MODEL_NETS && !s->run->trainer)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: model '%s' builds nets for a trainer plugin: name it with "
                           "`trainer: {plugin: NAME}` (autoencoder; `ganfw plugins` lists the "
                           "installed ones)",
                           s->run->config_path, model);
  ganfw_status st;
  if (s->run->trainer) {
    s->family = GANFW_MODEL_NETS; /* whatever the model's own family: the plugin drives it */
    if ((st = create_trainer(s, root)) != GANFW_OK) return st;
  }
  if ((st = ganfw_plugin_apply_config_keys(s->run->model, ganfw_cfg_section(root, "model"))))
    return st;
  const ganfw_cfg *section = ganfw_cfg_section(root, "model");
  ganfw_widths *widths = NULL; /* model.widths, applied as it builds its nets */
  if ((st = ganfw_widths_open(section, "model", &widths)) != GANFW_OK) return st;
  ganfw_inserts_arm(s->run->inserts, s->ctx, model); /* model.insert, as it builds its nets */
  ganfw_widths_arm(widths, s->ctx);
  st = s->model_vt->create(ganfw_host_table(), s->ctx, section, &s->data_info, &s->model);
  ganfw_status done = ganfw_widths_finish(widths, s->ctx, st == GANFW_OK);
  ganfw_widths_destroy(widths);
  if (done != GANFW_OK) {
    ganfw_inserts_finish(s->run->inserts, s->ctx, 0);
    return done;
  }
  done = ganfw_inserts_finish(s->run->inserts, s->ctx, st == GANFW_OK);
  if (done != GANFW_OK) return done; /* an item of model.insert, named as the hook said */
  if (st != GANFW_OK) {
    s->model = NULL;
    char what[160];
    snprintf(what, sizeof what, "model '%s'", model);
    return plugin_error(st, section, "model", what);
  }
  if (s->family == GANFW_MODEL_NETS) return take_trainer_nets(s);
  if (s->family == GANFW_MODEL_GAN) {
    s->generator = s->model_vt->net(s->model, "generator");
    s->discriminator = s->model_vt->net(s->model, "discriminator");
    if (!s->generator || !s->discriminator)
      return ganfw_error_set(
          GANFW_ERR_PLUGIN, "model '%s' is a GAN but has no generator or discriminator net", model);
    s->nz = s->model_vt->latent_dim ? s->model_vt->latent_dim(s->model) : 0;
    if (s->nz <= 0)
      return ganfw_error_set(GANFW_ERR_PLUGIN, "model '%s' is a GAN but reports no latent_dim",
                             model);
    s->generator_role = "generator";
    s->nets[0] = (ganfw_session_net){.role = "generator", .net = s->generator, .optim = 0};
    s->nets[1] = (ganfw_session_net){.role = "discriminator", .net = s->discriminator, .optim = 1};
    s->n_nets = 2;
  } else {
    s->classifier = s->model_vt->net(s->model, "classifier");
    if (!s->classifier)
      return ganfw_error_set(GANFW_ERR_PLUGIN, "model '%s' has no classifier net", model);
    s->nets[0] = (ganfw_session_net){.role = "classifier", .net = s->classifier, .optim = 0};
    s->n_nets = 1;
  }
  return GANFW_OK;
}

ganfw_net *ganfw_session_item_net(const ganfw_session *s, const char *item, const char **rest) {
  const char *colon = strchr(item, ':');
  *rest = item;
  if (!colon) return s->n_nets == 1 ? s->nets[0].net : NULL;
  *rest = colon + 1;
  const size_t n = (size_t)(colon - item);
  for (int32_t r = 0; r < s->n_nets; r++)
    if (strlen(s->nets[r].role) == n && strncmp(item, s->nets[r].role, n) == 0)
      return s->nets[r].net;
  return NULL;
}

ganfw_status ganfw_session_cfg_item_net(const ganfw_session *s, const ganfw_cfg *item,
                                        const char **text, ganfw_net **net, const char **rest) {
  *net = NULL;
  ganfw_status st = ganfw_cfg_string(item, NULL, NULL, text);
  if (st != GANFW_OK) return st;
  if (!*text || !**text)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s is empty", ganfw_cfg_where(item),
                           ganfw_cfg_path(item));
  if ((*net = ganfw_session_item_net(s, *text, rest))) return GANFW_OK;
  char roles[256] = "";
  for (int32_t r = 0; r < s->n_nets; r++)
    snprintf(roles + strlen(roles), sizeof roles - strlen(roles),
             "%s%s:", r ? (r == s->n_nets - 1 ? " or " : ", ") : "", s->nets[r].role);
  return ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s '%s': name the net first (%s), e.g. \"%s:%s\"",
                         ganfw_cfg_where(item), ganfw_cfg_path(item), *text, roles, s->nets[0].role,
                         ganfw_net_layer_name(s->nets[0].net, 0));
}

/* "5" or "2-7" (inclusive) into [*a, *b); 0 when `t` is not of that form. */
static int parse_range(const char *t, int32_t *a, int32_t *b) {
  char *end;
  if (*t < '0' || *t > '9') return 0;
  long x = strtol(t, &end, 10), y = x;
  if (*end == '-') {
    const char *u = end + 1;
    if (*u < '0' || *u > '9') return 0;
    y = strtol(u, &end, 10);
  }
  if (*end || x > 1000000 || y > 1000000) return 0;
  *a = (int32_t)x;
  *b = (int32_t)y + 1;
  return 1;
}

/* model.freeze: a list of layer names (a name matches itself and the layers under it:
 * "features" freezes "features.0", "features.1", ...), layer indices and inclusive index
 * ranges ("0-5"), each prefixed with the net ("generator:main.0") for a GAN. Frees the
 * frozen layers' gradients; runs before the optimizers exist. */
static ganfw_status apply_freeze(ganfw_session *s, const ganfw_cfg *model) {
  if (!ganfw_cfg_has(model, "freeze")) return GANFW_OK;
  const ganfw_cfg *node = ganfw_cfg_child(model, "freeze");
  int64_t n = ganfw_cfg_list_len(model, "freeze");
  if (n < 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: model.freeze must be a list of layer names or index ranges "
                           "(e.g. [features] or [\"0-5\"])",
                           ganfw_cfg_where(node));
  for (int64_t i = 0; i < n; i++) {
    const ganfw_cfg *item = ganfw_cfg_list_at(model, "freeze", i);
    const char *text = NULL, *rest = NULL;
    ganfw_net *net = NULL;
    ganfw_status st = ganfw_session_cfg_item_net(s, item, &text, &net, &rest);
    if (st != GANFW_OK) return st;
    const int32_t layers = ganfw_net_layer_count(net);
    int32_t a, b;
    if (parse_range(rest, &a, &b)) {
      if (b <= a || b > layers)
        return ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s '%s': net %s has layers 0..%d",
                               ganfw_cfg_where(item), ganfw_cfg_path(item), text,
                               ganfw_net_name(net), (int)layers - 1);
      if ((st = ganfw_net_freeze(net, a, b)) != GANFW_OK) return st;
      continue;
    }
    const size_t len = strlen(rest);
    int32_t matched = 0;
    for (int32_t k = 0; k < layers; k++) {
      const char *name = ganfw_net_layer_name(net, k);
      if (strncmp(name, rest, len) == 0 && (name[len] == '\0' || name[len] == '.')) {
        if ((st = ganfw_net_freeze(net, k, k + 1)) != GANFW_OK) return st;
        matched++;
      }
    }
    if (!matched)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: %s '%s': net %s has no layer of that name (its first is '%s', "
                             "its last '%s'; or give an index range such as \"0-3\")",
                             ganfw_cfg_where(item), ganfw_cfg_path(item), text, ganfw_net_name(net),
                             ganfw_net_layer_name(net, 0), ganfw_net_layer_name(net, layers - 1));
  }
  int64_t frozen = 0, total = 0;
  for (int32_t r = 0; r < s->n_nets; r++) {
    ganfw_net *net = s->nets[r].net;
    for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
      ganfw_param_info info = {.struct_size = sizeof info};
      if (ganfw_net_param_info(net, i, &info) != GANFW_OK) continue;
      total += info.value->numel;
      if (!info.trainable) frozen += info.value->numel;
    }
  }
  /* the gradients freed above were never used: peaks count from here (plan, compare) */
  ganfw_alloc_reset_peak(s->ctx->alloc);
  ganfw_log(GANFW_LOG_INFO, "model.freeze: %lld of %lld parameters frozen", (long long)frozen,
            (long long)total);
  return GANFW_OK;
}

/* model.init_from: the nets' weights from a checkpoint or safetensors state_dict file
 * (tensors "<net>.<name>"). Strict unless model.init_from_strict is false, as PyTorch's
 * load_state_dict: a tensor missing on either side is an error (allowed and logged when not
 * strict); a shape mismatch is always an error naming the tensor. With `load` 0 (a session
 * without its data: validate, sample, score) and on the meta backend (a plan) only the
 * names are read: a pruned model's masks are installed, no value is loaded
 * (init_from_flags). */
static ganfw_status apply_init_from(ganfw_session *s, const ganfw_cfg *model, int32_t load) {
  if (!ganfw_cfg_has(model, "init_from")) return GANFW_OK;
  const char *path = NULL;
  int32_t strict = 1;
  ganfw_status st = ganfw_cfg_string(model, "init_from", NULL, &path);
  if (st == GANFW_OK) st = ganfw_cfg_bool(model, "init_from_strict", 1, &strict);
  if (st != GANFW_OK) return st;
  if (!path || !*path) return GANFW_OK;
  int32_t skip = 0;
  const int32_t how = init_from_flags(s, load, path, &skip);
  if (skip) return GANFW_OK;
  ganfw_ckpt_net nets[GANFW_MAX_NETS];
  int32_t n = 0;
  for (int32_t r = 0; r < s->n_nets; r++)
    nets[n++] = (ganfw_ckpt_net){
        .net = s->nets[r].net, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL};
  ganfw_ckpt_report rep = {0};
  const int32_t flags = GANFW_CKPT_BARE_NAMES | how |
                        (strict ? 0 : GANFW_CKPT_ALLOW_MISSING | GANFW_CKPT_ALLOW_UNEXPECTED);
  st = ganfw_checkpoint_load_weights(path, nets, n, flags, &rep);
  if (st != GANFW_OK && strict && rep.loaded > 0 && !rep.mismatched &&
      (rep.missing || rep.unexpected))
    return ganfw_error_wrap(st,
                            "%s: model.init_from (strict, as PyTorch's load_state_dict; to load "
                            "the %lld tensors that match and keep the rest, set "
                            "model.init_from_strict: false)",
                            ganfw_cfg_where(ganfw_cfg_child(model, "init_from")),
                            (long long)rep.loaded);
  if (st != GANFW_OK)
    return ganfw_error_wrap(st, "%s: model.init_from",
                            ganfw_cfg_where(ganfw_cfg_child(model, "init_from")));
  if (how) return GANFW_OK;
  ganfw_log(GANFW_LOG_INFO,
            "model.init_from %s: %lld tensors loaded, %lld kept their initial values, %lld in "
            "the file unused",
            path, (long long)rep.loaded, (long long)rep.missing, (long long)rep.unexpected);
  return GANFW_OK;
}

/* objective.gp, r1, r2, r1_every: penalties on D's input gradient (train/penalty.h). gp is
 * WGAN-GP's: refused with another objective, and beside weight clipping. */
static ganfw_status read_penalties(ganfw_session *s, const ganfw_cfg *section) {
  ganfw_status st;
  s->penalty_every = 1;
  if ((st = ganfw_cfg_float_in(section, "gp", 0, 0, 1e6, 0, &s->penalty_gp)) ||
      (st = ganfw_cfg_float_in(section, "r1", 0, 0, 1e6, 0, &s->penalty_r1)) ||
      (st = ganfw_cfg_float_in(section, "r2", 0, 0, 1e6, 0, &s->penalty_r2)))
    return st;
  const ganfw_cfg *every = ganfw_cfg_child(section, "r1_every");
  if (every && s->penalty_r1 == 0 && s->penalty_r2 == 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: objective.r1_every spaces the r1 and r2 penalties; set r1 (or r2) "
                           "or remove it",
                           ganfw_cfg_where(every));
  if (every && (st = ganfw_cfg_int_in(section, "r1_every", 1, 1, 1000000, &s->penalty_every)))
    return st;
  if (s->penalty_gp > 0) {
    const ganfw_cfg *gp = ganfw_cfg_child(section, "gp");
    if (strcmp(s->objective_name, "wgan") != 0)
      return ganfw_error_set(
          GANFW_ERR_CONFIG,
          "%s: objective.gp is WGAN-GP's penalty, (||grad D(x_hat)|| - 1)^2, which keeps a "
          "Wasserstein critic 1-Lipschitz; objective '%s' scores samples by a %s, which "
          "that constraint does not serve: use `plugin: wgan`, or r1 (the zero-centred "
          "penalty on reals that StyleGAN2 uses with its logistic loss)",
          ganfw_cfg_where(gp), s->objective_name,
          strcmp(s->objective_name, "hinge") == 0 ? "margin" : "probability or target value");
    const ganfw_cfg *clip = ganfw_cfg_child(section, "clip");
    double c = 0.01; /* wgan's default */
    if (clip && (st = ganfw_cfg_float(section, "clip", 0.01, &c)) != GANFW_OK) return st;
    if (c != 0)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: objective.gp replaces weight clipping (the WGAN-GP paper drops "
                             "it); clipping is %s %g: set `clip: 0`",
                             ganfw_cfg_where(gp), clip ? "set to" : "on by default at", c);
  }
  const char *key = s->penalty_gp > 0 ? "gp" : s->penalty_r1 > 0 ? "r1" : "r2";
  if ((s->penalty_gp > 0 || s->penalty_r1 > 0 || s->penalty_r2 > 0) &&
      (st = ganfw_net_double_backward_check(s->discriminator)) != GANFW_OK)
    return ganfw_error_wrap(st, "%s: objective.%s penalises the discriminator's input gradient",
                            ganfw_cfg_where(ganfw_cfg_child(section, key)), key);
  return GANFW_OK;
}

/* objective: {plugin: NAME, ...}: a GAN's losses from an objective plugin (run.c loaded
 * it). Refused for a classifier, without a plugin name, and beside train.label_smoothing
 * (the built-in BCE's key). */
static ganfw_status create_objective(ganfw_session *s, const ganfw_cfg *root) {
  const ganfw_cfg *node = ganfw_cfg_child(root, "objective");
  if (!node) return GANFW_OK;
  const char *where = ganfw_cfg_where(node);
  if (s->family != GANFW_MODEL_GAN)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: objective: a classifier's loss is softmax cross entropy "
                           "(train.label_smoothing smooths it); objective plugins are for GANs; "
                           "remove the section",
                           where);
  if (!s->run->objective)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: objective: name the plugin, e.g. `objective: {plugin: hinge}` "
                           "(bce, hinge, lsgan, wgan; `ganfw plugins` lists the installed ones)",
                           where);
  if (s->train.label_smoothing != 0)
    return ganfw_error_set(
        GANFW_ERR_CONFIG,
        "%s: train.label_smoothing is the built-in BCE's; with objective.plugin set, use the "
        "objective's own key (objective.label_smoothing of bce) and remove train.label_smoothing",
        ganfw_cfg_where(ganfw_cfg_child(ganfw_cfg_section(root, "train"), "label_smoothing")));
  const ganfw_cfg *section = ganfw_cfg_section(root, "objective");
  ganfw_status st = ganfw_plugin_apply_config_keys(s->run->objective, section);
  if (st != GANFW_OK) return st;
  const ganfw_objective_vt *vt = ganfw_plugin_vtable(s->run->objective);
  s->objective_name = ganfw_plugin_name(s->run->objective);
  /* before the plugin reads its keys: a key absent from the config is still absent here */
  if ((st = read_penalties(s, section)) != GANFW_OK) return st;
  if ((st = vt->create(ganfw_host_table(), s->ctx, section, &s->objective)) != GANFW_OK) {
    char what[160];
    snprintf(what, sizeof what, "objective '%s'", s->objective_name);
    return plugin_error(st, section, "objective", what);
  }
  s->objective_vt = vt;
  return GANFW_OK;
}

/* model.conditional (a GAN model's key that the core reads too): the classes of the data set
 * go to both nets, so it needs a labelled data set and a GAN. */
static ganfw_status read_conditional(ganfw_session *s, const ganfw_cfg *root) {
  const ganfw_cfg *model = ganfw_cfg_section(root, "model");
  int32_t cond = 0;
  ganfw_status st = ganfw_cfg_bool(model, "conditional", 0, &cond);
  if (st != GANFW_OK || !cond) return st;
  const char *where = ganfw_cfg_where(ganfw_cfg_child(model, "conditional"));
  if (s->family != GANFW_MODEL_GAN)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: model.conditional is for GANs (labels into G and D); a "
                           "classifier learns the labels: remove the key",
                           where);
  if (s->data_info.num_classes < 2)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: model.conditional needs a labelled data set, and data set '%s' "
                           "(%s) has %d classes; use mnist, fashion_mnist or cifar10, or set "
                           "model.conditional: false",
                           where, s->data_kind ? s->data_kind : "?",
                           s->data_path ? s->data_path : "?", (int)s->data_info.num_classes);
  s->n_classes = s->data_info.num_classes;
  return GANFW_OK;
}

/* train.update_every: {ROLE: N} for a trainer plugin, its nets' n_critic-style ratios. */
static ganfw_status read_update_every(ganfw_session *s, const ganfw_cfg *train) {
  const ganfw_cfg *every = ganfw_cfg_child(train, "update_every");
  if (!every) return GANFW_OK;
  const char *where = ganfw_cfg_where(every);
  if (ganfw_cfg_kind_of(every) != GANFW_CFG_KIND_MAP)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: train.update_every is a map from a net's role to N (its "
                           "optimizer updates on every N-th step), e.g. {generator: 5}",
                           where);
  const char *key;
  for (int64_t i = 0; (key = ganfw_cfg_key_at(every, i)) != NULL; i++) {
    int32_t r = 0;
    while (r < s->n_nets && strcmp(s->nets[r].role, key) != 0) r++;
    if (r == s->n_nets) {
      char roles[256] = "";
      for (int32_t k = 0; k < s->n_nets; k++)
        snprintf(roles + strlen(roles), sizeof roles - strlen(roles), "%s%s", k ? ", " : "",
                 s->nets[k].role);
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: train.update_every.%s: trainer '%s' drives no net '%s' (its "
                             "nets: %s)",
                             where, key, s->trainer_name, key, roles);
    }
    ganfw_status st = ganfw_cfg_int_in(every, key, 1, 1, 1000, &s->train.update_every[r]);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* The GAN loop's keys: train.d_steps_per_g_step (n_critic). train.clip_grad_norm is one
 * number for every net or a map by role ({generator: 10, discriminator: 1}); 0 is off. */
static ganfw_status read_loop_keys(ganfw_session *s, const ganfw_cfg *root) {
  const ganfw_cfg *train = ganfw_cfg_section(root, "train");
  ganfw_train_settings *t = &s->train;
  ganfw_status st;
  t->d_steps_per_g_step = 1;
  if (s->family == GANFW_MODEL_GAN &&
      (st = ganfw_cfg_int_in(train, "d_steps_per_g_step", 1, 1, 1000, &t->d_steps_per_g_step)))
    return st;
  if ((st = ganfw_ema_read(train, s->family, &t->ema_decay, &t->ema_start, &t->ema_net))) return st;
  /* a GAN's smoothing lowers D's real target 1 - eps (one-sided): at 0.5 and past it a real
   * image's target is no longer above a fake's 0 by more than it is below 1 */
  if (s->family == GANFW_MODEL_GAN && t->label_smoothing >= 0.5)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: train.label_smoothing is %g; for a GAN (D's real target 1 - "
                           "eps) it must be in [0, 0.5), e.g. 0.1",
                           ganfw_cfg_where(ganfw_cfg_child(train, "label_smoothing")),
                           t->label_smoothing);
  if (s->family == GANFW_MODEL_GAN &&
      (st = ganfw_cfg_bool(train, "reuse_fake", 0, &t->reuse_fake)) != GANFW_OK)
    return st;
  if (t->reuse_fake && s->exec.micro_batches > 1)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: train.reuse_fake keeps one G(z) and its tape from the D step to "
                           "the G step; with %d micro-batches (memory strategy accumulate) there "
                           "would be %d: set reuse_fake false or drop the accumulation",
                           ganfw_cfg_where(ganfw_cfg_child(train, "reuse_fake")),
                           (int)s->exec.micro_batches, (int)s->exec.micro_batches);
  for (int32_t r = 0; r < GANFW_MAX_NETS; r++) t->update_every[r] = 1;
  if (s->family != GANFW_MODEL_NETS && ganfw_cfg_has(train, "update_every"))
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: train.update_every is for trainer plugins; %s",
                           ganfw_cfg_where(ganfw_cfg_child(train, "update_every")),
                           s->family == GANFW_MODEL_GAN
                               ? "a GAN's n_critic is train.d_steps_per_g_step (D steps per G "
                                 "step)"
                               : "a classifier has one optimizer, updated every step");
  if (s->family == GANFW_MODEL_NETS && (st = read_update_every(s, train)) != GANFW_OK) return st;
  const ganfw_cfg *clip = ganfw_cfg_child(train, "clip_grad_norm");
  const double inf = 1e30;
  if (ganfw_cfg_kind_of(clip) != GANFW_CFG_KIND_MAP) {
    if ((st = ganfw_cfg_float_in(train, "clip_grad_norm", 0, 0, inf, 0, &t->clip_grad_norm[0])))
      return st;
    for (int32_t i = 1; i < GANFW_MAX_NETS; i++) t->clip_grad_norm[i] = t->clip_grad_norm[0];
    return GANFW_OK;
  }
  /* per net: the GAN's and the classifier's slot is their optimizer's, a trainer plugin's
   * the net's index */
  for (int32_t r = 0; r < s->n_nets; r++)
    if ((st = ganfw_cfg_float_in(clip, s->nets[r].role, 0, 0, inf, 0, &t->clip_grad_norm[r])))
      return st;
  return GANFW_OK;
}

static ganfw_status create_optim_in(ganfw_session *s, const ganfw_cfg *section, const char *role,
                                    ganfw_net *net, double lr) {
  if (!s->run->optim)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: no optimizer: set optim.plugin (adam or sgd)",
                           s->run->config_path);
  ganfw_session_optim *o = &s->optim[s->n_optim];
  o->role = role;
  o->net = net;
  o->lr = lr;
  o->base_lr = lr;
  o->vt = ganfw_plugin_vtable(s->run->optim);
  int64_t n = ganfw_net_param_count(net);
  o->params = calloc((size_t)(n ? n : 1), sizeof *o->params);
  if (!o->params) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  s->n_optim++;
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    ganfw_status st = ganfw_net_param_info(net, i, &info);
    if (st != GANFW_OK) return st;
    if (!info.trainable) continue;
    o->params[o->n_params++] = (ganfw_param){info.name, info.value, info.grad};
  }
  const int32_t shard = s->exec.shard_optimizer && ganfw_dist_parallel(s->dist);
  if (shard && s->n_param_groups > 0)
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                           "%s: memory strategy zero does not shard optim.param_groups yet; drop "
                           "one of them",
                           s->run->config_path);
  /* the state the optimizer creates is named after its net too (ctx.h) */
  s->ctx->name_scope = ganfw_net_name(net);
  ganfw_status st;
  if (s->n_param_groups > 0) { /* optim.param_groups */
    st = ganfw_param_groups_create(s->ctx, o, section, s->run->optim, s->param_groups,
                                   s->n_param_groups);
    s->ctx->name_scope = NULL;
    return st;
  }
  st = ganfw_plugin_apply_config_keys(s->run->optim, section);
  if (st == GANFW_OK)
    st = shard
             ? ganfw_zero_create(s->ctx, s->dist, o, o->vt, section) /* memory: [zero] */
             : o->vt->create(ganfw_host_table(), s->ctx, section, o->params, o->n_params, &o->self);
  s->ctx->name_scope = NULL;
  if (st != GANFW_OK) {
    char what[160];
    snprintf(what, sizeof what, "optimizer '%s' for the %s", ganfw_plugin_name(s->run->optim),
             role);
    return plugin_error(st, section, "optim", what);
  }
  return GANFW_OK;
}

static ganfw_status create_optim(ganfw_session *s, const ganfw_cfg *root, const char *role,
                                 ganfw_net *net, double lr) {
  return create_optim_in(s, ganfw_cfg_section(root, "optim"), role, net, lr);
}

static ganfw_status read_lr(const ganfw_cfg *optim, const char *key, double def, double *out) {
  return ganfw_cfg_float_in(optim, key, def, 0, 10, GANFW_CFG_OPEN_LO | GANFW_CFG_OPEN_HI, out);
}

/* The trained net of `role`, its index in s->nets, or -1. */
static int32_t net_of_role(const ganfw_session *s, const char *role) {
  for (int32_t r = 0; r < s->n_nets; r++)
    if (strcmp(s->nets[r].role, role) == 0) return r;
  return -1;
}

/* A trainer plugin's optimizers: one per trained net. `optim:` is either one section for
 * every net (optim.plugin with its keys; optim.lr) or has a section per net
 * (optim.<role>: {lr: ..., betas: ...}, optim.plugin above them), in which case every
 * trained net needs one, and `optim.<role>: {frozen: true}` leaves that net untrained. */
static ganfw_status create_trainer_optims(ganfw_session *s, const ganfw_cfg *root, double lr) {
  const ganfw_cfg *optim = ganfw_cfg_section(root, "optim");
  int32_t per_net = 0;
  char roles[256] = "";
  for (int32_t r = 0; r < s->n_nets; r++)
    snprintf(roles + strlen(roles), sizeof roles - strlen(roles), "%s%s", r ? ", " : "",
             s->nets[r].role);
  const char *key;
  for (int64_t i = 0; (key = ganfw_cfg_key_at(optim, i)) != NULL; i++) {
    const ganfw_cfg *child = ganfw_cfg_child(optim, key);
    if (ganfw_cfg_kind_of(child) != GANFW_CFG_KIND_MAP || strcmp(key, "schedule") == 0) continue;
    int32_t r = net_of_role(s, key);
    if (r < 0)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: optim.%s: trainer '%s' has no net '%s' (its nets: %s)",
                             ganfw_cfg_where(child), key, s->trainer_name, key, roles);
    int32_t frozen = 0;
    ganfw_status st = ganfw_cfg_bool(child, "frozen", 0, &frozen);
    if (st != GANFW_OK) return st;
    if (s->nets[r].frozen && !frozen)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: optim.%s: trainer '%s' keeps the %s frozen (no gradients); "
                             "remove the section",
                             ganfw_cfg_where(child), key, s->trainer_name, key);
    if (frozen) s->nets[r].frozen = 1;
    per_net = 1;
  }
  /* optim's own keys are the nets' defaults: read (declared keys marked) once here */
  if (per_net) {
    ganfw_status st = ganfw_plugin_apply_config_keys(s->run->optim, optim);
    if (st != GANFW_OK) return st;
  }
  for (int32_t r = 0; r < s->n_nets; r++) {
    ganfw_session_net *n = &s->nets[r];
    if (n->frozen) {
      ganfw_status st = ganfw_net_freeze(n->net, 0, ganfw_net_layer_count(n->net));
      if (st != GANFW_OK) return st;
      ganfw_net_set_train(n->net, 0, 0); /* eval mode: running statistics, no dropout */
      continue;
    }
    n->optim = s->n_optim;
    if (!per_net) {
      ganfw_status st = create_optim_in(s, optim, n->role, n->net, lr);
      if (st != GANFW_OK) return st;
      continue;
    }
    const ganfw_cfg *over = ganfw_cfg_child(optim, n->role);
    if (!over)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: optim has a section per net, and none for the %s: add "
                             "optim.%s: {lr: ...}, or optim.%s: {frozen: true} to leave it "
                             "untrained",
                             ganfw_cfg_where(optim), n->role, n->role, n->role);
    /* the net's settings: optim's keys with its own on top (as optim.param_groups) */
    const char *skip[GANFW_MAX_NETS + 4] = {"plugin", "schedule", "param_groups", "frozen"};
    int64_t n_skip = 4;
    for (int32_t k = 0; k < s->n_nets; k++) skip[n_skip++] = s->nets[k].role;
    ganfw_cfg *settings = NULL;
    double net_lr = lr;
    ganfw_status st = ganfw_cfg_overlay(optim, skip, n_skip, over, &settings);
    if (st == GANFW_OK) st = read_lr(settings, "lr", lr, &net_lr);
    if (st == GANFW_OK) st = create_optim_in(s, settings, n->role, n->net, net_lr);
    if (settings) ganfw_cfg_overlay_settle(settings, over);
    ganfw_cfg_overlay_free(settings);
    if (st != GANFW_OK) return st;
  }
  /* the frozen nets' gradients were never used: peaks count from here (plan, compare) */
  ganfw_alloc_reset_peak(s->ctx->alloc);
  return GANFW_OK;
}

/* train.ema for a trainer plugin: the averages of train.ema.net (default: the trainer's
 * generating net), a trained net. */
static ganfw_status create_trainer_ema(ganfw_session *s, const ganfw_cfg *root) {
  const char *role = s->train.ema_net ? s->train.ema_net : s->generator_role;
  const ganfw_cfg *ema = ganfw_cfg_child(ganfw_cfg_section(root, "train"), "ema");
  if (!role)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: train.ema: name the net to average, e.g. `ema: {net: %s, decay: "
                           "0.999}` (trainer '%s' has no generating net to default to)",
                           ganfw_cfg_where(ema), s->nets[0].role, s->trainer_name);
  for (int32_t r = 0; r < s->n_nets; r++) {
    if (strcmp(s->nets[r].role, role) != 0) continue;
    if (s->nets[r].optim < 0)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: train.ema.net '%s' is frozen: there is nothing to average",
                             ganfw_cfg_where(ema), role);
    return ganfw_ema_create(s, r, s->train.ema_decay, s->train.ema_start, &s->ema);
  }
  return ganfw_error_set(GANFW_ERR_CONFIG, "%s: train.ema.net '%s': trainer '%s' has no such net",
                         ganfw_cfg_where(ema), role, s->trainer_name);
}

/* Creates the memory strategies in config order and lets each adjust the options. */
static ganfw_status create_memory(ganfw_session *s) {
  s->exec = (ganfw_exec_options){.struct_size = sizeof s->exec,
                                 .compute_dtype = GANFW_DTYPE_F32,
                                 .micro_batches = 1,
                                 .batch_size = s->train.batch_size,
                                 .ranks = ganfw_dist_world_size()};
  for (int32_t i = 0; i < s->run->n_memory; i++) {
    ganfw_session_memory *m = &s->memory[i];
    m->name = ganfw_plugin_name(s->run->memory[i]);
    m->vt = ganfw_plugin_vtable(s->run->memory[i]);
    ganfw_status st = ganfw_plugin_apply_config_keys(s->run->memory[i], s->run->memory_cfg[i]);
    if (st != GANFW_OK) return st;
    st = m->vt->create(ganfw_host_table(), s->ctx, s->run->memory_cfg[i], &m->self);
    if (st != GANFW_OK) {
      char what[160];
      snprintf(what, sizeof what, "memory strategy '%s'", m->name);
      return plugin_error(st, s->run->memory_cfg[i], m->name, what);
    }
    s->n_memory = i + 1;
    if ((st = m->vt->configure(m->self, &s->exec)) != GANFW_OK)
      return ganfw_error_wrap(st, "memory strategy '%s'", m->name);
    if (m->vt->loss_scale) s->loss_scaling = 1;
  }
  const ganfw_exec_options *e = &s->exec;
  if (e->shard_optimizer && ganfw_dist_world_size() <= 1)
    ganfw_log(GANFW_LOG_DEBUG, "memory strategy zero: one rank, nothing to shard");
  if (e->compute_dtype != GANFW_DTYPE_F32 && e->compute_dtype != GANFW_DTYPE_F16 &&
      e->compute_dtype != GANFW_DTYPE_BF16)
    return ganfw_error_set(GANFW_ERR_PLUGIN, "memory: compute dtype %d is not f32, f16 or bf16",
                           (int)e->compute_dtype);
  if (e->micro_batches < 1 || s->train.batch_size % e->micro_batches != 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: memory: %d micro-batches do not divide train.batch_size %lld; "
                           "pick a divisor",
                           s->run->config_path, (int)e->micro_batches,
                           (long long)s->train.batch_size);
  return GANFW_OK;
}

/* Hands every net to every strategy and sets the compute dtype. */
static ganfw_status configure_nets(ganfw_session *s) {
  for (int32_t r = 0; r < s->n_nets; r++) {
    ganfw_net *net = s->nets[r].net;
    const char *role = s->nets[r].role;
    ganfw_status st = ganfw_net_set_compute_dtype(net, s->exec.compute_dtype);
    if (st != GANFW_OK) return st;
    for (int32_t i = 0; i < s->n_memory; i++) {
      const ganfw_session_memory *m = &s->memory[i];
      if (m->vt->configure_net && (st = m->vt->configure_net(m->self, role, net)))
        return ganfw_error_wrap(st, "memory strategy '%s' on the %s", m->name, role);
    }
  }
  for (int32_t i = 0; i < s->n_memory; i++) {
    const ganfw_session_memory *m = &s->memory[i];
    ganfw_status st;
    if (m->vt->configure_done && (st = m->vt->configure_done(m->self)))
      return ganfw_error_wrap(st, "memory strategy '%s'", m->name);
  }
  return GANFW_OK;
}

static ganfw_status open_session(ganfw_session *s, int32_t with_data, const ganfw_data_info *info) {
  const ganfw_cfg *root = ganfw_config_root(s->run->config);
  ganfw_status st;
  if ((st = read_train(s, root)) != GANFW_OK) return st;
  ganfw_ctx_options copt = s->run->ctx_opt;
  const int32_t local = ganfw_dist_world_local_size();
  if (local > 1) { /* the ranks on this machine share its cores (a plan too: workspaces) */
    const int32_t all = copt.threads > 0 ? copt.threads : ganfw_cpus_available()->usable;
    copt.threads = all / local > 0 ? all / local : 1;
    if (ganfw_dist_world_rank() == 0 && !copt.meta)
      ganfw_log(GANFW_LOG_INFO, "%d ranks on this machine: %d threads each (device.threads %d)",
                (int)local, (int)copt.threads, (int)all);
  }
  if ((st = ganfw_ctx_create(&copt, &s->ctx)) != GANFW_OK) return st;
  static int said; /* device.threads: auto, once a process */
  if (copt.threads <= 0 && !copt.meta && !said && s->ctx->device_type == GANFW_DEVICE_CPU) {
    const ganfw_cpus *c = ganfw_cpus_available();
    char quota[64] = "no CPU quota";
    if (c->quota > 0) snprintf(quota, sizeof quota, "a CPU quota of %.2f cores", c->quota);
    ganfw_log(GANFW_LOG_INFO, "device.threads auto: %d threads (%d CPUs in the affinity mask, %s)",
              (int)s->ctx->threads, (int)c->affinity, quota);
    said = 1;
  }
  s->ctx->config = s->run->config; /* model.batchnorm_* (nn/layers/batchnorm2d.c) */
  if ((st = create_memory(s)) != GANFW_OK) return st;
  s->ctx->grads_deferred = s->exec.step_in_backward; /* memory: [step_in_backward] */
  if (s->exec.compute_dtype != GANFW_DTYPE_F32 && !copt.meta &&
      s->ctx->device_type == GANFW_DEVICE_CPU && ganfw_dist_world_rank() == 0)
    ganfw_log(GANFW_LOG_INFO, "%s", ganfw_cpu_lp_describe(s->exec.compute_dtype));
  if ((st = open_data(s, root, with_data, info)) != GANFW_OK) return st;
  if ((st = create_model(s, root)) != GANFW_OK) return st;
  if ((st = ganfw_dp_open(s)) != GANFW_OK) return st; /* mpirun: the job's ranks */
  if ((st = read_conditional(s, root)) != GANFW_OK) return st;
  if ((st = create_objective(s, root)) != GANFW_OK) return st;
  if ((st = read_loop_keys(s, root)) != GANFW_OK) return st;
  /* A step takes full batches only (a short last one is skipped): a data set smaller than
   * one batch would never give it one, with or without drop_last (the rule find-batch caps
   * its search with). A plan (meta backend) reads no batch and may ask for any size. */
  const char *why = NULL;
  if (with_data && !s->run->ctx_opt.meta &&
      s->train.batch_size >
          ganfw_loader_max_batch(ganfw_dataset_size(s->data), s->loader_cfg.drop_last, &why))
    return ganfw_error_set(
        GANFW_ERR_CONFIG,
        "%s: train.batch_size %lld is larger than the %lld images of the data "
        "set '%s' (%s); lower train.batch_size",
        ganfw_cfg_where(ganfw_cfg_child(ganfw_cfg_section(root, "train"), "batch_size")),
        (long long)s->train.batch_size, (long long)ganfw_dataset_size(s->data), s->data_path, why);
  if ((st = configure_nets(s)) != GANFW_OK) return st;
  const ganfw_cfg *model = ganfw_cfg_section(root, "model");
  if ((st = apply_freeze(s, model)) != GANFW_OK) return st;
  if ((st = apply_init_from(s, model, with_data)) != GANFW_OK) return st;
  if ((st = role_init_from(s, with_data)) != GANFW_OK) return st;
  /* masks before the optimizers: they name weight_orig (train/prune_run.h) */
  if ((st = ganfw_prune_run_open(s, &s->prune)) != GANFW_OK) return st;
  const ganfw_cfg *optim = ganfw_cfg_section(root, "optim");
  double lr, lr_g, lr_d;
  if ((st = read_lr(optim, "lr", 1e-3, &lr)) != GANFW_OK) return st;
  if ((st = ganfw_schedule_read(s->run->config, optim, &s->schedule)) != GANFW_OK) return st;
  static const char *const gan_roles[] = {"generator", "discriminator"};
  static const char *const classifier_role[] = {"classifier"};
  const int32_t gan = s->family == GANFW_MODEL_GAN;
  const char *net_roles[GANFW_MAX_NETS];
  for (int32_t r = 0; r < s->n_nets; r++) net_roles[r] = s->nets[r].role;
  if (s->family == GANFW_MODEL_NETS &&
      (st = ganfw_param_groups_read(optim, net_roles, s->n_nets, &s->param_groups,
                                    &s->n_param_groups)) != GANFW_OK)
    return st;
  if (s->family != GANFW_MODEL_NETS &&
      (st = ganfw_param_groups_read(optim, gan ? gan_roles : classifier_role, gan ? 2 : 1,
                                    &s->param_groups, &s->n_param_groups)) != GANFW_OK)
    return st;
  if (s->family == GANFW_MODEL_NETS) {
    if ((st = create_trainer_optims(s, root, lr)) != GANFW_OK) return st;
    if (s->train.ema_decay > 0 && (st = create_trainer_ema(s, root)) != GANFW_OK) return st;
  } else if (gan) {
    if ((st = read_lr(optim, "lr_generator", lr, &lr_g)) ||
        (st = read_lr(optim, "lr_discriminator", lr, &lr_d)))
      return st;
    if ((st = create_optim(s, root, "generator", s->generator, lr_g)) ||
        (st = create_optim(s, root, "discriminator", s->discriminator, lr_d)))
      return st;
    if (s->train.ema_decay > 0 &&
        (st = ganfw_ema_create(s, 0, s->train.ema_decay, s->train.ema_start, &s->ema)) != GANFW_OK)
      return st;
  } else if ((st = create_optim(s, root, "classifier", s->classifier, lr)) != GANFW_OK) {
    return st;
  }
  if ((st = ganfw_dp_open_reducers(s)) != GANFW_OK) return st;
  if ((st = ganfw_param_groups_check(s->param_groups, s->n_param_groups, s->optim, s->n_optim)))
    return st;
  return ganfw_sib_create(s, &s->sib); /* memory: [step_in_backward] */
}

ganfw_status ganfw_session_open(ganfw_run *run, int32_t with_data, const ganfw_data_info *info,
                                ganfw_session **out) {
  *out = NULL;
  ganfw_session *s = calloc(1, sizeof *s);
  if (!s) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  s->run = run;
  s->penalty_every = 1; /* objective.r1_every's default, also without an objective section */
  ganfw_status st = open_session(s, with_data, info);
  if (st != GANFW_OK) {
    ganfw_session_close(s);
    return st;
  }
  *out = s;
  return GANFW_OK;
}

void ganfw_session_close(ganfw_session *s) {
  if (!s) return;
  for (int32_t i = 0; i < s->n_optim; i++) {
    if (s->optim[i].self) s->optim[i].vt->destroy(s->optim[i].self);
    free(s->optim[i].params);
  }
  free(s->param_groups);
  ganfw_prune_run_destroy(s->prune);
  ganfw_sib_destroy(s->sib);
  ganfw_dp_close(s);
  ganfw_ema_destroy(s->ema);
  if (s->objective) s->objective_vt->destroy(s->objective);
  if (s->model) s->model_vt->destroy(s->model);
  for (int32_t i = 0; i < GANFW_MAX_ROLE_MODELS; i++)
    if (s->role_model[i].self) s->role_model[i].vt->destroy(s->role_model[i].self);
  if (s->trainer) s->trainer_vt->destroy(s->trainer);
  for (int32_t i = 0; i < s->n_memory; i++)
    if (s->memory[i].self) s->memory[i].vt->destroy(s->memory[i].self);
  ganfw_dataset_destroy(s->data);
  ganfw_dataset_destroy(s->other);
  ganfw_ctx_destroy(s->ctx);
  free(s);
}
