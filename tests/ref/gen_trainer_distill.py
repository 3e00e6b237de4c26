"""One step of the distill trainer plugin in PyTorch, the reference for
tests/test_ref_trainer_distill.c: two nets of plugins/models/cnn (the `blocks` syntax, state_dict
names included: `features` = Conv2d without bias, BatchNorm2d, ReLU, MaxPool2d(2); then
`classifier` = the output Linear) on 1x28x28 images and 10 classes, a teacher of 4 channels
and a student of 3, and the step of plugins/trainers/distill:

    t = teacher(x)  (eval mode: BatchNorm on its running statistics, no gradient)
    s = student(x)  (train mode: BatchNorm on the batch's statistics, which it tracks)
    kd = F.kl_div(F.log_softmax(s / T, 1), F.softmax(t / T, 1), reduction='batchmean')
    ce = F.cross_entropy(s, y)
    loss = alpha * T^2 * kd + (1 - alpha) * ce      (alpha 0.7, T 3: not the defaults)

then SGD with momentum (lr 0.01, momentum 0.9) on the student alone: after PyTorch's first step
the momentum buffer is the gradient itself, which is how the C side reads its gradients back.

The teacher's BatchNorm has running statistics far from (0, 1), and its output layer is scaled
up so that its logits are confident: eval mode and the soft term both move the numbers. The
weights and inputs are f32 (as the C side loads them); the step is computed in f64 from them.
Written ("trainer_distill_step"): "teacher.*", "student.*" (initial state_dicts), "x", "y"
(class ids, f32 [N,1]), the scalars "loss", "ce", "kd", "grad.student.*" and
"after.student.*" (the state_dict after the step: parameters and BatchNorm buffers)."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from reflib import save, seeded

C, H, W, CLASSES, BATCH = 1, 28, 28, 10, 8
TEACHER_CH, STUDENT_CH = 4, 3
ALPHA, TEMPERATURE = 0.7, 3.0
LR, MOMENTUM = 0.01, 0.9


class Cnn(nn.Module):
    """model.blocks: [{channels: ch, kernel: 3, pool: max}], linear: [] of plugins/models/cnn."""

    def __init__(self, ch):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(C, ch, 3, 1, 1, bias=False), nn.BatchNorm2d(ch),
                                      nn.ReLU(), nn.MaxPool2d(2))
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(nn.Linear(ch * (H // 2) * (W // 2), CLASSES))

    def forward(self, x):
        return self.classifier(self.flatten(self.features(x)))


def state(prefix, net):
    return {f"{prefix}.{k}": v.detach().clone() for k, v in net.state_dict().items()}


def perturb_bn(bn, g, stats):
    """An affine map away from (1, 0) and, with stats, running statistics far from (0, 1)
    (as a trained net's), so that the eval mode's use of them shows in the logits."""
    ch = bn.num_features
    with torch.no_grad():
        bn.weight.copy_(0.5 + torch.rand(ch, generator=g))
        bn.bias.copy_(0.3 * torch.randn(ch, generator=g))
        if stats:
            bn.running_mean.copy_(0.4 * torch.randn(ch, generator=g))
            bn.running_var.copy_(0.3 + 2.0 * torch.rand(ch, generator=g))
            bn.num_batches_tracked.fill_(250)


def generate(out_dir):
    g = seeded(29)
    teacher, student = Cnn(TEACHER_CH), Cnn(STUDENT_CH)
    perturb_bn(teacher.features[1], g, True)
    perturb_bn(student.features[1], g, True)
    with torch.no_grad():
        teacher.classifier[0].weight.mul_(6.0)  # confident soft targets, logits of a few units
    x = torch.randn(BATCH, C, H, W, generator=g)
    y = torch.randint(0, CLASSES, (BATCH,), generator=g)
    tensors = {**state("teacher", teacher), **state("student", student), "x": x,
               "y": y.to(torch.float32).reshape(BATCH, 1)}

    teacher.double().eval()
    student.double().train()
    xd = x.double()
    with torch.no_grad():
        t = teacher(xd)
    s = student(xd)
    kd = F.kl_div(F.log_softmax(s / TEMPERATURE, 1), F.softmax(t / TEMPERATURE, 1),
                  reduction="batchmean")
    ce = F.cross_entropy(s, y)
    loss = ALPHA * TEMPERATURE ** 2 * kd + (1 - ALPHA) * ce
    loss.backward()
    tensors.update({"loss": loss.detach().reshape(1), "ce": ce.detach().reshape(1),
                    "kd": kd.detach().reshape(1)})
    tensors.update({f"grad.student.{k}": p.grad.detach().clone()
                    for k, p in student.named_parameters()})
    torch.optim.SGD(student.parameters(), lr=LR, momentum=MOMENTUM).step()
    tensors.update(state("after.student", student))
    save(os.path.join(out_dir, "trainer_distill_step.safetensors"), tensors)
