#!/usr/bin/env bash
# Installs the Debian packages ganfw builds and tests with; does nothing for those already
# installed, so it is safe to run again. Uses sudo when not run as root.
set -euo pipefail

# clang and libclang-rt-dev (its libFuzzer and sanitizer runtimes) build tests/fuzz.
# chromium renders memory.html headless in tests/test_trace.c (the test skips without it).
# dataset-fashion-mnist is the data of `data.dataset: fashion_mnist` (configs/cnn_fashion.yaml):
# the standard 60,000 + 10,000 images, gzipped IDX, in /usr/share/datasets/fashion-mnist.
# openmpi-bin and libopenmpi-dev run data-parallel training (`mpirun -np N ganfw CONFIG`).
# libjpeg62-turbo-dev is the JPEG decoder of image folders (libjpeg-turbo's libjpeg API, found
# by pkg-config as libjpeg); libturbojpeg0-dev its TurboJPEG API beside it; libjpeg-turbo-progs
# (cjpeg, djpeg, jpegtran) makes and inspects JPEG files by hand; python3-pil is the reference
# the JPEG tests compare decoded pixels with (tests/test_jpeg.c skips that part without it).
packages=(build-essential cmake pkg-config git libyaml-dev libpng-dev zlib1g-dev
          libjpeg62-turbo-dev libturbojpeg0-dev libjpeg-turbo-progs python3-pil
          libcunit1-dev libopenblas-dev python3-torch python3-numpy nodejs npm
          clang libclang-rt-dev dataset-fashion-mnist chromium openmpi-bin libopenmpi-dev)
# The emoji image folders (scripts/fetch_emoji.sh): cjpeg (libjpeg-turbo-progs, above) and PIL
# make their JPEG copy; PIL and torchvision read image folders on the PyTorch side
# (bench/folder_torch.py, bench/loader_torch.py).
packages+=(python3-torchvision)

have_node=0
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && have_node=1
missing=()
for p in "${packages[@]}"; do
  # A working node and npm from elsewhere (as on this kind of machine) is enough.
  if [ "$have_node" = 1 ] && { [ "$p" = nodejs ] || [ "$p" = npm ]; }; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "deps: all packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
