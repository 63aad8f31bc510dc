#!/usr/bin/python3
"""The Python baseline for bench/pack: what users write today.

A straightforward single-process PIL + lmdb packer, the script imshard
replaces: walk the .lst, open each image with PIL, convert to RGB, resize
the shorter side to 256 with Image.resize's default filter (BICUBIC in
Pillow 9.4 for RGB images), save JPEG quality 95 (Pillow's default 4:2:0
subsampling) into a BytesIO, and put pickle((label, jpeg_bytes)) under an
8-digit key into one LMDB, committing every 1000 images. map_size is set
large up front, as users do. Nothing is made deliberately slow, and nothing
is tuned beyond what such a script usually does (no Image.draft, no
multiprocessing): that is the point of the baseline.

    /usr/bin/python3 bench/pack/pil_lmdb_baseline.py LIST.lst ROOT OUT.lmdb
        [--limit N]

Prints one line of key=value figures to stdout like jpeg_floor (images,
input_bytes, output_bytes, seconds, images_per_s, mb_per_s; MB = 10^6 bytes
of input files).
"""
import argparse
import io
import os
import pickle
import sys
import time

import lmdb
from PIL import Image

SHORTER = 256
QUALITY = 95
TXN_IMAGES = 1000


def read_list(path, limit):
    entries = []
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3:
                continue
            entries.append((int(fields[0]), float(fields[1]), fields[-1]))
            if limit and len(entries) >= limit:
                break
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("list")
    ap.add_argument("root")
    ap.add_argument("out", help="LMDB file to create (replaced if present)")
    ap.add_argument("--limit", type=int, default=0, help="first N entries only")
    args = ap.parse_args()

    entries = read_list(args.list, args.limit)
    if os.path.exists(args.out):
        os.remove(args.out)
    t0 = time.time()
    env = lmdb.open(args.out, map_size=1 << 40, subdir=False)
    txn = env.begin(write=True)
    in_bytes = out_bytes = 0
    for n, (index, label, rel) in enumerate(entries, 1):
        path = os.path.join(args.root, rel)
        in_bytes += os.path.getsize(path)
        img = Image.open(path).convert("RGB")
        w, h = img.size
        scale = SHORTER / min(w, h)
        img = img.resize((round(w * scale), round(h * scale)))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=QUALITY)
        data = buf.getvalue()
        out_bytes += len(data)
        txn.put(b"%08d" % index, pickle.dumps((label, data)))
        if n % TXN_IMAGES == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.close()
    dt = time.time() - t0
    print("images=%d errors=0 threads=1 input_bytes=%d output_bytes=%d seconds=%.3f "
          "images_per_s=%.1f mb_per_s=%.2f" % (len(entries), in_bytes, out_bytes, dt,
                                               len(entries) / dt, in_bytes / 1e6 / dt))


if __name__ == "__main__":
    sys.exit(main())
