/* The ganfw command line: train (`ganfw CONFIG`), validate, plugins. Exit codes: 0 ok,
 * 1 runtime failure, 2 usage or config error. Every failure ends in one message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "error.h"
#include "ganfw/ganfw.h"
#include "log.h"
#include "run.h"
#include "sample.h"
#include "session.h"
#include "trainer.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

#define MAX_SETS 64

static const char usage[] =
    "usage: ganfw [options] CONFIG            train the model a config describes\n"
    "       ganfw validate [options] CONFIG   check a config, print it resolved\n"
    "       ganfw plugins [--plugin-path DIR] list the plugins found\n"
    "       ganfw sample RUN_DIR|CHECKPOINT [-n 64] [-o grid.png] [--seed S] [--nrow 8]\n"
    "                                         images from a trained generator\n"
    "       ganfw --help | --version\n"
    "\n"
    "options:\n"
    "  --set KEY=VALUE   override a config key (dotted path), e.g. --set train.batch_size=32\n"
    "  -q, --quiet       only warnings and errors\n"
    "  -v, --verbose     debug messages\n"
    "\n"
    "Plugins are searched in the config's plugin_path, $GANFW_PLUGIN_PATH, the build tree\n"
    "and the install prefix. Exit codes: 0 ok, 1 runtime failure, 2 usage or config error.\n";

/* Config, plugin and usage problems are the user's to fix (2); the rest are runtime (1). */
static int exit_code_for(ganfw_status st) {
  switch (st) {
  case GANFW_OK:
    return EXIT_OK;
  case GANFW_ERR_CONFIG:
  case GANFW_ERR_PLUGIN:
  case GANFW_ERR_UNSUPPORTED:
  case GANFW_ERR_INVALID_ARG:
    return EXIT_USAGE;
  default:
    return EXIT_RUNTIME;
  }
}

static int fail(ganfw_status st) {
  const char *msg = ganfw_error_message();
  fprintf(stderr, "ganfw: %s: %s\n", ganfw_status_name(st), *msg ? msg : "(no message)");
  return exit_code_for(st);
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "ganfw: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n%s", usage);
  return EXIT_USAGE;
}

typedef struct cli_args {
  const char *command; /* "train", "validate", "plugins" */
  const char *config;
  const char *sets[MAX_SETS];
  int nsets;
  const char *plugin_dirs[MAX_SETS];
  int ndirs;
  ganfw_sample_args sample;
} cli_args;

/* Parses argv into args; returns -1 when parsing succeeded, else the exit code. */
static int parse_args(int argc, char **argv, cli_args *args) {
  memset(args, 0, sizeof *args);
  args->command = "train";
  int i = 1;
  args->sample = (ganfw_sample_args){.output = "samples.png", .n = 64, .nrow = 8};
  if (argc > 1 && (strcmp(argv[1], "validate") == 0 || strcmp(argv[1], "plugins") == 0 ||
                   strcmp(argv[1], "sample") == 0)) {
    args->command = argv[1];
    i = 2;
  }
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return EXIT_OK;
    } else if (strcmp(a, "--version") == 0) {
      printf("ganfw %s (plugin ABI %d.%d, backends: cpu%s)\n", GANFW_VERSION, GANFW_ABI_MAJOR,
             GANFW_ABI_MINOR,
#ifdef GANFW_HAVE_CUDA
             ", cuda (toolkit found at build time)"
#else
             ""
#endif
      );
      return EXIT_OK;
    } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
      ganfw_log_set_level(GANFW_LOG_WARN);
    } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
      ganfw_log_set_level(GANFW_LOG_DEBUG);
    } else if (strcmp(a, "--set") == 0 || strncmp(a, "--set=", 6) == 0) {
      const char *v = a[5] == '=' ? a + 6 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v) return usage_error("%s needs KEY=VALUE", a);
      if (args->nsets == MAX_SETS) return usage_error("too many %s options", "--set");
      args->sets[args->nsets++] = v;
    } else if (strcmp(a, "--plugin-path") == 0) {
      if (i + 1 >= argc) return usage_error("%s needs a folder", a);
      if (args->ndirs == MAX_SETS) return usage_error("too many %s options", a);
      args->plugin_dirs[args->ndirs++] = argv[++i];
    } else if (strcmp(args->command, "sample") == 0 && a[0] == '-' &&
               (strcmp(a, "-n") == 0 || strcmp(a, "-o") == 0 || strcmp(a, "--seed") == 0 ||
                strcmp(a, "--nrow") == 0)) {
      if (i + 1 >= argc) return usage_error("%s needs a value", a);
      const char *v = argv[++i];
      char *end = NULL;
      long long num = strtoll(v, &end, 10);
      int is_num = *v && end && *end == '\0';
      if (strcmp(a, "-o") == 0) {
        args->sample.output = v;
      } else if (!is_num || num < (strcmp(a, "--seed") == 0 ? 0 : 1) ||
                 (strcmp(a, "-n") == 0 && num > 1024) || (strcmp(a, "--nrow") == 0 && num > 1024)) {
        return usage_error("bad value for %s (a positive number, -n at most 1024)", a);
      } else if (strcmp(a, "-n") == 0) {
        args->sample.n = num;
      } else if (strcmp(a, "--nrow") == 0) {
        args->sample.nrow = (int32_t)num;
      } else {
        args->sample.seed = (uint64_t)num;
        args->sample.has_seed = 1;
      }
    } else if (a[0] == '-') {
      return usage_error("unknown option '%s'", a);
    } else if (!args->config) {
      args->config = a;
    } else {
      return usage_error("unexpected argument '%s'", a);
    }
  }
  if (strcmp(args->command, "plugins") != 0 && !args->config) {
    if (argc == 1) {
      fputs(usage, stderr);
      return EXIT_USAGE;
    }
    return usage_error(strcmp(args->command, "sample") == 0 ? "%s needs a run folder or checkpoint"
                                                            : "%s needs a config file",
                       args->command);
  }
  return -1;
}

static int cmd_plugins(const cli_args *args) {
  ganfw_status st = ganfw_plugin_list(args->plugin_dirs, args->ndirs, stdout);
  return st == GANFW_OK ? EXIT_OK : fail(st);
}

/* Everything a run does before its first step: config, plugins, data, model, optimizers;
 * then every key must have been read by someone. *session may be NULL on failure. */
static ganfw_status prepare(const cli_args *args, ganfw_run **run, ganfw_session **session) {
  *session = NULL;
  ganfw_status st = ganfw_run_open(args->config, args->sets, args->nsets, run);
  if (st == GANFW_OK) st = ganfw_session_open(*run, 1, NULL, session);
  if (st == GANFW_OK) st = ganfw_config_check_unused((*run)->config);
  return st;
}

static int cmd_validate(const cli_args *args) {
  ganfw_run *run = NULL;
  ganfw_session *session = NULL;
  ganfw_status st = prepare(args, &run, &session);
  if (st == GANFW_OK) {
    printf("# %s: valid\n", args->config);
    st = ganfw_config_write_resolved(run->config, stdout);
  }
  ganfw_session_close(session);
  ganfw_run_close(run);
  return st == GANFW_OK ? EXIT_OK : fail(st);
}

static int cmd_train(const cli_args *args) {
  ganfw_run *run = NULL;
  ganfw_session *session = NULL;
  ganfw_status st = prepare(args, &run, &session);
  if (st == GANFW_OK && session->family != GANFW_MODEL_GAN)
    st = ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                         "%s: model '%s' is a classifier; this build trains GANs only",
                         args->config, ganfw_plugin_name(run->model));
  if (st == GANFW_OK) st = ganfw_train_gan(session);
  ganfw_session_close(session);
  ganfw_run_close(run);
  if (st == GANFW_ERR_INTERRUPTED) {
    fprintf(stderr, "ganfw: %s\n", ganfw_error_message());
    return EXIT_INTERRUPTED;
  }
  return st == GANFW_OK ? EXIT_OK : fail(st);
}

int main(int argc, char **argv) {
  cli_args args;
  int rc = parse_args(argc, argv, &args);
  if (rc >= 0) return rc;
  if (strcmp(args.command, "plugins") == 0) return cmd_plugins(&args);
  if (strcmp(args.command, "validate") == 0) return cmd_validate(&args);
  if (strcmp(args.command, "sample") == 0) {
    args.sample.source = args.config;
    ganfw_status st = ganfw_sample(&args.sample);
    return st == GANFW_OK ? EXIT_OK : fail(st);
  }
  return cmd_train(&args);
}
