"""The smallest activation peak that per-tensor recompute drop lists reach on a GAN config,
by the exact planner: a local search (single-node toggles to a local minimum, from the
given lists and from random starts) over `memory: [{plugin: recompute, drop: {...}}]`,
each candidate planned by `ganfw plan` on the meta backend (about 20 ms a plan).

  python3 bench/recompute_search.py [--ganfw build-a/ganfw] [--config configs/dcgan.yaml]
      [--restarts 8] [--seed 1] [--start-g 0,1,2,3,4,6,7,8,9] [--start-d 0,1,2,3,5,6,7]

Prints each local minimum (activation peak MiB, allocated peak MiB, the drop lists) and the
best. It bounds what any choice of kept tensors can do in this executor: what is left at
the floor is backward's working set (a layer's input, its output gradient and its input
gradient at once), not tapes.
"""
import argparse
import random
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ganfw", default="build-a/ganfw")
    ap.add_argument("--config", default="configs/dcgan.yaml")
    ap.add_argument("--restarts", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start-g", default="0,1,2,3,4,6,7,8,9")
    ap.add_argument("--start-d", default="0,1,2,3,5,6,7")
    a = ap.parse_args()
    cache = {}

    def plan(g, d):
        key = (tuple(sorted(g)), tuple(sorted(d)))
        if key in cache:
            return cache[key]
        mem = "memory=[{plugin: recompute, drop: {generator: [%s], discriminator: [%s]}}]" % (
            ",".join(map(str, key[0])), ",".join(map(str, key[1])))
        r = subprocess.run([a.ganfw, "plan", a.config, "--set", mem], capture_output=True, text=True)
        act = alloc = None
        for line in r.stdout.splitlines():
            if line.startswith("activation"):
                act = float(line.split()[-1])
            if line.startswith("allocated"):
                alloc = float(line.split()[-1])
        cache[key] = (act, alloc) if act is not None else (float("inf"), float("inf"))
        return cache[key]

    none = plan(set(), set())
    if none[0] == float("inf"):
        sys.exit(f"recompute_search: `{a.ganfw} plan {a.config}` with a recompute entry failed")
    gn = [i for i in range(64) if plan({i}, set())[0] != float("inf")]
    dn = [i for i in range(64) if plan(set(), {i})[0] != float("inf")]
    print(f"no drops: activation {none[0]} MiB, allocated {none[1]} MiB; droppable nodes G {gn}, D {dn}")
    start = ({int(x) for x in a.start_g.split(",") if x}, {int(x) for x in a.start_d.split(",") if x})
    rng = random.Random(a.seed)
    best = None
    for restart in range(a.restarts):
        if restart == 0:
            g, d = set(start[0]), set(start[1])
        else:
            g = {x for x in gn if rng.random() < 0.6}
            d = {x for x in dn if rng.random() < 0.6}
        cur, improved = plan(g, d), True
        while improved:
            improved = False
            moves = [("g", i) for i in gn] + [("d", i) for i in dn]
            rng.shuffle(moves)
            for w, i in moves:
                g2, d2 = set(g), set(d)
                (g2 if w == "g" else d2).symmetric_difference_update({i})
                v = plan(g2, d2)
                if v < cur:
                    g, d, cur, improved = g2, d2, v, True
        print(f"start {restart}: activation {cur[0]} MiB, allocated {cur[1]} MiB, drop G {sorted(g)} D {sorted(d)}")
        if best is None or cur < best[0]:
            best = (cur, sorted(g), sorted(d))
    print(f"best: activation {best[0][0]} MiB ({best[0][0] / none[0]:.3f}x of no drops' {none[0]}), "
          f"allocated {best[0][1]} MiB, drop G {best[1]} D {best[2]}; {len(cache)} plans")


if __name__ == "__main__":
    main()
