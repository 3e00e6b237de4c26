"""PyTorch-on-CUDA twin of bench_dcgan_step with device.type: cuda: the DC-GAN training step
of configs/dcgan.yaml (--mode f32), dcgan_amp.yaml (--mode amp: autocast f16, one
GradScaler shared by both optimizers, as ganfw's amp strategy) and dcgan_ckpt.yaml
(--mode ckpt: G and D each in 2 checkpoint segments), at --size 64 with --nc 3 by default.
The model is PyTorch's examples/dcgan at 64x64 (D without the final Sigmoid, weights_init
N(0, 0.02)), Adam 2e-4 betas (0.5, 0.999), BCE-with-logits, in ganfw's step order
(core/src/train/gan_step.c): D on the real batch, D on G(z) made under no-grad, D's step; then G
through D without D's parameter gradients, G's step. One random real batch in [-1, 1];
fresh noise every step. FP32 math as ganfw's CUDA backend: TF32 off for convolutions and
matmuls by default (--no-tf32, stated explicitly, is the same), although PyTorch's own
default allows TF32 in cuDNN convolutions; --tf32 allows it in both, as a plain PyTorch
program would run (it matters for f32 and for the f32 ops that autocast leaves). AMP is
torch.autocast(device_type='cuda', dtype=torch.float16) with a GradScaler.
cudnn.benchmark with --benchmark (ganfw: device.cudnn_benchmark).

Prints one machine-readable line:
  torch_cuda mode=... median_ms=... min_ms=... peak_alloc_mib=... peak_reserved_mib=... tf32=0|1
peak_* are torch.cuda.max_memory_allocated/reserved over the timed steps (the same
quantities as ganfw's allocated and reserved peaks).

  python3 bench/dcgan_torch_cuda.py [--mode f32|amp|ckpt] [--steps 50] [--warmup 10]
                                    [--batch 64] [--size 64] [--nc 3] [--benchmark]
                                    [--no-tf32 | --tf32]
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential


class Generator(nn.Module):
    def __init__(self, nz, ngf, nc, stages):
        super().__init__()
        ch = ngf << stages
        layers = [nn.ConvTranspose2d(nz, ch, 4, 1, 0, bias=False), nn.BatchNorm2d(ch),
                  nn.ReLU(True)]  # 1 -> 4
        for _ in range(stages):  # 4 -> size/2
            layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(ch // 2), nn.ReLU(True)]
            ch //= 2
        layers += [nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)

    def forward(self, z, segments=0):
        if segments:
            return checkpoint_sequential(self.main, segments, z, use_reentrant=False)
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self, nc, ndf, stages):
        super().__init__()
        ch = ndf
        layers = [nn.Conv2d(nc, ch, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
        for _ in range(stages):
            layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch * 2),
                       nn.LeakyReLU(0.2, inplace=True)]
            ch *= 2
        layers += [nn.Conv2d(ch, 1, 4, 1, 0, bias=False)]  # 4 -> 1, a logit
        self.main = nn.Sequential(*layers)

    def forward(self, x, segments=0):
        if segments:
            return checkpoint_sequential(self.main, segments, x, use_reentrant=False).view(-1)
        return self.main(x).view(-1)


def weights_init(m):
    name = m.__class__.__name__
    if name.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif name.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["f32", "amp", "ckpt"], default="f32")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=64, choices=[32, 64])
    ap.add_argument("--nc", type=int, default=3)
    ap.add_argument("--nz", type=int, default=100)
    ap.add_argument("--ngf", type=int, default=64)
    ap.add_argument("--ndf", type=int, default=64)
    ap.add_argument("--benchmark", action="store_true")
    tf32 = ap.add_mutually_exclusive_group()
    tf32.add_argument("--no-tf32", dest="tf32", action="store_false",
                      help="TF32 off in cuDNN convolutions and matmuls (the default, as ganfw)")
    tf32.add_argument("--tf32", dest="tf32", action="store_true",
                      help="TF32 allowed in both (PyTorch's own default for convolutions)")
    ap.set_defaults(tf32=False)
    a = ap.parse_args()

    if not torch.cuda.is_available():
        raise SystemExit("dcgan_torch_cuda.py: torch sees no CUDA device")
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = a.benchmark
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.manual_seed(1)
    stages = 3 if a.size == 64 else 2
    G = Generator(a.nz, a.ngf, a.nc, stages).to(dev)
    D = Discriminator(a.nc, a.ndf, stages).to(dev)
    G.apply(weights_init)
    D.apply(weights_init)
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    amp = a.mode == "amp"
    seg = 2 if a.mode == "ckpt" else 0
    try:
        scaler = torch.amp.GradScaler("cuda", enabled=amp)
    except (AttributeError, TypeError):  # PyTorch before 2.3
        scaler = torch.cuda.amp.GradScaler(enabled=amp)
    n = a.batch
    x = torch.rand(n, a.nc, a.size, a.size, device=dev) * 2 - 1
    real_t = torch.ones(n, device=dev)
    fake_t = torch.zeros(n, device=dev)

    def autocast():
        return torch.autocast(device_type="cuda", dtype=torch.float16, enabled=amp)

    def step():
        z = torch.randn(n, a.nz, 1, 1, device=dev)
        # D step: real, then the fake made under no-grad (as gan_step.c)
        D.zero_grad(set_to_none=True)
        with autocast():
            out = D(x, seg)
            loss_real = F.binary_cross_entropy_with_logits(out.float(), real_t)
        scaler.scale(loss_real).backward()
        d_x = torch.sigmoid(out.detach().float()).mean().item()
        with torch.no_grad(), autocast():
            fake = G(z)
        with autocast():
            out = D(fake, seg)
            loss_fake = F.binary_cross_entropy_with_logits(out.float(), fake_t)
        scaler.scale(loss_fake).backward()
        loss_d = loss_real.item() + loss_fake.item()
        scaler.step(opt_d)
        # G step: through D, without D's parameter gradients
        G.zero_grad(set_to_none=True)
        for p in D.parameters():
            p.requires_grad_(False)
        with autocast():
            fake = G(z, seg)
            out = D(fake, seg)
            loss_g = F.binary_cross_entropy_with_logits(out.float(), real_t)
        scaler.scale(loss_g).backward()
        for p in D.parameters():
            p.requires_grad_(True)
        scaler.step(opt_g)
        scaler.update()
        return loss_d, loss_g.item(), d_x

    times = []
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
    mib = 1024.0 * 1024.0
    print(f"torch_cuda mode={a.mode} median_ms={statistics.median(times):.2f} "
          f"min_ms={min(times):.2f} peak_alloc_mib={torch.cuda.max_memory_allocated() / mib:.1f} "
          f"peak_reserved_mib={torch.cuda.max_memory_reserved() / mib:.1f} batch={n} "
          f"size={a.size} nc={a.nc} steps={a.steps} benchmark={int(a.benchmark)} "
          f"tf32={int(a.tf32)} "
          f"device={torch.cuda.get_device_name(0).replace(' ', '_')} version={torch.__version__}",
          flush=True)


if __name__ == "__main__":
    main()
