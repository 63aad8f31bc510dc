"""imshard.pack and imshard.convert where the file system says no: a
classes file the user cannot read, a full disk. Each call fails with one
clear error and leaves nothing, or succeeds whole (tests/cli/
test_pack_faults.sh, test_permissions.sh and test_full_disk.sh hold the
same for the commands)."""
import filecmp
import os
import shutil
import subprocess
import sys

import pytest

import imshard
from conftest import run


def as_user(args):
    """args run as a user whom file permissions bind: as root, with the
    capabilities that pass them by dropped (setpriv); plainly otherwise."""
    if os.geteuid() != 0:
        return args
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", "--bounding-set=" + caps, "--inh-caps=" + caps] + args


def test_an_unreadable_classes_file_beside_the_list_fails(sample, tmp_path):
    # before: access(R_OK) passed it over, and the split was packed with
    # label numbers for class names, without a word
    lst = tmp_path / "ds_train.lst"
    shutil.copy(sample["dir"] / "packed" / "train.lst", lst)
    shutil.copy(sample["dir"] / "packed" / "classes.txt", tmp_path / "ds.classes")
    os.chmod(tmp_path / "ds.classes", 0)
    try:
        probe = subprocess.run(as_user(["cat", str(tmp_path / "ds.classes")]),
                               capture_output=True)
        if probe.returncode == 0 or b"Permission denied" not in probe.stderr:
            pytest.skip("file permissions cannot be made to bind here")
        code = ("import imshard, sys\n"
                "try:\n"
                "    imshard.pack(sys.argv[1], sys.argv[2], sys.argv[3])\n"
                "except imshard.Error as e:\n"
                "    print(e)\n"
                "    sys.exit(1)\n")
        p = subprocess.run(as_user([sys.executable, "-c", code, str(lst), str(sample["img"]),
                                    str(tmp_path / "out" / "t")]),
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 1, p.stdout + p.stderr
        assert f"'{tmp_path / 'ds.classes'}': Permission denied" in p.stdout
        assert not os.path.exists(tmp_path / "out" / "t.json")
    finally:
        os.chmod(tmp_path / "ds.classes", 0o644)


def test_pack_and_convert_on_a_full_disk(sample, imshard_bin, tmp_path):
    """Into a real full disk (a tmpfs swept in size; root only, skipped
    elsewhere): each call returns a split that verifies, or raises
    imshard.Error saying "No space left on device" and leaves nothing, an
    earlier split (force=True) whole; never a crash (pack reserves a
    shard's blocks before LMDB writes them through its map, where a store
    into a full disk would be SIGBUS)."""
    mnt = tmp_path / "m"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    subprocess.run(["umount", mnt], check=True)
    lst = sample["dir"] / "packed" / "val.lst"
    root = sample["img"]
    old = tmp_path / "old"
    imshard.pack(lst, root, old / "t", encoding="png")
    conv_old = tmp_path / "conv"
    imshard.convert("folder", root, conv_old, val_ratio=0.3, seed=4)

    def tree():
        return sorted(os.path.relpath(os.path.join(d, f), mnt)
                      for d, ds, fs in os.walk(mnt) for f in ds + fs)

    def attempt(call, ok, keep):
        before = tree()
        try:
            call()
        except imshard.Error as e:
            assert "No space left on device" in str(e), str(e)
            assert ".tmp." not in str(e), str(e)
            assert "cannot pack '" not in str(e), str(e)  # the disk, not an image
            assert tree() == before, str(e)
            keep()
            return 0
        ok()
        return 1

    def verify(*manifests):
        for m in manifests:
            run(imshard_bin, "verify", m, "-q")

    def same_files(a, b):
        for f in os.listdir(a):
            assert filecmp.cmp(a / f, b / f, shallow=False), f

    cases = [
        ("pack", 64, 3000, None,
         lambda: imshard.pack(lst, root, mnt / "o" / "t"),
         lambda: verify(mnt / "o" / "t.json"), lambda: None),
        ("pack force", 16, 3000, lambda: shutil.copytree(old, mnt / "o"),
         lambda: imshard.pack(lst, root, mnt / "o" / "t", force=True),
         lambda: verify(mnt / "o" / "t.json"), lambda: same_files(old, mnt / "o")),
        ("convert force", 16, 6000, lambda: shutil.copytree(conv_old, mnt / "o"),
         lambda: imshard.convert("folder", root, mnt / "o", val_ratio=0.3, force=True),
         lambda: verify(mnt / "o" / "train.json", mnt / "o" / "val.json"),
         lambda: same_files(conv_old, mnt / "o")),
    ]
    for name, lo, hi, setup, call, ok, keep in cases:
        ends = set()
        if setup:  # the earlier output fits, with room for little more
            lo += sum(-(-os.path.getsize(os.path.join(d, f)) // 4096) * 4
                      for d, _, fs in os.walk(old if "pack" in name else conv_old) for f in fs)
            hi += lo
        for size in range(lo, hi + 1, (hi - lo) // 8):
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}k", "tmpfs", mnt],
                           check=True)
            try:
                if setup:
                    setup()
                ends.add(attempt(call, ok, keep))
            finally:
                subprocess.run(["umount", mnt], check=True)
        assert ends == {0, 1}, f"{name}: widen the sweep ({ends})"
