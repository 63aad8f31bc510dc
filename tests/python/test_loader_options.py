"""imshard.Loader's and imshard.bench_load's arguments: each value the C
loader would take for another (a bool for 1, -1 for 2**64 - 1, a float
cut to an int, text read as bytes, a dict's keys) or could not honour
(a ring of 0, 100000 threads, a mean for uint8 pixels) refused with an
ArgumentError that names the argument."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import imshard


def test_prefetch_bounds(sample):
    with pytest.raises(imshard.ArgumentError, match=r"prefetch must be 1\.\.1024, got 1025"):
        imshard.Loader(sample["val"], 2, 8, train=False, threads=1, prefetch=1025)
    with pytest.raises(imshard.ArgumentError, match=r"prefetch must be 1\.\.1024, got 0"):
        imshard.Loader(sample["val"], 2, 8, train=False, threads=1, prefetch=0)
    l = imshard.Loader(sample["val"], 2, 8, train=False, threads=1, prefetch=1024)
    assert sum(1 for _ in l.epoch(0)) == len(l)
    l.close()


def test_uint8_normalisation_refused(sample):
    # uint8 samples are the pixels: a mean or std given with them is
    # refused, not dropped (before: silently ignored); left out, the
    # default follows the dtype (ImageNet's for floats, none for uint8)
    for kw in (dict(mean=imshard.IMAGENET_MEAN), dict(std=(2, 2, 2))):
        with pytest.raises(imshard.ArgumentError, match="uint8 samples are the pixels"):
            imshard.Loader(sample["val"], 2, 8, train=False, threads=1, dtype="uint8", **kw)
        with pytest.raises(imshard.ArgumentError, match="uint8 samples are the pixels"):
            imshard.bench_load(sample["val"], 2, 8, train=False, threads=1, dtype="uint8",
                               epochs=1, **kw)
    with imshard.Loader(sample["val"], 2, 8, train=False, threads=1, dtype="uint8") as l:
        images, _ = next(iter(l.epoch(0)))
        assert images.dtype.name == "uint8"
    with imshard.Loader(sample["val"], 2, 8, train=False, threads=1) as l:
        images, _ = next(iter(l.epoch(0)))
        assert images.dtype.name == "float32" and images.min() < 0


def test_mean_std_checked(sample):
    # the transform's own reason (before: "the transform's output size or
    # type is invalid" for any of these), and a std whose inverse is no
    # float refused (before: every sample infinite)
    for kw in (dict(mean=(float("nan"), 0, 0)), dict(std=(float("inf"), 1, 1)),
               dict(std=(1e-45, 1, 1))):
        with pytest.raises(imshard.ArgumentError, match="channel 0 has mean"):
            imshard.Loader(sample["val"], 2, 8, train=False, threads=1, **kw)


def test_threads_bounds(sample, tmp_path):
    # in a child: before the bound, threads=100000 reached OpenMP, which
    # could not make them and aborted the interpreter (libgomp's "Thread
    # creation failed"), from the loader's first batch and from bench_load
    script = tmp_path / "threads.py"
    script.write_text(textwrap.dedent("""
        import sys, imshard
        for call in (lambda: next(iter(imshard.Loader(sys.argv[1], 2, 8, threads=100000))),
                     lambda: imshard.bench_load(sys.argv[1], 2, 8, threads=100000, epochs=1)):
            try:
                call()
                print("accepted")
            except imshard.ArgumentError as e:
                print("refused:", e)
    """))
    p = subprocess.run([sys.executable, str(script), sample["val"]], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["refused: cannot open loader with 100000 threads: at most 1024"] * 2, \
        p.stdout + p.stderr
    l = imshard.Loader(sample["val"], 2, 8, train=False, threads=1024)
    assert l.info["batches_per_epoch"] > 0
    l.close()


def test_seeds_and_epochs_out_of_range_are_refused(sample):
    # before: seed 2**64 was seed 0, -1 was 2**64 - 1, epoch -1 an
    # OverflowError at iteration, partition(-1, ...) a MemoryError
    for kw in ({"seed": -1}, {"seed": 2**64}, {"epoch": -1}, {"seed": 1.5}):
        with pytest.raises(imshard.ArgumentError, match="must be an integer from 0"):
            imshard.Loader(sample["train"], 8, 32, rank=0, world=1, **kw)
    with imshard.Loader(sample["train"], 8, 32, rank=0, world=1, threads=1) as L:
        with pytest.raises(imshard.ArgumentError):
            L.set_epoch(-1)
    with pytest.raises(imshard.ArgumentError):
        imshard.partition(-1, 0, 1)


def test_bench_load_and_partition_check_their_integers(sample):
    # before: bench_load took seed=-1 as 2**64 - 1 and seed=2**64 raised
    # an OverflowError (the command refuses both: "--seed expects a
    # non-negative integer"); partition's rank 2**40 was an OverflowError
    # and rank 1.5 a TypeError, neither naming the argument
    for seed in (-1, 2**64, 1.5, True):
        with pytest.raises(imshard.ArgumentError, match="seed must be an integer from 0"):
            imshard.bench_load(sample["train"], 8, 16, epochs=1, seconds=0, threads=1,
                               seed=seed)
    for kw in (dict(rank=2**40), dict(rank=1.5), dict(world=-2**40), dict(world=None)):
        args = dict(rank=0, world=3)
        args.update(kw)
        what = list(kw)[0]
        with pytest.raises(imshard.ArgumentError, match=what + " must be an integer"):
            imshard.partition(10, **args)
    assert imshard.bench_load(sample["train"], 8, 16, epochs=1, seconds=0, threads=1,
                              seed=2**64 - 1)["images"] == 80


def test_loader_counts_must_be_integers(sample):
    # before: True passed for 1 (batch_size=True made batches of one),
    # 4.0 raised a TypeError and 2**31 an OverflowError, not ArgumentError
    m = sample["val"]
    for kw in (dict(batch_size=True), dict(size=True), dict(threads=True), dict(prefetch=True),
               dict(rank=True, world=2), dict(rank=0, world=True), dict(batch_size=4.0),
               dict(size=16.0), dict(batch_size=2**31), dict(threads=-2**40),
               dict(batch_size=None)):
        args = dict(size=16, threads=1)
        args.update(kw)
        batch = args.pop("batch_size", 4)
        with pytest.raises(imshard.ArgumentError, match="must be an integer"):
            imshard.Loader(m, batch, train=False, **args)
        with pytest.raises(imshard.ArgumentError, match="must be an integer"):
            imshard.bench_load(m, batch, train=False, epochs=1, **args)
    # NumPy integers are integers
    with imshard.Loader(m, np.int64(4), np.int32(16), train=False, rank=np.int64(0),
                        world=np.int64(1), threads=np.uint8(1)) as L:
        assert next(iter(L))[0].shape == (4, 3, 16, 16)


def test_bench_load_seconds_must_be_finite(sample, tmp_path):
    # as --seconds: before, seconds=inf measured for ever and NaN was
    # refused as "negative" (in a child: the old behaviour hangs)
    script = tmp_path / "secs.py"
    script.write_text(textwrap.dedent("""
        import sys, imshard
        for s in (float("inf"), float("nan"), -1.0, "10", True):
            try:
                imshard.bench_load(sys.argv[1], 4, 16, seconds=s, threads=1)
                print("accepted", s)
            except imshard.ArgumentError as e:
                print("refused:", e)
    """))
    p = subprocess.run([sys.executable, str(script), sample["val"]], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["refused: seconds must be a finite number >= 0, got %s" % s
                                     for s in ("inf", "nan", "-1.0", "'10'", "True")], p.stdout
    r = imshard.bench_load(sample["val"], 4, 16, train=False, threads=1, seconds=0, epochs=1)
    assert r["epochs"] == 1


def test_bench_load_without_any_limit_is_refused(sample, tmp_path):
    # as the command refuses --seconds 0 without --epochs: before,
    # seconds=0 with epochs=0 measured for 10 s without a word (in a child
    # with a timeout: the old behaviour runs on)
    script = tmp_path / "nolimit.py"
    script.write_text(textwrap.dedent("""
        import sys, imshard, imshard._imshard as c
        for f in (lambda: imshard.bench_load(sys.argv[1], 4, 16, seconds=0, epochs=0, threads=1),
                  lambda: c.bench_load(sys.argv[1], 4, 16, seconds=0.0, epochs=0, threads=1)):
            try:
                f()
                print("accepted")
            except imshard.ArgumentError as e:
                print("refused:", e)
    """))
    p = subprocess.run([sys.executable, str(script), sample["val"]], capture_output=True,
                       text=True, timeout=15)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["refused: seconds=0 (no time limit) needs epochs"] * 2, \
        p.stdout


def test_yes_no_options_take_only_true_or_false(sample):
    # before: any value's truth was taken: train="no" trained,
    # drop_last="false" dropped, copy="no" copied
    for opt in ("train", "shard_owning", "drop_last", "copy", "pinned"):
        for v in ("no", "false", 2, [], 0.0) + ((None,) if opt != "drop_last" else ()):
            with pytest.raises(imshard.ArgumentError, match="^%s must be True or False, got %s$"
                               % (opt, re.escape(repr(v)))):
                imshard.Loader(sample["train"], 4, 32, rank=0, world=1, **{opt: v})
    for opt in ("train", "shard_owning", "pinned"):
        with pytest.raises(imshard.ArgumentError, match="^%s must be True or False" % opt):
            imshard.bench_load(sample["train"], 4, 32, epochs=1, **{opt: "no"})
    for opt in ("shuffle", "pad"):
        with pytest.raises(imshard.ArgumentError, match="^%s must be True or False" % opt):
            imshard.partition(10, 0, 1, **{opt: "no"})
    # True, False, 1, 0 and NumPy's bools are taken
    assert imshard.partition(10, 0, 1, shuffle=0) == list(range(10))
    assert imshard.partition(10, 0, 1, shuffle=np.False_, pad=1) == list(range(10))
    with imshard.Loader(sample["val"], 4, 32, rank=0, world=1, train=0, drop_last=np.True_,
                        copy=1) as loader:
        assert loader.train is False and loader.copy is True
        assert len(loader) == len(imshard.Split(sample["val"])) // 4


def test_text_options_of_another_type_are_named(sample):
    # before: "TypeError: argument 4 must be str or None, not int" (the
    # position of augment in the C call, not in the caller's), and for
    # dtype=[...] "unhashable type: 'list'", naming no option
    for opt, v in (("augment", 5), ("augment", ["flip"]), ("layout", 5), ("layout", None),
                   ("dtype", ["float32"]), ("dtype", None), ("dtype", b"uint8")):
        for call in (lambda **kw: imshard.Loader(sample["val"], 2, 8, rank=0, world=1,
                                                 threads=1, **kw),
                     lambda **kw: imshard.bench_load(sample["val"], 2, 8, epochs=1,
                                                     threads=1, **kw)):
            with pytest.raises(imshard.ArgumentError,
                               match="^%s must be a string, got %s$" % (opt, re.escape(repr(v)))):
                call(**{opt: v})


def test_mean_and_std_must_be_ordered_numbers(sample):
    # before: a dict gave its keys as (R, G, B), a set its members in
    # hash order, bytes their byte values (b"abc": mean 97, 98, 99), and
    # True passed for 1.0: each made batches, normalised by numbers the
    # caller never wrote
    for opt in ("mean", "std"):
        # NumPy's bools as Python's (before: np.True_ passed for 1.0)
        for v in ({1: 0, 2: 0, 3: 0}, {1.0, 2.0, 3.0}, b"abc", bytearray(b"abc"),
                  (True, 1, 1), (1.0, np.True_, 2.0), np.array([True, False, True])):
            for call in (lambda **kw: imshard.Loader(sample["val"], 2, 8, rank=0, world=1,
                                                     threads=1, **kw),
                         lambda **kw: imshard.bench_load(sample["val"], 2, 8, epochs=1,
                                                         threads=1, **kw)):
                with pytest.raises(imshard.ArgumentError,
                                   match=r"^%s must be three numbers \(R, G, B\), got %s$"
                                   % (opt, re.escape(repr(v)))):
                    call(**{opt: v})
    # an item that is not a number is named too, on a thread that has
    # shown no list or tuple yet (before: "got ?", the repr taken with the
    # conversion's error still pending, which a list's or tuple's then
    # takes for its own failure)
    import threading
    for v in ((1, "a", 2), [1.0, None, 2.0]):
        got = []

        def fresh_thread():
            try:
                imshard.Loader(sample["val"], 2, 8, rank=0, world=1, threads=1, mean=v)
            except imshard.ArgumentError as e:
                got.append(str(e))
        t = threading.Thread(target=fresh_thread)
        t.start()
        t.join()
        assert got == ["mean must be three numbers (R, G, B), got %r" % (v,)]
    # what it takes: any sequence of three real numbers, NumPy's too
    l = imshard.Loader(sample["val"], 2, 8, rank=0, world=1, threads=1, train=False,
                       mean=np.array([1.0, 2.0, 3.0]), std=[np.float32(2), 3, 4.5])
    l.close()


def test_a_manifest_of_another_type_is_named(sample):
    # before: "expected str, bytes or os.PathLike object, not NoneType",
    # naming no argument
    for call in (lambda: imshard.Loader(None, 2, 8, rank=0, world=1, threads=1),
                 lambda: imshard.bench_load(3.5, 2, 8, epochs=1, threads=1)):
        with pytest.raises(imshard.ArgumentError, match=r"^manifest must be a path \(str, "
                                                        r"bytes or os.PathLike\), got "):
            call()


def test_text_and_paths_holding_a_nul_are_named(sample):
    # before: a bare "embedded null character" (or "byte") ValueError,
    # naming no option
    for opt, v in (("augment", "flip\0rotate=10"), ("layout", "nchw\0")):
        for call in (lambda **kw: imshard.Loader(sample["val"], 2, 8, rank=0, world=1,
                                                 threads=1, **kw),
                     lambda **kw: imshard.bench_load(sample["val"], 2, 8, epochs=1,
                                                     threads=1, **kw)):
            with pytest.raises(imshard.ArgumentError,
                               match="^%s must not hold a NUL character, got " % opt):
                call(**{opt: v})
    for m in (sample["val"] + "\0x", os.fsencode(sample["val"]) + b"\0x"):
        for call in (lambda: imshard.Loader(m, 2, 8, rank=0, world=1, threads=1),
                     lambda: imshard.bench_load(m, 2, 8, epochs=1, threads=1),
                     lambda: imshard.Split(m)):
            with pytest.raises(imshard.ArgumentError,
                               match="^manifest holds a NUL character, which no path can"):
                call()
