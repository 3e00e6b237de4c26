"""PyTorch twin of bench_dcgan_step.c: the DC-GAN training step at 32x32 (G and D of
PyTorch's examples/dcgan with one stage fewer) or, with --size 64, at the example's 64x64 (as
ganfw's dcgan plugin at model.image_size 64); D without the final Sigmoid, weights_init
N(0, 0.02), Adam 2e-4 betas (0.5, 0.999), BCE-with-logits, in ganfw's step order
(core/src/train/gan_step.c). One random real batch [N,nc,size,size] in [-1,1]; fresh noise
each step.
Prints one machine-readable line:  torch median_ms=... min_ms=... rss_mib=...

Run with Debian's interpreter:
  /usr/bin/python3 bench/dcgan_torch.py [--steps 20] [--warmup 5] [--threads 2] [--batch 64]
                                        [--nc 1] [--size 32|64] [--autocast bf16]
--autocast bf16 runs the forwards and losses under torch.autocast("cpu", torch.bfloat16),
PyTorch's CPU mixed precision (1.13's CPU autocast has bf16 only), f32 weights and Adam.
"""
import contextlib
import argparse
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def stages_of(size):
    """Stride-2 stages between 4x4 and size/2: 2 at 32 (the example with one fewer), 3 at 64."""
    return {32: 2, 64: 3}[size]


class Generator(nn.Module):
    """z [N,nz,1,1] -> [N,nc,size,size]; at 64: ConvT 1->4 (ngf*8), 4->8->16->32, 32->64 (nc)."""

    def __init__(self, nz, ngf, nc, size=32):
        super().__init__()
        ch = ngf << stages_of(size)
        layers = [nn.ConvTranspose2d(nz, ch, 4, 1, 0, bias=False),  # 1 -> 4
                  nn.BatchNorm2d(ch), nn.ReLU(True)]
        for _ in range(stages_of(size)):  # 4 -> 8 -> ... -> size/2, halving the channels
            layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(ch // 2), nn.ReLU(True)]
            ch //= 2
        layers += [nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()]  # -> size
        self.main = nn.Sequential(*layers)

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    """[N,nc,size,size] -> logits [N]; at 64: Conv 64->32 (ndf), 32->16->8->4 (to ndf*8), 4->1."""

    def __init__(self, nc, ndf, size=32):
        super().__init__()
        ch = ndf
        layers = [nn.Conv2d(nc, ch, 4, 2, 1, bias=False),  # size -> size/2
                  nn.LeakyReLU(0.2, inplace=True)]
        for _ in range(stages_of(size)):  # ... -> 4, doubling the channels
            layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch * 2),
                       nn.LeakyReLU(0.2, inplace=True)]
            ch *= 2
        layers += [nn.Conv2d(ch, 1, 4, 1, 0, bias=False)]  # 4 -> 1, a logit
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x).view(-1)


def weights_init(m):
    name = m.__class__.__name__
    if name.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif name.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--nz", type=int, default=100)
    ap.add_argument("--ngf", type=int, default=64)
    ap.add_argument("--ndf", type=int, default=64)
    ap.add_argument("--nc", type=int, default=1)
    ap.add_argument("--size", type=int, choices=[32, 64], default=32)
    ap.add_argument("--autocast", choices=["bf16"], default=None)
    a = ap.parse_args()

    def ac():
        if a.autocast:
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    G = Generator(a.nz, a.ngf, a.nc, a.size)
    D = Discriminator(a.nc, a.ndf, a.size)
    G.apply(weights_init)
    D.apply(weights_init)
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    n = a.batch
    x = torch.rand(n, a.nc, a.size, a.size) * 2 - 1
    real_t = torch.ones(n)
    fake_t = torch.zeros(n)

    def step():
        z = torch.randn(n, a.nz, 1, 1)
        # D step: real, then fake made under no-grad (as gan_step.c; the example detaches).
        D.zero_grad(set_to_none=True)
        with ac():
            out = D(x)
            loss_real = F.binary_cross_entropy_with_logits(out.float(), real_t)
        loss_real.backward()
        d_x = torch.sigmoid(out.detach()).mean().item()
        with torch.no_grad(), ac():
            fake = G(z)
        with ac():
            out = D(fake)
            loss_fake = F.binary_cross_entropy_with_logits(out.float(), fake_t)
        loss_fake.backward()
        d_g_z1 = torch.sigmoid(out.detach()).mean().item()
        loss_d = loss_real.item() + loss_fake.item()
        opt_d.step()
        # G step: through D, without D's parameter gradients.
        G.zero_grad(set_to_none=True)
        for p in D.parameters():
            p.requires_grad_(False)
        with ac():
            fake = G(z)
            out = D(fake)
            loss_g = F.binary_cross_entropy_with_logits(out.float(), real_t)
        loss_g.backward()
        for p in D.parameters():
            p.requires_grad_(True)
        d_g_z2 = torch.sigmoid(out.detach()).mean().item()
        opt_g.step()
        return loss_d, loss_g.item(), d_x, d_g_z1, d_g_z2

    time_steps(lambda i: step(), a.warmup, a.steps, n, a.autocast or "off", f"size={a.size} nc={a.nc}")


def time_steps(step, warmup, steps, batch, autocast, extra=""):
    """Runs step(i) for warmup + steps iterations and prints the machine-readable line
    (median and fastest of the timed steps, peak RSS) that bench/run_dcgan.sh reads."""
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step(i)
        t1 = time.perf_counter()
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"torch median_ms={statistics.median(times):.2f} min_ms={min(times):.2f} "
          f"rss_mib={rss_mib:.1f} threads={torch.get_num_threads()} batch={batch} "
          f"steps={steps} autocast={autocast} version={torch.__version__}"
          + (f" {extra}" if extra else ""), flush=True)


if __name__ == "__main__":
    main()
