/* The generator's exponential moving average (see ema.h). */
#include "train/ema.h"

#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "base/error.h"
#include "base/log.h"
#include "config/config.h"
#include "io/safetensors.h"
#include "runtime/tensor.h"

ganfw_status ganfw_ema_read(const ganfw_cfg *train, int32_t family, double *decay, int64_t *start,
                            const char **net) {
  *decay = 0;
  *start = 0;
  *net = NULL;
  const ganfw_cfg *node = ganfw_cfg_child(train, "ema");
  if (!node) return GANFW_OK;
  if (family == GANFW_MODEL_CLASSIFIER)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: train.ema averages a GAN's generator or a trainer plugin's net; "
                           "this model is a classifier: remove the key",
                           ganfw_cfg_where(node));
  if (ganfw_cfg_kind_of(node) != GANFW_CFG_KIND_MAP)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: train.ema must be a map, e.g. `ema: {decay: 0.999, start: 1000}`",
                           ganfw_cfg_where(node));
  ganfw_status st =
      ganfw_cfg_float_in(node, "decay", 0.999, 0, 1, GANFW_CFG_OPEN_LO | GANFW_CFG_OPEN_HI, decay);
  if (st == GANFW_OK) st = ganfw_cfg_int_in(node, "start", 0, 0, (int64_t)1 << 52, start);
  if (st == GANFW_OK && family == GANFW_MODEL_NETS) st = ganfw_cfg_string(node, "net", NULL, net);
  return st;
}

void ganfw_ema_destroy(ganfw_ema *e) {
  if (!e) return;
  for (int64_t i = 0; i < e->n; i++) ganfw_tensor_destroy(e->avg[i]);
  free(e->avg);
  free(e->names);
  free(e);
}

ganfw_status ganfw_ema_create(ganfw_session *s, int32_t net, double decay, int64_t start,
                              ganfw_ema **out) {
  *out = NULL;
  const ganfw_session_optim *o = &s->optim[s->nets[net].optim];
  ganfw_ema *e = calloc(1, sizeof *e);
  if (e) {
    e->avg = calloc((size_t)(o->n_params ? o->n_params : 1), sizeof *e->avg);
    e->names = calloc((size_t)(o->n_params ? o->n_params : 1), sizeof *e->names);
  }
  if (!e || !e->avg || !e->names) {
    ganfw_ema_destroy(e);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  e->decay = decay;
  e->start = start;
  e->src = o->params;
  e->net = net;
  snprintf(e->prefix, sizeof e->prefix, "%s_ema", s->nets[net].role);
  ganfw_backend *be = s->ctx->be;
  for (int64_t i = 0; i < o->n_params; i++) {
    const ganfw_tensor *p = o->params[i].value;
    e->avg[i] =
        ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, p->ndim, p->shape, GANFW_MEM_PARAM, e->prefix);
    if (!e->avg[i]) {
      ganfw_ema_destroy(e);
      return ganfw_error_wrap(ganfw_error_code(), "train.ema: the %s's averages",
                              s->nets[net].role);
    }
    e->names[i] = o->params[i].name;
    e->n = i + 1;
    ganfw_status st = be->vt->copy_d2d(be, e->avg[i]->data, p->data, (size_t)p->nbytes);
    if (st != GANFW_OK) {
      ganfw_ema_destroy(e);
      return st;
    }
  }
  *out = e;
  return GANFW_OK;
}

ganfw_status ganfw_ema_update(ganfw_ema *e, ganfw_backend *be, int64_t step) {
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; st == GANFW_OK && i < e->n; i++) {
    const ganfw_tensor *p = e->src[i].value;
    if (step <= e->start)
      st = be->vt->copy_d2d(be, e->avg[i]->data, p->data, (size_t)p->nbytes);
    else
      st = ganfw_be_lerp(be, p->numel, e->avg[i]->data, p->data, (float)(1.0 - e->decay));
  }
  return st;
}

void ganfw_ema_ckpt(const ganfw_ema *e, ganfw_ckpt_net *net) {
  if (!e) return;
  net->extra_prefix = e->prefix;
  net->extra = e->avg;
  net->extra_names = e->names;
  net->n_extra = e->n;
}

/* Copies "<generator role>_ema.<name>" of every trainable parameter from f into the
 * generator; 0 (nothing changed) when the file lacks any of them. */
static ganfw_status put_averages(ganfw_session *s, const ganfw_st_file *f, const char *path,
                                 int32_t *used) {
  *used = 0;
  int32_t opt = -1;
  for (int32_t r = 0; r < s->n_nets; r++)
    if (s->nets[r].net == s->generator) opt = s->nets[r].optim;
  if (opt < 0) return GANFW_OK; /* a frozen generator was never averaged */
  const ganfw_session_optim *o = &s->optim[opt];
  for (int64_t pass = 0; pass < 2; pass++) /* check all, then copy */
    for (int64_t i = 0; i < o->n_params; i++) {
      char name[512];
      snprintf(name, sizeof name, "%s_ema.%s", s->generator_role, o->params[i].name);
      const ganfw_st_tensor *t = ganfw_st_find(f, name);
      ganfw_tensor *p = o->params[i].value;
      if (!t) return GANFW_OK;
      if (t->dtype != GANFW_DTYPE_F32 || t->nbytes != p->nbytes)
        return ganfw_error_set(GANFW_ERR_CONFIG,
                               "%s: %s is %lld bytes of %s in the file; this generator's %s is "
                               "%lld bytes of f32",
                               path, name, (long long)t->nbytes, t->dtype_name, o->params[i].name,
                               (long long)p->nbytes);
      if (pass == 1) {
        ganfw_status st = ganfw_tensor_from_host(p, t->data, t->nbytes);
        if (st != GANFW_OK) return st;
      }
    }
  *used = o->n_params > 0;
  return GANFW_OK;
}

ganfw_status ganfw_ema_load_generator(ganfw_session *s, const char *ckpt, int32_t use_ema,
                                      int32_t *used) {
  *used = 0;
  ganfw_ckpt_net net = {
      .net = s->generator, .prefix = s->generator_role, .optim_vt = NULL, .optim_self = NULL};
  ganfw_status st = ganfw_checkpoint_load_weights(ckpt, &net, 1, 0, NULL);
  if (st != GANFW_OK || !use_ema) return st;
  ganfw_st_file *f = NULL;
  if ((st = ganfw_st_open(ckpt, &f)) != GANFW_OK) return st;
  st = put_averages(s, f, ckpt, used);
  ganfw_st_close(f);
  return st;
}
