"""Reference for tests/test_ref_torch_interop.c: what a PyTorch user brings to ganfw.

- A torchvision-style input batch: uint8 images through ToTensor (img.float().div(255)) and
  Normalize(mean, std) (x.sub(mean).div(std) per channel, in f32), computed as torchvision
  does them (torchvision itself is not installed).
- A classifier written as a PyTorch module in the cnn plugin's layout (features =
  Sequential(Conv2d(bias=False), BatchNorm2d(eps=1e-3, momentum=0.3), ReLU, MaxPool2d(2)),
  flatten, classifier = Sequential(Linear)) whose state_dict is saved as
  safetensors.torch.save_file saves it (metadata {"format": "pt"}, the bare state_dict
  names), then one train-mode forward (logits and the running statistics after it) and an
  eval-mode forward on the normalized batch.
"""
import os

import torch
import torch.nn as nn

import reflib

MEAN = (0.4914, 0.4822, 0.4465)  # CIFAR-10's usual torchvision Normalize
STD = (0.2470, 0.2435, 0.2616)
EPS, MOMENTUM = 1e-3, 0.3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1, bias=False),
            nn.BatchNorm2d(4, eps=EPS, momentum=MOMENTUM),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(nn.Linear(4 * 4 * 4, 5))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def generate(out_dir):
    g = reflib.seeded(77)
    images = torch.randint(0, 256, (4, 3, 8, 8), generator=g, dtype=torch.int64).to(torch.uint8)
    x = images.float().div(255)  # ToTensor
    mean = torch.as_tensor(MEAN, dtype=torch.float32).view(-1, 1, 1)
    std = torch.as_tensor(STD, dtype=torch.float32).view(-1, 1, 1)
    x = x.sub(mean).div(std)  # Normalize

    net = Net()
    bn = net.features[1]
    with torch.no_grad():
        bn.weight.copy_(torch.rand(4, generator=g) + 0.5)
        bn.bias.copy_(torch.randn(4, generator=g) * 0.1)
        bn.running_mean.copy_(torch.randn(4, generator=g) * 0.2)
        bn.running_var.copy_(torch.rand(4, generator=g) + 0.5)
        bn.num_batches_tracked.fill_(7)
    reflib.save(os.path.join(out_dir, "torch_interop_pt.safetensors"),
                {k: v.clone() for k, v in net.state_dict().items()}, {"format": "pt"})

    net.train()
    with torch.no_grad():
        y_train = net(x)
    net.eval()
    with torch.no_grad():
        y_eval = net(x)
    reflib.save(os.path.join(out_dir, "torch_interop.safetensors"), {
        "images": images.to(torch.int32),
        "mean": torch.tensor(MEAN, dtype=torch.float64),
        "std": torch.tensor(STD, dtype=torch.float64),
        "x": x,
        "y_train": y_train,
        "running_mean": bn.running_mean.clone(),
        "running_var": bn.running_var.clone(),
        "num_batches_tracked": bn.num_batches_tracked.clone(),
        "y_eval": y_eval,
    })
