"""imshard.torch: the imshard Loader yielding torch.Tensor batches.

    from imshard.torch import Loader
    loader = Loader("out/train.json", batch_size=64, size=224)   # rank from torchrun
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:
            images = images.cuda(non_blocking=True)
            ...

Tensors view the loader's ring without a copy (torch.from_numpy on the
NumPy view), under the same rule as imshard.Loader: a batch's ring slot is
reused only once no tensor or array views it. bfloat16 batches come as
torch.bfloat16. When CUDA is available the ring is page-locked so
.cuda(non_blocking=True) copies overlap: each ring buffer is registered
with cudaHostRegister through torch as it is first seen (and unregistered
on close, in the process that registered it: a forked child's close()
leaves the parent's registrations alone, as the C loader there is only
forgotten); the C loader itself knows no device.

A non_blocking copy from page-locked memory is only queued: it reads the
batch when the stream reaches it, after the work queued before it. The
loop that drops its view of the batch as it rebinds `images` would give
the slot back to the loader's threads under a copy in flight, which
would then carry another batch's pixels. So the loader holds the batch
it last handed out (the copy's source) past the loop's next request: it
records a CUDA event on the stream current at that request (where the
loop queued the copy) and gives the slot back once the event has
passed, waiting for it only when a second batch would be held; a copy
queued on another stream is the caller's to order (record its event on
the current stream, or torch.cuda.current_stream().wait_stream(s))
before asking for the next batch. So is one made by a thread that shares
the loader with others: the hold covers the batch handed out last,
whichever thread took it, so such a thread synchronises its copy before
another may ask (or each thread uses a loader of its own).
"""
import collections
import os

import torch

import imshard

__all__ = ["Loader"]


class Loader(imshard.Loader):
    """imshard.Loader with torch.Tensor batches: (images, labels) where
    labels is int64 (for cross_entropy). Takes imshard.Loader's arguments;
    rank/world default to torch.distributed's when it is initialised."""

    def __init__(self, *args, **kw):
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.init()  # loads the CUDA runtime the C loader looks for
        super().__init__(*args, **kw)
        self._cuda = cuda and kw.get("pinned", True)
        self._registered = {}
        self._pid = os.getpid()  # whose CUDA context holds the registrations
        self._last = None  # the batch handed out last: a copy may read it
        self._in_flight = collections.deque()  # (images, event) of copies queued

    @property
    def pinned(self):
        """Whether batches are page-locked (registered with CUDA). False in
        a forked child and once closed: page-locking belongs to the CUDA
        context that registered the ring, which a child does not have (its
        copies of the batches are plain memory), and close() unregisters."""
        # stats raises in a forked child (the loader's threads are the
        # parent's), so this is answered before asking it
        if os.getpid() != self._pid or self.closed:
            return False
        return bool(self.stats["pinned"] or self._registered)

    def _pin(self, mem):
        if not self._cuda or self.stats["pinned"] or mem.address in self._registered:
            return
        # the batch's memory holds batch_capacity samples: fewer than
        # batch_size when the batch is larger than the rank's share, and
        # registering past the memory would fail or pin another's pages
        nbytes = self.info["sample_bytes"] * self.info["batch_capacity"]
        rc = torch.cuda.cudart().cudaHostRegister(mem.address, nbytes, 0)
        if int(rc) != 0:
            imshard._say_once("imshard: cannot page-lock the loader's batches "
                              "(cudaHostRegister: %s); copies will not overlap" % (rc,))
            self._cuda = False
            return
        self._registered[mem.address] = nbytes

    def _wrap(self, mem):
        self._pin(mem)
        images = super()._wrap(mem)
        t = torch.from_numpy(images)
        if self.dtype == "bfloat16":
            t = t.view(torch.bfloat16)
        return t

    def _before_next(self):
        # the previous batch's copies, if any, were queued on the current
        # stream before this request: an event after them says when its
        # slot can be refilled
        if not self._cuda or os.getpid() != self._pid:
            return
        if self._last is not None:
            ev = torch.cuda.Event()
            ev.record()
            self._in_flight.append((self._last, ev))
            self._last = None
        while self._in_flight and self._in_flight[0][1].query():
            self._in_flight.popleft()
        # one batch held beyond the loop's own: the ring keeps prefetch - 1
        # batches made ahead, and a device behind by more makes the host wait
        while len(self._in_flight) > 1:
            # waited for while the entry still holds the batch: popped
            # first, the slot would go back before the wait
            self._in_flight[0][1].synchronize()
            self._in_flight.popleft()

    def _make(self, t):
        b = super()._make(t)
        if self._cuda and os.getpid() == self._pid:
            self._last = b[0]
        return imshard.Batch(b[0], torch.from_numpy(b[1]), indices=b.indices,
                             padded=torch.from_numpy(b.padded), epoch=b.epoch, step=b.step,
                             wait_seconds=b.wait_seconds, address=b.address)

    def close(self):
        reg = getattr(self, "_registered", None)
        if reg:
            # a forked child has no CUDA context of its own (CUDA does not
            # survive fork): the registrations are the parent's, which
            # unregisters them; calling CUDA here fails or hangs
            if os.getpid() == self._pid:
                # a .cuda(non_blocking=True) of the last batches may
                # still read these pages: unpinned under a copy in
                # flight, the copy's source is undefined
                torch.cuda.synchronize()
                for addr in list(reg):
                    torch.cuda.cudart().cudaHostUnregister(addr)
            reg.clear()
        # the batches held for copies in flight are given back (synchronised
        # above); a forked child keeps its copy of the events, which it
        # cannot destroy without a CUDA context
        self._last = None
        if getattr(self, "_in_flight", None) is not None and os.getpid() == self._pid:
            self._in_flight.clear()
        super().close()
