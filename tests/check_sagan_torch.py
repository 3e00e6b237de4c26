#!/usr/bin/python3
"""Checks ganfw's SAGAN self-attention layer (examples/sagan, a layer plugin) against
PyTorch: tests/test_example_sagan.c runs the layer forward and backward through the core on
random data and writes IO (safetensors) with the input x, the output gradient dy, the
parameters (in_proj_weight, in_proj_bias, gamma) and ganfw's y, dx and parameter gradients
(grad.in_proj_weight, ...). This script loads the parameters into the reference module of the
SAGAN code (query/key/value 1x1 Conv2d, softmax over the keys, a learned gamma: Self_Attn of
heykeetae/Self-Attention-GAN, the paper's authors' layout), runs it in float64 on the same x,
backpropagates dy and compares every tensor. It prints one line per tensor with the largest
absolute difference and that difference relative to the tensor's largest magnitude, and
exits 0 when every relative difference is at most --tol.

usage: check_sagan_torch.py IO [IO ...] [--reduction 8] [--tol 1e-5]
"""
import argparse
import os
import sys

import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.dont_write_bytecode = True
from check_checkpoint_torch import load_safetensors  # noqa: E402


class SelfAttn(nn.Module):
    """SAGAN's self-attention block (Zhang et al., 2019), as the reference code writes it."""

    def __init__(self, in_dim, reduction=8):
        super().__init__()
        self.query_conv = nn.Conv2d(in_dim, in_dim // reduction, 1)
        self.key_conv = nn.Conv2d(in_dim, in_dim // reduction, 1)
        self.value_conv = nn.Conv2d(in_dim, in_dim, 1)
        self.gamma = nn.Parameter(torch.zeros(1))
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        b, c, h, w = x.size()
        query = self.query_conv(x).view(b, -1, h * w).permute(0, 2, 1)  # [B, P, C']
        key = self.key_conv(x).view(b, -1, h * w)  # [B, C', P]
        attention = self.softmax(torch.bmm(query, key))  # [B, P, P]
        value = self.value_conv(x).view(b, -1, h * w)  # [B, C, P]
        out = torch.bmm(value, attention.permute(0, 2, 1)).view(b, c, h, w)
        return self.gamma * out + x


def load_packed(module, weight, bias, gamma):
    """ganfw's packed projections [2C'+C, C] (rows: query, key, value) into the three convs."""
    cq = module.query_conv.out_channels
    parts = [(module.query_conv, 0, cq), (module.key_conv, cq, 2 * cq),
             (module.value_conv, 2 * cq, weight.shape[0])]
    with torch.no_grad():
        for conv, a, b in parts:
            conv.weight.copy_(weight[a:b].reshape(conv.weight.shape))
            conv.bias.copy_(bias[a:b])
        module.gamma.copy_(gamma.reshape(1))


def packed_grads(module):
    convs = (module.query_conv, module.key_conv, module.value_conv)
    w = torch.cat([c.weight.grad.reshape(c.out_channels, -1) for c in convs])
    b = torch.cat([c.bias.grad for c in convs])
    return w, b, module.gamma.grad.reshape(1)


def compare(what, got, want, tol):
    err = (got.double() - want).abs().max().item()
    scale = want.abs().max().item()
    rel = err / scale if scale > 0 else err
    ok = rel <= tol
    print(f"{what:>22}: max |ganfw - torch| = {err:.3g}, relative {rel:.3g} "
          f"(|torch| up to {scale:.3g}){'' if ok else '  FAIL'}")
    return ok


def check(path, reduction, tol):
    t, _, _ = load_safetensors(path)
    x, dy = t["x"].double(), t["dy"].double()
    c = x.shape[1]
    module = SelfAttn(c, reduction).double()
    load_packed(module, t["in_proj_weight"].double(), t["in_proj_bias"].double(),
                t["gamma"].double())
    x.requires_grad_(True)
    y = module(x)
    y.backward(dy)
    gw, gb, gg = packed_grads(module)
    print(f"{os.path.basename(path)}: x {list(x.shape)}, reduction {reduction}, "
          f"gamma {t['gamma'].item():.4g}")
    ok = compare("y", t["y"], y.detach(), tol)
    ok &= compare("dx", t["dx"], x.grad, tol)
    ok &= compare("grad.in_proj_weight", t["grad.in_proj_weight"], gw, tol)
    ok &= compare("grad.in_proj_bias", t["grad.in_proj_bias"], gb, tol)
    ok &= compare("grad.gamma", t["grad.gamma"], gg, tol)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("io", nargs="+")
    ap.add_argument("--reduction", type=int, default=8)
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    ok = True
    for path in args.io:
        ok &= check(path, args.reduction, args.tol)
    print("all within tolerance" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
