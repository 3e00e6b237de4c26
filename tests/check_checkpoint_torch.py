#!/usr/bin/python3
"""Loads a ganfw checkpoint into PyTorch's DC-GAN (pytorch/examples dcgan for 32x32 images,
the discriminator without Sigmoid) with load_state_dict(strict=True), checks the file's
crc32 and, given --io, that both nets reproduce ganfw's eval-mode outputs for the same
inputs. The safetensors file is parsed by hand (the safetensors package is not needed).

usage: /usr/bin/python3 tests/check_checkpoint_torch.py CKPT [--io IO] [--tol 1e-4]
Exit status 0 when everything matches."""
import argparse
import json
import struct
import sys
import zlib

import torch
import torch.nn as nn

DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}


def load_safetensors(path):
    """{name: tensor}, metadata, data section bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    meta = header.pop("__metadata__", {})
    data = raw[8 + hlen:]
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        buf = bytearray(data[begin:end])
        flat = torch.frombuffer(buf, dtype=dtype) if end > begin else torch.empty(0, dtype=dtype)
        out[name] = flat.reshape(info["shape"]).clone()
    return out, meta, data


class Generator(nn.Module):
    def __init__(self, nz, ngf, nc):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),  # 4x4
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),  # 8x8
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),  # 16x16
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),  # 32x32
            nn.Tanh(),
        )

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self, ndf, nc):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),  # 16x16
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),  # 8x8
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),  # 4x4
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False),  # 1x1 logits
        )

    def forward(self, x):
        return self.main(x)


def sub_state_dict(tensors, prefix):
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--io", help="safetensors with z, g_z, x, d_x from ganfw (eval mode)")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()

    tensors, meta, data = load_safetensors(args.ckpt)
    ok = True
    if meta.get("format") != "ganfw-checkpoint-1":
        print(f"FAIL: format is {meta.get('format')!r}")
        ok = False
    crc = "%08x" % (zlib.crc32(data) & 0xFFFFFFFF)
    if meta.get("crc32") != crc:
        print(f"FAIL: data crc32 {crc}, metadata says {meta.get('crc32')!r}")
        ok = False

    g_sd = sub_state_dict(tensors, "generator.")
    d_sd = sub_state_dict(tensors, "discriminator.")
    nz, ngf4 = g_sd["main.0.weight"].shape[:2]
    nc = g_sd["main.9.weight"].shape[1]
    ndf = d_sd["main.0.weight"].shape[0]
    G = Generator(nz, ngf4 // 4, nc)
    D = Discriminator(ndf, nc)
    G.load_state_dict(g_sd, strict=True)  # raises on any missing/unexpected/mis-shaped key
    D.load_state_dict(d_sd, strict=True)
    for name, t in list(g_sd.items()) + list(d_sd.items()):
        if name.endswith("num_batches_tracked") and (t.dtype != torch.int64 or t.dim() != 0):
            print(f"FAIL: {name} is {t.dtype} of shape {list(t.shape)}, not an int64 scalar")
            ok = False
    print(f"loaded generator (nz={nz}, ngf={ngf4 // 4}, nc={nc}, {len(g_sd)} tensors) and "
          f"discriminator (ndf={ndf}, {len(d_sd)} tensors) with strict=True; "
          f"step {meta.get('step')}, crc32 {crc}")

    if args.io:
        io, _, _ = load_safetensors(args.io)
        G.eval()
        D.eval()
        with torch.no_grad():
            for what, net, inp, out in (("G", G, "z", "g_z"), ("D", D, "x", "d_x")):
                got = net(io[inp])
                err = (got - io[out]).abs().max().item()
                scale = io[out].abs().max().item()
                print(f"{what}: max |torch - ganfw| = {err:.3g} (outputs up to {scale:.3g})")
                if not err <= args.tol * max(1.0, scale):
                    print(f"FAIL: {what} differs by {err:.3g} > {args.tol:g}")
                    ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
