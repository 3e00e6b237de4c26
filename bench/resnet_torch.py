"""PyTorch twin of bench_dcgan_step.c given configs/resnet20_fashion.yaml: the ResNet-20
training step. He et al.'s CIFAR ResNet-20 for 1x28x28 images: a 3x3 stem conv (16 channels)
with BatchNorm and ReLU, three stages of three BasicBlocks (16, 32, 64 channels; stride 2 in
the first block of stages 2 and 3), the shortcut a 1x1 stride-2 conv with BatchNorm where the
shape changes ("option B"), global average pooling, a linear layer to 10 classes; every conv
without bias; 272,186 parameters. SGD lr 0.1, momentum 0.9, Nesterov, weight decay 5e-4;
CrossEntropyLoss. One fixed random batch [N,1,28,28] uniform in [-1,1] with labels i % 10,
as the C side. A step: zero_grad, forward, loss, backward, optimizer step, loss.item().
Prints one machine-readable line:  torch median_ms=... min_ms=... rss_mib=...

Run with Debian's interpreter:
  /usr/bin/python3 bench/resnet_torch.py [--steps 20] [--warmup 5] [--threads 2] [--batch 128]
"""
import argparse
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PARAMS = 272186  # configs/resnet20_fashion.yaml's count, logged by ganfw's cnn plugin


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:  # option B
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet20(nn.Module):
    def __init__(self, channels=1, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            blocks = []
            for b in range(3):
                blocks.append(BasicBlock(cin, cout, stride if b == 0 else 1))
                cin = cout
            layers.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = layers
        self.linear = nn.Linear(64, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0 or a.threads < 1 or a.batch < 1:
        ap.error("--steps, --threads and --batch must be at least 1, --warmup at least 0")

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = ResNet20()
    params = sum(p.numel() for p in model.parameters())
    print(f"# parameters {params} (configs/resnet20_fashion.yaml: {PARAMS})", flush=True)
    if params != PARAMS:
        raise SystemExit(f"resnet_torch.py: {params} parameters, expected {PARAMS}")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    n = a.batch
    x = torch.rand(n, 1, 28, 28) * 2 - 1
    y = torch.arange(n) % 10
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    times, losses = [], []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        losses.append(step())
        t1 = time.perf_counter()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"# loss first {losses[0]:.4f} last {losses[-1]:.4f}", flush=True)
    print(f"torch median_ms={statistics.median(times):.2f} min_ms={min(times):.2f} "
          f"rss_mib={rss_mib:.1f} threads={torch.get_num_threads()} batch={n} "
          f"steps={a.steps} version={torch.__version__}", flush=True)


if __name__ == "__main__":
    main()
