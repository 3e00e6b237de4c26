"""configs/dcgan.yaml's recipe trained in PyTorch 1.13, the quality reference for
bench/run_quality.sh: DC-GAN-32 (PyTorch's examples/dcgan with one stage fewer, D without
its final Sigmoid), or with --size 64 the example's DC-GAN-64 (configs/dcgan64_emoji.yaml's
recipe), weights_init N(0, 0.02) (BatchNorm weights N(1, 0.02)), Adam 2e-4 betas
(0.5, 0.999), BCE-with-logits, the example's step (D on real, D on G(z).detach(), G through
D on the same G(z)), batch 64, fresh N(0, 1) noise each step.

The data are the IDX files ganfw reads (data/mnist from scripts/fetch_mnist.sh), transformed
as ganfw's loader and torchvision's Resize + ToTensor + Normalize(0.5, 0.5) do: bytes / 255,
bilinear resize (align_corners=False, as ganfw's data.resize), (x - 0.5) / 0.5. Or, when
--data is not a folder of IDX files, an image folder (one sub-folder per class, e.g.
data/emoji/train from scripts/fetch_emoji.sh) read by torchvision's ImageFolder as
bench/folder_torch.py does: PIL decoding, transparency composited on white, Resize(size)
only for an image of another size, ToTensor, Normalize(0.5, 0.5); the labels are not used.
Every epoch is a fresh permutation; the short last batch is dropped (ganfw's data.drop_last
default).

The generator is written as safetensors under ganfw's names (generator.main.N.*), with no
ganfw metadata: `ganfw score OUT --config configs/dcgan.yaml --classifier ...` and
`ganfw sample OUT --config configs/dcgan.yaml` read it.

  /usr/bin/python3 bench/dcgan_quality_torch.py --seed 1 --out runs/quality/torch_s1.safetensors
      [--data data/mnist] [--steps 1500] [--batch 64] [--size 32] [--threads 1]
  /usr/bin/python3 bench/dcgan_quality_torch.py --seed 1 --out runs/quality_emoji/torch_s1.safetensors
      --data data/emoji/train --size 64 --nc 3 --steps 2675
(--nc, when given, must be the data's channel count: 1 for IDX files, 3 for an image folder.)
"""
import argparse
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
from dcgan_ref import discriminator, generator, weights_init  # noqa: E402
from reflib import save  # noqa: E402

NZ, NGF, NDF = 100, 64, 64


def read_idx_images(path):
    """uint8 [N, 28, 28] of an IDX3 file, refusing anything else with the file's name."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 16:
        raise SystemExit(f"{path}: too short for an IDX image file")
    magic, n, h, w = struct.unpack(">IIII", raw[:16])
    if magic != 0x803 or len(raw) != 16 + n * h * w:
        raise SystemExit(f"{path}: not an IDX3 image file (magic {magic:#x}, {len(raw)} bytes)")
    return torch.frombuffer(bytearray(raw[16:]), dtype=torch.uint8).view(n, 1, h, w)


IDX_TRAIN = "train-images-idx3-ubyte"


def load_data(data_dir, size):
    """The training images [N,C,size,size] in [-1,1]: MNIST's IDX file in data_dir, else
    data_dir as an image folder (bench/folder_torch.py)."""
    if not os.path.exists(os.path.join(data_dir, IDX_TRAIN)):
        if not os.path.isdir(data_dir):
            raise SystemExit(f"{data_dir}: neither a folder of MNIST IDX files nor an image folder")
        from folder_torch import folder_tensor  # torchvision only for image folders
        return folder_tensor(data_dir, size)[0]
    x = read_idx_images(os.path.join(data_dir, IDX_TRAIN)).float() / 255.0
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return (x - 0.5) / 0.5


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True, help="the generator's safetensors file")
    ap.add_argument("--data", default="data/mnist")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=32, choices=[32, 64])
    ap.add_argument("--nc", type=int, default=None, help="the data's channels (a check)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    data = load_data(a.data, a.size)
    nc = data.shape[1]
    if a.nc is not None and a.nc != nc:
        raise SystemExit(f"--nc {a.nc}, but {a.data} has {nc}-channel images")
    print(f"data {a.data}: {data.shape[0]} images [{nc},{a.size},{a.size}]", flush=True)
    G, D = generator(NZ, NGF, nc, a.size), discriminator(nc, NDF, a.size)
    G.apply(weights_init)
    D.apply(weights_init)
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    per_epoch = data.shape[0] // a.batch
    step, t0 = 0, time.time()
    while step < a.steps:
        perm = torch.randperm(data.shape[0])
        for b in range(per_epoch):
            if step == a.steps:
                break
            real = data[perm[b * a.batch:(b + 1) * a.batch]]
            D.zero_grad()
            out = D(real).view(-1)
            err_real = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
            err_real.backward()
            z = torch.randn(a.batch, NZ, 1, 1)
            fake = G(z)
            out = D(fake.detach()).view(-1)
            err_fake = F.binary_cross_entropy_with_logits(out, torch.zeros_like(out))
            err_fake.backward()
            opt_d.step()
            G.zero_grad()
            out = D(fake).view(-1)
            err_g = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
            err_g.backward()
            opt_g.step()
            step += 1
            if step % 250 == 0 or step == a.steps:
                print(f"step {step} loss_d {float(err_real + err_fake):.4f} loss_g {float(err_g):.4f} "
                      f"({time.time() - t0:.0f} s)", flush=True)
    tensors = {f"generator.{k}": v.detach().clone() for k, v in G.state_dict().items()}
    save(a.out, tensors, {"ganfw.source": "bench/dcgan_quality_torch.py", "seed": str(a.seed),
                          "steps": str(a.steps), "data": a.data, "size": str(a.size)})
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
