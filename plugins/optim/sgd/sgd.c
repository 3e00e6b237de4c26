/* The SGD optimizer plugin (ganfw_sgd.so): PyTorch 1.13's single-tensor SGD step for step
 * (momentum, dampening, Nesterov, L2 weight decay), written with the host's foreach ops so
 * that it runs on any backend. Parameters are f32 tensors of any shape; with momentum > 0
 * each trainable parameter has a "momentum_buffer" of its shape (category optim_state). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

/* One trainable parameter and its momentum buffer. */
typedef struct sgd_slot {
  ganfw_tensor *value; /* borrowed from the core */
  ganfw_tensor *grad;  /* borrowed from the core */
  ganfw_tensor *buf;   /* momentum buffer; NULL without momentum */
  char *buf_name;      /* "<param>.momentum_buffer" */
} sgd_slot;

typedef struct sgd {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  sgd_slot *slots; /* trainable parameters only: grad == NULL ones are skipped */
  int64_t n;
  double momentum, dampening, weight_decay;
  int32_t nesterov;
  int64_t steps;
  /* The step in parts (step_begin, step_param, step_end): the slot of each index of the
   * create's params array (-1: frozen), its length, and the open step's rate. */
  int64_t *slot_of, n_params;
  int32_t open;
  double open_lr;
} sgd;

static void sgd_destroy(void *self) {
  sgd *o = self;
  if (!o) return;
  for (int64_t i = 0; i < o->n; i++) {
    o->host->tensor_destroy(o->slots[i].buf);
    free(o->slots[i].buf_name);
  }
  free(o->slots);
  free(o->slot_of);
  free(o);
}

static ganfw_status read_config(sgd *o, const ganfw_cfg *cfg) {
  const ganfw_host *h = o->host;
  ganfw_status st;
  if ((st = h->cfg_float(cfg, "momentum", 0.0, &o->momentum)) ||
      (st = h->cfg_float(cfg, "dampening", 0.0, &o->dampening)) ||
      (st = h->cfg_bool(cfg, "nesterov", 0, &o->nesterov)) ||
      (st = h->cfg_float(cfg, "weight_decay", 0.0, &o->weight_decay)))
    return st;
  if (!(o->momentum >= 0.0))
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    "sgd: momentum is %g; it must be 0 (none) or positive, e.g. 0.9", o->momentum);
  if (!(o->weight_decay >= 0.0))
    return h->error(o->ctx, GANFW_ERR_CONFIG, "sgd: weight_decay is %g; it must be 0 or positive",
                    o->weight_decay);
  if (o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
    return h->error(o->ctx, GANFW_ERR_CONFIG,
                    "sgd: nesterov needs momentum > 0 and dampening 0 (as PyTorch); got momentum "
                    "%g, dampening %g",
                    o->momentum, o->dampening);
  return GANFW_OK;
}

/* The momentum buffer of slot s, zero-filled (PyTorch creates it lazily on the first step;
 * allocating it here lets the memory plan and the first report see it). */
static ganfw_status create_buffer(sgd *o, sgd_slot *s, const char *param_name) {
  const ganfw_host *h = o->host;
  const ganfw_tensor *v = s->value;
  if (!param_name || !*param_name) param_name = v->name && *v->name ? v->name : "param";
  size_t len = strlen(param_name) + sizeof ".momentum_buffer";
  s->buf_name = malloc(len);
  if (!s->buf_name) return h->error(o->ctx, GANFW_ERR_OOM, "sgd: out of host memory");
  snprintf(s->buf_name, len, "%s.momentum_buffer", param_name);
  s->buf = h->tensor_create(o->ctx, GANFW_DTYPE_F32, v->ndim, v->shape, GANFW_MEM_OPTIM_STATE,
                            s->buf_name);
  if (!s->buf) return GANFW_ERR_OOM; /* the allocator recorded its report */
  return h->foreach_fill(o->ctx, &s->buf, 1, 0.0f);
}

static ganfw_status sgd_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                               const ganfw_param *params, int64_t n, void **self) {
  *self = NULL;
  if (n < 0 || (n > 0 && !params))
    return host->error(ctx, GANFW_ERR_INVALID_ARG, "sgd: create needs a parameter list");
  sgd *o = calloc(1, sizeof *o);
  if (!o) return host->error(ctx, GANFW_ERR_OOM, "sgd: out of host memory");
  o->host = host;
  o->ctx = ctx;
  ganfw_status st = read_config(o, cfg);
  if (st == GANFW_OK) {
    o->slots = calloc((size_t)(n > 0 ? n : 1), sizeof *o->slots);
    o->slot_of = malloc((size_t)(n > 0 ? n : 1) * sizeof *o->slot_of);
    o->n_params = n;
    if (!o->slots || !o->slot_of) st = host->error(ctx, GANFW_ERR_OOM, "sgd: out of host memory");
  }
  for (int64_t i = 0; i < n && st == GANFW_OK; i++) {
    const ganfw_param *p = &params[i];
    o->slot_of[i] = -1;
    if (!p->grad) continue; /* frozen: no state, never updated */
    if (!p->value || p->value->dtype != GANFW_DTYPE_F32 || p->grad->dtype != GANFW_DTYPE_F32 ||
        p->value->numel != p->grad->numel) {
      st = host->error(ctx, GANFW_ERR_INVALID_ARG,
                       "sgd: parameter '%s' needs f32 value and gradient of equal size",
                       p->name ? p->name : "?");
      break;
    }
    o->slot_of[i] = o->n;
    sgd_slot *s = &o->slots[o->n++];
    s->value = p->value;
    s->grad = p->grad;
    if (o->momentum != 0.0) st = create_buffer(o, s, p->name);
  }
  if (st != GANFW_OK) {
    sgd_destroy(o);
    return st;
  }
  *self = o;
  return GANFW_OK;
}

/* One parameter's update:
 *   d_p = grad (+ weight_decay * param, out of place: the core's gradient is untouched)
 *   buf = d_p on the first step, else buf * momentum + (1 - dampening) * d_p
 *   d_p = d_p + momentum * buf (Nesterov) or buf
 *   param -= lr * d_p
 * `first` is 1 on the first step (PyTorch's buffer is None then). */
static ganfw_status update_slot(sgd *o, sgd_slot *s, double lr, int first) {
  const ganfw_host *h = o->host;
  ganfw_ctx *ctx = o->ctx;
  ganfw_tensor *value = s->value, *d_p = s->grad, *ws = NULL;
  ganfw_status st = GANFW_OK;
  /* A copy of the gradient is needed when it is changed: weight decay or Nesterov. */
  if (o->weight_decay != 0.0 || o->nesterov) {
    ws = h->tensor_create(ctx, GANFW_DTYPE_F32, value->ndim, value->shape, GANFW_MEM_WORKSPACE,
                          "sgd.d_p");
    if (!ws) return GANFW_ERR_OOM;
    st = h->foreach_copy(ctx, &ws, &d_p, 1);
    if (st == GANFW_OK && o->weight_decay != 0.0)
      st = h->foreach_axpy(ctx, &ws, (float)o->weight_decay, &value, 1);
    d_p = ws;
  }
  if (st == GANFW_OK && s->buf) {
    ganfw_tensor *buf = s->buf;
    if (first) {
      st = h->foreach_copy(ctx, &buf, &d_p, 1); /* torch.clone(d_p) */
    } else {
      st = h->foreach_scale(ctx, &buf, 1, (float)o->momentum);
      if (st == GANFW_OK) st = h->foreach_axpy(ctx, &buf, (float)(1.0 - o->dampening), &d_p, 1);
    }
    if (st == GANFW_OK && o->nesterov)
      st = h->foreach_axpy(ctx, &d_p, (float)o->momentum, &buf, 1); /* d_p is ws here */
    else
      d_p = buf;
  }
  if (st == GANFW_OK) st = h->foreach_axpy(ctx, &value, (float)-lr, &d_p, 1);
  h->tensor_destroy(ws);
  return st;
}

static ganfw_status sgd_step_begin(void *self, double lr) {
  sgd *o = self;
  if (!isfinite(lr) || lr < 0.0)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG,
                          "sgd: step got learning rate %g; it must be finite and >= 0", lr);
  o->open_lr = lr;
  o->open = 1;
  return GANFW_OK;
}

/* Updates parameter i of the create's params array (a frozen one: nothing). */
static ganfw_status sgd_step_param(void *self, int64_t i) {
  sgd *o = self;
  if (!o->open || i < 0 || i >= o->n_params)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG, "sgd: step_param(%lld) %s", (long long)i,
                          o->open ? "is outside the parameter list" : "without step_begin");
  if (o->slot_of[i] < 0) return GANFW_OK;
  return update_slot(o, &o->slots[o->slot_of[i]], o->open_lr, o->steps == 0);
}

static ganfw_status sgd_step_end(void *self) {
  sgd *o = self;
  if (!o->open)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG, "sgd: step_end without step_begin");
  o->open = 0;
  o->steps++;
  return GANFW_OK;
}

static ganfw_status sgd_step(void *self, double lr) {
  sgd *o = self;
  ganfw_status st = sgd_step_begin(o, lr);
  for (int64_t i = 0; i < o->n && st == GANFW_OK; i++)
    st = update_slot(o, &o->slots[i], lr, o->steps == 0);
  o->open = 0;
  if (st == GANFW_OK) o->steps++;
  return st;
}

/* With momentum, one state tensor per parameter: "<param>.momentum_buffer". */
static ganfw_tensor *sgd_state_tensor(void *self, int64_t i, const char **name) {
  sgd *o = self;
  if (o->momentum == 0.0 || i < 0 || i >= o->n) return NULL;
  if (name) *name = o->slots[i].buf_name;
  return o->slots[i].buf;
}

static int64_t sgd_get_step(void *self) {
  return ((const sgd *)self)->steps;
}

/* After a resume (step > 0) the restored buffers are used as they are, as PyTorch does
 * with a loaded momentum_buffer. */
static void sgd_set_step(void *self, int64_t step) {
  ((sgd *)self)->steps = step < 0 ? 0 : step;
}

/* The keys of the `optim` section this plugin reads, with their defaults
 * (GANFW_EXT_CONFIG_KEYS): the core applies them before create. */
static const ganfw_config_key sgd_keys[] = {
    {.key = "momentum", .type = GANFW_KEY_FLOAT, .def_float = 0.0, .help = "0: plain SGD"},
    {.key = "dampening", .type = GANFW_KEY_FLOAT, .def_float = 0.0},
    {.key = "nesterov", .type = GANFW_KEY_BOOL, .def_int = 0},
    {.key = "weight_decay", .type = GANFW_KEY_FLOAT, .def_float = 0.0, .help = "L2 penalty"},
};
static const ganfw_config_keys sgd_key_table = {sgd_keys, sizeof sgd_keys / sizeof sgd_keys[0]};

static const void *sgd_get_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &sgd_key_table : NULL;
}

static const ganfw_optim_vt sgd_vt = {
    .struct_size = sizeof(ganfw_optim_vt),
    .kind = GANFW_VT_TAG_OPTIM,
    .create = sgd_create,
    .destroy = sgd_destroy,
    .step = sgd_step,
    .state_tensor = sgd_state_tensor,
    .get_step = sgd_get_step,
    .set_step = sgd_set_step,
    .step_begin = sgd_step_begin,
    .step_param = sgd_step_param,
    .step_end = sgd_step_end,
    .get_extension = sgd_get_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_OPTIM,
      .name = "sgd",
      .version = "1.0.0",
      .description = "SGD with momentum, dampening, Nesterov and weight decay, as PyTorch",
      .vtable = &sgd_vt,
  };
  return &desc;
}
