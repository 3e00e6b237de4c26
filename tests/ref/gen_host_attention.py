"""Reference file for tests/test_ref_host_attention.c: the host's ABI 1.8 ops against
PyTorch 1.13, forward and backward (autograd), inputs in f32 and results in f64 computed from
them, so that the C side can be held to its own f32 rounding:

  bmm_*       torch.bmm with every transpose combination, accumulate (c0 + a @ b), the
              gradients of a @ b, and a batch large enough to run on several threads
  sm_*        softmax / log_softmax over several dims (negative ones too), masked entries
              (-inf) included, and their input gradients
  perm_*      permute of 3-d and 4-d tensors and the gradient (dy permuted back)
  ga_*, sc_*  torch.gather along several dims with repeated indices, its gradient, and
              Tensor.scatter_add_
  att_*       SAGAN-style attention written with these ops: q, k, v [N,C,H,W] viewed as
              [N,C,HW], q and v permuted to [N,HW,C], S = q^T k * scale, P = softmax(S, -1),
              O = P v, and the gradients of q, k and v for an upstream dO
"""
import os

import torch

import reflib


def _bmm(g):
    out = {}
    a = torch.randn(3, 4, 5, generator=g)
    b = torch.randn(3, 5, 6, generator=g)
    out["a"], out["b"] = a, b
    out["at"] = a.transpose(1, 2).contiguous()  # [3,5,4]: trans_a gives a back
    out["bt"] = b.transpose(1, 2).contiguous()  # [3,6,5]
    ad, bd = a.double().requires_grad_(), b.double().requires_grad_()
    y = torch.bmm(ad, bd)
    out["y"] = y.detach()
    c0 = torch.randn(3, 4, 6, generator=g)
    out["c0"] = c0
    out["acc"] = c0.double() + y.detach()
    dy = torch.randn(3, 4, 6, generator=g)
    out["dy"] = dy
    (y * dy.double()).sum().backward()
    out["da"], out["db"] = ad.grad, bd.grad
#several matrices of more than 2 ^ 18 multiply - adds together, one past 2 ^ 21 alone
    big_a = torch.randn(6, 96, 80, generator=g)
    big_b = torch.randn(6, 80, 72, generator=g)
    out["big_a"], out["big_b"] = big_a, big_b
    out["big_y"] = torch.bmm(big_a.double(), big_b.double())
    one_a = torch.randn(1, 256, 192, generator=g)
    one_b = torch.randn(1, 200, 192, generator=g)  # used transposed
    out["one_a"], out["one_b"] = one_a, one_b
    out["one_y"] = torch.bmm(one_a.double(), one_b.double().transpose(1, 2))
    return out


SOFTMAX_CASES = (("d1", 1, False), ("dlast", -1, False), ("d0", 0, False),
                 ("log_d2", 2, True), ("log_dlast", -1, True))


def _softmax(g):
    x = torch.randn(2, 3, 4, 5, generator=g) * 3
    masked = torch.randn(4, 9, generator=g) * 3
    masked[0, 2] = masked[1, 0] = masked[1, 8] = masked[3, 4] = float("-inf")
    dy = torch.randn(2, 3, 4, 5, generator=g)
    dy_m = torch.randn(4, 9, generator=g)
    out = {"x": x, "dy": dy, "masked": masked, "dy_masked": dy_m}
    for name, dim, log in SOFTMAX_CASES:
        xd = x.double().requires_grad_()
        y = torch.log_softmax(xd, dim) if log else torch.softmax(xd, dim)
        (y * dy.double()).sum().backward()
        out[name + "_y"], out[name + "_dx"] = y.detach(), xd.grad
    xd = masked.double().requires_grad_()
    y = torch.softmax(xd, -1)
    (y * dy_m.double()).sum().backward()
    out["masked_y"], out["masked_dx"] = y.detach(), xd.grad
    return out


PERMUTE_CASES = (("p3a", (2, 3, 4), (2, 0, 1)), ("p3b", (2, 3, 4), (0, 2, 1)),
                 ("p4a", (2, 3, 4, 5), (0, 2, 3, 1)), ("p4b", (2, 3, 4, 5), (3, 1, 0, 2)),
                 ("p4neg", (2, 3, 4, 5), (0, -1, 1, 2)), ("p2", (7, 3), (1, 0)))


def _permute(g):
    out = {}
    for name, shape, perm in PERMUTE_CASES:
        x = torch.randn(*shape, generator=g).requires_grad_()
        y = x.permute(perm)
        dy = torch.randn(*y.shape, generator=g)
        (y * dy).sum().backward()
        out[name + "_x"], out[name + "_y"] = x.detach(), y.detach().contiguous()
        out[name + "_dy"], out[name + "_dx"] = dy, x.grad
    return out


GATHER_CASES = (("g1", 1, (3, 7, 4)), ("glast", -1, (3, 5, 2)), ("g0", 0, (2, 5, 4)))


def _gather(g):
    x = torch.randn(3, 5, 4, generator=g)
    out = {"x": x}
    for name, dim, ishape in GATHER_CASES:
        size = x.shape[dim]
        idx = torch.randint(0, size, ishape, generator=g)
        idx.view(-1)[:2] = size - 1  # the last index, twice at least
        xd = x.double().requires_grad_()
        y = torch.gather(xd, dim, idx)
        dy = torch.randn(*ishape, generator=g)
        (y * dy.double()).sum().backward()
        out[name + "_idx"] = idx.to(torch.int32)
        out[name + "_y"], out[name + "_dy"], out[name + "_dx"] = y.detach(), dy, xd.grad
#scatter_add_ into a tensor that already holds values
    out0 = torch.randn(3, 5, 4, generator=g)
    src = torch.randn(3, 7, 4, generator=g)
    idx = torch.randint(0, 5, (3, 7, 4), generator=g)
    out["sc_out0"], out["sc_src"], out["sc_idx"] = out0, src, idx.to(torch.int32)
    out["sc_y"] = out0.double().scatter_add(1, idx, src.double())
    return out


def _attention(g):
    N, C, H, W = 2, 6, 3, 4
    L = H * W
    q = torch.randn(N, C, H, W, generator=g)
    k = torch.randn(N, C, H, W, generator=g)
    v = torch.randn(N, C, H, W, generator=g)
    d_o = torch.randn(N, L, C, generator=g)
    scale = C ** -0.5
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    qt = qd.view(N, C, L).permute(0, 2, 1)  # [N,L,C]
    kk = kd.view(N, C, L)  # [N,C,L]
    vt = vd.view(N, C, L).permute(0, 2, 1)  # [N,L,C]
    s = torch.bmm(qt, kk) * scale
    p = torch.softmax(s, -1)
    o = torch.bmm(p, vt)  # [N,L,C]
    (o * d_o.double()).sum().backward()
    return {"q": q, "k": k, "v": v, "do": d_o, "scale": torch.tensor([scale], dtype=torch.float64),
            "p": p.detach(), "o": o.detach(), "dq": qd.grad, "dk": kd.grad, "dv": vd.grad}


def generate(out_dir):
    g = reflib.seeded(18)
    tensors = {}
    for prefix, part in (("bmm_", _bmm(g)), ("sm_", _softmax(g)), ("perm_", _permute(g)),
                         ("ga_", _gather(g)), ("att_", _attention(g))):
        for key, t in part.items():
            tensors[prefix + key] = t.contiguous()
    reflib.save(os.path.join(out_dir, "host_attention.safetensors"), tensors)
