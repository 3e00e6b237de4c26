/* optim.param_groups (see param_groups.h): one optimizer instance per group behind one
 * ganfw_optim_vt, as PyTorch's param_groups are one optimizer's. */
#include "train/param_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "config/config.h"
#include "plugin/plugin_host.h"

static const char *const select_names[GANFW_GROUP_SELECT_COUNT] = {"all", "bias_and_norm",
                                                                   "weights"};

/* Keys of a group that the core reads; the others are the optimizer plugin's. */
static const char *const group_keys[] = {"prefix", "select", "net", "lr"};
/* Keys of `optim` that belong to the whole optimizer, not to a group (and are not the
 * plugin's). */
static const char *const optimizer_keys[] = {
    "plugin",   "lr",        "lr_generator", "lr_discriminator", "param_groups",
    "schedule", "step_size", "gamma",        "min_lr",           "warmup_steps"};
#define N_OF(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

/* One group's instance of the plugin. */
typedef struct group {
  void *self;
  ganfw_param *params; /* its parameters (copies of the optimizer's entries) */
  int64_t n;
  double base_lr; /* 0: the optimizer's (the default group, and groups without lr) */
  double lr;      /* the rate of the next step */
} group;

/* The grouped optimizer: [0] the default group, then one per spec, in config order. */
typedef struct grouped {
  const ganfw_optim_vt *inner;
  group *g;
  int32_t n;
} grouped;

ganfw_status ganfw_param_groups_read(const ganfw_cfg *optim, const char *const *roles,
                                     int32_t n_roles, ganfw_group_spec **out, int32_t *n) {
  *out = NULL;
  *n = 0;
  const ganfw_cfg *list = ganfw_cfg_child(optim, "param_groups");
  if (!list) return GANFW_OK;
  int64_t len = ganfw_cfg_list_len(optim, "param_groups");
  if (len < 0) return GANFW_ERR_CONFIG; /* not a list: recorded with its place */
  if (len == 0) return GANFW_OK;
  ganfw_group_spec *specs = calloc((size_t)len, sizeof *specs);
  if (!specs) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; i < len && st == GANFW_OK; i++) {
    ganfw_group_spec *g = &specs[i];
    g->node = ganfw_cfg_list_at(optim, "param_groups", i);
    const char *where = ganfw_cfg_where(g->node), *path = ganfw_cfg_path(g->node);
    if (ganfw_cfg_kind_of(g->node) != GANFW_CFG_KIND_MAP) {
      st = ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s: expected a map that picks parameters by prefix and/or "
                           "select, e.g. {prefix: main.0, lr: 1.0e-4} or {select: "
                           "bias_and_norm, weight_decay: 0}",
                           where, path);
      break;
    }
    for (int64_t k = 0; k < N_OF(optimizer_keys) && st == GANFW_OK; k++) {
      if (strcmp(optimizer_keys[k], "lr") == 0 || !ganfw_cfg_has(g->node, optimizer_keys[k]))
        continue;
      st = ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s.%s: belongs to the whole optimizer, not to a group; set it "
                           "in `optim` (a group sets lr and the optimizer's own keys, such as "
                           "weight_decay)",
                           ganfw_cfg_where(ganfw_cfg_child(g->node, optimizer_keys[k])), path,
                           optimizer_keys[k]);
    }
    if (st != GANFW_OK) break;
    /* read only when written: a recorded default would not read back (lr 0) */
    const char *select = NULL;
    if ((ganfw_cfg_has(g->node, "prefix") &&
         (st = ganfw_cfg_string(g->node, "prefix", NULL, &g->prefix))) ||
        (ganfw_cfg_has(g->node, "select") &&
         (st = ganfw_cfg_string(g->node, "select", NULL, &select))) ||
        (ganfw_cfg_has(g->node, "net") && (st = ganfw_cfg_string(g->node, "net", NULL, &g->net))) ||
        (ganfw_cfg_has(g->node, "lr") &&
         (st = ganfw_cfg_float_in(g->node, "lr", 0, 0, 10, GANFW_CFG_OPEN_LO | GANFW_CFG_OPEN_HI,
                                  &g->lr))))
      break;
    if (g->prefix && !*g->prefix) g->prefix = NULL;
    if (!g->prefix && !select) {
      st = ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s: picks no parameters: give it a prefix (a layer's name, "
                           "e.g. main.0) and/or select (bias_and_norm or weights)",
                           where, path);
      break;
    }
    g->select = select ? -1 : GANFW_GROUP_SELECT_ALL;
    for (int32_t k = 0; select && k < GANFW_GROUP_SELECT_COUNT; k++)
      if (strcmp(select, select_names[k]) == 0) g->select = k;
    if (g->select < 0) {
      st = ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s.select is '%s'; use bias_and_norm (1-D parameters: biases "
                           "and normalisation weights), weights (the others) or all",
                           ganfw_cfg_where(ganfw_cfg_child(g->node, "select")), path, select);
      break;
    }
    if (g->net) {
      int32_t known = 0;
      char names[128] = "";
      for (int32_t r = 0; r < n_roles; r++) {
        known |= strcmp(g->net, roles[r]) == 0;
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                 r == 0             ? ""
                 : r + 1 == n_roles ? " or "
                                    : ", ",
                 roles[r]);
      }
      if (!known) {
        st = ganfw_error_set(GANFW_ERR_CONFIG, "%s: %s.net is '%s'; this model's nets: %s",
                             ganfw_cfg_where(ganfw_cfg_child(g->node, "net")), path, g->net, names);
        break;
      }
    }
  }
  if (st != GANFW_OK) {
    free(specs);
    return st;
  }
  *out = specs;
  *n = (int32_t)len;
  return GANFW_OK;
}

/* Whether parameter `name` lies under layer prefix `prefix`: the name itself, or the name
 * of something inside it ("main.1" holds main.1.weight, not main.10.weight). */
static int32_t under_prefix(const char *name, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) != 0) return 0;
  return name[n] == '\0' || name[n] == '.' || prefix[n - 1] == '.';
}

static int32_t spec_matches(const ganfw_group_spec *g, const char *role, const ganfw_param *p) {
  if (g->net && strcmp(g->net, role) != 0) return 0;
  if (g->prefix && !under_prefix(p->name ? p->name : "", g->prefix)) return 0;
  int32_t one_dim = p->value->ndim <= 1;
  return g->select == GANFW_GROUP_SELECT_ALL ||
         (g->select == GANFW_GROUP_SELECT_BIAS_AND_NORM) == one_dim;
}

static void grouped_destroy(void *self) {
  grouped *o = self;
  if (!o) return;
  for (int32_t i = 0; i < o->n; i++) {
    if (o->g[i].self) o->inner->destroy(o->g[i].self);
    free(o->g[i].params);
  }
  free(o->g);
  free(o);
}

static ganfw_status grouped_step(void *self, double lr) {
  grouped *o = self;
  o->g[0].lr = lr; /* the default group's is the optimizer's */
  for (int32_t i = 0; i < o->n; i++) {
    ganfw_status st = o->inner->step(o->g[i].self, o->g[i].lr);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* The state tensors of every group in turn: the plugins name them after their parameter,
 * so the names stay unique and a checkpoint's layout does not depend on the grouping. */
static ganfw_tensor *grouped_state_tensor(void *self, int64_t i, const char **name) {
  grouped *o = self;
  if (!o->inner->state_tensor) return NULL;
  for (int32_t k = 0; k < o->n; k++) {
    int64_t j = 0;
    ganfw_tensor *t;
    while ((t = o->inner->state_tensor(o->g[k].self, j, name)) != NULL) {
      if (i == 0) return t;
      i--;
      j++;
    }
  }
  return NULL;
}

/* Every group steps together, so their counts agree: the largest stands for them. */
static int64_t grouped_get_step(void *self) {
  grouped *o = self;
  int64_t step = 0;
  for (int32_t k = 0; o->inner->get_step && k < o->n; k++) {
    int64_t s = o->inner->get_step(o->g[k].self);
    if (s > step) step = s;
  }
  return step;
}

static void grouped_set_step(void *self, int64_t step) {
  grouped *o = self;
  for (int32_t k = 0; o->inner->set_step && k < o->n; k++) o->inner->set_step(o->g[k].self, step);
}

static const ganfw_optim_vt grouped_vt = {
    .struct_size = sizeof(ganfw_optim_vt),
    .kind = GANFW_VT_TAG_OPTIM,
    .create = NULL, /* made by ganfw_param_groups_create */
    .destroy = grouped_destroy,
    .step = grouped_step,
    .state_tensor = grouped_state_tensor,
    .get_step = grouped_get_step,
    .set_step = grouped_set_step,
    .get_extension = NULL,
};

/* Creates group k's instance from `cfg` and wraps a failure with where it is. */
static ganfw_status create_instance(grouped *o, int32_t k, ganfw_ctx *ctx,
                                    const ganfw_session_optim *so, const ganfw_cfg *cfg,
                                    ganfw_plugin *plugin, const ganfw_group_spec *spec) {
  ganfw_status st =
      o->inner->create(ganfw_host_table(), ctx, cfg, o->g[k].params, o->g[k].n, &o->g[k].self);
  if (st == GANFW_OK || st == GANFW_ERR_OOM) return st;
  if (!spec)
    return ganfw_error_wrap(st, "optim: optimizer '%s' for the %s", ganfw_plugin_name(plugin),
                            so->role);
  return ganfw_error_wrap(st, "%s: %s: optimizer '%s' for the %s", ganfw_cfg_where(spec->node),
                          ganfw_cfg_path(spec->node), ganfw_plugin_name(plugin), so->role);
}

ganfw_status ganfw_param_groups_create(ganfw_ctx *ctx, ganfw_session_optim *so,
                                       const ganfw_cfg *optim, ganfw_plugin *plugin,
                                       ganfw_group_spec *specs, int32_t n_specs) {
  grouped *o = calloc(1, sizeof *o);
  if (!o) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  o->inner = ganfw_plugin_vtable(plugin);
  o->n = n_specs + 1;
  o->g = calloc((size_t)o->n, sizeof *o->g);
  ganfw_status st = o->g ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int32_t k = 0; k < o->n && st == GANFW_OK; k++) {
    o->g[k].params = calloc((size_t)(so->n_params ? so->n_params : 1), sizeof *o->g[k].params);
    if (!o->g[k].params) st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  /* each parameter to the first group that matches it, else to the default group */
  for (int64_t i = 0; i < so->n_params && st == GANFW_OK; i++) {
    const ganfw_param *p = &so->params[i];
    int32_t home = 0;
    for (int32_t k = 0; k < n_specs; k++) {
      if (!spec_matches(&specs[k], so->role, p)) continue;
      specs[k].matched++;
      if (home == 0) {
        home = k + 1;
        specs[k].taken++;
      } else if (!specs[k].taken_by) {
        specs[k].taken_by = ganfw_cfg_path(specs[home - 1].node);
      }
    }
    o->g[home].params[o->g[home].n++] = *p;
  }
  for (int32_t k = 0; k < o->n && st == GANFW_OK; k++) {
    o->g[k].base_lr = k == 0 ? 0 : specs[k - 1].lr;
    o->g[k].lr = o->g[k].base_lr > 0 ? o->g[k].base_lr : so->lr;
    if (k == 0) { /* the section itself: its keys are read and declared as they were */
      st = ganfw_plugin_apply_config_keys(plugin, optim);
      if (st == GANFW_OK) st = create_instance(o, k, ctx, so, optim, plugin, NULL);
      continue;
    }
    const ganfw_cfg *node = specs[k - 1].node;
    const char *skip[N_OF(optimizer_keys) + N_OF(group_keys)];
    int64_t n_skip = 0;
    for (int64_t j = 0; j < N_OF(optimizer_keys); j++) skip[n_skip++] = optimizer_keys[j];
    for (int64_t j = 0; j < N_OF(group_keys); j++) skip[n_skip++] = group_keys[j];
    ganfw_cfg *settings = NULL;
    if ((st = ganfw_cfg_overlay(optim, skip, n_skip, node, &settings)) != GANFW_OK) break;
    st = ganfw_plugin_apply_config_keys(plugin, settings);
    if (st == GANFW_OK) st = create_instance(o, k, ctx, so, settings, plugin, &specs[k - 1]);
    ganfw_cfg_overlay_settle(settings, node); /* a key the plugin did not read stays unread */
    ganfw_cfg_overlay_free(settings);
  }
  if (st != GANFW_OK) {
    grouped_destroy(o);
    return st;
  }
  so->vt = &grouped_vt;
  so->self = o;
  for (int32_t k = 0; k < o->n; k++) {
    char lr[48] = "the optimizer's lr";
    if (o->g[k].base_lr > 0) snprintf(lr, sizeof lr, "lr %g", o->g[k].base_lr);
    ganfw_log(GANFW_LOG_DEBUG, "%s: %s: %lld parameters, %s", so->role,
              k == 0 ? "optim (the default group)" : ganfw_cfg_path(specs[k - 1].node),
              (long long)o->g[k].n, lr);
  }
  return GANFW_OK;
}

/* "main.0, main.1, ..." (the layers that hold trainable parameters) into buf. */
static void list_layers(const ganfw_session_optim *o, char *buf, size_t size) {
  size_t len = strlen(buf);
  const char *last = NULL;
  size_t last_n = 0;
  int32_t listed = 0;
  for (int64_t i = 0; i < o->n_params && len + 8 < size; i++) {
    const char *name = o->params[i].name ? o->params[i].name : "?";
    const char *dot = strrchr(name, '.');
    size_t n = dot ? (size_t)(dot - name) : strlen(name);
    if (last && n == last_n && strncmp(name, last, n) == 0) continue;
    last = name;
    last_n = n;
    if (listed++ == 12) {
      snprintf(buf + len, size - len, ", ...");
      return;
    }
    snprintf(buf + len, size - len, "%s%.*s", len && buf[len - 1] != ' ' ? ", " : "", (int)n, name);
    len = strlen(buf);
  }
}

ganfw_status ganfw_param_groups_check(const ganfw_group_spec *specs, int32_t n_specs,
                                      const ganfw_session_optim *optims, int32_t n_optim) {
  for (int32_t k = 0; k < n_specs; k++) {
    const ganfw_group_spec *g = &specs[k];
    if (g->taken > 0) continue;
    const char *path = ganfw_cfg_path(g->node);
    if (g->matched > 0)
      return ganfw_error_set(GANFW_ERR_CONFIG,
                             "%s: %s: every parameter it picks joined %s first (a parameter "
                             "joins the first group that matches it): put the narrower group "
                             "first, or drop this one",
                             ganfw_cfg_where(g->node), path, g->taken_by ? g->taken_by : "?");
    char layers[640] = "";
    for (int32_t i = 0; i < n_optim; i++) {
      if (g->net && strcmp(g->net, optims[i].role) != 0) continue;
      snprintf(layers + strlen(layers), sizeof layers - strlen(layers),
               "%s%s: ", layers[0] ? "; " : "", optims[i].role);
      list_layers(&optims[i], layers, sizeof layers);
    }
    const ganfw_cfg *key = ganfw_cfg_child(g->node, g->prefix ? "prefix" : "select");
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: %s.%s: '%s' matches no trainable parameter%s%s; the layers with "
                           "parameters are (%s)",
                           ganfw_cfg_where(key), path, g->prefix ? "prefix" : "select",
                           g->prefix ? g->prefix : select_names[g->select],
                           g->net ? " of the " : "", g->net ? g->net : "", layers);
  }
  return GANFW_OK;
}

void ganfw_optim_set_lr(ganfw_session_optim *o, const ganfw_schedule *schedule, int64_t step,
                        int64_t total) {
  o->lr = ganfw_schedule_lr(schedule, o->base_lr, step, total);
  if (o->vt != &grouped_vt) return;
  grouped *g = o->self;
  for (int32_t k = 0; k < g->n; k++)
    g->g[k].lr =
        g->g[k].base_lr > 0 ? ganfw_schedule_lr(schedule, g->g[k].base_lr, step, total) : o->lr;
}

int32_t ganfw_param_groups_count(const ganfw_session_optim *o) {
  return o->vt == &grouped_vt ? ((const grouped *)o->self)->n : 0;
}

int64_t ganfw_param_group_size(const ganfw_session_optim *o, int32_t i) {
  if (i < 0 || i >= ganfw_param_groups_count(o)) return 0;
  return ((const grouped *)o->self)->g[i].n;
}

double ganfw_param_group_lr(const ganfw_session_optim *o, int32_t i) {
  if (i < 0 || i >= ganfw_param_groups_count(o)) return 0;
  return ((const grouped *)o->self)->g[i].lr;
}
