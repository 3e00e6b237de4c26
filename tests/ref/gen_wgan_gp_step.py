"""One WGAN-GP critic step in PyTorch, the reference for tests/test_ref_penalty.c's whole
step: the DC-GAN generator at 32x32 with one channel, and its critic with
nn.LayerNorm([C,H,W]) in place of BatchNorm (ganfw's model.d_norm: layernorm); the loss of
WGAN-GP's Algorithm 1 with lambda 10:

    L = mean(D(G(z))) - mean(D(x)) + 10 mean((||grad_xh D(xh)||_2 - 1)^2),
    xh = G(z) + eps (x - G(z)),  eps ~ U(0, 1) per sample,

the gradient by torch.autograd.grad(create_graph=True), then Adam(1e-4, betas (0, 0.9)).
eps is ganfw's draw: the run's Philox 4x32-10 stream (core/src/base/philox.h) of seed SEED
from block EPS_OFFSET, uniform as core/src/backend/cpu/rng.c (the C test puts the context's
offset there before the step). Written: the initial state_dicts, the batch, the noise, eps,
the penalty, the gradients and the critic's weights after its step."""
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from dcgan_ref import Net, generator, weights_init
from gen_trainer_ae import philox_block
from reflib import save, seeded

NZ, NGF, NDF, NC, BATCH, LAMBDA = 100, 64, 64, 1, 8, 10.0
SEED, EPS_OFFSET = 1, 5000


def philox_uniform(n, seed, offset):
    """n U(0, 1) f32 samples as the CPU's rng_uniform op: element i from block offset + i/4,
    word i % 4, (w >> 8) * 2^-24."""
    words = np.array([philox_block(seed, offset + b) for b in range((n + 3) // 4)],
                     dtype=np.uint32).reshape(-1)[:n]
    return torch.from_numpy((words >> 8).astype(np.float32) * np.float32(1.0 / 16777216.0))


def critic(nc, ndf):
    return Net(nn.Sequential(
        nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.LayerNorm([ndf * 2, 8, 8]),
        nn.LeakyReLU(0.2),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.LayerNorm([ndf * 4, 4, 4]),
        nn.LeakyReLU(0.2),
        nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False)))


def state(prefix, net):
    return {f"{prefix}.{k}": v.detach().clone() for k, v in net.state_dict().items()}


def generate(out_dir):
    g = seeded(13)
    G, D = generator(NZ, NGF, NC), critic(NC, NDF)
    G.apply(lambda m: weights_init(m, g))
    D.apply(lambda m: weights_init(m, g))
    with torch.no_grad():  # layer norms away from ones and zeros, so their gradients count
        for m in D.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1 + 0.1 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
    real = torch.rand(BATCH, NC, 32, 32, generator=g) * 2 - 1
    z = torch.randn(BATCH, NZ, 1, 1, generator=g)
    eps = philox_uniform(BATCH, SEED, EPS_OFFSET).reshape(BATCH, 1, 1, 1)
    tensors = {**state("generator", G), **state("discriminator", D), "real": real, "z": z,
               "eps": eps.reshape(-1)}
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.0, 0.9))
    D.zero_grad()
    with torch.no_grad():
        fake = G(z)
    loss = D(fake).mean() - D(real).mean()
    xh = (fake + eps * (real - fake)).requires_grad_(True)
    gx, = torch.autograd.grad(D(xh).sum(), xh, create_graph=True)
    gp = LAMBDA * ((gx.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
    (loss + gp).backward()
    tensors.update({f"grad.discriminator.{k}": p.grad.detach().clone()
                    for k, p in D.named_parameters()})
    opt_d.step()
    tensors.update({"loss_d": loss.detach().reshape(1), "gp": gp.detach().reshape(1)})
    tensors.update(state("after.discriminator", D))
    save(os.path.join(out_dir, "wgan_gp_step.safetensors"), tensors)
