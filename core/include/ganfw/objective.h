/* The GAN objective plugin interface (ABI 1.4): the losses the discriminator (or critic)
 * and the generator minimise, as functions of D's outputs, one value per sample. The core
 * runs the nets; an objective sees only D's outputs of a batch, on the host (f32, [n]),
 * and returns the loss of one term and its gradient with respect to those outputs:
 *
 *   loss_D = term(D_REAL, D(x)) + term(D_FAKE, D(G(z)))     loss_G = term(G, D(G(z)))
 *
 * so that an objective is a few lines of arithmetic and runs with every backend. The
 * bundled ones are plugins/objective/{bce,hinge,lsgan,wgan}; `objective: {plugin: NAME}`
 * in a config selects one. Without an `objective` section the core's built-in BCE with
 * logits runs on the device (the figures of configs without the key are those of ABI 1.3).
 *
 * What an objective cannot express here: a penalty on gradients with respect to D's input
 * (WGAN-GP, R1) needs the gradient of a gradient (double backward), which the executor
 * does not have (docs/OBJECTIVES.md says what it would need). */
#ifndef GANFW_OBJECTIVE_H
#define GANFW_OBJECTIVE_H

#include "host.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The terms of the losses, stored as int32_t. */
enum {
  GANFW_OBJ_D_REAL = 0, /* D's loss on the real batch */
  GANFW_OBJ_D_FAKE = 1, /* D's loss on G(z) */
  GANFW_OBJ_G = 2,      /* G's loss on D(G(z)) */
  GANFW_OBJ_TERM_COUNT
};

/* Add new members at the end only, in a block dated with the minor version. Callbacks are
 * [main-thread]. */
typedef struct ganfw_objective_vt {
  uint32_t struct_size; /* sizeof(ganfw_objective_vt) */
  uint32_t kind;        /* GANFW_VT_TAG_OBJECTIVE */
  /* Reads the config's `objective` section. *self is owned by the plugin, freed by
   * destroy. `ctx` is the session's (for host->error and, in after_d_step, tensor math). */
  ganfw_status (*create)(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg, void **self);
  void (*destroy)(void *self); /* accepts NULL */
  /* The term `term` (GANFW_OBJ_*) for D's outputs y[0..n): its value in *loss and, when dy
   * is not NULL, dy[i] = d(*loss)/d(y[i]). y may hold NaN or inf (the core checks *loss and
   * stops or skips as train.on_nonfinite says); a term must not fail for them. */
  ganfw_status (*loss)(void *self, int32_t term, int64_t n, const float *y, double *loss,
                       float *dy);
  /* (optional) What the log and metrics.csv show as D(x) and D(G(z)) for outputs y[0..n):
   * e.g. the mean sigmoid for BCE with logits. NULL: the mean of y. */
  double (*summary)(void *self, int64_t n, const float *y);
  /* (optional) After every optimizer step of the discriminator, with its trainable
   * parameters: e.g. WGAN's weight clipping (host->tensor_clamp). */
  ganfw_status (*after_d_step)(void *self, const ganfw_param *params, int64_t n);
  /* (optional) An optional capability by its versioned id (see ganfw/plugin.h). */
  const void *(*get_extension)(const char *id);
} ganfw_objective_vt;

#ifdef __cplusplus
}
#endif
#endif
