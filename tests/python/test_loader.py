"""imshard.Loader against `imshard bench-load` and the C partition: the
same batches bit for bit, the same rank shares, the ring rule for
zero-copy batches, no thread left behind, Ctrl-C."""
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import imshard
from conftest import default_sigbus_env, run


def dumped(d):
    """{k: (label, bytes)} of a bench-load --dump-format raw folder."""
    out = {}
    for f in os.listdir(d):
        m = re.match(r"sample_(\d+)_label(\d+)\.bin$", f)
        assert m, f
        out[int(m.group(1))] = (int(m.group(2)), open(os.path.join(d, f), "rb").read())
    return out


CASES = [
    # train, rrc + flip + rotate, f32 NCHW, ImageNet mean/std, rank 1 of 2
    dict(train=True, augment="flip,rotate=10", dtype="float32", layout="nchw", rank=1, world=2,
         mean=imshard.IMAGENET_MEAN, std=imshard.IMAGENET_STD, seed=7),
    # train, u8 NHWC, one rank
    dict(train=True, augment="flip,zoom=0.2", dtype="uint8", layout="nhwc", rank=0, world=1,
         mean=(0, 0, 0), std=(1, 1, 1), seed=3),
    # validation, f16, rank 2 of 3 (padded shares, short last batch)
    dict(train=False, augment=None, dtype="float16", layout="nchw", rank=2, world=3,
         mean=(10, 20, 30), std=(50, 60, 70), seed=0),
]


@pytest.mark.parametrize("case", CASES)
def test_batches_equal_bench_load_dump(sample, imshard_bin, tmp_path, case):
    m = sample["train"] if case["train"] else sample["val"]
    batch, size = 6, 40
    kw = dict(case)
    kw.pop("train")
    loader = imshard.Loader(m, batch, size, train=case["train"], threads=2, **kw)
    per_epoch = len(loader)
    n_epoch = sum(len(b[1]) for b in loader.epoch(0))
    # two epochs dumped: the second is compared with the loader's epoch 1
    d = tmp_path / "dump"
    args = [imshard_bin, "bench-load", m, "--batch", batch, "--size", size, "--threads", 1,
            "--epochs", 2, "--seconds", 0, "--rank", case["rank"], "--world", case["world"],
            "--seed", case["seed"], "--dtype", {"float32": "f32", "uint8": "u8",
                                                "float16": "f16"}[case["dtype"]],
            "--layout", case["layout"], "--mean", ",".join(map(str, case["mean"])),
            "--std", ",".join(map(str, case["std"])), "--dump", 2 * n_epoch, d,
            "--dump-format", "raw", "--quiet"]
    if case["augment"]:
        args += ["--augment", case["augment"]]
    if not case["train"]:
        args += ["--val"]
    run(*args)
    ref = dumped(d)
    assert len(ref) == 2 * n_epoch
    for epoch in (0, 1):
        k = epoch * n_epoch
        steps = 0
        for b in loader.epoch(epoch):
            images, labels = b
            assert images.shape[0] == len(labels) == len(b.indices) == len(b.padded)
            if case["layout"] == "nchw":
                assert images.shape[1:] == (3, size, size)
            else:
                assert images.shape[1:] == (size, size, 3)
            assert images.dtype == np.dtype(case["dtype"])
            assert labels.dtype == np.int64
            for i in range(len(labels)):
                lab, raw = ref[k]
                assert labels[i] == lab, (epoch, k)
                assert images[i].tobytes() == raw, "sample %d of epoch %d differs" % (k, epoch)
                k += 1
            steps += 1
            del images, b
        assert steps == per_epoch
    loader.close()


@pytest.mark.parametrize("train", [True, False])
def test_rank_shares_equal_c_partition(sample, train):
    m = sample["train"] if train else sample["val"]
    n = len(imshard.Split(m))
    for world in (1, 2, 3, 4):
        seen = []
        lens = set()
        for rank in range(world):
            loader = imshard.Loader(m, 4, 16, train=train, rank=rank, world=world, seed=5,
                                    threads=1, copy=True)
            for epoch in (0, 2):
                got = [int(i) for b in loader.epoch(epoch) for i in b.indices]
                pads = [bool(p) for b in loader.epoch(epoch) for p in b.padded]
                want = imshard.partition(n, rank, world, epoch, 5, shuffle=train, pad=not train)
                if train:  # drop_last: whole batches only
                    want = want[:len(want) // 4 * 4]
                assert got == want, (world, rank, epoch)
                # padded flags: positions past the end of the epoch's order
                assert pads == [rank + k * world >= n for k in range(len(want))]
                if epoch == 0:
                    seen += [i for i, p in zip(got, pads) if not p]
            lens.add(len(loader))
            loader.close()
        assert len(lens) == 1, "ranks got different batch counts"
        assert len(seen) == len(set(seen)), "shares overlap"
        if not train:
            assert sorted(seen) == list(range(n)), "validation misses records"


def test_stale_batches_cannot_be_reused(sample):
    m = sample["train"]
    ref = [b[0].copy() for b in imshard.Loader(m, 5, 24, prefetch=3, threads=2,
                                                copy=True).epoch(0)]
    loader = imshard.Loader(m, 5, 24, prefetch=2, threads=2)  # 3 slots
    it = loader.epoch(0)
    held = [next(it) for _ in range(3)]
    assert loader._c.exported == 3
    with pytest.raises(imshard.Error, match="copy=True"):
        next(it)
    time.sleep(0.2)  # the producer would have refilled a slot by now
    for k, b in enumerate(held):
        assert np.array_equal(b[0], ref[k]), "a held batch was overwritten"
    # a view made from a batch keeps its slot, too
    view = held[0][0][1:3]
    del held, b
    assert loader._c.exported == 1
    assert np.array_equal(view, ref[0][1:3])
    del view
    assert loader._c.exported == 0
    rest = [b[0].copy() for b in loader.epoch(0)]
    assert all(np.array_equal(a, b) for a, b in zip(rest, ref))
    # the last batch of an epoch kept while the next epoch runs (a loop
    # variable that outlives its loop): the others slots carry on
    for last in loader.epoch(0):
        pass
    copy = last[0].copy()
    assert sum(1 for _ in loader.epoch(1)) == len(ref)
    assert np.array_equal(last[0], copy)
    del last
    # prefetch=1: one batch ahead of the one the loop variable holds
    one = imshard.Loader(m, 5, 24, prefetch=1, threads=2)
    for e in range(2):
        assert sum(1 for _ in one.epoch(e)) == len(ref)
    one.close()
    # copy=True: a whole epoch can be kept
    kept = list(imshard.Loader(m, 5, 24, prefetch=1, threads=2, copy=True).epoch(0))
    assert len(kept) == len(ref) and all(np.array_equal(a[0], b) for a, b in zip(kept, ref))
    loader.close()


def threads_now():
    return len(os.listdir("/proc/self/task"))


def settle(base, limit=5.0):
    t0 = time.time()
    while threads_now() > base and time.time() - t0 < limit:
        time.sleep(0.02)
    return threads_now()


@pytest.mark.parametrize("how", ["close", "del", "with"])
def test_loader_killed_mid_epoch_leaks_no_thread(sample, how):
    # a thread of an earlier test may still be ending when base is read:
    # fewer threads than base afterwards is no leak, more is
    base = threads_now()
    loader = imshard.Loader(sample["train"], 4, 32, threads=2)
    it = iter(loader)
    b = next(it)
    next(it)
    assert threads_now() > base, "the loader should be running threads"
    if how == "close":
        loader.close()
        loader.close()  # harmless
        # the batch still held is readable after close, the threads gone
        assert settle(base) <= base
        assert b[0].shape[0] == 4 and np.isfinite(b[0]).all()
        with pytest.raises(imshard.Error, match="closed"):
            next(iter(loader))
    elif how == "del":
        del it, loader
    else:
        with imshard.Loader(sample["train"], 4, 32, threads=2) as l2:
            next(iter(l2))
        loader.close()
    del b
    assert settle(base) <= base, "threads left behind"


def test_ctrl_c_stops_a_waiting_loader(sample, tmp_path):
    # epoch after epoch of batches of 64 at 384 px on one thread: the
    # consumer spends nearly all its time waiting in next()
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent("""
        import signal, sys, time, imshard
        # Python leaves SIGINT ignored when it starts so (a test run
        # started in the background by a non-interactive shell, or under
        # nohup): Ctrl-C is what this child must hear
        signal.signal(signal.SIGINT, signal.default_int_handler)
        l = imshard.Loader(sys.argv[1], 64, 384, threads=1, prefetch=1)
        print("ready", flush=True)
        t0 = time.time()
        try:
            for e in range(100000):
                for x in l.epoch(e):
                    pass
            print("finished", flush=True)
        except KeyboardInterrupt:
            print("interrupted %.2f" % (time.time() - t0), flush=True)
    """))
    p = subprocess.Popen([sys.executable, str(script), sample["train"]], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    took = time.time() - t0
    assert p.returncode == 0, err
    assert out.startswith("interrupted"), out + err
    assert took < 3, "Ctrl-C took %.1f s" % took


@pytest.fixture(scope="module")
def slow_split(sample, imshard_bin, tmp_path_factory):
    """The sample's train records as 1536-pixel PNGs (a PNG decodes whole,
    at full size): one batch of all 80 on one thread takes seconds to make
    (about 5 s where this was written)."""
    d = tmp_path_factory.mktemp("slow")
    packed = os.path.dirname(sample["train"])
    run(imshard_bin, "pack", os.path.join(packed, "train.lst"), sample["img"], "-o",
        d / "train", "--resize", "1536", "--encoding", "png", "--classes",
        os.path.join(packed, "classes.txt"), "-q")
    return str(d / "train.json")


@pytest.mark.parametrize("how", ["bench_load", "loader"])
def test_ctrl_c_during_a_slow_first_batch(slow_split, tmp_path, how):
    # Ctrl-C while the first batch is being made: before, bench_load looked
    # for it only between batches, and a Loader's `with` block, whose
    # next() had raised at once, closed the loader only once the batch was
    # made; each took the batch's whole time. Now the wait is cut into
    # slices and stopping leaves the batch where its workers are: the
    # interrupt arrives within a second, and no thread is left behind
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys, time, imshard
        signal.signal(signal.SIGINT, signal.default_int_handler)
        tasks = lambda: len(os.listdir("/proc/self/task"))
        base = tasks()
        def load():
            if sys.argv[2] == "bench_load":
                imshard.bench_load(sys.argv[1], 80, 64, threads=1, epochs=1, seconds=0)
            else:
                with imshard.Loader(sys.argv[1], 80, 64, rank=0, world=1, threads=1,
                                    prefetch=1) as l:
                    next(iter(l))
        print("ready", flush=True)
        t0 = time.time()
        try:
            load()
            print("finished %.2f" % (time.time() - t0), flush=True)
        except KeyboardInterrupt:
            print("interrupted %.2f" % (time.time() - t0), flush=True)
        t0 = time.time()
        while tasks() > base and time.time() - t0 < 5:
            time.sleep(0.02)
        print("threads", tasks() - base, flush=True)
    """))
    p = subprocess.Popen([sys.executable, str(script), slow_split, how],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.5)  # the loader is open and at its first batch
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    line = p.stdout.readline()
    took = time.time() - t0
    p.wait(timeout=30)
    # read through the buffer readline() filled (communicate() reads the
    # pipe alone, and would miss a line that came with the first)
    out, err = p.stdout.read(), p.stderr.read()
    assert p.returncode == 0, err
    assert line.startswith("interrupted"), line + out + err
    assert took < 1, "Ctrl-C took %.1f s" % took
    assert out.split() == ["threads", "0"], out + err


def test_a_loader_opened_again(sample):
    # before: __init__ again on a loader closed while a batch it handed out
    # was still viewed said "the loader is already open"
    from imshard import _imshard
    args = (sample["val"], 2, 8)
    kw = dict(train=False, threads=1)
    c = _imshard.Loader(*args, **kw)
    with pytest.raises(imshard.Error, match=r"cannot open the loader of '.*val\.json' again: it "
                       r"is open \(close\(\) it first, or make a new Loader\)$"):
        c.__init__(*args, **kw)
    c.start_epoch(0)
    view = memoryview(c.next()[0])
    first = view.tobytes()
    c.close()
    with pytest.raises(imshard.Error, match=r"cannot open the loader of '.*val\.json' again: it "
                       r"is closed, but 1 batch it handed out is still viewed \(arrays or "
                       r"tensors of them are alive\) and holds its memory; drop them first, or "
                       r"make a new Loader$"):
        c.__init__(*args, **kw)
    assert c.closed and c.exported == 1 and view.tobytes() == first
    del view
    # nothing viewed any more: the ring was freed, and opening again works
    c.__init__(*args, **kw)
    assert not c.closed
    c.start_epoch(0)
    assert bytes(memoryview(c.next()[0])) == first
    c.close()


def test_close_from_another_thread(sample):
    # batches of 8 at 384 px on one thread, ten an epoch: the iterating
    # thread waits in next() most of the time; close() from here must wait
    # for it to leave the C loader (not free the loader under it) and the
    # loop must end with imshard.Error, the loader's own kind, not
    # ArgumentError
    import threading
    base = threads_now()
    loader = imshard.Loader(sample["train"], 8, 384, threads=1, prefetch=1)
    got, seen = [], threading.Event()

    def consume():
        try:
            for e in range(1000):
                for x in loader.epoch(e):
                    seen.set()
                    del x
            got.append("finished")
        except Exception as exc:  # noqa: BLE001 - the kind is what is checked
            got.append(exc)

    t = threading.Thread(target=consume)
    t.start()
    assert seen.wait(30), "no batch came"
    for _ in range(3):
        time.sleep(0.05)
        t0 = time.time()
        loader.close()
        assert time.time() - t0 < 5
    t.join(10)
    assert not t.is_alive(), "the consumer is still in next()"
    assert len(got) == 1 and type(got[0]) is imshard.Error, got
    assert "closed" in str(got[0])
    assert settle(base) <= base, "threads left behind"


def test_close_at_exit_while_a_daemon_thread_waits_in_the_loader(sample, tmp_path):
    # close() from a __del__ run as the interpreter finalizes, with a
    # daemon thread waiting in next(): that thread never gets the GIL back,
    # and close() waited for it to leave for ever (the exit hung)
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent("""
        import builtins, sys, threading, imshard
        loader = imshard.Loader(sys.argv[1], 8, 384, rank=0, world=1, threads=1, prefetch=1)
        seen = threading.Event()
        def consume():
            for e in range(10**6):
                for x in loader.epoch(e):
                    seen.set()
                    del x
        threading.Thread(target=consume, daemon=True).start()
        assert seen.wait(30), "no batch came"
        class ClosesAtExit:
            def __del__(self):
                loader.close()
                print("closed", flush=True)
        builtins.closes_at_exit = ClosesAtExit()  # finalized after the threads stop
    """))
    p = subprocess.run([sys.executable, str(script), sample["train"]], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "closed\n", (p.returncode, p.stdout, p.stderr)


def test_rank_defaults(sample, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.warns(UserWarning, match="rank 1 of 3, from RANK/WORLD_SIZE"):
        l = imshard.Loader(sample["val"], 4, 16, train=False, threads=1)
    assert (l.rank, l.world) == (1, 3)
    l.close()
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert imshard.distributed_rank()[:2] == (0, 1)


def test_bad_records_are_replaced_and_counted(sample, copy_split):
    m = copy_split(sample["train"])
    split = imshard.Split(m)
    # damage one payload byte of a record in the first shard: the record's
    # CRC no longer matches, the loader replaces it and counts it
    rec = split[3]
    split.close()
    shard = os.path.join(os.path.dirname(m), "train-00000-of-00003.mdb")
    data = bytearray(open(shard, "rb").read())
    piece = rec.payload[-200:-168]  # entropy-coded data: unique
    assert data.count(piece) == 1
    at = data.find(piece)
    data[at] ^= 0xFF
    open(shard, "wb").write(bytes(data))
    loader = imshard.Loader(m, 4, 16, train=False, threads=2)
    with pytest.warns(UserWarning, match="bad records replaced"):
        n = sum(len(b[1]) for b in loader)
    assert n == len(imshard.Split(m))
    st = loader.stats
    assert st["bad_records"] == 1 and "record 3" in st["last_bad"]
    loader.close()


def test_a_bad_record_at_a_path_not_utf8_is_reported(sample, tmp_path):
    # the loader's note of a bad record names its shard's path: where that
    # is not UTF-8, the end of the epoch (and loader.stats, bench_load)
    # raised UnicodeDecodeError before; the bytes are shown as \xHH
    d = os.fsencode(str(tmp_path)) + b"/d\xe9"
    os.mkdir(d)
    src = os.path.dirname(sample["train"])
    for f in os.listdir(src):
        if f.startswith("train"):
            with open(os.path.join(src, f), "rb") as a, open(d + b"/" + f.encode(), "wb") as b:
                b.write(a.read())
    with imshard.Split(sample["train"]) as split:
        piece = split[3].payload[-200:-168]
    shard = d + b"/train-00000-of-00003.mdb"
    data = bytearray(open(shard, "rb").read())
    assert data.count(piece) == 1
    data[data.find(piece)] ^= 0xFF
    open(shard, "wb").write(bytes(data))
    with imshard.Loader(d + b"/train.json", 4, 16, train=False, rank=0, world=1,
                        threads=1) as loader:
        with pytest.warns(UserWarning, match="bad records replaced"):
            assert sum(len(b[1]) for b in loader) == 80
        assert loader.stats["bad_records"] == 1
        assert "d\\xe9" in loader.stats["last_bad"], loader.stats["last_bad"]
    r = imshard.bench_load(d + b"/train.json", 4, 16, train=False, epochs=1, seconds=0,
                           threads=1)
    assert r["stats"]["bad_records"] == 1 and "d\\xe9" in r["stats"]["last_bad"]


def test_bench_load_in_process(sample):
    r = imshard.bench_load(sample["train"], 8, 32, epochs=2, seconds=0, threads=2)
    n = len(imshard.Loader(sample["train"], 8, 32, threads=1))
    assert r["batches"] == 2 * n and r["images"] == 16 * n and r["images_per_s"] > 0


def test_a_pass_ended_by_a_newer_one_says_so(sample):
    # before: the first iterator silently yielded nothing more
    with imshard.Loader(sample["train"], 8, 32, rank=0, world=1, threads=1) as L:
        first = iter(L)
        next(first)
        second = iter(L)
        assert sum(1 for _ in second) == len(L)
        with pytest.raises(imshard.Error, match="ended by a newer pass"):
            next(first)


def test_a_new_pass_from_another_thread_loses_no_batch(sample):
    # one thread waits in next() for epoch 0's batches while another
    # starts epoch 1: before, the waiting thread took the first batches of
    # the new pass (a data race inside the C loader, which has one
    # consumer), so the new pass came out short or hit the ring limit
    import threading
    m = sample["train"]
    want = [b.indices.copy() for b in imshard.Loader(m, 8, 384, rank=0, world=1, threads=1,
                                                       copy=True).epoch(1)]
    # on a loaded machine the old pass can run to its end before the new
    # one starts, and then nothing was raced: tried again, a few times
    for attempt in range(10):
        with imshard.Loader(m, 8, 384, rank=0, world=1, threads=1, prefetch=1) as L:
            got, inside = [], threading.Event()

            def old_pass():
                try:
                    for b in L.epoch(0):
                        del b
                        inside.set()
                    got.append("finished")
                except imshard.Error as exc:
                    got.append(exc)

            t = threading.Thread(target=old_pass)
            t.start()
            assert inside.wait(30), "no batch came"
            time.sleep(0.05)  # the old pass is waiting for its next batch
            new = [b.indices.copy() for b in L.epoch(1)]
            t.join(30)
            assert not t.is_alive()
            assert len(new) == len(want) and all(np.array_equal(a, b) for a, b in zip(new, want))
            assert len(got) == 1, got
            if got[0] != "finished":
                assert isinstance(got[0], imshard.Error), got
                assert "ended by a newer pass" in str(got[0])
                return
    pytest.fail("the old pass ran to its end before the new one began, 10 times out of 10")


def test_a_forked_child_is_refused_the_parents_loader(sample, tmp_path):
    # the loader's threads are not copied by fork: before, a child that
    # went on with the parent's loader (a fork-started DataLoader worker,
    # a multiprocessing pool) waited for ever for batches no thread made,
    # or hung starting an epoch or giving a batch back
    script = tmp_path / "fork.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys, imshard
        l = imshard.Loader(sys.argv[1], 8, 128, rank=0, world=1, threads=2, prefetch=1)
        it = iter(l)
        b = next(it)
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a hang ends the child, not the test
            for what, call in (("next", lambda: next(it)), ("epoch", lambda: next(iter(l))),
                               ("stats", lambda: l.stats)):
                try:
                    call()
                    print(what, "worked", flush=True)
                except imshard.Error as e:
                    print(what, "refused:", e, flush=True)
            del b
            l.close()
            print("closed", l.closed, flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("child status", status, flush=True)
        del b
        print("parent", sum(1 for _ in it) + 1 == len(l), sum(1 for _ in l) == len(l), flush=True)
        l.close()
    """))
    p = subprocess.run([sys.executable, str(script), sample["train"]], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[-2:] == ["child status 0", "parent True True"], p.stdout + p.stderr
    for what, line in zip(("next", "epoch", "stats"), lines):
        assert line.startswith(what + " refused: cannot use a loader opened by process"), line
        assert "fork" in line
    assert lines[3] == "closed True", p.stdout


def test_batch_memory_honours_buffer_requests(sample):
    # a plain (PyBUF_SIMPLE) request is one dimension of bytes: before,
    # the 4-d shape came with it, and hashlib refused the batch
    # ("Buffer must be single dimension")
    import ctypes
    import hashlib
    with imshard.Loader(sample["train"], 4, 16, rank=0, world=1, threads=1) as L:
        L._c.start_epoch(0)
        t = L._c.next()
        mem, images = t[0], np.asarray(t[0])
        assert images.shape == (4, 3, 16, 16) and images.dtype == np.float32
        assert hashlib.md5(mem).hexdigest() == hashlib.md5(images.tobytes()).hexdigest()
        assert memoryview(mem).shape == (4, 3, 16, 16) and memoryview(mem).format == "f"

        class Py_buffer(ctypes.Structure):
            _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object),
                        ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                        ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                        ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p),
                        ("strides", ctypes.c_void_p), ("suboffsets", ctypes.c_void_p),
                        ("internal", ctypes.c_void_p)]

        get, release = ctypes.pythonapi.PyObject_GetBuffer, ctypes.pythonapi.PyBuffer_Release
        get.argtypes = [ctypes.py_object, ctypes.POINTER(Py_buffer), ctypes.c_int]
        release.argtypes = [ctypes.POINTER(Py_buffer)]
        SIMPLE, WRITABLE, FORMAT, ND, STRIDES = 0, 0x1, 0x4, 0x8, 0x10 | 0x8
        F_CONTIGUOUS = 0x40 | STRIDES
        for flags, ndim, itemsize, fmt in ((SIMPLE, 1, 1, None), (WRITABLE, 1, 1, None),
                                           (FORMAT, 1, 1, b"B"), (ND, 4, 4, None),
                                           (ND | FORMAT, 4, 4, b"f"), (STRIDES, 4, 4, None)):
            v = Py_buffer()
            assert get(mem, ctypes.byref(v), flags) == 0
            try:
                assert (v.ndim, v.itemsize, v.format, v.len) == (ndim, itemsize, fmt,
                                                                 images.nbytes), flags
                assert bool(v.shape) == (flags & ND == ND) and bool(v.strides) == (flags & STRIDES == STRIDES)
                assert v.buf == mem.address
            finally:
                release(ctypes.byref(v))
        with pytest.raises(BufferError, match="not Fortran-contiguous"):
            get(mem, ctypes.byref(Py_buffer()), F_CONTIGUOUS)
        del t, mem, images
        assert L._c.exported == 0


def test_batches_pickle_and_copy(sample):
    # a Batch is a tuple with attributes: before, pickle.dumps made bytes
    # that pickle.loads refused, and copy.copy / copy.deepcopy raised
    # ("Batch.__new__() missing 1 required positional argument: 'labels'"),
    # so a batch could not go through a multiprocessing queue
    import copy
    import pickle
    with imshard.Loader(sample["val"], 4, 16, train=False, rank=0, world=1, threads=1) as L:
        b = next(iter(L))
        for c in (pickle.loads(pickle.dumps(b)), copy.copy(b), copy.deepcopy(b)):
            assert type(c) is imshard.Batch and len(c) == 2
            assert np.array_equal(c[0], b[0]) and np.array_equal(c.labels, b.labels)
            assert np.array_equal(c.indices, b.indices) and np.array_equal(c.padded, b.padded)
            assert (c.epoch, c.step, c.address) == (b.epoch, b.step, b.address)
        # an unpickled or deep-copied batch owns its pixels: it holds no ring slot
        kept = [pickle.loads(pickle.dumps(b)), copy.deepcopy(b)]
        del b, c
        assert L._c.exported == 0
        assert all(np.array_equal(k[0], kept[0][0]) for k in kept)


def test_every_size_the_loader_takes_bench_load_takes(sample, imshard_bin, tmp_path):
    # one bound for the sample side, the library's (aug_transform: 1 to
    # 4096): before, imshard.Loader and imshard-train took 1..7, which
    # `imshard bench-load --size` refused (8..4096), so such a loader's
    # batches could not be checked against the command's
    for size in (1, 4, 7):
        d = tmp_path / ("dump%d" % size)
        run(imshard_bin, "bench-load", sample["val"], "--batch", 4, "--size", size, "--threads", 1,
            "--epochs", 1, "--seconds", 0, "--val", "--dtype", "u8", "--dump", 8, d,
            "--dump-format", "raw", "--quiet")
        ref = dumped(d)
        with imshard.Loader(sample["val"], 4, size, train=False, rank=0, world=1, threads=1,
                            dtype="uint8") as L:
            got = [(int(lab), img.tobytes()) for b in L.epoch(0) for img, lab in zip(*b)][:8]
        assert got == [ref[k] for k in range(8)], size
    for size in (0, 4097):
        p = run(imshard_bin, "bench-load", sample["val"], "--size", size, ok=False)
        assert p.returncode == 2 and "--size must be between 1 and 4096, got %d" % size in p.stderr
        with pytest.raises(imshard.ArgumentError, match="^size must be 1..4096, got %d$" % size):
            imshard.Loader(sample["val"], 4, size, rank=0, world=1)
        with pytest.raises(imshard.ArgumentError, match="^size must be 1..4096, got %d$" % size):
            imshard.bench_load(sample["val"], 4, size, epochs=1)


def test_shard_owning_on_a_split_not_shuffled_is_told(sample, imshard_bin, tmp_path):
    # each rank reads whole shards: on a split packed in list order (sorted
    # by class) ranks see different classes. `imshard bench-load` warns;
    # before, imshard.Loader and bench_load said nothing
    lst = sample["dir"] / "packed" / "train.lst"
    rep = imshard.pack(lst, sample["img"], tmp_path / "s", order="list", shards=4)
    m = rep["manifest"]
    p = run(imshard_bin, "bench-load", m, "--shard-owning", "--rank", 1, "--world", 2,
            "--epochs", 1, "--seconds", 0, "--size", 16, "--batch", 4)
    assert "whose records are not shuffled" in p.stderr
    why = r"^imshard: loader: shard-owning mode on '%s', whose records are not shuffled" % re.escape(m)
    with pytest.warns(UserWarning, match=why):
        imshard.Loader(m, 4, 16, rank=1, world=2, shard_owning=True, threads=1).close()
    with pytest.warns(UserWarning, match=why):
        imshard.bench_load(m, 4, 16, rank=1, world=2, shard_owning=True, threads=1, epochs=1,
                           seconds=0)
    # a shuffled split, or reading by records, is nothing to tell
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        imshard.Loader(sample["train"], 4, 16, rank=1, world=2, shard_owning=True,
                       threads=1).close()
        imshard.Loader(m, 4, 16, rank=1, world=2, threads=1).close()


def test_a_shard_truncated_under_an_open_loader_is_named(sample, copy_split, tmp_path):
    # every shard truncated to nothing after the loader opened and before
    # its threads read anything: the first read, in a loader thread,
    # faults in a shard's map
    m = copy_split(sample["train"])
    d = os.path.dirname(m)
    shards = [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".mdb")]
    script = tmp_path / "truncate.py"
    script.write_text(textwrap.dedent("""
        import os, sys, imshard
        loader = imshard.Loader(sys.argv[1], 4, 32, threads=2, rank=0, world=1)
        for shard in sys.argv[2:]:
            os.truncate(shard, 0)
        next(iter(loader))
        print("made a batch of truncated shards", flush=True)
    """))
    p = subprocess.run([sys.executable, str(script), m] + shards, capture_output=True,
                       text=True, timeout=60, env=default_sigbus_env())
    # before: killed by SIGBUS, nothing said
    got = re.match(r"imshard: cannot read '(.*)': the file shrank while it was being read "
                   r"\(truncated or rewritten in place\?\); stopping\n$", p.stderr)
    assert got and got.group(1) in shards, (p.returncode, p.stderr)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "made a batch" not in p.stdout


def test_a_loader_refuses_to_be_copied_or_pickled(sample):
    # before: copy.copy made a second Loader over the same C loader, and
    # dropping that copy closed the original (its __del__ closed it);
    # pickle said "cannot pickle 'imshard._imshard.Loader' object"
    import copy
    import pickle
    l = imshard.Loader(sample["val"], 2, 8, rank=0, world=1, threads=1, train=False)
    for call in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="cannot copy or pickle an imshard.Loader: its "
                           "threads and batch ring are this process's"):
            call(l)
    assert not l.closed
    assert sum(1 for _ in l) == len(l)
    l.close()


def test_a_closed_loader_says_so_in_its_repr(sample):
    # before: the repr of a closed loader was the open one's
    l = imshard.Loader(sample["val"], 2, 8, rank=0, world=1, threads=1, train=False)
    assert "closed" not in repr(l)
    l.close()
    assert repr(l).endswith(", closed)"), repr(l)


def test_batch_capacity_is_what_a_batch_holds(sample):
    # a validation batch larger than the rank's share gets memory for the
    # share only, so a caller that page-locks the batches (imshard.torch)
    # must register that much, not batch_size samples (before: info had
    # no such figure, and imshard.torch registered past the memory)
    with imshard.Loader(sample["val"], 4096, 8, train=False, rank=0, world=1, threads=1) as L:
        per = L.info["records_per_rank"]
        assert per < 4096 and L.info["batch_capacity"] == per
        (images, labels), = list(L.epoch(0))
        assert len(images) == per
    with imshard.Loader(sample["val"], 4, 8, train=False, rank=0, world=1, threads=1) as L:
        assert L.info["batch_capacity"] == 4
