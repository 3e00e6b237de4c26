/* The plugin host (see plugin_host.h): the search path, dlopen with RTLD_NOW|RTLD_LOCAL, the
 * descriptor checks a plugin must pass before the core calls into it, and the `ganfw plugins`
 * listing. Every failure leaves nothing loaded and records one message naming the file. */
#include "plugin/plugin_host.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/error.h"
#include "base/suggest.h"
#include "config/config.h"
#include "ganfw/memory.h"
#include "ganfw/objective.h"
#include "ganfw/trainer.h"
#include "ganfw/layer_plugin.h"
#include "ganfw/model.h"
#include "ganfw/optim.h"
#include "plugin/plugin_call.h"
#include "plugin/plugin_crash.h"

#ifndef GANFW_BUILD_PLUGIN_DIR
#define GANFW_BUILD_PLUGIN_DIR ""
#endif
/* The installed plugins' folder relative to the installed binary's folder, e.g.
 * "../lib/ganfw/plugins": resolved at run time, so an installed tree can be moved. */
#ifndef GANFW_INSTALL_PLUGIN_REL
#define GANFW_INSTALL_PLUGIN_REL ""
#endif

#define PLUGIN_PREFIX "ganfw_"
#define PLUGIN_SUFFIX ".so"

struct ganfw_plugin {
  void *handle;
  const ganfw_plugin_desc *desc;
  char *path;
  void *vt;         /* the plugin's vtable copied into a zeroed one of the core's size */
  uint32_t vt_size; /* the plugin's own vtable struct_size */
  int32_t slot;     /* its call-naming wrappers in vt (plugin_call.h), -1: none */
  /* FNV-1a of the file's bytes when it was loaded (0: unreadable), for the ranks' check */
  uint64_t file_hash;
  int32_t named;             /* the call naming was on when it was loaded (plugin_call.h) */
  int32_t refs;              /* its holders: each load that found it loaded, each retain */
  struct ganfw_plugin *next; /* the list of loaded plugins */
};

/* Every plugin loaded now, each file once per call-naming mode: a load of a file that is
 * loaded (the plan before a training run, then the run) shares it instead of mapping,
 * hashing and checking the file again, unless the naming was turned on or off in between
 * (it applies to the plugins loaded from then on). Loads happen on the main thread; the lock
 * only keeps the list whole. */
static ganfw_plugin *loaded;
static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;

/* --- kinds and their vtables --------------------------------------------------------- */

static const char *const kind_names[] = {"model",     "optimizer", "memory",
                                         "objective", "trainer",   "layer"};
_Static_assert(sizeof(kind_names) / sizeof(kind_names[0]) == GANFW_PLUGIN_KIND_COUNT,
               "kind_names must name every GANFW_PLUGIN_* kind");

const char *ganfw_plugin_kind_name(int32_t kind) {
  if (kind < 0 || kind >= GANFW_PLUGIN_KIND_COUNT) return "unknown";
  return kind_names[kind];
}

static const char *article(const char *word) {
  return strchr("aeiou", word[0]) ? "an" : "a";
}

/* Bytes of `type` up to and including `member`. */
#define END_OF(type, member) (offsetof(type, member) + sizeof(((type *)0)->member))

/* Per kind: the smallest vtable a plugin may hand us (up to its last required member), the
 * core's own size (the copy), where the kind tag and get_extension sit, the ABI minor the kind
 * exists from and the kind's GANFW_PLUGIN_<enum_name>. */
static const struct {
  size_t min_size, core_size, tag_offset, ext_offset;
  uint32_t tag, since_minor;
  const char *last_required, *type, *tag_name, *enum_name;
} vt_rules[] = {
    {END_OF(ganfw_model_vt, net), sizeof(ganfw_model_vt), offsetof(ganfw_model_vt, kind),
     offsetof(ganfw_model_vt, get_extension), GANFW_VT_TAG_MODEL, 0, "net", "ganfw_model_vt",
     "GANFW_VT_TAG_MODEL", "MODEL"},
    {END_OF(ganfw_optim_vt, step), sizeof(ganfw_optim_vt), offsetof(ganfw_optim_vt, kind),
     offsetof(ganfw_optim_vt, get_extension), GANFW_VT_TAG_OPTIM, 0, "step", "ganfw_optim_vt",
     "GANFW_VT_TAG_OPTIM", "OPTIM"},
    {END_OF(ganfw_memory_vt, configure), sizeof(ganfw_memory_vt), offsetof(ganfw_memory_vt, kind),
     offsetof(ganfw_memory_vt, get_extension), GANFW_VT_TAG_MEMORY, 0, "configure",
     "ganfw_memory_vt", "GANFW_VT_TAG_MEMORY", "MEMORY"},
    {END_OF(ganfw_objective_vt, loss), sizeof(ganfw_objective_vt),
     offsetof(ganfw_objective_vt, kind), offsetof(ganfw_objective_vt, get_extension),
     GANFW_VT_TAG_OBJECTIVE, 4, "loss", "ganfw_objective_vt", "GANFW_VT_TAG_OBJECTIVE",
     "OBJECTIVE"},
    {END_OF(ganfw_trainer_vt, step), sizeof(ganfw_trainer_vt), offsetof(ganfw_trainer_vt, kind),
     offsetof(ganfw_trainer_vt, get_extension), GANFW_VT_TAG_TRAINER, 6, "step", "ganfw_trainer_vt",
     "GANFW_VT_TAG_TRAINER", "TRAINER"},
    {END_OF(ganfw_layer_plugin_vt, create), sizeof(ganfw_layer_plugin_vt),
     offsetof(ganfw_layer_plugin_vt, kind), offsetof(ganfw_layer_plugin_vt, get_extension),
     GANFW_VT_TAG_LAYER, 8, "create", "ganfw_layer_plugin_vt", "GANFW_VT_TAG_LAYER", "LAYER"},
};
_Static_assert(sizeof(vt_rules) / sizeof(vt_rules[0]) == GANFW_PLUGIN_KIND_COUNT,
               "vt_rules must cover every GANFW_PLUGIN_* kind");

/* The kind whose tag is `tag`, or -1. */
static int32_t kind_of_tag(uint32_t tag) {
  for (int32_t k = 0; k < GANFW_PLUGIN_KIND_COUNT; k++)
    if (vt_rules[k].tag == tag) return k;
  return -1;
}

/* The name of the first required vtable member that is NULL, or NULL when all are set.
 * `vtable` is the core-sized copy. */
static const char *missing_member(int32_t kind, const void *vtable) {
  switch (kind) {
  case GANFW_PLUGIN_MODEL: {
    const ganfw_model_vt *vt = vtable;
    if (!vt->create) return "create";
    if (!vt->destroy) return "destroy";
    if (!vt->net) return "net";
    return NULL;
  }
  case GANFW_PLUGIN_OPTIM: {
    const ganfw_optim_vt *vt = vtable;
    if (!vt->create) return "create";
    if (!vt->destroy) return "destroy";
    if (!vt->step) return "step";
    return NULL;
  }
  case GANFW_PLUGIN_TRAINER: {
    const ganfw_trainer_vt *vt = vtable;
    if (!vt->create) return "create";
    if (!vt->destroy) return "destroy";
    if (!vt->role) return "role";
    if (!vt->scalar) return "scalar";
    if (!vt->step) return "step";
    return NULL;
  }
  case GANFW_PLUGIN_OBJECTIVE: {
    const ganfw_objective_vt *vt = vtable;
    if (!vt->create) return "create";
    if (!vt->destroy) return "destroy";
    if (!vt->loss) return "loss";
    return NULL;
  }
  case GANFW_PLUGIN_LAYER: {
    const ganfw_layer_plugin_vt *vt = vtable;
    if (!vt->def) return "def";
    if (!vt->create) return "create";
    return NULL;
  }
  default: {
    const ganfw_memory_vt *vt = vtable;
    if (!vt->create) return "create";
    if (!vt->destroy) return "destroy";
    if (!vt->configure) return "configure";
    return NULL;
  }
  }
}

/* --- messages ---------------------------------------------------------------------------- */

/* Records "WHAT: <message>" (just the message when what is NULL) as a plugin error. */
static ganfw_status fail(const char *what, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static ganfw_status fail(const char *what, const char *fmt, ...) {
  char msg[3072];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (what && what[0]) return ganfw_error_set(GANFW_ERR_PLUGIN, "%s: %s", what, msg);
  return ganfw_error_set(GANFW_ERR_PLUGIN, "%s", msg);
}

/* What to do about a dlopen failure, from the loader's text. */
static const char *dlopen_hint(const char *err) {
  if (strstr(err, "undefined symbol"))
    return "the plugin calls a function that nothing provides; a plugin reaches the core only "
           "through the host table (const ganfw_host *) and never links against it: define or "
           "link what is missing and rebuild it";
  if (strstr(err, "invalid ELF header") || strstr(err, "file too short"))
    return "the file is not a shared library; build the plugin as a shared object "
           "(ganfw_add_plugin in CMake, or cc -shared -fPIC) and install the .so";
  if (strstr(err, "ELF") || strstr(err, "machine"))
    return "the file was built for another architecture or ABI; rebuild it for this machine "
           "against this ganfw's headers";
  if (strstr(err, "Permission denied")) return "make the file readable by this user";
  /* The loader names the plugin itself only when the file was refused (the prefix is cut
   * off by the caller); a missing dependency comes as "libfoo.so.1: cannot open ...". */
  if (strncmp(err, "cannot open shared object file", 30) == 0)
    return "the dynamic loader refused the file although it exists: it was probably built for "
           "another architecture (check with `file`); rebuild it for this machine";
  if (strstr(err, "cannot open shared object file"))
    return "the plugin needs a shared library the loader cannot find: install it or add its "
           "directory to LD_LIBRARY_PATH";
  return "rebuild the plugin for this machine against this ganfw's headers";
}

static const char *elf_machine_name(unsigned machine) {
  switch (machine) {
  case EM_X86_64:
    return "x86-64";
  case EM_386:
    return "x86 (32-bit)";
  case EM_AARCH64:
    return "AArch64";
  case EM_ARM:
    return "ARM (32-bit)";
  case EM_RISCV:
    return "RISC-V";
  case EM_PPC64:
    return "PowerPC64";
  case EM_S390:
    return "s390x";
  default:
    return "another machine";
  }
}

/* Class (32/64-bit) and machine from the ELF header of `path`; 0 when it is not ELF. */
static int elf_header(const char *path, unsigned *elf_class, unsigned *machine) {
  unsigned char h[EI_NIDENT + 4];
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t n = fread(h, 1, sizeof h, f);
  fclose(f);
  if (n < sizeof h || memcmp(h, ELFMAG, SELFMAG) != 0) return 0;
  *elf_class = h[EI_CLASS];
  /* e_machine follows e_ident and the 2-byte e_type, in the file's byte order. */
  const unsigned char *m = h + EI_NIDENT + 2;
  *machine =
      h[EI_DATA] == ELFDATA2MSB ? (unsigned)(m[0] << 8 | m[1]) : (unsigned)(m[1] << 8 | m[0]);
  return 1;
}

/* When the plugin is an ELF file for another machine or word size than this process,
 * describes the difference into buf and returns 1. */
static int elf_mismatch(const char *path, char *buf, size_t cap) {
  unsigned pc, pm, sc, sm;
  if (!elf_header(path, &pc, &pm) || !elf_header("/proc/self/exe", &sc, &sm)) return 0;
  if (pc == sc && pm == sm) return 0;
  snprintf(buf, cap,
           "the file was built for %s, %d-bit (ELF machine %u), but this ganfw runs on %s, "
           "%d-bit (ELF machine %u): rebuild the plugin for this machine",
           elf_machine_name(pm), pc == ELFCLASS32 ? 32 : 64, pm, elf_machine_name(sm),
           sc == ELFCLASS32 ? 32 : 64, sm);
  return 1;
}

/* --- extensions ------------------------------------------------------------------------ */

/* get_extension of a core-sized vtable copy of `kind`; NULL when the plugin has none. */
static const void *vt_extension(int32_t kind, const void *copy, const char *id) {
  const void *(*get)(const char *);
  memcpy(&get, (const unsigned char *)copy + vt_rules[kind].ext_offset, sizeof get);
  return get && id ? get(id) : NULL;
}

static const char *const key_type_names[] = {"int",    "float", "bool",
                                             "string", "bytes", "float list"};
_Static_assert(sizeof(key_type_names) / sizeof(key_type_names[0]) == GANFW_KEY_TYPE_COUNT,
               "key_type_names must name every GANFW_KEY_* type");

#define MAX_DECLARED_KEYS 1024
#define MAX_FLOAT_LIST    16

/* Checks the table a plugin declares under GANFW_EXT_CONFIG_KEYS, if it has one. */
static ganfw_status check_config_keys(const ganfw_plugin_desc *d, const void *copy,
                                      const char *path, const char *what) {
  const ganfw_config_keys *t = vt_extension(d->kind, copy, GANFW_EXT_CONFIG_KEYS);
  if (!t) return GANFW_OK;
  const char *fix = "fix the table its get_extension(\"" GANFW_EXT_CONFIG_KEYS "\") returns "
                    "(see ganfw/plugin.h) and rebuild the plugin";
  if (t->n < 0 || t->n > MAX_DECLARED_KEYS || (t->n > 0 && !t->keys))
    return fail(what, "plugin '%s' at %s declares %lld config keys at %p; %s", d->name, path,
                (long long)t->n, (const void *)t->keys, fix);
  for (int64_t i = 0; i < t->n; i++) {
    const ganfw_config_key *k = &t->keys[i];
    if (!k->key || !k->key[0] || strchr(k->key, '.'))
      return fail(what,
                  "plugin '%s' at %s: declared config key %lld is %s%s%s; a key is a non-empty "
                  "name in the plugin's own section, without dots; %s",
                  d->name, path, (long long)i, k->key ? "'" : "NULL", k->key ? k->key : "",
                  k->key ? "'" : "", fix);
    if (k->type < 0 || k->type >= GANFW_KEY_TYPE_COUNT)
      return fail(what,
                  "plugin '%s' at %s: config key '%s' has type %d, not a GANFW_KEY_* type; %s",
                  d->name, path, k->key, (int)k->type, fix);
    if (k->type == GANFW_KEY_FLOAT_LIST &&
        (k->count < 1 || k->count > MAX_FLOAT_LIST || !k->def_floats))
      return fail(what,
                  "plugin '%s' at %s: config key '%s' is a float list of %d items with "
                  "defaults at %p; give 1 to %d items and their defaults; %s",
                  d->name, path, k->key, (int)k->count, (const void *)k->def_floats, MAX_FLOAT_LIST,
                  fix);
    if (k->type == GANFW_KEY_BOOL && k->def_int != 0 && k->def_int != 1)
      return fail(what, "plugin '%s' at %s: bool config key '%s' has default %lld, not 0 or 1; %s",
                  d->name, path, k->key, (long long)k->def_int, fix);
    for (int64_t j = 0; j < i; j++)
      if (strcmp(t->keys[j].key, k->key) == 0)
        return fail(what, "plugin '%s' at %s declares config key '%s' twice; %s", d->name, path,
                    k->key, fix);
  }
  return GANFW_OK;
}

/* --- checks on a loaded file ----------------------------------------------------------- */

/* A layer plugin's def(): a ganfw_layer_def of at least the 1.3 size, with its type name and
 * the callbacks net_custom requires (it checks them again at each insertion). */
static ganfw_status check_layer_def(const ganfw_plugin_desc *d, const void *copy, const char *path,
                                    const char *what) {
  const ganfw_layer_def *def = ((const ganfw_layer_plugin_vt *)copy)->def();
  const size_t min_def = END_OF(ganfw_layer_def, backward);
  const char *why = NULL;
  if (!def)
    why = "def() returned NULL";
  else if (def->struct_size < min_def)
    why = "def()'s struct_size is below the ABI 1.3 size of a ganfw_layer_def";
  else if (!def->type || !def->type[0])
    why = "def() has no type name";
  else if (!def->infer || !def->forward || !def->backward)
    why = "def() lacks infer, forward or backward (all three are required)";
  if (!why) return GANFW_OK;
  return fail(what,
              "layer plugin '%s' at %s: %s; return a static ganfw_layer_def with "
              "struct_size = sizeof(ganfw_layer_def) (docs/ABI.md, \"Writing a layer\") and "
              "rebuild the plugin against this ganfw's headers",
              d->name, path, why);
}

static const char *const rebuild = "rebuild the plugin against this ganfw's headers";

/* The descriptor's own fields: present, of this ABI major, large enough, of a known kind
 * and of a minor that has that kind. */
static ganfw_status check_abi(const ganfw_plugin_desc *d, const char *path, const char *what) {
  if (!d)
    return fail(what,
                "plugin %s: " GANFW_PLUGIN_ENTRY_SYMBOL "() returned NULL instead of its "
                "descriptor; it must return a pointer to a static ganfw_plugin_desc",
                path);
  if (d->abi_major != GANFW_ABI_MAJOR)
    return fail(what, "plugin %s was built for ABI %u.%u, this ganfw speaks ABI %d.%d: %s", path,
                (unsigned)d->abi_major, (unsigned)d->abi_minor, GANFW_ABI_MAJOR, GANFW_ABI_MINOR,
                rebuild);
  /* A newer abi_minor is accepted silently: the plugin checks host->struct_size itself. */
  size_t min_desc = END_OF(ganfw_plugin_desc, vtable);
  if (d->struct_size < min_desc)
    return fail(what,
                "plugin %s: descriptor struct_size is %u bytes, smaller than the %zu bytes of an "
                "ABI %d.0 ganfw_plugin_desc; set it to sizeof(ganfw_plugin_desc) and %s",
                path, (unsigned)d->struct_size, min_desc, GANFW_ABI_MAJOR, rebuild);
  if (d->kind < 0 || d->kind >= GANFW_PLUGIN_KIND_COUNT)
    return fail(
        what,
        "plugin %s declares kind %d, which this ganfw does not know (0 model, 1 optimizer, "
        "2 memory, 3 objective, 4 trainer, 5 layer); set kind to a GANFW_PLUGIN_* value and %s",
        path, (int)d->kind, rebuild);
  uint32_t since = vt_rules[d->kind].since_minor;
  if (d->abi_minor < since)
    return fail(what,
                "plugin %s declares kind %d (%s) but was built for ABI %u.%u; %s plugins exist "
                "from ABI %d.%u: %s",
                path, (int)d->kind, kind_names[d->kind], (unsigned)d->abi_major,
                (unsigned)d->abi_minor, kind_names[d->kind], GANFW_ABI_MAJOR, (unsigned)since,
                rebuild);
  /* A trainer drives the step through the step calls of its own minor: a newer one may
   * call what this core does not have, so it is refused rather than run half-way. */
  if (d->kind == GANFW_PLUGIN_TRAINER && d->abi_minor > GANFW_ABI_MINOR)
    return fail(what,
                "trainer plugin %s was built for ABI %u.%u, newer than this ganfw's %d.%d: a "
                "trainer runs the step through calls this ganfw may not have; install a ganfw "
                "of ABI %u.%u or later, or rebuild the plugin against this ganfw's headers",
                path, (unsigned)d->abi_major, (unsigned)d->abi_minor, GANFW_ABI_MAJOR,
                GANFW_ABI_MINOR, (unsigned)d->abi_major, (unsigned)d->abi_minor);
  return GANFW_OK;
}

/* The kind the caller asked for (expected_kind, -1: any) and the name it was found by
 * (want_name, NULL when loaded by path). */
static ganfw_status check_identity(const ganfw_plugin_desc *d, const char *path,
                                   const char *want_name, int32_t expected_kind, const char *what) {
  const char *kind = kind_names[d->kind];
  const char *shown = d->name && d->name[0] ? d->name : (want_name ? want_name : "?");
  if (expected_kind >= 0 && d->kind != expected_kind) {
    const char *want = ganfw_plugin_kind_name(expected_kind);
    /* The key alone ("model.plugin") when what is "config.yaml:12:11: model.plugin". */
    const char *key = what && what[0] ? what : "the caller";
    for (const char *c = key; (c = strstr(c, ": ")); c += 2) key = c + 2;
    return fail(what,
                "'%s' at %s is %s %s plugin, but %s needs %s %s plugin; name %s %s plugin "
                "there",
                shown, path, article(kind), kind, key, article(want), want, article(want), want);
  }
  if (!d->name || !d->name[0])
    return fail(what,
                "plugin %s has no name (descriptor name is %s); set it to the name a "
                "config uses, e.g. \"plugin: %s\"",
                path, d->name ? "empty" : "NULL", want_name ? want_name : "myplugin");
  if (want_name && strcmp(d->name, want_name) != 0)
    return fail(what,
                "plugin %s calls itself '%s', but it was found as '%s' (file " PLUGIN_PREFIX
                "%s" PLUGIN_SUFFIX "); rename the file to " PLUGIN_PREFIX "%s" PLUGIN_SUFFIX
                " and ask for '%s', or fix the name in its descriptor",
                path, d->name, want_name, want_name, d->name, d->name);
  return GANFW_OK;
}

/* The vtable as the plugin hands it: present, at least its kind's required size, and
 * tagged (where its size reaches the tag) as its descriptor's kind or untagged. */
static ganfw_status check_vtable_head(const ganfw_plugin_desc *d, const char *path,
                                      const char *what) {
  const char *kind = kind_names[d->kind];
  if (!d->vtable)
    return fail(what, "%s plugin '%s' at %s has a NULL vtable; point it at its %s and %s", kind,
                d->name, path, vt_rules[d->kind].type, rebuild);
  uint32_t vt_size = *(const uint32_t *)d->vtable; /* first member of every vtable */
  if (vt_size < vt_rules[d->kind].min_size)
    return fail(what,
                "%s plugin '%s' at %s: vtable struct_size is %u bytes, smaller than the %zu "
                "bytes of %s up to its last required member '%s'; set struct_size to "
                "sizeof(%s) and %s",
                kind, d->name, path, (unsigned)vt_size, vt_rules[d->kind].min_size,
                vt_rules[d->kind].type, vt_rules[d->kind].last_required, vt_rules[d->kind].type,
                rebuild);
  /* The kind tag, read only where the plugin's vtable has it. A model's second field is its
   * family; an optimizer's or memory strategy's vtable there carries its own tag. */
  uint32_t tag = 0, second = 0;
  const unsigned char *raw = d->vtable;
  if (vt_size >= vt_rules[d->kind].tag_offset + sizeof tag)
    memcpy(&tag, raw + vt_rules[d->kind].tag_offset, sizeof tag);
  memcpy(&second, raw + sizeof(uint32_t), sizeof second);
  int32_t tagged_as = kind_of_tag(tag);
  if (d->kind == GANFW_PLUGIN_MODEL && kind_of_tag(second) >= 0) tagged_as = kind_of_tag(second);
  if (tagged_as >= 0 && tagged_as != d->kind)
    return fail(what,
                "%s plugin '%s' at %s: the descriptor says %s, but its vtable is tagged %s, "
                "%s %s's %s; point the descriptor's vtable at the plugin's %s, or set its kind "
                "to the vtable's (GANFW_PLUGIN_%s), and %s",
                kind, d->name, path, kind, vt_rules[tagged_as].tag_name,
                article(kind_names[tagged_as]), kind_names[tagged_as], vt_rules[tagged_as].type,
                vt_rules[d->kind].type, vt_rules[tagged_as].enum_name, rebuild);
  if (tagged_as < 0 && tag != 0)
    return fail(what,
                "%s plugin '%s' at %s: vtable kind tag is 0x%08x, not %s (0x%08x); set the "
                "vtable's kind to %s and %s",
                kind, d->name, path, (unsigned)tag, vt_rules[d->kind].tag_name,
                (unsigned)vt_rules[d->kind].tag, vt_rules[d->kind].tag_name, rebuild);
  /* A tag left 0 is "untagged": the descriptor's kind stands, whatever minor the plugin was
   * built for. A field a newer minor adds means its default when left 0, so that a 1.0
   * plugin's source, which never set the tag, rebuilds and runs unchanged against today's
   * headers (tests/abi10, built both ways). A tag that is set is checked above. */
  return GANFW_OK;
}

/* The members of the core-sized copy `copy`: every required one set, a model's family known,
 * a declared config-key table well formed. */
static ganfw_status check_vtable_copy(const ganfw_plugin_desc *d, const void *copy,
                                      const char *path, const char *what) {
  const char *missing = missing_member(d->kind, copy);
  if (missing)
    return fail(what,
                "%s plugin '%s' at %s: required vtable member '%s' is NULL; implement it (only "
                "members marked (optional) in ganfw/%s.h may be NULL)",
                kind_names[d->kind], d->name, path, missing,
                d->kind == GANFW_PLUGIN_OPTIM   ? "optim"
                : d->kind == GANFW_PLUGIN_LAYER ? "layer_plugin"
                                                : kind_names[d->kind]);
  if (d->kind == GANFW_PLUGIN_MODEL) {
    int32_t family = ((const ganfw_model_vt *)copy)->family;
    if (family < 0 || family >= GANFW_MODEL_FAMILY_COUNT)
      return fail(what,
                  "model plugin '%s' at %s declares family %d, which this ganfw does not know; "
                  "set it to GANFW_MODEL_GAN, GANFW_MODEL_CLASSIFIER or GANFW_MODEL_NETS and %s",
                  d->name, path, (int)family, rebuild);
  }
  ganfw_status st = check_config_keys(d, copy, path, what);
  if (st == GANFW_OK && d->kind == GANFW_PLUGIN_LAYER) st = check_layer_def(d, copy, path, what);
  return st;
}

/* Checks the descriptor `d` of the plugin at `path` and its vtable. `want_name` is the name
 * it was asked for (NULL when loaded by path). On success *vt_copy is the vtable copied into
 * a zeroed block of the core's size (malloc'd, the caller's). */
static ganfw_status check_desc(const ganfw_plugin_desc *d, const char *path, const char *want_name,
                               int32_t expected_kind, const char *what, void **vt_copy) {
  ganfw_status st = check_abi(d, path, what);
  if (st == GANFW_OK) st = check_identity(d, path, want_name, expected_kind, what);
  if (st == GANFW_OK) st = check_vtable_head(d, path, what);
  if (st != GANFW_OK) return st;
  /* From here on only the zeroed, core-sized copy is read: a member past the plugin's
   * struct_size is NULL, whatever follows its vtable in its memory. */
  uint32_t vt_size = *(const uint32_t *)d->vtable;
  size_t core_size = vt_rules[d->kind].core_size;
  void *copy = calloc(1, core_size);
  if (!copy) return fail(what, "plugin %s: out of host memory while loading it", path);
  memcpy(copy, d->vtable, vt_size < core_size ? vt_size : core_size);
  st = check_vtable_copy(d, copy, path, what);
  if (st != GANFW_OK) {
    free(copy);
    return st;
  }
  *vt_copy = copy;
  return GANFW_OK;
}

/* FNV-1a (64 bits) of the bytes of the file at `path`; 0 when it cannot be read. */
static uint64_t file_fnv1a(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint64_t h = 1469598103934665603ull;
  unsigned char buf[1 << 16];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    for (ssize_t i = 0; i < n; i++) h = (h ^ buf[i]) * 1099511628211ull;
  close(fd);
  return n == 0 ? h : 0;
}

/* Loads the file at `path` (which exists) and checks it; takes ownership of `path`. */
static ganfw_status open_and_check(char *path, const char *want_name, int32_t expected_kind,
                                   const char *what, ganfw_plugin **out) {
  dlerror(); /* clear */
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *err = dlerror();
    if (!err) err = "unknown dlopen error";
    size_t n = strlen(path); /* glibc starts with "PATH: "; the message names it already */
    if (strncmp(err, path, n) == 0 && err[n] == ':' && err[n + 1] == ' ') err += n + 2;
    char arch[256];
    const char *hint = elf_mismatch(path, arch, sizeof arch) ? arch : dlopen_hint(err);
    ganfw_status st = fail(what, "cannot load plugin %s: %s; %s", path, err, hint);
    free(path);
    return st;
  }
  dlerror();
  void *sym = dlsym(handle, GANFW_PLUGIN_ENTRY_SYMBOL);
  ganfw_status st = GANFW_OK;
  if (!sym) {
    st = fail(what,
              "plugin %s does not export " GANFW_PLUGIN_ENTRY_SYMBOL " and so is not a ganfw "
              "plugin; define `GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *"
              "" GANFW_PLUGIN_ENTRY_SYMBOL "(void)` (see ganfw/plugin.h) and rebuild it",
              path);
  } else {
    ganfw_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer, as POSIX allows */
    const ganfw_plugin_desc *desc = entry();
    void *vt = NULL;
    st = check_desc(desc, path, want_name, expected_kind, what, &vt);
    if (st == GANFW_OK) {
      ganfw_plugin *p = malloc(sizeof *p);
      if (!p) {
        free(vt);
        st = fail(what, "plugin %s: out of host memory while loading it", path);
      } else {
        p->handle = handle;
        p->desc = desc;
        p->path = path;
        p->vt = vt;
        p->vt_size = *(const uint32_t *)desc->vtable;
        p->slot = ganfw_plugin_call_wrap(handle, desc->name, path, desc->kind, vt);
        p->file_hash = file_fnv1a(path); /* the bytes dlopen just mapped */
        p->named = ganfw_plugin_call_naming_on();
        p->refs = 1;
        pthread_mutex_lock(&loaded_lock);
        p->next = loaded;
        loaded = p;
        pthread_mutex_unlock(&loaded_lock);
        *out = p;
        return GANFW_OK;
      }
    }
  }
  dlclose(handle);
  free(path);
  return st;
}

static int ends_with(const char *s, const char *suffix);

/* open_and_check as the plugin call "loading": a crash in the file's constructors, its entry
 * point or its get_extension names the file (its name is want_name, or the file name's
 * ganfw_<name>.so part before the descriptor is read). */
static ganfw_status load_file(char *path, const char *want_name, int32_t expected_kind,
                              const char *what, ganfw_plugin **out) {
  pthread_mutex_lock(&loaded_lock);
  const int32_t named = ganfw_plugin_call_naming_on();
  ganfw_plugin *p = loaded;
  while (p && (p->named != named || strcmp(p->path, path) != 0)) p = p->next;
  if (p) p->refs++;
  pthread_mutex_unlock(&loaded_lock);
  if (p) { /* checked when it was loaded; what this caller asks of it is checked here */
    ganfw_status st = check_identity(p->desc, path, want_name, expected_kind, what);
    free(path);
    if (st != GANFW_OK) {
      ganfw_plugin_unload(p);
      return st;
    }
    *out = p;
    return GANFW_OK;
  }
  char file_name[NAME_MAX + 1];
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  size_t np = strlen(PLUGIN_PREFIX), ns = strlen(PLUGIN_SUFFIX), nb = strlen(base);
  if (!want_name && strncmp(base, PLUGIN_PREFIX, np) == 0 && ends_with(base, PLUGIN_SUFFIX) &&
      nb > np + ns && nb - np - ns < sizeof file_name) {
    memcpy(file_name, base + np, nb - np - ns);
    file_name[nb - np - ns] = '\0';
    base = file_name;
  }
  ganfw_plugin_frame loading = {want_name ? want_name : base, path, "loading"};
  const ganfw_plugin_frame *prev = ganfw_plugin_enter(&loading);
  ganfw_status st = open_and_check(path, want_name, expected_kind, what, out);
  ganfw_plugin_leave(prev);
  return st;
}

/* --- the search path ------------------------------------------------------------------ */

typedef struct search_dir {
  const char *dir;
  const char *origin; /* for messages: where this directory came from */
} search_dir;

typedef struct search_path {
  search_dir *items;
  int64_t n;
  char *env;     /* a copy of $GANFW_PLUGIN_PATH, split in place */
  char *install; /* the install prefix's plugin folder, beside this executable */
} search_path;

static void search_path_free(search_path *sp) {
  free(sp->items);
  free(sp->env);
  free(sp->install);
}

/* <folder of this executable>/GANFW_INSTALL_PLUGIN_REL, malloc'd; NULL when unknown. */
static char *install_plugin_dir(void) {
  if (!GANFW_INSTALL_PLUGIN_REL[0]) return NULL;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return NULL;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) return NULL;
  *slash = '\0';
  size_t len = strlen(exe) + strlen(GANFW_INSTALL_PLUGIN_REL) + 2;
  char *dir = malloc(len);
  if (dir) snprintf(dir, len, "%s/%s", exe, GANFW_INSTALL_PLUGIN_REL);
  return dir;
}

/* 1 when this executable lies inside the build tree that GANFW_BUILD_PLUGIN_DIR (its
 * plugins/ folder) belongs to. */
static int exe_in_build_tree(void) {
  if (!GANFW_BUILD_PLUGIN_DIR[0]) return 0;
  char *exe = realpath("/proc/self/exe", NULL);
  char *root = strdup(GANFW_BUILD_PLUGIN_DIR);
  char *slash = root ? strrchr(root, '/') : NULL;
  char *real_root = NULL;
  if (slash && slash != root) {
    *slash = '\0';
    real_root = realpath(root, NULL);
  }
  size_t n = real_root ? strlen(real_root) : 0;
  int inside = exe && real_root && strncmp(exe, real_root, n) == 0 && exe[n] == '/';
  free(real_root);
  free(root);
  free(exe);
  return inside;
}

static ganfw_status search_path_init(search_path *sp, const char *const *dirs, int64_t ndirs) {
  memset(sp, 0, sizeof *sp);
  if (ndirs < 0 || (ndirs > 0 && !dirs))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "plugin search: %lld directories at %p",
                           (long long)ndirs, (const void *)dirs);
  const char *env = getenv(GANFW_PLUGIN_PATH_ENV);
  int64_t nenv = 0;
  if (env && env[0]) {
    sp->env = strdup(env);
    if (!sp->env) return ganfw_error_set(GANFW_ERR_OOM, "plugin search: out of host memory");
    nenv = 1;
    for (const char *c = env; *c; c++) nenv += *c == ':';
  }
  sp->items = malloc((size_t)(ndirs + nenv + 2) * sizeof *sp->items);
  if (!sp->items) {
    search_path_free(sp);
    return ganfw_error_set(GANFW_ERR_OOM, "plugin search: out of host memory");
  }
  for (int64_t i = 0; i < ndirs; i++)
    if (dirs[i] && dirs[i][0]) sp->items[sp->n++] = (search_dir){dirs[i], "plugin_path"};
  if (sp->env) {
    char *start = sp->env;
    for (char *c = sp->env;; c++) {
      int end = *c == '\0';
      if (*c == ':' || end) {
        *c = '\0';
        if (start[0]) sp->items[sp->n++] = (search_dir){start, GANFW_PLUGIN_PATH_ENV};
        start = c + 1;
      }
      if (end) break;
    }
  }
  /* A binary run from the build tree finds the plugins built beside it first; an installed
   * one (or a copy anywhere else) finds the plugins installed with it first. */
  sp->install = install_plugin_dir();
  int installed_first = !exe_in_build_tree();
  if (sp->install && installed_first)
    sp->items[sp->n++] = (search_dir){sp->install, "install prefix"};
  if (GANFW_BUILD_PLUGIN_DIR[0])
    sp->items[sp->n++] = (search_dir){GANFW_BUILD_PLUGIN_DIR, "build tree"};
  if (sp->install && !installed_first)
    sp->items[sp->n++] = (search_dir){sp->install, "install prefix"};
  return GANFW_OK;
}

/* dir + "/" + file, malloc'd; NULL when out of memory. */
static char *path_join(const char *dir, const char *file) {
  size_t nd = strlen(dir), nf = strlen(file);
  int slash = nd > 0 && dir[nd - 1] != '/';
  char *p = malloc(nd + (size_t)slash + nf + 1);
  if (!p) return NULL;
  memcpy(p, dir, nd);
  if (slash) p[nd] = '/';
  memcpy(p + nd + slash, file, nf + 1);
  return p;
}

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int ends_with(const char *s, const char *suffix) {
  size_t ns = strlen(s), nx = strlen(suffix);
  return ns >= nx && strcmp(s + ns - nx, suffix) == 0;
}

/* Appends the searched directories, "A (origin), B (origin)", to buf. */
static void describe_dirs(const search_path *sp, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = '\0';
  for (int64_t i = 0; i < sp->n && len < cap; i++) {
    int w = snprintf(buf + len, cap - len, "%s%s (%s%s)", i ? ", " : "", sp->items[i].dir,
                     sp->items[i].origin, is_dir(sp->items[i].dir) ? "" : ", missing");
    if (w < 0) break;
    len += (size_t)w;
  }
  if (sp->n == 0) snprintf(buf, cap, "no directories");
}

static char **list_dir(const char *dir, int64_t *n);

/* The plugin name on the search path nearest to `name` (a typo's "did you mean"), copied
 * into buf; 0 when none is near enough (the rule of the config's key suggestions: at most
 * max(2, len/3) edits, and fewer than the name's length). */
static int nearest_name(const search_path *sp, const char *name, char *buf, size_t cap) {
  size_t len = strlen(name), best_d = (size_t)-1;
  size_t np = strlen(PLUGIN_PREFIX), ns = strlen(PLUGIN_SUFFIX);
  buf[0] = '\0';
  for (int64_t i = 0; i < sp->n; i++) {
    int64_t nfiles;
    char **files = list_dir(sp->items[i].dir, &nfiles);
    for (int64_t f = 0; f < nfiles; f++) {
      char *cand = files[f] + np;
      cand[strlen(cand) - ns] = '\0';
      size_t d = ganfw_edit_distance(name, cand);
      if (d < best_d && ganfw_suggest_near(len, d) && strlen(cand) < cap) {
        best_d = d;
        snprintf(buf, cap, "%s", cand);
      }
      free(files[f]);
    }
    free(files);
  }
  return buf[0] != '\0';
}

ganfw_status ganfw_plugin_load(const char *name, int32_t expected_kind, const char *what,
                               const char *const *dirs, int64_t ndirs, ganfw_plugin **out) {
  if (!out) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_plugin_load: out is NULL");
  *out = NULL;
  if (!name || !name[0])
    return fail(what, "no plugin named: give a plugin name (e.g. `plugin: adam`) or the path "
                      "of a " PLUGIN_PREFIX "<name>" PLUGIN_SUFFIX " file");
  if (expected_kind < -1 || expected_kind >= GANFW_PLUGIN_KIND_COUNT)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_plugin_load: expected kind %d",
                           (int)expected_kind);

  if (strchr(name, '/') || ends_with(name, PLUGIN_SUFFIX)) {
    /* dlopen would search the library path for a name without '/'; a path is a file. */
    char *path = strchr(name, '/') ? strdup(name) : path_join(".", name);
    if (!path) return fail(what, "plugin %s: out of host memory", name);
    if (!is_file(path)) {
      ganfw_status st =
          fail(what,
               "plugin file %s not found (a relative path is relative to the "
               "current directory); check the path, or give the plugin by name "
               "and add its directory to plugin_path in the config or to " GANFW_PLUGIN_PATH_ENV,
               path);
      free(path);
      return st;
    }
    return load_file(path, NULL, expected_kind, what, out);
  }

  search_path sp;
  ganfw_status st = search_path_init(&sp, dirs, ndirs);
  if (st != GANFW_OK) return st;
  size_t nfile = strlen(PLUGIN_PREFIX) + strlen(name) + strlen(PLUGIN_SUFFIX) + 1;
  char *file = malloc(nfile);
  if (!file) {
    search_path_free(&sp);
    return ganfw_error_set(GANFW_ERR_OOM, "plugin search: out of host memory");
  }
  snprintf(file, nfile, PLUGIN_PREFIX "%s" PLUGIN_SUFFIX, name);
  for (int64_t i = 0; i < sp.n; i++) {
    char *path = path_join(sp.items[i].dir, file);
    if (!path) {
      st = ganfw_error_set(GANFW_ERR_OOM, "plugin search: out of host memory");
      break;
    }
    if (is_file(path)) {
      st = load_file(path, name, expected_kind, what, out);
      free(file);
      search_path_free(&sp);
      return st;
    }
    free(path);
  }
  if (st == GANFW_OK) {
    char searched[2048];
    describe_dirs(&sp, searched, sizeof searched);
    const char *kind = expected_kind >= 0 ? kind_names[expected_kind] : NULL;
    char near[NAME_MAX + 1], hint[NAME_MAX + 32] = "";
    if (nearest_name(&sp, name, near, sizeof near))
      snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    st = fail(what,
              "%s%splugin '%s' not found%s: no file %s in %s. Add the directory that holds "
              "%s to plugin_path in the config or to " GANFW_PLUGIN_PATH_ENV " (':'-separated), "
              "or give the path of the .so file; `ganfw plugins` lists what is found",
              kind ? kind : "", kind ? " " : "", name, hint, file, searched, file);
  }
  free(file);
  search_path_free(&sp);
  return st;
}

ganfw_plugin *ganfw_plugin_retain(ganfw_plugin *p) {
  pthread_mutex_lock(&loaded_lock);
  p->refs++;
  pthread_mutex_unlock(&loaded_lock);
  return p;
}

void ganfw_plugin_unload(ganfw_plugin *p) {
  if (!p) return;
  pthread_mutex_lock(&loaded_lock);
  const int last = --p->refs == 0;
  if (last) {
    ganfw_plugin **at = &loaded;
    while (*at && *at != p) at = &(*at)->next;
    if (*at) *at = p->next;
  }
  pthread_mutex_unlock(&loaded_lock);
  if (!last) return;
  ganfw_plugin_call_unwrap(p->slot);
  dlclose(p->handle);
  free(p->vt);
  free(p->path);
  free(p);
}

const ganfw_plugin_desc *ganfw_plugin_desc_of(const ganfw_plugin *p) {
  return p->desc;
}

const char *ganfw_plugin_path(const ganfw_plugin *p) {
  return p->path;
}

uint64_t ganfw_plugin_file_hash(const ganfw_plugin *p) {
  return p->file_hash;
}

const void *ganfw_plugin_vtable(const ganfw_plugin *p) {
  return p->vt;
}

uint32_t ganfw_plugin_vtable_size(const ganfw_plugin *p) {
  return p->vt_size;
}

const void *ganfw_plugin_get_extension(const ganfw_plugin *p, const char *id) {
  return p ? vt_extension(p->desc->kind, p->vt, id) : NULL;
}

const char *ganfw_plugin_name(const ganfw_plugin *p) {
  return p->desc->name;
}

int32_t ganfw_plugin_kind(const ganfw_plugin *p) {
  return p->desc->kind;
}

ganfw_status ganfw_plugin_apply_config_keys(const ganfw_plugin *p, const ganfw_cfg *section) {
  const ganfw_config_keys *t = ganfw_plugin_get_extension(p, GANFW_EXT_CONFIG_KEYS);
  if (!t) return GANFW_OK;
  for (int64_t i = 0; i < t->n; i++) { /* the table passed check_config_keys at load */
    const ganfw_config_key *k = &t->keys[i];
    ganfw_status st = GANFW_OK;
    int64_t iv;
    int32_t bv;
    double fv, list[MAX_FLOAT_LIST];
    const char *sv;
    switch (k->type) {
    case GANFW_KEY_INT:
      st = ganfw_cfg_int(section, k->key, k->def_int, &iv);
      break;
    case GANFW_KEY_FLOAT:
      st = ganfw_cfg_float(section, k->key, k->def_float, &fv);
      break;
    case GANFW_KEY_BOOL:
      st = ganfw_cfg_bool(section, k->key, (int32_t)k->def_int, &bv);
      break;
    case GANFW_KEY_STRING:
      /* Without a default an absent key stays absent (a getter would record a null that
       * the plugin's own read with its default would then see). */
      if (k->def_string || ganfw_cfg_has(section, k->key))
        st = ganfw_cfg_string(section, k->key, k->def_string, &sv);
      break;
    case GANFW_KEY_BYTES:
      st = ganfw_cfg_bytes(section, k->key, k->def_int, &iv);
      break;
    default:
      st = ganfw_cfg_float_list(section, k->key, k->count, k->def_floats, list);
      break;
    }
    if (st != GANFW_OK)
      return ganfw_error_wrap(st, "%s plugin '%s' (its %s key '%s')",
                              ganfw_plugin_kind_name(p->desc->kind), p->desc->name,
                              key_type_names[k->type], k->key);
  }
  return GANFW_OK;
}

/* --- `ganfw plugins` ------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The plugin file names ganfw_*.so in `dir`, sorted; *n of them, malloc'd (free each and
 * the array). NULL with *n = 0 when the directory cannot be read or holds none. */
static char **list_dir(const char *dir, int64_t *n) {
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  char **names = NULL;
  int64_t cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *s = e->d_name;
    if (strncmp(s, PLUGIN_PREFIX, strlen(PLUGIN_PREFIX)) != 0 || !ends_with(s, PLUGIN_SUFFIX) ||
        strlen(s) <= strlen(PLUGIN_PREFIX) + strlen(PLUGIN_SUFFIX))
      continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      char **grown = realloc(names, (size_t)cap * sizeof *names);
      if (!grown) break;
      names = grown;
    }
    char *copy = strdup(s);
    if (!copy) break;
    names[(*n)++] = copy;
  }
  closedir(d);
  if (names) qsort(names, (size_t)*n, sizeof *names, cmp_str);
  return names;
}

/* --- a file probed in a child process ------------------------------------------------- */

/* What the child that loaded a file sends back over the pipe. */
typedef struct probe_answer {
  int32_t loaded; /* 1: the descriptor's fields below; 0: error holds the loader's message */
  int32_t kind;
  uint32_t abi_major, abi_minor;
  char name[NAME_MAX + 1];
  char version[128];
  char error[4096];
} probe_answer;

/* How a probe ended. */
enum {
  PROBE_ANSWERED, /* the child answered (loaded or refused) */
  PROBE_SIGNALED, /* the child died of a signal before it answered (detail: the signal) */
  PROBE_EXITED,   /* the child exited before it answered (detail: its exit status) */
  PROBE_HUNG,     /* no answer within the timeout; the child was killed */
  PROBE_NOT_RUN   /* no child could be started (detail: errno) */
};

typedef struct probe_result {
  int32_t how, detail;
  probe_answer a;
} probe_result;

static double monotonic_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The child: loads and checks the file as training would, answers on fd, and ends with
 * _exit (no atexit handler, no stdio buffer of the parent's written twice). Fatal signals
 * take their default action here, so that the parent sees the one that killed it. */
static void probe_child(int fd, const char *path, const char *name) {
  const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (size_t k = 0; k < sizeof fatal / sizeof fatal[0]; k++) signal(fatal[k], SIG_DFL);
  int devnull = open("/dev/null", O_WRONLY); /* what a constructor prints stays out of the list */
  if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
  probe_answer *a = calloc(1, sizeof *a);
  char *copy = strdup(path);
  if (!a || !copy) _exit(3);
  ganfw_plugin *p = NULL;
  if (load_file(copy, name, -1, NULL, &p) == GANFW_OK) {
    const ganfw_plugin_desc *d = p->desc;
    a->loaded = 1;
    a->kind = d->kind;
    a->abi_major = d->abi_major;
    a->abi_minor = d->abi_minor;
    snprintf(a->name, sizeof a->name, "%s", d->name);
    snprintf(a->version, sizeof a->version, "%s", d->version ? d->version : "");
  } else {
    snprintf(a->error, sizeof a->error, "%s", ganfw_error_message());
  }
  for (size_t done = 0; done < sizeof *a;) {
    ssize_t w = write(fd, (const char *)a + done, sizeof *a - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(4);
    done += (size_t)w;
  }
  _exit(0);
}

/* Loads `path` (ganfw_<name>.so) in a child process and waits up to timeout_s seconds for its
 * answer; a child that has not answered by then is killed. */
static void probe_file(const char *path, const char *name, double timeout_s, probe_result *r) {
  memset(r, 0, sizeof *r);
  int fds[2];
  if (pipe(fds) != 0) {
    *r = (probe_result){.how = PROBE_NOT_RUN, .detail = errno};
    return;
  }
  fflush(NULL); /* a child's exit() must not write the parent's buffered output again */
  pid_t pid = fork();
  if (pid < 0) {
    *r = (probe_result){.how = PROBE_NOT_RUN, .detail = errno};
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (pid == 0) {
    close(fds[0]);
    probe_child(fds[1], path, name);
  }
  close(fds[1]);
  size_t got = 0;
  int hung = 0;
  double deadline = monotonic_s() + timeout_s;
  while (got < sizeof r->a) {
    double left = deadline - monotonic_s();
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    int ready = left > 0 ? poll(&pfd, 1, (int)(left * 1000.0) + 1) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      hung = 1;
      break;
    }
    ssize_t n = ready > 0 ? read(fds[0], (char *)&r->a + got, sizeof r->a - got) : -1;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; /* the child ended (or the pipe failed) */
    got += (size_t)n;
  }
  close(fds[0]);
  r->a.name[sizeof r->a.name - 1] = r->a.version[sizeof r->a.version - 1] = '\0';
  r->a.error[sizeof r->a.error - 1] = '\0';
  if (hung) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
  if (got == sizeof r->a)
    r->how = PROBE_ANSWERED;
  else if (hung)
    r->how = PROBE_HUNG;
  else if (WIFSIGNALED(status))
    r->how = PROBE_SIGNALED, r->detail = WTERMSIG(status);
  else
    r->how = PROBE_EXITED, r->detail = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* 1 when the probe loaded the file; else 0 with what is wrong with it in buf. */
static int probe_problem(const probe_result *r, double timeout_s, char *buf, size_t cap) {
  static const char *const fix = "fix the plugin or move it off the search path";
  const char *sig = ganfw_signal_name(r->detail);
  switch (r->how) {
  case PROBE_ANSWERED:
    if (r->a.loaded && r->a.kind >= 0 && r->a.kind < GANFW_PLUGIN_KIND_COUNT) return 1;
    snprintf(buf, cap, "%.*s", (int)sizeof r->a.error - 1,
             r->a.loaded ? "the process loading it answered nonsense" : r->a.error);
    return 0;
  case PROBE_SIGNALED:
    if (sig)
      snprintf(buf, cap, "killed by %s while loading (constructor or entry point); %s", sig, fix);
    else
      snprintf(buf, cap, "killed by signal %d while loading (constructor or entry point); %s",
               (int)r->detail, fix);
    return 0;
  case PROBE_EXITED:
    snprintf(buf, cap,
             "the process loading it exited with status %d (a constructor or the entry point "
             "calls exit); %s",
             (int)r->detail, fix);
    return 0;
  case PROBE_HUNG:
    snprintf(buf, cap,
             "hangs: no answer within %g s while loading (a constructor or the entry point does "
             "not return; `ganfw plugins --timeout S` waits longer); %s",
             timeout_s, fix);
    return 0;
  default:
    snprintf(buf, cap, "not checked: cannot start a process to load it in (%s)",
             strerror((int)r->detail));
    return 0;
  }
}

/* A name found earlier in the listing and the file that provides it. */
typedef struct seen_name {
  char *name;
  char *path;
} seen_name;

ganfw_status ganfw_plugin_list(const char *const *dirs, int64_t ndirs, FILE *out) {
  return ganfw_plugin_list_probe(dirs, ndirs, GANFW_PLUGIN_PROBE_TIMEOUT_S, out, NULL);
}

ganfw_status ganfw_plugin_list_probe(const char *const *dirs, int64_t ndirs, double timeout_s,
                                     FILE *out, int64_t *n_broken) {
  if (n_broken) *n_broken = 0;
  if (!(timeout_s > 0))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw plugins: the timeout must be > 0 s");
  search_path sp;
  ganfw_status st = search_path_init(&sp, dirs, ndirs);
  if (st != GANFW_OK) return st;
  /* Directories named twice (a build dir also in GANFW_PLUGIN_PATH) are scanned once. */
  char **real = calloc((size_t)sp.n + 1, sizeof *real);
  seen_name *seen = NULL;
  int64_t nseen = 0, capseen = 0;

  fprintf(out, "Plugin search path, in order (ABI of this ganfw: %d.%d):\n", GANFW_ABI_MAJOR,
          GANFW_ABI_MINOR);
  for (int64_t i = 0; i < sp.n; i++)
    fprintf(out, "  %lld. %s (%s%s)\n", (long long)i + 1, sp.items[i].dir, sp.items[i].origin,
            is_dir(sp.items[i].dir) ? "" : ", missing");
  fprintf(out, "\n%-10s %-16s %-10s %-6s %s\n", "KIND", "NAME", "VERSION", "ABI", "PATH");

  int64_t nrows = 0, nbroken = 0;
  for (int64_t i = 0; real && i < sp.n; i++) {
    real[i] = realpath(sp.items[i].dir, NULL);
    int dup = 0;
    for (int64_t j = 0; j < i && real[i]; j++) dup |= real[j] && strcmp(real[i], real[j]) == 0;
    if (dup || !real[i]) continue;
    int64_t nfiles;
    char **files = list_dir(sp.items[i].dir, &nfiles);
    for (int64_t f = 0; f < nfiles; f++) {
      size_t nname = strlen(files[f]) - strlen(PLUGIN_PREFIX) - strlen(PLUGIN_SUFFIX);
      char name[NAME_MAX + 1];
      memcpy(name, files[f] + strlen(PLUGIN_PREFIX), nname);
      name[nname] = '\0';
      char *path = path_join(sp.items[i].dir, files[f]);
      const char *shadowed_by = NULL;
      for (int64_t s = 0; s < nseen; s++)
        if (strcmp(seen[s].name, name) == 0) shadowed_by = seen[s].path;
      probe_result r;
      const char *tag = NULL; /* NULL: listed; "error": the loader refused it; "broken": loading
                                 it killed or stalled the process */
      if (path)
        probe_file(path, name, timeout_s, &r);
      else
        r = (probe_result){.how = PROBE_ANSWERED, .a.error = "out of host memory"};
      char problem[sizeof r.a.error + 256];
      int ok = probe_problem(&r, timeout_s, problem, sizeof problem);
      if (ok) {
        const probe_answer *d = &r.a;
        char abi[32];
        snprintf(abi, sizeof abi, "%u.%u", (unsigned)d->abi_major, (unsigned)d->abi_minor);
        fprintf(out, "%-10s %-16s %-10s %-6s %s", kind_names[d->kind], d->name,
                d->version[0] ? d->version : "-", abi, path);
        if (d->abi_minor > GANFW_ABI_MINOR) fprintf(out, "  (newer ABI minor than this ganfw)");
      } else {
        tag = r.how == PROBE_ANSWERED || r.how == PROBE_NOT_RUN ? "error" : "broken";
        fprintf(out, "%-10s %-16s %-10s %-6s %s", tag, name, "-", "-", path ? path : files[f]);
        nbroken++;
      }
      if (shadowed_by) fprintf(out, "  (shadowed by %s)", shadowed_by);
      fputc('\n', out);
      if (tag) fprintf(out, "           %s: %s\n", tag, problem);
      nrows++;
      if (!shadowed_by && path) {
        if (nseen == capseen) {
          capseen = capseen ? 2 * capseen : 16;
          seen_name *grown = realloc(seen, (size_t)capseen * sizeof *seen);
          if (grown) seen = grown;
        }
        if (nseen < capseen) {
          seen[nseen].name = strdup(name);
          seen[nseen].path = path;
          if (seen[nseen].name) {
            nseen++;
            path = NULL;
          }
        }
      }
      free(path);
      free(files[f]);
    }
    free(files);
  }
  if (nrows == 0)
    fprintf(out, "(no " PLUGIN_PREFIX "*" PLUGIN_SUFFIX " files found; add a directory to "
                 "plugin_path in the config or to " GANFW_PLUGIN_PATH_ENV ")\n");

  for (int64_t s = 0; s < nseen; s++) {
    free(seen[s].name);
    free(seen[s].path);
  }
  free(seen);
  for (int64_t i = 0; real && i < sp.n; i++) free(real[i]);
  free(real);
  search_path_free(&sp);
  ganfw_error_clear();
  if (n_broken) *n_broken = nbroken;
  if (fflush(out) != 0 || ferror(out))
    return ganfw_error_set(GANFW_ERR_IO, "ganfw plugins: writing the listing failed");
  return GANFW_OK;
}
