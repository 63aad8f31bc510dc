#!/usr/bin/python3
"""What users write for a training loader without torch: the Python baseline
of bench/load.

For each file of an im2rec list (index TAB label TAB relpath, under ROOT):
Image.open, convert("RGB"), RandomResizedCrop(224, scale=(0.08, 1),
ratio=(3/4, 4/3)) exactly as torchvision samples it (up to 10 tries of a
random area and log-uniform aspect ratio, else a centre crop clamped to the
image's ratio range), img.resize((224, 224), Image.BILINEAR, box=crop) (what
torchvision's functional resized_crop does for PIL images: crop + resize),
a random horizontal flip (p=0.5), then a float32 CHW array scaled to [0, 1]
(torchvision's ToTensor: np.asarray, /255, transpose HWC -> CHW), stacked
into batches of --batch. No Image.draft, no tuned tricks: the typical
script.

    torch_like_baseline.py LIST ROOT [--procs P] [--limit N] [--batch B]
        [--size S] [--seed K]

--procs 1 runs in this process; --procs P > 1 maps the batches (slices of
--batch list entries) over a multiprocessing.Pool(P) with imap, in order:
each worker transforms and stacks a whole batch and sends it back, as a
torch DataLoader's workers do (they collate in the worker too). Prints one line:
images=N seconds=S images_per_s=R procs=P (timed from the first image to the
last batch, pool start-up included, interpreter start-up not).
"""
import argparse
import math
import multiprocessing
import os
import random
import sys
import time

import numpy as np
from PIL import Image

SCALE = (0.08, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)


def random_resized_crop_params(rng, width, height, scale=SCALE, ratio=RATIO):
    """torchvision.transforms.RandomResizedCrop.get_params: (top, left, h, w)."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect_ratio = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            i = rng.randint(0, height - h)
            j = rng.randint(0, width - w)
            return i, j, h, w
    # Fallback to central crop
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w = width
        h = height
    i = (height - h) // 2
    j = (width - w) // 2
    return i, j, h, w


class Sample:
    """The per-sample transform, with a generator seeded per index so that
    one process and a pool draw the same crops."""

    def __init__(self, root, size, seed):
        self.root = root
        self.size = size
        self.seed = seed

    def __call__(self, item):
        index, rel = item
        rng = random.Random(self.seed * 1000003 + index)
        with open(os.path.join(self.root, rel), "rb") as f:
            img = Image.open(f)
            img = img.convert("RGB")
        i, j, h, w = random_resized_crop_params(rng, img.width, img.height)
        img = img.resize((self.size, self.size), Image.BILINEAR,
                         box=(j, i, j + w, i + h))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        arr = np.asarray(img, dtype=np.float32) / 255.0  # HWC
        return arr.transpose(2, 0, 1).copy()  # CHW, contiguous like a tensor


_fn = None


def _init(fn):
    global _fn
    _fn = fn


def _make_batch(chunk):
    return np.stack([_fn(it) for it in chunk])


def read_list(path, limit):
    rels = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\r\n")
            if not line:
                continue
            rels.append(line.split("\t")[-1])
            if limit > 0 and len(rels) >= limit:
                break
    return rels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("list")
    ap.add_argument("root")
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="first N entries, 0 = all")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    items = list(enumerate(read_list(a.list, a.limit)))
    if not items:
        sys.exit("torch_like_baseline.py: empty list")
    fn = Sample(a.root, a.size, a.seed)
    batches = 0
    checksum = 0.0
    t0 = time.perf_counter()
    if a.procs <= 1:
        for s in range(0, len(items), a.batch):
            batch = np.stack([fn(it) for it in items[s:s + a.batch]])
            batches += 1
            checksum += float(batch[:, :, 0, 0].sum())
    else:
        # Like a DataLoader with num_workers=P: each worker builds and
        # collates whole batches; the parent receives them in order.
        slices = [items[s:s + a.batch] for s in range(0, len(items), a.batch)]
        with multiprocessing.Pool(a.procs, initializer=_init, initargs=(fn,)) as pool:
            for batch in pool.imap(_make_batch, slices, chunksize=1):
                batches += 1
                checksum += float(batch[:, :, 0, 0].sum())
    secs = time.perf_counter() - t0
    print("images=%d seconds=%.4f images_per_s=%.2f procs=%d batches=%d checksum=%.3f"
          % (len(items), secs, len(items) / secs, a.procs, batches, checksum))


if __name__ == "__main__":
    main()
