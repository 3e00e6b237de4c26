"""Reference file for tests/test_ref_nn.c: PyTorch's BatchNorm2d (training with the running
statistics update at momentum 0.1, and eval), ReLU, LeakyReLU(0.2), tanh, sigmoid,
max_pool2d / avg_pool2d (count_include_pad=True) and the two losses
(binary_cross_entropy_with_logits, cross_entropy, mean), forward and backward through
autograd. Inputs are stored in f32 (what the C side consumes); every reference is computed
from them in f64 and stored in f32, so the C test measures its own error, not PyTorch's."""
import os

import torch
import torch.nn.functional as F

import reflib

#name->(shape, affine) : the DC - GAN BatchNorm shapes at batch 64, a tiny N = 2 case and odd
#sizes without affine parameters.
BN_CASES = {
    "bn_tiny": ((2, 3, 4, 4), True),
    "bn_d128": ((64, 128, 8, 8), True),
    "bn_d256": ((64, 256, 4, 4), True),
    "bn_g64": ((64, 64, 16, 16), True),
    "bn_odd": ((3, 5, 7, 3), False),
}

#name->(input shape, kernel, stride, padding)
POOL_CASES = {
    "pool_k3s2p1": ((2, 3, 9, 9), (3, 3), (2, 2), (1, 1)),
    "pool_k2s2": ((2, 4, 8, 8), (2, 2), (2, 2), (0, 0)),
    "pool_k32s13p11": ((1, 2, 7, 10), (3, 2), (1, 3), (1, 1)),
}


def _grads(fn, inputs, dy):
    """fn(*inputs in f64 with grad) -> output; returns (output, [grads]) for the gradient dy."""
    leaves = [t.double().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    out.backward(dy.double())
    return out.detach(), [t.grad for t in leaves]


def _f32(d):
    return {
k: v.detach().float().contiguous() for k, v in d.items()
}

def _batchnorm(g, out):
    for name, (shape, affine) in BN_CASES.items():
        C = shape[1]
        x = torch.randn(shape, generator=g) * 1.5 + 0.5
        dy = torch.randn(shape, generator=g)
        gamma = 1.0 + 0.2 * torch.randn(C, generator=g)
        beta = 0.1 * torch.randn(C, generator=g)
        rm = 0.2 * torch.randn(C, generator=g)
        rv = 0.5 + torch.rand(C, generator=g)
        rm_out, rv_out = rm.double().clone(), rv.double().clone()
        if affine:
            fn = lambda x_, w_, b_: F.batch_norm(x_, rm_out, rv_out, w_, b_, training=True,
                                                momentum=0.1, eps=1e-5)
            y, (dx, dgamma, dbeta) = _grads(fn, [x, gamma, beta], dy)
            out.update({name + "_gamma": gamma, name + "_beta": beta,
                        name + "_dgamma": dgamma, name + "_dbeta": dbeta})
        else:
            fn = lambda x_: F.batch_norm(x_, rm_out, rv_out, None, None, training=True,
                                         momentum=0.1, eps=1e-5)
            y, (dx,) = _grads(fn, [x], dy)
        out.update({name + "_x": x, name + "_dy": dy, name + "_y": y, name + "_dx": dx,
                    name + "_rm_in": rm, name + "_rv_in": rv,
                    name + "_rm": rm_out, name + "_rv": rv_out})
        if shape[0] * shape[1] * shape[2] * shape[3] <= 4096:
            y_eval = F.batch_norm(x.double(), rm.double(), rv.double(),
                                  gamma.double() if affine else None,
                                  beta.double() if affine else None, training=False, eps=1e-5)
            out[name + "_y_eval"] = y_eval


def _activations(g, out):
    x = torch.randn(4, 8, 16, 16, generator=g) * 3.0
    flat = x.view(-1)
    flat[:6] = torch.tensor([0.0, -0.0, 1e-6, -1e-6, 30.0, -30.0])
    dy = torch.randn(x.shape, generator=g)
    out["act_x"], out["act_dy"] = x, dy
    acts = {
        "relu": torch.relu,
        "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
        "tanh": torch.tanh,
        "sigmoid": torch.sigmoid,
    }
    for name, fn in acts.items():
        y, (dx,) = _grads(fn, [x], dy)
        out["act_" + name + "_y"], out["act_" + name + "_dx"] = y, dx


def _pooling(g, out):
    for name, (shape, k, s, p) in POOL_CASES.items():
        x = torch.randn(shape, generator=g)
        xd = x.double().requires_grad_(True)
        y_max, idx = F.max_pool2d(xd, k, s, p, return_indices=True)
        dy = torch.randn(y_max.shape, generator=g)
        y_max.backward(dy.double())
        dx_max = xd.grad
        y_avg, (dx_avg,) = _grads(lambda t: F.avg_pool2d(t, k, s, p, count_include_pad=True),
                                  [x], dy)
        out.update({name + "_x": x, name + "_dy": dy, name + "_max_y": y_max,
                    name + "_max_dx": dx_max, name + "_avg_y": y_avg, name + "_avg_dx": dx_avg,
                    name + "_max_idx": idx.to(torch.int32)})


def _losses(g, out):
    dloss = torch.tensor(0.7)
    out["loss_dloss"] = dloss
#BCE with logits at the DC - GAN discriminator's batch: real labels smoothed to 0.9,
#fake labels 0, soft random targets, and logits of + -100.
    logits = torch.randn(64, generator=g) * 4.0
    extreme = torch.tensor([100.0, -100.0] * 32)
    targets = {
        "bce_smooth": (logits, torch.full((64,), 0.9)),
        "bce_zero": (logits, torch.zeros(64)),
        "bce_soft": (logits, torch.rand(64, generator=g)),
        "bce_extreme": (extreme, torch.tensor([0.9, 0.9, 1.0, 0.0] * 16)),
    }
    for name, (x, t) in targets.items():
        loss, (dx,) = _grads(lambda x_: F.binary_cross_entropy_with_logits(x_, t.double()),
                             [x], dloss)
        out.update({name + "_x": x, name + "_t": t, name + "_loss": loss.reshape(1),
                    name + "_dx": dx})
#Cross - entropy : a classifier batch, and rows with logits of + -100.
    ce = {
        "ce_mnist": torch.randn(64, 10, generator=g) * 3.0,
        "ce_extreme": torch.tensor([[100.0, -100.0, 0.0], [-100.0, 100.0, 50.0],
                                    [100.0, 100.0, -100.0]]),
    }
    for name, x in ce.items():
        labels = torch.randint(0, x.shape[1], (x.shape[0],), generator=g)
        loss, (dx,) = _grads(lambda x_: F.cross_entropy(x_, labels), [x], dloss)
        out.update({name + "_x": x, name + "_labels": labels.to(torch.int32),
                    name + "_loss": loss.reshape(1), name + "_dx": dx})
        # with label smoothing (train.label_smoothing of a classifier), as nn.CrossEntropyLoss
        for eps in (0.1, 0.3):
            # in f64: the gradient p - eps / K cancels near p = eps / K
            loss, (dx,) = _grads(
                lambda x_: F.cross_entropy(x_.double(), labels, label_smoothing=eps), [x], dloss)
            key = "%s_smooth%d" % (name, round(eps * 10))
            out.update({key + "_loss": loss.reshape(1), key + "_dx": dx})


def generate(out_dir):
    g = reflib.seeded(20240607)
    out = {}
    _batchnorm(g, out)
    _activations(g, out)
    _pooling(g, out)
    _losses(g, out)
    ints = {k: v for k, v in out.items() if v.dtype == torch.int32}
    floats = _f32({
k: v for k, v in out.items() if k not in ints})
    floats.update(ints)
    reflib.save(os.path.join(out_dir, "nn.safetensors"), floats,
                {"torch": torch.__version__, "writer": "tests/ref/gen_nn.py"})
