"""Memory running out inside the extension: each entry point (Split, Loader,
bench_load, pack, convert) runs in a child with tests/fixtures/failmalloc.so
preloaded, its Nth malloc, calloc or realloc failing, counted from the
first open of a mark file the child opens just before the call (or of a
file the call opens). Each run ends with MemoryError (imshard.OutOfMemoryError
is one) or with what a run where nothing failed gives: never a crash, a
SystemError, a word against the data, or a split left behind that is not
the whole of it."""
import concurrent.futures
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, run

# The child: one scenario, then "OK <digest>" or "EXC <type>: <message>";
# "SPLIT <name> <digest>" for each split a pack or convert left written.
CHILD = textwrap.dedent(r'''
    import os, shutil, sys, warnings, zlib
    import imshard
    # what the Python layer imports on its first pack: imported here, an
    # allocation failing in Python's import machinery is no test of ours
    import collections.abc, math, numbers, signal, threading

    warnings.simplefilter("ignore")
    scenario, data, work = sys.argv[1:4]


    class Crc:
        def __init__(self):
            self.c = 0

        def update(self, b):
            self.c = zlib.crc32(b, self.c)  # allocates nothing

        def hexdigest(self):
            return "%08x" % self.c


    # libjpeg-turbo 2.1's thread-locals (libjpeg's and libturbojpeg's
    # SIMD flags, libturbojpeg's error text) are allocated by glibc on a
    # thread's first JPEG call, and glibc ends the process when that
    # allocation fails ("cannot allocate memory for thread-local data"):
    # no code of ours runs there. This thread's are taken before counting
    # (pack and convert work on it at threads=1), and the loader's threads
    # read a split of PNG records.
    with open(os.path.join(data, "packed", "train.lst")) as f:
        jpeg = next(os.path.join(data, "img", l.split("\t")[2].strip()) for l in f
                    if l.strip().endswith(".jpg"))
    with open(jpeg, "rb") as f:
        imshard.decode(f.read())


    def start():
        fd = os.open(os.path.join(work, "failmalloc-start"), os.O_RDONLY | os.O_CREAT, 0o644)
        os.close(fd)


    def split_digest(m):
        h = Crc()
        with imshard.Split(m) as s:
            h.update(repr((s.classes, s.class_counts)).encode())
            for i in range(len(s)):
                h.update(repr(tuple(s[i])).encode())
        return h.hexdigest()


    def left(out, names):
        for n in names:
            m = os.path.join(out, n + ".json")
            if os.path.exists(m):
                print("SPLIT", n, split_digest(m))


    def run():
        m = os.path.join(data, "packed", "train.json")
        png = os.path.join(data, "png", "train.json")
        h = Crc()
        if scenario == "split":
            start()
            s = imshard.Split(m)
            for i in range(len(s)):
                h.update(repr(tuple(s[i])).encode())
            for i in range(3):
                h.update(bytes(s.decode(i)))
            h.update(repr(s._c.manifest()).encode())
            h.update(repr(s.verify(decode=True)).encode())
            s.close()
        elif scenario == "loader":
            start()
            with imshard.Loader(png, 8, 32, train=False, threads=1, augment=None) as l:
                for e in range(2):
                    for b in l.epoch(e):
                        h.update(b.images.tobytes())
                        h.update(b.labels.tobytes())
        elif scenario == "bench_load":
            start()
            r = imshard.bench_load(png, 8, 32, epochs=2, seconds=0, threads=1)
            h.update(repr((r["images"], r["batches"], r["stats"]["bad_records"])).encode())
        elif scenario == "pack":
            out = os.path.join(work, "out")
            rows = []
            for line in open(os.path.join(data, "packed", "train.lst")):
                idx, label, path = line.rstrip("\n").split("\t")
                rows.append((int(idx), int(float(label)), path))
            start()
            try:
                r = imshard.pack(rows, os.path.join(data, "img"), os.path.join(out, "t"),
                                 encoding="jpeg", resize=24, shards=2, threads=1)
                h.update(repr((r["packed"], r["skipped"])).encode())
            finally:
                left(out, ["t"])
        elif scenario == "convert":
            out = os.path.join(work, "out")
            start()
            try:
                r = imshard.convert("folder", os.path.join(data, "img"), out, val_ratio=0.3,
                                    shards=2, threads=1)
                h.update(repr(sorted((k, v["packed"]) for k, v in r["splits"].items())).encode())
            finally:
                left(out, ["train", "val"])
        return h.hexdigest()


    try:
        d = run()
    except MemoryError as e:
        print("EXC %s: %s" % (type(e).__name__, e))
    except imshard.Error as e:
        print("EXC %s: %s" % (type(e).__name__, e))
    else:
        print("OK", d)
''')

# (scenario, the path whose first open starts the count): the mark file
# the child opens just before the call, or a file the call opens itself
# (a pack's first shard: LMDB's environment is made there, whose
# allocations a stride over the whole pack steps over)
SWEEPS = [("split", "failmalloc-start"), ("loader", "failmalloc-start"),
          ("bench_load", "failmalloc-start"), ("pack", "failmalloc-start"),
          ("pack", ".mdb.partial"), ("convert", "failmalloc-start")]

# The first allocations of each call, every one: the extension's first
# JSON parse in the calling thread is among them. Then a stride over the
# rest, about STRIDED runs.
DENSE = 24
STRIDED = 20


@pytest.fixture(scope="module")
def failmalloc():
    """The path of failmalloc.so (FAILMALLOC; default: the build/ tree)."""
    path = os.environ.get("FAILMALLOC") or os.path.join(ROOT, "build", "tests", "fixtures",
                                                        "failmalloc.so")
    if not os.path.exists(path):
        pytest.skip("failmalloc.so not found at %s (build the project first, or set FAILMALLOC)"
                    % path)
    # ASan's malloc comes first in the preloads of scripts/test.sh's run
    # against the sanitized extension: failmalloc would never be called,
    # or, put before it, hand ASan's free memory glibc allocated
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("failmalloc.so cannot be preloaded beside AddressSanitizer's malloc")
    return path


@pytest.fixture(scope="module")
def small(tmp_path_factory, imshard_bin):
    """4 classes x 12 images converted to train/val splits of 2 shards
    (packed/), and the train split again with PNG records (png/)."""
    d = tmp_path_factory.mktemp("oom")
    run(imshard_bin, "sample", d / "img", "--classes", "4", "--per-class", "12", "-q")
    run(imshard_bin, "convert", "folder", d / "img", "-o", d / "packed", "--val-ratio", "0.3",
        "--shards", "2", "-q")
    run(imshard_bin, "pack", d / "packed" / "train.lst", d / "img", "-o", d / "png" / "train",
        "--encoding", "png", "-q")
    return d


def child(script, scenario, data, work, so, mark, n=None, report=None):
    os.makedirs(work)
    env = dict(os.environ, LD_PRELOAD=so, FAILMALLOC_FROM_OPEN=mark,
               RANK="0", WORLD_SIZE="1")
    env.pop("FAILMALLOC_AFTER", None)
    if n is not None:
        env["FAILMALLOC_AFTER"] = str(n)
    if report:
        env["FAILMALLOC_REPORT"] = report
    try:
        p = subprocess.run([sys.executable, script, scenario, str(data), str(work)], env=env,
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, "", "hung for 120 s"
    return p.returncode, p.stdout, p.stderr


def judge(rc, out, err, ref):
    """What is wrong with a run (exit status, stdout, stderr; ref: the
    stdout of a run where nothing failed), or None."""
    lines = out.splitlines()
    if rc is None:
        return err
    if rc != 0:
        # libgomp ends the process itself when its own allocation for a
        # team of threads fails (gomp_malloc): no code of ours to return
        # from, as in tests/cli/test_out_of_memory.sh
        if rc == 1 and "libgomp: Out of memory allocating" in err:
            return None
        return "exit %d: %s" % (rc, err.strip()[-400:])
    if "SystemError" in err or not lines:
        return "no verdict: %s" % err.strip()[-400:]
    last = lines[-1]
    ref_splits = {l for l in ref.splitlines() if l.startswith("SPLIT ")}
    for l in lines[:-1]:
        # a split written, however the call ended, is the whole of it
        if l.startswith("SPLIT ") and l not in ref_splits:
            return "left a split that is not the one a good run writes: %s" % l
    if last.startswith("OK "):
        return None if out == ref else "a wrong result: %r, not %r" % (out, ref)
    if last.startswith("EXC MemoryError") or last.startswith("EXC OutOfMemoryError"):
        return None
    if last.startswith("EXC ") and "out of memory" in last:
        return None
    return "not a MemoryError: " + last


@pytest.mark.parametrize("scenario,mark", SWEEPS)
def test_each_allocation_failing(failmalloc, small, tmp_path, scenario, mark):
    so = failmalloc
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    count = tmp_path / "count"
    rc, ref, err = child(script, scenario, small, tmp_path / "ref", so, mark, report=count)
    assert rc == 0 and ref.splitlines()[-1].startswith("OK"), (rc, ref, err)
    total = int(count.read_text())
    assert total > DENSE, total
    ns = list(range(DENSE)) + list(range(DENSE, total, max(1, (total - DENSE) // STRIDED)))
    workers = max(2, min(8, os.cpu_count() or 2))

    def one(n):
        got = child(script, scenario, small, tmp_path / ("w%d" % n), so, mark, n)
        return n, judge(*got, ref)

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        bad = ["N=%d: %s" % (n, why) for n, why in pool.map(one, ns) if why]
    assert not bad, "%s: %d of %d runs (of %d allocations):\n%s" % (
        scenario, len(bad), len(ns), total, "\n".join(bad))
