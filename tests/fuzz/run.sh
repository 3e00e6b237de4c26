#!/usr/bin/env bash
# Fuzzes the readers: tests/fuzz/run.sh SECONDS [NAME...]
#
# Configures tests/fuzz with clang (libFuzzer + AddressSanitizer + UBSan) into
# $FUZZ_BUILD_DIR (default build-fuzz/), builds it, and runs each harness NAME (all of
# fuzzers.txt by default) for SECONDS on a scratch copy of tests/fuzz/corpus/NAME (new
# inputs never go into git), with the bounds below. Prints executions, crashes and peak RSS
# per harness (libFuzzer's -print_final_stats=1) and exits non-zero when any harness
# crashed, leaked, timed out, exceeded a memory bound or did not run; the input that did it
# is left in $FUZZ_BUILD_DIR/artifacts/NAME/ (crash-*, leak-*, timeout-*, oom-*).
#
# Bounds (environment, defaults):
#   FUZZ_TIMEOUT=1        seconds one input may take (-timeout)
#   FUZZ_MALLOC_MB=512    the largest single allocation (-malloc_limit_mb)
#   FUZZ_RSS_MB=2048      the process's resident memory (-rss_limit_mb)
# FUZZ_RUNS=N stops a harness after N executions if that comes before SECONDS (-runs).
# Without clang or its libFuzzer it says so and exits 0 (skipped), unless FUZZ_REQUIRE=1
# (CI sets it), when that is an error. FUZZ_CC picks the compiler (default clang). The
# harnesses write each input to files in a scratch directory under $FUZZ_TMPDIR (default
# /dev/shm when writable, else the build directory): a disk file system costs ten times
# the executions.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage() {
  echo "usage: tests/fuzz/run.sh SECONDS [NAME...]  (see the comment at its top)" >&2
  exit 2
}
[ $# -ge 1 ] || usage
seconds=$1
shift
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || {
  echo "fuzz: SECONDS must be a positive whole number, not '$seconds'" >&2
  usage
}
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
cc=${FUZZ_CC:-clang}
timeout_s=${FUZZ_TIMEOUT:-1}
malloc_mb=${FUZZ_MALLOC_MB:-512}
rss_mb=${FUZZ_RSS_MB:-2048}
jobs=${FUZZ_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}

skip() {
  if [ "${FUZZ_REQUIRE:-0}" = 1 ]; then
    echo "fuzz: $1, and FUZZ_REQUIRE=1: install clang with its libFuzzer runtime" \
      "(Debian: clang libclang-rt-dev; scripts/deps.sh does it)" >&2
    exit 1
  fi
  echo "fuzz: $1: fuzzing skipped (install clang and libclang-rt-dev to run it)"
  exit 0
}
command -v "$cc" >/dev/null 2>&1 || skip "no '$cc' compiler on PATH"
probe=$(mktemp -d)
scratch=""
trap 'rm -rf "$probe" ${scratch:+"$scratch"}' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
  >"$probe/probe.c"
"$cc" -fsanitize=fuzzer,address,undefined "$probe/probe.c" -o "$probe/probe" \
  >"$probe/log" 2>&1 || skip "'$cc' cannot link a libFuzzer program ($(head -c 300 "$probe/log"))"

echo "== fuzz: building the harnesses in $build"
cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_C_COMPILER="$cc" >"$probe/configure.log" 2>&1 || {
  cat "$probe/configure.log" >&2
  exit 1
}
nice cmake --build "$build" -j "$jobs" >"$probe/build.log" 2>&1 || {
  cat "$probe/build.log" >&2
  exit 1
}

mapfile -t all <"$build/fuzzers.txt"
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")
for n in "${names[@]}"; do
  printf '%s\n' "${all[@]}" | grep -qx -- "$n" || {
    echo "fuzz: no harness '$n'; the harnesses are: ${all[*]}" >&2
    exit 2
  }
done

echo "== fuzz: ${seconds} s per harness; bounds: ${timeout_s} s per input, ${malloc_mb} MiB per" \
  "allocation, ${rss_mb} MiB RSS; leaks detected"
# A 16 MiB quarantine (ASan's default is 256) keeps freed memory warm: 2.5 times the
# executions, where fresh pages otherwise cost more than the readers.
asan_options=detect_leaks=1:quarantine_size_mb=16
tmp_root=${FUZZ_TMPDIR:-}
if [ -z "$tmp_root" ]; then
  tmp_root=$build
  [ -d /dev/shm ] && [ -w /dev/shm ] && tmp_root=/dev/shm
fi
scratch=$(mktemp -d "$tmp_root/ganfw_fuzz_run.XXXXXX")
failed=0
summary=()
for n in "${names[@]}"; do
  seeds="$root/tests/fuzz/corpus/$n"
  work="$build/work/$n"
  art="$build/artifacts/$n"
  log="$build/logs/$n.log"
  rm -rf "$work" "$art"
  mkdir -p "$work" "$art" "$(dirname "$log")"
  [ -d "$seeds" ] && cp -R "$seeds/." "$work/"
  echo "-- fuzz: $n"
  rc=0
  (cd "$work" && TMPDIR="$scratch" ASAN_OPTIONS=${ASAN_OPTIONS:-$asan_options} \
    "$build/fuzz_$n" "$work" -max_total_time="$seconds" -timeout="$timeout_s" \
    -malloc_limit_mb="$malloc_mb" -rss_limit_mb="$rss_mb" -detect_leaks=1 \
    -print_final_stats=1 -artifact_prefix="$art/" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"}) >"$log" 2>&1 ||
    rc=$?
  # (a harness stopped by a timeout prints no final stats: "?")
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 ||
    true)
  peak=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  found=$(find "$art" -type f | wc -l)
  result=ok
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    result=FAILED
    failed=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|fuzz: .*check failed|ALARM|==[0-9]+== ERROR: libFuzzer)' \
      "$log" | head -5 || true
    echo "fuzz: $n exited with $rc; its log is $log; the input is:"
    find "$art" -type f | sed 's/^/  /'
    echo "  fix the reader, then copy the input into tests/fuzz/corpus/$n/ as a regression input"
  fi
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' |
    tail -1 || true)
  summary+=("$(printf '%-12s %12s %8s %8s %10s  %s' "$n" "${execs:-?}" "${secs:-$seconds}" "$found" \
    "${peak:-?}" "$result")")
done
echo "== fuzz: summary (${seconds} s each, $(uname -m), $(nproc 2>/dev/null || echo '?') cores)"
printf '%-12s %12s %8s %8s %10s  %s\n' harness executions seconds crashes "peak MiB" result
printf '%s\n' "${summary[@]}"
exit $failed
