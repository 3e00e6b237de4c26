"""PyTorch references for tests/test_ref_sgd.c: 5 steps of torch.optim.SGD (single-tensor
path, foreach=False, PyTorch 1.13's _single_tensor_sgd) over four parameters of different
shapes, with fixed random gradients per step, for the settings in CASES. Writes
sgd.safetensors with

    p{j}.init                       the initial values of parameter j
    p{j}.grad{s}                    its gradient at step s (1..5)
    {case}.p{j}.step{s}             parameter j after step s
    {case}.p{j}.momentum_buffer     its momentum buffer after step 5 (momentum > 0 only)
    {case}.lr                       the learning rate of each step, [5] (f64)

The C side uses the same settings (as YAML optim sections) and learning rates.
"""
import os

import torch

import reflib

SHAPES = [(4, 3, 3, 3), (7,), (5, 6), (2, 3, 4, 5)]
STEPS = 5
GRAD_SCALE = [1.0, 3.0, 0.1, 0.05, 2.0]
CONST_LR = [0.05] * STEPS
VARYING_LR = [0.1, 0.05, 0.02, 0.05, 0.01]  # as a schedule would set it

# name -> (SGD kwargs without lr, per-step lr); mirrored in tests/test_ref_sgd.c.
CASES = {
    "plain": (dict(), [0.1] * STEPS),
    "momentum": (dict(momentum=0.9), CONST_LR),
    "dampening": (dict(momentum=0.9, dampening=0.1), CONST_LR),
    "nesterov": (dict(momentum=0.9, nesterov=True), CONST_LR),
    "weight_decay": (dict(weight_decay=0.01), CONST_LR),
    "momentum_wd": (dict(momentum=0.9, weight_decay=5e-4), CONST_LR),
    "nesterov_wd_lr": (dict(momentum=0.8, nesterov=True, weight_decay=0.01), VARYING_LR),
}


def generate(out_dir):
    g = reflib.seeded(4321)
    out = {}
    inits = [torch.randn(*s, generator=g) for s in SHAPES]
    grads = [[torch.randn(*s, generator=g) * GRAD_SCALE[k] for k in range(STEPS)]
             for s in SHAPES]
    for j, p in enumerate(inits):
        out[f"p{j}.init"] = p
        for k in range(STEPS):
            out[f"p{j}.grad{k + 1}"] = grads[j][k]
    for case, (kw, lrs) in CASES.items():
        params = [torch.nn.Parameter(p.clone()) for p in inits]
        opt = torch.optim.SGD(params, lr=lrs[0], foreach=False, **kw)
        for k in range(STEPS):
            for group in opt.param_groups:
                group["lr"] = lrs[k]
            for j, p in enumerate(params):
                p.grad = grads[j][k].clone()
            opt.step()
            for j, p in enumerate(params):
                out[f"{case}.p{j}.step{k + 1}"] = p.detach().clone()
        for j, p in enumerate(params):
            buf = opt.state[p].get("momentum_buffer")
            if buf is not None:
                out[f"{case}.p{j}.momentum_buffer"] = buf.clone()
        out[f"{case}.lr"] = torch.tensor(lrs, dtype=torch.float64)
    reflib.save(os.path.join(out_dir, "sgd.safetensors"), out)
