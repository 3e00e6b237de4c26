/* The ganfw command line: train (`ganfw CONFIG`), validate, plugins. Exit codes: 0 ok,
 * 1 runtime failure, 2 usage or config error. Every failure ends in one message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/compare.h"
#include "config/config.h"
#include "base/error.h"
#include "tools/eval.h"
#include "ganfw/ganfw.h"
#include "base/log.h"
#include "tools/plan.h"
#include "train/run.h"
#include "tools/sample.h"
#include "tools/score.h"
#include "train/session.h"
#include "train/trainer.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

#define MAX_SETS 64

static const char usage[] =
    "usage: ganfw [options] CONFIG            train the model a config describes\n"
    "       ganfw validate [options] CONFIG   check a config, print it resolved\n"
    "       ganfw plugins [--plugin-path DIR] list the plugins found\n"
    "       ganfw sample RUN_DIR|CHECKPOINT [-n 64] [-o grid.png] [--seed S] [--nrow 8]\n"
    "                                         images from a trained generator\n"
    "       ganfw score RUN_DIR|CHECKPOINT --classifier RUN_DIR|CHECKPOINT [-n 10000]\n"
    "                   [--seed S] [--batch 500]\n"
    "                                         a generator judged by a classifier: mean\n"
    "                                         confidence, class entropy, inception score\n"
    "       ganfw eval CONFIG|RUN_DIR [--checkpoint PATH] [--batch N]\n"
    "                                         a classifier's test accuracy, loss and confusion\n"
    "                                         matrix (best checkpoint, else the latest)\n"
    "       ganfw plan [options] CONFIG [--measure]\n"
    "                                         peak memory from shapes alone, per category,\n"
    "                                         phase and layer (--measure: and one real step)\n"
    "       ganfw find-batch [options] CONFIG [--margin 0.05] [--no-confirm] [--max-batch N]\n"
    "                                         the largest batch that fits the device budget\n"
    "       ganfw compare [options] A.yaml B.yaml ... [--steps 10] [--warmup 2] [--csv F]\n"
    "                     [--json F]          memory, speed and losses side by side\n"
    "       ganfw --help | --version\n"
    "\n"
    "options:\n"
    "  --set KEY=VALUE   override a config key (dotted path), e.g. --set train.batch_size=32\n"
    "  -q, --quiet       only warnings and errors\n"
    "  -v, --verbose     debug messages\n"
    "\n"
    "Plugins are searched in the config's plugin_path, $GANFW_PLUGIN_PATH, then the install\n"
    "prefix and the build tree (the build tree first for a binary run from it).\n"
    "Exit codes: 0 ok, 1 runtime failure, 2 usage or config error, 130 interrupted.\n";

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
  const char *configs[MAX_SETS]; /* compare */
  int nconfigs;
  int32_t measure;               /* plan --measure */
  ganfw_find_batch_options find; /* find-batch */
  ganfw_compare_options compare; /* compare */
  const char *csv, *json;        /* compare */
  ganfw_eval_args eval;
  ganfw_score_args score;
} cli_args;

/* Whether `a` is an option of the memory tool `command`. */
static int is_tool_option(const char *command, const char *a) {
  if (strcmp(command, "plan") == 0) return strcmp(a, "--measure") == 0;
  if (strcmp(command, "find-batch") == 0)
    return strcmp(a, "--margin") == 0 || strcmp(a, "--no-confirm") == 0 ||
           strcmp(a, "--max-batch") == 0;
  if (strcmp(command, "compare") == 0)
    return strcmp(a, "--steps") == 0 || strcmp(a, "--warmup") == 0 || strcmp(a, "--csv") == 0 ||
           strcmp(a, "--json") == 0;
  return 0;
}

/* One option of a memory tool with its value v (NULL when absent); *i moves past a value
 * it takes. Returns -1, or the exit code of a usage error. */
static int parse_tool_option(cli_args *args, const char *a, const char *v, int *i) {
  if (strcmp(a, "--measure") == 0) {
    args->measure = 1;
    return -1;
  }
  if (strcmp(a, "--no-confirm") == 0) {
    args->find.confirm = 0;
    return -1;
  }
  if (!v) return usage_error("%s needs a value", a);
  (*i)++;
  if (strcmp(a, "--csv") == 0) {
    args->csv = v;
    return -1;
  }
  if (strcmp(a, "--json") == 0) {
    args->json = v;
    return -1;
  }
  char *end = NULL;
  if (strcmp(a, "--margin") == 0) {
    double m = strtod(v, &end);
    if (!*v || *end || !(m >= 0.0 && m <= 0.9))
      return usage_error("bad value for %s (a fraction of the budget, 0 to 0.9)", a);
    args->find.margin = m;
    return -1;
  }
  long long num = strtoll(v, &end, 10);
  long long lo = strcmp(a, "--warmup") == 0 ? 0 : 1;
  long long hi = strcmp(a, "--max-batch") == 0 ? (1 << 20) : 100000;
  if (!*v || *end || num < lo || num > hi)
    return usage_error("bad value for %s (a whole number; see --help)", a);
  if (strcmp(a, "--steps") == 0)
    args->compare.steps = (int32_t)num;
  else if (strcmp(a, "--warmup") == 0)
    args->compare.warmup = (int32_t)num;
  else
    args->find.max_batch = num;
  return -1;
}

/* Parses argv into args; returns -1 when parsing succeeded, else the exit code. */
static int parse_args(int argc, char **argv, cli_args *args) {
  memset(args, 0, sizeof *args);
  args->command = "train";
  int i = 1;
  args->sample = (ganfw_sample_args){.output = "samples.png", .n = 64, .nrow = 8};
  args->find = (ganfw_find_batch_options){.margin = 0.05, .confirm = 1};
  args->compare = (ganfw_compare_options){.warmup = 2, .steps = 10};
  args->score = (ganfw_score_args){.n = 10000, .batch = 500};
  if (argc > 1 && (strcmp(argv[1], "validate") == 0 || strcmp(argv[1], "plugins") == 0 ||
                   strcmp(argv[1], "sample") == 0 || strcmp(argv[1], "eval") == 0 ||
                   strcmp(argv[1], "plan") == 0 || strcmp(argv[1], "find-batch") == 0 ||
                   strcmp(argv[1], "compare") == 0 || strcmp(argv[1], "score") == 0)) {
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
    } else if (strcmp(args->command, "score") == 0 &&
               (strcmp(a, "--classifier") == 0 || strcmp(a, "-n") == 0 ||
                strcmp(a, "--seed") == 0 || strcmp(a, "--batch") == 0)) {
      if (i + 1 >= argc) return usage_error("%s needs a value", a);
      const char *v = argv[++i];
      char *end = NULL;
      long long num = strtoll(v, &end, 10);
      const int is_num = *v && *end == '\0';
      if (strcmp(a, "--classifier") == 0)
        args->score.classifier = v;
      else if (!is_num || num < (strcmp(a, "--seed") == 0 ? 0 : 1) ||
               (strcmp(a, "--seed") != 0 && num > (1LL << 30)))
        return usage_error("bad value for %s (a positive number)", a);
      else if (strcmp(a, "-n") == 0)
        args->score.n = num;
      else if (strcmp(a, "--batch") == 0)
        args->score.batch = num;
      else {
        args->score.seed = (uint64_t)num;
        args->score.has_seed = 1;
      }
    } else if (strcmp(args->command, "eval") == 0 &&
               (strcmp(a, "--checkpoint") == 0 || strcmp(a, "--batch") == 0)) {
      if (i + 1 >= argc) return usage_error("%s needs a value", a);
      const char *v = argv[++i];
      char *end = NULL;
      long long num = strtoll(v, &end, 10);
      if (strcmp(a, "--checkpoint") == 0)
        args->eval.checkpoint = v;
      else if (!*v || *end || num < 1 || num > (1 << 20))
        return usage_error("bad value for %s (a batch size from 1 to 1048576)", a);
      else
        args->eval.batch = num;
    } else if (is_tool_option(args->command, a)) {
      int rc = parse_tool_option(args, a, i + 1 < argc ? argv[i + 1] : NULL, &i);
      if (rc >= 0) return rc;
    } else if (a[0] == '-') {
      return usage_error("unknown option '%s'", a);
    } else if (strcmp(args->command, "compare") == 0) {
      if (args->nconfigs == MAX_SETS) return usage_error("too many configs for %s", "compare");
      args->configs[args->nconfigs++] = a;
      args->config = args->configs[0];
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
    return usage_error(strcmp(args->command, "sample") == 0 || strcmp(args->command, "score") == 0
                           ? "%s needs a run folder or checkpoint"
                       : strcmp(args->command, "eval") == 0    ? "%s needs a config or run folder"
                       : strcmp(args->command, "compare") == 0 ? "%s needs config files"
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

/* An out-of-memory failure of a run (its message recorded): the message, then what each
 * memory strategy would bring the peak to, planned after the run let go of its memory. */
static int fail_oom(const cli_args *args) {
  static char msg[8192], advice[4096];
  snprintf(msg, sizeof msg, "%s", ganfw_error_message());
  ganfw_oom_advice(args->config, args->sets, args->nsets, advice, sizeof advice);
  fprintf(stderr, "ganfw: %s: %s%s\n", ganfw_status_name(GANFW_ERR_OOM), msg, advice);
  return EXIT_RUNTIME;
}

static int cmd_plan(const cli_args *args) {
  ganfw_probe_result plan, real;
  memset(&real, 0, sizeof real);
  ganfw_status st = ganfw_plan_make(args->config, args->sets, args->nsets, 0, NULL, &plan);
  if (st == GANFW_OK) ganfw_plan_print(args->config, &plan, stdout);
  if (st == GANFW_OK && args->measure) {
    fflush(stdout);
    char *summary = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&summary, &len);
    st = ganfw_plan_measure(args->config, args->sets, args->nsets, &plan, mem, &real);
    if (mem) fclose(mem);
    if (st == GANFW_OK) ganfw_plan_print_vs(&plan, &real, stdout);
    if (st == GANFW_OK && summary && *summary)
      printf("\nThe allocator after the real step:\n%s", summary);
    free(summary);
  }
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
  return st == GANFW_OK ? EXIT_OK : fail(st);
}

/* Exit code 1 when no batch size fits or the confirming step ran out of memory. */
static int cmd_find_batch(const cli_args *args) {
  ganfw_find_batch_result *res = malloc(sizeof *res);
  if (!res) return fail(ganfw_error_set(GANFW_ERR_OOM, "out of host memory"));
  ganfw_status st =
      ganfw_find_batch(args->config, args->sets, args->nsets, &args->find, res, stdout);
  int rc = EXIT_OK;
  if (st != GANFW_OK)
    rc = fail(st);
  else if (res->batch == 0 || (res->confirmed && res->real.oom))
    rc = EXIT_RUNTIME;
  ganfw_find_batch_free(res);
  free(res);
  return rc;
}

/* Exit code 0 when the table is complete, OOM rows included; 1 when a config failed
 * otherwise (its row says why). */
static int cmd_compare(const cli_args *args) {
  ganfw_compare_row *rows = calloc((size_t)args->nconfigs, sizeof *rows);
  if (!rows) return fail(ganfw_error_set(GANFW_ERR_OOM, "out of host memory"));
  ganfw_status st = ganfw_compare_run(args->configs, args->nconfigs, args->sets, args->nsets,
                                      &args->compare, rows, stderr);
  if (st == GANFW_OK) ganfw_compare_print(rows, args->nconfigs, stdout);
  if (st == GANFW_OK && args->csv) st = ganfw_compare_write_csv(rows, args->nconfigs, args->csv);
  if (st == GANFW_OK && args->json) st = ganfw_compare_write_json(rows, args->nconfigs, args->json);
  int failed = 0;
  for (int i = 0; i < args->nconfigs; i++) failed |= rows[i].status != GANFW_OK;
  ganfw_compare_rows_free(rows, args->nconfigs);
  free(rows);
  if (st != GANFW_OK) return fail(st);
  return failed ? EXIT_RUNTIME : EXIT_OK;
}

static int cmd_train(const cli_args *args) {
  ganfw_run *run = NULL;
  ganfw_session *session = NULL;
  ganfw_status st = prepare(args, &run, &session);
  if (st == GANFW_OK)
    st = session->family == GANFW_MODEL_CLASSIFIER ? ganfw_train_classifier(session)
                                                   : ganfw_train_gan(session);
  static char oom_msg[8192];
  if (st == GANFW_ERR_OOM) snprintf(oom_msg, sizeof oom_msg, "%s", ganfw_error_message());
  ganfw_session_close(session);
  ganfw_run_close(run);
  if (st == GANFW_ERR_OOM) { /* advice needs the memory back first */
    ganfw_error_set(GANFW_ERR_OOM, "%s", oom_msg);
    return fail_oom(args);
  }
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
  if (strcmp(args.command, "plan") == 0) return cmd_plan(&args);
  if (strcmp(args.command, "find-batch") == 0) return cmd_find_batch(&args);
  if (strcmp(args.command, "compare") == 0) return cmd_compare(&args);
  if (strcmp(args.command, "eval") == 0) {
    args.eval.source = args.config;
    args.eval.sets = args.sets;
    args.eval.nsets = args.nsets;
    ganfw_status st = ganfw_eval(&args.eval, stdout);
    return st == GANFW_OK ? EXIT_OK : fail(st);
  }
  if (strcmp(args.command, "score") == 0) {
    if (!args.score.classifier)
      return usage_error("%s needs --classifier RUN_DIR|CHECKPOINT", "score");
    args.score.source = args.config;
    ganfw_score_result res;
    ganfw_status st = ganfw_score(&args.score, &res, stdout);
    return st == GANFW_OK ? EXIT_OK : fail(st);
  }
  if (strcmp(args.command, "sample") == 0) {
    args.sample.source = args.config;
    ganfw_status st = ganfw_sample(&args.sample);
    return st == GANFW_OK ? EXIT_OK : fail(st);
  }
  return cmd_train(&args);
}
