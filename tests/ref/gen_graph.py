"""Reference file for tests/test_net_graph.c: small graph nets in PyTorch 1.13, the same
wiring the C test builds through net_input / net_add / net_concat, forward and backward
through autograd in f64 from f32 inputs and parameters.

Net "g" (input x [2,3,6,6]):
    c1 = conv3x3(x, 3->4); r1 = relu(c1); c2 = conv3x3(r1, 4->4); sc = conv1x1(x, 3->4)
    a = c2 + sc; r2 = relu(a); cat = cat([r2, r1, a], 1); up = upsample2x_nearest(cat)
    bn = batchnorm(up, 12) (train mode); c3 = conv3x3 stride 2(bn, 12->2)
so x feeds two nodes, r1 and a feed two each (a both an in-place ReLU's input and a
concat's), and a three-way concat and a residual add meet. Net "dup": y = conv1x1(x) and
out = y + y (one value read twice by one node).

Keys: <net>_x, <net>_dy, <net>_y, <net>_dx, <net>_<param> and <net>_d<param> with the
state_dict names ("c1.weight"), and g_bn.running_mean / running_var after the forward."""
import os

import torch
import torch.nn.functional as F

import reflib


def _param(g, *shape, scale=0.3):
    return (scale * torch.randn(shape, generator=g)).double().requires_grad_(True)


def generate(out_dir):
    g = reflib.seeded(20261202)
    out = {}
    x = torch.randn(2, 3, 6, 6, generator=g)
    p = {
        "c1.weight": _param(g, 4, 3, 3, 3), "c1.bias": _param(g, 4),
        "c2.weight": _param(g, 4, 4, 3, 3), "c2.bias": _param(g, 4),
        "sc.weight": _param(g, 4, 3, 1, 1),
        "bn.weight": (1.0 + 0.2 * torch.randn(12, generator=g)).double().requires_grad_(True),
        "bn.bias": _param(g, 12, scale=0.1),
        "c3.weight": _param(g, 2, 12, 3, 3), "c3.bias": _param(g, 2),
    }
    rm = torch.zeros(12, dtype=torch.float64)
    rv = torch.ones(12, dtype=torch.float64)
    xd = x.double().requires_grad_(True)
    c1 = F.conv2d(xd, p["c1.weight"], p["c1.bias"], padding=1)
    r1 = F.relu(c1)
    c2 = F.conv2d(r1, p["c2.weight"], p["c2.bias"], padding=1)
    sc = F.conv2d(xd, p["sc.weight"])
    a = c2 + sc
    r2 = F.relu(a)
    cat = torch.cat([r2, r1, a], 1)
    up = F.interpolate(cat, scale_factor=2, mode="nearest")
    bn = F.batch_norm(up, rm, rv, p["bn.weight"], p["bn.bias"], training=True, momentum=0.1,
                      eps=1e-5)
    y = F.conv2d(bn, p["c3.weight"], p["c3.bias"], stride=2, padding=1)
    dy = torch.randn(y.shape, generator=g)
    y.backward(dy.double())
    out.update({"g_x": x, "g_dy": dy, "g_y": y.detach(), "g_dx": xd.grad,
                "g_bn.running_mean": rm, "g_bn.running_var": rv})
    for k, v in p.items():
        out["g_" + k] = v.detach()
        out["g_d" + k] = v.grad

    x2 = torch.randn(3, 2, 4, 4, generator=g)
    w = _param(g, 5, 2, 1, 1)
    xd2 = x2.double().requires_grad_(True)
    y1 = F.conv2d(xd2, w)
    y2 = y1 + y1
    dy2 = torch.randn(y2.shape, generator=g)
    y2.backward(dy2.double())
    out.update({"dup_x": x2, "dup_dy": dy2, "dup_y": y2.detach(), "dup_dx": xd2.grad,
                "dup_c.weight": w.detach(), "dup_dc.weight": w.grad})
    floats = {k: v.detach().float().contiguous() for k, v in out.items()}
    reflib.save(os.path.join(out_dir, "graph.safetensors"), floats,
                {"torch": torch.__version__, "writer": "tests/ref/gen_graph.py"})
