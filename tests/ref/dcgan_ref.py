"""PyTorch's DC-GAN (examples/dcgan) at 32x32 (one stage fewer) or 64x64 (the example's), as
ganfw's dcgan plugin builds it: G and D as nn.Sequential under `main` (so the state_dict
names are ganfw's, main.0.weight, ...), D without the final Sigmoid (it returns logits), and
the example's weights_init. Shared by
the reference generators (gen_gan_step.py, gen_gan_run.py) and the bench scripts
(bench/dcgan_quality_torch.py, bench/dcgan_parity_torch.py); not a gen_*.py itself."""
import torch
import torch.nn as nn


class Net(nn.Module):
    """Wraps the Sequential as `main`, so the state_dict keys are main.0.weight, ..."""

    def __init__(self, main):
        super().__init__()
        self.main = main

    def forward(self, x):
        return self.main(x)


def stages_of(size):
    """The stride-2 stages between 4x4 and size/2 (ganfw's dcgan plugin: 2 at 32, 3 at 64)."""
    if size not in (32, 64):
        raise ValueError(f"DC-GAN image size {size}: 32 or 64")
    return 2 if size == 32 else 3


def generator(nz, ngf, nc, size=32):
    """z [N,nz,1,1] -> image [N,nc,size,size] in [-1,1]: ConvT 1->4, then stride-2 ConvT
    stages halving the channels from ngf*2^k (k = 2 at 32: 4->8->16; k = 3 at 64, the example:
    4->8->16->32) with BN and ReLU, then ConvT to nc channels and Tanh."""
    k = stages_of(size)
    ch = ngf << k
    layers = [nn.ConvTranspose2d(nz, ch, 4, 1, 0, bias=False), nn.BatchNorm2d(ch), nn.ReLU(True)]
    for _ in range(k):
        layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch // 2),
                   nn.ReLU(True)]
        ch //= 2
    layers += [nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()]
    return Net(nn.Sequential(*layers))


def discriminator(nc, ndf, size=32):
    """image [N,nc,size,size] -> logit [N,1,1,1]: Conv to size/2 with LeakyReLU(0.2), then
    stride-2 Conv stages doubling the channels down to 4x4 (to ndf*4 at 32, ndf*8 at 64) with
    BN and LeakyReLU(0.2), then Conv 4->1."""
    ch = ndf
    layers = [nn.Conv2d(nc, ch, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
    for _ in range(stages_of(size)):
        layers += [nn.Conv2d(ch, ch * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ch * 2),
                   nn.LeakyReLU(0.2, inplace=True)]
        ch *= 2
    layers += [nn.Conv2d(ch, 1, 4, 1, 0, bias=False)]
    return Net(nn.Sequential(*layers))


def weights_init(m, g=None):
    """The example's weights_init: conv weights N(0, 0.02), BatchNorm weights N(1, 0.02) and
    biases 0; drawn from generator g, or as the example draws them (nn.init.normal_ on
    torch's global RNG) when g is None."""
    name = m.__class__.__name__
    if name.find("Conv") != -1:
        if g is None:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        else:
            m.weight.data.copy_(torch.randn(m.weight.shape, generator=g) * 0.02)
    elif name.find("BatchNorm") != -1:
        if g is None:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
        else:
            m.weight.data.copy_(1.0 + torch.randn(m.weight.shape, generator=g) * 0.02)
        m.bias.data.zero_()
