#!/usr/bin/python3
"""Loads a ganfw checkpoint of a residual model into the PyTorch modules of
tests/ref/gen_resnet.py with load_state_dict(strict=True) and, given --io, checks that the
nets reproduce ganfw's eval-mode outputs for the same inputs (tests/test_resnet.c runs it).

usage:
  check_resnet_torch.py CKPT --resnet IN,STEM,CLASSES --stage CH,BLOCKS,STRIDE ... [--block basic]
                        [--io IO] [--tol 1e-4]
  check_resnet_torch.py CKPT --resgan NZ,CHANNELS,C0,BASE --g-block CH,UP ... --d-block CH,DOWN ...
                        [--io IO]
IO holds x and y (classifier) or z, g_z, x, d_x (GAN). Exit status 0 when everything matches.
"""
import argparse
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "ref"))
sys.dont_write_bytecode = True
from check_checkpoint_torch import load_safetensors, sub_state_dict  # noqa: E402
import gen_resnet  # noqa: E402


def ints(text):
    return [int(v) for v in text.split(",")]


def compare(what, got, want, tol):
    err = (got.float() - want).abs().max().item()
    scale = want.abs().max().item()
    print(f"{what}: max |torch - ganfw| = {err:.3g} (outputs up to {scale:.3g})")
    return err <= tol * max(1.0, scale)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--resnet", type=ints)
    ap.add_argument("--stage", type=ints, action="append", default=[])
    ap.add_argument("--block", default="basic", choices=["basic", "bottleneck"])
    ap.add_argument("--resgan", type=ints)
    ap.add_argument("--g-block", type=ints, action="append", default=[])
    ap.add_argument("--d-block", type=ints, action="append", default=[])
    ap.add_argument("--io")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()

    tensors, meta, _ = load_safetensors(args.ckpt)
    io = load_safetensors(args.io)[0] if args.io else None
    ok = True
    if args.resnet:
        cin, stem, classes = args.resnet
        block = gen_resnet.Bottleneck if args.block == "bottleneck" else gen_resnet.BasicBlock
        net = gen_resnet.ResNet(cin, stem or None, [tuple(s) for s in args.stage], block, [],
                                classes)
        sd = sub_state_dict(tensors, "classifier.")
        net.load_state_dict(sd, strict=True)  # raises on a missing, unexpected or mis-shaped key
        print(f"loaded the classifier ({len(sd)} tensors) with strict=True; step {meta.get('step')}")
        if io is not None:
            net.eval()
            with torch.no_grad():
                ok &= compare("classifier", net(io["x"]), io["y"], args.tol)
    else:
        nz, channels, c0, base = args.resgan
        G = gen_resnet.Generator(nz, c0, base, [(c, bool(u)) for c, u in args.g_block], channels)
        D = gen_resnet.Discriminator(channels, [(c, bool(d)) for c, d in args.d_block])
        g_sd, d_sd = sub_state_dict(tensors, "generator."), sub_state_dict(tensors, "discriminator.")
        G.load_state_dict(g_sd, strict=True)
        D.load_state_dict(d_sd, strict=True)
        print(f"loaded the generator ({len(g_sd)} tensors) and the discriminator ({len(d_sd)}) "
              f"with strict=True; step {meta.get('step')}")
        if io is not None:
            G.eval()
            D.eval()
            with torch.no_grad():
                ok &= compare("G", G(io["z"]), io["g_z"], args.tol)
                ok &= compare("D", D(io["x"]), io["d_x"], args.tol)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
