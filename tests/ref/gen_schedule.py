"""PyTorch references for tests/test_ref_schedule.c: the learning rate of each of 60
optimizer steps under torch.optim.lr_scheduler's StepLR, CosineAnnealingLR, and each after
a LinearLR warm-up joined by SequentialLR, with scheduler.step() once per optimizer step
(ganfw's schedules are per step). Writes schedule.safetensors with {case}.lr [60] (f64),
the rate used by step k = 0..59 (the group's lr before the k-th scheduler.step()).

ganfw's warm-up over W steps is LinearLR(start_factor=1/(W+1), total_iters=W); the main
schedule starts at milestone W, and cosine's T_max is the steps left after the warm-up.
"""
import os
import warnings

import torch

import reflib

STEPS = 60
BASE_LR = 0.1
W = 8

# name -> function(optimizer) -> scheduler; mirrored in tests/test_ref_schedule.c.
CASES = {
    "step": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=7, gamma=0.5),
    "cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=STEPS, eta_min=1e-3),
    "warmup_cosine": lambda o: torch.optim.lr_scheduler.SequentialLR(
        o, [torch.optim.lr_scheduler.LinearLR(o, start_factor=1.0 / (W + 1), total_iters=W),
            torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=STEPS - W)], milestones=[W]),
    "warmup_step": lambda o: torch.optim.lr_scheduler.SequentialLR(
        o, [torch.optim.lr_scheduler.LinearLR(o, start_factor=1.0 / (W + 1), total_iters=W),
            torch.optim.lr_scheduler.StepLR(o, step_size=10, gamma=0.1)], milestones=[W]),
    "warmup_constant": lambda o: torch.optim.lr_scheduler.LinearLR(
        o, start_factor=1.0 / (W + 1), total_iters=W),
}


def generate(out_dir):
    out = {}
    for case, make in CASES.items():
        p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
        opt = torch.optim.SGD([p], lr=BASE_LR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SequentialLR's deprecated step(epoch) call
            sched = make(opt)
            lrs = []
            for _ in range(STEPS):
                lrs.append(opt.param_groups[0]["lr"])
                opt.step()
                sched.step()
        out[f"{case}.lr"] = torch.tensor(lrs, dtype=torch.float64)
    reflib.save(os.path.join(out_dir, "schedule.safetensors"), out)
