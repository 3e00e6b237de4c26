#!/usr/bin/env bash
# configs/distill_fashion.yaml's student trained with distillation (alpha 0.9, T 4) and
# without it (alpha 0: the labels alone; the same net, epochs, optimizer and seed), over
# several seeds, and the student's test accuracy on Fashion-MNIST's 10,000 test images after
# the last epoch of each.
#
#   BUILD_DIR=build bench/run_distill.sh TEACHER.safetensors [SEEDS...]     (default: 1 2 3)
#   env: EPOCHS=5  THREADS=2  OUT=runs/distill  CSV=OUT/distill.csv
#
# TEACHER is a checkpoint of configs/resnet20_fashion.yaml (e.g.
# runs/resnet20_fashion/checkpoints/step_00014040.safetensors). Run from the repository root
# after scripts/setup.sh; finished runs are kept. Writes CSV
# (seed,with_kd,without_kd,teacher) and prints the means.
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-runs/distill}
EPOCHS=${EPOCHS:-5}
THREADS=${THREADS:-2}
TEACHER=${1:?usage: bench/run_distill.sh TEACHER.safetensors [SEEDS...]}
shift
SEEDS=("$@")
[ ${#SEEDS[@]} -gt 0 ] || SEEDS=(1 2 3)
CSV=${CSV:-$OUT/distill.csv}
ganfw="$BUILD_DIR/ganfw"
[ -x "$ganfw" ] || { echo "run_distill: $ganfw is not built (bash scripts/setup.sh)" >&2; exit 1; }
[ -f "$TEACHER" ] || { echo "run_distill: no teacher checkpoint $TEACHER" >&2; exit 1; }
mkdir -p "$OUT"

# Column `name` of the last row of a run's eval.csv.
last() {
  awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
                        { v = $c } END { if (c == "") exit 1; print v }' "$1/eval.csv"
}

train() { # seed alpha out
  [ -f "$3/done" ] && return
  "$ganfw" -q configs/distill_fashion.yaml --set seed="$1" --set trainer.alpha="$2" \
    --set train.epochs="$EPOCHS" --set device.threads="$THREADS" --set run.out_dir="$3" \
    --set model.nets.teacher.init_from="$TEACHER"
  touch "$3/done"
}

echo "seed,with_kd,without_kd,teacher" > "$CSV.tmp"
for seed in "${SEEDS[@]}"; do
  train "$seed" 0.9 "$OUT/kd_s$seed"
  train "$seed" 0 "$OUT/ce_s$seed"
  kd=$(last "$OUT/kd_s$seed" acc)
  ce=$(last "$OUT/ce_s$seed" acc)
  teacher=$(last "$OUT/kd_s$seed" teacher_acc)
  echo "seed $seed: student test accuracy $kd with distillation, $ce without (teacher $teacher)"
  echo "$seed,$kd,$ce,$teacher" >> "$CSV.tmp"
done
mv "$CSV.tmp" "$CSV"
awk -F, 'NR > 1 { k += $2; c += $3; t = $4; n++ }
         END { printf "mean over %d seeds: %.2f%% with distillation, %.2f%% without (%+.2f points); teacher %.2f%%\n",
               n, 100 * k / n, 100 * c / n, 100 * (k - c) / n, 100 * t }' "$CSV"
