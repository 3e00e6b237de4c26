/* The crash report: a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) while this
 * thread runs plugin code prints one line naming the plugin, its file and the callback,
 *   ganfw: fatal SIGSEGV in plugin 'myopt' (/path/ganfw_myopt.so) during optim.step
 * and the process then ends with that signal, as it would have without the report. */
#ifndef GANFW_PLUGIN_CRASH_H
#define GANFW_PLUGIN_CRASH_H

/* Installs the handler for the fatal signals (once; later calls do nothing), on an
 * alternate signal stack when the thread has none (a plugin that overflows its stack is
 * named too), and turns on the naming wrappers (ganfw_plugin_call_naming) for plugins
 * loaded from now on. A handler that was there before (a sanitizer's, MPI's) is called
 * after the line, for every fatal signal; without one the default action ends the process.
 * Call it before loading plugins, after anything else that installs such handlers. */
void ganfw_plugin_crash_report_install(void);

/* "SIGSEGV", "SIGABRT", ... for the signals a process dies of; NULL for others. A static
 * string; async-signal-safe. */
const char *ganfw_signal_name(int sig);

#endif
