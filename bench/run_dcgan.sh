#!/usr/bin/env bash
# ganfw's DC-GAN training step against PyTorch's: runs bench_dcgan_step and
# bench/dcgan_torch.py alternately ROUNDS times on THREADS threads and prints the median of
# the per-run medians, the ratio ganfw/torch (lower is better), peak RSS and GFLOP/s.
# DC-GAN-32 on 1 channel by default; the 64x64 RGB emoji config side by side:
#   CONFIG=configs/dcgan64_emoji.yaml SIZE=64 NC=3 bench/run_dcgan.sh
#
#   bench/run_dcgan.sh [ROUNDS=3] [THREADS=2]
#   env: BUILD_DIR (default build/), STEPS (20), WARMUP (5), BATCH (64),
#        CONFIG (configs/dcgan.yaml), SIZE (32: the image side, 32 or 64, as the config's
#        model.image_size), NC (1: the image channels), PYTHON (/usr/bin/python3, Debian's torch),
#        LAYOUT (caching or planned: ganfw's device.memory_layout; default the config's),
#        TORCH (bench/dcgan_torch.py: the PyTorch twin; bench/wgan_gp_torch.py for
#        CONFIG=configs/wgan_gp_fashion.yaml)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${1:-3}
threads=${2:-2}
build=${BUILD_DIR:-$root/build}
steps=${STEPS:-20}
warmup=${WARMUP:-5}
batch=${BATCH:-64}
config=${CONFIG:-configs/dcgan.yaml}
size=${SIZE:-32}
nc=${NC:-1}
python=${PYTHON:-/usr/bin/python3}
torch_script=${TORCH:-bench/dcgan_torch.py}
bench=$build/bench/bench_dcgan_step

if [[ ! -x $bench || ! -e $build/plugins/ganfw_dcgan.so || ! -e $build/plugins/ganfw_adam.so ]]; then
  echo "# building into $build" >&2
  BUILD_DIR=$build "$root/scripts/build.sh" -DGANFW_CUDA=OFF >&2
fi

# value KEY LINE: the number after KEY= in LINE.
value() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
# median of the numbers on stdin.
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
maxof() { sort -g | tail -1; }
minof() { sort -g | head -1; }

echo "# $config against $torch_script: GAN step, batch $batch of [$nc,$size,$size], $threads thread(s), $rounds rounds of $warmup warm-up + $steps timed steps"
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
g_med=() t_med=() g_min=() t_min=() g_rss=() t_rss=() gflop=""
for ((r = 1; r <= rounds; r++)); do
  args=(--steps "$steps" --warmup "$warmup" --threads "$threads" --batch "$batch")
  # the default shape stays the scripts' own defaults, so TORCH=bench/wgan_gp_torch.py runs
  g_shape=() t_shape=()
  if [[ $size != 32 || $nc != 1 ]]; then
    g_shape=(--channels "$nc" --size "${size}x$size") t_shape=(--nc "$nc" --size "$size")
  fi
  if ! g=$("$bench" "$config" "${args[@]}" "${g_shape[@]}" ${LAYOUT:+--layout "$LAYOUT"} 2>"$err" | grep '^ganfw '); then
    cat "$err" >&2
    exit 1
  fi
  if ! t=$("$python" "$torch_script" "${args[@]}" "${t_shape[@]}" 2>"$err" | grep '^torch '); then
    cat "$err" >&2
    exit 1
  fi
  echo "round $r: $g"
  echo "round $r: $t"
  g_med+=("$(value median_ms "$g")") g_min+=("$(value min_ms "$g")") g_rss+=("$(value rss_mib "$g")")
  t_med+=("$(value median_ms "$t")") t_min+=("$(value min_ms "$t")") t_rss+=("$(value rss_mib "$t")")
  gflop=$(value step_gflop "$g")
done

gm=$(printf '%s\n' "${g_med[@]}" | median)
tm=$(printf '%s\n' "${t_med[@]}" | median)
gn=$(printf '%s\n' "${g_min[@]}" | minof)
tn=$(printf '%s\n' "${t_min[@]}" | minof)
gr=$(printf '%s\n' "${g_rss[@]}" | maxof)
tr=$(printf '%s\n' "${t_rss[@]}" | maxof)
gflops() { awk -v f="$gflop" -v m="$1" 'BEGIN {print f * 1e3 / m}'; }
echo
echo "# median: median of the $rounds per-run medians; best: the fastest single step of all runs"
printf '%-8s %12s %12s %14s %16s\n' "" "median (ms)" "best (ms)" "peak RSS MiB" "GFLOP/s (median)"
printf '%-8s %12.1f %12.1f %14.1f %16.1f\n' ganfw "$gm" "$gn" "$gr" "$(gflops "$gm")"
printf '%-8s %12.1f %12.1f %14.1f %16.1f\n' torch "$tm" "$tn" "$tr" "$(gflops "$tm")"
printf 'ratio ganfw/torch: median %.3f, best %.3f (lower is better; %s GFLOP per step)\n' \
  "$(awk -v g="$gm" -v t="$tm" 'BEGIN {print g / t}')" \
  "$(awk -v g="$gn" -v t="$tn" 'BEGIN {print g / t}')" "$gflop"
