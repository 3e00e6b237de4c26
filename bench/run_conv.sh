#!/bin/sh
# Runs bench_conv (ganfw's CPU conv2d / conv_transpose2d kernels on the DC-GAN 32x32 layers)
# and bench_conv_torch.py (PyTorch 1.13) alternately ROUNDS times with THREADS threads each
# (default 2), then prints per layer the median over rounds of each side's per-round median
# forward+backward time and the speed-up torch/ganfw, and the same for the per-round minima.
# On a shared machine, THREADS=1 CLOCK=cpu (process CPU time) gives the steadiest numbers.
#
#   [THREADS=n] [CLOCK=wall|cpu] bench/run_conv.sh [BUILD_DIR] [ROUNDS] [RUNS]
#   (defaults: build 5 15)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-5}
runs=${3:-15}
THREADS=${THREADS:-2}
CLOCK=${CLOCK:-wall}
bin="$build/bench/bench_conv"
[ -x "$bin" ] || { echo "run_conv.sh: $bin not found; build the bench_conv target first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "# DC-GAN-32 conv layers, batch 64, $THREADS thread(s), $CLOCK time, $rounds rounds of $runs runs"
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
i=1
while [ "$i" -le "$rounds" ]; do
  "$bin" "$THREADS" "$runs" 64 "$CLOCK" > "$out/ganfw.$i"
  /usr/bin/python3 "$here/bench_conv_torch.py" "$THREADS" "$runs" 64 "$CLOCK" > "$out/torch.$i"
  i=$((i + 1))
done
/usr/bin/python3 - "$out" "$rounds" <<'EOF'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
row = re.compile(r"(\S.*?)\s+fwd\s+([\d.]+) ms\s+bwd\s+([\d.]+) ms\s+\(min ([\d.]+), ([\d.]+)")
def load(side):
    t = {}
    for i in range(1, rounds + 1):
        for line in open("%s/%s.%d" % (out, side, i)):
            m = row.match(line)
            if m:
                f, b, fmin, bmin = (float(x) for x in m.groups()[1:])
                t.setdefault(m.group(1), []).append((f, b, f + b, fmin + bmin))
    return {k: [statistics.median(x[j] for x in v) for j in range(4)] for k, v in t.items()}
g, t = load("ganfw"), load("torch")
print("%-24s %8s %8s %8s | %8s %8s %8s | %6s %6s %6s | %6s" % (
    "layer (ms)", "ganfw f", "b", "f+b", "torch f", "b", "f+b", "x f", "x b", "x f+b", "x min"))
tot = [0.0] * 4
for k in g:
    a, b = g[k], t[k]
    tot = [tot[0] + a[2], tot[1] + b[2], tot[2] + a[3], tot[3] + b[3]]
    print("%-24s %8.3f %8.3f %8.3f | %8.3f %8.3f %8.3f | %6.2f %6.2f %6.2f | %6.2f" % (
        k, a[0], a[1], a[2], b[0], b[1], b[2], b[0] / a[0], b[1] / a[1], b[2] / a[2],
        b[3] / a[3]))
print("%-24s %17s %8.3f | %17s %8.3f | %13s %6.2f | %6.2f" % (
    "all layers", "", tot[0], "", tot[1], "", tot[1] / tot[0], tot[3] / tot[2]))
EOF
