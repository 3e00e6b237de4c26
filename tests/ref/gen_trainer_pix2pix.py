"""One step of the pix2pix trainer plugin in PyTorch, the reference for
tests/test_ref_trainer_pix2pix.c: the nets of plugins/models/pix2pix (model unet_patchgan,
state_dict names included) at a small size (1x16x16 images, channels 4, depth 3, d_channels 4,
d_layers 2) and the step of plugins/trainers/pix2pix, in its order:

    fake = G(x)                                                  (G's only forward)
    D step: loss_d = 0.5 * (BCE(D(x, y), 1) + BCE(D(x, fake.detach()), 0)), D's update
    G step: loss_g = BCE(D'(x, fake), 1) + lambda_l1 * L1(fake, y)   (D' the updated D)

with D(a, b) = PatchGAN(torch.cat([a, b], 1)); BCE with logits and L1 means over their
elements; lambda_l1 5: not the default 100, and small enough that the GAN term makes about two
thirds of G's gradient (at 50 it would make 8%, so a 1e-4 match of the sum would check it to
about 1e-3 only). Every net is in train mode, so the BatchNorm running statistics move once in
G and three times in D (real, fake, then the G step's fake). Then SGD with momentum (lr 0.01,
momentum 0.9) per net: after PyTorch's first step the momentum buffer is the gradient itself,
which is how the C side reads its gradients back.

x is data.pair's `downscaled` input of the images y (factor 2): each 2x2 block replaced by its
mean, summed in f64 in the order of core/src/data/pair.c and rounded to f32, so that it is bit
for bit the core's.

The U-Net of unet_patchgan at depth 3 (w = 4, 8, 16):
    down0.conv  Conv(1, 4, 4, 2, 1, no bias)                                16 -> 8
    down1       LeakyReLU(0.2) Conv(4, 8, no bias) BatchNorm(8)             8 -> 4
    down2       LeakyReLU(0.2) Conv(8, 16, no bias)      (the bottleneck)   4 -> 2
    up2         ReLU ConvT(16, 8, no bias) BatchNorm(8), cat([LeakyReLU(down1), up2])
    up1         ReLU ConvT(16, 4, no bias) BatchNorm(4), cat([LeakyReLU(down0), up1])
    up0         ReLU ConvT(8, 1, bias) Tanh
The PatchGAN (NLayerDiscriminator, d_layers 2): model.0 Conv(2, 4, 4, 2, 1) model.1 LeakyReLU,
model.2 Conv(4, 8, 4, 2, 1, no bias) model.3 BatchNorm model.4 LeakyReLU, model.5 Conv(8, 16,
4, 1, 1, no bias) model.6 BatchNorm model.7 LeakyReLU, model.8 Conv(16, 1, 4, 1, 1): 2x2
patch logits.

Weights: PyTorch's default init for the convs (larger than pix2pix's N(0, 0.02), so that the
signals and gradients are not tiny), BatchNorm affine maps away from (1, 0) and running
statistics far from (0, 1), num_batches_tracked 250. The weights and images are f32 (as the C
side loads them); the step is computed in f64 from them. Written ("trainer_pix2pix_step"):
"generator.*", "discriminator.*" (initial state_dicts), "y" (the batch), "x" (its pair), the
scalars "loss_d", "loss_g", "loss_g_gan", "loss_l1", "grad.<role>.*" and "after.<role>.*"
(the state_dicts after the step: parameters and BatchNorm buffers)."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from reflib import save, seeded

C, H, W, BATCH = 1, 16, 16, 4
CH, DEPTH, D_CH, D_LAYERS = 4, 3, 4, 2
LAMBDA_L1 = 5.0
LR, MOMENTUM = 0.01, 0.9
SLOPE = 0.2


def width(base, level):
    return base * min(2 ** level, 8)


def level(**modules):
    """A module holding `modules` by name: the "<level>.<what>" names of the plugin's nodes."""
    m = nn.Module()
    for name, mod in modules.items():
        m.add_module(name, mod)
    return m


class UNet(nn.Module):
    """The generator of unet_patchgan (build_generator)."""

    def __init__(self):
        super().__init__()
        self.add_module("down0", level(conv=nn.Conv2d(C, width(CH, 0), 4, 2, 1, bias=False)))
        for i in range(1, DEPTH):
            conv = nn.Conv2d(width(CH, i - 1), width(CH, i), 4, 2, 1, bias=False)
            bottom = i == DEPTH - 1
            self.add_module(f"down{i}", level(conv=conv) if bottom
                            else level(conv=conv, bn=nn.BatchNorm2d(width(CH, i))))
        for i in range(DEPTH - 1, 0, -1):
            cin = width(CH, i) if i == DEPTH - 1 else 2 * width(CH, i)
            self.add_module(f"up{i}", level(
                convt=nn.ConvTranspose2d(cin, width(CH, i - 1), 4, 2, 1, bias=False),
                bn=nn.BatchNorm2d(width(CH, i - 1))))
        self.add_module("up0", level(convt=nn.ConvTranspose2d(2 * width(CH, 0), C, 4, 2, 1)))

    def forward(self, x):
        h = self.down0.conv(x)
        skips = [None] * DEPTH
        for i in range(1, DEPTH):
            skips[i] = F.leaky_relu(h, SLOPE)  # down<i>.act, also the skip of up<i>
            lv = getattr(self, f"down{i}")
            h = lv.conv(skips[i])
            if hasattr(lv, "bn"):
                h = lv.bn(h)
        for i in range(DEPTH - 1, 0, -1):
            lv = getattr(self, f"up{i}")
            h = torch.cat([skips[i], lv.bn(lv.convt(F.relu(h)))], 1)
        return torch.tanh(self.up0.convt(F.relu(h)))


class PatchGAN(nn.Module):
    """The discriminator of unet_patchgan (build_discriminator), NLayerDiscriminator's names."""

    def __init__(self):
        super().__init__()
        prev = width(D_CH, 0)
        layers = [nn.Conv2d(2 * C, prev, 4, 2, 1), nn.LeakyReLU(SLOPE)]
        for n in range(1, D_LAYERS + 1):
            w = width(D_CH, n)
            layers += [nn.Conv2d(prev, w, 4, 2 if n < D_LAYERS else 1, 1, bias=False),
                       nn.BatchNorm2d(w), nn.LeakyReLU(SLOPE)]
            prev = w
        layers.append(nn.Conv2d(prev, 1, 4, 1, 1))
        self.model = nn.Sequential(*layers)

    def forward(self, pair):
        return self.model(pair)


def state(prefix, net):
    return {f"{prefix}.{k}": v.detach().clone() for k, v in net.state_dict().items()}


def perturb_bns(net, g):
    """BatchNorm affine maps away from (1, 0) and running statistics far from (0, 1), as a
    trained net's, so that their updates show."""
    with torch.no_grad():
        for bn in (m for m in net.modules() if isinstance(m, nn.BatchNorm2d)):
            ch = bn.num_features
            bn.weight.copy_(0.5 + torch.rand(ch, generator=g))
            bn.bias.copy_(0.3 * torch.randn(ch, generator=g))
            bn.running_mean.copy_(0.4 * torch.randn(ch, generator=g))
            bn.running_var.copy_(0.3 + 2.0 * torch.rand(ch, generator=g))
            bn.num_batches_tracked.fill_(250)


def downscaled(y):
    """data.pair kind downscaled, factor 2, as ganfw_pair_make: the f64 sum of each 2x2 block
    in the order (0, 0), (0, 1), (1, 0), (1, 1), divided by 4, rounded to f32, repeated."""
    d = y.double()
    s = ((d[..., 0::2, 0::2] + d[..., 0::2, 1::2]) + d[..., 1::2, 0::2]) + d[..., 1::2, 1::2]
    m = (s / 4).float()
    return m.repeat_interleave(2, dim=-2).repeat_interleave(2, dim=-1).contiguous()


def bce(logits, target):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, target))


def generate(out_dir):
    g = seeded(31)
    G, D = UNet(), PatchGAN()
    perturb_bns(G, g)
    perturb_bns(D, g)
    y = torch.rand(BATCH, C, H, W, generator=g) * 2 - 1  # images in [-1, 1] (Tanh's range)
    x = downscaled(y)
    tensors = {**state("generator", G), **state("discriminator", D), "x": x, "y": y}

    G.double().train()
    D.double().train()
    xd, yd = x.double(), y.double()
    opt_d = torch.optim.SGD(D.parameters(), lr=LR, momentum=MOMENTUM)
    opt_g = torch.optim.SGD(G.parameters(), lr=LR, momentum=MOMENTUM)

    fake = G(xd)
    # D step: the real pair, then the generated one (the trainer's order, which the BatchNorm
    # running statistics see)
    loss_real = bce(D(torch.cat([xd, yd], 1)), 1.0)
    loss_fake = bce(D(torch.cat([xd, fake.detach()], 1)), 0.0)
    loss_d = 0.5 * (loss_real + loss_fake)
    loss_d.backward()
    tensors.update({f"grad.discriminator.{k}": p.grad.detach().clone()
                    for k, p in D.named_parameters()})
    opt_d.step()
    # G step: D's updated weights, its input gradient only
    D.requires_grad_(False)
    loss_gan = bce(D(torch.cat([xd, fake], 1)), 1.0)
    loss_l1 = F.l1_loss(fake, yd)
    loss_g = loss_gan + LAMBDA_L1 * loss_l1
    loss_g.backward()
    tensors.update({f"grad.generator.{k}": p.grad.detach().clone()
                    for k, p in G.named_parameters()})
    opt_g.step()

    tensors.update({"loss_d": loss_d.detach().reshape(1), "loss_g": loss_g.detach().reshape(1),
                    "loss_g_gan": loss_gan.detach().reshape(1),
                    "loss_l1": loss_l1.detach().reshape(1)})
    tensors.update(state("after.generator", G))
    tensors.update(state("after.discriminator", D))
    save(os.path.join(out_dir, "trainer_pix2pix_step.safetensors"), tensors)
