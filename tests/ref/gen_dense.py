"""Reference file for tests/test_ref_dense.c: F.conv2d, F.conv_transpose2d and F.linear, the
forward and every gradient by autograd, on random inputs. Cases include each layer of the
DC-GAN 32x32 generator and discriminator (one per op at batch 64), odd sizes, N=1,
non-square kernels/strides/padding, output padding and bias None. Inputs are f32; the
reference is computed in float64 from those same f32 values, so that the C side's error
is its own. Each case stores <name>.shape (int64) with the sizes the C side runs:
  conv:   N C H W K R S stride_h stride_w pad_h pad_w has_bias
  convt:  N C H W K R S stride_h stride_w pad_h pad_w out_pad_h out_pad_w has_bias
  linear: N IN OUT has_bias
and <name>.{x,w,b,dy,y,dx,dw,db} (b and db only with a bias)."""
import math
import os

import torch
import torch.nn.functional as F

import reflib

# name: N, C, H, W, K, (R, S), (stride), (pad), bias
CONV = {
    "conv_d1": (8, 1, 32, 32, 64, (4, 4), (2, 2), (1, 1), False),
    "conv_d2": (64, 64, 16, 16, 128, (4, 4), (2, 2), (1, 1), False),
    "conv_d3": (4, 128, 8, 8, 256, (4, 4), (2, 2), (1, 1), False),
    "conv_d4": (16, 256, 4, 4, 1, (4, 4), (1, 1), (0, 0), False),
    "conv_odd": (3, 3, 7, 9, 5, (3, 3), (1, 1), (1, 1), True),
    "conv_rect": (2, 4, 11, 10, 6, (3, 5), (2, 3), (1, 2), True),
    "conv_n1": (1, 2, 9, 7, 3, (3, 2), (2, 1), (0, 1), True),
}
# name: N, C, H, W, K, (R, S), (stride), (pad), (out_pad), bias
CONVT = {
    "convt_g1": (16, 100, 1, 1, 256, (4, 4), (1, 1), (0, 0), (0, 0), False),
    "convt_g2": (4, 256, 4, 4, 128, (4, 4), (2, 2), (1, 1), (0, 0), False),
    "convt_g3": (64, 128, 8, 8, 64, (4, 4), (2, 2), (1, 1), (0, 0), False),
    "convt_g4": (8, 64, 16, 16, 1, (4, 4), (2, 2), (1, 1), (0, 0), False),
    "convt_odd": (3, 3, 5, 6, 4, (3, 3), (2, 2), (1, 1), (1, 1), True),
    "convt_n1": (1, 5, 4, 3, 2, (2, 3), (3, 2), (0, 1), (2, 1), True),
}
# name: N, IN, OUT, bias
LINEAR = {
    "linear_a": (64, 100, 256, True),
    "linear_b": (1, 7, 3, False),
    "linear_c": (33, 257, 10, True),
}


def _uniform(shape, bound, g):
    return (torch.rand(shape, generator=g) * 2 - 1) * bound


def _grads(fn, x, w, b, g):
    """y = fn(x, w, b) and (dx, dw, db) of sum(y * dy) in float64, from f32 inputs."""
    xd = x.double().requires_grad_(True)
    wd = w.double().requires_grad_(True)
    bd = b.double().requires_grad_(True) if b is not None else None
    y = fn(xd, wd, bd)
    dy = torch.randn(y.shape, generator=g)
    inputs = (xd, wd) + ((bd,) if bd is not None else ())
    grads = torch.autograd.grad(y, inputs, dy.double())
    out = {"x": x, "w": w, "dy": dy, "y": y.detach().float(), "dx": grads[0].float(),
           "dw": grads[1].float()}
    if b is not None:
        out["b"] = b
        out["db"] = grads[2].float()
    return out


def generate(out_dir):
    g = reflib.seeded(2024)
    tensors = {}
    for name, (n, c, h, w_, k, ks, st, pd, bias) in CONV.items():
        bound = 1.0 / math.sqrt(c * ks[0] * ks[1])
        x = torch.randn(n, c, h, w_, generator=g)
        w = _uniform((k, c) + ks, bound, g)
        b = _uniform((k,), bound, g) if bias else None
        t = _grads(lambda xx, ww, bb: F.conv2d(xx, ww, bb, st, pd), x, w, b, g)
        t["shape"] = torch.tensor([n, c, h, w_, k, ks[0], ks[1], st[0], st[1], pd[0], pd[1],
                                   int(bias)], dtype=torch.int64)
        tensors.update({f"{name}.{key}": v for key, v in t.items()})
    for name, (n, c, h, w_, k, ks, st, pd, op, bias) in CONVT.items():
        bound = 1.0 / math.sqrt(k * ks[0] * ks[1])
        x = torch.randn(n, c, h, w_, generator=g)
        w = _uniform((c, k) + ks, bound, g)
        b = _uniform((k,), bound, g) if bias else None
        t = _grads(lambda xx, ww, bb: F.conv_transpose2d(xx, ww, bb, st, pd, op), x, w, b, g)
        t["shape"] = torch.tensor([n, c, h, w_, k, ks[0], ks[1], st[0], st[1], pd[0], pd[1],
                                   op[0], op[1], int(bias)], dtype=torch.int64)
        tensors.update({f"{name}.{key}": v for key, v in t.items()})
    for name, (n, fin, fout, bias) in LINEAR.items():
        bound = 1.0 / math.sqrt(fin)
        x = torch.randn(n, fin, generator=g)
        w = _uniform((fout, fin), bound, g)
        b = _uniform((fout,), bound, g) if bias else None
        t = _grads(F.linear, x, w, b, g)
        t["shape"] = torch.tensor([n, fin, fout, int(bias)], dtype=torch.int64)
        tensors.update({f"{name}.{key}": v for key, v in t.items()})
    reflib.save(os.path.join(out_dir, "dense.safetensors"), tensors)
