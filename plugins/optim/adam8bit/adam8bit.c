/* The adam8bit optimizer plugin (ganfw_adam8bit.so): Adam whose two moments are stored in 8
 * bits with blockwise dynamic quantisation, as bitsandbytes' Adam8bit (Dettmers et al., "8-bit
 * Optimizers via Block-wise Quantization", 2022). Per parameter of at least min_8bit_size
 * values: exp_avg and exp_avg_sq are u8 codes (one byte a value) plus one f32 absmax per block
 * of block_size values, on the dynamic map (signed for exp_avg, unsigned for exp_avg_sq). A
 * step dequantises both into f32 workspace, runs PyTorch's Adam update there (the order of
 * plugins/optim/adam/adam.c), updates the parameter from the f32 moments and quantises them
 * back. Smaller parameters keep f32 state and step exactly as `plugin: adam`. Written with the
 * host's foreach and quantisation ops (ABI 1.10), so it runs on any backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#define A8_NAME         "adam8bit"
#define A8_CODE_SIZE    256
#define A8_MAX_STATE    4 /* 8-bit: exp_avg.q8, exp_avg.absmax, exp_avg_sq.q8, exp_avg_sq.absmax */
#define A8_BLOCK_MIN    64
#define A8_BLOCK_DEF    2048
#define A8_MIN_8BIT_DEF 4096

static const char *const f32_suffix[2] = {"exp_avg", "exp_avg_sq"};
static const char *const q8_suffix[A8_MAX_STATE] = {"exp_avg.q8", "exp_avg.absmax", "exp_avg_sq.q8",
                                                    "exp_avg_sq.absmax"};

/* One trainable parameter and its state: f32 (exp_avg, exp_avg_sq of the parameter's shape)
 * or 8-bit (codes [numel] u8 and scales [ceil(numel / block_size)] f32 of each moment). */
typedef struct a8_slot {
  ganfw_tensor *value; /* borrowed from the core */
  ganfw_tensor *grad;  /* borrowed from the core */
  int32_t quantized;   /* 1: state[] is the 8-bit four, 0: the f32 two */
  int32_t nstate;
  ganfw_tensor *state[A8_MAX_STATE];
  char *state_name[A8_MAX_STATE];
} a8_slot;

typedef struct adam8bit {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  a8_slot *slots; /* trainable parameters only */
  int64_t n;
  double beta1, beta2, eps, weight_decay;
  int32_t decoupled;
  int64_t block_size, min_8bit_size;
  ganfw_tensor *code[2]; /* the signed and unsigned dynamic maps [256], when a slot is 8-bit */
  int64_t steps;
  /* The step in parts (step_begin, step_param, step_end; memory strategy step_in_backward):
   * the slot of each index of create's params array (-1: frozen), and the open step's
   * scalars. */
  int64_t *slot_of, n_params;
  int32_t open;
  double open_lr, open_bc1, open_bc2_sqrt;
} adam8bit;

static void a8_destroy(void *self) {
  adam8bit *o = self;
  if (!o) return;
  for (int64_t i = 0; i < o->n; i++)
    for (int k = 0; k < A8_MAX_STATE; k++) {
      o->host->tensor_destroy(o->slots[i].state[k]);
      free(o->slots[i].state_name[k]);
    }
  for (int k = 0; k < 2; k++) o->host->tensor_destroy(o->code[k]);
  free(o->slots);
  free(o->slot_of);
  free(o);
}

/* Reads `betas` (a list of two numbers, default [0.9, 0.999]). */
static ganfw_status read_betas(adam8bit *o, const ganfw_cfg *cfg) {
  const ganfw_host *h = o->host;
  o->beta1 = 0.9;
  o->beta2 = 0.999;
  int64_t len = h->cfg_list_len(cfg, "betas");
  if (len < 0) return GANFW_ERR_CONFIG; /* not a list: the getter recorded file:line:col */
  if (len == 0) {
    if (h->cfg_child(cfg, "betas"))
      return h->error(o->ctx, GANFW_ERR_CONFIG,
                      A8_NAME ": betas: expected a list of two numbers [beta1, beta2], e.g. "
                              "[0.9, 0.999], got an empty value");
    return GANFW_OK;
  }
  if (len != 2)
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    A8_NAME ": betas: expected a list of two numbers [beta1, beta2], e.g. "
                            "[0.9, 0.999], got %lld items",
                    (long long)len);
  double *dst[2] = {&o->beta1, &o->beta2};
  for (int64_t i = 0; i < 2; i++) {
    ganfw_status st = h->cfg_float(h->cfg_list_at(cfg, "betas", i), NULL, *dst[i], dst[i]);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

static ganfw_status read_config(adam8bit *o, const ganfw_cfg *cfg) {
  const ganfw_host *h = o->host;
  ganfw_status st;
  int32_t amsgrad = 0;
  if ((st = read_betas(o, cfg)) != GANFW_OK) return st;
  if ((st = h->cfg_float(cfg, "eps", 1e-8, &o->eps)) != GANFW_OK) return st;
  if ((st = h->cfg_float(cfg, "weight_decay", 0.0, &o->weight_decay)) != GANFW_OK) return st;
  if ((st = h->cfg_bool(cfg, "amsgrad", 0, &amsgrad)) != GANFW_OK) return st;
  if ((st = h->cfg_bool(cfg, "decoupled", 0, &o->decoupled)) != GANFW_OK) return st;
  if ((st = h->cfg_int(cfg, "block_size", A8_BLOCK_DEF, &o->block_size)) != GANFW_OK) return st;
  if ((st = h->cfg_int(cfg, "min_8bit_size", A8_MIN_8BIT_DEF, &o->min_8bit_size)) != GANFW_OK)
    return st;
  if (amsgrad)
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    A8_NAME ": amsgrad is true, but adam8bit has no AMSGrad variant (its "
                            "max_exp_avg_sq would need a third quantised state); remove "
                            "`amsgrad` or use `plugin: adam` with amsgrad: true");
  for (int i = 0; i < 2; i++) {
    double b = i == 0 ? o->beta1 : o->beta2;
    if (!(b >= 0.0 && b < 1.0))
      return h->error(o->ctx, GANFW_ERR_CONFIG,
                      A8_NAME ": betas[%d] (beta%d) is %g; it must be in [0, 1), e.g. betas: "
                              "[0.9, 0.999] (GANs often use [0.5, 0.999])",
                      i, i + 1, b);
  }
  if (!(o->eps > 0.0))
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    A8_NAME ": eps is %g; it must be positive (the default is 1e-8)", o->eps);
  if (!(o->weight_decay >= 0.0))
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    A8_NAME ": weight_decay is %g; it must be 0 or positive", o->weight_decay);
  const int64_t b = o->block_size;
  if (b < A8_BLOCK_MIN || (b & (b - 1)) != 0)
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    A8_NAME ": block_size is %lld; it must be a power of two >= %d (values per "
                            "quantisation block; the default is %d, as bitsandbytes)",
                    (long long)b, A8_BLOCK_MIN, A8_BLOCK_DEF);
  if (o->min_8bit_size < 0)
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    A8_NAME ": min_8bit_size is %lld; it must be 0 or positive (parameters with "
                            "fewer values keep f32 state; the default is %d, as bitsandbytes)",
                    (long long)o->min_8bit_size, A8_MIN_8BIT_DEF);
  return GANFW_OK;
}

/* The two dynamic maps as device tensors (category optim_state, 2 KiB). */
static ganfw_status create_codes(adam8bit *o) {
  const ganfw_host *h = o->host;
  const int64_t shape[1] = {A8_CODE_SIZE};
  static const char *const names[2] = {"adam8bit.code_signed", "adam8bit.code_unsigned"};
  float code[A8_CODE_SIZE];
  for (int k = 0; k < 2; k++) {
    ganfw_status st = h->quantize_dynamic_map(k == 0, code);
    if (st != GANFW_OK) return st;
    o->code[k] =
        h->tensor_create(o->ctx, GANFW_DTYPE_F32, 1, shape, GANFW_MEM_OPTIM_STATE, names[k]);
    if (!o->code[k]) return GANFW_ERR_OOM; /* the allocator recorded its report */
    st = h->tensor_from_host(o->code[k], code, (int64_t)sizeof code);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* Creates slot s's state: f32 zeros, or the 8-bit four holding quantised zeros. */
static ganfw_status create_state(adam8bit *o, a8_slot *s, const char *param_name) {
  const ganfw_host *h = o->host;
  const ganfw_tensor *v = s->value;
  if (!param_name || !*param_name) param_name = v->name && *v->name ? v->name : "param";
  s->quantized = v->numel >= o->min_8bit_size && v->numel > 0;
  s->nstate = s->quantized ? A8_MAX_STATE : 2;
  const int64_t q_shape[1] = {v->numel};
  const int64_t a_shape[1] = {(v->numel + o->block_size - 1) / o->block_size};
  for (int k = 0; k < s->nstate; k++) {
    const char *suffix = s->quantized ? q8_suffix[k] : f32_suffix[k];
    size_t len = strlen(param_name) + strlen(suffix) + 2;
    s->state_name[k] = malloc(len);
    if (!s->state_name[k]) return h->error(o->ctx, GANFW_ERR_OOM, A8_NAME ": out of host memory");
    snprintf(s->state_name[k], len, "%s.%s", param_name, suffix);
    if (!s->quantized)
      s->state[k] = h->tensor_create(o->ctx, GANFW_DTYPE_F32, v->ndim, v->shape,
                                     GANFW_MEM_OPTIM_STATE, s->state_name[k]);
    else if (k % 2 == 0)
      s->state[k] = h->tensor_create(o->ctx, GANFW_DTYPE_U8, 1, q_shape, GANFW_MEM_OPTIM_STATE,
                                     s->state_name[k]);
    else
      s->state[k] = h->tensor_create(o->ctx, GANFW_DTYPE_F32, 1, a_shape, GANFW_MEM_OPTIM_STATE,
                                     s->state_name[k]);
    if (!s->state[k]) return GANFW_ERR_OOM;
  }
  if (!s->quantized) return h->foreach_fill(o->ctx, s->state, 2, 0.0f);
  /* zeros, quantised: the scales 0 and the codes of 0 (through the op, so any map works) */
  ganfw_tensor *zero = h->tensor_create(o->ctx, GANFW_DTYPE_F32, v->ndim, v->shape,
                                        GANFW_MEM_WORKSPACE, A8_NAME ".zeros");
  if (!zero) return GANFW_ERR_OOM;
  ganfw_status st = h->foreach_fill(o->ctx, &zero, 1, 0.0f);
  for (int m = 0; m < 2 && st == GANFW_OK; m++)
    st = h->quantize_blockwise(o->ctx, zero, o->code[m], o->block_size, s->state[2 * m],
                               s->state[2 * m + 1]);
  h->tensor_destroy(zero);
  return st;
}

static ganfw_status a8_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_param *params, int64_t n, void **self) {
  *self = NULL;
  if (!GANFW_HOST_HAS(host, quantize_dynamic_map))
    return host->error(ctx, GANFW_ERR_UNSUPPORTED,
                       A8_NAME ": this ganfw's host table (ABI 1.%u) has no 8-bit quantisation "
                               "ops; adam8bit needs ABI 1.10 or newer",
                       (unsigned)host->abi_minor);
  if (n < 0 || (n > 0 && !params))
    return host->error(ctx, GANFW_ERR_INVALID_ARG, A8_NAME ": create needs a parameter list");
  adam8bit *o = calloc(1, sizeof *o);
  if (!o) return host->error(ctx, GANFW_ERR_OOM, A8_NAME ": out of host memory");
  o->host = host;
  o->ctx = ctx;
  ganfw_status st = read_config(o, cfg);
  if (st == GANFW_OK) {
    o->slots = calloc((size_t)(n > 0 ? n : 1), sizeof *o->slots);
    o->slot_of = malloc((size_t)(n > 0 ? n : 1) * sizeof *o->slot_of);
    o->n_params = n;
    if (!o->slots || !o->slot_of)
      st = host->error(ctx, GANFW_ERR_OOM, A8_NAME ": out of host memory");
  }
  int any_8bit = 0;
  for (int64_t i = 0; i < n && st == GANFW_OK; i++) {
    const ganfw_param *p = &params[i];
    if (!p->grad) continue;
    if (!p->value || p->value->dtype != GANFW_DTYPE_F32 || p->grad->dtype != GANFW_DTYPE_F32 ||
        p->value->numel != p->grad->numel)
      st = host->error(ctx, GANFW_ERR_INVALID_ARG,
                       A8_NAME ": parameter '%s' needs f32 value and gradient of equal size",
                       p->name ? p->name : "?");
    any_8bit |= p->value && p->value->numel >= o->min_8bit_size && p->value->numel > 0;
  }
  if (st == GANFW_OK && any_8bit) st = create_codes(o);
  for (int64_t i = 0; i < n && st == GANFW_OK; i++) {
    const ganfw_param *p = &params[i];
    o->slot_of[i] = -1;
    if (!p->grad) continue; /* frozen: no state, never updated */
    o->slot_of[i] = o->n;
    a8_slot *s = &o->slots[o->n++];
    s->value = p->value;
    s->grad = p->grad;
    st = create_state(o, s, p->name);
  }
  if (st != GANFW_OK) {
    a8_destroy(o);
    return st;
  }
  *self = o;
  return GANFW_OK;
}

/* Adam's update of one parameter with f32 moments exp_avg and exp_avg_sq (the slot's own state,
 * or workspace holding its dequantised state), in PyTorch 1.13's order as adam.c: L2 decay on
 * a copy of the gradient (or decoupled decay of the parameter), the moments, then
 * param -= lr / bc1 * exp_avg / (sqrt(exp_avg_sq) / sqrt(bc2) + eps). */
static ganfw_status adam_update(adam8bit *o, a8_slot *s, ganfw_tensor *exp_avg,
                                ganfw_tensor *exp_avg_sq, double lr, double bc1, double bc2_sqrt) {
  const ganfw_host *h = o->host;
  ganfw_ctx *ctx = o->ctx;
  ganfw_tensor *value = s->value, *grad = s->grad;
  ganfw_tensor *g = NULL;
  ganfw_status st = GANFW_OK;

  if (o->decoupled) {
    if (o->weight_decay != 0.0)
      st = h->foreach_scale(ctx, &value, 1, (float)(1.0 - lr * o->weight_decay));
  } else if (o->weight_decay != 0.0) {
    g = h->tensor_create(ctx, GANFW_DTYPE_F32, value->ndim, value->shape, GANFW_MEM_WORKSPACE,
                         A8_NAME ".grad_with_decay");
    if (!g) return GANFW_ERR_OOM;
    st = h->foreach_copy(ctx, &g, &grad, 1);
    if (st == GANFW_OK) st = h->foreach_axpy(ctx, &g, (float)o->weight_decay, &value, 1);
    grad = g;
  }
  if (st == GANFW_OK) st = h->foreach_scale(ctx, &exp_avg, 1, (float)o->beta1);
  if (st == GANFW_OK) st = h->foreach_axpy(ctx, &exp_avg, (float)(1.0 - o->beta1), &grad, 1);
  if (st == GANFW_OK) st = h->foreach_scale(ctx, &exp_avg_sq, 1, (float)o->beta2);
  if (st == GANFW_OK)
    st = h->foreach_addcmul(ctx, &exp_avg_sq, (float)(1.0 - o->beta2), &grad, &grad, 1);
  if (st != GANFW_OK) {
    h->tensor_destroy(g);
    return st;
  }
  if (!g) {
    g = h->tensor_create(ctx, GANFW_DTYPE_F32, value->ndim, value->shape, GANFW_MEM_WORKSPACE,
                         A8_NAME ".denom");
    if (!g) return GANFW_ERR_OOM;
  }
  ganfw_tensor *denom = g;
  st = h->foreach_sqrt(ctx, &denom, &exp_avg_sq, 1);
  if (st == GANFW_OK) st = h->foreach_scale(ctx, &denom, 1, (float)(1.0 / bc2_sqrt));
  if (st == GANFW_OK) st = h->foreach_add_scalar(ctx, &denom, 1, (float)o->eps);
  if (st == GANFW_OK)
    st = h->foreach_addcdiv(ctx, &value, (float)(-(lr / bc1)), &exp_avg, &denom, 1);
  h->tensor_destroy(g);
  return st;
}

/* An 8-bit slot's step: dequantise both moments into f32 workspace, update, quantise back. */
static ganfw_status update_8bit(adam8bit *o, a8_slot *s, double lr, double bc1, double bc2_sqrt) {
  const ganfw_host *h = o->host;
  ganfw_ctx *ctx = o->ctx;
  const ganfw_tensor *v = s->value;
  static const char *const names[2] = {A8_NAME ".exp_avg", A8_NAME ".exp_avg_sq"};
  ganfw_tensor *m[2] = {NULL, NULL};
  ganfw_status st = GANFW_OK;
  for (int k = 0; k < 2 && st == GANFW_OK; k++) {
    m[k] = h->tensor_create(ctx, GANFW_DTYPE_F32, v->ndim, v->shape, GANFW_MEM_WORKSPACE, names[k]);
    if (!m[k])
      st = GANFW_ERR_OOM;
    else
      st = h->dequantize_blockwise(ctx, s->state[2 * k], s->state[2 * k + 1], o->code[k],
                                   o->block_size, m[k]);
  }
  if (st == GANFW_OK) st = adam_update(o, s, m[0], m[1], lr, bc1, bc2_sqrt);
  for (int k = 0; k < 2 && st == GANFW_OK; k++)
    st = h->quantize_blockwise(ctx, m[k], o->code[k], o->block_size, s->state[2 * k],
                               s->state[2 * k + 1]);
  for (int k = 0; k < 2; k++) h->tensor_destroy(m[k]);
  return st;
}

/* Checks lr and sets the scalars of step o->steps + 1 (one step number for every slot). */
static ganfw_status a8_step_begin(void *self, double lr) {
  adam8bit *o = self;
  if (!isfinite(lr) || lr < 0.0)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG,
                          A8_NAME ": step got learning rate %g; it must be finite and >= 0", lr);
  const double step = (double)(o->steps + 1);
  o->open_lr = lr;
  o->open_bc1 = 1.0 - pow(o->beta1, step);
  o->open_bc2_sqrt = sqrt(1.0 - pow(o->beta2, step));
  o->open = 1;
  return GANFW_OK;
}

static ganfw_status update_slot(adam8bit *o, a8_slot *s) {
  return s->quantized ? update_8bit(o, s, o->open_lr, o->open_bc1, o->open_bc2_sqrt)
                      : adam_update(o, s, s->state[0], s->state[1], o->open_lr, o->open_bc1,
                                    o->open_bc2_sqrt);
}

/* Updates parameter i of create's params array (a frozen one: nothing). */
static ganfw_status a8_step_param(void *self, int64_t i) {
  adam8bit *o = self;
  if (!o->open || i < 0 || i >= o->n_params)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG, A8_NAME ": step_param(%lld) %s",
                          (long long)i,
                          o->open ? "is outside the parameter list" : "without step_begin");
  return o->slot_of[i] < 0 ? GANFW_OK : update_slot(o, &o->slots[o->slot_of[i]]);
}

static ganfw_status a8_step_end(void *self) {
  adam8bit *o = self;
  if (!o->open)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG, A8_NAME ": step_end without step_begin");
  o->open = 0;
  o->steps++;
  return GANFW_OK;
}

static ganfw_status a8_step(void *self, double lr) {
  adam8bit *o = self;
  ganfw_status st = a8_step_begin(o, lr);
  for (int64_t i = 0; i < o->n && st == GANFW_OK; i++) st = update_slot(o, &o->slots[i]);
  o->open = 0;
  if (st == GANFW_OK) o->steps++;
  return st;
}

/* State i in parameter order: two f32 tensors for a small parameter, four (codes and scales of
 * each moment) for an 8-bit one. */
static ganfw_tensor *a8_state_tensor(void *self, int64_t i, const char **name) {
  adam8bit *o = self;
  if (i < 0) return NULL;
  for (int64_t j = 0; j < o->n; j++) {
    a8_slot *s = &o->slots[j];
    if (i < s->nstate) {
      if (name) *name = s->state_name[i];
      return s->state[i];
    }
    i -= s->nstate;
  }
  return NULL;
}

static int64_t a8_get_step(void *self) {
  return ((const adam8bit *)self)->steps;
}

static void a8_set_step(void *self, int64_t step) {
  ((adam8bit *)self)->steps = step < 0 ? 0 : step;
}

static const double a8_betas_default[2] = {0.9, 0.999};
static const ganfw_config_key a8_keys[] = {
    {.key = "betas",
     .type = GANFW_KEY_FLOAT_LIST,
     .count = 2,
     .def_floats = a8_betas_default,
     .help = "[beta1, beta2], the running averages' coefficients"},
    {.key = "eps", .type = GANFW_KEY_FLOAT, .def_float = 1e-8, .help = "added to the denominator"},
    {.key = "weight_decay",
     .type = GANFW_KEY_FLOAT,
     .def_float = 0.0,
     .help = "L2 penalty (or decoupled decay with decoupled: true)"},
    {.key = "amsgrad", .type = GANFW_KEY_BOOL, .def_int = 0, .help = "refused: no AMSGrad variant"},
    {.key = "decoupled",
     .type = GANFW_KEY_BOOL,
     .def_int = 0,
     .help = "decoupled weight decay (AdamW8bit)"},
    {.key = "block_size",
     .type = GANFW_KEY_INT,
     .def_int = A8_BLOCK_DEF,
     .help = "values per quantisation block (a power of two >= 64)"},
    {.key = "min_8bit_size",
     .type = GANFW_KEY_INT,
     .def_int = A8_MIN_8BIT_DEF,
     .help = "parameters with fewer values keep f32 state"},
};
static const ganfw_config_keys a8_key_table = {a8_keys, sizeof a8_keys / sizeof a8_keys[0]};

static const void *a8_get_extension(const char *id) {
  if (strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0) return &a8_key_table;
  return NULL;
}

static const ganfw_optim_vt a8_vt = {
    .struct_size = sizeof(ganfw_optim_vt),
    .kind = GANFW_VT_TAG_OPTIM,
    .create = a8_create,
    .destroy = a8_destroy,
    .step = a8_step,
    .step_begin = a8_step_begin,
    .step_param = a8_step_param,
    .step_end = a8_step_end,
    .state_tensor = a8_state_tensor,
    .get_step = a8_get_step,
    .set_step = a8_set_step,
    .get_extension = a8_get_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_OPTIM,
      .name = A8_NAME,
      .version = "1.0.0",
      .description = "Adam with 8-bit blockwise-quantised state (bitsandbytes' Adam8bit)",
      .vtable = &a8_vt,
  };
  return &desc;
}
