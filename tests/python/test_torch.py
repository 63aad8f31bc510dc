"""imshard.torch and examples/pytorch_ddp.py, where torch imports (a skip,
not a pass, elsewhere: CI need not install torch)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import imshard

torch = pytest.importorskip("torch")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_torch_batches_are_zero_copy_views(sample):
    from imshard.torch import Loader
    ref = [(b[0].copy(), b[1].copy()) for b in imshard.Loader(sample["train"], 6, 32, seed=4,
                                                               threads=2, copy=True)]
    loader = Loader(sample["train"], 6, 32, seed=4, threads=2)
    n = 0
    for (images, labels), (ri, rl) in zip(loader, ref):
        assert isinstance(images, torch.Tensor) and images.dtype == torch.float32
        assert labels.dtype == torch.int64 and images.shape == (6, 3, 32, 32)
        assert np.array_equal(images.numpy(), ri) and np.array_equal(labels.numpy(), rl)
        n += 1
    assert n == len(loader) == len(ref)
    del images, labels
    # zero copy: the tensor's storage is the ring slot itself (on a CUDA
    # host the loader also holds the batch it handed out last, for a copy
    # in flight: test_torch_cuda.py; here the views alone are counted)
    loader.close()
    loader = Loader(sample["train"], 6, 32, seed=4, threads=2, pinned=False)
    it = iter(loader)
    b = next(it)
    assert loader._c.exported == 1
    assert b[0].data_ptr() == b.address
    t = b[0]
    del b
    assert loader._c.exported == 1, "a tensor alone must keep its slot"
    del t
    assert loader._c.exported == 0
    loader.close()
    bf = Loader(sample["train"], 6, 32, seed=4, threads=2, dtype="bfloat16")
    x = next(iter(bf))[0]
    assert x.dtype == torch.bfloat16
    assert torch.allclose(x.float(), torch.from_numpy(ref[0][0]), rtol=1e-2, atol=1e-2)
    del x
    bf.close()


def _ddp_example(sample, env):
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           os.path.join(ROOT, "examples", "pytorch_ddp.py"), sample["train"],
                           sample["val"], "--epochs", "1", "--size", "32", "--batch-size", "8",
                           "--max-steps", "3"], capture_output=True, text=True, env=env,
                          timeout=600)


def test_ddp_example_runs_under_torchrun(sample):
    env = dict(os.environ)
    # two ranks need two GPUs: with fewer, the CPU's (gloo)
    if torch.cuda.is_available() and torch.cuda.device_count() < 2:
        env["CUDA_VISIBLE_DEVICES"] = ""
    p = _ddp_example(sample, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "epoch 0:" in p.stdout and "val top-1" in p.stdout
    n_val = len(imshard.Split(sample["val"]))
    assert "(%d records)" % n_val in p.stdout, p.stdout


def test_ddp_example_refuses_a_rank_without_a_gpu(sample):
    # before: two ranks on one GPU died in torch.cuda.set_device with
    # "invalid device ordinal" and a traceback per rank
    if not torch.cuda.is_available() or torch.cuda.device_count() != 1:
        pytest.skip("needs a machine showing exactly one CUDA device")
    p = _ddp_example(sample, dict(os.environ))
    assert p.returncode != 0
    assert "local rank 1 has no GPU of its own (this machine shows 1)" in p.stderr, p.stderr
