"""Writes the PyTorch reference tensors that the test_ref_* suites compare against.

Usage: /usr/bin/python3 tests/ref/generate.py OUT_DIR
(ctest runs it first as the test `ref_generate`, with OUT_DIR = <build>/tests/ref, and sets
GANFW_REF_DIR to that folder for the suites.)

Adding a reference: create tests/ref/gen_<name>.py defining

    def generate(out_dir):
        g = reflib.seeded(0)
        x = torch.randn(4, 3, generator=g)
        reflib.save(os.path.join(out_dir, "<name>.safetensors"), {"x": x, "y": f(x)})

and read it in tests/test_ref_<name>.c with gt_ref_open("<name>") and gt_ref_f32(...).
Every gen_*.py in this folder is imported (sorted by file name) and its generate(out_dir)
called; use a generator from reflib.seeded() so outputs do not depend on module order,
keep tensors small (the whole run should take seconds), and store f64 where the C side
needs more precision than f32 (gt_ref_f32/gt_ref_scalar convert).
"""
import glob
import importlib
import os
import sys
import time
import traceback


def main(argv):
    if len(argv) != 2:
        print("usage: /usr/bin/python3 tests/ref/generate.py OUT_DIR", file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch not found: install python3-torch (apt-get install python3-torch) and "
              "run with /usr/bin/python3 (this interpreter is %s)" % sys.executable,
              file=sys.stderr)
        return 1
    out_dir = os.path.abspath(argv[1])
    os.makedirs(out_dir, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
    modules = sorted(os.path.splitext(os.path.basename(p))[0]
                     for p in glob.glob(os.path.join(here, "gen_*.py")))
    if not modules:
        print("generate.py: no gen_*.py modules in %s" % here, file=sys.stderr)
        return 1
    for name in modules:
        start = time.time()
        try:
            module = importlib.import_module(name)
            if not hasattr(module, "generate"):
                raise AttributeError("%s.py defines no generate(out_dir)" % name)
            module.generate(out_dir)
        except Exception:
            traceback.print_exc()
            print("generate.py: %s failed (see the traceback above)" % name, file=sys.stderr)
            return 1
        print("%-28s ok  %.2fs" % (name, time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
