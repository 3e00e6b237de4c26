/* The plugin descriptor and entry symbol. A plugin is a shared object that exports exactly
 * one symbol, `ganfw_plugin_entry`, returning a pointer to a static descriptor:
 *
 *   static const ganfw_optim_vt vt = { .struct_size = sizeof(ganfw_optim_vt),
 *     .kind = GANFW_VT_TAG_OPTIM, .create = my_create, ... };
 *   GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
 *     static const ganfw_plugin_desc d = { GANFW_ABI_MAJOR, GANFW_ABI_MINOR,
 *       sizeof(ganfw_plugin_desc), GANFW_PLUGIN_OPTIM, "adam", "1.0.0", "Adam", &vt };
 *     return &d;
 *   }
 *
 * The descriptor and everything it points to are owned by the plugin and must stay valid
 * until the plugin is unloaded. Build with -fvisibility=hidden so nothing else is exported.
 * The loader refuses a different abi_major; a newer abi_minor than the core's is accepted
 * (the plugin checks host->struct_size before using an entry this core may lack).
 *
 * The loader copies the vtable into a zeroed copy of the core's own size
 * (min(vt.struct_size, sizeof)) and calls only through that copy: a member past the
 * plugin's struct_size reads as NULL (absent), so a plugin built against older headers keeps
 * working when a vtable grows. From ABI 1.1 every vtable carries its kind tag
 * (GANFW_VT_TAG_*), and a tag that does not match the descriptor's kind is refused. Optional
 * capabilities are asked for by a versioned id through get_extension (see below). */
#ifndef GANFW_PLUGIN_H
#define GANFW_PLUGIN_H

#include <stdint.h>

#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The one place the ABI version is written; CMake reads it from here (CMakeLists.txt). */
#define GANFW_ABI_MAJOR 1
#define GANFW_ABI_MINOR 10

#define GANFW_PLUGIN_ENTRY_SYMBOL "ganfw_plugin_entry"

#if defined(_WIN32)
#define GANFW_PLUGIN_EXPORT __declspec(dllexport)
#else
#define GANFW_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Plugin kinds, stored as int32_t. */
enum {
  GANFW_PLUGIN_MODEL = 0,
  GANFW_PLUGIN_OPTIM = 1,
  GANFW_PLUGIN_MEMORY = 2,
  GANFW_PLUGIN_OBJECTIVE = 3, /* ABI 1.4: ganfw_objective_vt (ganfw/objective.h) */
  GANFW_PLUGIN_TRAINER = 4,   /* ABI 1.6: ganfw_trainer_vt (ganfw/trainer.h); a trainer built
                                 against a newer minor than the core's is refused */
  GANFW_PLUGIN_LAYER = 5,     /* ABI 1.8: ganfw_layer_plugin_vt (ganfw/layer_plugin.h): a layer
                                 a config inserts into any model's net by name */
  GANFW_PLUGIN_KIND_COUNT
};

typedef struct ganfw_plugin_desc {
  uint32_t abi_major;   /* GANFW_ABI_MAJOR the plugin was built against */
  uint32_t abi_minor;   /* GANFW_ABI_MINOR the plugin was built against */
  uint32_t struct_size; /* sizeof(ganfw_plugin_desc) */
  int32_t kind;         /* GANFW_PLUGIN_* */
  const char *name;     /* the name a config uses: `plugin: adam` */
  const char *version;  /* the plugin's own version, e.g. "1.0.0" */
  const char *description;
  const void *vtable; /* ganfw_model_vt, ganfw_optim_vt, ganfw_memory_vt or (1.4)
                         ganfw_objective_vt or (1.6) ganfw_trainer_vt or (1.8)
                         ganfw_layer_plugin_vt, by kind */
} ganfw_plugin_desc;

typedef const ganfw_plugin_desc *(*ganfw_plugin_entry_fn)(void);

/* --- extensions (ABI 1.1) -------------------------------------------------------------
 * An optional capability is a struct (or table of functions) the plugin's or the host's
 * get_extension returns for an id "ganfw.<what>/<N>", NULL when it does not have it, as in
 * CLAP. The layout behind an id never changes: a different layout is a new id ("/2"), and a
 * plugin may answer both. Ids the core knows are defined here. */

/* "ganfw.config_keys/1": the keys a plugin reads from its config section, with their
 * types and defaults (const ganfw_config_keys *). Before create, the core reads every
 * declared key with its default through the host's getters: a wrong type is an error with
 * file:line:col, an absent key gets its default written into config.resolved.yaml (marked
 * "# default"), and a declared key counts as known, so it is never reported as an unknown
 * key and a typo of it gets a "did you mean". The loader refuses a malformed table. */
#define GANFW_EXT_CONFIG_KEYS "ganfw.config_keys/1"

/* The type of a declared key, stored as int32_t. */
enum {
  GANFW_KEY_INT = 0,        /* def_int */
  GANFW_KEY_FLOAT = 1,      /* def_float */
  GANFW_KEY_BOOL = 2,       /* def_int, 0 or 1 */
  GANFW_KEY_STRING = 3,     /* def_string (NULL: no default; an absent key stays absent) */
  GANFW_KEY_BYTES = 4,      /* def_int bytes; the value may carry units ("512MiB") */
  GANFW_KEY_FLOAT_LIST = 5, /* exactly `count` numbers, def_floats[0..count) */
  GANFW_KEY_TYPE_COUNT
};

/* One declared key. Frozen with the id "ganfw.config_keys/1". */
typedef struct ganfw_config_key {
  const char *key;          /* a key of the plugin's own section, without dots, e.g. "eps" */
  int32_t type;             /* GANFW_KEY_* */
  int32_t count;            /* GANFW_KEY_FLOAT_LIST: the number of items (1..16); else 0 */
  int64_t def_int;          /* INT, BOOL, BYTES */
  double def_float;         /* FLOAT */
  const char *def_string;   /* STRING */
  const double *def_floats; /* FLOAT_LIST: `count` numbers */
  const char *help;         /* one line for people; may be NULL */
} ganfw_config_key;

/* What get_extension(GANFW_EXT_CONFIG_KEYS) returns; owned by the plugin, static. */
typedef struct ganfw_config_keys {
  const ganfw_config_key *keys;
  int64_t n;
} ganfw_config_keys;

#ifdef __cplusplus
}
#endif
#endif
