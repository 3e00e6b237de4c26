/* The bundled GAN objectives (ganfw/objective.h), one plugin per loss, built from this one
 * file with OBJ_KIND naming the loss. y is D's output per sample; every term is a mean over
 * the batch, as the PyTorch formulas they are tested against (tests/ref/gen_objectives.py):
 *
 *   bce    D: BCEWithLogits(y_real, 1 - label_smoothing) + BCEWithLogits(y_fake, 0)
 *          G: BCEWithLogits(y_fake, 1)                    (non-saturating, DC-GAN)
 *   hinge  D: mean(relu(1 - y_real)) + mean(relu(1 + y_fake))   G: -mean(y_fake)   (SN-GAN)
 *   lsgan  D: 0.5 mean((y_real - b)^2) + 0.5 mean((y_fake - a)^2)
 *          G: 0.5 mean((y_fake - c)^2)                    (LSGAN with a = 0, b = c = 1)
 *   wgan   D: mean(y_fake) - mean(y_real)   G: -mean(y_fake); after every D step each of
 *          D's parameters is clamped to [-clip, clip]     (WGAN; use with n_critic 5)
 *
 * Accumulation is in double; the gradients are float. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#define OBJ_BCE   0
#define OBJ_HINGE 1
#define OBJ_LSGAN 2
#define OBJ_WGAN  3

#ifndef OBJ_KIND
#error "build with -DOBJ_KIND=OBJ_BCE (or OBJ_HINGE, OBJ_LSGAN, OBJ_WGAN): see CMakeLists.txt"
#endif

typedef struct objective {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  double label_smoothing; /* bce */
  double a, b, c;         /* lsgan: fake, real and G targets */
  double clip;            /* wgan: 0 is no clipping */
} objective;

#if OBJ_KIND == OBJ_BCE
#define OBJ_NAME        "bce"
#define OBJ_DESCRIPTION "non-saturating BCE with logits (DC-GAN)"
static const ganfw_config_key keys[] = {
    {.key = "label_smoothing",
     .type = GANFW_KEY_FLOAT,
     .def_float = 0.0,
     .help = "D's real target is 1 - label_smoothing (one-sided), in [0, 0.5)"},
};
#elif OBJ_KIND == OBJ_HINGE
#define OBJ_NAME        "hinge"
#define OBJ_DESCRIPTION "hinge loss (SN-GAN, BigGAN)"
#elif OBJ_KIND == OBJ_LSGAN
#define OBJ_NAME        "lsgan"
#define OBJ_DESCRIPTION "least squares (LSGAN)"
static const ganfw_config_key keys[] = {
    {.key = "a", .type = GANFW_KEY_FLOAT, .def_float = 0.0, .help = "D's target for fakes"},
    {.key = "b", .type = GANFW_KEY_FLOAT, .def_float = 1.0, .help = "D's target for reals"},
    {.key = "c", .type = GANFW_KEY_FLOAT, .def_float = 1.0, .help = "G's target for its fakes"},
};
#elif OBJ_KIND == OBJ_WGAN
#define OBJ_NAME        "wgan"
#define OBJ_DESCRIPTION "Wasserstein critic with weight clipping (WGAN)"
static const ganfw_config_key keys[] = {
    {.key = "clip",
     .type = GANFW_KEY_FLOAT,
     .def_float = 0.01,
     .help = "clamp D's parameters to [-clip, clip] after each D step; 0: no clipping"},
};
#endif

static ganfw_status obj_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                               void **self) {
  *self = NULL;
  objective *o = calloc(1, sizeof *o);
  if (!o) return host->error(ctx, GANFW_ERR_OOM, OBJ_NAME ": out of host memory");
  o->host = host;
  o->ctx = ctx;
  ganfw_status st = GANFW_OK;
#if OBJ_KIND == OBJ_BCE
  st = host->cfg_float(cfg, "label_smoothing", 0.0, &o->label_smoothing);
  if (st == GANFW_OK && !(o->label_smoothing >= 0 && o->label_smoothing < 0.5))
    st = host->error(ctx, GANFW_ERR_CONFIG,
                     "bce: label_smoothing is %g; it must be in [0, 0.5) (0.1 makes D's real "
                     "target 0.9)",
                     o->label_smoothing);
#elif OBJ_KIND == OBJ_LSGAN
  if ((st = host->cfg_float(cfg, "a", 0.0, &o->a)) == GANFW_OK &&
      (st = host->cfg_float(cfg, "b", 1.0, &o->b)) == GANFW_OK)
    st = host->cfg_float(cfg, "c", 1.0, &o->c);
  if (st == GANFW_OK && !(o->a < o->b))
    st = host->error(ctx, GANFW_ERR_CONFIG,
                     "lsgan: a (the fake target, %g) must be below b (the real target, %g)", o->a,
                     o->b);
#elif OBJ_KIND == OBJ_WGAN
  st = host->cfg_float(cfg, "clip", 0.01, &o->clip);
  if (st == GANFW_OK && !(o->clip >= 0 && o->clip <= 1e6))
    st =
        host->error(ctx, GANFW_ERR_CONFIG,
                    "wgan: clip is %g; it must be 0 (no clipping) or positive, e.g. 0.01", o->clip);
#else
  (void)cfg;
#endif
  if (st != GANFW_OK) {
    free(o);
    return st;
  }
  *self = o;
  return GANFW_OK;
}

static void obj_destroy(void *self) {
  free(self);
}

#if OBJ_KIND == OBJ_BCE
/* BCE with logits of y against t and its derivative, in the stable form PyTorch uses. */
static double bce(double y, double t, double *dy) {
  *dy = 1.0 / (1.0 + exp(-y)) - t;
  return fmax(y, 0.0) - y * t + log1p(exp(-fabs(y)));
}
#endif

/* One sample's loss and derivative for term `term`. */
static double sample_loss(const objective *o, int32_t term, double y, double *dy) {
#if OBJ_KIND == OBJ_BCE
  const double target = term == GANFW_OBJ_D_REAL   ? 1.0 - o->label_smoothing
                        : term == GANFW_OBJ_D_FAKE ? 0.0
                                                   : 1.0;
  return bce(y, target, dy);
#elif OBJ_KIND == OBJ_HINGE
  (void)o;
  if (term == GANFW_OBJ_G) {
    *dy = -1.0;
    return -y;
  }
  const double sign = term == GANFW_OBJ_D_REAL ? -1.0 : 1.0; /* relu(1 - y), relu(1 + y) */
  const double m = 1.0 + sign * y;
  *dy = m > 0 ? sign : 0.0; /* relu's derivative at 0 is 0, as in PyTorch */
  return m > 0 ? m : 0.0;
#elif OBJ_KIND == OBJ_LSGAN
  const double target = term == GANFW_OBJ_D_REAL ? o->b : term == GANFW_OBJ_D_FAKE ? o->a : o->c;
  *dy = y - target; /* of 0.5 (y - target)^2 */
  return 0.5 * (y - target) * (y - target);
#elif OBJ_KIND == OBJ_WGAN
  (void)o;
  const double sign = term == GANFW_OBJ_D_FAKE ? 1.0 : -1.0;
  *dy = sign;
  return sign * y;
#endif
}

static ganfw_status obj_loss(void *self, int32_t term, int64_t n, const float *y, double *loss,
                             float *dy) {
  objective *o = self;
  if (term < 0 || term >= GANFW_OBJ_TERM_COUNT || n < 1)
    return o->host->error(o->ctx, GANFW_ERR_INVALID_ARG, OBJ_NAME ": term %d of %lld outputs",
                          (int)term, (long long)n);
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = 0;
    sum += sample_loss(o, term, (double)y[i], &d);
    if (dy) dy[i] = (float)(d / (double)n);
  }
  *loss = sum / (double)n;
  return GANFW_OK;
}

#if OBJ_KIND == OBJ_BCE
/* D(x) as a probability: the mean sigmoid, as PyTorch's DC-GAN example prints it. */
static double obj_summary(void *self, int64_t n, const float *y) {
  (void)self;
  double p = 0;
  for (int64_t i = 0; i < n; i++) p += 1.0 / (1.0 + exp(-(double)y[i]));
  return p / (double)n;
}
#endif

#if OBJ_KIND == OBJ_WGAN
/* WGAN's Lipschitz constraint by weight clipping: each parameter of D clamped in place. */
static ganfw_status obj_after_d_step(void *self, const ganfw_param *params, int64_t n) {
  objective *o = self;
  if (o->clip == 0) return GANFW_OK;
  for (int64_t i = 0; i < n; i++) {
    ganfw_status st = o->host->tensor_clamp(o->ctx, params[i].value, params[i].value,
                                            (float)-o->clip, (float)o->clip);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}
#endif

#if OBJ_KIND != OBJ_HINGE
static const ganfw_config_keys key_table = {keys, sizeof keys / sizeof keys[0]};
static const void *obj_get_extension(const char *id) {
  return strcmp(id, GANFW_EXT_CONFIG_KEYS) == 0 ? &key_table : NULL;
}
#else
static const void *obj_get_extension(const char *id) {
  (void)id;
  return NULL;
}
#endif

static const ganfw_objective_vt vt = {
    .struct_size = sizeof(ganfw_objective_vt),
    .kind = GANFW_VT_TAG_OBJECTIVE,
    .create = obj_create,
    .destroy = obj_destroy,
    .loss = obj_loss,
#if OBJ_KIND == OBJ_BCE
    .summary = obj_summary,
#endif
#if OBJ_KIND == OBJ_WGAN
    .after_d_step = obj_after_d_step,
#endif
    .get_extension = obj_get_extension,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_OBJECTIVE,
      .name = OBJ_NAME,
      .version = "1.0.0",
      .description = OBJ_DESCRIPTION,
      .vtable = &vt,
  };
  return &desc;
}
