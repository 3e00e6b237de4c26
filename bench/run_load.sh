#!/usr/bin/env bash
# The DC-GAN-32 step on a quiet machine and with competing CPU-bound processes, under
# OpenMP wait policies, alternately ROUNDS times: for each policy the median step quiet, the
# median under load, and their ratio (images/s under load / quiet; 1 / (1 + LOAD) would be a
# fair share of the cores). A competitor is a shell busy loop per LOAD (default 1).
#
#   bench/run_load.sh 3 "default=" "spin10k=GOMP_SPINCOUNT=10000" "passive=OMP_WAIT_POLICY=passive"
#
# Each label=ENV runs `env ENV build/bench/bench_dcgan_step --steps STEPS --warmup WARMUP
# --threads THREADS` (BENCH overrides the binary) from the repository root.
set -euo pipefail
rounds=${1:?usage: bench/run_load.sh ROUNDS LABEL=ENV ...}
shift
steps=${STEPS:-10} warmup=${WARMUP:-3} threads=${THREADS:-$(nproc)} load=${LOAD:-1}
bin=${BENCH:-build/bench/bench_dcgan_step}
labels=() envs=()
for a in "$@"; do labels+=("${a%%=*}") envs+=("${a#*=}"); done
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
value() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
pids=()
stop_load() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; pids=(); }
trap stop_load EXIT
echo "# $(nproc) cores, $threads thread(s), $load competitor(s), $rounds rounds of $warmup + $steps steps"
echo "# CPU flags: $(grep -o -w -E 'avx2|fma|f16c|avx512f|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
declare -A quiet busy
for ((r = 1; r <= rounds; r++)); do
  for k in "${!envs[@]}"; do
    # shellcheck disable=SC2086
    line=$(env ${envs[$k]} "$bin" --steps "$steps" --warmup "$warmup" --threads "$threads" 2>/dev/null | grep '^ganfw ')
    quiet[$k]+="$(value median_ms "$line") "
    for ((i = 0; i < load; i++)); do (while :; do :; done) & pids+=($!); done
    # shellcheck disable=SC2086
    line=$(env ${envs[$k]} "$bin" --steps "$steps" --warmup "$warmup" --threads "$threads" 2>/dev/null | grep '^ganfw ')
    stop_load
    busy[$k]+="$(value median_ms "$line") "
    echo "round $r ${labels[$k]}: quiet $(awk '{print $NF}' <<<"${quiet[$k]}") ms, loaded $(awk '{print $NF}' <<<"${busy[$k]}") ms"
  done
done
echo
printf '%-10s %12s %12s %18s\n' policy "quiet ms" "loaded ms" "loaded/quiet img/s"
for k in "${!envs[@]}"; do
  q=$(tr ' ' '\n' <<<"${quiet[$k]}" | grep . | median)
  b=$(tr ' ' '\n' <<<"${busy[$k]}" | grep . | median)
  awk -v l="${labels[$k]}" -v q="$q" -v b="$b" 'BEGIN {printf "%-10s %12.1f %12.1f %18.3f\n", l, q, b, q / b}'
done
