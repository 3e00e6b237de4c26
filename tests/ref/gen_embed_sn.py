"""Reference file for tests/test_ref_embed_sn.c: PyTorch's nn.Embedding (class ids with
repeats, forward and the weight gradient) and torch.nn.utils.spectral_norm on Linear, Conv2d
and ConvTranspose2d (dim 0, 0 and 1 as PyTorch chooses), forward and backward through
autograd in training mode from given u and v, then an eval forward. Inputs, parameters and
the starting u, v are stored in f32 (what the C side loads); every reference is computed from
them in f64 and stored in f32, so the C test measures its own error.

Embedding keys per case NAME: NAME_x (the ids, as floats, [N,1,1,1]), NAME_weight, NAME_dy,
NAME_y, NAME_dweight.

Spectral norm keys per case NAME: the state_dict of a module whose attribute `layer` is the
normalised layer, before the forward, as PyTorch names it: NAME.layer.weight_orig,
NAME.layer.bias (if any), NAME.layer.weight_u, NAME.layer.weight_v (so that the C side loads
it strictly by name with prefix NAME); then NAME_x, NAME_dy, NAME_u, NAME_v (after the
training forward's power iterations), NAME_sigma ([1], u^T W_mat v), NAME_y, NAME_dx,
NAME_dweight_orig, NAME_dbias, and NAME_y_eval (an eval forward of x afterwards: no power
iteration, the stored u and v). Cases with a second input (NAME_x2, NAME_dy2) run two
training forwards before one backward of both outputs, as a GAN's D on a real and a fake
batch does: NAME_u, NAME_v, NAME_sigma are then those after the second forward, and the
gradients are the sum over both."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import reflib

# name -> (num, dim, ids)
EMBEDDING_CASES = {
    "emb": (10, 6, [3, 0, 9, 3, 3, 7, 1]),
    "emb_one": (1, 4, [0, 0]),
    "emb_big": (100, 64, [(i * 37) % 100 for i in range(600)]),
}

# name -> (module factory, input shape, n_power_iterations, second input)
SN_CASES = {
    "sn_linear": (lambda: nn.Linear(12, 7), (5, 12), 1, False),
    "sn_linear_two": (lambda: nn.Linear(9, 4, bias=False), (3, 9), 1, True),
    "sn_conv": (lambda: nn.Conv2d(3, 6, 3, stride=1, padding=1), (2, 3, 6, 6), 1, False),
    "sn_conv_3it": (lambda: nn.Conv2d(4, 5, 4, stride=2, padding=1, bias=False), (2, 4, 8, 8), 3,
                    False),
    "sn_convt": (lambda: nn.ConvTranspose2d(6, 4, 4, stride=2, padding=1), (2, 6, 3, 3), 1,
                 False),
    "sn_convt_2it": (lambda: nn.ConvTranspose2d(5, 3, 3, stride=1, padding=0), (3, 5, 4, 4), 2,
                     True),
}


def _embedding(name, num, dim, ids, g, out):
    weight = torch.randn(num, dim, generator=g)
    x = torch.tensor(ids, dtype=torch.float32).reshape(-1, 1, 1, 1)
    m = nn.Embedding(num, dim).double()
    with torch.no_grad():
        m.weight.copy_(weight.double())
    y = m(x.long().reshape(-1))
    dy = torch.randn(y.shape, generator=g)
    y.backward(dy.double())
    out.update({name + "_x": x, name + "_weight": weight, name + "_dy": dy, name + "_y": y,
                name + "_dweight": m.weight.grad})


def _unit(n, g):
    return F.normalize(torch.randn(n, generator=g), dim=0)


def _spectral(name, make, shape, n_iter, two, g, out):
    m = make()
    dim = 1 if isinstance(m, nn.ConvTranspose2d) else 0
    weight = torch.randn(m.weight.shape, generator=g) * 0.4
    bias = torch.randn(m.bias.shape, generator=g) * 0.2 if m.bias is not None else None
    m = m.double()
    with torch.no_grad():
        m.weight.copy_(weight.double())
        if bias is not None:
            m.bias.copy_(bias.double())
    m = nn.utils.spectral_norm(m, n_power_iterations=n_iter, eps=1e-12)
    u0 = _unit(m.weight_u.numel(), g)
    v0 = _unit(m.weight_v.numel(), g)
    with torch.no_grad():
        m.weight_u.copy_(u0.double())
        m.weight_v.copy_(v0.double())
    holder = nn.Module()
    holder.layer = m
    state = {name + "." + k: t.detach().clone() for k, t in holder.state_dict().items()}
    assert sorted(state) == sorted(name + ".layer." + k for k in
                                   ["weight_orig", "weight_u", "weight_v"] +
                                   (["bias"] if bias is not None else []))
    out.update(state)
    xs = [torch.randn(shape, generator=g)]
    if two:
        xs.append(torch.randn(shape, generator=g))
    m.train()
    xds = [x.double().requires_grad_(True) for x in xs]
    ys = [m(xd) for xd in xds]
    dys = [torch.randn(y.shape, generator=g) for y in ys]
    sum((y * dy.double()).sum() for y, dy in zip(ys, dys)).backward()
    u, v = m.weight_u.detach().clone(), m.weight_v.detach().clone()
    w_orig = m.weight_orig.detach()
    w_mat = (w_orig.transpose(0, 1) if dim == 1 else w_orig).reshape(u.numel(), -1)
    sigma = torch.dot(u, torch.mv(w_mat, v)).reshape(1)
    m.eval()
    with torch.no_grad():
        y_eval = m(xs[0].double())
    assert torch.equal(u, m.weight_u) and torch.equal(v, m.weight_v)  # eval does not iterate
    keys = {"x": xs[0], "dy": dys[0], "u": u, "v": v, "sigma": sigma, "y": ys[0],
            "dx": xds[0].grad, "dweight_orig": m.weight_orig.grad, "y_eval": y_eval}
    if bias is not None:
        keys["dbias"] = m.bias.grad
    if two:
        keys.update({"x2": xs[1], "dy2": dys[1], "y2": ys[1], "dx2": xds[1].grad})
    out.update({name + "_" + k: t for k, t in keys.items()})


def generate(out_dir):
    g = reflib.seeded(20261202)
    out = {}
    for name, (num, dim, ids) in EMBEDDING_CASES.items():
        _embedding(name, num, dim, ids, g, out)
    for name, (make, shape, n_iter, two) in SN_CASES.items():
        _spectral(name, make, shape, n_iter, two, g, out)
    floats = {k: v.detach().float().contiguous() for k, v in out.items()}
    reflib.save(os.path.join(out_dir, "embed_sn.safetensors"), floats,
                {"torch": torch.__version__, "writer": "tests/ref/gen_embed_sn.py"})
