"""Reference file for tests/test_ref_safetensors.c: one tensor of every dtype the C reader
and tests/testutil.c convert (F32, F64, F16, BF16, I64, I32, U8), odd shapes (scalar, empty,
4-D, 5-D) and metadata, with values the C side recomputes exactly from their index."""
import os

import torch

import reflib


def generate(out_dir):
    g = reflib.seeded(1234)
    idx = torch.arange(24, dtype=torch.float64)
    # Exactly representable in every float dtype used below: k/4 - 3 for k in 0..23.
    exact = idx / 4 - 3
    tensors = {
        "f32": exact.to(torch.float32).reshape(2, 3, 4),
        "f64": (exact / 3).reshape(4, 6),  # not exact in f32: checks the f64 -> f32 rounding
        "f16": exact.to(torch.float16).reshape(24),
        "bf16": exact.to(torch.bfloat16).reshape(6, 4),
        "i64": (torch.arange(10, dtype=torch.int64) * 1000003 - 5000000),
        "i32": (torch.arange(7, dtype=torch.int32) * -3 + 2).reshape(7, 1),
        "u8": torch.arange(250, 256, dtype=torch.int64).to(torch.uint8),
        "scalar_f64": torch.tensor(0.1, dtype=torch.float64),
        "empty": torch.zeros(0, 3, dtype=torch.float32),
        "x5d": torch.randn(1, 2, 1, 3, 2, generator=g),
        "randn": torch.randn(3, 5, generator=g),
    }
    tensors["randn_sum"] = tensors["randn"].double().sum().reshape(1)
    reflib.save(os.path.join(out_dir, "safetensors.safetensors"), tensors,
                {"format": "pt", "writer": "tests/ref/reflib.py", "quote\"and\\slash": "ü ✓"})
