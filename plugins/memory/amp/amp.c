/* The amp memory strategy (ganfw_amp.so): automatic mixed precision. It sets the nets'
 * compute dtype to f16 (or bf16), so that activations are stored in 16 bits and conv,
 * conv-transpose and linear compute with 16-bit inputs and f32 accumulation, and runs a
 * loss scaler with the semantics and defaults of PyTorch's torch.cuda.amp.GradScaler:
 * the loss is multiplied by the scale before backward; after backward the gradients are
 * unscaled in place and checked; an optimizer step with an inf or NaN gradient is skipped;
 * once per training step the scale backs off (after an inf) or grows (after
 * growth_interval clean steps). The scale lives in f32 like PyTorch's. Written against the
 * host table only.
 *
 * Config (one item of `memory:`): dtype f16|bf16 (f16), enabled (true), scaler
 * shared|per_optimizer|none (shared for f16, none for bf16), init_scale (65536),
 * growth_factor (2), backoff_factor (0.5), growth_interval (2000). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

enum { AMP_SCALER_NONE = 0, AMP_SCALER_SHARED = 1, AMP_SCALER_PER_OPTIMIZER = 2 };
#define AMP_OPTIMIZERS 2 /* 0: generator or classifier, 1: discriminator */

/* One GradScaler: its scale and what the optimizers it serves saw since its last update. */
typedef struct amp_scaler {
  double scale;           /* kept at f32 precision, as PyTorch's f32 scale tensor */
  int64_t growth_tracker; /* clean updates in a row since the last growth or back-off */
  int32_t found_inf;      /* an inf/NaN gradient since the last update */
  int32_t checked;        /* gradients were checked since the last update */
} amp_scaler;

typedef struct amp {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  int32_t enabled;
  int32_t dtype; /* GANFW_DTYPE_F16 or BF16 */
  int32_t mode;  /* AMP_SCALER_* */
  double init_scale, growth_factor, backoff_factor;
  int64_t growth_interval;
  amp_scaler scaler[AMP_OPTIMIZERS]; /* shared: [0] serves both optimizers */
  int64_t skipped_steps;             /* optimizer steps skipped, cumulative (resumed) */
  ganfw_tensor **grads;              /* scratch list for the foreach ops */
  int64_t grads_cap;
} amp;

/* The named scalars, per mode. */
static const char *const shared_names[] = {"scale", "growth_tracker", "skipped_steps"};
static const char *const per_opt_names[] = {"scale_g", "scale_d", "growth_tracker_g",
                                            "growth_tracker_d", "skipped_steps"};

static void amp_destroy(void *self) {
  amp *a = self;
  if (!a) return;
  free(a->grads);
  free(a);
}

static ganfw_status read_config(amp *a, const ganfw_cfg *cfg) {
  const ganfw_host *h = a->host;
  const char *dtype = NULL, *scaler = NULL;
  ganfw_status st;
  if ((st = h->cfg_bool(cfg, "enabled", 1, &a->enabled)) ||
      (st = h->cfg_string(cfg, "dtype", "f16", &dtype)))
    return st;
  if (strcmp(dtype, "f16") == 0 || strcmp(dtype, "float16") == 0)
    a->dtype = GANFW_DTYPE_F16;
  else if (strcmp(dtype, "bf16") == 0 || strcmp(dtype, "bfloat16") == 0)
    a->dtype = GANFW_DTYPE_BF16;
  else
    return h->error(a->ctx, GANFW_ERR_CONFIG, "amp: dtype must be f16 or bf16, got '%s'", dtype);
  /* bf16 has f32's exponent range: gradients do not underflow, no scaler is needed */
  const char *def_scaler = a->dtype == GANFW_DTYPE_F16 ? "shared" : "none";
  if ((st = h->cfg_string(cfg, "scaler", def_scaler, &scaler)) ||
      (st = h->cfg_float(cfg, "init_scale", 65536.0, &a->init_scale)) ||
      (st = h->cfg_float(cfg, "growth_factor", 2.0, &a->growth_factor)) ||
      (st = h->cfg_float(cfg, "backoff_factor", 0.5, &a->backoff_factor)) ||
      (st = h->cfg_int(cfg, "growth_interval", 2000, &a->growth_interval)))
    return st;
  if (strcmp(scaler, "none") == 0)
    a->mode = AMP_SCALER_NONE;
  else if (strcmp(scaler, "shared") == 0)
    a->mode = AMP_SCALER_SHARED;
  else if (strcmp(scaler, "per_optimizer") == 0)
    a->mode = AMP_SCALER_PER_OPTIMIZER;
  else
    return h->error(a->ctx, GANFW_ERR_CONFIG,
                    "amp: scaler must be shared (one scale for every optimizer), per_optimizer "
                    "or none, got '%s'",
                    scaler);
  if (!(a->init_scale > 0 && a->init_scale <= 3.0e38))
    return h->error(a->ctx, GANFW_ERR_CONFIG,
                    "amp: init_scale must be a positive f32 number, got %g", a->init_scale);
  if (!(a->growth_factor > 1 && a->growth_factor < 1e10))
    return h->error(a->ctx, GANFW_ERR_CONFIG, "amp: growth_factor must be > 1, got %g",
                    a->growth_factor);
  if (!(a->backoff_factor > 0 && a->backoff_factor < 1))
    return h->error(a->ctx, GANFW_ERR_CONFIG, "amp: backoff_factor must be in (0, 1), got %g",
                    a->backoff_factor);
  if (a->growth_interval < 1)
    return h->error(a->ctx, GANFW_ERR_CONFIG, "amp: growth_interval must be >= 1, got %lld",
                    (long long)a->growth_interval);
  if (!a->enabled) a->mode = AMP_SCALER_NONE;
  return GANFW_OK;
}

static ganfw_status amp_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                               void **self) {
  *self = NULL;
  amp *a = calloc(1, sizeof *a);
  if (!a) return host->error(ctx, GANFW_ERR_OOM, "amp: out of host memory");
  a->host = host;
  a->ctx = ctx;
  ganfw_status st = read_config(a, cfg);
  if (st != GANFW_OK) {
    amp_destroy(a);
    return st;
  }
  for (int i = 0; i < AMP_OPTIMIZERS; i++) a->scaler[i].scale = (float)a->init_scale;
  *self = a;
  return GANFW_OK;
}

static ganfw_status amp_configure(void *self, ganfw_exec_options *opts) {
  const amp *a = self;
  if (opts->struct_size < offsetof(ganfw_exec_options, compute_dtype) + sizeof(int32_t))
    return a->host->error(a->ctx, GANFW_ERR_UNSUPPORTED,
                          "amp: the core's executor options have no compute dtype");
  if (a->enabled) opts->compute_dtype = a->dtype;
  return GANFW_OK;
}

/* The scaler that serves optimizer `opt`, or NULL without a scaler. */
static amp_scaler *scaler_of(amp *a, int32_t opt) {
  if (a->mode == AMP_SCALER_NONE || opt < 0 || opt >= AMP_OPTIMIZERS) return NULL;
  return &a->scaler[a->mode == AMP_SCALER_SHARED ? 0 : opt];
}

static double amp_loss_scale(void *self, int32_t opt) {
  const amp_scaler *s = scaler_of(self, opt);
  return s ? s->scale : 1.0;
}

/* params' gradients as a tensor list in a->grads; the number of them or -1. */
static int64_t grad_list(amp *a, const ganfw_param *params, int64_t n) {
  if (n > a->grads_cap) {
    ganfw_tensor **g = realloc(a->grads, (size_t)n * sizeof *g);
    if (!g) return -1;
    a->grads = g;
    a->grads_cap = n;
  }
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (params[i].grad) a->grads[k++] = params[i].grad;
  return k;
}

static ganfw_status amp_after_backward(void *self, int32_t opt, const ganfw_param *params,
                                       int64_t n, int32_t *skip_step) {
  amp *a = self;
  const ganfw_host *h = a->host;
  if (opt < 0 || opt >= AMP_OPTIMIZERS)
    return h->error(a->ctx, GANFW_ERR_INVALID_ARG, "amp: no optimizer %d", (int)opt);
  int64_t k = grad_list(a, params, n);
  if (k < 0) return h->error(a->ctx, GANFW_ERR_OOM, "amp: out of host memory");
  if (k == 0) return GANFW_OK;
  amp_scaler *s = scaler_of(a, opt);
  ganfw_status st;
  if (s) {
    /* unscale_: grads *= 1/scale, the reciprocal taken in double and rounded to f32 */
    float inv = (float)(1.0 / s->scale);
    if ((st = h->foreach_scale(a->ctx, a->grads, k, inv)) != GANFW_OK) return st;
  }
  int32_t nonfinite = 0;
  if ((st = h->foreach_nonfinite(a->ctx, a->grads, k, &nonfinite)) != GANFW_OK) return st;
  if (!s) {
    /* No scaler (bf16, or amp disabled): nothing to back off, so a non-finite gradient
     * stops training as a non-finite loss does without AMP. */
    if (nonfinite)
      return h->error(a->ctx, GANFW_ERR_NUMERIC,
                      "amp: optimizer %d has inf or NaN gradients and no loss scaler runs "
                      "(scaler: none): training diverged; lower optim.lr, or use dtype f16 "
                      "with a scaler",
                      (int)opt);
    return GANFW_OK;
  }
  s->checked = 1;
  if (nonfinite) {
    s->found_inf = 1;
    a->skipped_steps++;
    *skip_step = 1;
  }
  return GANFW_OK;
}

/* torch._amp_update_scale_: back off after an inf, else grow every growth_interval clean
 * updates (only while the grown scale stays finite in f32). */
static void update(const amp *a, amp_scaler *s) {
  if (s->found_inf) {
    s->scale = (float)(s->scale * a->backoff_factor);
    s->growth_tracker = 0;
  } else if (++s->growth_tracker == a->growth_interval) {
    float grown = (float)(s->scale * a->growth_factor);
    if (isfinite(grown)) s->scale = grown;
    s->growth_tracker = 0;
  }
  s->found_inf = 0;
  s->checked = 0;
}

static ganfw_status amp_step_end(void *self) {
  amp *a = self;
  int n = a->mode == AMP_SCALER_SHARED ? 1 : a->mode == AMP_SCALER_PER_OPTIMIZER ? 2 : 0;
  for (int i = 0; i < n; i++)
    if (a->scaler[i].checked)
      update(a, &a->scaler[i]); /* an optimizer that did not step
                                    this time keeps its scale */
  return GANFW_OK;
}

/* The scale named `name` (returned) or the counter (*counter), or neither (NULL both). */
static double *scalar_slot(amp *a, const char *name, int64_t **counter) {
  *counter = NULL;
  if (a->mode == AMP_SCALER_NONE) return NULL;
  const int per = a->mode == AMP_SCALER_PER_OPTIMIZER;
  for (int i = 0; i < (per ? 2 : 1); i++) {
    const char *scale_name = per ? per_opt_names[i] : shared_names[0];
    const char *tracker_name = per ? per_opt_names[2 + i] : shared_names[1];
    if (strcmp(name, scale_name) == 0) return &a->scaler[i].scale;
    if (strcmp(name, tracker_name) == 0) {
      *counter = &a->scaler[i].growth_tracker;
      return NULL;
    }
  }
  if (strcmp(name, "skipped_steps") == 0) *counter = &a->skipped_steps;
  return NULL;
}

static int32_t amp_scalar(void *self, int32_t i, const char **name, double *value) {
  amp *a = self;
  if (a->mode == AMP_SCALER_NONE || i < 0) return 0;
  const char *const *names = a->mode == AMP_SCALER_SHARED ? shared_names : per_opt_names;
  int32_t count = a->mode == AMP_SCALER_SHARED ? 3 : 5;
  if (i >= count) return 0;
  int64_t *counter;
  double *scale = scalar_slot(a, names[i], &counter);
  *name = names[i];
  *value = scale ? *scale : (double)*counter;
  return 1;
}

static ganfw_status amp_set_scalar(void *self, const char *name, double value) {
  amp *a = self;
  int64_t *counter;
  double *scale = scalar_slot(a, name, &counter);
  if (!scale && !counter)
    return a->host->error(a->ctx, GANFW_ERR_INVALID_ARG, "amp: no scalar '%s' in this mode", name);
  if (scale) {
    if (!(value > 0 && value <= 3.0e38))
      return a->host->error(a->ctx, GANFW_ERR_INVALID_ARG,
                            "amp: saved %s %g is not a positive f32 number", name, value);
    *scale = (float)value;
  } else {
    if (!(value >= 0 && value < 9.0e18) || value != floor(value))
      return a->host->error(a->ctx, GANFW_ERR_INVALID_ARG, "amp: saved %s %g is not a count", name,
                            value);
    *counter = (int64_t)value;
  }
  return GANFW_OK;
}

/* The keys of its `memory:` item this plugin reads, with their defaults
 * (GANFW_EXT_CONFIG_KEYS): the core applies them before create. `scaler` has no fixed
 * default (shared for f16, none for bf16). */
static const ganfw_config_key amp_keys[] = {
    {.key = "enabled", .type = GANFW_KEY_BOOL, .def_int = 1},
    {.key = "dtype", .type = GANFW_KEY_STRING, .def_string = "f16", .help = "f16 or bf16"},
    {.key = "scaler", .type = GANFW_KEY_STRING, .help = "shared, per_optimizer or none"},
    {.key = "init_scale", .type = GANFW_KEY_FLOAT, .def_float = 65536.0},
    {.key = "growth_factor", .type = GANFW_KEY_FLOAT, .def_float = 2.0},
    {.key = "backoff_factor", .type = GANFW_KEY_FLOAT, .def_float = 0.5},
    {.key = "growth_interval", .type = GANFW_KEY_INT, .def_int = 2000},
};
static const ganfw_config_keys amp_key_table = {amp_keys, sizeof amp_keys / sizeof amp_keys[0]};

static const void *amp_get_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &amp_key_table : NULL;
}

static const ganfw_memory_vt amp_vt = {
    .struct_size = sizeof(ganfw_memory_vt),
    .kind = GANFW_VT_TAG_MEMORY,
    .create = amp_create,
    .destroy = amp_destroy,
    .configure = amp_configure,
    .loss_scale = amp_loss_scale,
    .after_backward = amp_after_backward,
    .step_end = amp_step_end,
    .scalar = amp_scalar,
    .set_scalar = amp_set_scalar,
    .get_extension = amp_get_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MEMORY,
      .name = "amp",
      .version = "1.0.0",
      .description = "mixed precision (f16/bf16 activations) with a GradScaler",
      .vtable = &amp_vt,
  };
  return &desc;
}
