/* Global-norm gradient clipping (see trainer.h), as torch.nn.utils.clip_grad_norm_ with the
 * L2 norm: the norm of all gradients of one optimizer together, and every gradient scaled
 * by max_norm / (norm + 1e-6) when that is below 1. */
#include <math.h>

#include "train/trainer.h"
#include "backend/ops.h"

ganfw_status ganfw_clip_grad_norm(ganfw_session *s, int32_t opt, double max_norm, double *norm) {
  ganfw_backend *be = s->ctx->be;
  const ganfw_session_optim *o = &s->optim[opt];
  double sumsq = 0;
  ganfw_status st = GANFW_OK;
  for (int64_t i = 0; st == GANFW_OK && i < o->n_params; i++) {
    const ganfw_tensor *g = o->params[i].grad;
    ganfw_op op = {.kind = GANFW_OP_SUMSQ, .shape.d = {g->numel}, .in = {g->data}};
    st = ganfw_backend_run(be, &op);
    sumsq += op.result;
  }
  if (st != GANFW_OK) return st;
  *norm = sqrt(sumsq);
  const double coef = max_norm / (*norm + 1e-6);
  if (!(coef < 1.0)) return GANFW_OK; /* a NaN norm leaves the gradients as they are */
  for (int64_t i = 0; st == GANFW_OK && i < o->n_params; i++)
    st = ganfw_be_scale(be, o->params[i].grad->numel, o->params[i].grad->data, (float)coef);
  return st;
}
