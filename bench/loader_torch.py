"""PyTorch twin of bench_loader.c for an image folder: images per second out of torchvision's
ImageFolder + DataLoader, with nothing else running (the loop only takes the batches).
The folder is read as bench/folder_torch.py reads it (PIL decoding, transparency on white,
Resize only for an image of another size, ToTensor, Normalize(0.5)); batches of --batch,
shuffled, the short last batch dropped, workers kept across epochs (persistent_workers), as
ganfw's loader keeps its threads. Each round makes a new DataLoader, runs --warmup batches
(the workers' start-up falls there), then times --batches batches, crossing epochs as needed.
The main process runs torch on one thread, as each of ganfw's loader threads does.

--workers pairs with ganfw's loader by who makes the batches: 0 is the main process itself
(ganfw's data.prefetch: false), N > 0 is N worker processes each making whole batches ahead
(ganfw's data.workers: N threads, each making whole batches ahead). bench/run_loader64.sh
runs both side by side.

  /usr/bin/python3 bench/loader_torch.py --data data/emoji/train [--workers 0] [--batch 64]
      [--batches 200] [--warmup 10] [--rounds 3] [--size 64]
Prints: torch_loader data=... workers=N batch=B images_per_s=... (the best round)
        median_images_per_s=...
"""
import argparse
import os
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from folder_torch import image_folder  # noqa: E402


def batches_forever(loader):
    while True:
        yield from loader


def one_round(ds, a, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, drop_last=True,
                        num_workers=a.workers, persistent_workers=a.workers > 0, generator=g)
    it = batches_forever(loader)
    for _ in range(a.warmup):
        next(it)
    n, t0 = 0, time.perf_counter()
    for _ in range(a.batches):
        x, _ = next(it)
        n += x.shape[0]
    rate = n / (time.perf_counter() - t0)
    del it, loader  # stops the workers before the next round starts its own
    return rate


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="an image folder: DATA/<class>/<image>")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ds = image_folder(a.data, a.size)
    if len(ds) < a.batch:
        raise SystemExit(f"{a.data}: {len(ds)} images, fewer than one batch of {a.batch}")
    rates = [one_round(ds, a, r + 1) for r in range(a.rounds)]
    print(f"torch_loader data={a.data} workers={a.workers} batch={a.batch} "
          f"shape=3x{a.size}x{a.size} images={len(ds)} batches={a.batches} "
          f"images_per_s={max(rates):.0f} median_images_per_s={statistics.median(rates):.0f} "
          f"version={torch.__version__}", flush=True)


if __name__ == "__main__":
    main()
