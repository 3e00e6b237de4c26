/* instancenorm2d layer (PyTorch's nn.InstanceNorm2d(C, eps, affine), track_running_stats
 * False): x [N,C,H,W], each sample's channel normalised over its H*W values, then weight
 * and bias [C] when affine. The group normalisation with one channel a group
 * (ganfw_norm_*, groupnorm.c). Args: ganfw_instancenorm_args (layer.h). */
#include "nn/layer.h"

static ganfw_norm_view in_view(const ganfw_layer *l, const int64_t *in) {
  const ganfw_instancenorm_args *a = &l->args.instancenorm;
  ganfw_norm_view v = {.C = a->channels, .HW = in[2] * in[3], .G = a->channels, .eps = a->eps};
  return v;
}

static ganfw_status in_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim, int64_t *out,
                             int32_t *out_ndim) {
  const int64_t C = l->args.instancenorm.channels;
  if (in_ndim != 4 || in[1] != C)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,%lld,H,W] input, gets %d dims with %lld channels",
                             (long long)C, (int)in_ndim, (long long)in[1]);
  /* as PyTorch: one value per channel has no variance to normalise by */
  if (in[2] * in[3] < 2)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "needs more than one value per channel, gets a %lldx%lld input; "
                             "use it before the spatial size drops to 1x1",
                             (long long)in[2], (long long)in[3]);
  for (int32_t d = 0; d < 4; d++) out[d] = in[d];
  *out_ndim = 4;
  return GANFW_OK;
}

static ganfw_status in_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  (void)in, (void)in_ndim;
  const ganfw_instancenorm_args *a = &l->args.instancenorm;
  return a->affine ? ganfw_norm_add_affine(l, 1, &a->channels) : GANFW_OK;
}

static ganfw_status in_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                               ganfw_tensor **y, ganfw_saved *saved) {
  ganfw_norm_view v = in_view(l, x->shape);
  return ganfw_norm_forward(l, ex, &v, x, y, saved);
}

static ganfw_status in_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                int32_t accumulate) {
  ganfw_norm_view v = in_view(l, saved->t[0]->shape);
  return ganfw_norm_backward(l, ex, &v, saved, dy, dx, param_grads, accumulate);
}

static ganfw_status in_backward2(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                 ganfw_tensor *dy, int32_t n, ganfw_tensor *const *u,
                                 ganfw_tensor **du, ganfw_tensor **ax, int32_t param_grads) {
  (void)n;
  ganfw_norm_view v = in_view(l, saved->t[0]->shape);
  return ganfw_norm_backward2(l, ex, &v, saved, dy, u, du, ax, param_grads);
}

const ganfw_layer_vt ganfw_layer_instancenorm2d = {
    .type = "instancenorm2d",
    .infer = in_infer,
    .init = in_init,
    .forward = in_forward,
    .backward = in_backward,
    .backward2 = in_backward2,
};
