"""PyTorch's DC-GAN (examples/dcgan) at 32x32, as ganfw's dcgan plugin builds it: G and D as
nn.Sequential under `main` (so the state_dict names are ganfw's, main.0.weight, ...), D
without the final Sigmoid (it returns logits), and the example's weights_init. Shared by
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


def generator(nz, ngf, nc):
    """z [N,nz,1,1] -> image [N,nc,32,32] in [-1,1]: ConvT 1->4->8->16->32, BN, ReLU, Tanh."""
    return Net(nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()))


def discriminator(nc, ndf):
    """image [N,nc,32,32] -> logit [N,1,1,1]: Conv 32->16->8->4->1, BN, LeakyReLU(0.2)."""
    return Net(nn.Sequential(
        nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False)))


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
