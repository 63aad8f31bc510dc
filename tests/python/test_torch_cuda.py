"""imshard.torch on a CUDA device: what a loop copies with
.cuda(non_blocking=True) is the batch the loader made, though the copy
runs after the loop has dropped its view of the ring slot. Skipped (not
passed) without torch or a CUDA device; IMSHARD_REQUIRE_GPU=1 turns the
skip into a failure, as for the C tests of the gpu label."""
import os

import numpy as np
import pytest

import imshard

REQUIRE = os.environ.get("IMSHARD_REQUIRE_GPU") == "1"


def _torch():
    try:
        import torch
    except ImportError:
        if REQUIRE:
            pytest.fail("IMSHARD_REQUIRE_GPU=1, and torch does not import")
        pytest.skip("torch is not installed")
    if not torch.cuda.is_available():
        if REQUIRE:
            pytest.fail("IMSHARD_REQUIRE_GPU=1, and torch sees no CUDA device")
        pytest.skip("no CUDA device")
    return torch


KW = dict(rank=0, world=1, seed=7, augment=None, threads=2)


def _expected(manifest, epochs, batch, size):
    ref = imshard.Loader(manifest, batch, size, copy=True, **KW)
    out = [b[0] for e in range(epochs) for b in ref.epoch(e)]
    ref.close()
    return out


@pytest.mark.parametrize("prefetch", [1, 3])
def test_non_blocking_copies_read_their_own_batch(sample, prefetch):
    # before: the loop's view died as it rebound `images`, the slot went
    # back to the loader's threads, and they refilled it with a later
    # batch before the queued copy read it (the device's queue held up
    # by a sleep, as a training step would)
    torch = _torch()
    from imshard.torch import Loader
    epochs, batch, size = 4, 8, 64
    want = _expected(sample["train"], epochs, batch, size)
    loader = Loader(sample["train"], batch, size, prefetch=prefetch, **KW)
    got = []
    for e in range(epochs):
        for images, labels in loader.epoch(e):
            torch.cuda._sleep(5_000_000)  # a few milliseconds queued ahead of the copy
            images = images.cuda(non_blocking=True)
            got.append(images)
        assert loader.pinned
    torch.cuda.synchronize()
    assert len(got) == len(want) > 2 * (prefetch + 1)
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if not np.array_equal(g.cpu().numpy(), w)]
    assert not bad, "batches %s of %d differ from the loader's" % (bad, len(want))
    loader.close()


def test_a_held_batch_goes_back_at_close(sample):
    # the batch held for a copy in flight is the loader's, not the loop's:
    # close() gives it back (after the device's queue), so the ring is
    # freed with the last view the caller holds
    torch = _torch()
    from imshard.torch import Loader
    loader = Loader(sample["train"], 8, 32, prefetch=2, **KW)
    it = iter(loader)
    b = next(it)
    x = b[0].cuda(non_blocking=True)
    del b
    assert loader._c.exported == 1, "the batch under the copy is held"
    next(it)  # the copy of the first batch is ordered before this request
    torch.cuda.synchronize()
    loader.close()
    assert loader._c.exported == 0
    assert x.shape == (8, 3, 32, 32)
