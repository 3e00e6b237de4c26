#!/usr/bin/env bash
# Fetches the emoji of four vendors as 64x64 colour image folders, one sub-folder per category,
# the layout of torchvision's ImageFolder and ganfw's `data.dataset: folder`:
#   scripts/fetch_emoji.sh [DEST] [JPEG_DEST]
#     DEST       (default <repo>/data/emoji):      {train,test}/<category>/<vendor>_<code>.png
#     JPEG_DEST  (default <repo>/data/emoji_jpeg): the same images as .jpg (on white, quality 90)
# Source: the npm packages emoji-datasource-{apple,google,twitter,facebook}@16.0.0 (MIT,
# about 340 MB of tarballs in all), fetched with `npm pack`; only their 64x64 PNGs
# (package/img/<vendor>/64/) and emoji.json are extracted. scripts/emoji_layout.js (node)
# reads emoji.json and lays the images out: 9 categories (Component, five skin-tone swatches,
# left out; skin-tone variants left out), a fixed test split of about 10% of the emoji by a
# hash of each emoji's code, all vendors of an emoji on the same side. The PNGs keep their
# transparency; scripts/emoji_jpeg.py composites them on white with PIL and encodes them
# with libjpeg-turbo's cjpeg. Prints the images per split and category.
# Idempotent: does nothing for a folder that is present and valid (DEST/.manifest.json, written
# last, lists every file with its size); an incomplete or other-version folder that this
# script wrote is made again; a folder of something else is refused.
# Offline: GANFW_EMOJI_TGZ_DIR=/dir holding the four emoji-datasource-<vendor>-16.0.0.tgz.
# Needs node, tar, /usr/bin/python3 with PIL (python3-pil) and cjpeg (libjpeg-turbo-progs).
set -euo pipefail

version=16.0.0
vendors=(apple google twitter facebook)
# npm's sha512 integrity of each tarball (npm view emoji-datasource-<vendor>@16.0.0 dist.integrity)
declare -A integrity=(
  [apple]=sha512-dVYjsK0FnCry9F+PBtnivhG2K0xdwlmqYaSgiUtztUdAGPYiHYhZcVKvNBqC791g2qyEcFNTBO6utg4eQ3uLTw==
  [google]=sha512-ZRexfzs7MVoLnmzZmNsO4TKhnAJp5D++Vm6PpUpH/jEQQlemp3l88CjZ+DoZ2faM9R4QxZkOPJCoT8DlPhfQ3A==
  [twitter]=sha512-7F+uCuHH+7Qnrc15P5tnbvKkg9E6tlzi4MnT2uW1RlN4pLYTza6cP/dstIfSDMtpjFLWuZewWg8jBbuL2eyELQ==
  [facebook]=sha512-b9ZxJdB7nMWGckH1vyCjPSosaa6MJYuojPPFiQ0LmDIZS8vlG454XKcmTFKrXIMAA72O4MRJMYFhvWI8pjyciQ==
)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
dest="${1:-$root/data/emoji}"
jdest="${2:-$root/data/emoji_jpeg}"
layout="$here/emoji_layout.js"
python=${PYTHON:-/usr/bin/python3}

die() { echo "fetch_emoji: $*" >&2; exit 1; }
command -v node >/dev/null || die "node is required (apt-get install nodejs)"
command -v cjpeg >/dev/null || die "cjpeg is required for the JPEG copy (apt-get install libjpeg-turbo-progs)"
"$python" -c 'import PIL' 2>/dev/null ||
  die "$python cannot import PIL, needed for the JPEG copy (apt-get install python3-pil, or set PYTHON)"

# replace_ok DIR: DIR may be (re)made: absent, empty, or written by this script (a manifest).
replace_ok() {
  [ ! -e "$1" ] || [ -f "$1/.manifest.json" ] || [ -z "$(ls -A "$1" 2>/dev/null)" ] ||
    die "$1 exists but was not written by this script (no .manifest.json); move it away or give another folder"
}

start=$(date +%s.%N)
tmp=""
cleanup() { [ -z "$tmp" ] || rm -rf "$tmp"; }
trap cleanup EXIT

if node "$layout" check "$dest" "$version" >/dev/null 2>&1; then
  echo "fetch_emoji: $dest already holds the emoji $version PNGs ($(node "$layout" check "$dest" "$version" | tr -d '\n')); nothing to do"
else
  replace_ok "$dest"
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/ganfw_emoji.XXXXXX")"
  for v in "${vendors[@]}"; do
    tgz="emoji-datasource-$v-$version.tgz"
    if [[ -n "${GANFW_EMOJI_TGZ_DIR:-}" ]]; then
      [[ -r "$GANFW_EMOJI_TGZ_DIR/$tgz" ]] || die "GANFW_EMOJI_TGZ_DIR=$GANFW_EMOJI_TGZ_DIR has no readable $tgz"
      ln -s "$(cd "$GANFW_EMOJI_TGZ_DIR" && pwd)/$tgz" "$tmp/$tgz"
    else
      command -v npm >/dev/null || die "npm is required (apt-get install npm), or set GANFW_EMOJI_TGZ_DIR"
      echo "fetch_emoji: npm pack emoji-datasource-$v@$version"
      (cd "$tmp" && npm pack --silent "emoji-datasource-$v@$version" >/dev/null) ||
        die "'npm pack emoji-datasource-$v@$version' failed (no network or registry?); set GANFW_EMOJI_TGZ_DIR to a folder of the four tarballs"
    fi
    got=$(node -e 'const c=require("crypto"),f=require("fs");
      process.stdout.write("sha512-"+c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$tmp/$tgz")
    [[ $got == "${integrity[$v]}" ]] || die "$tgz is not emoji-datasource-$v@$version (its sha512 differs from npm's)"
  done
  mkdir -p "$tmp/src"
  tar -xzf "$tmp/emoji-datasource-apple-$version.tgz" -C "$tmp/src" package/emoji.json ||
    die "emoji-datasource-apple-$version.tgz holds no package/emoji.json"
  for v in "${vendors[@]}"; do
    node "$layout" members "$tmp/src/package/emoji.json" "$v" > "$tmp/members_$v"
    tar -xzf "$tmp/emoji-datasource-$v-$version.tgz" -C "$tmp/src" -T "$tmp/members_$v" ||
      die "emoji-datasource-$v-$version.tgz lacks some of the 64x64 images its emoji.json lists"
  done
  # stage beside DEST, then swap it in: a half-made folder never sits at DEST
  mkdir -p "$(dirname "$dest")"
  stage="$dest.partial"
  rm -rf "$stage"
  mkdir "$stage"
  node "$layout" build "$tmp/src/package/emoji.json" "$tmp/src" "$stage" "$version" >/dev/null
  rm -rf "$dest"
  mv "$stage" "$dest"
  node "$layout" check "$dest" "$version" >/dev/null || die "the written $dest does not validate"
  echo "fetch_emoji: wrote $dest"
fi

if "$python" "$here/emoji_jpeg.py" check "$dest" "$jdest" >/dev/null 2>&1; then
  echo "fetch_emoji: $jdest already holds the JPEG copy ($("$python" "$here/emoji_jpeg.py" check "$dest" "$jdest" | tr -d '\n')); nothing to do"
else
  replace_ok "$jdest"
  mkdir -p "$(dirname "$jdest")"
  stage="$jdest.partial"
  rm -rf "$stage"
  mkdir "$stage"
  "$python" "$here/emoji_jpeg.py" make "$dest" "$stage"
  rm -rf "$jdest"
  mv "$stage" "$jdest"
  "$python" "$here/emoji_jpeg.py" check "$dest" "$jdest" >/dev/null || die "the written $jdest does not validate"
  echo "fetch_emoji: wrote $jdest"
fi

node "$layout" counts "$dest"
end=$(date +%s.%N)
echo "fetch_emoji: done in $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
