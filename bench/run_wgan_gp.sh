#!/usr/bin/env bash
# WGAN-GP (configs/wgan_gp_fashion.yaml) against the WGAN with weight clipping
# (configs/dcgan_wgan.yaml's recipe, on the same Fashion-MNIST at 32x32) after the same
# number of steps, over several seeds: every generator judged by `ganfw score` against one
# Fashion-MNIST classifier (configs/cnn_fashion.yaml at data.resize=32, 2 epochs) on 10,000
# samples, with each run's training time per step and peak allocated memory, and a sample
# grid per variant (seed 1).
#
#   BUILD_DIR=build bench/run_wgan_gp.sh [SEEDS...]          (default: 1 2)
#   env: VARIANTS="gp clip"  STEPS=1500  THREADS=2  OUT=runs/wgan_gp  CSV=OUT/wgan_gp.csv
#
# Run from the repository root after scripts/setup.sh. What is already trained and scored is
# kept, so an interrupted run continues where it stopped. Writes CSV
# (variant,seed,fid,inception,s_per_step,peak_mib) and prints the means over the seeds.
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-runs/wgan_gp}
STEPS=${STEPS:-1500}
THREADS=${THREADS:-2}
VARIANTS=${VARIANTS:-gp clip}
SEEDS=("$@")
[ ${#SEEDS[@]} -gt 0 ] || SEEDS=(1 2)
ganfw="$BUILD_DIR/ganfw"
[ -x "$ganfw" ] || { echo "run_wgan_gp: $ganfw is not built (bash scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$OUT"
fashion=/usr/share/datasets/fashion-mnist # Debian's dataset-fashion-mnist

classifier="$OUT/cnn_fashion32/checkpoints/best.safetensors"
if [ ! -f "$classifier" ]; then
  echo "run_wgan_gp: training the judging classifier into $OUT/cnn_fashion32"
  "$ganfw" -q configs/cnn_fashion.yaml --set data.resize=32 --set train.epochs=2 \
    --set run.out_dir="$OUT/cnn_fashion32" --set device.threads="$THREADS"
fi

# The config and the lines that make variant $1 (each prints one argument per line).
args_of() {
  case "$1" in
    gp) echo configs/wgan_gp_fashion.yaml ;;
    clip) printf '%s\n' configs/dcgan_wgan.yaml --set data.dataset=fashion_mnist \
      --set data.path="$fashion" ;;
    *) echo "run_wgan_gp: unknown variant '$1' (gp or clip)" >&2; exit 2 ;;
  esac
}

csv=${CSV:-$OUT/wgan_gp.csv}
echo "variant,seed,fid,inception,s_per_step,peak_mib" > "$csv.tmp"
for s in "${SEEDS[@]}"; do
  for v in $VARIANTS; do
    dir="$OUT/${v}_s$s"
    ckpt=$(printf '%s/checkpoints/step_%08d.safetensors' "$dir" "$STEPS")
    mapfile -t a < <(args_of "$v")
    if [ ! -f "$ckpt" ]; then
      "$ganfw" "${a[@]}" --set seed="$s" --set train.max_steps="$STEPS" \
        --set run.out_dir="$dir" --set device.threads="$THREADS" \
        --set train.sample_every=0 --set train.checkpoint_every="$STEPS" > "$dir.log" 2>&1
    fi
    scored="$OUT/score_${v}_s$s.txt"
    if [ ! -s "$scored" ] || [ "$ckpt" -nt "$scored" ] || [ "$classifier" -nt "$scored" ]; then
      "$ganfw" -q score "$ckpt" --seed "$s" --classifier "$classifier" > "$scored.tmp"
      mv "$scored.tmp" "$scored"
    fi
    [ "$s" = "${SEEDS[0]}" ] && "$ganfw" -q sample "$ckpt" -n 64 -o "$OUT/grid_$v.png"
    report=$(cat "$scored")
    fid=$(sed -n 's/^classifier FID: \([0-9.]*\).*/\1/p' <<< "$report")
    is=$(sed -n 's/^inception score: \([0-9.]*\).*/\1/p' <<< "$report")
    secs=$(sed -n 's/.*done in \([0-9.]*\) s.*/\1/p' "$dir.log" | tail -1)
    peak=$(sed -n 's/.*peak memory of the run: \([0-9.]*\) MiB allocated.*/\1/p' "$dir.log" | tail -1)
    sps=$(awk -v t="$secs" -v n="$STEPS" 'BEGIN { printf "%.3f", t / n }')
    echo "$v,$s,$fid,$is,$sps,$peak" >> "$csv.tmp"
    echo "run_wgan_gp: $v seed $s: classifier FID $fid, inception-like $is, $sps s/step, peak $peak MiB"
  done
done
mv "$csv.tmp" "$csv"

echo
echo "over seeds ${SEEDS[*]}, $STEPS steps (FID: lower is better):"
awk -F, 'NR > 1 {
  n[$1]++; f[$1] += $3; i[$1] += $4; t[$1] += $5; p[$1] = $6
  if (!($1 in lo) || $3 < lo[$1]) lo[$1] = $3
  if (!($1 in hi) || $3 > hi[$1]) hi[$1] = $3
  if (!($1 in order)) order[$1] = ++k
}
END {
  printf "%-8s %6s %9s %13s %9s %10s %9s\n", "variant", "seeds", "FID mean", "FID min-max", "IS mean", "s/step", "peak MiB"
  for (v in order) names[order[v]] = v
  for (j = 1; j <= k; j++) {
    v = names[j]
    printf "%-8s %6d %9.1f %6.1f-%-6.1f %9.3f %10.3f %9s\n", v, n[v], f[v] / n[v], lo[v], hi[v], i[v] / n[v], t[v] / n[v], p[v]
  }
}' "$csv"
