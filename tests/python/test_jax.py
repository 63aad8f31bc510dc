"""examples/jax_loop.py, where jax imports (a skip, not a pass, elsewhere:
CI need not install jax)."""
import os
import subprocess
import sys

import imshard
import pytest

pytest.importorskip("jax")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_jax_example_runs_every_batch(sample):
    # On the CPU, device_put aliases the loader's ring and JAX runs steps
    # ahead: the example must not run out of ring slots (it once did after
    # four batches), and validation must count each record once.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "jax_loop.py"),
                        sample["train"], sample["val"], "--epochs", "2", "--size", "32",
                        "--batch-size", "4"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "epoch 1:" in p.stdout, p.stdout
    n_val = len(imshard.Split(sample["val"]))
    assert "(%d records)" % n_val in p.stdout, p.stdout
