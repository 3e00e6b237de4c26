#!/usr/bin/env bash
# Bit for bit, before and after a change to the core: trains each config a few steps with
# two ganfw binaries and compares what the runs leave. metrics.csv and eval.csv must agree
# in every column but the timings (step_seconds, comm_seconds, eval_seconds, seconds), and
# every checkpoint file must have the same bytes.
#
#   bench/run_bitwise.sh /tmp/before/build/ganfw build/ganfw \
#       "configs/dcgan.yaml --set train.max_steps=12" "configs/cnn_mnist.yaml ..."
#
# Run it from the repository root. Each run gets --set run.out_dir=<a temporary folder>
# and --set device.threads=1 (a deterministic CPU summation order); exits 1 on a difference.
set -euo pipefail
before=${1:?usage: bench/run_bitwise.sh BEFORE_GANFW AFTER_GANFW "CONFIG ARGS" ...}
after=${2:?usage: bench/run_bitwise.sh BEFORE_GANFW AFTER_GANFW "CONFIG ARGS" ...}
shift 2
(($# >= 1)) || { echo "bench/run_bitwise.sh: name at least one config" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the columns of a CSV file without the timing ones
strip_times() {
  awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) drop[i] = $i ~ /(^|_)seconds$/}
           {line = ""; for (i = 1; i <= NF; i++) if (!drop[i]) line = line (line == "" ? "" : ",") $i
            print line}' "$1"
}
fail=0
k=0
for job in "$@"; do
  k=$((k + 1))
  for side in before after; do
    bin=$before
    [[ $side == after ]] && bin=$after
    # shellcheck disable=SC2086
    "$bin" $job --set "run.out_dir=$tmp/$k.$side" --set device.threads=1 >"$tmp/$k.$side.log" 2>&1 ||
      { echo "$side: '$job' failed:" >&2; tail -5 "$tmp/$k.$side.log" >&2; exit 1; }
  done
  same=1
  for csv in metrics.csv eval.csv; do
    [[ -f $tmp/$k.before/$csv || -f $tmp/$k.after/$csv ]] || continue
    if ! cmp -s <(strip_times "$tmp/$k.before/$csv") <(strip_times "$tmp/$k.after/$csv"); then
      echo "DIFFER $job: $csv"
      diff <(strip_times "$tmp/$k.before/$csv") <(strip_times "$tmp/$k.after/$csv") | head -6
      same=0
    fi
  done
  files=$( (cd "$tmp/$k.before" && find checkpoints -type f; cd "$tmp/$k.after" && find checkpoints -type f) | sort -u)
  n=0
  for f in $files; do
    n=$((n + 1))
    cmp -s "$tmp/$k.before/$f" "$tmp/$k.after/$f" || { echo "DIFFER $job: $f"; same=0; }
  done
  if ((same)); then
    echo "same   $job: metrics.csv$([[ -f $tmp/$k.after/eval.csv ]] && echo ", eval.csv"), $n checkpoint file(s)"
  else
    fail=1
  fi
done
exit $fail
