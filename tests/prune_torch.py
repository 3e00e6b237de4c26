"""Reference masks for tests/test_prune.c from torch.nn.utils.prune (PyTorch 1.13).

usage: prune_torch.py DIR
       prune_torch.py --state-dict FILE

The second form writes FILE, the state_dict of a Sequential(Conv2d(3, 4, 3, padding=1),
Flatten(), Linear(100, 3)) whose conv has l1_unstructured(amount=0.5), as safetensors (the
format written by hand: this Python need not have the safetensors package).

DIR holds the weights test_prune.c wrote as raw little-endian float32: conv.bin (a Conv2d
3->8, kernel 3: [8,3,3,3]), fc.bin (a Linear 12->5: [5,12]) and up.bin (a ConvTranspose2d
4->6, kernel 3: [4,6,3,3]). For each scenario below this writes DIR/<scenario>.<layer>.mask.bin
(and .weight.bin after a remove) and DIR/<scenario>.keys.json, the state_dict keys of the
layers in order. No safetensors: plain files.
"""
import json
import os
import sys

import numpy as np
import torch
from torch.nn.utils import prune


def load(d):
    conv = torch.nn.Conv2d(3, 8, 3)
    fc = torch.nn.Linear(12, 5)
    up = torch.nn.ConvTranspose2d(4, 6, 3)
    with torch.no_grad():
        for name, m in (("conv", conv), ("fc", fc), ("up", up)):
            w = np.fromfile(os.path.join(d, name + ".bin"), dtype="<f4")
            m.weight.copy_(torch.from_numpy(w).view_as(m.weight))
    return {"conv": conv, "fc": fc, "up": up}


def write(d, scenario, mods):
    keys = {}
    for name, m in mods.items():
        keys[name] = list(m.state_dict().keys())
        if hasattr(m, "weight_mask"):
            m.weight_mask.detach().numpy().astype("<f4").tofile(
                os.path.join(d, "%s.%s.mask.bin" % (scenario, name)))
        m.weight.detach().numpy().astype("<f4").tofile(
            os.path.join(d, "%s.%s.weight.bin" % (scenario, name)))
    with open(os.path.join(d, scenario + ".keys.json"), "w") as f:
        json.dump(keys, f)


def save_safetensors(tensors, path):
    header, data, offset = {}, b"", 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        f.write(data)


def state_dict_file(path):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Flatten(),
                            torch.nn.Linear(100, 3))
    prune.l1_unstructured(m[0], "weight", amount=0.5)
    save_safetensors(m.state_dict(), path)


def main():
    if sys.argv[1] == "--state-dict":
        state_dict_file(sys.argv[2])
        return
    d = sys.argv[1]
    # l1: a fraction, then a count relative to what remains (PruningContainer)
    m = load(d)
    prune.l1_unstructured(m["conv"], "weight", amount=0.3)
    prune.l1_unstructured(m["conv"], "weight", amount=5)
    prune.l1_unstructured(m["fc"], "weight", amount=0.5)
    prune.l1_unstructured(m["fc"], "weight", amount=0.5)
    write(d, "l1", m)
    # global over the three, twice
    m = load(d)
    params = [(m["conv"], "weight"), (m["fc"], "weight"), (m["up"], "weight")]
    prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=0.4)
    prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=0.25)
    write(d, "global", m)
    # ln_structured: L2 over output channels, then L1 over input channels on top; a count on up
    m = load(d)
    prune.ln_structured(m["conv"], "weight", amount=0.5, n=2, dim=0)
    prune.ln_structured(m["conv"], "weight", amount=0.34, n=1, dim=1)
    prune.ln_structured(m["fc"], "weight", amount=0.4, n=1, dim=0)
    prune.ln_structured(m["up"], "weight", amount=2, n=2, dim=1)
    write(d, "ln", m)
    # remove after l1
    m = load(d)
    prune.l1_unstructured(m["conv"], "weight", amount=0.3)
    prune.remove(m["conv"], "weight")
    write(d, "remove", {"conv": m["conv"]})


if __name__ == "__main__":
    main()
