/* The advice an out-of-memory failure ends with: the config planned (on the meta backend)
 * with each installed memory strategy added and with half the batch, each line saying the
 * peak that variant would reach and whether it fits the same budget; and when the model's
 * state alone (parameters, gradients, optimizer state) is over the budget, which no batch
 * size or activation strategy changes, what reduces that state and by how much. For a
 * failure in the set-up it also replays the set-up's requests, which the flight recorder
 * draws (the plan it is given keeps no events there). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "dist/dist.h"
#include "tools/oom.h"
#include "tools/plan.h"
#include "train/run.h"

#define MIB (1024.0 * 1024.0)

typedef struct variant {
  const char *label;  /* "amp f16" */
  const char *plugin; /* left out when the config already has it */
  const char *entry;  /* the memory: entry added */
} variant;

static const variant strategies[] = {
    {"amp f16", "amp", "{plugin: amp, dtype: f16}"},
    {"checkpoint segments=2", "checkpoint", "{plugin: checkpoint, segments: 2}"},
    {"accumulate steps=2", "accumulate", "{plugin: accumulate, steps: 2}"},
};

/* Optimizers with less state than Adam's two moments per parameter, as a replacement of
 * the whole optim section (the old optimizer's own keys would be unused there). */
typedef struct optim_variant {
  const char *label; /* "sgd, momentum 0.9" */
  const char *set;   /* the --set that plans it */
  const char *entry; /* what to write in the config */
} optim_variant;

static const optim_variant optimizers[] = {
    {"sgd, momentum 0.9", "optim={_replace_: true, plugin: sgd, momentum: 0.9}",
     "optim: {plugin: sgd, momentum: 0.9}"},
    {"sgd, no momentum", "optim={_replace_: true, plugin: sgd}", "optim: {plugin: sgd}"},
};

static void app(char *buf, size_t n, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void app(char *buf, size_t n, size_t *len, const char *fmt, ...) {
  if (*len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *len, n - *len, fmt, ap);
  va_end(ap);
  if (k > 0) *len = *len + (size_t)k < n - 1 ? *len + (size_t)k : n - 1;
}

/* What the advice needs to know of the config as it is (after its --set). */
typedef struct config_facts {
  int32_t has_strategy[sizeof strategies / sizeof strategies[0]];
  int32_t has_zero;      /* memory: lists zero */
  int32_t has_max_split; /* device.max_split_size is set */
  char optim[64];        /* the optimizer plugin's name; "" when none */
  char out_dir[4096];    /* run.out_dir; "" when none */
} config_facts;

static void facts_of(const ganfw_run_config *config, config_facts *f) {
  memset(f, 0, sizeof *f);
  ganfw_run *run = NULL;
  if (ganfw_run_open(config, &run) == GANFW_OK) {
    for (int32_t i = 0; i < run->n_memory; i++) {
      const char *name = ganfw_plugin_name(run->memory[i]);
      for (size_t k = 0; k < sizeof strategies / sizeof strategies[0]; k++)
        if (strcmp(name, strategies[k].plugin) == 0) f->has_strategy[k] = 1;
      if (strcmp(name, "zero") == 0) f->has_zero = 1;
    }
    f->has_max_split = run->ctx_opt.max_split_size > 0;
    if (run->optim) snprintf(f->optim, sizeof f->optim, "%s", ganfw_plugin_name(run->optim));
    if (run->out_dir) snprintf(f->out_dir, sizeof f->out_dir, "%s", run->out_dir);
  }
  ganfw_run_close(run);
}

#define MAX_FITS 8

/* The variants that fit, as the last line names them: what to pass to get each. */
typedef struct fitting {
  char how[MAX_FITS][160];
  int n;
} fitting;

static void fit_add(fitting *fit, const char *how) {
  if (fit->n < MAX_FITS) snprintf(fit->how[fit->n++], sizeof fit->how[0], "%s", how);
}

/* `config`, or `config` with one more --set assignment (NULL: none), in *planned; *owned is
 * the derived config to free (NULL when none was needed). */
static ganfw_status with_set(const ganfw_run_config *config, const char *set,
                             const ganfw_run_config **planned, ganfw_run_config **owned) {
  *owned = NULL;
  *planned = config;
  if (!set) return GANFW_OK;
  ganfw_status st = ganfw_run_config_derive(config, &set, 1, owned);
  *planned = *owned;
  return st;
}

/* Whether a plan fits the budget: without OOM under the limit, or (no limit) its reserved
 * peak within the device's free memory. */
static int plan_fits(const ganfw_probe_result *r, int64_t budget, int32_t limited) {
  return limited ? !r->oom : r->peak_reserved <= budget;
}

/* One line for a planned variant (the config with the memory entry, the batch or one more
 * --set); nothing when it could not be planned. A variant that fits goes to *fit with `how`. */
static void advise(const ganfw_run_config *config, const char *label, int64_t batch,
                   const char *entry, const char *extra_set, const char *how, int64_t budget,
                   int32_t limited, fitting *fit, char *buf, size_t n, size_t *len) {
  const ganfw_run_config *planned;
  ganfw_run_config *owned;
  ganfw_probe_result r;
  memset(&r, 0, sizeof r);
  ganfw_status st = with_set(config, extra_set, &planned, &owned);
  if (st == GANFW_OK) st = ganfw_plan_make(planned, batch, entry, &r);
  ganfw_probe_result_free(&r);
  ganfw_run_config_free(owned);
  if (st != GANFW_OK) return;
  int fits = plan_fits(&r, budget, limited);
  app(buf, n, len, "\n  %-24s peak %.2f MiB allocated, %.2f MiB reserved: %s", label,
      (double)r.peak_allocated / MIB, (double)r.peak_reserved / MIB,
      fits ? "fits" : "does not fit");
  if (fits) fit_add(fit, how);
}

/* --- the model's state ----------------------------------------------------------------------- */

/* The model's state as a plan's set-up holds it: parameters (EMA included), gradients,
 * optimizer state and the gradient buckets of a data-parallel run. */
static int64_t state_bytes(const ganfw_probe_result *r) {
  return r->setup_category[GANFW_MEM_PARAM] + r->setup_category[GANFW_MEM_GRAD] +
         r->setup_category[GANFW_MEM_OPTIM_STATE] + r->setup_category[GANFW_MEM_COMM];
}

/* "86.37 MiB"; GiB from 10 GiB on */
static const char *mib(char *b, size_t n, int64_t bytes) {
  if (bytes >= ((int64_t)10 << 30) || bytes <= -((int64_t)10 << 30))
    snprintf(b, n, "%.2f GiB", (double)bytes / (MIB * 1024.0));
  else
    snprintf(b, n, "%.2f MiB", (double)bytes / MIB);
  return b;
}

/* The planned state of a variant against the budget: "state 172.76 MiB; the whole step
 * fits (peak ...)" or "state 259.13 MiB, still 3.13 MiB over". Returns whether the whole
 * step fits. */
static int state_verdict(const ganfw_probe_result *r, int64_t budget, int32_t limited,
                         const char *per, char *buf, size_t n, size_t *len) {
  char a[32], b[32], c[32];
  const int64_t st = state_bytes(r);
  if (st > budget) {
    app(buf, n, len, ": state %s%s, still %s over", mib(a, sizeof a, st), per,
        mib(b, sizeof b, st - budget));
    return 0;
  }
  const int fits = plan_fits(r, budget, limited);
  app(buf, n, len, ": state %s%s; the whole step, peak %s allocated, %s reserved: %s",
      mib(a, sizeof a, st), per, mib(b, sizeof b, r->peak_allocated),
      mib(c, sizeof c, r->peak_reserved), fits ? "fits" : "does not fit");
  return fits;
}

/* Plans the config with one more --set and an extra memory entry on `ranks` ranks (1: as
 * it is), as `ganfw plan --ranks` does. */
static ganfw_status plan_variant(const ganfw_run_config *config, const char *extra_set,
                                 const char *entry, int32_t ranks, ganfw_probe_result *r) {
  const ganfw_run_config *planned;
  ganfw_run_config *owned;
  memset(r, 0, sizeof *r);
  ganfw_status st = with_set(config, extra_set, &planned, &owned);
  const int32_t prev = ganfw_dist_world_size();
  if (ranks > 1) ganfw_dist_simulate(ranks);
  if (st == GANFW_OK) st = ganfw_plan_make(planned, 0, entry, r);
  if (ranks > 1) ganfw_dist_simulate(prev);
  ganfw_probe_result_free(r);
  ganfw_run_config_free(owned);
  return st;
}

/* ZeRO-1 (memory: [{plugin: zero}]): the optimizer state is cut over the ranks, the rest
 * of the state stays whole on each, and a data-parallel run adds its gradient buckets. One
 * plan on 2 ranks gives that floor; when the floor fits, the fewest ranks whose share fits
 * (a power of two, as many as the batch allows) are planned too. */
static void advise_zero(const ganfw_run_config *config, const ganfw_probe_result *base,
                        int64_t budget, int32_t limited, fitting *fit, char *buf, size_t n,
                        size_t *len) {
  ganfw_probe_result r;
  if (base->batch_size % 2 != 0 ||
      plan_variant(config, NULL, "{plugin: zero}", 2, &r) != GANFW_OK) {
    ganfw_error_clear();
    return;
  }
  char a[32], b[32], c[32], d[32], e[32], label[48], how[160];
  const int64_t optim = base->setup_category[GANFW_MEM_OPTIM_STATE];
  const int64_t floor_bytes = state_bytes(&r) - r.setup_category[GANFW_MEM_OPTIM_STATE];
  if (floor_bytes >= budget) {
    app(buf, n, len,
        "\n  %-24s memory: [{plugin: zero}] shards only the optimizer state (%s; %s a rank "
        "on 2 ranks); parameters, gradients and the gradient buckets (comm %s) stay whole on "
        "every rank: %s per rank at any number of ranks, %s over",
        "zero over ranks", mib(a, sizeof a, optim),
        mib(b, sizeof b, r.setup_category[GANFW_MEM_OPTIM_STATE]),
        mib(c, sizeof c, r.setup_category[GANFW_MEM_COMM]), mib(d, sizeof d, floor_bytes),
        mib(e, sizeof e, floor_bytes - budget));
    return;
  }
  int32_t ranks = 2;
  while (ranks < 4096 && floor_bytes + optim / ranks > budget &&
         base->batch_size % (ranks * 2) == 0)
    ranks *= 2;
  if (ranks > 2 && plan_variant(config, NULL, "{plugin: zero}", ranks, &r) != GANFW_OK) {
    ganfw_error_clear();
    return;
  }
  snprintf(label, sizeof label, "zero on %d ranks", (int)ranks);
  app(buf, n, len, "\n  %-24s optimizer state %s per rank (saves %s)", label,
      mib(a, sizeof a, r.setup_category[GANFW_MEM_OPTIM_STATE]),
      mib(b, sizeof b, optim - r.setup_category[GANFW_MEM_OPTIM_STATE]));
  if (state_verdict(&r, budget, limited, " per rank", buf, n, len)) {
    snprintf(how, sizeof how, "memory: [{plugin: zero}] on %d ranks (ganfw launch -n %d)",
             (int)ranks, (int)ranks);
    fit_add(fit, how);
  }
}

/* When base's state alone is over the budget: the state by category, by how much it is
 * over, and a line per remedy; returns 1. Returns 0 (writing nothing) when it fits. */
static int advise_state(const ganfw_run_config *config, const ganfw_probe_result *base,
                        const config_facts *f, int64_t budget, int32_t limited,
                        const char *budget_name, fitting *fit, char *buf, size_t n, size_t *len) {
  const int64_t *sc = base->setup_category;
  const int64_t state = state_bytes(base);
  if (state <= budget || state <= 0) return 0;
  char a[32], b[32], c[32], d[32], e[32];
  app(buf, n, len, "\nThe model's state alone does not fit: parameters %s",
      mib(a, sizeof a, sc[GANFW_MEM_PARAM]));
  if (base->ema_bytes > 0)
    app(buf, n, len, " (train.ema's averages %s of them)", mib(a, sizeof a, base->ema_bytes));
  app(buf, n, len, " + gradients %s + optimizer state %s%s%s%s",
      mib(b, sizeof b, sc[GANFW_MEM_GRAD]), mib(c, sizeof c, sc[GANFW_MEM_OPTIM_STATE]),
      f->optim[0] ? " (" : "", f->optim, f->optim[0] ? ")" : "");
  if (sc[GANFW_MEM_COMM] > 0)
    app(buf, n, len, " + gradient buckets %s", mib(a, sizeof a, sc[GANFW_MEM_COMM]));
  app(buf, n, len,
      " = %s, %s over %s %s before any activation: no batch size and no activation "
      "strategy changes that. What reduces the state:",
      mib(a, sizeof a, state), mib(b, sizeof b, state - budget), budget_name,
      mib(c, sizeof c, budget));

  /* a smaller model: the state grows with the parameters */
  if (sc[GANFW_MEM_PARAM] > 0) {
    const double per = (double)state / (double)sc[GANFW_MEM_PARAM];
    const int64_t most = (int64_t)((double)budget / per);
    app(buf, n, len,
        "\n  %-24s parameters of at most %s for the state alone to fit (now %s; each "
        "parameter byte brings %.2f bytes of state here), less to leave room for the step; "
        "a conv net's parameters grow with the square of its widths: widths x%.3g at most",
        "a smaller model", mib(a, sizeof a, most), mib(b, sizeof b, sc[GANFW_MEM_PARAM]), per,
        sqrt((double)most / (double)sc[GANFW_MEM_PARAM]));
  }

  /* an optimizer with less state */
  for (size_t i = 0; i < sizeof optimizers / sizeof optimizers[0]; i++) {
    ganfw_probe_result r;
    if (plan_variant(config, optimizers[i].set, NULL, 1, &r) != GANFW_OK) {
      ganfw_error_clear();
      continue;
    }
    const int64_t os = r.setup_category[GANFW_MEM_OPTIM_STATE];
    if (os >= sc[GANFW_MEM_OPTIM_STATE]) continue;
    app(buf, n, len, "\n  %-24s optimizer state %s (saves %s)", optimizers[i].label,
        mib(d, sizeof d, os), mib(e, sizeof e, sc[GANFW_MEM_OPTIM_STATE] - os));
    if (state_verdict(&r, budget, limited, "", buf, n, len)) {
      char how[160];
      snprintf(how, sizeof how, "%s in place of the optim section (keep its lr)",
               optimizers[i].entry);
      fit_add(fit, how);
    }
  }

  /* ZeRO over ranks */
  if (!f->has_zero && sc[GANFW_MEM_OPTIM_STATE] > 0)
    advise_zero(config, base, budget, limited, fit, buf, n, len);
  return 1;
}

int ganfw_oom_state_advice(const ganfw_run_config *config, int64_t budget, const char *budget_name,
                           char *buf, size_t n) {
  if (!buf || n == 0) return 0;
  buf[0] = '\0';
  ganfw_probe_options opt = {
      .meta = 1, .warmup = 0, .steps = 1, .limit_mode = GANFW_PROBE_LIMIT_NONE};
  ganfw_probe_result base;
  ganfw_status st = ganfw_probe_run(config, &opt, &base);
  ganfw_probe_result_free(&base);
  if (st != GANFW_OK) {
    ganfw_error_clear();
    return 0;
  }
  config_facts f;
  facts_of(config, &f);
  fitting fit = {.n = 0};
  size_t len = 0;
  int over = advise_state(config, &base, &f, budget, 0, budget_name ? budget_name : "the budget",
                          &fit, buf, n, &len);
  if (over && fit.n > 0) {
    app(buf, n, &len, "\nTry:");
    for (int i = 0; i < fit.n; i++) app(buf, n, &len, "%s %s", i ? "," : "", fit.how[i]);
    app(buf, n, &len, ".");
  }
  ganfw_error_clear();
  return over;
}

/* --- the events of a set-up failure, for the flight recorder ------------------------------- */

/* The set-up replay of the last advice whose plan ran out of memory in the set-up, and the
 * config it is for (the recorder's plan of such a run holds no events to draw). */
static ganfw_probe_result setup_replay;
static char setup_config[4096];

const ganfw_probe_result *ganfw_oom_advice_setup_replay(const ganfw_run_config *config) {
  if (!config || !setup_config[0] || strcmp(ganfw_run_config_path(config), setup_config) != 0)
    return NULL;
  return setup_replay.n_trace > 0 ? &setup_replay : NULL;
}

static void keep_setup_replay(const ganfw_run_config *config, int64_t budget) {
  ganfw_probe_result_free(&setup_replay);
  setup_config[0] = '\0';
  if (ganfw_oom_setup_replay(config, budget, &setup_replay) == GANFW_OK)
    snprintf(setup_config, sizeof setup_config, "%s", ganfw_run_config_path(config));
  else
    ganfw_probe_result_free(&setup_replay);
}

void ganfw_oom_advice(const ganfw_run_config *config, char *buf, size_t n) {
  if (!buf || n == 0) return;
  buf[0] = '\0';
  /* the base plan: batch size, budget (memory_limit, or the device's free memory) */
  ganfw_probe_result base;
  ganfw_status st = ganfw_plan_make(config, 0, NULL, &base);
  ganfw_probe_result_free(&base);
  if (st != GANFW_OK) {
    ganfw_error_clear();
    return;
  }
  config_facts f;
  facts_of(config, &f);
  int32_t limited = base.config_memory_limit > 0;
  int64_t budget = limited ? base.config_memory_limit : base.free_bytes;
  size_t len = 0;
  app(buf, n, &len, "\nWhat would fit (planned from shapes, %s %.2f MiB):",
      limited ? "memory_limit" : "free device memory", (double)budget / MIB);
  app(buf, n, &len, "\n  %-24s peak %.2f MiB allocated, %.2f MiB reserved: %s", "as configured",
      (double)base.peak_allocated / MIB, (double)base.peak_reserved / MIB,
      plan_fits(&base, budget, limited) ? "fits" : "does not fit");
  fitting fit = {.n = 0};
  char how[160];
  for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
    if (f.has_strategy[i]) continue;
    snprintf(how, sizeof how, "%s (memory: [%s])", strategies[i].label, strategies[i].entry);
    advise(config, strategies[i].label, 0, strategies[i].entry, NULL, how, budget, limited, &fit,
           buf, n, &len);
  }
  int64_t g = base.micro_batches > 0 ? base.micro_batches : 1;
  int64_t half = base.batch_size / 2 / g * g;
  if (half >= g) {
    char label[48];
    snprintf(label, sizeof label, "batch %lld", (long long)half);
    snprintf(how, sizeof how, "batch %lld (train.batch_size: %lld)", (long long)half,
             (long long)half);
    advise(config, label, half, NULL, NULL, how, budget, limited, &fit, buf, n, &len);
  }
  /* large cached blocks kept whole: only the planner knows whether that is enough */
  if (!f.has_max_split)
    advise(config, "max_split_size 64 MiB", 0, NULL, "device.max_split_size=64MiB",
           "max_split_size 64 MiB (device.max_split_size: 64MiB)", budget, limited, &fit, buf, n,
           &len);
  const int over =
      advise_state(config, &base, &f, budget, limited,
                   limited ? "memory_limit" : "the free device memory", &fit, buf, n, &len);
  if (fit.n == 0 && over) {
    app(buf, n, &len,
        "\nNothing planned here fits: make the model smaller first (and combine the lines "
        "above: `ganfw compare` tries configs side by side).");
  } else if (fit.n == 0) {
    app(buf, n, &len,
        "\nNothing above fits: combine strategies (`ganfw compare` tries them "
        "side by side), or `ganfw find-batch` for the largest batch that does.");
  } else {
    app(buf, n, &len, "\nTry:");
    for (int i = 0; i < fit.n; i++) app(buf, n, &len, "%s %s", i ? "," : "", fit.how[i]);
    app(buf, n, &len, ".");
  }
  if (base.oom && strcmp(base.oom_where, "set-up") == 0) keep_setup_replay(config, budget);
  ganfw_error_clear();
}
