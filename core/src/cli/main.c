/* The ganfw command line: `ganfw [global options] [COMMAND] [options] OPERANDS`. Global
 * options (--set, -q, -v, --help, --version) go before or after the command name; a
 * command's own options come after it. The commands are the table in commands.c. Exit
 * codes: 0 ok, 1 runtime failure, 2 usage or config error, 130 interrupted (SIGINT), 143
 * terminated (SIGTERM). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "backend/backend.h"
#include "base/error.h"
#include "base/log.h"
#include "dist/dist.h"
#include "ganfw/ganfw.h"
#include "plugin/plugin_crash.h"
#include "train/run_state.h"

static const char global_options[] =
    "global options (before or after the command):\n"
    "  --set KEY=VALUE   override a config key (dotted path), e.g. --set train.batch_size=32\n"
    "  --set ~KEY        drop a config key, e.g. --set '~optim.betas'\n"
    "  -q, --quiet       only warnings and errors\n"
    "  -v, --verbose     debug messages\n"
    "  -h, --help        this text; `ganfw COMMAND --help`: that command's\n"
    "  --version         version, plugin ABI and backends\n";

static const char footer[] =
    "Plugins are searched in the config's plugin_path, $GANFW_PLUGIN_PATH, then the install\n"
    "prefix and the build tree (the build tree first for a binary run from it).\n"
    "Exit codes: 0 ok, 1 runtime failure, 2 usage or config error, 130 interrupted (Ctrl-C),\n"
    "143 terminated (SIGTERM); both write a checkpoint first.\n";

/* The summary's lines, indented under a synopsis. */
static void print_indented(FILE *f, const char *text, int indent) {
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    int len = nl ? (int)(nl - p) : (int)strlen(p);
    fprintf(f, "%*s%.*s\n", indent, "", len, p);
    p += len + (nl ? 1 : 0);
  }
}

/* Every command: synopsis, then what it does. */
static void print_usage(FILE *f) {
  for (int i = 0; i < cli_n_commands; i++) {
    const cli_command *c = &cli_commands[i];
    fprintf(f, "%s ganfw %s\n", i == 0 ? "usage:" : "      ", c->synopsis);
    print_indented(f, c->summary, 10);
  }
  fprintf(f, "       ganfw --help | --version | COMMAND --help\n\n%s\n%s", global_options, footer);
}

/* One command's usage, its options, then the global ones. */
static void print_command_usage(FILE *f, const cli_command *c) {
  fprintf(f, "usage: ganfw %s\n", c->synopsis);
  print_indented(f, c->summary, 2);
  if (c->options) fprintf(f, "\noptions:\n%s", c->options);
  fprintf(f, "\n%s\n%s", global_options, footer);
}

int cli_usage_error(const cli_command *cmd, const char *fmt, const char *arg) {
  fprintf(stderr, "ganfw: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  if (cmd)
    print_command_usage(stderr, cmd);
  else
    print_usage(stderr);
  return EXIT_USAGE;
}

/* Config, plugin and usage problems are the user's to fix (2); a run stopped by a signal
 * exits as the shell reports that signal (130 SIGINT, 143 SIGTERM); the rest are runtime
 * (1). */
static int exit_code_for(ganfw_status st) {
  switch (st) {
  case GANFW_OK:
    return EXIT_OK;
  case GANFW_ERR_INTERRUPTED:
    /* a rank of `ganfw launch` stopped with its checkpoint: 0, so that mpirun ends the job
     * at once instead of aborting the ranks still closing; launch says 130 or 143 */
    if (getenv("GANFW_LAUNCHED") && ganfw_dist_world_size() > 1) return EXIT_OK;
    return ganfw_interrupt_signal() == SIGTERM ? EXIT_TERMINATED : EXIT_INTERRUPTED;
  case GANFW_ERR_CONFIG:
  case GANFW_ERR_PLUGIN:
  case GANFW_ERR_UNSUPPORTED:
  case GANFW_ERR_INVALID_ARG:
    return EXIT_USAGE;
  default:
    return EXIT_RUNTIME;
  }
}

/* A failure of a rank other than 0 under mpirun: said at the end of the process only if
 * rank 0 did not end the same way (ganfw_dist_world_finish). */
static char deferred[8192];

int cli_fail(ganfw_status st) {
  const char *msg = ganfw_error_message();
  if (ganfw_dist_world_rank() != 0) {
    snprintf(deferred, sizeof deferred, "%s: %s", ganfw_status_name(st),
             *msg ? msg : "(no message)");
    return exit_code_for(st);
  }
  if (st == GANFW_ERR_INTERRUPTED) /* the message says which signal, and how to go on */
    fprintf(stderr, "ganfw: %s\n", msg);
  else
    fprintf(stderr, "ganfw: %s: %s\n", ganfw_status_name(st), *msg ? msg : "(no message)");
  return exit_code_for(st);
}

static void print_version(void) {
  printf("ganfw %s (plugin ABI %d.%d, backends: cpu%s; data-parallel: %s)\n", GANFW_VERSION,
         GANFW_ABI_MAJOR, GANFW_ABI_MINOR,
#ifdef GANFW_HAVE_CUDA
         ", cuda (toolkit found at build time)",
#else
         "",
#endif
#ifdef GANFW_HAVE_MPI
         "MPI (mpirun -np N ganfw CONFIG)"
#else
         "none (built without MPI)"
#endif
  );
}

static const cli_command *find_command(const char *name) {
  for (int i = 0; i < cli_n_commands; i++)
    if (strcmp(cli_commands[i].name, name) == 0) return &cli_commands[i];
  return NULL;
}

/* A global option at argv[*i] (moving *i past a value it takes). Returns CLI_OPT_TAKEN,
 * CLI_OPT_UNKNOWN, or an exit code (help and version print and end with 0). */
static int global_option(int argc, char **argv, int *i, cli_args *args) {
  const char *a = argv[*i];
  if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
    if (args->command)
      print_command_usage(stdout, args->command);
    else
      print_usage(stdout);
    return EXIT_OK;
  }
  if (strcmp(a, "--version") == 0) {
    print_version();
    return EXIT_OK;
  }
  if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
    ganfw_log_set_level(GANFW_LOG_WARN);
    return CLI_OPT_TAKEN;
  }
  if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
    ganfw_log_set_level(GANFW_LOG_DEBUG);
    return CLI_OPT_TAKEN;
  }
  if (strcmp(a, "--set") == 0 || strncmp(a, "--set=", 6) == 0) {
    const char *v = a[5] == '=' ? a + 6 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (!v) return cli_usage_error(args->command, "%s needs KEY=VALUE or ~KEY", a);
    if (args->nsets == CLI_MAX_ARGS)
      return cli_usage_error(args->command, "too many %s options", "--set");
    args->sets[args->nsets++] = v;
    return CLI_OPT_TAKEN;
  }
  return CLI_OPT_UNKNOWN;
}

/* An argument that is not an option: the command name (the first one, when it names a
 * command and none was chosen), else an operand. */
static int operand(const char *a, cli_args *args) {
  if (!args->command) {
    const cli_command *c = find_command(a);
    args->command = c ? c : &cli_commands[0];
    if (c) return CLI_OPT_TAKEN;
  }
  const cli_command *c = args->command;
  if (!c->operand || (!c->many && args->noperands == 1))
    return cli_usage_error(c, "unexpected argument '%s'", a);
  if (args->noperands == CLI_MAX_ARGS)
    return cli_usage_error(c, "too many arguments for %s", c->name);
  args->operands[args->noperands++] = a;
  return CLI_OPT_TAKEN;
}

static void set_defaults(cli_args *args) {
  memset(args, 0, sizeof *args);
  args->sample = (ganfw_sample_args){.output = "samples.png", .n = 64, .nrow = 8};
  args->find = (ganfw_find_batch_options){.margin = 0.05, .confirm = 1};
  args->fit = (ganfw_fit_options){.confirm = 1};
  args->compare = (ganfw_compare_options){.warmup = 2, .steps = 10};
  args->score = (ganfw_score_args){.n = 10000, .batch = 500};
}

/* Parses argv into args; returns -1 when parsing succeeded, else the exit code. */
static int parse_args(int argc, char **argv, cli_args *args) {
  set_defaults(args);
  if (argc == 1) {
    print_usage(stderr);
    return EXIT_USAGE;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int rc = global_option(argc, argv, &i, args);
    if (rc == CLI_OPT_UNKNOWN && a[0] == '-' && a[1]) {
      const cli_command *c = args->command ? args->command : &cli_commands[0];
      int took = 0;
      rc = c->option ? c->option(args, a, i + 1 < argc ? argv[i + 1] : NULL, &took)
                     : CLI_OPT_UNKNOWN;
      if (rc == CLI_OPT_UNKNOWN) return cli_usage_error(args->command, "unknown option '%s'", a);
      i += took;
    } else if (rc == CLI_OPT_UNKNOWN) {
      rc = operand(a, args);
    }
    if (rc >= 0) return rc;
  }
  if (!args->command) args->command = &cli_commands[0];
  const cli_command *c = args->command;
  if (c->operand && args->noperands == 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s needs %s", c == &cli_commands[0] ? "ganfw" : c->name, c->operand);
    return cli_usage_error(c, "%s", msg);
  }
  return -1;
}

/* Under mpirun every rank runs the same command; ranks other than 0 print only errors, and
 * the job ends together (ganfw_dist_world_finish). */
int cli_argc;
char **cli_argv;

/* OpenMP's idle workers poll before they sleep (libgomp: 300,000 times by default), which
 * on a machine that other work shares takes the cores that work needs, and the step's
 * barriers then wait on preempted threads. OpenBLAS starts a pool of (cores - 1) threads
 * that ganfw never wakes (it calls OpenBLAS single-threaded, backend/cpu/gemm.c), each
 * mapping a buffer of its own at once (128 MiB on a Haswell build): under `ulimit -v` they
 * take a run's room, and one that cannot map its buffer retries for ever, so that exit()
 * waits for it. Both libraries read their settings only when they load, so unless the
 * user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT set; OPENBLAS_NUM_THREADS set), ganfw
 * starts itself again at once with GOMP_SPINCOUNT=GANFW_SPINCOUNT (a short poll, then a
 * futex sleep; bench/run_load.sh measures it) and OPENBLAS_NUM_THREADS=1 (no pool), and
 * with OPENBLAS_CORETYPE when OpenBLAS did not know the CPU (ganfw_cpu_blas_core_hint).
 * Nothing is done before: no file, no MPI. */
#define GANFW_SPINCOUNT "1000"
static void set_wait_policy(char **argv) {
  const int spin = !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT") &&
                   setenv("GOMP_SPINCOUNT", GANFW_SPINCOUNT, 1) == 0;
  const int pool = !getenv("OPENBLAS_NUM_THREADS") && setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0;
  /* OpenBLAS took this CPU for a generic one (ganfw_cpu_blas_core_hint): its kernels for the
   * SIMD the CPU has, unless the user chose a core */
  const char *core = getenv("OPENBLAS_CORETYPE") ? NULL : ganfw_cpu_blas_core_hint();
  const int blas = core && setenv("OPENBLAS_CORETYPE", core, 1) == 0;
  if (!spin && !pool && !blas) return;
  execv("/proc/self/exe", argv); /* returns only on failure: run on with the libraries' defaults */
  if (spin) unsetenv("GOMP_SPINCOUNT");
  if (pool) unsetenv("OPENBLAS_NUM_THREADS");
  if (blas) unsetenv("OPENBLAS_CORETYPE");
}

int main(int argc, char **argv) {
  set_wait_policy(argv);
  cli_argc = argc;
  cli_argv = argv;
  ganfw_status st = ganfw_dist_world_init(&argc, &argv);
  if (st != GANFW_OK) return cli_fail(st);
  /* After MPI's handlers, before any plugin: a crash in a plugin names it, then ends the
   * process with its signal (the handlers before ours still run). */
  ganfw_plugin_crash_report_install();
  cli_args args;
  int rc = parse_args(argc, argv, &args);
  if (ganfw_dist_world_rank() != 0) { /* rank 0 speaks for the job */
    ganfw_log_set_level(GANFW_LOG_ERROR);
    if (!freopen("/dev/null", "w", stdout)) rc = rc < 0 ? EXIT_RUNTIME : rc;
  }
  if (rc < 0) rc = args.command->run(&args);
  return ganfw_dist_world_finish(rc, deferred);
}
