"""imshard's stateless calls (python/src/module.c): partition, the rank
share every loader takes, as the C partition makes it; and the exceptions
the module defines for the libraries' failures."""
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

import imshard
from conftest import run


def test_partition_offset_continues_the_order():
    # an epoch of 50 records whose first 12 positions were consumed (by 1
    # rank of 12, or 2 ranks of 6), continued at 3 ranks: the global order
    # from position 12 on, strided, each record once
    order = imshard.partition(50, 0, 1, 3, 9)
    rest = [imshard.partition(50, r, 3, 3, 9, offset=12) for r in range(3)]
    for r in range(3):
        assert rest[r] == [order[12 + r + 3 * k] for k in range(len(rest[r]))]
    first = [i for r in range(2) for i in imshard.partition(50, r, 2, 3, 9)[:6]]
    seen = first + [i for s in rest for i in s]
    assert len(seen) == len(set(seen)) == 12 + 3 * (38 // 3)
    with pytest.raises(imshard.ArgumentError):
        imshard.partition(50, 0, 1, offset=50)


def test_partition_of_an_impossible_size_says_so():
    # before: partition(2**40, 0, 1) raised a MemoryError with no message,
    # and 2**62 records wrapped the byte count past 2**64 and wrote past
    # the allocation (a crash)
    for n, kw in ((2**40, {}), (2**62, {}), (2**64 - 1, dict(shuffle=False)),
                  (2**40, dict(world=2**20, rank=3))):
        world, rank = kw.pop("world", 1), kw.pop("rank", 0)
        with pytest.raises(imshard.OutOfMemoryError,
                           match="cannot partition %d records: .* needs [0-9.]+ [TPEZ]iB" % n) as e:
            imshard.partition(n, rank, world, **kw)
        # the loader's and pack's kind (before: a plain MemoryError,
        # which `except imshard.Error` let pass)
        assert isinstance(e.value, MemoryError) and isinstance(e.value, imshard.Error)
        assert e.value.kind == "out of memory", e.value.kind


def test_partition_releases_the_gil():
    # the shuffle of 20 million records (the share is 20 thousand: the
    # list is quick to make) runs while this thread goes on; before, it
    # held the GIL throughout, and this thread stood still from the
    # worker's start to its end. Measured against the worker's own time,
    # not a time alone, so that a busy machine (which slows both) does not
    # make it fail.
    import threading
    n, world = 20_000_000, 1000
    done, gaps, span = threading.Event(), [], []
    result = []

    def work():
        t0 = time.perf_counter()
        result.append(imshard.partition(n, 0, world, seed=1))
        span.append(time.perf_counter() - t0)
        done.set()

    th = threading.Thread(target=work)
    last = time.perf_counter()
    th.start()
    while not done.is_set():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
        time.sleep(0.001)
    th.join()
    assert len(result[0]) == n // world
    assert len(gaps) >= 3 and max(gaps) < 0.75 * span[0], \
        "the main thread stood still %.3f s of the %.3f s partition took (%d turns)" % (
            max(gaps), span[0], len(gaps))


FAKE_RAM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

/* sysconf, except that the machine has $FAKE_RAM_MIB MiB of memory */
long sysconf(int name)
{
	static long (*real)(int);
	if (!real)
		real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
	const char *m = getenv("FAKE_RAM_MIB");
	if (name == _SC_PHYS_PAGES && m && *m)
		return atol(m) * 1048576L / real(_SC_PAGESIZE);
	return real(name);
}
"""


def test_partition_counts_the_list_it_returns(tmp_path):
    # the up-front memory check counted 8 bytes per index of the list
    # returned, whose int objects take 32 more each: a share 2 to 3 times
    # what the machine holds was started (and could end in the OOM killer
    # instead of a MemoryError). Here the machine is said to have 64 MiB
    import shutil
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("the sanitizer's runtime comes first: sysconf cannot be replaced")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the small machine")
    (tmp_path / "ram.c").write_text(FAKE_RAM)
    so = tmp_path / "ram.so"
    run(cc, "-shared", "-fPIC", "-o", so, tmp_path / "ram.c", "-ldl")
    script = tmp_path / "p.py"
    script.write_text(textwrap.dedent("""
        import imshard
        for n, world, shuffle in ((2_000_000, 1, False), (1_500_000, 1, True),
                                  (2_000_000, 2, False), (500_000, 1, True)):
            try:
                print(len(imshard.partition(n, 0, world, shuffle=shuffle)))
            except MemoryError as e:
                print("MemoryError:", e)
    """))
    env = dict(os.environ, LD_PRELOAD=str(so), FAKE_RAM_MIB="64")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("MemoryError: cannot partition 2000000 records: rank 0's share "
                               "of 2000000 indices needs 91.6 MiB or more (out of memory: the "
                               "machine has 64.0 MiB)"), lines
    assert lines[1].startswith("MemoryError: cannot partition 1500000 records"), lines
    assert lines[2:] == ["1000000", "500000"], lines


def test_every_error_carries_its_code_and_kind(sample, copy_split):
    # imshard.Error's `code` and `kind` (docs/PYTHON.md) were set only on
    # the libraries' failures: an ArgumentError of the Python layer, a
    # closed Split or Loader, a pass ended by another, verify's finding,
    # a closed split pickled... had none (AttributeError in the handler)
    import pickle

    from imshard import _imshard

    got = []

    def catch(f):
        with pytest.raises(imshard.Error) as e:
            f()
        got.append(e.value)
        return e.value

    library_arg = catch(lambda: imshard.Loader(sample["val"], 2, 8, rank=0, world=1,
                                               layout="chw"))
    catch(lambda: imshard.Loader(sample["val"], "2", 8, rank=0, world=1))
    catch(lambda: imshard.partition(-1, 0, 1))
    catch(lambda: imshard.Split(sample["val"] + ".missing"))
    s = imshard.Split(sample["val"])
    s.close()
    for f in (lambda: s[0], lambda: s.decode(0), lambda: s.verify(), lambda: pickle.dumps(s)):
        catch(f)
    loader = imshard.Loader(sample["val"], 2, 8, rank=0, world=1, threads=1)
    first, second = iter(loader), iter(loader)
    catch(lambda: next(first))
    del second
    loader.close()
    catch(lambda: iter(loader))
    catch(lambda: loader.stats)
    m = copy_split(sample["train"])
    shard = os.path.join(os.path.dirname(m), "train-00000-of-00003.mdb")
    with imshard.Split(m) as t:
        piece = t[5].payload[-300:-268]
    data = bytearray(open(shard, "rb").read())
    data[data.find(piece)] ^= 0x55
    open(shard, "wb").write(bytes(data))
    bad = catch(lambda: imshard.Split(m).verify())
    assert bad.problems
    for e in got:
        assert isinstance(e.code, int) and e.code < 0, (e, vars(e))
        assert isinstance(e.kind, str) and e.kind, (e, vars(e))
        if isinstance(e, imshard.ArgumentError):  # the Python layer's as the library's
            assert (e.code, e.kind) == (library_arg.code, library_arg.kind), e
    assert library_arg.code == _imshard.EINVAL
    assert bad.code == _imshard.ECORRUPT


def test_memory_the_libraries_cannot_allocate_is_a_memory_error(sample, tmp_path):
    # before: a loader whose ring could not be allocated raised
    # imshard.Error (an OSError), which `except MemoryError` let pass. Here
    # the ring of 64 samples of 4096 x 4096 float32 pixels (12 GiB a batch)
    # cannot be mapped under an address-space limit 1 GiB above what the
    # child has mapped (a sanitizer's runtime reserves terabytes first),
    # while Python's own small allocations still can be
    script = tmp_path / "oom.py"
    script.write_text(textwrap.dedent("""
        import resource, sys, imshard
        from imshard import _imshard
        vm = [int(l.split()[1]) * 1024 for l in open("/proc/self/status")
              if l.startswith("VmSize:")][0]
        resource.setrlimit(resource.RLIMIT_AS,
                           (vm + (1 << 30), resource.getrlimit(resource.RLIMIT_AS)[1]))
        for f in (lambda: imshard.Loader(sys.argv[1], 64, 4096, rank=0, world=1, threads=1),
                  lambda: imshard.bench_load(sys.argv[1], 64, 4096, threads=1, epochs=1,
                                             seconds=0)):
            try:
                f()
                print("no error")
            except MemoryError as e:
                print(type(e).__name__, isinstance(e, imshard.Error),
                      e.code == _imshard.ENOMEM, e.kind, "|", e)
            except Exception as e:
                print("not a MemoryError:", type(e).__name__, e)
    """))
    env = dict(os.environ)
    # a sanitizer's allocator aborts where malloc would return NULL
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":allocator_may_return_null=1").lstrip(":")
    p = subprocess.run([sys.executable, str(script), sample["train"]], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2, p.stdout + p.stderr
    for line in lines:
        assert re.match(r"OutOfMemoryError True True out of memory \| cannot load '.*train\.json': "
                        r"out of memory for \d+ batches of \d+ bytes \(a smaller batch, image "
                        r"size or prefetch needs less\)$", line), line
