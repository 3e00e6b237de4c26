#!/usr/bin/env bash
# Configures and builds ganfw into BUILD_DIR (default build/). Extra arguments go to cmake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$root" -B "$build" "$@" >/dev/null
cmake --build "$build" -j "$jobs"
