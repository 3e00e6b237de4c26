"""PyTorch references for tests/test_ref_resnet.c: residual networks as the cnn plugin builds
them from model.stem / model.stages (the common CIFAR ResNet code: conv1, bn1, layerK.B.conv1,
..., layerK.B.shortcut = Sequential(Conv2d 1x1, BatchNorm2d) when the shape changes, then
global average pooling and `linear`), and the resgan plugin's generator and discriminator
(SNGAN-style residual up- and down-sampling blocks, without spectral norm).

Parameters are drawn in f32 (PyTorch's default initialisation, BatchNorm affine weights
perturbed so that they matter), stored in f32, and every reference is computed from them in
f64 (so the C side measures its own error) and stored in f32. Per case c:

    c.<state_dict key>                 the parameters (classifier cases)
    c.n_params, c.numel                how many parameter tensors and values
    c.x, c.w                           the input batch and the loss weights, L = sum(y * w)
    c.y, c.dx                          the output and dL/dx (train-mode BatchNorm)
    c.grad.<key>                       dL/dparam
    c.after.<buffer key>               BatchNorm running_mean / running_var after the step
    c.eval_y                           the output in eval mode after the step
and for the GAN case (G, D prefixes as tests/ref/gen_dcgan.py): c.G.<key>, c.D.<key>, c.z,
c.G.n_params, ..., c.z, c.w, c.img, c.logit, c.dimg, c.grad.G.<key>, c.grad.D.<key>, c.after.G.<key>, c.eval_img,
c.eval_logit.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import reflib


class BasicBlock(nn.Module):
    """He et al.'s basic block with an option-B (projection) shortcut."""
    expansion = 1

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (stride on the 3x3 conv, expansion 4), shortcut as above."""
    expansion = 4

    def __init__(self, cin, planes, stride):
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != out:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False),
                                          nn.BatchNorm2d(out))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """stem (conv1, bn1, relu; optional), layer1..layerK, global average pooling, then
    `linear` (no hidden layers) or `classifier` = Sequential(Linear, ReLU, ..., Linear)."""

    def __init__(self, cin, stem, stages, block, hidden, num_classes):
        super().__init__()
        self.has_stem = stem is not None
        c = cin
        if stem is not None:
            self.conv1 = nn.Conv2d(cin, stem, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(stem)
            c = stem
        for k, (planes, blocks, stride) in enumerate(stages):
            layers = []
            for b in range(blocks):
                layers.append(block(c, planes, stride if b == 0 else 1))
                c = planes * block.expansion
            setattr(self, "layer%d" % (k + 1), nn.Sequential(*layers))
        self.n_stages = len(stages)
        if hidden:
            layers = []
            for h in hidden:
                layers += [nn.Linear(c, h), nn.ReLU(True)]
                c = h
            self.classifier = nn.Sequential(*layers, nn.Linear(c, num_classes))
        else:
            self.linear = nn.Linear(c, num_classes)

    def forward(self, x):
        if self.has_stem:
            x = F.relu(self.bn1(self.conv1(x)))
        for k in range(self.n_stages):
            x = getattr(self, "layer%d" % (k + 1))(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.classifier(x) if hasattr(self, "classifier") else self.linear(x)


# name -> (input shape, stem channels or None, [(channels, blocks, stride)], block, hidden
# linear sizes, classes); the model sections are mirrored in tests/test_ref_resnet.c.
CLASSIFIER_CASES = {
    # one stage, no stem: a stride-2 block with a projection shortcut on an odd size (9 -> 5),
    # then a block with an identity shortcut
    "block": ((4, 3, 9, 9), None, [(6, 2, 2)], BasicBlock, [], 4),
    "bottleneck": ((3, 2, 8, 8), 4, [(2, 2, 1), (3, 1, 2)], Bottleneck, [5], 3),
    # He et al.'s CIFAR ResNet-20 (option-B shortcuts) on Fashion-MNIST's 28x28x1
    "resnet20": ((4, 1, 28, 28), 16, [(16, 3, 1), (32, 3, 2), (64, 3, 2)], BasicBlock, [], 10),
}


class GenBlock(nn.Module):
    """BN-ReLU-Upsample-Conv3x3-BN-ReLU-Conv3x3, shortcut Upsample-Conv1x1 (identity when
    neither the size nor the channels change). The convs have no bias: every path from them
    reaches a BatchNorm through per-channel linear maps, so a bias would get no gradient."""

    def __init__(self, cin, cout, up):
        super().__init__()
        layers = [nn.BatchNorm2d(cin), nn.ReLU()]
        if up:
            layers.append(nn.Upsample(scale_factor=2))
        layers += [nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                   nn.Conv2d(cout, cout, 3, 1, 1, bias=False)]
        self.residual = nn.Sequential(*layers)
        short = []
        if up:
            short.append(nn.Upsample(scale_factor=2))
        if up or cin != cout:
            short.append(nn.Conv2d(cin, cout, 1, 1, 0, bias=False))
        self.shortcut = nn.Sequential(*short)

    def forward(self, x):
        return self.residual(x) + self.shortcut(x)


class DisBlock(nn.Module):
    """first: Conv3x3-ReLU-Conv3x3-AvgPool, shortcut AvgPool-Conv1x1 (SNGAN's optimized
    block); else ReLU-Conv3x3-ReLU-Conv3x3-[AvgPool], shortcut Conv1x1-[AvgPool] (identity
    when neither the size nor the channels change)."""

    def __init__(self, cin, cout, down, first):
        super().__init__()
        layers = [] if first else [nn.ReLU()]
        layers += [nn.Conv2d(cin, cout, 3, 1, 1), nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, 1)]
        if down:
            layers.append(nn.AvgPool2d(2))
        self.residual = nn.Sequential(*layers)
        short = [nn.AvgPool2d(2)] if first and down else []
        if down or cin != cout:
            short.append(nn.Conv2d(cin, cout, 1, 1, 0))
        if down and not first:
            short.append(nn.AvgPool2d(2))
        self.shortcut = nn.Sequential(*short)

    def forward(self, x):
        return self.residual(x) + self.shortcut(x)


class Generator(nn.Module):
    def __init__(self, nz, c0, base, blocks, channels):
        super().__init__()
        self.c0, self.base = c0, base
        self.linear = nn.Linear(nz, c0 * base * base)
        layers, c = [], c0
        for cout, up in blocks:
            layers.append(GenBlock(c, cout, up))
            c = cout
        self.blocks = nn.Sequential(*layers)
        self.output = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, channels, 3, 1, 1),
                                    nn.Tanh())

    def forward(self, z):
        x = self.linear(torch.flatten(z, 1)).view(-1, self.c0, self.base, self.base)
        return self.output(self.blocks(x))


class Discriminator(nn.Module):
    def __init__(self, channels, blocks):
        super().__init__()
        layers, c = [], channels
        for i, (cout, down) in enumerate(blocks):
            layers.append(DisBlock(c, cout, down, i == 0))
            c = cout
        self.blocks = nn.Sequential(*layers)
        self.linear = nn.Linear(c, 1)

    def forward(self, x):
        x = F.relu(self.blocks(x))
        return self.linear(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# name -> (nz, channels, image size, generator (c0, base, [(channels, upsample)]),
# discriminator [(channels, downsample)]); mirrored in tests/test_ref_resnet.c.
GAN_CASES = {
    "resgan": (8, 1, 12, (6, 3, [(6, True), (4, True)]), [(4, True), (6, True), (6, False)]),
}


def _perturb_bn(net, g):
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.copy_(1.0 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))


def _counts(out, prefix, net):
    """prefix.n_params / prefix.numel: how many parameter tensors and values the module has,
    so the C side checks that it has no more and no fewer than PyTorch (as a strict
    load_state_dict would)."""
    params = list(net.parameters())
    out[f"{prefix}.n_params"] = torch.tensor([len(params)], dtype=torch.int64)
    out[f"{prefix}.numel"] = torch.tensor([sum(p.numel() for p in params)], dtype=torch.int64)


def _f32(t):
    return t.detach().float().contiguous().clone()


def _classifier(out, g, case, spec):
    shape, stem, stages, block, hidden, classes = spec
    net = ResNet(shape[1], stem, stages, block, hidden, classes)
    _perturb_bn(net, g)
    for key, p in net.named_parameters():
        out[f"{case}.{key}"] = _f32(p)
    _counts(out, case, net)
    x = torch.randn(shape, generator=g)
    w = torch.randn(shape[0], classes, generator=g)
    net.double()
    xd = x.double().requires_grad_(True)
    y = net(xd)
    (y * w.double()).sum().backward()
    out.update({f"{case}.x": x, f"{case}.w": w, f"{case}.y": _f32(y), f"{case}.dx": _f32(xd.grad)})
    for key, p in net.named_parameters():
        out[f"{case}.grad.{key}"] = _f32(p.grad)
    for key, b in net.named_buffers():
        if "running" in key:
            out[f"{case}.after.{key}"] = _f32(b)
    net.eval()
    with torch.no_grad():
        out[f"{case}.eval_y"] = _f32(net(x.double()))


def _gan(out, g, case, spec):
    nz, channels, size, (c0, base, gblocks), dblocks = spec
    G, D = Generator(nz, c0, base, gblocks, channels), Discriminator(channels, dblocks)
    _perturb_bn(G, g)
    for tag, net in (("G", G), ("D", D)):
        for key, p in net.named_parameters():
            out[f"{case}.{tag}.{key}"] = _f32(p)
        _counts(out, f"{case}.{tag}", net)
    z = torch.randn(4, nz, 1, 1, generator=g)
    w = torch.tensor([1.0, -0.5, 0.25, 2.0]).view(4, 1)
    G.double()
    D.double()
    img = G(z.double())
    img.retain_grad()
    logit = D(img)
    (logit * w.double()).sum().backward()
    assert img.shape[-1] == size
    out.update({f"{case}.z": z, f"{case}.w": w, f"{case}.img": _f32(img),
                f"{case}.logit": _f32(logit), f"{case}.dimg": _f32(img.grad)})
    for tag, net in (("G", G), ("D", D)):
        for key, p in net.named_parameters():
            out[f"{case}.grad.{tag}.{key}"] = _f32(p.grad)
        for key, b in net.named_buffers():
            if "running" in key:
                out[f"{case}.after.{tag}.{key}"] = _f32(b)
    G.eval()
    D.eval()
    with torch.no_grad():
        eval_img = G(z.double())
        out[f"{case}.eval_img"] = _f32(eval_img)
        out[f"{case}.eval_logit"] = _f32(D(eval_img))


def generate(out_dir):
    out = {}
    for k, (case, spec) in enumerate(CLASSIFIER_CASES.items()):
        _classifier(out, reflib.seeded(300 + k), case, spec)
    for k, (case, spec) in enumerate(GAN_CASES.items()):
        _gan(out, reflib.seeded(400 + k), case, spec)
    reflib.save(os.path.join(out_dir, "resnet.safetensors"), out)
