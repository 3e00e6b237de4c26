/* A plugin that crashes is named, never fatal to ganfw silently. `ganfw plugins` loads each
 * file in a child process and lists one that segfaults, aborts or hangs while loading as
 * broken, with the signal, next to the good ones, and exits 2. During a run, a fatal signal
 * in plugin code (loading, create, a step) prints one line naming the plugin, its file and
 * the callback, and the process ends with that signal. The crashing plugins are
 * tests/plugins/crash.c, built into <build>/tests/plugins/crash. The wrappers that set the
 * call context are checked in-process through a host table that records it.
 *
 * The ganfw children run with the sanitizers' own handlers for the fatal signals off
 * (handle_segv=0, ...: ASan's report would end the process with exit 1 or SIGABRT instead
 * of the signal); one case keeps ASan's SIGSEGV handler in an ASan build and checks that it
 * still runs after the line. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ganfw/ganfw.h"
#include "plugin/plugin_call.h"
#include "plugin/plugin_host.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static char root[64], ganfw[PATH_MAX], crash_dir[2048];
static char out[1 << 16]; /* the last run's stdout and stderr */

static const char *path_in(const char *rel) {
  static char buf[8][PATH_MAX];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static const char *crash_file(const char *name) {
  static char buf[4][PATH_MAX];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/ganfw_%.64s.so", crash_dir, name);
  return buf[k];
}

static int contains(const char *text, const char *part) {
  if (strstr(text, part)) return 1;
  printf("\n  missing \"%s\" in:\n%s\n", part, text);
  return 0;
}

static int count(const char *text, const char *part) {
  int n = 0;
  for (const char *s = text; (s = strstr(s, part)); s += strlen(part)) n++;
  return n;
}

/* The result of a child run: its exit code, or the signal that ended it. */
typedef struct run_end {
  int code;   /* exit status; -1 when it died of a signal */
  int signal; /* 0 when it exited */
} run_end;

/* Runs ganfw with args (NULL-terminated), stdout and stderr into `out`. Fatal signals take
 * their default action in it unless keep_asan_segv (then ASan keeps SIGSEGV). */
static run_end run_ganfw(const char *const *args, int keep_asan_segv) {
  int fds[2];
  run_end end = {-1, 0};
  if (pipe(fds) != 0) return end;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    const char *old = getenv("ASAN_OPTIONS");
    char asan[1024];
    snprintf(asan, sizeof asan,
             "%s%shandle_segv=%d:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:handle_abort=0",
             old ? old : "", old && old[0] ? ":" : "", keep_asan_segv);
    setenv("ASAN_OPTIONS", asan, 1);
    setenv("UBSAN_OPTIONS", "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0", 1);
    unsetenv(GANFW_PLUGIN_PATH_ENV);
    const char *argv[32] = {ganfw};
    int n = 1;
    for (const char *const *a = args; *a && n < 31; a++) argv[n++] = *a;
    argv[n] = NULL;
    execv(ganfw, (char *const *)argv);
    _exit(127);
  }
  close(fds[1]);
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fds[0], out + len, sizeof out - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    if (len == sizeof out - 1) break;
  }
  out[len] = '\0';
  close(fds[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return end;
  if (WIFSIGNALED(status))
    end.signal = WTERMSIG(status);
  else if (WIFEXITED(status))
    end.code = WEXITSTATUS(status);
  return end;
}

/* A classifier run on a small MNIST with the model and the optimizer `optim` (flow
 * mappings); model NULL is a small cnn. */
static const char *write_model_config(const char *file, const char *model, const char *optim) {
  FILE *f = fopen(path_in(file), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 1\n"
          "device: {type: cpu, threads: 1}\n"
          "plugin_path: [%s]\n"
          "data: {dataset: mnist, path: %s}\n"
          "model: %s\n"
          "optim: %s\n"
          "train: {batch_size: 10, max_steps: 4, log_every: 1, checkpoint_every: 0}\n"
          "run: {out_dir: %s}\n",
          crash_dir, path_in("mnist"),
          model ? model : "{plugin: cnn, blocks: [{channels: 4, pool: max}], linear: [16]}", optim,
          path_in("run"));
  fclose(f);
  return path_in(file);
}

static const char *write_config(const char *file, const char *optim) {
  return write_model_config(file, NULL, optim);
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(crash_dir, sizeof crash_dir, "%.1900s/tests/plugins/crash", build);
  snprintf(root, sizeof root, "/tmp/ganfw_plugin_crash_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 40, 10, 2);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* --- `ganfw plugins` ------------------------------------------------------------------ */

/* The row of `path` in a listing, and the line after it; NULL when there is none. */
static const char *row_of(const char *text, const char *path, char *row, char *next, size_t cap) {
  for (const char *s = text; *s;) {
    size_t len = strcspn(s, "\n");
    if (len < cap) {
      memcpy(row, s, len);
      row[len] = '\0';
      const char *at = strstr(row, path);
      if (at && (at[strlen(path)] == '\0' || at[strlen(path)] == ' ')) {
        const char *e = s + len + (s[len] == '\n');
        size_t nlen = strcspn(e, "\n");
        snprintf(next, cap, "%.*s", (int)(nlen < cap ? nlen : cap - 1), e);
        return row;
      }
    }
    s += len + (s[len] == '\n');
  }
  return NULL;
}

/* One good and three bad files in one folder: the good one and the build tree's plugins are
 * listed, each bad one is "broken" with what killed it, the hanging one after --timeout,
 * and the exit code is 2 with a line that counts them. */
static void test_list_names_broken_files(void) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run_end end =
      run_ganfw((const char *[]){"plugins", "--timeout", "1", "--plugin-path", crash_dir, NULL}, 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  CU_ASSERT_EQUAL(end.signal, 0);
  CU_ASSERT_EQUAL(end.code, 2);
  CU_ASSERT(took < 8.0); /* the hanging file costs the timeout, 1 s */
  char row[4096], next[4096];
  CU_ASSERT_PTR_NOT_NULL_FATAL(row_of(out, crash_file("crashopt"), row, next, sizeof row));
  CU_ASSERT(contains(row, "optimizer  crashopt         1.0.0"));
  const struct {
    const char *name, *why;
  } bad[] = {
      {"ctorsegv", "broken: killed by SIGSEGV while loading (constructor or entry point)"},
      {"entryabort", "broken: killed by SIGABRT while loading (constructor or entry point)"},
      {"ctorhang", "broken: hangs: no answer within 1 s while loading"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_ASSERT_PTR_NOT_NULL(row_of(out, crash_file(bad[i].name), row, next, sizeof row));
    CU_ASSERT(contains(row, "broken "));
    CU_ASSERT(contains(next, bad[i].why));
  }
  CU_ASSERT(contains(out, "plugins/ganfw_adam.so")); /* the build tree's, after the broken */
  CU_ASSERT(contains(out, "ganfw: plugin error: 3 plugin files above cannot be used"));
}

/* The listing of good files alone still exits 0 (the build tree's plugins). */
static void test_list_of_good_files_exits_0(void) {
  run_end end = run_ganfw((const char *[]){"plugins", NULL}, 0);
  CU_ASSERT_EQUAL(end.code, 0);
  CU_ASSERT(contains(out, "optimizer  adam "));
  CU_ASSERT_PTR_NULL(strstr(out, "broken"));
}

/* --- a run ------------------------------------------------------------------------------ */

/* The run of `config` ends with `sig` after exactly one line naming the plugin, its file and
 * the callback. */
static void assert_named(const char *config, int sig, const char *sig_name, const char *plugin,
                         const char *callback) {
  run_end end = run_ganfw((const char *[]){config, NULL}, 0);
  CU_ASSERT_EQUAL(end.signal, sig);
  char line[PATH_MAX + 256];
  snprintf(line, sizeof line, "ganfw: fatal %s in plugin '%s' (%s) during %s\n", sig_name, plugin,
           crash_file(plugin), callback);
  CU_ASSERT(contains(out, line));
  CU_ASSERT_EQUAL(count(out, "ganfw: fatal "), 1);
}

static void test_run_names_step_crash(void) {
  const char *config =
      write_config("step.yaml", "{plugin: crashopt, lr: 0.01, crash_in: step, crash_at_step: 3}");
  assert_named(config, SIGSEGV, "SIGSEGV", "crashopt", "optim.step");
  CU_ASSERT(contains(out, "ganfw: step 2/4 ")); /* in the run's third step */
}

static void test_run_names_create_crash(void) {
  const char *config =
      write_config("create.yaml", "{plugin: crashopt, lr: 0.01, crash_in: create}");
  assert_named(config, SIGSEGV, "SIGSEGV", "crashopt", "optim.create");
}

static void test_run_names_loading_crash(void) {
  assert_named(write_config("ctor.yaml", "{plugin: ctorsegv, lr: 0.01}"), SIGSEGV, "SIGSEGV",
               "ctorsegv", "loading");
  assert_named(write_config("entry.yaml", "{plugin: entryabort, lr: 0.01}"), SIGABRT, "SIGABRT",
               "entryabort", "loading");
}

/* A layer a model plugin defined (net_custom) is named as that plugin's, in the step. */
static void test_run_names_layer_crash(void) {
  const char *config = write_model_config("layer.yaml", "{plugin: crashlayer, crash_at_forward: 2}",
                                          "{plugin: crashopt, lr: 0.01}");
  assert_named(config, SIGSEGV, "SIGSEGV", "crashlayer", "layer.forward");
}

/* A run that does not crash is not touched: same exit code, no line. */
static void test_clean_run_unchanged(void) {
  const char *config = write_config("clean.yaml", "{plugin: crashopt, lr: 0.01}");
  run_end end = run_ganfw((const char *[]){config, "--set", "train.max_steps=2", NULL}, 0);
  CU_ASSERT_EQUAL(end.signal, 0);
  CU_ASSERT_EQUAL(end.code, 0);
  CU_ASSERT_PTR_NULL(strstr(out, "fatal"));
}

/* In an ASan build, ASan's own SIGSEGV handler, installed before ours, still runs after the
 * line: its report follows it. */
static void test_previous_handler_still_runs(void) {
  if (!UNDER_ASAN) return;
  const char *config =
      write_config("asan.yaml", "{plugin: crashopt, lr: 0.01, crash_in: step, crash_at_step: 1}");
  run_end end = run_ganfw((const char *[]){config, NULL}, 1);
  CU_ASSERT(end.signal != 0 || end.code != 0);
  const char *line = strstr(out, "ganfw: fatal SIGSEGV in plugin 'crashopt'");
  const char *report = strstr(out, "AddressSanitizer");
  CU_ASSERT_PTR_NOT_NULL(line);
  CU_ASSERT_PTR_NOT_NULL(report);
  CU_ASSERT(line && report && line < report);
  CU_ASSERT_EQUAL(count(out, "ganfw: fatal "), 1);
}

/* --- the call context, in-process ------------------------------------------------------- */

static ganfw_plugin_frame seen; /* the frame current while the plugin called the host */
static int seen_calls;

static ganfw_status rec_cfg_string(const ganfw_cfg *node, const char *key, const char *def,
                                   const char **value) {
  (void)node;
  (void)key;
  const ganfw_plugin_frame *f = ganfw_plugin_current();
  if (f) seen = *f;
  seen_calls++;
  *value = def;
  return GANFW_OK;
}

static ganfw_status rec_cfg_int(const ganfw_cfg *node, const char *key, int64_t def,
                                int64_t *value) {
  (void)node;
  (void)key;
  *value = def;
  return GANFW_OK;
}

/* With naming on, a call through the vtable copy makes {plugin, file, "optim.create"} current
 * while the plugin runs (seen from the host call it makes) and puts the outer frame back
 * after; with naming off the copy holds the plugin's own members. */
static void test_wrappers_set_and_restore_context(void) {
  const char *dirs[] = {crash_dir};
  ganfw_plugin *plain = NULL, *named = NULL, *again = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("crashopt", GANFW_PLUGIN_OPTIM, NULL, dirs, 1, &plain),
                        GANFW_OK);
  const ganfw_optim_vt *own = ganfw_plugin_desc_of(plain)->vtable;
  const ganfw_optim_vt *vt = ganfw_plugin_vtable(plain);
  CU_ASSERT_PTR_EQUAL(vt->step, own->step);
  ganfw_plugin_call_naming(1);
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("crashopt", GANFW_PLUGIN_OPTIM, NULL, dirs, 1, &named),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load("crashopt", GANFW_PLUGIN_OPTIM, NULL, dirs, 1, &again),
                        GANFW_OK);
  ganfw_plugin_call_naming(0);
  vt = ganfw_plugin_vtable(named);
  const ganfw_optim_vt *vt2 = ganfw_plugin_vtable(again);
  CU_ASSERT_PTR_NOT_EQUAL(vt->step, own->step);
  CU_ASSERT_PTR_EQUAL(vt->step, vt2->step); /* one slot per file */
  CU_ASSERT_PTR_NULL(vt->state_tensor);     /* absent stays absent */
  ganfw_plugin_unload(plain);
  ganfw_plugin_unload(again);

  ganfw_host host;
  memset(&host, 0, sizeof host);
  host.struct_size = sizeof host;
  host.cfg_string = rec_cfg_string;
  host.cfg_int = rec_cfg_int;
  const ganfw_plugin_frame outer = {"outer", "/outer.so", "trainer.step"};
  const ganfw_plugin_frame *before = ganfw_plugin_enter(&outer);
  CU_ASSERT_PTR_NULL(before);
  void *self = NULL;
  seen_calls = 0;
  CU_ASSERT_EQUAL(vt->create(&host, NULL, NULL, NULL, 0, &self), GANFW_OK);
  CU_ASSERT_EQUAL(seen_calls, 1);
  CU_ASSERT_STRING_EQUAL(seen.plugin, "crashopt");
  CU_ASSERT_STRING_EQUAL(seen.path, crash_file("crashopt"));
  CU_ASSERT_STRING_EQUAL(seen.callback, "optim.create");
  CU_ASSERT_PTR_EQUAL(ganfw_plugin_current(), &outer); /* restored */
  ganfw_plugin_leave(before);
  CU_ASSERT_PTR_NULL(ganfw_plugin_current());
  vt->destroy(self);
  ganfw_plugin_unload(named);
}

static CU_TestInfo tests[] = {
    {"plugins lists broken files with the signal", test_list_names_broken_files},
    {"plugins with good files exits 0", test_list_of_good_files_exits_0},
    {"a crash in optim.step is named", test_run_names_step_crash},
    {"a crash in optim.create is named", test_run_names_create_crash},
    {"a crash while loading is named", test_run_names_loading_crash},
    {"a crash in a plugin's layer is named", test_run_names_layer_crash},
    {"a clean run is unchanged", test_clean_run_unchanged},
    {"the handler before ours still runs", test_previous_handler_still_runs},
    {"wrappers set and restore the call context", test_wrappers_set_and_restore_context},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("plugin crash", tests, suite_init, suite_clean);
}
