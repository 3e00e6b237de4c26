/* Shared steps of the suites that build an example out of tree (tests/test_example_*.c):
 * a temporary folder, commands run with their output logged (and printed when they fail),
 * `cmake --install` of this build tree into a prefix, configuring and building an example
 * against that prefix alone, IDX data sets and the installed ganfw's command line. Each
 * ensure step runs once and is remembered, so that any test of a suite can run alone. The
 * toolchain and flags of this build come from the header tests/example_common.cmake writes. */
#ifndef GANFW_EXAMPLE_UTIL_H
#define GANFW_EXAMPLE_UTIL_H

#include <stddef.h>
#include <stdio.h>

#include "example_config.h"
#include "testutil.h"

enum { EX_STEP_TODO = 0, EX_STEP_OK = 1, EX_STEP_FAILED = -1 };

/* The one run of a suite: paths under the temporary folder and the state of each step
 * (EX_STEP_*). The paths are set by ex_ensure_tmp. */
typedef struct ex_state {
  const char *program;    /* the suite's executable, for messages */
  const char *tmp_prefix; /* the temporary folder is $TMPDIR/<tmp_prefix>_XXXXXX */
  char root[4096];        /* the mkdtemp folder */
  char prefix[4200];      /* root/prefix: the install */
  char build[4200];       /* root/build: the example's build folder */
  char config[4200];      /* root/run.yaml */
  char out_dir[4200];     /* root/out */
  char plugin_dir[4400];  /* prefix/<libdir>/ganfw/plugins */
  char ganfw[4400];       /* prefix/<bindir>/ganfw */
  int tmp, installed, built, data, trained;
  int failures; /* any step or check failed: keep root for a look */
} ex_state;

/* The suite's run; ex_init names it before the tests run. */
extern ex_state ex;

/* Names the suite's executable and its temporary folder (both static strings). */
void ex_init(const char *program, const char *tmp_prefix);

/* Records a CUnit failure at the caller's line with a printf-style message, printed at once,
 * and counts it in ex.failures. */
#define ex_fail(...) ex_fail_at(__FILE__, __LINE__, __VA_ARGS__)
void ex_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* $GANFW_SOURCE_DIR, or the source tree this build was configured from. */
const char *ex_source_dir(void);
int ex_file_exists(const char *path);
/* Reads a whole small file; the caller frees. NULL when unreadable. */
char *ex_read_text(const char *path);
/* Prints the last `tail` bytes of a file under a heading. */
void ex_print_file_tail(const char *heading, const char *path, long tail);
/* 1 when the file at `log` holds every one of the NULL-terminated strings; else a failure
 * naming `what` and the first one missing, with the log. */
int ex_log_has(const char *what, const char *log, ...);

/* `s` as one single-quoted shell word appended to buf. */
void ex_shell_append(char *buf, size_t len, const char *s);
/* A shell command from words (NULL-terminated); words starting with "@" are passed
 * unquoted without the "@" (environment assignments, redirections). */
void ex_shell_command(char *buf, size_t len, ...);
/* Runs `cmd` with stdout and stderr into root/<name>.log; returns the exit status (-1 when
 * it did not run or was killed). log receives the log's path. On an exit status other than
 * `want` it records a failure and prints the command and the log. */
int ex_run_logged(const char *name, const char *cmd, int want, char *log, size_t log_len);
/* The installed ganfw with args[0..n), with the installed plugins in $GANFW_PLUGIN_PATH. */
void ex_ganfw_command(char *cmd, size_t len, const char *const *args, int n);
/* A YAML single-quoted scalar of s. */
void ex_yaml_quoted(FILE *f, const char *s);

/* Checks ex.out_dir/metrics.csv: its header starts with `header`, and it has want_steps rows,
 * the last of step want_steps, each of its step, its epoch and at least n numbers v[0..n) for
 * which bad_values(v) returns 0 (the count of values breaking `rule`, a phrase for the
 * failure). Every difference is a failure. */
void ex_check_metrics(const char *header, int n, int (*bad_values)(const double *v),
                      const char *rule, int want_steps);
/* The output of `ganfw plugins --plugin-path <example build>`, run as step "plugins", which the
 * caller frees; NULL (and a failure) when it failed. log receives the log's path. */
char *ex_list_plugins(char *log, size_t log_len);
/* 1 when a row of a `ganfw plugins` output lists kind, name, version (NULL: any) and path,
 * and, with `unshadowed`, is not marked shadowed. */
int ex_listing_has(const char *text, const char *kind, const char *name, const char *version,
                   const char *path, int unshadowed);

/* The steps; each returns 1 when it succeeded (now or before). */
/* The temporary folder and the paths in ex; removed at exit when nothing failed and
 * $GANFW_TEST_KEEP is not set. */
int ex_ensure_tmp(void);
/* `cmake --install` of this build tree into ex.prefix, which must then hold an executable
 * ganfw and the prefix-relative paths expected[0..n) ("/lib/..."); `check` (optional) runs
 * further checks of the install and returns 1 when they passed. */
int ex_ensure_installed(const char *const *expected, size_t n, int (*check)(void));
/* examples/<example> configured against ex.prefix (and nothing else: the configure fails the
 * step when find_package(ganfw) took another package) into ex.build and built there; the
 * build must make made[0..n) in ex.build. Needs ex_ensure_installed done first. */
int ex_ensure_built(const char *example, const char *const *made, size_t n);
/* Creates root/<name> and writes train-{images-idx3,labels-idx1}-ubyte into it in the IDX
 * format of MNIST (big-endian magic 0x803 / 0x801 and dimensions): `images` side x side
 * images of pixels[images * side * side] and their labels[images]. */
int ex_write_idx(const char *name, const unsigned char *pixels, const unsigned char *labels,
                 int images, int side);

#endif
