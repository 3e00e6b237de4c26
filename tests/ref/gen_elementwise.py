"""Reference file for tests/test_ref_elementwise.c: PyTorch's foreach/point-wise ops (lerp at
w = 0.1 and 0.9, addcdiv, addcmul, add with alpha, mul, sqrt, maximum with NaNs, sum and norm in f64)
on random vectors, and the bit patterns of .half()/.bfloat16() on random and edge f32 values
and of .float() on every f16/bf16 pattern. Bit patterns travel as I32 tensors."""
import os

import torch

import reflib

N = 1003  # not a multiple of 8 or 16: exercises the vector tails on both sides


def _bits32(t):
    return t.contiguous().view(torch.int32).clone()


def _bits16(t):
    return t.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def _foreach_ops(g):
    y = torch.randn(N, generator=g)
    x = torch.randn(N, generator=g) * 2
    a = torch.randn(N, generator=g)
    b = torch.rand(N, generator=g) * 3 + 0.1
    b[::3] *= -1
    out = {"y": y, "x": x, "a": a, "b": b}
    for w, name in ((0.1, "lerp_0.1"), (0.9, "lerp_0.9")):
        out[name] = y.clone().lerp_(x, w)
    ys = [y.clone()]
    torch._foreach_addcdiv_(ys, [a], [b], value=-0.37)
    out["addcdiv"] = ys[0]
    ys = [y.clone()]
    torch._foreach_addcmul_(ys, [a], [b], value=0.713)
    out["addcmul"] = ys[0]
    ys = [y.clone()]
    torch._foreach_add_(ys, [x], alpha=-0.37)
    out["axpy"] = ys[0]
    ys = [y.clone()]
    torch._foreach_mul_(ys, [x])
    out["mul"] = ys[0]
    ys = [y.clone()]
    torch._foreach_mul_(ys, 0.3)
    out["scale"] = ys[0]
    ys = [y.clone()]
    torch._foreach_add_(ys, 1.7)
    out["add_scalar"] = ys[0]
    out["sqrt"] = torch._foreach_sqrt([a.abs() * 10])[0]
    ym, xm = y.clone(), x.clone()
    ym[::7] = float("nan")
    xm[3::11] = float("nan")
    xm[5::13] = float("inf")
    out["max_y"], out["max_x"] = ym, xm
    out["maximum"] = torch._foreach_maximum([ym], [xm])[0]
    out["sum"] = y.double().sum().reshape(1)
    out["norm"] = y.double().norm().reshape(1)
    return out


def _cast_inputs(g):
    # Wide exponent range, both signs.
    wide = torch.randn(4000, generator=g) * torch.exp2(torch.randint(-30, 20, (4000,),
                                                                      generator=g).float())
    # The f16 range and just outside it, where the roundings happen.
    near = (torch.rand(4000, generator=g) * 2 - 1) * 70000
    tiny = (torch.rand(2000, generator=g) * 2 - 1) * 2.0 ** -13
    edges = torch.tensor([0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, -65520.0, 2.0 ** -24,
                          2.0 ** -25, 3 * 2.0 ** -25, 1023 * 2.0 ** -24, 2.0 ** -14,
                          2047 * 2.0 ** -25, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1e-45, 3.4e38,
                          3.3961e38, -3.3961e38, float("inf"), float("-inf"), 1 + 2.0 ** -8,
                          1 + 3 * 2.0 ** -8], dtype=torch.float32)
    specials = torch.tensor([0x7FC00000, 0x7F800001, 0x7FA00000, 0x7F7F8000, 0x7F7F7FFF,
                             0x00008000, 0x00018000, 0x007FFFFF, 0x00000001, 0x3F808000,
                             0x3F818000], dtype=torch.int64).to(torch.int32).view(torch.float32)
    neg = torch.tensor([-0x00400000, -0x00000001], dtype=torch.int32).view(torch.float32)
    return torch.cat([wide, near, tiny, edges, specials, neg])


def generate(out_dir):
    g = reflib.seeded(7)
    tensors = _foreach_ops(g)
    x = _cast_inputs(g)
    tensors["cast_x_bits"] = _bits32(x)
    tensors["cast_f16_bits"] = _bits16(x.half())
    tensors["cast_bf16_bits"] = _bits16(x.bfloat16())
    every = torch.arange(65536, dtype=torch.int32).to(torch.int16)
    tensors["f16_all_to_f32_bits"] = _bits32(every.view(torch.float16).float())
    tensors["bf16_all_to_f32_bits"] = _bits32(every.view(torch.bfloat16).float())
    reflib.save(os.path.join(out_dir, "elementwise.safetensors"), tensors)
