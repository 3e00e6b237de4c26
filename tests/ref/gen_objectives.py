"""Reference file for tests/test_objectives.c: the GAN objectives of plugins/objective/
losses as PyTorch formulas (loss and autograd gradient with respect to D's outputs, in f64
from f32 inputs), torch.nn.utils.clip_grad_norm_ over a list of gradients, and the
generator EMA (a copy up to `start`, then torch.lerp(ema, param, 1 - decay)).

Terms: d_real, d_fake, g. Objectives:
  bce     F.binary_cross_entropy_with_logits against 1 (or 1 - label_smoothing), 0, 1
  bce_ls  the same with label_smoothing 0.1
  hinge   relu(1 - y).mean(), relu(1 + y).mean(), -y.mean()
  lsgan   0.5 ((y - 1)^2).mean(), 0.5 (y^2).mean(), 0.5 ((y - 1)^2).mean()
  lsgan2  the same with a = -1, b = 1, c = 0
  wgan    -y.mean(), y.mean(), -y.mean()
"""
import os

import torch
import torch.nn.functional as F

import reflib


def _bce(t_real):
    return {
        "d_real": lambda y: F.binary_cross_entropy_with_logits(y, torch.full_like(y, t_real)),
        "d_fake": lambda y: F.binary_cross_entropy_with_logits(y, torch.zeros_like(y)),
        "g": lambda y: F.binary_cross_entropy_with_logits(y, torch.ones_like(y)),
    }


def _lsgan(a, b, c):
    return {
        "d_real": lambda y: 0.5 * ((y - b) ** 2).mean(),
        "d_fake": lambda y: 0.5 * ((y - a) ** 2).mean(),
        "g": lambda y: 0.5 * ((y - c) ** 2).mean(),
    }


OBJECTIVES = {
    "bce": _bce(1.0),
    "bce_ls": _bce(0.9),
    "hinge": {
        "d_real": lambda y: F.relu(1.0 - y).mean(),
        "d_fake": lambda y: F.relu(1.0 + y).mean(),
        "g": lambda y: -y.mean(),
    },
    "lsgan": _lsgan(0.0, 1.0, 1.0),
    "lsgan2": _lsgan(-1.0, 1.0, 0.0),
    "wgan": {
        "d_real": lambda y: -y.mean(),
        "d_fake": lambda y: y.mean(),
        "g": lambda y: -y.mean(),
    },
}


def generate(out_dir):
    g = reflib.seeded(13)
    y = (torch.randn(37, generator=g) * 3).float()
    y[0], y[1], y[2], y[3] = 1.0, -1.0, 40.0, -40.0  # hinge kinks, saturated logits
    out = {"y": y}
    for name, terms in OBJECTIVES.items():
        for term, f in terms.items():
            yd = y.double().clone().requires_grad_(True)
            loss = f(yd)
            loss.backward()
            out["%s_%s_loss" % (name, term)] = loss.detach().reshape(1)
            out["%s_%s_grad" % (name, term)] = yd.grad
    # clip_grad_norm_: three gradients, a max_norm below their norm and one above it
    grads = [torch.randn(s, generator=g) for s in ((4, 3, 3, 3), (4,), (10, 7))]
    for i, t in enumerate(grads):
        out["clip_grad%d" % i] = t
    for tag, max_norm in (("low", 1.5), ("high", 1e3)):
        ps = [torch.zeros_like(t, requires_grad=True) for t in grads]
        for p, t in zip(ps, grads):
            p.grad = t.clone()
        norm = torch.nn.utils.clip_grad_norm_(ps, max_norm)
        out["clip_%s_max" % tag] = torch.tensor([max_norm], dtype=torch.float64)
        out["clip_%s_norm" % tag] = norm.double().reshape(1)
        for i, p in enumerate(ps):
            out["clip_%s_out%d" % (tag, i)] = p.grad
    # the generator EMA of train.ema: {decay: 0.9, start: 2} over five steps' parameters
    ema = None
    for t in range(1, 6):
        p = torch.randn(3, 5, generator=g)
        out["ema_param%d" % t] = p
        ema = p.clone() if t <= 2 else torch.lerp(ema, p, 1 - 0.9)
        out["ema_after%d" % t] = ema.clone()
    reflib.save(os.path.join(out_dir, "objectives.safetensors"), out)
