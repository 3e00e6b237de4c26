"""PyTorch twin of bench_conv.c: times F.conv2d / F.conv_transpose2d on the DC-GAN 32x32
layers at batch 64 (forward, and backward computing dx and dw; no bias), median over runs.
Run with Debian's interpreter:
  /usr/bin/python3 bench/bench_conv_torch.py [threads] [runs] [batch] [wall|cpu]
"cpu" times process CPU time (time.process_time) instead of wall time, as bench_conv.c.
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

LAYERS = [  # name, transposed, C, K, H, stride, pad (4x4 kernels)
    ("G1 convT 100->256 1->4", True, 100, 256, 1, 1, 0),
    ("G2 convT 256->128 4->8", True, 256, 128, 4, 2, 1),
    ("G3 convT 128->64 8->16", True, 128, 64, 8, 2, 1),
    ("G4 convT 64->1 16->32", True, 64, 1, 16, 2, 1),
    ("D1 conv 1->64 32->16", False, 1, 64, 32, 2, 1),
    ("D2 conv 64->128 16->8", False, 64, 128, 16, 2, 1),
    ("D3 conv 128->256 8->4", False, 128, 256, 8, 2, 1),
    ("D4 conv 256->1 4->1", False, 256, 1, 4, 1, 0),
]


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    clock_name = sys.argv[4] if len(sys.argv) > 4 else "wall"
    if clock_name not in ("wall", "cpu"):
        sys.exit("usage: bench_conv_torch.py [threads] [runs] [batch] [wall|cpu]")
    now = time.process_time if clock_name == "cpu" else time.perf_counter
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    print(f"torch {torch.__version__} conv, batch {n}, {torch.get_num_threads()} threads, "
          f"median of {runs}, {clock_name} time")
    total_f = total_b = 0.0
    for name, transposed, c, k, h, stride, pad in LAYERS:
        x = torch.rand(n, c, h, h) - 0.5
        x.requires_grad_(True)
        w = (torch.rand(c, k, 4, 4) if transposed else torch.rand(k, c, 4, 4)) - 0.5
        w.requires_grad_(True)
        if transposed:
            def fwd():
                return F.conv_transpose2d(x, w, None, stride, pad)
        else:
            def fwd():
                return F.conv2d(x, w, None, stride, pad)
        dy = torch.rand_like(fwd()) - 0.5
        tf, tb = [], []
        for r in range(runs + 2):  # two warm-up runs
            t0 = now()
            y = fwd()
            t1 = now()
            torch.autograd.grad(y, (x, w), dy)
            t2 = now()
            if r >= 2:
                tf.append(t1 - t0)
                tb.append(t2 - t1)
        mf, mb = statistics.median(tf) * 1e3, statistics.median(tb) * 1e3
        total_f += mf
        total_b += mb
        print(f"{name:26s} fwd {mf:8.3f} ms  bwd {mb:8.3f} ms  "
              f"(min {min(tf) * 1e3:.3f}, {min(tb) * 1e3:.3f})")
    print(f"{'total':26s} fwd {total_f:8.3f} ms  bwd {total_b:8.3f} ms")


if __name__ == "__main__":
    main()
