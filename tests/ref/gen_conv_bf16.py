"""Reference file for tests/test_ref_conv_bf16.c: PyTorch's own bf16 convolution on the CPU
(oneDNN, f32 accumulation) as autocast runs it: F.conv2d on bf16 inputs and weights, the
forward and dx, dw by autograd, with dy in bf16 too. The cases are a DC-GAN-sized layer
that ganfw runs on Winograd and a small odd one on im2col. Stored as f32 (every value is a
bf16 value): <name>.{x,w,dy,y,dx,dw} and <name>.shape as gen_dense.py's (N C H W K R S
stride_h stride_w pad_h pad_w has_bias); no bias (autocast would round it to bf16, ganfw
adds it in f32). No conv_transpose2d: PyTorch 1.13's bf16 conv_transpose2d on the CPU
computes a conv2d (a [3,6,5,5] input and [6,6,4,4] weight with stride 2 give [3,6,2,2],
not [3,6,10,10]), so it is no reference."""
import math
import os

import torch
import torch.nn.functional as F

import reflib

# name: N, C, H, W, K, (R, S), (stride), (pad)
CONV = {
    "conv_wino": (32, 64, 8, 8, 64, (4, 4), (2, 2), (1, 1)),
    "conv_small": (4, 3, 9, 9, 8, (3, 3), (1, 1), (1, 1)),
}
def _bf16(shape, scale, g):
    return (torch.randn(shape, generator=g) * scale).bfloat16()


def _run(fn, x, w, g):
    xb = x.clone().requires_grad_(True)
    wb = w.clone().requires_grad_(True)
    y = fn(xb, wb)
    dy = _bf16(y.shape, 1.0, g)
    dx, dw = torch.autograd.grad(y, (xb, wb), dy)
    return {"x": x.float(), "w": w.float(), "dy": dy.float(), "y": y.detach().float(),
            "dx": dx.float(), "dw": dw.float()}


def generate(out_dir):
    g = reflib.seeded(77)
    tensors = {}
    for name, (n, c, h, w_, k, ks, st, pd) in CONV.items():
        x = _bf16((n, c, h, w_), 1.0, g)
        w = _bf16((k, c) + ks, 1.0 / math.sqrt(c * ks[0] * ks[1]), g)
        t = _run(lambda xx, ww: F.conv2d(xx, ww, None, st, pd), x, w, g)
        t["shape"] = torch.tensor([n, c, h, w_, k, ks[0], ks[1], st[0], st[1], pd[0], pd[1], 0],
                                  dtype=torch.int64)
        tensors.update({f"{name}.{key}": v for key, v in t.items()})
    reflib.save(os.path.join(out_dir, "conv_bf16.safetensors"), tensors)
