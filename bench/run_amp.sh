#!/usr/bin/env bash
# Mixed precision on the CPU, side by side: ganfw's DC-GAN-32 step in f32 (configs/dcgan.yaml),
# f16 (configs/dcgan_amp.yaml) and bf16 (configs/dcgan_bf16.yaml), f16 once more on the layers'
# converting path (GANFW_CPU_LP=0: what amp did before the native 16-bit kernels), and PyTorch
# 1.13's step in f32 and under bf16 autocast (bench/dcgan_torch.py). All run alternately
# ROUNDS times on THREADS threads; prints the median of the per-run medians of each and the
# ratios the issue asks for (lower is better), and the CPU's SIMD features.
#
#   bench/run_amp.sh [ROUNDS=3] [THREADS=2]
#   env: BUILD_DIR (default build/), STEPS (20), WARMUP (5), BATCH (64),
#        PYTHON (/usr/bin/python3, Debian's torch)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${1:-3}
threads=${2:-2}
build=${BUILD_DIR:-$root/build}
steps=${STEPS:-20}
warmup=${WARMUP:-5}
batch=${BATCH:-64}
python=${PYTHON:-/usr/bin/python3}
bench=$build/bench/bench_dcgan_step

if [[ ! -x $bench || ! -e $build/plugins/ganfw_dcgan.so || ! -e $build/plugins/ganfw_amp.so ]]; then
  echo "# building into $build" >&2
  BUILD_DIR=$build "$root/scripts/build.sh" -DGANFW_CUDA=OFF >&2
fi

value() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
have=()
for f in avx2 fma f16c avx512f avx512_bf16 avx512_fp16 amx_bf16; do
  [[ " $flags " == *" $f "* ]] && have+=("$f")
done
echo "# DC-GAN-32 step, batch $batch, $threads thread(s), $rounds rounds of $warmup warm-up + $steps timed steps"
echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); features: ${have[*]:-none of avx2 fma f16c avx512f}"
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

names=(f32 f16 bf16 f16_convert torch_f32 torch_bf16)
declare -A med
for n in "${names[@]}"; do med[$n]=""; done
err=$(mktemp)
trap 'rm -f "$err"' EXIT
args=(--steps "$steps" --warmup "$warmup" --threads "$threads" --batch "$batch")
run() { # NAME COMMAND...: one run, its median_ms appended to med[NAME]
  local name=$1 line
  shift
  if ! line=$("$@" 2>"$err" | grep -E '^(ganfw|torch) '); then
    cat "$err" >&2
    exit 1
  fi
  echo "round $r $name: $line"
  med[$name]+="$(value median_ms "$line") "
}
for ((r = 1; r <= rounds; r++)); do
  run f32 "$bench" configs/dcgan.yaml "${args[@]}"
  run f16 "$bench" configs/dcgan_amp.yaml "${args[@]}"
  run bf16 "$bench" configs/dcgan_bf16.yaml "${args[@]}"
  run f16_convert env GANFW_CPU_LP=0 "$bench" configs/dcgan_amp.yaml "${args[@]}"
  run torch_f32 "$python" bench/dcgan_torch.py "${args[@]}"
  run torch_bf16 "$python" bench/dcgan_torch.py "${args[@]}" --autocast bf16
done

declare -A m
echo
printf '%-12s %10s\n' step "median ms"
for n in "${names[@]}"; do
  m[$n]=$(tr ' ' '\n' <<<"${med[$n]}" | grep . | median)
  printf '%-12s %10.2f\n' "$n" "${m[$n]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
echo
echo "f16 / f32                $(ratio "${m[f16]}" "${m[f32]}")"
echo "bf16 / f32               $(ratio "${m[bf16]}" "${m[f32]}")"
echo "f16 converting / f32     $(ratio "${m[f16_convert]}" "${m[f32]}")"
echo "bf16 / torch bf16        $(ratio "${m[bf16]}" "${m[torch_bf16]}")"
echo "f16 / torch bf16         $(ratio "${m[f16]}" "${m[torch_bf16]}")"
echo "f32 / torch f32          $(ratio "${m[f32]}" "${m[torch_f32]}")"
