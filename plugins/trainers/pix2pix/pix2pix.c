/* The pix2pix trainer plugin (ganfw_pix2pix.so): paired image-to-image translation as Isola
 * et al. (2017), "Image-to-Image Translation with Conditional Adversarial Networks", over the
 * nets "generator" (x -> y) and "discriminator" (a conditional PatchGAN on the pair (x, y)
 * joined along the channels; model unet_patchgan). x is data.pair's input (GANFW_INPUT_PAIR:
 * a masked, grey or downscaled image) and y its target (GANFW_INPUT_IMAGES), [N,C,H,W].
 *
 *   D step:  fake = G(x);  loss_D = 0.5 * (BCE(D(x, y), 1) + BCE(D(x, fake.detach()), 0))
 *   G step:  loss_G = BCE(D(x, fake), 1) + lambda_l1 * L1(fake, y)    (D's weights unchanged)
 *
 * Each BCE (with logits) and the L1 are means over their elements, as the reference
 * implementation's GANLoss('vanilla') and nn.L1Loss. The pair (x, image) is joined on the
 * host: the step calls have no tensor concatenation, so join() copies x and the image
 * through host memory into [N,2C,H,W], and the G step takes dL/dfake back out of the
 * gradient of D's input the same way.
 *
 * Scalars: loss_d, loss_g (loss_g_gan + lambda_l1 * loss_l1), loss_g_gan, loss_l1; in
 * evaluation l1, the test mean absolute error of G(x) against y per pixel (in the data's
 * range). sample(): rows of inputs, outputs and targets of the first test images. */
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#define P2P_SAMPLE_COLUMNS 8 /* images per row of the sample grid, at most */

typedef struct p2p {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  const ganfw_step_api *api;
  double lambda; /* trainer.lambda_l1 */
  float *buf;    /* host scratch for joining pairs */
  int64_t cap;
} p2p;

static void p2p_destroy(void *self) {
  p2p *t = self;
  if (!t) return;
  free(t->buf);
  free(t);
}

static ganfw_status p2p_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                               const ganfw_step_api *api, void **self) {
  *self = NULL;
  if (!api || api->struct_size < sizeof(ganfw_step_api))
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "pix2pix: this core has no step calls of ABI 1.6; use a newer ganfw");
  double lambda = 100;
  ganfw_status st = host->cfg_float(cfg, "lambda_l1", 100.0, &lambda);
  if (st != GANFW_OK) return st;
  if (!(lambda >= 0 && lambda <= 1e6))
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "pix2pix: trainer.lambda_l1 is %g; use a weight in [0, 1e6] for the L1 "
                       "term (100 as the paper; 0 trains on the GAN loss alone)",
                       lambda);
  p2p *t = calloc(1, sizeof *t);
  if (!t) return host->error(ctx, GANFW_ERR_OOM, "pix2pix: out of host memory");
  *t = (p2p){.host = host, .ctx = ctx, .api = api, .lambda = lambda};
  *self = t;
  return GANFW_OK;
}

static int32_t p2p_role(void *self, int32_t i, const char **name, uint32_t *flags) {
  (void)self;
  static const char *const roles[] = {"generator", "discriminator"};
  if (i < 0 || i > 1) return 0;
  *name = roles[i];
  *flags = 0;
  return 1;
}

static int32_t p2p_scalar(void *self, int32_t i, const char **name) {
  (void)self;
  static const char *const names[] = {"loss_d", "loss_g", "loss_g_gan", "loss_l1", "l1"};
  if (i < 0 || i >= (int32_t)(sizeof names / sizeof names[0])) return 0;
  *name = names[i];
  return 1;
}

static ganfw_status room(p2p *t, int64_t n) {
  if (n <= t->cap) return GANFW_OK;
  free(t->buf);
  t->buf = malloc((size_t)n * sizeof *t->buf);
  t->cap = t->buf ? n : 0;
  return t->buf ? GANFW_OK : t->host->error(t->ctx, GANFW_ERR_OOM, "pix2pix: out of host memory");
}

/* The pair's input x and its target y of this call; an error naming data.pair without one. */
static ganfw_status pair_inputs(p2p *t, ganfw_step *st, ganfw_tensor **x, ganfw_tensor **y) {
  *x = t->api->input(st, GANFW_INPUT_PAIR);
  *y = t->api->input(st, GANFW_INPUT_IMAGES);
  if (!*x || !*y)
    return t->host->error(t->ctx, GANFW_ERR_CONFIG,
                          "pix2pix: the run has no paired input; the trainer learns an image "
                          "from an input made from it: set data.pair: {kind: masked|grayscale|"
                          "downscaled} (docs/TRAINERS.md, \"Paired and unpaired data\")");
  if ((*x)->ndim != 4 || (*x)->numel != (*y)->numel)
    return t->host->error(t->ctx, GANFW_ERR_PLUGIN,
                          "pix2pix: the paired input and the images differ in shape");
  return GANFW_OK;
}

/* *ab = torch.cat([a, b], 1): [N,2C,H,W] from a and b [N,C,H,W], on the device. */
static ganfw_status join(p2p *t, ganfw_step *st, const ganfw_tensor *a, const ganfw_tensor *b,
                         const char *name, ganfw_tensor **ab) {
  const int64_t shape[4] = {a->shape[0], 2 * a->shape[1], a->shape[2], a->shape[3]};
  const ganfw_tensor *parts[2] = {a, b};
  ganfw_status s = t->api->tensor(st, 4, shape, name, ab);
  return s ? s : t->host->tensor_cat(t->ctx, *ab, parts, 2, 1);
}

/* *db = dab[:, C:2C]: the gradient of join()'s second part. */
static ganfw_status second_part(p2p *t, ganfw_step *st, const ganfw_tensor *dab,
                                ganfw_tensor **db) {
  const int64_t c = dab->shape[1] / 2;
  const int64_t shape[4] = {dab->shape[0], c, dab->shape[2], dab->shape[3]};
  ganfw_status s = t->api->tensor(st, 4, shape, "d_fake", db);
  return s ? s : t->host->tensor_narrow(t->ctx, *db, dab, 1, c);
}

/* A tensor of `like`'s shape filled with v (the BCE targets). */
static ganfw_status filled(p2p *t, ganfw_step *st, const ganfw_tensor *like, float v,
                           const char *name, ganfw_tensor **out) {
  ganfw_status s = t->api->tensor(st, like->ndim, like->shape, name, out);
  return s ? s : t->host->foreach_fill(t->ctx, out, 1, v);
}

/* D on a pair with a tape, its BCE against `target` times `weight`, and backward into D's
 * parameters (GANFW_GRAD_PARAMS) or, for the G step, dL/dpair in *dpair. */
static ganfw_status d_pass(p2p *t, ganfw_step *st, ganfw_tensor *pair, float target, double weight,
                           const char *name, double *loss, ganfw_tensor **dpair) {
  const ganfw_step_api *api = t->api;
  ganfw_tensor *logits, *tgt, *dlogits;
  ganfw_status s;
  if ((s = api->forward(st, api->net(st, "discriminator"), pair, GANFW_FWD_TAPE, &logits)) ||
      (s = filled(t, st, logits, target, "target", &tgt)) ||
      (s = api->loss(st, GANFW_LOSS_BCE_LOGITS, GANFW_REDUCE_MEAN, logits, tgt, weight, name, loss,
                     &dlogits)) ||
      (s = api->backward(st, logits, dlogits, dpair ? GANFW_GRAD_INPUT : GANFW_GRAD_PARAMS, dpair)))
    return s;
  api->release(st, logits);
  api->release(st, tgt);
  api->release(st, dlogits);
  return GANFW_OK;
}

static ganfw_status p2p_step(void *self, ganfw_step *st) {
  p2p *t = self;
  const ganfw_step_api *api = t->api;
  ganfw_tensor *x, *y, *fake, *fake_pair, *real_pair, *dpair, *dfake, *dl1;
  double real, gen, gan, l1;
  ganfw_status s;
  if ((s = pair_inputs(t, st, &x, &y))) return s;
  if ((s = api->phase(st, "D step")) ||
      (s = api->forward(st, api->net(st, "generator"), x, GANFW_FWD_TAPE, &fake)) ||
      (s = join(t, st, x, y, "real_pair", &real_pair)) ||
      (s = d_pass(t, st, real_pair, 1.0f, 0.5, "loss_d_real", &real, NULL)))
    return s;
  api->release(st, real_pair);
  if ((s = join(t, st, x, fake, "fake_pair", &fake_pair)) ||
      (s = d_pass(t, st, fake_pair, 0.0f, 0.5, "loss_d_fake", &gen, NULL)) ||
      (s = api->optimizer_step(st, "discriminator")))
    return s;
  /* train.update_every.generator: no G half on the steps that do not update G */
  const int32_t g_due = api->struct_size < offsetof(ganfw_step_api, due) + sizeof api->due ||
                        api->due(st, "generator");
  if (!g_due) {
    api->release(st, fake_pair);
    api->release(st, fake);
    return api->report(st, "loss_d", 0.5 * (real + gen));
  }
  if ((s = api->phase(st, "G step")) ||
      (s = d_pass(t, st, fake_pair, 1.0f, 1.0, "loss_g_gan", &gan, &dpair)) ||
      (s = second_part(t, st, dpair, &dfake)))
    return s;
  api->release(st, dpair);
  api->release(st, fake_pair);
  if ((s = api->loss(st, GANFW_LOSS_L1, GANFW_REDUCE_MEAN, fake, y, t->lambda, "loss_l1", &l1,
                     &dl1)) ||
      (s = t->host->tensor_add(t->ctx, dfake, dfake, dl1)))
    return s;
  api->release(st, dl1);
  if ((s = api->backward(st, fake, dfake, GANFW_GRAD_PARAMS, NULL)) ||
      (s = api->optimizer_step(st, "generator")))
    return s;
  if ((s = api->report(st, "loss_d", 0.5 * (real + gen))) ||
      (s = api->report(st, "loss_g", gan + t->lambda * l1)) ||
      (s = api->report(st, "loss_g_gan", gan)))
    return s;
  return api->report(st, "loss_l1", l1);
}

static ganfw_status p2p_evaluate(void *self, ganfw_step *st) {
  p2p *t = self;
  const ganfw_step_api *api = t->api;
  ganfw_tensor *x, *y, *fake;
  double l1;
  ganfw_status s;
  if ((s = pair_inputs(t, st, &x, &y)) ||
      (s = api->forward(st, api->net(st, "generator"), x, GANFW_FWD_NO_GRAD, &fake)) ||
      (s = api->loss(st, GANFW_LOSS_L1, GANFW_REDUCE_MEAN, fake, y, 1.0, "l1", &l1, NULL)))
    return s;
  return api->report(st, "l1", l1);
}

/* Rows of k inputs, their k outputs and their k targets. */
static ganfw_status p2p_sample(void *self, ganfw_step *st, ganfw_tensor **images, int64_t *nrow) {
  p2p *t = self;
  const ganfw_step_api *api = t->api;
  const ganfw_host *h = t->host;
  ganfw_tensor *x, *y, *fake;
  ganfw_status s;
  if ((s = pair_inputs(t, st, &x, &y)) ||
      (s = api->forward(st, api->net(st, "generator"), x, GANFW_FWD_NO_GRAD, &fake)))
    return s;
  const int64_t n = x->shape[0], per = x->numel / n;
  const int64_t k = n < P2P_SAMPLE_COLUMNS ? n : P2P_SAMPLE_COLUMNS;
  const int64_t shape[4] = {3 * k, x->shape[1], x->shape[2], x->shape[3]};
  const ganfw_tensor *rows[3] = {x, fake, y};
  if ((s = room(t, x->numel + 3 * k * per))) return s;
  float *all = t->buf + x->numel;
  for (int r = 0; r < 3; r++) {
    if ((s = h->tensor_to_host(rows[r], t->buf, rows[r]->nbytes))) return s;
    memcpy(all + r * k * per, t->buf, (size_t)(k * per) * sizeof *all);
  }
  if ((s = api->tensor(st, 4, shape, "samples", images))) return s;
  *nrow = k;
  return h->tensor_from_host(*images, all, (*images)->nbytes);
}

static const ganfw_config_key keys[] = {
    {"lambda_l1", GANFW_KEY_FLOAT, 0, 0, 100.0, NULL, NULL,
     "weight of the L1 term of the generator's loss"},
};
static const ganfw_config_keys key_table = {keys, sizeof keys / sizeof keys[0]};

static const void *p2p_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &key_table : NULL;
}

static const ganfw_trainer_vt p2p_vt = {
    .struct_size = sizeof(ganfw_trainer_vt),
    .kind = GANFW_VT_TAG_TRAINER,
    .create = p2p_create,
    .destroy = p2p_destroy,
    .role = p2p_role,
    .scalar = p2p_scalar,
    .step = p2p_step,
    .sample = p2p_sample,
    .evaluate = p2p_evaluate,
    /* no generator(): G maps images to images, not noise to images */
    .get_extension = p2p_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_TRAINER,
      .name = "pix2pix",
      .version = "1.0.0",
      .description = "pix2pix training step: paired image-to-image translation with a "
                     "conditional GAN and an L1 term (nets generator, discriminator)",
      .vtable = &p2p_vt,
  };
  return &desc;
}
