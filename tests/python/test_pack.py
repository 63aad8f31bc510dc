"""imshard.pack and imshard.convert: the same shards, lists and errors as
the command line, skipped files told and counted."""
import filecmp
import json
import os
import re
import shutil
import warnings

import numpy as np
import pytest

import imshard
from conftest import run


def shards(d, name):
    return sorted(f for f in os.listdir(d) if f.startswith(name + "-") and f.endswith(".mdb"))


def same_split(a_dir, b_dir, name):
    sa, sb = shards(a_dir, name), shards(b_dir, name)
    assert sa == sb and sa
    for f in sa:
        assert filecmp.cmp(os.path.join(a_dir, f), os.path.join(b_dir, f), shallow=False), f


def test_pack_equals_the_command(sample, imshard_bin, tmp_path):
    lst = sample["dir"] / "packed" / "train.lst"
    root = sample["img"]
    run(imshard_bin, "pack", lst, root, "-o", tmp_path / "cli" / "t", "--encoding", "jpeg",
        "--resize", "48", "--shards", "2", "-q")
    rep = imshard.pack(lst, root, tmp_path / "py" / "t", encoding="jpeg", resize=48, shards=2)
    same_split(tmp_path / "cli", tmp_path / "py", "t")
    assert rep["packed"] == rep["listed"] == len(imshard.Split(tmp_path / "py" / "t.json"))
    assert rep["skipped"] == 0 and rep["errors_file"] is None
    # rows from Python instead of a list file: the same records
    rows = []
    for line in open(lst):
        idx, label, path = line.rstrip("\n").split("\t")
        rows.append((int(idx), int(float(label)), path))
    classes = [c.strip() for c in open(sample["dir"] / "packed" / "classes.txt")]
    imshard.pack(rows, root, tmp_path / "rows" / "t", classes=classes, encoding="jpeg",
                 resize=48, shards=2)
    same_split(tmp_path / "cli", tmp_path / "rows", "t")
    assert imshard.Split(tmp_path / "rows" / "t.json").classes == classes


def test_pack_errors_as_the_command(sample, imshard_bin, tmp_path):
    lst = sample["dir"] / "packed" / "val.lst"
    root = sample["img"]
    imshard.pack(lst, root, tmp_path / "v")
    p = run(imshard_bin, "pack", lst, root, "-o", tmp_path / "v", "-q", ok=False)
    assert p.returncode == 1
    with pytest.raises(imshard.Error) as e:
        imshard.pack(lst, root, tmp_path / "v")
    # the same error, with the remedy as Python spells it (it said
    # "use --force", a flag no Python call takes)
    assert "use --force to replace it" in p.stderr
    assert p.stderr.strip() == "imshard: pack: " + str(e.value).replace("force=True", "--force")
    assert "already exists; use force=True to replace it" in str(e.value)
    assert "--force" not in str(e.value)
    imshard.pack(lst, root, tmp_path / "v", force=True)
    for bad in (dict(encoding="webp"), dict(encoding="keep", resize=32), dict(shards=2, shard_size=1 << 20),
                dict(encoding="png", check_decode=True), dict(colour=True),
                dict(encoding="png", quality=5), dict(encoding="raw", quality=5), dict(quality=5)):
        with pytest.raises(imshard.ArgumentError):
            imshard.pack(lst, root, tmp_path / "w", **bad)
    # shard_size as --shard-size takes it (4096 to 10**15 bytes): -1 wrapped
    # to 2**64 - 1 and 2**64 to 0 before, both packed without a word
    for size in (-1, 1, 4095, 10**15 + 1, 2**64):
        with pytest.raises((imshard.ArgumentError, OverflowError)):
            imshard.pack(lst, root, tmp_path / "w", shard_size=size)
        with pytest.raises((imshard.ArgumentError, OverflowError)):
            imshard.convert("folder", sample["img"], tmp_path / "cs", shard_size=size)
    assert not (tmp_path / "w").exists() and not (tmp_path / "cs").exists()
    # a split named '.' or '..' no reader would open
    for dots in ("/.", "/..", "/..json"):
        with pytest.raises(imshard.ArgumentError, match="not a plain name"):
            imshard.pack(lst, root, str(tmp_path / "d") + dots)
    assert not (tmp_path / "d").exists()
    with pytest.raises(imshard.Error, match="nope.lst"):
        imshard.pack(tmp_path / "nope.lst", root, tmp_path / "w")


def test_skipped_files_are_told_and_counted(sample, tmp_path):
    root = tmp_path / "img"
    shutil.copytree(sample["img"], root)
    good = sorted(os.listdir(root / "circle"))[:3]
    (root / "circle" / "broken.jpg").write_bytes(b"<html>not an image</html>")
    rows = [(0, "circle/" + good[0]), (0, "circle/broken.jpg"), (0, "circle/" + good[1]),
            (0, "circle/missing.jpg"), (0, "circle/" + good[2])]
    with pytest.warns(UserWarning, match="2 files skipped"):
        rep = imshard.pack(rows, root, tmp_path / "out" / "s")
    assert (rep["packed"], rep["skipped"]) == (3, 2)
    assert [r[1] for r in rep["skipped_files"]] == ["circle/broken.jpg", "circle/missing.jpg"]
    assert os.path.exists(rep["errors_file"])
    # shards=N: a range of rows all skipped gives no shard, and that is told
    with pytest.warns(UserWarning, match=r"wrote 3 of the 5 shards asked for \(shards=5\)"):
        rep = imshard.pack(rows, root, tmp_path / "out" / "s5", shards=5)
    assert (rep["shards"], rep["shards_left_out"]) == (3, 2)
    with open(tmp_path / "out" / "s5.json") as f:
        assert len(json.load(f)["shards"]) == 3
    with pytest.raises(imshard.Error, match=r"\(max_errors=1\)"):
        imshard.pack(rows, root, tmp_path / "out" / "s2", max_errors=1)
    assert not os.path.exists(tmp_path / "out" / "s2.json")


def test_rows_naming_one_image_twice_are_told_and_counted(sample, tmp_path):
    # as `imshard pack` warns (before: the report and Python said nothing)
    good = sorted(os.listdir(sample["img"] / "circle"))[:2]
    rows = [(0, "circle/" + good[0]), (0, "circle/" + good[1]), (1, "./circle//" + good[0])]
    with pytest.warns(UserWarning, match=r"1 of 3 rows repeat an earlier row's image \(1 with "
                      r"another label\), the first: row 2 '\./circle//.*' repeats row 0"):
        rep = imshard.pack(rows, sample["img"], tmp_path / "out" / "r", classes=["a", "b"])
    assert rep["packed"] == 3
    assert rep["repeats"]["rows"] == 1 and rep["repeats"]["relabelled"] == 1
    assert rep["repeats"]["first"] == (2, 0)
    with pytest.warns(UserWarning, match=r"the first: '"):
        rep = imshard.pack(rows, sample["img"], tmp_path / "out" / "rs", classes=["a", "b"],
                           shuffle=True, seed=1)
    assert rep["repeats"]["first"] is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = imshard.pack(rows[:2], sample["img"], tmp_path / "out" / "r2")
    assert rep["repeats"] is None


def test_convert_equals_the_command(sample, imshard_bin, tmp_path):
    args = ["--val-ratio", "0.25", "--per-class-train", "10", "--seed", "3", "--shards", "2"]
    run(imshard_bin, "convert", "folder", sample["img"], "-o", tmp_path / "cli", "-q", *args)
    res = imshard.convert("folder", sample["img"], tmp_path / "py", val_ratio=0.25,
                          per_class_train=10, seed=3, shards=2)
    assert sorted(res["splits"]) == ["train", "val"]
    for name in ("train", "val"):
        same_split(tmp_path / "cli", tmp_path / "py", name)
        assert filecmp.cmp(tmp_path / "cli" / (name + ".lst"), tmp_path / "py" / (name + ".lst"),
                           shallow=False)
    assert filecmp.cmp(tmp_path / "cli" / "classes.txt", tmp_path / "py" / "classes.txt",
                       shallow=False)
    assert res["splits"]["train"]["packed"] == 10 * 5
    with pytest.raises(imshard.Error, match="already exists; use force=True to replace it"):
        imshard.convert("folder", sample["img"], tmp_path / "py", val_ratio=0.25)
    for bad in (dict(quality=50), dict(encoding="raw", quality=50)):
        with pytest.raises(imshard.ArgumentError, match="quality applies to encoding jpeg only"):
            imshard.convert("folder", sample["img"], tmp_path / "q", **bad)
    assert not (tmp_path / "q").exists()
    with pytest.raises(imshard.ArgumentError, match="no_clutter applies to caltech256"):
        imshard.convert("folder", sample["img"], tmp_path / "x", no_clutter=True)
    with pytest.raises(imshard.ArgumentError, match="unknown dataset"):
        imshard.convert("mnist", sample["img"], tmp_path / "x")
    # a negative val_ratio is no ratio (before: taken for "not given", and
    # the folder's splits made without a val split or a word)
    for ratio in (-0.5, -1, 1.0, float("nan")):
        with pytest.raises(imshard.ArgumentError, match=r"val_ratio must be in \[0, 1\)"):
            imshard.convert("folder", sample["img"], tmp_path / "vr", val_ratio=ratio)
    assert not (tmp_path / "vr").exists()
    # inat2017's classes to keep: a name holding a comma would reach the
    # comma-separated list as two names (before: split without a word)
    for bad in (["Aves", "a,b"], [3]):
        with pytest.raises(imshard.ArgumentError, match="classes must be names without a comma or NUL"):
            imshard.convert("inat2017", tmp_path / "no-inat", tmp_path / "kc", classes=bad)
    assert not (tmp_path / "kc").exists()
    p = run(imshard_bin, "convert", "folder", sample["img"], "-o", tmp_path / "cli2",
            "--per-class-train", "1000", "-q", ok=False)
    with pytest.raises(imshard.Error) as e:
        imshard.convert("folder", sample["img"], tmp_path / "py2", per_class_train=1000)
    # the command's line, the keyword in place of the flag, then the classes
    line = p.stderr.splitlines()[0].replace("--allow-short", "allow_short=True")
    line = line.replace(str(tmp_path / "cli2"), str(tmp_path / "py2"))
    assert ("imshard: convert: " + str(e.value)).startswith(line + ": 'checkerboard' (label 0) has 23 of 1000")
    assert str(e.value).endswith("'diagonal' (label 4) has 23 of 1000")


def test_convert_shuffle_and_all_or_nothing(sample, imshard_bin, tmp_path):
    import json
    args = ["--val-ratio", "0.25", "--seed", "3", "--no-shuffle"]
    run(imshard_bin, "convert", "folder", sample["img"], "-o", tmp_path / "cli", "-q", *args)
    imshard.convert("folder", sample["img"], tmp_path / "py", val_ratio=0.25, seed=3,
                    shuffle=False)
    for name in ("train", "val"):
        same_split(tmp_path / "cli", tmp_path / "py", name)
        assert json.load(open(tmp_path / "py" / (name + ".json")))["shuffled"] is False
    before = open(tmp_path / "py" / "train.json", "rb").read()
    # A failure (too few images for the subset) replaces nothing.
    with pytest.raises(imshard.Error, match="keeps its earlier splits train, val"):
        imshard.convert("folder", sample["img"], tmp_path / "py", val_ratio=0.25,
                        per_class_val=1000, force=True)
    assert open(tmp_path / "py" / "train.json", "rb").read() == before
    assert not os.path.exists(tmp_path / "py" / ".imshard-convert")
    imshard.convert("folder", sample["img"], tmp_path / "py", val_ratio=0.25, force=True)
    assert json.load(open(tmp_path / "py" / "train.json"))["shuffled"] is True


def test_convert_refuses_an_output_inside_the_dataset(sample, tmp_path):
    # a split folder inside a folder layout would be a class to the next
    # convert, every label after it shifted (before: written)
    import shutil
    root = tmp_path / "img"
    shutil.copytree(sample["img"], root)
    with pytest.raises(imshard.ArgumentError, match="is inside the dataset root"):
        imshard.convert("folder", root, root / "aout", val_ratio=0.25)
    assert not os.path.exists(root / "aout")


def test_rows_meet_the_list_rules(sample, tmp_path):
    # what `imshard pack` refuses in a list file is refused in rows too
    # (before: a '..' path and label 1.5 or True were packed)
    img = sample["img"]
    first = sorted(p for p in img.rglob("*") if p.is_file())[0]
    rel = first.relative_to(img)
    climb = os.path.join("..", img.name, str(rel))
    with pytest.raises(imshard.ArgumentError, match="has a '..' component"):
        imshard.pack([(0, climb)], img, tmp_path / "p1" / "train")
    for label in (1.5, True):
        with pytest.raises(imshard.ArgumentError, match="is not an integer"):
            imshard.pack([(label, str(rel))], img, tmp_path / "p2" / "train")
    with pytest.raises(imshard.ArgumentError, match=r"classes\[0\] must be a str"):
        imshard.pack([(0, str(rel))], img, tmp_path / "p3" / "train", classes=[1])
    with pytest.raises(imshard.ArgumentError, match="seed must be an integer"):
        imshard.convert("folder", img, tmp_path / "c", val_ratio=0.2, seed=-1)
    assert not (tmp_path / "p1").exists() or not any((tmp_path / "p1").iterdir())


def test_row_indices_meet_the_list_rules(sample, tmp_path):
    # a list file's index column is 0..2**64 - 1 (`imshard pack` refuses
    # '-1' and '18446744073709551616'); before, rows packed index -1 as
    # 2**64 - 1 and 2**64 as 0, without a word
    img = sample["img"]
    rel = str(sorted(p for p in img.rglob("*") if p.is_file())[0].relative_to(img))
    for index, why in ((-1, "is negative"), (2**64, "is too large")):
        for row in ((index, 0, rel), (index, 0, (0.5,), rel)):
            with pytest.raises(imshard.ArgumentError, match="row 0: index %d %s" % (index, why)):
                imshard.pack([row], img, tmp_path / "p" / "train")
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())
    rep = imshard.pack([(2**64 - 1, 0, rel)], img, tmp_path / "q" / "train")
    assert rep["packed"] == 1


@pytest.mark.filterwarnings("ignore:imshard. pack. .* rows repeat an earlier row")  # on purpose
def test_bad_extra_labels_and_paths_name_the_row(sample, tmp_path):
    # before: a TypeError or ValueError naming no row ("must be real
    # number, not str"), and NaN, inf or 1e300 packed into the records,
    # where a list file's label column refuses them
    img = sample["img"]
    rel = str(sorted(p for p in img.rglob("*") if p.is_file())[0].relative_to(img))
    good = (0, 0, (0.5,), rel)
    for bad, why in (((1, 0, (0.5, "x"), rel), "row 1: extra label 1 must be a number, got str"),
                     ((1, 0, (None,), rel), "row 1: extra label 0 must be a number"),
                     ((1, 0, (True,), rel), "row 1: extra label 0 must be a number, got bool"),
                     ((1, 0, 5, rel), "row 1: extra labels must be a sequence of numbers"),
                     ((1, 0, (float("nan"),), rel), "row 1: extra label 0 is nan: not a finite"),
                     ((1, 0, (float("-inf"),), rel), "row 1: extra label 0 is -inf"),
                     ((1, 0, (1e300,), rel), "row 1: extra label 0 is 1e\\+300"),
                     ((1, 0, (0.5,), 7), "row 1: expected str, bytes or os.PathLike"),
                     ((1, 0, (0.5,), "a\0b"), "row 1: embedded null"),
                     ((1, 2**40, rel), "row 1: .*greater than maximum")):
        with pytest.raises(imshard.ArgumentError, match=why):
            imshard.pack([good, bad], img, tmp_path / "p" / "train")
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())
    rep = imshard.pack([good, (1, 0, (np.float32(2.5),), rel), (2, 0, [3], rel)], img,
                       tmp_path / "q" / "train")
    assert [r.extra for r in imshard.Split(rep["manifest"])] == [(0.5,), (2.5,), (3.0,)]



def test_paths_and_rows_of_another_type_name_the_argument(sample, tmp_path):
    # before: "expected str, bytes or os.PathLike object, not int", naming
    # no argument (pack(rows, 5, out): the root or out?), and "'int'
    # object is not iterable" for rows that are neither rows nor a path
    img = sample["img"]
    rel = str(sorted(p for p in img.rglob("*") if p.is_file())[0].relative_to(img))
    out = tmp_path / "p" / "train"
    for call, why in (
            (lambda: imshard.pack([(0, rel)], 5, out), r"root must be a path \(str, bytes or "
                                                       r"os.PathLike\), got 5$"),
            (lambda: imshard.pack([(0, rel)], img, None), "out must be a path .*, got None$"),
            (lambda: imshard.pack(5, img, out), "list_or_rows must be a list file's path or "
                                                "rows, got 5$"),
            (lambda: imshard.pack([(0, rel), 7], img, out), "row 1: expected .*, got 7$"),
            (lambda: imshard.convert("folder", 5, tmp_path / "c"), "root must be a path"),
            (lambda: imshard.convert("folder", img, 1.5), "out must be a path .*, got 1.5$")):
        with pytest.raises(imshard.ArgumentError, match=why):
            call()
    assert not (tmp_path / "p").exists() and not (tmp_path / "c").exists()
    rep = imshard.pack([(0, rel)], os.fsencode(img), out)  # bytes paths, as os.fspath
    assert rep["packed"] == 1

FAIL_STRDUP = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* strdup, except that it fails (out of memory) for a string starting with
 * $FAIL_STRDUP: the reason a file was skipped, copied only by the
 * extension's skipped-files log */
char *strdup(const char *s)
{
	static char *(*real)(const char *);
	const char *m = getenv("FAIL_STRDUP");
	if (m && *m && strncmp(s, m, strlen(m)) == 0) {
		errno = ENOMEM;
		return NULL;
	}
	if (!real)
		real = (char *(*)(const char *))dlsym(RTLD_NEXT, "strdup");
	return real(s);
}
"""


def test_a_skipped_files_log_out_of_memory_is_not_a_success(sample, tmp_path):
    # the report's skipped_files list, kept with malloc while pack_run
    # runs, could not take a row: before, pack returned the report as if
    # the short list were the whole (convert checked its notes but not
    # its splits' lists either)
    import subprocess
    import sys
    import textwrap
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("the sanitizer's strdup comes first: no strdup can be made to fail")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the failing strdup")
    (tmp_path / "fail.c").write_text(FAIL_STRDUP)
    so = tmp_path / "fail.so"
    run(cc, "-shared", "-fPIC", "-o", so, tmp_path / "fail.c", "-ldl")
    root = tmp_path / "img"
    for c in ("a", "b"):
        shutil.copytree(sample["img"] / "circle", root / c)
    (root / "a" / "broken.jpg").write_bytes(b"<html>not an image</html>")
    script = tmp_path / "oom.py"
    script.write_text(textwrap.dedent("""
        import sys, warnings, imshard
        warnings.simplefilter("ignore")
        root, out = sys.argv[1], sys.argv[2]
        for what, call in (
                ("pack", lambda: imshard.pack([(0, "a/missing.jpg"), (0, "b/missing.jpg"),
                                               (1, "a/broken.jpg"), (1, "b/" + sys.argv[3])],
                                              root, out + "/p/s")),
                ("convert", lambda: imshard.convert("folder", root, out + "/c", val_ratio=0.0))):
            try:
                rep = call()
                print(what, "returned", rep.get("skipped_files", rep.get("splits")))
            except MemoryError as e:
                print(what, "MemoryError:", e)
    """))
    first = sorted(os.listdir(root / "b"))[0]
    env = dict(os.environ, LD_PRELOAD=str(so), FAIL_STRDUP="not a JPEG or PNG")
    p = subprocess.run([sys.executable, str(script), str(root), str(tmp_path / "out"), first],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2, p.stdout + p.stderr
    assert lines[0].startswith("pack MemoryError: packed '%s'" % (tmp_path / "out" / "p" / "s.json")), lines[0]
    assert "cannot report all of its skipped files: out of memory (the skipped files are " \
        "listed in '%s" % (tmp_path / "out" / "p" / "s") in lines[0]
    assert lines[1].startswith("convert MemoryError: converted 'folder' into"), lines[1]
    # the split was written, and its errors file lists every skipped file
    errors = open(tmp_path / "out" / "p" / "s.errors.tsv").read()
    assert all(f in errors for f in ("a/missing.jpg", "b/missing.jpg", "a/broken.jpg"))


@pytest.mark.filterwarnings("ignore:imshard. pack. .* rows repeat an earlier row")  # on purpose
def test_packs_on_two_threads_at_once(sample, tmp_path):
    # each pack has its own cancel flag (one global flag was shared, and
    # each pack cleared it as it began): two at once both finish, equal
    # to a pack made alone
    import threading
    rows = [(0, str(p.relative_to(sample["img"]))) for p in sorted(sample["img"].rglob("*.*"))] * 4
    opts = dict(encoding="jpeg", resize=40, threads=1, shards=2)
    imshard.pack(rows, sample["img"], tmp_path / "alone" / "s", **opts)
    reps, errors = {}, []

    def pack(k):
        try:
            reps[k] = imshard.pack(rows, sample["img"], tmp_path / k / "s", **opts)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=pack, args=(k,)) for k in ("t1", "t2")]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors and sorted(reps) == ["t1", "t2"], errors
    for k in ("t1", "t2"):
        assert reps[k]["packed"] == len(rows)
        same_split(tmp_path / "alone", tmp_path / k, "s")


def test_ctrl_c_stops_the_main_threads_pack_not_another_threads(sample, tmp_path):
    # SIGINT is Python's main thread's: the pack running there stops
    # cleanly (KeyboardInterrupt, no manifest), and a pack running on
    # another thread at the time finishes whole. Before, the one global
    # flag stopped both, and raised KeyboardInterrupt on the other thread
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "two.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys, threading, time, imshard
        # Python's own Ctrl-C handling, whatever this process inherited: a
        # shell's background job starts with SIGINT ignored, and then
        # pack rightly leaves it alone (the next test)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        root, out = sys.argv[1], sys.argv[2]
        files = sorted(os.path.relpath(os.path.join(d, f), root)
                       for d, _, fs in os.walk(root) for f in fs)
        rows = [(0, f) for f in files] * 30
        opts = dict(encoding="jpeg", resize=64, threads=1)
        res, started = {}, threading.Event()

        def other():
            started.set()
            try:
                res["other"] = imshard.pack(rows, root, out + "/other", **opts)
            except BaseException as e:
                res["other"] = e

        t = threading.Thread(target=other)
        t.start()
        started.wait()
        def kill_once_writing():
            # once the main thread's pack writes its shard, so the signal
            # meets the pack and not the Python code before it (a fixed
            # 0.5 s once met a pack that had not begun)
            for _ in range(12000):
                if any(f.startswith("main-") and f.endswith(".partial") for f in
                       (os.listdir(out) if os.path.isdir(out) else [])):
                    break
                time.sleep(0.005)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=kill_once_writing).start()
        try:
            imshard.pack(rows, root, out + "/main", **opts)
            print("main finished", flush=True)
        except KeyboardInterrupt:
            print("main interrupted", flush=True)
        t.join()
        r = res["other"]
        print("other", r["packed"] == len(rows) if isinstance(r, dict) else repr(r), flush=True)
        left = os.listdir(out) if os.path.isdir(out) else []
        print("left", sorted(f for f in left if f.startswith("main")), flush=True)
        print("other split", os.path.exists(out + "/other.json") and
              len(imshard.Split(out + "/other.json")) == len(rows), flush=True)
    """))
    p = subprocess.run([sys.executable, str(script), str(sample["img"]), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["main interrupted", "other True", "left []",
                                     "other split True"], p.stdout + p.stderr


def test_a_pack_leaves_an_ignored_or_handled_sigint_alone(sample, tmp_path):
    # pack catches SIGINT to stop cleanly where SIGINT raises
    # KeyboardInterrupt. Before, it did so whatever the program had asked:
    # with SIGINT ignored (signal.SIG_IGN, nohup, a background job) or
    # given to a handler of the program's own, a SIGINT still cancelled
    # the pack and raised KeyboardInterrupt, and the handler never ran
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "sig.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys, threading, imshard
        root, out, how = sys.argv[1], sys.argv[2], sys.argv[3]
        files = sorted(os.path.relpath(os.path.join(d, f), root)
                       for d, _, fs in os.walk(root) for f in fs)
        rows = [(0, f) for f in files] * 30
        seen = []
        signal.signal(signal.SIGINT, signal.SIG_IGN if how == "ignore" else
                      lambda sig, frame: seen.append(sig))
        done, during = [], []

        def kill():
            during.append(not done)
            os.kill(os.getpid(), signal.SIGINT)
        t = threading.Timer(0.5, kill)
        t.start()
        try:
            r = imshard.pack(rows, root, out + "/s", encoding="jpeg", resize=64, threads=1)
            done.append(1)
            print("finished", r["packed"] == len(rows), flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        t.join()
        print("sent during the pack", during == [True], flush=True)
        print("handler ran", seen == [signal.SIGINT], flush=True)
        print("handler kept", signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
              flush=True)
    """))
    for how, ran in (("ignore", "False"), ("handler", "True")):
        p = subprocess.run([sys.executable, str(script), str(sample["img"]),
                            str(tmp_path / how), how],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == ["finished True", "sent during the pack True",
                                         "handler ran " + ran,
                                         "handler kept True"], how + ": " + p.stdout + p.stderr


def test_pack_takes_out_as_bytes(sample, tmp_path):
    # out is a path: bytes as well as str and os.PathLike. Before, bytes
    # raised "TypeError: endswith first arg must be bytes ...", and a name
    # that is not UTF-8 could not reach the library's own check
    lst = sample["dir"] / "packed" / "val.lst"
    rep = imshard.pack(lst, sample["img"], os.fsencode(tmp_path / "b" / "s.json"))
    assert rep["manifest"] == str(tmp_path / "b" / "s.json")
    assert len(imshard.Split(rep["manifest"])) == rep["packed"] > 0
    with pytest.raises(imshard.ArgumentError, match=r"split name '\\xff' is not UTF-8"):
        imshard.pack(lst, sample["img"], os.fsencode(tmp_path / "b") + b"/\xff")
    assert not [f for f in os.listdir(tmp_path / "b") if not f.startswith("s")]


def test_pack_options_are_checked_by_name(sample, tmp_path):
    # each option's mistake names it, as the command names its flag.
    # Before: shards=2**40 raised "OverflowError: signed integer is
    # greater than maximum", shards=1.5 a TypeError, shards=True packed
    # one shard, -1 for any of them the same lumped message, and
    # threads=10**6 (the command: "--threads must be between 1 and 1024")
    # was taken
    lst = sample["dir"] / "packed" / "val.lst"
    for opt, v in (("shards", 2**40), ("shards", 1.5), ("shards", True), ("resize", 2**40),
                   ("max_size", "64"), ("quality", 2.5), ("threads", 2**31),
                   ("max_errors", 2**63), ("shard_size", 2**70), ("shard_size", 1e6)):
        for call in (lambda **kw: imshard.pack(lst, sample["img"], tmp_path / "w", **kw),
                     lambda **kw: imshard.convert("folder", sample["img"], tmp_path / "c", **kw)):
            with pytest.raises(imshard.ArgumentError, match="^%s must be" % opt):
                call(encoding="jpeg", **{opt: v})
    for opt, v, why in (("shards", -1, ">= 0"), ("resize", -1, ">= 0"), ("max_size", -3, ">= 0"),
                        ("quality", 101, "0..100"), ("threads", -1, "0..1024"),
                        ("threads", 1025, "0..1024"), ("max_errors", -2, ">= -1")):
        with pytest.raises(imshard.ArgumentError, match=r"^%s must be %s \(.*\), got %d$"
                           % (opt, re.escape(why), v)):
            imshard.pack(lst, sample["img"], tmp_path / "w", encoding="jpeg", **{opt: v})
    assert not (tmp_path / "w").exists() and not (tmp_path / "c").exists()
    # None is "not given", as for encoding, shard_size and max_errors
    rep = imshard.pack(lst, sample["img"], tmp_path / "n" / "s", shards=None, resize=None,
                       max_size=None, quality=None, threads=None)
    assert rep["packed"] == rep["listed"] > 0


@pytest.mark.filterwarnings("ignore:imshard. pack. .* rows repeat an earlier row")  # on purpose
def test_a_sparse_label_space_packs_with_max_label(sample, tmp_path):
    # labels past the bound the list's distinct labels give need the
    # command's --max-label N; before, pack() had no such option, and its
    # error told the caller to "give --max-label N or --classes FILE",
    # flags no Python call takes (as "--max-errors 0" after max_errors=0)
    f = os.path.relpath(sorted(sample["img"].rglob("*.jpg"))[0], sample["img"])
    rows = [(0, f), (5000, f)]
    with pytest.raises(imshard.ArgumentError, match="label 5000") as e:
        imshard.pack(rows, sample["img"], tmp_path / "s")
    assert "max_label=N" in str(e.value) and "classes=" in str(e.value)
    assert "--" not in str(e.value), str(e.value)
    with pytest.raises(imshard.ArgumentError, match="label 5000"):
        imshard.pack(rows, sample["img"], tmp_path / "s", max_label=4999)
    rep = imshard.pack(rows, sample["img"], tmp_path / "s", max_label=5000)
    assert rep["packed"] == 2
    with imshard.Split(rep["manifest"]) as s:
        assert [r.label for r in s] == [0, 5000] and len(s.classes) == 5001
    for bad in (-2, 2**20, 1.5, True):
        with pytest.raises(imshard.ArgumentError, match="max_label must be"):
            imshard.pack(rows, sample["img"], tmp_path / "t", max_label=bad)
    with pytest.raises(imshard.ArgumentError, match="unknown pack option max_label"):
        imshard.convert("folder", sample["img"], tmp_path / "c", max_label=5)
    with pytest.raises(imshard.Error, match=r"\(max_errors=0\)") as e:
        imshard.pack([(0, f), (0, "missing.jpg")], sample["img"], tmp_path / "u", max_errors=0)
    assert "--" not in str(e.value)


def test_convert_messages_name_keywords_not_flags(sample, tmp_path):
    # a remedy or a bound a convert() call meets names the keyword it
    # takes; before, only a few of pack's flags were respelt, and convert
    # said "--per-class-val/--val-total" and "(use --recursive ...)"
    import subprocess
    import sys
    from conftest import ROOT
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "fixtures", "make_cifar10.py"),
                    str(tmp_path / "cifar"), "--records", "10"], check=True)
    for kw in (dict(per_class_val=2), dict(val_total=20)):
        with pytest.raises(imshard.ArgumentError) as e:
            imshard.convert("cifar10", tmp_path / "cifar", tmp_path / "c", **kw)
        assert str(e.value) == "per_class_val/val_total: cifar10 has no val split"
    assert not (tmp_path / "c").exists()
    # an adapter's note, told through warnings and in the report
    root = tmp_path / "img"
    shutil.copytree(sample["img"], root)
    first = sorted(os.listdir(root / "circle"))[0]
    os.makedirs(root / "circle" / "deeper")
    shutil.copy(root / "circle" / first, root / "circle" / "deeper" / first)
    with pytest.warns(UserWarning, match=r"\(use recursive=True to make every folder a class\)"):
        res = imshard.convert("folder", root, tmp_path / "f", val_ratio=0.2)
    assert not [n for n in res["notes"] if "--" in n], res["notes"]
    assert any("use recursive=True" in n for n in res["notes"])
    # a flag's value follows its keyword with '='
    (root / "circle" / "x.txt").write_text("not an image")
    with pytest.raises(imshard.Error, match=r"\(max_errors=0\)"):
        imshard.convert("folder", root, tmp_path / "m", val_ratio=0.2, max_errors=0,
                        exts=".jpg,.png,.txt")
    # a quoted path is the path: a folder named like a flag keeps its name
    out = tmp_path / "o --force"
    imshard.convert("folder", sample["img"], out, val_ratio=0.2)
    with pytest.raises(imshard.Error) as e:
        imshard.convert("folder", sample["img"], out, val_ratio=0.2)
    assert str(e.value) == "split '%s/train.json' already exists; use force=True to replace it" % out


def test_convert_checks_test_ratio_and_subset_sizes_by_name(sample, tmp_path):
    # test_ratio as val_ratio: before, -0.5 converted without a test split
    # or a word (the C side takes a negative ratio for 0), and nan or 1.5
    # met the library's message naming the command's flags
    for ratio in (-0.5, -1, 1.0, 1.5, float("nan"), "0.2", True):
        with pytest.raises(imshard.ArgumentError, match=r"^test_ratio must be in \[0, 1\), got"):
            imshard.convert("folder", sample["img"], tmp_path / "t", test_ratio=ratio)
    # subset sizes as the command's --per-class-train N ... (1..2**31 - 1),
    # named: before, 0 said "subset size for 'train' must be >= 1", 1.5
    # raised a bare TypeError, 2**70 an OverflowError and True took 1
    for kw in ("per_class_train", "per_class_val", "per_class_test", "train_total", "val_total"):
        for bad in (0, -3, 1.5, True, "4", 2**31, 2**70):
            with pytest.raises(imshard.ArgumentError,
                               match=r"^%s must be an integer from 1 to 2\*\*31 - 1, got" % kw):
                imshard.convert("folder", sample["img"], tmp_path / "t", val_ratio=0.2,
                                test_ratio=0.2, **{kw: bad})
    with pytest.raises(imshard.ArgumentError, match="^give per_class_val or val_total, not both$"):
        imshard.convert("folder", sample["img"], tmp_path / "t", val_ratio=0.2, per_class_val=2,
                        val_total=10)
    assert not (tmp_path / "t").exists()
    # the command's and the library's rule, in their words: each in
    # [0, 1), the two below 1 (before: the sum's message gave no values,
    # and the command refused 0.995, which this and the library took)
    with pytest.raises(imshard.ArgumentError,
                       match=r"^val_ratio plus test_ratio must be below 1, got 0\.5 \+ 0\.5$"):
        imshard.convert("folder", sample["img"], tmp_path / "t", val_ratio=0.5, test_ratio=0.5)
    with pytest.raises(imshard.ArgumentError, match=r"^val_ratio must be in \[0, 1\), got 1$"):
        imshard.convert("folder", sample["img"], tmp_path / "t", val_ratio=1)
    # ... and of a number's type, as test_ratio (before: False was taken
    # as 0, True refused as 1, and "0.2" raised a bare TypeError)
    for ratio in (False, True, "0.2", float("nan")):
        with pytest.raises(imshard.ArgumentError, match=r"^val_ratio must be in \[0, 1\), got"):
            imshard.convert("folder", sample["img"], tmp_path / "t", val_ratio=ratio)
    assert not (tmp_path / "t").exists()
    res = imshard.convert("folder", sample["img"], tmp_path / "r995", val_ratio=0.995)
    assert set(res["splits"]) == {"train", "val"}
    res = imshard.convert("folder", sample["img"], tmp_path / "ok", val_ratio=0.2, test_ratio=0.2,
                          per_class_test=2, val_total=5)
    assert res["splits"]["test"]["packed"] == 2 * 5 and res["splits"]["val"]["packed"] == 5


def test_pack_shuffles_and_records_the_order_as_the_command(sample, imshard_bin, tmp_path):
    # the command's --shuffle, --seed S and --order ORDER: before, pack()
    # had none of them (unknown pack option), so a list in class order
    # could not be packed shuffled from Python, nor its order recorded
    lst = sample["dir"] / "packed" / "val.lst"
    root = sample["img"]
    rows = [tuple(line.rstrip("\n").split("\t")) for line in open(lst)]
    in_class_order = sorted(((int(i), int(float(c)), p) for i, c, p in rows), key=lambda r: r[1])
    sorted_lst = tmp_path / "sorted.lst"
    sorted_lst.write_text("".join("%d\t%d\t%s\n" % r for r in in_class_order))

    def shuffled(manifest):
        with open(manifest) as f:
            return json.load(f)["shuffled"]

    for args, kw, want in ((["--shuffle", "--seed", "7"], dict(shuffle=True, seed=7), True),
                           (["--shuffle"], dict(shuffle=True), True),
                           (["--order", "shuffled"], dict(order="shuffled"), True),
                           (["--order", "list"], dict(order="list"), False),
                           ([], dict(order="auto"), False)):
        cli, py = tmp_path / "cli", tmp_path / "py"
        shutil.rmtree(cli, ignore_errors=True)
        shutil.rmtree(py, ignore_errors=True)
        run(imshard_bin, "pack", sorted_lst, root, "-o", cli / "v", "-q", *args)
        rep = imshard.pack(sorted_lst, root, py / "v", **kw)
        same_split(cli, py, "v")
        assert shuffled(cli / "v.json") is shuffled(py / "v.json") is want, args
        assert rep["order"] == ("shuffled" if want else "list")
        assert (rep["order_why"] is None) == bool(args and args != ["--order", "auto"]), rep
    with imshard.Split(tmp_path / "py" / "v.json") as s:
        assert [r.label for r in s] == sorted(r.label for r in s)
    # a shuffle is the seed's: another seed, another order of the records
    a = imshard.pack(sorted_lst, root, tmp_path / "s1" / "v", shuffle=True, seed=1)
    b = imshard.pack(sorted_lst, root, tmp_path / "s2" / "v", shuffle=True, seed=2)
    with imshard.Split(a["manifest"]) as sa, imshard.Split(b["manifest"]) as sb:
        assert sorted(r.payload for r in sa) == sorted(r.payload for r in sb)
        assert [r.payload for r in sa] != [r.payload for r in sb]
    # refused as the command refuses them, before anything is written
    for kw, why in ((dict(seed=3), "seed seeds shuffle, which is not given"),
                    (dict(shuffle=True, order="list"), "order='list' contradicts it"),
                    (dict(order="random"), "order must be auto, list or shuffled"),
                    (dict(order=["list"]), "order must be auto, list or shuffled"),
                    (dict(shuffle=True, seed=-1), "seed must be an integer from 0"),
                    (dict(shuffle=True, seed=2**64), "seed must be an integer from 0"),
                    (dict(shuffle=True, seed=1.5), "seed must be an integer from 0")):
        with pytest.raises(imshard.ArgumentError, match=why):
            imshard.pack(sorted_lst, root, tmp_path / "bad" / "v", **kw)
    assert not (tmp_path / "bad").exists()
    p = run(imshard_bin, "pack", sorted_lst, root, "-o", tmp_path / "bad" / "v", "--seed", "3",
            ok=False)
    assert p.returncode == 2 and "--seed seeds --shuffle, which is not given" in p.stderr
