"""One DC-GAN training step in PyTorch, the reference for tests/test_ref_gan_step.c.

The model is PyTorch's DC-GAN example at 32x32 with one channel (the discriminator without
its final Sigmoid: it outputs logits) and the step is ganfw's: D on a real batch and on
G(z) made under no_grad, BCE-with-logits, D's Adam step; then G(z) again with grad, D on
it, the non-saturating G loss, G's Adam step. Written: the initial state_dicts
("generator.*", "discriminator.*"), the real batch, the noise, the losses and the
state_dicts after the step ("after.generator.*", "after.discriminator.*"), and the
gradients each optimizer stepped with ("grad.generator.*", "grad.discriminator.*"); in
gan_step.safetensors with one Adam per net, in gan_step_groups.safetensors with parameter
groups (no weight decay on biases and BatchNorm weights, another lr for G's first layer)."""
import os

import torch
import torch.nn.functional as F

from dcgan_ref import discriminator, generator, weights_init
from reflib import save, seeded

NZ, NGF, NDF, NC, BATCH = 100, 64, 64, 1, 16
SMOOTH = 0.1  # one-sided label smoothing: D's real target is 0.9


def state(prefix, net):
    return {f"{prefix}.{k}": v.detach().clone() for k, v in net.state_dict().items()}


WEIGHT_DECAY, LR_MAIN0 = 0.01, 1e-4  # the step with parameter groups


def param_groups(net, is_generator):
    """optim.param_groups of tests/test_ref_gan_step.c as torch.optim param groups:
    [{select: bias_and_norm, weight_decay: 0}, {prefix: main.0, net: generator, lr: 1e-4}],
    the rest in the default group (weight_decay 0.01), each parameter in the first match."""
    no_decay, main0, rest = [], [], []
    for name, p in net.named_parameters():
        if p.ndim <= 1:
            no_decay.append(p)
        elif is_generator and name.startswith("main.0."):
            main0.append(p)
        else:
            rest.append(p)
    groups = [{"params": rest}, {"params": no_decay, "weight_decay": 0.0}]
    if main0:
        groups.append({"params": main0, "lr": LR_MAIN0})
    return groups


def generate(out_dir):
    write_step(os.path.join(out_dir, "gan_step.safetensors"), False)
    write_step(os.path.join(out_dir, "gan_step_groups.safetensors"), True)


def write_step(path, groups):
    g = seeded(11)
    G, D = generator(NZ, NGF, NC), discriminator(NC, NDF)
    G.apply(lambda m: weights_init(m, g))
    D.apply(lambda m: weights_init(m, g))
    real = torch.rand(BATCH, NC, 32, 32, generator=g) * 2 - 1
    z = torch.randn(BATCH, NZ, 1, 1, generator=g)
    tensors = {**state("generator", G), **state("discriminator", D), "real": real, "z": z}
    if groups:
        opt_d = torch.optim.Adam(param_groups(D, False), lr=2e-4, betas=(0.5, 0.999),
                                 weight_decay=WEIGHT_DECAY)
        opt_g = torch.optim.Adam(param_groups(G, True), lr=2e-4, betas=(0.5, 0.999),
                                 weight_decay=WEIGHT_DECAY)
    else:
        opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
        opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))

    D.zero_grad()
    out = D(real).view(-1)
    err_real = F.binary_cross_entropy_with_logits(out, torch.full_like(out, 1 - SMOOTH))
    err_real.backward()
    d_x = torch.sigmoid(out).mean()
    with torch.no_grad():
        fake = G(z)
    out = D(fake).view(-1)
    err_fake = F.binary_cross_entropy_with_logits(out, torch.zeros_like(out))
    err_fake.backward()
    d_g_z1 = torch.sigmoid(out).mean()
    grads = {f"grad.discriminator.{k}": p.grad.detach().clone() for k, p in D.named_parameters()}
    opt_d.step()

    G.zero_grad()
    fake = G(z)
    out = D(fake).view(-1)
    err_g = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
    err_g.backward()
    d_g_z2 = torch.sigmoid(out).mean()
    grads.update({f"grad.generator.{k}": p.grad.detach().clone() for k, p in G.named_parameters()})
    opt_g.step()

    scalars = {"loss_d": err_real + err_fake, "loss_g": err_g, "d_x": d_x, "d_g_z1": d_g_z1,
               "d_g_z2": d_g_z2}
    tensors.update({k: v.detach().reshape(1) for k, v in scalars.items()})
    tensors.update(grads)
    tensors.update(state("after.generator", G))
    tensors.update(state("after.discriminator", D))
    save(path, tensors)
