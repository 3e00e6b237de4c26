"""References for tests/test_ref_penalty.c: gradient penalties through a double backward, as
PyTorch computes them with torch.autograd.grad(..., create_graph=True), in f64 from f32
inputs and parameters.

For each small critic below, with input x [N,C,H,W] and an output gradient dy:
    gx = autograd.grad((D(x) * dy).sum(), x, create_graph=True)   (the input gradient)
    P  = mean over samples of (||gx_n||_2 - 1)^2                   (WGAN-GP's, lambda 1)
    P.backward()                                                   (the parameter gradients)
Keys: <net>_x, <net>_dy, <net>_gx, <net>_P, <net>_<param> and <net>_d<param> with the
state_dict names. The nets cover every layer kind with a double backward:
  lin:   conv(3,4,k3,p1,bias) leaky_relu(0.2) conv(4,2,k4,s2,p1,bias) flatten linear(18,1)
  curve: conv(3,4,k3,p1) tanh conv_transpose(4,3,k3,p1,bias) sigmoid conv(3,2,k4,s2,p1) relu
         flatten linear(18,3) then linear(3,1)
  ln:    conv(3,4,k3,p1,bias) layernorm([4,6,6]) leaky_relu(0.2) conv(4,2,k4,s2,p1) flatten
         linear(18,1)
  gn:    conv(3,4,k3,p1) groupnorm(2,4) relu conv(4,4,k4,s2,p1,bias) instancenorm(4, affine)
         tanh global_avg_pool flatten linear(4,1)
  graph: c1 = conv(3,4,k3,p1); r1 = relu(c1); c2 = conv(4,4,k3,p1); sc = conv(3,4,k1)(x);
         a = c2 + sc; cat = concat(a, r1); up = upsample2x nearest(cat);
         c3 = conv(8,2,k4,s2,p1)(up) tanh; flatten linear(72,1)
  pn:    conv(3,4,k3,p1,bias) pixelnorm(affine; the plugin layer of examples/pixelnorm)
         leaky_relu(0.2) conv(4,2,k4,s2,p1) flatten linear(18,1)
  sn:    spectral_norm(conv(3,4,k3,p1,bias)) leaky_relu(0.2) conv(4,2,k4,s2,p1) flatten
         spectral_norm(linear(18,1)): one power iteration from the stored u and v (the
         training forward's), the gradient through sigma as PyTorch's
"""
import os

import torch
import torch.nn.functional as F

import reflib


def _p(g, *shape, scale=0.3):
    return (scale * torch.randn(shape, generator=g)).double().requires_grad_(True)


def _affine(g, n):
    return ((1.0 + 0.2 * torch.randn(n, generator=g)).double().requires_grad_(True),
            _p(g, n, scale=0.1))


def _lin(g):
    p = {"c1.weight": _p(g, 4, 3, 3, 3), "c1.bias": _p(g, 4),
         "c2.weight": _p(g, 2, 4, 4, 4), "c2.bias": _p(g, 2),
         "fc.weight": _p(g, 1, 18), "fc.bias": _p(g, 1)}

    def f(x):
        h = F.leaky_relu(F.conv2d(x, p["c1.weight"], p["c1.bias"], padding=1), 0.2)
        h = F.conv2d(h, p["c2.weight"], p["c2.bias"], stride=2, padding=1)
        return F.linear(h.flatten(1), p["fc.weight"], p["fc.bias"])
    return p, f


def _curve(g):
    p = {"c1.weight": _p(g, 4, 3, 3, 3),
         "ct.weight": _p(g, 4, 3, 3, 3), "ct.bias": _p(g, 3),
         "c2.weight": _p(g, 2, 3, 4, 4),
         "fc1.weight": _p(g, 3, 18), "fc1.bias": _p(g, 3),
         "fc2.weight": _p(g, 1, 3), "fc2.bias": _p(g, 1)}

    def f(x):
        h = torch.tanh(F.conv2d(x, p["c1.weight"], padding=1))
        h = torch.sigmoid(F.conv_transpose2d(h, p["ct.weight"], p["ct.bias"], padding=1))
        h = F.relu(F.conv2d(h, p["c2.weight"], stride=2, padding=1))
        h = F.linear(h.flatten(1), p["fc1.weight"], p["fc1.bias"])
        return F.linear(h, p["fc2.weight"], p["fc2.bias"])
    return p, f


def _ln(g):
    p = {"c1.weight": _p(g, 4, 3, 3, 3), "c1.bias": _p(g, 4)}
    p["ln.weight"], p["ln.bias"] = [t.reshape(4, 6, 6).detach().requires_grad_(True)
                                    for t in _affine(g, 144)]
    p.update({"c2.weight": _p(g, 2, 4, 4, 4), "fc.weight": _p(g, 1, 18), "fc.bias": _p(g, 1)})

    def f(x):
        h = F.conv2d(x, p["c1.weight"], p["c1.bias"], padding=1)
        h = F.leaky_relu(F.layer_norm(h, [4, 6, 6], p["ln.weight"], p["ln.bias"], 1e-5), 0.2)
        h = F.conv2d(h, p["c2.weight"], stride=2, padding=1)
        return F.linear(h.flatten(1), p["fc.weight"], p["fc.bias"])
    return p, f


def _gn(g):
    p = {"c1.weight": _p(g, 4, 3, 3, 3)}
    p["gn.weight"], p["gn.bias"] = _affine(g, 4)
    p.update({"c2.weight": _p(g, 4, 4, 4, 4), "c2.bias": _p(g, 4)})
    p["in.weight"], p["in.bias"] = _affine(g, 4)
    p.update({"fc.weight": _p(g, 1, 4), "fc.bias": _p(g, 1)})

    def f(x):
        h = F.conv2d(x, p["c1.weight"], padding=1)
        h = F.relu(F.group_norm(h, 2, p["gn.weight"], p["gn.bias"], 1e-5))
        h = F.conv2d(h, p["c2.weight"], p["c2.bias"], stride=2, padding=1)
        h = torch.tanh(F.instance_norm(h, weight=p["in.weight"], bias=p["in.bias"], eps=1e-5))
        h = h.mean(dim=(2, 3))
        return F.linear(h, p["fc.weight"], p["fc.bias"])
    return p, f


def _graph(g):
    p = {"c1.weight": _p(g, 4, 3, 3, 3), "c1.bias": _p(g, 4),
         "c2.weight": _p(g, 4, 4, 3, 3), "c2.bias": _p(g, 4),
         "sc.weight": _p(g, 4, 3, 1, 1),
         "c3.weight": _p(g, 2, 8, 4, 4), "c3.bias": _p(g, 2),
         "fc.weight": _p(g, 1, 72, scale=0.1), "fc.bias": _p(g, 1)}

    def f(x):
        r1 = F.relu(F.conv2d(x, p["c1.weight"], p["c1.bias"], padding=1))
        a = F.conv2d(r1, p["c2.weight"], p["c2.bias"], padding=1) + F.conv2d(x, p["sc.weight"])
        up = F.interpolate(torch.cat([a, r1], 1), scale_factor=2, mode="nearest")
        h = torch.tanh(F.conv2d(up, p["c3.weight"], p["c3.bias"], stride=2, padding=1))
        return F.linear(h.flatten(1), p["fc.weight"], p["fc.bias"])
    return p, f


def _pixelnorm(x, w, b, eps=1e-8):
    """examples/pixelnorm: x * (mean_c x^2 + eps)^(-1/2), then * w[c] + b[c]."""
    y = x * (x.pow(2).mean(dim=1, keepdim=True) + eps).rsqrt()
    return y * w.view(1, -1, 1, 1) + b.view(1, -1, 1, 1)


def _pn(g):
    p = {"c1.weight": _p(g, 4, 3, 3, 3), "c1.bias": _p(g, 4)}
    p["pn.weight"], p["pn.bias"] = _affine(g, 4)
    p.update({"c2.weight": _p(g, 2, 4, 4, 4), "fc.weight": _p(g, 1, 18), "fc.bias": _p(g, 1)})

    def f(x):
        h = F.conv2d(x, p["c1.weight"], p["c1.bias"], padding=1)
        h = F.leaky_relu(_pixelnorm(h, p["pn.weight"], p["pn.bias"]), 0.2)
        h = F.conv2d(h, p["c2.weight"], stride=2, padding=1)
        return F.linear(h.flatten(1), p["fc.weight"], p["fc.bias"])
    return p, f


def _sn_weight(p, name, eps=1e-12):
    """torch.nn.utils.spectral_norm's training forward (dim 0, one power iteration from the
    stored u and v, under no_grad), in f64: weight_orig / sigma with sigma = u^T W_mat v."""
    w = p[name + ".weight_orig"]
    w_mat = w.reshape(w.shape[0], -1)
    with torch.no_grad():
        u, v = p[name + ".weight_u"], p[name + ".weight_v"]
        v = F.normalize(w_mat.t().mv(u), dim=0, eps=eps)
        u = F.normalize(w_mat.mv(v), dim=0, eps=eps)
    return w / torch.dot(u, w_mat.mv(v))


def _sn(g):
    p = {"c1.weight_orig": _p(g, 4, 3, 3, 3), "c1.bias": _p(g, 4)}
    p["c1.weight_u"] = F.normalize(torch.randn(4, generator=g), dim=0).double()
    p["c1.weight_v"] = F.normalize(torch.randn(27, generator=g), dim=0).double()
    p.update({"c2.weight": _p(g, 2, 4, 4, 4),
              "fc.weight_orig": _p(g, 1, 18), "fc.bias": _p(g, 1)})
    p["fc.weight_u"] = F.normalize(torch.randn(1, generator=g), dim=0).double()
    p["fc.weight_v"] = F.normalize(torch.randn(18, generator=g), dim=0).double()

    def f(x):
        h = F.leaky_relu(F.conv2d(x, _sn_weight(p, "c1"), p["c1.bias"], padding=1), 0.2)
        h = F.conv2d(h, p["c2.weight"], stride=2, padding=1)
        return F.linear(h.flatten(1), _sn_weight(p, "fc"), p["fc.bias"])
    return p, f


NETS = {"lin": _lin, "curve": _curve, "ln": _ln, "gn": _gn, "graph": _graph, "pn": _pn,
        "sn": _sn}


def generate(out_dir):
    g = reflib.seeded(20261206)
    out = {}
    for name, make in NETS.items():
        p, f = make(g)
        x = torch.randn(3, 3, 6, 6, generator=g)
        xd = x.double().requires_grad_(True)
        y = f(xd)
        dy = torch.randn(y.shape, generator=g)
        gx, = torch.autograd.grad((y * dy.double()).sum(), xd, create_graph=True)
        P = ((gx.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
        P.backward()
        out.update({f"{name}_x": x, f"{name}_dy": dy, f"{name}_gx": gx.detach(),
                    f"{name}_P": P.detach().reshape(1)})
        for k, v in p.items():
            out[f"{name}_{k}"] = v.detach()
            out[f"{name}_d{k}"] = v.grad if v.grad is not None else torch.zeros_like(v)
    tensors = {k: (v.detach().float() if not k.endswith("_P") else v.detach()).contiguous()
               for k, v in out.items()}
    reflib.save(os.path.join(out_dir, "penalty.safetensors"), tensors,
                {"torch": torch.__version__, "writer": "tests/ref/gen_penalty.py"})
