#!/usr/bin/env python3
"""bench/python/bench.py - images/s of imshard.Loader against `imshard
bench-load`, NVIDIA DALI's CPU pipeline and torch DataLoader, interleaved
round by round, 224 random-resized-crop + flip + normalise to float32 NCHW
at 1 and 2 threads, each contender in its own process under GNU time for
its peak RSS. See bench/python/README.md.

    python3 bench/python/bench.py [--rounds 3] [--images 1000] [--batch 64]

Contenders missing here (torch, DALI) are reported as not run, never
estimated. A failed run is named with the last line of its own stderr and
left out of every figure; ratios are the medians over the rounds where
both ran; where every run of a contender failed, the script exits 1 after
the table. The table is headed by the command that made it.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)


def one_imshard(a):
    import imshard
    loader = imshard.Loader(a.manifest, a.batch, 224, augment="flip", threads=a.threads,
                            rank=0, world=1, seed=1, mean=MEAN, std=STD)
    t0 = time.perf_counter()
    n = 0
    for images, labels in loader:
        n += len(labels)
    return n, time.perf_counter() - t0


def one_torch(a):
    import torch
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([m / 255 for m in MEAN], [s / 255 for s in STD])])
    ds = ImageFolder(a.corpus, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, drop_last=True,
                                     num_workers=a.threads, persistent_workers=False)
    t0 = time.perf_counter()
    n = 0
    for images, labels in dl:
        n += len(labels)
    return n, time.perf_counter() - t0


def one_dali(a):
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy  # noqa: F401

    @pipeline_def(batch_size=a.batch, num_threads=a.threads, device_id=None, seed=1)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=a.corpus, random_shuffle=True, name="r")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=list(MEAN), std=list(STD),
                                          mirror=fn.random.coin_flip())
        return images, labels

    p = pipe()
    p.build()
    steps = p.epoch_size("r") // a.batch
    t0 = time.perf_counter()
    n = 0
    for _ in range(steps):
        images, labels = p.run()
        n += len(labels)
    return n, time.perf_counter() - t0


def measure(cmd, env=None):
    """The contender's JSON line and peak RSS, or {"error": its last line
    of stderr} (not GNU time's report, which follows it)."""
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    own = []
    for l in p.stderr.splitlines():
        if l.startswith("Command exited with non-zero status") or l.startswith("Command terminated by signal") \
                or l.startswith("\tCommand being timed:"):
            break
        if l.strip():
            own.append(l.strip())
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        why = own[-1] if own else "no output"
        return {"error": "exit %d: %s" % (p.returncode, why) if p.returncode else "no result line: " + why}
    r = json.loads(lines[-1])
    r["rss_mib"] = int(rss.group(1)) / 1024 if rss else None
    return r


def count(text):
    """A whole number of 1 or more (an option's type)."""
    if not re.fullmatch(r"[1-9][0-9]*", text):
        raise argparse.ArgumentTypeError("must be a whole number of 1 or more, got '%s'" % text)
    return int(text)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        """A bad option: one line, exit 2."""
        print("bench.py: %s (see --help)" % message, file=sys.stderr)
        sys.exit(2)


def main():
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=count, default=3, help="interleaved rounds (3)")
    ap.add_argument("--images", type=count, default=1000, help="corpus size (1000)")
    ap.add_argument("--batch", type=count, default=64, help="batch size (64)")
    ap.add_argument("--threads", type=count, nargs="+", default=[1, 2],
                    help="thread counts, each measured (1 2)")
    ap.add_argument("--work", default="/tmp/imshard-bench-python",
                    help="corpus and packed split (/tmp/imshard-bench-python)")
    ap.add_argument("--imshard", default=os.path.join(ROOT, "build", "tools", "imshard"),
                    help="the imshard command (build/tools/imshard)")
    ap.add_argument("--torch-path", default="/tmp/imshard-torchlib",
                    help="a --target folder holding torch and torchvision")
    ap.add_argument("--dali-path", default="/tmp/imshard-dali",
                    help="a --target folder holding nvidia-dali")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--manifest", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        a.threads = a.threads[0]
        n, secs = {"imshard": one_imshard, "torch": one_torch, "dali": one_dali}[a.one](a)
        print(json.dumps({"images": n, "seconds": secs, "images_per_s": n / secs}))
        return 0

    # the corpus is marked whole once made: a folder without the mark (a
    # run stopped while it was drawn) is refused, not measured as if whole
    corpus = os.path.join(a.work, "corpus-%d" % a.images)
    stamp = os.path.join(corpus, ".corpus-n%d-seed1" % a.images)
    if os.path.isdir(corpus) and not os.path.exists(stamp):
        print("bench.py: '%s' holds no whole corpus of %d images (a run stopped while it was "
              "made?): remove it, and the next run makes it again" % (corpus, a.images), file=sys.stderr)
        return 1
    if not os.path.isdir(corpus):
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "pack", "make_corpus.py"),
                        corpus, "--n", str(a.images), "--seed", "1", "--jobs", "2"], check=True)
        open(stamp, "w").close()
    manifest = os.path.join(a.work, "packed-%d" % a.images, "train.json")
    if not os.path.exists(manifest):
        lst = os.path.join(a.work, "corpus-%d" % a.images)
        subprocess.run([a.imshard, "list", corpus, "-o", lst, "--no-shuffle", "--quiet"], check=True)
        subprocess.run([a.imshard, "pack", lst + "_train.lst", corpus, "-o", manifest[:-5],
                        "--encoding", "keep", "--quiet"], check=True)
    me = [sys.executable, os.path.abspath(__file__), "--batch", str(a.batch),
          "--manifest", manifest, "--corpus", corpus]
    env_torch = dict(os.environ, PYTHONPATH=a.torch_path)
    env_dali = dict(os.environ, PYTHONPATH=a.dali_path)
    have = {
        "torch": subprocess.run([sys.executable, "-c", "import torchvision"], env=env_torch,
                                capture_output=True).returncode == 0,
        "dali": subprocess.run([sys.executable, "-c", "import nvidia.dali"], env=env_dali,
                               capture_output=True).returncode == 0,
    }
    results = {}
    for rnd in range(a.rounds):
        for t in a.threads:
            runs = {
                "bench-load": ([a.imshard, "bench-load", manifest, "--batch", str(a.batch),
                                "--size", "224", "--threads", str(t), "--augment", "flip",
                                "--epochs", "1", "--seconds", "0", "--seed", "1", "--mean",
                                ",".join(map(str, MEAN)), "--std", ",".join(map(str, STD)),
                                "--quiet", "--json"], None),
                "imshard.Loader": (me + ["--one", "imshard", "--threads", str(t)], None),
                "torch DataLoader": (me + ["--one", "torch", "--threads", str(t)], env_torch),
                "DALI CPU": (me + ["--one", "dali", "--threads", str(t)], env_dali),
            }
            # The process that runs right after another one pays for the
            # memory the first gave back (about 8% here, measured both
            # ways), so the order turns round every round.
            order = list(runs.items())
            if rnd % 2:
                order.reverse()
            for name, (cmd, env) in order:
                if name == "torch DataLoader" and not have["torch"]:
                    continue
                if name == "DALI CPU" and not have["dali"]:
                    continue
                r = measure(cmd, env)
                r["round"] = rnd
                results.setdefault((name, t), []).append(r)
                print("round %d, %d thread%s, %-16s %s" % (rnd, t, "" if t == 1 else "s", name,
                      "%.1f images/s, %.0f MiB" % (r["images_per_s"], r["rss_mib"])
                      if "error" not in r else "failed: " + r["error"]), flush=True)
    print("\ncommand: %s" % " ".join(shlex.quote(w) for w in [
        sys.executable, "bench/python/bench.py", "--rounds", str(a.rounds), "--images", str(a.images),
        "--batch", str(a.batch), "--threads"] + [str(t) for t in a.threads] + [
        "--work", a.work, "--imshard", a.imshard, "--torch-path", a.torch_path,
        "--dali-path", a.dali_path]))
    print("medians (images/s, peak RSS MiB) and median in-run ratios of imshard.Loader"
          " (above 1: imshard.Loader faster; rounds where both ran):")
    none_ran = []
    for t in a.threads:
        base = {r["round"]: r for r in results.get(("imshard.Loader", t), []) if "error" not in r}
        for name in ("bench-load", "imshard.Loader", "torch DataLoader", "DALI CPU"):
            rs = [r for r in results.get((name, t), []) if "error" not in r]
            if not rs:
                print("  %d thr  %-16s not run (%s)" % (t, name, "missing" if (name, t) not in results
                                                         else "failed"))
                if (name, t) in results:
                    none_ran.append((name, t, len(results[(name, t)])))
                continue
            ratio = ""
            pairs = [(base[r["round"]], r) for r in rs if r["round"] in base]
            if name != "imshard.Loader" and pairs:
                ratio = "  imshard.Loader / this = %.2fx (%d round%s)" % (statistics.median(
                    b["images_per_s"] / r["images_per_s"] for b, r in pairs), len(pairs),
                    "" if len(pairs) == 1 else "s")
            print("  %d thr  %-16s %8.1f images/s  %6.0f MiB%s" % (
                t, name, statistics.median(r["images_per_s"] for r in rs),
                statistics.median(r["rss_mib"] for r in rs), ratio))
    print("\nhave: torch %s, DALI %s" % (have["torch"], have["dali"]))
    # a contender that ran and never gave a figure fails the benchmark
    for name, t, n in none_ran:
        print("bench.py: every run of %s with %d thread%s failed (%d of %d): no figures for it"
              % (name, t, "" if t == 1 else "s", n, n), file=sys.stderr)
    return 1 if none_ran else 0


if __name__ == "__main__":
    sys.exit(main())
