/* The ganfw command line, shared by main.c (argument parsing, help, exit codes) and
 * commands.c (the command table: each command's usage, options and handler). */
#ifndef GANFW_CLI_H
#define GANFW_CLI_H

#include <stdint.h>

#include "ganfw/status.h"
#include "tools/compare.h"
#include "tools/eval.h"
#include "tools/fit.h"
#include "tools/plan.h"
#include "tools/plot.h"
#include "tools/prune_tool.h"
#include "tools/sample.h"
#include "tools/score.h"

enum {
  EXIT_OK = 0,
  EXIT_RUNTIME = 1,
  EXIT_USAGE = 2,
  EXIT_INTERRUPTED = 130,
  EXIT_TERMINATED = 143
};

#define CLI_MAX_ARGS 64

struct cli_command;

/* Everything parsed from argv. Strings are borrowed from argv. */
typedef struct cli_args {
  const struct cli_command *command;
  const char *sets[CLI_MAX_ARGS]; /* --set, in order */
  int nsets;
  const char *operands[CLI_MAX_ARGS]; /* CONFIG, RUN_DIR, A.yaml B.yaml ... */
  int noperands;
  const char *plugin_dirs[CLI_MAX_ARGS]; /* plugins --plugin-path */
  int ndirs;
  double plugin_timeout; /* plugins --timeout, seconds; 0: the default */
  ganfw_sample_args sample;
  int32_t measure;               /* plan --measure, plot --measure */
  const char *plan_plot;         /* plan --plot FILE */
  ganfw_plot_args plot;          /* plot */
  ganfw_find_batch_options find; /* find-batch */
  ganfw_fit_options fit;         /* fit (and find-batch --fit) */
  const char *fit_budget;        /* fit --budget, find-batch --budget, as typed */
  int32_t find_fit;              /* find-batch --fit */
  ganfw_compare_options compare; /* compare */
  const char *csv, *json, *html; /* compare */
  ganfw_eval_args eval;
  ganfw_score_args score;
  ganfw_prune_args prune;
  int32_t launch_ranks; /* launch -n N */
} cli_args;

/* The process's arguments as main got them (launch hands them on to mpirun). */
extern int cli_argc;
extern char **cli_argv;

/* What an option handler says about one argument. */
enum {
  CLI_OPT_TAKEN = -1,   /* the option (and its value, when it took one) was used */
  CLI_OPT_UNKNOWN = -2, /* not an option of this command */
};

typedef struct cli_command {
  const char *name;     /* as typed after `ganfw` */
  const char *synopsis; /* "validate [options] CONFIG" */
  const char *summary;  /* one or two lines: what it does */
  const char *options;  /* its own options, one a line (NULL: none) */
  const char *operand;  /* what a missing operand is, e.g. "a config file"; NULL: none */
  int32_t many;         /* takes several operands (compare) */
  /* Its options (optional, NULL: none): `opt` with the next argument `value` (NULL at the
   * end); sets *took_value when it used it. Returns CLI_OPT_TAKEN, CLI_OPT_UNKNOWN or the
   * exit code of a usage error (message printed). */
  int (*option)(cli_args *args, const char *opt, const char *value, int *took_value);
  int (*run)(cli_args *args); /* the exit code */
} cli_command;

/* The table, in the order the usage lists them; the first one (train) runs when argv has
 * no command name. */
extern const cli_command cli_commands[];
extern const int cli_n_commands;

/* "ganfw: <message>" and the command's usage (the whole list for NULL) on stderr;
 * returns EXIT_USAGE. `fmt` takes one string. */
int cli_usage_error(const cli_command *cmd, const char *fmt, const char *arg);
/* "ganfw: STATUS: message" on stderr; the exit code of the status (2 for config, plugin
 * and argument errors, else 1). */
int cli_fail(ganfw_status st);

#endif
