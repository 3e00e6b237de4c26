"""PyTorch references for tests/test_ref_adam.c: 5 steps of torch.optim.Adam / AdamW
(single-tensor path, foreach=False) over four parameters of different shapes, with fixed
random gradients per step, for four settings. Writes adam.safetensors with

    p{j}.init               the initial values of parameter j
    p{j}.grad{s}            its gradient at step s (1..5); magnitudes vary by step so that
                            AMSGrad's running maximum differs from exp_avg_sq
    {case}.p{j}.step{s}     parameter j after step s
    {case}.p{j}.exp_avg     state after step 5 (and .exp_avg_sq, .max_exp_avg_sq)
    {case}.lr               the learning rate of the case (a scalar)

for case in default, wd, amsgrad, adamw (see CASES; the C side uses the same settings).
"""
import os

import torch

import reflib

SHAPES = [(4, 3, 3, 3), (7,), (5, 6), (2, 3, 4, 5)]
STEPS = 5
GRAD_SCALE = [1.0, 3.0, 0.1, 0.05, 2.0]

# name -> (constructor, kwargs); mirrored in tests/test_ref_adam.c as YAML configs.
CASES = {
    "default": (torch.optim.Adam, dict(lr=1e-3)),
    "wd": (torch.optim.Adam, dict(lr=1e-3, weight_decay=0.01)),
    "amsgrad": (torch.optim.Adam, dict(lr=1e-3, amsgrad=True)),
    "adamw": (torch.optim.AdamW, dict(lr=2e-4, betas=(0.5, 0.999), weight_decay=0.01)),
}


def generate(out_dir):
    g = reflib.seeded(1234)
    out = {}
    inits = [torch.randn(*s, generator=g) for s in SHAPES]
    grads = [[torch.randn(*s, generator=g) * GRAD_SCALE[k] for k in range(STEPS)]
             for s in SHAPES]
    for j, p in enumerate(inits):
        out[f"p{j}.init"] = p
        for k in range(STEPS):
            out[f"p{j}.grad{k + 1}"] = grads[j][k]
    for case, (ctor, kw) in CASES.items():
        params = [torch.nn.Parameter(p.clone()) for p in inits]
        opt = ctor(params, foreach=False, **kw)
        for k in range(STEPS):
            for j, p in enumerate(params):
                p.grad = grads[j][k].clone()
            opt.step()
            for j, p in enumerate(params):
                out[f"{case}.p{j}.step{k + 1}"] = p.detach().clone()
        for j, p in enumerate(params):
            st = opt.state[p]
            assert int(st["step"]) == STEPS
            for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
                if key in st:
                    out[f"{case}.p{j}.{key}"] = st[key].clone()
        out[f"{case}.lr"] = torch.tensor([kw["lr"]], dtype=torch.float64)
    reflib.save(os.path.join(out_dir, "adam.safetensors"), out)
