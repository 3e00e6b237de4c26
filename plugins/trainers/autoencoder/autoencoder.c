/* The autoencoder trainer plugin (ganfw_autoencoder.so): the program of one step of a
 * convolutional autoencoder, or with `vae: true` of a variational one (Kingma & Welling,
 * 2014), over the nets "encoder" and "decoder" (model convae). Written against the
 * installed headers only: everything goes through the host table and the step calls.
 *
 *   AE:  z = E(x);  x' = D(z);  loss = rec(x', x)                       (mean over elements)
 *   VAE: [mu, logvar] = E(x);  z = mu + exp(logvar / 2) * eps, eps ~ N(0, 1);  x' = D(z)
 *        loss = rec(x', x) + beta * KL(q(z|x) || N(0, 1))      (each summed over an image,
 *        averaged over the batch, as PyTorch's VAE example with reduction='sum' / N)
 *
 * rec is `loss: mse` or `bce` (BCE with logits: the decoder ends without an activation and
 * the data is in [0, 1], data.normalize {mean: [0], std: [1]}). The reparameterisation and
 * the KL term run on the host on the small [N, latent] codes; the gradient the decoder's
 * backward returns for z goes on into the encoder through them.
 *
 * Scalars: loss, loss_rec, kl (VAE), and in evaluation also elbo (VAE: -(rec + kl) per
 * image, nats). sample(): a row of test inputs, a row of their reconstructions and (VAE)
 * two rows decoded from the prior. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

typedef struct ae {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  const ganfw_step_api *api;
  int32_t vae;
  int32_t bce; /* 1: BCE with logits, 0: MSE */
  double beta;
  float *buf; /* host scratch for the codes */
  int64_t cap;
} ae;

static void ae_destroy(void *self) {
  ae *a = self;
  if (!a) return;
  free(a->buf);
  free(a);
}

static ganfw_status ae_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_step_api *api, void **self) {
  *self = NULL;
  if (!api || api->struct_size < sizeof(ganfw_step_api))
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "autoencoder: this core has no step calls of ABI 1.6; use a newer ganfw");
  int32_t vae = 0;
  double beta = 1;
  const char *loss = NULL;
  ganfw_status st;
  if ((st = host->cfg_bool(cfg, "vae", 0, &vae)) ||
      (st = host->cfg_float(cfg, "beta", 1.0, &beta)) ||
      (st = host->cfg_string(cfg, "loss", vae ? "bce" : "mse", &loss)))
    return st;
  if (strcmp(loss, "mse") != 0 && strcmp(loss, "bce") != 0)
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "autoencoder: trainer.loss is '%s'; use mse or bce (BCE with logits on "
                       "data in [0, 1])",
                       loss);
  if (!(beta >= 0 && beta < 1e6))
    return host->error(ctx, GANFW_ERR_CONFIG, "autoencoder: trainer.beta is %g; use >= 0", beta);
  ae *a = calloc(1, sizeof *a);
  if (!a) return host->error(ctx, GANFW_ERR_OOM, "autoencoder: out of host memory");
  *a = (ae){.host = host,
            .ctx = ctx,
            .api = api,
            .vae = vae,
            .bce = strcmp(loss, "bce") == 0,
            .beta = beta};
  *self = a;
  return GANFW_OK;
}

static int32_t ae_role(void *self, int32_t i, const char **name, uint32_t *flags) {
  (void)self;
  static const char *const roles[] = {"encoder", "decoder"};
  if (i < 0 || i > 1) return 0;
  *name = roles[i];
  *flags = 0;
  return 1;
}

static int32_t ae_scalar(void *self, int32_t i, const char **name) {
  const ae *a = self;
  static const char *const ae_names[] = {"loss", "loss_rec"};
  static const char *const vae_names[] = {"loss", "loss_rec", "kl", "elbo"};
  if (i < 0 || i >= (a->vae ? 4 : 2)) return 0;
  *name = a->vae ? vae_names[i] : ae_names[i];
  return 1;
}

static ganfw_status room(ae *a, int64_t n) {
  if (n <= a->cap) return GANFW_OK;
  free(a->buf);
  a->buf = malloc((size_t)n * sizeof *a->buf);
  a->cap = a->buf ? n : 0;
  return a->buf ? GANFW_OK
                : a->host->error(a->ctx, GANFW_ERR_OOM, "autoencoder: out of host memory");
}

/* The code of x: z [N, latent, 1, 1] and, for a VAE, the KL term (*kl, mean over rows),
 * with h the encoder's output. The host buffer keeps [mu | logvar | eps] per batch for
 * code_backward. */
static ganfw_status encode(ae *a, ganfw_step *st, ganfw_tensor *x, int32_t mode, ganfw_tensor **h,
                           ganfw_tensor **z, double *kl) {
  const ganfw_step_api *api = a->api;
  const ganfw_host *host = a->host;
  *kl = 0;
  ganfw_status s;
  if ((s = api->forward(st, api->net(st, "encoder"), x, mode, h))) return s;
  if (!a->vae) {
    *z = *h;
    return GANFW_OK;
  }
  const int64_t n = (*h)->shape[0], L = (*h)->shape[1] / 2;
  int64_t shape[4] = {n, L, 1, 1};
  ganfw_tensor *eps = NULL;
  if ((s = room(a, 5 * n * L)) || (s = api->normal(st, 4, shape, &eps)) ||
      (s = api->tensor(st, 4, shape, "z", z)))
    return s;
  float *hv = a->buf, *ev = a->buf + 2 * n * L, *zv = a->buf + 3 * n * L;
  if ((s = host->tensor_to_host(*h, hv, (*h)->nbytes)) ||
      (s = host->tensor_to_host(eps, ev, eps->nbytes)))
    return s;
  api->release(st, eps);
  double sum = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < L; j++) {
      const float mu = hv[i * 2 * L + j], lv = hv[i * 2 * L + L + j];
      zv[i * L + j] = mu + expf(0.5f * lv) * ev[i * L + j];
      sum += -0.5 * (1.0 + lv - (double)mu * mu - exp((double)lv));
    }
  *kl = sum / (double)n;
  return host->tensor_from_host(*z, zv, (*z)->nbytes);
}

/* dL/dh from dL/dz (already scaled) and beta * KL: through z = mu + exp(lv / 2) eps and
 * KL = -1/2 sum(1 + lv - mu^2 - exp(lv)) / N. */
static ganfw_status code_backward(ae *a, ganfw_step *st, ganfw_tensor *h, ganfw_tensor *dz,
                                  ganfw_tensor **dh) {
  const ganfw_step_api *api = a->api;
  const int64_t n = h->shape[0], L = h->shape[1] / 2;
  const double g = a->beta * api->grad_scale(st) / (double)n;
  float *hv = a->buf, *ev = a->buf + 2 * n * L, *dzv = a->buf + 3 * n * L;
  float *dhv = malloc((size_t)(2 * n * L) * sizeof *dhv);
  if (!dhv) return a->host->error(a->ctx, GANFW_ERR_OOM, "autoencoder: out of host memory");
  int64_t shape[4] = {n, 2 * L, 1, 1};
  ganfw_status s = a->host->tensor_to_host(dz, dzv, dz->nbytes);
  if (s == GANFW_OK) s = api->tensor(st, 4, shape, "dh", dh);
  for (int64_t i = 0; s == GANFW_OK && i < n; i++)
    for (int64_t j = 0; j < L; j++) {
      const float mu = hv[i * 2 * L + j], lv = hv[i * 2 * L + L + j], d = dzv[i * L + j];
      dhv[i * 2 * L + j] = (float)(d + g * mu);
      dhv[i * 2 * L + L + j] =
          (float)(d * 0.5f * expf(0.5f * lv) * ev[i * L + j] + g * 0.5 * (exp((double)lv) - 1.0));
    }
  if (s == GANFW_OK) s = a->host->tensor_from_host(*dh, dhv, (*dh)->nbytes);
  free(dhv);
  return s;
}

static ganfw_status ae_step(void *self, ganfw_step *st) {
  ae *a = self;
  const ganfw_step_api *api = a->api;
  ganfw_tensor *x = api->input(st, GANFW_INPUT_IMAGES), *h, *z, *xr, *drec, *dz, *dh;
  double kl, rec;
  ganfw_status s;
  if ((s = api->phase(st, "reconstruction pass")) ||
      (s = encode(a, st, x, GANFW_FWD_TAPE, &h, &z, &kl)) ||
      (s = api->forward(st, api->net(st, "decoder"), z, GANFW_FWD_TAPE, &xr)) ||
      (s = api->loss(st, a->bce ? GANFW_LOSS_BCE_LOGITS : GANFW_LOSS_MSE,
                     a->vae ? GANFW_REDUCE_ROW_SUM : GANFW_REDUCE_MEAN, xr, x, 1.0, "loss_rec",
                     &rec, &drec)))
    return s;
  if ((s = api->phase(st, "backward")) ||
      (s = api->backward(st, xr, drec, GANFW_GRAD_PARAMS | GANFW_GRAD_INPUT, &dz)))
    return s;
  if (a->vae) {
    if ((s = code_backward(a, st, h, dz, &dh))) return s;
  } else {
    dh = dz;
  }
  if ((s = api->backward(st, h, dh, GANFW_GRAD_PARAMS, NULL)) ||
      (s = api->optimizer_step(st, "encoder")) || (s = api->optimizer_step(st, "decoder")))
    return s;
  if ((s = api->report(st, "loss", rec + a->beta * kl)) || (s = api->report(st, "loss_rec", rec)))
    return s;
  return a->vae ? api->report(st, "kl", kl) : GANFW_OK;
}

static ganfw_status ae_evaluate(void *self, ganfw_step *st) {
  ae *a = self;
  const ganfw_step_api *api = a->api;
  ganfw_tensor *x = api->input(st, GANFW_INPUT_IMAGES), *h, *z, *xr;
  double kl, rec;
  ganfw_status s;
  if ((s = encode(a, st, x, GANFW_FWD_NO_GRAD, &h, &z, &kl)) ||
      (s = api->forward(st, api->net(st, "decoder"), z, GANFW_FWD_NO_GRAD, &xr)) ||
      (s = api->loss(st, a->bce ? GANFW_LOSS_BCE_LOGITS : GANFW_LOSS_MSE,
                     a->vae ? GANFW_REDUCE_ROW_SUM : GANFW_REDUCE_MEAN, xr, x, 1.0, "loss_rec",
                     &rec, NULL)))
    return s;
  if ((s = api->report(st, "loss", rec + a->beta * kl)) || (s = api->report(st, "loss_rec", rec)))
    return s;
  if (!a->vae) return GANFW_OK;
  if ((s = api->report(st, "kl", kl))) return s;
  return api->report(st, "elbo", -(rec + kl));
}

/* Rows: k inputs, their k reconstructions, and (VAE) 2k images from the prior. */
static ganfw_status ae_sample(void *self, ganfw_step *st, ganfw_tensor **images, int64_t *nrow) {
  ae *a = self;
  const ganfw_step_api *api = a->api;
  const ganfw_host *host = a->host;
  ganfw_tensor *x = api->input(st, GANFW_INPUT_IMAGES), *h, *z, *xr, *xp = NULL, *zp = NULL;
  double kl;
  ganfw_status s;
  const int64_t k = x->shape[0] < 8 ? x->shape[0] : 8, per = x->numel / x->shape[0];
  const int64_t rows = a->vae ? 4 : 2;
  if ((s = encode(a, st, x, GANFW_FWD_NO_GRAD, &h, &z, &kl)) ||
      (s = api->forward(st, api->net(st, "decoder"), z, GANFW_FWD_NO_GRAD, &xr)))
    return s;
  if (a->vae) {
    int64_t zs[4] = {2 * k, z->shape[1], 1, 1};
    if ((s = api->normal(st, 4, zs, &zp)) ||
        (s = api->forward(st, api->net(st, "decoder"), zp, GANFW_FWD_NO_GRAD, &xp)))
      return s;
  }
  int64_t shape[4] = {rows * k, x->shape[1], x->shape[2], x->shape[3]};
  float *all = malloc((size_t)(rows * k * per) * sizeof *all);
  float *tmp = malloc(
      (size_t)((x->numel > xr->numel ? x->numel : xr->numel) + (xp ? xp->numel : 0)) * sizeof *tmp);
  s = all && tmp ? GANFW_OK : host->error(a->ctx, GANFW_ERR_OOM, "autoencoder: out of host memory");
  if (s == GANFW_OK && (s = host->tensor_to_host(x, tmp, x->nbytes)) == GANFW_OK)
    memcpy(all, tmp, (size_t)(k * per) * sizeof *all);
  if (s == GANFW_OK && (s = host->tensor_to_host(xr, tmp, xr->nbytes)) == GANFW_OK)
    memcpy(all + k * per, tmp, (size_t)(k * per) * sizeof *all);
  if (s == GANFW_OK && xp && (s = host->tensor_to_host(xp, tmp, xp->nbytes)) == GANFW_OK)
    memcpy(all + 2 * k * per, tmp, (size_t)(2 * k * per) * sizeof *all);
  /* logits of BCE are shown as probabilities */
  for (int64_t i = k * per; s == GANFW_OK && a->bce && i < rows * k * per; i++)
    all[i] = 1.0f / (1.0f + expf(-all[i]));
  if (s == GANFW_OK) s = api->tensor(st, 4, shape, "samples", images);
  if (s == GANFW_OK) s = host->tensor_from_host(*images, all, (*images)->nbytes);
  free(all);
  free(tmp);
  *nrow = k;
  return s;
}

static const ganfw_config_key keys[] = {
    {"vae", GANFW_KEY_BOOL, 0, 0, 0, NULL, NULL, "a variational autoencoder"},
    {"beta", GANFW_KEY_FLOAT, 0, 0, 1.0, NULL, NULL, "weight of the KL term (VAE)"},
    {"loss", GANFW_KEY_STRING, 0, 0, 0, NULL, NULL, "mse or bce (default: mse, bce for a VAE)"},
};
static const ganfw_config_keys key_table = {keys, sizeof keys / sizeof keys[0]};

static const void *ae_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &key_table : NULL;
}

static const ganfw_trainer_vt ae_vt = {
    .struct_size = sizeof(ganfw_trainer_vt),
    .kind = GANFW_VT_TAG_TRAINER,
    .create = ae_create,
    .destroy = ae_destroy,
    .role = ae_role,
    .scalar = ae_scalar,
    .step = ae_step,
    .sample = ae_sample,
    .evaluate = ae_evaluate,
    .get_extension = ae_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_TRAINER,
      .name = "autoencoder",
      .version = "1.0.0",
      .description = "autoencoder and VAE training step (nets encoder, decoder)",
      .vtable = &ae_vt,
  };
  return &desc;
}
