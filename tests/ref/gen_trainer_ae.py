"""One step of the autoencoder trainer plugin in PyTorch, the reference for
tests/test_ref_trainer_ae.c: the nets of plugins/models/convae (state_dict names included)
at the size of configs/ae_mnist.yaml and configs/vae_fashion.yaml (1x28x28 images, latent
16, channels 32), and the step of plugins/trainers/autoencoder:

    AE:  loss = mse(D(E(x)), x)                      (mean over elements; D ends in Tanh)
    VAE: [mu, logvar] = E(x); z = mu + exp(logvar / 2) eps; logits = D(z)
         rec = BCE-with-logits(logits, x) summed over each image, averaged over the batch
         kl = -1/2 sum(1 + logvar - mu^2 - exp(logvar)) averaged over the batch
         loss = rec + beta * kl                      (beta 0.5, so that it matters)

then SGD with momentum (lr 0.01, momentum 0.9): after PyTorch's first step the momentum
buffer is the gradient itself, which is how the C side reads its gradients back.

eps is the trainer's normal() draw: N(0, 1) from the run's Philox 4x32-10 stream (core/src/
base/philox.h, Box-Muller as core/src/backend/cpu/rng.c) of seed SEED at block EPS_OFFSET,
reproduced here; the C side puts its stream at that block before the step and checks its
own draw against ours first.

The weights and inputs are f32 (as the C side loads them); the step is computed in f64 from
them. Written per variant ("ae_step", "vae_step"): "encoder.*", "decoder.*" (initial
weights), "x", "eps" (VAE), the scalars "loss", "loss_rec", "kl" (VAE), "grad.<role>.*",
"after.<role>.*", and "seed", "eps_offset"."""
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from reflib import save, seeded

C, H, W, LATENT, CH, BATCH = 1, 28, 28, 16, 32, 8
LR, MOMENTUM = 0.01, 0.9
SEED, EPS_OFFSET = 1, 1000  # the C config's seed; the Philox block eps starts at
BETA = 0.5


# --- the run's Philox 4x32-10 stream and its normal draw ------------------------------
M32 = 0xFFFFFFFF


def philox_block(seed, block):
    """The four words of block `block` of the stream of `seed` (ganfw_philox_block)."""
    c = [block & M32, (block >> 32) & M32, 0, 0]
    k0, k1 = seed & M32, (seed >> 32) & M32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & M32, (p0 >> 32) ^ c[3] ^ k1, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


def philox_normal(n, seed, offset):
    """n N(0, 1) f32 samples as the CPU's rng_normal op: block offset + i / 4, Box-Muller on the
    word pairs (w0, w1) and (w2, w3), u1 in (0, 1], u2 in [0, 1), all in f32."""
    words = np.array([philox_block(seed, offset + b) for b in range((n + 3) // 4)],
                     dtype=np.uint32)
    a, b = words[:, 0::2].reshape(-1), words[:, 1::2].reshape(-1)
    f32 = np.float32
    u1 = ((a >> 8) + 1).astype(f32) * f32(1.0 / 16777216.0)
    u2 = (b >> 8).astype(f32) * f32(1.0 / 16777216.0)
    r = np.sqrt(f32(-2.0) * np.log(u1))
    t = f32(6.2831853071795864769) * u2
    z = np.stack([r * np.cos(t), r * np.sin(t)], axis=1).reshape(-1)  # z0 z1 | z2 z3 per block
    return torch.from_numpy(z[:n].astype(f32))


# --- the nets of plugins/models/convae ---------------------------------------------------
class Encoder(nn.Module):
    def __init__(self, out):
        super().__init__()
        flat = 2 * CH * (H // 4) * (W // 4)
        self.net = nn.Sequential(
            nn.Conv2d(C, CH, 4, 2, 1), nn.ReLU(), nn.Conv2d(CH, 2 * CH, 4, 2, 1), nn.ReLU(),
            nn.Flatten(), nn.Linear(flat, out), nn.Unflatten(1, (out, 1, 1)))

    def forward(self, x):
        return self.net(x)


class Decoder(nn.Module):
    def __init__(self, output):
        super().__init__()
        flat = 2 * CH * (H // 4) * (W // 4)
        layers = [nn.Flatten(), nn.Linear(LATENT, flat), nn.ReLU(),
                  nn.Unflatten(1, (2 * CH, H // 4, W // 4)),
                  nn.ConvTranspose2d(2 * CH, CH, 4, 2, 1), nn.ReLU(),
                  nn.ConvTranspose2d(CH, C, 4, 2, 1)]
        if output == "tanh":
            layers.append(nn.Tanh())
        self.net = nn.Sequential(*layers)

    def forward(self, z):
        return self.net(z)


def state(prefix, net):
    return {f"{prefix}.{k}": v.detach().clone() for k, v in net.state_dict().items()}


def write_step(path, vae, g):
    E, D = Encoder(2 * LATENT if vae else LATENT), Decoder("none" if vae else "tanh")
    if vae:
        with torch.no_grad():
            # a code away from the prior (PyTorch's default init gives mu, logvar ~ 0), so that
            # the KL term, and beta, weigh in the loss and the encoder's gradients
            bias = E.net[5].bias
            bias[:LATENT] = torch.randn(LATENT, generator=g) * 1.5
            bias[LATENT:] = torch.randn(LATENT, generator=g) * 0.5
    x = torch.rand(BATCH, C, H, W, generator=g)
    if not vae:
        x = x * 2 - 1  # the AE's data is in [-1, 1] (Tanh output); the VAE's in [0, 1]
    tensors = {**state("encoder", E), **state("decoder", D), "x": x,
               "seed": torch.tensor([SEED], dtype=torch.int64),
               "eps_offset": torch.tensor([EPS_OFFSET], dtype=torch.int64)}
    E.double(), D.double()
    xd = x.double()
    h = E(xd)
    if vae:
        eps = philox_normal(BATCH * LATENT, SEED, EPS_OFFSET).reshape(BATCH, LATENT)
        tensors["eps"] = eps
        hf = h.flatten(1)
        mu, logvar = hf[:, :LATENT], hf[:, LATENT:]
        z = mu + torch.exp(0.5 * logvar) * eps.double()
        logits = D(z.view(BATCH, LATENT, 1, 1))
        rec = F.binary_cross_entropy_with_logits(logits, xd, reduction="sum") / BATCH
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / BATCH
        loss = rec + BETA * kl
        tensors["kl"] = kl.detach().reshape(1)
    else:
        rec = F.mse_loss(D(h), xd)
        loss = rec
    loss.backward()
    tensors["loss"] = loss.detach().reshape(1)
    tensors["loss_rec"] = rec.detach().reshape(1)
    for role, net in (("encoder", E), ("decoder", D)):
        tensors.update({f"grad.{role}.{k}": p.grad.detach().clone()
                        for k, p in net.named_parameters()})
    opt = torch.optim.SGD(list(E.parameters()) + list(D.parameters()), lr=LR, momentum=MOMENTUM)
    opt.step()
    tensors.update(state("after.encoder", E))
    tensors.update(state("after.decoder", D))
    save(path, tensors)


def generate(out_dir):
    g = seeded(23)
    write_step(os.path.join(out_dir, "trainer_ae_step.safetensors"), False, g)
    write_step(os.path.join(out_dir, "trainer_vae_step.safetensors"), True, g)
