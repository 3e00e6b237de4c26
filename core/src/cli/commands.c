/* The ganfw commands: one table row each (name, usage, options, handler), the option
 * parsers of the commands that have options, and the handlers. Parsing argv and printing
 * the usage from this table is main.c's. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <pthread.h>
#include <unistd.h>

#include "cli/cli.h"
#include "dist/dist.h"
#include "config/config.h"
#include "base/error.h"
#include "base/log.h"
#include "data/data.h"
#include "ganfw/ganfw.h"
#include "backend/cpu/blas_buffers.h"
#include "runtime/hostmem.h"
#include "train/outputs.h"
#include "train/run.h"
#include "train/session.h"
#include "train/loop.h"
#include "train/trainer.h"
#include "train/train_program.h"
#include "io/trace_file.h"
#include "tools/report.h"
#include "nn/prune_channels.h"

/* --- option values ---------------------------------------------------------------------- */

/* A whole number in [lo, hi] from `v` into *out; 0 when it is not one. */
static int parse_whole(const char *v, long long lo, long long hi, long long *out) {
  if (!v || !*v) return 0;
  char *end = NULL;
  long long num = strtoll(v, &end, 10);
  if (*end || num < lo || num > hi) return 0;
  *out = num;
  return 1;
}

/* The value of an option that needs one (*took set), or NULL after printing the error. */
static const char *need_value(const cli_args *args, const char *opt, const char *value, int *took) {
  if (!value) {
    cli_usage_error(args->command, "%s needs a value", opt);
    return NULL;
  }
  *took = 1;
  return value;
}

/* --- options of each command --------------------------------------------------------------- */

static int sample_option(cli_args *a, const char *opt, const char *value, int *took) {
  if (strcmp(opt, "--no-ema") == 0) {
    a->sample.no_ema = 1;
    return CLI_OPT_TAKEN;
  }
  int is_n = strcmp(opt, "-n") == 0, is_nrow = strcmp(opt, "--nrow") == 0;
  int is_seed = strcmp(opt, "--seed") == 0, is_out = strcmp(opt, "-o") == 0;
  int is_class = strcmp(opt, "--class") == 0, is_config = strcmp(opt, "--config") == 0;
  if (!is_n && !is_nrow && !is_seed && !is_out && !is_class && !is_config) return CLI_OPT_UNKNOWN;
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  if (is_config) {
    a->sample.config = v;
    return CLI_OPT_TAKEN;
  }
  if (is_out) {
    struct stat sb;
    if (stat(v, &sb) == 0 && S_ISDIR(sb.st_mode))
      return cli_usage_error(a->command, "-o %s is a directory; give the PNG file to write", v);
    a->sample.output = v;
    return CLI_OPT_TAKEN;
  }
  long long num;
  if (is_class) {
    if (!parse_whole(v, 0, 65535, &num))
      return cli_usage_error(a->command, "bad value for %s (a class number from 0)", opt);
    a->sample.cls = (int32_t)num;
    a->sample.has_class = 1;
    return CLI_OPT_TAKEN;
  }
  if (!parse_whole(v, is_seed ? 0 : 1, is_seed ? LLONG_MAX : 1024, &num))
    return cli_usage_error(a->command, "bad value for %s (a positive number, -n at most 1024)",
                           opt);
  if (is_n) {
    a->sample.n = num;
  } else if (is_nrow) {
    a->sample.nrow = (int32_t)num;
  } else {
    a->sample.seed = (uint64_t)num;
    a->sample.has_seed = 1;
  }
  return CLI_OPT_TAKEN;
}

static int score_option(cli_args *a, const char *opt, const char *value, int *took) {
  int is_cls = strcmp(opt, "--classifier") == 0, is_n = strcmp(opt, "-n") == 0;
  int is_seed = strcmp(opt, "--seed") == 0, is_batch = strcmp(opt, "--batch") == 0;
  int is_real = strcmp(opt, "--fid-real") == 0, is_config = strcmp(opt, "--config") == 0;
  if (strcmp(opt, "--no-fid") == 0) {
    a->score.no_fid = 1;
    return CLI_OPT_TAKEN;
  }
  if (strcmp(opt, "--no-ema") == 0) {
    a->score.no_ema = 1;
    return CLI_OPT_TAKEN;
  }
  if (strcmp(opt, "--per-class") == 0) {
    a->score.per_class = 1;
    return CLI_OPT_TAKEN;
  }
  if (!is_cls && !is_n && !is_seed && !is_batch && !is_real && !is_config) return CLI_OPT_UNKNOWN;
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  if (is_cls || is_config) {
    *(is_cls ? &a->score.classifier : &a->score.config) = v;
    return CLI_OPT_TAKEN;
  }
  long long num;
  if (!parse_whole(v, is_seed ? 0 : 1, is_seed ? LLONG_MAX : (1LL << 30), &num))
    return cli_usage_error(a->command, "bad value for %s (a positive number)", opt);
  if (is_n) {
    a->score.n = num;
  } else if (is_real) {
    a->score.fid_real = num;
  } else if (is_batch) {
    a->score.batch = num;
  } else {
    a->score.seed = (uint64_t)num;
    a->score.has_seed = 1;
  }
  return CLI_OPT_TAKEN;
}

static int eval_option(cli_args *a, const char *opt, const char *value, int *took) {
  int is_ckpt = strcmp(opt, "--checkpoint") == 0;
  if (!is_ckpt && strcmp(opt, "--batch") != 0) return CLI_OPT_UNKNOWN;
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  long long num;
  if (is_ckpt)
    a->eval.checkpoint = v;
  else if (parse_whole(v, 1, 1 << 20, &num))
    a->eval.batch = num;
  else
    return cli_usage_error(a->command, "bad value for %s (a batch size from 1 to 1048576)", opt);
  return CLI_OPT_TAKEN;
}

/* A comma-separated list into items[0..*n) (at most cap; the text is argv's, cut in place). */
static int split_list(char *text, const char **items, int32_t cap, int32_t *n) {
  *n = 0;
  for (char *save = NULL, *t = strtok_r(text, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (*n == cap) return 0;
    items[(*n)++] = t;
  }
  return *n > 0;
}

static int prune_option(cli_args *a, const char *opt, const char *value, int *took) {
  ganfw_prune_args *p = &a->prune;
  if (strcmp(opt, "--remove") == 0 || strcmp(opt, "--dry-run") == 0 ||
      strcmp(opt, "--structured") == 0 || strcmp(opt, "--distill") == 0) {
    if (opt[2] == 'r') p->remove = 1;
    if (strcmp(opt, "--distill") == 0) p->distill = 1;
    if (strcmp(opt, "--dry-run") == 0) p->dry_run = 1;
    if (opt[2] == 's') p->method = GANFW_PRUNE_CHANNELS;
    return CLI_OPT_TAKEN;
  }
  static const char *const valued[] = {"-o",       "--amount",     "--sweep",
                                       "--method", "--layers",     "--finetune",
                                       "--steps",  "--importance", "--config"};
  int known = 0;
  for (size_t i = 0; i < sizeof valued / sizeof *valued; i++) known |= strcmp(opt, valued[i]) == 0;
  if (!known) return CLI_OPT_UNKNOWN;
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  long long num = 0;
  if (strcmp(opt, "-o") == 0) {
    p->output = v;
  } else if (strcmp(opt, "--config") == 0) {
    p->config = v;
  } else if (strcmp(opt, "--method") == 0) {
    if ((p->method = ganfw_prune_method_parse(v)) < 0)
      return cli_usage_error(a->command,
                             "bad --method '%s' (l1_unstructured, global_unstructured, "
                             "ln_structured or channels)",
                             v);
  } else if (strcmp(opt, "--importance") == 0) {
    if ((p->importance = ganfw_channel_importance_parse(v)) < 0)
      return cli_usage_error(a->command, "bad --importance '%s' (l1, l2 or bn_gamma)", v);
  } else if (strcmp(opt, "--finetune") == 0 || strcmp(opt, "--steps") == 0) {
    if (!parse_whole(v, opt[2] == 'f' ? 0 : 1, 100000, &num))
      return cli_usage_error(a->command, "bad value for %s (a whole number)", opt);
    *(opt[2] == 'f' ? &p->finetune : &p->steps) = (int32_t)num;
  } else if (strcmp(opt, "--layers") == 0) {
    char *copy = (char *)v; /* argv is writable */
    if (!split_list(copy, p->layers, GANFW_PRUNE_MAX_LAYERS, &p->n_layers))
      return cli_usage_error(a->command, "bad --layers '%s' (names separated by commas)", v);
  } else { /* --amount A, --sweep A,B,C */
    const char *items[GANFW_PRUNE_MAX_SWEEP];
    int32_t n = 0;
    char *copy = (char *)v;
    if (!split_list(copy, items, opt[2] == 'a' ? 1 : GANFW_PRUNE_MAX_SWEEP, &n))
      return cli_usage_error(a->command,
                             "bad value for %s (amounts separated by commas, "
                             "at most 16)",
                             opt);
    for (int32_t i = 0; i < n; i++) {
      char *end = NULL;
      p->amounts[i] = strtod(items[i], &end);
      if (*end || end == items[i])
        return cli_usage_error(a->command, "bad amount '%s' (a fraction such as 0.5)", items[i]);
    }
    p->n_amounts = n;
  }
  return CLI_OPT_TAKEN;
}

static int plan_option(cli_args *a, const char *opt, const char *value, int *took) {
  if (strcmp(opt, "--plot") == 0) {
    if (!(a->plan_plot = need_value(a, opt, value, took))) return EXIT_USAGE;
    return CLI_OPT_TAKEN;
  }
  if (strcmp(opt, "--ranks") == 0) {
    long long n = 0;
    const char *v = need_value(a, opt, value, took);
    if (!v) return EXIT_USAGE;
    if (!parse_whole(v, 1, 4096, &n))
      return cli_usage_error(a->command, "bad value for --ranks: '%s' (1..4096)", v);
    ganfw_dist_simulate((int32_t)n); /* the sessions planned from here count one rank's bytes */
    return CLI_OPT_TAKEN;
  }
  if (strcmp(opt, "--measure") != 0) return CLI_OPT_UNKNOWN;
  a->measure = 1;
  return CLI_OPT_TAKEN;
}

static int plot_option(cli_args *a, const char *opt, const char *value, int *took) {
  if (strcmp(opt, "--measure") == 0) {
    a->plot.measure = 1;
    return CLI_OPT_TAKEN;
  }
  int is_out = strcmp(opt, "-o") == 0;
  if (!is_out && strcmp(opt, "--step") != 0) return CLI_OPT_UNKNOWN;
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  if (is_out) {
    a->plot.output = v;
    return CLI_OPT_TAKEN;
  }
  long long num;
  if (!parse_whole(v, 1, INT32_MAX, &num))
    return cli_usage_error(a->command, "bad value for %s (a step number from 1)", opt);
  a->plot.step = (int32_t)num;
  return CLI_OPT_TAKEN;
}

/* train --trace: device.trace on, as `--set device.trace=true` */
static int train_option(cli_args *a, const char *opt, const char *value, int *took) {
  (void)value, (void)took;
  if (strcmp(opt, "--trace") != 0) return CLI_OPT_UNKNOWN;
  if (a->nsets == CLI_MAX_ARGS) return cli_usage_error(a->command, "too many %s options", "--set");
  a->sets[a->nsets++] = "device.trace=true";
  return CLI_OPT_TAKEN;
}

/* --budget 6GiB | 60%: checked here, kept as typed for the messages. */
static int budget_option(cli_args *a, const char *opt, const char *value, int *took) {
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  if (ganfw_fit_parse_budget(v, &a->fit.budget, &a->fit.budget_percent) != GANFW_OK)
    return cli_usage_error(a->command, "%s", ganfw_error_message());
  a->fit_budget = v;
  return CLI_OPT_TAKEN;
}

static int fit_option(cli_args *a, const char *opt, const char *value, int *took) {
  if (strcmp(opt, "--budget") == 0) return budget_option(a, opt, value, took);
  if (strcmp(opt, "--no-confirm") == 0) {
    a->fit.confirm = 0;
    return CLI_OPT_TAKEN;
  }
  if (strcmp(opt, "--allow-batch") == 0) {
    a->fit.allow_batch = 1;
    return CLI_OPT_TAKEN;
  }
  if (strcmp(opt, "--show-calibration") == 0) {
    a->fit.show_calibration = 1;
    return CLI_OPT_TAKEN;
  }
  int is_out = strcmp(opt, "-o") == 0, is_plot = strcmp(opt, "--plot") == 0;
  int is_html = strcmp(opt, "--html") == 0;
  if (!is_out && !is_plot && !is_html && strcmp(opt, "--calib-steps") != 0) return CLI_OPT_UNKNOWN;
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  if (is_html) {
    a->fit.html = v;
    return CLI_OPT_TAKEN;
  }
  if (is_plot) {
    const size_t n = strlen(v);
    if (n < 5 || strcmp(v + n - 4, ".svg") != 0)
      return cli_usage_error(a->command, "--plot '%s': the front is drawn as an .svg file", v);
    a->fit.plot = v;
    return CLI_OPT_TAKEN;
  }
  if (is_out) {
    struct stat sb;
    if (!*v || (stat(v, &sb) == 0 && S_ISDIR(sb.st_mode)))
      return cli_usage_error(a->command, "-o '%s': give the config file to write", v);
    a->fit.output = v;
    return CLI_OPT_TAKEN;
  }
  long long num;
  if (!parse_whole(v, 1, 100, &num))
    return cli_usage_error(a->command, "bad value for %s (measured steps, 1 to 100)", opt);
  a->fit.calib_steps = (int32_t)num;
  return CLI_OPT_TAKEN;
}

static int find_batch_option(cli_args *a, const char *opt, const char *value, int *took) {
  if (strcmp(opt, "--no-confirm") == 0) {
    a->find.confirm = 0;
    a->fit.confirm = 0;
    return CLI_OPT_TAKEN;
  }
  if (strcmp(opt, "--fit") == 0) {
    a->find_fit = 1;
    return CLI_OPT_TAKEN;
  }
  if (strcmp(opt, "--budget") == 0) return budget_option(a, opt, value, took);
  int is_margin = strcmp(opt, "--margin") == 0;
  if (!is_margin && strcmp(opt, "--max-batch") != 0) return CLI_OPT_UNKNOWN;
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  if (is_margin) {
    char *end = NULL;
    double m = strtod(v, &end);
    if (!*v || *end || !(m >= 0.0 && m <= 0.9))
      return cli_usage_error(a->command, "bad value for %s (a fraction of the budget, 0 to 0.9)",
                             opt);
    a->find.margin = m;
    return CLI_OPT_TAKEN;
  }
  long long num;
  if (!parse_whole(v, 1, 1 << 20, &num))
    return cli_usage_error(a->command, "bad value for %s (a whole number; see --help)", opt);
  a->find.max_batch = num;
  return CLI_OPT_TAKEN;
}

/* --layouts caching,planned: one or two of the two, each at most once. */
static int layouts_option(cli_args *a, const char *v) {
  static const char *const names[2] = {"caching", "planned"};
  a->compare.n_layouts = 0;
  for (const char *p = v;; p++) { /* each comma-separated item, empty ones included */
    const size_t len = strcspn(p, ",");
    int k = -1;
    for (int j = 0; j < 2; j++)
      if (strlen(names[j]) == len && strncmp(p, names[j], len) == 0) k = j;
    int dup = 0;
    for (int j = 0; j < a->compare.n_layouts && k >= 0; j++)
      dup |= a->compare.layouts[j] == names[k];
    if (k < 0 || dup)
      return cli_usage_error(a->command,
                             "bad value for --layouts: '%s' (caching, planned or both, "
                             "comma-separated, each once)",
                             v);
    a->compare.layouts[a->compare.n_layouts++] = names[k];
    p += len;
    if (!*p) return CLI_OPT_TAKEN;
  }
}

static int compare_option(cli_args *a, const char *opt, const char *value, int *took) {
  int is_steps = strcmp(opt, "--steps") == 0, is_warmup = strcmp(opt, "--warmup") == 0;
  int is_csv = strcmp(opt, "--csv") == 0, is_json = strcmp(opt, "--json") == 0;
  int is_html = strcmp(opt, "--html") == 0, is_layouts = strcmp(opt, "--layouts") == 0;
  if (!is_steps && !is_warmup && !is_csv && !is_json && !is_html && !is_layouts)
    return CLI_OPT_UNKNOWN;
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  if (is_layouts) return layouts_option(a, v);
  if (is_csv || is_json || is_html) {
    *(is_csv ? &a->csv : is_json ? &a->json : &a->html) = v;
    return CLI_OPT_TAKEN;
  }
  long long num;
  if (!parse_whole(v, is_warmup ? 0 : 1, 100000, &num))
    return cli_usage_error(a->command, "bad value for %s (a whole number; see --help)", opt);
  *(is_steps ? &a->compare.steps : &a->compare.warmup) = (int32_t)num;
  return CLI_OPT_TAKEN;
}

static int plugins_option(cli_args *a, const char *opt, const char *value, int *took) {
  if (strcmp(opt, "--timeout") == 0) {
    char *end = NULL;
    double s = value ? strtod(value, &end) : 0.0;
    if (!value || end == value || *end || !(s > 0.0 && s <= 3600.0))
      return cli_usage_error(a->command, "%s needs seconds (more than 0, at most 3600)", opt);
    a->plugin_timeout = s;
    *took = 1;
    return CLI_OPT_TAKEN;
  }
  if (strcmp(opt, "--plugin-path") != 0) return CLI_OPT_UNKNOWN;
  if (!value) return cli_usage_error(a->command, "%s needs a folder", opt);
  if (a->ndirs == CLI_MAX_ARGS) return cli_usage_error(a->command, "too many %s options", opt);
  a->plugin_dirs[a->ndirs++] = value;
  *took = 1;
  return CLI_OPT_TAKEN;
}

/* --- handlers ---------------------------------------------------------------------------- */

/* Every file is listed; the exit code says whether any of them cannot be used (2, as for
 * any plugin problem), after one line on stderr that counts them. */
static int cmd_plugins(cli_args *args) {
  int64_t broken = 0;
  double timeout = args->plugin_timeout > 0 ? args->plugin_timeout : GANFW_PLUGIN_PROBE_TIMEOUT_S;
  ganfw_status st =
      ganfw_plugin_list_probe(args->plugin_dirs, args->ndirs, timeout, stdout, &broken);
  if (st != GANFW_OK) return cli_fail(st);
  if (broken == 0) return EXIT_OK;
  return cli_fail(ganfw_error_set(GANFW_ERR_PLUGIN,
                                  "%lld plugin file%s above cannot be used (marked error or "
                                  "broken); fix %s or move %s off the search path",
                                  (long long)broken, broken == 1 ? "" : "s",
                                  broken == 1 ? "it" : "them", broken == 1 ? "it" : "them"));
}

/* Everything a run does before its first step: config, plugins, data (unless `info` gives
 * its shape), model, optimizers; then every key must have been read by someone. *session
 * may be NULL on failure. */
static ganfw_status prepare(const ganfw_run_config *cfg, const ganfw_data_info *info,
                            const ganfw_alloc_layout *layout, ganfw_run **run,
                            ganfw_session **session) {
  *session = NULL;
  ganfw_status st = ganfw_run_open(cfg, run);
  if (st == GANFW_OK) (*run)->ctx_opt.layout = layout; /* device.memory_layout: planned */
  if (st == GANFW_OK) st = ganfw_session_open(*run, info == NULL, info, session);
  if (st == GANFW_OK) st = ganfw_config_check_unused((*run)->config);
  return st;
}

/* The shape a built-in data set has after the config's transforms, without its files
 * (data/registry.c); 0 for a kind whose shape only its files tell (folder). The data keys
 * were read by the session that failed to open the data. */
static int nominal_data_info(const ganfw_cfg *root, ganfw_data_info *info) {
  const ganfw_cfg *data = ganfw_cfg_section(root, "data");
  const char *kind = NULL, *path = NULL;
  ganfw_transform tf;
  int32_t c, h, w, classes;
  if (ganfw_data_source_from_config(data, &kind, &path) != GANFW_OK ||
      ganfw_transform_from_config(data, &tf) != GANFW_OK) {
    ganfw_error_clear();
    return 0;
  }
  if (!ganfw_dataset_nominal_shape(kind, &tf, &c, &h, &w, &classes)) return 0;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  info->channels = c;
  info->height = h;
  info->width = w;
  info->num_classes = classes;
  return 1;
}

/* Whether the run's data set is not there (its message kept in msg): the one failure
 * validate reports beside a valid config instead of instead of it. Present but unreadable
 * data (a bad magic number, a truncated file, an absurd header) is not missing: validate
 * then fails with the reader's message, as training does. The readers say a file is not
 * there with the system's ENOENT text. */
static int data_missing(const ganfw_run *run, char *msg, size_t n, int *unreadable) {
  static char first[8192]; /* the session's own message, put back unless the data is missing */
  snprintf(first, sizeof first, "%s", ganfw_error_message());
  const ganfw_status first_st = ganfw_error_code();
  *unreadable = 0;
  const ganfw_cfg *data = ganfw_cfg_section(ganfw_config_root(run->config), "data");
  const char *kind = NULL, *path = NULL;
  ganfw_status st = ganfw_data_source_from_config(data, &kind, &path);
  ganfw_dataset *ds = NULL;
  if (st == GANFW_OK && kind && path) st = ganfw_dataset_open(kind, path, 1, NULL, &ds);
  ganfw_dataset_destroy(ds);
  if (st == GANFW_ERR_IO && kind && path && strstr(ganfw_error_message(), strerror(ENOENT))) {
    snprintf(msg, n, "%s", ganfw_error_message());
    return 1;
  }
  *unreadable = st == GANFW_ERR_IO && kind && path;
  ganfw_error_set(first_st, "%s", first);
  return 0;
}

/* Checks the config and prints it resolved. Data that is not there is one line on stderr
 * and does not make a valid config invalid (exit 0); the model is then built for the data
 * set's nominal shape. */
static int cmd_validate(cli_args *args) {
  ganfw_run_config *cfg = NULL;
  ganfw_run *run = NULL;
  ganfw_session *session = NULL;
  ganfw_status st = ganfw_run_config_open(args->operands[0], args->sets, args->nsets, &cfg);
  if (st != GANFW_OK) return cli_fail(st);
  st = prepare(cfg, NULL, NULL, &run, &session);
  static char data_msg[4096];
  int no_data = 0, unreadable = 0;
  ganfw_data_info info;
  if (st == GANFW_ERR_IO && run && !session &&
      data_missing(run, data_msg, sizeof data_msg, &unreadable) &&
      nominal_data_info(ganfw_config_root(run->config), &info)) {
    ganfw_run_close(run);
    run = NULL;
    no_data = 1;
    int32_t level = ganfw_log_level(); /* the first attempt said its start-up lines */
    if (level < GANFW_LOG_WARN) ganfw_log_set_level(GANFW_LOG_WARN);
    st = prepare(cfg, &info, NULL, &run, &session);
    ganfw_log_set_level(level);
  }
  if (st == GANFW_OK) {
    if (no_data)
      fprintf(stderr,
              "ganfw: note: the data set is not there (%s); the config is valid, training "
              "needs the data\n",
              data_msg);
    printf("# %s: valid%s\n", args->operands[0],
           no_data ? " (the data set was not found: model checked for its nominal shape)" : "");
    st = ganfw_config_write_resolved(run->config, stdout);
  }
  /* data that is there but cannot be read makes the config unusable: exit 2 */
  if (unreadable) st = ganfw_error_wrap(GANFW_ERR_CONFIG, "the data set is there but unreadable");
  ganfw_session_close(session);
  ganfw_run_close(run);
  ganfw_run_config_free(cfg);
  return st == GANFW_OK ? EXIT_OK : cli_fail(st);
}

/* An out-of-memory failure of a run (its message recorded): the message, then what each
 * memory strategy would bring the peak to, planned after the run let go of its memory. */
/* The OOM message with the planner's advice; a training run's folder (out_dir not NULL)
 * also gets the flight recorder's oom/ files from the run's traced plan, which the message
 * names. */
static int fail_oom(const ganfw_run_config *cfg, const char *out_dir,
                    const ganfw_probe_result *plan) {
  static char msg[8192], advice[4096], written[4096 * 3];
  snprintf(msg, sizeof msg, "%s", ganfw_error_message());
  ganfw_oom_advice(cfg, advice, sizeof advice);
  fprintf(stderr, "ganfw: %s: %s%s\n", ganfw_status_name(GANFW_ERR_OOM), msg, advice);
  if (out_dir) {
    ganfw_status st = ganfw_oom_record(cfg, plan, out_dir, msg, advice, written, sizeof written);
    if (*written) fprintf(stderr, "ganfw: the failing step: %s\n", written);
    if (st != GANFW_OK)
      fprintf(stderr, "ganfw: the OOM flight recorder stopped: %s\n", ganfw_error_message());
    ganfw_error_clear();
  }
  return EXIT_RUNTIME;
}

/* The planner's prediction of a run's peaks, before anything is allocated (kept in *plan,
 * by layer and traced, for memory.html); memory.json compares it with the run's (its
 * "calibration"). Returns 1 when the plan was made (its verdict decides whether the run
 * starts: plan_fits_device, host_fits), 0 when it failed: the run reports that itself. */
static int predict(const ganfw_run_config *cfg, ganfw_probe_result *plan, ganfw_calibration *cal) {
  memset(cal, 0, sizeof *cal);
  const int made = ganfw_report_plan(cfg, plan) == GANFW_OK;
  if (made && !plan->oom) {
    cal->have = 1;
    cal->allocated = plan->peak_allocated;
    cal->reserved = plan->peak_reserved;
    memcpy(cal->category, plan->peak_category, sizeof cal->category);
  }
  ganfw_error_clear();
  return made;
}

#define MIB (1024.0 * 1024.0)

/* Whether the planned step fits the device, before anything is allocated: under
 * device.memory_limit the plan itself ran out (plan->oom); without one, a CUDA step must
 * fit the device's free memory (the CPU's memory is the host's: host_fits). When it does
 * not, the OOM message is recorded. */
static int plan_fits_device(const ganfw_probe_result *plan) {
  if (plan->oom) {
    ganfw_error_set(GANFW_ERR_OOM,
                    "planned before anything was allocated, the run does not fit "
                    "device.memory_limit %.2f MiB: it runs out in the %s: %s",
                    (double)plan->config_memory_limit / MIB, plan->oom_where, plan->oom_report);
    return 0;
  }
  if (plan->config_memory_limit == 0 && plan->device_type != GANFW_DEVICE_CPU &&
      plan->free_bytes > 0 && plan->peak_reserved > plan->free_bytes) {
    ganfw_error_set(GANFW_ERR_OOM,
                    "planned before anything was allocated, the step reserves %.2f MiB at its "
                    "peak, more than the %.2f MiB free on the device (of %.2f MiB)",
                    (double)plan->peak_reserved / MIB, (double)plan->free_bytes / MIB,
                    (double)plan->capacity / MIB);
    return 0;
  }
  return 1;
}

/* What a run holds beside its allocator's bytes, on the host: the run's outputs (a sample
 * grid, memory.json, a checkpoint's metadata) ... */
#define HOST_OUTPUTS_BYTES ((int64_t)32 << 20)
/* ... and, per thread, the part of its OpenBLAS buffer a product touches: its packed
 * panels (5.4 MiB for a 4096^3 sgemm on a Haswell build). */
#define BLAS_TOUCHED_BYTES ((int64_t)8 << 20)
/* A child measuring OpenBLAS's buffers that makes no progress for this long is stuck in
 * OpenBLAS's retry of a mapping that failed. */
#define BLAS_STALL_S 2.0

/* What the data loader holds: a batch per worker and the staging batch, and the workers'
 * stacks. */
static int64_t loader_bytes(const ganfw_session *s) {
  const ganfw_data_info *d = &s->data_info;
  const int64_t workers = s->loader_cfg.workers > 1 ? s->loader_cfg.workers : 1;
  const int64_t sample = (int64_t)d->channels * d->height * d->width * 4 + 12;
  size_t stack = 0;
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_getstacksize(&attr, &stack);
    pthread_attr_destroy(&attr);
  }
  return (workers + 1) * s->loader_cfg.batch_size * sample +
         (s->loader_cfg.prefetch ? workers * (int64_t)stack : 0);
}

/* " (/sys/fs/cgroup/x/memory.max)" for a limit read from a file, "" for an rlimit. */
static const char *limit_source(const ganfw_hostmem_limit *l, char *buf, size_t n) {
  if (l->source[0] == '/')
    snprintf(buf, n, " (%s)", l->source);
  else
    buf[0] = '\0';
  return buf;
}

/* The OOM message for the host limit `l` that the run's `need` does not fit, leaving
 * `room` bytes for the step. `blas` (NULL before the session exists) adds the threads'
 * part and a device.threads that would fit when fewer OpenBLAS buffers make the
 * difference; its `why` when the measuring child got stuck. */
static void host_message(const ganfw_hostmem_limit *l, const ganfw_hostmem_need *need,
                         const ganfw_blas_buffers *blas, int64_t loader, int64_t room) {
  char uses[200], parts[600], threads[200] = "", src[600], left[400];
  if (l->used > 0)
    snprintf(uses, sizeof uses, ", of which %.2f MiB %s now", (double)l->used / MIB,
             l->mapped ? "are mapped" : "are in use");
  else
    uses[0] = '\0';
  int len = snprintf(parts, sizeof parts, "%s %.2f MiB",
                     blas ? "the rest of the step's planned peak" : "the step's planned peak",
                     (double)need->step / MIB);
  if (blas)
    len += snprintf(parts + len, sizeof parts - (size_t)len,
                    ", %s %.2f MiB (%d threads), the data loader %.2f MiB",
                    l->mapped ? "OpenBLAS's buffers and the threads' stacks"
                              : "what OpenBLAS touches of its buffers",
                    (double)(l->mapped ? need->mapped : need->resident) / MIB, (int)blas->threads,
                    (double)loader / MIB);
  snprintf(parts + len, sizeof parts - (size_t)len, ", %.2f MiB for the run's outputs",
           (double)HOST_OUTPUTS_BYTES / MIB);
  if (blas && l->mapped && blas->threads > 1) {
    const int64_t per = need->mapped / blas->threads;
    int32_t k = blas->threads - 1;
    while (k >= 1 && room + (int64_t)(blas->threads - k) * per < need->step) k--;
    if (k >= 1)
      snprintf(threads, sizeof threads,
               ", use fewer threads (device.threads: %d fits; each maps %.2f MiB for OpenBLAS "
               "and its stack)",
               (int)k, (double)per / MIB);
  }
  len = blas && !blas->done ? snprintf(left, sizeof left, " (%s)", blas->why) : 0;
  if (room > 0)
    snprintf(left + len, sizeof left - (size_t)len, ". That leaves %.2f MiB for the step",
             (double)room / MIB);
  else
    snprintf(left + len, sizeof left - (size_t)len, ". Nothing is left for the step");
  ganfw_error_set(GANFW_ERR_OOM,
                  "on the CPU the host's memory is the device's, and %s%s allows %.2f MiB%s; the "
                  "run needs %.2f MiB more: %s%s: %s%s%s",
                  l->name, limit_source(l, src, sizeof src), (double)l->limit / MIB, uses,
                  (double)ganfw_hostmem_needed(l, need) / MIB, parts, left, l->how, threads,
                  room > 0 ? ", or make the step fit" : "");
}

/* RLIMIT_AS or RLIMIT_DATA, whichever leaves less room; NULL when neither is set. */
static const ganfw_hostmem_limit *tightest_mapped(const ganfw_hostmem *h) {
  const ganfw_hostmem_limit *as = &h->limit[GANFW_HOSTMEM_AS],
                            *data = &h->limit[GANFW_HOSTMEM_DATA];
  if (as->limit <= 0) return data->limit > 0 ? data : NULL;
  if (data->limit <= 0) return as;
  return as->limit - as->used <= data->limit - data->used ? as : data;
}

/* OpenBLAS's buffers (and the new threads' stacks) of `threads` threads, measured in a
 * child (blas_buffers.h). When the child got stuck after `held` buffers, those are
 * measured alone and the rest estimated from them (blas->done stays 0, its why kept).
 * Returns 0 when not even one buffer fits under `l` (the OOM message recorded), 1
 * otherwise; a child that cannot be started leaves the buffers unchecked (a warning). */
static int blas_need(int32_t threads, const ganfw_hostmem_limit *l, ganfw_blas_buffers *blas) {
  if (ganfw_cpu_blas_buffers_measure(threads, BLAS_STALL_S, blas) != GANFW_OK) {
    ganfw_log(GANFW_LOG_WARN, "OpenBLAS's buffers are not checked against %s: %s", l->name,
              ganfw_error_message());
    ganfw_error_clear();
    memset(blas, 0, sizeof *blas);
    blas->threads = threads;
    blas->done = 1; /* unknown: nothing to add, nothing to map */
    return 1;
  }
  ganfw_blas_buffers some;
  if (!blas->done && blas->held >= 1 &&
      ganfw_cpu_blas_buffers_measure(blas->held, BLAS_STALL_S, &some) == GANFW_OK && some.done) {
    blas->mapped = some.mapped / some.threads * threads;
    blas->data = some.data / some.threads * threads;
    return 1;
  }
  ganfw_error_clear();
  if (blas->done) return 1;
  ganfw_error_set(GANFW_ERR_OOM,
                  "on the CPU the host's memory is the device's, and %s allows %.2f MiB, of "
                  "which %.2f MiB are mapped now: %s. Nothing is left for the step: %s",
                  l->name, (double)l->limit / MIB, (double)l->used / MIB, blas->why, l->how);
  return 0;
}

/* Whether the run fits the host's limits (hostmem.h), on the CPU only: before the session
 * exists (s NULL) with the plan's whole peak, after it with the rest of the peak, the
 * OpenBLAS buffers of s's threads and the data loader. Under RLIMIT_AS or RLIMIT_DATA the
 * buffers are measured (blas_need; *measured 1 when they all fit: the caller maps them
 * before the first step). When the run does not fit, the OOM message is recorded and
 * *room is the bytes left for the step. */
static int host_fits(const ganfw_probe_result *plan, const ganfw_session *s, int64_t *room,
                     int *measured) {
  ganfw_hostmem h;
  ganfw_hostmem_read(&h);
  ganfw_hostmem_need need = {.step = plan->peak_reserved, .both = HOST_OUTPUTS_BYTES};
  ganfw_blas_buffers blas = {.threads = s ? s->ctx->threads : 1, .done = 1};
  int64_t loader = 0;
  const ganfw_hostmem_limit *mapped = tightest_mapped(&h);
  *room = 0;
  *measured = 0;
  if (s) {
    ganfw_alloc_stats as;
    ganfw_alloc_get_stats(s->ctx->alloc, &as);
    need.step =
        plan->peak_reserved > as.reserved.current ? plan->peak_reserved - as.reserved.current : 0;
    loader = loader_bytes(s);
    need.both += loader;
    need.resident = (int64_t)s->ctx->threads * BLAS_TOUCHED_BYTES;
    if (mapped && !blas_need(s->ctx->threads, mapped, &blas)) return 0;
    need.mapped = blas.mapped > blas.data ? blas.mapped : blas.data;
    *measured = mapped && blas.done && blas.mapped > 0;
  }
  int32_t which = ganfw_hostmem_check(&h, &need, room);
  if (which < 0 && !blas.done) { /* the child got stuck though the estimate fits */
    which = (int32_t)(mapped - h.limit);
    *room = mapped->limit - mapped->used - (ganfw_hostmem_needed(mapped, &need) - need.step);
  }
  if (which < 0) return 1;
  host_message(&h.limit[which], &need, s ? &blas : NULL, loader, *room);
  return 0;
}

/* The OOM message host_fits recorded, with the planner's advice under the `room` bytes the
 * host's limit leaves for the step (planned as device.memory_limit=room). */
static int fail_host(const ganfw_run_config *cfg, int64_t room) {
  static char msg[8192], advice[4096];
  snprintf(msg, sizeof msg, "%s", ganfw_error_message());
  advice[0] = '\0';
  if (room > 0) {
    char limit[64];
    const char *set = limit;
    ganfw_run_config *limited = NULL;
    snprintf(limit, sizeof limit, "device.memory_limit=%lld", (long long)room);
    if (ganfw_run_config_derive(cfg, &set, 1, &limited) == GANFW_OK)
      ganfw_oom_advice(limited, advice, sizeof advice);
    ganfw_run_config_free(limited);
  }
  fprintf(stderr, "ganfw: %s: %s%s%s\n", ganfw_status_name(GANFW_ERR_OOM), msg, room > 0 ? ":" : "",
          advice);
  ganfw_error_clear();
  return EXIT_RUNTIME;
}

/* A CPU plan without a memory_limit that ran out itself: the planner's own host memory
 * (its trace, the shapes' bookkeeping) was refused, so the process's limits leave less
 * than planning takes, let alone the step. The tightest of them is named. */
static int fail_planning_host(const ganfw_probe_result *plan) {
  ganfw_hostmem h;
  ganfw_hostmem_read(&h);
  const ganfw_hostmem_limit *l = ganfw_hostmem_tightest(&h);
  if (l)
    ganfw_error_set(GANFW_ERR_OOM,
                    "on the CPU the host's memory is the device's, and planning the run already "
                    "ran out of it (%s: %s): %s allows %.2f MiB, of which %.2f MiB are %s now; "
                    "%s",
                    plan->oom_where, plan->oom_report, l->name, (double)l->limit / MIB,
                    (double)l->used / MIB, l->mapped ? "mapped" : "in use", l->how);
  else
    ganfw_error_set(GANFW_ERR_OOM,
                    "on the CPU the host's memory is the device's, and planning the run already "
                    "ran out of it (%s: %s); free memory on this machine",
                    plan->oom_where, plan->oom_report);
  return cli_fail(GANFW_ERR_OOM);
}

/* A run that the plan refused before anything was allocated: the OOM message and advice,
 * and the flight recorder's oom/ files in the run folder (made for them; rank 0 only). */
static int fail_planned(const ganfw_run_config *cfg, const ganfw_probe_result *plan) {
  static char msg[8192], out_dir[4096];
  snprintf(msg, sizeof msg, "%s", ganfw_error_message());
  ganfw_run *run = NULL;
  out_dir[0] = '\0';
  if (ganfw_dist_world_rank() == 0 && ganfw_run_open(cfg, &run) == GANFW_OK && run->out_dir &&
      ganfw_mkdirs(run->out_dir) == GANFW_OK)
    snprintf(out_dir, sizeof out_dir, "%s", run->out_dir);
  ganfw_run_close(run);
  ganfw_error_set(GANFW_ERR_OOM, "%s", msg);
  return fail_oom(cfg, *out_dir ? out_dir : NULL, plan);
}

/* <out_dir>/memory.html after a run: its own last traced step when it was traced, else the
 * planned step, and the plan's by-layer table. Not written is a failure of the run, as for
 * every other output (GANFW_ERR_IO naming the file). */
static ganfw_status run_report(const cli_args *args, const char *out_dir,
                               const ganfw_probe_result *plan) {
  char path[4200], html[4200];
  ganfw_trace_event *ev = NULL;
  char *names = NULL;
  int64_t n = 0, first = 0, count = 0;
  snprintf(path, sizeof path, "%s/memory.json", out_dir);
  snprintf(html, sizeof html, "%s/memory.html", out_dir);
  ganfw_report_part part = {.name = args->operands[0], .plan = plan->n_layers ? plan : NULL};
  if (ganfw_trace_read_memory_json(path, &ev, &n, &names) == GANFW_OK &&
      ganfw_trace_find_step(ev, n, 0, &first, &count) == GANFW_OK) {
    part.ev = ev + first;
    part.n = count;
    part.caption = "the run's last traced step (device.trace)";
  } else if (ganfw_trace_find_step(plan->trace, plan->n_trace, 2, &first, &count) == GANFW_OK) {
    part.ev = plan->trace + first;
    part.n = count;
    part.caption = "the planned step (device.trace: true draws the run's own)";
  }
  ganfw_error_clear();
  char title[4300];
  snprintf(title, sizeof title, "ganfw memory: %s", out_dir);
  ganfw_status st = ganfw_report_write_html(html, title, &part, 1, NULL, 0);
  free(ev);
  free(names);
  return st;
}

/* Whether the plan lets the run start: a step that does not fit the device, or on the CPU
 * the host's limits, is refused before anything is allocated (the message and advice
 * printed, *rc the exit code). */
static int plan_allows(const ganfw_run_config *cfg, const ganfw_probe_result *plan, int *rc) {
  int64_t room = 0;
  int measured = 0;
  if (plan->oom && plan->config_memory_limit == 0 && plan->device_type == GANFW_DEVICE_CPU) {
    *rc = fail_planning_host(plan);
    return 0;
  }
  if (!plan_fits_device(plan)) {
    *rc = fail_planned(cfg, plan);
    return 0;
  }
  if (plan->device_type == GANFW_DEVICE_CPU && !host_fits(plan, NULL, &room, &measured)) {
    *rc = fail_host(cfg, room);
    return 0;
  }
  return 1;
}

/* On the CPU, once the session's own bytes are counted as they are: the rest of the step,
 * OpenBLAS's buffers and the loader against the host's limits, and OpenBLAS's buffers
 * mapped when they were measured (a shortfall later is the allocator's, which says so).
 * On a shortfall the session and run are closed (NULL), the message printed, *rc the exit
 * code. */
static int host_allows(const ganfw_run_config *cfg, const ganfw_probe_result *plan, ganfw_run **run,
                       ganfw_session **session, int *rc) {
  int64_t room = 0;
  int measured = 0;
  if ((*session)->ctx->device_type != GANFW_DEVICE_CPU) return 1;
  if (host_fits(plan, *session, &room, &measured)) {
    if (measured) ganfw_cpu_blas_buffers_map((*session)->ctx->threads);
    return 1;
  }
  static char msg[8192];
  snprintf(msg, sizeof msg, "%s", ganfw_error_message());
  ganfw_session_close(*session);
  ganfw_run_close(*run);
  *session = NULL;
  *run = NULL;
  ganfw_error_set(GANFW_ERR_OOM, "%s", msg);
  *rc = fail_host(cfg, room);
  return 0;
}

/* The run of `cfg` that the plan (`planned`: made) allowed to start, with the OOM advice
 * and recorder when it runs out of memory; returns the exit code. */
static int train_planned(const cli_args *args, const ganfw_run_config *cfg,
                         ganfw_probe_result *plan, int planned, const ganfw_calibration *cal) {
  ganfw_run *run = NULL;
  ganfw_session *session = NULL;
  int rc = EXIT_OK;
  ganfw_status st = prepare(cfg, NULL, plan->planned ? &plan->layout.l : NULL, &run, &session);
  if (st == GANFW_OK && planned && !host_allows(cfg, plan, &run, &session, &rc)) return rc;
  if (st == GANFW_OK) session->predicted = *cal;
  if (st == GANFW_OK) st = ganfw_train(session);
  static char oom_msg[8192], out_dir[4096];
  if (st == GANFW_ERR_OOM) snprintf(oom_msg, sizeof oom_msg, "%s", ganfw_error_message());
  /* the run folder exists: memory.html, or on an OOM the flight recorder, go into it */
  const int in_run = session && run && run->out_dir;
  if (in_run) snprintf(out_dir, sizeof out_dir, "%s", run->out_dir);
  ganfw_session_close(session);
  ganfw_run_close(run);
  if (st == GANFW_OK && in_run) st = run_report(args, out_dir, plan);
  if (st == GANFW_ERR_OOM) { /* advice needs the memory back first */
    ganfw_error_set(GANFW_ERR_OOM, "%s", oom_msg);
    return fail_oom(cfg, in_run ? out_dir : NULL, plan);
  }
  return st == GANFW_OK ? EXIT_OK : cli_fail(st);
}

/* `ganfw CONFIG`: the config read once, for the plan and the run; the plan decides first
 * (plan_allows, then host_allows with the session made), then the run. */
static int cmd_train(cli_args *args) {
  ganfw_run_config *file = NULL, *cfg = NULL;
  ganfw_status st = ganfw_run_config_open(args->operands[0], args->sets, args->nsets, &file);
  if (st == GANFW_OK) st = ganfw_fit_auto(file, NULL, &cfg); /* memory: [{plugin: auto}] */
  if (st != GANFW_OK) {
    ganfw_run_config_free(file);
    return cli_fail(st);
  }
  if (!cfg) cfg = file, file = NULL;
  ganfw_calibration cal;
  ganfw_probe_result plan;
  int rc = EXIT_OK;
  const int planned = predict(cfg, &plan, &cal);
  if (!planned || plan_allows(cfg, &plan, &rc)) rc = train_planned(args, cfg, &plan, planned, &cal);
  ganfw_probe_result_free(&plan);
  ganfw_run_config_free(cfg);
  ganfw_run_config_free(file);
  return rc;
}

static int cmd_plan(cli_args *args) {
  const char *config = args->operands[0];
  ganfw_run_config *file = NULL, *cfg = NULL;
  ganfw_status st = ganfw_run_config_open(config, args->sets, args->nsets, &file);
  if (st == GANFW_OK) st = ganfw_fit_auto(file, NULL, &cfg); /* memory: [{plugin: auto}] */
  if (st != GANFW_OK) {
    ganfw_run_config_free(file);
    return cli_fail(st);
  }
  if (!cfg) cfg = file, file = NULL;
  ganfw_probe_result plan, real;
  memset(&real, 0, sizeof real);
  st = ganfw_plan_make(cfg, 0, NULL, &plan);
  if (st == GANFW_OK) ganfw_plan_print(config, &plan, stdout);
  if (st == GANFW_OK && !plan.oom && plan.planned) ganfw_plan_print_layout(&plan.layout, stdout);
  if (st == GANFW_OK && !plan.oom && !plan.planned) {
    ganfw_probe_result traced; /* the arena a planned layout would use */
    if (ganfw_report_plan(cfg, &traced) == GANFW_OK) ganfw_plan_print_arena(&traced, stdout);
    ganfw_error_clear();
    ganfw_probe_result_free(&traced);
  }
  if (st == GANFW_OK && args->measure) {
    fflush(stdout);
    char *summary = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&summary, &len);
    st = ganfw_plan_measure(cfg, &plan, mem, &real);
    if (mem) fclose(mem);
    if (st == GANFW_OK) ganfw_plan_print_vs(&plan, &real, stdout);
    if (st == GANFW_OK && summary && *summary)
      printf("\nThe allocator after the real step:\n%s", summary);
    free(summary);
  }
  if (st == GANFW_OK && args->plan_plot) {
    ganfw_plot_args pa = {.source = config, .output = args->plan_plot, .config = cfg};
    fflush(stdout);
    st = ganfw_plot(&pa, stdout, NULL);
  }
  ganfw_probe_result_free(&plan);
  ganfw_probe_result_free(&real);
  ganfw_run_config_free(cfg);
  ganfw_run_config_free(file);
  return st == GANFW_OK ? EXIT_OK : cli_fail(st);
}

/* find-batch --fit: planned only, nothing confirmed. Exit code 1 when no batch fits. */
static int cmd_find_batch_fit(cli_args *args) {
  if (!args->fit_budget)
    return cli_usage_error(args->command, "%s", "--fit needs --budget (6GiB, 512MiB, 60%)");
  ganfw_run_config *cfg = NULL;
  ganfw_status st = ganfw_run_config_open(args->operands[0], args->sets, args->nsets, &cfg);
  if (st != GANFW_OK) return cli_fail(st);
  int64_t batch = 0;
  st = ganfw_fit_find_batch(cfg, &args->fit, args->find.max_batch, &batch, stdout);
  ganfw_run_config_free(cfg);
  if (st != GANFW_OK) return cli_fail(st);
  return batch > 0 ? EXIT_OK : EXIT_RUNTIME;
}

/* Exit code 1 when nothing fits the budget (the message names the smallest budget that
 * does) or the confirming run went over it; 2 for a bad budget. */
static int cmd_fit(cli_args *args) {
  if (!args->fit_budget)
    return cli_usage_error(args->command, "%s", "--budget is required (6GiB, 512MiB, 60%)");
  ganfw_run_config *cfg = NULL;
  ganfw_status st = ganfw_run_config_open(args->operands[0], args->sets, args->nsets, &cfg);
  if (st != GANFW_OK) return cli_fail(st);
  ganfw_fit_result res;
  st = ganfw_fit(cfg, &args->fit, &res, stdout);
  int rc = EXIT_OK;
  if (st != GANFW_OK)
    rc = cli_fail(st);
  else if (res.confirmed && !res.confirm_fits)
    rc = EXIT_RUNTIME;
  ganfw_fit_result_free(&res);
  ganfw_run_config_free(cfg);
  return rc;
}

/* Exit code 1 when no batch size fits or the confirming step ran out of memory. */
static int cmd_find_batch(cli_args *args) {
  if (args->find_fit) return cmd_find_batch_fit(args);
  ganfw_run_config *cfg = NULL;
  ganfw_status st = ganfw_run_config_open(args->operands[0], args->sets, args->nsets, &cfg);
  if (st != GANFW_OK) return cli_fail(st);
  ganfw_find_batch_result *res = malloc(sizeof *res);
  if (!res) {
    ganfw_run_config_free(cfg);
    return cli_fail(ganfw_error_set(GANFW_ERR_OOM, "out of host memory"));
  }
  st = ganfw_find_batch(cfg, &args->find, res, stdout);
  int rc = EXIT_OK;
  if (st != GANFW_OK)
    rc = cli_fail(st);
  else if (res->batch == 0 || (res->confirmed && res->real.oom))
    rc = EXIT_RUNTIME;
  ganfw_find_batch_free(res);
  free(res);
  ganfw_run_config_free(cfg);
  return rc;
}

/* Exit code 0 when the table is complete, OOM rows included; 1 when a config failed
 * otherwise (its row says why). */
static int cmd_compare(cli_args *args) {
  const int nconfigs = args->noperands;
  const int n = nconfigs * (args->compare.n_layouts > 0 ? args->compare.n_layouts : 1);
  ganfw_compare_row *rows = calloc((size_t)n, sizeof *rows);
  if (!rows) return cli_fail(ganfw_error_set(GANFW_ERR_OOM, "out of host memory"));
  ganfw_status st = ganfw_compare_run(args->operands, nconfigs, args->sets, args->nsets,
                                      &args->compare, rows, stderr);
  if (st == GANFW_OK) ganfw_compare_print(rows, n, stdout);
  const int writes = ganfw_dist_world_rank() == 0; /* under mpirun rank 0 writes the files */
  if (st == GANFW_OK && writes && args->csv) st = ganfw_compare_write_csv(rows, n, args->csv);
  if (st == GANFW_OK && writes && args->json) st = ganfw_compare_write_json(rows, n, args->json);
  if (st == GANFW_OK && writes && args->html) st = ganfw_compare_write_html(rows, n, args->html);
  int failed = 0;
  for (int i = 0; i < n; i++) failed |= rows[i].status != GANFW_OK;
  ganfw_compare_rows_free(rows, n);
  free(rows);
  if (st != GANFW_OK) return cli_fail(st);
  return failed ? EXIT_RUNTIME : EXIT_OK;
}

static int cmd_eval(cli_args *args) {
  args->eval.source = args->operands[0];
  args->eval.sets = args->sets;
  args->eval.nsets = args->nsets;
  ganfw_status st = ganfw_eval(&args->eval, stdout);
  return st == GANFW_OK ? EXIT_OK : cli_fail(st);
}

static int cmd_prune(cli_args *args) {
  args->prune.source = args->operands[0];
  args->prune.sets = args->sets;
  args->prune.nsets = args->nsets;
  ganfw_status st = ganfw_prune_tool(&args->prune, stdout);
  return st == GANFW_OK ? EXIT_OK : cli_fail(st);
}

static int cmd_score(cli_args *args) {
  if (!args->score.classifier)
    return cli_usage_error(args->command, "%s needs --classifier RUN_DIR|CHECKPOINT", "score");
  args->score.source = args->operands[0];
  ganfw_score_result res;
  ganfw_status st = ganfw_score(&args->score, &res, stdout);
  return st == GANFW_OK ? EXIT_OK : cli_fail(st);
}

static int cmd_plot(cli_args *args) {
  args->plot.source = args->operands[0];
  args->plot.sets = args->sets;
  args->plot.nsets = args->nsets;
  ganfw_status st = ganfw_plot(&args->plot, stdout, NULL);
  return st == GANFW_OK ? EXIT_OK : cli_fail(st);
}

static int cmd_sample(cli_args *args) {
  args->sample.source = args->operands[0];
  ganfw_status st = ganfw_sample(&args->sample);
  return st == GANFW_OK ? EXIT_OK : cli_fail(st);
}

/* --- the table ----------------------------------------------------------------------------- */

/* launch -n N */
static int launch_option(cli_args *a, const char *opt, const char *value, int *took) {
  long long n = 0;
  if (strcmp(opt, "-n") != 0 && strcmp(opt, "--np") != 0) return CLI_OPT_UNKNOWN;
  const char *v = need_value(a, opt, value, took);
  if (!v) return EXIT_USAGE;
  if (!parse_whole(v, 1, 4096, &n))
    return cli_usage_error(a->command, "bad value for -n: '%s' (ranks, 1..4096)", v);
  a->launch_ranks = (int32_t)n;
  return CLI_OPT_TAKEN;
}

/* The folder of PATH holding an executable `name`, into dir; 0 when none does. */
static int on_path(const char *name, char *dir, size_t n) {
  const char *path = getenv("PATH");
  for (const char *p = path; p && *p;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len > 0 && len + strlen(name) + 2 < n) {
      snprintf(dir, n, "%.*s/%s", (int)len, p, name);
      if (access(dir, X_OK) == 0) return 1;
    }
    p += len + (colon ? 1 : 0);
  }
  return 0;
}

/* launch: the signal that came (SIGINT, SIGTERM). mpirun has a process group of its own,
 * so a terminal's Ctrl-C reaches it only through us: the first signal goes on as SIGUSR1
 * (Ctrl-C) or SIGUSR2 (SIGTERM), which mpirun passes to every rank at once and the ranks
 * take as the signal itself (finish the step, checkpoint, stop); a second one as itself,
 * which has mpirun end the job. */
static volatile sig_atomic_t launch_signal, launch_count;
static volatile pid_t launch_child;

static int launch_as(int sig) {
  return launch_count > 1 ? sig : sig == SIGINT ? SIGUSR1 : SIGUSR2;
}

static void launch_forward(int sig) {
  if (!launch_signal) launch_signal = sig;
  launch_count++;
  if (launch_child > 0) kill(launch_child, launch_as(sig));
}

/* Runs mpirun and waits for it: its exit code, or 128 + the signal that stopped the job
 * (130 for Ctrl-C, 143 for SIGTERM: the ranks wrote their checkpoint), as one process. */
static int launch_wait(const char *mpirun, char **argv) {
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = launch_forward;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    execv(mpirun, argv);
    fprintf(stderr, "ganfw: I/O error: launch: cannot run %s: %s\n", mpirun, strerror(errno));
    _exit(EXIT_RUNTIME);
  }
  if (pid < 0) return cli_fail(ganfw_error_set(GANFW_ERR_IO, "launch: fork: %s", strerror(errno)));
  setpgid(pid, pid);
  launch_child = pid;
  if (launch_signal) kill(pid, launch_as(launch_signal)); /* one before the child existed */
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  launch_child = 0;
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!launch_signal || (code != 0 && code != 128 + launch_signal && code != 1)) return code;
  return 128 + launch_signal; /* the ranks stopped for it (0 from each, see main.c) */
}

/* mpirun -np N [--oversubscribe] [--allow-run-as-root] --stdin none -x GANFW_LAUNCHED=1
 * <this ganfw> <the arguments less `launch` and -n N>: as torchrun starts
 * DistributedDataParallel's processes. Signals go on as SIGUSR1/2 (launch_forward): Open
 * MPI's own SIGTERM reaches the ranks only after odls_base_sigkill_timeout and kills them
 * that long later, so raising the timeout delays the stop instead of protecting it
 * (measured: 20 s gave the ranks the signal about 35 s late). */
static int cmd_launch(cli_args *args) {
  char mpirun[4096], self[4096];
  if (!on_path("mpirun", mpirun, sizeof mpirun))
    return cli_fail(ganfw_error_set(
        GANFW_ERR_UNSUPPORTED,
        "launch: mpirun is not on PATH: install Open MPI (Debian: apt-get install openmpi-bin "
        "libopenmpi-dev; scripts/deps.sh does) and build ganfw again so that it finds MPI"));
#ifndef GANFW_HAVE_MPI
  return cli_fail(ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                                  "launch: this ganfw was built without MPI: install "
                                  "libopenmpi-dev, then configure and build again"));
#endif
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0)
    snprintf(self, sizeof self, "%s", cli_argv[0]);
  else
    self[len] = '\0';
  const int32_t n = args->launch_ranks > 0 ? args->launch_ranks : 1;
  char np[16];
  snprintf(np, sizeof np, "%d", (int)n);
  char **argv = calloc((size_t)cli_argc + 16, sizeof *argv);
  if (!argv) return cli_fail(ganfw_error_set(GANFW_ERR_OOM, "out of host memory"));
  int k = 0;
  argv[k++] = "mpirun"; /* not its path: Open MPI reads an absolute argv[0] as --prefix */
  argv[k++] = "-np";
  argv[k++] = np;
  if (n > (int32_t)sysconf(_SC_NPROCESSORS_ONLN)) argv[k++] = "--oversubscribe";
  if (geteuid() == 0) argv[k++] = "--allow-run-as-root";
  argv[k++] = "--stdin";
  argv[k++] = "none";
  argv[k++] = "-x";
  argv[k++] = "GANFW_LAUNCHED=1";
  argv[k++] = self;
  int skipped_launch = 0;
  for (int i = 1; i < cli_argc; i++) {
    const char *a = cli_argv[i];
    if (!skipped_launch && strcmp(a, "launch") == 0) {
      skipped_launch = 1;
      continue;
    }
    if (strcmp(a, "-n") == 0 || strcmp(a, "--np") == 0) {
      i++;
      continue;
    }
    argv[k++] = cli_argv[i];
  }
  argv[k] = NULL;
  const int code = launch_wait(mpirun, argv);
  free(argv);
  return code;
}

const cli_command cli_commands[] = {
    {"train", "[train] [options] CONFIG [--trace]", "train the model a config describes",
     "  --trace   record the allocator's events of the first steps (device.trace): memory.json,\n"
     "            trace.json for ui.perfetto.dev, `ganfw plot RUN_DIR`\n",
     "a config file", 0, train_option, cmd_train},
    {"launch", "launch -n N [options] CONFIG",
     "train on N ranks data-parallel: runs `mpirun -np N ganfw CONFIG` (with --oversubscribe\n"
     "past the cores, --allow-run-as-root as root); options after it go to every rank",
     "  -n N   the number of ranks (processes), default 1\n"
     "Ctrl-C and SIGTERM reach every rank at once (as SIGUSR1, SIGUSR2): each finishes its\n"
     "step, the checkpoint is written, and launch exits 130 or 143 as one process does\n",
     "a config file", 0, launch_option, cmd_launch},
    {"validate", "validate [options] CONFIG",
     "check a config (keys, values, plugins, model shapes) without training, print it\n"
     "resolved; exit 0 when valid, also when only the data set is missing (one line says so)",
     NULL, "a config file", 0, NULL, cmd_validate},
    {"plugins", "plugins [--plugin-path DIR] [--timeout S]",
     "list the plugins found, each loaded in a child process: one that crashes or hangs while\n"
     "loading is listed as broken; exit 0 when every file loads, 2 when any is an error or broken",
     "  --plugin-path DIR  search DIR first (repeatable)\n"
     "  --timeout S        seconds a file may take to load before it is listed as hanging\n"
     "                     (default 10)\n",
     NULL, 0, plugins_option, cmd_plugins},
    {"sample",
     "sample RUN_DIR|CHECKPOINT [-n 64] [-o grid.png] [--seed S] [--nrow 8] [--class K]\n"
     "                  [--no-ema] [--config CONFIG]",
     "images from a trained generator",
     "  -n N        images (1 to 1024, default 64)\n"
     "  -o FILE     the PNG grid (default samples.png)\n"
     "  --seed S    noise seed (default: the run's)\n"
     "  --nrow N    images per row (default 8)\n"
     "  --no-ema    the raw generator, not its average (train.ema)\n"
     "  --class K   a conditional model: every image of class K (default: one class a row)\n"
     "  --config C  build the generator from config C, not the run's; a checkpoint without\n"
     "              ganfw's metadata (PyTorch's state_dict under ganfw's names) needs it\n",
     "a run folder or checkpoint", 0, sample_option, cmd_sample},
    {"score",
     "score RUN_DIR|CHECKPOINT --classifier RUN_DIR|CHECKPOINT [-n 10000] [--seed S]\n"
     "                  [--batch 500] [--fid-real N] [--no-fid] [--no-ema] [--per-class]\n"
     "                  [--config CONFIG]",
     "a generator judged by a classifier: mean confidence, class entropy, inception score\n"
     "and the Frechet distance on the classifier's penultimate features against its real\n"
     "test split (not comparable to Inception-v3 FID figures)",
     "  --classifier RUN_DIR|CHECKPOINT  the classifier (required)\n"
     "  -n N                             generated images (default 10000)\n"
     "  --seed S                         noise seed\n"
     "  --batch N                        images per batch (default 500)\n"
     "  --fid-real N                     real test images for the distance (default: all)\n"
     "  --no-fid                         skip the distance and the pass over the test split\n"
     "  --no-ema                         the raw generator, not its average (train.ema)\n"
     "  --per-class                      a conditional generator: the accuracy of each class\n"
     "  --config CONFIG                  the generator's config, not its run's; a checkpoint\n"
     "                                   without ganfw's metadata (a PyTorch state_dict\n"
     "                                   under ganfw's names) needs it\n",
     "a run folder or checkpoint", 0, score_option, cmd_score},
    {"eval", "eval CONFIG|RUN_DIR [--checkpoint PATH] [--batch N]",
     "a classifier's test accuracy, loss and confusion matrix (best checkpoint, else the\n"
     "latest)",
     "  --checkpoint PATH  the checkpoint to evaluate: a ganfw checkpoint, or a PyTorch\n"
     "                     state_dict saved with safetensors (as model.init_from takes it)\n"
     "  --batch N          images per batch (1 to 1048576)\n",
     "a config or run folder", 0, eval_option, cmd_eval},
    {"prune",
     "prune RUN_DIR|CHECKPOINT (--amount A | --sweep A,B,..) -o OUT [--method M]\n"
     "                  [--structured] [--importance l1|l2|bn_gamma] [--layers L1,L2]\n"
     "                  [--remove] [--finetune N] [--distill] [--steps N] [--dry-run]\n"
     "                  [--config CONFIG]",
     "a trained model pruned into a new model folder (config.yaml, model.safetensors): masks\n"
     "as torch.nn.utils.prune, or channels removed for a smaller, faster model; --sweep prints\n"
     "parameters, planned and measured peak memory, step time and test accuracy per amount",
     "  --amount A      the fraction pruned, in [0, 1) (masks: or a count of weights)\n"
     "  --sweep A,B,..  several amounts, each into OUT/amount_A, and the table (OUT/sweep.md)\n"
     "  --method M      l1_unstructured (default), global_unstructured, ln_structured (masks\n"
     "                  of whole output channels), channels (removes them: --structured)\n"
     "  --importance I  channels and ln_structured: l1 (default), l2, bn_gamma (BatchNorm's\n"
     "                  |gamma|, network slimming; channels only)\n"
     "  --layers L,..   only these layers (NET:layer for a model of several nets); channels:\n"
     "                  the groups these layers produce\n"
     "  --remove        masks: write plain weights (prune.remove), not weight_orig and mask\n"
     "  --finetune N    train each pruned model N epochs (into OUT/.../run) before its\n"
     "                  accuracy is measured again; --set applies to these runs\n"
     "  --distill       a classifier: also write OUT/distill.yaml, the unpruned model\n"
     "                  (frozen) teaching the pruned one (the distill trainer: alpha 0.9,\n"
     "                  T 4); --finetune then trains with it (into OUT/.../run_distill)\n"
     "  --steps N       measured steps per row of the table (default 5)\n"
     "  --dry-run       channels: list the dependency groups and widths, write nothing\n"
     "  --config C      build the model from C, not the run's config.resolved.yaml\n",
     "a run folder or checkpoint", 0, prune_option, cmd_prune},
    {"plan", "plan [options] CONFIG [--measure]",
     "peak memory from shapes alone, per category, phase and layer",
     "  --measure    also run one real step and compare\n"
     "  --ranks N    one rank's bytes in a data-parallel run of N ranks (mpirun -np N):\n"
     "               its rows of the batch, gradient buckets (comm), zero's shard\n"
     "  --plot FILE  also draw the planned step's memory over time (.png, .svg; .json: a\n"
     "               Chrome trace), as `ganfw plot CONFIG -o FILE`\n",
     "a config file", 0, plan_option, cmd_plan},
    {"plot", "plot [options] RUN_DIR|CONFIG [-o step.png] [--step N] [--measure]",
     "one step's memory over time: live bytes stacked by category, the phases, reserved,\n"
     "the peak and who held it; from a traced run (device.trace) or from a config's plan",
     "  -o FILE     .png or .svg (a picture of one step), .json (every traced step as a\n"
     "              Chrome trace for ui.perfetto.dev); default step.png\n"
     "  --step N    the step to draw (default: a run's last traced step, a config's step 2)\n"
     "  --measure   a CONFIG: trace a real step on its device instead of the plan\n",
     "a run folder or config file", 0, plot_option, cmd_plot},
    {"find-batch",
     "find-batch [options] CONFIG [--margin 0.05] [--no-confirm] [--max-batch N]\n"
     "                       [--fit --budget B]",
     "the largest batch that fits the device budget and the data set",
     "  --margin F     keep this fraction of the budget free (0 to 0.9, default 0.05)\n"
     "  --no-confirm   do not confirm the result with a real step\n"
     "  --max-batch N  search no higher (default 1048576; the data set's size caps it too)\n"
     "  --fit          with fit's strategies allowed (precision, checkpoint, ...; not\n"
     "                 accumulation, under which any batch fits) under --budget B: the\n"
     "                 largest batch some setup fits, and the smallest such setup\n"
     "  --budget B     as fit's (bytes or a percentage)\n",
     "a config file", 0, find_batch_option, cmd_find_batch},
    {"fit",
     "fit [options] CONFIG --budget BYTES|P% [-o FILE] [--allow-batch] [--no-confirm]\n"
     "                [--show-calibration] [--plot FILE.svg] [--html FILE]",
     "the fastest setup that fits a memory budget: every combination of precision (amp\n"
     "f16/bf16), micro-batches, checkpoint segments (and recompute, adam8bit,\n"
     "step_in_backward where installed) planned on the meta backend, timed by a model\n"
     "calibrated once by real steps and cached; writes a config that extends CONFIG",
     "  --budget B          bytes (6GiB, 512MiB, 12MB, 1048576) or a percentage of\n"
     "                      device.memory_limit, else of the device's capacity (60%)\n"
     "  -o FILE             the config to write (default <config stem>_fit.yaml here)\n"
     "  --allow-batch       halve the batch while no setup fits it\n"
     "  --no-confirm        skip the confirming run of 5 real steps under the budget\n"
     "  --show-calibration  print the time model's table (also when it was cached)\n"
     "  --plot FILE.svg     draw the candidates: peak allocated against predicted time,\n"
     "                      the Pareto front, the chosen one and the budget\n"
     "  --html FILE         a memory report: the front and the tables, then the chosen\n"
     "                      config's planned step (timeline, who holds the peak)\n"
     "  --calib-steps N     measured steps per calibration run (default 3)\n"
     "The calibration is cached in $XDG_CACHE_HOME/ganfw (else ~/.cache/ganfw), keyed by\n"
     "the resolved config, the device and the CPU\n",
     "a config file", 0, fit_option, cmd_fit},
    {"compare",
     "compare [options] A.yaml B.yaml ... [--steps 10] [--warmup 2] [--csv F]\n"
     "                    [--json F] [--html F] [--layouts caching,planned]",
     "memory, speed and losses side by side",
     "  --steps N    timed steps per config (default 10)\n"
     "  --warmup N   untimed steps first (default 2)\n"
     "  --layouts L  run each config with each device.memory_layout of L (caching,\n"
     "               planned or both), the rows side by side (default: as configured)\n"
     "  --csv F      also write the table as CSV\n"
     "  --json F     also write it as JSON\n"
     "  --html F     also write a memory report: the table, each config's planned step\n"
     "               and who holds its peak (one page, no network)\n",
     "config files", 1, compare_option, cmd_compare},
};

const int cli_n_commands = (int)(sizeof cli_commands / sizeof cli_commands[0]);
