/* The wrappers that name calls into a plugin: each member of a plugin's vtable copy becomes
 * a core function that makes {plugin, file, "<kind>.<member>"} this thread's current call
 * (base/plugin_frame.h) around the plugin's own member, so that a crash inside it can be
 * blamed on the plugin (plugin_crash.h). */
#ifndef GANFW_PLUGIN_CALL_H
#define GANFW_PLUGIN_CALL_H

#include <stdint.h>

#include "base/plugin_frame.h"

/* Turns on the wrappers below for plugins loaded from now on (the CLI does, when it installs
 * the crash report; a program that embeds the core gets the plugin's own members). */
void ganfw_plugin_call_naming(int32_t on);
/* Whether they are on: 1 or 0. */
int32_t ganfw_plugin_call_naming_on(void);

/* A slot of wrappers for one plugin file: `handle` (its dlopen handle, shared by every load
 * of the same file), `name` and `path` (copied). Each member of the vtable copy `vt` of
 * `kind` (GANFW_PLUGIN_*) that is not NULL becomes a core function that makes the frame
 * {name, path, "<kind>.<member>"} current, calls the plugin's member and restores the frame
 * before. Returns the slot to hand to ganfw_plugin_call_unwrap, or -1 (vt left as it is)
 * when naming is off or all slots are taken: the plugin then runs unnamed. */
int32_t ganfw_plugin_call_wrap(void *handle, const char *name, const char *path, int32_t kind,
                               void *vt);
/* Releases a slot from ganfw_plugin_call_wrap (when the last load of its file is unloaded);
 * accepts -1. */
void ganfw_plugin_call_unwrap(int32_t slot);

#endif
