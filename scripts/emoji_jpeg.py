"""The JPEG copy of an image folder laid out by scripts/emoji_layout.js, for
scripts/fetch_emoji.sh: every SRC/<split>/<category>/<name>.png becomes
DEST/<split>/<category>/<name>.jpg, or the copy is checked.

  /usr/bin/python3 scripts/emoji_jpeg.py make SRC DEST [--quality 90]
  /usr/bin/python3 scripts/emoji_jpeg.py check SRC DEST

Each PNG is decoded by PIL, its transparency (RGBA, gray + alpha, or a palette's tRNS)
composited over white (Image.alpha_composite on an opaque white RGBA), written as a binary
PPM and encoded by libjpeg-turbo's cjpeg at -quality 90 with its other defaults (4:2:0 chroma
subsampling, baseline, no optimised Huffman tables). PIL rather than ImageMagick: it reads
every PNG kind these packages hold, and it is the decoder and compositing of the PyTorch
side (bench/folder_torch.py), so the JPEG copy starts from the pixels PyTorch sees in the
PNG folder. `make` writes into DEST (a new folder; the caller stages and renames it) and
writes DEST/.manifest.json last; `check` exits 0 when that manifest lists one JPEG of the
recorded size for every PNG of SRC/.manifest.json, made from that very manifest (its SHA-256).
"""
import argparse
import concurrent.futures
import hashlib
import io
import json
import os
import subprocess
import sys

from PIL import Image


def die(msg):
    sys.exit(f"emoji_jpeg: {msg}")


def on_white(im):
    """An RGB image of im with its transparency composited over white."""
    has_alpha = im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info
    if not has_alpha:
        return im.convert("RGB")
    rgba = im.convert("RGBA")
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(white, rgba).convert("RGB")


def png_list(src):
    try:
        with open(os.path.join(src, ".manifest.json")) as f:
            files = [e["path"] for e in json.load(f)["files"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        die(f"{src}/.manifest.json is missing or unreadable ({e}); run scripts/fetch_emoji.sh")
    return files


def manifest_sha256(src):
    """The SHA-256 of SRC/.manifest.json: the JPEG copy is of that PNG folder."""
    with open(os.path.join(src, ".manifest.json"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def jpeg_name(rel):
    return rel[:-4] + ".jpg"


def convert(src, dest, rel, quality):
    with Image.open(os.path.join(src, rel)) as im:
        rgb = on_white(im)
    ppm = io.BytesIO()
    rgb.save(ppm, format="PPM")
    out = os.path.join(dest, jpeg_name(rel))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    r = subprocess.run(["cjpeg", "-quality", str(quality), "-outfile", out], input=ppm.getvalue(),
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        die(f"cjpeg failed on {rel}: {r.stderr.decode(errors='replace').strip()}")
    return jpeg_name(rel), os.path.getsize(out)


def make(src, dest, quality):
    files = png_list(src)
    # cjpeg runs as a child process, so two threads keep two cores busy
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        done = list(pool.map(lambda rel: convert(src, dest, rel, quality), files))
    manifest = {"png_manifest_sha256": manifest_sha256(src), "quality": quality,
                "background": "white",
                "encoder": "cjpeg (libjpeg-turbo)",
                "files": [{"path": p, "bytes": n} for p, n in done]}
    tmp = os.path.join(dest, ".manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(dest, ".manifest.json"))
    total = sum(n for _, n in done)
    print(f"emoji_jpeg: {len(done)} JPEGs (quality {quality}), {total / 2**20:.1f} MiB")


def check(src, dest):
    want = {jpeg_name(p) for p in png_list(src)}
    try:
        with open(os.path.join(dest, ".manifest.json")) as f:
            m = json.load(f)
        have = {e["path"]: e["bytes"] for e in m["files"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        die(f"no readable {dest}/.manifest.json ({e})")
    if m.get("png_manifest_sha256") != manifest_sha256(src):
        die(f"{dest} was made from another version of {src}")
    if set(have) != want:
        die(f"{dest} lists {len(have)} JPEGs, {src} has {len(want)} PNGs")
    for rel, n in have.items():
        p = os.path.join(dest, rel)
        if not os.path.isfile(p) or os.path.getsize(p) != n:
            die(f"{p} is missing or not of its recorded size {n}")
    print(f"{len(have)} JPEGs")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["make", "check"])
    ap.add_argument("src")
    ap.add_argument("dest")
    ap.add_argument("--quality", type=int, default=90)
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.src, a.dest, a.quality)
    else:
        check(a.src, a.dest)


if __name__ == "__main__":
    main()
