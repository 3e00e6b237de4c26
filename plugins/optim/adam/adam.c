/* The Adam / AdamW optimizer plugin (ganfw_adam.so), PyTorch 1.13's single-tensor Adam and
 * AdamW step for step, written with the host's foreach ops so that it runs on any backend.
 * Parameters are f32 tensors of any shape; the state per trainable parameter is exp_avg and
 * exp_avg_sq (plus max_exp_avg_sq with amsgrad), f32 tensors of the parameter's shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

/* plugins/optim/adam/CMakeLists.txt builds this file twice: ganfw_adam.so, and with
 * ADAM_AS_ADAMW ganfw_adamw.so, `plugin: adamw` as PyTorch users type it: torch.optim.AdamW,
 * decoupled weight decay with its default 0.01. */
#ifdef ADAM_AS_ADAMW
#define ADAM_NAME                 "adamw"
#define ADAM_DECOUPLED_DEFAULT    1
#define ADAM_WEIGHT_DECAY_DEFAULT 1e-2
#define ADAM_DESCRIPTION                                                                           \
  "AdamW: Adam with decoupled weight decay (default 0.01), as torch.optim.AdamW"
#else
#define ADAM_NAME                 "adam"
#define ADAM_DECOUPLED_DEFAULT    0
#define ADAM_WEIGHT_DECAY_DEFAULT 0.0
#define ADAM_DESCRIPTION          "Adam and AdamW (decoupled weight decay), optionally AMSGrad, as PyTorch"
#endif

#define ADAM_MAX_STATE 3 /* exp_avg, exp_avg_sq, max_exp_avg_sq */

static const char *const adam_state_suffix[ADAM_MAX_STATE] = {"exp_avg", "exp_avg_sq",
                                                              "max_exp_avg_sq"};

/* One trainable parameter and its state. */
typedef struct adam_slot {
  ganfw_tensor *value; /* borrowed from the core */
  ganfw_tensor *grad;  /* borrowed from the core */
  ganfw_tensor *state[ADAM_MAX_STATE];
  char *state_name[ADAM_MAX_STATE]; /* "<param>.exp_avg", ... */
} adam_slot;

typedef struct adam {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  adam_slot *slots; /* trainable parameters only: grad == NULL ones are skipped */
  int64_t n;
  int32_t nstate; /* 2, or 3 with amsgrad */
  double beta1, beta2, eps, weight_decay;
  int32_t amsgrad, decoupled;
  int64_t steps;
  /* The step in parts (step_begin, step_param, step_end): the slot of each index of the
   * create's params array (-1: frozen), its length, and the open step's scalars. */
  int64_t *slot_of, n_params;
  int32_t open;
  double open_lr, open_bc1, open_bc2_sqrt;
} adam;

static void adam_destroy(void *self) {
  adam *o = self;
  if (!o) return;
  for (int64_t i = 0; i < o->n; i++)
    for (int k = 0; k < ADAM_MAX_STATE; k++) {
      o->host->tensor_destroy(o->slots[i].state[k]);
      free(o->slots[i].state_name[k]);
    }
  free(o->slots);
  free(o->slot_of);
  free(o);
}

/* Reads `betas` (a list of two numbers, default [0.9, 0.999]) into o->beta1, o->beta2. */
static ganfw_status read_betas(adam *o, const ganfw_cfg *cfg) {
  const ganfw_host *h = o->host;
  o->beta1 = 0.9;
  o->beta2 = 0.999;
  int64_t len = h->cfg_list_len(cfg, "betas");
  if (len < 0) return GANFW_ERR_CONFIG; /* not a list: the getter recorded file:line:col */
  if (len == 0) {
    /* Absent (0) or an empty list: only the latter is an error. */
    if (h->cfg_child(cfg, "betas"))
      return h->error(o->ctx, GANFW_ERR_CONFIG,
                      ADAM_NAME ": betas: expected a list of two numbers [beta1, beta2], e.g. "
                                "[0.9, 0.999], got an empty value");
    return GANFW_OK;
  }
  if (len != 2)
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    ADAM_NAME ": betas: expected a list of two numbers [beta1, beta2], e.g. "
                              "[0.9, 0.999], got %lld items",
                    (long long)len);
  double *dst[2] = {&o->beta1, &o->beta2};
  for (int64_t i = 0; i < 2; i++) {
    ganfw_status st = h->cfg_float(h->cfg_list_at(cfg, "betas", i), NULL, *dst[i], dst[i]);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

static ganfw_status read_config(adam *o, const ganfw_cfg *cfg) {
  const ganfw_host *h = o->host;
  ganfw_status st;
  if ((st = read_betas(o, cfg)) != GANFW_OK) return st;
  if ((st = h->cfg_float(cfg, "eps", 1e-8, &o->eps)) != GANFW_OK) return st;
  if ((st = h->cfg_float(cfg, "weight_decay", ADAM_WEIGHT_DECAY_DEFAULT, &o->weight_decay)) !=
      GANFW_OK)
    return st;
  if ((st = h->cfg_bool(cfg, "amsgrad", 0, &o->amsgrad)) != GANFW_OK) return st;
  if ((st = h->cfg_bool(cfg, "decoupled", ADAM_DECOUPLED_DEFAULT, &o->decoupled)) != GANFW_OK)
    return st;
  if (ADAM_DECOUPLED_DEFAULT && !o->decoupled)
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    ADAM_NAME
                    ": decoupled is false, but adamw is Adam with decoupled weight "
                    "decay; for L2 weight decay added to the gradient use `plugin: adam`");
  for (int i = 0; i < 2; i++) {
    double b = i == 0 ? o->beta1 : o->beta2;
    if (!(b >= 0.0 && b < 1.0))
      return h->error(o->ctx, GANFW_ERR_CONFIG,
                      ADAM_NAME ": betas[%d] (beta%d) is %g; it must be in [0, 1), e.g. betas: "
                                "[0.9, 0.999] (GANs often use [0.5, 0.999])",
                      i, i + 1, b);
  }
  if (!(o->eps > 0.0))
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    ADAM_NAME ": eps is %g; it must be positive (the default is 1e-8)", o->eps);
  if (!(o->weight_decay >= 0.0))
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    ADAM_NAME ": weight_decay is %g; it must be 0 or positive", o->weight_decay);
  return GANFW_OK;
}

/* Creates the zero-filled state tensors of slot s (category optim_state). */
static ganfw_status create_state(adam *o, adam_slot *s, const char *param_name) {
  const ganfw_host *h = o->host;
  const ganfw_tensor *v = s->value;
  if (!param_name || !*param_name) param_name = v->name && *v->name ? v->name : "param";
  for (int k = 0; k < o->nstate; k++) {
    size_t len = strlen(param_name) + strlen(adam_state_suffix[k]) + 2;
    s->state_name[k] = malloc(len);
    if (!s->state_name[k]) return h->error(o->ctx, GANFW_ERR_OOM, ADAM_NAME ": out of host memory");
    snprintf(s->state_name[k], len, "%s.%s", param_name, adam_state_suffix[k]);
    s->state[k] = h->tensor_create(o->ctx, GANFW_DTYPE_F32, v->ndim, v->shape,
                                   GANFW_MEM_OPTIM_STATE, s->state_name[k]);
    if (!s->state[k]) return GANFW_ERR_OOM; /* the allocator recorded its report */
    ganfw_status st = h->foreach_fill(o->ctx, &s->state[k], 1, 0.0f);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

static ganfw_status adam_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                const ganfw_param *params, int64_t n, void **self) {
  *self = NULL;
  if (n < 0 || (n > 0 && !params))
    return host->error(ctx, GANFW_ERR_INVALID_ARG, ADAM_NAME ": create needs a parameter list");
  adam *o = calloc(1, sizeof *o);
  if (!o) return host->error(ctx, GANFW_ERR_OOM, ADAM_NAME ": out of host memory");
  o->host = host;
  o->ctx = ctx;
  ganfw_status st = read_config(o, cfg);
  if (st != GANFW_OK) {
    adam_destroy(o);
    return st;
  }
  o->nstate = o->amsgrad ? 3 : 2;
  o->slots = calloc((size_t)(n > 0 ? n : 1), sizeof *o->slots);
  o->slot_of = malloc((size_t)(n > 0 ? n : 1) * sizeof *o->slot_of);
  o->n_params = n;
  if (!o->slots || !o->slot_of) {
    adam_destroy(o);
    return host->error(ctx, GANFW_ERR_OOM, ADAM_NAME ": out of host memory");
  }
  for (int64_t i = 0; i < n && st == GANFW_OK; i++) {
    const ganfw_param *p = &params[i];
    o->slot_of[i] = -1;
    if (!p->grad) continue; /* frozen: no state, never updated */
    if (!p->value || p->value->dtype != GANFW_DTYPE_F32 || p->grad->dtype != GANFW_DTYPE_F32 ||
        p->value->numel != p->grad->numel) {
      st = host->error(ctx, GANFW_ERR_INVALID_ARG,
                       ADAM_NAME ": parameter '%s' needs f32 value and gradient of equal size",
                       p->name ? p->name : "?");
      break;
    }
    o->slot_of[i] = o->n;
    adam_slot *s = &o->slots[o->n++];
    s->value = p->value;
    s->grad = p->grad;
    st = create_state(o, s, p->name);
  }
  if (st != GANFW_OK) {
    adam_destroy(o);
    return st;
  }
  *self = o;
  return GANFW_OK;
}

/* One parameter's update, given this step's scalars. `g` is a workspace tensor of the
 * parameter's shape: it holds grad + weight_decay * param (PyTorch's out-of-place
 * grad.add(param, alpha=weight_decay), so the core's gradient is left untouched), then the
 * denominator. */
static ganfw_status update_slot(adam *o, adam_slot *s, double lr, double bc1, double bc2_sqrt) {
  const ganfw_host *h = o->host;
  ganfw_ctx *ctx = o->ctx;
  ganfw_tensor *value = s->value, *grad = s->grad;
  ganfw_tensor *exp_avg = s->state[0], *exp_avg_sq = s->state[1];
  ganfw_tensor *g = NULL;
  ganfw_status st = GANFW_OK;

  if (o->decoupled) { /* AdamW: param.mul_(1 - lr * weight_decay) */
    if (o->weight_decay != 0.0)
      st = h->foreach_scale(ctx, &value, 1, (float)(1.0 - lr * o->weight_decay));
  } else if (o->weight_decay != 0.0) { /* Adam: grad = grad.add(param, alpha=wd) */
    g = h->tensor_create(ctx, GANFW_DTYPE_F32, value->ndim, value->shape, GANFW_MEM_WORKSPACE,
                         "adam.grad_with_decay");
    if (!g) return GANFW_ERR_OOM;
    st = h->foreach_copy(ctx, &g, &grad, 1);
    if (st == GANFW_OK) st = h->foreach_axpy(ctx, &g, (float)o->weight_decay, &value, 1);
    grad = g;
  }
  /* exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1) */
  if (st == GANFW_OK) st = h->foreach_scale(ctx, &exp_avg, 1, (float)o->beta1);
  if (st == GANFW_OK) st = h->foreach_axpy(ctx, &exp_avg, (float)(1.0 - o->beta1), &grad, 1);
  /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) */
  if (st == GANFW_OK) st = h->foreach_scale(ctx, &exp_avg_sq, 1, (float)o->beta2);
  if (st == GANFW_OK)
    st = h->foreach_addcmul(ctx, &exp_avg_sq, (float)(1.0 - o->beta2), &grad, &grad, 1);
  if (st != GANFW_OK) {
    h->tensor_destroy(g);
    return st;
  }

  /* denom = (v.sqrt() / bias_correction2_sqrt).add_(eps), v = max_exp_avg_sq or exp_avg_sq */
  ganfw_tensor *v = exp_avg_sq;
  if (o->amsgrad) {
    v = s->state[2];
    st = h->foreach_maximum(ctx, &v, &exp_avg_sq, 1);
  }
  if (!g) {
    g = h->tensor_create(ctx, GANFW_DTYPE_F32, value->ndim, value->shape, GANFW_MEM_WORKSPACE,
                         "adam.denom");
    if (!g) return GANFW_ERR_OOM;
  }
  ganfw_tensor *denom = g;
  if (st == GANFW_OK) st = h->foreach_sqrt(ctx, &denom, &v, 1);
  if (st == GANFW_OK) st = h->foreach_scale(ctx, &denom, 1, (float)(1.0 / bc2_sqrt));
  if (st == GANFW_OK) st = h->foreach_add_scalar(ctx, &denom, 1, (float)o->eps);
  /* param.addcdiv_(exp_avg, denom, value=-step_size), step_size = lr / bias_correction1 */
  if (st == GANFW_OK)
    st = h->foreach_addcdiv(ctx, &value, (float)(-(lr / bc1)), &exp_avg, &denom, 1);
  h->tensor_destroy(g);
  return st;
}

/* Checks lr and sets the scalars of step o->steps + 1 (one step number for every slot). */
static ganfw_status adam_step_begin(void *self, double lr) {
  adam *o = self;
  if (!isfinite(lr) || lr < 0.0)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG,
                          ADAM_NAME ": step got learning rate %g; it must be finite and >= 0", lr);
  const double step = (double)(o->steps + 1);
  o->open_lr = lr;
  o->open_bc1 = 1.0 - pow(o->beta1, step);
  o->open_bc2_sqrt = sqrt(1.0 - pow(o->beta2, step));
  o->open = 1;
  return GANFW_OK;
}

/* Updates parameter i of the create's params array (a frozen one: nothing). */
static ganfw_status adam_step_param(void *self, int64_t i) {
  adam *o = self;
  if (!o->open || i < 0 || i >= o->n_params)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG, ADAM_NAME ": step_param(%lld) %s",
                          (long long)i,
                          o->open ? "is outside the parameter list" : "without step_begin");
  if (o->slot_of[i] < 0) return GANFW_OK;
  return update_slot(o, &o->slots[o->slot_of[i]], o->open_lr, o->open_bc1, o->open_bc2_sqrt);
}

static ganfw_status adam_step_end(void *self) {
  adam *o = self;
  if (!o->open)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG, ADAM_NAME ": step_end without step_begin");
  o->open = 0;
  o->steps++;
  return GANFW_OK;
}

static ganfw_status adam_step(void *self, double lr) {
  adam *o = self;
  ganfw_status st = adam_step_begin(o, lr);
  for (int64_t i = 0; i < o->n && st == GANFW_OK; i++)
    st = update_slot(o, &o->slots[i], o->open_lr, o->open_bc1, o->open_bc2_sqrt);
  o->open = 0;
  if (st == GANFW_OK) o->steps++;
  return st;
}

static ganfw_tensor *adam_state_tensor(void *self, int64_t i, const char **name) {
  adam *o = self;
  if (i < 0 || i >= o->n * o->nstate) return NULL;
  adam_slot *s = &o->slots[i / o->nstate];
  int k = (int)(i % o->nstate);
  if (name) *name = s->state_name[k];
  return s->state[k];
}

static int64_t adam_get_step(void *self) {
  return ((const adam *)self)->steps;
}

static void adam_set_step(void *self, int64_t step) {
  ((adam *)self)->steps = step < 0 ? 0 : step;
}

/* The keys of the `optim` section this plugin reads, with their defaults
 * (GANFW_EXT_CONFIG_KEYS): the core applies them before create. */
static const double adam_betas_default[2] = {0.9, 0.999};
static const ganfw_config_key adam_keys[] = {
    {.key = "betas",
     .type = GANFW_KEY_FLOAT_LIST,
     .count = 2,
     .def_floats = adam_betas_default,
     .help = "[beta1, beta2], the running averages' coefficients"},
    {.key = "eps", .type = GANFW_KEY_FLOAT, .def_float = 1e-8, .help = "added to the denominator"},
    {.key = "weight_decay",
     .type = GANFW_KEY_FLOAT,
     .def_float = ADAM_WEIGHT_DECAY_DEFAULT,
     .help = "L2 penalty (adam) or decoupled decay (decoupled: true, adamw)"},
    {.key = "amsgrad", .type = GANFW_KEY_BOOL, .def_int = 0, .help = "the AMSGrad variant"},
    {.key = "decoupled",
     .type = GANFW_KEY_BOOL,
     .def_int = ADAM_DECOUPLED_DEFAULT,
     .help = "decoupled weight decay (AdamW)"},
};
static const ganfw_config_keys adam_key_table = {adam_keys, sizeof adam_keys / sizeof adam_keys[0]};

static const void *adam_get_extension(const char *id) {
  if (strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0) return &adam_key_table;
  return NULL;
}

static const ganfw_optim_vt adam_vt = {
    .struct_size = sizeof(ganfw_optim_vt),
    .kind = GANFW_VT_TAG_OPTIM,
    .create = adam_create,
    .destroy = adam_destroy,
    .step = adam_step,
    .state_tensor = adam_state_tensor,
    .get_step = adam_get_step,
    .set_step = adam_set_step,
    .get_extension = adam_get_extension,
    .step_begin = adam_step_begin,
    .step_param = adam_step_param,
    .step_end = adam_step_end,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_OPTIM,
      .name = ADAM_NAME,
      .version = "1.1.0",
      .description = ADAM_DESCRIPTION,
      .vtable = &adam_vt,
  };
  return &desc;
}
