"""Shared fixtures of the Python tests: the built `imshard` command and
fixture generator (IMSHARD, MAKE_IMAGES; default: the build/ tree), and
small packed splits made once per session in a temporary folder."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _tool(env, rel):
    path = os.environ.get(env) or os.path.join(ROOT, rel)
    if not os.access(path, os.X_OK):
        pytest.skip("%s not found at %s (build the project first, or set %s)" % (rel, path, env))
    return path


@pytest.fixture(scope="session")
def imshard_bin():
    return _tool("IMSHARD", "build/tools/imshard")


@pytest.fixture(scope="session")
def make_images_bin():
    return _tool("MAKE_IMAGES", "build/tests/fixtures/make_images")


def run(*args, ok=True):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise AssertionError("%s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
    return p


@pytest.fixture(scope="session")
def sample(tmp_path_factory, imshard_bin):
    """The sample dataset (5 classes x 23 images: JPEG, grey JPEG, PNG,
    RGBA PNG) converted to train/val splits of 3 shards each."""
    d = tmp_path_factory.mktemp("sample")
    run(imshard_bin, "sample", d / "img", "--classes", "5", "--per-class", "23", "-q")
    run(imshard_bin, "convert", "folder", d / "img", "-o", d / "packed", "--val-ratio", "0.3",
        "--shards", "3", "-q")
    return {"dir": d, "img": d / "img", "train": str(d / "packed" / "train.json"),
            "val": str(d / "packed" / "val.json")}


@pytest.fixture
def copy_split(tmp_path):
    """Copies a split's manifest and shards into a fresh folder (to damage)."""
    def copy(manifest):
        src = os.path.dirname(manifest)
        name = os.path.basename(manifest)[:-5]
        for f in os.listdir(src):
            if f.startswith(name + "-") or f == name + ".json":
                shutil.copy(os.path.join(src, f), tmp_path / f)
        return str(tmp_path / (name + ".json"))
    return copy


def default_sigbus_env():
    """The environment for a child whose bus error is under test: a
    sanitizer runtime preloaded into the interpreter (scripts/test.sh's
    run against the ASan build) would otherwise have SIGBUS handled
    before the program starts (imshard then hands the fault to it after
    its line, and the exit status is the sanitizer's)."""
    env = dict(os.environ)
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        env[k] = (env.get(k, "") + ":handle_sigbus=0").lstrip(":")
    return env
