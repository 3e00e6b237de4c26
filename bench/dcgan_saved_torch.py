"""Bytes PyTorch saves for backward in one DC-GAN training step (the model and step order of
bench/dcgan_torch.py, imported from it): 32x32 or the example's 64x64 (--size 64 --nc 3, as
configs/dcgan64_emoji.yaml), batch 64, f32 or bf16 autocast, CPU.

Every tensor an autograd node saves goes through the pack hook of
torch.autograd.graph.saved_tensors_hooks; the hook records it, and a weakref finalizer on the
packed object tells when autograd drops it again (during backward, as each node's saved
variables are released). Two counts, each as a total over the step and as the peak live:
  naive:  numel * element_size summed over every saved tensor, as autograd sees them
          (a tensor saved by two ops, e.g. an in-place ReLU's output that the next conv
          saves as its input, counts twice);
  dedup:  each distinct storage once (data_ptr and nbytes of tensor.storage()), i.e. the memory
          that saving really keeps alive.
Parameters and buffers (BatchNorm running stats) are not activations and are left out, and so
are bf16 copies of parameters made by autocast (same shape, equal to the parameter cast).
The D step is D(real) + backward, then D(G(z) under no_grad) + backward; the G step is G(z),
D(fake), backward (D's parameters frozen), as dcgan_torch.py and core/src/train/gan_step.c.

The issue's "about 20.5 MiB for the D step, 24.3 MiB for the G step" is the dedup total:
D step 2 x 10.25 MiB (both D graphs, real and fake), G step 14.27 (G) + 10.0 (D on fake,
whose input is G's output, already counted); the naive total gives 34.5 and 38.5 MiB, not
those (D's parameters left trainable in the G step, as in the example, change nothing). Live
at once the D step peaks at 10.25 MiB only, since the real graph is freed by its backward
before the fake forward runs. The real batch
and the noise count as saved tensors (0.25 and 0.02 MiB). Under bf16 autocast torch 1.13 runs
conv_transpose2d in f32, so G's saved tensors stay f32 and only D's halve.

With --wgan-gp the step is configs/wgan_gp_fashion.yaml's (bench/wgan_gp_torch.py's critic
with LayerNorm and its order): the D step runs the gradient penalty between the real and the
fake half, D(x_hat) then torch.autograd.grad(create_graph=True) and the penalty's backward, and
a row "penalty" measures that part alone; with create_graph autograd also saves what the
double backward needs (the first backward's graph), and the hook sees those tensors too.

  /usr/bin/python3 bench/dcgan_saved_torch.py [--batch 64] [--size 32|64] [--nc 1]
                                              [--dtype f32|bf16] [--wgan-gp]
(--image and --channels are the older names of --size and --nc.)
"""
import argparse
import contextlib
import json
import os
import sys
import weakref

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dcgan_torch import Discriminator, Generator, weights_init  # noqa: E402 (no side effects)
from wgan_gp_torch import Critic, gradient_penalty  # noqa: E402 (no side effects)

MIB = float(1 << 20)


class Packed:
    """What the pack hook hands autograd: holds the tensor; its death means 'released'."""
    __slots__ = ("t", "__weakref__")

    def __init__(self, t):
        self.t = t


class SavedMeter:
    def __init__(self, modules):
        state = [t for m in modules for t in list(m.parameters()) + list(m.buffers())]
        self.state_ptrs = {t.storage().data_ptr() for t in state}
        self.state_by_shape = {}  # shape -> parameters (shapes repeat between G and D)
        for t in state:
            self.state_by_shape.setdefault(tuple(t.shape), []).append(t)
        self.reset()

    def reset(self):
        self.n_saved = self.naive = self.dedup = self.excluded = 0  # totals over the step
        self.live_naive = self.live_dedup = self.peak_naive = self.peak_dedup = 0
        self.live = {}  # storage key -> [live saved tensors on it, its nbytes]

    def is_state(self, t):
        if t.storage().data_ptr() in self.state_ptrs:
            return True  # a parameter or buffer itself, or a view of one
        # autocast's low-precision copy of a parameter (conv weights under bf16)
        return any(p.dtype != t.dtype and torch.equal(p.detach().to(t.dtype), t)
                   for p in self.state_by_shape.get(tuple(t.shape), ()))

    def pack(self, t):
        packed = Packed(t)
        if self.is_state(t):
            self.excluded += t.numel() * t.element_size()
            return packed
        s = t.storage()
        key, n = (s.data_ptr(), s.nbytes()), t.numel() * t.element_size()
        self.n_saved += 1
        self.naive += n
        self.live_naive += n
        ent = self.live.get(key)
        if ent is None:  # a storage not held by any live saved tensor: new bytes
            ent = self.live[key] = [0, s.nbytes()]
            self.dedup += ent[1]
            self.live_dedup += ent[1]
        ent[0] += 1
        self.peak_naive = max(self.peak_naive, self.live_naive)
        self.peak_dedup = max(self.peak_dedup, self.live_dedup)
        weakref.finalize(packed, self.release, key, n)
        return packed

    def release(self, key, n):
        self.live_naive -= n
        ent = self.live[key]
        ent[0] -= 1
        if ent[0] == 0:  # last saved reference gone (the storage stays pinned until then)
            self.live_dedup -= ent[1]
            del self.live[key]

    @contextlib.contextmanager
    def measure(self):
        self.reset()
        with torch.autograd.graph.saved_tensors_hooks(self.pack, lambda p: p.t):
            yield
        assert self.live_naive == 0 and not self.live, "graph not freed by backward"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", "--image", dest="image", type=int, default=32, choices=[32, 64],
                    help="image side: 32 (one stage fewer) or 64 (the example's G and D)")
    ap.add_argument("--nc", "--channels", dest="channels", type=int, default=1)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--wgan-gp", action="store_true")
    a = ap.parse_args()
    if a.wgan_gp and a.image != 32:
        ap.error("--wgan-gp measures bench/wgan_gp_torch.py's 32x32 critic; leave --size at 32")
    nz, ngf, ndf, n = 100, 64, 64, a.batch

    torch.manual_seed(1)
    G = Generator(nz, ngf, a.channels, a.image)
    D = Critic(a.channels, ndf) if a.wgan_gp else Discriminator(a.channels, ndf, a.image)
    G.apply(weights_init)
    D.apply(weights_init)
    x = torch.rand(n, a.channels, a.image, a.image) * 2 - 1
    real_t, fake_t = torch.ones(n), torch.zeros(n)
    z = torch.randn(n, nz, 1, 1)
    amp = (torch.autocast("cpu", dtype=torch.bfloat16) if a.dtype == "bf16"
           else contextlib.nullcontext())
    bce = F.binary_cross_entropy_with_logits
    meter, rows = SavedMeter([G, D]), {}

    if a.wgan_gp:  # the critic step of bench/wgan_gp_torch.py, and its penalty alone
        D.zero_grad(set_to_none=True)
        with torch.no_grad():
            fake = G(z)
        with meter.measure():
            gradient_penalty(D, x, fake).backward()
        rows["penalty"] = dict(vars(meter))
        D.zero_grad(set_to_none=True)
        with meter.measure():
            (-D(x).mean()).backward()
            with torch.no_grad():
                fake = G(z)
            gradient_penalty(D, x, fake).backward()
            D(fake).mean().backward()
        rows["D"] = dict(vars(meter))
    else:  # D step: real, then fake = G(z) without a graph (the example's fake.detach()).
        D.zero_grad(set_to_none=True)
        with meter.measure():
            with amp:
                loss = bce(D(x).float(), real_t)
            loss.backward()
            with torch.no_grad(), amp:
                fake = G(z)
            with amp:
                loss = bce(D(fake).float(), fake_t)
            loss.backward()
        rows["D"] = dict(vars(meter))  # (Adam's steps save nothing for backward: left out)

    # G step: G(z) with a graph, D on it, backward through D (its parameters frozen) into G.
    G.zero_grad(set_to_none=True)
    for p in D.parameters():
        p.requires_grad_(False)
    with meter.measure():
        with amp:
            loss = bce(D(G(z)).float(), real_t)
        loss.backward()
    for p in D.parameters():
        p.requires_grad_(True)
    rows["G"] = dict(vars(meter))

    print(f"saved-for-backward bytes, DC-GAN-{a.image} batch {n} nc {a.channels} {a.dtype}, "
          f"torch {torch.__version__} (MiB = 2^20 B; parameters, buffers and autocast's "
          f"parameter copies excluded)")
    print(f"{'step':<6} {'tensors':>7} {'naive total':>12} {'dedup total':>12} "
          f"{'naive peak':>11} {'dedup peak':>11} {'excluded':>9}")
    for k, r in rows.items():
        print(f"{k + ' step':<6} {r['n_saved']:>7} {r['naive'] / MIB:>12.3f} "
              f"{r['dedup'] / MIB:>12.3f} {r['peak_naive'] / MIB:>11.3f} "
              f"{r['peak_dedup'] / MIB:>11.3f} {r['excluded'] / MIB:>9.3f}")
    out = {"batch": n, "image": a.image, "channels": a.channels, "dtype": a.dtype,
           "torch": torch.__version__}
    for k, r in rows.items():  # d_step_saved_mib etc.: the dedup total, the headline figure
        for name, field in [("saved", "dedup"), ("saved_naive", "naive"), ("peak_live",
                            "peak_dedup"), ("peak_live_naive", "peak_naive"),
                            ("excluded", "excluded")]:
            out[f"{k.lower()}_step_{name}_mib"] = round(r[field] / MIB, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
