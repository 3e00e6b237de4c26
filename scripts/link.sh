#!/usr/bin/env bash
# Puts `ganfw` on the PATH as a link to a build's binary, so README's bare `ganfw ...` lines
# work after scripts/setup.sh. Usage: link.sh [BUILD_DIR]; the link goes into $GANFW_BIN_DIR,
# else /usr/local/bin (with sudo when not writable). A `ganfw` there that is not a link
# (an installed one) is left alone. Safe to run again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin=${GANFW_BIN_DIR:-/usr/local/bin}
if [ ! -x "$build/ganfw" ]; then
  echo "link: $build/ganfw is not built; run scripts/build.sh first" >&2
  exit 1
fi
if [ -e "$bin/ganfw" ] && [ ! -L "$bin/ganfw" ]; then
  echo "link: $bin/ganfw is an installed ganfw, left as it is; this build is $build/ganfw"
  exit 0
fi
sudo=""
if [ ! -w "$bin" ] && [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo mkdir -p "$bin"
$sudo ln -sfn "$build/ganfw" "$bin/ganfw"
echo "link: $bin/ganfw -> $build/ganfw"
case ":$PATH:" in
  *":$bin:"*) ;;
  *) echo "link: $bin is not on your PATH; add it: export PATH=\"$bin:\$PATH\"" ;;
esac
