#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU: builds ganfw with the CUDA backend, runs
# the GPU suites (tests/gpu/test_gpu_*: every op against the CPU backend on random data, the
# allocator against cudaMalloc, DC-GAN steps on CUDA against the CPU), trains DC-GAN in f32
# and with AMP for 200 steps on CUDA (64x64 RGB, a synthetic folder data set), then times
# the training step and peak memory of configs/dcgan.yaml, dcgan_amp.yaml and
# dcgan_ckpt.yaml at 64x64 RGB, batch 64, against the same model in PyTorch on CUDA
# (bench/dcgan_torch_cuda.py), records `ganfw plan --measure` of the f32 and amp bench
# configs (where the memory goes, by category and layer), and prints one table. About 3-5
# minutes on an H200, most of it the build; every stage has a time limit so that the whole
# stays under 8 minutes.
#
#   tests/gpu/run.sh
#   env: BUILD_DIR (build-gpu), JOBS (all cores), PYTHON (python3: PyTorch with CUDA),
#        OUT (folder for the logs and the table, e.g. the device machine's $OUT),
#        PREBUILT=1 (use BUILD_DIR as it is, e.g. a tree from tests/gpu/bundle.sh made on a
#        machine that can build: no configure, no build), STEPS (50) and
#        WARMUP (10) timed and untimed bench steps, TRAIN_STEPS (200).
# Exit status: 0 when every stage passed, 1 when one failed, 77 without a GPU.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
build=${BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
python=${PYTHON:-python3}
steps=${STEPS:-50}
warmup=${WARMUP:-10}
train_steps=${TRAIN_STEPS:-200}
out=${OUT:-$build/gpu-run}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t_start=$SECONDS
failed=()

say() { echo "$*" | tee -a "$out/run.log"; }
# stage NAME LIMIT_S LOG CMD...: runs CMD with a time limit, its output into $out/LOG.
stage() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$out/$log" 2>&1
  local rc=$?
  say "# $name: exit $rc in $((SECONDS - t0)) s (log: $log)"
  [[ $rc -eq 0 ]] || failed+=("$name")
  return $rc
}

: >"$out/run.log"
if ! nvidia-smi -L >/dev/null 2>&1; then
  say "tests/gpu/run.sh: no NVIDIA GPU here (nvidia-smi -L failed); nothing to check"
  exit 77
fi
say "# $(nvidia-smi -L | head -1); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
say "# $(nproc) cores, build $build, $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# --- cuDNN and cuBLAS: the toolkit's, else the PyTorch wheels' (nvidia-cudnn-cu13, ...) ----
cmake_extra=()
wheel_lib() { # the folder of the first file named $1 under the Python's nvidia packages
  "$python" - "$1" <<'EOF' 2>/dev/null
import glob, os, sys
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
for r in roots:
    hits = sorted(glob.glob(os.path.join(r, "**", sys.argv[1]), recursive=True))
    if hits:
        print(os.path.dirname(hits[0]))
        break
EOF
}
add_lib_dir() { [[ :${LD_LIBRARY_PATH:-}: == *:$1:* ]] || export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; }
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
  ldconfig -p | grep -q "$lib" && continue
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    [[ -e $d/$lib ]] && { add_lib_dir "$d"; continue 2; }
  done
  d=$(wheel_lib "$lib")
  if [[ -n $d ]]; then
    add_lib_dir "$d"
    say "# $lib from $d"
    if [[ $lib == libcudnn.so.9 ]]; then
      cmake_extra+=(-DCUDNN_LIB="$d/$lib" -DCUDNN_INCLUDE_DIR="$(dirname "$d")/include")
    fi
  else
    say "# $lib not found: the build or the run may fail"
  fi
done

# --- build ------------------------------------------------------------------------------
if [[ ${PREBUILT:-0} != 1 ]]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  [[ -e $build/CMakeCache.txt ]] && gen=() # keep the generator of an existing tree
  if ! stage configure 120 build.log cmake -S "$root" -B "$build" "${gen[@]}" -DGANFW_CUDA=ON \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "${cmake_extra[@]}"; then
    say "configure failed: the build needs cmake, pkg-config, libyaml-dev, libpng-dev,"
    say "libjpeg62-turbo-dev (or libjpeg-dev), zlib1g-dev, libopenblas-dev and libcunit1-dev"
    say "besides CUDA, cuBLAS and cuDNN (see"
    say "$out/build.log); or build elsewhere and run with PREBUILT=1 BUILD_DIR=<that tree>"
    tail -20 "$out/build.log"
    exit 1
  fi
  if ! stage build 300 build.log cmake --build "$build" -j "$jobs"; then
    grep -E "error|Error" "$out/build.log" | head -20
    exit 1
  fi
fi
[[ -x $build/ganfw ]] || { say "no $build/ganfw: build first (or unset PREBUILT)"; exit 1; }

# Plugins and bundled libraries from the build tree (it may come from another machine:
# tests/gpu/bundle.sh), not from the paths compiled in.
export GANFW_PLUGIN_PATH="$build/plugins${GANFW_PLUGIN_PATH:+:$GANFW_PLUGIN_PATH}"
[[ -d $build/lib ]] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- GPU suites, and the device-selection suite (which must now pick CUDA) -------------------
# Run directly rather than through ctest, so that a bundled tree works too. Exit 77 (skipped:
# no device) counts as a failure here.
for t in "$build"/tests/test_gpu_* "$build"/tests/test_cuda_cpu_only; do
  [[ -x $t ]] || continue
  GANFW_TEST_BUILD_DIR=$build GANFW_SOURCE_DIR=$root stage "$(basename "$t")" 180 tests.log "$t"
done
# the worst error per op, the CUDA-vs-CPU DC-GAN steps and CUnit's verdicts, into run.log
grep -E "worst error per op|[0-9]e[-+][0-9]+$|step [0-9]: loss|FAILED|asserts|skipped" \
  "$out/tests.log" >>"$out/run.log"

# --- a synthetic 64x64 RGB folder data set (no download): soft colour blobs ------------------
data=$tmp/folder64
"$python" - "$data" <<'EOF'
import math, os, random, struct, sys, zlib
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def png(path, w, h, rows):
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))
rnd = random.Random(1)
for i in range(640):
    cx, cy, r = rnd.uniform(16, 48), rnd.uniform(16, 48), rnd.uniform(6, 20)
    col = [rnd.randrange(256) for _ in range(3)]
    rows = []
    for y in range(64):
        row = []
        for x in range(64):
            a = math.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r))
            row += [int(c * a + 20 * (1 - a)) for c in col]
        rows.append(row)
    png(os.path.join(out, "img_%04d.png" % i), 64, 64, rows)
EOF

# --- DC-GAN f32 and AMP, TRAIN_STEPS steps on CUDA -------------------------------------------
train_sets=(--set device.type=cuda --set device.cudnn_benchmark=true --set data.dataset=folder
  --set "data.path=$data" --set data.channels=3 --set data.resize=64 --set model.image_size=64
  --set train.batch_size=64 --set "train.max_steps=$train_steps" --set train.log_every=50
  --set "train.sample_every=$train_steps" --set "train.checkpoint_every=$train_steps")
declare -A train_s train_loss train_res
for cfg in dcgan dcgan_amp; do
  t0=$SECONDS
  if stage "train $cfg $train_steps steps" 120 "train_$cfg.log" "$build/ganfw" "configs/$cfg.yaml" \
    "${train_sets[@]}" --set "run.out_dir=$tmp/run_$cfg"; then
    train_s[$cfg]=$((SECONDS - t0))
    train_loss[$cfg]=$(grep -o "step $train_steps/$train_steps.*" "$out/train_$cfg.log" | head -1 |
      sed -n 's/.*\(loss_d [^ ]*\) \(loss_g [^ ]*\).*/\1 \2/p')
    train_res[$cfg]=$("$python" -c 'import json, sys
print("%.0f" % (json.load(open(sys.argv[1]))["stats"]["reserved_bytes"]["peak"] / 2**20))' \
      "$tmp/run_$cfg/memory.json" 2>/dev/null || echo "?")
  fi
done

# --- the benchmark: ganfw vs PyTorch, 64x64 RGB, batch 64 --------------------------------------
value() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
declare -A g_ms g_mib g_res t_ms t_mib t_res
for cfg in dcgan dcgan_amp dcgan_ckpt; do
  case $cfg in dcgan) mode=f32 ;; dcgan_amp) mode=amp ;; dcgan_ckpt) mode=ckpt ;; esac
  conf=$tmp/bench_$cfg.yaml
  printf 'extends: %s\ndevice: {type: cuda, cudnn_benchmark: true}\nmodel: {image_size: 64}\ndata: {channels: 3, resize: 64}\n' \
    "$root/configs/$cfg.yaml" >"$conf"
  gline="ganfw failed" tline="torch failed"
  if stage "bench ganfw $cfg" 90 bench.log "$build/bench/bench_dcgan_step" "$conf" --steps "$steps" \
    --warmup "$warmup" --batch 64 --channels 3 --size 64x64; then
    gline=$(grep '^ganfw ' "$out/bench.log" | tail -1)
    g_ms[$cfg]=$(value median_ms "$gline") g_mib[$cfg]=$(value alloc_peak_mib "$gline")
    g_res[$cfg]=$(value alloc_reserved_peak_mib "$gline")
  fi
  if stage "bench torch $cfg" 90 bench.log "$python" bench/dcgan_torch_cuda.py --mode "$mode" \
    --steps "$steps" --warmup "$warmup" --batch 64 --size 64 --nc 3 --benchmark; then
    tline=$(grep '^torch_cuda ' "$out/bench.log" | tail -1)
    t_ms[$cfg]=$(value median_ms "$tline") t_mib[$cfg]=$(value peak_alloc_mib "$tline")
    t_res[$cfg]=$(value peak_reserved_mib "$tline")
  fi
  say "# bench $cfg: ${gline:-ganfw: no result line} | ${tline:-torch: no result line}"
done

# --- where the memory goes: ganfw plan --measure of the f32 and amp bench configs (plan vs a
# real step on CUDA, per category; the per-layer table is in plan_<cfg>.log) -----------------
for cfg in dcgan dcgan_amp; do
  if stage "plan $cfg" 60 "plan_$cfg.log" "$build/ganfw" plan "$tmp/bench_$cfg.yaml" --measure \
    --set data.dataset=folder --set "data.path=$data"; then
    say "# plan --measure $cfg (MiB: plan, measured, diff):"
    grep -E "^peak (allocated|reserved|activation|workspace) " "$out/plan_$cfg.log" |
      sed 's/^/#   /' | tee -a "$out/run.log" >/dev/null
  fi
done

# --- the table ---------------------------------------------------------------------------------
{
  echo
  echo "DC-GAN 64x64 RGB, batch 64, CUDA ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)),"
  echo "median of $steps steps after $warmup; peak and reserved over those steps: the allocator's"
  echo "allocated and reserved peaks (torch: max_memory_allocated, max_memory_reserved)"
  printf '%-16s %9s %9s %6s %15s %15s %19s %19s\n' config "ganfw ms" "torch ms" "ratio" \
    "ganfw peak MiB" "torch peak MiB" "ganfw reserved MiB" "torch reserved MiB"
  for cfg in dcgan dcgan_amp dcgan_ckpt; do
    gm=${g_ms[$cfg]:-fail} tm=${t_ms[$cfg]:-fail}
    ratio=$(awk -v g="$gm" -v t="$tm" 'BEGIN { if (g + 0 > 0 && t + 0 > 0) printf "%.2f", g / t; else print "-" }')
    printf '%-16s %9s %9s %6s %15s %15s %19s %19s\n' "$cfg.yaml" "$gm" "$tm" "$ratio" \
      "${g_mib[$cfg]:-fail}" "${t_mib[$cfg]:-fail}" "${g_res[$cfg]:-fail}" "${t_res[$cfg]:-fail}"
  done
  echo
  for cfg in dcgan dcgan_amp; do
    printf '%-16s %s steps on CUDA: %s s, %s, reserved peak %s MiB\n' "train $cfg" "$train_steps" \
      "${train_s[$cfg]:-fail}" "${train_loss[$cfg]:-no final loss line}" "${train_res[$cfg]:-?}"
  done
  echo
  if ((${#failed[@]})); then
    echo "FAILED: ${failed[*]}"
  else
    echo "all stages passed"
  fi
  echo "total $((SECONDS - t_start)) s"
} | tee "$out/table.txt" | tee -a "$out/run.log"
((${#failed[@]} == 0))
