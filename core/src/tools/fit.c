/* `ganfw fit`: candidates are the combinations of one option per dimension of `dims`
 * (precision, micro-batches, checkpoint segments, and the strategies whose plugins are
 * found), each planned on the meta backend (its exact peak, nothing allocated) and timed by
 * a calibrated model: per precision, the time of one micro-batch of m samples, measured at a
 * few m and interpolated linearly in m (a fixed cost per micro-batch plus a cost per
 * sample); other options multiply it by a ratio measured once against the config as it is.
 * The calibration is cached by config, device and CPU; the answer is a config file. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "config/config.h"
#include "plugin/plugin_host.h"
#include "tools/fit.h"
#include "tools/report.h"

#define MIB (1024.0 * 1024.0)

/* --- the search space: one row per dimension --------------------------------------------- */

/* How a dimension's options enter a candidate and its time. */
enum {
  ROLE_PRECISION, /* a memory strategy; the time curve is calibrated per option */
  ROLE_MICRO,     /* accumulate: options are the micro-batch counts dividing the batch */
  ROLE_MEMORY,    /* a memory strategy whose time is a ratio measured at the config */
  ROLE_OPTIM,     /* replaces optim.plugin; its time is a ratio too */
};

#define MAX_OPTIONS 16

typedef struct fit_dim {
  const char *name;        /* for tables */
  const char *plugin;      /* the plugin that must be found for the dimension to count */
  int32_t kind;            /* GANFW_PLUGIN_MEMORY or GANFW_PLUGIN_OPTIM */
  int32_t role;            /* ROLE_* */
  const char *needs_optim; /* ROLE_OPTIM: the optimizer it replaces ("adam") */
  const char *options[4];  /* option 0 is off (NULL); YAML flow maps, or a plugin name */
  const char *labels[4];
  const char *excludes; /* another dimension's plugin this one cannot combine with (both on
                           one net is refused), or NULL: such combinations are not planned */
} fit_dim;

/* Adding a strategy is one row here. Recompute, adam8bit and step_in_backward count only
 * where their plugins are installed; a combination a strategy refuses when configured
 * (step_in_backward with accumulation, say) is skipped. */
static const fit_dim dims[] = {
    {"precision",
     "amp",
     GANFW_PLUGIN_MEMORY,
     ROLE_PRECISION,
     NULL,
     {NULL, "{plugin: amp, dtype: f16}", "{plugin: amp, dtype: bf16}"},
     {"f32", "amp f16", "amp bf16"},
     NULL},
    {"micro-batches", "accumulate", GANFW_PLUGIN_MEMORY, ROLE_MICRO, NULL, {NULL}, {NULL}, NULL},
    {"checkpoint",
     "checkpoint",
     GANFW_PLUGIN_MEMORY,
     ROLE_MEMORY,
     NULL,
     {NULL, "{plugin: checkpoint, segments: 2}", "{plugin: checkpoint, segments: 3}"},
     {NULL, "checkpoint 2", "checkpoint 3"},
     NULL},
    {"recompute",
     "recompute",
     GANFW_PLUGIN_MEMORY,
     ROLE_MEMORY,
     NULL,
     /* no budget: the fewest activation bytes (recompute.c); a search over its budget
        would be more options of this row */
     {NULL, "{plugin: recompute}"},
     {NULL, "recompute (fewest bytes)"},
     "checkpoint"},
    {"step in backward",
     "step_in_backward",
     GANFW_PLUGIN_MEMORY,
     ROLE_MEMORY,
     NULL,
     {NULL, "{plugin: step_in_backward}"},
     {NULL, "step_in_backward"},
     NULL},
    {"optimizer state",
     "adam8bit",
     GANFW_PLUGIN_OPTIM,
     ROLE_OPTIM,
     "adam",
     {NULL, "adam8bit"},
     {NULL, "adam8bit"},
     NULL},
};
#define N_DIMS ((int32_t)(sizeof dims / sizeof dims[0]))
_Static_assert(sizeof dims / sizeof dims[0] <= GANFW_FIT_MAX_DIMS, "GANFW_FIT_MAX_DIMS");

static int32_t dim_of_role(int32_t role) {
  for (int32_t d = 0; d < N_DIMS; d++)
    if (dims[d].role == role) return d;
  return -1;
}

typedef struct search {
  const ganfw_run_config *config;
  const ganfw_fit_options *opt;
  ganfw_fit_result *res;
  ganfw_data_info info;
  int32_t n_opts[GANFW_FIT_MAX_DIMS]; /* options per dimension (1: only off) */
  int64_t micro[MAX_OPTIONS];         /* the micro-batch counts at the batch searched */
  int32_t n_micro;
  int32_t device_type;
  int64_t capacity, config_limit;
  const char *optim_plugin; /* the config's optim.plugin; NULL when absent */
  FILE *out;
} search;

/* --- budget ------------------------------------------------------------------------------ */

/* How the budget was given, for messages: "--budget", or the config key. */
static const char *budget_key(const ganfw_fit_options *opt) {
  return opt->budget_key ? opt->budget_key : "--budget";
}

ganfw_status ganfw_fit_parse_budget(const char *text, int64_t *bytes, double *percent) {
  *bytes = 0;
  *percent = 0.0;
  size_t len = text ? strlen(text) : 0;
  if (len > 1 && text[len - 1] == '%') {
    char *end = NULL;
    double p = strtod(text, &end);
    if (end == text + len - 1 && p > 0.0 && p <= 100.0) {
      *percent = p;
      return GANFW_OK;
    }
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "--budget '%s': a percentage must be more than 0%% and at most 100%%",
                           text);
  }
  if (len > 0 && ganfw_bytes_parse(text, bytes) == 0 && *bytes > 0) return GANFW_OK;
  *bytes = 0;
  return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                         "--budget '%s': expected a byte size such as 6GiB, 512MiB, 12MB or "
                         "1048576 (B, KB, MB, GB, TB = powers of 1000; K, M, G, T, KiB, MiB, "
                         "GiB, TiB = powers of 1024), or a percentage such as 60%%",
                         text ? text : "");
}

/* --- candidates ----------------------------------------------------------------------- */

static int64_t micro_of(const search *s, const ganfw_fit_candidate *c) {
  const int32_t d = dim_of_role(ROLE_MICRO);
  return d >= 0 && c->choice[d] > 0 ? s->micro[c->choice[d]] : 1;
}

/* The candidate's memory list, optimizer and label from its choices. */
static void describe(const search *s, ganfw_fit_candidate *c) {
  size_t m = 0, l = 0;
  c->memory[m++] = '[';
  c->memory[m] = c->label[0] = c->optim[0] = '\0';
  c->micro_batches = (int32_t)micro_of(s, c);
  for (int32_t d = 0; d < N_DIMS; d++) {
    const int32_t o = c->choice[d];
    char item[96] = "", label[64] = "";
    if (dims[d].role == ROLE_MICRO && o > 0) {
      snprintf(item, sizeof item, "{plugin: accumulate, steps: %lld}", (long long)s->micro[o]);
      snprintf(label, sizeof label, "accumulate %lld", (long long)s->micro[o]);
    } else if (dims[d].role == ROLE_OPTIM && o > 0) {
      snprintf(c->optim, sizeof c->optim, "%s", dims[d].options[o]);
      snprintf(label, sizeof label, "%s", dims[d].labels[o]);
    } else if (o > 0) {
      snprintf(item, sizeof item, "%s", dims[d].options[o]);
      snprintf(label, sizeof label, "%s", dims[d].labels[o]);
    }
    if (*item)
      m += (size_t)snprintf(c->memory + m, sizeof c->memory - m, "%s%s", m > 1 ? ", " : "", item);
    if (*label)
      l += (size_t)snprintf(c->label + l, sizeof c->label - l, "%s%s", l ? " + " : "", label);
  }
  snprintf(c->memory + m, sizeof c->memory - m, "]");
  if (!l) snprintf(c->label, sizeof c->label, "as is (f32)");
}

/* The config of candidate c (and batch): derived from `config`, nothing re-read; its
 * memory list replaces config's. */
static ganfw_status derive_from(const ganfw_run_config *config, int64_t base_batch,
                                const ganfw_fit_candidate *c, const char *extra,
                                ganfw_run_config **rc) {
  char mem[600], optim[80], batch[64];
  const char *sets[4];
  int n = 0;
  if (extra) sets[n++] = extra;
  snprintf(mem, sizeof mem, "memory=%s", c->memory);
  sets[n++] = mem;
  if (c->optim[0]) {
    snprintf(optim, sizeof optim, "optim.plugin=%s", c->optim);
    sets[n++] = optim;
  }
  if (c->batch != base_batch) {
    snprintf(batch, sizeof batch, "train.batch_size=%lld", (long long)c->batch);
    sets[n++] = batch;
  }
  return ganfw_run_config_derive(config, sets, n, rc);
}

static ganfw_status derive(const search *s, const ganfw_fit_candidate *c, ganfw_run_config **rc) {
  return derive_from(s->config, s->res->base_batch, c, NULL, rc);
}

/* Plans c on the meta backend without a limit: its peaks; refused when a strategy (or the
 * config with it) is refused. `layout` GANFW_PROBE_LAYOUT_CACHING plans every request on
 * the caching allocator (the search: a third of the time of a planned layout, which first
 * traces a plan to lay out); GANFW_PROBE_LAYOUT_CONFIG as the config runs. */
static ganfw_status plan_candidate(search *s, ganfw_fit_candidate *c, int32_t layers,
                                   int32_t layout, ganfw_probe_result *keep) {
  ganfw_run_config *rc = NULL;
  ganfw_status st = derive(s, c, &rc);
  ganfw_probe_options popt = {.meta = 1,
                              .warmup = 1,
                              .steps = 1,
                              .layers = layers,
                              .limit_mode = GANFW_PROBE_LIMIT_NONE,
                              .info = &s->info,
                              .layout = layout};
  ganfw_probe_result r;
  memset(&r, 0, sizeof r);
  if (st == GANFW_OK) st = ganfw_probe_run(rc, &popt, &r);
  ganfw_run_config_free(rc);
  if (st != GANFW_OK || r.oom) {
    c->refused = 1;
    ganfw_error_clear();
    ganfw_probe_result_free(&r);
    return GANFW_OK;
  }
  c->planned = 1;
  c->peak_allocated = r.peak_allocated;
  c->peak_reserved = r.peak_reserved;
  if (keep)
    *keep = r;
  else
    ganfw_probe_result_free(&r);
  return GANFW_OK;
}

/* --- the time model --------------------------------------------------------------------- */

/* The per-micro-batch time of precision p at micro size m, interpolated linearly in m
 * between the calibrated sizes (points at the base batch B: a point of k micro-batches is
 * micro size B/k and per-micro-batch time T/k). 0 when no point is known. */
static double micro_time(const ganfw_fit_calibration *cal, int64_t base_batch, int32_t p,
                         double m) {
  double lo_m = 0, lo_t = 0, hi_m = 0, hi_t = 0;
  int have_lo = 0, have_hi = 0;
  for (int32_t i = 0; i < cal->n_points; i++) {
    const ganfw_fit_point *pt = &cal->points[i];
    if (pt->dim >= 0 || pt->option != p) continue;
    const double pm = (double)base_batch / pt->micro_batches,
                 pt_t = pt->seconds / pt->micro_batches;
    if (pm <= m && (!have_lo || pm > lo_m)) lo_m = pm, lo_t = pt_t, have_lo = 1;
    if (pm >= m && (!have_hi || pm < hi_m)) hi_m = pm, hi_t = pt_t, have_hi = 1;
  }
  if (!have_lo && !have_hi) return 0.0;
  if (!have_lo) return hi_t * m / hi_m; /* below the smallest size: per sample */
  if (!have_hi) return lo_t * m / lo_m;
  if (hi_m == lo_m) return lo_t;
  return lo_t + (hi_t - lo_t) * (m - lo_m) / (hi_m - lo_m);
}

/* The measured ratio of option o of dimension d; 0 when unpriced. Checkpoint segments and
 * recompute only add work to the step (a forward's worth of recomputation), so a ratio
 * measured below 1 is the shared machine's noise (x 0.39 was seen): priced as 1. */
static double ratio_of(const ganfw_fit_calibration *cal, int32_t d, int32_t o) {
  for (int32_t i = 0; i < cal->n_points; i++)
    if (cal->points[i].dim == d && cal->points[i].option == o) {
      const double r = cal->points[i].seconds;
      const int adds_work =
          strcmp(dims[d].plugin, "checkpoint") == 0 || strcmp(dims[d].plugin, "recompute") == 0;
      return adds_work && r > 0.0 && r < 1.0 ? 1.0 : r;
    }
  return 0.0;
}

/* The base batch is kept in the key: predictions read it from there. */
static int64_t cal_base_batch(const ganfw_fit_calibration *cal) {
  const char *b = strstr(cal->key, " batch ");
  return b ? strtoll(b + 7, NULL, 10) : 0;
}

double ganfw_fit_predict(const ganfw_fit_calibration *cal, const ganfw_fit_candidate *c,
                         int32_t n_dims) {
  const int32_t dp = dim_of_role(ROLE_PRECISION);
  const int32_t p = dp >= 0 ? c->choice[dp] : 0;
  const int64_t base = cal_base_batch(cal);
  const int32_t k = c->micro_batches > 0 ? c->micro_batches : 1;
  if (base <= 0) return 0.0;
  double t = k * micro_time(cal, base, p, (double)c->batch / k);
  for (int32_t d = 0; d < n_dims && d < N_DIMS; d++) {
    if (dims[d].role == ROLE_PRECISION || dims[d].role == ROLE_MICRO || c->choice[d] == 0) continue;
    const double r = ratio_of(cal, d, c->choice[d]);
    if (r <= 0.0) return 0.0;
    t *= r;
  }
  return t;
}

/* --- the calibration and its cache ------------------------------------------------------ */

static uint64_t fnv1a(uint64_t h, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* The CPU's feature flags (the first "flags" line of /proc/cpuinfo), hashed; 0 unknown. */
static uint64_t cpu_features(char *model, size_t n) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  uint64_t h = 0;
  snprintf(model, n, "unknown CPU");
  if (!f) return 0;
  char line[8192];
  int have_model = 0;
  while (fgets(line, sizeof line, f)) {
    if (!have_model && strncmp(line, "model name", 10) == 0) {
      const char *v = strchr(line, ':');
      for (v = v ? v + 1 : NULL; v && *v == ' ';) v++;
      if (v) snprintf(model, n, "%s", v);
      model[strcspn(model, "\n")] = '\0';
      have_model = 1;
    }
    if (!h && strncmp(line, "flags", 5) == 0) h = fnv1a(1469598103934665603ull, line, strlen(line));
    if (h && have_model) break;
  }
  fclose(f);
  return h;
}

/* The key: the resolved config's hash (every key, extends merged), the device, the CPU's
 * model and features, the host's processors, the batch. */
static ganfw_status cal_key(search *s, char *key, size_t n) {
  ganfw_config *cfg = NULL;
  ganfw_status st = ganfw_config_copy(ganfw_run_config_tree(s->config), NULL, 0, &cfg);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = st == GANFW_OK ? open_memstream(&text, &len) : NULL;
  if (st == GANFW_OK && !mem) st = ganfw_error_set(GANFW_ERR_OOM, "fit: out of host memory");
  if (st == GANFW_OK) st = ganfw_config_write_resolved(cfg, mem);
  if (mem) fclose(mem);
  ganfw_config_destroy(cfg);
  if (st != GANFW_OK) {
    free(text);
    return st;
  }
  char model[160];
  const uint64_t features = cpu_features(model, sizeof model);
  const uint64_t h = fnv1a(1469598103934665603ull, text, len);
  free(text);
  snprintf(key, n, "config %016llx device %s cpu %016llx %ld procs (%s) batch %lld",
           (unsigned long long)h, s->device_type == GANFW_DEVICE_CPU ? "cpu" : "cuda",
           (unsigned long long)features, sysconf(_SC_NPROCESSORS_ONLN), model,
           (long long)s->res->base_batch);
  return GANFW_OK;
}

static void cache_path(const ganfw_fit_options *opt, const char *key, char *path, size_t n) {
  char dir[768];
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (opt->cache_dir)
    snprintf(dir, sizeof dir, "%s", opt->cache_dir);
  else if (xdg && *xdg)
    snprintf(dir, sizeof dir, "%s/ganfw", xdg);
  else
    snprintf(dir, sizeof dir, "%s/.cache/ganfw", home && *home ? home : "/tmp");
  snprintf(path, n, "%s/fit-%016llx.txt", dir,
           (unsigned long long)fnv1a(1469598103934665603ull, key, strlen(key)));
}

/* mkdir -p of path's folder. */
static int make_parent(const char *path) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return 0;
}

/* Reads the cache file when its key line is this key; missing or stale files read as
 * empty. */
static void cache_read(ganfw_fit_calibration *cal) {
  FILE *f = fopen(cal->path, "r");
  if (!f) return;
  char line[1024];
  if (!fgets(line, sizeof line, f) || strncmp(line, "key ", 4) != 0 ||
      strncmp(line + 4, cal->key, strlen(cal->key)) != 0 || line[4 + strlen(cal->key)] != '\n') {
    fclose(f);
    return;
  }
  while (fgets(line, sizeof line, f) && cal->n_points < GANFW_FIT_MAX_POINTS) {
    ganfw_fit_point pt;
    if (sscanf(line, "point %d %d %d %lf", &pt.dim, &pt.option, &pt.micro_batches, &pt.seconds) ==
            4 &&
        (pt.seconds > 0.0 || (pt.dim >= 0 && pt.seconds == 0.0)) && pt.micro_batches > 0)
      cal->points[cal->n_points++] = pt;
  }
  fclose(f);
  cal->cached = cal->n_points > 0;
}

/* Writes the whole table to a temporary file and renames it into place. */
static ganfw_status cache_write(const ganfw_fit_calibration *cal) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", cal->path, (long)getpid());
  FILE *f = make_parent(cal->path) == 0 ? fopen(tmp, "w") : NULL;
  if (!f)
    return ganfw_error_set(GANFW_ERR_IO,
                           "fit: cannot write the calibration cache %s: %s (set XDG_CACHE_HOME "
                           "to a writable folder)",
                           cal->path, strerror(errno));
  fprintf(f, "key %s\n", cal->key);
  fprintf(f, "# point DIM OPTION MICRO_BATCHES SECONDS: DIM -1 a precision's median step at "
             "that many micro-batches; else a dimension's option as a ratio to the step (0: "
             "refused by the config)\n");
  for (int32_t i = 0; i < cal->n_points; i++)
    fprintf(f, "point %d %d %d %.9g\n", cal->points[i].dim, cal->points[i].option,
            cal->points[i].micro_batches, cal->points[i].seconds);
  const int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
  if (fclose(f) != 0 || bad || rename(tmp, cal->path) != 0) {
    unlink(tmp);
    return ganfw_error_set(GANFW_ERR_IO, "fit: cannot write the calibration cache %s: %s",
                           cal->path, strerror(errno));
  }
  return GANFW_OK;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The fastest measured step of candidate c on the config's device (noise as data): other
 * work on the machine only ever adds to a step, so the fastest is the least disturbed. */
static ganfw_status measure(search *s, const ganfw_fit_candidate *c, double *seconds) {
  ganfw_run_config *rc = NULL;
  ganfw_status st = derive(s, c, &rc);
  const int32_t steps = s->opt->calib_steps > 0 ? s->opt->calib_steps : 3;
  ganfw_probe_options popt = {.meta = 0,
                              .warmup = 1,
                              .steps = steps,
                              .limit_mode = GANFW_PROBE_LIMIT_NONE,
                              .info = &s->info};
  ganfw_probe_result r;
  memset(&r, 0, sizeof r);
  if (st == GANFW_OK) st = ganfw_probe_run(rc, &popt, &r);
  ganfw_run_config_free(rc);
  if (st == GANFW_OK && (r.oom || r.step_seconds_min <= 0.0))
    st = ganfw_error_set(GANFW_ERR_OOM,
                         "fit: calibrating '%s' on the device: %s; free memory on the device "
                         "or set device.memory_limit",
                         c->label, r.oom ? r.oom_report : "no step was timed");
  *seconds = r.step_seconds_min;
  ganfw_probe_result_free(&r);
  return st;
}

static int32_t find_point(const ganfw_fit_calibration *cal, int32_t dim, int32_t option,
                          int32_t k) {
  for (int32_t i = 0; i < cal->n_points; i++)
    if (cal->points[i].dim == dim && cal->points[i].option == option &&
        cal->points[i].micro_batches == k)
      return i;
  return -1;
}

static ganfw_status add_point(search *s, int32_t dim, int32_t option, int32_t k, double v,
                              int32_t *dirty) {
  ganfw_fit_calibration *cal = &s->res->cal;
  if (cal->n_points == GANFW_FIT_MAX_POINTS)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "fit: more than %d calibration points",
                           GANFW_FIT_MAX_POINTS);
  cal->points[cal->n_points++] = (ganfw_fit_point){dim, option, k, v};
  *dirty = 1;
  return GANFW_OK;
}

/* The micro-batch counts whose step is measured per precision: 1, then every fourth power
 * of two dividing the batch, and the largest count searched. */
static int32_t calibrated_micro(const search *s, int64_t *ks) {
  int32_t n = 0;
  for (int32_t i = 0; i < s->n_micro; i++) {
    const int64_t k = s->micro[i];
    if (k == 1 || i == s->n_micro - 1 || (k & (k - 1)) == 0) {
      int quarter = 0; /* 1, 4, 16, 64, ... */
      for (int64_t q = 1; q <= k; q *= 4) quarter |= q == k;
      if (quarter || i == s->n_micro - 1) ks[n++] = k;
    }
  }
  return n;
}

/* Measures every point the model needs that the cache lacks, then rewrites the cache. */
static int dbl_cmp(const void *x, const void *y) {
  const double p = *(const double *)x, q = *(const double *)y;
  return p < q ? -1 : p > q;
}

/* One measurement the model needs: a precision's step at k micro-batches (dim -1) or a
 * dimension's option alone. */
typedef struct cal_job {
  ganfw_fit_candidate c;
  int32_t dim, option, k;
} cal_job;

/* The jobs of this search's dimensions; the first (the config as is) is the anchor. */
static int32_t cal_jobs(search *s, cal_job *jobs) {
  int64_t ks[MAX_OPTIONS];
  const int32_t nk = calibrated_micro(s, ks);
  const int32_t dp = dim_of_role(ROLE_PRECISION), dm = dim_of_role(ROLE_MICRO);
  int32_t n = 0;
  for (int32_t p = 0; p < s->n_opts[dp]; p++)
    for (int32_t j = 0; j < nk && n < GANFW_FIT_MAX_POINTS; j++) {
      cal_job *job = &jobs[n++];
      memset(job, 0, sizeof *job);
      job->c.batch = s->res->base_batch;
      job->c.choice[dp] = p;
      for (int32_t i = 0; i < s->n_micro; i++)
        if (s->micro[i] == ks[j]) job->c.choice[dm] = i;
      describe(s, &job->c);
      job->dim = -1, job->option = p, job->k = (int32_t)ks[j];
    }
  for (int32_t d = 0; d < N_DIMS; d++) {
    if (dims[d].role == ROLE_PRECISION || dims[d].role == ROLE_MICRO) continue;
    for (int32_t o = 1; o < s->n_opts[d] && n < GANFW_FIT_MAX_POINTS; o++) {
      cal_job *job = &jobs[n++];
      memset(job, 0, sizeof *job);
      job->c.batch = s->res->base_batch;
      job->c.choice[d] = o;
      describe(s, &job->c);
      job->dim = d, job->option = o, job->k = 1;
    }
  }
  return n;
}

/* Measures the model's points unless the cache holds every one. Each is measured between
 * two runs of the config as is, A J1 A J2 A ... Jn A, and kept as its ratio to the mean of
 * those two, so that the machine's speed drifting during the calibration (other work on a
 * shared CPU: 3x within a minute here) cancels out; a step point is that ratio times the
 * median of the runs as is, a ratio option the ratio itself. */
static ganfw_status calibrate(search *s) {
  ganfw_fit_calibration *cal = &s->res->cal;
  ganfw_status st = cal_key(s, cal->key, sizeof cal->key);
  if (st != GANFW_OK) return st;
  cache_path(s->opt, cal->key, cal->path, sizeof cal->path);
  cache_read(cal);
  static cal_job jobs[GANFW_FIT_MAX_POINTS];
  const int32_t n = cal_jobs(s, jobs);
  int32_t missing = 0;
  for (int32_t j = 0; j < n; j++)
    missing |= find_point(cal, jobs[j].dim, jobs[j].option, jobs[j].k) < 0;
  if (!missing) return GANFW_OK;
  cal->n_points = 0; /* a changed set of points is measured again as a whole */
  cal->cached = 0;
  const double t0 = now_s();
  double as_is[GANFW_FIT_MAX_POINTS + 1], ratio[GANFW_FIT_MAX_POINTS];
  int32_t refused[GANFW_FIT_MAX_POINTS] = {0};
  if (s->out) {
    fprintf(s->out, "Calibrating: %d runs between runs of the config as is ...\n", n - 1);
    fflush(s->out);
  }
  if ((st = measure(s, &jobs[0].c, &as_is[0])) != GANFW_OK) return st;
  for (int32_t j = 1; j < n; j++) {
    double t = 0.0;
    if (s->out) {
      fprintf(s->out, "  %-40s", jobs[j].c.label);
      fflush(s->out);
    }
    st = measure(s, &jobs[j].c, &t);
    if (st != GANFW_OK && jobs[j].dim >= 0 && ganfw_error_code() != GANFW_ERR_OOM) {
      ganfw_error_clear(); /* a strategy refused alone: no ratio, its candidates unpriced */
      refused[j] = 1;
      as_is[j] = as_is[j - 1];
      if (s->out) fprintf(s->out, " refused\n");
      continue;
    }
    if (st == GANFW_OK) st = measure(s, &jobs[0].c, &as_is[j]);
    if (st != GANFW_OK) return st;
    ratio[j] = t / (0.5 * (as_is[j - 1] + as_is[j]));
    if (s->out) fprintf(s->out, " %.4f s, x %.3f of the config as is\n", t, ratio[j]);
  }
  double sorted[GANFW_FIT_MAX_POINTS + 1];
  memcpy(sorted, as_is, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, dbl_cmp);
  const double anchor = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  int32_t dirty = 0;
  for (int32_t j = 0; j < n && st == GANFW_OK; j++) {
    /* a strategy the config refuses is kept as ratio 0 (unpriced), so that the cache holds
       every point and the next search does not measure again */
    const double v = refused[j]        ? 0.0
                     : j == 0          ? anchor
                     : jobs[j].dim < 0 ? ratio[j] * anchor
                                       : ratio[j];
    st = add_point(s, jobs[j].dim, jobs[j].option, jobs[j].k, v, &dirty);
  }
  cal->measure_seconds = now_s() - t0;
  if (st == GANFW_OK) st = cache_write(cal);
  return st;
}

static void print_calibration(const search *s, FILE *out) {
  const ganfw_fit_calibration *cal = &s->res->cal;
  fprintf(out, "Calibration (%s, %s):\n  key: %s\n",
          cal->cached ? "from the cache" : "measured now", cal->path, cal->key);
  if (!cal->cached) fprintf(out, "  measured in %.1f s\n", cal->measure_seconds);
  const int32_t dp = dim_of_role(ROLE_PRECISION);
  for (int32_t i = 0; i < cal->n_points; i++) {
    const ganfw_fit_point *pt = &cal->points[i];
    if (pt->dim < 0)
      fprintf(out, "  %-10s %3d micro-batch%s of %-5lld  step %8.4f s  (%.4f s each)\n",
              dims[dp].labels[pt->option], pt->micro_batches, pt->micro_batches == 1 ? " " : "es",
              (long long)(s->res->base_batch / pt->micro_batches), pt->seconds,
              pt->seconds / pt->micro_batches);
    else if (pt->seconds == 0.0)
      fprintf(out, "  %-24s refused by the config alone: unpriced\n",
              dims[pt->dim].labels[pt->option]);
    else
      fprintf(out, "  %-24s x %.3f of the step as is\n", dims[pt->dim].labels[pt->option],
              pt->seconds);
  }
}

#define CONFIRM_STEPS  5   /* measured steps of the confirming run */
#define EXTRA_SECONDS  2.0 /* planning the table's rows after the chosen one, at most */
#define FEASIBLE_ROWS  12  /* the fastest feasible candidates verified and printed */
#define SMALLEST_TRIES 4   /* nothing fits: the smallest candidates planned as the config runs */

/* --- the search ------------------------------------------------------------------------- */

/* The micro-batch counts dividing `batch` (1 first), at most MAX_OPTIONS - 1 of them: all
 * the powers of two and the largest count (batch itself). */
static void micro_options(search *s, int64_t batch) {
  s->n_micro = 0;
  s->micro[s->n_micro++] = 1;
  for (int64_t k = 2; k <= batch && s->n_micro < MAX_OPTIONS - 1; k++)
    if (batch % k == 0 && ((k & (k - 1)) == 0 || k == batch)) s->micro[s->n_micro++] = k;
}

/* Which dimensions' plugins are found, and how many options each has. */
static ganfw_status find_plugins(search *s) {
  ganfw_run *run = NULL;
  ganfw_status st = ganfw_run_open(s->config, &run);
  if (st != GANFW_OK) return st;
  const ganfw_cfg *root = ganfw_config_root(run->config);
  if (ganfw_cfg_list_len(root, "memory") > 0) {
    const ganfw_cfg *first = ganfw_cfg_list_at(root, "memory", 0);
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "fit: %s already names memory strategies (memory: at %s); fit "
                         "chooses them itself: give it the config they extend",
                         ganfw_run_config_path(s->config), ganfw_cfg_where(first));
    ganfw_run_close(run);
    return st;
  }
  static char optim[64];
  const char *name = NULL;
  optim[0] = '\0';
  if (ganfw_cfg_string(ganfw_cfg_section(root, "optim"), "plugin", NULL, &name) == GANFW_OK && name)
    snprintf(optim, sizeof optim, "%s", name);
  ganfw_error_clear();
  s->optim_plugin = optim[0] ? optim : NULL;
  ganfw_fit_result *res = s->res;
  res->n_dims = N_DIMS;
  for (int32_t d = 0; d < N_DIMS; d++) {
    res->dim_names[d] = dims[d].name;
    ganfw_plugin *p = NULL;
    int32_t applies = dims[d].role != ROLE_OPTIM ||
                      (s->optim_plugin && strcmp(s->optim_plugin, dims[d].needs_optim) == 0);
    if (applies && ganfw_plugin_load(dims[d].plugin, dims[d].kind, dims[d].plugin,
                                     (const char *const *)run->plugin_dirs, run->n_plugin_dirs,
                                     &p) == GANFW_OK) {
      res->dim_found[d] = 1;
      ganfw_plugin_unload(p);
    }
    ganfw_error_clear();
    int32_t n = 1;
    if (res->dim_found[d] && dims[d].role == ROLE_MICRO) n = s->n_micro;
    if (res->dim_found[d] && dims[d].role != ROLE_MICRO)
      while (n < 4 && dims[d].options[n]) n++;
    s->n_opts[d] = n;
  }
  ganfw_run_close(run);
  return GANFW_OK;
}

/* 1 when the combination idx turns on two dimensions that exclude each other. */
static int32_t excluded(const int32_t *idx) {
  for (int32_t d = 0; d < N_DIMS; d++) {
    if (!idx[d] || !dims[d].excludes) continue;
    for (int32_t e = 0; e < N_DIMS; e++)
      if (idx[e] && strcmp(dims[e].plugin, dims[d].excludes) == 0) return 1;
  }
  return 0;
}

/* Plans every candidate at `batch` (the combinations of one option per dimension, but those
 * of dimensions that exclude each other). */
static ganfw_status plan_all(search *s, int64_t batch) {
  ganfw_fit_result *res = s->res;
  int32_t idx[GANFW_FIT_MAX_DIMS] = {0};
  for (;;) {
    if (res->n_candidates == GANFW_FIT_MAX_CANDIDATES) break;
    if (excluded(idx)) goto next;
    ganfw_fit_candidate *c = &res->candidates[res->n_candidates];
    memset(c, 0, sizeof *c);
    memcpy(c->choice, idx, sizeof idx);
    c->batch = batch;
    describe(s, c);
    ganfw_status st = plan_candidate(s, c, 0, GANFW_PROBE_LAYOUT_CACHING, NULL);
    if (st != GANFW_OK) return st;
    res->n_candidates++;
  next:;
    int32_t d = 0; /* the next combination, the last dimension fastest */
    for (d = N_DIMS - 1; d >= 0; d--) {
      if (++idx[d] < s->n_opts[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
  return GANFW_OK;
}

static int32_t by_time_order(const ganfw_fit_result *res, int32_t i, int32_t j) {
  const ganfw_fit_candidate *p = &res->candidates[i], *q = &res->candidates[j];
  if (p->predicted_s != q->predicted_s) return p->predicted_s < q->predicted_s ? -1 : 1;
  return p->peak_allocated < q->peak_allocated ? -1 : p->peak_allocated > q->peak_allocated;
}

/* Plans c again as the config runs (device.memory_layout: its peak reserved, which the
 * budget caps): c->verified, peak_reserved and feasible. */
static ganfw_status verify(search *s, ganfw_fit_candidate *c) {
  ganfw_fit_candidate v = *c;
  ganfw_status st = plan_candidate(s, &v, 0, GANFW_PROBE_LAYOUT_CONFIG, NULL);
  if (st != GANFW_OK) return st;
  c->verified = 1;
  if (v.refused) { /* planned on the cache, refused laid out: not a candidate */
    c->refused = 1;
    c->planned = c->feasible = c->pareto = 0;
    return GANFW_OK;
  }
  c->peak_allocated = v.peak_allocated;
  c->peak_reserved = v.peak_reserved;
  c->feasible = c->peak_reserved <= s->res->budget;
  return GANFW_OK;
}

/* The Pareto front (peak allocated, the same in either layout, against predicted time);
 * then, fastest first among those whose allocated peak is within the budget, each planned
 * as the config runs until one's reserved peak fits (the chosen), and a few more for the
 * table; with none, the smallest candidates by allocated peak, for the smallest budget. */
static ganfw_status choose(search *s, int32_t first) {
  ganfw_fit_result *res = s->res;
  res->chosen = res->smallest = -1;
  int32_t *order = malloc((size_t)res->n_candidates * sizeof *order);
  if (!order) return ganfw_error_set(GANFW_ERR_OOM, "fit: out of host memory");
  int32_t n = 0;
  for (int32_t i = first; i < res->n_candidates; i++) {
    ganfw_fit_candidate *c = &res->candidates[i];
    c->feasible = c->pareto = 0;
    if (!c->planned) continue;
    c->predicted_s = ganfw_fit_predict(&res->cal, c, res->n_dims);
    if (c->predicted_s > 0.0) order[n++] = i;
  }
  for (int32_t a = 1; a < n; a++) /* insertion sort by predicted time: a few hundred */
    for (int32_t b = a; b > 0 && by_time_order(res, order[b], order[b - 1]) < 0; b--) {
      const int32_t t = order[b];
      order[b] = order[b - 1];
      order[b - 1] = t;
    }
  int64_t front = INT64_MAX; /* the least allocated peak of the faster ones */
  for (int32_t a = 0; a < n; a++) {
    ganfw_fit_candidate *c = &res->candidates[order[a]];
    c->pareto = c->peak_allocated < front;
    if (c->pareto) front = c->peak_allocated;
  }
  ganfw_status st = GANFW_OK;
  int32_t extra = 0;
  const double t0 = now_s();
  for (int32_t a = 0; a < n && st == GANFW_OK; a++) {
    ganfw_fit_candidate *c = &res->candidates[order[a]];
    if (c->peak_allocated > res->budget) continue;
    /* the table's rows after the chosen one: at most FEASIBLE_ROWS, for EXTRA_SECONDS (a
     * planned layout of 128 micro-batches takes seconds to lay out) */
    if (res->chosen >= 0 && (++extra > FEASIBLE_ROWS || now_s() - t0 > EXTRA_SECONDS)) break;
    if ((st = verify(s, c)) == GANFW_OK && c->feasible && res->chosen < 0) res->chosen = order[a];
  }
  if (res->chosen < 0 && st == GANFW_OK) { /* the few smallest by allocated peak */
    for (int32_t k = 0; k < SMALLEST_TRIES && st == GANFW_OK; k++) {
      int32_t m = -1;
      for (int32_t a = 0; a < n; a++) {
        const ganfw_fit_candidate *c = &res->candidates[order[a]];
        if (!c->verified && (m < 0 || c->peak_allocated < res->candidates[m].peak_allocated))
          m = order[a];
      }
      if (m < 0) break;
      st = verify(s, &res->candidates[m]);
    }
  }
  for (int32_t a = 0; a < n; a++) {
    const ganfw_fit_candidate *c = &res->candidates[order[a]];
    if (c->verified && c->planned &&
        (res->smallest < 0 || c->peak_reserved < res->candidates[res->smallest].peak_reserved))
      res->smallest = order[a];
  }
  free(order);
  return st;
}

/* --- output ----------------------------------------------------------------------------- */

static int cand_by_peak(const void *x, const void *y) {
  const ganfw_fit_candidate *const *p = x, *const *q = y;
  if ((*p)->peak_allocated != (*q)->peak_allocated)
    return (*p)->peak_allocated < (*q)->peak_allocated ? -1 : 1;
  return (*p)->predicted_s < (*q)->predicted_s ? -1 : (*p)->predicted_s > (*q)->predicted_s;
}

static int cand_by_time(const void *x, const void *y) {
  const ganfw_fit_candidate *const *p = x, *const *q = y;
  if ((*p)->predicted_s != (*q)->predicted_s) return (*p)->predicted_s < (*q)->predicted_s ? -1 : 1;
  return (*p)->peak_reserved < (*q)->peak_reserved ? -1 : (*p)->peak_reserved > (*q)->peak_reserved;
}

static void print_rows(const ganfw_fit_result *res, int32_t pareto, FILE *out) {
  const ganfw_fit_candidate **rows = malloc((size_t)res->n_candidates * sizeof *rows);
  if (!rows) return;
  int32_t n = 0;
  for (int32_t i = 0; i < res->n_candidates; i++) {
    const ganfw_fit_candidate *c = &res->candidates[i];
    if (pareto ? c->pareto : c->feasible) rows[n++] = c;
  }
  qsort(rows, (size_t)n, sizeof *rows, pareto ? cand_by_peak : cand_by_time);
  const int32_t shown = pareto || n <= FEASIBLE_ROWS ? n : FEASIBLE_ROWS;
  fprintf(out, "  %-52s %7s %14s %14s %11s %s\n", "candidate", "batch", "peak alloc MiB",
          "peak resv MiB", "predicted s", "fits");
  for (int32_t i = 0; i < shown; i++) {
    const ganfw_fit_candidate *c = rows[i];
    char resv[32] = "-"; /* reserved as the config runs; "-": not planned so */
    if (c->verified) snprintf(resv, sizeof resv, "%.2f", (double)c->peak_reserved / MIB);
    const char *fits = c->verified                       ? (c->feasible ? "yes" : "no")
                       : c->peak_allocated > res->budget ? "no"
                                                         : "?";
    fprintf(out, "  %-52s %7lld %14.2f %14s %11.4f %-4s%s\n", c->label, (long long)c->batch,
            (double)c->peak_allocated / MIB, resv, c->predicted_s, fits,
            res->chosen >= 0 && c == &res->candidates[res->chosen] ? " <- chosen" : "");
  }
  if (shown < n) fprintf(out, "  ... and %d slower\n", n - shown);
  int32_t unverified = 0; /* within the budget by allocated bytes, reserved not known */
  for (int32_t i = 0; i < res->n_candidates && !pareto; i++) {
    const ganfw_fit_candidate *c = &res->candidates[i];
    unverified += c->planned && !c->verified && c->peak_allocated <= res->budget;
  }
  if (unverified)
    fprintf(out,
            "  (%d slower ones whose allocated peak is within the budget were not planned as "
            "the config runs)\n",
            unverified);
  free(rows);
}

/* target (absolute) as a path relative to the folder from_dir (absolute), for
 * `extends:`. */
static void relative_path(const char *from_dir, const char *target, char *buf, size_t n) {
  size_t common = 0, i = 0; /* the '/' ending the longest common run of whole names */
  for (; from_dir[i] && from_dir[i] == target[i]; i++)
    if (from_dir[i] == '/') common = i;
  if (from_dir[i] == '\0' && target[i] == '/') common = i;
  size_t o = 0;
  buf[0] = '\0';
  for (const char *p = from_dir + common; *p; p++) /* one "../" per name left in from_dir */
    if (*p == '/' && p[1] && o + 4 < n) o += (size_t)snprintf(buf + o, n - o, "../");
  snprintf(buf + o, n - o, "%s", target + common + 1);
}

static ganfw_status write_config(search *s, const ganfw_fit_candidate *c, const char *command) {
  ganfw_fit_result *res = s->res;
  const char *input = ganfw_run_config_path(s->config);
  if (s->opt->output)
    snprintf(res->written, sizeof res->written, "%s", s->opt->output);
  else {
    const char *base = strrchr(input, '/') ? strrchr(input, '/') + 1 : input;
    const size_t stem = strcspn(base, ".");
    snprintf(res->written, sizeof res->written, "%.*s_fit.yaml", (int)stem, base);
  }
  char in_abs[PATH_MAX], out_dir[PATH_MAX], dir[PATH_MAX], rel[PATH_MAX * 2];
  snprintf(dir, sizeof dir, "%s", res->written);
  char *slash = strrchr(dir, '/');
  if (slash)
    *(slash == dir ? slash + 1 : slash) = '\0';
  else
    snprintf(dir, sizeof dir, ".");
  if (make_parent(res->written) != 0 || !realpath(input, in_abs) || !realpath(dir, out_dir))
    return ganfw_error_set(GANFW_ERR_IO, "fit: -o %s: cannot resolve '%s': %s", res->written,
                           realpath(input, in_abs) ? dir : input, strerror(errno));
  relative_path(out_dir, in_abs, rel, sizeof rel);
  FILE *f = fopen(res->written, "w");
  if (!f)
    return ganfw_error_set(GANFW_ERR_IO, "fit: cannot write -o %s: %s", res->written,
                           strerror(errno));
  fprintf(f,
          "# Written by `%s`: the fastest setup whose planned step fits %.2f MiB (%s)\n"
          "# is %s: planned peak %.2f MiB allocated, %.2f MiB reserved; predicted step %.4f s.\n"
          "# Differs from the config it extends by these lines.\n"
          "extends: %s\n",
          command, (double)res->budget / MIB, res->budget_source, c->label,
          (double)c->peak_allocated / MIB, (double)c->peak_reserved / MIB, c->predicted_s, rel);
  if (strcmp(c->memory, "[]") != 0) {
    fprintf(f, "memory:\n");
    const char *p = c->memory + 1;
    while (*p == '{') { /* one block item per flow map */
      const char *end = strchr(p, '}');
      fprintf(f, "  - %.*s\n", (int)(end - p + 1), p);
      p = end + 1;
      while (*p == ',' || *p == ' ') p++;
    }
  }
  if (c->optim[0]) fprintf(f, "optim:\n  plugin: %s\n", c->optim);
  if (c->batch != res->base_batch) fprintf(f, "train:\n  batch_size: %lld\n", (long long)c->batch);
  if (fclose(f) != 0)
    return ganfw_error_set(GANFW_ERR_IO, "fit: cannot write -o %s: %s", res->written,
                           strerror(errno));
  return GANFW_OK;
}

/* The error for a budget under every candidate: the smallest feasible budget and what
 * dominates it, from the per-layer plan of the smallest candidate. */
static ganfw_status too_small(search *s) {
  ganfw_fit_result *res = s->res;
  ganfw_fit_candidate c = res->candidates[res->smallest];
  ganfw_probe_result r;
  memset(&r, 0, sizeof r);
  plan_candidate(s, &c, 1, GANFW_PROBE_LAYOUT_CONFIG, &r);
  char what[512] = "";
  if (c.planned) {
    int32_t big = 0;
    for (int32_t k = 1; k < GANFW_MEM_COUNT; k++)
      if (r.at_peak[k] > r.at_peak[big]) big = k;
    int64_t total = 0;
    for (int32_t k = 0; k < GANFW_MEM_COUNT; k++) total += r.at_peak[k];
    int n = snprintf(what, sizeof what,
                     "; at its peak (in the %s) %s is the largest part, %.2f MiB of %.2f MiB",
                     ganfw_probe_phase_name(&r, r.peak_phase), ganfw_mem_category_name(big),
                     (double)r.at_peak[big] / MIB, (double)total / MIB);
    if (r.n_layers > 0 && n > 0 && (size_t)n < sizeof what)
      snprintf(what + n, sizeof what - (size_t)n, ", and %s holds the most, %.2f MiB",
               r.layers[0].name, (double)r.layers[0].total / MIB);
  }
  ganfw_probe_result_free(&r);
  char batch[48] = "";
  if (c.batch != res->base_batch)
    snprintf(batch, sizeof batch, " at batch %lld", (long long)c.batch);
  return ganfw_error_set(
      GANFW_ERR_OOM,
      "fit: %s %.2f MiB (%s) is below what any candidate reaches: the "
      "smallest feasible budget is %.2f MiB (%lld bytes), with %s%s%s; give "
      "%s at least that%s%s%s",
      budget_key(s->opt), (double)res->budget / MIB, res->budget_source,
      (double)c.peak_reserved / MIB, (long long)c.peak_reserved, c.label, batch, what,
      budget_key(s->opt), s->opt->allow_batch ? "" : ", or ",
      s->opt->allow_batch ? "" : (s->opt->budget_key ? "allow_batch: true" : "--allow-batch"),
      s->opt->allow_batch ? "" : " to let the batch shrink");
}

/* CONFIRM_STEPS real steps of the written config under the budget, after one warm-up. */
static ganfw_status confirm(search *s, const ganfw_fit_candidate *c) {
  ganfw_fit_result *res = s->res;
  ganfw_run_config *rc = NULL;
  ganfw_status st = ganfw_run_config_open(res->written, NULL, 0, &rc);
  ganfw_probe_options popt = {.meta = 0,
                              .warmup = 1,
                              .steps = CONFIRM_STEPS,
                              .limit_mode = GANFW_PROBE_LIMIT_SET,
                              .memory_limit = res->budget,
                              .info = &s->info};
  if (st == GANFW_OK) st = ganfw_probe_run(rc, &popt, &res->real);
  ganfw_run_config_free(rc);
  if (st != GANFW_OK) return st;
  res->confirmed = 1;
  res->confirm_fits = !res->real.oom && res->real.peak_reserved <= res->budget;
  if (!res->real.oom && c->predicted_s > 0.0)
    res->confirm_error = (res->real.step_seconds_min - c->predicted_s) / c->predicted_s;
  /* The config as is, measured just after: how fast the machine is now, against the
   * calibration's (a shared machine's speed drifts); not when it would not fit the device */
  ganfw_fit_candidate as_is = {.batch = res->base_batch};
  describe(s, &as_is);
  const double predicted_as_is = ganfw_fit_predict(&res->cal, &as_is, res->n_dims);
  const int32_t fits_device =
      s->device_type == GANFW_DEVICE_CPU || s->capacity <= 0 ||
      (res->n_candidates > 0 && res->candidates[0].peak_reserved <= s->capacity);
  if (res->real.oom || predicted_as_is <= 0.0 || !fits_device || c->batch != res->base_batch)
    return GANFW_OK;
  if ((st = measure(s, &as_is, &res->confirm_as_is_s)) != GANFW_OK) {
    ganfw_error_clear(); /* only a second opinion: leave it out */
    res->confirm_as_is_s = 0.0;
    return GANFW_OK;
  }
  res->confirm_as_is_predicted_s = predicted_as_is;
  res->confirm_relative_error =
      (res->real.step_seconds_min / res->confirm_as_is_s) / (c->predicted_s / predicted_as_is) -
      1.0;
  return GANFW_OK;
}

/* The budget in bytes, from --budget, and the base config's batch and data shape. */
static ganfw_status budget_of(search *s) {
  ganfw_fit_result *res = s->res;
  const ganfw_fit_options *opt = s->opt;
  ganfw_probe_options popt = {
      .meta = 1, .warmup = 0, .steps = 1, .limit_mode = GANFW_PROBE_LIMIT_NONE};
  ganfw_probe_result r;
  ganfw_status st = ganfw_probe_run(s->config, &popt, &r);
  ganfw_probe_result_free(&r);
  if (st != GANFW_OK) return st;
  s->info = r.data;
  res->base_batch = r.batch_size;
  s->device_type = r.device_type;
  s->capacity = r.capacity;
  s->config_limit = res->config_limit = r.config_memory_limit;
  if (opt->budget > 0) {
    res->budget = opt->budget;
    snprintf(res->budget_source, sizeof res->budget_source, "%s %lld bytes", budget_key(opt),
             (long long)opt->budget);
    if (opt->budget % (1 << 20) == 0)
      snprintf(res->budget_source, sizeof res->budget_source, "%s %lldMiB", budget_key(opt),
               (long long)(opt->budget >> 20));
    return GANFW_OK;
  }
  if (!(opt->budget_percent > 0.0 && opt->budget_percent <= 100.0))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "fit: --budget is required (bytes such as 6GiB, or a percentage)");
  const int64_t of = s->config_limit > 0 ? s->config_limit : s->capacity;
  if (of <= 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "fit: %s %g%%: the device reports no capacity and the config "
                           "sets no device.memory_limit to take it of; give %s in bytes "
                           "(6GiB) or set device.memory_limit",
                           budget_key(opt), opt->budget_percent, budget_key(opt));
  res->budget = (int64_t)((double)of * opt->budget_percent / 100.0);
  snprintf(res->budget_source, sizeof res->budget_source, "%g%% of %s %.2f MiB",
           opt->budget_percent,
           s->config_limit > 0 ? "device.memory_limit" : "the device's capacity", (double)of / MIB);
  return GANFW_OK;
}

ganfw_status ganfw_fit(const ganfw_run_config *config, const ganfw_fit_options *opt,
                       ganfw_fit_result *res, FILE *out) {
  memset(res, 0, sizeof *res);
  res->chosen = res->smallest = -1;
  search s = {.config = config, .opt = opt, .res = res, .out = out};
  const int32_t level = ganfw_log_level();
  if (level < GANFW_LOG_WARN) ganfw_log_set_level(GANFW_LOG_WARN);
  res->candidates = calloc(GANFW_FIT_MAX_CANDIDATES, sizeof *res->candidates);
  ganfw_status st =
      res->candidates ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "fit: out of host memory");
  if (st == GANFW_OK) st = budget_of(&s);
  if (st == GANFW_OK) micro_options(&s, res->base_batch);
  if (st == GANFW_OK) st = find_plugins(&s);
  if (st == GANFW_OK && out)
    fprintf(out, "fit %s: budget %.2f MiB (%s), batch %lld\n", ganfw_run_config_path(config),
            (double)res->budget / MIB, res->budget_source, (long long)res->base_batch);
  if (st == GANFW_OK) st = calibrate(&s);
  if (st == GANFW_OK && out && (opt->show_calibration || !res->cal.cached))
    print_calibration(&s, out);
  const double t0 = now_s();
  int64_t batch = res->base_batch;
  while (st == GANFW_OK) {
    micro_options(&s, batch);
    const int32_t dm = dim_of_role(ROLE_MICRO);
    if (res->dim_found[dm]) s.n_opts[dm] = s.n_micro;
    const int32_t first = res->n_candidates;
    if ((st = plan_all(&s, batch)) != GANFW_OK) break;
    if ((st = choose(&s, first)) != GANFW_OK) break;
    if (res->candidates[first].refused) { /* the config as it is must plan */
      ganfw_fit_candidate c = res->candidates[first];
      ganfw_run_config *rc = NULL;
      ganfw_probe_options popt = {.meta = 1,
                                  .warmup = 1,
                                  .steps = 1,
                                  .info = &s.info,
                                  .limit_mode = GANFW_PROBE_LIMIT_NONE};
      ganfw_probe_result r;
      memset(&r, 0, sizeof r);
      st = derive(&s, &c, &rc);
      if (st == GANFW_OK) st = ganfw_probe_run(rc, &popt, &r);
      ganfw_run_config_free(rc);
      ganfw_probe_result_free(&r);
      if (st == GANFW_OK)
        st = ganfw_error_set(GANFW_ERR_CONFIG, "fit: %s cannot be planned at batch %lld",
                             ganfw_run_config_path(config), (long long)batch);
      break;
    }
    if (res->chosen >= 0 || !opt->allow_batch || batch <= 1) break;
    batch /= 2; /* --allow-batch: halve the batch while nothing fits */
  }
  res->search_seconds = now_s() - t0;
  if (st == GANFW_OK && out) {
    int32_t refused = 0;
    for (int32_t i = 0; i < res->n_candidates; i++) refused += res->candidates[i].refused;
    fprintf(out, "\n%d candidates planned in %.2f s (%d refused by a strategy); dimensions:",
            res->n_candidates, res->search_seconds, refused);
    for (int32_t d = 0; d < res->n_dims; d++)
      fprintf(out, " %s%s", dims[d].name, res->dim_found[d] ? "" : " (plugin not found)");
    fprintf(out, "\n\nPareto front (peak allocated against predicted step time):\n");
    print_rows(res, 1, out);
    fprintf(out, "\nFeasible under %.2f MiB (planned peak reserved <= budget), fastest first:\n",
            (double)res->budget / MIB);
    if (res->chosen >= 0)
      print_rows(res, 0, out);
    else
      fprintf(out, "  none\n");
  }
  if (st == GANFW_OK && opt->plot) {
    st = ganfw_fit_plot(res, opt->plot);
    if (st == GANFW_OK && out) fprintf(out, "\nThe front: %s\n", opt->plot);
  }
  if (st == GANFW_OK && res->chosen < 0 && res->smallest >= 0) st = too_small(&s);
  if (st == GANFW_OK && res->chosen < 0)
    st = ganfw_error_set(GANFW_ERR_CONFIG, "fit: no candidate of %s could be planned",
                         ganfw_run_config_path(config));
  const ganfw_fit_candidate *c = st == GANFW_OK ? &res->candidates[res->chosen] : NULL;
  char command[1200];
  if (c) {
    snprintf(command, sizeof command, "ganfw fit %s", ganfw_run_config_path(config));
    if (!opt->output || opt->output[0]) st = write_config(&s, c, command);
  }
  if (st == GANFW_OK && c && out) {
    fprintf(out,
            "\nChosen: %s at batch %lld: planned peak %.2f MiB allocated, %.2f MiB reserved of "
            "%.2f MiB; predicted step %.4f s\n",
            c->label, (long long)c->batch, (double)c->peak_allocated / MIB,
            (double)c->peak_reserved / MIB, (double)res->budget / MIB, c->predicted_s);
    if (res->written[0]) fprintf(out, "Written: %s\n", res->written);
  }
  if (st == GANFW_OK && c && opt->html) {
    st = ganfw_fit_html(res, opt->html);
    if (st == GANFW_OK && out) fprintf(out, "Memory report: %s\n", opt->html);
  }
  if (st == GANFW_OK && c && opt->confirm && res->written[0]) {
    if (out) {
      fprintf(out, "Confirming with %d real steps under a memory_limit of the budget ...\n",
              CONFIRM_STEPS);
      fflush(out);
    }
    st = confirm(&s, c);
    if (st == GANFW_OK && out) {
      if (res->real.oom)
        fprintf(out,
                "The real steps ran OUT OF MEMORY in the %s (the plan is wrong; please "
                "report it)\n",
                res->real.oom_where);
      else
        fprintf(out,
                "Measured: peak %.2f MiB allocated, %.2f MiB reserved (%s the budget); step "
                "%.4f s (fastest of %d; median %.4f s), %+.1f%% from the predicted %.4f s (%s "
                "15%%)\n",
                (double)res->real.peak_allocated / MIB, (double)res->real.peak_reserved / MIB,
                res->confirm_fits ? "within" : "OVER", res->real.step_seconds_min, CONFIRM_STEPS,
                res->real.step_seconds, 100.0 * res->confirm_error, c->predicted_s,
                fabs(res->confirm_error) <= 0.15 ? "within" : "NOT within");
      if (!res->real.oom && res->confirm_as_is_s > 0.0)
        fprintf(out,
                "The config as is, measured just after: %.4f s (calibrated %.4f s); the chosen "
                "one's step over it, %.3f, is %+.1f%% from the model's ratio %.3f (%s 15%%)\n",
                res->confirm_as_is_s, res->confirm_as_is_predicted_s,
                res->real.step_seconds_min / res->confirm_as_is_s,
                100.0 * res->confirm_relative_error,
                c->predicted_s / res->confirm_as_is_predicted_s,
                fabs(res->confirm_relative_error) <= 0.15 ? "within" : "NOT within");
    }
  }
  ganfw_log_set_level(level);
  return st;
}

void ganfw_fit_result_free(ganfw_fit_result *res) {
  if (!res) return;
  free(res->candidates);
  res->candidates = NULL;
  ganfw_probe_result_free(&res->real);
}

/* --- find-batch --fit ------------------------------------------------------------------- */

/* Whether some candidate without accumulation fits the budget at batch b; *best the one
 * of the smallest planned reserved peak (when any was planned). */
static ganfw_status any_fits(search *s, int64_t b, int32_t *fits, ganfw_fit_candidate *best) {
  ganfw_fit_result *res = s->res;
  res->n_candidates = 0;
  s->n_micro = 1;
  s->micro[0] = 1;
  s->n_opts[dim_of_role(ROLE_MICRO)] = 1;
  ganfw_status st = plan_all(s, b);
  *fits = 0;
  int32_t have = 0;
  for (int32_t k = 0; k < SMALLEST_TRIES && st == GANFW_OK && !*fits; k++) {
    ganfw_fit_candidate *m = NULL; /* the smallest allocated peak not yet verified */
    for (int32_t i = 0; i < res->n_candidates; i++) {
      ganfw_fit_candidate *c = &res->candidates[i];
      if (c->planned && !c->verified && (!m || c->peak_allocated < m->peak_allocated)) m = c;
    }
    if (!m || m->peak_allocated > res->budget) break;
    if ((st = verify(s, m)) != GANFW_OK || !m->planned) continue;
    if (!have || m->peak_reserved < best->peak_reserved) *best = *m, have = 1;
    *fits = m->feasible;
  }
  if (s->out && st == GANFW_OK)
    fprintf(s->out, "  batch %8lld: %s (smallest: %s, %.2f MiB reserved)\n", (long long)b,
            *fits ? "fits" : "no setup fits", have ? best->label : "none planned",
            have ? (double)best->peak_reserved / MIB : 0.0);
  return st;
}

ganfw_status ganfw_fit_find_batch(const ganfw_run_config *config, const ganfw_fit_options *opt,
                                  int64_t max_batch, int64_t *batch, FILE *out) {
  ganfw_fit_result res;
  memset(&res, 0, sizeof res);
  search s = {.config = config, .opt = opt, .res = &res, .out = out};
  *batch = 0;
  const int32_t level = ganfw_log_level();
  if (level < GANFW_LOG_WARN) ganfw_log_set_level(GANFW_LOG_WARN);
  res.candidates = calloc(GANFW_FIT_MAX_CANDIDATES, sizeof *res.candidates);
  ganfw_status st =
      res.candidates ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "fit: out of host memory");
  if (st == GANFW_OK) st = budget_of(&s);
  if (st == GANFW_OK) micro_options(&s, res.base_batch);
  if (st == GANFW_OK) st = find_plugins(&s);
  const int64_t max = max_batch > 0 ? max_batch : (int64_t)1 << 20;
  if (st == GANFW_OK && out)
    fprintf(out, "find-batch --fit %s: budget %.2f MiB (%s); every setup without accumulation\n",
            ganfw_run_config_path(config), (double)res.budget / MIB, res.budget_source);
  int64_t lo = 0, hi = 0, b = res.base_batch < max ? res.base_batch : max;
  ganfw_fit_candidate best, lo_best;
  memset(&lo_best, 0, sizeof lo_best);
  int32_t fits = 0;
  while (st == GANFW_OK) { /* double up or halve down until bracketed */
    if ((st = any_fits(&s, b, &fits, &best)) != GANFW_OK) break;
    if (fits) {
      lo = b, lo_best = best;
      if (hi || b >= max) break;
      b = b * 2 > max ? max : b * 2;
    } else {
      hi = b;
      if (lo || b <= 1) break;
      b /= 2;
    }
  }
  while (st == GANFW_OK && lo && hi && hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if ((st = any_fits(&s, mid, &fits, &best)) != GANFW_OK) break;
    if (fits)
      lo = mid, lo_best = best;
    else
      hi = mid;
  }
  if (st == GANFW_OK && out) {
    if (lo)
      fprintf(out, "\nLargest batch that fits: %lld, with %s (planned peak %.2f MiB reserved)\n",
              (long long)lo, lo_best.label, (double)lo_best.peak_reserved / MIB);
    else
      fprintf(out, "\nNo batch fits %.2f MiB with any setup, even batch 1.\n",
              (double)res.budget / MIB);
  }
  *batch = lo;
  ganfw_log_set_level(level);
  free(res.candidates);
  return st;
}

/* --- memory: [{plugin: auto, budget: B}] -------------------------------------------------- */

/* The `auto` entry of the config's memory list (read from a copy, so that the command's
 * config keeps its keys unread): its budget and allow_batch into *opt, its place into
 * where. 0: no auto entry; 1: one; -1: an error is set. */
static int32_t auto_entry(const ganfw_run_config *config, ganfw_fit_options *opt, char *where,
                          size_t n_where) {
  ganfw_config *copy = NULL;
  if (ganfw_config_copy(ganfw_run_config_tree(config), NULL, 0, &copy) != GANFW_OK) return -1;
  const ganfw_cfg *root = ganfw_config_root(copy);
  const int64_t n = ganfw_cfg_list_len(root, "memory");
  const ganfw_cfg *item = NULL;
  int64_t at = -1;
  for (int64_t i = 0; i < n && at < 0; i++) {
    const ganfw_cfg *it = ganfw_cfg_list_at(root, "memory", i);
    const ganfw_cfg *name =
        ganfw_cfg_kind_of(it) == GANFW_CFG_KIND_MAP ? ganfw_cfg_child(it, "plugin") : NULL;
    const char *plugin = NULL;
    if (name && ganfw_cfg_string(it, "plugin", NULL, &plugin) == GANFW_OK && plugin &&
        strcmp(plugin, "auto") == 0)
      item = it, at = i;
    ganfw_error_clear();
  }
  int32_t found = at >= 0;
  if (found) snprintf(where, n_where, "%s", ganfw_cfg_where(item));
  static const char *const keys[] = {"plugin", "budget", "allow_batch"};
  for (int64_t k = 0; found == 1 && k < INT64_MAX; k++) {
    const char *key = ganfw_cfg_key_at(item, k);
    if (!key) break;
    int known = 0;
    for (size_t j = 0; j < sizeof keys / sizeof keys[0]; j++) known |= strcmp(key, keys[j]) == 0;
    if (!known) {
      ganfw_error_set(GANFW_ERR_CONFIG,
                      "%s: memory[%lld].%s: plugin auto knows budget (6GiB, 512MiB, 60%%) and "
                      "allow_batch (true: the batch may shrink while nothing fits)",
                      ganfw_cfg_where(ganfw_cfg_child(item, key)), (long long)at, key);
      found = -1;
    }
  }
  if (found == 1 && n > 1) {
    ganfw_error_set(GANFW_ERR_CONFIG,
                    "%s: memory: plugin auto chooses every memory strategy itself (precision, "
                    "accumulate, checkpoint, recompute, step_in_backward, adam8bit), but the "
                    "list names %lld others: remove them, or remove auto and keep yours",
                    where, (long long)(n - 1));
    found = -1;
  }
  const char *text = NULL;
  if (found == 1 && (ganfw_cfg_string(item, "budget", NULL, &text) != GANFW_OK || !text)) {
    ganfw_error_clear();
    ganfw_error_set(GANFW_ERR_CONFIG,
                    "%s: memory[%lld].budget is required with plugin auto: the bytes the "
                    "training step may hold, such as 6GiB, 512MiB, or 60%% (of "
                    "device.memory_limit, else of the device)",
                    where, (long long)at);
    found = -1;
  }
  if (found == 1 && ganfw_fit_parse_budget(text, &opt->budget, &opt->budget_percent) != GANFW_OK) {
    ganfw_error_clear();
    ganfw_error_set(GANFW_ERR_CONFIG,
                    "%s: memory[%lld].budget '%s': expected a byte size such as 6GiB, 512MiB, "
                    "12MB or 1048576, or a percentage such as 60%% (more than 0, at most 100)",
                    ganfw_cfg_where(ganfw_cfg_child(item, "budget")), (long long)at, text);
    found = -1;
  }
  if (found == 1 && ganfw_cfg_bool(item, "allow_batch", 0, &opt->allow_batch) != GANFW_OK)
    found = -1;
  ganfw_config_destroy(copy);
  return found;
}

ganfw_status ganfw_fit_auto(const ganfw_run_config *config, const char *cache_dir,
                            ganfw_run_config **chosen) {
  *chosen = NULL;
  ganfw_fit_options opt = {.confirm = 0, .output = "", .cache_dir = cache_dir};
  char where[512] = "";
  const int32_t found = auto_entry(config, &opt, where, sizeof where);
  opt.budget_key = "memory[0].budget";
  if (found <= 0) return found == 0 ? GANFW_OK : ganfw_error_code();
  static const char *const none[] = {"memory=[]"};
  ganfw_run_config *base = NULL;
  ganfw_status st = ganfw_run_config_derive(config, none, 1, &base);
  if (st != GANFW_OK) return st;
  ganfw_log(GANFW_LOG_INFO,
            "memory: auto (%s): searching the memory strategies that fit the budget (the "
            "first search of this config on this machine measures a few real steps to "
            "calibrate the time model; cached after)",
            where);
  ganfw_fit_result res;
  st = ganfw_fit(base, &opt, &res, NULL);
  if (st != GANFW_OK) {
    const char *msg = ganfw_error_message();
    char text[2048];
    snprintf(text, sizeof text, "%s", msg ? msg : "");
    ganfw_error_clear();
    st = ganfw_error_set(st, "%s: memory: plugin auto: %s", where,
                         strncmp(text, "fit: ", 5) == 0 ? text + 5 : text);
  }
  if (st == GANFW_OK) {
    const ganfw_fit_candidate *c = &res.candidates[res.chosen];
    ganfw_log(
        GANFW_LOG_INFO,
        "memory: auto chose %s at batch %lld for %s: planned peak %.2f MiB allocated, %.2f MiB "
        "reserved; predicted step %.4f s (%d candidates in %.2f s, calibration %s)",
        c->label, (long long)c->batch, res.budget_source, (double)c->peak_allocated / MIB,
        (double)c->peak_reserved / MIB, c->predicted_s, res.n_candidates, res.search_seconds,
        res.cal.cached ? "cached" : "measured now");
    /* the budget caps the whole run, as device.memory_limit (unless the config's is lower):
       the caching allocator then returns its cache before it would go over */
    char limit[64];
    snprintf(limit, sizeof limit, "device.memory_limit=%lld", (long long)res.budget);
    const int32_t cap = res.config_limit <= 0 || res.budget < res.config_limit;
    st = derive_from(config, res.base_batch, c, cap ? limit : NULL, chosen);
  }
  ganfw_fit_result_free(&res);
  ganfw_run_config_free(base);
  return st;
}

/* --- the front as a picture --------------------------------------------------------------- */

#define SVG_W 720
#define SVG_H 440
#define SVG_L 80 /* margins: left, right, top, bottom */
#define SVG_R 24
#define SVG_T 40
#define SVG_B 56

/* Text safe inside SVG: <, > and & written as entities. */
static void svg_text(FILE *f, const char *s) {
  for (; *s; s++)
    fputs(*s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : (char[2]){*s, 0}, f);
}

static ganfw_status write_front_svg(FILE *f, void *ud) {
  const ganfw_fit_result *res = ud;
  double xmax = 0, ymax = 0;
  for (int32_t i = 0; i < res->n_candidates; i++) {
    const ganfw_fit_candidate *c = &res->candidates[i];
    if (!c->planned || c->predicted_s <= 0.0) continue;
    if (c->peak_allocated / MIB > xmax) xmax = c->peak_allocated / MIB;
    if (c->predicted_s > ymax) ymax = c->predicted_s;
  }
  if ((double)res->budget / MIB > xmax * 1.5 || xmax <= 0)
    xmax = xmax > 0 ? xmax : 1.0;
  else if ((double)res->budget / MIB > xmax)
    xmax = (double)res->budget / MIB;
  xmax *= 1.05;
  ymax = ymax > 0 ? ymax * 1.05 : 1.0;
  const double pw = SVG_W - SVG_L - SVG_R, ph = SVG_H - SVG_T - SVG_B;
#define X(v) (SVG_L + (v) / xmax * pw)
#define Y(v) (SVG_T + ph - (v) / ymax * ph)
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
          "fill=\"white\"/>\n<text x=\"%d\" y=\"24\" font-size=\"14\">fit: planned peak "
          "allocated against predicted step time (budget %.2f MiB)</text>\n",
          SVG_W, SVG_H, SVG_L, (double)res->budget / MIB);
  fprintf(f,
          "<line x1=\"%d\" y1=\"%g\" x2=\"%d\" y2=\"%g\" stroke=\"black\"/>\n<line x1=\"%d\" "
          "y1=\"%d\" x2=\"%d\" y2=\"%g\" stroke=\"black\"/>\n",
          SVG_L, Y(0), SVG_W - SVG_R, Y(0), SVG_L, SVG_T, SVG_L, Y(0));
  for (int k = 0; k <= 4; k++) { /* ticks */
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%.1f</text>\n", X(xmax * k / 4),
            Y(0) + 16, xmax * k / 4);
    fprintf(f, "<text x=\"%d\" y=\"%g\" text-anchor=\"end\">%.3f</text>\n", SVG_L - 6,
            Y(ymax * k / 4) + 4, ymax * k / 4);
  }
  fprintf(f,
          "<text x=\"%g\" y=\"%d\" text-anchor=\"middle\">peak allocated, MiB</text>\n<text "
          "x=\"16\" y=\"%g\" transform=\"rotate(-90 16 %g)\" text-anchor=\"middle\">predicted "
          "step, s</text>\n",
          SVG_L + pw / 2, SVG_H - 16, SVG_T + ph / 2, SVG_T + ph / 2);
  if ((double)res->budget / MIB <= xmax)
    fprintf(f,
            "<line x1=\"%g\" y1=\"%d\" x2=\"%g\" y2=\"%g\" stroke=\"#c00\" "
            "stroke-dasharray=\"6 4\"/>\n<text x=\"%g\" y=\"%d\" fill=\"#c00\">budget</text>\n",
            X(res->budget / MIB), SVG_T, X(res->budget / MIB), Y(0), X(res->budget / MIB) + 4,
            SVG_T + 12);
  for (int32_t i = 0; i < res->n_candidates; i++) {
    const ganfw_fit_candidate *c = &res->candidates[i];
    if (!c->planned || c->predicted_s <= 0.0) continue;
    const int chosen = i == res->chosen;
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\"><title>",
            X(c->peak_allocated / MIB), Y(c->predicted_s),
            chosen      ? 6
            : c->pareto ? 4
                        : 3,
            chosen      ? "#c00"
            : c->pareto ? "#06c"
                        : "#aaa");
    svg_text(f, c->label);
    fprintf(f, ": %.2f MiB, %.4f s</title></circle>\n", c->peak_allocated / MIB, c->predicted_s);
  }
  fprintf(f,
          "<text x=\"%d\" y=\"%d\" fill=\"#06c\">blue: the Pareto front; red: chosen; "
          "grey: the other candidates</text>\n</svg>\n",
          SVG_L + 8, SVG_T + 14);
#undef X
#undef Y
  return ferror(f) ? ganfw_error_set(GANFW_ERR_IO, "fit: writing the plot failed") : GANFW_OK;
}

ganfw_status ganfw_fit_plot(const ganfw_fit_result *res, const char *path) {
  size_t n = strlen(path);
  if (n < 4 || strcmp(path + n - 4, ".svg") != 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "fit --plot %s: the front is drawn as .svg",
                           path);
  return ganfw_file_write_atomic(path, write_front_svg, (void *)res);
}

/* --- memory.html ------------------------------------------------------------------------ */

/* The fragment: the front as SVG, then the Pareto front and the verified feasible
 * candidates as tables. *html owned by the caller (free). */
static ganfw_status fit_fragment(const ganfw_fit_result *res, char **html) {
  size_t len = 0;
  FILE *f = open_memstream(html, &len);
  if (!f) return ganfw_error_set(GANFW_ERR_OOM, "fit: out of host memory");
  fprintf(f, "<p>Budget %.2f MiB (", (double)res->budget / MIB);
  svg_text(f, res->budget_source);
  fprintf(f, "): %d candidates planned; chosen: ", res->n_candidates);
  svg_text(f, res->chosen >= 0 ? res->candidates[res->chosen].label : "none");
  fputs(".</p>\n", f);
  ganfw_status st = write_front_svg(f, (void *)res);
  for (int32_t front = 1; front >= 0 && st == GANFW_OK; front--) {
    fprintf(f,
            "<table><caption>%s</caption>\n<tr><th>candidate</th><th>batch</th><th>peak "
            "allocated MiB</th><th>peak reserved MiB</th><th>predicted s</th><th>fits</th>"
            "</tr>\n",
            front ? "Pareto front: peak allocated against predicted step time"
                  : "Planned as the config runs and within the budget, fastest first");
    for (int32_t i = 0; i < res->n_candidates; i++) {
      const ganfw_fit_candidate *c = &res->candidates[i];
      if (front ? !c->pareto : !c->feasible) continue;
      fputs(i == res->chosen ? "<tr class=\"total\"><td>" : "<tr><td>", f);
      svg_text(f, c->label);
      fprintf(f, "</td><td>%lld</td><td>%.2f</td>", (long long)c->batch,
              (double)c->peak_allocated / MIB);
      if (c->verified)
        fprintf(f, "<td>%.2f</td>", (double)c->peak_reserved / MIB);
      else
        fputs("<td>-</td>", f);
      fprintf(f, "<td>%.4f</td><td>%s</td></tr>\n", c->predicted_s,
              c->verified                       ? (c->feasible ? "yes" : "no")
              : c->peak_allocated > res->budget ? "no"
                                                : "?");
    }
    fputs("</table>\n", f);
  }
  if (fclose(f) != 0 && st == GANFW_OK)
    st = ganfw_error_set(GANFW_ERR_OOM, "fit: out of host memory");
  return st;
}

ganfw_status ganfw_fit_html(const ganfw_fit_result *res, const char *path) {
  char *html = NULL;
  ganfw_status st = fit_fragment(res, &html);
  ganfw_run_config *rc = NULL;
  ganfw_probe_result plan;
  memset(&plan, 0, sizeof plan);
  int32_t planned = 0;
  if (st == GANFW_OK && res->written[0] &&
      (st = ganfw_run_config_open(res->written, NULL, 0, &rc)) == GANFW_OK)
    planned = (st = ganfw_report_plan(rc, &plan)) == GANFW_OK;
  ganfw_report_part parts[2];
  int n = 0;
  parts[n++] = (ganfw_report_part){.name = "fit", .caption = "the search", .html = html};
  int64_t first = 0, count = 0;
  if (planned && ganfw_trace_find_step(plan.trace, plan.n_trace, 2, &first, &count) == GANFW_OK)
    parts[n++] = (ganfw_report_part){.name = res->written,
                                     .caption = "the chosen config, step 2 (plan)",
                                     .ev = plan.trace + first,
                                     .n = count,
                                     .plan = &plan};
  ganfw_error_clear();
  if (st == GANFW_OK) st = ganfw_report_write_html(path, "ganfw fit", parts, n, NULL, 0);
  ganfw_probe_result_free(&plan);
  ganfw_run_config_free(rc);
  free(html);
  return st;
}
