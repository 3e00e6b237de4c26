#!/usr/bin/env bash
# The long-horizon parity check: ganfw trains CONFIG for STEPS steps and writes its initial
# weights, batches and noise (build/bench/bench_dcgan_parity); PyTorch 1.13 replays the same
# run in f64 and in f32 with two convolution algorithms (bench/dcgan_parity_torch.py), and
# the report says where ganfw's losses leave PyTorch's own f32 spread, how the parameters
# compare at the dumped steps, and whether the data, noise and initialisation are what
# PyTorch's recipe draws.
#
#   BUILD_DIR=build bench/run_parity.sh [STEPS] [CONFIG] [OUT]
#        (defaults: 300, configs/dcgan.yaml, runs/parity)
#   env: THREADS (2), DUMP (1,10,100,300), and any of ganfw's own, e.g. GANFW_CONV_IM2COL=1
#        to swap the convolution algorithm, GANFW_CPU_ISA=avx2 to swap the SIMD level.
#
# About 2 minutes for ganfw and 15 for PyTorch (f64 is the slow part) at 300 steps, 2 threads.
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build}
STEPS=${1:-300}
CONFIG=${2:-configs/dcgan.yaml}
OUT=${3:-runs/parity}
THREADS=${THREADS:-2}
DUMP=${DUMP:-1,10,100,300}
bench="$BUILD_DIR/bench/bench_dcgan_parity"
[ -x "$bench" ] || { echo "run_parity: $bench is not built (cmake --build $BUILD_DIR)" >&2; exit 1; }
mkdir -p "$OUT"
"$bench" "$CONFIG" "$OUT" --steps "$STEPS" --dump "$DUMP" --set device.threads="$THREADS"
/usr/bin/python3 bench/dcgan_parity_torch.py "$OUT" --threads "$THREADS"
