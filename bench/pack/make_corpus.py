#!/usr/bin/python3
"""Generates the deterministic ImageNet-shaped JPEG corpus for bench/pack.

N JPEGs in synset-like class folders (n0xxxxxxx/n0xxxxxxx_<k>.JPEG), about
90% at ImageNet's common sizes (500x375, 375x500, 500x333, ...) and 10%
larger (1024x768 up to 2000x1500), saved at quality 90 with 4:2:0 chroma
like most camera/Flickr JPEGs. The content is photo-like rather than noise
or flat colour so that file sizes (about 110 KB at 500x375) and decode/encode
costs resemble the real set: a smooth colour field, a few soft-edged shapes,
mid-frequency texture and mild sensor noise.

Only Pillow is needed (no numpy). Output is a pure function of (--seed, --n,
--classes): image i is drawn from its own Random(seed, i), so the corpus is
identical whatever --jobs is.

    /usr/bin/python3 bench/pack/make_corpus.py OUTDIR [--n 3000] [--classes 10]
        [--seed 1] [--jobs 2]
"""
import argparse
import multiprocessing
import os
import random
import sys
import time

from PIL import Image, ImageChops, ImageDraw, ImageFilter

COMMON_SIZES = [(500, 375), (375, 500), (500, 333), (333, 500), (500, 400),
                (500, 375), (500, 375), (375, 500), (500, 281), (400, 500)]
LARGE_SIZES = [(1024, 768), (768, 1024), (1280, 960), (1600, 1200),
               (2000, 1500), (1500, 2000), (1920, 1280)]
LARGE_FRACTION = 0.10


def class_names(n_classes, seed):
    rng = random.Random(f"classes-{seed}")
    names = set()
    while len(names) < n_classes:
        names.add("n0%07d" % rng.randrange(1000000, 9999999))
    return sorted(names)


def noise_image(rng, mode, size):
    """Uniform random bytes as an image of the given mode and size."""
    bands = len(mode)
    return Image.frombytes(mode, size, rng.randbytes(size[0] * size[1] * bands))


def smooth_field(rng, size, cells):
    """Low-frequency colour field: a tiny random image upsampled bicubically."""
    w, h = size
    gw = max(2, cells)
    gh = max(2, round(cells * h / w))
    return noise_image(rng, "RGB", (gw, gh)).resize(size, Image.BICUBIC)


def draw_image(seed, index):
    rng = random.Random(f"{seed}-{index}")
    if rng.random() < LARGE_FRACTION:
        size = rng.choice(LARGE_SIZES)
    else:
        size = rng.choice(COMMON_SIZES)
    w, h = size
    # Scale of features relative to a 500-pixel image, so a large image looks
    # like a higher-resolution photo of a similar scene, not a tiled one.
    s = max(w, h) / 500.0

    img = smooth_field(rng, size, rng.randint(3, 6))

    # Objects: soft-edged ellipses and polygons in their own colours.
    layer = Image.new("RGB", size)
    mask = Image.new("L", size, 0)
    d_layer = ImageDraw.Draw(layer)
    d_mask = ImageDraw.Draw(mask)
    for _ in range(rng.randint(3, 8)):
        colour = tuple(rng.randrange(256) for _ in range(3))
        x0, y0 = rng.randrange(w), rng.randrange(h)
        rw, rh = rng.randint(w // 10, w // 2), rng.randint(h // 10, h // 2)
        box = [x0 - rw, y0 - rh, x0 + rw, y0 + rh]
        if rng.random() < 0.5:
            d_layer.ellipse(box, fill=colour)
            d_mask.ellipse(box, fill=255)
        else:
            pts = [(rng.randrange(-w // 4, w + w // 4),
                    rng.randrange(-h // 4, h + h // 4)) for _ in range(rng.randint(3, 6))]
            d_layer.polygon(pts, fill=colour)
            d_mask.polygon(pts, fill=255)
    mask = mask.filter(ImageFilter.GaussianBlur(rng.uniform(0.6, 2.0) * s))
    shade = smooth_field(rng, size, rng.randint(2, 4))
    layer = ImageChops.multiply(layer, shade.point(lambda v: 96 + v // 2))
    img = Image.composite(layer, img, mask)

    # Mid-frequency texture (foliage, fabric, fur): coarse noise upsampled.
    cell = rng.uniform(1.5, 3.0) * s
    tex = noise_image(rng, "L", (max(2, int(w / cell)), max(2, int(h / cell))))
    tex = tex.resize(size, Image.BILINEAR).convert("RGB")
    img = Image.blend(img, tex, rng.uniform(0.30, 0.45))

    # Fine texture and sensor noise at full resolution.
    # Per-pixel detail is weaker in a high-resolution photo: scale it down.
    fine = noise_image(rng, "L", size).filter(ImageFilter.GaussianBlur(0.35 * s)).convert("RGB")
    img = Image.blend(img, fine, rng.uniform(0.24, 0.32) / s ** 0.5)
    return img


def work(job):
    root, seed, index, cls, name = job
    img = draw_image(seed, index)
    path = os.path.join(root, cls, name)
    tmp = path + ".tmp"
    img.save(tmp, "JPEG", quality=90, subsampling=2, optimize=False)
    os.replace(tmp, path)
    return os.path.getsize(path), img.size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--n", type=int, default=3000, help="number of images (3000)")
    ap.add_argument("--classes", type=int, default=10, help="class folders (10)")
    ap.add_argument("--seed", type=int, default=1, help="seed (1)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (2)")
    args = ap.parse_args()

    names = class_names(args.classes, args.seed)
    jobs = []
    per_class = {}
    for i in range(args.n):
        cls = names[i % args.classes]
        per_class[cls] = per_class.get(cls, 0) + 1
        jobs.append((args.outdir, args.seed, i, cls, "%s_%d.JPEG" % (cls, i)))
    for cls in names:
        os.makedirs(os.path.join(args.outdir, cls), exist_ok=True)

    t0 = time.time()
    total = 0
    large = 0
    with multiprocessing.Pool(args.jobs) as pool:
        for nbytes, size in pool.imap_unordered(work, jobs, chunksize=8):
            total += nbytes
            large += max(size) > 500
    dt = time.time() - t0
    print("make_corpus: %d images (%d larger than 500 px) in %d classes, %.1f MB, "
          "mean %.1f KB, %.1f s -> %s" % (args.n, large, args.classes, total / 1e6,
                                            total / 1e3 / max(1, args.n), dt, args.outdir),
          file=sys.stderr)


if __name__ == "__main__":
    main()
