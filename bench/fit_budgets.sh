#!/bin/bash
# README "Fit a budget": `ganfw fit` of each config at 80, 60, 45 and 30% of its f32 planned
# peak (allocated, from `ganfw plan`) and at the smallest budget that fits, each confirmed by
# real steps; the first run of each calibrates (cached in $FIT_CACHE/ganfw).
#   bench/fit_budgets.sh [CONFIG_STEM...]   (default: dcgan resnet20_fashion vae_fashion
#                                            pix2pix_inpaint_fashion distill_fashion)
# Run from the repository root after building build-a; the answers and fronts go to $FIT_OUT.
set -u
out=${FIT_OUT:-/tmp/ganfw_fit_out}
mkdir -p "$out"
export XDG_CACHE_HOME=${FIT_CACHE:-/tmp/ganfw_fit_cache}
B=${GANFW:-build-a/ganfw}
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(dcgan resnet20_fashion vae_fashion pix2pix_inpaint_fashion distill_fashion)
mib() { python3 -c "print(int($1*$2*1048576))"; }
for c in "${configs[@]}"; do
  peak=$($B plan configs/$c.yaml 2>/dev/null | sed -n 's/^Predicted peak: \([0-9.]*\) MiB allocated.*/\1/p')
  [ -n "$peak" ] || { echo "=== $c: ganfw plan gave no peak" >&2; continue; }
  echo "=== $c f32 planned peak $peak MiB; calibrate"
  /usr/bin/time -f "wall %e s" $B fit configs/$c.yaml --budget 100% --no-confirm -o "$out/${c}_cal.yaml"
  for p in 0.80 0.60 0.45 0.30; do
    b=$(mib "$peak" $p)
    echo "=== $c $p budget $b"
    /usr/bin/time -f "wall %e s" $B fit configs/$c.yaml --budget "$b" -o "$out/${c}_$p.yaml" --plot "$out/${c}_$p.svg"
  done
  s=$($B fit configs/$c.yaml --budget 1 --no-confirm 2>&1 | sed -n 's/.*MiB (\([0-9]*\) bytes).*/\1/p')
  echo "=== $c smallest budget $s"
  /usr/bin/time -f "wall %e s" $B fit configs/$c.yaml --budget "$s" -o "$out/${c}_min.yaml"
done
