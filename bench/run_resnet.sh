#!/usr/bin/env bash
# ganfw's ResNet-20 training step (configs/resnet20_fashion.yaml, 1x28x28) against PyTorch's:
# runs bench_dcgan_step on the classifier config and bench/resnet_torch.py alternately ROUNDS
# times on THREADS threads and prints the median of the per-run medians, the best step, the
# ratios ganfw/torch (lower is better), peak RSS, GFLOP/s and ganfw's allocator peak.
#
#   bench/run_resnet.sh [ROUNDS=3] [THREADS=2]
#   env: BUILD_DIR (default build/), STEPS (20), WARMUP (5), BATCH (128),
#        PYTHON (/usr/bin/python3, Debian's torch)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${1:-3}
threads=${2:-2}
build=${BUILD_DIR:-$root/build}
steps=${STEPS:-20}
warmup=${WARMUP:-5}
batch=${BATCH:-128}
python=${PYTHON:-/usr/bin/python3}
config=configs/resnet20_fashion.yaml
bench=$build/bench/bench_dcgan_step

die() { echo "run_resnet.sh: $*" >&2; exit 1; }
for f in "$bench" "$build/plugins/ganfw_cnn.so" "$build/plugins/ganfw_sgd.so"; do
  [[ -e $f ]] || die "$f is missing; build it with: cmake --build $build" \
    "--target bench_dcgan_step ganfw_plugin_cnn ganfw_plugin_sgd"
done
[[ -x $bench ]] || die "$bench is not executable"
command -v "$python" >/dev/null || die "no python interpreter '$python' (set PYTHON)"
"$python" -c 'import torch' 2>/dev/null || die "$python cannot import torch (set PYTHON)"

# value KEY LINE: the number after KEY= in LINE.
value() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
# median of the numbers on stdin.
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
maxof() { sort -g | tail -1; }
minof() { sort -g | head -1; }
ratio() { awk -v g="$1" -v t="$2" 'BEGIN {print g / t}'; }

echo "# ResNet-20 step ($config, 1x28x28), batch $batch, $threads thread(s)," \
  "$rounds rounds of $warmup warm-up + $steps timed steps"
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
simd=$(grep -o -w -E 'avx2|fma|f16c|avx512f|avx512_bf16' /proc/cpuinfo | sort -u | xargs || true)
echo "# CPU SIMD: ${simd:-(none of avx2 fma f16c avx512f avx512_bf16)}; GANFW_CPU_ISA=${GANFW_CPU_ISA:-(unset)}"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
g_med=() t_med=() g_min=() t_min=() g_rss=() t_rss=() g_alloc=() gflop=""
args=(--steps "$steps" --warmup "$warmup" --threads "$threads" --batch "$batch")
for ((r = 1; r <= rounds; r++)); do
  if ! g=$("$bench" "$config" --channels 1 --size 28x28 "${args[@]}" 2>"$err" | grep '^ganfw '); then
    cat "$err" >&2
    die "bench_dcgan_step failed"
  fi
  ((r > 1)) || sed -n 's/^ganfw: cnn: .* \([0-9]*\) parameters.*/# ganfw parameters \1/p' "$err"
  if ! t=$("$python" bench/resnet_torch.py "${args[@]}" 2>"$err"); then
    cat "$err" >&2
    die "resnet_torch.py failed"
  fi
  ((r > 1)) || sed -n 's/^# parameters/# torch parameters/p' <<<"$t"
  t=$(grep '^torch ' <<<"$t") || die "$python bench/resnet_torch.py printed no 'torch ' line"
  echo "round $r: $g"
  echo "round $r: $t"
  g_med+=("$(value median_ms "$g")") g_min+=("$(value min_ms "$g")") g_rss+=("$(value rss_mib "$g")")
  t_med+=("$(value median_ms "$t")") t_min+=("$(value min_ms "$t")") t_rss+=("$(value rss_mib "$t")")
  g_alloc+=("$(value alloc_peak_mib "$g")")
  gflop=$(value step_gflop "$g")
done

gm=$(printf '%s\n' "${g_med[@]}" | median)
tm=$(printf '%s\n' "${t_med[@]}" | median)
gn=$(printf '%s\n' "${g_min[@]}" | minof)
tn=$(printf '%s\n' "${t_min[@]}" | minof)
gr=$(printf '%s\n' "${g_rss[@]}" | maxof)
tr=$(printf '%s\n' "${t_rss[@]}" | maxof)
ga=$(printf '%s\n' "${g_alloc[@]}" | maxof)
gflops() { awk -v f="$gflop" -v m="$1" 'BEGIN {print f * 1e3 / m}'; }
echo
echo "# median: median of the $rounds per-run medians; best: the fastest single step of all runs"
printf '%-8s %12s %12s %14s %16s\n' "" "median (ms)" "best (ms)" "peak RSS MiB" "GFLOP/s (median)"
printf '%-8s %12.1f %12.1f %14.1f %16.1f\n' ganfw "$gm" "$gn" "$gr" "$(gflops "$gm")"
printf '%-8s %12.1f %12.1f %14.1f %16.1f\n' torch "$tm" "$tn" "$tr" "$(gflops "$tm")"
printf 'ratio ganfw/torch: median %.3f, best %.3f (lower is better; %s GFLOP per step)\n' \
  "$(ratio "$gm" "$tm")" "$(ratio "$gn" "$tn")" "$gflop"
printf 'ganfw allocator peak: %s MiB (alloc_peak_mib, the largest over the runs)\n' "$ga"
