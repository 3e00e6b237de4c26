"""References for tests/test_fid.c: the Frechet distance as pytorch-fid computes it
(pytorch_fid.fid_score.calculate_frechet_distance), in f64, with scipy's sqrtm replaced by
the eigenvalues of S1 S2 (a general, non-symmetric eigensolver: torch.linalg.eigvals), so
tr(sqrtm(S1 S2)) = sum of the square roots of those eigenvalues, real part. The C side
takes another route (symmetric eigendecompositions of S1 and of sqrt(S1) S2 sqrt(S1)).

fid.safetensors holds, with every input stored as f32 (the C side reads the same values):
  sym{k}.a [n,n] and sym{k}.w [n] (f64, ascending): symmetric matrices, some with repeated
      eigenvalues or already diagonal, and torch.linalg.eigvalsh of them;
  spd{k}.s1, spd{k}.s2 [d,d] and spd{k}.trace (f64): positive (semi-)definite pairs and
      tr(sqrtm(s1 s2)) (for the singular ones from their factors, see below), and
      spd{k}.trace_eigvals the eigvals route for them all;
  feat{k}.x1 [n1,D], feat{k}.x2 [n2,D]: feature sets, with feat{k}.mu1, mu2 [D] (numpy.mean),
      cov1, cov2 [D,D] (numpy.cov(rowvar=False), N-1) and feat{k}.fid (f64).
"""
import os

import numpy as np
import torch

import reflib


def sqrtm_trace(s1, s2):
    ev = torch.linalg.eigvals(s1 @ s2)  # complex; S1 S2 is not symmetric
    return torch.sqrt(ev).real.sum().item()


def frechet(mu1, s1, mu2, s2):
    diff = mu1 - mu2
    return (diff @ diff).item() + torch.trace(s1).item() + torch.trace(s2).item() \
        - 2 * sqrtm_trace(s1, s2)


def f32(t):
    return t.to(torch.float32)


def generate(out_dir):
    g = reflib.seeded(0)
    out = {}

    # symmetric matrices: random, clustered / repeated eigenvalues, diagonal, tiny sizes
    syms = []
    for n in (1, 2, 5, 40):
        a = torch.randn(n, n, generator=g, dtype=torch.float64)
        syms.append((a + a.T) / 2)
    q, _ = torch.linalg.qr(torch.randn(12, 12, generator=g, dtype=torch.float64))
    lam = torch.tensor([3.0] * 4 + [1.0] * 5 + [-2.0, 0.0, 0.0], dtype=torch.float64)
    syms.append(q @ torch.diag(lam) @ q.T)
    syms.append(torch.diag(torch.tensor([4.0, -1.0, 2.5, 0.0, 7.0], dtype=torch.float64)))
    for k, a in enumerate(syms):
        a32 = f32((a + a.T) / 2)
        out[f"sym{k}.a"] = a32
        out[f"sym{k}.w"] = torch.linalg.eigvalsh(a32.double())

    # positive definite pairs (full rank) and positive semi-definite ones (rank m < d); the
    # singular ones from small integer factors, so that their f32 values are exactly
    # semi-definite (a rounded singular matrix is indefinite by ~1e-7, which moves
    # tr(sqrtm) by its square root, ~3e-4, whatever computes it)
    pairs = [(1, 5, 5), (3, 10, 8), (16, 40, 33), (64, 200, 150), (24, 10, 14), (24, 7, 30)]
    for k, (d, m1, m2) in enumerate(pairs):
        if m1 < d or m2 < d:
            x1 = torch.randint(-3, 4, (m1, d), generator=g).double()
            x2 = torch.randint(-2, 5, (m2, d), generator=g).double()
            s1, s2 = x1.T @ x1, x2.T @ x2
            assert (f32(s1).double() == s1).all() and (f32(s2).double() == s2).all()
        else:
            x1 = torch.randn(m1, d, generator=g, dtype=torch.float64)
            x2 = torch.randn(m2, d, generator=g, dtype=torch.float64) * 1.7 + 0.3
            s1, s2 = x1.T @ x1 / m1, x2.T @ x2 / m2
        s1, s2 = f32((s1 + s1.T) / 2), f32((s2 + s2.T) / 2)
        out[f"spd{k}.s1"] = s1
        out[f"spd{k}.s2"] = s2
        # singular: exactly the nuclear norm of x2 x1^T (S1 S2 = x1^T x1 x2^T x2 has the
        # nonzero eigenvalues of (x2 x1^T)^T (x2 x1^T)), free of the rounding noise that
        # torch.linalg.eigvals leaves in the zero eigenvalues and sqrt magnifies
        trace = torch.linalg.svdvals(x2 @ x1.T).sum().item() if m1 < d or m2 < d \
            else sqrtm_trace(s1.double(), s2.double())
        out[f"spd{k}.trace"] = torch.tensor([trace], dtype=torch.float64)
        out[f"spd{k}.trace_eigvals"] = torch.tensor([sqrtm_trace(s1.double(), s2.double())],
                                                    dtype=torch.float64)

    # feature sets: like a classifier's (ReLU outputs with a large mean), fewer rows than
    # features (singular covariances), and two sets from one distribution
    sets = [(600, 500, 32, 50.0), (40, 30, 64, 0.0), (2000, 2000, 16, 1.0)]
    for k, (n1, n2, dim, offset) in enumerate(sets):
        x1 = torch.relu(torch.randn(n1, dim, generator=g)) + offset
        x2 = torch.relu(torch.randn(n2, dim, generator=g) * 1.2 + 0.1) + offset
        out[f"feat{k}.x1"] = x1
        out[f"feat{k}.x2"] = x2
        a1, a2 = x1.double().numpy(), x2.double().numpy()
        mu1, mu2 = np.mean(a1, axis=0), np.mean(a2, axis=0)
        c1, c2 = np.cov(a1, rowvar=False), np.cov(a2, rowvar=False)
        out[f"feat{k}.mu1"] = torch.from_numpy(mu1)
        out[f"feat{k}.mu2"] = torch.from_numpy(mu2)
        out[f"feat{k}.cov1"] = torch.from_numpy(c1)
        out[f"feat{k}.cov2"] = torch.from_numpy(c2)
        fid = frechet(torch.from_numpy(mu1), torch.from_numpy(c1), torch.from_numpy(mu2),
                      torch.from_numpy(c2))
        out[f"feat{k}.fid"] = torch.tensor([fid], dtype=torch.float64)
    reflib.save(os.path.join(out_dir, "fid.safetensors"), out)
