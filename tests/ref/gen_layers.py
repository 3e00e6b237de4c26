"""Reference file for tests/test_ref_layers.c: PyTorch's nn.Upsample(scale_factor=2) in
nearest and bilinear (align_corners=False) mode, nn.AdaptiveAvgPool2d(1), nn.GroupNorm,
nn.InstanceNorm2d (affine or not, no running statistics) and nn.LayerNorm over [C,H,W] and
[F], forward and backward through autograd from fixed inputs and an upstream gradient.
Inputs and parameters are stored in f32 (what the C side consumes); every reference is
computed from them in f64 and stored in f32, so the C test measures its own error.

Keys per case NAME: NAME_x, NAME_dy, NAME_y, NAME_dx and, with affine parameters,
NAME_weight, NAME_bias, NAME_dweight, NAME_dbias (shaped like PyTorch's state_dict)."""
import os

import torch
import torch.nn as nn

import reflib

# name -> (input shape, mode)
UPSAMPLE_CASES = {
    "up_nearest": ((2, 3, 5, 4), "nearest"),
    "up_bilinear": ((2, 3, 5, 4), "bilinear"),
    "up_bilinear_1x3": ((1, 2, 1, 3), "bilinear"),
    "up_bilinear_big": ((4, 8, 16, 16), "bilinear"),
}

GAP_CASES = {
    "gap": (3, 4, 5, 7),
    "gap_1x1": (2, 3, 1, 1),
    "gap_big": (8, 16, 16, 16),
}

# name -> (input shape, groups, affine, eps)
GROUPNORM_CASES = {
    "gn_g3": ((2, 6, 4, 5), 3, True, 1e-5),
    "gn_g1": ((3, 4, 3, 3), 1, True, 1e-5),
    "gn_gc": ((2, 5, 2, 3), 5, False, 1e-3),
    "gn_2d": ((4, 8), 2, True, 1e-5),
    "gn_big": ((8, 32, 8, 8), 8, True, 1e-5),
}

# name -> (input shape, affine)
INSTANCENORM_CASES = {
    "in_plain": ((2, 3, 5, 5), False),
    "in_affine": ((3, 4, 4, 6), True),
    "in_1x2": ((2, 2, 1, 2), True),
}

# name -> (input shape, normalised shape, affine)
LAYERNORM_CASES = {
    "ln_chw": ((3, 4, 5, 5), (4, 5, 5), True),
    "ln_f": ((6, 10), (10,), True),
    "ln_f_plain": ((5, 7), (7,), False),
    "ln_big": ((4, 64, 8, 8), (64, 8, 8), True),
}


def _run(name, module, x, g, out):
    """Runs module (f64) on x (f32 input, data shifted off zero) with a random upstream
    gradient; stores inputs, outputs and gradients under name_*."""
    module = module.double()
    params = dict(module.named_parameters())
    for p in params.values():  # not the ones/zeros PyTorch starts from
        with torch.no_grad():
            p.copy_((1.0 + 0.3 * torch.randn(p.shape, generator=g)).double()
                    if p.dim() and p is params.get("weight") else
                    (0.2 * torch.randn(p.shape, generator=g)).double())
    xd = x.double().requires_grad_(True)
    y = module(xd)
    dy = torch.randn(y.shape, generator=g)
    y.backward(dy.double())
    out.update({name + "_x": x, name + "_dy": dy, name + "_y": y.detach(),
                name + "_dx": xd.grad})
    for pname, p in params.items():
        out[name + "_" + pname] = p.detach()
        out[name + "_d" + pname] = p.grad


def generate(out_dir):
    g = reflib.seeded(20261201)
    out = {}
    for name, (shape, mode) in UPSAMPLE_CASES.items():
        _run(name, nn.Upsample(scale_factor=2, mode=mode), torch.randn(shape, generator=g), g,
             out)
    for name, shape in GAP_CASES.items():
        _run(name, nn.AdaptiveAvgPool2d(1), torch.randn(shape, generator=g) + 0.5, g, out)
    for name, (shape, groups, affine, eps) in GROUPNORM_CASES.items():
        x = torch.randn(shape, generator=g) * 1.5 + 0.5
        _run(name, nn.GroupNorm(groups, shape[1], eps=eps, affine=affine), x, g, out)
    for name, (shape, affine) in INSTANCENORM_CASES.items():
        x = torch.randn(shape, generator=g) * 2.0 - 0.3
        _run(name, nn.InstanceNorm2d(shape[1], affine=affine), x, g, out)
    for name, (shape, nshape, affine) in LAYERNORM_CASES.items():
        x = torch.randn(shape, generator=g) * 1.2 + 0.4
        _run(name, nn.LayerNorm(list(nshape), elementwise_affine=affine), x, g, out)
    floats = {k: v.detach().float().contiguous() for k, v in out.items()}
    reflib.save(os.path.join(out_dir, "layers.safetensors"), floats,
                {"torch": torch.__version__, "writer": "tests/ref/gen_layers.py"})
