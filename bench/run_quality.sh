#!/usr/bin/env bash
# configs/dcgan.yaml's recipe trained by ganfw (f32, amp f16, bf16) and by PyTorch 1.13
# (bench/dcgan_quality_torch.py) over several seeds, every generator judged by the same
# `ganfw score` against the same classifier (configs/cnn_mnist.yaml at data.resize=32, 3
# epochs): classifier FID and the Inception-like score of 10,000 samples.
#
#   BUILD_DIR=build bench/run_quality.sh [SEEDS...]          (default: 1 2 3 4 5)
#   env: VARIANTS="torch f32 amp bf16"  STEPS=1500  THREADS=1  OUT=runs/quality
#        (adam8bit: configs/dcgan_adam8bit.yaml, not in the default list)
#        CSV=OUT/quality.csv
#        DATASET=mnist (the above) or emoji: the 64x64 RGB emoji recipe (scripts/fetch_emoji.sh)
#
# DATASET=emoji: configs/dcgan64_emoji.yaml (f32), dcgan64_emoji_bf16.yaml (bf16) and
# dcgan64_emoji_jpeg.yaml (jpeg: the same recipe reading the JPEG copy), and PyTorch's
# dcgan_quality_torch.py on data/emoji/train at --size 64 --nc 3 (torch); default VARIANTS
# "torch f32 bf16", STEPS 2675 (25 epochs), OUT runs/quality_emoji; the judge is
# configs/resnet20_emoji.yaml trained 10 epochs (about 30 s each on 2 quiet cores), its classifier FID
# against the 689 test images. A 2,675-step run takes about 40 minutes (ganfw f32, 2 threads)
# and several hours (PyTorch 1.13 from Debian, 4 to 6 s a step here) on a 2-core machine.
#
# Run from the repository root after scripts/setup.sh. What is already trained (a checkpoint
# of STEPS steps) and scored (OUT/score_VARIANT_sSEED.txt, newer than its checkpoint) is
# kept, so an interrupted run continues where it stopped. Writes CSV
# (variant,seed,fid,inception) and prints, per variant, the mean, min and max
# over the seeds. One 1,500-step run takes about 4 minutes (ganfw f32, one thread) to 6
# minutes (PyTorch, one thread) on a 2-core machine.
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build}
DATASET=${DATASET:-mnist}
case "$DATASET" in
  mnist)
    OUT=${OUT:-runs/quality}
    STEPS=${STEPS:-1500}
    VARIANTS=${VARIANTS:-torch f32 amp bf16}
    judge_dir=cnn32
    judge=(configs/cnn_mnist.yaml --set data.resize=32 --set train.epochs=3)
    torch_args=()
    ;;
  emoji)
    OUT=${OUT:-runs/quality_emoji}
    STEPS=${STEPS:-2675}
    VARIANTS=${VARIANTS:-torch f32 bf16}
    judge_dir=resnet20_emoji
    judge=(configs/resnet20_emoji.yaml --set train.epochs=10)
    torch_args=(--data data/emoji/train --size 64 --nc 3)
    [ -f data/emoji/.manifest.json ] ||
      { echo "run_quality: data/emoji is missing; run scripts/fetch_emoji.sh" >&2; exit 1; }
    ;;
  *) echo "run_quality: DATASET is '$DATASET'; use mnist or emoji" >&2; exit 2 ;;
esac
THREADS=${THREADS:-1}
SEEDS=("$@")
[ ${#SEEDS[@]} -gt 0 ] || SEEDS=(1 2 3 4 5)
ganfw="$BUILD_DIR/ganfw"
[ -x "$ganfw" ] || { echo "run_quality: $ganfw is not built (bash scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$OUT"

classifier="$OUT/$judge_dir/checkpoints/best.safetensors"
if [ ! -f "$classifier" ]; then
  echo "run_quality: training the judging classifier into $OUT/$judge_dir"
  "$ganfw" -q "${judge[@]}" --set run.out_dir="$OUT/$judge_dir" --set device.threads="$THREADS"
fi

config_of() {
  case "$DATASET:$1" in
    mnist:f32 | mnist:torch) echo configs/dcgan.yaml ;;
    mnist:amp) echo configs/dcgan_amp.yaml ;;
    mnist:bf16) echo configs/dcgan_bf16.yaml ;;
    mnist:adam8bit) echo configs/dcgan_adam8bit.yaml ;;
    emoji:f32 | emoji:torch) echo configs/dcgan64_emoji.yaml ;;
    emoji:bf16) echo configs/dcgan64_emoji_bf16.yaml ;;
    emoji:jpeg) echo configs/dcgan64_emoji_jpeg.yaml ;;
    mnist:*) echo "run_quality: unknown variant '$1' (torch, f32, amp, bf16 or adam8bit)" >&2; exit 2 ;;
    *) echo "run_quality: unknown variant '$1' for emoji (torch, f32, bf16 or jpeg)" >&2; exit 2 ;;
  esac
}

# Trains variant $1 with seed $2 unless done; prints the generator's checkpoint.
train() {
  local v=$1 s=$2 cfg
  cfg=$(config_of "$v")
  if [ "$v" = torch ]; then
    local out="$OUT/torch_s$s.safetensors"
    if [ ! -f "$out" ]; then
      /usr/bin/python3 bench/dcgan_quality_torch.py --seed "$s" --steps "$STEPS" \
        --threads "$THREADS" "${torch_args[@]}" --out "$out" > "$OUT/torch_s$s.log" 2>&1
    fi
    echo "$out"
  else
    local dir="$OUT/ganfw_${v}_s$s"
    local ckpt
    ckpt=$(printf '%s/checkpoints/step_%08d.safetensors' "$dir" "$STEPS")
    if [ ! -f "$ckpt" ]; then
      "$ganfw" "$cfg" --set seed="$s" --set train.max_steps="$STEPS" \
        --set run.out_dir="$dir" --set device.threads="$THREADS" \
        --set train.sample_every=0 > "$dir.log" 2>&1
    fi
    echo "$ckpt"
  fi
}

csv=${CSV:-$OUT/quality.csv}
echo "variant,seed,fid,inception" > "$csv.tmp"
for s in "${SEEDS[@]}"; do
  for v in $VARIANTS; do
    ckpt=$(train "$v" "$s")
    scored="$OUT/score_${v}_s$s.txt"
    if [ ! -s "$scored" ] || [ "$ckpt" -nt "$scored" ] || [ "$classifier" -nt "$scored" ]; then
      # a PyTorch state_dict has no ganfw metadata: the config says what it is; every
      # generator of seed S draws its 10,000 samples from noise seed S
      local_config=()
      [ "$v" = torch ] && local_config=(--config "$(config_of "$v")")
      "$ganfw" -q score "$ckpt" "${local_config[@]}" --seed "$s" --classifier "$classifier" \
        > "$scored.tmp"
      mv "$scored.tmp" "$scored"
    fi
    report=$(cat "$scored")
    fid=$(sed -n 's/^classifier FID: \([0-9.]*\).*/\1/p' <<< "$report")
    is=$(sed -n 's/^inception score: \([0-9.]*\).*/\1/p' <<< "$report")
    echo "$v,$s,$fid,$is" >> "$csv.tmp"
    echo "run_quality: $v seed $s: classifier FID $fid, inception-like $is"
  done
done
mv "$csv.tmp" "$csv"

echo
echo "classifier FID over seeds ${SEEDS[*]} (lower is better), $STEPS steps:"
awk -F, 'NR > 1 {
  n[$1]++; sum[$1] += $3; sq[$1] += $3 * $3; is[$1] += $4
  if (!($1 in lo) || $3 < lo[$1]) lo[$1] = $3
  if (!($1 in hi) || $3 > hi[$1]) hi[$1] = $3
  if (!($1 in order)) order[$1] = ++k
}
END {
  printf "%-8s %6s %8s %8s %8s %8s %10s\n", "variant", "seeds", "mean", "std", "min", "max", "IS mean"
  for (v in order) names[order[v]] = v
  for (i = 1; i <= k; i++) {
    v = names[i]; m = sum[v] / n[v]; var = n[v] > 1 ? (sq[v] - n[v] * m * m) / (n[v] - 1) : 0
    printf "%-8s %6d %8.1f %8.1f %8.1f %8.1f %10.3f\n", v, n[v], m, sqrt(var > 0 ? var : 0), lo[v], hi[v], is[v] / n[v]
  }
}' "$csv"
