/* The wrappers that name calls into a plugin (see plugin_call.h). C has no
 * closures, so a wrapper that knows its plugin is a function per plugin file: SLOT_COUNT
 * slots, each with one wrapper per vtable member of every kind, written once below as a
 * list per kind (X macros). A wrapper makes its frame the thread's current call, calls
 * the plugin's own member kept in its slot, and puts the previous frame back: nested calls
 * (a trainer's step calling an optimizer's) name the innermost plugin. */
#include "plugin/plugin_call.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "ganfw/layer_plugin.h"
#include "ganfw/memory.h"
#include "ganfw/model.h"
#include "ganfw/objective.h"
#include "ganfw/optim.h"
#include "ganfw/plugin.h"
#include "ganfw/trainer.h"

/* --- every member of every vtable ------------------------------------------------------ */

/* R(slot, kind, member, return type, parameters, arguments) for a member that returns a
 * value, V(slot, kind, member, parameters, arguments) for a void one. A member a vtable gains
 * needs its line here (the asserts below fail until it has one); get_extension is called at
 * load, but it is plugin code too. */
#define MODEL_CALLS(R, V, s)                                                                       \
  R(s, model, create, ganfw_status,                                                                \
    (const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg, const ganfw_data_info *data,    \
     void **self),                                                                                 \
    (host, ctx, cfg, data, self))                                                                  \
  V(s, model, destroy, (void *self), (self))                                                       \
  R(s, model, net, ganfw_net *, (void *self, const char *role), (self, role))                      \
  R(s, model, latent_dim, int64_t, (void *self), (self))                                           \
  R(s, model, get_extension, const void *, (const char *id), (id))

#define OPTIM_CALLS(R, V, s)                                                                       \
  R(s, optim, create, ganfw_status,                                                                \
    (const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg, const ganfw_param *params,      \
     int64_t n, void **self),                                                                      \
    (host, ctx, cfg, params, n, self))                                                             \
  V(s, optim, destroy, (void *self), (self))                                                       \
  R(s, optim, step, ganfw_status, (void *self, double lr), (self, lr))                             \
  R(s, optim, state_tensor, ganfw_tensor *, (void *self, int64_t i, const char **name),            \
    (self, i, name))                                                                               \
  R(s, optim, get_step, int64_t, (void *self), (self))                                             \
  V(s, optim, set_step, (void *self, int64_t step), (self, step))                                  \
  R(s, optim, get_extension, const void *, (const char *id), (id))                                 \
  R(s, optim, step_begin, ganfw_status, (void *self, double lr), (self, lr))                       \
  R(s, optim, step_param, ganfw_status, (void *self, int64_t i), (self, i))                        \
  R(s, optim, step_end, ganfw_status, (void *self), (self))

#define MEMORY_CALLS(R, V, s)                                                                      \
  R(s, memory, create, ganfw_status,                                                               \
    (const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg, void **self),                   \
    (host, ctx, cfg, self))                                                                        \
  V(s, memory, destroy, (void *self), (self))                                                      \
  R(s, memory, configure, ganfw_status, (void *self, ganfw_exec_options *opts), (self, opts))      \
  R(s, memory, configure_net, ganfw_status, (void *self, const char *role, ganfw_net *net),        \
    (self, role, net))                                                                             \
  R(s, memory, loss_scale, double, (void *self, int32_t opt), (self, opt))                         \
  R(s, memory, after_backward, ganfw_status,                                                       \
    (void *self, int32_t opt, const ganfw_param *params, int64_t n, int32_t *skip_step),           \
    (self, opt, params, n, skip_step))                                                             \
  R(s, memory, step_end, ganfw_status, (void *self), (self))                                       \
  R(s, memory, scalar, int32_t, (void *self, int32_t i, const char **name, double *value),         \
    (self, i, name, value))                                                                        \
  R(s, memory, set_scalar, ganfw_status, (void *self, const char *name, double value),             \
    (self, name, value))                                                                           \
  R(s, memory, get_extension, const void *, (const char *id), (id))                                \
  R(s, memory, configure_done, ganfw_status, (void *self), (self))

#define OBJECTIVE_CALLS(R, V, s)                                                                   \
  R(s, objective, create, ganfw_status,                                                            \
    (const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg, void **self),                   \
    (host, ctx, cfg, self))                                                                        \
  V(s, objective, destroy, (void *self), (self))                                                   \
  R(s, objective, loss, ganfw_status,                                                              \
    (void *self, int32_t term, int64_t n, const float *y, double *loss, float *dy),                \
    (self, term, n, y, loss, dy))                                                                  \
  R(s, objective, summary, double, (void *self, int64_t n, const float *y), (self, n, y))          \
  R(s, objective, after_d_step, ganfw_status, (void *self, const ganfw_param *params, int64_t n),  \
    (self, params, n))                                                                             \
  R(s, objective, get_extension, const void *, (const char *id), (id))

#define TRAINER_CALLS(R, V, s)                                                                     \
  R(s, trainer, create, ganfw_status,                                                              \
    (const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg, const ganfw_step_api *api,      \
     void **self),                                                                                 \
    (host, ctx, cfg, api, self))                                                                   \
  V(s, trainer, destroy, (void *self), (self))                                                     \
  R(s, trainer, role, int32_t, (void *self, int32_t i, const char **name, uint32_t *flags),        \
    (self, i, name, flags))                                                                        \
  R(s, trainer, scalar, int32_t, (void *self, int32_t i, const char **name), (self, i, name))      \
  R(s, trainer, step, ganfw_status, (void *self, ganfw_step *st), (self, st))                      \
  R(s, trainer, sample, ganfw_status,                                                              \
    (void *self, ganfw_step *st, ganfw_tensor **images, int64_t *nrow), (self, st, images, nrow))  \
  R(s, trainer, evaluate, ganfw_status, (void *self, ganfw_step *st), (self, st))                  \
  R(s, trainer, generator, const char *, (void *self, int64_t *latent_dim), (self, latent_dim))    \
  R(s, trainer, get_extension, const void *, (const char *id), (id))

#define LAYER_CALLS(R, V, s)                                                                       \
  R(s, layer, def, const ganfw_layer_def *, (void), ())                                            \
  R(s, layer, create, ganfw_status,                                                                \
    (const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg, void **state),                  \
    (host, ctx, cfg, state))                                                                       \
  R(s, layer, get_extension, const void *, (const char *id), (id))

#define ALL_CALLS(R, V, s)                                                                         \
  MODEL_CALLS(R, V, s)                                                                             \
  OPTIM_CALLS(R, V, s)                                                                             \
  MEMORY_CALLS(R, V, s) OBJECTIVE_CALLS(R, V, s) TRAINER_CALLS(R, V, s) LAYER_CALLS(R, V, s)

/* Bytes of `type` up to and including `member`: the lists above end at each vtable's end. */
#define END_OF(type, member) (offsetof(type, member) + sizeof(((type *)0)->member))
_Static_assert(sizeof(ganfw_model_vt) == END_OF(ganfw_model_vt, get_extension),
               "ganfw_model_vt grew: add the member to MODEL_CALLS");
_Static_assert(sizeof(ganfw_optim_vt) == END_OF(ganfw_optim_vt, step_end),
               "ganfw_optim_vt grew: add the member to OPTIM_CALLS");
_Static_assert(sizeof(ganfw_memory_vt) == END_OF(ganfw_memory_vt, configure_done),
               "ganfw_memory_vt grew: add the member to MEMORY_CALLS");
_Static_assert(sizeof(ganfw_objective_vt) == END_OF(ganfw_objective_vt, get_extension),
               "ganfw_objective_vt grew: add the member to OBJECTIVE_CALLS");
_Static_assert(sizeof(ganfw_trainer_vt) == END_OF(ganfw_trainer_vt, get_extension),
               "ganfw_trainer_vt grew: add the member to TRAINER_CALLS");
_Static_assert(sizeof(ganfw_layer_plugin_vt) == END_OF(ganfw_layer_plugin_vt, get_extension),
               "ganfw_layer_plugin_vt grew: add the member to LAYER_CALLS");

/* CALL_<kind>_<member>: an index per callback, and its name "<kind>.<member>". */
#define CALL_ID(s, kind, member, ...) CALL_##kind##_##member,
enum { ALL_CALLS(CALL_ID, CALL_ID, 0) CALL_COUNT };
#define CALL_NAME(s, kind, member, ...) #kind "." #member,
static const char *const call_names[] = {ALL_CALLS(CALL_NAME, CALL_NAME, 0)};
_Static_assert(sizeof(call_names) / sizeof(call_names[0]) == CALL_COUNT,
               "call_names must name every callback");

/* --- slots ------------------------------------------------------------------------------ */

/* Plugin files loaded at once that can be named; a training run loads fewer than ten. */
#define SLOT_COUNT 32
/* clang-format off */
#define SLOTS(F)                                                                                   \
  F(0)  F(1)  F(2)  F(3)  F(4)  F(5)  F(6)  F(7)  F(8)  F(9)  F(10) F(11) F(12) F(13) F(14) F(15) \
  F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23) F(24) F(25) F(26) F(27) F(28) F(29) F(30) F(31)
/* clang-format on */

typedef struct call_slot {
  void *handle; /* the plugin file's dlopen handle; NULL: free */
  int32_t refs; /* loads of that file */
  char *name, *path;
  union { /* the plugin's own members, by kind */
    ganfw_model_vt model;
    ganfw_optim_vt optim;
    ganfw_memory_vt memory;
    ganfw_objective_vt objective;
    ganfw_trainer_vt trainer;
    ganfw_layer_plugin_vt layer;
  } orig;
  ganfw_plugin_frame frame[CALL_COUNT]; /* {name, path, call_names[i]} */
} call_slot;

static call_slot slots[SLOT_COUNT];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static int32_t naming;

void ganfw_plugin_call_naming(int32_t on) {
  naming = on;
}

int32_t ganfw_plugin_call_naming_on(void) {
  return naming != 0;
}

/* w_<kind>_<member>_<slot>: the wrappers. */
#define WRAP_R(s, kind, member, ret, params, args)                                                 \
  static ret w_##kind##_##member##_##s params {                                                    \
    const ganfw_plugin_frame *prev = ganfw_plugin_enter(&slots[s].frame[CALL_##kind##_##member]);  \
    ret r = slots[s].orig.kind.member args;                                                        \
    ganfw_plugin_leave(prev);                                                                      \
    return r;                                                                                      \
  }
#define WRAP_V(s, kind, member, params, args)                                                      \
  static void w_##kind##_##member##_##s params {                                                   \
    const ganfw_plugin_frame *prev = ganfw_plugin_enter(&slots[s].frame[CALL_##kind##_##member]);  \
    slots[s].orig.kind.member args;                                                                \
    ganfw_plugin_leave(prev);                                                                      \
  }
#define DEFINE_SLOT(s) ALL_CALLS(WRAP_R, WRAP_V, s)
SLOTS(DEFINE_SLOT)

/* Each slot's wrappers as vtables, one per kind. */
typedef struct slot_wrappers {
  ganfw_model_vt model;
  ganfw_optim_vt optim;
  ganfw_memory_vt memory;
  ganfw_objective_vt objective;
  ganfw_trainer_vt trainer;
  ganfw_layer_plugin_vt layer;
} slot_wrappers;
#define WRAPPER(s, kind, member, ...) .member = w_##kind##_##member##_##s,
#define SLOT_WRAPPERS(s)                                                                           \
  [s] = {.model = {MODEL_CALLS(WRAPPER, WRAPPER, s)},                                              \
         .optim = {OPTIM_CALLS(WRAPPER, WRAPPER, s)},                                              \
         .memory = {MEMORY_CALLS(WRAPPER, WRAPPER, s)},                                            \
         .objective = {OBJECTIVE_CALLS(WRAPPER, WRAPPER, s)},                                      \
         .trainer = {TRAINER_CALLS(WRAPPER, WRAPPER, s)},                                          \
         .layer = {LAYER_CALLS(WRAPPER, WRAPPER, s)}},
static const slot_wrappers wrappers[SLOT_COUNT] = {SLOTS(SLOT_WRAPPERS)};

/* Keeps the plugin's members of `vt` in slot s and puts s's wrapper in place of each one
 * that is set (an absent member stays NULL). */
#define SWAP(s, kind, member, ...)                                                                 \
  if (v->member) v->member = w->kind.member;
static void swap_members(int32_t s, int32_t kind, void *vt) {
  const slot_wrappers *w = &wrappers[s];
  switch (kind) {
  case GANFW_PLUGIN_MODEL: {
    ganfw_model_vt *v = vt;
    slots[s].orig.model = *v;
    MODEL_CALLS(SWAP, SWAP, s)
    break;
  }
  case GANFW_PLUGIN_OPTIM: {
    ganfw_optim_vt *v = vt;
    slots[s].orig.optim = *v;
    OPTIM_CALLS(SWAP, SWAP, s)
    break;
  }
  case GANFW_PLUGIN_MEMORY: {
    ganfw_memory_vt *v = vt;
    slots[s].orig.memory = *v;
    MEMORY_CALLS(SWAP, SWAP, s)
    break;
  }
  case GANFW_PLUGIN_OBJECTIVE: {
    ganfw_objective_vt *v = vt;
    slots[s].orig.objective = *v;
    OBJECTIVE_CALLS(SWAP, SWAP, s)
    break;
  }
  case GANFW_PLUGIN_LAYER: {
    ganfw_layer_plugin_vt *v = vt;
    slots[s].orig.layer = *v;
    LAYER_CALLS(SWAP, SWAP, s)
    break;
  }
  default: {
    ganfw_trainer_vt *v = vt;
    slots[s].orig.trainer = *v;
    TRAINER_CALLS(SWAP, SWAP, s)
    break;
  }
  }
}

int32_t ganfw_plugin_call_wrap(void *handle, const char *name, const char *path, int32_t kind,
                               void *vt) {
  if (!naming || !handle || !vt || kind < 0 || kind >= GANFW_PLUGIN_KIND_COUNT) return -1;
  pthread_mutex_lock(&slots_lock);
  int32_t s = -1, free_slot = -1;
  for (int32_t i = 0; i < SLOT_COUNT && s < 0; i++) {
    if (slots[i].handle == handle) s = i;
    if (!slots[i].handle && free_slot < 0) free_slot = i;
  }
  if (s < 0 && free_slot >= 0) { /* the first load of this file */
    call_slot *c = &slots[free_slot];
    c->name = strdup(name);
    c->path = strdup(path);
    if (c->name && c->path) {
      c->handle = handle;
      for (int32_t i = 0; i < CALL_COUNT; i++)
        c->frame[i] = (ganfw_plugin_frame){c->name, c->path, call_names[i]};
      s = free_slot;
    } else {
      free(c->name);
      free(c->path);
      c->name = c->path = NULL;
    }
  }
  if (s >= 0) {
    slots[s].refs++;
    swap_members(s, kind, vt); /* the same file's members: a reload keeps them */
  }
  pthread_mutex_unlock(&slots_lock);
  if (s < 0)
    ganfw_log(GANFW_LOG_DEBUG,
              "plugin '%s' (%s): no call slot left (%d plugin files are loaded); a crash "
              "inside it will not be named",
              name, path, SLOT_COUNT);
  return s;
}

void ganfw_plugin_call_unwrap(int32_t slot) {
  if (slot < 0 || slot >= SLOT_COUNT) return;
  pthread_mutex_lock(&slots_lock);
  call_slot *c = &slots[slot];
  if (c->handle && --c->refs == 0) {
    free(c->name);
    free(c->path);
    memset(c, 0, sizeof *c);
  }
  pthread_mutex_unlock(&slots_lock);
}
