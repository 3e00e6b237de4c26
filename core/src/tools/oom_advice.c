/* The advice an out-of-memory failure ends with: the config planned (on the meta backend)
 * with each installed memory strategy added and with half the batch, each line saying the
 * peak that variant would reach and whether it fits the same budget. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "tools/plan.h"
#include "train/run.h"

#define MIB          (1024.0 * 1024.0)
#define CLI_SETS_MAX 64 /* --set assignments a variant adds one to */

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

/* Whether the config already lists the strategy `plugin`. */
static int has_strategy(const char *config, const char *const *sets, int nsets,
                        const char *plugin) {
  ganfw_run *run = NULL;
  int found = 0;
  if (ganfw_run_open(config, sets, nsets, &run) == GANFW_OK)
    for (int32_t i = 0; i < run->n_memory; i++)
      if (strcmp(ganfw_plugin_name(run->memory[i]), plugin) == 0) found = 1;
  ganfw_run_close(run);
  return found;
}

#define MAX_FITS 8

/* The variants that fit, as the last line names them: what to pass to get each. */
typedef struct fitting {
  char how[MAX_FITS][160];
  int n;
} fitting;

/* One line for a planned variant (the config with the memory entry, the batch or one more
 * --set); nothing when it could not be planned. A variant that fits goes to *fit with `how`. */
static void advise(const char *config, const char *const *sets, int nsets, const char *label,
                   int64_t batch, const char *entry, const char *extra_set, const char *how,
                   int64_t budget, int32_t limited, fitting *fit, char *buf, size_t n,
                   size_t *len) {
  const char *more[CLI_SETS_MAX + 1];
  int nmore = 0;
  for (int i = 0; i < nsets && nmore < CLI_SETS_MAX; i++) more[nmore++] = sets[i];
  if (extra_set) more[nmore++] = extra_set;
  ganfw_probe_result r;
  ganfw_status st = ganfw_plan_make(config, more, nmore, batch, entry, &r);
  ganfw_probe_result_free(&r);
  if (st != GANFW_OK) return;
  int fits = limited ? !r.oom : r.peak_reserved <= budget;
  app(buf, n, len, "\n  %-24s peak %.2f MiB allocated, %.2f MiB reserved: %s", label,
      (double)r.peak_allocated / MIB, (double)r.peak_reserved / MIB,
      fits ? "fits" : "does not fit");
  if (fits && fit->n < MAX_FITS) snprintf(fit->how[fit->n++], sizeof fit->how[0], "%s", how);
}

/* Whether the config (with its --set) sets device.max_split_size. */
static int has_max_split(const char *config, const char *const *sets, int nsets) {
  ganfw_run *run = NULL;
  int set = 0;
  if (ganfw_run_open(config, sets, nsets, &run) == GANFW_OK) set = run->ctx_opt.max_split_size > 0;
  ganfw_run_close(run);
  return set;
}

void ganfw_oom_advice(const char *config, const char *const *sets, int nsets, char *buf, size_t n) {
  if (!buf || n == 0) return;
  buf[0] = '\0';
  /* the base plan: batch size, budget (memory_limit, or the device's free memory) */
  ganfw_probe_result base;
  ganfw_status st = ganfw_plan_make(config, sets, nsets, 0, NULL, &base);
  ganfw_probe_result_free(&base);
  if (st != GANFW_OK) {
    ganfw_error_clear();
    return;
  }
  int32_t limited = base.config_memory_limit > 0;
  int64_t budget = limited ? base.config_memory_limit : base.free_bytes;
  size_t len = 0;
  app(buf, n, &len, "\nWhat would fit (planned from shapes, %s %.2f MiB):",
      limited ? "memory_limit" : "free device memory", (double)budget / MIB);
  app(buf, n, &len, "\n  %-24s peak %.2f MiB allocated, %.2f MiB reserved: %s", "as configured",
      (double)base.peak_allocated / MIB, (double)base.peak_reserved / MIB,
      (limited ? !base.oom : base.peak_reserved <= budget) ? "fits" : "does not fit");
  fitting fit = {.n = 0};
  char how[160];
  for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++) {
    if (has_strategy(config, sets, nsets, strategies[i].plugin)) continue;
    snprintf(how, sizeof how, "%s (memory: [%s])", strategies[i].label, strategies[i].entry);
    advise(config, sets, nsets, strategies[i].label, 0, strategies[i].entry, NULL, how, budget,
           limited, &fit, buf, n, &len);
  }
  int64_t g = base.micro_batches > 0 ? base.micro_batches : 1;
  int64_t half = base.batch_size / 2 / g * g;
  if (half >= g) {
    char label[48];
    snprintf(label, sizeof label, "batch %lld", (long long)half);
    snprintf(how, sizeof how, "batch %lld (train.batch_size: %lld)", (long long)half,
             (long long)half);
    advise(config, sets, nsets, label, half, NULL, NULL, how, budget, limited, &fit, buf, n, &len);
  }
  /* large cached blocks kept whole: only the planner knows whether that is enough */
  if (!has_max_split(config, sets, nsets))
    advise(config, sets, nsets, "max_split_size 64 MiB", 0, NULL, "device.max_split_size=64MiB",
           "max_split_size 64 MiB (device.max_split_size: 64MiB)", budget, limited, &fit, buf, n,
           &len);
  if (fit.n == 0) {
    app(buf, n, &len,
        "\nNothing above fits: combine strategies (`ganfw compare` tries them "
        "side by side), or `ganfw find-batch` for the largest batch that does.");
  } else {
    app(buf, n, &len, "\nTry:");
    for (int i = 0; i < fit.n; i++) app(buf, n, &len, "%s %s", i ? "," : "", fit.how[i]);
    app(buf, n, &len, ".");
  }
  ganfw_error_clear();
}
