/* `ganfw prune`: loads a trained model, prunes it (masks: nn/prune.h; channels:
 * nn/prune_channels.h) and writes each pruned model as a folder that any command takes
 * (config.yaml, which extends the source's config, and model.safetensors); for a sweep or a
 * fine-tune, the table of what each amount keeps and costs. */
#include "tools/prune_tool.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/log.h"
#include "config/config.h"
#include "io/checkpoint.h"
#include "io/checkpoint_meta.h"
#include "io/prune_file.h"
#include "nn/net.h"
#include "nn/prune.h"
#include "nn/prune_channels.h"
#include "runtime/alloc.h"
#include "tools/compare.h"
#include "tools/eval.h"
#include "tools/plan.h"
#include "tools/sample.h"
#include "train/loop.h"
#include "train/outputs.h"
#include "train/run.h"
#include "train/session.h"
#include "train/train_program.h"

static const char *const method_names[GANFW_PRUNE_METHOD_COUNT] = {
    "l1_unstructured", "global_unstructured", "ln_structured", "channels"};

const char *ganfw_prune_method_name(int32_t method) {
  return method >= 0 && method < GANFW_PRUNE_METHOD_COUNT ? method_names[method] : NULL;
}

int32_t ganfw_prune_method_parse(const char *name) {
  for (int32_t i = 0; name && i < GANFW_PRUNE_METHOD_COUNT; i++)
    if (strcmp(name, method_names[i]) == 0) return i;
  return -1;
}

/* --- the source ------------------------------------------------------------------------- */

/* The source model with its weights loaded: the run, the session (without data) and where
 * they came from. */
typedef struct source {
  char config[4200], ckpt[4200];
  ganfw_data_info info;
  ganfw_run *run;
  ganfw_session *s;
} source;

static void source_close(source *src) {
  ganfw_session_close(src->s);
  ganfw_run_close(src->run);
  src->s = NULL;
  src->run = NULL;
}

/* Opens the source's config and loads the checkpoint into every net of its model. */
static ganfw_status source_open(const ganfw_prune_args *a, source *src) {
  ganfw_status st = ganfw_sample_source(a->source, a->config, src->config, sizeof src->config,
                                        src->ckpt, sizeof src->ckpt, &src->info, &src->run);
  if (st == GANFW_OK) st = ganfw_session_open(src->run, 0, &src->info, &src->s);
  if (st != GANFW_OK) {
    source_close(src);
    return st;
  }
  ganfw_ckpt_net nets[GANFW_MAX_NETS];
  const int32_t n = src->s->n_nets;
  for (int32_t i = 0; i < n; i++)
    nets[i] = (ganfw_ckpt_net){.net = src->s->nets[i].net, .prefix = src->s->nets[i].role};
  st = ganfw_checkpoint_load_weights(src->ckpt, nets, n, n == 1 ? GANFW_CKPT_BARE_NAMES : 0, NULL);
  if (st != GANFW_OK) source_close(src);
  return st;
}

/* The net of the model a --layers item names ("NET:layer", or a bare layer of a one-net
 * model), with the layer name in *layer. NULL with an error naming the item. */
static ganfw_net *item_net(const ganfw_session *s, const char *item, const char **layer) {
  ganfw_net *net = ganfw_session_item_net(s, item, layer);
  if (net) return net;
  const char *colon = strchr(item, ':');
  if (!colon)
    ganfw_error_set(GANFW_ERR_CONFIG,
                    "--layers %s: the model has %d nets; name the net first (\"%s:%s\")", item,
                    (int)s->n_nets, s->nets[0].role, item);
  else
    ganfw_error_set(GANFW_ERR_CONFIG, "--layers %s: the model has no net '%.*s' (it has %s%s%s)",
                    item, (int)(colon - item), item, s->nets[0].role, s->n_nets > 1 ? ", " : "",
                    s->n_nets > 1 ? s->nets[1].role : "");
  return NULL;
}

/* --- masks ------------------------------------------------------------------------------ */

static ganfw_prune_amount mask_amount(double amount) {
  return amount >= 1.0 ? ganfw_prune_count((int64_t)amount) : ganfw_prune_fraction(amount);
}

/* Masks by `method` on the layers named (every prunable layer of every net when none). */
static ganfw_status prune_masks(const ganfw_prune_args *a, ganfw_session *s, double amount) {
  ganfw_prune_target *targets = calloc(GANFW_PRUNE_MAX_LAYERS * GANFW_MAX_NETS, sizeof *targets);
  if (!targets) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  int32_t n = 0;
  ganfw_status st = GANFW_OK;
  for (int32_t k = 0; k < a->n_layers && st == GANFW_OK; k++) {
    const char *layer = NULL;
    ganfw_net *net = item_net(s, a->layers[k], &layer);
    if (!net) st = ganfw_error_code();
    if (st == GANFW_OK) targets[n++] = (ganfw_prune_target){.net = net, .layer = layer};
  }
  for (int32_t i = 0; a->n_layers == 0 && i < s->n_nets; i++) {
    ganfw_net *net = s->nets[i].net;
    for (int32_t j = 0; j < ganfw_net_layer_count(net); j++)
      if (ganfw_prune_layer_prunable(net, j) && n < GANFW_PRUNE_MAX_LAYERS * GANFW_MAX_NETS)
        targets[n++] = (ganfw_prune_target){.net = net, .layer = ganfw_net_layer_name(net, j)};
  }
  const ganfw_prune_amount am = mask_amount(amount);
  if (st == GANFW_OK && a->method == GANFW_PRUNE_GLOBAL_UNSTRUCTURED)
    st = ganfw_prune_global_unstructured(targets, n, am);
  for (int32_t i = 0; st == GANFW_OK && a->method != GANFW_PRUNE_GLOBAL_UNSTRUCTURED && i < n; i++)
    st = a->method == GANFW_PRUNE_LN_STRUCTURED
             ? ganfw_prune_ln_structured(targets[i].net, targets[i].layer, am,
                                         a->importance == GANFW_CHANNEL_IMPORTANCE_L2 ? 2 : 1, 0)
             : ganfw_prune_l1_unstructured(targets[i].net, targets[i].layer, am);
  for (int32_t i = 0; st == GANFW_OK && a->remove && i < s->n_nets; i++)
    st = ganfw_prune_remove_all(s->nets[i].net);
  free(targets);
  return st;
}

/* The masked model's weights as a ganfw checkpoint (no optimizer state), with the data
 * shape `ganfw eval` and `sample` read. */
static ganfw_status write_masked(const source *src, const char *path) {
  ganfw_ckpt_net nets[GANFW_MAX_NETS];
  for (int32_t i = 0; i < src->s->n_nets; i++)
    nets[i] = (ganfw_ckpt_net){.net = src->s->nets[i].net, .prefix = src->s->nets[i].role};
  char c[24], h[24], w[24], k[24];
  snprintf(c, sizeof c, "%d", (int)src->info.channels);
  snprintf(h, sizeof h, "%d", (int)src->info.height);
  snprintf(w, sizeof w, "%d", (int)src->info.width);
  snprintf(k, sizeof k, "%d", (int)src->info.num_classes);
  const char *keys[] = {"data.channels", "data.height", "data.width", "data.num_classes"};
  const char *values[] = {c, h, w, k};
  const ganfw_ckpt_meta meta = {.seed = src->s->ctx->seed,
                                .n_extra = src->info.num_classes > 0 ? 4 : 3,
                                .extra_keys = keys,
                                .extra_values = values};
  return ganfw_checkpoint_save(path, nets, src->s->n_nets, &meta);
}

/* --- channels ---------------------------------------------------------------------------- */

typedef struct channel_plans {
  ganfw_channel_prune_plan *p[GANFW_MAX_NETS];
  int32_t n;
} channel_plans;

static void channel_plans_free(channel_plans *cp) {
  for (int32_t i = 0; i < cp->n; i++) ganfw_channel_prune_plan_destroy(cp->p[i]);
  cp->n = 0;
}

/* One plan per net: `amount` of every prunable group, or of the groups whose producers
 * --layers names. */
static ganfw_status plan_channels(const ganfw_prune_args *a, ganfw_session *s, double amount,
                                  channel_plans *cp) {
  cp->n = 0;
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < s->n_nets && st == GANFW_OK; i++) {
    const char *names[GANFW_PRUNE_MAX_LAYERS];
    int32_t n = 0;
    for (int32_t k = 0; k < a->n_layers && st == GANFW_OK; k++) {
      const char *layer = NULL;
      ganfw_net *net = item_net(s, a->layers[k], &layer);
      if (!net) st = ganfw_error_code();
      if (net == s->nets[i].net) names[n++] = layer;
    }
    if (st != GANFW_OK) break;
    if (a->n_layers > 0 && n == 0) { /* this net is not pruned: a plan of amount 0 */
      amount = 0.0;
    }
    const ganfw_channel_prune_opts o = {
        .importance = a->importance, .amount = amount, .layers = n ? names : NULL, .n_layers = n};
    st = ganfw_channel_prune_plan_create(s->nets[i].net, &o, &cp->p[cp->n]);
    if (st == GANFW_OK) cp->n++;
  }
  if (st != GANFW_OK) channel_plans_free(cp);
  return st;
}

/* --- the folder written ------------------------------------------------------------------ */

typedef struct written {
  char dir[4200];     /* as the user named it (relative to the working directory) */
  char config[4300];  /* <dir>/config.yaml */
  char weights[4300]; /* <dir>/model.safetensors */
  char distill[4300]; /* <dir>/distill.yaml (--distill) */
} written;

static ganfw_status absolute(const char *path, char *buf, size_t n) {
  char *r = realpath(path, NULL);
  if (!r) return ganfw_error_set(GANFW_ERR_IO, "%s: cannot resolve the path", path);
  const int fits = (size_t)snprintf(buf, n, "%s", r) < n;
  free(r);
  return fits ? GANFW_OK : ganfw_error_set(GANFW_ERR_IO, "%s: path too long", path);
}

typedef struct config_text {
  const ganfw_prune_args *a;
  const source *src;
  double amount;
  const char *widths;  /* a flow map, or NULL */
  const char *extends; /* absolute */
  const char *weights; /* absolute */
  const char *out_dir; /* absolute */
} config_text;

static ganfw_status write_config_text(FILE *f, void *ud) {
  const config_text *t = ud;
  const ganfw_session *s = t->src->s;
  fprintf(f, "# Written by `ganfw prune %s --method %s --amount %g`: the model of\n", t->a->source,
          ganfw_prune_method_name(t->a->method), t->amount);
  fprintf(f, "# %s with %s\n", t->src->config,
          t->a->method == GANFW_PRUNE_CHANNELS
              ? "the channels removed (model.widths) and its weights sliced to them"
              : "its weights masked (weight_orig and weight_mask, installed on loading)");
  fprintf(f, "# (model.init_from). Train it (`ganfw FILE`, a fine-tune), `ganfw eval`, `plan`.\n");
  fprintf(f, "extends: \"%s\"\n", t->extends);
  fprintf(f, "model:\n");
  if (s->family == GANFW_MODEL_NETS) {
    fprintf(f, "  nets:\n");
    for (int32_t i = 0; i < s->n_nets; i++) {
      if (s->nets[i].frozen) continue; /* a frozen net (a teacher) keeps its own source */
      fprintf(f, "    %s:\n      init_from: \"%s\"\n", s->nets[i].role, t->weights);
    }
  } else {
    fprintf(f, "  init_from: \"%s\"\n", t->weights);
  }
  if (t->widths) fprintf(f, "  widths: %s\n", t->widths);
  fprintf(f, "train:\n  resume: \"\"\nrun:\n  out_dir: \"%s\"\n", t->out_dir);
  return GANFW_OK;
}

/* distill.yaml (--distill): the source's config with its model as two nets of the distill
 * trainer, the unpruned source frozen as the teacher (its checkpoint) and the pruned model
 * as the student, so that the fine-tune learns from what the teacher predicts as well as
 * from the labels (trainer.alpha, trainer.temperature). The student's section is
 * config.yaml's model as that file resolves it: its init_from, and its widths merged over
 * those the source already had (a pruned model pruned again keeps the first widths). */
typedef struct distill_text {
  const config_text *t;
  const ganfw_cfg *student; /* config.yaml's model section */
  const char *teacher;      /* the source's checkpoint, absolute */
  const char *out_dir;      /* absolute */
} distill_text;

static ganfw_status write_distill_text(FILE *f, void *ud) {
  const distill_text *d = ud;
  const config_text *t = d->t;
  const ganfw_cfg *model = ganfw_cfg_section(ganfw_config_root(t->src->run->config), "model");
  fprintf(f, "# Written by `ganfw prune %s --method %s --amount %g --distill`: the pruned\n",
          t->a->source, ganfw_prune_method_name(t->a->method), t->amount);
  fprintf(f, "# model of config.yaml (the student) fine-tuned by the distill trainer on what the\n"
             "# unpruned model (the teacher, frozen) predicts: alpha * T^2 * KL(softmax(t/T) ||\n"
             "# softmax(s/T)) + (1 - alpha) * CE. Train it (`ganfw FILE`); `ganfw eval FILE`\n"
             "# gives the student's test accuracy (acc) beside the teacher's.\n");
  fprintf(f, "extends: \"%s\"\n", t->extends);
  fprintf(f, "model:\n  _replace_: true\n  nets:\n    teacher:\n");
  ganfw_status st = ganfw_cfg_write_map(model, 6, "init_from", f);
  if (st != GANFW_OK) return st;
  fprintf(f, "      init_from: \"%s\"\n    student:\n", d->teacher);
  if ((st = ganfw_cfg_write_map(d->student, 6, NULL, f)) != GANFW_OK) return st;
  fprintf(f, "trainer:\n  plugin: distill\n  alpha: 0.9\n  temperature: 4.0\n");
  fprintf(f, "train:\n  resume: \"\"\nrun:\n  out_dir: \"%s\"\n", d->out_dir);
  return GANFW_OK;
}

/* Writes w->distill for the pruned model of w->config (already written). */
static ganfw_status write_distill(const config_text *t, const char *dir, const written *w) {
  char teacher[4200], out_dir[4300];
  ganfw_config *pruned = NULL;
  ganfw_status st = absolute(t->src->ckpt, teacher, sizeof teacher);
  if (st == GANFW_OK) st = ganfw_path_join(out_dir, sizeof out_dir, dir, "run_distill");
  if (st == GANFW_OK) st = ganfw_config_load(w->config, &pruned);
  if (st == GANFW_OK) {
    distill_text d = {.t = t,
                      .student = ganfw_cfg_section(ganfw_config_root(pruned), "model"),
                      .teacher = teacher,
                      .out_dir = out_dir};
    st = ganfw_file_write_atomic(w->distill, write_distill_text, &d);
  }
  ganfw_config_destroy(pruned);
  return st;
}

/* Prunes the loaded source by `amount` into w->dir. */
static ganfw_status write_pruned(const ganfw_prune_args *a, source *src, double amount,
                                 const written *w) {
  channel_plans cp = {.n = 0};
  char *widths = NULL;
  ganfw_status st = ganfw_mkdirs(w->dir);
  if (st == GANFW_OK && a->method == GANFW_PRUNE_CHANNELS) {
    st = plan_channels(a, src->s, amount, &cp);
    if (st == GANFW_OK)
      st = ganfw_channel_prune_widths_text((const ganfw_channel_prune_plan *const *)cp.p, cp.n,
                                           &widths);
    if (st == GANFW_OK)
      st = ganfw_channel_prune_write((const ganfw_channel_prune_plan *const *)cp.p, cp.n,
                                     w->weights);
  } else if (st == GANFW_OK) {
    st = prune_masks(a, src->s, amount);
    if (st == GANFW_OK) st = write_masked(src, w->weights);
  }
  char extends[4200], weights[4200], dir[4200], out_dir[4300];
  if (st == GANFW_OK) st = absolute(src->config, extends, sizeof extends);
  if (st == GANFW_OK) st = absolute(w->weights, weights, sizeof weights);
  if (st == GANFW_OK) st = absolute(w->dir, dir, sizeof dir);
  if (st == GANFW_OK) st = ganfw_path_join(out_dir, sizeof out_dir, dir, "run");
  if (st == GANFW_OK) {
    config_text t = {.a = a,
                     .src = src,
                     .amount = amount,
                     .widths = widths && strcmp(widths, "{}") != 0 ? widths : NULL,
                     .extends = extends,
                     .weights = weights,
                     .out_dir = out_dir};
    st = ganfw_file_write_atomic(w->config, write_config_text, &t);
    if (st == GANFW_OK && a->distill) st = write_distill(&t, dir, w);
  }
  free(widths);
  channel_plans_free(&cp);
  return st;
}

/* --- the table ----------------------------------------------------------------------------- */

typedef struct row {
  char label[64];
  const char *config; /* borrowed */
  int64_t params, nonzero;
  double acc_pruned, acc_tuned; /* < 0: not measured */
} row;

/* Parameters of every net of the session, and of those the nonzero weights (a masked
 * layer's zeros are its effective weight's). */
static ganfw_status count_params(ganfw_session *s, int64_t *params, int64_t *nonzero) {
  *params = *nonzero = 0;
  for (int32_t i = 0; i < s->n_nets; i++) {
    ganfw_net *net = s->nets[i].net;
    for (int64_t k = 0; k < ganfw_net_param_count(net); k++) {
      ganfw_param_info pi = {.struct_size = sizeof pi};
      ganfw_status st = ganfw_net_param_info(net, k, &pi);
      if (st != GANFW_OK) return st;
      *params += pi.value->numel;
    }
    ganfw_prune_sparsity sp;
    char buf[2];
    ganfw_status st = ganfw_prune_report(net, buf, sizeof buf, &sp);
    if (st != GANFW_OK) return st;
    *nonzero -= sp.zeros;
  }
  *nonzero += *params;
  return GANFW_OK;
}

/* The parameters of the model `config` builds with `weights` loaded into its nets (a masked
 * file installs its masks). */
static ganfw_status params_of(const char *config, const char *weights, const ganfw_data_info *info,
                              row *r) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(config, NULL, 0, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 0, info, &s);
  if (st == GANFW_OK) {
    ganfw_ckpt_net nets[GANFW_MAX_NETS];
    for (int32_t i = 0; i < s->n_nets; i++)
      nets[i] = (ganfw_ckpt_net){.net = s->nets[i].net, .prefix = s->nets[i].role};
    st = ganfw_checkpoint_load_weights(weights, nets, s->n_nets,
                                       s->n_nets == 1 ? GANFW_CKPT_BARE_NAMES : 0, NULL);
  }
  if (st == GANFW_OK) st = count_params(s, &r->params, &r->nonzero);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

/* A classifier's test accuracy with `ckpt` (NULL: its run's), or -1 for another model. */
static ganfw_status accuracy_of(const source *src, const char *config, const char *ckpt,
                                double *acc) {
  *acc = -1;
  if (src->s->family != GANFW_MODEL_CLASSIFIER) return GANFW_OK;
  ganfw_eval_args e = {.source = config, .checkpoint = ckpt, .accuracy = acc};
  FILE *sink = fopen("/dev/null", "w");
  ganfw_status st = ganfw_eval(&e, sink ? sink : stderr);
  if (sink) fclose(sink);
  return st;
}

/* `epochs` of training of the pruned model in its folder (its config's run.out_dir), with
 * the command's --set assignments (an optim.lr for the fine-tune, say) after them. */
static ganfw_status finetune(const ganfw_prune_args *a, const char *config) {
  char epochs[64];
  snprintf(epochs, sizeof epochs, "train.epochs=%d", (int)a->finetune);
  const char *sets[2 + 64] = {epochs, "train.max_steps=0"};
  int n = 2;
  for (int i = 0; i < a->nsets && n < (int)(sizeof sets / sizeof *sets); i++)
    sets[n++] = a->sets[i];
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(config, sets, n, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_train(s);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

static double mib(int64_t b) {
  return (double)b / (1024.0 * 1024.0);
}

static void print_acc(FILE *f, double acc) {
  if (acc < 0)
    fprintf(f, " %9s |", "-");
  else
    fprintf(f, " %8.2f%% |", 100.0 * acc);
}

static void print_table(FILE *f, const row *rows, const ganfw_compare_row *cr, int32_t n,
                        const ganfw_prune_args *a) {
  const int tuned = a->finetune > 0;
  fprintf(f,
          "| model | parameters | nonzero | planned peak MiB (param / grad / optim / "
          "activation / workspace) | measured peak MiB | plan - measured | step ms (median of "
          "%d) | test acc. pruned |",
          (int)a->steps);
  if (tuned) fprintf(f, " after %d epoch(s)%s |", (int)a->finetune, a->distill ? " distilled" : "");
  fprintf(f, "\n|---|--:|--:|---|--:|--:|--:|--:|%s\n", tuned ? "--:|" : "");
  for (int32_t i = 0; i < n; i++) {
    const ganfw_compare_row *c = &cr[i];
    fprintf(f, "| %s | %lld | %lld |", rows[i].label, (long long)rows[i].params,
            (long long)rows[i].nonzero);
    if (c->status != GANFW_OK || c->r.oom || !c->planned) {
      fprintf(f, " %s | | | |",
              c->status != GANFW_OK ? c->error
              : c->r.oom            ? "out of memory"
                                    : "not planned");
    } else {
      const int64_t *pc = c->plan.peak_category;
      fprintf(f, " %.2f (%.2f / %.2f / %.2f / %.2f / %.2f) | %.2f | %+.2f%% | %.1f |",
              mib(c->plan_allocated), mib(pc[GANFW_MEM_PARAM]), mib(pc[GANFW_MEM_GRAD]),
              mib(pc[GANFW_MEM_OPTIM_STATE]), mib(pc[GANFW_MEM_ACTIVATION]),
              mib(pc[GANFW_MEM_WORKSPACE]), mib(c->r.peak_allocated),
              ganfw_plan_diff_percent(c->plan_allocated, c->r.peak_allocated),
              1e3 * c->r.step_seconds);
    }
    print_acc(f, rows[i].acc_pruned);
    if (tuned) print_acc(f, rows[i].acc_tuned);
    fprintf(f, "\n");
  }
}

typedef struct table_file {
  const row *rows;
  const ganfw_compare_row *cr;
  int32_t n;
  const ganfw_prune_args *a;
  const char *source;
} table_file;

static ganfw_status write_table(FILE *f, void *ud) {
  const table_file *t = ud;
  fprintf(f, "# `ganfw prune %s --method %s%s`\n\n", t->source,
          ganfw_prune_method_name(t->a->method), t->a->distill ? " --distill" : "");
  print_table(f, t->rows, t->cr, t->n, t->a);
  return GANFW_OK;
}

/* --- the command ----------------------------------------------------------------------------- */

static ganfw_status check_args(const ganfw_prune_args *a) {
  if (a->method < 0 || a->method >= GANFW_PRUNE_METHOD_COUNT)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "--method: use l1_unstructured, global_unstructured, ln_structured or "
                           "channels");
  if (a->n_amounts < 1)
    return ganfw_error_set(GANFW_ERR_CONFIG, "give --amount A (a fraction in [0, 1)) or --sweep");
  for (int32_t i = 0; i < a->n_amounts; i++) {
    const double v = a->amounts[i];
    const int count = a->method != GANFW_PRUNE_CHANNELS && v >= 1.0 && v == floor(v);
    if (!(v >= 0.0 && (v < 1.0 || count)))
      return ganfw_error_set(
          GANFW_ERR_CONFIG, "--amount %g: an amount is a fraction in [0, 1) of the %s%s", v,
          a->method == GANFW_PRUNE_CHANNELS ? "channels of each group" : "weights still unpruned",
          a->method == GANFW_PRUNE_CHANNELS ? "" : ", or a whole count >= 1");
  }
  if (!a->output && !a->dry_run) return ganfw_error_set(GANFW_ERR_CONFIG, "-o OUT is required");
  if (a->dry_run && a->method != GANFW_PRUNE_CHANNELS)
    return ganfw_error_set(GANFW_ERR_CONFIG, "--dry-run lists channel groups: use it with "
                                             "--method channels");
  return GANFW_OK;
}

/* --dry-run: the groups of each net and what the amount keeps. */
static ganfw_status dry_run(const ganfw_prune_args *a, source *src, FILE *out) {
  channel_plans cp = {.n = 0};
  ganfw_status st = plan_channels(a, src->s, a->amounts[0], &cp);
  for (int32_t i = 0; st == GANFW_OK && i < cp.n; i++) {
    char *text = NULL;
    st = ganfw_channel_prune_describe(cp.p[i], &text);
    if (st == GANFW_OK) fprintf(out, "%s:\n%s", src->s->nets[i].role, text);
    free(text);
  }
  char *widths = NULL;
  if (st == GANFW_OK)
    st = ganfw_channel_prune_widths_text((const ganfw_channel_prune_plan *const *)cp.p, cp.n,
                                         &widths);
  if (st == GANFW_OK) fprintf(out, "model.widths: %s\n", widths);
  free(widths);
  channel_plans_free(&cp);
  return st;
}

ganfw_status ganfw_prune_tool(const ganfw_prune_args *a_in, FILE *out) {
  ganfw_prune_args a = *a_in;
  if (a.steps <= 0) a.steps = 5;
  ganfw_status st = check_args(&a);
  if (st != GANFW_OK) return st;
  source src;
  memset(&src, 0, sizeof src);
  if ((st = source_open(&a, &src)) != GANFW_OK) return st;
  if (a.distill && src.s->family != GANFW_MODEL_CLASSIFIER) {
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "--distill: %s is no classifier (model '%s'); the distill trainer "
                         "teaches a classifier from a classifier%s",
                         src.config, ganfw_run_model_name(src.run),
                         src.s->family == GANFW_MODEL_NETS
                             ? " (this model's trainer already says what each net learns "
                               "from: prune without --distill)"
                             : "");
    source_close(&src);
    return st;
  }
  if (a.dry_run) {
    st = dry_run(&a, &src, out);
    source_close(&src);
    return st;
  }
  const int32_t n = a.n_amounts;
  const int table = n > 1 || a.finetune > 0;
  written *w = calloc((size_t)n, sizeof *w);
  row *rows = calloc((size_t)n + 1, sizeof *rows);
  ganfw_compare_row *cr = calloc((size_t)n + 1, sizeof *cr);
  if (!w || !rows || !cr) st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int32_t i = 0; st == GANFW_OK && i < n; i++) {
    if (n == 1)
      snprintf(w[i].dir, sizeof w[i].dir, "%s", a.output);
    else
      snprintf(w[i].dir, sizeof w[i].dir, "%s/amount_%.2f", a.output, a.amounts[i]);
    snprintf(w[i].config, sizeof w[i].config, "%s/config.yaml", w[i].dir);
    snprintf(w[i].weights, sizeof w[i].weights, "%s/model.safetensors", w[i].dir);
    snprintf(w[i].distill, sizeof w[i].distill, "%s/distill.yaml", w[i].dir);
    if (i > 0 && a.method != GANFW_PRUNE_CHANNELS) { /* masks change the nets: start again */
      source_close(&src);
      st = source_open(&a, &src);
    }
    if (st == GANFW_OK) st = write_pruned(&a, &src, a.amounts[i], &w[i]);
    if (st == GANFW_OK)
      fprintf(out, "amount %g: %s%s%s and %s written\n", a.amounts[i], w[i].config,
              a.distill ? ", " : "", a.distill ? w[i].distill : "", w[i].weights);
  }
  if (st == GANFW_OK && table) {
    snprintf(rows[0].label, sizeof rows[0].label, "unpruned");
    rows[0].config = src.config;
    rows[0].acc_tuned = -1;
    for (int32_t i = 0; i < n; i++) {
      snprintf(rows[i + 1].label, sizeof rows[i + 1].label, "%s %g",
               ganfw_prune_method_name(a.method), a.amounts[i]);
      rows[i + 1].config = w[i].config;
      rows[i + 1].acc_tuned = -1;
    }
    const ganfw_data_info info = src.info;
    const char *ckpt0 = src.ckpt;
    for (int32_t i = 0; st == GANFW_OK && i <= n; i++)
      st = params_of(rows[i].config, i == 0 ? ckpt0 : w[i - 1].weights, &info, &rows[i]);
    for (int32_t i = 0; st == GANFW_OK && i <= n; i++)
      st =
          accuracy_of(&src, rows[i].config, i == 0 ? ckpt0 : w[i - 1].weights, &rows[i].acc_pruned);
    for (int32_t i = 0; st == GANFW_OK && a.finetune > 0 && i < n; i++) {
      const char *tune = a.distill ? w[i].distill : w[i].config;
      fprintf(out, "fine-tuning %s for %d epoch(s)\n", tune, (int)a.finetune);
      fflush(out);
      st = finetune(&a, tune);
      if (st == GANFW_OK) st = accuracy_of(&src, tune, NULL, &rows[i + 1].acc_tuned);
    }
    const char *configs[GANFW_PRUNE_MAX_SWEEP + 1];
    for (int32_t i = 0; i <= n; i++) configs[i] = rows[i].config;
    const ganfw_compare_options co = {.warmup = 2, .steps = a.steps};
    if (st == GANFW_OK) st = ganfw_compare_run(configs, n + 1, NULL, 0, &co, cr, stderr);
    if (st == GANFW_OK) {
      fprintf(out, "\n");
      print_table(out, rows, cr, n + 1, &a);
      char path[4300];
      snprintf(path, sizeof path, "%s/sweep.md", a.output);
      table_file t = {.rows = rows, .cr = cr, .n = n + 1, .a = &a, .source = a.source};
      st = ganfw_file_write_atomic(path, write_table, &t);
      if (st == GANFW_OK) fprintf(out, "\nthe table: %s\n", path);
    }
  }
  if (cr) ganfw_compare_rows_free(cr, n + 1);
  free(cr);
  free(rows);
  free(w);
  source_close(&src);
  return st;
}
