"""PyTorch 1.13 CPU counterpart of bench/bench_nn.c: the same ops at the same shapes, the
ATen calls autograd makes in a DC-GAN step (native_batch_norm and its backward,
relu/threshold_backward, leaky_relu and its backward, tanh and tanh_backward,
binary_cross_entropy_with_logits through autograd) and the classifier's 2x2 pooling, two threads (or $THREADS). Prints
"name median_us min_us".

    /usr/bin/python3 bench/bench_nn_torch.py [reps]
"""
import os
import sys
import time

import torch
import torch.nn.functional as F


def run(name, fn, shape, reps):
    for _ in range(5):
        fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e6)
    t.sort()
    print("%-34s %10.1f %10.1f" % ("%s %s" % (name, "x".join(str(s) for s in shape)),
                                   t[reps // 2], t[0]), flush=True)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    torch.set_grad_enabled(False)
    aten = torch.ops.aten
    shapes = [(64, 256, 4, 4), (64, 128, 8, 8), (64, 64, 16, 16),
              (64, 512, 4, 4), (64, 256, 8, 8), (64, 128, 16, 16), (64, 64, 32, 32)]
    for s in shapes:
        C = s[1]
        x, dy = torch.rand(s) * 2 - 1, torch.rand(s) * 2 - 1
        w, b = torch.rand(C), torch.rand(C)
        rm, rv = torch.zeros(C), torch.ones(C)
        y, sm, si = torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
        run("bn_fwd", lambda: torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5), s, reps)
        run("bn_bwd", lambda: aten.native_batch_norm_backward(dy, x, w, rm, rv, sm, si, True,
                                                              1e-5, [True, True, True]), s, reps)
        r = torch.relu(x)
        run("relu_fwd", lambda: torch.relu(x), s, reps)
        run("relu_bwd", lambda: aten.threshold_backward(dy, r, 0.0), s, reps)
        run("lrelu_fwd", lambda: F.leaky_relu(x, 0.2), s, reps)
        run("lrelu_bwd", lambda: aten.leaky_relu_backward(dy, x, 0.2, False), s, reps)
    for s in [(64, 3, 32, 32), (64, 3, 64, 64)]:
        x, dy = torch.rand(s) * 2 - 1, torch.rand(s) * 2 - 1
        y = torch.tanh(x)
        run("tanh_fwd", lambda: torch.tanh(x), s, reps)
        run("tanh_bwd", lambda: aten.tanh_backward(dy, y), s, reps)
    x, t = torch.rand(64, 1, 1, 1).requires_grad_(True), torch.full((64, 1, 1, 1), 0.9)

    def bce():  # 1.13 has no ATen backward op to call directly: autograd, as in a step
        with torch.enable_grad():
            F.binary_cross_entropy_with_logits(x, t).backward()
    run("bce_fwd_bwd", bce, (64, 1, 1, 1), reps)
    s = (64, 32, 28, 28)
    x = torch.rand(s) * 2 - 1
    y, idx = F.max_pool2d(x, 2, 2, return_indices=True)
    dy = torch.rand(y.shape)
    run("maxpool_fwd", lambda: F.max_pool2d(x, 2, 2, return_indices=True), s, reps)
    run("maxpool_bwd", lambda: aten.max_pool2d_with_indices_backward(dy, x, [2, 2], [2, 2],
                                                                      [0, 0], [1, 1], False, idx),
        s, reps)
    run("avgpool_fwd", lambda: F.avg_pool2d(x, 2, 2), s, reps)
    run("avgpool_bwd", lambda: aten.avg_pool2d_backward(dy, x, [2, 2], [2, 2], [0, 0], False,
                                                         True, None), s, reps)


if __name__ == "__main__":
    main()
