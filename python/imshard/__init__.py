"""imshard for Python: read, pack and load imshard's packed splits at C speed.

    import imshard
    split = imshard.Split("out/train.json")       # records, decode, verify
    loader = imshard.Loader("out/train.json", batch_size=64, size=224)
    for epoch in range(10):
        loader.set_epoch(epoch)
        for images, labels in loader:             # NumPy views of the ring
            ...

Everything runs in imshard's C libraries (the extension imshard._imshard);
this module adds the Python conventions. docs/PYTHON.md is the manual.

Errors raise imshard.Error (an OSError) with the C library's one-line
message; bad arguments raise imshard.ArgumentError (an imshard.Error and a
ValueError), memory the C libraries could not allocate
imshard.OutOfMemoryError (an imshard.Error and a MemoryError).
"""
import collections.abc
import math
import numbers
import os
import sys
import warnings
from collections import namedtuple

import numpy as np

from . import _imshard
from ._args import _count, _flag, _path, _ratio, _rows, _text, _u64
from ._imshard import ArgumentError, Error, OutOfMemoryError

__all__ = ["Split", "Record", "Loader", "Batch", "pack", "convert", "bench_load",
           "decode", "partition", "distributed_rank", "Error", "ArgumentError",
           "OutOfMemoryError", "IMAGENET_MEAN", "IMAGENET_STD"]
__version__ = _imshard.version

#: ImageNet's per-channel mean and std in pixel units (0..255): the Loader's
#: defaults, the same normalisation as torchvision's ToTensor + Normalize.
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)

_said = set()


def _say_once(msg):
    if msg not in _said:
        _said.add(msg)
        warnings.warn(msg, stacklevel=3)


def distributed_rank():
    """(rank, world, source): torch.distributed when it is initialised, else
    the RANK and WORLD_SIZE environment variables (set by torchrun, also
    LOCAL_RANK), else (0, 1). torch is not imported for this: only looked at
    when the program already imported torch.distributed."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), "torch.distributed"
    if "RANK" in os.environ or "WORLD_SIZE" in os.environ:
        try:
            rank = int(os.environ.get("RANK", "0"))
            world = int(os.environ.get("WORLD_SIZE", "1"))
        except ValueError:
            raise ArgumentError("cannot read the rank from RANK=%r WORLD_SIZE=%r: not integers"
                                % (os.environ.get("RANK"), os.environ.get("WORLD_SIZE")))
        return rank, world, "RANK/WORLD_SIZE"
    return 0, 1, "default (no torch.distributed, no RANK/WORLD_SIZE)"


def partition(n, rank, world, epoch=0, seed=0, shuffle=True, pad=False, offset=0):
    """Rank `rank`'s share of epoch `epoch` over n records (the C partition
    every loader and imshard-train use) as a list of record indices; with
    `offset`, of the positions from `offset` on (an epoch continued after
    `offset` records were consumed, with any rank count)."""
    return _imshard.partition(_u64(n, "n"), _count(rank, "rank"), _count(world, "world"),
                              _u64(epoch, "epoch"), _u64(seed, "seed"),
                              _flag(shuffle, "shuffle"), _flag(pad, "pad"),
                              _u64(offset, "offset"))


def decode(data, apply_orientation=True):
    """JPEG or PNG bytes to an HxWx3 uint8 array with the C decoder (grey,
    CMYK/YCCK, palette, alpha over white, 16-bit, EXIF orientation).
    data is the image's bytes, not its path: decode(open(p, "rb").read())."""
    if isinstance(data, (str, os.PathLike)):
        raise TypeError("decode takes the image's bytes, not a path: "
                        "decode(open(%r, 'rb').read())" % (os.fspath(data),))
    px, h, w = _imshard.decode(data, _flag(apply_orientation, "apply_orientation"))
    return np.frombuffer(px, np.uint8).reshape(h, w, 3)


# ---- reading ---------------------------------------------------------------

_RecordBase = namedtuple("Record", "payload label extra encoding width height channels "
                                  "orientation orig_width orig_height original")


class Record(_RecordBase):
    """One record: payload (the stored bytes), label (int), extra (float
    labels), encoding ('jpeg', 'png', 'raw'), width/height/channels of the
    payload as decoded, orientation (EXIF, still to apply), the source's
    upright orig_width/orig_height, and original (payload is the source
    file unchanged)."""
    __slots__ = ()

    def __repr__(self):
        # the payload is an image file: its bytes would fill the screen
        # (tens of KB for one record), so the repr gives its length
        fields = ", ".join("%s=%r" % (f, getattr(self, f)) for f in self._fields[1:])
        return "Record(payload=<%d bytes>, %s)" % (len(self.payload), fields)

    @property
    def size(self):
        """(width, height) of the upright image the payload decodes to."""
        if self.orientation >= 5:
            return (self.height, self.width)
        return (self.width, self.height)


class Split:
    """A packed split (NAME.json and its shards), opened read-only.

    len(split), split[i] -> Record, split.decode(i) -> HxWx3 uint8 array,
    split.classes, split.class_counts, split.verify(). Shards are checked
    when opened; a damaged one raises imshard.Error naming it. Usable from
    several threads (calls take turns). close() or a with block unmaps.
    Pickling (or copying) reopens the split by its manifest's absolute path
    in the other process (a DataLoader worker with spawn or forkserver); a
    split changed on disk meanwhile raises imshard.Error there.
    """

    def __init__(self, manifest):
        self._c = _imshard.Split(_path(manifest, "manifest"))
        self.path = os.fspath(manifest)
        self._abspath = os.path.abspath(self.path)  # where a copy reopens it
        self.manifest = self._c.manifest()

    def _identity(self):
        # what a reopened copy must find: the manifest less the shards'
        # paths, which follow the path it was opened by; the digests tell
        # a split packed again with the same counts and sizes (another
        # order) apart
        m = dict(self.manifest)
        m["shards"] = [{k: v for k, v in sh.items() if k != "path"} for sh in m["shards"]]
        return m

    def __reduce__(self):
        # pickle and copy reopen the split by its manifest's absolute path
        # (a DataLoader worker started with spawn or forkserver, a
        # multiprocessing pool): the open shards are this process's
        try:
            len(self._c)
        except Error:
            raise _imshard.error(_imshard.EINVAL, "cannot pickle a closed split (%r)"
                                % (self.path,)) from None
        return (_reopen_split, (self._abspath, self._identity()))

    def __len__(self):
        return len(self._c)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [Record(*self._c.record(k)) for k in range(*i.indices(len(self)))]
        return Record(*self._c.record(i))

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def decode(self, i):
        """Record i as an HxWx3 uint8 RGB array, upright (EXIF applied), grey
        replicated, CMYK converted, alpha composited over white: exactly
        what the C decoder gives the packer and the loader."""
        px, h, w = self._c.decode(i)
        return np.frombuffer(px, np.uint8).reshape(h, w, 3)

    @property
    def classes(self):
        return list(self.manifest["classes"])

    @property
    def class_counts(self):
        """Records per class, label i at position i."""
        return list(self.manifest["class_counts"])

    def verify(self, decode=False):
        """Checks what `imshard verify` checks: every record's header and
        payload CRC-32C, each record against the manifest's encoding, each
        shard's digest, the class counts (and with decode=True every image
        decodes). Returns {'records': N, 'digests_checked': True} when all
        is well ('digests_checked' is False for a format 1 manifest, whose
        digests prove nothing: `imshard verify --rehash` upgrades it);
        raises imshard.Error naming the first problem otherwise (the
        exception's `problems` lists them all, the first 100 records
        named)."""
        checked, problems = self._c.verify(_flag(decode, "decode"))
        if problems:
            more = " (and %d more problems)" % (len(problems) - 1) if len(problems) > 1 else ""
            e = _imshard.error(_imshard.ECORRUPT, problems[0] + more)
            e.problems = problems
            raise e
        return {"records": checked, "digests_checked": self.manifest["format_version"] >= 2}

    def close(self):
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        """Whether close() was called (every read then raises)."""
        try:
            len(self._c)
        except Error:
            return True
        return False

    def __repr__(self):
        return "imshard.Split(%r: %d records, %d classes%s)" % (
            self.path, self.manifest["records"], len(self.manifest["classes"]),
            ", closed" if self.closed else "")


def _reopen_split(path, identity):
    # a pickled Split: the same split, or an error rather than other records
    s = Split(path)
    if s._identity() != identity:
        s.close()
        raise _imshard.error(_imshard.ECHANGED,
                             "cannot unpickle the split %r: it changed since it was pickled "
                             "(packed again or replaced: other records, classes or shards)"
                             % (path,))
    return s


# ---- loading ---------------------------------------------------------------

class Batch(tuple):
    """(images, labels), with the batch's other facts as attributes:
    indices (global record indices, uint64), padded (bool: a repeated record
    that makes rank shares equal; leave it out of metrics), epoch, step,
    wait_seconds (how long taking it blocked), address (of the images in
    the loader's ring; a copy=True batch's images are elsewhere)."""

    def __new__(cls, images, labels, **attrs):
        b = super().__new__(cls, (images, labels))
        b.__dict__.update(attrs)
        return b

    def __getnewargs__(self):
        # pickle and copy make a Batch again from (images, labels), then
        # set its attributes (tuple's own (tuple,) did not fit __new__)
        return tuple(self)

    @property
    def images(self):
        return self[0]

    @property
    def labels(self):
        return self[1]


_DTYPES = {"uint8": "uint8", "u8": "uint8", "float32": "float32", "f32": "float32",
           "float16": "float16", "f16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16"}


class Loader:
    """Augmented batches of one rank's share of a split, made by C threads
    ahead of the consumer (imshard-train's loader).

    Iterating yields Batch (images, labels) pairs: images is a NumPy array
    (N, 3, size, size) for layout 'nchw' or (N, size, size, 3) for 'nhwc',
    of dtype float32 (normalised: (pixel - mean) / std, pixels 0..255;
    mean and std default to ImageNet's), float16, uint8 (the pixels: a
    mean or std other than 0 and 1 is refused) or bfloat16 (as uint16
    bits); labels is int64. The images view the loader's ring without a
    copy.

    The rule for those views: a batch's ring slot is not reused while any
    array (or tensor) viewing it is alive, so a view can never show another
    batch's pixels. The ring has prefetch + 1 slots (`prefetch`, 1..1024,
    batches made ahead of the one a loop holds): keeping prefetch + 1 batches
    alive and asking for another raises imshard.Error (it names copy=True);
    copy=True hands out copies and never holds the ring.

    Shares: rank r of world W takes its part of each epoch's (seed, epoch)
    permutation, as imshard-train's ranks do; every rank gets len(loader)
    batches. Training (train=True) drops the records that do not divide
    among the ranks and a final partial batch (drop_last); validation
    (train=False) keeps every record once: shares are padded with repeated
    records (flagged in batch.padded) and the last batch may be short.
    rank/world default to torch.distributed when initialised, else
    RANK/WORLD_SIZE, else 0/1 (said once through warnings).

    Epochs: set_epoch(e) fixes the next pass's epoch (as DistributedSampler);
    without it each pass takes the next epoch, from `epoch`.

    Bad records are replaced by the next record of the share and counted in
    loader.stats['bad_records'] (the last one named in 'last_bad'); an
    epoch that met new ones ends with a warning giving the count so far and
    naming the last (a pass left before its end warns of none).

    close() (or a with block, or dropping the loader) stops the C threads at
    once; closing twice is harmless. Ctrl-C interrupts a waiting loader.
    close() from another thread ends a loop waiting in the loader with
    imshard.Error ("the loader was closed while waiting for a batch")
    within a twentieth of a second. Threads sharing a loader take turns; a
    pass started by one ends the pass another waits in (imshard.Error). A
    forked child cannot use its parent's loader (imshard.Error): its threads
    are not copied by fork.
    """

    def __init__(self, manifest, batch_size, size=224, *, augment="flip", train=True,
                 rank=None, world=None, threads=None, seed=0, layout="nchw",
                 dtype="float32", mean=None, std=None, prefetch=3,
                 shard_owning=False, drop_last=None, copy=False, pinned=True, epoch=0):
        if (rank is None) != (world is None):
            raise ArgumentError("give both rank and world, or neither")
        if rank is None:
            rank, world, source = distributed_rank()
            _say_once("imshard: loader rank %d of %d, from %s" % (rank, world, source))
        manifest = _path(manifest, "manifest")
        batch_size, size = _count(batch_size, "batch_size"), _count(size, "size")
        rank, world = _count(rank, "rank"), _count(world, "world")
        prefetch = _count(prefetch, "prefetch")
        augment, layout = _text(augment, "augment", True), _text(layout, "layout")
        if _text(dtype, "dtype") not in _DTYPES:
            raise ArgumentError("dtype must be float32, float16, bfloat16 or uint8, got %r" % (dtype,))
        self.dtype = _DTYPES[dtype]
        # uint8 samples are the pixels as they are: a mean or std given
        # with them is refused (by the C loader), not dropped, so the
        # default follows the dtype
        raw = self.dtype == "uint8"
        if mean is None:
            mean = (0, 0, 0) if raw else IMAGENET_MEAN
        if std is None:
            std = (1, 1, 1) if raw else IMAGENET_STD
        threads = 0 if threads is None else _count(threads, "threads")
        train, shard_owning = _flag(train, "train"), _flag(shard_owning, "shard_owning")
        pinned = _flag(pinned, "pinned")
        drop_last = -1 if drop_last is None else int(_flag(drop_last, "drop_last"))
        self.copy = _flag(copy, "copy")
        seed = _u64(seed, "seed")
        epoch = _u64(epoch, "epoch")
        self._c = _imshard.Loader(
            manifest, batch_size, size, augment=augment, train=train, rank=rank,
            world=world, threads=threads, seed=seed, layout=layout, dtype=self.dtype,
            mean=mean, std=std, prefetch=prefetch,
            shard_owning=shard_owning, drop_last=drop_last, pinned=pinned)
        self.info = self._c.info()
        self.manifest = os.fspath(manifest)
        self.rank, self.world = rank, world
        self.batch_size, self.size, self.layout = batch_size, size, layout
        self.train = train
        self._next_epoch = epoch
        self._bad_said = 0
        self._pass = 0  # the C loader's number of the pass epoch() last started

    def __len__(self):
        """Batches per epoch, the same on every rank."""
        return self.info["batches_per_epoch"]

    def set_epoch(self, epoch):
        """The epoch the next pass over the loader produces."""
        self._next_epoch = _u64(epoch, "epoch")

    @property
    def stats(self):
        """The loader's counters: images, batches, bad_records, last_bad,
        wait/read/decode/augment/produce seconds, pinned."""
        return self._c.stats()

    @property
    def share(self):
        """records_per_rank, padded and dropped (across ranks) per epoch."""
        return {k: self.info[k] for k in ("records_per_rank", "padded", "dropped")}

    def _wrap(self, mem):
        images = np.asarray(mem)
        if self.copy:
            images = images.copy()
        if self.dtype == "bfloat16":
            images = images.view(np.uint16)
        return images

    def _make(self, t):
        mem, labels, indices, padded, count, epoch, step, wait = t
        images, address = self._wrap(mem), mem.address
        del mem
        return Batch(images, np.frombuffer(labels, np.int32).astype(np.int64),
                     indices=np.frombuffer(indices, np.uint64),
                     padded=np.frombuffer(padded, np.uint8).astype(bool),
                     epoch=epoch, step=step, wait_seconds=wait, address=address)

    def _before_next(self):
        # imshard.torch's: a batch still being copied to a device is held
        pass

    def epoch(self, epoch):
        """An iterator over the batches of one given epoch."""
        self._pass = self._c.start_epoch(_u64(epoch, "epoch"))
        return _EpochIterator(self, epoch)

    def __iter__(self):
        e = self._next_epoch
        self._next_epoch = e + 1
        return self.epoch(e)

    def _report_bad(self):
        st = self._c.stats()
        if st["bad_records"] > self._bad_said:
            warnings.warn("imshard: %d bad records replaced so far; the last: %s"
                          % (st["bad_records"], st["last_bad"]), stacklevel=4)
            self._bad_said = st["bad_records"]

    def close(self):
        """Stops the loader's threads now. Batches still viewed stay readable;
        the ring is freed when the last is dropped. Twice is harmless."""
        c = getattr(self, "_c", None)
        if c is not None:
            c.close()

    @property
    def closed(self):
        """Whether close() was called (iterating then raises)."""
        return self._c.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def __reduce_ex__(self, protocol):
        # a copy would share the C loader (and close it when dropped); a
        # pickle cannot carry its threads and ring to another process
        raise TypeError("cannot copy or pickle an imshard.Loader: its threads and batch ring "
                        "are this process's; open another Loader with the same arguments (in "
                        "a DataLoader worker: worker_init_fn)")

    def __repr__(self):
        return ("imshard.Loader(%r, batch_size=%d, size=%d, rank %d of %d, "
                "%d batches per epoch%s)"
                % (self.manifest, self.batch_size, self.size, self.rank, self.world, len(self),
                   ", closed" if self.closed else ""))


class _EpochIterator:
    """Batches of the epoch the loader started; keeps no reference to a
    batch it handed out (a generator frame would, holding a ring slot)."""

    def __init__(self, loader, epoch):
        self._loader = loader
        self._pass = loader._pass
        self._epoch = epoch

    def __iter__(self):
        return self

    def __next__(self):
        loader = self._loader  # another thread may end this pass meanwhile
        if loader is None:
            raise StopIteration
        loader._before_next()
        # the C side checks the pass under the lock that makes its callers
        # take turns: a pass started by another thread while this one
        # waits ends this one there, and none of its batches come here
        t = loader._c.next(self._pass)
        if t is False:
            # the loader makes one pass at a time: a new one (iter() or
            # epoch()) stopped this one, whose rest would be lost unsaid
            self._loader = None
            raise _imshard.error(_imshard.EINVAL,
                                 "this pass over epoch %d was ended by a newer pass over the "
                                 "loader (iter() or epoch() again): its remaining batches are "
                                 "not made; finish a pass before starting the next"
                                 % self._epoch)
        if t is None:
            self._loader = None
            loader._report_bad()
            raise StopIteration
        return loader._make(t)


def bench_load(manifest, batch_size=32, size=224, *, epochs=0, seconds=10.0, augment=None,
               train=True, rank=0, world=1, threads=0, seed=0, layout="nchw",
               dtype="float32", mean=None, std=None, prefetch=3, shard_owning=False,
               pinned=True):
    """`imshard bench-load` in-process: the same C measuring loop
    (aug_bench_run), no Python per batch. Defaults as the command's (mean 0,
    std 1). Returns a dict: images, batches, seconds, images_per_s, epochs,
    stall_fraction, batches_per_epoch, records_per_rank, padded, dropped,
    threads, stats."""
    manifest = _path(manifest, "manifest")
    batch_size, size = _count(batch_size, "batch_size"), _count(size, "size")
    rank, world = _count(rank, "rank"), _count(world, "world")
    threads, prefetch = _count(threads, "threads"), _count(prefetch, "prefetch")
    epochs = _count(epochs, "epochs")
    augment, layout = _text(augment, "augment", True), _text(layout, "layout")
    dtype = _text(dtype, "dtype")
    seed = _u64(seed, "seed")  # as --seed; the C call would wrap -1
    # as --seconds takes it: a finite number (inf measured for ever, and
    # NaN was refused as "negative")
    if (isinstance(seconds, bool) or not isinstance(seconds, numbers.Real)
            or not math.isfinite(seconds) or seconds < 0):
        raise ArgumentError("seconds must be a finite number >= 0, got %r" % (seconds,))
    # as the command refuses --seconds 0 without --epochs (this ran for
    # 10 s, a limit the caller had just asked not to have)
    if seconds == 0 and epochs == 0:
        raise ArgumentError("seconds=0 (no time limit) needs epochs")
    return _imshard.bench_load(manifest, batch_size, size, augment=augment,
                               train=_flag(train, "train"), rank=rank, world=world,
                               threads=threads, seed=seed, layout=layout,
                               dtype=_DTYPES.get(dtype, dtype), mean=mean, std=std,
                               prefetch=prefetch,
                               shard_owning=_flag(shard_owning, "shard_owning"),
                               pinned=_flag(pinned, "pinned"), epochs=epochs, seconds=seconds)


# ---- packing ---------------------------------------------------------------

_PACK_OPTIONS = ("encoding", "shards", "shard_size", "resize", "max_size", "center_crop",
                 "quality", "threads", "max_errors", "check_decode", "force")


def _pack_kwargs(options):
    unknown = sorted(set(options) - set(_PACK_OPTIONS))
    if unknown:
        raise ArgumentError("unknown pack option %s (known: %s)"
                            % (", ".join(unknown), ", ".join(_PACK_OPTIONS)))
    kw = {k: v for k, v in options.items() if v is not None}  # None: not given
    # numbers checked here for their type, naming the option (the C call's
    # conversion raised TypeError or OverflowError naming none), and in C
    # for their bounds
    for k in ("shards", "resize", "max_size", "quality", "threads"):
        if k in kw:
            kw[k] = _count(kw[k], k)
    kw["max_errors"] = kw.get("max_errors", -1)
    kw["shard_size"] = kw.get("shard_size", 0)
    for k, what in (("max_errors", "an integer >= -1 (-1: never stop)"),
                    ("shard_size", "an integer from 4096 to 10**15 bytes (0: 1 GiB)")):
        v = kw[k]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not -2**63 <= v < 2**63:
            raise ArgumentError("%s must be %s, got %r" % (k, what, v))
        kw[k] = int(v)
    for k in ("center_crop", "check_decode", "force"):
        if k in kw:
            kw[k] = _flag(kw[k], k)
    if "encoding" in kw:
        _text(kw["encoding"], "encoding")
    # a pack catches SIGINT (to stop cleanly) where SIGINT raises
    # KeyboardInterrupt: on the main thread, with Python's own handler.
    # Ignored, or given to a handler of the program's, it is left alone:
    # the pack runs to its end and that handler runs after
    import signal
    import threading
    kw["catch_sigint"] = (threading.current_thread() is threading.main_thread() and
                          signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    return kw


def _tell_skipped(report, what):
    if report["skipped"]:
        warnings.warn("imshard: %s: %d files skipped, listed in '%s'"
                      % (what, report["skipped"], report["errors_file"]), stacklevel=3)
    rep = report.get("repeats")
    if rep:
        # as the command warns: kept (oversampling may be meant), but told
        which = ("row %d '%s' repeats row %d" % (rep["first"][0], rep["first_path"],
                                                   rep["first"][1])
                 if rep["first"] else "'%s'" % rep["first_path"])
        warnings.warn("imshard: %s: %d of %d rows repeat an earlier row's image%s, the first: "
                      "%s; each is packed as often as it is listed"
                      % (what, rep["rows"], report["listed"],
                         " (%d with another label)" % rep["relabelled"] if rep["relabelled"]
                         else "", which), stacklevel=3)
    if report["shards_left_out"]:
        asked = report["shards"] + report["shards_left_out"]
        warnings.warn("imshard: %s: wrote %d of the %d shards asked for (shards=%d): the rows of "
                      "the other %d were all skipped" % (what, report["shards"], asked, asked,
                                                         report["shards_left_out"]), stacklevel=3)


_ORDERS = {"auto": 0, "list": 1, "shuffled": 2}  # pack_order


def pack(list_or_rows, root, out, *, classes=None, max_label=None, shuffle=False, seed=None,
         order=None, **options):
    """Packs images into a split, as `imshard pack LIST ROOT -o OUT`.

    list_or_rows: an im2rec .lst path (its PREFIX.classes is read when
    present; one that cannot be read raises), or rows (label, path),
    (index, label, path) or (index, label, extras, path) with paths
    relative to root. out: OUTDIR/NAME (writes
    NAME.json and NAME-*.mdb). classes: class names (label i = classes[i]).
    options: encoding ('keep', 'jpeg', 'png', 'raw'), shards, shard_size,
    resize, max_size, center_crop, quality, threads, max_errors,
    check_decode, force: the command's flags, checked the same way.
    max_label: as --max-label N, labels up to N for a sparse label space
    (by default labels without class names stay below 1024 or 16 times
    the number of distinct labels, whichever is larger).
    shuffle=True shuffles the rows with seed (0 to 2**64 - 1, default 0;
    given without shuffle it is refused), as --shuffle --seed S. order
    says what the manifest records ('shuffled', 'list' or 'auto', the
    default: from the rows), as --order.

    Returns the report (listed, packed, skipped, bytes_in, bytes_out,
    shards, shards_left_out, seconds, manifest, errors_file, skipped_files:
    [(row, path, why)], order: 'shuffled' or 'list' as the manifest
    records it, order_why: why, when inferred from the rows; repeats: None,
    or for rows naming an image an earlier row names {rows, relabelled:
    those with another label, first: (row, row it repeats), None after a
    shuffle, first_path}). Skipped files, rows that repeat another's image
    (each packed as often as it is listed), and shards asked for
    (shards=N) that were left out because all their rows were skipped,
    are also reported through warnings.
    """
    root = _path(root, "root")
    out = os.fsdecode(_path(out, "out"))  # str, bytes or os.PathLike, as every path here
    if out.endswith(".json"):
        out = out[:-5]
    out_dir, name = os.path.split(out)
    if not name:
        raise ArgumentError("out needs OUTDIR/NAME, e.g. out/train (got %r)" % (out,))
    if isinstance(classes, (str, bytes)):
        # a str is a sequence too: "cat" would be the classes 'c', 'a', 't'
        raise ArgumentError("classes must be a list of names (label i = classes[i]), "
                            "not one string: %r" % (classes,))
    if isinstance(classes, (collections.abc.Set, collections.abc.Mapping)):
        # label i is the i-th name: a set iterates in hash order, and a
        # dict {name: label} in insertion order, whatever its labels say
        # ({"dog": 1, "cat": 0} named label 0 'dog'), each without a word
        raise ArgumentError("classes must be a list of names in label order (label i = "
                            "classes[i]), not a %s, whose order is not the labels': %r"
                            % (type(classes).__name__, classes))
    kw = _pack_kwargs(options)
    shuffle = _flag(shuffle, "shuffle")
    if max_label is not None:
        if (isinstance(max_label, bool) or not isinstance(max_label, numbers.Integral)
                or not 0 <= max_label <= 1048575):
            raise ArgumentError("max_label must be from 0 to 1048575, got %r" % (max_label,))
        kw["max_label"] = int(max_label)
    # as --shuffle, --seed S and --order ORDER, refused as the command
    # refuses them
    if order is not None and (not isinstance(order, str) or order not in _ORDERS):
        raise ArgumentError("order must be auto, list or shuffled, got %r" % (order,))
    if seed is not None and not shuffle:
        raise ArgumentError("seed seeds shuffle, which is not given: pass shuffle=True or "
                            "drop seed")
    if shuffle and order == "list":
        raise ArgumentError("shuffle=True shuffles the rows: order='list' contradicts it")
    kw["shuffle"] = shuffle
    kw["seed"] = 0 if seed is None else _u64(seed, "seed")
    kw["order"] = _ORDERS[order or "auto"]
    if isinstance(list_or_rows, (str, bytes, os.PathLike)):
        rep = _imshard.pack(_path(list_or_rows, "list_or_rows"), None, classes, root, out_dir or ".", name, **kw)
    else:
        rep = _imshard.pack(None, _rows(list_or_rows), classes, root, out_dir or ".", name, **kw)
    _tell_skipped(rep, "pack")
    return rep


# options only some datasets take, as `imshard convert` checks them
_ONLY_FOR = (("val_ratio", "folder,caltech256,fruits"), ("test_ratio", "folder"),
             ("no_clutter", "caltech256"), ("label", "inat2017"), ("classes", "inat2017"),
             ("recursive", "folder"), ("exts", "folder"))


def convert(dataset, root, out, *, val_ratio=None, test_ratio=0.0, no_clutter=False,
            label=None, classes=None, recursive=False, exts=None, seed=0,
            per_class_train=None, per_class_val=None, per_class_test=None,
            train_total=None, val_total=None, allow_short=False, shuffle=True, **options):
    """Converts a dataset as downloaded into packed splits, as `imshard
    convert DATASET ROOT -o OUT`: OUT/<split>.json with shards,
    OUT/<split>.lst and OUT/classes.txt. dataset: folder, caltech256,
    fruits, inat2017, cifar10 or imagenet (docs/datasets.md). The options
    are the command's (per_class_train=N for --per-class-train N, ...) plus
    the pack options; classes is inat2017's list of class names to keep.
    Records are shuffled with seed (shuffle=False keeps the dataset's
    order, as --no-shuffle), and OUT's splits are replaced all or nothing,
    as the command does (docs/datasets.md).

    Returns {'splits': {name: pack report}, 'notes': [...adapter notes],
    'short': {split: [(class, taken, wanted)]}}; notes and short classes are
    also reported through warnings.
    """
    dataset, exts = _text(dataset, "dataset"), _text(exts, "exts", True)
    root, out = _path(root, "root"), _path(out, "out")
    no_clutter, recursive = _flag(no_clutter, "no_clutter"), _flag(recursive, "recursive")
    allow_short, shuffle = _flag(allow_short, "allow_short"), _flag(shuffle, "shuffle")
    given = {"val_ratio": val_ratio is not None, "test_ratio": bool(test_ratio),
             "no_clutter": no_clutter, "label": label is not None,
             "classes": classes is not None, "recursive": recursive,
             "exts": exts is not None}
    for opt, datasets in _ONLY_FOR:
        if given[opt] and dataset in [d for d in _ONLY_DATASETS] and dataset not in datasets.split(","):
            raise ArgumentError("%s applies to %s, not to %s" % (opt, datasets, dataset))
    if label is not None and label not in ("species", "supercategory"):
        raise ArgumentError("label must be species or supercategory, got %r" % (label,))
    # None is the C side's -1, "not given": a negative ratio given must not
    # pass for it (caltech256 took -0.5 as its default 0.2, folder as 0)
    if val_ratio is not None:
        _ratio(val_ratio, "val_ratio")
    _ratio(test_ratio, "test_ratio")  # the C side took a negative one for 0
    if val_ratio is not None and test_ratio and val_ratio + test_ratio >= 1:
        # the words of the command and of ds_check_split_ratios
        raise ArgumentError("val_ratio plus test_ratio must be below 1, got %r + %r"
                            % (val_ratio, test_ratio))
    seed = _u64(seed, "seed")  # the command's --seed; the C call would wrap -1
    # each named, as the command's --per-class-train N ... take 1..2**31 - 1
    # (0 said "subset size for 'train'", 1.5 a TypeError, True took 1)
    sizes = {}
    for k, v in (("per_class_train", per_class_train), ("per_class_val", per_class_val),
                 ("per_class_test", per_class_test), ("train_total", train_total),
                 ("val_total", val_total)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 1 <= v < 2**31:
            raise ArgumentError("%s must be an integer from 1 to 2**31 - 1, got %r" % (k, v))
        sizes[k] = int(v)
    for split in ("train", "val"):
        if "per_class_" + split in sizes and split + "_total" in sizes:
            raise ArgumentError("give per_class_%s or %s_total, not both" % (split, split))
    per_class = {k[10:]: v for k, v in sizes.items() if k.startswith("per_class_")}
    totals = {k[:-6]: v for k, v in sizes.items() if k.endswith("_total")}
    if isinstance(classes, (list, tuple)):
        # the C side takes the command's comma-separated list: a name
        # holding a comma would come out as two names
        for name in classes:
            if not isinstance(name, str) or "," in name or "\0" in name:
                raise ArgumentError("classes must be names without a comma or NUL, got %r"
                                    % (name,))
        classes = ",".join(classes)
    elif classes is not None:
        # a str is the command's comma-separated list
        if not isinstance(classes, str):
            raise ArgumentError("classes must be a list of names, got %r" % (classes,))
        _text(classes, "classes")
    kw = _pack_kwargs(options)
    res = _imshard.convert(dataset, root, out, val_ratio=-1.0 if val_ratio is None else val_ratio,
                           test_ratio=test_ratio, no_clutter=no_clutter, label=label,
                           keep_classes=classes, recursive=recursive, exts=exts,
                           seed=seed, per_class=per_class, totals=totals,
                           allow_short=allow_short, shuffle=shuffle, **kw)
    for note in res["notes"]:
        warnings.warn("imshard: convert: note: " + note, stacklevel=2)
    for split, rows in res["short"].items():
        if rows:
            warnings.warn("imshard: convert: %s: %d classes had fewer images than wanted and "
                          "gave all they had: %s" % (split, len(rows), ", ".join(
                              "'%s' %d of %d" % r for r in rows)), stacklevel=2)
    for split, rep in res["splits"].items():
        _tell_skipped(rep, "convert " + split)
    return res


_ONLY_DATASETS = ("folder", "caltech256", "fruits", "inat2017", "cifar10", "imagenet")
