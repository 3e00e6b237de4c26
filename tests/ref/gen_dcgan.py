"""PyTorch references for tests/test_ref_dcgan.c: the DC-GAN of pytorch/examples dcgan/main.py
(without D's final Sigmoid), narrowed so that the file stays small, at 32 px (one stage fewer,
as plugins/models/dcgan builds it) and 64 px. For each case, with weights from the example's
weights_init, one training-mode step: img = G(z), logit = D(img), L = sum(logit * w),
backward. Writes dcgan.safetensors with, per case c:

    c.G.<state_dict key>, c.D.<key>     the initial parameters (weights and biases)
    c.z, c.w                            the latent batch [4,nz,1,1] and the loss weights
    c.img, c.logit, c.dimg              G(z), D(G(z)) and dL/dimg
    c.grad.G.<key>, c.grad.D.<key>      dL/dparam
    c.after.G.<buffer key>, ...         BatchNorm running_mean/var after the forward
    c.eval_img, c.eval_logit            the same z through both nets in eval mode
"""
import os

import torch
import torch.nn as nn

import reflib

# name -> (image_size, nc, nz, ngf, ndf); mirrored in tests/test_ref_dcgan.c.
CASES = {
    "s32": (32, 1, 16, 8, 8),
    "s64": (64, 3, 12, 4, 6),
}
BATCH = 4


def generator(size, nc, nz, ngf):
    stages = 3 if size == 64 else 2
    ch = ngf * 2 ** stages
    layers = [nn.ConvTranspose2d(nz, ch, 4, 1, 0, bias=False), nn.BatchNorm2d(ch), nn.ReLU(True)]
    for _ in range(stages):
        layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch // 2),
                   nn.ReLU(True)]
        ch //= 2
    layers += [nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()]
    net = nn.Module()
    net.main = nn.Sequential(*layers)
    net.forward = net.main.forward
    return net


def discriminator(size, nc, ndf):
    stages = 3 if size == 64 else 2
    ch = ndf
    layers = [nn.Conv2d(nc, ch, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
    for _ in range(stages):
        layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch * 2),
                   nn.LeakyReLU(0.2, inplace=True)]
        ch *= 2
    layers += [nn.Conv2d(ch, 1, 4, 1, 0, bias=False)]
    net = nn.Module()
    net.main = nn.Sequential(*layers)
    net.forward = net.main.forward
    return net


def weights_init(m):
    """The example's weights_init."""
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def generate(out_dir):
    out = {}
    for k, (case, (size, nc, nz, ngf, ndf)) in enumerate(CASES.items()):
        reflib.seeded(100 + k)
        G, D = generator(size, nc, nz, ngf), discriminator(size, nc, ndf)
        G.apply(weights_init)
        D.apply(weights_init)
        for tag, net in (("G", G), ("D", D)):
            for key, p in net.named_parameters():
                out[f"{case}.{tag}.{key}"] = p.detach().clone()
        z = torch.randn(BATCH, nz, 1, 1)
        w = torch.tensor([1.0, -0.5, 0.25, 2.0]).view(BATCH, 1, 1, 1)
        img = G(z)
        img.retain_grad()
        logit = D(img)
        (logit * w).sum().backward()
        out.update({f"{case}.z": z, f"{case}.w": w, f"{case}.img": img.detach().clone(),
                    f"{case}.logit": logit.detach().clone(), f"{case}.dimg": img.grad.clone()})
        for tag, net in (("G", G), ("D", D)):
            for key, p in net.named_parameters():
                out[f"{case}.grad.{tag}.{key}"] = p.grad.clone()
            for key, b in net.named_buffers():
                if "running" in key:
                    out[f"{case}.after.{tag}.{key}"] = b.clone()
        G.eval()
        D.eval()
        with torch.no_grad():
            eval_img = G(z)
            out[f"{case}.eval_img"] = eval_img.clone()
            out[f"{case}.eval_logit"] = D(eval_img).clone()
    reflib.save(os.path.join(out_dir, "dcgan.safetensors"), out)
