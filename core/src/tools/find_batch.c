/* `ganfw find-batch`: the largest batch size whose planned step fits the device budget
 * (device.memory_limit, or the device's free memory) less a margin, found with plans on
 * the meta backend (doubling, then bisection over multiples of the micro-batch count),
 * then confirmed by one real step at that size under the same limit. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tools/plan.h"

#define MIB         (1024.0 * 1024.0)
#define DEFAULT_MAX ((int64_t)1 << 20)

typedef struct search {
  const char *config;
  const char *const *sets;
  int nsets;
  ganfw_find_batch_result *res;
  ganfw_data_info info;
  int32_t have_info;
} search;

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
  ganfw_status st = ganfw_probe_run(s->config, s->sets, s->nsets, &opt, &r);
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
  ganfw_status st = ganfw_probe_run(s->config, s->sets, s->nsets, &popt, &r);
  ganfw_probe_result_free(&r);
  if (st != GANFW_OK) return st;
  s->info = r.data;
  s->have_info = 1;
  *start = r.batch_size;
  res->granularity = r.micro_batches > 0 ? r.micro_batches : 1;
  if (r.config_memory_limit > 0) {
    res->budget = r.config_memory_limit;
    res->from_limit = 1;
  } else {
    res->budget = r.free_bytes;
  }
  res->limit = (int64_t)((double)res->budget * (1.0 - opt->margin));
  if (res->limit <= 0)
    return ganfw_error_set(GANFW_ERR_BACKEND, "find-batch: the device reports no free memory; set "
                                              "device.memory_limit to plan against a budget");
  return GANFW_OK;
}

static ganfw_status search_batch(search *s, const ganfw_find_batch_options *opt, int64_t start) {
  const int64_t g = s->res->granularity;
  const int64_t max = (opt->max_batch > 0 ? opt->max_batch : DEFAULT_MAX) / g * g;
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
  return GANFW_OK;
}

static int try_cmp(const void *x, const void *y) {
  const ganfw_find_batch_try *p = x, *q = y;
  return p->batch < q->batch ? -1 : p->batch > q->batch;
}

static void print_result(const char *config, const ganfw_find_batch_options *opt,
                         ganfw_find_batch_result *res, FILE *out) {
  fprintf(out,
          "find-batch %s: budget %.2f MiB (%s) less %.0f%% margin = %.2f MiB; batch sizes "
          "in multiples of %lld\n\n",
          config, (double)res->budget / MIB,
          res->from_limit ? "device.memory_limit" : "the device's free memory", 100.0 * opt->margin,
          (double)res->limit / MIB, (long long)res->granularity);
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
}

ganfw_status ganfw_find_batch(const char *config, const char *const *sets, int nsets,
                              const ganfw_find_batch_options *opt, ganfw_find_batch_result *res,
                              FILE *out) {
  memset(res, 0, sizeof *res);
  if (!(opt->margin >= 0.0 && opt->margin <= 0.9))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "find-batch: --margin %g must be in [0, 0.9]",
                           opt->margin);
  search s = {.config = config, .sets = sets, .nsets = nsets, .res = res};
  int64_t start = 0;
  ganfw_status st = budget_of(&s, opt, &start);
  if (st == GANFW_OK) st = search_batch(&s, opt, start);
  if (st != GANFW_OK) return st;
  if (out) print_result(config, opt, res, out);
  if (res->batch == 0 || !opt->confirm) return GANFW_OK;
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
  st = ganfw_probe_run(config, sets, nsets, &ropt, &res->real);
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
