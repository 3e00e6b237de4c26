"""A hundred DC-GAN training steps in PyTorch, the reference for tests/test_ref_gan_run.c: the
CI-sized form of bench/run_parity.sh's long-horizon check.

A small DC-GAN at 32x32 (nz 16, ngf = ndf = 32, one channel; the 64- and 128-channel layers
take ganfw's Winograd convolutions at this batch of 16) trains from the same initial weights
on the same real batches (smooth random blobs on a -1 background, like digits) and noise as
the C side, with ganfw's step (tests/ref/gen_gan_step.py's, without label smoothing).

Written to gan_run.safetensors: the initial state_dicts ("generator.*", "discriminator.*"),
every step's "x.NNN" and "z.NNN", and the trajectories of three PyTorch runs: "traj.f64",
"traj.f32" (oneDNN's convolutions) and "traj.f32_thnn" (PyTorch's own im2col ones), each
[STEPS, 2] of (loss_d, loss_g), in f64. The two f32 runs differ from f64 only by their
roundings: how far they drift is the yardstick ganfw is held to."""
import os

import torch
import torch.nn.functional as F

from dcgan_ref import discriminator, generator, weights_init
from reflib import save, seeded

NZ, NGF, NDF, NC, BATCH, STEPS = 16, 32, 32, 1, 16, 100


def blobs(g):
    """[BATCH, 1, 32, 32] in [-1, 1]: two to four Gaussian strokes on a -1 background."""
    yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    out = torch.full((BATCH, 1, 32, 32), -1.0)
    for n in range(BATCH):
        ink = torch.zeros(32, 32)
        for _ in range(int(torch.randint(2, 5, (1,), generator=g))):
            cy, cx = (torch.rand(2, generator=g) * 16 + 8).tolist()
            sy, sx = (torch.rand(2, generator=g) * 4 + 1.5).tolist()
            ink += torch.exp(-((yy - cy) ** 2 / (2 * sy * sy) + (xx - cx) ** 2 / (2 * sx * sx)))
        out[n, 0] = ink.clamp(0, 1) * 2 - 1
    return out


def run(init, inputs, dtype, mkldnn):
    """STEPS of ganfw's step from `init`: the (loss_d, loss_g) trajectory."""
    G, D = generator(NZ, NGF, NC).to(dtype), discriminator(NC, NDF).to(dtype)
    for role, net in (("generator", G), ("discriminator", D)):
        net.load_state_dict({k[len(role) + 1:]: v.to(dtype) if v.is_floating_point() else v
                             for k, v in init.items() if k.startswith(role + ".")})
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    traj = torch.zeros(STEPS, 2, dtype=torch.float64)
    with torch.backends.mkldnn.flags(enabled=mkldnn):
        for step in range(STEPS):
            real, z = inputs[f"x.{step + 1:03d}"].to(dtype), inputs[f"z.{step + 1:03d}"].to(dtype)
            D.zero_grad()
            out = D(real).view(-1)
            err_real = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
            err_real.backward()
            with torch.no_grad():
                fake = G(z)
            out = D(fake).view(-1)
            err_fake = F.binary_cross_entropy_with_logits(out, torch.zeros_like(out))
            err_fake.backward()
            opt_d.step()
            G.zero_grad()
            out = D(G(z)).view(-1)
            err_g = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
            err_g.backward()
            opt_g.step()
            traj[step, 0], traj[step, 1] = float(err_real + err_fake), float(err_g)
    return traj


def generate(out_dir):
    g = seeded(33)
    G, D = generator(NZ, NGF, NC), discriminator(NC, NDF)
    G.apply(lambda m: weights_init(m, g))
    D.apply(lambda m: weights_init(m, g))
    tensors = {f"generator.{k}": v.clone() for k, v in G.state_dict().items()}
    tensors.update({f"discriminator.{k}": v.clone() for k, v in D.state_dict().items()})
    inputs = {}
    for step in range(1, STEPS + 1):
        inputs[f"x.{step:03d}"] = blobs(g)
        inputs[f"z.{step:03d}"] = torch.randn(BATCH, NZ, 1, 1, generator=g)
    init = dict(tensors)
    tensors.update(inputs)
    for name, dtype, mkldnn in (("f64", torch.float64, True), ("f32", torch.float32, True),
                                ("f32_thnn", torch.float32, False)):
        tensors[f"traj.{name}"] = run(init, inputs, dtype, mkldnn)
    save(os.path.join(out_dir, "gan_run.safetensors"), tensors,
         {"steps": str(STEPS), "batch": str(BATCH), "nz": str(NZ), "ngf": str(NGF), "ndf": str(NDF)})
