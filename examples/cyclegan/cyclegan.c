/* The CycleGAN trainer of the example (ganfw_cyclegan.so), as Zhu et al. (2017) with their
 * least-squares (LSGAN) adversarial loss, on two unpaired image sets: A the data set
 * (GANFW_INPUT_IMAGES), B data.other (GANFW_INPUT_OTHER). Four nets of one model
 * (cyclegan_nets.c): generators g_ab: A -> B and g_ba: B -> A, discriminators d_a (real A
 * against g_ba's fakes) and d_b (real B against g_ab's fakes), each giving a map of patch
 * logits. Written against the installed headers only. One step:
 *
 *   "G step":  fb = G_ab(a), fa = G_ba(b);  ra = G_ba(fb), rb = G_ab(fa)
 *              loss_g = MSE(D_b(fb), 1) + MSE(D_a(fa), 1)
 *                       + lambda_cycle * (L1(ra, a) + L1(rb, b))
 *                       [+ lambda_cycle * lambda_identity * (L1(G_ab(b), b) + L1(G_ba(a), a))]
 *              backward through the Ds without their parameter gradients, then through
 *              both generators; the gradient of fb is what D_b and G_ba hand back, summed
 *              (likewise fa); optimizer steps of g_ab and g_ba.
 *   "D step":  loss_d_a = 0.5 * (MSE(D_a(a), 1) + MSE(D_a(fa), 0)), fa detached; d_b alike;
 *              optimizer steps of d_a and d_b.
 *
 * Each forward with a tape is consumed by one backward, so a generator that runs twice in a
 * step (G_ab on a, then on fa) runs with two tapes, each backward adding to its gradients.
 * Zhu et al.'s pool of 50 earlier fakes for D is left out: D sees this step's fakes.
 *
 * Scalars: loss_g, loss_g_ab and loss_g_ba (the adversarial terms of G_ab and G_ba), loss_cycle
 * (L1(ra, a) + L1(rb, b), unweighted), loss_d_a, loss_d_b, and loss_idt with lambda_identity.
 * sample(): rows of a, G_ab(a), b, G_ba(b). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

typedef struct cyclegan {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  const ganfw_step_api *api;
  double lambda_cycle;    /* weight of the cycle-consistency L1 */
  double lambda_identity; /* weight of the identity L1, relative to lambda_cycle; 0: none */
} cyclegan;

/* What one G step found, for the reports and the D step. */
typedef struct g_out {
  ganfw_tensor *fake_a, *fake_b; /* G_ba(b), G_ab(a): the D step's fakes (tapes consumed) */
  double adv_ab, adv_ba;         /* MSE(D_b(fake_b), 1), MSE(D_a(fake_a), 1) */
  double cycle_a, cycle_b;       /* L1(G_ba(fake_b), a), L1(G_ab(fake_a), b) */
  double idt;                    /* L1(G_ab(b), b) + L1(G_ba(a), a), or 0 */
} g_out;

static void cg_destroy(void *self) {
  free(self);
}

static ganfw_status cg_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              const ganfw_step_api *api, void **self) {
  *self = NULL;
  if (!api || api->struct_size < sizeof(ganfw_step_api))
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "cyclegan: this core has no step calls of ABI 1.6; use a newer ganfw");
  double lc = 10, li = 0;
  ganfw_status st;
  if ((st = host->cfg_float(cfg, "lambda_cycle", 10.0, &lc)) ||
      (st = host->cfg_float(cfg, "lambda_identity", 0.0, &li)))
    return st;
  if (!(lc >= 0 && lc <= 1e6))
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "cyclegan: trainer.lambda_cycle is %g; use a weight in [0, 1e6] (Zhu et "
                       "al. use 10)",
                       lc);
  if (!(li >= 0 && li <= 1e6))
    return host->error(ctx, GANFW_ERR_CONFIG,
                       "cyclegan: trainer.lambda_identity is %g; use a weight in [0, 1e6] (0: "
                       "no identity loss; Zhu et al. use 0.5)",
                       li);
  cyclegan *c = calloc(1, sizeof *c);
  if (!c) return host->error(ctx, GANFW_ERR_OOM, "cyclegan: out of host memory");
  *c = (cyclegan){.host = host, .ctx = ctx, .api = api, .lambda_cycle = lc, .lambda_identity = li};
  host->log(ctx, GANFW_LOG_INFO, "cyclegan: lambda_cycle %g, lambda_identity %g", lc, li);
  *self = c;
  return GANFW_OK;
}

static int32_t cg_role(void *self, int32_t i, const char **name, uint32_t *flags) {
  (void)self;
  static const char *const roles[] = {"g_ab", "g_ba", "d_a", "d_b"};
  if (i < 0 || i > 3) return 0;
  *name = roles[i];
  *flags = 0;
  return 1;
}

static int32_t cg_scalar(void *self, int32_t i, const char **name) {
  const cyclegan *c = self;
  static const char *const names[] = {"loss_g",   "loss_g_ab", "loss_g_ba", "loss_cycle",
                                      "loss_d_a", "loss_d_b",  "loss_idt"};
  if (i < 0 || i >= (c->lambda_identity > 0 ? 7 : 6)) return 0;
  *name = names[i];
  return 1;
}

/* The images of data.other, or a config error naming it. */
static ganfw_status other_images(cyclegan *c, ganfw_step *st, ganfw_tensor **b) {
  *b = c->api->input(st, GANFW_INPUT_OTHER);
  if (*b) return GANFW_OK;
  return c->host->error(c->ctx, GANFW_ERR_CONFIG,
                        "cyclegan: the config has no data.other; CycleGAN learns between two "
                        "image sets, the data set (A) and data.other (B): add e.g. `other: "
                        "{dataset: fashion_mnist}` to the data section");
}

/* A new tensor of like's shape, every element v. */
static ganfw_status full(cyclegan *c, ganfw_step *st, const ganfw_tensor *like, float v,
                         const char *name, ganfw_tensor **out) {
  ganfw_status s = c->api->tensor(st, like->ndim, like->shape, name, out);
  return s ? s : c->host->foreach_fill(c->ctx, out, 1, v);
}

/* The adversarial term of a generator: MSE(D(fake), 1) through the discriminator `d` without
 * its parameter gradients; *dfake its gradient for fake. */
static ganfw_status adversarial(cyclegan *c, ganfw_step *st, const char *d, ganfw_tensor *fake,
                                const char *name, double *loss, ganfw_tensor **dfake) {
  const ganfw_step_api *api = c->api;
  ganfw_tensor *logits, *ones, *dlogits;
  ganfw_status s;
  if ((s = api->forward(st, api->net(st, d), fake, GANFW_FWD_TAPE, &logits)) ||
      (s = full(c, st, logits, 1.0f, "ones", &ones)) ||
      (s = api->loss(st, GANFW_LOSS_MSE, GANFW_REDUCE_MEAN, logits, ones, 1.0, name, loss,
                     &dlogits)) ||
      (s = api->backward(st, logits, dlogits, GANFW_GRAD_INPUT, dfake)))
    return s;
  api->release(st, logits);
  api->release(st, ones);
  api->release(st, dlogits);
  return GANFW_OK;
}

/* The cycle term of one direction: rec = G(fake), weight * L1(rec, real) into the parameters
 * of generator `g`; *dfake its gradient for fake. */
static ganfw_status cycle(cyclegan *c, ganfw_step *st, const char *g, ganfw_tensor *fake,
                          ganfw_tensor *real, const char *name, double *loss,
                          ganfw_tensor **dfake) {
  const ganfw_step_api *api = c->api;
  ganfw_tensor *rec, *drec;
  ganfw_status s;
  if ((s = api->forward(st, api->net(st, g), fake, GANFW_FWD_TAPE, &rec)) ||
      (s = api->loss(st, GANFW_LOSS_L1, GANFW_REDUCE_MEAN, rec, real, c->lambda_cycle, name, loss,
                     &drec)) ||
      (s = api->backward(st, rec, drec, GANFW_GRAD_PARAMS | GANFW_GRAD_INPUT, dfake)))
    return s;
  api->release(st, rec);
  api->release(st, drec);
  return GANFW_OK;
}

/* The identity term of generator `g`: weight * L1(G(real), real), into its parameters. */
static ganfw_status identity(cyclegan *c, ganfw_step *st, const char *g, ganfw_tensor *real,
                             double *loss) {
  const ganfw_step_api *api = c->api;
  ganfw_tensor *idt, *didt;
  ganfw_status s;
  if ((s = api->forward(st, api->net(st, g), real, GANFW_FWD_TAPE, &idt)) ||
      (s = api->loss(st, GANFW_LOSS_L1, GANFW_REDUCE_MEAN, idt, real,
                     c->lambda_cycle * c->lambda_identity, "loss_idt", loss, &didt)) ||
      (s = api->backward(st, idt, didt, GANFW_GRAD_PARAMS, NULL)))
    return s;
  api->release(st, idt);
  api->release(st, didt);
  return GANFW_OK;
}

/* Both generators' update. The gradient of each fake is the sum of what its discriminator
 * and the other generator (the cycle) hand back; one backward then takes it into the
 * generator that made it. */
static ganfw_status g_step(cyclegan *c, ganfw_step *st, ganfw_tensor *a, ganfw_tensor *b,
                           g_out *o) {
  const ganfw_step_api *api = c->api;
  ganfw_tensor *dfb, *dfa, *dfb_cyc, *dfa_cyc;
  ganfw_status s;
  if ((s = api->phase(st, "G step")) ||
      (s = api->forward(st, api->net(st, "g_ab"), a, GANFW_FWD_TAPE, &o->fake_b)) ||
      (s = api->forward(st, api->net(st, "g_ba"), b, GANFW_FWD_TAPE, &o->fake_a)) ||
      (s = adversarial(c, st, "d_b", o->fake_b, "loss_g_ab", &o->adv_ab, &dfb)) ||
      (s = adversarial(c, st, "d_a", o->fake_a, "loss_g_ba", &o->adv_ba, &dfa)) ||
      (s = cycle(c, st, "g_ba", o->fake_b, a, "loss_cycle_a", &o->cycle_a, &dfb_cyc)) ||
      (s = cycle(c, st, "g_ab", o->fake_a, b, "loss_cycle_b", &o->cycle_b, &dfa_cyc)) ||
      (s = c->host->tensor_add(c->ctx, dfb, dfb, dfb_cyc)) ||
      (s = c->host->tensor_add(c->ctx, dfa, dfa, dfa_cyc)) ||
      (s = api->backward(st, o->fake_b, dfb, GANFW_GRAD_PARAMS, NULL)) ||
      (s = api->backward(st, o->fake_a, dfa, GANFW_GRAD_PARAMS, NULL)))
    return s;
  api->release(st, dfb);
  api->release(st, dfa);
  api->release(st, dfb_cyc);
  api->release(st, dfa_cyc);
  o->idt = 0;
  if (c->lambda_identity > 0) {
    double ia, ib;
    if ((s = identity(c, st, "g_ab", b, &ib)) || (s = identity(c, st, "g_ba", a, &ia))) return s;
    o->idt = ia + ib;
  }
  if ((s = api->optimizer_step(st, "g_ab"))) return s;
  return api->optimizer_step(st, "g_ba");
}

/* One discriminator's update: 0.5 * (MSE(D(real), 1) + MSE(D(fake), 0)), fake detached (no
 * backward goes past D's input). */
static ganfw_status d_update(cyclegan *c, ganfw_step *st, const char *d, ganfw_tensor *real,
                             ganfw_tensor *fake, double *loss) {
  const ganfw_step_api *api = c->api;
  ganfw_net *net = api->net(st, d);
  ganfw_tensor *x[2] = {real, fake};
  double part[2];
  for (int i = 0; i < 2; i++) {
    ganfw_tensor *logits, *target, *dlogits;
    ganfw_status s;
    if ((s = api->forward(st, net, x[i], GANFW_FWD_TAPE, &logits)) ||
        (s = full(c, st, logits, i == 0 ? 1.0f : 0.0f, i == 0 ? "ones" : "zeros", &target)) ||
        (s = api->loss(st, GANFW_LOSS_MSE, GANFW_REDUCE_MEAN, logits, target, 0.5,
                       strcmp(d, "d_a") == 0 ? "loss_d_a" : "loss_d_b", &part[i], &dlogits)) ||
        (s = api->backward(st, logits, dlogits, GANFW_GRAD_PARAMS, NULL)))
      return s;
    api->release(st, logits);
    api->release(st, target);
    api->release(st, dlogits);
  }
  *loss = 0.5 * (part[0] + part[1]);
  return api->optimizer_step(st, d);
}

static ganfw_status cg_step(void *self, ganfw_step *st) {
  cyclegan *c = self;
  const ganfw_step_api *api = c->api;
  ganfw_tensor *a = api->input(st, GANFW_INPUT_IMAGES), *b;
  g_out o;
  double da, db;
  ganfw_status s;
  if ((s = other_images(c, st, &b)) || (s = g_step(c, st, a, b, &o)) ||
      (s = api->phase(st, "D step")) || (s = d_update(c, st, "d_a", a, o.fake_a, &da)) ||
      (s = d_update(c, st, "d_b", b, o.fake_b, &db)))
    return s;
  const double cyc = o.cycle_a + o.cycle_b;
  const double loss_g = o.adv_ab + o.adv_ba + c->lambda_cycle * (cyc + c->lambda_identity * o.idt);
  if ((s = api->report(st, "loss_g", loss_g)) || (s = api->report(st, "loss_g_ab", o.adv_ab)) ||
      (s = api->report(st, "loss_g_ba", o.adv_ba)) || (s = api->report(st, "loss_cycle", cyc)) ||
      (s = api->report(st, "loss_d_a", da)) || (s = api->report(st, "loss_d_b", db)))
    return s;
  return c->lambda_identity > 0 ? api->report(st, "loss_idt", o.idt) : GANFW_OK;
}

/* Rows of k images each: a, G_ab(a), b, G_ba(b). */
static ganfw_status cg_sample(void *self, ganfw_step *st, ganfw_tensor **images, int64_t *nrow) {
  cyclegan *c = self;
  const ganfw_step_api *api = c->api;
  const ganfw_host *host = c->host;
  ganfw_tensor *a = api->input(st, GANFW_INPUT_IMAGES), *b, *fb, *fa;
  ganfw_status s;
  if ((s = other_images(c, st, &b)) ||
      (s = api->forward(st, api->net(st, "g_ab"), a, GANFW_FWD_NO_GRAD, &fb)) ||
      (s = api->forward(st, api->net(st, "g_ba"), b, GANFW_FWD_NO_GRAD, &fa)))
    return s;
  int64_t k = a->shape[0] < b->shape[0] ? a->shape[0] : b->shape[0];
  k = k < 8 ? k : 8;
  const int64_t per = a->numel / a->shape[0];
  ganfw_tensor *const rows[4] = {a, fb, b, fa};
  const int64_t shape[4] = {4 * k, a->shape[1], a->shape[2], a->shape[3]};
  int64_t most = 0;
  for (int i = 0; i < 4; i++) most = rows[i]->numel > most ? rows[i]->numel : most;
  float *all = malloc((size_t)(4 * k * per) * sizeof *all),
        *tmp = malloc((size_t)most * sizeof *tmp);
  s = all && tmp ? GANFW_OK : host->error(c->ctx, GANFW_ERR_OOM, "cyclegan: out of host memory");
  for (int i = 0; i < 4 && s == GANFW_OK; i++)
    if ((s = host->tensor_to_host(rows[i], tmp, rows[i]->nbytes)) == GANFW_OK)
      memcpy(all + i * k * per, tmp, (size_t)(k * per) * sizeof *all);
  if (s == GANFW_OK) s = api->tensor(st, 4, shape, "samples", images);
  if (s == GANFW_OK) s = host->tensor_from_host(*images, all, (*images)->nbytes);
  free(all);
  free(tmp);
  *nrow = k;
  return s;
}

static const ganfw_config_key keys[] = {
    {"lambda_cycle", GANFW_KEY_FLOAT, 0, 0, 10.0, NULL, NULL,
     "weight of the cycle-consistency L1 (Zhu et al.: 10)"},
    {"lambda_identity", GANFW_KEY_FLOAT, 0, 0, 0.0, NULL, NULL,
     "weight of the identity L1, times lambda_cycle (0: none; Zhu et al.: 0.5)"},
};
static const ganfw_config_keys key_table = {keys, sizeof keys / sizeof keys[0]};

static const void *cg_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &key_table : NULL;
}

static const ganfw_trainer_vt cg_vt = {
    .struct_size = sizeof(ganfw_trainer_vt),
    .kind = GANFW_VT_TAG_TRAINER,
    .create = cg_create,
    .destroy = cg_destroy,
    .role = cg_role,
    .scalar = cg_scalar,
    .step = cg_step,
    .sample = cg_sample,
    .get_extension = cg_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_TRAINER,
      .name = "cyclegan",
      .version = "1.0.0",
      .description = "CycleGAN (Zhu et al. 2017, LSGAN loss) between data and data.other "
                     "(nets g_ab, g_ba, d_a, d_b)",
      .vtable = &cg_vt,
  };
  return &desc;
}
