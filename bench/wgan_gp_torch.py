"""PyTorch twin of bench_dcgan_step.c on configs/wgan_gp_fashion.yaml: the WGAN-GP step of
Gulrajani et al. with the DC-GAN generator at 32x32 (bench/dcgan_torch.py's) and its critic
with nn.LayerNorm([C,H,W]) in place of BatchNorm, Adam 1e-4 betas (0, 0.9), lambda 10, five
critic steps per generator step, in ganfw's order (core/src/train/gan_step.c): D on the real
batch and backward, G(z) under no-grad, the penalty on interpolates (D forward,
torch.autograd.grad(create_graph=True), the penalty's backward), D on G(z) and backward,
D's step; on every fifth step G's step through D. Medians are those of critic steps (four
of five steps). Prints one machine-readable line:  torch median_ms=... min_ms=... rss_mib=...

  /usr/bin/python3 bench/wgan_gp_torch.py [--steps 20] [--warmup 5] [--threads 2] [--batch 64]
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dcgan_torch import Generator, time_steps, weights_init  # noqa: E402 (no side effects)

LAMBDA, N_CRITIC = 10.0, 5


class Critic(nn.Module):
    """The DC-GAN discriminator at 32x32 with LayerNorm([C,H,W]) after its inner convs
    (ganfw's model.d_norm: layernorm), returning one score per sample."""

    def __init__(self, nc, ndf):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.LayerNorm([ndf * 2, 8, 8]),
            nn.LeakyReLU(0.2),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.LayerNorm([ndf * 4, 4, 4]),
            nn.LeakyReLU(0.2),
            nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False))

    def forward(self, x):
        return self.main(x).view(-1)


def gradient_penalty(D, real, fake):
    """lambda * mean((||grad D(x_hat)||_2 - 1)^2) on x_hat = fake + eps (real - fake)."""
    eps = torch.rand(real.shape[0], 1, 1, 1)
    xh = (fake + eps * (real - fake)).requires_grad_(True)
    gx, = torch.autograd.grad(D(xh).sum(), xh, create_graph=True)
    return LAMBDA * ((gx.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    nz, n = 100, a.batch
    G, D = Generator(nz, 64, 1), Critic(1, 64)
    G.apply(weights_init)
    D.apply(weights_init)
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9))
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.0, 0.9))
    x = torch.rand(n, 1, 32, 32) * 2 - 1

    def step(i):
        z = torch.randn(n, nz, 1, 1)
        D.zero_grad(set_to_none=True)
        (-D(x).mean()).backward()
        with torch.no_grad():
            fake = G(z)
        gradient_penalty(D, x, fake).backward()
        D(fake).mean().backward()
        opt_d.step()
        if (i + 1) % N_CRITIC:
            return
        G.zero_grad(set_to_none=True)
        for p in D.parameters():
            p.requires_grad_(False)
        (-D(G(z)).mean()).backward()
        for p in D.parameters():
            p.requires_grad_(True)
        opt_g.step()

    time_steps(step, a.warmup, a.steps, n, "off")

if __name__ == "__main__":
    main()
