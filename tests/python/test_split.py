"""imshard.Split: records, decode of every fixture kind against the C
decoder's output reached through the command line, verify, and the errors
of bad manifests and damaged shards (the C library's message)."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import imshard
from conftest import default_sigbus_env, run

# every odd-but-valid image make_images writes
KINDS = ["rgb.jpg", "gray.jpg", "cmyk.jpg", "cmyk_adobe.jpg", "ycck.jpg", "progressive.jpg",
         "odd_sampling.jpg", "exif_after_xmp.jpg", "png_as.JPEG", "rgb.png", "gray.png",
         "gray1.png", "gray2.png", "gray4.png", "gray16.png", "rgb16.png", "gray_alpha.png",
         "rgba.png", "rgb_interlaced.png", "rgba_interlaced.png", "palette.png",
         "palette_trns.png", "exif_6.png"] + ["exif_%d.jpg" % k for k in range(1, 9)]


def over_white(c, a):
    t = c.astype(np.uint32) * a + 255 * (255 - a.astype(np.uint32)) + 128
    return ((t + (t >> 8)) >> 8).astype(np.uint8)


def png_as_rgb(path):
    """A PNG the C decoder wrote (packed with encoding png), as the C
    decoder's RGB mode gives it: grey replicated, alpha over white."""
    from PIL import Image
    im = Image.open(path)
    a = np.asarray(im)
    if im.mode == "L":
        return np.repeat(a[:, :, None], 3, axis=2)
    if im.mode == "LA":
        return np.repeat(over_white(a[:, :, 0], a[:, :, 1])[:, :, None], 3, axis=2)
    if im.mode == "RGB":
        return a
    if im.mode == "RGBA":
        return np.stack([over_white(a[:, :, c], a[:, :, 3]) for c in range(3)], axis=2)
    raise AssertionError("unexpected PNG mode %s in %s" % (im.mode, path))


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory, make_images_bin, imshard_bin):
    d = tmp_path_factory.mktemp("fx")
    (d / "img").mkdir()
    run(make_images_bin, d / "img")
    lst = d / "kinds.lst"
    lst.write_text("".join("%d\t%d\t%s\n" % (i, i % 3, k) for i, k in enumerate(KINDS)))
    # keep: the files as they are; png: decoded by the C decoder, stored
    # losslessly; extracted back to files by the command line
    run(imshard_bin, "pack", lst, d / "img", "-o", d / "keep", "-q")
    run(imshard_bin, "pack", lst, d / "img", "-o", d / "png", "--encoding", "png", "-q")
    run(imshard_bin, "pack", lst, d / "img", "-o", d / "raw", "--encoding", "raw", "-q")
    run(imshard_bin, "extract", d / "png.json", "-o", d / "extracted")
    return d


def test_decode_given_a_path_says_it_takes_bytes(fixtures):
    # before: "a bytes-like object is required, not 'str'", no hint
    f = fixtures / "extracted" / sorted(os.listdir(fixtures / "extracted"))[0]
    for arg in (str(f), f):
        with pytest.raises(TypeError, match=r"decode takes the image's bytes, not a path"):
            imshard.decode(arg)
    assert imshard.decode(f.read_bytes()).ndim == 3


def test_decode_of_every_fixture_kind_equals_the_c_decoder(fixtures):
    keep = imshard.Split(fixtures / "keep.json")
    raw = imshard.Split(fixtures / "raw.json")
    assert len(keep) == len(KINDS)
    files = sorted(f for f in os.listdir(fixtures / "extracted") if f.endswith(".png"))
    assert len(files) == len(KINDS)
    for i, kind in enumerate(KINDS):
        ref = png_as_rgb(fixtures / "extracted" / files[i])
        got = keep.decode(i)
        assert got.dtype == np.uint8 and got.shape == ref.shape, (kind, got.shape, ref.shape)
        assert np.array_equal(got, ref), kind
        # raw records (pixels as the packer decoded them) give the same
        assert np.array_equal(raw.decode(i), ref), kind + " (raw)"
        # and imshard.decode on the file's bytes
        data = open(fixtures / "img" / kind, "rb").read()
        assert np.array_equal(imshard.decode(data), ref), kind + " (decode)"
        rec = keep[i]
        assert rec.payload == data and rec.original and rec.label == i % 3
        assert rec.size == (ref.shape[1], ref.shape[0])
        assert (rec.orig_width, rec.orig_height) == rec.size


def test_records_and_manifest(sample):
    s = imshard.Split(sample["train"])
    m = json.load(open(sample["train"]))
    assert len(s) == m["records"] == sum(s.class_counts)
    assert s.classes == m["classes"]
    assert s[-1] == s[len(s) - 1]
    assert len(s[2:5]) == 3
    with pytest.raises(IndexError):
        s[len(s)]
    assert s.verify(decode=True) == {"records": len(s), "digests_checked": True}
    s.close()
    s.close()


def test_record_repr_gives_the_payload_size_not_its_bytes(sample):
    # before: repr(split[0]) printed every byte of the image file (17 KB
    # for one sample record)
    with imshard.Split(sample["train"]) as s:
        rec = s[0]
    r = repr(rec)
    assert r.startswith("Record(payload=<%d bytes>, label=%d, " % (len(rec.payload), rec.label)), r
    assert "encoding=%r" % rec.encoding in r and r.endswith("original=%r)" % rec.original), r
    assert len(r) < 300, r


def cli_message(p, cmd):
    err = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(err) == 1, p.stderr
    prefix = "imshard: %s: " % cmd
    assert err[0].startswith(prefix), err[0]
    return err[0][len(prefix):]


def test_bad_manifests_raise_the_c_message(tmp_path, imshard_bin, sample, copy_split):
    cases = {}
    cases["missing"] = str(tmp_path / "none.json")
    (tmp_path / "garbage.json").write_text("{not json")
    cases["garbage"] = str(tmp_path / "garbage.json")
    m = json.load(open(sample["val"]))
    m["records"] += 1
    bad = copy_split(sample["val"])
    doc = json.load(open(bad))
    doc["records"] += 1
    open(bad, "w").write(json.dumps(doc))
    cases["counts"] = bad
    for what, path in cases.items():
        ref = cli_message(run(imshard_bin, "info", path, ok=False), "info")
        with pytest.raises(imshard.Error) as e:
            imshard.Split(path)
        assert str(e.value) == ref, what
        ref = cli_message(run(imshard_bin, "bench-load", path, "--quiet", ok=False), "bench-load")
        with pytest.raises(imshard.Error) as e:
            imshard.Loader(path, 4, 16)
        assert str(e.value) == ref, what
        assert isinstance(e.value, OSError)


def test_damaged_shards_raise_the_c_message(tmp_path, imshard_bin, sample, copy_split):
    m = copy_split(sample["train"])
    shard = os.path.join(os.path.dirname(m), "train-00001-of-00003.mdb")
    data = bytearray(open(shard, "rb").read())
    # a branch/leaf page's header garbled: the reader's page check names it
    data[4096 * 2 + 10: 4096 * 2 + 16] = b"\xff" * 6
    open(shard, "wb").write(bytes(data))
    ref = cli_message(run(imshard_bin, "bench-load", m, "--quiet", ok=False), "bench-load")
    with pytest.raises(imshard.Error) as e:
        imshard.Split(m)
    assert str(e.value) == ref
    assert "train-00001-of-00003.mdb" in ref
    # a truncated shard
    m2 = copy_split(sample["val"])
    shard = os.path.join(os.path.dirname(m2), "val-00002-of-00003.mdb")
    os.truncate(shard, os.path.getsize(shard) // 2)
    ref = cli_message(run(imshard_bin, "bench-load", m2, "--quiet", ok=False), "bench-load")
    with pytest.raises(imshard.Error) as e:
        imshard.Loader(m2, 4, 16, train=False)
    assert str(e.value) == ref


def test_verify_names_a_bad_record(tmp_path, imshard_bin, sample, copy_split):
    m = copy_split(sample["train"])
    s = imshard.Split(m)
    piece = s[5].payload[-300:-268]
    s.close()
    shard = os.path.join(os.path.dirname(m), "train-00000-of-00003.mdb")
    data = bytearray(open(shard, "rb").read())
    assert data.count(piece) == 1
    data[data.find(piece)] ^= 0x55
    open(shard, "wb").write(bytes(data))
    p = run(imshard_bin, "verify", m, ok=False)
    assert p.returncode == 1
    with pytest.raises(imshard.Error) as e:
        imshard.Split(m).verify()
    assert "record 5" in str(e.value) and "checksum" in str(e.value)
    assert str(e.value).split(" (and")[0] in p.stderr


def test_verify_checks_the_digest(copy_split, sample):
    """A label changed with its header CRC and the class counts fixed up:
    only the shard digest tells; a format 1 manifest says its digests were
    not checked."""
    edit = os.path.join(os.path.dirname(__file__), "..", "cli", "split_edit.py")
    m = copy_split(sample["train"])
    label = imshard.Split(m)[5].label
    subprocess.run([sys.executable, edit, "relabel", m, "5", str((label + 1) % 5)], check=True)
    with pytest.raises(imshard.Error) as e:
        imshard.Split(m).verify()
    assert "train-00000-of-00003.mdb': digest" in str(e.value)
    m = copy_split(sample["val"])
    subprocess.run([sys.executable, edit, "format1", m], check=True)
    s = imshard.Split(m)
    assert s.verify() == {"records": len(s), "digests_checked": False}


def test_argument_errors_are_value_errors(sample):
    with pytest.raises(imshard.ArgumentError) as e:
        imshard.Loader(sample["train"], 4, 16, layout="chw")
    assert isinstance(e.value, ValueError) and isinstance(e.value, imshard.Error)
    for bad in (dict(augment="bogus"), dict(dtype="float64"), dict(std=(1, 0, 1)),
                dict(rank=2, world=2), dict(batch_size=0), dict(mean=(1, 2))):
        kw = dict(batch_size=4)
        kw.update(bad)
        with pytest.raises(ValueError):
            imshard.Loader(sample["train"], kw.pop("batch_size"), 16, **kw)


def test_threads_sharing_a_split_finish(sample):
    # a thread holding the split's lock takes the GIL back before it lets
    # the lock go: another thread must never wait for the lock holding
    # the GIL (before: two threads decoding deadlocked within seconds)
    import threading

    s = imshard.Split(sample["train"])
    errors = []

    def work():
        try:
            for _ in range(5):
                for i in range(len(s)):
                    s.decode(i)
                    s[i]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, daemon=True) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts), "threads sharing a Split deadlocked"
    assert errors == []
    s.close()


def test_errors_with_bytes_that_are_not_utf8_are_imshard_errors(tmp_path):
    # the message quotes the path's bytes: shown escaped, still imshard.Error
    missing = os.fsencode(str(tmp_path)) + b"/nu\xe9/missing.json"
    with pytest.raises(imshard.Error) as e:
        imshard.Split(missing)
    assert "nu\\xe9" in str(e.value)


def test_huge_record_indices_are_index_errors(sample):
    # before: an index past 64 bits raised OverflowError ("int too big to
    # convert"), not the IndexError the manual promises
    with imshard.Split(sample["val"]) as s:
        for i in (2**63, 2**64, 10**30, -2**63 - 1, -10**30):
            with pytest.raises(IndexError, match="out of range"):
                s[i]
            with pytest.raises(IndexError, match="out of range"):
                s.decode(i)
        assert s[-1] == s[len(s) - 1]


def test_text_that_is_not_utf8_opens_and_verifies(sample, copy_split, tmp_path):
    # a class name the manifest holds in bytes that are not UTF-8 (pack
    # refuses them; an edited or foreign manifest may have one): before,
    # Split() raised "SystemError: <method 'manifest' ...> returned a
    # result with an exception set"; now the name comes with the bytes
    # kept (surrogateescape, as os.fsdecode) and verify() names it
    m = copy_split(sample["train"])
    with open(m, "rb") as f:
        text = f.read()
    first = imshard.Split(sample["train"]).classes[0].encode()
    with open(m, "wb") as f:
        f.write(text.replace(b'"' + first + b'"', b'"\xff' + first[1:] + b'"', 1))
    with imshard.Split(m) as s:
        assert os.fsencode(s.classes[0]) == b"\xff" + first[1:]
        with pytest.raises(imshard.Error, match=r"class 0 \('\\xff.*is not UTF-8") as e:
            s.verify()
        assert len(e.value.problems) == 1
    # a problem line naming a shard at a path that is not UTF-8: before,
    # verify() raised UnicodeDecodeError instead of imshard.Error
    d = os.fsencode(str(tmp_path)) + b"/d\xe9"
    os.mkdir(d)
    src = os.path.dirname(sample["train"])
    for f in os.listdir(src):
        if f.startswith("train"):
            with open(os.path.join(src, f), "rb") as a, open(d + b"/" + f.encode(), "wb") as b:
                b.write(a.read())
    shard = d + b"/" + sorted(f for f in os.listdir(src) if f.endswith(".mdb"))[0].encode()
    with open(shard, "r+b") as f:
        data = bytearray(f.read())
        k = data.find(b"JFIF") + 400
        data[k] ^= 0xFF
        f.seek(0)
        f.write(data)
    with imshard.Split(d + b"/train.json") as s:
        with pytest.raises(imshard.Error) as e:
            s.verify()
        assert any("d\\xe9" in p for p in e.value.problems), e.value.problems


# A child that opens a split, truncates the shard of its last record to
# nothing before reading anything of it (a re-pack, a copy over it, a
# full disk during rsync) and reads that record: LMDB reads the shard's
# map, whose pages are gone.
TRUNCATED_UNDER_SPLIT = textwrap.dedent("""
    import os, sys, imshard
    split = imshard.Split(sys.argv[1])
    os.truncate(sys.argv[2], 0)
    split[len(split) - 1]
    print("read a record of a truncated shard", flush=True)
""")


@pytest.mark.parametrize("faulthandler", [False, True])
def test_a_shard_truncated_under_an_open_split_is_named(copy_split, sample, tmp_path,
                                                        faulthandler):
    m = copy_split(sample["train"])
    d = os.path.dirname(m)
    shard = os.path.join(d, sorted(f for f in os.listdir(d) if f.endswith(".mdb"))[-1])
    script = tmp_path / "truncate.py"
    script.write_text(TRUNCATED_UNDER_SPLIT)
    flags = ["-X", "faulthandler"] if faulthandler else []
    p = subprocess.run([sys.executable] + flags + [str(script), m, shard],
                       capture_output=True, text=True, timeout=60, env=default_sigbus_env())
    # before: killed by SIGBUS (the shell's bare "Bus error"), nothing said
    line = ("imshard: cannot read '%s': the file shrank while it was being read "
            "(truncated or rewritten in place?); stopping\n" % shard)
    assert p.stderr.startswith(line), p.stderr
    assert "read a record" not in p.stdout
    if faulthandler:
        # the handler that was there gets the fault after the line: its
        # traceback, then the default action
        assert "Fatal Python error: Bus error" in p.stderr[len(line):], p.stderr
        assert "truncate.py" in p.stderr, p.stderr
        assert p.returncode == -signal.SIGBUS, (p.returncode, p.stderr)
    else:
        assert p.returncode == 1, (p.returncode, p.stderr)
        assert p.stderr == line


def test_a_bus_error_outside_the_shards_keeps_its_default_action(sample, tmp_path):
    script = tmp_path / "kill.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys, imshard
        split = imshard.Split(sys.argv[1])
        split[0]
        os.kill(os.getpid(), signal.SIGBUS)
        print("survived SIGBUS", flush=True)
    """))
    p = subprocess.run([sys.executable, str(script), sample["train"]], capture_output=True,
                       text=True, timeout=60, env=default_sigbus_env())
    assert p.returncode == -signal.SIGBUS, (p.returncode, p.stdout, p.stderr)
    assert "imshard" not in p.stderr and "survived" not in p.stdout


def test_yes_no_arguments_take_only_true_or_false(sample, fixtures):
    # before: decode(data, apply_orientation="no") applied it, and
    # verify(decode="no") decoded every image
    data = (fixtures / "img" / "exif_6.jpg").read_bytes()
    for v in ("no", "False", 2, None, []):
        with pytest.raises(imshard.ArgumentError, match="^apply_orientation must be True or False"):
            imshard.decode(data, apply_orientation=v)
        with imshard.Split(sample["train"]) as s:
            with pytest.raises(imshard.ArgumentError, match="^decode must be True or False"):
                s.verify(decode=v)
    assert imshard.decode(data, 0).shape == imshard.decode(data, False).shape
    assert imshard.decode(data, np.False_).shape != imshard.decode(data, 1).shape
    with imshard.Split(sample["train"]) as s:
        assert s.verify(decode=1)["records"] == len(s)


def test_a_split_pickles_as_its_manifest(sample, copy_split, tmp_path, monkeypatch):
    # a map-style dataset holding a Split goes to a DataLoader worker
    # started with spawn or forkserver, or to a multiprocessing pool, by
    # pickle. Before: "cannot pickle 'imshard._imshard.Split' object",
    # and copy.copy shared the open split (closing one closed both)
    import copy
    import pickle
    m = copy_split(sample["train"])
    monkeypatch.chdir(os.path.dirname(m))
    s = imshard.Split(os.path.basename(m))  # a relative path
    monkeypatch.chdir(tmp_path.parent)      # the copy opens it from anywhere
    for c in (pickle.loads(pickle.dumps(s)), copy.copy(s), copy.deepcopy(s)):
        assert c is not s and len(c) == len(s) and c.classes == s.classes
        assert c[len(s) - 1] == s[len(s) - 1]
        assert (c.decode(3) == s.decode(3)).all()
        c.close()
        assert s[0] == s[0]  # the original stays open
    data = pickle.dumps(s)
    # a split packed again under the same name meanwhile is not the one
    # pickled: its records would silently differ from the pickler's
    first = s.classes[0]
    rows = [(0, "%s/%s" % (first, f)) for f in sorted(os.listdir(sample["img"] / first))[:3]]
    imshard.pack(rows, sample["img"], m, classes=s.classes, force=True)
    with pytest.raises(imshard.Error, match="changed since it was pickled"):
        pickle.loads(data)
    s.close()
    with pytest.raises(imshard.Error, match="cannot pickle a closed split"):
        pickle.dumps(s)


def test_a_split_packed_again_in_another_order_does_not_unpickle(sample, tmp_path):
    # the same rows packed again with another shuffle, every payload the
    # same size (raw 16x16): records, classes, counts and the shard's size
    # all alike, only which record sits where differs. Before: unpickled
    # without a word, a worker reading other records than its pickler
    import pickle
    classes = sorted(os.listdir(sample["img"]))
    rows = [(label, "%s/%s" % (c, f)) for label, c in enumerate(classes)
            for f in sorted(os.listdir(sample["img"] / c))[:4]]
    out = str(tmp_path / "again" / "s")
    kw = dict(classes=classes, encoding="raw", resize=16, center_crop=True, shards=1)
    imshard.pack(rows, sample["img"], out, shuffle=True, seed=1, **kw)
    with imshard.Split(out + ".json") as s:
        data = pickle.dumps(s)
        before = (s._identity(), [s[i].label for i in range(len(s))])
    imshard.pack(rows, sample["img"], out, shuffle=True, seed=2, force=True, **kw)
    with imshard.Split(out + ".json") as s:
        after = [s[i].label for i in range(len(s))]
        same = {k: v for k, v in s.manifest.items() if k != "shards"}
        assert same == {k: v for k, v in before[0].items() if k != "shards"}
        assert [(sh["first"], sh["records"], sh["bytes"]) for sh in s.manifest["shards"]] == \
            [(sh["first"], sh["records"], sh["bytes"]) for sh in before[0]["shards"]]
    assert after != before[1]  # the records moved
    with pytest.raises(imshard.Error, match="changed since it was pickled"):
        pickle.loads(data)


def test_a_closed_split_says_so(sample):
    # before: a closed split had no `closed`, and its repr was the open
    # one's, while every read raised "the split is not open"
    s = imshard.Split(sample["val"])
    assert not s.closed and "closed" not in repr(s)
    s.close()
    assert s.closed and repr(s).endswith(", closed)"), repr(s)


def test_a_manifest_of_another_type_is_named():
    # before: "expected str, bytes or os.PathLike object, not int"
    with pytest.raises(imshard.ArgumentError,
                       match=r"^manifest must be a path \(str, bytes or os.PathLike\), got 5$"):
        imshard.Split(5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_a_thread_reads_the_split_reads_it(sample):
    # fork copies only the forking thread: a thread of the parent decoding
    # at that moment held the split's lock, and the child's first read
    # waited for it for ever (every child hung)
    import threading
    import warnings

    s = imshard.Split(sample["train"])
    want, rec = s.decode(0), s[1]
    stop = threading.Event()

    def spin():
        i = 0
        while not stop.is_set():
            s.decode(i % len(s))
            i += 1

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    statuses = []
    try:
        for _ in range(5):
            with warnings.catch_warnings():  # 3.12: fork() of a threaded process
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                signal.alarm(10)
                ok = np.array_equal(s.decode(0), want) and s[1] == rec
                s.close()
                os._exit(0 if ok else 3)
            _, st = os.waitpid(pid, 0)
            statuses.append(st)
    finally:
        stop.set()
        t.join()
    s.close()
    assert statuses == [0] * 5, "children: %s (SIGALRM %d: hung)" % (
        [(os.WEXITSTATUS(st) if os.WIFEXITED(st) else -os.WTERMSIG(st)) for st in statuses],
        signal.SIGALRM)


def test_a_split_opened_again_while_a_thread_reads_it_survives(sample, tmp_path):
    # the type's __init__ on an open Split freed its reader, cursor and
    # codec while another thread read through them: a segmentation fault
    # within a few hundred reopenings
    script = tmp_path / "reopen.py"
    script.write_text(textwrap.dedent("""
        import sys, threading, imshard
        from imshard import _imshard
        s = _imshard.Split(sys.argv[1])
        n = min(len(s), len(_imshard.Split(sys.argv[2])))
        stop = threading.Event()
        def spin():
            i = 0
            while not stop.is_set():
                try:
                    s.decode(i % n)
                    s.record(i % n)
                except imshard.Error:
                    pass  # a record index past the split just swapped in
                i += 1
        t = threading.Thread(target=spin)
        t.start()
        for k in range(400):
            s.__init__(sys.argv[2] if k % 2 else sys.argv[1])
        stop.set()
        t.join()
        assert len(s) == len(_imshard.Split(sys.argv[2]))
        print("survived", flush=True)
    """))
    for _ in range(3):
        p = subprocess.run([sys.executable, str(script), sample["train"], sample["val"]],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and p.stdout == "survived\n", (p.returncode, p.stderr[-2000:])


def test_close_at_exit_while_a_daemon_thread_reads_the_split(sample, tmp_path):
    # close() from a __del__ run as the interpreter finalizes, with a
    # daemon thread decoding: that thread lets the split's lock go only
    # after taking the GIL back, which it never gets then, and close()
    # waited for the lock for ever (the exit hung)
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent("""
        import builtins, sys, threading, imshard
        s = imshard.Split(sys.argv[1])
        seen = threading.Event()
        def spin():
            i = 0
            while True:
                s.decode(i % len(s))
                i += 1
                seen.set()
        threading.Thread(target=spin, daemon=True).start()
        assert seen.wait(30), "no record decoded"
        class ClosesAtExit:
            # what it uses is bound here: module globals may be gone by then
            def __del__(self, s=s, read=sys.argv[2] == "read", Error=imshard.Error):
                if read:
                    try:
                        s[0]
                        print("read", flush=True)
                    except Error as e:
                        print(type(e).__name__, e, flush=True)
                s.close()
                print("closed", flush=True)
        builtins.closes_at_exit = ClosesAtExit()  # finalized after the threads stop
    """))
    p = subprocess.run([sys.executable, str(script), sample["train"], "close"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "closed\n", (p.returncode, p.stdout, p.stderr)
    # a read there ends with an error that says why (it waited for ever
    # too), unless the thread had let the lock go
    p = subprocess.run([sys.executable, str(script), sample["train"], "read"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert p.stdout in ("read\nclosed\n",
                        "Error cannot read the split: another thread was reading it when the "
                        "interpreter began to exit, and never will finish\nclosed\n"), p.stdout
