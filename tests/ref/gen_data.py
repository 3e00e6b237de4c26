"""Reference file for tests/test_ref_data.c: bilinear resizes of random images in [0,1] by
F.interpolate(mode="bilinear", align_corners=False, antialias=False), the formula of the
data module's resize transform (up: MNIST 28 -> 32 as the DC-GAN uses; down; odd sizes)."""
import os

import torch
import torch.nn.functional as F

import reflib

# name: (input shape N, C, H, W; output size H, W)
CASES = {
    "up": ((2, 3, 28, 28), (32, 32)),
    "down": ((1, 2, 37, 23), (16, 20)),
    "odd": ((1, 1, 5, 7), (9, 3)),
    "far": ((1, 1, 64, 64), (7, 5)),
    "mixed": ((1, 3, 30, 40), (45, 32)),
}


def generate(out_dir):
    g = reflib.seeded(2024)
    tensors = {}
    for name, (shape, size) in CASES.items():
        x = torch.rand(*shape, generator=g)
        y = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
        tensors["x_" + name] = x
        tensors["y_" + name] = y
    reflib.save(os.path.join(out_dir, "data.safetensors"), tensors)
