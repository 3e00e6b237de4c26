#!/bin/sh
# Runs bench_nn (ganfw's CPU nn kernels) and bench_nn_torch.py (PyTorch 1.13) alternately
# ROUNDS times with THREADS threads each (default 2), then prints per op the median over
# rounds of each side's per-round median and min (microseconds) and the speed-up
# torch/ganfw of both. On a loaded machine, THREADS=1 gives steadier numbers (a parallel
# region waits for a preempted thread for a whole scheduler slice).
#
#   [THREADS=n] bench/run_nn.sh [BUILD_DIR] [ROUNDS] [REPS]     (defaults: build 5 30)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-5}
reps=${3:-30}
THREADS=${THREADS:-2}
export THREADS
bin="$build/bench/bench_nn"
[ -x "$bin" ] || { echo "run_nn.sh: $bin not found; build the bench_nn target first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=1
while [ "$i" -le "$rounds" ]; do
  OMP_NUM_THREADS=$THREADS "$bin" "$reps" > "$out/ganfw.$i"
  /usr/bin/python3 "$here/bench_nn_torch.py" "$reps" > "$out/torch.$i"
  i=$((i + 1))
done
/usr/bin/python3 - "$out" "$rounds" <<'EOF'
import statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(side):
    t = {}
    for i in range(1, rounds + 1):
        for line in open("%s/%s.%d" % (out, side, i)):
            f = line.split()
            t.setdefault(f[0] + " " + f[1], []).append((float(f[2]), float(f[3])))
    return {k: (statistics.median(m for m, _ in v), statistics.median(n for _, n in v))
            for k, v in t.items()}
g, t = load("ganfw"), load("torch")
print("%-32s %10s %10s %7s | %9s %9s %7s" % ("op (us, median of %d rounds)" % rounds,
      "ganfw med", "torch med", "x", "ganfw min", "torch min", "x"))
for k in g:
    if k not in t:
        continue
    print("%-32s %10.1f %10.1f %7.2f | %9.1f %9.1f %7.2f" % (k, g[k][0], t[k][0],
          t[k][0] / g[k][0], g[k][1], t[k][1], t[k][1] / g[k][1]))
EOF
