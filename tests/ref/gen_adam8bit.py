"""References for tests/test_adam8bit.c, written in numpy from the published algorithm of
8-bit blockwise optimizers (Dettmers et al., "8-bit Optimizers via Block-wise Quantization",
2022, and bitsandbytes' create_dynamic_map / quantize_blockwise / Adam8bit), not from ganfw's
C code. Writes adam8bit.safetensors with

    map.signed, map.unsigned    the 256 values of the dynamic map (f32, ascending)
    rt{k}.x                     round-trip input k (sizes 1, 2047, 2048, 5000; zeros, an
                                all-zero block, values exactly midway between codes)
    rt{k}.q, rt{k}.absmax       its blockwise quantisation (signed map, blocks of 2048): the
                                code indices (I32) and the blocks' absolute maxima
    rt{k}.deq                   the dequantised values
    sweep_s.x, sweep_s.q        8192 values through the signed map (every code, midpoint and
    sweep_u.x, sweep_u.q        its f32 neighbours, uniform and tiny values) and their
                                indices; the same through the unsigned map
    big.init, small.init        a parameter above the 8-bit threshold (50 x 100) and one below
                                it (7 x 3), and their gradients big.grad{s}, small.grad{s}
    {case}.big.step{s}          the large parameter after Adam8bit step s (1..3)
    {case}.big.q1, .absmax1,    its state after step 3: exp_avg's codes and scales, and
    .q2, .absmax2               exp_avg_sq's
    {case}.lr                   the learning rate

for case in CASES (the C side uses the same settings). The update math follows PyTorch's Adam
op for op in f32 (with the fused multiply-adds of ganfw's foreach ops emulated in double);
the moments are dequantised before and quantised after each step, the parameter updated from
the f32 moments, as bitsandbytes' Adam8bit does.
"""
import os

import numpy as np
import torch

import reflib

f32 = np.float32
BLOCK = 2048
SIZES = [1, 2047, 2048, 5000]
STEPS = 3
# name -> (lr, beta1, beta2, eps, weight_decay); mirrored in tests/test_adam8bit.c.
CASES = {
    "default": (1e-3, 0.9, 0.999, 1e-8, 0.0),
    "gan_wd": (2e-4, 0.5, 0.999, 1e-8, 0.01),
}


def dynamic_map(signed, max_exponent_bits=7, total_bits=8):
    """create_dynamic_map: decade i covers [0.1, 1] * 10^(i - 6) with the midpoints of a
    linspace of 2^i + 1 points (2^(i+1) + 1 unsigned), mirrored when signed; then 0 and 1.
    Each value in double, rounded to f32 once."""
    data = []
    non_sign_bits = total_bits - 1
    additional = 2 ** (non_sign_bits - max_exponent_bits) - 1
    assert additional == 0
    for i in range(max_exponent_bits):
        points = 2 ** (i + non_sign_bits - max_exponent_bits) + 1 if signed else \
            2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1
        b = np.linspace(0.1, 1.0, points)
        means = (b[:-1] + b[1:]) / 2.0
        scale = 10.0 ** (-(max_exponent_bits - 1) + i)
        for m in means:
            data.append(scale * m)
            if signed:
                data.append(-scale * m)
    data += [0.0, 1.0]
    assert len(data) == 2 ** total_bits
    return np.sort(np.array(data, dtype=np.float64).astype(f32))


def search(code, x):
    """bitsandbytes' dQuantize (non-stochastic) on an array: 7 halving steps from index 127,
    then the nearer of the code it stands on and the last neighbour passed; exactly midway
    keeps the one it stands on."""
    x = x.astype(f32)
    at = np.full(x.shape, 127, dtype=np.int64)
    lo = np.zeros(x.shape, dtype=np.int64)
    hi = np.full(x.shape, 255, dtype=np.int64)
    lo_v = np.full(x.shape, -1.0, dtype=f32)
    hi_v = np.full(x.shape, 1.0, dtype=f32)
    v = code[at]
    step = 64
    while step > 0:
        up = x > v
        lo = np.where(up, at, lo)
        lo_v = np.where(up, v, lo_v)
        hi = np.where(up, hi, at)
        hi_v = np.where(up, hi_v, v)
        at = np.where(up, at + step, at - step)
        v = code[at]
        step //= 2
    hi_v = np.where(hi == 255, code[255], hi_v)
    lo_v = np.where(lo == 0, code[0], lo_v)
    up = x > v
    mid_hi = ((hi_v + v) * f32(0.5)).astype(f32)
    mid_lo = ((lo_v + v) * f32(0.5)).astype(f32)
    return np.where(up, np.where(x > mid_hi, hi, at), np.where(x < mid_lo, lo, at))


def quantize(x, code, block=BLOCK):
    x = x.astype(f32).ravel()
    n = x.size
    nb = (n + block - 1) // block
    q = np.zeros(n, dtype=np.int64)
    absmax = np.zeros(nb, dtype=f32)
    for b in range(nb):
        xb = x[b * block:(b + 1) * block]
        m = f32(np.max(np.abs(xb)))
        absmax[b] = m
        inv = f32(f32(1.0) / m) if m > 0 else f32(0.0)
        q[b * block:(b + 1) * block] = search(code, (xb * inv).astype(f32))
    return q, absmax


def dequantize(q, absmax, code, block=BLOCK):
    scale = np.repeat(absmax, block)[:q.size]
    return (code[q] * scale).astype(f32)


def fma(a, b, c):
    """fmaf(a, b, c) of f32 values: the product is exact in double, the sum rounds there, then
    to f32 (a second rounding only in rare ties)."""
    return (np.float64(a) * np.asarray(b, dtype=np.float64) +
            np.asarray(c, dtype=np.float64)).astype(f32)


def adam_update(p, g, m, v, step, lr, beta1, beta2, eps, wd):
    """PyTorch 1.13's single-tensor Adam in f32, op for op as the foreach ops run it."""
    if wd != 0.0:
        g = fma(f32(wd), p, g)  # grad.add(param, alpha=wd)
    bc1 = 1.0 - beta1 ** step
    bc2_sqrt = (1.0 - beta2 ** step) ** 0.5
    m = (m * f32(beta1)).astype(f32)
    m = fma(f32(1.0 - beta1), g, m)
    v = (v * f32(beta2)).astype(f32)
    v = fma((f32(1.0 - beta2) * g).astype(f32), g, v)
    denom = np.sqrt(v).astype(f32)
    denom = (denom * f32(1.0 / bc2_sqrt)).astype(f32)
    denom = (denom + f32(eps)).astype(f32)
    p = (p + ((f32(-(lr / bc1)) * m).astype(f32) / denom).astype(f32)).astype(f32)
    return p, m, v


def t(a, dtype=torch.float32):
    return torch.from_numpy(np.ascontiguousarray(a)).to(dtype)


def generate(out_dir):
    g = reflib.seeded(8)
    out = {}
    code_s, code_u = dynamic_map(True), dynamic_map(False)
    out["map.signed"] = t(code_s)
    out["map.unsigned"] = t(code_u)
    # The published code builds the map with torch.linspace in f32: the same values to an ulp.
    for signed, code in ((True, code_s), (False, code_u)):
        torch_map = []
        for i in range(7):
            pts = 2 ** i + 1 if signed else 2 ** (i + 1) + 1
            b = torch.linspace(0.1, 1, pts)
            means = (b[:-1] + b[1:]) / 2.0
            torch_map += ((10 ** (-6 + i)) * means).tolist()
            if signed:
                torch_map += (-(10 ** (-6 + i)) * means).tolist()
        torch_map = np.sort(np.array(torch_map + [0.0, 1.0], dtype=f32))
        rel = np.abs(torch_map - code) / np.maximum(np.abs(code), 1e-30)
        assert rel.max() < 1e-6, rel.max()

    # Round trips through the signed map.
    for k, n in enumerate(SIZES):
        x = torch.randn(n, generator=g).numpy().astype(f32)
        x[::7] = 0.0  # scattered zeros
        if n >= 4096:
            x[2048:4096] = 0.0  # a whole block of zeros
        if n >= 300:
            # exactly midway between neighbouring codes, with the block's absmax 1
            x[0] = 1.0
            x[1:256] = ((code_s[:-1] + code_s[1:]) * f32(0.5)).astype(f32)
        q, absmax = quantize(x, code_s)
        out[f"rt{k}.x"] = t(x)
        out[f"rt{k}.q"] = t(q, torch.int32)
        out[f"rt{k}.absmax"] = t(absmax)
        out[f"rt{k}.deq"] = t(dequantize(q, absmax, code_s))

    # A sweep through both maps (blocks of 2048 whose absmax is 1, so x is searched as it is):
    # every code, every midpoint and its f32 neighbours, uniform values and tiny ones.
    for name, code in (("sweep_s", code_s), ("sweep_u", code_u)):
        mids = ((code[:-1] + code[1:]) * f32(0.5)).astype(f32)
        lo = float(code[0])
        parts = [code, mids, np.nextafter(mids, f32(-2)), np.nextafter(mids, f32(2)),
                 torch.rand(2000, generator=g).numpy().astype(f32) * f32(1 - lo) + f32(lo),
                 (torch.rand(1000, generator=g).numpy() * 2e-6 - (1e-6 if lo < 0 else 0))
                 .astype(f32)]
        x = np.concatenate(parts).astype(f32)
        x = np.concatenate([x, np.zeros(8192 - x.size, dtype=f32)])
        x[::2048] = 1.0
        q, absmax = quantize(x, code)
        assert np.all(absmax == 1.0)
        out[f"{name}.x"] = t(x)
        out[f"{name}.q"] = t(q, torch.int32)

    # Adam8bit on a parameter above the 8-bit threshold; the small one is plain Adam.
    big = torch.randn(50, 100, generator=g).numpy().astype(f32)
    small = torch.randn(7, 3, generator=g).numpy().astype(f32)
    out["big.init"] = t(big)
    out["small.init"] = t(small)
    grads = []
    for s in range(STEPS):
        scale = [1.0, 0.2, 3.0][s]
        gb = (torch.randn(50, 100, generator=g).numpy() * scale).astype(f32)
        gb[:, :7] *= f32(1e-4)  # small values: the map's finer decades
        gs = (torch.randn(7, 3, generator=g).numpy() * scale).astype(f32)
        out[f"big.grad{s + 1}"] = t(gb)
        out[f"small.grad{s + 1}"] = t(gs)
        grads.append(gb)
    for case, (lr, b1, b2, eps, wd) in CASES.items():
        p = big.ravel().copy()
        zeros = np.zeros(p.size, dtype=f32)
        q1, a1 = quantize(zeros, code_s)
        q2, a2 = quantize(zeros, code_u)
        for s in range(STEPS):
            m = dequantize(q1, a1, code_s)
            v = dequantize(q2, a2, code_u)
            p, m, v = adam_update(p, grads[s].ravel(), m, v, s + 1, lr, b1, b2, eps, wd)
            q1, a1 = quantize(m, code_s)
            q2, a2 = quantize(v, code_u)
            out[f"{case}.big.step{s + 1}"] = t(p.reshape(big.shape))
        out[f"{case}.big.q1"] = t(q1, torch.int32)
        out[f"{case}.big.absmax1"] = t(a1)
        out[f"{case}.big.q2"] = t(q2, torch.int32)
        out[f"{case}.big.absmax2"] = t(a2)
        out[f"{case}.lr"] = torch.tensor([lr], dtype=torch.float64)
    reflib.save(os.path.join(out_dir, "adam8bit.safetensors"), out)


if __name__ == "__main__":
    import sys
    generate(sys.argv[1] if len(sys.argv) > 1 else ".")
