"""The PyTorch half of the long-horizon parity check (bench/run_parity.sh). It replays the
run that build/bench/bench_dcgan_parity wrote into DIR (the same initial weights, real
batches and noise, step for step) in PyTorch 1.13, once in float32 and once in float64, and
tells where ganfw's trajectory leaves PyTorch's own f32-vs-f64 spread:

  /usr/bin/python3 bench/dcgan_parity_torch.py DIR [--modes f32,f64] [--threads 2]
                                               [--data data/mnist] [--factor 10]

The step is ganfw's (core/src/train/gan_step.c), which is the DC-GAN example's: D on the real
batch (target 1) and on G(z) made under no_grad (target 0), BCE-with-logits, D's Adam step;
then D(G(z)) with target 1 into G, G's Adam step (2e-4, betas 0.5/0.999).

Written into DIR: torch_f32.csv, torch_f64.csv (ganfw.csv's columns) and report.txt, which
is also printed. The report has
  - the inputs: whether every real batch row is a training image after torchvision-style
    transforms (bytes / 255, bilinear resize with align_corners=False, (x - 0.5) / 0.5),
    bit for bit, and each epoch a permutation; the noise's moments and the correlation of
    consecutive steps' noise; the initial weights' means and standard deviations;
  - per step, the distance of ganfw's and of PyTorch f32's losses from PyTorch f64's, and
    the last step N up to which ganfw stays within `factor` times PyTorch f32's own spread
    (its running maximum);
  - at the dumped steps, each net's parameter distance from f64, relative to the distance
    that net travelled from its initial weights.
"""
import argparse
import csv
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
from dcgan_quality_torch import load_data  # noqa: E402
from dcgan_ref import Net  # noqa: E402
from reflib import load, save  # noqa: E402

COLUMNS = ["loss_d", "loss_g", "d_x", "d_g_z1", "d_g_z2", "w_norm_g", "w_norm_d", "g_norm_g",
           "g_norm_d"]


def conv_keys(state, role):
    """The Sequential indices of `role`'s 4-D weights, in order."""
    out = []
    for k, v in state.items():
        parts = k.split(".")
        if parts[0] == role and parts[-1] == "weight" and v.ndim == 4:
            out.append(int(parts[2]))
    return sorted(out)


def build(state):
    """G and D of bench_dcgan_parity's init.safetensors: DC-GAN stacks whose channel counts
    and BatchNorm layers are read from the tensors' shapes and names."""
    def has_bn(role, i):
        w = state.get(f"{role}.main.{i}.weight")
        return w is not None and w.ndim == 1

    g_layers, d_layers = [], []
    gi = conv_keys(state, "generator")
    for n, i in enumerate(gi):
        w = state[f"generator.main.{i}.weight"]
        first, last = n == 0, n == len(gi) - 1
        g_layers.append(nn.ConvTranspose2d(w.shape[0], w.shape[1], 4, 1 if first else 2, 0 if first else 1,
                                           bias=False))
        if not last and has_bn("generator", i + 1):
            g_layers.append(nn.BatchNorm2d(w.shape[1]))
        g_layers.append(nn.Tanh() if last else nn.ReLU(True))
    di = conv_keys(state, "discriminator")
    for n, i in enumerate(di):
        w = state[f"discriminator.main.{i}.weight"]
        last = n == len(di) - 1
        d_layers.append(nn.Conv2d(w.shape[1], w.shape[0], 4, 1 if last else 2, 0 if last else 1, bias=False))
        if not last:
            if has_bn("discriminator", i + 1):
                d_layers.append(nn.BatchNorm2d(w.shape[0]))
            d_layers.append(nn.LeakyReLU(0.2, inplace=True))
    G, D = Net(nn.Sequential(*g_layers)), Net(nn.Sequential(*d_layers))
    for role, net in (("generator", G), ("discriminator", D)):
        sd = {k[len(role) + 1:]: v for k, v in state.items() if k.startswith(role + ".")}
        missing, unexpected = net.load_state_dict(sd, strict=False)
        missing = [m for m in missing if not m.endswith(("num_batches_tracked", "running_mean", "running_var"))]
        if missing or unexpected:
            raise SystemExit(f"init.safetensors: {role}: missing {missing}, unexpected {unexpected}")
    return G, D


def norms(net):
    w = sum(float((p.detach().double() ** 2).sum()) for p in net.parameters())
    g = sum(float((p.grad.detach().double() ** 2).sum()) for p in net.parameters() if p.grad is not None)
    return math.sqrt(w), math.sqrt(g)


def load_adam(opt, net, role, ckpt, dtype):
    """A ganfw checkpoint's Adam state of `role` ("optim.<role>.<param>.exp_avg", ...) into opt."""
    step = float(ckpt[1][f"optim.{role}.step"])
    for name, p in net.named_parameters():
        opt.state[p] = {"step": torch.tensor(step),
                        "exp_avg": ckpt[0][f"optim.{role}.{name}.exp_avg"].to(dtype).clone(),
                        "exp_avg_sq": ckpt[0][f"optim.{role}.{name}.exp_avg_sq"].to(dtype).clone()}


def replay(init, inputs, steps, dumps, dtype, first=1, ckpt=None):
    """Steps first..steps of the run from `init` (the state before step `first`); with `ckpt`
    (a ganfw checkpoint's (tensors, metadata)) its Adam state too."""
    G, D = build(init)
    G, D = G.to(dtype), D.to(dtype)
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    if ckpt:
        load_adam(opt_d, D, "discriminator", ckpt, dtype)
        load_adam(opt_g, G, "generator", ckpt, dtype)
    rows, weights = [], {}
    for step in range(first, steps + 1):
        real = inputs[f"x.{step:06d}"].to(dtype)
        z = inputs[f"z.{step:06d}"].to(dtype)
        D.zero_grad()
        out = D(real).view(-1)
        err_real = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
        err_real.backward()
        d_x = torch.sigmoid(out).mean()
        with torch.no_grad():
            fake = G(z)
        out = D(fake).view(-1)
        err_fake = F.binary_cross_entropy_with_logits(out, torch.zeros_like(out))
        err_fake.backward()
        d_g_z1 = torch.sigmoid(out).mean()
        opt_d.step()
        wd, gd = norms(D)  # D's gradients before the G step adds to them
        G.zero_grad()
        out = D(G(z)).view(-1)
        err_g = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
        err_g.backward()
        d_g_z2 = torch.sigmoid(out).mean()
        opt_g.step()
        wg, gg = norms(G)
        rows.append([float(err_real + err_fake), float(err_g), float(d_x), float(d_g_z1),
                     float(d_g_z2), wg, wd, gg, gd])
        if step in dumps:
            for role, net in (("generator", G), ("discriminator", D)):
                weights[(step, role)] = torch.cat([p.detach().double().reshape(-1) for p in net.parameters()])
    return rows, weights, (G, D)


def read_csv(path):
    with open(path) as f:
        return [[float(r[c]) for c in COLUMNS] for r in csv.DictReader(f)]


def write_csv(path, rows):
    with open(path, "w") as f:
        f.write("step," + ",".join(COLUMNS) + "\n")
        for i, r in enumerate(rows, 1):
            f.write(f"{i}," + ",".join(f"{v:.12g}" for v in r) + "\n")


def check_inputs(inputs, steps, data_dir, out):
    """The data pipeline, the noise and (separately) the initialisation, as report lines."""
    if data_dir and os.path.exists(os.path.join(data_dir, "train-images-idx3-ubyte")):
        x1 = inputs["x.000001"]
        imgs = load_data(data_dir, x1.shape[-1])  # the quality reference's own pipeline
        n = imgs.shape[0]
        # rows are looked up by their sum (the transforms' roundings may differ in the last
        # bit), then compared value by value
        sums = imgs.reshape(n, -1).double().sum(1)
        index = {}
        for i in range(n):
            index.setdefault(int(round(float(sums[i]) * 10)), []).append(i)

        def lookup(row):
            k = int(round(float(row.double().sum()) * 10))
            best = None
            for c in index.get(k - 1, []) + index.get(k, []) + index.get(k + 1, []):
                d = float((row - imgs[c]).abs().max())
                if best is None or d < best[1]:
                    best = (c, d)
            return best
        batch = x1.shape[0]
        per_epoch = n // batch
        found, exact, seen, repeats, total, worst = 0, 0, set(), 0, 0, 0.0
        for step in range(1, steps + 1):
            if (step - 1) % per_epoch == 0:
                seen = set()
            x = inputs[f"x.{step:06d}"]
            for r in range(batch):
                hit = lookup(x[r])
                total += 1
                if hit is not None and hit[1] < 1e-5:
                    i, d = hit
                    found += 1
                    exact += d == 0.0
                    worst = max(worst, d)
                    repeats += i in seen
                    seen.add(i)
        out.append(f"data: {found} of {total} real rows are training images after PyTorch's "
                   f"transforms ({exact} bit for bit, the largest difference {worst:.2g}); "
                   f"{repeats} repeats within an epoch")
    z = torch.stack([inputs[f"z.{s:06d}"].reshape(-1).double() for s in range(1, steps + 1)])
    flat = z.reshape(-1)
    m, sd = float(flat.mean()), float(flat.std())
    skew = float(((flat - m) ** 3).mean() / sd ** 3)
    kurt = float(((flat - m) ** 4).mean() / sd ** 4)
    lag = float(torch.corrcoef(torch.stack([z[:-1].reshape(-1), z[1:].reshape(-1)]))[0, 1]) if steps > 1 else 0.0
    out.append(f"noise: {flat.numel()} values, mean {m:+.4f}, std {sd:.4f}, skew {skew:+.4f}, "
               f"kurtosis {kurt:.4f} (normal: 0, 1, 0, 3); consecutive steps correlate {lag:+.4f}")


def check_init(init, out):
    conv, bn = [], []
    for k, v in init.items():
        if k.endswith(".weight") and v.ndim == 4:
            conv.append(v.reshape(-1).double())
        elif k.endswith(".weight") and v.ndim == 1:
            bn.append(v.double())
    if conv:
        c = torch.cat(conv)
        out.append(f"init: conv weights ({c.numel()}) mean {float(c.mean()):+.5f} std {float(c.std()):.5f} "
                   f"(N(0, 0.02))")
    if bn:
        b = torch.cat(bn)
        out.append(f"init: BatchNorm weights ({b.numel()}) mean {float(b.mean()):.5f} std {float(b.std()):.5f} "
                   f"(N(1, 0.02))")


def spread(a, b, cols=(0, 1)):
    """max over the loss columns of |a - b| / max(|b|, 1e-3)."""
    return max(abs(a[c] - b[c]) / max(abs(b[c]), 1e-3) for c in cols)


MODES = {
    "f64": (torch.float64, True),
    "f32": (torch.float32, True),  # PyTorch's default CPU convolutions (oneDNN)
    "f32-thnn": (torch.float32, False),  # its own im2col convolutions: other roundings
}


def flat_params(state, prefix, net):
    return torch.cat([state[f"{prefix}{n}"].double().reshape(-1) for n, _ in net.named_parameters()])


def train_only(a):
    mode = a.modes.split(",")[0]
    dtype, mkldnn = MODES[mode]
    init, _ = load(os.path.join(a.dir, "init.safetensors"))
    inputs, _ = load(os.path.join(a.dir, "inputs.safetensors"))
    steps = sum(1 for k in inputs if k.startswith("x."))
    t0 = time.time()
    with torch.backends.mkldnn.flags(enabled=mkldnn):
        rows, _, (G, _) = replay(init, inputs, steps, set(), dtype)
    write_csv(os.path.join(a.dir, f"torch_{mode}.csv"), rows)
    save(a.train_only, {f"generator.{k}": v.detach().float().clone() if v.is_floating_point() else v
                        for k, v in G.state_dict().items()},
         {"ganfw.source": "bench/dcgan_parity_torch.py --train-only", "steps": str(steps)})
    print(f"replayed {steps} steps in {mode} in {time.time() - t0:.0f} s; wrote {a.train_only}")


def judge(ganfw, runs, f32s, first, factor, report):
    """Per step, ganfw's and each f32 run's distance from f64 and the envelope; report lines.
    Returns (last step within factor x the envelope, the first step past it or None, the
    largest ratio)."""
    r64 = runs["f64"]
    report.append("losses (loss_d, loss_g), and their largest relative distance from PyTorch f64:")
    report.append("  step   ganfw loss_d loss_g    f64 loss_d loss_g    ganfw-f64  " +
                  "  ".join(f"{m}-f64" for m in f32s) + "   envelope")
    envelope, last_ok, parted, worst_ratio = 0.0, first - 1, None, 0.0
    for i in range(len(r64)):
        step = first + i
        e_g = spread(ganfw[i], r64[i])
        e_t = [spread(runs[m][i], r64[i]) for m in f32s]
        envelope = max([envelope] + e_t)
        ratio = e_g / max(envelope, 1e-7)
        worst_ratio = max(worst_ratio, ratio)
        if parted is None and ratio > factor:
            parted = step
        if parted is None:
            last_ok = step
        k = i + 1
        if k in (1, 2, 5, 10, 20, 50) or k % 50 == 0 or step == parted:
            report.append(f"  {step:5d}   {ganfw[i][0]:.5f} {ganfw[i][1]:.5f}    {r64[i][0]:.5f} {r64[i][1]:.5f}    "
                          f"{e_g:9.2e}  " + "  ".join(f"{e:9.2e}" for e in e_t) + f"   {envelope:8.2e}")
    return last_ok, parted, worst_ratio


def resume(a):
    ckpt = load(a.resume)
    start = int(ckpt[1]["step"])
    inputs, _ = load(os.path.join(a.dir, "inputs.safetensors"))
    ganfw = read_csv(os.path.join(a.dir, a.ganfw))
    last = min(start + a.window, len(ganfw))
    if last <= start:
        raise SystemExit(f"{a.resume}: step {start}, but {a.dir} has {len(ganfw)} steps")
    modes = a.modes.split(",")
    runs = {}
    for mode in modes:
        dtype, mkldnn = MODES[mode]
        with torch.backends.mkldnn.flags(enabled=mkldnn):
            runs[mode] = replay(ckpt[0], inputs, last, set(), dtype, first=start + 1, ckpt=ckpt)[0]
    report = [f"{a.dir}: steps {start + 1}..{last} replayed from {a.resume} (weights and Adam state)"]
    last_ok, parted, worst = judge(ganfw[start:last], runs, [m for m in modes if m != "f64"], start + 1,
                                   a.factor, report)
    report.append(f"ganfw stays within {a.factor:g}x PyTorch's f32 envelope up to step {last_ok}"
                  + (f"; step {parted} leaves it" if parted else "") + f" (largest ratio {worst:.2f})")
    text = "\n".join(report)
    with open(os.path.join(a.dir, f"report_resume_{start}.txt"), "w") as f:
        f.write(text + "\n")
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--modes", default="f64,f32,f32-thnn",
                    help="f64 is the reference; every f32 mode adds to PyTorch's own spread")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default="data/mnist")
    ap.add_argument("--factor", type=float, default=10.0)
    ap.add_argument("--ganfw", default="ganfw.csv", help="the ganfw trajectory in DIR to judge")
    ap.add_argument("--train-only", metavar="GENERATOR",
                    help="replay in the first of --modes only and write the generator there as "
                         "safetensors (ganfw's names; `ganfw score GENERATOR --config CONFIG`): "
                         "PyTorch trained on ganfw's initial weights, batches and noise")
    ap.add_argument("--resume", metavar="CHECKPOINT",
                    help="start from this checkpoint of the same run (weights and Adam state, "
                         "e.g. DIR's run's checkpoints/step_00001000.safetensors) instead of step 1: "
                         "the check on late-training numerics, where the trajectories from step 1 "
                         "have long parted")
    ap.add_argument("--window", type=int, default=50, help="steps replayed after --resume")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.train_only:
        return train_only(a)
    if a.resume:
        return resume(a)
    modes = a.modes.split(",")
    if "f64" not in modes or len(modes) < 2:
        raise SystemExit("--modes: f64 and at least one f32 mode")
    init, _ = load(os.path.join(a.dir, "init.safetensors"))
    inputs, _ = load(os.path.join(a.dir, "inputs.safetensors"))
    gw, _ = load(os.path.join(a.dir, "weights.safetensors"))
    ganfw = read_csv(os.path.join(a.dir, a.ganfw))
    steps = len(ganfw)
    dumps = sorted({int(k.split(".")[0][1:]) for k in gw if k.startswith("s")})
    report = [f"{a.dir}: {steps} steps, weights dumped at steps {dumps}"]
    check_inputs(inputs, steps, a.data, report)
    check_init(init, report)
    runs = {}
    for mode in modes:
        dtype, mkldnn = MODES[mode]
        t0 = time.time()
        with torch.backends.mkldnn.flags(enabled=mkldnn):
            rows, weights, _ = replay(init, inputs, steps, set(dumps), dtype)
        write_csv(os.path.join(a.dir, f"torch_{mode}.csv"), rows)
        runs[mode] = (rows, weights)
        print(f"replayed {steps} steps in {mode} in {time.time() - t0:.0f} s", flush=True)
    f32s = [m for m in modes if m != "f64"]
    last_ok, parted, worst_ratio = judge(ganfw, {m: runs[m][0] for m in modes}, f32s, 1, a.factor, report)
    report.append(f"PyTorch's own spread is the envelope: the running maximum of its f32 runs' distance from "
                  f"f64. ganfw stays within {a.factor:g}x the envelope for the first {last_ok} of {steps} steps"
                  + (f"; step {parted} leaves it" if parted else "")
                  + f" (its largest ratio to the envelope: {worst_ratio:.2f})")
    report.append("parameters at the dumped steps, distance from f64 relative to the distance the net "
                  "travelled from its initial weights:")
    G, D = build(init)
    for role, net in (("generator", G), ("discriminator", D)):
        w0 = flat_params(init, role + ".", net)
        for step in dumps:
            ref = runs["f64"][1][(step, role)]
            travel = float((ref - w0).norm())
            g = flat_params(gw, f"s{step:06d}.{role}.", net)
            cells = [f"ganfw {float((g - ref).norm()) / travel:.2e}"]
            cells += [f"{m} {float((runs[m][1][(step, role)] - ref).norm()) / travel:.2e}" for m in f32s]
            report.append(f"  step {step:5d} {role:13s}: " + "   ".join(cells) + f"   (travel {travel:.4g})")
    text = "\n".join(report)
    with open(os.path.join(a.dir, "report.txt"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
