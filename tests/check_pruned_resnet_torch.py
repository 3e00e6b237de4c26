#!/usr/bin/python3
"""Loads a channel-pruned ganfw state_dict (core/src/nn/prune_channels.h's
ganfw_channel_prune_write) of the basic-block CIFAR ResNet into the common PyTorch CIFAR
ResNet built with the reduced widths, with load_state_dict(strict=True), and, given --io,
checks that it reproduces ganfw's eval-mode output of the pruned net (tests/test_prune_channels.c
runs it).

usage:
  check_pruned_resnet_torch.py FILE --resnet IN,STEM,CLASSES --stage CH,BLOCKS,STRIDE ...
                               [--width LAYER=N ...] [--io IO] [--tol 1e-4]
A layer without --width keeps the width the stage gives it. IO holds x and y. Exit status 0
when everything matches.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.dont_write_bytecode = True
from check_checkpoint_torch import load_safetensors, sub_state_dict  # noqa: E402


class Block(nn.Module):
    """He et al.'s basic block with its own inner (mid) and outer (cout) widths; the shortcut
    is a projection where the unpruned block has one (its shape changes)."""

    def __init__(self, cin, mid, cout, stride, projection):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, mid, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if projection:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class PrunedResNet(nn.Module):
    def __init__(self, cin, stem, stages, classes, widths):
        super().__init__()
        c = widths.get("conv1", stem)
        self.conv1 = nn.Conv2d(cin, c, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        orig = stem
        for k, (planes, blocks, stride) in enumerate(stages):
            layers = []
            for b in range(blocks):
                s = stride if b == 0 else 1
                name = "layer%d.%d." % (k + 1, b)
                mid = widths.get(name + "conv1", planes)
                cout = widths.get(name + "conv2", planes)
                layers.append(Block(c, mid, cout, s, s != 1 or orig != planes))
                c, orig = cout, planes
            setattr(self, "layer%d" % (k + 1), nn.Sequential(*layers))
        self.n_stages = len(stages)
        self.linear = nn.Linear(c, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for k in range(self.n_stages):
            x = getattr(self, "layer%d" % (k + 1))(x)
        return self.linear(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def ints(text):
    return [int(v) for v in text.split(",")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--resnet", type=ints, required=True)
    ap.add_argument("--stage", type=ints, action="append", default=[])
    ap.add_argument("--width", action="append", default=[])
    ap.add_argument("--io")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    widths = {}
    for w in args.width:
        name, n = w.split("=")
        widths[name] = int(n)
    cin, stem, classes = args.resnet
    net = PrunedResNet(cin, stem, [tuple(s) for s in args.stage], classes, widths)
    tensors, _, _ = load_safetensors(args.file)
    sd = sub_state_dict(tensors, "classifier.")
    net.load_state_dict(sd, strict=True)  # raises on a missing, unexpected or mis-shaped key
    params = sum(p.numel() for p in net.parameters())
    print(f"loaded the pruned classifier ({len(sd)} tensors, {params} parameters) with strict=True")
    ok = True
    if args.io:
        io = load_safetensors(args.io)[0]
        net.eval()
        with torch.no_grad():
            got = net(io["x"])
        err = (got - io["y"]).abs().max().item()
        scale = io["y"].abs().max().item()
        print(f"pruned classifier: max |torch - ganfw| = {err:.3g} (outputs up to {scale:.3g})")
        ok = err <= args.tol * max(1.0, scale)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
