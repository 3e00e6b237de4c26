/* Which plugin's code this thread is running: a small per-thread record (plugin name, file,
 * callback) that the core sets around each call into a plugin, so that a fatal signal inside
 * it can be blamed on the plugin by name (plugin/plugin_crash.h). Calls through a plugin's
 * vtable set it in one place, the wrappers of plugin/plugin_call.h; loading a file sets
 * "loading"; the plugin-layer adapter (nn/layers/plugin_layer.c) sets "layer.<callback>". */
#ifndef GANFW_BASE_PLUGIN_FRAME_H
#define GANFW_BASE_PLUGIN_FRAME_H

/* One call into a plugin. The strings are borrowed and must outlive the call; the signal
 * handler reads them, so they are never freed while the record is current. */
typedef struct ganfw_plugin_frame {
  const char *plugin;   /* the descriptor's name, or the file's name while loading */
  const char *path;     /* the .so file */
  const char *callback; /* "optim.step", "model.create", "loading", "layer.forward" */
} ganfw_plugin_frame;

/* This thread's current call; NULL outside plugin code. Read it through the functions. */
extern _Thread_local const ganfw_plugin_frame *ganfw_plugin_frame_tls;

/* Makes `f` this thread's current call and returns the one it replaces, to hand back to
 * ganfw_plugin_leave after the call; a NULL `f` (or one with a NULL plugin: a layer no plugin
 * made) keeps the current one. A thread-local pointer store: cheap enough for every call. */
static inline const ganfw_plugin_frame *ganfw_plugin_enter(const ganfw_plugin_frame *f) {
  const ganfw_plugin_frame *prev = ganfw_plugin_frame_tls;
  if (f && f->plugin) ganfw_plugin_frame_tls = f;
  return prev;
}

static inline void ganfw_plugin_leave(const ganfw_plugin_frame *prev) {
  ganfw_plugin_frame_tls = prev;
}

/* This thread's current call, NULL outside plugin code. Async-signal-safe. */
static inline const ganfw_plugin_frame *ganfw_plugin_current(void) {
  return ganfw_plugin_frame_tls;
}

#endif
