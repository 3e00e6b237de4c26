/* `ganfw find-batch`: the largest batch size whose planned step fits the device budget
 * (device.memory_limit, or the device's free memory; on the CPU no more than the host's
 * free memory) less a margin, found with plans on the meta backend (doubling, then
 * bisection over multiples of the micro-batch count) up to the largest batch training
 * takes from the data set, then confirmed by one real step at that size under the same
 * limit when the host has the memory for it. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/config.h"
#include "data/data.h"
#include "runtime/ctx.h"
#include "runtime/hostmem.h"
#include "tools/oom.h"
#include "tools/plan.h"

#define MIB         (1024.0 * 1024.0)
#define DEFAULT_MAX ((int64_t)1 << 20)

typedef struct search {
  const ganfw_run_config *config;
  ganfw_find_batch_result *res;
  ganfw_data_info info;
  int32_t have_info;
} search;

/* The room the host leaves a step (runtime/hostmem.h): the least of its limits less what
 * already counts against each (RLIMIT_AS, RLIMIT_DATA, the cgroup's, the machine's
 * available memory), named in source; 0 when none is known. */
static int64_t machine_free(void *ud, char *source, size_t n) {
  (void)ud;
  ganfw_hostmem h;
  ganfw_hostmem_read(&h);
  const ganfw_hostmem_limit *l = ganfw_hostmem_tightest(&h);
  if (!l) return 0;
  if (snprintf(source, n, "%s, %s", l->name, l->source) < 0) source[0] = '\0'; /* may be cut */
  const int64_t room = l->limit - l->used;
  return room > 0 ? room : 1; /* nothing left: a budget of one byte, which no batch fits */
}

static int64_t host_free(const ganfw_find_batch_options *opt, char *source, size_t n) {
  return opt->host_free ? opt->host_free(opt->host_free_ud, source, n)
                        : machine_free(NULL, source, n);
}

/* 8495 as "8,495". */
static const char *grouped(int64_t v, char buf[32]) {
  char digits[24];
  const int len = snprintf(digits, sizeof digits, "%lld", (long long)(v < 0 ? -v : v));
  char *o = buf;
  if (v < 0) *o++ = '-';
  for (int i = 0; i < len; i++) {
    if (i > 0 && (len - i) % 3 == 0) *o++ = ',';
    *o++ = digits[i];
  }
  *o = '\0';
  return buf;
}

/* The data set's size and the largest batch training takes from it (data.other's too,
 * whose loader always drops a short batch), counted from the files' headers or listing:
 * res->data_size, data_cap and data_cap_why. */
static ganfw_status data_cap_of(search *s) {
  ganfw_find_batch_result *res = s->res;
  ganfw_config *cfg = NULL; /* a copy to read: the command's config stays unread */
  ganfw_status st = ganfw_config_copy(ganfw_run_config_tree(s->config), NULL, 0, &cfg);
  const ganfw_cfg *data = st == GANFW_OK ? ganfw_cfg_section(ganfw_config_root(cfg), "data") : NULL;
  const char *kind = NULL, *path = NULL, *why = NULL;
  ganfw_loader_config lc;
  int64_t n = 0;
  if (st == GANFW_OK) st = ganfw_data_source_from_config(data, &kind, &path);
  if (st == GANFW_OK) st = ganfw_loader_config_from_config(data, 1, 0, &lc);
  if (st == GANFW_OK) st = ganfw_dataset_count(kind, path, 1, &n);
  char a[32], b[32];
  if (st == GANFW_OK) {
    res->data_size = n;
    res->data_cap = ganfw_loader_max_batch(n, lc.drop_last, &why);
    snprintf(res->data_cap_what, sizeof res->data_cap_what, "the data set's size");
    snprintf(res->data_cap_why, sizeof res->data_cap_why, "%s '%s': %s images; %s", kind, path,
             grouped(n, a), why);
  }
  const ganfw_cfg *other =
      st == GANFW_OK && ganfw_cfg_has(data, "other") ? ganfw_cfg_child(data, "other") : NULL;
  if (other && (st = ganfw_data_source_from_config(other, &kind, &path)) == GANFW_OK &&
      (st = ganfw_dataset_count(kind, path, 1, &n)) == GANFW_OK &&
      ganfw_loader_max_batch(n, 1, NULL) < res->data_cap) {
    res->data_size = n;
    res->data_cap = ganfw_loader_max_batch(n, 1, NULL);
    snprintf(res->data_cap_what, sizeof res->data_cap_what, "data.other's size");
    snprintf(res->data_cap_why, sizeof res->data_cap_why,
             "%s '%s': %s images, fewer than the data set's %s; its batches are drawn whole", kind,
             path, grouped(n, a), grouped(res->data_cap, b));
  }
  ganfw_config_destroy(cfg);
  return st;
}

/* Plans batch b under res->limit; *fits is 1 when it ran without OOM. The plan of the
 * largest fitting batch so far is kept in res->plan. */
static ganfw_status try_batch(search *s, int64_t b, int32_t *fits) {
  ganfw_find_batch_result *res = s->res;
  ganfw_probe_options opt = {.meta = 1,
                             .warmup = 1,
                             .steps = 1,
                             .layers = 1,
                             .limit_mode = GANFW_PROBE_LIMIT_SET,
                             .memory_limit = res->limit,
                             .batch_size = b,
                             .info = s->have_info ? &s->info : NULL};
  ganfw_probe_result r;
  ganfw_status st = ganfw_probe_run(s->config, &opt, &r);
  if (st != GANFW_OK) {
    ganfw_probe_result_free(&r);
    return st;
  }
  *fits = !r.oom;
  if (res->n_tries < GANFW_FIND_BATCH_MAX_TRIES) {
    ganfw_find_batch_try *t = &res->tries[res->n_tries++];
    t->batch = b;
    t->fits = *fits;
    t->peak_allocated = r.peak_allocated;
    t->peak_reserved = r.peak_reserved;
    snprintf(t->oom_where, sizeof t->oom_where, "%s", r.oom_where);
  }
  if (*fits && b > res->batch) {
    ganfw_probe_result_free(&res->plan);
    res->plan = r;
    res->batch = b;
  } else {
    ganfw_probe_result_free(&r);
  }
  return GANFW_OK;
}

/* The budget, the limit the plans run under, the granularity and the config's batch
 * size, from a plan of the config as it is, without a limit. */
static ganfw_status budget_of(search *s, const ganfw_find_batch_options *opt, int64_t *start) {
  ganfw_find_batch_result *res = s->res;
  ganfw_probe_options popt = {
      .meta = 1, .warmup = 0, .steps = 1, .limit_mode = GANFW_PROBE_LIMIT_NONE};
  ganfw_probe_result r;
  ganfw_status st = ganfw_probe_run(s->config, &popt, &r);
  ganfw_probe_result_free(&r);
  if (st != GANFW_OK) return st;
  s->info = r.data;
  s->have_info = 1;
  *start = r.batch_size;
  res->granularity = r.micro_batches > 0 ? r.micro_batches : 1;
  char host_source[128] = "";
  if (r.config_memory_limit > 0) {
    res->budget = r.config_memory_limit;
    res->from_limit = 1;
  } else {
    res->budget = r.free_bytes;
  }
  /* On the CPU the device's memory is the host's: a budget above what the host has free
   * would plan a step that swaps or is killed */
  if (r.device_type == GANFW_DEVICE_CPU &&
      (res->host_free = host_free(opt, host_source, sizeof host_source)) > 0 &&
      (res->host_free < res->budget || !res->from_limit)) {
    char below[96] = "";
    if (res->from_limit)
      snprintf(below, sizeof below, ", below device.memory_limit %.2f MiB",
               (double)r.config_memory_limit / MIB);
    snprintf(res->budget_source, sizeof res->budget_source, "the host's free memory: %s%s",
             host_source, below);
    res->budget = res->host_free;
    res->from_limit = 0;
    res->from_host = 1;
  } else {
    snprintf(res->budget_source, sizeof res->budget_source, "%s",
             res->from_limit ? "device.memory_limit" : "the device's free memory");
  }
  res->limit = (int64_t)((double)res->budget * (1.0 - opt->margin));
  if (res->limit <= 0)
    return ganfw_error_set(GANFW_ERR_BACKEND, "find-batch: the device reports no free memory; set "
                                              "device.memory_limit to plan against a budget");
  return GANFW_OK;
}

static ganfw_status search_batch(search *s, const ganfw_find_batch_options *opt, int64_t start) {
  ganfw_find_batch_result *res = s->res;
  const int64_t g = res->granularity;
  int64_t max = (opt->max_batch > 0 ? opt->max_batch : DEFAULT_MAX) / g * g;
  const int32_t data_bound = res->data_cap / g * g <= max;
  if (data_bound) max = res->data_cap / g * g;
  if (max < g) {
    char a[32];
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "find-batch: no batch size to try: batches are multiples of %lld "
                           "(the micro-batch count), but %s allows at most %s (%s)",
                           (long long)g, res->data_cap_what, grouped(res->data_cap, a),
                           res->data_cap_why);
  }
  int64_t lo = 0, hi = 0; /* lo fits (0: none known), hi does not (0: none known) */
  int64_t b = start / g * g;
  if (b < g) b = g;
  if (b > max) b = max;
  ganfw_status st;
  int32_t fits;
  for (;;) { /* double up or halve down until the boundary is bracketed */
    if ((st = try_batch(s, b, &fits)) != GANFW_OK) return st;
    if (fits) {
      lo = b;
      if (hi || b >= max) break;
      b = b * 2 > max ? max : b * 2;
    } else {
      hi = b;
      if (lo || b <= g) break;
      b = b / 2 / g * g;
      if (b < g) b = g;
    }
  }
  while (lo && hi && hi - lo > g) { /* bisection over multiples of g */
    int64_t mid = (lo + hi) / 2 / g * g;
    if ((st = try_batch(s, mid, &fits)) != GANFW_OK) return st;
    if (fits)
      lo = mid;
    else
      hi = mid;
  }
  res->capped = data_bound && lo == max;
  return GANFW_OK;
}

static int try_cmp(const void *x, const void *y) {
  const ganfw_find_batch_try *p = x, *q = y;
  return p->batch < q->batch ? -1 : p->batch > q->batch;
}

static void print_result(const ganfw_run_config *config, const ganfw_find_batch_options *opt,
                         ganfw_find_batch_result *res, FILE *out) {
  char a[32];
  fprintf(out,
          "find-batch %s: budget %.2f MiB (%s) less %.0f%% margin = %.2f MiB; batch sizes "
          "in multiples of %lld, at most %s (%s)\n\n",
          ganfw_run_config_path(config), (double)res->budget / MIB, res->budget_source,
          100.0 * opt->margin, (double)res->limit / MIB, (long long)res->granularity,
          grouped(res->data_cap, a), res->data_cap_what);
  ganfw_find_batch_try sorted[GANFW_FIND_BATCH_MAX_TRIES];
  memcpy(sorted, res->tries, (size_t)res->n_tries * sizeof *sorted);
  qsort(sorted, (size_t)res->n_tries, sizeof *sorted, try_cmp);
  fprintf(out, "%10s  %-22s %16s %16s\n", "batch", "plan", "peak allocated", "peak reserved");
  for (int32_t i = 0; i < res->n_tries; i++) {
    const ganfw_find_batch_try *t = &sorted[i];
    char what[80]; /* "OOM (" + oom_where + ")" */
    if (t->fits)
      snprintf(what, sizeof what, "fits");
    else
      snprintf(what, sizeof what, "OOM (%s)", t->oom_where);
    if (t->fits)
      fprintf(out, "%10lld  %-22s %12.2f MiB %12.2f MiB\n", (long long)t->batch, what,
              (double)t->peak_allocated / MIB, (double)t->peak_reserved / MIB);
    else
      fprintf(out, "%10lld  %-22s %16s %16s\n", (long long)t->batch, what, "-", "-");
  }
  if (res->batch == 0) {
    fprintf(out, "\nNo batch size fits: even batch %lld runs out of memory.\n",
            (long long)res->granularity);
    return;
  }
  fprintf(out,
          "\nLargest batch that fits: %lld (planned peak %.2f MiB allocated, %.2f MiB "
          "reserved of %.2f MiB)\n",
          (long long)res->batch, (double)res->plan.peak_allocated / MIB,
          (double)res->plan.peak_reserved / MIB, (double)res->limit / MIB);
  if (res->capped)
    fprintf(out, "  capped at %s: %s%s (%s); a larger batch was not planned\n",
            grouped(res->batch, a),
            res->batch < res->data_cap ? "the largest multiple of the granularity within " : "",
            res->data_cap_what, res->data_cap_why);
}

ganfw_status ganfw_find_batch(const ganfw_run_config *config, const ganfw_find_batch_options *opt,
                              ganfw_find_batch_result *res, FILE *out) {
  memset(res, 0, sizeof *res);
  if (!(opt->margin >= 0.0 && opt->margin <= 0.9))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "find-batch: --margin %g must be in [0, 0.9]",
                           opt->margin);
  search s = {.config = config, .res = res};
  int64_t start = 0;
  ganfw_status st = budget_of(&s, opt, &start);
  if (st == GANFW_OK) st = data_cap_of(&s);
  if (st == GANFW_OK) st = search_batch(&s, opt, start);
  if (st != GANFW_OK) return st;
  if (out) print_result(config, opt, res, out);
  char why[4096]; /* no batch fits: say so when the model's state alone is the reason */
  if (out && res->batch == 0 &&
      ganfw_oom_state_advice(config, res->limit, "the plans' limit", why, sizeof why))
    fprintf(out, "%s\n", why + (why[0] == '\n'));
  if (res->batch == 0 || !opt->confirm) return GANFW_OK;
  char source[128];
  if (res->plan.device_type == GANFW_DEVICE_CPU &&
      (res->confirm_host_free = host_free(opt, source, sizeof source)) > 0 &&
      res->plan.peak_reserved > res->confirm_host_free) {
    res->confirm_skipped = 1;
    if (out)
      fprintf(out,
              "Not confirming with a real step: at batch %lld it would reserve %.2f MiB, more "
              "than the host's %.2f MiB free now (%s). The plan predicts a peak of %.2f MiB "
              "allocated, %.2f MiB reserved; free memory, or run find-batch again when the "
              "host has it.\n",
              (long long)res->batch, (double)res->plan.peak_reserved / MIB,
              (double)res->confirm_host_free / MIB, source, (double)res->plan.peak_allocated / MIB,
              (double)res->plan.peak_reserved / MIB);
    return GANFW_OK;
  }
  ganfw_probe_options ropt = {.meta = 0,
                              .warmup = 0,
                              .steps = 1,
                              .limit_mode = GANFW_PROBE_LIMIT_SET,
                              .memory_limit = res->limit,
                              .batch_size = res->batch,
                              .info = &s.info};
  if (out) {
    fprintf(out, "Confirming with one real step at batch %lld ...\n", (long long)res->batch);
    fflush(out);
  }
  st = ganfw_probe_run(config, &ropt, &res->real);
  if (st != GANFW_OK) return st;
  res->confirmed = 1;
  if (out && res->real.oom)
    fprintf(out,
            "The real step ran OUT OF MEMORY in the %s (the plan is wrong; please report "
            "it):\n%s\n",
            res->real.oom_where, res->real.oom_report);
  else if (out)
    fprintf(out,
            "The real step fits: peak %.2f MiB allocated, %.2f MiB reserved (plan %+.2f%% "
            "/ %+.2f%%), %.3f s.\n",
            (double)res->real.peak_allocated / MIB, (double)res->real.peak_reserved / MIB,
            ganfw_plan_diff_percent(res->plan.peak_allocated, res->real.peak_allocated),
            ganfw_plan_diff_percent(res->plan.peak_reserved, res->real.peak_reserved),
            res->real.step_seconds);
  return GANFW_OK;
}

void ganfw_find_batch_free(ganfw_find_batch_result *res) {
  if (!res) return;
  ganfw_probe_result_free(&res->plan);
  ganfw_probe_result_free(&res->real);
}
