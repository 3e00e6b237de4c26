#!/usr/bin/env bash
# Packs a CUDA build made on this machine into one folder that tests/gpu/run.sh runs on a
# GPU machine that cannot build ganfw (no libyaml, libpng, OpenBLAS or CUnit development
# packages there): the binaries run.sh uses, the plugins, and in lib/ every shared library
# they need except glibc's, the compiler runtime's and CUDA's own (cudart, cuBLAS, cuDNN:
# the GPU machine's, found by run.sh). Builds BUILD_DIR first when needed.
#
#   tests/gpu/bundle.sh [DEST]   DEST defaults to build-gpu-bundle (git-ignored; name it in
#                                the device tool's carry)
#   then, on the GPU machine:  PREBUILT=1 BUILD_DIR=build-gpu-bundle tests/gpu/run.sh
#   env: BUILD_DIR (build-gpu), JOBS (2)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
dest=${1:-$root/build-gpu-bundle}
jobs=${JOBS:-2}

if [[ ! -e $build/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build" -DGANFW_CUDA=ON -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" -j "$jobs" --target ganfw bench_dcgan_step test_cuda_cpu_only \
  test_gpu_ops test_gpu_alloc test_gpu_dcgan ganfw_plugin_dcgan ganfw_plugin_adam \
  ganfw_plugin_amp ganfw_plugin_checkpoint ganfw_plugin_accumulate

rm -rf "$dest"
mkdir -p "$dest/tests" "$dest/bench" "$dest/plugins" "$dest/lib"
cp "$build/ganfw" "$dest/"
cp "$build/bench/bench_dcgan_step" "$dest/bench/"
cp "$build"/tests/test_gpu_* "$build/tests/test_cuda_cpu_only" "$dest/tests/"
cp "$build"/plugins/*.so "$dest/plugins/"

# The libraries to carry: resolved by ldd, minus the system's base and CUDA's.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcudnn|libnvrtc|libz\.)'
for bin in "$dest/ganfw" "$dest/bench/bench_dcgan_step" "$dest"/tests/* "$dest"/plugins/*.so; do
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  cp -L "$path" "$dest/lib/$name"
done
echo "bundle in $dest ($(du -sh "$dest" | cut -f1)):"
ls "$dest/lib"
