#!/usr/bin/env python3
"""Writes the seed inputs of the reader harnesses into tests/fuzz/corpus/<name>/ (the
committed seeds are this script's output; regression inputs found by fuzzing sit beside
them under names starting with "crash-", "leak-", "timeout-" or "oom-" and are not touched).
Only the standard library, and for the JPEG seeds libjpeg-turbo's cjpeg (Debian's
libjpeg-turbo-progs) and PIL for the one CMYK file (python3-pil); without them the JPEG
seeds are left as they are, with a note. Every file is a small valid file of its format as
ganfw's writers or the data sets' own tools write it, so that the fuzzer starts from deep
inside the readers.

    /usr/bin/python3 tests/fuzz/make_seeds.py
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

SEP = b"GANFWSEP"  # FZ_SEP of tests/fuzz/fuzz_util.h
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(name, fname, data):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, fname), "wb") as f:
        f.write(data)


# --- PNG ---------------------------------------------------------------------------------
def chunk(kind, body):
    return (struct.pack(">I", len(body)) + kind + body +
            struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))


def pack_row(samples, depth):
    """Samples of one row (ints) into bytes at `depth` bits each."""
    if depth == 8:
        return bytes(samples)
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    out, acc, nbits = bytearray(), 0, 0
    for s in samples:
        acc = (acc << depth) | s
        nbits += depth
        if nbits == 8:
            out.append(acc)
            acc, nbits = 0, 0
    if nbits:
        out.append(acc << (8 - nbits))
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]


def png(w, h, color, depth, pixel, interlace=0, extra=b"", filt=0):
    """pixel(x, y) -> tuple of samples; color: 0 gray, 2 RGB, 3 palette, 4 GA, 6 RGBA."""
    raw = bytearray()

    def rows(xs, ys):
        for y in ys:
            samples = []
            for x in xs:
                samples.extend(pixel(x, y))
            raw.append(filt)
            line = pack_row(samples, depth)
            if filt == 1:  # Sub with a one-byte stride is enough for a valid stream
                bpp = max(1, (depth * len(pixel(0, 0))) // 8)
                line = bytes((line[i] - (line[i - bpp] if i >= bpp else 0)) & 0xFF
                             for i in range(len(line)))
            raw.extend(line)

    if interlace:
        for x0, y0, dx, dy in ADAM7:
            xs, ys = list(range(x0, w, dx)), list(range(y0, h, dy))
            if xs and ys:
                rows(xs, ys)
    else:
        rows(range(w), range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra +
            chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))


def pngs():
    g = lambda x, y: ((x * 37 + y * 11) % 256,)
    rgb = lambda x, y: ((x * 40) % 256, (y * 60) % 256, (x * y * 13) % 256)
    rgba = lambda x, y: rgb(x, y) + ((x + y) * 30 % 256,)
    ga = lambda x, y: (g(x, y)[0], 255 - g(x, y)[0])
    plte = chunk(b"PLTE", bytes([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255]))
    trns = chunk(b"tRNS", bytes([255, 128, 0]))
    text = chunk(b"tEXt", b"Software\0ganfw seed")
    ztxt = chunk(b"zTXt", b"Comment\0\0" + zlib.compress(b"a compressed comment " * 4))
    srgb = chunk(b"sRGB", b"\0")
    gama = chunk(b"gAMA", struct.pack(">I", 45455))
    return {
        "gray8.png": png(5, 3, 0, 8, g),
        "gray1.png": png(9, 2, 0, 1, lambda x, y: ((x + y) & 1,)),
        "gray2.png": png(5, 3, 0, 2, lambda x, y: ((x + y) % 4,)),
        "gray4.png": png(3, 3, 0, 4, lambda x, y: ((x * 5 + y) % 16,), extra=text),
        "gray16.png": png(3, 2, 0, 16, lambda x, y: (x * 20000 + y * 3000,)),
        "gray_alpha.png": png(4, 4, 4, 8, ga, extra=ztxt),
        "rgb8.png": png(4, 3, 2, 8, rgb, extra=srgb + gama),
        "rgb8_sub.png": png(6, 2, 2, 8, rgb, filt=1),
        "rgb16.png": png(2, 2, 2, 16, lambda x, y: (x * 30000, y * 30000, 65535)),
        "rgba8.png": png(3, 3, 6, 8, rgba),
        "palette.png": png(4, 2, 3, 8, lambda x, y: ((x + y) % 4,), extra=plte),
        "palette2_trns.png": png(5, 3, 3, 2, lambda x, y: ((x * y) % 4,), extra=plte + trns),
        "interlaced_rgb.png": png(9, 9, 2, 8, rgb, interlace=1),
        "interlaced_gray1.png": png(11, 5, 0, 1, lambda x, y: ((x ^ y) & 1,), interlace=1),
        "one_pixel.png": png(1, 1, 6, 16, lambda x, y: (1, 2, 3, 65535)),
    }


# --- JPEG --------------------------------------------------------------------------------
def cjpeg(pnm, *options):
    """The JPEG cjpeg makes of a PPM/PGM with the given options."""
    return subprocess.run(["cjpeg", *options], input=pnm, stdout=subprocess.PIPE,
                          check=True).stdout


def pnm(w, h, channels, pixel):
    kind = b"P5" if channels == 1 else b"P6"
    body = bytes(v for y in range(h) for x in range(w) for v in pixel(x, y)[:channels])
    return kind + b"\n%d %d\n255\n" % (w, h) + body


def exif_orientation(jpeg, value):
    """jpeg with an APP1 Exif segment (big-endian TIFF, one entry: Orientation) after SOI."""
    tiff = b"MM\0*" + struct.pack(">IHHHIHH", 8, 1, 0x0112, 3, 1, value, 0) + b"\0\0\0\0"
    body = b"Exif\0\0" + tiff
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body + jpeg[2:]


def jpegs():
    """The JPEG seeds, or {} when cjpeg is not there. Small images (a few MCUs each): the
    reader's paths are the same at any size."""
    if not shutil.which("cjpeg"):
        print("make_seeds: no cjpeg (apt-get install libjpeg-turbo-progs): JPEG seeds not "
              "rewritten", file=sys.stderr)
        return {}
    rgb = pnm(19, 13, 3, lambda x, y: ((x * 13) % 256, (y * 19) % 256, (x * y * 7) % 256))
    gray = pnm(17, 9, 1, lambda x, y: ((x * 15 + y * 7) % 256,))
    out = {
        "baseline.jpg": cjpeg(rgb, "-quality", "85"),
        "baseline444.jpg": cjpeg(rgb, "-quality", "95", "-sample", "1x1"),
        "baseline422.jpg": cjpeg(rgb, "-sample", "2x1"),
        "progressive.jpg": cjpeg(rgb, "-progressive"),
        "arithmetic.jpg": cjpeg(rgb, "-arithmetic"),
        "arith_progressive.jpg": cjpeg(rgb, "-arithmetic", "-progressive"),
        "gray.jpg": cjpeg(gray),
        "gray_progressive.jpg": cjpeg(gray, "-progressive"),
        "stored_rgb.jpg": cjpeg(rgb, "-rgb"),
        "restart.jpg": cjpeg(rgb, "-restart", "1B"),
        "optimized.jpg": cjpeg(rgb, "-optimize", "-quality", "50"),
    }
    out["exif_rotated.jpg"] = exif_orientation(out["baseline.jpg"], 6)
    try:
        from PIL import Image
        im = Image.new("CMYK", (11, 7))
        im.putdata([(x * 20, y * 30, (x + y) * 10, 40) for y in range(7) for x in range(11)])
        b = io.BytesIO()
        im.save(b, "JPEG", quality=90)  # Adobe marker, inverted CMYK, as Photoshop writes
        out["cmyk_adobe.jpg"] = b.getvalue()
    except ImportError:
        print("make_seeds: no PIL (apt-get install python3-pil): no CMYK seed", file=sys.stderr)
    return out


# --- IDX (MNIST) -------------------------------------------------------------------------
def idx_images(n, rows, cols):
    hdr = struct.pack(">IIII", 0x803, n, rows, cols)
    return hdr + bytes((i * 29 + 7) % 256 for i in range(n * rows * cols))


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)


def gz(data):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip wrapper, as gzip(1) writes
    return c.compress(data) + c.flush()


# --- safetensors -------------------------------------------------------------------------
DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "U8": 1, "I64": 8, "F64": 8, "BOOL": 1}


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape)], laid out as ganfw's writer does: by decreasing
    element size, the header padded with spaces to a multiple of 8."""
    order = sorted(enumerate(tensors), key=lambda it: (-DTYPES[it[1][1]], it[0]))
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for _, (name, dtype, shape) in order:
        n = DTYPES[dtype]
        for s in shape:
            n *= s
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        blobs.append(bytes((off + i) % 251 for i in range(n)))
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def main():
    for fname, data in pngs().items():
        write("png", fname, data)

    p = pngs()
    write("folder", "rgb_two.bin", b"\0" + p["rgb8.png"] + SEP + p["rgb8.png"])
    write("folder", "mixed_sizes.bin", b"\0" + p["rgb8.png"] + SEP + p["gray8.png"])
    write("folder", "gray_from_palette.bin", b"\1" + p["palette.png"] + SEP + p["rgba8.png"])
    write("folder", "resize.bin",
          b"\2" + p["gray16.png"] + SEP + p["interlaced_rgb.png"] + SEP + p["gray_alpha.png"])
    write("folder", "crop_pad_flip.bin", b"\3" + p["interlaced_rgb.png"] + SEP + p["rgba8.png"])
    write("folder", "dir_and_txt.bin", b"\x0c" + p["gray1.png"] + SEP + p["palette2_trns.png"])
    write("folder", "not_png.bin", b"\0" + b"hello" + SEP + p["rgb8.png"])

    j = jpegs()
    for fname, data in j.items():
        write("jpeg", fname, data)
    if j:
        # bit 2: class folders a/ and b/; bit 6: train/ and test/; 0x10: alpha over a colour
        write("folder", "jpeg_png_mixed.bin", b"\0" + j["baseline.jpg"] + SEP + p["rgba8.png"])
        write("folder", "jpeg_resize_scaled.bin",
              b"\2" + j["progressive.jpg"] + SEP + j["gray.jpg"] + SEP + j["arithmetic.jpg"])
        write("folder", "classes.bin",
              b"\4" + j["baseline444.jpg"] + SEP + p["gray8.png"] + SEP + j["restart.jpg"])
        write("folder", "split_classes_gray.bin",
              b"\x45" + p["rgb8.png"] + SEP + j["gray_progressive.jpg"])
        write("folder", "split_flat_background.bin",
              b"\x58" + p["gray_alpha.png"] + SEP + p["rgba8.png"])

    write("idx", "plain.bin", idx_images(3, 4, 5) + SEP + idx_labels([0, 9, 3]))
    write("idx", "gzip.bin", gz(idx_images(4, 3, 3)) + SEP + gz(idx_labels([1, 2, 1, 0])))
    write("idx", "mixed.bin", idx_images(2, 28, 28) + SEP + gz(idx_labels([7, 2])))
    write("idx", "count_mismatch.bin", idx_images(2, 2, 2) + SEP + idx_labels([1, 2, 3]))
    write("idx", "t10k_fallback.bin",
          idx_images(1, 2, 2) + SEP + idx_labels([5]) + SEP + gz(idx_images(1, 2, 2)))

    record = lambda label, k: bytes([label]) + bytes((i * k) % 256 for i in range(3072))
    write("cifar", "test_one.bin", record(3, 7))
    write("cifar", "test_label_bad.bin", record(10, 5))
    write("cifar", "train_five.bin",
          b"" + SEP + SEP.join(record(i, i + 1) for i in range(5)))

    write("safetensors", "empty.safetensors", safetensors([]))
    write("safetensors", "one_f32.safetensors", safetensors([("w", "F32", [2, 3])]))
    write("safetensors", "checkpoint_like.safetensors", safetensors(
        [("G.conv1.weight", "F32", [2, 1, 3, 3]), ("G.bn1.num_batches_tracked", "I64", []),
         ("D.fc.bias", "F16", [3]), ("opt.step", "I32", [1]), ("mask", "U8", [5]),
         ("empty", "BF16", [0, 4])],
        {"format": "ganfw", "step": "12", "note": "caf\u00e9 \"quoted\" \\n"}))
    write("safetensors", "scalars.safetensors", safetensors(
        [("s", "F64", []), ("b", "BOOL", [3]), ("h", "BF16", [1, 1, 1, 1, 1, 1, 1, 2])]))
    # A file PyTorch's safetensors writes: keys in sorted order, not padded, misaligned data.
    h = b'{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},' \
        b'"b":{"dtype":"F32","shape":[1],"data_offsets":[3,7]}}'
    write("safetensors", "misaligned.safetensors",
          struct.pack("<Q", len(h)) + h + b"\1\2\3" + struct.pack("<f", 1.5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
