/* `ganfw plan`: the peak memory of a config's training step predicted from shapes alone
 * (the real step code on the meta backend, see probe.h), per category, per phase (D step,
 * G step) and per layer; and the same figures against one real step. Sizes in MiB. */
#include "tools/plan.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "plan/arena.h"
#include "runtime/tensor.h"

#define MIB (1024.0 * 1024.0)

ganfw_status ganfw_plan_make(const ganfw_run_config *config, int64_t batch_size,
                             const char *extra_memory, ganfw_probe_result *out) {
  ganfw_probe_options opt = {.meta = 1,
                             .warmup = 1,
                             .steps = 1,
                             .layers = 1,
                             .limit_mode = GANFW_PROBE_LIMIT_CONFIG,
                             .batch_size = batch_size,
                             .extra_memory = extra_memory};
  ganfw_status st = ganfw_probe_run(config, &opt, out);
  if (st != GANFW_OK || !out->oom || out->memory_limit == 0) return st;
  /* It does not fit: the figures of a plan without the limit, the OOM of this one. */
  ganfw_probe_result *limited = malloc(sizeof *limited);
  if (!limited) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  *limited = *out;
  limited->layers = NULL;
  ganfw_probe_result_free(out);
  opt.limit_mode = GANFW_PROBE_LIMIT_NONE;
  /* The data shape the limited run found; none when it ran out before reading it (a limit
   * below the parameters): the unlimited run then reads it itself. */
  opt.info = limited->data.channels > 0 ? &limited->data : NULL;
  st = ganfw_probe_run(config, &opt, out);
  if (st == GANFW_OK) {
    out->oom = 1;
    out->memory_limit = limited->memory_limit;
    memcpy(out->oom_where, limited->oom_where, sizeof out->oom_where);
    memcpy(out->oom_report, limited->oom_report, sizeof out->oom_report);
  }
  free(limited);
  return st;
}

ganfw_status ganfw_plan_measure(const ganfw_run_config *config, const ganfw_probe_result *plan,
                                FILE *summary, ganfw_probe_result *out) {
  ganfw_probe_options opt = {.meta = 0,
                             .warmup = 1,
                             .steps = 1,
                             .limit_mode = GANFW_PROBE_LIMIT_CONFIG,
                             .batch_size = plan->batch_size,
                             .info = &plan->data,
                             .summary = summary};
  return ganfw_probe_run(config, &opt, out);
}

double ganfw_plan_diff_percent(int64_t plan, int64_t measured) {
  if (measured == 0) return plan == 0 ? 0.0 : 100.0;
  return 100.0 * (double)(plan - measured) / (double)measured;
}

/* MiB with two decimals, GiB from 10 GiB on. */
static const char *size_text(char *buf, size_t n, int64_t bytes) {
  if (bytes >= ((int64_t)10 << 30))
    snprintf(buf, n, "%.2f GiB", (double)bytes / (MIB * 1024));
  else
    snprintf(buf, n, "%.2f MiB", (double)bytes / MIB);
  return buf;
}

static void print_budget(const ganfw_probe_result *p, FILE *out) {
  char b[32];
  if (p->memory_limit > 0)
    fprintf(out, "memory_limit %s", size_text(b, sizeof b, p->memory_limit));
  else
    fprintf(out, "no memory_limit");
  if (p->capacity > 0)
    fprintf(out, " (device %.2f GiB, %.2f GiB free)", (double)p->capacity / (MIB * 1024),
            (double)p->free_bytes / (MIB * 1024));
}

/* The first line of a message. */
static void print_first_line(const char *text, FILE *out) {
  const char *nl = strchr(text, '\n');
  fprintf(out, "%.*s", nl ? (int)(nl - text) : (int)strlen(text), text);
}

void ganfw_plan_print(const char *config, const ganfw_probe_result *p, FILE *out) {
  fprintf(out,
          "Plan for %s: from shapes alone (the step on the meta backend; nothing is "
          "allocated)\n",
          config);
  fprintf(out, "batch %lld, compute %s, %d micro-batch%s, data [%d,%d,%d]; ",
          (long long)p->batch_size, ganfw_dtype_name(p->compute_dtype), (int)p->micro_batches,
          p->micro_batches == 1 ? "" : "es", (int)p->data.channels, (int)p->data.height,
          (int)p->data.width);
  print_budget(p, out);
  fprintf(out, "\n");
  if (p->ranks > 1)
    fprintf(out,
            "data-parallel: the figures are one rank's of %d, with %lld rows of the global batch "
            "each; comm holds its gradient buckets%s\n",
            (int)p->ranks, (long long)(p->batch_size / p->ranks),
            p->zero_elems > 0 ? " and optim_state its shard of the optimizer state (zero)" : "");
  if (p->zero_total > 0)
    fprintf(out,
            "zero: this rank keeps the optimizer state of %lld of the %lld parameter elements "
            "(the allocator rounds each piece to 512 bytes)\n",
            (long long)p->zero_elems, (long long)p->zero_total);
  if (p->ema_bytes > 0)
    fprintf(out,
            "train.ema (decay %g): the generator's averages take %.2f MiB (f32 weights), counted "
            "in param (the row generator_ema by layer), and one lerp per G step\n",
            p->ema_decay, (double)p->ema_bytes / (1024.0 * 1024.0));
  if (p->oom) {
    char b[32];
    fprintf(out, "\nDOES NOT FIT in memory_limit %s: the allocator runs out in the %s:\n  ",
            size_text(b, sizeof b, p->memory_limit), p->oom_where);
    print_first_line(p->oom_report, out);
    fprintf(out, "\nThe figures below are from a plan without the limit.\n");
  }
  fprintf(out, "\n%-16s %10s", "MiB", "set-up");
  for (int32_t k = 0; k < p->n_phases; k++) fprintf(out, " %10s", ganfw_probe_phase_name(p, k));
  fprintf(out, " %10s\n", "peak");
  for (int32_t row = 0; row < GANFW_MEM_COUNT + 2; row++) { /* categories, allocated, reserved */
    const int32_t alloc_row = row == GANFW_MEM_COUNT, reserved_row = row == GANFW_MEM_COUNT + 1;
    fprintf(out, "%-16s %10.2f",
            alloc_row      ? "allocated"
            : reserved_row ? "reserved"
                           : ganfw_mem_category_name(row),
            (double)(alloc_row      ? p->setup_allocated
                     : reserved_row ? p->setup_reserved
                                    : p->setup_category[row]) /
                MIB);
    for (int32_t k = 0; k < p->n_phases; k++) {
      const ganfw_probe_phase *ph = &p->phase[k];
      fprintf(out, " %10.2f",
              (double)(alloc_row      ? ph->allocated
                       : reserved_row ? ph->reserved
                                      : ph->category[row]) /
                  MIB);
    }
    fprintf(out, " %10.2f\n",
            (double)(alloc_row      ? p->peak_allocated
                     : reserved_row ? p->peak_reserved
                                    : p->peak_category[row]) /
                MIB);
  }
  fprintf(out, "(a category's column is its own peak in that phase; `allocated` is the peak of "
               "their sum)\n");
  fprintf(out, "\nPredicted peak: %.2f MiB allocated (in the %s), %.2f MiB reserved.\n",
          (double)p->peak_allocated / MIB, ganfw_probe_phase_name(p, p->peak_phase),
          (double)p->peak_reserved / MIB);
  if (p->n_layers == 0) return;
  fprintf(out, "\nAt the peak (%s), by layer, MiB:\n", ganfw_probe_phase_name(p, p->peak_phase));
  fprintf(out, "%-28s", "layer");
  for (int c = 0; c < GANFW_MEM_COUNT; c++) fprintf(out, " %11s", ganfw_mem_category_name(c));
  fprintf(out, " %11s\n", "total");
  for (int32_t i = 0; i < p->n_layers; i++) {
    const ganfw_probe_layer *l = &p->layers[i];
    fprintf(out, "%-28s", l->name);
    for (int c = 0; c < GANFW_MEM_COUNT; c++) {
      if (l->bytes[c])
        fprintf(out, " %11.3f", (double)l->bytes[c] / MIB);
      else
        fprintf(out, " %11s", "-");
    }
    fprintf(out, " %11.3f\n", (double)l->total / MIB);
  }
  fprintf(out, "%-28s", "total");
  int64_t total = 0;
  for (int c = 0; c < GANFW_MEM_COUNT; c++) {
    fprintf(out, " %11.3f", (double)p->at_peak[c] / MIB);
    total += p->at_peak[c];
  }
  fprintf(out, " %11.3f\n", (double)total / MIB);
}

static void vs_row(FILE *out, const char *name, int64_t plan, int64_t measured) {
  fprintf(out, "%-26s %8.2f %12.2f %+9.2f%%\n", name, (double)plan / MIB, (double)measured / MIB,
          ganfw_plan_diff_percent(plan, measured));
}

void ganfw_plan_print_vs(const ganfw_probe_result *p, const ganfw_probe_result *m, FILE *out) {
  fprintf(out, "\nPlan against one real step (after one warm-up step, batch %lld):\n",
          (long long)m->batch_size);
  if (m->oom) {
    fprintf(out, "the real step ran out of memory in the %s:\n  ", m->oom_where);
    print_first_line(m->oom_report, out);
    fprintf(out, "\n");
  }
  fprintf(out, "%-26s %8s %12s %10s\n", "MiB", "plan", "measured", "diff");
  vs_row(out, "peak allocated", p->peak_allocated, m->peak_allocated);
  vs_row(out, "peak reserved", p->peak_reserved, m->peak_reserved);
  for (int32_t k = 0; k < p->n_phases; k++) {
    char name[48];
    snprintf(name, sizeof name, "%s allocated", ganfw_probe_phase_name(p, k));
    vs_row(out, name, p->phase[k].allocated, m->phase[k].allocated);
  }
  for (int c = 0; c < GANFW_MEM_COUNT; c++) {
    char name[48];
    snprintf(name, sizeof name, "peak %s", ganfw_mem_category_name(c));
    vs_row(out, name, p->peak_category[c], m->peak_category[c]);
  }
  if (m->steps_done > 0)
    fprintf(out, "(the real step took %.3f s: %.1f images/s)\n", m->step_seconds, m->images_per_s);
}

void ganfw_plan_print_layout(const ganfw_layout *l, FILE *out) {
  fprintf(out,
          "Arena (device.memory_layout: planned, %s): %lld of the step's %lld requests at "
          "planned offsets in %.2f MiB, lower bound %.2f MiB (%.3fx); %.2f MiB below it for the "
          "caching allocator; from step %lld\n",
          l->strategy, (long long)l->n_planned, (long long)l->l.n, (double)l->l.arena_bytes / MIB,
          (double)l->lower_bound / MIB,
          l->lower_bound ? (double)l->l.arena_bytes / (double)l->lower_bound : 1.0,
          (double)l->l.base_bytes / MIB, (long long)l->l.from_step);
}

void ganfw_plan_print_arena(const ganfw_probe_result *traced, FILE *out) {
  ganfw_arena_plan a;
  int64_t first = 0, count = 0;
  memset(&a, 0, sizeof a);
  if (!traced->oom &&
      ganfw_trace_find_step(traced->trace, traced->n_trace, 2, &first, &count) == GANFW_OK &&
      ganfw_arena_plan_step(traced->trace + first, count, &a) == GANFW_OK)
    fprintf(out,
            "Arena (a layout of the step's step-local blocks, %s; not yet used by the "
            "step): %lld blocks in %.2f MiB, lower bound %.2f MiB (%.3fx); %.2f MiB persistent "
            "stay in the caching allocator%s\n",
            a.strategy, (long long)a.n, (double)a.arena_bytes / MIB, (double)a.lower_bound / MIB,
            a.lower_bound ? (double)a.arena_bytes / (double)a.lower_bound : 1.0,
            (double)(a.persistent + a.kept) / MIB, ganfw_arena_plan_valid(&a) ? "" : " (INVALID)");
  ganfw_error_clear();
  ganfw_arena_plan_free(&a);
}
