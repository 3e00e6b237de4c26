/* Pixel normalisation (Karras et al., "Progressive Growing of GANs", 2018, section 4.2) as a
 * ganfw plugin layer: each pixel's feature vector scaled to unit mean square over the
 * channels, y[n,c,h,w] = x[n,c,h,w] / sqrt(mean_c x[n,:,h,w]^2 + eps), on [N,C,H,W] or
 * [N,C]. With affine, y is then scaled and shifted per channel by the parameters "weight"
 * (ones) and "bias" (zeros), as LayerNorm's elementwise_affine. Written with the host's
 * tensor ops only, so it runs on every backend ganfw has; built against the installed
 * headers alone. */
#ifndef PIXELNORM_H
#define PIXELNORM_H

#include <stdint.h>

#include <ganfw/ganfw.h>

/* The layer kind, for host->net_custom(net, name, pixelnorm_def(), state). */
const ganfw_layer_def *pixelnorm_def(void);

/* A layer's settings: `channels` C of its input, `eps` (ProGAN's 1e-8), `affine` 0 or 1.
 * The net that receives it through net_custom owns it (the def's destroy frees it); NULL with
 * the error recorded when out of memory. */
void *pixelnorm_state_create(const ganfw_host *host, ganfw_ctx *ctx, int64_t channels, float eps,
                             int32_t affine);

#endif
