#!/usr/bin/env bash
# Data-parallel scaling of the DC-GAN-32 step on this machine: one process at the global
# batch against `mpirun -np 2` (32 rows per rank), alternately ROUNDS times, each a
# `ganfw compare` of WARMUP + STEPS steps; prints the medians of images/s, the step time,
# the time a rank spends in collectives (comm) and its share of the step, and the ratio of
# images/s to one process. Both use the machine's cores: one process DEVICE_THREADS threads,
# each rank DEVICE_THREADS / 2 (ganfw divides device.threads among the ranks of a node).
# SETS="--set KEY=VALUE ..." goes to both (e.g. --set dist.bucket_cap=1MiB).
#
#   bench/run_dp.sh 5 [CONFIG]        (from the repository root, after scripts/build.sh)
set -euo pipefail
rounds=${1:-5}
config=${2:-configs/dcgan.yaml}
steps=${STEPS:-10} warmup=${WARMUP:-2} threads=${DEVICE_THREADS:-$(nproc)}
bin=${GANFW:-build/ganfw}
root_flag=""
[ "$(id -u)" -eq 0 ] && root_flag="--allow-run-as-root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { # json-file key
  sed -n "s/.*\"$2\": *\([0-9.eE+-]*\).*/\1/p" "$1" | head -1
}
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "# $config, global batch from the config, $rounds rounds of $warmup warm-up + $steps steps, alternating"
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); CPU flags: $(grep -o -w -E 'avx2|fma|f16c|avx512f|avx512_bf16|avx512_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
declare -A ips step comm
for ((r = 1; r <= rounds; r++)); do
  for n in 1 2; do
    out="$tmp/r$r-$n.json"
    common=(compare "$config" --steps "$steps" --warmup "$warmup" --json "$out"
            --set device.threads="$threads" ${SETS:-} -q)
    if [ "$n" = 1 ]; then
      "$bin" "${common[@]}" > /dev/null 2>&1
    else
      mpirun --oversubscribe $root_flag -np "$n" "$bin" "${common[@]}" > /dev/null 2>&1
    fi
    ips[$n]+="$(field "$out" images_per_s) " step[$n]+="$(field "$out" step_seconds) "
    comm[$n]+="$(field "$out" comm_seconds) "
    echo "round $r, $n rank(s): $(field "$out" images_per_s) images/s, step $(field "$out" step_seconds) s, comm $(field "$out" comm_seconds) s"
  done
done
echo
printf '%-8s %10s %10s %10s %8s %8s\n' ranks images/s "step s" "comm s" "comm %" ratio
base=$(tr ' ' '\n' <<<"${ips[1]}" | grep . | median)
for n in 1 2; do
  i=$(tr ' ' '\n' <<<"${ips[$n]}" | grep . | median)
  s=$(tr ' ' '\n' <<<"${step[$n]}" | grep . | median)
  c=$(tr ' ' '\n' <<<"${comm[$n]}" | grep . | median)
  awk -v n="$n" -v i="$i" -v s="$s" -v c="$c" -v b="$base" \
    'BEGIN {printf "%-8s %10.1f %10.4f %10.4f %7.1f%% %8.3f\n", n, i, s, c, (s > 0 ? 100 * c / s : 0), i / b}'
done
