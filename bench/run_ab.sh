#!/usr/bin/env bash
# Before/after of the DC-GAN-32 step: runs several bench_dcgan_step command lines
# alternately ROUNDS times and prints each one's median of its per-run medians, its best
# step, its reserved peak and its ratio to the first (lower is better). For a change to the
# core, build the tree before it into another folder and compare the two binaries:
#
#   bench/run_ab.sh 5 "before=/tmp/before/build/bench/bench_dcgan_step" \
#       "caching=build/bench/bench_dcgan_step --layout caching" \
#       "planned=build/bench/bench_dcgan_step --layout planned"
#
# Each command gets --steps STEPS (20) --warmup WARMUP (5) --threads THREADS (2) appended;
# run it from the repository root (the configs and plugins are found from there).
set -euo pipefail
rounds=${1:?usage: bench/run_ab.sh ROUNDS LABEL=COMMAND ...}
shift
(($# >= 1)) || { echo "usage: bench/run_ab.sh ROUNDS LABEL=COMMAND ..." >&2; exit 2; }
steps=${STEPS:-20} warmup=${WARMUP:-5} threads=${THREADS:-2}
labels=() cmds=()
for a in "$@"; do
  [[ $a == *=* ]] || { echo "bench/run_ab.sh: '$a' is not LABEL=COMMAND" >&2; exit 2; }
  labels+=("${a%%=*}") cmds+=("${a#*=}")
done
value() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "# DC-GAN-32 step, $threads thread(s), $rounds rounds of $warmup warm-up + $steps timed steps, alternating"
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); CPU flags: $(grep -o -w -E 'avx2|fma|f16c|avx512f|avx512_bf16|avx512_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
declare -A med best res
for ((r = 1; r <= rounds; r++)); do
  for k in "${!cmds[@]}"; do
    # shellcheck disable=SC2086
    line=$(${cmds[$k]} --steps "$steps" --warmup "$warmup" --threads "$threads" 2>/dev/null | grep '^ganfw ') ||
      { echo "bench/run_ab.sh: '${cmds[$k]}' failed" >&2; exit 1; }
    echo "round $r ${labels[$k]}: $line"
    med[$k]+="$(value median_ms "$line") " best[$k]+="$(value min_ms "$line") "
    res[$k]=$(value alloc_reserved_peak_mib "$line")
  done
done
echo
printf '%-12s %12s %10s %14s %10s\n' "" "median (ms)" "best (ms)" "reserved MiB" "ratio"
first=""
for k in "${!cmds[@]}"; do
  m=$(tr ' ' '\n' <<<"${med[$k]}" | grep . | median)
  b=$(tr ' ' '\n' <<<"${best[$k]}" | grep . | sort -g | head -1)
  [[ -n $first ]] || first=$m
  printf '%-12s %12.1f %10.1f %14s %10.3f\n' "${labels[$k]}" "$m" "$b" "${res[$k]}" "$(awk -v m="$m" -v f="$first" 'BEGIN {print m / f}')"
done
