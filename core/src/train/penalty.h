/* Penalties on a discriminator's input gradient (WGAN-GP's gradient penalty, R1, R2): the
 * penalty of a batch of input gradients and its gradient with respect to them, which
 * ganfw_net_backward_of_backward (nn/net.h) turns into parameter gradients. */
#ifndef GANFW_PENALTY_H
#define GANFW_PENALTY_H

#include "ganfw/host.h"

enum {
  GANFW_PENALTY_GP = 0, /* weight * mean_n (||g_n||_2 - 1)^2 (Gulrajani et al. 2017) */
  GANFW_PENALTY_R1 = 1, /* weight / 2 * mean_n ||g_n||_2^2 (Mescheder et al. 2018), on reals */
  GANFW_PENALTY_R2 = 2, /* the same formula on fakes */
};

/* The penalty `kind` of the input gradients gx ([N, C, ...], any float dtype, divided by
 * `scale` first: the loss scale the backward ran with), g_n being sample n's first
 * `channels` channels (0: all of them; a conditional discriminator's class maps after the
 * image are left out). *value = P; *v = out_scale * dP/dgx as a new f32 tensor of gx's
 * shape (zero on the channels left out), owned by the caller. A zero norm under GP has the
 * subgradient 0 there, as torch's norm backward gives. */
ganfw_status ganfw_penalty_grad(ganfw_ctx *ctx, int32_t kind, double weight, ganfw_tensor *gx,
                                double scale, int64_t channels, double out_scale, double *value,
                                ganfw_tensor **v);

#endif
