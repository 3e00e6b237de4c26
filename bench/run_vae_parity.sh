#!/usr/bin/env bash
# configs/vae_fashion.yaml trained by ganfw and by PyTorch 1.13 (bench/vae_torch.py: the same
# convolutional VAE, loss, Adam at 1e-3, batch 128) for EPOCHS epochs per seed, and the test
# ELBO (nats per image, one sampled z per image, on Fashion-MNIST's 10,000 test images) after
# the last epoch of each, side by side.
#
#   BUILD_DIR=build bench/run_vae_parity.sh [SEEDS...]          (default: 1 2)
#   env: EPOCHS=10  THREADS=2  OUT=runs/vae_parity  CSV=OUT/vae_parity.csv
#
# Run from the repository root after scripts/setup.sh. A finished run (its log in OUT) is
# kept, so an interrupted script continues where it stopped. Writes CSV
# (seed,ganfw_elbo,torch_elbo,gap_percent) and prints the mean gap. One 10-epoch run takes
# about 5 minutes per side on a 2-core machine.
set -euo pipefail
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-runs/vae_parity}
EPOCHS=${EPOCHS:-10}
THREADS=${THREADS:-2}
SEEDS=("$@")
[ ${#SEEDS[@]} -gt 0 ] || SEEDS=(1 2)
CSV=${CSV:-$OUT/vae_parity.csv}
ganfw="$BUILD_DIR/ganfw"
[ -x "$ganfw" ] || { echo "run_vae_parity: $ganfw is not built (bash scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$OUT"

# The last row's `elbo` column of a ganfw run's eval.csv.
ganfw_elbo() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "elbo") c = i; next } { v = $c }
           END { if (c == "") exit 1; print v }' "$1"
}

echo "seed,ganfw_elbo,torch_elbo,gap_percent" > "$CSV.tmp"
for seed in "${SEEDS[@]}"; do
  run="$OUT/ganfw_s$seed"
  if [ ! -f "$run/done" ]; then
    "$ganfw" -q configs/vae_fashion.yaml --set seed="$seed" --set train.epochs="$EPOCHS" \
      --set device.threads="$THREADS" --set run.out_dir="$run" --set train.sample_every=0
    touch "$run/done"
  fi
  g=$(ganfw_elbo "$run/eval.csv")
  log="$OUT/torch_s$seed.log"
  if ! grep -q "^epoch $EPOCHS:" "$log" 2>/dev/null; then
    /usr/bin/python3 bench/vae_torch.py --epochs "$EPOCHS" --seed "$seed" --threads "$THREADS" \
      > "$log.tmp"
    mv "$log.tmp" "$log"
  fi
  t=$(awk -v e="$EPOCHS" '$1 == "epoch" && $2 == e ":" { print $5 }' "$log")
  gap=$(awk -v g="$g" -v t="$t" 'BEGIN { printf "%.3f", 100 * (g - t) / (t < 0 ? -t : t) }')
  echo "seed $seed: ganfw test ELBO $g, PyTorch $t nats/image (ganfw - PyTorch: $gap% of |PyTorch|)"
  echo "$seed,$g,$t,$gap" >> "$CSV.tmp"
done
mv "$CSV.tmp" "$CSV"
awk -F, 'NR > 1 { g += $2; t += $3; n++ }
         END { printf "mean over %d seeds: ganfw %.3f, PyTorch %.3f nats/image (%+.2f%%)\n",
               n, g / n, t / n, 100 * (g - t) / (t < 0 ? -t : t) }' "$CSV"
