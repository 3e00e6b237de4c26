#!/bin/bash
# README "Fit a budget": `ganfw fit` of dcgan.yaml and resnet20_fashion.yaml at 80, 60, 45
# and 30% of their f32 planned peak (allocated) and at the smallest budget that fits, each
# confirmed by real steps; the first run of each calibrates (cached in $FIT_CACHE/ganfw).
# Run from the repository root after building build-a; the answers and fronts go to $FIT_OUT.
mkdir -p "${FIT_OUT:-/tmp/ganfw_fit_out}"
export XDG_CACHE_HOME=${FIT_CACHE:-/tmp/ganfw_fit_cache}
B=build-a/ganfw
mib() { python3 -c "print(int($1*$2*1048576))"; }
for spec in "dcgan 54.11" "resnet20_fashion 122.74"; do
  set -- $spec; c=$1; peak=$2
  echo "=== $c calibrate"; /usr/bin/time -f "wall %e s" $B fit configs/$c.yaml --budget 100% --no-confirm -o ${FIT_OUT:-/tmp/ganfw_fit_out}/${c}_cal.yaml
  for p in 0.80 0.60 0.45 0.30; do
    b=$(mib $peak $p)
    echo "=== $c $p budget $b"; /usr/bin/time -f "wall %e s" $B fit configs/$c.yaml --budget $b -o ${FIT_OUT:-/tmp/ganfw_fit_out}/${c}_$p.yaml --plot ${FIT_OUT:-/tmp/ganfw_fit_out}/${c}_$p.svg
  done
  s=$($B fit configs/$c.yaml --budget 1 --no-confirm 2>&1 | sed -n 's/.*MiB (\([0-9]*\) bytes).*/\1/p')
  echo "=== $c smallest budget $s"; /usr/bin/time -f "wall %e s" $B fit configs/$c.yaml --budget $s -o ${FIT_OUT:-/tmp/ganfw_fit_out}/${c}_min.yaml
done
