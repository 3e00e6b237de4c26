"""Reference file for tests/test_host_ops.c: PyTorch 1.13's element-wise ops (abs, sign,
exp, log, sqrt, rsqrt, clamp, mul/add by a scalar, pow with several exponents), binary ops
with broadcasting (add, sub, mul, div, maximum, minimum, NaN included), sums and means over
dims (keepdim and not, computed in f64 so the C side's double sums can be held to f32
rounding), and the per-channel scale and shift x * s.view(1,C,1,1) + b.view(1,C,1,1) (in
f64: the C side rounds it once, as a fused multiply-add)."""
import os

import torch

import reflib

POWERS = (2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.7, -2.3)


def _unary(g):
    x = torch.randn(2, 3, 5, 7, generator=g) * 3
    x.view(-1)[::17] = 0.0
    pos = torch.rand(2, 3, 5, 7, generator=g) * 4 + 0.05
    out = {"x": x, "pos": pos}
    out["abs"] = x.abs()
    out["sign"] = x.sign()
    out["exp"] = x.exp()
    out["log"] = pos.log()
    out["sqrt"] = pos.sqrt()
    out["rsqrt"] = pos.rsqrt()
    out["clamp"] = x.clamp(-0.7, 1.3)
    out["clamp_lo"] = x.clamp(min=0.25)
    out["mul_scalar"] = x * 0.37
    out["add_scalar"] = x + 1.7
    for i, p in enumerate(POWERS):
        out["pow%d" % i] = pos.pow(p)
    return out


def _binary(g):
    out = {}
    cases = {
        "same": ((2, 3, 4, 5), (2, 3, 4, 5)),
        "chan": ((2, 3, 4, 5), (1, 3, 1, 1)),
        "pix": ((2, 3, 4, 5), (2, 1, 4, 5)),
        "rank": ((4, 1, 3), (5, 1)),
        "row": ((6, 7), (7,)),
        "scalar": ((3, 4), ()),
    }
    for name, (sa, sb) in cases.items():
        a = torch.randn(sa, generator=g)
        b = torch.rand(sb, generator=g) * 2 + 0.25
        if b.dim() > 0:
            b.view(-1)[::2] *= -1
        else:
            b = -b
        out[name + "_a"], out[name + "_b"] = a, b
        out[name + "_add"] = a + b
        out[name + "_sub"] = a - b
        out[name + "_mul"] = a * b
        out[name + "_div"] = a / b
    a = torch.randn(3, 10, generator=g)
    b = torch.randn(3, 10, generator=g)
    a[0, ::3] = float("nan")
    b[1, 1::4] = float("nan")
    b[2, ::5] = float("inf")
    out["nan_a"], out["nan_b"] = a, b
    out["nan_maximum"] = torch.maximum(a, b)
    out["nan_minimum"] = torch.minimum(a, b)
    return out


def _reduce(g):
    x = torch.randn(3, 4, 5, 6, generator=g)
    x2 = torch.randn(7, 9, generator=g)
    d, d2 = x.double(), x2.double()
    return {
        "x": x,
        "x2": x2,
        "sum_c": d.sum(1, keepdim=True),
        "mean_c": d.mean(1, keepdim=True),
        "sum_nhw": d.sum((0, 2, 3), keepdim=True),
        "mean_nhw": d.mean((0, 2, 3)),
        "sum_last": d2.sum(-1),
        "mean_batch": d2.mean(0, keepdim=True),
        "sum_all": d.sum().reshape(1),
        "mean_all": d2.mean().reshape(1),
    }


def _affine(g):
    x = torch.randn(2, 5, 3, 4, generator=g)
    s = torch.randn(5, generator=g)
    b = torch.randn(5, generator=g)
    x2 = torch.randn(6, 5, generator=g)
    v = (1, 5, 1, 1)
    return {
        "x": x, "s": s, "b": b, "x2": x2,
        "both": x.double() * s.double().view(v) + b.double().view(v),
        "scale": x * s.view(v),
        "shift": x + b.view(v),
        "rows": x2.double() * s.double() + b.double(),
    }


def _cat(g):
    a = torch.randn(2, 3, 4, 5, generator=g)
    b = torch.randn(2, 2, 4, 5, generator=g)
    c = torch.randn(2, 3, 4, 1, generator=g)
    d = torch.randn(1, 3, 4, 5, generator=g)
    ab = torch.cat([a, b], 1)
    return {
        "a": a, "b": b, "c": c, "d": d,
        "ab": ab,
        "ada": torch.cat([a, d, a], 0),
        "aca": torch.cat([a, c, a], -1),
        "narrow1": ab.narrow(1, 3, 2),
        "narrow_last": a.narrow(-1, 1, 3),
    }


def generate(out_dir):
    g = reflib.seeded(12)
    tensors = {}
    for prefix, part in (("u_", _unary(g)), ("b_", _binary(g)), ("r_", _reduce(g)),
                         ("a_", _affine(g)), ("c_", _cat(g))):
        for k, t in part.items():
            tensors[prefix + k] = t.contiguous()
    reflib.save(os.path.join(out_dir, "host_ops.safetensors"), tensors)
