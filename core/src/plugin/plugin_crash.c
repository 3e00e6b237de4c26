/* The crash report (see plugin_crash.h). The handler only reads the thread's current
 * plugin frame and writes one line with write(2), assembled in a buffer on its stack: no
 * stdio, no malloc, nothing that is not async-signal-safe. Then it hands the signal on to
 * the handler that was installed before (a sanitizer's report), or restores the default
 * action and raises the signal again, so the process ends with it: a fault re-executes the
 * faulting instruction, a raised signal is delivered once the handler returns. */
#include "plugin/plugin_crash.h"

#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "plugin/plugin_call.h"

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define N_FATAL ((int)(sizeof fatal_signals / sizeof fatal_signals[0]))
static struct sigaction previous[N_FATAL];
static int installed;

const char *ganfw_signal_name(int sig) {
  switch (sig) {
  case SIGSEGV:
    return "SIGSEGV";
  case SIGBUS:
    return "SIGBUS";
  case SIGFPE:
    return "SIGFPE";
  case SIGILL:
    return "SIGILL";
  case SIGABRT:
    return "SIGABRT";
  case SIGKILL:
    return "SIGKILL";
  case SIGTERM:
    return "SIGTERM";
  case SIGINT:
    return "SIGINT";
  case SIGTRAP:
    return "SIGTRAP";
  case SIGSYS:
    return "SIGSYS";
  case SIGPIPE:
    return "SIGPIPE";
  default:
    return NULL;
  }
}

/* Appends s to buf[*n..cap), cut to fit; async-signal-safe. */
static void append(char *buf, size_t *n, size_t cap, const char *s) {
  for (; s && *s && *n < cap; s++) buf[(*n)++] = *s;
}

static void report(int sig, const ganfw_plugin_frame *f) {
  char line[2048];
  size_t n = 0, cap = sizeof line - 1;
  const char *name = ganfw_signal_name(sig);
  append(line, &n, cap, "ganfw: fatal ");
  append(line, &n, cap, name ? name : "signal");
  append(line, &n, cap, " in plugin '");
  append(line, &n, cap, f->plugin);
  append(line, &n, cap, "' (");
  append(line, &n, cap, f->path);
  append(line, &n, cap, ") during ");
  append(line, &n, cap, f->callback);
  line[n++] = '\n';
  for (size_t done = 0; done < n;) {
    ssize_t w = write(STDERR_FILENO, line + done, n - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
}

static void on_fatal(int sig, siginfo_t *info, void *uc) {
  const ganfw_plugin_frame *f = ganfw_plugin_current();
  ganfw_plugin_leave(NULL); /* said once: an abort() in the next handler is not blamed again */
  if (f) report(sig, f);
  int k = 0;
  while (k < N_FATAL && fatal_signals[k] != sig) k++;
  const struct sigaction *prev = k < N_FATAL ? &previous[k] : NULL;
  if (prev && (prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
    prev->sa_sigaction(sig, info, uc);
    return;
  }
  if (prev && !(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL &&
      prev->sa_handler != SIG_IGN) {
    prev->sa_handler(sig);
    return;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

/* An alternate signal stack for this thread, unless it has one (a sanitizer's). */
static void ensure_alt_stack(void) {
  static char stack[64 * 1024];
  stack_t old;
  if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE)) return;
  stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
}

void ganfw_plugin_crash_report_install(void) {
  if (installed) return;
  installed = 1;
  ensure_alt_stack();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int k = 0; k < N_FATAL; k++) sigaction(fatal_signals[k], &sa, &previous[k]);
  ganfw_plugin_call_naming(1);
}
