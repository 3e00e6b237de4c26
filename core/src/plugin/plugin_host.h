/* The plugin host: finds a plugin shared object by name (ganfw_<name>.so) along the search
 * path, loads it with dlopen and checks its descriptor (ABI version, kind, name, vtable
 * size and required members) before anything in it is called; `ganfw plugins` lists them. */
#ifndef GANFW_PLUGIN_HOST_H
#define GANFW_PLUGIN_HOST_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/host.h"
#include "ganfw/plugin.h"
#include "ganfw/status.h"

/* A loaded plugin: the dlopen handle, its checked descriptor and the file it came from. */
typedef struct ganfw_plugin ganfw_plugin;

/* The environment variable with extra plugin directories, ':'-separated. */
#define GANFW_PLUGIN_PATH_ENV "GANFW_PLUGIN_PATH"

/* Finds `name` and loads it. `name` containing '/' or ending in ".so" is a path; otherwise
 * the file ganfw_<name>.so is searched in, in this order: dirs[0..ndirs) (the config's
 * plugin_path, already resolved by the caller), each entry of $GANFW_PLUGIN_PATH, then
 * GANFW_BUILD_PLUGIN_DIR and <folder of the executable>/GANFW_INSTALL_PLUGIN_REL (the
 * install prefix's lib/ganfw/plugins, wherever the tree was installed): the build tree
 * first when the executable lies in it, the install prefix first otherwise (an installed
 * binary finds the plugins installed with it). The first file found is the one loaded (a
 * broken file is an error, not skipped); a name found nowhere gets the nearest name on the
 * path as a "did you mean". `expected_kind` is GANFW_PLUGIN_* or -1 for any; `what` names
 * where the plugin was asked for ("model.plugin", "config.yaml:12:11: model.plugin") and may
 * be NULL.
 *
 * On success *out is owned by the caller and freed with ganfw_plugin_unload; everything
 * the descriptor points to is valid until then. A file that is loaded already (found at the
 * same path by a load not yet unloaded) is not read again: *out is that plugin, shared, once
 * it is the kind and name asked for here, and each load is matched by its own unload. On
 * failure *out is NULL, nothing more is left loaded and GANFW_ERR_PLUGIN
 * (GANFW_ERR_INVALID_ARG for a NULL name or out) is returned with one message naming the file
 * and what to do.
 *
 * A plugin whose abi_minor is newer than the core's is accepted without a message: it must
 * itself check host->struct_size before using host entries this core lacks. */
ganfw_status ganfw_plugin_load(const char *name, int32_t expected_kind, const char *what,
                               const char *const *dirs, int64_t ndirs, ganfw_plugin **out);
/* Gives up one hold on p (a load or a retain); the last one unloads it (dlclose) and frees
 * it. Accepts NULL. */
void ganfw_plugin_unload(ganfw_plugin *p);
/* One more hold on p, which stays loaded until ganfw_plugin_unload matches it; returns p. */
ganfw_plugin *ganfw_plugin_retain(ganfw_plugin *p);

/* Borrowed from the plugin, valid until ganfw_plugin_unload. */
const ganfw_plugin_desc *ganfw_plugin_desc_of(const ganfw_plugin *p);
/* The file the plugin was loaded from, as found on the search path; owned by p. */
const char *ganfw_plugin_path(const ganfw_plugin *p);
/* FNV-1a (64 bits) of that file's bytes, read once when it was loaded (0: it could not be
 * read back). Two builds of one plugin differ here; data-parallel ranks compare it. */
uint64_t ganfw_plugin_file_hash(const ganfw_plugin *p);
/* The plugin's vtable by kind (ganfw_model_vt, ... ganfw_layer_plugin_vt), as a zeroed copy of
 * the core's size: a member past the plugin's own struct_size is NULL (absent). Owned by p,
 * valid until ganfw_plugin_unload. Every call into a plugin goes through this copy. Once
 * the crash report is installed (plugin_crash.h, as the CLI does), each member that is set
 * is a core wrapper that names the call (plugin_call.h) and calls the plugin's own. */
const void *ganfw_plugin_vtable(const ganfw_plugin *p);
/* The struct_size the plugin's own vtable declares (smaller than the copy for a plugin
 * built against older headers). */
uint32_t ganfw_plugin_vtable_size(const ganfw_plugin *p);
/* The plugin's extension `id` ("ganfw.<what>/<N>") through its vtable's get_extension;
 * NULL when absent (no get_extension, or it does not know the id). Owned by the plugin,
 * valid until ganfw_plugin_unload. */
const void *ganfw_plugin_get_extension(const ganfw_plugin *p, const char *id);
/* Applies the config keys the plugin declares (GANFW_EXT_CONFIG_KEYS) to its `section`:
 * each is read with its default through the typed getters, so a wrong type is an error with
 * file:line:col, an absent key's default lands in the resolved config, and the key counts
 * as read. GANFW_OK when the plugin declares none. Call before the plugin's create. */
ganfw_status ganfw_plugin_apply_config_keys(const ganfw_plugin *p, const ganfw_cfg *section);
/* desc->name; owned by the plugin. */
const char *ganfw_plugin_name(const ganfw_plugin *p);
int32_t ganfw_plugin_kind(const ganfw_plugin *p);

/* "model", "optimizer", "memory", "objective", "trainer", "layer"; "unknown" outside the
 * range. Static strings. */
const char *ganfw_plugin_kind_name(int32_t kind);

/* `ganfw plugins`: scans the search directories in the order ganfw_plugin_load uses and
 * prints one row per ganfw_*.so file (kind, name, version, ABI, path). Each file is loaded
 * and checked in a child process (fork), which answers over a pipe, so that a file that
 * crashes or hangs while loading (a constructor, the entry point) cannot take the listing
 * down. A file the loader refuses is listed as "error" with its message on the next line; a
 * file whose loading killed the child ("killed by SIGSEGV while loading ...") or did not
 * answer within timeout_s seconds ("hangs: ...") is listed as "broken" the same way. A
 * name already found in an earlier directory is marked as shadowed. *n_broken (when not
 * NULL) is the number of error and broken rows. Returns GANFW_OK whatever the files are
 * (GANFW_ERR_IO only when writing to `out` fails, GANFW_ERR_INVALID_ARG for a timeout
 * that is not > 0). */
ganfw_status ganfw_plugin_list_probe(const char *const *dirs, int64_t ndirs, double timeout_s,
                                     FILE *out, int64_t *n_broken);
/* ganfw_plugin_list_probe with the default timeout, not counting. */
ganfw_status ganfw_plugin_list(const char *const *dirs, int64_t ndirs, FILE *out);
/* How long `ganfw plugins` waits for one file to load, by default. */
#define GANFW_PLUGIN_PROBE_TIMEOUT_S 10.0

/* The host table handed to plugins (host.c); static, valid for the process lifetime. */
const ganfw_host *ganfw_host_table(void);

/* Makes `table` the host extension `id` (host->get_extension), for the layers above that
 * implement one: train/ provides "ganfw.step/1" before it creates a trainer. Both must live
 * as long as the process; providing an id again replaces its table. */
ganfw_status ganfw_host_provide_extension(const char *id, const void *table);

#endif
