"""Reference file for tests/test_ref_pixel_shuffle.c: PyTorch's nn.PixelShuffle(r) and
nn.PixelUnshuffle(r), forward and backward through autograd from fixed inputs and an upstream
gradient, in f32 and again on the same values rounded to f16 and to bf16 (the ops move
elements, so each dtype's result is exact and ganfw must match it bit for bit).

Keys per case NAME: NAME_x, NAME_dy, NAME_y, NAME_dx (f32) and NAME_y_f16, NAME_dx_f16,
NAME_y_bf16, NAME_dx_bf16 (stored in their own dtype)."""
import os

import torch
import torch.nn as nn

import reflib

# name -> (input shape, factor, unshuffle)
CASES = {
    "ps_r2": ((2, 8, 3, 5), 2, False),
    "ps_r3": ((1, 18, 4, 3), 3, False),
    "ps_r1": ((2, 3, 2, 2), 1, False),
    "ps_big": ((2, 64, 16, 16), 2, False),
    "pu_r2": ((2, 3, 6, 4), 2, True),
    "pu_r3": ((1, 2, 9, 6), 3, True),
    "pu_big": ((2, 16, 32, 32), 2, True),
}


def _run(module, x, dy):
    xg = x.clone().requires_grad_(True)
    y = module(xg)
    y.backward(dy)
    return y.detach(), xg.grad


def generate(out_dir):
    g = reflib.seeded(20261236)
    out = {}
    for name, (shape, r, unshuffle) in CASES.items():
        module = nn.PixelUnshuffle(r) if unshuffle else nn.PixelShuffle(r)
        x = torch.randn(shape, generator=g)
        dy = torch.randn(module(x).shape, generator=g)
        y, dx = _run(module, x, dy)
        out.update({name + "_x": x, name + "_dy": dy, name + "_y": y, name + "_dx": dx})
        for dt, suffix in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
            y16, dx16 = _run(module, x.to(dt), dy.to(dt))
            out[name + "_y_" + suffix] = y16
            out[name + "_dx_" + suffix] = dx16
    reflib.save(os.path.join(out_dir, "pixel_shuffle.safetensors"), out)
