#!/usr/bin/env bash
# ganfw's data loader against torchvision's ImageFolder + DataLoader on the 64x64 RGB emoji,
# PNG and JPEG: bench_loader (data.dataset: folder, channels 3, resize 64, no augmentation)
# and bench/loader_torch.py, one run each in turn, ROUNDS times, for each format and each
# pairing of loader workers; prints per pairing the median images/s of each side and the ratio
# ganfw/torch (higher is better for ganfw).
#
#   bench/run_loader64.sh [ROUNDS=3]
#   env: BUILD_DIR (build/), BATCH (64), BATCHES (200 timed), WARMUP (10), PAIRS ("0 1 2"),
#        FORMATS ("png jpeg"), PYTHON (/usr/bin/python3),
#        PNG (data/emoji), JPEG (data/emoji_jpeg): the folders of scripts/fetch_emoji.sh;
#        ganfw reads <folder> (its train/ split), PyTorch <folder>/train;
#        GANFW_PNG, GANFW_JPEG: another --path for ganfw's side (e.g. a flat folder of the same
#        PNGs, which is all ganfw's folder source reads before class folders)
#
# Pairing P, by who makes the batches: P = 0 is the consumer's own thread or process
# (ganfw --prefetch 0, DataLoader num_workers=0); P = N > 0 is N workers each making whole
# batches ahead of the consumer (ganfw --workers N threads, num_workers=N processes). Both
# sides decode, composite alpha on white, convert to float and normalise to [-1,1]; torch runs
# one thread in its main process. A side that fails (a folder ganfw cannot read yet) shows
# n/a, with its first error printed once.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${1:-3}
build=${BUILD_DIR:-$root/build}
batch=${BATCH:-64}
batches=${BATCHES:-200}
warmup=${WARMUP:-10}
pairs=${PAIRS:-0 1 2}
formats=${FORMATS:-png jpeg}
python=${PYTHON:-/usr/bin/python3}
declare -A torch_dir=([png]=${PNG:-data/emoji}/train [jpeg]=${JPEG:-data/emoji_jpeg}/train)
declare -A ganfw_dir=([png]=${GANFW_PNG:-${PNG:-data/emoji}} [jpeg]=${GANFW_JPEG:-${JPEG:-data/emoji_jpeg}})
bench=$build/bench/bench_loader

if [[ ! -x $bench ]]; then
  echo "# building bench_loader into $build" >&2
  BUILD_DIR=$build "$root/scripts/build.sh" -DGANFW_CUDA=OFF >&2
fi
for f in $formats; do
  [[ -d ${torch_dir[$f]} ]] || { echo "run_loader64: ${torch_dir[$f]} is missing; run scripts/fetch_emoji.sh" >&2; exit 1; }
done

value() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "# loaders alone, batch $batch of 3x64x64, $rounds rounds of $warmup warm-up + $batches timed batches"
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
declare -A got failed
for ((r = 1; r <= rounds; r++)); do
  for f in $formats; do
    for p in $pairs; do
      if ((p == 0)); then gargs=(--prefetch 0 --workers 1); else gargs=(--workers "$p"); fi
      if line=$("$bench" --dataset folder --path "${ganfw_dir[$f]}" --channels 3 --resize 64 \
        --crop-padding 0 --hflip 0 --batch "$batch" --batches "$batches" --warmup "$warmup" \
        --rounds 1 "${gargs[@]}" 2>"$err" | grep '^loader '); then
        got[ganfw_${f}_$p]+="$(value images_per_s "$line") "
      elif [[ -z ${failed[ganfw_$f]:-} ]]; then
        failed[ganfw_$f]=1
        echo "# ganfw $f (${ganfw_dir[$f]}) failed, shown as n/a: $(tr '\n' ' ' <"$err")" >&2
      fi
      if line=$("$python" bench/loader_torch.py --data "${torch_dir[$f]}" --workers "$p" \
        --batch "$batch" --batches "$batches" --warmup "$warmup" --rounds 1 2>"$err" |
        grep '^torch_loader '); then
        got[torch_${f}_$p]+="$(value images_per_s "$line") "
      elif [[ -z ${failed[torch_$f]:-} ]]; then
        failed[torch_$f]=1
        echo "# torch $f (${torch_dir[$f]}) failed, shown as n/a: $(tr '\n' ' ' <"$err")" >&2
      fi
      echo "round $r $f workers $p: ganfw $(awk '{print $NF}' <<<"${got[ganfw_${f}_$p]:-n/a}") torch $(awk '{print $NF}' <<<"${got[torch_${f}_$p]:-n/a}") images/s"
    done
  done
done

echo
echo "# median images/s over $rounds rounds; ratio ganfw/torch (higher: ganfw faster)"
printf '%-6s %-26s %10s %10s %8s\n' format "workers (ganfw / torch)" ganfw torch ratio
for f in $formats; do
  for p in $pairs; do
    g="" t=""
    [[ -n ${got[ganfw_${f}_$p]:-} ]] && g=$(tr ' ' '\n' <<<"${got[ganfw_${f}_$p]}" | grep . | median)
    [[ -n ${got[torch_${f}_$p]:-} ]] && t=$(tr ' ' '\n' <<<"${got[torch_${f}_$p]}" | grep . | median)
    if ((p == 0)); then label="sync / num_workers=0"; else label="workers $p / num_workers=$p"; fi
    ratio=n/a
    [[ -n $g && -n $t ]] && ratio=$(awk -v g="$g" -v t="$t" 'BEGIN {printf "%.2f", g / t}')
    printf '%-6s %-26s %10s %10s %8s\n' "$f" "$label" "${g:-n/a}" "${t:-n/a}" "$ratio"
  done
done
