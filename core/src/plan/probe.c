/* Runs a config's training steps, through its trainer (train/loop.h), on the meta or the real
 * backend and measures its memory (see probe.h): set-up bytes, per-phase and per-category
 * peaks, and, with a peak hook on the allocator, which layer holds which bytes at the
 * allocated peak. */
#include "plan/probe.h"
#include "dist/dist.h"
#include "train/dp.h"
#include "train/zero.h"
#include "train/ema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "base/error.h"
#include "train/run_state.h"
#include "base/log.h"
#include "train/run.h"
#include "train/session.h"
#include "runtime/tensor.h"
#include "train/loop.h"

const char *ganfw_probe_phase_name(const ganfw_probe_result *r, int32_t phase) {
  if (phase < 0) return "set-up";
  if (phase < r->n_phases && r->phase_names[phase][0]) return r->phase_names[phase];
  return "step";
}

void ganfw_probe_result_free(ganfw_probe_result *r) {
  if (!r) return;
  free(r->layers);
  r->layers = NULL;
  r->n_layers = 0;
  free(r->trace);
  free(r->trace_names);
  ganfw_layout_free(&r->layout);
  r->planned = 0;
  r->trace = NULL;
  r->trace_names = NULL;
  r->n_trace = 0;
}

static int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

/* --- who holds the bytes at the peak ------------------------------------------------ */

typedef struct snap_row {
  const void *ptr;
  int64_t size;
  int32_t category;
  int32_t has_owner;
  size_t name_off; /* into snapshot.names */
} snap_row;

typedef struct snapshot {
  snap_row *rows;
  size_t n, cap;
  char *names;
  size_t names_len, names_cap;
  int64_t best;  /* allocated bytes when the rows were taken */
  int32_t phase; /* the phase running now, and the one of the rows */
  int32_t best_phase;
  int32_t failed; /* out of host memory: no per-layer table */
} snapshot;

static void snap_collect(void *ud, const void *ptr, size_t size, int32_t category,
                         const char *owner) {
  snapshot *s = ud;
  if (s->failed) return;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    snap_row *rows = realloc(s->rows, cap * sizeof *rows);
    if (!rows) {
      s->failed = 1;
      return;
    }
    s->rows = rows;
    s->cap = cap;
  }
  size_t len = owner ? strlen(owner) + 1 : 0;
  if (s->names_len + len > s->names_cap) {
    size_t cap = s->names_cap ? s->names_cap : 4096;
    while (cap < s->names_len + len) cap *= 2;
    char *names = realloc(s->names, cap);
    if (!names) {
      s->failed = 1;
      return;
    }
    s->names = names;
    s->names_cap = cap;
  }
  snap_row *r = &s->rows[s->n++];
  r->ptr = ptr;
  r->size = (int64_t)size;
  r->category = category;
  r->has_owner = owner != NULL;
  r->name_off = s->names_len;
  if (len) memcpy(s->names + s->names_len, owner, len);
  s->names_len += len;
}

/* The allocator's peak hook: a new high of allocated bytes replaces the rows. */
static void snap_on_peak(void *ud, const ganfw_alloc *a) {
  snapshot *s = ud;
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  if (st.allocated.current <= s->best) return;
  s->best = st.allocated.current;
  s->best_phase = s->phase;
  s->n = 0;
  s->names_len = 0;
  ganfw_alloc_for_each_block(a, snap_collect, s);
}

/* Layer names: "<net>.<layer>" from every parameter ("main.0.weight" -> "main.0") and
 * every activation or workspace owner under a net's name. */
typedef struct name_set {
  char (*name)[GANFW_PROBE_NAME_MAX];
  int32_t n, cap;
} name_set;

static int set_add(name_set *set, const char *a, const char *b, size_t b_len) {
  char buf[GANFW_PROBE_NAME_MAX];
  if (b)
    snprintf(buf, sizeof buf, "%s.%.*s", a, (int)b_len, b);
  else
    snprintf(buf, sizeof buf, "%s", a);
  for (int32_t i = 0; i < set->n; i++)
    if (strcmp(set->name[i], buf) == 0) return 0;
  if (set->n == set->cap) {
    int32_t cap = set->cap ? set->cap * 2 : 64;
    void *p = realloc(set->name, (size_t)cap * sizeof *set->name);
    if (!p) return -1;
    set->name = p;
    set->cap = cap;
  }
  memcpy(set->name[set->n++], buf, sizeof buf);
  return 0;
}

/* The longest layer name that is `owner` or a dotted prefix of it; NULL when none. */
static const char *layer_of(const name_set *set, const char *owner) {
  const char *best = NULL;
  size_t best_len = 0;
  for (int32_t i = 0; i < set->n; i++) {
    size_t len = strlen(set->name[i]);
    if (len > best_len && strncmp(owner, set->name[i], len) == 0 &&
        (owner[len] == '\0' || owner[len] == '.')) {
      best = set->name[i];
      best_len = len;
    }
  }
  return best;
}

static int layer_cmp(const void *x, const void *y) {
  const ganfw_probe_layer *p = x, *q = y;
  if (p->total != q->total) return p->total > q->total ? -1 : 1;
  return strcmp(p->name, q->name);
}

static ganfw_status attribute_layers(ganfw_session *s, const snapshot *snap,
                                     ganfw_probe_result *out) {
  name_set set = {0};
  ganfw_net *nets[GANFW_MAX_NETS];
  for (int32_t k = 0; k < s->n_nets; k++) nets[k] = s->nets[k].net;
  int failed = 0;
  for (int k = 0; k < s->n_nets && !failed; k++) {
    int64_t n = ganfw_net_param_count(nets[k]);
    for (int64_t i = 0; i < n && !failed; i++) {
      ganfw_param_info info = {.struct_size = sizeof info};
      if (ganfw_net_param_info(nets[k], i, &info) != GANFW_OK || !info.name) continue;
      const char *dot = strrchr(info.name, '.');
      size_t len = dot ? (size_t)(dot - info.name) : strlen(info.name);
      failed = set_add(&set, ganfw_net_name(nets[k]), info.name, len) != 0;
    }
  }
  for (size_t i = 0; i < snap->n && !failed; i++) {
    const snap_row *r = &snap->rows[i];
    if (!r->has_owner ||
        (r->category != GANFW_MEM_ACTIVATION && r->category != GANFW_MEM_WORKSPACE))
      continue;
    const char *owner = snap->names + r->name_off;
    for (int k = 0; k < s->n_nets; k++) {
      const char *net = ganfw_net_name(nets[k]);
      size_t len = net ? strlen(net) : 0;
      if (net && strncmp(owner, net, len) == 0 && owner[len] == '.') {
        failed = set_add(&set, owner, NULL, 0) != 0;
        break;
      }
    }
  }
  ganfw_probe_layer *layers = failed ? NULL : calloc(snap->n + 1, sizeof *layers);
  int32_t n_layers = 0;
  for (size_t i = 0; i < snap->n && layers; i++) {
    const snap_row *r = &snap->rows[i];
    /* optimizer state is named after its net too (name_scope in runtime/ctx.h) */
    const char *owner = r->has_owner ? snap->names + r->name_off : "(unnamed)";
    const char *layer = layer_of(&set, owner);
    if (!layer) layer = owner;
    int32_t j = 0;
    while (j < n_layers && strncmp(layers[j].name, layer, GANFW_PROBE_NAME_MAX - 1) != 0) j++;
    if (j == n_layers) { /* a new row; long names are cut */
      size_t len = strnlen(layer, GANFW_PROBE_NAME_MAX - 1);
      memcpy(layers[n_layers].name, layer, len);
      layers[n_layers++].name[len] = '\0';
    }
    layers[j].bytes[r->category] += r->size;
    layers[j].total += r->size;
    out->at_peak[r->category] += r->size;
  }
  free(set.name);
  if (!layers) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory for the layer table");
  qsort(layers, (size_t)n_layers, sizeof *layers, layer_cmp);
  out->layers = layers;
  out->n_layers = n_layers;
  return GANFW_OK;
}

/* --- the probe ------------------------------------------------------------------------ */

typedef struct probe {
  const ganfw_probe_options *opt;
  ganfw_probe_result *out;
  ganfw_run *run;
  ganfw_config *side; /* the extra memory strategy's entry */
  ganfw_session *s;
  ganfw_loop L; /* the trainer's working set, as the training loop holds it */
  snapshot snap;
} probe;

static int is_oom(ganfw_status st) {
  return st == GANFW_ERR_OOM;
}

static void record_oom(probe *p, const char *where) {
  p->out->oom = 1;
  snprintf(p->out->oom_where, sizeof p->out->oom_where, "%s", where);
  snprintf(p->out->oom_report, sizeof p->out->oom_report, "%s", ganfw_error_message());
}

/* Appends options.extra_memory to the run's strategies, loading its plugin. */
static ganfw_status add_extra_memory(probe *p) {
  ganfw_run *run = p->run;
  char text[512];
  snprintf(text, sizeof text, "memory: [%s]\n", p->opt->extra_memory);
  ganfw_status st = ganfw_config_load_string(text, "(extra memory strategy)", &p->side);
  if (st != GANFW_OK) return st;
  if (run->n_memory == GANFW_MAX_MEMORY_PLUGINS)
    return ganfw_error_set(GANFW_ERR_CONFIG, "%s: memory: no room for another strategy",
                           run->config_path);
  const ganfw_cfg *item = ganfw_cfg_list_at(ganfw_config_root(p->side), "memory", 0);
  const char *name = NULL;
  if ((st = ganfw_cfg_string(item, "plugin", NULL, &name)) != GANFW_OK) return st;
  if (!name) return ganfw_error_set(GANFW_ERR_CONFIG, "%s: needs a plugin", p->opt->extra_memory);
  st = ganfw_plugin_load(name, GANFW_PLUGIN_MEMORY, p->opt->extra_memory,
                         (const char *const *)run->plugin_dirs, run->n_plugin_dirs,
                         &run->memory[run->n_memory]);
  if (st != GANFW_OK) return st;
  run->memory_cfg[run->n_memory++] = item;
  return GANFW_OK;
}

static ganfw_status open_run(probe *p, const ganfw_run_config *config) {
  const ganfw_probe_options *opt = p->opt;
  ganfw_status st = ganfw_run_open(config, &p->run);
  if (st != GANFW_OK) return st;
  if (opt->batch_size > 0) {
    char set[64];
    snprintf(set, sizeof set, "train.batch_size=%lld", (long long)opt->batch_size);
    if ((st = ganfw_config_set(p->run->config, set)) != GANFW_OK) return st;
  }
  p->out->config_memory_limit = p->run->ctx_opt.memory_limit;
  if (opt->limit_mode == GANFW_PROBE_LIMIT_NONE) p->run->ctx_opt.memory_limit = 0;
  if (opt->limit_mode == GANFW_PROBE_LIMIT_SET) p->run->ctx_opt.memory_limit = opt->memory_limit;
  p->run->ctx_opt.meta = opt->meta;
  if (opt->trace) { /* every step: the warm-up and the measured ones */
    p->run->ctx_opt.trace = 1;
    p->run->ctx_opt.trace_steps = opt->warmup + opt->steps; /* capacity: device.trace's */
  }
  p->out->memory_limit = p->run->ctx_opt.memory_limit;
  if (opt->extra_memory && (st = add_extra_memory(p)) != GANFW_OK) return st;
  return GANFW_OK;
}

/* The session and everything a training run holds before its first step: the trainer's
 * working set and inputs from its open() (the loader with real data), without what only a
 * run holds beside its steps (the test split, a sample grid's inputs). */
static ganfw_status set_up(probe *p) {
  const ganfw_probe_options *opt = p->opt;
  ganfw_probe_result *out = p->out;
  int32_t with_data = opt->real_data || !opt->info;
  ganfw_status st = ganfw_session_open(p->run, with_data, with_data ? NULL : opt->info, &p->s);
  if (st != GANFW_OK) return st;
  ganfw_session *s = p->s;
  out->batch_size = s->train.batch_size;
  out->ema_decay = s->train.ema_decay;
  for (int64_t i = 0; s->ema && i < s->ema->n; i++) /* the blocks, as the tables count */
    out->ema_bytes += (int64_t)ganfw_alloc_block_size(s->ctx->alloc, s->ema->avg[i]->data);
  out->micro_batches = s->exec.micro_batches;
  out->compute_dtype = s->exec.compute_dtype;
  out->data = s->data_info;
  size_t total = 0, free_bytes = 0;
  if (s->ctx->be->vt->capacity &&
      s->ctx->be->vt->capacity(s->ctx->be, &total, &free_bytes) == GANFW_OK) {
    out->capacity = (int64_t)total;
    out->free_bytes = (int64_t)free_bytes;
  }
  out->device_type = s->ctx->device_type;
  out->family = s->family;
  out->n_phases = 1;
  /* data-parallel (mpirun, or plan --ranks): this rank's rows, as the training loop holds
   * them */
  ganfw_loader_config lc;
  ganfw_dp_loader_config(s, &lc);
  out->ranks = ganfw_dp_ranks(s);
  for (int32_t i = 0; i < s->n_optim; i++) {
    out->zero_elems += ganfw_zero_shard_elems(&s->optim[i]);
    for (int64_t k = 0; ganfw_zero_sharded(&s->optim[i]) && k < s->optim[i].n_params; k++)
      out->zero_total += s->optim[i].params[k].value->numel;
  }
  ganfw_loop *L = &p->L;
  *L = (ganfw_loop){.s = s, .t = ganfw_session_trainer(s), .planning = 1};
  if (opt->real_data && (st = ganfw_loader_create(s->data, &lc, &L->loader)) != GANFW_OK) return st;
  if ((st = L->t->open(L, &L->self)) != GANFW_OK) return st;
  if (L->host_y) /* class 0 without data */
    memset(L->host_y, 0, (size_t)L->x->shape[0] * sizeof *L->host_y);
  return GANFW_OK;
}

/* The next batch (and its classes), as the training loop reads them; without the data set,
 * uniform noise images of class 0. */
static ganfw_status next_batch(probe *p, ganfw_batch_info *bi) {
  ganfw_session *s = p->s;
  ganfw_loop *L = &p->L;
  *bi = (ganfw_batch_info){.n = L->x->shape[0]};
  if (!L->loader) return ganfw_host_table()->rng_uniform(s->ctx, L->x, -1.0f, 1.0f);
  /* a full batch, as the steps take; an epoch has at most one short one */
  int64_t tries = ganfw_loader_batches_per_epoch(L->loader) + 2;
  ganfw_status st;
  do {
    if ((st = ganfw_loader_next(L->loader, L->host_x, L->host_y, bi)) != GANFW_OK) return st;
  } while (bi->n < s->train.batch_size && --tries > 0);
  if (bi->n < s->train.batch_size)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "train.batch_size %lld: the data set never gives a full batch "
                           "(%d images at most); lower train.batch_size",
                           (long long)s->train.batch_size, (int)bi->n);
  return ganfw_tensor_from_host(L->x, L->host_x, L->x->nbytes);
}

/* One step of the trainer, as the training loop runs it: skipped optimizer steps counted. */
static ganfw_status trainer_step(probe *p, const ganfw_batch_info *bi, ganfw_step_report *rep) {
  ganfw_loop *L = &p->L;
  ganfw_loop_step ls = {NULL, NULL};
  ganfw_status st = L->t->step(L->self, L, bi, &ls);
  if (st != GANFW_OK) return st;
  L->t->report(L->self, rep);
  p->out->skipped_d += rep->skipped_d;
  p->out->skipped_g += rep->skipped_g;
  return GANFW_OK;
}

static void take_phase(probe *p, int32_t phase) {
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(p->s->ctx->alloc, &st);
  ganfw_probe_result *out = p->out;
  ganfw_probe_phase *ph = &out->phase[phase];
  ph->allocated = max64(ph->allocated, st.allocated.peak);
  ph->reserved = max64(ph->reserved, st.reserved.peak);
  for (int c = 0; c < GANFW_MEM_COUNT; c++) {
    ph->category[c] = max64(ph->category[c], st.category[c].peak);
    out->peak_category[c] = max64(out->peak_category[c], st.category[c].peak);
  }
  if (st.allocated.peak > out->peak_allocated) {
    out->peak_allocated = st.allocated.peak;
    out->peak_phase = phase;
  }
  out->peak_reserved = max64(out->peak_reserved, st.reserved.peak);
}

/* The trainer starts phase `phase`: the running phase's peaks are taken, and the
 * allocator's reset for the new one. */
static void phase_began(void *user, int32_t phase, const char *name) {
  probe *p = user;
  ganfw_probe_result *out = p->out;
  if (phase >= GANFW_PHASE_COUNT) return;
  if (phase != p->snap.phase) {
    take_phase(p, p->snap.phase);
    ganfw_alloc_reset_peak(p->s->ctx->alloc);
  }
  p->snap.phase = phase;
  snprintf(out->phase_names[phase], sizeof out->phase_names[phase], "%s", name);
  if (phase + 1 > out->n_phases) out->n_phases = phase + 1;
}

static int dbl_cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* One measured step: each of the trainer's phases (a GAN's D step and G step, a trainer
 * plugin's named ones; one "step" without) measured from its start, the step made one that
 * runs every phase. */
static ganfw_status measured_step(probe *p, const ganfw_batch_info *bi) {
  ganfw_probe_result *out = p->out;
  const ganfw_loop_trainer *t = p->L.t;
  ganfw_alloc_reset_peak(p->s->ctx->alloc);
  p->snap.phase = 0;
  if (t->every_phase) t->every_phase(p->L.self);
  if (t->set_phase_hook) t->set_phase_hook(p->L.self, phase_began, p);
  ganfw_step_report rep;
  ganfw_status st = trainer_step(p, bi, &rep);
  if (t->set_phase_hook) t->set_phase_hook(p->L.self, NULL, NULL);
  take_phase(p, p->snap.phase);
  if (is_oom(st)) record_oom(p, ganfw_probe_phase_name(out, p->snap.phase));
  if (st != GANFW_OK) return st;
  out->loss_d = rep.loss_d;
  out->loss_g = rep.loss_g;
  out->loss = rep.loss;
  out->accuracy = rep.accuracy;
  snprintf(out->scalars, sizeof out->scalars, "%s", rep.scalars);
  return GANFW_OK;
}

static ganfw_status run_steps(probe *p) {
  const ganfw_probe_options *opt = p->opt;
  ganfw_probe_result *out = p->out;
  ganfw_alloc *a = p->s->ctx->alloc;
  ganfw_status st = GANFW_OK;
  for (int32_t k = 0; k < opt->warmup && st == GANFW_OK; k++) {
    ganfw_alloc_trace_step(a, k + 1); /* options.trace */
    ganfw_batch_info bi;
    ganfw_step_report rep;
    if ((st = ganfw_dp_step_begin(p->s, k + 1)) == GANFW_OK &&
        (st = next_batch(p, &bi)) == GANFW_OK)
      st = trainer_step(p, &bi, &rep);
    ganfw_alloc_trace_step_end(a);
    if (is_oom(st)) { /* the peaks up to the failed request */
      record_oom(p, "warm-up");
      ganfw_alloc_stats as;
      ganfw_alloc_get_stats(a, &as);
      out->peak_allocated = max64(out->peak_allocated, as.allocated.peak);
      out->peak_reserved = max64(out->peak_reserved, as.reserved.peak);
      for (int c = 0; c < GANFW_MEM_COUNT; c++)
        out->peak_category[c] = max64(out->peak_category[c], as.category[c].peak);
    }
  }
  if (st != GANFW_OK) return st;
  if (opt->layers) {
    ganfw_alloc_set_peak_hook(a, snap_on_peak, &p->snap);
  }
  double *times = calloc((size_t)opt->steps, sizeof *times);
  double *comm = calloc((size_t)opt->steps, sizeof *comm);
  if (!times || !comm) {
    free(times);
    free(comm);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  for (int32_t k = 0; k < opt->steps && st == GANFW_OK; k++) {
    ganfw_alloc_trace_step(a, opt->warmup + k + 1);
    if ((st = ganfw_dp_step_begin(p->s, opt->warmup + k + 1)) != GANFW_OK) break;
    ganfw_batch_info bi;
    if ((st = next_batch(p, &bi)) != GANFW_OK) break;
    ganfw_backend *be = p->s->ctx->be;
    ganfw_dp_take_comm_seconds(p->s);
    double t0 = ganfw_now_s();
    st = measured_step(p, &bi);
    if (st == GANFW_OK && be->vt->synchronize) st = be->vt->synchronize(be); /* queued kernels */
    times[k] = ganfw_now_s() - t0;
    comm[k] = ganfw_dp_take_comm_seconds(p->s);
    ganfw_alloc_trace_step_end(a);
    if (st == GANFW_OK) out->steps_done++;
  }
  ganfw_alloc_set_peak_hook(a, NULL, NULL);
  if (out->steps_done > 0) {
    qsort(times, (size_t)out->steps_done, sizeof *times, dbl_cmp);
    out->step_seconds = times[out->steps_done / 2];
    out->step_seconds_min = times[0];
    if (out->steps_done % 2 == 0)
      out->step_seconds = 0.5 * (out->step_seconds + times[out->steps_done / 2 - 1]);
    out->images_per_s = out->step_seconds > 0 ? (double)out->batch_size / out->step_seconds : 0.0;
    qsort(comm, (size_t)out->steps_done, sizeof *comm, dbl_cmp);
    out->comm_seconds = comm[out->steps_done / 2];
    if (out->steps_done % 2 == 0)
      out->comm_seconds = 0.5 * (out->comm_seconds + comm[out->steps_done / 2 - 1]);
  }
  free(times);
  free(comm);
  return st;
}

/* device.memory_layout: planned: the layout from a traced plan of the same config and
 * batch on the caching allocator without a memory_limit, for the run's allocator. No
 * layout (the cache alone) when that plan runs out of memory: the run will say where. */
static ganfw_status plan_layout(probe *p, const ganfw_run_config *config) {
  const ganfw_probe_options *opt = p->opt;
  const int32_t mode = opt->layout == GANFW_PROBE_LAYOUT_CONFIG    ? p->run->ctx_opt.memory_layout
                       : opt->layout == GANFW_PROBE_LAYOUT_PLANNED ? GANFW_LAYOUT_PLANNED
                                                                   : GANFW_LAYOUT_CACHING;
  if (mode != GANFW_LAYOUT_PLANNED) return GANFW_OK;
  ganfw_probe_options po = *opt;
  po.meta = 1;
  po.warmup = 1;
  po.steps = 1;
  po.layers = 0;
  po.trace = 1;
  po.summary = NULL;
  po.layout = GANFW_PROBE_LAYOUT_CACHING;
  po.limit_mode = GANFW_PROBE_LIMIT_NONE; /* the layout does not depend on the limit, and it
                                            may fit one that the cache does not */
  ganfw_probe_result plan;
  ganfw_status st = ganfw_probe_run(config, &po, &plan);
  if (st == GANFW_OK && !plan.oom &&
      (st = ganfw_layout_from_trace(plan.trace, plan.n_trace, &p->out->layout)) == GANFW_OK) {
    p->out->planned = 1;
    p->run->ctx_opt.layout = &p->out->layout.l;
  }
  ganfw_probe_result_free(&plan);
  return st;
}

static ganfw_status probe_body(probe *p, const ganfw_run_config *config) {
  ganfw_probe_result *out = p->out;
  ganfw_status st = open_run(p, config);
  if (st != GANFW_OK) return st;
  if ((st = plan_layout(p, config)) != GANFW_OK) return st;
  if ((st = set_up(p)) != GANFW_OK) {
    if (is_oom(st)) record_oom(p, "set-up");
    return st;
  }
  ganfw_alloc *a = p->s->ctx->alloc;
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(a, &as);
  out->setup_allocated = as.allocated.current;
  out->setup_reserved = as.reserved.current;
  for (int c = 0; c < GANFW_MEM_COUNT; c++) {
    out->setup_category[c] = as.category[c].current;
    out->peak_category[c] = as.category[c].peak;
  }
  out->peak_allocated = as.allocated.peak;
  out->peak_reserved = as.reserved.peak;
  out->peak_phase = -1;
  ganfw_alloc_reset_peak(a);
  st = run_steps(p);
  ganfw_alloc_get_stats(a, &as);
  out->num_alloc_retries = as.num_alloc_retries;
  out->num_planned = as.num_planned;
  out->num_unplanned = as.num_unplanned;
  out->planned_steps = as.planned_steps;
  out->unplanned_steps = as.unplanned_steps;
  if (out->planned && !as.arena_bytes) out->planned = 0; /* its segment did not fit */
  if (p->opt->trace) { /* kept past the session: the names are copied */
    ganfw_status tst = ganfw_alloc_trace_copy(a, &out->trace, &out->n_trace);
    if (tst == GANFW_OK && ganfw_trace_own_names(out->trace, out->n_trace, &out->trace_names) != 0)
      tst = ganfw_error_set(GANFW_ERR_OOM, "out of host memory keeping the allocator trace");
    if (st == GANFW_OK) st = tst;
  }
  if (p->opt->summary) ganfw_alloc_memory_summary(a, p->opt->summary);
  if (st == GANFW_OK && p->opt->layers && !p->snap.failed && p->snap.n > 0) {
    st = attribute_layers(p->s, &p->snap, out);
    out->peak_phase = p->snap.best_phase;
  }
  return st;
}

ganfw_status ganfw_probe_run(const ganfw_run_config *config, const ganfw_probe_options *opt,
                             ganfw_probe_result *out) {
  memset(out, 0, sizeof *out);
  out->meta = opt->meta;
  if (opt->steps < 1 || opt->warmup < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "probe: steps must be >= 1, warm-up >= 0");
  probe p = {.opt = opt, .out = out};
  const int32_t level = ganfw_log_level(); /* a plan is quiet: its set-up is not a run's */
  if (opt->meta && level < GANFW_LOG_WARN) ganfw_log_set_level(GANFW_LOG_WARN);
  ganfw_status st = probe_body(&p, config);
  ganfw_log_set_level(level);
  if (p.s && p.s->ctx) ganfw_alloc_set_peak_hook(p.s->ctx->alloc, NULL, NULL);
  ganfw_loop_close(&p.L);
  ganfw_session_close(p.s);
  ganfw_run_close(p.run);
  ganfw_config_destroy(p.side);
  free(p.snap.rows);
  free(p.snap.names);
  if (out->oom) {
    ganfw_error_clear();
    return GANFW_OK;
  }
  return st;
}
