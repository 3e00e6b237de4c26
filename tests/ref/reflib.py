"""Helpers for the PyTorch reference generators (tests/ref/gen_*.py): a safetensors writer
that needs only torch (the `safetensors` package is not installed) and seeding.

    from reflib import save, seeded
    g = seeded(0)
    x = torch.randn(2, 3, generator=g)
    save(os.path.join(out_dir, "conv2d.safetensors"), {"x": x, "y": f(x)}, {"note": "..."})
"""
import json
import os
import struct
import tempfile

import torch

# torch dtype -> (safetensors name, element size). Read by the C side (core/src/io/safetensors.c).
_DTYPES = {
    torch.float32: ("F32", 4),
    torch.float64: ("F64", 8),
    torch.float16: ("F16", 2),
    torch.bfloat16: ("BF16", 2),
    torch.int64: ("I64", 8),
    torch.int32: ("I32", 4),
    torch.uint8: ("U8", 1),
    torch.bool: ("BOOL", 1),
}


def _raw_bytes(t):
    """The little-endian bytes of a contiguous CPU tensor (works for bf16 too, which numpy
    lacks, by viewing the storage as bytes)."""
    t = t.detach().to("cpu").contiguous()
    if t.numel() == 0:
        return b""
    flat = t.reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    # view(torch.uint8) reinterprets the storage (little-endian on every host torch runs on).
    return flat.view(torch.uint8).numpy().tobytes()


def save(path, tensors, metadata=None):
    """Writes `tensors` (dict name -> torch.Tensor) and optional `metadata` (dict str -> str)
    to `path` in the safetensors format: an 8-byte little-endian header length, a JSON header
    padded with spaces to a multiple of 8, then the raw data. Tensors are laid out by
    decreasing element size (then name), so each one is aligned in the file. The file is
    written to a temporary file in the same directory and renamed into place."""
    if not isinstance(tensors, dict):
        raise TypeError("save: tensors must be a dict name -> torch.Tensor")
    entries = []
    for name, t in tensors.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise ValueError(f"save: bad tensor name {name!r}")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"save: {name!r} is a {type(t).__name__}, not a torch.Tensor")
        if t.dtype not in _DTYPES:
            raise TypeError(f"save: {name!r} has dtype {t.dtype}, which has no safetensors name "
                            f"here (use one of {sorted(str(d) for d in _DTYPES)})")
        dtype, size = _DTYPES[t.dtype]
        entries.append((size, name, dtype, list(t.shape), _raw_bytes(t)))
    entries.sort(key=lambda e: (-e[0], e[1]))

    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("save: metadata keys and values must be strings")
        header["__metadata__"] = dict(metadata)
    offset = 0
    for size, name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    hbytes = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)

    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(hbytes)))
            f.write(hbytes)
            for e in entries:
                f.write(e[4])
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def seeded(seed):
    """Seeds torch's global RNG and returns a torch.Generator seeded the same way, so a
    generator's output does not depend on what other modules drew before."""
    torch.manual_seed(seed)
    g = torch.Generator()
    g.manual_seed(seed)
    return g


_NAMES = {name: (dtype, size) for dtype, (name, size) in _DTYPES.items()}


def load(path):
    """The tensors of a safetensors file as a dict name -> torch.Tensor (CPU, copies) and its
    metadata dict; refuses a malformed file naming it."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if 8 + hlen > len(raw):
        raise ValueError(f"{path}: header length {hlen} past the end of the file")
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + hlen
    tensors = {}
    for name, e in header.items():
        if e["dtype"] not in _NAMES:
            raise ValueError(f"{path}: tensor {name!r} has dtype {e['dtype']}, unknown here")
        dtype, size = _NAMES[e["dtype"]]
        lo, hi = e["data_offsets"]
        numel = 1
        for d in e["shape"]:
            numel *= d
        if hi - lo != numel * size or base + hi > len(raw):
            raise ValueError(f"{path}: tensor {name!r} has a bad extent")
        buf = bytearray(raw[base + lo:base + hi])
        t = torch.frombuffer(buf, dtype=dtype) if numel else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(e["shape"]).clone()
    return tensors, meta
