/* The knowledge-distillation trainer plugin (ganfw_distill.so), as Hinton, Vinyals and Dean
 * (2015): a frozen "teacher" classifier (eval mode, no gradients, no optimizer; its weights
 * from model.nets.teacher.init_from) and a "student" trained on
 *
 *   loss = alpha * T^2 * KL(softmax(t / T) || softmax(s / T)) + (1 - alpha) * CE(s, y)
 *
 * with t, s the teacher's and the student's logits, T the temperature and y the labels
 * (the KL averaged over the batch, F.kl_div(..., reduction='batchmean')). T^2 keeps the soft
 * term's gradients of the size of the hard term's as T changes. alpha 0 trains the student
 * on the labels alone: the same run without distillation.
 *
 * Scalars: loss, ce, kd (the KL at temperature T, unweighted); in evaluation also acc (the
 * student's test accuracy) and teacher_acc. Written against the installed headers only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

typedef struct distill {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  const ganfw_step_api *api;
  double alpha, temperature;
  float *buf; /* host scratch: logits and labels */
  int64_t cap;
} distill;

static void kd_destroy(void *self) {
  distill *d = self;
  if (!d) return;
  free(d->buf);
  free(d);
}

static ganfw_status kd_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_step_api *api, void **self) {
  *self = NULL;
  if (!api || api->struct_size < sizeof(ganfw_step_api))
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "distill: this core has no step calls of ABI 1.6; use a newer ganfw");
  double alpha = 0.9, temperature = 4.0;
  ganfw_status st;
  if ((st = host->cfg_float(cfg, "alpha", 0.9, &alpha)) ||
      (st = host->cfg_float(cfg, "temperature", 4.0, &temperature)))
    return st;
  if (!(alpha >= 0 && alpha <= 1))
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "distill: trainer.alpha is %g; use a weight in [0, 1] (0: labels only)",
                       alpha);
  if (!(temperature > 0 && temperature <= 100))
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "distill: trainer.temperature is %g; use a value in (0, 100] (Hinton et "
                       "al. use 1 to 20)",
                       temperature);
  distill *d = calloc(1, sizeof *d);
  if (!d) return host->error(ctx, GANFW_ERR_OOM, "distill: out of host memory");
  *d = (distill){.host = host, .ctx = ctx, .api = api, .alpha = alpha, .temperature = temperature};
  *self = d;
  return GANFW_OK;
}

static int32_t kd_role(void *self, int32_t i, const char **name, uint32_t *flags) {
  (void)self;
  if (i == 0) {
    *name = "teacher";
    *flags = GANFW_ROLE_FROZEN;
    return 1;
  }
  if (i == 1) {
    *name = "student";
    *flags = 0;
    return 1;
  }
  return 0;
}

static int32_t kd_scalar(void *self, int32_t i, const char **name) {
  (void)self;
  static const char *const names[] = {"loss", "ce", "kd", "acc", "teacher_acc"};
  if (i < 0 || i >= 5) return 0;
  *name = names[i];
  return 1;
}

/* logits / T, a new tensor of the step. */
static ganfw_status soften(distill *d, ganfw_step *st, ganfw_tensor *logits, const char *name,
                           ganfw_tensor **out) {
  ganfw_status s = d->api->tensor(st, logits->ndim, logits->shape, name, out);
  if (s != GANFW_OK) return s;
  return d->host->tensor_mul_scalar(d->ctx, *out, logits, (float)(1.0 / d->temperature));
}

/* The labels and both nets' logits of the batch; *ce and *kd as the loss defines them, and
 * with ds (training) the student's logits' gradient. */
static ganfw_status losses(distill *d, ganfw_step *st, int32_t mode, ganfw_tensor **t,
                           ganfw_tensor **s, double *ce, double *kd, ganfw_tensor **ds) {
  const ganfw_step_api *api = d->api;
  ganfw_tensor *x = api->input(st, GANFW_INPUT_IMAGES), *y = api->input(st, GANFW_INPUT_LABELS);
  if (!y)
    return d->host->error(d->ctx, GANFW_ERR_CONFIG,
                          "distill: the data set has no labels; the student learns from labels "
                          "and the teacher (use a labelled data set)");
  ganfw_tensor *ts, *ss, *dce = NULL, *dkd = NULL;
  const double w_kd = d->alpha * d->temperature; /* alpha T^2, times the 1/T of s/T */
  ganfw_status r;
  if ((r = api->phase(st, "teacher pass")) ||
      (r = api->forward(st, api->net(st, "teacher"), x, GANFW_FWD_NO_GRAD, t)) ||
      (r = api->phase(st, "student step")) ||
      (r = api->forward(st, api->net(st, "student"), x, mode, s)))
    return r;
  if ((*t)->numel != (*s)->numel)
    return d->host->error(d->ctx, GANFW_ERR_CONFIG,
                          "distill: the teacher gives %lld logits per batch and the student %lld; "
                          "both must classify the same classes",
                          (long long)(*t)->numel, (long long)(*s)->numel);
  if ((r = soften(d, st, *t, "teacher/T", &ts)) || (r = soften(d, st, *s, "student/T", &ss)) ||
      (r = api->loss(st, GANFW_LOSS_CROSS_ENTROPY, GANFW_REDUCE_MEAN, *s, y, 1.0 - d->alpha, "ce",
                     ce, ds ? &dce : NULL)) ||
      (r = api->loss(st, GANFW_LOSS_KL_SOFT, GANFW_REDUCE_MEAN, ss, ts, w_kd, "kd", kd,
                     ds ? &dkd : NULL)))
    return r;
  if (!ds) return GANFW_OK;
  *ds = dce;
  return d->host->tensor_add(d->ctx, dce, dce, dkd);
}

static ganfw_status kd_step(void *self, ganfw_step *st) {
  distill *d = self;
  const ganfw_step_api *api = d->api;
  ganfw_tensor *t, *s, *ds;
  double ce, kd;
  ganfw_status r;
  if ((r = losses(d, st, GANFW_FWD_TAPE, &t, &s, &ce, &kd, &ds)) ||
      (r = api->backward(st, s, ds, GANFW_GRAD_PARAMS, NULL)) ||
      (r = api->optimizer_step(st, "student")))
    return r;
  const double T2 = d->temperature * d->temperature;
  if ((r = api->report(st, "loss", d->alpha * T2 * kd + (1.0 - d->alpha) * ce)) ||
      (r = api->report(st, "ce", ce)))
    return r;
  return api->report(st, "kd", kd);
}

/* Right predictions among the rows of logits (argmax, the first maximum on ties). */
static ganfw_status correct(distill *d, ganfw_tensor *logits, const float *labels, int64_t *right) {
  const int64_t n = logits->shape[0], k = logits->numel / n;
  const float *v = d->buf + n;
  ganfw_status s = d->host->tensor_to_host(logits, d->buf + n, logits->nbytes);
  *right = 0;
  for (int64_t i = 0; s == GANFW_OK && i < n; i++) {
    int64_t best = 0;
    for (int64_t j = 1; j < k; j++)
      if (v[i * k + j] > v[i * k + best]) best = j;
    *right += (float)best == labels[i];
  }
  return s;
}

static ganfw_status kd_evaluate(void *self, ganfw_step *st) {
  distill *d = self;
  const ganfw_step_api *api = d->api;
  ganfw_tensor *t, *s;
  double ce, kd;
  ganfw_status r;
  if ((r = losses(d, st, GANFW_FWD_NO_GRAD, &t, &s, &ce, &kd, NULL))) return r;
  ganfw_tensor *y = api->input(st, GANFW_INPUT_LABELS);
  const int64_t n = s->shape[0], need = n + s->numel;
  if (need > d->cap) {
    free(d->buf);
    d->buf = malloc((size_t)need * sizeof *d->buf);
    d->cap = d->buf ? need : 0;
    if (!d->buf) return d->host->error(d->ctx, GANFW_ERR_OOM, "distill: out of host memory");
  }
  int64_t right_s, right_t;
  if ((r = d->host->tensor_to_host(y, d->buf, y->nbytes)) ||
      (r = correct(d, s, d->buf, &right_s)) || (r = correct(d, t, d->buf, &right_t)))
    return r;
  const double T2 = d->temperature * d->temperature;
  if ((r = api->report(st, "loss", d->alpha * T2 * kd + (1.0 - d->alpha) * ce)) ||
      (r = api->report(st, "ce", ce)) || (r = api->report(st, "kd", kd)) ||
      (r = api->report(st, "acc", (double)right_s / (double)n)))
    return r;
  return api->report(st, "teacher_acc", (double)right_t / (double)n);
}

static const ganfw_config_key keys[] = {
    {"alpha", GANFW_KEY_FLOAT, 0, 0, 0.9, NULL, NULL,
     "weight of the soft-target term (1 - alpha on the labels' cross-entropy)"},
    {"temperature", GANFW_KEY_FLOAT, 0, 0, 4.0, NULL, NULL, "softmax temperature T"},
};
static const ganfw_config_keys key_table = {keys, sizeof keys / sizeof keys[0]};

static const void *kd_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &key_table : NULL;
}

static const ganfw_trainer_vt kd_vt = {
    .struct_size = sizeof(ganfw_trainer_vt),
    .kind = GANFW_VT_TAG_TRAINER,
    .create = kd_create,
    .destroy = kd_destroy,
    .role = kd_role,
    .scalar = kd_scalar,
    .step = kd_step,
    .evaluate = kd_evaluate,
    .get_extension = kd_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_TRAINER,
      .name = "distill",
      .version = "1.0.0",
      .description = "knowledge distillation (Hinton et al. 2015): a frozen teacher, a student",
      .vtable = &kd_vt,
  };
  return &desc;
}
