#!/usr/bin/env bash
# The whole test suite: installs the packages, builds twice (release, and debug with
# AddressSanitizer + UndefinedBehaviorSanitizer) and runs every CTest suite in both,
# PyTorch reference tensors regenerated first, then fuzzes every reader for
# FUZZ_SECONDS (default 20) each (tests/fuzz/run.sh; skipped without clang's libFuzzer,
# except under CI=true, where a missing libFuzzer fails). Safe to run again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
bash "$root/scripts/deps.sh"

werror=ON
run_suite() { # build-dir cmake-args...
  local dir=$1; shift
  echo "== test: building $dir"
  BUILD_DIR="$root/$dir" bash "$root/scripts/build.sh" -DGANFW_WERROR=$werror "$@"
  echo "== test: running the suites in $dir"
  (cd "$root/$dir" && ctest --output-on-failure -j "$jobs")
}

run_suite build -DCMAKE_BUILD_TYPE=Release
# Sanitizers: leaks are errors too; OpenBLAS/OpenMP thread pools are process-lived.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DGANFW_SANITIZE=address,undefined -DGANFW_CUDA=OFF
echo "== test: all suites passed (release and sanitizer builds)"

# The short fuzz runs: a reader that crashes, leaks, hangs or over-allocates on anything
# libFuzzer reaches in 20 s fails the run (the sanitizer variables above are the suites').
if [ "${CI:-}" = true ]; then export FUZZ_REQUIRE=1; fi
env -u ASAN_OPTIONS -u UBSAN_OPTIONS FUZZ_BUILD_DIR="$root/build-fuzz" \
  bash "$root/tests/fuzz/run.sh" "${FUZZ_SECONDS:-20}"
echo "== test: done"
